"""Tests for the builtins (tcdsl/sema/builtins.py, tcdsl/codegen/mathlib.py): every
builtin against its NumPy reference on llvm,
CUDA source generation for every builtin, and nvcc on that source."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import re
import shutil
import time
from typing import Callable

import numpy as np
import pytest
import tvm
from tvm import tirx
from tvm.tirx import ForKind, IterVar

from tcdsl.codegen import mathlib as _mathlib
from tcdsl.sema import builtins as _builtins

BUILTINS, Builtin, FORMULAS = _builtins.BUILTINS, _builtins.Builtin, _mathlib.FORMULAS
float_const, lookup, lower = _mathlib.float_const, _builtins.lookup, _mathlib.lower

DTYPES = ("float32", "float64")
CUDA_TARGET = {"kind": "cuda", "arch": "sm_90"}

# tc/lang/builtins.h of facebookresearch/TensorComprehensions, verbatim.
TC_BUILTINS = {
    "acos": 1, "acosh": 1, "asin": 1, "asinh": 1, "atan2": 2, "atan": 1, "atanh": 1, "cbrt": 1,
    "ceil": 1, "copysign": 2, "cos": 1, "cosh": 1, "cospi": 1, "cyl_bessel_i0": 1,
    "cyl_bessel_i1": 1, "erfc": 1, "erfcinv": 1, "erfcx": 1, "erf": 1, "erfinv": 1, "exp10": 1,
    "exp2": 1, "exp": 1, "expm1": 1, "fabs": 1, "fdim": 2, "fdivide": 2, "floor": 1, "fma": 3,
    "fmax": 2, "fmin": 2, "fmod": 2, "hypot": 2, "j0": 1, "j1": 1, "lgamma": 1, "log10": 1,
    "log1p": 1, "log2": 1, "logb": 1, "log": 1, "nextafter": 2, "norm3d": 3, "norm4d": 4,
    "normcdf": 1, "normcdfinv": 1, "pow": 2, "rcbrt": 1, "remainder": 2, "rhypot": 2,
    "rnorm3d": 3, "rnorm4d": 4, "round": 1, "rsqrt": 1, "sin": 1, "sinh": 1, "sinpi": 1,
    "sqrt": 1, "tan": 1, "tanh": 1, "tgamma": 1, "trunc": 1, "y0": 1, "y1": 1,
}

# --------------------------------------------------------------------------- #
# Input domains: name -> function (rng, dtype) -> list of argument arrays
# --------------------------------------------------------------------------- #
N_RANDOM = 512
Draw = Callable[[np.random.Generator], np.ndarray]
Gen = Callable[[np.random.Generator, str], list[np.ndarray]]


def _uniform(lo: float, hi: float) -> Draw:
    return lambda rng: rng.uniform(lo, hi, N_RANDOM)


def _logu(lo: float, hi: float, signed: bool = False) -> Draw:
    """Log-uniform magnitudes in [lo, hi], optionally with random signs."""

    def draw(rng):
        x = np.exp(rng.uniform(math.log(lo), math.log(hi), N_RANDOM))
        return x * rng.choice([-1.0, 1.0], N_RANDOM) if signed else x

    return draw


def _mix(*draws: Draw) -> Draw:
    """A shuffled mixture of several draws (each makes N_RANDOM points; a share is kept)."""

    def draw(rng):
        parts = [d(rng)[: N_RANDOM // len(draws) + 1] for d in draws]
        return rng.permutation(np.concatenate(parts))[:N_RANDOM]

    return draw


def _dom(*draws: Draw, extra: tuple = ()) -> Gen:
    """Arguments drawn independently; ``extra`` points (one tuple each) appended."""

    def gen(rng, dtype):
        cols = [np.asarray(d(rng), dtype=dtype) for d in draws]
        if extra:
            rows = np.asarray(extra, dtype=np.float64).reshape(len(extra), len(draws))
            cols = [np.concatenate([c, rows[:, k].astype(dtype)]) for k, c in enumerate(cols)]
        return cols

    return gen


def _by_dtype(f32: Gen, f64: Gen) -> Gen:
    return lambda rng, dtype: (f32 if dtype == "float32" else f64)(rng, dtype)


_INF, _NAN = math.inf, math.nan
_HALVES = tuple((k + 0.5,) for k in range(-4, 4)) + ((0.49999997,), (1e7 + 1,))
_TINY = ((1e-30,), (-1e-30,), (0.0,))
_SMALL = _logu(1e-10, 1, signed=True)  # relative accuracy near 0
_PI_POINTS = _HALVES + ((3,), (1e6 + 0.25,), (2**30,), (-7.75,), (_INF,), (_NAN,))

DOMAINS: dict[str, Gen] = {
    "acos": _dom(_uniform(-1, 1), extra=((1,), (-1,), (0,))),
    "acosh": _dom(_logu(1, 1e6), extra=((1,),)),
    "asin": _dom(_mix(_uniform(-1, 1), _SMALL), extra=((1,), (-1,), *_TINY)),
    "asinh": _dom(_logu(1e-6, 1e6, signed=True)),
    "atan2": _dom(_uniform(-10, 10), _uniform(-10, 10), extra=((0, -1), (1, 0))),
    "atan": _dom(_logu(1e-6, 1e6, signed=True)),
    "atanh": _dom(_mix(_uniform(-1, 1), _SMALL),
                  extra=((1e-4,), (-0.9999,), *_TINY, (1,), (-1,))),
    "cbrt": _dom(_logu(1e-10, 1e10, signed=True), extra=((0,), (27,), (-8,))),
    "ceil": _dom(_uniform(-100, 100), extra=_HALVES),
    "copysign": _dom(_uniform(-10, 10), _uniform(-10, 10), extra=((1, -0.0), (-2, 0.0))),
    "cos": _dom(_uniform(-10, 10)),
    "cosh": _dom(_uniform(-80, 80)),
    "cospi": _dom(_mix(_uniform(-10, 10), _logu(1e-10, 1e7, signed=True)), extra=_PI_POINTS),
    # float32 I0/I1 overflow near 90; float64 near 713.
    "cyl_bessel_i0": _by_dtype(
        _dom(_mix(_uniform(-85, 85), _logu(1e-10, 10, signed=True)),
             extra=((0,), (10,), (-10,), (_INF,), (_NAN,))),
        _dom(_mix(_uniform(-700, 700), _logu(1e-10, 30, signed=True)),
             extra=((0,), (22,), (-22,), (1.5,), (_INF,)))),
    "cyl_bessel_i1": _by_dtype(
        _dom(_mix(_uniform(-85, 85), _logu(1e-10, 10, signed=True)),
             extra=((0,), (10,), (-10,), (_INF,), (-_INF,))),
        _dom(_mix(_uniform(-700, 700), _logu(1e-10, 30, signed=True)),
             extra=((0,), (22,), (-22,), (1.5,), (_INF,), (-_INF,)))),
    "erfc": _dom(_uniform(-5, 9)),
    "erfcinv": _by_dtype(
        _dom(_uniform(0, 2),
             extra=((0,), (2,), (1,), (1e-30,), (2 - 2**-23,), (1e-7,), (0.4999,), (3,))),
        _dom(_logu(1e-300, 2),
             extra=((0,), (2,), (1,), (1.999999,), (1.5,), (0.4999,), (-1,)))),
    # The lowering switches method at 6 (float32) / 10 (float64).
    "erfcx": _by_dtype(
        _dom(_mix(_uniform(-9, 60), _uniform(-1, 8)),
             extra=((5.99,), (6.0,), (-_INF,), (_INF,), (0,))),
        _dom(_mix(_uniform(-26, 1000), _uniform(-1, 12)),
             extra=((9.99,), (10.0,), (-_INF,), (_INF,), (0,)))),
    "erf": _dom(_mix(_uniform(-6, 6), _SMALL), extra=_TINY),
    "erfinv": _dom(_mix(_uniform(-1, 1), _SMALL),
                   extra=((1,), (-1,), *_TINY, (1 - 2**-24,), (0.5,), (1e-6,), (2,))),
    "exp10": _dom(_uniform(-37, 38)),
    "exp2": _dom(_uniform(-120, 120)),
    "exp": _dom(_uniform(-80, 80)),
    "expm1": _dom(_logu(1e-8, 80, signed=True), extra=((0,), (-20,), (-104,), (-200,), (88.5,), (88.7,),
                                                       (1e-7,), (-6e-8,), (_INF,), (-_INF,), (_NAN,), *_TINY)),
    "fabs": _dom(_uniform(-10, 10)),
    "fdim": _dom(_uniform(-10, 10), _uniform(-10, 10)),
    "fdivide": _dom(_uniform(-10, 10), _logu(1e-3, 1e3, signed=True)),
    "floor": _dom(_uniform(-100, 100), extra=_HALVES),
    "fma": _dom(_uniform(-10, 10), _uniform(-10, 10), _uniform(-10, 10)),
    "fmax": _dom(_uniform(-10, 10), _uniform(-10, 10), extra=((_NAN, 1), (1, _NAN), (-1, _NAN))),
    "fmin": _dom(_uniform(-10, 10), _uniform(-10, 10), extra=((_NAN, 1), (1, _NAN), (-1, _NAN))),
    "fmod": _dom(_uniform(-100, 100), _logu(0.1, 10, signed=True)),
    "hypot": _dom(_logu(1e-6, 1e6, signed=True), _logu(1e-6, 1e6, signed=True)),
    "j0": _dom(_uniform(-50, 50)),
    "j1": _dom(_uniform(-50, 50)),
    "lgamma": _dom(_mix(_logu(1e-3, 1e3), _uniform(0.8, 2.5)), extra=((1,), (2,), (0.5,), (0,))),
    "log10": _dom(_logu(1e-30, 1e30), extra=((1,), (10,), (1000,), (0.001,), (1e-40,), (0,), (-1,), (_INF,), (_NAN,))),
    "log1p": _dom(_logu(1e-8, 1e8), extra=((-0.5,), (-0.99,), (-1,), (-2,), (1e30,), (3e38,), (-1e-7,), (6e-8,),
                                         (_INF,), (-_INF,), (_NAN,), *_TINY)),
    "log2": _dom(_logu(1e-30, 1e30), extra=((1,), (8,), (0.125,), (2.0**-140,), (0,), (-1,), (_INF,), (_NAN,))),
    "logb": _dom(_logu(1e-30, 1e30, signed=True), extra=((0,), (1,), (0.75,), (_INF,))),
    "log": _dom(_logu(1e-30, 1e30)),
    "nextafter": _dom(_uniform(-10, 10), _uniform(-10, 10), extra=((0, 1), (1, 1))),
    "norm3d": _dom(*[_logu(1e-3, 1e3, signed=True)] * 3),
    "norm4d": _dom(*[_logu(1e-3, 1e3, signed=True)] * 4),
    "normcdf": _dom(_uniform(-13, 9), extra=((0,), (-_INF,), (_INF,), (-40,), (-38.4,), (_NAN,))),
    "normcdfinv": _by_dtype(
        _dom(_uniform(0, 1), extra=((0,), (1,), (0.5,), (1e-30,), (1 - 2**-24,))),
        _dom(_logu(1e-300, 1), extra=((0,), (1,), (0.5,), (0.999999,)))),
    "pow": _dom(_logu(0.1, 10), _uniform(-5, 5), extra=((-2, 3), (0, 0))),
    "rcbrt": _dom(_logu(1e-10, 1e10, signed=True)),
    "remainder": _dom(_uniform(-100, 100), _logu(0.1, 10, signed=True), extra=((5, 2), (7, 2))),
    "rhypot": _dom(_logu(1e-6, 1e6, signed=True), _logu(1e-6, 1e6, signed=True)),
    "rnorm3d": _dom(*[_logu(1e-3, 1e3, signed=True)] * 3),
    "rnorm4d": _dom(*[_logu(1e-3, 1e3, signed=True)] * 4),
    "round": _dom(_uniform(-100, 100), extra=_HALVES),
    "rsqrt": _dom(_logu(1e-30, 1e30)),
    "sin": _dom(_mix(_uniform(-10, 10), _logu(1e-10, 1, signed=True))),
    "sinh": _dom(_mix(_uniform(-80, 80), _logu(1e-10, 1, signed=True))),
    "sinpi": _dom(_mix(_uniform(-10, 10), _logu(1e-10, 1e7, signed=True)), extra=_PI_POINTS),
    "sqrt": _dom(_logu(1e-30, 1e30), extra=((0,),)),
    "tan": _dom(_mix(_uniform(-1.5, 1.5), _logu(1e-10, 1, signed=True))),
    "tanh": _dom(_mix(_uniform(-20, 20), _SMALL), extra=_TINY),
    "tgamma": _dom(_uniform(0.05, 30), extra=((-0.5,), (-2.5,), (1,), (5,))),
    "trunc": _dom(_uniform(-100, 100), extra=_HALVES),
    "y0": _dom(_uniform(0.01, 50)),
    "y1": _dom(_uniform(0.01, 50)),
    "sigmoid": _dom(_uniform(-85, 85), extra=_TINY),
}

# --------------------------------------------------------------------------- #
# Tolerances: rtol 1e-5 (float32) / 1e-10 (float64), unless listed here. The atol is the
# smallest normal number: below it (subnormal results, or results that underflow the
# dtype but not float64) relative precision is not available in the dtype at all.
# --------------------------------------------------------------------------- #
RTOL = {"float32": 1e-5, "float64": 1e-10}
ATOL: dict[tuple[str, str], float] = {}


def _tolerance(name: str, dtype: str) -> tuple[float, float]:
    return RTOL[dtype], ATOL.get((name, dtype), float(np.finfo(dtype).smallest_normal))


# --------------------------------------------------------------------------- #
# Kernels
# --------------------------------------------------------------------------- #
_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _externs(func: tirx.PrimFunc) -> set[str]:
    return set(re.findall(r'call_pure_extern\("\w+", "(\w+)"', func.script()))


def _elementwise(name: str, dtype: str) -> tirx.PrimFunc:
    """out[i] = name(a0[i], a1[i], ...) over a symbolic length n."""
    n = tirx.Var("n", "int32")
    ins = [tirx.decl_buffer((n,), dtype, name=f"a{k}") for k in range(BUILTINS[name].arity)]
    out = tirx.decl_buffer((n,), dtype, name="out")
    i = tirx.Var("i", "int32")
    value = lower(name, [b[i] for b in ins], dtype)
    body = tirx.For(i, 0, n, ForKind.SERIAL, tirx.BufferStore(out, value, [i]))
    return tirx.PrimFunc([*ins, out], body).with_attr("global_symbol", f"k_{name}")


@functools.cache
def _cpu_kernel(name: str, dtype: str):
    func = _elementwise(name, dtype)
    # A libm name the JIT cannot resolve segfaults the process; fail politely instead.
    missing = [s for s in _externs(func) if not hasattr(_LIBM, s)]
    assert not missing, f"{name} lowers to symbols missing from libm: {missing}"
    return tvm.compile(func, target="llvm")[f"k_{name}"]


def _thread(tag: str) -> IterVar:
    return IterVar(None, tag, IterVar.ThreadIndex, tag)


def _cuda_func(name: str, dtype: str, size: int = 1024) -> tirx.PrimFunc:
    ins = [tirx.decl_buffer((size,), dtype, name=f"a{k}") for k in range(BUILTINS[name].arity)]
    out = tirx.decl_buffer((size,), dtype, name="out")
    bx, tx = tirx.Var("bx", "int32"), tirx.Var("tx", "int32")
    i = bx * 128 + tx
    store = tirx.BufferStore(out, lower(name, [b[i] for b in ins], dtype), [i])
    body = tirx.For(bx, 0, size // 128, ForKind.THREAD_BINDING,
                    tirx.For(tx, 0, 128, ForKind.THREAD_BINDING, store,
                             thread_binding=_thread("threadIdx.x")),
                    thread_binding=_thread("blockIdx.x"))
    return tirx.PrimFunc([*ins, out], body).with_attr("global_symbol", f"k_{name}_{dtype}")


def _cuda_target() -> tvm.target.Target:
    return tvm.target.Target(CUDA_TARGET, host={"kind": "llvm"})


def _cuda_source(funcs: list[tirx.PrimFunc]) -> str:
    mod = tvm.IRModule({str(f.attrs["global_symbol"]): f for f in funcs})
    ex = tvm.compile(mod, target=_cuda_target())
    return ex.mod.imports[0].inspect_source()


def _seed(name: str, dtype: str) -> int:
    return sum(map(ord, name + dtype)) * 7919  # deterministic across runs (hash() is salted)


def _inputs(name: str, dtype: str) -> list[np.ndarray]:
    return DOMAINS[name](np.random.default_rng(_seed(name, dtype)), dtype)


# --------------------------------------------------------------------------- #
# Tests
# --------------------------------------------------------------------------- #


def test_table_matches_tc_plus_sigmoid():
    assert {n: b.arity for n, b in BUILTINS.items()} == {**TC_BUILTINS, "sigmoid": 1}
    assert all(b.name == n for n, b in BUILTINS.items())
    assert "min" not in BUILTINS and "max" not in BUILTINS


def test_lookup():
    assert lookup("erfinv") is BUILTINS["erfinv"]
    assert isinstance(lookup("fma"), Builtin) and lookup("fma").arity == 3
    assert lookup("no_such_function") is None


def test_lower_checks_arity():
    x = tirx.Var("x", "float32")
    with pytest.raises(ValueError, match="fma takes 3"):
        lower("fma", [x, x], "float32")


def test_formulas_are_builtins():
    assert FORMULAS <= set(BUILTINS)


def test_domains_cover_every_builtin():
    assert set(DOMAINS) == set(BUILTINS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_extern_exists_in_glibc(dtype):
    # Checked up front, before any kernel reaches the LLVM JIT (where a miss is a segfault).
    externs = set().union(*(_externs(_elementwise(n, dtype)) for n in BUILTINS))
    assert externs, "expected some libm calls"
    assert sorted(s for s in externs if not hasattr(_LIBM, s)) == []


def test_lower_rejects_other_dtypes():
    x = tirx.Var("x", "float16")
    with pytest.raises(ValueError):
        lower("exp", [x], "float16")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_llvm_matches_numpy(name, dtype):
    args = _inputs(name, dtype)
    out = np.empty_like(args[0])
    _cpu_kernel(name, dtype)(*args, out)
    want = BUILTINS[name].numpy(*args)
    rtol, atol = _tolerance(name, dtype)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=f"{name} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_compiled_vector_loops_match_numpy(name, dtype):
    """The same through tcdsl.compile: the host CPU target and vectorized loops
    (8 lanes plus a scalar tail), where TVM lowers some intrinsics differently
    (tirx.cosh had no vector lowering) and where the float32 formulas of exp,
    tanh and sigmoid are used."""
    import tcdsl

    args = _inputs(name, dtype)
    arity = BUILTINS[name].arity
    params = ", ".join(f"{'float' if dtype == 'float32' else 'double'}(N) a{k}" for k in range(arity))
    call = ", ".join(f"a{k}(i)" for k in range(arity))
    k = tcdsl.compile(f"def f({params}) -> (out) {{ out(i) = {name}({call}) }}", options={"disk_cache": False})
    assert "T.vectorized" in k.script
    out = k(*args)
    rtol, atol = _tolerance(name, dtype)
    np.testing.assert_allclose(out.astype(np.float64), BUILTINS[name].numpy(*args), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=f"{name} {dtype}")


def test_numpy_references_return_float64():
    x = np.array([0.5, 1.5], np.float32)
    for name in ("erfinv", "cyl_bessel_i1", "exp", "round"):
        assert BUILTINS[name].numpy(x).dtype == np.float64


def test_numpy_reference_values():
    ref = {n: b.numpy for n, b in BUILTINS.items()}
    halves = np.array([0.5, 1.5, 2.5, -0.5, 0.49999999999999994])
    assert list(ref["round"](halves)) == [1, 2, 3, -1, 0]
    assert list(ref["erfinv"](np.array([1.0, -1.0, 0.0]))) == [math.inf, -math.inf, 0]
    assert np.isnan(ref["erfcinv"](np.array([2.5]))[0])
    one, two = np.float32(1), np.float32(2)
    assert ref["nextafter"](one, two) == np.nextafter(one, two)
    # Values from tables (Abramowitz & Stegun) and closed forms.
    np.testing.assert_allclose(ref["cyl_bessel_i1"](np.array([1.0, -2.0])),
                               [0.5651591039924851, -1.5906368546373291], rtol=1e-15)
    np.testing.assert_allclose(ref["cyl_bessel_i1"](np.array([50.0])), [2.903078590103557e20],
                               rtol=1e-13)
    np.testing.assert_allclose(ref["erfcx"](np.array([1.0, 3.0])),
                               [0.42758357615580705, 0.17900115118138995], rtol=1e-14)
    np.testing.assert_allclose(ref["normcdfinv"](np.array([0.975])), [1.959963984540054],
                               rtol=1e-14)
    np.testing.assert_allclose(ref["sinpi"](np.array([1 / 6, 0.25])), [0.5, math.sqrt(0.5)],
                               rtol=1e-15)


def test_float_const_is_exact_for_cuda():
    # TVM prints float64 literals in CUDA with 15 fixed decimals; float_const avoids that.
    assert isinstance(float_const(0.5, "float64"), tirx.FloatImm)
    assert not isinstance(float_const(1 / 3, "float64"), tirx.FloatImm)
    assert float_const(0.1, "float32").value == float(np.float32(0.1))
    src = _cuda_source([_cuda_func("cyl_bessel_i0", "float64")])
    assert "0.000000000000000)" not in src  # no float64 coefficient printed as zero


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_cuda_codegen(name, dtype):
    src = _cuda_source([_cuda_func(name, dtype)])
    assert f"k_{name}_{dtype}_kernel" in src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype", DTYPES)
def test_nvcc_compiles_all_builtins(dtype):
    from tvm.support import nvcc

    src = _cuda_source([_cuda_func(n, dtype) for n in sorted(BUILTINS)])
    with _cuda_target():
        nvcc.compile_cuda(src, target_format="fatbin", compiler="nvcc")


@pytest.mark.parametrize("dtype", DTYPES)
def test_nested_formulas_compile_quickly(dtype):
    # TVM's LLVM code generator substitutes every Let binding into later ones, so compile
    # time grows with the fully inlined size: formulas must keep references to x few.
    # (Deeper nests do blow up: sinpi nested 5 deep takes over a minute.)
    x = tirx.decl_buffer((16,), dtype, name="x")
    out = tirx.decl_buffer((16,), dtype, name="out")
    i = tirx.Var("i", "int32")
    e = x[i]
    for name in ("cyl_bessel_i1", "sinpi", "erfcx"):
        e = lower(name, [e], dtype)
    f = tirx.PrimFunc([x, out], tirx.For(i, 0, 16, ForKind.SERIAL, tirx.BufferStore(out, e, [i])))
    start = time.perf_counter()
    tvm.compile(f.with_attr("global_symbol", "nested"), target="llvm")
    assert time.perf_counter() - start < 10.0


def test_float32_log2_is_exact_at_powers_of_two_and_log_formulas_stay_within_2_ulps():
    """log2, log10, log1p and expm1 in float32 are vectorizable formulas over
    the exponent and a polynomial (codegen/formulas.py): log2 of every power
    of two, subnormal ones included, is its exponent exactly (a bucket index
    ``floor(log2(x))`` must not drop by one), and the others stay within
    2.5 ulps of the float64 result over 10 decades."""
    import tcdsl

    twos = (2.0 ** np.arange(-149, 128)).astype(np.float32)
    k = tcdsl.compile("def f(float(N) a) -> (o) { o(i) = log2(a(i)) }", options={"disk_cache": False})
    assert "T.vectorized" in k.script and "log2" not in k.script.split("def f", 1)[1]
    np.testing.assert_array_equal(k(twos), np.arange(-149, 128).astype(np.float32))
    rng = np.random.default_rng(11)
    x = np.exp(rng.uniform(-11.5, 11.5, 100_000)).astype(np.float32)
    for name, ref, arg in [("log2", np.log2, x), ("log10", np.log10, x), ("log1p", np.log1p, x - 0.5),
                           ("expm1", np.expm1, np.log(x))]:
        k = tcdsl.compile(f"def f(float(N) a) -> (o) {{ o(i) = {name}(a(i)) }}", options={"disk_cache": False})
        a = arg.astype(np.float32)
        want = ref(a.astype(np.float64))
        ulps = np.abs(k(a) - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        assert ulps.max() <= 2.5, (name, ulps.max(), a[ulps.argmax()])


@pytest.mark.parametrize("n", ["0", "1", "2", "3", "4", "-1", "5", "2.5", "-1.5", "0.5", "-0.5", "1.5", "-2.5",
                               "3.5"])
def test_pow_of_a_constant_exponent(n, capfd):
    """``pow(x, n)`` of a constant n in -1..4 is products in the vector lanes
    (no libm call per lane), and of n = +-0.5, +-1.5, +-2.5 a square root in
    float64, as close to NumPy as libm's (the signs of zeros, infinities and
    NaNs included); other constants call libm's pow, and TVM's warning about
    ``pow(x, 3)`` never reaches the user."""
    import tcdsl

    x = np.array([0.0, -0.0, 1.5, -2.25, 3e10, -3e-20, np.inf, -np.inf, np.nan, 7.0, 1e-45, -1.0, 0.3, 2.0, -5.5,
                  1e30, 1e-30] * 2, np.float32)
    k = tcdsl.compile(f"def f(float(N) a) -> (o) {{ o(i) = pow(a(i), {n}) }}", options={"disk_cache": False})
    body = k.script.split("def f", 1)[1]
    assert ("pow" in body) == (n in ("5", "3.5")) and "T.vectorized" in body
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), float(n)).astype(np.float32)
    np.testing.assert_allclose(k(x), want, rtol=2.5e-7, atol=0, equal_nan=True)
    assert "Detected pow" not in capfd.readouterr().err
