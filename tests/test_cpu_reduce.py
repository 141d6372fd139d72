"""Reductions along an innermost loop run as vector iterations with partial
accumulators (codegen/cpu_reduce.py, option ``reduce_lanes``): a row's max
and sum (softmax, norms, cross entropy), full sums (losses), dot products.
Structure checked on the TIR, values against NumPy at sizes that leave
tails and several blocks, and the float32 rounding of a long sum against a
float64 reference."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl import driver
from helpers import LAYERNORM, SOFTMAX

NO_CACHE = {"disk_cache": False}


XENT = """
def xent(float(N,C) logit, int32(N) tgt) -> (loss) {
  mx(n) max=! logit(n, c)
  se(n) +=! exp(logit(n, c) - mx(n))
  loss +=! (log(se(n)) + mx(n) - logit(n, tgt(n))) / N
}
"""

FULL_SUM = """
def total(float(N) x) -> (s) {
  s +=! x(i)
}
"""

MINMAXPROD = """
def stats(float(N,C) x, int32(N,C) k) -> (lo, hi, pr, ks) {
  lo(n) min=! x(n, c)
  hi(n) max=! x(n, c)
  pr(n) *=! 1 + x(n, c) / 64
  ks(n) +=! k(n, c)
}
"""

SCORES = """
def scores(float(M,D) q, float(L,D) kk) -> (sc) {
  sc(i, j) +=! q(i, d) * kk(j, d)
}
"""

SIZES = [1, 5, 16, 17, 31, 513, 1100]  # a tail only, whole vectors, tails, several blocks of lanes


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_row_reductions_get_partial_accumulators_in_vector_lanes():
    script = tcdsl.compile(SOFTMAX, options=NO_CACHE).script
    assert "mx_lanes = T.alloc_buffer((16,))" in script
    assert "s_lanes = T.alloc_buffer((16,))" in script
    assert re.search(r"mx_lanes\[(c\d)_v\] = T\.max\(mx_lanes\[\1_v\], x\[", script)
    # the map statement of the same loop (e, computed in the output y: polyhedral/inplace.py) is
    # stored by the same vector iterations
    assert re.search(r"y\[c0, \((c\d)_b \* 32 \+ \1_o\) \* 16 \+ \1_v\] =", script)
    written = tcdsl.compile(SOFTMAX, options={**NO_CACHE, "inplace": False}).script
    assert re.search(r"e\[c0, \((c\d)_b \* 32 \+ \1_o\) \* 16 \+ \1_v\] =", written)
    scalar = tcdsl.compile(SOFTMAX, options={**NO_CACHE, "reduce_lanes": 0}).script
    assert "_lanes" not in scalar


def test_lanes_fold_by_vector_halves():
    """A float row's 16 partial sums fold as vectors, lane i with lane i + 8,
    then i + 4, ...: four vector steps, not 15 lanes extracted and added
    alone (a short sum per output, ``s(k) +=! x(ii(k), d)`` at D = 16: 12.6
    -> 10.1 ms at 2.1 M outputs on the Intel Xeon); integer sums keep the
    scalar tree.  Results against NumPy in test_softmax_and_layer_norm_...
    and test_min_max_product_... below."""
    script = tcdsl.compile(SOFTMAX, options=NO_CACHE).script
    for width in (16, 8, 4, 2):
        assert f"s_lanes_{width} = T.float32x{width}()" in script, script
        assert f"mx_lanes_{width} = T.float32x{width}()" in script, script
    ints = tcdsl.compile(MINMAXPROD, options=NO_CACHE).script
    assert "ks_lanes_16" not in ints and "ks_lanes[15]" in ints


def test_the_number_of_lanes_is_an_option():
    script = tcdsl.compile(SOFTMAX, options={**NO_CACHE, "reduce_lanes": 8}).script
    assert "s_lanes = T.alloc_buffer((8,))" in script
    with pytest.raises(tcdsl.TcError, match="reduce_lanes"):
        tcdsl.compile(SOFTMAX, options={"reduce_lanes": -1})


@pytest.mark.parametrize("lanes", [16, 8, 3])
def test_softmax_and_layer_norm_match_numpy(lanes):
    sm = tcdsl.compile(SOFTMAX, options={**NO_CACHE, "reduce_lanes": lanes})
    ln = tcdsl.compile(LAYERNORM, options={**NO_CACHE, "reduce_lanes": lanes})
    rng = np.random.default_rng(1)
    for c in SIZES:
        x = (rng.standard_normal((3, c)) * 4).astype(np.float32)
        np.testing.assert_allclose(sm(x), _softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)
        g, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
        xd = x.astype(np.float64)
        ref = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * g + b
        np.testing.assert_allclose(ln(x, g, b), ref, rtol=1e-4, atol=1e-4)


def test_cross_entropy_matches_numpy():
    k = tcdsl.compile(XENT, options=NO_CACHE)
    assert "se_lanes" in k.script
    rng = np.random.default_rng(2)
    for n, c in [(1, 1), (7, 17), (64, 1100)]:
        x = (rng.standard_normal((n, c)) * 3).astype(np.float32)
        t = rng.integers(0, c, n).astype(np.int32)
        xd = x.astype(np.float64)
        lse = np.log(np.exp(xd - xd.max(1, keepdims=True)).sum(1)) + xd.max(1)
        np.testing.assert_allclose(k(x, t), np.mean(lse - xd[np.arange(n), t]), rtol=1e-5)


def test_min_max_product_and_integer_sums_match_numpy():
    k = tcdsl.compile(MINMAXPROD, options=NO_CACHE)
    assert all(f"{t}_lanes" in k.script for t in ("lo", "hi", "pr", "ks"))
    rng = np.random.default_rng(3)
    for c in SIZES:
        x = rng.standard_normal((4, c)).astype(np.float32)
        ki = rng.integers(-1000, 1000, (4, c)).astype(np.int32)
        lo, hi, pr, ks = k(x, ki)
        np.testing.assert_array_equal(lo, x.min(1))
        np.testing.assert_array_equal(hi, x.max(1))
        np.testing.assert_allclose(pr, np.prod(1 + x.astype(np.float64) / 64, axis=1), rtol=1e-5)
        np.testing.assert_array_equal(ks, ki.sum(1))


def test_dot_products_along_the_contiguous_dimension_match_numpy():
    k = tcdsl.compile(SCORES, options=NO_CACHE)
    rng = np.random.default_rng(4)
    for m, l, d in [(3, 5, 1), (9, 7, 17), (5, 33, 600)]:
        q, kk = rng.standard_normal((m, d)).astype(np.float32), rng.standard_normal((l, d)).astype(np.float32)
        np.testing.assert_allclose(k(q, kk), q.astype(np.float64) @ kk.T.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_a_long_float32_sum_is_accurate():
    """2^22 values of one sign in float32: one accumulator drifts (each add
    rounds against the whole running sum); lanes combined per block keep the
    error near NumPy's pairwise sum."""
    x = np.random.default_rng(5).uniform(0.5, 1.5, 1 << 22).astype(np.float32)
    exact = float(np.sum(x.astype(np.float64)))
    lanes = float(tcdsl.compile(FULL_SUM, options=NO_CACHE)(x))
    serial = float(tcdsl.compile(FULL_SUM, options={**NO_CACHE, "reduce_lanes": 0})(x))
    assert abs(lanes - exact) / exact < 3e-7  # NumPy's pairwise sum: 5e-8
    assert abs(serial - exact) / exact > 10 * abs(lanes - exact) / exact  # what the lanes are for


MSE = """def mse(float(N,C) x, float(N,C) y) -> (loss) {
  loss +=! (x(n, c) - y(n, c)) * (x(n, c) - y(n, c)) / (N * C)
}"""

MAX_ABS = """def mabs(float(N,C) x) -> (m) {
  m max=! fabs(x(n, c))
}"""


@pytest.mark.parametrize("threads", [2, 3])
def test_a_reduction_of_a_whole_tensor_shares_its_blocks_among_threads(threads):
    """A loss over a whole tensor (no loop of the kernel around it): each
    thread sums its share of the vector blocks into its own total, the
    totals are combined in thread order (float64 for a float32 sum); below
    SHARED_MIN elements per thread the calling thread sums them all."""
    opts = {**NO_CACHE, "cpu_threads": threads}
    k, m = tcdsl.compile(MSE, options=opts), tcdsl.compile(MAX_ABS, options=opts)
    for kern in (k, m):
        assert f"T.parallel({threads})" in kern.script and "_threads = T.alloc_buffer" in kern.script
    rng = np.random.default_rng(3)
    # below SHARED_MIN elements per thread (one thread), just above it, many blocks
    for N, C in [(1, 1), (1, 17), (3, 200), (1, 16384 * threads + 1), (37, 1000), (1000, 333)]:
        x, y = rng.standard_normal((N, C)).astype(np.float32), rng.standard_normal((N, C)).astype(np.float32)
        d = x.astype(np.float64) - y
        np.testing.assert_allclose(k(x, y), np.mean(d * d), rtol=1e-5)
        np.testing.assert_array_equal(m(x), np.abs(x).max())


def test_a_reduction_inside_a_loop_is_not_shared_out():
    """Inside a row's loop (isl's fused cross entropy) or a sequential ``for``
    a parallel region per row or step would cost more than it saves."""
    rows = tcdsl.compile("""def f(float(N,C) x) -> (s) {
  mx(n) max=! x(n, c)
  s +=! mx(n)
}""", options={**NO_CACHE, "fusion": "isl"})
    steps = tcdsl.compile("""def g(float(T,C) x) -> (s) {
  for t in T {
    s(t) +=! x(t, c) * x(t, c)
  }
}""", options=NO_CACHE)
    for kern in (rows, steps):
        assert "_threads = T.alloc_buffer" not in kern.script
    x = np.random.default_rng(4).standard_normal((9, 300)).astype(np.float32)
    np.testing.assert_allclose(rows(x), x.max(1).sum(), rtol=1e-5)
    np.testing.assert_allclose(steps(x), (x.astype(np.float64) ** 2).sum(1), rtol=1e-5)


@pytest.mark.slow
def test_shared_out_reductions_stay_inside_their_tensors():
    import guard  # tests/guard.py: guard pages before and after every tensor

    cases = [{"id": f"shared:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([(MSE, {"N": 3, "C": 171}), (MSE, {"N": 2, "C": 16411}),
                                               (MAX_ABS, {"N": 33, "C": 517})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


ARGS = """
def args(float(N,C) x, int32(N,C) k) -> (amax, amin, kmax) {
  amax(n) argmax=! x(n, c)
  amin(n) argmin=! x(n, c)
  kmax(n) argmax=! k(n, c)
}
"""


def _sequential_arg(row, better):
    """docs/language.md step 13, one element at a time: the index held
    becomes j where nothing is held yet or e(j) is strictly better."""
    cur = -1
    for j, v in enumerate(row):
        if cur < 0 or better(v, row[cur]):
            cur = j
    return cur


def _nasty_rows(rng, c):
    """Rows with many ties, NaNs (first, in other lanes, everywhere) and infinities."""
    rows = [rng.integers(-3, 4, c).astype(np.float32), rng.standard_normal(c).astype(np.float32),
            np.full(c, np.nan, np.float32), np.full(c, 2.0, np.float32)]
    r = rng.integers(-2, 3, c).astype(np.float32)
    r[:1] = np.nan
    rows.append(r)
    r = rng.standard_normal(c).astype(np.float32)
    r[rng.random(c) < 0.3] = np.nan
    rows.append(r)
    r = rng.standard_normal(c).astype(np.float32)
    r[rng.random(c) < 0.2] = np.inf
    r[rng.random(c) < 0.2] = -np.inf
    rows.append(r)
    return np.stack(rows) if c else np.zeros((len(rows), 0), np.float32)


@pytest.mark.parametrize("lanes", [16, 3])
def test_argmax_and_argmin_run_in_vector_lanes_and_keep_the_first_extreme(lanes):
    """Each lane keeps the value and index of its best element; blocks of
    lanes are folded in index order.  Against the one-at-a-time rule, with
    ties, NaNs in every position and infinities, at lengths that leave
    tails and several blocks."""
    k = tcdsl.compile(ARGS, options={**NO_CACHE, "reduce_lanes": lanes})
    assert all(f"{t}_lv = T.alloc_buffer(({lanes},)" in k.script for t in ("amax", "amin", "kmax"))
    rng = np.random.default_rng(5)
    for c in [0] + SIZES:
        x = _nasty_rows(rng, c)
        ki = rng.integers(-3, 4, x.shape).astype(np.int32)
        amax, amin, kmax = k(x, ki)
        for i in range(x.shape[0]):
            assert amax[i] == _sequential_arg(x[i], lambda a, b: a > b), (c, i)
            assert amin[i] == _sequential_arg(x[i], lambda a, b: a < b), (c, i)
            assert kmax[i] == _sequential_arg(ki[i], lambda a, b: a > b), (c, i)
        finite = ~np.isnan(x).any(1)
        if c:
            np.testing.assert_array_equal(amax[finite], x[finite].argmax(1))
            np.testing.assert_array_equal(amin[finite], x[finite].argmin(1))


TOPK = """
def topk(float(Q,N) d) -> (kd, nbr) {
  for t in K {
    if t == 0 {
      kd(t, q) min=! d(q, n)
      nbr(q, t) argmin=! d(q, n)
    } else {
      kd(t, q) min=! d(q, n) > kd(t - 1, q) ? d(q, n) : inf
      nbr(q, t) argmin=! d(q, n) > kd(t - 1, q) ? d(q, n) : inf
    }
  }
}
"""


def test_masked_passes_that_read_the_previous_pass_run_in_vector_lanes():
    """The K smallest by K masked passes (there is no top-k): the min at
    step t reads ``kd(t - 1, q)``, an element of its own tensor that the loop
    over n does not write, so it too runs in lanes (it ran one element at a
    time: a k-nearest-neighbour search 4.7x torch.topk).  NumPy's sort
    agrees on distinct values."""
    k = tcdsl.compile(TOPK, options=NO_CACHE)
    branch = k.script.split("if t >= 1:")[1].split("else:")[0]
    assert "kd_lanes" in branch and "nbr_lv" in branch, branch
    rng = np.random.default_rng(6)
    for q, n, kk in [(3, 5, 2), (4, 17, 5), (5, 1100, 8)]:
        d = rng.permutation(q * n).reshape(q, n).astype(np.float32)
        kd, nbr = k(d, K=kk)
        order = np.argsort(d, 1)[:, :kk]
        np.testing.assert_array_equal(nbr, order)
        np.testing.assert_array_equal(kd, np.take_along_axis(d, order, 1).T)


# the per-class weight read first: the reduction variables appear as (c, n)
WEIGHTED = """
def wsum(float(N,C) x, float(N,C) y, float(C) w) -> (loss) {
  loss +=! w(c) * y(n, c) + x(n, c)
}
"""


def test_the_reduction_variable_of_the_last_indices_is_innermost():
    """TC leaves a sum's order open: the variable that most reads have in
    their last index is summed innermost, in vector lanes along the rows
    (as written, ``c`` outermost, the vectors read ``x`` and ``y`` a row
    apart, 5.8x slower)."""
    fe = driver.frontend(WEIGHTED)
    (st,) = [s for s in fe.checked.node.body if getattr(s, "tensor", None) == "loss"]
    assert st.reduction_vars == ("n", "c")
    k = tcdsl.compile(WEIGHTED, options=NO_CACHE)
    # (the rows ``n`` shared out among the threads: codegen/cpu_scalar_sums.py)
    assert re.search(r"y\[[^\[\]]*c0_o, \(c1_b \* 32 \+ c1_o\) \* 16 \+ c1_v\]", k.script), k.script
    rng = np.random.default_rng(11)
    for N, C in [(1, 1), (5, 37), (64, 300)]:
        x, y, w = (rng.standard_normal(s).astype(np.float32) for s in ((N, C), (N, C), (C,)))
        want = (w[None].astype(np.float64) * y + x).sum()
        np.testing.assert_allclose(k(x, y, w), want, rtol=1e-5, atol=1e-4)
    # a tie (each variable last in one read) keeps the order written
    tie = driver.frontend("def f(float(N,C) x, float(C,N) z) -> (s) { s +=! x(n, c) * z(c, n) }")
    (st,) = [s for s in tie.checked.node.body if getattr(s, "tensor", None) == "s"]
    assert st.reduction_vars == ("n", "c")


# a short vector's variable and a matrix's column both last in one read: the matrix's is innermost
MMD = """
def mmd(float(N,N) K, float(L) g) -> (s) {
  s +=! i != j ? exp(-g(l) * K(i, j)) : 0
}
"""


def test_of_two_variables_last_in_reads_the_one_of_the_larger_read_is_innermost():
    """``g(l)`` and ``K(i, j)`` each have a variable last: ``j``, of the
    matrix, is summed innermost, along ``K``'s rows in vector lanes, not
    ``l`` over the L = 3 values of ``g``."""
    fe = driver.frontend(MMD)
    (st,) = [s for s in fe.checked.node.body if getattr(s, "tensor", None) == "s"]
    assert st.reduction_vars[-1] == "j", st.reduction_vars
    k = tcdsl.compile(MMD, options=NO_CACHE)
    rng = np.random.default_rng(12)
    for N, L in [(1, 1), (7, 3), (40, 2)]:
        K, g = rng.random((N, N)).astype(np.float32), rng.random(L).astype(np.float32)
        e = np.exp(-g[:, None, None].astype(np.float64) * K[None].astype(np.float64))
        want = (e.sum(0) * (1 - np.eye(N))).sum()
        np.testing.assert_allclose(k(K, g), want, rtol=1e-5, atol=1e-5)
