"""The TIR lowering of every TC builtin: name -> ``lower(args, dtype)``.

The names are those of :mod:`tcdsl.sema.builtins` (which holds their arities
and NumPy references).  ``lower(name, args, dtype)`` is a TIR expression of
``dtype``; the caller has already cast every argument to ``dtype``, which is
``"float32"`` or ``"float64"``.

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

from typing import Callable, Sequence

from tvm import tirx

from ..sema.builtins import BUILTINS
from . import formulas as f
from . import special as sp
from .formulas import check_dtype, float_const, libm as _libm

__all__ = ["LOWERINGS", "FORMULAS", "lower", "float_const"]

Lower = Callable[[Sequence["tirx.PrimExpr"], str], "tirx.PrimExpr"]


def _intrin(fn: Callable[..., "tirx.PrimExpr"]) -> Lower:
    """A tirx intrinsic; TVM lowers it per target (llvm intrinsic, libm or CUDA)."""

    def lower(args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
        check_dtype(dtype)
        return fn(*args)

    return lower


def _formula(fn: Callable[..., "tirx.PrimExpr"]) -> Lower:
    """A TIR formula ``fn(*args, dtype)``."""

    def lower(args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
        check_dtype(dtype)
        return fn(*args, dtype)

    return lower


# --------------------------------------------------------------------------- #
# The table
# --------------------------------------------------------------------------- #

LOWERINGS: dict[str, Lower] = {
    "acos": _intrin(tirx.acos),
    "acosh": _intrin(tirx.acosh),
    "asin": _intrin(tirx.asin),
    "asinh": _intrin(tirx.asinh),
    "atan2": _intrin(tirx.atan2),
    "atan": _intrin(tirx.atan),
    # tirx.atanh is 0.5*log((1+x)/(1-x)) on llvm: 1.5e-5 relative error in float32.
    "atanh": _libm("atanh"),
    "cbrt": _libm("cbrt"),
    "ceil": _intrin(tirx.ceil),
    "copysign": _intrin(tirx.copysign),
    "cos": _intrin(tirx.cos),
    # libm: TVM 0.27 has no vector lowering of tirx.cosh / tirx.sinh on llvm ("unknown intrinsic").
    "cosh": _libm("cosh"),
    "cospi": _formula(sp.cospi),
    "cyl_bessel_i0": _formula(sp.i0),
    "cyl_bessel_i1": _formula(sp.i1),
    "erfc": _libm("erfc"),
    "erfcinv": _formula(sp.erfcinv),
    "erfcx": _formula(sp.erfcx),
    # float32: a vectorizable formula (see f.erf); float64: tirx.erf.
    "erf": _formula(f.erf),
    "erfinv": _formula(sp.erfinv),
    # tirx.exp10 is exp(x*ln10) on llvm: 1.2e-11 relative error in float64.
    "exp10": _libm("exp10"),
    "exp2": _intrin(tirx.exp2),
    "exp": _formula(f.exp),
    # float32: a vectorizable formula (see f.expm1); float64: libm.
    "expm1": _formula(f.expm1),
    "fabs": _intrin(tirx.abs),
    "fdim": _libm("fdim"),
    # TC maps fdivide to CUDA's fast fdividef; here it is the exact division.
    "fdivide": _intrin(lambda a, b: a / b),
    "floor": _intrin(tirx.floor),
    "fma": _libm("fma"),
    # C fmax/fmin ignore a NaN operand (tirx.max/min alone do not): selects on its bits.
    "fmax": _formula(f.fmax_fmin("fmax")),
    "fmin": _formula(f.fmax_fmin("fmin")),
    # tirx.fmod has no llvm lowering ("unknown intrinsic tirx.fmod").
    "fmod": _libm("fmod"),
    "hypot": _intrin(sp.hypot),
    "j0": _libm("j0"),
    "j1": _libm("j1"),
    "lgamma": _libm("lgamma"),
    # float32: a vectorizable formula (see f.log10); float64: tirx.log10.
    "log10": _formula(f.log10),
    # float32: a vectorizable formula (see f.log1p); float64: tirx.log1p.
    "log1p": _formula(f.log1p),
    # float32: a vectorizable formula (see f.log2); float64: tirx.log2.
    "log2": _formula(f.log2),
    "logb": _libm("logb"),
    "log": _formula(f.log),
    "nextafter": _intrin(tirx.nextafter),
    "norm3d": _formula(sp.norm3d),
    "norm4d": _formula(sp.norm4d),
    "normcdf": _formula(sp.normcdf),
    "normcdfinv": _formula(sp.normcdfinv),
    # a constant exponent in -1..4: products (see f.pow_)
    "pow": _formula(f.pow_),
    "rcbrt": _formula(lambda x, dt: sp.recip(f.cbrt(x, dt), dt)),
    "remainder": _libm("remainder"),
    "rhypot": _formula(lambda a, b, dt: sp.recip(sp.hypot(a, b), dt)),
    "rnorm3d": _formula(lambda a, b, c, dt: sp.recip(sp.norm3d(a, b, c, dt), dt)),
    "rnorm4d": _formula(lambda a, b, c, d, dt: sp.recip(sp.norm4d(a, b, c, d, dt), dt)),
    # tirx.round is nearbyint (half to even); C/CUDA round() rounds halves away from zero.
    "round": _libm("round"),
    "rsqrt": _intrin(tirx.rsqrt),
    "sin": _intrin(tirx.sin),
    "sinh": _libm("sinh"),
    "sinpi": _formula(sp.sinpi),
    "sqrt": _intrin(tirx.sqrt),
    "tan": _intrin(tirx.tan),
    # Not tirx.tanh: its llvm formula loses small arguments (relative error > 1e-6 below
    # |x| = 0.01 in float32, 1.0 below 1e-8; 2.7e-5 in float64) and, repeating its
    # argument after CSE, makes nested tanh compile in exponential time.
    # float32: a vectorizable formula (see f.tanh); float64 and nested calls: libm.
    "tanh": _formula(f.tanh),
    "tgamma": _libm("tgamma"),
    "trunc": _intrin(tirx.trunc),
    "y0": _libm("y0"),
    "y1": _libm("y1"),
    # Not in TC; 1/(1+exp(-x)), computed from exp(-|x|) so that it never overflows.
    "sigmoid": _formula(f.sigmoid),
}
assert set(LOWERINGS) == set(BUILTINS), "every builtin of sema/builtins.py has a lowering here"

# Lowered as explicit TIR formulas (CUDA-only functions, or no llvm lowering in TVM);
# these are the ones whose nesting is expensive to compile (see the module docstring).
FORMULAS: frozenset[str] = frozenset({
    "cospi", "sinpi", "cyl_bessel_i0", "cyl_bessel_i1", "erfcinv", "erfcx", "erfinv",
    "normcdf", "normcdfinv", "norm3d", "norm4d", "rnorm3d", "rnorm4d", "rcbrt", "rhypot",
})


def lower(name: str, args: Sequence["tirx.PrimExpr"], dtype: str) -> "tirx.PrimExpr":
    """The builtin ``name`` of ``args`` (each already of ``dtype``) in TIR."""
    # A wrong count would otherwise reach call_pure_extern as a malformed call.
    if len(args) != BUILTINS[name].arity:
        raise ValueError(f"{name} takes {BUILTINS[name].arity} argument(s), got {len(args)}")
    return LOWERINGS[name](args, dtype)
