"""Float32 math that stays vectorized (codegen/formulas.py): ``log`` as a
formula (``llvm.log`` on a vector is one libm call per lane), ``fmax`` and
``fmin`` as selects, NaN kept by every formula, and nested formulas beside
such calls inside vector loops and vector reductions."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl

NO_CACHE = {"disk_cache": False}


def _one(fn: str, dtype: str = "float") -> tcdsl.Kernel:
    return tcdsl.compile(f"def f({dtype}(N) x) -> (y) {{\n  y(i) = {fn}(x(i))\n}}", options=NO_CACHE)


def test_log_is_a_formula_within_an_ulp():
    k = _one("log")
    assert "T.log" not in k.script
    rng = np.random.default_rng(0)
    x = np.concatenate([np.exp(rng.uniform(-103, 88, 100_000)).astype(np.float32),
                        rng.uniform(0.5, 2, 100_000).astype(np.float32),
                        # every exponent, subnormals included (positive bit patterns below inf)
                        rng.integers(1, 0x7F800000, 100_000, dtype=np.int32).view(np.float32)])
    want = np.log(x.astype(np.float64))
    ulp = np.abs(k(x) - want) / np.spacing(np.abs(want).astype(np.float32))
    assert ulp.max() <= 1.0, (ulp.max(), x[ulp.argmax()])


def test_log_of_special_values():
    k = _one("log")
    x = np.float32([0.0, -0.0, -1.0, -np.inf, np.inf, np.nan, 1.0, 1e-45, 2.0] * 3)  # vector lanes and the tail
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(k(x), np.log(x))


@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "sigmoid", "erf"])
def test_a_nan_stays_a_nan(fn):
    """The formulas test NaN on its bits: LLVM may fold a float ``v != v``
    (exp(NaN) was inf, tanh(NaN) and erf(NaN) 1)."""
    y = _one(fn)(np.float32([np.nan, 1.0, -np.nan] * 8))
    assert np.isnan(y[0::3]).all() and np.isnan(y[2::3]).all() and np.isfinite(y[1::3]).all()


@pytest.mark.parametrize("dtype,np_dtype", [("float", np.float32), ("double", np.float64)])
def test_fmax_and_fmin_ignore_a_nan_operand_in_vector_loops(dtype, np_dtype):
    k = tcdsl.compile(f"def f({dtype}(N) a, {dtype}(N) b) -> (y, z) {{\n  y(i) = fmax(a(i), b(i))\n"
                      f"  z(i) = fmin(a(i), b(i))\n}}", options=NO_CACHE)
    assert "fmax" not in k.script and "fmin" not in k.script and "T.vectorized" in k.script
    a = np_dtype([np.nan, 1, np.nan, -np.inf, 3, -2, 0.5] * 5)
    b = np_dtype([2, np.nan, np.nan, 1, np.inf, -3, 0.25] * 5)
    y, z = k(a, b)
    np.testing.assert_array_equal(y, np.fmax(a, b))
    np.testing.assert_array_equal(z, np.fmin(a, b))


BCE = """def bce(float(N,C) x, float(N,C) t) -> (loss) {
  loss +=! (fmax(x(n, c), 0) - x(n, c) * t(n, c) + log(1 + exp(-fabs(x(n, c))))) / (N * C)
}"""


def test_a_loss_with_nested_formulas_and_fmax_is_one_vector_reduction():
    """Binary cross entropy with logits: ``log(1 + exp(..))`` nests two
    formulas (the inner one bound first) beside an ``fmax``; the sum runs in
    vector lanes with no libm call."""
    k = tcdsl.compile(BCE, options=NO_CACHE)
    assert "loss_lanes" in k.script and "T.log" not in k.script and "fmaxf" not in k.script
    rng = np.random.default_rng(1)
    for N, C in [(1, 1), (3, 5), (17, 40), (64, 1000)]:
        x = (rng.standard_normal((N, C)) * 4).astype(np.float32)
        t = (rng.random((N, C)) > 0.5).astype(np.float32)
        xd = x.astype(np.float64)
        want = np.mean(np.maximum(xd, 0) - xd * t + np.log1p(np.exp(-np.abs(xd))))
        np.testing.assert_allclose(k(x, t), want, rtol=1e-5)


@pytest.mark.parametrize("body", ["y(n, c) = fmod(x(n, c), 3) + log(1 + exp(x(n, c)))",
                                  "y(n, c) = fmod(x(n, c), 3) + tanh(1 + exp(x(n, c)))"])
def test_nested_formulas_beside_a_libm_call_compile(body):
    """A libm call (``fmod``) makes TVM run the vector statement lane by lane,
    which loses a bound argument ("variables (act,) are used, but are not
    passed in"): such a statement keeps its formulas unbound."""
    k = tcdsl.compile(f"def f(float(N,C) x) -> (y) {{\n  {body}\n}}", options=NO_CACHE)
    x = np.random.default_rng(2).standard_normal((3, 37)).astype(np.float32)
    xd = x.astype(np.float64)
    outer = np.log if "log" in body else np.tanh
    np.testing.assert_allclose(k(x), np.fmod(xd, 3) + outer(1 + np.exp(xd)), rtol=1e-5, atol=1e-6)


GATHERED_LSE = """def f(float(B, V) logp, int32(B, S) ext, float(B, S) a) -> (y) {
  y(b, s) = log(exp(a(b, s)) + exp(a(b, s) * 0.5)) + logp(b, ext(b, s))
}"""


def test_a_gathered_read_beside_libm_lets_is_one_vector_loop():
    """A read through an index tensor (clamped into ``logp``, 0 where
    ``logp`` is empty) beside a log-sum-exp: the vector loop runs where
    ``logp`` has elements, a scalar loop where it has none (CTC's alpha
    recursion ran lane by lane: 18.7 -> 2.2 ms)."""
    k = tcdsl.compile(GATHERED_LSE, options=NO_CACHE)
    assert "T.vectorized" in k.script and "_s in range(" in k.script  # (the loop where logp is empty)
    rng = np.random.default_rng(2)
    for B, V, S in [(3, 7, 37), (2, 1, 16), (1, 5, 3)]:
        logp = rng.standard_normal((B, V)).astype(np.float32)
        ext = rng.integers(-2, V + 2, (B, S)).astype(np.int32)  # clamped into 0 .. V - 1
        a = rng.standard_normal((B, S)).astype(np.float32)
        a64 = a.astype(np.float64)
        want = np.log(np.exp(a64) + np.exp(a64 * 0.5)) + logp[np.arange(B)[:, None], np.clip(ext, 0, V - 1)]
        np.testing.assert_allclose(k(logp, ext, a), want, rtol=1e-5, atol=1e-5)
    # V = 0: the read gives 0
    a = rng.standard_normal((2, 19)).astype(np.float32)
    got = k(np.zeros((2, 0), np.float32), np.zeros((2, 19), np.int32), a)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(got, np.log(np.exp(a64) + np.exp(a64 * 0.5)), rtol=1e-5, atol=1e-5)


# a CTC step: the predecessor two states back, under a condition on the
# state and on the labels, beside the log-sum-exp's libm Lets
CTC_STEP = """def step(float(B, S) prev, int32(B, S) ext, float(B, V) lp) -> (alpha) {
  alpha(b, s) = mx + log(exp(a1 - mx) + exp(a2 - mx) + exp(a3 - mx)) + lp(b, ext(b, s))
    where s in 0:S, a1 = prev(b, s), a2 = s >= 1 ? prev(b, s - 1) : -1e30,
          a3 = s >= 2 && ext(b, s) != 0 && ext(b, s) != ext(b, s - 2) ? prev(b, s - 2) : -1e30,
          mx = max(a1, max(a2, a3))
}"""


def _ctc_step(prev, ext, lp):
    B, S = prev.shape
    p = prev.astype(np.float64)
    a2 = np.full_like(p, -1e30)
    a2[:, 1:] = p[:, :-1]
    a3 = np.full_like(p, -1e30)
    ok = (ext[:, 2:] != 0) & (ext[:, 2:] != ext[:, :-2])
    a3[:, 2:] = np.where(ok, p[:, :-2], -1e30)
    mx = np.maximum(p, np.maximum(a2, a3))
    lse = mx + np.log(np.exp(p - mx) + np.exp(a2 - mx) + np.exp(a3 - mx))
    return lse + lp[np.arange(B)[:, None], np.clip(ext, 0, lp.shape[1] - 1)]


@pytest.mark.parametrize("checked", [False, True])
def test_selects_of_shifted_reads_beside_libm_lets_are_vector_lanes(checked):
    """The selects of a CTC step's predecessors (reads at ``s - 1``, ``s - 2``
    clamped into ``prev``) beside the log-sum-exp's Lets: both sides computed
    in vector lanes (24.4 -> 3.4 ms for a padded CTC loss of 250 steps);
    a checked kernel, whose reads outside a tensor raise, keeps a scalar loop
    and gives the same values."""
    k = tcdsl.compile(CTC_STEP, options={**NO_CACHE, "checked": checked})
    assert ("T.vectorized" in k.script) != checked
    rng = np.random.default_rng(5)
    for B, S, V in [(3, 37, 6), (2, 16, 1), (1, 3, 4), (4, 1, 3)]:
        prev = rng.standard_normal((B, S)).astype(np.float32)
        ext = rng.integers(0, V, (B, S)).astype(np.int32)
        lp = rng.standard_normal((B, V)).astype(np.float32)
        np.testing.assert_allclose(k(prev, ext, lp), _ctc_step(prev, ext, lp), rtol=1e-5, atol=1e-5)


def test_exp_has_no_subnormal_results():
    """exp below ln(FLT_MIN) is 0 (a subnormal result or operand costs an x86
    core a microcode assist: masked attention scores at -1e30 ran 5-7x
    slower); above it, within an ulp of NumPy; sigmoid's saturated side too."""
    x = np.float32(np.concatenate([np.linspace(-110, -87.34, 997), [-1e30, -np.inf, -87.336, -87.0, -80.0]]))
    e, s = (_one(fn)(x) for fn in ("exp", "sigmoid"))
    tiny = np.finfo(np.float32).tiny
    assert not ((e != 0) & (np.abs(e) < tiny)).any() and not ((s != 0) & (np.abs(s) < tiny)).any()
    assert (e[x < -87.33654] == 0).all() and (s[x < -87.33654] == 0).all()
    want = np.exp(x.astype(np.float64))
    normal = x >= -87.336
    assert normal.sum() == 3
    np.testing.assert_allclose(e[normal], want[normal], rtol=2e-7)
