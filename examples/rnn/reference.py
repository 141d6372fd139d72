"""NumPy references for the RNN examples (float64 arithmetic)."""
from __future__ import annotations

import numpy as np


def elman_rnn(x, h0, i2h, h2h):
    """hidden(t) = tanh(hidden(t-1) @ h2h + x(t) @ i2h), hidden(-1) = h0."""
    h = h0.astype(np.float64)
    out = np.empty((x.shape[0],) + h0.shape)
    for t in range(x.shape[0]):
        h = np.tanh(h @ h2h + x[t].astype(np.float64) @ i2h)
        out[t] = h
    return out.astype(x.dtype)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def qrnn(x, W0, W1, bias):
    """QRNN fo-pooling with a width-2 causal window; returns (h, cell)."""
    x = x.astype(np.float64)
    T, B, _ = x.shape
    H = W0.shape[2]
    prev = np.zeros_like(x[:1][0])
    c = np.zeros((B, H))
    hs, cs = np.empty((T, B, H)), np.empty((T, B, H))
    for t in range(T):
        g = np.stack([x[t] @ W0[k] + prev @ W1[k] for k in range(3)])
        z = np.tanh(g[0] + bias[0])
        f = _sigmoid(g[1] + bias[1])
        o = _sigmoid(g[2] + bias[2])
        c = f * c + (1 - f) * z
        hs[t], cs[t] = o * c, c
        prev = x[t]
    return hs.astype(np.float32), cs.astype(np.float32)


def lstm(x, h0, c0, Wx, Wh, bias):
    """LSTM with the gates of torch.nn.LSTMCell (i, f, g, o: index 0..3 of
    Wx, Wh, bias); returns (h, c), every step's states."""
    x = x.astype(np.float64)
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    T, B = x.shape[:2]
    hs, cs = np.empty((T, B, h.shape[1])), np.empty((T, B, h.shape[1]))
    for t in range(T):
        g = np.stack([x[t] @ Wx[k] + h @ Wh[k] + bias[k] for k in range(4)])
        c = _sigmoid(g[1]) * c + _sigmoid(g[0]) * np.tanh(g[2])
        h = _sigmoid(g[3]) * np.tanh(c)
        hs[t], cs[t] = h, c
    return hs.astype(np.float32), cs.astype(np.float32)
