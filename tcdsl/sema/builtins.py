"""The table of TC builtin functions: name -> arity, NumPy reference.

The names and arities are those of Tensor Comprehensions (``tc/lang/builtins.h``,
taken from the CUDA float math API), plus ``sigmoid``. ``min``/``max`` are not
builtins: the language handles them.  The front end needs only the names and
arities; how each builtin becomes TIR is in :mod:`tcdsl.codegen.mathlib`,
keyed by the same names.

Each :class:`Builtin` carries ``numpy``: a float64-accurate reference,
elementwise on arrays (the interpreter's, tcdsl/testing.py, and the tests').
It uses only NumPy, :mod:`math` and, for ``j0 j1 y0 y1 lgamma``, glibc's libm
through :mod:`ctypes`. Inputs of any float dtype are evaluated as float64 and
a float64 array comes back; the one exception is ``nextafter``, whose answer
depends on the format, so it keeps the inputs' dtype.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from decimal import Context, Decimal
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

__all__ = ["Builtin", "BUILTINS", "lookup"]


@dataclass(frozen=True, slots=True)
class Builtin:
    """One builtin: its TC name, arity and NumPy reference."""

    name: str
    arity: int
    numpy: Callable[..., np.ndarray]


# -1/sqrt(2) to 60 digits (normcdf's reference)
_NEG_RSQRT2 = -Decimal(2).sqrt(Context(prec=60)) / 2


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

def _b(name: str, arity: int, ref: Callable[..., np.ndarray]) -> Builtin:
    return Builtin(name, arity, ref)


_TABLE: tuple[Builtin, ...] = (
    _b("acos", 1, _ref(np.arccos)),
    _b("acosh", 1, _ref(np.arccosh)),
    _b("asin", 1, _ref(np.arcsin)),
    _b("asinh", 1, _ref(np.arcsinh)),
    _b("atan2", 2, _ref(np.arctan2)),
    _b("atan", 1, _ref(np.arctan)),
    _b("atanh", 1, _ref(np.arctanh)),
    _b("cbrt", 1, _ref(np.cbrt)),
    _b("ceil", 1, _ref(np.ceil)),
    _b("copysign", 2, _ref(np.copysign)),
    _b("cos", 1, _ref(np.cos)),
    _b("cosh", 1, _ref(np.cosh)),
    _b("cospi", 1, _ref(functools.partial(_sinpi_ref, want_cos=True))),
    _b("cyl_bessel_i0", 1, _ref(lambda x: np.where(np.isinf(x), np.inf, np.i0(x)))),
    _b("cyl_bessel_i1", 1, _ref(_i1_ref)),
    _b("erfc", 1, _scalar(math.erfc)),
    _b("erfcinv", 1, _ref(_erfcinv_ref)),
    _b("erfcx", 1, _ref(_erfcx_ref)),
    _b("erf", 1, _scalar(math.erf)),
    _b("erfinv", 1, _ref(_erfinv_ref)),
    _b("exp10", 1, _ref(lambda x: np.power(10.0, x))),
    _b("exp2", 1, _ref(np.exp2)),
    _b("exp", 1, _ref(np.exp)),
    _b("expm1", 1, _ref(np.expm1)),
    _b("fabs", 1, _ref(np.abs)),
    _b("fdim", 2, _ref(_fdim_ref)),
    _b("fdivide", 2, _ref(np.divide)),
    _b("floor", 1, _ref(np.floor)),
    _b("fma", 3, _ref(_fma_ref)),
    _b("fmax", 2, _ref(np.fmax)),
    _b("fmin", 2, _ref(np.fmin)),
    _b("fmod", 2, _ref(np.fmod)),
    _b("hypot", 2, _ref(np.hypot)),
    _b("j0", 1, _libm_ref("j0")),
    _b("j1", 1, _libm_ref("j1")),
    # Reference from glibc: math.lgamma cancels near its zeros at 1 and 2 (7e-14 at 2.01).
    _b("lgamma", 1, _libm_ref("lgamma")),
    _b("log10", 1, _ref(np.log10)),
    _b("log1p", 1, _ref(np.log1p)),
    _b("log2", 1, _ref(np.log2)),
    _b("logb", 1, _ref(_logb_ref)),
    _b("log", 1, _ref(np.log)),
    _b("nextafter", 2, _nextafter_ref),
    _b("norm3d", 3, _hypot_ref),
    _b("norm4d", 4, _hypot_ref),
    _b("normcdf", 1, _ref(_normcdf_ref)),
    _b("normcdfinv", 1, _ref(lambda p: -math.sqrt(2.0) * _erfcinv_ref(2.0 * p))),
    _b("pow", 2, _ref(np.power)),
    _b("rcbrt", 1, _ref(lambda x: 1.0 / np.cbrt(x))),
    _b("remainder", 2, _scalar(math.remainder, pole=math.nan)),
    _b("rhypot", 2, _ref(lambda a, b: 1.0 / np.hypot(a, b))),
    _b("rnorm3d", 3, _ref(lambda *xs: 1.0 / _hypot_ref(*xs))),
    _b("rnorm4d", 4, _ref(lambda *xs: 1.0 / _hypot_ref(*xs))),
    _b("round", 1, _ref(_round_ref)),
    _b("rsqrt", 1, _ref(lambda x: 1.0 / np.sqrt(x))),
    _b("sin", 1, _ref(np.sin)),
    _b("sinh", 1, _ref(np.sinh)),
    _b("sinpi", 1, _ref(_sinpi_ref)),
    _b("sqrt", 1, _ref(np.sqrt)),
    _b("tan", 1, _ref(np.tan)),
    _b("tanh", 1, _ref(np.tanh)),
    _b("tgamma", 1, _ref(np.vectorize(_tgamma_scalar, otypes=[np.float64]))),
    _b("trunc", 1, _ref(np.trunc)),
    _b("y0", 1, _libm_ref("y0")),
    _b("y1", 1, _libm_ref("y1")),
    # Not in TC; 1/(1+exp(-x)), computed from exp(-|x|) so that it never overflows.
    _b("sigmoid", 1, _ref(_sigmoid_ref)),
)

BUILTINS: dict[str, Builtin] = {b.name: b for b in _TABLE}


def lookup(name: str) -> Builtin | None:
    """The builtin called ``name``, or None."""
    return BUILTINS.get(name)
