"""The table of TC builtin functions: name -> arity, NumPy reference, TIR lowering.

The names and arities are those of Tensor Comprehensions (``tc/lang/builtins.h``,
taken from the CUDA float math API), plus ``sigmoid``. ``min``/``max`` are not
builtins: the language handles them.

Each :class:`Builtin` carries

* ``numpy``: a float64-accurate reference, elementwise on arrays. It uses only
  NumPy, :mod:`math` and, for ``j0 j1 y0 y1 lgamma``, glibc's libm through
  :mod:`ctypes`. Inputs of any float dtype are evaluated as float64 and a
  float64 array comes back; the one exception is ``nextafter``, whose answer
  depends on the format, so it keeps the inputs' dtype.
* ``lower(args, dtype)``: a TIR expression of ``dtype``. The caller has already
  cast every argument to ``dtype``, which is ``"float32"`` or ``"float64"``.

Rules the lowerings follow:

* float16 is not handled here: the caller computes half math in float32 and
  casts back (TVM lacks most fp16 intrinsics on both targets).
* Every lowering is target-agnostic: it compiles and is correct on ``llvm`` (CPU)
  and ``cuda``. ``tirx`` intrinsics are used where they exist and are accurate;
  other libm names go through ``call_pure_extern`` only when they exist in BOTH
  glibc's libm and CUDA's math library (float32 names take the ``f`` suffix).
  Nothing may reach the LLVM JIT as an unknown symbol: a missing symbol there is
  not an exception but a segfault. CUDA-only functions (``normcdf``, ``erfinv``,
  ``cospi``, ``cyl_bessel_i0``, ...) are explicit TIR formulas instead.
* float64 constants go through :func:`float_const`: TVM's CUDA code generator
  prints float64 literals with 15 fixed decimals (``1/3`` -> ``0.333333333333333``,
  ``1e-20`` -> ``0.000000000000000``), so inexact ones are emitted as the
  reinterpreted int64 bit pattern instead.
* A value that a formula uses more than once is bound with ``tirx.Let``, so the
  generated code computes it once. This does NOT bound compile time: TVM's LLVM
  code generator binds every Let in an ``arith.Analyzer``, which substitutes the
  earlier bindings, so its work grows with the fully inlined size of the
  expression. The formulas therefore keep the number of references to their
  arguments small, and one of them compiles in well under 0.1 s; but nesting
  formulas multiplies the sizes (``sinpi`` nested 4 deep: 2 s, 5 deep: 90 s).
  A caller that nests the names in :data:`FORMULAS` should store the inner
  result in a local temporary first.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import struct
from decimal import Context, Decimal
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np
import tvm
from tvm import tirx

__all__ = ["Builtin", "BUILTINS", "FORMULAS", "lookup", "float_const"]

Lower = Callable[[Sequence["tirx.PrimExpr"], str], "tirx.PrimExpr"]


@dataclass(frozen=True, slots=True)
class Builtin:
    """One builtin: its TC name, arity, NumPy reference and TIR lowering."""

    name: str
    arity: int
    numpy: Callable[..., np.ndarray]
    lower: Lower


# --------------------------------------------------------------------------- #
# TIR helpers
# --------------------------------------------------------------------------- #

_DTYPES = ("float32", "float64")


def _check_dtype(dtype: str) -> None:
    if dtype not in _DTYPES:
        raise ValueError(f"builtins lower float32/float64 only, got {dtype!r}")


def float_const(value: float, dtype: str) -> "tirx.PrimExpr":
    """A float constant that is exact on every target.

    float32 values are rounded to float32 here, so that no target rounds twice.
    float64 values that TVM's CUDA printer (``%.15f``) would not reproduce are
    emitted as ``reinterpret(int64 bits)``; LLVM folds that back to a constant.
    """
    _check_dtype(dtype)
    value = float(value)
    if dtype == "float32":
        return tirx.const(float(np.float32(value)), dtype)
    if not math.isfinite(value) or float(f"{value:.15f}") == value:
        return tirx.const(value, dtype)
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    return tirx.reinterpret(dtype, tirx.const(bits, "int64"))


def _c(value: float, dtype: str) -> "tirx.PrimExpr":
    return float_const(value, dtype)


# Expressions cheap enough to repeat. ``tirx.BufferLoad`` is a factory function in
# TVM 0.27, so the class is taken from a sample load.
_LOAD = type(tirx.decl_buffer((1,), "float32", name="probe")[0])
_LEAVES = (tirx.Var, tirx.FloatImm, tirx.IntImm, _LOAD)


def _let(dtype: str, value: "tirx.PrimExpr",
         body: Callable[["tirx.PrimExpr"], "tirx.PrimExpr"]) -> "tirx.PrimExpr":
    """``body(v)`` with ``v`` bound to ``value`` once, unless ``value`` is a leaf."""
    if isinstance(value, _LEAVES):
        return body(value)
    var = tirx.Var("bt", dtype)
    return tirx.Let(var, value, body(var))


def _horner(coeffs: Sequence[float], t: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    """sum(coeffs[k] * t**k), coefficients in increasing degree."""
    acc = _c(coeffs[-1], dtype)
    for a in reversed(coeffs[:-1]):
        acc = _c(a, dtype) + acc * t
    return acc


def _select(cond: "tirx.PrimExpr", a: "tirx.PrimExpr", b: "tirx.PrimExpr") -> "tirx.PrimExpr":
    return tirx.Select(cond, a, b)


def _libm(name: str) -> Lower:
    """A function that glibc's libm and CUDA both provide (``name`` / ``namef``)."""

    def lower(args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
        _check_dtype(dtype)
        symbol = name + ("f" if dtype == "float32" else "")
        return tirx.call_pure_extern(dtype, symbol, *args)

    return lower


def _intrin(fn: Callable[..., "tirx.PrimExpr"]) -> Lower:
    """A tirx intrinsic; TVM lowers it per target (llvm intrinsic, libm or CUDA)."""

    def lower(args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
        _check_dtype(dtype)
        return fn(*args)

    return lower


def _formula(fn: Callable[..., "tirx.PrimExpr"]) -> Lower:
    """A TIR formula ``fn(*args, dtype)``."""

    def lower(args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
        _check_dtype(dtype)
        return fn(*args, dtype)

    return lower


# --------------------------------------------------------------------------- #
# Vectorizable exp, tanh and sigmoid (float32)
# --------------------------------------------------------------------------- #
# LLVM turns ``llvm.exp`` and ``tanhf`` on a vector into one scalar libm call per
# lane, which made every recurrent kernel's activation the bottleneck.  These
# float32 formulas (Cephes' ``expf`` and ``tanhf``, about 1 ulp) use only
# arithmetic, comparisons and bit casts, so a vectorized loop stays vectorized.
# They are used where the argument contains no call or ``Let`` of its own:
# nesting them multiplies the size of the expression TVM's code generator
# analyses (see the module docstring), so an inner call falls back to libm.

_EXP_P = (5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3,
          1.3981999507e-3, 1.9875691500e-4)
_TANH_P = (-3.33332819422e-1, 1.33314422036e-1, -5.37397155531e-2, 2.06390887954e-2,
           -5.70498872745e-3)


def _simple(x: "tirx.PrimExpr") -> bool:
    """No call, ``Let`` or ``Select`` inside ``x`` (see above)."""
    if isinstance(x, (tvm.ir.expr.Call, tirx.Let, tirx.Select)):
        return False
    return all(_simple(getattr(x, f)) for f in ("a", "b", "value") if hasattr(x, f))


def _exp2i(k: "tirx.PrimExpr") -> "tirx.PrimExpr":
    """2**k for an int32 ``k`` in [-126, 127], as a float32 built from its bits."""
    return tirx.reinterpret("float32", (k + 127) * (1 << 23))


def _fast_exp_f32(x: "tirx.PrimExpr") -> "tirx.PrimExpr":
    f32 = "float32"

    def body(v):
        xc = tirx.max(tirx.min(v, _c(89.0, f32)), _c(-104.0, f32))  # keeps 2**n finite below
        return _let(f32, tirx.floor(xc * _c(1.44269504088896341, f32) + _c(0.5, f32)), lambda n: _let(
            f32, xc - n * _c(0.693359375, f32) + n * _c(2.12194440e-4, f32), lambda r: _let(
                "int32", tirx.Cast("int32", n), lambda k: _select(
                    v != v, v,
                    (_horner(_EXP_P, r, f32) * r * r + r + _c(1.0, f32))
                    # 2**n in two halves: n spans [-150, 129], beyond a float32 exponent
                    * _exp2i(tirx.shift_right(k, 1)) * _exp2i(k - tirx.shift_right(k, 1))))))
    return _let(f32, x, body)


def _exp(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    if dtype == "float32" and _simple(x):
        return _fast_exp_f32(x)
    return tirx.exp(x)


def _tanh(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    if dtype != "float32" or not _simple(x):
        return _libm("tanh")([x], dtype)
    f32 = "float32"

    def body(v):
        def both(a):
            small = _let(f32, v * v, lambda z: v + v * z * _horner(_TANH_P, z, f32))
            large = _c(1.0, f32) - _c(2.0, f32) / (_fast_exp_f32(a + a) + _c(1.0, f32))
            return _select(a < _c(0.625, f32), small, _select(v < _c(0.0, f32), -large, large))
        return _let(f32, tirx.abs(v), both)
    return _let(f32, x, body)


def _sigmoid(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    if dtype != "float32" or not _simple(x):
        return tirx.sigmoid(x)
    f32 = "float32"

    def body(v):
        one = _c(1.0, f32)
        return _let(f32, _fast_exp_f32(-tirx.abs(v)), lambda e: _select(
            v >= _c(0.0, f32), one / (one + e), e / (one + e)))
    return _let(f32, x, body)


def _erfc(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    return _libm("erfc")([x], dtype)


def _cbrt(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    return _libm("cbrt")([x], dtype)


# --------------------------------------------------------------------------- #
# Formulas for functions that CUDA has and glibc lacks (or that lack a lowering)
# --------------------------------------------------------------------------- #


def _recip(e: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    return _c(1.0, dtype) / e


def _sinpi_cospi(x, dtype: str, want_cos: bool) -> "tirx.PrimExpr":
    """sin(pi x) / cos(pi x) with an exact argument reduction.

    n = nearest integer to 2x, f = x - n/2 in [-1/4, 1/4] and q = n mod 4 are all
    exact in floating point, so only the final sin rounds; pi*x itself would lose
    the small results near the zeros. With s = sin(pi f) and c = cos(pi f),
    sinpi = s, c, -s, -c and cospi = c, -s, -c, s for q = 0..3, and
    c = sin(pi (1/2 - |f|)) (1/2 - |f| is exact), so ONE sin call serves every
    quadrant: few references to x keep TVM's compile time low when calls nest.
    """
    one, two = _c(1.0, dtype), _c(2.0, dtype)

    def on_n(n):
        def on_f(f):
            def on_q(q):
                odd = tirx.Or(q == one, q == _c(3.0, dtype))
                if want_cos:
                    use_c, negative = tirx.Not(odd), tirx.Or(q == one, q == two)
                else:
                    use_c, negative = odd, q >= two
                h = _select(use_c, _c(0.5, dtype) - tirx.abs(f), f)
                sign = _select(negative, _c(-1.0, dtype), one)
                return sign * tirx.sin(_c(math.pi, dtype) * h)

            return _let(dtype, n - _c(4.0, dtype) * tirx.floor(n * _c(0.25, dtype)), on_q)

        return _let(dtype, x - n * _c(0.5, dtype), on_f)

    # Half-to-even rounding is fine: any nearest integer works. NaN and inf give NaN.
    return _let(dtype, tirx.round(x * two), on_n)


def _sinpi(x, dtype):
    return _sinpi_cospi(x, dtype, want_cos=False)


def _cospi(x, dtype):
    return _sinpi_cospi(x, dtype, want_cos=True)


# -1/sqrt(2) as an unevaluated sum hi + lo per dtype (hi rounded, lo the rest).
_NEG_RSQRT2 = -Decimal(2).sqrt(Context(prec=60)) / 2


def _split_const(value: Decimal, dtype: str) -> tuple[float, float]:
    cast = (lambda v: float(np.float32(v))) if dtype == "float32" else float
    hi = cast(value)
    return hi, cast(value - Decimal(hi))


def _normcdf(x, dtype):
    """Phi(x) = erfc(z) / 2 with z = -x/sqrt(2).

    erfc keeps the relative accuracy of the lower tail, but the rounding of z is
    amplified there by 2 z^2 (3.6e-6 in float32 at x = -7.5). So the rounding error
    dz of z is recovered with fma and applied to first order:
    erfc(z + dz) = erfc(z) - dz 2/sqrt(pi) exp(-z^2).
    """
    hi, lo = _split_const(_NEG_RSQRT2, dtype)

    def on_x(x):
        def on_z(z):
            dz = _libm("fma")([x, _c(hi, dtype), -z], dtype) + x * _c(lo, dtype)
            slope = _c(2.0 / math.sqrt(math.pi), dtype) * tirx.exp(-(z * z))
            return _c(0.5, dtype) * (_erfc(z, dtype) - dz * slope)

        return _let(dtype, x * _c(hi, dtype), on_z)

    # Beyond +-40 the answer is 0 or 1 in both precisions; the clamp keeps fma(inf, ..)
    # from producing inf - inf. NaN falls through both compares.
    limit = _c(40.0, dtype)
    clamped = _select(x > limit, limit, _select(x < -limit, -limit, x))
    return _let(dtype, clamped, on_x)


# erfcx(x) = exp(x^2) erfc(x). For x < X1: exp(x^2) * erfc(x), with x^2 split exactly
# (x = xh + xl, xh short enough that xh*xh is exact) so that exp does not amplify
# the rounding of x^2 (relative error x^2 ulp otherwise). For x >= X1: the asymptotic
# series 1/(x sqrt(pi)) * sum (-1)^k (2k-1)!! / (2x^2)^k, truncated where its terms
# fall below the unit roundoff. float32: erfcf(6) is far from underflow and
# exp(36) from overflow; float64: the same for 10.
_ERFCX = {
    # dtype: (X1, number of series terms, split scale 2**s with s + 5 bits <= half mantissa)
    "float32": (6.0, 8, 2.0**7),
    "float64": (10.0, 14, 2.0**21),
}


def _erfcx_series(k_terms: int) -> list[float]:
    coeffs, dfact = [], 1
    for k in range(k_terms):
        if k:
            dfact *= 2 * k - 1
        coeffs.append(float((-1) ** k * dfact))
    return coeffs


def _erfcx(x, dtype):
    x1, n_terms, scale = _ERFCX[dtype]

    def small(x):
        # erfcx(x) overflows for x < -26.7 (float64) / -9.4 (float32); the clamp keeps
        # the split finite (x = -inf would give xl = NaN) and the result still inf.
        xc = _select(x < _c(-30.0, dtype), _c(-30.0, dtype), x)

        def on_xc(xc):
            def on_xh(xh):
                # x^2 = xh^2 (exact) + (x - xh)(x + xh) (small, its rounding harmless)
                return tirx.exp(xh * xh) * tirx.exp((xc - xh) * (xc + xh)) * _erfc(xc, dtype)

            return _let(dtype, tirx.trunc(xc * _c(scale, dtype)) * _c(1.0 / scale, dtype), on_xh)

        return _let(dtype, xc, on_xc)

    def large(x):
        z = _c(0.5, dtype) / (x * x)
        return _horner(_erfcx_series(n_terms), z, dtype) * (_c(1.0 / math.sqrt(math.pi), dtype) / x)

    return _let(dtype, x, lambda x: _select(x < _c(x1, dtype), small(x), large(x)))


# Modified Bessel functions I0, I1. For |x| < X: the power series
#   I_nu(x) = (x/2)^nu * sum y^k / (k! (k+nu)!),  y = x^2/4,
# all terms positive, so Horner in y is stable. For |x| >= X: the asymptotic series
#   I_nu(x) = e^x / sqrt(2 pi x) * sum a_k / x^k,
#   a_k = prod_{j<=k} -(4nu^2 - (2j-1)^2) / (8j),
# which reaches the unit roundoff at X (its smallest term is about e^-2X).
# Term counts were chosen where both series are below 2^-53 (2^-24) at X.
# e^x is applied as e^(x/2) twice: I_nu(x) is ~sqrt(2 pi x) times smaller than e^x,
# so e^x alone would overflow before the result does.
_BESSEL_I = {
    # dtype: (X, power-series terms, asymptotic terms, |x| beyond which I overflows)
    "float32": (10.0, 18, 10, 100.0),
    "float64": (22.0, 38, 22, 720.0),
}


def _bessel_power_coeffs(nu: int, n_terms: int) -> list[float]:
    return [float(Fraction(1, math.factorial(k) * math.factorial(k + nu))) for k in range(n_terms)]


def _bessel_asym_coeffs(nu: int, n_terms: int) -> list[float]:
    coeffs, a = [], Fraction(1)
    for k in range(n_terms):
        if k:
            a *= Fraction(-(4 * nu * nu - (2 * k - 1) ** 2), 8 * k)
        coeffs.append(float(a))
    return coeffs


def _bessel_i(x, dtype: str, nu: int) -> "tirx.PrimExpr":
    big_x, n_pow, n_asym, overflow = _BESSEL_I[dtype]
    pow_c = _bessel_power_coeffs(nu, n_pow)
    asym_c = _bessel_asym_coeffs(nu, n_asym)

    def on_a(a):
        series = _horner(pow_c, a * a * _c(0.25, dtype), dtype)
        if nu == 1:
            series = series * (a * _c(0.5, dtype))

        def asym(h):
            s = _horner(asym_c, _recip(a, dtype), dtype)
            return h * (s / tirx.sqrt(_c(2.0 * math.pi, dtype) * a)) * h

        large = _let(dtype, tirx.exp(a * _c(0.5, dtype)), asym)
        inf = _c(math.inf, dtype)
        # a = inf would give inf * 0 in the asymptotic branch; NaN falls through to it.
        return _select(a < _c(big_x, dtype), series, _select(a > _c(overflow, dtype), inf, large))

    r = _let(dtype, tirx.abs(x), on_a)
    # I1 is odd. copysign rather than a Select on x, which would repeat the formula.
    return r if nu == 0 else tirx.copysign(r, x)


def _i0(x, dtype):
    return _bessel_i(x, dtype, 0)


def _i1(x, dtype):
    return _bessel_i(x, dtype, 1)


# Inverse error functions. core(p, q) solves erf(y) = p, erfc(y) = q (p + q = 1,
# y >= 0), where the caller passes p and q exactly for whichever of them is >= 1/2.
# Start, relative error <= 1e-7 over w = -log(q(1+p)) in [0, 709] (q down to the
# smallest normal float64):
#   w < 16: Giles' single-precision erfinv ("Approximating the erfinv function",
#           GPU Computing Gems, 2011), two polynomials in w and sqrt(w);
#   w >= 16: y = s P(A/s - B), s = sqrt(w), P of degree 10, a least-squares
#           Chebyshev fit of y/s over w in [15.5, 709] made for this table against
#           the float64 reference below (max relative error 2.4e-8).
# Then ONE Halley step (cubic: 1e-7 -> 1e-21) on erf(y) - p, using q - erfc(y)
# instead when p >= 1/2 so that the residual keeps its relative accuracy in the tail.
# Why not more steps: TVM's LLVM code generator binds every Let in an arith.Analyzer,
# which substitutes earlier bindings, so compile time grows with the fully inlined
# size of the formula, which grows ~10-fold per Halley step.
_GILES_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
                  -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08)
_GILES_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
               -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257)
_FAR_TAIL_A, _FAR_TAIL_B = 9.240245499534858, 1.3470247039077312
_FAR_TAIL = (0.980728728276091, -0.02079471713647063, -0.0019454727528380854,
             0.001394813149659224, -0.0002824137695244457, 7.695043385905692e-05,
             -3.6105024334183154e-05, 8.853286544376702e-06, 4.0335944971330135e-06,
             6.632077744143859e-06, -6.945153803805941e-06)


def _erfinv_start(p, q, dtype):
    def on_w(w):
        central = _horner(_GILES_CENTRAL, w - _c(2.5, dtype), dtype)

        def on_s(s):
            tail = _horner(_GILES_TAIL, s - _c(3.0, dtype), dtype)
            giles = _select(w < _c(5.0, dtype), central, tail) * p
            t = _c(_FAR_TAIL_A, dtype) / s - _c(_FAR_TAIL_B, dtype)
            far = s * _horner(_FAR_TAIL, t, dtype)
            return _select(w < _c(16.0, dtype), giles, far)

        return _let(dtype, tirx.sqrt(w), on_s)

    return _let(dtype, -tirx.log(q * (_c(1.0, dtype) + p)), on_w)


def _halley(y, p, q, dtype):
    def on_y(y):
        r = _select(p < _c(0.5, dtype), tirx.erf(y) - p, q - _erfc(y, dtype))
        u = r / (_c(2.0 / math.sqrt(math.pi), dtype) * tirx.exp(-(y * y)))
        return _let(dtype, u, lambda u: y - u / (_c(1.0, dtype) + y * u))

    return _let(dtype, y, on_y)


def _erfinv_core(p, q, dtype):
    return _halley(_erfinv_start(p, q, dtype), p, q, dtype)


def _erfinv(x, dtype):
    one = _c(1.0, dtype)

    def on_a(a):
        y = _let(dtype, one - a, lambda q: _erfinv_core(a, q, dtype))
        # The ends by hand: the iteration would produce NaN there.
        y = _select(a == one, _c(math.inf, dtype), y)
        y = _select(a > one, _c(math.nan, dtype), y)
        return tirx.copysign(y, x)

    return _let(dtype, x, lambda x: _let(dtype, tirx.abs(x), on_a))


def _erfcinv(c, dtype):
    """erfcinv(c) = sign(1 - c) core(p, q) with p = |c - 1| and q = min(c, 2 - c).

    p is exact where the core reads it exactly (c >= 1/2), and q is exact: c itself,
    or 2 - c for c >= 1. No Select on c > 1 is needed (Selects on the argument made
    TVM's LLVM code generator five times slower here).
    """
    one, two = _c(1.0, dtype), _c(2.0, dtype)

    def on_c(c):
        q = tirx.min(c, two - c)  # NaN c gives NaN either way
        y = _let(dtype, q, lambda q: _let(dtype, tirx.abs(c - one),
                                          lambda p: _erfinv_core(p, q, dtype)))
        y = tirx.copysign(y, one - c)
        y = _select(c == two, _c(-math.inf, dtype), y)
        y = _select(c == _c(0.0, dtype), _c(math.inf, dtype), y)
        bad = tirx.Or(c < _c(0.0, dtype), c > two)
        return _select(bad, _c(math.nan, dtype), y)

    return _let(dtype, c, on_c)


def _normcdfinv(p, dtype):
    # Phi^-1(p) = -sqrt(2) erfcinv(2p); 2p is exact.
    return _c(-math.sqrt(2.0), dtype) * _erfcinv(p * _c(2.0, dtype), dtype)


def _hypot(a, b):
    return tirx.hypot(a, b)


def _norm3d(a, b, c, dtype):
    # hypot avoids the overflow/underflow of sqrt(a^2 + b^2 + c^2).
    return _hypot(_hypot(a, b), c)


def _norm4d(a, b, c, d, dtype):
    return _hypot(_hypot(a, b), _hypot(c, d))


# --------------------------------------------------------------------------- #
# NumPy references
# --------------------------------------------------------------------------- #


def _f64(*arrays) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def _ref(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Wrap a float64 NumPy expression: inputs cast to float64, warnings silenced."""

    @functools.wraps(fn)
    def ref(*arrays):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*_f64(*arrays)), dtype=np.float64)

    return ref


def _scalar(fn: Callable[..., float], pole: float = math.inf) -> Callable[..., np.ndarray]:
    """Vectorize a :mod:`math` function with C semantics for its exceptions."""

    def safe(*xs: float) -> float:
        try:
            return fn(*xs)
        except OverflowError:
            return math.inf
        except ValueError:
            return pole

    return _ref(np.vectorize(safe, otypes=[np.float64]))


@functools.cache
def _libm_double(name: str) -> Callable[[float], float]:
    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
    return fn


def _libm_ref(name: str) -> Callable[..., np.ndarray]:
    return _ref(np.vectorize(lambda v: _libm_double(name)(v), otypes=[np.float64]))


def _round_ref(x):
    # C round(): halves away from zero (np.round is half-to-even). |x| - floor|x| is exact.
    a = np.abs(x)
    r = np.floor(a)
    r = r + (a - r >= 0.5)
    return np.copysign(r, x)


def _sinpi_ref(x, want_cos: bool = False):
    n = np.round(2.0 * x)
    f = x - 0.5 * n
    q = np.mod(n, 4.0)
    s, c = np.sin(np.pi * f), np.cos(np.pi * f)
    if want_cos:
        q = np.mod(q + 1.0, 4.0)
    out = np.select([q == 0, q == 1, q == 2], [s, c, -s], -c)
    return np.where(np.isfinite(x), out, np.nan)


def _erfcx_ref(x):
    # x < 2: exp(x^2) erfc(x) with x^2 split exactly (Veltkamp) so that exp sees it exactly;
    # x >= 2: the continued fraction
    #   erfcx(x) = 1/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))).
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    xs = np.minimum(x, 2.0)
    t = xs * 134217729.0
    hi = t - (t - xs)
    lo = xs - hi
    sq_hi = hi * hi
    sq_lo = (hi * lo + hi * lo) + lo * lo
    small = np.exp(sq_hi) * np.exp(sq_lo) * erfc(xs)
    xl = np.maximum(x, 2.0)
    tail = np.zeros_like(xl)
    for k in range(400, 0, -1):
        tail = (k / 2.0) / (xl + tail)
    large = 1.0 / (math.sqrt(math.pi) * (xl + tail))
    large = np.where(np.isposinf(x), 0.0, large)
    return np.where(x == -np.inf, np.inf, np.where(x < 2.0, small, large))


def _i1_ref(x):
    """I1 by Miller's backward recurrence I_{n-1} = I_{n+1} + (2n/x) I_n, normalised by I0.

    The recurrence is stable downwards; np.i0 (Cephes) fixes the scale. Values are rescaled
    on the way down so that large x does not overflow.
    """
    a = np.abs(x)
    safe = np.where((a > 1.0) & np.isfinite(a), a, 1.0)
    top = int(2 * (np.max(safe) + 15 + 6 * math.sqrt(np.max(safe)))) + 20
    hi, mid = np.zeros_like(safe), np.full_like(safe, 1e-300)  # I_{n+1}, I_n for n = top
    i1 = np.zeros_like(safe)
    for n in range(top, 0, -1):
        hi, mid = mid, hi + (2.0 * n / safe) * mid  # -> I_n, I_{n-1}
        if n == 2:
            i1 = mid
        big = mid > 1e250
        hi, mid, i1 = (np.where(big, v * 1e-250, v) for v in (hi, mid, i1))
    out = i1 * (np.i0(safe) / mid)
    # |x| <= 1: the power series (x/2) sum (x^2/4)^k / (k! (k+1)!), which 12 terms settle.
    y = a * a / 4.0
    series = sum(y**k / (math.factorial(k) * math.factorial(k + 1)) for k in range(12))
    out = np.where(a <= 1.0, a / 2.0 * series, np.where(np.isinf(a), np.inf, out))
    return np.copysign(np.where(np.isnan(a), np.nan, out), x)


def _erf_inverse_ref(q):
    """y >= 0 with erfc(y) = q, for q in (0, 1]: bisection then Newton, float64."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    lo, hi = np.zeros_like(q), np.full_like(q, 28.0)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        right = erfc(mid) < q
        lo, hi = np.where(right, lo, mid), np.where(right, mid, hi)
    y = 0.5 * (lo + hi)
    p = 1.0 - q  # used only where q > 1/2, where it is exact
    for _ in range(3):  # Newton on the better-conditioned residual
        r = np.where(q > 0.5, erf(y) - p, q - erfc(y))
        y = y - r / (2.0 / math.sqrt(math.pi) * np.exp(-y * y))
    return y


def _erfcinv_ref(c):
    upper = c > 1.0
    q = np.where(upper, 2.0 - c, c)
    y = _erf_inverse_ref(np.clip(q, 1e-300, 1.0))
    y = np.where(q == 0.0, np.inf, y)
    y = np.where(upper, -y, y)
    return np.where((c < 0.0) | (c > 2.0) | np.isnan(c), np.nan, y)


def _erfinv_ref(x):
    # erfinv(x) = erfcinv(1 - x); for |x| < 1/2 solve erf(y) = |x| directly to keep
    # small x exact (1 - x would round it away).
    erf = np.vectorize(math.erf, otypes=[np.float64])
    a = np.abs(x)
    y = _erfcinv_ref(1.0 - np.minimum(a, 1.0))
    small = a < 0.5
    ys = a * (math.sqrt(math.pi) / 2.0)
    for _ in range(6):
        ys = ys - (erf(ys) - a) / (2.0 / math.sqrt(math.pi) * np.exp(-ys * ys))
    y = np.where(small, ys, y)
    y = np.where(a > 1.0, np.nan, y)
    return np.copysign(y, x)


def _normcdf_ref(x):
    # erfc(z)/2 at z = -x/sqrt(2), corrected to first order by the rounding error of z
    # (computed in 60-digit decimal), which erfc would otherwise amplify by 2 z^2.
    def one(v: float) -> float:
        if not math.isfinite(v):
            return 0.5 * math.erfc(-v) if not math.isnan(v) else math.nan
        z = v * float(_NEG_RSQRT2)
        dz = float(Decimal(v) * _NEG_RSQRT2 - Decimal(z))
        return 0.5 * (math.erfc(z) - dz * 2.0 / math.sqrt(math.pi) * math.exp(-z * z))

    return np.vectorize(one, otypes=[np.float64])(x)


def _tgamma_scalar(v: float) -> float:
    # C tgamma: +-inf at +-0, NaN at negative integers and -inf, inf on overflow.
    if v == 0.0:
        return math.copysign(math.inf, v)
    try:
        return math.gamma(v)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.inf if v == math.inf else math.nan


def _fma_ref(a, b, c):
    def exact(x: float, y: float, z: float) -> float:
        if not all(map(math.isfinite, (x, y, z))):
            return x * y + z
        return float(Fraction(x) * Fraction(y) + Fraction(z))

    return np.vectorize(exact, otypes=[np.float64])(a, b, c)


def _logb_ref(x):
    _, e = np.frexp(x)  # x = m 2^e with m in [1/2, 1): logb = e - 1, also for subnormals
    out = (e - 1).astype(np.float64)
    out = np.where(x == 0, -np.inf, out)
    out = np.where(np.isinf(x), np.inf, out)
    return np.where(np.isnan(x), np.nan, out)


def _fdim_ref(a, b):
    out = np.where(a > b, a - b, 0.0)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, out)


def _nextafter_ref(a, b):
    # The answer depends on the format: keep the inputs' (common) dtype.
    dtype = np.result_type(np.asarray(a), np.asarray(b))
    return np.nextafter(np.asarray(a, dtype), np.asarray(b, dtype))


def _sigmoid_ref(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _hypot_ref(*xs):
    return _scalar(math.hypot)(*xs)


# --------------------------------------------------------------------------- #
# The table
# --------------------------------------------------------------------------- #

def _b(name: str, arity: int, ref: Callable[..., np.ndarray], lower: Lower) -> Builtin:
    def checked(args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
        # A wrong count would otherwise reach call_pure_extern as a malformed call.
        if len(args) != arity:
            raise ValueError(f"{name} takes {arity} argument(s), got {len(args)}")
        return lower(args, dtype)

    return Builtin(name, arity, ref, checked)


_TABLE: tuple[Builtin, ...] = (
    _b("acos", 1, _ref(np.arccos), _intrin(tirx.acos)),
    _b("acosh", 1, _ref(np.arccosh), _intrin(tirx.acosh)),
    _b("asin", 1, _ref(np.arcsin), _intrin(tirx.asin)),
    _b("asinh", 1, _ref(np.arcsinh), _intrin(tirx.asinh)),
    _b("atan2", 2, _ref(np.arctan2), _intrin(tirx.atan2)),
    _b("atan", 1, _ref(np.arctan), _intrin(tirx.atan)),
    # tirx.atanh is 0.5*log((1+x)/(1-x)) on llvm: 1.5e-5 relative error in float32.
    _b("atanh", 1, _ref(np.arctanh), _libm("atanh")),
    _b("cbrt", 1, _ref(np.cbrt), _libm("cbrt")),
    _b("ceil", 1, _ref(np.ceil), _intrin(tirx.ceil)),
    _b("copysign", 2, _ref(np.copysign), _intrin(tirx.copysign)),
    _b("cos", 1, _ref(np.cos), _intrin(tirx.cos)),
    # libm: TVM 0.27 has no vector lowering of tirx.cosh / tirx.sinh on llvm ("unknown intrinsic").
    _b("cosh", 1, _ref(np.cosh), _libm("cosh")),
    _b("cospi", 1, _ref(functools.partial(_sinpi_ref, want_cos=True)), _formula(_cospi)),
    _b("cyl_bessel_i0", 1, _ref(lambda x: np.where(np.isinf(x), np.inf, np.i0(x))), _formula(_i0)),
    _b("cyl_bessel_i1", 1, _ref(_i1_ref), _formula(_i1)),
    _b("erfc", 1, _scalar(math.erfc), _libm("erfc")),
    _b("erfcinv", 1, _ref(_erfcinv_ref), _formula(_erfcinv)),
    _b("erfcx", 1, _ref(_erfcx_ref), _formula(_erfcx)),
    _b("erf", 1, _scalar(math.erf), _intrin(tirx.erf)),
    _b("erfinv", 1, _ref(_erfinv_ref), _formula(_erfinv)),
    # tirx.exp10 is exp(x*ln10) on llvm: 1.2e-11 relative error in float64.
    _b("exp10", 1, _ref(lambda x: np.power(10.0, x)), _libm("exp10")),
    _b("exp2", 1, _ref(np.exp2), _intrin(tirx.exp2)),
    _b("exp", 1, _ref(np.exp), _formula(_exp)),
    _b("expm1", 1, _ref(np.expm1), _libm("expm1")),
    _b("fabs", 1, _ref(np.abs), _intrin(tirx.abs)),
    _b("fdim", 2, _ref(_fdim_ref), _libm("fdim")),
    # TC maps fdivide to CUDA's fast fdividef; here it is the exact division.
    _b("fdivide", 2, _ref(np.divide), _intrin(lambda a, b: a / b)),
    _b("floor", 1, _ref(np.floor), _intrin(tirx.floor)),
    _b("fma", 3, _ref(_fma_ref), _libm("fma")),
    # C fmax/fmin ignore a NaN operand; tirx.max/min are a compare+select that do not.
    _b("fmax", 2, _ref(np.fmax), _libm("fmax")),
    _b("fmin", 2, _ref(np.fmin), _libm("fmin")),
    # tirx.fmod has no llvm lowering ("unknown intrinsic tirx.fmod").
    _b("fmod", 2, _ref(np.fmod), _libm("fmod")),
    _b("hypot", 2, _ref(np.hypot), _intrin(_hypot)),
    _b("j0", 1, _libm_ref("j0"), _libm("j0")),
    _b("j1", 1, _libm_ref("j1"), _libm("j1")),
    # Reference from glibc: math.lgamma cancels near its zeros at 1 and 2 (7e-14 at 2.01).
    _b("lgamma", 1, _libm_ref("lgamma"), _libm("lgamma")),
    _b("log10", 1, _ref(np.log10), _intrin(tirx.log10)),
    _b("log1p", 1, _ref(np.log1p), _intrin(tirx.log1p)),
    _b("log2", 1, _ref(np.log2), _intrin(tirx.log2)),
    _b("logb", 1, _ref(_logb_ref), _libm("logb")),
    _b("log", 1, _ref(np.log), _intrin(tirx.log)),
    _b("nextafter", 2, _nextafter_ref, _intrin(tirx.nextafter)),
    _b("norm3d", 3, _hypot_ref, _formula(_norm3d)),
    _b("norm4d", 4, _hypot_ref, _formula(_norm4d)),
    _b("normcdf", 1, _ref(_normcdf_ref), _formula(_normcdf)),
    _b("normcdfinv", 1, _ref(lambda p: -math.sqrt(2.0) * _erfcinv_ref(2.0 * p)),
       _formula(_normcdfinv)),
    _b("pow", 2, _ref(np.power), _intrin(tirx.pow)),
    _b("rcbrt", 1, _ref(lambda x: 1.0 / np.cbrt(x)),
       _formula(lambda x, dt: _recip(_cbrt(x, dt), dt))),
    _b("remainder", 2, _scalar(math.remainder, pole=math.nan), _libm("remainder")),
    _b("rhypot", 2, _ref(lambda a, b: 1.0 / np.hypot(a, b)),
       _formula(lambda a, b, dt: _recip(_hypot(a, b), dt))),
    _b("rnorm3d", 3, _ref(lambda *xs: 1.0 / _hypot_ref(*xs)),
       _formula(lambda a, b, c, dt: _recip(_norm3d(a, b, c, dt), dt))),
    _b("rnorm4d", 4, _ref(lambda *xs: 1.0 / _hypot_ref(*xs)),
       _formula(lambda a, b, c, d, dt: _recip(_norm4d(a, b, c, d, dt), dt))),
    # tirx.round is nearbyint (half to even); C/CUDA round() rounds halves away from zero.
    _b("round", 1, _ref(_round_ref), _libm("round")),
    _b("rsqrt", 1, _ref(lambda x: 1.0 / np.sqrt(x)), _intrin(tirx.rsqrt)),
    _b("sin", 1, _ref(np.sin), _intrin(tirx.sin)),
    _b("sinh", 1, _ref(np.sinh), _libm("sinh")),
    _b("sinpi", 1, _ref(_sinpi_ref), _formula(_sinpi)),
    _b("sqrt", 1, _ref(np.sqrt), _intrin(tirx.sqrt)),
    _b("tan", 1, _ref(np.tan), _intrin(tirx.tan)),
    # Not tirx.tanh: its llvm formula loses small arguments (relative error > 1e-6 below
    # |x| = 0.01 in float32, 1.0 below 1e-8; 2.7e-5 in float64) and, repeating its
    # argument after CSE, makes nested tanh compile in exponential time.
    # float32: a vectorizable formula (see _tanh); float64 and nested calls: libm.
    _b("tanh", 1, _ref(np.tanh), _formula(_tanh)),
    _b("tgamma", 1, _ref(np.vectorize(_tgamma_scalar, otypes=[np.float64])), _libm("tgamma")),
    _b("trunc", 1, _ref(np.trunc), _intrin(tirx.trunc)),
    _b("y0", 1, _libm_ref("y0"), _libm("y0")),
    _b("y1", 1, _libm_ref("y1"), _libm("y1")),
    # Not in TC; 1/(1+exp(-x)), computed from exp(-|x|) so that it never overflows.
    _b("sigmoid", 1, _ref(_sigmoid_ref), _formula(_sigmoid)),
)

BUILTINS: dict[str, Builtin] = {b.name: b for b in _TABLE}

# Lowered as explicit TIR formulas (CUDA-only functions, or no llvm lowering in TVM);
# these are the ones whose nesting is expensive to compile (see the module docstring).
FORMULAS: frozenset[str] = frozenset({
    "cospi", "sinpi", "cyl_bessel_i0", "cyl_bessel_i1", "erfcinv", "erfcx", "erfinv",
    "normcdf", "normcdfinv", "norm3d", "norm4d", "rnorm3d", "rnorm4d", "rcbrt", "rhypot",
})


def lookup(name: str) -> Builtin | None:
    """The builtin called ``name``, or None."""
    return BUILTINS.get(name)
