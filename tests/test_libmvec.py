"""Vector lanes of libm functions through glibc's libmvec (codegen/vecmath.py):
``sin``, ``cos``, ``tan``, ``exp2``, ``log10`` and ``pow`` (of a constant exponent
too) of a vector loop are
one call of the vector variant per vector (not one libm call per lane),
accurate against NumPy in float64 over the whole float range, special values
as libm; a float64 vector wider than the variant is cut into its parts; a
kernel loaded from the disk cache links libmvec itself."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tcdsl
from tcdsl.codegen import vecmath

NO_CACHE = {"disk_cache": False}
pytestmark = pytest.mark.skipif(not vecmath.available(), reason="no glibc libmvec on this machine")


def _calls(k) -> set[str]:
    return set(re.findall(r"call [^(]*@([A-Za-z_0-9.]+)", tcdsl.driver.emit(k, "llvm")))


@pytest.mark.parametrize("fn", ["sin", "cos", "tan"])
def test_trigonometry_in_vector_lanes_over_the_whole_range(fn):
    k = tcdsl.compile(f"def f(float(N) x) -> (y) {{\n  y(i) = {fn}(x(i))\n}}", options=NO_CACHE)
    assert any(c.startswith("_ZGV") and c.endswith(f"_{fn}f") for c in _calls(k)), _calls(k)
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-4, 4, 20_000), rng.uniform(-1e4, 1e4, 20_000),
                        # large arguments need the exact reduction: every exponent up to 2^127
                        rng.integers(1, 0x7F800000, 20_000, dtype=np.int32).view(np.float32) *
                        rng.choice([-1, 1], 20_000)]).astype(np.float32)
    want = getattr(np, fn)(x.astype(np.float64))
    got = k(x).astype(np.float64)
    ulp = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), 1e-30).astype(np.float32))
    assert np.quantile(ulp, 0.999) <= 2 and ulp.max() <= 8, (ulp.max(), x[ulp.argmax()])


def test_special_values_as_libm():
    k = tcdsl.compile("def f(float(N) x) -> (s, c) {\n  s(i) = sin(x(i))\n  c(i) = cos(x(i))\n}", options=NO_CACHE)
    x = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 3e38, -3e38] * 4)
    s, c = k(x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(s, np.sin(x), rtol=1e-6, atol=0)
        np.testing.assert_allclose(c, np.cos(x), rtol=1e-6, atol=0)
    assert np.signbit(s[4]) and s[5] == np.float32(1e-40)


def test_float64_vectors_wider_than_the_variant_are_cut_into_parts():
    k = tcdsl.compile("def f(double(N) x, double(N) e) -> (y, p) {\n  y(i) = sin(x(i)) + exp2(x(i))\n"
                      "  p(i) = pow(fabs(x(i)), e(i))\n}", options=NO_CACHE)
    assert {c for c in _calls(k) if c.startswith("_ZGV")}, _calls(k)
    rng = np.random.default_rng(2)
    x, e = rng.uniform(-20, 20, 1003), rng.uniform(-3, 3, 1003)
    y, p = k(x, e)
    np.testing.assert_allclose(y, np.sin(x) + np.exp2(x), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(p, np.abs(x) ** e, rtol=1e-14)


def test_log10_of_doubles_and_pow_of_floats():
    k = tcdsl.compile("def f(double(N) x, float(N) a, float(N) b) -> (y, p) {\n  y(i) = log10(x(i))\n"
                      "  p(i) = pow(a(i), b(i))\n}", options=NO_CACHE)
    rng = np.random.default_rng(3)
    x = np.exp(rng.uniform(-700, 700, 999))
    a, b = rng.uniform(0, 10, 999).astype(np.float32), rng.uniform(-4, 4, 999).astype(np.float32)
    y, p = k(x, a, b)
    np.testing.assert_allclose(y, np.log10(x), rtol=1e-15)
    np.testing.assert_allclose(p, a.astype(np.float64) ** b, rtol=2e-6)


def test_pow_of_a_constant_exponent_in_vector_lanes():
    """``pow(v, 2.4)`` (a gamma curve): the constant exponent that no product
    or square root computes was one libm call per lane; it is the vector
    variant, within an ulp of NumPy's float32 ``power``, special values as
    libm's (a negative base NaN, 0 and inf kept)."""
    k = tcdsl.compile("def f(float(N) x) -> (y) {\n  y(i) = pow(x(i), 2.4)\n}", options=NO_CACHE)
    assert any(c.startswith("_ZGV") and c.endswith("vv_powf") for c in _calls(k)), _calls(k)
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.random(5000) * 4, np.exp(rng.uniform(-80, 30, 5000)),
                        [0.0, -0.0, np.inf, np.nan, -1.0, 1e-30, 1e30, 1.0]]).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.power(x, np.float32(2.4))
    got = k(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want)
    ulp = np.abs(got[fin].view(np.int32).astype(np.int64) - want[fin].view(np.int32).astype(np.int64))
    assert ulp.max() <= 1, (ulp.max(), x[fin][ulp.argmax()])


def test_a_cached_kernel_links_libmvec_in_a_new_process(tmp_path):
    prog = ("import numpy as np, tcdsl\n"
            "k = tcdsl.compile('def f(float(N) x) -> (y) { y(i) = sin(x(i)) * cos(x(i)) }')\n"
            "x = np.linspace(-50, 50, 1000, dtype=np.float32)\n"
            "print(float(np.abs(k(x) - np.sin(x.astype(np.float64)) * np.cos(x.astype(np.float64))).max()))\n")
    env = {**os.environ, "TCDSL_CACHE_DIR": str(tmp_path)}
    errs = [float(subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True,
                                 check=True).stdout) for _ in range(2)]
    libs = list(tmp_path.rglob("*.so"))
    assert libs and max(errs) < 1e-6
    needed = subprocess.run(["readelf", "-d", str(libs[0])], capture_output=True, text=True).stdout
    assert "libmvec" in needed


def test_float64_exp_and_log_of_a_log_softmax():
    k = tcdsl.compile("def f(double(N, D) x) -> (y) {\n  m(n) max=! x(n, d)\n  s(n) +=! exp(x(n, d) - m(n))\n"
                      "  y(n, d) = x(n, d) - m(n) - log(s(n))\n}", options=NO_CACHE)
    assert {"_ZGVeN8v_exp", "_ZGVdN4v_exp", "_ZGVbN2v_exp"} & _calls(k), _calls(k)
    x = np.random.default_rng(4).standard_normal((37, 301)) * 30
    m = x.max(axis=1, keepdims=True)
    want = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(k(x), want, rtol=1e-13, atol=1e-12)
