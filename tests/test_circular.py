"""Reads at a remainder by a size (polyhedral/circular.py, option
``circular``): which reads are split into their affine cases, and results
against NumPy at every size (sizes smaller than the shift, and 0, included)
in every specialize mode."""
import re

import numpy as np
import pytest

import tcdsl
import tcdsl.testing
from tcdsl import driver
from tcdsl.polyhedral import circular
from tcdsl.syntax.printer import to_tc

ROLL = "def roll(float(B,N) X) -> (O) { O(b, i) = X(b, (i + 7) % N) where i in 0:N }"
BACK = "def back(float(B,N) X) -> (O) { O(b, i) = X(b, (i - 3) % N) where i in 0:N }"
MIRROR = "def mirror(float(B,N) X) -> (O) { O(b, i) = X(b, (N + 2 - i) % N) where i in 0:N }"
CIRCONV = ("def circonv(float(B,N) X, float(K) w) -> (O) { O(b, i) +=! X(b, (i - k) % N) * w(k) "
           "where i in 0:N, k in 0:K }")


def plan_of(src):
    return circular.plan(driver.frontend(src, circular=False).checked)


def test_the_remainders_split():
    for src in (ROLL, BACK, MIRROR, CIRCONV):
        assert len(plan_of(src)) == 1, src
    # by a constant (affine already), of a size alone, and not in a read: as written
    assert not plan_of("def f(float(4) X) -> (O) { O(i) = X((i + 1) % 4) where i in 0:4 }")
    assert not plan_of("def f(float(N) X, float(M) Y) -> (O) { O(i) = X(M % N) where i in 0:N }")
    assert not plan_of("def f(float(N) X) -> (O) { O(i) = (i + 1) % N == 0 ? X(i) : 0 }")


def test_the_digit_of_a_flat_index_is_no_circular_read():
    """``p % W`` with ``p`` in ``0:H*W`` spans H multiples of W: its cases would
    only peel the first rows off the loop (circular.few_wraps)."""
    fe = driver.frontend("def f(float(B,H,W) X) -> (O) { O(b, p) = X(b, p / W, p % W) where p in 0:H*W }",
                         circular=False)
    assert circular.plan(fe.checked) and not circular.plan(fe.checked, fe.model)
    for src in (ROLL, BACK, MIRROR, CIRCONV):
        fe = driver.frontend(src, circular=False)
        assert len(circular.plan(fe.checked, fe.model)) == 1, src


def test_the_cases_read_contiguously():
    """No remainder left in the loops over the cases that hold for sizes above the shift."""
    tir = driver.emit(tcdsl.compile(ROLL, options={"disk_cache": False}), "tir")
    # (vectors of 16 lanes with AVX-512, 8 with AVX2)
    assert re.search(r"X\[c0, c1_o \* (8|16) \+ c1_v \+ 7\]", tir) and "+ 7 - N]" in tir, tir
    plain = driver.emit(tcdsl.compile(ROLL, options={"circular": False, "disk_cache": False}), "tir")
    # (the remainder as written, by N as a multiplication: codegen/divisors.py)
    assert "+ 7]" not in plain and ("truncmod" in plain or "div0_m" in plain)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_results_against_numpy(mode):
    rng = np.random.default_rng(0)
    kernels = {src: tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
               for src in (ROLL, BACK, MIRROR, CIRCONV)}
    for B, N in [(2, 0), (2, 1), (3, 5), (2, 7), (2, 9), (3, 33), (1, 100)]:
        X = rng.standard_normal((B, N)).astype(np.float32)
        w = rng.standard_normal(4).astype(np.float32)
        np.testing.assert_array_equal(kernels[ROLL](X), np.roll(X, -7, axis=1))
        np.testing.assert_array_equal(kernels[BACK](X), np.roll(X, 3, axis=1))
        np.testing.assert_array_equal(kernels[MIRROR](X), X[:, (N + 2 - np.arange(N)) % N] if N else X)
        want = sum(np.roll(X.astype(np.float64), k, axis=1) * w[k] for k in range(4))
        np.testing.assert_allclose(kernels[CIRCONV](X, w), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(kernels[CIRCONV](X, w), tcdsl.testing.evaluate(CIRCONV, [X, w]),
                                   rtol=1e-5, atol=1e-5)


def test_option_off_keeps_the_read():
    k = tcdsl.compile(ROLL, options={"circular": False, "disk_cache": False})
    X = np.arange(10, dtype=np.float32).reshape(1, 10)
    np.testing.assert_array_equal(k(X), np.roll(X, -7, axis=1))
    with pytest.raises(tcdsl.TcError, match="circular"):
        tcdsl.compile(ROLL, options={"circular": 1})


@pytest.mark.parametrize("src,ref", [
    ("def f(float(N) A) -> (B) { B(i) = A(i) + A(i % N) }", lambda A: 2 * A),
    ("def rd(float(B, N) x) -> (y) { y(b, i) = x(b, (i + 1) % N) - x(b, i) }", lambda x: np.roll(x, -1, 1) - x),
])
def test_reads_whose_cases_would_narrow_the_ranges_stay_as_written(src, ref):
    """Without ``where``, the range of ``i`` comes from the other reads; the
    cases' reads (``A(i - N)``) would narrow it to nothing: not rewritten."""
    assert "% N" in to_tc(driver.frontend(src).checked.node)
    x = np.random.default_rng(1).standard_normal((3, 17) if "rd" in src else 17).astype(np.float32)
    np.testing.assert_allclose(tcdsl.compile(src, options={"disk_cache": False})(x), ref(x), rtol=1e-6)
