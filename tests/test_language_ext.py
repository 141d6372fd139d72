"""The constructs beyond TC (docs/language.md, step 10): lhs indices moved by
sizes (``y(i, H + j)``), affine sizes in declared shapes (``float(4*H, I)``),
free sizes (given at compile time or at the call), ``X.k`` in loop bounds
and where ranges, ``inf``/``nan`` literals, ``argmax=!``/``argmin=!``, and
the warnings for silent narrowing.  Every program runs in every specialize
mode against NumPy and against the reference interpreter."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import tcdsl
from tcdsl import TcSemanticError, TcShapeError
from tcdsl.errors import TcWarning
from tcdsl.cli import main
from tcdsl.syntax.parse import parse
from tcdsl.syntax.printer import to_tc
from tcdsl.testing import evaluate

MODES = ("never", "after-scheduling", "before-scheduling", "auto")


def check(src: str, inputs, want, sizes=None, atol=1e-5, **call_sizes):
    """``src`` in every mode (and the interpreter) gives ``want`` on ``inputs``."""
    want = want if isinstance(want, tuple) else (want,)
    got = evaluate(src, inputs, sizes={**(sizes or {}), **call_sizes})
    for g, w in zip(got if isinstance(got, tuple) else (got,), want):
        np.testing.assert_allclose(g, w, atol=atol, err_msg="interpreter")
    for mode in MODES:
        k = tcdsl.compile(src, specialize=mode, sizes=sizes)
        for _ in range(2):  # the second call goes through a plan (or a specialised binary)
            got = k(*inputs, **call_sizes)
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, want):
                assert g.shape == np.shape(w) and g.dtype == np.asarray(w).dtype, mode
                np.testing.assert_allclose(g, w, atol=atol, err_msg=mode)


def ranges(src: str) -> str:
    return tcdsl.compile(src).frontend.ranges.dump()


RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ------------------------------------------------------ lhs indices H + j
CONCAT = """
def cat(float(N, H) a, float(N, K) b) -> (y) {
  y(i, j) = a(i, j)
  y(i, H + j) = b(i, j)
}"""


def test_concatenation_by_an_offset_on_the_left():
    a, b = rand(3, 4), rand(3, 2)
    check(CONCAT, [a, b], np.concatenate([a, b], 1))
    assert "y: [N, H + K]" in ranges(CONCAT)
    assert "S1 y: dim 1 written at H + j in [H, H + K)" in ranges(CONCAT)


BIRNN = """
def birnn(float(T, B, I) x, float(I, H) Wf, float(H, H) Uf, float(I, H) Wb, float(H, H) Ub) -> (y) {
  for t in T {
    f(t, b, j) +=! x(t, b, i) * Wf(i, j)
    if t > 0 { f(t, b, j) += f(t - 1, b, k) * Uf(k, j) }
    f(t, b, j) = tanh(f(t, b, j))
    r(t, b, j) +=! x(T - 1 - t, b, i) * Wb(i, j)
    if t > 0 { r(t, b, j) += r(t - 1, b, k) * Ub(k, j) }
    r(t, b, j) = tanh(r(t, b, j))
    y(t, b, j) = f(t, b, j)
    y(T - 1 - t, b, H + j) = r(t, b, j)
  }
}"""


@pytest.mark.slow
def test_bidirectional_rnn_writes_both_halves_of_one_output():
    T, B, I, H = 5, 2, 3, 4
    x, Wf, Uf, Wb, Ub = rand(T, B, I), rand(I, H), rand(H, H) / 2, rand(I, H), rand(H, H) / 2

    def run(xs, W, U):
        h, out = np.zeros((B, H), np.float32), []
        for xt in xs:
            h = np.tanh(xt @ W + h @ U)
            out.append(h)
        return np.stack(out)
    want = np.concatenate([run(x, Wf, Uf), run(x[::-1], Wb, Ub)[::-1]], 2)
    check(BIRNN, [x, Wf, Uf, Wb, Ub], want, atol=1e-4)


def test_reversed_and_reduced_offsets():
    rev = "def rev(float(N) x) -> (y) {\n  y(N - 1 - i) = x(i)\n}"
    x = rand(6)
    check(rev, [x], x[::-1])
    red = ("def red(float(N, K) a, float(M, K) b) -> (y) {\n  y(i) +=! a(i, k)\n"
           "  y(N + i) +=! b(i, k) * 2\n}")
    a, b = rand(3, 4), rand(2, 4)
    check(red, [a, b], np.concatenate([a.sum(1), 2 * b.sum(1)]), atol=1e-4)


def test_offset_writes_into_a_declared_output_are_proved_in_bounds():
    src = ("def f(float(N) a, float(N) b) -> (float(2 * N) y) {\n  y(i) = a(i)\n  y(N + i) = b(i)\n}")
    a, b = rand(4), rand(4)
    check(src, [a, b], np.concatenate([a, b]))
    bad = "def f(float(N) a) -> (float(N) y) {\n  y(1 + i) = a(i)\n}"
    with pytest.raises(TcSemanticError, match=r"'y' may be written out of its declared size: .* y\(\d+\)"):
        tcdsl.compile(bad)


@pytest.mark.parametrize("lhs, regex", [
    ("y(i - 1) = a(i)", r"'y' may be written at a negative index along dimension 0"),
    ("y(2 * i) = a(i)", r"a left-hand side index must be an index variable, an affine expression"),
    ("y(i + k) = a(i) + a(k)", r"a left-hand side index may use one index variable"),
    ("y(i, i + 1) = a(i)", r"index variable 'i' appears twice on the left-hand side"),
])
def test_bad_offsets_on_the_left(lhs, regex):
    with pytest.raises(TcSemanticError, match=regex) as info:
        tcdsl.compile("def f(float(N) a) -> (y) {\n  " + lhs + "\n}")
    assert info.value.line == 2


# --------------------------------------------- affine sizes in declared shapes
LSTM = """
def lstm(float(T, B, I) x, float(4 * H, I) W, float(4 * H, H) U, float(B, H) h0, float(B, H) c0) -> (h, c) {
  for t in T {
    g(b, r) +=! x(t, b, i) * W(r, i)
    if t == 0 { g(b, r) += h0(b, k) * U(r, k) }
    else      { g(b, r) += h(t - 1, b, k) * U(r, k) }
    if t == 0 { c(t, b, j) = sigmoid(g(b, H + j)) * c0(b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) }
    else      { c(t, b, j) = sigmoid(g(b, H + j)) * c(t - 1, b, j) + sigmoid(g(b, j)) * tanh(g(b, 2 * H + j)) }
    h(t, b, j) = sigmoid(g(b, 3 * H + j)) * tanh(c(t, b, j))
  }
}"""


def test_lstm_with_pytorch_weight_shapes():
    T, B, I, H = 4, 3, 5, 2
    x, W, U, h0, c0 = rand(T, B, I), rand(4 * H, I), rand(4 * H, H), rand(B, H), rand(B, H)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h, c, hs, cs = h0, c0, [], []
    for t in range(T):
        g = x[t] @ W.T + h @ U.T
        i, f, gg, o = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        c = sig(f) * c + sig(i) * np.tanh(gg)
        h = sig(o) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    check(LSTM, [x, W, U, h0, c0], (np.stack(hs), np.stack(cs)), atol=1e-5)
    assert "W: [4 * H, I]" in ranges(LSTM)


def test_a_shape_that_does_not_fit_names_the_argument_and_dimension():
    src = "def f(float(2 * N) x) -> (y) {\n  y(i) = x(2 * i) + x(2 * i + 1)\n}"
    k = tcdsl.compile(src)
    np.testing.assert_array_equal(k(np.arange(6, dtype=np.float32)), [1, 5, 9])
    with pytest.raises(TcShapeError, match=r"argument 'x' dim 0: size 5 does not fit the declared 2 \* N: "
                                           r"no size N >= 0 gives 5"):
        k(np.zeros(5, np.float32))
    two = tcdsl.compile("def f(float(2 * N) x, float(N) z) -> (y) {\n  y(i) = x(i + N) + z(i)\n}")
    with pytest.raises(TcShapeError, match=r"argument 'x' dim 0: size 6, but the def declares 2 \* N = 8 "
                                           r"for N=4 \(from 'z' dim 0\)"):
        two(np.zeros(6, np.float32), np.zeros(4, np.float32))


def test_declared_shape_expressions_round_trip_and_reject_products():
    src = "def f(float(4 * H + 1, X.0) W, float(K) X) -> (y) {\n  y(i) = W(i, 0)\n}"
    assert parse(to_tc(parse(src))) == parse(src)
    with pytest.raises(TcSemanticError, match="a size must be a name, a constant, or a sum of sizes"):
        tcdsl.compile("def f(float(N * M) x) -> (y) {\n  y(i) = x(i)\n}")


# --------------------------------------------------------------- free sizes
STEPS = """
def steps(float(B) h0, float(B, B) W) -> (h) {
  for t in S {
    if t == 0 { h(t, b) = h0(b) }
    else      { h(t, b) +=! tanh(h(t - 1, k)) * W(k, b) }
  }
}"""


def _steps(h0, W, S):
    out = [h0]
    for _ in range(1, S):
        out.append(np.tanh(out[-1]) @ W)
    return np.stack(out[:S]).reshape(S, len(h0))


def test_a_free_size_given_at_the_call_or_at_compile_time():
    h0, W = rand(3), rand(3, 3)
    check(STEPS, [h0, W], _steps(h0, W, 5), S=5)
    check(STEPS, [h0, W], _steps(h0, W, 4), sizes={"S": 4})
    k = tcdsl.compile(STEPS)
    assert k(h0, W, S=2).shape == (2, 3) and k(h0, W, S=7).shape == (7, 3)  # not a plan of the first
    with pytest.raises(TcShapeError, match=r"size 'S' is not given: no input's shape determines it; give it "
                                           r"at the call \(steps\(\.\.\., S=\.\.\.\)\)"):
        k(h0, W)
    with pytest.raises(TcShapeError, match=r"'Q' is not a size of 'steps'"):
        k(h0, W, S=2, Q=1)
    with pytest.raises(TcShapeError, match=r"argument 'h0' dim 0: size 3, but size 'B' is 4 \(given at the call\)"):
        k(h0, W, S=2, B=4)
    with pytest.raises(TcShapeError, match=r"size 'S' is 3 at the call, but was fixed to 4 at compile time"):
        tcdsl.compile(STEPS, sizes={"S": 4})(h0, W, S=3)
    assert "free sizes: S" in ranges(STEPS)


def test_free_sizes_in_where_ranges_and_output_types():
    src = ("def f(float(N) x) -> (float(R, N) y, z) {\n  y(r, i) = x(i) * r where r in 0:R\n"
           "  z(k) = 1.5 where k in 0:Z\n}")
    x = rand(3)
    check(src, [x], (np.arange(4, dtype=np.float32)[:, None] * x, np.full(2, 1.5, np.float32)), R=4, Z=2)

def test_a_free_size_of_a_where_range_is_a_value_in_the_statement():
    # W bounds the window in the where range, so the W of the index and the
    # select is that size (a padded sliding window of 2W+1 taps), not a
    # reduction variable; a where bound may not use an lhs index all the same
    src = ("def f(float(N) x) -> (y) {\n"
           "  y(i, w) = (i + w - W >= 0 && i + w - W < N ? x(i + w - W) : 0) * W where i in 0:N, w in 0:2*W+1\n}")
    x = rand(5)
    for W in (1, 2):
        pad = np.concatenate([np.zeros(W), x, np.zeros(W)]).astype(np.float32)
        want = np.stack([pad[i:i + 2 * W + 1] for i in range(5)]) * W
        check(src, [x], want, W=W)
    assert "free sizes: W" in ranges(src)
    with pytest.raises(TcSemanticError, match="'i' is not a size or loop variable; a where-range"):
        tcdsl.compile("def f(float(N) x) -> (y) {\n  y(i, j) = x(i) where i in 0:N, j in 0:i\n}")



def test_cli_run_takes_free_sizes(tmp_path, capsys):
    path = tmp_path / "steps.tc"
    path.write_text(STEPS)
    assert main(["run", str(path), "--sizes", "S=5,B=3"]) == 0
    assert capsys.readouterr().out.startswith("h: shape (5, 3) float32")
    assert main(["run", str(path), "--sizes", "B=3"]) == 1
    assert "--sizes is missing S" in capsys.readouterr().err


# --------------------------------------------------------- X.k as a size
def test_dim_sizes_in_where_ranges_and_loop_bounds():
    src = ("def f(float(N, K) A, float(K) w) -> (y, z) {\n  y(n) +=! A(n, k) * w(k) where k in 0:A.1 - 1\n"
           "  for t in 1:A.0 { z(t) = A(t, 0) + A(t - 1, 0) }\n}")
    A, w = rand(4, 3), rand(3)
    z = np.concatenate([[0], A[1:, 0] + A[:-1, 0]]).astype(np.float32)
    check(src, [A, w], (A[:, :2] @ w[:2], z))


# ------------------------------------------------------ inf, -inf, nan
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_inf_and_nan_literals_take_the_type_of_their_context(dtype):
    name = {"float16": "half", "float32": "float", "float64": "double"}[dtype]
    src = (f"def f({name}(B, N) x) -> (m, y, z, w) {{\n  m(b) max=! x(b, j) < 0 ? x(b, j) : -inf\n"
           "  y(b) = x(b, 0) > 0 ? inf : x(b, 0)\n  z(b) = x(b, 0) > 0 ? nan : x(b, 0)\n  w(b) = -inf where b in 0:B\n}")
    x = rand(3, 4, dtype=dtype)
    x[1] = -60000  # below any finite stand-in (like -1e30, which is -inf in float16)
    x[2] = np.abs(x[2])  # no negative value: the maximum of none is -inf
    neg = np.where(x < 0, x, -np.inf).astype(dtype)
    want = (neg.max(1), np.where(x[:, 0] > 0, np.inf, x[:, 0]).astype(dtype),
            np.where(x[:, 0] > 0, np.nan, x[:, 0]).astype(dtype), np.full(3, -np.inf, np.float32))
    for got in [evaluate(src, [x])] + [tcdsl.compile(src, specialize=m)(x) for m in MODES]:
        for g, w in zip(got, want):
            assert g.dtype == w.dtype  # like any float literal: float32 alone, else the other side's type
            np.testing.assert_array_equal(g, w)
    assert parse(to_tc(parse(src))) == parse(src)


# ------------------------------------------------------- argmax / argmin
def test_argmax_and_argmin_take_the_first_extreme():
    src = "def am(float(B, N) x) -> (i, k) {\n  i(b) argmax=! x(b, j)\n  k(b) argmin=! x(b, j) * 2 + 1\n}"
    x = rand(5, 7)
    x[1, 3] = x[1, 5] = 10
    x[2, 0] = x[2, 6] = -10
    check(src, [x], (x.argmax(1).astype(np.int32), x.argmin(1).astype(np.int32)))
    empty = tcdsl.compile("def am(float(B, N) x) -> (i) {\n  i(b) argmax=! x(b, j)\n}")(np.zeros((2, 0), np.float32))
    np.testing.assert_array_equal(empty, [-1, -1])
    with pytest.raises(TcSemanticError, match=r"'argmax=!' needs exactly one reduction variable"):
        tcdsl.compile("def f(float(B, N, M) x) -> (i) {\n  i(b) argmax=! x(b, j, k)\n}")


GREEDY = """
def greedy(float(V, H) emb, float(H, H) Wh, float(H, V) Wo, float(B, H) h0, int32(B) start) -> (tok) {
  for t in S {
    if t == 0 { h(t, b, j) +=! h0(b, k) * Wh(k, j) }
    else      { h(t, b, j) +=! h(t - 1, b, k) * Wh(k, j) }
    if t == 0 { h(t, b, j) = tanh(h(t, b, j) + emb(start(b), j)) }
    else      { h(t, b, j) = tanh(h(t, b, j) + emb(tok(t - 1, b), j)) }
    logit(b, v) +=! h(t, b, j) * Wo(j, v)
    tok(t, b) argmax=! logit(b, v)
  }
}"""


@pytest.mark.slow
def test_greedy_decoding_feeds_argmax_back_into_an_embedding():
    V, H, B, S = 7, 5, 3, 6
    emb, Wh, Wo, h0 = rand(V, H), rand(H, H) / 2, rand(H, V), rand(B, H)
    start = np.array([0, 3, 6], np.int32)
    h, tok, toks = h0, start, []
    for _ in range(S):
        h = np.tanh(h @ Wh + emb[tok])
        tok = (h @ Wo).argmax(1).astype(np.int32)
        toks.append(tok)
    check(GREEDY, [emb, Wh, Wo, h0, start], np.stack(toks), S=S)


# ------------------------------------------------------------ narrowing
CAUSAL = """
def causal(float(L) x, float(K) w) -> (y) {
  y(t) +=! (t + k - K + 1 >= 0 ? x(t + k - K + 1) : 0) * w(k) where t in 0:L
}"""

CTC = """
def ctc(float(T, S) lp) -> (alpha) {
  for t in T {
    if t == 0 { alpha(t, s) = lp(t, s) }
    else      { alpha(t, s) = alpha(t - 1, s) + (s > 0 ? alpha(t - 1, s - 1) : 0) + lp(t, s) }
  }
}"""


def _warnings(src: str) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tcdsl.compile(src)
    return [str(w.message) for w in caught if issubclass(w.category, TcWarning)]


def test_a_causal_convolution_narrowed_to_one_tap_warns():
    (msg,) = _warnings(CAUSAL)
    assert msg.startswith("<string>:3:34: range inference narrows the reduction variable 'k' to [K - 1, K) "
                          "(for sizes "), msg
    assert "(here x(t + k - K + 1)); 'where k in 0:K' would widen it" in msg
    x, w = rand(6), rand(3)
    wide = CAUSAL.replace("where t in 0:L", "where t in 0:L, k in 0:K")
    assert _warnings(wide) == []
    xp = np.concatenate([np.zeros(2, np.float32), x])
    check(wide, [x, w], np.array([xp[t:t + 3] @ w for t in range(6)]))


def test_a_ctc_recursion_losing_its_first_column_warns():
    (msg,) = _warnings(CTC)
    assert msg.startswith("<string>:5:26: 'alpha' has elements no statement writes (for sizes "), msg
    assert re.search(r"alpha\(\d+, 0\)\): range inference gives 's' the range \[1, S\) here", msg)
    assert msg.endswith("'where s in 0:S' would widen it\n"
                        "    else      { alpha(t, s) = alpha(t - 1, s) + (s > 0 ? alpha(t - 1, s - 1) : 0) + lp(t, s) }\n"
                        "                         ^")
    fixed = CTC.replace("lp(t, s) }\n  }", "lp(t, s) where s in 0:S }\n  }")
    assert _warnings(fixed) == []
    lp = rand(4, 3)
    alpha = [lp[0]]
    for t in range(1, 4):
        prev = alpha[-1]
        alpha.append(prev + np.concatenate([[0], prev[:-1]]) + lp[t])
    check(fixed, [lp], np.stack(alpha).astype(np.float32), atol=1e-5)


DILATED = """
def gated(float(B,C,L) x, float(C,C,2) Wf) -> (y) {
  f(b, o, l) +=! (l + 2 * k - 2 >= 0 ? x(b, c, l + 2 * k - 2) : 0) * Wf(o, c, k)
  y(b, o, l) = tanh(f(b, o, l)) + x(b, o, l)
}"""


def test_a_temporary_narrowed_under_a_select_and_read_whole_warns():
    """A dilated causal convolution into a temporary: its read of ``x`` under
    the select narrows ``l`` to [2, L), and the next statement reads ``f``
    over all of [0, L).  The hint names the read dimension's size, not the
    inferred extent (a ``?:`` over the sizes)."""
    (msg,) = _warnings(DILATED)
    assert msg.startswith("<string>:3:11: 'f' has elements no statement writes (for sizes "), msg
    assert "range inference gives 'l' the range [2, L) here" in msg
    assert "'where l in 0:L' would widen it" in msg
    fixed = DILATED.replace("Wf(o, c, k)\n", "Wf(o, c, k) where l in 0:L, k in 0:2\n")
    assert _warnings(fixed) == []
    x, w = rand(2, 3, 7), rand(3, 3, 2)
    xp = np.concatenate([np.zeros((2, 3, 2), np.float32), x], axis=2)
    f = np.einsum("bcl,oc->bol", xp[:, :, :-2], w[:, :, 0]) + np.einsum("bcl,oc->bol", xp[:, :, 2:], w[:, :, 1])
    check(fixed, [x, w], np.tanh(f) + x, atol=1e-5)


def test_the_hint_is_the_size_of_the_dimension_read_under_the_select():
    """Two passes of a 5-tap blur: the output's rows are narrowed to [2, H - 2)
    and the hint says ``0:H`` (what zero padding means), not ``0:H - 2``."""
    src = """def blur(float(H,W) x, float(5) g) -> (y) {
  r(h, w) +=! (w + k - 2 >= 0 && w + k - 2 < W ? x(h, w + k - 2) : 0) * g(k) where w in 0:W, k in 0:5
  y(h, w) +=! (h + k - 2 >= 0 && h + k - 2 < H ? r(h + k - 2, w) : 0) * g(k)
}"""
    (msg,) = _warnings(src)
    assert "'y' has elements no statement writes" in msg and "'where h in 0:H' would widen it" in msg, msg


def test_the_hint_skips_a_dimension_read_at_a_quotient():
    """A CTC recursion over the blank-extended label, ``tgt(b, s / 2)`` under a
    select: the dimension read has ``L`` elements, but ``s`` is meant to
    cover ``2 * L + 1`` (the extent the first step writes), which the hint
    names (it said ``0:L`` before)."""
    src = """def ctc(float(B,T,C) logp, int32(B,L) tgt) -> (la) {
  for t in T {
    if t == 0 {
      la(t, b, s) = s < 2 ? logp(b, 0, s % 2 == 0 ? 0 : tgt(b, s / 2)) : -1e30 where s in 0:2*L+1
    } else {
      la(t, b, s) = la(t - 1, b, s) + logp(b, t, s % 2 == 0 ? 0 : tgt(b, s / 2))
    }
  }
}"""
    (msg,) = _warnings(src)
    assert "'la' has elements no statement writes" in msg and "'where s in 0:(2 * L) + 1' would widen it" in msg, msg


UPDATE = """def upd(float(N) e, float(N) u0) -> (u) {
  u(i) = u0(i)
  u(i) = u(i) + (i > 0 ? e(i - 1) : 5)
}"""


def test_an_update_narrowed_under_a_select_warns():
    """An update of a tensor written before: narrowed to [1, N) by its read
    under '?:', it leaves ``u(0)`` as the first statement wrote it -- no
    element is unwritten, yet the update meant every one.  The warning says
    so; with the where clause NumPy agrees."""
    (msg,) = _warnings(UPDATE)
    assert msg.startswith("<string>:3:5: this update of 'u' skips elements it would update with a wider range "
                          "(for sizes N="), msg
    assert ": u(0)), which keep their earlier values: range inference gives 'i' the range [1, N) here" in msg, msg
    assert msg.endswith("'where i in 0:N' would widen it\n  u(i) = u(i) + (i > 0 ? e(i - 1) : 5)\n    ^"), msg
    e, u0 = rand(5), rand(5)
    # as written (TC's rule), u(0) keeps u0(0)
    check(UPDATE, [e, u0], np.concatenate([u0[:1], u0[1:] + e[:-1]]).astype(np.float32))
    fixed = UPDATE.replace(": 5)\n", ": 5) where i in 0:N\n")
    assert _warnings(fixed) == []
    check(fixed, [e, u0], (u0 + np.concatenate([[5], e[:-1]])).astype(np.float32))
    # an accumulation (+= without '!') into the tensor, and a 2-D update whose dimension is read at a quotient
    acc = UPDATE.replace("u(i) = u(i) + (i > 0 ? e(i - 1) : 5)", "u(i) += i > 0 ? e(i - 1) : 5")
    (msg,) = _warnings(acc)
    assert "this update of 'u' skips elements" in msg and "'where i in 0:N' would widen it" in msg, msg
    prolong = """def pro(float(M, W) g, float(2 * M + 1, W) u0) -> (u) {
  u(i, j) = u0(i, j)
  u(i, j) = u(i, j) + (i % 2 == 1 ? g(i / 2, j) : 0.5 * ((i / 2 > 0 ? g(i / 2 - 1, j) : 0) + (i / 2 < M ? g(i / 2, j) : 0)))
}"""
    (msg,) = _warnings(prolong)
    assert "this update of 'u' skips elements" in msg and "range inference gives 'i' the range [" in msg, msg


def test_an_in_place_scan_that_adds_zero_where_narrowed_does_not_warn():
    """``cs(b, f) = cs(b, f) + (f > 0 ? cs(b, f - 1) : 0)``: where the read
    narrows ``f`` away the update would add 0, so nothing is lost."""
    src = """def scan(float(B,F) x) -> (cs) {
  cs(b, f) = x(b, f)
  for f1 in F { cs(b, f) = cs(b, f) + (f > 0 && f == f1 ? cs(b, f - 1) : 0) }
}"""
    assert _warnings(src) == []
    x = rand(3, 6)
    check(src, [x], np.cumsum(x, axis=1, dtype=np.float64).astype(np.float32), atol=1e-5)


def test_a_read_on_the_right_of_or_and_and_warns_as_under_a_select():
    """``||`` and ``&&`` evaluate their right side only where the left does
    not decide, so ``i == 0 || A(i - 1) > 0`` is a guard like ``?:``: the read
    narrows ``i`` to [1, N + 1) and leaves ``B(0)`` unwritten.  The warning
    names the operators; with the where clause NumPy agrees."""
    src = "def sel(float(N) A) -> (B) {\n  B(i) = i == 0 || A(i - 1) > 0 ? 1.0 : 0.0\n}"
    (msg,) = _warnings(src)
    assert msg.startswith("<string>:2:5: 'B' has elements no statement writes (for sizes "), msg
    assert "also a read on the right of '&&' or '||'; 'where i in 0:N' would widen it" in msg, msg
    fixed = src.replace("0.0\n", "0.0 where i in 0:N\n")
    assert _warnings(fixed) == []
    a = np.array([1, -1, 2, 0.5, -3], np.float32)
    check(fixed, [a], np.array([1.0] + [float(v > 0) for v in a[:-1]], np.float32))
    # a CTC collapse of repeats: keep(b, 0) was silently 0
    ctc = """def keepf(int32(B,T) best) -> (keep) {
  keep(b, t) = int32(best(b, t) != 0 && (t == 0 || best(b, t) != best(b, t - 1)))
}"""
    (msg,) = _warnings(ctc)
    assert "'keep' has elements no statement writes" in msg and "'where t in 0:T' would widen it" in msg, msg
    best = np.array([[1, 1, 0, 2, 2, 3], [0, 4, 4, 4, 0, 4]], np.int32)
    want = (best != 0) & np.concatenate([np.ones((2, 1), bool), best[:, 1:] != best[:, :-1]], axis=1)
    got = tcdsl.compile(ctc.replace("))\n}", ")) where t in 0:T\n}"))(best)
    np.testing.assert_array_equal(got, want.astype(np.int32))


LATE_READ = """def dec(float(T,B,H) x, float(E+H) w) -> (y) {
  for t in T {
    if t > 0 { a(b) +=! s(b, k) * w(E + k) where b in 0:B }
    s(b, j) = x(t, b, j) + a(b)
    y(t, b) = a(b)
  }
}"""


def test_a_read_before_the_write_in_a_loop_bounds_the_sum():
    """``s`` is read at step t (its value from step t - 1) before the
    statement that writes it: the read still bounds ``k`` by ``s``'s shape
    (B, H), not only ``w(E + k)`` (which alone gives [-E, H), and every
    call was refused as reading ``s(0, -E)``)."""
    assert "S0 a: k in [0, H)" in tcdsl.compile(LATE_READ).frontend.ranges.dump().splitlines()
    T, B, H, E = 5, 2, 3, 4
    x, w = rand(T, B, H), rand(E + H)
    a, s, want = np.zeros(B), np.zeros((B, H)), []
    for t in range(T):
        if t > 0:
            a = s @ w[E:]
        s = x[t] + a[:, None]
        want.append(a)
    check(LATE_READ, [x, w], np.array(want, np.float32), atol=1e-5)


def test_a_sum_narrowed_to_no_term_at_all_warns():
    """A full convolution with the output range given and the taps not: the
    guarded read ``A(i - k)`` leaves ``k`` no value for most sizes (the
    output was all zeros without a word).  The warning says so; with
    ``k in 0:K`` NumPy's full convolution agrees."""
    src = ("def full(float(N) A, float(K) w) -> (B) {\n"
           "  B(i) +=! (i - k >= 0 && i - k < N ? A(i - k) : 0) * w(k) where i in 0:N + K - 1\n}")
    (msg,) = _warnings(src)
    assert msg.startswith("<string>:2:39: range inference narrows the reduction variable 'k' to an empty range "
                          "(for sizes "), msg
    assert "'where k in 0:K' would widen it" in msg, msg
    fixed = src.replace("0:N + K - 1", "0:N + K - 1, k in 0:K")
    assert _warnings(fixed) == []
    a, w = rand(5), rand(3)
    check(fixed, [a, w], np.convolve(a, w).astype(np.float32), atol=1e-5)


def test_an_empty_sum_is_blamed_on_the_variable_that_has_no_value():
    """At T = 1 the sum over ``t in 0:T - 1`` has no term; ``j`` keeps its
    whole range [0, J), so the guarded ``x(b, t, j + 0)`` is no reason to say
    that ``j`` was narrowed to an empty range (it used to)."""
    src = """def f(float(B,T,J) x, float(B,J) m) -> (s) {
  s(b) +=! (t >= 0 ? x(b, t, j + 0) : 0) * m(b, j) where t in 0:T-1
}"""
    assert _warnings(src) == []
    x, m = rand(2, 4, 3), rand(2, 3)
    check(src, [x, m], np.einsum("btj,bj->b", x[:, :3], m), atol=1e-5)


LM_LOSS = """def lm_loss(float(B,T,V) logits, int32(B,T) labels) -> (loss) {
  mx(b, t) max=! logits(b, t, v)
  se(b, t) +=! exp(logits(b, t, v) - mx(b, t))
  cnt +=! labels(b, t) != -100 ? 1.0 : 0.0 where t in 1:T
  loss +=! labels(b, t + 1) != -100 ? mx(b, t) + log(se(b, t)) - logits(b, t, labels(b, t + 1)) : 0
  loss = loss / cnt
}"""


def test_a_read_the_condition_also_makes_is_not_blamed_for_the_narrowing():
    """A causal language-model loss: ``labels(b, t + 1)`` in the condition is
    read for every term, so it is what narrows ``t`` to [0, T - 1), as the
    shifted labels mean.  The same read inside the guarded
    ``logits(b, t, labels(b, t + 1))`` (an indirect index, which bounds
    nothing) used to be blamed, with a hint (``where t in 0:T``) that reads
    past ``labels``; and at T = 1 'b' was said to be narrowed to an empty
    range.  No warning now; PyTorch's cross entropy agrees."""
    assert _warnings(LM_LOSS) == []
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    B, T, V = 3, 6, 7
    logits = rng.standard_normal((B, T, V)).astype(np.float32)
    labels = rng.integers(0, V, (B, T)).astype(np.int32)
    labels[0, 2] = labels[2, 5] = -100
    want = torch.nn.functional.cross_entropy(torch.from_numpy(logits[:, :-1]).reshape(-1, V).double(),
                                             torch.from_numpy(labels[:, 1:]).reshape(-1).long(),
                                             ignore_index=-100)
    np.testing.assert_allclose(tcdsl.compile(LM_LOSS)(logits, labels), want.item(), rtol=1e-5)


def test_a_temporary_hole_that_nothing_reads_does_not_warn():
    src = """def f(float(N) x) -> (y) {
  s(i) = (i >= 1 ? x(i - 1) : 0) + x(i + 1)
  y(i) = s(i) where i in 1:N - 1
}"""
    assert _warnings(src) == []


def test_intended_narrowing_does_not_warn():
    for src in ["def f(float(N) A) -> (B) {\n  B(i) = A(i - 1)\n}",  # TC's shift: no guard, B(0) stays 0
                "def f(float(N) A) -> (B) {\n  B(i) = A(i - 1) where i in 1:N\n}",
                "def f(float(N) A) -> (D) {\n  for t in 1:N - 1 { D(t) = A(t + 1) - A(t - 1) }\n}",
                "def f(float(N, K) A, float(K) w) -> (y) {\n  y(i) +=! A(i, k) * w(k + 1)\n}"]:
        assert _warnings(src) == [], src


def test_a_declared_sum_survives_the_signature_json_of_the_disk_cache():
    import json

    from tcdsl.runtime.signature import Linear, Signature
    k = tcdsl.compile(LSTM)
    sig = Signature.from_json(json.loads(json.dumps(k.signature.to_json())))
    assert sig == k.signature
    assert sig.inputs[1].dims == (Linear("4 * H", (("H", 4),), 0), "I")


def test_branches_over_the_sizes_each_infer_their_own_ranges():
    """An ``if`` over the sizes whose branches write the same output: a read
    of it in the second branch (``h(t - 1, b, k)``) gets no range from the
    first branch's writes (made for other sizes); the ranges come from its
    own statements.  (It used to infer an empty range there and skip the
    statement.)"""
    src = """def f(float(T,B,I) x, float(B,H) h0, float(I,H) W, float(H,H) U) -> (h) {
      if B >= 4 {
        for t in T { h(t, b, j) = h0(b, j) }
      } else {
        p(b, t, j) +=! x(t, b, i) * W(i, j)
        for t in T {
          if t == 0 { p(b, t, j) += h0(b, k) * U(k, j) }
          else      { p(b, t, j) += h(t - 1, b, k) * U(k, j) }
          h(t, b, j) = tanh(p(b, t, j))
        }
      }
    }"""
    for B in (2, 5):
        rng = np.random.default_rng(B)
        x, h0 = rng.standard_normal((3, B, 4)), rng.standard_normal((B, 5))
        W, U = rng.standard_normal((4, 5)) * 0.5, rng.standard_normal((5, 5)) * 0.5
        if B >= 4:
            want = np.broadcast_to(h0, (3, B, 5))
        else:
            h, out = h0, []
            for t in range(3):
                h = np.tanh(x[t] @ W + h @ U)
                out.append(h)
            want = np.stack(out)
        check(src, [a.astype(np.float32) for a in (x, h0, W, U)], np.asarray(want, np.float32), atol=1e-5)


def test_a_statement_reading_its_own_tensor_runs_point_by_point():
    """docs/language.md, section 2: the points of a statement that reads other
    points of the tensor it writes run in lexicographic order, each seeing
    the points already written (a row divided by its own pivot)."""
    k = tcdsl.compile("def f(float(N, N) A) -> (M, S) {\n  M(i, j) = A(i, j)\n  M(i, j) = M(i, j) / M(i, i)\n"
                      "  S(i, j) = A(i, j)\n  S(i, j) = A(i, j) + (j > 0 ? S(i, j - 1) : 0)\n}")
    a = np.random.default_rng(0).uniform(1, 2, (6, 6)).astype(np.float32)
    m = a.astype(np.float64)
    for i in range(6):
        for j in range(6):
            m[i, j] = m[i, j] / m[i, i]
    got_m, got_s = k(a)
    np.testing.assert_allclose(got_m, m, rtol=1e-6)
    np.testing.assert_allclose(got_s, np.cumsum(a, axis=1), rtol=1e-5)
    with pytest.raises(tcdsl.TcSemanticError, match="needs a statement before it that writes 'S'"):
        tcdsl.compile("def f(float(N) A) -> (S) { S(i) = A(i) + (i > 0 ? S(i - 1) : 0) where i in 0:N }")


def test_a_guard_read_from_a_tensor_proves_no_read():
    """docs/language.md, operators: a select whose condition is a tensor's
    value proves nothing about the index it guards; the condition on the
    index, repeated in the select, does."""
    via_tensor = """def f(float(N) x, float(M) c) -> (ok, y) {
  ok(i) = i + 1 < N ? 1.0 : 0.0 where i in 0:M
  y(i) = ok(i) > 0.5 ? x(i + 1) : c(i) where i in 0:M
}"""
    with pytest.warns(TcWarning, match="'x' may be read out of bounds"):
        k = tcdsl.compile(via_tensor, options={"disk_cache": False})
    x = np.arange(1, 7, dtype=np.float32)
    np.testing.assert_array_equal(k(x, np.zeros(4, np.float32))[1], [2, 3, 4, 5])
    with pytest.raises(TcShapeError, match="'x' would be read out of bounds"):
        k(x, np.zeros(6, np.float32))
    repeated = via_tensor.replace("ok(i) > 0.5 ?", "i + 1 < N && ok(i) > 0.5 ?")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = tcdsl.compile(repeated, options={"disk_cache": False})
    _, y = k(x, -np.ones(6, np.float32))
    np.testing.assert_array_equal(y, [2, 3, 4, 5, 6, -1])


def test_a_statement_reading_its_own_points_needs_a_write_before_it_or_a_loop():
    # docs/language.md, section 2: alone at the top level it is refused; inside
    # a ``for`` it is a running sum per step
    alone = """def cs(float(N) A) -> (S) {
  S(i) = A(i) + (i > 0 ? S(i - 1) : 0) where i in 0:N
}"""
    with pytest.raises(tcdsl.TcError, match="'S' is read before it is written.*'for' loop"):
        tcdsl.compile(alone)
    looped = """def cs(float(T,N) A) -> (O) {
  for t in T {
    S(i) = A(t, i) + (i > 0 ? S(i - 1) : 0) where i in 0:N
    O(t, i) = S(i)
  }
}"""
    k = tcdsl.compile(looped, options={"disk_cache": False})
    a = np.random.default_rng(3).standard_normal((4, 9)).astype(np.float32)
    np.testing.assert_allclose(k(a), np.cumsum(a.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)
