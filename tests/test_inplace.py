"""Temporaries computed in the output they end in (polyhedral/inplace.py,
option ``inplace``): which temporaries move, that no buffer of their size is
left, and results against NumPy in every specialize mode."""
import numpy as np
import pytest

import tcdsl
from tcdsl import driver
from tcdsl.polyhedral import inplace

from helpers import SOFTMAX

MODES = ("never", "after-scheduling", "before-scheduling")

LAYERNORM = """
def layernorm(float(N,C) x, float(C) gamma, float(C) beta) -> (y, mean) {
  mean(n) +=! x(n, c) / C
  d(n, c) = x(n, c) - mean(n)
  var(n) +=! d(n, c) * d(n, c) / C
  y(n, c) = d(n, c) * rsqrt(var(n) + 1e-5) * gamma(c) + beta(c)
}
"""


def plan_of(src):
    fe = driver.frontend(src, inplace=False)
    return inplace.plan(fe.checked, fe.ranges)


def test_softmax_and_layer_norm_temporaries_move_into_their_outputs():
    assert plan_of(SOFTMAX) == {"e": "y"}
    assert plan_of(LAYERNORM) == {"d": "y"}
    for src, temp in ((SOFTMAX, "e"), (LAYERNORM, "d")):
        tir = driver.emit(tcdsl.compile(src, options={"disk_cache": False}), "tir")
        assert f"{temp} = T.alloc_buffer" not in tir
        assert f"{temp} = T.alloc_buffer" in driver.emit(
            tcdsl.compile(src, options={"inplace": False, "disk_cache": False}), "tir")


@pytest.mark.parametrize("src", [
    # read at another element than the one written: y(n, c) would clobber e(n, C - 1 - c) first
    "def f(float(N,C) x) -> (y) {\n  e(n, c) = x(n, c) * 2\n  y(n, c) = e(n, C - 1 - c)\n}",
    # also read at another element
    "def f(float(N,C) x) -> (y) {\n  e(n, c) = x(n, c) * 2\n  y(n, c) = e(n, c) + e(n, 0)\n}",
    # the output is used before
    "def f(float(N,C) x) -> (y) {\n  y(n, c) = x(n, c)\n  e(n, c) = y(n, c) * 2\n  y(n, c) = e(n, c) + 1\n}",
    # other extents
    "def f(float(N,C) x) -> (y) {\n  e(n, c) = x(n, c) * 2\n  y(n) +=! e(n, c)\n}",
    # another type
    "def f(float(N,C) x) -> (y) {\n  e(n, c) = x(n, c) * 2\n  y(n, c) = int32(e(n, c))\n}",
    # a reduction into the output
    "def f(float(N,C) x) -> (y) {\n  e(n, c) = x(n, c) * 2\n  y(n, c) +=! e(n, c) * x(n, k)\n}",
    # the temporary is written in a loop
    "def f(float(T,N) x) -> (y) {\n  for t in T {\n    e(t, n) = x(t, n) * 2\n  }\n  y(t, n) = e(t, n) + 1\n}",
])
def test_temporaries_that_stay(src):
    assert plan_of(src) == {}


@pytest.mark.parametrize("mode", MODES)
def test_results_against_numpy(mode):
    rng = np.random.default_rng(0)
    sm = tcdsl.compile(SOFTMAX, specialize=mode, options={"disk_cache": False})
    ln = tcdsl.compile(LAYERNORM, specialize=mode, options={"disk_cache": False})
    for N, C in [(1, 1), (3, 17), (8, 64)]:
        x = rng.standard_normal((N, C)).astype(np.float32)
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(sm(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
        gamma, beta = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
        y, mean = ln(x, gamma, beta)
        x64 = x.astype(np.float64)
        want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * gamma + beta
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(mean, x64.mean(1), rtol=1e-5, atol=1e-6)


def test_later_statements_read_the_output():
    """A statement after the one that ends the temporary reads the output: it sees the final values."""
    src = ("def f(float(N,C) x) -> (y, z) {\n  e(n, c) = x(n, c) * 2\n  y(n, c) = e(n, c) + 1\n"
           "  z(n) +=! y(n, c)\n}")
    assert plan_of(src) == {"e": "y"}
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y, z = tcdsl.compile(src, options={"disk_cache": False})(x)
    np.testing.assert_array_equal(y, 2 * x + 1)
    np.testing.assert_array_equal(z, (2 * x + 1).sum(1))
