"""Integer arithmetic as NumPy does it, in TIR: ``+ - *`` wrapped into 8 to
32 bits (TVM's LLVM backend marks them no-wrap), and ``/`` and ``%`` that
round down and give 0 for a zero divisor instead of trapping
(codegen/expr.py lowers the language's operators through these)."""
from __future__ import annotations

from tvm import tirx

from ..sema import types as ty


def dtype_of(x: tirx.PrimExpr) -> str:
    """The scalar type of a TIR expression (``PrimExpr.ty`` in TVM 0.27)."""
    return str(x.ty)


def _wrap_to(v: tirx.PrimExpr, dtype: str) -> tirx.PrimExpr:
    """A 64-bit integer ``v`` wrapped into the 8 to 32-bit integer ``dtype``,
    through non-negative masks (TVM cannot fold a narrowing cast of a
    constant out of the target's range)."""
    bits = ty.bits(dtype)
    if dtype_of(v) == "uint64":
        return tirx.Cast(dtype, tirx.bitwise_and(v, tirx.const((1 << bits) - 1, "uint64"))) if dtype.startswith("u") \
            else _wrap_to(tirx.Cast("int64", tirx.bitwise_and(v, tirx.const((1 << bits) - 1, "uint64"))), dtype)
    low = tirx.bitwise_and(v, tirx.const((1 << bits) - 1, "int64"))
    if dtype.startswith("u"):
        return tirx.Cast(dtype, low)
    sign = tirx.const(1 << (bits - 1), "int64")
    return tirx.Cast(dtype, tirx.bitwise_xor(low, sign) - sign)


def _to_unsigned(v: tirx.PrimExpr, dtype: str) -> tirx.PrimExpr:
    """A signed ``v`` wrapped into ``dtype`` (two's complement) through values
    that are never negative: TVM's constant folder cannot make a negative
    constant of an unsigned type (``x * min(-1, 3)`` on uint32 failed to build)."""
    bits = ty.bits(dtype)
    wide = v if dtype_of(v) == "int64" else tirx.Cast("int64", v)
    if bits < 64:
        return tirx.Cast(dtype, tirx.bitwise_and(wide, tirx.const((1 << bits) - 1, "int64")))
    low = tirx.Cast(dtype, tirx.bitwise_and(wide, tirx.const((1 << 63) - 1, "int64")))
    return low + tirx.Select(wide < tirx.const(0, "int64"), tirx.const(1 << 63, dtype), tirx.const(0, dtype))


def _is_min(y: tirx.PrimExpr) -> bool:
    """The constant MIN of a signed type (TVM's floordiv lowering negates it and fails)."""
    t = dtype_of(y)
    return isinstance(y, tirx.IntImm) and t.startswith("int") and y.value == -(1 << (ty.bits(t) - 1))


def _division_by_min(op: str, x: tirx.PrimExpr, t: str) -> tirx.PrimExpr:
    """Floor ``x / MIN`` is 1 for MIN, -1 for x > 0, else 0; ``x % MIN`` is ``x - q * MIN``.
    ``x == MIN`` is tested in int64: TVM folded ``x <= -2147483648`` on int32 to false."""
    lowest, zero, one = tirx.const(-(1 << (ty.bits(t) - 1)), t), tirx.const(0, t), tirx.const(1, t)
    wide = "int64"
    is_min = tirx.EQ(tirx.Cast(wide, x) if t != wide else x, tirx.const(-(1 << (ty.bits(t) - 1)), wide))
    if op == "/":
        return tirx.Select(is_min, one, tirx.Select(tirx.GT(x, zero), zero - one, zero))
    return tirx.Select(is_min, zero, tirx.Select(tirx.GT(x, zero), x + lowest, x))


def _negate(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``-x``; for unsigned ``x`` wrapping around as ``~x + 1``: TVM cannot make the
    constant -1 of an unsigned type, and it folds ``0 - x`` to 0."""
    if dtype_of(x).startswith("u"):
        return tirx.bitwise_not(x) + tirx.const(1, dtype_of(x))
    return -x


def _safe_divisor(y: tirx.PrimExpr) -> bool:
    """A constant divisor that cannot trap (not 0, not -1)."""
    return isinstance(y, tirx.IntImm) and y.value not in (0, -1)


def _guarded_division(op: str, x: tirx.PrimExpr, y: tirx.PrimExpr, t: str) -> tirx.PrimExpr:
    """Integer ``/`` and ``%`` by a run-time value, as NumPy does them: ``x / 0``
    and ``x % 0`` are 0, and ``MIN / -1`` wraps.  The hardware traps (SIGFPE)
    on both, which would kill the process.  Only min/max arithmetic, no Select:
    TVM simplifies a Select's branches under its condition and then evaluates
    both, which brought the division by zero back (and it folds ``0 - u`` of
    an unsigned ``u`` to 0, so no two's complement tricks either)."""
    one = tirx.const(1, t)

    def is_zero(v):  # 1 where v == 0, else 0
        sign = tirx.min(v, one) if t.startswith("u") else tirx.min(tirx.max(v, tirx.const(-1, t)), one)
        return one - sign * sign

    zero = is_zero(y)
    minus_one = tirx.const(0, t) if t.startswith("u") else is_zero(y + one)
    safe = y + zero + minus_one + minus_one  # 1 where y is 0 or -1, else y
    if op == "%":
        return floormod(x, safe)  # x % 1 == 0, as x % 0 and x % -1 are
    return floordiv(x, safe) * (one - zero) * (one - minus_one - minus_one)


def _sized_division(op: str, x: tirx.PrimExpr, y: tirx.PrimExpr, x_nonneg: bool) -> tirx.PrimExpr:
    """``x / y`` and ``x % y`` for a ``y`` that is never negative (a size,
    ``B * C``), as NumPy does them: by 0 they are 0.  ``y`` appears twice
    and ``x`` at most twice, so nested remainders (``r % (B * C) % C``) stay
    small; :func:`_guarded_division` repeats its operands at every level,
    which made such programs take minutes to compile."""
    one = tirx.const(1, dtype_of(y))
    safe = tirx.max(y, one)
    if op == "%":
        if x_nonneg:
            return tirx.truncmod(x, safe)
        r = tirx.truncmod(x, safe)
        return r + tirx.Select(r < tirx.const(0, dtype_of(r)), safe, tirx.const(0, dtype_of(r)))
    if x_nonneg:
        q = tirx.truncdiv(x, safe)
    else:  # safe > 0: C's quotient rounds up exactly where the remainder is negative (x named twice)
        q = tirx.truncdiv(x, safe) - tirx.Cast(dtype_of(x), tirx.truncmod(x, safe) < tirx.const(0, dtype_of(x)))
    return q * tirx.min(y, one)


def _pow2(y: tirx.PrimExpr) -> bool:
    return isinstance(y, tirx.IntImm) and y.value > 0 and y.value & (y.value - 1) == 0


def floordiv(x: tirx.PrimExpr, y: tirx.PrimExpr) -> tirx.PrimExpr:
    """Integer ``x // y`` (rounding down) for a nonzero ``y``.  By a power of
    two, TVM's floordiv (a shift); else from C's truncating division and
    remainder, corrected where they differ: TVM lowers a floordiv by any
    other divisor to a ``Let``, which a statement copied into an unrolled
    register tile binds once per copy and TVM then rejects, so such a
    division ruled out register tiles (a grouped convolution's ``o / (O /
    G)`` ran 8x slower than one by 32).  Unsigned values divide as C does."""
    if _pow2(y) or dtype_of(x).startswith("u"):
        return tirx.floordiv(x, y)
    q, r = tirx.truncdiv(x, y), tirx.truncmod(x, y)
    zero = tirx.const(0, dtype_of(x))
    # r and y of different signs: their xor is negative (a != of two bools trips TVM's LLVM codegen)
    return q - tirx.Cast(dtype_of(x), tirx.And(r != zero, tirx.bitwise_xor(r, y) < zero))


def floormod(x: tirx.PrimExpr, y: tirx.PrimExpr) -> tirx.PrimExpr:
    """Integer ``x % y`` with the sign of ``y`` (Python's), for a nonzero
    ``y``; see :func:`floordiv`."""
    if _pow2(y) or dtype_of(x).startswith("u"):
        return tirx.floormod(x, y)
    if isinstance(y, tirx.IntImm) and 0 < y.value < 1 << (ty.bits(dtype_of(x)) - 2):
        # x named once (nested remainders by constants stay small); r + y cannot overflow
        return tirx.truncmod(tirx.truncmod(x, y) + y, y)
    r = tirx.truncmod(x, y)
    zero = tirx.const(0, dtype_of(x))
    return r + tirx.Select(tirx.And(r != zero, tirx.bitwise_xor(r, y) < zero), y, zero)
