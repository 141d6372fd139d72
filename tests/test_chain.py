"""A sum of a product of three or more factors computed as a chain of two
sums with fewer loops (polyhedral/chain.py, option ``chain``): which sums
split and which stay, the loops the kernel runs, and results against NumPy
(float64 references) in every specialize mode."""
import numpy as np
import pytest

import tcdsl
from tcdsl import driver

MODES = ("never", "after-scheduling", "before-scheduling")

LORA = """
def lora(float(B,I) x, float(O,I) W, float(I,R) A, float(R,O) Bm) -> (y) {
  y(b, o) +=! x(b, i) * W(o, i)
  y(b, o) += x(b, i) * A(i, r) * Bm(r, o)
}
"""

LUONG = """
def luong(float(B,I) h, float(I,J) W, float(B,T,J) enc) -> (s) {
  s(b, t) +=! h(b, i) * W(i, j) * enc(b, t, j) / 2
}
"""

CHAIN4 = """
def c4(float(M,K) a, float(K,L) b, float(L,P) c, float(P,N) d) -> (y) {
  y(i, n) +=! a(i, k) * b(k, l) * c(l, p) * d(p, n)
}
"""

# Luong's "general" score in a decoder loop: the chain inside a ``for``,
# in both branches of an ``if``, reading the loop's state
DECODER = """
def dec(float(B,S,H) enc, float(B,H) h0, float(H,H) Wa, float(H,H) U) -> (h) {
  for t in T {
    if t == 0 { sc(b, s) +=! h0(b, i) * Wa(i, j) * enc(b, s, j) }
    else      { sc(b, s) +=! h(t - 1, b, i) * Wa(i, j) * enc(b, s, j) }
    m(b) max=! sc(b, s)
    e(b, s) = exp(sc(b, s) - m(b))
    z(b) +=! e(b, s)
    ctx(b, j) +=! e(b, s) * enc(b, s, j) / z(b)
    p(b, j) +=! ctx(b, k) * U(k, j)
    h(t, b, j) = tanh(p(b, j))
  }
}
"""


def _r(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def chained(src):
    """The tensors of the frontend's program (the chain's temporaries among them)."""
    fe = driver.frontend(src)
    return sorted(fe.checked.tensors)


def test_the_chains_temporaries():
    assert "y_c" in chained(LORA)
    assert "s_c" in chained(LUONG)
    # a chain of four factors: two temporaries, three sums
    assert {"y_c", "y_c2"} <= set(chained(CHAIN4))
    assert {"sc_c", "sc_c2"} <= set(chained(DECODER))


@pytest.mark.parametrize("src", [
    # two factors: nothing to chain
    "def f(float(M,K) a, float(K,N) b) -> (y) {\n  y(i, j) +=! a(i, k) * b(k, j)\n}",
    # a bilinear form: summing i first leaves a sum over (b, o, j), as many loops
    "def f(float(B,I) x1, float(O,I,J) W, float(B,J) x2) -> (y) {\n  y(b, o) +=! x1(b, i) * W(o, i, j) * x2(b, j)\n}",
    # one reduction variable
    "def f(float(M,K) a, float(K,N) b, float(M) c) -> (y) {\n  y(i, j) +=! c(i) * a(i, k) * b(k, j)\n}",
    # a max, not a sum
    "def f(float(B,I) x, float(I,R) a, float(R,O) b) -> (y) {\n  y(n, o) max=! x(n, i) * a(i, r) * b(r, o)\n}",
    # an integer sum
    "def f(int32(B,I) x, int32(I,R) a, int32(R,O) b) -> (y) {\n  y(n, o) +=! x(n, i) * a(i, r) * b(r, o)\n}",
    # a sum of terms, not a product
    "def f(float(B,I) x, float(I,R) a, float(R,O) b) -> (y) {\n  y(n, o) +=! x(n, i) * a(i, r) + b(r, o)\n}",
    # an elementwise product summed (batch norm's dgamma, channels-last): summing (n, h) first into
    # (c, w) has as many loops and no matrix product, and runs down the tensors' rows
    "def f(float(N,H,W,C) dy, float(N,H,W,C) x, float(C) m, float(C) r) -> (g) {\n"
    "  g(c) +=! dy(n, h, w, c) * (x(n, h, w, c) - m(c)) * r(c)\n}",
])
def test_sums_that_stay_as_written(src):
    fe = driver.frontend(src)
    assert not [t for t in fe.checked.tensors if t.endswith("_c")]


def test_option_off_keeps_the_program():
    fe = driver.frontend(LORA, chain=False)
    assert "y_c" not in fe.checked.tensors


def test_fewer_loops():
    """Every statement of the chained programs runs three loops or fewer
    (two and a reduction), none the four or five of the sums as written."""
    for src, loops in ((LORA, 4), (LUONG, 4), (CHAIN4, 5)):
        off = driver.frontend(src, chain=False).ranges.stmts
        on = driver.frontend(src).ranges.stmts
        assert max(len(st.vars) for st in off) == loops
        assert max(len(st.vars) for st in on) == 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sizes", [dict(B=3, I=5, O=7, R=2), dict(B=1, I=1, O=1, R=1), dict(B=17, I=33, O=9, R=4)])
def test_lora_matches_numpy(mode, sizes):
    rng = np.random.default_rng(sum(sizes.values()))
    B, I, O, R = sizes["B"], sizes["I"], sizes["O"], sizes["R"]
    x, W, A, Bm = _r(rng, B, I), _r(rng, O, I), _r(rng, I, R), _r(rng, R, O)
    got = tcdsl.compile(LORA, specialize=mode)(x, W, A, Bm)
    x, W, A, Bm = (a.astype(np.float64) for a in (x, W, A, Bm))
    np.testing.assert_allclose(got, x @ W.T + x @ A @ Bm, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_luong_and_chain4_match_numpy(mode):
    rng = np.random.default_rng(1)
    h, W, enc = _r(rng, 3, 6), _r(rng, 6, 5), _r(rng, 3, 4, 5)
    got = tcdsl.compile(LUONG, specialize=mode)(h, W, enc)
    want = np.einsum("bi,ij,btj->bt", *(a.astype(np.float64) for a in (h, W, enc))) / 2
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    a, b, c, d = _r(rng, 5, 3), _r(rng, 3, 7), _r(rng, 7, 2), _r(rng, 2, 6)
    got = tcdsl.compile(CHAIN4, specialize=mode)(a, b, c, d)
    a, b, c, d = (v.astype(np.float64) for v in (a, b, c, d))
    np.testing.assert_allclose(got, a @ b @ c @ d, rtol=1e-4, atol=1e-4)


def decoder_reference(enc, h0, Wa, U, T):
    enc, h, Wa, U = (a.astype(np.float64) for a in (enc, h0, Wa, U))
    out = []
    for _ in range(T):
        sc = np.einsum("bi,ij,bsj->bs", h, Wa, enc)
        e = np.exp(sc - sc.max(1, keepdims=True))
        ctx = np.einsum("bs,bsj->bj", e / e.sum(1, keepdims=True), enc)
        h = np.tanh(ctx @ U)
        out.append(h)
    return np.stack(out)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_decoder_loop_matches_numpy(mode):
    rng = np.random.default_rng(2)
    B, S, H, T = 3, 5, 8, 4
    enc, h0, Wa, U = _r(rng, B, S, H), _r(rng, B, H), _r(rng, H, H) * 0.3, _r(rng, H, H) * 0.3
    got = tcdsl.compile(DECODER, specialize=mode)(enc, h0, Wa, U, T=T)
    np.testing.assert_allclose(got, decoder_reference(enc, h0, Wa, U, T), rtol=1e-4, atol=1e-5)


def test_window_sums_chain_only_where_the_terms_are_the_same():
    """``x(i + j)`` ties ``i`` and ``j``: a chain over ``k`` keeps the terms
    (the window's sum reads the temporary at ``j``), and the result matches."""
    src = """
def f(float(N) x, float(J,K) w, float(K) v) -> (y) {
  y(i) +=! x(i + j) * w(j, k) * v(k)
}"""
    rng = np.random.default_rng(3)
    x, w, v = _r(rng, 9), _r(rng, 4, 3), _r(rng, 3)
    got = tcdsl.compile(src)(x, w, v)
    u = w.astype(np.float64) @ v
    want = np.array([sum(x[i + j] * u[j] for j in range(4)) for i in range(9 - 4 + 1)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "y_c" in driver.frontend(src).checked.tensors


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_no_chain_through_a_narrower_or_integer_temporary(mode):
    # int8 (and half) factors would be summed in an int8 (half) temporary;
    # ``i / 2`` is floor division, no factor ``i`` over 2
    src = """def f(int8(B,I) x, int8(I,R) A, float(R,O) Bm, float(B,I) u, float(I,R) v) -> (y, z) {
      y(b, o) +=! x(b, i) * A(i, r) * Bm(r, o)
      z(b, o) +=! u(b, i) * v(i, r) * Bm(r, o) * (i / 2)
    }"""
    assert "y_c" not in chained(src) and "z_c" not in chained(src)
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(3)
    x, A = rng.integers(-9, 9, (2, 40)).astype(np.int8), rng.integers(-9, 9, (40, 3)).astype(np.int8)
    Bm, u, v = _r(rng, 3, 5), _r(rng, 2, 40), _r(rng, 40, 3)
    y, z = k(x, A, Bm, u, v)
    f8 = np.float64
    np.testing.assert_allclose(y, (x.astype(f8) @ A.astype(f8)) @ Bm.astype(f8), rtol=1e-4, atol=1e-3)
    want = np.einsum("bi,ir,ro,i->bo", u.astype(f8), v.astype(f8), Bm.astype(f8), np.arange(40) // 2)
    np.testing.assert_allclose(z, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_a_sum_indexed_by_the_loop_variable_of_its_for(mode):
    """``y(t, o)`` inside ``for t``: the loop's variable has no range in the
    statement (planning the chain raised a KeyError)."""
    src = ("def cl(float(T, I) x, float(I, R) A, float(R, O) Bm) -> (y) {\n"
           "  for t in T { y(t, o) +=! x(t, i) * A(i, r) * Bm(r, o) }\n}")
    rng = np.random.default_rng(4)
    x, A, Bm = (rng.standard_normal(s).astype(np.float32) for s in [(3, 5), (5, 2), (2, 7)])
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    np.testing.assert_allclose(k(x, A, Bm), x.astype(np.float64) @ A @ Bm, rtol=1e-5, atol=1e-5)


QUADRATIC = """
def quad(float(B,N) x, float(N,N) A) -> (q) {
  q(b) +=! x(b, i) * A(i, j) * x(b, j)
}
"""


def test_a_quadratic_form_becomes_a_matrix_product_then_a_dot():
    # as many loops either way, but the first sum is a product of two factors
    # with two output dimensions (register tiles), the second a cheap dot
    fe = driver.frontend(QUADRATIC)
    assert "q_c" in fe.checked.tensors
    assert len(fe.ranges.extent_exprs("q_c")) == 2
    assert max(len(st.vars) for st in fe.ranges.stmts) == 3
    # a batched form keeps its batch: q_c(b, j) +=! x(b, i) * A(b, i, j)
    batched = "def f(float(B,N) x, float(B,N,N) A) -> (q) {\n  q(b) +=! x(b, i) * A(b, i, j) * x(b, j)\n}"
    assert "q_c" in driver.frontend(batched).checked.tensors


@pytest.mark.parametrize("mode", MODES)
def test_quadratic_form_matches_numpy(mode):
    k = tcdsl.compile(QUADRATIC, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(5)
    for B, N in [(1, 1), (3, 5), (9, 34)]:
        x, A = rng.standard_normal((B, N)), rng.standard_normal((N, N))
        got = k(x.astype(np.float32), A.astype(np.float32))
        np.testing.assert_allclose(got, np.einsum("bi,ij,bj->b", x, A, x), rtol=1e-4, atol=1e-4)


# the inside algorithm of a grammar in Chomsky normal form: the sum reads the
# tensor it writes, at spans shorter than the one it writes (m < w, w - 1 - m < w)
INSIDE = """def inside(float(B,L,N) pre, float(N,N,N) R) -> (logz) {
  for w in L {
    if w == 0 { I(w, b, i, A) = pre(b, i, A) }
    else { I(w, b, i, A) +=! R(A, P, Q) * I(m, b, i, P) * I(w - 1 - m, b, i + m + 1, Q) where m in 0:w, i in 0:L-w }
  }
  logz(b) = log(I(L-1, b, 0, 0))
}"""


def _inside(pre, R):
    B, L, N = pre.shape
    pre, R = pre.astype(np.float64), R.astype(np.float64)
    chart = np.zeros((L, B, L, N))
    chart[0] = pre
    for w in range(1, L):
        for i in range(L - w):
            for m in range(w):
                chart[w, :, i] += np.einsum("apq,bp,bq->ba", R, chart[m, :, i], chart[w - 1 - m, :, i + m + 1])
    return np.log(chart[L - 1, :, 0, 0])


@pytest.mark.parametrize("mode", MODES)
def test_a_sum_reading_its_own_tensor_apart_from_what_it_writes_is_chained(mode):
    """The split point ``m`` first (``I_c(w, b, i, P, Q)``, then the rule's
    ``R(A, P, Q)``): B L^2 N^2 (L + N) terms, not B L^3 N^3.  The first sum
    runs before the statement starts, so it may read the tensor only where
    the statement writes nothing (polyhedral/chain.py, ``_apart``)."""
    from tcdsl.syntax import nodes as n

    fe = driver.frontend(INSIDE)
    firsts = [c for c in n.walk(fe.checked.node) if isinstance(c, n.Comprehension) and c.tensor.startswith("I_c")]
    assert [[x.name for x in c.indices] for c in firsts] == [["w", "b", "i", "P", "Q"]], firsts
    k = tcdsl.compile(INSIDE, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(5)
    for B, L, N in [(2, 5, 3), (1, 1, 2), (3, 7, 4)]:
        pre, R = rng.random((B, L, N)).astype(np.float32), (rng.random((N, N, N)) / N).astype(np.float32)
        np.testing.assert_allclose(k(pre, R), _inside(pre, R), rtol=1e-4, atol=1e-5)


def test_a_sum_reading_the_elements_it_writes_is_not_chained():
    src = """def f(float(N,N) A, float(N,N) Bm, float(N) yi) -> (y) {
  for t in T {
    if t == 0 { y(t, i) = yi(i) } else { y(t, i) +=! A(i, j) * Bm(j, k) * y(t, k) }
  }
}"""
    fe = driver.frontend(src)
    assert not [t for t in fe.checked.tensors if t.startswith("y_c")]


# a factorization machine's pairwise term written as users write it: a mask on the pair (i, j)
FM = """
def fm(float(B,N) x, float(N,N) G) -> (y) {
  y(b) +=! j > i ? G(i, j) * x(b, i) * x(b, j) : 0
}
"""
# the mask as a factor, over a factor's variables only, with the sum over a batch of rows
MASKED_FACTOR = """
def mf(float(B,I) x, float(I,R) A, float(R,O) Bm) -> (y) {
  y(b, o) +=! x(b, i) * (r <= i ? A(i, r) : 0.0) * Bm(r, o)
}
"""


def test_a_mask_over_one_factor_is_written_first_then_chained():
    """``j > i ? G(i, j) * x(b, i) * x(b, j) : 0``: the mask's variables are
    G's, so ``G`` masked becomes a temporary written first and the sum a
    chain over boxes (a matrix product, then a dot), where the select kept
    in the sum would cut it into triangles."""
    fe = driver.frontend(FM)
    assert {"y_m", "y_c"} <= set(fe.checked.tensors)
    assert len(fe.ranges.extent_exprs("y_m")) == 2 and len(fe.ranges.extent_exprs("y_c")) == 2
    assert max(len(st.vars) for st in fe.ranges.stmts) == 3
    assert {"y_m", "y_c"} <= set(chained(MASKED_FACTOR))
    assert {"y_m", "y_c"} <= set(chained(FM.replace("j > i", "j > N - 1 - i")))  # a size in the mask
    # no one factor has the mask's variables (x(b, i), x(b, j)): the select stays, no chain
    coupled = "def f(float(B,N) x, float(N) w) -> (y) {\n  y(b) +=! j > i ? x(b, i) * x(b, j) * w(j) : 0\n}"
    assert not [t for t in chained(coupled) if t.startswith("y_")]
    assert "y_m" not in driver.frontend(FM, chain=False).checked.tensors


@pytest.mark.parametrize("mode", MODES)
def test_masked_chains_match_numpy(mode):
    k_fm = tcdsl.compile(FM, specialize=mode, options={"disk_cache": False})
    k_mf = tcdsl.compile(MASKED_FACTOR, specialize=mode, options={"disk_cache": False})
    k_rev = tcdsl.compile(FM.replace("j > i", "j > N - 1 - i"), specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(9)
    for B, N, R, O in [(1, 1, 1, 1), (3, 5, 2, 4), (9, 34, 7, 5)]:
        x, G = rng.standard_normal((B, N)), rng.standard_normal((N, N))
        want = np.einsum("bi,ij,bj->b", x, np.triu(G, 1), x)
        np.testing.assert_allclose(k_fm(x.astype(np.float32), G.astype(np.float32)), want, rtol=1e-4, atol=1e-4)
        # a mask that names a size
        rev = k_rev(x.astype(np.float32), G.astype(np.float32))
        i, j = np.mgrid[:N, :N]
        np.testing.assert_allclose(rev, np.einsum("bi,ij,bj->b", x, np.where(j > N - 1 - i, G, 0), x),
                                   rtol=1e-4, atol=1e-4)
        A, Bm = rng.standard_normal((N, R)), rng.standard_normal((R, O))
        want = x @ np.tril(A) @ Bm
        got = k_mf(x.astype(np.float32), A.astype(np.float32), Bm.astype(np.float32))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
