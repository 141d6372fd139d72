"""Terms that do not change along a vectorized loop, computed once before it
(codegen/invariant.py): a row's divisor becomes a multiplication by its
reciprocal, a row's ``rsqrt`` is computed once, terms under a select stay,
and the results match NumPy."""
import re

import numpy as np
import pytest

import tcdsl
from helpers import LAYERNORM, SOFTMAX


def script(src):
    return tcdsl.compile(src, options={"disk_cache": False}).script


def test_a_rows_divisor_becomes_a_reciprocal_computed_once():
    s = script(SOFTMAX)
    # (a one-element local buffer, which TVMScript prints as a variable)
    assert re.search(r"rcp0: T\.float32 = T\.float32\(1\.0\) / s\[c0\]", s)
    assert re.search(r"y\[c0, [^\]]*(c\d)_v\] = y\[c0, [^\]]*\1_v\] \* rcp0", s)
    assert not re.search(r"\] / s\[c0\]", s)


def test_a_rows_rsqrt_is_computed_once():
    s = script(LAYERNORM)
    assert re.search(r"inv0: T\.float32 = T\.rsqrt\(var\[c0\]", s)
    assert s.count("T.rsqrt(") == 1


@pytest.mark.parametrize("src", [
    # the divisor read under a select of values (an affine condition splits the statement first)
    "def f(float(N,C) x, float(N) s) -> (y) {\n  y(n, c) = x(n, c) > 0 ? x(n, c) / s(n) : 0\n}",
    # the divisor changes along the loop
    "def f(float(N,C) x, float(C) s) -> (y) {\n  y(n, c) = x(n, c) / s(c)\n}",
    # a constant divisor: LLVM's own business
    "def f(float(N,C) x) -> (y) {\n  y(n, c) = x(n, c) / 3\n}",
])
def test_terms_that_stay(src):
    s = script(src)
    assert "rcp0" not in s and "inv0" not in s


def test_a_select_split_at_its_affine_condition_hoists_in_its_piece():
    s = script("def f(float(N,C) x, float(N) s) -> (y) {\n  y(n, c) = n < N - 1 ? x(n, c) / s(n + 1) : 0\n}")
    assert "rcp0: T.float32 = T.float32(1.0) / s[c0 + 1]" in s


SELF_DIVIDE = "def f(float(N,C) x) -> (y) {\n  y(n, c) = x(n, c) + 1\n  y(n, c) = y(n, c) / y(n, 0)\n}"


def test_a_divisor_the_loop_writes_stays():
    """``y(n, 0)`` is written by the same loop (at c == 0): as one statement
    its reciprocal is not hoisted; cut where the read meets the write
    (polyhedral/split.py), the piece c > 0 no longer writes it and divides by
    the updated element, 1, through a hoisted reciprocal."""
    assert "rcp0" not in tcdsl.compile(SELF_DIVIDE, options={"disk_cache": False, "split_selects": False}).script
    k = tcdsl.compile(SELF_DIVIDE, options={"disk_cache": False})
    assert "rcp0" in k.script
    x = np.random.default_rng(0).uniform(1, 2, (3, 21)).astype(np.float32)
    want = x + 1
    want[:, 0] = 1  # y(n, 0) / y(n, 0), then every later column divided by it
    for kern in (k, tcdsl.compile(SELF_DIVIDE, options={"disk_cache": False, "split_selects": False})):
        np.testing.assert_allclose(kern(x), want, rtol=1e-6)


@pytest.mark.parametrize("N,C", [(1, 1), (3, 17), (5, 40), (2, 0)])
def test_results_against_numpy(N, C):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((N, C)).astype(np.float32)
    gamma, beta = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    k_sm = tcdsl.compile(SOFTMAX, options={"disk_cache": False})
    k_ln = tcdsl.compile(LAYERNORM, options={"disk_cache": False})
    if C == 0:
        assert k_sm(x).shape == (N, 0) and k_ln(x, gamma, beta).shape == (N, 0)
        return
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    np.testing.assert_allclose(k_sm(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * gamma + beta
    np.testing.assert_allclose(k_ln(x, gamma, beta), want, rtol=1e-4, atol=1e-5)
    sel = tcdsl.compile("def f(float(N,C) x, float(N) s) -> (y) {\n  y(n, c) = n < N - 1 ? x(n, c) / s(n + 1) : 0\n}",
                        options={"disk_cache": False})
    s = rng.uniform(1, 2, N).astype(np.float32)
    # TC infers n in 0:N-1 from the read s(n + 1): N - 1 rows, each divided by the next s
    np.testing.assert_allclose(sel(x, s), x64[:N - 1] / s[1:, None], rtol=1e-6)


@pytest.mark.parametrize("body, ref", [
    ("tanh(float(i) / (1 + fabs(X0(0))))", lambda x, i: np.tanh(i / (1 + abs(x[0])))),
    ("exp(float(i) / (1 + fabs(X0(0)))) + X0(i)", lambda x, i: np.exp(i / (1 + abs(x[0]))) + x[1:]),
    ("tanh(float(i) * exp(X0(0)))", lambda x, i: np.tanh(i * np.exp(x[0]))),
])
def test_a_hoisted_term_under_an_index_in_a_formula_builds(body, ref):
    # the hoisted reciprocal (or exp) times float(i), inside the let of a
    # vector tanh/exp: a let-bound float value stopped TVM's build with an
    # internal error (found by the random programs)
    k = tcdsl.compile(f"def f(float(N) X0) -> (O1) {{\n  O1(i) = {body} where i in 1:X0.0\n}}\n",
                      options={"disk_cache": False})
    for n in (1, 2, 17, 40):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        i = np.arange(1, n, dtype=np.float64)
        np.testing.assert_allclose(k(x)[1:], ref(x.astype(np.float64), i), rtol=2e-5, atol=2e-6)

