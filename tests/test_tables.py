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
