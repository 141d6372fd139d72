"""TIR formulas for the builtins that no intrinsic serves well (codegen/mathlib.py).

Float32 ``exp``, ``log``, ``tanh``, ``sigmoid`` and ``erf`` made of
arithmetic, comparisons and bit casts, so that vector loops stay vectorized;
the functions that CUDA has and glibc lacks (``sinpi``, ``normcdf``,
``erfinv``, ``cyl_bessel_i0``, ...) are in codegen/special.py.  Each takes its arguments (TIR expressions of
``dtype``) and ``dtype``, ``"float32"`` or ``"float64"``; constants go through
:func:`float_const`, values used more than once through ``tirx.Let`` (see
mathlib's docstring for what that costs at compile time).
"""
from __future__ import annotations

import contextlib
import math
import struct
from typing import Callable, Sequence

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

Lower = Callable[[Sequence["tirx.PrimExpr"], str], "tirx.PrimExpr"]


# --------------------------------------------------------------------------- #
# TIR helpers
# --------------------------------------------------------------------------- #

_DTYPES = ("float32", "float64")


def check_dtype(dtype: str) -> None:
    if dtype not in _DTYPES:
        raise ValueError(f"builtins lower float32/float64 only, got {dtype!r}")


def float_const(value: float, dtype: str) -> "tirx.PrimExpr":
    """A float constant that is exact on every target.

    float32 values are rounded to float32 here, so that no target rounds twice.
    float64 values that TVM's CUDA printer (``%.15f``) would not reproduce are
    emitted as ``reinterpret(int64 bits)``; LLVM folds that back to a constant.
    """
    check_dtype(dtype)
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


def libm(name: str) -> Lower:
    """A function that glibc's libm and CUDA both provide (``name`` / ``namef``)."""

    def lower(args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
        check_dtype(dtype)
        symbol = name + ("f" if dtype == "float32" else "")
        return tirx.call_pure_extern(dtype, symbol, *args)

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


# At most this many nodes in an argument that a vector formula takes as it is.
_SIMPLE_NODES = 48


def _simple(x: "tirx.PrimExpr") -> bool:
    """No ``Let`` inside ``x`` (the mark of another formula: nesting those is
    what multiplies the analysed size, see above) and at most
    :data:`_SIMPLE_NODES` nodes.  Calls of intrinsics and library functions
    (``rsqrt(float(D))``, ``fabs``, a libm ``tanhf``), casts and selects of
    such arguments are fine: they are small, and an attention's
    ``exp((s - mx) * rsqrt(float(D)))`` must stay vectorized."""
    budget = [_SIMPLE_NODES]

    def ok(e) -> bool:
        budget[0] -= 1
        if budget[0] < 0 or isinstance(e, tirx.Let):
            return False
        if isinstance(e, tvm.ir.expr.Call):
            return all(ok(a) for a in e.args)
        return all(ok(getattr(e, f)) for f in ("a", "b", "value", "condition", "true_value", "false_value")
                   if isinstance(getattr(e, f, None), tvm.ir.expr.Expr))

    return ok(x)


# Statements being lowered whose formulas may bind a nested argument to a
# variable of their own (:func:`bindings`).
_BINDERS: list = []


@contextlib.contextmanager
def bindings():
    """Within this context a vector formula (exp, tanh, sigmoid, erf) whose
    float32 argument is not :func:`_simple` -- it holds another formula, as
    in a GRU's ``tanh(n + sigmoid(r) * a)`` -- takes a fresh variable bound
    to the argument instead of falling back to a scalar libm call per lane
    (the GRU's tanh was a quarter of its time); the yielded list receives
    the (variable, value) pairs, which the caller binds in statements
    (``tirx.Bind``) before the one using them (codegen/lower.py
    ``emit_statement``), at any depth of nesting (a chain of formulas,
    ``tanh(log(1 + exp(x)))``: one binding per level; the bindings become
    scratch buffers before TVM sees them, codegen/scratch.py, since TVM's
    analyzer expands bound variables and a chain of them compiled in
    exponential time).  Evaluating the argument
    before the statement is safe where it sits in a branch of a select: a
    read that could fall outside its tensor there is clamped into it
    (codegen/expr.py, rule 3), and the branch's select still picks the
    value."""
    out = _Bound()
    _BINDERS.append(out)
    try:
        yield out
    finally:
        _BINDERS.pop()


class _Bound(list):
    """The (variable, value) pairs of one statement (:func:`bindings`)."""


def _argument(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr | None":
    """``x`` when a float32 vector formula can take it as it is, a variable
    bound to it inside :func:`bindings`, else None (libm)."""
    if dtype != "float32":
        return None
    if _simple(x):
        return x
    if not _BINDERS:
        return None
    v = tirx.Var("act", dtype)
    _BINDERS[-1].append((v, x))
    return v


def _nan_kept(v: "tirx.PrimExpr", value: "tirx.PrimExpr") -> "tirx.PrimExpr":
    """``value``, or ``v`` (float32) where it is a NaN: tested on its bits,
    since LLVM may fold a float ``v != v`` to false (exp(NaN) was inf)."""
    return _select(is_nan(v, "float32"), v, value)


def is_nan(v: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    """``v`` is a NaN, tested on its bits (see :func:`_nan_kept`); decided
    here for a constant (CUDA C cannot take the address of one to read its
    bits: ``fmax(x, 0)`` did not compile for CUDA)."""
    if isinstance(v, tirx.FloatImm):
        return tirx.const(math.isnan(v.value), "bool")
    i, mask, inf = ("int32", 0x7FFFFFFF, 0x7F800000) if dtype == "float32" else \
        ("int64", 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000)
    return tirx.bitwise_and(tirx.reinterpret(i, v), tirx.const(mask, i)) > tirx.const(inf, i)


def fmax_fmin(which: str) -> Callable:
    """C's fmax/fmin (a NaN operand is ignored) as a compare and selects, which
    TVM vectorizes (a libm ``fmaxf`` made it run the statement lane by lane)."""
    op = tirx.max if which == "fmax" else tirx.min

    def lower(a: "tirx.PrimExpr", b: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
        return _let(dtype, a, lambda x: _let(dtype, b, lambda y: _select(
            is_nan(x, dtype), y, _select(is_nan(y, dtype), x, op(x, y)))))
    return lower


def _exp2i(k: "tirx.PrimExpr") -> "tirx.PrimExpr":
    """2**k for an int32 ``k`` in [-126, 127], as a float32 built from its bits."""
    return tirx.reinterpret("float32", (k + 127) * (1 << 23))


# ln of float32's smallest normal number: below it exp is 0 here (its subnormal
# results are below float32's relative precision anyway).  A subnormal operand
# or result costs an x86 core a microcode assist, about a hundred cycles: the
# masked scores of an attention (``j <= i ? s : -1e30`` then ``exp(sm - m)``)
# and the saturated gates of a sigmoid ran 5-7 times slower.
_EXP_LOWEST = -87.33654


def _fast_exp_f32(x: "tirx.PrimExpr", nonnegative: bool = False) -> "tirx.PrimExpr":
    """exp(x); ``nonnegative``: the caller's ``x`` is never below 0 (or NaN)."""
    f32 = "float32"

    def body(v):
        # clamped so that nothing below is subnormal (or 2**n infinite)
        xc = tirx.max(tirx.min(v, _c(89.0, f32)), _c(_EXP_LOWEST, f32))

        def value(p):
            return p if nonnegative else _select(v < _c(_EXP_LOWEST, f32), _c(0.0, f32), p)
        return _let(f32, tirx.floor(xc * _c(1.44269504088896341, f32) + _c(0.5, f32)), lambda n: _let(
            f32, xc - n * _c(0.693359375, f32) + n * _c(2.12194440e-4, f32), lambda r: _let(
                "int32", tirx.Cast("int32", n), lambda k: _nan_kept(
                    v, value((_horner(_EXP_P, r, f32) * r * r + r + _c(1.0, f32))
                             # 2**n in two halves: n spans [-126, 129], beyond a float32 exponent above
                             * _exp2i(tirx.shift_right(k, 1)) * _exp2i(k - tirx.shift_right(k, 1)))))))
    return _let(f32, x, body)


# Cephes' ``logf`` polynomial (highest degree last here), about 1 ulp.
_LOG_P = (3.3333331174e-1, -2.4999993993e-1, 2.0000714765e-1, -1.6668057665e-1, 1.4249322787e-1,
          -1.2420140846e-1, 1.1676998740e-1, -1.1514610310e-1, 7.0376836292e-2)


def _fast_log_f32(x: "tirx.PrimExpr", base: str = "e") -> "tirx.PrimExpr":
    """log(x) from x's exponent and a polynomial in its mantissa: a bit cast,
    integer and float arithmetic and selects only (``llvm.log`` on a vector
    is one libm call per lane).  Subnormal x is scaled by 2**23 first; 0 gives
    -inf, inf inf, a negative x or NaN NaN.  ``base`` "2" or "10": log2(x)
    as ``e + log(m) / ln 2`` (exact at powers of two), log10(x) as ``e
    log10(2) + log(m) log10(e)``, of ``x = m 2**e``, m in [sqrt(1/2), sqrt(2))."""
    f32, i32 = "float32", "int32"

    def special(v, value):  # on the bits: LLVM may assume no NaN in float compares
        return _let(i32, tirx.reinterpret(i32, v), lambda b: _let(
            i32, tirx.bitwise_and(b, tirx.const(0x7FFFFFFF, i32)), lambda a: _select(
                a > tirx.const(0x7F800000, i32), v, _select(a == tirx.const(0, i32), _c(-math.inf, f32), _select(
                    b < tirx.const(0, i32), _c(math.nan, f32), _select(
                        b == tirx.const(0x7F800000, i32), v, value))))))

    def body(v):
        tiny = v < _c(1.17549435e-38, f32)  # below the smallest normal float32

        def from_bits(bits):
            mantissa = tirx.bitwise_or(tirx.bitwise_and(bits, tirx.const(0x007FFFFF, i32)), tirx.const(0x3F000000, i32))

            def from_m(m):  # x = m * 2**(E - 126), m in [0.5, 1)
                low = m < _c(0.707106781186547524, f32)
                e = tirx.Cast(f32, tirx.shift_right(bits, 23) - _select(low, tirx.const(127, i32), tirx.const(126, i32))) \
                    - _select(tiny, _c(23.0, f32), _c(0.0, f32))

                def poly(r, e):
                    def log_m(z):  # log(m), the exponent added by the caller
                        return r + (r * z * _horner(_LOG_P, r, f32) - _c(0.5, f32) * z)
                    if base == "2":  # log(m) / ln 2, then the exponent
                        return _let(f32, r * r, lambda z: log_m(z) * _c(1.44269504088896341, f32) + e)
                    if base == "10":  # log10(2) in two parts: e * the first is exact for |e| < 2**10
                        return _let(f32, r * r, lambda z: log_m(z) * _c(0.434294481903251828, f32)
                                    + e * _c(2.48745663981195213739e-4, f32) + e * _c(0.30078125, f32))
                    return _let(f32, r * r, lambda z: r + (r * z * _horner(_LOG_P, r, f32) - e * _c(2.12194440e-4, f32)
                                                           - _c(0.5, f32) * z) + e * _c(0.693359375, f32))
                return _let(f32, _select(low, m + m, m) - _c(1.0, f32), lambda r: _let(f32, e, lambda ee: poly(r, ee)))
            return _let(f32, tirx.reinterpret(f32, mantissa), from_m)
        scaled = _select(tiny, v * _c(8388608.0, f32), v)
        return special(v, _let(i32, tirx.reinterpret(i32, scaled), from_bits))
    return _let(f32, x, body)


def _vector_or(fast: Callable, fallback: Callable) -> Callable:
    """``fast(x)`` where :func:`_argument` takes ``x``, else the intrinsic."""
    def lower(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
        arg = _argument(x, dtype)
        return fast(arg) if arg is not None else fallback(x)
    return lower


def pow_(x: "tirx.PrimExpr", y: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    """``pow(x, n)`` of a constant ``n`` in -1..4 as products (``x * x`` is
    the correctly rounded square, as libm's; ``x**3`` and ``x**4`` round
    twice, within an ulp; ``1 / x`` is exact), which vector loops keep in
    their lanes instead of one libm call per lane (a GELU's ``pow(x, 3)``);
    ``pow(x, 0)`` is 1, a NaN ``x`` included; ``pow(x, 0.5)`` is ``sqrt(x)``
    (as NumPy computes it), a float32 ``pow(x, n)`` of ``n`` = -0.5, +-1.5,
    +-2.5 a square root in float64 (:func:`_half_power`).
    Another constant exponent calls
    libm's ``pow`` directly (TVM warns on every ``tirx.pow`` of a constant
    3 or more), which a CPU build takes into vector lanes below 3
    (codegen/vecmath.py, libmvec's ``powf``); a computed one is ``tirx.pow``."""
    n = y.value if isinstance(y, (tirx.FloatImm, tirx.IntImm)) else None
    if n is None:
        return tirx.pow(x, y)
    if n == 0:
        return _c(1.0, dtype)
    if n == 0.5:
        return tirx.sqrt(x)  # (as NumPy's and PyTorch's power do it: sqrt(-0.0) is -0.0, of -inf NaN)
    if dtype == "float32" and n in _HALVES:
        return _half_power(x, n)
    if n not in (-1, 1, 2, 3, 4):
        return libm("pow")([x, y], dtype)

    def power(v):
        if n == -1:
            return _c(1.0, dtype) / v
        if n == 1:
            return v
        if n == 4:
            return _let(dtype, v * v, lambda sq: sq * sq)
        return v * v * v if n == 3 else v * v
    return _let(dtype, x, power)


# Exponents of float32 powers computed from a square root in float64 (pow_).
_HALVES = (-2.5, -1.5, -0.5, 1.5, 2.5)


def _half_power(x: "tirx.PrimExpr", n: float) -> "tirx.PrimExpr":
    """float32 ``pow(x, n)`` of ``n`` in :data:`_HALVES` (the ``r^-1.5`` of
    gravity and electrostatics) as ``sqrt(d)`` times or over integer powers
    of ``d``, ``x`` in float64: no overflow or underflow on the way and one
    rounding that matters, the last (a vector of float64 square roots, where
    libm's pow was one call per lane).  Never negative, as pow of a
    non-integer exponent (``abs``: ``sqrt(-0.0)`` is -0.0); ``-inf`` gives
    inf or 0, a negative ``x`` NaN."""
    f32, f64 = "float32", "float64"
    m = int(n - 0.5)  # n = m + 1/2, m in -3 .. 2

    def body(v):
        def on_d(d):
            s = tirx.sqrt(d)
            k = m if m >= 0 else -m - 1  # the integer power of d beside the root
            p = s
            for _ in range(k):
                p = d * p
            if m < 0:
                p = _c(1.0, f64) / p
            return _select(v == _c(-math.inf, f32), _c(math.inf if n > 0 else 0.0, f32),
                           tirx.abs(tirx.Cast(f32, p)))
        return _let(f64, tirx.Cast(f64, v), on_d)
    return _let(f32, x, body)


def _fast_log1p_f32(x: "tirx.PrimExpr") -> "tirx.PrimExpr":
    """log1p(x) as ``log(u) * (x / (u - 1))`` of ``u = 1 + x`` rounded (W.
    Kahan's formula: the quotient corrects the rounding of ``u``, a few ulps
    with :func:`_fast_log_f32`), ``x`` itself where ``u`` is 1 (|x| below
    half an ulp of 1, -0.0 kept), inf at inf.  ``llvm.log1p`` on a vector is
    one libm call per lane, whose time depends on the value (3x slower from
    x = 1 up: a spectral flux ``log1p(S)`` over a magnitude spectrogram)."""
    f32, i32 = "float32", "int32"

    def body(v):
        return _let(f32, v + _c(1.0, f32), lambda u: _select(
            u == _c(1.0, f32), v, _select(tirx.reinterpret(i32, u) == tirx.const(0x7F800000, i32), u,
                                          _fast_log_f32(u) * (v / (u - _c(1.0, f32))))))
    return _let(f32, x, body)


def _fast_expm1_f32(x: "tirx.PrimExpr") -> "tirx.PrimExpr":
    """expm1(x) as ``(u - 1) * (x / log(u))`` of ``u = exp(x)`` rounded (W.
    Kahan's formula, as :func:`_fast_log1p_f32`), ``x`` itself where ``u`` is
    1, -1 where ``u - 1`` rounds to it, inf where ``u`` overflows.  libm's
    ``expm1f`` ran one call per lane (24x the time of ``exp``)."""
    f32, i32 = "float32", "int32"

    def body(v):
        return _let(f32, _fast_exp_f32(v), lambda u: _let(f32, u - _c(1.0, f32), lambda d: _select(
            u == _c(1.0, f32), v, _select(d == _c(-1.0, f32), d, _select(
                tirx.reinterpret(i32, u) == tirx.const(0x7F800000, i32), u,
                d * (v / _fast_log_f32(u)))))))
    return _let(f32, x, body)


exp = _vector_or(_fast_exp_f32, tirx.exp)


def expm1(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    arg = _argument(x, dtype)
    return _fast_expm1_f32(arg) if arg is not None else libm("expm1")([x], dtype)


log = _vector_or(_fast_log_f32, tirx.log)
log2 = _vector_or(lambda x: _fast_log_f32(x, "2"), tirx.log2)
log10 = _vector_or(lambda x: _fast_log_f32(x, "10"), tirx.log10)
log1p = _vector_or(_fast_log1p_f32, tirx.log1p)


def tanh(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    arg = _argument(x, dtype)
    if arg is None:
        return libm("tanh")([x], dtype)
    x = arg
    f32 = "float32"

    def body(v):
        def both(a):
            small = _let(f32, v * v, lambda z: v + v * z * _horner(_TANH_P, z, f32))
            large = _c(1.0, f32) - _c(2.0, f32) / (_fast_exp_f32(a + a, nonnegative=True) + _c(1.0, f32))
            return _nan_kept(v, _select(a < _c(0.625, f32), small, _select(v < _c(0.0, f32), -large, large)))
        return _let(f32, tirx.abs(v), both)
    return _let(f32, x, body)


def sigmoid(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    arg = _argument(x, dtype)
    if arg is None:
        return tirx.sigmoid(x)
    x = arg
    f32 = "float32"

    def body(v):
        one = _c(1.0, f32)
        # one division for both signs (a vector select computes both of its sides)
        return _let(f32, _fast_exp_f32(-tirx.abs(v)), lambda e: _select(v >= _c(0.0, f32), one, e) / (one + e))
    return _let(f32, x, body)


# erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (beyond, +-1 in float32): the rational
# approximation of Eigen's and XLA's float32 erf, 4.2e-7 relative error at most
# (checked against math.erf on 200001 points of [-5, 5]).
_ERF_P = (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04, -5.69250639462346e-05,
          -2.10102402082508e-06, 2.77068142495902e-08, -2.72614225801306e-10)
_ERF_Q = (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03, -2.13374055278905e-04,
          -1.45660718464996e-05)


def erf(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    """float32: the vectorizable rational formula above (TVM lowers ``erf`` on
    a vector to one libm call per lane; a GELU spent most of its time there);
    float64, and arguments that are formulas themselves outside
    :func:`bindings`: ``tirx.erf``."""
    arg = _argument(x, dtype)
    if arg is None:
        return tirx.erf(x)
    x = arg
    f32 = "float32"

    def body(v):
        return _let(f32, tirx.max(tirx.min(v, _c(4.0, f32)), _c(-4.0, f32)), lambda xc: _let(
            f32, xc * xc, lambda z: _nan_kept(v, xc * _horner(_ERF_P, z, f32) / _horner(_ERF_Q, z, f32))))
    return _let(f32, x, body)


def _erfc(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    return libm("erfc")([x], dtype)


def cbrt(x: "tirx.PrimExpr", dtype: str) -> "tirx.PrimExpr":
    return libm("cbrt")([x], dtype)
