"""The programs of benchmarks/programs.py: each one a TC source written as a
user of README.md and docs/ writes it, its sizes (full and tiny), its inputs,
and the contenders that compute the same thing in PyTorch (the fused library
op where there is one) or NumPy.

A contender is a function of the torch tensors (``t``, the same memory as the
NumPy inputs ``a``) that returns what is compared with tcdsl's result (``pick``
selects it from tcdsl's outputs).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np


@dataclasses.dataclass
class Program:
    name: str
    kind: str
    src: str
    full: dict
    tiny: dict
    inputs: Callable[[np.random.Generator, dict], list]
    contenders: Callable[[Any, list, list, dict], dict]  # (torch, numpy inputs, torch inputs, sizes) -> {name: fn}
    pick: Callable[[Any], Any] = staticmethod(lambda r: r)
    free: tuple = ()  # free sizes passed at the call


def _w(rng, *shape):
    """Weights scaled by the fan-in (the last dimension), as an init would."""
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def _n(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _copy(torch, param, array):
    with torch.no_grad():
        param.copy_(torch.from_numpy(np.ascontiguousarray(array)))


def _nograd(torch, fn):
    def run():
        with torch.no_grad():
            return fn()
    return run


PROGRAMS: list[Program] = []


def program(**kw):
    def add(fn):
        PROGRAMS.append(Program(contenders=fn, **kw))
        return fn
    return add


# ---------------------------------------------------------------- GRU / LSTM

GRU_OUT_IN = """
# GRU, weights in PyTorch's (out, in) layout, gates r, z, n as torch.nn.GRU
def gru(float(T,B,I) x, float(B,H) h0, float(3,H,I) Wih, float(3,H,H) Whh,
        float(3,H) bih, float(3,H) bhh) -> (h) {
  for t in T {
    gi(g, b, j) +=! x(t, b, i) * Wih(g, j, i)
    if t == 0 { gh(g, b, j) +=! h0(b, k) * Whh(g, j, k) }
    else      { gh(g, b, j) +=! h(t - 1, b, k) * Whh(g, j, k) }
    r(b, j) = sigmoid(gi(0, b, j) + bih(0, j) + gh(0, b, j) + bhh(0, j))
    z(b, j) = sigmoid(gi(1, b, j) + bih(1, j) + gh(1, b, j) + bhh(1, j))
    n(b, j) = tanh(gi(2, b, j) + bih(2, j) + r(b, j) * (gh(2, b, j) + bhh(2, j)))
    if t == 0 { h(t, b, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * h0(b, j) }
    else      { h(t, b, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * h(t - 1, b, j) }
  }
}
"""


def _gru_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H), _w(rng, 3, H, I), _w(rng, 3, H, H), _w(rng, 3, H), _w(rng, 3, H)]


def _torch_gru(torch, I, H, Wih, Whh, bih, bhh, **kw):
    """nn.GRU from (out, in) weights (3, H, in)."""
    net = torch.nn.GRU(I, H, **kw)
    _copy(torch, net.weight_ih_l0, Wih.reshape(3 * H, -1))
    _copy(torch, net.weight_hh_l0, Whh.reshape(3 * H, H))
    _copy(torch, net.bias_ih_l0, bih.reshape(-1))
    _copy(torch, net.bias_hh_l0, bhh.reshape(-1))
    return net


@program(name="gru (out,in)", kind="rnn", src=GRU_OUT_IN, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=6), inputs=_gru_inputs)
def _gru(torch, a, t, s):
    net = _torch_gru(torch, s["I"], s["H"], *a[2:])
    return {"torch.nn.GRU": _nograd(torch, lambda: net(t[0], t[1][None])[0])}


GRU_SIX = """
# GRU with a weight tensor per gate, PyTorch's (out, in) layout, the previous state copied once per step
def gru(float(T,B,I) x, float(B,H) h0, float(H,I) Wr, float(H,I) Wz, float(H,I) Wn,
        float(H,H) Ur, float(H,H) Uz, float(H,H) Un) -> (h) {
  for t in T {
    if t == 0 { hp(b, k) = h0(b, k) } else { hp(b, k) = h(t - 1, b, k) }
    r(b, j) +=! x(t, b, i) * Wr(j, i)
    r(b, j) += hp(b, k) * Ur(j, k)
    z(b, j) +=! x(t, b, i) * Wz(j, i)
    z(b, j) += hp(b, k) * Uz(j, k)
    a(b, j) +=! hp(b, k) * Un(j, k)
    nn(b, j) +=! x(t, b, i) * Wn(j, i)
    h(t, b, j) = (1 - sigmoid(z(b, j))) * tanh(nn(b, j) + sigmoid(r(b, j)) * a(b, j)) + sigmoid(z(b, j)) * hp(b, j)
  }
}
"""


def _gru_six_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H)] + [_w(rng, H, I) for _ in range(3)] + [_w(rng, H, H) for _ in range(3)]


@program(name="gru, a weight per gate (out,in)", kind="rnn", src=GRU_SIX, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4), inputs=_gru_six_inputs)
def _gru_six(torch, a, t, s):
    H = s["H"]
    zeros = np.zeros((3, H), np.float32)
    net = _torch_gru(torch, s["I"], H, np.stack([a[2], a[3], a[4]]), np.stack([a[5], a[6], a[7]]), zeros, zeros)
    return {"torch.nn.GRU": _nograd(torch, lambda: net(t[0], t[1][None])[0])}


GRU_IN_OUT = """
# GRU, weights in (in, out) layout; the state carried in hp
def gru(float(T,B,I) x, float(B,H) h0, float(3,I,H) Wx, float(3,H,H) Wh,
        float(3,H) bx, float(3,H) bh) -> (h) {
  hp(b, j) = h0(b, j)
  for t in T {
    gx(g, b, j) +=! x(t, b, i) * Wx(g, i, j)
    gh(g, b, j) +=! hp(b, k) * Wh(g, k, j)
    r(b, j) = sigmoid(gx(0, b, j) + bx(0, j) + gh(0, b, j) + bh(0, j))
    z(b, j) = sigmoid(gx(1, b, j) + bx(1, j) + gh(1, b, j) + bh(1, j))
    n(b, j) = tanh(gx(2, b, j) + bx(2, j) + r(b, j) * (gh(2, b, j) + bh(2, j)))
    h(t, b, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * hp(b, j)
    hp(b, j) = h(t, b, j)
  }
}
"""


def _gru_io_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H), _w(rng, 3, I, H), _w(rng, 3, H, H), _w(rng, 3, H), _w(rng, 3, H)]


@program(name="gru (in,out)", kind="rnn", src=GRU_IN_OUT, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=6), inputs=_gru_io_inputs)
def _gru_io(torch, a, t, s):
    x, h0, Wx, Wh, bx, bh = a
    net = _torch_gru(torch, s["I"], s["H"], Wx.transpose(0, 2, 1), Wh.transpose(0, 2, 1), bx, bh)
    return {"torch.nn.GRU": _nograd(torch, lambda: net(t[0], t[1][None])[0])}


@program(name="gru batch 1 (out,in)", kind="rnn", src=GRU_OUT_IN, full=dict(T=256, B=1, I=128, H=128),
         tiny=dict(T=4, B=1, I=3, H=5), inputs=_gru_inputs)
def _gru_b1(torch, a, t, s):
    return _gru(torch, a, t, s)


LSTM_TORCH = """
# LSTM with PyTorch's stacked (4*H, in) weights, gates i, f, g, o
def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4*H,I) Wih,
         float(4*H,H) Whh, float(4*H) bias) -> (h) {
  for t in T {
    if t == 0 { g(b, r) +=! h0(b, k) * Whh(r, k) }
    else      { g(b, r) +=! h(t - 1, b, k) * Whh(r, k) }
    g(b, r) += x(t, b, i) * Wih(r, i)
    g(b, r) = g(b, r) + bias(r)
    if t == 0 { c(t, b, j) = sigmoid(g(b, H + j)) * c0(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H }
    else      { c(t, b, j) = sigmoid(g(b, H + j)) * c(t - 1, b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H }
    h(t, b, j) = sigmoid(g(b, 3 * H + j)) * tanh(c(t, b, j)) where j in 0:H
  }
}
"""


def _lstm_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H), _n(rng, B, H), _w(rng, 4 * H, I), _w(rng, 4 * H, H), _w(rng, 4 * H)]


def _torch_lstm(torch, I, H, Wih, Whh, bias):
    net = torch.nn.LSTM(I, H)
    _copy(torch, net.weight_ih_l0, Wih)
    _copy(torch, net.weight_hh_l0, Whh)
    _copy(torch, net.bias_ih_l0, bias)
    _copy(torch, net.bias_hh_l0, np.zeros(4 * H, np.float32))
    return net


@program(name="lstm (4H,in) torch layout", kind="rnn", src=LSTM_TORCH, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4), inputs=_lstm_inputs)
def _lstm(torch, a, t, s):
    net = _torch_lstm(torch, s["I"], s["H"], *a[3:])
    return {"torch.nn.LSTM": _nograd(torch, lambda: net(t[0], (t[1][None], t[2][None]))[0])}


LSTM_IN_OUT = """
# LSTM, one (in, out) matrix per gate
def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4,I,H) Wx,
         float(4,H,H) Wh, float(4,H) bias) -> (h) {
  for t in T {
    gx(g, b, j) +=! x(t, b, i) * Wx(g, i, j)
    if t == 0 { gh(g, b, j) +=! h0(b, k) * Wh(g, k, j) }
    else      { gh(g, b, j) +=! h(t - 1, b, k) * Wh(g, k, j) }
    ig(b, j) = sigmoid(gx(0, b, j) + gh(0, b, j) + bias(0, j))
    fg(b, j) = sigmoid(gx(1, b, j) + gh(1, b, j) + bias(1, j))
    cg(b, j) = tanh(gx(2, b, j) + gh(2, b, j) + bias(2, j))
    og(b, j) = sigmoid(gx(3, b, j) + gh(3, b, j) + bias(3, j))
    if t == 0 { c(t, b, j) = fg(b, j) * c0(b, j) + ig(b, j) * cg(b, j) }
    else      { c(t, b, j) = fg(b, j) * c(t - 1, b, j) + ig(b, j) * cg(b, j) }
    h(t, b, j) = og(b, j) * tanh(c(t, b, j))
  }
}
"""


def _lstm_io_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H), _n(rng, B, H), _w(rng, 4, I, H), _w(rng, 4, H, H), _w(rng, 4, H)]


@program(name="lstm (in,out) per gate", kind="rnn", src=LSTM_IN_OUT, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4), inputs=_lstm_io_inputs)
def _lstm_io(torch, a, t, s):
    I, H = s["I"], s["H"]
    Wx, Wh, bias = a[3:]
    net = _torch_lstm(torch, I, H, Wx.transpose(0, 2, 1).reshape(4 * H, I), Wh.transpose(0, 2, 1).reshape(4 * H, H),
                      bias.reshape(-1))
    return {"torch.nn.LSTM": _nograd(torch, lambda: net(t[0], (t[1][None], t[2][None]))[0])}


LSTM_GATES_GIVEN = """
# LSTM steps with the input projections computed beforehand (gates i, f, g, o)
def lstm(float(T,4,B,H) G, float(B,H) h0, float(B,H) c0, float(4,H,H) Wh) -> (h, c) {
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


def _lstm_gates_inputs(rng, s):
    T, B, H = s["T"], s["B"], s["H"]
    return [_n(rng, T, 4, B, H), _n(rng, B, H), _n(rng, B, H), _w(rng, 4, H, H)]


@program(name="lstm steps, input gates given", kind="rnn", src=LSTM_GATES_GIVEN, full=dict(T=64, B=32, H=256),
         tiny=dict(T=3, B=2, H=4), inputs=_lstm_gates_inputs, pick=lambda r: r[0])
def _lstm_gates(torch, a, t, s):
    T, B, H = s["T"], s["B"], s["H"]
    W = torch.from_numpy(np.ascontiguousarray(a[3].transpose(1, 0, 2).reshape(H, 4 * H)))  # (k, g*H + j)

    def run():
        G = t[0].permute(0, 2, 1, 3).reshape(T, B, 4 * H)
        h, c, out = t[1], t[2], []
        for step in range(T):
            i, f, g, o = torch.addmm(G[step], h, W).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


ELMAN_BIAS = """
# Elman RNN with biases, (out, in) weights as torch.nn.RNN
def rnn(float(T,B,I) x, float(B,H) h0, float(H,I) Wih, float(H,H) Whh,
        float(H) bih, float(H) bhh) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * Wih(j, i)
    if t == 0 { a(b, j) += h0(b, k) * Whh(j, k) }
    else      { a(b, j) += h(t - 1, b, k) * Whh(j, k) }
    h(t, b, j) = tanh(a(b, j) + bih(j) + bhh(j))
  }
}
"""


def _elman_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H), _w(rng, H, I), _w(rng, H, H), _w(rng, H), _w(rng, H)]


def _torch_rnn(torch, I, H, Wih, Whh, bih, bhh):
    net = torch.nn.RNN(I, H)
    _copy(torch, net.weight_ih_l0, Wih)
    _copy(torch, net.weight_hh_l0, Whh)
    _copy(torch, net.bias_ih_l0, bih)
    _copy(torch, net.bias_hh_l0, bhh)
    return net


@program(name="elman with bias (out,in)", kind="rnn", src=ELMAN_BIAS, full=dict(T=128, B=16, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4), inputs=_elman_inputs)
def _elman(torch, a, t, s):
    net = _torch_rnn(torch, s["I"], s["H"], *a[2:])
    x, h0, Wih, Whh, bih, bhh = a

    def numpy_loop():
        xp = x @ Wih.T + (bih + bhh)  # hoisted input projection
        out = np.empty(x.shape[:2] + (s["H"],), np.float32)
        h = h0
        for k in range(x.shape[0]):
            h = np.tanh(xp[k] + h @ Whh.T, out=out[k])
        return out
    return {"torch.nn.RNN": _nograd(torch, lambda: net(t[0], t[1][None])[0]), "numpy loop": numpy_loop}


# ---------------------------------------------------------------- stacked, bidirectional, masked

STACKED_ELMAN = """
# L stacked Elman layers (in, out) weights, layers outside, time inside
def stacked(float(T,B,H) x, float(L,B,H) h0, float(L,H,H) Wi, float(L,H,H) Wh) -> (hs) {
  for l in L {
    for t in T {
      if l == 0 { a(t, b, j) +=! x(t, b, k) * Wi(l, k, j) }
      else      { a(t, b, j) +=! hs(l - 1, t, b, k) * Wi(l, k, j) }
      if t == 0 { a(t, b, j) += h0(l, b, k) * Wh(l, k, j) }
      else      { a(t, b, j) += hs(l, t - 1, b, k) * Wh(l, k, j) }
      hs(l, t, b, j) = tanh(a(t, b, j))
    }
  }
}
"""


@program(name="stacked elman L=3", kind="rnn", src=STACKED_ELMAN, full=dict(T=64, B=32, H=256, L=3),
         tiny=dict(T=3, B=2, H=4, L=2),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["H"]), _n(rng, s["L"], s["B"], s["H"]),
                                _w(rng, s["L"], s["H"], s["H"]), _w(rng, s["L"], s["H"], s["H"])],
         pick=lambda r: r[-1])
def _stacked(torch, a, t, s):
    L, H = s["L"], s["H"]
    net = torch.nn.RNN(H, H, num_layers=L, bias=False)
    for l in range(L):
        _copy(torch, getattr(net, f"weight_ih_l{l}"), a[2][l].T)
        _copy(torch, getattr(net, f"weight_hh_l{l}"), a[3][l].T)
    return {"torch.nn.RNN(num_layers)": _nograd(torch, lambda: net(t[0], t[1])[0])}


def _gru_loop(h, x_at, prefix, h0):
    """A GRU layer's loop in (out, in) layout: h(t, b, j), input read x_at(i)."""
    return f"""
  for t in T {{
    {prefix}i(g, b, j) +=! {x_at} * {prefix}Wih(g, j, i)
    if t == 0 {{ {prefix}h(g, b, j) +=! {h0}(b, k) * {prefix}Whh(g, j, k) }}
    else      {{ {prefix}h(g, b, j) +=! {h}(t - 1, b, k) * {prefix}Whh(g, j, k) }}
    {prefix}r(b, j) = sigmoid({prefix}i(0, b, j) + {prefix}bih(0, j) + {prefix}h(0, b, j) + {prefix}bhh(0, j))
    {prefix}z(b, j) = sigmoid({prefix}i(1, b, j) + {prefix}bih(1, j) + {prefix}h(1, b, j) + {prefix}bhh(1, j))
    {prefix}n(b, j) = tanh({prefix}i(2, b, j) + {prefix}bih(2, j) + {prefix}r(b, j) * ({prefix}h(2, b, j) + {prefix}bhh(2, j)))
    if t == 0 {{ {h}(t, b, j) = (1 - {prefix}z(b, j)) * {prefix}n(b, j) + {prefix}z(b, j) * {h0}(b, j) }}
    else      {{ {h}(t, b, j) = (1 - {prefix}z(b, j)) * {prefix}n(b, j) + {prefix}z(b, j) * {h}(t - 1, b, j) }}
  }}"""


def _gru_params(p, i):
    return f"float(3,H,{i}) {p}Wih, float(3,H,H) {p}Whh, float(3,H) {p}bih, float(3,H) {p}bhh"


STACKED_GRU = f"""
# two stacked GRU layers, one loop each, (out, in) weights
def gru2(float(T,B,I) x, float(B,H) h0a, float(B,H) h0b, {_gru_params('a', 'I')}, {_gru_params('b', 'H')}) -> (y) {{
{_gru_loop('ha', 'x(t, b, i)', 'a', 'h0a')}
{_gru_loop('y', 'ha(t, b, i)', 'b', 'h0b')}
}}
"""

BIDI_GRU = f"""
# bidirectional GRU: forward loop, backward loop over reversed time, halves side by side
def bigru(float(T,B,I) x, float(B,H) h0f, float(B,H) h0b, {_gru_params('f', 'I')}, {_gru_params('b', 'I')}) -> (y) {{
{_gru_loop('hf', 'x(t, b, i)', 'f', 'h0f')}
{_gru_loop('hb', 'x(T - 1 - t, b, i)', 'b', 'h0b')}
  y(s, b, j) = hf(s, b, j)
  y(s, b, H + j) = hb(T - 1 - s, b, j)
}}
"""


def _two_gru_inputs(I2):
    def make(rng, s):
        T, B, I, H = s["T"], s["B"], s["I"], s["H"]
        second = I if I2 == "I" else H
        return [_n(rng, T, B, I), _n(rng, B, H), _n(rng, B, H),
                _w(rng, 3, H, I), _w(rng, 3, H, H), _w(rng, 3, H), _w(rng, 3, H),
                _w(rng, 3, H, second), _w(rng, 3, H, H), _w(rng, 3, H), _w(rng, 3, H)]
    return make


def _set_gru_layer(torch, net, suffix, H, Wih, Whh, bih, bhh):
    _copy(torch, getattr(net, f"weight_ih_{suffix}"), Wih.reshape(3 * H, -1))
    _copy(torch, getattr(net, f"weight_hh_{suffix}"), Whh.reshape(3 * H, H))
    _copy(torch, getattr(net, f"bias_ih_{suffix}"), bih.reshape(-1))
    _copy(torch, getattr(net, f"bias_hh_{suffix}"), bhh.reshape(-1))


@program(name="stacked gru L=2", kind="rnn", src=STACKED_GRU, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4), inputs=_two_gru_inputs("H"))
def _gru2(torch, a, t, s):
    H = s["H"]
    net = torch.nn.GRU(s["I"], H, num_layers=2)
    _set_gru_layer(torch, net, "l0", H, *a[3:7])
    _set_gru_layer(torch, net, "l1", H, *a[7:11])
    h0 = torch.stack([t[1], t[2]])
    return {"torch.nn.GRU(num_layers=2)": _nograd(torch, lambda: net(t[0], h0)[0])}


@program(name="bidirectional gru", kind="rnn", src=BIDI_GRU, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4), inputs=_two_gru_inputs("I"))
def _bigru(torch, a, t, s):
    H = s["H"]
    net = torch.nn.GRU(s["I"], H, bidirectional=True)
    _set_gru_layer(torch, net, "l0", H, *a[3:7])
    _set_gru_layer(torch, net, "l0_reverse", H, *a[7:11])
    h0 = torch.stack([t[1], t[2]])
    return {"torch.nn.GRU(bidirectional)": _nograd(torch, lambda: net(t[0], h0)[0])}


BIDI_ELMAN = """
# bidirectional Elman RNN, (in, out) weights, no bias
def birnn(float(T,B,I) x, float(2,I,H) Wi, float(2,H,H) Wh) -> (y) {
  for t in T {
    af(b, j) +=! x(t, b, i) * Wi(0, i, j)
    if t > 0 { af(b, j) += hf(t - 1, b, k) * Wh(0, k, j) }
    hf(t, b, j) = tanh(af(b, j))
  }
  for t in T {
    ab(b, j) +=! x(T - 1 - t, b, i) * Wi(1, i, j)
    if t > 0 { ab(b, j) += hb(t - 1, b, k) * Wh(1, k, j) }
    hb(t, b, j) = tanh(ab(b, j))
  }
  y(s, b, j) = hf(s, b, j)
  y(s, b, H + j) = hb(T - 1 - s, b, j)
}
"""


@program(name="bidirectional elman", kind="rnn", src=BIDI_ELMAN, full=dict(T=128, B=16, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), _w(rng, 2, s["I"], s["H"]), _w(rng, 2, s["H"], s["H"])])
def _birnn(torch, a, t, s):
    net = torch.nn.RNN(s["I"], s["H"], bias=False, bidirectional=True)
    for d, suffix in enumerate(("l0", "l0_reverse")):
        _copy(torch, getattr(net, f"weight_ih_{suffix}"), a[1][d].T)
        _copy(torch, getattr(net, f"weight_hh_{suffix}"), a[2][d].T)
    return {"torch.nn.RNN(bidirectional)": _nograd(torch, lambda: net(t[0])[0])}


MASKED_ELMAN = """
# Elman RNN over padded sequences: m(t, b) is 1 while sequence b lasts; the state stops at its end
def masked(float(T,B,I) x, float(T,B) m, float(B,H) h0, float(H,I) Wih, float(H,H) Whh, float(H) bias) -> (y) {
  hp(b, j) = h0(b, j)
  for t in T {
    a(b, j) +=! x(t, b, i) * Wih(j, i)
    a(b, j) += hp(b, k) * Whh(j, k)
    hp(b, j) = m(t, b) * tanh(a(b, j) + bias(j)) + (1 - m(t, b)) * hp(b, j)
    y(t, b, j) = m(t, b) * hp(b, j)
  }
}
"""


def _masked_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    lengths = rng.integers(1, T + 1, B)
    lengths[0] = T
    m = (np.arange(T)[:, None] < lengths[None, :]).astype(np.float32)
    return [_n(rng, T, B, I), m, _n(rng, B, H), _w(rng, H, I), _w(rng, H, H), _w(rng, H)]


@program(name="masked elman (padded batch)", kind="rnn", src=MASKED_ELMAN, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=4, B=3, I=5, H=4), inputs=_masked_inputs)
def _masked(torch, a, t, s):
    x, m, h0, Wih, Whh, bias = t
    H = s["H"]
    net = _torch_rnn(torch, s["I"], H, a[3], a[4], a[5], np.zeros(H, np.float32))
    lengths = torch.from_numpy(a[1].sum(0).astype(np.int64))
    pack, unpack = torch.nn.utils.rnn.pack_padded_sequence, torch.nn.utils.rnn.pad_packed_sequence

    def packed():
        p = pack(x, lengths, enforce_sorted=False)
        return unpack(net(p, h0[None])[0], total_length=x.shape[0])[0]

    def loop():
        xp = torch.addmm(bias, x.reshape(-1, x.shape[2]), Wih.T).reshape(x.shape[0], x.shape[1], H)
        y = torch.empty_like(xp)
        h = h0.clone()
        for k in range(x.shape[0]):
            hn = torch.tanh(torch.addmm(xp[k], h, Whh.T))
            mk = m[k][:, None]
            h = torch.lerp(h, hn, mk)
            torch.mul(h, mk, out=y[k])
        return y
    return {"torch.nn.RNN packed": _nograd(torch, packed), "torch loop": _nograd(torch, loop)}


# ---------------------------------------------------------------- embedding, decoding, language model

EMB_LSTM = LSTM_TORCH.replace("# LSTM with PyTorch's stacked (4*H, in) weights, gates i, f, g, o",
                              "# embedding lookup (an indirect read) feeding an LSTM") \
    .replace("float(T,B,I) x,", "int32(T,B) tok, float(V,I) emb,") \
    .replace("x(t, b, i) * Wih(r, i)", "emb(tok(t, b), i) * Wih(r, i)")


def _emb_lstm_inputs(rng, s):
    T, B, I, H, V = s["T"], s["B"], s["I"], s["H"], s["V"]
    return [rng.integers(0, V, (T, B)).astype(np.int32), _n(rng, V, I)] + _lstm_inputs(rng, s)[1:]


@program(name="embedding -> lstm", kind="rnn", src=EMB_LSTM, full=dict(T=64, B=32, I=256, H=256, V=10000),
         tiny=dict(T=3, B=2, I=5, H=4, V=7), inputs=_emb_lstm_inputs)
def _emb_lstm(torch, a, t, s):
    net = _torch_lstm(torch, s["I"], s["H"], *a[4:])
    tok = t[0].long()
    F = torch.nn.functional
    return {"F.embedding + nn.LSTM": _nograd(torch, lambda: net(F.embedding(tok, t[1]), (t[2][None], t[3][None]))[0])}


GREEDY = """
# greedy decoding: the argmax token of each step is the next step's input
def greedy(float(V,H) emb, float(H,H) Whh, float(H) bias, float(V,H) Wo, float(B,H) h0, int32(B) start) -> (tok) {
  for t in S {
    if t == 0 { h(t, b, j) +=! h0(b, k) * Whh(j, k) }
    else      { h(t, b, j) +=! h(t - 1, b, k) * Whh(j, k) }
    if t == 0 { h(t, b, j) = tanh(h(t, b, j) + bias(j) + emb(start(b), j)) }
    else      { h(t, b, j) = tanh(h(t, b, j) + bias(j) + emb(tok(t - 1, b), j)) }
    logit(b, v) +=! h(t, b, j) * Wo(v, j)
    tok(t, b) argmax=! logit(b, v)
  }
}
"""


@program(name="greedy decoder (argmax fed back)", kind="rnn", src=GREEDY, full=dict(S=32, B=16, H=256, V=4000),
         tiny=dict(S=4, B=2, H=4, V=6), free=("S",),
         inputs=lambda rng, s: [_n(rng, s["V"], s["H"]), _w(rng, s["H"], s["H"]), _w(rng, s["H"]),
                                _w(rng, s["V"], s["H"]) * 4, _n(rng, s["B"], s["H"]),
                                rng.integers(0, s["V"], s["B"]).astype(np.int32)])
def _greedy(torch, a, t, s):
    emb, Whh, bias, Wo, h0, start = t
    F = torch.nn.functional

    def loop():
        out = torch.empty(s["S"], h0.shape[0], dtype=torch.int32)
        h, tok = h0, start.long()
        for k in range(s["S"]):
            h = torch.tanh(torch.addmm(emb[tok] + bias, h, Whh.T))
            tok = F.linear(h, Wo).argmax(1)
            out[k] = tok
        return out
    return {"torch loop": _nograd(torch, loop)}


LM_LOSS = """
# RNN language model: embedding, Elman RNN, output layer, mean cross entropy (log-softmax + gather)
def lm(int32(T,B) tok, int32(T,B) tgt, float(V,H) emb, float(B,H) h0, float(H,H) Wih, float(H,H) Whh,
       float(H) bias, float(V,H) Wo, float(V) bo) -> (loss) {
  for t in T {
    a(b, j) +=! emb(tok(t, b), i) * Wih(j, i)
    if t == 0 { a(b, j) += h0(b, k) * Whh(j, k) }
    else      { a(b, j) += h(t - 1, b, k) * Whh(j, k) }
    h(t, b, j) = tanh(a(b, j) + bias(j))
  }
  logit(t, b, v) +=! h(t, b, j) * Wo(v, j)
  logit(t, b, v) = logit(t, b, v) + bo(v)
  mx(t, b) max=! logit(t, b, v)
  se(t, b) +=! exp(logit(t, b, v) - mx(t, b))
  nll(t, b) = log(se(t, b)) + mx(t, b) - logit(t, b, tgt(t, b))
  loss +=! nll(t, b) / (T * B)
}
"""


def _lm_inputs(rng, s):
    T, B, H, V = s["T"], s["B"], s["H"], s["V"]
    return [rng.integers(0, V, (T, B)).astype(np.int32), rng.integers(0, V, (T, B)).astype(np.int32),
            _n(rng, V, H), _n(rng, B, H), _w(rng, H, H), _w(rng, H, H), _w(rng, H), _w(rng, V, H), _w(rng, V)]


@program(name="rnn language model loss", kind="rnn", src=LM_LOSS, full=dict(T=32, B=16, H=256, V=4000),
         tiny=dict(T=3, B=2, H=4, V=7), inputs=_lm_inputs)
def _lm(torch, a, t, s):
    tok, tgt, emb, h0, Wih, Whh, bias, Wo, bo = t
    H = s["H"]
    net = _torch_rnn(torch, H, H, a[4], a[5], a[6], np.zeros(H, np.float32))
    F = torch.nn.functional
    tok64, tgt64 = tok.long(), tgt.long().reshape(-1)

    def run():
        h = net(F.embedding(tok64, emb), h0[None])[0]
        return F.cross_entropy(F.linear(h.reshape(-1, H), Wo, bo), tgt64)
    return {"nn.RNN + F.cross_entropy": _nograd(torch, run)}


# ---------------------------------------------------------------- attention, softmax, norms

ATTENTION = """
# scaled dot-product attention: scores, row max, exp, sum, weighted sum
def attention(float(B,N,L,D) q, float(B,N,S,D) k, float(B,N,S,D) v) -> (o) {
  s(b, n, i, j) +=! q(b, n, i, d) * k(b, n, j, d)
  mx(b, n, i) max=! s(b, n, i, j)
  e(b, n, i, j) = exp((s(b, n, i, j) - mx(b, n, i)) * rsqrt(float(D)))
  z(b, n, i) +=! e(b, n, i, j)
  o(b, n, i, d) +=! e(b, n, i, j) * v(b, n, j, d)
  o(b, n, i, d) = o(b, n, i, d) / z(b, n, i)
}
"""

CAUSAL_ATTENTION = """
# causal self-attention: key j <= query i, the others masked with a select
def causal(float(B,N,L,D) q, float(B,N,L,D) k, float(B,N,L,D) v) -> (o) {
  s(b, n, i, j) +=! q(b, n, i, d) * k(b, n, j, d) * rsqrt(float(D))
  mx(b, n, i) max=! j <= i ? s(b, n, i, j) : -inf
  e(b, n, i, j) = j <= i ? exp(s(b, n, i, j) - mx(b, n, i)) : 0
  z(b, n, i) +=! e(b, n, i, j)
  o(b, n, i, d) +=! e(b, n, i, j) * v(b, n, j, d) / z(b, n, i)
}
"""


def _qkv(rng, s):
    B, N, L, D = s["B"], s["N"], s["L"], s["D"]
    return [_n(rng, B, N, L, D), _n(rng, B, N, L, D), _n(rng, B, N, L, D)]


@program(name="attention", kind="attention", src=ATTENTION, full=dict(B=8, N=8, L=256, D=64),
         tiny=dict(B=1, N=2, L=5, D=3), inputs=_qkv)
def _attn(torch, a, t, s):
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return {"F.scaled_dot_product_attention": _nograd(torch, lambda: sdpa(*t))}


@program(name="causal attention (select mask)", kind="attention", src=CAUSAL_ATTENTION,
         full=dict(B=8, N=8, L=256, D=64), tiny=dict(B=1, N=2, L=5, D=3), inputs=_qkv)
def _causal(torch, a, t, s):
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return {"F.sdpa(is_causal)": _nograd(torch, lambda: sdpa(*t, is_causal=True))}


SOFTMAX = """
def softmax(float(N,C) x) -> (y) {
  mx(n) max=! x(n, c)
  e(n, c) = exp(x(n, c) - mx(n))
  s(n) +=! e(n, c)
  y(n, c) = e(n, c) / s(n)
}
"""


@program(name="softmax rows", kind="norm", src=SOFTMAX, full=dict(N=4096, C=1024), tiny=dict(N=3, C=5),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"])])
def _softmax(torch, a, t, s):
    return {"torch.softmax": _nograd(torch, lambda: torch.softmax(t[0], 1))}


SOFTMAX_COLS = """
# softmax over the first dimension (each column)
def softmax0(float(N,C) x) -> (y) {
  m(c) max=! x(n, c)
  e(n, c) = exp(x(n, c) - m(c))
  s(c) +=! e(n, c)
  y(n, c) = e(n, c) / s(c)
}
"""


@program(name="softmax over columns", kind="norm", src=SOFTMAX_COLS, full=dict(N=4096, C=1024),
         tiny=dict(N=3, C=5), inputs=lambda rng, s: [_n(rng, s["N"], s["C"])])
def _softmax0(torch, a, t, s):
    return {"torch.softmax(dim=0)": _nograd(torch, lambda: torch.softmax(t[0], 0))}


LAYERNORM = """
def layernorm(float(N,C) x, float(C) gamma, float(C) beta) -> (y) {
  mean(n) +=! x(n, c) / C
  d(n, c) = x(n, c) - mean(n)
  var(n) +=! d(n, c) * d(n, c) / C
  y(n, c) = d(n, c) * rsqrt(var(n) + 1e-5) * gamma(c) + beta(c)
}
"""


@program(name="layer norm", kind="norm", src=LAYERNORM, full=dict(N=4096, C=1024), tiny=dict(N=3, C=5),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"]) * 2 + 1, _n(rng, s["C"]), _n(rng, s["C"])])
def _layernorm(torch, a, t, s):
    F = torch.nn.functional
    return {"F.layer_norm": _nograd(torch, lambda: F.layer_norm(t[0], (s["C"],), t[1], t[2], 1e-5))}


RMSNORM = """
def rmsnorm(float(N,C) x, float(C) gamma) -> (y) {
  ms(n) +=! x(n, c) * x(n, c)
  y(n, c) = x(n, c) * rsqrt(ms(n) / C + 1e-6) * gamma(c)
}
"""


@program(name="rms norm", kind="norm", src=RMSNORM, full=dict(N=4096, C=1024), tiny=dict(N=3, C=5),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"]), _n(rng, s["C"])])
def _rmsnorm(torch, a, t, s):
    F = torch.nn.functional
    return {"F.rms_norm": _nograd(torch, lambda: F.rms_norm(t[0], (s["C"],), t[1], 1e-6))}


# ---------------------------------------------------------------- convolutions

CAUSAL_CONV = """
# causal 1-D convolution: K-1 zeros of padding on the left, written as a select
def causal_conv(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! (t + k - K + 1 >= 0 ? x(b, c, t + k - K + 1) : 0) * w(o, c, k) where t in 0:L, k in 0:K
}
"""


def _conv_inputs(rng, s):
    return [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["O"], s["C"], s["K"])]


@program(name="causal conv1d (select padding)", kind="conv", src=CAUSAL_CONV,
         full=dict(B=16, C=128, L=512, O=128, K=3), tiny=dict(B=2, C=3, L=6, O=4, K=3), inputs=_conv_inputs)
def _causal_conv(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(F.pad)": _nograd(torch, lambda: F.conv1d(F.pad(t[0], (s["K"] - 1, 0)), t[1]))}


SAME_CONV = """
# 1-D convolution with bias, 'same' padding of 2 on each side (K = 5)
def same_conv(float(B,C,L) x, float(O,C,5) w, float(O) bias) -> (y) {
  y(b, o, t) +=! (t + k - 2 >= 0 && t + k - 2 < L ? x(b, c, t + k - 2) : 0) * w(o, c, k) where t in 0:L, k in 0:5
  y(b, o, t) = y(b, o, t) + bias(o)
}
"""


@program(name="conv1d same padding + bias", kind="conv", src=SAME_CONV,
         full=dict(B=16, C=128, L=512, O=128, K=5), tiny=dict(B=2, C=3, L=6, O=4, K=5),
         inputs=lambda rng, s: _conv_inputs(rng, s) + [_w(rng, s["O"])])
def _same_conv(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(padding=2)": _nograd(torch, lambda: F.conv1d(t[0], t[1], t[2], padding=2))}


STRIDED_CONV = """
# convolution of stride 2 (a downsampling layer)
def strided(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! x(b, c, 2 * t + k) * w(o, c, k) where t in 0:(L-K)/2+1
}
"""


@program(name="conv1d stride 2", kind="conv", src=STRIDED_CONV,
         full=dict(B=16, C=128, L=1024, O=128, K=5), tiny=dict(B=2, C=3, L=9, O=4, K=3), inputs=_conv_inputs)
def _strided_conv(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(stride=2)": _nograd(torch, lambda: F.conv1d(t[0], t[1], stride=2))}


DILATED_CONV = """
# causal dilated convolution (WaveNet), dilation 4
def dilated(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! (t + 4 * (k - K + 1) >= 0 ? x(b, c, t + 4 * (k - K + 1)) : 0) * w(o, c, k) where t in 0:L, k in 0:K
}
"""


@program(name="dilated causal conv1d (d=4)", kind="conv", src=DILATED_CONV,
         full=dict(B=16, C=128, L=512, O=128, K=3), tiny=dict(B=2, C=3, L=11, O=4, K=3), inputs=_conv_inputs)
def _dilated(torch, a, t, s):
    F = torch.nn.functional
    pad = 4 * (s["K"] - 1)
    return {"F.conv1d(dilation=4)": _nograd(torch, lambda: F.conv1d(F.pad(t[0], (pad, 0)), t[1], dilation=4))}


DEPTHWISE1D = """
# depthwise 1-D convolution, 'same' padding (K = 7)
def dw1d(float(B,C,L) x, float(C,7) w) -> (y) {
  y(b, c, t) +=! (t + k - 3 >= 0 && t + k - 3 < L ? x(b, c, t + k - 3) : 0) * w(c, k) where t in 0:L, k in 0:7
}
"""


@program(name="depthwise conv1d (K=7 same)", kind="conv", src=DEPTHWISE1D, full=dict(B=16, C=512, L=1024),
         tiny=dict(B=2, C=3, L=9), inputs=lambda rng, s: [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["C"], 7)])
def _dw1d(torch, a, t, s):
    F = torch.nn.functional
    w = t[1][:, None, :].contiguous()
    return {"F.conv1d(groups=C)": _nograd(torch, lambda: F.conv1d(t[0], w, padding=3, groups=s["C"]))}


DEPTHWISE2D = """
def dw2d(float(N,C,H,W) x, float(C,KH,KW) w) -> (y) {
  y(n, c, h, ww) +=! x(n, c, h + kh, ww + kw) * w(c, kh, kw)
}
"""


@program(name="depthwise conv2d 3x3 valid", kind="conv", src=DEPTHWISE2D, full=dict(N=8, C=128, H=58, W=58),
         tiny=dict(N=1, C=2, H=5, W=6),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]), _w(rng, s["C"], 3, 3)])
def _dw2d(torch, a, t, s):
    F = torch.nn.functional
    w = t[1][:, None].contiguous()
    return {"F.conv2d(groups=C)": _nograd(torch, lambda: F.conv2d(t[0], w, groups=s["C"]))}


CONV2D_SAME = """
# 3x3 convolution, 'same' padding written as a select, bias and ReLU (a CNN layer)
def conv_same(float(N,C,H,W) x, float(O,C,3,3) w, float(O) bias) -> (y) {
  y(n, o, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W ?
                     x(n, c, h + kh - 1, v + kw - 1) : 0) * w(o, c, kh, kw)
      where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
  y(n, o, h, v) = fmax(y(n, o, h, v) + bias(o), 0)
}
"""


def _conv2d_inputs(rng, s, k=3):
    return [_n(rng, s["N"], s["C"], s["H"], s["W"]), _w(rng, s["O"], s["C"], k, k)]


@program(name="conv2d 3x3 same + bias + relu", kind="conv", src=CONV2D_SAME,
         full=dict(N=8, C=64, H=32, W=32, O=64), tiny=dict(N=1, C=2, H=5, W=4, O=3),
         inputs=lambda rng, s: _conv2d_inputs(rng, s) + [_w(rng, s["O"])])
def _conv2d_same(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d(padding=1) + relu": _nograd(torch, lambda: F.relu(F.conv2d(t[0], t[1], t[2], padding=1)))}


CONV2D_S2 = """
# 3x3 convolution of stride 2 (a downsampling layer of a CNN)
def conv_s2(float(N,C,H,W) x, float(O,C,KH,KW) w) -> (y) {
  y(n, o, h, v) +=! x(n, c, 2 * h + kh, 2 * v + kw) * w(o, c, kh, kw)
      where h in 0:(H - KH) / 2 + 1, v in 0:(W - KW) / 2 + 1
}
"""


@program(name="conv2d 3x3 stride 2", kind="conv", src=CONV2D_S2,
         full=dict(N=8, C=64, H=65, W=65, O=128), tiny=dict(N=1, C=2, H=7, W=6, O=3), inputs=_conv2d_inputs)
def _conv2d_s2(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d(stride=2)": _nograd(torch, lambda: F.conv2d(t[0], t[1], stride=2))}


CONV2D_1X1 = """
# pointwise (1x1) convolution, NCHW
def pointwise(float(N,C,H,W) x, float(O,C) w) -> (y) {
  y(n, o, h, v) +=! x(n, c, h, v) * w(o, c)
}
"""


@program(name="conv2d 1x1 (pointwise)", kind="conv", src=CONV2D_1X1,
         full=dict(N=8, C=128, H=28, W=28, O=256), tiny=dict(N=1, C=2, H=3, W=4, O=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]), _w(rng, s["O"], s["C"])])
def _conv2d_1x1(torch, a, t, s):
    F = torch.nn.functional
    w = t[1][:, :, None, None].contiguous()
    return {"F.conv2d(1x1)": _nograd(torch, lambda: F.conv2d(t[0], w))}


MAXPOOL = """
# 2x2 max pooling of stride 2
def maxpool(float(N,C,H,W) x) -> (y) {
  y(n, c, h, v) max=! x(n, c, 2 * h + i, 2 * v + j) where h in 0:H / 2, v in 0:W / 2, i in 0:2, j in 0:2
}
"""


@program(name="max pool 2x2", kind="conv", src=MAXPOOL, full=dict(N=16, C=128, H=64, W=64),
         tiny=dict(N=1, C=2, H=4, W=6), inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"])])
def _maxpool(torch, a, t, s):
    F = torch.nn.functional
    return {"F.max_pool2d(2)": _nograd(torch, lambda: F.max_pool2d(t[0], 2))}


GLOBAL_POOL = """
# global average pooling: the mean of each feature map
def gap(float(N,C,H,W) x) -> (y) {
  y(n, c) +=! x(n, c, h, v) / (H * W)
}
"""


@program(name="global average pool", kind="conv", src=GLOBAL_POOL, full=dict(N=32, C=256, H=14, W=14),
         tiny=dict(N=1, C=2, H=3, W=5), inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"])])
def _gap(torch, a, t, s):
    return {"x.mean((2, 3))": _nograd(torch, lambda: t[0].mean((2, 3)))}


BATCH_NORM = """
# batch normalization with the batch's statistics (training mode)
def bn(float(N,C,H,W) x, float(C) gamma, float(C) beta) -> (y, mean, var) {
  mean(c) +=! x(n, c, h, v) / (N * H * W)
  var(c) +=! (x(n, c, h, v) - mean(c)) * (x(n, c, h, v) - mean(c)) / (N * H * W)
  y(n, c, h, v) = (x(n, c, h, v) - mean(c)) * rsqrt(var(c) + 1e-5) * gamma(c) + beta(c)
}
"""


@program(name="batch norm (batch statistics)", kind="norm", src=BATCH_NORM, full=dict(N=32, C=64, H=32, W=32),
         tiny=dict(N=2, C=3, H=3, W=2), pick=lambda r: r[0],
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]), _w(rng, s["C"]), _w(rng, s["C"])])
def _bn(torch, a, t, s):
    F = torch.nn.functional
    return {"F.batch_norm(training=True)": _nograd(torch, lambda: F.batch_norm(t[0], None, None, t[1], t[2],
                                                                               training=True, eps=1e-5))}


# ---------------------------------------------------------------- matmul, MLP, losses

MATMUL = "def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"


@program(name="matmul 512^3", kind="matmul", src=MATMUL, full=dict(M=512, K=512, N=512),
         tiny=dict(M=3, K=4, N=5), inputs=lambda rng, s: [_n(rng, s["M"], s["K"]), _n(rng, s["K"], s["N"])])
def _matmul(torch, a, t, s):
    return {"torch.matmul": _nograd(torch, lambda: torch.matmul(*t)), "numpy": lambda: a[0] @ a[1]}


GEMV_IN_OUT = "def gemv(float(I) x, float(I,O) W) -> (y) { y(j) +=! x(i) * W(i, j) }"


@program(name="gemv (in,out) 4096x4096", kind="matmul", src=GEMV_IN_OUT, full=dict(I=4096, O=4096),
         tiny=dict(I=5, O=7), inputs=lambda rng, s: [_n(rng, s["I"]), _w(rng, s["I"], s["O"])])
def _gemv(torch, a, t, s):
    return {"torch.matmul": _nograd(torch, lambda: torch.matmul(*t)), "numpy": lambda: a[0] @ a[1]}


LINEAR = """
# a linear layer as torch.nn.Linear stores it: W(out, in), y = x W^T + b
def linear(float(M,K) x, float(N,K) W, float(N) bias) -> (y) {
  y(m, n) +=! x(m, k) * W(n, k)
  y(m, n) = y(m, n) + bias(n)
}
"""


@program(name="linear x.W^T + b", kind="matmul", src=LINEAR, full=dict(M=512, K=768, N=768),
         tiny=dict(M=3, K=4, N=5),
         inputs=lambda rng, s: [_n(rng, s["M"], s["K"]), _w(rng, s["N"], s["K"]), _w(rng, s["N"])])
def _linear(torch, a, t, s):
    F = torch.nn.functional
    return {"F.linear": _nograd(torch, lambda: F.linear(*t))}


BMM = "def bmm(float(B,M,K) A, float(B,K,N) X) -> (C) { C(b, m, n) +=! A(b, m, k) * X(b, k, n) }"


@program(name="batch matmul", kind="matmul", src=BMM, full=dict(B=64, M=128, K=128, N=128),
         tiny=dict(B=2, M=3, K=4, N=5),
         inputs=lambda rng, s: [_n(rng, s["B"], s["M"], s["K"]), _n(rng, s["B"], s["K"], s["N"])])
def _bmm(torch, a, t, s):
    return {"torch.bmm": _nograd(torch, lambda: torch.bmm(*t)), "numpy matmul": lambda: np.matmul(a[0], a[1])}


MLP = """
# two-layer MLP, (out, in) weights, bias and ReLU
def mlp(float(B,I) x, float(H,I) W1, float(H) b1, float(O,H) W2, float(O) b2) -> (y) {
  h(b, j) +=! x(b, i) * W1(j, i)
  h(b, j) = max(h(b, j) + b1(j), 0)
  y(b, o) +=! h(b, j) * W2(o, j)
  y(b, o) = y(b, o) + b2(o)
}
"""


def _mlp_inputs(rng, s):
    B, I, H, O = s["B"], s["I"], s["H"], s["O"]
    return [_n(rng, B, I), _w(rng, H, I), _w(rng, H), _w(rng, O, H), _w(rng, O)]


@program(name="mlp bias+relu", kind="matmul", src=MLP, full=dict(B=256, I=512, H=1024, O=512),
         tiny=dict(B=3, I=4, H=5, O=2), inputs=_mlp_inputs)
def _mlp(torch, a, t, s):
    F = torch.nn.functional
    x, W1, b1, W2, b2 = t
    return {"F.linear + relu": _nograd(torch, lambda: F.linear(torch.relu_(F.linear(x, W1, b1)), W2, b2))}


GELU_MLP = """
# linear + GELU (erf form), (in, out) weights
def gelu_layer(float(B,I) x, float(I,H) W, float(H) bias) -> (y) {
  a(b, j) +=! x(b, i) * W(i, j)
  y(b, j) = 0.5 * (a(b, j) + bias(j)) * (1 + erf((a(b, j) + bias(j)) * 0.70710678))
}
"""


@program(name="linear + gelu", kind="matmul", src=GELU_MLP, full=dict(B=256, I=512, H=2048),
         tiny=dict(B=3, I=4, H=5),
         inputs=lambda rng, s: [_n(rng, s["B"], s["I"]), _w(rng, s["I"], s["H"]), _w(rng, s["H"])])
def _gelu(torch, a, t, s):
    F = torch.nn.functional
    x, W, bias = t
    return {"F.gelu(addmm)": _nograd(torch, lambda: F.gelu(torch.addmm(bias, x, W)))}


XENT = """
# mean cross entropy of logits against int32 targets
def xent(float(N,C) logit, int32(N) tgt) -> (loss) {
  mx(n) max=! logit(n, c)
  se(n) +=! exp(logit(n, c) - mx(n))
  loss +=! (log(se(n)) + mx(n) - logit(n, tgt(n))) / N
}
"""


@program(name="cross entropy loss", kind="loss", src=XENT, full=dict(N=4096, C=1000), tiny=dict(N=3, C=5),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"]) * 3, rng.integers(0, s["C"], s["N"]).astype(np.int32)])
def _xent(torch, a, t, s):
    F = torch.nn.functional
    tgt = t[1].long()
    return {"F.cross_entropy": _nograd(torch, lambda: F.cross_entropy(t[0], tgt))}


MSE = """
def mse(float(N,C) pred, float(N,C) target) -> (loss) {
  loss +=! (pred(n, c) - target(n, c)) * (pred(n, c) - target(n, c)) / (N * C)
}
"""


@program(name="mse loss", kind="loss", src=MSE, full=dict(N=4096, C=1024), tiny=dict(N=3, C=5),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"]), _n(rng, s["N"], s["C"])])
def _mse(torch, a, t, s):
    F = torch.nn.functional
    return {"F.mse_loss": _nograd(torch, lambda: F.mse_loss(*t)),
            "numpy": lambda: np.mean(np.square(a[0] - a[1]))}


LINEAR_GRAD = """
# gradients of a linear layer's weight and bias (dy: the output's gradient)
def linear_grad(float(N,O) dy, float(N,I) x) -> (dW, db) {
  dW(o, i) +=! dy(n, o) * x(n, i)
  db(o) +=! dy(n, o)
}
"""


@program(name="linear layer weight + bias gradients", kind="matmul", src=LINEAR_GRAD,
         full=dict(N=4096, O=512, I=768), tiny=dict(N=3, O=4, I=5),
         inputs=lambda rng, s: [_n(rng, s["N"], s["O"]), _n(rng, s["N"], s["I"])], pick=lambda r: r[0])
def _linear_grad(torch, a, t, s):
    return {"dy.T @ x, dy.sum(0)": _nograd(torch, lambda: (t[0].t() @ t[1], t[0].sum(0))[0])}


PAIRWISE = """
# squared euclidean distances between two sets of points
def sqdist(float(N,D) x, float(M,D) y) -> (d) {
  d(i, j) +=! (x(i, k) - y(j, k)) * (x(i, k) - y(j, k))
}
"""


@program(name="pairwise squared distances", kind="matmul", src=PAIRWISE, full=dict(N=2048, M=2048, D=64),
         tiny=dict(N=3, M=4, D=5), inputs=lambda rng, s: [_n(rng, s["N"], s["D"]), _n(rng, s["M"], s["D"])])
def _pairwise(torch, a, t, s):
    return {"torch.cdist ** 2": _nograd(torch, lambda: torch.cdist(t[0], t[1]) ** 2)}


EMB_BAG = """
# mean of each bag's embeddings (fixed-length bags)
def bag(int32(B,L) idx, float(V,E) emb) -> (y) {
  y(b, e) +=! emb(idx(b, l), e) / L
}
"""


@program(name="embedding bag mean", kind="embedding", src=EMB_BAG, full=dict(B=1024, L=32, V=100000, E=128),
         tiny=dict(B=2, L=3, V=7, E=4),
         inputs=lambda rng, s: [rng.integers(0, s["V"], (s["B"], s["L"])).astype(np.int32), _n(rng, s["V"], s["E"])])
def _bag(torch, a, t, s):
    F = torch.nn.functional
    idx = t[0].long()
    return {"F.embedding_bag(mean)": _nograd(torch, lambda: F.embedding_bag(idx, t[1], mode="mean"))}


# ------------------------------------------------- more programs users wrote


LINATT = """
def linatt(float(T,B,D) q, float(T,B,D) k, float(T,B,E) v) -> (S, o) {
  for t in T {
    if t == 0 { S(t, b, i, j) = k(t, b, i) * v(t, b, j) }
    else { S(t, b, i, j) = S(t - 1, b, i, j) + k(t, b, i) * v(t, b, j) }
    o(t, b, j) +=! q(t, b, i) * S(t, b, i, j)
  }
}
"""


@program(name="linear attention recurrence", kind="rnn", src=LINATT, full=dict(T=128, B=8, D=64, E=64), tiny=dict(T=3,B=2,D=3,E=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["D"]), _n(rng, s["T"], s["B"], s["D"]), _n(rng, s["T"], s["B"], s["E"])],
         pick=lambda r: r[1])
def _la(torch, a, t, s):
    q, k, v = t
    def run():
        S = torch.cumsum(torch.einsum("tbi,tbj->tbij", k, v), 0)
        return torch.einsum("tbi,tbij->tbj", q, S)
    return {"cumsum einsum": _nograd(torch, run)}


SCAN = """
def scan(float(T,B,D) x, float(T,B,D) dt, float(D,N) A, float(T,B,N) Bm, float(T,B,N) Cm) -> (h, y) {
  for t in T {
    if t == 0 { h(t, b, d, n) = dt(t, b, d) * Bm(t, b, n) * x(t, b, d) }
    else { h(t, b, d, n) = exp(dt(t, b, d) * A(d, n)) * h(t - 1, b, d, n) + dt(t, b, d) * Bm(t, b, n) * x(t, b, d) }
    y(t, b, d) +=! h(t, b, d, n) * Cm(t, b, n)
  }
}
"""


@program(name="selective scan (mamba)", kind="rnn", src=SCAN, full=dict(T=128, B=4, D=256, N=16), tiny=dict(T=3,B=2,D=3,N=2),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["D"]), (0.1*np.abs(_n(rng, s["T"], s["B"], s["D"]))).astype(np.float32),
                                (-np.abs(_n(rng, s["D"], s["N"]))).astype(np.float32), _n(rng, s["T"], s["B"], s["N"]), _n(rng, s["T"], s["B"], s["N"])],
         pick=lambda r: r[1])
def _scan(torch, a, t, s):
    x, dt, A, Bm, Cm = t
    def run():
        dA = torch.exp(dt[..., None] * A)  # T,B,D,N
        dBx = dt[..., None] * Bm[:, :, None, :] * x[..., None]
        h = torch.zeros_like(dA[0]); ys = []
        for i in range(x.shape[0]):
            h = dA[i] * h + dBx[i]
            ys.append(torch.einsum("bdn,bn->bd", h, Cm[i]))
        return torch.stack(ys)
    return {"torch loop": _nograd(torch, run)}


MHA = """
def mha(float(B,T,H,D) q, float(B,T,H,D) k, float(B,T,H,D) v) -> (o) {
  s(b, h, i, j) +=! q(b, i, h, d) * k(b, j, h, d)
  m(b, h, i) max=! s(b, h, i, j)
  e(b, h, i, j) = exp((s(b, h, i, j) - m(b, h, i)) * 0.125)
  z(b, h, i) +=! e(b, h, i, j)
  o(b, i, h, d) +=! e(b, h, i, j) * v(b, j, h, d) / z(b, h, i)
}
"""


@program(name="attention (B,T,H,D) layout", kind="attention", src=MHA, full=dict(B=8, T=256, H=8, D=64), tiny=dict(B=1,T=3,H=2,D=2),
         inputs=lambda rng, s: [_n(rng, s["B"], s["T"], s["H"], s["D"]) for _ in range(3)])
def _mha(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t
    return {"sdpa": _nograd(torch, lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=0.125).transpose(1, 2))}


SWIGLU = """
def swiglu(float(B,I) x, float(H,I) W1, float(H,I) W3, float(O,H) W2) -> (y) {
  a(b, j) +=! x(b, i) * W1(j, i)
  c(b, j) +=! x(b, i) * W3(j, i)
  g(b, j) = a(b, j) * sigmoid(a(b, j)) * c(b, j)
  y(b, o) +=! g(b, j) * W2(o, j)
}
"""


@program(name="swiglu mlp", kind="matmul", src=SWIGLU, full=dict(B=256, I=512, H=1376, O=512), tiny=dict(B=2,I=3,H=4,O=2),
         inputs=lambda rng, s: [_n(rng, s["B"], s["I"]), _w(rng, s["H"], s["I"]), _w(rng, s["H"], s["I"]), _w(rng, s["O"], s["H"])])
def _swiglu(torch, a, t, s):
    F = torch.nn.functional
    x, W1, W3, W2 = t
    return {"F.silu": _nograd(torch, lambda: F.linear(F.silu(F.linear(x, W1)) * F.linear(x, W3), W2))}


BILINEAR = """
def bil(float(B,I) x1, float(B,J) x2, float(O,I,J) W, float(O) bias) -> (y) {
  y(b, o) +=! x1(b, i) * W(o, i, j) * x2(b, j)
  y(b, o) = y(b, o) + bias(o)
}
"""


@program(name="bilinear layer", kind="matmul", src=BILINEAR, full=dict(B=256, I=64, J=64, O=128), tiny=dict(B=2,I=3,J=2,O=2),
         inputs=lambda rng, s: [_n(rng, s["B"], s["I"]), _n(rng, s["B"], s["J"]), _w(rng, s["O"], s["I"], s["J"]), _n(rng, s["O"])])
def _bil(torch, a, t, s):
    F = torch.nn.functional
    return {"F.bilinear": _nograd(torch, lambda: F.bilinear(t[0], t[1], t[2], t[3]))}


GLU = """
def gluconv(float(B,C,L) x, float(O2,C,K) w, float(O2) bias) -> (y) {
  z(b, o, t) +=! x(b, c, t + k) * w(o, c, k)
  y(b, o, t) = (z(b, o, t) + bias(o)) * sigmoid(z(b, o + O2 / 2, t) + bias(o + O2 / 2)) where o in 0:O2 / 2
}
"""


@program(name="glu conv1d", kind="conv", src=GLU, full=dict(B=16, C=256, L=512, O2=512, K=3), tiny=dict(B=1,C=2,L=5,O2=4,K=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["O2"], s["C"], s["K"]), _n(rng, s["O2"])])
def _glu(torch, a, t, s):
    F = torch.nn.functional
    return {"F.glu(conv1d)": _nograd(torch, lambda: F.glu(F.conv1d(t[0], t[1], t[2]), 1))}


HEAT = """
def heat(float(N,M) u0) -> (u) {
  for t in T {
    if t == 0 { u(t, i, j) = u0(i, j) }
    else { u(t, i, j) = (i >= 1 && i < N - 1 && j >= 1 && j < M - 1) ?
        u(t - 1, i, j) + 0.2 * (u(t - 1, i - 1, j) + u(t - 1, i + 1, j) + u(t - 1, i, j - 1) + u(t - 1, i, j + 1) - 4 * u(t - 1, i, j))
        : u(t - 1, i, j) where i in 0:N, j in 0:M }
  }
}
"""


@program(name="heat stencil 2d (time loop)", kind="stencil", src=HEAT, full=dict(N=512, M=512, T=50), tiny=dict(N=4, M=5, T=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["M"])], free=("T",), pick=lambda r: r[-1])
def _heat(torch, a, t, s):
    u0 = t[0]
    def run():
        u = u0.clone()
        for i in range(s["T"] - 1):
            v = u.clone()
            v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
            u = v
        return u
    return {"torch loop": _nograd(torch, run)}


VITERBI = """
def viterbi(float(T,B,S) em, float(S,S) logA, float(B,S) init) -> (delta) {
  for t in T {
    if t == 0 { delta(t, b, j) = init(b, j) + em(t, b, j) }
    else {
      m(b, j) max=! delta(t - 1, b, i) + logA(i, j)
      delta(t, b, j) = m(b, j) + em(t, b, j)
    }
  }
}
"""


@program(name="viterbi (max-plus recurrence)", kind="rnn", src=VITERBI, full=dict(T=128, B=32, S=256), tiny=dict(T=3, B=2, S=3),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["S"]), _n(rng, s["S"], s["S"]), _n(rng, s["B"], s["S"])])
def _vit(torch, a, t, s):
    em, logA, init = t
    def run():
        d = init + em[0]; ds = [d]
        for i in range(1, em.shape[0]):
            d = (d[:, :, None] + logA).amax(1) + em[i]; ds.append(d)
        return torch.stack(ds)
    return {"torch loop": _nograd(torch, run)}


TRIL = """
def trilmm(float(N,N) a, float(N,M) b) -> (c) {
  c(i, j) +=! (k <= i ? a(i, k) : 0) * b(k, j)
}
"""


@program(name="lower-triangular matmul (select)", kind="matmul", src=TRIL, full=dict(N=1024, M=512), tiny=dict(N=3, M=2),
         inputs=lambda rng, s: [_n(rng, s["N"], s["N"]), _n(rng, s["N"], s["M"])])
def _tril(torch, a, t, s):
    return {"tril @": _nograd(torch, lambda: torch.tril(t[0]) @ t[1])}


POWER = """
def power(float(N,N) A, float(N) v0) -> (v) {
  for t in T {
    if t == 0 { w(i) +=! A(i, j) * v0(j) } else { w(i) +=! A(i, j) * v(t - 1, j) }
    nn +=! w(i) * w(i)
    v(t, i) = w(i) / sqrt(nn)
  }
}
"""


@program(name="power iteration", kind="rnn", src=POWER, full=dict(N=1024, T=50), tiny=dict(N=3, T=2),
         inputs=lambda rng, s: [_n(rng, s["N"], s["N"]), _n(rng, s["N"])], free=("T",), pick=lambda r: r[-1])
def _pow(torch, a, t, s):
    A, v0 = t
    def run():
        v = v0
        for i in range(s["T"]):
            w = A @ v; v = w / torch.sqrt(w @ w)
        return v
    return {"torch loop": _nograd(torch, run)}


ELMAN1 = """
def elman1(float(T,I) x, float(H) h0, float(H,I) Wih, float(H,H) Whh, float(H) bias) -> (h) {
  for t in T {
    if t == 0 { a(j) +=! Whh(j, k) * h0(k) } else { a(j) +=! Whh(j, k) * h(t - 1, k) }
    p(j) +=! Wih(j, i) * x(t, i)
    h(t, j) = tanh(a(j) + p(j) + bias(j))
  }
}
"""


@program(name="elman, no batch dim (out,in)", kind="rnn", src=ELMAN1, full=dict(T=256, I=128, H=256), tiny=dict(T=3, I=2, H=3),
         inputs=lambda rng, s: [_n(rng, s["T"], s["I"]), _n(rng, s["H"]), _w(rng, s["H"], s["I"]), _w(rng, s["H"], s["H"]), _n(rng, s["H"])])
def _e1(torch, a, t, s):
    x, h0, Wih, Whh, bias = t
    rnn = torch.nn.RNN(s["I"], s["H"])
    _copy(torch, rnn.weight_ih_l0, a[2]); _copy(torch, rnn.weight_hh_l0, a[3]); _copy(torch, rnn.bias_ih_l0, a[4])
    _copy(torch, rnn.bias_hh_l0, np.zeros(s["H"], np.float32))
    return {"nn.RNN": _nograd(torch, lambda: rnn(x[:, None], h0[None, None])[0][:, 0])}



# ---------------------------------------------------------------- session 15: linear algebra, scans, more norms

@program(name="gram X^T X", kind="linear", src="""
def gram(float(N,D) X) -> (G) {
  G(i, j) +=! X(n, i) * X(n, j)
}""", full=dict(N=4096, D=256), tiny=dict(N=5, D=3), inputs=lambda r, s: [_n(r, s["N"], s["D"])])
def _g(torch, a, t, s):
    return {"X.T @ X": _nograd(torch, lambda: t[0].T @ t[0])}


@program(name="covariance (centered)", kind="linear", src="""
def cov(float(N,D) X) -> (C) {
  m(i) +=! X(n, i) / N
  C(i, j) +=! (X(n, i) - m(i)) * (X(n, j) - m(j)) / (N - 1)
}""", full=dict(N=4096, D=256), tiny=dict(N=5, D=3), inputs=lambda r, s: [_n(r, s["N"], s["D"])])
def _c(torch, a, t, s):
    return {"torch.cov(X.T)": _nograd(torch, lambda: torch.cov(t[0].T))}


@program(name="floyd-warshall (min-plus loop)", kind="scan", src="""
def fw(float(N,N) D0) -> (D) {
  D(i, j) = D0(i, j)
  for k in N {
    D(i, j) = fmin(D(i, j), D(i, k) + D(k, j))
  }
}""", full=dict(N=512), tiny=dict(N=4), inputs=lambda r, s: [np.abs(_n(r, s["N"], s["N"])) + 0.1])
def _fw(torch, a, t, s):
    def run():
        d = t[0].clone()
        for k in range(s["N"]):
            d = torch.minimum(d, d[:, k:k+1] + d[k:k+1, :])
        return d
    return {"torch loop": _nograd(torch, run)}


@program(name="triangular solve (forward substitution)", kind="linear", src="""
def trsv(float(N,N) L, float(N,B) b) -> (x) {
  for i in N {
    s(c) +=! (j < i ? L(i, j) * x(j, c) : 0) where j in 0:N, c in 0:B
    x(i, c) = (b(i, c) - s(c)) / L(i, i)
  }
}""", full=dict(N=512, B=64), tiny=dict(N=4, B=2),
   inputs=lambda r, s: [(np.tril(_n(r, s["N"], s["N"])) * 0.05 + np.eye(s["N"])*2).astype(np.float32), _n(r, s["N"], s["B"])])
def _trsv(torch, a, t, s):
    return {"solve_triangular": _nograd(torch, lambda: torch.linalg.solve_triangular(t[0], t[1], upper=False))}


@program(name="cumsum over time (loop)", kind="scan", src="""
def cs(float(T,B,D) x) -> (s) {
  for t in T {
    if t == 0 { s(t, b, d) = x(t, b, d) } else { s(t, b, d) = s(t - 1, b, d) + x(t, b, d) }
  }
}""", full=dict(T=512, B=16, D=256), tiny=dict(T=3, B=2, D=3), inputs=lambda r, s: [_n(r, s["T"], s["B"], s["D"])])
def _cs(torch, a, t, s):
    return {"torch.cumsum": _nograd(torch, lambda: torch.cumsum(t[0], 0))}


@program(name="logsumexp rows", kind="norm", src="""
def lse(float(N,D) x) -> (y) {
  m(i) max=! x(i, j)
  e(i) +=! exp(x(i, j) - m(i))
  y(i) = m(i) + log(e(i))
}""", full=dict(N=4096, D=1024), tiny=dict(N=3, D=4), inputs=lambda r, s: [_n(r, s["N"], s["D"])])
def _lse(torch, a, t, s):
    return {"torch.logsumexp": _nograd(torch, lambda: torch.logsumexp(t[0], 1))}


@program(name="group norm", kind="norm", src="""
def gn(float(B,G,C,L) x, float(G,C) g, float(G,C) bb) -> (y) {
  m(b, gg) +=! x(b, gg, c, l) / (C * L)
  v(b, gg) +=! (x(b, gg, c, l) - m(b, gg)) * (x(b, gg, c, l) - m(b, gg)) / (C * L)
  y(b, gg, c, l) = (x(b, gg, c, l) - m(b, gg)) * rsqrt(v(b, gg) + 1e-5) * g(gg, c) + bb(gg, c)
}""", full=dict(B=16, G=8, C=32, L=1024), tiny=dict(B=2, G=2, C=3, L=4),
   inputs=lambda r, s: [_n(r, s["B"], s["G"], s["C"], s["L"]), _w(r, s["G"], s["C"]), _w(r, s["G"], s["C"])])
def _gn(torch, a, t, s):
    F = torch.nn.functional
    B, G, C, L = s["B"], s["G"], s["C"], s["L"]
    return {"F.group_norm": _nograd(torch, lambda: F.group_norm(t[0].reshape(B, G * C, L), G, t[1].reshape(-1), t[2].reshape(-1), eps=1e-5).reshape(B, G, C, L))}


@program(name="conv_transpose1d (select)", kind="conv", src="""
def ct(float(B,C,L) x, float(C,O,K) w) -> (y) {
  y(b, o, t) +=! (t - k >= 0 && t - k < L ? x(b, c, t - k) : 0) * w(c, o, k) where t in 0:L + K - 1, k in 0:K
}""", full=dict(B=16, C=128, L=512, O=128, K=5), tiny=dict(B=2, C=3, L=6, O=2, K=3),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["O"], s["K"])])
def _ct(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv_transpose1d": _nograd(torch, lambda: F.conv_transpose1d(t[0], t[1]))}


@program(name="batched gemv transposed", kind="linear", src="""
def bg(float(B,N,M) A, float(B,N) x) -> (y) {
  y(b, i) +=! A(b, j, i) * x(b, j)
}""", full=dict(B=64, N=512, M=512), tiny=dict(B=2, N=3, M=4), inputs=lambda r, s: [_n(r, s["B"], s["N"], s["M"]), _n(r, s["B"], s["N"])])
def _bg(torch, a, t, s):
    return {"bmm": _nograd(torch, lambda: torch.bmm(t[1][:, None, :], t[0])[:, 0])}


@program(name="attention pooling over time", kind="attention", src="""
def apool(float(B,T,D) h, float(D) q) -> (y) {
  sc(b, t) +=! h(b, t, d) * q(d)
  m(b) max=! sc(b, t)
  e(b, t) = exp(sc(b, t) - m(b))
  z(b) +=! e(b, t)
  y(b, d) +=! e(b, t) * h(b, t, d) / z(b)
}""", full=dict(B=64, T=256, D=512), tiny=dict(B=2, T=3, D=4), inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), _w(r, s["D"])])
def _apool(torch, a, t, s):
    def run():
        w = torch.softmax(t[0] @ t[1], 1)
        return torch.einsum("bt,btd->bd", w, t[0])
    return {"softmax + einsum": _nograd(torch, run)}


@program(name="NCHW -> NHWC transpose", kind="conv", src="""
def tr(float(N,C,H,W) x) -> (y) {
  y(n, h, w, c) = x(n, c, h, w)
}""", full=dict(N=32, C=64, H=56, W=56), tiny=dict(N=1, C=2, H=3, W=2), inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _tr(torch, a, t, s):
    return {"permute.contiguous": _nograd(torch, lambda: t[0].permute(0, 2, 3, 1).contiguous())}


@program(name="layer-norm elman (LN in the loop)", kind="rnn", src="""
def lnrnn(float(T,B,I) x, float(B,H) h0, float(H,I) W, float(H,H) U, float(H) g) -> (h) {
  for t in T {
    if t == 0 { a(b, j) +=! h0(b, k) * U(j, k) } else { a(b, j) +=! h(t - 1, b, k) * U(j, k) }
    a(b, j) += x(t, b, i) * W(j, i)
    m(b) +=! a(b, j) / H
    v(b) +=! (a(b, j) - m(b)) * (a(b, j) - m(b)) / H
    h(t, b, j) = tanh((a(b, j) - m(b)) * rsqrt(v(b) + 1e-5) * g(j))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=3, H=4),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _w(r, s["H"], s["I"]), _w(r, s["H"], s["H"]), 1 + _w(r, s["H"])])
def _lnrnn(torch, a, t, s):
    F = torch.nn.functional
    def run():
        h = t[1]; out = []
        for i in range(s["T"]):
            h = torch.tanh(F.layer_norm(t[0][i] @ t[2].T + h @ t[3].T, (s["H"],), t[4], None, 1e-5))
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="softmax over middle dim", kind="norm", src="""
def smid(float(B,N,D) x) -> (y) {
  m(b, d) max=! x(b, n, d)
  e(b, n, d) = exp(x(b, n, d) - m(b, d))
  z(b, d) +=! e(b, n, d)
  y(b, n, d) = e(b, n, d) / z(b, d)
}""", full=dict(B=32, N=256, D=512), tiny=dict(B=2, N=3, D=4), inputs=lambda r, s: [_n(r, s["B"], s["N"], s["D"])])
def _smid(torch, a, t, s):
    return {"softmax(dim=1)": _nograd(torch, lambda: torch.softmax(t[0], 1))}


# ---------------------------------------------------------------- session 16: losses and more

@program(name="bce with logits", kind="loss", src="""
def bce(float(N,C) x, float(N,C) y) -> (loss) {
  loss +=! (fmax(x(n, c), 0) - x(n, c) * y(n, c) + log(1 + exp(-fabs(x(n, c))))) / (N * C)
}""", full=dict(N=4096, C=1024), tiny=dict(N=3, C=4),
    inputs=lambda rng, s: [_n(rng, s["N"], s["C"]), (rng.random((s["N"], s["C"])) > 0.5).astype(np.float32)])
def _bce(torch, a, t, s):
    F = torch.nn.functional
    return {"F.bce_with_logits": _nograd(torch, lambda: F.binary_cross_entropy_with_logits(t[0], t[1]))}


@program(name="kl div (log probs)", kind="loss", src="""
def kl(float(N,C) lp, float(N,C) q) -> (loss) {
  loss +=! q(n, c) * (log(q(n, c)) - lp(n, c)) / N
}""", full=dict(N=4096, C=1024), tiny=dict(N=3, C=4),
    inputs=lambda rng, s: [np.log(np.full((s["N"], s["C"]), 1.0 / s["C"], np.float32)), (rng.random((s["N"], s["C"])) * 0.9 + 0.1).astype(np.float32)])
def _kl(torch, a, t, s):
    F = torch.nn.functional
    return {"F.kl_div": _nograd(torch, lambda: F.kl_div(t[0], t[1], reduction="batchmean"))}


@program(name="label-smoothed cross entropy", kind="loss", src="""
def ls(float(N,C) x, int32(N) tgt) -> (loss) {
  mx(n) max=! x(n, c)
  se(n) +=! exp(x(n, c) - mx(n))
  sx(n) +=! x(n, c)
  loss +=! (log(se(n)) + mx(n) - 0.9 * x(n, tgt(n)) - 0.1 * sx(n) / C) / N
}""", full=dict(N=4096, C=1000), tiny=dict(N=3, C=5),
    inputs=lambda rng, s: [_n(rng, s["N"], s["C"]), rng.integers(0, s["C"], s["N"]).astype(np.int32)])
def _ls(torch, a, t, s):
    F = torch.nn.functional
    tg = t[1].long()
    return {"F.cross_entropy(label_smoothing)": _nograd(torch, lambda: F.cross_entropy(t[0], tg, label_smoothing=0.1))}


@program(name="key-padding masked attention", kind="attention", src="""
def kpm(float(B,L,D) q, float(B,S,D) k, float(B,S,D) v, int32(B) len) -> (o) {
  s(b, i, j) +=! q(b, i, d) * k(b, j, d)
  m(b, i) max=! (j < len(b) ? s(b, i, j) : -3.0e38)
  e(b, i, j) = j < len(b) ? exp((s(b, i, j) - m(b, i)) * 0.125) : 0
  z(b, i) +=! e(b, i, j)
  o(b, i, d) +=! e(b, i, j) * v(b, j, d) / z(b, i)
}""", full=dict(B=32, L=256, S=256, D=64), tiny=dict(B=2, L=3, S=4, D=2),
    inputs=lambda rng, s: [_n(rng, s["B"], s["L"], s["D"]), _n(rng, s["B"], s["S"], s["D"]), _n(rng, s["B"], s["S"], s["D"]),
                           rng.integers(1, s["S"] + 1, s["B"]).astype(np.int32)])
def _kpm(torch, a, t, s):
    F = torch.nn.functional
    mask = torch.arange(s["S"])[None, None, :] < t[3][:, None, None].long()
    return {"sdpa(mask)": _nograd(torch, lambda: F.scaled_dot_product_attention(t[0], t[1], t[2], attn_mask=mask, scale=0.125))}


@program(name="peephole lstm cell loop", kind="rnn", src="""
def pl(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4,H,I) Wx, float(4,H,H) Wh, float(3,H) p) -> (h, c) {
  for t in T {
    if t == 0 { hp(b, k) = h0(b, k)
                cp(b, k) = c0(b, k) } else { hp(b, k) = h(t - 1, b, k)
                cp(b, k) = c(t - 1, b, k) }
    g(q, b, j) +=! x(t, b, i) * Wx(q, j, i)
    g(q, b, j) += hp(b, k) * Wh(q, j, k)
    c(t, b, j) = sigmoid(g(1, b, j) + p(1, j) * cp(b, j)) * cp(b, j) + sigmoid(g(0, b, j) + p(0, j) * cp(b, j)) * tanh(g(2, b, j))
    h(t, b, j) = sigmoid(g(3, b, j) + p(2, j) * c(t, b, j)) * tanh(c(t, b, j))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=2, B=2, I=3, H=4),
    inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), _n(rng, s["B"], s["H"]), _n(rng, s["B"], s["H"]),
                           _w(rng, 4, s["H"], s["I"]), _w(rng, 4, s["H"], s["H"]), _n(rng, 3, s["H"]) * 0.1],
    pick=lambda r: r[0])
def _pl(torch, a, t, s):
    x, h0, c0, Wx, Wh, p = t
    def run():
        h, c = h0, c0; out = []
        xw = torch.einsum("tbi,qji->tqbj", x, Wx)
        for i in range(s["T"]):
            g = xw[i] + torch.einsum("bk,qjk->qbj", h, Wh)
            c = torch.sigmoid(g[1] + p[1] * c) * c + torch.sigmoid(g[0] + p[0] * c) * torch.tanh(g[2])
            h = torch.sigmoid(g[3] + p[2] * c) * torch.tanh(c); out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="grouped conv1d (G=8, 32 outputs per group)", kind="conv", src="""
def gconv(float(B,C,L) x, float(O,CG,K) w) -> (y) {
  y(b, o, t) +=! x(b, (o / 32) * CG + c, t + k) * w(o, c, k) where t in 0:L - K + 1
}""", full=dict(B=16, C=256, L=512, O=256, CG=32, K=3), tiny=dict(B=1, C=16, L=5, O=256, CG=2, K=3),
    inputs=lambda rng, s: [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["O"], s["CG"], s["K"])])
def _gc(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(groups=8)": _nograd(torch, lambda: F.conv1d(t[0], t[1], groups=8))}


@program(name="grouped conv1d (G=8, group size O / 8)", kind="conv", src="""
def gconv(float(B,C,L) x, float(O,CG,K) w) -> (y) {
  y(b, o, t) +=! x(b, (o / (O / 8)) * CG + c, t + k) * w(o, c, k) where t in 0:L - K + 1
}""", full=dict(B=16, C=256, L=512, O=256, CG=32, K=3), tiny=dict(B=1, C=16, L=5, O=16, CG=2, K=3),
    inputs=lambda rng, s: [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["O"], s["CG"], s["K"])])
def _gc_sized(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(groups=8)": _nograd(torch, lambda: F.conv1d(t[0], t[1], groups=8))}


# ---------------------------------------------------------------- session 21: batch-first RNNs, decoders, pooling

@program(name="gru batch-first (out,in)", kind="rnn", src="""
# GRU over a batch-first input x(b, t, i) (nn.GRU(batch_first=True)), PyTorch's (out, in) weights
def gru(float(B,T,I) x, float(B,H) h0, float(3,H,I) Wih, float(3,H,H) Whh,
        float(3,H) bih, float(3,H) bhh) -> (h) {
  for t in T {
    gi(g, b, j) +=! x(b, t, i) * Wih(g, j, i)
    if t == 0 { gh(g, b, j) +=! h0(b, k) * Whh(g, j, k) }
    else      { gh(g, b, j) +=! h(b, t - 1, k) * Whh(g, j, k) }
    r(b, j) = sigmoid(gi(0, b, j) + bih(0, j) + gh(0, b, j) + bhh(0, j))
    z(b, j) = sigmoid(gi(1, b, j) + bih(1, j) + gh(1, b, j) + bhh(1, j))
    n(b, j) = tanh(gi(2, b, j) + bih(2, j) + r(b, j) * (gh(2, b, j) + bhh(2, j)))
    if t == 0 { h(b, t, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * h0(b, j) }
    else      { h(b, t, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * h(b, t - 1, j) }
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=6),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _n(r, s["B"], s["H"]), _w(r, 3, s["H"], s["I"]),
                         _w(r, 3, s["H"], s["H"]), _w(r, 3, s["H"]), _w(r, 3, s["H"])])
def _gru_bf(torch, a, t, s):
    net = _torch_gru(torch, s["I"], s["H"], *a[2:], batch_first=True)
    return {"nn.GRU(batch_first)": _nograd(torch, lambda: net(t[0], t[1][None])[0])}


@program(name="lstm batch-first, a weight per gate", kind="rnn", src="""
# LSTM over x(b, t, i), gate weights W(q, j, i) in (out, in) layout, the state in hp, cp
def lstm(float(B,T,I) x, float(B,H) h0, float(B,H) c0, float(4,H,I) W, float(4,H,H) U,
         float(4,H) bias) -> (h) {
  hp(b, j) = h0(b, j)
  cp(b, j) = c0(b, j)
  for t in T {
    g(q, b, j) +=! x(b, t, i) * W(q, j, i)
    g(q, b, j) += hp(b, k) * U(q, j, k)
    cp(b, j) = sigmoid(g(1, b, j) + bias(1, j)) * cp(b, j) + sigmoid(g(0, b, j) + bias(0, j)) * tanh(g(2, b, j) + bias(2, j))
    hp(b, j) = sigmoid(g(3, b, j) + bias(3, j)) * tanh(cp(b, j))
    h(b, t, j) = hp(b, j)
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _n(r, s["B"], s["H"]), _n(r, s["B"], s["H"]),
                         _w(r, 4, s["H"], s["I"]), _w(r, 4, s["H"], s["H"]), _w(r, 4, s["H"])])
def _lstm_bf(torch, a, t, s):
    H = s["H"]
    net = torch.nn.LSTM(s["I"], H, batch_first=True)
    _copy(torch, net.weight_ih_l0, a[3].reshape(4 * H, -1))
    _copy(torch, net.weight_hh_l0, a[4].reshape(4 * H, H))
    _copy(torch, net.bias_ih_l0, a[5].reshape(-1))
    _copy(torch, net.bias_hh_l0, np.zeros(4 * H, np.float32))
    return {"nn.LSTM(batch_first)": _nograd(torch, lambda: net(t[0], (t[1][None], t[2][None]))[0])}


@program(name="conv1d channels-last (B,L,C)", kind="conv", src="""
def conv(float(B,L,C) x, float(K,C,O) w) -> (y) {
  y(b, t, o) +=! x(b, t + k, c) * w(k, c, o)
}""", full=dict(B=16, L=512, C=128, O=128, K=3), tiny=dict(B=1, L=5, C=2, O=3, K=3),
    inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _w(r, s["K"], s["C"], s["O"])])
def _conv_cl(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(permute)": _nograd(torch, lambda: F.conv1d(t[0].permute(0, 2, 1), t[1].permute(2, 1, 0))
                                          .permute(0, 2, 1))}


@program(name="attention decoder loop (dot score)", kind="rnn", src="""
# a decoder attending over encoder states each step: dot scores, softmax, context, Elman update
def dec(float(B,S,H) enc, float(B,H) h0, float(H,H) Wc, float(H,H) Wh) -> (h) {
  for t in T {
    if t == 0 { sc(b, s) +=! enc(b, s, d) * h0(b, d) } else { sc(b, s) +=! enc(b, s, d) * h(t - 1, b, d) }
    m(b) max=! sc(b, s)
    e(b, s) = exp(sc(b, s) - m(b))
    z(b) +=! e(b, s)
    ctx(b, d) +=! e(b, s) * enc(b, s, d) / z(b)
    if t == 0 { a(b, j) +=! h0(b, k) * Wh(j, k) } else { a(b, j) +=! h(t - 1, b, k) * Wh(j, k) }
    a(b, j) += ctx(b, k) * Wc(j, k)
    h(t, b, j) = tanh(a(b, j))
  }
}""", full=dict(T=32, B=32, S=128, H=256), tiny=dict(T=3, B=2, S=4, H=5), free=("T",),
    inputs=lambda r, s: [_w(r, s["B"], s["S"], s["H"]), _n(r, s["B"], s["H"]), _w(r, s["H"], s["H"]),
                         _w(r, s["H"], s["H"])])
def _dec(torch, a, t, s):
    def run():
        h, out = t[1], []
        for _ in range(s["T"]):
            w = torch.softmax(torch.einsum("bsd,bd->bs", t[0], h), 1)
            ctx = torch.einsum("bs,bsd->bd", w, t[0])
            h = torch.tanh(h @ t[3].T + ctx @ t[2].T)
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="max over time pooling", kind="norm", src="""
def mpool(float(B,T,D) x) -> (y) {
  y(b, d) max=! x(b, t, d)
}""", full=dict(B=64, T=256, D=512), tiny=dict(B=2, T=3, D=4), inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"])])
def _mpool(torch, a, t, s):
    return {"amax(1)": _nograd(torch, lambda: t[0].amax(1))}


@program(name="masked mean pooling", kind="norm", src="""
def mmean(float(B,T,D) x, float(B,T) m) -> (y) {
  num(b, d) +=! x(b, t, d) * m(b, t)
  den(b) +=! m(b, t)
  y(b, d) = num(b, d) / den(b)
}""", full=dict(B=64, T=256, D=512), tiny=dict(B=2, T=3, D=4),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), np.maximum(
        (r.random((s["B"], s["T"])) < 0.8), np.eye(s["B"], s["T"], dtype=bool)).astype(np.float32)])
def _mmean(torch, a, t, s):
    return {"(x*m).sum/m.sum": _nograd(torch, lambda: (t[0] * t[1][:, :, None]).sum(1) / t[1].sum(1, keepdim=True))}


@program(name="linear + layer norm", kind="norm", src="""
def linln(float(N,K) x, float(C,K) W, float(C) bias, float(C) g, float(C) be) -> (y) {
  z(n, c) +=! x(n, k) * W(c, k)
  z(n, c) = z(n, c) + bias(c)
  mu(n) +=! z(n, c) / C
  var(n) +=! (z(n, c) - mu(n)) * (z(n, c) - mu(n)) / C
  y(n, c) = (z(n, c) - mu(n)) / sqrt(var(n) + 1e-5) * g(c) + be(c)
}""", full=dict(N=2048, K=512, C=512), tiny=dict(N=2, K=3, C=4),
    inputs=lambda r, s: [_n(r, s["N"], s["K"]), _w(r, s["C"], s["K"]), _w(r, s["C"]), _n(r, s["C"]), _n(r, s["C"])])
def _linln(torch, a, t, s):
    F = torch.nn.functional
    return {"F.linear + F.layer_norm": _nograd(torch, lambda: F.layer_norm(F.linear(t[0], t[1], t[2]), (s["C"],),
                                                                             t[3], t[4]))}


@program(name="dilated rnn (h(t-2))", kind="rnn", src="""
# an RNN whose state skips a step: h(t) from h(t - 2)
def drnn(float(T,B,I) x, float(2,B,H) h0, float(H,I) W, float(H,H) U) -> (h) {
  for t in T {
    if t < 2 { a(b, j) +=! h0(t, b, k) * U(j, k) } else { a(b, j) +=! h(t - 2, b, k) * U(j, k) }
    a(b, j) += x(t, b, i) * W(j, i)
    h(t, b, j) = tanh(a(b, j))
  }
}""", full=dict(T=128, B=16, I=256, H=256), tiny=dict(T=4, B=2, I=3, H=5),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, 2, s["B"], s["H"]), _w(r, s["H"], s["I"]),
                         _w(r, s["H"], s["H"])])
def _drnn(torch, a, t, s):
    def run():
        xw = t[0] @ t[2].T
        hs = [t[1][0], t[1][1]]
        for i in range(s["T"]):
            hs.append(torch.tanh(xw[i] + hs[-2] @ t[3].T))
        return torch.stack(hs[2:])
    return {"torch loop": _nograd(torch, run)}


# ---------------------------------------------------------------- session 24: programs written other ways

LSTM_SLICES = """
def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4*H,I) Wih, float(4*H,H) Whh,
         float(4*H) bih, float(4*H) bhh) -> (h) {
  for t in T {
    xi(b, j) +=! x(t, b, k) * Wih(j, k) where j in 0:H
    xf(b, j) +=! x(t, b, k) * Wih(H + j, k) where j in 0:H
    xg(b, j) +=! x(t, b, k) * Wih(2 * H + j, k) where j in 0:H
    xo(b, j) +=! x(t, b, k) * Wih(3 * H + j, k) where j in 0:H
    if t == 0 {
      hi(b, j) +=! h0(b, k) * Whh(j, k) where j in 0:H
      hf(b, j) +=! h0(b, k) * Whh(H + j, k) where j in 0:H
      hg(b, j) +=! h0(b, k) * Whh(2 * H + j, k) where j in 0:H
      ho(b, j) +=! h0(b, k) * Whh(3 * H + j, k) where j in 0:H
    } else {
      hi(b, j) +=! h(t - 1, b, k) * Whh(j, k) where j in 0:H
      hf(b, j) +=! h(t - 1, b, k) * Whh(H + j, k) where j in 0:H
      hg(b, j) +=! h(t - 1, b, k) * Whh(2 * H + j, k) where j in 0:H
      ho(b, j) +=! h(t - 1, b, k) * Whh(3 * H + j, k) where j in 0:H
    }
    ig(b, j) = 1 / (1 + exp(-(xi(b, j) + hi(b, j) + bih(j) + bhh(j))))
    fg(b, j) = 1 / (1 + exp(-(xf(b, j) + hf(b, j) + bih(H + j) + bhh(H + j))))
    gg(b, j) = tanh(xg(b, j) + hg(b, j) + bih(2 * H + j) + bhh(2 * H + j))
    og(b, j) = 1 / (1 + exp(-(xo(b, j) + ho(b, j) + bih(3 * H + j) + bhh(3 * H + j))))
    if t == 0 { c(t, b, j) = fg(b, j) * c0(b, j) + ig(b, j) * gg(b, j) }
    else      { c(t, b, j) = fg(b, j) * c(t - 1, b, j) + ig(b, j) * gg(b, j) }
    h(t, b, j) = og(b, j) * tanh(c(t, b, j))
  }
}
"""

@program(name="lstm, gates sliced from (4H,in), 1/(1+exp(-x))", kind="rnn", src=LSTM_SLICES, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4),
         inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _n(r, s["B"], s["H"]),
                              _w(r, 4 * s["H"], s["I"]), _w(r, 4 * s["H"], s["H"]), _w(r, 4 * s["H"]), _w(r, 4 * s["H"])])
def _ls(torch, a, t, s):
    net = torch.nn.LSTM(s["I"], s["H"])
    _copy(torch, net.weight_ih_l0, a[3]); _copy(torch, net.weight_hh_l0, a[4])
    _copy(torch, net.bias_ih_l0, a[5]); _copy(torch, net.bias_hh_l0, a[6])
    return {"torch.nn.LSTM": _nograd(torch, lambda: net(t[0], (t[1][None], t[2][None]))[0])}


ADDITIVE = """
def additive(float(B,T,E) enc, float(B,D) dec, float(E,A) We, float(D,A) Wd, float(A) v) -> (ctx) {
  pe(b, t, a) +=! enc(b, t, e) * We(e, a)
  pd(b, a) +=! dec(b, d) * Wd(d, a)
  s(b, t) +=! v(a) * tanh(pe(b, t, a) + pd(b, a))
  m(b) max=! s(b, t)
  w(b, t) = exp(s(b, t) - m(b))
  z(b) +=! w(b, t)
  ctx(b, e) +=! w(b, t) * enc(b, t, e) / z(b)
}
"""

@program(name="additive (bahdanau) attention", kind="attention", src=ADDITIVE, full=dict(B=32, T=128, E=256, D=256, A=256),
         tiny=dict(B=2, T=3, E=4, D=3, A=2),
         inputs=lambda r, s: [_n(r, s["B"], s["T"], s["E"]), _n(r, s["B"], s["D"]), _w(r, s["E"], s["A"]), _w(r, s["D"], s["A"]), _w(r, s["A"])])
def _add(torch, a, t, s):
    enc, dec, We, Wd, v = t
    def run():
        sc = torch.tanh(enc @ We + (dec @ Wd)[:, None, :]) @ v
        w = torch.softmax(sc, 1)
        return torch.einsum("bt,bte->be", w, enc)
    return {"torch": _nograd(torch, run)}


NLL = """
def nll(float(N,C) x, int32(N) y) -> (loss) {
  m(n) max=! x(n, c)
  e(n) +=! exp(x(n, c) - m(n))
  loss +=! (m(n) + log(e(n)) - x(n, y(n))) / N
}
"""

@program(name="cross entropy with int labels", kind="loss", src=NLL, full=dict(N=4096, C=1000), tiny=dict(N=3, C=5),
         inputs=lambda r, s: [_n(r, s["N"], s["C"]), r.integers(0, s["C"], s["N"]).astype(np.int32)])
def _nll(torch, a, t, s):
    F = torch.nn.functional
    return {"F.cross_entropy": _nograd(torch, lambda: F.cross_entropy(t[0], t[1].long()))}


LORA = """
def lora(float(B,I) x, float(O,I) W, float(I,R) A, float(R,O) Bm) -> (y) {
  y(b, o) +=! x(b, i) * W(o, i)
  y(b, o) += x(b, i) * A(i, r) * Bm(r, o)
}
"""

@program(name="linear + low-rank (lora) in one statement", kind="matmul", src=LORA, full=dict(B=256, I=1024, O=1024, R=16), tiny=dict(B=2, I=3, O=4, R=2),
         inputs=lambda r, s: [_n(r, s["B"], s["I"]), _w(r, s["O"], s["I"]), _w(r, s["I"], s["R"]), _w(r, s["R"], s["O"])])
def _lora(torch, a, t, s):
    return {"torch": _nograd(torch, lambda: t[0] @ t[1].T + (t[0] @ t[2]) @ t[3])}


SEQ2SEQ = """
def s2s(float(T,B,H) xe, float(S,B,H) xd, float(H,H) U, float(H,H) U2, float(H,H) W2) -> (hd) {
  for t in T {
    if t == 0 { he(t, b, j) = tanh(xe(t, b, j)) }
    else {
      pe(b, j) +=! he(t - 1, b, k) * U(k, j)
      he(t, b, j) = tanh(xe(t, b, j) + pe(b, j))
    }
  }
  for s in S {
    if s == 0 { pd(b, j) +=! he(T - 1, b, k) * U2(k, j) }
    else { pd(b, j) +=! hd(s - 1, b, k) * W2(k, j) }
    hd(s, b, j) = tanh(xd(s, b, j) + pd(b, j))
  }
}
"""

@program(name="seq2seq encoder then decoder loop", kind="rnn", src=SEQ2SEQ, full=dict(T=64, S=32, B=32, H=256),
         tiny=dict(T=3, S=2, B=2, H=3),
         inputs=lambda r, s: [_n(r, s["T"], s["B"], s["H"]), _n(r, s["S"], s["B"], s["H"]), _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"])])
def _s2s(torch, a, t, s):
    xe, xd, U, U2, W2 = t
    def run():
        h = torch.tanh(xe[0])
        for i in range(1, s["T"]):
            h = torch.tanh(xe[i] + h @ U)
        out = []
        h = torch.tanh(xd[0] + h @ U2); out.append(h)
        for i in range(1, s["S"]):
            h = torch.tanh(xd[i] + h @ W2); out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


REV_GRU = """
def rgru(float(T,B,I) x, float(B,H) h0, float(3*H,I) Wih, float(3*H,H) Whh, float(3*H) bih, float(3*H) bhh) -> (h) {
  for t in T {
    gi(b, r) +=! x(T - 1 - t, b, i) * Wih(r, i)
    if t == 0 { gh(b, r) +=! h0(b, k) * Whh(r, k) }
    else      { gh(b, r) +=! h(T - t, b, k) * Whh(r, k) }
    rg(b, j) = sigmoid(gi(b, j) + bih(j) + gh(b, j) + bhh(j)) where j in 0:H
    zg(b, j) = sigmoid(gi(b, H + j) + bih(H + j) + gh(b, H + j) + bhh(H + j)) where j in 0:H
    ng(b, j) = tanh(gi(b, 2 * H + j) + bih(2 * H + j) + rg(b, j) * (gh(b, 2 * H + j) + bhh(2 * H + j))) where j in 0:H
    if t == 0 { h(T - 1 - t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h0(b, j) }
    else      { h(T - 1 - t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h(T - t, b, j) }
  }
}
"""

@program(name="reversed gru, stacked (3H,in), odd sizes", kind="rnn", src=REV_GRU, full=dict(T=50, B=10, I=100, H=200),
         tiny=dict(T=3, B=2, I=3, H=2),
         inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _w(r, 3 * s["H"], s["I"]), _w(r, 3 * s["H"], s["H"]), _w(r, 3 * s["H"]), _w(r, 3 * s["H"])])
def _rg(torch, a, t, s):
    net = torch.nn.GRU(s["I"], s["H"])
    _copy(torch, net.weight_ih_l0, a[2]); _copy(torch, net.weight_hh_l0, a[3])
    _copy(torch, net.bias_ih_l0, a[4]); _copy(torch, net.bias_hh_l0, a[5])
    return {"torch.nn.GRU": _nograd(torch, lambda: net(t[0].flip(0), t[1][None])[0].flip(0))}


FFN_LN = """
def block(float(N,D) x, float(F,D) W1, float(F) b1, float(D,F) W2, float(D) b2, float(D) g, float(D) be) -> (y) {
  hh(n, f) +=! x(n, d) * W1(f, d)
  a(n, f) = fmax(hh(n, f) + b1(f), 0)
  o(n, d) +=! a(n, f) * W2(d, f)
  r(n, d) = x(n, d) + o(n, d) + b2(d)
  mu(n) +=! r(n, d) / D
  var(n) +=! (r(n, d) - mu(n)) * (r(n, d) - mu(n)) / D
  y(n, d) = (r(n, d) - mu(n)) / sqrt(var(n) + 1e-5) * g(d) + be(d)
}
"""

@program(name="ffn + residual + layer norm (torch layout)", kind="matmul", src=FFN_LN, full=dict(N=500, D=300, F=1200),
         tiny=dict(N=2, D=3, F=4),
         inputs=lambda r, s: [_n(r, s["N"], s["D"]), _w(r, s["F"], s["D"]), _w(r, s["F"]), _w(r, s["D"], s["F"]), _w(r, s["D"]), _w(r, s["D"]), _w(r, s["D"])])
def _ffn(torch, a, t, s):
    F = torch.nn.functional
    x, W1, b1, W2, b2, g, be = t
    return {"torch": _nograd(torch, lambda: F.layer_norm(x + F.linear(F.relu(F.linear(x, W1, b1)), W2, b2), (s["D"],), g, be, 1e-5))}


PAD_CONV = """
def pconv(float(B,C,L) x, float(O,C,K) w, float(O) bias) -> (y) {
  y(b, o, t) +=! (t + k - 2 >= 0 && t + k - 2 < L ? x(b, c, t + k - 2) : 0) * w(o, c, k) where t in 0:L, k in 0:K
  y(b, o, t) = fmax(y(b, o, t) + bias(o), 0)
}
"""

@program(name="conv1d pad 2 K=5 + relu, odd channels", kind="conv", src=PAD_CONV, full=dict(B=8, C=100, L=1000, O=120, K=5),
         tiny=dict(B=1, C=2, L=6, O=3, K=5),
         inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["O"], s["C"], s["K"]), _w(r, s["O"])])
def _pc(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d": _nograd(torch, lambda: F.relu(F.conv1d(t[0], t[1], t[2], padding=2)))}


ELMAN_SMALL = """
def elman(float(T,I) x, float(H) h0, float(H,I) Wx, float(H,H) Wh, float(H) b) -> (h) {
  for t in T {
    if t == 0 { p(j) +=! Wh(j, k) * h0(k) } else { p(j) +=! Wh(j, k) * h(t - 1, k) }
    q(j) +=! Wx(j, i) * x(t, i)
    h(t, j) = tanh(p(j) + q(j) + b(j))
  }
}
"""

@program(name="elman, one sequence, H=64", kind="rnn", src=ELMAN_SMALL, full=dict(T=1000, I=32, H=64),
         tiny=dict(T=3, I=2, H=3),
         inputs=lambda r, s: [_n(r, s["T"], s["I"]), _n(r, s["H"]), _w(r, s["H"], s["I"]), _w(r, s["H"], s["H"]), _w(r, s["H"])])
def _es(torch, a, t, s):
    net = torch.nn.RNN(s["I"], s["H"])
    _copy(torch, net.weight_ih_l0, a[2]); _copy(torch, net.weight_hh_l0, a[3]); _copy(torch, net.bias_ih_l0, a[4])
    _copy(torch, net.bias_hh_l0, np.zeros(s["H"], np.float32))
    return {"nn.RNN": _nograd(torch, lambda: net(t[0][:, None], t[1][None, None])[0][:, 0])}


LUONG_DEC = """
# a decoder attending over the encoder's states with Luong's "general" score
def luong(float(B,S,H) enc, float(B,H) h0, float(H,H) Wa, float(H,H) Wc, float(H,H) U) -> (h) {
  for t in T {
    if t == 0 { sc(b, s) +=! h0(b, i) * Wa(i, j) * enc(b, s, j) }
    else      { sc(b, s) +=! h(t - 1, b, i) * Wa(i, j) * enc(b, s, j) }
    m(b) max=! sc(b, s)
    e(b, s) = exp(sc(b, s) - m(b))
    z(b) +=! e(b, s)
    ctx(b, j) +=! e(b, s) * enc(b, s, j) / z(b)
    if t == 0 { p(b, j) +=! ctx(b, k) * Wc(k, j) + h0(b, k) * U(k, j) }
    else      { p(b, j) +=! ctx(b, k) * Wc(k, j) + h(t - 1, b, k) * U(k, j) }
    h(t, b, j) = tanh(p(b, j))
  }
}
"""


@program(name="luong attention decoder loop", kind="rnn", src=LUONG_DEC, full=dict(B=32, S=128, H=256, T=32),
         tiny=dict(B=2, S=3, H=4, T=3), free=("T",),
         # scores of a few units: a softmax that stays smooth (with sharp scores the
         # argmax flips with rounding and float32 results leave float64's within 20 steps)
         inputs=lambda r, s: [_n(r, s["B"], s["S"], s["H"]), _n(r, s["B"], s["H"]), _w(r, s["H"], s["H"]) * 0.1,
                              _w(r, s["H"], s["H"]) * 0.5, _w(r, s["H"], s["H"]) * 0.5])
def _luong(torch, a, t, s):
    enc, h, Wa, Wc, U = t

    def run():
        out, prev = [], h
        for _ in range(s["T"]):
            w = torch.softmax(torch.bmm(enc, (prev @ Wa)[:, :, None])[:, :, 0], 1)
            ctx = torch.bmm(w[:, None, :], enc)[:, 0]
            prev = torch.tanh(ctx @ Wc + prev @ U)
            out.append(prev)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="gru, r applied before U (Cho), (in,out)", kind="rnn", src="""
def gru(float(T,B,I) x, float(B,H) h0, float(3,I,H) W, float(3,H,H) U) -> (h) {
  for t in T {
    xw(g, b, j) +=! x(t, b, i) * W(g, i, j)
    if t == 0 { hp(b, j) = h0(b, j) } else { hp(b, j) = h(t - 1, b, j) }
    ru(g, b, j) +=! hp(b, k) * U(g, k, j) where g in 0:2
    r(b, j) = sigmoid(xw(0, b, j) + ru(0, b, j))
    z(b, j) = sigmoid(xw(1, b, j) + ru(1, b, j))
    rh(b, k) = r(b, k) * hp(b, k)
    nu(b, j) +=! rh(b, k) * U(2, k, j)
    n(b, j) = tanh(xw(2, b, j) + nu(b, j))
    h(t, b, j) = (1 - z(b, j)) * hp(b, j) + z(b, j) * n(b, j)
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=3, H=4),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _w(r, 3, s["I"], s["H"]), _w(r, 3, s["H"], s["H"])])
def _cho(torch, a, t, s):
    x, h0, W, U = t
    def run():
        xw = torch.einsum("tbi,gij->gtbj", x, W)
        h = h0; out = []
        for i in range(s["T"]):
            r = torch.sigmoid(xw[0, i] + h @ U[0]); z = torch.sigmoid(xw[1, i] + h @ U[1])
            n = torch.tanh(xw[2, i] + (r * h) @ U[2])
            h = (1 - z) * h + z * n; out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="mha with head-split projections W(h, d, i)", kind="attention", src="""
def mha(float(B,T,E) x, float(NH,D,E) Wq, float(NH,D,E) Wk, float(NH,D,E) Wv) -> (o) {
  q(b, h, t, d) +=! x(b, t, i) * Wq(h, d, i)
  k(b, h, t, d) +=! x(b, t, i) * Wk(h, d, i)
  v(b, h, t, d) +=! x(b, t, i) * Wv(h, d, i)
  s(b, h, t, u) +=! q(b, h, t, d) * k(b, h, u, d) / sqrt(float(D))
  m(b, h, t) max=! s(b, h, t, u)
  e(b, h, t, u) = exp(s(b, h, t, u) - m(b, h, t))
  z(b, h, t) +=! e(b, h, t, u)
  o(b, t, h, d) +=! e(b, h, t, u) * v(b, h, u, d) / z(b, h, t)
}""", full=dict(B=8, T=128, E=256, NH=4, D=64), tiny=dict(B=1, T=3, E=4, NH=2, D=2),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["E"])] + [_w(r, s["NH"], s["D"], s["E"]) for _ in range(3)])
def _mha(torch, a, t, s):
    F = torch.nn.functional
    x, Wq, Wk, Wv = t
    B, T, NH, D = s["B"], s["T"], s["NH"], s["D"]
    def run():
        q, k, v = ((x @ W.reshape(NH * D, -1).T).view(B, T, NH, D).transpose(1, 2) for W in (Wq, Wk, Wv))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, NH, D)
    return {"linear + sdpa": _nograd(torch, run)}


@program(name="conv1d via im2col statement", kind="conv", src="""
def c(float(B,C,L) x, float(O,C,K) w) -> (y) {
  col(b, c, k, t) = x(b, c, t + k) where t in 0:L - K + 1
  y(b, o, t) +=! col(b, c, k, t) * w(o, c, k)
}""", full=dict(B=16, C=128, L=512, O=128, K=3), tiny=dict(B=1, C=2, L=5, O=3, K=3),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["O"], s["C"], s["K"])])
def _im2col(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d": _nograd(torch, lambda: F.conv1d(t[0], t[1]))}


@program(name="nll of a softmax (log p at label)", kind="loss", src="""
def nll(float(N,C) x, int32(N) y) -> (loss) {
  m(n) max=! x(n, c)
  e(n, c) = exp(x(n, c) - m(n))
  s(n) +=! e(n, c)
  p(n, c) = e(n, c) / s(n)
  loss +=! -log(p(n, y(n))) / N
}""", full=dict(N=4096, C=1000), tiny=dict(N=3, C=5),
   inputs=lambda r, s: [_n(r, s["N"], s["C"]), r.integers(0, s["C"], s["N"]).astype(np.int32)])
def _nll2(torch, a, t, s):
    F = torch.nn.functional
    return {"F.cross_entropy": _nograd(torch, lambda: F.cross_entropy(t[0], t[1].long()))}


@program(name="batch norm inference NCHW", kind="norm", src="""
def bn(float(N,C,H,W) x, float(C) rm, float(C) rv, float(C) g, float(C) bb) -> (y) {
  y(n, c, h, w) = (x(n, c, h, w) - rm(c)) * g(c) / sqrt(rv(c) + 1e-5) + bb(c)
}""", full=dict(N=32, C=64, H=56, W=56), tiny=dict(N=1, C=2, H=3, W=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _n(r, s["C"]), np.abs(_n(r, s["C"])) + 0.5, _n(r, s["C"]), _n(r, s["C"])])
def _bni(torch, a, t, s):
    F = torch.nn.functional
    return {"F.batch_norm(eval)": _nograd(torch, lambda: F.batch_norm(t[0], t[1], t[2], t[3], t[4], False, 0.1, 1e-5))}


@program(name="max pool 1d k=3 s=2", kind="conv", src="""
def mp(float(B,C,L) x) -> (y) {
  y(b, c, t) max=! x(b, c, 2 * t + k) where k in 0:3, t in 0:(L - 3) / 2 + 1
}""", full=dict(B=32, C=256, L=1024), tiny=dict(B=1, C=2, L=7),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"])])
def _mp1(torch, a, t, s):
    F = torch.nn.functional
    return {"F.max_pool1d": _nograd(torch, lambda: F.max_pool1d(t[0], 3, 2))}


@program(name="lstm, one gate statement with select activation", kind="rnn", src="""
def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4,I,H) Wx, float(4,H,H) Wh) -> (h) {
  for t in T {
    z(g, b, j) +=! x(t, b, i) * Wx(g, i, j)
    if t == 0 { z(g, b, j) += h0(b, k) * Wh(g, k, j) } else { z(g, b, j) += h(t - 1, b, k) * Wh(g, k, j) }
    a(g, b, j) = g == 2 ? tanh(z(g, b, j)) : sigmoid(z(g, b, j))
    if t == 0 { c(t, b, j) = a(1, b, j) * c0(b, j) + a(0, b, j) * a(2, b, j) }
    else { c(t, b, j) = a(1, b, j) * c(t - 1, b, j) + a(0, b, j) * a(2, b, j) }
    h(t, b, j) = a(3, b, j) * tanh(c(t, b, j))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=3, H=4),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _n(r, s["B"], s["H"]), _w(r, 4, s["I"], s["H"]), _w(r, 4, s["H"], s["H"])])
def _lsel(torch, a, t, s):
    I, H = s["I"], s["H"]
    net = torch.nn.LSTM(I, H)
    _copy(torch, net.weight_ih_l0, a[3].transpose(0, 2, 1).reshape(4 * H, I))
    _copy(torch, net.weight_hh_l0, a[4].transpose(0, 2, 1).reshape(4 * H, H))
    _copy(torch, net.bias_ih_l0, np.zeros(4 * H, np.float32)); _copy(torch, net.bias_hh_l0, np.zeros(4 * H, np.float32))
    return {"torch.nn.LSTM": _nograd(torch, lambda: net(t[0], (t[1][None], t[2][None]))[0])}


@program(name="gelu (erf) mlp, torch layout", kind="matmul", src="""
def mlp(float(B,I) x, float(H,I) W1, float(H) b1, float(O,H) W2, float(O) b2) -> (y) {
  a(b, j) +=! x(b, i) * W1(j, i)
  g(b, j) = 0.5 * (a(b, j) + b1(j)) * (1 + erf((a(b, j) + b1(j)) / sqrt(2.0)))
  y(b, o) +=! g(b, j) * W2(o, j)
  y(b, o) = y(b, o) + b2(o)
}""", full=dict(B=512, I=768, H=3072, O=768), tiny=dict(B=2, I=3, H=4, O=2),
   inputs=lambda r, s: [_n(r, s["B"], s["I"]), _w(r, s["H"], s["I"]), _w(r, s["H"]), _w(r, s["O"], s["H"]), _w(r, s["O"])])
def _gelu2(torch, a, t, s):
    F = torch.nn.functional
    return {"torch": _nograd(torch, lambda: F.linear(F.gelu(F.linear(t[0], t[1], t[2])), t[3], t[4]))}


@program(name="char-rnn, logits inside the loop", kind="rnn", src="""
def charrnn(float(T,B,I) x, float(B,H) h0, float(H,I) Wx, float(H,H) Wh, float(V,H) Wo) -> (y) {
  for t in T {
    a(b, j) +=! x(t, b, i) * Wx(j, i)
    if t == 0 { a(b, j) += h0(b, k) * Wh(j, k) } else { a(b, j) += h(t - 1, b, k) * Wh(j, k) }
    h(t, b, j) = tanh(a(b, j))
    y(t, b, v) +=! h(t, b, j) * Wo(v, j)
  }
}""", full=dict(T=64, B=32, I=128, H=256, V=2000), tiny=dict(T=3, B=2, I=3, H=4, V=5),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _w(r, s["H"], s["I"]), _w(r, s["H"], s["H"]), _w(r, s["V"], s["H"])])
def _charrnn(torch, a, t, s):
    rnn = torch.nn.RNN(s["I"], s["H"], bias=False)
    _copy(torch, rnn.weight_ih_l0, a[2]); _copy(torch, rnn.weight_hh_l0, a[3])
    return {"nn.RNN + linear": _nograd(torch, lambda: rnn(t[0], t[1][None])[0] @ t[4].T)}


@program(name="tcn block (two dilated causal convs + residual)", kind="conv", src="""
def tcn(float(B,C,L) x, float(C,C,3) w1, float(C,C,3) w2) -> (y) {
  a(b, o, t) +=! (t - 2 * (2 - k) >= 0 ? x(b, c, t - 2 * (2 - k)) : 0) * w1(o, c, k) where t in 0:L, k in 0:3
  r(b, o, t) = fmax(a(b, o, t), 0)
  z(b, o, t) +=! (t - 2 * (2 - k) >= 0 ? r(b, c, t - 2 * (2 - k)) : 0) * w2(o, c, k) where t in 0:L, k in 0:3
  y(b, o, t) = fmax(z(b, o, t), 0) + x(b, o, t)
}""", full=dict(B=16, C=128, L=512), tiny=dict(B=1, C=2, L=6),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["C"], 3), _w(r, s["C"], s["C"], 3)])
def _tcn(torch, a, t, s):
    F = torch.nn.functional
    def run():
        h = F.relu(F.conv1d(F.pad(t[0], (4, 0)), t[1], dilation=2))
        return F.relu(F.conv1d(F.pad(h, (4, 0)), t[2], dilation=2)) + t[0]
    return {"F.conv1d x2": _nograd(torch, run)}


@program(name="alibi attention (position bias)", kind="attention", src="""
def alibi(float(B,NH,L,D) q, float(B,NH,L,D) k, float(B,NH,L,D) v, float(NH) slope) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d) / sqrt(float(D))
  sb(b, h, i, j) = s(b, h, i, j) - slope(h) * fabs(float(i - j))
  m(b, h, i) max=! sb(b, h, i, j)
  e(b, h, i, j) = exp(sb(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! e(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
}""", full=dict(B=4, NH=8, L=256, D=64), tiny=dict(B=1, NH=2, L=3, D=2),
   inputs=lambda r, s: [_n(r, s["B"], s["NH"], s["L"], s["D"]) for _ in range(3)] + [np.abs(_n(r, s["NH"])) * 0.1])
def _alibi(torch, a, t, s):
    F = torch.nn.functional
    L = s["L"]
    pos = torch.arange(L)
    bias = -(t[3][:, None, None] * (pos[:, None] - pos[None, :]).abs()[None].float())
    return {"sdpa(bias)": _nograd(torch, lambda: F.scaled_dot_product_attention(t[0], t[1], t[2], attn_mask=bias[None]))}


@program(name="cosine similarity matrix", kind="matmul", src="""
def cos(float(N,D) a, float(M,D) b) -> (s) {
  na(i) +=! a(i, d) * a(i, d)
  nb(j) +=! b(j, d) * b(j, d)
  s(i, j) +=! a(i, d) * b(j, d)
  s(i, j) = s(i, j) / sqrt(na(i) * nb(j) + 1e-12)
}""", full=dict(N=2048, M=2048, D=128), tiny=dict(N=3, M=2, D=4),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["M"], s["D"])])
def _cos(torch, a, t, s):
    F = torch.nn.functional
    return {"normalize @": _nograd(torch, lambda: F.normalize(t[0], dim=1) @ F.normalize(t[1], dim=1).T)}


@program(name="ctc-like alpha recursion (logsumexp)", kind="rnn", src="""
def alpha(float(T,B,S) em, float(B,S) a0) -> (a) {
  for t in T {
    if t == 0 { a(t, b, s) = a0(b, s) + em(t, b, s) }
    else {
      p(b, s) = s > 0 ? a(t - 1, b, s - 1) : -1e30 where s in 0:S
      mx(b, s) = fmax(a(t - 1, b, s), p(b, s))
      a(t, b, s) = mx(b, s) + log(exp(a(t - 1, b, s) - mx(b, s)) + exp(p(b, s) - mx(b, s))) + em(t, b, s)
    }
  }
}""", full=dict(T=256, B=32, S=256), tiny=dict(T=3, B=2, S=3),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["S"]), _n(r, s["B"], s["S"])])
def _alpha(torch, a, t, s):
    def run():
        al = t[1] + t[0][0]; out = [al]
        for i in range(1, s["T"]):
            p = torch.cat([torch.full_like(al[:, :1], -1e30), al[:, :-1]], 1)
            al = torch.logaddexp(al, p) + t[0][i]; out.append(al)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="instance norm 2d", kind="norm", src="""
def inorm(float(N,C,H,W) x) -> (y) {
  m(n, c) +=! x(n, c, h, w) / (H * W)
  v(n, c) +=! (x(n, c, h, w) - m(n, c)) * (x(n, c, h, w) - m(n, c)) / (H * W)
  y(n, c, h, w) = (x(n, c, h, w) - m(n, c)) * rsqrt(v(n, c) + 1e-5)
}""", full=dict(N=16, C=64, H=64, W=64), tiny=dict(N=1, C=2, H=3, W=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _inorm(torch, a, t, s):
    F = torch.nn.functional
    return {"F.instance_norm": _nograd(torch, lambda: F.instance_norm(t[0], eps=1e-5))}


@program(name="fasttext (embedding mean + linear)", kind="embedding", src="""
def ft(int32(B,L) tok, float(V,E) emb, float(K,E) W) -> (y) {
  m(b, e) +=! emb(tok(b, l), e) / L
  y(b, k) +=! m(b, e) * W(k, e)
}""", full=dict(B=1024, L=64, V=50000, E=128, K=32), tiny=dict(B=2, L=3, V=7, E=4, K=2),
   inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["L"])).astype(np.int32), _n(r, s["V"], s["E"]), _w(r, s["K"], s["E"])])
def _ft(torch, a, t, s):
    F = torch.nn.functional
    return {"embedding_bag + linear": _nograd(torch, lambda: F.embedding_bag(t[0].long(), t[1], mode="mean") @ t[2].T)}


@program(name="multi-margin (hinge) loss", kind="loss", src="""
def hinge(float(N,C) x, int32(N) y) -> (loss) {
  l(n, c) = c == y(n) ? 0 : fmax(0, 1 - x(n, y(n)) + x(n, c))
  loss +=! l(n, c) / (N * C)
}""", full=dict(N=4096, C=1000), tiny=dict(N=3, C=4),
   inputs=lambda r, s: [_n(r, s["N"], s["C"]), r.integers(0, s["C"], s["N"]).astype(np.int32)])
def _hinge(torch, a, t, s):
    F = torch.nn.functional
    return {"F.multi_margin_loss": _nograd(torch, lambda: F.multi_margin_loss(t[0], t[1].long()))}


# ---------------------------------------------------------------- session 25: more programs written other ways

@program(name="conv rnn (3x3 same conv of the hidden image)", kind="rnn", src="""
# a convolutional RNN: the hidden state is an image, updated by a 3x3 'same' convolution each step
def convrnn(float(T,B,C,H,W) x, float(C,C,3,3) Wh, float(C,C) Wx, float(C) bias) -> (h) {
  for t in T {
    a(b, o, y, z) +=! Wx(o, c) * x(t, b, c, y, z)
    if t == 0 { h(t, b, o, y, z) = tanh(a(b, o, y, z) + bias(o)) }
    else {
      u(b, o, y, z) +=! (y + ky - 1 >= 0 && y + ky - 1 < H && z + kz - 1 >= 0 && z + kz - 1 < W ?
                         h(t - 1, b, c, y + ky - 1, z + kz - 1) : 0) * Wh(o, c, ky, kz)
          where y in 0:H, z in 0:W, ky in 0:3, kz in 0:3
      h(t, b, o, y, z) = tanh(a(b, o, y, z) + u(b, o, y, z) + bias(o))
    }
  }
}""", full=dict(T=16, B=8, C=32, H=24, W=24), tiny=dict(T=3, B=1, C=2, H=4, W=3),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["C"], s["H"], s["W"]), _w(r, s["C"], s["C"], 3, 3) / 3,
                        _w(r, s["C"], s["C"]), _w(r, s["C"])])
def _convrnn(torch, a, t, s):
    F = torch.nn.functional
    x, Wh, Wx, bias = t
    wx = Wx[:, :, None, None].contiguous()

    def loop():
        out = []
        h = None
        for k in range(s["T"]):
            z = F.conv2d(x[k], wx, bias)
            if h is not None:
                z = z + F.conv2d(h, Wh, padding=1)
            h = torch.tanh(z)
            out.append(h)
        return torch.stack(out)
    return {"torch loop (conv2d)": _nograd(torch, loop)}


@program(name="rwkv time mixing (wkv recurrence)", kind="rnn", src="""
# RWKV's time mixing without the max shift: decayed running sums of exp(k) v and exp(k)
def wkv(float(T,B,C) k, float(T,B,C) v, float(C) w, float(C) u) -> (y) {
  for t in T {
    if t == 0 {
      y(t, b, c) = v(t, b, c)
      num(b, c) = exp(k(t, b, c)) * v(t, b, c)
      den(b, c) = exp(k(t, b, c))
    } else {
      y(t, b, c) = (num(b, c) + exp(u(c) + k(t, b, c)) * v(t, b, c)) / (den(b, c) + exp(u(c) + k(t, b, c)))
      num(b, c) = exp(-w(c)) * num(b, c) + exp(k(t, b, c)) * v(t, b, c)
      den(b, c) = exp(-w(c)) * den(b, c) + exp(k(t, b, c))
    }
  }
}""", full=dict(T=256, B=16, C=512), tiny=dict(T=3, B=2, C=3),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["C"]) * 0.5, _n(r, s["T"], s["B"], s["C"]),
                        r.uniform(0.1, 1.0, s["C"]).astype(np.float32), _n(r, s["C"]) * 0.5])
def _wkv(torch, a, t, s):
    k, v, w, u = t

    def loop():
        out = torch.empty_like(v)
        ew = torch.exp(-w)
        num = torch.zeros_like(v[0])
        den = torch.zeros_like(v[0])
        for i in range(s["T"]):
            ek = torch.exp(k[i])
            euk = torch.exp(u + k[i])
            out[i] = (num + euk * v[i]) / (den + euk)
            num = ew * num + ek * v[i]
            den = ew * den + ek
        return out
    return {"torch loop": _nograd(torch, loop)}


@program(name="fir filter per channel, channels-last (B,L,C)", kind="conv", src="""
# a K-tap filter shared by all channels, sequences stored channels-last
def fir(float(B,L,C) x, float(K) win) -> (y) {
  y(b, t, c) +=! x(b, t + k, c) * win(k)
}""", full=dict(B=16, L=2048, C=256, K=16), tiny=dict(B=1, L=6, C=3, K=2),
   inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _w(r, s["K"])])
def _fir(torch, a, t, s):
    F = torch.nn.functional
    w = t[1].expand(s["C"], 1, s["K"]).contiguous()
    return {"F.conv1d(groups=C) on a transposed view":
            _nograd(torch, lambda: F.conv1d(t[0].transpose(1, 2), w, groups=s["C"]).transpose(1, 2))}


@program(name="conv2d 3x3 NHWC (channels last)", kind="conv", src="""
def conv_nhwc(float(N,H,W,C) x, float(KH,KW,C,O) w) -> (y) {
  y(n, h, v, o) +=! x(n, h + kh, v + kw, c) * w(kh, kw, c, o)
}""", full=dict(N=8, H=34, W=34, C=64, O=64, KH=3, KW=3), tiny=dict(N=1, H=4, W=5, C=2, O=3, KH=3, KW=3),
   inputs=lambda r, s: [_n(r, s["N"], s["H"], s["W"], s["C"]), _w(r, s["KH"], s["KW"], s["C"], s["O"])])
def _conv_nhwc(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d on channels-last views": _nograd(
        torch, lambda: F.conv2d(t[0].permute(0, 3, 1, 2), t[1].permute(3, 2, 0, 1)).permute(0, 2, 3, 1))}


@program(name="avg pool 3x3 s1 pad 1 (select)", kind="pool", src="""
def avgpool(float(N,C,H,W) x) -> (y) {
  y(n, c, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W ?
                     x(n, c, h + kh - 1, v + kw - 1) : 0) / 9
      where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
}""", full=dict(N=16, C=64, H=56, W=56), tiny=dict(N=1, C=2, H=4, W=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _avgpool(torch, a, t, s):
    F = torch.nn.functional
    return {"F.avg_pool2d(3, 1, 1)": _nograd(torch, lambda: F.avg_pool2d(t[0], 3, 1, 1))}


@program(name="depthwise separable conv2d", kind="conv", src="""
def dwsep(float(N,C,H,W) x, float(C,3,3) wd, float(O,C) wp) -> (y) {
  d(n, c, h, v) +=! x(n, c, h + kh, v + kw) * wd(c, kh, kw)
  y(n, o, h, v) +=! d(n, c, h, v) * wp(o, c)
}""", full=dict(N=8, C=64, H=58, W=58, O=128), tiny=dict(N=1, C=2, H=4, W=5, O=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["C"], 3, 3), _w(r, s["O"], s["C"])])
def _dwsep(torch, a, t, s):
    F = torch.nn.functional
    wd = t[1][:, None].contiguous()
    wp = t[2][:, :, None, None].contiguous()
    return {"F.conv2d(groups=C) + F.conv2d 1x1": _nograd(
        torch, lambda: F.conv2d(F.conv2d(t[0], wd, groups=s["C"]), wp))}


@program(name="lstm with projection (proj_size), torch layout", kind="rnn", src="""
# torch.nn.LSTM(proj_size=P): the hidden state is projected from H to P each step; h0 = c0 = 0
def lstmp(float(T,B,I) x, float(4,H,I) Wih, float(4,H,P) Whh, float(4,H) bs, float(P,H) Whr) -> (h) {
  for t in T {
    g(q, b, j) +=! x(t, b, i) * Wih(q, j, i)
    if t > 0 { g(q, b, j) += h(t - 1, b, k) * Whh(q, j, k) }
    ig(b, j) = sigmoid(g(0, b, j) + bs(0, j))
    fg(b, j) = sigmoid(g(1, b, j) + bs(1, j))
    gg(b, j) = tanh(g(2, b, j) + bs(2, j))
    og(b, j) = sigmoid(g(3, b, j) + bs(3, j))
    if t == 0 { c(b, j) = ig(b, j) * gg(b, j) }
    else      { c(b, j) = fg(b, j) * c(b, j) + ig(b, j) * gg(b, j) }
    m(b, j) = og(b, j) * tanh(c(b, j))
    h(t, b, p) +=! m(b, j) * Whr(p, j)
  }
}""", full=dict(T=64, B=32, I=256, H=512, P=128), tiny=dict(T=3, B=2, I=3, H=4, P=2),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, 4, s["H"], s["I"]), _w(r, 4, s["H"], s["P"]),
                        _w(r, 4, s["H"]), _w(r, s["P"], s["H"])])
def _lstmp(torch, a, t, s):
    H, P = s["H"], s["P"]
    net = torch.nn.LSTM(s["I"], H, proj_size=P)
    _copy(torch, net.weight_ih_l0, a[1].reshape(4 * H, -1))
    _copy(torch, net.weight_hh_l0, a[2].reshape(4 * H, P))
    _copy(torch, net.bias_ih_l0, a[3].reshape(-1))
    _copy(torch, net.bias_hh_l0, np.zeros(4 * H, np.float32))
    _copy(torch, net.weight_hr_l0, a[4])
    return {"torch.nn.LSTM(proj_size)": _nograd(torch, lambda: net(t[0])[0])}


@program(name="kalman covariance recursion (A P A^T + Q)", kind="loop", src="""
def kalman(float(N,N) A, float(N,N) Q, float(N,N) P0) -> (P) {
  for t in T {
    if t == 0 { AP(i, j) +=! A(i, k) * P0(k, j) }
    else      { AP(i, j) +=! A(i, k) * P(t - 1, k, j) }
    P(t, i, j) +=! AP(i, k) * A(j, k)
    P(t, i, j) = P(t, i, j) + Q(i, j)
  }
}""", full=dict(T=64, N=128), tiny=dict(T=3, N=3), free=("T",),
   inputs=lambda r, s: [_w(r, s["N"], s["N"]) * 0.9, _w(r, s["N"], s["N"]) @ _w(r, s["N"], s["N"]).T,
                        np.eye(s["N"], dtype=np.float32)])
def _kalman(torch, a, t, s):
    A, Q, P0 = t

    def loop():
        out = torch.empty(s["T"], *A.shape)
        P = P0
        for k in range(s["T"]):
            P = torch.addmm(Q, A @ P, A.T)
            out[k] = P
        return out
    return {"torch loop": _nograd(torch, loop)}


@program(name="attention with relative position table", kind="attention", src="""
# scores plus a learned bias per offset i - j, read from a table of 2T - 1 entries
def relattn(float(B,T,D) q, float(B,T,D) k, float(B,T,D) v, float(R) rel) -> (o) {
  s(b, i, j) +=! q(b, i, d) * k(b, j, d)
  s(b, i, j) = s(b, i, j) / sqrt(D) + rel(i - j + T - 1)
  m(b, i) max=! s(b, i, j)
  e(b, i, j) = exp(s(b, i, j) - m(b, i))
  z(b, i) +=! e(b, i, j)
  o(b, i, d) +=! e(b, i, j) * v(b, j, d) / z(b, i)
}""", full=dict(B=32, T=256, D=64, R=511), tiny=dict(B=1, T=3, D=2, R=5),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), _n(r, s["B"], s["T"], s["D"]),
                        _n(r, s["B"], s["T"], s["D"]), _n(r, s["R"])])
def _relattn(torch, a, t, s):
    F = torch.nn.functional
    T = s["T"]
    idx = (torch.arange(T)[:, None] - torch.arange(T)[None, :] + T - 1)
    return {"F.scaled_dot_product_attention(mask=rel[idx])": _nograd(
        torch, lambda: F.scaled_dot_product_attention(t[0], t[1], t[2], attn_mask=t[3][idx]))}


@program(name="bidirectional outputs concatenated (select on channel)", kind="data", src="""
def bicat(float(T,B,H) f, float(T,B,H) r) -> (y) {
  y(t, b, j) = j < H ? f(t, b, j) : r(T - 1 - t, b, j - H) where j in 0:2 * H
}""", full=dict(T=256, B=32, H=512), tiny=dict(T=3, B=2, H=2),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["H"]), _n(r, s["T"], s["B"], s["H"])])
def _bicat(torch, a, t, s):
    return {"torch.cat([f, r.flip(0)], -1)": _nograd(torch, lambda: torch.cat([t[0], t[1].flip(0)], -1))}


@program(name="mish activation", kind="elementwise", src="""
def mish(float(N,C) x) -> (y) {
  y(n, c) = x(n, c) * tanh(log(1 + exp(x(n, c))))
}""", full=dict(N=4096, C=1024), tiny=dict(N=2, C=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"]) * 3])
def _mish(torch, a, t, s):
    F = torch.nn.functional
    return {"F.mish": _nograd(torch, lambda: F.mish(t[0]))}


@program(name="autoregressive self-attention decoder (kv cache)", kind="attention", src="""
# each step attends over the keys and values of all steps so far; its output is the next step's input
def ardecode(float(B,D) x0, float(D,D) Wq, float(D,D) Wk, float(D,D) Wv) -> (y) {
  for t in T {
    if t == 0 { xin(b, i) = x0(b, i) } else { xin(b, i) = y(t - 1, b, i) }
    q(b, d) +=! xin(b, i) * Wq(i, d)
    kc(t, b, d) +=! xin(b, i) * Wk(i, d)
    vc(t, b, d) +=! xin(b, i) * Wv(i, d)
    s(b, u) +=! (u <= t ? q(b, d) * kc(u, b, d) : 0) where u in 0:T
    sm(b, u) = u <= t ? s(b, u) / sqrt(D) : -1e30 where u in 0:T
    m(b) max=! sm(b, u)
    e(b, u) = exp(sm(b, u) - m(b))
    z(b) +=! e(b, u)
    y(t, b, d) +=! (u <= t ? e(b, u) * vc(u, b, d) : 0) / z(b) where u in 0:T
  }
}""", full=dict(T=64, B=16, D=256), tiny=dict(T=3, B=2, D=3), free=("T",),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), _w(r, s["D"], s["D"]), _w(r, s["D"], s["D"]), _w(r, s["D"], s["D"])])
def _ardecode(torch, a, t, s):
    x0, Wq, Wk, Wv = t
    T, D = s["T"], s["D"]

    def loop():
        out = torch.empty(T, *x0.shape)
        kc = torch.empty(T, *x0.shape)
        vc = torch.empty(T, *x0.shape)
        x = x0
        for i in range(T):
            q = x @ Wq
            kc[i] = x @ Wk
            vc[i] = x @ Wv
            sc = torch.einsum("bd,ubd->bu", q, kc[:i + 1]) / D ** 0.5
            p = torch.softmax(sc, 1)
            x = torch.einsum("bu,ubd->bd", p, vc[:i + 1])
            out[i] = x
        return out
    return {"torch loop": _nograd(torch, loop)}


@program(name="bert embeddings (token + position, layer norm)", kind="norm", src="""
def bertemb(int32(B,L) tok, float(V,E) emb, float(L,E) pos, float(E) g, float(E) be) -> (y) {
  x(b, l, e) = emb(tok(b, l), e) + pos(l, e)
  mu(b, l) +=! x(b, l, e) / E
  var(b, l) +=! (x(b, l, e) - mu(b, l)) * (x(b, l, e) - mu(b, l)) / E
  y(b, l, e) = (x(b, l, e) - mu(b, l)) / sqrt(var(b, l) + 1e-5) * g(e) + be(e)
}""", full=dict(B=64, L=128, V=30000, E=256), tiny=dict(B=2, L=3, V=5, E=4),
   inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["L"])).astype(np.int32), _n(r, s["V"], s["E"]),
                        _n(r, s["L"], s["E"]), _n(r, s["E"]), _n(r, s["E"])])
def _bertemb(torch, a, t, s):
    F = torch.nn.functional
    return {"F.layer_norm(emb[tok] + pos)": _nograd(
        torch, lambda: F.layer_norm(F.embedding(t[0].long(), t[1]) + t[2], (s["E"],), t[3], t[4]))}


# ---------------------------------------------------------------- session 26: more programs written other ways

@program(name="indrnn (elementwise recurrent weight)", kind="rnn", src="""
# IndRNN: each unit has one recurrent weight, h = relu(W x + u * h(t-1) + b)
def indrnn(float(T,B,I) x, float(H,I) W, float(H) u, float(H) bias) -> (h) {
  for t in T {
    p(b, j) +=! x(t, b, i) * W(j, i)
    if t == 0 { h(t, b, j) = fmax(p(b, j) + bias(j), 0) }
    else      { h(t, b, j) = fmax(p(b, j) + u(j) * h(t - 1, b, j) + bias(j), 0) }
  }
}""", full=dict(T=128, B=32, I=256, H=512), tiny=dict(T=3, B=2, I=3, H=4),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["H"], s["I"]),
                        r.uniform(0, 1, s["H"]).astype(np.float32), _w(r, s["H"])])
def _indrnn(torch, a, t, s):
    x, W, u, bias = t

    def loop():
        p = torch.nn.functional.linear(x, W, bias)
        out = torch.empty_like(p)
        h = torch.relu(p[0])
        out[0] = h
        for i in range(1, s["T"]):
            h = torch.relu(p[i] + u * h)
            out[i] = h
        return out
    return {"linear + torch loop": _nograd(torch, loop)}


@program(name="sru (simple recurrent unit)", kind="rnn", src="""
# SRU (Lei et al.): three projections of x, an elementwise recurrence on c with peepholes v
def sru(float(T,B,D) x, float(3,D,D) W, float(2,D) v, float(2,D) bias) -> (h) {
  for t in T {
    xt(g, b, j) +=! x(t, b, i) * W(g, j, i)
    if t == 0 {
      f(b, j) = sigmoid(xt(1, b, j) + bias(0, j))
      r(b, j) = sigmoid(xt(2, b, j) + bias(1, j))
      c(t, b, j) = (1 - f(b, j)) * xt(0, b, j)
    } else {
      f(b, j) = sigmoid(xt(1, b, j) + v(0, j) * c(t - 1, b, j) + bias(0, j))
      r(b, j) = sigmoid(xt(2, b, j) + v(1, j) * c(t - 1, b, j) + bias(1, j))
      c(t, b, j) = f(b, j) * c(t - 1, b, j) + (1 - f(b, j)) * xt(0, b, j)
    }
    h(t, b, j) = r(b, j) * c(t, b, j) + (1 - r(b, j)) * x(t, b, j)
  }
}""", full=dict(T=128, B=32, D=512), tiny=dict(T=3, B=2, D=4),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["D"]), _w(r, 3, s["D"], s["D"]), _w(r, 2, s["D"]),
                        _w(r, 2, s["D"])])
def _sru(torch, a, t, s):
    x, W, v, bias = t

    def loop():
        xt = torch.einsum("tbi,gji->tgbj", x, W)
        out = torch.empty_like(x)
        c = None
        for i in range(s["T"]):
            if c is None:
                f = torch.sigmoid(xt[i, 1] + bias[0])
                r = torch.sigmoid(xt[i, 2] + bias[1])
                c = (1 - f) * xt[i, 0]
            else:
                f = torch.sigmoid(xt[i, 1] + v[0] * c + bias[0])
                r = torch.sigmoid(xt[i, 2] + v[1] * c + bias[1])
                c = f * c + (1 - f) * xt[i, 0]
            out[i] = r * c + (1 - r) * x[i]
        return out
    return {"einsum + torch loop": _nograd(torch, loop)}


@program(name="sinkhorn iterations (matrix scaling)", kind="loop", src="""
# Sinkhorn-Knopp: alternately rescale rows and columns of K to the marginals a and bm
def sinkhorn(float(N,M) K, float(N) a, float(M) bm, float(S) steps) -> (u, v) {
  for s in S {
    if s == 0 { Kv(i) +=! K(i, j) }
    else      { Kv(i) +=! K(i, j) * v(j) }
    u(i) = a(i) / Kv(i)
    Ktu(j) +=! K(i, j) * u(i)
    v(j) = bm(j) / Ktu(j)
  }
}""", full=dict(N=1024, M=1024, S=50), tiny=dict(N=3, M=4, S=3),
   inputs=lambda r, s: [r.uniform(0.5, 1.5, (s["N"], s["M"])).astype(np.float32),
                        np.full(s["N"], 1 / s["N"], np.float32), np.full(s["M"], 1 / s["M"], np.float32),
                        np.zeros(s["S"], np.float32)],
   pick=lambda r: r[1])
def _sinkhorn(torch, a, t, s):
    K, am, bm, _ = t

    def loop():
        v = torch.ones(s["M"])
        for _ in range(s["S"]):
            u = am / (K @ v)
            v = bm / (K.T @ u)
        return v
    return {"torch loop (mv)": _nograd(torch, loop)}


@program(name="smooth l1 (huber) loss (select on |d|)", kind="loss", src="""
def huber(float(N,D) x, float(N,D) y) -> (loss) {
  loss() +=! (fabs(x(n, d) - y(n, d)) < 1 ? 0.5 * (x(n, d) - y(n, d)) * (x(n, d) - y(n, d))
                                          : fabs(x(n, d) - y(n, d)) - 0.5) / (N * D)
}""", full=dict(N=4096, D=1024), tiny=dict(N=2, D=3),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]) * 2, _n(r, s["N"], s["D"])])
def _huber(torch, a, t, s):
    F = torch.nn.functional
    return {"F.smooth_l1_loss": _nograd(torch, lambda: F.smooth_l1_loss(t[0], t[1]))}


@program(name="adam optimizer step", kind="elementwise", src="""
def adam(float(N) p, float(N) g, float(N) m, float(N) v, float lr, float bc1, float bc2) -> (m1, v1, p1) {
  m1(i) = 0.9 * m(i) + 0.1 * g(i)
  v1(i) = 0.999 * v(i) + 0.001 * g(i) * g(i)
  p1(i) = p(i) - lr * (m1(i) / bc1) / (sqrt(v1(i) / bc2) + 1e-8)
}""", full=dict(N=1 << 22), tiny=dict(N=5),
   inputs=lambda r, s: [_n(r, s["N"]), _n(r, s["N"]), _n(r, s["N"]) * 0.1,
                        np.abs(_n(r, s["N"])) * 0.01, np.array(1e-3, np.float32), np.array(0.1, np.float32), np.array(0.001, np.float32)],
   pick=lambda r: r[2])
def _adam(torch, a, t, s):
    p, g, m, v, lr, bc1, bc2 = t

    def step():
        m1 = 0.9 * m + 0.1 * g
        v1 = 0.999 * v + 0.001 * g * g
        return p - lr * (m1 / bc1) / (torch.sqrt(v1 / bc2) + 1e-8)
    return {"torch ops": _nograd(torch, step)}


@program(name="leaky integrate-and-fire spiking layer", kind="rnn", src="""
# LIF neurons: the membrane decays, integrates W x, spikes above 1 and resets
def lif(float(T,B,I) x, float(H,I) W) -> (s) {
  for t in T {
    cur(b, j) +=! x(t, b, i) * W(j, i)
    if t == 0 { v(t, b, j) = cur(b, j) }
    else      { v(t, b, j) = 0.9 * v(t - 1, b, j) * (1 - s(t - 1, b, j)) + cur(b, j) }
    s(t, b, j) = v(t, b, j) > 1.0 ? 1 : 0
  }
}""", full=dict(T=100, B=32, I=256, H=512), tiny=dict(T=3, B=2, I=3, H=4),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["H"], s["I"]) * 2])
def _lif(torch, a, t, s):
    x, W = t

    def loop():
        cur = x @ W.T
        out = torch.empty_like(cur)
        v = cur[0]
        out[0] = (v > 1.0).float()
        for i in range(1, s["T"]):
            v = 0.9 * v * (1 - out[i - 1]) + cur[i]
            out[i] = (v > 1.0).float()
        return out
    return {"matmul + torch loop": _nograd(torch, loop)}


@program(name="mixture of experts, dense softmax gate", kind="mlp", src="""
def moe(float(B,D) x, float(E,D) Wg, float(E,O,D) We) -> (y) {
  logit(b, e) +=! x(b, d) * Wg(e, d)
  mx(b) max=! logit(b, e)
  p(b, e) = exp(logit(b, e) - mx(b))
  z(b) +=! p(b, e)
  h(b, e, o) +=! x(b, d) * We(e, o, d)
  y(b, o) +=! p(b, e) * h(b, e, o) / z(b)
}""", full=dict(B=256, D=512, E=8, O=512), tiny=dict(B=2, D=3, E=2, O=4),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), _w(r, s["E"], s["D"]), _w(r, s["E"], s["O"], s["D"])])
def _moe(torch, a, t, s):
    x, Wg, We = t

    def run():
        g = torch.softmax(x @ Wg.T, 1)
        return torch.einsum("be,beo->bo", g, torch.einsum("bd,eod->beo", x, We))
    return {"softmax + einsum": _nograd(torch, run)}


@program(name="dilated conv2d 3x3 (d=2)", kind="conv", src="""
def dconv(float(N,C,H,W) x, float(O,C,3,3) w) -> (y) {
  y(n, o, h, v) +=! x(n, c, h + 2 * kh, v + 2 * kw) * w(o, c, kh, kw)
}""", full=dict(N=8, C=64, H=36, W=36, O=64), tiny=dict(N=1, C=2, H=6, W=5, O=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["O"], s["C"], 3, 3)])
def _dconv(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d(dilation=2)": _nograd(torch, lambda: F.conv2d(t[0], t[1], dilation=2))}


@program(name="tensor mode-2 product (tucker)", kind="matmul", src="""
def mode2(float(A,J,C) x, float(R,J) U) -> (y) {
  y(a, r, c) +=! x(a, j, c) * U(r, j)
}""", full=dict(A=64, J=256, C=256, R=128), tiny=dict(A=2, J=3, C=4, R=2),
   inputs=lambda r, s: [_n(r, s["A"], s["J"], s["C"]), _w(r, s["R"], s["J"])])
def _mode2(torch, a, t, s):
    return {"U @ x (broadcast matmul)": _nograd(torch, lambda: torch.matmul(t[1], t[0]))}


@program(name="nearest upsample 2x (floor-div index)", kind="data", src="""
def up2(float(N,C,H,W) x) -> (y) {
  y(n, c, i, j) = x(n, c, i / 2, j / 2) where i in 0:2*H, j in 0:2*W
}""", full=dict(N=16, C=64, H=64, W=64), tiny=dict(N=1, C=2, H=2, W=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _up2(torch, a, t, s):
    F = torch.nn.functional
    return {"F.interpolate(nearest)": _nograd(torch, lambda: F.interpolate(t[0], scale_factor=2, mode="nearest"))}


@program(name="grouped-query attention (kv head h / 4)", kind="attention", src="""
def gqa(float(B,Hq,T,D) q, float(B,G,T,D) k, float(B,G,T,D) v) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h / 4, j, d) / sqrt(float(D))
  mx(b, h, i) max=! s(b, h, i, j)
  e(b, h, i, j) = exp(s(b, h, i, j) - mx(b, h, i))
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! e(b, h, i, j) * v(b, h / 4, j, d) / z(b, h, i)
}""", full=dict(B=4, Hq=16, G=4, T=256, D=64), tiny=dict(B=1, Hq=8, G=2, T=3, D=2),
   inputs=lambda r, s: [_n(r, s["B"], s["Hq"], s["T"], s["D"]), _n(r, s["B"], s["G"], s["T"], s["D"]),
                        _n(r, s["B"], s["G"], s["T"], s["D"])])
def _gqa(torch, a, t, s):
    F = torch.nn.functional
    return {"F.scaled_dot_product_attention(enable_gqa)": _nograd(
        torch, lambda: F.scaled_dot_product_attention(t[0], t[1], t[2], enable_gqa=True))}


@program(name="neural ode, euler steps", kind="loop", src="""
def ode(float(B,D) h0, float(D,D) W, float(D) bias, float(S) dt) -> (h) {
  for s in S {
    if s == 0 {
      f(b, j) +=! h0(b, i) * W(i, j)
      h(s, b, j) = h0(b, j) + dt(s) * tanh(f(b, j) + bias(j))
    } else {
      f(b, j) +=! h(s - 1, b, i) * W(i, j)
      h(s, b, j) = h(s - 1, b, j) + dt(s) * tanh(f(b, j) + bias(j))
    }
  }
}""", full=dict(B=64, D=512, S=100), tiny=dict(B=2, D=3, S=3),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), _w(r, s["D"], s["D"]), _w(r, s["D"]),
                        np.full(s["S"], 0.1, np.float32)])
def _ode(torch, a, t, s):
    h0, W, bias, dt = t

    def loop():
        out = torch.empty(s["S"], *h0.shape)
        h = h0
        for i in range(s["S"]):
            h = h + dt[i] * torch.tanh(torch.addmm(bias, h, W))
            out[i] = h
        return out
    return {"torch loop (addmm)": _nograd(torch, loop)}


@program(name="bilinear pooling over time (x^T z per batch)", kind="matmul", src="""
def bipool(float(B,T,I) x, float(B,T,J) z) -> (y) {
  y(b, i, j) +=! x(b, t, i) * z(b, t, j) / T
}""", full=dict(B=32, T=256, I=256, J=256), tiny=dict(B=2, T=3, I=2, J=4),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _n(r, s["B"], s["T"], s["J"])])
def _bipool(torch, a, t, s):
    return {"bmm(x^T, z) / T": _nograd(torch, lambda: torch.bmm(t[0].transpose(1, 2), t[1]) / s["T"])}


@program(name="k-means step (assign by min distance, new centroids)", kind="data", src="""
def kmeans(float(N,D) x, float(K,D) c) -> (cnt, newc) {
  d(n, k) +=! (x(n, e) - c(k, e)) * (x(n, e) - c(k, e))
  best(n) min=! d(n, k)
  onehot(n, k) = d(n, k) == best(n) ? 1 : 0
  cnt(k) +=! onehot(n, k)
  tot(k, e) +=! onehot(n, k) * x(n, e)
  newc(k, e) = tot(k, e) / fmax(cnt(k), 1)
}""", full=dict(N=16384, D=64, K=64), tiny=dict(N=5, D=2, K=3),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["K"], s["D"])], pick=lambda r: r[1])
def _kmeans(torch, a, t, s):
    x, c = t

    def run():
        lab = torch.cdist(x, c).argmin(1)
        oh = torch.nn.functional.one_hot(lab, s["K"]).float()
        return (oh.T @ x) / oh.sum(0).clamp(min=1)[:, None]
    return {"cdist + argmin + one_hot matmul": _nograd(torch, run)}


@program(name="max pool 3x3 s2 pad 1 (select, resnet stem)", kind="pool", src="""
def mp(float(N,C,H,W) x) -> (y) {
  y(n, c, i, j) max=! (2 * i + ki - 1 >= 0 && 2 * i + ki - 1 < H && 2 * j + kj - 1 >= 0 && 2 * j + kj - 1 < W ?
                       x(n, c, 2 * i + ki - 1, 2 * j + kj - 1) : -1e30)
      where i in 0:H/2, j in 0:W/2, ki in 0:3, kj in 0:3
}""", full=dict(N=16, C=64, H=112, W=112), tiny=dict(N=1, C=2, H=4, W=6),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _mp(torch, a, t, s):
    F = torch.nn.functional
    return {"F.max_pool2d(3, 2, 1)": _nograd(torch, lambda: F.max_pool2d(t[0], 3, 2, 1))}


@program(name="rotary position embedding (select on half of d)", kind="elementwise", src="""
# RoPE on (B, T, H, D) queries, halves rotated as in GPT-NeoX / LLaMA (rotate_half)
def rope(float(B,T,H,D) x, float(T,D) cs, float(T,D) sn) -> (y) {
  y(b, t, h, d) = x(b, t, h, d) * cs(t, d)
                + (d < D / 2 ? -x(b, t, h, d + D / 2) : x(b, t, h, d - D / 2)) * sn(t, d)
      where d in 0:D
}""", full=dict(B=8, T=512, H=16, D=64), tiny=dict(B=1, T=3, H=2, D=4),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["D"]), np.cos(_n(r, s["T"], s["D"])),
                        np.sin(_n(r, s["T"], s["D"]))])
def _rope(torch, a, t, s):
    x, cs, sn = t
    half = s["D"] // 2
    c, n = cs[:, None, :], sn[:, None, :]

    def run():
        rot = torch.cat((-x[..., half:], x[..., :half]), -1)
        return x * c + rot * n
    return {"torch (rotate_half)": _nograd(torch, run)}


@program(name="mamba causal depthwise conv1d, channels-last (K=4)", kind="conv", src="""
def cconv(float(B,L,C) x, float(C,K) w, float(C) bias) -> (y) {
  y(b, t, c) +=! (t + k - K + 1 >= 0 ? x(b, t + k - K + 1, c) : 0) * w(c, k) where t in 0:L, k in 0:K
  y(b, t, c) = y(b, t, c) + bias(c)
}""", full=dict(B=8, L=2048, C=512, K=4), tiny=dict(B=1, L=5, C=3, K=4),
   inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _w(r, s["C"], s["K"]), _w(r, s["C"])])
def _cconv(torch, a, t, s):
    F = torch.nn.functional
    w = t[1][:, None, :].contiguous()
    K = s["K"]
    return {"F.conv1d(groups=C, padding=K-1)[..., :L] on a transposed view": _nograd(
        torch, lambda: F.conv1d(t[0].transpose(1, 2), w, t[2], padding=K - 1, groups=s["C"])[..., :s["L"]]
        .transpose(1, 2))}


@program(name="highway layer (torch layout)", kind="mlp", src="""
def highway(float(B,D) x, float(D,D) Wh, float(D) bh, float(D,D) Wt, float(D) bt) -> (y) {
  hh(b, o) +=! x(b, i) * Wh(o, i)
  tt(b, o) +=! x(b, i) * Wt(o, i)
  y(b, o) = sigmoid(tt(b, o) + bt(o)) * fmax(hh(b, o) + bh(o), 0) + (1 - sigmoid(tt(b, o) + bt(o))) * x(b, o)
}""", full=dict(B=1024, D=1024), tiny=dict(B=2, D=3),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), _w(r, s["D"], s["D"]), _w(r, s["D"]), _w(r, s["D"], s["D"]),
                        _w(r, s["D"])])
def _highway(torch, a, t, s):
    F = torch.nn.functional
    x, Wh, bh, Wt, bt = t

    def run():
        g = torch.sigmoid(F.linear(x, Wt, bt))
        return g * torch.relu(F.linear(x, Wh, bh)) + (1 - g) * x
    return {"F.linear x2 + torch ops": _nograd(torch, run)}


@program(name="symmetrize (x + x^T) / 2", kind="data", src="""
def sym(float(N,N) x) -> (y) {
  y(i, j) = (x(i, j) + x(j, i)) / 2
}""", full=dict(N=4096), tiny=dict(N=3),
   inputs=lambda r, s: [_n(r, s["N"], s["N"])])
def _sym(torch, a, t, s):
    return {"(x + x.T) / 2": _nograd(torch, lambda: (t[0] + t[0].T) / 2)}


@program(name="pixel shuffle (r=2, div/mod indices)", kind="data", src="""
def shuffle(float(N,C4,H,W) x) -> (y) {
  y(n, c, i, j) = x(n, 4 * c + 2 * (i % 2) + j % 2, i / 2, j / 2) where c in 0:C4/4, i in 0:2*H, j in 0:2*W
}""", full=dict(N=16, C4=256, H=32, W=32), tiny=dict(N=1, C4=4, H=2, W=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C4"], s["H"], s["W"])])
def _shuffle(torch, a, t, s):
    F = torch.nn.functional
    return {"F.pixel_shuffle(2)": _nograd(torch, lambda: F.pixel_shuffle(t[0], 2))}


@program(name="conv_transpose2d stride 2 (select on parity)", kind="conv", src="""
def convt(float(N,C,H,W) x, float(C,O,4,4) w) -> (y) {
  y(n, o, i, j) +=! ((i - kh) % 2 == 0 && (j - kw) % 2 == 0 && i - kh >= 0 && j - kw >= 0
                     && (i - kh) / 2 < H && (j - kw) / 2 < W ?
                     x(n, c, (i - kh) / 2, (j - kw) / 2) : 0) * w(c, o, kh, kw)
      where i in 0:2*H+2, j in 0:2*W+2, kh in 0:4, kw in 0:4
}""", full=dict(N=8, C=64, H=16, W=16, O=32), tiny=dict(N=1, C=2, H=2, W=3, O=2),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["C"], s["O"], 4, 4)])
def _convt(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv_transpose2d(stride=2)": _nograd(torch, lambda: F.conv_transpose2d(t[0], t[1], stride=2))}


@program(name="spatial softmax (keypoints: expected x, y)", kind="norm", src="""
def spatial(float(N,C,H,W) f) -> (kx, ky) {
  mx(n, c) max=! f(n, c, h, w)
  e(n, c, h, w) = exp(f(n, c, h, w) - mx(n, c))
  z(n, c) +=! e(n, c, h, w)
  kx(n, c) +=! e(n, c, h, w) * w / z(n, c)
  ky(n, c) +=! e(n, c, h, w) * h / z(n, c)
}""", full=dict(N=32, C=64, H=64, W=64), tiny=dict(N=1, C=2, H=3, W=4),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])], pick=lambda r: r[0])
def _spatial(torch, a, t, s):
    f = t[0]
    xs = torch.arange(s["W"], dtype=torch.float32)

    def run():
        p = torch.softmax(f.flatten(2), -1).view_as(f)
        return (p.sum(2) * xs).sum(-1)
    return {"softmax + sums": _nograd(torch, run)}


@program(name="conv3d 3x3x3 (video, valid)", kind="conv", src="""
def conv3d(float(N,C,D,H,W) x, float(O,C,3,3,3) w) -> (y) {
  y(n, o, d, h, v) +=! x(n, c, d + kd, h + kh, v + kw) * w(o, c, kd, kh, kw)
}""", full=dict(N=2, C=32, D=10, H=30, W=30, O=32), tiny=dict(N=1, C=2, D=3, H=4, W=3, O=2),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["D"], s["H"], s["W"]), _w(r, s["O"], s["C"], 3, 3, 3)])
def _conv3d(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv3d": _nograd(torch, lambda: F.conv3d(t[0], t[1]))}


@program(name="grouped conv2d 3x3 (resnext, G=32)", kind="conv", src="""
def gconv(float(N,G,C,H,W) x, float(G,O,C,3,3) w) -> (y) {
  y(n, g, o, h, v) +=! x(n, g, c, h + kh, v + kw) * w(g, o, c, kh, kw)
}""", full=dict(N=8, G=32, C=4, H=30, W=30, O=4), tiny=dict(N=1, G=2, C=2, H=4, W=3, O=2),
   inputs=lambda r, s: [_n(r, s["N"], s["G"], s["C"], s["H"], s["W"]), _w(r, s["G"], s["O"], s["C"], 3, 3)])
def _gconv(torch, a, t, s):
    F = torch.nn.functional
    N, G, C, H, W, O = (s[k] for k in ("N", "G", "C", "H", "W", "O"))
    xin = t[0].reshape(N, G * C, H, W)
    w = t[1].reshape(G * O, C, 3, 3)
    return {"F.conv2d(groups=G)": _nograd(
        torch, lambda: F.conv2d(xin, w, groups=G).view(N, G, O, H - 2, W - 2))}


@program(name="head transpose (B,T,H,D) -> (B,H,T,D)", kind="data", src="""
def heads(float(B,T,H,D) x) -> (y) {
  y(b, h, t, d) = x(b, t, h, d)
}""", full=dict(B=16, T=512, H=16, D=64), tiny=dict(B=1, T=3, H=2, D=2),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["D"])])
def _heads(torch, a, t, s):
    return {"transpose(1, 2).contiguous()": _nograd(torch, lambda: t[0].transpose(1, 2).contiguous())}


@program(name="triplet margin loss", kind="loss", src="""
def triplet(float(N,D) a, float(N,D) p, float(N,D) q) -> (loss) {
  dp(n) +=! (a(n, d) - p(n, d) + 1e-6) * (a(n, d) - p(n, d) + 1e-6)
  dq(n) +=! (a(n, d) - q(n, d) + 1e-6) * (a(n, d) - q(n, d) + 1e-6)
  loss() +=! fmax(sqrt(dp(n)) - sqrt(dq(n)) + 1, 0) / N
}""", full=dict(N=8192, D=512), tiny=dict(N=3, D=2),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["N"], s["D"]), _n(r, s["N"], s["D"])])
def _triplet(torch, a, t, s):
    F = torch.nn.functional
    return {"F.triplet_margin_loss": _nograd(torch, lambda: F.triplet_margin_loss(t[0], t[1], t[2]))}


@program(name="running max over time (loop)", kind="loop", src="""
def cummax(float(B,T,C) x) -> (m) {
  for t in T {
    if t == 0 { m(b, t, c) = x(b, t, c) }
    else      { m(b, t, c) = fmax(m(b, t - 1, c), x(b, t, c)) }
  }
}""", full=dict(B=32, T=1024, C=256), tiny=dict(B=2, T=3, C=2),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["C"])])
def _cummax(torch, a, t, s):
    return {"torch.cummax(dim=1)": _nograd(torch, lambda: torch.cummax(t[0], 1).values)}


# ---------------------------------------------------------------- session 27: more programs written other ways

LSTM_GATES_BATCH_FIRST = """
# LSTM, gate pre-activations batch-first G(b, g, j), a weight per gate (in, out)
def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4,I,H) Wx, float(4,H,H) Wh, float(4,H) bias) -> (h, c) {
  hp(b, j) = h0(b, j)
  cp(b, j) = c0(b, j)
  for t in T {
    G(b, g, j) +=! x(t, b, i) * Wx(g, i, j)
    G(b, g, j) += hp(b, k) * Wh(g, k, j)
    G(b, g, j) = G(b, g, j) + bias(g, j)
    c(t, b, j) = sigmoid(G(b, 1, j)) * cp(b, j) + sigmoid(G(b, 0, j)) * tanh(G(b, 2, j))
    h(t, b, j) = sigmoid(G(b, 3, j)) * tanh(c(t, b, j))
    hp(b, j) = h(t, b, j)
    cp(b, j) = c(t, b, j)
  }
}
"""


@program(name="lstm, gates batch-first G(b, g, j)", kind="rnn", src=LSTM_GATES_BATCH_FIRST,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4), inputs=_lstm_io_inputs,
         pick=lambda r: r[0])
def _lstm_bf(torch, a, t, s):
    return _lstm_io(torch, a, t, s)


@program(name="attention merge heads (div/mod) + out projection", kind="attention", src="""
def merge(float(B,T,H,D) a, float(E,E) Wo) -> (y) {
  m(b, t, e) = a(b, t, e / D, e % D) where e in 0:E
  y(b, t, o) +=! m(b, t, e) * Wo(o, e)
}""", full=dict(B=8, T=256, H=8, D=64, E=512), tiny=dict(B=1, T=2, H=2, D=3, E=6),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["D"]), _w(r, s["E"], s["E"])])
def _merge(torch, a, t, s):
    F = torch.nn.functional
    B, T = s["B"], s["T"]
    return {"reshape + F.linear": _nograd(torch, lambda: F.linear(t[0].reshape(B, T, -1), t[1]))}


@program(name="many small matmuls (16x16)", kind="linear", src="""
def bmm(float(N,M,K) A, float(N,K,P) B) -> (C) { C(n, m, p) +=! A(n, m, k) * B(n, k, p) }
""", full=dict(N=8192, M=16, K=16, P=16), tiny=dict(N=2, M=3, K=2, P=3),
   inputs=lambda r, s: [_n(r, s["N"], s["M"], s["K"]), _n(r, s["N"], s["K"], s["P"])])
def _small_bmm(torch, a, t, s):
    return {"torch.bmm": _nograd(torch, lambda: torch.bmm(t[0], t[1]))}


@program(name="row l2 normalize", kind="norm", src="""
def l2n(float(B,D) x) -> (y) {
  n(b) +=! x(b, d) * x(b, d)
  y(b, d) = x(b, d) / fmax(sqrt(n(b)), 1e-12)
}""", full=dict(B=8192, D=512), tiny=dict(B=2, D=3), inputs=lambda r, s: [_n(r, s["B"], s["D"])])
def _l2n(torch, a, t, s):
    F = torch.nn.functional
    return {"F.normalize": _nograd(torch, lambda: F.normalize(t[0], dim=1))}


@program(name="matmul A^T B (both k-major)", kind="linear", src="""
def atb(float(K,M) A, float(K,N) B) -> (C) { C(m, n) +=! A(k, m) * B(k, n) }
""", full=dict(K=1024, M=1024, N=1024), tiny=dict(K=2, M=3, N=2),
   inputs=lambda r, s: [_n(r, s["K"], s["M"]), _n(r, s["K"], s["N"])])
def _atb(torch, a, t, s):
    return {"A.T @ B": _nograd(torch, lambda: t[0].T @ t[1])}


@program(name="matmul A^T B^T", kind="linear", src="""
def atbt(float(K,M) A, float(N,K) B) -> (C) { C(m, n) +=! A(k, m) * B(n, k) }
""", full=dict(K=1024, M=1024, N=1024), tiny=dict(K=2, M=3, N=2),
   inputs=lambda r, s: [_n(r, s["K"], s["M"]), _n(r, s["N"], s["K"])])
def _atbt(torch, a, t, s):
    return {"A.T @ B.T": _nograd(torch, lambda: t[0].T @ t[1].T)}


@program(name="avg pool 2x2 stride 2", kind="conv", src="""
def avgpool(float(N,C,H,W) x) -> (y) {
  y(n, c, h, w) +=! x(n, c, 2 * h + kh, 2 * w + kw) / 4 where h in 0:H/2, w in 0:W/2, kh in 0:2, kw in 0:2
}""", full=dict(N=32, C=64, H=56, W=56), tiny=dict(N=1, C=2, H=4, W=6), inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _avgpool(torch, a, t, s):
    F = torch.nn.functional
    return {"F.avg_pool2d": _nograd(torch, lambda: F.avg_pool2d(t[0], 2))}


@program(name="conv2d 3x3 deep layer (256 ch, 14x14)", kind="conv", src="""
def conv(float(N,C,H,W) x, float(O,C,3,3) w, float(O) bias) -> (y) {
  y(n, o, h, v) +=! x(n, c, h + kh, v + kw) * w(o, c, kh, kw)
  y(n, o, h, v) = y(n, o, h, v) + bias(o)
}""", full=dict(N=8, C=256, H=16, W=16, O=256), tiny=dict(N=1, C=2, H=3, W=4, O=2),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["O"], s["C"], 3, 3), _w(r, s["O"])])
def _conv_deep(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d": _nograd(torch, lambda: F.conv2d(t[0], t[1], t[2]))}


@program(name="gemv (out,in) 4096x4096", kind="linear", src="""
def gemv(float(O,I) W, float(I) x) -> (y) { y(o) +=! W(o, i) * x(i) }
""", full=dict(O=4096, I=4096), tiny=dict(O=3, I=2), inputs=lambda r, s: [_w(r, s["O"], s["I"]), _n(r, s["I"])])
def _gemv_oi(torch, a, t, s):
    return {"torch.mv": _nograd(torch, lambda: torch.mv(t[0], t[1]))}


@program(name="argmax over classes (predictions)", kind="loss", src="""
def predict(float(B,V) logits) -> (cls) { cls(b) argmax=! logits(b, v) }
""", full=dict(B=1024, V=10000), tiny=dict(B=2, V=5), inputs=lambda r, s: [_n(r, s["B"], s["V"])])
def _argmax(torch, a, t, s):
    return {"argmax(1)": _nograd(torch, lambda: t[0].argmax(1).int())}


@program(name="conv1d weight gradient", kind="grad", src="""
def dconv(float(B,O,L) dy, float(B,C,M) x) -> (dw) {
  dw(o, c, k) +=! dy(b, o, l) * x(b, c, l + k) where k in 0:M-L+1
}""", full=dict(B=16, O=128, C=128, L=254, M=256), tiny=dict(B=1, O=2, C=3, L=3, M=5),
   inputs=lambda r, s: [_n(r, s["B"], s["O"], s["L"]), _n(r, s["B"], s["C"], s["M"])])
def _dconv1d(torch, a, t, s):
    F = torch.nn.functional
    K = s["M"] - s["L"] + 1
    w = torch.zeros(s["O"], s["C"], K)
    return {"conv1d weight grad": _nograd(
        torch, lambda: torch.nn.grad.conv1d_weight(t[1], w.shape, t[0]))}


@program(name="conv2d 3x3 weight gradient", kind="grad", src="""
def dconv(float(N,O,H,W) dy, float(N,C,P,Q) x) -> (dw) {
  dw(o, c, kh, kw) +=! dy(n, o, h, v) * x(n, c, h + kh, v + kw) where kh in 0:3, kw in 0:3
}""", full=dict(N=16, O=64, C=64, H=28, W=28, P=30, Q=30), tiny=dict(N=1, O=2, C=2, H=2, W=3, P=4, Q=5),
   inputs=lambda r, s: [_n(r, s["N"], s["O"], s["H"], s["W"]), _n(r, s["N"], s["C"], s["P"], s["Q"])])
def _dconv2d(torch, a, t, s):
    return {"conv2d weight grad": _nograd(
        torch, lambda: torch.nn.grad.conv2d_weight(t[1], (s["O"], s["C"], 3, 3), t[0]))}


@program(name="exponential moving average over time (loop)", kind="loop", src="""
def ema(float(T,B,C) x, float(C) a) -> (e) {
  for t in T {
    if t == 0 { e(t, b, c) = x(t, b, c) }
    else      { e(t, b, c) = a(c) * e(t - 1, b, c) + (1 - a(c)) * x(t, b, c) }
  }
}""", full=dict(T=512, B=32, C=512), tiny=dict(T=3, B=2, C=2),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["C"]), r.uniform(0.5, 0.99, s["C"]).astype(np.float32)])
def _ema(torch, a, t, s):
    def loop():
        out = torch.empty_like(t[0])
        out[0] = t[0][0]
        for k in range(1, t[0].shape[0]):
            torch.add(t[1] * out[k - 1], (1 - t[1]) * t[0][k], out=out[k])
        return out
    return {"torch loop": _nograd(torch, loop)}


@program(name="batched matmul, batch innermost (i,j,b)", kind="linear", src="""
def bmm(float(M,K,N) A, float(K,P,N) B) -> (C) { C(m, p, n) +=! A(m, k, n) * B(k, p, n) }
""", full=dict(M=64, K=64, P=64, N=256), tiny=dict(M=2, K=3, P=2, N=3),
   inputs=lambda r, s: [_n(r, s["M"], s["K"], s["N"]), _n(r, s["K"], s["P"], s["N"])])
def _bmm_last(torch, a, t, s):
    return {"einsum mkn,kpn->mpn": _nograd(torch, lambda: torch.einsum("mkn,kpn->mpn", t[0], t[1]))}


@program(name="3-layer mlp (relu, torch layout)", kind="linear", src="""
def mlp(float(B,I) x, float(H,I) W1, float(H) b1, float(H,H) W2, float(H) b2, float(O,H) W3) -> (y) {
  h1(b, j) +=! x(b, i) * W1(j, i)
  h1(b, j) = fmax(h1(b, j) + b1(j), 0)
  h2(b, j) +=! h1(b, k) * W2(j, k)
  h2(b, j) = fmax(h2(b, j) + b2(j), 0)
  y(b, o) +=! h2(b, k) * W3(o, k)
}""", full=dict(B=256, I=784, H=1024, O=10), tiny=dict(B=2, I=3, H=4, O=2),
   inputs=lambda r, s: [_n(r, s["B"], s["I"]), _w(r, s["H"], s["I"]), _w(r, s["H"]), _w(r, s["H"], s["H"]),
                        _w(r, s["H"]), _w(r, s["O"], s["H"])])
def _mlp3(torch, a, t, s):
    F = torch.nn.functional

    def run():
        h = F.relu(F.linear(t[0], t[1], t[2]))
        h = F.relu(F.linear(h, t[3], t[4]))
        return F.linear(h, t[5])
    return {"F.linear x3": _nograd(torch, run)}


@program(name="bias gradient (sum over batch and time)", kind="grad", src="""
def dbias(float(B,T,O) dy) -> (db) { db(o) +=! dy(b, t, o) }
""", full=dict(B=64, T=512, O=512), tiny=dict(B=2, T=3, O=2), inputs=lambda r, s: [_n(r, s["B"], s["T"], s["O"])])
def _dbias(torch, a, t, s):
    return {"sum((0, 1))": _nograd(torch, lambda: t[0].sum((0, 1)))}


@program(name="gelu tanh approximation", kind="elementwise", src="""
def gelu(float(B,D) x) -> (y) {
  y(b, d) = 0.5 * x(b, d) * (1 + tanh(0.7978845608 * (x(b, d) + 0.044715 * x(b, d) * x(b, d) * x(b, d))))
}""", full=dict(B=4096, D=4096), tiny=dict(B=2, D=3), inputs=lambda r, s: [_n(r, s["B"], s["D"])])
def _gelu_tanh(torch, a, t, s):
    F = torch.nn.functional
    return {"F.gelu(tanh)": _nograd(torch, lambda: F.gelu(t[0], approximate="tanh"))}


GRU_GATES_BATCH_FIRST = GRU_OUT_IN.replace("# GRU, weights in PyTorch's (out, in) layout, gates r, z, n as torch.nn.GRU",
                                           "# GRU, gate pre-activations batch-first (b, g, j), weights (out, in)")
for _g in ("g", "0", "1", "2"):
    GRU_GATES_BATCH_FIRST = GRU_GATES_BATCH_FIRST.replace(f"gi({_g}, b, j)", f"gi(b, {_g}, j)").replace(
        f"gh({_g}, b, j)", f"gh(b, {_g}, j)")


@program(name="gru, gates batch-first (b, g, j), (out,in)", kind="rnn", src=GRU_GATES_BATCH_FIRST,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=6), inputs=_gru_inputs)
def _gru_bf_gates(torch, a, t, s):
    return _gru(torch, a, t, s)


@program(name="attention, heads between queries and keys s(b, i, h, j)", kind="attention", src="""
def attn(float(B,T,H,D) q, float(B,T,H,D) k, float(B,T,H,D) v) -> (o) {
  s(b, i, h, j) +=! q(b, i, h, d) * k(b, j, h, d) / sqrt(D)
  m(b, i, h) max=! s(b, i, h, j)
  e(b, i, h, j) = exp(s(b, i, h, j) - m(b, i, h))
  z(b, i, h) +=! e(b, i, h, j)
  o(b, i, h, d) +=! e(b, i, h, j) * v(b, j, h, d) / z(b, i, h)
}""", full=dict(B=4, T=256, H=8, D=64), tiny=dict(B=1, T=3, H=2, D=2),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["D"]) for _ in range(3)])
def _attn_bihj(torch, a, t, s):
    F = torch.nn.functional

    def run():
        q, k, v = (x.transpose(1, 2) for x in t)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2)
    return {"sdpa (transposes)": _nograd(torch, run)}


@program(name="layer norm over channels of (B, C, T)", kind="norm", src="""
def lnc(float(B,C,T) x, float(C) g, float(C) beta) -> (y) {
  mu(b, t) +=! x(b, c, t) / C
  var(b, t) +=! (x(b, c, t) - mu(b, t)) * (x(b, c, t) - mu(b, t)) / C
  y(b, c, t) = (x(b, c, t) - mu(b, t)) * rsqrt(var(b, t) + 1e-5) * g(c) + beta(c)
}""", full=dict(B=32, C=256, T=512), tiny=dict(B=1, C=3, T=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["T"]), _n(r, s["C"]), _n(r, s["C"])])
def _ln_channels(torch, a, t, s):
    F = torch.nn.functional
    C = s["C"]
    return {"F.layer_norm (transposes)": _nograd(
        torch, lambda: F.layer_norm(t[0].transpose(1, 2), (C,), t[1], t[2]).transpose(1, 2).contiguous())}


@program(name="elman rnn, state batch-last h(t, j, b)", kind="rnn", src="""
def rnn(float(T,I,B) x, float(H,B) h0, float(H,I) W, float(H,H) U) -> (h) {
  for t in T {
    h(t, j, b) +=! W(j, i) * x(t, i, b)
    if t == 0 { h(t, j, b) += U(j, k) * h0(k, b) }
    else      { h(t, j, b) += U(j, k) * h(t - 1, k, b) }
    h(t, j, b) = tanh(h(t, j, b))
  }
}""", full=dict(T=128, I=256, B=32, H=256), tiny=dict(T=3, I=2, B=2, H=3),
   inputs=lambda r, s: [_n(r, s["T"], s["I"], s["B"]), _n(r, s["H"], s["B"]), _w(r, s["H"], s["I"]),
                        _w(r, s["H"], s["H"])])
def _rnn_batch_last(torch, a, t, s):
    net = torch.nn.RNN(s["I"], s["H"], bias=False)
    _copy(torch, net.weight_ih_l0, a[2])
    _copy(torch, net.weight_hh_l0, a[3])
    x = t[0].permute(0, 2, 1).contiguous()
    return {"nn.RNN (transposes)": _nograd(
        torch, lambda: net(x, t[1].T.contiguous()[None])[0].permute(0, 2, 1).contiguous())}


@program(name="conv1d, weights (K, C, O), same padding", kind="conv", src="""
def conv(float(B,C,L) x, float(K,C,O) w) -> (y) {
  y(b, o, l) +=! (l + k - K / 2 >= 0 && l + k - K / 2 < L ? x(b, c, l + k - K / 2) : 0) * w(k, c, o) where l in 0:L, k in 0:K
}""", full=dict(B=16, C=128, L=512, K=5, O=128), tiny=dict(B=1, C=2, L=4, K=3, O=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["K"], s["C"], s["O"])])
def _conv_kco(torch, a, t, s):
    F = torch.nn.functional
    w = t[1].permute(2, 1, 0).contiguous()
    return {"F.conv1d(padding=K//2)": _nograd(torch, lambda: F.conv1d(t[0], w, padding=s["K"] // 2))}


# --------------------------------------------------------------- session 28
@program(name="log_softmax over keys (B,H,T,S)", kind="softmax", src="""
def lsm(float(B,H,T,S) x) -> (y) {
  m(b, h, t) max=! x(b, h, t, s)
  z(b, h, t) +=! exp(x(b, h, t, s) - m(b, h, t))
  y(b, h, t, s) = x(b, h, t, s) - m(b, h, t) - log(z(b, h, t))
}""", full=dict(B=8, H=8, T=256, S=256), tiny=dict(B=1, H=2, T=3, S=4),
   inputs=lambda r, s: [_n(r, s["B"], s["H"], s["T"], s["S"])])
def _log_softmax4(torch, a, t, s):
    F = torch.nn.functional
    return {"F.log_softmax": _nograd(torch, lambda: F.log_softmax(t[0], -1))}


@program(name="gru batch-first, torch formula (b_hn inside r), (3H,in)", kind="rnn", src="""
def gru(float(B,T,I) x, float(B,H) h0, float(3*H,I) Wih, float(3*H,H) Whh,
        float(3*H) bih, float(3*H) bhh) -> (h) {
  for t in T {
    gi(b, r) +=! x(b, t, i) * Wih(r, i)
    if t == 0 { gh(b, r) +=! h0(b, k) * Whh(r, k) }
    else      { gh(b, r) +=! h(b, t - 1, k) * Whh(r, k) }
    rg(b, j) = sigmoid(gi(b, j) + bih(j) + gh(b, j) + bhh(j)) where j in 0:H
    zg(b, j) = sigmoid(gi(b, H + j) + bih(H + j) + gh(b, H + j) + bhh(H + j)) where j in 0:H
    ng(b, j) = tanh(gi(b, 2 * H + j) + bih(2 * H + j) + rg(b, j) * (gh(b, 2 * H + j) + bhh(2 * H + j))) where j in 0:H
    if t == 0 { h(b, t, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h0(b, j) }
    else      { h(b, t, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h(b, t - 1, j) }
  }
}""", full=dict(B=32, T=64, I=256, H=256), tiny=dict(B=2, T=3, I=5, H=4),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _n(r, s["B"], s["H"]), _w(r, 3 * s["H"], s["I"]),
                        _w(r, 3 * s["H"], s["H"]), _w(r, 3 * s["H"]), _w(r, 3 * s["H"])])
def _gru_bf_torch(torch, a, t, s):
    net = torch.nn.GRU(s["I"], s["H"], batch_first=True)
    for p, v in zip([net.weight_ih_l0, net.weight_hh_l0, net.bias_ih_l0, net.bias_hh_l0], a[2:]):
        _copy(torch, p, v)
    return {"nn.GRU(batch_first)": _nograd(torch, lambda: net(t[0], t[1][None])[0])}


@program(name="lstm cell, one step (4H,in), two biases", kind="rnn", src="""
def cell(float(B,I) x, float(B,H) h, float(B,H) c, float(4*H,I) Wih, float(4*H,H) Whh,
         float(4*H) bih, float(4*H) bhh) -> (h1, c1) {
  g(b, r) +=! x(b, i) * Wih(r, i)
  g(b, r) += h(b, k) * Whh(r, k)
  g(b, r) = g(b, r) + bih(r) + bhh(r)
  c1(b, j) = sigmoid(g(b, H + j)) * c(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H
  h1(b, j) = sigmoid(g(b, 3 * H + j)) * tanh(c1(b, j)) where j in 0:H
}""", full=dict(B=64, I=512, H=512), tiny=dict(B=2, I=3, H=4),
   inputs=lambda r, s: [_n(r, s["B"], s["I"]), _n(r, s["B"], s["H"]), _n(r, s["B"], s["H"]),
                        _w(r, 4 * s["H"], s["I"]), _w(r, 4 * s["H"], s["H"]), _w(r, 4 * s["H"]),
                        _w(r, 4 * s["H"])])
def _lstm_cell(torch, a, t, s):
    net = torch.nn.LSTMCell(s["I"], s["H"])
    for p, v in zip([net.weight_ih, net.weight_hh, net.bias_ih, net.bias_hh], a[3:]):
        _copy(torch, p, v)
    return {"nn.LSTMCell": _nograd(torch, lambda: net(t[0], (t[1], t[2])))}


@program(name="depthwise dilated causal conv1d (K=3, d=2, select)", kind="conv", src="""
def dw(float(B,C,L) x, float(C,K) w) -> (y) {
  y(b, c, t) +=! (t + 2 * k - 2 * (K - 1) >= 0 ? x(b, c, t + 2 * k - 2 * (K - 1)) : 0) * w(c, k) where t in 0:L, k in 0:K
}""", full=dict(B=16, C=256, L=1024, K=3), tiny=dict(B=1, C=2, L=5, K=3),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["K"])])
def _dw_dilated(torch, a, t, s):
    F = torch.nn.functional
    K = s["K"]
    w = t[1][:, None, :]
    return {"F.conv1d(groups=C, dilation=2)": _nograd(
        torch, lambda: F.conv1d(F.pad(t[0], (2 * (K - 1), 0)), w, dilation=2, groups=s["C"]))}


@program(name="focal loss (gamma 2) with int labels", kind="loss", src="""
def focal(float(N,C) logits, int32(N) y) -> (loss) {
  m(n) max=! logits(n, c)
  z(n) +=! exp(logits(n, c) - m(n))
  p(n) = exp(logits(n, y(n)) - m(n)) / z(n)
  loss +=! -(1 - p(n)) * (1 - p(n)) * log(p(n)) / N
}""", full=dict(N=4096, C=1000), tiny=dict(N=3, C=4),
   inputs=lambda r, s: [_n(r, s["N"], s["C"]), r.integers(0, s["C"], s["N"]).astype(np.int32)])
def _focal(torch, a, t, s):
    F = torch.nn.functional
    y = t[1].long()

    def run():
        lp = F.log_softmax(t[0], -1).gather(1, y[:, None])[:, 0]
        return (-(1 - lp.exp()) ** 2 * lp).mean()
    return {"log_softmax + gather": _nograd(torch, run)}


@program(name="sinusoidal positional encoding added (select on parity)", kind="elementwise", src="""
def pe(float(B,T,D) x) -> (y) {
  y(b, t, d) = x(b, t, d) + (d % 2 == 0 ? sin(t * exp(-d * 9.210340372 / D))
                                        : cos(t * exp(-(d - 1) * 9.210340372 / D)))
}""", full=dict(B=32, T=512, D=512), tiny=dict(B=1, T=3, D=4),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"])])
def _pe(torch, a, t, s):
    T, D = s["T"], s["D"]

    def run():
        pos = torch.arange(T, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, D, 2, dtype=torch.float32) * (-9.210340372 / D))
        pe = torch.empty(T, D)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        return t[0] + pe
    return {"torch (table per call)": _nograd(torch, run)}


@program(name="softmax cross-entropy backward (dlogits)", kind="loss", src="""
def dce(float(N,C) logits, int32(N) y) -> (dx) {
  m(n) max=! logits(n, c)
  z(n) +=! exp(logits(n, c) - m(n))
  dx(n, c) = (exp(logits(n, c) - m(n)) / z(n) - (c == y(n) ? 1.0 : 0.0)) / N
}""", full=dict(N=4096, C=1000), tiny=dict(N=3, C=4),
   inputs=lambda r, s: [_n(r, s["N"], s["C"]), r.integers(0, s["C"], s["N"]).astype(np.int32)])
def _dce(torch, a, t, s):
    F = torch.nn.functional
    y = t[1].long()

    def run():
        g = F.softmax(t[0], -1)
        g[torch.arange(s["N"]), y] -= 1
        return g / s["N"]
    return {"softmax - one_hot": _nograd(torch, run)}


@program(name="conv2d 5x5 same padding (select), NCHW", kind="conv", src="""
def conv(float(B,C,H,W) x, float(O,C,5,5) w) -> (y) {
  y(b, o, h, v) +=! (h + kh - 2 >= 0 && h + kh - 2 < H && v + kw - 2 >= 0 && v + kw - 2 < W
                     ? x(b, c, h + kh - 2, v + kw - 2) : 0) * w(o, c, kh, kw) where h in 0:H, v in 0:W, kh in 0:5, kw in 0:5
}""", full=dict(B=8, C=32, H=64, W=64, O=64), tiny=dict(B=1, C=2, H=4, W=3, O=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _w(r, s["O"], s["C"], 5, 5)])
def _conv5(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d(padding=2)": _nograd(torch, lambda: F.conv2d(t[0], t[1], padding=2))}


@program(name="rbf kernel matrix exp(-g |x_i - y_j|^2)", kind="elementwise", src="""
def rbf(float(N,D) x, float(M,D) y) -> (K) {
  d2(i, j) +=! (x(i, d) - y(j, d)) * (x(i, d) - y(j, d))
  K(i, j) = exp(-0.5 * d2(i, j))
}""", full=dict(N=2048, M=2048, D=64), tiny=dict(N=3, M=2, D=4),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]) * 0.2, _n(r, s["M"], s["D"]) * 0.2])
def _rbf(torch, a, t, s):
    return {"exp(-0.5 cdist^2)": _nograd(torch, lambda: torch.exp(-0.5 * torch.cdist(t[0], t[1]) ** 2))}


@program(name="wavenet block (dilated causal conv, tanh * sigmoid, residual)", kind="conv", src="""
def wn(float(B,C,L) x, float(C,C,2) wf, float(C,C,2) wg, float(C,C) wr) -> (y) {
  f(b, o, t) +=! (t + 4 * k - 4 >= 0 ? x(b, c, t + 4 * k - 4) : 0) * wf(o, c, k) where t in 0:L, k in 0:2
  g(b, o, t) +=! (t + 4 * k - 4 >= 0 ? x(b, c, t + 4 * k - 4) : 0) * wg(o, c, k) where t in 0:L, k in 0:2
  z(b, o, t) = tanh(f(b, o, t)) * sigmoid(g(b, o, t))
  y(b, o, t) +=! wr(o, c) * z(b, c, t)
  y(b, o, t) = y(b, o, t) + x(b, o, t)
}""", full=dict(B=8, C=128, L=2048), tiny=dict(B=1, C=2, L=7),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["C"], 2), _w(r, s["C"], s["C"], 2),
                        _w(r, s["C"], s["C"])])
def _wavenet(torch, a, t, s):
    F = torch.nn.functional

    def run():
        xp = F.pad(t[0], (4, 0))
        z = torch.tanh(F.conv1d(xp, t[1], dilation=4)) * torch.sigmoid(F.conv1d(xp, t[2], dilation=4))
        return F.conv1d(z, t[3][:, :, None]) + t[0]
    return {"F.conv1d x3": _nograd(torch, run)}


@program(name="logcumsumexp over time (loop)", kind="scan", src="""
def lcse(float(T,B,D) x) -> (y) {
  for t in T {
    if t == 0 { y(t, b, d) = x(t, b, d) }
    else      { y(t, b, d) = fmax(y(t - 1, b, d), x(t, b, d))
                             + log1p(exp(-fabs(y(t - 1, b, d) - x(t, b, d)))) }
  }
}""", full=dict(T=256, B=32, D=256), tiny=dict(T=3, B=2, D=3),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["D"])])
def _lcse(torch, a, t, s):
    return {"torch.logcumsumexp": _nograd(torch, lambda: torch.logcumsumexp(t[0], 0))}


# --------------------------------------------------------------- session 29
@program(name="layer norm backward (dx), torch autograd", kind="norm", src="""
def lnb(float(N,D) x, float(D) g, float(N,D) dy) -> (dx) {
  mu(n) +=! x(n, d) / D
  var(n) +=! (x(n, d) - mu(n)) * (x(n, d) - mu(n)) / D
  rs(n) = 1 / sqrt(var(n) + 1e-5)
  gy(n, d) = dy(n, d) * g(d)
  s1(n) +=! gy(n, d)
  s2(n) +=! gy(n, d) * (x(n, d) - mu(n)) * rs(n)
  dx(n, d) = rs(n) * (gy(n, d) - s1(n) / D - (x(n, d) - mu(n)) * rs(n) * s2(n) / D)
}""", full=dict(N=8192, D=1024), tiny=dict(N=3, D=4),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]), 1 + 0.1 * _n(r, s["D"]), _n(r, s["N"], s["D"])])
def _lnb(torch, a, t, s):
    F = torch.nn.functional
    x = t[0].clone().requires_grad_(True)

    def run():
        y = F.layer_norm(x, (s["D"],), t[1])
        return torch.autograd.grad(y, x, t[2])[0]
    return {"layer_norm fwd+bwd": run}


@program(name="softmax backward over the last dim", kind="softmax", src="""
def smb(float(B,T,C) y, float(B,T,C) dy) -> (dx) {
  s(b, t) +=! dy(b, t, c) * y(b, t, c)
  dx(b, t, c) = y(b, t, c) * (dy(b, t, c) - s(b, t))
}""", full=dict(B=32, T=256, C=1024), tiny=dict(B=1, T=2, C=3),
   inputs=lambda r, s: [np.abs(_n(r, s["B"], s["T"], s["C"])), _n(r, s["B"], s["T"], s["C"])])
def _smb(torch, a, t, s):
    return {"aten._softmax_backward_data": _nograd(
        torch, lambda: torch._softmax_backward_data(t[1], t[0], -1, torch.float32))}


@program(name="clip / infonce loss (diagonal labels)", kind="loss", src="""
def clip(float(N,D) u, float(N,D) v) -> (loss) {
  s(i, j) +=! u(i, d) * v(j, d)
  m(i) max=! s(i, j)
  z(i) +=! exp(s(i, j) - m(i))
  loss +=! (m(i) + log(z(i)) - s(i, i)) / N
}""", full=dict(N=2048, D=512), tiny=dict(N=3, D=2),
   inputs=lambda r, s: [_w(r, s["N"], s["D"]), _w(r, s["N"], s["D"])])
def _clip(torch, a, t, s):
    F = torch.nn.functional
    lab = torch.arange(s["N"])
    return {"F.cross_entropy(u v^T)": _nograd(torch, lambda: F.cross_entropy(t[0] @ t[1].T, lab))}


@program(name="chamfer distance (point clouds, min both ways)", kind="distance", src="""
def chamfer(float(B,N,E) p, float(B,M,E) q) -> (d) {
  dist(b, n, m) +=! (p(b, n, e) - q(b, m, e)) * (p(b, n, e) - q(b, m, e))
  dn(b, n) min=! dist(b, n, m)
  dm(b, m) min=! dist(b, n, m)
  d(b) +=! dn(b, n) / N
  d(b) += dm(b, m) / M
}""", full=dict(B=8, N=2048, M=2048, E=3), tiny=dict(B=2, N=3, M=4, E=3),
   inputs=lambda r, s: [_n(r, s["B"], s["N"], s["E"]), _n(r, s["B"], s["M"], s["E"])])
def _chamfer(torch, a, t, s):
    def run():
        d = torch.cdist(t[0], t[1]) ** 2
        return d.min(2).values.mean(1) + d.min(1).values.mean(1)
    return {"cdist^2 + min": _nograd(torch, run)}


@program(name="separable blur (K taps along h, then w), valid", kind="conv", src="""
def blur(float(B,C,H,W) x, float(K) k) -> (y) {
  r(b, c, h, w) +=! x(b, c, h + i, w) * k(i) where h in 0:H-K+1, i in 0:K
  y(b, c, h, w) +=! r(b, c, h, w + j) * k(j) where w in 0:W-K+1, j in 0:K
}""", full=dict(B=16, C=16, H=128, W=128, K=7), tiny=dict(B=1, C=2, H=5, W=4, K=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), np.abs(_w(r, s["K"]))])
def _blur(torch, a, t, s):
    F = torch.nn.functional
    C, K = s["C"], s["K"]
    kh = t[1].reshape(1, 1, K, 1).expand(C, 1, K, 1).contiguous()
    kw = t[1].reshape(1, 1, 1, K).expand(C, 1, 1, K).contiguous()
    return {"depthwise conv2d x2": _nograd(
        torch, lambda: F.conv2d(F.conv2d(t[0], kh, groups=C), kw, groups=C))}


@program(name="batch norm backward (dx, training), NCHW", kind="norm", src="""
def bnb(float(N,C,H,W) x, float(C) g, float(N,C,H,W) dy) -> (dx) {
  mu(c) +=! x(n, c, h, w) / (N * H * W)
  var(c) +=! (x(n, c, h, w) - mu(c)) * (x(n, c, h, w) - mu(c)) / (N * H * W)
  rs(c) = 1 / sqrt(var(c) + 1e-5)
  s1(c) +=! dy(n, c, h, w)
  s2(c) +=! dy(n, c, h, w) * (x(n, c, h, w) - mu(c))
  dx(n, c, h, w) = g(c) * rs(c) * (dy(n, c, h, w) - s1(c) / (N * H * W)
                   - (x(n, c, h, w) - mu(c)) * rs(c) * rs(c) * s2(c) / (N * H * W))
}""", full=dict(N=32, C=64, H=32, W=32), tiny=dict(N=2, C=2, H=2, W=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), 1 + 0.1 * _n(r, s["C"]),
                        _n(r, s["N"], s["C"], s["H"], s["W"])])
def _bnb(torch, a, t, s):
    F = torch.nn.functional
    x = t[0].clone().requires_grad_(True)

    def run():
        y = F.batch_norm(x, None, None, t[1], training=True)
        return torch.autograd.grad(y, x, t[2])[0]
    return {"batch_norm fwd+bwd": run}


@program(name="conv1d input gradient (select on the window)", kind="conv", src="""
def dx(float(B,O,Lo) dy, float(O,C,K) w) -> (dx) {
  dx(b, c, l) +=! (l - k >= 0 && l - k < Lo ? dy(b, o, l - k) : 0) * w(o, c, k) where l in 0:Lo+K-1, k in 0:K
}""", full=dict(B=16, O=128, C=128, Lo=1022, K=3), tiny=dict(B=1, O=2, C=3, Lo=4, K=2),
   inputs=lambda r, s: [_n(r, s["B"], s["O"], s["Lo"]), _w(r, s["O"], s["C"], s["K"])])
def _conv1d_dx(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv_transpose1d": _nograd(torch, lambda: F.conv_transpose1d(t[0], t[1]))}


@program(name="bilinear scores q W k^T in one statement", kind="attention", src="""
def bil(float(B,T,D) q, float(D,E) W, float(B,S,E) k) -> (s) {
  s(b, i, j) +=! q(b, i, d) * W(d, e) * k(b, j, e)
}""", full=dict(B=8, T=256, S=256, D=128, E=128), tiny=dict(B=1, T=2, S=3, D=2, E=3),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), _w(r, s["D"], s["E"]), _n(r, s["B"], s["S"], s["E"])])
def _bil(torch, a, t, s):
    return {"(q @ W) @ k^T": _nograd(torch, lambda: (t[0] @ t[1]) @ t[2].transpose(1, 2))}


@program(name="embedding gradient as a one-hot reduction", kind="embedding", src="""
def demb(int32(N) idx, float(N,D) dy) -> (dE) {
  dE(v, d) +=! (idx(n) == v ? dy(n, d) : 0) where v in 0:V
}""", full=dict(N=4096, D=256, V=1000), tiny=dict(N=5, D=3, V=4), free=("V",),
   inputs=lambda r, s: [r.integers(0, s["V"], s["N"]).astype(np.int32), _n(r, s["N"], s["D"])])
def _demb(torch, a, t, s):
    idx = t[0].long()

    def run():
        return torch.zeros(s["V"], s["D"]).index_add_(0, idx, t[1])
    return {"index_add_": _nograd(torch, run)}


@program(name="index_select columns (feature permutation)", kind="embedding", src="""
def sel(float(B,D) x, int32(E) idx) -> (y) {
  y(b, e) = x(b, idx(e))
}""", full=dict(B=4096, D=1024, E=1024), tiny=dict(B=2, D=4, E=3),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), r.integers(0, s["D"], s["E"]).astype(np.int32)])
def _sel(torch, a, t, s):
    idx = t[1].long()
    return {"index_select(1)": _nograd(torch, lambda: t[0].index_select(1, idx))}


@program(name="layer norm over (C,H,W) of NCHW", kind="norm", src="""
def ln(float(N,C,H,W) x, float(C,H,W) g, float(C,H,W) be) -> (y) {
  mu(n) +=! x(n, c, h, w) / (C * H * W)
  var(n) +=! (x(n, c, h, w) - mu(n)) * (x(n, c, h, w) - mu(n)) / (C * H * W)
  y(n, c, h, w) = (x(n, c, h, w) - mu(n)) / sqrt(var(n) + 1e-5) * g(c, h, w) + be(c, h, w)
}""", full=dict(N=32, C=64, H=32, W=32), tiny=dict(N=2, C=2, H=2, W=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), 1 + 0.1 * _n(r, s["C"], s["H"], s["W"]),
                        0.1 * _n(r, s["C"], s["H"], s["W"])])
def _ln_chw(torch, a, t, s):
    F = torch.nn.functional
    return {"F.layer_norm((C,H,W))": _nograd(
        torch, lambda: F.layer_norm(t[0], (s["C"], s["H"], s["W"]), t[1], t[2]))}


@program(name="attention backward, dq only", kind="attention", src="""
def dq(float(B,T,D) q, float(B,T,D) k, float(B,T,D) v, float(B,T,D) g) -> (dq) {
  s(b, i, j) +=! q(b, i, d) * k(b, j, d) / sqrt(D)
  m(b, i) max=! s(b, i, j)
  z(b, i) +=! exp(s(b, i, j) - m(b, i))
  p(b, i, j) = exp(s(b, i, j) - m(b, i)) / z(b, i)
  dp(b, i, j) +=! g(b, i, d) * v(b, j, d)
  c(b, i) +=! p(b, i, j) * dp(b, i, j)
  dq(b, i, d) +=! p(b, i, j) * (dp(b, i, j) - c(b, i)) * k(b, j, d) / sqrt(D)
}""", full=dict(B=16, T=256, D=64), tiny=dict(B=1, T=3, D=2),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]) for _ in range(4)])
def _attn_dq(torch, a, t, s):
    q, k, v, g = t
    sc = 1 / np.sqrt(s["D"])

    def run():
        p = torch.softmax(q @ k.transpose(1, 2) * sc, -1)
        dp = g @ v.transpose(1, 2)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
        return ds @ k * sc
    return {"torch formula": _nograd(torch, run)}


@program(name="depthwise conv2d 5x5, select around the product", kind="conv", src="""
def dw5(float(N,C,H,W) x, float(C,5,5) w) -> (y) {
  y(n, c, h, v) +=! (h + kh - 2 >= 0 && h + kh - 2 < H && v + kv - 2 >= 0 && v + kv - 2 < W)
                    ? x(n, c, h + kh - 2, v + kv - 2) * w(c, kh, kv) : 0
    where h in 0:H, v in 0:W, kh in 0:5, kv in 0:5
}""", full=dict(N=16, C=128, H=28, W=28), tiny=dict(N=1, C=2, H=3, W=4),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["C"], 5, 5)])
def _dw5(torch, a, t, s):
    F = torch.nn.functional
    w = t[1][:, None].contiguous()
    return {"F.conv2d(padding=2, groups=C)": _nograd(torch, lambda: F.conv2d(t[0], w, padding=2, groups=s["C"]))}


@program(name="conv2d 3x3 stride 2, select around the product", kind="conv", src="""
def c3s2(float(N,C,H,W) x, float(M,C,3,3) w) -> (y) {
  y(n, m, i, j) +=! (2 * i + kh - 1 >= 0 && 2 * i + kh - 1 < H && 2 * j + kw - 1 >= 0 && 2 * j + kw - 1 < W)
                    ? x(n, c, 2 * i + kh - 1, 2 * j + kw - 1) * w(m, c, kh, kw) : 0
    where i in 0:(H + 1) / 2, j in 0:(W + 1) / 2, kh in 0:3, kw in 0:3
}""", full=dict(N=4, C=64, H=56, W=56, M=128), tiny=dict(N=1, C=2, H=5, W=4, M=3),
   inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["M"], s["C"], 3, 3)])
def _c3s2(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d(stride=2, padding=1)": _nograd(torch, lambda: F.conv2d(t[0], t[1], stride=2, padding=1))}


@program(name="roll along the last axis", kind="elementwise", src="""
def roll(float(B,N) x) -> (y) {
  y(b, i) = x(b, (i + 7) % N) where i in 0:N
}""", full=dict(B=1024, N=4096), tiny=dict(B=2, N=5),
   inputs=lambda r, s: [_n(r, s["B"], s["N"])])
def _roll(torch, a, t, s):
    return {"torch.roll": _nograd(torch, lambda: torch.roll(t[0], -7, dims=1))}


# --------------------------------------------------------------- session 33
@program(name="cumsum along the last axis (if/else loop)", kind="scan", src="""
def csl(float(B,L) x) -> (s) {
  for t in L {
    if t == 0 { s(b, t) = x(b, t) } else { s(b, t) = s(b, t - 1) + x(b, t) }
  }
}""", full=dict(B=256, L=1024), tiny=dict(B=2, L=3), inputs=lambda r, s: [_n(r, s["B"], s["L"])])
def _csl(torch, a, t, s):
    return {"torch.cumsum(dim=1)": _nograd(torch, lambda: torch.cumsum(t[0], 1))}


@program(name="discounted returns (reversed loop)", kind="scan", src="""
def disc(float(B,L) r) -> (R) {
  for t in L {
    R(b, L - 1 - t) = r(b, L - 1 - t) + (t > 0 ? 0.99 * R(b, L - t) : 0)
  }
}""", full=dict(B=64, L=512), tiny=dict(B=2, L=3), inputs=lambda r, s: [_n(r, s["B"], s["L"])])
def _disc(torch, a, t, s):
    def run():  # the loop an RL training script writes
        out = torch.empty_like(t[0])
        acc = torch.zeros(s["B"])
        for u in range(s["L"] - 1, -1, -1):
            acc = t[0][:, u] + 0.99 * acc
            out[:, u] = acc
        return out
    return {"torch loop": _nograd(torch, run)}


# --------------------------------------------------------------- session 34
@program(name="cumsum of a (B, C, L) batch along L (select)", kind="scan", src="""
def csbcl(float(B,C,L) x) -> (s) {
  for t in L {
    s(b, c, t) = x(b, c, t) + (t > 0 ? s(b, c, t - 1) : 0)
  }
}""", full=dict(B=8, C=64, L=1024), tiny=dict(B=2, C=2, L=3), inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"])])
def _csbcl(torch, a, t, s):
    return {"torch.cumsum(dim=2)": _nograd(torch, lambda: torch.cumsum(t[0], 2))}


@program(name="conv2d 1x1 on 7x7 maps (512 ch)", kind="conv", src=CONV2D_1X1,
         full=dict(N=8, C=512, H=7, W=7, O=512), tiny=dict(N=1, C=2, H=3, W=3, O=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]), _w(rng, s["O"], s["C"])])
def _conv2d_1x1_7(torch, a, t, s):
    return _conv2d_1x1(torch, a, t, s)


@program(name="conv2d 1x1 on 14x14 maps (256 ch)", kind="conv", src=CONV2D_1X1,
         full=dict(N=8, C=256, H=14, W=14, O=256), tiny=dict(N=1, C=2, H=2, W=5, O=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]), _w(rng, s["O"], s["C"])])
def _conv2d_1x1_14(torch, a, t, s):
    return _conv2d_1x1(torch, a, t, s)


# --------------------------------------------------------------- session 35
@program(name="batch norm over (N, C) features (batch statistics)", kind="norm", src="""
# BatchNorm1d in training mode: statistics over the batch, per feature
def bn1d(float(N,C) x, float(C) gamma, float(C) beta) -> (y, mean, var) {
  mean(c) +=! x(n, c) / N
  var(c) +=! (x(n, c) - mean(c)) * (x(n, c) - mean(c)) / N
  y(n, c) = (x(n, c) - mean(c)) / sqrt(var(c) + 1e-5) * gamma(c) + beta(c)
}""", full=dict(N=256, C=1024), tiny=dict(N=3, C=5), pick=lambda r: r[0],
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"]), _w(rng, s["C"]), _w(rng, s["C"])])
def _bn1d(torch, a, t, s):
    F = torch.nn.functional
    return {"F.batch_norm(training=True)": _nograd(torch, lambda: F.batch_norm(t[0], None, None, t[1], t[2],
                                                                               training=True, eps=1e-5))}


@program(name="attention scores with the heads last (bhqd,bhkd->bqkh)", kind="attention", src="""
def scores(float(B,NH,T,D) q, float(B,NH,S,D) k) -> (s) {
  s(b, i, j, h) +=! q(b, h, i, d) * k(b, h, j, d)
}""", full=dict(B=8, NH=8, T=256, S=256, D=64), tiny=dict(B=1, NH=2, T=3, S=5, D=4),
         inputs=lambda rng, s: [_n(rng, s["B"], s["NH"], s["T"], s["D"]), _n(rng, s["B"], s["NH"], s["S"], s["D"])])
def _scores_heads_last(torch, a, t, s):
    return {"torch.einsum + contiguous": _nograd(torch, lambda: torch.einsum("bhqd,bhkd->bqkh", t[0], t[1])
                                                 .contiguous())}


@program(name="running mean over time as a masked sum", kind="scan", src="""
def running_mean(float(B,T,D) x) -> (y) {
  y(b, t, d) +=! (s <= t ? x(b, s, d) : 0) / (t + 1) where s in 0:T, t in 0:T
}""", full=dict(B=16, T=256, D=256), tiny=dict(B=2, T=5, D=3), inputs=lambda rng, s: [_n(rng, s["B"], s["T"], s["D"])])
def _running_mean(torch, a, t, s):
    steps = torch.arange(1, s["T"] + 1, dtype=torch.float32)[None, :, None]
    return {"torch.cumsum / t": _nograd(torch, lambda: t[0].cumsum(1) / steps)}


@program(name="newton-schulz orthogonalisation, 5 steps in a loop", kind="loop", src="""
def newton_schulz(float(M,N) G) -> (Y) {
  nrm +=! G(i, j) * G(i, j)
  for s in 6 {
    if s == 0 { X(s, i, j) = G(i, j) / (sqrt(nrm) + 1e-7) }
    else {
      A(i, k) +=! X(s - 1, i, j) * X(s - 1, k, j)
      A2(i, k) +=! A(i, l) * A(l, k)
      Bm(i, k) = -4.7750 * A(i, k) + 2.0315 * A2(i, k)
      X(s, i, j) +=! Bm(i, k) * X(s - 1, k, j)
      X(s, i, j) = 3.4445 * X(s - 1, i, j) + X(s, i, j)
    }
  }
  Y(i, j) = X(5, i, j)
}""", full=dict(M=256, N=512), tiny=dict(M=3, N=5), inputs=lambda rng, s: [_n(rng, s["M"], s["N"])])
def _newton_schulz(torch, a, t, s):
    def run():
        X = t[0] / (t[0].norm() + 1e-7)
        for _ in range(5):
            A = X @ X.T
            X = 3.4445 * X + (-4.7750 * A + 2.0315 * A @ A) @ X
        return X
    return {"torch loop of matmuls": _nograd(torch, run)}


@program(name="matrix exponential, 12 Taylor terms in a loop", kind="loop", src="""
def expm_taylor(float(B,N,N) A) -> (E) {
  for t in 13 {
    if t == 0 { P(t, b, i, j) = i == j ? 1.0 : 0.0 where exists A(b, i, j) }
    else { P(t, b, i, j) +=! P(t - 1, b, i, k) * A(b, k, j) / t }
    if t == 0 { E(b, i, j) = P(t, b, i, j) } else { E(b, i, j) += P(t, b, i, j) }
  }
}""", full=dict(B=64, N=64), tiny=dict(B=2, N=3),
         inputs=lambda rng, s: [(_n(rng, s["B"], s["N"], s["N"]) / (2 * s["N"] ** 0.5)).astype(np.float32)])
def _expm_taylor(torch, a, t, s):
    def run():
        P = torch.eye(s["N"]).expand_as(t[0])
        E = P.clone()
        for k in range(1, 13):
            P = (P @ t[0]) / k
            E = E + P
        return E
    return {"torch loop of bmm": _nograd(torch, run)}


@program(name="adaptive avg pool 2d to 7 x 7 (window bounds as selects)", kind="pool", src="""
def adapool(float(N,C,H,W) x) -> (y) {
  cnt(i, j) = float(((i + 1) * H + 6) / 7 - (i * H) / 7) * float(((j + 1) * W + 6) / 7 - (j * W) / 7) where i in 0:7, j in 0:7
  y(n, c, i, j) +=! ((i * H) / 7 + a < ((i + 1) * H + 6) / 7 && (j * W) / 7 + u < ((j + 1) * W + 6) / 7
      ? x(n, c, (i * H) / 7 + a, (j * W) / 7 + u) : 0) where i in 0:7, j in 0:7, a in 0:H / 7 + 2, u in 0:W / 7 + 2
  y(n, c, i, j) = y(n, c, i, j) / cnt(i, j)
}""", full=dict(N=32, C=256, H=32, W=32), tiny=dict(N=2, C=3, H=9, W=13),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"])])
def _adapool(torch, a, t, s):
    return {"F.adaptive_avg_pool2d": _nograd(torch, lambda: torch.nn.functional.adaptive_avg_pool2d(t[0], 7))}


@program(name="grid_sample, bilinear, border (where bindings)", kind="data", src="""
def grid_sample(float(N,C,H,W) x, float(N,P,Q,2) g) -> (y) {
  y(n, c, i, j) = (1 - ax) * (1 - ay) * x(n, c, r0, c0) + ax * (1 - ay) * x(n, c, r0, c1)
                + (1 - ax) * ay * x(n, c, r1, c0) + ax * ay * x(n, c, r1, c1)
    where fx = fmin(fmax((g(n, i, j, 0) + 1) * 0.5 * (W - 1), 0.0), W - 1.0),
          fy = fmin(fmax((g(n, i, j, 1) + 1) * 0.5 * (H - 1), 0.0), H - 1.0),
          c0 = min(max(int32(floor(fx)), 0), W - 1), r0 = min(max(int32(floor(fy)), 0), H - 1),
          c1 = min(c0 + 1, W - 1), r1 = min(r0 + 1, H - 1),
          ax = fx - float(c0), ay = fy - float(r0)
}""", full=dict(N=8, C=64, H=64, W=64, P=64, Q=64), tiny=dict(N=2, C=3, H=5, W=7, P=4, Q=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]),
                                rng.uniform(-1.1, 1.1, (s["N"], s["P"], s["Q"], 2)).astype(np.float32)])
def _grid_sample(torch, a, t, s):
    return {"F.grid_sample": _nograd(torch, lambda: torch.nn.functional.grid_sample(
        t[0], t[1], mode="bilinear", padding_mode="border", align_corners=True))}


@program(name="group norm channels-last (32 groups of 8)", kind="norm", src="""
def group_norm_nhwc(float(N,H,W,C) x, float(C) gamma, float(C) beta) -> (y) {
  mean(n, g) +=! x(n, h, v, g * 8 + k) / (H * W * 8) where g in 0:C / 8, k in 0:8
  var(n, g) +=! (x(n, h, v, g * 8 + k) - mean(n, g)) * (x(n, h, v, g * 8 + k) - mean(n, g)) / (H * W * 8)
      where g in 0:C / 8, k in 0:8
  y(n, h, v, c) = (x(n, h, v, c) - mean(n, c / 8)) * rsqrt(var(n, c / 8) + 1e-5) * gamma(c) + beta(c)
}""", full=dict(N=8, H=32, W=32, C=256), tiny=dict(N=2, H=3, W=5, C=16),
         inputs=lambda rng, s: [_n(rng, s["N"], s["H"], s["W"], s["C"]), _n(rng, s["C"]), _n(rng, s["C"])])
def _group_norm_nhwc(torch, a, t, s):
    x = t[0].permute(0, 3, 1, 2)  # channels-last memory, as torch sees an NHWC model's activations
    return {"F.group_norm (channels_last)": _nograd(torch, lambda: torch.nn.functional.group_norm(
        x, s["C"] // 8, t[1], t[2], 1e-5).permute(0, 2, 3, 1))}


@program(name="depthwise conv2d 3x3 channels-last, padding as a select, + bias", kind="conv", src="""
def dw_nhwc(float(N,H,W,C) x, float(3,3,C) w, float(C) b) -> (y) {
  y(n, h, v, c) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kv - 1 >= 0 && v + kv - 1 < W
      ? x(n, h + kh - 1, v + kv - 1, c) : 0) * w(kh, kv, c) where h in 0:H, v in 0:W, kh in 0:3, kv in 0:3
  y(n, h, v, c) = y(n, h, v, c) + b(c)
}""", full=dict(N=8, H=56, W=56, C=128), tiny=dict(N=2, H=3, W=5, C=4),
         inputs=lambda rng, s: [_n(rng, s["N"], s["H"], s["W"], s["C"]), _n(rng, 3, 3, s["C"]), _n(rng, s["C"])])
def _dw_nhwc(torch, a, t, s):
    x, w = t[0].permute(0, 3, 1, 2), t[1].permute(2, 0, 1).unsqueeze(1)  # channels-last memory
    return {"F.conv2d(groups=C) channels_last": _nograd(torch, lambda: torch.nn.functional.conv2d(
        x, w, t[2], padding=1, groups=s["C"]).permute(0, 2, 3, 1))}


# ---------------------------------------------------------------- session 39: a sum's partial costly term, two directions, wrapped indices

@program(name="rnn-t joint (tanh inside the product)", kind="attention", src="""
def joint(float(B,T,H) e, float(B,U,H) p, float(V,H) W, float(V) bias) -> (z) {
  z(b, t, u, v) +=! tanh(e(b, t, k) + p(b, u, k)) * W(v, k)
  z(b, t, u, v) = z(b, t, u, v) + bias(v)
}""", full=dict(B=4, T=64, U=16, H=256, V=128), tiny=dict(B=2, T=3, U=2, H=5, V=4),
         inputs=lambda rng, s: [_n(rng, s["B"], s["T"], s["H"]), _n(rng, s["B"], s["U"], s["H"]), _w(rng, s["V"], s["H"]), _w(rng, s["V"])])
def _joint(torch, a, t, s):
    e, p, W, b = t
    return {"tanh + F.linear": _nograd(torch, lambda: torch.nn.functional.linear(torch.tanh(e[:, :, None, :] + p[:, None, :, :]), W, b))}

@program(name="conv1d reflect padding (nested select in the index)", kind="conv", src="""
def conv(float(B,C,L) x, float(O,C,3) w) -> (y) {
  y(b, o, t) +=! x(b, c, t + k - 1 < 0 ? 1 - t - k : (t + k - 1 >= L ? 2 * L - t - k - 1 : t + k - 1)) * w(o, c, k)
      where t in 0:L, k in 0:3
}""", full=dict(B=16, C=128, L=512, O=128, K=3), tiny=dict(B=2, C=3, L=5, O=4, K=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["O"], s["C"], 3)])
def _reflect(torch, a, t, s):
    F = torch.nn.functional
    return {"F.pad(reflect) + F.conv1d": _nograd(torch, lambda: F.conv1d(F.pad(t[0], (1, 1), mode="reflect"), t[1]))}

LSTM2_GATE_MAJOR = """
def lstm2(float(T,B,I) x, float(4,H,I) W0, float(4,H,H) U0, float(4,H) b0,
          float(4,H,H) W1, float(4,H,H) U1, float(4,H) b1) -> (h2) {
  for t in T {
    g0(g, b, j) +=! x(t, b, i) * W0(g, j, i)
    if t > 0 { g0(g, b, j) += h1(t - 1, b, k) * U0(g, j, k) }
    if t == 0 { c1(t, b, j) = sigmoid(g0(0, b, j) + b0(0, j)) * tanh(g0(2, b, j) + b0(2, j)) }
    else { c1(t, b, j) = sigmoid(g0(1, b, j) + b0(1, j)) * c1(t - 1, b, j) + sigmoid(g0(0, b, j) + b0(0, j)) * tanh(g0(2, b, j) + b0(2, j)) }
    h1(t, b, j) = sigmoid(g0(3, b, j) + b0(3, j)) * tanh(c1(t, b, j))
    g1(g, b, j) +=! h1(t, b, i) * W1(g, j, i)
    if t > 0 { g1(g, b, j) += h2(t - 1, b, k) * U1(g, j, k) }
    if t == 0 { c2(t, b, j) = sigmoid(g1(0, b, j) + b1(0, j)) * tanh(g1(2, b, j) + b1(2, j)) }
    else { c2(t, b, j) = sigmoid(g1(1, b, j) + b1(1, j)) * c2(t - 1, b, j) + sigmoid(g1(0, b, j) + b1(0, j)) * tanh(g1(2, b, j) + b1(2, j)) }
    h2(t, b, j) = sigmoid(g1(3, b, j) + b1(3, j)) * tanh(c2(t, b, j))
  }
}"""

def _lstm2_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _w(rng, 4, H, I), _w(rng, 4, H, H), _w(rng, 4, H), _w(rng, 4, H, H), _w(rng, 4, H, H), _w(rng, 4, H)]

@program(name="stacked lstm L=2, gate-major (4,H,in), zero state", kind="rnn", src=LSTM2_GATE_MAJOR,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4), inputs=_lstm2_inputs)
def _lstm2(torch, a, t, s):
    I, H = s["I"], s["H"]
    net = torch.nn.LSTM(I, H, num_layers=2)
    for l, (W, U, b) in enumerate([(a[1], a[2], a[3]), (a[4], a[5], a[6])]):
        _copy(torch, getattr(net, f"weight_ih_l{l}"), W.reshape(4 * H, -1))
        _copy(torch, getattr(net, f"weight_hh_l{l}"), U.reshape(4 * H, H))
        _copy(torch, getattr(net, f"bias_ih_l{l}"), b.reshape(-1))
        _copy(torch, getattr(net, f"bias_hh_l{l}"), np.zeros(4 * H, np.float32))
    return {"torch.nn.LSTM(num_layers=2)": _nograd(torch, lambda: net(t[0])[0])}

BILSTM_IN_OUT = """
def bilstm(float(T,B,I) x, float(4,I,H) Wf, float(4,H,H) Uf, float(4,I,H) Wb, float(4,H,H) Ub) -> (hf, hb) {
  for t in T {
    gf(g, b, j) +=! x(t, b, i) * Wf(g, i, j)
    gb(g, b, j) +=! x(T - 1 - t, b, i) * Wb(g, i, j)
    if t > 0 {
      gf(g, b, j) += hf(t - 1, b, k) * Uf(g, k, j)
      gb(g, b, j) += hb(T - t, b, k) * Ub(g, k, j)
      cf(t, b, j) = sigmoid(gf(1, b, j)) * cf(t - 1, b, j) + sigmoid(gf(0, b, j)) * tanh(gf(2, b, j))
      cb(T - 1 - t, b, j) = sigmoid(gb(1, b, j)) * cb(T - t, b, j) + sigmoid(gb(0, b, j)) * tanh(gb(2, b, j))
    } else {
      cf(t, b, j) = sigmoid(gf(0, b, j)) * tanh(gf(2, b, j))
      cb(T - 1 - t, b, j) = sigmoid(gb(0, b, j)) * tanh(gb(2, b, j))
    }
    hf(t, b, j) = sigmoid(gf(3, b, j)) * tanh(cf(t, b, j))
    hb(T - 1 - t, b, j) = sigmoid(gb(3, b, j)) * tanh(cb(T - 1 - t, b, j))
  }
}"""

def _bilstm_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _w(rng, 4, I, H), _w(rng, 4, H, H), _w(rng, 4, I, H), _w(rng, 4, H, H)]

@program(name="bidirectional lstm, reversed writes, (in,out) per gate", kind="rnn", src=BILSTM_IN_OUT,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4), inputs=_bilstm_inputs,
         pick=lambda r: np.concatenate([r[0], r[1]], -1))
def _bilstm(torch, a, t, s):
    I, H = s["I"], s["H"]
    net = torch.nn.LSTM(I, H, bidirectional=True)
    for suf, W, U in [("", a[1], a[2]), ("_reverse", a[3], a[4])]:
        _copy(torch, getattr(net, "weight_ih_l0" + suf), W.transpose(0, 2, 1).reshape(4 * H, I))
        _copy(torch, getattr(net, "weight_hh_l0" + suf), U.transpose(0, 2, 1).reshape(4 * H, H))
        _copy(torch, getattr(net, "bias_ih_l0" + suf), np.zeros(4 * H, np.float32))
        _copy(torch, getattr(net, "bias_hh_l0" + suf), np.zeros(4 * H, np.float32))
    return {"torch.nn.LSTM(bidirectional)": _nograd(torch, lambda: net(t[0])[0])}


@program(name="conv1d circular padding (% L index)", kind="conv", src="""
def conv(float(B,C,L) x, float(O,C,5) w) -> (y) {
  y(b, o, t) +=! x(b, c, (t + k - 2 + L) % L) * w(o, c, k) where t in 0:L, k in 0:5
}""", full=dict(B=16, C=128, L=512, O=128), tiny=dict(B=2, C=3, L=6, O=4),
         inputs=lambda rng, s: [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["O"], s["C"], 5)])
def _circ(torch, a, t, s):
    F = torch.nn.functional
    return {"F.pad(circular) + F.conv1d": _nograd(torch, lambda: F.conv1d(F.pad(t[0], (2, 2), mode="circular"), t[1]))}


@program(name="gru, one (I, 3H) matrix W(i, g*H+j), (in,out)", kind="rnn", src="""
def gru(float(T,B,I) x, float(I,G) W, float(H,G) U, float(G) bias) -> (h) {
  for t in T {
    a(b, c) +=! x(t, b, i) * W(i, c)
    if t == 0 { r(b, c) = 0.0 where b in 0:B, c in 0:G } else { r(b, c) +=! h(t - 1, b, k) * U(k, c) }
    z(b, j) = sigmoid(a(b, H + j) + r(b, H + j) + bias(H + j)) where j in 0:H
    nn(b, j) = tanh(a(b, 2 * H + j) + bias(2 * H + j) + sigmoid(a(b, j) + r(b, j) + bias(j)) * r(b, 2 * H + j)) where j in 0:H
    if t == 0 { h(t, b, j) = (1 - z(b, j)) * nn(b, j) }
    else { h(t, b, j) = (1 - z(b, j)) * nn(b, j) + z(b, j) * h(t - 1, b, j) }
  }
}""", full=dict(T=64, B=32, I=256, H=256, G=768), tiny=dict(T=3, B=2, I=5, H=4, G=12),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), _w(rng, s["I"], s["G"]), _w(rng, s["H"], s["G"]), _w(rng, s["G"])])
def _gru_fused(torch, a, t, s):
    I, H = s["I"], s["H"]
    net = torch.nn.GRU(I, H)
    _copy(torch, net.weight_ih_l0, a[1].T); _copy(torch, net.weight_hh_l0, a[2].T)
    b = a[3].copy(); bhh = np.zeros_like(b)
    _copy(torch, net.bias_ih_l0, b); _copy(torch, net.bias_hh_l0, bhh)
    return {"torch.nn.GRU": _nograd(torch, lambda: net(t[0])[0])}


@program(name="attention, exp inside the weighted sum, (B,H,T,D)", kind="attention", src="""
def attn(float(B,N,T,D) q, float(B,N,T,D) k, float(B,N,T,D) v) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d) * 0.125
  m(b, h, i) max=! s(b, h, i, j)
  z(b, h, i) +=! exp(s(b, h, i, j) - m(b, h, i))
  o(b, h, i, d) +=! exp(s(b, h, i, j) - m(b, h, i)) * v(b, h, j, d)
  o(b, h, i, d) = o(b, h, i, d) / z(b, h, i)
}""", full=dict(B=8, N=8, T=256, D=64), tiny=dict(B=1, N=2, T=5, D=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["N"], s["T"], s["D"]) for _ in range(3)])
def _attn_exp(torch, a, t, s):
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return {"F.sdpa": _nograd(torch, lambda: sdpa(*t, scale=0.125))}


@program(name="gru, mean of hidden states over time + last state", kind="rnn", src="""
def gru(float(T,B,I) x, float(3,I,H) W, float(3,H,H) U) -> (avg, last) {
  for t in T {
    a(g, b, j) +=! x(t, b, i) * W(g, i, j)
    if t == 0 { r(g, b, j) = 0.0 where g in 0:3, b in 0:B, j in 0:H } else { r(g, b, j) +=! h(t - 1, b, k) * U(g, k, j) }
    z(b, j) = sigmoid(a(1, b, j) + r(1, b, j))
    nn(b, j) = tanh(a(2, b, j) + sigmoid(a(0, b, j) + r(0, b, j)) * r(2, b, j))
    if t == 0 { h(t, b, j) = (1 - z(b, j)) * nn(b, j) } else { h(t, b, j) = (1 - z(b, j)) * nn(b, j) + z(b, j) * h(t - 1, b, j) }
  }
  avg(b, j) +=! h(t, b, j) / T
  last(b, j) = h(T - 1, b, j)
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), _w(rng, 3, s["I"], s["H"]), _w(rng, 3, s["H"], s["H"])],
         pick=lambda r: np.concatenate([r[0], r[1]], -1))
def _gru_avg(torch, a, t, s):
    I, H = s["I"], s["H"]
    net = torch.nn.GRU(I, H)
    _copy(torch, net.weight_ih_l0, a[1].transpose(0, 2, 1).reshape(3 * H, I)); _copy(torch, net.weight_hh_l0, a[2].transpose(0, 2, 1).reshape(3 * H, H))
    _copy(torch, net.bias_ih_l0, np.zeros(3 * H, np.float32)); _copy(torch, net.bias_hh_l0, np.zeros(3 * H, np.float32))
    def f():
        with torch.no_grad():
            out, hn = net(t[0])
            return torch.cat([out.mean(0), hn[0]], -1)
    return {"torch.nn.GRU + mean": f}


@program(name="elman float64 (double), (out,in)", kind="rnn", src="""
def elman(double(T,B,I) x, double(H,I) Wih, double(H,H) Whh, double(H) bias) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * Wih(j, i)
    if t > 0 { a(b, j) += h(t - 1, b, k) * Whh(j, k) }
    h(t, b, j) = tanh(a(b, j) + bias(j))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]).astype(np.float64), _w(rng, s["H"], s["I"]).astype(np.float64),
                                _w(rng, s["H"], s["H"]).astype(np.float64), _w(rng, s["H"]).astype(np.float64)])
def _elman64(torch, a, t, s):
    net = torch.nn.RNN(s["I"], s["H"]).double()
    _copy(torch, net.weight_ih_l0, a[1]); _copy(torch, net.weight_hh_l0, a[2]); _copy(torch, net.bias_ih_l0, a[3])
    _copy(torch, net.bias_hh_l0, np.zeros(s["H"]))
    return {"torch.nn.RNN(double)": _nograd(torch, lambda: net(t[0])[0])}


@program(name="two-axis contraction abcd,cdef->abef", kind="matmul", src="""
def contract(float(A,B,C,D) x, float(C,D,E,F) w) -> (y) {
  y(a, b, e, f) +=! x(a, b, c, d) * w(c, d, e, f)
}""", full=dict(A=32, B=32, C=16, D=16, E=16, F=16), tiny=dict(A=2, B=3, C=2, D=3, E=2, F=3),
         inputs=lambda rng, s: [_n(rng, s["A"], s["B"], s["C"], s["D"]), _w(rng, s["C"], s["D"], s["E"], s["F"])])
def _u_contract(torch, a, t, s):
    return {"torch.tensordot": _nograd(torch, lambda: torch.tensordot(t[0], t[1], dims=2))}


@program(name="conv2d 3x3 NHWC with HWIO weights (tf layout), same padding", kind="conv", src="""
def conv(float(N,H,W,C) x, float(KH,KW,C,O) w, float(O) bias) -> (z) {
  y(n, h, v, o) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W
                     ? x(n, h + kh - 1, v + kw - 1, c) : 0) * w(kh, kw, c, o)
    where h in 0:H, v in 0:W, kh in 0:KH, kw in 0:KW
  z(n, h, v, o) = fmax(y(n, h, v, o) + bias(o), 0)
}""", full=dict(N=8, H=28, W=28, C=64, O=64, KH=3, KW=3), tiny=dict(N=1, H=4, W=5, C=2, O=3, KH=3, KW=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["H"], s["W"], s["C"]), _w(rng, 3, 3, s["C"], s["O"]), _w(rng, s["O"])],
         )
def _u_conv_hwio(torch, a, t, s):
    F = torch.nn.functional
    x = t[0].permute(0, 3, 1, 2)
    w = t[1].permute(3, 2, 0, 1).contiguous()
    return {"F.conv2d + relu (channels_last)": _nograd(torch, lambda: F.relu(F.conv2d(x, w, t[2], padding=1)).permute(0, 2, 3, 1))}


@program(name="weight-normalized linear, norm inside the sum", kind="matmul", src="""
def wn(float(B,I) x, float(O,I) v, float(O) g, float(O) bias) -> (z) {
  nv(o) +=! v(o, i) * v(o, i)
  y(b, o) +=! x(b, i) * v(o, i) * g(o) / sqrt(nv(o))
  z(b, o) = y(b, o) + bias(o)
}""", full=dict(B=256, I=1024, O=1024), tiny=dict(B=2, I=3, O=4),
         inputs=lambda rng, s: [_n(rng, s["B"], s["I"]), _w(rng, s["O"], s["I"]), _n(rng, s["O"]), _n(rng, s["O"])],
         )
def _u_wn(torch, a, t, s):
    F = torch.nn.functional
    x, v, g, bias = t
    return {"F.linear(weight_norm)": _nograd(torch, lambda: F.linear(x, v * (g / v.norm(dim=1))[:, None], bias))}


@program(name="quadratic form x^T A x per row, one statement", kind="matmul", src="""
def quad(float(B,N) x, float(N,N) A) -> (q) {
  q(b) +=! x(b, i) * A(i, j) * x(b, j)
}""", full=dict(B=512, N=512), tiny=dict(B=2, N=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["N"]), _w(rng, s["N"], s["N"])])
def _u_quad(torch, a, t, s):
    x, A = t
    return {"(x @ A * x).sum(1)": _nograd(torch, lambda: ((x @ A) * x).sum(1))}


@program(name="elman with the state updated in place (no time index)", kind="rnn", src="""
def elman(float(T,B,I) x, float(B,H) h0, float(H,I) Wih, float(H,H) Whh, float(H) bias) -> (h) {
  h(b, j) = h0(b, j)
  for t in T {
    a(b, j) +=! x(t, b, i) * Wih(j, i)
    a(b, j) += h(b, k) * Whh(j, k)
    h(b, j) = tanh(a(b, j) + bias(j))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), _n(rng, s["B"], s["H"]), _w(rng, s["H"], s["I"]),
                                _w(rng, s["H"], s["H"]), _w(rng, s["H"])])
def _u_elman_inplace(torch, a, t, s):
    net = torch.nn.RNN(s["I"], s["H"])
    _copy(torch, net.weight_ih_l0, a[2]); _copy(torch, net.weight_hh_l0, a[3]); _copy(torch, net.bias_ih_l0, a[4])
    _copy(torch, net.bias_hh_l0, np.zeros(s["H"], np.float32))
    return {"torch.nn.RNN (last state)": _nograd(torch, lambda: net(t[0], t[1][None])[1][0])}


@program(name="gru-d style decay of the state (exp(-relu(w * delta)))", kind="rnn", src="""
def grud(float(T,B,I) x, float(T,B) dt, float(H) wd, float(I,H) W, float(H,H) U) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W(i, j)
    if t > 0 { a(b, j) += exp(-fmax(wd(j) * dt(t, b), 0)) * h(t - 1, b, k) * U(k, j) }
    h(t, b, j) = tanh(a(b, j))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), rng.uniform(0, 2, (s["T"], s["B"])).astype(np.float32),
                                rng.uniform(0, 1, s["H"]).astype(np.float32), _w(rng, s["I"], s["H"]), _w(rng, s["H"], s["H"])])
def _u_grud(torch, a, t, s):
    x, dt, wd, W, U = t
    def loop():
        xp = x @ W; out = []; h = None
        for i in range(s["T"]):
            z = xp[i]
            if h is not None:
                z = z + (h @ U) * torch.exp(-torch.relu(dt[i][:, None] * wd[None, :]))
            h = torch.tanh(z); out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, loop)}


@program(name="transformer encoder layer in one def (pre-norm, 4 heads W(h, d, c))", kind="attention", src="""
def enc(float(B,T,C) x, float(C) g1, float(C) b1, float(NH,D,C) Wq, float(NH,D,C) Wk, float(NH,D,C) Wv,
        float(C,NH,D) Wo, float(C) g2, float(C) b2, float(F,C) W1, float(C,F) W2) -> (out) {
  m1(b, t) +=! x(b, t, c) / C
  v1(b, t) +=! (x(b, t, c) - m1(b, t)) * (x(b, t, c) - m1(b, t)) / C
  n1(b, t, c) = (x(b, t, c) - m1(b, t)) * rsqrt(v1(b, t) + 1e-5) * g1(c) + b1(c)
  q(b, h, t, d) +=! n1(b, t, c) * Wq(h, d, c)
  k(b, h, t, d) +=! n1(b, t, c) * Wk(h, d, c)
  v(b, h, t, d) +=! n1(b, t, c) * Wv(h, d, c)
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d) * rsqrt(float(D))
  mx(b, h, i) max=! s(b, h, i, j)
  e(b, h, i, j) = exp(s(b, h, i, j) - mx(b, h, i))
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! e(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
  r(b, t, c) = x(b, t, c)
  r(b, t, c) += o(b, h, t, d) * Wo(c, h, d)
  m2(b, t) +=! r(b, t, c) / C
  v2(b, t) +=! (r(b, t, c) - m2(b, t)) * (r(b, t, c) - m2(b, t)) / C
  n2(b, t, c) = (r(b, t, c) - m2(b, t)) * rsqrt(v2(b, t) + 1e-5) * g2(c) + b2(c)
  f(b, t, u) +=! n2(b, t, c) * W1(u, c)
  out(b, t, c) = r(b, t, c)
  out(b, t, c) += fmax(f(b, t, u), 0) * W2(c, u)
}""", full=dict(B=8, T=128, C=256, NH=4, D=64, F=1024), tiny=dict(B=1, T=3, C=4, NH=2, D=2, F=5),
         inputs=lambda rng, s: [_n(rng, s["B"], s["T"], s["C"]), _n(rng, s["C"]), _n(rng, s["C"]),
                                _w(rng, s["NH"], s["D"], s["C"]), _w(rng, s["NH"], s["D"], s["C"]), _w(rng, s["NH"], s["D"], s["C"]),
                                (_w(rng, s["C"], s["NH"] * s["D"])).reshape(s["C"], s["NH"], s["D"]), _n(rng, s["C"]), _n(rng, s["C"]),
                                _w(rng, s["F"], s["C"]), _w(rng, s["C"], s["F"])])
def _u_enc(torch, a, t, s):
    F = torch.nn.functional
    x, g1, b1, Wq, Wk, Wv, Wo, g2, b2, W1, W2 = t
    C, NH, D = s["C"], s["NH"], s["D"]
    Wqkv = torch.cat([Wq.reshape(NH * D, C), Wk.reshape(NH * D, C), Wv.reshape(NH * D, C)])
    Wo2 = Wo.reshape(C, NH * D)
    def f():
        n1 = F.layer_norm(x, (C,), g1, b1, 1e-5)
        q, k, v = F.linear(n1, Wqkv).split(NH * D, -1)
        sh = lambda z: z.reshape(s["B"], s["T"], NH, D).transpose(1, 2)  # noqa: E731
        o = F.scaled_dot_product_attention(sh(q), sh(k), sh(v))
        r = x + F.linear(o.transpose(1, 2).reshape(s["B"], s["T"], NH * D), Wo2)
        n2 = F.layer_norm(r, (C,), g2, b2, 1e-5)
        return r + F.linear(F.relu(F.linear(n2, W1)), W2)
    return {"torch ops (sdpa)": _nograd(torch, f)}


@program(name="clockwork rnn (unit j updates when t % period(j) == 0)", kind="rnn", src="""
def cw(float(T,B,I) x, int32(H) period, float(I,H) W, float(H,H) U) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W(i, j)
    if t > 0 { a(b, j) += h(t - 1, b, k) * U(k, j) }
    h(t, b, j) = t == 0 || t % period(j) == 0 ? tanh(a(b, j)) : h(t - 1, b, j)
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=5, B=2, I=3, H=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), (2 ** (np.arange(s["H"]) % 4)).astype(np.int32),
                                _w(rng, s["I"], s["H"]), _w(rng, s["H"], s["H"])])
def _u_cw(torch, a, t, s):
    x, per, W, U = t
    upd = [((k % per) == 0).float()[None, :] for k in range(s["T"])]
    def loop():
        xp = x @ W; h = None; out = []
        for k in range(s["T"]):
            z = xp[k] if h is None else torch.addmm(xp[k], h, U)
            n = torch.tanh(z)
            h = n if h is None else torch.lerp(h, n, upd[k])
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, loop)}


@program(name="masked gru, mask inside the recurrent sum, (out,in) per gate", kind="rnn", src="""
def gru(float(T,B,I) x, float(T,B) m, float(H,I) Wr, float(H,I) Wz, float(H,I) Wn, float(H,H) Ur, float(H,H) Uz, float(H,H) Un) -> (h) {
  for t in T {
    r(b, j) +=! x(t, b, i) * Wr(j, i)
    z(b, j) +=! x(t, b, i) * Wz(j, i)
    n(b, j) +=! x(t, b, i) * Wn(j, i)
    if t > 0 {
      r(b, j) += m(t, b) * h(t - 1, b, k) * Ur(j, k)
      z(b, j) += m(t, b) * h(t - 1, b, k) * Uz(j, k)
      hn(b, j) +=! m(t, b) * h(t - 1, b, k) * Un(j, k)
    }
    h(t, b, j) = (1 - sigmoid(z(b, j))) * tanh(n(b, j) + (t > 0 ? sigmoid(r(b, j)) * hn(b, j) : 0))
                 + (t > 0 ? sigmoid(z(b, j)) * m(t, b) * h(t - 1, b, j) : 0)
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), (rng.random((s["T"], s["B"])) > 0.2).astype(np.float32)]
                               + [_w(rng, s["H"], s["I"]) for _ in range(3)] + [_w(rng, s["H"], s["H"]) for _ in range(3)])
def _u_mgru(torch, a, t, s):
    F = torch.nn.functional
    x, m, Wr, Wz, Wn, Ur, Uz, Un = t
    Wx = torch.cat([Wr, Wz, Wn]); Uh = torch.cat([Ur, Uz, Un]); H = s["H"]
    def loop():
        xp = F.linear(x, Wx); h = None; out = []
        for k in range(s["T"]):
            xr, xz, xn = xp[k].split(H, -1)
            if h is None:
                z = torch.sigmoid(xz); h = (1 - z) * torch.tanh(xn)
            else:
                hm = h * m[k][:, None]
                hr, hz, hn = F.linear(hm, Uh).split(H, -1)
                rr = torch.sigmoid(xr + hr); z = torch.sigmoid(xz + hz)
                h = (1 - z) * torch.tanh(xn + rr * hn) + z * hm
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, loop)}


@program(name="resnet basic block NCHW (conv-bn-relu-conv-bn + x, relu), padding selects", kind="conv", src="""
def block(float(N,C,H,W) x, float(C,C,3,3) w1, float(C) s1, float(C) t1, float(C,C,3,3) w2, float(C) s2, float(C) t2) -> (y) {
  c1(n, o, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W ? x(n, c, h + kh - 1, v + kw - 1) : 0) * w1(o, c, kh, kw)
    where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
  a1(n, o, h, v) = fmax(c1(n, o, h, v) * s1(o) + t1(o), 0)
  c2(n, o, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W ? a1(n, c, h + kh - 1, v + kw - 1) : 0) * w2(o, c, kh, kw)
    where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
  y(n, o, h, v) = fmax(c2(n, o, h, v) * s2(o) + t2(o) + x(n, o, h, v), 0)
}""", full=dict(N=8, C=64, H=28, W=28), tiny=dict(N=1, C=2, H=3, W=4),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]), _w(rng, s["C"], s["C"], 3, 3) / 3,
                                rng.uniform(0.5, 1.5, s["C"]).astype(np.float32), _n(rng, s["C"]) * 0.1,
                                _w(rng, s["C"], s["C"], 3, 3) / 3, rng.uniform(0.5, 1.5, s["C"]).astype(np.float32), _n(rng, s["C"]) * 0.1])
def _u_block(torch, a, t, s):
    F = torch.nn.functional
    x, w1, s1, t1, w2, s2, t2 = t
    sh = lambda z: z[None, :, None, None]  # noqa: E731
    def f():
        a1 = F.relu(F.conv2d(x, w1, padding=1) * sh(s1) + sh(t1))
        return F.relu(F.conv2d(a1, w2, padding=1) * sh(s2) + sh(t2) + x)
    return {"torch ops": _nograd(torch, f)}


# ---------------------------------------------------------------- session 41: more user programs

@program(name="pagerank, damping, (out,in) matrix", kind="rnn", src="""
def pagerank(float(N,N) M, float(N) r0) -> (r) {
  for t in T {
    if t == 0 { s(i) +=! M(i, j) * r0(j) } else { s(i) +=! M(i, j) * r(t - 1, j) }
    r(t, i) = 0.15 / N + 0.85 * s(i)
  }
}""", full=dict(N=2048, T=30), tiny=dict(N=5, T=3), free=("T",), pick=lambda r: r[-1],
         inputs=lambda rng, s: [(np.abs(rng.standard_normal((s["N"], s["N"]))) / s["N"]).astype(np.float32),
                                np.full(s["N"], 1.0 / s["N"], np.float32)])
def _u_pr(torch, a, t, s):
    M, r0 = t
    def run():
        r = r0
        for _ in range(s["T"]):
            r = 0.15 / s["N"] + 0.85 * (M @ r)
        return r
    return {"torch loop (mv)": _nograd(torch, run)}


@program(name="hmm forward algorithm, scaled", kind="rnn", src="""
def hmm(float(B,S) pi, float(S,S) A, float(T,B,S) E) -> (alpha) {
  for t in T {
    if t == 0 { u(b, j) = pi(b, j) * E(t, b, j) } else { u(b, j) +=! alpha(t - 1, b, i) * A(i, j) * E(t, b, j) }
    z(b) +=! u(b, j)
    alpha(t, b, j) = u(b, j) / z(b)
  }
}""", full=dict(B=64, S=256, T=100), tiny=dict(B=2, S=3, T=4),
         inputs=lambda rng, s: [np.full((s["B"], s["S"]), 1.0 / s["S"], np.float32),
                                (np.abs(rng.standard_normal((s["S"], s["S"]))) / s["S"]).astype(np.float32),
                                np.abs(rng.standard_normal((s["T"], s["B"], s["S"]))).astype(np.float32)])
def _u_hmm(torch, a, t, s):
    pi, A, E = t
    def run():
        out = []
        u = pi * E[0]
        al = u / u.sum(1, keepdim=True); out.append(al)
        for k in range(1, s["T"]):
            u = (al @ A) * E[k]
            al = u / u.sum(1, keepdim=True); out.append(al)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="chebyshev graph recurrence X_t = 2 L X_{t-1} - X_{t-2}", kind="rnn", src="""
def cheb(float(N,N) L, float(N,F) x) -> (X) {
  for t in T {
    if t == 0 { X(t, i, f) = x(i, f) }
    else if t == 1 { X(t, i, f) +=! L(i, j) * x(j, f) }
    else { X(t, i, f) +=! 2 * L(i, j) * X(t - 1, j, f)
           X(t, i, f) = X(t, i, f) - X(t - 2, i, f) }
  }
}""", full=dict(N=1024, F=64, T=6), tiny=dict(N=4, F=3, T=4), free=("T",),
         inputs=lambda rng, s: [_w(rng, s["N"], s["N"]), _n(rng, s["N"], s["F"])])
def _u_cheb(torch, a, t, s):
    L, x = t
    def run():
        out = [x, L @ x]
        for k in range(2, s["T"]):
            out.append(2 * (L @ out[-1]) - out[-2])
        return torch.stack(out[:s["T"]])
    return {"torch loop": _nograd(torch, run)}


@program(name="convlstm cell loop, 3x3 conv of h as a select", kind="rnn", src="""
def convlstm(float(T,B,C,H,W) x, float(G,C,3,3) Wx, float(G,D,3,3) Wh) -> (h) {
  for t in T {
    g(b, o, y, v) +=! (y + ky - 1 >= 0 && y + ky - 1 < H && v + kx - 1 >= 0 && v + kx - 1 < W ? x(t, b, c, y + ky - 1, v + kx - 1) : 0) * Wx(o, c, ky, kx) where ky in 0:3, kx in 0:3, o in 0:G, y in 0:H, v in 0:W
    if t > 0 { g(b, o, y, v) += (y + ky - 1 >= 0 && y + ky - 1 < H && v + kx - 1 >= 0 && v + kx - 1 < W ? h(t - 1, b, d, y + ky - 1, v + kx - 1) : 0) * Wh(o, d, ky, kx) where ky in 0:3, kx in 0:3, d in 0:D }
    cc(t, b, d, y, v) = sigmoid(g(b, D + d, y, v)) * (t > 0 ? cc(t - 1, b, d, y, v) : 0) + sigmoid(g(b, d, y, v)) * tanh(g(b, 2 * D + d, y, v)) where d in 0:D
    h(t, b, d, y, v) = sigmoid(g(b, 3 * D + d, y, v)) * tanh(cc(t, b, d, y, v))
  }
}""", full=dict(T=8, B=4, C=16, H=32, W=32, G=128, D=32), tiny=dict(T=2, B=1, C=2, H=3, W=4, G=8, D=2), free=("D",),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["C"], s["H"], s["W"]), _w(rng, s["G"], s["C"], 3, 3) / 3,
                                _w(rng, s["G"], s["D"], 3, 3) / 3])
def _u_convlstm(torch, a, t, s):
    x, Wx, Wh = t
    F = torch.nn.functional
    D = s["D"]
    def run():
        h = c = None; out = []
        for k in range(s["T"]):
            g = F.conv2d(x[k], Wx, padding=1)
            if h is not None:
                g = g + F.conv2d(h, Wh, padding=1)
            i, f, gg, o = g[:, :D], g[:, D:2 * D], g[:, 2 * D:3 * D], g[:, 3 * D:]
            c = torch.sigmoid(i) * torch.tanh(gg) if c is None else torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
            h = torch.sigmoid(o) * torch.tanh(c); out.append(h)
        return torch.stack(out)
    return {"torch loop (conv2d)": _nograd(torch, run)}


@program(name="pairwise forces (N-body, D=3, softened)", kind="linear", src="""
def forces(float(N,D) x) -> (f) {
  r2(i, j) +=! (x(i, d) - x(j, d)) * (x(i, d) - x(j, d))
  w(i, j) = rsqrt(r2(i, j) + 0.01) * rsqrt(r2(i, j) + 0.01) * rsqrt(r2(i, j) + 0.01)
  f(i, d) +=! (x(j, d) - x(i, d)) * w(i, j)
}""", full=dict(N=2048, D=3), tiny=dict(N=4, D=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["D"])])
def _u_forces(torch, a, t, s):
    x = t[0]
    def run():
        diff = x[None, :, :] - x[:, None, :]
        r2 = (diff * diff).sum(-1)
        w = (r2 + 0.01) ** -1.5
        return (diff * w[:, :, None]).sum(1)
    def run2():
        r2 = torch.cdist(x, x).square()
        w = (r2 + 0.01) ** -1.5
        return w @ x - w.sum(1, keepdim=True) * x
    return {"torch broadcast": _nograd(torch, run), "cdist + matmul": _nograd(torch, run2)}


@program(name="k-means soft assignment (distances, softmax over k)", kind="linear", src="""
def soft(float(N,D) x, float(K,D) c) -> (p) {
  d2(n, k) +=! (x(n, e) - c(k, e)) * (x(n, e) - c(k, e))
  m(n) min=! d2(n, k)
  ex(n, k) = exp(m(n) - d2(n, k))
  z(n) +=! ex(n, k)
  p(n, k) = ex(n, k) / z(n)
}""", full=dict(N=8192, D=64, K=256), tiny=dict(N=5, D=3, K=4),
         inputs=lambda rng, s: [_n(rng, s["N"], s["D"]), _n(rng, s["K"], s["D"])])
def _u_soft(torch, a, t, s):
    x, c = t
    return {"softmax(-cdist^2)": _nograd(torch, lambda: torch.softmax(-torch.cdist(x, c).square(), 1)),
            "softmax(-(x2 - 2xc + c2))": _nograd(torch, lambda: torch.softmax(
                -((x * x).sum(1, keepdim=True) - 2 * x @ c.T + (c * c).sum(1)), 1))}


@program(name="layer-norm gru (LN on the recurrent gates), (in,out)", kind="rnn", src="""
def lngru(float(T,B,I) x, float(I,H3) Wx, float(H,H3) Wh, float(H3) gam) -> (h) {
  for t in T {
    gx(b, j) +=! x(t, b, i) * Wx(i, j)
    if t == 0 { gh(b, j) = 0 where j in 0:H3, b in 0:B } else { gh(b, j) +=! h(t - 1, b, k) * Wh(k, j) }
    mu(b) +=! gh(b, j) / H3
    va(b) +=! (gh(b, j) - mu(b)) * (gh(b, j) - mu(b)) / H3
    n(b, j) = (gh(b, j) - mu(b)) * rsqrt(va(b) + 1e-5) * gam(j)
    r(b, j) = sigmoid(gx(b, j) + n(b, j)) where j in 0:H
    z(b, j) = sigmoid(gx(b, H + j) + n(b, H + j)) where j in 0:H
    c(b, j) = tanh(gx(b, 2 * H + j) + r(b, j) * n(b, 2 * H + j)) where j in 0:H
    h(t, b, j) = (1 - z(b, j)) * c(b, j) + z(b, j) * (t > 0 ? h(t - 1, b, j) : 0)
  }
}""", full=dict(T=64, B=32, I=256, H=256, H3=768), tiny=dict(T=3, B=2, I=3, H=2, H3=6), free=("H",),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["I"]), _w(rng, s["I"], s["H3"]), _w(rng, s["H"], s["H3"]),
                                (1 + 0.1 * rng.standard_normal(s["H3"])).astype(np.float32)])
def _u_lngru(torch, a, t, s):
    x, Wx, Wh, gam = t
    H = s["H"]
    def run():
        gx = x @ Wx; h = None; out = []
        for k in range(s["T"]):
            gh = torch.zeros(s["B"], 3 * H) if h is None else h @ Wh
            n = torch.nn.functional.layer_norm(gh, (3 * H,), eps=1e-5) * gam
            r = torch.sigmoid(gx[k, :, :H] + n[:, :H]); z = torch.sigmoid(gx[k, :, H:2 * H] + n[:, H:2 * H])
            c = torch.tanh(gx[k, :, 2 * H:] + r * n[:, 2 * H:])
            h = (1 - z) * c + (z * h if h is not None else 0); out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="generalized advantage estimation (reverse time loop)", kind="rnn", src="""
def gae(float(T,B) r, float(T1,B) v, float(T,B) done) -> (adv) {
  for t in T {
    adv(T - 1 - t, b) = r(T - 1 - t, b) + 0.99 * v(T - t, b) * (1 - done(T - 1 - t, b)) - v(T - 1 - t, b)
                        + (t > 0 ? 0.99 * 0.95 * (1 - done(T - 1 - t, b)) * adv(T - t, b) : 0)
  }
}""", full=dict(T=128, T1=129, B=4096), tiny=dict(T=3, T1=4, B=2),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"]), _n(rng, s["T1"], s["B"]),
                                (rng.random((s["T"], s["B"])) < 0.05).astype(np.float32)])
def _u_gae(torch, a, t, s):
    r, v, d = t
    def run():
        out = torch.empty_like(r); last = torch.zeros(s["B"])
        for k in range(s["T"] - 1, -1, -1):
            nd = 1 - d[k]
            delta = r[k] + 0.99 * v[k + 1] * nd - v[k]
            last = delta + 0.99 * 0.95 * nd * last
            out[k] = last
        return out
    return {"torch loop": _nograd(torch, run)}


@program(name="crf forward algorithm (logsumexp per step)", kind="rnn", src="""
def crf(float(T,B,S) emit, float(S,S) trans) -> (alpha) {
  for t in T {
    if t == 0 { alpha(t, b, j) = emit(t, b, j) }
    else {
      mx(b, j) max=! alpha(t - 1, b, i) + trans(i, j)
      se(b, j) +=! exp(alpha(t - 1, b, i) + trans(i, j) - mx(b, j))
      alpha(t, b, j) = mx(b, j) + log(se(b, j)) + emit(t, b, j)
    }
  }
}""", full=dict(T=64, B=64, S=128), tiny=dict(T=3, B=2, S=3),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["S"]), _n(rng, s["S"], s["S"])])
def _u_crf(torch, a, t, s):
    emit, trans = t
    def run():
        al = emit[0]; out = [al]
        for k in range(1, s["T"]):
            al = torch.logsumexp(al[:, :, None] + trans[None], 1) + emit[k]; out.append(al)
        return torch.stack(out)
    return {"torch loop (logsumexp)": _nograd(torch, run)}


@program(name="gru decoder with additive (bahdanau) attention", kind="rnn", src="""
def dec(float(B,S,H) enc, float(B,S,A) ke, float(H,A) Wq, float(A) va, float(H,H3) Wc, float(H,H3) Wh, float(B,H) h0) -> (h) {
  for t in T {
    q(b, a) +=! (t > 0 ? h(t - 1, b, k) : h0(b, k)) * Wq(k, a)
    e(b, s) +=! tanh(ke(b, s, a) + q(b, a)) * va(a)
    m(b) max=! e(b, s)
    p(b, s) = exp(e(b, s) - m(b))
    z(b) +=! p(b, s)
    ctx(b, k) +=! p(b, s) * enc(b, s, k) / z(b)
    gx(b, j) +=! ctx(b, k) * Wc(k, j)
    gh(b, j) +=! (t > 0 ? h(t - 1, b, k) : h0(b, k)) * Wh(k, j)
    r(b, j) = sigmoid(gx(b, j) + gh(b, j)) where j in 0:H
    u(b, j) = sigmoid(gx(b, H + j) + gh(b, H + j)) where j in 0:H
    n(b, j) = tanh(gx(b, 2 * H + j) + r(b, j) * gh(b, 2 * H + j)) where j in 0:H
    h(t, b, j) = (1 - u(b, j)) * n(b, j) + u(b, j) * (t > 0 ? h(t - 1, b, j) : h0(b, j))
  }
}""", full=dict(T=32, B=32, S=64, H=256, A=128, H3=768), tiny=dict(T=3, B=2, S=3, H=2, A=3, H3=6), free=("T",),
         inputs=lambda rng, s: [_n(rng, s["B"], s["S"], s["H"]), _n(rng, s["B"], s["S"], s["A"]), _w(rng, s["H"], s["A"]),
                                _w(rng, s["A"]), _w(rng, s["H"], s["H3"]), _w(rng, s["H"], s["H3"]), _n(rng, s["B"], s["H"])])
def _u_dec(torch, a, t, s):
    enc, ke, Wq, va, Wc, Wh, h0 = t
    H = s["H"]
    def run():
        h = h0; out = []
        for k in range(s["T"]):
            e = torch.tanh(ke + (h @ Wq)[:, None, :]) @ va
            p = torch.softmax(e, 1)
            ctx = torch.bmm(p[:, None, :], enc)[:, 0]
            gx = ctx @ Wc; gh = h @ Wh
            r = torch.sigmoid(gx[:, :H] + gh[:, :H]); u = torch.sigmoid(gx[:, H:2 * H] + gh[:, H:2 * H])
            n = torch.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
            h = (1 - u) * n + u * h; out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="attention with a relative position bias table", kind="attention", src="""
def relattn(float(B,NH,L,D) q, float(B,NH,L,D) k, float(B,NH,L,D) v, float(NH,R) bias) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d) / sqrt(float(D))
  s(b, h, i, j) += bias(h, i - j + L - 1)
  m(b, h, i) max=! s(b, h, i, j)
  p(b, h, i, j) = exp(s(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! p(b, h, i, j)
  o(b, h, i, d) +=! p(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
}""", full=dict(B=8, NH=8, L=256, D=64, R=511), tiny=dict(B=1, NH=2, L=3, D=2, R=5),
         inputs=lambda rng, s: [_n(rng, s["B"], s["NH"], s["L"], s["D"]) for _ in range(3)] + [_n(rng, s["NH"], s["R"])])
def _u_relattn(torch, a, t, s):
    q, k, v, bias = t
    L = s["L"]
    idx = (torch.arange(L)[:, None] - torch.arange(L)[None, :] + L - 1)
    def run():
        bm = bias[:, idx]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bm[None])
    return {"sdpa(attn_mask=bias[:, idx])": _nograd(torch, run)}


@program(name="avg pool 3x3 stride 1, count_include_pad=False (selects)", kind="conv", src="""
def avgp(float(N,C,H,W) x) -> (y) {
  s(n, c, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W ? x(n, c, h + kh - 1, v + kw - 1) : 0) where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
  cnt(h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W ? 1.0 : 0.0) where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
  y(n, c, h, v) = s(n, c, h, v) / cnt(h, v)
}""", full=dict(N=16, C=64, H=56, W=56), tiny=dict(N=1, C=2, H=3, W=4),
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"])])
def _u_avgp(torch, a, t, s):
    F = torch.nn.functional
    return {"F.avg_pool2d(count_include_pad=False)": _nograd(torch, lambda: F.avg_pool2d(t[0], 3, 1, 1, count_include_pad=False))}


@program(name="cross entropy with ignore_index (select on label)", kind="loss", src="""
def ce(float(N,V) logits, int32(N) y) -> (loss) {
  m(n) max=! logits(n, v)
  se(n) +=! exp(logits(n, v) - m(n))
  pick(n) +=! (v == y(n) ? logits(n, v) : 0)
  valid +=! (y(n) != -100 ? 1.0 : 0.0)
  loss +=! (y(n) != -100 ? m(n) + log(se(n)) - pick(n) : 0) / valid
}""", full=dict(N=8192, V=1000), tiny=dict(N=5, V=4),
         inputs=lambda rng, s: [_n(rng, s["N"], s["V"]),
                                np.where(rng.random(s["N"]) < 0.2, -100, rng.integers(0, s["V"], s["N"])).astype(np.int32)])
def _u_ce(torch, a, t, s):
    return {"F.cross_entropy(ignore_index)": _nograd(torch, lambda: torch.nn.functional.cross_entropy(t[0], t[1].long(), ignore_index=-100))}


# ---------------------------------------------------------------- session 42: more user programs (loops of layers, in-place elimination, upsampling)


@program(name="dynamic time warping (nested i, j loops)", kind="rnn", src="""
def dtw(float(B,N,D) x, float(B,M,D) y) -> (R) {
  c(b, i, j) +=! (x(b, i, d) - y(b, j, d)) * (x(b, i, d) - y(b, j, d))
  for p in N {
    for q in M {
      if p == 0 && q == 0 { R(p, q, b) = c(b, p, q) }
      else if p == 0 { R(p, q, b) = c(b, p, q) + R(p, q - 1, b) }
      else if q == 0 { R(p, q, b) = c(b, p, q) + R(p - 1, q, b) }
      else { R(p, q, b) = c(b, p, q) + fmin(R(p - 1, q, b), fmin(R(p, q - 1, b), R(p - 1, q - 1, b))) }
    }
  }
}""", full=dict(B=512, N=32, M=32, D=16), tiny=dict(B=2, N=3, M=4, D=2),
   inputs=lambda r, s: [_n(r, s["B"], s["N"], s["D"]), _n(r, s["B"], s["M"], s["D"])])
def _dtw(torch, a, t, s):
    x, y = t
    def run():
        c = torch.cdist(x, y) ** 2
        N, M = s["N"], s["M"]
        R = [[None] * M for _ in range(N)]
        for p in range(N):
            for q in range(M):
                if p == 0 and q == 0: R[p][q] = c[:, 0, 0]
                elif p == 0: R[p][q] = c[:, p, q] + R[p][q - 1]
                elif q == 0: R[p][q] = c[:, p, q] + R[p - 1][q]
                else: R[p][q] = c[:, p, q] + torch.minimum(R[p - 1][q], torch.minimum(R[p][q - 1], R[p - 1][q - 1]))
        return torch.stack([torch.stack(row) for row in R])
    return {"torch double loop": _nograd(torch, run)}


@program(name="squeeze-and-excitation block NCHW", kind="conv", src="""
def se(float(B,C,H,W) x, float(R,C) w1, float(C,R) w2) -> (y) {
  s(b, c) +=! x(b, c, h, w) / (H * W)
  z(b, r) +=! w1(r, c) * s(b, c)
  g(b, c) +=! w2(c, r) * fmax(z(b, r), 0)
  y(b, c, h, w) = x(b, c, h, w) * sigmoid(g(b, c))
}""", full=dict(B=32, C=256, H=28, W=28, R=16), tiny=dict(B=1, C=3, H=2, W=3, R=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _w(r, s["R"], s["C"]), _w(r, s["C"], s["R"])])
def _se(torch, a, t, s):
    x, w1, w2 = t
    def run():
        z = torch.relu(x.mean((2, 3)) @ w1.T)
        return x * torch.sigmoid(z @ w2.T)[:, :, None, None]
    return {"torch": _nograd(torch, run)}


@program(name="resnet stem conv 7x7 stride 2 pad 3 (select)", kind="conv", src="""
def stem(float(B,C,H,W) x, float(O,C,7,7) w) -> (y) {
  y(b, o, i, j) +=! (2 * i + kh - 3 >= 0 && 2 * i + kh - 3 < H && 2 * j + kw - 3 >= 0 && 2 * j + kw - 3 < W
                     ? x(b, c, 2 * i + kh - 3, 2 * j + kw - 3) : 0) * w(o, c, kh, kw)
                     where i in 0:(H + 1) / 2, j in 0:(W + 1) / 2, kh in 0:7, kw in 0:7
}""", full=dict(B=8, C=3, H=224, W=224, O=64), tiny=dict(B=1, C=2, H=5, W=6, O=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _w(r, s["O"], s["C"], 7, 7)])
def _stem(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d(stride=2, padding=3)": _nograd(torch, lambda: F.conv2d(t[0], t[1], stride=2, padding=3))}


@program(name="local response norm (size 5, across channels)", kind="norm", src="""
def lrn(float(B,C,H,W) x) -> (y) {
  s(b, c, h, w) +=! (c + k - 2 >= 0 && c + k - 2 < C ? x(b, c + k - 2, h, w) * x(b, c + k - 2, h, w) : 0)
                    where c in 0:C, k in 0:5
  y(b, c, h, w) = x(b, c, h, w) / pow(1 + 0.0001 / 5 * s(b, c, h, w), 0.75)
}""", full=dict(B=16, C=96, H=55, W=55), tiny=dict(B=1, C=3, H=2, W=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]) * 10])
def _lrn(torch, a, t, s):
    F = torch.nn.functional
    return {"F.local_response_norm(5)": _nograd(torch, lambda: F.local_response_norm(t[0], 5))}


@program(name="correlation cost volume (flownet, 9x9 displacements)", kind="conv", src="""
def corr(float(B,C,H,W) f1, float(B,C,H,W) f2) -> (out) {
  out(b, dy, dx, h, w) +=! (h + dy - 4 >= 0 && h + dy - 4 < H && w + dx - 4 >= 0 && w + dx - 4 < W
                            ? f1(b, c, h, w) * f2(b, c, h + dy - 4, w + dx - 4) : 0)
                            where dy in 0:9, dx in 0:9, h in 0:H, w in 0:W
  out(b, dy, dx, h, w) = out(b, dy, dx, h, w) / C
}""", full=dict(B=4, C=128, H=48, W=64), tiny=dict(B=1, C=2, H=3, W=5),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _n(r, s["B"], s["C"], s["H"], s["W"])])
def _corr(torch, a, t, s):
    F = torch.nn.functional
    f1, f2 = t
    H, W = s["H"], s["W"]
    def run():
        p = F.pad(f2, (4, 4, 4, 4))
        return torch.stack([torch.stack([(f1 * p[:, :, dy:dy + H, dx:dx + W]).mean(1) for dx in range(9)], 1)
                            for dy in range(9)], 1)
    return {"torch loop over displacements": _nograd(torch, run)}


@program(name="conformer depthwise conv1d K=31, channels-last (select)", kind="conv", src="""
def dw(float(B,L,C) x, float(C,31) w) -> (y) {
  y(b, l, c) +=! (l + k - 15 >= 0 && l + k - 15 < L ? x(b, l + k - 15, c) : 0) * w(c, k) where l in 0:L, k in 0:31
}""", full=dict(B=16, L=512, C=256), tiny=dict(B=1, L=5, C=2),
   inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _w(r, s["C"], 31)])
def _dw31(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(groups=C) on transposes": _nograd(torch, lambda: F.conv1d(
        t[0].transpose(1, 2), t[1][:, None, :], padding=15, groups=s["C"]).transpose(1, 2))}


@program(name="multiplicative rnn (x W) * (h U) (in,out)", kind="rnn", src="""
def mrnn(float(T,B,I) x, float(B,H) h0, float(I,H) Wmx, float(H,H) Wmh, float(H,H) Whm, float(I,H) Whx) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * Wmx(i, j)
    if t == 0 { mh(b, j) +=! h0(b, k) * Wmh(k, j) }
    else { mh(b, j) +=! h(t - 1, b, k) * Wmh(k, j) }
    m(b, j) = a(b, j) * mh(b, j)
    h(t, b, j) +=! m(b, k) * Whm(k, j)
    h(t, b, j) += x(t, b, i) * Whx(i, j)
    h(t, b, j) = tanh(h(t, b, j))
  }
}""", full=dict(T=64, B=32, I=256, H=512), tiny=dict(T=3, B=2, I=3, H=4),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _w(r, s["I"], s["H"]),
                        _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]), _w(r, s["I"], s["H"])])
def _mrnn(torch, a, t, s):
    x, h0, Wmx, Wmh, Whm, Whx = t
    def run():
        h = h0; out = []
        ax = x @ Wmx; hx = x @ Whx
        for k in range(s["T"]):
            h = torch.tanh((ax[k] * (h @ Wmh)) @ Whm + hx[k]); out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="diagonal ssm (s4d) recurrence, state in place", kind="rnn", src="""
def ssm(float(T,B,D) x, float(D,N) A, float(D,N) Bm, float(D,N) Cm) -> (y) {
  for t in T {
    if t == 0 { h(b, d, n) = Bm(d, n) * x(t, b, d) }
    else { h(b, d, n) = A(d, n) * h(b, d, n) + Bm(d, n) * x(t, b, d) }
    y(t, b, d) +=! Cm(d, n) * h(b, d, n)
  }
}""", full=dict(T=256, B=16, D=256, N=16), tiny=dict(T=3, B=2, D=3, N=2),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["D"]), (0.5 + 0.49 * r.random((s["D"], s["N"]))).astype(np.float32),
                        _n(r, s["D"], s["N"]), _n(r, s["D"], s["N"])])
def _ssm(torch, a, t, s):
    x, A, Bm, Cm = t
    def run():
        h = torch.zeros(s["B"], s["D"], s["N"]); out = []
        for k in range(s["T"]):
            h = A * h + Bm * x[k][:, :, None]
            out.append((h * Cm).sum(-1))
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="bilinear upsample 2x (align_corners=False, parity selects)", kind="elementwise", src="""
def up(float(B,C,H,W) x) -> (out) {
  r(b, c, y, w) = 0.75 * x(b, c, y / 2, w)
     + 0.25 * (y % 2 == 0 ? (y / 2 >= 1 ? x(b, c, y / 2 - 1, w) : x(b, c, y / 2, w))
                          : (y / 2 + 1 < H ? x(b, c, y / 2 + 1, w) : x(b, c, y / 2, w))) where y in 0:2 * H
  out(b, c, y, v) = 0.75 * r(b, c, y, v / 2)
     + 0.25 * (v % 2 == 0 ? (v / 2 >= 1 ? r(b, c, y, v / 2 - 1) : r(b, c, y, v / 2))
                          : (v / 2 + 1 < W ? r(b, c, y, v / 2 + 1) : r(b, c, y, v / 2))) where v in 0:2 * W
}""", full=dict(B=8, C=64, H=64, W=64), tiny=dict(B=1, C=2, H=3, W=2),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"])])
def _up(torch, a, t, s):
    F = torch.nn.functional
    return {"F.interpolate(bilinear)": _nograd(torch, lambda: F.interpolate(
        t[0], scale_factor=2, mode="bilinear", align_corners=False))}


def _ddom(r, B, N):
    a = r.standard_normal((B, N, N)).astype(np.float32)
    idx = np.arange(N)
    a[:, idx, idx] = np.abs(a).sum(1) + 1.0
    return a


@program(name="batched lu without pivoting (loop over k, in place)", kind="rnn", src="""
def lu(float(B,N,N) A0) -> (A) {
  A(b, i, j) = A0(b, i, j)
  for k in N {
    A(b, i, j) = i > k && j > k ? A(b, i, j) - A(b, i, k) * A(b, k, j) / A(b, k, k) : A(b, i, j)
    A(b, i, k) = i > k ? A(b, i, k) / A(b, k, k) : A(b, i, k)
  }
}""", full=dict(B=128, N=64), tiny=dict(B=2, N=3),
   inputs=lambda r, s: [_ddom(r, s["B"], s["N"])])
def _lu(torch, a, t, s):
    return {"torch.linalg.lu_factor": _nograd(torch, lambda: torch.linalg.lu_factor(t[0])[0])}


@program(name="outer product mean (alphafold), then linear", kind="matmul", src="""
def opm(float(S,N,C) a, float(S,N,C) bb, float(O,C,C) w) -> (z) {
  o(i, j, c, d) +=! a(s, i, c) * bb(s, j, d) / S
  z(i, j, e) +=! o(i, j, c, d) * w(e, c, d)
}""", full=dict(S=32, N=64, C=32, O=64), tiny=dict(S=2, N=3, C=2, O=2),
   inputs=lambda r, s: [_n(r, s["S"], s["N"], s["C"]), _n(r, s["S"], s["N"], s["C"]), _w(r, s["O"], s["C"], s["C"])])
def _opm(torch, a, t, s):
    A, Bb, w = t
    def run():
        o = torch.einsum("sic,sjd->ijcd", A, Bb) / s["S"]
        return torch.einsum("ijcd,ecd->ije", o, w)
    return {"torch.einsum x2": _nograd(torch, run)}


@program(name="triangle multiplicative update ikc,jkc->ijc", kind="matmul", src="""
def tri(float(N,N,C) a, float(N,N,C) bb) -> (z) {
  z(i, j, c) +=! a(i, k, c) * bb(j, k, c)
}""", full=dict(N=128, C=64), tiny=dict(N=3, C=2),
   inputs=lambda r, s: [_n(r, s["N"], s["N"], s["C"]), _n(r, s["N"], s["N"], s["C"])])
def _tri(torch, a, t, s):
    return {"torch.einsum": _nograd(torch, lambda: torch.einsum("ikc,jkc->ijc", t[0], t[1]))}


@program(name="horner polynomial over a loop of coefficients", kind="rnn", src="""
def horner(float(N) x, float(K) coef) -> (y) {
  for k in K {
    if k == 0 { y(i) = coef(0) + 0 * x(i) }
    else { y(i) = y(i) * x(i) + coef(k) }
  }
}""", full=dict(N=1 << 20, K=16), tiny=dict(N=5, K=3),
   inputs=lambda r, s: [(r.random(s["N"]) * 2 - 1).astype(np.float32), _n(r, s["K"])])
def _horner(torch, a, t, s):
    x, c = t
    def run():
        y = torch.full_like(x, float(c[0]))
        for k in range(1, s["K"]):
            y = y * x + c[k]
        return y
    return {"torch loop": _nograd(torch, run)}



@program(name="gcn aggregation (scatter by dst, gather by src, edge weights)", kind="data", src="""
def gcn(float(N,D) x, int64(E) src, int64(E) dst, float(E) w) -> (out) {
  out(v, d) +=! (dst(e) == v ? x(src(e), d) * w(e) : 0) where v in 0:N
}""", full=dict(N=16384, D=128, E=131072), tiny=dict(N=4, D=3, E=7),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.integers(0, s["N"], s["E"]).astype(np.int64),
                        r.integers(0, s["N"], s["E"]).astype(np.int64), r.random(s["E"]).astype(np.float32)])
def _gcn(torch, a, t, s):
    x, src, dst, w = t
    def run():
        return torch.zeros(s["N"], s["D"]).index_add_(0, dst, x[src] * w[:, None])
    return {"index_add_": _nograd(torch, run)}


@program(name="log-softmax over a 50k vocabulary, 8 rows", kind="norm", src="""
def lsm(float(B,V) x) -> (y) {
  m(b) max=! x(b, v)
  z(b) +=! exp(x(b, v) - m(b))
  y(b, v) = x(b, v) - m(b) - log(z(b))
}""", full=dict(B=8, V=50257), tiny=dict(B=2, V=5),
   inputs=lambda r, s: [_n(r, s["B"], s["V"])])
def _lsm(torch, a, t, s):
    return {"torch.log_softmax": _nograd(torch, lambda: torch.log_softmax(t[0], -1))}


@program(name="decode-step attention over a kv cache (1 query, 32 heads, 4096 keys)", kind="attention", src="""
def dec(float(H,D) q, float(H,T,D) k, float(H,T,D) v) -> (o) {
  s(h, j) +=! q(h, d) * k(h, j, d) / sqrt(float(D))
  m(h) max=! s(h, j)
  e(h, j) = exp(s(h, j) - m(h))
  z(h) +=! e(h, j)
  o(h, d) +=! e(h, j) * v(h, j, d)
  o(h, d) = o(h, d) / z(h)
}""", full=dict(H=32, T=4096, D=128), tiny=dict(H=2, T=3, D=4),
   inputs=lambda r, s: [_n(r, s["H"], s["D"]), _n(r, s["H"], s["T"], s["D"]), _n(r, s["H"], s["T"], s["D"])])
def _dec_kv(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t
    return {"F.scaled_dot_product_attention": _nograd(
        torch, lambda: F.scaled_dot_product_attention(q[:, None, :], k, v)[:, 0, :])}


@program(name="integral image (two loops: along rows, then down columns)", kind="rnn", src="""
def sat(float(B,H,W) x) -> (S) {
  for c in W {
    if c == 0 { r(b, y, c) = x(b, y, c) }
    else { r(b, y, c) = r(b, y, c - 1) + x(b, y, c) }
  }
  for y in H {
    if y == 0 { S(b, y, c) = r(b, y, c) }
    else { S(b, y, c) = S(b, y - 1, c) + r(b, y, c) }
  }
}""", full=dict(B=16, H=256, W=256), tiny=dict(B=1, H=3, W=4),
   inputs=lambda r, s: [_n(r, s["B"], s["H"], s["W"])])
def _sat(torch, a, t, s):
    return {"cumsum(2).cumsum(1)": _nograd(torch, lambda: t[0].cumsum(2).cumsum(1))}


@program(name="batched 3x3 matmul (262144 rotations composed)", kind="matmul", src="""
def rot(float(N,3,3) a, float(N,3,3) b) -> (c) {
  c(n, i, j) +=! a(n, i, k) * b(n, k, j)
}""", full=dict(N=262144), tiny=dict(N=3),
   inputs=lambda r, s: [_n(r, s["N"], 3, 3), _n(r, s["N"], 3, 3)])
def _rot(torch, a, t, s):
    return {"torch.bmm": _nograd(torch, lambda: torch.bmm(t[0], t[1]))}


@program(name="viterbi backtrace (reversed loop, state gathered from the next step)", kind="rnn", src="""
def back(int32(T,B,S) bp, int32(B) last) -> (path) {
  for t in T {
    if t == 0 { path(T - 1 - t, b) = last(b) }
    else { path(T - 1 - t, b) = bp(T - t, b, path(T - t, b)) }
  }
}""", full=dict(T=512, B=1024, S=64), tiny=dict(T=3, B=2, S=3),
   inputs=lambda r, s: [r.integers(0, s["S"], (s["T"], s["B"], s["S"])).astype(np.int32),
                        r.integers(0, s["S"], s["B"]).astype(np.int32)])
def _back(torch, a, t, s):
    bp, last = t
    def run():
        out = torch.empty(s["T"], s["B"], dtype=torch.int32); cur = last.long(); out[-1] = last
        for k in range(s["T"] - 1, 0, -1):
            cur = bp[k].gather(1, cur[:, None])[:, 0].long(); out[k - 1] = cur
        return out
    return {"torch loop with gather": _nograd(torch, run)}


@program(name="mobilenet depthwise 3x3 stride 2 pad 1 (select), NCHW", kind="conv", src="""
def dws2(float(B,C,H,W) x, float(C,3,3) w) -> (y) {
  y(b, c, i, j) +=! (2 * i + kh - 1 >= 0 && 2 * i + kh - 1 < H && 2 * j + kw - 1 >= 0 && 2 * j + kw - 1 < W
                     ? x(b, c, 2 * i + kh - 1, 2 * j + kw - 1) : 0) * w(c, kh, kw)
                     where i in 0:(H + 1) / 2, j in 0:(W + 1) / 2, kh in 0:3, kw in 0:3
}""", full=dict(B=16, C=96, H=112, W=112), tiny=dict(B=1, C=2, H=5, W=4),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _w(r, s["C"], 3, 3)])
def _dws2(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d(groups=C, stride=2)": _nograd(
        torch, lambda: F.conv2d(t[0], t[1][:, None], stride=2, padding=1, groups=s["C"]))}


@program(name="token embedding with int64 ids, scaled by sqrt(D)", kind="data", src="""
def emb(int64(B,T) ids, float(V,D) E) -> (y) {
  y(b, t, d) = E(ids(b, t), d) * sqrt(float(D))
}""", full=dict(B=32, T=512, V=32000, D=512), tiny=dict(B=1, T=3, V=5, D=2),
   inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["T"])).astype(np.int64), _n(r, s["V"], s["D"])])
def _emb(torch, a, t, s):
    F = torch.nn.functional
    return {"F.embedding * sqrt(D)": _nograd(torch, lambda: F.embedding(t[0], t[1]) * s["D"] ** 0.5)}



@program(name="matmul into a transposed output C(j, i)", kind="matmul", src="""
def mmt(float(M,K) a, float(K,N) b) -> (c) {
  c(j, i) +=! a(i, k) * b(k, j)
}""", full=dict(M=1024, K=512, N=768), tiny=dict(M=3, K=2, N=4),
   inputs=lambda r, s: [_n(r, s["M"], s["K"]), _w(r, s["K"], s["N"])])
def _mmt(torch, a, t, s):
    return {"(a @ b).T.contiguous()": _nograd(torch, lambda: (t[0] @ t[1]).T.contiguous())}


@program(name="tril of a batch of matrices (select)", kind="data", src="""
def tril(float(B,N,N) x) -> (y) {
  y(b, i, j) = j <= i ? x(b, i, j) : 0
}""", full=dict(B=64, N=512), tiny=dict(B=2, N=3),
   inputs=lambda r, s: [_n(r, s["B"], s["N"], s["N"])])
def _tril_batch(torch, a, t, s):
    return {"torch.tril": _nograd(torch, lambda: torch.tril(t[0]))}


@program(name="cdist p=1 (manhattan distances)", kind="matmul", src="""
def l1(float(N,D) x, float(M,D) y) -> (d) {
  d(i, j) +=! fabs(x(i, k) - y(j, k))
}""", full=dict(N=1024, M=1024, D=64), tiny=dict(N=3, M=2, D=4),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["M"], s["D"])])
def _l1(torch, a, t, s):
    return {"torch.cdist(p=1)": _nograd(torch, lambda: torch.cdist(t[0], t[1], p=1))}


@program(name="variance over the batch (dim 0), 32 features", kind="norm", src="""
def var0(float(N,D) x) -> (v) {
  m(d) +=! x(n, d) / N
  v(d) +=! (x(n, d) - m(d)) * (x(n, d) - m(d)) / (N - 1)
}""", full=dict(N=65536, D=32), tiny=dict(N=3, D=2),
   inputs=lambda r, s: [_n(r, s["N"], s["D"])])
def _var0(torch, a, t, s):
    return {"x.var(0)": _nograd(torch, lambda: t[0].var(0))}


@program(name="unfold 3x3 patches, valid (B, C, 3, 3, H-2, W-2)", kind="data", src="""
def unfold(float(B,C,H,W) x) -> (p) {
  p(b, c, i, j, h, w) = x(b, c, h + i, w + j) where i in 0:3, j in 0:3, h in 0:H - 2, w in 0:W - 2
}""", full=dict(B=8, C=64, H=58, W=58), tiny=dict(B=1, C=2, H=4, W=5),
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"])])
def _unfold(torch, a, t, s):
    F = torch.nn.functional
    B, C, H, W = s["B"], s["C"], s["H"], s["W"]
    return {"F.unfold(3)": _nograd(torch, lambda: F.unfold(t[0], 3).reshape(B, C, 3, 3, H - 2, W - 2))}



@program(name="rnn reading a memory by content (softmax over slots each step)", kind="rnn", src="""
def mem(float(T,B,I) x, float(B,M,D) Mem, float(H,D) Wk, float(I,H) Wx, float(D,H) Wr) -> (h) {
  for t in T {
    if t == 0 { key(b, d) = 0 * Wk(0, d) where b in 0:B }
    else { key(b, d) +=! h(t - 1, b, j) * Wk(j, d) }
    sim(b, m) +=! Mem(b, m, d) * key(b, d)
    mx(b) max=! sim(b, m)
    e(b, m) = exp(sim(b, m) - mx(b))
    z(b) +=! e(b, m)
    rd(b, d) +=! e(b, m) * Mem(b, m, d) / z(b)
    h(t, b, j) +=! x(t, b, i) * Wx(i, j)
    h(t, b, j) += rd(b, d) * Wr(d, j)
    h(t, b, j) = tanh(h(t, b, j))
  }
}""", full=dict(T=64, B=32, I=128, M=128, D=64, H=256), tiny=dict(T=3, B=2, I=3, M=4, D=2, H=3),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["M"], s["D"]), _w(r, s["H"], s["D"]),
                        _w(r, s["I"], s["H"]), _w(r, s["D"], s["H"])])
def _mem(torch, a, t, s):
    x, M, Wk, Wx, Wr = t
    def run():
        key = torch.zeros(s["B"], s["D"]); out = []
        xp = x @ Wx
        for k in range(s["T"]):
            w = torch.softmax(torch.bmm(M, key[:, :, None])[:, :, 0], -1)
            rd = torch.bmm(w[:, None, :], M)[:, 0, :]
            h = torch.tanh(xp[k] + rd @ Wr); out.append(h)
            key = h @ Wk
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="stacked gru, layers outside time, weights indexed by layer (in,out)", kind="rnn", src="""
def sgru(float(T,B,H) x, float(L,3,H,H) W, float(L,3,H,H) U) -> (h) {
  for l in L {
    for t in T {
      if l == 0 { gi(g, b, j) +=! x(t, b, i) * W(l, g, i, j) }
      else { gi(g, b, j) +=! h(l - 1, t, b, i) * W(l, g, i, j) }
      if t == 0 { gh(g, b, j) = 0 * U(l, g, 0, j) where b in 0:B }
      else { gh(g, b, j) +=! h(l, t - 1, b, k) * U(l, g, k, j) }
      r(b, j) = sigmoid(gi(0, b, j) + gh(0, b, j))
      z(b, j) = sigmoid(gi(1, b, j) + gh(1, b, j))
      n(b, j) = tanh(gi(2, b, j) + r(b, j) * gh(2, b, j))
      if t == 0 { h(l, t, b, j) = (1 - z(b, j)) * n(b, j) }
      else { h(l, t, b, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * h(l, t - 1, b, j) }
    }
  }
}""", full=dict(L=3, T=64, B=32, H=256), tiny=dict(L=2, T=3, B=2, H=3), pick=lambda r: r[-1],
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["H"]), _w(r, s["L"], 3, s["H"], s["H"]), _w(r, s["L"], 3, s["H"], s["H"])])
def _sgru(torch, a, t, s):
    x, W, U = t
    L, H = s["L"], s["H"]
    net = torch.nn.GRU(H, H, num_layers=L, bias=False)
    for l in range(L):
        _copy(torch, getattr(net, f"weight_ih_l{l}"), a[1][l].transpose(0, 2, 1).reshape(3 * H, H))
        _copy(torch, getattr(net, f"weight_hh_l{l}"), a[2][l].transpose(0, 2, 1).reshape(3 * H, H))
    def run():
        y, _ = net(x)
        return y
    return {"torch.nn.GRU(num_layers=L)": _nograd(torch, run)}


@program(name="rk4 integration of an mlp vector field (loop of 50 steps)", kind="rnn", src="""
def rk4(float(B,D) start, float(D,F) W1, float(F,D) W2) -> (y) {
  for s in S {
    if s == 0 { cur(b, d) = start(b, d) } else { cur(b, d) = y(s - 1, b, d) }
    a1(b, f) +=! cur(b, d) * W1(d, f)
    k1(b, d) +=! tanh(a1(b, f)) * W2(f, d)
    a2(b, f) +=! (cur(b, d) + 0.05 * k1(b, d)) * W1(d, f)
    k2(b, d) +=! tanh(a2(b, f)) * W2(f, d)
    a3(b, f) +=! (cur(b, d) + 0.05 * k2(b, d)) * W1(d, f)
    k3(b, d) +=! tanh(a3(b, f)) * W2(f, d)
    a4(b, f) +=! (cur(b, d) + 0.1 * k3(b, d)) * W1(d, f)
    k4(b, d) +=! tanh(a4(b, f)) * W2(f, d)
    y(s, b, d) = cur(b, d) + 0.1 / 6 * (k1(b, d) + 2 * k2(b, d) + 2 * k3(b, d) + k4(b, d))
  }
}""", full=dict(B=256, D=64, F=256, S=50), tiny=dict(B=2, D=3, F=4, S=3), free=("S",),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), _w(r, s["D"], s["F"]), _w(r, s["F"], s["D"])])
def _rk4(torch, a, t, s):
    y0, W1, W2 = t
    f = lambda y: torch.tanh(y @ W1) @ W2
    def run():
        y = y0; out = []
        for _ in range(s["S"]):
            k1 = f(y); k2 = f(y + 0.05 * k1); k3 = f(y + 0.05 * k2); k4 = f(y + 0.1 * k3)
            y = y + 0.1 / 6 * (k1 + 2 * k2 + 2 * k3 + k4); out.append(y)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


@program(name="game of life, 64 steps on 512x512 (select borders)", kind="rnn", src="""
def life(int32(N,N) g0) -> (g) {
  for s in S {
    if s == 0 { cur(i, j) = g0(i, j) } else { cur(i, j) = g(s - 1, i, j) }
    nb(i, j) +=! (i + a - 1 >= 0 && i + a - 1 < N && j + c - 1 >= 0 && j + c - 1 < N && (a != 1 || c != 1)
                  ? cur(i + a - 1, j + c - 1) : 0) where i in 0:N, j in 0:N, a in 0:3, c in 0:3
    g(s, i, j) = (nb(i, j) == 3 || (nb(i, j) == 2 && cur(i, j) == 1)) ? 1 : 0
  }
}""", full=dict(N=512, S=64), tiny=dict(N=5, S=3), free=("S",),
   inputs=lambda r, s: [(r.random((s["N"], s["N"])) < 0.3).astype(np.int32)])
def _life(torch, a, t, s):
    F = torch.nn.functional
    k = torch.ones(1, 1, 3, 3); k[0, 0, 1, 1] = 0
    def run():
        g = t[0].float()[None, None]; out = []
        for _ in range(s["S"]):
            nb = F.conv2d(g, k, padding=1)
            g = ((nb == 3) | ((nb == 2) & (g == 1))).float(); out.append(g[0, 0])
        return torch.stack(out).int()
    return {"torch loop of conv2d": _nograd(torch, run)}


@program(name="deltanet recurrence (matrix state updated in place)", kind="rnn", src="""
def delta(float(T,B,D) q, float(T,B,D) kk, float(T,B,D) v, float(T,B) beta) -> (o) {
  for t in T {
    if t == 0 { S(b, i, j) = beta(t, b) * v(t, b, i) * kk(t, b, j) }
    else {
      p(b, i) +=! S(b, i, k) * kk(t, b, k)
      S(b, i, j) = S(b, i, j) + beta(t, b) * (v(t, b, i) - p(b, i)) * kk(t, b, j)
    }
    o(t, b, i) +=! S(b, i, j) * q(t, b, j)
  }
}""", full=dict(T=256, B=16, D=64), tiny=dict(T=3, B=2, D=3),
   inputs=lambda r, s: [_n(r, s["T"], s["B"], s["D"]), _n(r, s["T"], s["B"], s["D"]) / 8, _n(r, s["T"], s["B"], s["D"]),
                        r.random((s["T"], s["B"])).astype(np.float32)])
def _delta(torch, a, t, s):
    q, k, v, beta = t
    def run():
        S = torch.zeros(s["B"], s["D"], s["D"]); out = []
        for n in range(s["T"]):
            p = torch.bmm(S, k[n][:, :, None])[:, :, 0]
            S = S + (beta[n][:, None] * (v[n] - p))[:, :, None] * k[n][:, None, :]
            out.append(torch.bmm(S, q[n][:, :, None])[:, :, 0])
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}



def _spd(r, B, N):
    a = r.standard_normal((B, N, N)).astype(np.float32) / np.sqrt(N)
    return (a @ a.transpose(0, 2, 1) + np.eye(N, dtype=np.float32) * 2).astype(np.float32)


@program(name="conjugate gradient, 20 iterations, batch of spd systems", kind="rnn", src="""
def cg(float(B,N,N) A, float(B,N) rhs) -> (x) {
  for it in I {
    if it == 0 {
      x(b, i) = 0 * rhs(b, i)
      r(b, i) = rhs(b, i)
      p(b, i) = rhs(b, i)
      rr(b) +=! rhs(b, i) * rhs(b, i)
    }
    Ap(b, i) +=! A(b, i, j) * p(b, j)
    pAp(b) +=! p(b, i) * Ap(b, i)
    x(b, i) = x(b, i) + rr(b) / pAp(b) * p(b, i)
    r(b, i) = r(b, i) - rr(b) / pAp(b) * Ap(b, i)
    rn(b) +=! r(b, i) * r(b, i)
    p(b, i) = r(b, i) + rn(b) / rr(b) * p(b, i)
    rr(b) = rn(b)
  }
}""", full=dict(B=64, N=128, I=20), tiny=dict(B=2, N=3, I=2), free=("I",),
   inputs=lambda r, s: [_spd(r, s["B"], s["N"]), _n(r, s["B"], s["N"])])
def _cg(torch, a, t, s):
    A, b = t
    def run():
        x = torch.zeros_like(b); r = b.clone(); p = b.clone(); rr = (b * b).sum(1)
        for _ in range(s["I"]):
            Ap = torch.bmm(A, p[:, :, None])[:, :, 0]
            al = rr / (p * Ap).sum(1)
            x = x + al[:, None] * p; r = r - al[:, None] * Ap
            rn = (r * r).sum(1); p = r + (rn / rr)[:, None] * p; rr = rn
        return x
    return {"torch loop": _nograd(torch, run)}


@program(name="log-domain sinkhorn, 20 iterations", kind="rnn", src="""
def lsk(float(N,M) C) -> (f, g) {
  for it in I {
    if it == 0 { gp(j) = 0 * C(0, j) } else { gp(j) = g(j) }
    mf(i) max=! (gp(j) - C(i, j)) * 10
    sf(i) +=! exp((gp(j) - C(i, j)) * 10 - mf(i))
    f(i) = -0.1 * (mf(i) + log(sf(i))) - 0.1 * log(float(N))
    mg(j) max=! (f(i) - C(i, j)) * 10
    sg(j) +=! exp((f(i) - C(i, j)) * 10 - mg(j))
    g(j) = -0.1 * (mg(j) + log(sg(j))) - 0.1 * log(float(M))
  }
}""", full=dict(N=1024, M=1024, I=20), tiny=dict(N=3, M=4, I=2), free=("I",), pick=lambda r: r[1],
   inputs=lambda r, s: [r.random((s["N"], s["M"])).astype(np.float32)])
def _lsk(torch, a, t, s):
    (C,) = t
    N, M = s["N"], s["M"]
    def run():
        g = torch.zeros(M)
        for _ in range(s["I"]):
            f = -0.1 * torch.logsumexp((g[None] - C) * 10, 1) - 0.1 * np.log(N)
            g = -0.1 * torch.logsumexp((f[:, None] - C) * 10, 0) - 0.1 * np.log(M)
        return g
    return {"torch loop (logsumexp)": _nograd(torch, run)}


@program(name="value iteration (max over actions of P V), 30 sweeps", kind="rnn", src="""
def vi(float(A,S,S) P, float(S,A) R) -> (V) {
  for it in I {
    if it == 0 { q(s, a) = R(s, a) }
    else { q(s, a) +=! P(a, s, n) * V(it - 1, n)
           q(s, a) = R(s, a) + 0.95 * q(s, a) }
    V(it, s) max=! q(s, a)
  }
}""", full=dict(A=8, S=1024, I=30), tiny=dict(A=2, S=3, I=3), free=("I",),
   inputs=lambda r, s: [(lambda p: (p / p.sum(-1, keepdims=True)).astype(np.float32))(r.random((s["A"], s["S"], s["S"]))),
                        _n(r, s["S"], s["A"])])
def _vi(torch, a, t, s):
    P, R = t
    def run():
        out = []; V = R.max(1).values; out.append(V)
        for _ in range(1, s["I"]):
            q = R + 0.95 * torch.einsum("asn,n->sa", P, V)
            V = q.max(1).values; out.append(V)
        return torch.stack(out)
    return {"torch loop (einsum)": _nograd(torch, run)}


@program(name="2-layer transformer encoder, for l in L, weights indexed by layer", kind="attention", src="""
def enc(float(B,T,C) x, float(L,3,C,C) Wqkv, float(L,C,C) Wo, float(L,F,C) W1, float(L,C,F) W2) -> (h) {
  for l in L {
    if l == 0 { cur(b, t, c) = x(b, t, c) } else { cur(b, t, c) = h(l - 1, b, t, c) }
    qkv(g, b, t, o) +=! cur(b, t, c) * Wqkv(l, g, o, c)
    s(b, n, i, j) +=! qkv(0, b, i, n * 64 + d) * qkv(1, b, j, n * 64 + d) / 8 where n in 0:C / 64, d in 0:64
    mx(b, n, i) max=! s(b, n, i, j)
    e(b, n, i, j) = exp(s(b, n, i, j) - mx(b, n, i))
    z(b, n, i) +=! e(b, n, i, j)
    att(b, i, n, d) +=! e(b, n, i, j) * qkv(2, b, j, n * 64 + d) / z(b, n, i) where d in 0:64
    a(b, t, c) +=! att(b, t, o / 64, o % 64) * Wo(l, c, o) where o in 0:C
    r1(b, t, c) = cur(b, t, c) + a(b, t, c)
    f(b, t, u) +=! r1(b, t, c) * W1(l, u, c)
    h(l, b, t, c) +=! fmax(f(b, t, u), 0) * W2(l, c, u)
    h(l, b, t, c) = h(l, b, t, c) + r1(b, t, c)
  }
}""", full=dict(B=8, T=128, C=256, F=1024, L=2), tiny=dict(B=1, T=3, C=64, F=4, L=2), pick=lambda r: r[-1],
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["C"]), _w(r, s["L"], 3, s["C"], s["C"]), _w(r, s["L"], s["C"], s["C"]),
                        _w(r, s["L"], s["F"], s["C"]), _w(r, s["L"], s["C"], s["F"])])
def _enc(torch, a, t, s):
    F_ = torch.nn.functional
    x, Wqkv, Wo, W1, W2 = t
    B, T, C, L = s["B"], s["T"], s["C"], s["L"]
    H = C // 64
    def run():
        h = x
        for l in range(L):
            q, k, v = [(h @ Wqkv[l, g].T).reshape(B, T, H, 64).transpose(1, 2) for g in range(3)]
            att = F_.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
            r1 = h + att @ Wo[l].T
            h = r1 + torch.relu(r1 @ W1[l].T) @ W2[l].T
        return h
    return {"torch (sdpa)": _nograd(torch, run)}



@program(name="mlp of 4 layers in a loop, weights W(l, in, out)", kind="matmul", src="""
def mlp(float(B,H) x, float(L,H,H) W) -> (h) {
  for l in L {
    if l == 0 { h(l, b, j) +=! x(b, k) * W(l, k, j) }
    else { h(l, b, j) +=! h(l - 1, b, k) * W(l, k, j) }
    h(l, b, j) = fmax(h(l, b, j), 0)
  }
}""", full=dict(B=1024, H=512, L=4), tiny=dict(B=2, H=3, L=2), pick=lambda r: r[-1],
   inputs=lambda r, s: [_n(r, s["B"], s["H"]), _w(r, s["L"], s["H"], s["H"])])
def _mlp_layers(torch, a, t, s):
    x, W = t
    def run():
        h = x
        for l in range(s["L"]):
            h = torch.relu(h @ W[l])
        return h
    return {"torch loop of matmul + relu": _nograd(torch, run)}


# ---------------------------------------------------------------- session 43: more user programs (rotary embeddings, dilations from a table, experts)
@program(name="rms norm then linear (llama pre-norm projection)", kind="matmul", src="""
def rmslin(float(N,C) x, float(C) g, float(O,C) W) -> (y) {
  ms(n) +=! x(n, c) * x(n, c)
  r(n) = rsqrt(ms(n) / float(C) + 1e-6)
  y(n, o) +=! x(n, c) * r(n) * g(c) * W(o, c)
}""", full=dict(N=512, C=1024, O=1024), tiny=dict(N=3, C=5, O=4),
   inputs=lambda r, s: [_n(r, s["N"], s["C"]), (1 + 0.1 * _n(r, s["C"])).astype(np.float32), _w(r, s["O"], s["C"])])
def _rmslin(torch, a, t, s):
    F = torch.nn.functional
    x, g, W = t
    C = s["C"]
    return {"F.rms_norm + F.linear": _nograd(torch, lambda: F.linear(F.rms_norm(x, (C,), g, 1e-6), W))}


def _rope_tables(T, D):
    inv = 10000.0 ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    return [np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)]


@program(name="rope on q and k, interleaved pairs (gpt-j / llama complex form)", kind="elementwise", src="""
def rope(float(B,T,H,2*P) q, float(B,T,H,2*P) k, float(T,P) cs, float(T,P) sn) -> (qr, kr) {
  qr(b, t, h, d) = q(b, t, h, d) * cs(t, d / 2)
                 + (d % 2 == 0 ? -q(b, t, h, d + 1) : q(b, t, h, d - 1)) * sn(t, d / 2) where d in 0:2*P
  kr(b, t, h, d) = k(b, t, h, d) * cs(t, d / 2)
                 + (d % 2 == 0 ? -k(b, t, h, d + 1) : k(b, t, h, d - 1)) * sn(t, d / 2) where d in 0:2*P
}""", full=dict(B=2, T=1024, H=16, D=128), tiny=dict(B=1, T=3, H=2, D=4),
   inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["D"]), _n(r, s["B"], s["T"], s["H"], s["D"]),
                        *_rope_tables(s["T"], s["D"])])
def _rope_h15(torch, a, t, s):
    q, k, cs, sn = t
    B, T, H, D = s["B"], s["T"], s["H"], s["D"]
    fc = torch.complex(cs, sn)[None, :, None, :]

    def apply(x):
        xc = torch.view_as_complex(x.reshape(B, T, H, D // 2, 2))
        return torch.view_as_real(xc * fc).flatten(3)
    return {"torch (view_as_complex, llama)": _nograd(torch, lambda: (apply(q), apply(k)))}


@program(name="causal linear attention with normalizer (elu+1), state loop", kind="rnn", src="""
def cla(float(B,H,T,D) q, float(B,H,T,D) k, float(B,H,T,E) v) -> (o) {
  fq(b, h, i, d) = q(b, h, i, d) > 0 ? q(b, h, i, d) + 1 : exp(q(b, h, i, d))
  fk(b, h, i, d) = k(b, h, i, d) > 0 ? k(b, h, i, d) + 1 : exp(k(b, h, i, d))
  for t in T {
    if t == 0 {
      S(b, h, d, e) = fk(b, h, t, d) * v(b, h, t, e)
      z(b, h, d) = fk(b, h, t, d)
    } else {
      S(b, h, d, e) = S(b, h, d, e) + fk(b, h, t, d) * v(b, h, t, e)
      z(b, h, d) = z(b, h, d) + fk(b, h, t, d)
    }
    num(b, h, e) +=! fq(b, h, t, d) * S(b, h, d, e)
    den(b, h) +=! fq(b, h, t, d) * z(b, h, d)
    o(b, h, t, e) = num(b, h, e) / (den(b, h) + 1e-6)
  }
}""", full=dict(B=4, H=8, T=512, D=64, E=64), tiny=dict(B=1, H=2, T=4, D=3, E=2),
   inputs=lambda r, s: [_n(r, s["B"], s["H"], s["T"], s["D"]), _n(r, s["B"], s["H"], s["T"], s["D"]),
                        _n(r, s["B"], s["H"], s["T"], s["E"])])
def _cla(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t
    T = s["T"]
    mask = torch.ones(T, T, dtype=torch.bool).tril()

    def quadratic():
        A = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)
        A = A.masked_fill(~mask, 0)
        return (A @ v) / (A.sum(-1, keepdim=True) + 1e-6)
    return {"torch quadratic (masked)": _nograd(torch, quadratic)}


@program(name="mlstm matrix memory (xlstm), stabilized exp gates", kind="rnn", src="""
def mlstm(float(B,H,T,D) q, float(B,H,T,D) k, float(B,H,T,D) v, float(B,H,T) ig, float(B,H,T) fg) -> (hs) {
  for t in T {
    lf(b, h) = -log(1 + exp(-fg(b, h, t)))
    if t == 0 { m(t, b, h) = fmax(lf(b, h), ig(b, h, t)) }
    else      { m(t, b, h) = fmax(lf(b, h) + m(t - 1, b, h), ig(b, h, t)) }
    ia(b, h) = exp(ig(b, h, t) - m(t, b, h))
    if t == 0 {
      C(b, h, e, d) = ia(b, h) * v(b, h, t, e) * k(b, h, t, d) * 0.125
      n(b, h, d) = ia(b, h) * k(b, h, t, d) * 0.125
    } else {
      fa(b, h) = exp(lf(b, h) + m(t - 1, b, h) - m(t, b, h))
      C(b, h, e, d) = fa(b, h) * C(b, h, e, d) + ia(b, h) * v(b, h, t, e) * k(b, h, t, d) * 0.125
      n(b, h, d) = fa(b, h) * n(b, h, d) + ia(b, h) * k(b, h, t, d) * 0.125
    }
    num(b, h, e) +=! C(b, h, e, d) * q(b, h, t, d)
    den(b, h) +=! n(b, h, d) * q(b, h, t, d)
    hs(b, h, t, e) = num(b, h, e) / fmax(fabs(den(b, h)), exp(-m(t, b, h)))
  }
}""", full=dict(B=4, H=4, T=256, D=64), tiny=dict(B=1, H=2, T=4, D=3),
   inputs=lambda r, s: [_n(r, s["B"], s["H"], s["T"], s["D"]), _n(r, s["B"], s["H"], s["T"], s["D"]),
                        _n(r, s["B"], s["H"], s["T"], s["D"]), _n(r, s["B"], s["H"], s["T"]),
                        (2 + _n(r, s["B"], s["H"], s["T"])).astype(np.float32)])
def _mlstm(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, ig, fg = t
    T = s["T"]
    mask = torch.ones(T, T, dtype=torch.bool).tril()

    def parallel():  # the stabilized parallel form of the xlstm repository
        cs = torch.cumsum(F.logsigmoid(fg), -1)
        logD = (cs[..., :, None] - cs[..., None, :] + ig[..., None, :]).masked_fill(~mask, float("-inf"))
        m = logD.max(-1, keepdim=True).values
        Ct = (q @ k.transpose(-1, -2) * 0.125) * torch.exp(logD - m)
        den = torch.maximum(Ct.sum(-1, keepdim=True).abs(), torch.exp(-m))
        return (Ct @ v) / den
    return {"torch parallel form": _nograd(torch, parallel)}


@program(name="wavenet stack, for l in L, dilation table dil(l), gated, residual", kind="conv", src="""
def wavenet(float(B,C,T) x, int32(L) dil, float(L,2,C,C,2) Wf, float(L,C,C) Wr) -> (h) {
  for l in L {
    if l == 0 { cur(b, c, t) = x(b, c, t) } else { cur(b, c, t) = h(l - 1, b, c, t) }
    a(g, b, o, t) +=! Wf(l, g, o, c, 1) * cur(b, c, t)
                    + Wf(l, g, o, c, 0) * (t - dil(l) >= 0 ? cur(b, c, t - dil(l)) : 0)
    z(b, o, t) = tanh(a(0, b, o, t)) * sigmoid(a(1, b, o, t))
    h(l, b, o, t) +=! Wr(l, o, c) * z(b, c, t)
    h(l, b, o, t) = h(l, b, o, t) + cur(b, o, t)
  }
}""", full=dict(B=2, C=64, T=2048, L=8), tiny=dict(B=1, C=2, T=9, L=3), pick=lambda r: r[-1],
   inputs=lambda r, s: [_n(r, s["B"], s["C"], s["T"]), (2 ** np.arange(s["L"])).astype(np.int32),
                        (_w(r, s["L"], 2, s["C"], s["C"], 2) / np.sqrt(s["C"]) * np.sqrt(2)).astype(np.float32),
                        (_w(r, s["L"], s["C"], s["C"]) * 0.5).astype(np.float32)])
def _wavenet_h15(torch, a, t, s):
    F = torch.nn.functional
    x, dil, Wf, Wr = t
    C, L = s["C"], s["L"]
    Wc = Wf.reshape(L, 2 * C, C, 2)
    ds = [int(d) for d in a[1]]

    def run():
        h = x
        for l in range(L):
            y = F.conv1d(F.pad(h, (ds[l], 0)), Wc[l], dilation=ds[l])
            z = torch.tanh(y[:, :C]) * torch.sigmoid(y[:, C:])
            h = h + F.conv1d(z, Wr[l][:, :, None])
        return h
    return {"torch F.conv1d per layer": _nograd(torch, run)}


@program(name="n-body, 10 semi-implicit euler steps (softened, masses)", kind="rnn", src="""
def nbody(float(N,3) p0, float(N,3) v0, float(N) m) -> (p, v) {
  for s in S {
    if s == 0 {
      p(i, d) = p0(i, d)
      v(i, d) = v0(i, d)
    }
    r2(i, j) +=! (p(j, d) - p(i, d)) * (p(j, d) - p(i, d))
    w(i, j) = m(j) * rsqrt(r2(i, j) + 0.01) / (r2(i, j) + 0.01)
    acc(i, d) +=! w(i, j) * (p(j, d) - p(i, d))
    v(i, d) = v(i, d) + 0.001 * acc(i, d)
    p(i, d) = p(i, d) + 0.001 * v(i, d)
  }
}""", full=dict(N=2048, S=10), tiny=dict(N=4, S=2), free=("S",),
   inputs=lambda r, s: [_n(r, s["N"], 3), _n(r, s["N"], 3),
                        (r.random(s["N"]) / s["N"] * 10).astype(np.float32)])
def _nbody(torch, a, t, s):
    p0, v0, m = t

    def run():
        p, v = p0, v0
        for _ in range(s["S"]):
            diff = p[None, :, :] - p[:, None, :]
            r2 = (diff * diff).sum(-1) + 0.01
            w = m[None, :] * torch.rsqrt(r2) / r2
            acc = w @ p - w.sum(1, keepdim=True) * p
            v = v + 0.001 * acc
            p = p + 0.001 * v
        return p, v
    return {"torch loop (broadcast r2, matmul forces)": _nograd(torch, run)}


@program(name="mixture of experts, top-1 routing by an index tensor (gathered expert weights)", kind="mlp", src="""
def moe(float(N,C) x, int32(N) e, float(N) gate, float(E,F,C) W1, float(E,C,F) W2) -> (y) {
  hd(n, f) +=! x(n, c) * W1(e(n), f, c)
  y(n, c) +=! fmax(hd(n, f), 0) * W2(e(n), c, f)
  y(n, c) = gate(n) * y(n, c)
}""", full=dict(N=512, C=256, F=512, E=8), tiny=dict(N=5, C=3, F=4, E=2),
   inputs=lambda r, s: [_n(r, s["N"], s["C"]), r.integers(0, s["E"], s["N"]).astype(np.int32),
                        r.random(s["N"]).astype(np.float32), _w(r, s["E"], s["F"], s["C"]), _w(r, s["E"], s["C"], s["F"])])
def _moe_h15(torch, a, t, s):
    F_ = torch.nn.functional
    x, e, gate, W1, W2 = t
    E = s["E"]
    e64 = e.long()

    def run():
        y = torch.empty_like(x)
        for i in range(E):
            idx = (e64 == i).nonzero(as_tuple=True)[0]
            y[idx] = F_.linear(torch.relu(F_.linear(x[idx], W1[i])), W2[i]) * gate[idx, None]
        return y
    return {"torch loop over experts (index_select)": _nograd(torch, run)}


@program(name="classical gram-schmidt qr, loop over columns (where i in 0:j)", kind="linear", src="""
def cgs(float(B,M,N) A) -> (Q) {
  for j in N {
    r(b, i) +=! Q(b, m, i) * A(b, m, j) where i in 0:j
    u(b, m) +=! Q(b, m, i) * r(b, i) where m in 0:M, i in 0:j
    u(b, m) = A(b, m, j) - u(b, m)
    nrm(b) +=! u(b, m) * u(b, m)
    Q(b, m, j) = u(b, m) * rsqrt(nrm(b))
  }
}""", full=dict(B=64, M=256, N=64), tiny=dict(B=2, M=4, N=3),
   inputs=lambda r, s: [_n(r, s["B"], s["M"], s["N"])])
def _cgs(torch, a, t, s):
    (A,) = t

    def run():
        Q, R = torch.linalg.qr(A)
        return Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))[:, None, :]
    return {"torch.linalg.qr (signs fixed)": _nograd(torch, run)}


@program(name="newton-schulz orthogonalization (muon), 5 quintic steps", kind="linear", src="""
def ns(float(B,M,N) G) -> (X) {
  nrm(b) +=! G(b, i, j) * G(b, i, j)
  for it in I {
    if it == 0 { X(b, i, j) = G(b, i, j) / (sqrt(nrm(b)) + 1e-7) }
    A(b, i, k) +=! X(b, i, j) * X(b, k, j)
    AA(b, i, k) +=! A(b, i, l) * A(b, l, k)
    Bm(b, i, k) = -4.7750 * A(b, i, k) + 2.0315 * AA(b, i, k)
    Y(b, i, j) +=! Bm(b, i, k) * X(b, k, j)
    X(b, i, j) = 3.4445 * X(b, i, j) + Y(b, i, j)
  }
}""", full=dict(B=2, M=256, N=512, I=5), tiny=dict(B=1, M=2, N=3, I=2), free=("I",),
   inputs=lambda r, s: [_n(r, s["B"], s["M"], s["N"])])
def _ns(torch, a, t, s):
    (G,) = t
    a_, b_, c_ = 3.4445, -4.7750, 2.0315

    def run():
        X = G / (G.norm(dim=(-2, -1), keepdim=True) + 1e-7)
        for _ in range(s["I"]):
            A = X @ X.mT
            Bm = b_ * A + c_ * A @ A
            X = a_ * X + Bm @ X
        return X
    return {"torch (muon zeropower_via_newtonschulz5)": _nograd(torch, run)}


@program(name="batched cholesky, loop over columns (where i in j+1:N)", kind="linear", src="""
def chol(float(B,N,N) A) -> (Lm) {
  for j in N {
    s(b) +=! Lm(b, j, k) * Lm(b, j, k) where b in 0:B, k in 0:j
    dg(b) = sqrt(A(b, j, j) - s(b))
    c(b, i) +=! Lm(b, i, k) * Lm(b, j, k) where b in 0:B, i in j+1:N, k in 0:j
    Lm(b, i, j) = 0 * A(b, i, j) where i in 0:j
    Lm(b, j, j) = dg(b)
    Lm(b, i, j) = (A(b, i, j) - c(b, i)) / dg(b) where i in j+1:N
  }
}""", full=dict(B=64, N=128), tiny=dict(B=2, N=3),
   inputs=lambda r, s: [_spd(r, s["B"], s["N"])])
def _chol(torch, a, t, s):
    (A,) = t
    return {"torch.linalg.cholesky": _nograd(torch, lambda: torch.linalg.cholesky(A))}


def _stft_tables(NF):
    K = NF // 2 + 1
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(NF) / NF)  # periodic hann, as torch.hann_window
    ang = 2 * np.pi * np.outer(np.arange(K), np.arange(NF)) / NF
    return [(w * np.cos(ang)).astype(np.float32), (-w * np.sin(ang)).astype(np.float32)]


@program(name="stft power spectrogram (hop 128, windowed dft tables)", kind="matmul", src="""
def spec(float(B,L) x, float(K,NF) cw, float(K,NF) sw) -> (P) {
  re(b, f, k) +=! x(b, 128 * f + n) * cw(k, n)
  im(b, f, k) +=! x(b, 128 * f + n) * sw(k, n)
  P(b, f, k) = re(b, f, k) * re(b, f, k) + im(b, f, k) * im(b, f, k)
}""", full=dict(B=8, L=32000, NF=512), tiny=dict(B=2, L=300, NF=8),
   inputs=lambda r, s: [_n(r, s["B"], s["L"]), *_stft_tables(s["NF"])])
def _spec(torch, a, t, s):
    x = t[0]
    NF = s["NF"]
    win = torch.hann_window(NF)
    return {"torch.stft (center=False)": _nograd(torch, lambda: torch.stft(
        x, NF, hop_length=128, window=win, center=False, return_complex=True).abs().square().transpose(1, 2))}


@program(name="red-black gauss-seidel for poisson, in place (parity selects)", kind="stencil", src="""
def rbgs(float(B,N,M) f) -> (u) {
  for it in I {
    if it == 0 { u(b, i, j) = 0 * f(b, i, j) }
    u(b, i, j) = (i + j) % 2 == 0 ? 0.25 * (u(b, i - 1, j) + u(b, i + 1, j) + u(b, i, j - 1) + u(b, i, j + 1) + f(b, i, j))
                                  : u(b, i, j) where i in 1:N-1, j in 1:M-1
    u(b, i, j) = (i + j) % 2 == 1 ? 0.25 * (u(b, i - 1, j) + u(b, i + 1, j) + u(b, i, j - 1) + u(b, i, j + 1) + f(b, i, j))
                                  : u(b, i, j) where i in 1:N-1, j in 1:M-1
  }
}""", full=dict(B=4, N=256, M=256, I=50), tiny=dict(B=1, N=5, M=6, I=3), free=("I",),
   inputs=lambda r, s: [_n(r, s["B"], s["N"], s["M"])])
def _rbgs(torch, a, t, s):
    (f,) = t
    N, M = s["N"], s["M"]
    ii = torch.arange(N)[:, None]
    jj = torch.arange(M)[None, :]
    red = ((ii + jj) % 2 == 0)[1:-1, 1:-1]
    fi = f[:, 1:-1, 1:-1]

    def run():
        u = torch.zeros_like(f)
        for _ in range(s["I"]):
            for colour in (red, ~red):
                nb = 0.25 * (u[:, :-2, 1:-1] + u[:, 2:, 1:-1] + u[:, 1:-1, :-2] + u[:, 1:-1, 2:] + fi)
                u[:, 1:-1, 1:-1] = torch.where(colour, nb, u[:, 1:-1, 1:-1])
        return u
    return {"torch loop (where on the colour mask)": _nograd(torch, run)}


# ------------------------------------------------ session 44: minimal RNNs, RNN-T, local attention, losses, decoders
# ---------------------------------------------------------------- minimal RNNs (loops over parallel projections)

@program(name="mingru batch-first, gates from x only, h0 given (out,in)", kind="rnn", src="""
# minGRU (Feng et al. 2024): z and the candidate depend on x only, projected for all steps before the loop;
# the loop is then the scan h(t) = h(t-1) + z (cand - h(t-1)), batch-first
def mingru(float(B,T,I) x, float(B,H) h0, float(H,I) Wz, float(H) bz, float(H,I) Wh, float(H) bh) -> (h) {
  z(b, t, j) +=! x(b, t, i) * Wz(j, i)
  cand(b, t, j) +=! x(b, t, i) * Wh(j, i)
  for t in T {
    if t == 0 { h(b, t, j) = h0(b, j) + sigmoid(z(b, t, j) + bz(j)) * (cand(b, t, j) + bh(j) - h0(b, j)) }
    else      { h(b, t, j) = h(b, t - 1, j) + sigmoid(z(b, t, j) + bz(j)) * (cand(b, t, j) + bh(j) - h(b, t - 1, j)) }
  }
}""", full=dict(B=16, T=256, I=256, H=256), tiny=dict(B=2, T=5, I=3, H=7),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _n(r, s["B"], s["H"]), _w(r, s["H"], s["I"]), _w(r, s["H"]),
                         _w(r, s["H"], s["I"]), _w(r, s["H"])])
def _mingru(torch, a, t, s):
    F = torch.nn.functional
    x, h0, Wz, bz, Wh, bh = t

    def loop():
        z = torch.sigmoid(F.linear(x, Wz, bz))
        cand = F.linear(x, Wh, bh)
        out = torch.empty(x.shape[0], x.shape[1], h0.shape[1])
        h = h0
        for k in range(x.shape[1]):
            h = torch.lerp(h, cand[:, k], z[:, k])
            out[:, k] = h
        return out
    return {"F.linear + torch.lerp loop": _nograd(torch, loop)}


@program(name="minlstm, normalised gates, state in place, zero start", kind="rnn", src="""
# minLSTM (Feng et al. 2024): f and i from x only, normalised to f / (f + i) and i / (f + i);
# the state s(b, j) is updated in place (a temporary starts at 0), h(t) copies it out
def minlstm(float(T,B,I) x, float(H,I) Wf, float(H,I) Wi, float(H,I) Wh) -> (h) {
  f(t, b, j) +=! x(t, b, i) * Wf(j, i)
  ig(t, b, j) +=! x(t, b, i) * Wi(j, i)
  c(t, b, j) +=! x(t, b, i) * Wh(j, i)
  for t in T {
    s(b, j) = (sigmoid(f(t, b, j)) * s(b, j) + sigmoid(ig(t, b, j)) * c(t, b, j)) / (sigmoid(f(t, b, j)) + sigmoid(ig(t, b, j)))
    h(t, b, j) = s(b, j)
  }
}""", full=dict(T=256, B=16, I=256, H=256), tiny=dict(T=4, B=3, I=5, H=3),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["H"], s["I"]), _w(r, s["H"], s["I"]), _w(r, s["H"], s["I"])])
def _minlstm(torch, a, t, s):
    F = torch.nn.functional
    x, Wf, Wi, Wh = t

    def loop():
        f = torch.sigmoid(F.linear(x, Wf))
        i = torch.sigmoid(F.linear(x, Wi))
        den = f + i
        f, i = f / den, i / den
        c = F.linear(x, Wh)
        out = torch.empty_like(c)
        h = torch.zeros_like(c[0])
        for k in range(x.shape[0]):
            h = torch.addcmul(i[k] * c[k], f[k], h)
            out[k] = h
        return out
    return {"F.linear + torch loop": _nograd(torch, loop)}


@program(name="2-layer elman, variational dropout mask between layers (input)", kind="rnn", src="""
# two stacked Elman layers (tanh, (out,in) weights, a bias each), zero initial states; the dropout mask
# m(b, j) (0 or 1/(1-p)) is drawn outside, the same at every step, and multiplies layer 1's output
def elman2(float(T,B,I) x, float(B,H) m, float(H,I) W1, float(H,H) U1, float(H) b1,
           float(H,H) W2, float(H,H) U2, float(H) b2) -> (y) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W1(j, i)
    if t > 0 { a(b, j) += h1(t - 1, b, k) * U1(j, k) }
    h1(t, b, j) = tanh(a(b, j) + b1(j))
    d(b, k) = h1(t, b, k) * m(b, k)
    c(b, j) +=! d(b, k) * W2(j, k)
    if t > 0 { c(b, j) += y(t - 1, b, k) * U2(j, k) }
    y(t, b, j) = tanh(c(b, j) + b2(j))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]),
                         ((r.random((s["B"], s["H"])) > 0.25) / 0.75).astype(np.float32),
                         _w(r, s["H"], s["I"]), _w(r, s["H"], s["H"]), _w(r, s["H"]),
                         _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]), _w(r, s["H"])])
def _elman2(torch, a, t, s):
    I, H = s["I"], s["H"]
    nets = []
    for W, U, b, n_in in ((a[2], a[3], a[4], I), (a[5], a[6], a[7], H)):
        net = torch.nn.RNN(n_in, H)
        _copy(torch, net.weight_ih_l0, W)
        _copy(torch, net.weight_hh_l0, U)
        _copy(torch, net.bias_ih_l0, b)
        _copy(torch, net.bias_hh_l0, np.zeros(H, np.float32))
        nets.append(net)
    x, m = t[0], t[1]
    return {"nn.RNN x2 + mask": _nograd(torch, lambda: nets[1](nets[0](x)[0] * m)[0])}


@program(name="rnn-t prediction network (blank prepended by a select, lstm, projection)", kind="rnn", src="""
# RNN-T predictor: labels y(b, u) with the blank (id 0) prepended, embedded, an LSTM with PyTorch's (4H,E)
# weights and two biases, batch-first, then a linear projection to the joint size J; U+1 outputs
def predictor(int32(B,U) y, float(V,E) emb, float(4*H,E) Wih, float(4*H,H) Whh, float(4*H) bih, float(4*H) bhh,
              float(J,H) Wp, float(J) bp) -> (out) {
  for u in 0:U+1 {
    g(b, r) +=! emb(u > 0 ? y(b, u - 1) : 0, e) * Wih(r, e)
    if u > 0 { g(b, r) += h(b, u - 1, k) * Whh(r, k) }
    g(b, r) = g(b, r) + bih(r) + bhh(r)
    if u == 0 { c(b, j) = sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H }
    else      { c(b, j) = sigmoid(g(b, H + j)) * c(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H }
    h(b, u, j) = sigmoid(g(b, 3 * H + j)) * tanh(c(b, j)) where j in 0:H
  }
  out(b, u, o) +=! h(b, u, j) * Wp(o, j)
  out(b, u, o) = out(b, u, o) + bp(o)
}""", full=dict(B=16, U=64, V=1000, E=256, H=320, J=512), tiny=dict(B=2, U=3, V=7, E=3, H=5, J=3),
    inputs=lambda r, s: [r.integers(1, s["V"], (s["B"], s["U"])).astype(np.int32), _n(r, s["V"], s["E"]),
                         _w(r, 4 * s["H"], s["E"]), _w(r, 4 * s["H"], s["H"]), _w(r, 4 * s["H"]), _w(r, 4 * s["H"]),
                         _w(r, s["J"], s["H"]), _w(r, s["J"])])
def _predictor(torch, a, t, s):
    F = torch.nn.functional
    net = torch.nn.LSTM(s["E"], s["H"], batch_first=True)
    for name, arr in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), a[2:6]):
        _copy(torch, getattr(net, name), arr)
    y, emb, Wp, bp = t[0], t[1], t[6], t[7]
    ids = torch.cat([torch.zeros(y.shape[0], 1, dtype=torch.long), y.long()], 1)
    return {"F.embedding + nn.LSTM + F.linear": _nograd(torch, lambda: F.linear(net(F.embedding(ids, emb))[0], Wp, bp))}


@program(name="bidirectional gru batch-first, direction as an index dim, (B,T,2H) output", kind="rnn", src="""
# bidirectional GRU, batch-first, PyTorch's (3H,in) weights stacked by direction W(d, 3H, in); the backward
# direction (d = 1) reads x(b, T-1-t) through a select on d; states hs(d, b, j) in place, set to zero first;
# the output is nn.GRU's (B, T, 2H): forward in columns 0:H, backward in H:2H at T-1-t
def bigru(float(B,T,I) x, float(2,3*H,I) Wih, float(2,3*H,H) Whh, float(2,3*H) bih, float(2,3*H) bhh) -> (y) {
  hs(d, b, j) = 0.0 where d in 0:2, b in 0:B, j in 0:H
  for t in T {
    gi(d, b, r) +=! (d == 0 ? x(b, t, i) : x(b, T - 1 - t, i)) * Wih(d, r, i)
    gh(d, b, r) +=! hs(d, b, k) * Whh(d, r, k)
    rg(d, b, j) = sigmoid(gi(d, b, j) + bih(d, j) + gh(d, b, j) + bhh(d, j)) where j in 0:H
    zg(d, b, j) = sigmoid(gi(d, b, H + j) + bih(d, H + j) + gh(d, b, H + j) + bhh(d, H + j)) where j in 0:H
    ng(d, b, j) = tanh(gi(d, b, 2 * H + j) + bih(d, 2 * H + j) + rg(d, b, j) * (gh(d, b, 2 * H + j) + bhh(d, 2 * H + j))) where j in 0:H
    hs(d, b, j) = (1 - zg(d, b, j)) * ng(d, b, j) + zg(d, b, j) * hs(d, b, j)
    y(b, t, j) = hs(0, b, j)
    y(b, T - 1 - t, H + j) = hs(1, b, j)
  }
}""", full=dict(B=32, T=64, I=256, H=256), tiny=dict(B=2, T=4, I=5, H=3),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _w(r, 2, 3 * s["H"], s["I"]), _w(r, 2, 3 * s["H"], s["H"]),
                         _w(r, 2, 3 * s["H"]), _w(r, 2, 3 * s["H"])])
def _bigru_batch_first(torch, a, t, s):
    net = torch.nn.GRU(s["I"], s["H"], batch_first=True, bidirectional=True)
    for d, suf in enumerate(("", "_reverse")):
        for name, arr in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), a[1:5]):
            _copy(torch, getattr(net, name + suf), arr[d])
    return {"nn.GRU(bidirectional, batch_first)": _nograd(torch, lambda: net(t[0])[0])}


# ---------------------------------------------------------------- attention

@program(name="sliding-window attention with a per-head relative bias table rb(n, 2W+1)", kind="attention", src="""
# local attention: query i attends to keys i - W .. i + W only, plus a learned bias per head and offset, rb(n, w);
# the scores are kept per offset w (2W+1 of them, not T), keys outside the sequence masked with selects
def local_attn(float(B,N,T,D) q, float(B,N,T,D) k, float(B,N,T,D) v, float(N,2*W+1) rb) -> (o) {
  s(b, n, i, w) +=! (i + w - W >= 0 && i + w - W < T ? q(b, n, i, d) * k(b, n, i + w - W, d) : 0) where i in 0:T, w in 0:2*W+1
  s(b, n, i, w) = s(b, n, i, w) * rsqrt(float(D)) + rb(n, w)
  mx(b, n, i) max=! (i + w - W >= 0 && i + w - W < T ? s(b, n, i, w) : -inf)
  e(b, n, i, w) = (i + w - W >= 0 && i + w - W < T ? exp(s(b, n, i, w) - mx(b, n, i)) : 0)
  z(b, n, i) +=! e(b, n, i, w)
  o(b, n, i, d) +=! e(b, n, i, w) * (i + w - W >= 0 && i + w - W < T ? v(b, n, i + w - W, d) : 0) where i in 0:T, w in 0:2*W+1
  o(b, n, i, d) = o(b, n, i, d) / z(b, n, i)
}""", full=dict(B=2, N=8, T=512, D=64, W=32), tiny=dict(B=1, N=2, T=7, D=3, W=2),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["T"], s["D"]) for _ in range(3)] + [_n(r, s["N"], 2 * s["W"] + 1)])
def _local_attn(torch, a, t, s):
    F = torch.nn.functional
    T, W = s["T"], s["W"]
    pos = torch.arange(T)
    off = pos[None, :] - pos[:, None]
    band = off.abs() <= W
    idx = (off + W).clamp(0, 2 * W)

    def run():
        bias = t[3][:, idx].masked_fill(~band, -torch.inf)
        return F.scaled_dot_product_attention(t[0], t[1], t[2], attn_mask=bias)
    return {"sdpa(band + bias mask)": _nograd(torch, run)}


@program(name="multi-query cross-attention, projections (out,in), Wq(h, d, c), Wo(c, h, d)", kind="attention", src="""
# multi-query cross-attention: H query heads from the decoder states x, one shared key/value head from the
# encoder memory; PyTorch (out,in) weights, the query and output weights indexed by head
def mqa(float(B,L,C) x, float(B,S,C) mem, float(H,D,C) Wq, float(D,C) Wk, float(D,C) Wv, float(C,H,D) Wo) -> (y) {
  q(b, h, i, d) +=! x(b, i, c) * Wq(h, d, c)
  k(b, j, d) +=! mem(b, j, c) * Wk(d, c)
  v(b, j, d) +=! mem(b, j, c) * Wv(d, c)
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, j, d)
  mx(b, h, i) max=! s(b, h, i, j)
  e(b, h, i, j) = exp((s(b, h, i, j) - mx(b, h, i)) / sqrt(float(D)))
  z(b, h, i) +=! e(b, h, i, j)
  att(b, h, i, d) +=! e(b, h, i, j) * v(b, j, d)
  y(b, i, o) +=! att(b, h, i, d) / z(b, h, i) * Wo(o, h, d)
}""", full=dict(B=4, L=128, S=256, C=512, H=8, D=64), tiny=dict(B=2, L=3, S=5, C=4, H=3, D=2),
    inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _n(r, s["B"], s["S"], s["C"]), _w(r, s["H"], s["D"], s["C"]),
                         _w(r, s["D"], s["C"]), _w(r, s["D"], s["C"]), _w(r, s["C"], s["H"], s["D"])])
def _mqa(torch, a, t, s):
    F = torch.nn.functional
    B, L, C, H, D = s["B"], s["L"], s["C"], s["H"], s["D"]
    x, mem, Wq, Wk, Wv, Wo = t
    Wq2, Wo2 = Wq.reshape(H * D, C), Wo.reshape(C, H * D)

    def run():
        q = F.linear(x, Wq2).view(B, L, H, D).transpose(1, 2)
        k = F.linear(mem, Wk)[:, None].expand(B, H, -1, D)
        v = F.linear(mem, Wv)[:, None].expand(B, H, -1, D)
        o = F.scaled_dot_product_attention(q, k, v)
        return F.linear(o.transpose(1, 2).reshape(B, L, H * D), Wo2)
    return {"F.linear + sdpa (expanded kv)": _nograd(torch, run)}


# ---------------------------------------------------------------- 1-D convolutions

@program(name="conv_transpose1d stride 2, padding 1, output_padding 1, bias (where p = ...)", kind="conv", src="""
# transposed convolution that doubles the length: stride 2, K = 3, padding 1, output_padding 1 (L_out = 2L);
# input position (t + 1 - k) / 2 when t + 1 - k is even, bound to p with a where clause
def upconv(float(B,C,L) x, float(C,O,3) w, float(O) bias) -> (y) {
  y(b, o, t) +=! (p % 2 == 0 && p >= 0 && p / 2 < L ? x(b, c, p / 2) : 0) * w(c, o, k) where p = t + 1 - k, t in 0:2*L, k in 0:3
  y(b, o, t) = y(b, o, t) + bias(o)
}""", full=dict(B=16, C=128, L=512, O=64), tiny=dict(B=2, C=3, L=5, O=3),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["O"], 3), _w(r, s["O"])])
def _upconv(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv_transpose1d(stride=2, padding=1, output_padding=1)":
            _nograd(torch, lambda: F.conv_transpose1d(t[0], t[1], t[2], stride=2, padding=1, output_padding=1))}


@program(name="causal grouped conv1d, groups as an index dim y(b, g, o, t), + bias", kind="conv", src="""
# causal convolution with G groups (left padding K-1 as a select); PyTorch's (O, C/G, K) weight viewed as
# (G, O/G, C/G, K), output (B, G, O/G, L); group g reads input channels g * CG .. g * CG + CG - 1
def gcausal(float(B,C,L) x, float(G,OG,CG,K) w, float(G,OG) bias) -> (y) {
  y(b, g, o, t) +=! (t + k - K + 1 >= 0 ? x(b, g * CG + c, t + k - K + 1) : 0) * w(g, o, c, k) where t in 0:L, k in 0:K
  y(b, g, o, t) = y(b, g, o, t) + bias(g, o)
}""", full=dict(B=16, C=256, L=512, G=4, OG=64, CG=64, K=4), tiny=dict(B=2, C=6, L=7, G=2, OG=3, CG=3, K=3),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["G"], s["OG"], s["CG"], s["K"]), _w(r, s["G"], s["OG"])])
def _gcausal(torch, a, t, s):
    F = torch.nn.functional
    B, L, G, OG, CG, K = s["B"], s["L"], s["G"], s["OG"], s["CG"], s["K"]
    w = t[1].reshape(G * OG, CG, K)
    bias = t[2].reshape(-1)
    return {"F.conv1d(F.pad, groups)": _nograd(torch, lambda: F.conv1d(F.pad(t[0], (K - 1, 0)), w, bias, groups=G).view(B, G, OG, L))}


# ---------------------------------------------------------------- norms

@program(name="layer norm without affine, then linear (out,in) + bias", kind="norm", src="""
# layer norm with elementwise_affine=False (mean, variance, rsqrt per row), then a linear layer, PyTorch's (out,in)
def ln_linear(float(N,C) x, float(O,C) W, float(O) bias) -> (y) {
  mu(n) +=! x(n, c)
  mu(n) = mu(n) / C
  var(n) +=! (x(n, c) - mu(n)) * (x(n, c) - mu(n))
  rs(n) = rsqrt(var(n) / C + 1e-5)
  y(n, o) +=! (x(n, c) - mu(n)) * rs(n) * W(o, c)
  y(n, o) = y(n, o) + bias(o)
}""", full=dict(N=1024, C=512, O=1024), tiny=dict(N=3, C=5, O=4),
    inputs=lambda r, s: [_n(r, s["N"], s["C"]) * 2 + 0.5, _w(r, s["O"], s["C"]), _w(r, s["O"])])
def _ln_linear(torch, a, t, s):
    F = torch.nn.functional
    return {"F.layer_norm + F.linear": _nograd(torch, lambda: F.linear(F.layer_norm(t[0], (s["C"],)), t[1], t[2]))}


# ---------------------------------------------------------------- losses

@program(name="cosine embedding loss (margin 0.2, int labels +-1)", kind="loss", src="""
# F.cosine_embedding_loss: 1 - cos for similar pairs (y = 1), max(0, cos - margin) for dissimilar ones (y = -1)
def cos_emb(float(N,D) a, float(N,D) p, int32(N) y) -> (loss) {
  dot(n) +=! a(n, d) * p(n, d)
  na(n) +=! a(n, d) * a(n, d)
  nb(n) +=! p(n, d) * p(n, d)
  cs(n) = dot(n) / sqrt((na(n) + 1e-12) * (nb(n) + 1e-12))
  loss +=! (y(n) == 1 ? 1 - cs(n) : fmax(cs(n) - 0.2, 0)) / N
}""", full=dict(N=8192, D=512), tiny=dict(N=5, D=3),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["N"], s["D"]),
                         (r.integers(0, 2, s["N"]) * 2 - 1).astype(np.int32)])
def _cos_emb(torch, a, t, s):
    F = torch.nn.functional
    y = t[2].float()
    return {"F.cosine_embedding_loss": _nograd(torch, lambda: F.cosine_embedding_loss(t[0], t[1], y, margin=0.2))}


@program(name="poisson nll (log input, full: stirling term as a select, where binding)", kind="loss", src="""
# F.poisson_nll_loss(log_input=True, full=True): exp(x) - k x, plus Stirling's k log k - k + log(2 pi k) / 2 where k > 1
def pnll(float(N,C) x, float(N,C) target) -> (loss) {
  loss +=! (exp(x(n, c)) - kk * x(n, c) + (kk > 1 ? kk * log(kk) - kk + 0.5 * log(2 * 3.14159265 * kk) : 0)) / (N * C) where kk = target(n, c)
}""", full=dict(N=4096, C=1024), tiny=dict(N=3, C=5),
    inputs=lambda r, s: [(_n(r, s["N"], s["C"]) * 0.5), r.poisson(2.0, (s["N"], s["C"])).astype(np.float32)])
def _pnll(torch, a, t, s):
    F = torch.nn.functional
    return {"F.poisson_nll_loss(full)": _nograd(torch, lambda: F.poisson_nll_loss(t[0], t[1], log_input=True, full=True))}


# ---------------------------------------------------------------- decoders

@program(name="gumbel-max sampling decoder with temperature (gru cell, token fed back)", kind="rnn", src="""
# sampling without a beam: a GRU cell (PyTorch's (3H,E), (3H,H) weights) fed the previous token's embedding
# (start(b) at step 0, a select in the index), next token = argmax(logit / temp + gumbel noise); the noise is an input
def sample(float(V,E) emb, float(3*H,E) Wih, float(3*H,H) Whh, float(3*H) bih, float(3*H) bhh,
           float(V,H) Wo, float(B,H) h0, int32(B) start, float(S,B,V) gumbel, float temp) -> (tok) {
  hs(b, j) = h0(b, j)
  for t in S {
    gi(b, r) +=! emb(t == 0 ? start(b) : tok(t - 1, b), e) * Wih(r, e)
    gi(b, r) = gi(b, r) + bih(r)
    gh(b, r) +=! hs(b, k) * Whh(r, k)
    gh(b, r) = gh(b, r) + bhh(r)
    rr(b, j) = sigmoid(gi(b, j) + gh(b, j)) where j in 0:H
    zz(b, j) = sigmoid(gi(b, H + j) + gh(b, H + j)) where j in 0:H
    nn(b, j) = tanh(gi(b, 2 * H + j) + rr(b, j) * gh(b, 2 * H + j)) where j in 0:H
    hs(b, j) = (1 - zz(b, j)) * nn(b, j) + zz(b, j) * hs(b, j)
    logit(b, v) +=! hs(b, j) * Wo(v, j)
    tok(t, b) argmax=! logit(b, v) / temp + gumbel(t, b, v)
  }
}""", full=dict(S=32, B=16, E=256, H=256, V=4000), tiny=dict(S=4, B=2, E=3, H=5, V=7),
    inputs=lambda r, s: [_n(r, s["V"], s["E"]), _w(r, 3 * s["H"], s["E"]), _w(r, 3 * s["H"], s["H"]),
                         _w(r, 3 * s["H"]), _w(r, 3 * s["H"]), _w(r, s["V"], s["H"]) * 3, _n(r, s["B"], s["H"]),
                         r.integers(0, s["V"], s["B"]).astype(np.int32),
                         (-np.log(-np.log(r.random((s["S"], s["B"], s["V"])) * 0.999 + 0.0005))).astype(np.float32),
                         np.array(0.7, np.float32)])
def _sample(torch, a, t, s):
    F = torch.nn.functional
    emb, Wih, Whh, bih, bhh, Wo, h0, start, gumbel, temp = t
    cell = torch.nn.GRUCell(s["E"], s["H"])
    for name, arr in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), a[1:5]):
        _copy(torch, getattr(cell, name), arr)
    T = float(a[9])

    def loop():
        out = torch.empty(s["S"], h0.shape[0], dtype=torch.int32)
        h, tok = h0, start.long()
        for k in range(s["S"]):
            h = cell(F.embedding(tok, emb), h)
            tok = (F.linear(h, Wo) / T + gumbel[k]).argmax(1)
            out[k] = tok
        return out
    return {"nn.GRUCell loop": _nograd(torch, loop)}


@program(name="pointer network greedy decoding (additive scores, used-mask updated in place)", kind="rnn", src="""
# pointer network (Vinyals et al. 2015), greedy: an Elman decoder ((out,in) weights) fed the encoder vector of its
# previous pick (x0 at step 0), additive scores vv . tanh(W1 enc(n) + W2 h) over the N inputs, inputs already
# picked masked out with a select on used(b, n), a 0/1 map updated in place; S picks (a free size, S <= N)
def pointer(float(B,N,H) enc, float(H,H) W1, float(H,H) W2, float(H) vv, float(H,H) Wx, float(H,H) Wh,
            float(B,H) h0, float(B,H) x0) -> (ptr) {
  ke(b, n, j) +=! enc(b, n, k) * W1(j, k)
  hs(b, j) = h0(b, j)
  for t in S {
    a(b, j) +=! hs(b, k) * Wh(j, k)
    a(b, j) += (t == 0 ? x0(b, k) : enc(b, ptr(t - 1, b), k)) * Wx(j, k)
    hs(b, j) = tanh(a(b, j))
    q(b, j) +=! hs(b, k) * W2(j, k)
    u(b, n) +=! vv(j) * tanh(ke(b, n, j) + q(b, j))
    ptr(t, b) argmax=! used(b, n) > 0 ? -inf : u(b, n)
    used(b, n) = used(b, n) + (n == ptr(t, b) ? 1.0 : 0.0) where n in 0:N
  }
}""", full=dict(B=32, N=50, H=256, S=20), tiny=dict(B=2, N=5, H=3, S=4), free=("S",),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["H"]), _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]),
                         _w(r, s["H"]) * 3, _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]), _n(r, s["B"], s["H"]),
                         _n(r, s["B"], s["H"])])
def _pointer(torch, a, t, s):
    F = torch.nn.functional
    enc, W1, W2, vv, Wx, Wh, h0, x0 = t
    B = s["B"]
    rows = torch.arange(B)

    def loop():
        ke = F.linear(enc, W1)
        out = torch.empty(s["S"], B, dtype=torch.int32)
        used = torch.zeros(B, s["N"], dtype=torch.bool)
        h, x = h0, x0
        for k in range(s["S"]):
            h = torch.tanh(F.linear(h, Wh) + F.linear(x, Wx))
            u = torch.tanh(ke + F.linear(h, W2)[:, None]) @ vv
            p = u.masked_fill(used, -torch.inf).argmax(1)
            out[k] = p
            used[rows, p] = True
            x = enc[rows, p]
        return out
    return {"torch loop (masked_fill + argmax)": _nograd(torch, loop)}


# ------------------------------------------------ session 44, second batch: layouts, key padding, div/mod taps, norms, decoders

# ---------------------------------------------------------------- recurrent networks

@program(name="lstm time-major in, batch-first out y(b, t, j), state in place, two biases (4H,in)", kind="rnn", src="""
# nn.LSTM run on a time-major (T, B, I) sequence, its output wanted batch-first (B, T, H) by the next layer:
# the states hs, cs are set from h0, c0 before the loop and updated in place; y is written at (b, t, j)
def lstm_bf(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4*H,I) Wih, float(4*H,H) Whh,
            float(4*H) bih, float(4*H) bhh) -> (y) {
  hs(b, j) = h0(b, j)
  cs(b, j) = c0(b, j)
  for t in T {
    g(b, r) +=! x(t, b, i) * Wih(r, i)
    g(b, r) += hs(b, k) * Whh(r, k)
    g(b, r) = g(b, r) + bih(r) + bhh(r)
    cs(b, j) = sigmoid(g(b, H + j)) * cs(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H
    hs(b, j) = sigmoid(g(b, 3 * H + j)) * tanh(cs(b, j)) where j in 0:H
    y(b, t, j) = hs(b, j)
  }
}""", full=dict(T=64, B=16, I=256, H=256), tiny=dict(T=5, B=3, I=7, H=5),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]), _n(r, s["B"], s["H"]),
                         _w(r, 4 * s["H"], s["I"]), _w(r, 4 * s["H"], s["H"]), _w(r, 4 * s["H"]), _w(r, 4 * s["H"])])
def _lstm_tm_bf(torch, a, t, s):
    net = torch.nn.LSTM(s["I"], s["H"])
    for name, arr in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), a[3:7]):
        _copy(torch, getattr(net, name), arr)
    x, h0, c0 = t[0], t[1][None], t[2][None]
    return {"nn.LSTM + transpose(0, 1)": _nograd(torch, lambda: net(x, (h0, c0))[0].transpose(0, 1))}


@program(name="teacher-forced gru decoder (gold tokens from an int32 tensor, int32 bos scalar), logits after the loop",
         kind="rnn", src="""
# teacher forcing: the input at step t is the embedding of the gold token tgt(t - 1, b), the scalar bos at t = 0;
# an nn.GRU step (PyTorch's (3H,E), (3H,H) weights, b_hn inside r) from the encoder state h0; logits for all steps
def tf_gru(int32(T,B) tgt, int32 bos, float(V,E) emb, float(B,H) h0, float(3*H,E) Wih, float(3*H,H) Whh,
           float(3*H) bih, float(3*H) bhh, float(V,H) Wo, float(V) bo) -> (logit) {
  for t in T {
    if t == 0 { gi(b, r) +=! emb(bos, e) * Wih(r, e) where b in 0:B }
    else      { gi(b, r) +=! emb(tgt(t - 1, b), e) * Wih(r, e) }
    if t == 0 { gh(b, r) +=! h0(b, k) * Whh(r, k) }
    else      { gh(b, r) +=! h(t - 1, b, k) * Whh(r, k) }
    rg(b, j) = sigmoid(gi(b, j) + bih(j) + gh(b, j) + bhh(j)) where j in 0:H
    zg(b, j) = sigmoid(gi(b, H + j) + bih(H + j) + gh(b, H + j) + bhh(H + j)) where j in 0:H
    ng(b, j) = tanh(gi(b, 2 * H + j) + bih(2 * H + j) + rg(b, j) * (gh(b, 2 * H + j) + bhh(2 * H + j))) where j in 0:H
    if t == 0 { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h0(b, j) }
    else      { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h(t - 1, b, j) }
  }
  logit(t, b, v) +=! h(t, b, j) * Wo(v, j)
  logit(t, b, v) = logit(t, b, v) + bo(v)
}""", full=dict(T=32, B=32, E=256, H=256, V=1000), tiny=dict(T=5, B=3, E=7, H=5, V=9),
    inputs=lambda r, s: [r.integers(0, s["V"], (s["T"], s["B"])).astype(np.int32), np.array(1, np.int32),
                         _n(r, s["V"], s["E"]), _n(r, s["B"], s["H"]), _w(r, 3 * s["H"], s["E"]),
                         _w(r, 3 * s["H"], s["H"]), _w(r, 3 * s["H"]), _w(r, 3 * s["H"]), _w(r, s["V"], s["H"]),
                         _w(r, s["V"])])
def _tf_gru(torch, a, t, s):
    F = torch.nn.functional
    tgt, bos, emb, h0, Wih, Whh, bih, bhh, Wo, bo = t
    net = torch.nn.GRU(s["E"], s["H"])
    for name, arr in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), a[4:8]):
        _copy(torch, getattr(net, name), arr)
    tg = tgt.long()
    first = torch.full((1, s["B"]), int(a[1]), dtype=torch.long)

    def run():
        inp = F.embedding(torch.cat([first, tg[:-1]]), emb)
        return F.linear(net(inp, h0[None])[0], Wo, bo)
    return {"F.embedding + nn.GRU + F.linear": _nograd(torch, run)}


BILSTM2 = """
# 2-layer bidirectional LSTM (nn.LSTM(num_layers=2, bidirectional=True)), PyTorch's (4H,in) weights stacked by
# direction; layer 0 runs to the end (its backward half written reversed at T-1-t, columns H..2H), then layer 1
# reads both halves; cell states in place, the bias folded into the gates, zero initial state
def bilstm2(float(T,B,I) x, float(2,4*H,I) W0, float(2,4*H,H) U0, float(2,4*H) b0,
            float(2,4*H,2*H) W1, float(2,4*H,H) U1, float(2,4*H) b1) -> (y) {
  for t in T {
    gf(b, r) +=! x(t, b, i) * W0(0, r, i)
    gb(b, r) +=! x(T - 1 - t, b, i) * W0(1, r, i)
    if t > 0 {
      gf(b, r) += ya(t - 1, b, k) * U0(0, r, k)
      gb(b, r) += ya(T - t, b, H + k) * U0(1, r, k)
    }
    gf(b, r) = gf(b, r) + b0(0, r)
    gb(b, r) = gb(b, r) + b0(1, r)
    if t == 0 {
      cf(b, j) = sigmoid(gf(b, j)) * tanh(gf(b, 2 * H + j)) where j in 0:H
      cb(b, j) = sigmoid(gb(b, j)) * tanh(gb(b, 2 * H + j)) where j in 0:H
    } else {
      cf(b, j) = sigmoid(gf(b, H + j)) * cf(b, j) + sigmoid(gf(b, j)) * tanh(gf(b, 2 * H + j)) where j in 0:H
      cb(b, j) = sigmoid(gb(b, H + j)) * cb(b, j) + sigmoid(gb(b, j)) * tanh(gb(b, 2 * H + j)) where j in 0:H
    }
    ya(t, b, j) = sigmoid(gf(b, 3 * H + j)) * tanh(cf(b, j)) where j in 0:H
    ya(T - 1 - t, b, H + j) = sigmoid(gb(b, 3 * H + j)) * tanh(cb(b, j)) where j in 0:H
  }
  for t in T {
    qf(b, r) +=! ya(t, b, i) * W1(0, r, i)
    qb(b, r) +=! ya(T - 1 - t, b, i) * W1(1, r, i)
    if t > 0 {
      qf(b, r) += y(t - 1, b, k) * U1(0, r, k)
      qb(b, r) += y(T - t, b, H + k) * U1(1, r, k)
    }
    qf(b, r) = qf(b, r) + b1(0, r)
    qb(b, r) = qb(b, r) + b1(1, r)
    if t == 0 {
      df(b, j) = sigmoid(qf(b, j)) * tanh(qf(b, 2 * H + j)) where j in 0:H
      db(b, j) = sigmoid(qb(b, j)) * tanh(qb(b, 2 * H + j)) where j in 0:H
    } else {
      df(b, j) = sigmoid(qf(b, H + j)) * df(b, j) + sigmoid(qf(b, j)) * tanh(qf(b, 2 * H + j)) where j in 0:H
      db(b, j) = sigmoid(qb(b, H + j)) * db(b, j) + sigmoid(qb(b, j)) * tanh(qb(b, 2 * H + j)) where j in 0:H
    }
    y(t, b, j) = sigmoid(qf(b, 3 * H + j)) * tanh(df(b, j)) where j in 0:H
    y(T - 1 - t, b, H + j) = sigmoid(qb(b, 3 * H + j)) * tanh(db(b, j)) where j in 0:H
  }
}"""


@program(name="stacked bidirectional lstm L=2, (2,4H,in) weights by direction, reversed writes", kind="rnn",
         src=BILSTM2, full=dict(T=32, B=16, I=128, H=128), tiny=dict(T=5, B=3, I=7, H=5),
         inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, 2, 4 * s["H"], s["I"]), _w(r, 2, 4 * s["H"], s["H"]),
                              _w(r, 2, 4 * s["H"]), _w(r, 2, 4 * s["H"], 2 * s["H"]), _w(r, 2, 4 * s["H"], s["H"]),
                              _w(r, 2, 4 * s["H"])])
def _bilstm2(torch, a, t, s):
    H = s["H"]
    net = torch.nn.LSTM(s["I"], H, num_layers=2, bidirectional=True)
    for l, (W, U, b) in enumerate([a[1:4], a[4:7]]):
        for d, suf in enumerate(("", "_reverse")):
            _copy(torch, getattr(net, f"weight_ih_l{l}{suf}"), W[d])
            _copy(torch, getattr(net, f"weight_hh_l{l}{suf}"), U[d])
            _copy(torch, getattr(net, f"bias_ih_l{l}{suf}"), b[d])
            _copy(torch, getattr(net, f"bias_hh_l{l}{suf}"), np.zeros(4 * H, np.float32))
    return {"nn.LSTM(num_layers=2, bidirectional)": _nograd(torch, lambda: net(t[0])[0])}


# ---------------------------------------------------------------- attention

@program(name="causal self-attention, scores heads-last s(b, i, j, h), q/k/v (B,T,NH,D)", kind="attention", src="""
# causal self-attention on q, k, v as a linear layer's output viewed (B, T, NH, D), no transpose to (B, NH, T, D):
# the scores and weights keep the heads last, s(b, i, j, h); the causal mask is a select, plain softmax
def causal_hl(float(B,T,NH,D) q, float(B,T,NH,D) k, float(B,T,NH,D) v) -> (o) {
  s(b, i, j, h) +=! q(b, i, h, d) * k(b, j, h, d)
  mx(b, i, h) max=! (j <= i ? s(b, i, j, h) : -inf)
  p(b, i, j, h) = j <= i ? exp((s(b, i, j, h) - mx(b, i, h)) * rsqrt(float(D))) : 0
  z(b, i, h) +=! p(b, i, j, h)
  o(b, i, h, d) +=! p(b, i, j, h) * v(b, j, h, d)
  o(b, i, h, d) = o(b, i, h, d) / z(b, i, h)
}""", full=dict(B=4, T=256, NH=8, D=64), tiny=dict(B=1, T=7, NH=3, D=5),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["NH"], s["D"]) for _ in range(3)])
def _causal_hl(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = (x.transpose(1, 2) for x in t)
    return {"sdpa(is_causal) on transposed views": _nograd(
        torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2))}


@program(name="nn.MultiheadAttention cross-attention, time-major, key padding from int32 lengths (-inf select)",
         kind="attention", src="""
# nn.MultiheadAttention(E, NH) as a decoder's cross-attention, time-major (its default): queries (L, B, E), keys =
# values = the encoder memory (S, B, E); key_padding_mask from int32 lengths (key j >= len(b) scores -inf);
# in_proj_weight viewed (3, NH, D, E), in_proj_bias (3, NH, D), out_proj.weight viewed (E, NH, D); heads as index dims
def xattn(float(L,B,E) query, float(S,B,E) mem, int32(B) len, float(3,NH,D,E) Win, float(3,NH,D) bin,
          float(E,NH,D) Wout, float(E) bout) -> (out) {
  q(b, h, i, d) +=! query(i, b, c) * Win(0, h, d, c)
  q(b, h, i, d) = (q(b, h, i, d) + bin(0, h, d)) * rsqrt(float(D))
  kk(b, h, j, d) +=! mem(j, b, c) * Win(1, h, d, c)
  kk(b, h, j, d) = kk(b, h, j, d) + bin(1, h, d)
  vv(b, h, j, d) +=! mem(j, b, c) * Win(2, h, d, c)
  vv(b, h, j, d) = vv(b, h, j, d) + bin(2, h, d)
  sc(b, h, i, j) +=! q(b, h, i, d) * kk(b, h, j, d)
  sc(b, h, i, j) = j < len(b) ? sc(b, h, i, j) : -inf
  mx(b, h, i) max=! sc(b, h, i, j)
  e(b, h, i, j) = exp(sc(b, h, i, j) - mx(b, h, i))
  z(b, h, i) +=! e(b, h, i, j)
  att(i, b, h, d) +=! e(b, h, i, j) * vv(b, h, j, d)
  att(i, b, h, d) = att(i, b, h, d) / z(b, h, i)
  out(i, b, o) +=! att(i, b, h, d) * Wout(o, h, d)
  out(i, b, o) = out(i, b, o) + bout(o)
}""", full=dict(L=64, S=128, B=8, E=256, NH=8, D=32), tiny=dict(L=3, S=5, B=3, E=9, NH=3, D=3),
    inputs=lambda r, s: [_n(r, s["L"], s["B"], s["E"]), _n(r, s["S"], s["B"], s["E"]),
                         r.integers(1, s["S"] + 1, s["B"]).astype(np.int32),
                         _w(r, 3, s["NH"], s["D"], s["E"]), _w(r, 3, s["NH"], s["D"]),
                         _w(r, s["E"], s["NH"], s["D"]), _w(r, s["E"])])
def _xattn(torch, a, t, s):
    E, S = s["E"], s["S"]
    mha = torch.nn.MultiheadAttention(E, s["NH"])
    _copy(torch, mha.in_proj_weight, a[3].reshape(3 * E, E))
    _copy(torch, mha.in_proj_bias, a[4].reshape(-1))
    _copy(torch, mha.out_proj.weight, a[5].reshape(E, E))
    _copy(torch, mha.out_proj.bias, a[6])
    mha.eval()
    pad = torch.arange(S)[None, :] >= t[2][:, None].long()
    return {"nn.MultiheadAttention(key_padding_mask)": _nograd(
        torch, lambda: mha(t[0], t[1], t[1], key_padding_mask=pad, need_weights=False)[0])}


# ---------------------------------------------------------------- convolutions

@program(name="depthwise-separable conv1d (K=5 same, (C,1,5) select, then pointwise (O,C,1) + bias)", kind="conv",
         src="""
# depthwise-separable 1-D convolution (QuartzNet / MobileNet style): a depthwise K=5 'same' convolution with
# PyTorch's (C, 1, 5) weight, padding as a select, then a pointwise (O, C, 1) convolution with bias
def dsconv(float(B,C,L) x, float(C,1,5) wd, float(O,C,1) wp, float(O) bias) -> (y) {
  dw(b, c, l) +=! (l + k - 2 >= 0 && l + k - 2 < L ? x(b, c, l + k - 2) : 0) * wd(c, 0, k) where l in 0:L, k in 0:5
  y(b, o, l) +=! dw(b, c, l) * wp(o, c, 0)
  y(b, o, l) = y(b, o, l) + bias(o)
}""", full=dict(B=16, C=128, L=512, O=128), tiny=dict(B=3, C=5, L=7, O=3),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], 1, 5), _w(r, s["O"], s["C"], 1), _w(r, s["O"])])
def _dsconv(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(groups=C) + F.conv1d": _nograd(
        torch, lambda: F.conv1d(F.conv1d(t[0], t[1], padding=2, groups=s["C"]), t[2], t[3]))}


@program(name="conv1d stride 2 padding 1 K=3 + bias + relu, input position as a where binding", kind="conv", src="""
# nn.Conv1d(C, O, 3, stride=2, padding=1) then ReLU: output l reads input p = 2 l + k - 1 (bound with where),
# zero outside 0..L-1; L_out = (L + 1) / 2 as PyTorch's floor((L + 2 - 3) / 2) + 1
def s2conv(float(B,C,L) x, float(O,C,3) w, float(O) bias) -> (y) {
  y(b, o, l) +=! (p >= 0 && p < L ? x(b, c, p) : 0) * w(o, c, k) where p = 2 * l + k - 1, l in 0:(L + 1) / 2, k in 0:3
  y(b, o, l) = fmax(y(b, o, l) + bias(o), 0)
}""", full=dict(B=8, C=128, L=1024, O=128), tiny=dict(B=3, C=5, L=7, O=3),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["O"], s["C"], 3), _w(r, s["O"])])
def _s2conv(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv1d(stride=2, padding=1) + relu": _nograd(
        torch, lambda: F.relu(F.conv1d(t[0], t[1], t[2], stride=2, padding=1)))}


@program(name="conv_transpose1d stride 3, K=6, taps by div/mod (t / 3 - m, t % 3 + 3 m) + bias", kind="conv", src="""
# nn.ConvTranspose1d(C, O, 6, stride=3): output t gets the taps k = t % 3 + 3 m (m = 0, 1) from input t / 3 - m,
# written with floor division and remainder instead of a select over all 6 taps; L_out = 3 (L - 1) + 6
def ct3(float(B,C,L) x, float(C,O,6) w, float(O) bias) -> (y) {
  y(b, o, t) +=! (t / 3 - m >= 0 && t / 3 - m < L ? x(b, c, t / 3 - m) : 0) * w(c, o, t % 3 + 3 * m) where t in 0:3*L+3, m in 0:2
  y(b, o, t) = y(b, o, t) + bias(o)
}""", full=dict(B=8, C=128, L=512, O=64), tiny=dict(B=3, C=5, L=7, O=3),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["O"], 6), _w(r, s["O"])])
def _ct3(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv_transpose1d(stride=3)": _nograd(torch, lambda: F.conv_transpose1d(t[0], t[1], t[2], stride=3))}


# ---------------------------------------------------------------- norms

@program(name="batch norm 1d (B,C,L) training: output + running mean/var update (momentum 0.1, unbiased var)",
         kind="norm", src="""
# nn.BatchNorm1d in training mode on (B, C, L): normalise with the batch statistics, and return the updated
# running statistics (momentum 0.1; the running variance takes the unbiased variance, n / (n - 1), n = B L)
def bn1d(float(B,C,L) x, float(C) gamma, float(C) beta, float(C) rmean, float(C) rvar) -> (y, new_mean, new_var) {
  mu(c) +=! x(b, c, l) / (B * L)
  var(c) +=! d * d / (B * L) where d = x(b, c, l) - mu(c)
  y(b, c, l) = (x(b, c, l) - mu(c)) * rsqrt(var(c) + 1e-5) * gamma(c) + beta(c)
  new_mean(c) = 0.9 * rmean(c) + 0.1 * mu(c)
  new_var(c) = 0.9 * rvar(c) + 0.1 * var(c) * (B * L) / (B * L - 1)
}""", full=dict(B=32, C=128, L=512), tiny=dict(B=3, C=5, L=7),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]) * 2 + 1, 1 + _w(r, s["C"]), _w(r, s["C"]), _w(r, s["C"]),
                         1 + np.abs(_w(r, s["C"]))],
    pick=lambda r: np.concatenate([r[0].reshape(-1), r[1], r[2]]))
def _bn1d_running(torch, a, t, s):
    F = torch.nn.functional
    x, g, b, rm0, rv0 = t

    def run():
        rm, rv = rm0.clone(), rv0.clone()   # F.batch_norm updates them in place
        y = F.batch_norm(x, rm, rv, g, b, training=True, momentum=0.1, eps=1e-5)
        return torch.cat([y.reshape(-1), rm, rv])
    return {"F.batch_norm(training) + cat": _nograd(torch, run)}


@program(name="group norm on (B,C,L) without reshape: group c / CG, sums of x and x^2, affine (G,CG)", kind="norm",
         src="""
# F.group_norm(x, G) on (B, C, L) as it is: group g holds channels g CG .. g CG + CG - 1 (C = G CG); statistics
# from the sums of x and x^2; PyTorch's (C,) weight and bias viewed (G, CG), read at (c / CG, c % CG)
def gn(float(B,C,L) x, float(G,CG) gamma, float(G,CG) beta) -> (y) {
  s1(b, g) +=! x(b, g * CG + c, l) where g in 0:G, c in 0:CG, l in 0:L
  s2(b, g) +=! x(b, g * CG + c, l) * x(b, g * CG + c, l) where g in 0:G, c in 0:CG, l in 0:L
  mu(b, g) = s1(b, g) / (CG * L)
  rs(b, g) = rsqrt(s2(b, g) / (CG * L) - mu(b, g) * mu(b, g) + 1e-5)
  y(b, c, l) = (x(b, c, l) - mu(b, c / CG)) * rs(b, c / CG) * gamma(c / CG, c % CG) + beta(c / CG, c % CG)
}""", full=dict(B=16, C=256, L=1024, G=32, CG=8), tiny=dict(B=3, C=15, L=7, G=3, CG=5),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), 1 + _w(r, s["G"], s["CG"]), _w(r, s["G"], s["CG"])])
def _gn_cl(torch, a, t, s):
    F = torch.nn.functional
    return {"F.group_norm": _nograd(torch, lambda: F.group_norm(t[0], s["G"], t[1].reshape(-1), t[2].reshape(-1), 1e-5))}


# ---------------------------------------------------------------- losses

@program(name="label-smoothing kl loss (annotated transformer: pad column and pad rows zeroed, sum)", kind="loss",
         src="""
# the Annotated Transformer's LabelSmoothing: target distribution 0.9 at the label, 0.1 / (C - 2) elsewhere, 0 in
# the padding column 0 and in rows whose label is the padding 0; KLDivLoss(reduction='sum') against log_softmax(x)
def lskl(float(N,C) x, int32(N) tgt) -> (loss) {
  mx(n) max=! x(n, c)
  lse(n) +=! exp(x(n, c) - mx(n))
  lse(n) = log(lse(n)) + mx(n)
  loss +=! (tgt(n) == 0 || c == 0 ? 0 : q * (log(q) - x(n, c) + lse(n))) where q = (c == tgt(n) ? 0.9 : 0.1 / (C - 2))
}""", full=dict(N=2048, C=1000), tiny=dict(N=7, C=5),
    inputs=lambda r, s: [_n(r, s["N"], s["C"]) * 2, r.integers(0, s["C"], s["N"]).astype(np.int32)])
def _lskl(torch, a, t, s):
    F = torch.nn.functional
    C = s["C"]
    tg = t[1].long()

    def run():
        td = torch.full_like(t[0], 0.1 / (C - 2))
        td.scatter_(1, tg[:, None], 0.9)
        td[:, 0] = 0
        td[tg == 0] = 0
        return F.kl_div(F.log_softmax(t[0], 1), td, reduction="sum")
    return {"log_softmax + F.kl_div(sum)": _nograd(torch, run)}


@program(name="masked sequence nll, batch-first logits, int32 lengths, mean over tokens per sequence then batch",
         kind="loss", src="""
# token-level cross entropy of a batch-first (B, T, V) decoder output, tokens t >= len(b) masked out by a select,
# each sequence's sum divided by its length, then the mean over the batch
def seqnll(float(B,T,V) logit, int32(B,T) tgt, int32(B) len) -> (loss) {
  mx(b, t) max=! logit(b, t, v)
  se(b, t) +=! exp(logit(b, t, v) - mx(b, t))
  nll(b, t) = t < len(b) ? log(se(b, t)) + mx(b, t) - logit(b, t, tgt(b, t)) : 0
  loss +=! nll(b, t) / (len(b) * B)
}""", full=dict(B=32, T=128, V=1000), tiny=dict(B=3, T=5, V=7),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["V"]) * 2, r.integers(0, s["V"], (s["B"], s["T"])).astype(np.int32),
                         r.integers(1, s["T"] + 1, s["B"]).astype(np.int32)])
def _seqnll(torch, a, t, s):
    F = torch.nn.functional
    B, T, V = s["B"], s["T"], s["V"]
    tg = t[1].long().reshape(-1)
    ln = t[2].float()
    mask = torch.arange(T)[None, :] < t[2][:, None].long()

    def run():
        nll = F.cross_entropy(t[0].reshape(-1, V), tg, reduction="none").view(B, T)
        return ((nll * mask).sum(1) / ln).mean()
    return {"F.cross_entropy(none) * mask": _nograd(torch, run)}


# ---------------------------------------------------------------- decoders and reservoirs

@program(name="greedy decoder with an lstm cell (4H,E), bos scalar, tokens batch-first tok(b, t)", kind="rnn", src="""
# greedy decoding with an nn.LSTMCell (PyTorch's (4H,E), (4H,H) weights, one bias): the argmax token of each step
# (logits with their bias) is embedded as the next input, the int32 scalar bos at step 0; S steps (a free size);
# states in place from the encoder's h0, c0; tokens written batch-first
def greedy_lstm(float(V,E) emb, float(4*H,E) Wih, float(4*H,H) Whh, float(4*H) bias, float(V,H) Wo, float(V) bo,
                float(B,H) h0, float(B,H) c0, int32 bos) -> (tok) {
  hs(b, j) = h0(b, j)
  cs(b, j) = c0(b, j)
  for t in S {
    g(b, r) +=! hs(b, k) * Whh(r, k)
    if t == 0 { g(b, r) += emb(bos, e) * Wih(r, e) where b in 0:B }
    else      { g(b, r) += emb(tok(b, t - 1), e) * Wih(r, e) }
    g(b, r) = g(b, r) + bias(r)
    cs(b, j) = sigmoid(g(b, H + j)) * cs(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H
    hs(b, j) = sigmoid(g(b, 3 * H + j)) * tanh(cs(b, j)) where j in 0:H
    logit(b, v) +=! hs(b, j) * Wo(v, j)
    tok(b, t) argmax=! logit(b, v) + bo(v)
  }
}""", full=dict(S=32, B=16, E=256, H=256, V=2000), tiny=dict(S=5, B=3, E=7, H=5, V=9), free=("S",),
    inputs=lambda r, s: [_n(r, s["V"], s["E"]), _w(r, 4 * s["H"], s["E"]), _w(r, 4 * s["H"], s["H"]),
                         _w(r, 4 * s["H"]), _w(r, s["V"], s["H"]) * 4, _w(r, s["V"]), _n(r, s["B"], s["H"]),
                         _n(r, s["B"], s["H"]), np.array(2, np.int32)])
def _greedy_lstm(torch, a, t, s):
    F = torch.nn.functional
    emb, Wih, Whh, bias, Wo, bo, h0, c0, bos = t
    cell = torch.nn.LSTMCell(s["E"], s["H"])
    _copy(torch, cell.weight_ih, a[1])
    _copy(torch, cell.weight_hh, a[2])
    _copy(torch, cell.bias_ih, a[3])
    _copy(torch, cell.bias_hh, np.zeros(4 * s["H"], np.float32))
    B = s["B"]

    def loop():
        out = torch.empty(B, s["S"], dtype=torch.int32)
        h, c = h0, c0
        tok = torch.full((B,), int(a[8]), dtype=torch.long)
        for k in range(s["S"]):
            h, c = cell(F.embedding(tok, emb), (h, c))
            tok = F.linear(h, Wo, bo).argmax(1)
            out[:, k] = tok
        return out
    return {"nn.LSTMCell loop": _nograd(torch, loop)}


@program(name="leaky echo-state network (reservoir (out,in), scalar leak rate, readout every step)", kind="rnn", src="""
# leaky-integrator echo-state network (Jaeger 2007): a fixed random reservoir Wres (out,in) of spectral radius < 1,
# x(t) = (1 - leak) x(t - 1) + leak tanh(Win u(t) + Wres x(t - 1) + bias) from x = 0, the leak a scalar input;
# the state xs is updated in place, the linear readout Wout x(t) of every step is written time-major
def esn(float(T,B,I) u, float(N,I) Win, float(N,N) Wres, float(N) bias, float(O,N) Wout, float leak) -> (y) {
  xs(b, n) = 0.0 where b in 0:B, n in 0:N
  for t in T {
    a(b, n) +=! u(t, b, i) * Win(n, i)
    a(b, n) += xs(b, k) * Wres(n, k)
    xs(b, n) = (1 - leak) * xs(b, n) + leak * tanh(a(b, n) + bias(n))
    y(t, b, o) +=! xs(b, n) * Wout(o, n)
  }
}""", full=dict(T=128, B=16, I=64, N=256, O=32), tiny=dict(T=5, B=3, I=3, N=7, O=3),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["N"], s["I"]), _w(r, s["N"], s["N"]) * 0.9,
                         _w(r, s["N"]) * 0.1, _w(r, s["O"], s["N"]), np.array(0.3, np.float32)])
def _esn(torch, a, t, s):
    F = torch.nn.functional
    u, Win, Wres, bias, Wout, leak = t
    lk = float(a[5])

    def loop():
        pre = F.linear(u, Win, bias)
        x = torch.zeros(s["B"], s["N"])
        states = torch.empty(s["T"], s["B"], s["N"])
        for k in range(s["T"]):
            x = torch.lerp(x, torch.tanh(torch.addmm(pre[k], x, Wres.T)), lk)
            states[k] = x
        return F.linear(states, Wout)
    return {"torch loop (addmm, lerp) + F.linear": _nograd(torch, loop)}


# ---------------------------------------------------------------- session 45: sequence models and recurrences

# ---------------------------------------------------------------- recurrent networks

@program(name="listen-attend-spell decoder (lstm cell on [y; ctx], dot attention over the encoder each step)",
         kind="rnn", src="""
# LAS speller, teacher-forced: the LSTM cell (PyTorch's (4H, E+H) weight on the concatenated input [y(t); ctx],
# one bias) runs from a zero state; its output attends over the encoder (dot score, softmax over S), and the
# context is fed back at the next step; o(t, b, :) = [h; ctx] for the character distribution layer
# ('where k in 0:H' on the ctx term: ctx is written further down the body, and without it k gets [-E, H): note 1)
def las(float(T,B,E) y, float(B,S,H) enc, float(4*H,E+H) W, float(4*H,H) U, float(4*H) bias) -> (o) {
  for t in T {
    g(b, r) +=! y(t, b, i) * W(r, i)
    if t > 0 {
      g(b, r) += ctx(b, k) * W(r, E + k) where k in 0:H
      g(b, r) += hs(b, k) * U(r, k)
    }
    g(b, r) = g(b, r) + bias(r)
    cs(b, j) = sigmoid(g(b, H + j)) * cs(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H
    hs(b, j) = sigmoid(g(b, 3 * H + j)) * tanh(cs(b, j)) where j in 0:H
    e(b, s) +=! hs(b, j) * enc(b, s, j)
    mx(b) max=! e(b, s)
    p(b, s) = exp(e(b, s) - mx(b))
    z(b) +=! p(b, s)
    ctx(b, k) +=! p(b, s) * enc(b, s, k) / z(b)
    o(t, b, j) = hs(b, j)
    o(t, b, H + j) = ctx(b, j)
  }
}""", full=dict(T=32, B=16, E=128, H=256, S=128), tiny=dict(T=5, B=3, E=7, H=5, S=9),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["E"]), _n(r, s["B"], s["S"], s["H"]),
                         _w(r, 4 * s["H"], s["E"] + s["H"]), _w(r, 4 * s["H"], s["H"]), _w(r, 4 * s["H"])])
def _las(torch, a, t, s):
    F = torch.nn.functional
    y, enc = t[0], t[1]
    T, B, H = s["T"], s["B"], s["H"]
    cell = torch.nn.LSTMCell(s["E"] + H, H)
    _copy(torch, cell.weight_ih, a[2])
    _copy(torch, cell.weight_hh, a[3])
    _copy(torch, cell.bias_ih, a[4])
    _copy(torch, cell.bias_hh, np.zeros(4 * H, np.float32))

    def loop():
        h, c, ctx = torch.zeros(B, H), torch.zeros(B, H), torch.zeros(B, H)
        out = torch.empty(T, B, 2 * H)
        for k in range(T):
            h, c = cell(torch.cat([y[k], ctx], 1), (h, c))
            ctx = F.scaled_dot_product_attention(h[:, None], enc, enc, scale=1.0)[:, 0]
            out[k, :, :H] = h
            out[k, :, H:] = ctx
        return out
    return {"nn.LSTMCell + sdpa loop": _nograd(torch, loop)}


@program(name="stacked lstm L=3, layer loop inside the time loop, states hs(l, b, j) in place (4H,H)", kind="rnn",
         src="""
# nn.LSTM(H, H, num_layers=L) written step by step: at each t the layers run bottom-up, layer l reading what
# layer l - 1 wrote at this step; hs and cs hold one state per layer, updated in place; zero initial state;
# one bias per layer (bias_hh folded in); the input size equals H so the weights stack as (L, 4H, H)
def slstm_stack(float(T,B,H) x, float(L,4*H,H) Wx, float(L,4*H,H) Wh, float(L,4*H) bias) -> (y) {
  for t in T {
    for l in L {
      if l == 0 { g(b, r) +=! x(t, b, i) * Wx(l, r, i) }
      else      { g(b, r) +=! hs(l - 1, b, i) * Wx(l, r, i) }
      if t > 0  { g(b, r) += hs(l, b, k) * Wh(l, r, k) }
      cs(l, b, j) = fg * cs(l, b, j) + ig * gg
        where ig = sigmoid(g(b, j) + bias(l, j)), fg = sigmoid(g(b, H + j) + bias(l, H + j)),
              gg = tanh(g(b, 2 * H + j) + bias(l, 2 * H + j)), j in 0:H
      hs(l, b, j) = sigmoid(g(b, 3 * H + j) + bias(l, 3 * H + j)) * tanh(cs(l, b, j)) where j in 0:H
    }
    y(t, b, j) = hs(L - 1, b, j)
  }
}""", full=dict(T=64, B=16, H=256, L=3), tiny=dict(T=5, B=3, H=7, L=3),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["H"]), _w(r, s["L"], 4 * s["H"], s["H"]),
                         _w(r, s["L"], 4 * s["H"], s["H"]), _w(r, s["L"], 4 * s["H"])])
def _slstm_stack(torch, a, t, s):
    H, L = s["H"], s["L"]
    net = torch.nn.LSTM(H, H, num_layers=L)
    for l in range(L):
        _copy(torch, getattr(net, f"weight_ih_l{l}"), a[1][l])
        _copy(torch, getattr(net, f"weight_hh_l{l}"), a[2][l])
        _copy(torch, getattr(net, f"bias_ih_l{l}"), a[3][l])
        _copy(torch, getattr(net, f"bias_hh_l{l}"), np.zeros(4 * H, np.float32))
    return {"nn.LSTM(num_layers=3)": _nograd(torch, lambda: net(t[0])[0])}


@program(name="gru with zoneout (keep mask given), batch-first, previous state as a select, torch layout (3H,in)",
         kind="rnn", src="""
# zoneout (Krueger et al. 2016) on an nn.GRU cell: each unit keeps its previous value where keep = 1, else takes
# the GRU update; the previous state is a select (h0 at t = 0), bound with where; PyTorch's formula (b_hn inside r)
def gru_zoneout(float(B,T,I) x, float(B,H) h0, float(B,T,H) keep, float(3*H,I) Wih, float(3*H,H) Whh,
                float(3*H) bih, float(3*H) bhh) -> (h) {
  for t in T {
    gi(b, r) +=! x(b, t, i) * Wih(r, i)
    gh(b, r) +=! (t == 0 ? h0(b, k) : h(b, t - 1, k)) * Whh(r, k)
    hn(b, j) = (1 - zg) * tanh(gi(b, 2 * H + j) + bih(2 * H + j) + rg * (gh(b, 2 * H + j) + bhh(2 * H + j))) + zg * hp
      where rg = sigmoid(gi(b, j) + bih(j) + gh(b, j) + bhh(j)),
            zg = sigmoid(gi(b, H + j) + bih(H + j) + gh(b, H + j) + bhh(H + j)),
            hp = (t == 0 ? h0(b, j) : h(b, t - 1, j)), j in 0:H
    h(b, t, j) = keep(b, t, j) * hp + (1 - keep(b, t, j)) * hn(b, j) where hp = (t == 0 ? h0(b, j) : h(b, t - 1, j))
  }
}""", full=dict(B=32, T=64, I=128, H=256), tiny=dict(B=3, T=5, I=7, H=5),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _n(r, s["B"], s["H"]),
                         (r.random((s["B"], s["T"], s["H"])) < 0.15).astype(np.float32),
                         _w(r, 3 * s["H"], s["I"]), _w(r, 3 * s["H"], s["H"]), _w(r, 3 * s["H"]), _w(r, 3 * s["H"])])
def _gru_zoneout(torch, a, t, s):
    x, h0, keep = t[0], t[1], t[2]
    cell = torch.nn.GRUCell(s["I"], s["H"])
    for name, arr in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), a[3:7]):
        _copy(torch, getattr(cell, name), arr)

    def loop():
        h = h0
        out = torch.empty(s["B"], s["T"], s["H"])
        for k in range(s["T"]):
            m = keep[:, k]
            h = torch.lerp(cell(x[:, k], h), h, m)
            out[:, k] = h
        return out
    return {"nn.GRUCell loop + lerp": _nograd(torch, loop)}


@program(name="slstm (xlstm scalar memory): exp input/forget gates, normalizer n, stabilizer m, gate-major (4,H,in)",
         kind="rnn", src="""
# sLSTM (Beck et al. 2024) without heads: gates z, i, f, o from g(q, b, j), q = 0..3; exponential input and
# forget gates kept in log space with the stabilizer m; cell c and normalizer n in place from 0, h = o c / n
def slstm(float(T,B,I) x, float(4,H,I) W, float(4,H,H) R, float(4,H) bias) -> (h) {
  for t in T {
    g(q, b, j) +=! x(t, b, i) * W(q, j, i)
    if t > 0 { g(q, b, j) += h(t - 1, b, k) * R(q, j, k) }
    g(q, b, j) = g(q, b, j) + bias(q, j)
    mn(b, j) = max(g(2, b, j) + m(b, j), g(1, b, j))
    ie(b, j) = exp(g(1, b, j) - mn(b, j))
    fe(b, j) = exp(g(2, b, j) + m(b, j) - mn(b, j))
    c(b, j) = fe(b, j) * c(b, j) + ie(b, j) * tanh(g(0, b, j))
    n(b, j) = fe(b, j) * n(b, j) + ie(b, j)
    m(b, j) = mn(b, j)
    h(t, b, j) = sigmoid(g(3, b, j)) * c(b, j) / n(b, j)
  }
}""", full=dict(T=64, B=16, I=256, H=256), tiny=dict(T=5, B=3, I=7, H=5),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, 4, s["H"], s["I"]), _w(r, 4, s["H"], s["H"]),
                         _w(r, 4, s["H"])])
def _slstm(torch, a, t, s):
    F = torch.nn.functional
    T, B, H = s["T"], s["B"], s["H"]
    x, W, R, bias = t
    W2, R2, b2 = W.reshape(4 * H, -1), R.reshape(4 * H, H), bias.reshape(4 * H)

    def loop():
        gx = F.linear(x, W2, b2)
        h, c, n, m = (torch.zeros(B, H) for _ in range(4))
        out = torch.empty(T, B, H)
        for k in range(T):
            zt, it, ft, ot = torch.addmm(gx[k], h, R2.T).chunk(4, 1)
            mn = torch.maximum(ft + m, it)
            ie, fe = torch.exp(it - mn), torch.exp(ft + m - mn)
            c = fe * c + ie * torch.tanh(zt)
            n = fe * n + ie
            m = mn
            h = torch.sigmoid(ot) * c / n
            out[k] = h
        return out
    return {"torch loop (addmm, chunk)": _nograd(torch, loop)}


def _lru_inputs(r, s):
    N, H = s["N"], s["H"]
    u1, u2 = r.random(N), r.random(N)
    nu_log = np.log(-0.5 * np.log(u1 * (0.999 ** 2 - 0.9 ** 2) + 0.9 ** 2)).astype(np.float32)
    theta_log = np.log(2 * np.pi / 10 * u2).astype(np.float32)
    return [_n(r, s["B"], s["L"], H), nu_log, theta_log, _n(r, N, H) / np.float32(np.sqrt(2 * H)),
            _n(r, N, H) / np.float32(np.sqrt(2 * H)), _w(r, H, N), _w(r, H, N), _n(r, H)]


@program(name="linear recurrent unit (lru): diagonal complex recurrence as re/im pairs, exp-parametrised lambda",
         kind="rnn", src="""
# LRU (Orvieto et al. 2023), batch-first: lambda = exp(-exp(nu_log) + i exp(theta_log)), gamma = sqrt(1 - |lambda|^2),
# x(l) = lambda x(l - 1) + gamma (B u(l)) with complex B = Bre + i Bim, written as real and imaginary parts;
# y = Re(C x) + D u; the input projection before the loop, the output projection after it
def lru(float(B,L,H) u, float(N) nu_log, float(N) theta_log, float(N,H) Bre, float(N,H) Bim, float(H,N) Cre,
        float(H,N) Cim, float(H) D) -> (y) {
  lr(n) = exp(-exp(nu_log(n))) * cos(exp(theta_log(n)))
  li(n) = exp(-exp(nu_log(n))) * sin(exp(theta_log(n)))
  gam(n) = sqrt(1 - exp(-2 * exp(nu_log(n))))
  bur(b, l, n) +=! Bre(n, h) * u(b, l, h)
  bui(b, l, n) +=! Bim(n, h) * u(b, l, h)
  for l in L {
    xr(b, l, n) = (l > 0 ? lr(n) * xr(b, l - 1, n) - li(n) * xi(b, l - 1, n) : 0) + gam(n) * bur(b, l, n)
    xi(b, l, n) = (l > 0 ? lr(n) * xi(b, l - 1, n) + li(n) * xr(b, l - 1, n) : 0) + gam(n) * bui(b, l, n)
  }
  y(b, l, h) +=! xr(b, l, n) * Cre(h, n) - xi(b, l, n) * Cim(h, n)
  y(b, l, h) = y(b, l, h) + D(h) * u(b, l, h)
}""", full=dict(B=8, L=512, H=256, N=256), tiny=dict(B=3, L=7, H=5, N=3), inputs=_lru_inputs)
def _lru(torch, a, t, s):
    u, nu, th, Bre, Bim, Cre, Cim, D = t
    B, L, N = s["B"], s["L"], s["N"]

    def loop():
        lam = torch.exp(torch.complex(-torch.exp(nu), torch.exp(th)))
        gam = torch.sqrt(1 - lam.abs() ** 2)
        Bu = (u.to(torch.complex64) @ torch.complex(Bre, Bim).T) * gam
        x = torch.zeros(B, N, dtype=torch.complex64)
        xs = torch.empty(B, L, N, dtype=torch.complex64)
        for k in range(L):
            x = lam * x + Bu[:, k]
            xs[:, k] = x
        return (xs @ torch.complex(Cre, Cim).T).real + D * u
    return {"torch complex64 loop": _nograd(torch, loop)}


@program(name="qrnn fo-pooling, channels-first (B,C,T), K=2 causal conv gates from nn.Conv1d (3H,C,2) weight",
         kind="rnn", src="""
# QRNN layer on a channels-first sequence: the gates z, f, o are one nn.Conv1d(C, 3H, 2) applied with one frame of
# left padding (a select), before the loop; fo-pooling then runs over time with the cell c in place (zero start)
def qrnn_fo(float(B,C,T) x, float(3*H,C,2) w, float(3*H) bias) -> (h) {
  G(b, r, t) +=! (t + k - 1 >= 0 ? x(b, c, t + k - 1) : 0) * w(r, c, k) where t in 0:T, k in 0:2
  G(b, r, t) = G(b, r, t) + bias(r)
  for t in T {
    c(b, j) = f * c(b, j) + (1 - f) * tanh(G(b, j, t)) where f = sigmoid(G(b, H + j, t)), j in 0:H
    h(b, j, t) = sigmoid(G(b, 2 * H + j, t)) * c(b, j)
  }
}""", full=dict(B=16, C=256, T=256, H=256), tiny=dict(B=3, C=5, T=7, H=3),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["T"]), _w(r, 3 * s["H"], s["C"], 2), _w(r, 3 * s["H"])])
def _qrnn_fo(torch, a, t, s):
    F = torch.nn.functional
    B, T, H = s["B"], s["T"], s["H"]

    def loop():
        z, f, o = F.conv1d(F.pad(t[0], (1, 0)), t[1], t[2]).chunk(3, 1)
        z, f, o = torch.tanh(z), torch.sigmoid(f), torch.sigmoid(o)
        c = torch.zeros(B, H)
        out = torch.empty(B, H, T)
        for k in range(T):
            c = torch.lerp(z[:, :, k], c, f[:, :, k])
            out[:, :, k] = c
        return out * o
    return {"F.conv1d + lerp loop": _nograd(torch, loop)}


def _t5_buckets(T, nb=32, maxd=128):
    rel = np.arange(T)[None, :] - np.arange(T)[:, None]          # memory - query
    nb //= 2
    ret = (rel > 0).astype(np.int64) * nb
    n = np.abs(rel)
    exact = nb // 2
    large = exact + (np.log(np.maximum(n, 1) / exact) / np.log(maxd / exact) * (nb - exact)).astype(np.int64)
    large = np.minimum(large, nb - 1)
    return (ret + np.where(n < exact, n, large)).astype(np.int32)


@program(name="t5 attention with relative-position-bucket bias (int32 bucket table, rel(NB, NH) gathered)",
         kind="attention", src="""
# T5 self-attention (no 1/sqrt(D) scaling): scores plus a learned bias per head, looked up through the
# bidirectional log-bucket of j - i, precomputed once as an int32 (T, T) table; softmax over keys
def t5_attn(float(B,NH,T,D) q, float(B,NH,T,D) k, float(B,NH,T,D) v, int32(T,T) bucket, float(NB,NH) rel) -> (o) {
  sc(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  sc(b, h, i, j) = sc(b, h, i, j) + rel(bucket(i, j), h)
  mx(b, h, i) max=! sc(b, h, i, j)
  e(b, h, i, j) = exp(sc(b, h, i, j) - mx(b, h, i))
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! e(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
}""", full=dict(B=8, NH=8, T=256, D=64, NB=32), tiny=dict(B=3, NH=3, T=7, D=5, NB=32),
    inputs=lambda r, s: [_n(r, s["B"], s["NH"], s["T"], s["D"]) * 0.3, _n(r, s["B"], s["NH"], s["T"], s["D"]) * 0.3,
                         _n(r, s["B"], s["NH"], s["T"], s["D"]), _t5_buckets(s["T"], s["NB"]), _n(r, s["NB"], s["NH"])])
def _t5_attn(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, bucket, rel = t
    bl = bucket.long()

    def run():
        bias = F.embedding(bl, rel).permute(2, 0, 1)          # (NH, T, T)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0)
    return {"F.embedding bias + sdpa(attn_mask)": _nograd(torch, run)}


@program(name="autoregressive transformer decoder steps: causal self-attention over a kv cache + cross-attention, "
              "rms norm",
         kind="attention", src="""
# a continuous-output transformer decoder layer (a TTS / time-series decoder) run for N steps (a free size): the
# output of step t - 1 is the input of step t (x0 at t = 0); self-attention over the keys and values of steps
# 0..t kept in a cache kc, vc; cross-attention over the encoder memory's precomputed keys mk and values mv;
# residuals, then an RMS norm with gain g; projections as (NH, D, C) and (C, NH, D) weights, no biases
def ar_dec(float(B,C) x0, float(B,NH,S,D) mk, float(B,NH,S,D) mv, float(NH,D,C) Wq, float(NH,D,C) Wk,
           float(NH,D,C) Wv, float(C,NH,D) Wo, float(NH,D,C) Wq2, float(C,NH,D) Wo2, float(C) g) -> (y) {
  for t in N {
    inp(b, c) = t == 0 ? x0(b, c) : y(t - 1, b, c)
    q(b, h, d) +=! inp(b, c) * Wq(h, d, c)
    kc(t, b, h, d) +=! inp(b, c) * Wk(h, d, c)
    vc(t, b, h, d) +=! inp(b, c) * Wv(h, d, c)
    sc(b, h, j) +=! q(b, h, d) * kc(j, b, h, d) * rsqrt(float(D)) where j in 0:t+1
    mx(b, h) max=! sc(b, h, j) where j in 0:t+1
    p(b, h, j) = exp(sc(b, h, j) - mx(b, h)) where j in 0:t+1
    z(b, h) +=! p(b, h, j) where j in 0:t+1
    a(b, h, d) +=! p(b, h, j) * vc(j, b, h, d) / z(b, h) where j in 0:t+1
    r(b, c) +=! a(b, h, d) * Wo(c, h, d)
    r(b, c) = r(b, c) + inp(b, c)
    q2(b, h, d) +=! r(b, c) * Wq2(h, d, c)
    sc2(b, h, s) +=! q2(b, h, d) * mk(b, h, s, d) * rsqrt(float(D))
    mx2(b, h) max=! sc2(b, h, s)
    p2(b, h, s) = exp(sc2(b, h, s) - mx2(b, h))
    z2(b, h) +=! p2(b, h, s)
    a2(b, h, d) +=! p2(b, h, s) * mv(b, h, s, d) / z2(b, h)
    r2(b, c) +=! a2(b, h, d) * Wo2(c, h, d)
    r2(b, c) = r2(b, c) + r(b, c)
    ms(b) +=! r2(b, c) * r2(b, c) / C
    y(t, b, c) = r2(b, c) * rsqrt(ms(b) + 1e-6) * g(c)
  }
}""", full=dict(N=32, B=8, C=256, NH=4, D=64, S=128), tiny=dict(N=5, B=3, C=7, NH=3, D=5, S=9), free=("N",),
    inputs=lambda r, s: [_n(r, s["B"], s["C"]), _n(r, s["B"], s["NH"], s["S"], s["D"]),
                         _n(r, s["B"], s["NH"], s["S"], s["D"])] +
                        [_w(r, s["NH"], s["D"], s["C"]) for _ in range(3)] +
                        [_w(r, s["C"], s["NH"], s["D"] * 1) / np.float32(np.sqrt(s["NH"])),
                         _w(r, s["NH"], s["D"], s["C"]),
                         _w(r, s["C"], s["NH"], s["D"]) / np.float32(np.sqrt(s["NH"])), 1 + 0.1 * _n(r, s["C"])])
def _ar_dec(torch, a, t, s):
    F = torch.nn.functional
    x0, mk, mv, Wq, Wk, Wv, Wo, Wq2, Wo2, g = t
    N, B, C, NH, D = s["N"], s["B"], s["C"], s["NH"], s["D"]
    Wqkv = torch.cat([Wq, Wk, Wv]).reshape(3 * NH * D, C)
    Wo_, Wq2_, Wo2_ = Wo.reshape(C, NH * D), Wq2.reshape(NH * D, C), Wo2.reshape(C, NH * D)

    def loop():
        kc = torch.empty(B, NH, N, D)
        vc = torch.empty(B, NH, N, D)
        out = torch.empty(N, B, C)
        x = x0
        for k in range(N):
            q, kk, vv = F.linear(x, Wqkv).view(B, 3, NH, 1, D).unbind(1)
            kc[:, :, k:k + 1] = kk
            vc[:, :, k:k + 1] = vv
            att = F.scaled_dot_product_attention(q, kc[:, :, :k + 1], vc[:, :, :k + 1])
            r = x + F.linear(att.reshape(B, NH * D), Wo_)
            q2 = F.linear(r, Wq2_).view(B, NH, 1, D)
            r2 = r + F.linear(F.scaled_dot_product_attention(q2, mk, mv).reshape(B, NH * D), Wo2_)
            x = F.rms_norm(r2, (C,), g, 1e-6)
            out[k] = x
        return out
    return {"sdpa over kv cache + sdpa cross + F.rms_norm loop": _nograd(torch, loop)}


def _ctc_inputs(r, s):
    B, T, V = s["B"], s["T"], s["V"]
    seg = r.integers(0, V, (B, (T + 2) // 3)).repeat(3, axis=1)[:, :T]     # 3-frame segments: repeats
    lg = _n(r, B, T, V)
    np.put_along_axis(lg, seg[:, :, None], 4.0, axis=2)
    lg[:, :, 0] += np.where(r.random((B, T)) < 0.4, 6.0, 0.0).astype(np.float32)   # blanks
    return [lg, r.integers(T // 2, T + 1, B).astype(np.int32)]


@program(name="ctc greedy decoding (argmax per frame, collapse repeats, drop blanks, compact by a one-hot sum)",
         kind="decode", src="""
# best path CTC decoding of a batch-first (B, T, V) output with int32 lengths, blank = 0: the argmax of every
# frame, kept when it is not blank and differs from the previous frame; the kept tokens' positions by a running
# count over time; out(b, n) is the n-th kept token, -1 past the end; count(b) tokens per utterance
# ('where t in 0:T' on keep: the read best(b, t - 1) behind '||' would narrow t to [1, T) silently: note 2)
def ctc_greedy(float(B,T,V) logit, int32(B) len) -> (out, count) {
  best(b, t) argmax=! logit(b, t, v)
  keep(b, t) = int32(t < len(b) && best(b, t) != 0 && (t == 0 || best(b, t) != best(b, t - 1))) where t in 0:T
  for t in T {
    pos(b, t) = t > 0 ? pos(b, t - 1) + keep(b, t) : keep(b, t)
  }
  out(b, n) +=! (keep(b, t) == 1 && pos(b, t) == n + 1 ? best(b, t) + 1 : 0) where n in 0:T
  out(b, n) = out(b, n) - 1
  count(b) = pos(b, T - 1)
}""", full=dict(B=16, T=400, V=500), tiny=dict(B=3, T=7, V=5), inputs=_ctc_inputs,
    pick=lambda r: np.concatenate([r[0].reshape(-1), r[1]]))
def _ctc_greedy(torch, a, t, s):
    B, T = s["B"], s["T"]
    lg, ln = t[0], t[1].long()

    def run():
        best = lg.argmax(-1)
        keep = (best != 0) & (torch.arange(T)[None, :] < ln[:, None])
        keep[:, 1:] &= best[:, 1:] != best[:, :-1]
        pos = keep.cumsum(1) - 1
        out = torch.full((B, T), -1, dtype=torch.long)
        bi, ti = keep.nonzero(as_tuple=True)
        out[bi, pos[bi, ti]] = best[bi, ti]
        return torch.cat([out.reshape(-1), keep.sum(1)])
    return {"argmax + cumsum + index_put": _nograd(torch, run)}


@program(name="bidirectional lstm, directions summed, batch-first, weights W(dir, gate, out, in)", kind="rnn", src="""
# nn.LSTM(I, H, bidirectional=True, batch_first=True) whose two directions are summed (as some speech encoders
# do) instead of concatenated; weights viewed (2, 4, H, in) by direction and gate, one bias (2, 4, H);
# the backward direction reads x at T - 1 - t and writes yb there; cells in place from a zero state
def bilstm_sum(float(B,T,I) x, float(2,4,H,I) W, float(2,4,H,H) U, float(2,4,H) bias) -> (y) {
  for t in T {
    gf(q, b, j) +=! x(b, t, i) * W(0, q, j, i)
    gb(q, b, j) +=! x(b, T - 1 - t, i) * W(1, q, j, i)
    if t > 0 {
      gf(q, b, j) += yf(b, t - 1, k) * U(0, q, j, k)
      gb(q, b, j) += yb(b, T - t, k) * U(1, q, j, k)
    }
    gf(q, b, j) = gf(q, b, j) + bias(0, q, j)
    gb(q, b, j) = gb(q, b, j) + bias(1, q, j)
    cf(b, j) = sigmoid(gf(1, b, j)) * cf(b, j) + sigmoid(gf(0, b, j)) * tanh(gf(2, b, j))
    cb(b, j) = sigmoid(gb(1, b, j)) * cb(b, j) + sigmoid(gb(0, b, j)) * tanh(gb(2, b, j))
    yf(b, t, j) = sigmoid(gf(3, b, j)) * tanh(cf(b, j))
    yb(b, T - 1 - t, j) = sigmoid(gb(3, b, j)) * tanh(cb(b, j))
  }
  y(b, t, j) = yf(b, t, j) + yb(b, t, j)
}""", full=dict(B=16, T=64, I=256, H=256), tiny=dict(B=3, T=5, I=7, H=5),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _w(r, 2, 4, s["H"], s["I"]), _w(r, 2, 4, s["H"], s["H"]),
                         _w(r, 2, 4, s["H"])])
def _bilstm_sum(torch, a, t, s):
    B, T, H = s["B"], s["T"], s["H"]
    net = torch.nn.LSTM(s["I"], H, bidirectional=True, batch_first=True)
    for d, suf in enumerate(("", "_reverse")):
        _copy(torch, getattr(net, f"weight_ih_l0{suf}"), a[1][d].reshape(4 * H, -1))
        _copy(torch, getattr(net, f"weight_hh_l0{suf}"), a[2][d].reshape(4 * H, H))
        _copy(torch, getattr(net, f"bias_ih_l0{suf}"), a[3][d].reshape(-1))
        _copy(torch, getattr(net, f"bias_hh_l0{suf}"), np.zeros(4 * H, np.float32))
    return {"nn.LSTM(bidirectional) + sum of halves": _nograd(
        torch, lambda: net(t[0])[0].view(B, T, 2, H).sum(2))}


# ---------------------------------------------------------------- speech front ends and encoders

@program(name="x-vector tdnn (dilated valid conv1d K=5/3/3, d=1/2/3, 1x1, relu) + stats pooling mean/std",
         kind="conv", src="""
# the frame layers of an x-vector extractor (Snyder et al. 2018) as nn.Conv1d layers without padding: contexts
# [-2, 2], {-2, 0, 2}, {-3, 0, 3}, then a 1x1 layer, ReLU after each (batch norm folded away); statistics
# pooling: the mean and the (unbiased) standard deviation over the remaining frames, concatenated
def xvector(float(B,F,T) x, float(C,F,5) w1, float(C) b1, float(C,C,3) w2, float(C) b2, float(C,C,3) w3,
            float(C) b3, float(O,C) w4, float(O) b4) -> (stats) {
  h1(b, c, t) +=! x(b, f, t + k) * w1(c, f, k)
  h1(b, c, t) = fmax(h1(b, c, t) + b1(c), 0)
  h2(b, c, t) +=! h1(b, e, t + 2 * k) * w2(c, e, k)
  h2(b, c, t) = fmax(h2(b, c, t) + b2(c), 0)
  h3(b, c, t) +=! h2(b, e, t + 3 * k) * w3(c, e, k)
  h3(b, c, t) = fmax(h3(b, c, t) + b3(c), 0)
  h4(b, o, t) +=! h3(b, c, t) * w4(o, c)
  h4(b, o, t) = fmax(h4(b, o, t) + b4(o), 0)
  mu(b, o) +=! h4(b, o, t) / (T - 14)
  var(b, o) +=! (h4(b, o, t) - mu(b, o)) * (h4(b, o, t) - mu(b, o)) / (T - 15)
  stats(b, o) = mu(b, o)
  stats(b, O + o) = sqrt(var(b, o))
}""", full=dict(B=8, F=40, T=200, C=256, O=768), tiny=dict(B=3, F=5, T=21, C=7, O=9),
    inputs=lambda r, s: [_n(r, s["B"], s["F"], s["T"]), _w(r, s["C"], s["F"], 5) * 0.5, _w(r, s["C"]) * 0.1,
                         _w(r, s["C"], s["C"], 3) * 0.6, _w(r, s["C"]) * 0.1, _w(r, s["C"], s["C"], 3) * 0.6,
                         _w(r, s["C"]) * 0.1, _w(r, s["O"], s["C"]), _w(r, s["O"]) * 0.1])
def _xvector(torch, a, t, s):
    F = torch.nn.functional
    x, w1, b1, w2, b2, w3, b3, w4, b4 = t

    def run():
        h = F.relu(F.conv1d(x, w1, b1))
        h = F.relu(F.conv1d(h, w2, b2, dilation=2))
        h = F.relu(F.conv1d(h, w3, b3, dilation=3))
        h = F.relu(F.conv1d(h, w4[:, :, None], b4))
        sd, mu = torch.std_mean(h, dim=2)
        return torch.cat([mu, sd], 1)
    return {"F.conv1d(dilation) x4 + torch.std_mean": _nograd(torch, run)}


@program(name="speech delta and delta-delta features (+-2 frames, edges clamped with min/max), stacked",
         kind="signal", src="""
# torchaudio.functional.compute_deltas(win_length=5) on (B, F, T) features, twice: the regression
# sum_n n (x(t + n) - x(t - n)) / 10 over n = 1, 2 with the edge frames repeated (the index clamped into 0..T-1);
# the output stacks x, delta and delta-delta along the feature axis (B, 3F, T)
def deltas(float(B,F,T) x) -> (y) {
  d(b, f, t) +=! (n - 2) * x(b, f, min(max(t + n - 2, 0), T - 1)) / 10 where t in 0:T, n in 0:5
  dd(b, f, t) +=! (n - 2) * d(b, f, min(max(t + n - 2, 0), T - 1)) / 10 where t in 0:T, n in 0:5
  y(b, f, t) = x(b, f, t)
  y(b, F + f, t) = d(b, f, t)
  y(b, 2 * F + f, t) = dd(b, f, t)
}""", full=dict(B=32, F=80, T=1000), tiny=dict(B=3, F=5, T=7),
    inputs=lambda r, s: [_n(r, s["B"], s["F"], s["T"])])
def _deltas(torch, a, t, s):
    F = torch.nn.functional
    C = s["F"]
    kern = torch.arange(-2, 3, dtype=torch.float32).repeat(C, 1, 1)

    def compute_deltas(v):         # torchaudio.functional.compute_deltas, win_length=5
        return F.conv1d(F.pad(v, (2, 2), mode="replicate"), kern, groups=C) / 10

    def run():
        d = compute_deltas(t[0])
        return torch.cat([t[0], d, compute_deltas(d)], 1)
    return {"compute_deltas (replicate pad + grouped conv1d) x2 + cat": _nograd(torch, run)}


def _mel_fb(M, K, sr=16000):
    hz = lambda m: 700 * (10 ** (m / 2595) - 1)
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    pts = hz(np.linspace(mel(0), mel(sr / 2), M + 2))
    freqs = np.linspace(0, sr / 2, K)
    lo, ce, hi = pts[:-2, None], pts[1:-1, None], pts[2:, None]
    fb = np.maximum(0, np.minimum((freqs - lo) / (ce - lo), (hi - freqs) / (hi - ce)))
    return fb.astype(np.float32)


@program(name="log-mel filterbank from re/im spectra (power inside the sum) + per-utterance mean normalisation",
         kind="signal", src="""
# log-mel features from an STFT given as real and imaginary parts (B, T, K): |X|^2 times the (M, K) mel
# filterbank, log(x + 1e-6), then cepstral mean normalisation (the mean over the frames of each utterance removed)
def logmel_cmn(float(B,T,K) re, float(B,T,K) im, float(M,K) fb) -> (y) {
  mel(b, t, m) +=! (re(b, t, k) * re(b, t, k) + im(b, t, k) * im(b, t, k)) * fb(m, k)
  mel(b, t, m) = log(mel(b, t, m) + 1e-6)
  mu(b, m) +=! mel(b, t, m) / T
  y(b, t, m) = mel(b, t, m) - mu(b, m)
}""", full=dict(B=16, T=500, K=257, M=80), tiny=dict(B=3, T=7, K=9, M=5),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["K"]), _n(r, s["B"], s["T"], s["K"]), _mel_fb(s["M"], s["K"])])
def _logmel_cmn(torch, a, t, s):
    def run():
        mel = torch.log((t[0] * t[0] + t[1] * t[1]) @ t[2].T + 1e-6)
        return mel - mel.mean(1, keepdim=True)
    return {"matmul + log + mean": _nograd(torch, run)}


@program(name="modern hopfield retrieval, S update steps (a free size), xi = X^T softmax(beta X xi) in place",
         kind="attention", src="""
# retrieval in a modern Hopfield network (Ramsauer et al. 2020): P query patterns per batch are updated S times
# (a free size) to xi <- softmax(beta xi X^T) X over the N stored patterns X; xi starts at the queries Q
def hopfield(float(B,N,D) X, float(B,P,D) Q, float beta) -> (xi) {
  xi(b, p, d) = Q(b, p, d)
  for it in S {
    s(b, p, n) +=! xi(b, p, d) * X(b, n, d)
    mx(b, p) max=! s(b, p, n)
    e(b, p, n) = exp(beta * (s(b, p, n) - mx(b, p)))
    z(b, p) +=! e(b, p, n)
    xi(b, p, d) +=! e(b, p, n) * X(b, n, d) / z(b, p)
  }
}""", full=dict(S=3, B=16, N=512, P=64, D=128), tiny=dict(S=3, B=3, N=7, P=5, D=3), free=("S",),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["D"]), _n(r, s["B"], s["P"], s["D"]),
                         np.array(2.0 / np.sqrt(s["D"]), np.float32)])
def _hopfield(torch, a, t, s):
    F = torch.nn.functional
    X, Q = t[0], t[1]
    beta = float(a[2])

    def loop():
        xi = Q
        for _ in range(s["S"]):
            xi = F.scaled_dot_product_attention(xi, X, X, scale=beta)
        return xi
    return {"sdpa(scale=beta) loop": _nograd(torch, loop)}


# ---------------------------------------------------------------- session 45: TC-style kernels and contractions

# ---------------------------------------------------------------- TC-paper / TC-repo style kernels


@program(name="tc tbmm: batched transposed matmul Z(b, n, k) +=! X(b, n, m) * Y(b, k, m)", kind="matmul", src="""
# TC's tbmm benchmark: both operands keep the reduction index last
def tbmm(float(B, N, M) X, float(B, K, M) Y) -> (Z) {
  Z(b, n, k) +=! X(b, n, m) * Y(b, k, m)
}""", full=dict(B=32, N=256, K=256, M=256), tiny=dict(B=3, N=5, K=7, M=9),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["M"]), _n(r, s["B"], s["K"], s["M"])])
def _tbmm(torch, a, t, s):
    X, Y = t
    return {"torch.bmm(X, Y^T)": lambda: torch.bmm(X, Y.transpose(1, 2)),
            "torch.einsum": lambda: torch.einsum("bnm,bkm->bnk", X, Y)}


@program(name="grouped batch matmul, right operand broadcast over the batch (B,G,M,K) @ (G,K,N)", kind="matmul",
         src="""
# per-group weights shared by every batch element: torch.matmul's broadcasting
def gbmm(float(B, G, M, K) X, float(G, K, N) Y) -> (Z) {
  Z(b, g, m, n) +=! X(b, g, m, k) * Y(g, k, n)
}""", full=dict(B=16, G=8, M=128, K=64, N=128), tiny=dict(B=3, G=5, M=3, K=7, N=5),
    inputs=lambda r, s: [_n(r, s["B"], s["G"], s["M"], s["K"]), _w(r, s["G"], s["K"], s["N"])])
def _gbmm(torch, a, t, s):
    X, Y = t
    return {"torch.matmul (broadcast)": lambda: torch.matmul(X, Y),
            "torch.einsum": lambda: torch.einsum("bgmk,gkn->bgmn", X, Y)}


@program(name="tc kru3: kronecker recurrent unit, three 16x16 factors on a (M, N0, N1, N2) view, one def",
         kind="matmul", src="""
# TC's KRU3_1, KRU3_2, KRU3_3 in one def: (W0 kron W1 kron W2) applied to each row of X, one factor per axis
def kru3(float(M, N0, N1, N2) X, float(D0, N0) W0, float(D1, N1) W1, float(D2, N2) W2) -> (Y) {
  XW2(m, n0, n1, d2) +=! X(m, n0, n1, r2) * W2(d2, r2)
  XW1(m, n0, d1, d2) +=! XW2(m, n0, r1, d2) * W1(d1, r1)
  Y(m, d0, d1, d2) +=! XW1(m, r0, d1, d2) * W0(d0, r0)
}""", full=dict(M=256, N0=16, N1=16, N2=16, D0=16, D1=16, D2=16),
    tiny=dict(M=3, N0=3, N1=5, N2=7, D0=5, D1=3, D2=5),
    inputs=lambda r, s: [_n(r, s["M"], s["N0"], s["N1"], s["N2"]), _w(r, s["D0"], s["N0"]),
                         _w(r, s["D1"], s["N1"]), _w(r, s["D2"], s["N2"])])
def _kru3(torch, a, t, s):
    X, W0, W1, W2 = t

    def chain():
        y = torch.matmul(X, W2.t())                                  # (M, N0, N1, D2)
        y = torch.matmul(W1, y)                                      # (M, N0, D1, D2)
        return torch.matmul(W0, y.reshape(s["M"], s["N0"], -1)).reshape(s["M"], s["D0"], s["D1"], s["D2"])
    return {"3 x torch.matmul": chain,
            "torch.einsum (3 factors)": lambda: torch.einsum("mabc,da,eb,fc->mdef", X, W0, W1, W2)}


@program(name="kronecker-factored linear (A kron B) x on flat (NB, P*Q) rows, digits by p * Q + q, i / Q, i % Q",
         kind="matmul", src="""
# y(b, i*Q + j) = sum_{p,q} A(i,p) B(j,q) x(b, p*Q + q): two small contractions instead of a (PQ x PQ) matrix
def kron_linear(float(NB, F) X, float(P, P) A, float(Q, Q) B) -> (Y) {
  T1(b, p, j) +=! X(b, p * Q + q) * B(j, q) where p in 0:P
  Y(b, i) +=! A(i / Q, p) * T1(b, p, i % Q) where i in 0:F
}""", full=dict(NB=256, P=64, Q=64, F=4096), tiny=dict(NB=3, P=5, Q=3, F=15),
    inputs=lambda r, s: [_n(r, s["NB"], s["F"]), _w(r, s["P"], s["P"]), _w(r, s["Q"], s["Q"])])
def _kron_linear(torch, a, t, s):
    X, A, B = t
    P, Q = s["P"], s["Q"]
    out = {"A @ X.view(NB,P,Q) @ B^T":
           lambda: torch.matmul(torch.matmul(A, X.view(-1, P, Q)), B.t()).reshape(-1, P * Q)}
    if P * Q <= 1024:   # the dense kron is only reasonable at small sizes
        out["F.linear(x, torch.kron(A, B))"] = lambda: torch.nn.functional.linear(X, torch.kron(A, B))
    return out


@program(name="tc 2lut: two embedding tables, int32 index lists, sum over lookups (embedding_bag sum)",
         kind="embedding", src="""
# TC's _2LUT benchmark: each row sums the L1 (L2) rows of LUT1 (LUT2) its indices name
def _2LUT(float(E1, D) LUT1, int32(B, L1) I1, float(E2, D) LUT2, int32(B, L2) I2) -> (O1, O2) {
  O1(b, d) +=! LUT1(I1(b, k1), d)
  O2(b, d) +=! LUT2(I2(b, k2), d)
}""", full=dict(E1=100000, E2=50000, D=64, B=1024, L1=50, L2=20), tiny=dict(E1=7, E2=9, D=5, B=3, L1=5, L2=3),
    inputs=lambda r, s: [_n(r, s["E1"], s["D"]), r.integers(0, s["E1"], (s["B"], s["L1"])).astype(np.int32),
                         _n(r, s["E2"], s["D"]), r.integers(0, s["E2"], (s["B"], s["L2"])).astype(np.int32)])
def _2lut(torch, a, t, s):
    F = torch.nn.functional
    LUT1, I1, LUT2, I2 = t
    return {"2 x F.embedding_bag(sum)": lambda: (F.embedding_bag(I1, LUT1, mode="sum"),
                                                   F.embedding_bag(I2, LUT2, mode="sum"))}


@program(name="tc moments: mean and biased variance along the middle axis of (A, K, C)", kind="norm", src="""
# TC's moments, the reduced axis in the middle
def moments(float(A, K, C) X) -> (mean, var) {
  mean(a, c) +=! X(a, k, c)
  mean(a, c) = mean(a, c) / K
  var(a, c) +=! (X(a, k, c) - mean(a, c)) * (X(a, k, c) - mean(a, c))
  var(a, c) = var(a, c) / K
}""", full=dict(A=64, K=512, C=256), tiny=dict(A=3, K=7, C=5),
    inputs=lambda r, s: [_n(r, s["A"], s["K"], s["C"]) + 3])
def _moments(torch, a, t, s):
    X = t[0]

    def vm():
        v, m = torch.var_mean(X, dim=1, unbiased=False)
        return m, v
    return {"torch.var_mean(dim=1)": vm}


@program(name="tc group_convolution: 5-d NGCHW input, (G,F,C,KH,KW) weight, bias B(g, f), valid", kind="conv",
         src="""
# TC's group_convolution benchmark, groups as an explicit index dim
def group_convolution(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1, float(G,F) B) -> (O) {
  O(n, g, f, h, w) +=! I(n, g, c, h + kh, w + kw) * W1(g, f, c, kh, kw)
  O(n, g, f, h, w) = O(n, g, f, h, w) + B(g, f)
}""", full=dict(N=16, G=32, C=4, F=4, H=56, W=56, KH=3, KW=3), tiny=dict(N=3, G=3, C=5, F=3, H=7, W=9, KH=3, KW=3),
    inputs=lambda r, s: [_n(r, s["N"], s["G"], s["C"], s["H"], s["W"]),
                         _w(r, s["G"], s["F"], s["C"], s["KH"], s["KW"]), _w(r, s["G"], s["F"])])
def _group_conv(torch, a, t, s):
    F = torch.nn.functional
    I, W1, B = t
    N, G, C, H, W, Fo = s["N"], s["G"], s["C"], s["H"], s["W"], s["F"]
    w = W1.reshape(G * Fo, C, s["KH"], s["KW"])
    b = B.reshape(-1)

    def run():
        y = F.conv2d(I.view(N, G * C, H, W), w, b, groups=G)
        return y.view(N, G, Fo, y.shape[2], y.shape[3])
    return {"F.conv2d(groups=G)": run}


@program(name="tc tensordot: O(n, c1, c3, h, w) +=! I0(n, c1, c2, h, w) * I1(n, c2, c3, h, w)", kind="matmul",
         src="""
# TC's TensorDot benchmark: a small contraction over c2 at every (n, h, w)
def tensordot(float(N, C1, C2, H, W) I0, float(N, C2, C3, H, W) I1) -> (O) {
  O(n, c1, c3, h, w) +=! I0(n, c1, c2, h, w) * I1(n, c2, c3, h, w)
}""", full=dict(N=8, C1=64, C2=16, C3=32, H=14, W=14), tiny=dict(N=3, C1=5, C2=3, C3=7, H=3, W=5),
    inputs=lambda r, s: [_n(r, s["N"], s["C1"], s["C2"], s["H"], s["W"]),
                         _n(r, s["N"], s["C2"], s["C3"], s["H"], s["W"])])
def _tensordot(torch, a, t, s):
    I0, I1 = t
    N, C1, C2, C3, H, W = (s[k] for k in ("N", "C1", "C2", "C3", "H", "W"))

    def bmm():
        x = I0.view(N, C1, C2, H * W).permute(0, 3, 1, 2).reshape(N * H * W, C1, C2)
        y = I1.view(N, C2, C3, H * W).permute(0, 3, 1, 2).reshape(N * H * W, C2, C3)
        return torch.bmm(x, y).view(N, H, W, C1, C3).permute(0, 3, 4, 1, 2)
    return {"torch.einsum": lambda: torch.einsum("nabhw,nbchw->nachw", I0, I1),
            "permute + torch.bmm": bmm}


@program(name="tensordot over two axes in different orders C(i, j) +=! A(p, i, q) * B(j, q, p)", kind="matmul",
         src="""
# torch.tensordot(A, B, dims=([0, 2], [2, 1])): the contracted axes are first/last in A, last/middle in B
def tdot2(float(P, I, Q) A, float(J, Q, P) B) -> (C) {
  C(i, j) +=! A(p, i, q) * B(j, q, p)
}""", full=dict(P=32, I=512, Q=64, J=512), tiny=dict(P=3, I=5, Q=7, J=9),
    inputs=lambda r, s: [_n(r, s["P"], s["I"], s["Q"]), _w(r, s["J"], s["Q"], s["P"])])
def _tdot2(torch, a, t, s):
    A, B = t
    return {"torch.tensordot": lambda: torch.tensordot(A, B, dims=([0, 2], [2, 1])),
            "torch.einsum": lambda: torch.einsum("piq,jqp->ij", A, B)}


@program(name="cp decomposition reconstruction X(i, j, k) +=! A(i, r) * B(j, r) * C(k, r)", kind="matmul", src="""
# a rank-R CP (PARAFAC) tensor from its three factor matrices: outer products summed over the rank
def cp3(float(I, R) A, float(J, R) B, float(K, R) C) -> (X) {
  X(i, j, k) +=! A(i, r) * B(j, r) * C(k, r)
}""", full=dict(I=128, J=128, K=128, R=32), tiny=dict(I=3, J=5, K=7, R=3),
    inputs=lambda r, s: [_n(r, s["I"], s["R"]), _n(r, s["J"], s["R"]), _n(r, s["K"], s["R"])])
def _cp3(torch, a, t, s):
    A, B, C = t
    I, J, K, R = s["I"], s["J"], s["K"], s["R"]
    return {"torch.einsum": lambda: torch.einsum("ir,jr,kr->ijk", A, B, C),
            "khatri-rao + matmul": lambda: torch.matmul((A[:, None, :] * B[None, :, :]).reshape(I * J, R),
                                                        C.t()).view(I, J, K)}


@program(name="block-diagonal matmul x @ blockdiag(W_0..W_NB-1), 32x32 blocks by i / 32, i % 32", kind="matmul",
         src="""
# a block-diagonal linear layer (monarch / blocked dense): output feature i uses block i / 32 of the input
def blockdiag(float(B, 32 * NB) X, float(NB, 32, 32) W) -> (Y) {
  Y(b, i) +=! X(b, 32 * (i / 32) + j) * W(i / 32, j, i % 32) where i in 0:32 * NB
}""", full=dict(B=1024, NB=32), tiny=dict(B=5, NB=3),
    inputs=lambda r, s: [_n(r, s["B"], 32 * s["NB"]), _w(r, s["NB"], 32, 32)])
def _blockdiag(torch, a, t, s):
    X, W = t
    B, NB = s["B"], s["NB"]
    return {"torch.einsum on a (B, NB, 32) view": lambda: torch.einsum("bnj,nji->bni", X.view(B, NB, 32), W)
            .reshape(B, NB * 32),
            "bmm over blocks": lambda: torch.bmm(X.view(B, NB, 32).transpose(0, 1), W).transpose(0, 1)
            .reshape(B, NB * 32),
            "x @ torch.block_diag(*W)": lambda: torch.matmul(X, torch.block_diag(*W))}


@program(name="l-inf row normalize: m(n) max=! fabs(X(n, d)), X / m", kind="norm", src="""
# each row scaled by its largest magnitude (TC's abs/max reduction)
def linf_normalize(float(N, D) X) -> (Y, m) {
  m(n) max=! fabs(X(n, d))
  Y(n, d) = X(n, d) / m(n)
}""", full=dict(N=4096, D=1024), tiny=dict(N=5, D=7),
    inputs=lambda r, s: [_n(r, s["N"], s["D"])], pick=lambda r: np.concatenate([r[0], r[1][:, None]], 1))
def _linf(torch, a, t, s):
    X = t[0]

    def run():
        m = X.abs().amax(dim=1)
        return torch.cat([X / m[:, None], m[:, None]], 1)
    return {"x / x.abs().amax(1)": run}


@program(name="conv_transpose2d stride 1 as a gather (full conv, bounds as selects), (C, O, KH, KW) weight",
         kind="conv", src="""
# F.conv_transpose2d(x, w) at stride 1 = a full convolution: each output pixel gathers the inputs h - kh, w - kw
def convt_gather(float(N, C, H, W) I, float(C, O, KH, KW) Wt) -> (Y) {
  Y(n, o, h, w) +=! (h - kh >= 0 && h - kh < H && w - kw >= 0 && w - kw < W ? I(n, c, h - kh, w - kw) : 0)
                    * Wt(c, o, kh, kw) where h in 0:H + KH - 1, w in 0:W + KW - 1, kh in 0:KH, kw in 0:KW
}""", full=dict(N=8, C=64, O=64, H=32, W=32, KH=3, KW=3), tiny=dict(N=3, C=5, O=3, H=7, W=5, KH=3, KW=3),
    inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["C"], s["O"], s["KH"], s["KW"])])
def _convt_gather(torch, a, t, s):
    I, Wt = t
    return {"F.conv_transpose2d": lambda: torch.nn.functional.conv_transpose2d(I, Wt)}


@program(name="im2col gemm for a 3x3 valid conv: col(n, r, h, w) with r = 9 c + 3 kh + kw (div/mod), then a sum over r",
         kind="conv", src="""
# the im2col lowering written out: a (9C, OH, OW) column tensor per image, then O = Wt.view(M, 9C) @ col
def im2col_conv(float(N, C, H, W) I, float(M, C, 3, 3) Wt) -> (O) {
  col(n, r, h, w) = I(n, r / 9, h + (r % 9) / 3, w + r % 3) where r in 0:9 * C, h in 0:H - 2, w in 0:W - 2
  O(n, m, h, w) +=! Wt(m, r / 9, (r % 9) / 3, r % 3) * col(n, r, h, w)
}""", full=dict(N=8, C=64, M=64, H=32, W=32), tiny=dict(N=3, C=5, M=3, H=7, W=9),
    inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["M"], s["C"], 3, 3)])
def _im2col_gemm(torch, a, t, s):
    F = torch.nn.functional
    I, Wt = t
    N, M, H, W = s["N"], s["M"], s["H"], s["W"]
    return {"F.conv2d": lambda: F.conv2d(I, Wt),
            "F.unfold + matmul": lambda: torch.matmul(Wt.view(M, -1), F.unfold(I, 3)).view(N, M, H - 2, W - 2)}


# ---------------------------------------------------------------- session 45: vision, losses and layers

# ---------------------------------------------------------------- vision, losses, misc layers

@program(name="dcgan generator up-block: conv_transpose2d k=4 s=2 p=1 + bias + relu (where p = i + 1 - kh)",
         kind="conv", src="""
# one DCGAN generator block: ConvTranspose2d(C, O, 4, stride=2, padding=1) then ReLU (no batch norm);
# the input row feeding output row i through tap kh is p = i + 1 - kh when it is even
def dcgan_up(float(N,C,H,W) x, float(C,O,4,4) w, float(O) bias) -> (y) {
  y(n, o, i, j) +=! (p % 2 == 0 && q % 2 == 0 && p >= 0 && q >= 0 && p / 2 < H && q / 2 < W
                     ? x(n, c, p / 2, q / 2) : 0) * w(c, o, kh, kw)
      where i in 0:2*H, j in 0:2*W, kh in 0:4, kw in 0:4, p = i + 1 - kh, q = j + 1 - kw
  y(n, o, i, j) = max(y(n, o, i, j) + bias(o), 0)
}""", full=dict(N=16, C=256, H=8, W=8, O=128), tiny=dict(N=2, C=3, H=3, W=5, O=7),
    inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["C"], s["O"], 4, 4), _w(r, s["O"])])
def _dcgan_up(torch, a, t, s):
    F = torch.nn.functional
    x, w, b = t
    return {"F.conv_transpose2d(stride=2, padding=1) + relu": _nograd(
        torch, lambda: F.relu(F.conv_transpose2d(x, w, b, stride=2, padding=1)))}


@program(name="vit patch embedding 16x16 as a contraction, cls token + pos table, tokens n / GW, n % GW",
         kind="conv", src="""
# ViT: Conv2d(3, D, 16, stride=16) written as a sum over (c, p, q), the patches flattened row-major into
# tokens 1..GH*GW (the pos table has P = 1 + GH*GW rows), token 0 is the cls token
def vit_embed(float(B,3,16*GH,16*GW) img, float(D,3,16,16) w, float(D) bias, float(D) cls, float(P,D) pos) -> (tok) {
  tok(b, z, d) = cls(d) + pos(z, d) where b in 0:B, z in 0:1
  tok(b, 1 + n, d) +=! img(b, c, 16 * (n / GW) + p, 16 * (n % GW) + q) * w(d, c, p, q) where n in 0:P - 1
  tok(b, 1 + n, d) = tok(b, 1 + n, d) + bias(d) + pos(1 + n, d) where n in 0:P - 1
}""", full=dict(B=4, GH=14, GW=14, D=768, P=197), tiny=dict(B=2, GH=3, GW=1, D=5, P=4),
    inputs=lambda r, s: [_n(r, s["B"], 3, 16 * s["GH"], 16 * s["GW"]), _w(r, s["D"], 3, 16, 16),
                         _w(r, s["D"]), _n(r, s["D"]), _n(r, s["P"], s["D"])])
def _vit_embed(torch, a, t, s):
    F = torch.nn.functional
    img, w, b, cls, pos = t

    def run():
        p = F.conv2d(img, w, b, stride=16).flatten(2).transpose(1, 2)
        return torch.cat([cls.expand(img.shape[0], 1, -1), p], dim=1) + pos
    return {"F.conv2d(stride=16) + cat(cls) + pos": _nograd(torch, run)}


@program(name="swin window attention 7x7, windows by y / 7 and j % 7, relative bias table (169, NH), channels-last",
         kind="attention", src="""
# Swin-T stage-1 window attention (no shift) on q, k, v already projected and laid out channels-last (B, H, W, NH, D):
# query pixel (y, x) attends to the 49 pixels j of its 7x7 window, row 7 * (y / 7) + j / 7, column 7 * (x / 7) + j % 7;
# the bias of a (query, key) pair is table(idx, n), idx = (dy + 6) * 13 + (dx + 6) for the offset (dy, dx)
def swin_attn(float(B,7*GH,7*GW,NH,D) q, float(B,7*GH,7*GW,NH,D) k, float(B,7*GH,7*GW,NH,D) v,
              float(169,NH) table) -> (o) {
  s(b, y, x, n, j) +=! q(b, y, x, n, d) * k(b, 7 * (y / 7) + j / 7, 7 * (x / 7) + j % 7, n, d) * rsqrt(float(D))
      where j in 0:49
  s(b, y, x, n, j) = s(b, y, x, n, j) + table((y % 7 - j / 7 + 6) * 13 + x % 7 - j % 7 + 6, n)
  mx(b, y, x, n) max=! s(b, y, x, n, j)
  e(b, y, x, n, j) = exp(s(b, y, x, n, j) - mx(b, y, x, n))
  z(b, y, x, n) +=! e(b, y, x, n, j)
  o(b, y, x, n, c) +=! e(b, y, x, n, j) * v(b, 7 * (y / 7) + j / 7, 7 * (x / 7) + j % 7, n, c) / z(b, y, x, n)
}""", full=dict(B=16, GH=8, GW=8, NH=3, D=32), tiny=dict(B=2, GH=1, GW=2, NH=3, D=5),
    inputs=lambda r, s: [_n(r, s["B"], 7 * s["GH"], 7 * s["GW"], s["NH"], s["D"]) for _ in range(3)]
                        + [_n(r, 169, s["NH"])])
def _swin_attn(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, table = t
    B, GH, GW, NH, D = s["B"], s["GH"], s["GW"], s["NH"], s["D"]
    ii, jj = torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij")
    pos = torch.stack([ii.flatten(), jj.flatten()])                 # (2, 49)
    rel = pos[:, :, None] - pos[:, None, :] + 6                     # (2, 49, 49)
    index = rel[0] * 13 + rel[1]

    def win(x):                                                     # (B, H, W, NH, D) -> (B*nW, NH, 49, D)
        return x.view(B, GH, 7, GW, 7, NH, D).permute(0, 1, 3, 5, 2, 4, 6).reshape(B * GH * GW, NH, 49, D)

    def run():
        bias = table[index].permute(2, 0, 1)                        # (NH, 49, 49)
        o = F.scaled_dot_product_attention(win(q), win(k), win(v), attn_mask=bias)
        return o.view(B, GH, GW, NH, 7, 7, D).permute(0, 1, 4, 2, 5, 3, 6).reshape(B, 7 * GH, 7 * GW, NH, D)
    return {"window partition + F.scaled_dot_product_attention(bias) + reverse": _nograd(torch, run)}


@program(name="ssim loss, 7x7 uniform window (valid), five box sums, mean over maps", kind="loss", src="""
# 1 - mean SSIM (skimage's defaults for images in [0, 1]: 7x7 uniform window, K1 = 0.01, K2 = 0.03, population
# variances), per channel, valid windows only
def ssim_loss(float(N,C,H,W) x, float(N,C,H,W) y) -> (loss) {
  mx(n, c, h, w) +=! x(n, c, h + i, w + j) / 49 where i in 0:7, j in 0:7
  my(n, c, h, w) +=! y(n, c, h + i, w + j) / 49 where i in 0:7, j in 0:7
  sxx(n, c, h, w) +=! x(n, c, h + i, w + j) * x(n, c, h + i, w + j) / 49 where i in 0:7, j in 0:7
  syy(n, c, h, w) +=! y(n, c, h + i, w + j) * y(n, c, h + i, w + j) / 49 where i in 0:7, j in 0:7
  sxy(n, c, h, w) +=! x(n, c, h + i, w + j) * y(n, c, h + i, w + j) / 49 where i in 0:7, j in 0:7
  ssim(n, c, h, w) = (2 * a * b + 0.0001) * (2 * (sxy(n, c, h, w) - a * b) + 0.0009)
                   / ((a * a + b * b + 0.0001) * (sxx(n, c, h, w) - a * a + syy(n, c, h, w) - b * b + 0.0009))
      where a = mx(n, c, h, w), b = my(n, c, h, w)
  loss +=! (1 - ssim(n, c, h, w)) / (N * C * (H - 6) * (W - 6))
}""", full=dict(N=16, C=3, H=256, W=256), tiny=dict(N=2, C=3, H=9, W=11),
    inputs=lambda r, s: [r.uniform(0, 1, (s["N"], s["C"], s["H"], s["W"])).astype(np.float32),
                         r.uniform(0, 1, (s["N"], s["C"], s["H"], s["W"])).astype(np.float32)])
def _ssim_loss(torch, a, t, s):
    F = torch.nn.functional
    x, y = t

    def run():
        mx, my = F.avg_pool2d(x, 7, 1), F.avg_pool2d(y, 7, 1)
        sxx = F.avg_pool2d(x * x, 7, 1) - mx * mx
        syy = F.avg_pool2d(y * y, 7, 1) - my * my
        sxy = F.avg_pool2d(x * y, 7, 1) - mx * my
        ssim = (2 * mx * my + 1e-4) * (2 * sxy + 9e-4) / ((mx * mx + my * my + 1e-4) * (sxx + syy + 9e-4))
        return 1 - ssim.mean()
    return {"F.avg_pool2d x5 + elementwise + mean": _nograd(torch, run)}


@program(name="gaussian blur 5x5 with reflect padding (nested selects in the indices), one kernel for all channels",
         kind="conv", src="""
# torchvision-style gaussian_blur: the same 5x5 kernel g on every channel, reflect padding of 2 (row -1 reads row 1,
# row H reads row H - 2), written as the reflected index of each tap
def blur(float(N,C,H,W) x, float(5,5) g) -> (out) {
  out(n, c, h, w) +=! x(n, c, r < 0 ? -r : (r >= H ? 2 * H - 2 - r : r), q < 0 ? -q : (q >= W ? 2 * W - 2 - q : q)) * g(i, j)
      where h in 0:H, w in 0:W, i in 0:5, j in 0:5, r = h + i - 2, q = w + j - 2
}""", full=dict(N=8, C=3, H=512, W=512), tiny=dict(N=2, C=3, H=5, W=7),
    inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]),
                         (lambda k: np.outer(k, k).astype(np.float32))(
                             np.exp(-0.5 * (np.arange(5) - 2.0) ** 2 / 1.5 ** 2) / np.exp(
                                 -0.5 * (np.arange(5) - 2.0) ** 2 / 1.5 ** 2).sum())])
def _blur_reflect(torch, a, t, s):
    F = torch.nn.functional
    x, g = t
    C = s["C"]
    return {"F.pad(reflect) + F.conv2d(groups=C)": _nograd(
        torch, lambda: F.conv2d(F.pad(x, (2, 2, 2, 2), mode="reflect"), g.expand(C, 1, 5, 5), groups=C))}


@program(name="sobel edge magnitude, replicate padding by clamped indices, taps from index arithmetic",
         kind="conv", src="""
# grayscale images (N, H, W); Sobel gx has taps (j - 1) * (2 - (i - 1)^2) = [[-1,0,1],[-2,0,2],[-1,0,1]], gy its
# transpose; replicate padding: the tap's row and column clamped into the image
def sobel(float(N,H,W) img) -> (mag) {
  gx(n, h, w) +=! img(n, r, q) * (j - 1) * (2 - (i - 1) * (i - 1))
      where h in 0:H, w in 0:W, i in 0:3, j in 0:3, r = min(max(h + i - 1, 0), H - 1), q = min(max(w + j - 1, 0), W - 1)
  gy(n, h, w) +=! img(n, r, q) * (i - 1) * (2 - (j - 1) * (j - 1))
      where h in 0:H, w in 0:W, i in 0:3, j in 0:3, r = min(max(h + i - 1, 0), H - 1), q = min(max(w + j - 1, 0), W - 1)
  mag(n, h, w) = sqrt(gx(n, h, w) * gx(n, h, w) + gy(n, h, w) * gy(n, h, w) + 1e-6)
}""", full=dict(N=16, H=512, W=512), tiny=dict(N=2, H=5, W=7),
    inputs=lambda r, s: [r.uniform(0, 1, (s["N"], s["H"], s["W"])).astype(np.float32)])
def _sobel(torch, a, t, s):
    F = torch.nn.functional
    gx = torch.tensor([[-1., 0., 1.], [-2., 0., 2.], [-1., 0., 1.]])
    k = torch.stack([gx, gx.T])[:, None]                            # (2, 1, 3, 3)

    def run():
        g = F.conv2d(F.pad(t[0][:, None], (1, 1, 1, 1), mode="replicate"), k)
        return torch.sqrt((g * g).sum(1) + 1e-6)
    return {"F.pad(replicate) + F.conv2d (2 filters) + sqrt": _nograd(torch, run)}


@program(name="soft dice loss over classes, softmax logits + int32 label map (one-hot as a select), mean over K",
         kind="loss", src="""
# segmentation: softmax over K classes per pixel, per-class dice (2 |p . onehot| + 1) / (|p| + |onehot| + 1) summed
# over the batch and the pixels, loss = 1 - mean over classes
def dice_loss(float(N,K,H,W) logits, int32(N,H,W) tgt) -> (loss) {
  mx(n, h, w) max=! logits(n, k, h, w)
  e(n, k, h, w) = exp(logits(n, k, h, w) - mx(n, h, w))
  z(n, h, w) +=! e(n, k, h, w)
  inter(k) +=! tgt(n, h, w) == k ? e(n, k, h, w) / z(n, h, w) : 0
  psum(k) +=! e(n, k, h, w) / z(n, h, w)
  tsum(k) +=! tgt(n, h, w) == k ? 1.0 : 0.0 where k in 0:K
  loss +=! (1 - (2 * inter(k) + 1) / (psum(k) + tsum(k) + 1)) / K
}""", full=dict(N=8, K=21, H=128, W=128), tiny=dict(N=2, K=5, H=3, W=7),
    inputs=lambda r, s: [_n(r, s["N"], s["K"], s["H"], s["W"]),
                         r.integers(0, s["K"], (s["N"], s["H"], s["W"])).astype(np.int32)])
def _dice_loss(torch, a, t, s):
    F = torch.nn.functional
    logits, tgt = t

    def run():
        p = logits.softmax(1)
        oh = F.one_hot(tgt.long(), s["K"]).permute(0, 3, 1, 2).to(p.dtype)
        inter = (p * oh).sum((0, 2, 3))
        dice = (2 * inter + 1) / (p.sum((0, 2, 3)) + oh.sum((0, 2, 3)) + 1)
        return 1 - dice.mean()
    return {"softmax + F.one_hot + sums": _nograd(torch, run)}


@program(name="generalized box iou matrix (detr matcher cost), xyxy boxes per image, chained where bindings",
         kind="misc", src="""
# DETR's matcher: GIoU between every predicted box i and every target box j of an image, boxes (x0, y0, x1, y1)
def giou(float(B,N,4) pb, float(B,M,4) tb) -> (g) {
  g(b, i, j) = inter / uni - (encl - uni) / encl
    where iw = max(min(pb(b, i, 2), tb(b, j, 2)) - max(pb(b, i, 0), tb(b, j, 0)), 0.0),
          ih = max(min(pb(b, i, 3), tb(b, j, 3)) - max(pb(b, i, 1), tb(b, j, 1)), 0.0),
          inter = iw * ih,
          uni = (pb(b, i, 2) - pb(b, i, 0)) * (pb(b, i, 3) - pb(b, i, 1))
              + (tb(b, j, 2) - tb(b, j, 0)) * (tb(b, j, 3) - tb(b, j, 1)) - inter,
          encl = (max(pb(b, i, 2), tb(b, j, 2)) - min(pb(b, i, 0), tb(b, j, 0)))
               * (max(pb(b, i, 3), tb(b, j, 3)) - min(pb(b, i, 1), tb(b, j, 1)))
}""", full=dict(B=16, N=900, M=64), tiny=dict(B=2, N=5, M=3),
    inputs=lambda r, s: [_boxes(r, s["B"], s["N"]), _boxes(r, s["B"], s["M"])])
def _giou(torch, a, t, s):
    pb, tb = t

    def run():                                                      # torchvision.ops.generalized_box_iou, batched
        area1 = (pb[..., 2] - pb[..., 0]) * (pb[..., 3] - pb[..., 1])
        area2 = (tb[..., 2] - tb[..., 0]) * (tb[..., 3] - tb[..., 1])
        lt = torch.max(pb[:, :, None, :2], tb[:, None, :, :2])
        rb = torch.min(pb[:, :, None, 2:], tb[:, None, :, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        union = area1[:, :, None] + area2[:, None, :] - inter
        iou = inter / union
        lti = torch.min(pb[:, :, None, :2], tb[:, None, :, :2])
        rbi = torch.max(pb[:, :, None, 2:], tb[:, None, :, 2:])
        whi = (rbi - lti).clamp(min=0)
        area = whi[..., 0] * whi[..., 1]
        return iou - (area - union) / area
    return {"torchvision-style generalized_box_iou, batched": _nograd(torch, run)}


def _boxes(r, B, N):
    xy = r.uniform(0, 0.8, (B, N, 2))
    wh = r.uniform(0.02, 0.4, (B, N, 2))
    return np.concatenate([xy, xy + wh], -1).astype(np.float32)


@program(name="per-row histogram of values in [0, 1) into K bins (free size K), int32 counts as a one-hot sum",
         kind="data", src="""
# bin of x is floor(x * K) clamped into 0..K-1; K is given at the call
def hist(float(B,N) x) -> (int32(B,K) h) {
  h(b, k) +=! min(max(int32(floor(x(b, i) * K)), 0), K - 1) == k ? 1 : 0 where k in 0:K
}""", full=dict(B=64, N=65536, K=256), tiny=dict(B=3, N=11, K=5), free=("K",),
    inputs=lambda r, s: [r.uniform(0, 1, (s["B"], s["N"])).astype(np.float32)])
def _hist(torch, a, t, s):
    x = t[0]
    K = s["K"]

    def run():
        idx = (x * K).floor().clamp(0, K - 1).long()
        ones = torch.ones_like(idx, dtype=torch.int32)
        return torch.zeros(x.shape[0], K, dtype=torch.int32).scatter_add_(1, idx, ones)
    return {"floor + scatter_add_ of ones": _nograd(torch, run)}


@program(name="conv2d groups=2 dilation=2 padding=2 + bias, one statement per group (lhs offset OG + o), "
              "select padding",
         kind="conv", src="""
# Conv2d(2*CG, 2*OG, 3, padding=2, dilation=2, groups=2): group 0 reads channels 0..CG-1 into outputs 0..OG-1,
# group 1 channels CG.. into outputs OG..
def gconv(float(N,2*CG,H,W) x, float(2*OG,CG,3,3) w, float(2*OG) bias) -> (y) {
  y(n, o, h, v) +=! (r >= 0 && r < H && q >= 0 && q < W ? x(n, c, r, q) : 0) * w(o, c, kh, kw)
      where o in 0:OG, h in 0:H, v in 0:W, kh in 0:3, kw in 0:3, r = h + 2 * kh - 2, q = v + 2 * kw - 2
  y(n, OG + o, h, v) +=! (r >= 0 && r < H && q >= 0 && q < W ? x(n, CG + c, r, q) : 0) * w(OG + o, c, kh, kw)
      where o in 0:OG, h in 0:H, v in 0:W, kh in 0:3, kw in 0:3, r = h + 2 * kh - 2, q = v + 2 * kw - 2
  y(n, o, h, v) = y(n, o, h, v) + bias(o)
}""", full=dict(N=4, CG=32, OG=32, H=56, W=56), tiny=dict(N=2, CG=3, OG=5, H=5, W=7),
    inputs=lambda r, s: [_n(r, s["N"], 2 * s["CG"], s["H"], s["W"]), _w(r, 2 * s["OG"], s["CG"], 3, 3),
                         _w(r, 2 * s["OG"])])
def _gconv_dilated(torch, a, t, s):
    F = torch.nn.functional
    x, w, b = t
    return {"F.conv2d(groups=2, dilation=2, padding=2)": _nograd(
        torch, lambda: F.conv2d(x, w, b, padding=2, dilation=2, groups=2))}


def _unpool_inputs(r, s):
    N, C, Hp, Wp = s["N"], s["C"], s["Hp"], s["Wp"]
    x = _n(r, N, C, 2 * Hp, 2 * Wp)
    win = x.reshape(N, C, Hp, 2, Wp, 2).transpose(0, 1, 2, 4, 3, 5).reshape(N, C, Hp, Wp, 4)
    am = win.argmax(-1)
    h = 2 * np.arange(Hp)[:, None] + am // 2
    w = 2 * np.arange(Wp)[None, :] + am % 2
    return [np.ascontiguousarray(win.max(-1)), (h * (2 * Wp) + w).astype(np.int64)]


@program(name="max_unpool2d 2x2 (segnet decoder), int64 flat indices from max_pool2d, select per output pixel",
         kind="data", src="""
# SegNet: scatter the pooled maxima back to the positions max_pool2d(2, return_indices=True) recorded (flat h * W + w
# in the 2Hp x 2Wp map); every other pixel is 0
def unpool(float(N,C,Hp,Wp) v, int64(N,C,Hp,Wp) ind) -> (y) {
  y(n, c, h, w) = ind(n, c, h / 2, w / 2) == h * (2 * Wp) + w ? v(n, c, h / 2, w / 2) : 0
      where h in 0:2*Hp, w in 0:2*Wp
}""", full=dict(N=16, C=64, Hp=56, Wp=56), tiny=dict(N=2, C=3, Hp=3, Wp=5),
    inputs=_unpool_inputs)
def _unpool(torch, a, t, s):
    F = torch.nn.functional
    return {"F.max_unpool2d(2)": _nograd(torch, lambda: F.max_unpool2d(t[0], t[1], 2))}


@program(name="spatial transformer: affine_grid + bilinear grid_sample, zeros padding, align_corners=False",
         kind="data", src="""
# STN: output pixel (i, j) at normalised (xs, ys) (pixel centres), mapped by theta (N, 2, 3), sampled bilinearly
# (align_corners=False), corners outside the image read as 0
def stn(float(N,C,H,W) x, float(N,2,3) theta) -> (out) {
  out(n, c, i, j) = (1 - ax) * (1 - ay) * (r0 >= 0 && r0 < H && q0 >= 0 && q0 < W ? x(n, c, r0, q0) : 0)
                  + ax * (1 - ay) * (r0 >= 0 && r0 < H && q0 + 1 >= 0 && q0 + 1 < W ? x(n, c, r0, q0 + 1) : 0)
                  + (1 - ax) * ay * (r0 + 1 >= 0 && r0 + 1 < H && q0 >= 0 && q0 < W ? x(n, c, r0 + 1, q0) : 0)
                  + ax * ay * (r0 + 1 >= 0 && r0 + 1 < H && q0 + 1 >= 0 && q0 + 1 < W ? x(n, c, r0 + 1, q0 + 1) : 0)
    where i in 0:H, j in 0:W,
          xs = (2 * j + 1.0) / W - 1, ys = (2 * i + 1.0) / H - 1,
          gx = theta(n, 0, 0) * xs + theta(n, 0, 1) * ys + theta(n, 0, 2),
          gy = theta(n, 1, 0) * xs + theta(n, 1, 1) * ys + theta(n, 1, 2),
          ix = ((gx + 1) * W - 1) * 0.5, iy = ((gy + 1) * H - 1) * 0.5,
          q0 = int32(floor(ix)), r0 = int32(floor(iy)), ax = ix - floor(ix), ay = iy - floor(iy)
}""", full=dict(N=16, C=32, H=128, W=128), tiny=dict(N=2, C=3, H=5, W=7),
    inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]),
                         (np.array([[1, 0, 0], [0, 1, 0]], np.float32)
                          + r.uniform(-0.3, 0.3, (s["N"], 2, 3))).astype(np.float32)])
def _stn(torch, a, t, s):
    F = torch.nn.functional
    x, theta = t
    return {"F.affine_grid + F.grid_sample(zeros)": _nograd(torch, lambda: F.grid_sample(
        x, F.affine_grid(theta, list(x.shape), align_corners=False), mode="bilinear", padding_mode="zeros",
        align_corners=False))}


@program(name="nt-xent (simclr) loss: normalised rows, similarity / tau, diagonal masked by a select, "
              "positive by i < N ? i + N : i - N",
         kind="loss", src="""
# SimCLR: 2N projections (two views of N images, view 2 after view 1); cross entropy of each row's similarities
# (itself excluded) with the other view of the same image as the label; mean over the 2N rows
def nt_xent(float(2*N,D) z, float tau) -> (loss) {
  nrm(i) +=! z(i, d) * z(i, d)
  u(i, d) = z(i, d) / fmax(sqrt(nrm(i)), 1e-12)
  sim(i, j) +=! u(i, d) * u(j, d) / tau
  mx(i) max=! i != j ? sim(i, j) : -inf
  se(i) +=! i != j ? exp(sim(i, j) - mx(i)) : 0
  loss +=! (log(se(i)) + mx(i) - sim(i, i < N ? i + N : i - N)) / (2 * N)
}""", full=dict(N=1024, D=128), tiny=dict(N=3, D=5),
    inputs=lambda r, s: [_n(r, 2 * s["N"], s["D"]), np.array(0.1, np.float32)])
def _nt_xent(torch, a, t, s):
    F = torch.nn.functional
    z, tau = t
    N = s["N"]
    labels = torch.cat([torch.arange(N, 2 * N), torch.arange(0, N)])
    eye = torch.eye(2 * N, dtype=torch.bool)

    def run():
        u = F.normalize(z, dim=1)
        sim = (u @ u.T / tau).masked_fill(eye, float("-inf"))
        return F.cross_entropy(sim, labels)
    return {"F.normalize + matmul + masked_fill + F.cross_entropy": _nograd(torch, run)}


@program(name="shifted-window (swin sw-msa) attention: roll by 3 as index selects, region mask -100, "
              "relative bias table",
         kind="attention", src="""
# Swin SW-MSA in the original (unrolled) layout: pixel y sits at row ys = (y - 3) mod H of the rolled map; its window's
# key j is rolled row kr = 7 * (ys / 7) + j / 7, original row (kr + 3) mod H (both mods written as selects: see note 1
# for the same program with % (7 * GH), which does not finish compiling); pairs from different regions of the
# rolled map (rows < H - 7, < H - 3, the rest; the same for columns) get -100, as Swin's attn_mask
def swin_shift(float(B,7*GH,7*GW,NH,D) q, float(B,7*GH,7*GW,NH,D) k, float(B,7*GH,7*GW,NH,D) v,
               float(169,NH) table) -> (o) {
  s(b, y, x, n, j) +=! q(b, y, x, n, d) * k(b, kr < 7 * GH - 3 ? kr + 3 : kr + 3 - 7 * GH, kc < 7 * GW - 3 ? kc + 3 : kc + 3 - 7 * GW, n, d) * rsqrt(float(D))
      where j in 0:49, ys = y >= 3 ? y - 3 : y + 7 * GH - 3, xs = x >= 3 ? x - 3 : x + 7 * GW - 3,
            kr = 7 * (ys / 7) + j / 7, kc = 7 * (xs / 7) + j % 7
  s(b, y, x, n, j) = s(b, y, x, n, j) + table((ys % 7 - j / 7 + 6) * 13 + xs % 7 - j % 7 + 6, n)
      + ((ys < 7 * GH - 7 ? 0 : (ys < 7 * GH - 3 ? 1 : 2)) != (kr < 7 * GH - 7 ? 0 : (kr < 7 * GH - 3 ? 1 : 2))
         || (xs < 7 * GW - 7 ? 0 : (xs < 7 * GW - 3 ? 1 : 2)) != (kc < 7 * GW - 7 ? 0 : (kc < 7 * GW - 3 ? 1 : 2))
         ? -100.0 : 0.0)
      where ys = y >= 3 ? y - 3 : y + 7 * GH - 3, xs = x >= 3 ? x - 3 : x + 7 * GW - 3,
            kr = 7 * (ys / 7) + j / 7, kc = 7 * (xs / 7) + j % 7
  mx(b, y, x, n) max=! s(b, y, x, n, j)
  e(b, y, x, n, j) = exp(s(b, y, x, n, j) - mx(b, y, x, n))
  z(b, y, x, n) +=! e(b, y, x, n, j)
  o(b, y, x, n, c) +=! e(b, y, x, n, j) * v(b, kr < 7 * GH - 3 ? kr + 3 : kr + 3 - 7 * GH, kc < 7 * GW - 3 ? kc + 3 : kc + 3 - 7 * GW, n, c) / z(b, y, x, n)
      where ys = y >= 3 ? y - 3 : y + 7 * GH - 3, xs = x >= 3 ? x - 3 : x + 7 * GW - 3,
            kr = 7 * (ys / 7) + j / 7, kc = 7 * (xs / 7) + j % 7
}""", full=dict(B=16, GH=8, GW=8, NH=3, D=32), tiny=dict(B=2, GH=3, GW=2, NH=3, D=5),
    inputs=lambda r, s: [_n(r, s["B"], 7 * s["GH"], 7 * s["GW"], s["NH"], s["D"]) for _ in range(3)]
                        + [_n(r, 169, s["NH"])])
def _swin_shift(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, table = t
    B, GH, GW, NH, D = s["B"], s["GH"], s["GW"], s["NH"], s["D"]
    H, W = 7 * GH, 7 * GW
    ii, jj = torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij")
    pos = torch.stack([ii.flatten(), jj.flatten()])
    rel = pos[:, :, None] - pos[:, None, :] + 6
    index = rel[0] * 13 + rel[1]
    img = torch.zeros(H, W)                                         # Swin's attn_mask buffer, made once
    cnt = 0
    for hs in (slice(0, -7), slice(-7, -3), slice(-3, None)):
        for ws in (slice(0, -7), slice(-7, -3), slice(-3, None)):
            img[hs, ws] = cnt
            cnt += 1
    mw = img.view(GH, 7, GW, 7).permute(0, 2, 1, 3).reshape(GH * GW, 49)
    mask = (mw[:, None, :] != mw[:, :, None]).float() * -100.0      # (nW, 49, 49)

    def win(x):
        x = torch.roll(x, (-3, -3), dims=(1, 2))
        return x.view(B, GH, 7, GW, 7, NH, D).permute(0, 1, 3, 5, 2, 4, 6).reshape(B, GH * GW, NH, 49, D)

    def run():
        bias = table[index].permute(2, 0, 1)                        # (NH, 49, 49)
        am = bias[None, None] + mask[None, :, None]                 # (1, nW, NH, 49, 49)
        o = F.scaled_dot_product_attention(win(q), win(k), win(v), attn_mask=am)
        o = o.view(B, GH, GW, NH, 7, 7, D).permute(0, 1, 4, 2, 5, 3, 6).reshape(B, H, W, NH, D)
        return torch.roll(o, (3, 3), dims=(1, 2))
    return {"roll + windows + F.scaled_dot_product_attention(bias + mask) + roll back": _nograd(torch, run)}


# ---------------------------------------------------------------- session 46: LLM inference, signal processing


# ---------------------------------------------------------------- LLM inference kernels


@program(name="fused residual add + rms norm (llama), returns the new residual and the normed rows",
         kind="norm", src="""
# h = x + res; y = h / sqrt(mean(h^2) + eps) * g, both returned (the next layer needs the residual)
def add_rms_norm(float(N, D) x, float(N, D) res, float(D) g) -> (h, y) {
  h(n, d) = x(n, d) + res(n, d)
  ms(n) +=! h(n, d) * h(n, d) / D
  y(n, d) = h(n, d) * rsqrt(ms(n) + 1e-6) * g(d)
}""", full=dict(N=4096, D=1024), tiny=dict(N=5, D=7),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["N"], s["D"]), 1 + 0.1 * _n(r, s["D"])])
def _h21_add_rms_norm(torch, a, t, s):
    F = torch.nn.functional
    x, res, g = t

    def run():
        h = x + res
        return h, F.rms_norm(h, (s["D"],), g, 1e-6)
    return {"add + F.rms_norm": run}


@program(name="rope, half-split pairs (gpt-neox), angles from int32 position ids and 10000^(-2i/D)",
         kind="elementwise", src="""
# q is (B, S, H, D) batch-first; element i pairs with i + D/2; the frequencies are computed, not a table
def rope_neox(float(B, S, H, D) q, int32(B, S) pos) -> (out) {
  ang(b, s, i) = float(pos(b, s)) * pow(10000.0, -float(2 * i) / D) where i in 0:D / 2
  out(b, s, h, i) = q(b, s, h, i) * cos(ang(b, s, i)) - q(b, s, h, i + D / 2) * sin(ang(b, s, i))
  out(b, s, h, i + D / 2) = q(b, s, h, i + D / 2) * cos(ang(b, s, i)) + q(b, s, h, i) * sin(ang(b, s, i))
}""", full=dict(B=4, S=512, H=16, D=64), tiny=dict(B=3, S=5, H=3, D=6),
    inputs=lambda r, s: [_n(r, s["B"], s["S"], s["H"], s["D"]),
                         (r.integers(0, 64, (s["B"], 1)) + np.arange(s["S"])[None, :]).astype(np.int32)])
def _h21_rope_neox(torch, a, t, s):
    q, pos = t
    D = s["D"]
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))

    def run():
        ang = pos[:, :, None].float() * inv_freq                       # (B, S, D/2)
        emb = torch.cat([ang, ang], -1)[:, :, None, :]                 # (B, S, 1, D)
        q1, q2 = q.chunk(2, -1)
        return q * emb.cos() + torch.cat([-q2, q1], -1) * emb.sin()
    return {"hf rotate_half (cos, sin, cat)": run}


def _h21_lens(r, B, S):
    return r.integers(1, S + 1, B).astype(np.int32)


@program(name="decode attention, 1 query per sequence over a padded kv cache, int32 lengths mask",
         kind="attention", src="""
# one new token per sequence: q (B, H, D) against the cache K, V (B, H, S, D), of which len(b) slots are valid
def decode_attn(float(B, H, D) q, float(B, H, S, D) K, float(B, H, S, D) V, int32(B) len) -> (o) {
  sc(b, h, s) +=! q(b, h, d) * K(b, h, s, d)
  sc(b, h, s) = s < len(b) ? sc(b, h, s) * rsqrt(float(D)) : -inf
  mx(b, h) max=! sc(b, h, s)
  p(b, h, s) = exp(sc(b, h, s) - mx(b, h))
  z(b, h) +=! p(b, h, s)
  o(b, h, d) +=! p(b, h, s) * V(b, h, s, d) / z(b, h)
}""", full=dict(B=4, H=16, S=1024, D=128), tiny=dict(B=3, H=5, S=7, D=5),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["D"]), _n(r, s["B"], s["H"], s["S"], s["D"]),
                         _n(r, s["B"], s["H"], s["S"], s["D"]), _h21_lens(r, s["B"], s["S"])])
def _h21_decode_attn(torch, a, t, s):
    F = torch.nn.functional
    q, K, V, ln = t
    mask = (torch.arange(s["S"])[None, :] < ln[:, None].long())[:, None, None, :]   # (B, 1, 1, S)
    return {"F.sdpa (bool mask)": _nograd(torch, lambda: F.scaled_dot_product_attention(
        q[:, :, None], K, V, attn_mask=mask)[:, :, 0])}


@program(name="grouped-query decode attention, head h reads kv head h / (H / KV)", kind="attention", src="""
# llama-style GQA: H query heads share KV cache heads, H / KV query heads per kv head
def gqa_decode(float(B, H, D) q, float(B, KV, S, D) K, float(B, KV, S, D) V) -> (o) {
  sc(b, h, s) +=! q(b, h, d) * K(b, h / (H / KV), s, d) * rsqrt(float(D))
  mx(b, h) max=! sc(b, h, s)
  p(b, h, s) = exp(sc(b, h, s) - mx(b, h))
  z(b, h) +=! p(b, h, s)
  o(b, h, d) +=! p(b, h, s) * V(b, h / (H / KV), s, d) / z(b, h)
}""", full=dict(B=2, H=32, KV=8, S=1024, D=128), tiny=dict(B=3, H=6, KV=3, S=7, D=5),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["D"]), _n(r, s["B"], s["KV"], s["S"], s["D"]),
                         _n(r, s["B"], s["KV"], s["S"], s["D"])])
def _h21_gqa_decode(torch, a, t, s):
    F = torch.nn.functional
    q, K, V = t
    rep = s["H"] // s["KV"]
    return {"F.sdpa(enable_gqa=True)": _nograd(torch, lambda: F.scaled_dot_product_attention(
                q[:, :, None], K, V, enable_gqa=True)[:, :, 0]),
            "repeat_interleave + F.sdpa": _nograd(torch, lambda: F.scaled_dot_product_attention(
                q[:, :, None], K.repeat_interleave(rep, 1), V.repeat_interleave(rep, 1))[:, :, 0])}


@program(name="sliding-window causal attention (mistral), keys i - w for w in 0:W, W a free size",
         kind="attention", src="""
# each query attends to itself and the W - 1 keys before it; scores kept per offset w, (B, H, S, W)
def swa(float(B, H, S, D) q, float(B, H, S, D) k, float(B, H, S, D) v) -> (o) {
  sc(b, h, i, w) +=! (i - w >= 0 ? q(b, h, i, d) * k(b, h, i - w, d) : 0) where i in 0:S, w in 0:W
  sc(b, h, i, w) = i - w >= 0 ? sc(b, h, i, w) * rsqrt(float(D)) : -inf
  mx(b, h, i) max=! sc(b, h, i, w)
  p(b, h, i, w) = exp(sc(b, h, i, w) - mx(b, h, i))
  z(b, h, i) +=! p(b, h, i, w)
  o(b, h, i, d) +=! (i - w >= 0 ? p(b, h, i, w) * v(b, h, i - w, d) : 0) / z(b, h, i) where i in 0:S, w in 0:W
}""", full=dict(B=2, H=8, S=512, D=64, W=128), tiny=dict(B=3, H=3, S=9, D=5, W=4), free=("W",),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["S"], s["D"]) for _ in range(3)])
def _h21_swa(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t
    i = torch.arange(s["S"])
    band = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - s["W"])       # (S, S), built once
    return {"F.sdpa (band mask)": _nograd(torch, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=band))}


@program(name="alibi causal attention, slopes 2^(-8 (h+1) / H) computed in the kernel", kind="attention",
         src="""
# bloom / mpt style: no positions, a per-head linear penalty on the distance i - j, causal
def alibi(float(B, H, S, D) q, float(B, H, S, D) k, float(B, H, S, D) v) -> (o) {
  sc(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  sc(b, h, i, j) = j <= i ? sc(b, h, i, j) * rsqrt(float(D)) - exp2(-8.0 * float(h + 1) / H) * float(i - j) : -inf
  mx(b, h, i) max=! sc(b, h, i, j)
  p(b, h, i, j) = exp(sc(b, h, i, j) - mx(b, h, i))
  z(b, h, i) +=! p(b, h, i, j)
  o(b, h, i, d) +=! p(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
}""", full=dict(B=2, H=8, S=512, D=64), tiny=dict(B=3, H=5, S=7, D=5),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["S"], s["D"]) for _ in range(3)])
def _h21_alibi(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t
    H, S = s["H"], s["S"]
    slopes = 2.0 ** (-8.0 * torch.arange(1, H + 1, dtype=torch.float32) / H)
    i = torch.arange(S)
    dist = (i[:, None] - i[None, :]).float()
    bias = (-slopes[:, None, None] * dist).masked_fill(dist < 0, float("-inf"))   # (H, S, S), built once
    return {"F.sdpa (float alibi mask)": _nograd(torch, lambda: F.scaled_dot_product_attention(
        q, k, v, attn_mask=bias))}


@program(name="swiglu mlp, weights in nn.Linear layout: W2 (silu(x W1^T) * x W3^T)", kind="mlp", src="""
# llama feed-forward: gate W1, up W3, down W2, all (out, in)
def swiglu(float(N, D) x, float(F, D) W1, float(F, D) W3, float(D, F) W2) -> (y) {
  a(n, f) +=! x(n, d) * W1(f, d)
  g(n, f) +=! x(n, d) * W3(f, d)
  u(n, f) = a(n, f) * sigmoid(a(n, f)) * g(n, f)
  y(n, o) +=! u(n, f) * W2(o, f)
}""", full=dict(N=64, D=512, F=1408), tiny=dict(N=3, D=7, F=5),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _w(r, s["F"], s["D"]), _w(r, s["F"], s["D"]),
                         _w(r, s["D"], s["F"])])
def _h21_swiglu(torch, a, t, s):
    F = torch.nn.functional
    x, W1, W3, W2 = t
    return {"F.linear x3 + F.silu": _nograd(torch, lambda: F.linear(F.silu(F.linear(x, W1)) * F.linear(x, W3), W2))}


@program(name="int8 weight-only linear, per-output-channel scales, bias (dequantize in the sum)",
         kind="matmul", src="""
# weight-only quantization: W = scale(o) * Wq(o, i), Wq int8; the scale is applied once after the sum
def w8_linear(float(N, I) x, int8(O, I) Wq, float(O) scale, float(O) bias) -> (y) {
  y(n, o) +=! x(n, i) * float(Wq(o, i))
  y(n, o) = y(n, o) * scale(o) + bias(o)
}""", full=dict(N=16, I=2048, O=2048), tiny=dict(N=3, I=7, O=5),
    inputs=lambda r, s: [_n(r, s["N"], s["I"]), r.integers(-127, 128, (s["O"], s["I"])).astype(np.int8),
                         (r.random(s["O"]) * 0.02 / np.sqrt(s["I"])).astype(np.float32), _n(r, s["O"])])
def _h21_w8_linear(torch, a, t, s):
    F = torch.nn.functional
    x, Wq, scale, bias = t
    return {"torch._weight_int8pack_mm + bias": lambda: torch._weight_int8pack_mm(x, Wq, scale) + bias,
            "F.linear(x, Wq.float()) * scale + bias": lambda: F.linear(x, Wq.float()) * scale + bias}


def _h21_rope_tables(S, D):
    ang = np.arange(S)[:, None] * 10000.0 ** (-np.arange(0, D, 2) / D)[None, :]
    return [np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)]


@program(name="kv-cache append with rope on the new key (gpt-j even/odd pairs), per-sequence int32 slot",
         kind="elementwise", src="""
# the new key is rotated at its position (pairs 2i, 2i+1, cos/sin tables (P, D/2)), then key and value are
# written into slot pos(b) of the caches; the updated caches are new tensors
def kv_append(float(B, KV, S, 2 * D2) Kc, float(B, KV, S, 2 * D2) Vc, float(B, KV, 2 * D2) kn,
              float(B, KV, 2 * D2) vn, int32(B) pos, float(P, D2) cs, float(P, D2) sn) -> (K, V) {
  kr(b, h, d) = d % 2 == 0 ? kn(b, h, d) * cs(pos(b), d / 2) - kn(b, h, d + 1) * sn(pos(b), d / 2)
                           : kn(b, h, d) * cs(pos(b), d / 2) + kn(b, h, d - 1) * sn(pos(b), d / 2) where d in 0:2 * D2
  K(b, h, s, d) = s == pos(b) ? kr(b, h, d) : Kc(b, h, s, d)
  V(b, h, s, d) = s == pos(b) ? vn(b, h, d) : Vc(b, h, s, d)
}""", full=dict(B=4, KV=16, S=512, P=512, D2=32), tiny=dict(B=3, KV=5, S=7, P=7, D2=3),
    inputs=lambda r, s: [_n(r, s["B"], s["KV"], s["S"], 2 * s["D2"]), _n(r, s["B"], s["KV"], s["S"], 2 * s["D2"]),
                         _n(r, s["B"], s["KV"], 2 * s["D2"]), _n(r, s["B"], s["KV"], 2 * s["D2"]),
                         r.integers(0, s["S"], s["B"]).astype(np.int32)] + _h21_rope_tables(s["P"], 2 * s["D2"]))
def _h21_kv_append(torch, a, t, s):
    Kc, Vc, kn, vn, pos, cs, sn = t
    B = s["B"]

    def run():
        p = pos.long()
        c, si = cs[p][:, None, :], sn[p][:, None, :]                     # (B, 1, D/2)
        x1, x2 = kn[..., 0::2], kn[..., 1::2]
        kr = torch.stack([x1 * c - x2 * si, x2 * c + x1 * si], -1).flatten(-2)
        K, V = Kc.clone(), Vc.clone()
        K[torch.arange(B), :, p] = kr
        V[torch.arange(B), :, p] = vn
        return K, V
    return {"rope + clone + index_put": run}


@program(name="sampling distribution: softmax(logits / temperature) and its log, float scalar temperature",
         kind="softmax", src="""
# next-token probabilities at temperature temp, and the log-probabilities (for the sampled token's score)
def temp_softmax(float(B, V) logits, float temp) -> (p, lp) {
  mx(b) max=! logits(b, v)
  e(b, v) = exp((logits(b, v) - mx(b)) / temp)
  z(b) +=! e(b, v)
  p(b, v) = e(b, v) / z(b)
  lp(b, v) = (logits(b, v) - mx(b)) / temp - log(z(b))
}""", full=dict(B=32, V=32000), tiny=dict(B=3, V=11),
    inputs=lambda r, s: [3 * _n(r, s["B"], s["V"]), np.array(0.7, np.float32)])
def _h21_temp_softmax(torch, a, t, s):
    F = torch.nn.functional
    logits, temp = t
    tf = float(temp)

    def run():
        x = logits / tf
        return F.softmax(x, -1), F.log_softmax(x, -1)
    return {"F.softmax + F.log_softmax": run}


@program(name="greedy next token: final rms norm, lm head (V, D), argmax over the vocabulary",
         kind="decode", src="""
# the last step of a decoder: norm the hidden state, project to the vocabulary, take the best token
def greedy_next(float(B, D) h, float(D) g, float(V, D) Wout) -> (tok) {
  ms(b) +=! h(b, d) * h(b, d) / D
  hn(b, d) = h(b, d) * rsqrt(ms(b) + 1e-5) * g(d)
  logit(b, v) +=! hn(b, d) * Wout(v, d)
  tok(b) argmax=! logit(b, v)
}""", full=dict(B=8, D=512, V=16000), tiny=dict(B=3, D=7, V=11),
    inputs=lambda r, s: [_n(r, s["B"], s["D"]), 1 + 0.1 * _n(r, s["D"]), _w(r, s["V"], s["D"])])
def _h21_greedy_next(torch, a, t, s):
    F = torch.nn.functional
    h, g, W = t
    return {"F.rms_norm + F.linear + argmax": _nograd(torch, lambda: torch.argmax(
        F.linear(F.rms_norm(h, (s["D"],), g, 1e-5), W), -1))}


def _h21_block_inputs(r, s):
    B, C, NH, DH, S, F = s["B"], s["C"], s["NH"], s["DH"], s["S"], s["F"]
    return [_n(r, B, C), _n(r, B, NH, S, DH), _n(r, B, NH, S, DH), 1 + 0.1 * _n(r, C), 1 + 0.1 * _n(r, C),
            _w(r, NH, DH, C), _w(r, NH, DH, C), _w(r, NH, DH, C), _w(r, C, NH * DH).reshape(C, NH, DH),
            _w(r, F, C), _w(r, F, C), _w(r, C, F)]


@program(name="one decode step of a llama block: rms norm, qkv, attention over cache + new token, "
              "o-proj + residual, rms norm, swiglu + residual", kind="transformer", src="""
# x (B, C) is the new token; the cache holds S earlier keys/values per head; the new key/value join the softmax
def llama_block_step(float(B, C) x, float(B, NH, S, DH) Kc, float(B, NH, S, DH) Vc, float(C) g1, float(C) g2,
                     float(NH, DH, C) Wq, float(NH, DH, C) Wk, float(NH, DH, C) Wv, float(C, NH, DH) Wo,
                     float(F, C) W1, float(F, C) W3, float(C, F) W2) -> (y) {
  ms(b) +=! x(b, c) * x(b, c) / C
  xn(b, c) = x(b, c) * rsqrt(ms(b) + 1e-6) * g1(c)
  q(b, h, d) +=! xn(b, c) * Wq(h, d, c)
  kn(b, h, d) +=! xn(b, c) * Wk(h, d, c)
  vn(b, h, d) +=! xn(b, c) * Wv(h, d, c)
  sc(b, h, s) +=! q(b, h, d) * Kc(b, h, s, d) * rsqrt(float(DH))
  sn(b, h) +=! q(b, h, d) * kn(b, h, d) * rsqrt(float(DH))
  mx(b, h) max=! sc(b, h, s)
  mx(b, h) = max(mx(b, h), sn(b, h))
  p(b, h, s) = exp(sc(b, h, s) - mx(b, h))
  pn(b, h) = exp(sn(b, h) - mx(b, h))
  z(b, h) +=! p(b, h, s)
  z(b, h) = z(b, h) + pn(b, h)
  a(b, h, d) +=! p(b, h, s) * Vc(b, h, s, d)
  a(b, h, d) = (a(b, h, d) + pn(b, h) * vn(b, h, d)) / z(b, h)
  r(b, c) +=! a(b, h, d) * Wo(c, h, d)
  r(b, c) = r(b, c) + x(b, c)
  ms2(b) +=! r(b, c) * r(b, c) / C
  rn(b, c) = r(b, c) * rsqrt(ms2(b) + 1e-6) * g2(c)
  u1(b, f) +=! rn(b, c) * W1(f, c)
  u3(b, f) +=! rn(b, c) * W3(f, c)
  u(b, f) = u1(b, f) * sigmoid(u1(b, f)) * u3(b, f)
  y(b, c) +=! u(b, f) * W2(c, f)
  y(b, c) = y(b, c) + r(b, c)
}""", full=dict(B=4, C=512, NH=8, DH=64, S=512, F=1408), tiny=dict(B=3, C=7, NH=3, DH=5, S=5, F=9),
    inputs=_h21_block_inputs)
def _h21_llama_block_step(torch, a, t, s):
    F = torch.nn.functional
    x, Kc, Vc, g1, g2, Wq, Wk, Wv, Wo, W1, W3, W2 = t
    B, C, NH, DH = s["B"], s["C"], s["NH"], s["DH"]
    Wqkv = torch.cat([Wq, Wk, Wv]).reshape(3 * NH * DH, C)
    Wo_ = Wo.reshape(C, NH * DH)

    def run():
        xn = F.rms_norm(x, (C,), g1, 1e-6)
        q, k, v = F.linear(xn, Wqkv).view(B, 3, NH, 1, DH).unbind(1)
        att = F.scaled_dot_product_attention(q, torch.cat([Kc, k], 2), torch.cat([Vc, v], 2))
        r = x + F.linear(att.reshape(B, NH * DH), Wo_)
        rn = F.rms_norm(r, (C,), g2, 1e-6)
        return r + F.linear(F.silu(F.linear(rn, W1)) * F.linear(rn, W3), W2)
    return {"F.rms_norm, F.linear, cat + F.sdpa, swiglu": _nograd(torch, run)}


@program(name="autoregressive greedy loop of a 1-layer attention lm, kv cache grown in the loop, "
              "token fed back", kind="decode", src="""
# T steps (the rows of the position table pe); step t embeds the previous token, attends over keys 0..t,
# projects to the vocabulary and takes the argmax
def ar_greedy(float(V, E) emb, float(T, E) pe, float(E, E) Wq, float(E, E) Wk, float(E, E) Wv, float(E, E) Wo,
              float(V, E) Wout, int32(B) start) -> (tok) {
  for t in T {
    if t == 0 { x(b, e) = emb(start(b), e) + pe(t, e) }
    else      { x(b, e) = emb(tok(t - 1, b), e) + pe(t, e) }
    q(b, e) +=! x(b, c) * Wq(e, c)
    kc(t, b, e) +=! x(b, c) * Wk(e, c)
    vc(t, b, e) +=! x(b, c) * Wv(e, c)
    sc(b, j) +=! q(b, e) * kc(j, b, e) * rsqrt(float(E)) where j in 0:t+1
    mx(b) max=! sc(b, j) where j in 0:t+1
    p(b, j) = exp(sc(b, j) - mx(b)) where j in 0:t+1
    z(b) +=! p(b, j) where j in 0:t+1
    a(b, e) +=! p(b, j) * vc(j, b, e) / z(b) where j in 0:t+1
    hh(b, e) +=! a(b, c) * Wo(e, c)
    hh(b, e) = hh(b, e) + x(b, e)
    logit(b, v) +=! hh(b, e) * Wout(v, e)
    tok(t, b) argmax=! logit(b, v)
  }
}""", full=dict(T=16, B=8, E=256, V=1000), tiny=dict(T=5, B=3, E=7, V=11),
    inputs=lambda r, s: [_n(r, s["V"], s["E"]), 0.5 * _n(r, s["T"], s["E"])] +
                        [_w(r, s["E"], s["E"]) for _ in range(4)] +
                        [_w(r, s["V"], s["E"]), r.integers(0, s["V"], s["B"]).astype(np.int32)])
def _h21_ar_greedy(torch, a, t, s):
    F = torch.nn.functional
    emb, pe, Wq, Wk, Wv, Wo, Wout, start = t
    T, B, E = s["T"], s["B"], s["E"]
    Wqkv = torch.cat([Wq, Wk, Wv])

    def loop():
        kc = torch.empty(B, 1, T, E)
        vc = torch.empty(B, 1, T, E)
        out = torch.empty(T, B, dtype=torch.long)
        tok = start.long()
        for k in range(T):
            x = F.embedding(tok, emb) + pe[k]
            q, kk, vv = F.linear(x, Wqkv).view(B, 3, 1, 1, E).unbind(1)
            kc[:, :, k:k + 1] = kk
            vc[:, :, k:k + 1] = vv
            att = F.scaled_dot_product_attention(q, kc[:, :, :k + 1], vc[:, :, :k + 1]).reshape(B, E)
            hh = x + F.linear(att, Wo)
            tok = torch.argmax(F.linear(hh, Wout), -1)
            out[k] = tok
        return out
    return {"F.embedding + F.linear + F.sdpa + argmax loop": _nograd(torch, loop)}


@program(name="mixture of two swiglu experts, dense softmax gate over 2, stacked expert weights (2, F, D)",
         kind="mlp", src="""
# every token goes through both experts, mixed by its softmax gate
def moe2(float(N, D) x, float(2, D) Wg, float(2, F, D) W1, float(2, F, D) W3, float(2, D, F) W2) -> (y) {
  gl(n, e) +=! x(n, d) * Wg(e, d)
  gm(n) max=! gl(n, e)
  ge(n, e) = exp(gl(n, e) - gm(n))
  gz(n) +=! ge(n, e)
  a(n, e, f) +=! x(n, d) * W1(e, f, d)
  b3(n, e, f) +=! x(n, d) * W3(e, f, d)
  u(n, e, f) = a(n, e, f) * sigmoid(a(n, e, f)) * b3(n, e, f) * ge(n, e) / gz(n)
  y(n, o) +=! u(n, e, f) * W2(e, o, f)
}""", full=dict(N=128, D=512, F=1024), tiny=dict(N=3, D=7, F=5),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _w(r, 2, s["D"]), _w(r, 2, s["F"], s["D"]),
                         _w(r, 2, s["F"], s["D"]), _w(r, 2, s["D"], s["F"])])
def _h21_moe2(torch, a, t, s):
    F = torch.nn.functional
    x, Wg, W1, W3, W2 = t

    def run():
        g = F.softmax(F.linear(x, Wg), -1)
        y = g[:, 0:1] * F.linear(F.silu(F.linear(x, W1[0])) * F.linear(x, W3[0]), W2[0])
        return y + g[:, 1:2] * F.linear(F.silu(F.linear(x, W1[1])) * F.linear(x, W3[1]), W2[1])
    return {"F.softmax gate + 2 x swiglu (F.linear)": _nograd(torch, run)}


def _d(rng, *shape):
    return rng.standard_normal(shape)   # float64


def _biquads(rng, C):
    """C stable biquad sections (b0, b1, b2, a1, a2): poles r e^{+-i theta}, r < 0.95."""
    radius, theta = rng.uniform(0.5, 0.95, C), rng.uniform(0.1, 3.0, C)
    b = rng.standard_normal((C, 3)) * 0.5
    return np.stack([b[:, 0], b[:, 1], b[:, 2], -2 * radius * np.cos(theta), radius ** 2], 1)


def _kalman_inputs(rng, s):
    """Measurements z (T, B); a slowly rotating, slightly damped transition A, small process noise Q,
    measurement vector Hv, variance R; initial states x0 (B, N) and unit initial covariance."""
    N = s["N"]
    q, _ = np.linalg.qr(np.eye(N) + 0.1 * rng.standard_normal((N, N)))
    G = 0.1 * rng.standard_normal((N, N))
    return [rng.standard_normal((s["T"], s["B"])), 0.99 * q, 0.01 * np.eye(N) + G @ G.T,
            rng.standard_normal(N) / np.sqrt(N), np.array(0.5), rng.standard_normal((s["B"], N)), np.eye(N)]


def _gauss(K):
    """A normalized Gaussian kernel of K taps, sigma K / 4."""
    x = np.arange(K) - K // 2
    g = np.exp(-0.5 * (x / (K / 4)) ** 2)
    return (g / g.sum()).astype(np.float32)


# ---------------------------------------------------------------- signal processing and scientific computing


@program(name="causal FIR filter bank: F filters (K taps) over B signals, zero history, y(b, f, t)", kind="conv",
         src="""
# y(b, f, t) = sum_k h(f, k) x(b, t - k): every filter of the bank applied to every signal, x = 0 before t = 0
def fir_bank(float(B, L) x, float(F, K) h) -> (y) {
  y(b, f, t) +=! (t - k >= 0 ? x(b, t - k) : 0) * h(f, k) where t in 0:L, k in 0:K
}""", full=dict(B=16, F=32, L=4096, K=64), tiny=dict(B=3, F=5, L=7, K=3),
    inputs=lambda r, s: [_n(r, s["B"], s["L"]), _w(r, s["F"], s["K"])])
def _h22_fir_bank(torch, a, t, s):
    F = torch.nn.functional
    x, h = t
    K = s["K"]
    return {"F.conv1d(F.pad(x, (K-1, 0)), h.flip)": lambda: F.conv1d(F.pad(x[:, None], (K - 1, 0)),
                                                                      h.flip(1)[:, None])}


@program(name="IIR biquad per channel over time (direct form I, float64), for t in T", kind="loop", src="""
# one second-order section per channel, coef(c) = (b0, b1, b2, a1, a2), zero initial state:
# y(t) = b0 x(t) + b1 x(t-1) + b2 x(t-2) - a1 y(t-1) - a2 y(t-2)
def biquad(double(C, T) x, double(C, 5) coef) -> (y) {
  for t in T {
    y(c, t) = coef(c, 0) * x(c, t)
            + (t >= 1 ? coef(c, 1) * x(c, t - 1) - coef(c, 3) * y(c, t - 1) : 0)
            + (t >= 2 ? coef(c, 2) * x(c, t - 2) - coef(c, 4) * y(c, t - 2) : 0)
  }
}""", full=dict(C=512, T=1024), tiny=dict(C=3, T=7),
    inputs=lambda r, s: [_d(r, s["C"], s["T"]), _biquads(r, s["C"])])
def _h22_biquad(torch, a, t, s):
    x, coef = t
    xn, cn = a

    def torch_loop():
        b0, b1, b2, a1, a2 = coef.unbind(1)
        v = b0[:, None] * x                                   # the FIR part, vectorized
        v[:, 1:] += b1[:, None] * x[:, :-1]
        v[:, 2:] += b2[:, None] * x[:, :-2]
        v = v.t().contiguous()
        y = torch.empty_like(v)
        y1 = torch.zeros_like(b0)
        y2 = torch.zeros_like(b0)
        for k in range(v.shape[0]):
            yk = v[k] - a1 * y1 - a2 * y2
            y[k] = yk
            y2, y1 = y1, yk
        return y.t()

    def numpy_loop():
        b0, b1, b2, a1, a2 = cn.T
        v = b0[:, None] * xn
        v[:, 1:] += b1[:, None] * xn[:, :-1]
        v[:, 2:] += b2[:, None] * xn[:, :-2]
        v = np.ascontiguousarray(v.T)
        y = np.empty_like(v)
        y1, y2 = np.zeros_like(b0), np.zeros_like(b0)
        for k in range(v.shape[0]):
            y[k] = v[k] - a1 * y1 - a2 * y2
            y2, y1 = y1, y[k]
        return y.T
    return {"torch loop over t (FIR part vectorized)": torch_loop, "numpy loop over t": numpy_loop}


@program(name="Jacobi sweeps for Laplace on (N, H, W) grids, 5-point stencil, fixed boundary, S sweeps (free)",
         kind="stencil", src="""
# each sweep replaces every interior point by the mean of its four neighbours; the boundary rows and columns keep
# their values; S sweeps, the last one returned
def jacobi2d(float(N, H, W) u0) -> (u) {
  for s in S {
    if s == 0 {
      v(s, n, i, j) = i >= 1 && i < H - 1 && j >= 1 && j < W - 1
        ? 0.25 * (u0(n, i - 1, j) + u0(n, i + 1, j) + u0(n, i, j - 1) + u0(n, i, j + 1)) : u0(n, i, j)
        where i in 0:H, j in 0:W
    } else {
      v(s, n, i, j) = i >= 1 && i < H - 1 && j >= 1 && j < W - 1
        ? 0.25 * (v(s - 1, n, i - 1, j) + v(s - 1, n, i + 1, j) + v(s - 1, n, i, j - 1) + v(s - 1, n, i, j + 1))
        : v(s - 1, n, i, j)
        where i in 0:H, j in 0:W
    }
  }
  u(n, i, j) = v(S - 1, n, i, j)
}""", full=dict(N=4, H=256, W=256, S=20), tiny=dict(N=3, H=5, W=7, S=3), free=("S",),
    inputs=lambda r, s: [_n(r, s["N"], s["H"], s["W"])])
def _h22_jacobi2d(torch, a, t, s):
    F = torch.nn.functional
    u0 = t[0]
    stencil = torch.tensor([[0, 0.25, 0], [0.25, 0, 0.25], [0, 0.25, 0]], dtype=u0.dtype)[None, None]

    def slices():
        u = u0.clone()
        for _ in range(s["S"]):
            v = u.clone()
            v[:, 1:-1, 1:-1] = 0.25 * (u[:, :-2, 1:-1] + u[:, 2:, 1:-1] + u[:, 1:-1, :-2] + u[:, 1:-1, 2:])
            u = v
        return u

    def conv():
        u = u0.clone()
        for _ in range(s["S"]):
            u[:, 1:-1, 1:-1] = F.conv2d(u[:, None], stencil)[:, 0]
        return u
    return {"torch slices, S sweeps": slices, "F.conv2d 5-point kernel, S sweeps": conv}


@program(name="cumulative trapezoid integral along time (torch.cumulative_trapezoid), scan for t in L-1",
         kind="scan", src="""
# I(b, t) = integral of y(b, .) from sample 0 to sample t + 1, trapezoid rule, sample spacing dx
def cumtrapz(float(B, L) y, float dx) -> (I) {
  for t in L - 1 {
    I(b, t) = (t > 0 ? I(b, t - 1) : 0) + 0.5 * dx * (y(b, t) + y(b, t + 1))
  }
}""", full=dict(B=256, L=8192), tiny=dict(B=3, L=7),
    inputs=lambda r, s: [_n(r, s["B"], s["L"]), np.array(0.01, np.float32)])
def _h22_cumtrapz(torch, a, t, s):
    y = t[0]
    dx = float(a[1])
    return {"torch.cumulative_trapezoid": lambda: torch.cumulative_trapezoid(y, dx=dx, dim=1),
            "torch.cumsum of the midpoints": lambda: torch.cumsum(0.5 * dx * (y[:, 1:] + y[:, :-1]), 1)}


@program(name="Kalman filter over T steps, B tracks, state N, scalar measurements (float64, for t in T)",
         kind="loop", src="""
# B independent tracks share the linear model x' = A x + w (cov Q), z = Hv . x + v (var R); initial x0(b), P0.
# predict, then update with the scalar innovation; P is symmetric, so K (Hv P) = PH PH^T / S
def kalman(double(T, B) z, double(N, N) A, double(N, N) Q, double(N) Hv, double R, double(B, N) x0,
           double(N, N) P0) -> (xs) {
  for t in T {
    if t == 0 { xp(b, i) +=! A(i, j) * x0(b, j) }
    else      { xp(b, i) +=! A(i, j) * xs(t - 1, b, j) }
    if t == 0 { AP(b, i, l) +=! A(i, k) * P0(k, l) where b in 0:B }
    else      { AP(b, i, l) +=! A(i, k) * P(b, k, l) }
    Pp(b, i, j) +=! AP(b, i, l) * A(j, l)
    Pp(b, i, j) = Pp(b, i, j) + Q(i, j)
    PH(b, i) +=! Pp(b, i, j) * Hv(j)
    S(b) +=! Hv(i) * PH(b, i)
    S(b) = S(b) + R
    innov(b) +=! Hv(i) * xp(b, i)
    innov(b) = z(t, b) - innov(b)
    xs(t, b, i) = xp(b, i) + PH(b, i) / S(b) * innov(b)
    P(b, i, j) = Pp(b, i, j) - PH(b, i) * PH(b, j) / S(b)
  }
}""", full=dict(T=64, B=512, N=4), tiny=dict(T=5, B=3, N=3),
    inputs=_kalman_inputs)
def _h22_kalman(torch, a, t, s):
    z, A, Q, Hv, R, x0, P0 = t
    r = float(a[4])

    def loop():
        B, N = x0.shape
        xs = torch.empty(z.shape[0], B, N, dtype=z.dtype)
        x, P = x0, P0.expand(B, N, N)
        for k in range(z.shape[0]):
            xp = x @ A.T
            Pp = A @ P @ A.T + Q
            PH = Pp @ Hv
            S = PH @ Hv + r
            innov = z[k] - xp @ Hv
            x = xp + PH * (innov / S)[:, None]
            P = Pp - PH[:, :, None] * PH[:, None, :] / S[:, None, None]
            xs[k] = x
        return xs
    return {"torch loop over t (batched matmuls)": loop}


@program(name="Horner's rule: a degree D-1 polynomial at N points, for k in D over the coefficients", kind="loop",
         src="""
# p(x) = c(0) + c(1) x + ... + c(D-1) x^(D-1), evaluated from the highest coefficient down
def horner(float(N) x, float(D) c) -> (p) {
  for k in D {
    if k == 0 { p(i) = c(D - 1) where i in 0:N }
    else      { p(i) = p(i) * x(i) + c(D - 1 - k) }
  }
}""", full=dict(N=500000, D=16), tiny=dict(N=7, D=5),
    inputs=lambda r, s: [r.uniform(-1, 1, s["N"]).astype(np.float32), _n(r, s["D"])])
def _h22_horner(torch, a, t, s):
    x, c = t
    xn, cn = a

    def torch_horner():
        p = c[-1].expand_as(x)
        for k in range(c.shape[0] - 2, -1, -1):
            p = torch.addcmul(c[k], p, x)
        return p
    return {"torch Horner loop (addcmul)": torch_horner,
            "np.polyval": lambda: np.polyval(cn[::-1], xn),
            "torch.linalg.vander @ c": lambda: torch.linalg.vander(x, N=c.shape[0]) @ c}


@program(name="pairwise Euclidean distance matrix (torch.cdist p=2), difference bound by a where", kind="distance",
         src="""
# Dist(i, j) = || X(i) - Y(j) ||
def pdist2(float(N, D) X, float(M, D) Y) -> (Dist) {
  Dist(i, j) +=! e * e where e = X(i, d) - Y(j, d)
  Dist(i, j) = sqrt(Dist(i, j))
}""", full=dict(N=2048, M=1024, D=32), tiny=dict(N=5, M=7, D=3),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["M"], s["D"])])
def _h22_pdist2(torch, a, t, s):
    X, Y = t

    def expand():
        d2 = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None] - 2 * X @ Y.T
        return d2.clamp_min(0).sqrt()
    return {"torch.cdist": lambda: torch.cdist(X, Y), "|x|^2 + |y|^2 - 2 x.y": expand}


@program(name="k-means Lloyd step: argmin assignment, counts and sums per cluster, new centroids", kind="data",
         src="""
# assign every point to its nearest centroid, then move each centroid to the mean of its points
# (a centroid that gets no point stays where it was)
def kmeans_step(float(N, D) X, float(K, D) C) -> (assign, Cn) {
  dist(n, k) +=! (X(n, d) - C(k, d)) * (X(n, d) - C(k, d))
  assign(n) argmin=! dist(n, k)
  cnt(k) +=! assign(n) == k ? 1.0 : 0.0 where k in 0:K
  sums(k, d) +=! assign(n) == k ? X(n, d) : 0.0 where k in 0:K
  Cn(k, d) = cnt(k) > 0 ? sums(k, d) / cnt(k) : C(k, d)
}""", full=dict(N=65536, D=16, K=64), tiny=dict(N=7, D=3, K=5),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["K"], s["D"])],
    pick=lambda r: np.concatenate([r[1].ravel(), r[0].astype(np.float32)]))
def _h22_kmeans_step(torch, a, t, s):
    X, C = t

    def lloyd():
        assign = torch.cdist(X, C).argmin(1)
        cnt = torch.bincount(assign, minlength=C.shape[0]).to(X.dtype)
        sums = torch.zeros_like(C).index_add_(0, assign, X)
        Cn = torch.where(cnt[:, None] > 0, sums / cnt.clamp_min(1)[:, None], C)
        return torch.cat([Cn.ravel(), assign.to(X.dtype)])
    return {"cdist.argmin + bincount + index_add_": lloyd}


@program(name="histogram of N samples into NB bins over [lo, hi) (free NB), counts as a masked sum",
         kind="data", src="""
# bin index by scaling, then count the samples of each bin; samples outside [lo, hi) fall in no bin
def histogram(float(N) x, float lo, float hi) -> (h) {
  bin(n) = int32(floor((x(n) - lo) * NB / (hi - lo)))
  h(k) +=! bin(n) == k ? 1.0 : 0.0 where k in 0:NB
}""", full=dict(N=2000000, NB=64), tiny=dict(N=7, NB=5), free=("NB",),
    inputs=lambda r, s: [_n(r, s["N"]), np.array(-4, np.float32), np.array(4, np.float32)])
def _h22_histogram(torch, a, t, s):
    x = t[0]
    lo, hi = float(a[1]), float(a[2])
    return {"torch.histc": lambda: torch.histc(x, bins=s["NB"], min=lo, max=hi),
            "np.histogram": lambda: np.histogram(a[0], bins=s["NB"], range=(lo, hi))[0]}


@program(name="decimation by 4: K-tap low-pass FIR, keep every 4th output (strided conv1d)", kind="signal",
         src="""
# y(b, n) = sum_k h(k) x(b, 4 n + k): the filter evaluated only at the samples that are kept
def decimate4(float(B, L) x, float(K) h) -> (y) {
  y(b, n) +=! x(b, 4 * n + k) * h(k)
}""", full=dict(B=64, L=65536, K=64), tiny=dict(B=3, L=23, K=5),
    inputs=lambda r, s: [_n(r, s["B"], s["L"]), _w(r, s["K"])])
def _h22_decimate4(torch, a, t, s):
    F = torch.nn.functional
    x, h = t
    return {"F.conv1d(stride=4)": lambda: F.conv1d(x[:, None], h[None, None], stride=4)[:, 0],
            "F.conv1d then [::4]": lambda: F.conv1d(x[:, None], h[None, None])[:, 0, ::4]}


@program(name="bilinear resize (N, C, H, W) -> (OH, OW) (free), half-pixel centres, as F.interpolate",
         kind="signal", src="""
# F.interpolate(X, size=(OH, OW), mode="bilinear", align_corners=False): source coordinate (o + 0.5) * H / OH - 0.5,
# clamped at 0; the right/lower neighbour clamped at the last row/column
def resize_bilinear(float(N, C, H, W) X) -> (Y) {
  Y(n, c, i, j) = (1 - wy) * ((1 - wx) * X(n, c, iy0, ix0) + wx * X(n, c, iy0, ix1))
                +      wy  * ((1 - wx) * X(n, c, iy1, ix0) + wx * X(n, c, iy1, ix1))
    where sy = max((i + 0.5) * H / OH - 0.5, 0.0), sx = max((j + 0.5) * W / OW - 0.5, 0.0),
          iy0 = int32(sy), ix0 = int32(sx), iy1 = min(iy0 + 1, H - 1), ix1 = min(ix0 + 1, W - 1),
          wy = sy - iy0, wx = sx - ix0, i in 0:OH, j in 0:OW
}""", full=dict(N=4, C=3, H=512, W=512, OH=768, OW=768), tiny=dict(N=3, C=2, H=5, W=7, OH=9, OW=4),
    free=("OH", "OW"), inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _h22_resize_bilinear(torch, a, t, s):
    F = torch.nn.functional
    X = t[0]
    return {"F.interpolate(bilinear)": lambda: F.interpolate(X, size=(s["OH"], s["OW"]), mode="bilinear",
                                                             align_corners=False)}


@program(name="separable Gaussian blur, K taps along rows then columns, zero padding, same size", kind="conv",
         src="""
# the same 1-D kernel g (K odd, centred at K / 2) along each row, then along each column of every channel
def gauss_blur(float(N, C, H, W) X, float(K) g) -> (Y) {
  R(n, c, i, j) +=! (j + k - K / 2 >= 0 && j + k - K / 2 < W ? X(n, c, i, j + k - K / 2) : 0) * g(k)
    where j in 0:W, k in 0:K
  Y(n, c, i, j) +=! (i + k - K / 2 >= 0 && i + k - K / 2 < H ? R(n, c, i + k - K / 2, j) : 0) * g(k)
    where i in 0:H, k in 0:K
}""", full=dict(N=4, C=3, H=512, W=512, K=9), tiny=dict(N=3, C=1, H=5, W=7, K=3),
    inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _gauss(s["K"])])
def _h22_gauss_blur(torch, a, t, s):
    F = torch.nn.functional
    X, g = t
    N, C, H, W, K = (s[k] for k in "NCHWK")

    def separable():
        y = F.conv2d(X.reshape(N * C, 1, H, W), g.view(1, 1, 1, K), padding=(0, K // 2))
        return F.conv2d(y, g.view(1, 1, K, 1), padding=(K // 2, 0)).view(N, C, H, W)

    def depthwise():
        k2 = (g[:, None] * g[None, :]).expand(C, 1, K, K)
        return F.conv2d(X, k2, padding=K // 2, groups=C)
    return {"two F.conv2d (row, column)": separable, "F.conv2d depthwise KxK": depthwise}


@program(name="batched inverse of small matrices by Gauss-Jordan elimination (no pivoting, float64), for p in N",
         kind="loop", src="""
# the matrices are diagonally dominant, so no pivoting: at step p the pivot row is scaled to make M(p, p) = 1,
# then column p is eliminated from every other row; the same row operations turn I into the inverse
def gj_inverse(double(B, N, N) A) -> (Ainv) {
  M(b, i, j) = A(b, i, j)
  Ainv(b, i, j) = i == j ? 1.0 : 0.0 where b in 0:B, i in 0:N, j in 0:N
  for p in N {
    piv(b) = M(b, p, p)
    M(b, p, j) = M(b, p, j) / piv(b)
    Ainv(b, p, j) = Ainv(b, p, j) / piv(b)
    f(b, i) = M(b, i, p)
    M(b, i, j) = i == p ? M(b, i, j) : M(b, i, j) - f(b, i) * M(b, p, j)
    Ainv(b, i, j) = i == p ? Ainv(b, i, j) : Ainv(b, i, j) - f(b, i) * Ainv(b, p, j)
  }
}""", full=dict(B=4096, N=8), tiny=dict(B=3, N=5),
    inputs=lambda r, s: [_d(r, s["B"], s["N"], s["N"]) + 2 * s["N"] * np.eye(s["N"])])
def _h22_gj_inverse(torch, a, t, s):
    A = t[0]
    return {"torch.linalg.inv": lambda: torch.linalg.inv(A), "np.linalg.inv": lambda: np.linalg.inv(a[0])}


@program(name="n-body accelerations (softened gravity), all pairs, positions (N, 3), masses", kind="linear",
         src="""
# acc(i) = sum_j m(j) (p(j) - p(i)) / (|p(j) - p(i)|^2 + eps2)^(3/2); the j = i term is 0
def nbody_acc(float(N, 3) pos, float(N) m, float eps2) -> (acc) {
  r2(i, j) +=! (pos(j, d) - pos(i, d)) * (pos(j, d) - pos(i, d))
  w(i, j) = m(j) / ((r2(i, j) + eps2) * sqrt(r2(i, j) + eps2))
  acc(i, d) +=! w(i, j) * (pos(j, d) - pos(i, d))
}""", full=dict(N=1024), tiny=dict(N=7),
    inputs=lambda r, s: [_n(r, s["N"], 3), r.uniform(0.5, 1.5, s["N"]).astype(np.float32),
                         np.array(0.05, np.float32)])
def _h22_nbody_acc(torch, a, t, s):
    pos, m, _ = t
    eps2 = float(a[2])

    def broadcast():
        diff = pos[None, :, :] - pos[:, None, :]                       # (i, j, d): p(j) - p(i)
        r2 = (diff * diff).sum(-1) + eps2
        return ((m[None, :] / (r2 * r2.sqrt()))[..., None] * diff).sum(1)

    def matmul():
        r2 = torch.cdist(pos, pos).square() + eps2
        w = m[None, :] / (r2 * r2.sqrt())
        return w @ pos - w.sum(1, keepdim=True) * pos
    return {"broadcast differences": broadcast, "cdist + matmul": matmul}


# ---------------------------------------------------------------- session 47: recurrences and probabilistic sequence models


# ================================================ hunt 23: recurrences and probabilistic sequence models

def _h23_flat(*outs):
    """Several outputs of different shapes as one float64 vector (the runner compares one array)."""
    return np.concatenate([np.asarray(o.detach().numpy() if hasattr(o, "detach") else o, np.float64).ravel()
                           for o in outs])


def _h23_logsm(rng, *shape, axis=-1):
    z = rng.standard_normal(shape).astype(np.float64)
    z = z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return z.astype(np.float32)


# ---------------------------------------------------------------- HMM forward algorithm (log space)

H23_HMM_FORWARD = """
# HMM forward algorithm in log space, a batch of sequences: alpha(t, b, j) = log p(o_0..o_t, s_t = j)
def hmm_forward(float(T,B,S) emit, float(S,S) logA, float(S) logpi) -> (alpha, loglik) {
  for t in T {
    if t == 0 {
      alpha(t, b, j) = logpi(j) + emit(t, b, j)
    } else {
      m(b, j) max=! alpha(t - 1, b, i) + logA(i, j)
      e(b, j) +=! exp(alpha(t - 1, b, i) + logA(i, j) - m(b, j))
      alpha(t, b, j) = m(b, j) + log(e(b, j)) + emit(t, b, j)
    }
  }
  mx(b) max=! alpha(T - 1, b, j)
  z(b) +=! exp(alpha(T - 1, b, j) - mx(b))
  loglik(b) = mx(b) + log(z(b))
}
"""


def _h23_hmm_inputs(rng, s):
    T, B, S = s["T"], s["B"], s["S"]
    return [-np.abs(_n(rng, T, B, S)) * 2, _h23_logsm(rng, S, S), _h23_logsm(rng, S)]


@program(name="hmm forward, log space (logsumexp)", kind="sequence", src=H23_HMM_FORWARD,
         full=dict(T=128, B=32, S=64), tiny=dict(T=4, B=2, S=3), inputs=_h23_hmm_inputs,
         pick=lambda r: _h23_flat(*r))
def _h23_hmm_forward(torch, a, t, s):
    emit, logA, logpi = t

    def run():
        al = [logpi[None, :] + emit[0]]
        for step in range(1, emit.shape[0]):
            al.append(torch.logsumexp(al[-1][:, :, None] + logA[None], dim=1) + emit[step])
        alpha = torch.stack(al)
        return _h23_flat(alpha, torch.logsumexp(alpha[-1], dim=1))
    return {"torch loop (logsumexp)": run}


# ---------------------------------------------------------------- Viterbi decoding with backtrace

H23_VITERBI = """
# Viterbi decoding: max-product in log space with argmax backpointers, then a backtrace run backwards in time
def viterbi(float(T,B,S) emit, float(S,S) logA, float(S) logpi) -> (path, score) {
  for t in T {
    if t == 0 {
      delta(t, b, j) = logpi(j) + emit(t, b, j)
    } else {
      delta(t, b, j) max=! delta(t - 1, b, i) + logA(i, j)
      bp(t, b, j) argmax=! delta(t - 1, b, i) + logA(i, j)
      delta(t, b, j) = delta(t, b, j) + emit(t, b, j)
    }
  }
  score(b) max=! delta(T - 1, b, j)
  path(t, b) argmax=! delta(T - 1, b, j) where t in T-1:T
  for s in 1:T {
    path(T - 1 - s, b) = bp(T - s, b, path(T - s, b))
  }
}
"""


@program(name="viterbi decode + backtrace", kind="sequence", src=H23_VITERBI,
         full=dict(T=128, B=32, S=64), tiny=dict(T=5, B=2, S=3), inputs=_h23_hmm_inputs,
         pick=lambda r: _h23_flat(1000 * r[0], r[1]))  # path weighted so that one wrong state shows
def _h23_viterbi(torch, a, t, s):
    emit, logA, logpi = t

    def run():
        T = emit.shape[0]
        delta = logpi[None, :] + emit[0]
        bps = []
        for step in range(1, T):
            best, arg = (delta[:, :, None] + logA[None]).max(dim=1)
            bps.append(arg)
            delta = best + emit[step]
        score, last = delta.max(dim=1)
        path = [last]
        for bp in reversed(bps):
            path.append(bp.gather(1, path[-1][:, None])[:, 0])
        return _h23_flat(1000 * torch.stack(path[::-1]).to(torch.int32), score)
    return {"torch loop (max, gather)": run}


# ---------------------------------------------------------------- Mamba selective scan

H23_SELECTIVE_SCAN = """
# Mamba's selective scan (S6): per-channel diagonal state, input-dependent step dt, gated by silu(z)
def selective_scan(float(B,L,D) x, float(B,L,D) dtr, float(D) dt_bias, float(D,N) A_log,
                   float(B,L,N) Bm, float(B,L,N) Cm, float(D) Dskip, float(B,L,D) z) -> (y) {
  A(d, n) = -exp(A_log(d, n))
  for t in L {
    dt(b, d) = log(1 + exp(dtr(b, t, d) + dt_bias(d)))
    if t == 0 { h(b, d, n) = dt(b, d) * Bm(b, t, n) * x(b, t, d) }
    else      { h(b, d, n) = exp(dt(b, d) * A(d, n)) * h(b, d, n) + dt(b, d) * Bm(b, t, n) * x(b, t, d) }
    yv(b, d) +=! h(b, d, n) * Cm(b, t, n)
    y(b, t, d) = (yv(b, d) + Dskip(d) * x(b, t, d)) * z(b, t, d) * sigmoid(z(b, t, d))
  }
}
"""


def _h23_ssm_inputs(rng, s):
    B, L, D, N = s["B"], s["L"], s["D"], s["N"]
    A_log = np.log(np.tile(np.arange(1, N + 1, dtype=np.float32), (D, 1)))
    return [_n(rng, B, L, D), _n(rng, B, L, D) - 2, _n(rng, D) * 0.5, A_log.astype(np.float32),
            _n(rng, B, L, N), _n(rng, B, L, N), _n(rng, D), _n(rng, B, L, D)]


@program(name="mamba selective scan (S6)", kind="scan", src=H23_SELECTIVE_SCAN,
         full=dict(B=2, L=256, D=256, N=16), tiny=dict(B=2, L=5, D=3, N=4), inputs=_h23_ssm_inputs)
def _h23_selective_scan(torch, a, t, s):
    x, dtr, dt_bias, A_log, Bm, Cm, Dskip, z = t
    F = torch.nn.functional

    def run():  # mamba's selective_scan_ref, (B, L, D) layout
        A = -torch.exp(A_log)
        dt = F.softplus(dtr + dt_bias)
        dA = torch.exp(torch.einsum("bld,dn->bldn", dt, A))
        dBx = torch.einsum("bld,bln,bld->bldn", dt, Bm, x)
        h = x.new_zeros(x.shape[0], x.shape[2], A.shape[1])
        ys = []
        for step in range(x.shape[1]):
            h = dA[:, step] * h + dBx[:, step]
            ys.append(torch.einsum("bdn,bn->bd", h, Cm[:, step]))
        y = torch.stack(ys, dim=1) + Dskip * x
        return y * F.silu(z)
    return {"torch selective_scan_ref": _nograd(torch, run)}


# ---------------------------------------------------------------- minGRU

H23_MINGRU = """
# minGRU (Feng et al. 2024), sequential mode: gates from the input only, nn.Linear weights (out, in), batch first
def min_gru(float(B,T,I) x, float(B,H) h0, float(H,I) Wz, float(H) bz, float(H,I) Wh, float(H) bh) -> (h) {
  zp(b, t, j) +=! x(b, t, i) * Wz(j, i)
  hp(b, t, j) +=! x(b, t, i) * Wh(j, i)
  z(b, t, j) = sigmoid(zp(b, t, j) + bz(j))
  ht(b, t, j) = hp(b, t, j) + bh(j) >= 0 ? hp(b, t, j) + bh(j) + 0.5 : sigmoid(hp(b, t, j) + bh(j))
  for t in T {
    if t == 0 { h(b, t, j) = (1 - z(b, t, j)) * h0(b, j) + z(b, t, j) * ht(b, t, j) }
    else      { h(b, t, j) = (1 - z(b, t, j)) * h(b, t - 1, j) + z(b, t, j) * ht(b, t, j) }
  }
}
"""


def _h23_mingru_inputs(rng, s):
    B, T, I, H = s["B"], s["T"], s["I"], s["H"]
    return [_n(rng, B, T, I), np.abs(_n(rng, B, H)) + 0.1, _w(rng, H, I), _w(rng, H), _w(rng, H, I), _w(rng, H)]


@program(name="minGRU (sequential, g() activation)", kind="rnn", src=H23_MINGRU,
         full=dict(B=16, T=256, I=256, H=256), tiny=dict(B=2, T=4, I=3, H=5), inputs=_h23_mingru_inputs)
def _h23_mingru(torch, a, t, s):
    x, h0, Wz, bz, Wh, bh = t
    F = torch.nn.functional

    def g(v):
        return torch.where(v >= 0, v + 0.5, torch.sigmoid(v))

    def loop():
        z = torch.sigmoid(F.linear(x, Wz, bz))
        ht = g(F.linear(x, Wh, bh))
        h, out = h0, []
        for step in range(x.shape[1]):
            h = (1 - z[:, step]) * h + z[:, step] * ht[:, step]
            out.append(h)
        return torch.stack(out, dim=1)

    def heinsen():  # the parallel mode of the paper: a log-space scan
        k = F.linear(x, Wz, bz)
        log_z, log_coeffs = -F.softplus(-k), -F.softplus(k)
        hh = F.linear(x, Wh, bh)
        log_ht = torch.where(hh >= 0, torch.log(F.relu(hh) + 0.5), -F.softplus(-hh))
        log_values = torch.cat([torch.log(h0)[:, None], log_z + log_ht], dim=1)
        a_star = F.pad(torch.cumsum(log_coeffs, dim=1), (0, 0, 1, 0))
        log_h = a_star + torch.logcumsumexp(log_values - a_star, dim=1)
        return torch.exp(log_h)[:, 1:]
    return {"torch loop": _nograd(torch, loop), "log-space parallel scan": _nograd(torch, heinsen)}


# ---------------------------------------------------------------- minLSTM

H23_MINLSTM = """
# minLSTM (Feng et al. 2024): forget and input gates normalised to sum to one, nn.Linear weights
def min_lstm(float(B,T,I) x, float(B,H) h0, float(H,I) Wf, float(H) bf, float(H,I) Wi, float(H) bi,
             float(H,I) Wh, float(H) bh) -> (h) {
  for t in T {
    fp(b, j) +=! x(b, t, i) * Wf(j, i)
    ip(b, j) +=! x(b, t, i) * Wi(j, i)
    hp(b, j) +=! x(b, t, i) * Wh(j, i)
    f(b, j) = sigmoid(fp(b, j) + bf(j))
    ig(b, j) = sigmoid(ip(b, j) + bi(j))
    ht(b, j) = hp(b, j) + bh(j) >= 0 ? hp(b, j) + bh(j) + 0.5 : sigmoid(hp(b, j) + bh(j))
    if t == 0 { h(b, t, j) = (f(b, j) * h0(b, j) + ig(b, j) * ht(b, j)) / (f(b, j) + ig(b, j)) }
    else      { h(b, t, j) = (f(b, j) * h(b, t - 1, j) + ig(b, j) * ht(b, j)) / (f(b, j) + ig(b, j)) }
  }
}
"""


def _h23_minlstm_inputs(rng, s):
    B, T, I, H = s["B"], s["T"], s["I"], s["H"]
    return [_n(rng, B, T, I), np.abs(_n(rng, B, H)) + 0.1, _w(rng, H, I), _w(rng, H), _w(rng, H, I), _w(rng, H),
            _w(rng, H, I), _w(rng, H)]


@program(name="minLSTM (sequential)", kind="rnn", src=H23_MINLSTM,
         full=dict(B=16, T=256, I=256, H=256), tiny=dict(B=2, T=4, I=3, H=5), inputs=_h23_minlstm_inputs)
def _h23_minlstm(torch, a, t, s):
    x, h0, Wf, bf, Wi, bi, Wh, bh = t
    F = torch.nn.functional

    def loop():
        f = torch.sigmoid(F.linear(x, Wf, bf))
        i = torch.sigmoid(F.linear(x, Wi, bi))
        hh = F.linear(x, Wh, bh)
        ht = torch.where(hh >= 0, hh + 0.5, torch.sigmoid(hh))
        fn, inn = f / (f + i), i / (f + i)
        h, out = h0, []
        for step in range(x.shape[1]):
            h = fn[:, step] * h + inn[:, step] * ht[:, step]
            out.append(h)
        return torch.stack(out, dim=1)
    return {"torch loop": _nograd(torch, loop)}


# ---------------------------------------------------------------- biquad IIR filter bank

H23_BIQUAD = """
# A bank of biquad (second-order IIR) filters, one per channel, SciPy's sos row [b0 b1 b2 a0 a1 a2]
def biquad_bank(float(B,C,L) x, float(C,6) sos) -> (y) {
  for t in L {
    y(b, c, t) = (sos(c, 0) * x(b, c, t)
                  + (t >= 1 ? sos(c, 1) * x(b, c, t - 1) - sos(c, 4) * y(b, c, t - 1) : 0)
                  + (t >= 2 ? sos(c, 2) * x(b, c, t - 2) - sos(c, 5) * y(b, c, t - 2) : 0)) / sos(c, 3)
  }
}
"""


def _h23_biquad_inputs(rng, s):
    import scipy.signal
    B, C, L = s["B"], s["C"], s["L"]
    fc = np.geomspace(0.02, 0.6, C)
    sos = np.concatenate([scipy.signal.butter(2, f, btype="low", output="sos") for f in fc]).astype(np.float32)
    return [_n(rng, B, C, L), sos]


@program(name="biquad IIR filter bank (per channel)", kind="scan", src=H23_BIQUAD,
         full=dict(B=8, C=32, L=4096), tiny=dict(B=2, C=3, L=7), inputs=_h23_biquad_inputs)
def _h23_biquad(torch, a, t, s):
    import scipy.signal
    x, sos = a

    def run():
        y = np.empty_like(x)
        for c in range(x.shape[1]):
            y[:, c] = scipy.signal.sosfilt(sos[c:c + 1].astype(np.float64), x[:, c], axis=-1)
        return y
    return {"scipy.signal.sosfilt per channel": run}


# ---------------------------------------------------------------- MEGA multi-dimensional damped EMA

H23_MEGA_EMA = """
# MEGA's multi-dimensional damped EMA: N states per channel, h = p*beta*x + (1 - p*a)*h, y = silu(sum eta*h + omega*x)
def mega_ema(float(B,L,D) x, float(D,N) delta, float(D,N) alpha, float(D,N) beta, float(D,N) eta,
             float(D) omega) -> (y) {
  pb(d, n) = sigmoid(delta(d, n)) * beta(d, n)
  q(d, n) = 1 - sigmoid(delta(d, n)) * sigmoid(alpha(d, n))
  for t in L {
    if t == 0 { h(b, d, n) = pb(d, n) * x(b, t, d) }
    else      { h(b, d, n) = q(d, n) * h(b, d, n) + pb(d, n) * x(b, t, d) }
    u(b, d) +=! eta(d, n) * h(b, d, n)
    y(b, t, d) = v * sigmoid(v) where v = u(b, d) + omega(d) * x(b, t, d)
  }
}
"""


def _h23_mega_inputs(rng, s):
    B, L, D, N = s["B"], s["L"], s["D"], s["N"]
    return [_n(rng, B, L, D), _n(rng, D, N), _n(rng, D, N), _n(rng, D, N) * 0.5, _w(rng, D, N), _n(rng, D)]


@program(name="MEGA damped EMA (N states per channel)", kind="scan", src=H23_MEGA_EMA,
         full=dict(B=8, L=1024, D=256, N=16), tiny=dict(B=2, L=6, D=3, N=2), inputs=_h23_mega_inputs)
def _h23_mega_ema(torch, a, t, s):
    x, delta, alpha, beta, eta, omega = t
    F = torch.nn.functional
    L = x.shape[1]

    def fft():  # MEGA's way: the EMA's kernel, then a causal convolution by FFT
        p = torch.sigmoid(delta)
        q = 1 - p * torch.sigmoid(alpha)
        steps = torch.arange(L, dtype=x.dtype)
        k = torch.einsum("dn,dnl->dl", p * beta * eta, torch.exp(steps * torch.log(q)[:, :, None]))
        xf = torch.fft.rfft(x.transpose(1, 2), n=2 * L)
        kf = torch.fft.rfft(k, n=2 * L)
        u = torch.fft.irfft(xf * kf, n=2 * L)[..., :L].transpose(1, 2)
        return F.silu(u + omega * x)

    def loop():
        p = torch.sigmoid(delta)
        q = 1 - p * torch.sigmoid(alpha)
        h, out = None, []
        for step in range(L):
            inp = p * beta * x[:, step, :, None]
            h = inp if h is None else q * h + inp
            out.append((h * eta).sum(-1))
        return F.silu(torch.stack(out, dim=1) + omega * x)
    return {"FFT convolution (MEGA)": _nograd(torch, fft), "torch loop": _nograd(torch, loop)}


# ---------------------------------------------------------------- Kalman filter, batch of tracks

H23_KALMAN = """
# Kalman filter over a batch of independent tracks: constant-velocity model (N states), 2-D position measurements.
# predict: x = F x, P = F P F' + Q; update: S = H P H' + R (2x2, inverted in closed form), K = P H' S^-1,
# x = x + K (z - H x), P = P - K H P
def kalman(float(T,B,2) z, float(N,N) F, float(2,N) Hm, float(N,N) Q, float(2,2) R, float(B,N) x0,
           float(N,N) P0) -> (xs, Ps) {
  xc(b, i) = x0(b, i)
  Pc(b, i, j) = P0(i, j) where b in 0:B
  for t in T {
    xp(b, i) +=! F(i, k) * xc(b, k)
    FP(b, i, k) +=! F(i, l) * Pc(b, l, k)
    Pp(b, i, j) +=! FP(b, i, k) * F(j, k)
    Pp(b, i, j) = Pp(b, i, j) + Q(i, j)
    Hx(b, m) +=! Hm(m, k) * xp(b, k)
    HP(b, m, j) +=! Hm(m, k) * Pp(b, k, j)
    S(b, m, q) +=! HP(b, m, k) * Hm(q, k)
    S(b, m, q) = S(b, m, q) + R(m, q)
    det(b) = S(b, 0, 0) * S(b, 1, 1) - S(b, 0, 1) * S(b, 1, 0)
    Si(b, m, q) = (m == q ? S(b, 1 - m, 1 - q) : -S(b, m, q)) / det(b)
    PHt(b, i, m) +=! Pp(b, i, k) * Hm(m, k)
    K(b, i, m) +=! PHt(b, i, q) * Si(b, q, m)
    xs(t, b, i) = xp(b, i)
    xs(t, b, i) += K(b, i, m) * (z(t, b, m) - Hx(b, m))
    Ps(t, b, i, j) = Pp(b, i, j)
    Ps(t, b, i, j) += -K(b, i, m) * HP(b, m, j)
    xc(b, i) = xs(t, b, i)
    Pc(b, i, j) = Ps(t, b, i, j)
  }
}
"""


def _h23_kalman_inputs(rng, s):
    T, B, N = s["T"], s["B"], s["N"]
    assert N == 4
    dt = 0.1
    F = np.eye(4, dtype=np.float32)
    F[0, 2] = F[1, 3] = dt
    Hm = np.zeros((2, 4), np.float32)
    Hm[0, 0] = Hm[1, 1] = 1
    G = np.array([[dt * dt / 2, 0], [0, dt * dt / 2], [dt, 0], [0, dt]], np.float32)
    Q = (G @ G.T).astype(np.float32)
    R = np.array([[0.05, 0.01], [0.01, 0.05]], np.float32)
    x0 = _n(rng, B, 4)
    vel = _n(rng, B, 2)
    pos = x0[:, None, :2] + dt * np.arange(1, T + 1, dtype=np.float32)[None, :, None] * vel[:, None, :]
    z = (pos + 0.2 * _n(rng, B, T, 2)).transpose(1, 0, 2)
    return [np.ascontiguousarray(z, np.float32), F, Hm, Q, R, x0, np.eye(4, dtype=np.float32)]


@program(name="kalman filter, batch of tracks (4 states, 2 obs)", kind="sequence", src=H23_KALMAN,
         full=dict(T=100, B=512, N=4), tiny=dict(T=4, B=3, N=4), inputs=_h23_kalman_inputs,
         pick=lambda r: _h23_flat(*r))
def _h23_kalman(torch, a, t, s):
    z, F, Hm, Q, R, x0, P0 = t

    def run():
        B = x0.shape[0]
        x, P = x0, P0.expand(B, -1, -1)
        xs, Ps = [], []
        for step in range(z.shape[0]):
            x = x @ F.T
            P = F @ P @ F.T + Q
            S = Hm @ P @ Hm.T + R
            K = P @ Hm.T @ torch.linalg.inv(S)
            x = x + (K @ (z[step] - x @ Hm.T)[:, :, None])[:, :, 0]
            P = P - K @ Hm @ P
            xs.append(x)
            Ps.append(P)
        return _h23_flat(torch.stack(xs), torch.stack(Ps))
    return {"torch loop (batched matmul, inv)": run}


# ---------------------------------------------------------------- CTC loss: the alpha recursion

H23_CTC = """
# CTC loss (blank 0), the forward (alpha) recursion in log space over the blank-extended labels;
# every sequence uses all T frames and all L labels. -1e30 stands for log 0.
def ctc_loss(float(T,B,V) logp, int32(B,L) labels) -> (loss) {
  ext(b, s) = s % 2 == 0 ? 0 : labels(b, (s - 1) / 2) where s in 0:2*L+1
  skip(b, s) = s >= 2 && ext(b, s) != 0 && ext(b, s) != ext(b, s - 2) where s in 0:2*L+1
  for t in T {
    if t == 0 {
      alpha(t, b, s) = s < 2 ? logp(t, b, ext(b, s)) : -1e30 where s in 0:2*L+1
    } else {
      a1(b, s) = alpha(t - 1, b, s)
      a2(b, s) = s >= 1 ? alpha(t - 1, b, s - 1) : -1e30 where s in 0:2*L+1
      a3(b, s) = s >= 2 && skip(b, s) ? alpha(t - 1, b, s - 2) : -1e30 where s in 0:2*L+1
      m(b, s) = max(a1(b, s), max(a2(b, s), a3(b, s)))
      alpha(t, b, s) = m(b, s) + log(exp(a1(b, s) - m(b, s)) + exp(a2(b, s) - m(b, s)) + exp(a3(b, s) - m(b, s)))
                       + logp(t, b, ext(b, s))
    }
  }
  la(b) = alpha(T - 1, b, 2 * L)
  lb(b) = alpha(T - 1, b, 2 * L - 1)
  mm(b) = max(la(b), lb(b))
  loss(b) = -(mm(b) + log(exp(la(b) - mm(b)) + exp(lb(b) - mm(b))))
}
"""


def _h23_ctc_inputs(rng, s):
    T, B, V, L = s["T"], s["B"], s["V"], s["L"]
    labels = rng.integers(1, V, size=(B, L)).astype(np.int32)
    return [_h23_logsm(rng, T, B, V), labels]


@program(name="ctc loss (alpha recursion, log space)", kind="sequence", src=H23_CTC,
         full=dict(T=200, B=32, V=64, L=40), tiny=dict(T=7, B=2, V=4, L=3), inputs=_h23_ctc_inputs)
def _h23_ctc(torch, a, t, s):
    logp, labels = t
    T, B, L = s["T"], s["B"], s["L"]
    targets = labels.long()
    il = torch.full((B,), T, dtype=torch.long)
    tl = torch.full((B,), L, dtype=torch.long)
    return {"F.ctc_loss": lambda: torch.nn.functional.ctc_loss(logp, targets, il, tl, blank=0, reduction="none")}


# ---------------------------------------------------------------- GRU with layer norm inside the step

H23_LN_GRU = """
# Layer-normalised GRU (as haste's LayerNormGRU): the input and the recurrent projections (3H each, PyTorch's
# stacked r, z, n rows) each layer-normalised with their own gain and shift before the gates
def ln_gru(float(T,B,I) x, float(B,H) h0, float(3*H,I) Wih, float(3*H,H) Whh, float(3*H) bih,
           float(3*H) bhh, float(2,3*H) gamma, float(2,3*H) beta) -> (h) {
  for t in T {
    gi(b, r) +=! x(t, b, i) * Wih(r, i)
    if t == 0 { gh(b, r) +=! h0(b, k) * Whh(r, k) }
    else      { gh(b, r) +=! h(t - 1, b, k) * Whh(r, k) }
    mi(b) +=! gi(b, r) / (3 * H)
    vi(b) +=! (gi(b, r) - mi(b)) * (gi(b, r) - mi(b)) / (3 * H)
    mh(b) +=! gh(b, r) / (3 * H)
    vh(b) +=! (gh(b, r) - mh(b)) * (gh(b, r) - mh(b)) / (3 * H)
    ni(b, r) = (gi(b, r) - mi(b)) * rsqrt(vi(b) + 1e-5) * gamma(0, r) + beta(0, r) + bih(r)
    nh(b, r) = (gh(b, r) - mh(b)) * rsqrt(vh(b) + 1e-5) * gamma(1, r) + beta(1, r) + bhh(r)
    rg(b, j) = sigmoid(ni(b, j) + nh(b, j)) where j in 0:H
    zg(b, j) = sigmoid(ni(b, H + j) + nh(b, H + j)) where j in 0:H
    ng(b, j) = tanh(ni(b, 2 * H + j) + rg(b, j) * nh(b, 2 * H + j)) where j in 0:H
    if t == 0 { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h0(b, j) }
    else      { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h(t - 1, b, j) }
  }
}
"""


def _h23_ln_gru_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H), _w(rng, 3 * H, I), _w(rng, 3 * H, H), _w(rng, 3 * H), _w(rng, 3 * H),
            1 + 0.1 * _n(rng, 2, 3 * H), 0.1 * _n(rng, 2, 3 * H)]


@program(name="layer-norm GRU (LN on both projections)", kind="rnn", src=H23_LN_GRU,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4), inputs=_h23_ln_gru_inputs)
def _h23_ln_gru(torch, a, t, s):
    x, h0, Wih, Whh, bih, bhh, gamma, beta = t
    F = torch.nn.functional
    H = s["H"]

    def run():
        gi_all = F.layer_norm(F.linear(x, Wih), (3 * H,), gamma[0], beta[0], 1e-5) + bih
        h, out = h0, []
        for step in range(x.shape[0]):
            gh = F.layer_norm(F.linear(h, Whh), (3 * H,), gamma[1], beta[1], 1e-5) + bhh
            ir, iz, inn = gi_all[step].chunk(3, 1)
            hr, hz, hn = gh.chunk(3, 1)
            r = torch.sigmoid(ir + hr)
            zg = torch.sigmoid(iz + hz)
            n = torch.tanh(inn + r * hn)
            h = (1 - zg) * n + zg * h
            out.append(h)
        return torch.stack(out)
    return {"torch loop (F.layer_norm)": _nograd(torch, run)}


# ---------------------------------------------------------------- Bahdanau attention decoder (GRU cell)

H23_BAHDANAU = """
# Decoder with additive (Bahdanau) attention over the encoder states at every step; a GRUCell whose input is
# [embedded token ; context], PyTorch's (3H, I + E) weight. Keys are projected once, before the loop.
def bahdanau_decoder(float(B,S,E) enc, float(T,B,I) y, float(B,H) h0, float(A,H) Wq, float(A,E) Wk, float(A) v,
                     float(3*H,I+E) Wih, float(3*H,H) Whh, float(3*H) bih, float(3*H) bhh) -> (h, attn) {
  keys(b, s, a) +=! enc(b, s, e) * Wk(a, e)
  for t in T {
    if t == 0 { q(b, a) +=! h0(b, k) * Wq(a, k) }
    else      { q(b, a) +=! h(t - 1, b, k) * Wq(a, k) }
    sc(b, s) +=! v(a) * tanh(keys(b, s, a) + q(b, a))
    mx(b) max=! sc(b, s)
    ex(b, s) = exp(sc(b, s) - mx(b))
    den(b) +=! ex(b, s)
    attn(t, b, s) = ex(b, s) / den(b)
    ctx(b, e) +=! attn(t, b, s) * enc(b, s, e)
    gi(b, r) +=! y(t, b, i) * Wih(r, i)
    gi(b, r) += ctx(b, e) * Wih(r, I + e)
    if t == 0 { gh(b, r) +=! h0(b, k) * Whh(r, k) }
    else      { gh(b, r) +=! h(t - 1, b, k) * Whh(r, k) }
    rg(b, j) = sigmoid(gi(b, j) + bih(j) + gh(b, j) + bhh(j)) where j in 0:H
    zg(b, j) = sigmoid(gi(b, H + j) + bih(H + j) + gh(b, H + j) + bhh(H + j)) where j in 0:H
    ng(b, j) = tanh(gi(b, 2 * H + j) + bih(2 * H + j) + rg(b, j) * (gh(b, 2 * H + j) + bhh(2 * H + j))) where j in 0:H
    if t == 0 { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h0(b, j) }
    else      { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h(t - 1, b, j) }
  }
}
"""


def _h23_bahdanau_inputs(rng, s):
    B, S, E, T, I, H, A = s["B"], s["S"], s["E"], s["T"], s["I"], s["H"], s["A"]
    return [_n(rng, B, S, E), _n(rng, T, B, I), _n(rng, B, H), _w(rng, A, H), _w(rng, A, E), _w(rng, A),
            _w(rng, 3 * H, I + E), _w(rng, 3 * H, H), _w(rng, 3 * H), _w(rng, 3 * H)]


@program(name="bahdanau attention GRU decoder", kind="rnn", src=H23_BAHDANAU,
         full=dict(B=16, S=50, E=256, T=30, I=128, H=256, A=128), tiny=dict(B=2, S=3, E=4, T=3, I=2, H=5, A=3),
         inputs=_h23_bahdanau_inputs, pick=lambda r: _h23_flat(*r))
def _h23_bahdanau(torch, a, t, s):
    enc, y, h0, Wq, Wk, v, Wih, Whh, bih, bhh = t
    F = torch.nn.functional
    cell = torch.nn.GRUCell(s["I"] + s["E"], s["H"])
    for p, w in zip([cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh], [Wih, Whh, bih, bhh]):
        _copy(torch, p, w.numpy())

    def run():
        keys = F.linear(enc, Wk)                     # (B, S, A)
        h, hs, attns = h0, [], []
        for step in range(y.shape[0]):
            sc = torch.tanh(keys + F.linear(h, Wq)[:, None]) @ v
            w = torch.softmax(sc, dim=1)
            ctx = torch.bmm(w[:, None], enc)[:, 0]
            h = cell(torch.cat([y[step], ctx], dim=1), h)
            hs.append(h)
            attns.append(w)
        return _h23_flat(torch.stack(hs), torch.stack(attns))
    return {"torch loop (nn.GRUCell)": _nograd(torch, run)}


# ---------------------------------------------------------------- peephole LSTM

H23_PEEPHOLE = """
# LSTM with peephole connections (Gers & Schmidhuber): i and f see c(t-1), o sees c(t); PyTorch's (4H, in) weights
def peephole_lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4*H,I) Wih, float(4*H,H) Whh,
                  float(4*H) bias, float(3,H) peep) -> (h, c) {
  for t in T {
    g(b, r) +=! x(t, b, i) * Wih(r, i)
    if t == 0 { g(b, r) += h0(b, k) * Whh(r, k) }
    else      { g(b, r) += h(t - 1, b, k) * Whh(r, k) }
    if t == 0 { cp(b, j) = c0(b, j) } else { cp(b, j) = c(t - 1, b, j) }
    ig(b, j) = sigmoid(g(b, j) + bias(j) + peep(0, j) * cp(b, j))
    fg(b, j) = sigmoid(g(b, H + j) + bias(H + j) + peep(1, j) * cp(b, j))
    c(t, b, j) = fg(b, j) * cp(b, j) + ig(b, j) * tanh(g(b, 2 * H + j) + bias(2 * H + j))
    h(t, b, j) = sigmoid(g(b, 3 * H + j) + bias(3 * H + j) + peep(2, j) * c(t, b, j)) * tanh(c(t, b, j))
  }
}
"""


def _h23_peephole_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H), _n(rng, B, H), _w(rng, 4 * H, I), _w(rng, 4 * H, H), _w(rng, 4 * H),
            0.5 * _n(rng, 3, H)]


@program(name="peephole lstm (4H,in)", kind="rnn", src=H23_PEEPHOLE, full=dict(T=64, B=32, I=256, H=256),
         tiny=dict(T=3, B=2, I=5, H=4), inputs=_h23_peephole_inputs, pick=lambda r: _h23_flat(*r))
def _h23_peephole(torch, a, t, s):
    x, h0, c0, Wih, Whh, bias, peep = t
    F = torch.nn.functional

    def run():
        gx = F.linear(x, Wih, bias)
        h, c, hs, cs = h0, c0, [], []
        for step in range(x.shape[0]):
            gi, gf, gg, go = (gx[step] + F.linear(h, Whh)).chunk(4, 1)
            i = torch.sigmoid(gi + peep[0] * c)
            f = torch.sigmoid(gf + peep[1] * c)
            c = f * c + i * torch.tanh(gg)
            h = torch.sigmoid(go + peep[2] * c) * torch.tanh(c)
            hs.append(h)
            cs.append(c)
        return _h23_flat(torch.stack(hs), torch.stack(cs))
    return {"torch loop": _nograd(torch, run)}


# ---------------------------------------------------------------- 2-layer stacked GRU

H23_STACKED_GRU = """
# Two stacked GRU layers in one time loop, as torch.nn.GRU(num_layers=2): layer 1 reads layer 0's state of the
# same step. Returns the top layer's outputs and the last state of each layer.
def gru2(float(T,B,I) x, float(2,B,H) h0, float(3*H,I) Wih0, float(3*H,H) Whh0, float(3*H) bih0, float(3*H) bhh0,
         float(3*H,H) Wih1, float(3*H,H) Whh1, float(3*H) bih1, float(3*H) bhh1) -> (out, hn) {
  for t in T {
    ga(b, r) +=! x(t, b, i) * Wih0(r, i)
    if t == 0 { gb(b, r) +=! h0(0, b, k) * Whh0(r, k) }
    else      { gb(b, r) +=! h1(t - 1, b, k) * Whh0(r, k) }
    r0(b, j) = sigmoid(ga(b, j) + bih0(j) + gb(b, j) + bhh0(j)) where j in 0:H
    z0(b, j) = sigmoid(ga(b, H + j) + bih0(H + j) + gb(b, H + j) + bhh0(H + j)) where j in 0:H
    n0(b, j) = tanh(ga(b, 2 * H + j) + bih0(2 * H + j) + r0(b, j) * (gb(b, 2 * H + j) + bhh0(2 * H + j))) where j in 0:H
    if t == 0 { h1(t, b, j) = (1 - z0(b, j)) * n0(b, j) + z0(b, j) * h0(0, b, j) }
    else      { h1(t, b, j) = (1 - z0(b, j)) * n0(b, j) + z0(b, j) * h1(t - 1, b, j) }

    gc(b, r) +=! h1(t, b, i) * Wih1(r, i)
    if t == 0 { gd(b, r) +=! h0(1, b, k) * Whh1(r, k) }
    else      { gd(b, r) +=! out(t - 1, b, k) * Whh1(r, k) }
    r1(b, j) = sigmoid(gc(b, j) + bih1(j) + gd(b, j) + bhh1(j)) where j in 0:H
    z1(b, j) = sigmoid(gc(b, H + j) + bih1(H + j) + gd(b, H + j) + bhh1(H + j)) where j in 0:H
    n1(b, j) = tanh(gc(b, 2 * H + j) + bih1(2 * H + j) + r1(b, j) * (gd(b, 2 * H + j) + bhh1(2 * H + j))) where j in 0:H
    if t == 0 { out(t, b, j) = (1 - z1(b, j)) * n1(b, j) + z1(b, j) * h0(1, b, j) }
    else      { out(t, b, j) = (1 - z1(b, j)) * n1(b, j) + z1(b, j) * out(t - 1, b, j) }
  }
  hn(l, b, j) = l == 0 ? h1(T - 1, b, j) : out(T - 1, b, j) where l in 0:2
}
"""


def _h23_gru2_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, 2, B, H),
            _w(rng, 3 * H, I), _w(rng, 3 * H, H), _w(rng, 3 * H), _w(rng, 3 * H),
            _w(rng, 3 * H, H), _w(rng, 3 * H, H), _w(rng, 3 * H), _w(rng, 3 * H)]


@program(name="2-layer stacked gru, one loop", kind="rnn", src=H23_STACKED_GRU,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4), inputs=_h23_gru2_inputs,
         pick=lambda r: _h23_flat(*r))
def _h23_gru2(torch, a, t, s):
    net = torch.nn.GRU(s["I"], s["H"], num_layers=2)
    names = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
             "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"]
    for name, w in zip(names, a[2:]):
        _copy(torch, getattr(net, name), w)

    def run():
        out, hn = net(t[0], t[1])
        return _h23_flat(out, hn)
    return {"torch.nn.GRU(num_layers=2)": _nograd(torch, run)}


# ---------------------------------------------------------------- GAE: a time-reversed scan

H23_GAE = """
# Generalised advantage estimation (PPO, cleanrl's loop): a scan backwards in time over (steps, envs) buffers
def gae(float(T,B) rewards, float(T,B) values, float(T,B) dones, float(B) next_value, float(B) next_done,
        float gamma, float lam) -> (adv, ret) {
  for s in T {
    if s == 0 {
      adv(T - 1 - s, b) = rewards(T - 1 - s, b) + gamma * next_value(b) * (1 - next_done(b)) - values(T - 1 - s, b)
    } else {
      adv(T - 1 - s, b) = rewards(T - 1 - s, b) + gamma * values(T - s, b) * (1 - dones(T - s, b))
                          - values(T - 1 - s, b) + gamma * lam * (1 - dones(T - s, b)) * adv(T - s, b)
    }
  }
  ret(t, b) = adv(t, b) + values(t, b)
}
"""


def _h23_gae_inputs(rng, s):
    T, B = s["T"], s["B"]
    dones, next_done = (rng.random((T, B)) < 0.05).astype(np.float32), (rng.random(B) < 0.05).astype(np.float32)
    dones[T // 2, 0] = next_done[0] = 1  # at least one episode end inside and at the end
    return [_n(rng, T, B), _n(rng, T, B), dones, _n(rng, B), next_done, np.array(0.99, np.float32),
            np.array(0.95, np.float32)]


@program(name="GAE advantages (reversed scan)", kind="scan", src=H23_GAE, full=dict(T=256, B=1024),
         tiny=dict(T=6, B=3), inputs=_h23_gae_inputs, pick=lambda r: _h23_flat(*r))
def _h23_gae(torch, a, t, s):
    rewards, values, dones, next_value, next_done = t[:5]
    gamma, lam = float(a[5]), float(a[6])

    def run():  # cleanrl's ppo.py
        T = rewards.shape[0]
        adv = torch.zeros_like(rewards)
        last = 0
        for step in reversed(range(T)):
            if step == T - 1:
                nonterminal, nextvalues = 1.0 - next_done, next_value
            else:
                nonterminal, nextvalues = 1.0 - dones[step + 1], values[step + 1]
            delta = rewards[step] + gamma * nextvalues * nonterminal - values[step]
            adv[step] = last = delta + gamma * lam * nonterminal * last
        return _h23_flat(adv, adv + values)
    return {"torch loop (cleanrl)": run}


# ---------------------------------------------------------------- session 47: vision, graph networks, recommendation


# ---------------------------------------------------------------- hunt24: vision, GNN, recommendation

DWSEP = """
# MobileNet block: depthwise 3x3 (padding 1 as a select) + ReLU6, then pointwise 1x1 with bias
def dwsep(float(N,C,H,W) x, float(C,1,3,3) wd, float(M,C,1,1) wp, float(M) bp) -> (y) {
  d(n, c, i, j) +=! (i + kh - 1 >= 0 && i + kh - 1 < H && j + kw - 1 >= 0 && j + kw - 1 < W
                     ? x(n, c, i + kh - 1, j + kw - 1) : 0) * wd(c, 0, kh, kw)
                     where i in 0:H, j in 0:W, kh in 0:3, kw in 0:3
  d(n, c, i, j) = min(max(d(n, c, i, j), 0), 6)
  y(n, m, i, j) +=! wp(m, c, 0, 0) * d(n, c, i, j)
  y(n, m, i, j) = y(n, m, i, j) + bp(m)
}
"""


@program(name="depthwise-separable conv 3x3 + relu6 + 1x1", kind="vision", src=DWSEP,
         full=dict(N=4, C=128, H=56, W=56, M=128), tiny=dict(N=2, C=3, H=5, W=4, M=4),
         inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["C"], 1, 3, 3),
                              _w(r, s["M"], s["C"], 1, 1), _w(r, s["M"])])
def _h24_dwsep(torch, a, t, s):
    F = torch.nn.functional

    def run():
        d = F.relu6(F.conv2d(t[0], t[1], padding=1, groups=s["C"]))
        return F.conv2d(d, t[2], t[3])
    return {"F.conv2d x2": _nograd(torch, run)}


GROUP_NORM = """
# GroupNorm(32, C) over NCHW, eps 1e-5, with affine gamma/beta per channel
def group_norm(float(N,32 * D,H,W) x, float(32 * D) gamma, float(32 * D) beta) -> (y) {
  mean(n, g) +=! x(n, g * D + d, i, j) where g in 0:32, d in 0:D
  mean(n, g) = mean(n, g) / (D * H * W)
  vr(n, g) +=! (x(n, g * D + d, i, j) - mean(n, g)) * (x(n, g * D + d, i, j) - mean(n, g)) where g in 0:32, d in 0:D
  rstd(n, g) = rsqrt(vr(n, g) / (D * H * W) + 1e-5)
  y(n, c, i, j) = (x(n, c, i, j) - mean(n, c / D)) * rstd(n, c / D) * gamma(c) + beta(c)
}
"""


@program(name="group norm 32 groups NCHW", kind="vision", src=GROUP_NORM,
         full=dict(N=8, D=8, H=56, W=56), tiny=dict(N=2, D=2, H=3, W=4),
         inputs=lambda r, s: [_n(r, s["N"], 32 * s["D"], s["H"], s["W"]) * 2 + 1,
                              _n(r, 32 * s["D"]), _n(r, 32 * s["D"])])
def _h24_group_norm(torch, a, t, s):
    F = torch.nn.functional
    return {"F.group_norm": _nograd(torch, lambda: F.group_norm(t[0], 32, t[1], t[2], eps=1e-5))}


MAXPOOL_3X3_S2 = """
# ResNet stem max pool: 3x3, stride 2, padding 1 (padding as -inf)
def maxpool(float(N,C,H,W) x) -> (y) {
  y(n, c, i, j) max=! (2 * i + kh - 1 >= 0 && 2 * i + kh - 1 < H && 2 * j + kw - 1 >= 0 && 2 * j + kw - 1 < W
                       ? x(n, c, 2 * i + kh - 1, 2 * j + kw - 1) : -inf)
                       where i in 0:(H + 1) / 2, j in 0:(W + 1) / 2, kh in 0:3, kw in 0:3
}
"""


@program(name="max pool 3x3 stride 2 pad 1", kind="vision", src=MAXPOOL_3X3_S2,
         full=dict(N=16, C=64, H=112, W=112), tiny=dict(N=2, C=3, H=7, W=8),
         inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _h24_maxpool(torch, a, t, s):
    F = torch.nn.functional
    return {"F.max_pool2d": _nograd(torch, lambda: F.max_pool2d(t[0], 3, 2, 1))}


AVGPOOL = """
# average pool 3x3, stride 2, padding 1, count_include_pad=False (divide by the taps inside the image)
def avgpool(float(N,C,H,W) x) -> (y) {
  s(n, c, i, j) +=! (2 * i + kh - 1 >= 0 && 2 * i + kh - 1 < H && 2 * j + kw - 1 >= 0 && 2 * j + kw - 1 < W
                     ? x(n, c, 2 * i + kh - 1, 2 * j + kw - 1) : 0)
                     where i in 0:(H + 1) / 2, j in 0:(W + 1) / 2, kh in 0:3, kw in 0:3
  cnt(i, j) +=! (2 * i + kh - 1 >= 0 && 2 * i + kh - 1 < H && 2 * j + kw - 1 >= 0 && 2 * j + kw - 1 < W ? 1.0 : 0.0)
                where i in 0:(H + 1) / 2, j in 0:(W + 1) / 2, kh in 0:3, kw in 0:3
  y(n, c, i, j) = s(n, c, i, j) / cnt(i, j)
}
"""


@program(name="avg pool 3x3 stride 2 pad 1 exclude pad", kind="vision", src=AVGPOOL,
         full=dict(N=16, C=64, H=112, W=112), tiny=dict(N=2, C=3, H=7, W=8),
         inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"])])
def _h24_avgpool(torch, a, t, s):
    F = torch.nn.functional
    return {"F.avg_pool2d": _nograd(torch, lambda: F.avg_pool2d(t[0], 3, 2, 1, count_include_pad=False))}


SE_BLOCK = """
# squeeze-and-excitation: global average pool, FC C->R + ReLU, FC R->C + sigmoid, rescale channels
def se_block(float(N,C,H,W) x, float(R,C) W1, float(R) b1, float(C,R) W2, float(C) b2) -> (y) {
  sq(n, c) +=! x(n, c, i, j)
  sq(n, c) = sq(n, c) / (H * W)
  z(n, r) +=! W1(r, c) * sq(n, c)
  z(n, r) = fmax(z(n, r) + b1(r), 0)
  e(n, c) +=! W2(c, r) * z(n, r)
  e(n, c) = sigmoid(e(n, c) + b2(c))
  y(n, c, i, j) = x(n, c, i, j) * e(n, c)
}
"""


@program(name="squeeze-and-excitation block", kind="vision", src=SE_BLOCK,
         full=dict(N=32, C=256, H=28, W=28, R=16), tiny=dict(N=2, C=6, H=3, W=4, R=2),
         inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["R"], s["C"]), _w(r, s["R"]),
                              _w(r, s["C"], s["R"]), _w(r, s["C"])])
def _h24_se(torch, a, t, s):
    F = torch.nn.functional

    def run():
        x = t[0]
        z = F.relu(F.linear(x.mean((2, 3)), t[1], t[2]))
        e = torch.sigmoid(F.linear(z, t[3], t[4]))
        return x * e[:, :, None, None]
    return {"torch": _nograd(torch, run)}


GCN = """
# GCN layer: relu(A_hat @ (X @ W^T) + b), A_hat the dense normalized adjacency D^-1/2 (A + I) D^-1/2
def gcn(float(N,N) A, float(N,F) X, float(O,F) W, float(O) b) -> (Hout) {
  XW(v, o) +=! X(v, f) * W(o, f)
  Hout(u, o) +=! A(u, v) * XW(v, o)
  Hout(u, o) = fmax(Hout(u, o) + b(o), 0)
}
"""


def _h24_adj(rng, N, p):
    A = (rng.random((N, N)) < p).astype(np.float32)
    A = np.maximum(A, A.T)
    np.fill_diagonal(A, 1.0)
    return A


def _h24_gcn_inputs(rng, s):
    N = s["N"]
    A = _h24_adj(rng, N, min(1.0, 16.0 / N))
    dinv = 1.0 / np.sqrt(A.sum(1))
    A_hat = (A * dinv[:, None] * dinv[None, :]).astype(np.float32)
    return [A_hat, _n(rng, N, s["F"]), _w(rng, s["O"], s["F"]), _w(rng, s["O"])]


@program(name="gcn layer dense normalized adjacency", kind="gnn", src=GCN,
         full=dict(N=1024, F=512, O=128), tiny=dict(N=7, F=5, O=4), inputs=_h24_gcn_inputs)
def _h24_gcn(torch, a, t, s):
    F = torch.nn.functional
    return {"torch": _nograd(torch, lambda: F.relu(t[0] @ (t[1] @ t[2].T) + t[3]))}


SAGE = """
# GraphSAGE layer, mean aggregator over K sampled neighbours, root + neighbour weights, ReLU, L2 normalize
def sage(float(N,F) X, int32(N,K) nbr, float(O,F) Ws, float(O,F) Wn, float(O) b) -> (Hout) {
  agg(u, f) +=! X(nbr(u, k), f)
  agg(u, f) = agg(u, f) / K
  h(u, o) +=! X(u, f) * Ws(o, f)
  h(u, o) += agg(u, f) * Wn(o, f)
  h(u, o) = fmax(h(u, o) + b(o), 0)
  nrm(u) +=! h(u, o) * h(u, o)
  Hout(u, o) = h(u, o) / fmax(sqrt(nrm(u)), 1e-12)
}
"""


@program(name="graphsage mean aggregation + l2 norm", kind="gnn", src=SAGE,
         full=dict(N=4096, K=16, F=128, O=128), tiny=dict(N=7, K=3, F=5, O=4),
         inputs=lambda r, s: [_n(r, s["N"], s["F"]), r.integers(0, s["N"], (s["N"], s["K"])).astype(np.int32),
                              _w(r, s["O"], s["F"]), _w(r, s["O"], s["F"]), _w(r, s["O"])])
def _h24_sage(torch, a, t, s):
    F = torch.nn.functional

    def run():
        X, nbr = t[0], t[1].long()
        agg = X[nbr].mean(1)
        h = F.relu(F.linear(X, t[2], t[4]) + F.linear(agg, t[3]))
        return F.normalize(h, dim=1, eps=1e-12)
    return {"torch": _nograd(torch, run)}


GAT = """
# GAT layer, Hd heads of D features, attention over a dense adjacency mask (self loops included)
def gat(float(N,F) X, float(Hd,D,F) W, float(Hd,D) asrc, float(Hd,D) adst, float(N,N) adj) -> (out) {
  h(u, hd, d) +=! X(u, f) * W(hd, d, f)
  es(hd, u) +=! h(u, hd, d) * asrc(hd, d)
  ed(hd, u) +=! h(u, hd, d) * adst(hd, d)
  e(hd, u, v) = adj(u, v) > 0 ? (a > 0 ? a : 0.2 * a) : -inf where a = es(hd, u) + ed(hd, v)
  mx(hd, u) max=! e(hd, u, v)
  p(hd, u, v) = exp(e(hd, u, v) - mx(hd, u))
  z(hd, u) +=! p(hd, u, v)
  out(u, hd, d) +=! p(hd, u, v) * h(v, hd, d) / z(hd, u)
}
"""


def _h24_gat_inputs(rng, s):
    N, Hd, D = s["N"], s["Hd"], s["D"]
    return [_n(rng, N, s["F"]), _w(rng, Hd, D, s["F"]), _w(rng, Hd, D), _w(rng, Hd, D),
            _h24_adj(rng, N, min(1.0, 16.0 / N))]


@program(name="gat multi-head dense mask masked softmax", kind="gnn", src=GAT,
         full=dict(N=1024, F=256, Hd=4, D=32), tiny=dict(N=7, F=5, Hd=2, D=3), inputs=_h24_gat_inputs)
def _h24_gat(torch, a, t, s):
    F = torch.nn.functional

    def run():
        X, W, asrc, adst, adj = t
        h = torch.einsum("uf,hdf->hud", X, W)                       # (Hd, N, D)
        es = (h * asrc[:, None, :]).sum(-1)
        ed = (h * adst[:, None, :]).sum(-1)
        e = F.leaky_relu(es[:, :, None] + ed[:, None, :], 0.2)
        e = e.masked_fill(adj[None] <= 0, float("-inf"))
        att = torch.softmax(e, dim=-1)
        return torch.bmm(att, h).permute(1, 0, 2)                  # (N, Hd, D)
    return {"torch": _nograd(torch, run)}


DLRM = """
# DLRM dot interaction: dense features and T embedding lookups, pairwise dots of the lower triangle
# (pairs li > lj as torch.tril_indices(T+1, T+1, -1) gives), concatenated after the dense features
def dlrm_interact(float(B,D) dense, float(T,V,D) emb, int32(B,T) idx, int32(P) li, int32(P) lj) -> (R) {
  Fe(b, k, d) = dense(b, d) where k in 0:1
  Fe(b, 1 + t, d) = emb(t, idx(b, t), d)
  R(b, d) = dense(b, d)
  R(b, D + p) +=! Fe(b, li(p), d) * Fe(b, lj(p), d)
}
"""


def _h24_dlrm_inputs(rng, s):
    B, D, T, V = s["B"], s["D"], s["T"], s["V"]
    li, lj = np.tril_indices(T + 1, -1)
    assert len(li) == s["P"]
    return [_n(rng, B, D), _w(rng, T, V, D), rng.integers(0, V, (B, T)).astype(np.int32),
            li.astype(np.int32), lj.astype(np.int32)]


@program(name="dlrm dot interaction lower triangle", kind="recsys", src=DLRM,
         full=dict(B=2048, D=64, T=26, V=4000, P=351), tiny=dict(B=3, D=4, T=3, V=5, P=6),
         inputs=_h24_dlrm_inputs)
def _h24_dlrm(torch, a, t, s):
    def run():
        dense, emb, idx, li, lj = t
        T = s["T"]
        ly = emb[torch.arange(T)[None, :], idx.long()]            # (B, T, D)
        Fe = torch.cat([dense[:, None, :], ly], dim=1)
        Z = torch.bmm(Fe, Fe.transpose(1, 2))
        return torch.cat([dense, Z[:, li.long(), lj.long()]], dim=1)
    return {"torch bmm + tril gather": _nograd(torch, run)}


EMBBAG_MLP = """
# EmbeddingBag(mode='mean') over fixed-length bags, then a 2-layer MLP (nn.Linear layouts)
def embbag_mlp(float(V,D) emb, int32(B,L) idx, float(Hd,D) W1, float(Hd) b1, float(O,Hd) W2, float(O) b2) -> (y) {
  bag(b, d) +=! emb(idx(b, l), d)
  bag(b, d) = bag(b, d) / L
  h(b, j) +=! bag(b, d) * W1(j, d)
  h(b, j) = fmax(h(b, j) + b1(j), 0)
  y(b, o) +=! h(b, j) * W2(o, j)
  y(b, o) = y(b, o) + b2(o)
}
"""


@program(name="embedding bag mean + mlp", kind="recsys", src=EMBBAG_MLP,
         full=dict(V=50000, D=128, B=2048, L=32, Hd=256, O=64), tiny=dict(V=9, D=4, B=3, L=2, Hd=5, O=3),
         inputs=lambda r, s: [_n(r, s["V"], s["D"]), r.integers(0, s["V"], (s["B"], s["L"])).astype(np.int32),
                              _w(r, s["Hd"], s["D"]), _w(r, s["Hd"]), _w(r, s["O"], s["Hd"]), _w(r, s["O"])])
def _h24_embbag(torch, a, t, s):
    F = torch.nn.functional

    def run():
        bag = F.embedding_bag(t[1].long(), t[0], mode="mean")
        return F.linear(F.relu(F.linear(bag, t[2], t[3])), t[4], t[5])
    return {"F.embedding_bag + linear": _nograd(torch, run)}


PATCH_EMBED = """
# ViT patch embedding: 16x16 patches (a conv with stride = kernel), tokens laid out (N, Hp, Wp, E), + position embedding
def patch_embed(float(N,3,H,W) x, float(E,3,16,16) w, float(E) bias, float(Hp,Wp,E) pos) -> (tok) {
  tok(n, i, j, e) +=! x(n, c, 16 * i + kh, 16 * j + kw) * w(e, c, kh, kw)
  tok(n, i, j, e) = tok(n, i, j, e) + bias(e) + pos(i, j, e)
}
"""


@program(name="vit patch embedding 16x16 + pos", kind="vision", src=PATCH_EMBED,
         full=dict(N=8, H=224, W=224, E=384, Hp=14, Wp=14), tiny=dict(N=2, H=32, W=48, E=5, Hp=2, Wp=3),
         inputs=lambda r, s: [_n(r, s["N"], 3, s["H"], s["W"]), _w(r, s["E"], 3, 16, 16), _w(r, s["E"]),
                              _n(r, s["Hp"], s["Wp"], s["E"])])
def _h24_patch(torch, a, t, s):
    F = torch.nn.functional
    return {"F.conv2d stride 16": _nograd(torch, lambda: F.conv2d(t[0], t[1], t[2], stride=16).permute(0, 2, 3, 1)
                                          + t[3])}


UPCONV = """
# decoder step: nearest 2x upsampling, then a 3x3 conv with padding 1 and bias, ReLU
def up_conv(float(N,C,H,W) x, float(M,C,3,3) w, float(M) bias) -> (y) {
  u(n, c, i, j) = x(n, c, i / 2, j / 2) where i in 0:2 * H, j in 0:2 * W
  y(n, m, i, j) +=! (i + kh - 1 >= 0 && i + kh - 1 < 2 * H && j + kw - 1 >= 0 && j + kw - 1 < 2 * W
                     ? u(n, c, i + kh - 1, j + kw - 1) : 0) * w(m, c, kh, kw)
                     where i in 0:2 * H, j in 0:2 * W, kh in 0:3, kw in 0:3
  y(n, m, i, j) = fmax(y(n, m, i, j) + bias(m), 0)
}
"""


@program(name="nearest upsample 2x + conv3x3 + relu", kind="vision", src=UPCONV,
         full=dict(N=4, C=64, H=28, W=28, M=32), tiny=dict(N=2, C=3, H=3, W=4, M=2),
         inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["M"], s["C"], 3, 3), _w(r, s["M"])])
def _h24_upconv(torch, a, t, s):
    F = torch.nn.functional

    def run():
        u = F.interpolate(t[0], scale_factor=2, mode="nearest")
        return F.relu(F.conv2d(u, t[1], t[2], padding=1))
    return {"F.interpolate + F.conv2d": _nograd(torch, run)}


SHUFFLE = """
# ShuffleNet: grouped 1x1 conv (4 groups, PyTorch weight (4*Co, Ci)), ReLU, channel shuffle of the 4 groups
def shuffle_unit(float(N,4 * Ci,H,W) x, float(4 * Co,Ci) w) -> (y) {
  z(n, o, i, j) +=! x(n, (o / Co) * Ci + k, i, j) * w(o, k) where o in 0:4 * Co
  y(n, c, i, j) = fmax(z(n, (c % 4) * Co + c / 4, i, j), 0) where c in 0:4 * Co
}
"""


@program(name="grouped 1x1 conv + channel shuffle", kind="vision", src=SHUFFLE,
         full=dict(N=16, Ci=60, Co=60, H=28, W=28), tiny=dict(N=2, Ci=2, Co=3, H=3, W=4),
         inputs=lambda r, s: [_n(r, s["N"], 4 * s["Ci"], s["H"], s["W"]), _w(r, 4 * s["Co"], s["Ci"])])
def _h24_shuffle(torch, a, t, s):
    F = torch.nn.functional
    N, Co, H, W = s["N"], s["Co"], s["H"], s["W"]

    def run():
        z = F.relu(F.conv2d(t[0], t[1][:, :, None, None], groups=4))
        return z.view(N, 4, Co, H, W).transpose(1, 2).reshape(N, 4 * Co, H, W)
    return {"F.conv2d groups + shuffle": _nograd(torch, run)}


CONV_BN_RELU = """
# 1x1 conv (no bias) + BatchNorm2d in inference mode (running stats, eps 1e-5) + ReLU
def conv_bn_relu(float(N,C,H,W) x, float(M,C,1,1) w, float(M) gamma, float(M) beta,
                 float(M) rmean, float(M) rvar) -> (y) {
  y(n, m, i, j) +=! w(m, c, 0, 0) * x(n, c, i, j)
  y(n, m, i, j) = fmax((y(n, m, i, j) - rmean(m)) * rsqrt(rvar(m) + 1e-5) * gamma(m) + beta(m), 0)
}
"""


@program(name="conv1x1 + batchnorm inference + relu", kind="vision", src=CONV_BN_RELU,
         full=dict(N=4, C=256, H=28, W=28, M=256), tiny=dict(N=2, C=3, H=3, W=4, M=5),
         inputs=lambda r, s: [_n(r, s["N"], s["C"], s["H"], s["W"]), _w(r, s["M"], s["C"], 1, 1), _n(r, s["M"]),
                              _n(r, s["M"]), _n(r, s["M"]) * 0.1, (r.random(s["M"]) + 0.5).astype(np.float32)])
def _h24_conv_bn(torch, a, t, s):
    F = torch.nn.functional

    def run():
        y = F.conv2d(t[0], t[1])
        return F.relu(F.batch_norm(y, t[4], t[5], t[2], t[3], training=False, eps=1e-5))
    return {"F.conv2d + F.batch_norm": _nograd(torch, run)}


# ---------------------------------------------------------------- session 48: audio, speech and time series


# ============================================================ hunt 25: audio, speech and time series

H25_WAVENET = """
# WaveNet: three gated residual layers (dilations 1, 2, 4, kernel 2, causal), skip connections summed, relu
def wavenet3(float(B,C,L) x, float(3,C,C,2) Wf, float(3,C,C,2) Wg, float(3,C,C) Wr, float(3,S,C) Ws) -> (y) {
  f0(b, o, t) +=! (t + k - 1 >= 0 ? x(b, c, t + k - 1) : 0) * Wf(0, o, c, k) where t in 0:L, k in 0:2
  g0(b, o, t) +=! (t + k - 1 >= 0 ? x(b, c, t + k - 1) : 0) * Wg(0, o, c, k) where t in 0:L, k in 0:2
  z0(b, o, t) = tanh(f0(b, o, t)) * sigmoid(g0(b, o, t))
  h1(b, o, t) +=! Wr(0, o, c) * z0(b, c, t)
  h1(b, o, t) = h1(b, o, t) + x(b, o, t)

  f1(b, o, t) +=! (t + 2 * k - 2 >= 0 ? h1(b, c, t + 2 * k - 2) : 0) * Wf(1, o, c, k) where t in 0:L, k in 0:2
  g1(b, o, t) +=! (t + 2 * k - 2 >= 0 ? h1(b, c, t + 2 * k - 2) : 0) * Wg(1, o, c, k) where t in 0:L, k in 0:2
  z1(b, o, t) = tanh(f1(b, o, t)) * sigmoid(g1(b, o, t))
  h2(b, o, t) +=! Wr(1, o, c) * z1(b, c, t)
  h2(b, o, t) = h2(b, o, t) + h1(b, o, t)

  f2(b, o, t) +=! (t + 4 * k - 4 >= 0 ? h2(b, c, t + 4 * k - 4) : 0) * Wf(2, o, c, k) where t in 0:L, k in 0:2
  g2(b, o, t) +=! (t + 4 * k - 4 >= 0 ? h2(b, c, t + 4 * k - 4) : 0) * Wg(2, o, c, k) where t in 0:L, k in 0:2
  z2(b, o, t) = tanh(f2(b, o, t)) * sigmoid(g2(b, o, t))

  sk(b, s, t) +=! Ws(0, s, c) * z0(b, c, t)
  sk(b, s, t) += Ws(1, s, c) * z1(b, c, t)
  sk(b, s, t) += Ws(2, s, c) * z2(b, c, t)
  y(b, s, t) = max(sk(b, s, t), 0)
}
"""


@program(name="wavenet 3 gated layers d=1,2,4 + skip sum", kind="audio", src=H25_WAVENET,
         full=dict(B=4, C=64, L=2048, S=128), tiny=dict(B=2, C=3, L=11, S=4),
         inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, 3, s["C"], s["C"], 2) * 0.7,
                              _w(r, 3, s["C"], s["C"], 2) * 0.7, _w(r, 3, s["C"], s["C"]), _w(r, 3, s["S"], s["C"])])
def _h25_wavenet(torch, a, t, s):
    F = torch.nn.functional
    x, Wf, Wg, Wr, Ws = t
    Wfg = torch.cat([Wf, Wg], 1)  # (3, 2C, C, 2): filter and gate in one conv, as WaveNet code does
    C = s["C"]

    def run():
        h, skip = x, 0
        for l, d in enumerate((1, 2, 4)):
            fg = F.conv1d(F.pad(h, (d, 0)), Wfg[l], dilation=d)
            z = torch.tanh(fg[:, :C]) * torch.sigmoid(fg[:, C:])
            skip = skip + F.conv1d(z, Ws[l][:, :, None])
            if l < 2:
                h = h + F.conv1d(z, Wr[l][:, :, None])
        return torch.relu(skip)
    return {"F.conv1d stack": _nograd(torch, run)}


H25_HOLT = """
# Holt-Winters, additive trend and season (period P), one series per row; one-step-ahead forecasts
def holt_winters(float(B,T) y, float(B) alpha, float(B) beta, float(B) gamma,
                 float(B) l0, float(B) b0, float(B,P) s0) -> (fc, lev) {
  for t in T {
    if t == 0 { lp(b) = l0(b)
                tp(b) = b0(b) }
    else      { lp(b) = lev(b, t - 1)
                tp(b) = tr(b, t - 1) }
    if t < P  { sp(b) = s0(b, t) }
    else      { sp(b) = sea(b, t - P) }
    fc(b, t) = lp(b) + tp(b) + sp(b)
    lev(b, t) = alpha(b) * (y(b, t) - sp(b)) + (1 - alpha(b)) * (lp(b) + tp(b))
    tr(b, t) = beta(b) * (lev(b, t) - lp(b)) + (1 - beta(b)) * tp(b)
    sea(b, t) = gamma(b) * (y(b, t) - lp(b) - tp(b)) + (1 - gamma(b)) * sp(b)
  }
}
"""


def _h25_holt_inputs(r, s):
    B, T, P = s["B"], s["T"], s["P"]
    tt = np.arange(T)
    y = (np.sin(2 * np.pi * tt / P)[None] + 0.01 * tt[None] + 0.3 * r.standard_normal((B, T))).astype(np.float32)
    u = lambda lo, hi: r.uniform(lo, hi, B).astype(np.float32)
    return [y, u(0.1, 0.5), u(0.01, 0.2), u(0.05, 0.3), u(-0.5, 0.5), u(-0.05, 0.05), _n(r, B, P) * 0.5]


@program(name="holt-winters additive (level, trend, season P)", kind="timeseries", src=H25_HOLT,
         full=dict(B=256, T=512, P=12), tiny=dict(B=3, T=11, P=4), inputs=_h25_holt_inputs, pick=lambda r: r[0])
def _h25_holt(torch, a, t, s):
    y, al, be, ga, l0, b0, s0 = t

    def run():
        l, b, season, fc = l0, b0, list(s0.unbind(1)), []
        for k in range(y.shape[1]):
            sp = season[k]
            fc.append(l + b + sp)
            ln = al * (y[:, k] - sp) + (1 - al) * (l + b)
            bn = be * (ln - l) + (1 - be) * b
            season.append(ga * (y[:, k] - l - b) + (1 - ga) * sp)
            l, b = ln, bn
        return torch.stack(fc, 1)
    return {"torch loop over t": _nograd(torch, run)}


H25_DTW = """
# Dynamic time warping between two feature sequences per pair (squared Euclidean frame cost)
def dtw(float(B,N,D) x, float(B,M,D) y) -> (dist, R) {
  c(b, i, j) +=! (x(b, i, d) - y(b, j, d)) * (x(b, i, d) - y(b, j, d))
  for i in N {
    if i == 0 { up(b, j) = j == 0 ? c(b, i, j) : inf }
    else      { up(b, j) = c(b, i, j) + min(R(b, i - 1, j), j > 0 ? R(b, i - 1, j - 1) : inf) where j in 0:M }
    R(b, i, j) = up(b, j)
    R(b, i, j) = min(R(b, i, j), j > 0 ? c(b, i, j) + R(b, i, j - 1) : inf) where j in 0:M
  }
  dist(b) = R(b, N - 1, M - 1)
}
"""


@program(name="dtw (row loop, scan along j)", kind="timeseries", src=H25_DTW,
         full=dict(B=64, N=64, M=64, D=20), tiny=dict(B=2, N=5, M=4, D=3),
         inputs=lambda r, s: [_n(r, s["B"], s["N"], s["D"]), _n(r, s["B"], s["M"], s["D"])], pick=lambda r: r[0])
def _h25_dtw(torch, a, t, s):
    x, y = a

    def run():
        c = ((x[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1)
        N, M = c.shape[1], c.shape[2]
        R = np.full((x.shape[0], N + 1, M + 1), np.inf, np.float32)
        R[:, 0, 0] = 0
        for i in range(1, N + 1):
            for j in range(1, M + 1):
                R[:, i, j] = c[:, i - 1, j - 1] + np.minimum(np.minimum(R[:, i - 1, j], R[:, i, j - 1]), R[:, i - 1, j - 1])
        return R[:, N, M]
    return {"numpy loop over i, j": run}


H25_SW = """
# Smith-Waterman local alignment score, linear gap, substitution matrix looked up by token
def smith_waterman(int32(B,N) a, int32(B,M) q, float(A,A) sub, float gap) -> (score) {
  for i in N {
    if i == 0 { d(b, j) = max(0, max(sub(a(b, i), q(b, j)), -gap)) }
    else      { d(b, j) = max(0, max((j > 0 ? H(b, i - 1, j - 1) : 0) + sub(a(b, i), q(b, j)), H(b, i - 1, j) - gap)) where j in 0:M }
    H(b, i, j) = d(b, j)
    H(b, i, j) = max(H(b, i, j), j > 0 ? H(b, i, j - 1) - gap : 0) where j in 0:M
  }
  score(b) max=! H(b, i, j)
}
"""


def _h25_sw_inputs(r, s):
    A = s["A"]
    sub = np.full((A, A), -1.0, np.float32) + 3.0 * np.eye(A, dtype=np.float32)
    return [r.integers(0, A, (s["B"], s["N"])).astype(np.int32), r.integers(0, A, (s["B"], s["M"])).astype(np.int32),
            sub, np.array(1.5, np.float32)]


@program(name="smith-waterman local alignment score", kind="timeseries", src=H25_SW,
         full=dict(B=128, N=64, M=64, A=4), tiny=dict(B=3, N=6, M=5, A=4), inputs=_h25_sw_inputs)
def _h25_sw(torch, a, t, s):
    seqa, seqq, sub, gap = a

    def run():
        B, N, M = seqa.shape[0], seqa.shape[1], seqq.shape[1]
        S = sub[seqa[:, :, None], seqq[:, None, :]]
        H = np.zeros((B, N + 1, M + 1), np.float32)
        for i in range(1, N + 1):
            for j in range(1, M + 1):
                H[:, i, j] = np.maximum(np.maximum(0, H[:, i - 1, j - 1] + S[:, i - 1, j - 1]),
                                        np.maximum(H[:, i - 1, j], H[:, i, j - 1]) - gap)
        return H.reshape(B, -1).max(1)
    return {"numpy loop over i, j": run}


H25_LOGMEL = """
# log-mel features from a power spectrogram, then per-utterance mean and variance normalisation (CMVN)
def logmel_cmvn(float(B,T,F) pw, float(M,F) fb) -> (y) {
  mel(b, t, m) +=! pw(b, t, f) * fb(m, f)
  mel(b, t, m) = log(mel(b, t, m) + 1e-6)
  mu(b, m) +=! mel(b, t, m) / T
  var(b, m) +=! (mel(b, t, m) - mu(b, m)) * (mel(b, t, m) - mu(b, m)) / T
  y(b, t, m) = (mel(b, t, m) - mu(b, m)) * rsqrt(var(b, m) + 1e-5)
}
"""


def _h25_melfb(F, M):
    """Triangular mel filters over F linear bins (HTK mel scale)."""
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    imel = lambda m: 700 * (10 ** (m / 2595) - 1)
    pts = imel(np.linspace(mel(0), mel(8000), M + 2))
    freqs = np.linspace(0, 8000, F)
    fb = np.zeros((M, F), np.float32)
    for m in range(M):
        lo, c, hi = pts[m], pts[m + 1], pts[m + 2]
        fb[m] = np.maximum(0, np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)))
    return fb


@program(name="log-mel filterbank + cmvn", kind="audio", src=H25_LOGMEL,
         full=dict(B=16, T=500, F=257, M=80), tiny=dict(B=2, T=5, F=9, M=3),
         inputs=lambda r, s: [(r.standard_normal((s["B"], s["T"], s["F"])) ** 2).astype(np.float32),
                              _h25_melfb(s["F"], s["M"])])
def _h25_logmel(torch, a, t, s):
    pw, fb = t

    def run():
        mel = torch.log(pw @ fb.T + 1e-6)
        mu = mel.mean(1, keepdim=True)
        var = mel.var(1, unbiased=False, keepdim=True)
        return (mel - mu) * torch.rsqrt(var + 1e-5)
    return {"torch matmul + log + mean/var": _nograd(torch, run)}


H25_LPC = """
# LPC synthesis (all-pole) filter: y(t) = e(t) - sum_k a(k) y(t - 1 - k), per utterance coefficients
def lpc_synth(float(B,T) e, float(B,K) a) -> (y) {
  for t in T {
    acc(b) +=! (t - 1 - k >= 0 ? y(b, t - 1 - k) : 0) * a(b, k) where k in 0:K
    y(b, t) = e(b, t) - acc(b)
  }
}
"""


def _h25_lpc_inputs(r, s):
    B, T, K = s["B"], s["T"], s["K"]
    a = np.zeros((B, K), np.float64)
    for b in range(B):  # step-up recursion from stable reflection coefficients
        poly = np.array([1.0])
        for kk in r.uniform(-0.6, 0.6, K):
            ext = np.concatenate([poly, [0.0]])
            poly = ext + kk * ext[::-1]
        a[b] = poly[1:]
    return [_n(r, B, T), a.astype(np.float32)]


@program(name="lpc all-pole synthesis filter", kind="audio", src=H25_LPC,
         full=dict(B=64, T=4000, K=16), tiny=dict(B=2, T=9, K=3), inputs=_h25_lpc_inputs)
def _h25_lpc(torch, a, t, s):
    import scipy.signal as sig
    e, coef = a

    def run():
        return np.stack([sig.lfilter([1.0], np.concatenate([[1.0], coef[b]]).astype(np.float32), e[b])
                         for b in range(e.shape[0])])
    return {"scipy.signal.lfilter per row": run}


H25_RING = """
# streaming attention: each step writes its key/value into slot t % W of a ring buffer and attends over the filled slots
def ring_attention(float(T,B,D) q, float(T,B,D) k, float(T,B,D) v) -> (o) {
  for t in T {
    kb(s, b, d) = s == t % W ? k(t, b, d) : kb(s, b, d) where s in 0:W
    vb(s, b, d) = s == t % W ? v(t, b, d) : vb(s, b, d) where s in 0:W
    sc(b, s) +=! q(t, b, d) * kb(s, b, d)
    sc(b, s) = s <= t ? sc(b, s) * rsqrt(float(D)) : -inf
    mx(b) max=! sc(b, s)
    e(b, s) = exp(sc(b, s) - mx(b))
    z(b) +=! e(b, s)
    o(t, b, d) +=! e(b, s) * vb(s, b, d) / z(b)
  }
}
"""


@program(name="streaming attention over a ring buffer (window W)", kind="audio", src=H25_RING,
         full=dict(T=256, B=16, D=64, W=64), tiny=dict(T=7, B=2, D=3, W=3), free=("W",),
         inputs=lambda r, s: [_n(r, s["T"], s["B"], s["D"]) for _ in range(3)])
def _h25_ring(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = (x.permute(1, 0, 2) for x in t)
    T, W = s["T"], s["W"]
    i = torch.arange(T)
    mask = (i[:, None] - i[None, :] >= 0) & (i[:, None] - i[None, :] < W)
    return {"F.scaled_dot_product_attention (band mask)":
            _nograd(torch, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask).permute(1, 0, 2))}


H25_LSTMFC = """
# forecasting LSTM, teacher forcing: the input at t is the observed y(t-1) (y0 at t = 0) and covariates; linear head
def lstm_forecast(float(T,B) y, float(B) yinit, float(T,B,F) cov, float(4*H) Wy, float(4*H,F) Wx,
                  float(4*H,H) Wh, float(4*H) bias, float(H) Wo, float bo) -> (pred) {
  for t in T {
    if t == 0 { g(b, r) = yinit(b) * Wy(r) + bias(r) }
    else      { g(b, r) = y(t - 1, b) * Wy(r) + bias(r) }
    g(b, r) += cov(t, b, f) * Wx(r, f)
    if t > 0  { g(b, r) += h(t - 1, b, k) * Wh(r, k) }
    ig(b, j) = sigmoid(g(b, j)) where j in 0:H
    fg(b, j) = sigmoid(g(b, H + j)) where j in 0:H
    gg(b, j) = tanh(g(b, 2 * H + j)) where j in 0:H
    og(b, j) = sigmoid(g(b, 3 * H + j)) where j in 0:H
    if t == 0 { c(t, b, j) = ig(b, j) * gg(b, j) }
    else      { c(t, b, j) = fg(b, j) * c(t - 1, b, j) + ig(b, j) * gg(b, j) }
    h(t, b, j) = og(b, j) * tanh(c(t, b, j))
    pred(t, b) +=! h(t, b, j) * Wo(j)
    pred(t, b) = pred(t, b) + bo
  }
}
"""


@program(name="forecasting lstm, teacher forcing + covariates", kind="timeseries", src=H25_LSTMFC,
         full=dict(T=128, B=32, F=8, H=128), tiny=dict(T=4, B=2, F=3, H=5),
         inputs=lambda r, s: [_n(r, s["T"], s["B"]), _n(r, s["B"]), _n(r, s["T"], s["B"], s["F"]),
                              _w(r, 4 * s["H"]), _w(r, 4 * s["H"], s["F"]), _w(r, 4 * s["H"], s["H"]),
                              _w(r, 4 * s["H"]), _w(r, s["H"]), np.array(0.1, np.float32)])
def _h25_lstmfc(torch, a, t, s):
    y, y0, cov, Wy, Wx, Wh, bias, Wo, bo = t
    H, Fc = s["H"], s["F"]
    net = torch.nn.LSTM(1 + Fc, H)
    _copy(torch, net.weight_ih_l0, np.concatenate([a[3][:, None], a[4]], 1))
    _copy(torch, net.weight_hh_l0, a[5])
    _copy(torch, net.bias_ih_l0, a[6])
    _copy(torch, net.bias_hh_l0, np.zeros(4 * H, np.float32))

    def run():
        yin = torch.cat([y0[None], y[:-1]], 0)[:, :, None]
        out, _ = net(torch.cat([yin, cov], 2))
        return out @ Wo + bo
    return {"torch.nn.LSTM + head": _nograd(torch, run)}


H25_UNET = """
# 1-D U-Net step: strided conv down (K=4, stride 2, pad 1) + relu, transposed conv up (K=4, stride 2, pad 1),
# concatenation with the skip input, 1x1 conv + relu
def unet1d(float(B,C,2*N) x, float(O,C,4) Wd, float(O,C,4) Wu, float(P,2*C) W1) -> (y) {
  d(b, o, t) +=! (2 * t + k - 1 >= 0 && 2 * t + k - 1 < 2 * N ? x(b, c, 2 * t + k - 1) : 0) * Wd(o, c, k) where t in 0:N, k in 0:4
  d(b, o, t) = max(d(b, o, t), 0)
  u(b, c, i) +=! ((i + 1 - k) % 2 == 0 && i + 1 - k >= 0 && i + 1 - k < 2 * N ? d(b, o, (i + 1 - k) / 2) : 0) * Wu(o, c, k) where i in 0:2*N, k in 0:4
  cat(b, c, i) = x(b, c, i)
  cat(b, C + c, i) = u(b, c, i)
  y(b, p, i) +=! W1(p, c2) * cat(b, c2, i)
  y(b, p, i) = max(y(b, p, i), 0)
}
"""


@program(name="1-d u-net down/up step with skip concat", kind="audio", src=H25_UNET,
         full=dict(B=8, C=64, N=512, O=128, P=64), tiny=dict(B=2, C=3, N=5, O=4, P=3),
         inputs=lambda r, s: [_n(r, s["B"], s["C"], 2 * s["N"]), _w(r, s["O"], s["C"], 4), _w(r, s["O"], s["C"], 4),
                              _w(r, s["P"], 2 * s["C"])])
def _h25_unet(torch, a, t, s):
    F = torch.nn.functional
    x, Wd, Wu, W1 = t

    def run():
        d = F.relu(F.conv1d(x, Wd, stride=2, padding=1))
        u = F.conv_transpose1d(d, Wu, stride=2, padding=1)
        return F.relu(F.conv1d(torch.cat([x, u], 1), W1[:, :, None]))
    return {"F.conv1d / conv_transpose1d": _nograd(torch, run)}


H25_S4D = """
# S4D layer: diagonal SSM kernel K(h, l) = 2 Re(sum_n C_n exp(dt A_n l)) (C with B and the discretisation folded in),
# then the causal convolution of the input with K, plus the skip D u
def s4d(float(B,H,L) u, float(H,N) Are, float(H,N) Aim, float(H,N) Cre, float(H,N) Cim,
        float(H) logdt, float(H) Dsk) -> (y) {
  K(h, l) +=! 2 * exp(ar * l) * (Cre(h, n) * cos(ai * l) - Cim(h, n) * sin(ai * l))
      where ar = exp(logdt(h)) * Are(h, n), ai = exp(logdt(h)) * Aim(h, n), l in 0:L
  y(b, h, l) +=! (l - j >= 0 ? u(b, h, l - j) : 0) * K(h, j) where l in 0:L, j in 0:L
  y(b, h, l) = y(b, h, l) + Dsk(h) * u(b, h, l)
}
"""


def _h25_s4d_inputs(r, s):
    Bn, H, L, N = s["B"], s["H"], s["L"], s["N"]
    Are = np.full((H, N), -0.5, np.float32)
    Aim = np.tile(np.pi * np.arange(N, dtype=np.float32), (H, 1))
    logdt = r.uniform(np.log(1e-3), np.log(1e-1), H).astype(np.float32)
    return [_n(r, Bn, H, L), Are, Aim, _n(r, H, N) * 0.3, _n(r, H, N) * 0.3, logdt, _n(r, H)]


@program(name="s4d diagonal ssm kernel + causal long conv", kind="audio", src=H25_S4D,
         full=dict(B=4, H=64, L=1024, N=32), tiny=dict(B=2, H=3, L=7, N=4), inputs=_h25_s4d_inputs)
def _h25_s4d(torch, a, t, s):
    u, Are, Aim, Cre, Cim, logdt, Dsk = t
    L = s["L"]

    def run():
        dtA = torch.exp(logdt)[:, None] * torch.complex(Are, Aim)
        C = torch.complex(Cre, Cim)
        K = 2 * (C[:, :, None] * torch.exp(dtA[:, :, None] * torch.arange(L))).sum(1).real
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(K, n=2 * L), n=2 * L)[..., :L]
        return y + u * Dsk[:, None]
    return {"torch S4D (fft conv)": _nograd(torch, run)}


H25_ONSET = """
# onset detection: log spectral flux, peak picking with a +-3 frame running max and a decaying running-max envelope
def onsets(float(B,T,F) S) -> (strength) {
  flux(b, t) +=! t > 0 ? max(log1p(S(b, t, f)) - log1p(S(b, t - 1, f)), 0) : 0 where t in 0:T
  lmax(b, t) max=! t + w - 3 >= 0 && t + w - 3 < T ? flux(b, t + w - 3) : -inf where t in 0:T, w in 0:7
  for t in T {
    if t == 0 { env(b, t) = flux(b, t) }
    else      { env(b, t) = max(flux(b, t), 0.9 * env(b, t - 1)) }
  }
  strength(b, t) = flux(b, t) == lmax(b, t) && flux(b, t) > 0.5 * env(b, t) ? flux(b, t) : 0
}
"""


@program(name="onset detector (flux, running max, envelope)", kind="audio", src=H25_ONSET,
         full=dict(B=16, T=1000, F=513), tiny=dict(B=2, T=12, F=5),
         inputs=lambda r, s: [np.abs(_n(r, s["B"], s["T"], s["F"]))])
def _h25_onset(torch, a, t, s):
    F = torch.nn.functional
    S = t[0]

    def run():
        ls = torch.log1p(S)
        flux = F.pad(torch.relu(ls[:, 1:] - ls[:, :-1]).sum(-1), (1, 0))
        lmax = F.max_pool1d(flux[:, None], 7, stride=1, padding=3)[:, 0]
        env, e = [], flux[:, 0]
        for k in range(flux.shape[1]):
            e = flux[:, 0] if k == 0 else torch.maximum(flux[:, k], 0.9 * e)
            env.append(e)
        env = torch.stack(env, 1)
        return torch.where((flux == lmax) & (flux > 0.5 * env), flux, torch.zeros(()))
    return {"torch max_pool1d + loop": _nograd(torch, run)}


H25_FRAMES = """
# framing (25 ms window, 10 ms hop at 16 kHz) of a pre-emphasised signal: log energy and zero-crossing rate per frame
def frame_feats(float(B,S) x, float(N) win) -> (logE, zcr) {
  pe(b, s) = x(b, s) - 0.97 * (s > 0 ? x(b, s - 1) : 0) where s in 0:S
  en(b, f) +=! pe(b, 160 * f + n) * win(n) * pe(b, 160 * f + n) * win(n)
  logE(b, f) = log(en(b, f) + 1e-10)
  zc(b, f) +=! pe(b, 160 * f + n) * pe(b, 160 * f + n - 1) < 0 ? 1.0 : 0.0 where n in 1:N
  zcr(b, f) = zc(b, f) / (N - 1)
}
"""


@program(name="framing: pre-emphasis, log energy, zero-crossing rate", kind="audio", src=H25_FRAMES,
         full=dict(B=64, S=16000, N=400), tiny=dict(B=2, S=700, N=400),
         inputs=lambda r, s: [_n(r, s["B"], s["S"]), np.hamming(s["N"]).astype(np.float32)],
         pick=lambda r: np.concatenate([np.asarray(r[0]).ravel(), np.asarray(r[1]).ravel()]))
def _h25_frames(torch, a, t, s):
    F = torch.nn.functional
    x, win = t

    def run():
        pe = x - 0.97 * F.pad(x[:, :-1], (1, 0))
        fr = pe.unfold(1, s["N"], 160)
        logE = torch.log(((fr * win) ** 2).sum(-1) + 1e-10)
        zcr = ((fr[..., 1:] * fr[..., :-1]) < 0).float().sum(-1) / (s["N"] - 1)
        return torch.cat([logE.reshape(-1), zcr.reshape(-1)])
    return {"torch unfold": _nograd(torch, run)}


H25_CRNN = """
# CRNN front end: conv1d over time (K=3, same) + bias + relu, max-pool by 2, then a GRU (PyTorch gate order r, z, n)
def crnn(float(B,F,2*T) x, float(O,F,3) Wc, float(O) bc, float(3,H,O) Wih, float(3,H,H) Whh,
         float(3,H) bih, float(3,H) bhh) -> (h) {
  cv(b, o, i) +=! (i + k - 1 >= 0 && i + k - 1 < 2 * T ? x(b, f, i + k - 1) : 0) * Wc(o, f, k) where i in 0:2*T, k in 0:3
  cv(b, o, i) = max(cv(b, o, i) + bc(o), 0)
  p(b, o, t) = max(cv(b, o, 2 * t), cv(b, o, 2 * t + 1))
  for t in T {
    gi(g, b, j) +=! p(b, o, t) * Wih(g, j, o)
    if t == 0 { gh(g, b, j) = bhh(g, j) where b in 0:B }
    else      { gh(g, b, j) +=! h(t - 1, b, k) * Whh(g, j, k)
                gh(g, b, j) = gh(g, b, j) + bhh(g, j) }
    r(b, j) = sigmoid(gi(0, b, j) + bih(0, j) + gh(0, b, j))
    z(b, j) = sigmoid(gi(1, b, j) + bih(1, j) + gh(1, b, j))
    n(b, j) = tanh(gi(2, b, j) + bih(2, j) + r(b, j) * gh(2, b, j))
    if t == 0 { h(t, b, j) = (1 - z(b, j)) * n(b, j) }
    else      { h(t, b, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * h(t - 1, b, j) }
  }
}
"""


@program(name="crnn: conv1d + maxpool + gru", kind="speech", src=H25_CRNN,
         full=dict(B=16, F=40, T=200, O=64, H=128), tiny=dict(B=2, F=3, T=4, O=4, H=5),
         inputs=lambda r, s: [_n(r, s["B"], s["F"], 2 * s["T"]), _w(r, s["O"], s["F"], 3), _w(r, s["O"]),
                              _w(r, 3, s["H"], s["O"]), _w(r, 3, s["H"], s["H"]), _w(r, 3, s["H"]), _w(r, 3, s["H"])])
def _h25_crnn(torch, a, t, s):
    F = torch.nn.functional
    x, Wc, bc = t[:3]
    H, O = s["H"], s["O"]
    net = torch.nn.GRU(O, H)
    _copy(torch, net.weight_ih_l0, a[3].reshape(3 * H, O))
    _copy(torch, net.weight_hh_l0, a[4].reshape(3 * H, H))
    _copy(torch, net.bias_ih_l0, a[5].reshape(-1))
    _copy(torch, net.bias_hh_l0, a[6].reshape(-1))

    def run():
        p = F.max_pool1d(F.relu(F.conv1d(x, Wc, bc, padding=1)), 2)
        return net(p.permute(2, 0, 1))[0]
    return {"F.conv1d + max_pool1d + nn.GRU": _nograd(torch, run)}


H25_CONFORMER = """
# Conformer convolution module, channels last (B, T, D): layer norm, pointwise conv to 2D, GLU,
# depthwise conv K=15 (same), batch norm (inference: scale and shift), swish, pointwise conv, residual
def conformer_conv(float(B,T,D) x, float(D) gam, float(D) bet, float(2*D,D) W1, float(2*D) b1,
                   float(D,15) Wd, float(D) bns, float(D) bnb, float(D,D) W2, float(D) b2) -> (y) {
  mu(b, t) +=! x(b, t, d) / D
  var(b, t) +=! (x(b, t, d) - mu(b, t)) * (x(b, t, d) - mu(b, t)) / D
  nx(b, t, d) = (x(b, t, d) - mu(b, t)) * rsqrt(var(b, t) + 1e-5) * gam(d) + bet(d)
  a(b, t, r) +=! nx(b, t, d) * W1(r, d)
  g(b, t, d) = (a(b, t, d) + b1(d)) * sigmoid(a(b, t, D + d) + b1(D + d)) where d in 0:D
  dw(b, t, d) +=! (t + k - 7 >= 0 && t + k - 7 < T ? g(b, t + k - 7, d) : 0) * Wd(d, k) where t in 0:T, k in 0:15
  sw(b, t, d) = dw(b, t, d) * bns(d) + bnb(d)
  sw(b, t, d) = sw(b, t, d) * sigmoid(sw(b, t, d))
  y(b, t, o) +=! sw(b, t, d) * W2(o, d)
  y(b, t, o) = y(b, t, o) + b2(o) + x(b, t, o)
}
"""


@program(name="conformer conv module (channels last)", kind="speech", src=H25_CONFORMER,
         full=dict(B=8, T=256, D=256), tiny=dict(B=2, T=9, D=4),
         inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), 1 + 0.1 * _n(r, s["D"]), 0.1 * _n(r, s["D"]),
                              _w(r, 2 * s["D"], s["D"]), _w(r, 2 * s["D"]), _w(r, s["D"], 15),
                              1 + 0.1 * _n(r, s["D"]), 0.1 * _n(r, s["D"]), _w(r, s["D"], s["D"]), _w(r, s["D"])])
def _h25_conformer(torch, a, t, s):
    F = torch.nn.functional
    x, gam, bet, W1, b1, Wd, bns, bnb, W2, b2 = t
    D = s["D"]

    def run():
        h = F.glu(F.linear(F.layer_norm(x, (D,), gam, bet, 1e-5), W1, b1), dim=-1)
        h = F.conv1d(h.transpose(1, 2), Wd[:, None, :], padding=7, groups=D).transpose(1, 2)
        h = F.silu(h * bns + bnb)
        return F.linear(h, W2, b2) + x
    return {"F.layer_norm/glu/conv1d groups=D/silu": _nograd(torch, run)}


# ---------------------------------------------------------------- session 48: training pieces written by hand


# ---------------------------------------------------------------------------
# hunt 26: training pieces written by hand (backward passes, optimizer steps)
# ---------------------------------------------------------------------------

def _h26_np_flat(r):
    """tcdsl's outputs (a tuple) as one flat float32 vector."""
    if not isinstance(r, (tuple, list)):
        r = (r,)
    return np.concatenate([np.asarray(x, np.float32).ravel() for x in r])


def _h26_flat(torch, *xs):
    return torch.cat([x.reshape(-1).float() for x in xs])


def _h26_grad(torch, fn, wrt, *args):
    """autograd.grad of fn(*wrt, *args) contracted with the given cotangent (fn returns (out, cot))."""
    def run():
        leaves = [w.detach().requires_grad_(True) for w in wrt]
        out, cot = fn(*leaves, *args)
        return torch.autograd.grad(out, leaves, cot)
    return run


# 1. layer norm backward -----------------------------------------------------
H26_LN_BWD = """
# layer norm over the last dim, backward: dx, dgamma, dbeta (batch statistics recomputed from x)
def layer_norm_bwd(float(N,D) x, float(D) gamma, float(N,D) dy, float eps) -> (dx, dgamma, dbeta) {
  mean(n) +=! x(n, d) / D
  xc(n, d) = x(n, d) - mean(n)
  var(n) +=! xc(n, d) * xc(n, d) / D
  rstd(n) = rsqrt(var(n) + eps)
  xhat(n, d) = xc(n, d) * rstd(n)
  g(n, d) = dy(n, d) * gamma(d)
  sg(n) +=! g(n, d)
  sgx(n) +=! g(n, d) * xhat(n, d)
  dx(n, d) = rstd(n) * (g(n, d) - (sg(n) + xhat(n, d) * sgx(n)) / D)
  dgamma(d) +=! dy(n, d) * xhat(n, d)
  dbeta(d) +=! dy(n, d)
}
"""


@program(name="layer norm backward by hand (dx, dgamma, dbeta), eps scalar", kind="training", src=H26_LN_BWD,
         full=dict(N=4096, D=1024), tiny=dict(N=3, D=7),
         inputs=lambda r, s: [_n(r, s["N"], s["D"]), 1 + 0.1 * _n(r, s["D"]), _n(r, s["N"], s["D"]),
                              np.array(1e-5, np.float32)],
         pick=_h26_np_flat)
def _h26_ln_bwd(torch, a, t, s):
    x, gamma, dy, eps = t
    beta = torch.zeros_like(gamma)
    D = s["D"]

    def fwd(x, gamma, beta):
        return torch.nn.functional.layer_norm(x, (D,), gamma, beta, float(eps)), dy
    g = _h26_grad(torch, fwd, [x, gamma, beta])
    return {"torch autograd F.layer_norm": lambda: _h26_flat(torch, *g())}


# 2. label-smoothing cross entropy + dlogits ---------------------------------
H26_LS_CE = """
# label-smoothed cross entropy (mean over rows) and its gradient wrt the logits, int32 labels, smoothing a scalar
def ls_ce(float(N,C) logits, int32(N) label, float eps) -> (loss, dlogits) {
  mx(n) max=! logits(n, c)
  e(n, c) = exp(logits(n, c) - mx(n))
  s(n) +=! e(n, c)
  lse(n) = mx(n) + log(s(n))
  sx(n) +=! logits(n, c)
  loss +=! ((1 - eps) * (lse(n) - logits(n, label(n))) + eps * (lse(n) - sx(n) / C)) / N
  dlogits(n, c) = (e(n, c) / s(n) - (c == label(n) ? 1 - eps : 0) - eps / C) / N
}
"""


@program(name="label-smoothing cross entropy + dlogits fused (int32 labels)", kind="training", src=H26_LS_CE,
         full=dict(N=512, C=8192), tiny=dict(N=4, C=6),
         inputs=lambda r, s: [2 * _n(r, s["N"], s["C"]), r.integers(0, s["C"], s["N"]).astype(np.int32),
                              np.array(0.1, np.float32)],
         pick=_h26_np_flat)
def _h26_ls_ce(torch, a, t, s):
    logits, label, eps = t
    lab = label.long()
    F = torch.nn.functional

    def run():
        x = logits.detach().requires_grad_(True)
        loss = F.cross_entropy(x, lab, label_smoothing=float(eps))
        d, = torch.autograd.grad(loss, x)
        return _h26_flat(torch, loss.detach(), d)
    return {"torch autograd F.cross_entropy(label_smoothing)": run}


# 3. attention backward ------------------------------------------------------
H26_ATTN_BWD = """
# softmax attention backward for (B*heads, L, D): the probabilities recomputed, then dQ, dK, dV
def attn_bwd(float(B,L,D) Q, float(B,L,D) K, float(B,L,D) V, float(B,L,D) dO, float scale) -> (dQ, dK, dV) {
  s(b, i, j) +=! Q(b, i, d) * K(b, j, d)
  mx(b, i) max=! s(b, i, j)
  p(b, i, j) = exp(scale * (s(b, i, j) - mx(b, i)))
  z(b, i) +=! p(b, i, j)
  p(b, i, j) = p(b, i, j) / z(b, i)
  dV(b, j, d) +=! p(b, i, j) * dO(b, i, d)
  dp(b, i, j) +=! dO(b, i, d) * V(b, j, d)
  rd(b, i) +=! p(b, i, j) * dp(b, i, j)
  ds(b, i, j) = scale * p(b, i, j) * (dp(b, i, j) - rd(b, i))
  dQ(b, i, d) +=! ds(b, i, j) * K(b, j, d)
  dK(b, j, d) +=! ds(b, i, j) * Q(b, i, d)
}
"""


@program(name="attention backward (dQ, dK, dV), probabilities recomputed", kind="training", src=H26_ATTN_BWD,
         full=dict(B=16, L=256, D=64), tiny=dict(B=2, L=5, D=3),
         inputs=lambda r, s: [_n(r, s["B"], s["L"], s["D"]) for _ in range(4)]
                             + [np.array(1 / np.sqrt(s["D"]), np.float32)],
         pick=_h26_np_flat)
def _h26_attn_bwd(torch, a, t, s):
    Q, K, V, dO, scale = t
    F = torch.nn.functional
    sc = float(scale)

    def manual(q, k, v):
        p = torch.softmax(q @ k.transpose(1, 2) * sc, dim=-1)
        return p @ v, dO

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=sc), dO
    g1 = _h26_grad(torch, manual, [Q, K, V])
    g2 = _h26_grad(torch, sdpa, [Q, K, V])
    return {"torch autograd softmax(QK^T)V": lambda: _h26_flat(torch, *g1()),
            "torch autograd F.scaled_dot_product_attention": lambda: _h26_flat(torch, *g2())}


# 4. Elman BPTT over the whole sequence --------------------------------------
H26_ELMAN_BPTT = """
# backpropagation through time of an Elman RNN h(t) = tanh(x(t) Wx + h(t-1) Wh), given the forward's hidden states
def elman_bptt(float(T,B,I) x, float(B,H) h0, float(I,H) Wx, float(H,H) Wh, float(T,B,H) hid,
               float(T,B,H) dhid) -> (dWx, dWh, dh0, dx) {
  for s in T {
    if s == 0 {
      da(T - 1 - s, b, j) = dhid(T - 1 - s, b, j) * (1 - hid(T - 1 - s, b, j) * hid(T - 1 - s, b, j))
    } else {
      carry(b, j) +=! da(T - s, b, k) * Wh(j, k)
      da(T - 1 - s, b, j) = (dhid(T - 1 - s, b, j) + carry(b, j)) * (1 - hid(T - 1 - s, b, j) * hid(T - 1 - s, b, j))
    }
  }
  dh0(b, j) +=! da(0, b, k) * Wh(j, k)
  dWx(i, j) +=! x(t, b, i) * da(t, b, j)
  dWh(j, k) +=! h0(b, j) * da(0, b, k)
  dWh(j, k) += hid(t - 1, b, j) * da(t, b, k) where t in 1:T
  dx(t, b, i) +=! da(t, b, j) * Wx(i, j)
}
"""


def _h26_elman_inputs(r, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    x, h0, Wx, Wh = _n(r, T, B, I), _n(r, B, H), _w(r, I, H), _w(r, H, H)
    hid = np.empty((T, B, H), np.float32)
    h = h0
    for k in range(T):
        h = np.tanh(x[k] @ Wx + h @ Wh).astype(np.float32)
        hid[k] = h
    return [x, h0, Wx, Wh, hid, _n(r, T, B, H)]


@program(name="elman rnn bptt over T steps (reversed loop, dWx dWh dh0 dx)", kind="training",
         src=H26_ELMAN_BPTT, full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=4, B=2, I=3, H=5),
         inputs=_h26_elman_inputs, pick=_h26_np_flat)
def _h26_elman_bptt(torch, a, t, s):
    x, h0, Wx, Wh, hid, dhid = t
    T = s["T"]

    def fwd(Wx, Wh, h0, x):
        h, hs = h0, []
        for k in range(T):
            h = torch.tanh(x[k] @ Wx + h @ Wh)
            hs.append(h)
        return torch.stack(hs), dhid
    g = _h26_grad(torch, fwd, [Wx, Wh, h0, x])

    def explicit():
        with torch.no_grad():
            da = torch.empty_like(hid)
            carry = torch.zeros_like(h0)
            for k in range(T - 1, -1, -1):
                da[k] = (dhid[k] + carry) * (1 - hid[k] * hid[k])
                carry = da[k] @ Wh.T
            prev = torch.cat([h0[None], hid[:-1]])
            dWx = x.reshape(-1, x.shape[-1]).T @ da.reshape(-1, da.shape[-1])
            dWh = prev.reshape(-1, prev.shape[-1]).T @ da.reshape(-1, da.shape[-1])
            return _h26_flat(torch, dWx, dWh, carry, da @ Wx.T)
    return {"torch autograd (forward loop + backward)": lambda: _h26_flat(torch, *g()),
            "torch explicit bptt loop": explicit}


# 5. GRU cell, one step backward ---------------------------------------------
H26_GRU_CELL_BWD = """
# one GRU cell step backward (PyTorch's gate order r, z, n, stacked (3H, in) weights, no bias): dx, dh, dWih, dWhh
def gru_cell_bwd(float(B,I) x, float(B,H) h, float(3*H,I) Wih, float(3*H,H) Whh, float(B,H) dhn)
    -> (dx, dh, dWih, dWhh) {
  gi(b, r) +=! x(b, i) * Wih(r, i)
  gh(b, r) +=! h(b, k) * Whh(r, k)
  rg(b, j) = sigmoid(gi(b, j) + gh(b, j)) where j in 0:H
  zg(b, j) = sigmoid(gi(b, H + j) + gh(b, H + j)) where j in 0:H
  ng(b, j) = tanh(gi(b, 2 * H + j) + rg(b, j) * gh(b, 2 * H + j)) where j in 0:H
  dn(b, j) = dhn(b, j) * (1 - zg(b, j)) * (1 - ng(b, j) * ng(b, j))
  dz(b, j) = dhn(b, j) * (h(b, j) - ng(b, j)) * zg(b, j) * (1 - zg(b, j))
  dr(b, j) = dn(b, j) * gh(b, 2 * H + j) * rg(b, j) * (1 - rg(b, j)) where j in 0:H
  dgi(b, j) = dr(b, j)
  dgi(b, H + j) = dz(b, j)
  dgi(b, 2 * H + j) = dn(b, j)
  dgh(b, j) = dr(b, j)
  dgh(b, H + j) = dz(b, j)
  dgh(b, 2 * H + j) = dn(b, j) * rg(b, j)
  dx(b, i) +=! dgi(b, r) * Wih(r, i)
  dh(b, k) +=! dgh(b, r) * Whh(r, k)
  dh(b, k) = dh(b, k) + dhn(b, k) * zg(b, k)
  dWih(r, i) +=! dgi(b, r) * x(b, i)
  dWhh(r, k) +=! dgh(b, r) * h(b, k)
}
"""


@program(name="gru cell one-step backward, stacked (3H,in) weights", kind="training", src=H26_GRU_CELL_BWD,
         full=dict(B=64, I=512, H=512), tiny=dict(B=2, I=3, H=4),
         inputs=lambda r, s: [_n(r, s["B"], s["I"]), _n(r, s["B"], s["H"]), _w(r, 3 * s["H"], s["I"]),
                              _w(r, 3 * s["H"], s["H"]), _n(r, s["B"], s["H"])],
         pick=_h26_np_flat)
def _h26_gru_cell_bwd(torch, a, t, s):
    x, h, Wih, Whh, dhn = t
    H = s["H"]

    def fwd(x, h, Wih, Whh):
        gi, gh = x @ Wih.T, h @ Whh.T
        r = torch.sigmoid(gi[:, :H] + gh[:, :H])
        z = torch.sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
        n = torch.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        return (1 - z) * n + z * h, dhn

    cell = torch.nn.GRUCell(s["I"], H, bias=False)
    _copy(torch, cell.weight_ih, a[2])
    _copy(torch, cell.weight_hh, a[3])

    def module():
        xx, hh = x.detach().requires_grad_(True), h.detach().requires_grad_(True)
        out = cell(xx, hh)
        return _h26_flat(torch, *torch.autograd.grad(out, [xx, hh, cell.weight_ih, cell.weight_hh], dhn))
    g = _h26_grad(torch, fwd, [x, h, Wih, Whh])
    return {"torch autograd nn.GRUCell": module, "torch autograd gate formulas": lambda: _h26_flat(torch, *g())}


# 6. AdamW ------------------------------------------------------------------
H26_ADAMW = """
# AdamW step on a (O, I) weight: decoupled weight decay, bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t given
def adamw(float(O,I) p, float(O,I) g, float(O,I) m, float(O,I) v, float lr, float b1, float b2, float eps,
          float wd, float bc1, float bc2) -> (p1, m1, v1) {
  m1(o, i) = b1 * m(o, i) + (1 - b1) * g(o, i)
  v1(o, i) = b2 * v(o, i) + (1 - b2) * g(o, i) * g(o, i)
  p1(o, i) = p(o, i) * (1 - lr * wd) - (lr / bc1) * m1(o, i) / (sqrt(v1(o, i)) / sqrt(bc2) + eps)
}
"""


def _h26_adam_inputs(r, s):
    O, I = s["O"], s["I"]
    f = lambda v: np.array(v, np.float32)
    return [_w(r, O, I), _n(r, O, I) * 0.01, _n(r, O, I) * 0.001, np.abs(_n(r, O, I)) * 1e-5,
            f(1e-3), f(0.9), f(0.999), f(1e-8), f(0.01), f(1 - 0.9 ** 10), f(1 - 0.999 ** 10)]


@program(name="adamw step on a 2-d weight, bias corrections as scalars", kind="training", src=H26_ADAMW,
         full=dict(O=2048, I=1024), tiny=dict(O=3, I=5), inputs=_h26_adam_inputs, pick=_h26_np_flat)
def _h26_adamw(torch, a, t, s):
    p, g, m, v, lr, b1, b2, eps, wd, bc1, bc2 = t
    lr_, b1_, b2_, eps_, wd_ = (float(x) for x in (lr, b1, b2, eps, wd))

    def ops():
        with torch.no_grad():
            m1 = torch.lerp(m, g, 1 - b1_)
            v1 = v * b2_ + (1 - b2_) * g * g
            denom = v1.sqrt() / torch.sqrt(bc2) + eps_
            p1 = p * (1 - lr_ * wd_) - (lr_ / bc1) * m1 / denom
            return _h26_flat(torch, p1, m1, v1)

    def optim():  # torch.optim.AdamW from the same state (step 9 -> 10)
        q = torch.nn.Parameter(p.clone())
        q.grad = g
        opt = torch.optim.AdamW([q], lr=lr_, betas=(b1_, b2_), eps=eps_, weight_decay=wd_, foreach=False)
        opt.state[q] = {"step": torch.tensor(9.0), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
        opt.step()
        st = opt.state[q]
        return _h26_flat(torch, q.detach(), st["exp_avg"], st["exp_avg_sq"])
    return {"torch ops": ops, "torch.optim.AdamW": optim}


# 7. LAMB -------------------------------------------------------------------
H26_LAMB = """
# LAMB step on one layer: adam direction plus weight decay, trust ratio ||w|| / ||u|| (1 when either norm is 0)
def lamb(float(O,I) w, float(O,I) g, float(O,I) m, float(O,I) v, float lr, float b1, float b2, float eps,
         float wd, float bc1, float bc2) -> (w1, m1, v1, ratio) {
  m1(o, i) = b1 * m(o, i) + (1 - b1) * g(o, i)
  v1(o, i) = b2 * v(o, i) + (1 - b2) * g(o, i) * g(o, i)
  u(o, i) = (m1(o, i) / bc1) / (sqrt(v1(o, i) / bc2) + eps) + wd * w(o, i)
  wn +=! w(o, i) * w(o, i)
  un +=! u(o, i) * u(o, i)
  ratio = wn > 0 && un > 0 ? sqrt(wn) / sqrt(un) : 1.0
  w1(o, i) = w(o, i) - lr * ratio * u(o, i)
}
"""


@program(name="lamb step with trust ratio (0-rank norms), one layer", kind="training", src=H26_LAMB,
         full=dict(O=2048, I=1024), tiny=dict(O=4, I=3), inputs=_h26_adam_inputs, pick=_h26_np_flat)
def _h26_lamb(torch, a, t, s):
    w, g, m, v, lr, b1, b2, eps, wd, bc1, bc2 = t

    def ops():
        with torch.no_grad():
            m1 = b1 * m + (1 - b1) * g
            v1 = b2 * v + (1 - b2) * g * g
            u = (m1 / bc1) / (torch.sqrt(v1 / bc2) + eps) + wd * w
            wn, un = torch.linalg.vector_norm(w), torch.linalg.vector_norm(u)
            ratio = torch.where((wn > 0) & (un > 0), wn / un, torch.ones_like(wn))
            return _h26_flat(torch, w - lr * ratio * u, m1, v1, ratio)
    return {"torch ops": ops}


# 8. gradient clipping by global norm ----------------------------------------
H26_CLIP = """
# clip_grad_norm_ over a weight's and a bias's gradients: one global L2 norm, scale min(max_norm / (norm + 1e-6), 1)
def clip_global(float(O,I) gW, float(O) gb, float max_norm) -> (cW, cb, total) {
  sq +=! gW(o, i) * gW(o, i)
  sq += gb(o) * gb(o)
  total = sqrt(sq)
  coef = min(max_norm / (total + 1e-6), 1.0)
  cW(o, i) = gW(o, i) * coef
  cb(o) = gb(o) * coef
}
"""


@program(name="gradient clipping by global norm over two tensors (weight + bias)", kind="training",
         src=H26_CLIP, full=dict(O=4096, I=1024), tiny=dict(O=3, I=4),
         inputs=lambda r, s: [_n(r, s["O"], s["I"]), _n(r, s["O"]), np.array(1.0, np.float32)],
         pick=_h26_np_flat)
def _h26_clip(torch, a, t, s):
    gW, gb, max_norm = t

    def explicit():
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(gW), torch.linalg.vector_norm(gb)]))
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        cW, cb = torch._foreach_mul([gW, gb], coef)
        return _h26_flat(torch, cW, cb, total)

    def clip_():
        pW, pb = torch.nn.Parameter(torch.empty_like(gW)), torch.nn.Parameter(torch.empty_like(gb))
        pW.grad, pb.grad = gW.clone(), gb.clone()
        total = torch.nn.utils.clip_grad_norm_([pW, pb], float(max_norm))
        return _h26_flat(torch, pW.grad, pb.grad, total)
    return {"torch foreach": explicit, "torch.nn.utils.clip_grad_norm_": clip_}


# 9. sigmoid focal loss + gradient --------------------------------------------
H26_FOCAL = """
# sigmoid focal loss (retinanet: alpha 0.25, gamma 2, mean) and its gradient wrt the logits, float 0/1 targets
def focal(float(N,C) x, float(N,C) tg) -> (loss, dx) {
  p(n, c) = sigmoid(x(n, c))
  ce(n, c) = max(x(n, c), 0) - x(n, c) * tg(n, c) + log1p(exp(-fabs(x(n, c))))
  q(n, c) = 1 - (p(n, c) * tg(n, c) + (1 - p(n, c)) * (1 - tg(n, c)))
  at(n, c) = 0.25 * tg(n, c) + 0.75 * (1 - tg(n, c))
  loss +=! at(n, c) * ce(n, c) * q(n, c) * q(n, c) / (N * C)
  dx(n, c) = at(n, c) * ((p(n, c) - tg(n, c)) * q(n, c) * q(n, c)
                          - 2 * ce(n, c) * q(n, c) * (2 * tg(n, c) - 1) * p(n, c) * (1 - p(n, c))) / (N * C)
}
"""


@program(name="sigmoid focal loss (alpha .25, gamma 2) + dlogits", kind="training", src=H26_FOCAL,
         full=dict(N=8192, C=80), tiny=dict(N=3, C=5),
         inputs=lambda r, s: [2 * _n(r, s["N"], s["C"]), (r.random((s["N"], s["C"])) < 0.1).astype(np.float32)],
         pick=_h26_np_flat)
def _h26_focal(torch, a, t, s):
    x, tg = t
    F = torch.nn.functional

    def run():  # torchvision.ops.sigmoid_focal_loss, written out (torchvision is not installed)
        xx = x.detach().requires_grad_(True)
        p = torch.sigmoid(xx)
        ce = F.binary_cross_entropy_with_logits(xx, tg, reduction="none")
        p_t = p * tg + (1 - p) * (1 - tg)
        loss = ((0.25 * tg + 0.75 * (1 - tg)) * ce * (1 - p_t) ** 2).mean()
        d, = torch.autograd.grad(loss, xx)
        return _h26_flat(torch, loss.detach(), d)
    return {"torch autograd (torchvision formula)": run}


# 10. triplet margin loss gradients ------------------------------------------
H26_TRIPLET = """
# triplet margin loss (p = 2, eps 1e-6 inside the distance as F.pairwise_distance, mean) and its three gradients
def triplet_bwd(float(N,D) A, float(N,D) P, float(N,D) Ng, float margin) -> (loss, dA, dP, dN) {
  dap(n) +=! (A(n, d) - P(n, d) + 1e-6) * (A(n, d) - P(n, d) + 1e-6)
  dan(n) +=! (A(n, d) - Ng(n, d) + 1e-6) * (A(n, d) - Ng(n, d) + 1e-6)
  l(n) = sqrt(dap(n)) - sqrt(dan(n)) + margin
  loss +=! max(l(n), 0) / N
  gp(n, d) = l(n) > 0 ? (A(n, d) - P(n, d) + 1e-6) / (sqrt(dap(n)) * N) : 0
  gn(n, d) = l(n) > 0 ? (A(n, d) - Ng(n, d) + 1e-6) / (sqrt(dan(n)) * N) : 0
  dA(n, d) = gp(n, d) - gn(n, d)
  dP(n, d) = -gp(n, d)
  dN(n, d) = gn(n, d)
}
"""


@program(name="triplet margin loss + grads of anchor, positive, negative", kind="training", src=H26_TRIPLET,
         full=dict(N=4096, D=512), tiny=dict(N=5, D=3),
         inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["N"], s["D"]), _n(r, s["N"], s["D"]),
                              np.array(1.0, np.float32)],
         pick=_h26_np_flat)
def _h26_triplet(torch, a, t, s):
    A, P, Ng, margin = t
    F = torch.nn.functional

    def run():
        a_, p_, n_ = (u.detach().requires_grad_(True) for u in (A, P, Ng))
        loss = F.triplet_margin_loss(a_, p_, n_, margin=float(margin))
        return _h26_flat(torch, loss.detach(), *torch.autograd.grad(loss, [a_, p_, n_]))
    return {"torch autograd F.triplet_margin_loss": run}


# 11. batch norm training forward + backward, channels last --------------------
H26_BN = """
# batch norm, training mode on a channels-last (N, H, W, C) batch: y with batch statistics, then dx, dgamma, dbeta
def bn_train(float(N,H,W,C) x, float(C) gamma, float(C) beta, float(N,H,W,C) dy, float eps)
    -> (y, dx, dgamma, dbeta) {
  mean(c) +=! x(n, h, w, c) / (N * H * W)
  var(c) +=! (x(n, h, w, c) - mean(c)) * (x(n, h, w, c) - mean(c)) / (N * H * W)
  rstd(c) = rsqrt(var(c) + eps)
  y(n, h, w, c) = gamma(c) * (x(n, h, w, c) - mean(c)) * rstd(c) + beta(c)
  dbeta(c) +=! dy(n, h, w, c)
  dgamma(c) +=! dy(n, h, w, c) * (x(n, h, w, c) - mean(c)) * rstd(c)
  dx(n, h, w, c) = gamma(c) * rstd(c) * (dy(n, h, w, c) - dbeta(c) / (N * H * W)
                   - (x(n, h, w, c) - mean(c)) * rstd(c) * dgamma(c) / (N * H * W))
}
"""


@program(name="batch norm training forward + backward, channels-last (N,H,W,C)", kind="training", src=H26_BN,
         full=dict(N=32, H=28, W=28, C=128), tiny=dict(N=2, H=3, W=2, C=4),
         inputs=lambda r, s: [_n(r, s["N"], s["H"], s["W"], s["C"]) * 2 + 1, 1 + 0.1 * _n(r, s["C"]),
                              0.1 * _n(r, s["C"]), _n(r, s["N"], s["H"], s["W"], s["C"]), np.array(1e-5, np.float32)],
         pick=_h26_np_flat)
def _h26_bn(torch, a, t, s):
    x, gamma, beta, dy, eps = t
    F = torch.nn.functional
    xc = x.permute(0, 3, 1, 2)  # NCHW view of channels-last memory
    dyc = dy.permute(0, 3, 1, 2)

    def run():
        xx, g_, b_ = xc.detach().requires_grad_(True), gamma.detach().requires_grad_(True), beta.detach().requires_grad_(True)
        y = F.batch_norm(xx, None, None, g_, b_, training=True, eps=float(eps))
        dx, dg, db = torch.autograd.grad(y, [xx, g_, b_], dyc)
        return _h26_flat(torch, y.detach().permute(0, 2, 3, 1), dx.permute(0, 2, 3, 1), dg, db)
    return {"torch autograd F.batch_norm (channels_last)": run}


# 12. gelu + dropout with a given mask: forward and backward --------------------
H26_DROPOUT = """
# y = dropout(gelu(x)) with a given bool keep-mask and drop probability p; dx from dy (erf gelu)
def gelu_dropout(float(N,D) x, bool(N,D) keep, float(N,D) dy, float p) -> (y, dx) {
  y(n, d) = keep(n, d) ? 0.5 * x(n, d) * (1 + erf(x(n, d) * 0.70710678)) / (1 - p) : 0
  dx(n, d) = keep(n, d) ? dy(n, d) / (1 - p) * (0.5 * (1 + erf(x(n, d) * 0.70710678))
                          + x(n, d) * exp(-0.5 * x(n, d) * x(n, d)) * 0.39894228) : 0
}
"""


@program(name="gelu + dropout with a given bool mask, forward and backward", kind="training", src=H26_DROPOUT,
         full=dict(N=4096, D=1024), tiny=dict(N=3, D=4),
         inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.random((s["N"], s["D"])) >= 0.1, _n(r, s["N"], s["D"]),
                              np.array(0.1, np.float32)],
         pick=_h26_np_flat)
def _h26_dropout(torch, a, t, s):
    x, keep, dy, p = t
    F = torch.nn.functional
    scale = 1 / (1 - float(p))

    def run():
        xx = x.detach().requires_grad_(True)
        y = F.gelu(xx) * keep * scale
        dx, = torch.autograd.grad(y, xx, dy)
        return _h26_flat(torch, y.detach(), dx)
    return {"torch autograd gelu * mask / (1 - p)": run}


# 13. linear layer gradients ----------------------------------------------------
H26_LINEAR = """
# nn.Linear (weight (O, I), bias (O)) on a (B, T, I) batch: dX, dW, db from dY
def linear_bwd(float(B,T,I) X, float(O,I) Wt, float(B,T,O) dY) -> (dX, dW, db) {
  dX(b, t, i) +=! dY(b, t, o) * Wt(o, i)
  dW(o, i) +=! dY(b, t, o) * X(b, t, i)
  db(o) +=! dY(b, t, o)
}
"""


@program(name="linear layer backward (dX, dW, db) on a (B,T,I) batch, (O,I) weight", kind="training",
         src=H26_LINEAR, full=dict(B=8, T=128, I=512, O=1024), tiny=dict(B=2, T=3, I=4, O=5),
         inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _w(r, s["O"], s["I"]), _n(r, s["B"], s["T"], s["O"])],
         pick=_h26_np_flat)
def _h26_linear(torch, a, t, s):
    X, Wt, dY = t
    F = torch.nn.functional
    bias = torch.zeros(s["O"])

    def fwd(X, Wt, b):
        return F.linear(X, Wt, b), dY
    g = _h26_grad(torch, fwd, [X, Wt, bias])

    def explicit():
        d2 = dY.reshape(-1, dY.shape[-1])
        return _h26_flat(torch, dY @ Wt, d2.T @ X.reshape(-1, X.shape[-1]), d2.sum(0))
    return {"torch autograd F.linear": lambda: _h26_flat(torch, *g()), "torch matmuls": explicit}


# 14. embedding gradient ----------------------------------------------------------
H26_EMB_GRAD = """
# embedding gradient: scatter-add of dY rows by int32 token ids into a (V, D) table, V a free size, padding id 0 gets none
def emb_grad(int32(B,L) ids, float(B,L,D) dY) -> (dE) {
  dE(v, d) +=! (ids(b, l) == v && v != 0) ? dY(b, l, d) : 0 where v in 0:V
}
"""


@program(name="embedding gradient, scatter-add by int32 ids, padding_idx 0, free vocab size", kind="training",
         src=H26_EMB_GRAD, full=dict(B=32, L=128, D=512, V=10000), tiny=dict(B=2, L=5, D=3, V=7), free=("V",),
         inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["L"])).astype(np.int32),
                              _n(r, s["B"], s["L"], s["D"])])
def _h26_emb_grad(torch, a, t, s):
    ids, dY = t
    V, D = s["V"], s["D"]
    F = torch.nn.functional
    idx = ids.long()

    def index_add():
        out = torch.zeros(V, D).index_add_(0, idx.reshape(-1), dY.reshape(-1, D))
        out[0] = 0
        return out

    def autograd():
        E = torch.zeros(V, D, requires_grad=True)
        y = F.embedding(idx, E, padding_idx=0)
        return torch.autograd.grad(y, E, dY)[0]
    return {"torch index_add_": index_add, "torch autograd F.embedding(padding_idx=0)": autograd}

# ---------------------------------------------------------------------------
# hunt 27: scientific computing and classic numerical methods
# ---------------------------------------------------------------------------

def _f32(x):
    return np.array(x, np.float32)


@program(name="2-d wave equation, leapfrog, dirichlet walls as selects, state in place, S steps (free)",
         kind="scientific", src="""
def wave2d(float(B,H,W) u0, float(B,H,W) v0, float c2) -> (u) {
  u(b, i, j) = u0(b, i, j)
  up(b, i, j) = u0(b, i, j) - v0(b, i, j)
  for t in S {
    un(b, i, j) = 2 * u(b, i, j) - up(b, i, j)
                + c2 * ((i > 0 ? u(b, i - 1, j) : 0) + (i < H - 1 ? u(b, i + 1, j) : 0)
                      + (j > 0 ? u(b, i, j - 1) : 0) + (j < W - 1 ? u(b, i, j + 1) : 0)
                      - 4 * u(b, i, j))
        where i in 0:H, j in 0:W
    up(b, i, j) = u(b, i, j)
    u(b, i, j) = un(b, i, j)
  }
}
""", full=dict(B=8, H=128, W=128, S=30), tiny=dict(B=2, H=5, W=6, S=3), free=("S",),
         inputs=lambda r, s: [_n(r, s["B"], s["H"], s["W"]), 0.1 * _n(r, s["B"], s["H"], s["W"]), _f32(0.2)])
def _h27_wave2d(torch, a, t, s):
    F = torch.nn.functional
    u0, v0, c2 = t[0], t[1], float(a[2])

    def run():
        u, up = u0.clone(), u0 - v0
        for _ in range(s["S"]):
            p = F.pad(u, (1, 1, 1, 1))
            lap = p[:, :-2, 1:-1] + p[:, 2:, 1:-1] + p[:, 1:-1, :-2] + p[:, 1:-1, 2:] - 4 * u
            u, up = 2 * u - up + c2 * lap, u
        return u
    return {"torch pad + slices loop": _nograd(torch, run)}


@program(name="gray-scott reaction-diffusion, periodic (% H, % W) 5-point laplacian, for t in S",
         kind="scientific", src="""
def gray_scott(float(B,H,W) u0, float(B,H,W) v0, float du, float dv, float feed, float kill) -> (u, v) {
  u(b, i, j) = u0(b, i, j)
  v(b, i, j) = v0(b, i, j)
  for t in S {
    lu(b, i, j) = u(b, (i + 1) % H, j) + u(b, (i + H - 1) % H, j) + u(b, i, (j + 1) % W) + u(b, i, (j + W - 1) % W) - 4 * u(b, i, j)
    lv(b, i, j) = v(b, (i + 1) % H, j) + v(b, (i + H - 1) % H, j) + v(b, i, (j + 1) % W) + v(b, i, (j + W - 1) % W) - 4 * v(b, i, j)
    uvv(b, i, j) = u(b, i, j) * v(b, i, j) * v(b, i, j)
    u(b, i, j) = u(b, i, j) + du * lu(b, i, j) - uvv(b, i, j) + feed * (1 - u(b, i, j))
    v(b, i, j) = v(b, i, j) + dv * lv(b, i, j) + uvv(b, i, j) - (feed + kill) * v(b, i, j)
  }
}
""", full=dict(B=2, H=256, W=256, S=20), tiny=dict(B=2, H=4, W=6, S=3), free=("S",),
         inputs=lambda r, s: [(1 - 0.3 * r.random((s["B"], s["H"], s["W"]))).astype(np.float32),
                              (0.3 * r.random((s["B"], s["H"], s["W"]))).astype(np.float32),
                              _f32(0.16), _f32(0.08), _f32(0.035), _f32(0.065)],
         pick=lambda r: np.stack(r))
def _h27_gray_scott(torch, a, t, s):
    u0, v0 = t[0], t[1]
    du, dv, feed, kill = (float(x) for x in a[2:])

    def lap(z):
        return (torch.roll(z, -1, 1) + torch.roll(z, 1, 1) + torch.roll(z, -1, 2) + torch.roll(z, 1, 2) - 4 * z)

    def run():
        u, v = u0.clone(), v0.clone()
        for _ in range(s["S"]):
            lu, lv = lap(u), lap(v)
            uvv = u * v * v
            u = u + du * lu - uvv + feed * (1 - u)
            v = v + dv * lv + uvv - (feed + kill) * v
        return torch.stack((u, v))
    return {"torch roll loop": _nograd(torch, run)}


@program(name="lorenz-63 rk4 integration of N independent trajectories, where-bound stages, S steps (free)",
         kind="scientific", src="""
def lorenz_rk4(float(N) xs, float(N) ys, float(N) zs, float sigma, float rho, float beta, float dt) -> (x, y, z) {
  x(n) = xs(n)
  y(n) = ys(n)
  z(n) = zs(n)
  for t in S {
    k1x(n) = sigma * (y(n) - x(n))
    k1y(n) = x(n) * (rho - z(n)) - y(n)
    k1z(n) = x(n) * y(n) - beta * z(n)
    k2x(n) = sigma * (py - px) where px = x(n) + 0.5 * dt * k1x(n), py = y(n) + 0.5 * dt * k1y(n)
    k2y(n) = px * (rho - pz) - py where px = x(n) + 0.5 * dt * k1x(n), py = y(n) + 0.5 * dt * k1y(n), pz = z(n) + 0.5 * dt * k1z(n)
    k2z(n) = px * py - beta * pz where px = x(n) + 0.5 * dt * k1x(n), py = y(n) + 0.5 * dt * k1y(n), pz = z(n) + 0.5 * dt * k1z(n)
    k3x(n) = sigma * (py - px) where px = x(n) + 0.5 * dt * k2x(n), py = y(n) + 0.5 * dt * k2y(n)
    k3y(n) = px * (rho - pz) - py where px = x(n) + 0.5 * dt * k2x(n), py = y(n) + 0.5 * dt * k2y(n), pz = z(n) + 0.5 * dt * k2z(n)
    k3z(n) = px * py - beta * pz where px = x(n) + 0.5 * dt * k2x(n), py = y(n) + 0.5 * dt * k2y(n), pz = z(n) + 0.5 * dt * k2z(n)
    k4x(n) = sigma * (py - px) where px = x(n) + dt * k3x(n), py = y(n) + dt * k3y(n)
    k4y(n) = px * (rho - pz) - py where px = x(n) + dt * k3x(n), py = y(n) + dt * k3y(n), pz = z(n) + dt * k3z(n)
    k4z(n) = px * py - beta * pz where px = x(n) + dt * k3x(n), py = y(n) + dt * k3y(n), pz = z(n) + dt * k3z(n)
    x(n) = x(n) + dt / 6 * (k1x(n) + 2 * k2x(n) + 2 * k3x(n) + k4x(n))
    y(n) = y(n) + dt / 6 * (k1y(n) + 2 * k2y(n) + 2 * k3y(n) + k4y(n))
    z(n) = z(n) + dt / 6 * (k1z(n) + 2 * k2z(n) + 2 * k3z(n) + k4z(n))
  }
}
""", full=dict(N=65536, S=12), tiny=dict(N=5, S=3), free=("S",),
         inputs=lambda r, s: [(5 * _n(r, s["N"])).astype(np.float32), (5 * _n(r, s["N"])).astype(np.float32),
                              (25 + 5 * _n(r, s["N"])).astype(np.float32),
                              _f32(10.0), _f32(28.0), _f32(8.0 / 3.0), _f32(0.01)],
         pick=lambda r: np.stack(r))
def _h27_lorenz_rk4(torch, a, t, s):
    sigma, rho, beta, dt = (float(v) for v in a[3:])

    def f(x, y, z):
        return sigma * (y - x), x * (rho - z) - y, x * y - beta * z

    def run():
        x, y, z = t[0].clone(), t[1].clone(), t[2].clone()
        for _ in range(s["S"]):
            k1 = f(x, y, z)
            k2 = f(x + 0.5 * dt * k1[0], y + 0.5 * dt * k1[1], z + 0.5 * dt * k1[2])
            k3 = f(x + 0.5 * dt * k2[0], y + 0.5 * dt * k2[1], z + 0.5 * dt * k2[2])
            k4 = f(x + dt * k3[0], y + dt * k3[1], z + dt * k3[2])
            x = x + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
            y = y + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
            z = z + dt / 6 * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
        return torch.stack((x, y, z))
    return {"torch elementwise loop": _nograd(torch, run)}


@program(name="fput-beta chain, velocity verlet, fixed ends via bond extensions d(b, i) (select), S steps (free)",
         kind="scientific", src="""
def fput_verlet(float(B,N) q0, float(B,N) p0, float beta, float dt) -> (q, p) {
  q(b, i) = q0(b, i)
  p(b, i) = p0(b, i)
  d(b, i) = (i < N ? q(b, i) : 0) - (i > 0 ? q(b, i - 1) : 0) where i in 0:N+1
  f(b, i) = (dr + beta * dr * dr * dr) - (dl + beta * dl * dl * dl) where dr = d(b, i + 1), dl = d(b, i)
  for t in S {
    p(b, i) = p(b, i) + 0.5 * dt * f(b, i)
    q(b, i) = q(b, i) + dt * p(b, i)
    d(b, i) = (i < N ? q(b, i) : 0) - (i > 0 ? q(b, i - 1) : 0) where i in 0:N+1
    f(b, i) = (dr + beta * dr * dr * dr) - (dl + beta * dl * dl * dl) where dr = d(b, i + 1), dl = d(b, i)
    p(b, i) = p(b, i) + 0.5 * dt * f(b, i)
  }
}
""", full=dict(B=64, N=1024, S=50), tiny=dict(B=2, N=5, S=3), free=("S",),
         inputs=lambda r, s: [(0.3 * _n(r, s["B"], s["N"])).astype(np.float32),
                              (0.3 * _n(r, s["B"], s["N"])).astype(np.float32), _f32(0.5), _f32(0.05)],
         pick=lambda r: np.stack(r))
def _h27_fput(torch, a, t, s):
    F = torch.nn.functional
    beta, dt = float(a[2]), float(a[3])

    def force(q):
        d = torch.diff(F.pad(q, (1, 1)), dim=1)
        g = d + beta * d * d * d
        return g[:, 1:] - g[:, :-1]

    def run():
        q, p = t[0].clone(), t[1].clone()
        f = force(q)
        for _ in range(s["S"]):
            p = p + 0.5 * dt * f
            q = q + dt * p
            f = force(q)
            p = p + 0.5 * dt * f
        return torch.stack((q, p))
    return {"torch pad + diff loop": _nograd(torch, run)}


def _ising_inputs(r, s):
    B, H, W, S = s["B"], s["H"], s["W"], s["S"]
    s0 = np.where(r.random((B, H, W)) < 0.5, -1.0, 1.0).astype(np.float32)
    # uniforms on a 1/1024 grid (cell centres): never within rounding of an acceptance probability
    u = ((np.floor(r.random((S, B, H, W)) * 1024) + 0.5) / 1024).astype(np.float32)
    return [s0, u, _f32(0.4)]


@program(name="ising checkerboard metropolis sweeps on a torus (% neighbours, (i + j) % 2 == c colour loop)",
         kind="scientific", src="""
def ising_sweeps(float(B,H,W) s0, float(S,B,H,W) u, float beta) -> (s) {
  s(b, i, j) = s0(b, i, j)
  for t in S {
    for c in 0:2 {
      nb(b, i, j) = s(b, (i + 1) % H, j) + s(b, (i + H - 1) % H, j) + s(b, i, (j + 1) % W) + s(b, i, (j + W - 1) % W)
      s(b, i, j) = (i + j) % 2 == c && u(t, b, i, j) < exp(-2 * beta * s(b, i, j) * nb(b, i, j)) ? -s(b, i, j) : s(b, i, j)
    }
  }
}
""", full=dict(B=4, H=192, W=192, S=8), tiny=dict(B=2, H=4, W=6, S=3), inputs=_ising_inputs)
def _h27_ising(torch, a, t, s):
    s0, u, beta = t[0], t[1], float(a[2])
    H, W = s["H"], s["W"]
    ii = torch.arange(H)[:, None] + torch.arange(W)[None, :]
    colour = [(ii % 2 == c) for c in range(2)]

    def run():
        x = s0.clone()
        for k in range(u.shape[0]):
            for c in range(2):
                nb = torch.roll(x, -1, 1) + torch.roll(x, 1, 1) + torch.roll(x, -1, 2) + torch.roll(x, 1, 2)
                flip = colour[c] & (u[k] < torch.exp(-2 * beta * x * nb))
                x = torch.where(flip, -x, x)
        return x
    return {"torch roll + where loop": _nograd(torch, run)}


@program(name="black-scholes call and put prices (erf cdf), chained where bindings d1, d2",
         kind="scientific", src="""
def black_scholes(float(N) spot, float(N) strike, float(N) tau, float r, float vol) -> (call, put) {
  call(n) = spot(n) * 0.5 * (1 + erf(d1 * 0.7071067811865476)) - strike(n) * exp(-r * tau(n)) * 0.5 * (1 + erf(d2 * 0.7071067811865476))
    where sq = vol * sqrt(tau(n)), d1 = (log(spot(n) / strike(n)) + (r + 0.5 * vol * vol) * tau(n)) / sq, d2 = d1 - sq
  put(n) = strike(n) * exp(-r * tau(n)) * 0.5 * (1 - erf(d2 * 0.7071067811865476)) - spot(n) * 0.5 * (1 - erf(d1 * 0.7071067811865476))
    where sq = vol * sqrt(tau(n)), d1 = (log(spot(n) / strike(n)) + (r + 0.5 * vol * vol) * tau(n)) / sq, d2 = d1 - sq
}
""", full=dict(N=1048576), tiny=dict(N=7),
         inputs=lambda r, s: [(50 + 100 * r.random(s["N"])).astype(np.float32),
                              (50 + 100 * r.random(s["N"])).astype(np.float32),
                              (0.1 + 1.9 * r.random(s["N"])).astype(np.float32), _f32(0.03), _f32(0.25)],
         pick=lambda r: np.stack(r))
def _h27_black_scholes(torch, a, t, s):
    spot, strike, tau = t[0], t[1], t[2]
    r, vol = float(a[3]), float(a[4])

    def run():
        sq = vol * torch.sqrt(tau)
        d1 = (torch.log(spot / strike) + (r + 0.5 * vol * vol) * tau) / sq
        d2 = d1 - sq
        disc = strike * torch.exp(-r * tau)
        call = spot * torch.special.ndtr(d1) - disc * torch.special.ndtr(d2)
        put = disc * torch.special.ndtr(-d2) - spot * torch.special.ndtr(-d1)
        return torch.stack((call, put))
    return {"torch special.ndtr": _nograd(torch, run)}


@program(name="monte-carlo arithmetic asian call from given normals z(T, P): gbm path in place, running sum",
         kind="scientific", src="""
def asian_mc(float(T,P) z, float s0, float strike, float r, float vol, float dt) -> (pay, price) {
  sp(p) = s0 where exists z(0, p)
  for t in T {
    sp(p) = sp(p) * exp((r - 0.5 * vol * vol) * dt + vol * sqrt(dt) * z(t, p))
    acc(p) += sp(p)
  }
  pay(p) = exp(-r * dt * T) * fmax(acc(p) / T - strike, 0)
  price +=! pay(p) / P
}
""", full=dict(T=64, P=65536), tiny=dict(T=3, P=5),
         inputs=lambda r, s: [_n(r, s["T"], s["P"]), _f32(100.0), _f32(100.0), _f32(0.03), _f32(0.2),
                              _f32(1.0 / 64)],
         pick=lambda r: np.concatenate([r[0].ravel(), np.atleast_1d(r[1])]))
def _h27_asian(torch, a, t, s):
    z = t[0]
    s0, strike, r, vol, dt = (float(v) for v in a[1:])
    T = s["T"]

    def run():
        logs = torch.cumsum((r - 0.5 * vol * vol) * dt + vol * (dt ** 0.5) * z, dim=0)
        avg = (s0 * torch.exp(logs)).mean(0)
        pay = np.exp(-r * dt * T) * torch.clamp(avg - strike, min=0)
        return torch.cat((pay, pay.mean().reshape(1)))
    return {"torch cumsum + exp": _nograd(torch, run)}


@program(name="holt linear-trend exponential smoothing of (B, T) series, one-step forecasts, for t in 1:T",
         kind="scientific", src="""
def holt(float(B,T) y, float alpha, float beta) -> (fc) {
  lv(b) = y(b, 0)
  tr(b) = y(b, 1) - y(b, 0)
  for t in 1:T {
    fc(b, t) = lv(b) + tr(b)
    lp(b) = lv(b)
    lv(b) = alpha * y(b, t) + (1 - alpha) * (lv(b) + tr(b))
    tr(b) = beta * (lv(b) - lp(b)) + (1 - beta) * tr(b)
  }
}
""", full=dict(B=4096, T=256), tiny=dict(B=3, T=5),
         inputs=lambda r, s: [np.cumsum(_n(r, s["B"], s["T"]), axis=1).astype(np.float32), _f32(0.3), _f32(0.1)])
def _h27_holt(torch, a, t, s):
    y = t[0]
    alpha, beta = float(a[1]), float(a[2])

    def run():
        B, T = y.shape
        yt = y.t().contiguous()
        fc = torch.zeros(T, B)
        lv, tr = yt[0].clone(), yt[1] - yt[0]
        for k in range(1, T):
            fc[k] = lv + tr
            lp = lv
            lv = alpha * yt[k] + (1 - alpha) * (lv + tr)
            tr = beta * (lv - lp) + (1 - beta) * tr
        return fc.t()
    return {"torch loop over time": _nograd(torch, run)}


@program(name="l2-regularised logistic regression, S full-batch gradient steps (free), w in place",
         kind="scientific", src="""
def logreg_gd(float(N,D) X, float(N) y, float(D) w0, float lr, float lam) -> (w) {
  w(d) = w0(d)
  for it in S {
    z(n) +=! X(n, d) * w(d)
    g(n) = sigmoid(z(n)) - y(n)
    gr(d) +=! X(n, d) * g(n)
    w(d) = w(d) - lr * (gr(d) / N + lam * w(d))
  }
}
""", full=dict(N=8192, D=256, S=20), tiny=dict(N=7, D=3, S=3), free=("S",),
         inputs=lambda r, s: [_n(r, s["N"], s["D"]), (r.random(s["N"]) < 0.5).astype(np.float32),
                              _w(r, s["D"]), _f32(0.5), _f32(1e-3)])
def _h27_logreg(torch, a, t, s):
    X, y, w0 = t[0], t[1], t[2]
    lr, lam = float(a[3]), float(a[4])
    N = X.shape[0]

    def run():
        w = w0.clone()
        for _ in range(s["S"]):
            g = torch.sigmoid(X @ w) - y
            w = w - lr * (X.t() @ g / N + lam * w)
        return w
    return {"torch matvec loop": _nograd(torch, run)}


@program(name="gaussian mixture e-step, diagonal covariances: responsibilities (log-sum-exp) + mean log-likelihood",
         kind="scientific", src="""
def gmm_estep(float(N,D) X, float(K,D) mu, float(K,D) var, float(K) logpi) -> (resp, ll) {
  lc(k) +=! log(var(k, d))
  q(n, k) +=! (X(n, d) - mu(k, d)) * (X(n, d) - mu(k, d)) / var(k, d)
  lp(n, k) = logpi(k) - 0.5 * (q(n, k) + lc(k) + D * 1.8378770664093453)
  m(n) max=! lp(n, k)
  se(n) +=! exp(lp(n, k) - m(n))
  lse(n) = m(n) + log(se(n))
  resp(n, k) = exp(lp(n, k) - lse(n))
  ll +=! lse(n) / N
}
""", full=dict(N=65536, D=32, K=16), tiny=dict(N=5, D=3, K=4),
         inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["K"], s["D"]),
                              (0.5 + 1.5 * r.random((s["K"], s["D"]))).astype(np.float32),
                              np.log(np.full(s["K"], 1.0 / s["K"])).astype(np.float32)],
         pick=lambda r: np.concatenate([r[0].ravel(), np.atleast_1d(r[1])]))
def _h27_gmm(torch, a, t, s):
    X, mu, var, logpi = t
    D = X.shape[1]
    const = D * float(np.log(2 * np.pi))

    def finish(q):
        lp = logpi - 0.5 * (q + torch.log(var).sum(1) + const)
        lse = torch.logsumexp(lp, dim=1)
        resp = torch.exp(lp - lse[:, None])
        return torch.cat((resp.reshape(-1), lse.mean().reshape(1)))

    def expanded():
        iv = 1.0 / var
        q = (X * X) @ iv.t() - 2 * X @ (mu * iv).t() + (mu * mu * iv).sum(1)
        return finish(q)

    def broadcast():
        return finish((((X[:, None, :] - mu) ** 2) / var).sum(-1))
    return {"torch matmul expansion": _nograd(torch, expanded), "torch broadcast": _nograd(torch, broadcast)}


def _thomas_inputs(r, s):
    B, N = s["B"], s["N"]
    a = (r.random((B, N)) * 2 - 1).astype(np.float32)
    c = (r.random((B, N)) * 2 - 1).astype(np.float32)
    bd = (4 + r.random((B, N))).astype(np.float32)
    d = _n(r, B, N)
    return [a, bd, c, d]


@program(name="thomas tridiagonal solve batched over B systems (B, N): forward sweep, then reversed writes x(b, N - 1 - r)",
         kind="scientific", src="""
def thomas(float(B,N) a, float(B,N) bd, float(B,N) c, float(B,N) d) -> (x) {
  for i in N {
    if i == 0 {
      cp(b, i) = c(b, i) / bd(b, i)
      dp(b, i) = d(b, i) / bd(b, i)
    } else {
      den(b) = bd(b, i) - a(b, i) * cp(b, i - 1)
      cp(b, i) = c(b, i) / den(b)
      dp(b, i) = (d(b, i) - a(b, i) * dp(b, i - 1)) / den(b)
    }
  }
  for r in N {
    if r == 0 { x(b, N - 1 - r) = dp(b, N - 1 - r) }
    else      { x(b, N - 1 - r) = dp(b, N - 1 - r) - cp(b, N - 1 - r) * x(b, N - r) }
  }
}
""", full=dict(B=16384, N=96), tiny=dict(B=3, N=5), inputs=_thomas_inputs)
def _h27_thomas(torch, a, t, s):
    def run():
        A, Bd, C, Dd = (v.t().contiguous() for v in t)
        N = A.shape[0]
        cp, dp = torch.empty_like(A), torch.empty_like(A)
        cp[0] = C[0] / Bd[0]
        dp[0] = Dd[0] / Bd[0]
        for i in range(1, N):
            den = Bd[i] - A[i] * cp[i - 1]
            cp[i] = C[i] / den
            dp[i] = (Dd[i] - A[i] * dp[i - 1]) / den
        x = torch.empty_like(A)
        x[N - 1] = dp[N - 1]
        for i in range(N - 2, -1, -1):
            x[i] = dp[i] - cp[i] * x[i + 1]
        return x.t()
    return {"torch loop over rows (transposed)": _nograd(torch, run)}


@program(name="3-d poisson residual f + lap(u) (7-point, zero dirichlet selects) and its squared norm per grid",
         kind="scientific", src="""
def poisson3d_residual(float(B,D,H,W) u, float(B,D,H,W) f, float ih2) -> (res, nrm) {
  res(b, i, j, k) = f(b, i, j, k) + ih2 * ((i > 0 ? u(b, i - 1, j, k) : 0) + (i < D - 1 ? u(b, i + 1, j, k) : 0)
                                        + (j > 0 ? u(b, i, j - 1, k) : 0) + (j < H - 1 ? u(b, i, j + 1, k) : 0)
                                        + (k > 0 ? u(b, i, j, k - 1) : 0) + (k < W - 1 ? u(b, i, j, k + 1) : 0)
                                        - 6 * u(b, i, j, k))
      where i in 0:D, j in 0:H, k in 0:W
  nrm(b) +=! res(b, i, j, k) * res(b, i, j, k)
}
""", full=dict(B=4, D=80, H=80, W=80), tiny=dict(B=2, D=3, H=4, W=5),
         inputs=lambda r, s: [_n(r, s["B"], s["D"], s["H"], s["W"]), _n(r, s["B"], s["D"], s["H"], s["W"]),
                              _f32(0.25)],
         pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel()]))
def _h27_poisson3d(torch, a, t, s):
    F = torch.nn.functional
    u, f, ih2 = t[0], t[1], float(a[2])
    w = torch.zeros(1, 1, 3, 3, 3)
    w[0, 0, 1, 1, 0] = w[0, 0, 1, 1, 2] = w[0, 0, 1, 0, 1] = w[0, 0, 1, 2, 1] = w[0, 0, 0, 1, 1] = w[0, 0, 2, 1, 1] = 1
    w[0, 0, 1, 1, 1] = -6
    w = w * ih2

    def finish(res):
        return torch.cat((res.reshape(-1), (res * res).sum((1, 2, 3))))

    def conv():
        return finish(f + F.conv3d(u[:, None], w, padding=1)[:, 0])

    def slices():
        p = F.pad(u, (1, 1, 1, 1, 1, 1))
        lap = (p[:, :-2, 1:-1, 1:-1] + p[:, 2:, 1:-1, 1:-1] + p[:, 1:-1, :-2, 1:-1] + p[:, 1:-1, 2:, 1:-1]
               + p[:, 1:-1, 1:-1, :-2] + p[:, 1:-1, 1:-1, 2:] - 6 * u)
        return finish(f + ih2 * lap)
    return {"torch conv3d": _nograd(torch, conv), "torch pad + slices": _nograd(torch, slices)}


@program(name="cloud-in-cell charge deposition on a periodic 1-d grid of G cells (free), int32 cells, two select sums",
         kind="scientific", src="""
def cic_deposit(float(N) x, float(N) q) -> (rho) {
  g(n) = x(n) * G
  c0(n) = int32(floor(g(n)))
  c1(n) = (c0(n) + 1) % G
  fr(n) = g(n) - floor(g(n))
  rho(v) +=! (c0(n) == v ? q(n) * (1 - fr(n)) : 0) where v in 0:G
  rho(v) += (c1(n) == v ? q(n) * fr(n) : 0) where v in 0:G
}
""", full=dict(N=1048576, G=4096), tiny=dict(N=9, G=4), free=("G",),
         inputs=lambda r, s: [r.random(s["N"]).astype(np.float32), (0.5 + r.random(s["N"])).astype(np.float32)])
def _h27_cic(torch, a, t, s):
    x, q = t[0], t[1]
    G = s["G"]

    def run():
        g = x * G
        fl = torch.floor(g)
        c0 = fl.long()
        fr = g - fl
        rho = torch.zeros(G)
        rho.index_add_(0, c0, q * (1 - fr))
        rho.index_add_(0, (c0 + 1) % G, q * fr)
        return rho
    return {"torch index_add_": _nograd(torch, run)}


@program(name="clenshaw recurrence for a chebyshev series at N points, reversed coefficients a(D - 1 - r)",
         kind="scientific", src="""
def clenshaw(float(N) x, float(D) a) -> (y) {
  b1(n) = 0 where exists x(n)
  b2(n) = 0 where exists x(n)
  for r in 0:D-1 {
    bn(n) = a(D - 1 - r) + 2 * x(n) * b1(n) - b2(n)
    b2(n) = b1(n)
    b1(n) = bn(n)
  }
  y(n) = a(0) + x(n) * b1(n) - b2(n)
}
""", full=dict(N=1048576, D=16), tiny=dict(N=7, D=4),
         inputs=lambda r, s: [(2 * r.random(s["N"]) - 1).astype(np.float32),
                              (_n(r, s["D"]) / (1 + np.arange(s["D"]))).astype(np.float32)])
def _h27_clenshaw(torch, a, t, s):
    x, c = t[0], t[1]
    D = c.shape[0]

    def loop():
        b1, b2 = torch.zeros_like(x), torch.zeros_like(x)
        for k in range(D - 1, 0, -1):
            b1, b2 = c[k] + 2 * x * b1 - b2, b1
        return c[0] + x * b1 - b2

    def basis():
        k = torch.arange(D, dtype=x.dtype)
        return torch.special.chebyshev_polynomial_t(x[:, None], k) @ c
    return {"torch clenshaw loop": _nograd(torch, loop), "torch special.chebyshev_polynomial_t @ a": _nograd(torch, basis)}


# ---------------------------------------------------------------- helpers (hunt 28)

def _h28_boxes(rng, n, size=640.0, lo=8.0, hi=160.0):
    """xyxy boxes inside a size x size image."""
    xy = rng.uniform(0, size - hi, (n, 2))
    wh = rng.uniform(lo, hi, (n, 2))
    return np.concatenate([xy, xy + wh], 1).astype(np.float32)


def _h28_lengths(rng, b, maxlen):
    return rng.integers(0, maxlen + 1, b).astype(np.int32)


def _h28_bag_inputs(r, s):
    lens = _h28_lengths(r, s["B"], s["L"])
    nnz = int(lens.sum())
    return [r.integers(0, s["V"], nnz).astype(np.int32), r.uniform(0, 1, nnz).astype(np.float32),
            lens, _n(r, s["V"], s["D"])]


def _h28_sorted_gid(r, n, g):
    # every graph gets at least one node, ids sorted
    gid = np.concatenate([np.arange(g), r.integers(0, g, n - g)])
    return np.sort(gid).astype(np.int32)


# ---------------------------------------------------------------- 1. factorization machine

@program(name="factorization machine logit (int32 field ids, 2nd-order sum-square trick)", kind="recsys", src="""
def fm(int32(B,F) ids, float(V,K) E, float(V) w, float bias) -> (y) {
  s(b, k) +=! E(ids(b, f), k)
  q(b) +=! E(ids(b, f), k) * E(ids(b, f), k)
  p(b) +=! s(b, k) * s(b, k)
  lin(b) +=! w(ids(b, f))
  y(b) = bias + lin(b) + 0.5 * (p(b) - q(b))
}
""", full=dict(B=8192, F=39, K=16, V=200000), tiny=dict(B=3, F=4, K=5, V=11),
    inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["F"])).astype(np.int32), _n(r, s["V"], s["K"]) * 0.1,
                         _n(r, s["V"]) * 0.1, np.array(0.3, np.float32)])
def _h28_fm(torch, a, t, s):
    F = torch.nn.functional
    ids, E, w, bias = t

    def run():
        e = F.embedding(ids, E)
        sm = e.sum(1)
        return bias + w[ids].sum(1) + 0.5 * (sm.pow(2) - e.pow(2).sum(1)).sum(1)
    return {"F.embedding + sum-square": _nograd(torch, run)}


# ---------------------------------------------------------------- 2. DCN-v2 cross network

@program(name="dcn-v2 cross network, 3 layers x0*(W x+b)+x, (out,in) weights, + logit", kind="recsys", src="""
def dcn_cross(float(B,D) x0, float(L,D,D) W, float(L,D) bias, float(D) wo) -> (logit) {
  for l in L {
    if l == 0 { z(b, i) +=! W(l, i, j) * x0(b, j) }
    else      { z(b, i) +=! W(l, i, j) * xs(l - 1, b, j) }
    if l == 0 { xs(l, b, i) = x0(b, i) * (z(b, i) + bias(l, i)) + x0(b, i) }
    else      { xs(l, b, i) = x0(b, i) * (z(b, i) + bias(l, i)) + xs(l - 1, b, i) }
  }
  logit(b) +=! xs(L - 1, b, i) * wo(i)
}
""", full=dict(B=4096, D=256, L=3), tiny=dict(B=3, D=5, L=2),
    inputs=lambda r, s: [_n(r, s["B"], s["D"]), _w(r, s["L"], s["D"], s["D"]) * 0.5, _n(r, s["L"], s["D"]) * 0.1,
                         _w(r, s["D"])])
def _h28_dcn(torch, a, t, s):
    F = torch.nn.functional
    x0, W, bias, wo = t

    def run():
        x = x0
        for l in range(W.shape[0]):
            x = x0 * F.linear(x, W[l], bias[l]) + x
        return x @ wo
    return {"F.linear loop": _nograd(torch, run)}


# ---------------------------------------------------------------- 3. two-tower in-batch softmax

@program(name="two-tower in-batch negatives softmax loss (l2-normalized towers, temperature)", kind="recsys", src="""
def two_tower(float(B,D) u, float(B,D) v, float tau) -> (loss) {
  nu(b) +=! u(b, d) * u(b, d)
  nv(b) +=! v(b, d) * v(b, d)
  s(i, j) +=! u(i, d) * v(j, d)
  lg(i, j) = s(i, j) / (fmax(sqrt(nu(i)), 1e-12) * fmax(sqrt(nv(j)), 1e-12) * tau)
  mx(i) max=! lg(i, j)
  se(i) +=! exp(lg(i, j) - mx(i))
  loss +=! (log(se(i)) + mx(i) - lg(i, i)) / B
}
""", full=dict(B=2048, D=128), tiny=dict(B=5, D=3),
    inputs=lambda r, s: [_n(r, s["B"], s["D"]), _n(r, s["B"], s["D"]), np.array(0.05, np.float32)])
def _h28_two_tower(torch, a, t, s):
    F = torch.nn.functional
    u, v, tau = t
    labels = torch.arange(u.shape[0])

    def run():
        lg = F.normalize(u, dim=1) @ F.normalize(v, dim=1).T / tau
        return F.cross_entropy(lg, labels)
    return {"F.normalize + mm + F.cross_entropy": _nograd(torch, run)}


# ---------------------------------------------------------------- 4. NeuMF

@program(name="neumf: gmf + mlp over concatenated user/item embeddings (int32 ids)", kind="recsys", src="""
def neumf(int32(B) uid, int32(B) iid, float(NU,D) Ug, float(NI,D) Ig, float(NU,D) Um, float(NI,D) Im,
          float(H, 2 * D) W1, float(H) b1, float(H2, H) W2, float(H2) b2,
          float(D) wg, float(H2) wm, float bo) -> (p) {
  h1(b, j) +=! Um(uid(b), k) * W1(j, k)
  h1(b, j) += Im(iid(b), k) * W1(j, D + k)
  h1(b, j) = max(h1(b, j) + b1(j), 0)
  h2(b, o) +=! h1(b, j) * W2(o, j)
  h2(b, o) = max(h2(b, o) + b2(o), 0)
  g(b) +=! Ug(uid(b), k) * Ig(iid(b), k) * wg(k)
  m(b) +=! h2(b, o) * wm(o)
  p(b) = sigmoid(g(b) + m(b) + bo)
}
""", full=dict(B=8192, D=64, H=256, H2=128, NU=50000, NI=20000), tiny=dict(B=3, D=4, H=5, H2=3, NU=7, NI=6),
    inputs=lambda r, s: [r.integers(0, s["NU"], s["B"]).astype(np.int32), r.integers(0, s["NI"], s["B"]).astype(np.int32),
                         _n(r, s["NU"], s["D"]) * 0.3, _n(r, s["NI"], s["D"]) * 0.3,
                         _n(r, s["NU"], s["D"]) * 0.3, _n(r, s["NI"], s["D"]) * 0.3,
                         _w(r, s["H"], 2 * s["D"]), _n(r, s["H"]) * 0.1, _w(r, s["H2"], s["H"]), _n(r, s["H2"]) * 0.1,
                         _w(r, s["D"]), _w(r, s["H2"]), np.array(-0.2, np.float32)])
def _h28_neumf(torch, a, t, s):
    F = torch.nn.functional
    uid, iid, Ug, Ig, Um, Im, W1, b1, W2, b2, wg, wm, bo = t

    def run():
        gmf = F.embedding(uid, Ug) * F.embedding(iid, Ig)
        h = torch.cat([F.embedding(uid, Um), F.embedding(iid, Im)], 1)
        h = F.relu(F.linear(h, W1, b1))
        h = F.relu(F.linear(h, W2, b2))
        return torch.sigmoid(gmf @ wg + h @ wm + bo)
    return {"F.embedding + cat + F.linear": _nograd(torch, run)}


# ---------------------------------------------------------------- 5. embedding bag, per-sample weights, int32 lengths

@program(name="embedding bag sum with per-sample weights, bags from int32 lengths (scan offsets)", kind="recsys", src="""
def ebag(int32(NNZ) ids, float(NNZ) psw, int32(B) lens, float(V,D) E) -> (out) {
  cs(i) = lens(i)
  cs(i) = lens(i) + (i > 0 ? cs(i - 1) : 0) where i in 0:B
  out(b, d) +=! j < lens(b) ? psw(cs(b) - lens(b) + j) * E(ids(cs(b) - lens(b) + j), d) : 0 where j in 0:L
}
""", full=dict(B=16384, L=64, V=100000, D=64), tiny=dict(B=4, L=3, V=7, D=5), free=("L",),
    inputs=_h28_bag_inputs)
def _h28_ebag(torch, a, t, s):
    F = torch.nn.functional
    ids, psw, lens, E = t

    def run():
        offs = (torch.cumsum(lens, 0) - lens).to(torch.int32)
        return F.embedding_bag(ids, E, offs, mode="sum", per_sample_weights=psw)
    return {"F.embedding_bag(per_sample_weights)": _nograd(torch, run)}


# ---------------------------------------------------------------- 6. graph readout by segment

@program(name="graph readout: segment mean + max by sorted int32 graph ids, then linear (G free)", kind="graph", src="""
def readout(int32(N) gid, float(N,D) x, float(O, 2 * D) W, float(O) bo) -> (y) {
  cnt(g) +=! gid(n) == g ? 1.0 : 0.0 where g in 0:G
  sm(g, d) +=! gid(n) == g ? x(n, d) : 0 where g in 0:G
  mx(g, d) max=! gid(n) == g ? x(n, d) : -inf where g in 0:G
  y(g, o) +=! sm(g, d) / fmax(cnt(g), 1.0) * W(o, d)
  y(g, o) += mx(g, d) * W(o, D + d)
  y(g, o) = y(g, o) + bo(o)
}
""", full=dict(N=32768, D=128, O=64, G=64), tiny=dict(N=9, D=3, O=2, G=3), free=("G",),
    inputs=lambda r, s: [_h28_sorted_gid(r, s["N"], s["G"]), _n(r, s["N"], s["D"]), _w(r, s["O"], 2 * s["D"]),
                         _n(r, s["O"]) * 0.1])
def _h28_readout(torch, a, t, s):
    F = torch.nn.functional
    gid, x, W, bo = t
    G = s["G"]

    def run():
        g64 = gid.long()
        cnt = torch.bincount(g64, minlength=G).clamp(min=1).to(x.dtype)
        sm = x.new_zeros(G, x.shape[1]).index_add_(0, gid, x)
        mx = x.new_zeros(G, x.shape[1]).scatter_reduce_(0, g64[:, None].expand_as(x), x, "amax", include_self=False)
        return F.linear(torch.cat([sm / cnt[:, None], mx], 1), W, bo)
    return {"index_add_ + scatter_reduce_(amax) + F.linear": _nograd(torch, run)}


# ---------------------------------------------------------------- 7. GraphSAGE max-pool

@program(name="graphsage max-pool aggregator, fixed-degree int32 neighbour list, l2-normalized", kind="graph", src="""
def sage_pool(float(N,D) x, int32(N,K) nbr, float(P,D) Wp, float(P) bp, float(H,D) Ws, float(H,P) Wn,
              float(H) bh) -> (out) {
  pz(n, q) +=! x(n, d) * Wp(q, d)
  pz(n, q) = max(pz(n, q) + bp(q), 0)
  ag(n, q) max=! pz(nbr(n, k), q)
  h(n, o) +=! x(n, d) * Ws(o, d)
  h(n, o) += ag(n, q) * Wn(o, q)
  h(n, o) = max(h(n, o) + bh(o), 0)
  nrm(n) +=! h(n, o) * h(n, o)
  out(n, o) = h(n, o) / fmax(sqrt(nrm(n)), 1e-12)
}
""", full=dict(N=4096, K=16, D=128, P=128, H=128), tiny=dict(N=6, K=3, D=4, P=5, H=3),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.integers(0, s["N"], (s["N"], s["K"])).astype(np.int32),
                         _w(r, s["P"], s["D"]), _n(r, s["P"]) * 0.1, _w(r, s["H"], s["D"]), _w(r, s["H"], s["P"]),
                         _n(r, s["H"]) * 0.1])
def _h28_sage_pool(torch, a, t, s):
    F = torch.nn.functional
    x, nbr, Wp, bp, Ws, Wn, bh = t

    def run():
        pz = F.relu(F.linear(x, Wp, bp))
        ag = pz[nbr].amax(1)
        h = F.relu(F.linear(x, Ws) + F.linear(ag, Wn, bh))
        return F.normalize(h, dim=1)
    return {"F.linear + gather amax + F.normalize": _nograd(torch, run)}


# ---------------------------------------------------------------- 8. message passing with edge features

@program(name="mpnn layer: edge-feature messages relu(W x_src + U e), scatter-add by int32 dst", kind="graph", src="""
def mpnn(float(N,D) x, int32(E) src, int32(E) dst, float(E,DE) ea, float(H,D) Wn, float(H,DE) We,
         float(H) bm, float(H,D) Wself) -> (out) {
  m(e, h) +=! x(src(e), d) * Wn(h, d)
  m(e, h) += ea(e, c) * We(h, c)
  m(e, h) = max(m(e, h) + bm(h), 0)
  agg(n, h) +=! dst(e) == n ? m(e, h) : 0 where n in 0:N
  out(n, h) +=! x(n, d) * Wself(h, d)
  out(n, h) = out(n, h) + agg(n, h)
}
""", full=dict(N=8192, E=32768, D=64, DE=16, H=64), tiny=dict(N=5, E=9, D=3, DE=2, H=4),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.integers(0, s["N"], s["E"]).astype(np.int32),
                         r.integers(0, s["N"], s["E"]).astype(np.int32), _n(r, s["E"], s["DE"]),
                         _w(r, s["H"], s["D"]), _w(r, s["H"], s["DE"]), _n(r, s["H"]) * 0.1, _w(r, s["H"], s["D"])])
def _h28_mpnn(torch, a, t, s):
    F = torch.nn.functional
    x, src, dst, ea, Wn, We, bm, Wself = t

    def run():
        m = F.relu(F.linear(x[src], Wn) + F.linear(ea, We, bm))
        return F.linear(x, Wself).index_add_(0, dst, m)
    return {"gather + F.linear + index_add_": _nograd(torch, run)}


# ---------------------------------------------------------------- 9. pairwise IoU

@program(name="pairwise iou matrix of two xyxy box sets (where-bound intersection)", kind="vision", src="""
def box_iou(float(N,4) a, float(M,4) b) -> (iou) {
  aa(i) = (a(i, 2) - a(i, 0)) * (a(i, 3) - a(i, 1))
  ab(j) = (b(j, 2) - b(j, 0)) * (b(j, 3) - b(j, 1))
  iou(i, j) = inter / (aa(i) + ab(j) - inter)
    where iw = max(min(a(i, 2), b(j, 2)) - max(a(i, 0), b(j, 0)), 0),
          ih = max(min(a(i, 3), b(j, 3)) - max(a(i, 1), b(j, 1)), 0),
          inter = iw * ih
}
""", full=dict(N=1500, M=1500), tiny=dict(N=4, M=5),
    inputs=lambda r, s: [_h28_boxes(r, s["N"]), _h28_boxes(r, s["M"])])
def _h28_box_iou(torch, a, t, s):
    A, B = t

    def run():
        area1 = (A[:, 2] - A[:, 0]) * (A[:, 3] - A[:, 1])
        area2 = (B[:, 2] - B[:, 0]) * (B[:, 3] - B[:, 1])
        lt = torch.max(A[:, None, :2], B[:, :2])
        rb = torch.min(A[:, None, 2:], B[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        return inter / (area1[:, None] + area2 - inter)
    return {"torchvision box_iou formula": _nograd(torch, run)}


# ---------------------------------------------------------------- 10. box decoding + top-1 class

@program(name="retinanet post-process: decode anchors+deltas (clamped dw/dh, clipped) + top-1 class/score", kind="vision", src="""
def decode_top1(float(A,4) anc, float(B,A,4) dl, float(B,A,C) logit, float imw, float imh) -> (box, score, cls) {
  aw(a) = anc(a, 2) - anc(a, 0)
  ah(a) = anc(a, 3) - anc(a, 1)
  box(b, a, c) = fmin(fmax(ctr + (c < 2 ? -0.5 : 0.5) * sz, 0), c % 2 == 0 ? imw : imh)
    where ctr = c % 2 == 0 ? anc(a, 0) + 0.5 * aw(a) + dl(b, a, 0) * aw(a)
                           : anc(a, 1) + 0.5 * ah(a) + dl(b, a, 1) * ah(a),
          sz = c % 2 == 0 ? exp(fmin(dl(b, a, 2), 4.135166556742356)) * aw(a)
                          : exp(fmin(dl(b, a, 3), 4.135166556742356)) * ah(a),
          c in 0:4
  best(b, a) max=! logit(b, a, k)
  score(b, a) = sigmoid(best(b, a))
  cls(b, a) argmax=! logit(b, a, k)
}
""", full=dict(B=4, A=20000, C=80), tiny=dict(B=2, A=5, C=3),
    inputs=lambda r, s: [_h28_boxes(r, s["A"]), (_n(r, s["B"], s["A"], 4) * 0.5), _n(r, s["B"], s["A"], s["C"]) * 2,
                         np.array(640.0, np.float32), np.array(600.0, np.float32)],
    pick=lambda r: np.concatenate([r[0], r[1][..., None], r[2][..., None].astype(np.float32)], -1))
def _h28_decode_top1(torch, a, t, s):
    anc, dl, logit, imw, imh = t
    clip = 4.135166556742356

    def run():
        w = anc[:, 2] - anc[:, 0]
        h = anc[:, 3] - anc[:, 1]
        cx = anc[:, 0] + 0.5 * w
        cy = anc[:, 1] + 0.5 * h
        pcx = dl[..., 0] * w + cx
        pcy = dl[..., 1] * h + cy
        pw = torch.exp(dl[..., 2].clamp(max=clip)) * w
        ph = torch.exp(dl[..., 3].clamp(max=clip)) * h
        x1 = (pcx - 0.5 * pw).clamp(min=0).minimum(imw)
        y1 = (pcy - 0.5 * ph).clamp(min=0).minimum(imh)
        x2 = (pcx + 0.5 * pw).clamp(min=0).minimum(imw)
        y2 = (pcy + 0.5 * ph).clamp(min=0).minimum(imh)
        best, idx = logit.max(-1)
        return torch.stack([x1, y1, x2, y2, torch.sigmoid(best), idx.to(torch.float32)], -1)
    return {"torch decode + max(-1)": _nograd(torch, run)}


# ---------------------------------------------------------------- 11. bilinear resize, align_corners=True, NHWC

@program(name="bilinear resize align_corners=True, channels-last (N,H,W,C) -> (N,OH,OW,C) free", kind="vision", src="""
def resize_ac(float(N,H,W,C) x) -> (y) {
  y(n, i, j, c) = (1 - ly) * ((1 - lx) * x(n, ya, xa, c) + lx * x(n, ya, xb, c))
                + ly * ((1 - lx) * x(n, yb, xa, c) + lx * x(n, yb, xb, c))
    where sy = float(i) * float(H - 1) / float(OH - 1),
          sx = float(j) * float(W - 1) / float(OW - 1),
          ya = int32(sy), xa = int32(sx),
          yb = min(ya + 1, H - 1), xb = min(xa + 1, W - 1),
          ly = sy - float(ya), lx = sx - float(xa),
          i in 0:OH, j in 0:OW
}
""", full=dict(N=16, H=64, W=64, C=64, OH=127, OW=127), tiny=dict(N=2, H=3, W=4, C=2, OH=5, OW=7), free=("OH", "OW"),
    inputs=lambda r, s: [_n(r, s["N"], s["H"], s["W"], s["C"])])
def _h28_resize_ac(torch, a, t, s):
    F = torch.nn.functional
    x, = t
    size = (s["OH"], s["OW"])

    def run():
        return F.interpolate(x.permute(0, 3, 1, 2), size=size, mode="bilinear", align_corners=True).permute(0, 2, 3, 1)
    return {"F.interpolate (channels_last memory)": _nograd(torch, run)}


# ---------------------------------------------------------------- 12. ROI sampling at float coordinates

@program(name="roi-align-like sampling: PxP bin centres per roi, bilinear, border-clamped (P free)", kind="vision", src="""
def roi_sample(float(C,H,W) f, float(R,4) roi) -> (out) {
  out(r, c, py, px) = (1 - wy) * ((1 - wx) * f(c, yl, xl) + wx * f(c, yl, xh))
                    + wy * ((1 - wx) * f(c, yh, xl) + wx * f(c, yh, xh))
    where sy = fmin(fmax(roi(r, 1) + (float(py) + 0.5) * (roi(r, 3) - roi(r, 1)) / float(P), 0.0), float(H - 1)),
          sx = fmin(fmax(roi(r, 0) + (float(px) + 0.5) * (roi(r, 2) - roi(r, 0)) / float(P), 0.0), float(W - 1)),
          yl = int32(floor(sy)), xl = int32(floor(sx)),
          yh = min(yl + 1, H - 1), xh = min(xl + 1, W - 1),
          wy = sy - float(yl), wx = sx - float(xl),
          py in 0:P, px in 0:P
}
""", full=dict(C=256, H=50, W=50, R=512, P=7), tiny=dict(C=2, H=5, W=6, R=3, P=2), free=("P",),
    inputs=lambda r, s: [_n(r, s["C"], s["H"], s["W"]),
                         (_h28_boxes(r, s["R"], size=1.0, lo=0.05, hi=0.6) * np.array([s["W"], s["H"], s["W"], s["H"]])
                          - 0.5).astype(np.float32)])
def _h28_roi_sample(torch, a, t, s):
    F = torch.nn.functional
    f, roi = t
    P = s["P"]
    C, H, W = f.shape
    steps = (torch.arange(P, dtype=torch.float32) + 0.5) / P

    def run():
        sy = roi[:, 1, None] + steps * (roi[:, 3] - roi[:, 1])[:, None]          # (R, P)
        sx = roi[:, 0, None] + steps * (roi[:, 2] - roi[:, 0])[:, None]
        gy = (sy * (2.0 / (H - 1)) - 1)[:, :, None].expand(-1, P, P)
        gx = (sx * (2.0 / (W - 1)) - 1)[:, None, :].expand(-1, P, P)
        grid = torch.stack([gx, gy], -1).reshape(1, -1, P * P, 2)
        o = F.grid_sample(f[None], grid, mode="bilinear", padding_mode="border", align_corners=True)
        return o[0].reshape(C, -1, P, P).permute(1, 0, 2, 3)
    return {"F.grid_sample(border, align_corners=True)": _nograd(torch, run)}


# ---------------------------------------------------------------- 13. FCOS targets

@program(name="fcos targets: min-area gt per point (argmin), ltrb regression + centre-ness", kind="vision", src="""
def fcos_targets(float(P,2) pt, float(G,4) gt) -> (reg, ctr) {
  area(g) = (gt(g, 2) - gt(g, 0)) * (gt(g, 3) - gt(g, 1))
  amin(p) min=! inside ? area(g) : inf
    where inside = pt(p, 0) > gt(g, 0) && pt(p, 1) > gt(g, 1) && pt(p, 0) < gt(g, 2) && pt(p, 1) < gt(g, 3)
  best(p) argmin=! inside ? area(g) : inf
    where inside = pt(p, 0) > gt(g, 0) && pt(p, 1) > gt(g, 1) && pt(p, 0) < gt(g, 2) && pt(p, 1) < gt(g, 3)
  reg(p, c) = amin(p) < inf ? (c < 2 ? pt(p, c) - gt(best(p), c) : gt(best(p), c) - pt(p, c - 2)) : 0
    where c in 0:4
  ctr(p) = amin(p) < inf ? sqrt(fmin(l, r) / fmax(l, r) * (fmin(t, bt) / fmax(t, bt))) : 0
    where l = reg(p, 0), t = reg(p, 1), r = reg(p, 2), bt = reg(p, 3)
}
""", full=dict(P=8000, G=64), tiny=dict(P=12, G=3),
    inputs=lambda r, s: [r.uniform(0, 640, (s["P"], 2)).astype(np.float32), _h28_boxes(r, s["G"], lo=40.0, hi=400.0)],
    pick=lambda r: np.concatenate([r[0], r[1][:, None]], 1))
def _h28_fcos(torch, a, t, s):
    pt, gt = t
    rows = torch.arange(pt.shape[0])

    def run():
        x, y = pt[:, 0, None], pt[:, 1, None]
        ltrb = torch.stack([x - gt[:, 0], y - gt[:, 1], gt[:, 2] - x, gt[:, 3] - y], -1)   # (P, G, 4)
        inside = ltrb.amin(-1) > 0
        area = (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1])
        am = torch.where(inside, area, torch.full_like(area, float("inf")))
        best = am.argmin(1)
        has = inside.any(1)
        reg = torch.where(has[:, None], ltrb[rows, best], torch.zeros(()))
        l, tt, r, b = reg.unbind(1)
        c = torch.sqrt(torch.minimum(l, r) / torch.maximum(l, r) * (torch.minimum(tt, b) / torch.maximum(tt, b)))
        return torch.cat([reg, torch.where(has, c, torch.zeros(()))[:, None]], 1)
    return {"broadcast ltrb + argmin + gather": _nograd(torch, run)}


# ---------------------------------------------------------------- 14. matrix NMS (gaussian soft decay)

@program(name="matrix nms gaussian score decay (solov2), boxes sorted by score, upper-triangular iou", kind="vision", src="""
def matrix_nms(float(N,4) bx, float(N) sc, float sigma) -> (out) {
  area(i) = (bx(i, 2) - bx(i, 0)) * (bx(i, 3) - bx(i, 1))
  iou(i, j) = i < j ? inter / (area(i) + area(j) - inter) : 0
    where inter = max(min(bx(i, 2), bx(j, 2)) - max(bx(i, 0), bx(j, 0)), 0)
                * max(min(bx(i, 3), bx(j, 3)) - max(bx(i, 1), bx(j, 1)), 0)
  cmax(j) max=! iou(i, j)
  dec(j) min=! exp(-sigma * iou(i, j) * iou(i, j)) / exp(-sigma * cmax(i) * cmax(i))
  out(j) = sc(j) * dec(j)
}
""", full=dict(N=1200), tiny=dict(N=7),
    inputs=lambda r, s: [_h28_boxes(r, s["N"], size=320.0, lo=20.0, hi=120.0),
                         np.sort(r.uniform(0, 1, s["N"]))[::-1].astype(np.float32).copy(), np.array(2.0, np.float32)])
def _h28_matrix_nms(torch, a, t, s):
    bx, sc, sigma = t

    def run():
        area = (bx[:, 2] - bx[:, 0]) * (bx[:, 3] - bx[:, 1])
        lt = torch.max(bx[:, None, :2], bx[:, :2])
        rb = torch.min(bx[:, None, 2:], bx[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        ious = (inter / (area[:, None] + area - inter)).triu(diagonal=1)
        cmax = ious.max(0).values
        decay = (torch.exp(-sigma * ious ** 2) / torch.exp(-sigma * cmax[:, None] ** 2)).min(0).values
        return sc * decay
    return {"mmdet matrix_nms (gaussian)": _nograd(torch, run)}


# ---------------------------------------------------------------- hunt 29: literal nn.Module forward() translations

def _lens(r, B, T):
    """int32 sequence lengths in [1, T], the longest one T (as a padded batch has)."""
    l = r.integers(1, T + 1, B).astype(np.int32)
    l[0] = T
    return l


def _keep(r, B, T):
    """float key-padding mask (1 keep, 0 pad) from lengths."""
    l = _lens(r, B, T)
    return (np.arange(T)[None, :] < l[:, None]).astype(np.float32)


def _avail(r, B, N):
    """float mask of the not-yet-visited positions, at least one per row."""
    m = (r.random((B, N)) < 0.7).astype(np.float32)
    m[np.arange(B), r.integers(0, N, B)] = 1.0
    return m


@program(name="packed gru (pack_padded_sequence), state frozen past len, batch-first", kind="module", src="""
def gru_packed(float(B,T,I) x, int32(B) lens, float(B,H) h0, float(3*H,I) W_ih, float(3*H,H) W_hh,
               float(3*H) b_ih, float(3*H) b_hh) -> (out) {
  for t in T {
    gi(b, r) +=! x(b, t, k) * W_ih(r, k)
    if t == 0 { gh(b, r) +=! h0(b, k) * W_hh(r, k) }
    else      { gh(b, r) +=! hs(b, t - 1, k) * W_hh(r, k) }
    rg(b, j) = sigmoid(gi(b, j) + b_ih(j) + gh(b, j) + b_hh(j)) where j in 0:H
    zg(b, j) = sigmoid(gi(b, H + j) + b_ih(H + j) + gh(b, H + j) + b_hh(H + j)) where j in 0:H
    ng(b, j) = tanh(gi(b, 2 * H + j) + b_ih(2 * H + j) + rg(b, j) * (gh(b, 2 * H + j) + b_hh(2 * H + j))) where j in 0:H
    if t == 0 { hp(b, j) = h0(b, j) }
    else      { hp(b, j) = hs(b, t - 1, j) }
    hs(b, t, j) = t < lens(b) ? (1 - zg(b, j)) * ng(b, j) + zg(b, j) * hp(b, j) : hp(b, j)
    out(b, t, j) = t < lens(b) ? hs(b, t, j) : 0
  }
}
""", full=dict(B=32, T=50, I=128, H=128), tiny=dict(B=3, T=4, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _lens(r, s["B"], s["T"]), _n(r, s["B"], s["H"]) * 0.5,
                         _w(r, 3 * s["H"], s["I"]), _w(r, 3 * s["H"], s["H"]), _w(r, 3 * s["H"]) * 0.3,
                         _w(r, 3 * s["H"]) * 0.3])
def _h29_gru_packed(torch, a, t, s):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    gru = torch.nn.GRU(s["I"], s["H"], batch_first=True).eval()
    for p, arr in zip((gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0), a[3:]):
        _copy(torch, p, arr)
    lens = t[1].long()
    h0 = t[2].unsqueeze(0)

    def fwd():
        packed = pack_padded_sequence(t[0], lens, batch_first=True, enforce_sorted=False)
        o, _ = gru(packed, h0)
        return pad_packed_sequence(o, batch_first=True, total_length=s["T"])[0]
    return {"torch nn.GRU packed": _nograd(torch, fwd)}


@program(name="nn.MultiheadAttention self-attn, fused in_proj (3D,D), heads h*DH+d, key padding", kind="module", src="""
def mha(float(B,L,D) x, float(B,L) keep, float(3*D,D) W_in, float(3*D) b_in, float(D,D) W_out, float(D) b_out) -> (y) {
  qkv(b, l, r) +=! x(b, l, k) * W_in(r, k)
  qkv(b, l, r) = qkv(b, l, r) + b_in(r)
  s(b, h, i, j) +=! qkv(b, i, h * DH + d) * qkv(b, j, D + h * DH + d) where h in 0:NH, d in 0:DH
  m(b, h, i) max=! keep(b, j) > 0 ? s(b, h, i, j) : -inf
  e(b, h, i, j) = keep(b, j) > 0 ? exp((s(b, h, i, j) - m(b, h, i)) / sqrt(float(DH))) : 0
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! e(b, h, i, j) * qkv(b, j, 2 * D + h * DH + d) where d in 0:DH
  o(b, h, i, d) = o(b, h, i, d) / z(b, h, i)
  y(b, i, n) +=! o(b, h, i, d) * W_out(n, h * DH + d)
  y(b, i, n) = y(b, i, n) + b_out(n)
}
""", full=dict(B=8, L=128, D=256, NH=8, DH=32), tiny=dict(B=2, L=3, D=4, NH=2, DH=2), free=("NH", "DH"),
    inputs=lambda r, s: [_n(r, s["B"], s["L"], s["D"]), _keep(r, s["B"], s["L"]), _w(r, 3 * s["D"], s["D"]),
                         _w(r, 3 * s["D"]) * 0.1, _w(r, s["D"], s["D"]), _w(r, s["D"]) * 0.1])
def _h29_mha(torch, a, t, s):
    mha = torch.nn.MultiheadAttention(s["D"], s["NH"], batch_first=True).eval()
    for p, arr in zip((mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias), a[2:]):
        _copy(torch, p, arr)
    pad = t[1] == 0
    return {"torch nn.MultiheadAttention": _nograd(torch, lambda: mha(t[0], t[0], t[0], key_padding_mask=pad,
                                                                         need_weights=False)[0])}


@program(name="post-norm transformer ffn: LN(x + W2 gelu(W1 x + b1) + b2), erf gelu", kind="module", src="""
def ffn(float(B,T,D) x, float(F,D) W1, float(F) b1, float(D,F) W2, float(D) b2, float(D) gamma, float(D) beta,
        float eps) -> (y) {
  h(b, t, f) +=! x(b, t, k) * W1(f, k)
  g(b, t, f) = 0.5 * (h(b, t, f) + b1(f)) * (1 + erf((h(b, t, f) + b1(f)) * 0.7071067811865476))
  r(b, t, d) +=! g(b, t, f) * W2(d, f)
  r(b, t, d) = r(b, t, d) + b2(d) + x(b, t, d)
  mu(b, t) +=! r(b, t, d)
  mu(b, t) = mu(b, t) / D
  vr(b, t) +=! (r(b, t, d) - mu(b, t)) * (r(b, t, d) - mu(b, t))
  y(b, t, d) = (r(b, t, d) - mu(b, t)) * rsqrt(vr(b, t) / D + eps) * gamma(d) + beta(d)
}
""", full=dict(B=8, T=128, D=256, F=1024), tiny=dict(B=2, T=3, D=4, F=8),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), _w(r, s["F"], s["D"]), _w(r, s["F"]) * 0.1,
                         _w(r, s["D"], s["F"]), _w(r, s["D"]) * 0.1, 1 + 0.1 * _n(r, s["D"]), 0.1 * _n(r, s["D"]),
                         np.array(1e-5, np.float32)])
def _h29_ffn(torch, a, t, s):
    D, F = s["D"], s["F"]
    l1, l2, ln = torch.nn.Linear(D, F), torch.nn.Linear(F, D), torch.nn.LayerNorm(D, eps=float(a[7]))
    for p, arr in zip((l1.weight, l1.bias, l2.weight, l2.bias, ln.weight, ln.bias), a[1:7]):
        _copy(torch, p, arr)
    F_ = torch.nn.functional
    return {"torch Linear+gelu+LayerNorm": _nograd(torch, lambda: ln(t[0] + l2(F_.gelu(l1(t[0])))))}


@program(name="conv1d(k3,p1) -> batchnorm1d eval -> relu -> maxpool1d(2), NCL", kind="module", src="""
def conv_bn_relu_pool(float(B,C,L) x, float(O,C,3) W, float(O) bias, float(O) gamma, float(O) beta,
                      float(O) rmean, float(O) rvar, float eps) -> (y) {
  cv(b, o, l) +=! (l + k - 1 >= 0 && l + k - 1 < L ? x(b, c, l + k - 1) : 0) * W(o, c, k) where l in 0:L, k in 0:3
  z(b, o, l) = max((cv(b, o, l) + bias(o) - rmean(o)) * rsqrt(rvar(o) + eps) * gamma(o) + beta(o), 0)
  y(b, o, p) max=! z(b, o, 2 * p + q) where q in 0:2
}
""", full=dict(B=16, C=64, O=128, L=512), tiny=dict(B=2, C=3, O=4, L=7),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["O"], s["C"], 3) / np.sqrt(3).astype(np.float32),
                         _w(r, s["O"]) * 0.1, 1 + 0.1 * _n(r, s["O"]), 0.1 * _n(r, s["O"]), 0.1 * _n(r, s["O"]),
                         (0.5 + r.random(s["O"])).astype(np.float32), np.array(1e-5, np.float32)])
def _h29_conv_bn_pool(torch, a, t, s):
    nn = torch.nn
    conv, bn = nn.Conv1d(s["C"], s["O"], 3, padding=1), nn.BatchNorm1d(s["O"], eps=float(a[7]))
    for p, arr in zip((conv.weight, conv.bias, bn.weight, bn.bias, bn.running_mean, bn.running_var), a[1:7]):
        _copy(torch, p, arr)
    block = nn.Sequential(conv, bn, nn.ReLU(), nn.MaxPool1d(2)).eval()
    return {"torch Conv1d+BatchNorm1d+ReLU+MaxPool1d": _nograd(torch, lambda: block(t[0]))}


@program(name="seq2seq decoder step: bahdanau attn over masked encoder, then GRUCell(cat(emb, ctx))", kind="module", src="""
def bahdanau_gru_step(float(B,S,E) enc, float(B,S) keep, float(B,H) h, float(B,M) emb, float(A,H) Wq, float(A,E) Wk,
                      float(A) v, float(3*H,M+E) W_ih, float(3*H,H) W_hh, float(3*H) b_ih, float(3*H) b_hh) -> (hn) {
  q(b, a) +=! h(b, k) * Wq(a, k)
  kp(b, s, a) +=! enc(b, s, e) * Wk(a, e)
  sc(b, s) +=! v(a) * tanh(kp(b, s, a) + q(b, a))
  m(b) max=! keep(b, s) > 0 ? sc(b, s) : -inf
  w(b, s) = keep(b, s) > 0 ? exp(sc(b, s) - m(b)) : 0
  zs(b) +=! w(b, s)
  ctx(b, e) +=! w(b, s) * enc(b, s, e)
  ctx(b, e) = ctx(b, e) / zs(b)
  gi(b, r) +=! emb(b, k) * W_ih(r, k)
  gi(b, r) += ctx(b, e) * W_ih(r, M + e)
  gh(b, r) +=! h(b, k) * W_hh(r, k)
  rg(b, j) = sigmoid(gi(b, j) + b_ih(j) + gh(b, j) + b_hh(j)) where j in 0:H
  zg(b, j) = sigmoid(gi(b, H + j) + b_ih(H + j) + gh(b, H + j) + b_hh(H + j)) where j in 0:H
  ng(b, j) = tanh(gi(b, 2 * H + j) + b_ih(2 * H + j) + rg(b, j) * (gh(b, 2 * H + j) + b_hh(2 * H + j))) where j in 0:H
  hn(b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h(b, j)
}
""", full=dict(B=32, S=64, E=512, H=512, M=256, A=256), tiny=dict(B=2, S=3, E=4, H=5, M=3, A=4),
    inputs=lambda r, s: [_n(r, s["B"], s["S"], s["E"]), _keep(r, s["B"], s["S"]), _n(r, s["B"], s["H"]) * 0.5,
                         _n(r, s["B"], s["M"]), _w(r, s["A"], s["H"]), _w(r, s["A"], s["E"]), _w(r, s["A"]),
                         _w(r, 3 * s["H"], s["M"] + s["E"]), _w(r, 3 * s["H"], s["H"]), _w(r, 3 * s["H"]) * 0.3,
                         _w(r, 3 * s["H"]) * 0.3])
def _h29_bahdanau(torch, a, t, s):
    nn, F = torch.nn, torch.nn.functional
    H, E, M, A = s["H"], s["E"], s["M"], s["A"]
    Wq, Wk, v = nn.Linear(H, A, bias=False), nn.Linear(E, A, bias=False), nn.Linear(A, 1, bias=False)
    cell = nn.GRUCell(M + E, H)
    for p, arr in zip((Wq.weight, Wk.weight, v.weight, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh),
                      (a[4], a[5], a[6][None], a[7], a[8], a[9], a[10])):
        _copy(torch, p, arr)
    enc, keep, h, emb = t[0], t[1], t[2], t[3]

    def fwd():
        score = v(torch.tanh(Wk(enc) + Wq(h).unsqueeze(1))).squeeze(-1)
        score = score.masked_fill(keep == 0, float("-inf"))
        alpha = F.softmax(score, dim=-1)
        ctx = torch.bmm(alpha.unsqueeze(1), enc).squeeze(1)
        return cell(torch.cat([emb, ctx], dim=-1), h)
    return {"torch Linear+softmax+bmm+GRUCell": _nograd(torch, fwd)}


@program(name="linear-chain crf log partition (pytorch-crf _compute_normalizer), int32 lens", kind="module", src="""
def crf_normalizer(float(B,T,K) em, int32(B) lens, float(K,K) trans, float(K) start, float(K) fin) -> (logz) {
  for t in T {
    if t == 0 { al(b, t, j) = start(j) + em(b, t, j) }
    else {
      mx(b, j) max=! al(b, t - 1, i) + trans(i, j)
      se(b, j) +=! exp(al(b, t - 1, i) + trans(i, j) - mx(b, j))
      al(b, t, j) = t < lens(b) ? mx(b, j) + log(se(b, j)) + em(b, t, j) : al(b, t - 1, j)
    }
  }
  mf(b) max=! al(b, T - 1, j) + fin(j)
  sf(b) +=! exp(al(b, T - 1, j) + fin(j) - mf(b))
  logz(b) = mf(b) + log(sf(b))
}
""", full=dict(B=64, T=100, K=32), tiny=dict(B=3, T=4, K=5),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["K"]), _lens(r, s["B"], s["T"]), 0.1 * _n(r, s["K"], s["K"]),
                         0.1 * _n(r, s["K"]), 0.1 * _n(r, s["K"])])
def _h29_crf(torch, a, t, s):
    em, lens, trans, start, end = t
    mask = torch.arange(s["T"])[None, :] < lens.long()[:, None]

    def fwd():
        score = start + em[:, 0]
        for i in range(1, s["T"]):
            nxt = torch.logsumexp(score.unsqueeze(2) + trans + em[:, i].unsqueeze(1), dim=1)
            score = torch.where(mask[:, i].unsqueeze(1), nxt, score)
        return torch.logsumexp(score + end, dim=1)
    return {"torch crf loop (logsumexp, where)": _nograd(torch, fwd)}


@program(name="pointer-net decode step: gather prev input, LSTMCell (4H,in), masked additive pointer softmax", kind="module", src="""
def pointer_step(float(B,N,Din) inp, int32(B) prev, float(B,N) avail, float(B,H) h, float(B,H) c, float(B,N,H) enc,
                 float(4*H,Din) W_ih, float(4*H,H) W_hh, float(4*H) b_ih, float(4*H) b_hh,
                 float(H,H) W1, float(H,H) W2, float(H) v) -> (p) {
  g(b, r) +=! inp(b, prev(b), k) * W_ih(r, k)
  g(b, r) += h(b, k) * W_hh(r, k)
  g(b, r) = g(b, r) + b_ih(r) + b_hh(r)
  cn(b, j) = sigmoid(g(b, H + j)) * c(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H
  hn(b, j) = sigmoid(g(b, 3 * H + j)) * tanh(cn(b, j))
  qd(b, a) +=! hn(b, k) * W2(a, k)
  ke(b, n, a) +=! enc(b, n, k) * W1(a, k)
  u(b, n) +=! v(a) * tanh(ke(b, n, a) + qd(b, a))
  mx(b) max=! avail(b, n) > 0 ? u(b, n) : -inf
  e(b, n) = avail(b, n) > 0 ? exp(u(b, n) - mx(b)) : 0
  zs(b) +=! e(b, n)
  p(b, n) = e(b, n) / zs(b)
}
""", full=dict(B=64, N=100, Din=128, H=256), tiny=dict(B=2, N=5, Din=3, H=4),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["Din"]), r.integers(0, s["N"], s["B"]).astype(np.int32),
                         _avail(r, s["B"], s["N"]),
                         _n(r, s["B"], s["H"]) * 0.5, _n(r, s["B"], s["H"]) * 0.5, _n(r, s["B"], s["N"], s["H"]),
                         _w(r, 4 * s["H"], s["Din"]), _w(r, 4 * s["H"], s["H"]), _w(r, 4 * s["H"]) * 0.3,
                         _w(r, 4 * s["H"]) * 0.3, _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]), _w(r, s["H"])])
def _h29_pointer(torch, a, t, s):
    nn, F = torch.nn, torch.nn.functional
    H, Din = s["H"], s["Din"]
    cell = nn.LSTMCell(Din, H)
    W1, W2, v = nn.Linear(H, H, bias=False), nn.Linear(H, H, bias=False), nn.Linear(H, 1, bias=False)
    for p, arr in zip((cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh, W1.weight, W2.weight, v.weight),
                      (a[6], a[7], a[8], a[9], a[10], a[11], a[12][None])):
        _copy(torch, p, arr)
    inp, prev, avail, h, c, enc = t[:6]

    def fwd():
        x = inp[torch.arange(inp.shape[0]), prev.long()]
        hn, _ = cell(x, (h, c))
        u = v(torch.tanh(W1(enc) + W2(hn).unsqueeze(1))).squeeze(-1)
        u = u.masked_fill(avail == 0, float("-inf"))
        return F.softmax(u, dim=-1)
    return {"torch LSTMCell+Linear+masked softmax": _nograd(torch, fwd)}


@program(name="tcn TemporalBlock: conv1d(pad (k-1)d, dilation 4) + Chomp1d, x2, relu(out + x)", kind="module", src="""
def temporal_block(float(B,C,L) x, float(C,C,3) W1, float(C) b1, float(C,C,3) W2, float(C) b2) -> (y) {
  h1(b, o, l) +=! (l + 4 * k - 8 >= 0 ? x(b, c, l + 4 * k - 8) : 0) * W1(o, c, k) where l in 0:L, k in 0:3
  a1(b, o, l) = max(h1(b, o, l) + b1(o), 0)
  h2(b, o, l) +=! (l + 4 * k - 8 >= 0 ? a1(b, c, l + 4 * k - 8) : 0) * W2(o, c, k) where l in 0:L, k in 0:3
  y(b, o, l) = max(max(h2(b, o, l) + b2(o), 0) + x(b, o, l), 0)
}
""", full=dict(B=16, C=128, L=512), tiny=dict(B=2, C=3, L=11),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["C"], 3) / np.float32(np.sqrt(3)),
                         _w(r, s["C"]) * 0.1, _w(r, s["C"], s["C"], 3) / np.float32(np.sqrt(3)), _w(r, s["C"]) * 0.1])
def _h29_tcn(torch, a, t, s):
    nn = torch.nn
    C = s["C"]
    conv1 = nn.Conv1d(C, C, 3, padding=8, dilation=4)
    conv2 = nn.Conv1d(C, C, 3, padding=8, dilation=4)
    for p, arr in zip((conv1.weight, conv1.bias, conv2.weight, conv2.bias), a[1:]):
        _copy(torch, p, arr)

    class Chomp1d(nn.Module):
        def forward(self, x):
            return x[:, :, :-8].contiguous()
    net = nn.Sequential(conv1, Chomp1d(), nn.ReLU(), conv2, Chomp1d(), nn.ReLU()).eval()
    return {"torch Conv1d+Chomp1d TemporalBlock": _nograd(torch, lambda: torch.relu(net(t[0]) + t[0]))}


@program(name="se-resnet tail: relu(x * sigmoid(fc2(relu(fc1(avgpool(x))))) + identity)", kind="module", src="""
def se_residual(float(B,C,H,W) x, float(B,C,H,W) idn, float(R,C) W1, float(R) b1, float(C,R) W2, float(C) b2) -> (y) {
  sq(b, c) +=! x(b, c, i, j)
  sq(b, c) = sq(b, c) / (H * W)
  e1(b, r) +=! sq(b, c) * W1(r, c)
  e1(b, r) = max(e1(b, r) + b1(r), 0)
  e2(b, c) +=! e1(b, r) * W2(c, r)
  y(b, c, i, j) = max(x(b, c, i, j) * sigmoid(e2(b, c) + b2(c)) + idn(b, c, i, j), 0)
}
""", full=dict(B=32, C=512, H=14, W=14, R=32), tiny=dict(B=2, C=4, H=3, W=2, R=2),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _n(r, s["B"], s["C"], s["H"], s["W"]),
                         _w(r, s["R"], s["C"]), _w(r, s["R"]) * 0.1, _w(r, s["C"], s["R"]), _w(r, s["C"]) * 0.1])
def _h29_se(torch, a, t, s):
    nn, F = torch.nn, torch.nn.functional
    fc1, fc2 = nn.Linear(s["C"], s["R"]), nn.Linear(s["R"], s["C"])
    for p, arr in zip((fc1.weight, fc1.bias, fc2.weight, fc2.bias), a[2:]):
        _copy(torch, p, arr)
    x, idn = t[0], t[1]

    def fwd():
        b, c = x.shape[:2]
        w = F.adaptive_avg_pool2d(x, 1).view(b, c)
        w = torch.sigmoid(fc2(F.relu(fc1(w)))).view(b, c, 1, 1)
        return F.relu(x * w + idn)
    return {"torch SE module": _nograd(torch, fwd)}


@program(name="bilstm batch-first, (4H,in) gates i,f,g,o, backward direction at T-1-t, out (B,T,2H)", kind="module", src="""
def bilstm(float(B,T,I) x, float(4*H,I) Wf_ih, float(4*H,H) Wf_hh, float(4*H) bf_ih, float(4*H) bf_hh,
           float(4*H,I) Wb_ih, float(4*H,H) Wb_hh, float(4*H) bb_ih, float(4*H) bb_hh) -> (out) {
  for t in T {
    gf(b, r) +=! x(b, t, k) * Wf_ih(r, k)
    if t > 0 { gf(b, r) += hf(b, t - 1, k) * Wf_hh(r, k) }
    gf(b, r) = gf(b, r) + bf_ih(r) + bf_hh(r)
    cf(b, t, j) = sigmoid(gf(b, j)) * tanh(gf(b, 2 * H + j)) + (t > 0 ? sigmoid(gf(b, H + j)) * cf(b, t - 1, j) : 0) where j in 0:H
    hf(b, t, j) = sigmoid(gf(b, 3 * H + j)) * tanh(cf(b, t, j))
    gb(b, r) +=! x(b, T - 1 - t, k) * Wb_ih(r, k)
    if t > 0 { gb(b, r) += hb(b, t - 1, k) * Wb_hh(r, k) }
    gb(b, r) = gb(b, r) + bb_ih(r) + bb_hh(r)
    cb(b, t, j) = sigmoid(gb(b, j)) * tanh(gb(b, 2 * H + j)) + (t > 0 ? sigmoid(gb(b, H + j)) * cb(b, t - 1, j) : 0) where j in 0:H
    hb(b, t, j) = sigmoid(gb(b, 3 * H + j)) * tanh(cb(b, t, j))
  }
  out(b, t, j) = hf(b, t, j)
  out(b, t, H + j) = hb(b, T - 1 - t, j)
}
""", full=dict(B=16, T=64, I=128, H=128), tiny=dict(B=2, T=4, I=3, H=4),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"])] + [
        f(r, s) for _ in range(2) for f in (lambda r, s: _w(r, 4 * s["H"], s["I"]), lambda r, s: _w(r, 4 * s["H"], s["H"]),
                                            lambda r, s: _w(r, 4 * s["H"]) * 0.3, lambda r, s: _w(r, 4 * s["H"]) * 0.3)])
def _h29_bilstm(torch, a, t, s):
    lstm = torch.nn.LSTM(s["I"], s["H"], batch_first=True, bidirectional=True).eval()
    ps = (lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0,
          lstm.weight_ih_l0_reverse, lstm.weight_hh_l0_reverse, lstm.bias_ih_l0_reverse, lstm.bias_hh_l0_reverse)
    for p, arr in zip(ps, a[1:]):
        _copy(torch, p, arr)
    return {"torch nn.LSTM bidirectional": _nograd(torch, lambda: lstm(t[0])[0])}


@program(name="attention pooling module: v^T tanh(W x + b), masked_fill(-inf), softmax, weighted sum", kind="module", src="""
def attn_pool(float(B,T,D) x, float(B,T) mask, float(A,D) W, float(A) bw, float(A) v) -> (pooled) {
  hx(b, t, a) +=! x(b, t, d) * W(a, d)
  sc(b, t) +=! v(a) * tanh(hx(b, t, a) + bw(a))
  m(b) max=! mask(b, t) > 0 ? sc(b, t) : -inf
  e(b, t) = mask(b, t) > 0 ? exp(sc(b, t) - m(b)) : 0
  zs(b) +=! e(b, t)
  pooled(b, d) +=! e(b, t) * x(b, t, d)
  pooled(b, d) = pooled(b, d) / zs(b)
}
""", full=dict(B=64, T=200, D=256, A=128), tiny=dict(B=3, T=4, D=5, A=3),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), _keep(r, s["B"], s["T"]), _w(r, s["A"], s["D"]),
                         _w(r, s["A"]) * 0.1, _w(r, s["A"])])
def _h29_attn_pool(torch, a, t, s):
    nn, F = torch.nn, torch.nn.functional
    proj, v = nn.Linear(s["D"], s["A"]), nn.Linear(s["A"], 1, bias=False)
    for p, arr in zip((proj.weight, proj.bias, v.weight), (a[2], a[3], a[4][None])):
        _copy(torch, p, arr)
    x, mask = t[0], t[1]

    def fwd():
        scores = v(torch.tanh(proj(x))).squeeze(-1)
        scores = scores.masked_fill(mask == 0, float("-inf"))
        w = F.softmax(scores, dim=1)
        return (w.unsqueeze(-1) * x).sum(dim=1)
    return {"torch attention pooling": _nograd(torch, fwd)}


@program(name="mdn head nll: log_softmax(pi), mu/sigma Linear(D,K*O) viewed (K,O), exp sigma, Normal.log_prob", kind="module", src="""
def mdn_nll(float(B,D) hid, float(B,O) y, float(K,D) Wpi, float(K) bpi, float(KO,D) Wmu, float(KO) bmu,
            float(KO,D) Wsg, float(KO) bsg) -> (nll) {
  lp(b, k) +=! hid(b, d) * Wpi(k, d)
  lp(b, k) = lp(b, k) + bpi(k)
  mp(b) max=! lp(b, k)
  sp(b) +=! exp(lp(b, k) - mp(b))
  mu(b, r) +=! hid(b, d) * Wmu(r, d)
  mu(b, r) = mu(b, r) + bmu(r)
  sg(b, r) +=! hid(b, d) * Wsg(r, d)
  sg(b, r) = exp(sg(b, r) + bsg(r))
  zz(b, k, o) = (y(b, o) - mu(b, k * O + o)) / sg(b, k * O + o) where k in 0:K
  lq(b, k, o) = -0.5 * zz(b, k, o) * zz(b, k, o) - log(sg(b, k * O + o)) - 0.9189385332046727
  lg(b, k) +=! lq(b, k, o)
  lw(b, k) = lp(b, k) - mp(b) - log(sp(b)) + lg(b, k)
  m2(b) max=! lw(b, k)
  s2(b) +=! exp(lw(b, k) - m2(b))
  nll(b) = -(m2(b) + log(s2(b)))
}
""", full=dict(B=2048, D=256, K=8, O=16, KO=128), tiny=dict(B=3, D=4, K=2, O=3, KO=6),
    inputs=lambda r, s: [_n(r, s["B"], s["D"]), _n(r, s["B"], s["O"]), _w(r, s["K"], s["D"]), _w(r, s["K"]) * 0.1,
                         _w(r, s["KO"], s["D"]), _w(r, s["KO"]) * 0.1, _w(r, s["KO"], s["D"]) * 0.3, _w(r, s["KO"]) * 0.1])
def _h29_mdn(torch, a, t, s):
    nn, F = torch.nn, torch.nn.functional
    D, K, O = s["D"], s["K"], s["O"]
    pi, mu, sigma = nn.Linear(D, K), nn.Linear(D, K * O), nn.Linear(D, K * O)
    for p, arr in zip((pi.weight, pi.bias, mu.weight, mu.bias, sigma.weight, sigma.bias), a[2:]):
        _copy(torch, p, arr)
    hid, y = t[0], t[1]

    def fwd():
        log_pi = F.log_softmax(pi(hid), dim=-1)
        m = mu(hid).view(-1, K, O)
        sg = torch.exp(sigma(hid)).view(-1, K, O)
        lp = torch.distributions.Normal(m, sg, validate_args=False).log_prob(y.unsqueeze(1)).sum(-1)
        return -torch.logsumexp(log_pi + lp, dim=-1)
    return {"torch MDN (Normal.log_prob)": _nograd(torch, fwd)}


@program(name="highway network, ModuleList of Linear pairs (out,in) stacked by layer, layers as a for", kind="module", src="""
def highway_stack(float(B,D) x, float(L,D,D) Wh, float(L,D) bh, float(L,D,D) Wt, float(L,D) bt) -> (y) {
  for l in L {
    if l == 0 {
      hh(b, j) +=! x(b, k) * Wh(l, j, k)
      tg(b, j) +=! x(b, k) * Wt(l, j, k)
      ys(l, b, j) = sigmoid(tg(b, j) + bt(l, j)) * max(hh(b, j) + bh(l, j), 0) + (1 - sigmoid(tg(b, j) + bt(l, j))) * x(b, j)
    } else {
      hh(b, j) +=! ys(l - 1, b, k) * Wh(l, j, k)
      tg(b, j) +=! ys(l - 1, b, k) * Wt(l, j, k)
      ys(l, b, j) = sigmoid(tg(b, j) + bt(l, j)) * max(hh(b, j) + bh(l, j), 0) + (1 - sigmoid(tg(b, j) + bt(l, j))) * ys(l - 1, b, j)
    }
  }
  y(b, j) = ys(L - 1, b, j)
}
""", full=dict(B=128, D=512, L=4), tiny=dict(B=2, D=4, L=3),
    inputs=lambda r, s: [_n(r, s["B"], s["D"]), _w(r, s["L"], s["D"], s["D"]), _w(r, s["L"], s["D"]) * 0.1,
                         _w(r, s["L"], s["D"], s["D"]), (_w(r, s["L"], s["D"]) * 0.1 - 1).astype(np.float32)])
def _h29_highway(torch, a, t, s):
    nn, F = torch.nn, torch.nn.functional
    D, L = s["D"], s["L"]
    H = nn.ModuleList([nn.Linear(D, D) for _ in range(L)])
    G = nn.ModuleList([nn.Linear(D, D) for _ in range(L)])
    for l in range(L):
        _copy(torch, H[l].weight, a[1][l]); _copy(torch, H[l].bias, a[2][l])
        _copy(torch, G[l].weight, a[3][l]); _copy(torch, G[l].bias, a[4][l])

    def fwd():
        x = t[0]
        for l in range(L):
            gate = torch.sigmoid(G[l](x))
            x = gate * F.relu(H[l](x)) + (1 - gate) * x
        return x
    return {"torch highway ModuleList": _nograd(torch, fwd)}


@program(name="vit PatchEmbed: conv(P, stride P).flatten(2).transpose, n -> (n / GW, n % GW), cls + pos", kind="module", src="""
def patch_embed(float(B,C,H,W) img, float(E,C,P,P) Wp, float(E) bp, float(E) cls, float(N1,E) pos) -> (y) {
  pe(b, n, e) +=! img(b, c, (n / (W / P)) * P + py, (n % (W / P)) * P + px) * Wp(e, c, py, px) where n in 0:N1 - 1
  y(b, n, e) = cls(e) + pos(n, e) where b in 0:B, n in 0:1
  y(b, 1 + n, e) = pe(b, n, e) + bp(e) + pos(1 + n, e)
}
""", full=dict(B=8, C=3, H=224, W=224, P=16, E=384, N1=197), tiny=dict(B=2, C=2, H=4, W=6, P=2, E=3, N1=7),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _w(r, s["E"], s["C"], s["P"], s["P"]) / np.float32(s["P"]),
                         _w(r, s["E"]) * 0.1, _n(r, s["E"]) * 0.02, _n(r, s["N1"], s["E"]) * 0.02])
def _h29_patch(torch, a, t, s):
    nn = torch.nn
    C, E, P = s["C"], s["E"], s["P"]
    proj = nn.Conv2d(C, E, P, stride=P)
    _copy(torch, proj.weight, a[1]); _copy(torch, proj.bias, a[2])
    img, cls, pos = t[0], t[3], t[4]

    def fwd():
        x = proj(img).flatten(2).transpose(1, 2)
        x = torch.cat([cls.view(1, 1, -1).expand(x.shape[0], -1, -1), x], dim=1)
        return x + pos
    return {"torch Conv2d PatchEmbed + cls + pos": _nograd(torch, fwd)}


# ---------------------------------------------------------------- hunt 30: llm inference and fine-tuning kernels

def _i8(r, *shape):
    return r.integers(-127, 128, shape).astype(np.int8)


def _packed4(r, N, K):
    """int32 words of 8 packed 4-bit codes (nibble j of word k/8 is code k), the whole int32 range."""
    return r.integers(-2**31, 2**31, (N, K // 8), dtype=np.int64).astype(np.int32)


def _lens30(r, B, L):
    l = r.integers(1, L + 1, B).astype(np.int32)
    l[0] = L
    return l


def _labels30(r, B, T, V, frac=0.2):
    lab = r.integers(0, V, (B, T)).astype(np.int32)
    lab[r.random((B, T)) < frac] = -100
    lab[:, -1] = r.integers(0, V, B)  # at least one valid target per row
    return lab


@program(name="weight-only int8 linear (decode batch), int8(N,K) tensor, per-out-channel scale after the sum", kind="llm", src="""
def w8_linear(float(M,K) x, int8(N,K) Wq, float(N) scale, float(N) bias) -> (y) {
  y(m, n) +=! x(m, k) * float(Wq(n, k))
  y(m, n) = y(m, n) * scale(n) + bias(n)
}
""", full=dict(M=16, K=4096, N=4096), tiny=dict(M=2, K=5, N=3),
    inputs=lambda r, s: [_n(r, s["M"], s["K"]), _i8(r, s["N"], s["K"]),
                         (r.uniform(0.5, 1.5, s["N"]) / (127 * np.sqrt(s["K"])) * 3).astype(np.float32),
                         _w(r, s["N"]) * 0.1])
def _h30_w8_linear(torch, a, t, s):
    F = torch.nn.functional
    x, wq, sc, b = t
    return {"torch._weight_int8pack_mm": _nograd(torch, lambda: torch._weight_int8pack_mm(x, wq, sc) + b),
            "F.linear(x, Wq.float()) * scale": _nograd(torch, lambda: F.linear(x, wq.float()) * sc + b)}


@program(name="gptq-style 4-bit linear: 8 codes per int32 word, group-128 scale/zero, dequant then x W^T", kind="llm", src="""
def w4_group_linear(float(M,K) x, int32(N,KP) Wp, float(N,NG) scale, float(N,NG) zero) -> (y) {
  W(n, k) = (float((Wp(n, k / 8) / int32(exp2(float(4 * (k % 8))))) % 16) - zero(n, k / 128)) * scale(n, k / 128)
  y(m, n) +=! x(m, k) * W(n, k)
}
""", full=dict(M=16, K=2048, N=2048, KP=256, NG=16), tiny=dict(M=2, K=256, N=3, KP=32, NG=2),
    inputs=lambda r, s: [_n(r, s["M"], s["K"]), _packed4(r, s["N"], s["K"]),
                         (r.uniform(0.5, 1.5, (s["N"], s["NG"])) / (8 * np.sqrt(s["K"]))).astype(np.float32),
                         r.uniform(7, 9, (s["N"], s["NG"])).astype(np.float32)])
def _h30_w4_group(torch, a, t, s):
    F = torch.nn.functional
    x, wp, sc, z = t
    N, K, NG = s["N"], s["K"], s["NG"]
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)

    def fwd():
        q = ((wp.unsqueeze(-1) >> shifts) & 15).view(N, NG, K // NG).float()
        w = ((q - z.unsqueeze(-1)) * sc.unsqueeze(-1)).view(N, K)
        return F.linear(x, w)
    return {"torch unpack (>> &) + F.linear": _nograd(torch, fwd)}


@program(name="lora adapter forward: x W^T + b + (x A^T) B^T * alpha / r, r from A's shape", kind="llm", src="""
def lora_linear(float(M,D) x, float(O,D) W, float(O) bias, float(R,D) A, float(O,R) Bm, float alpha) -> (y) {
  xa(m, r) +=! x(m, d) * A(r, d)
  y(m, o) +=! x(m, d) * W(o, d)
  y(m, o) = y(m, o) + bias(o)
  y(m, o) += xa(m, r) * Bm(o, r) * (alpha / R)
}
""", full=dict(M=256, D=1024, O=1024, R=16), tiny=dict(M=2, D=3, O=4, R=2),
    inputs=lambda r, s: [_n(r, s["M"], s["D"]), _w(r, s["O"], s["D"]), _w(r, s["O"]) * 0.1,
                         _w(r, s["R"], s["D"]), _w(r, s["O"], s["R"]) * 0.1, np.array(32.0, np.float32)])
def _h30_lora(torch, a, t, s):
    F = torch.nn.functional
    x, W, b, A, Bm = t[:5]
    scaling = float(a[5]) / s["R"]
    return {"F.linear + lora branch": _nograd(torch, lambda: F.linear(x, W, b) + F.linear(F.linear(x, A), Bm) * scaling)}


@program(name="top-2 moe (mixtral routing): gate softmax, two argmax passes, renormalised, dense swiglu experts", kind="llm", src="""
def moe_top2(float(N,D) x, float(E,D) Wg, float(E,F,D) W1, float(E,F,D) W3, float(E,D,F) W2) -> (y) {
  gl(n, e) +=! x(n, d) * Wg(e, d)
  mx(n) max=! gl(n, e)
  p(n, e) = exp(gl(n, e) - mx(n))
  ps(n) +=! p(n, e)
  p(n, e) = p(n, e) / ps(n)
  i1(n) argmax=! p(n, e)
  i2(n) argmax=! e == i1(n) ? -inf : p(n, e)
  w1(n) = p(n, i1(n)) / (p(n, i1(n)) + p(n, i2(n)))
  w2(n) = p(n, i2(n)) / (p(n, i1(n)) + p(n, i2(n)))
  g(n, e, f) +=! x(n, d) * W1(e, f, d)
  u(n, e, f) +=! x(n, d) * W3(e, f, d)
  h(n, e, f) = g(n, e, f) * sigmoid(g(n, e, f)) * u(n, e, f)
  o(n, e, j) +=! h(n, e, f) * W2(e, j, f)
  y(n, j) = w1(n) * o(n, i1(n), j) + w2(n) * o(n, i2(n), j)
}
""", full=dict(N=128, E=8, D=256, F=512), tiny=dict(N=3, E=4, D=3, F=4),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _w(r, s["E"], s["D"]), _w(r, s["E"], s["F"], s["D"]),
                         _w(r, s["E"], s["F"], s["D"]), _w(r, s["E"], s["D"], s["F"])])
def _h30_moe_top2(torch, a, t, s):
    F = torch.nn.functional
    x, Wg, W1, W3, W2 = t

    def fwd():
        p = torch.softmax(F.linear(x, Wg), -1)
        w, idx = p.topk(2, -1)
        w = w / w.sum(-1, keepdim=True)
        h = F.silu(torch.einsum("nd,efd->nef", x, W1)) * torch.einsum("nd,efd->nef", x, W3)
        o = torch.einsum("nef,ejf->nej", h, W2)
        sel = o.gather(1, idx.unsqueeze(-1).expand(-1, -1, o.shape[-1]))
        return (sel * w.unsqueeze(-1)).sum(1)
    return {"torch dense einsum experts + topk gather": _nograd(torch, fwd)}


@program(name="sampling probs with temperature and top-k mask, k-th largest by K masked-max passes (K free)", kind="llm", src="""
def topk_temp_probs(float(B,V) logits, float temp) -> (probs) {
  for t in K {
    if t == 0 { m(t, b) max=! logits(b, v) }
    else      { m(t, b) max=! logits(b, v) < m(t - 1, b) ? logits(b, v) : -inf }
  }
  e(b, v) = logits(b, v) >= m(K - 1, b) ? exp((logits(b, v) - m(0, b)) / temp) : 0
  s(b) +=! e(b, v)
  probs(b, v) = e(b, v) / s(b)
}
""", full=dict(B=32, V=32000, K=50), tiny=dict(B=2, V=7, K=3), free=("K",),
    inputs=lambda r, s: [_n(r, s["B"], s["V"]) * 3, np.array(0.7, np.float32)])
def _h30_topk_temp(torch, a, t, s):
    logits, K, temp = t[0], s["K"], float(a[1])

    def fwd():
        thr = logits.topk(K, -1).values[:, -1:]
        return torch.softmax(logits.masked_fill(logits < thr, float("-inf")) / temp, -1)
    return {"torch topk threshold + masked_fill + softmax": _nograd(torch, fwd)}


@program(name="repetition (ctrl-style) + frequency + presence penalties from int32 generated ids, scatter-count", kind="llm", src="""
def penalties(float(B,V) logits, int32(B,L) ids, float rp, float fp, float pp) -> (out) {
  cnt(b, v) +=! ids(b, l) == v ? 1.0 : 0.0 where v in 0:V
  out(b, v) = cnt(b, v) > 0 ? (logits(b, v) < 0 ? logits(b, v) * rp : logits(b, v) / rp) - cnt(b, v) * fp - pp : logits(b, v)
}
""", full=dict(B=64, V=32000, L=512), tiny=dict(B=2, V=7, L=4),
    inputs=lambda r, s: [_n(r, s["B"], s["V"]) * 3, r.integers(0, s["V"], (s["B"], s["L"])).astype(np.int32),
                         np.array(1.3, np.float32), np.array(0.2, np.float32), np.array(0.5, np.float32)])
def _h30_penalties(torch, a, t, s):
    logits, ids = t[0], t[1]
    rp, fp, pp = (float(v) for v in a[2:])

    def fwd():
        cnt = torch.zeros_like(logits).scatter_add_(1, ids.long(), torch.ones(ids.shape))
        seen = cnt > 0
        pen = torch.where(logits < 0, logits * rp, logits / rp)
        return torch.where(seen, pen - cnt * fp - pp, logits)
    return {"torch scatter_add_ counts + where": _nograd(torch, fwd)}


@program(name="beam-search step: log_softmax + beam scores, best (beam, token) over beam x vocab in two argmax stages", kind="llm", src="""
def beam_step(float(B,K,V) logits, float(B,K) scores) -> (score, beam, tok) {
  mx(b, k) max=! logits(b, k, v)
  se(b, k) +=! exp(logits(b, k, v) - mx(b, k))
  lse(b, k) = mx(b, k) + log(se(b, k))
  bv(b, k) max=! logits(b, k, v)
  bt(b, k) argmax=! logits(b, k, v)
  cand(b, k) = bv(b, k) - lse(b, k) + scores(b, k)
  beam(b) argmax=! cand(b, k)
  score(b) max=! cand(b, k)
  tok(b) = bt(b, beam(b))
}
""", full=dict(B=32, K=4, V=32000), tiny=dict(B=2, K=3, V=5),
    pick=lambda r: np.stack([r[1], r[2]]),
    inputs=lambda r, s: [_n(r, s["B"], s["K"], s["V"]) * 3, -r.random((s["B"], s["K"])).astype(np.float32) * 2])
def _h30_beam_step(torch, a, t, s):
    F = torch.nn.functional
    logits, scores = t
    V = s["V"]

    def fwd():
        lp = F.log_softmax(logits, -1) + scores.unsqueeze(-1)
        flat = lp.view(lp.shape[0], -1).argmax(-1)
        return torch.stack([flat // V, flat % V]).int()
    return {"torch log_softmax + flat argmax": _nograd(torch, fwd)}


@program(name="speculative decoding verify: min(1, p/q) per draft token, accepted prefix length, residual max(0, p-q)", kind="llm", src="""
def spec_verify(float(B,G,V) pl, float(B,G,V) ql, int32(B,G) tok, float(B,G) u) -> (ratio, nacc, resid) {
  pm(b, g) max=! pl(b, g, v)
  ps(b, g) +=! exp(pl(b, g, v) - pm(b, g))
  qm(b, g) max=! ql(b, g, v)
  qs(b, g) +=! exp(ql(b, g, v) - qm(b, g))
  ratio(b, g) = min(1.0, (exp(pl(b, g, tok(b, g)) - pm(b, g)) / ps(b, g)) / (exp(ql(b, g, tok(b, g)) - qm(b, g)) / qs(b, g)))
  nacc(b) min=! u(b, g) >= ratio(b, g) ? g : G
  r(b, g, v) = fmax(0.0, exp(pl(b, g, v) - pm(b, g)) / ps(b, g) - exp(ql(b, g, v) - qm(b, g)) / qs(b, g))
  rs(b, g) +=! r(b, g, v)
  resid(b, g, v) = r(b, g, v) / rs(b, g)
}
""", full=dict(B=16, G=5, V=32000), tiny=dict(B=2, G=3, V=5),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1].astype(np.float32), r[2].ravel()]),
    inputs=lambda r, s: (lambda pl: [pl, (pl + _n(r, s["B"], s["G"], s["V"])).astype(np.float32),
                                     r.integers(0, s["V"], (s["B"], s["G"])).astype(np.int32),
                                     r.random((s["B"], s["G"])).astype(np.float32)])(_n(r, s["B"], s["G"], s["V"]) * 2))
def _h30_spec_verify(torch, a, t, s):
    pl, ql, tok, u = t
    G = s["G"]

    def fwd():
        p, q = torch.softmax(pl, -1), torch.softmax(ql, -1)
        ti = tok.long().unsqueeze(-1)
        ratio = (p.gather(-1, ti) / q.gather(-1, ti)).squeeze(-1).clamp(max=1.0)
        rej = u >= ratio
        nacc = torch.where(rej.any(1), rej.int().argmax(1), G)
        r = (p - q).clamp(min=0)
        resid = r / r.sum(-1, keepdim=True)
        return torch.cat([ratio.reshape(-1), nacc.float(), resid.reshape(-1)])
    return {"torch softmax x2 + gather + clamp": _nograd(torch, fwd)}


@program(name="paged attention decode (vllm): kv blocks (NB,BS,H,D) through int32 block table, int32 context lens", kind="llm", src="""
def paged_decode(float(B,H,D) q, float(NB,BS,H,D) kc, float(NB,BS,H,D) vc, int32(B,MB) bt, int32(B) lens) -> (o) {
  s(b, h, m, j) +=! q(b, h, d) * kc(bt(b, m), j, h, d)
  mx(b, h) max=! m * BS + j < lens(b) ? s(b, h, m, j) : -inf
  e(b, h, m, j) = m * BS + j < lens(b) ? exp((s(b, h, m, j) - mx(b, h)) / sqrt(float(D))) : 0
  z(b, h) +=! e(b, h, m, j)
  o(b, h, d) +=! e(b, h, m, j) * vc(bt(b, m), j, h, d) / z(b, h)
}
""", full=dict(B=8, H=16, D=128, NB=256, BS=16, MB=32), tiny=dict(B=2, H=2, D=3, NB=6, BS=2, MB=3),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["D"]), _n(r, s["NB"], s["BS"], s["H"], s["D"]),
                         _n(r, s["NB"], s["BS"], s["H"], s["D"]),
                         r.permutation(s["NB"])[:s["B"] * s["MB"]].reshape(s["B"], s["MB"]).astype(np.int32),
                         _lens30(r, s["B"], s["MB"] * s["BS"])])
def _h30_paged_decode(torch, a, t, s):
    F = torch.nn.functional
    q, kc, vc, bt, lens = t
    B, H, D, BS, MB = s["B"], s["H"], s["D"], s["BS"], s["MB"]

    def fwd():
        idx = bt.long()
        k = kc[idx].view(B, MB * BS, H, D).transpose(1, 2)
        v = vc[idx].view(B, MB * BS, H, D).transpose(1, 2)
        mask = (torch.arange(MB * BS) < lens.unsqueeze(1)).view(B, 1, 1, MB * BS)
        return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, attn_mask=mask).squeeze(2)
    return {"torch kc[block_table] gather + sdpa": _nograd(torch, fwd)}


@program(name="gqa decode step over a (B,KV,L,D) cache, q viewed (B,KV,G,D), per-sequence int32 cache lengths", kind="llm", src="""
def gqa_decode(float(B,KV,G,D) q, float(B,KV,L,D) kc, float(B,KV,L,D) vc, int32(B) lens) -> (o) {
  s(b, c, g, t) +=! q(b, c, g, d) * kc(b, c, t, d)
  mx(b, c, g) max=! t < lens(b) ? s(b, c, g, t) : -inf
  e(b, c, g, t) = t < lens(b) ? exp((s(b, c, g, t) - mx(b, c, g)) / sqrt(float(D))) : 0
  z(b, c, g) +=! e(b, c, g, t)
  o(b, c, g, d) +=! e(b, c, g, t) * vc(b, c, t, d) / z(b, c, g)
}
""", full=dict(B=16, KV=8, G=4, D=128, L=512), tiny=dict(B=2, KV=2, G=2, D=3, L=4),
    inputs=lambda r, s: [_n(r, s["B"], s["KV"], s["G"], s["D"]), _n(r, s["B"], s["KV"], s["L"], s["D"]),
                         _n(r, s["B"], s["KV"], s["L"], s["D"]), _lens30(r, s["B"], s["L"])])
def _h30_gqa_decode(torch, a, t, s):
    F = torch.nn.functional
    q, kc, vc, lens = t
    B, KV, G, D, L = s["B"], s["KV"], s["G"], s["D"], s["L"]

    def sdpa():
        m = (torch.arange(L) < lens.unsqueeze(1)).view(B, 1, 1, L)
        o = F.scaled_dot_product_attention(q.reshape(B, KV * G, 1, D), kc, vc, attn_mask=m, enable_gqa=True)
        return o.view(B, KV, G, D)

    def manual():
        sc = torch.einsum("bcgd,bctd->bcgt", q, kc) / D ** 0.5
        sc = sc.masked_fill((torch.arange(L) >= lens.unsqueeze(1)).view(B, 1, 1, L), float("-inf"))
        return torch.einsum("bcgt,bctd->bcgd", torch.softmax(sc, -1), vc)
    return {"torch sdpa enable_gqa": _nograd(torch, sdpa), "torch einsum grouped": _nograd(torch, manual)}


@program(name="alibi prefill attention, causal + right padding from int32 lens, per-head slope input", kind="llm", src="""
def alibi_prefill(float(B,H,L,D) q, float(B,H,L,D) k, float(B,H,L,D) v, float(H) slope, int32(B) lens) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  a(b, h, i, j) = s(b, h, i, j) / sqrt(float(D)) + slope(h) * float(j - i)
  mx(b, h, i) max=! j <= i && j < lens(b) ? a(b, h, i, j) : -inf
  e(b, h, i, j) = j <= i && j < lens(b) ? exp(a(b, h, i, j) - mx(b, h, i)) : 0
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! e(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
}
""", full=dict(B=4, H=8, L=256, D=64), tiny=dict(B=2, H=2, L=4, D=3),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["L"], s["D"]), _n(r, s["B"], s["H"], s["L"], s["D"]),
                         _n(r, s["B"], s["H"], s["L"], s["D"]),
                         (2.0 ** (-8.0 * (np.arange(s["H"]) + 1) / s["H"])).astype(np.float32),
                         _lens30(r, s["B"], s["L"])])
def _h30_alibi_prefill(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, slope, lens = t
    B, H, L = s["B"], s["H"], s["L"]

    def fwd():
        pos = torch.arange(L)
        bias = slope.view(H, 1, 1) * (pos.view(1, 1, L) - pos.view(1, L, 1)).float()
        ok = (pos.view(1, 1, L) <= pos.view(1, L, 1)) & (pos.view(1, 1, L) < lens.view(B, 1, 1))
        mask = bias.unsqueeze(0) + torch.zeros(B, 1, L, L).masked_fill(~ok.unsqueeze(1), float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return {"torch sdpa + float alibi/causal/pad mask": _nograd(torch, fwd)}


@program(name="swiglu mlp with merged gate_up_proj (2F, D) weight (vllm SiluAndMul), down (D, F), + residual", kind="llm", src="""
def swiglu_merged(float(N,D) x, float(2 * F, D) Wgu, float(D,F) Wd) -> (y) {
  gu(n, r) +=! x(n, d) * Wgu(r, d)
  h(n, f) = gu(n, f) * sigmoid(gu(n, f)) * gu(n, F + f) where f in 0:F
  y(n, j) +=! h(n, f) * Wd(j, f)
  y(n, j) = y(n, j) + x(n, j)
}
""", full=dict(N=128, D=768, F=2048), tiny=dict(N=2, D=3, F=4),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _w(r, 2 * s["F"], s["D"]), _w(r, s["D"], s["F"])])
def _h30_swiglu_merged(torch, a, t, s):
    F = torch.nn.functional
    x, Wgu, Wd = t

    def fwd():
        g, u = F.linear(x, Wgu).chunk(2, -1)
        return F.linear(F.silu(g) * u, Wd) + x
    return {"torch F.linear + chunk + silu": _nograd(torch, fwd)}


@program(name="gemma rmsnorm (x * (1 + w)) fused with the residual add, eps as a float scalar, new residual out", kind="llm", src="""
def gemma_add_rmsnorm(float(N,D) x, float(N,D) res, float(D) w, float eps) -> (y, r) {
  r(n, d) = x(n, d) + res(n, d)
  ss(n) +=! r(n, d) * r(n, d)
  y(n, d) = r(n, d) * rsqrt(ss(n) / D + eps) * (1 + w(d))
}
""", full=dict(N=2048, D=2048), tiny=dict(N=2, D=3),
    pick=lambda r: r[0],
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["N"], s["D"]), _w(r, s["D"]), np.array(1e-6, np.float32)])
def _h30_gemma_add_rmsnorm(torch, a, t, s):
    x, res, w = t[:3]
    eps = float(a[3])

    def fwd():
        r = x + res
        return r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * (1 + w)
    return {"torch add + rsqrt(mean(r^2)) * (1 + w)": _nograd(torch, fwd)}


@program(name="causal lm loss: shifted labels, ignore_index -100, mean over kept tokens + z-loss (log Z)^2", kind="llm", src="""
def lm_loss(float(B,T,V) logits, int32(B,T) labels, float zc) -> (loss) {
  mx(b, t) max=! logits(b, t, v) where t in 0:T-1
  se(b, t) +=! exp(logits(b, t, v) - mx(b, t))
  lse(b, t) = mx(b, t) + log(se(b, t))
  cnt +=! labels(b, t) != -100 ? 1.0 : 0.0 where t in 1:T
  loss +=! labels(b, t + 1) != -100 ? lse(b, t) - logits(b, t, labels(b, t + 1)) + zc * lse(b, t) * lse(b, t) : 0 where b in 0:B, t in 0:T-1
  loss = loss / cnt
}
""", full=dict(B=2, T=128, V=32000), tiny=dict(B=2, T=4, V=5),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["V"]) * 2, _labels30(r, s["B"], s["T"], s["V"]), np.array(1e-4, np.float32)])
def _h30_lm_loss(torch, a, t, s):
    F = torch.nn.functional
    logits, labels = t[0], t[1]
    zc, V = float(a[2]), s["V"]

    def fwd():
        lg = logits[:, :-1].reshape(-1, V)
        lb = labels[:, 1:].reshape(-1).long()
        keep = lb != -100
        lse = torch.logsumexp(lg, -1)
        return F.cross_entropy(lg, lb, ignore_index=-100) + zc * (lse[keep] ** 2).sum() / keep.sum()
    return {"torch F.cross_entropy(ignore_index) + z-loss": _nograd(torch, fwd)}
# ---------------------------------------------------------------- hunt 31: state-space and sequence models


def _dt_bias31(r, n):
    """mamba's dt_bias init: softplus^-1 of dt drawn log-uniform in [1e-3, 1e-1]."""
    dt = np.exp(r.uniform(np.log(1e-3), np.log(1e-1), n))
    return np.log(np.expm1(dt)).astype(np.float32)


def _a_log31(r, n):
    """mamba2's A_log init: log of A drawn uniform in [1, 16]."""
    return np.log(r.uniform(1, 16, n)).astype(np.float32)


@program(name="mamba2 ssd recurrent scan: scalar decay per head, (B,L,H,P) x, shared B/C (B,L,N), D skip", kind="ssm", src="""
def mamba2_scan(float(B,L,H,P) x, float(B,L,H) dt, float(H) dt_bias, float(H) A_log, float(B,L,N) Bm,
                float(B,L,N) Cm, float(H) Dsk) -> (y) {
  delta(b, l, h) = log(1 + exp(dt(b, l, h) + dt_bias(h)))
  dA(b, l, h) = exp(-exp(A_log(h)) * delta(b, l, h))
  for t in L {
    if t == 0 { S(b, h, p, n) = delta(b, t, h) * x(b, t, h, p) * Bm(b, t, n) }
    else      { S(b, h, p, n) = dA(b, t, h) * S(b, h, p, n) + delta(b, t, h) * x(b, t, h, p) * Bm(b, t, n) }
    y(b, t, h, p) +=! S(b, h, p, n) * Cm(b, t, n)
    y(b, t, h, p) = y(b, t, h, p) + Dsk(h) * x(b, t, h, p)
  }
}
""", full=dict(B=4, L=256, H=8, P=64, N=16), tiny=dict(B=2, L=5, H=3, P=2, N=4),
    inputs=lambda r, s: [_n(r, s["B"], s["L"], s["H"], s["P"]), _n(r, s["B"], s["L"], s["H"]) * 0.5,
                         _dt_bias31(r, s["H"]), _a_log31(r, s["H"]), _n(r, s["B"], s["L"], s["N"]),
                         _n(r, s["B"], s["L"], s["N"]), np.ones(s["H"], np.float32)])
def _h31_mamba2_scan(torch, a, t, s):
    F = torch.nn.functional
    x, dt, dt_bias, A_log, Bm, Cm, Dsk = t

    def run():
        delta = F.softplus(dt + dt_bias)
        dA = torch.exp(-torch.exp(A_log) * delta)
        S = x.new_zeros(s["B"], s["H"], s["P"], s["N"])
        ys = []
        for i in range(s["L"]):
            S = dA[:, i, :, None, None] * S + (delta[:, i, :, None, None] * x[:, i, :, :, None]
                                               * Bm[:, i, None, None, :])
            ys.append(torch.einsum("bhpn,bn->bhp", S, Cm[:, i]) + Dsk[:, None] * x[:, i])
        return torch.stack(ys, 1)
    return {"torch loop over L": _nograd(torch, run)}


@program(name="retnet retention, recurrent form: per-head gamma 1 - 2^(-5-h), state S_h, then per-head group norm", kind="ssm", src="""
def retention(float(B,H,L,D) q, float(B,H,L,D) k, float(B,H,L,E) v) -> (y) {
  gam(h) = 1 - exp2(-5.0 - float(h)) where h in 0:H
  for t in L {
    if t == 0 { S(b, h, d, e) = k(b, h, t, d) * rsqrt(float(D)) * v(b, h, t, e) }
    else      { S(b, h, d, e) = gam(h) * S(b, h, d, e) + k(b, h, t, d) * rsqrt(float(D)) * v(b, h, t, e) }
    o(b, h, t, e) +=! q(b, h, t, d) * S(b, h, d, e)
  }
  mu(b, h, l) +=! o(b, h, l, e) / E
  vr(b, h, l) +=! (o(b, h, l, e) - mu(b, h, l)) * (o(b, h, l, e) - mu(b, h, l)) / E
  y(b, h, l, e) = (o(b, h, l, e) - mu(b, h, l)) * rsqrt(vr(b, h, l) + 1e-5)
}
""", full=dict(B=4, H=8, L=256, D=64, E=64), tiny=dict(B=2, H=3, L=5, D=3, E=4),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["L"], s["D"]), _n(r, s["B"], s["H"], s["L"], s["D"]),
                         _n(r, s["B"], s["H"], s["L"], s["E"])])
def _h31_retention(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t
    H, L, D, E = s["H"], s["L"], s["D"], s["E"]
    gam = 1 - 2.0 ** (-5.0 - torch.arange(H, dtype=torch.float32))
    n = torch.arange(L)
    diff = (n[:, None] - n[None, :])
    decay = torch.where(diff >= 0, gam[:, None, None] ** diff.clamp(min=0).float(), torch.zeros(()))

    def parallel():
        ret = (q @ k.transpose(-1, -2) * D ** -0.5 * decay) @ v
        return F.layer_norm(ret, (E,), eps=1e-5)

    def recurrent():
        S = q.new_zeros(s["B"], H, D, E)
        outs = []
        for i in range(L):
            S = gam[:, None, None] * S + (k[:, :, i, :, None] * D ** -0.5) * v[:, :, i, None, :]
            outs.append(torch.einsum("bhd,bhde->bhe", q[:, :, i], S))
        return F.layer_norm(torch.stack(outs, 2), (E,), eps=1e-5)
    return {"torch parallel form (decay mask)": _nograd(torch, parallel), "torch recurrent loop": _nograd(torch, recurrent)}


@program(name="rwkv-6 (finch) wkv: data-dependent decay exp(-exp(w_t)), bonus u, (K,K) state per head", kind="ssm", src="""
def rwkv6_wkv(float(B,T,H,K) r, float(B,T,H,K) k, float(B,T,H,K) v, float(B,T,H,K) w, float(H,K) u) -> (y) {
  for t in T {
    y(b, t, h, j) +=! r(b, t, h, i) * (u(h, i) * k(b, t, h, i) * v(b, t, h, j) + (t > 0 ? S(b, h, i, j) : 0))
    if t == 0 { S(b, h, i, j) = k(b, t, h, i) * v(b, t, h, j) }
    else      { S(b, h, i, j) = exp(-exp(w(b, t, h, i))) * S(b, h, i, j) + k(b, t, h, i) * v(b, t, h, j) }
  }
}
""", full=dict(B=4, T=256, H=8, K=64), tiny=dict(B=2, T=5, H=2, K=3),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["K"]) * 0.5, _n(r, s["B"], s["T"], s["H"], s["K"]) * 0.5,
                         _n(r, s["B"], s["T"], s["H"], s["K"]),
                         (r.uniform(-6, -1, (s["B"], s["T"], s["H"], s["K"]))).astype(np.float32),
                         _n(r, s["H"], s["K"]) * 0.5])
def _h31_rwkv6(torch, a, t, s):
    r, k, v, w, u = t

    def run():
        S = r.new_zeros(s["B"], s["H"], s["K"], s["K"])
        ys = []
        decay = torch.exp(-torch.exp(w))
        for i in range(s["T"]):
            kv = k[:, i, :, :, None] * v[:, i, :, None, :]
            ys.append(torch.einsum("bhi,bhij->bhj", r[:, i], u[..., None] * kv + S))
            S = decay[:, i, :, :, None] * S + kv
        return torch.stack(ys, 1)
    return {"torch loop (fla naive recurrent rwkv6)": _nograd(torch, run)}


@program(name="gated linear attention (gla) recurrent: alpha = exp(logsigmoid(gk) / 16) per key dim, o = q S / sqrt(K)", kind="ssm", src="""
def gla(float(B,T,H,K) q, float(B,T,H,K) k, float(B,T,H,V) v, float(B,T,H,K) gk) -> (o) {
  for t in T {
    if t == 0 { S(b, h, i, j) = k(b, t, h, i) * v(b, t, h, j) }
    else      { S(b, h, i, j) = exp(-log(1 + exp(-gk(b, t, h, i))) / 16) * S(b, h, i, j) + k(b, t, h, i) * v(b, t, h, j) }
    o(b, t, h, j) +=! q(b, t, h, i) * S(b, h, i, j) / sqrt(float(K))
  }
}
""", full=dict(B=4, T=256, H=4, K=64, V=128), tiny=dict(B=2, T=5, H=2, K=3, V=4),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["K"]), _n(r, s["B"], s["T"], s["H"], s["K"]),
                         _n(r, s["B"], s["T"], s["H"], s["V"]), _n(r, s["B"], s["T"], s["H"], s["K"]) * 2])
def _h31_gla(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, gk = t
    K = s["K"]

    def run():
        alpha = torch.exp(F.logsigmoid(gk) / 16)
        S = q.new_zeros(s["B"], s["H"], K, s["V"])
        os = []
        for i in range(s["T"]):
            S = alpha[:, i, :, :, None] * S + k[:, i, :, :, None] * v[:, i, :, None, :]
            os.append(torch.einsum("bhi,bhij->bhj", q[:, i] * K ** -0.5, S))
        return torch.stack(os, 1)
    return {"torch loop (fused_recurrent ref)": _nograd(torch, run)}


@program(name="gated deltanet: l2-normed q/k, alpha = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid, delta rule", kind="ssm", src="""
def gated_deltanet(float(B,H,T,K) q, float(B,H,T,K) k, float(B,H,T,V) v, float(B,H,T) a, float(B,H,T) bt,
                   float(H) A_log, float(H) dt_bias) -> (o) {
  qs(b, h, t) +=! q(b, h, t, i) * q(b, h, t, i)
  ks(b, h, t) +=! k(b, h, t, i) * k(b, h, t, i)
  qn(b, h, t, i) = q(b, h, t, i) * rsqrt(qs(b, h, t) + 1e-6) / sqrt(float(K))
  kn(b, h, t, i) = k(b, h, t, i) * rsqrt(ks(b, h, t) + 1e-6)
  al(b, h, t) = exp(-exp(A_log(h)) * log(1 + exp(a(b, h, t) + dt_bias(h))))
  be(b, h, t) = sigmoid(bt(b, h, t))
  for s in T {
    if s == 0 { S(b, h, i, j) = be(b, h, s) * kn(b, h, s, i) * v(b, h, s, j) }
    else {
      S(b, h, i, j) = al(b, h, s) * S(b, h, i, j)
      u(b, h, j) +=! S(b, h, i, j) * kn(b, h, s, i)
      S(b, h, i, j) = S(b, h, i, j) + be(b, h, s) * kn(b, h, s, i) * (v(b, h, s, j) - u(b, h, j))
    }
    o(b, h, s, j) +=! qn(b, h, s, i) * S(b, h, i, j)
  }
}
""", full=dict(B=4, H=8, T=256, K=64, V=64), tiny=dict(B=2, H=2, T=5, K=3, V=4),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["T"], s["K"]), _n(r, s["B"], s["H"], s["T"], s["K"]),
                         _n(r, s["B"], s["H"], s["T"], s["V"]), _n(r, s["B"], s["H"], s["T"]),
                         _n(r, s["B"], s["H"], s["T"]), _a_log31(r, s["H"]), _dt_bias31(r, s["H"])])
def _h31_gated_deltanet(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, am, bt, A_log, dt_bias = t
    K = s["K"]

    def run():  # fla's recurrent_gated_delta_rule_ref, with use_qk_l2norm
        qn = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * K ** -0.5
        kn = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        g = -torch.exp(A_log)[:, None] * F.softplus(am + dt_bias[:, None])
        beta = torch.sigmoid(bt)
        S = q.new_zeros(s["B"], s["H"], K, s["V"])
        o = []
        for i in range(s["T"]):
            S = S * g[:, :, i].exp()[..., None, None]
            b_k = kn[:, :, i]
            b_v = (v[:, :, i] - (S * b_k[..., None]).sum(-2)) * beta[:, :, i, None]
            S = S + b_k.unsqueeze(-1) * b_v.unsqueeze(-2)
            o.append(torch.einsum("bhd,bhdm->bhm", qn[:, :, i], S))
        return torch.stack(o, 2)
    return {"torch loop (fla recurrent ref)": _nograd(torch, run)}


def _lam31(r, *shape):
    """griffin's a_param init: a^c uniform in [0.9^2, 0.999^2], stored as softplus^-1(-log(a^c) / 8)."""
    a = r.uniform(0.9 ** 2, 0.999 ** 2, shape)
    return np.log(np.expm1(-np.log(a) / 8)).astype(np.float32)


@program(name="hawk / griffin rg-lru: block-diagonal gate linears (NB,DB,DB), log a = -8 r softplus(lam), sqrt(1-a^2) input", kind="ssm", src="""
def rglru(float(B,T,NB,DB) x, float(NB,DB,DB) Wa, float(NB,DB) ba, float(NB,DB,DB) Wx, float(NB,DB) bx,
          float(NB,DB) lam) -> (h) {
  ga(b, t, g, j) +=! x(b, t, g, i) * Wa(g, i, j)
  gx(b, t, g, j) +=! x(b, t, g, i) * Wx(g, i, j)
  la(b, t, g, j) = -8.0 * sigmoid(ga(b, t, g, j) + ba(g, j)) * log(1 + exp(lam(g, j)))
  nx(b, t, g, j) = sigmoid(gx(b, t, g, j) + bx(g, j)) * x(b, t, g, j)
  for s in T {
    if s == 0 { h(b, s, g, j) = nx(b, s, g, j) }
    else      { h(b, s, g, j) = exp(la(b, s, g, j)) * h(b, s - 1, g, j) + sqrt(1 - exp(2 * la(b, s, g, j))) * nx(b, s, g, j) }
  }
}
""", full=dict(B=4, T=256, NB=16, DB=64), tiny=dict(B=2, T=5, NB=2, DB=3),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["NB"], s["DB"]), _w(r, s["NB"], s["DB"], s["DB"]),
                         _w(r, s["NB"], s["DB"]) * 0.1, _w(r, s["NB"], s["DB"], s["DB"]),
                         _w(r, s["NB"], s["DB"]) * 0.1, _lam31(r, s["NB"], s["DB"])])
def _h31_rglru(torch, a, t, s):
    F = torch.nn.functional
    x, Wa, ba, Wx, bx, lam = t

    def run():  # recurrentgemma's torch RGLRU (segment_pos == 0 resets at t = 0)
        gate_a = torch.sigmoid(torch.einsum("bthi,hij->bthj", x, Wa) + ba)
        gate_x = torch.sigmoid(torch.einsum("bthi,hij->bthj", x, Wx) + bx)
        log_a = -8.0 * gate_a * F.softplus(lam)
        a_ = torch.exp(log_a)
        mult = torch.sqrt(1 - torch.exp(2 * log_a))
        mult[:, 0] = 1.0
        nx = gate_x * x * mult
        h = nx[:, 0]
        hs = [h]
        for i in range(1, s["T"]):
            h = a_[:, i] * h + nx[:, i]
            hs.append(h)
        return torch.stack(hs, 1)
    return {"torch einsum gates + loop": _nograd(torch, run)}


@program(name="s5 complex diagonal ssm, zoh per-state step, bbar = (lbar - 1)/lambda B, re/im pairs, y = Re(C x) + D u", kind="ssm", src="""
def s5(float(B,L,H) u, float(P) Lre, float(P) Lim, float(P) log_step, float(P,H) Bre, float(P,H) Bim,
       float(H,P) Cre, float(H,P) Cim, float(H) Dsk) -> (y) {
  dl(p) = exp(log_step(p))
  ar(p) = exp(Lre(p) * dl(p)) * cos(Lim(p) * dl(p))
  ai(p) = exp(Lre(p) * dl(p)) * sin(Lim(p) * dl(p))
  gr(p) = ((ar(p) - 1) * Lre(p) + ai(p) * Lim(p)) / (Lre(p) * Lre(p) + Lim(p) * Lim(p))
  gi(p) = (ai(p) * Lre(p) - (ar(p) - 1) * Lim(p)) / (Lre(p) * Lre(p) + Lim(p) * Lim(p))
  bur(b, l, p) +=! Bre(p, h) * u(b, l, h)
  bui(b, l, p) +=! Bim(p, h) * u(b, l, h)
  for t in L {
    if t == 0 {
      xr(b, t, p) = gr(p) * bur(b, t, p) - gi(p) * bui(b, t, p)
      xi(b, t, p) = gr(p) * bui(b, t, p) + gi(p) * bur(b, t, p)
    } else {
      xr(b, t, p) = ar(p) * xr(b, t - 1, p) - ai(p) * xi(b, t - 1, p) + gr(p) * bur(b, t, p) - gi(p) * bui(b, t, p)
      xi(b, t, p) = ar(p) * xi(b, t - 1, p) + ai(p) * xr(b, t - 1, p) + gr(p) * bui(b, t, p) + gi(p) * bur(b, t, p)
    }
  }
  y(b, l, h) +=! Cre(h, p) * xr(b, l, p) - Cim(h, p) * xi(b, l, p)
  y(b, l, h) = y(b, l, h) + Dsk(h) * u(b, l, h)
}
""", full=dict(B=8, L=512, H=128, P=128), tiny=dict(B=2, L=5, H=3, P=4),
    inputs=lambda r, s: [_n(r, s["B"], s["L"], s["H"]), np.full(s["P"], -0.5, np.float32),
                         (np.pi * np.arange(s["P"])).astype(np.float32),
                         r.uniform(np.log(1e-3), np.log(1e-1), s["P"]).astype(np.float32),
                         _w(r, s["P"], s["H"]), _w(r, s["P"], s["H"]), _w(r, s["H"], s["P"]), _w(r, s["H"], s["P"]),
                         _n(r, s["H"])])
def _h31_s5(torch, a, t, s):
    u, Lre, Lim, log_step, Bre, Bim, Cre, Cim, Dsk = t

    def run():
        lam = torch.complex(Lre, Lim)
        step = torch.exp(log_step)
        lbar = torch.exp(lam * step)
        bbar = ((lbar - 1) / lam)[:, None] * torch.complex(Bre, Bim)
        bu = torch.einsum("blh,ph->blp", u.to(torch.complex64), bbar)
        xs = []
        xk = bu.new_zeros(bu.shape[0], bu.shape[2])
        for i in range(bu.shape[1]):
            xk = lbar * xk + bu[:, i]
            xs.append(xk)
        xs = torch.stack(xs, 1)
        return torch.einsum("blp,hp->blh", xs, torch.complex(Cre, Cim)).real + Dsk * u
    return {"torch complex64 loop": _nograd(torch, run)}


@program(name="mamba block causal_conv1d_fn, channels-first (B,D,L), weight (D,K), bias, silu activation", kind="ssm", src="""
def causal_conv1d_silu(float(B,D,L) x, float(D,K) w, float(D) bias) -> (y) {
  c(b, d, l) +=! (l + k - K + 1 >= 0 ? x(b, d, l + k - K + 1) : 0) * w(d, k) where l in 0:L, k in 0:K
  y(b, d, l) = (c(b, d, l) + bias(d)) * sigmoid(c(b, d, l) + bias(d))
}
""", full=dict(B=8, D=1024, L=512, K=4), tiny=dict(B=2, D=3, L=5, K=4),
    inputs=lambda r, s: [_n(r, s["B"], s["D"], s["L"]), _w(r, s["D"], s["K"]), _w(r, s["D"]) * 0.1])
def _h31_causal_conv1d(torch, a, t, s):
    F = torch.nn.functional
    x, w, bias = t
    K, L = s["K"], s["L"]
    return {"F.conv1d(groups=D, padding=K-1)[..., :L] + silu":
            _nograd(torch, lambda: F.silu(F.conv1d(x, w.unsqueeze(1), bias, padding=K - 1, groups=x.shape[1])[..., :L]))}


@program(name="mamba2 _chunk_cumsum_fwd: dt softplus + clamp, dA cumsum per chunk (for q in Q), exp(segsum) mask", kind="ssm", src="""
def chunk_cumsum(float(B,NC,Q,H) dt, float(H) dt_bias, float(H) A_log, float dt_min, float dt_max) -> (dtc, cs, Lm) {
  dtc(b, h, c, q) = fmin(fmax(log(1 + exp(dt(b, c, q, h) + dt_bias(h))), dt_min), dt_max)
  for q in Q {
    if q == 0 { cs(b, h, c, q) = -exp(A_log(h)) * dtc(b, h, c, q) }
    else      { cs(b, h, c, q) = cs(b, h, c, q - 1) - exp(A_log(h)) * dtc(b, h, c, q) }
  }
  Lm(b, h, c, i, j) = j <= i ? exp(cs(b, h, c, i) - cs(b, h, c, j)) : 0
}
""", full=dict(B=8, NC=8, Q=64, H=16), tiny=dict(B=2, NC=2, Q=4, H=3),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel(), r[2].ravel()]),
    inputs=lambda r, s: [_n(r, s["B"], s["NC"], s["Q"], s["H"]), _dt_bias31(r, s["H"]), _a_log31(r, s["H"]),
                         np.array(0.0, np.float32), np.array(0.08, np.float32)])
def _h31_chunk_cumsum(torch, a, t, s):
    F = torch.nn.functional
    dt, dt_bias, A_log = t[:3]
    dt_min, dt_max = float(a[3]), float(a[4])
    Q = s["Q"]

    def segsum(x):  # mamba2's ssd_minimal segsum, einops-free
        x = x[..., None].expand(*x.shape, Q)
        x = x.masked_fill(~torch.tril(torch.ones(Q, Q, dtype=torch.bool), diagonal=-1), 0)
        x = torch.cumsum(x, dim=-2)
        return x.masked_fill(~torch.tril(torch.ones(Q, Q, dtype=torch.bool), diagonal=0), -torch.inf)

    def run():
        d = F.softplus(dt + dt_bias).clamp(dt_min, dt_max).permute(0, 3, 1, 2)  # (B, H, NC, Q)
        dA = -torch.exp(A_log)[:, None, None] * d
        return torch.cat([d.reshape(-1), torch.cumsum(dA, -1).reshape(-1), torch.exp(segsum(dA)).reshape(-1)])
    return {"torch softplus/clamp + cumsum + ssd_minimal segsum": _nograd(torch, run)}


@program(name="mamba2 chunked ssd (ssd_minimal_discrete): intra-chunk (C B^T o L) X, chunk states, state passing loop", kind="ssm", src="""
def ssd_chunked(float(B,NC,Q,H,P) X, float(B,NC,Q,H) A, float(B,NC,Q,N) Bm, float(B,NC,Q,N) Cm) -> (Y) {
  cs(b, c, q, h) = A(b, c, q, h)
  cs(b, c, q, h) = cs(b, c, q, h) + (q > 0 ? cs(b, c, q - 1, h) : 0) where q in 0:Q
  G(b, c, i, j) +=! Cm(b, c, i, n) * Bm(b, c, j, n)
  M(b, c, h, i, j) = j <= i ? G(b, c, i, j) * exp(cs(b, c, i, h) - cs(b, c, j, h)) : 0
  Y(b, c, i, h, p) +=! M(b, c, h, i, j) * X(b, c, j, h, p)
  st(b, c, h, p, n) +=! Bm(b, c, j, n) * exp(cs(b, c, Q - 1, h) - cs(b, c, j, h)) * X(b, c, j, h, p)
  for z in 1:NC {
    if z == 1 { Sin(b, z, h, p, n) = st(b, z - 1, h, p, n) }
    else      { Sin(b, z, h, p, n) = exp(cs(b, z - 1, Q - 1, h)) * Sin(b, z - 1, h, p, n) + st(b, z - 1, h, p, n) }
  }
  Y(b, c, i, h, p) += c > 0 ? exp(cs(b, c, i, h)) * Cm(b, c, i, n) * Sin(b, c, h, p, n) : 0
}
""", full=dict(B=2, NC=8, Q=64, H=8, P=64, N=64), tiny=dict(B=2, NC=3, Q=4, H=2, P=3, N=2),
    inputs=lambda r, s: (lambda dt: [
        (_n(r, s["B"], s["NC"], s["Q"], s["H"], s["P"]) * dt[..., None]).astype(np.float32),
        (-r.uniform(1, 16, s["H"]) * dt).astype(np.float32),
        _n(r, s["B"], s["NC"], s["Q"], s["N"]), _n(r, s["B"], s["NC"], s["Q"], s["N"])])(
        np.exp(r.uniform(np.log(1e-3), np.log(1e-1), (s["B"], s["NC"], s["Q"], s["H"])))))
def _h31_ssd_chunked(torch, a, t, s):
    F = torch.nn.functional
    X, A, Bm, Cm = t
    Bsz, NC, Q, H, P, N = s["B"], s["NC"], s["Q"], s["H"], s["P"], s["N"]

    def segsum(x):
        T = x.size(-1)
        x = x[..., None].expand(*x.shape, T)
        x = x.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1), 0)
        x = torch.cumsum(x, dim=-2)
        return x.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=0), -torch.inf)

    def ssd_minimal():
        Bh = Bm[:, :, :, None, :].expand(Bsz, NC, Q, H, N)
        Ch = Cm[:, :, :, None, :].expand(Bsz, NC, Q, H, N)
        Ah = A.permute(0, 3, 1, 2)  # b h c l
        A_cumsum = torch.cumsum(Ah, dim=-1)
        Lmat = torch.exp(segsum(Ah))
        Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Ch, Bh, Lmat, X)
        decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", Bh, decay_states, X)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
        decay_chunk = torch.exp(segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
        states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)[:, :-1]
        Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", Ch, states, torch.exp(A_cumsum))
        return Y_diag + Y_off

    def loop():
        Xl, Al = X.reshape(Bsz, NC * Q, H, P), A.reshape(Bsz, NC * Q, H)
        Bl, Cl = Bm.reshape(Bsz, NC * Q, N), Cm.reshape(Bsz, NC * Q, N)
        S = X.new_zeros(Bsz, H, P, N)
        ys = []
        for i in range(NC * Q):
            S = torch.exp(Al[:, i])[:, :, None, None] * S + Xl[:, i, :, :, None] * Bl[:, i, None, None, :]
            ys.append(torch.einsum("bhpn,bn->bhp", S, Cl[:, i]))
        return torch.stack(ys, 1).view(Bsz, NC, Q, H, P)
    return {"torch ssd_minimal_discrete (einsum)": _nograd(torch, ssd_minimal),
            "torch recurrent loop over L": _nograd(torch, loop)}


@program(name="performer favor+ causal attention: positive random features exp(w.x' - |x'|^2/2), running state + normalizer", kind="ssm", src="""
def favor_causal(float(B,H,L,D) q, float(B,H,L,D) k, float(B,H,L,E) v, float(M,D) W) -> (o) {
  pq(b, h, l, m) +=! q(b, h, l, d) * W(m, d)
  pk(b, h, l, m) +=! k(b, h, l, d) * W(m, d)
  nq(b, h, l) +=! q(b, h, l, d) * q(b, h, l, d)
  nk(b, h, l) +=! k(b, h, l, d) * k(b, h, l, d)
  fq(b, h, l, m) = exp(pq(b, h, l, m) / sqrt(sqrt(float(D))) - nq(b, h, l) / (2 * sqrt(float(D)))) / sqrt(float(M))
  fk(b, h, l, m) = exp(pk(b, h, l, m) / sqrt(sqrt(float(D))) - nk(b, h, l) / (2 * sqrt(float(D)))) / sqrt(float(M))
  for t in L {
    if t == 0 {
      S(b, h, m, e) = fk(b, h, t, m) * v(b, h, t, e)
      z(b, h, m) = fk(b, h, t, m)
    } else {
      S(b, h, m, e) = S(b, h, m, e) + fk(b, h, t, m) * v(b, h, t, e)
      z(b, h, m) = z(b, h, m) + fk(b, h, t, m)
    }
    num(b, h, t, e) +=! fq(b, h, t, m) * S(b, h, m, e)
    den(b, h, t) +=! fq(b, h, t, m) * z(b, h, m)
    o(b, h, t, e) = num(b, h, t, e) / den(b, h, t)
  }
}
""", full=dict(B=4, H=8, L=256, D=64, E=64, M=64), tiny=dict(B=2, H=2, L=5, D=3, E=4, M=4),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["L"], s["D"]) * 0.5, _n(r, s["B"], s["H"], s["L"], s["D"]) * 0.5,
                         _n(r, s["B"], s["H"], s["L"], s["E"]), _n(r, s["M"], s["D"])])
def _h31_favor(torch, a, t, s):
    q, k, v, W = t
    D, M = s["D"], s["M"]

    def feat(x):
        x = x * D ** -0.25
        return torch.exp(x @ W.T - (x * x).sum(-1, keepdim=True) / 2) * M ** -0.5

    def quadratic():
        A = (feat(q) @ feat(k).transpose(-1, -2)).tril()
        return (A @ v) / A.sum(-1, keepdim=True)

    def prefix():
        fq, fk = feat(q), feat(k)
        S = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), 2)  # B H L M E
        z = torch.cumsum(fk, 2)
        return torch.einsum("bhlm,bhlme->bhle", fq, S) / (fq * z).sum(-1, keepdim=True)
    return {"torch masked quadratic form": _nograd(torch, quadratic),
            "torch prefix sums of outer products": _nograd(torch, prefix)}


@program(name="rwkv-4 wkv, numerically safe form of the cuda kernel (running max pp, aa, bb), decay -exp(time_decay)", kind="ssm", src="""
def rwkv4_wkv_safe(float(B,T,C) k, float(B,T,C) v, float(C) time_decay, float(C) u) -> (y) {
  for t in T {
    if t == 0 {
      y(b, t, c) = v(b, t, c)
      aa(b, c) = v(b, t, c)
      bb(b, c) = exp(k(b, t, c) - k(b, t, c))
      pp(b, c) = k(b, t, c)
    } else {
      p(b, c) = fmax(pp(b, c), u(c) + k(b, t, c))
      y(b, t, c) = (exp(pp(b, c) - p(b, c)) * aa(b, c) + exp(u(c) + k(b, t, c) - p(b, c)) * v(b, t, c))
                 / (exp(pp(b, c) - p(b, c)) * bb(b, c) + exp(u(c) + k(b, t, c) - p(b, c)))
      p2(b, c) = fmax(pp(b, c) - exp(time_decay(c)), k(b, t, c))
      aa(b, c) = exp(pp(b, c) - exp(time_decay(c)) - p2(b, c)) * aa(b, c) + exp(k(b, t, c) - p2(b, c)) * v(b, t, c)
      bb(b, c) = exp(pp(b, c) - exp(time_decay(c)) - p2(b, c)) * bb(b, c) + exp(k(b, t, c) - p2(b, c))
      pp(b, c) = p2(b, c)
    }
  }
}
""", full=dict(B=16, T=512, C=1024), tiny=dict(B=2, T=5, C=3),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["C"]) * 4, _n(r, s["B"], s["T"], s["C"]),
                         r.uniform(-3, 1, s["C"]).astype(np.float32), _n(r, s["C"])])
def _h31_rwkv4_safe(torch, a, t, s):
    k, v, td, u = t

    def run():  # the cuda kernel's loop, batched over (B, C)
        w = -torch.exp(td)
        aa = torch.zeros_like(k[:, 0])
        bb = torch.zeros_like(k[:, 0])
        pp = torch.full_like(k[:, 0], -1e38)
        ys = []
        for i in range(s["T"]):
            kk, vv = k[:, i], v[:, i]
            ww = u + kk
            p = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
            ys.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
            ww = w + pp
            p = torch.maximum(ww, kk)
            e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
            aa, bb, pp = e1 * aa + e2 * vv, e1 * bb + e2, p
        return torch.stack(ys, 1)
    return {"torch loop (cuda kernel transcribed)": _nograd(torch, run)}


@program(name="mamba selective_state_update (decode step): state (B,D,N) in, new state + y, dt softplus, D skip, silu(z) gate", kind="ssm", src="""
def state_update(float(B,D,N) state, float(B,D) x, float(B,D) dt, float(D) dt_bias, float(D,N) A, float(B,N) Bm,
                 float(B,N) Cm, float(D) Dsk, float(B,D) z) -> (y, ns) {
  dl(b, d) = log(1 + exp(dt(b, d) + dt_bias(d)))
  ns(b, d, n) = state(b, d, n) * exp(A(d, n) * dl(b, d)) + Bm(b, n) * dl(b, d) * x(b, d)
  y(b, d) +=! ns(b, d, n) * Cm(b, n)
  y(b, d) = (y(b, d) + Dsk(d) * x(b, d)) * z(b, d) * sigmoid(z(b, d))
}
""", full=dict(B=32, D=4096, N=16), tiny=dict(B=2, D=3, N=4),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel()]),
    inputs=lambda r, s: [_n(r, s["B"], s["D"], s["N"]), _n(r, s["B"], s["D"]), _n(r, s["B"], s["D"]) * 0.5,
                         _dt_bias31(r, s["D"]),
                         -np.tile(np.arange(1, s["N"] + 1, dtype=np.float32), (s["D"], 1)),
                         _n(r, s["B"], s["N"]), _n(r, s["B"], s["N"]), np.ones(s["D"], np.float32),
                         _n(r, s["B"], s["D"])])
def _h31_state_update(torch, a, t, s):
    F = torch.nn.functional
    state, x, dt, dt_bias, A, Bm, Cm, Dsk, z = t

    def run():  # mamba's selective_state_update_ref, on a copy of the state (the tcdsl kernel returns a new one)
        st = state.clone()
        d = F.softplus(dt + dt_bias)
        dA = torch.exp(d.unsqueeze(-1) * A)
        dB = d.unsqueeze(-1) * Bm.unsqueeze(1)
        st.copy_(st * dA + dB * x.unsqueeze(-1))
        out = torch.einsum("bdn,bn->bd", st, Cm) + x * Dsk
        out = out * F.silu(z)
        return torch.cat([out.reshape(-1), st.reshape(-1)])
    return {"torch selective_state_update_ref": _nograd(torch, run)}


@program(name="based linear attention, 2nd-order taylor feature map 1 + q.k/sqrt(F) + (q.k)^2/2F, states by order", kind="ssm", src="""
def based_taylor(float(B,H,L,F) q, float(B,H,L,F) k, float(B,H,L,E) v) -> (o) {
  for t in L {
    if t == 0 {
      s0(b, h, e) = v(b, h, t, e)
      s1(b, h, i, e) = k(b, h, t, i) * v(b, h, t, e)
      s2(b, h, i, j, e) = k(b, h, t, i) * k(b, h, t, j) * v(b, h, t, e)
      z1(b, h, i) = k(b, h, t, i)
      z2(b, h, i, j) = k(b, h, t, i) * k(b, h, t, j)
    } else {
      s0(b, h, e) = s0(b, h, e) + v(b, h, t, e)
      s1(b, h, i, e) = s1(b, h, i, e) + k(b, h, t, i) * v(b, h, t, e)
      s2(b, h, i, j, e) = s2(b, h, i, j, e) + k(b, h, t, i) * k(b, h, t, j) * v(b, h, t, e)
      z1(b, h, i) = z1(b, h, i) + k(b, h, t, i)
      z2(b, h, i, j) = z2(b, h, i, j) + k(b, h, t, i) * k(b, h, t, j)
    }
    num(b, h, t, e) +=! q(b, h, t, i) * s1(b, h, i, e) / sqrt(float(F))
    num(b, h, t, e) += q(b, h, t, i) * q(b, h, t, j) * s2(b, h, i, j, e) / (2 * F)
    den(b, h, t) +=! q(b, h, t, i) * z1(b, h, i) / sqrt(float(F))
    den(b, h, t) += q(b, h, t, i) * q(b, h, t, j) * z2(b, h, i, j) / (2 * F)
    o(b, h, t, e) = (num(b, h, t, e) + s0(b, h, e)) / (den(b, h, t) + float(t + 1))
  }
}
""", full=dict(B=2, H=8, L=256, F=16, E=64), tiny=dict(B=2, H=2, L=5, F=3, E=4),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["L"], s["F"]), _n(r, s["B"], s["H"], s["L"], s["F"]),
                         _n(r, s["B"], s["H"], s["L"], s["E"])])
def _h31_based(torch, a, t, s):
    q, k, v = t
    Fd = s["F"]

    def quadratic():  # based's parallel reference: phi(q).phi(k) = 1 + qk/sqrt(F) + (qk)^2/(2F), causal
        qk = q @ k.transpose(-1, -2)
        A = (1 + qk / Fd ** 0.5 + qk * qk / (2 * Fd)).tril()
        return (A @ v) / A.sum(-1, keepdim=True)

    def feature_map():  # TaylorExp features, then causal quadratic attention over them
        def phi(x):
            x2 = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) / 2 ** 0.5
            return torch.cat([torch.ones_like(x[..., :1]), x / Fd ** 0.25, x2 / Fd ** 0.5], -1)
        A = (phi(q) @ phi(k).transpose(-1, -2)).tril()
        return (A @ v) / A.sum(-1, keepdim=True)
    return {"torch quadratic (qk polynomial)": _nograd(torch, quadratic),
            "torch TaylorExp features + masked matmul": _nograd(torch, feature_map)}
# ---------------------------------------------------------------- hunt 32: classical ml and training steps

def _h32_f32(x):
    return np.array(x, np.float32)


def _h32_blobs(r, N, K, D, spread=6.0, noise=0.5):
    """N points around K well-separated centres, and starting centroids near those centres."""
    centres = r.standard_normal((K, D)) * spread
    lab = r.integers(0, K, N)
    X = (centres[lab] + r.standard_normal((N, D)) * noise).astype(np.float32)
    C0 = (centres + r.standard_normal((K, D)) * noise).astype(np.float32)
    return [X, C0]


def _h32_resp(r, N, K):
    z = r.standard_normal((N, K)) * 2
    e = np.exp(z - z.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).astype(np.float32)


def _h32_lasso_data(r, N, D):
    X = _n(r, N, D)
    wt = np.where(r.random(D) < 0.2, r.standard_normal(D) * 2, 0.0)
    wt[0] = 1.5  # at least one true feature
    y = (X @ wt + 0.1 * r.standard_normal(N)).astype(np.float32)
    return [X, y]


@program(name="k-means, S Lloyd iterations in a for loop (free): argmin of |c|^2 - 2 x.c, empty clusters keep their centroid",
         kind="ml", src="""
def kmeans_lloyd(float(N,D) X, float(K,D) C0) -> (C, assign) {
  C(k, d) = C0(k, d)
  for it in S {
    cc(k) +=! C(k, d) * C(k, d)
    xc(n, k) +=! X(n, d) * C(k, d)
    assign(n) argmin=! cc(k) - 2 * xc(n, k)
    cnt(k) +=! assign(n) == k ? 1.0 : 0.0 where k in 0:K
    sm(k, d) +=! assign(n) == k ? X(n, d) : 0.0 where k in 0:K
    C(k, d) = cnt(k) > 0 ? sm(k, d) / cnt(k) : C(k, d)
  }
}
""", full=dict(N=16384, K=32, D=32, S=10), tiny=dict(N=5, K=2, D=3, S=2), free=("S",),
    pick=lambda r: r[0],
    inputs=lambda r, s: _h32_blobs(r, s["N"], s["K"], s["D"]))
def _h32_kmeans(torch, a, t, s):
    X, C0 = t
    K, S = s["K"], s["S"]

    def run():
        C = C0.clone()
        for _ in range(S):
            idx = torch.cdist(X, C).argmin(1)
            cnt = torch.bincount(idx, minlength=K).to(X.dtype)
            sm = torch.zeros_like(C).index_add_(0, idx, X)
            C = torch.where(cnt[:, None] > 0, sm / cnt.clamp(min=1)[:, None], C)
        return C
    return {"torch cdist + argmin + index_add_ loop": _nograd(torch, run)}


@program(name="gaussian mixture m-step from responsibilities: log weights, means, diagonal variances + reg",
         kind="ml", src="""
def gmm_mstep(float(N,D) X, float(N,K) R, float reg) -> (logw, mu, var) {
  nk(k) +=! R(n, k)
  nk(k) = nk(k) + 1e-6
  logw(k) = log(nk(k) / N)
  mu(k, d) +=! R(n, k) * X(n, d)
  mu(k, d) = mu(k, d) / nk(k)
  var(k, d) +=! R(n, k) * (X(n, d) - mu(k, d)) * (X(n, d) - mu(k, d))
  var(k, d) = var(k, d) / nk(k) + reg
}
""", full=dict(N=16384, D=64, K=32), tiny=dict(N=5, D=3, K=2),
    pick=lambda r: np.concatenate([x.ravel() for x in r]),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _h32_resp(r, s["N"], s["K"]), _h32_f32(1e-3)])
def _h32_gmm_mstep(torch, a, t, s):
    X, R = t[0], t[1]
    reg, N = float(a[2]), s["N"]

    def sklearn_style():
        nk = R.sum(0) + 1e-6
        mu = R.t() @ X / nk[:, None]
        avg_x2 = R.t() @ (X * X) / nk[:, None]
        var = avg_x2 - 2 * mu * (R.t() @ X) / nk[:, None] + mu * mu * (R.sum(0) / nk)[:, None] + reg
        return torch.cat([torch.log(nk / N), mu.ravel(), var.ravel()])

    def direct():
        nk = R.sum(0) + 1e-6
        mu = R.t() @ X / nk[:, None]
        diff = X[:, None, :] - mu[None]
        var = torch.einsum("nk,nkd->kd", R, diff * diff) / nk[:, None] + reg
        return torch.cat([torch.log(nk / N), mu.ravel(), var.ravel()])
    return {"torch matmuls (sklearn formula)": _nograd(torch, sklearn_style),
            "torch einsum over (x - mu)^2": _nograd(torch, direct)}


@program(name="softmax regression, S full-batch gradient steps (free), int32 labels: loss per step, W and b updated in the loop",
         kind="ml", src="""
def softmax_reg_train(float(N,D) X, int32(N) y, float(C,D) W0, float(C) b0, float lr) -> (W, bias, loss) {
  W(c, d) = W0(c, d)
  bias(c) = b0(c)
  for it in S {
    z(n, c) +=! X(n, d) * W(c, d)
    z(n, c) = z(n, c) + bias(c)
    mx(n) max=! z(n, c)
    e(n, c) = exp(z(n, c) - mx(n))
    se(n) +=! e(n, c)
    loss(it) +=! (log(se(n)) + mx(n) - z(n, y(n))) / N
    g(n, c) = (e(n, c) / se(n) - (y(n) == c ? 1.0 : 0.0)) / N
    gW(c, d) +=! g(n, c) * X(n, d)
    gb(c) +=! g(n, c)
    W(c, d) = W(c, d) - lr * gW(c, d)
    bias(c) = bias(c) - lr * gb(c)
  }
}
""", full=dict(N=4096, D=256, C=10, S=10), tiny=dict(N=5, D=3, C=4, S=3), free=("S",),
    pick=lambda r: np.concatenate([x.ravel() for x in r]),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.integers(0, s["C"], s["N"]).astype(np.int32),
                         _w(r, s["C"], s["D"]), np.zeros(s["C"], np.float32), _h32_f32(0.5)])
def _h32_softmax_reg(torch, a, t, s):
    F = torch.nn.functional
    X, y, W0, b0 = t[:4]
    lr, S, C = float(a[4]), s["S"], s["C"]
    yl = y.long()

    def manual():
        W, b, losses = W0.clone(), b0.clone(), []
        onehot = F.one_hot(yl, C).to(X.dtype)
        for _ in range(S):
            z = F.linear(X, W, b)
            losses.append(F.cross_entropy(z, yl))
            g = (torch.softmax(z, 1) - onehot) / X.shape[0]
            W = W - lr * (g.t() @ X)
            b = b - lr * g.sum(0)
        return torch.cat([W.ravel(), b, torch.stack(losses)])

    def autograd():
        W, b, losses = W0.clone().requires_grad_(), b0.clone().requires_grad_(), []
        for _ in range(S):
            with torch.enable_grad():
                loss = F.cross_entropy(F.linear(X, W, b), yl)
                gW, gb = torch.autograd.grad(loss, (W, b))
            with torch.no_grad():
                W -= lr * gW
                b -= lr * gb
            losses.append(loss.detach())
        return torch.cat([W.detach().ravel(), b.detach(), torch.stack(losses)])
    return {"torch manual softmax - onehot gradient loop": _nograd(torch, manual),
            "torch autograd.grad of F.cross_entropy loop": autograd}


@program(name="k nearest neighbour distances: squared-distance expansion, K masked-min passes in a for loop (K free), sqrt",
         kind="ml", src="""
def knn_dists(float(Q,D) Xq, float(N,D) Xr) -> (knn, nbr) {
  qq(q) +=! Xq(q, d) * Xq(q, d)
  rr(n) +=! Xr(n, d) * Xr(n, d)
  dot(q, n) +=! Xq(q, d) * Xr(n, d)
  dist(q, n) = fmax(qq(q) + rr(n) - 2 * dot(q, n), 0.0)
  for t in K {
    if t == 0 {
      kd(t, q) min=! dist(q, n)
      nbr(q, t) argmin=! dist(q, n)
    } else {
      kd(t, q) min=! dist(q, n) > kd(t - 1, q) ? dist(q, n) : inf
      nbr(q, t) argmin=! dist(q, n) > kd(t - 1, q) ? dist(q, n) : inf
    }
  }
  knn(q, t) = sqrt(kd(t, q))
}
""", full=dict(Q=512, N=4096, D=64, K=10), tiny=dict(Q=3, N=7, D=3, K=3), free=("K",),
    pick=lambda r: r[0],
    inputs=lambda r, s: [_n(r, s["Q"], s["D"]), _n(r, s["N"], s["D"])])
def _h32_knn(torch, a, t, s):
    Xq, Xr = t
    K = s["K"]
    return {"torch.cdist + topk(largest=False)": _nograd(torch, lambda: torch.cdist(Xq, Xr).topk(K, 1, largest=False).values),
            "torch mm expansion + topk + sqrt": _nograd(torch, lambda: (
                (Xq * Xq).sum(1, keepdim=True) + (Xr * Xr).sum(1) - 2 * Xq @ Xr.t()).clamp(min=0)
                .topk(K, 1, largest=False).values.sqrt())}


@program(name="pca first component: centred covariance, S power-iteration steps (free) with normalisation, rayleigh eigenvalue",
         kind="ml", src="""
def pca_power(float(N,D) X, float(D) v0) -> (v, lam) {
  mean(d) +=! X(n, d) / N
  Xc(n, d) = X(n, d) - mean(d)
  cov(i, j) +=! Xc(n, i) * Xc(n, j) / (N - 1)
  v(i) = v0(i)
  for it in S {
    u(i) +=! cov(i, j) * v(j)
    nrm +=! u(i) * u(i)
    v(i) = u(i) / sqrt(nrm)
  }
  cv(i) +=! cov(i, j) * v(j)
  lam +=! v(i) * cv(i)
}
""", full=dict(N=4096, D=256, S=50), tiny=dict(N=5, D=3, S=3), free=("S",),
    pick=lambda r: np.concatenate([r[0], np.atleast_1d(r[1])]),
    inputs=lambda r, s: [(_n(r, s["N"], s["D"]) * np.linspace(3, 0.5, s["D"], dtype=np.float32)),
                         _w(r, s["D"])])
def _h32_pca(torch, a, t, s):
    X, v0 = t
    S = s["S"]

    def run():
        cov = torch.cov(X.t())
        v = v0
        for _ in range(S):
            u = cov @ v
            v = u / torch.linalg.vector_norm(u)
        return torch.cat([v, (v @ cov @ v).reshape(1)])
    return {"torch.cov + matvec/normalise loop": _nograd(torch, run)}


@program(name="ridge regression by S gradient-descent steps (free) from zero, unpenalised intercept, mse per step",
         kind="ml", src="""
def ridge_gd(float(N,D) X, float(N) y, float lr, float lam) -> (w, b, mse) {
  w(d) = 0.0 where d in 0:D
  b = 0.0
  for it in S {
    r(n) +=! X(n, d) * w(d)
    r(n) = r(n) + b - y(n)
    mse(it) +=! r(n) * r(n) / N
    gw(d) +=! X(n, d) * r(n)
    gb +=! r(n)
    w(d) = w(d) - lr * (gw(d) / N + lam * w(d))
    b = b - lr * gb / N
  }
}
""", full=dict(N=8192, D=128, S=20), tiny=dict(N=5, D=3, S=3), free=("S",),
    pick=lambda r: np.concatenate([r[0], np.atleast_1d(r[1]), r[2]]),
    inputs=lambda r, s: (lambda X: [X, (X @ _w(r, s["D"]) + 0.7 + 0.1 * _n(r, s["N"])).astype(np.float32),
                                    _h32_f32(0.1), _h32_f32(1e-2)])(_n(r, s["N"], s["D"])))
def _h32_ridge(torch, a, t, s):
    X, y = t[0], t[1]
    lr, lam, S = float(a[2]), float(a[3]), s["S"]
    N, D = X.shape

    def run():
        w, b, mse = torch.zeros(D), torch.zeros(()), []
        for _ in range(S):
            r = X @ w + b - y
            mse.append(r.pow(2).mean())
            w = w - lr * (X.t() @ r / N + lam * w)
            b = b - lr * r.mean()
        return torch.cat([w, b.reshape(1), torch.stack(mse)])
    return {"torch matvec loop": _nograd(torch, run)}


@program(name="centred rmsprop step with momentum and weight decay (torch.optim.RMSprop formulas) on a 2-d weight",
         kind="ml", src="""
def rmsprop_centered(float(O,I) p, float(O,I) grad, float(O,I) sq, float(O,I) ga, float(O,I) buf,
                     float lr, float alpha, float eps, float wd, float mom) -> (p1, sq1, ga1, buf1) {
  g(o, i) = grad(o, i) + wd * p(o, i)
  sq1(o, i) = alpha * sq(o, i) + (1 - alpha) * g(o, i) * g(o, i)
  ga1(o, i) = alpha * ga(o, i) + (1 - alpha) * g(o, i)
  buf1(o, i) = mom * buf(o, i) + g(o, i) / (sqrt(sq1(o, i) - ga1(o, i) * ga1(o, i)) + eps)
  p1(o, i) = p(o, i) - lr * buf1(o, i)
}
""", full=dict(O=1024, I=2048), tiny=dict(O=2, I=3),
    pick=lambda r: np.stack(r),
    inputs=lambda r, s: (lambda O, I: [_w(r, O, I), _n(r, O, I) * 0.01,
                                       (r.random((O, I)) * 1e-4 + 1e-4).astype(np.float32),
                                       _n(r, O, I) * 1e-3, _n(r, O, I) * 0.1,
                                       _h32_f32(1e-2), _h32_f32(0.99), _h32_f32(1e-8), _h32_f32(1e-4),
                                       _h32_f32(0.9)])(s["O"], s["I"]))
def _h32_rmsprop(torch, a, t, s):
    p, grad, sq, ga, buf = t[:5]
    lr, alpha, eps, wd, mom = (float(v) for v in a[5:])

    def formulas():
        g = grad + wd * p
        sq1 = alpha * sq + (1 - alpha) * g * g
        ga1 = alpha * ga + (1 - alpha) * g
        buf1 = mom * buf + g / ((sq1 - ga1 * ga1).sqrt() + eps)
        return torch.stack([p - lr * buf1, sq1, ga1, buf1])

    def inplace_ops():  # torch.optim.RMSprop's single-tensor step, on copies
        P, SQ, GA, BUF = p.clone(), sq.clone(), ga.clone(), buf.clone()
        g = grad.add(P, alpha=wd)
        SQ.mul_(alpha).addcmul_(g, g, value=1 - alpha)
        GA.lerp_(g, 1 - alpha)
        avg = SQ.addcmul(GA, GA, value=-1).sqrt_().add_(eps)
        BUF.mul_(mom).addcdiv_(g, avg)
        P.add_(BUF, alpha=-lr)
        return torch.stack([P, SQ, GA, BUF])
    return {"torch elementwise formulas": _nograd(torch, formulas),
            "torch in-place optim-style ops on copies": _nograd(torch, inplace_ops)}


@program(name="mlp layer train step: relu(x W^T + b), mse backward by hand, sgd nesterov momentum + weight decay",
         kind="ml", src="""
def mlp_sgd_step(float(B,I) x, float(B,O) target, float(O,I) W, float(O) bias, float(O,I) vW, float(O) vb,
                 float lr, float mom, float wd) -> (W1, b1, vW1, vb1, loss) {
  z(b, o) +=! x(b, i) * W(o, i)
  h(b, o) = fmax(z(b, o) + bias(o), 0.0)
  loss +=! (h(b, o) - target(b, o)) * (h(b, o) - target(b, o)) / (B * O)
  dz(b, o) = h(b, o) > 0 ? 2 * (h(b, o) - target(b, o)) / (B * O) : 0.0
  gW(o, i) +=! dz(b, o) * x(b, i)
  gb(o) +=! dz(b, o)
  gW(o, i) = gW(o, i) + wd * W(o, i)
  vW1(o, i) = mom * vW(o, i) + gW(o, i)
  vb1(o) = mom * vb(o) + gb(o)
  W1(o, i) = W(o, i) - lr * (gW(o, i) + mom * vW1(o, i))
  b1(o) = bias(o) - lr * (gb(o) + mom * vb1(o))
}
""", full=dict(B=128, I=1024, O=1024), tiny=dict(B=3, I=4, O=2),
    pick=lambda r: np.concatenate([x.ravel() for x in r]),
    inputs=lambda r, s: [_n(r, s["B"], s["I"]), _n(r, s["B"], s["O"]) * 0.5, _w(r, s["O"], s["I"]),
                         _w(r, s["O"]) * 0.1, _w(r, s["O"], s["I"]) * 0.01, _w(r, s["O"]) * 0.01,
                         _h32_f32(0.1), _h32_f32(0.9), _h32_f32(5e-4)])
def _h32_mlp_sgd(torch, a, t, s):
    F = torch.nn.functional
    x, target, W, b, vW, vb = t[:6]
    lr, mom, wd = (float(v) for v in a[6:])

    def autograd():
        Wg, bg = W.clone().requires_grad_(), b.clone().requires_grad_()
        with torch.enable_grad():
            loss = F.mse_loss(F.relu(F.linear(x, Wg, bg)), target)
            gW, gb = torch.autograd.grad(loss, (Wg, bg))
        with torch.no_grad():
            gW = gW + wd * W
            vW1, vb1 = mom * vW + gW, mom * vb + gb
            return torch.cat([(W - lr * (gW + mom * vW1)).ravel(), b - lr * (gb + mom * vb1),
                              vW1.ravel(), vb1, loss.reshape(1)])

    def manual():
        h = F.relu(F.linear(x, W, b))
        loss = F.mse_loss(h, target)
        dz = torch.where(h > 0, 2 * (h - target) / h.numel(), 0.0)
        gW = dz.t() @ x + wd * W
        gb = dz.sum(0)
        vW1, vb1 = mom * vW + gW, mom * vb + gb
        return torch.cat([(W - lr * (gW + mom * vW1)).ravel(), b - lr * (gb + mom * vb1),
                          vW1.ravel(), vb1, loss.reshape(1)])
    return {"torch autograd.grad + SGD(nesterov) formulas": autograd,
            "torch manual backward + SGD(nesterov) formulas": _nograd(torch, manual)}


@program(name="gaussian naive bayes: per-class log-likelihood + log prior, log-softmax posterior, argmax class",
         kind="ml", src="""
def gnb_posterior(float(N,D) X, float(C,D) theta, float(C,D) var, float(C) prior) -> (logp, pred) {
  jll(n, c) +=! -0.5 * (log(2 * 3.14159265 * var(c, d)) + (X(n, d) - theta(c, d)) * (X(n, d) - theta(c, d)) / var(c, d))
  jll(n, c) = jll(n, c) + log(prior(c))
  mx(n) max=! jll(n, c)
  se(n) +=! exp(jll(n, c) - mx(n))
  logp(n, c) = jll(n, c) - mx(n) - log(se(n))
  pred(n) argmax=! jll(n, c)
}
""", full=dict(N=8192, D=64, C=20), tiny=dict(N=4, D=3, C=3),
    pick=lambda r: r[0],
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["C"], s["D"]) * 0.5,
                         r.uniform(0.5, 2.0, (s["C"], s["D"])).astype(np.float32),
                         (lambda p: (p / p.sum()).astype(np.float32))(r.uniform(0.5, 1.5, s["C"]))])
def _h32_gnb(torch, a, t, s):
    X, theta, var, prior = t

    def broadcast():
        jll = -0.5 * (torch.log(2 * torch.pi * var).sum(1)
                      + ((X[:, None, :] - theta) ** 2 / var).sum(2)) + torch.log(prior)
        return torch.log_softmax(jll, 1)

    def distributions():
        normal = torch.distributions.Normal(theta, var.sqrt())
        return torch.log_softmax(normal.log_prob(X[:, None, :]).sum(2) + torch.log(prior), 1)

    def expanded():  # sum of (x - t)^2 / v as three matmuls
        iv = 1 / var
        quad = (X * X) @ iv.t() - 2 * X @ (theta * iv).t() + (theta * theta * iv).sum(1)
        jll = -0.5 * (torch.log(2 * torch.pi * var).sum(1) + quad) + torch.log(prior)
        return torch.log_softmax(jll, 1)
    return {"torch broadcast (N,C,D) + log_softmax": _nograd(torch, broadcast),
            "torch.distributions.Normal.log_prob": _nograd(torch, distributions),
            "torch matmul expansion + log_softmax": _nograd(torch, expanded)}


@program(name="rbf-kernel svm decision function (one-vs-rest): exp(-gamma |x - sv|^2) to support vectors, dual coefs, intercepts",
         kind="ml", src="""
def svm_rbf_decision(float(N,D) X, float(M,D) SV, float(C,M) coef, float(C) icpt, float gamma) -> (dec) {
  xx(n) +=! X(n, d) * X(n, d)
  ss(m) +=! SV(m, d) * SV(m, d)
  xs(n, m) +=! X(n, d) * SV(m, d)
  kmat(n, m) = exp(-gamma * fmax(xx(n) + ss(m) - 2 * xs(n, m), 0.0))
  dec(n, c) +=! kmat(n, m) * coef(c, m)
  dec(n, c) = dec(n, c) + icpt(c)
}
""", full=dict(N=2048, M=2048, D=64, C=10), tiny=dict(N=3, M=4, D=3, C=2),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), _n(r, s["M"], s["D"]), _w(r, s["C"], s["M"]),
                         _w(r, s["C"]), _h32_f32(1.0 / s["D"])])
def _h32_svm_rbf(torch, a, t, s):
    F = torch.nn.functional
    X, SV, coef, icpt = t[:4]
    gamma = float(a[4])
    return {"torch.cdist^2 + exp + F.linear": _nograd(torch, lambda: F.linear(
        torch.exp(-gamma * torch.cdist(X, SV).pow(2)), coef, icpt))}


@program(name="supervised contrastive (supcon) loss: l2-normalised features, int32 labels, self excluded, temperature",
         kind="ml", src="""
def supcon_loss(float(N,D) f, int32(N) y, float tau) -> (loss) {
  nr(n) +=! f(n, d) * f(n, d)
  z(n, d) = f(n, d) / fmax(sqrt(nr(n)), 1e-12)
  sim(i, j) +=! z(i, d) * z(j, d)
  sim(i, j) = sim(i, j) / tau
  mx(i) max=! j != i ? sim(i, j) : -inf
  se(i) +=! j != i ? exp(sim(i, j) - mx(i)) : 0.0
  npos(i) +=! j != i && y(j) == y(i) ? 1.0 : 0.0
  sp(i) +=! j != i && y(j) == y(i) ? sim(i, j) : 0.0
  li(i) = npos(i) > 0 ? mx(i) + log(se(i)) - sp(i) / npos(i) : 0.0
  cnt +=! npos(i) > 0 ? 1.0 : 0.0
  tot +=! li(i)
  loss = tot / cnt
}
""", full=dict(N=2048, D=64), tiny=dict(N=5, D=3),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.integers(0, max(2, s["N"] // 64), s["N"]).astype(np.int32),
                         _h32_f32(0.1)])
def _h32_supcon(torch, a, t, s):
    F = torch.nn.functional
    f, y = t[0], t[1]
    tau = float(a[2])
    N = f.shape[0]

    def run():
        z = F.normalize(f, dim=1)
        sim = z @ z.t() / tau
        self_mask = torch.eye(N, dtype=torch.bool)
        logp = torch.log_softmax(sim.masked_fill(self_mask, float("-inf")), 1)
        pos = (y[:, None] == y[None, :]) & ~self_mask
        npos = pos.sum(1)
        mean_lp = torch.where(pos, logp, 0.0).sum(1) / npos.clamp(min=1)
        has = npos > 0
        return -(mean_lp[has]).mean()
    return {"torch normalize + masked log_softmax": _nograd(torch, run)}


@program(name="batch-hard triplet loss: hardest positive (max) / negative (min) per anchor from int32 labels, margin",
         kind="ml", src="""
def batch_hard_triplet(float(N,D) e, int32(N) y, float margin) -> (loss) {
  ee(n) +=! e(n, d) * e(n, d)
  g(i, j) +=! e(i, d) * e(j, d)
  dist(i, j) = sqrt(fmax(ee(i) + ee(j) - 2 * g(i, j), 1e-12))
  hp(i) max=! y(j) == y(i) && j != i ? dist(i, j) : -inf
  hn(i) min=! y(j) != y(i) ? dist(i, j) : inf
  loss +=! fmax(hp(i) - hn(i) + margin, 0.0) / N
}
""", full=dict(N=2048, D=64), tiny=dict(N=6, D=3),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.integers(0, max(2, s["N"] // 32), s["N"]).astype(np.int32),
                         _h32_f32(0.3)])
def _h32_batch_hard(torch, a, t, s):
    e, y = t[0], t[1]
    margin = float(a[2])
    N = e.shape[0]

    def run():
        dist = torch.cdist(e, e)
        same = y[:, None] == y[None, :]
        eye = torch.eye(N, dtype=torch.bool)
        hp = dist.masked_fill(~same | eye, float("-inf")).amax(1)
        hn = dist.masked_fill(same, float("inf")).amin(1)
        return torch.relu(hp - hn + margin).mean()
    return {"torch.cdist + masked amax/amin": _nograd(torch, run)}


@program(name="lasso by ista: S proximal-gradient steps (free) from zero, soft-threshold, objective per step",
         kind="ml", src="""
def lasso_ista(float(N,D) X, float(N) y, float lr, float lam) -> (w, obj) {
  w(d) = 0.0 where d in 0:D
  for it in S {
    r(n) +=! X(n, d) * w(d)
    r(n) = r(n) - y(n)
    obj(it) +=! 0.5 * r(n) * r(n) / N
    obj(it) += lam * fabs(w(d))
    g(d) +=! X(n, d) * r(n)
    u(d) = w(d) - lr * g(d) / N
    w(d) = u(d) > lr * lam ? u(d) - lr * lam : (u(d) < -lr * lam ? u(d) + lr * lam : 0.0)
  }
}
""", full=dict(N=8192, D=256, S=20), tiny=dict(N=5, D=4, S=3), free=("S",),
    pick=lambda r: np.concatenate([r[0], r[1]]),
    inputs=lambda r, s: _h32_lasso_data(r, s["N"], s["D"]) + [_h32_f32(0.3), _h32_f32(0.05)])
def _h32_lasso(torch, a, t, s):
    F = torch.nn.functional
    X, y = t[0], t[1]
    lr, lam, S = float(a[2]), float(a[3]), s["S"]
    N, D = X.shape

    def run():
        w, obj = torch.zeros(D), []
        for _ in range(S):
            r = X @ w - y
            obj.append(0.5 * r.pow(2).mean() + lam * w.abs().sum())
            w = F.softshrink(w - lr * (X.t() @ r) / N, lr * lam)
        return torch.cat([w, torch.stack(obj)])
    return {"torch matvec + F.softshrink loop": _nograd(torch, run)}


@program(name="logistic regression mini-batch sgd: epochs x batches nested for loops, rows through an int32 (E,NB,BS) permutation",
         kind="ml", src="""
def logreg_minibatch(float(N,D) X, float(N) y, int32(E,NB,BS) perm, float(D) w0, float lr) -> (w) {
  w(d) = w0(d)
  for ep in E {
    for m in NB {
      z(j) +=! X(perm(ep, m, j), d) * w(d)
      g(j) = sigmoid(z(j)) - y(perm(ep, m, j))
      gr(d) +=! X(perm(ep, m, j), d) * g(j)
      w(d) = w(d) - lr * gr(d) / BS
    }
  }
}
""", full=dict(N=8192, D=128, E=3, NB=64, BS=128), tiny=dict(N=6, D=3, E=2, NB=2, BS=3),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), (r.random(s["N"]) < 0.5).astype(np.float32),
                         np.stack([r.permutation(s["N"]).reshape(s["NB"], s["BS"]) for _ in range(s["E"])])
                         .astype(np.int32), _w(r, s["D"]), _h32_f32(0.1)])
def _h32_logreg_mb(torch, a, t, s):
    X, y, perm, w0 = t[:4]
    lr = float(a[4])
    E, NB, BS = perm.shape
    idx = perm.long()

    def run():
        w = w0.clone()
        for ep in range(E):
            for m in range(NB):
                bi = idx[ep, m]
                xb = X[bi]
                g = torch.sigmoid(xb @ w) - y[bi]
                w = w - lr * (xb.t() @ g) / BS
        return w
    return {"torch python loop over batches (index gather)": _nograd(torch, run)}
# ==== hunt 33: PDE solvers, stencils and image processing


def _h33_f32(x):
    return np.array(x, np.float32)


def _h33_replicate(torch, x, p):
    """x (..., H, W) padded by p on each side by repeating the border (F.pad replicate wants a batch dim)."""
    F = torch.nn.functional
    shape = x.shape
    return F.pad(x.reshape(-1, 1, *shape[-2:]), (p, p, p, p), mode="replicate").reshape(*shape[:-2], *(
        s + 2 * p for s in shape[-2:]))


def _h33_gauss2d(R, sigma):
    k = np.exp(-(np.arange(-R, R + 1) ** 2) / (2 * sigma * sigma))
    g = np.outer(k, k)
    return (g / g.sum()).astype(np.float32)


def _h33_warp_coords(r, N, H, W, OH, OW):
    """Integer corners (iy, ix) and fractions (fy, fx) of a smooth random warp of (H, W) images sampled on (OH, OW)."""
    ii, jj = np.meshgrid(np.linspace(0, H - 1, OH), np.linspace(0, W - 1, OW), indexing="ij")
    amp = r.uniform(0.5, 4.0, (N, 1, 1))
    ph = r.uniform(0, 6.3, (N, 2, 1, 1))
    sy = np.clip(ii + amp * np.sin(jj / 23.0 + ph[:, 0]), 0, H - 1)
    sx = np.clip(jj + amp * np.cos(ii / 17.0 + ph[:, 1]), 0, W - 1)
    iy = np.minimum(np.floor(sy), H - 2).astype(np.int32)
    ix = np.minimum(np.floor(sx), W - 2).astype(np.int32)
    return [iy, ix, (sy - iy).astype(np.float32), (sx - ix).astype(np.float32)]


@program(name="2-d heat equation, explicit euler, neumann borders by clamped indices (min/max), batch of fields, S steps (free)",
         kind="stencil", src="""
# u_t = alpha * laplacian(u); r = alpha dt / dx^2 (stable for r <= 1/4); zero-flux walls: a neighbour outside
# the grid is the border cell itself
def heat_neumann(float(B,H,W) u0, float r) -> (u) {
  u(b, i, j) = u0(b, i, j)
  for s in S {
    lap(b, i, j) = u(b, max(i - 1, 0), j) + u(b, min(i + 1, H - 1), j)
                 + u(b, i, max(j - 1, 0)) + u(b, i, min(j + 1, W - 1)) - 4 * u(b, i, j)
    u(b, i, j) = u(b, i, j) + r * lap(b, i, j)
  }
}
""", full=dict(B=4, H=256, W=256, S=30), tiny=dict(B=2, H=4, W=5, S=3), free=("S",),
    inputs=lambda r, s: [_n(r, s["B"], s["H"], s["W"]), _h33_f32(0.2)])
def _h33_heat_neumann(torch, a, t, s):
    F = torch.nn.functional
    u0, rr = t[0], float(a[1])
    lap = torch.tensor([[0, 1, 0], [1, -4, 1], [0, 1, 0]], dtype=torch.float32)[None, None]

    def conv():
        u = u0[:, None]
        for _ in range(s["S"]):
            u = u + rr * F.conv2d(F.pad(u, (1, 1, 1, 1), mode="replicate"), lap)
        return u[:, 0]

    def slices():
        u = u0
        for _ in range(s["S"]):
            p = _h33_replicate(torch, u, 1)
            u = u + rr * (p[:, :-2, 1:-1] + p[:, 2:, 1:-1] + p[:, 1:-1, :-2] + p[:, 1:-1, 2:] - 4 * u)
        return u
    return {"torch F.pad(replicate) + F.conv2d laplacian loop": _nograd(torch, conv),
            "torch F.pad(replicate) + slices loop": _nograd(torch, slices)}


@program(name="1-d wave equation on a batch of strings, leapfrog from two previous states, fixed ends, history (T free)",
         kind="stencil", src="""
# u(t+1) = 2 u(t) - u(t-1) + c2 * (u(t, i-1) - 2 u(t, i) + u(t, i+1)), c2 = (c dt / dx)^2; the first step from the
# initial velocity by Taylor; both ends held at 0
def wave1d(float(B,N) u0, float(B,N) v0, float c2, float dt) -> (u) {
  for t in T {
    if t == 0 {
      u(t, b, i) = u0(b, i)
    } else if t == 1 {
      u(t, b, i) = i > 0 && i < N - 1 ? u0(b, i) + dt * v0(b, i) + 0.5 * c2 * (u0(b, i - 1) - 2 * u0(b, i) + u0(b, i + 1))
                                      : 0.0 where i in 0:N
    } else {
      u(t, b, i) = i > 0 && i < N - 1
        ? 2 * u(t - 1, b, i) - u(t - 2, b, i) + c2 * (u(t - 1, b, i - 1) - 2 * u(t - 1, b, i) + u(t - 1, b, i + 1))
        : 0.0 where i in 0:N
    }
  }
}
""", full=dict(B=32, N=1024, T=256), tiny=dict(B=2, N=6, T=5), free=("T",),
    inputs=lambda r, s: [_n(r, s["B"], s["N"]), _n(r, s["B"], s["N"]) * 0.1, _h33_f32(0.36), _h33_f32(0.05)])
def _h33_wave1d(torch, a, t, s):
    u0, v0 = t[0], t[1]
    c2, dt, T = float(a[2]), float(a[3]), s["T"]
    B, N = u0.shape

    def run():
        u = torch.zeros(T, B, N)
        u[0] = u0
        u[1, :, 1:-1] = u0[:, 1:-1] + dt * v0[:, 1:-1] + 0.5 * c2 * (u0[:, :-2] - 2 * u0[:, 1:-1] + u0[:, 2:])
        for k in range(2, T):
            p, q = u[k - 1], u[k - 2]
            u[k, :, 1:-1] = 2 * p[:, 1:-1] - q[:, 1:-1] + c2 * (p[:, :-2] - 2 * p[:, 1:-1] + p[:, 2:])
        return u
    return {"torch slice-assign loop into a preallocated history": _nograd(torch, run)}


@program(name="jacobi iteration for poisson -lap u = f, zero dirichlet ghosts as selects, squared update norm per sweep",
         kind="stencil", src="""
# u(i,j) <- (u(i-1,j) + u(i+1,j) + u(i,j-1) + u(i,j+1) + h^2 f(i,j)) / 4, the cells outside the grid are 0;
# delta(it) = |u_new - u_old|^2 to watch convergence
def jacobi_poisson(float(N,M) f, float h2) -> (u, delta) {
  u(i, j) = 0.0 where i in 0:N, j in 0:M
  for it in I {
    v(i, j) = 0.25 * ((i > 0 ? u(i - 1, j) : 0.0) + (i < N - 1 ? u(i + 1, j) : 0.0)
                    + (j > 0 ? u(i, j - 1) : 0.0) + (j < M - 1 ? u(i, j + 1) : 0.0) + h2 * f(i, j))
              where i in 0:N, j in 0:M
    delta(it) +=! (v(i, j) - u(i, j)) * (v(i, j) - u(i, j))
    u(i, j) = v(i, j)
  }
}
""", full=dict(N=384, M=384, I=30), tiny=dict(N=4, M=5, I=3), free=("I",),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1]]),
    inputs=lambda r, s: [_n(r, s["N"], s["M"]), _h33_f32(1.0 / (s["N"] + 1) ** 2 * 100)])
def _h33_jacobi_poisson(torch, a, t, s):
    F = torch.nn.functional
    f, h2 = t[0], float(a[1])
    k = torch.tensor([[0, 0.25, 0], [0.25, 0, 0.25], [0, 0.25, 0]], dtype=torch.float32)[None, None]

    def run():
        rhs = 0.25 * h2 * f
        u, deltas = torch.zeros_like(f), []
        for _ in range(s["I"]):
            v = F.conv2d(u[None, None], k, padding=1)[0, 0] + rhs
            deltas.append((v - u).pow(2).sum())
            u = v
        return torch.cat([u.ravel(), torch.stack(deltas)])
    return {"torch F.conv2d(padding=1) sweep loop": _nograd(torch, run)}


@program(name="game of life on a torus, float 0/1 cells, 3x3 window sum with (i + di - 1 + H) % H wrap, batch, S steps (free)",
         kind="stencil", src="""
# neighbours = the 3x3 window sum minus the cell; wrap-around borders by remainders
def life_torus(float(B,H,W) g0) -> (g) {
  g(b, i, j) = g0(b, i, j)
  for s in S {
    nb(b, i, j) +=! g(b, (i + di + H - 1) % H, (j + dj + W - 1) % W) where i in 0:H, j in 0:W, di in 0:3, dj in 0:3
    nb(b, i, j) = nb(b, i, j) - g(b, i, j)
    g(b, i, j) = nb(b, i, j) == 3 || (g(b, i, j) == 1 && nb(b, i, j) == 2) ? 1.0 : 0.0
  }
}
""", full=dict(B=8, H=256, W=256, S=20), tiny=dict(B=2, H=5, W=6, S=4), free=("S",),
    inputs=lambda r, s: [(r.random((s["B"], s["H"], s["W"])) < 0.35).astype(np.float32)])
def _h33_life_torus(torch, a, t, s):
    F = torch.nn.functional
    g0 = t[0]
    ring = torch.ones(1, 1, 3, 3)
    ring[0, 0, 1, 1] = 0

    def conv():
        g = g0[:, None]
        for _ in range(s["S"]):
            nb = F.conv2d(F.pad(g, (1, 1, 1, 1), mode="circular"), ring)
            g = ((nb == 3) | ((g == 1) & (nb == 2))).float()
        return g[:, 0]

    def rolls():
        g = g0
        for _ in range(s["S"]):
            nb = sum(torch.roll(g, (di, dj), (1, 2)) for di in (-1, 0, 1) for dj in (-1, 0, 1) if di or dj)
            g = ((nb == 3) | ((g == 1) & (nb == 2))).float()
        return g
    return {"torch F.pad(circular) + F.conv2d loop": _nograd(torch, conv),
            "torch.roll x8 loop": _nograd(torch, rolls)}


@program(name="2-d first-order upwind advection, cell velocities (vx, vy), upwind side picked by sign selects, zero-gradient walls",
         kind="stencil", src="""
# q_t + vx q_x + vy q_y = 0; the one-sided difference is taken on the side the flow comes from; at a wall the
# missing difference is 0 (outflow / zero-gradient)
def upwind2d(float(H,W) q0, float(H,W) vx, float(H,W) vy, float dt) -> (q) {
  q(i, j) = q0(i, j)
  for s in S {
    fx(i, j) = vx(i, j) > 0 ? vx(i, j) * (j > 0 ? q(i, j) - q(i, j - 1) : 0.0)
                            : vx(i, j) * (j < W - 1 ? q(i, j + 1) - q(i, j) : 0.0) where j in 0:W
    fy(i, j) = vy(i, j) > 0 ? vy(i, j) * (i > 0 ? q(i, j) - q(i - 1, j) : 0.0)
                            : vy(i, j) * (i < H - 1 ? q(i + 1, j) - q(i, j) : 0.0) where i in 0:H
    q(i, j) = q(i, j) - dt * (fx(i, j) + fy(i, j))
  }
}
""", full=dict(H=512, W=512, S=20), tiny=dict(H=5, W=6, S=3), free=("S",),
    inputs=lambda r, s: [_n(r, s["H"], s["W"]), r.uniform(-1, 1, (s["H"], s["W"])).astype(np.float32),
                         r.uniform(-1, 1, (s["H"], s["W"])).astype(np.float32), _h33_f32(0.4)])
def _h33_upwind2d(torch, a, t, s):
    q0, vx, vy, dt = t[0], t[1], t[2], float(a[3])
    px, py = vx > 0, vy > 0

    def run():
        q = q0
        for _ in range(s["S"]):
            p = _h33_replicate(torch, q, 1)
            c = p[1:-1, 1:-1]
            fx = vx * torch.where(px, c - p[1:-1, :-2], p[1:-1, 2:] - c)
            fy = vy * torch.where(py, c - p[:-2, 1:-1], p[2:, 1:-1] - c)
            q = q - dt * (fx + fy)
        return q
    return {"torch replicate pad + torch.where upwind loop": _nograd(torch, run)}


@program(name="gray-scott reaction-diffusion, 3x3 laplacian taps as an input, replicate borders by clamped indices, U and V out",
         kind="stencil", src="""
# Karl Sims' formulation: laplacian = 3x3 window weighted by lapk (0.05 corners, 0.2 sides, -1 centre), dt = 1
def gray_scott_lapk(float(B,H,W) U0, float(B,H,W) V0, float(3,3) lapk, float du, float dv, float feed, float kill)
    -> (U, V) {
  U(b, i, j) = U0(b, i, j)
  V(b, i, j) = V0(b, i, j)
  for s in S {
    lu(b, i, j) +=! lapk(di, dj) * U(b, min(max(i + di - 1, 0), H - 1), min(max(j + dj - 1, 0), W - 1))
      where i in 0:H, j in 0:W
    lv(b, i, j) +=! lapk(di, dj) * V(b, min(max(i + di - 1, 0), H - 1), min(max(j + dj - 1, 0), W - 1))
      where i in 0:H, j in 0:W
    uvv(b, i, j) = U(b, i, j) * V(b, i, j) * V(b, i, j)
    U(b, i, j) = U(b, i, j) + du * lu(b, i, j) - uvv(b, i, j) + feed * (1 - U(b, i, j))
    V(b, i, j) = V(b, i, j) + dv * lv(b, i, j) + uvv(b, i, j) - (feed + kill) * V(b, i, j)
  }
}
""", full=dict(B=2, H=256, W=256, S=25), tiny=dict(B=1, H=4, W=5, S=3), free=("S",),
    pick=lambda r: np.stack(r),
    inputs=lambda r, s: [r.uniform(0.5, 1.0, (s["B"], s["H"], s["W"])).astype(np.float32),
                         r.uniform(0.0, 0.3, (s["B"], s["H"], s["W"])).astype(np.float32),
                         np.array([[0.05, 0.2, 0.05], [0.2, -1.0, 0.2], [0.05, 0.2, 0.05]], np.float32),
                         _h33_f32(1.0), _h33_f32(0.5), _h33_f32(0.055), _h33_f32(0.062)])
def _h33_gray_scott(torch, a, t, s):
    F = torch.nn.functional
    U0, V0, lapk = t[0], t[1], t[2]
    du, dv, feed, kill = (float(v) for v in a[3:])
    B = U0.shape[0]
    w = lapk[None, None].repeat(2 * B, 1, 1, 1)

    def run():
        U, V = U0, V0
        for _ in range(s["S"]):
            L = F.conv2d(F.pad(torch.cat([U, V])[None], (1, 1, 1, 1), mode="replicate"), w, groups=2 * B)[0]
            uvv = U * V * V
            U, V = U + du * L[:B] - uvv + feed * (1 - U), V + dv * L[B:] + uvv - (feed + kill) * V
        return torch.stack([U, V])
    return {"torch replicate pad + grouped F.conv2d loop": _nograd(torch, run)}


@program(name="separable gaussian blur of channels-last (N,H,W,C) images, taps from sigma in-program, radius R (free), replicate borders",
         kind="vision", src="""
def gauss_blur_nhwc(float(N,H,W,C) x, float sigma) -> (y) {
  g(k) = exp(-(k - R) * (k - R) / (2 * sigma * sigma)) where k in 0:2*R+1
  gs +=! g(k)
  tmp(n, i, j, c) +=! g(k) * x(n, min(max(i + k - R, 0), H - 1), j, c) where i in 0:H
  y(n, i, j, c) +=! g(k) * tmp(n, i, min(max(j + k - R, 0), W - 1), c) where j in 0:W
  y(n, i, j, c) = y(n, i, j, c) / (gs * gs)
}
""", full=dict(N=8, H=256, W=256, C=3, R=3), tiny=dict(N=2, H=5, W=6, C=3, R=2), free=("R",),
    inputs=lambda r, s: [r.random((s["N"], s["H"], s["W"], s["C"]), np.float32), _h33_f32(1.5)])
def _h33_gauss_nhwc(torch, a, t, s):
    F = torch.nn.functional
    x, sigma, R = t[0], float(a[1]), s["R"]
    C = x.shape[3]
    k = torch.exp(-torch.arange(-R, R + 1, dtype=torch.float32) ** 2 / (2 * sigma * sigma))
    k = k / k.sum()
    kh, kw = k.view(1, 1, -1, 1).repeat(C, 1, 1, 1), k.view(1, 1, 1, -1).repeat(C, 1, 1, 1)

    def run():
        xc = F.pad(x.permute(0, 3, 1, 2), (R, R, R, R), mode="replicate")
        return F.conv2d(F.conv2d(xc, kh, groups=C), kw, groups=C).permute(0, 2, 3, 1)
    return {"torch replicate pad + two depthwise F.conv2d (NCHW permute)": _nograd(torch, run)}


@program(name="sobel gradient magnitude of rgb images: luma, zero-padded copy, 6-tap gx/gy, normalised by per-image max",
         kind="vision", src="""
def sobel_luma(float(N,3,H,W) img) -> (edge) {
  luma(n, i, j) = 0.299 * img(n, 0, i, j) + 0.587 * img(n, 1, i, j) + 0.114 * img(n, 2, i, j)
  p(n, i, j) = i >= 1 && i <= H && j >= 1 && j <= W ? luma(n, i - 1, j - 1) : 0.0 where i in 0:H+2, j in 0:W+2
  gx(n, i, j) = p(n, i, j + 2) + 2 * p(n, i + 1, j + 2) + p(n, i + 2, j + 2)
              - p(n, i, j) - 2 * p(n, i + 1, j) - p(n, i + 2, j)
  gy(n, i, j) = p(n, i + 2, j) + 2 * p(n, i + 2, j + 1) + p(n, i + 2, j + 2)
              - p(n, i, j) - 2 * p(n, i, j + 1) - p(n, i, j + 2)
  mag(n, i, j) = sqrt(gx(n, i, j) * gx(n, i, j) + gy(n, i, j) * gy(n, i, j))
  mx(n) max=! mag(n, i, j)
  edge(n, i, j) = mag(n, i, j) / mx(n)
}
""", full=dict(N=4, H=512, W=512), tiny=dict(N=2, H=4, W=5),
    inputs=lambda r, s: [r.random((s["N"], 3, s["H"], s["W"]), np.float32)])
def _h33_sobel_luma(torch, a, t, s):
    F = torch.nn.functional
    img = t[0]
    luma_w = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
    sx = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]])
    sob = torch.stack([sx, sx.t()])[:, None]

    def run():
        g = F.conv2d(F.conv2d(img, luma_w), sob, padding=1)
        mag = torch.hypot(g[:, 0], g[:, 1])
        return mag / mag.amax((1, 2), keepdim=True)
    return {"torch 1x1 F.conv2d luma + F.conv2d sobel pair + hypot": _nograd(torch, run)}


@program(name="morphological white top-hat x - open(x), square (2R+1)^2 window (free R), erosion min=! then dilation max=!, +-inf borders",
         kind="vision", src="""
def white_tophat(float(N,C,H,W) x) -> (th) {
  er(n, c, i, j) min=! i + a - R >= 0 && i + a - R < H && j + b - R >= 0 && j + b - R < W
                         ? x(n, c, i + a - R, j + b - R) : inf
                         where i in 0:H, j in 0:W, a in 0:2*R+1, b in 0:2*R+1
  op(n, c, i, j) max=! i + a - R >= 0 && i + a - R < H && j + b - R >= 0 && j + b - R < W
                         ? er(n, c, i + a - R, j + b - R) : -inf
                         where i in 0:H, j in 0:W, a in 0:2*R+1, b in 0:2*R+1
  th(n, c, i, j) = x(n, c, i, j) - op(n, c, i, j)
}
""", full=dict(N=4, C=3, H=256, W=256, R=2), tiny=dict(N=1, C=2, H=5, W=6, R=1), free=("R",),
    inputs=lambda r, s: [r.random((s["N"], s["C"], s["H"], s["W"]), np.float32)])
def _h33_tophat(torch, a, t, s):
    F = torch.nn.functional
    x, R = t[0], s["R"]
    K = 2 * R + 1

    def run():
        opened = F.max_pool2d(-F.max_pool2d(-x, K, 1, R), K, 1, R)
        return x - opened
    return {"torch F.max_pool2d(-x) erosion + F.max_pool2d dilation": _nograd(torch, run)}


@program(name="9x9 box mean via an integral image: row scan in a for loop, column running sum in place, clipped border windows",
         kind="vision", src="""
# mean over the part of the 9x9 window inside the image (avg_pool2d with count_include_pad=False)
def box_mean_integral(float(N,H,W) x) -> (y) {
  for j in W {
    if j == 0 { ii(n, i, j) = x(n, i, j) }
    else      { ii(n, i, j) = ii(n, i, j - 1) + x(n, i, j) }
  }
  ii(n, i, j) = ii(n, i, j) + (i > 0 ? ii(n, i - 1, j) : 0.0)
  y(n, i, j) = (ii(n, min(i + 4, H - 1), min(j + 4, W - 1))
              - (i >= 5 ? ii(n, i - 5, min(j + 4, W - 1)) : 0.0)
              - (j >= 5 ? ii(n, min(i + 4, H - 1), j - 5) : 0.0)
              + (i >= 5 && j >= 5 ? ii(n, i - 5, j - 5) : 0.0))
              / ((min(i + 4, H - 1) - max(i - 4, 0) + 1) * (min(j + 4, W - 1) - max(j - 4, 0) + 1))
              where i in 0:H, j in 0:W
}
""", full=dict(N=4, H=512, W=512), tiny=dict(N=2, H=7, W=12),
    inputs=lambda r, s: [_n(r, s["N"], s["H"], s["W"])])
def _h33_box_integral(torch, a, t, s):
    F = torch.nn.functional
    x = t[0]
    N, H, W = x.shape
    hi_i, lo_i = (torch.arange(H) + 4).clamp(max=H - 1) + 1, (torch.arange(H) - 4).clamp(min=0)
    hi_j, lo_j = (torch.arange(W) + 4).clamp(max=W - 1) + 1, (torch.arange(W) - 4).clamp(min=0)
    cnt = ((hi_i - lo_i)[:, None] * (hi_j - lo_j)[None, :]).float()

    def cumsums():
        S = F.pad(x.cumsum(1).cumsum(2), (1, 0, 1, 0))
        Sh, Sl = S[:, hi_i], S[:, lo_i]
        return (Sh[:, :, hi_j] - Sl[:, :, hi_j] - Sh[:, :, lo_j] + Sl[:, :, lo_j]) / cnt
    return {"torch.cumsum x2 + index differences": _nograd(torch, cumsums),
            "torch F.avg_pool2d(9, count_include_pad=False)": _nograd(torch, lambda: F.avg_pool2d(
                x[:, None], 9, 1, 4, count_include_pad=False)[:, 0])}


@program(name="bilinear image warp from precomputed int32 corner coordinates (iy, ix) and fractions (fy, fx), NCHW gather",
         kind="vision", src="""
def warp_bilinear(float(N,C,H,W) img, int32(N,OH,OW) iy, int32(N,OH,OW) ix, float(N,OH,OW) fy, float(N,OH,OW) fx)
    -> (out) {
  out(n, c, i, j) = (1 - fy(n, i, j)) * ((1 - fx(n, i, j)) * img(n, c, iy(n, i, j), ix(n, i, j))
                                         + fx(n, i, j) * img(n, c, iy(n, i, j), ix(n, i, j) + 1))
                  + fy(n, i, j) * ((1 - fx(n, i, j)) * img(n, c, iy(n, i, j) + 1, ix(n, i, j))
                                   + fx(n, i, j) * img(n, c, iy(n, i, j) + 1, ix(n, i, j) + 1))
}
""", full=dict(N=4, C=3, H=512, W=512, OH=512, OW=512), tiny=dict(N=2, C=2, H=5, W=6, OH=4, OW=3),
    inputs=lambda r, s: [r.random((s["N"], s["C"], s["H"], s["W"]), np.float32)]
    + _h33_warp_coords(r, s["N"], s["H"], s["W"], s["OH"], s["OW"]))
def _h33_warp(torch, a, t, s):
    F = torch.nn.functional
    img, iy, ix, fy, fx = t
    N, C, H, W = img.shape
    _, OH, OW = iy.shape

    def gather():
        flat = img.reshape(N, C, H * W)
        base = (iy.long() * W + ix.long()).reshape(N, 1, -1).expand(N, C, -1)

        def at(off):
            return flat.gather(2, base + off).view(N, C, OH, OW)
        wy, wx = fy[:, None], fx[:, None]
        return (1 - wy) * ((1 - wx) * at(0) + wx * at(1)) + wy * ((1 - wx) * at(W) + wx * at(W + 1))

    def grid_sample():
        gx = (ix + fx) * (2.0 / (W - 1)) - 1
        gy = (iy + fy) * (2.0 / (H - 1)) - 1
        return F.grid_sample(img, torch.stack([gx, gy], -1), mode="bilinear", padding_mode="border",
                             align_corners=True)
    return {"torch gather of 4 corners + lerp": _nograd(torch, gather),
            "torch F.grid_sample(align_corners=True)": _nograd(torch, grid_sample)}


@program(name="histogram equalisation of int32 grey levels: one-hot histogram, cdf scan, first non-empty bin, lut lookup (L free)",
         kind="vision", src="""
# out = (cdf(level) - cdf_min) / (H*W - cdf_min) in [0, 1], as skimage-style continuous equalisation
def hist_equalize(int32(N,H,W) lev) -> (out) {
  hist(n, k) +=! lev(n, i, j) == k ? 1.0 : 0.0 where k in 0:L
  cdf(n, k) = hist(n, k)
  cdf(n, k) = cdf(n, k) + (k > 0 ? cdf(n, k - 1) : 0.0)
  cmin(n) min=! hist(n, k) > 0 ? cdf(n, k) : inf
  lut(n, k) = (cdf(n, k) - cmin(n)) / (H * W - cmin(n))
  out(n, i, j) = lut(n, lev(n, i, j))
}
""", full=dict(N=8, H=128, W=128, L=256), tiny=dict(N=2, H=4, W=5, L=8), free=("L",),
    inputs=lambda r, s: [np.clip(r.normal(0.35 * s["L"], 0.08 * s["L"] + 1, (s["N"], s["H"], s["W"])), 0,
                                 s["L"] - 1).astype(np.int32)])
def _h33_histeq(torch, a, t, s):
    lev = t[0]
    N, H, W = lev.shape
    L = s["L"]

    def run():
        flat = lev.reshape(N, -1).long()
        hist = torch.bincount((flat + L * torch.arange(N)[:, None]).ravel(), minlength=N * L).view(N, L).float()
        cdf = hist.cumsum(1)
        cmin = torch.where(hist > 0, cdf, float("inf")).amin(1, keepdim=True)
        lut = (cdf - cmin) / (H * W - cmin)
        return lut.gather(1, flat).view(N, H, W)
    return {"torch.bincount (offset per image) + cumsum + gather": _nograd(torch, run)}


@program(name="unsharp mask: (2R+1)^2 gaussian taps as an input (size expression), zero-padded blur by selects, amount, clamp to [0,1]",
         kind="vision", src="""
def unsharp_mask(float(N,C,H,W) x, float(2*R+1, 2*R+1) g, float amount) -> (y) {
  blur(n, c, i, j) +=! g(a, b) * (i + a - R >= 0 && i + a - R < H && j + b - R >= 0 && j + b - R < W
                                  ? x(n, c, i + a - R, j + b - R) : 0.0)
                       where i in 0:H, j in 0:W, a in 0:2*R+1, b in 0:2*R+1
  y(n, c, i, j) = fmin(fmax(x(n, c, i, j) + amount * (x(n, c, i, j) - blur(n, c, i, j)), 0.0), 1.0)
}
""", full=dict(N=4, C=3, H=256, W=256, R=2), tiny=dict(N=1, C=2, H=5, W=6, R=1),
    inputs=lambda r, s: [r.random((s["N"], s["C"], s["H"], s["W"]), np.float32), _h33_gauss2d(s["R"], 1.0),
                         _h33_f32(0.8)])
def _h33_unsharp(torch, a, t, s):
    F = torch.nn.functional
    x, g, amount = t[0], t[1], float(a[2])
    N, C, H, W = x.shape
    R = g.shape[0] // 2

    def run():
        blur = F.conv2d(x.reshape(N * C, 1, H, W), g[None, None], padding=R).view(N, C, H, W)
        return (x + amount * (x - blur)).clamp(0, 1)
    return {"torch depthwise F.conv2d(padding=R) + clamp": _nograd(torch, run)}


@program(name="perona-malik anisotropic diffusion, exp(-(d/kappa)^2) conductance on 4 one-sided differences, zero-flux walls, S steps",
         kind="vision", src="""
def perona_malik(float(N,H,W) img, float kappa, float lam) -> (u) {
  for s in S {
    if s == 0 { u(n, i, j) = img(n, i, j) }
    dn(n, i, j) = i > 0 ? u(n, i - 1, j) - u(n, i, j) : 0.0 where i in 0:H
    ds(n, i, j) = i < H - 1 ? u(n, i + 1, j) - u(n, i, j) : 0.0 where i in 0:H
    de(n, i, j) = j < W - 1 ? u(n, i, j + 1) - u(n, i, j) : 0.0 where j in 0:W
    dw(n, i, j) = j > 0 ? u(n, i, j - 1) - u(n, i, j) : 0.0 where j in 0:W
    u(n, i, j) = u(n, i, j) + lam * (exp(-(dn(n, i, j) / kappa) * (dn(n, i, j) / kappa)) * dn(n, i, j)
                                   + exp(-(ds(n, i, j) / kappa) * (ds(n, i, j) / kappa)) * ds(n, i, j)
                                   + exp(-(de(n, i, j) / kappa) * (de(n, i, j) / kappa)) * de(n, i, j)
                                   + exp(-(dw(n, i, j) / kappa) * (dw(n, i, j) / kappa)) * dw(n, i, j))
  }
}
""", full=dict(N=4, H=256, W=256, S=10), tiny=dict(N=2, H=4, W=5, S=3), free=("S",),
    inputs=lambda r, s: [r.random((s["N"], s["H"], s["W"]), np.float32), _h33_f32(0.1), _h33_f32(0.2)])
def _h33_perona_malik(torch, a, t, s):
    img, kappa, lam = t[0], float(a[1]), float(a[2])

    def run():
        u = img
        for _ in range(s["S"]):
            p = _h33_replicate(torch, u, 1)
            d = torch.stack([p[:, :-2, 1:-1], p[:, 2:, 1:-1], p[:, 1:-1, 2:], p[:, 1:-1, :-2]]) - u
            u = u + lam * (torch.exp(-(d / kappa).square()) * d).sum(0)
        return u
    return {"torch replicate pad + stacked differences loop": _nograd(torch, run)}
# ==== hunt 34: sequence decoding, dynamic programming and attention variants


def _h34_flat(*outs):
    """Several outputs (float or int) as one float64 vector, the runner compares one array."""
    return np.concatenate([np.asarray(o.detach().numpy() if hasattr(o, "detach") else o, np.float64).ravel()
                           for o in outs])


def _h34_logsm(rng, *shape):
    z = rng.standard_normal(shape).astype(np.float64)
    return (z - np.log(np.exp(z).sum(axis=-1, keepdims=True))).astype(np.float32)


@program(name="hmm forward log-space over padded discrete sequences: int32 symbols (B,T) gathered from logB(S,V), "
              "int32 lengths, one rolling alpha", kind="sequence", src="""
# alpha has no time dimension: it is overwritten at every step, and kept as it is once t passes the length
def hmm_forward_symbols(int32(B,T) obs, int32(B) len, float(S,S) logA, float(S,V) logB, float(S) logpi)
    -> (loglik) {
  for t in T {
    if t == 0 {
      alpha(b, j) = logpi(j) + logB(j, obs(b, 0))
    } else {
      m(b, j) max=! alpha(b, i) + logA(i, j)
      e(b, j) +=! exp(alpha(b, i) + logA(i, j) - m(b, j))
      alpha(b, j) = t < len(b) ? m(b, j) + log(e(b, j)) + logB(j, obs(b, t)) : alpha(b, j)
    }
  }
  mx(b) max=! alpha(b, j)
  z(b) +=! exp(alpha(b, j) - mx(b))
  loglik(b) = mx(b) + log(z(b))
}
""", full=dict(B=64, T=200, S=32, V=100), tiny=dict(B=3, T=5, S=3, V=4),
    inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["T"])).astype(np.int32),
                         r.integers(1, s["T"] + 1, s["B"]).astype(np.int32),
                         _h34_logsm(r, s["S"], s["S"]), _h34_logsm(r, s["S"], s["V"]), _h34_logsm(r, s["S"])])
def _h34_hmm_symbols(torch, a, t, s):
    obs, lens, logA, logB, logpi = t
    T = s["T"]
    em = logB.t()[obs.long()]            # (B, T, S): emission log-probs of each observed symbol
    ln = lens.long()[:, None]

    def run():
        alpha = logpi + em[:, 0]
        for step in range(1, T):
            nxt = torch.logsumexp(alpha[:, :, None] + logA, dim=1) + em[:, step]
            alpha = torch.where(step < ln, nxt, alpha)
        return torch.logsumexp(alpha, dim=1)
    return {"torch loop (logsumexp, where on lengths)": _nograd(torch, run)}


@program(name="ctc loss over a padded batch: int32 input and target lengths, alpha frozen past the input length, "
              "where-bound predecessors", kind="sequence", src="""
# blank 0; ext is the blank-extended label sequence; -1e30 is log 0. prev is alpha before the step, so that
# the update does not read the values it has just written
def ctc_loss_padded(float(T,B,V) logp, int32(B,L) labels, int32(B) ilen, int32(B) tlen) -> (loss) {
  ext(b, s) = s % 2 == 1 ? labels(b, (s - 1) / 2) : 0 where s in 0:2*L+1
  for t in T {
    if t == 0 {
      alpha(b, s) = s < 2 ? logp(0, b, ext(b, s)) : -1e30 where s in 0:2*L+1
    } else {
      prev(b, s) = alpha(b, s)
      alpha(b, s) = t < ilen(b) ? mx + log(exp(a1 - mx) + exp(a2 - mx) + exp(a3 - mx)) + logp(t, b, ext(b, s)) : a1
        where s in 0:2*L+1, a1 = prev(b, s), a2 = s >= 1 ? prev(b, s - 1) : -1e30,
              a3 = s >= 2 && ext(b, s) != 0 && ext(b, s) != ext(b, s - 2) ? prev(b, s - 2) : -1e30,
              mx = max(a1, max(a2, a3))
    }
  }
  la(b) = alpha(b, 2 * tlen(b))
  lb(b) = alpha(b, 2 * tlen(b) - 1)
  loss(b) = -(max(la(b), lb(b)) + log(exp(la(b) - max(la(b), lb(b))) + exp(lb(b) - max(la(b), lb(b)))))
}
""", full=dict(T=250, B=32, V=50, L=60), tiny=dict(T=9, B=3, V=5, L=3),
    inputs=lambda r, s: [_h34_logsm(r, s["T"], s["B"], s["V"]),
                         r.integers(1, s["V"], (s["B"], s["L"])).astype(np.int32),
                         r.integers(2 * s["L"] + 1, s["T"] + 1, s["B"]).astype(np.int32),
                         r.integers(1, s["L"] + 1, s["B"]).astype(np.int32)])
def _h34_ctc_padded(torch, a, t, s):
    F = torch.nn.functional
    logp, labels, ilen, tlen = t
    targets, il, tl = labels.long(), ilen.long(), tlen.long()
    return {"F.ctc_loss (lengths, reduction none)": _nograd(torch, lambda: F.ctc_loss(
        logp, targets, il, tl, blank=0, reduction="none"))}


@program(name="soft-dtw (soft-min of three predecessors, gamma scalar), wavefront loop over anti-diagonals, "
              "R stored diagonal-major (N+M-1, B, N)", kind="timeseries", src="""
# cell (i, j) of the DP lives at R(i + j, b, i); cells off the grid are 1e10 (infinity), R(-1, -1) = 0
def soft_dtw_diag(float(B,N,F) x, float(B,M,F) y, float gamma) -> (sdtw) {
  D(b, i, j) +=! (x(b, i, f) - y(b, j, f)) * (x(b, i, f) - y(b, j, f))
  for d in N + M - 1 {
    if d == 0 {
      R(d, b, i) = i == 0 ? D(b, 0, 0) : 1e10 where b in 0:B, i in 0:N
    } else {
      r0(b, i) = i >= 1 && d >= 2 ? R(d - 2, b, i - 1) : 1e10 where b in 0:B, i in 0:N
      r1(b, i) = i >= 1 ? R(d - 1, b, i - 1) : 1e10 where b in 0:B, i in 0:N
      r2(b, i) = R(d - 1, b, i)
      mn(b, i) = min(r0(b, i), min(r1(b, i), r2(b, i)))
      sm(b, i) = mn(b, i) - gamma * log(exp((mn(b, i) - r0(b, i)) / gamma) + exp((mn(b, i) - r1(b, i)) / gamma)
                                        + exp((mn(b, i) - r2(b, i)) / gamma))
      R(d, b, i) = d - i >= 0 && d - i < M ? D(b, i, d - i) + sm(b, i) : 1e10 where i in 0:N
    }
  }
  sdtw(b) = R(N + M - 2, b, N - 1)
}
""", full=dict(B=32, N=100, M=100, F=16), tiny=dict(B=2, N=4, M=5, F=3),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["F"]) * 0.5, _n(r, s["B"], s["M"], s["F"]) * 0.5,
                         np.array(0.1, np.float32)])
def _h34_soft_dtw(torch, a, t, s):
    x, y = t[0], t[1]
    gamma = float(a[2])
    B, N, M = s["B"], s["N"], s["M"]
    diags = []
    for d in range(N + M - 1):
        i = torch.arange(max(0, d - M + 1), min(N, d + 1))
        diags.append((i, d - i))

    def run():
        D = (x[:, :, None, :] - y[:, None, :, :]).pow(2).sum(-1)
        R = torch.full((B, N + 1, M + 1), float("inf"))
        R[:, 0, 0] = 0
        for i, j in diags:
            r = torch.stack([R[:, i, j], R[:, i, j + 1], R[:, i + 1, j]])
            R[:, i + 1, j + 1] = D[:, i, j] - gamma * torch.logsumexp(-r / gamma, dim=0)
        return R[:, N, M]
    return {"torch anti-diagonal loop (logsumexp soft-min)": _nograd(torch, run)}


@program(name="beam-search step, top-K of beam x vocab by K rounds of max below the previous max, "
              "flat index k * V + v by a first-equal min=!, beam = f / V, token = f % V", kind="llm", src="""
def beam_topk_rounds(float(B,K,V) logits, float(B,K) score) -> (top, beam, token) {
  mx(b, k) max=! logits(b, k, v)
  se(b, k) +=! exp(logits(b, k, v) - mx(b, k))
  cand(b, k, v) = score(b, k) + logits(b, k, v) - mx(b, k) - log(se(b, k))
  for r in K {
    if r == 0 { top(b, r) max=! cand(b, k, v) }
    else      { top(b, r) max=! cand(b, k, v) < top(b, r - 1) ? cand(b, k, v) : -inf }
    flat(b, r) min=! cand(b, k, v) == top(b, r) ? k * V + v : K * V
  }
  beam(b, r) = flat(b, r) / V
  token(b, r) = flat(b, r) % V
}
""", full=dict(B=32, K=5, V=16000), tiny=dict(B=2, K=3, V=7),
    pick=lambda r: _h34_flat(*r),
    inputs=lambda r, s: [_n(r, s["B"], s["K"], s["V"]) * 2, -np.abs(_n(r, s["B"], s["K"])) * 3])
def _h34_beam_topk(torch, a, t, s):
    logits, score = t
    B, K, V = s["B"], s["K"], s["V"]

    def run():
        cand = (torch.log_softmax(logits, -1) + score[:, :, None]).view(B, K * V)
        val, idx = cand.topk(K, dim=1)
        return _h34_flat(val, idx // V, idx % V)
    return {"torch log_softmax + topk": _nograd(torch, run)}


@program(name="alibi bidirectional (encoder) attention, symmetric bias -slope(h) |i - j|, slopes input, (B,NH,L,D)",
         kind="attention", src="""
def alibi_encoder(float(B,NH,L,D) q, float(B,NH,L,D) k, float(B,NH,L,D) v, float(NH) slope) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  s(b, h, i, j) = s(b, h, i, j) * rsqrt(float(D)) - slope(h) * fabs(float(i - j))
  m(b, h, i) max=! s(b, h, i, j)
  p(b, h, i, j) = exp(s(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! p(b, h, i, j)
  o(b, h, i, d) +=! p(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
}
""", full=dict(B=4, NH=12, L=256, D=64), tiny=dict(B=2, NH=2, L=5, D=3),
    inputs=lambda r, s: [_n(r, s["B"], s["NH"], s["L"], s["D"]), _n(r, s["B"], s["NH"], s["L"], s["D"]),
                         _n(r, s["B"], s["NH"], s["L"], s["D"]),
                         (2.0 ** (-8.0 * np.arange(1, s["NH"] + 1) / s["NH"])).astype(np.float32)])
def _h34_alibi_bidir(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, slope = t
    L = s["L"]
    pos = torch.arange(L, dtype=torch.float32)

    def run():
        bias = -slope[:, None, None] * (pos[:, None] - pos[None, :]).abs()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return {"sdpa (float alibi mask)": _nograd(torch, run)}


@program(name="self-attention (B,L,NH,D) with a relative bias rel(NH, 2L-1) looked up through an int32 index "
              "tensor pos(i, j) = j - i + L - 1 built in the kernel", kind="attention", src="""
def relpos_lookup_attn(float(B,L,NH,D) q, float(B,L,NH,D) k, float(B,L,NH,D) v, float(NH,2*L-1) rel) -> (o) {
  pos(i, j) = int32(j - i + L - 1) where i in 0:L, j in 0:L
  s(b, h, i, j) +=! q(b, i, h, d) * k(b, j, h, d)
  s(b, h, i, j) = s(b, h, i, j) / sqrt(float(D)) + rel(h, pos(i, j))
  m(b, h, i) max=! s(b, h, i, j)
  p(b, h, i, j) = exp(s(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! p(b, h, i, j)
  o(b, i, h, d) +=! p(b, h, i, j) / z(b, h, i) * v(b, j, h, d)
}
""", full=dict(B=8, L=256, NH=8, D=64), tiny=dict(B=2, L=4, NH=2, D=3),
    inputs=lambda r, s: [_n(r, s["B"], s["L"], s["NH"], s["D"]), _n(r, s["B"], s["L"], s["NH"], s["D"]),
                         _n(r, s["B"], s["L"], s["NH"], s["D"]), _n(r, s["NH"], 2 * s["L"] - 1) * 0.5])
def _h34_relpos_lookup(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, rel = t
    L = s["L"]
    ar = torch.arange(L)
    idx = ar[None, :] - ar[:, None] + L - 1

    def run():
        bias = rel[:, idx]                                              # (NH, L, L)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=bias)
        return o.transpose(1, 2)
    return {"sdpa (gathered relative bias), transposes": _nograd(torch, run)}


@program(name="bidirectional banded local attention, |i - j| <= w with w an int32 scalar input, "
              "select on the full score matrix, exp bound in a where", kind="attention", src="""
def band_attention(float(B,NH,L,D) q, float(B,NH,L,D) k, float(B,NH,L,D) v, int32 w) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d) / sqrt(float(D))
  m(b, h, i) max=! i - j <= w && j - i <= w ? s(b, h, i, j) : -inf
  p(b, h, i, j) = i - j <= w && j - i <= w ? ex : 0.0 where ex = exp(s(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! p(b, h, i, j)
  o(b, h, i, d) +=! p(b, h, i, j) * v(b, h, j, d)
  o(b, h, i, d) = o(b, h, i, d) / z(b, h, i)
}
""", full=dict(B=4, NH=8, L=384, D=64), tiny=dict(B=2, NH=2, L=6, D=3),
    inputs=lambda r, s: [_n(r, s["B"], s["NH"], s["L"], s["D"]), _n(r, s["B"], s["NH"], s["L"], s["D"]),
                         _n(r, s["B"], s["NH"], s["L"], s["D"]), np.array(max(1, s["L"] // 8), np.int32)])
def _h34_band_attn(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t[:3]
    w = int(a[3])
    ar = torch.arange(s["L"])
    band = (ar[:, None] - ar[None, :]).abs() <= w
    return {"sdpa (bool band mask)": _nograd(torch, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=band))}


@program(name="causal self-attention over left-padded prompts: keys j >= L - len(b) from int32 lengths, "
              "pad query rows give 0", kind="attention", src="""
def causal_left_padded(float(B,NH,L,D) q, float(B,NH,L,D) k, float(B,NH,L,D) v, int32(B) len) -> (o) {
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  m(b, h, i) max=! j <= i && j >= L - len(b) ? s(b, h, i, j) : -inf
  e(b, h, i, j) = j <= i && j >= L - len(b) ? exp((s(b, h, i, j) - m(b, h, i)) / sqrt(float(D))) : 0.0
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! i >= L - len(b) ? e(b, h, i, j) * v(b, h, j, d) / z(b, h, i) : 0.0
}
""", full=dict(B=8, NH=8, L=256, D=64), tiny=dict(B=3, NH=2, L=5, D=3),
    inputs=lambda r, s: [_n(r, s["B"], s["NH"], s["L"], s["D"]), _n(r, s["B"], s["NH"], s["L"], s["D"]),
                         _n(r, s["B"], s["NH"], s["L"], s["D"]),
                         r.integers(1, s["L"] + 1, s["B"]).astype(np.int32)])
def _h34_causal_leftpad(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, lens = t
    L = s["L"]
    ar = torch.arange(L)
    valid = ar[None, :] >= L - lens.long()[:, None]                   # (B, L): not padding
    mask = (ar[None, :] <= ar[:, None])[None, None] & valid[:, None, None, :]

    def run():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return torch.where(valid[:, None, :, None], o, 0.0)
    return {"sdpa (bool causal & padding mask) + where on pad rows": _nograd(torch, run)}


@program(name="cross-attention with separate int32 query and key lengths: additive -1e9 key mask as a (B,S) "
              "temporary, padded queries zeroed", kind="attention", src="""
def cross_attn_lengths(float(B,NH,T,D) q, float(B,NH,S,D) k, float(B,NH,S,D) v, int32(B) qlen, int32(B) klen)
    -> (o) {
  kbias(b, j) = j < klen(b) ? 0.0 : -1e9 where b in 0:B, j in 0:S
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  s(b, h, i, j) = s(b, h, i, j) / sqrt(float(D)) + kbias(b, j)
  m(b, h, i) max=! s(b, h, i, j)
  p(b, h, i, j) = exp(s(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! p(b, h, i, j)
  o(b, h, i, d) +=! p(b, h, i, j) * v(b, h, j, d)
  o(b, h, i, d) = i < qlen(b) ? o(b, h, i, d) / z(b, h, i) : 0.0
}
""", full=dict(B=8, NH=8, T=128, S=384, D=64), tiny=dict(B=3, NH=2, T=3, S=5, D=2),
    inputs=lambda r, s: [_n(r, s["B"], s["NH"], s["T"], s["D"]), _n(r, s["B"], s["NH"], s["S"], s["D"]),
                         _n(r, s["B"], s["NH"], s["S"], s["D"]),
                         r.integers(1, s["T"] + 1, s["B"]).astype(np.int32),
                         r.integers(1, s["S"] + 1, s["B"]).astype(np.int32)])
def _h34_cross_lengths(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, qlen, klen = t
    qok = torch.arange(s["T"])[None, :] < qlen.long()[:, None]
    kbias = torch.where(torch.arange(s["S"])[None, :] < klen.long()[:, None], 0.0, -1e9)[:, None, None, :]

    def run():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=kbias)
        return torch.where(qok[:, None, :, None], o, 0.0)
    return {"sdpa (float key mask) + where on padded queries": _nograd(torch, run)}


@program(name="multi-query causal self-attention, queries (B,L,NH,D) heads inside, one shared k/v head (B,L,D)",
         kind="attention", src="""
def mqa_causal(float(B,L,NH,D) q, float(B,L,D) k, float(B,L,D) v) -> (o) {
  s(b, i, h, j) +=! q(b, i, h, d) * k(b, j, d) where j in 0:L
  m(b, i, h) max=! j <= i ? s(b, i, h, j) : -inf
  p(b, i, h, j) = j <= i ? exp((s(b, i, h, j) - m(b, i, h)) * rsqrt(float(D))) : 0.0
  z(b, i, h) +=! p(b, i, h, j)
  o(b, i, h, d) +=! p(b, i, h, j) * v(b, j, d)
  o(b, i, h, d) = o(b, i, h, d) / z(b, i, h)
}
""", full=dict(B=4, L=512, NH=8, D=64), tiny=dict(B=2, L=5, NH=3, D=2),
    inputs=lambda r, s: [_n(r, s["B"], s["L"], s["NH"], s["D"]), _n(r, s["B"], s["L"], s["D"]),
                         _n(r, s["B"], s["L"], s["D"])])
def _h34_mqa_causal(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = t

    def run():
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k[:, None], v[:, None], is_causal=True, enable_gqa=True)
        return o.transpose(1, 2)
    return {"sdpa (is_causal, enable_gqa, 1 kv head)": _nograd(torch, run)}


@program(name="greedy seq2seq decoding: tanh rnn decoder with input feeding, dot attention over the encoder each step, "
              "token by max + first-equal min=!, embedding of the token fed back (N steps, free)", kind="llm", src="""
def greedy_attn_decode(float(B,S,H) enc, float(V,E) emb, float(E,H) Wx, float(H,H) Wh, float(H,H) Wc,
                       float(2*H,V) Wo, float(B,H) h0, int32(B) start) -> (tok) {
  for t in N {
    if t == 0 {
      x(b, j) +=! emb(start(b), e) * Wx(e, j)
      x(b, j) += h0(b, k) * Wh(k, j)
    } else {
      x(b, j) +=! emb(tok(t - 1, b), e) * Wx(e, j)
      x(b, j) += h(b, k) * Wh(k, j)
      x(b, j) += ctx(b, k) * Wc(k, j)
    }
    h(b, j) = tanh(x(b, j))
    sc(b, s) +=! h(b, j) * enc(b, s, j)
    mx(b) max=! sc(b, s)
    w(b, s) = exp(sc(b, s) - mx(b))
    den(b) +=! w(b, s)
    ctx(b, j) +=! w(b, s) * enc(b, s, j) / den(b)
    logit(b, v) +=! h(b, k) * Wo(k, v)
    logit(b, v) += ctx(b, k) * Wo(H + k, v)
    best(b) max=! logit(b, v)
    tok(t, b) min=! logit(b, v) == best(b) ? v : V
  }
}
""", full=dict(B=32, S=64, H=256, E=128, V=1000, N=16), tiny=dict(B=2, S=3, H=4, E=3, V=6, N=4), free=("N",),
    inputs=lambda r, s: [_n(r, s["B"], s["S"], s["H"]), _n(r, s["V"], s["E"]), _w(r, s["E"], s["H"]),
                         _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]), _w(r, 2 * s["H"], s["V"]) * 4,
                         _n(r, s["B"], s["H"]) * 0.5, r.integers(0, s["V"], s["B"]).astype(np.int32)])
def _h34_greedy_decode(torch, a, t, s):
    F = torch.nn.functional
    enc, emb, Wx, Wh, Wc, Wo, h0, start = t
    N = s["N"]

    def run():
        h, y, toks = h0, start.long(), []
        ctx = None
        for step in range(N):
            x = emb[y] @ Wx + h @ Wh
            if ctx is not None:
                x = x + ctx @ Wc
            h = torch.tanh(x)
            ctx = F.scaled_dot_product_attention(h[:, None, :], enc, enc, scale=1.0)[:, 0]
            y = (torch.cat([h, ctx], 1) @ Wo).argmax(1)
            toks.append(y)
        return torch.stack(toks).int()
    return {"torch loop (sdpa one query, argmax)": _nograd(torch, run)}


@program(name="pointer network teacher-forced nll: additive scores v . tanh(W1 e_n + W2 d_t), positions already "
              "pointed to masked by a visited tensor updated in a for loop over int32 targets", kind="sequence", src="""
def pointer_nll(float(B,N,H) enc, float(B,T,H) dec, int32(B,T) tgt, float(A,H) W1, float(A,H) W2, float(A) vv)
    -> (nll) {
  ke(b, n, a) +=! enc(b, n, c) * W1(a, c)
  qd(b, t, a) +=! dec(b, t, c) * W2(a, c)
  u(b, t, n) +=! vv(a) * tanh(ke(b, n, a) + qd(b, t, a))
  for t in T {
    m(b) max=! vis(b, n) > 0 ? -inf : u(b, t, n)
    z(b) +=! vis(b, n) > 0 ? 0.0 : exp(u(b, t, n) - m(b))
    lp(b, t) = u(b, t, tgt(b, t)) - m(b) - log(z(b))
    vis(b, n) += tgt(b, t) == n ? 1.0 : 0.0 where n in 0:N
  }
  nll(b) +=! -lp(b, t)
}
""", full=dict(B=32, N=50, T=50, H=128, A=128), tiny=dict(B=2, N=5, T=4, H=3, A=4),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["H"]), _n(r, s["B"], s["T"], s["H"]),
                         np.stack([r.permutation(s["N"])[:s["T"]] for _ in range(s["B"])]).astype(np.int32),
                         _w(r, s["A"], s["H"]), _w(r, s["A"], s["H"]), _w(r, s["A"])])
def _h34_pointer_nll(torch, a, t, s):
    F = torch.nn.functional
    enc, dec, tgt, W1, W2, vv = t
    N = s["N"]
    tg = tgt.long()
    onehot = F.one_hot(tg, N)
    visited = (onehot.cumsum(1) - onehot) > 0                          # pointed to at an earlier step

    def run():
        u = torch.tanh(F.linear(enc, W1)[:, None] + F.linear(dec, W2)[:, :, None]) @ vv     # (B, T, N)
        lp = torch.log_softmax(u.masked_fill(visited, float("-inf")), -1)
        return -lp.gather(2, tg[:, :, None])[:, :, 0].sum(1)
    return {"torch broadcast tanh + masked log_softmax + gather": _nograd(torch, run)}


@program(name="hmm forward-backward state posteriors, log space: forward loop, backward loop writing bw(T-1-s), "
              "(T,B,S) emissions", kind="sequence", src="""
def hmm_posteriors(float(T,B,S) emit, float(S,S) logA, float(S) logpi) -> (post) {
  for t in T {
    if t == 0 {
      fw(t, b, j) = logpi(j) + emit(t, b, j)
    } else {
      mf(b, j) max=! fw(t - 1, b, i) + logA(i, j)
      sf(b, j) +=! exp(fw(t - 1, b, i) + logA(i, j) - mf(b, j))
      fw(t, b, j) = mf(b, j) + log(sf(b, j)) + emit(t, b, j)
    }
  }
  bw(t, b, i) = 0.0 where t in T-1:T, b in 0:B, i in 0:S
  for s in 1:T {
    g(b, i, j) = logA(i, j) + emit(T - s, b, j) + bw(T - s, b, j)
    mb(b, i) max=! g(b, i, j)
    sb(b, i) +=! exp(g(b, i, j) - mb(b, i))
    bw(T - 1 - s, b, i) = mb(b, i) + log(sb(b, i))
  }
  mz(b) max=! fw(T - 1, b, j)
  sz(b) +=! exp(fw(T - 1, b, j) - mz(b))
  post(t, b, j) = exp(fw(t, b, j) + bw(t, b, j) - mz(b) - log(sz(b)))
}
""", full=dict(T=128, B=32, S=64), tiny=dict(T=5, B=2, S=3),
    inputs=lambda r, s: [-np.abs(_n(r, s["T"], s["B"], s["S"])) * 2, _h34_logsm(r, s["S"], s["S"]),
                         _h34_logsm(r, s["S"])])
def _h34_hmm_posteriors(torch, a, t, s):
    emit, logA, logpi = t
    T = s["T"]

    def run():
        fw = [logpi + emit[0]]
        for step in range(1, T):
            fw.append(torch.logsumexp(fw[-1][:, :, None] + logA, dim=1) + emit[step])
        bw = [torch.zeros_like(emit[0])]
        for step in range(T - 1, 0, -1):
            bw.append(torch.logsumexp(logA + (emit[step] + bw[-1])[:, None, :], dim=2))
        fw, bw = torch.stack(fw), torch.stack(bw[::-1])
        return torch.exp(fw + bw - torch.logsumexp(fw[-1], dim=1)[None, :, None])
    return {"torch loops (logsumexp forward and backward)": _nograd(torch, run)}


@program(name="batched levenshtein distance of int32 token sequences with int32 lengths: row loop, "
              "in-statement running min along j, D(alen, b, clen) gathered", kind="sequence", src="""
def edit_distance(int32(B,N) a, int32(B,M) c, int32(B) alen, int32(B) clen) -> (dist) {
  for i in 0:N+1 {
    if i == 0 {
      D(i, b, j) = j where b in 0:B, j in 0:M+1
    } else {
      D(i, b, j) = j == 0 ? i : min(min(D(i - 1, b, j), D(i, b, j - 1)) + 1,
                                    D(i - 1, b, j - 1) + (a(b, i - 1) == c(b, j - 1) ? 0 : 1)) where b in 0:B, j in 0:M+1
    }
  }
  dist(b) = D(alen(b), b, clen(b))
}
""", full=dict(B=512, N=100, M=100), tiny=dict(B=4, N=5, M=6),
    inputs=lambda r, s: [r.integers(0, 4, (s["B"], s["N"])).astype(np.int32),
                         r.integers(0, 4, (s["B"], s["M"])).astype(np.int32),
                         r.integers(0, s["N"] + 1, s["B"]).astype(np.int32),
                         r.integers(0, s["M"] + 1, s["B"]).astype(np.int32)])
def _h34_edit_distance(torch, a, t, s):
    A, C, alen, clen = (x.long() for x in t)
    B, N, M = s["B"], s["N"], s["M"]
    ar = torch.arange(M + 1)
    bi = torch.arange(B)

    def run():
        row = ar.expand(B, M + 1)
        rows = [row]
        for i in range(1, N + 1):
            cost = (A[:, i - 1, None] != C).long()
            tmp = torch.cat([torch.full((B, 1), i), torch.minimum(row[:, 1:] + 1, row[:, :-1] + cost)], 1)
            row = torch.cummin(tmp - ar, 1).values + ar          # insertions: min over k <= j of tmp(k) + j - k
            rows.append(row)
        return torch.stack(rows)[alen, bi, clen].int()
    return {"torch row loop (cummin for insertions)": _nograd(torch, run)}
# ==== hunt 35: graphs, sparse-by-index and segment computations

def _h35_f32(x):
    return np.array(x, np.float32)


def _h35_edges(r, N, E):
    return [r.integers(0, N, E).astype(np.int32), r.integers(0, N, E).astype(np.int32)]


def _h35_sym_adj(r, N, p):
    up = np.triu(r.random((N, N)) < p, 1)
    return (up | up.T).astype(np.float32)


@program(name="gcn layer on an int32 edge list: self loops, D^-1/2 (A+I) D^-1/2 from in-degrees, x W^T + b",
         kind="graph", src="""
def gcn_sym_edges(float(N,F) x, int32(E) src, int32(E) dst, float(O,F) W, float(O) b) -> (y) {
  deg(n) +=! dst(e) == n ? 1.0 : 0.0 where n in 0:N
  dinv(n) = rsqrt(deg(n) + 1.0)
  xw(n, o) +=! x(n, f) * W(o, f)
  agg(n, o) +=! dst(e) == n ? dinv(src(e)) * xw(src(e), o) : 0.0 where n in 0:N
  y(n, o) = dinv(n) * (agg(n, o) + dinv(n) * xw(n, o)) + b(o)
}
""", full=dict(N=16384, F=128, O=64, E=131072), tiny=dict(N=5, F=3, O=2, E=8),
    inputs=lambda r, s: [_n(r, s["N"], s["F"])] + _h35_edges(r, s["N"], s["E"])
    + [_w(r, s["O"], s["F"]), _n(r, s["O"]) * 0.1])
def _h35_gcn_sym(torch, a, t, s):
    F = torch.nn.functional
    x, src, dst, W, b = t
    N = x.shape[0]

    def scatter():
        s64, d64 = src.long(), dst.long()
        dinv = (torch.bincount(d64, minlength=N).to(x.dtype) + 1).rsqrt()
        xw = F.linear(x, W)
        agg = torch.zeros(N, xw.shape[1]).index_add_(0, d64, xw[s64] * dinv[s64, None])
        return dinv[:, None] * (agg + dinv[:, None] * xw) + b

    def sparse():
        s64, d64 = src.long(), dst.long()
        dinv = (torch.bincount(d64, minlength=N).to(x.dtype) + 1).rsqrt()
        loops = torch.arange(N)
        idx = torch.stack([torch.cat([d64, loops]), torch.cat([s64, loops])])
        A = torch.sparse_coo_tensor(idx, dinv[idx[0]] * dinv[idx[1]], (N, N), check_invariants=False).coalesce()
        return torch.sparse.mm(A, F.linear(x, W)) + b
    return {"bincount + F.linear + gather + index_add_": _nograd(torch, scatter),
            "torch.sparse.mm with normalised coo adjacency": _nograd(torch, sparse)}


@program(name="graphsage mean over the first cnt(n) of K sampled int32 neighbours (-1 padded), self + neighbour linear, relu",
         kind="graph", src="""
def sage_mean_sampled(float(N,D) x, int32(N,K) nbr, int32(N) cnt, float(H,D) Ws, float(H,D) Wn,
                      float(H) b) -> (h) {
  agg(n, d) +=! k < cnt(n) ? x(nbr(n, k), d) : 0.0
  agg(n, d) = agg(n, d) / fmax(float(cnt(n)), 1.0)
  h(n, o) +=! x(n, d) * Ws(o, d)
  h(n, o) += agg(n, d) * Wn(o, d)
  h(n, o) = fmax(h(n, o) + b(o), 0.0)
}
""", full=dict(N=8192, K=10, D=128, H=128), tiny=dict(N=6, K=3, D=4, H=3),
    inputs=lambda r, s: (lambda N, K, cnt: [
        _n(r, N, s["D"]),
        np.where(np.arange(K)[None, :] < cnt[:, None], r.integers(0, N, (N, K)), -1).astype(np.int32),
        cnt.astype(np.int32), _w(r, s["H"], s["D"]), _w(r, s["H"], s["D"]), _n(r, s["H"]) * 0.1])(
        s["N"], s["K"], r.integers(0, s["K"] + 1, s["N"])))
def _h35_sage_mean(torch, a, t, s):
    F = torch.nn.functional
    x, nbr, cnt, Ws, Wn, b = t
    K = nbr.shape[1]

    def run():
        mask = (torch.arange(K) < cnt[:, None]).to(x.dtype)
        agg = torch.bmm(mask.unsqueeze(1), x[nbr.clamp(min=0)]).squeeze(1) / cnt.clamp(min=1)[:, None].to(x.dtype)
        return F.relu(F.linear(x, Ws) + F.linear(agg, Wn, b))
    return {"masked gather + bmm mean + F.linear": _nograd(torch, run)}


@program(name="gat layer over a fixed-fanout int32 neighbour table (N,K): per-head leaky-relu scores, softmax over K",
         kind="graph", src="""
def gat_fanout(float(N,D) x, int32(N,K) nbr, float(NH,C,D) W, float(NH,C) asrc, float(NH,C) adst) -> (out) {
  z(n, h, c) +=! x(n, d) * W(h, c, d)
  es(n, h) +=! z(n, h, c) * asrc(h, c)
  ed(n, h) +=! z(n, h, c) * adst(h, c)
  sc(n, h, k) = v > 0 ? v : 0.2 * v where v = es(nbr(n, k), h) + ed(n, h)
  mx(n, h) max=! sc(n, h, k)
  p(n, h, k) = exp(sc(n, h, k) - mx(n, h))
  den(n, h) +=! p(n, h, k)
  out(n, h, c) +=! p(n, h, k) * z(nbr(n, k), h, c)
  out(n, h, c) = out(n, h, c) / den(n, h)
}
""", full=dict(N=8192, K=16, D=64, NH=4, C=16), tiny=dict(N=5, K=3, D=4, NH=2, C=3),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]), r.integers(0, s["N"], (s["N"], s["K"])).astype(np.int32),
                         _w(r, s["NH"], s["C"], s["D"]), _w(r, s["NH"], s["C"]), _w(r, s["NH"], s["C"])])
def _h35_gat(torch, a, t, s):
    F = torch.nn.functional
    x, nbr, W, asrc, adst = t
    NH, C, D = W.shape

    def run():
        z = F.linear(x, W.reshape(NH * C, D)).view(-1, NH, C)
        es, ed = (z * asrc).sum(-1), (z * adst).sum(-1)
        alpha = torch.softmax(F.leaky_relu(es[nbr] + ed[:, None, :], 0.2), 1)
        return torch.einsum("nkh,nkhc->nhc", alpha, z[nbr])
    return {"F.linear + gather + softmax + einsum": _nograd(torch, run)}


@program(name="gin layer on a dense 0/1 adjacency: (1 + eps) x + A x, two-layer relu mlp, eps a scalar input",
         kind="graph", src="""
def gin_dense(float(N,N) A, float(N,D) x, float eps, float(H,D) W1, float(H) b1, float(O,H) W2,
              float(O) b2) -> (y) {
  agg(i, d) +=! A(i, j) * x(j, d)
  agg(i, d) = agg(i, d) + (1 + eps) * x(i, d)
  hid(i, k) +=! agg(i, d) * W1(k, d)
  hid(i, k) = fmax(hid(i, k) + b1(k), 0.0)
  y(i, o) +=! hid(i, k) * W2(o, k)
  y(i, o) = y(i, o) + b2(o)
}
""", full=dict(N=2048, D=64, H=128, O=64), tiny=dict(N=6, D=3, H=4, O=2),
    inputs=lambda r, s: [_h35_sym_adj(r, s["N"], 0.01 if s["N"] > 100 else 0.4), _n(r, s["N"], s["D"]),
                         _h35_f32(0.1), _w(r, s["H"], s["D"]), _n(r, s["H"]) * 0.1, _w(r, s["O"], s["H"]),
                         _n(r, s["O"]) * 0.1])
def _h35_gin(torch, a, t, s):
    F = torch.nn.functional
    A, x, _, W1, b1, W2, b2 = t
    eps = float(a[2])
    A_csr = A.to_sparse_csr()  # a fixed graph: converted once

    def dense():
        return F.linear(F.relu(F.linear(torch.addmm(x, A, x, beta=1 + eps), W1, b1)), W2, b2)

    def sparse():
        return F.linear(F.relu(F.linear(A_csr @ x + (1 + eps) * x, W1, b1)), W2, b2)
    return {"torch.addmm + F.linear mlp": _nograd(torch, dense),
            "csr adjacency @ x (converted once) + F.linear mlp": _nograd(torch, sparse)}


@program(name="edge-conditioned conv (nnconv): per-edge weight sum_c ea(e,c) W_c, mean over int32 dst, root weight",
         kind="graph", src="""
def nnconv_mean(float(N,D) x, int32(E) src, int32(E) dst, float(E,C) ea, float(C,D,O) We, float(O,D) Wroot,
                float(O) b) -> (y) {
  m(e, o) +=! ea(e, c) * x(src(e), d) * We(c, d, o)
  cnt(n) +=! dst(e) == n ? 1.0 : 0.0 where n in 0:N
  y(n, o) +=! dst(e) == n ? m(e, o) : 0.0 where n in 0:N
  y(n, o) = y(n, o) / fmax(cnt(n), 1.0) + b(o)
  y(n, o) += x(n, d) * Wroot(o, d)
}
""", full=dict(N=4096, E=32768, C=4, D=32, O=32), tiny=dict(N=5, E=9, C=2, D=3, O=2),
    inputs=lambda r, s: [_n(r, s["N"], s["D"])] + _h35_edges(r, s["N"], s["E"])
    + [r.random((s["E"], s["C"])).astype(np.float32), _w(r, s["C"], s["D"], s["O"]) / float(np.sqrt(s["D"])),
       _w(r, s["O"], s["D"]), _n(r, s["O"]) * 0.1])
def _h35_nnconv(torch, a, t, s):
    F = torch.nn.functional
    x, src, dst, ea, We, Wroot, b = t
    N, D = x.shape
    C, _, O = We.shape

    def node_first():
        d64 = dst.long()
        xw = (x @ We.permute(1, 0, 2).reshape(D, C * O)).view(N, C, O)
        m = torch.bmm(ea.unsqueeze(1), xw[src]).squeeze(1)
        cnt = torch.bincount(d64, minlength=N).clamp(min=1).to(x.dtype)
        agg = torch.zeros(N, O).index_add_(0, d64, m)
        return agg / cnt[:, None] + b + F.linear(x, Wroot)
    return {"x W_c per node, gather, bmm by edge attrs, index_add_ mean": _nograd(torch, node_first)}


@program(name="L rounds of residual message passing (for loop): weighted scatter-add over int32 edges, relu(agg W_l)",
         kind="graph", src="""
def mp_rounds(float(N,D) x0, int32(E) src, int32(E) dst, float(E) w, float(L,D,D) W) -> (h) {
  h(n, d) = x0(n, d)
  for l in L {
    agg(n, d) +=! dst(e) == n ? w(e) * h(src(e), d) : 0.0 where n in 0:N
    z(n, j) +=! agg(n, d) * W(l, d, j)
    h(n, j) = h(n, j) + fmax(z(n, j), 0.0)
  }
}
""", full=dict(N=8192, E=65536, D=64, L=4), tiny=dict(N=5, E=8, D=3, L=2),
    inputs=lambda r, s: [_n(r, s["N"], s["D"])] + _h35_edges(r, s["N"], s["E"])
    + [(r.random(s["E"]) / 4).astype(np.float32), _w(r, s["L"], s["D"], s["D"])])
def _h35_mp_rounds(torch, a, t, s):
    x0, src, dst, w, W = t

    def run():
        h = x0
        for l in range(W.shape[0]):
            agg = torch.zeros_like(h).index_add_(0, dst, h[src] * w[:, None])
            h = h + torch.relu(agg @ W[l])
        return h
    return {"python loop: gather + index_add_ + matmul": _nograd(torch, run)}


@program(name="pagerank power iterations on an int32 edge list, dangling mass spread uniformly, every iterate (N, S free)",
         kind="graph", src="""
def pagerank_edges(int32(E) src, int32(E) dst, float damp) -> (r) {
  outdeg(n) +=! src(e) == n ? 1.0 : 0.0 where n in 0:N
  for t in S {
    if t == 0 {
      r(t, n) = 1.0 / N where n in 0:N
    } else {
      dang +=! outdeg(n) == 0.0 ? r(t - 1, n) : 0.0
      share(n) = outdeg(n) > 0.0 ? r(t - 1, n) / outdeg(n) : 0.0
      r(t, n) +=! dst(e) == n ? share(src(e)) : 0.0 where n in 0:N
      r(t, n) = (1.0 - damp) / N + damp * (r(t, n) + dang / N)
    }
  }
}
""", full=dict(N=65536, E=524288, S=20), tiny=dict(N=6, E=8, S=4), free=("N", "S"),
    inputs=lambda r, s: _h35_edges(r, s["N"], s["E"]) + [_h35_f32(0.85)])
def _h35_pagerank(torch, a, t, s):
    src, dst = t[0].long(), t[1].long()
    damp = float(a[2])
    N, S = s["N"], s["S"]

    def scatter():
        outdeg = torch.bincount(src, minlength=N).float()
        dangling = outdeg == 0
        r = torch.full((N,), 1.0 / N)
        rs = [r]
        for _ in range(S - 1):
            share = torch.where(dangling, 0.0, r / outdeg)
            agg = torch.zeros(N).index_add_(0, dst, share[src])
            r = (1 - damp) / N + damp * (agg + r[dangling].sum() / N)
            rs.append(r)
        return torch.stack(rs)

    def csr():
        outdeg = torch.bincount(src, minlength=N).float()
        dangling = outdeg == 0
        P = torch.sparse_coo_tensor(torch.stack([dst, src]), 1.0 / outdeg[src], (N, N),
                                    check_invariants=False).coalesce().to_sparse_csr()
        r = torch.full((N,), 1.0 / N)
        rs = [r]
        for _ in range(S - 1):
            r = (1 - damp) / N + damp * (P @ r + r[dangling].sum() / N)
            rs.append(r)
        return torch.stack(rs)
    return {"python loop: gather + index_add_": _nograd(torch, scatter),
            "python loop: csr transition matrix @ r": _nograd(torch, csr)}


@program(name="personalized pagerank from int32 seed nodes: row-stochastic dense adjacency, S restarts-with-alpha steps (S free)",
         kind="graph", src="""
def ppr_dense(float(N,N) A, int32(Q) seed, float alpha) -> (R) {
  deg(m) +=! A(m, n)
  P(m, n) = deg(m) > 0 ? A(m, n) / deg(m) : 0.0
  R(q, n) = seed(q) == n ? 1.0 : 0.0 where n in 0:N
  for it in S {
    prev(q, n) = R(q, n)
    R(q, n) +=! prev(q, m) * P(m, n)
    R(q, n) = (1 - alpha) * R(q, n) + (seed(q) == n ? alpha : 0.0)
  }
}
""", full=dict(N=1024, Q=32, S=16), tiny=dict(N=6, Q=2, S=3), free=("S",),
    inputs=lambda r, s: [_h35_sym_adj(r, s["N"], 0.02 if s["N"] > 100 else 0.3),
                         r.integers(0, s["N"], s["Q"]).astype(np.int32), _h35_f32(0.15)])
def _h35_ppr(torch, a, t, s):
    F = torch.nn.functional
    A, seed = t[0], t[1]
    alpha, S = float(a[2]), s["S"]
    N = A.shape[0]

    def run():
        deg = A.sum(1, keepdim=True)
        P = torch.where(deg > 0, A / deg, 0.0)
        E = F.one_hot(seed.long(), N).to(A.dtype)
        R = E
        for _ in range(S):
            R = torch.addmm(E, R, P, beta=alpha, alpha=1 - alpha)
        return R
    return {"python loop of torch.addmm": _nograd(torch, run)}


@program(name="label propagation on a weighted int32 knn table, labelled nodes clamped (-1 = unlabelled; C, S free)",
         kind="graph", src="""
def label_prop(int32(N,K) nbr, float(N,K) wk, int32(N) y) -> (Fl) {
  ws(n) +=! wk(n, k)
  Y0(n, c) = y(n) == c ? 1.0 : 0.0 where c in 0:C
  Fl(n, c) = Y0(n, c)
  for it in S {
    prev(n, c) = Fl(n, c)
    Fl(n, c) +=! wk(n, k) * prev(nbr(n, k), c)
    Fl(n, c) = y(n) >= 0 ? Y0(n, c) : Fl(n, c) / ws(n)
  }
}
""", full=dict(N=16384, K=10, C=16, S=10), tiny=dict(N=7, K=3, C=3, S=3), free=("C", "S"),
    inputs=lambda r, s: [r.integers(0, s["N"], (s["N"], s["K"])).astype(np.int32),
                         r.uniform(0.1, 1.0, (s["N"], s["K"])).astype(np.float32),
                         np.where(r.random(s["N"]) < 0.3, r.integers(0, s["C"], s["N"]), -1).astype(np.int32)])
def _h35_label_prop(torch, a, t, s):
    F = torch.nn.functional
    nbr, wk, y = t
    C, S = s["C"], s["S"]

    def run():
        lab = (y >= 0)[:, None]
        Y0 = F.one_hot(y.clamp(min=0).long(), C).to(wk.dtype) * lab
        ws = wk.sum(1, keepdim=True)
        w3 = wk.unsqueeze(1)
        Fl = Y0
        for _ in range(S):
            Fl = torch.where(lab, Y0, torch.bmm(w3, Fl[nbr]).squeeze(1) / ws)
        return Fl
    return {"python loop: gather + bmm + where": _nograd(torch, run)}


@program(name="segment sum | mean | max pooling by int32 csr offsets, segments read up to a max length L (L free)",
         kind="graph", src="""
def segment_pool_ptr(float(N,D) x, int32(S1) ptr) -> (out) {
  sm(s, d) +=! j < ptr(s + 1) - ptr(s) ? x(ptr(s) + j, d) : 0.0 where s in 0:S1 - 1, j in 0:L
  mx(s, d) max=! j < ptr(s + 1) - ptr(s) ? x(ptr(s) + j, d) : -inf where s in 0:S1 - 1, j in 0:L
  out(s, d) = sm(s, d)
  out(s, D + d) = sm(s, d) / fmax(float(ptr(s + 1) - ptr(s)), 1.0)
  out(s, 2 * D + d) = mx(s, d)
}
""", full=dict(S=1024, L=128, D=64), tiny=dict(S=4, L=3, D=2), free=("L",),
    inputs=lambda r, s: (lambda ptr: [_n(r, int(ptr[-1]), s["D"]), ptr])(
        np.concatenate([[0], np.cumsum(r.integers(1, s["L"] + 1, s["S"]))]).astype(np.int32)))
def _h35_segment_ptr(torch, a, t, s):
    x, ptr = t
    off = ptr.long()

    def segment_reduce():
        return torch.cat([torch.segment_reduce(x, "sum", offsets=off, axis=0),
                          torch.segment_reduce(x, "mean", offsets=off, axis=0),
                          torch.segment_reduce(x, "max", offsets=off, axis=0)], 1)

    def scatter():
        lens = off[1:] - off[:-1]
        ids = torch.repeat_interleave(torch.arange(len(lens)), lens)
        sm = x.new_zeros(len(lens), x.shape[1]).index_add_(0, ids, x)
        mx = x.new_full((len(lens), x.shape[1]), float("-inf")).scatter_reduce_(
            0, ids[:, None].expand_as(x), x, "amax")
        return torch.cat([sm, sm / lens[:, None].clamp(min=1).to(x.dtype), mx], 1)
    return {"torch.segment_reduce sum/mean/max (offsets)": _nograd(torch, segment_reduce),
            "repeat_interleave ids + index_add_ + scatter_reduce_(amax)": _nograd(torch, scatter)}


@program(name="global attention pooling by unsorted int32 segment ids: gate, segment softmax, weighted sum, linear (G free)",
         kind="graph", src="""
def seg_attn_pool(float(N,D) x, int32(N) gid, float(D) wg, float(O,D) W) -> (out) {
  gate(n) +=! x(n, d) * wg(d)
  mx(g) max=! gid(n) == g ? gate(n) : -inf where g in 0:G
  e(n) = exp(gate(n) - mx(gid(n)))
  den(g) +=! gid(n) == g ? e(n) : 0.0 where g in 0:G
  pooled(g, d) +=! gid(n) == g ? e(n) * x(n, d) : 0.0 where g in 0:G
  out(g, o) +=! pooled(g, d) / den(g) * W(o, d)
}
""", full=dict(N=65536, D=128, G=512, O=128), tiny=dict(N=8, D=3, G=3, O=2), free=("G",),
    inputs=lambda r, s: [_n(r, s["N"], s["D"]),
                         r.permutation(np.concatenate([np.arange(s["G"]),
                                                       r.integers(0, s["G"], s["N"] - s["G"])])).astype(np.int32),
                         _w(r, s["D"]), _w(r, s["O"], s["D"])])
def _h35_seg_attn(torch, a, t, s):
    F = torch.nn.functional
    x, gid, wg, W = t
    G = s["G"]

    def run():
        g64 = gid.long()
        gate = x @ wg
        mx = torch.full((G,), float("-inf")).scatter_reduce_(0, g64, gate, "amax")
        e = torch.exp(gate - mx[g64])
        den = torch.zeros(G).index_add_(0, g64, e)
        pooled = torch.zeros(G, x.shape[1]).index_add_(0, g64, x * e[:, None])
        return F.linear(pooled / den[:, None], W)
    return {"scatter_reduce_(amax) + exp + index_add_ + F.linear": _nograd(torch, run)}


@program(name="user-item scoring over int32 sampled candidates (positive first): gathered embeddings + biases, sampled softmax loss",
         kind="graph", src="""
def rec_sampled_softmax(float(NU,D) U, float(NI,D) V, float(NU) ub, float(NI) ib, int32(B) uid,
                        int32(B,K) cand) -> (score, loss) {
  score(b, k) +=! U(uid(b), d) * V(cand(b, k), d)
  score(b, k) = score(b, k) + ub(uid(b)) + ib(cand(b, k))
  mx(b) max=! score(b, k)
  lse(b) +=! exp(score(b, k) - mx(b))
  loss +=! (mx(b) + log(lse(b)) - score(b, 0)) / B
}
""", full=dict(NU=100000, NI=50000, D=64, B=4096, K=32), tiny=dict(NU=5, NI=7, D=3, B=3, K=4),
    pick=lambda r: np.concatenate([r[0].ravel(), np.atleast_1d(r[1])]),
    inputs=lambda r, s: [_n(r, s["NU"], s["D"]) * 0.3, _n(r, s["NI"], s["D"]) * 0.3, _n(r, s["NU"]) * 0.1,
                         _n(r, s["NI"]) * 0.1, r.integers(0, s["NU"], s["B"]).astype(np.int32),
                         r.integers(0, s["NI"], (s["B"], s["K"])).astype(np.int32)])
def _h35_rec(torch, a, t, s):
    F = torch.nn.functional
    U, V, ub, ib, uid, cand = t

    def run():
        score = torch.bmm(V[cand], U[uid].unsqueeze(2)).squeeze(2) + ub[uid][:, None] + ib[cand]
        loss = F.cross_entropy(score, torch.zeros(score.shape[0], dtype=torch.long))
        return torch.cat([score.ravel(), loss.reshape(1)])
    return {"gather + bmm + F.cross_entropy(target 0)": _nograd(torch, run)}


@program(name="triangles per node ((A A) .* A row sums / 2) and local clustering coefficient, dense undirected graph",
         kind="graph", src="""
def triangles_clustering(float(N,N) A) -> (tri, cc) {
  p(i, j) +=! A(i, k) * A(k, j)
  tri(i) +=! p(i, j) * A(i, j) / 2
  deg(i) +=! A(i, j)
  cc(i) = deg(i) > 1 ? 2 * tri(i) / (deg(i) * (deg(i) - 1)) : 0.0
}
""", full=dict(N=768), tiny=dict(N=7),
    pick=lambda r: np.concatenate([r[0], r[1]]),
    inputs=lambda r, s: [_h35_sym_adj(r, s["N"], 0.05 if s["N"] > 100 else 0.5)])
def _h35_triangles(torch, a, t, s):
    A = t[0]

    def run():
        tri = ((A @ A) * A).sum(1) / 2
        deg = A.sum(1)
        cc = torch.where(deg > 1, 2 * tri / (deg * (deg - 1)), 0.0)
        return torch.cat([tri, cc])
    return {"torch matmul * A, sum": _nograd(torch, run)}


@program(name="distmult knowledge-graph scores over int32 (head, relation, tail) triples, bce-with-logits loss",
         kind="graph", src="""
def distmult_bce(float(NE,D) ent, float(NR,D) rel, int32(B) head, int32(B) rid, int32(B) tail,
                 float(B) lab) -> (score, loss) {
  score(b) +=! ent(head(b), d) * rel(rid(b), d) * ent(tail(b), d)
  loss +=! (fmax(score(b), 0.0) - score(b) * lab(b) + log1p(exp(-fabs(score(b))))) / B
}
""", full=dict(NE=100000, NR=200, D=128, B=32768), tiny=dict(NE=6, NR=2, D=3, B=5),
    pick=lambda r: np.concatenate([r[0], np.atleast_1d(r[1])]),
    inputs=lambda r, s: [_n(r, s["NE"], s["D"]) * 0.3, _n(r, s["NR"], s["D"]),
                         r.integers(0, s["NE"], s["B"]).astype(np.int32),
                         r.integers(0, s["NR"], s["B"]).astype(np.int32),
                         r.integers(0, s["NE"], s["B"]).astype(np.int32),
                         (r.random(s["B"]) < 0.5).astype(np.float32)])
def _h35_distmult(torch, a, t, s):
    F = torch.nn.functional
    ent, rel, head, rid, tail, lab = t

    def run():
        score = (ent[head] * rel[rid] * ent[tail]).sum(1)
        return torch.cat([score, F.binary_cross_entropy_with_logits(score, lab).reshape(1)])
    return {"gather + mul + sum + F.binary_cross_entropy_with_logits": _nograd(torch, run)}


# ==== hunt 36: finance, econometrics and time-series filters

_H36_LOG2PI = float(np.log(2 * np.pi))


def _h36_f32(x):
    return np.array(x, np.float32)


def _h36_prices(r, A, T, vol=0.015):
    """Geometric random-walk closes, (A, T), starting near 100."""
    steps = r.standard_normal((A, T)) * vol + 0.0002
    return (100 * np.exp(np.cumsum(steps, axis=1))).astype(np.float32)


@program(name="pandas ewm(alpha, adjust=False) mean and biased variance of (A, T) series, scalar alpha, for t in T",
         kind="finance", src="""
def ewm_mean_var(float(A,T) x, float alpha) -> (m, v) {
  for t in T {
    if t == 0 {
      m(a, t) = x(a, t)
      v(a, t) = 0.0 where a in 0:A
    } else {
      v(a, t) = (1 - alpha) * (v(a, t - 1) + alpha * (x(a, t) - m(a, t - 1)) * (x(a, t) - m(a, t - 1)))
      m(a, t) = m(a, t - 1) + alpha * (x(a, t) - m(a, t - 1))
    }
  }
}
""", full=dict(A=1024, T=750), tiny=dict(A=3, T=7),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel()]),
    inputs=lambda r, s: [_n(r, s["A"], s["T"]), _h36_f32(0.06)])
def _h36_ewm(torch, a, t, s):
    x = t[0]
    alpha = float(a[1])

    def loop():
        xt = x.t().contiguous()
        m, v = xt[0], torch.zeros_like(xt[0])
        ms, vs = [m], [v]
        for i in range(1, xt.shape[0]):
            d = xt[i] - m
            v = (1 - alpha) * torch.addcmul(v, d, d, value=alpha)
            m = torch.lerp(m, xt[i], alpha)
            ms.append(m)
            vs.append(v)
        return torch.cat([torch.stack(ms, 1).ravel(), torch.stack(vs, 1).ravel()])
    return {"python loop over T: lerp + addcmul on (A,) rows": _nograd(torch, loop)}


@program(name="garch(1,1) conditional variance of (T, A) returns seeded with the mean square, per-asset gaussian log-likelihood",
         kind="finance", src="""
def garch11_ll(float(T,A) r, float(A) omega, float(A) alpha, float(A) beta) -> (s2, ll) {
  ms(a) +=! r(i, a) * r(i, a) / T
  for t in T {
    if t == 0 { s2(t, a) = ms(a) }
    else      { s2(t, a) = omega(a) + alpha(a) * r(t - 1, a) * r(t - 1, a) + beta(a) * s2(t - 1, a) }
  }
  ll(a) +=! -0.5 * (%r + log(s2(t, a)) + r(t, a) * r(t, a) / s2(t, a))
}
""" % _H36_LOG2PI, full=dict(T=1000, A=2048), tiny=dict(T=9, A=4),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1]]),
    inputs=lambda r, s: [_n(r, s["T"], s["A"]), r.uniform(0.02, 0.1, s["A"]).astype(np.float32),
                         r.uniform(0.03, 0.12, s["A"]).astype(np.float32),
                         r.uniform(0.8, 0.86, s["A"]).astype(np.float32)])
def _h36_garch(torch, a, t, s):
    r, omega, alpha, beta = t

    def loop():
        r2 = r * r
        c = torch.addcmul(omega, alpha, r2[:-1])
        s = r2.mean(0)
        out = [s]
        for i in range(c.shape[0]):
            s = torch.addcmul(c[i], beta, s)
            out.append(s)
        s2 = torch.stack(out)
        ll = -0.5 * (_H36_LOG2PI + torch.log(s2) + r2 / s2).sum(0)
        return torch.cat([s2.ravel(), ll])
    return {"python loop over T: addcmul, then log-likelihood vectorised": _nograd(torch, loop)}


@program(name="local-level kalman filter over a batch of (B, T) series with a 0/1 observed mask: predict, update, innovation log-likelihood",
         kind="finance", src="""
def local_level_kf(float(B,T) y, float(B,T) obs, float(B) q, float r, float(B) m0, float p0) -> (m, P, ll) {
  for t in T {
    if t == 0 {
      mp(b) = m0(b)
      pp(b) = p0 + q(b)
    } else {
      mp(b) = m(b, t - 1)
      pp(b) = P(b, t - 1) + q(b)
    }
    S(b) = pp(b) + r
    e(b) = y(b, t) - mp(b)
    K(b) = obs(b, t) > 0 ? pp(b) / S(b) : 0.0
    m(b, t) = mp(b) + K(b) * e(b)
    P(b, t) = (1 - K(b)) * pp(b)
    ll(b) += obs(b, t) > 0 ? -0.5 * (log(2 * 3.14159265 * S(b)) + e(b) * e(b) / S(b)) : 0.0
  }
}
""", full=dict(B=4096, T=256), tiny=dict(B=3, T=8),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel(), r[2]]),
    inputs=lambda r, s: [np.cumsum(_n(r, s["B"], s["T"]) * 0.3, axis=1).astype(np.float32) + _n(r, s["B"], s["T"]),
                         (r.random((s["B"], s["T"])) < 0.85).astype(np.float32),
                         r.uniform(0.05, 0.2, s["B"]).astype(np.float32), _h36_f32(1.0),
                         _n(r, s["B"]), _h36_f32(10.0)])
def _h36_kalman(torch, a, t, s):
    y, obs, q, _, m0 = t[:5]
    r, p0 = float(a[3]), float(a[5])

    def loop():
        yt, ot = y.t().contiguous(), (obs.t() > 0).contiguous()
        m, P = m0, torch.full_like(m0, p0)
        ll = torch.zeros_like(m0)
        ms, Ps = [], []
        for i in range(yt.shape[0]):
            pp = P + q
            S = pp + r
            e = yt[i] - m
            K = torch.where(ot[i], pp / S, 0.0)
            ll = ll + torch.where(ot[i], -0.5 * (torch.log(2 * 3.14159265 * S) + e * e / S), 0.0)
            m = torch.addcmul(m, K, e)
            P = (1 - K) * pp
            ms.append(m)
            Ps.append(P)
        return torch.cat([torch.stack(ms, 1).ravel(), torch.stack(Ps, 1).ravel(), ll])
    return {"python loop over T: where + addcmul on (B,) rows": _nograd(torch, loop)}


@program(name="ar(p) on demeaned (B, T) series: lag normal equations X^T X, X^T y as sums over t in P:T, residuals and sigma^2 for given phi",
         kind="finance", src="""
def ar_normal_eqs(float(B,T) x, float(B,P) phi) -> (XtX, Xty, res, sig2) {
  mu(b) +=! x(b, t) / T
  xd(b, t) = x(b, t) - mu(b)
  XtX(b, i, j) +=! xd(b, t - 1 - i) * xd(b, t - 1 - j) where t in P:T, i in 0:P, j in 0:P
  Xty(b, i) +=! xd(b, t - 1 - i) * xd(b, t) where t in P:T, i in 0:P
  fit(b, t) +=! phi(b, k) * xd(b, t + P - 1 - k) where t in 0:T - P
  res(b, t) = xd(b, t + P) - fit(b, t)
  sig2(b) +=! res(b, t) * res(b, t) / (T - P)
}
""", full=dict(B=512, T=1024, P=8), tiny=dict(B=3, T=12, P=3),
    pick=lambda r: np.concatenate([x.ravel() for x in r]),
    inputs=lambda r, s: [_n(r, s["B"], s["T"]), _n(r, s["B"], s["P"]) * 0.2])
def _h36_ar(torch, a, t, s):
    x, phi = t

    def unfold_bmm():
        xd = x - x.mean(1, keepdim=True)
        P = phi.shape[1]
        X = xd.unfold(1, P, 1)[:, :-1].flip(-1)        # (B, T-P, P): X[b, s, i] = xd[b, s + P - 1 - i]
        y = xd[:, P:]
        XtX = torch.bmm(X.transpose(1, 2), X)
        Xty = torch.bmm(X.transpose(1, 2), y.unsqueeze(2)).squeeze(2)
        res = y - torch.bmm(X, phi.unsqueeze(2)).squeeze(2)
        sig2 = (res * res).mean(1)
        return torch.cat([XtX.ravel(), Xty.ravel(), res.ravel(), sig2])
    return {"unfold lag matrix + bmm": _nograd(torch, unfold_bmm)}


@program(name="rolling mean, sample std and z-score of the last value over trailing windows of W (free) on (A, T) series",
         kind="finance", src="""
def rolling_z(float(A,T) x) -> (mu, sd, z) {
  mu(a, t) +=! x(a, t + w) where t in 0:T - W + 1, w in 0:W
  mu(a, t) = mu(a, t) / W
  sd(a, t) +=! (x(a, t + w) - mu(a, t)) * (x(a, t + w) - mu(a, t)) where t in 0:T - W + 1, w in 0:W
  sd(a, t) = sqrt(sd(a, t) / (W - 1))
  z(a, t) = (x(a, t + W - 1) - mu(a, t)) / sd(a, t)
}
""", full=dict(A=1024, T=1024, W=20), tiny=dict(A=3, T=9, W=4), free=("W",),
    pick=lambda r: np.concatenate([x.ravel() for x in r]),
    inputs=lambda r, s: [_h36_prices(r, s["A"], s["T"]) / 100])
def _h36_rolling_z(torch, a, t, s):
    x = t[0]
    W = s["W"]

    def unfold():
        win = x.unfold(1, W, 1)
        sd, mu = torch.std_mean(win, -1)
        z = (x[:, W - 1:] - mu) / sd
        return torch.cat([mu.ravel(), sd.ravel(), z.ravel()])
    return {"unfold + torch.std_mean": _nograd(torch, unfold)}


@program(name="underwater curve from a running peak (for t in T), max drawdown and its int32 trough day (argmin=!) per asset",
         kind="finance", src="""
def drawdown(float(A,T) p) -> (dd, mdd, trough) {
  for t in T {
    if t == 0 { peak(a, t) = p(a, t) }
    else      { peak(a, t) = max(peak(a, t - 1), p(a, t)) }
  }
  dd(a, t) = p(a, t) / peak(a, t) - 1.0
  mdd(a) min=! dd(a, t)
  trough(a) argmin=! dd(a, t)
}
""", full=dict(A=2048, T=2520), tiny=dict(A=4, T=11),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1], r[2].astype(np.float32)]),
    inputs=lambda r, s: [_h36_prices(r, s["A"], s["T"])])
def _h36_drawdown(torch, a, t, s):
    p = t[0]

    def cummax():
        dd = p / torch.cummax(p, 1).values - 1.0
        mdd, trough = dd.min(1)
        return torch.cat([dd.ravel(), mdd, trough.to(p.dtype)])
    return {"torch.cummax + min(dim)": _nograd(torch, cummax)}


@program(name="rolling max drawdown over trailing windows of W days (W free): for w in W, running peak per window start",
         kind="finance", src="""
def rolling_mdd(float(A,T) p) -> (mdd) {
  for w in W {
    if w == 0 {
      peak(a, s) = p(a, s) where s in 0:T - W + 1
      mdd(a, s) = 0.0 where a in 0:A, s in 0:T - W + 1
    } else {
      peak(a, s) = fmax(peak(a, s), p(a, s + w)) where s in 0:T - W + 1
      mdd(a, s) = fmin(mdd(a, s), p(a, s + w) / peak(a, s) - 1)
    }
  }
}
""", full=dict(A=256, T=1024, W=60), tiny=dict(A=3, T=10, W=4), free=("W",),
    inputs=lambda r, s: [_h36_prices(r, s["A"], s["T"], 0.02)])
def _h36_rolling_mdd(torch, a, t, s):
    p = t[0]
    W = s["W"]

    def unfold():
        win = p.unfold(1, W, 1)
        return (win / torch.cummax(win, -1).values - 1).amin(-1)
    return {"unfold + cummax over the window + amin": _nograd(torch, unfold)}


@program(name="wilder rsi: gains and losses from close diffs, seeded by an N-day mean (N free), smoothed (N-1)/N for t in N+1:T",
         kind="finance", src="""
def rsi_wilder(float(A,T) c) -> (rsi) {
  g0(a) +=! fmax(c(a, k + 1) - c(a, k), 0.0) / N where k in 0:N
  l0(a) +=! fmax(c(a, k) - c(a, k + 1), 0.0) / N where k in 0:N
  for t in N:T {
    if t == N {
      ag(a) = g0(a)
      al(a) = l0(a)
    } else {
      ag(a) = (ag(a) * (N - 1) + fmax(c(a, t) - c(a, t - 1), 0.0)) / N
      al(a) = (al(a) * (N - 1) + fmax(c(a, t - 1) - c(a, t), 0.0)) / N
    }
    rsi(a, t) = 100.0 - 100.0 / (1.0 + ag(a) / al(a))
  }
}
""", full=dict(A=2048, T=512, N=14), tiny=dict(A=3, T=12, N=4), free=("N",),
    inputs=lambda r, s: [_h36_prices(r, s["A"], s["T"])])
def _h36_rsi(torch, a, t, s):
    c = t[0]
    N = s["N"]

    def loop():
        d = c.diff(dim=1).t().contiguous()         # d[k] = c[k + 1] - c[k]
        gain, loss = d.clamp(min=0), (-d).clamp(min=0)
        ag, al = gain[:N].mean(0), loss[:N].mean(0)
        out = [torch.zeros_like(ag)] * N + [100 - 100 / (1 + ag / al)]
        for k in range(N, d.shape[0]):
            ag = (ag * (N - 1) + gain[k]) / N
            al = (al * (N - 1) + loss[k]) / N
            out.append(100 - 100 / (1 + ag / al))
        return torch.stack(out, 1)
    return {"python loop over T: wilder smoothing of clamped diffs": _nograd(torch, loop)}


@program(name="macd(12, 26, 9): ema states without a time index updated in place, macd line, signal ema and histogram",
         kind="finance", src="""
def macd(float(A,T) c) -> (line, signal, hist) {
  for t in T {
    if t == 0 {
      fast(a) = c(a, t)
      slow(a) = c(a, t)
    } else {
      fast(a) = fast(a) + 2.0 / 13.0 * (c(a, t) - fast(a))
      slow(a) = slow(a) + 2.0 / 27.0 * (c(a, t) - slow(a))
    }
    line(a, t) = fast(a) - slow(a)
    if t == 0 { signal(a, t) = line(a, t) }
    else      { signal(a, t) = signal(a, t - 1) + 0.2 * (line(a, t) - signal(a, t - 1)) }
    hist(a, t) = line(a, t) - signal(a, t)
  }
}
""", full=dict(A=2048, T=512), tiny=dict(A=3, T=10),
    pick=lambda r: np.concatenate([x.ravel() for x in r]),
    inputs=lambda r, s: [_h36_prices(r, s["A"], s["T"])])
def _h36_macd(torch, a, t, s):
    c = t[0]

    def loop():
        ct = c.t().contiguous()
        fast = slow = ct[0]
        sig = torch.zeros_like(fast)
        lines, sigs = [sig], [sig]
        for i in range(1, ct.shape[0]):
            fast = torch.lerp(fast, ct[i], 2.0 / 13.0)
            slow = torch.lerp(slow, ct[i], 2.0 / 27.0)
            ln = fast - slow
            sig = torch.lerp(sig, ln, 0.2)
            lines.append(ln)
            sigs.append(sig)
        line, signal = torch.stack(lines, 1), torch.stack(sigs, 1)
        return torch.cat([line.ravel(), signal.ravel(), (line - signal).ravel()])
    return {"python loop over T: three lerp emas": _nograd(torch, loop)}


@program(name="black-scholes call price and greeks (delta, gamma, vega, theta, rho) with erf, per-option spot/strike/expiry/vol, scalar rate",
         kind="finance", src="""
def bs_call_greeks(float(N) S, float(N) K, float(N) tau, float(N) vol, float r)
  -> (call, delta, gamma, vega, theta, rho) {
  sq(n) = vol(n) * sqrt(tau(n))
  d1(n) = (log(S(n) / K(n)) + (r + 0.5 * vol(n) * vol(n)) * tau(n)) / sq(n)
  nd2(n) = 0.5 * (1.0 + erf((d1(n) - sq(n)) * 0.70710678))
  pdf(n) = 0.39894228 * exp(-0.5 * d1(n) * d1(n))
  kd(n) = K(n) * exp(-r * tau(n))
  delta(n) = 0.5 * (1.0 + erf(d1(n) * 0.70710678))
  call(n) = S(n) * delta(n) - kd(n) * nd2(n)
  gamma(n) = pdf(n) / (S(n) * sq(n))
  vega(n) = S(n) * pdf(n) * sqrt(tau(n))
  theta(n) = -S(n) * pdf(n) * vol(n) / (2.0 * sqrt(tau(n))) - r * kd(n) * nd2(n)
  rho(n) = tau(n) * kd(n) * nd2(n)
}
""", full=dict(N=1 << 19), tiny=dict(N=7),
    pick=lambda r: np.stack(r),
    inputs=lambda r, s: [r.uniform(80, 120, s["N"]).astype(np.float32), r.uniform(70, 130, s["N"]).astype(np.float32),
                         r.uniform(0.05, 2.0, s["N"]).astype(np.float32), r.uniform(0.1, 0.6, s["N"]).astype(np.float32),
                         _h36_f32(0.03)])
def _h36_bs(torch, a, t, s):
    S, K, tau, vol = t[:4]
    r = float(a[4])

    def vectorised():
        st = torch.sqrt(tau)
        sq = vol * st
        d1 = (torch.log(S / K) + (r + 0.5 * vol * vol) * tau) / sq
        d2 = d1 - sq
        nd1, nd2 = torch.special.ndtr(d1), torch.special.ndtr(d2)
        pdf = torch.exp(-0.5 * d1 * d1) * 0.3989422804014327
        kd = K * torch.exp(-r * tau)
        call = S * nd1 - kd * nd2
        return torch.stack([call, nd1, pdf / (S * sq), S * pdf * st,
                            -S * pdf * vol / (2 * st) - r * kd * nd2, tau * kd * nd2])
    return {"torch.special.ndtr + elementwise": _nograd(torch, vectorised)}


@program(name="monte-carlo european and up-and-out barrier calls over a strike grid from given normals z(P, S): running product and running max, for t in S",
         kind="finance", src="""
def mc_barrier(float(P,S) z, float(NK) K, float s0, float r, float sig, float dt, float H) -> (euro, knock) {
  for t in S {
    if t == 0 {
      px(p) = s0 * exp((r - 0.5 * sig * sig) * dt + sig * sqrt(dt) * z(p, t))
      hi(p) = px(p)
    } else {
      px(p) = px(p) * exp((r - 0.5 * sig * sig) * dt + sig * sqrt(dt) * z(p, t))
      hi(p) = fmax(hi(p), px(p))
    }
  }
  euro(k) +=! fmax(px(p) - K(k), 0.0)
  euro(k) = euro(k) * exp(-r * dt * S) / P
  knock(k) +=! hi(p) < H ? fmax(px(p) - K(k), 0.0) : 0.0
  knock(k) = knock(k) * exp(-r * dt * S) / P
}
""", full=dict(P=65536, S=64, NK=16), tiny=dict(P=40, S=5, NK=3),
    pick=lambda r: np.concatenate(r),
    inputs=lambda r, s: [_n(r, s["P"], s["S"]), np.linspace(80, 120, s["NK"]).astype(np.float32),
                         _h36_f32(100.0), _h36_f32(0.03), _h36_f32(0.25), _h36_f32(1.0 / 52), _h36_f32(130.0)])
def _h36_mc(torch, a, t, s):
    z, K = t[:2]
    s0, r, sig, dt, H = (float(x) for x in a[2:])
    S = z.shape[1]

    def cumprod():
        growth = torch.exp((r - 0.5 * sig * sig) * dt + sig * dt ** 0.5 * z)
        path = s0 * torch.cumprod(growth, 1)
        pay = (path[:, -1:] - K).clamp(min=0)
        alive = (path.amax(1) < H).to(z.dtype)
        disc = np.exp(-r * dt * S) / z.shape[0]
        return torch.cat([pay.sum(0) * disc, (alive @ pay) * disc])
    return {"exp + torch.cumprod + amax, payoff grid": _nograd(torch, cumprod)}


@program(name="sample covariance of (T, A) returns and the variance of P portfolios held as int32 asset ids + weights (K holdings each)",
         kind="finance", src="""
def holdings_variance(float(T,A) R, int32(P,K) ids, float(P,K) w) -> (cov, pvar) {
  mu(a) +=! R(t, a) / T
  X(t, a) = R(t, a) - mu(a)
  cov(i, j) +=! X(t, i) * X(t, j)
  cov(i, j) = cov(i, j) / (T - 1)
  pvar(p) +=! w(p, k) * cov(ids(p, k), ids(p, l)) * w(p, l)
}
""", full=dict(T=512, A=768, P=4096, K=32), tiny=dict(T=6, A=5, P=3, K=2),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1]]),
    inputs=lambda r, s: [_n(r, s["T"], s["A"]),
                         np.stack([r.choice(s["A"], s["K"], replace=False) for _ in range(s["P"])]).astype(np.int32),
                         r.dirichlet(np.ones(s["K"]), s["P"]).astype(np.float32)])
def _h36_holdings(torch, a, t, s):
    R, ids, w = t

    def gather():
        X = R - R.mean(0)
        cov = (X.t() @ X) / (R.shape[0] - 1)
        i = ids.long()
        sub = cov[i[:, :, None], i[:, None, :]]
        pvar = torch.bmm(torch.bmm(w.unsqueeze(1), sub), w.unsqueeze(2)).reshape(-1)
        return torch.cat([cov.ravel(), pvar])

    def torch_cov():
        cov = torch.cov(R.t())
        i = ids.long()
        pvar = torch.einsum("pk,pkl,pl->p", w, cov[i[:, :, None], i[:, None, :]], w)
        return torch.cat([cov.ravel(), pvar])
    return {"centred matmul + gathered (P,K,K) block + bmm": _nograd(torch, gather),
            "torch.cov + gathered block + einsum": _nograd(torch, torch_cov)}


@program(name="holt-winters additive smoothing of (B, T) series, season length M a free size: level/trend/season init from the first two seasons, for t in M:T",
         kind="finance", src="""
def holt_winters_m(float(B,T) y, float alpha, float beta, float gamma) -> (lev, tr, sea, fit) {
  l0(b) +=! y(b, j) / M where j in 0:M
  b0(b) +=! (y(b, M + j) - y(b, j)) / (M * M) where j in 0:M
  sea(b, j) = y(b, j) - l0(b) where j in 0:M
  for t in M:T {
    if t == M {
      fit(b, t) = l0(b) + b0(b) + sea(b, t - M)
      lev(b, t) = alpha * (y(b, t) - sea(b, t - M)) + (1 - alpha) * (l0(b) + b0(b))
      tr(b, t) = beta * (lev(b, t) - l0(b)) + (1 - beta) * b0(b)
    } else {
      fit(b, t) = lev(b, t - 1) + tr(b, t - 1) + sea(b, t - M)
      lev(b, t) = alpha * (y(b, t) - sea(b, t - M)) + (1 - alpha) * (lev(b, t - 1) + tr(b, t - 1))
      tr(b, t) = beta * (lev(b, t) - lev(b, t - 1)) + (1 - beta) * tr(b, t - 1)
    }
    sea(b, t) = gamma * (y(b, t) - fit(b, t) + sea(b, t - M)) + (1 - gamma) * sea(b, t - M)
  }
}
""", full=dict(B=4096, T=336, M=24), tiny=dict(B=3, T=11, M=3), free=("M",),
    pick=lambda r: np.concatenate([x.ravel() for x in r]),
    inputs=lambda r, s: [(10 + 3 * np.sin(2 * np.pi * np.arange(s["T"]) / s["M"])
                          + 0.01 * np.arange(s["T"]) + 0.5 * _n(r, s["B"], s["T"])).astype(np.float32),
                         _h36_f32(0.3), _h36_f32(0.05), _h36_f32(0.2)])
def _h36_holt_winters(torch, a, t, s):
    y = t[0]
    alpha, beta, gamma = (float(x) for x in a[1:])
    M = s["M"]

    def loop():
        B, T = y.shape
        yt = y.t().contiguous()
        zero = torch.zeros(B)
        l = yt[:M].mean(0)
        b = (yt[M:2 * M] - yt[:M]).sum(0) / (M * M)
        sea = list(yt[:M] - l)
        levs, trs, fits = [zero] * M, [zero] * M, [zero] * M
        for i in range(M, T):
            f = l + b + sea[i - M]
            ln = alpha * (yt[i] - sea[i - M]) + (1 - alpha) * (l + b)
            b = beta * (ln - l) + (1 - beta) * b
            l = ln
            sea.append(gamma * (yt[i] - f + sea[i - M]) + (1 - gamma) * sea[i - M])
            levs.append(l)
            trs.append(b)
            fits.append(f)
        return torch.cat([torch.stack(x, 1).ravel() for x in (levs, trs, sea, fits)])
    return {"python loop over T on (B,) rows, season as a list": _nograd(torch, loop)}


@program(name="riskmetrics ewma covariance (lambda scalar) over (T, A) returns, seeded with r_0 r_0^T, then P portfolio variances w S w^T",
         kind="finance", src="""
def riskmetrics(float(T,A) r, float lam, float(P,A) w) -> (S, pvar) {
  for t in T {
    if t == 0 { S(i, j) = r(t, i) * r(t, j) }
    else      { S(i, j) = lam * S(i, j) + (1 - lam) * r(t, i) * r(t, j) }
  }
  wS(p, j) +=! w(p, i) * S(i, j)
  pvar(p) +=! wS(p, j) * w(p, j)
}
""", full=dict(T=256, A=512, P=256), tiny=dict(T=5, A=4, P=2),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1]]),
    inputs=lambda r, s: [_n(r, s["T"], s["A"]), _h36_f32(0.94), _w(r, s["P"], s["A"])])
def _h36_riskmetrics(torch, a, t, s):
    r, _, w = t
    lam = float(a[1])

    def closed_form():
        T = r.shape[0]
        k = torch.arange(T - 1, -1, -1, dtype=torch.float64)
        wt = ((1 - lam) * lam ** k)
        wt[0] = lam ** (T - 1)
        S = (r * wt.to(r.dtype)[:, None]).t() @ r
        return torch.cat([S.ravel(), ((w @ S) * w).sum(1)])

    def loop():
        S = torch.outer(r[0], r[0])
        for i in range(1, r.shape[0]):
            S = torch.addr(S, r[i], r[i], beta=lam, alpha=1 - lam)
        return torch.cat([S.ravel(), ((w @ S) * w).sum(1)])
    return {"closed-form decay weights + one matmul": _nograd(torch, closed_form),
            "python loop of torch.addr": _nograd(torch, loop)}
# ==== hunt 37: particles, molecular dynamics and scientific kernels


def _h37_f32(x):
    return np.array(x, np.float32)


def _h37_lattice(r, N, spacing, jitter):
    """The first N points of a cubic lattice, each moved by a uniform jitter (no overlapping atoms)."""
    side = int(np.ceil(N ** (1 / 3)))
    g = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:N]
    return ((g + r.uniform(-jitter, jitter, (N, 3))) * spacing).astype(np.float32)


def _h37_rays(r, R, S):
    """Spheres in front of a camera at the origin; half the rays aimed near a sphere, half across the view."""
    cen = np.stack([r.uniform(-4, 4, S), r.uniform(-4, 4, S), r.uniform(6, 16, S)], 1)
    rad = r.uniform(0.4, 1.5, S)
    o = r.uniform(-0.02, 0.02, (R, 3))
    aim = cen[r.integers(0, S, R)] + r.uniform(-1.5, 1.5, (R, 3))
    wide = np.stack([r.uniform(-0.6, 0.6, R), r.uniform(-0.6, 0.6, R), np.ones(R)], 1)
    d = np.where((r.random(R) < 0.5)[:, None], aim - o, wide)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    light = np.array([0.4, 0.7, -0.6])
    return [o.astype(np.float32), d.astype(np.float32), cen.astype(np.float32), rad.astype(np.float32),
            (light / np.linalg.norm(light)).astype(np.float32)]


def _h37_mesh(r, n):
    """A jittered n x n grid of the unit square cut into 2 (n-1)^2 counter-clockwise triangles."""
    h = 1.0 / (n - 1)
    u = np.arange(n) * h
    xy = np.stack(np.meshgrid(u, u, indexing="ij"), -1).reshape(-1, 2)
    inner = (xy > 0).all(1) & (xy < 1 - h / 2).all(1)
    xy[inner] += r.uniform(-0.2 * h, 0.2 * h, (int(inner.sum()), 2))
    tris = []
    for i in range(n - 1):
        for j in range(n - 1):
            p00, p10, p01, p11 = i * n + j, (i + 1) * n + j, i * n + j + 1, (i + 1) * n + j + 1
            if r.random() < 0.5:
                tris += [(p00, p10, p11), (p00, p11, p01)]
            else:
                tris += [(p00, p10, p01), (p10, p11, p01)]
    tri = np.array(tris)[r.permutation(len(tris))]
    return [xy.astype(np.float32), tri.astype(np.int32)]


def _h37_spd(r, N, shift):
    g = r.standard_normal((N, N))
    return (g @ g.T / N + shift * np.eye(N)).astype(np.float32)


def _h37_spiked(r, B, N):
    """A batch of symmetric psd matrices with a planted top direction (a clear spectral gap)."""
    g = r.standard_normal((B, N, N))
    u = r.standard_normal((B, N, 1))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return (g @ g.transpose(0, 2, 1) / N + 3.0 * u @ u.transpose(0, 2, 1)).astype(np.float32)


@program(name="n-body softened gravity from (3, N) coordinate planes: accelerations and pair potential per particle (G, eps scalars)",
         kind="physics", src="""
def nbody_planes(float(3,N) p, float(N) m, float G, float eps) -> (acc, phi) {
  r2(i, j) = (p(0, j) - p(0, i)) * (p(0, j) - p(0, i)) + (p(1, j) - p(1, i)) * (p(1, j) - p(1, i))
           + (p(2, j) - p(2, i)) * (p(2, j) - p(2, i)) + eps * eps
  w(i, j) = m(j) * rsqrt(r2(i, j))
  acc(c, i) +=! G * w(i, j) / r2(i, j) * (p(c, j) - p(c, i))
  phi(i) +=! i != j ? -G * w(i, j) : 0.0
}
""", full=dict(N=2048), tiny=dict(N=7),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1]]),
    inputs=lambda r, s: [_n(r, 3, s["N"]), (r.uniform(0.5, 1.5, s["N"]) / s["N"]).astype(np.float32),
                         _h37_f32(1.0), _h37_f32(0.05)])
def _h37_nbody_planes(torch, a, t, s):
    p, m = t[0], t[1]
    G, eps = float(a[2]), float(a[3])

    def broadcast():
        d = p[:, None, :] - p[:, :, None]
        r2 = (d * d).sum(0) + eps * eps
        w = m * torch.rsqrt(r2)
        acc = G * (d * (w / r2)).sum(2)
        phi = -G * w.fill_diagonal_(0).sum(1)
        return torch.cat([acc.ravel(), phi])

    def matmul():
        pt = p.T
        r2 = (torch.cdist(pt, pt, compute_mode="donot_use_mm_for_euclid_dist") ** 2).add_(eps * eps)
        w = m * torch.rsqrt(r2)
        wr = (w / r2).fill_diagonal_(0)
        acc = G * (p @ wr.T - p * wr.sum(1))
        phi = -G * w.fill_diagonal_(0).sum(1)
        return torch.cat([acc.ravel(), phi])
    return {"broadcast differences, rsqrt, sum": _nograd(torch, broadcast),
            "cdist, rsqrt, p @ W^T - p * rowsum(W)": _nograd(torch, matmul)}


@program(name="n-body velocity verlet (kick-drift-kick), accelerations recomputed each step, kinetic energy per step (S free)",
         kind="physics", src="""
def nbody_verlet(float(N,3) x0, float(N,3) v0, float(N) m, float dt, float eps) -> (x, v, ke) {
  x(i, d) = x0(i, d)
  v(i, d) = v0(i, d)
  r2(i, j) +=! (x(j, d) - x(i, d)) * (x(j, d) - x(i, d))
  a(i, d) +=! m(j) * pow(r2(i, j) + eps * eps, -1.5) * (x(j, d) - x(i, d))
  for t in S {
    v(i, d) = v(i, d) + 0.5 * dt * a(i, d)
    x(i, d) = x(i, d) + dt * v(i, d)
    r2(i, j) +=! (x(j, d) - x(i, d)) * (x(j, d) - x(i, d))
    a(i, d) +=! m(j) * pow(r2(i, j) + eps * eps, -1.5) * (x(j, d) - x(i, d))
    v(i, d) = v(i, d) + 0.5 * dt * a(i, d)
    ke(t) +=! 0.5 * m(i) * v(i, d) * v(i, d)
  }
}
""", full=dict(N=768, S=8), tiny=dict(N=6, S=3), free=("S",),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel(), r[2]]),
    inputs=lambda r, s: [_n(r, s["N"], 3), _n(r, s["N"], 3) * 0.1,
                         (r.uniform(0.5, 1.5, s["N"]) / s["N"]).astype(np.float32),
                         _h37_f32(0.01), _h37_f32(0.1)])
def _h37_nbody_verlet(torch, a, t, s):
    x0, v0, m = t[0], t[1], t[2]
    dt, eps, S = float(a[3]), float(a[4]), s["S"]

    def accel(x):
        r2 = torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist").square_()
        w = (m * (r2 + eps * eps).pow_(-1.5)).fill_diagonal_(0)
        return w @ x - w.sum(1, keepdim=True) * x

    def run():
        x, v = x0, v0
        acc = accel(x)
        ke = []
        for _ in range(S):
            v = v + 0.5 * dt * acc
            x = x + dt * v
            acc = accel(x)
            v = v + 0.5 * dt * acc
            ke.append(0.5 * (m[:, None] * v * v).sum())
        return torch.cat([x.ravel(), v.ravel(), torch.stack(ke)])
    return {"python loop: cdist, pow, w @ x - rowsum(w) x": _nograd(torch, run)}


@program(name="lennard-jones cluster: forces and shifted potential energy per atom, cutoff and self-pair as one select, where bindings",
         kind="physics", src="""
def lj_cutoff(float(N,3) x, float sig, float epsl, float rc) -> (f, u) {
  r2(i, j) +=! (x(i, k) - x(j, k)) * (x(i, k) - x(j, k))
  s6(i, j) = i != j && r2(i, j) < rc * rc ? q * q * q : 0.0 where q = sig * sig / r2(i, j)
  fs(i, j) = s6(i, j) > 0.0 ? 24.0 * epsl * s6(i, j) * (2.0 * s6(i, j) - 1.0) / r2(i, j) : 0.0
  f(i, k) +=! fs(i, j) * (x(i, k) - x(j, k))
  u +=! s6(i, j) > 0.0 ? 2.0 * epsl * (s6(i, j) * (s6(i, j) - 1.0) - sc * (sc - 1.0)) / N : 0.0
        where sc = pow(sig / rc, 6.0)
}
""", full=dict(N=1331), tiny=dict(N=8),
    pick=lambda r: np.concatenate([r[0].ravel(), np.atleast_1d(r[1])]),
    inputs=lambda r, s: [_h37_lattice(r, s["N"], 1.12, 0.06), _h37_f32(1.0), _h37_f32(1.0), _h37_f32(2.5)])
def _h37_lj(torch, a, t, s):
    x = t[0]
    sig, epsl, rc = float(a[1]), float(a[2]), float(a[3])
    sc = (sig / rc) ** 6
    N = x.shape[0]

    def run():
        d = x[:, None, :] - x[None, :, :]
        r2 = (d * d).sum(2)
        mask = (r2 < rc * rc) & ~torch.eye(N, dtype=torch.bool)
        s6 = torch.where(mask, (sig * sig / r2) ** 3, 0.0)
        fs = torch.where(mask, 24.0 * epsl * s6 * (2.0 * s6 - 1.0) / r2, 0.0)
        f = fs.sum(1, keepdim=True) * x - fs @ x
        u = 2.0 * epsl * torch.where(mask, s6 * (s6 - 1.0) - sc * (sc - 1.0), 0.0).sum() / N
        return torch.cat([f.ravel(), u.reshape(1)])
    return {"broadcast r2, where masks, rowsum(fs) x - fs @ x": _nograd(torch, run)}


@program(name="sph density with the cubic spline kernel (nested select on q = r / h) over all pairs, tait equation of state",
         kind="physics", src="""
def sph_density(float(N,3) x, float(N) m, float h, float rho0, float c0) -> (rho, pr) {
  r2(i, j) +=! (x(i, d) - x(j, d)) * (x(i, d) - x(j, d))
  rho(i) +=! m(j) * (q < 1.0 ? 1.0 - 1.5 * q * q + 0.75 * q * q * q : q < 2.0 ? 0.25 * (2.0 - q) * (2.0 - q) * (2.0 - q) : 0.0)
             / (3.14159265 * h * h * h) where q = sqrt(r2(i, j)) / h
  pr(i) = c0 * c0 * rho0 / 7.0 * (pow(rho(i) / rho0, 7.0) - 1.0)
}
""", full=dict(N=2048), tiny=dict(N=9),
    pick=lambda r: np.concatenate([r[0], r[1]]),
    inputs=lambda r, s: [r.uniform(0, np.cbrt(s["N"] / 1000.0), (s["N"], 3)).astype(np.float32),
                         np.full(s["N"], 1e-3, np.float32) * r.uniform(0.9, 1.1, s["N"]).astype(np.float32),
                         _h37_f32(0.12 if s["N"] > 100 else 0.1), _h37_f32(1.0 if s["N"] > 100 else 0.6), _h37_f32(2.0)])
def _h37_sph(torch, a, t, s):
    x, m = t[0], t[1]
    h, rho0, c0 = float(a[2]), float(a[3]), float(a[4])

    def run():
        q = torch.cdist(x, x) / h
        w = torch.where(q < 1.0, 1.0 - 1.5 * q * q + 0.75 * q ** 3,
                        torch.where(q < 2.0, 0.25 * (2.0 - q) ** 3, 0.0))
        rho = (w @ m) / (torch.pi * h ** 3)
        pr = c0 * c0 * rho0 / 7.0 * ((rho / rho0) ** 7 - 1.0)
        return torch.cat([rho, pr])
    return {"torch.cdist, nested torch.where, matvec": _nograd(torch, run)}


@program(name="particles binned into a G x G grid by int32 cell ids: counts and mean velocity per cell (G and C = G * G free)",
         kind="physics", src="""
def bin_particles(float(N,2) pos, float(N,2) vel) -> (float(G,G) cnt, float(G,G,2) vmean) {
  cell(n) = min(int32(pos(n, 0) * G), G - 1) * G + min(int32(pos(n, 1) * G), G - 1)
  cflat(c) +=! cell(n) == c ? 1.0 : 0.0 where c in 0:C
  vsum(c, d) +=! cell(n) == c ? vel(n, d) : 0.0 where c in 0:C
  cnt(i, j) = cflat(i * G + j) where i in 0:G, j in 0:G
  vmean(i, j, d) = cnt(i, j) > 0.0 ? vsum(i * G + j, d) / cnt(i, j) : 0.0 where i in 0:G, j in 0:G
}
""", full=dict(N=1 << 20, G=128, C=128 * 128), tiny=dict(N=20, G=3, C=9), free=("G", "C"),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel()]),
    inputs=lambda r, s: [r.random((s["N"], 2)).astype(np.float32), _n(r, s["N"], 2)])
def _h37_binning(torch, a, t, s):
    pos, vel = t
    G = s["G"]

    def run():
        ij = (pos * G).int().clamp_(max=G - 1)
        cell = (ij[:, 0] * G + ij[:, 1]).long()
        cnt = torch.bincount(cell, minlength=G * G).to(pos.dtype)
        vsum = torch.zeros(G * G, 2).index_add_(0, cell, vel)
        vmean = torch.where(cnt[:, None] > 0, vsum / cnt[:, None], 0.0)
        return torch.cat([cnt, vmean.ravel()])
    return {"int cell ids, torch.bincount + index_add_": _nograd(torch, run)}


@program(name="radial distribution function g(r) in a periodic box: minimum image by round, int32 bins of i < j pairs (NB free)",
         kind="physics", src="""
def rdf_hist(float(N,3) x, float box) -> (g) {
  r2(i, j) +=! dd * dd where dd = x(i, k) - x(j, k) - box * round((x(i, k) - x(j, k)) / box)
  bin(i, j) = int32(sqrt(r2(i, j)) / dr) where dr = 0.5 * box / NB
  hist(b) +=! j > i && bin(i, j) == b ? 1.0 : 0.0 where b in 0:NB
  g(b) = hist(b) * box * box * box / (0.5 * N * (N - 1) * shell)
         where shell = 4.18879020 * dr * dr * dr * float((b + 1) * (b + 1) * (b + 1) - b * b * b), dr = 0.5 * box / NB
}
""", full=dict(N=1024, NB=128), tiny=dict(N=7, NB=4), free=("NB",),
    inputs=lambda r, s: (lambda box: [r.uniform(0, box, (s["N"], 3)).astype(np.float32), _h37_f32(box)])(
        float(np.cbrt(s["N"] / 0.8))))
def _h37_rdf(torch, a, t, s):
    x, box_t = t
    box, NB = float(a[1]), s["NB"]
    N = x.shape[0]
    iu = torch.triu_indices(N, N, 1)
    b = torch.arange(NB, dtype=torch.float32)
    dr = 0.5 * box_t / NB
    shell = 4.18879020 * dr ** 3 * ((b + 1) ** 3 - b ** 3)

    def run():
        d = x[iu[0]] - x[iu[1]]
        d = d - box * torch.round(d / box)
        bins = (torch.sqrt((d * d).sum(1)) / dr).int()
        hist = torch.bincount(bins[bins < NB], minlength=NB).to(x.dtype)
        return hist * box ** 3 / (0.5 * N * (N - 1) * shell)
    return {"triu pairs, round minimum image, torch.bincount": _nograd(torch, run)}


@program(name="ray-sphere intersection: nearest hit per ray by min=! and argmin=!, stable discriminant, lambert shading via hit id",
         kind="physics", src="""
def ray_spheres(float(R,3) o, float(R,3) dir, float(S,3) cen, float(S) rad, float(3) light) -> (depth, hit, shade) {
  b(r, s) +=! (cen(s, k) - o(r, k)) * dir(r, k)
  h2(r, s) +=! (o(r, k) + b(r, s) * dir(r, k) - cen(s, k)) * (o(r, k) + b(r, s) * dir(r, k) - cen(s, k))
  tt(r, s) = h2(r, s) < rad(s) * rad(s) && th > 1e-3 ? th : inf where th = b(r, s) - sqrt(rad(s) * rad(s) - h2(r, s))
  tmin(r) min=! tt(r, s)
  near(r) argmin=! tt(r, s)
  depth(r) = tmin(r) < inf ? tmin(r) : 0.0
  hit(r) = tmin(r) < inf ? near(r) : -1
  lam(r) +=! tmin(r) < inf ? (o(r, k) + tmin(r) * dir(r, k) - cen(near(r), k)) / rad(near(r)) * light(k) : 0.0
  shade(r) = fmax(lam(r), 0.0)
}
""", full=dict(R=32768, S=32), tiny=dict(R=12, S=3),
    pick=lambda r: np.concatenate([r[0], r[1].astype(np.float32), r[2]]),
    inputs=lambda r, s: _h37_rays(r, s["R"], s["S"]))
def _h37_rays_c(torch, a, t, s):
    o, d, cen, rad, light = t

    def run():
        b = ((cen[None, :, :] - o[:, None, :]) * d[:, None, :]).sum(2)
        e = o[:, None, :] + b[:, :, None] * d[:, None, :] - cen[None, :, :]
        h2 = (e * e).sum(2)
        r2 = rad * rad
        th = b - torch.sqrt(r2 - h2)
        tt = torch.where((h2 < r2) & (th > 1e-3), th, torch.inf)
        tmin, near = tt.min(1)
        ok = tmin < torch.inf
        depth = torch.where(ok, tmin, 0.0)
        hit = torch.where(ok, near, -1)
        n = (o + torch.where(ok, tmin, 0.0)[:, None] * d - cen[near]) / rad[near][:, None]
        shade = torch.where(ok, n @ light, 0.0).clamp_(min=0.0)
        return torch.cat([depth, hit.to(depth.dtype), shade])
    return {"broadcast (R, S, 3), torch.where, min(dim) + gather": _nograd(torch, run)}


@program(name="planck black-body spectra over a log wavelength grid: peak-normalised, trapezoid band fraction of sigma T^4, wien peak by argmax",
         kind="scientific", src="""
def planck(float(NT) temp, float(NL) lam) -> (rel, frac, peak) {
  B(t, l) = 1.191042e8 / pow(lam(l), 5.0) / expm1(14387.77 / (lam(l) * temp(t)))
  bmax(t) max=! B(t, l)
  rel(t, l) = B(t, l) / bmax(t)
  band(t) +=! 0.5 * (B(t, l) + B(t, l + 1)) * (lam(l + 1) - lam(l))
  frac(t) = band(t) * 3.14159265 / (5.670374e-8 * pow(temp(t), 4.0))
  at(t) argmax=! B(t, l)
  peak(t) = lam(at(t))
}
""", full=dict(NT=1024, NL=2048), tiny=dict(NT=3, NL=9),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1], r[2]]),
    inputs=lambda r, s: [r.uniform(1000, 10000, s["NT"]).astype(np.float32),
                         np.geomspace(0.2, 30.0, s["NL"]).astype(np.float32)])
def _h37_planck(torch, a, t, s):
    temp, lam = t

    def run():
        B = 1.191042e8 / lam ** 5 / torch.expm1(14387.77 / (lam * temp[:, None]))
        rel = B / B.amax(1, keepdim=True)
        frac = torch.trapezoid(B, lam, dim=1) * torch.pi / (5.670374e-8 * temp ** 4)
        peak = lam[B.argmax(1)]
        return torch.cat([rel.ravel(), frac, peak])
    return {"torch.expm1, amax, torch.trapezoid, argmax": _nograd(torch, run)}


@program(name="p1 finite-element stiffness assembly on int32 triangles: (a + 1) % 3 vertex lookups, dense K by select-sum, lumped mass",
         kind="scientific", src="""
def p1_stiffness(float(N,2) xy, int32(E,3) tri) -> (K, lump) {
  bx(e, a) = xy(tri(e, (a + 1) % 3), 1) - xy(tri(e, (a + 2) % 3), 1) where a in 0:3
  cy(e, a) = xy(tri(e, (a + 2) % 3), 0) - xy(tri(e, (a + 1) % 3), 0) where a in 0:3
  area(e) = 0.5 * (bx(e, 0) * cy(e, 1) - bx(e, 1) * cy(e, 0))
  ke(e, a, c) = (bx(e, a) * bx(e, c) + cy(e, a) * cy(e, c)) / (4.0 * area(e))
  K(p, q) +=! tri(e, a) == p && tri(e, c) == q ? ke(e, a, c) : 0.0 where p in 0:N, q in 0:N
  lump(p) +=! tri(e, a) == p ? area(e) / 3.0 : 0.0 where p in 0:N
}
""", full=dict(n=48), tiny=dict(n=3),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1]]),
    inputs=lambda r, s: _h37_mesh(r, s["n"]))
def _h37_fem(torch, a, t, s):
    xy, tri = t
    N = xy.shape[0]
    tl = tri.long()
    nxt, prv = torch.tensor([1, 2, 0]), torch.tensor([2, 0, 1])
    rows = (tl[:, :, None] * N + tl[:, None, :]).reshape(-1)
    verts = tl.reshape(-1)

    def run():
        P = xy[tl]
        bx = P[:, nxt, 1] - P[:, prv, 1]
        cy = P[:, prv, 0] - P[:, nxt, 0]
        area = 0.5 * (bx[:, 0] * cy[:, 1] - bx[:, 1] * cy[:, 0])
        ke = (bx[:, :, None] * bx[:, None, :] + cy[:, :, None] * cy[:, None, :]) / (4.0 * area[:, None, None])
        K = torch.zeros(N * N).index_add_(0, rows, ke.reshape(-1)).view(N, N)
        lump = torch.zeros(N).index_add_(0, verts, (area / 3.0).repeat_interleave(3))
        return torch.cat([K.ravel(), lump])
    return {"gather vertices, batched 3x3 ke, index_add_ into flat K": _nograd(torch, run)}


@program(name="conjugate gradient on one dense spd system, S iterations (free), alpha and beta as 0-d temporaries, residual norms",
         kind="scientific", src="""
def cg_dense(float(N,N) A, float(N) rhs) -> (x, res) {
  x(i) = 0.0 where exists rhs(i)
  r(i) = rhs(i)
  p(i) = rhs(i)
  rr +=! rhs(i) * rhs(i)
  for t in S {
    Ap(i) +=! A(i, j) * p(j)
    pAp +=! p(i) * Ap(i)
    alpha = rr / pAp
    x(i) = x(i) + alpha * p(i)
    r(i) = r(i) - alpha * Ap(i)
    rnew +=! r(i) * r(i)
    beta = rnew / rr
    p(i) = r(i) + beta * p(i)
    rr = rnew
    res(t) = sqrt(rnew)
  }
}
""", full=dict(N=1024, S=32), tiny=dict(N=6, S=4), free=("S",),
    pick=lambda r: np.concatenate([r[0], r[1]]),
    inputs=lambda r, s: [_h37_spd(r, s["N"], 0.1), _n(r, s["N"])])
def _h37_cg(torch, a, t, s):
    A, rhs = t
    S = s["S"]

    def run():
        x = torch.zeros_like(rhs)
        r = rhs.clone()
        p = rhs.clone()
        rr = torch.dot(r, r)
        res = []
        for _ in range(S):
            Ap = torch.mv(A, p)
            alpha = rr / torch.dot(p, Ap)
            x += alpha * p
            r -= alpha * Ap
            rnew = torch.dot(r, r)
            p = r + (rnew / rr) * p
            rr = rnew
            res.append(rnew)
        return torch.cat([x, torch.stack(res).sqrt()])
    return {"python loop: torch.mv + torch.dot": _nograd(torch, run)}


@program(name="batched power iteration on symmetric matrices (B, N, N): S normalised steps (free), rsqrt norm, rayleigh quotients",
         kind="scientific", src="""
def power_batched(float(B,N,N) A, float(B,N) v0) -> (v, lam) {
  v(b, i) = v0(b, i)
  for t in S {
    w(b, i) +=! A(b, i, j) * v(b, j)
    nrm(b) +=! w(b, i) * w(b, i)
    v(b, i) = w(b, i) * rsqrt(nrm(b))
  }
  av(b, i) +=! A(b, i, j) * v(b, j)
  lam(b) +=! v(b, i) * av(b, i)
}
""", full=dict(B=32, N=128, S=30), tiny=dict(B=2, N=5, S=4), free=("S",),
    pick=lambda r: np.concatenate([r[0].ravel(), r[1]]),
    inputs=lambda r, s: [_h37_spiked(r, s["B"], s["N"]), _n(r, s["B"], s["N"])])
def _h37_power(torch, a, t, s):
    A, v0 = t
    S = s["S"]

    def run():
        v = v0.unsqueeze(2)
        for _ in range(S):
            w = torch.bmm(A, v)
            v = w * torch.rsqrt((w * w).sum(1, keepdim=True))
        lam = (v * torch.bmm(A, v)).sum(1).squeeze(1)
        return torch.cat([v.ravel(), lam])
    return {"python loop: torch.bmm + rsqrt normalise": _nograd(torch, run)}


@program(name="batched matrix exponential by scaling and squaring: A / 2^Q, K taylor terms (loop variable as divisor), Q squarings (K, Q free)",
         kind="scientific", src="""
def expm_squaring(float(B,N,N) A) -> (E) {
  As(b, i, j) = A(b, i, j) / pow(2.0, float(Q))
  term(b, i, j) = i == j ? 1.0 : 0.0 where exists A(b, i, j)
  E(b, i, j) = term(b, i, j)
  for k in 1:K+1 {
    nt(b, i, j) +=! term(b, i, l) * As(b, l, j)
    term(b, i, j) = nt(b, i, j) / k
    E(b, i, j) = E(b, i, j) + term(b, i, j)
  }
  for s in Q {
    sq(b, i, j) +=! E(b, i, l) * E(b, l, j)
    E(b, i, j) = sq(b, i, j)
  }
}
""", full=dict(B=256, N=32, K=8, Q=4), tiny=dict(B=2, N=4, K=5, Q=2), free=("K", "Q"),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], s["N"]) / np.float32(np.sqrt(s["N"]))])
def _h37_expm(torch, a, t, s):
    A = t[0]
    K, Q = s["K"], s["Q"]

    def taylor():
        As = A / 2.0 ** Q
        term = torch.eye(A.shape[1]).expand_as(A)
        E = term.clone()
        for k in range(1, K + 1):
            term = torch.bmm(term, As) / k
            E += term
        for _ in range(Q):
            E = torch.bmm(E, E)
        return E
    return {"torch.linalg.matrix_exp": _nograd(torch, lambda: torch.linalg.matrix_exp(A)),
            "python loop: bmm taylor terms + squarings": _nograd(torch, taylor)}


@program(name="cloud-in-cell mass deposit on a periodic G x G grid: 4 corner weights, int32 flat cell ids with % G wrap, scatter-sum (G, C = G * G free)",
         kind="physics", src="""
def cic_deposit(float(N,2) pos, float(N) m) -> (float(G,G) rho) {
  gx(n, d) = pos(n, d) * G - 0.5
  fl(n, d) = floor(gx(n, d))
  cell(n, a, c) = ((int32(fl(n, 0)) + a) % G) * G + (int32(fl(n, 1)) + c) % G where a in 0:2, c in 0:2
  wt(n, a, c) = m(n) * (a == 0 ? 1.0 - (gx(n, 0) - fl(n, 0)) : gx(n, 0) - fl(n, 0))
                     * (c == 0 ? 1.0 - (gx(n, 1) - fl(n, 1)) : gx(n, 1) - fl(n, 1)) where a in 0:2, c in 0:2
  flat(q) +=! cell(n, a, c) == q ? wt(n, a, c) : 0.0 where q in 0:C
  rho(i, j) = flat(i * G + j) * G * G where i in 0:G, j in 0:G
}
""", full=dict(N=1 << 19, G=256, C=256 * 256), tiny=dict(N=10, G=4, C=16), free=("G", "C"),
    inputs=lambda r, s: [r.random((s["N"], 2)).astype(np.float32),
                         (r.uniform(0.5, 1.5, s["N"]) / s["N"]).astype(np.float32)])
def _h37_cic(torch, a, t, s):
    pos, m = t
    G = s["G"]

    def run():
        g = pos * G - 0.5
        fl = torch.floor(g)
        f = g - fl
        i0 = fl.long()
        ix = torch.stack([i0[:, 0] % G, (i0[:, 0] + 1) % G])
        iy = torch.stack([i0[:, 1] % G, (i0[:, 1] + 1) % G])
        wx = torch.stack([1.0 - f[:, 0], f[:, 0]])
        wy = torch.stack([1.0 - f[:, 1], f[:, 1]])
        idx = (ix[:, None, :] * G + iy[None, :, :]).reshape(-1)
        w = (m * wx[:, None, :] * wy[None, :, :]).reshape(-1)
        return torch.zeros(G * G).index_add_(0, idx, w).view(G, G) * (G * G)
    return {"floor, 4 corner ids and weights, index_add_": _nograd(torch, run)}


@program(name="static structure factor S(q) = |sum_n exp(i q.x_n)|^2 / N at reciprocal-lattice vectors, cos and sin sums",
         kind="physics", src="""
def structure_factor(float(N,3) x, float(K,3) qv) -> (sq) {
  ph(k, n) +=! qv(k, d) * x(n, d)
  re(k) +=! cos(ph(k, n))
  im(k) +=! sin(ph(k, n))
  sq(k) = (re(k) * re(k) + im(k) * im(k)) / N
}
""", full=dict(N=8192, K=512), tiny=dict(N=9, K=4),
    inputs=lambda r, s: [r.uniform(0, 20.0, (s["N"], 3)).astype(np.float32),
                         (2 * np.pi / 20.0 * r.integers(-8, 9, (s["K"], 3))).astype(np.float32)])
def _h37_sq(torch, a, t, s):
    x, qv = t
    N = x.shape[0]

    def run():
        ph = qv @ x.T
        return (torch.cos(ph).sum(1) ** 2 + torch.sin(ph).sum(1) ** 2) / N
    return {"qv @ x^T, torch.cos / torch.sin sums": _nograd(torch, run)}

# ==== hunt 38: audio and digital signal processing

def _h38_f32(v):
    return np.array(v, np.float32)


def _h38_cat(r):
    return np.concatenate([np.asarray(x).ravel() for x in r])


def _h38_rbj_lowpass(fc, fs, q=0.7071):
    """RBJ cookbook low-pass biquad, normalised by a0: (b0, b1, b2, a1, a2)."""
    w0 = 2 * np.pi * fc / fs
    al = np.sin(w0) / (2 * q)
    cw = np.cos(w0)
    a0 = 1 + al
    return [(1 - cw) / 2 / a0, (1 - cw) / a0, (1 - cw) / 2 / a0, -2 * cw / a0, (1 - al) / a0]


def _h38_sinc_lowpass(K, cutoff, gain=1.0):
    """Hamming-windowed sinc low-pass, K taps, cutoff in cycles per sample."""
    n = np.arange(K) - (K - 1) / 2
    h = 2 * cutoff * np.sinc(2 * cutoff * n) * np.hamming(K)
    return (gain * h / h.sum()).astype(np.float32)


def _h38_melfb(F, M, sr=16000):
    """Triangular HTK mel filters over F linear bins, as an (F, M) matrix (torchaudio's layout)."""
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    imel = lambda m: 700 * (10 ** (m / 2595) - 1)
    pts = imel(np.linspace(mel(0), mel(sr / 2), M + 2))
    freqs = np.linspace(0, sr / 2, F)
    fb = np.zeros((F, M), np.float32)
    for m in range(M):
        lo, c, hi = pts[m], pts[m + 1], pts[m + 2]
        fb[:, m] = np.maximum(0, np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)))
    return fb


@program(name="biquad low-pass over a batch of signals (B,T), direct form I, scalar b0 b1 b2 a1 a2, if / else if on t",
         kind="audio", src="""
# y(t) = b0 x(t) + b1 x(t-1) + b2 x(t-2) - a1 y(t-1) - a2 y(t-2), zero initial state, the same section for every signal
def biquad_df1(float(B,T) x, float b0, float b1, float b2, float a1, float a2) -> (y) {
  for t in T {
    if t == 0 {
      y(b, t) = b0 * x(b, t)
    } else if t == 1 {
      y(b, t) = b0 * x(b, t) + b1 * x(b, t - 1) - a1 * y(b, t - 1)
    } else {
      y(b, t) = b0 * x(b, t) + b1 * x(b, t - 1) + b2 * x(b, t - 2) - a1 * y(b, t - 1) - a2 * y(b, t - 2)
    }
  }
}
""", full=dict(B=256, T=2048), tiny=dict(B=3, T=9),
    inputs=lambda r, s: [_n(r, s["B"], s["T"])] + [_h38_f32(c) for c in _h38_rbj_lowpass(1000.0, 16000.0)])
def _h38_biquad(torch, a, t, s):
    F = torch.nn.functional
    x = t[0]
    b0, b1, b2, a1, a2 = (float(v) for v in a[1:])
    fir = torch.tensor([[[b2, b1, b0]]])

    def run():
        v = F.conv1d(F.pad(x[:, None], (2, 0)), fir)[:, 0].t().contiguous()   # the FIR part, (T, B)
        y = torch.empty_like(v)
        y1 = torch.zeros(v.shape[1])
        y2 = torch.zeros(v.shape[1])
        for k in range(v.shape[0]):
            yk = v[k] - a1 * y1 - a2 * y2
            y[k] = yk
            y2, y1 = y1, yk
        return y.t()
    return {"F.conv1d FIR part + python loop over t": _nograd(torch, run)}


@program(name="pre-emphasis of x and one-pole de-emphasis of y (for loop), time-major (T,B), scalar alpha",
         kind="audio", src="""
def emphasis(float(T,B) x, float(T,B) y, float alpha) -> (pe, de) {
  pe(t, b) = x(t, b) - alpha * (t > 0 ? x(t - 1, b) : 0.0) where t in 0:T
  for t in T {
    if t == 0 { de(t, b) = y(t, b) }
    else      { de(t, b) = y(t, b) + alpha * de(t - 1, b) }
  }
}
""", full=dict(T=4000, B=128), tiny=dict(T=7, B=3), pick=_h38_cat,
    inputs=lambda r, s: [_n(r, s["T"], s["B"]), _n(r, s["T"], s["B"]), _h38_f32(0.97)])
def _h38_emphasis(torch, a, t, s):
    x, y = t[0], t[1]
    alpha = float(a[2])

    def run():
        pe = x.clone()
        pe[1:] -= alpha * x[:-1]
        de = torch.empty_like(y)
        de[0] = y[0]
        for k in range(1, y.shape[0]):
            torch.add(y[k], de[k - 1], alpha=alpha, out=de[k])
        return torch.cat([pe.ravel(), de.ravel()])
    return {"slices + python loop of torch.add(out=)": _nograd(torch, run)}


@program(name="FIR filter with K = 2P+1 taps over (B,L) signals, valid and same (zero-padded, centred) outputs",
         kind="audio", src="""
# convolution (not correlation): y(n) = sum_k h(k) x(n - k); 'valid' keeps the outputs that see only samples,
# 'same' centres the filter and pads with zeros
def fir_valid_same(float(B,L) x, float(2*P+1) h) -> (yv, ys) {
  yv(b, n) +=! x(b, n + 2 * P - k) * h(k)
  ys(b, n) +=! (n + P - k >= 0 && n + P - k < L ? x(b, n + P - k) : 0) * h(k) where n in 0:L, k in 0:2*P+1
}
""", full=dict(B=32, L=32768, P=32), tiny=dict(B=2, L=13, P=2), pick=_h38_cat,
    inputs=lambda r, s: [_n(r, s["B"], s["L"]), _w(r, 2 * s["P"] + 1)])
def _h38_fir(torch, a, t, s):
    F = torch.nn.functional
    x, h = t
    P = s["P"]
    hf = h.flip(0)[None, None]

    def two_convs():
        yv = F.conv1d(x[:, None], hf)[:, 0]
        ys = F.conv1d(x[:, None], hf, padding=P)[:, 0]
        return torch.cat([yv.ravel(), ys.ravel()])

    def one_conv():
        ys = F.conv1d(x[:, None], hf, padding=P)[:, 0]
        return torch.cat([ys[:, P:ys.shape[1] - P].ravel(), ys.ravel()])
    return {"two F.conv1d (valid, padding=P)": _nograd(torch, two_convs),
            "one padded F.conv1d, valid = its middle": _nograd(torch, one_conv)}


@program(name="polyphase upsampling by 3: Q-tap phases hp(q, p), y(t) from x(t / 3 - q) and phase t % 3",
         kind="audio", src="""
# zero insertion by 3 then a 3Q-tap interpolation filter h(3q + p) = hp(q, p), written in polyphase form
def upsample3(float(B,N) x, float(Q,3) hp) -> (y) {
  y(b, t) +=! (t / 3 - q >= 0 ? x(b, t / 3 - q) : 0) * hp(q, t % 3) where t in 0:3*N, q in 0:Q
}
""", full=dict(B=32, N=16384, Q=16), tiny=dict(B=2, N=7, Q=3),
    inputs=lambda r, s: [_n(r, s["B"], s["N"]),
                         _h38_sinc_lowpass(3 * s["Q"], 1 / 6, gain=3.0).reshape(s["Q"], 3)])
def _h38_upsample3(torch, a, t, s):
    F = torch.nn.functional
    x, hp = t
    B, N = x.shape
    Q = hp.shape[0]
    h = hp.reshape(-1)[None, None]
    w = hp.t().flip(1)[:, None].contiguous()   # (3, 1, Q): phase p, taps reversed

    def transposed():
        return F.conv_transpose1d(x[:, None], h, stride=3)[:, 0, :3 * N]

    def phases():
        yp = F.conv1d(F.pad(x[:, None], (Q - 1, 0)), w)    # (B, 3, N)
        return yp.transpose(1, 2).reshape(B, 3 * N)
    return {"F.conv_transpose1d(stride=3)": _nograd(torch, transposed),
            "F.conv1d with 3 phase channels, interleave": _nograd(torch, phases)}


@program(name="decimation by 3 after a centred low-pass (2P+1 taps, zero padded), channels-first (B,C,L), full-rate temporary",
         kind="audio", src="""
def lowpass_decimate3(float(B,C,L) x, float(2*P+1) h) -> (y) {
  lp(b, c, t) +=! (t + P - k >= 0 && t + P - k < L ? x(b, c, t + P - k) : 0) * h(k) where t in 0:L, k in 0:2*P+1
  y(b, c, n) = lp(b, c, 3 * n)
}
""", full=dict(B=16, C=2, L=48000, P=24), tiny=dict(B=2, C=2, L=11, P=2),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _h38_sinc_lowpass(2 * s["P"] + 1, 1 / 6)])
def _h38_decimate3(torch, a, t, s):
    F = torch.nn.functional
    x, h = t
    B, C, L = x.shape
    P = s["P"]
    hf = h.flip(0)[None, None]

    def strided():
        return F.conv1d(x.reshape(B * C, 1, L), hf, stride=3, padding=P).reshape(B, C, -1)

    def full_then_slice():
        return F.conv1d(x.reshape(B * C, 1, L), hf, padding=P)[:, 0, ::3].reshape(B, C, -1)
    return {"F.conv1d(stride=3, padding=P)": _nograd(torch, strided),
            "F.conv1d(padding=P)[..., ::3]": _nograd(torch, full_then_slice)}


@program(name="mel energies in dB from magnitudes, channels-first (B,F,T), fb (F,M), top_db=80 clamp per utterance",
         kind="audio", src="""
# power inside the sum, 10 log10 with a floor, then everything below (utterance max - 80 dB) raised to it
def mel_db(float(B,F,T) mag, float(F,M) fb) -> (db) {
  mel(b, m, t) +=! fb(f, m) * mag(b, f, t) * mag(b, f, t)
  db(b, m, t) = 10 * log10(fmax(mel(b, m, t), 1e-10))
  top(b) max=! db(b, m, t)
  db(b, m, t) = fmax(db(b, m, t), top(b) - 80)
}
""", full=dict(B=16, F=513, T=400, M=128), tiny=dict(B=2, F=9, T=5, M=3),
    inputs=lambda r, s: [np.abs(_n(r, s["B"], s["F"], s["T"])) * np.where(r.random((s["B"], 1, s["T"])) < 0.2,
                                                                          1e-5, 1.0).astype(np.float32),
                         _h38_melfb(s["F"], s["M"])])
def _h38_mel_db(torch, a, t, s):
    mag, fb = t

    def run():
        mel = torch.matmul(fb.t(), mag * mag)
        db = 10 * torch.log10(mel.clamp(min=1e-10))
        return torch.maximum(db, db.amax((1, 2), keepdim=True) - 80)
    return {"torch matmul + log10 + amax clamp": _nograd(torch, run)}


@program(name="mfcc: log-mel from a power spectrogram (B,T,F), orthonormal dct-ii matrix built with cos in the program (NC free)",
         kind="audio", src="""
def mfcc(float(B,T,F) pw, float(M,F) fb) -> (cc) {
  lm(b, t, m) +=! pw(b, t, f) * fb(m, f)
  lm(b, t, m) = log(lm(b, t, m) + 1e-6)
  dct(m, k) = cos(3.141592653589793 / M * (m + 0.5) * k) * (k == 0 ? sqrt(1.0 / M) : sqrt(2.0 / M))
      where m in 0:M, k in 0:NC
  cc(b, t, k) +=! lm(b, t, m) * dct(m, k)
}
""", full=dict(B=16, T=500, F=257, M=40, NC=13), tiny=dict(B=2, T=3, F=9, M=4, NC=3), free=("NC",),
    inputs=lambda r, s: [(_n(r, s["B"], s["T"], s["F"]) ** 2).astype(np.float32),
                         np.ascontiguousarray(_h38_melfb(s["F"], s["M"]).T)])
def _h38_mfcc(torch, a, t, s):
    pw, fb = t
    M, NC = s["M"], s["NC"]
    m = torch.arange(M, dtype=torch.float64)[:, None]
    k = torch.arange(NC, dtype=torch.float64)[None, :]
    dct = torch.cos(np.pi / M * (m + 0.5) * k)
    dct[:, 0] *= np.sqrt(1.0 / M)
    dct[:, 1:] *= np.sqrt(2.0 / M)
    dct = dct.float()

    def run():
        return torch.log(torch.matmul(pw, fb.t()) + 1e-6) @ dct
    return {"matmul + log + precomputed dct matmul": _nograd(torch, run)}


@program(name="lpc by levinson-durbin (for loop over the order P, free) from frame autocorrelations, hop 160, window (N)",
         kind="audio", src="""
# frames x(b, 160 f + n) win(n), autocorrelation lags 0..P, then the recursion: at order i + 1,
# k = (r(i + 1) - sum_{j < i} a(j) r(i - j)) / err, a(j) -= k a(i - 1 - j), a(i) = k, err *= 1 - k^2
def lpc_levinson(float(B,S) x, float(N) win) -> (a, err) {
  fr(b, f, n) = x(b, 160 * f + n) * win(n)
  r(b, f, l) +=! n + l < N ? fr(b, f, n) * fr(b, f, n + l) : 0.0 where l in 0:P+1, n in 0:N
  err(b, f) = r(b, f, 0)
  a(b, f, j) = 0.0 where exists err(b, f), j in 0:P
  for i in P {
    acc(b, f) +=! j < i ? a(b, f, j) * r(b, f, i - j) : 0.0 where j in 0:P
    kr(b, f) = (r(b, f, i + 1) - acc(b, f)) / err(b, f)
    prev(b, f, j) = a(b, f, j)
    a(b, f, j) = j < i ? prev(b, f, j) - kr(b, f) * prev(b, f, i - 1 - j) : (j == i ? kr(b, f) : 0.0)
        where j in 0:P
    err(b, f) = err(b, f) * (1 - kr(b, f) * kr(b, f))
  }
}
""", full=dict(B=32, S=16000, N=400, P=16), tiny=dict(B=2, S=520, N=40, P=3), free=("P",), pick=_h38_cat,
    inputs=lambda r, s: [_n(r, s["B"], s["S"]), np.hamming(s["N"]).astype(np.float32)])
def _h38_lpc(torch, a, t, s):
    x, win = t
    N, P = win.shape[0], s["P"]

    def levinson(r):
        a = torch.zeros(r.shape[:-1] + (P,))
        err = r[..., 0].clone()
        for i in range(P):
            k = (r[..., i + 1] - (a[..., :i] * r[..., 1:i + 1].flip(-1)).sum(-1)) / err
            prev = a[..., :i].clone()
            a[..., :i] = prev - k[..., None] * prev.flip(-1)
            a[..., i] = k
            err = err * (1 - k * k)
        return torch.cat([a.ravel(), err.ravel()])

    def direct():
        fr = x.unfold(1, N, 160) * win
        r = torch.stack([(fr[..., :N - l] * fr[..., l:]).sum(-1) for l in range(P + 1)], -1)
        return levinson(r)

    def fft():
        fr = x.unfold(1, N, 160) * win
        r = torch.fft.irfft(torch.fft.rfft(fr, n=2 * N).abs().square(), n=2 * N)[..., :P + 1]
        return levinson(r)
    return {"unfold + lag products + batched levinson loop": _nograd(torch, direct),
            "unfold + rfft |X|^2 irfft + batched levinson loop": _nograd(torch, fft)}


@program(name="overlap-add synthesis of windowed frames (B,NF,F), hop 128, y(b, 128 f + k) += in a for loop, / window-square sum",
         kind="audio", src="""
def overlap_add(float(B,NF,F) fr, float(F) win) -> (y) {
  for f in NF {
    y(b, 128 * f + k) += fr(b, f, k) * win(k)
    wss(128 * f + k) += win(k) * win(k)
  }
  y(b, t) = y(b, t) / fmax(wss(t), 1e-8)
}
""", full=dict(B=16, NF=500, F=512), tiny=dict(B=2, NF=3, F=256),
    inputs=lambda r, s: [_n(r, s["B"], s["NF"], s["F"]), np.hanning(s["F"] + 2)[1:-1].astype(np.float32)])
def _h38_ola(torch, a, t, s):
    F = torch.nn.functional
    fr, win = t
    B, NF, Fl = fr.shape
    L = (NF - 1) * 128 + Fl
    idx = (128 * torch.arange(NF)[:, None] + torch.arange(Fl)).ravel()

    def fold():
        y = F.fold((fr * win).transpose(1, 2), (1, L), (1, Fl), stride=(1, 128)).view(B, L)
        wss = F.fold((win * win)[None, :, None].expand(1, Fl, NF), (1, L), (1, Fl), stride=(1, 128)).view(L)
        return y / wss.clamp(min=1e-8)

    def index_add():
        y = fr.new_zeros(B, L).index_add_(1, idx, (fr * win).reshape(B, -1))
        wss = fr.new_zeros(L).index_add_(0, idx, (win * win).repeat(NF))
        return y / wss.clamp(min=1e-8)
    return {"F.fold (col2im) for frames and window sum": _nograd(torch, fold),
            "index_add_ at 128 f + k": _nograd(torch, index_add)}


@program(name="envelope follower: one-pole attack / release picked by a select on rising |x|, where-bound prev, scalars",
         kind="audio", src="""
def envelope(float(B,T) x, float att, float rel) -> (env) {
  for t in T {
    env(b, t) = ax > prev ? att * prev + (1 - att) * ax : rel * prev + (1 - rel) * ax
      where ax = fabs(x(b, t)), prev = (t > 0 ? env(b, t - 1) : 0.0)
  }
}
""", full=dict(B=128, T=2048), tiny=dict(B=3, T=11),
    inputs=lambda r, s: [_n(r, s["B"], s["T"]) * np.linspace(0.1, 2.0, s["T"], dtype=np.float32),
                         _h38_f32(np.exp(-1 / (16000 * 0.001))), _h38_f32(np.exp(-1 / (16000 * 0.05)))])
def _h38_envelope(torch, a, t, s):
    x = t[0]
    att, rel = float(a[1]), float(a[2])

    def run():
        ax = x.abs().t().contiguous()
        env = torch.empty_like(ax)
        prev = torch.zeros(ax.shape[1])
        for k in range(ax.shape[0]):
            up = att * prev + (1 - att) * ax[k]
            down = rel * prev + (1 - rel) * ax[k]
            prev = torch.where(ax[k] > prev, up, down)
            env[k] = prev
        return env.t()
    return {"python loop over t: torch.where(rising, attack, release)": _nograd(torch, run)}


@program(name="short-time energy and zero-crossing rate of frames at int32 pitch marks start(f), window (N)",
         kind="audio", src="""
def marks_zcr_energy(float(B,S) x, int32(NF) start, float(N) win) -> (ste, zcr) {
  ste(b, f) +=! v * v where v = x(b, start(f) + n) * win(n)
  zcr(b, f) +=! (x(b, start(f) + n) >= 0) != (x(b, start(f) + n - 1) >= 0) ? 1.0 : 0.0 where n in 1:N
  zcr(b, f) = zcr(b, f) / (N - 1)
}
""", full=dict(B=32, S=48000, NF=200, N=1024), tiny=dict(B=2, S=40, NF=4, N=8), pick=_h38_cat,
    inputs=lambda r, s: [_n(r, s["B"], s["S"]),
                         np.sort(r.integers(0, s["S"] - s["N"] + 1, s["NF"])).astype(np.int32),
                         np.hanning(s["N"]).astype(np.float32)])
def _h38_zcr(torch, a, t, s):
    x, start, win = t
    idx = start.long()[:, None] + torch.arange(win.shape[0])

    def run():
        fr = x[:, idx]
        ste = (fr * win).square().sum(-1)
        pos = fr >= 0
        zcr = (pos[..., 1:] != pos[..., :-1]).sum(-1).float() / (win.shape[0] - 1)
        return torch.cat([ste.ravel(), zcr.ravel()])
    return {"gather frames x[:, start + arange] + sums": _nograd(torch, run)}


@program(name="spectral centroid and 85% rolloff from magnitudes (B,T,F): cumulative sum as a scan, first bin by argmax=!, scalar sr",
         kind="audio", src="""
def centroid_rolloff(float(B,T,F) mag, float sr) -> (cent, roll) {
  cs(b, t, f) = mag(b, t, f)
  cs(b, t, f) = cs(b, t, f) + (f > 0 ? cs(b, t, f - 1) : 0)
  num(b, t) +=! mag(b, t, f) * f
  cent(b, t) = num(b, t) / cs(b, t, F - 1) * sr / (2 * (F - 1))
  ri(b, t) argmax=! cs(b, t, f) >= 0.85 * cs(b, t, F - 1) ? 1.0 : 0.0
  roll(b, t) = ri(b, t) * sr / (2 * (F - 1))
}
""", full=dict(B=16, T=400, F=513), tiny=dict(B=2, T=3, F=9), pick=_h38_cat,
    inputs=lambda r, s: [np.abs(_n(r, s["B"], s["T"], s["F"])), _h38_f32(16000.0)])
def _h38_centroid(torch, a, t, s):
    mag = t[0]
    sr = float(a[1])
    Fb = mag.shape[-1]
    df = sr / (2 * (Fb - 1))

    def run():
        cs = torch.cumsum(mag, -1)
        cent = (mag * torch.arange(Fb, dtype=mag.dtype)).sum(-1) / cs[..., -1] * df
        ri = (cs >= 0.85 * cs[..., -1:]).int().argmax(-1)
        return torch.cat([cent.ravel(), (ri * df).ravel()])
    return {"torch.cumsum + first bin by argmax": _nograd(torch, run)}


@program(name="goertzel power at int32 target bins kbin(K): s(t) = x(t) + 2 cos(2 pi k / N) s(t-1) - s(t-2), for t in N",
         kind="audio", src="""
def goertzel(float(B,N) x, int32(K) kbin) -> (pw) {
  c(k) = 2 * cos(6.283185307179586 * float(kbin(k)) / N)
  for t in N {
    s(t, b, k) = x(b, t) + (t >= 1 ? c(k) * s(t - 1, b, k) : 0.0) - (t >= 2 ? s(t - 2, b, k) : 0.0)
  }
  pw(b, k) = s1 * s1 + s2 * s2 - c(k) * s1 * s2
    where s1 = s(N - 1, b, k), s2 = (N >= 2 ? s(N - 2, b, k) : 0.0)
}
""", full=dict(B=512, N=1024, K=8), tiny=dict(B=2, N=16, K=3),
    inputs=lambda r, s: [_n(r, s["B"], s["N"]),
                         np.sort(r.choice(np.arange(s["N"] // 16 + 1, 7 * s["N"] // 16), s["K"],
                                          replace=False)).astype(np.int32)])
def _h38_goertzel(torch, a, t, s):
    x, kbin = t
    N = x.shape[1]
    kb = kbin.long()

    def rfft():
        return torch.fft.rfft(x)[:, kb].abs().square()

    def dft_matmul():
        ang = (2 * np.pi / N) * torch.outer(torch.arange(N, dtype=torch.float64), kb.double())
        re, im = x @ torch.cos(ang).float(), x @ torch.sin(ang).float()
        return re * re + im * im
    return {"torch.fft.rfft, |X[kbin]|^2": _nograd(torch, rfft),
            "dft at the bins: x @ cos, x @ sin": _nograd(torch, dft_matmul)}


@program(name="parallel feedback comb filters (schroeder reverb) with int32 delays dl(c) and gains g(c), mean of the combs",
         kind="audio", src="""
def comb_bank(float(B,T) x, int32(C) dl, float(C) g) -> (out) {
  for t in T {
    y(c, b, t) = x(b, t) + (t >= dl(c) ? g(c) * y(c, b, t - dl(c)) : 0.0)
  }
  out(b, t) +=! y(c, b, t) / C
}
""", full=dict(B=16, T=88200, C=4), tiny=dict(B=2, T=20, C=3),
    inputs=lambda r, s: [_n(r, s["B"], s["T"]),
                         (np.array([1116, 1188, 1277, 1356], np.int32)[:s["C"]] if s["T"] > 1000
                          else r.integers(2, 7, s["C"]).astype(np.int32)),
                         r.uniform(0.7, 0.85, s["C"]).astype(np.float32)])
def _h38_combs(torch, a, t, s):
    x = t[0]
    dl, g = [int(d) for d in a[1]], [float(v) for v in a[2]]
    T = x.shape[1]

    def blocks():
        out = torch.zeros_like(x)
        for D, gc in zip(dl, g):
            y = x.clone()
            for st in range(D, T, D):
                n = min(D, T - st)
                y[:, st:st + n] += gc * y[:, st - D:st - D + n]
            out += y
        return out / len(dl)
    return {"per comb: python loop over blocks of its delay": _nograd(torch, blocks)}


# ------------------------------------------------------------ session 54: recurrent networks written in many ways


# ---------------------------------------------------------------- batch b1: recurrent networks

def _lens_b1(rng, B, T):
    lens = rng.integers(1, T + 1, B).astype(np.int32)
    lens[0] = T
    return lens


def _sig(torch, v):
    return torch.sigmoid(v)


# A. layer-normalized LSTM (Ba et al.): LN on the x and h projections, LN on c before tanh
@program(name="ln-lstm (LN on x-proj, h-proj and cell), batch-first, (4H,in)", kind="rnn", src="""
def ln_lstm(float(B,T,I) x, float(B,H) h0, float(B,H) c0, float(4*H,I) Wx, float(4*H,H) Wh,
            float(4*H) gx, float(4*H) bx, float(4*H) gh, float(4*H) bh, float(H) gc, float(H) bc,
            float(4*H) bias) -> (h, c) {
  px(b, t, r) +=! x(b, t, i) * Wx(r, i)
  mx(b, t) +=! px(b, t, r)
  mx(b, t) = mx(b, t) / float(4 * H)
  vx(b, t) +=! (px(b, t, r) - mx(b, t)) * (px(b, t, r) - mx(b, t))
  vx(b, t) = vx(b, t) / float(4 * H)
  xn(b, t, r) = (px(b, t, r) - mx(b, t)) * rsqrt(vx(b, t) + 1e-5) * gx(r) + bx(r) + bias(r)
  for t in T {
    if t == 0 { ph(b, r) +=! h0(b, k) * Wh(r, k) }
    else      { ph(b, r) +=! h(b, t - 1, k) * Wh(r, k) }
    mh(b) +=! ph(b, r)
    mh(b) = mh(b) / float(4 * H)
    vh(b) +=! (ph(b, r) - mh(b)) * (ph(b, r) - mh(b))
    vh(b) = vh(b) / float(4 * H)
    g(b, r) = xn(b, t, r) + (ph(b, r) - mh(b)) * rsqrt(vh(b) + 1e-5) * gh(r) + bh(r)
    if t == 0 { c(b, t, j) = sigmoid(g(b, H + j)) * c0(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H }
    else      { c(b, t, j) = sigmoid(g(b, H + j)) * c(b, t - 1, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) where j in 0:H }
    mc(b) +=! c(b, t, j)
    mc(b) = mc(b) / float(H)
    vc(b) +=! (c(b, t, j) - mc(b)) * (c(b, t, j) - mc(b))
    vc(b) = vc(b) / float(H)
    h(b, t, j) = sigmoid(g(b, 3 * H + j)) * tanh((c(b, t, j) - mc(b)) * rsqrt(vc(b) + 1e-5) * gc(j) + bc(j)) where j in 0:H
  }
}
""", full=dict(B=32, T=64, I=256, H=256), tiny=dict(B=2, T=3, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["I"]), _n(r, s["B"], s["H"]) * 0.5, _n(r, s["B"], s["H"]) * 0.5,
                         _w(r, 4 * s["H"], s["I"]), _w(r, 4 * s["H"], s["H"]),
                         1 + 0.1 * _n(r, 4 * s["H"]), 0.1 * _n(r, 4 * s["H"]), 1 + 0.1 * _n(r, 4 * s["H"]),
                         0.1 * _n(r, 4 * s["H"]), 1 + 0.1 * _n(r, s["H"]), 0.1 * _n(r, s["H"]), 0.1 * _n(r, 4 * s["H"])],
    pick=lambda r: r[0])
def _b1_ln_lstm(torch, a, t, s):
    x, h0, c0, Wx, Wh, gx, bx, gh, bh, gc, bc, bias = t
    F = torch.nn.functional
    H = s["H"]

    def loop():
        xn = F.layer_norm(x @ Wx.T, (4 * H,), gx, bx) + bias
        h, c, hs = h0, c0, []
        for k in range(s["T"]):
            g = xn[:, k] + F.layer_norm(h @ Wh.T, (4 * H,), gh, bh)
            i, f, gg, o = g.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
            h = torch.sigmoid(o) * torch.tanh(F.layer_norm(c, (H,), gc, bc))
            hs.append(h)
        return torch.stack(hs, 1)
    return {"torch loop": _nograd(torch, loop)}


# B. multiplicative LSTM (Krause et al. 2016), (in,out) weights, zero initial state
@program(name="multiplicative lstm (mlstm): m = (x Wmx) * (h Wmh), gates from x and m, (in,out), zero start",
         kind="rnn", src="""
def mlstm(float(T,B,I) x, float(I,H) Wmx, float(H,H) Wmh, float(I,4*H) Wx, float(H,4*H) Wm,
          float(4*H) bias) -> (h) {
  for t in T {
    xm(b, j) +=! x(t, b, i) * Wmx(i, j)
    g(b, r) +=! x(t, b, i) * Wx(i, r)
    if t > 0 {
      hm(b, j) +=! h(t - 1, b, k) * Wmh(k, j) where b in 0:B
      m(b, j) = xm(b, j) * hm(b, j)
      g(b, r) += m(b, k) * Wm(k, r)
    }
    ig(b, j) = sigmoid(g(b, j) + bias(j)) where j in 0:H
    fg(b, j) = sigmoid(g(b, H + j) + bias(H + j)) where j in 0:H
    og(b, j) = sigmoid(g(b, 2 * H + j) + bias(2 * H + j)) where j in 0:H
    ug(b, j) = tanh(g(b, 3 * H + j) + bias(3 * H + j)) where j in 0:H
    if t == 0 { c(t, b, j) = ig(b, j) * ug(b, j) }
    else      { c(t, b, j) = fg(b, j) * c(t - 1, b, j) + ig(b, j) * ug(b, j) }
    h(t, b, j) = og(b, j) * tanh(c(t, b, j))
  }
}
""", full=dict(T=64, B=32, I=256, H=512), tiny=dict(T=3, B=2, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["I"], s["H"]), _w(r, s["H"], s["H"]) * 2,
                         _w(r, s["I"], 4 * s["H"]), _w(r, s["H"], 4 * s["H"]), 0.1 * _n(r, 4 * s["H"])])
def _b1_mlstm(torch, a, t, s):
    x, Wmx, Wmh, Wx, Wm, bias = t
    H = s["H"]

    def loop():
        XM = x @ Wmx
        XG = torch.addmm(bias, x.reshape(-1, s["I"]), Wx).view(s["T"], -1, 4 * H)
        h = c = None
        hs = []
        for k in range(s["T"]):
            g = XG[k] if h is None else torch.addmm(XG[k], XM[k] * (h @ Wmh), Wm)
            i, f, o, u = g.chunk(4, 1)
            c = torch.sigmoid(i) * torch.tanh(u) if c is None else torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(u)
            h = torch.sigmoid(o) * torch.tanh(c)
            hs.append(h)
        return torch.stack(hs)
    return {"torch loop": _nograd(torch, loop)}


# C. many-to-one LSTM classifier over a padded batch, int32 lengths, state frozen past the length
@program(name="lstm classifier, padded batch: int32 lens, state frozen past len, linear head + log_softmax on last h",
         kind="rnn", src="""
def lstm_cls(float(T,B,I) x, int32(B) lens, float(4*H,I) W_ih, float(4*H,H) W_hh, float(4*H) b_ih,
             float(4*H) b_hh, float(C,H) W_fc, float(C) b_fc) -> (logp) {
  for t in T {
    g(b, r) +=! x(t, b, i) * W_ih(r, i)
    if t > 0 { g(b, r) += h(t - 1, b, k) * W_hh(r, k) }
    g(b, r) = g(b, r) + b_ih(r) + b_hh(r)
    if t == 0 {
      c(t, b, j) = t < lens(b) ? sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) : 0 where j in 0:H
      h(t, b, j) = t < lens(b) ? sigmoid(g(b, 3 * H + j)) * tanh(c(t, b, j)) : 0 where j in 0:H
    } else {
      c(t, b, j) = t < lens(b) ? sigmoid(g(b, H + j)) * c(t - 1, b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j))
                               : c(t - 1, b, j) where j in 0:H
      h(t, b, j) = t < lens(b) ? sigmoid(g(b, 3 * H + j)) * tanh(c(t, b, j)) : h(t - 1, b, j) where j in 0:H
    }
  }
  logit(b, n) +=! h(T - 1, b, j) * W_fc(n, j)
  logit(b, n) = logit(b, n) + b_fc(n)
  mx(b) max=! logit(b, n)
  se(b) +=! exp(logit(b, n) - mx(b))
  logp(b, n) = logit(b, n) - mx(b) - log(se(b))
}
""", full=dict(T=100, B=64, I=128, H=256, C=10), tiny=dict(T=4, B=3, I=5, H=4, C=3),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _lens_b1(r, s["B"], s["T"]),
                         _w(r, 4 * s["H"], s["I"]), _w(r, 4 * s["H"], s["H"]), 0.1 * _n(r, 4 * s["H"]),
                         0.1 * _n(r, 4 * s["H"]), _w(r, s["C"], s["H"]), 0.1 * _n(r, s["C"])])
def _b1_lstm_cls(torch, a, t, s):
    from torch.nn.utils.rnn import pack_padded_sequence
    F = torch.nn.functional
    lstm = torch.nn.LSTM(s["I"], s["H"]).eval()
    for p, arr in zip((lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0), a[2:6]):
        _copy(torch, p, arr)
    x, lens = t[0], t[1].long()
    W_fc, b_fc = t[6], t[7]

    def packed():
        _, (hn, _) = lstm(pack_padded_sequence(x, lens, enforce_sorted=False))
        return F.log_softmax(F.linear(hn[0], W_fc, b_fc), 1)

    def gather():
        out, _ = lstm(x)
        last = out[lens - 1, torch.arange(x.shape[1])]
        return F.log_softmax(F.linear(last, W_fc, b_fc), 1)
    return {"nn.LSTM packed": _nograd(torch, packed), "nn.LSTM padded + gather at len-1": _nograd(torch, gather)}


# D. JANET: forget-gate-only LSTM (van der Westhuizen & Lasenby 2018), beta = 1, (out,in) per gate, zero start
@program(name="janet (forget-gate-only lstm, beta 1), (out,in) per gate, zero start", kind="rnn", src="""
def janet(float(T,B,I) x, float(H,I) Wf, float(H,I) Wc, float(H,H) Uf, float(H,H) Uc, float(H) bf,
          float(H) bc) -> (h) {
  for t in T {
    sf(b, j) +=! x(t, b, i) * Wf(j, i)
    sc(b, j) +=! x(t, b, i) * Wc(j, i)
    if t > 0 {
      sf(b, j) += h(t - 1, b, k) * Uf(j, k)
      sc(b, j) += h(t - 1, b, k) * Uc(j, k)
    }
    if t == 0 { h(t, b, j) = (1 - sigmoid(sf(b, j) + bf(j))) * tanh(sc(b, j) + bc(j)) }
    else      { h(t, b, j) = sigmoid(sf(b, j) + bf(j) - 1.0) * h(t - 1, b, j)
                             + (1 - sigmoid(sf(b, j) + bf(j))) * tanh(sc(b, j) + bc(j)) }
  }
}
""", full=dict(T=128, B=16, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["H"], s["I"]), _w(r, s["H"], s["I"]),
                         _w(r, s["H"], s["H"]), _w(r, s["H"], s["H"]), 0.1 * _n(r, s["H"]), 0.1 * _n(r, s["H"])])
def _b1_janet(torch, a, t, s):
    x, Wf, Wc, Uf, Uc, bf, bc = t
    H = s["H"]
    Wcat = torch.cat([Wf, Wc]).T.contiguous()
    Ucat = torch.cat([Uf, Uc]).T.contiguous()
    bcat = torch.cat([bf, bc])

    def loop():
        X = torch.addmm(bcat, x.reshape(-1, s["I"]), Wcat).view(s["T"], -1, 2 * H)
        h, hs = None, []
        for k in range(s["T"]):
            g = X[k] if h is None else torch.addmm(X[k], h, Ucat)
            f, cc = g[:, :H], torch.tanh(g[:, H:])
            h = (1 - torch.sigmoid(f)) * cc if h is None else torch.sigmoid(f - 1.0) * h + (1 - torch.sigmoid(f)) * cc
            hs.append(h)
        return torch.stack(hs)
    return {"torch loop": _nograd(torch, loop)}


# E. bidirectional GRU text classifier: embedding, both directions in one loop, final states concatenated, linear
@program(name="bigru text classifier: int32 tokens batch-first, both directions in one loop, [h_fwd; h_bwd] -> linear",
         kind="rnn", src="""
def bigru_cls(int32(B,T) tok, float(V,E) emb, float(2,3*H,E) W_ih, float(2,3*H,H) W_hh, float(2,3*H) b_ih,
              float(2,3*H) b_hh, float(C,2*H) W_fc, float(C) b_fc) -> (logits) {
  for t in T {
    gf(b, r) +=! emb(tok(b, t), e) * W_ih(0, r, e)
    gb(b, r) +=! emb(tok(b, T - 1 - t), e) * W_ih(1, r, e)
    if t == 0 {
      hhf(b, r) = b_hh(0, r) where b in 0:B
      hhb(b, r) = b_hh(1, r) where b in 0:B
    } else {
      hhf(b, r) +=! hf(t - 1, b, k) * W_hh(0, r, k)
      hhb(b, r) +=! hb(t - 1, b, k) * W_hh(1, r, k)
      hhf(b, r) = hhf(b, r) + b_hh(0, r)
      hhb(b, r) = hhb(b, r) + b_hh(1, r)
    }
    rf(b, j) = sigmoid(gf(b, j) + b_ih(0, j) + hhf(b, j)) where j in 0:H
    zf(b, j) = sigmoid(gf(b, H + j) + b_ih(0, H + j) + hhf(b, H + j)) where j in 0:H
    nf(b, j) = tanh(gf(b, 2 * H + j) + b_ih(0, 2 * H + j) + rf(b, j) * hhf(b, 2 * H + j)) where j in 0:H
    rb(b, j) = sigmoid(gb(b, j) + b_ih(1, j) + hhb(b, j)) where j in 0:H
    zb(b, j) = sigmoid(gb(b, H + j) + b_ih(1, H + j) + hhb(b, H + j)) where j in 0:H
    nb(b, j) = tanh(gb(b, 2 * H + j) + b_ih(1, 2 * H + j) + rb(b, j) * hhb(b, 2 * H + j)) where j in 0:H
    if t == 0 {
      hf(t, b, j) = (1 - zf(b, j)) * nf(b, j)
      hb(t, b, j) = (1 - zb(b, j)) * nb(b, j)
    } else {
      hf(t, b, j) = (1 - zf(b, j)) * nf(b, j) + zf(b, j) * hf(t - 1, b, j)
      hb(t, b, j) = (1 - zb(b, j)) * nb(b, j) + zb(b, j) * hb(t - 1, b, j)
    }
  }
  logits(b, n) +=! hf(T - 1, b, j) * W_fc(n, j) + hb(T - 1, b, j) * W_fc(n, H + j)
  logits(b, n) = logits(b, n) + b_fc(n)
}
""", full=dict(B=32, T=64, V=5000, E=256, H=256, C=5), tiny=dict(B=2, T=3, V=7, E=5, H=4, C=3),
    inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["T"])).astype(np.int32), _n(r, s["V"], s["E"]),
                         _w(r, 2, 3 * s["H"], s["E"]), _w(r, 2, 3 * s["H"], s["H"]), 0.1 * _n(r, 2, 3 * s["H"]),
                         0.1 * _n(r, 2, 3 * s["H"]), _w(r, s["C"], 2 * s["H"]), 0.1 * _n(r, s["C"])])
def _b1_bigru_cls(torch, a, t, s):
    F = torch.nn.functional
    gru = torch.nn.GRU(s["E"], s["H"], batch_first=True, bidirectional=True).eval()
    for d, suf in ((0, ""), (1, "_reverse")):
        for name, arr in (("weight_ih_l0", a[2]), ("weight_hh_l0", a[3]), ("bias_ih_l0", a[4]), ("bias_hh_l0", a[5])):
            _copy(torch, getattr(gru, name + suf), arr[d])
    tok, emb, W_fc, b_fc = t[0].long(), t[1], t[6], t[7]

    def fwd():
        _, hn = gru(F.embedding(tok, emb))
        return F.linear(torch.cat([hn[0], hn[1]], 1), W_fc, b_fc)
    return {"F.embedding + nn.GRU(bidirectional)": _nograd(torch, fwd)}


# F. 3-layer GRU, batch 1 (no batch dim), a weight pair per layer, each layer its own time loop, (in,out)
@program(name="stacked gru L=3, batch 1 without batch dim, each layer its own time loop, (in,out) (I,3H)",
         kind="rnn", src="""
def gru3(float(T,I) x, float(I,3*H) Wx1, float(H,3*H) Wh1, float(H,3*H) Wx2, float(H,3*H) Wh2,
         float(H,3*H) Wx3, float(H,3*H) Wh3, float(3,3*H) bx, float(3,3*H) bh) -> (h3) {
  for t in T {
    gx(r) +=! x(t, i) * Wx1(i, r)
    if t == 0 { gh(r) = bh(0, r) }
    else      { gh(r) +=! h1(t - 1, k) * Wh1(k, r)
                gh(r) = gh(r) + bh(0, r) }
    rg(j) = sigmoid(gx(j) + bx(0, j) + gh(j)) where j in 0:H
    zg(j) = sigmoid(gx(H + j) + bx(0, H + j) + gh(H + j)) where j in 0:H
    ng(j) = tanh(gx(2 * H + j) + bx(0, 2 * H + j) + rg(j) * gh(2 * H + j)) where j in 0:H
    if t == 0 { h1(t, j) = (1 - zg(j)) * ng(j) }
    else      { h1(t, j) = (1 - zg(j)) * ng(j) + zg(j) * h1(t - 1, j) }
  }
  for t in T {
    gx(r) +=! h1(t, i) * Wx2(i, r)
    if t == 0 { gh(r) = bh(1, r) }
    else      { gh(r) +=! h2(t - 1, k) * Wh2(k, r)
                gh(r) = gh(r) + bh(1, r) }
    rg(j) = sigmoid(gx(j) + bx(1, j) + gh(j)) where j in 0:H
    zg(j) = sigmoid(gx(H + j) + bx(1, H + j) + gh(H + j)) where j in 0:H
    ng(j) = tanh(gx(2 * H + j) + bx(1, 2 * H + j) + rg(j) * gh(2 * H + j)) where j in 0:H
    if t == 0 { h2(t, j) = (1 - zg(j)) * ng(j) }
    else      { h2(t, j) = (1 - zg(j)) * ng(j) + zg(j) * h2(t - 1, j) }
  }
  for t in T {
    gx(r) +=! h2(t, i) * Wx3(i, r)
    if t == 0 { gh(r) = bh(2, r) }
    else      { gh(r) +=! h3(t - 1, k) * Wh3(k, r)
                gh(r) = gh(r) + bh(2, r) }
    rg(j) = sigmoid(gx(j) + bx(2, j) + gh(j)) where j in 0:H
    zg(j) = sigmoid(gx(H + j) + bx(2, H + j) + gh(H + j)) where j in 0:H
    ng(j) = tanh(gx(2 * H + j) + bx(2, 2 * H + j) + rg(j) * gh(2 * H + j)) where j in 0:H
    if t == 0 { h3(t, j) = (1 - zg(j)) * ng(j) }
    else      { h3(t, j) = (1 - zg(j)) * ng(j) + zg(j) * h3(t - 1, j) }
  }
}
""", full=dict(T=128, I=256, H=256), tiny=dict(T=3, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["T"], s["I"]), _w(r, s["I"], 3 * s["H"]), _w(r, s["H"], 3 * s["H"]),
                         _w(r, s["H"], 3 * s["H"]), _w(r, s["H"], 3 * s["H"]), _w(r, s["H"], 3 * s["H"]),
                         _w(r, s["H"], 3 * s["H"]), 0.1 * _n(r, 3, 3 * s["H"]), 0.1 * _n(r, 3, 3 * s["H"])])
def _b1_gru3(torch, a, t, s):
    gru = torch.nn.GRU(s["I"], s["H"], num_layers=3).eval()
    for l in range(3):
        _copy(torch, getattr(gru, f"weight_ih_l{l}"), a[1 + 2 * l].T)
        _copy(torch, getattr(gru, f"weight_hh_l{l}"), a[2 + 2 * l].T)
        _copy(torch, getattr(gru, f"bias_ih_l{l}"), a[7][l])
        _copy(torch, getattr(gru, f"bias_hh_l{l}"), a[8][l])
    x = t[0]
    return {"nn.GRU(num_layers=3)": _nograd(torch, lambda: gru(x[:, None])[0][:, 0])}


# G. char-rnn greedy sampler, 2-layer GRU (torch layout), embedding of the argmax fed back, batch 1
@program(name="char-rnn greedy sampler, 2-layer gru (3H,in) with embedding, argmax fed back, batch 1, S free",
         kind="rnn", src="""
def sampler(int32(B) start, float(V,E) emb, float(2,B,H) h0, float(3*H,E) Wi1, float(3*H,H) Wh1,
            float(3*H,H) Wi2, float(3*H,H) Wh2, float(2,3*H) bi, float(2,3*H) bh, float(V,H) Wo,
            float(V) bo) -> (tok) {
  for t in S {
    if t == 0 { xe(b, e) = emb(start(b), e) }
    else      { xe(b, e) = emb(tok(t - 1, b), e) }
    gi(b, r) +=! xe(b, e) * Wi1(r, e)
    if t == 0 { gh(b, r) +=! h0(0, b, k) * Wh1(r, k) }
    else      { gh(b, r) +=! h1(t - 1, b, k) * Wh1(r, k) }
    r1(b, j) = sigmoid(gi(b, j) + bi(0, j) + gh(b, j) + bh(0, j)) where j in 0:H
    z1(b, j) = sigmoid(gi(b, H + j) + bi(0, H + j) + gh(b, H + j) + bh(0, H + j)) where j in 0:H
    n1(b, j) = tanh(gi(b, 2 * H + j) + bi(0, 2 * H + j) + r1(b, j) * (gh(b, 2 * H + j) + bh(0, 2 * H + j))) where j in 0:H
    if t == 0 { h1(t, b, j) = (1 - z1(b, j)) * n1(b, j) + z1(b, j) * h0(0, b, j) }
    else      { h1(t, b, j) = (1 - z1(b, j)) * n1(b, j) + z1(b, j) * h1(t - 1, b, j) }
    gi2(b, r) +=! h1(t, b, k) * Wi2(r, k)
    if t == 0 { gh2(b, r) +=! h0(1, b, k) * Wh2(r, k) }
    else      { gh2(b, r) +=! h2(t - 1, b, k) * Wh2(r, k) }
    r2(b, j) = sigmoid(gi2(b, j) + bi(1, j) + gh2(b, j) + bh(1, j)) where j in 0:H
    z2(b, j) = sigmoid(gi2(b, H + j) + bi(1, H + j) + gh2(b, H + j) + bh(1, H + j)) where j in 0:H
    n2(b, j) = tanh(gi2(b, 2 * H + j) + bi(1, 2 * H + j) + r2(b, j) * (gh2(b, 2 * H + j) + bh(1, 2 * H + j))) where j in 0:H
    if t == 0 { h2(t, b, j) = (1 - z2(b, j)) * n2(b, j) + z2(b, j) * h0(1, b, j) }
    else      { h2(t, b, j) = (1 - z2(b, j)) * n2(b, j) + z2(b, j) * h2(t - 1, b, j) }
    logit(b, v) +=! h2(t, b, j) * Wo(v, j)
    tok(t, b) argmax=! logit(b, v) + bo(v)
  }
}
""", full=dict(S=100, B=1, V=96, E=64, H=512), tiny=dict(S=4, B=2, V=6, E=3, H=4), free=("S",),
    inputs=lambda r, s: [r.integers(0, s["V"], s["B"]).astype(np.int32), _n(r, s["V"], s["E"]),
                         _n(r, 2, s["B"], s["H"]) * 0.5,
                         _w(r, 3 * s["H"], s["E"]), _w(r, 3 * s["H"], s["H"]), _w(r, 3 * s["H"], s["H"]),
                         _w(r, 3 * s["H"], s["H"]), 0.1 * _n(r, 2, 3 * s["H"]), 0.1 * _n(r, 2, 3 * s["H"]),
                         _w(r, s["V"], s["H"]) * 4, 0.1 * _n(r, s["V"])])
def _b1_sampler(torch, a, t, s):
    start, emb, h0 = t[0], t[1], t[2]
    cells = []
    for l in range(2):
        cell = torch.nn.GRUCell(s["E"] if l == 0 else s["H"], s["H"]).eval()
        _copy(torch, cell.weight_ih, a[3 + 2 * l])
        _copy(torch, cell.weight_hh, a[4 + 2 * l])
        _copy(torch, cell.bias_ih, a[7][l])
        _copy(torch, cell.bias_hh, a[8][l])
        cells.append(cell)
    Wo, bo = t[9], t[10]
    F = torch.nn.functional

    def loop():
        out = torch.empty(s["S"], start.shape[0], dtype=torch.int32)
        tok, h1, h2 = start.long(), h0[0], h0[1]
        for k in range(s["S"]):
            h1 = cells[0](F.embedding(tok, emb), h1)
            h2 = cells[1](h1, h2)
            tok = F.linear(h2, Wo, bo).argmax(1)
            out[k] = tok
        return out
    return {"torch loop (GRUCell x2)": _nograd(torch, loop)}


# H. encoder-decoder: GRU encoder, teacher-forced GRU decoder with luong 'general' attention at every step
@program(name="gru encoder + teacher-forced gru decoder, luong general attention each step, concat layer, logits",
         kind="rnn", src="""
def seq2seq(float(S,B,E) xs, float(T,B,E) yd, float(3*H,E) We_i, float(3*H,H) We_h, float(3*H) be_i,
            float(3*H) be_h, float(3*H,E) Wd_i, float(3*H,H) Wd_h, float(3*H) bd_i, float(3*H) bd_h,
            float(H,H) Wa, float(H,2*H) Wc, float(V,H) Wout, float(V) bout) -> (logits) {
  for s in S {
    ge(b, r) +=! xs(s, b, e) * We_i(r, e)
    if s == 0 { he(b, r) = be_h(r) where b in 0:B }
    else      { he(b, r) +=! enc(s - 1, b, k) * We_h(r, k)
                he(b, r) = he(b, r) + be_h(r) }
    re(b, j) = sigmoid(ge(b, j) + be_i(j) + he(b, j)) where j in 0:H
    ze(b, j) = sigmoid(ge(b, H + j) + be_i(H + j) + he(b, H + j)) where j in 0:H
    ne(b, j) = tanh(ge(b, 2 * H + j) + be_i(2 * H + j) + re(b, j) * he(b, 2 * H + j)) where j in 0:H
    if s == 0 { enc(s, b, j) = (1 - ze(b, j)) * ne(b, j) }
    else      { enc(s, b, j) = (1 - ze(b, j)) * ne(b, j) + ze(b, j) * enc(s - 1, b, j) }
  }
  ke(s, b, j) +=! enc(s, b, k) * Wa(j, k)
  for t in T {
    gd(b, r) +=! yd(t, b, e) * Wd_i(r, e)
    if t == 0 { hd(b, r) +=! enc(S - 1, b, k) * Wd_h(r, k) }
    else      { hd(b, r) +=! dec(t - 1, b, k) * Wd_h(r, k) }
    rd(b, j) = sigmoid(gd(b, j) + bd_i(j) + hd(b, j) + bd_h(j)) where j in 0:H
    zd(b, j) = sigmoid(gd(b, H + j) + bd_i(H + j) + hd(b, H + j) + bd_h(H + j)) where j in 0:H
    nd(b, j) = tanh(gd(b, 2 * H + j) + bd_i(2 * H + j) + rd(b, j) * (hd(b, 2 * H + j) + bd_h(2 * H + j))) where j in 0:H
    if t == 0 { dec(t, b, j) = (1 - zd(b, j)) * nd(b, j) + zd(b, j) * enc(S - 1, b, j) }
    else      { dec(t, b, j) = (1 - zd(b, j)) * nd(b, j) + zd(b, j) * dec(t - 1, b, j) }
    sc(b, s) +=! dec(t, b, j) * ke(s, b, j)
    mx(b) max=! sc(b, s)
    al(b, s) = exp(sc(b, s) - mx(b))
    den(b) +=! al(b, s)
    ctx(b, k) +=! al(b, s) * enc(s, b, k)
    ctx(b, k) = ctx(b, k) / den(b)
    ht(b, n) +=! ctx(b, k) * Wc(n, k) + dec(t, b, k) * Wc(n, H + k)
    ht(b, n) = tanh(ht(b, n))
    logits(t, b, v) +=! ht(b, n) * Wout(v, n)
    logits(t, b, v) = logits(t, b, v) + bout(v)
  }
}
""", full=dict(S=64, T=32, B=32, E=128, H=256, V=1000), tiny=dict(S=4, T=3, B=2, E=5, H=4, V=6),
    inputs=lambda r, s: [_n(r, s["S"], s["B"], s["E"]), _n(r, s["T"], s["B"], s["E"]),
                         _w(r, 3 * s["H"], s["E"]), _w(r, 3 * s["H"], s["H"]), 0.1 * _n(r, 3 * s["H"]),
                         0.1 * _n(r, 3 * s["H"]),
                         _w(r, 3 * s["H"], s["E"]), _w(r, 3 * s["H"], s["H"]), 0.1 * _n(r, 3 * s["H"]),
                         0.1 * _n(r, 3 * s["H"]),
                         _w(r, s["H"], s["H"]) * 2, _w(r, s["H"], 2 * s["H"]), _w(r, s["V"], s["H"]),
                         0.1 * _n(r, s["V"])])
def _b1_seq2seq(torch, a, t, s):
    F = torch.nn.functional
    encg = torch.nn.GRU(s["E"], s["H"]).eval()
    decg = torch.nn.GRU(s["E"], s["H"]).eval()
    for g, arrs in ((encg, a[2:6]), (decg, a[6:10])):
        for p, arr in zip((g.weight_ih_l0, g.weight_hh_l0, g.bias_ih_l0, g.bias_hh_l0), arrs):
            _copy(torch, p, arr)
    xs, yd, Wa, Wc, Wout, bout = t[0], t[1], t[10], t[11], t[12], t[13]

    def batched():   # no input feeding: the decoder GRU runs as one nn.GRU, attention over all steps at once
        enc, hn = encg(xs)
        dec, _ = decg(yd, hn)
        ke = enc @ Wa.T                                          # (S,B,H)
        sc = torch.einsum("tbj,sbj->bts", dec, ke)
        al = torch.softmax(sc, -1)
        ctx = torch.einsum("bts,sbk->tbk", al, enc)
        ht = torch.tanh(F.linear(torch.cat([ctx, dec], -1), Wc))
        return F.linear(ht, Wout, bout)

    def loop():      # the decoder as written: a step at a time
        enc, hn = encg(xs)
        ke = (enc @ Wa.T).permute(1, 2, 0)                       # (B,H,S)
        encb = enc.transpose(0, 1)                               # (B,S,H)
        h = hn[0]
        outs = []
        for k in range(s["T"]):
            _, hh = decg(yd[k:k + 1], h[None])
            h = hh[0]
            al = torch.softmax(torch.bmm(h[:, None], ke), -1)
            ctx = torch.bmm(al, encb)[:, 0]
            ht = torch.tanh(F.linear(torch.cat([ctx, h], 1), Wc))
            outs.append(F.linear(ht, Wout, bout))
        return torch.stack(outs)
    return {"nn.GRU x2 + batched attention": _nograd(torch, batched), "torch decoder loop": _nograd(torch, loop)}


# I. minGRU in log space (Feng et al. 2024), batch-first, (out,in), positive h0 through g()
@program(name="mingru log-space recurrence (logaddexp in the loop, softplus / log_g), batch-first (out,in)",
         kind="rnn", src="""
def mingru_log(float(B,T,D) x, float(H,D) Wz, float(H,D) Wh, float(B,H) h0) -> (h) {
  k(b, t, j) +=! x(b, t, d) * Wz(j, d)
  u(b, t, j) +=! x(b, t, d) * Wh(j, d)
  lc(b, t, j) = -(max(k(b, t, j), 0) + log1p(exp(-fabs(k(b, t, j)))))
  lz(b, t, j) = -(max(-k(b, t, j), 0) + log1p(exp(-fabs(k(b, t, j)))))
  lv(b, t, j) = lz(b, t, j) + (u(b, t, j) >= 0 ? log(u(b, t, j) + 0.5)
                                             : -(max(-u(b, t, j), 0) + log1p(exp(-fabs(u(b, t, j))))))
  lh0(b, j) = h0(b, j) >= 0 ? log(h0(b, j) + 0.5) : -(max(-h0(b, j), 0) + log1p(exp(-fabs(h0(b, j)))))
  for t in T {
    if t == 0 { p(b, j) = lc(b, t, j) + lh0(b, j) }
    else      { p(b, j) = lc(b, t, j) + lh(b, t - 1, j) }
    lh(b, t, j) = max(p(b, j), lv(b, t, j)) + log1p(exp(-fabs(p(b, j) - lv(b, t, j))))
    h(b, t, j) = exp(lh(b, t, j))
  }
}
""", full=dict(B=32, T=128, D=256, H=512), tiny=dict(B=2, T=3, D=5, H=4),
    inputs=lambda r, s: [_n(r, s["B"], s["T"], s["D"]), _w(r, s["H"], s["D"]), _w(r, s["H"], s["D"]),
                         _n(r, s["B"], s["H"])])
def _b1_mingru_log(torch, a, t, s):
    F = torch.nn.functional
    x, Wz, Wh, h0 = t

    def g(v):
        return torch.where(v >= 0, v + 0.5, torch.sigmoid(v))

    def log_g(v):
        return torch.where(v >= 0, (F.relu(v) + 0.5).log(), -F.softplus(-v))

    def heinsen():   # the paper's parallel form: cumsum + logcumsumexp
        k = F.linear(x, Wz)
        u = F.linear(x, Wh)
        log_coeffs = -F.softplus(k)
        log_values = torch.cat([log_g(h0)[:, None], -F.softplus(-k) + log_g(u)], 1)
        a_star = F.pad(torch.cumsum(log_coeffs, 1), (0, 0, 1, 0))
        log_h = a_star + torch.logcumsumexp(log_values - a_star, 1)
        return torch.exp(log_h[:, 1:])

    def seq():       # the sequential form
        z = torch.sigmoid(F.linear(x, Wz))
        ht = g(F.linear(x, Wh))
        h, hs = g(h0), []
        for k in range(s["T"]):
            h = (1 - z[:, k]) * h + z[:, k] * ht[:, k]
            hs.append(h)
        return torch.stack(hs, 1)
    return {"torch parallel scan (logcumsumexp)": _nograd(torch, heinsen), "torch sequential loop": _nograd(torch, seq)}


# J. CIFG LSTM with peepholes (coupled input/forget gate, i = 1 - f), state updated in place, (in,out) stacked
@program(name="cifg lstm with peepholes (i = 1 - f), state in place + outputs y(t), (in,out) (I,3H), h0/c0",
         kind="rnn", src="""
def cifg(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(I,3*H) W, float(H,3*H) R, float(2,H) p,
         float(3*H) bias) -> (y, h, c) {
  h(b, j) = h0(b, j)
  c(b, j) = c0(b, j)
  for t in T {
    g(b, r) +=! x(t, b, i) * W(i, r)
    g(b, r) += h(b, k) * R(k, r)
    f(b, j) = sigmoid(g(b, j) + bias(j) + p(0, j) * c(b, j)) where j in 0:H
    c(b, j) = f(b, j) * c(b, j) + (1 - f(b, j)) * tanh(g(b, H + j) + bias(H + j))
    h(b, j) = sigmoid(g(b, 2 * H + j) + bias(2 * H + j) + p(1, j) * c(b, j)) * tanh(c(b, j))
    y(t, b, j) = h(b, j)
  }
}
""", full=dict(T=96, B=64, I=256, H=256), tiny=dict(T=3, B=2, I=5, H=4),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _n(r, s["B"], s["H"]) * 0.5, _n(r, s["B"], s["H"]) * 0.5,
                         _w(r, s["I"], 3 * s["H"]), _w(r, s["H"], 3 * s["H"]), 0.3 * _n(r, 2, s["H"]),
                         0.1 * _n(r, 3 * s["H"])],
    pick=lambda r: r[0])
def _b1_cifg(torch, a, t, s):
    x, h0, c0, W, R, p, bias = t
    H = s["H"]

    def loop():
        X = torch.addmm(bias, x.reshape(-1, s["I"]), W).view(s["T"], -1, 3 * H)
        h, c, ys = h0, c0, []
        for k in range(s["T"]):
            g = torch.addmm(X[k], h, R)
            f = torch.sigmoid(g[:, :H] + p[0] * c)
            c = f * c + (1 - f) * torch.tanh(g[:, H:2 * H])
            h = torch.sigmoid(g[:, 2 * H:] + p[1] * c) * torch.tanh(c)
            ys.append(h)
        return torch.stack(ys)
    return {"torch loop": _nograd(torch, loop)}


# ------------------------------------------------------------ session 54: attention, norms and losses, forward and backward


# ---------------------------------------------------------------- batch b2: attention, norms, losses, backward

def _flat(r):
    return np.concatenate([np.asarray(x, dtype=np.float32).ravel() for x in r])


def _tflat(torch, *xs):
    return torch.cat([x.reshape(-1) for x in xs])


# 1. knowledge-distillation loss: KL(teacher || student) at temperature, batchmean * tau^2
B2_KD = """
def kd_loss(float(N,C) s, float(N,C) t, float tau) -> (loss) {
  ms(n) max=! s(n, c)
  es(n, c) = exp((s(n, c) - ms(n)) / tau)
  zs(n) +=! es(n, c)
  mt(n) max=! t(n, c)
  lt(n, c) = (t(n, c) - mt(n)) / tau
  et(n, c) = exp(lt(n, c))
  zt(n) +=! et(n, c)
  kl(n) +=! et(n, c) * (lt(n, c) - log(zt(n)) - (s(n, c) - ms(n)) / tau + log(zs(n)))
  loss +=! kl(n) / zt(n) * tau * tau / N
}
"""


@program(name="distillation loss: kl(log_softmax(t/tau) || log_softmax(s/tau)) batchmean * tau^2, scalar tau",
         kind="loss", src=B2_KD, full=dict(N=4096, C=1000), tiny=dict(N=3, C=5),
         inputs=lambda r, s: [2 * _n(r, s["N"], s["C"]), 2 * _n(r, s["N"], s["C"]), np.array(4.0, np.float32)])
def _b2_kd(torch, a, t, s):
    F = torch.nn.functional
    st, tt = t[0], t[1]
    tau = float(a[2])

    def run():
        return F.kl_div(F.log_softmax(st / tau, 1), F.log_softmax(tt / tau, 1), reduction="batchmean",
                        log_target=True) * tau * tau
    return {"F.kl_div(log_target) of two F.log_softmax": _nograd(torch, run)}


# 2. rms norm backward (dx, dweight) on (B,T,C)
B2_RMS_BWD = """
def rms_bwd(float(B,T,C) x, float(C) w, float(B,T,C) dy) -> (dx, dw) {
  ms(b, t) +=! x(b, t, c) * x(b, t, c)
  r(b, t) = rsqrt(ms(b, t) / C + 1e-6)
  g(b, t, c) = dy(b, t, c) * w(c)
  dot(b, t) +=! g(b, t, c) * x(b, t, c)
  dx(b, t, c) = r(b, t) * g(b, t, c) - x(b, t, c) * r(b, t) * r(b, t) * r(b, t) * dot(b, t) / C
  dw(c) +=! dy(b, t, c) * x(b, t, c) * r(b, t)
}
"""


@program(name="rms norm backward by hand (dx, dweight) on (B,T,C), eps 1e-6", kind="training", src=B2_RMS_BWD,
         full=dict(B=16, T=256, C=768), tiny=dict(B=2, T=3, C=5),
         inputs=lambda r, s: [_n(r, s["B"], s["T"], s["C"]), 1 + 0.1 * _n(r, s["C"]), _n(r, s["B"], s["T"], s["C"])],
         pick=_flat)
def _b2_rms_bwd(torch, a, t, s):
    x, w, dy = t
    C = s["C"]

    def formula():
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        g = dy * w
        dot = (g * x).sum(-1, keepdim=True)
        dx = r * g - x * r.pow(3) * dot / C
        dw = (dy * x * r).sum((0, 1))
        return _tflat(torch, dx, dw)

    def autograd():
        xl = x.detach().requires_grad_(True)
        wl = w.detach().requires_grad_(True)
        out = torch.nn.functional.rms_norm(xl, (C,), wl, 1e-6)
        dx, dw = torch.autograd.grad(out, [xl, wl], dy)
        return _tflat(torch, dx, dw)
    return {"torch formula": _nograd(torch, formula), "autograd F.rms_norm": autograd}


# 3. log_softmax backward over the vocabulary of (B,T,V)
B2_LSM_BWD = """
def lsm_bwd(float(B,T,V) y, float(B,T,V) dy) -> (dx) {
  s(b, t) +=! dy(b, t, v)
  dx(b, t, v) = dy(b, t, v) - exp(y(b, t, v)) * s(b, t)
}
"""


def _b2_lsm_inputs(r, s):
    x = 2 * r.standard_normal((s["B"], s["T"], s["V"]))
    y = x - x.max(-1, keepdims=True)
    y = y - np.log(np.exp(y).sum(-1, keepdims=True))
    return [y.astype(np.float32), _n(r, s["B"], s["T"], s["V"])]


@program(name="log_softmax backward over the vocab of (B,T,V): dy - exp(y) sum(dy)", kind="training",
         src=B2_LSM_BWD, full=dict(B=16, T=128, V=2048), tiny=dict(B=2, T=3, V=5), inputs=_b2_lsm_inputs)
def _b2_lsm_bwd(torch, a, t, s):
    y, dy = t
    return {"torch formula": _nograd(torch, lambda: dy - y.exp() * dy.sum(-1, keepdim=True)),
            "aten._log_softmax_backward_data": _nograd(
                torch, lambda: torch.ops.aten._log_softmax_backward_data(dy, y, -1, torch.float32))}


# 4. causal attention (B,T,H,D), -1e30 select, normalised through a logsumexp
B2_CAUSAL_LSE = """
def causal_lse(float(B,T,H,D) q, float(B,T,H,D) k, float(B,T,H,D) v) -> (o) {
  s(b, h, i, j) +=! q(b, i, h, d) * k(b, j, h, d)
  sm(b, h, i, j) = j <= i ? s(b, h, i, j) * rsqrt(float(D)) : -1e30
  m(b, h, i) max=! sm(b, h, i, j)
  z(b, h, i) +=! exp(sm(b, h, i, j) - m(b, h, i))
  lse(b, h, i) = m(b, h, i) + log(z(b, h, i))
  p(b, h, i, j) = exp(sm(b, h, i, j) - lse(b, h, i))
  o(b, i, h, d) +=! p(b, h, i, j) * v(b, j, h, d)
}
"""


def _b2_bthd(r, s):
    B, T, H, D = s["B"], s["T"], s["H"], s["D"]
    return [_n(r, B, T, H, D), _n(r, B, T, H, D), _n(r, B, T, H, D)]


@program(name="causal attention (B,T,H,D), -1e30 select, softmax through logsumexp", kind="attention",
         src=B2_CAUSAL_LSE, full=dict(B=8, T=256, H=12, D=64), tiny=dict(B=1, T=4, H=2, D=3), inputs=_b2_bthd)
def _b2_causal_lse(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = (x.transpose(1, 2) for x in t)
    return {"F.sdpa(is_causal) on transposed views": _nograd(
        torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2))}


# 5. grouped-query causal prefill, (B,T,H,D) queries, (B,T,KV,D) keys/values, kv head h * KV / H
B2_GQA_CAUSAL = """
def gqa_causal(float(B,T,H,D) q, float(B,T,KV,D) k, float(B,T,KV,D) v) -> (o) {
  s(b, h, i, j) +=! q(b, i, h, d) * k(b, j, h * KV / H, d)
  m(b, h, i) max=! j <= i ? s(b, h, i, j) : -1e30
  e(b, h, i, j) = j <= i ? exp((s(b, h, i, j) - m(b, h, i)) * rsqrt(float(D))) : 0
  z(b, h, i) +=! e(b, h, i, j)
  o(b, i, h, d) +=! e(b, h, i, j) * v(b, j, h * KV / H, d)
  o(b, i, h, d) = o(b, i, h, d) / z(b, h, i)
}
"""


@program(name="grouped-query causal prefill (B,T,H,D) q, (B,T,KV,D) kv, kv head h * KV / H", kind="attention",
         src=B2_GQA_CAUSAL, full=dict(B=4, T=512, H=8, KV=2, D=64), tiny=dict(B=1, T=4, H=4, KV=2, D=3),
         inputs=lambda r, s: [_n(r, s["B"], s["T"], s["H"], s["D"]), _n(r, s["B"], s["T"], s["KV"], s["D"]),
                              _n(r, s["B"], s["T"], s["KV"], s["D"])])
def _b2_gqa_causal(torch, a, t, s):
    F = torch.nn.functional
    q, k, v = (x.transpose(1, 2) for x in t)
    G = s["H"] // s["KV"]
    return {"F.sdpa(is_causal, enable_gqa)": _nograd(
        torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2)),
            "sdpa(is_causal) on repeat_interleave kv": _nograd(
        torch, lambda: F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1),
                                                      is_causal=True).transpose(1, 2))}


# 6. pre-norm sublayer: x + linear(rms_norm(x) * g), weight (out,in)
B2_RMS_LIN_RES = """
def rms_linear_res(float(B,T,C) x, float(C) g, float(C,C) W) -> (y) {
  ss(b, t) +=! x(b, t, c) * x(b, t, c)
  xn(b, t, c) = x(b, t, c) * rsqrt(ss(b, t) / C + 1e-6) * g(c)
  y(b, t, o) +=! xn(b, t, c) * W(o, c)
  y(b, t, o) = y(b, t, o) + x(b, t, o)
}
"""


@program(name="pre-norm residual sublayer: x + linear(rms_norm(x)), weight (out,in)", kind="norm",
         src=B2_RMS_LIN_RES, full=dict(B=8, T=256, C=768), tiny=dict(B=2, T=3, C=5),
         inputs=lambda r, s: [_n(r, s["B"], s["T"], s["C"]), 1 + 0.1 * _n(r, s["C"]), _w(r, s["C"], s["C"])])
def _b2_rms_lin_res(torch, a, t, s):
    F = torch.nn.functional
    x, g, W = t
    C = s["C"]
    x2 = x.reshape(-1, C)
    return {"x + F.linear(F.rms_norm)": _nograd(torch, lambda: x + F.linear(F.rms_norm(x, (C,), g, 1e-6), W)),
            "torch.addmm(x, F.rms_norm, W.T)": _nograd(
                torch, lambda: torch.addmm(x2, F.rms_norm(x2, (C,), g, 1e-6), W.T).view(x.shape))}


# 7. multi-head attention (B,H,T,D), additive key-padding bias from int32 lengths, heads merged by Wo(C,H,D)
B2_MHA_KPM_OUT = """
def mha_kpm_out(float(B,H,T,D) q, float(B,H,T,D) k, float(B,H,T,D) v, int32(B) len, float(C,H,D) Wo) -> (y) {
  bias(b, j) = j < len(b) ? 0.0 : -1e9 where j in 0:T
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  a(b, h, i, j) = s(b, h, i, j) * rsqrt(float(D)) + bias(b, j)
  m(b, h, i) max=! a(b, h, i, j)
  e(b, h, i, j) = exp(a(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! e(b, h, i, j)
  ctx(b, h, i, d) +=! e(b, h, i, j) * v(b, h, j, d)
  y(b, i, c) +=! ctx(b, h, i, d) / z(b, h, i) * Wo(c, h, d)
}
"""


def _b2_mha_inputs(r, s):
    B, H, T, D, C = s["B"], s["H"], s["T"], s["D"], s["C"]
    return [_n(r, B, H, T, D), _n(r, B, H, T, D), _n(r, B, H, T, D), r.integers(1, T + 1, B).astype(np.int32),
            (r.standard_normal((C, H, D)) / np.sqrt(H * D)).astype(np.float32)]


@program(name="mha (B,H,T,D), additive key-padding bias from int32 lengths, heads merged by Wo(C,H,D)",
         kind="attention", src=B2_MHA_KPM_OUT, full=dict(B=16, H=8, T=128, D=64, C=512),
         tiny=dict(B=2, H=2, T=4, D=3, C=5), inputs=_b2_mha_inputs)
def _b2_mha_kpm_out(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, ln, Wo = t
    B, H, T, D, C = s["B"], s["H"], s["T"], s["D"], s["C"]
    W2 = Wo.reshape(C, H * D)

    def run():
        keep = torch.arange(T)[None, :] < ln[:, None].long()
        bias = torch.zeros(B, 1, 1, T).masked_fill_(~keep[:, None, None, :], -1e9)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return F.linear(ctx.transpose(1, 2).reshape(B, T, H * D), W2)
    return {"sdpa(float mask) + F.linear": _nograd(torch, run)}


# 8. linear + tanh-gelu backward: forward recomputed, dX, dW, db
B2_LIN_GELU_BWD = """
def lin_gelu_bwd(float(N,I) x, float(O,I) W, float(O) bias, float(N,O) dy) -> (dx, dW, db) {
  pre(n, o) +=! x(n, i) * W(o, i)
  u(n, o) = pre(n, o) + bias(o)
  th(n, o) = tanh(0.7978845608 * (u(n, o) + 0.044715 * u(n, o) * u(n, o) * u(n, o)))
  g(n, o) = dy(n, o) * (0.5 * (1 + th(n, o))
            + 0.5 * u(n, o) * (1 - th(n, o) * th(n, o)) * 0.7978845608 * (1 + 0.134145 * u(n, o) * u(n, o)))
  dx(n, i) +=! g(n, o) * W(o, i)
  dW(o, i) +=! g(n, o) * x(n, i)
  db(o) +=! g(n, o)
}
"""


@program(name="linear + tanh-gelu backward (pre-activation recomputed): dX, dW, db", kind="training",
         src=B2_LIN_GELU_BWD, full=dict(N=1024, I=512, O=2048), tiny=dict(N=3, I=4, O=5),
         inputs=lambda r, s: [_n(r, s["N"], s["I"]), _w(r, s["O"], s["I"]), 0.1 * _n(r, s["O"]),
                              _n(r, s["N"], s["O"])],
         pick=_flat)
def _b2_lin_gelu_bwd(torch, a, t, s):
    F = torch.nn.functional
    x, W, b, dy = t

    def formula():
        u = F.linear(x, W, b)
        th = torch.tanh(0.7978845608 * (u + 0.044715 * u * u * u))
        g = dy * (0.5 * (1 + th) + 0.5 * u * (1 - th * th) * 0.7978845608 * (1 + 0.134145 * u * u))
        return _tflat(torch, g @ W, g.T @ x, g.sum(0))

    def autograd():
        Wl, bl, xl = (z.detach().requires_grad_(True) for z in (W, b, x))
        out = F.gelu(F.linear(xl, Wl, bl), approximate="tanh")
        dx, dW, db = torch.autograd.grad(out, [xl, Wl, bl], dy)
        return _tflat(torch, dx, dW, db)
    return {"torch formula": _nograd(torch, formula), "autograd F.gelu(F.linear, tanh)": autograd}


# 9. multi-label bce with logits, per-class pos_weight, mean
B2_BCE_PW = """
def bce_pw(float(N,C) x, float(N,C) y, float(C) pw) -> (loss) {
  sp(n, c) = log1p(exp(-fabs(x(n, c))))
  loss +=! (pw(c) * y(n, c) * (sp(n, c) + max(-x(n, c), 0.0)) + (1 - y(n, c)) * (sp(n, c) + max(x(n, c), 0.0))) / (N * C)
}
"""


@program(name="multi-label bce with logits, per-class pos_weight, mean (softplus via log1p(exp(-|x|)))",
         kind="loss", src=B2_BCE_PW, full=dict(N=4096, C=1000), tiny=dict(N=3, C=5),
         inputs=lambda r, s: [2 * _n(r, s["N"], s["C"]), (r.random((s["N"], s["C"])) < 0.1).astype(np.float32),
                              r.uniform(1, 10, s["C"]).astype(np.float32)])
def _b2_bce_pw(torch, a, t, s):
    F = torch.nn.functional
    return {"F.binary_cross_entropy_with_logits(pos_weight)": _nograd(
        torch, lambda: F.binary_cross_entropy_with_logits(t[0], t[1], pos_weight=t[2]))}


# 10. cosine attention (swin v2): l2-normalised q and k, per-head logit scale exp(min(ls, log 100))
B2_COS_ATTN = """
def cos_attn(float(B,H,T,D) q, float(B,H,T,D) k, float(B,H,T,D) v, float(H) ls) -> (o) {
  qn(b, h, i) +=! q(b, h, i, d) * q(b, h, i, d)
  kn(b, h, j) +=! k(b, h, j, d) * k(b, h, j, d)
  s(b, h, i, j) +=! q(b, h, i, d) * k(b, h, j, d)
  a(b, h, i, j) = s(b, h, i, j) * rsqrt(max(qn(b, h, i), 1e-24)) * rsqrt(max(kn(b, h, j), 1e-24)) * exp(min(ls(h), 4.605170186))
  m(b, h, i) max=! a(b, h, i, j)
  e(b, h, i, j) = exp(a(b, h, i, j) - m(b, h, i))
  z(b, h, i) +=! e(b, h, i, j)
  o(b, h, i, d) +=! e(b, h, i, j) * v(b, h, j, d) / z(b, h, i)
}
"""


@program(name="cosine attention (swin v2): normalised q, k, per-head logit scale exp(min(ls, log 100))",
         kind="attention", src=B2_COS_ATTN, full=dict(B=16, H=8, T=256, D=32), tiny=dict(B=1, H=2, T=4, D=3),
         inputs=lambda r, s: [_n(r, s["B"], s["H"], s["T"], s["D"]), _n(r, s["B"], s["H"], s["T"], s["D"]),
                              _n(r, s["B"], s["H"], s["T"], s["D"]), r.uniform(1, 5, s["H"]).astype(np.float32)])
def _b2_cos_attn(torch, a, t, s):
    F = torch.nn.functional
    q, k, v, ls = t

    def run():
        scale = torch.exp(torch.clamp(ls, max=4.605170186))[None, :, None, None]
        return F.scaled_dot_product_attention(F.normalize(q, dim=-1) * scale, F.normalize(k, dim=-1), v, scale=1.0)
    return {"F.normalize + sdpa(scale=1)": _nograd(torch, run)}


# ------------------------------------------------------------ session 54: 1-D convolutions and decoders

# ================================================================ batch b3: 1-D convolutions and decoders


# ---- 1. WaveNet layer with local conditioning, channels-last, separate filter / gate weights (k, in, out)
WAVENET_COND = """
def wavenet_cond(float(B,L,C) x, float(B,L,E) cnd, float(2,C,C) Wf, float(2,C,C) Wg, float(E,C) Vf, float(E,C) Vg,
                 float(C) bf, float(C) bg, float(C,C) Wr, float(C,C) Ws) -> (res, skip) {
  f(b, t, o) +=! (t + 8 * (k - 1) >= 0 ? x(b, t + 8 * (k - 1), c) : 0) * Wf(k, c, o) where t in 0:L, k in 0:2
  f(b, t, o) += cnd(b, t, e) * Vf(e, o)
  g(b, t, o) +=! (t + 8 * (k - 1) >= 0 ? x(b, t + 8 * (k - 1), c) : 0) * Wg(k, c, o) where t in 0:L, k in 0:2
  g(b, t, o) += cnd(b, t, e) * Vg(e, o)
  z(b, t, o) = tanh(f(b, t, o) + bf(o)) * sigmoid(g(b, t, o) + bg(o))
  res(b, t, o) +=! z(b, t, c) * Wr(c, o)
  res(b, t, o) = res(b, t, o) + x(b, t, o)
  skip(b, t, o) +=! z(b, t, c) * Ws(c, o)
}
"""


@program(name="b3 wavenet layer + local conditioning (B,L,C), d=8, weights (k,in,out)", kind="conv", src=WAVENET_COND,
         full=dict(B=8, L=2048, C=128, E=80), tiny=dict(B=2, L=19, C=3, E=2),
         inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _n(r, s["B"], s["L"], s["E"]),
                              _w(r, 2, s["C"], s["C"]), _w(r, 2, s["C"], s["C"]), _w(r, s["E"], s["C"]),
                              _w(r, s["E"], s["C"]), _w(r, s["C"]), _w(r, s["C"]), _w(r, s["C"], s["C"]),
                              _w(r, s["C"], s["C"])])
def _b3_wavenet_cond(torch, a, t, s):
    F = torch.nn.functional
    x, cnd, Wf, Wg, Vf, Vg, bf, bg, Wr, Ws = t
    C = s["C"]
    wfg = torch.cat([Wf, Wg], 2).permute(2, 1, 0).contiguous()      # (2C, C, 2)
    bfg = torch.cat([bf, bg])
    vfg = torch.cat([Vf, Vg], 1).T.contiguous()                      # (2C, E)
    WrT, WsT = Wr.T.contiguous(), Ws.T.contiguous()
    W0 = torch.cat([Wf[0], Wg[0]], 1).contiguous()                    # (C, 2C) tap at t - 8
    W1 = torch.cat([Wf[1], Wg[1]], 1).contiguous()
    V = torch.cat([Vf, Vg], 1).contiguous()

    def conv():
        h = F.conv1d(F.pad(x.transpose(1, 2), (8, 0)), wfg, bfg, dilation=8)       # (B, 2C, L)
        h = h.transpose(1, 2) + F.linear(cnd, vfg)                                   # (B, L, 2C)
        z = torch.tanh(h[..., :C]) * torch.sigmoid(h[..., C:])
        return F.linear(z, WrT) + x, F.linear(z, WsT)

    def mm():
        h = torch.addmm(bfg, x.reshape(-1, C), W1).view(x.shape[0], x.shape[1], 2 * C)
        h[:, 8:] += x[:, :-8] @ W0
        h += cnd @ V
        z = torch.tanh(h[..., :C]) * torch.sigmoid(h[..., C:])
        return torch.addmm(x.reshape(-1, C), z.reshape(-1, C), Wr).view_as(x), z @ Ws
    return {"F.conv1d(dilation=8)": _nograd(torch, conv), "matmuls on shifted x": _nograd(torch, mm)}


# ---- 2. encodec/soundstream-style downsampling conv, channels-last, K=4 stride 2 pad 1, weights (K,C,O), + bias + elu
DOWN_CL = """
def down(float(B,L,C) x, float(K,C,O) w, float(O) bias) -> (y) {
  y(b, t, o) +=! (2 * t + k - 1 >= 0 && 2 * t + k - 1 < L ? x(b, 2 * t + k - 1, c) : 0) * w(k, c, o) where t in 0:L / 2, k in 0:K
  y(b, t, o) = y(b, t, o) + bias(o) > 0 ? y(b, t, o) + bias(o) : exp(y(b, t, o) + bias(o)) - 1
}
"""


@program(name="b3 strided conv1d K=4 s=2 p=1 channels-last (B,L,C), (K,C,O) weights, + bias + elu", kind="conv",
         src=DOWN_CL, full=dict(B=16, L=2048, C=128, O=256, K=4), tiny=dict(B=2, L=10, C=3, O=5, K=4),
         inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _w(r, s["K"], s["C"], s["O"]), _w(r, s["O"])])
def _b3_down(torch, a, t, s):
    F = torch.nn.functional
    x, w, bias = t
    wt = w.permute(2, 1, 0).contiguous()
    return {"F.conv1d(stride=2, padding=1) + F.elu": _nograd(
        torch, lambda: F.elu(F.conv1d(x.transpose(1, 2), wt, bias, stride=2, padding=1)).transpose(1, 2))}


# ---- 3. wav2vec2 positional conv embedding: grouped conv (16 channels per group), K=32 pad 16, drop last, gelu, residual
POSCONV = """
def posconv(float(B,L,C) x, float(C,16,K) w, float(C) bias) -> (y) {
  p(b, t, o) +=! (t + k - K / 2 >= 0 && t + k - K / 2 < L ? x(b, t + k - K / 2, (o / 16) * 16 + i) : 0) * w(o, i, k) where t in 0:L, k in 0:K
  y(b, t, o) = x(b, t, o) + 0.5 * v * (1 + erf(v * 0.70710678)) where v = p(b, t, o) + bias(o)
}
"""


@program(name="b3 wav2vec2 pos conv: grouped conv1d (16 ch/group) K=32 pad 16 drop last, gelu, + x", kind="conv",
         src=POSCONV, full=dict(B=8, L=512, C=256, K=32), tiny=dict(B=2, L=9, C=32, K=4),
         inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _w(r, s["C"], 16, s["K"]), _w(r, s["C"])])
def _b3_posconv(torch, a, t, s):
    F = torch.nn.functional
    x, w, bias = t
    G, K = s["C"] // 16, s["K"]
    return {"F.conv1d(groups) + F.gelu": _nograd(
        torch, lambda: x + F.gelu(F.conv1d(x.transpose(1, 2), w, bias, padding=K // 2, groups=G)[..., :-1]).transpose(1, 2))}


# ---- 4. hifi-gan upsampling: leaky_relu(0.1) then conv_transpose1d K=16 stride 8 padding 4 (select on (t + 4 - k) % 8)
HIFI_UP = """
def hifi_up(float(B,C,L) x, float(C,O,16) w, float(O) bias) -> (y) {
  a(b, c, l) = x(b, c, l) > 0 ? x(b, c, l) : 0.1 * x(b, c, l)
  y(b, o, t) +=! ((t + 4 - k) % 8 == 0 && t + 4 - k >= 0 && t + 4 - k < 8 * L ? a(b, c, (t + 4 - k) / 8) : 0) * w(c, o, k) where t in 0:8 * L, k in 0:16
  y(b, o, t) = y(b, o, t) + bias(o)
}
"""


@program(name="b3 hifi-gan upsample: leaky_relu + conv_transpose1d K=16 s=8 p=4 (select on % 8)", kind="conv",
         src=HIFI_UP, full=dict(B=8, C=256, O=128, L=256), tiny=dict(B=2, C=3, O=4, L=5),
         inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _w(r, s["C"], s["O"], 16), _w(r, s["O"])])
def _b3_hifi_up(torch, a, t, s):
    F = torch.nn.functional
    x, w, bias = t
    return {"F.leaky_relu + F.conv_transpose1d": _nograd(
        torch, lambda: F.conv_transpose1d(F.leaky_relu(x, 0.1), w, bias, stride=8, padding=4))}


# ---- 5. fairseq LightConv decoder block: linear + glu, causal lightweight conv (softmax kernel per head, head c % 8), linear
LIGHTCONV = """
def lightconv(float(B,L,C) x, float(2*C,C) Wi, float(2*C) bi, float(8,7) wk, float(C,C) Wo, float(C) bo) -> (y) {
  u(b, t, r) +=! x(b, t, i) * Wi(r, i)
  v(b, t, c) = (u(b, t, c) + bi(c)) * sigmoid(u(b, t, C + c) + bi(C + c)) where c in 0:C
  m(h) max=! wk(h, k)
  e(h, k) = exp(wk(h, k) - m(h))
  s(h) +=! e(h, k)
  z(b, t, c) +=! (t + k - 6 >= 0 ? v(b, t + k - 6, c) : 0) * e(c % 8, k) / s(c % 8) where t in 0:L, k in 0:7
  y(b, t, o) +=! z(b, t, c) * Wo(o, c)
  y(b, t, o) = y(b, t, o) + bo(o)
}
"""


@program(name="b3 lightconv block (linear+glu, causal softmax-kernel depthwise K=7 head c%8, linear), (B,L,C)",
         kind="conv", src=LIGHTCONV, full=dict(B=16, L=512, C=256), tiny=dict(B=2, L=9, C=16),
         inputs=lambda r, s: [_n(r, s["B"], s["L"], s["C"]), _w(r, 2 * s["C"], s["C"]), _w(r, 2 * s["C"]),
                              _n(r, 8, 7), _w(r, s["C"], s["C"]), _w(r, s["C"])])
def _b3_lightconv(torch, a, t, s):
    F = torch.nn.functional
    x, Wi, bi, wk, Wo, bo = t
    C = s["C"]

    def run():
        v = F.glu(F.linear(x, Wi, bi), -1)                                  # (B, L, C)
        k = F.softmax(wk, -1).repeat(C // 8, 1)[:, None, :]                 # channel c: head c % 8
        z = F.conv1d(F.pad(v.transpose(1, 2), (6, 0)), k, groups=C)         # (B, C, L)
        return F.linear(z.transpose(1, 2), Wo, bo)
    return {"F.linear+F.glu+F.conv1d(groups=C)+F.linear": _nograd(torch, run)}


# ---- 6. max_pool1d K=5 s=2 pad 2 with indices (argmax=! over a -inf padded window, value by an indirect read)
MAXPOOL_IDX = """
def mpi(float(B,C,L) x) -> (y, idx) {
  j(b, c, t) argmax=! (2 * t + k - 2 >= 0 && 2 * t + k - 2 < L ? x(b, c, 2 * t + k - 2) : -inf) where t in 0:(L + 1) / 2, k in 0:5
  idx(b, c, t) = 2 * t + j(b, c, t) - 2
  y(b, c, t) = x(b, c, idx(b, c, t))
}
"""


@program(name="b3 max_pool1d K=5 s=2 pad 2 return_indices (argmax=!, -inf select, gather)", kind="conv",
         src=MAXPOOL_IDX, full=dict(B=32, C=256, L=1024), tiny=dict(B=2, C=3, L=9),
         inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"])], pick=lambda r: r[1])
def _b3_mpi(torch, a, t, s):
    F = torch.nn.functional
    return {"F.max_pool1d(return_indices=True)": _nograd(
        torch, lambda: F.max_pool1d(t[0], 5, 2, 2, return_indices=True)[1])}


# ---- 7. greedy GRU decoder, tied embeddings (logits = h emb^T), tokens batch-first, running log-prob score
GREEDY_GRU_TIED = """
def greedy_gru(float(V,H) emb, float(3*H,H) Wih, float(3*H,H) Whh, float(3*H) bih, float(3*H) bhh,
               float(B,H) h0, int32(B) bos) -> (tok, score) {
  hp(b, j) = h0(b, j)
  for t in S {
    if t == 0 { gi(b, r) +=! emb(bos(b), i) * Wih(r, i) }
    else      { gi(b, r) +=! emb(tok(b, t - 1), i) * Wih(r, i) }
    gh(b, r) +=! hp(b, k) * Whh(r, k)
    rg(b, j) = sigmoid(gi(b, j) + bih(j) + gh(b, j) + bhh(j)) where j in 0:H
    zg(b, j) = sigmoid(gi(b, H + j) + bih(H + j) + gh(b, H + j) + bhh(H + j)) where j in 0:H
    ng(b, j) = tanh(gi(b, 2 * H + j) + bih(2 * H + j) + rg(b, j) * (gh(b, 2 * H + j) + bhh(2 * H + j))) where j in 0:H
    hp(b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * hp(b, j)
    logit(b, v) +=! hp(b, j) * emb(v, j)
    tok(b, t) argmax=! logit(b, v)
    mx(b) max=! logit(b, v)
    se(b) +=! exp(logit(b, v) - mx(b))
    if t == 0 { score(b) = -log(se(b)) } else { score(b) = score(b) - log(se(b)) }
  }
}
"""


def _greedy_gru_tied_inputs(r, s):
    V, H, B = s["V"], s["H"], s["B"]
    return [_n(r, V, H), _w(r, 3 * H, H), _w(r, 3 * H, H), _w(r, 3 * H), _w(r, 3 * H), _n(r, B, H),
            r.integers(0, V, B).astype(np.int32)]


def _greedy_gru_tied_torch(torch, t, s):
    F = torch.nn.functional
    emb, Wih, Whh, bih, bhh, h0, bos = t
    H = s["H"]
    cell = torch.nn.GRUCell(H, H)
    for p, v in ((cell.weight_ih, Wih), (cell.weight_hh, Whh), (cell.bias_ih, bih), (cell.bias_hh, bhh)):
        _copy(torch, p, v.numpy())
    bos_l = bos.long()

    def loop():
        B = h0.shape[0]
        out = torch.empty(B, s["S"], dtype=torch.int64)
        score = torch.zeros(B)
        h, tok = h0, bos_l
        for k in range(s["S"]):
            h = cell(F.embedding(tok, emb), h)
            lp = F.log_softmax(F.linear(h, emb), -1)
            val, tok = lp.max(-1)
            score += val
            out[:, k] = tok
        return out, score
    return loop


@program(name="b3 greedy gru decoder, tied embeddings, tok(b, t), running log-prob score", kind="rnn",
         src=GREEDY_GRU_TIED, full=dict(S=48, B=16, H=512, V=8000), tiny=dict(S=4, B=2, H=4, V=7), free=("S",),
         inputs=_greedy_gru_tied_inputs, pick=lambda r: r[0])
def _b3_greedy_gru_tied(torch, a, t, s):
    loop = _greedy_gru_tied_torch(torch, t, s)
    return {"nn.GRUCell loop": _nograd(torch, lambda: loop()[0])}


# ---- 8. HMM forward-backward posteriors, scaled (Rabiner) probability domain, reversed backward loop
HMM_FB = """
def hmm_fb(float(T,B,S) lik, float(S,S) A, float(S) pi) -> (post) {
  for t in T {
    if t == 0 { a(t, b, j) = pi(j) * lik(t, b, j) }
    else {
      a(t, b, j) +=! a(t - 1, b, i) * A(i, j)
      a(t, b, j) = a(t, b, j) * lik(t, b, j)
    }
    c(t, b) +=! a(t, b, j)
    a(t, b, j) = a(t, b, j) / c(t, b)
  }
  for s in T {
    if s == 0 { be(T - 1 - s, b, i) = 1 where b in 0:B, i in 0:S }
    else {
      w(b, j) = lik(T - s, b, j) * be(T - s, b, j)
      be(T - 1 - s, b, i) +=! A(i, j) * w(b, j)
      be(T - 1 - s, b, i) = be(T - 1 - s, b, i) / c(T - s, b)
    }
  }
  post(t, b, j) = a(t, b, j) * be(t, b, j)
}
"""


def _hmm_inputs(r, s):
    T, B, S = s["T"], s["B"], s["S"]
    A = r.random((S, S)).astype(np.float32) + 0.05
    A /= A.sum(1, keepdims=True)
    pi = r.random(S).astype(np.float32) + 0.05
    pi /= pi.sum()
    return [(r.random((T, B, S)) + 0.01).astype(np.float32), A, pi]


@program(name="b3 hmm forward-backward posteriors, scaled probabilities, reversed loop be(T-1-s)", kind="rnn",
         src=HMM_FB, full=dict(T=256, B=32, S=256), tiny=dict(T=4, B=2, S=3), inputs=_hmm_inputs)
def _b3_hmm_fb(torch, a, t, s):
    lik, A, pi = t
    T = s["T"]

    def run():
        al = torch.empty_like(lik)
        c = torch.empty(lik.shape[:2])
        x = pi * lik[0]
        for k in range(T):
            if k > 0:
                x = (al[k - 1] @ A) * lik[k]
            c[k] = x.sum(-1)
            al[k] = x / c[k, :, None]
        be = torch.empty_like(lik)
        be[T - 1] = 1
        for k in range(T - 2, -1, -1):
            torch.matmul((lik[k + 1] * be[k + 1]), A.T, out=be[k])
            be[k] /= c[k + 1, :, None]
        return al * be
    return {"torch loop (matmul)": _nograd(torch, run)}


# ---- 9. CTC loss by the log-alpha recursion over the blank-extended labels (-1e30 as log 0)
CTC = """
def ctc(float(T,B,V) lp, int32(B,U) tgt) -> (loss) {
  ext(b, s) = s % 2 == 0 ? 0 : tgt(b, (s - 1) / 2) where s in 0:2 * U + 1
  sk(b, s) = s >= 2 && ext(b, s) != ext(b, s - 2) where s in 0:2 * U + 1
  for t in T {
    if t == 0 { al(t, b, s) = s < 2 ? lp(t, b, ext(b, s)) : -1e30 where s in 0:2 * U + 1 }
    else {
      m(b, s) = max(al(t - 1, b, s), max(s >= 1 ? al(t - 1, b, s - 1) : -1e30, s >= 2 && sk(b, s) ? al(t - 1, b, s - 2) : -1e30)) where s in 0:2 * U + 1
      al(t, b, s) = m(b, s) + log(exp(al(t - 1, b, s) - m(b, s)) + (s >= 1 ? exp(al(t - 1, b, s - 1) - m(b, s)) : 0)
                                   + (s >= 2 && sk(b, s) ? exp(al(t - 1, b, s - 2) - m(b, s)) : 0)) + lp(t, b, ext(b, s)) where s in 0:2 * U + 1
    }
  }
  loss(b) = -(mm + log(exp(x1 - mm) + exp(x2 - mm))) where x1 = al(T - 1, b, 2 * U), x2 = al(T - 1, b, 2 * U - 1), mm = max(x1, x2)
}
"""


def _b3_ctc_inputs(r, s):
    T, B, V, U = s["T"], s["B"], s["V"], s["U"]
    z = r.standard_normal((T, B, V)).astype(np.float32)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return [lp.astype(np.float32), r.integers(1, V, (B, U)).astype(np.int32)]


@program(name="b3 ctc loss, log-alpha recursion over blank-extended labels (int32 targets, skip mask)", kind="rnn",
         src=CTC, full=dict(T=256, B=16, V=64, U=48), tiny=dict(T=6, B=2, V=4, U=2), inputs=_b3_ctc_inputs)
def _b3_ctc(torch, a, t, s):
    F = torch.nn.functional
    lp, tgt = t
    tl = tgt.long()
    il = torch.full((s["B"],), s["T"], dtype=torch.long)
    ul = torch.full((s["B"],), s["U"], dtype=torch.long)
    return {"F.ctc_loss(reduction='none')": _nograd(torch, lambda: F.ctc_loss(lp, tl, il, ul, 0, "none"))}


# ---- 10. streaming causal conv1d: the left context comes from a cache of the previous chunk (nested select), + silu
STREAM_CONV = """
def stream_conv(float(B,C,L) x, float(B,C,2) cache, float(O,C,3) w, float(O) bias) -> (y, newcache) {
  y(b, o, t) +=! (t + k >= 2 ? x(b, c, t + k - 2) : cache(b, c, t + k)) * w(o, c, k) where t in 0:L, k in 0:3
  y(b, o, t) = v * sigmoid(v) where v = y(b, o, t) + bias(o)
  newcache(b, c, j) = x(b, c, L - 2 + j) where j in 0:2
}
"""


@program(name="b3 streaming causal conv1d K=3, left context from a cache (select), + bias + silu, new cache",
         kind="conv", src=STREAM_CONV, full=dict(B=8, C=256, O=256, L=512), tiny=dict(B=2, C=3, O=4, L=5),
         inputs=lambda r, s: [_n(r, s["B"], s["C"], s["L"]), _n(r, s["B"], s["C"], 2), _w(r, s["O"], s["C"], 3),
                              _w(r, s["O"])], pick=lambda r: r[0])
def _b3_stream(torch, a, t, s):
    F = torch.nn.functional
    x, cache, w, bias = t

    def run():
        xx = torch.cat([cache, x], -1)
        return F.silu(F.conv1d(xx, w, bias)), xx[..., -2:]
    return {"torch.cat + F.conv1d + F.silu": _nograd(torch, lambda: run()[0])}


# ---- 11. wav2vec2 feature encoder, first two layers: conv K=10 s=5 (1 -> C), per-channel group norm, gelu, conv K=3 s=2, gelu
W2V_FE = """
def w2v_fe(float(B,N) wav, float(C,1,10) w0, float(C) gw, float(C) gb, float(C,C,3) w1) -> (y) {
  h(b, c, t) +=! wav(b, 5 * t + k) * w0(c, 0, k) where t in 0:(N - 10) / 5 + 1
  mu(b, c) +=! h(b, c, t)
  mu(b, c) = mu(b, c) / float((N - 10) / 5 + 1)
  var(b, c) +=! (h(b, c, t) - mu(b, c)) * (h(b, c, t) - mu(b, c))
  rs(b, c) = rsqrt(var(b, c) / float((N - 10) / 5 + 1) + 1e-5)
  g(b, c, t) = 0.5 * v * (1 + erf(v * 0.70710678)) where v = (h(b, c, t) - mu(b, c)) * rs(b, c) * gw(c) + gb(c)
  y(b, o, t) +=! g(b, c, 2 * t + k) * w1(o, c, k)
  y(b, o, t) = 0.5 * y(b, o, t) * (1 + erf(y(b, o, t) * 0.70710678))
}
"""


@program(name="b3 wav2vec2 feature encoder layers 0-1: conv K=10 s=5, group norm (C groups), gelu, conv K=3 s=2, gelu",
         kind="conv", src=W2V_FE, full=dict(B=4, N=16000, C=256), tiny=dict(B=2, N=47, C=3),
         inputs=lambda r, s: [_n(r, s["B"], s["N"]), _w(r, s["C"], 1, 10), 1 + 0.1 * _n(r, s["C"]), 0.1 * _n(r, s["C"]),
                              _w(r, s["C"], s["C"], 3)])
def _b3_w2v_fe(torch, a, t, s):
    F = torch.nn.functional
    wav, w0, gw, gb, w1 = t
    C = s["C"]
    return {"F.conv1d + F.group_norm + F.gelu + F.conv1d + F.gelu": _nograd(torch, lambda: F.gelu(F.conv1d(
        F.gelu(F.group_norm(F.conv1d(wav[:, None], w0, stride=5), C, gw, gb)), w1, stride=2)))}


# ------------------------------------------------------------ session 55: recurrent cells ported from papers and PyTorch


# ---------------------------------------------------------------------------------------------------------
# w1: recurrent cells ported from papers and PyTorch
# ---------------------------------------------------------------------------------------------------------

# 1. Elman RNN exactly as torch.nn.RNN(batch_first=True) stores it: weights (out, in), two biases,
#    h0 of shape (num_layers=1, B, H), batch-first input and output.
w1_RNN_BF = """
def w1_rnn_bf(float(B,T,I) x, float(1,B,H) h0, float(H,I) weight_ih, float(H,H) weight_hh,
              float(H) bias_ih, float(H) bias_hh) -> (out) {
  for t in T {
    if t == 0 { a(b, j) +=! h0(0, b, k) * weight_hh(j, k) }
    else      { a(b, j) +=! out(b, t - 1, k) * weight_hh(j, k) }
    a(b, j) += x(b, t, i) * weight_ih(j, i)
    out(b, t, j) = tanh(a(b, j) + bias_ih(j) + bias_hh(j))
  }
}
"""


def _w1_rnn_bf_inputs(rng, s):
    B, T, I, H = s["B"], s["T"], s["I"], s["H"]
    return [_n(rng, B, T, I), _n(rng, 1, B, H) * 0.5, _w(rng, H, I), _w(rng, H, H),
            _n(rng, H) * 0.1, _n(rng, H) * 0.1]


@program(name="w1 rnn torch layout batch-first", kind="rnn", src=w1_RNN_BF,
         full=dict(B=32, T=64, I=256, H=256), tiny=dict(B=3, T=5, I=4, H=6),
         inputs=_w1_rnn_bf_inputs)
def _w1_rnn_bf(torch, a, t, s):
    rnn = torch.nn.RNN(s["I"], s["H"], batch_first=True)
    _copy(torch, rnn.weight_ih_l0, a[2])
    _copy(torch, rnn.weight_hh_l0, a[3])
    _copy(torch, rnn.bias_ih_l0, a[4])
    _copy(torch, rnn.bias_hh_l0, a[5])
    return {"torch nn.RNN": _nograd(torch, lambda: rnn(t[0], t[1])[0])}


# 2. LSTM with a projection (LSTMP, Sak et al. 2014) as torch.nn.LSTM(proj_size=P) stores it:
#    gates i, f, g, o stacked in (4H, .) weights, h of size P, W_hr (P, H).
w1_LSTMP = """
def w1_lstmp(float(T,B,I) x, float(1,B,P) h0, float(1,B,H) c0,
             float(4*H,I) w_ih, float(4*H,P) w_hh, float(4*H) b_ih, float(4*H) b_hh,
             float(P,H) w_hr) -> (y, c) {
  for t in T {
    g(b, r) +=! x(t, b, i) * w_ih(r, i)
    if t == 0 { g(b, r) += h0(0, b, k) * w_hh(r, k) }
    else      { g(b, r) += y(t - 1, b, k) * w_hh(r, k) }
    ig(b, j) = sigmoid(g(b, j) + b_ih(j) + b_hh(j)) where j in 0:H
    fg(b, j) = sigmoid(g(b, H + j) + b_ih(H + j) + b_hh(H + j)) where j in 0:H
    gg(b, j) = tanh(g(b, 2*H + j) + b_ih(2*H + j) + b_hh(2*H + j)) where j in 0:H
    og(b, j) = sigmoid(g(b, 3*H + j) + b_ih(3*H + j) + b_hh(3*H + j)) where j in 0:H
    if t == 0 { c(t, b, j) = fg(b, j) * c0(0, b, j) + ig(b, j) * gg(b, j) }
    else      { c(t, b, j) = fg(b, j) * c(t - 1, b, j) + ig(b, j) * gg(b, j) }
    hf(b, j) = og(b, j) * tanh(c(t, b, j))
    y(t, b, p) +=! hf(b, j) * w_hr(p, j)
  }
}
"""


def _w1_lstmp_inputs(rng, s):
    T, B, I, H, P = s["T"], s["B"], s["I"], s["H"], s["P"]
    return [_n(rng, T, B, I), _n(rng, 1, B, P) * 0.5, _n(rng, 1, B, H) * 0.5,
            _w(rng, 4 * H, I), _w(rng, 4 * H, P), _n(rng, 4 * H) * 0.1, _n(rng, 4 * H) * 0.1, _w(rng, P, H)]


@program(name="w1 lstmp (nn.LSTM proj_size)", kind="rnn", src=w1_LSTMP,
         full=dict(T=50, B=32, I=256, H=512, P=128), tiny=dict(T=4, B=3, I=5, H=6, P=3),
         inputs=_w1_lstmp_inputs, pick=lambda r: r[0])
def _w1_lstmp(torch, a, t, s):
    lstm = torch.nn.LSTM(s["I"], s["H"], proj_size=s["P"])
    for name, arr in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"), a[3:]):
        _copy(torch, getattr(lstm, name), arr)
    return {"torch nn.LSTM(proj_size)": _nograd(torch, lambda: lstm(t[0], (t[1], t[2]))[0])}


# 3. Peephole LSTM (Gers & Schmidhuber 2000), in the paper's x W layout (in, out) with one weight per gate,
#    zero initial state; peepholes on c(t-1) for i, f and on c(t) for o.
w1_PEEPHOLE = """
def w1_peephole(float(T,B,I) x, float(I,H) Wi, float(I,H) Wf, float(I,H) Wg, float(I,H) Wo,
                float(H,H) Ui, float(H,H) Uf, float(H,H) Ug, float(H,H) Uo,
                float(H) pi, float(H) pf, float(H) po, float(4,H) bias) -> (h, c) {
  for t in T {
    zi(b, j) +=! x(t, b, k) * Wi(k, j)
    zf(b, j) +=! x(t, b, k) * Wf(k, j)
    zg(b, j) +=! x(t, b, k) * Wg(k, j)
    zo(b, j) +=! x(t, b, k) * Wo(k, j)
    if t > 0 {
      zi(b, j) += h(t - 1, b, k) * Ui(k, j)
      zf(b, j) += h(t - 1, b, k) * Uf(k, j)
      zg(b, j) += h(t - 1, b, k) * Ug(k, j)
      zo(b, j) += h(t - 1, b, k) * Uo(k, j)
    }
    ii(b, j) = sigmoid(zi(b, j) + bias(0, j) + (t > 0 ? pi(j) * c(t - 1, b, j) : 0))
    ff(b, j) = sigmoid(zf(b, j) + bias(1, j) + (t > 0 ? pf(j) * c(t - 1, b, j) : 0))
    c(t, b, j) = ii(b, j) * tanh(zg(b, j) + bias(2, j)) + (t > 0 ? ff(b, j) * c(t - 1, b, j) : 0)
    h(t, b, j) = sigmoid(zo(b, j) + bias(3, j) + po(j) * c(t, b, j)) * tanh(c(t, b, j))
  }
}
"""


def _w1_peephole_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return ([_n(rng, T, B, I)] + [_w(rng, I, H) for _ in range(4)] + [_w(rng, H, H) for _ in range(4)]
            + [_n(rng, H) * 0.3 for _ in range(3)] + [_n(rng, 4, H) * 0.1])


@program(name="w1 peephole lstm", kind="rnn", src=w1_PEEPHOLE,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=4, B=3, I=5, H=6),
         inputs=_w1_peephole_inputs, pick=lambda r: r[0])
def _w1_peephole(torch, a, t, s):
    x, Wi, Wf, Wg, Wo, Ui, Uf, Ug, Uo, pi, pf, po, bias = t
    T, B, H = s["T"], s["B"], s["H"]
    W = torch.cat([Wi, Wf, Wg, Wo], 1)
    U = torch.cat([Ui, Uf, Ug, Uo], 1)

    def run():
        xg = (x.reshape(T * B, -1) @ W).reshape(T, B, 4 * H) + bias.reshape(1, 1, 4 * H)
        h = x.new_zeros(B, H)
        c = x.new_zeros(B, H)
        out = []
        for step in range(T):
            z = xg[step] + h @ U
            zi, zf, zg, zo = z.chunk(4, 1)
            i = torch.sigmoid(zi + pi * c)
            f = torch.sigmoid(zf + pf * c)
            c = f * c + i * torch.tanh(zg)
            h = torch.sigmoid(zo + po * c) * torch.tanh(c)
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


# 4. Layer-normalized LSTM as in PyTorch's fastrnns LayerNormLSTMCell: LN of the input gates, LN of the
#    hidden gates (each over all 4H), LN of the cell; torch layouts (4H, in).
w1_LNLSTM = """
def w1_ln_lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4*H,I) w_ih, float(4*H,H) w_hh,
               float(4*H) gam_i, float(4*H) bet_i, float(4*H) gam_h, float(4*H) bet_h,
               float(H) gam_c, float(H) bet_c) -> (hy, cy) {
  for t in T {
    gi(b, r) +=! x(t, b, k) * w_ih(r, k)
    mi(b) +=! gi(b, r) / (4 * H)
    vi(b) +=! (gi(b, r) - mi(b)) * (gi(b, r) - mi(b)) / (4 * H)
    if t == 0 { gh(b, r) +=! h0(b, k) * w_hh(r, k) }
    else      { gh(b, r) +=! hy(t - 1, b, k) * w_hh(r, k) }
    mh(b) +=! gh(b, r) / (4 * H)
    vh(b) +=! (gh(b, r) - mh(b)) * (gh(b, r) - mh(b)) / (4 * H)
    g(b, r) = (gi(b, r) - mi(b)) * rsqrt(vi(b) + 1e-5) * gam_i(r) + bet_i(r)
            + (gh(b, r) - mh(b)) * rsqrt(vh(b) + 1e-5) * gam_h(r) + bet_h(r)
    if t == 0 {
      cc(b, j) = sigmoid(g(b, H + j)) * c0(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2*H + j)) where j in 0:H
    } else {
      cc(b, j) = sigmoid(g(b, H + j)) * cy(t - 1, b, j) + sigmoid(g(b, j)) * tanh(g(b, 2*H + j)) where j in 0:H
    }
    mc(b) +=! cc(b, j) / H
    vc(b) +=! (cc(b, j) - mc(b)) * (cc(b, j) - mc(b)) / H
    cy(t, b, j) = (cc(b, j) - mc(b)) * rsqrt(vc(b) + 1e-5) * gam_c(j) + bet_c(j)
    hy(t, b, j) = sigmoid(g(b, 3*H + j)) * tanh(cy(t, b, j))
  }
}
"""


def _w1_lnlstm_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _n(rng, B, H) * 0.5, _n(rng, B, H) * 0.5, _w(rng, 4 * H, I), _w(rng, 4 * H, H),
            1 + 0.1 * _n(rng, 4 * H), 0.1 * _n(rng, 4 * H), 1 + 0.1 * _n(rng, 4 * H), 0.1 * _n(rng, 4 * H),
            1 + 0.1 * _n(rng, H), 0.1 * _n(rng, H)]


@program(name="w1 layernorm lstm (fastrnns)", kind="rnn", src=w1_LNLSTM,
         full=dict(T=50, B=32, I=256, H=256), tiny=dict(T=4, B=3, I=5, H=6),
         inputs=_w1_lnlstm_inputs, pick=lambda r: r[0])
def _w1_lnlstm(torch, a, t, s):
    F = torch.nn.functional
    x, h0, c0, w_ih, w_hh, gi_, bi_, gh_, bh_, gc_, bc_ = t
    T, H = s["T"], s["H"]

    def run():
        igates = F.layer_norm(x @ w_ih.t(), (4 * H,), gi_, bi_)   # all steps at once: no recurrence
        h, c = h0, c0
        out = []
        for step in range(T):
            gates = igates[step] + F.layer_norm(h @ w_hh.t(), (4 * H,), gh_, bh_)
            i, f, g, o = gates.chunk(4, 1)
            c = F.layer_norm(torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g), (H,), gc_, bc_)
            h = torch.sigmoid(o) * torch.tanh(c)
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


# 5. Layer-normalized GRU, batch-first, torch layouts (3H, in); each gate's chunk of the input and of the
#    hidden projections normalized on its own (gate index q in 0:3 and the row written q * H + j).
w1_LNGRU = """
def w1_ln_gru(float(B,T,I) x, float(B,H) h0, float(3*H,I) w_ih, float(3*H,H) w_hh,
              float(3,H) gam_x, float(3,H) bet_x, float(3,H) gam_h, float(3,H) bet_h) -> (out) {
  for t in T {
    ax(b, q, j) +=! x(b, t, k) * w_ih(q * H + j, k) where q in 0:3, j in 0:H
    if t == 0 { ah(b, q, j) +=! h0(b, k) * w_hh(q * H + j, k) where q in 0:3, j in 0:H }
    else      { ah(b, q, j) +=! out(b, t - 1, k) * w_hh(q * H + j, k) where q in 0:3, j in 0:H }
    mx(b, q) +=! ax(b, q, j) / H
    vx(b, q) +=! (ax(b, q, j) - mx(b, q)) * (ax(b, q, j) - mx(b, q)) / H
    mh(b, q) +=! ah(b, q, j) / H
    vh(b, q) +=! (ah(b, q, j) - mh(b, q)) * (ah(b, q, j) - mh(b, q)) / H
    nx(b, q, j) = (ax(b, q, j) - mx(b, q)) * rsqrt(vx(b, q) + 1e-5) * gam_x(q, j) + bet_x(q, j)
    nh(b, q, j) = (ah(b, q, j) - mh(b, q)) * rsqrt(vh(b, q) + 1e-5) * gam_h(q, j) + bet_h(q, j)
    r(b, j) = sigmoid(nx(b, 0, j) + nh(b, 0, j))
    z(b, j) = sigmoid(nx(b, 1, j) + nh(b, 1, j))
    n(b, j) = tanh(nx(b, 2, j) + r(b, j) * nh(b, 2, j))
    if t == 0 { out(b, t, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * h0(b, j) }
    else      { out(b, t, j) = (1 - z(b, j)) * n(b, j) + z(b, j) * out(b, t - 1, j) }
  }
}
"""


def _w1_lngru_inputs(rng, s):
    B, T, I, H = s["B"], s["T"], s["I"], s["H"]
    return [_n(rng, B, T, I), _n(rng, B, H) * 0.5, _w(rng, 3 * H, I), _w(rng, 3 * H, H),
            1 + 0.1 * _n(rng, 3, H), 0.1 * _n(rng, 3, H), 1 + 0.1 * _n(rng, 3, H), 0.1 * _n(rng, 3, H)]


@program(name="w1 layernorm gru batch-first", kind="rnn", src=w1_LNGRU,
         full=dict(B=32, T=50, I=256, H=256), tiny=dict(B=3, T=4, I=5, H=6),
         inputs=_w1_lngru_inputs)
def _w1_lngru(torch, a, t, s):
    F = torch.nn.functional
    x, h0, w_ih, w_hh, gx, bx, gh, bh = t
    B, T, H = s["B"], s["T"], s["H"]

    def run():
        ax = F.linear(x, w_ih).reshape(B, T, 3, H)
        nx = F.layer_norm(ax, (H,)) * gx + bx       # all steps at once
        h = h0
        out = []
        for step in range(T):
            nh = F.layer_norm(F.linear(h, w_hh).reshape(B, 3, H), (H,)) * gh + bh
            r = torch.sigmoid(nx[:, step, 0] + nh[:, 0])
            z = torch.sigmoid(nx[:, step, 1] + nh[:, 1])
            n = torch.tanh(nx[:, step, 2] + r * nh[:, 2])
            h = (1 - z) * n + z * h
            out.append(h)
        return torch.stack(out, 1)
    return {"torch loop": _nograd(torch, run)}


# 6. IndRNN (Li et al. 2018), two layers, batch-first, nn.Linear layout (out, in): h = relu(W x + u * h + b).
#    Written layer by layer, as the paper's code stacks them; relu as max(., 0).
w1_INDRNN = """
def w1_indrnn(float(B,T,I) x, float(H,I) w1, float(H) u1, float(H) b1,
              float(H,H) w2, float(H) u2, float(H) b2) -> (h2) {
  for t in T {
    p1(b, j) +=! x(b, t, k) * w1(j, k)
    if t == 0 { h1(b, t, j) = max(p1(b, j) + b1(j), 0) }
    else      { h1(b, t, j) = max(p1(b, j) + b1(j) + u1(j) * h1(b, t - 1, j), 0) }
  }
  for t in T {
    p2(b, j) +=! h1(b, t, k) * w2(j, k)
    if t == 0 { h2(b, t, j) = max(p2(b, j) + b2(j), 0) }
    else      { h2(b, t, j) = max(p2(b, j) + b2(j) + u2(j) * h2(b, t - 1, j), 0) }
  }
}
"""


def _w1_indrnn_inputs(rng, s):
    B, T, I, H = s["B"], s["T"], s["I"], s["H"]
    return [_n(rng, B, T, I), _w(rng, H, I), rng.uniform(0, 1, H).astype(np.float32), _n(rng, H) * 0.1,
            _w(rng, H, H), rng.uniform(0, 1, H).astype(np.float32), _n(rng, H) * 0.1]


@program(name="w1 indrnn 2 layers batch-first", kind="rnn", src=w1_INDRNN,
         full=dict(B=64, T=128, I=256, H=512), tiny=dict(B=3, T=5, I=4, H=6),
         inputs=_w1_indrnn_inputs)
def _w1_indrnn(torch, a, t, s):
    F = torch.nn.functional
    x, w1, u1, b1, w2, u2, b2 = t
    T = s["T"]

    def layer(inp, w, u, bias):
        p = F.linear(inp, w, bias)
        h = torch.relu(p[:, 0])
        out = [h]
        for step in range(1, T):
            h = torch.relu(p[:, step] + u * h)
            out.append(h)
        return torch.stack(out, 1)
    return {"torch loop": _nograd(torch, lambda: layer(layer(x, w1, u1, b1), w2, u2, b2))}


# 7. SRU (Lei et al. 2018): one projection (3H, H) for all steps, an elementwise recurrence with the c(t-1)
#    vectors v_f, v_r in the gates, tanh on c and a highway connection to x.  Sequence-first.
w1_SRU = """
def w1_sru(float(T,B,H) x, float(3*H,H) W, float(2,H) v, float(2,H) bias, float(B,H) c0) -> (h, c) {
  for t in T {
    u(b, r) +=! x(t, b, k) * W(r, k)
    if t == 0 { cp(b, j) = c0(b, j) } else { cp(b, j) = c(t - 1, b, j) }
    f(b, j) = sigmoid(u(b, H + j) + v(0, j) * cp(b, j) + bias(0, j)) where j in 0:H
    rr(b, j) = sigmoid(u(b, 2*H + j) + v(1, j) * cp(b, j) + bias(1, j)) where j in 0:H
    c(t, b, j) = f(b, j) * cp(b, j) + (1 - f(b, j)) * u(b, j) where j in 0:H
    h(t, b, j) = rr(b, j) * tanh(c(t, b, j)) + (1 - rr(b, j)) * x(t, b, j)
  }
}
"""


def _w1_sru_inputs(rng, s):
    T, B, H = s["T"], s["B"], s["H"]
    return [_n(rng, T, B, H), _w(rng, 3 * H, H), _n(rng, 2, H) * 0.5, _n(rng, 2, H) * 0.1, _n(rng, B, H) * 0.5]


@program(name="w1 sru", kind="rnn", src=w1_SRU,
         full=dict(T=128, B=32, H=512), tiny=dict(T=5, B=3, H=6),
         inputs=_w1_sru_inputs, pick=lambda r: r[0])
def _w1_sru(torch, a, t, s):
    F = torch.nn.functional
    x, W, v, bias, c0 = t
    T = s["T"]

    def run():
        u0, u1, u2 = F.linear(x, W).chunk(3, -1)
        f_in = u1 + bias[0]
        r_in = u2 + bias[1]
        c = c0
        hs = []
        for step in range(T):
            f = torch.sigmoid(f_in[step] + v[0] * c)
            r = torch.sigmoid(r_in[step] + v[1] * c)
            c = f * c + (1 - f) * u0[step]
            hs.append(r * torch.tanh(c) + (1 - r) * x[step])
        return torch.stack(hs)
    return {"torch loop": _nograd(torch, run)}


# 8. Minimal gated unit (Zhou et al. 2016) run backwards in time (the reverse half of a bidirectional
#    layer): the step t reads x(T - 1 - t) and writes h at T - 1 - t (an offset on the left).
w1_MGU_REV = """
def w1_mgu_rev(float(T,B,I) x, float(I,H) Wf, float(H,H) Uf, float(H) bf,
               float(I,H) Wh, float(H,H) Uh, float(H) bh) -> (h) {
  for t in T {
    f(b, j) +=! x(T - 1 - t, b, k) * Wf(k, j)
    if t > 0 { f(b, j) += h(T - t, b, k) * Uf(k, j) }
    f(b, j) = sigmoid(f(b, j) + bf(j))
    if t > 0 { fh(b, k) = f(b, k) * h(T - t, b, k) }
    n(b, j) +=! x(T - 1 - t, b, k) * Wh(k, j)
    if t > 0 { n(b, j) += fh(b, k) * Uh(k, j) }
    if t == 0 { h(T - 1 - t, b, j) = f(b, j) * tanh(n(b, j) + bh(j)) }
    else { h(T - 1 - t, b, j) = (1 - f(b, j)) * h(T - t, b, j) + f(b, j) * tanh(n(b, j) + bh(j)) }
  }
}
"""


def _w1_mgu_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _w(rng, I, H), _w(rng, H, H), _n(rng, H) * 0.1,
            _w(rng, I, H), _w(rng, H, H), _n(rng, H) * 0.1]


@program(name="w1 mgu reversed in time", kind="rnn", src=w1_MGU_REV,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=5, B=3, I=4, H=6),
         inputs=_w1_mgu_inputs)
def _w1_mgu(torch, a, t, s):
    x, Wf, Uf, bf, Wh, Uh, bh = t
    T, B, H = s["T"], s["B"], s["H"]

    def run():
        xf = x @ Wf + bf
        xh = x @ Wh + bh
        h = x.new_zeros(B, H)
        out = [None] * T
        for step in reversed(range(T)):
            f = torch.sigmoid(xf[step] + h @ Uf)
            h = (1 - f) * h + f * torch.tanh(xh[step] + (f * h) @ Uh)
            out[step] = h
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


# 9. Multiplicative LSTM (Krause et al. 2016): m = (W_mx x) * (W_mh h), the gates from x and m;
#    torch (out, in) layouts, gates i, f, o, u stacked in one (4H, .) weight.
w1_MLSTM = """
def w1_mlstm(float(T,B,I) x, float(H,I) w_mx, float(H,H) w_mh, float(4*H,I) w_x, float(4*H,H) w_m,
             float(4*H) bias) -> (h, c) {
  for t in T {
    mx(b, j) +=! x(t, b, k) * w_mx(j, k)
    if t == 0 { m(b, j) = 0 where exists mx(b, j) }
    else      { m(b, j) +=! mx(b, j) * h(t - 1, b, k) * w_mh(j, k) }
    g(b, r) +=! x(t, b, k) * w_x(r, k)
    g(b, r) += m(b, k) * w_m(r, k)
    g(b, r) = g(b, r) + bias(r)
    if t == 0 { c(t, b, j) = sigmoid(g(b, j)) * tanh(g(b, 3*H + j)) where j in 0:H }
    else { c(t, b, j) = sigmoid(g(b, H + j)) * c(t - 1, b, j) + sigmoid(g(b, j)) * tanh(g(b, 3*H + j)) where j in 0:H }
    h(t, b, j) = sigmoid(g(b, 2*H + j)) * tanh(c(t, b, j))
  }
}
"""


def _w1_mlstm_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    return [_n(rng, T, B, I), _w(rng, H, I), _w(rng, H, H), _w(rng, 4 * H, I), _w(rng, 4 * H, H),
            _n(rng, 4 * H) * 0.1]


@program(name="w1 multiplicative lstm", kind="rnn", src=w1_MLSTM,
         full=dict(T=50, B=32, I=256, H=256), tiny=dict(T=4, B=3, I=5, H=6),
         inputs=_w1_mlstm_inputs, pick=lambda r: r[0])
def _w1_mlstm(torch, a, t, s):
    F = torch.nn.functional
    x, w_mx, w_mh, w_x, w_m, bias = t
    T, B, H = s["T"], s["B"], s["H"]

    def run():
        mx = F.linear(x, w_mx)
        gx = F.linear(x, w_x, bias)
        h = x.new_zeros(B, H)
        c = x.new_zeros(B, H)
        out = []
        for step in range(T):
            m = mx[step] * F.linear(h, w_mh)
            i, f, o, u = (gx[step] + F.linear(m, w_m)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(u)
            h = torch.sigmoid(o) * torch.tanh(c)
            out.append(h)
        return torch.stack(out)
    return {"torch loop": _nograd(torch, run)}


# 10. Bahdanau (additive) attention decoder with a GRU cell, teacher-forced: the keys U_a enc are computed
#     once; at each step score(b, s) = v . tanh(W_a h + U_a enc(b, s)), masked past the source length
#     (a select on an int32 length), softmax over s, context, then nn.GRUCell on [y_t ; ctx].
w1_BAHDANAU = """
def w1_bahdanau(float(T,B,E) y, float(B,S,C) enc, int32(B) src_len, float(B,H) h0,
                float(A,C) Ua, float(A,H) Wa, float(A) va,
                float(3*H,E+C) w_ih, float(3*H,H) w_hh, float(3*H) b_ih, float(3*H) b_hh) -> (h, attn) {
  keys(b, s, a) +=! enc(b, s, c) * Ua(a, c)
  for t in T {
    if t == 0 { q(b, a) +=! h0(b, k) * Wa(a, k) }
    else      { q(b, a) +=! h(t - 1, b, k) * Wa(a, k) }
    e(b, s) +=! va(a) * tanh(q(b, a) + keys(b, s, a))
    e(b, s) = s < src_len(b) ? e(b, s) : -inf
    mx(b) max=! e(b, s)
    p(b, s) = exp(e(b, s) - mx(b))
    z(b) +=! p(b, s)
    attn(t, b, s) = p(b, s) / z(b)
    ctx(b, c) +=! attn(t, b, s) * enc(b, s, c)
    gi(b, r) +=! y(t, b, k) * w_ih(r, k)
    gi(b, r) += ctx(b, c) * w_ih(r, E + c)
    if t == 0 { gh(b, r) +=! h0(b, k) * w_hh(r, k) }
    else      { gh(b, r) +=! h(t - 1, b, k) * w_hh(r, k) }
    rg(b, j) = sigmoid(gi(b, j) + b_ih(j) + gh(b, j) + b_hh(j)) where j in 0:H
    zg(b, j) = sigmoid(gi(b, H + j) + b_ih(H + j) + gh(b, H + j) + b_hh(H + j)) where j in 0:H
    ng(b, j) = tanh(gi(b, 2*H + j) + b_ih(2*H + j) + rg(b, j) * (gh(b, 2*H + j) + b_hh(2*H + j))) where j in 0:H
    if t == 0 { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h0(b, j) }
    else      { h(t, b, j) = (1 - zg(b, j)) * ng(b, j) + zg(b, j) * h(t - 1, b, j) }
  }
}
"""


def _w1_bahdanau_inputs(rng, s):
    T, B, E, S, C, H, A = s["T"], s["B"], s["E"], s["S"], s["C"], s["H"], s["A"]
    lens = rng.integers(max(1, S // 2), S + 1, B).astype(np.int32)
    lens[0] = S
    return [_n(rng, T, B, E), _n(rng, B, S, C), lens, _n(rng, B, H) * 0.5,
            _w(rng, A, C), _w(rng, A, H), _w(rng, A),
            _w(rng, 3 * H, E + C), _w(rng, 3 * H, H), _n(rng, 3 * H) * 0.1, _n(rng, 3 * H) * 0.1]


@program(name="w1 bahdanau attention gru decoder", kind="attention", src=w1_BAHDANAU,
         full=dict(T=20, B=32, E=128, S=50, C=256, H=256, A=256),
         tiny=dict(T=3, B=3, E=4, S=5, C=6, H=7, A=5),
         inputs=_w1_bahdanau_inputs, pick=lambda r: r[0])
def _w1_bahdanau(torch, a, t, s):
    F = torch.nn.functional
    y, enc, src_len, h0, Ua, Wa, va, w_ih, w_hh, b_ih, b_hh = t
    T, S = s["T"], s["S"]
    cell = torch.nn.GRUCell(s["E"] + s["C"], s["H"])
    for name, arr in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), a[7:]):
        _copy(torch, getattr(cell, name), arr)
    pad = torch.arange(S)[None, :] >= src_len.long()[:, None]

    def run():
        keys = F.linear(enc, Ua)                                       # (B, S, A)
        h = h0
        out = []
        for step in range(T):
            e = torch.tanh(F.linear(h, Wa)[:, None, :] + keys) @ va    # (B, S)
            alpha = torch.softmax(e.masked_fill(pad, float("-inf")), 1)
            ctx = torch.bmm(alpha[:, None, :], enc)[:, 0]
            h = cell(torch.cat([y[step], ctx], 1), h)
            out.append(h)
        return torch.stack(out)
    return {"torch loop + GRUCell": _nograd(torch, run)}


# 11. Bidirectional GRU as torch.nn.GRU(bidirectional=True) computes it: one loop, the forward direction at
#     t and the reverse one at T - 1 - t, both written into one (T, B, 2H) output (the reverse half at H + j).
w1_BIGRU = """
def w1_bigru(float(T,B,I) x, float(3*H,I) wf_ih, float(3*H,H) wf_hh, float(3*H) bf_ih, float(3*H) bf_hh,
             float(3*H,I) wr_ih, float(3*H,H) wr_hh, float(3*H) br_ih, float(3*H) br_hh) -> (out) {
  for t in T {
    xf(b, r) +=! x(t, b, k) * wf_ih(r, k)
    xr(b, r) +=! x(T - 1 - t, b, k) * wr_ih(r, k)
    if t > 0 {
      hf(b, r) +=! out(t - 1, b, k) * wf_hh(r, k)
      hr(b, r) +=! out(T - t, b, H + k) * wr_hh(r, k) where k in 0:H
    } else {
      hf(b, r) = 0 where exists xf(b, r)
      hr(b, r) = 0 where exists xr(b, r)
    }
    rf(b, j) = sigmoid(xf(b, j) + bf_ih(j) + hf(b, j) + bf_hh(j)) where j in 0:H
    zf(b, j) = sigmoid(xf(b, H + j) + bf_ih(H + j) + hf(b, H + j) + bf_hh(H + j)) where j in 0:H
    nf(b, j) = tanh(xf(b, 2*H + j) + bf_ih(2*H + j) + rf(b, j) * (hf(b, 2*H + j) + bf_hh(2*H + j))) where j in 0:H
    rr(b, j) = sigmoid(xr(b, j) + br_ih(j) + hr(b, j) + br_hh(j)) where j in 0:H
    zr(b, j) = sigmoid(xr(b, H + j) + br_ih(H + j) + hr(b, H + j) + br_hh(H + j)) where j in 0:H
    nr(b, j) = tanh(xr(b, 2*H + j) + br_ih(2*H + j) + rr(b, j) * (hr(b, 2*H + j) + br_hh(2*H + j))) where j in 0:H
    if t == 0 {
      out(t, b, j) = (1 - zf(b, j)) * nf(b, j)
      out(T - 1 - t, b, H + j) = (1 - zr(b, j)) * nr(b, j)
    } else {
      out(t, b, j) = (1 - zf(b, j)) * nf(b, j) + zf(b, j) * out(t - 1, b, j)
      out(T - 1 - t, b, H + j) = (1 - zr(b, j)) * nr(b, j) + zr(b, j) * out(T - t, b, H + j)
    }
  }
}
"""


def _w1_bigru_inputs(rng, s):
    T, B, I, H = s["T"], s["B"], s["I"], s["H"]
    d = lambda: [_w(rng, 3 * H, I), _w(rng, 3 * H, H), _n(rng, 3 * H) * 0.1, _n(rng, 3 * H) * 0.1]  # noqa: E731
    return [_n(rng, T, B, I)] + d() + d()


@program(name="w1 bidirectional gru (nn.GRU)", kind="rnn", src=w1_BIGRU,
         full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=5, B=3, I=4, H=6),
         inputs=_w1_bigru_inputs)
def _w1_bigru(torch, a, t, s):
    gru = torch.nn.GRU(s["I"], s["H"], bidirectional=True)
    names = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
    for name, arr in zip(names, a[1:5]):
        _copy(torch, getattr(gru, name), arr)
    for name, arr in zip(names, a[5:9]):
        _copy(torch, getattr(gru, name + "_reverse"), arr)
    return {"torch nn.GRU(bidirectional)": _nograd(torch, lambda: gru(t[0])[0])}


# 12. LSTM over a padded batch with lengths, batch-first, as pack_padded_sequence + nn.LSTM +
#     pad_packed_sequence give it: past a row's length the state is carried and the output is 0 (selects on
#     t < len(b)).  The final (h, c) are each row's last valid state.
w1_MASKED_LSTM = """
def w1_masked_lstm(float(B,T,I) x, int32(B) lens, float(4*H,I) w_ih, float(4*H,H) w_hh,
                   float(4*H) b_ih, float(4*H) b_hh) -> (out, hn, cn) {
  for t in T {
    g(b, r) +=! x(b, t, k) * w_ih(r, k)
    if t > 0 { g(b, r) += hs(b, k) * w_hh(r, k) }
    g(b, r) = g(b, r) + b_ih(r) + b_hh(r)
    cnew(b, j) = sigmoid(g(b, j)) * tanh(g(b, 2*H + j)) + (t > 0 ? sigmoid(g(b, H + j)) * cs(b, j) : 0) where j in 0:H
    hnew(b, j) = sigmoid(g(b, 3*H + j)) * tanh(cnew(b, j))
    cs(b, j) = t < lens(b) ? cnew(b, j) : cs(b, j)
    hs(b, j) = t < lens(b) ? hnew(b, j) : hs(b, j)
    out(b, t, j) = t < lens(b) ? hnew(b, j) : 0
  }
  hn(b, j) = hs(b, j)
  cn(b, j) = cs(b, j)
}
"""


def _w1_masked_lstm_inputs(rng, s):
    B, T, I, H = s["B"], s["T"], s["I"], s["H"]
    lens = rng.integers(1, T + 1, B).astype(np.int32)
    lens[0] = T
    return [_n(rng, B, T, I), lens, _w(rng, 4 * H, I), _w(rng, 4 * H, H), _n(rng, 4 * H) * 0.1,
            _n(rng, 4 * H) * 0.1]


@program(name="w1 masked lstm (packed lengths)", kind="rnn", src=w1_MASKED_LSTM,
         full=dict(B=32, T=64, I=256, H=256), tiny=dict(B=4, T=5, I=3, H=6),
         inputs=_w1_masked_lstm_inputs, pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel()]))
def _w1_masked_lstm(torch, a, t, s):
    rnn_utils = torch.nn.utils.rnn
    lstm = torch.nn.LSTM(s["I"], s["H"], batch_first=True)
    for name, arr in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), a[2:]):
        _copy(torch, getattr(lstm, name), arr)
    x, lens = t[0], t[1].long()
    T = s["T"]

    def packed():
        pk = rnn_utils.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
        out, (hn, cn) = lstm(pk)
        out, _ = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=T)
        return torch.cat([out.reshape(-1), hn[0].reshape(-1)])

    return {"torch pack + nn.LSTM": _nograd(torch, packed)}


# ------------------------------------------------------------ session 55: contractions and layouts as NumPy/einsum users write them


# ---------------------------------------------------------------------------
# w2: contractions and layouts written as a NumPy / einsum user writes them
# ---------------------------------------------------------------------------

# 1. nn.MultiheadAttention's packed in_proj (PyTorch (3E, E) layout), heads split
#    into (B, H, T, D) with the head index arithmetic written into the weight's index.
w2_QKV = """
def w2_qkv(float(B,T,E) x, float(3 * E, E) Win, float(3 * E) bin) -> (q, k, v) {
  q(b, h, t, d) +=! x(b, t, e) * Win(h * D + d, e) where h in 0:H, d in 0:D
  k(b, h, t, d) +=! x(b, t, e) * Win(E + h * D + d, e) where h in 0:H, d in 0:D
  v(b, h, t, d) +=! x(b, t, e) * Win(2 * E + h * D + d, e) where h in 0:H, d in 0:D
  q(b, h, t, d) = q(b, h, t, d) + bin(h * D + d)
  k(b, h, t, d) = k(b, h, t, d) + bin(E + h * D + d)
  v(b, h, t, d) = v(b, h, t, d) + bin(2 * E + h * D + d)
}
"""


def _w2_qkv_inputs(rng, s):
    E = s["H"] * s["D"]
    return [_n(rng, s["B"], s["T"], E), _w(rng, 3 * E, E), _n(rng, 3 * E) * 0.1]


@program(name="w2 qkv proj bhtd", kind="contraction", src=w2_QKV,
         full=dict(B=4, T=256, H=8, D=64), tiny=dict(B=2, T=5, H=2, D=4),
         inputs=_w2_qkv_inputs, pick=lambda r: r, free=("H", "D"))
def _w2_qkv(torch, a, t, s):
    F = torch.nn.functional
    x, Win, bin_ = t
    B, T, H, D = s["B"], s["T"], s["H"], s["D"]

    def linear_permute():
        return F.linear(x, Win, bin_).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).contiguous()

    def chunk_heads():
        q, k, v = F.linear(x, Win, bin_).chunk(3, dim=-1)
        return tuple(z.view(B, T, H, D).transpose(1, 2).contiguous() for z in (q, k, v))
    return {"F.linear+permute": _nograd(torch, linear_permute), "chunk+transpose": _nograd(torch, chunk_heads)}


# 2. LoRA: a frozen nn.Linear (out, in) plus scale * B @ A, the adapter written as
#    one three-factor sum, as in the paper's formula.
w2_LORA = """
def w2_lora(float(N,I) x, float(O,I) W, float(O) bias, float(R,I) A, float(O,R) Bup, float scale) -> (y) {
  y(n, o) +=! x(n, i) * W(o, i)
  y(n, o) += scale * x(n, i) * A(r, i) * Bup(o, r)
  y(n, o) = y(n, o) + bias(o)
}
"""


@program(name="w2 lora linear", kind="contraction", src=w2_LORA,
         full=dict(N=1024, I=1024, O=1024, R=16), tiny=dict(N=3, I=7, O=5, R=2),
         inputs=lambda rng, s: [_n(rng, s["N"], s["I"]), _w(rng, s["O"], s["I"]), _n(rng, s["O"]) * 0.1,
                                _w(rng, s["R"], s["I"]), _w(rng, s["O"], s["R"]), np.array(0.5, np.float32)])
def _w2_lora(torch, a, t, s):
    F = torch.nn.functional
    x, W, b, A, Bup, scale = t
    sc = float(a[5])

    def peft():
        return F.linear(x, W, b) + sc * F.linear(F.linear(x, A), Bup)

    def addmm():
        return torch.addmm(b, x, W.t()).addmm_(x @ A.t(), Bup.t(), alpha=sc)
    return {"F.linear x3": _nograd(torch, peft), "addmm": _nograd(torch, addmm)}


# 3. nn.Bilinear: y = x1^T W_o x2 + b, PyTorch's (out, in1, in2) weight, one sum.
w2_BILIN = """
def w2_bilinear(float(N,I) x1, float(N,J) x2, float(O,I,J) W, float(O) bias) -> (y) {
  y(n, o) +=! x1(n, i) * W(o, i, j) * x2(n, j)
  y(n, o) = y(n, o) + bias(o)
}
"""


@program(name="w2 bilinear", kind="contraction", src=w2_BILIN,
         full=dict(N=512, I=64, J=64, O=128), tiny=dict(N=3, I=4, J=5, O=6),
         inputs=lambda rng, s: [_n(rng, s["N"], s["I"]), _n(rng, s["N"], s["J"]),
                                _w(rng, s["O"], s["I"], s["J"]) / float(np.sqrt(s["I"])), _n(rng, s["O"]) * 0.1])
def _w2_bilinear(torch, a, t, s):
    F = torch.nn.functional
    x1, x2, W, b = t

    def einsum():
        return torch.einsum("ni,oij,nj->no", x1, W, x2) + b
    return {"F.bilinear": _nograd(torch, lambda: F.bilinear(x1, x2, W, b)), "einsum": _nograd(torch, einsum)}


# 4. MLP-Mixer token-mixing block: LayerNorm over channels, then an MLP along the
#    sequence axis (the transposes written into the indices), exact GELU, residual.
w2_MIXER = """
def w2_mixer(float(B,S,C) x, float(C) gamma, float(C) beta, float(K,S) W1, float(K) b1,
             float(S,K) W2, float(S) b2) -> (y) {
  mean(b, s) +=! x(b, s, c) / C
  var(b, s) +=! (x(b, s, c) - mean(b, s)) * (x(b, s, c) - mean(b, s)) / C
  xn(b, s, c) = (x(b, s, c) - mean(b, s)) * rsqrt(var(b, s) + 1e-5) * gamma(c) + beta(c)
  h(b, c, k) +=! xn(b, s, c) * W1(k, s)
  g(b, c, k) = 0.5 * (h(b, c, k) + b1(k)) * (1 + erf((h(b, c, k) + b1(k)) * 0.7071067811865476))
  y(b, s, c) +=! g(b, c, k) * W2(s, k)
  y(b, s, c) = y(b, s, c) + b2(s) + x(b, s, c)
}
"""


@program(name="w2 mixer token mixing", kind="contraction", src=w2_MIXER,
         full=dict(B=16, S=196, C=256, K=256), tiny=dict(B=2, S=5, C=6, K=7),
         inputs=lambda rng, s: [_n(rng, s["B"], s["S"], s["C"]), 1 + 0.1 * _n(rng, s["C"]), 0.1 * _n(rng, s["C"]),
                                _w(rng, s["K"], s["S"]), 0.1 * _n(rng, s["K"]), _w(rng, s["S"], s["K"]),
                                0.1 * _n(rng, s["S"])])
def _w2_mixer(torch, a, t, s):
    F = torch.nn.functional
    x, gamma, beta, W1, b1, W2, b2 = t
    C = s["C"]

    def torch_mixer():
        xn = F.layer_norm(x, (C,), gamma, beta, 1e-5)
        h = F.gelu(F.linear(xn.transpose(1, 2), W1, b1))
        return x + F.linear(h, W2, b2).transpose(1, 2)
    return {"F.layer_norm+F.linear": _nograd(torch, torch_mixer)}


# 5. Style-transfer Gram matrix of NCHW features, summed over both spatial axes.
w2_GRAM = """
def w2_gram(float(B,C,H,W) f) -> (G) {
  G(b, c, d) +=! f(b, c, i, j) * f(b, d, i, j) / (C * H * W)
}
"""


@program(name="w2 style gram", kind="contraction", src=w2_GRAM,
         full=dict(B=4, C=256, H=32, W=32), tiny=dict(B=2, C=3, H=4, W=5),
         inputs=lambda rng, s: [_n(rng, s["B"], s["C"], s["H"], s["W"])])
def _w2_gram(torch, a, t, s):
    (f,) = t
    B, C, H, W = s["B"], s["C"], s["H"], s["W"]

    def bmm():
        v = f.view(B, C, H * W)
        return torch.bmm(v, v.transpose(1, 2)) / (C * H * W)

    def einsum():
        return torch.einsum("bchw,bdhw->bcd", f, f) / (C * H * W)
    return {"bmm": _nograd(torch, bmm), "einsum": _nograd(torch, einsum)}


# 6. Per-sequence feature covariance over the valid (unpadded) steps of a padded
#    batch (B, T, D): mask written as selects on the lengths.
w2_MCOV = """
def w2_masked_cov(float(B,T,D) x, int32(B) len) -> (cov) {
  mu(b, d) +=! t < len(b) ? x(b, t, d) : 0
  mu(b, d) = mu(b, d) / float(len(b))
  cov(b, i, j) +=! t < len(b) ? (x(b, t, i) - mu(b, i)) * (x(b, t, j) - mu(b, j)) : 0
  cov(b, i, j) = cov(b, i, j) / float(len(b) - 1)
}
"""


def _w2_mcov_inputs(rng, s):
    B, T = s["B"], s["T"]
    lens = rng.integers(max(2, T // 2), T + 1, size=B).astype(np.int32)
    lens[0] = T
    return [_n(rng, B, T, s["D"]), lens]


@program(name="w2 masked covariance", kind="contraction", src=w2_MCOV,
         full=dict(B=16, T=512, D=256), tiny=dict(B=3, T=6, D=4),
         inputs=_w2_mcov_inputs)
def _w2_mcov(torch, a, t, s):
    x, lens = t
    T = s["T"]

    def masked_bmm():
        m = (torch.arange(T)[None, :] < lens[:, None]).to(x.dtype)  # (B, T)
        n = lens.to(x.dtype)
        mu = (x * m[:, :, None]).sum(1) / n[:, None]
        xc = (x - mu[:, None, :]) * m[:, :, None]
        return torch.bmm(xc.transpose(1, 2), xc) / (n - 1)[:, None, None]

    def per_seq_cov():
        return torch.stack([torch.cov(x[b, : int(lens[b])].T) for b in range(x.shape[0])])
    return {"mask+bmm": _nograd(torch, masked_bmm), "torch.cov loop": _nograd(torch, per_seq_cov)}


# 7. Tensor-train (TT) linear layer: the input reshaped (B, I1, I2, I3) and three
#    TT cores contracted one after the other, as a NumPy user chains einsums.
w2_TT = """
def w2_tt(float(B,I1,I2,I3) x, float(I1,O1,R1) G1, float(R1,I2,O2,R2) G2, float(R2,I3,O3) G3) -> (y) {
  t1(b, i2, i3, o1, r1) +=! x(b, i1, i2, i3) * G1(i1, o1, r1)
  t2(b, i3, o1, o2, r2) +=! t1(b, i2, i3, o1, r1) * G2(r1, i2, o2, r2)
  y(b, o1, o2, o3) +=! t2(b, i3, o1, o2, r2) * G3(r2, i3, o3)
}
"""


@program(name="w2 tensor-train layer", kind="contraction", src=w2_TT,
         full=dict(B=1024, I1=8, I2=8, I3=8, O1=8, O2=8, O3=8, R1=8, R2=8),
         tiny=dict(B=2, I1=2, I2=3, I3=2, O1=3, O2=2, O3=2, R1=2, R2=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["I1"], s["I2"], s["I3"]), _w(rng, s["I1"], s["O1"], s["R1"]),
                                _w(rng, s["R1"], s["I2"], s["O2"], s["R2"]) / float(np.sqrt(s["I2"])),
                                _w(rng, s["R2"], s["I3"], s["O3"]) * float(np.sqrt(s["O3"] / s["I3"]))])
def _w2_tt(torch, a, t, s):
    x, G1, G2, G3 = t

    def einsum_chain():
        t1 = torch.einsum("bijk,iar->bjkar", x, G1)
        t2 = torch.einsum("bjkar,rjcs->bkacs", t1, G2)
        return torch.einsum("bkacs,skd->bacd", t2, G3)

    def einsum_one():
        return torch.einsum("bijk,iar,rjcs,skd->bacd", x, G1, G2, G3)
    return {"einsum chain": _nograd(torch, einsum_chain), "einsum one": _nograd(torch, einsum_one)}


# 8. Tucker reconstruction X = G x1 U1 x2 U2 x3 U3, written as the einsum one-liner.
w2_TUCKER = """
def w2_tucker(float(R1,R2,R3) G, float(I,R1) U1, float(J,R2) U2, float(K,R3) U3) -> (X) {
  X(i, j, k) +=! G(a, b, c) * U1(i, a) * U2(j, b) * U3(k, c)
}
"""


@program(name="w2 tucker reconstruct", kind="contraction", src=w2_TUCKER,
         full=dict(R1=16, R2=16, R3=16, I=128, J=128, K=128), tiny=dict(R1=2, R2=3, R3=2, I=4, J=3, K=5),
         inputs=lambda rng, s: [_n(rng, s["R1"], s["R2"], s["R3"]), _w(rng, s["I"], s["R1"]),
                                _w(rng, s["J"], s["R2"]), _w(rng, s["K"], s["R3"])])
def _w2_tucker(torch, a, t, s):
    G, U1, U2, U3 = t

    def einsum():
        return torch.einsum("abc,ia,jb,kc->ijk", G, U1, U2, U3)

    def mode_products():
        y = torch.tensordot(U1, G, dims=([1], [0]))          # (I, R2, R3)
        y = torch.tensordot(y, U2, dims=([1], [1]))          # (I, R3, J)
        y = torch.tensordot(y, U3, dims=([1], [1]))          # (I, J, K)
        return y
    return {"einsum": _nograd(torch, einsum), "tensordot x3": _nograd(torch, mode_products)}


# 9. Kronecker-factored linear layer y = (A kron B) x on a flat input (N, P*Q):
#    the reshape written as index arithmetic p * Q + q.
w2_KRON = """
def w2_kron(float(N,M) x, float(I,P) A, float(J,Q) Bk) -> (y) {
  y(n, i, j) +=! A(i, p) * Bk(j, q) * x(n, p * Q + q)
}
"""


@program(name="w2 kronecker linear", kind="contraction", src=w2_KRON,
         full=dict(N=1024, P=32, Q=32, I=32, J=32), tiny=dict(N=2, P=3, Q=2, I=4, J=3),
         inputs=lambda rng, s: [_n(rng, s["N"], s["P"] * s["Q"]), _w(rng, s["I"], s["P"]), _w(rng, s["J"], s["Q"])])
def _w2_kron(torch, a, t, s):
    F = torch.nn.functional
    x, A, Bk = t
    N, P, Q, I, J = s["N"], s["P"], s["Q"], s["I"], s["J"]

    def kron_linear():
        return F.linear(x, torch.kron(A, Bk)).view(N, I, J)

    def two_matmuls():
        z = torch.matmul(x.view(N, P, Q), Bk.t())          # (N, P, J)
        return torch.matmul(A, z)                          # (N, I, J)
    return {"kron+F.linear": _nograd(torch, kron_linear), "two matmuls": _nograd(torch, two_matmuls)}


# 10. Grouped linear layer (block-diagonal weight), the input flat (N, G*Ci) and
#     per-group weights in PyTorch's (out, in) layout.
w2_GLIN = """
def w2_grouped_linear(float(N,GC) x, float(G,Co,Ci) W, float(G,Co) bias) -> (y) {
  y(n, g, o) +=! x(n, g * Ci + i) * W(g, o, i)
  y(n, g, o) = y(n, g, o) + bias(g, o)
}
"""


@program(name="w2 grouped linear", kind="contraction", src=w2_GLIN,
         full=dict(N=4096, G=8, Ci=128, Co=128), tiny=dict(N=3, G=2, Ci=3, Co=4),
         inputs=lambda rng, s: [_n(rng, s["N"], s["G"] * s["Ci"]), _w(rng, s["G"], s["Co"], s["Ci"]),
                                0.1 * _n(rng, s["G"], s["Co"])])
def _w2_glin(torch, a, t, s):
    F = torch.nn.functional
    x, W, b = t
    N, G, Ci, Co = s["N"], s["G"], s["Ci"], s["Co"]

    def einsum():
        return torch.einsum("ngi,goi->ngo", x.view(N, G, Ci), W) + b

    def baddbmm():
        return torch.baddbmm(b[:, None, :], x.view(N, G, Ci).transpose(0, 1), W.transpose(1, 2)).transpose(0, 1)

    def conv1d_groups():
        return F.conv1d(x.view(N, G * Ci, 1), W.reshape(G * Co, Ci, 1), b.reshape(-1), groups=G).view(N, G, Co)
    return {"einsum": _nograd(torch, einsum), "baddbmm": _nograd(torch, baddbmm),
            "conv1d groups": _nograd(torch, conv1d_groups)}


# 11. Batched matmul with both operands transposed: C_b = A_b^T B_b^T.
w2_BMMT = """
def w2_bmm_tt(float(Bt,K,M) A, float(Bt,N,K) Bm) -> (C) {
  C(b, m, n) +=! A(b, k, m) * Bm(b, n, k)
}
"""


@program(name="w2 bmm both transposed", kind="contraction", src=w2_BMMT,
         full=dict(Bt=32, K=256, M=256, N=256), tiny=dict(Bt=2, K=3, M=4, N=5),
         inputs=lambda rng, s: [_n(rng, s["Bt"], s["K"], s["M"]), _w(rng, s["Bt"], s["N"], s["K"])])
def _w2_bmmt(torch, a, t, s):
    A, Bm = t
    return {"bmm(A.mT, B.mT)": _nograd(torch, lambda: torch.bmm(A.transpose(1, 2), Bm.transpose(1, 2))),
            "einsum": _nograd(torch, lambda: torch.einsum("bkm,bnk->bmn", A, Bm)),
            "(B@A).mT": _nograd(torch, lambda: torch.bmm(Bm, A).transpose(1, 2))}


# 12. Causal linear attention (Katharopoulos et al.) as its recurrence over time:
#     running sums of outer products k v^T, in the (B, T, H, D) layout of a Linear's output.
w2_LINATTN = """
def w2_linattn(float(B,T,H,D) q, float(B,T,H,D) k, float(B,T,H,E) v) -> (o) {
  for t in T {
    S(b, h, d, e) += k(b, t, h, d) * v(b, t, h, e)
    z(b, h, d) += k(b, t, h, d)
    num(b, h, e) +=! q(b, t, h, d) * S(b, h, d, e)
    den(b, h) +=! q(b, t, h, d) * z(b, h, d)
    o(b, t, h, e) = num(b, h, e) / den(b, h)
  }
}
"""


def _w2_linattn_inputs(rng, s):
    B, T, H, D, E = s["B"], s["T"], s["H"], s["D"], s["E"]

    def phi(z):  # elu(z) + 1 > 0: the feature map
        return np.where(z > 0, z + 1, np.exp(np.minimum(z, 0))).astype(np.float32)
    return [phi(_n(rng, B, T, H, D)), phi(_n(rng, B, T, H, D)), _n(rng, B, T, H, E)]


@program(name="w2 causal linear attention", kind="recurrence", src=w2_LINATTN,
         full=dict(B=4, T=256, H=8, D=32, E=32), tiny=dict(B=2, T=5, H=2, D=3, E=4),
         inputs=_w2_linattn_inputs)
def _w2_linattn(torch, a, t, s):
    q, k, v = t
    T = s["T"]

    def quadratic():
        A = torch.einsum("bthd,bshd->bhts", q, k).tril_()
        num = torch.einsum("bhts,bshe->bthe", A, v)
        return num / A.sum(-1).transpose(1, 2)[..., None]

    def loop():
        B, _, H, D = q.shape
        S = q.new_zeros(B, H, D, v.shape[-1])
        z = q.new_zeros(B, H, D)
        out = torch.empty_like(v)
        for i in range(T):
            kt, vt, qt = k[:, i], v[:, i], q[:, i]
            S += kt[..., :, None] * vt[..., None, :]
            z += kt
            out[:, i] = torch.einsum("bhd,bhde->bhe", qt, S) / (qt * z).sum(-1, keepdim=True)
        return out
    return {"quadratic masked": _nograd(torch, quadratic), "python loop": _nograd(torch, loop)}


# ------------------------------------------------------------ session 55: signal processing, scans and statistics


# ---------------------------------------------------------------------------
# w3: signal processing, scans and statistics
# ---------------------------------------------------------------------------

# 1. A bank of causal FIR filters applied to a batch of signals (batch-first),
#    zero padding before the start written as a select.
w3_FIR_BANK = """
def w3_fir_bank(float(B, L) x, float(F, K) h) -> (y) {
  y(b, f, t) +=! (t - k >= 0 ? x(b, t - k) : 0) * h(f, k) where t in 0:L, k in 0:K
}
"""


def _w3_fir_bank_inputs(rng, s):
    return [_n(rng, s["B"], s["L"]), _w(rng, s["F"], s["K"])]


@program(name="w3 fir bank causal", kind="signal", src=w3_FIR_BANK,
         full=dict(B=32, L=4096, F=16, K=64), tiny=dict(B=2, L=37, F=3, K=5),
         inputs=_w3_fir_bank_inputs)
def _w3_fir_bank(torch, a, t, s):
    F = torch.nn.functional
    x, h = t
    K = s["K"]
    hf = h.flip(-1)[:, None, :].contiguous()
    return {"F.conv1d": _nograd(torch, lambda: F.conv1d(F.pad(x[:, None, :], (K - 1, 0)), hf))}


# 2. Depthwise 'same' FIR over (B, C, L) with PyTorch's depthwise weight layout (C, 1, K) and a bias.
w3_DW_SAME = """
def w3_dw_same(float(B, C, L) x, float(C, 1, K) w, float(C) bias) -> (y) {
  y(b, c, t) +=! (t + k - K / 2 >= 0 && t + k - K / 2 < L ? x(b, c, t + k - K / 2) : 0) * w(c, 0, k)
    where t in 0:L, k in 0:K
  y(b, c, t) = y(b, c, t) + bias(c)
}
"""


def _w3_dw_same_inputs(rng, s):
    return [_n(rng, s["B"], s["C"], s["L"]), _w(rng, s["C"], 1, s["K"]), _n(rng, s["C"])]


@program(name="w3 depthwise fir same", kind="signal", src=w3_DW_SAME,
         full=dict(B=16, C=64, L=2048, K=31), tiny=dict(B=2, C=3, L=20, K=5),
         inputs=_w3_dw_same_inputs)
def _w3_dw_same(torch, a, t, s):
    F = torch.nn.functional
    x, w, bias = t
    return {"F.conv1d groups": _nograd(torch, lambda: F.conv1d(x, w, bias, padding=s["K"] // 2, groups=s["C"]))}


# 3. A biquad (second-order IIR) section, direct form I, as a loop over time.
#    sos is one row of scipy's second-order-sections layout: b0 b1 b2 a0 a1 a2.
w3_BIQUAD = """
def w3_biquad(float(B, L) x, float(6) sos) -> (y) {
  for t in L {
    y(b, t) = (sos(0) * x(b, t)
               + (t >= 1 ? sos(1) * x(b, t - 1) - sos(4) * y(b, t - 1) : 0)
               + (t >= 2 ? sos(2) * x(b, t - 2) - sos(5) * y(b, t - 2) : 0)) / sos(3)
  }
}
"""


def _w3_biquad_inputs(rng, s):
    # a resonant low-pass (poles at radius 0.95)
    r, th = 0.95, 0.3
    sos = np.array([0.02, 0.04, 0.02, 1.0, -2 * r * np.cos(th), r * r], np.float32)
    return [_n(rng, s["B"], s["L"]), sos]


@program(name="w3 biquad iir loop", kind="signal", src=w3_BIQUAD,
         full=dict(B=256, L=8192), tiny=dict(B=3, L=50),
         inputs=_w3_biquad_inputs)
def _w3_biquad(torch, a, t, s):
    import scipy.signal as ss
    x, sos = a
    sos64 = sos.astype(np.float64)

    def torch_loop():
        xt = t[0]
        b0, b1, b2, a0, a1, a2 = [float(v) for v in sos]
        y = torch.empty_like(xt)
        y1 = torch.zeros(xt.shape[0])
        y2 = torch.zeros(xt.shape[0])
        x1 = torch.zeros(xt.shape[0])
        x2 = torch.zeros(xt.shape[0])
        for i in range(xt.shape[1]):
            x0 = xt[:, i]
            y0 = (b0 * x0 + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2) / a0
            y[:, i] = y0
            x2, x1, y2, y1 = x1, x0, y1, y0
        return y
    out = {"scipy sosfilt": lambda: ss.sosfilt(sos[None, :], x, axis=-1),
           "scipy lfilter": lambda: ss.lfilter(sos64[:3], sos64[3:], x, axis=-1)}
    if s["L"] <= 64:   # a Python loop of torch ops: checked at tiny sizes only (8192 steps take ~0.3 s)
        out["torch loop"] = _nograd(torch, torch_loop)
    return out


# 4. Cumulative sum along the middle (time) axis of a batch-first (B, L, D) tensor with a loop,
#    and a cumulative product written as one statement that reads its own previous element.
w3_CUMSUM_CUMPROD = """
def w3_cum(float(B, L, D) x, float(B, L, D) g) -> (cs, cp) {
  for t in L {
    if t == 0 { cs(b, t, d) = x(b, t, d) }
    else      { cs(b, t, d) = cs(b, t - 1, d) + x(b, t, d) }
  }
  cp(b, t, d) = g(b, t, d)
  cp(b, t, d) = cp(b, t, d) * (t > 0 ? cp(b, t - 1, d) : 1) where t in 0:L
}
"""


def _w3_cum_inputs(rng, s):
    return [_n(rng, s["B"], s["L"], s["D"]),
            (1 + 0.02 * rng.standard_normal((s["B"], s["L"], s["D"]))).astype(np.float32)]


@program(name="w3 cumsum cumprod", kind="scan", src=w3_CUMSUM_CUMPROD,
         full=dict(B=16, L=512, D=256), tiny=dict(B=2, L=9, D=5),
         inputs=_w3_cum_inputs, pick=lambda r: list(r))
def _w3_cum(torch, a, t, s):
    x, g = t
    return {"torch.cumsum/cumprod": _nograd(torch, lambda: [torch.cumsum(x, 1), torch.cumprod(g, 1)]),
            "numpy cumsum/cumprod": lambda: [np.cumsum(a[0], 1), np.cumprod(a[1], 1)]}


# 5. Exponential moving average, per-feature decay from a logit, batch-first (B, T, D).
w3_EMA = """
def w3_ema(float(B, T, D) x, float(D) decay_logit) -> (m) {
  a(d) = sigmoid(decay_logit(d))
  for t in T {
    if t == 0 { m(b, t, d) = x(b, t, d) }
    else      { m(b, t, d) = a(d) * m(b, t - 1, d) + (1 - a(d)) * x(b, t, d) }
  }
}
"""


def _w3_ema_inputs(rng, s):
    return [_n(rng, s["B"], s["T"], s["D"]), (2 + rng.standard_normal(s["D"])).astype(np.float32)]


@program(name="w3 ema", kind="scan", src=w3_EMA,
         full=dict(B=32, T=512, D=256), tiny=dict(B=2, T=7, D=5),
         inputs=_w3_ema_inputs)
def _w3_ema(torch, a, t, s):
    x, dl = t

    def loop():
        al = torch.sigmoid(dl)
        one_m = 1 - al
        out = torch.empty_like(x)
        m = x[:, 0]
        out[:, 0] = m
        for i in range(1, x.shape[1]):
            m = torch.addcmul(one_m * x[:, i], al, m)
            out[:, i] = m
        return out
    return {"torch loop": _nograd(torch, loop)}


# 6. A real DFT with cos/sin tables (as one ports np.exp(-2j*pi*outer(f, n)/N)): re, im of rfft.
w3_RDFT = """
def w3_rdft(float(B, N) x) -> (re, im) {
  c(f, n) = cos(w) where f in 0:N / 2 + 1, n in 0:N, w = 6.283185307179586 * float((f * n) % N) / float(N)
  s(f, n) = -sin(w) where f in 0:N / 2 + 1, n in 0:N, w = 6.283185307179586 * float((f * n) % N) / float(N)
  re(b, f) +=! x(b, n) * c(f, n)
  im(b, f) +=! x(b, n) * s(f, n)
}
"""


@program(name="w3 rdft tables", kind="spectral", src=w3_RDFT,
         full=dict(B=128, N=1024), tiny=dict(B=2, N=12),
         inputs=lambda rng, s: [_n(rng, s["B"], s["N"])], pick=lambda r: list(r))
def _w3_rdft(torch, a, t, s):
    x, = t

    def fft():
        X = torch.fft.rfft(x)
        return [X.real, X.imag]
    return {"torch.fft.rfft": _nograd(torch, fft),
            "numpy.fft.rfft": lambda: (lambda X: [X.real, X.imag])(np.fft.rfft(a[0]))}


# 7. Normalized autocorrelation up to lag K (a free size), mean removed.
w3_AUTOCORR = """
def w3_autocorr(float(B, L) x) -> (r) {
  mu(b) +=! x(b, t) / L
  xc(b, t) = x(b, t) - mu(b)
  ac(b, k) +=! (t + k < L ? xc(b, t) * xc(b, t + k) : 0) where k in 0:K, t in 0:L
  r(b, k) = ac(b, k) / ac(b, 0)
}
"""


@program(name="w3 autocorrelation", kind="stats", src=w3_AUTOCORR,
         full=dict(B=64, L=4096, K=256), tiny=dict(B=2, L=30, K=6),
         inputs=lambda rng, s: [_n(rng, s["B"], s["L"])], free=("K",))
def _w3_autocorr(torch, a, t, s):
    F = torch.nn.functional
    x, = t
    L, K = s["L"], s["K"]

    def via_fft():
        xc = x - x.mean(1, keepdim=True)
        X = torch.fft.rfft(xc, n=2 * L)
        ac = torch.fft.irfft(X.real ** 2 + X.imag ** 2, n=2 * L)[:, :K]
        return ac / ac[:, :1]

    def via_conv():
        xc = x - x.mean(1, keepdim=True)
        ac = F.conv1d(F.pad(xc, (0, K - 1))[None], xc[:, None, :], groups=x.shape[0])[0]
        return ac / ac[:, :1]
    return {"torch fft": _nograd(torch, via_fft), "F.conv1d groups": _nograd(torch, via_conv)}


# 8. Rolling (valid) window mean and variance over time, channels last (B, L, C); window W a free size.
w3_ROLLING = """
def w3_rolling(float(B, L, C) x) -> (mean, var) {
  s1(b, t, c) +=! x(b, t + w, c) where w in 0:W
  s2(b, t, c) +=! x(b, t + w, c) * x(b, t + w, c) where w in 0:W
  mean(b, t, c) = s1(b, t, c) / W
  var(b, t, c) = s2(b, t, c) / W - mean(b, t, c) * mean(b, t, c)
}
"""


@program(name="w3 rolling mean var", kind="stats", src=w3_ROLLING,
         full=dict(B=16, L=2048, C=64, W=32), tiny=dict(B=2, L=15, C=3, W=4),
         inputs=lambda rng, s: [_n(rng, s["B"], s["L"], s["C"])], free=("W",), pick=lambda r: list(r))
def _w3_rolling(torch, a, t, s):
    F = torch.nn.functional
    x, = t
    W = s["W"]

    def pool():
        xt = x.transpose(1, 2)
        m = F.avg_pool1d(xt, W, 1)
        v = F.avg_pool1d(xt * xt, W, 1) - m * m
        return [m.transpose(1, 2), v.transpose(1, 2)]

    def unfold():
        u = x.unfold(1, W, 1)   # (B, L-W+1, C, W)
        return [u.mean(-1), u.var(-1, unbiased=False)]
    return {"F.avg_pool1d": _nograd(torch, pool), "unfold mean/var": _nograd(torch, unfold)}


# 9. A constant-velocity Kalman filter over T steps for N independent tracks (state S=4, 2-D measurements).
w3_KALMAN = """
def w3_kalman(float(T, N, 2) z, float(N, S) x0, float(N, S, S) P0, float(S, S) Fm, float(2, S) Hm,
              float(S, S) Q, float(2, 2) R) -> (xs) {
  for t in T {
    if t == 0 { xp(n, i) +=! Fm(i, j) * x0(n, j) }
    else      { xp(n, i) +=! Fm(i, j) * xs(t - 1, n, j) }
    if t == 0 { FP(n, i, j) +=! Fm(i, k) * P0(n, k, j) }
    else      { FP(n, i, j) +=! Fm(i, k) * P(n, k, j) }
    Pp(n, i, j) +=! FP(n, i, k) * Fm(j, k)
    Pp(n, i, j) = Pp(n, i, j) + Q(i, j)
    hx(n, m) +=! Hm(m, j) * xp(n, j)
    yv(n, m) = z(t, n, m) - hx(n, m)
    PHt(n, i, m) +=! Pp(n, i, j) * Hm(m, j)
    Sm(n, m, q) +=! Hm(m, i) * PHt(n, i, q)
    Sm(n, m, q) = Sm(n, m, q) + R(m, q)
    det(n) = Sm(n, 0, 0) * Sm(n, 1, 1) - Sm(n, 0, 1) * Sm(n, 1, 0)
    Si(n, m, q) = (m == q ? Sm(n, 1 - m, 1 - q) : -Sm(n, m, q)) / det(n) where m in 0:2, q in 0:2
    Kg(n, i, m) +=! PHt(n, i, q) * Si(n, q, m)
    xs(t, n, i) = xp(n, i)
    xs(t, n, i) += Kg(n, i, m) * yv(n, m)
    KH(n, i, j) +=! Kg(n, i, m) * Hm(m, j)
    IKH(n, i, j) = (i == j ? 1.0 : 0.0) - KH(n, i, j)
    P(n, i, j) +=! IKH(n, i, k) * Pp(n, k, j)
  }
}
"""


def _w3_kalman_inputs(rng, s):
    T, N = s["T"], s["N"]
    dt = 0.1
    Fm = np.array([[1, 0, dt, 0], [0, 1, 0, dt], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    Hm = np.array([[1, 0, 0, 0], [0, 1, 0, 0]], np.float32)
    Q = (0.01 * np.eye(4)).astype(np.float32)
    R = (0.1 * np.eye(2)).astype(np.float32)
    vel = rng.standard_normal((N, 2))
    pos = np.cumsum(np.broadcast_to(vel * dt, (T, N, 2)), 0) + 0.05 * np.cumsum(rng.standard_normal((T, N, 2)), 0)
    z = (pos + 0.3 * rng.standard_normal((T, N, 2))).astype(np.float32)
    x0 = np.zeros((N, 4), np.float32)
    x0[:, :2] = z[0]
    P0 = np.broadcast_to(np.eye(4, dtype=np.float32), (N, 4, 4)).copy()
    return [z, x0, P0, Fm, Hm, Q, R]


@program(name="w3 kalman tracks", kind="filter", src=w3_KALMAN,
         full=dict(T=64, N=2048), tiny=dict(T=5, N=3),
         inputs=_w3_kalman_inputs)
def _w3_kalman(torch, a, t, s):
    z, x0, P0, Fm, Hm, Q, R = t
    eye = torch.eye(4)

    def loop():
        x, P = x0, P0
        out = torch.empty(z.shape[0], z.shape[1], 4)
        for i in range(z.shape[0]):
            xp = x @ Fm.T
            Pp = Fm @ P @ Fm.T + Q
            y = z[i] - xp @ Hm.T
            PHt = Pp @ Hm.T
            S = Hm @ PHt + R
            K = PHt @ torch.linalg.inv(S)
            x = xp + (K @ y[..., None])[..., 0]
            P = (eye - K @ Hm) @ Pp
            out[i] = x
        return out

    def loop_2x2():   # the 2x2 innovation covariance inverted in closed form, as the TC program does
        x, P = x0, P0
        out = torch.empty(z.shape[0], z.shape[1], 4)
        for i in range(z.shape[0]):
            xp = x @ Fm.T
            Pp = Fm @ P @ Fm.T + Q
            y = z[i] - xp @ Hm.T
            PHt = Pp @ Hm.T
            S = Hm @ PHt + R
            a, b, c, d = S[:, 0, 0], S[:, 0, 1], S[:, 1, 0], S[:, 1, 1]
            Si = torch.stack([torch.stack([d, -b], -1), torch.stack([-c, a], -1)], -2) / (a * d - b * c)[:, None, None]
            K = PHt @ Si
            x = xp + (K @ y[..., None])[..., 0]
            P = Pp - K @ PHt.mT
            out[i] = x
        return out
    return {"torch loop": _nograd(torch, loop), "torch loop 2x2 inverse": _nograd(torch, loop_2x2)}


# 10. An LRU / diagonal complex state-space layer (Orvieto et al.), real and imaginary parts
#     written out; projections in PyTorch's (out, in) layout, batch-first (B, T, H).
w3_LRU = """
def w3_lru(float(B, T, H) x, float(N, H) B_re, float(N, H) B_im, float(H, N) C_re, float(H, N) C_im,
           float(N) nu_log, float(N) theta_log, float(N) gamma_log, float(H) D) -> (y) {
  mag(n) = exp(-exp(nu_log(n)))
  lre(n) = mag(n) * cos(exp(theta_log(n)))
  lim(n) = mag(n) * sin(exp(theta_log(n)))
  ure(b, t, n) +=! x(b, t, h) * B_re(n, h)
  uim(b, t, n) +=! x(b, t, h) * B_im(n, h)
  for t in T {
    if t == 0 {
      hre(b, t, n) = exp(gamma_log(n)) * ure(b, t, n)
      him(b, t, n) = exp(gamma_log(n)) * uim(b, t, n)
    } else {
      hre(b, t, n) = lre(n) * hre(b, t - 1, n) - lim(n) * him(b, t - 1, n) + exp(gamma_log(n)) * ure(b, t, n)
      him(b, t, n) = lre(n) * him(b, t - 1, n) + lim(n) * hre(b, t - 1, n) + exp(gamma_log(n)) * uim(b, t, n)
    }
  }
  y(b, t, h) +=! C_re(h, n) * hre(b, t, n) - C_im(h, n) * him(b, t, n)
  y(b, t, h) = y(b, t, h) + D(h) * x(b, t, h)
}
"""


def _w3_lru_inputs(rng, s):
    B, T, H, N = s["B"], s["T"], s["H"], s["N"]
    r = np.sqrt(rng.uniform(0.9 ** 2, 0.999 ** 2, N))
    nu_log = np.log(-np.log(r)).astype(np.float32)
    theta_log = np.log(rng.uniform(0, np.pi / 10, N)).astype(np.float32)
    gamma_log = np.log(np.sqrt(1 - r ** 2)).astype(np.float32)
    return [_n(rng, B, T, H), _w(rng, N, H), _w(rng, N, H), _w(rng, H, N), _w(rng, H, N),
            nu_log, theta_log, gamma_log, _n(rng, H)]


@program(name="w3 lru diagonal ssm", kind="ssm", src=w3_LRU,
         full=dict(B=8, T=512, H=128, N=256), tiny=dict(B=2, T=6, H=5, N=4),
         inputs=_w3_lru_inputs)
def _w3_lru(torch, a, t, s):
    x, B_re, B_im, C_re, C_im, nu_log, theta_log, gamma_log, D = t
    Bc = torch.complex(B_re, B_im)
    Cc = torch.complex(C_re, C_im)

    def loop():
        lam = torch.exp(torch.complex(-torch.exp(nu_log), torch.exp(theta_log)))
        u = (x.to(torch.complex64) @ Bc.T) * torch.exp(gamma_log)
        hs = torch.empty_like(u)
        h = u[:, 0]
        hs[:, 0] = h
        for i in range(1, x.shape[1]):
            h = lam * h + u[:, i]
            hs[:, i] = h
        return (hs @ Cc.T).real + D * x
    return {"torch complex loop": _nograd(torch, loop)}


# 11. Per-row histograms over (possibly uneven) bin edges, written as one-hot comparisons.
w3_HIST = """
def w3_hist(float(B, N) x, float(E) edges) -> (counts) {
  counts(b, k) +=! (x(b, i) >= edges(k) && x(b, i) < edges(k + 1)) ? 1 : 0
}
"""


def _w3_hist_inputs(rng, s):
    E = s["E"]
    edges = np.sort(np.linspace(-2.5, 2.5, E) + rng.uniform(-0.02, 0.02, E)).astype(np.float32)
    return [_n(rng, s["B"], s["N"]), edges]


@program(name="w3 histogram onehot", kind="stats", src=w3_HIST,
         full=dict(B=256, N=4096, E=65), tiny=dict(B=3, N=40, E=6),
         inputs=_w3_hist_inputs)
def _w3_hist(torch, a, t, s):
    x, edges = t
    K = s["E"] - 1

    def bucket():
        i = torch.bucketize(x, edges, right=True)
        c = torch.zeros(x.shape[0], K + 2, dtype=torch.int64).scatter_add_(1, i, torch.ones_like(i))
        return c[:, 1:K + 1]

    def onehot():
        ge = x[:, :, None] >= edges
        return (ge[:, :, :-1] & ~ge[:, :, 1:]).sum(1)
    return {"bucketize+scatter_add": _nograd(torch, bucket), "broadcast compare": _nograd(torch, onehot)}


# 12. HMM forward algorithm in log space (a logsumexp per step), plus the sequence log-likelihood.
w3_HMM = """
def w3_hmm(float(T, B, S) logB, float(S, S) logA, float(S) logpi) -> (alpha, loglik) {
  for t in T {
    if t == 0 { alpha(t, b, j) = logpi(j) + logB(t, b, j) }
    else {
      mx(b, j) max=! alpha(t - 1, b, i) + logA(i, j)
      se(b, j) +=! exp(alpha(t - 1, b, i) + logA(i, j) - mx(b, j))
      alpha(t, b, j) = mx(b, j) + log(se(b, j)) + logB(t, b, j)
    }
  }
  m2(b) max=! alpha(T - 1, b, j)
  s2(b) +=! exp(alpha(T - 1, b, j) - m2(b))
  loglik(b) = m2(b) + log(s2(b))
}
"""


def _w3_hmm_inputs(rng, s):
    T, B, S = s["T"], s["B"], s["S"]
    A = rng.dirichlet(np.ones(S), S)
    pi = rng.dirichlet(np.ones(S))
    logB = -0.5 * rng.standard_normal((T, B, S)) ** 2
    return [logB.astype(np.float32), np.log(A).astype(np.float32), np.log(pi).astype(np.float32)]


@program(name="w3 hmm forward logsumexp", kind="scan", src=w3_HMM,
         full=dict(T=128, B=32, S=64), tiny=dict(T=5, B=2, S=4),
         inputs=_w3_hmm_inputs, pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel()]))
def _w3_hmm(torch, a, t, s):
    logB, logA, logpi = t

    def lse_loop():
        al = torch.empty_like(logB)
        cur = logpi + logB[0]
        al[0] = cur
        for i in range(1, logB.shape[0]):
            cur = torch.logsumexp(cur[:, :, None] + logA, dim=1) + logB[i]
            al[i] = cur
        return torch.cat([al.ravel(), torch.logsumexp(cur, -1)])

    def scaled_loop():   # the usual trick: exp(alpha - max) @ A
        A = torch.exp(logA)
        al = torch.empty_like(logB)
        cur = logpi + logB[0]
        al[0] = cur
        for i in range(1, logB.shape[0]):
            m = cur.max(-1, keepdim=True).values
            cur = torch.log(torch.exp(cur - m) @ A) + m + logB[i]
            al[i] = cur
        return torch.cat([al.ravel(), torch.logsumexp(cur, -1)])
    return {"torch logsumexp loop": _nograd(torch, lse_loop), "torch scaled matmul loop": _nograd(torch, scaled_loop)}


# 13. Lloyd's k-means: I iterations (a free size) of assignment (argmin) and centroid update.
w3_KMEANS = """
def w3_kmeans(float(N, D) X, float(K, D) C0) -> (C, assign) {
  C(k, d) = C0(k, d)
  for it in I {
    cn(k) +=! C(k, d) * C(k, d)
    dist(n, k) +=! X(n, d) * C(k, d)
    dist(n, k) = cn(k) - 2 * dist(n, k)
    assign(n) argmin=! dist(n, k)
    cnt(k) +=! assign(n) == k ? 1.0 : 0.0 where k in 0:K
    sm(k, d) +=! assign(n) == k ? X(n, d) : 0.0 where k in 0:K
    C(k, d) = cnt(k) > 0 ? sm(k, d) / cnt(k) : C(k, d)
  }
}
"""


def _w3_kmeans_inputs(rng, s):
    N, D, K = s["N"], s["D"], s["K"]
    centers = 3 * rng.standard_normal((K, D))
    lab = rng.integers(0, K, N)
    X = centers[lab] + 0.5 * rng.standard_normal((N, D))
    C0 = centers + 0.5 * rng.standard_normal((K, D))
    return [X.astype(np.float32), C0.astype(np.float32)]


@program(name="w3 kmeans lloyd", kind="clustering", src=w3_KMEANS,
         full=dict(N=8192, D=32, K=64, I=5), tiny=dict(N=50, D=3, K=4, I=3),
         inputs=_w3_kmeans_inputs, free=("I",), pick=lambda r: r[0])
def _w3_kmeans(torch, a, t, s):
    X, C0 = t
    K = s["K"]

    def loop():
        C = C0.clone()
        for _ in range(s["I"]):
            d = (C * C).sum(1) - 2 * X @ C.T
            asg = d.argmin(1)
            cnt = torch.bincount(asg, minlength=K).to(X.dtype)
            sm = torch.zeros_like(C).index_add_(0, asg, X)
            C = torch.where(cnt[:, None] > 0, sm / cnt.clamp(min=1)[:, None], C)
        return C
    return {"torch loop": _nograd(torch, loop)}


# ---------------------------------------------------------------------------
# v1: reinforcement learning and control
# ---------------------------------------------------------------------------

def _v1_f(x):
    return np.array(x, np.float32)


def _v1_pick_cat(r):
    """Several outputs of different shapes as one flat array (the harness compares one array)."""
    return np.concatenate([np.ravel(np.asarray(x)).astype(np.float32) for x in r])


def _v1_cat(torch, *xs):
    return torch.cat([x.reshape(-1).float() for x in xs])


def _v1_done(rng, *shape, p=0.02):
    return (rng.random(shape) < p).astype(np.float32)


# 1. discounted returns over a batch of episodes, (B, T) layout, reversed time loop
v1_returns_src = """
def v1_returns(float(B,T) rew, float(B,T) done, float gamma) -> (ret) {
  for s in T {
    if s == 0 { ret(b, T - 1 - s) = rew(b, T - 1 - s) }
    else      { ret(b, T - 1 - s) = rew(b, T - 1 - s) + gamma * (1 - done(b, T - 1 - s)) * ret(b, T - s) }
  }
}
"""


def _v1_returns_in(rng, s):
    return [_n(rng, s["B"], s["T"]), _v1_done(rng, s["B"], s["T"]), _v1_f(0.99)]


@program(name="v1 discounted returns", kind="rl", src=v1_returns_src, full=dict(B=512, T=1000), tiny=dict(B=3, T=7),
         inputs=_v1_returns_in)
def _v1_returns_ref(torch, a, t, s):
    rew, done, gamma = t

    def loop():
        T = rew.shape[1]
        ret = torch.empty_like(rew)
        run = torch.zeros(rew.shape[0])
        notdone = 1 - done
        g = float(gamma)
        for i in range(T - 1, -1, -1):
            run = rew[:, i] + g * notdone[:, i] * run
            ret[:, i] = run
        return ret
    return {"torch loop": loop}


# 2. GAE, (T, B) layout as CleanRL keeps its rollout buffers
v1_gae_src = """
def v1_gae(float(T,B) rew, float(T,B) val, float(B) last_val, float(T,B) done,
           float gamma, float lam) -> (adv, ret) {
  for s in T {
    if s == 0 {
      adv(T - 1 - s, b) = rew(T - 1 - s, b) + gamma * (1 - done(T - 1 - s, b)) * last_val(b) - val(T - 1 - s, b)
    } else {
      adv(T - 1 - s, b) = rew(T - 1 - s, b) + gamma * (1 - done(T - 1 - s, b)) * val(T - s, b) - val(T - 1 - s, b)
                          + gamma * lam * (1 - done(T - 1 - s, b)) * adv(T - s, b)
    }
  }
  ret(t, b) = adv(t, b) + val(t, b)
}
"""


def _v1_gae_in(rng, s):
    T, B = s["T"], s["B"]
    return [_n(rng, T, B), _n(rng, T, B), _n(rng, B), _v1_done(rng, T, B), _v1_f(0.99), _v1_f(0.95)]


@program(name="v1 gae advantages", kind="rl", src=v1_gae_src, full=dict(T=1024, B=256), tiny=dict(T=6, B=3),
         inputs=_v1_gae_in)
def _v1_gae_ref(torch, a, t, s):
    rew, val, last_val, done, gamma, lam = t

    def loop():
        T = rew.shape[0]
        g, l = float(gamma), float(lam)
        adv = torch.empty_like(rew)
        notdone = 1.0 - done
        nextval = torch.cat([val[1:], last_val[None]], 0)
        delta = rew + g * nextval * notdone - val
        last = torch.zeros_like(last_val)
        for i in range(T - 1, -1, -1):
            last = delta[i] + g * l * notdone[i] * last
            adv[i] = last
        return adv, adv + val
    return {"torch loop": loop}


# 3. linear TD(lambda) with accumulating eligibility traces, B independent agents
v1_tdl_src = """
def v1_td_lambda(float(T + 1, B, F) phi, float(T, B) rew, float(B, F) w0,
                 float gamma, float lam, float alpha) -> (w) {
  w(b, f) = w0(b, f)
  for t in T {
    v(b) +=! w(b, f) * phi(t, b, f)
    vn(b) +=! w(b, f) * phi(t + 1, b, f)
    delta(b) = rew(t, b) + gamma * vn(b) - v(b)
    if t == 0 { z(b, f) = phi(t, b, f) }
    else      { z(b, f) = gamma * lam * z(b, f) + phi(t, b, f) }
    w(b, f) = w(b, f) + alpha * delta(b) * z(b, f)
  }
}
"""


def _v1_tdl_in(rng, s):
    T, B, F = s["T"], s["B"], s["F"]
    return [_n(rng, T + 1, B, F) / np.float32(np.sqrt(F)), _n(rng, T, B), np.zeros((B, F), np.float32),
            _v1_f(0.9), _v1_f(0.8), _v1_f(0.01)]


@program(name="v1 td lambda traces", kind="rl", src=v1_tdl_src, full=dict(T=200, B=256, F=128), tiny=dict(T=5, B=3, F=4),
         inputs=_v1_tdl_in)
def _v1_tdl_ref(torch, a, t, s):
    phi, rew, w0, gamma, lam, alpha = t

    def loop():
        g, l, al = float(gamma), float(lam), float(alpha)
        w = w0.clone()
        z = torch.zeros_like(w0)
        for i in range(rew.shape[0]):
            v = (w * phi[i]).sum(-1)
            vn = (w * phi[i + 1]).sum(-1)
            delta = rew[i] + g * vn - v
            z = g * l * z + phi[i]
            w = w + al * delta[:, None] * z
        return w
    return {"torch loop": loop}


# 4. value iteration on a tabular MDP, K sweeps (a free size), greedy policy
v1_vi_src = """
def v1_value_iteration(float(S, A, S) P, float(S, A) R, float gamma) -> (V, pi) {
  for it in K {
    q(s, a) +=! P(s, a, n) * V(n)
    q(s, a) = R(s, a) + gamma * q(s, a)
    V(s) max=! q(s, a)
  }
  pi(s) argmax=! q(s, a)
}
"""


def _v1_vi_in(rng, s):
    S, A = s["S"], s["A"]
    P = rng.random((S, A, S)) ** 8
    P /= P.sum(-1, keepdims=True)
    return [P.astype(np.float32), _n(rng, S, A), _v1_f(0.9)]


@program(name="v1 value iteration", kind="rl", src=v1_vi_src, full=dict(S=384, A=8, K=40), tiny=dict(S=5, A=3, K=4),
         inputs=_v1_vi_in, free=("K",))
def _v1_vi_ref(torch, a, t, s):
    P, R, gamma = t
    S, A = R.shape
    P2 = P.reshape(S * A, S)
    g = float(gamma)

    def loop():
        V = torch.zeros(S)
        for _ in range(s["K"]):
            q = torch.addmv(R.reshape(-1), P2, V, alpha=g).view(S, A)
            V = q.amax(1)
        return V, q.argmax(1).int()
    return {"torch loop": loop}


# 5. DQN loss: linear Q network and target network, gather of the taken action, Huber loss
v1_dqn_src = """
def v1_dqn_loss(float(B, D) obs, float(B, D) nobs, float(A, D) W, float(A) bias, float(A, D) Wt, float(A) bt,
                int64(B) act, float(B) rew, float(B) done, float gamma) -> (td, loss) {
  qa(b) +=! obs(b, d) * W(act(b), d)
  qn(b, a) +=! nobs(b, d) * Wt(a, d)
  mx(b) max=! qn(b, a) + bt(a)
  td(b) = qa(b) + bias(act(b)) - (rew(b) + gamma * (1 - done(b)) * mx(b))
  loss +=! (fabs(td(b)) < 1 ? 0.5 * td(b) * td(b) : fabs(td(b)) - 0.5) / B
}
"""


def _v1_dqn_in(rng, s):
    B, D, A = s["B"], s["D"], s["A"]
    return [_n(rng, B, D), _n(rng, B, D), _w(rng, A, D), _n(rng, A) * 0.1, _w(rng, A, D), _n(rng, A) * 0.1,
            rng.integers(0, A, B).astype(np.int64), _n(rng, B), _v1_done(rng, B, p=0.1), _v1_f(0.99)]


@program(name="v1 dqn huber loss", kind="rl", src=v1_dqn_src, full=dict(B=8192, D=128, A=18), tiny=dict(B=5, D=4, A=3),
         inputs=_v1_dqn_in, pick=_v1_pick_cat)
def _v1_dqn_ref(torch, a, t, s):
    obs, nobs, W, bias, Wt, bt, act, rew, done, gamma = t
    F = torch.nn.functional
    g = float(gamma)

    def run():
        q = F.linear(obs, W, bias).gather(1, act[:, None]).squeeze(1)
        target = rew + g * (1 - done) * F.linear(nobs, Wt, bt).amax(1)
        return _v1_cat(torch, q - target, F.smooth_l1_loss(q, target))
    return {"torch": _nograd(torch, run)}


# 6. MLP policy: log-prob of taken actions and entropy of the categorical
v1_policy_src = """
def v1_policy_logp(float(B, D) obs, float(H, D) W1, float(H) b1, float(H, H) W2, float(H) b2,
                   float(A, H) W3, float(A) b3, int64(B) act) -> (logp, ent) {
  h1(b, j) +=! obs(b, d) * W1(j, d)
  h1(b, j) = tanh(h1(b, j) + b1(j))
  h2(b, j) +=! h1(b, k) * W2(j, k)
  h2(b, j) = tanh(h2(b, j) + b2(j))
  lg(b, a) +=! h2(b, k) * W3(a, k)
  lg(b, a) = lg(b, a) + b3(a)
  mx(b) max=! lg(b, a)
  se(b) +=! exp(lg(b, a) - mx(b))
  lse(b) = mx(b) + log(se(b))
  logp(b) = lg(b, act(b)) - lse(b)
  ent(b) +=! -exp(lg(b, a) - lse(b)) * (lg(b, a) - lse(b))
}
"""


def _v1_policy_in(rng, s):
    B, D, H, A = s["B"], s["D"], s["H"], s["A"]
    return [_n(rng, B, D), _w(rng, H, D), _n(rng, H) * 0.1, _w(rng, H, H), _n(rng, H) * 0.1, _w(rng, A, H),
            _n(rng, A) * 0.1, rng.integers(0, A, B).astype(np.int64)]


@program(name="v1 mlp policy logprob", kind="rl", src=v1_policy_src, full=dict(B=4096, D=64, H=256, A=16),
         tiny=dict(B=5, D=3, H=8, A=4), inputs=_v1_policy_in)
def _v1_policy_ref(torch, a, t, s):
    obs, W1, b1, W2, b2, W3, b3, act = t
    F = torch.nn.functional

    def run():
        h = torch.tanh(F.linear(obs, W1, b1))
        h = torch.tanh(F.linear(h, W2, b2))
        lp = F.log_softmax(F.linear(h, W3, b3), -1)
        return lp.gather(1, act[:, None]).squeeze(1), -(lp.exp() * lp).sum(-1)
    return {"torch": _nograd(torch, run)}


# 7. PPO clipped surrogate + value loss, advantages normalised in the batch
v1_ppo_src = """
def v1_ppo_loss(float(N) logp, float(N) logp_old, float(N) adv, float(N) ret, float(N) v, float clip)
    -> (pg_loss, v_loss, clipfrac) {
  am +=! adv(i) / N
  av +=! (adv(i) - am) * (adv(i) - am) / (N - 1)
  ratio(i) = exp(logp(i) - logp_old(i))
  an(i) = (adv(i) - am) / (sqrt(av) + 1e-8)
  pg_loss +=! -min(ratio(i) * an(i), min(max(ratio(i), 1 - clip), 1 + clip) * an(i)) / N
  v_loss +=! 0.5 * (v(i) - ret(i)) * (v(i) - ret(i)) / N
  clipfrac +=! (fabs(ratio(i) - 1) > clip ? 1.0 : 0.0) / N
}
"""


def _v1_ppo_in(rng, s):
    N = s["N"]
    lo = _n(rng, N)
    return [lo + 0.1 * _n(rng, N), lo, _n(rng, N) * 2 + 0.5, _n(rng, N), _n(rng, N), _v1_f(0.2)]


@program(name="v1 ppo clipped loss", kind="rl", src=v1_ppo_src, full=dict(N=1 << 21), tiny=dict(N=11),
         inputs=_v1_ppo_in, pick=_v1_pick_cat)
def _v1_ppo_ref(torch, a, t, s):
    logp, logp_old, adv, ret, v, clip = t
    c = float(clip)

    def run():
        an = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = (logp - logp_old).exp()
        pg = -torch.min(ratio * an, ratio.clamp(1 - c, 1 + c) * an).mean()
        vl = 0.5 * ((v - ret) ** 2).mean()
        cf = ((ratio - 1).abs() > c).float().mean()
        return torch.stack([pg, vl, cf])
    return {"torch": run}


# 8. LQR: Riccati backward recursion for E systems, M x M solve by Gauss-Jordan
v1_lqr_src = """
def v1_lqr(float(E, N, N) A, float(E, N, M) Bm, float(N, N) Q, float(M, M) R) -> (K, P) {
  P(e, i, j) = Q(i, j) where e in 0:E
  for t in T {
    PB(e, i, m) +=! P(e, i, k) * Bm(e, k, m)
    PA(e, i, j) +=! P(e, i, k) * A(e, k, j)
    S(e, m, n) +=! Bm(e, k, m) * PB(e, k, n)
    S(e, m, n) = S(e, m, n) + R(m, n)
    G(e, m, j) +=! Bm(e, k, m) * PA(e, k, j)
    for p in M {
      piv(e) = S(e, p, p)
      rs(e, n) = S(e, p, n) / piv(e)
      rg(e, j) = G(e, p, j) / piv(e)
      f(e, m) = S(e, m, p)
      S(e, m, n) = m == p ? rs(e, n) : S(e, m, n) - f(e, m) * rs(e, n)
      G(e, m, j) = m == p ? rg(e, j) : G(e, m, j) - f(e, m) * rg(e, j)
    }
    K(T - 1 - t, e, m, j) = G(e, m, j)
    Acl(e, k, j) +=! Bm(e, k, m) * G(e, m, j)
    Acl(e, k, j) = A(e, k, j) - Acl(e, k, j)
    PC(e, i, j) +=! P(e, i, l) * Acl(e, l, j)
    P(e, i, j) +=! A(e, k, i) * PC(e, k, j)
    P(e, i, j) = P(e, i, j) + Q(i, j)
  }
}
"""


def _v1_lqr_in(rng, s):
    E, N, M = s["E"], s["N"], s["M"]
    A = 0.95 * np.eye(N, dtype=np.float32)[None] + 0.2 * _n(rng, E, N, N) / np.float32(np.sqrt(N))
    Bm = _n(rng, E, N, M) * 0.3
    Q = np.eye(N, dtype=np.float32)
    R = np.eye(M, dtype=np.float32) * 0.5
    return [A.astype(np.float32), Bm, Q, R]


@program(name="v1 lqr riccati", kind="control", src=v1_lqr_src, full=dict(E=512, N=8, M=2, T=50),
         tiny=dict(E=2, N=3, M=2, T=3), inputs=_v1_lqr_in, free=("T",), pick=_v1_pick_cat)
def _v1_lqr_ref(torch, a, t, s):
    A, Bm, Q, R = t
    T = s["T"]

    def loop():
        P = Q.expand(A.shape[0], -1, -1)
        At, Bt = A.mT, Bm.mT
        Ks = torch.empty(T, A.shape[0], Bm.shape[2], A.shape[1])
        for i in range(T):
            BtP = Bt @ P
            K = torch.linalg.solve(R + BtP @ Bm, BtP @ A)
            Ks[T - 1 - i] = K
            P = Q + At @ P @ (A - Bm @ K)
        return _v1_cat(torch, Ks, P)
    return {"torch loop": loop}


# 9. linear dynamics rollout x(t+1) = A x(t) + B u(t) over a batch
v1_lin_src = """
def v1_linear_rollout(float(B, N) x0, float(T, B, M) u, float(N, N) A, float(N, M) Bm) -> (X) {
  for t in T {
    if t == 0 { X(t, b, i) +=! A(i, j) * x0(b, j) }
    else      { X(t, b, i) +=! A(i, j) * X(t - 1, b, j) }
    X(t, b, i) += Bm(i, m) * u(t, b, m)
  }
}
"""


def _v1_lin_in(rng, s):
    B, N, M, T = s["B"], s["N"], s["M"], s["T"]
    A = np.eye(N) * 0.9 + 0.05 * rng.standard_normal((N, N)) / np.sqrt(N)
    return [_n(rng, B, N), _n(rng, T, B, M), A.astype(np.float32), _w(rng, N, M)]


@program(name="v1 linear dynamics rollout", kind="control", src=v1_lin_src, full=dict(T=256, B=1024, N=32, M=8),
         tiny=dict(T=4, B=3, N=5, M=2), inputs=_v1_lin_in)
def _v1_lin_ref(torch, a, t, s):
    x0, u, A, Bm = t

    def loop():
        T = u.shape[0]
        drive = u @ Bm.T  # (T, B, N), all steps at once
        X = torch.empty(T, *x0.shape)
        x = x0
        At = A.T
        for i in range(T):
            x = torch.addmm(drive[i], x, At, out=X[i])
        return X
    return {"torch loop": loop}


# 10. Kalman filter for E tracks with a shared linear model and scalar observations
v1_kf_src = """
def v1_kalman(float(T, E) y, float(N, N) Fm, float(N) Hm, float(N, N) Qn, float r,
              float(E, N) x0, float(E, N, N) P0) -> (xs, nll) {
  x(e, i) = x0(e, i)
  P(e, i, j) = P0(e, i, j)
  for t in T {
    xp(e, i) +=! Fm(i, j) * x(e, j)
    FP(e, i, j) +=! Fm(i, k) * P(e, k, j)
    Pp(e, i, j) +=! FP(e, i, k) * Fm(j, k)
    Pp(e, i, j) = Pp(e, i, j) + Qn(i, j)
    PH(e, i) +=! Pp(e, i, j) * Hm(j)
    sv(e) +=! Hm(i) * PH(e, i)
    sv(e) = sv(e) + r
    Kg(e, i) = PH(e, i) / sv(e)
    inn(e) +=! -Hm(i) * xp(e, i)
    inn(e) = inn(e) + y(t, e)
    x(e, i) = xp(e, i) + Kg(e, i) * inn(e)
    P(e, i, j) = Pp(e, i, j) - Kg(e, i) * PH(e, j)
    xs(t, e, i) = x(e, i)
    nll(e) += 0.5 * (log(sv(e)) + inn(e) * inn(e) / sv(e))
  }
}
"""


def _v1_kf_in(rng, s):
    T, E, N = s["T"], s["E"], s["N"]
    dt = 0.1
    Fm = 0.9 * np.eye(N) + np.diag(np.full(N - 1, dt), 1)  # damped chain of integrators
    Hm = np.zeros(N)
    Hm[0] = 1
    Qn = np.eye(N) * 0.1
    P0 = np.broadcast_to(np.eye(N), (E, N, N)) * (1 + rng.random((E, 1, 1)))
    y = np.cumsum(rng.standard_normal((T, E)) * 0.3, 0)
    return [y.astype(np.float32), Fm.astype(np.float32), Hm.astype(np.float32), Qn.astype(np.float32), _v1_f(0.5),
            _n(rng, E, N) * 0.1, np.ascontiguousarray(P0, np.float32)]


@program(name="v1 kalman filter", kind="control", src=v1_kf_src, full=dict(T=200, E=1024, N=4),
         tiny=dict(T=4, E=3, N=3), inputs=_v1_kf_in, pick=_v1_pick_cat)
def _v1_kf_ref(torch, a, t, s):
    y, Fm, Hm, Qn, r, x0, P0 = t
    rv = float(r)

    def loop():
        T = y.shape[0]
        x, P = x0, P0
        xs = torch.empty(T, *x0.shape)
        nll = torch.zeros(y.shape[1])
        Ft = Fm.T
        for i in range(T):
            xp = x @ Ft
            Pp = Fm @ P @ Ft + Qn
            PH = Pp @ Hm
            sv = PH @ Hm + rv
            K = PH / sv[:, None]
            inn = y[i] - xp @ Hm
            x = xp + K * inn[:, None]
            P = Pp - K[:, :, None] * PH[:, None, :]
            xs[i] = x
            nll += 0.5 * (sv.log() + inn * inn / sv)
        return _v1_cat(torch, xs, nll)
    return {"torch loop": loop}


# 11. MPC: roll K candidate control sequences through tanh dynamics, quadratic cost
v1_mpc_src = """
def v1_mpc_rollout(float(N) x0, float(K, H, M) U, float(N, N) Wx, float(N, M) Wu, float(N) bias,
                   float(N) goal, float lam) -> (cost) {
  x(k, i) = x0(i) where k in 0:K
  for t in H {
    z(k, i) +=! Wx(i, j) * x(k, j)
    z(k, i) += Wu(i, m) * U(k, t, m)
    x(k, i) = tanh(z(k, i) + bias(i))
    cost(k) += (x(k, i) - goal(i)) * (x(k, i) - goal(i))
    cost(k) += lam * U(k, t, m) * U(k, t, m)
  }
}
"""


def _v1_mpc_in(rng, s):
    K, H, N, M = s["K"], s["H"], s["N"], s["M"]
    return [_n(rng, N), _n(rng, K, H, M), _w(rng, N, N), _w(rng, N, M), _n(rng, N) * 0.1, _n(rng, N) * 0.5,
            _v1_f(0.01)]


@program(name="v1 mpc tanh rollout", kind="control", src=v1_mpc_src, full=dict(K=2048, H=32, N=32, M=8),
         tiny=dict(K=4, H=3, N=5, M=2), inputs=_v1_mpc_in)
def _v1_mpc_ref(torch, a, t, s):
    x0, U, Wx, Wu, bias, goal, lam = t
    F = torch.nn.functional

    def loop():
        K, H, _ = U.shape
        drive = F.linear(U, Wu, bias)  # (K, H, N)
        cost = float(lam) * (U * U).sum((1, 2))
        x = x0.expand(K, -1)
        WxT = Wx.T
        for i in range(H):
            x = torch.tanh(torch.addmm(drive[:, i], x, WxT))
            cost = cost + ((x - goal) ** 2).sum(1)
        return cost
    return {"torch loop": loop}


# 12. cross-entropy method: mean and std of the NE lowest-cost samples of each problem
v1_cem_src = """
def v1_cem_elite(float(P, K) cost, float(P, K, D) X, int32 ne) -> (mu, sd) {
  rank(p, k) +=! (cost(p, j) < cost(p, k) || (cost(p, j) == cost(p, k) && j < k)) ? 1 : 0
  el(p, k) = rank(p, k) < ne ? 1.0 : 0.0
  mu(p, d) +=! el(p, k) * X(p, k, d) / float(ne)
  sd(p, d) +=! el(p, k) * (X(p, k, d) - mu(p, d)) * (X(p, k, d) - mu(p, d)) / float(ne - 1)
  sd(p, d) = sqrt(sd(p, d))
}
"""


def _v1_cem_in(rng, s):
    P, K, D = s["P"], s["K"], s["D"]
    return [_n(rng, P, K), _n(rng, P, K, D), np.array(s["NE"], np.int32)]


@program(name="v1 cem elite stats", kind="control", src=v1_cem_src, full=dict(P=64, K=512, D=32, NE=51),
         tiny=dict(P=2, K=7, D=3, NE=3), inputs=_v1_cem_in)
def _v1_cem_ref(torch, a, t, s):
    cost, X, _ = t
    NE = s["NE"]

    def run():
        idx = cost.topk(NE, dim=1, largest=False).indices
        el = X.gather(1, idx[:, :, None].expand(-1, -1, X.shape[2]))
        return torch.stack([el.mean(1), el.std(1)])
    return {"torch": run}


# ---------------------------------------------------------------------------
# v2: optimizers and hand-written training steps
# ---------------------------------------------------------------------------

def _v2_s(x):
    """A 0-rank float32 input (a hyper-parameter)."""
    return np.array(x, np.float32)


def _v2_f(a):
    return float(a)


class _v2_Cat:
    """Several outputs of different shapes, compared as one flat vector (built only when compared)."""

    def __init__(self, parts):
        self.parts = parts

    def __array__(self, dtype=None, copy=None):
        flat = [np.asarray(x.detach().numpy() if hasattr(x, "detach") else x, np.float64).ravel() for x in self.parts]
        return np.concatenate(flat) if dtype is None else np.concatenate(flat).astype(dtype)


def _v2_cat(contenders):
    """Wraps each contender so that its tuple of outputs compares as one _v2_Cat."""
    def wrap(fn):
        return lambda: _v2_Cat(fn())
    return {k: wrap(f) for k, f in contenders.items()}


_v2_ADAMW = """
def adamw_step(float(N) p, float(N) g, float(N) m, float(N) v,
               float lr, float beta1, float beta2, float eps, float wd, float step) -> (p1, m1, v1) {
  m1(i) = beta1 * m(i) + (1 - beta1) * g(i)
  v1(i) = beta2 * v(i) + (1 - beta2) * g(i) * g(i)
  p1(i) = p(i) * (1 - lr * wd)
        - lr * (m1(i) / (1 - pow(beta1, step))) / (sqrt(v1(i) / (1 - pow(beta2, step))) + eps)
}
"""


def _v2_adamw_inputs(rng, s):
    N = s["N"]
    return [_n(rng, N), _n(rng, N) * 0.1, _n(rng, N) * 0.01, np.abs(_n(rng, N)) * 1e-3,
            _v2_s(1e-3), _v2_s(0.9), _v2_s(0.999), _v2_s(1e-8), _v2_s(0.01), _v2_s(10.0)]


@program(name="v2 adamw step flat", kind="optimizer", src=_v2_ADAMW, full={"N": 2_000_000}, tiny={"N": 1000},
         inputs=_v2_adamw_inputs)
def v2_adamw_flat(torch, a, t, s):
    p, g, m, v = t[:4]
    lr, b1, b2, eps, wd, step = (float(x) for x in a[4:])
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step

    def ops():
        m1 = torch.lerp(m, g, 1 - b1)
        v1 = v.mul(b2).addcmul_(g, g, value=1 - b2)
        denom = (v1.sqrt() / bc2 ** 0.5).add_(eps)
        p1 = p.mul(1 - lr * wd).addcdiv_(m1, denom, value=-lr / bc1)
        return p1, m1, v1

    st = torch.tensor(step - 1)  # the functional step increments it; the fused kernel reads it as it is
    st_fused = torch.tensor(step)

    def fused():  # optimizer.step() of AdamW(fused=True) on copies of the state
        p1, m1, v1, s1 = p.clone(), m.clone(), v.clone(), st_fused.clone()
        torch._fused_adamw_([p1], [g], [m1], [v1], [], [s1], lr=lr, beta1=b1, beta2=b2, weight_decay=wd,
                            eps=eps, amsgrad=False, maximize=False)
        return p1, m1, v1

    def foreach():
        p1, m1, v1, s1 = p.clone(), m.clone(), v.clone(), st.clone()
        torch.optim._functional.adamw([p1], [g], [m1], [v1], [], [s1], foreach=True, capturable=False,
                                amsgrad=False, beta1=b1, beta2=b2, lr=lr, weight_decay=wd, eps=eps, maximize=False)
        return p1, m1, v1
    own = [p.clone(), m.clone(), v.clone()]

    def fused_inplace():  # AdamW(fused=True).step(): updates its own copy of the state in place, every call
        torch._fused_adamw_([own[0]], [g], [own[1]], [own[2]], [], [st_fused], lr=lr, beta1=b1, beta2=b2,
                            weight_decay=wd, eps=eps, amsgrad=False, maximize=False)
        return tuple(own)
    return {"torch ops": ops, "fused adamw": fused, "foreach adamw": foreach, "fused adamw in place": fused_inplace}


_v2_ADAM_AMS = """
# torch.optim.Adam(weight_decay=wd, amsgrad=True) on one weight in PyTorch's (out, in) layout
def adam_amsgrad(float(O,I) W, float(O,I) dW, float(O,I) m, float(O,I) v, float(O,I) vmax,
                 float lr, float beta1, float beta2, float eps, float wd, float step) -> (W1, m1, v1, vmax1) {
  gg(o, i) = dW(o, i) + wd * W(o, i)
  m1(o, i) = beta1 * m(o, i) + (1 - beta1) * gg(o, i)
  v1(o, i) = beta2 * v(o, i) + (1 - beta2) * gg(o, i) * gg(o, i)
  vmax1(o, i) = fmax(vmax(o, i), v1(o, i))
  W1(o, i) = W(o, i) - (lr / (1 - pow(beta1, step))) * m1(o, i)
                       / (sqrt(vmax1(o, i)) / sqrt(1 - pow(beta2, step)) + eps)
}
"""


def _v2_adam_ams_inputs(rng, s):
    O, I = s["O"], s["I"]
    v = np.abs(_n(rng, O, I)) * 1e-3
    return [_w(rng, O, I), _n(rng, O, I) * 0.1, _n(rng, O, I) * 0.01, v,
            (v * np.float32(1.5)).astype(np.float32) * (rng.random((O, I)) < 0.5).astype(np.float32),
            _v2_s(1e-3), _v2_s(0.9), _v2_s(0.999), _v2_s(1e-8), _v2_s(1e-4), _v2_s(25.0)]


@program(name="v2 adam amsgrad matrix", kind="optimizer", src=_v2_ADAM_AMS, full={"O": 1024, "I": 1536},
         tiny={"O": 17, "I": 33}, inputs=_v2_adam_ams_inputs)
def v2_adam_ams(torch, a, t, s):
    W, dW, m, v, vmax = t[:5]
    lr, b1, b2, eps, wd, step = (float(x) for x in a[5:])
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step

    def ops():
        g = dW.add(W, alpha=wd)
        m1 = torch.lerp(m, g, 1 - b1)
        v1 = v.mul(b2).addcmul_(g, g, value=1 - b2)
        vmax1 = torch.maximum(vmax, v1)
        denom = (vmax1.sqrt() / bc2 ** 0.5).add_(eps)
        return W.addcdiv(m1, denom, value=-lr / bc1), m1, v1, vmax1

    st = torch.tensor(step)  # the fused kernel reads the step as it is (the optimizer increments it first)

    def fused():
        W1, m1, v1, vm1, s1 = W.clone(), m.clone(), v.clone(), vmax.clone(), st.clone()
        torch._fused_adam_([W1], [dW], [m1], [v1], [vm1], [s1], lr=lr, beta1=b1, beta2=b2, weight_decay=wd,
                           eps=eps, amsgrad=True, maximize=False)
        return W1, m1, v1, vm1
    own = [W.clone(), m.clone(), v.clone(), vmax.clone()]

    def fused_inplace():  # Adam(fused=True, amsgrad=True).step() on its own state, in place
        torch._fused_adam_([own[0]], [dW], [own[1]], [own[2]], [own[3]], [st], lr=lr, beta1=b1, beta2=b2,
                           weight_decay=wd, eps=eps, amsgrad=True, maximize=False)
        return tuple(own)
    return {"torch ops": ops, "fused adam": fused, "fused adam in place": fused_inplace}


_v2_LAMB = """
# LAMB over L stacked layers: one trust ratio ||W|| / ||update|| per layer
def lamb(float(L,O,I) W, float(L,O,I) g, float(L,O,I) m, float(L,O,I) v,
         float lr, float beta1, float beta2, float eps, float wd, float step) -> (W1, m1, v1) {
  m1(l, o, i) = beta1 * m(l, o, i) + (1 - beta1) * g(l, o, i)
  v1(l, o, i) = beta2 * v(l, o, i) + (1 - beta2) * g(l, o, i) * g(l, o, i)
  u(l, o, i) = (m1(l, o, i) / (1 - pow(beta1, step))) / (sqrt(v1(l, o, i) / (1 - pow(beta2, step))) + eps)
             + wd * W(l, o, i)
  wn(l) +=! W(l, o, i) * W(l, o, i)
  un(l) +=! u(l, o, i) * u(l, o, i)
  r(l) = wn(l) > 0 && un(l) > 0 ? sqrt(wn(l) / un(l)) : 1.0
  W1(l, o, i) = W(l, o, i) - lr * r(l) * u(l, o, i)
}
"""


def _v2_lamb_inputs(rng, s):
    L, O, I = s["L"], s["O"], s["I"]
    return [_w(rng, L, O, I), _n(rng, L, O, I) * 0.1, _n(rng, L, O, I) * 0.01, np.abs(_n(rng, L, O, I)) * 1e-3,
            _v2_s(1e-3), _v2_s(0.9), _v2_s(0.999), _v2_s(1e-6), _v2_s(0.01), _v2_s(100.0)]


@program(name="v2 lamb per-layer trust", kind="optimizer", src=_v2_LAMB, full={"L": 8, "O": 384, "I": 512},
         tiny={"L": 3, "O": 9, "I": 20}, inputs=_v2_lamb_inputs)
def v2_lamb(torch, a, t, s):
    W, g, m, v = t[:4]
    lr, b1, b2, eps, wd, step = (float(x) for x in a[4:])
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step

    def ops():
        m1 = torch.lerp(m, g, 1 - b1)
        v1 = v.mul(b2).addcmul_(g, g, value=1 - b2)
        u = (m1 / bc1).div_((v1 / bc2).sqrt_().add_(eps)).add_(W, alpha=wd)
        wn = torch.linalg.vector_norm(W, dim=(1, 2))
        un = torch.linalg.vector_norm(u, dim=(1, 2))
        r = torch.where((wn > 0) & (un > 0), wn / un, torch.ones_like(wn))
        return W - (lr * r)[:, None, None] * u, m1, v1
    return {"torch ops": ops}


_v2_RMSPROP = """
# torch.optim.RMSprop(centered=True, momentum=mom)
def rmsprop(float(N) p, float(N) g, float(N) sq, float(N) ga, float(N) buf,
            float lr, float alpha, float eps, float mom) -> (p1, sq1, ga1, buf1) {
  sq1(i) = alpha * sq(i) + (1 - alpha) * g(i) * g(i)
  ga1(i) = alpha * ga(i) + (1 - alpha) * g(i)
  buf1(i) = mom * buf(i) + g(i) / (sqrt(sq1(i) - ga1(i) * ga1(i)) + eps)
  p1(i) = p(i) - lr * buf1(i)
}
"""


def _v2_rmsprop_inputs(rng, s):
    N = s["N"]
    ga = _n(rng, N) * 0.01
    sq = (ga * ga + np.abs(_n(rng, N)) * 1e-3).astype(np.float32)
    return [_n(rng, N), _n(rng, N) * 0.1, sq, ga, _n(rng, N) * 0.01,
            _v2_s(1e-2), _v2_s(0.99), _v2_s(1e-8), _v2_s(0.9)]


@program(name="v2 rmsprop centered momentum", kind="optimizer", src=_v2_RMSPROP, full={"N": 1_500_000},
         tiny={"N": 777}, inputs=_v2_rmsprop_inputs)
def v2_rmsprop(torch, a, t, s):
    p, g, sq, ga, buf = t[:5]
    lr, alpha, eps, mom = (float(x) for x in a[5:])

    def ops():
        sq1 = sq.mul(alpha).addcmul_(g, g, value=1 - alpha)
        ga1 = torch.lerp(ga, g, 1 - alpha)
        avg = sq1.addcmul(ga1, ga1, value=-1).sqrt_().add_(eps)
        buf1 = buf.mul(mom).addcdiv_(g, avg)
        return p.add(buf1, alpha=-lr), sq1, ga1, buf1

    def functional():  # what optimizer.step() runs, on copies of the state
        p1, sq1, ga1, buf1 = p.clone(), sq.clone(), ga.clone(), buf.clone()
        torch.optim._functional.rmsprop([p1], [g], [sq1], [ga1], [buf1], [torch.tensor(0.0)], foreach=True,
                                        lr=lr, alpha=alpha, eps=eps, weight_decay=0.0, momentum=mom,
                                        centered=True)
        return p1, sq1, ga1, buf1
    own = [p.clone(), sq.clone(), ga.clone(), buf.clone()]
    own_step = torch.tensor(0.0)

    def functional_inplace():  # RMSprop(foreach=True).step() on its own state, in place
        torch.optim._functional.rmsprop([own[0]], [g], [own[1]], [own[2]], [own[3]], [own_step], foreach=True,
                                        lr=lr, alpha=alpha, eps=eps, weight_decay=0.0, momentum=mom,
                                        centered=True)
        return tuple(own)
    return {"torch ops": ops, "functional rmsprop": functional, "rmsprop in place": functional_inplace}


_v2_CLIP_SGD = """
# clip_grad_norm_(max_norm) over all gradients, then SGD(momentum, nesterov=True)
def clip_sgd(float(H,D) W1, float(H) b1, float(C,H) W2,
             float(H,D) G1, float(H) Gb1, float(C,H) G2,
             float(H,D) M1, float(H) Mb1, float(C,H) M2,
             float lr, float mom, float max_norm) -> (W1n, b1n, W2n, M1n, Mb1n, M2n) {
  ss +=! G1(h, d) * G1(h, d)
  ss += Gb1(h) * Gb1(h)
  ss += G2(c, h) * G2(c, h)
  coef = fmin(max_norm / (sqrt(ss) + 1e-6), 1.0)
  M1n(h, d) = mom * M1(h, d) + coef * G1(h, d)
  Mb1n(h) = mom * Mb1(h) + coef * Gb1(h)
  M2n(c, h) = mom * M2(c, h) + coef * G2(c, h)
  W1n(h, d) = W1(h, d) - lr * (coef * G1(h, d) + mom * M1n(h, d))
  b1n(h) = b1(h) - lr * (coef * Gb1(h) + mom * Mb1n(h))
  W2n(c, h) = W2(c, h) - lr * (coef * G2(c, h) + mom * M2n(c, h))
}
"""


def _v2_clip_inputs(rng, s):
    H, D, C = s["H"], s["D"], s["C"]
    return [_w(rng, H, D), _n(rng, H) * 0.1, _w(rng, C, H),
            _n(rng, H, D) * 0.01, _n(rng, H) * 0.01, _n(rng, C, H) * 0.01,
            _n(rng, H, D) * 0.01, _n(rng, H) * 0.01, _n(rng, C, H) * 0.01,
            _v2_s(0.05), _v2_s(0.9), _v2_s(1.0)]


@program(pick=_v2_Cat, name="v2 clip global norm + nesterov sgd", kind="optimizer", src=_v2_CLIP_SGD,
         full={"H": 1024, "D": 1024, "C": 512}, tiny={"H": 13, "D": 7, "C": 5}, inputs=_v2_clip_inputs)
def v2_clip_sgd(torch, a, t, s):
    params, grads, bufs = t[0:3], t[3:6], t[6:9]
    lr, mom, max_norm = (float(x) for x in a[9:])

    def foreach():
        norms = torch._foreach_norm(grads)
        total = torch.linalg.vector_norm(torch.stack(norms))
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        gs = torch._foreach_mul(grads, coef)
        nb = torch._foreach_mul(bufs, mom)
        torch._foreach_add_(nb, gs)
        step = torch._foreach_add(gs, nb, alpha=mom)
        return (*torch._foreach_add(params, step, alpha=-lr), *nb)

    def plain():
        total = torch.sqrt(sum((g * g).sum() for g in grads))
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        outp, outb = [], []
        for p, g, b in zip(params, grads, bufs):
            gc = g * coef
            nb = b * mom + gc
            outp.append(p - lr * (gc + mom * nb))
            outb.append(nb)
        return (*outp, *outb)
    own_p = [x.clone() for x in params]
    own_b = [x.clone() for x in bufs]

    def inplace():  # clip_grad_norm_(foreach=True) + SGD(nesterov, foreach=True).step(), in place on own copies
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        coef = min(max_norm / (float(total) + 1e-6), 1.0)
        torch._foreach_mul_(own_b, mom)
        torch._foreach_add_(own_b, grads, alpha=coef)
        torch._foreach_add_(own_p, grads, alpha=-lr * coef)
        torch._foreach_add_(own_p, own_b, alpha=-lr * mom)
        return (*own_p, *own_b)
    return _v2_cat({"foreach": foreach, "torch ops": plain, "foreach in place": inplace})


_v2_MLP = """
# 2-layer MLP, ReLU, softmax cross-entropy (mean): the loss and the gradients of W1, b1, W2, b2
def mlp_step(float(B,D) X, int64(B) y, float(H,D) W1, float(H) b1, float(C,H) W2, float(C) b2)
    -> (loss, dW1, db1, dW2, db2) {
  z1(b, h) +=! X(b, d) * W1(h, d)
  z1(b, h) = z1(b, h) + b1(h)
  a1(b, h) = fmax(z1(b, h), 0)
  lg(b, c) +=! a1(b, h) * W2(c, h)
  lg(b, c) = lg(b, c) + b2(c)
  mx(b) max=! lg(b, c)
  e(b, c) = exp(lg(b, c) - mx(b))
  se(b) +=! e(b, c)
  loss +=! (log(se(b)) + mx(b) - lg(b, y(b))) / B
  dl(b, c) = (e(b, c) / se(b) - (c == y(b) ? 1.0 : 0.0)) / B
  dW2(c, h) +=! dl(b, c) * a1(b, h)
  db2(c) +=! dl(b, c)
  da(b, h) +=! dl(b, c) * W2(c, h)
  dz(b, h) = z1(b, h) > 0 ? da(b, h) : 0.0
  dW1(h, d) +=! dz(b, h) * X(b, d)
  db1(h) +=! dz(b, h)
}
"""


def _v2_mlp_inputs(rng, s):
    B, D, H, C = s["B"], s["D"], s["H"], s["C"]
    return [_n(rng, B, D), rng.integers(0, C, B).astype(np.int64), _w(rng, H, D), _n(rng, H) * 0.1,
            _w(rng, C, H), _n(rng, C) * 0.1]


@program(pick=_v2_Cat, name="v2 mlp fwd+bwd cross-entropy", kind="training step", src=_v2_MLP,
         full={"B": 256, "D": 784, "H": 512, "C": 10}, tiny={"B": 6, "D": 11, "H": 9, "C": 4},
         inputs=_v2_mlp_inputs)
def v2_mlp(torch, a, t, s):
    X, y, W1, b1, W2, b2 = t
    F = torch.nn.functional
    ps = [x.detach().clone().requires_grad_() for x in (W1, b1, W2, b2)]

    def autograd():
        loss = F.cross_entropy(F.linear(F.relu(F.linear(X, ps[0], ps[1])), ps[2], ps[3]), y)
        return (loss.detach(), *torch.autograd.grad(loss, ps))

    def manual():
        with torch.no_grad():
            z1 = torch.addmm(b1, X, W1.t())
            a1 = z1.clamp_min(0)
            lg = torch.addmm(b2, a1, W2.t())
            lsm = torch.log_softmax(lg, 1)
            loss = -lsm.gather(1, y[:, None]).mean()
            dl = lsm.exp_()
            dl[torch.arange(len(y)), y] -= 1
            dl /= len(y)
            da = (dl @ W2).mul_(z1 > 0)
            return loss, da.t() @ X, da.sum(0), dl.t() @ a1, dl.sum(0)
    return _v2_cat({"autograd": autograd, "manual torch": manual})


_v2_LOGREG = """
# logistic regression, K steps of full-batch gradient descent on the mean log-loss
def logreg_gd(float(N,D) X, float(N) y, float(D) w0, float b0, float lr) -> (w, bias) {
  w(d) = w0(d)
  bias = b0
  for t in K {
    z(n) +=! X(n, d) * w(d)
    r(n) = sigmoid(z(n) + bias) - y(n)
    gw(d) +=! X(n, d) * r(n)
    gb +=! r(n)
    w(d) = w(d) - lr * gw(d) / N
    bias = bias - lr * gb / N
  }
}
"""


def _v2_logreg_inputs(rng, s):
    N, D = s["N"], s["D"]
    X = _n(rng, N, D)
    wt = _n(rng, D) / np.sqrt(D)
    y = (X @ wt + 0.3 * rng.standard_normal(N) > 0).astype(np.float32)
    return [X, y, np.zeros(D, np.float32), _v2_s(0.0), _v2_s(0.5)]


@program(pick=_v2_Cat, name="v2 logistic regression K-step gd", kind="training loop", src=_v2_LOGREG,
         full={"N": 8192, "D": 256, "K": 20}, tiny={"N": 50, "D": 7, "K": 3}, inputs=_v2_logreg_inputs,
         free=("K",))
def v2_logreg(torch, a, t, s):
    X, y, w0, b0 = t[:4]
    lr, K, N = float(a[4]), s["K"], s["N"]

    def loop():
        with torch.no_grad():
            w, b = w0.clone(), b0.clone()
            for _ in range(K):
                r = torch.sigmoid(torch.addmv(b.expand(N), X, w)) - y
                w = w - (lr / N) * (X.t() @ r)
                b = b - (lr / N) * r.sum()
            return w, b

    def sgd_autograd():  # the loop a user writes with torch.optim.SGD and BCEWithLogits
        w = w0.clone().requires_grad_()
        b = b0.clone().requires_grad_()
        opt = torch.optim.SGD([w, b], lr=lr)
        for _ in range(K):
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(X @ w + b, y)
            loss.backward()
            opt.step()
        return w.detach(), b.detach()
    return _v2_cat({"torch loop": loop, "SGD + autograd": sgd_autograd})


_v2_LINEAR_BWD = """
# backward of y = x W^T + b (nn.Linear): dX, dW, db from dY
def linear_bwd(float(N,I) X, float(O,I) W, float(N,O) dY) -> (dX, dW, db) {
  dX(n, i) +=! dY(n, o) * W(o, i)
  dW(o, i) +=! dY(n, o) * X(n, i)
  db(o) +=! dY(n, o)
}
"""


@program(pick=_v2_Cat, name="v2 linear layer backward", kind="training step", src=_v2_LINEAR_BWD,
         full={"N": 512, "I": 768, "O": 768}, tiny={"N": 9, "I": 13, "O": 6},
         inputs=lambda rng, s: [_n(rng, s["N"], s["I"]), _w(rng, s["O"], s["I"]), _n(rng, s["N"], s["O"])])
def v2_linear_bwd(torch, a, t, s):
    X, W, dY = t
    Wg = W.detach().clone().requires_grad_()
    bg = torch.zeros(W.shape[0], requires_grad=True)
    Xg = X.detach().clone().requires_grad_()

    def mm():
        return dY @ W, dY.t() @ X, dY.sum(0)

    def autograd():
        out = torch.nn.functional.linear(Xg, Wg, bg)
        return torch.autograd.grad(out, (Xg, Wg, bg), dY)
    return _v2_cat({"matmuls": mm, "autograd (fwd+bwd)": autograd})


_v2_LN_BWD = """
# layer norm backward (recomputing the statistics): dx, dgamma, dbeta
def layernorm_bwd(float(N,D) x, float(D) gamma, float(N,D) dy) -> (dx, dgamma, dbeta) {
  mu(n) +=! x(n, d) / D
  xc(n, d) = x(n, d) - mu(n)
  var(n) +=! xc(n, d) * xc(n, d) / D
  rs(n) = rsqrt(var(n) + 1e-5)
  xh(n, d) = xc(n, d) * rs(n)
  dgamma(d) +=! dy(n, d) * xh(n, d)
  dbeta(d) +=! dy(n, d)
  gy(n, d) = dy(n, d) * gamma(d)
  s1(n) +=! gy(n, d)
  s2(n) +=! gy(n, d) * xh(n, d)
  dx(n, d) = rs(n) * (gy(n, d) - s1(n) / D - xh(n, d) * s2(n) / D)
}
"""


@program(pick=_v2_Cat, name="v2 layernorm backward", kind="training step", src=_v2_LN_BWD,
         full={"N": 4096, "D": 768}, tiny={"N": 5, "D": 19},
         inputs=lambda rng, s: [_n(rng, s["N"], s["D"]) * 2 + 1, 1 + 0.1 * _n(rng, s["D"]),
                                _n(rng, s["N"], s["D"])])
def v2_ln_bwd(torch, a, t, s):
    x, gamma, dy = t
    D = s["D"]
    xg = x.detach().clone().requires_grad_()
    gg = gamma.detach().clone().requires_grad_()
    bg = torch.zeros(D, requires_grad=True)

    def autograd():
        y = torch.nn.functional.layer_norm(xg, (D,), gg, bg, 1e-5)
        return torch.autograd.grad(y, (xg, gg, bg), dy)

    def aten():
        mean = x.mean(1, keepdim=True)
        rstd = torch.rsqrt(x.var(1, unbiased=False, keepdim=True) + 1e-5)
        return torch.ops.aten.native_layer_norm_backward(dy, x, (D,), mean, rstd, gamma, gamma,
                                                         [True, True, True])

    def manual():
        mean = x.mean(1, keepdim=True)
        xc = x - mean
        rstd = torch.rsqrt((xc * xc).mean(1, keepdim=True) + 1e-5)
        xh = xc * rstd
        gy = dy * gamma
        dx = rstd * (gy - gy.mean(1, keepdim=True) - xh * (gy * xh).mean(1, keepdim=True))
        return dx, (dy * xh).sum(0), dy.sum(0)
    return _v2_cat({"autograd (fwd+bwd)": autograd, "aten native_layer_norm_backward": aten, "manual torch": manual})


_v2_LSCE = """
# cross entropy with label smoothing (mean over the batch) and its gradient w.r.t. the logits
def ls_cross_entropy(float(N,C) x, int64(N) tgt, float eps) -> (loss, dx) {
  mx(n) max=! x(n, c)
  e(n, c) = exp(x(n, c) - mx(n))
  se(n) +=! e(n, c)
  lse(n) = mx(n) + log(se(n))
  sx(n) +=! x(n, c)
  loss +=! ((1 - eps) * (lse(n) - x(n, tgt(n))) + eps * (lse(n) - sx(n) / C)) / N
  dx(n, c) = (e(n, c) / se(n) - (c == tgt(n) ? 1 - eps : 0.0) - eps / C) / N
}
"""


@program(pick=_v2_Cat, name="v2 label smoothing ce fwd+grad", kind="training step", src=_v2_LSCE,
         full={"N": 2048, "C": 1000}, tiny={"N": 7, "C": 10},
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"]) * 3, rng.integers(0, s["C"], s["N"]).astype(np.int64),
                                _v2_s(0.1)])
def v2_lsce(torch, a, t, s):
    x, tgt = t[:2]
    eps = float(a[2])
    xg = x.detach().clone().requires_grad_()
    F = torch.nn.functional

    def autograd():
        loss = F.cross_entropy(xg, tgt, label_smoothing=eps)
        return loss.detach(), torch.autograd.grad(loss, xg)[0]

    def manual():
        N, C = x.shape
        lsm = torch.log_softmax(x, 1)
        loss = -((1 - eps) * lsm.gather(1, tgt[:, None]).squeeze(1) + eps / C * lsm.sum(1)).mean()
        dx = lsm.exp_()
        dx -= eps / C
        dx[torch.arange(N), tgt] -= 1 - eps
        return loss, dx.div_(N)
    return _v2_cat({"autograd": autograd, "manual torch": manual})


_v2_BN = """
# batch norm in training mode: normalise with the batch statistics, update the running ones
def batchnorm_train(float(N,C,H,W) x, float(C) gamma, float(C) beta, float(C) rm, float(C) rv,
                    float momentum) -> (y, rm1, rv1) {
  mean(c) +=! x(n, c, h, w)
  mean(c) = mean(c) / (N * H * W)
  var(c) +=! (x(n, c, h, w) - mean(c)) * (x(n, c, h, w) - mean(c))
  var(c) = var(c) / (N * H * W)
  sc(c) = gamma(c) * rsqrt(var(c) + 1e-5)
  y(n, c, h, w) = (x(n, c, h, w) - mean(c)) * sc(c) + beta(c)
  rm1(c) = (1 - momentum) * rm(c) + momentum * mean(c)
  rv1(c) = (1 - momentum) * rv(c) + momentum * var(c) * (N * H * W) / (N * H * W - 1)
}
"""


@program(pick=_v2_Cat, name="v2 batchnorm train step", kind="training step", src=_v2_BN,
         full={"N": 32, "C": 64, "H": 56, "W": 56}, tiny={"N": 3, "C": 5, "H": 4, "W": 6},
         inputs=lambda rng, s: [_n(rng, s["N"], s["C"], s["H"], s["W"]) * 2 + 0.5, 1 + 0.1 * _n(rng, s["C"]),
                                0.1 * _n(rng, s["C"]), 0.1 * _n(rng, s["C"]), 1 + np.abs(_n(rng, s["C"])),
                                _v2_s(0.1)])
def v2_bn(torch, a, t, s):
    x, gamma, beta, rm, rv = t[:5]
    mom = float(a[5])
    F = torch.nn.functional

    def fbn():
        rm1, rv1 = rm.clone(), rv.clone()
        with torch.no_grad():
            y = F.batch_norm(x, rm1, rv1, gamma, beta, training=True, momentum=mom, eps=1e-5)
        return y, rm1, rv1
    return _v2_cat({"F.batch_norm": fbn})


_v2_CG = """
# ridge regression (X^T X + lam I) w = X^T y by K steps of conjugate gradients, from w = 0
def cg_ridge(float(N,D) X, float(N) y, float lam) -> (w, res) {
  rhs(d) +=! X(n, d) * y(n)
  r(d) = rhs(d)
  p(d) = rhs(d)
  w(d) = 0.0 where d in 0:D
  rs +=! rhs(d) * rhs(d)
  for t in K {
    q(n) +=! X(n, d) * p(d)
    ap(d) +=! X(n, d) * q(n)
    ap(d) = ap(d) + lam * p(d)
    pap +=! p(d) * ap(d)
    alpha = rs / pap
    w(d) = w(d) + alpha * p(d)
    r(d) = r(d) - alpha * ap(d)
    rsn +=! r(d) * r(d)
    p(d) = r(d) + (rsn / rs) * p(d)
    rs = rsn
  }
  res = sqrt(rs)
}
"""


def _v2_cg_inputs(rng, s):
    N, D = s["N"], s["D"]
    X = (_n(rng, N, D) / np.sqrt(N)).astype(np.float32)
    y = (X @ _n(rng, D) + 0.1 * _n(rng, N)).astype(np.float32)
    return [X, y, _v2_s(0.5)]


@program(pick=_v2_Cat, name="v2 ridge regression cg", kind="training loop", src=_v2_CG,
         full={"N": 8192, "D": 384, "K": 12}, tiny={"N": 40, "D": 9, "K": 4}, inputs=_v2_cg_inputs, free=("K",))
def v2_cg(torch, a, t, s):
    X, y = t[:2]
    lam, K = float(a[2]), s["K"]

    def loop():
        b = X.t() @ y
        w = torch.zeros_like(b)
        r, p = b.clone(), b.clone()
        rs = r @ r
        for _ in range(K):
            ap = X.t() @ (X @ p) + lam * p
            alpha = rs / (p @ ap)
            w = w + alpha * p
            r = r - alpha * ap
            rsn = r @ r
            p = r + (rsn / rs) * p
            rs = rsn
        return w, rs.sqrt()
    return _v2_cat({"torch loop": loop})


# ---------------------------------------------------------------------------
# v3: dynamic programming and structured sequence models
# ---------------------------------------------------------------------------

_V3_NEG = -1e30


def _v3_logsoftmax(rng, *shape):
    x = rng.standard_normal(shape).astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(np.float32)


# 1. CTC loss, forward (alpha) recursion in log space over the extended labels
V3_CTC = """
def v3_ctc(float(T,B,C) lp, int32(B,L) lab) -> (loss) {
  ext(b, s) = s % 2 == 0 ? 0 : lab(b, s / 2) where s in 0:2*L+1
  for t in T {
    if t == 0 {
      alpha(t, b, s) = s < 2 ? lp(t, b, ext(b, s)) : -1e30 where s in 0:2*L+1
    } else {
      alpha(t, b, s) = m + log(exp(a0 - m) + exp(a1 - m) + exp(a2 - m)) + lp(t, b, ext(b, s))
        where a0 = alpha(t-1, b, s),
              a1 = s >= 1 ? alpha(t-1, b, s-1) : -1e30,
              a2 = s >= 2 && ext(b, s) != 0 && ext(b, s) != ext(b, s-2) ? alpha(t-1, b, s-2) : -1e30,
              m = max(a0, max(a1, a2)),
              s in 0:2*L+1
    }
  }
  loss(b) = -(m + log(exp(x - m) + exp(y - m)))
    where x = alpha(T-1, b, 2*L), y = alpha(T-1, b, 2*L-1), m = max(x, y)
}
"""


def _v3_ctc_inputs(rng, s):
    lp = _v3_logsoftmax(rng, s["T"], s["B"], s["C"])
    lab = rng.integers(1, s["C"], size=(s["B"], s["L"])).astype(np.int32)
    return [lp, lab]


@program(name="v3 ctc loss", kind="dp", src=V3_CTC,
         full=dict(T=200, B=32, C=64, L=50), tiny=dict(T=12, B=3, C=6, L=4),
         inputs=_v3_ctc_inputs)
def _v3_ctc_contenders(torch, a, t, s):
    F = torch.nn.functional
    T, B, L = s["T"], s["B"], s["L"]
    il = torch.full((B,), T, dtype=torch.long)
    tl = torch.full((B,), L, dtype=torch.long)
    lab = t[1].long()
    return {"F.ctc_loss": _nograd(torch, lambda: F.ctc_loss(t[0], lab, il, tl, blank=0, reduction="none"))}


# 2. linear-chain CRF: log partition function (forward algorithm)
V3_CRF = """
def v3_crf(float(T,B,K) em, float(K,K) trans, float(K) start, float(K) stop) -> (logz) {
  for t in T {
    if t == 0 {
      alpha(t, b, j) = start(j) + em(t, b, j)
    } else {
      mx(b, j) max=! alpha(t-1, b, i) + trans(i, j)
      se(b, j) +=! exp(alpha(t-1, b, i) + trans(i, j) - mx(b, j))
      alpha(t, b, j) = mx(b, j) + log(se(b, j)) + em(t, b, j)
    }
  }
  fm(b) max=! alpha(T-1, b, j) + stop(j)
  fs(b) +=! exp(alpha(T-1, b, j) + stop(j) - fm(b))
  logz(b) = fm(b) + log(fs(b))
}
"""


@program(name="v3 crf forward", kind="dp", src=V3_CRF,
         full=dict(T=128, B=64, K=32), tiny=dict(T=5, B=3, K=4),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["K"]), _n(rng, s["K"], s["K"]) * 0.5,
                                _n(rng, s["K"]), _n(rng, s["K"])])
def _v3_crf_contenders(torch, a, t, s):
    em, trans, start, stop = t

    def run():
        alpha = start + em[0]
        for i in range(1, em.shape[0]):
            alpha = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1) + em[i]
        return torch.logsumexp(alpha + stop, dim=1)
    return {"torch loop": run}


# 3. Viterbi decoding: max-product scores, backpointers, backtrace
V3_VITERBI = """
def v3_viterbi(float(T,B,K) em, float(K,K) trans) -> (path, best) {
  for t in T {
    if t == 0 {
      v(t, b, j) = em(t, b, j)
    } else {
      v(t, b, j) max=! v(t-1, b, i) + trans(i, j)
      bp(t, b, j) argmax=! v(t-1, b, i) + trans(i, j)
      v(t, b, j) = v(t, b, j) + em(t, b, j)
    }
  }
  best(b) max=! v(T-1, b, j)
  last(b) argmax=! v(T-1, b, j)
  for r in T {
    if r == 0 { path(T-1-r, b) = last(b) }
    else      { path(T-1-r, b) = bp(T-r, b, path(T-r, b)) }
  }
}
"""


@program(name="v3 viterbi backtrace", kind="dp", src=V3_VITERBI,
         full=dict(T=128, B=64, K=48), tiny=dict(T=6, B=3, K=5),
         inputs=lambda rng, s: [_n(rng, s["T"], s["B"], s["K"]), _n(rng, s["K"], s["K"])],
         pick=lambda r: r[0])
def _v3_viterbi_contenders(torch, a, t, s):
    em, trans = t

    def run():
        T = em.shape[0]
        v = em[0]
        bps = []
        for i in range(1, T):
            v, bp = (v.unsqueeze(2) + trans).max(dim=1)
            v = v + em[i]
            bps.append(bp)
        last = v.argmax(dim=1)
        path = [last]
        for bp in reversed(bps):
            last = bp.gather(1, last.unsqueeze(1)).squeeze(1)
            path.append(last)
        return torch.stack(path[::-1])
    return {"torch loop": run}


# 4. HMM forward-backward posteriors (scaled, probability space)
V3_HMM = """
def v3_hmm(float(T,B,K) e, float(K,K) A, float(K) pi) -> (post) {
  for t in T {
    if t == 0 {
      f(t, b, j) = pi(j) * e(t, b, j)
    } else {
      f(t, b, j) +=! f(t-1, b, i) * A(i, j)
      f(t, b, j) = f(t, b, j) * e(t, b, j)
    }
    c(t, b) +=! f(t, b, j)
    f(t, b, j) = f(t, b, j) / c(t, b)
  }
  for r in T {
    if r == 0 {
      g(T-1-r, b, i) = 1.0 where b in 0:B, i in 0:K
    } else {
      g(T-1-r, b, i) +=! A(i, j) * e(T-r, b, j) * g(T-r, b, j)
      g(T-1-r, b, i) = g(T-1-r, b, i) / c(T-r, b)
    }
  }
  z(t, b) +=! f(t, b, j) * g(t, b, j)
  post(t, b, j) = f(t, b, j) * g(t, b, j) / z(t, b)
}
"""


def _v3_hmm_inputs(rng, s):
    T, B, K = s["T"], s["B"], s["K"]
    e = rng.uniform(0.05, 1.0, (T, B, K)).astype(np.float32)
    A = rng.uniform(0.0, 1.0, (K, K))
    A = (A / A.sum(1, keepdims=True)).astype(np.float32)
    pi = rng.uniform(0.0, 1.0, K)
    pi = (pi / pi.sum()).astype(np.float32)
    return [e, A, pi]


@program(name="v3 hmm forward-backward", kind="dp", src=V3_HMM,
         full=dict(T=256, B=64, K=32), tiny=dict(T=6, B=3, K=4),
         inputs=_v3_hmm_inputs)
def _v3_hmm_contenders(torch, a, t, s):
    e, A, pi = t

    def run():
        T = e.shape[0]
        fs, cs = [], []
        f = pi * e[0]
        c = f.sum(1, keepdim=True)
        f = f / c
        fs.append(f)
        cs.append(c)
        for i in range(1, T):
            f = (f @ A) * e[i]
            c = f.sum(1, keepdim=True)
            f = f / c
            fs.append(f)
            cs.append(c)
        g = torch.ones_like(f)
        gs = [g]
        for i in range(T - 1, 0, -1):
            g = ((e[i] * g) @ A.T) / cs[i]
            gs.append(g)
        F_ = torch.stack(fs)
        G = torch.stack(gs[::-1])
        p = F_ * G
        return p / p.sum(2, keepdim=True)
    return {"torch loop": run}


# 5. soft-DTW between batches of sequences, row by row (in-row recurrence)
V3_SOFTDTW = """
def v3_softdtw(float(B,N,D) x, float(B,M,D) y, float gamma) -> (sdtw) {
  cost(b, i, j) +=! (x(b, i, k) - y(b, j, k)) * (x(b, i, k) - y(b, j, k))
  for i in N {
    R(b, i, j) = cost(b, i, j) + z - gamma * log(exp((z - p) / gamma) + exp((z - q) / gamma) + exp((z - r) / gamma))
      where p = i > 0 && j > 0 ? R(b, i-1, j-1) : (i == 0 && j == 0 ? 0 : 1e30),
            q = i > 0 ? R(b, i-1, j) : 1e30,
            r = j > 0 ? R(b, i, j-1) : 1e30,
            z = min(p, min(q, r)),
            j in 0:M
  }
  sdtw(b) = R(b, N-1, M-1)
}
"""


@program(name="v3 soft-dtw", kind="dp", src=V3_SOFTDTW,
         full=dict(B=32, N=96, M=96, D=16), tiny=dict(B=2, N=5, M=4, D=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["N"], s["D"]) * 0.5, _n(rng, s["B"], s["M"], s["D"]) * 0.5,
                                np.array(0.1, np.float32)])
def _v3_softdtw_contenders(torch, a, t, s):
    x, y, gamma = t
    g = float(a[2])

    def run():
        B, N, M = x.shape[0], x.shape[1], y.shape[1]
        C = torch.cdist(x, y) ** 2
        R = torch.full((B, N + 1, M + 1), 1e30)
        R[:, 0, 0] = 0
        for d in range(N + M - 1):
            lo, hi = max(0, d - M + 1), min(N, d + 1)
            i = torch.arange(lo, hi)
            j = d - i
            p, q, r = R[:, i, j], R[:, i, j + 1], R[:, i + 1, j]
            st = torch.stack([p, q, r])
            R[:, i + 1, j + 1] = C[:, i, j] - g * torch.logsumexp(-st / g, dim=0)
        return R[:, N, M]
    return {"torch antidiagonal": run}


# 6. DTW distance, looping over anti-diagonals (cells stored diagonal-major)
V3_DTW = """
def v3_dtw(float(B,N,D) x, float(B,M,D) y) -> (dist) {
  cost(b, i, j) +=! fabs(x(b, i, k) - y(b, j, k))
  for t in 0:N+M-1 {
    if t == 0 {
      W(t, b, i) = i == 0 ? cost(b, 0, 0) : 1e30 where b in 0:B, i in 0:N
    } else {
      W(t, b, i) = t - i >= 0 && t - i < M ? cost(b, i, t - i) + min(min(up, left), diag) : 1e30
        where up = i >= 1 ? W(t-1, b, i-1) : 1e30,
              left = W(t-1, b, i),
              diag = t >= 2 && i >= 1 ? W(t-2, b, i-1) : 1e30,
              b in 0:B, i in 0:N
    }
  }
  dist(b) = W(N+M-2, b, N-1)
}
"""


@program(name="v3 dtw antidiagonal", kind="dp", src=V3_DTW,
         full=dict(B=64, N=128, M=128, D=8), tiny=dict(B=2, N=5, M=4, D=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["N"], s["D"]), _n(rng, s["B"], s["M"], s["D"])])
def _v3_dtw_contenders(torch, a, t, s):
    x, y = t

    def run():
        B, N, M = x.shape[0], x.shape[1], y.shape[1]
        C = torch.cdist(x, y, p=1)
        # row by row: R(i, j) = C(i, j) + min(m(j), R(i, j-1)), unrolled with a cummin
        prev = torch.cumsum(C[:, 0], dim=1)
        for i in range(1, N):
            m = prev.clone()
            m[:, 1:] = torch.minimum(prev[:, 1:], prev[:, :-1])
            cs = torch.cumsum(C[:, i], dim=1)
            csx = torch.nn.functional.pad(cs[:, :-1], (1, 0))
            prev = cs + torch.cummin(m - csx, dim=1).values
        return prev[:, M - 1]
    return {"torch rows+cummin": run}


# 7. batched Levenshtein distance, row by row
V3_EDIT = """
def v3_edit(int32(B,N) a, int32(B,M) c) -> (dist) {
  for i in 0:N+1 {
    if i == 0 {
      E(b, i, j) = float(j) where b in 0:B, j in 0:M+1
    } else {
      E(b, i, j) = j == 0 ? float(i) : min(min(E(b, i-1, j) + 1, E(b, i, j-1) + 1),
                                           E(b, i-1, j-1) + (a(b, i-1) != c(b, j-1) ? 1.0 : 0.0))
        where j in 0:M+1
    }
  }
  dist(b) = E(b, N, M)
}
"""


@program(name="v3 edit distance", kind="dp", src=V3_EDIT,
         full=dict(B=256, N=96, M=112), tiny=dict(B=3, N=5, M=6),
         inputs=lambda rng, s: [rng.integers(0, 4, (s["B"], s["N"])).astype(np.int32),
                                rng.integers(0, 4, (s["B"], s["M"])).astype(np.int32)])
def _v3_edit_contenders(torch, a, t, s):
    A, Cc = t

    def run():
        B, N, M = A.shape[0], A.shape[1], Cc.shape[1]
        ar = torch.arange(M + 1, dtype=torch.float32)
        prev = ar.expand(B, M + 1)
        neq = (A.unsqueeze(2) != Cc.unsqueeze(1)).float()  # (B, N, M)
        for i in range(1, N + 1):
            tmp = torch.empty(B, M + 1)
            tmp[:, 0] = i
            tmp[:, 1:] = torch.minimum(prev[:, 1:] + 1, prev[:, :-1] + neq[:, i - 1])
            prev = torch.cummin(tmp - ar, dim=1).values + ar
        return prev[:, M]
    return {"torch rows+cummin": run}


# 8. Needleman-Wunsch with affine gaps (Gotoh), substitution matrix
V3_GOTOH = """
def v3_gotoh(int32(B,N) a, int32(B,M) c, float(A,A) S, float go, float ge) -> (score) {
  for i in 0:N+1 {
    if i == 0 {
      H(b, i, j) = j == 0 ? 0 : -go - (j - 1) * ge where b in 0:B, j in 0:M+1
      X(b, i, j) = -1e30 where b in 0:B, j in 0:M+1
    } else {
      X(b, i, j) = j == 0 ? -go - (i - 1) * ge : max(H(b, i-1, j) - go, X(b, i-1, j) - ge) where j in 0:M+1
      MX(b, j) = j == 0 ? X(b, i, j) : max(H(b, i-1, j-1) + S(a(b, i-1), c(b, j-1)), X(b, i, j)) where j in 0:M+1
      Y(b, j) = j == 0 ? -1e30 : max(MX(b, j-1) - go, Y(b, j-1) - ge) where j in 0:M+1
      H(b, i, j) = max(MX(b, j), Y(b, j))
    }
  }
  score(b) = H(b, N, M)
}
"""


def _v3_gotoh_inputs(rng, s):
    A = s["A"]
    S = rng.standard_normal((A, A)).astype(np.float32)
    S = (S + S.T) / 2 + 2 * np.eye(A, dtype=np.float32)
    return [rng.integers(0, A, (s["B"], s["N"])).astype(np.int32),
            rng.integers(0, A, (s["B"], s["M"])).astype(np.int32),
            S, np.array(3.0, np.float32), np.array(0.5, np.float32)]


@program(name="v3 gotoh alignment", kind="dp", src=V3_GOTOH,
         full=dict(B=128, N=128, M=128, A=20), tiny=dict(B=3, N=5, M=6, A=4),
         inputs=_v3_gotoh_inputs)
def _v3_gotoh_contenders(torch, a, t, s):
    A, Cc, S, go, ge = t
    go, ge = float(a[3]), float(a[4])
    NEG = -1e30

    def run():
        B, N, M = A.shape[0], A.shape[1], Cc.shape[1]
        sub = S[A.long().unsqueeze(2), Cc.long().unsqueeze(1)]  # (B, N, M)
        jj = torch.arange(M + 1, dtype=torch.float32)
        H = (-go - (jj - 1) * ge).expand(B, M + 1).clone()
        H[:, 0] = 0
        X = torch.full((B, M + 1), NEG)
        for i in range(1, N + 1):
            Xn = torch.maximum(H - go, X - ge)
            Xn[:, 0] = -go - (i - 1) * ge
            MX = Xn.clone()
            MX[:, 1:] = torch.maximum(H[:, :-1] + sub[:, i - 1], Xn[:, 1:])
            # Y(j) = max_{k<j} MX(k) - go - (j-1-k) ge
            cm = torch.cummax(MX + ge * jj, dim=1).values
            Y = torch.full((B, M + 1), NEG)
            Y[:, 1:] = cm[:, :-1] - go - ge * (jj[1:] - 1)
            H = torch.maximum(MX, Y)
            X = Xn
        return H[:, M]
    return {"torch rows+cummax": run}


# 9. beam search step: top-W of (beam score + token log-prob) by repeated max-and-mask
V3_BEAM = """
def v3_beam(float(B,K) score, float(B,K,V) logp) -> (idx, top) {
  cand(b, c) = score(b, c / V) + logp(b, c / V, c % V) where c in 0:K*V
  for r in W {
    top(b, r) max=! cand(b, c)
    idx(b, r) argmax=! cand(b, c)
    cand(b, c) = c == idx(b, r) ? -inf : cand(b, c)
  }
}
"""


@program(name="v3 beam topk step", kind="dp", src=V3_BEAM,
         full=dict(B=16, K=8, V=16000, W=8), tiny=dict(B=2, K=3, V=7, W=4),
         inputs=lambda rng, s: [_n(rng, s["B"], s["K"]), _v3_logsoftmax(rng, s["B"], s["K"], s["V"])],
         pick=lambda r: r[0], free=("W",))
def _v3_beam_contenders(torch, a, t, s):
    score, logp = t
    W = s["W"]

    def run():
        B = score.shape[0]
        cand = (score.unsqueeze(2) + logp).reshape(B, -1)
        return torch.topk(cand, W, dim=1).indices
    return {"torch.topk": run}


# 10. monotonic attention: expected alignments (Raffel et al. 2017)
V3_MONO = """
def v3_mono(float(B,I,J) p) -> (alpha) {
  for i in I {
    if i == 0 {
      q(b, j) = (j > 0 ? (1 - p(b, i, j-1)) * q(b, j-1) : 0) + (j == 0 ? 1 : 0) where j in 0:J
    } else {
      q(b, j) = (j > 0 ? (1 - p(b, i, j-1)) * q(b, j-1) : 0) + alpha(b, i-1, j) where j in 0:J
    }
    alpha(b, i, j) = p(b, i, j) * q(b, j)
  }
}
"""


@program(name="v3 monotonic attention", kind="dp", src=V3_MONO,
         full=dict(B=32, I=64, J=200), tiny=dict(B=2, I=4, J=6),
         inputs=lambda rng, s: [rng.uniform(0.01, 0.1, (s["B"], s["I"], s["J"])).astype(np.float32)])
def _v3_mono_contenders(torch, a, t, s):
    (p,) = t

    def run():
        B, I, J = p.shape
        prev = torch.zeros(B, J)
        prev[:, 0] = 1
        out = []
        for i in range(I):
            pi = p[:, i]
            cp = torch.cumprod(torch.nn.functional.pad(1 - pi[:, :-1], (1, 0), value=1.0), dim=1)
            prev = pi * cp * torch.cumsum(prev / cp.clamp(1e-10, 1.0), dim=1)
            out.append(prev)
        return torch.stack(out, dim=1)
    return {"torch cumprod/cumsum": run}


# 11. semi-Markov CRF: log partition over labelled segments of length <= L
V3_SEMI = """
def v3_semicrf(float(B,T,L,K) span, float(K,K) trans) -> (logz) {
  for t in T {
    mx(b, y) max=! t - l >= 0 ? (t - l >= 1 ? beta(t-l-1, b, y) : 0) + span(b, t-l, l, y) : -1e30 where l in 0:L
    sm(b, y) +=! t - l >= 0 ? exp((t - l >= 1 ? beta(t-l-1, b, y) : 0) + span(b, t-l, l, y) - mx(b, y)) : 0 where l in 0:L
    alpha(t, b, y) = mx(b, y) + log(sm(b, y))
    bm(b, y) max=! alpha(t, b, yp) + trans(yp, y)
    bs(b, y) +=! exp(alpha(t, b, yp) + trans(yp, y) - bm(b, y))
    beta(t, b, y) = bm(b, y) + log(bs(b, y))
  }
  zm(b) max=! alpha(T-1, b, y)
  zs(b) +=! exp(alpha(T-1, b, y) - zm(b))
  logz(b) = zm(b) + log(zs(b))
}
"""


@program(name="v3 semi-markov crf", kind="dp", src=V3_SEMI,
         full=dict(B=32, T=128, L=12, K=16), tiny=dict(B=2, T=7, L=3, K=3),
         inputs=lambda rng, s: [_n(rng, s["B"], s["T"], s["L"], s["K"]), _n(rng, s["K"], s["K"]) * 0.5])
def _v3_semi_contenders(torch, a, t, s):
    span, trans = t

    def run():
        B, T, L, K = span.shape
        hist = torch.zeros(T + 1, B, K)  # hist[i] = beta(i - 1); hist[0] = 0: a segment that starts the sequence
        alpha = None
        for i in range(T):
            ls = torch.arange(min(L, i + 1))
            sc = span[:, i - ls, ls, :]  # (B, n, K): the segment [i - l, i]
            alpha = torch.logsumexp(hist[i - ls].transpose(0, 1) + sc, dim=1)
            hist[i + 1] = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1)
        return torch.logsumexp(alpha, dim=1)
    return {"torch loop": run}


# 12. inside algorithm for a small PCFG in Chomsky normal form
V3_INSIDE = """
def v3_inside(float(B,L,N) pre, float(N,N,N) R) -> (logz) {
  for w in L {
    if w == 0 {
      I(w, b, i, A) = pre(b, i, A)
    } else {
      I(w, b, i, A) +=! R(A, P, Q) * I(m, b, i, P) * I(w - 1 - m, b, i + m + 1, Q) where m in 0:w, i in 0:L-w
    }
  }
  logz(b) = log(I(L-1, b, 0, 0))
}
"""


def _v3_inside_inputs(rng, s):
    B, L, N = s["B"], s["L"], s["N"]
    R = rng.uniform(0, 1, (N, N, N))
    R = (0.5 * R / R.sum((1, 2), keepdims=True)).astype(np.float32)
    pre = rng.uniform(0.1, 1.0, (B, L, N)).astype(np.float32)
    return [pre, R]


@program(name="v3 pcfg inside", kind="dp", src=V3_INSIDE,
         full=dict(B=16, L=32, N=16), tiny=dict(B=2, L=5, N=3),
         inputs=_v3_inside_inputs)
def _v3_inside_contenders(torch, a, t, s):
    pre, R = t

    def run():
        B, L, N = pre.shape
        I = torch.zeros(L, B, L, N)
        I[0] = pre
        Rf = R.reshape(N, N * N).T
        for w in range(1, L):
            n = L - w
            ms, ii = torch.arange(w).unsqueeze(1), torch.arange(n).unsqueeze(0)
            left = I[ms, :, ii]  # (w, n, B, N): spans [i, i + m]
            right = I[w - 1 - ms, :, ii + ms + 1]  # (w, n, B, N): spans [i + m + 1, i + w]
            Z = torch.einsum("mibp,mibq->bipq", left, right).reshape(B, n, N * N)
            I[w, :, :n] = Z @ Rf
        return torch.log(I[L - 1, :, 0, 0])
    return {"torch loop+einsum": run}


# ---------------------------------------------------------------------------------------------------------------
# x1: scientific computing and numerical methods
# ---------------------------------------------------------------------------------------------------------------

def _x1_d(rng, *shape):
    return rng.standard_normal(shape)


def _x1_f32(v):
    return np.array(v, np.float32)


def _x1_f64(v):
    return np.array(v, np.float64)


# 1. RK4 on a batch of Lorenz systems, float64 (chaotic), one tensor per component, time-first
@program(name="x1 rk4 lorenz batch (float64)", kind="loop", src="""
# classic RK4 for dx/dt = sigma (y - x), dy/dt = x (rho - z) - y, dz/dt = x y - beta z; state at every step
def lorenz_rk4(double(B, 3) s0, double sigma, double rho, double beta, double dt) -> (x, y, z) {
  for t in T {
    if t == 0 {
      x(t, b) = s0(b, 0)
      y(t, b) = s0(b, 1)
      z(t, b) = s0(b, 2)
    } else {
      k1x(b) = sigma * (y(t - 1, b) - x(t - 1, b))
      k1y(b) = x(t - 1, b) * (rho - z(t - 1, b)) - y(t - 1, b)
      k1z(b) = x(t - 1, b) * y(t - 1, b) - beta * z(t - 1, b)
      k2x(b) = sigma * (py - px) where px = x(t - 1, b) + 0.5 * dt * k1x(b), py = y(t - 1, b) + 0.5 * dt * k1y(b)
      k2y(b) = px * (rho - pz) - py where px = x(t - 1, b) + 0.5 * dt * k1x(b), py = y(t - 1, b) + 0.5 * dt * k1y(b), pz = z(t - 1, b) + 0.5 * dt * k1z(b)
      k2z(b) = px * py - beta * pz where px = x(t - 1, b) + 0.5 * dt * k1x(b), py = y(t - 1, b) + 0.5 * dt * k1y(b), pz = z(t - 1, b) + 0.5 * dt * k1z(b)
      k3x(b) = sigma * (py - px) where px = x(t - 1, b) + 0.5 * dt * k2x(b), py = y(t - 1, b) + 0.5 * dt * k2y(b)
      k3y(b) = px * (rho - pz) - py where px = x(t - 1, b) + 0.5 * dt * k2x(b), py = y(t - 1, b) + 0.5 * dt * k2y(b), pz = z(t - 1, b) + 0.5 * dt * k2z(b)
      k3z(b) = px * py - beta * pz where px = x(t - 1, b) + 0.5 * dt * k2x(b), py = y(t - 1, b) + 0.5 * dt * k2y(b), pz = z(t - 1, b) + 0.5 * dt * k2z(b)
      k4x(b) = sigma * (py - px) where px = x(t - 1, b) + dt * k3x(b), py = y(t - 1, b) + dt * k3y(b)
      k4y(b) = px * (rho - pz) - py where px = x(t - 1, b) + dt * k3x(b), py = y(t - 1, b) + dt * k3y(b), pz = z(t - 1, b) + dt * k3z(b)
      k4z(b) = px * py - beta * pz where px = x(t - 1, b) + dt * k3x(b), py = y(t - 1, b) + dt * k3y(b), pz = z(t - 1, b) + dt * k3z(b)
      x(t, b) = x(t - 1, b) + dt / 6 * (k1x(b) + 2 * k2x(b) + 2 * k3x(b) + k4x(b))
      y(t, b) = y(t - 1, b) + dt / 6 * (k1y(b) + 2 * k2y(b) + 2 * k3y(b) + k4y(b))
      z(t, b) = z(t - 1, b) + dt / 6 * (k1z(b) + 2 * k2z(b) + 2 * k3z(b) + k4z(b))
    }
  }
}""", full=dict(B=4096, T=256), tiny=dict(B=5, T=4), free=("T",),
    inputs=lambda r, s: [np.stack([r.uniform(-15, 15, s["B"]), r.uniform(-20, 20, s["B"]), r.uniform(5, 40, s["B"])], 1),
                         _x1_f64(10.0), _x1_f64(28.0), _x1_f64(8.0 / 3.0), _x1_f64(0.01)])
def _x1_lorenz(torch, a, t, s):
    s0 = t[0]
    sigma, rho, beta, dt = (float(v) for v in a[1:])
    T = s["T"]

    def f(x, y, z):
        return sigma * (y - x), x * (rho - z) - y, x * y - beta * z

    def run():
        out = torch.empty(3, T, s0.shape[0], dtype=s0.dtype)
        st = s0.t().contiguous()
        out[:, 0] = st
        x, y, z = st
        for k in range(1, T):
            k1 = f(x, y, z)
            k2 = f(x + 0.5 * dt * k1[0], y + 0.5 * dt * k1[1], z + 0.5 * dt * k1[2])
            k3 = f(x + 0.5 * dt * k2[0], y + 0.5 * dt * k2[1], z + 0.5 * dt * k2[2])
            k4 = f(x + dt * k3[0], y + dt * k3[1], z + dt * k3[2])
            x = x + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
            y = y + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
            z = z + dt / 6 * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
            out[0, k], out[1, k], out[2, k] = x, y, z
        return out

    def run_stacked():                       # the state as one (3, B) tensor, the derivative with torch.stack
        out = torch.empty(T, 3, s0.shape[0], dtype=s0.dtype)
        st = s0.t().contiguous()
        out[0] = st

        def g(u):
            return torch.stack(f(u[0], u[1], u[2]))
        for k in range(1, T):
            k1 = g(st)
            k2 = g(st + 0.5 * dt * k1)
            k3 = g(st + 0.5 * dt * k2)
            k4 = g(st + dt * k3)
            st = st + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            out[k] = st
        return out.transpose(0, 1)
    return {"torch loop over t (components)": run, "torch loop over t (stacked state)": run_stacked}


# 2. velocity Verlet for a batch of nonlinear pendulums, batch-first (b, t) outputs
@program(name="x1 verlet pendulum batch", kind="loop", src="""
# theta'' = -w2 sin(theta), velocity Verlet with step dt, every step kept
def pendulum(float(B) th0, float(B) om0, float(B) w2, float dt) -> (th, om) {
  for t in T {
    if t == 0 {
      th(b, t) = th0(b)
      om(b, t) = om0(b)
    } else {
      th(b, t) = th(b, t - 1) + dt * om(b, t - 1) - 0.5 * dt * dt * w2(b) * sin(th(b, t - 1))
      om(b, t) = om(b, t - 1) - 0.5 * dt * w2(b) * (sin(th(b, t - 1)) + sin(th(b, t)))
    }
  }
}""", full=dict(B=8192, T=160), tiny=dict(B=5, T=4), free=("T",),
    inputs=lambda r, s: [r.uniform(-3, 3, s["B"]).astype(np.float32), _n(r, s["B"]),
                         r.uniform(0.5, 4, s["B"]).astype(np.float32), _x1_f32(0.02)])
def _x1_pendulum(torch, a, t, s):
    th0, om0, w2 = t[:3]
    dt = float(a[3])
    T = s["T"]

    def run():
        th = torch.empty(T, th0.shape[0])
        om = torch.empty(T, th0.shape[0])
        th[0], om[0] = th0, om0
        x, v = th0, om0
        acc = -w2 * torch.sin(x)
        for k in range(1, T):
            x = x + dt * v + 0.5 * dt * dt * acc
            acc_new = -w2 * torch.sin(x)
            v = v + 0.5 * dt * (acc + acc_new)
            acc = acc_new
            th[k], om[k] = x, v
        return [th.t(), om.t()]
    return {"torch loop over t": run}


# 3. softened gravitational accelerations for a batch of N-body systems
@program(name="x1 nbody softened accelerations", kind="pairwise", src="""
# acc_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps2)^(3/2)
def nbody(float(B, N, 3) p, float(B, N) m, float eps2) -> (acc) {
  r2(b, i, j) +=! (p(b, j, d) - p(b, i, d)) * (p(b, j, d) - p(b, i, d))
  w(b, i, j) = m(b, j) * rsqrt(q) / q where q = r2(b, i, j) + eps2
  acc(b, i, d) +=! w(b, i, j) * (p(b, j, d) - p(b, i, d))
}""", full=dict(B=8, N=512), tiny=dict(B=2, N=5),
    inputs=lambda r, s: [_n(r, s["B"], s["N"], 3), r.uniform(0.5, 1.5, (s["B"], s["N"])).astype(np.float32), _x1_f32(0.01)])
def _x1_nbody(torch, a, t, s):
    p, m = t[:2]
    eps2 = float(a[2])

    def broadcast():
        d = p[:, None, :, :] - p[:, :, None, :]                 # (B, i, j, 3): p_j - p_i
        q = (d * d).sum(-1) + eps2
        w = m[:, None, :] * q.pow(-1.5)
        return (w[..., None] * d).sum(2)

    def bmm():
        q = torch.cdist(p, p).square() + eps2
        w = m[:, None, :] * torch.rsqrt(q) / q
        return torch.bmm(w, p) - w.sum(-1, keepdim=True) * p
    return {"torch broadcast": broadcast, "torch cdist + bmm": bmm}


# 4. damped spring-mass chains between two walls, symplectic Euler, final state only
@program(name="x1 damped spring-mass chain", kind="stencil", src="""
# spring i joins mass i-1 and mass i (spring 0 and spring N hold the ends to the walls)
def chain(float(B, N) x0, float(B, N) v0, float(N + 1) ks, float(N) invm, float c, float dt) -> (xf, vf) {
  for t in T {
    if t == 0 {
      x(t, b, i) = x0(b, i)
      v(t, b, i) = v0(b, i)
    } else {
      v(t, b, i) = v(t - 1, b, i) + dt * (invm(i) * (ks(i + 1) * ((i < N - 1 ? x(t - 1, b, i + 1) : 0) - x(t - 1, b, i))
                                                 - ks(i) * (x(t - 1, b, i) - (i > 0 ? x(t - 1, b, i - 1) : 0)))
                                       - c * v(t - 1, b, i)) where i in 0:N
      x(t, b, i) = x(t - 1, b, i) + dt * v(t, b, i)
    }
  }
  xf(b, i) = x(T - 1, b, i)
  vf(b, i) = v(T - 1, b, i)
}""", full=dict(B=256, N=512, T=120), tiny=dict(B=2, N=5, T=4), free=("T",),
    inputs=lambda r, s: [_n(r, s["B"], s["N"]), _n(r, s["B"], s["N"]),
                         r.uniform(0.5, 1.5, s["N"] + 1).astype(np.float32), r.uniform(0.5, 1.0, s["N"]).astype(np.float32),
                         _x1_f32(0.05), _x1_f32(0.1)])
def _x1_chain(torch, a, t, s):
    x0, v0, ks, invm = t[:4]
    c, dt = float(a[4]), float(a[5])
    F = torch.nn.functional

    def run():
        x, v = x0, v0
        for _ in range(s["T"] - 1):
            xp = F.pad(x, (1, 1))                                  # walls at 0
            ext = ks * torch.diff(xp, dim=1)                       # (B, N+1) spring tensions
            v = v + dt * (invm * torch.diff(ext, dim=1) - c * v)
            x = x + dt * v
        return [x, v]
    return {"torch loop over t (pad + diff)": run}


def _x1_newton_inputs(rng, B):
    """Right-hand sides from known roots, starting points near them (Newton converges for every row)."""
    xr, yr = rng.uniform(-2, 2, B), rng.uniform(-2, 2, B)
    a, c = xr ** 3 + yr, yr ** 3 - xr
    return [a.astype(np.float32), c.astype(np.float32),
            (xr + rng.uniform(-0.3, 0.3, B)).astype(np.float32), (yr + rng.uniform(-0.3, 0.3, B)).astype(np.float32)]


# 5. Newton's method on a batch of 2x2 nonlinear systems, updated in place, K iterations (free)
@program(name="x1 newton 2x2 systems in place", kind="loop", src="""
# x^3 + y = a, y^3 - x = c; J = [[3x^2, 1], [-1, 3y^2]], det = 9 x^2 y^2 + 1 > 0
def newton2(float(B) a, float(B) c, float(B) xs, float(B) ys) -> (x, y) {
  x(b) = xs(b)
  y(b) = ys(b)
  for k in K {
    f1(b) = x(b) * x(b) * x(b) + y(b) - a(b)
    f2(b) = y(b) * y(b) * y(b) - x(b) - c(b)
    det(b) = 9 * x(b) * x(b) * y(b) * y(b) + 1
    dx(b) = (3 * y(b) * y(b) * f1(b) - f2(b)) / det(b)
    dy(b) = (f1(b) + 3 * x(b) * x(b) * f2(b)) / det(b)
    x(b) = x(b) - dx(b)
    y(b) = y(b) - dy(b)
  }
}""", full=dict(B=1 << 18, K=12), tiny=dict(B=7, K=3), free=("K",),
    inputs=lambda r, s: _x1_newton_inputs(r, s["B"]))
def _x1_newton(torch, a, t, s):
    A, C, x0, y0 = t

    def run():
        x, y = x0, y0
        for _ in range(s["K"]):
            f1 = x * x * x + y - A
            f2 = y * y * y - x - C
            det = 9 * x * x * y * y + 1
            dx = (3 * y * y * f1 - f2) / det
            dy = (f1 + 3 * x * x * f2) / det
            x, y = x - dx, y - dy
        return [x, y]
    return {"torch loop over iterations": run}


# 6. Horner's rule: one polynomial per row p, evaluated at N points each, coefficients highest degree first
@program(name="x1 horner polynomial rows", kind="loop", src="""
def horner(float(K, P) coef, float(P, N) x) -> (y) {
  for k in K {
    if k == 0 { y(p, n) = coef(k, p) where n in 0:N }
    else      { y(p, n) = y(p, n) * x(p, n) + coef(k, p) }
  }
}""", full=dict(K=12, P=64, N=8192), tiny=dict(K=3, P=2, N=5),
    inputs=lambda r, s: [_n(r, s["K"], s["P"]) / 4, r.uniform(-1.2, 1.2, (s["P"], s["N"])).astype(np.float32)])
def _x1_horner(torch, a, t, s):
    coef, x = t

    def run():
        y = coef[0, :, None].expand_as(x).clone()
        for k in range(1, coef.shape[0]):
            y.mul_(x).add_(coef[k, :, None])
        return y

    def addcmul():
        y = coef[0, :, None].expand_as(x).clone()
        for k in range(1, coef.shape[0]):
            y = torch.addcmul(coef[k, :, None], y, x)
        return y
    return {"torch in-place loop over k": run, "torch addcmul loop over k": addcmul}


# 7. Monte Carlo price of an arithmetic Asian call from given normal increments (GBM paths), with its standard error
@program(name="x1 monte carlo asian option", kind="scan", src="""
def asian(float(P, S) z, float s0, float r, float sigma, float dt, float strike) -> (price, serr) {
  for t in S {
    lp(p, t) = (t > 0 ? lp(p, t - 1) : log(s0)) + (r - 0.5 * sigma * sigma) * dt + sigma * sqrt(dt) * z(p, t)
  }
  avg(p) +=! exp(lp(p, t)) / S
  pay(p) = exp(-r * dt * S) * max(avg(p) - strike, 0)
  price +=! pay(p) / P
  sq +=! pay(p) * pay(p) / P
  serr = sqrt((sq - price * price) / P)
}""", full=dict(P=65536, S=64), tiny=dict(P=9, S=4),
    inputs=lambda r, s: [_n(r, s["P"], s["S"]), _x1_f32(100.0), _x1_f32(0.03), _x1_f32(0.25), _x1_f32(1.0 / 64), _x1_f32(100.0)])
def _x1_asian(torch, a, t, s):
    z = t[0]
    s0, r, sigma, dt, strike = (float(v) for v in a[1:])
    S, P = s["S"], s["P"]

    def run():
        lp = torch.cumsum((r - 0.5 * sigma * sigma) * dt + sigma * (dt ** 0.5) * z, 1) + np.log(s0)
        avg = torch.exp(lp).mean(1)
        pay = np.exp(-r * dt * S) * torch.clamp(avg - strike, min=0)
        price = pay.mean()
        serr = torch.sqrt(((pay * pay).mean() - price * price) / P)
        return [price, serr]
    return {"torch cumsum + exp + mean": run}


# 8. red-black Gauss-Seidel for -lap u = f on a batch of grids, S sweeps (free), Dirichlet boundary kept
@program(name="x1 red-black gauss-seidel poisson", kind="stencil", src="""
def rbgs(float(N, H, W) u0, float(N, H, W) f, float h2) -> (u) {
  for s in S {
    if s == 0 {
      red(n, i, j) = (i + j) % 2 == 0 && i >= 1 && i < H - 1 && j >= 1 && j < W - 1
        ? 0.25 * (u0(n, i - 1, j) + u0(n, i + 1, j) + u0(n, i, j - 1) + u0(n, i, j + 1) + h2 * f(n, i, j))
        : u0(n, i, j) where i in 0:H, j in 0:W
    } else {
      red(n, i, j) = (i + j) % 2 == 0 && i >= 1 && i < H - 1 && j >= 1 && j < W - 1
        ? 0.25 * (v(s - 1, n, i - 1, j) + v(s - 1, n, i + 1, j) + v(s - 1, n, i, j - 1) + v(s - 1, n, i, j + 1) + h2 * f(n, i, j))
        : v(s - 1, n, i, j) where i in 0:H, j in 0:W
    }
    v(s, n, i, j) = (i + j) % 2 == 1 && i >= 1 && i < H - 1 && j >= 1 && j < W - 1
      ? 0.25 * (red(n, i - 1, j) + red(n, i + 1, j) + red(n, i, j - 1) + red(n, i, j + 1) + h2 * f(n, i, j))
      : red(n, i, j) where i in 0:H, j in 0:W
  }
  u(n, i, j) = v(S - 1, n, i, j)
}""", full=dict(N=4, H=256, W=256, S=12), tiny=dict(N=2, H=5, W=6, S=3), free=("S",),
    inputs=lambda r, s: [_n(r, s["N"], s["H"], s["W"]), _n(r, s["N"], s["H"], s["W"]), _x1_f32(1.0 / (s["H"] - 1) ** 2)])
def _x1_rbgs(torch, a, t, s):
    u0, f = t[:2]
    h2 = float(a[2])
    H, W = s["H"], s["W"]
    ii = torch.arange(1, H - 1)[:, None]
    jj = torch.arange(1, W - 1)[None, :]
    red = ((ii + jj) % 2 == 0)
    hf = h2 * f[:, 1:-1, 1:-1]

    def run():
        u = u0.clone()
        for _ in range(s["S"]):
            for mask in (red, ~red):
                nb = 0.25 * (u[:, :-2, 1:-1] + u[:, 2:, 1:-1] + u[:, 1:-1, :-2] + u[:, 1:-1, 2:] + hf)
                u[:, 1:-1, 1:-1] = torch.where(mask, nb, u[:, 1:-1, 1:-1])
        return u
    return {"torch slices + where, S sweeps": run}


# 9. power iteration for the dominant eigenpair of a batch of symmetric matrices, K iterations (free)
@program(name="x1 power iteration batch", kind="loop", src="""
def power(float(B, N, N) A, float(B, N) v0) -> (v, lam) {
  for k in K {
    if k == 0 { w(b, i) +=! A(b, i, j) * v0(b, j) }
    else      { w(b, i) +=! A(b, i, j) * v(b, j) }
    nrm(b) +=! w(b, i) * w(b, i)
    v(b, i) = w(b, i) * rsqrt(nrm(b))
  }
  av(b, i) +=! A(b, i, j) * v(b, j)
  lam(b) +=! v(b, i) * av(b, i)
}""", full=dict(B=32, N=128, K=50), tiny=dict(B=2, N=4, K=3), free=("K",),
    pick=lambda r: np.concatenate([r[0], r[1][:, None]], 1),
    inputs=lambda r, s: [_x1_spd(r, s["B"], s["N"]), np.abs(_n(r, s["B"], s["N"])) + 0.1])
def _x1_power(torch, a, t, s):
    A, v0 = t

    def run():
        v = v0
        for _ in range(s["K"]):
            w = torch.bmm(A, v[:, :, None])[:, :, 0]
            v = w / torch.linalg.vector_norm(w, dim=1, keepdim=True)
        lam = (v * torch.bmm(A, v[:, :, None])[:, :, 0]).sum(1)
        return torch.cat([v, lam[:, None]], 1)

    def run_mv():
        v = v0
        for _ in range(s["K"]):
            w = torch.matmul(A, v.unsqueeze(-1)).squeeze(-1)
            v = torch.nn.functional.normalize(w, dim=1)
        lam = torch.einsum("bi,bij,bj->b", v, A, v)
        return torch.cat([v, lam[:, None]], 1)
    return {"torch bmm loop": run, "torch matmul + normalize loop": run_mv}


def _x1_spd(rng, B, N):
    """Symmetric matrices with a clear dominant eigenvalue (so K iterations converge the same way everywhere)."""
    q, _ = np.linalg.qr(rng.standard_normal((B, N, N)))
    ev = np.concatenate([np.full((B, 1), 3.0), rng.uniform(-1.0, 1.0, (B, N - 1))], 1)
    return np.einsum("bij,bj,bkj->bik", q, ev, q).astype(np.float32)


# 10. Thomas algorithm for a batch of tridiagonal systems, batch-last (N, B) layout
@program(name="x1 thomas tridiagonal batch-last", kind="scan", src="""
# a(i) x(i-1) + dg(i) x(i) + c(i) x(i+1) = d(i); a(0) and c(N-1) are not used
def thomas(float(N, B) a, float(N, B) dg, float(N, B) c, float(N, B) d) -> (x) {
  for i in N {
    if i == 0 {
      cp(i, b) = c(i, b) / dg(i, b)
      dp(i, b) = d(i, b) / dg(i, b)
    } else {
      cp(i, b) = c(i, b) / (dg(i, b) - a(i, b) * cp(i - 1, b))
      dp(i, b) = (d(i, b) - a(i, b) * dp(i - 1, b)) / (dg(i, b) - a(i, b) * cp(i - 1, b))
    }
  }
  for k in N {
    if k == 0 { x(N - 1 - k, b) = dp(N - 1 - k, b) }
    else      { x(N - 1 - k, b) = dp(N - 1 - k, b) - cp(N - 1 - k, b) * x(N - k, b) }
  }
}""", full=dict(N=256, B=4096), tiny=dict(N=5, B=3),
    inputs=lambda r, s: [r.uniform(-1, 1, (s["N"], s["B"])).astype(np.float32),
                         r.uniform(3, 5, (s["N"], s["B"])).astype(np.float32),
                         r.uniform(-1, 1, (s["N"], s["B"])).astype(np.float32), _n(r, s["N"], s["B"])])
def _x1_thomas(torch, a, t, s):
    A, D, C, R = t

    def run():
        N = A.shape[0]
        cp = torch.empty_like(A)
        dp = torch.empty_like(A)
        cp[0] = C[0] / D[0]
        dp[0] = R[0] / D[0]
        for i in range(1, N):
            den = D[i] - A[i] * cp[i - 1]
            cp[i] = C[i] / den
            dp[i] = (R[i] - A[i] * dp[i - 1]) / den
        x = torch.empty_like(A)
        x[N - 1] = dp[N - 1]
        for i in range(N - 2, -1, -1):
            x[i] = dp[i] - cp[i] * x[i + 1]
        return x

    return {"torch loop over rows": run}


# 11. 1-D wave equation, leapfrog, variable speed, fixed ends, batch-last; the last snapshot
@program(name="x1 wave 1d leapfrog batch-last", kind="stencil", src="""
# c2(i) = (c(i) dt / dx)^2 <= 1
def wave(float(N, B) u0, float(N, B) u1, float(N) c2) -> (uf) {
  for t in T {
    if t == 0 { u(t, i, b) = u0(i, b) }
    else if t == 1 { u(t, i, b) = u1(i, b) }
    else {
      u(t, i, b) = i >= 1 && i < N - 1
        ? 2 * u(t - 1, i, b) - u(t - 2, i, b) + c2(i) * (u(t - 1, i + 1, b) - 2 * u(t - 1, i, b) + u(t - 1, i - 1, b))
        : 0 where i in 0:N
    }
  }
  uf(i, b) = u(T - 1, i, b)
}""", full=dict(N=2048, B=64, T=300), tiny=dict(N=6, B=3, T=5), free=("T",),
    inputs=lambda r, s: [_n(r, s["N"], s["B"]), _n(r, s["N"], s["B"]), r.uniform(0.2, 0.9, s["N"]).astype(np.float32)])
def _x1_wave(torch, a, t, s):
    u0, u1, c2 = t
    ci = c2[1:-1, None]

    def run():
        if s["T"] == 1:
            return u0.clone()
        prev, cur = u0, u1
        for _ in range(s["T"] - 2):
            nxt = torch.zeros_like(cur)
            nxt[1:-1] = 2 * cur[1:-1] - prev[1:-1] + ci * (cur[2:] - 2 * cur[1:-1] + cur[:-2])
            prev, cur = cur, nxt
        return cur
    return {"torch slices loop over t": run}


def _x1_lattice(rng, L, K):
    """Atoms on an L^3 cubic lattice (spacing 1.12, jittered), each with its K nearest lattice offsets as
    neighbours (-1 where the neighbour falls outside the box)."""
    g = np.stack(np.meshgrid(np.arange(L), np.arange(L), np.arange(L), indexing="ij"), -1).reshape(-1, 3)
    x = (g * 1.12 + rng.uniform(-0.1, 0.1, g.shape)).astype(np.float32)
    off = np.stack(np.meshgrid(*[np.arange(-3, 4)] * 3, indexing="ij"), -1).reshape(-1, 3)
    off = off[np.argsort((off * off).sum(1), kind="stable")][1:K + 1]
    nb = g[:, None, :] + off[None]
    ok = ((nb >= 0) & (nb < L)).all(-1)
    idx = (nb[..., 0] * L + nb[..., 1]) * L + nb[..., 2]
    return x, np.where(ok, idx, -1).astype(np.int32)


# 12. Lennard-Jones energies from a neighbour list (int32, -1 padded), cutoff, per-atom and total
@program(name="x1 lennard-jones neighbour list", kind="gather", src="""
def lj(float(N, 3) x, int32(N, K) nbr, float sigma, float eps, float rc2) -> (e, etot) {
  r2(i, k) +=! (x(nbr(i, k), d) - x(i, d)) * (x(nbr(i, k), d) - x(i, d))
  e(i) +=! nbr(i, k) >= 0 && r2(i, k) < rc2 ? 2 * eps * (s6 * s6 - s6) : 0
    where s6 = sigma * sigma * sigma * sigma * sigma * sigma / (r2(i, k) * r2(i, k) * r2(i, k))
  etot +=! e(i)
}""", full=dict(L=32, K=56), tiny=dict(L=3, K=6), pick=lambda r: np.append(r[0], r[1]),
    inputs=lambda r, s: [*_x1_lattice(r, s["L"], s["K"]), _x1_f32(1.0), _x1_f32(1.0), _x1_f32(2.5 ** 2)])
def _x1_lj(torch, a, t, s):
    x = t[0]
    nbr = t[1]
    sig, eps, rc2 = (float(v) for v in a[2:])
    idx = nbr.clamp(min=0).long()
    valid = nbr >= 0

    def run():
        d = x[idx] - x[:, None, :]
        r2 = (d * d).sum(-1)
        s6 = (sig * sig / r2) ** 3
        e = torch.where(valid & (r2 < rc2), 2 * eps * (s6 * s6 - s6), 0).sum(1)
        return torch.cat([e, e.sum()[None]])
    return {"torch gather + where": run}


# ============================================================ x2: recommendation systems and tabular ML

def _x2_f(v):
    return np.array(v, np.float32)


# 1. factorization machine on sparse ids, pairwise part by the sum-square trick
@program(name="x2 factorization machine, sum-square trick on embedding ids", kind="embedding", src="""
def fm(int32(B,F) idx, float(V,K) v, float(V) w, float w0) -> (y) {
  s(b, k) +=! v(idx(b, f), k)
  q(b, k) +=! v(idx(b, f), k) * v(idx(b, f), k)
  lin(b) +=! w(idx(b, f))
  pair(b) +=! 0.5 * (s(b, k) * s(b, k) - q(b, k))
  y(b) = sigmoid(w0 + lin(b) + pair(b))
}""", full=dict(B=8192, F=39, V=200000, K=16), tiny=dict(B=3, F=4, V=9, K=2),
   inputs=lambda r, s: [r.integers(0, s["V"], (s["B"], s["F"])).astype(np.int32), 0.1 * _n(r, s["V"], s["K"]),
                        0.1 * _n(r, s["V"]), _x2_f(0.2)])
def _x2_fm(torch, a, t, s):
    F_ = torch.nn.functional
    idx, v, w, w0 = t
    idx64 = idx.long()

    def run():
        e = F_.embedding(idx64, v)
        sm = e.sum(1)
        pair = 0.5 * (sm * sm - (e * e).sum(1)).sum(1)
        return torch.sigmoid(w0 + w[idx64].sum(1) + pair)
    return {"F.embedding + sum-square": _nograd(torch, run)}


# 2. factorization machine on dense features, the naive O(N^2) pairwise sum with a select on j > i
@program(name="x2 factorization machine, naive pairwise (select j > i)", kind="matmul", src="""
def fm_naive(float(B,N) x, float(N,K) V, float(N) w, float w0) -> (y) {
  G(i, j) +=! V(i, k) * V(j, k)
  y(b) +=! j > i ? G(i, j) * x(b, i) * x(b, j) : 0
  y(b) = y(b) + w0
  y(b) += x(b, i) * w(i)
}""", full=dict(B=2048, N=512, K=32), tiny=dict(B=3, N=5, K=2),
   inputs=lambda r, s: [_n(r, s["B"], s["N"]), _w(r, s["N"], s["K"]) * 0.3, _w(r, s["N"]), _x2_f(-0.1)])
def _x2_fm_naive(torch, a, t, s):
    x, V, w, w0 = t

    def triu():
        G = torch.triu(V @ V.T, diagonal=1)
        return w0 + x @ w + ((x @ G) * x).sum(1)

    def sumsq():
        return w0 + x @ w + 0.5 * ((x @ V) ** 2 - (x * x) @ (V * V)).sum(1)
    return {"triu(V V^T) quadratic form": _nograd(torch, triu), "sum-square trick": _nograd(torch, sumsq)}


# 3. DLRM interaction: dense vector and sparse embeddings stacked, dot products of the lower triangle
#    given as int32 pair tables (as DLRM builds li, lj), concatenated after the dense vector
@program(name="x2 dlrm dot interaction (li/lj pair tables, concat)", kind="embedding", src="""
def dlrm(float(B,D) x, float(B,F,D) ly, int32(P) li, int32(P) lj) -> (R) {
  T(b, f, d) = f == 0 ? x(b, d) : ly(b, f - 1, d) where f in 0:F+1
  Z(b, p) +=! T(b, li(p), d) * T(b, lj(p), d)
  R(b, d) = x(b, d)
  R(b, D + p) = Z(b, p)
}""", full=dict(B=2048, F=26, D=128), tiny=dict(B=2, F=3, D=4),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), _n(r, s["B"], s["F"], s["D"]),
                        np.array([i for i in range(s["F"] + 1) for j in range(i)], np.int32),
                        np.array([j for i in range(s["F"] + 1) for j in range(i)], np.int32)])
def _x2_dlrm(torch, a, t, s):
    x, ly, li, lj = t
    li64, lj64 = li.long(), lj.long()

    def run():
        T = torch.cat([x[:, None], ly], 1)
        Z = torch.bmm(T, T.transpose(1, 2))
        return torch.cat([x, Z[:, li64, lj64]], 1)
    return {"cat + bmm + index": _nograd(torch, run)}


# 4. embedding bag, variable-length bags by int32 offsets (B+1 of them), per-sample weights, sum
def _x2_bag_inputs(r, s):
    B, L, V, E = s["B"], s["L"], s["V"], s["E"]
    lens = r.integers(0, L + 1, B)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    n = int(off[-1])
    return [r.integers(0, V, n).astype(np.int32), off, r.random(n).astype(np.float32), _n(r, V, E)]


@program(name="x2 embedding bag sum, int32 offsets + per-sample weights", kind="embedding", src="""
def bag(int32(N) idx, int32(B + 1) off, float(N) psw, float(V,E) emb) -> (y) {
  y(b, e) +=! l < off(b + 1) - off(b) ? psw(off(b) + l) * emb(idx(off(b) + l), e) : 0 where l in 0:L
}""", full=dict(B=4096, L=40, V=100000, E=64), tiny=dict(B=4, L=3, V=7, E=3), free=("L",),
   inputs=_x2_bag_inputs)
def _x2_bag(torch, a, t, s):
    F_ = torch.nn.functional
    idx, off, psw, emb = t
    idx64, off64 = idx.long(), off[:-1].long()
    return {"F.embedding_bag(sum, per_sample_weights)": _nograd(torch, lambda: F_.embedding_bag(
        idx64, emb, off64, mode="sum", per_sample_weights=psw))}


# 5. oblivious (CatBoost-style) tree ensemble: one feature and threshold per level, leaf index built bit by bit
@program(name="x2 oblivious tree ensemble (for d in D, int leaf index)", kind="tabular", src="""
def oblivious(float(B,NF) x, int32(T,D) feat, float(T,D) thr, float(T,L) leaf) -> (y) {
  for d in D {
    if d == 0 { k(b, t) = int32(x(b, feat(t, d)) > thr(t, d)) }
    else { k(b, t) = 2 * k(b, t) + int32(x(b, feat(t, d)) > thr(t, d)) }
  }
  y(b) +=! leaf(t, k(b, t))
}""", full=dict(B=8192, NF=64, T=256, D=6, L=64), tiny=dict(B=3, NF=4, T=2, D=2, L=4),
   inputs=lambda r, s: [_n(r, s["B"], s["NF"]), r.integers(0, s["NF"], (s["T"], s["D"])).astype(np.int32),
                        0.5 * _n(r, s["T"], s["D"]), 0.1 * _n(r, s["T"], s["L"])])
def _x2_oblivious(torch, a, t, s):
    x, feat, thr, leaf = t
    feat64 = feat.long()
    pow2 = 2 ** torch.arange(s["D"] - 1, -1, -1)
    ar = torch.arange(s["T"])

    def run():
        bits = (x[:, feat64] > thr).long()          # (B, T, D)
        k = (bits * pow2).sum(-1)                   # (B, T)
        return leaf[ar, k].sum(1)
    return {"gather + bit sum + leaf gather": _nograd(torch, run)}


# 6. random forest by node tables (feature, threshold, left, right, value), traversed for a free depth D
def _x2_forest_inputs(r, s):
    T, N, NF, B = s["T"], s["N"], s["NF"], s["B"]
    nodes = np.arange(N)
    left = np.broadcast_to(2 * nodes + 1, (T, N)).copy()
    right = np.broadcast_to(2 * nodes + 2, (T, N)).copy()
    leaf = np.broadcast_to(left >= N, (T, N)).copy() | (r.random((T, N)) < 0.1)
    left[leaf] = np.broadcast_to(nodes, (T, N))[leaf]
    right[leaf] = np.broadcast_to(nodes, (T, N))[leaf]
    return [_n(r, B, NF), r.integers(0, NF, (T, N)).astype(np.int32), 0.7 * _n(r, T, N),
            left.astype(np.int32), right.astype(np.int32), _n(r, T, N)]


@program(name="x2 decision forest traversal (left/right tables, free depth)", kind="tabular", src="""
def forest(float(B,NF) x, int32(T,N) feat, float(T,N) thr, int32(T,N) left, int32(T,N) right,
           float(T,N) val) -> (y) {
  for d in D {
    if d == 0 { node(b, t) = x(b, feat(t, 0)) <= thr(t, 0) ? left(t, 0) : right(t, 0) }
    else { node(b, t) = x(b, feat(t, n)) <= thr(t, n) ? left(t, n) : right(t, n) where n = node(b, t) }
  }
  y(b) +=! val(t, node(b, t)) / T
}""", full=dict(B=4096, NF=32, T=100, N=511, D=8), tiny=dict(B=3, NF=3, T=2, N=7, D=2), free=("D",),
   inputs=_x2_forest_inputs)
def _x2_forest(torch, a, t, s):
    x, feat, thr, left, right, val = t
    feat64, left64, right64 = feat.long(), left.long(), right.long()
    ar = torch.arange(s["T"])

    def run():
        node = torch.zeros(x.shape[0], s["T"], dtype=torch.long)
        for _ in range(s["D"]):
            xv = x.gather(1, feat64[ar, node])
            node = torch.where(xv <= thr[ar, node], left64[ar, node], right64[ar, node])
        return val[ar, node].mean(1)
    return {"torch loop over depth (gather + where)": _nograd(torch, run)}


# 7. k nearest neighbours: squared distances by the expansion, then K rounds of argmin, each masking its pick
@program(name="x2 knn distances, K rounds of argmin + mask", kind="tabular", src="""
def knn(float(Q,D) q, float(N,D) x) -> (dk) {
  xx(n) +=! x(n, d) * x(n, d)
  qq(i) +=! q(i, d) * q(i, d)
  dist(i, n) +=! -2 * q(i, d) * x(n, d)
  dist(i, n) = dist(i, n) + qq(i) + xx(n)
  for k in K {
    j(i) argmin=! dist(i, n)
    dk(i, k) = dist(i, j(i))
    dist(i, n) = n == j(i) ? inf : dist(i, n)
  }
}""", full=dict(Q=1024, N=8192, D=32, K=8), tiny=dict(Q=3, N=6, D=2, K=2), free=("K",),
   inputs=lambda r, s: [_n(r, s["Q"], s["D"]), _n(r, s["N"], s["D"])])
def _x2_knn(torch, a, t, s):
    q, x = t
    return {"cdist**2 + topk": _nograd(torch, lambda: torch.topk(torch.cdist(q, x) ** 2, s["K"], 1, largest=False).values)}


# 8. gaussian naive bayes: per-class log-likelihoods summed over features, prior, log-normalised
@program(name="x2 gaussian naive bayes log posterior", kind="tabular", src="""
def gnb(float(B,D) x, float(C,D) mu, float(C,D) var, float(C) logprior) -> (lp) {
  ll(b, c) +=! -0.5 * (z * z / var(c, d) + log(6.2831853 * var(c, d))) where z = x(b, d) - mu(c, d)
  ll(b, c) = ll(b, c) + logprior(c)
  m(b) max=! ll(b, c)
  s(b) +=! exp(ll(b, c) - m(b))
  lp(b, c) = ll(b, c) - m(b) - log(s(b))
}""", full=dict(B=8192, C=32, D=128), tiny=dict(B=3, C=2, D=4),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), _n(r, s["C"], s["D"]),
                        (0.5 + 1.5 * r.random((s["C"], s["D"]))).astype(np.float32),
                        np.log(np.full(s["C"], 1.0 / s["C"], np.float32))])
def _x2_gnb(torch, a, t, s):
    x, mu, var, lpr = t

    def mm():
        iv = 1 / var
        ll = -0.5 * ((x * x) @ iv.T - 2 * x @ (mu * iv).T + (mu * mu * iv).sum(1)
                     + torch.log(2 * np.pi * var).sum(1)) + lpr
        return torch.log_softmax(ll, 1)

    def bc():
        ll = torch.distributions.Normal(mu, var.sqrt()).log_prob(x[:, None]).sum(-1) + lpr
        return torch.log_softmax(ll, 1)
    return {"matmul expansion + log_softmax": _nograd(torch, mm), "Normal.log_prob broadcast": _nograd(torch, bc)}


# 9. logistic regression trained by E epochs of full-batch gradient descent (weights and bias as outputs)
@program(name="x2 logistic regression, E epochs of gradient descent", kind="tabular", src="""
def logreg(float(N,D) X, float(N) y, float lr) -> (w, bias) {
  for e in E {
    z(n) +=! X(n, d) * w(d)
    p(n) = sigmoid(z(n) + bias) - y(n)
    g(d) +=! X(n, d) * p(n)
    gb +=! p(n)
    w(d) = w(d) - lr * g(d) / N
    bias = bias - lr * gb / N
  }
}""", full=dict(N=16384, D=64, E=50), tiny=dict(N=5, D=3, E=3), free=("E",),
   inputs=lambda r, s: [_n(r, s["N"], s["D"]), (r.random(s["N"]) < 0.5).astype(np.float32), _x2_f(0.5)],
   pick=lambda r: np.concatenate([np.asarray(r[0]), np.asarray(r[1]).reshape(1)]))
def _x2_logreg(torch, a, t, s):
    X, y, lr = t
    N = X.shape[0]

    def run():
        w = torch.zeros(X.shape[1])
        b = torch.zeros(())
        for _ in range(s["E"]):
            p = torch.sigmoid(X @ w + b) - y
            w = w - lr * (X.T @ p) / N
            b = b - lr * p.sum() / N
        return torch.cat([w, b.reshape(1)])
    return {"torch loop (mv, sigmoid)": _nograd(torch, run)}


# 10. two-tower retrieval: linear towers, cosine scores against every item of the batch, in-batch softmax loss
@program(name="x2 two-tower in-batch softmax loss", kind="loss", src="""
def twotower(float(B,I) xu, float(B,J) xi, float(K,I) Wu, float(K,J) Wi, float tau) -> (loss) {
  u(b, k) +=! xu(b, i) * Wu(k, i)
  v(b, k) +=! xi(b, j) * Wi(k, j)
  nu(b) +=! u(b, k) * u(b, k)
  nv(b) +=! v(b, k) * v(b, k)
  S(a, c) +=! u(a, k) * v(c, k)
  S(a, c) = S(a, c) * rsqrt(nu(a)) * rsqrt(nv(c)) / tau
  m(a) max=! S(a, c)
  z(a) +=! exp(S(a, c) - m(a))
  loss +=! (m(a) + log(z(a)) - S(a, a)) / B
}""", full=dict(B=4096, I=256, J=192, K=64), tiny=dict(B=3, I=4, J=5, K=2),
   inputs=lambda r, s: [_n(r, s["B"], s["I"]), _n(r, s["B"], s["J"]), _w(r, s["K"], s["I"]), _w(r, s["K"], s["J"]),
                        _x2_f(0.05)])
def _x2_twotower(torch, a, t, s):
    F_ = torch.nn.functional
    xu, xi, Wu, Wi, tau = t
    lab = torch.arange(xu.shape[0])

    def run():
        u = F_.normalize(xu @ Wu.T, dim=1)
        v = F_.normalize(xi @ Wi.T, dim=1)
        return F_.cross_entropy(u @ v.T / tau, lab)
    return {"normalize + mm + cross_entropy": _nograd(torch, run)}


# 11. smoothed target encoding: per-feature category means of the target by an int category index
@program(name="x2 target encoding (group means by int index, smoothing)", kind="tabular", src="""
def te(int32(N,F) cat, float(N) y, float m) -> (enc) {
  s(f, k) +=! cat(n, f) == k ? y(n) : 0 where k in 0:G
  c(f, k) +=! cat(n, f) == k ? 1.0 : 0 where k in 0:G
  mean +=! y(n) / N
  enc(n, f) = (s(f, cat(n, f)) + m * mean) / (c(f, cat(n, f)) + m)
}""", full=dict(N=262144, F=8, G=50), tiny=dict(N=7, F=2, G=3), free=("G",),
   inputs=lambda r, s: [r.integers(0, s["G"], (s["N"], s["F"])).astype(np.int32), r.random(s["N"]).astype(np.float32),
                        _x2_f(10.0)])
def _x2_te(torch, a, t, s):
    cat, y, m = t
    N, F = cat.shape
    G = s["G"]
    key = (cat.long() + torch.arange(F) * G).reshape(-1)
    yy = y[:, None].expand(N, F).reshape(-1)

    def run():
        sm = torch.zeros(F * G).index_add_(0, key, yy)
        c = torch.bincount(key, minlength=F * G).float()
        return ((sm[key] + m * y.mean()) / (c[key] + m)).reshape(N, F)
    return {"index_add + bincount + gather": _nograd(torch, run)}


# 12. DCN-v2 cross network: x_{l+1} = x0 * (W_l x_l + b_l) + x_l, a loop over the layers, updated in place
@program(name="x2 dcn-v2 cross layer stack (for l in L, in place)", kind="mlp", src="""
def dcn(float(B,D) x0, float(L,D,D) W, float(L,D) bias) -> (y) {
  y(b, i) = x0(b, i)
  for l in L {
    u(b, i) +=! W(l, i, j) * y(b, j)
    y(b, i) = x0(b, i) * (u(b, i) + bias(l, i)) + y(b, i)
  }
}""", full=dict(B=4096, D=256, L=3), tiny=dict(B=3, D=4, L=2),
   inputs=lambda r, s: [_n(r, s["B"], s["D"]), 0.3 * _w(r, s["L"], s["D"], s["D"]), 0.1 * _n(r, s["L"], s["D"])])
def _x2_dcn(torch, a, t, s):
    F_ = torch.nn.functional
    x0, W, bias = t

    def run():
        x = x0
        for l in range(W.shape[0]):
            x = x0 * F_.linear(x, W[l], bias[l]) + x
        return x
    return {"torch loop (F.linear)": _nograd(torch, run)}


# ----------------------------------------------------------------------------------------------------------------
# x3: computer vision and 3-D
# ----------------------------------------------------------------------------------------------------------------


def _x3_flat(*xs):
    """Several outputs of different shapes as one flat float array (NumPy or torch), for the comparison."""
    if hasattr(xs[0], "detach"):
        import torch
        return torch.cat([x.reshape(-1).float() for x in xs])
    return np.concatenate([np.asarray(x, np.float32).reshape(-1) for x in xs])


def _int_cloud(rng, shape, hi):
    """Points on an integer voxel grid (exact squared distances in float32)."""
    return rng.integers(0, hi, shape).astype(np.float32)


@program(name="x3 farthest point sampling (S picks, argmax loop, running min distance)", kind="data", src="""
# iterative farthest point sampling as in PointNet++: start from point 0, keep each point's distance to the
# nearest picked point, pick the farthest at every step; idx(t, b) is the (t+1)-th pick
def fps(float(B,N,3) pts) -> (idx) {
  for t in S {
    if t == 0 {
      md(b, n) = dx * dx + dy * dy + dz * dz
        where dx = pts(b, n, 0) - pts(b, 0, 0), dy = pts(b, n, 1) - pts(b, 0, 1), dz = pts(b, n, 2) - pts(b, 0, 2)
    } else {
      md(b, n) = fmin(md(b, n), dx * dx + dy * dy + dz * dz)
        where dx = pts(b, n, 0) - pts(b, idx(t - 1, b), 0), dy = pts(b, n, 1) - pts(b, idx(t - 1, b), 1),
              dz = pts(b, n, 2) - pts(b, idx(t - 1, b), 2)
    }
    idx(t, b) argmax=! md(b, n)
  }
}""", full=dict(B=16, N=4096, S=512), tiny=dict(B=2, N=9, S=4), free=("S",),
    inputs=lambda r, s: [_int_cloud(r, (s["B"], s["N"], 3), 1024)])
def _x3_fps(torch, a, t, s):
    pts, S = t[0], s["S"]

    def run():
        ar = torch.arange(pts.shape[0])
        md = ((pts - pts[:, :1]) ** 2).sum(-1)
        out = []
        for _ in range(S):
            i = md.argmax(1)
            out.append(i)
            c = pts[ar, i]
            md = torch.minimum(md, ((pts - c[:, None]) ** 2).sum(-1))
        return torch.stack(out).int()

    def run_planar():                                              # coordinates outermost: no sum over a dim of 3
        xyz = pts.permute(2, 0, 1).contiguous()                    # (3, B, N)
        ar = torch.arange(pts.shape[0])
        md = ((xyz - xyz[:, :, :1]) ** 2).sum(0)
        out = []
        for _ in range(S):
            i = md.argmax(1)
            out.append(i)
            c = xyz[:, ar, i]                                      # (3, B)
            torch.minimum(md, ((xyz - c[:, :, None]) ** 2).sum(0), out=md)
        return torch.stack(out).int()
    return {"torch loop (argmax, minimum)": _nograd(torch, run), "torch loop, planar xyz": _nograd(torch, run_planar)}


@program(name="x3 ball query: neighbour count and mean offset within a radius (select in a sum)", kind="data", src="""
# PointNet++ ball query, grouped: for every query centre, how many points lie within radius sqrt(r2) and the mean
# offset of those points from the centre
def ball(float(B,N,3) pts, float(B,S,3) q, float r2) -> (cnt, off) {
  cnt(b, s) +=! (d2 < r2 ? 1.0 : 0.0)
    where d2 = (pts(b, n, 0) - q(b, s, 0)) * (pts(b, n, 0) - q(b, s, 0))
             + (pts(b, n, 1) - q(b, s, 1)) * (pts(b, n, 1) - q(b, s, 1))
             + (pts(b, n, 2) - q(b, s, 2)) * (pts(b, n, 2) - q(b, s, 2))
  off(b, s, k) +=! (d2 < r2 ? pts(b, n, k) - q(b, s, k) : 0.0)
    where d2 = (pts(b, n, 0) - q(b, s, 0)) * (pts(b, n, 0) - q(b, s, 0))
             + (pts(b, n, 1) - q(b, s, 1)) * (pts(b, n, 1) - q(b, s, 1))
             + (pts(b, n, 2) - q(b, s, 2)) * (pts(b, n, 2) - q(b, s, 2))
  off(b, s, k) = off(b, s, k) / fmax(cnt(b, s), 1.0)
}""", full=dict(B=8, N=4096, S=1024), tiny=dict(B=2, N=11, S=5),
    inputs=lambda r, s: [_int_cloud(r, (s["B"], s["N"], 3), 32), _int_cloud(r, (s["B"], s["S"], 3), 32),
                         np.array(20.5, np.float32)], pick=lambda r: _x3_flat(*r))
def _x3_ball(torch, a, t, s):
    pts, q, r2 = t

    def run():
        m = (torch.cdist(q, pts) ** 2 < r2).float()              # exact: integer coordinates
        cnt = m.sum(-1)
        off = (torch.bmm(m, pts) - cnt[..., None] * q) / cnt.clamp_min(1)[..., None]
        return _x3_flat(cnt, off)
    return {"torch.cdist + bmm": _nograd(torch, run)}


@program(name="x3 pointnet shared mlp (3-64-128-512, channels-first) + max pool over points", kind="matmul", src="""
# PointNet encoder: the same MLP applied to every point (Conv1d with kernel 1), ReLU, global max over the points
def pointnet(float(B,3,N) x, float(C1,3) w1, float(C1) b1, float(C2,C1) w2, float(C2) b2,
             float(C3,C2) w3, float(C3) b3) -> (g) {
  h1(b, o, n) +=! w1(o, c) * x(b, c, n)
  h1(b, o, n) = fmax(h1(b, o, n) + b1(o), 0)
  h2(b, o, n) +=! w2(o, c) * h1(b, c, n)
  h2(b, o, n) = fmax(h2(b, o, n) + b2(o), 0)
  h3(b, o, n) +=! w3(o, c) * h2(b, c, n)
  g(b, o) max=! fmax(h3(b, o, n) + b3(o), 0)
}""", full=dict(B=8, N=1024, C1=64, C2=128, C3=512), tiny=dict(B=2, N=7, C1=4, C2=5, C3=6),
    inputs=lambda r, s: [_n(r, s["B"], 3, s["N"]), _w(r, s["C1"], 3), _w(r, s["C1"]), _w(r, s["C2"], s["C1"]),
                         _w(r, s["C2"]), _w(r, s["C3"], s["C2"]), _w(r, s["C3"])])
def _x3_pointnet(torch, a, t, s):
    F = torch.nn.functional
    x, w1, b1, w2, b2, w3, b3 = t

    def conv():
        h = F.relu(F.conv1d(x, w1[:, :, None], b1))
        h = F.relu(F.conv1d(h, w2[:, :, None], b2))
        return F.relu(F.conv1d(h, w3[:, :, None], b3)).amax(2)

    def linear():
        h = F.relu(F.linear(x.transpose(1, 2), w1, b1))
        h = F.relu(F.linear(h, w2, b2))
        return F.relu(F.linear(h, w3, b3)).amax(1)
    return {"F.conv1d(k=1) x3 + amax": _nograd(torch, conv), "F.linear x3 (points-major) + amax": _nograd(torch, linear)}


@program(name="x3 nerf volume rendering (alpha compositing, transmittance as a for loop over samples)",
         kind="scan", src="""
# NeRF raw2outputs: deltas between sample depths (the last one 1e10), alpha = 1 - exp(-sigma delta), transmittance
# tr(s) = prod_{j<s} (1 - alpha_j + 1e-10) as a recurrence over the samples, weights = alpha * tr
def nerf_render(float(R,S) sigma, float(R,S,3) rgb, float(R,S) z) -> (color, depth, acc) {
  delta(r, s) = s + 1 < S ? z(r, s + 1) - z(r, s) : 1e10 where s in 0:S
  alpha(r, s) = 1 - exp(-sigma(r, s) * delta(r, s))
  for s in S {
    if s == 0 { tr(r, s) = 1.0 where r in 0:R }
    else      { tr(r, s) = tr(r, s - 1) * (1 - alpha(r, s - 1) + 1e-10) }
  }
  wt(r, s) = alpha(r, s) * tr(r, s)
  color(r, c) +=! wt(r, s) * rgb(r, s, c)
  depth(r) +=! wt(r, s) * z(r, s)
  acc(r) +=! wt(r, s)
}""", full=dict(R=16384, S=128), tiny=dict(R=3, S=5),
    inputs=lambda r, s: [np.abs(_n(r, s["R"], s["S"])) * 2, r.uniform(0, 1, (s["R"], s["S"], 3)).astype(np.float32),
                         np.sort(r.uniform(2, 6, (s["R"], s["S"])), axis=1).astype(np.float32)],
    pick=lambda r: _x3_flat(*r))
def _x3_nerf(torch, a, t, s):
    sigma, rgb, z = t

    def run():
        delta = torch.cat([z[:, 1:] - z[:, :-1], torch.full_like(z[:, :1], 1e10)], 1)
        alpha = 1 - torch.exp(-sigma * delta)
        tr = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1] + 1e-10], 1), 1)
        w = alpha * tr
        return _x3_flat(torch.bmm(w[:, None], rgb)[:, 0], (w * z).sum(1), w.sum(1))
    return {"torch.cumprod + bmm": _nograd(torch, run)}


def _x3_boxes(rng, n):
    c = rng.uniform(0, 256, (n, 2))
    wh = rng.uniform(16, 64, (n, 2))
    return np.concatenate([c - wh / 2, c + wh / 2], 1).astype(np.float32)


@program(name="x3 iou matrix + greedy nms (loop over boxes, max over earlier kept boxes)", kind="data", src="""
# boxes (x0, y0, x1, y1) sorted by score; box t is kept unless an earlier kept box overlaps it with IoU > thr
def nms(float(N,4) box, float thr) -> (iou, keep) {
  area(i) = (box(i, 2) - box(i, 0)) * (box(i, 3) - box(i, 1))
  inter(i, j) = fmax(fmin(box(i, 2), box(j, 2)) - fmax(box(i, 0), box(j, 0)), 0)
              * fmax(fmin(box(i, 3), box(j, 3)) - fmax(box(i, 1), box(j, 1)), 0)
  iou(i, j) = inter(i, j) / (area(i) + area(j) - inter(i, j))
  for t in N {
    sup max=! keep(j) * (iou(j, t) > thr ? 1.0 : 0.0) where j in 0:t
    keep(t) = sup > 0.5 ? 0.0 : 1.0
  }
}""", full=dict(N=2048), tiny=dict(N=9),
    inputs=lambda r, s: [_x3_boxes(r, s["N"]), np.array(0.5, np.float32)], pick=lambda r: _x3_flat(*r))
def _x3_nms(torch, a, t, s):
    box, thr = t

    def iou_of():
        x0, y0, x1, y1 = box.unbind(1)
        area = (x1 - x0) * (y1 - y0)
        iw = (torch.minimum(x1[:, None], x1[None]) - torch.maximum(x0[:, None], x0[None])).clamp_min(0)
        ih = (torch.minimum(y1[:, None], y1[None]) - torch.maximum(y0[:, None], y0[None])).clamp_min(0)
        inter = iw * ih
        return inter / (area[:, None] + area[None] - inter)

    def torch_loop():
        iou = iou_of()
        sup = iou > thr
        keep = torch.ones(box.shape[0], dtype=torch.bool)
        for i in range(box.shape[0]):
            if keep[i]:
                keep[i + 1:] &= ~sup[i, i + 1:]
        return _x3_flat(iou, keep.float())

    def numpy_loop():
        iou = iou_of()
        sup = (iou > thr).numpy()
        keep = np.ones(box.shape[0], bool)
        for i in range(box.shape[0]):
            if keep[i]:
                keep[i + 1:] &= ~sup[i, i + 1:]
        return _x3_flat(iou, torch.from_numpy(keep.astype(np.float32)))
    return {"torch iou + torch loop": _nograd(torch, torch_loop), "torch iou + numpy loop": _nograd(torch, numpy_loop)}


def _x3_rois(rng, R, N, H, W):
    b = rng.integers(0, N, R)
    h = rng.integers(8, 41, R)
    w = rng.integers(8, 41, R)
    y0 = rng.integers(0, H - h + 1)
    x0 = rng.integers(0, W - w + 1)
    return np.stack([b, y0, x0, y0 + h - 1, x0 + w - 1], 1).astype(np.int32)


def _x3_roi_inputs(r, s):
    rois = _x3_rois(r, s["R"], s["N"], s["H"], s["W"]) if s["H"] > 41 else \
        np.array([[0, 0, 0, 11, 13], [1, 2, 3, 9, 8], [1, 4, 1, 6, 5], [0, 1, 2, 10, 13]][:s["R"]], np.int32)
    return [_n(r, s["N"], s["H"], s["W"], s["C"]), rois]


@program(name="x3 roi average pooling, int32 boxes, adaptive bins (channels-last, bin bounds from index arithmetic)",
         kind="data", src="""
# roi(r) = (batch, y0, x0, y1, x1), inclusive; P x P bins, bin p covers rows [y0 + p*h/P, y0 + ceil((p+1)*h/P))
# (adaptive_avg_pool2d's bins), computed once per (roi, bin) as int32 tables; K is the largest bin side
# (written first with the bin bounds as where bindings: the next program)
def roi_avg(float(N,H,W,C) feat, int32(R,5) roi) -> (out) {
  hs(r, p) = roi(r, 1) + p * (roi(r, 3) - roi(r, 1) + 1) / P where p in 0:P
  he(r, p) = roi(r, 1) + ((p + 1) * (roi(r, 3) - roi(r, 1) + 1) + P - 1) / P where p in 0:P
  ws(r, p) = roi(r, 2) + p * (roi(r, 4) - roi(r, 2) + 1) / P where p in 0:P
  we(r, p) = roi(r, 2) + ((p + 1) * (roi(r, 4) - roi(r, 2) + 1) + P - 1) / P where p in 0:P
  out(r, py, px, c) +=! (u < he(r, py) - hs(r, py) && v < we(r, px) - ws(r, px)
                         ? feat(roi(r, 0), hs(r, py) + u, ws(r, px) + v, c) : 0.0)
                        / float((he(r, py) - hs(r, py)) * (we(r, px) - ws(r, px)))
    where u in 0:K, v in 0:K
}""", full=dict(N=2, H=64, W=64, C=128, R=128, P=7, K=7), tiny=dict(N=2, H=12, W=14, C=3, R=4, P=3, K=7),
    free=("P", "K"),
    inputs=_x3_roi_inputs)
def _x3_roi(torch, a, t, s):
    F = torch.nn.functional
    feat, roi = t
    P = s["P"]

    def run():
        fp = feat.permute(0, 3, 1, 2)
        outs = [F.adaptive_avg_pool2d(fp[b, :, y0:y1 + 1, x0:x1 + 1], P) for b, y0, x0, y1, x1 in roi.tolist()]
        return torch.stack(outs).permute(0, 2, 3, 1)
    def run_contig():
        fp = feat.permute(0, 3, 1, 2).contiguous()
        outs = [F.adaptive_avg_pool2d(fp[b, :, y0:y1 + 1, x0:x1 + 1], P) for b, y0, x0, y1, x1 in roi.tolist()]
        return torch.stack(outs).permute(0, 2, 3, 1)
    return {"loop of F.adaptive_avg_pool2d over rois": _nograd(torch, run),
            "NCHW copy + loop of F.adaptive_avg_pool2d": _nograd(torch, run_contig)}


@program(name="x3 roi average pooling, bin bounds as chained where bindings (rh, hs, he, ...)", kind="data", src="""
# the program above as first written: each bound a where binding built on the previous ones (compiled for over
# 30 minutes before session 58, each int32 step then wrapped on its own: 34 s now)
def roi_avg(float(N,H,W,C) feat, int32(R,5) roi) -> (out) {
  out(r, py, px, c) +=! (u < he - hs && v < we - ws ? feat(roi(r, 0), hs + u, ws + v, c) : 0.0)
                        / float((he - hs) * (we - ws))
    where py in 0:P, px in 0:P, u in 0:K, v in 0:K,
          rh = roi(r, 3) - roi(r, 1) + 1, rw = roi(r, 4) - roi(r, 2) + 1,
          hs = roi(r, 1) + py * rh / P, he = roi(r, 1) + ((py + 1) * rh + P - 1) / P,
          ws = roi(r, 2) + px * rw / P, we = roi(r, 2) + ((px + 1) * rw + P - 1) / P
}""", full=dict(N=2, H=64, W=64, C=128, R=128, P=7, K=7), tiny=dict(N=2, H=12, W=14, C=3, R=4, P=3, K=7),
    free=("P", "K"),
    inputs=_x3_roi_inputs)
def _x3_roi_bindings(torch, a, t, s):
    return _x3_roi(torch, a, t, s)


@program(name="x3 correlation cost volume 9x9 displacements (k / 9, k % 9), zero outside", kind="conv", src="""
# FlowNet/PWC-Net correlation: cv(b, k, h, w) = mean_c f1(b, c, h, w) * f2(b, c, h + dy, w + dx), k = (dy+4)*9 + dx+4
def corr(float(B,C,H,W) f1, float(B,C,H,W) f2) -> (cv) {
  cv(b, k, h, w) +=! (y >= 0 && y < H && x >= 0 && x < W ? f1(b, c, h, w) * f2(b, c, y, x) : 0) / C
    where k in 0:81, h in 0:H, w in 0:W, y = h + k / 9 - 4, x = w + k % 9 - 4
}""", full=dict(B=4, C=64, H=48, W=64), tiny=dict(B=1, C=3, H=5, W=6),
    inputs=lambda r, s: [_n(r, s["B"], s["C"], s["H"], s["W"]), _n(r, s["B"], s["C"], s["H"], s["W"])])
def _x3_corr(torch, a, t, s):
    F = torch.nn.functional
    f1, f2 = t
    H, W = s["H"], s["W"]

    def loop():
        f2p = F.pad(f2, (4, 4, 4, 4))
        return torch.stack([(f1 * f2p[:, :, dy:dy + H, dx:dx + W]).mean(1) for dy in range(9) for dx in range(9)], 1)

    def unfold():
        B, C = f1.shape[:2]
        p = F.unfold(f2, 9, padding=4).view(B, C, 81, H, W)
        return torch.einsum("bchw,bckhw->bkhw", f1, p) / C
    return {"81 shifted products + mean": _nograd(torch, loop), "F.unfold + einsum": _nograd(torch, unfold)}


@program(name="x3 bilinear resize to free sizes OH x OW (align_corners=False, computed indices in where)",
         kind="elementwise", src="""
# image resize as F.interpolate(mode="bilinear", align_corners=False): source coordinate (i + 0.5) * H / OH - 0.5,
# clamped at 0, its floor and the next row (clamped at the edge)
def resize(float(B,C,H,W) x) -> (y) {
  y(b, c, i, j) = (1 - ly) * ((1 - lx) * x(b, c, r0, c0) + lx * x(b, c, r0, c1))
                + ly * ((1 - lx) * x(b, c, r1, c0) + lx * x(b, c, r1, c1))
    where i in 0:OH, j in 0:OW,
          sy = fmax((i + 0.5) * H / OH - 0.5, 0.0), sx = fmax((j + 0.5) * W / OW - 0.5, 0.0),
          r0 = int32(sy), c0 = int32(sx), r1 = min(r0 + 1, H - 1), c1 = min(c0 + 1, W - 1),
          ly = sy - float(r0), lx = sx - float(c0)
}""", full=dict(B=16, C=3, H=512, W=512, OH=320, OW=320), tiny=dict(B=1, C=2, H=5, W=7, OH=3, OW=11),
    free=("OH", "OW"),
    inputs=lambda r, s: [r.uniform(0, 1, (s["B"], s["C"], s["H"], s["W"])).astype(np.float32)])
def _x3_resize(torch, a, t, s):
    F = torch.nn.functional
    return {"F.interpolate(bilinear)": _nograd(torch, lambda: F.interpolate(
        t[0], size=(s["OH"], s["OW"]), mode="bilinear", align_corners=False))}


_X3_YCC = np.array([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]], np.float32)


@program(name="x3 uint8 rgb (hwc) to planar ycbcr + per-image channel mean and std", kind="norm", src="""
# JPEG's YCbCr from an 8-bit interleaved image, scaled to [0, 1], stored planar (N, 3, H, W); then the mean and the
# (population) standard deviation of every plane
def ycbcr(uint8(N,H,W,3) img, float(3,3) M, float(3) off) -> (ycc, mean, std) {
  ycc(n, k, h, w) +=! M(k, c) * float(img(n, h, w, c)) / 255.0
  ycc(n, k, h, w) = ycc(n, k, h, w) + off(k)
  mean(n, k) +=! ycc(n, k, h, w) / (H * W)
  var(n, k) +=! (ycc(n, k, h, w) - mean(n, k)) * (ycc(n, k, h, w) - mean(n, k)) / (H * W)
  std(n, k) = sqrt(var(n, k))
}""", full=dict(N=16, H=480, W=640), tiny=dict(N=2, H=3, W=5),
    inputs=lambda r, s: [r.integers(0, 256, (s["N"], s["H"], s["W"], 3), dtype=np.uint8), _X3_YCC.copy(),
                         np.array([0, 0.5, 0.5], np.float32)],
    pick=lambda r: _x3_flat(*r))
def _x3_ycbcr(torch, a, t, s):
    img, M, off = t

    def run():
        ycc = (img.float() / 255 @ M.T + off).permute(0, 3, 1, 2)
        var, mean = torch.var_mean(ycc, (2, 3), unbiased=False)
        return _x3_flat(ycc, mean, var.sqrt())

    def planar():
        ycc = (torch.einsum("kc,nhwc->nkhw", M, img.float()) / 255 + off[:, None, None]).contiguous()
        var, mean = torch.var_mean(ycc, (2, 3), unbiased=False)
        return _x3_flat(ycc, mean, var.sqrt())
    def conv():
        ycc = torch.nn.functional.conv2d(img.permute(0, 3, 1, 2).float(), M[:, :, None, None] / 255, off)
        var, mean = torch.var_mean(ycc, (2, 3), unbiased=False)
        return _x3_flat(ycc, mean, var.sqrt())
    return {"matmul + permute + var_mean": _nograd(torch, run), "einsum (planar) + var_mean": _nograd(torch, planar),
            "F.conv2d 1x1 + var_mean": _nograd(torch, conv)}


def _x3_disk(k):
    r = k // 2
    i, j = np.mgrid[:k, :k]
    return (((i - r) ** 2 + (j - r) ** 2) <= r * r + r // 2).astype(np.float32)


@program(name="x3 morphological gradient (dilation - erosion) with a disk structuring element input", kind="conv",
         src="""
# flat grey-level morphology: the structuring element se is a K x K 0/1 mask centred at (K/2, K/2); outside the
# image a pixel is -inf for the dilation and +inf for the erosion
def morph_grad(float(N,H,W) img, float(K,K) se) -> (g) {
  dil(n, h, w) max=! (se(i, j) > 0 && y >= 0 && y < H && x >= 0 && x < W ? img(n, y, x) : -inf)
    where h in 0:H, w in 0:W, i in 0:K, j in 0:K, y = h + i - K / 2, x = w + j - K / 2
  ero(n, h, w) min=! (se(i, j) > 0 && y >= 0 && y < H && x >= 0 && x < W ? img(n, y, x) : inf)
    where h in 0:H, w in 0:W, i in 0:K, j in 0:K, y = h + i - K / 2, x = w + j - K / 2
  g(n, h, w) = dil(n, h, w) - ero(n, h, w)
}""", full=dict(N=16, H=512, W=512, K=5), tiny=dict(N=2, H=6, W=7, K=5),
    inputs=lambda r, s: [r.uniform(0, 1, (s["N"], s["H"], s["W"])).astype(np.float32), _x3_disk(s["K"])])
def _x3_morph(torch, a, t, s):
    F = torch.nn.functional
    img, se = t
    K, H, W = s["K"], s["H"], s["W"]
    r = K // 2
    offs = [(i, j) for i in range(K) for j in range(K) if a[1][i, j] > 0]

    def shifts():
        xp = F.pad(img, (r, r, r, r), value=-float("inf"))
        xn = F.pad(img, (r, r, r, r), value=float("inf"))
        dil, ero = xp[:, :H, :W].clone(), xn[:, :H, :W].clone()
        dil.fill_(-float("inf"))
        ero.fill_(float("inf"))
        for i, j in offs:
            torch.maximum(dil, xp[:, i:i + H, j:j + W], out=dil)
            torch.minimum(ero, xn[:, i:i + H, j:j + W], out=ero)
        return dil - ero

    def unfold():
        N = img.shape[0]
        m = se.reshape(-1) > 0
        pd = F.unfold(F.pad(img[:, None], (r, r, r, r), value=-float("inf")), K)[:, m]
        pe = F.unfold(F.pad(img[:, None], (r, r, r, r), value=float("inf")), K)[:, m]
        return (pd.amax(1) - pe.amin(1)).view(N, H, W)
    return {"shifted torch.maximum/minimum": _nograd(torch, shifts), "F.unfold + amax/amin": _nograd(torch, unfold)}


@program(name="x3 box filter mean by an integral image (for-loop cumsum along h, running sum along w), free radius",
         kind="scan", src="""
# the integral image: a scan over rows as a for loop, then a running sum along each row (a statement that reads
# its own earlier columns); the mean over the (2R+1)^2 window clamped to the image from four corner reads
def box_mean(float(N,H,W) img) -> (out) {
  for t in H {
    if t == 0 { cs(n, t, w) = img(n, t, w) }
    else      { cs(n, t, w) = cs(n, t - 1, w) + img(n, t, w) }
  }
  ii(n, h, w) = cs(n, h, w)
  ii(n, h, w) = ii(n, h, w) + (w > 0 ? ii(n, h, w - 1) : 0)
  if R >= 0 {   # R is a free size: it must appear in a where range, loop bound or if condition first
  out(n, h, w) = ((r1 >= 0 && c1 >= 0 ? ii(n, r1, c1) : 0) - (r0 >= 0 && c1 >= 0 ? ii(n, r0, c1) : 0)
                - (r1 >= 0 && c0 >= 0 ? ii(n, r1, c0) : 0) + (r0 >= 0 && c0 >= 0 ? ii(n, r0, c0) : 0))
                 / float((r1 - r0) * (c1 - c0))
    where h in 0:H, w in 0:W, r0 = max(h - R, 0) - 1, r1 = min(h + R, H - 1),
          c0 = max(w - R, 0) - 1, c1 = min(w + R, W - 1)
  }
}""", full=dict(N=16, H=512, W=512, R=5), tiny=dict(N=2, H=6, W=9, R=2), free=("R",),
    inputs=lambda r, s: [_n(r, s["N"], s["H"], s["W"])])
def _x3_box(torch, a, t, s):
    F = torch.nn.functional
    img, R = t[0], s["R"]
    H, W = s["H"], s["W"]

    def pool():
        return F.avg_pool2d(img[:, None], 2 * R + 1, stride=1, padding=R, count_include_pad=False)[:, 0]

    def integral():
        ii = F.pad(img.cumsum(1).cumsum(2), (1, 0, 1, 0))
        y = torch.arange(H)
        x = torch.arange(W)
        y0, y1 = (y - R).clamp_min(0), (y + R + 1).clamp_max(H)
        x0, x1 = (x - R).clamp_min(0), (x + R + 1).clamp_max(W)
        s_ = ii[:, y1][:, :, x1] - ii[:, y0][:, :, x1] - ii[:, y1][:, :, x0] + ii[:, y0][:, :, x0]
        return s_ / ((y1 - y0)[:, None] * (x1 - x0)[None]).float()
    return {"F.avg_pool2d(count_include_pad=False)": _nograd(torch, pool),
            "torch cumsum integral image": _nograd(torch, integral)}


@program(name="x3 conv3d 3x3x3 padding 1 (select padding) + bias + relu over a small volume", kind="conv", src="""
# a 3-D convolution block of a volumetric U-Net: same padding written as a select, bias and ReLU
def conv3d(float(N,C,D,H,W) x, float(M,C,3,3,3) wt, float(M) bias) -> (y) {
  y(n, m, d, h, v) +=! (zd >= 0 && zd < D && zh >= 0 && zh < H && zw >= 0 && zw < W ? x(n, c, zd, zh, zw) : 0)
                      * wt(m, c, kd, kh, kw)
    where d in 0:D, h in 0:H, v in 0:W, kd in 0:3, kh in 0:3, kw in 0:3,
          zd = d + kd - 1, zh = h + kh - 1, zw = v + kw - 1
  y(n, m, d, h, v) = fmax(y(n, m, d, h, v) + bias(m), 0)
}""", full=dict(N=2, C=16, D=32, H=32, W=32, M=32), tiny=dict(N=1, C=2, D=3, H=4, W=5, M=3),
    inputs=lambda r, s: [_n(r, s["N"], s["C"], s["D"], s["H"], s["W"]),
                         (_n(r, s["M"], s["C"], 3, 3, 3) / np.sqrt(27 * s["C"])).astype(np.float32), _w(r, s["M"])])
def _x3_conv3d(torch, a, t, s):
    F = torch.nn.functional
    x, w, b = t
    return {"F.conv3d(padding=1) + relu": _nograd(torch, lambda: F.relu(F.conv3d(x, w, b, padding=1)))}


# session 60: programs of the hunt that found a silent batch of 1 (a temporary bounded only by the state
# written further down the loop), a sum over the RNN's own past states, a scatter token by token, and a
# one-hot product

@program(name="elman, recurrent product in a temporary above the state, zero start (no where)", kind="rnn", src="""
def elman(float(T,B,I) x, float(I,H) W, float(H,H) U) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W(i, j)
    if t > 0 { u(b, j) +=! h(t - 1, b, k) * U(k, j) }
    h(t, b, j) = tanh(a(b, j) + (t > 0 ? u(b, j) : 0))
  }
}""", full=dict(T=64, B=32, I=256, H=256), tiny=dict(T=3, B=5, I=3, H=4),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["I"], s["H"]), _w(r, s["H"], s["H"])])
def _s60_elman(torch, a, t, s):
    x, W, U = t
    rnn = torch.nn.RNN(s["I"], s["H"], bias=False)
    _copy(torch, rnn.weight_ih_l0, a[1].T)
    _copy(torch, rnn.weight_hh_l0, a[2].T)
    return {"torch.nn.RNN": _nograd(torch, lambda: rnn(x)[0])}


@program(name="self-attentive elman: each step attends over its past states (no where for b, j)", kind="rnn",
         src="""
def self_att_rnn(float(T,B,I) x, float(I,H) W, float(H,H) U, float(H,H) V, float(H) bias) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W(i, j)
    if t > 0 {
      s(b, k) +=! h(k, b, j) * h(t - 1, b, j) / sqrt(float(H)) where k in 0:t
      mx(b) max=! s(b, k) where k in 0:t
      e(b, k) = exp(s(b, k) - mx(b)) where k in 0:t
      z(b) +=! e(b, k) where k in 0:t
      ctx(b, j) +=! e(b, k) * h(k, b, j) where k in 0:t
      a(b, j) += h(t - 1, b, k) * U(k, j)
      a(b, j) += ctx(b, k) / z(b) * V(k, j)
    }
    h(t, b, j) = tanh(a(b, j) + bias(j))
  }
}""", full=dict(T=128, B=16, I=128, H=256), tiny=dict(T=6, B=3, I=5, H=7),
    inputs=lambda r, s: [_n(r, s["T"], s["B"], s["I"]), _w(r, s["I"], s["H"]), _w(r, s["H"], s["H"]),
                         _w(r, s["H"], s["H"]), _w(r, s["H"])])
def _s60_selfatt(torch, a, t, s):
    x, W, U, V, bias = t
    T, B, H = s["T"], s["B"], s["H"]

    def loop():
        xp = x @ W + bias
        hs = x.new_empty(T, B, H)
        hs[0] = torch.tanh(xp[0])
        for k in range(1, T):
            hp, past = hs[k - 1], hs[:k]
            w = torch.softmax(torch.einsum("kbj,bj->bk", past, hp) / H ** 0.5, 1)
            hs[k] = torch.tanh(xp[k] + hp @ U + torch.einsum("bk,kbj->bj", w, past) @ V)
        return hs
    return {"torch loop": _nograd(torch, loop)}


@program(name="embedding backward token by token (a scatter in a for loop), free V", kind="training", src="""
def emb_bwd_loop(int32(N) idx, float(N,D) dy) -> (dE) {
  for n in N {
    dE(v, d) += idx(n) == v ? dy(n, d) : 0 where v in 0:V
  }
}""", full=dict(N=2048, D=256, V=4096), tiny=dict(N=7, D=3, V=5),
    inputs=lambda rng, s: [rng.integers(0, s["V"] // 2 + 1, s["N"]).astype(np.int32), _n(rng, s["N"], s["D"])],
    free=("V",))
def _s60_emb_loop(torch, a, t, s):
    idx, dy = t
    li = idx.long()
    return {"index_add_": lambda: torch.zeros(s["V"], dy.shape[1]).index_add_(0, li, dy)}


@program(name="embedding as a one-hot product (jax style), then a projection", kind="misc", src="""
def onehot_emb(int32(B,T) ids, float(V,D) E, float(O,D) W) -> (y) {
  x(b, t, d) +=! (ids(b, t) == v ? 1.0 : 0.0) * E(v, d) where v in 0:V
  y(b, t, o) +=! x(b, t, d) * W(o, d)
}""", full=dict(B=16, T=128, V=8000, D=256, O=256), tiny=dict(B=2, T=3, V=7, D=5, O=4),
    inputs=lambda rng, s: [rng.integers(0, s["V"], (s["B"], s["T"])).astype(np.int32), _n(rng, s["V"], s["D"]),
                           _w(rng, s["O"], s["D"])])
def _s60_onehot(torch, a, t, s):
    F = torch.nn.functional
    ids, E, W = t
    li = ids.long()
    return {"F.embedding + F.linear": _nograd(torch, lambda: F.linear(F.embedding(li, E), W))}
