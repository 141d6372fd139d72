"""TIR formulas for the functions that CUDA has and glibc lacks, or that lack
a lowering (``sinpi``, ``normcdf``, ``erfinv``, ``erfcx``, ``cyl_bessel_i0``,
...), for codegen/mathlib.py.  Like codegen/formulas.py, whose helpers they
use, each takes its arguments (TIR expressions of ``dtype``) and ``dtype``.
"""
from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
from tvm import tirx

from .formulas import _c, _erfc, _horner, _let, _select, libm


# --------------------------------------------------------------------------- #
# Formulas for functions that CUDA has and glibc lacks (or that lack a lowering)
# --------------------------------------------------------------------------- #


def recip(e: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
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


def sinpi(x, dtype):
    return _sinpi_cospi(x, dtype, want_cos=False)


def cospi(x, dtype):
    return _sinpi_cospi(x, dtype, want_cos=True)


# -1/sqrt(2) as an unevaluated sum hi + lo per dtype (hi rounded, lo the rest).
_NEG_RSQRT2 = -Decimal(2).sqrt(Context(prec=60)) / 2


def _split_const(value: Decimal, dtype: str) -> tuple[float, float]:
    cast = (lambda v: float(np.float32(v))) if dtype == "float32" else float
    hi = cast(value)
    return hi, cast(value - Decimal(hi))


def normcdf(x, dtype):
    """Phi(x) = erfc(z) / 2 with z = -x/sqrt(2).

    erfc keeps the relative accuracy of the lower tail, but the rounding of z is
    amplified there by 2 z^2 (3.6e-6 in float32 at x = -7.5). So the rounding error
    dz of z is recovered with fma and applied to first order:
    erfc(z + dz) = erfc(z) - dz 2/sqrt(pi) exp(-z^2).
    """
    hi, lo = _split_const(_NEG_RSQRT2, dtype)

    def on_x(x):
        def on_z(z):
            dz = libm("fma")([x, _c(hi, dtype), -z], dtype) + x * _c(lo, dtype)
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


def erfcx(x, dtype):
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
            s = _horner(asym_c, recip(a, dtype), dtype)
            return h * (s / tirx.sqrt(_c(2.0 * math.pi, dtype) * a)) * h

        large = _let(dtype, tirx.exp(a * _c(0.5, dtype)), asym)
        inf = _c(math.inf, dtype)
        # a = inf would give inf * 0 in the asymptotic branch; NaN falls through to it.
        return _select(a < _c(big_x, dtype), series, _select(a > _c(overflow, dtype), inf, large))

    r = _let(dtype, tirx.abs(x), on_a)
    # I1 is odd. copysign rather than a Select on x, which would repeat the formula.
    return r if nu == 0 else tirx.copysign(r, x)


def i0(x, dtype):
    return _bessel_i(x, dtype, 0)


def i1(x, dtype):
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


def erfinv(x, dtype):
    one = _c(1.0, dtype)

    def on_a(a):
        y = _let(dtype, one - a, lambda q: _erfinv_core(a, q, dtype))
        # The ends by hand: the iteration would produce NaN there.
        y = _select(a == one, _c(math.inf, dtype), y)
        y = _select(a > one, _c(math.nan, dtype), y)
        return tirx.copysign(y, x)

    return _let(dtype, x, lambda x: _let(dtype, tirx.abs(x), on_a))


def erfcinv(c, dtype):
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


def normcdfinv(p, dtype):
    # Phi^-1(p) = -sqrt(2) erfcinv(2p); 2p is exact.
    return _c(-math.sqrt(2.0), dtype) * erfcinv(p * _c(2.0, dtype), dtype)


def hypot(a, b):
    return tirx.hypot(a, b)


def norm3d(a, b, c, dtype):
    # hypot avoids the overflow/underflow of sqrt(a^2 + b^2 + c^2).
    return hypot(hypot(a, b), c)


def norm4d(a, b, c, d, dtype):
    return hypot(hypot(a, b), hypot(c, d))
