"""The libm functions that TVM neither vectorizes nor lowers accurately
(``tanh``, ``sinh``, ``cosh`` and ``atanh`` of float64 or of nested float32
arguments, ``erf`` and ``log1p`` of float64, ``asin``, ``acos``, ``atan``,
``atan2``, ``asinh``, ``acosh``; codegen/vecmath.py): in a vector loop one
libmvec call per vector where glibc has the variant, else one libm call per
lane, and the rest of the loop vectorized either way; accurate against NumPy
over their domains, tiny arguments included."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import tvm

import tcdsl
from tcdsl.codegen import vecmath

NO_CACHE = {"disk_cache": False}

# name -> (arguments drawn from the domain, float64 reference)
_erf = np.vectorize(math.erf)
FUNCTIONS = {
    "tanh": (lambda r, n: np.concatenate([r.uniform(-20, 20, n), _tiny(r, n)]), np.tanh),
    "sinh": (lambda r, n: np.concatenate([r.uniform(-80, 80, n), _tiny(r, n)]), np.sinh),
    "cosh": (lambda r, n: r.uniform(-80, 80, n), np.cosh),
    "atanh": (lambda r, n: np.concatenate([r.uniform(-0.999, 0.999, n), _tiny(r, n)]), np.arctanh),
    "erf": (lambda r, n: np.concatenate([r.uniform(-6, 6, n), _tiny(r, n)]), _erf),
    "log1p": (lambda r, n: np.concatenate([np.expm1(r.uniform(-15, 60, n)), _tiny(r, n)]), np.log1p),
    "asin": (lambda r, n: np.concatenate([r.uniform(-1, 1, n), _tiny(r, n)]), np.arcsin),
    "acos": (lambda r, n: r.uniform(-1, 1, n), np.arccos),
    "atan": (lambda r, n: np.concatenate([np.sinh(r.uniform(-30, 30, n)), _tiny(r, n)]), np.arctan),
    "asinh": (lambda r, n: np.concatenate([np.sinh(r.uniform(-30, 30, n)), _tiny(r, n)]), np.arcsinh),
    "acosh": (lambda r, n: np.cosh(r.uniform(0, 30, n)), np.arccosh),
}


def _tiny(rng, n):
    return np.exp(rng.uniform(-60, -5, n)) * rng.choice([-1, 1], n)


def _calls(k) -> set[str]:
    return set(re.findall(r"call [^(]*@([A-Za-z_0-9.]+)", tcdsl.driver.emit(k, "llvm")))


def _ulps(got: np.ndarray, want: np.ndarray, dtype) -> np.ndarray:
    tiny = np.finfo(dtype).tiny
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.maximum(np.abs(want), tiny).astype(dtype)).astype(
        np.float64)


@pytest.mark.parametrize("dtype", ["float", "double"])
@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_in_vector_lanes_against_numpy(fn, dtype):
    draw, ref = FUNCTIONS[fn]
    arg = "x(i)" if dtype == "double" else "x(i) * exp(y(i))"  # exp(0) = 1
    k = tcdsl.compile(f"def f({dtype}(N) x, {dtype}(N) y) -> (z) {{\n  z(i) = {fn}({arg}) * 2\n}}", options=NO_CACHE)
    np_dtype = np.float64 if dtype == "double" else np.float32
    x = draw(np.random.default_rng(7), 4000).astype(np_dtype)
    got = k(x, np.zeros_like(x))
    ulp = _ulps(got / 2, ref(x.astype(np.float64)), np_dtype)
    assert ulp.max() <= 4, (fn, dtype, ulp.max(), x[ulp.argmax()])
    calls = _calls(k)
    # float32 tanh, erf and log1p are vector formulas of tcdsl's (codegen/formulas.py)
    formula = dtype == "float" and fn in ("tanh", "erf", "log1p")
    if not formula and vecmath.available() and vecmath.variant(f"tirx.{fn}", f"{np_dtype.__name__}x4"):
        assert any(c.startswith("_ZGV") for c in calls), calls


def test_atan2_of_two_vectors():
    k = tcdsl.compile("def f(double(N) y, double(N) x, float(N) a, float(N) b) -> (p, q) {\n"
                      "  p(i) = atan2(y(i), x(i))\n  q(i) = atan2(a(i) * 1, b(i))\n}", options=NO_CACHE)
    rng = np.random.default_rng(8)
    y, x = rng.uniform(-10, 10, 999), rng.uniform(-10, 10, 999)
    p, q = k(y, x, y.astype(np.float32), x.astype(np.float32))
    np.testing.assert_allclose(p, np.arctan2(y, x), rtol=4e-16, atol=0)
    np.testing.assert_allclose(q, np.arctan2(y.astype(np.float32), x.astype(np.float32)), rtol=4e-7, atol=0)


def test_without_libmvec_one_libm_call_per_lane(monkeypatch):
    """Where glibc has no variant (here: pretended), each lane calls libm and
    the loop's other work stays in vectors."""
    monkeypatch.setattr(vecmath, "variant", lambda op, dtype: None)
    k = tcdsl.compile("def f(double(N) x) -> (y) {\n  y(i) = erf(x(i)) + tanh(x(i) * 3)\n}", options=NO_CACHE)
    calls = _calls(k)
    assert not any(c.startswith("_ZGV") for c in calls) and {"erf", "tanh"} <= calls, calls
    x = np.random.default_rng(9).uniform(-3, 3, 1001)
    np.testing.assert_allclose(k(x), _erf(x) + np.tanh(x * 3), rtol=1e-15, atol=1e-16)


def test_an_elman_rnn_in_float64_takes_tanh_in_vectors():
    src = open("examples/rnn/elman.tc").read().replace("float(", "double(")
    k = tcdsl.compile(src, options=NO_CACHE)
    if vecmath.available():
        assert any(c.startswith("_ZGV") and c.endswith("_tanh") for c in _calls(k)), _calls(k)
    rng = np.random.default_rng(10)
    T, B, C = 5, 3, 37
    x, h0 = rng.standard_normal((T, B, C)), rng.standard_normal((B, C))
    wi, wh = rng.standard_normal((C, C)) / 6, rng.standard_normal((C, C)) / 6
    h, want = h0, []
    for t in range(T):
        h = np.tanh(h @ wh + x[t] @ wi)
        want.append(h)
    np.testing.assert_allclose(k(x, h0, wi, wh), np.stack(want), rtol=1e-13, atol=1e-14)


def test_the_vectorizer_setting_is_undone_after_a_build():
    tcdsl.compile("def f(double(N) x) -> (y) { y(i) = asin(x(i)) }", options=NO_CACHE)
    assert tvm.ir.Op.get("tirx.asin").get_attr("TVectorizable") is None
    assert tvm.ir.Op.get("tirx.tanh").get_attr("TVectorizable")  # TVM's own, kept
