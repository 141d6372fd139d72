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
def test_reads_without_where_keep_their_ranges(src, ref):
    """Without ``where``, the range of ``i`` comes from the other reads; the
    cases' reads (``A(i - N)``) would narrow it to nothing, so the rewrite
    pins the inferred ranges in a ``where`` (circular.pins)."""
    text = to_tc(driver.frontend(src).checked.node)
    assert "A(i - N)" in text or "x(b, (i + 1) - N)" in text, text
    assert "where" in text and "i in 0:N" in text, text
    for n in (1, 2, 17):
        x = np.random.default_rng(n).standard_normal((3, n) if "rd" in src else n).astype(np.float32)
        np.testing.assert_allclose(tcdsl.compile(src, options={"disk_cache": False})(x), ref(x), rtol=1e-6)


# Lorenz-96 in one step of a loop: every statement's range from a plain read
L96 = """def l96(float(B,N) x0, float F, float dt) -> (x) {
  x(b, i) = x0(b, i)
  for t in S {
    k(b, i) = (x(b, (i + 1) % N) - x(b, (i + N - 2) % N)) * x(b, (i + N - 1) % N) - x(b, i) + F
    x(b, i) = x(b, i) + dt * k(b, i)
  }
}"""


def _l96(x0, F, dt, S):
    x = x0.astype(np.float64)
    for _ in range(S):
        x = x + dt * ((np.roll(x, -1, 1) - np.roll(x, 2, 1)) * np.roll(x, 1, 1) - x + F)
    return x


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_stencil_without_where_is_split(mode):
    """The three remainders of the Lorenz-96 step are split although no
    statement has a ``where``: no remainder is left in the vector loops, and
    the results are NumPy's at sizes below, at and above the shifts."""
    k = tcdsl.compile(L96, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        tir = driver.emit(k, "tir")
        plain = [ln for ln in tir.splitlines() if ln.strip().startswith("k[") and "_v]" in ln
                 and "truncmod" not in ln and "if_then_else" not in ln]
        assert plain and "_v + 1]" in plain[0], tir
    rng = np.random.default_rng(2)
    for B, N in [(2, 1), (2, 2), (3, 3), (2, 17), (3, 40)]:
        x0 = rng.standard_normal((B, N)).astype(np.float32)
        np.testing.assert_allclose(k(x0, 8.0, 0.01, S=5), _l96(x0, 8.0, 0.01, 5), rtol=1e-4, atol=1e-4)


def test_stencil_without_where_under_guard_pages():
    import guard
    cases = [{"id": "circular:l96", "source": L96,
              "settings": [{"S": 2, "B": 2, "N": 1}, {"S": 3, "B": 1, "N": 2}, {"S": 2, "B": 3, "N": 19}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or records
