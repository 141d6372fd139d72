"""tcdsl.gradient: the adjoint of a TC program, checked numerically.

Every adjoint here is run twice: by the NumPy interpreter (tcdsl.testing,
fast) against central finite differences of the forward program in float64,
and, for the models that have one, compiled with tcdsl.compile against
torch.autograd on the same model written in PyTorch (float64)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tcdsl
from tcdsl.autodiff import analyse, gradient
from tcdsl.testing import evaluate

from helpers import ROOT

torch = pytest.importorskip("torch")

ELMAN = (ROOT / "examples" / "rnn" / "elman.tc").read_text().replace("float(", "double(")
LSTM = (ROOT / "examples" / "rnn" / "lstm.tc").read_text().replace("float(", "double(")
GRU = (ROOT / "tests" / "programs" / "gru.tc").read_text().replace("float(", "double(")


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def make_inputs(spec: dict, seed: int = 1) -> list[np.ndarray]:
    """``spec``: name -> shape, or (kind, shape[, arg]) with kind "pos" (in
    [0.5, 2)), "unit" (in (-0.9, 0.9)), "range" ((lo, hi)) or "int" (in [0, arg))."""
    rng = np.random.default_rng(seed)
    out = []
    for s in spec.values():
        if s and isinstance(s[0], str):
            kind, shape = s[0], s[1]
            if kind == "int":
                out.append(rng.integers(0, s[2], shape).astype(np.int32))
            elif kind == "pos":
                out.append(rng.uniform(0.5, 2.0, shape))
            elif kind == "unit":
                out.append(rng.uniform(-0.9, 0.9, shape))
            elif kind == "range":
                out.append(rng.uniform(s[2][0], s[2][1], shape))
        else:
            out.append(rng.standard_normal(s))
    return out


def fd_check(src: str, spec: dict, wrt=None, entry=None, directions: int = 2, tol: float = 1e-6):
    """The adjoint (run by the interpreter) against central differences of the
    forward program along random directions, for each input in ``wrt``."""
    args = make_inputs(spec)
    outs = _tuple(evaluate(src, args, entry))
    rng = np.random.default_rng(7)
    douts = [rng.standard_normal(np.shape(o)) for o in outs]
    gsrc = gradient(src, entry, wrt)
    grads = _tuple(evaluate(gsrc, args + list(outs) + douts))
    names = list(spec)
    wrt_names = wrt or [x for x, a in zip(names, args) if a.dtype == np.float64]
    assert len(grads) == len(wrt_names)
    for g, x in zip(grads, wrt_names):
        k = names.index(x)
        assert np.shape(g) == np.shape(args[k])
        for _ in range(directions):
            v = rng.standard_normal(np.shape(args[k]))
            eps = 1e-6

            def loss(a):
                aa = list(args)
                aa[k] = a
                o = _tuple(evaluate(src, aa, entry))
                return sum(float(np.sum(y * d)) for y, d in zip(o, douts))
            fd = (loss(args[k] + eps * v) - loss(args[k] - eps * v)) / (2 * eps)
            an = float(np.sum(g * v))
            assert abs(fd - an) <= tol * max(1.0, abs(fd)), (x, fd, an, gsrc)
    return gsrc


# ------------------------------------------------------------------ programs
PROGRAMS = {
    "pointwise": ("def f(double(N) x, double(N) w) -> (y) { y(i) = tanh(x(i)) * w(i) + sigmoid(x(i)) * x(i) / w(i) }",
                  {"x": (7,), "w": ("pos", (7,))}),
    "leaky_relu": ("def f(double(N) x) -> (y) { y(i) = x(i) > 0 ? x(i) : 0.1 * x(i) }", {"x": (9,)}),
    "matmul": ("def f(double(M,K) A, double(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }", {"A": (3, 4), "B": (4, 5)}),
    "accumulate": ("""def f(double(M,K) A, double(K,N) B, double(M,N) Z) -> (C) {
        C(i,j) = Z(i,j) * Z(i,j)
        C(i,j) += A(i,k) * B(k,j) }""", {"A": (3, 4), "B": (4, 5), "Z": (3, 5)}),
    "prod": ("def f(double(M,K) A) -> (C) { C(i) *=! A(i,k) }", {"A": (3, 4)}),
    "prod_into": ("""def f(double(M,K) A, double(M) z) -> (C) {
        C(i) = z(i)
        C(i) *= A(i,k) }""", {"A": (3, 4), "z": (3,)}),
    "rowmax": ("def f(double(M,K) A) -> (C) { C(i) max=! A(i,k) }", {"A": (3, 4)}),
    "rowmin": ("def f(double(M,K) A) -> (C) { C(i) min=! A(i,k) * A(i,k) }", {"A": (3, 4)}),
    "max_into": ("""def f(double(M,K) A, double(M) z) -> (C) {
        C(i) = z(i)
        C(i) max= A(i,k) }""", {"A": (3, 4), "z": (3,)}),
    "max_pointwise": ("""def f(double(M) A, double(M) z) -> (C) {
        C(i) = z(i)
        C(i) max= A(i) * 2.0 }""", {"A": (5,), "z": (5,)}),
    "softmax": ("""def f(double(N,C) x) -> (y) {
        m(n) max=! x(n,c)
        e(n,c) = exp(x(n,c) - m(n))
        s(n) +=! e(n,c)
        y(n,c) = e(n,c) / s(n) }""", {"x": (3, 5)}),
    "layernorm": ("""def f(double(N,C) x, double(C) gamma, double(C) beta) -> (y) {
        mean(n) +=! x(n,c) / C
        xc(n,c) = x(n,c) - mean(n)
        var(n) +=! xc(n,c) * xc(n,c) / C
        rstd(n) = rsqrt(var(n) + 1e-5)
        y(n,c) = xc(n,c) * rstd(n) * gamma(c) + beta(c) }""", {"x": (3, 6), "gamma": (6,), "beta": (6,)}),
    "conv1d": ("def f(double(B,N) x, double(K) w) -> (y) { y(b, i) +=! x(b, i + k) * w(k) }", {"x": (2, 8), "w": (3,)}),
    "conv2d": ("def f(double(H,W) x, double(KH,KW) w) -> (y) { y(i, j) +=! x(i + kh, j + kw) * w(kh, kw) }",
               {"x": (6, 7), "w": (3, 2)}),
    "conv_padded": ("""def f(double(N) x, double(K) w) -> (y) {
        y(i) +=! (i + k - 1 >= 0 && i + k - 1 < N) ? x(i + k - 1) * w(k) : 0.0 where i in 0:N, k in 0:K }""",
                    {"x": (8,), "w": (3,)}),
    "conv_time": ("""def f(double(T,B,C) x, double(K,C,H) w) -> (y) {
        y(t, b, h) +=! x(t + k, b, c) * w(k, c, h) }""", {"x": (5, 2, 3), "w": (2, 3, 4)}),
    "shift": ("def f(double(N) x) -> (y) { y(i) = x(i + 1) - x(i) where i in 0:N-1 }", {"x": (8,)}),
    "reverse": ("def f(double(N) x) -> (y) { y(i) = x(N - 1 - i) * x(i) }", {"x": (6,)}),
    "diagonal": ("def f(double(N,N) A) -> (y) { y(i) = A(i, i) * A(i, i) }", {"A": (4, 4)}),
    "floor_index": ("def f(double(N) x) -> (y) { y(i) = x(i / 2) * x(i) where i in 0:N }", {"x": (6,)}),
    "embedding": ("""def f(double(V,D) E, int32(N,L) ids) -> (y) {
        y(n, d) +=! E(ids(n, l), d) * E(ids(n, l), d) }""", {"E": (5, 3), "ids": ("int", (2, 4), 5)}),
    "scalar": ("def f(double(N) x, double alpha) -> (s) { s +=! alpha * x(i) * x(i) }", {"x": (5,), "alpha": ()}),
    "pow_div": ("def f(double(N) x, double(N) y) -> (z) { z(i) = pow(x(i), y(i)) / (1.0 + y(i) * y(i)) }",
                {"x": ("pos", (5,)), "y": (5,)}),
    "min_max": ("""def f(double(N) x, double(N) y) -> (z) {
        z(i) = max(x(i), y(i)) + fmin(x(i), 2.0 * y(i)) + min(x(i), 0.5) + fmax(y(i), -0.25) }""",
                {"x": (6,), "y": (6,)}),
    "two_outputs": ("""def f(double(N) x, double(N) w) -> (y, z) {
        y(i) = x(i) * w(i)
        z(i) = exp(y(i)) + w(i) }""", {"x": (4,), "w": (4,)}),
    "in_place": ("""def f(double(N) x) -> (y) {
        y(i) = x(i) * 2.0
        y(i) = y(i) * y(i) + x(i)
        y(i) = sin(y(i)) }""", {"x": (5,)}),
    "overwritten_temp": ("""def f(double(N) x, double(N) w) -> (y) {
        tmp(i) = x(i) * w(i)
        y(i) = tmp(i) * tmp(i)
        tmp(i) = exp(x(i))
        y(i) += tmp(i) * w(i) }""", {"x": (5,), "w": (5,)}),
    "elman": (ELMAN, {"input": (4, 2, 3), "h0": (2, 5), "i2h": (3, 5), "h2h": (5, 5)}),
    "gru": (GRU, {"x": (4, 2, 3), "h0": (2, 5), "Wx": (3, 3, 5), "Wh": (3, 5, 5), "bx": (3, 5), "bh": (3, 5)}),
    "lstm": (LSTM, {"x": (4, 2, 3), "h0": (2, 5), "c0": (2, 5), "Wx": (4, 3, 5), "Wh": (4, 5, 5), "bias": (4, 5)}),
    "state_in_temp": ("""def f(double(T,B,H) x, double(H,H) W) -> (out) {
        h(b, j) = x(0, b, j)
        for t in 1:T {
          z(b, j) +=! h(b, k) * W(k, j)
          h(b, j) = tanh(z(b, j) + x(t, b, j))
        }
        out(b, j) = h(b, j) * h(b, j) }""", {"x": (4, 2, 3), "W": (3, 3)}),
    "stacked": ("""def f(double(T,B,H) x, double(L,H,H) W) -> (hs) {
        for l in L {
          for t in T {
            if l == 0 {
              if t == 0 { hs(l, t, b, j) +=! x(t, b, k) * W(l, k, j) }
              else { hs(l, t, b, j) +=! (x(t, b, k) + hs(l, t - 1, b, k)) * W(l, k, j) }
            } else {
              if t == 0 { hs(l, t, b, j) +=! hs(l - 1, t, b, k) * W(l, k, j) }
              else { hs(l, t, b, j) +=! (hs(l - 1, t, b, k) + hs(l, t - 1, b, k)) * W(l, k, j) }
            }
            hs(l, t, b, j) = sigmoid(hs(l, t, b, j))
          }
        } }""", {"x": (3, 2, 3), "W": (2, 3, 3)}),
    "reversed_read": ("""def f(double(T,N) x) -> (y) {
        for t in T {
          if t == 0 { y(t, i) = x(T - 1, i) }
          else { y(t, i) = y(t - 1, i) * x(T - 1 - t, i) + exp(y(t - 1, i) * 0.1) }
        } }""", {"x": (4, 3)}),
    "loop_from_one": ("""def f(double(T,N) x) -> (y) {
        for t in 1:T { y(t, i) +=! x(t, j) * x(t - 1, j) * x(t, i) } }""", {"x": (4, 3)}),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_adjoint_matches_finite_differences(name):
    src, spec = PROGRAMS[name]
    fd_check(src, spec)


UNARY = {
    "exp": None, "exp2": None, "exp10": None, "expm1": None, "tanh": None, "sigmoid": None, "sin": None,
    "cos": None, "tan": ("unit",), "sinh": None, "cosh": None, "asinh": None, "atan": None, "erf": None,
    "erfc": None, "erfcx": None, "normcdf": None, "fabs": None, "sinpi": None, "cospi": None, "j0": None,
    "j1": None, "cyl_bessel_i0": None, "cyl_bessel_i1": None,
    "asin": ("unit",), "acos": ("unit",), "atanh": ("unit",), "erfinv": ("unit",),
    "log": ("pos",), "log2": ("pos",), "log10": ("pos",), "log1p": ("pos",), "sqrt": ("pos",), "rsqrt": ("pos",),
    "cbrt": ("pos",), "rcbrt": ("pos",), "y0": ("pos",), "y1": ("pos",), "acosh": ("range", (1.5, 3.0)),
    "erfcinv": ("range", (0.1, 1.9)), "normcdfinv": ("range", (0.1, 0.9)),
}


@pytest.mark.parametrize("fn", sorted(UNARY))
def test_unary_builtins(fn):
    kind = UNARY[fn]
    spec = {"x": (6,) if kind is None else (kind[0], (6,)) + kind[1:]}
    fd_check(f"def f(double(N) x) -> (y) {{ y(i) = {fn}(x(i)) * x(i) }}", spec)


@pytest.mark.parametrize("fn,arity", [("pow", 2), ("fmax", 2), ("fmin", 2), ("hypot", 2), ("atan2", 2),
                                      ("copysign", 2), ("fdim", 2), ("fmod", 2), ("remainder", 2),
                                      ("fdivide", 2), ("rhypot", 2), ("fma", 3), ("norm3d", 3), ("rnorm3d", 3),
                                      ("norm4d", 4), ("rnorm4d", 4)])
def test_nary_builtins(fn, arity):
    names = "xyzw"[:arity]
    params = ", ".join(f"double(N) {v}" for v in names)
    call = f"{fn}(" + ", ".join(f"{v}(i)" for v in names) + ")"
    spec = {v: (("pos", (6,)) if fn == "pow" and v == "x" else (6,)) for v in names}
    fd_check(f"def f({params}) -> (out) {{ out(i) = {call} * x(i) }}", spec)


def test_wrt_selects_inputs_and_integer_inputs_are_left_out():
    src, spec = PROGRAMS["embedding"]
    text = fd_check(src, spec)  # default: every floating-point input, so not ids
    assert "-> (double(V, D) d_E)" in text
    src, spec = PROGRAMS["accumulate"]
    text = fd_check(src, spec, wrt=["B"])
    assert "-> (double(K, N) d_B)" in text


def test_signature_follows_the_contract():
    text = gradient(ELMAN)
    head = text.splitlines()[0]
    assert head == ("def elman_rnn_grad(double(T, B, Ci) input, double(B, Co) h0, double(Ci, Co) i2h, "
                    "double(Co, Co) h2h, double(T, B, Co) hidden, double(T, B, Co) d_hidden) -> "
                    "(double(T, B, Ci) d_input, double(B, Co) d_h0, double(Ci, Co) d_i2h, double(Co, Co) d_h2h) {")


def test_unused_input_gets_a_zero_gradient():
    fd_check("def f(double(N) x, double(M) unused) -> (y) { y(i) = x(i) * x(i) }", {"x": (4,), "unused": (3,)})


def test_outputs_with_computed_extents_are_guarded():
    # y has extent N - K + 1: the adjoint declares it with a size of its own
    text = gradient(PROGRAMS["conv1d"][0])
    assert "double(B, y_n1) y, double(B, y_n1) d_y" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'may be read out of bounds' warning
        tcdsl.compile(text)


# ------------------------------------------------------------------ memory
def test_elman_adjoint_recomputes_nothing():
    """The Elman RNN's backward reads the forward output instead of replaying
    the recurrence, keeps no tape (memory O(T*B*H): the output and its
    adjoint), and accumulates the weight gradients of all steps after the
    reverse loop (the first step's, from h0, at that step: after the loop
    it would read a_hidden(0, ...) also when T = 0)."""
    a = analyse(ELMAN)
    assert not a.replayed and not a.tapes
    text = a.text
    loop = text[text.index("for t"):text.index("\n  }\n")]
    assert "d_i2h" not in loop and "d_input" not in loop
    assert "d_h2h(ci, co) += a_hidden(t, b, co) * hidden(t - 1, b, ci) where ci in 0:Co, co in 0:Co, b in 0:B, t in 1:T" \
        in text[text.index("\n  }\n"):]
    first = loop[loop.index("if ((T - 1) - t) == 0 {"):loop.index("} else {")]
    assert "d_h2h(ci, co) += a_hidden((T - 1) - t, b, co) * h0(b, ci)" in first
    assert "a_hidden(((T - 1) - t) - 1, b, ci) += a_hidden((T - 1) - t, b, co) * h2h_T(co, ci)" in loop
    assert "h2h_T(i1, i0) = h2h(i0, i1)" in text  # the transposed weight, made once


def test_lstm_adjoint_tapes_the_gates_per_step():
    """The LSTM's gates and its state temporaries are overwritten at every
    step: they are replayed and kept per step (T copies of gates, hp, cp)."""
    a = analyse(LSTM)
    assert a.replayed == {"gates", "hp", "cp"}
    tapes = {id(t): t for t in a.tapes.values()}.values()  # the two statements reading gates share one
    assert sorted((t.tensor, t.loops) for t in tapes) == [("cp", ("t",)), ("gates", ("t",)), ("hp", ("t",))]
    assert a.text.count("gates_tape(t, i0, i1, i2) = gates(i0, i1, i2)") == 1


def test_gru_adjoint_keeps_one_tape_per_value():
    """Reads of one value share a tape, also across the branches of an if:
    r, z and cand once per step each, gh (its three gates) once."""
    a = analyse(GRU)
    tapes = {id(t): t for t in a.tapes.values()}.values()
    assert sorted(t.tensor for t in tapes) == ["cand", "gh", "r", "z"]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("src,wrt,message", [
    ("def f(double(N) x, int32(N) k) -> (y) { y(i) = x(i) * k(i) }", ["k"], "it is int32"),
    ("def f(double(N) x) -> (y) { y(i) = floor(x(i)) * x(i) }", None, "'floor' is not differentiable"),
    ("def f(double(N) x) -> (y) { y(i) = round(x(i)) }", None, "'round' is not differentiable"),
    ("def f(double(N) x, double(N) z) -> (y) { y(i) = x(int32(z(i))) }", None, "an index has no derivative"),
    ("def f(double(N) x) -> (y) {\n idx(i) = int32(x(i))\n y(i) = x(idx(i)) }", None, "an index has no derivative"),
    ("def f(double(N) x) -> (y) { y(i) = float(int32(x(i))) }", None, "rounding has no derivative"),
    ("def f(double(N) x) -> (y) {\n y(i) = x(i)\n y(i) = y(i) + y(N - 1 - i) }", None, "that it also writes"),
])
def test_not_differentiable_is_a_located_error(src, wrt, message):
    with pytest.raises(tcdsl.TcSemanticError) as e:
        gradient(src, wrt=wrt)
    assert message in str(e.value)
    assert str(e.value).startswith("<string>:")
    assert "^" in str(e.value)


def test_unknown_wrt_is_an_error():
    with pytest.raises(tcdsl.TcError, match="'q' is not an input"):
        gradient("def f(double(N) x) -> (y) { y(i) = x(i) }", wrt="q")


def test_integer_index_of_a_non_differentiable_input_is_fine():
    # ids is an input: the gradient of E does not flow through it
    fd_check(PROGRAMS["embedding"][0], PROGRAMS["embedding"][1], wrt=["E"])


# ------------------------------------------------------------------ against PyTorch, compiled
def _t(a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def _compiled_grads(src, args, outs_ref, douts):
    k = tcdsl.compile(gradient(src))
    return _tuple(k(*args, *outs_ref, *douts))


@pytest.mark.slow
def test_elman_compiled_matches_torch():
    spec = {"input": (6, 3, 4), "h0": (3, 5), "i2h": (4, 5), "h2h": (5, 5)}
    x, h0, i2h, h2h = (_t(a) for a in make_inputs(spec))
    h, hs = h0, []
    for t in range(x.shape[0]):
        h = torch.tanh(h @ h2h + x[t] @ i2h)
        hs.append(h)
    hidden = torch.stack(hs)
    d = torch.randn(hidden.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    hidden.backward(d)
    fwd = tcdsl.compile(ELMAN)
    args = [v.detach().numpy() for v in (x, h0, i2h, h2h)]
    out = fwd(*args)
    np.testing.assert_allclose(out, hidden.detach().numpy(), atol=1e-12)
    got = _compiled_grads(ELMAN, args, [out], [d.numpy()])
    for g, ref in zip(got, (x.grad, h0.grad, i2h.grad, h2h.grad)):
        np.testing.assert_allclose(g, ref.numpy(), atol=1e-12)


def _lstm_torch(x, h0, c0, Wx, Wh, bias):
    h, c, hs, cs = h0, c0, [], []
    for t in range(x.shape[0]):
        g = torch.einsum("bi,gij->gbj", x[t], Wx) + torch.einsum("bk,gkj->gbj", h, Wh) + bias[:, None, :]
        c = torch.sigmoid(g[1]) * c + torch.sigmoid(g[0]) * torch.tanh(g[2])
        h = torch.sigmoid(g[3]) * torch.tanh(c)
        hs.append(h)
        cs.append(c)
    return torch.stack(hs), torch.stack(cs)


def _gru_torch(x, h0, Wx, Wh, bx, bh):
    h, hs = h0, []
    for t in range(x.shape[0]):
        gx = torch.einsum("bi,gij->gbj", x[t], Wx)
        gh = torch.einsum("bk,gkj->gbj", h, Wh)
        r = torch.sigmoid(gx[0] + bx[0] + gh[0] + bh[0])
        z = torch.sigmoid(gx[1] + bx[1] + gh[1] + bh[1])
        n = torch.tanh(gx[2] + bx[2] + r * (gh[2] + bh[2]))
        h = (1 - z) * n + z * h
        hs.append(h)
    return torch.stack(hs)


def _layernorm_torch(x, gamma, beta):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps=1e-5)


@pytest.mark.parametrize("name,fn,run", [
    ("lstm", _lstm_torch, "interpreter"),
    ("gru", _gru_torch, "interpreter"),
    ("layernorm", _layernorm_torch, "interpreter"),
    ("softmax", lambda x: torch.softmax(x, dim=1), "interpreter"),
    ("layernorm", _layernorm_torch, "compiled"),
    pytest.param("lstm", _lstm_torch, "compiled", marks=pytest.mark.slow),
    pytest.param("gru", _gru_torch, "compiled", marks=pytest.mark.slow),
])
def test_models_match_torch(name, fn, run):
    src, spec = PROGRAMS[name]
    args = make_inputs(spec)
    ts = [_t(a) for a in args]
    outs = _tuple(fn(*ts))
    gen = torch.Generator().manual_seed(5)
    douts = [torch.randn(o.shape, dtype=torch.float64, generator=gen) for o in outs]
    torch.autograd.backward(outs, douts)
    fwd_outs = [o.detach().numpy() for o in outs]
    dn = [d.numpy() for d in douts]
    if run == "compiled":
        got = _compiled_grads(src, args, fwd_outs, dn)
    else:
        got = _tuple(evaluate(gradient(src), args + fwd_outs + dn))
    for g, t in zip(got, ts):
        np.testing.assert_allclose(g, t.grad.numpy(), atol=1e-11, rtol=1e-9)


def test_max_ties_split_like_torch_amax():
    A = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, 2.0, 2.0], [-1.0, 4.0, 0.0, 1.0]])
    d = np.array([1.0, 2.0, -3.0])
    src = PROGRAMS["rowmax"][0]
    C = evaluate(src, [A])
    got = evaluate(gradient(src), [A, C, d])
    t = _t(A)
    torch.amax(t, dim=1).backward(torch.tensor(d))
    np.testing.assert_allclose(got, t.grad.numpy())
    k = tcdsl.compile(gradient(src))
    np.testing.assert_allclose(k(A, C, d), t.grad.numpy())


def test_product_with_zeros_like_torch_prod():
    A = np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0]])
    d = np.array([1.0, 2.0, -3.0])
    src = PROGRAMS["prod"][0]
    C = evaluate(src, [A])
    t = _t(A)
    torch.prod(t, dim=1).backward(torch.tensor(d))
    k = tcdsl.compile(gradient(src))
    np.testing.assert_allclose(k(A, C, d), t.grad.numpy())


def test_embedding_scatter_adds_like_torch():
    E = np.random.default_rng(0).standard_normal((6, 3))
    ids = np.array([[0, 2, 2, 5], [2, 1, 0, 0]], dtype=np.int32)
    src = "def f(double(V,D) E, int32(N,L) ids) -> (y) { y(n, l, d) = E(ids(n, l), d) * 2.0 }"
    y = evaluate(src, [E, ids])
    d = np.random.default_rng(1).standard_normal(y.shape)
    k = tcdsl.compile(gradient(src))
    t = _t(E)
    (torch.nn.functional.embedding(torch.tensor(ids, dtype=torch.long), t) * 2).backward(torch.tensor(d))
    np.testing.assert_allclose(k(E, ids, y, d), t.grad.numpy(), atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_adjoint_compiles_and_matches_the_interpreter(name):
    src, spec = PROGRAMS[name]
    args = make_inputs(spec)
    outs = _tuple(evaluate(src, args))
    rng = np.random.default_rng(2)
    douts = [rng.standard_normal(np.shape(o)) for o in outs]
    gsrc = gradient(src)
    ref = _tuple(evaluate(gsrc, args + list(outs) + douts))
    got = _tuple(tcdsl.compile(gsrc)(*args, *outs, *douts))
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, atol=1e-12)


# ------------------------------------------------------------------ command line
def test_cli_emit_grad(tmp_path, capsys):
    from tcdsl.cli import main

    path = tmp_path / "elman.tc"
    path.write_text(ELMAN)
    assert main(["compile", str(path), "--emit", "grad"]) == 0
    out = capsys.readouterr().out
    assert out == gradient(ELMAN)
    grad = tmp_path / "elman_grad.tc"
    assert main(["compile", str(path), "--emit", "grad", "-o", str(grad)]) == 0
    assert main(["check", str(grad)]) == 0
    bad = tmp_path / "bad.tc"
    bad.write_text("def f(double(N) x) -> (y) { y(i) = floor(x(i)) }\n")
    assert main(["compile", str(bad), "--emit", "grad"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:1:36: cannot differentiate") and "Traceback" not in err


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_empty_sequence_has_zero_gradients(mode):
    # T = 0: the forward gives an empty output; the adjoint's first-step terms
    # (from h0) must not run, and every gradient is zero
    rng = np.random.default_rng(3)
    x, h0 = np.zeros((0, 2, 3)), rng.standard_normal((2, 4))
    i2h, h2h = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    hidden = tcdsl.compile(ELMAN)(x, h0, i2h, h2h)
    assert hidden.shape == (0, 2, 4)
    grads = tcdsl.compile(gradient(ELMAN), specialize=mode)(x, h0, i2h, h2h, hidden, np.zeros_like(hidden))
    assert [g.shape for g in grads] == [(0, 2, 3), (2, 4), (3, 4), (4, 4)]
    assert all(not np.any(g) for g in grads)


@pytest.mark.filterwarnings("ignore")  # range inference narrows k (the forward's warning)
@pytest.mark.parametrize("K", [1, 3])
def test_gradient_of_a_narrowed_range_writes_inside_its_tensor(K):
    # without `k in 0:K` the forward sums k over [1, min(2, K)); the adjoint's
    # d_w(o, c, k) ranged over k in 1:2, writing d_w(o, c, 1) when K = 1
    src = """def c1p(double(N,C,L) x, double(O,C,K) w) -> (y) {
      y(n,o,l) +=! (l + k - 1 >= 0 && l + k - 1 < L ? x(n,c,l+k-1) : 0.0) * w(o,c,k) where l in 0:L
    }"""
    gsrc = fd_check(src, {"x": (2, 3, 6), "w": (4, 3, K)})
    tcdsl.compile(gsrc)
