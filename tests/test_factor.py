"""A sum's factors that do not depend on its reduction variables, applied
once after it (polyhedral/factor.py, option ``factor``): which sums are
rewritten and which stay, that the divisor leaves the reduction's inner
loop, and results against NumPy in every specialize mode."""
import numpy as np
import pytest

import guard
import tcdsl
from tcdsl import driver
from tcdsl.polyhedral import factor
from tcdsl.syntax import nodes as n

MODES = ("never", "after-scheduling", "before-scheduling")

CAUSAL = """
def causal(float(B,L,D) q, float(B,L,D) k, float(B,L,D) v) -> (o) {
  s(b, i, j) +=! q(b, i, d) * k(b, j, d) * rsqrt(float(D))
  mx(b, i) max=! j <= i ? s(b, i, j) : -inf
  e(b, i, j) = j <= i ? exp(s(b, i, j) - mx(b, i)) : 0
  z(b, i) +=! e(b, i, j)
  o(b, i, d) +=! e(b, i, j) * v(b, j, d) / z(b, i)
}
"""


def causal_reference(q, k, v):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = np.einsum("bid,bjd->bij", q, k) / np.sqrt(q.shape[-1])
    L = q.shape[1]
    s = np.where(np.tril(np.ones((L, L), bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bij,bjd->bid", e / e.sum(-1, keepdims=True), v)


def sums_of(src):
    fe = driver.frontend(src, factor=False)
    plan = factor.plan(fe.checked, fe.ranges)
    return sorted(c.tensor for c in n.walk(fe.checked.node) if isinstance(c, n.Comprehension) and c.span in plan)


def test_invariant_factors_are_found():
    assert sums_of(CAUSAL) == ["o", "s"]
    # a constant divisor, and a scale read at the written element
    assert sums_of("def f(float(N,C) x) -> (m) {\n  m(n) +=! x(n, c) / C\n}") == ["m"]
    assert sums_of("def f(float(M,K) a, float(K,N) b, float(M) c) -> (y) {\n"
                   "  y(i, j) +=! c(i) * a(i, k) * b(k, j) * 2.0\n}") == ["y"]


@pytest.mark.parametrize("src", [
    # every factor depends on the reduction variable
    "def f(float(M,K) a, float(K,N) b) -> (y) {\n  y(i, j) +=! a(i, k) * b(k, j)\n}",
    # a sum of terms, not a product
    "def f(float(M,K) a, float(M) c) -> (y) {\n  y(i) +=! a(i, k) + c(i)\n}",
    # the divisor depends on the reduction variable
    "def f(float(M,K) a, float(K) w, float(M) c) -> (y) {\n  y(i) +=! a(i, k) * c(i) / w(k)\n}",
    # a max, not a sum
    "def f(float(M,K) a, float(M) c) -> (y) {\n  y(i) max=! a(i, k) * c(i)\n}",
    # an integer sum (its division truncates)
    "def f(int32(M,K) a) -> (y) {\n  y(i) +=! a(i, k) / 2\n}",
    # a where clause on the written index that is not a range of sizes alone
    "def f(float(M,K) a, float(M) c) -> (y) {\n  y(i) +=! a(i, k) * c(i) where i in 1:M, exists c(i + 1)\n}",
    # inside a sequential loop, reading what it writes at the same step
    "def f(float(T,M,K) a, float(M) c) -> (y) {\n  for t in T {\n"
    "    y(t, i) +=! a(t, i, k) * c(i) * y(t, i) where i in 0:M\n  }\n}",
])
def test_sums_that_stay(src):
    assert sums_of(src) == []


def test_the_divisor_leaves_the_reduction():
    k = tcdsl.compile(CAUSAL, options={"disk_cache": False})
    tir = driver.emit(k, "tir")
    assert "/ z[" in tir
    reduction_lines = [ln for ln in tir.splitlines() if "acc[" in ln and ("v[" in ln or "v_packed[" in ln)]
    assert reduction_lines and not any("/ z[" in ln for ln in reduction_lines)
    unfactored = driver.emit(tcdsl.compile(CAUSAL, options={"disk_cache": False, "factor": False}), "tir")
    assert any("/ z[" in ln and ("v[" in ln or "v_packed[" in ln) for ln in unfactored.splitlines())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_results_against_numpy(mode):
    rng = np.random.default_rng(1)
    k = tcdsl.compile(CAUSAL, specialize=mode, options={"disk_cache": False})
    mean = tcdsl.compile("def f(float(N,C) x, float(N) w) -> (m) {\n  m(n) +=! w(n) * x(n, c) / C\n}",
                         specialize=mode, options={"disk_cache": False})
    for B, L, D in [(1, 1, 1), (2, 5, 3), (3, 19, 16)]:
        q, kk, v = (rng.standard_normal((B, L, D)).astype(np.float32) for _ in range(3))
        np.testing.assert_allclose(k(q, kk, v), causal_reference(q, kk, v), rtol=1e-4, atol=1e-5)
        x, w = rng.standard_normal((B * L, D)).astype(np.float32), rng.standard_normal(B * L).astype(np.float32)
        np.testing.assert_allclose(mean(x, w), w * x.astype(np.float64).mean(1), rtol=1e-5, atol=1e-6)


def test_factor_off_computes_the_same():
    rng = np.random.default_rng(2)
    q, kk, v = (rng.standard_normal((2, 33, 8)).astype(np.float32) for _ in range(3))
    on = tcdsl.compile(CAUSAL, options={"disk_cache": False})(q, kk, v)
    off = tcdsl.compile(CAUSAL, options={"disk_cache": False, "factor": False})(q, kk, v)
    np.testing.assert_allclose(on, off, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_an_integer_quotient_stays_in_the_sum(mode):
    # ``k / 3`` of int32 values is floor division: (0+0+0+1+1+1+2) / 1, not
    # (0+1+...+6) / 3; ``t(n, k) / 2`` of an int tensor likewise
    src = """def f(float(N,K) x, int32(N,K) t) -> (y, z) {
      y(n) +=! x(n, k) * (k / 3)
      z(n) +=! x(n, k) * (t(n, k) / 2)
    }"""
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    t = rng.integers(-9, 9, (3, 7)).astype(np.int32)
    y, z = k(x, t)
    np.testing.assert_allclose(y, (x.astype(np.float64) * (np.arange(7) // 3)).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z, (x.astype(np.float64) * (t // 2)).sum(1), rtol=1e-5, atol=1e-5)


RUNNING_MEAN = """def running_mean(float(B,T,D) x) -> (y) {
  y(b, t, d) +=! (s <= t ? x(b, s, d) : 0) / (t + 1) where s in 0:T, t in 0:T
}"""


@pytest.mark.parametrize("mode", MODES)
def test_a_range_of_sizes_for_an_lhs_variable_goes_with_its_factor(mode):
    """``where t in 0:T`` ranges an lhs variable that no read bounds: the
    statement after the sum takes it too, and ``/ (t + 1)`` is applied once
    per element, not per term."""
    assert sums_of(RUNNING_MEAN) == ["y"]
    # a range narrower than the tensor: the statement after the sum covers the same elements
    part = "def f(float(M,K) a, float(M) c) -> (y) {\n  y(i) +=! a(i, k) * c(i) where i in 1:M\n}"
    assert sums_of(part) == ["y"]
    after = [c for c in n.walk(driver.frontend(part).checked.node) if isinstance(c, n.Comprehension)]
    # the sum keeps its ranges (k's added); the statement after takes i in 1:M
    assert [(c.op, sorted(w.var for w in c.wheres)) for c in after] == [("+=!", ["i", "k"]), ("=", ["i"])]
    a, c = np.ones((4, 3), np.float32), np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(tcdsl.compile(part, specialize=mode, options={"disk_cache": False})(a, c)[1:],
                               3 * c[1:])
    k = tcdsl.compile(RUNNING_MEAN, specialize=mode, options={"disk_cache": False})
    tir = driver.emit(k, "tir")
    assert not any("acc[" in ln and "+ 1" in ln and " / " in ln for ln in tir.splitlines()), tir
    rng = np.random.default_rng(6)
    for B, T, D in [(1, 1, 1), (2, 7, 9), (3, 33, 17)]:
        x = rng.standard_normal((B, T, D)).astype(np.float32)
        want = np.cumsum(x.astype(np.float64), 1) / np.arange(1, T + 1)[None, :, None]
        np.testing.assert_allclose(k(x), want, rtol=1e-5, atol=1e-5)


EXPM = """def expm_taylor(float(B,N,N) A) -> (E) {
  for t in 13 {
    if t == 0 { P(t, b, i, j) = i == j ? 1.0 : 0.0 where exists A(b, i, j) }
    else { P(t, b, i, j) +=! P(t - 1, b, i, k) * A(b, k, j) / t }
    if t == 0 { E(b, i, j) = P(t, b, i, j) } else { E(b, i, j) += P(t, b, i, j) }
  }
}"""
# the other branch writes y over M columns, the sum over N: a statement
# after the sum over y's columns would divide more than the sum wrote
WIDER = """def f(float(T,M) x, float(M,N) w) -> (y) {
  for t in T {
    if t == 0 { y(t, i) = x(t, i) }
    else { y(t, i) +=! y(t - 1, k) * w(k, i) / t where k in 0:M }
  }
}"""


def _expm(a):
    p = np.broadcast_to(np.eye(a.shape[1]), a.shape).astype(np.float64)
    e = p.copy()
    for t in range(1, 13):
        p = p @ a.astype(np.float64) / t
        e = e + p
    return e


@pytest.mark.parametrize("mode", MODES)
def test_a_sum_inside_a_loop_applies_its_factor_after_it(mode):
    """``/ t`` of a Taylor series' term leaves the matrix product, inside the
    loop and the branch (P's other writer is the other branch)."""
    assert sums_of(EXPM) == ["P"]
    k = tcdsl.compile(EXPM, specialize=mode, options={"disk_cache": False})
    tir = driver.emit(k, "tir")
    products = [ln for ln in tir.splitlines() if "A[" in ln and "acc[" in ln]
    assert products and not any(" / " in ln for ln in products), tir
    rng = np.random.default_rng(7)
    for B, N in [(1, 1), (2, 5), (3, 17)]:
        a = (rng.standard_normal((B, N, N)) / N).astype(np.float32)
        np.testing.assert_allclose(k(a), _expm(a), rtol=1e-5, atol=1e-6)


def test_a_factor_applies_to_the_elements_its_sum_wrote():
    # y is wider than the sum writes (max(M, N) columns): the statement after
    # the sum takes the sum's ranges (i in 0:N) and scales only those
    # (factor.same_cover holds; without the ranges it would cover M columns)
    assert sums_of(WIDER) == ["y"]
    fe = driver.frontend(WIDER)
    after = [c for c in n.walk(fe.checked.node) if isinstance(c, n.Comprehension)]
    assert [c.op for c in after] == ["=", "+=!", "="]
    assert [(w.var, str(w.hi)) for w in after[2].wheres] == [("i", str(n.SizeVar("N")))]
    k = tcdsl.compile(WIDER, options={"disk_cache": False})
    rng = np.random.default_rng(8)
    T, M, N = 4, 6, 5
    x, w = rng.standard_normal((T, M)).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    got = k(x, w)
    want = np.zeros((T, max(M, N)))
    want[0, :M] = x[0]
    for t in range(1, T):
        want[t, :N] = want[t - 1, :M] @ w.astype(np.float64) / t
    np.testing.assert_allclose(got[1:, :N], want[1:, :N], rtol=1e-4, atol=1e-5)


def test_a_sum_after_a_loop_whose_variable_it_reuses_compiles():
    # t of the sum is renamed in the checked program (a loop has its name):
    # the parsed statement is left as written, not rewritten with the wrong names
    src = """def f(float(T,B,H) x) -> (avg, last) {
  for t in T {
    h(t, b, j) = x(t, b, j) * 2.0
  }
  avg(b, j) +=! h(t, b, j) / T
  last(b, j) = h(T - 1, b, j)
}"""
    rng = np.random.default_rng(2)
    for mode in ("never", "after-scheduling", "before-scheduling"):
        k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
        for T, B, H in [(5, 3, 4), (1, 1, 1), (7, 2, 33)]:
            x = rng.standard_normal((T, B, H)).astype(np.float32)
            avg, last = k(x)
            np.testing.assert_allclose(avg, (2 * x.astype(np.float64)).mean(0), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(last, 2 * x[-1], rtol=1e-6)


WEIGHT_NORM = """def wn(float(B,I) x, float(O,I) v, float(O) g, float(O) bias) -> (z) {
  nv(o) +=! v(o, i) * v(o, i)
  y(b, o) +=! x(b, i) * v(o, i) * g(o) / sqrt(nv(o))
  z(b, o) = y(b, o) + bias(o)
}"""


def test_a_sum_that_other_statements_write_after_applies_its_factor():
    # the factor statement comes right after the sum, before the later write
    assert sums_of("def f(float(M,K) a, float(M) c) -> (y) {\n  y(i) +=! a(i, k) * c(i)\n  y(i) = y(i) + 1\n}") == ["y"]
    # y ends in z (polyhedral/inplace.py): z(b, o) +=! ..., then z = z + bias
    assert sums_of(WEIGHT_NORM) == ["z"]
    tir = driver.emit(tcdsl.compile(WEIGHT_NORM, options={"disk_cache": False}), "tir")
    assert "sqrt" in tir
    assert not any("sqrt" in ln and "x[" in ln for ln in tir.splitlines())  # not per term of the sum
    unfactored = driver.emit(tcdsl.compile(WEIGHT_NORM, options={"disk_cache": False, "factor": False}), "tir")
    assert any("sqrt" in ln and "x[" in ln for ln in unfactored.splitlines())


@pytest.mark.parametrize("mode", MODES)
def test_weight_norm_against_numpy(mode):
    k = tcdsl.compile(WEIGHT_NORM, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(3)
    for B, I, O in [(1, 1, 1), (2, 5, 3), (7, 33, 18)]:
        x, v = rng.standard_normal((B, I)), rng.standard_normal((O, I))
        g, bias = rng.standard_normal(O), rng.standard_normal(O)
        want = x @ (v * (g / np.linalg.norm(v, axis=1))[:, None]).T + bias
        got = k(*(a.astype(np.float32) for a in (x, v, g, bias)))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


GRU_D = """def grud(float(T,B,I) x, float(T,B) dt, float(H) wd, float(I,H) W, float(H,H) U) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W(i, j)
    if t > 0 { a(b, j) += exp(-fmax(wd(j) * dt(t, b), 0)) * h(t - 1, b, k) * U(k, j) }
    h(t, b, j) = tanh(a(b, j))
  }
}"""


def test_an_accumulation_sums_in_a_temporary_then_applies_its_factor():
    # y(i) += a(i, k) * c(i) adds to what y holds: the sum goes to a temporary,
    # y(i) += y_f(i) * c(i) after it (y keeps its first value, unscaled)
    src = "def f(float(M,K) a, float(M) c) -> (y) {\n  y(i) = c(i)\n  y(i) += a(i, k) * c(i)\n}"
    assert sums_of(src) == ["y"]
    fe = driver.frontend(src)
    assert [(c.tensor, c.op) for c in n.walk(fe.checked.node) if isinstance(c, n.Comprehension)] == [
        ("y", "="), ("y_f", "+=!"), ("y", "+=")]
    k = tcdsl.compile(src, options={"disk_cache": False})
    rng = np.random.default_rng(4)
    a, c = rng.standard_normal((5, 7)), rng.standard_normal(5)
    np.testing.assert_allclose(k(a.astype(np.float32), c.astype(np.float32)), c + a.sum(1) * c, rtol=1e-5, atol=1e-5)
    # a recurrent product scaled per element (a decay of the state): the
    # scale's exp runs once per element, not once per term, and the product
    # of h and U is a plain one, in register tiles
    assert sums_of(GRU_D) == ["a"]
    tir = driver.emit(tcdsl.compile(GRU_D, options={"disk_cache": False}), "tir")
    assert any("acc[" in ln and "U[" in ln for ln in tir.splitlines())
    off = driver.emit(tcdsl.compile(GRU_D, options={"disk_cache": False, "factor": False}), "tir")
    assert not any("acc[" in ln and "U[" in ln for ln in off.splitlines())


def _grud(x, dt, wd, W, U):
    h, out = None, []
    for t in range(x.shape[0]):
        z = x[t] @ W
        if h is not None:
            z = z + (h @ U) * np.exp(-np.maximum(dt[t][:, None] * wd[None, :], 0))
        h = np.tanh(z)
        out.append(h)
    return np.stack(out)


@pytest.mark.parametrize("mode", MODES)
def test_gru_d_against_numpy(mode):
    k = tcdsl.compile(GRU_D, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(5)
    for T, B, I, H in [(1, 1, 1, 1), (3, 2, 5, 4), (5, 3, 7, 17)]:
        args = (rng.standard_normal((T, B, I)), rng.uniform(0, 2, (T, B)), rng.uniform(0, 1, H),
                rng.standard_normal((I, H)) / 3, rng.standard_normal((H, H)) / 3)
        got = k(*(a.astype(np.float32) for a in args))
        np.testing.assert_allclose(got, _grud(*args), rtol=1e-4, atol=1e-5)


def test_gru_d_stays_inside_its_tensors():
    cases = [{"id": f"grud:{i}", "source": GRU_D, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"T": 3, "B": 2, "I": 5, "H": 4}, {"T": 1, "B": 1, "I": 1, "H": 1},
                                        {"T": 4, "B": 3, "I": 2, "H": 17}])]
    guard.assert_all_work(cases)


MASKED = """
def masked(float(T,B,I) x, float(T,B) m, float(H,I) W, float(H,H) U) -> (h) {
  for t in T {
    if t > 0 {
      hn(b, j) +=! m(t, b) * h(t - 1, b, k) * U(j, k)
    }
    h(t, b, j) +=! x(t, b, i) * W(j, i)
    h(t, b, j) = tanh(h(t, b, j) + (t > 0 ? hn(b, j) : 0))
  }
}
"""


def _masked(x, m, W, U):
    h, out = None, []
    for t in range(x.shape[0]):
        z = x[t] @ W.T
        if h is not None:
            z = z + m[t][:, None] * (h @ U.T)
        h = np.tanh(z)
        out.append(h)
    return np.stack(out)


def test_a_factor_that_alone_bounds_a_variable_leaves_its_range_with_the_sum():
    # m(t, b) is the only read of hn's sum that bounds b (the state h is
    # written further down the loop): the sum left after m moves out keeps
    # b's range, so h keeps its B rows (it had 1)
    assert sums_of(MASKED) == ["hn"]
    fe = driver.frontend(MASKED)
    (s,) = [c for c in n.walk(fe.checked.node) if isinstance(c, n.Comprehension) and c.tensor == "hn" and c.op == "+=!"]
    assert {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)} >= {"b", "j", "k"}
    k = tcdsl.compile(MASKED, options={"disk_cache": False})
    rng = np.random.default_rng(6)
    for T, B, I, H in [(1, 2, 3, 4), (3, 2, 5, 4), (4, 5, 3, 9)]:
        args = (rng.standard_normal((T, B, I)), (rng.random((T, B)) > 0.3).astype(np.float64),
                rng.standard_normal((H, I)) / 3, rng.standard_normal((H, H)) / 3)
        got = k(*(a.astype(np.float32) for a in args))
        assert got.shape == (T, B, H)
        np.testing.assert_allclose(got, _masked(*args), rtol=1e-4, atol=1e-5)


def test_a_rewrite_that_changes_an_output_shape_is_refused():
    import islpy as isl

    from tcdsl.errors import InternalError
    from tcdsl.sema.check import check
    from tcdsl.sema.ranges import infer_ranges, same_output_shapes
    from tcdsl.source import Source
    from tcdsl.syntax.parse import parse

    ctx = isl.Context()

    def ranges(src):
        return infer_ranges(check(parse(Source(src)), None), ctx)
    old = ranges("def f(float(N) A) -> (O) { O(i) = A(i) }")
    same_output_shapes(old, ranges("def f(float(N) A) -> (O) { O(i) = 2 * A(i) }"))
    with pytest.raises(InternalError, match="output 'O' another extent along dimension 0"):
        same_output_shapes(old, ranges("def f(float(N) A) -> (O) { O(i) = A(i) where i in 0:N - 1 }"))
