"""Costly terms that do not depend on every index of their statement,
computed once in a table (tcdsl/polyhedral/tables.py): a sinusoidal
positional encoding added to a batch is computed over (t, d) once, not for
every b.  Results against NumPy at odd sizes in every specialize mode; the
statements left as written."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import rand

PE = """def pe(float(B,T,D) x) -> (y) {
  y(b, t, d) = x(b, t, d) + (d % 2 == 0 ? sin(t * exp(-d * 9.210340372 / D))
                                        : cos(t * exp(-(d - 1) * 9.210340372 / D)))
}"""
SCALED = """def f(float(B,T,D) x, float(T,D) w) -> (y) {
  y(b, t, d) = x(b, t, d) * exp(w(t, d)) + tanh(x(b, t, d))
}"""


def _pe(x):
    B, T, D = x.shape
    t, d = np.arange(T)[:, None].astype(np.float64), np.arange(D)[None].astype(np.float64)
    table = np.where(d % 2 == 0, np.sin(t * np.exp(-d * 9.210340372 / D)),
                     np.cos(t * np.exp(-(d - 1) * 9.210340372 / D)))
    return x + table


def test_positional_encoding_is_a_table():
    s = tcdsl.compile(PE, options={"disk_cache": False}).script
    # the table over (t, d), computed before y and read by it
    assert "y_tab = T.alloc_buffer((T_1, D)" in s, s
    assert re.search(r"y\[c1, c0, [^\n]*\] = x\[c1, c0, [^\n]*\] \+ y_tab\[c0, ", s), s
    # sin and cos once per (t, d), outside the loop over b
    assert all("y_tab[" in line.split("=")[0] for line in s.splitlines() if "T.sin(" in line or "T.cos(" in line), s


def test_left_as_written_without_factor():
    s = tcdsl.compile(PE, options={"disk_cache": False, "factor": False}).script
    assert "y_tab" not in s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_tables_match_numpy(mode):
    rng = np.random.default_rng(3)
    k = tcdsl.compile(PE, specialize=mode, options={"disk_cache": False})
    for B, T, D in [(2, 5, 7), (1, 1, 1), (3, 33, 10)]:
        x = rand(rng, B, T, D)
        np.testing.assert_allclose(k(x), _pe(x), rtol=1e-5, atol=2e-5)
    k2 = tcdsl.compile(SCALED, specialize=mode, options={"disk_cache": False})
    assert "y_tab" in k2.script
    for B, T, D in [(2, 5, 7), (4, 9, 17)]:
        x, w = rand(rng, B, T, D), rand(rng, T, D)
        want = x.astype(np.float64) * np.exp(w.astype(np.float64))[None] + np.tanh(x.astype(np.float64))
        np.testing.assert_allclose(k2(x, w), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src", [
    # the costly term uses every index
    "def f(float(B,T) x) -> (y) { y(b, t) = exp(x(b, t)) }",
    # the term that skips b is cheap
    "def f(float(B,T) x) -> (y) { y(b, t) = x(b, t) + t * 2.0 }",
    # a sum keeps its terms (factor.py applies invariant factors after it)
    "def f(float(B,T) x, float(T) w) -> (y) { y(b) +=! x(b, t) * exp(w(t)) }",
])
def test_left_as_written(src):
    s = tcdsl.compile(src, options={"disk_cache": False}).script
    assert "_tab" not in s, s


BN_RSQRT = """def bn(float(N,C) x, float(C) gamma, float(C) beta) -> (y, mean, var) {
  mean(c) +=! x(n, c) / N
  var(c) +=! (x(n, c) - mean(c)) * (x(n, c) - mean(c)) / N
  y(n, c) = (x(n, c) - mean(c)) * rsqrt(var(c) + 1e-5) * gamma(c) + beta(c)
}"""
BN_DIV = BN_RSQRT.replace("* rsqrt(var(c) + 1e-5)", "/ sqrt(var(c) + 1e-5)")
LAYER_NORM = """def ln(float(N,C) x) -> (y, mean, var) {
  mean(n) +=! x(n, c) / C
  var(n) +=! (x(n, c) - mean(n)) * (x(n, c) - mean(n)) / C
  y(n, c) = (x(n, c) - mean(n)) / sqrt(var(n) + 1e-5)
}"""


def _bn(x, gamma, beta):
    x = x.astype(np.float64)
    mean, var = x.mean(0), x.var(0)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def test_a_square_root_along_the_vector_loop_is_a_table():
    """A batch norm over (N, C) features: its rsqrt of var(c) varies along
    the vector loop c, so it is computed once per c, not per element."""
    s = tcdsl.compile(BN_RSQRT, options={"disk_cache": False}).script
    assert "y_tab = T.alloc_buffer((C,)" in s, s
    assert all("y_tab[" in line.split("=")[0] for line in s.splitlines() if "T.rsqrt(" in line), s


def test_a_divisor_with_a_square_root_is_a_table_of_its_reciprocal():
    s = tcdsl.compile(BN_DIV, options={"disk_cache": False}).script
    assert re.search(r"y_tab\[[^\n]*\] = T\.float32\(1\.0\) / T\.sqrt\(var\[", s), s
    assert re.search(r"y\[[^\n]*= \(x\[[^\n]*\] - mean\[[^\n]*\]\) \* y_tab\[", s), s
    assert not any("T.sqrt(" in line and "y_tab[" not in line.split("=")[0] for line in s.splitlines()), s


def test_a_square_root_of_the_rows_stays_in_its_statement():
    """A layer norm's sqrt(var(n)) does not vary along the vector loop c: the
    code generator hoists it out of that loop (codegen/invariant.py)."""
    s = tcdsl.compile(LAYER_NORM, options={"disk_cache": False}).script
    assert "y_tab" not in s, s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_square_root_tables_match_numpy(mode):
    rng = np.random.default_rng(5)
    for src in (BN_RSQRT, BN_DIV):
        k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
        for N, C in [(3, 5), (1, 1), (17, 33), (64, 130)]:
            x, gamma, beta = rand(rng, N, C), rand(rng, C), rand(rng, C)
            y, mean, var = k(x, gamma, beta)
            np.testing.assert_allclose(y, _bn(x, gamma, beta), rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(var, x.astype(np.float64).var(0), rtol=1e-4, atol=1e-5)
    k = tcdsl.compile(LAYER_NORM, specialize=mode, options={"disk_cache": False})
    x = rand(rng, 7, 19)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(k(x)[0], want, rtol=1e-4, atol=1e-4)
