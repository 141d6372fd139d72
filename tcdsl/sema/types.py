"""Scalar types and TC's promotion rules.

Rules, in the order they are applied to a binary arithmetic expression:

1. If either side is a floating type, the result is the wider floating type
   (float16 < float32 < float64); an integer side is converted to it.
2. Otherwise both are integers (or bool). With the same signedness the
   result is the wider type; a signed and an unsigned integer give the
   signed type of the larger width (TC's ``match_types``: ``uint32 +
   int32`` is ``int32``, ``uint64 + int32`` is ``int64``).
3. ``bool`` counts as a 1-bit unsigned integer (``bool + uint8`` is
   ``uint8``, ``bool + int8`` is ``int8``).
4. Comparisons, ``&&``, ``||`` and ``!`` give ``bool``.
5. Integer literals are ``int32`` and float literals ``float32``, but a
   literal adapts to the other operand's type (``2 * A(i)`` stays float16
   for a float16 ``A``; ``0.1 * D(i)`` is float64 for a double ``D``).
"""
from __future__ import annotations

FLOATS = ("float16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
ALL = FLOATS + INTS + ("bool",)

# Identity of each reduction, by dtype class (TC: `+=!` starts from it).
def identity(reduction: str, dtype: str) -> int | float | bool:
    if reduction in ("argmax", "argmin"):
        return -1  # no index yet (and the result of an empty reduction)
    if reduction == "+":
        return 0
    if reduction == "*":
        return 1
    import numpy as np

    if is_float(dtype):
        return float("inf") if reduction == "min" else float("-inf")
    info = np.iinfo(np.dtype(dtype)) if dtype != "bool" else None
    if info is None:
        return reduction == "min"
    return int(info.max) if reduction == "min" else int(info.min)


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def is_int(dtype: str) -> bool:
    return dtype in INTS or dtype == "bool"


def bits(dtype: str) -> int:
    return 1 if dtype == "bool" else int("".join(c for c in dtype if c.isdigit()))


def promote(a: str, b: str) -> str:
    """The type of ``a op b`` for arithmetic ``op`` (rules 1-3)."""
    if a == b:
        return a
    if is_float(a) or is_float(b):
        fa = [t for t in (a, b) if is_float(t)]
        return max(fa, key=bits)
    if a == "bool":
        return b
    if b == "bool":
        return a
    n = max(bits(a), bits(b))
    if a.startswith("u") == b.startswith("u"):
        return max((a, b), key=bits)
    return f"int{n}"


def comparison_type(ta: str, tb: str, a_literal=None, b_literal=None) -> str:
    """The type ``a < b`` (any comparison) is done in, for operands of types
    ``ta`` and ``tb``; ``a_literal``/``b_literal``: the operand's value where
    it is a literal.  A literal adapts to the other side, unless a float
    literal meets an integer (then both are promoted); bools are compared as
    int32, so that ``A(i) == 2`` is false, as in NumPy."""
    if a_literal is not None and b_literal is None:
        t = tb if not (is_int(tb) and isinstance(a_literal, float)) else promote(ta, tb)
    elif b_literal is not None and a_literal is None:
        t = ta if not (is_int(ta) and isinstance(b_literal, float)) else promote(ta, tb)
    else:
        t = promote(ta, tb)
    return "int32" if t == "bool" else t


def is_narrowing(src: str, dst: str) -> bool:
    """True when storing a ``src`` value into a tensor declared ``dst`` is
    rejected, as TC rejects it: unless ``promote(src, dst)`` is ``dst``
    (float into int, wider into narrower, signed into unsigned)."""
    return promote(src, dst) != dst


def literal(value: int | float | bool, dtype: str) -> int | float | bool:
    """A literal converted to ``dtype``, as a C cast converts it: a float
    rounds to the nearest value of the type (infinity beyond its range), an
    integer wraps around (two's complement), a float becomes an integer by
    truncation (NumPy's value where that is undefined: NaN, out of range)."""
    import numpy as np

    if dtype == "bool":
        return bool(value)
    if is_float(dtype):
        try:
            v = float(value)
        except OverflowError:  # an integer literal beyond the range of a double
            v = float("inf") if value > 0 else float("-inf")
        with np.errstate(over="ignore"):
            return float(np.asarray(v).astype(dtype))
    if isinstance(value, float):
        import warnings

        with warnings.catch_warnings(), np.errstate(invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return int(np.asarray(value).astype(dtype))
    n = bits(dtype)
    value = int(value) & ((1 << n) - 1)
    return value - (1 << n) if not dtype.startswith("u") and value >= 1 << (n - 1) else value
