"""Sums into a 0-d tensor over loops that do not merge into one (a select
split into pieces, a short loop outside the long ones, a triangle): the
outermost loop shared out among the threads, each outer iteration summed
into a partial added to a float64 total (codegen/cpu_scalar_sums.py).
Values against NumPy in float64, the accuracy of a long sum, and the TIR's
structure."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl

NO_CACHE = {"disk_cache": False}

OFF_DIAGONAL = """
def f(float(N,N) K, float(L) g) -> (s) {
  s +=! i != j ? exp(-g(l) * K(i, j)) : 0
}
"""

# the short loop's variable first in the text: its loop runs outside the others
SHORT_FIRST = """
def f(float(N,N) K, float(L) g) -> (s) {
  s +=! exp(-K(i, j) * g(l))
}
"""

# two sums into two scalars, one of them over a triangle
TWO = """
def f(float(N,N) K, float(L) g) -> (s, t) {
  s +=! i != j ? g(l) * K(i, j) : 0
  t +=! j < i ? K(i, j) - g(l) : 0
}
"""


def _inputs(n: int, nl: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8))
    k = ((x[:, None] - x[None]) ** 2).sum(-1).astype(np.float32)
    g = (rng.random(nl) / 8 + 0.01).astype(np.float32)
    return k, g


def _exp_sum(k, g, off_diagonal: bool) -> float:
    e = sum(np.exp(-gg * k.astype(np.float64)) for gg in g.astype(np.float64))
    return float(e.sum() - (np.trace(e) if off_diagonal else 0.0))


@pytest.mark.parametrize("n,nl", [(1, 1), (1, 3), (3, 1), (7, 3), (33, 5), (129, 3)])
def test_scalar_sums_agree_with_numpy(n, nl):
    k, g = _inputs(n, nl)
    off = tcdsl.compile(OFF_DIAGONAL, options=NO_CACHE)
    short = tcdsl.compile(SHORT_FIRST, options=NO_CACHE)
    np.testing.assert_allclose(float(off(k, g)), _exp_sum(k, g, True), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(float(short(k, g)), _exp_sum(k, g, False), rtol=2e-6, atol=1e-6)
    s, t = tcdsl.compile(TWO, options=NO_CACHE)(k, g)
    k64, g64 = k.astype(np.float64), g.astype(np.float64)
    off_k = k64.sum() - np.trace(k64)
    lower = np.tril(k64, -1)
    want_t = lower.sum() * nl - g64.sum() * (n * (n - 1) // 2)
    np.testing.assert_allclose(float(s), g64.sum() * off_k, rtol=2e-6, atol=1e-5)
    np.testing.assert_allclose(float(t), want_t, rtol=2e-6, atol=1e-3)


@pytest.mark.parametrize("src,off_diagonal", [(OFF_DIAGONAL, True), (SHORT_FIRST, False)])
def test_a_long_scalar_sum_is_accurate(src, off_diagonal):
    """About 3 million terms of a sum of 8e5: each row's sum was added into
    the float32 element (relative error 1.3e-3); now within a few float32
    roundings of the float64 sum."""
    k, g = _inputs(1023, 3, seed=1)
    got = float(tcdsl.compile(src, options=NO_CACHE)(k, g))
    want = _exp_sum(k, g, off_diagonal)
    assert abs(got - want) / want < 2e-6, (got, want)


@pytest.mark.parametrize("src", [OFF_DIAGONAL, SHORT_FIRST, TWO])
def test_scalar_sums_run_in_parallel_with_float64_totals(src):
    script = tcdsl.compile(src, options=NO_CACHE).script
    assert "T.parallel(" in script
    assert "_part[()]" in script and "_threads" in script
    serial = tcdsl.compile(src, options={**NO_CACHE, "cpu_threads": 1}).script
    assert "T.parallel(" not in serial and "_part[()]" in serial


WMEAN = """
def wmean(float(D,N) X, float(N) w) -> (mean) {
  sw +=! w(n)
  mean(i) +=! w(n) * X(i, n) / sw
}
"""


def test_a_scalar_sum_does_not_put_a_row_sum_inside_its_loop():
    """The sum into ``sw`` and the rows' sums over the same ``n``: isl fused
    them with ``n`` outermost and a parallel loop over the rows inside, one
    parallel region per column (and ``X`` read down its columns); the rows
    now run in one parallel loop, each summed along ``n``."""
    k = tcdsl.compile(WMEAN, options=NO_CACHE)
    script = k.script
    first = script.index("T.parallel(")
    assert "in range(N)" not in script[:first]  # no loop over n around the rows' parallel loop
    assert "X[c0, (c2_b * 32 + c2_o) * 16 + c2_v]" in script  # each row in vector lanes along n
    rng = np.random.default_rng(3)
    for d, n in [(1, 1), (1, 7), (5, 1), (3, 33), (17, 101), (33, 4099)]:
        x = rng.standard_normal((d, n)).astype(np.float32)
        w = (rng.random(n) + 0.1).astype(np.float32)
        want = x.astype(np.float64) @ w.astype(np.float64) / w.astype(np.float64).sum()
        np.testing.assert_allclose(k(x, w), want, rtol=1e-5, atol=1e-6)
