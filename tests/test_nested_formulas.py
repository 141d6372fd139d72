"""A vector formula (exp, tanh, sigmoid, erf in float32) whose argument holds
another formula -- a GRU's ``tanh(n + sigmoid(r) * a)`` -- takes a variable
bound to that argument in a statement before the store, instead of one
scalar libm call per lane (codegen/formulas.py ``bindings``, codegen/lower.py
``emit_statement``), at any depth; before TVM's build the bindings become
scratch buffers (codegen/scratch.py), which TVM's analyzer does not expand.
Checked: no libm call is left in the vector loop, values against NumPy
(float64), an argument under a select stays inside its tensors (guard
pages), and chains of three and four formulas (Mish; one that took minutes
to compile with a ``Bind`` per level) compile in seconds, vectorized."""
from __future__ import annotations

import time
from math import erf

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

NO_CACHE = {"disk_cache": False}


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


GRU_CELL = """
def cell(float(B,H) z, float(B,H) r, float(B,H) n, float(B,H) a, float(B,H) hp) -> (h) {
  h(b, j) = (1 - sigmoid(z(b, j))) * tanh(n(b, j) + sigmoid(r(b, j)) * a(b, j)) + sigmoid(z(b, j)) * hp(b, j)
}"""
DEEP = "def deep(float(N) x) -> (y) { y(i) = tanh(sigmoid(tanh(exp(x(i) * 0.1)) * 3) - erf(tanh(x(i)))) }"
TWO = "def two(float(N) x) -> (y) { y(i) = erf(tanh(x(i)) * 2) + exp(sigmoid(x(i))) }"
GUARDED = "def g(float(N) x) -> (y) { y(i) = i >= 1 ? tanh(sigmoid(x(i - 1)) * 2) : 0 where i in 0:N }"


def test_a_gru_cell_keeps_its_tanh_vectorized():
    k = tcdsl.compile(GRU_CELL, options=NO_CACHE)
    assert "tanhf" not in k.script and "T.vectorized" in k.script
    assert "act: T.let[T.float32]" in k.script  # the tanh's argument, bound before the store
    rng = np.random.default_rng(0)
    for B, H in [(2, 37), (1, 1), (4, 64)]:
        z, r, nn, a, hp = (rand(rng, B, H) * 3 for _ in range(5))
        want = (1 - _sigmoid(z.astype(np.float64))) * np.tanh(nn + _sigmoid(r.astype(np.float64)) * a) \
            + _sigmoid(z.astype(np.float64)) * hp
        np.testing.assert_allclose(k(z, r, nn, a, hp), want, rtol=2e-6, atol=2e-6)


def test_chains_of_two_formulas_have_no_libm_call():
    k = tcdsl.compile(TWO, options=NO_CACHE)
    for libm in ("tanhf", "expf", "erff", "T.exp(", "T.sigmoid(", "T.erf("):
        assert libm not in k.script, libm
    x = np.linspace(-6, 6, 1001).astype(np.float32)
    xd = x.astype(np.float64)
    want = np.vectorize(erf)(np.tanh(xd) * 2) + np.exp(_sigmoid(xd))
    np.testing.assert_allclose(k(x), want, rtol=2e-6, atol=2e-6)


MISH = "def mish(float(N,C) x) -> (y) { y(n, c) = x(n, c) * tanh(log(1 + exp(x(n, c)))) }"


@pytest.mark.parametrize("name", ["DEEP", "MISH"])
def test_longer_chains_compile_quickly_vectorized_and_match_numpy(name):
    src = {"DEEP": DEEP, "MISH": MISH}[name]
    start = time.perf_counter()
    k = tcdsl.compile(src, options=NO_CACHE)
    assert time.perf_counter() - start < 30
    assert "T.vectorized" in k.script
    for libm in ("tanhf", "expf", "erff", "T.exp(", "T.log(", "T.sigmoid(", "T.erf("):
        assert libm not in k.script, libm
    x = np.linspace(-6, 6, 1001).astype(np.float32)
    xd = x.astype(np.float64)
    if name == "DEEP":
        want = np.tanh(_sigmoid(np.tanh(np.exp(xd * 0.1)) * 3) - np.vectorize(erf)(np.tanh(xd)))
        got = k(x)
    else:
        want = (xd * np.tanh(np.log1p(np.exp(xd)))).reshape(7, 143)
        got = k(x.reshape(7, 143))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("options", [NO_CACHE, {**NO_CACHE, "checked": True}])
def test_an_argument_under_a_select_is_computed_where_its_reads_are_safe(options):
    k = tcdsl.compile(GUARDED, options=options)
    rng = np.random.default_rng(1)
    for N in (1, 2, 17, 40):
        x = rand(rng, N) * 4
        want = np.zeros(N)
        want[1:] = np.tanh(_sigmoid(x[:-1].astype(np.float64)) * 2)
        np.testing.assert_allclose(k(x), want, rtol=2e-6, atol=2e-6)
    cases = [{"id": f"nested:{N}", "source": src, "sizes": {"N": N}, "seed": N}
             for N in (1, 2, 33) for src in (GUARDED, DEEP, GRU_CELL.replace("B,H", "N,N"))]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
