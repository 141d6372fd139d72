"""A sum whose terms do not use the same reduction variables: TC sums the
whole right-hand side over every reduction variable, so ``a(b, j) +=! x(b,
i) * W(i, j) + h(b, k) * U(k, j)`` adds each product once per value of the
other's variable.  That is almost always a cell's two sums written as one;
tcdsl computes what TC does and warns, naming the term and the variable."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tcdsl
from tcdsl.errors import TcWarning

TWO_SUMS = """def cell(float(B,I) x, float(I,H) W, float(B,H) h, float(H,H) U) -> (a) {
  a(b, j) +=! x(b, i) * W(i, j) + h(b, k) * U(k, j)
}"""


def _caught(src):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tcdsl.compile(src, options={"disk_cache": False})
    return k, [str(x.message) for x in w if issubclass(x.category, TcWarning)]


def test_terms_over_different_reduction_variables_warn_and_keep_tc_semantics():
    k, got = _caught(TWO_SUMS)
    assert len(got) == 1, got
    assert ":2:15: this term of the sum into 'a' does not use the reduction variable 'k'" in got[0], got
    assert "write one '+=!' statement per sum" in got[0]
    rng = np.random.default_rng(1)
    x, W, h, U = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (3, 4), (2, 4), (4, 4)])
    want = (x @ W) * 4 + (h @ U) * 3  # each product summed over the other's 4 and 3 values
    np.testing.assert_allclose(k(x, W, h, U), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src", [
    # both terms over k
    "def f(float(N,K) a, float(K) b, float(N,K) c) -> (y) { y(n) +=! a(n, k) * b(k) - c(n, k) * b(k) }",
    # one term
    "def f(float(N,K) a, float(K) b) -> (y) { y(n) +=! a(n, k) * b(k) }",
    # a term read through a where binding: judged with the binding's value
    "def f(float(N,K) a, float(N,K) c) -> (y) { y(n) +=! a(n, k) + z where z = c(n, k) }",
])
def test_sums_of_terms_over_the_same_variables_do_not_warn(src):
    assert _caught(src)[1] == []


def test_a_term_without_any_reduction_variable_warns():
    _, got = _caught("def f(float(N,K) a, float(N) c) -> (y) { y(n) +=! a(n, k) + c(n) }")
    assert len(got) == 1 and "'k'" in got[0], got
