"""Shared helpers for the numerical tests (NumPy is the reference)."""
from __future__ import annotations

import pathlib
import re
import sys

import numpy as np
from tvm import tirx

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "rnn"
sys.path.insert(0, str(EXAMPLES))
import reference  # noqa: E402  (examples/rnn/reference.py)

ELMAN = EXAMPLES / "elman.tc"
QRNN = EXAMPLES / "qrnn.tc"


def rand(rng: np.random.Generator, *shape: int, dtype=np.float32) -> np.ndarray:
    scale = 1.0 / np.sqrt(shape[-2]) if len(shape) > 1 and shape[-2] > 0 else 1.0
    return (rng.standard_normal(shape) * scale).astype(dtype)


def elman_inputs(rng, T, B, Ci, Co):
    return [rand(rng, T, B, Ci), rand(rng, B, Co), rand(rng, Ci, Co), rand(rng, Co, Co)]


def qrnn_inputs(rng, T, B, C, H):
    return [rand(rng, T, B, C), rand(rng, 3, C, H), rand(rng, 3, C, H), rand(rng, 3, H)]


# A softmax as users write it, with a temporary as large as the output
LAYERNORM = """
def layernorm(float(N,C) x, float(C) gamma, float(C) beta) -> (y) {
  mean(n) +=! x(n, c) / C
  d(n, c) = x(n, c) - mean(n)
  var(n) +=! d(n, c) * d(n, c) / C
  y(n, c) = d(n, c) * rsqrt(var(n) + 1e-5) * gamma(c) + beta(c)
}
"""

SOFTMAX = """
def softmax(float(N,C) x) -> (y) {
  mx(n) max=! x(n, c)
  e(n, c) = exp(x(n, c) - mx(n))
  s(n) +=! e(n, c)
  y(n, c) = e(n, c) / s(n)
}
"""


def conv2d_valid(I, W):
    """NumPy: a valid 2-D convolution (no padding, stride 1), ``I`` (N, C, H, W) by ``W`` (M, C, KH, KW)."""
    N, C, H, Wd = I.shape
    M, _, KH, KW = W.shape
    out = np.zeros((N, M, H - KH + 1, Wd - KW + 1))
    for kh in range(KH):
        for kw in range(KW):
            out += np.einsum("nchw,mc->nmhw", I[:, :, kh:kh + H - KH + 1, kw:kw + Wd - KW + 1], W[:, :, kh, kw])
    return out


def parallel_inside_serial(stmt, serial: tuple = (), allowed=("t",)) -> list[tuple[str, str]]:
    """(serial loop, parallel loop) for every parallel loop nested inside a
    serial loop, but for the program's sequential loops (``allowed``)."""
    out = []
    if isinstance(stmt, tirx.For):
        name = stmt.loop_var.name
        if stmt.kind == tirx.ForKind.PARALLEL and serial:
            out.append((serial[-1], name))
        if stmt.kind == tirx.ForKind.SERIAL and name not in allowed:
            serial = serial + (name,)
        return out + parallel_inside_serial(stmt.body, serial, allowed)
    if isinstance(stmt, tirx.SeqStmt):
        return [x for s in stmt.seq for x in parallel_inside_serial(s, serial, allowed)]
    if isinstance(stmt, tirx.IfThenElse):
        return parallel_inside_serial(stmt.then_case, serial, allowed) + (
            parallel_inside_serial(stmt.else_case, serial, allowed) if stmt.else_case is not None else [])
    body = getattr(stmt, "body", None)
    return parallel_inside_serial(body, serial, allowed) if isinstance(body, tirx.Stmt) else []


def parallel_regions(script: str) -> int:
    """The parallel loops of a kernel's TIR text but for the copies of inputs
    packed whole once per call before the program (``W_whole``, filled by a
    parallel loop ``W_o``; codegen/panels.py ``pack_whole``)."""
    packs = sum(1 for m in re.finditer(r"for (\w+)_o in T\.parallel", script) if f"{m.group(1)}_whole" in script)
    return script.count("T.parallel") - packs


# An LSTM's steps with the input gates given (the recurrent GEMM per gate,
# weights in (in, out) layout), as test_wide_bands.py and test_prepack.py use it
LSTM_GATES_GIVEN = """
def cell(float(T,4,B,H) G, float(B,H) h0, float(B,H) c0, float(4,H,H) Wh) -> (h, c) {
  hp(b, j) = h0(b, j)
  cp(b, j) = c0(b, j)
  for t in T {
    gates(g, b, j) = G(t, g, b, j)
    gates(g, b, j) += hp(b, k) * Wh(g, k, j)
    c(t, b, j) = sigmoid(gates(1, b, j)) * cp(b, j) + sigmoid(gates(0, b, j)) * tanh(gates(2, b, j))
    h(t, b, j) = sigmoid(gates(3, b, j)) * tanh(c(t, b, j))
    hp(b, j) = h(t, b, j)
    cp(b, j) = c(t, b, j)
  }
}
"""


def lstm_gates_given_reference(G, h0, c0, Wh):
    """(h, c) of LSTM_GATES_GIVEN in float64."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    G, h, c, Wh = (a.astype(np.float64) for a in (G, h0, c0, Wh))
    hs, cs = [], []
    for t in range(G.shape[0]):
        g = G[t] + np.einsum("bk,gkj->gbj", h, Wh)
        c = sig(g[1]) * c + sig(g[0]) * np.tanh(g[2])
        h = sig(g[3]) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return np.stack(hs), np.stack(cs)


def grouped_conv1d(x, w, groups):
    """NumPy's grouped 1-D convolution without padding: output channel o reads
    the input channels of group o // (O // groups)."""
    B, C, L = x.shape
    O, CG, K = w.shape
    y = np.zeros((B, O, L - K + 1))
    for o in range(O):
        g = o // (O // groups)
        for k in range(K):
            y[:, o] += np.einsum("bcl,c->bl", x[:, g * CG:(g + 1) * CG, k:k + L - K + 1], w[o, :, k])
    return y
