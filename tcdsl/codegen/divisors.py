"""Integer division by a size, as a multiplication (CPU).

``p / W`` and ``p % W`` with ``W`` a size and ``p`` never negative (a flat
index's digits, ``k / KW`` of a pooling window flattened into one variable)
were a 32-bit ``idiv`` per element, 20-30 cycles and never a vector
instruction: an adaptive max pooling over windows indexed ``k / KW``, ``k %
KW`` ran 6x slower than with its sizes fixed, where LLVM divides by a
constant with a multiplication.  Inside :func:`size_divisors` (the CPU's
lowering, ``lower.lower_to_tir``) such a division is computed as LLVM does
for a constant (Granlund and Montgomery): with ``d = max(W, 1)``, ``l =
ceil(log2 d)``, ``s = 31 + l`` and ``M = ceil(2**s / d)``, for every ``0 <= p
< 2**31``, ``p / d == (p * M) >> s`` (``M * d - 2**s < d <= 2**l``; ``p * M <
2**63`` in 64 bits).  ``M`` and ``s`` are computed once, before the
program's first statement, through a local array that TVM's simplifier does
not see through (it would substitute them into every use).  By a size of 0
the quotient and the remainder are 0, as NumPy's (:func:`intarith._sized_division`).
"""
from __future__ import annotations

import contextlib

import tvm
from tvm import tirx

from ..syntax import nodes as n
from .intarith import dtype_of

_DIVISORS: list = [None]  # inside size_divisors(): {key: (m, s, divisor)}


@contextlib.contextmanager
def size_divisors():
    """Divisions lowered inside the context by a size (:func:`of_sizes`) use
    the multiplication; yields ``{key: (m, s, divisor)}`` for :func:`bind`."""
    saved, _DIVISORS[0] = _DIVISORS[0], {}
    try:
        yield _DIVISORS[0]
    finally:
        _DIVISORS[0] = saved


def of_sizes(e: n.Expr) -> bool:
    """``e`` is built of sizes and constants only (its value is the same
    everywhere in the program)."""
    return all(isinstance(x, (n.SizeVar, n.Const, n.Binary, n.Unary)) for x in n.walk(e)) \
        and any(isinstance(x, n.SizeVar) for x in n.walk(e))


def active() -> bool:
    return _DIVISORS[0] is not None


def plain(x: tirx.PrimExpr) -> bool:
    """``x`` holds no division: its remainder ``x - q * d`` may name it twice
    (a remainder of a remainder of ..., ``n % (B * C * D) % (C * D) % D``,
    would name ``n`` 2**levels times; there ``%`` stays one ``truncmod``)."""
    if isinstance(x, (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)) or is_quotient(x):
        return False
    parts = [getattr(x, f) for f in ("a", "b", "value", "condition", "true_value", "false_value") if hasattr(x, f)]
    parts += list(x.args) if hasattr(x, "args") else []
    return all(plain(p) for p in parts if isinstance(p, tvm.ir.expr.Expr))


def divide(op: str, x: tirx.PrimExpr, y: tirx.PrimExpr) -> tirx.PrimExpr:
    """``x / y`` or ``x % y`` (``op``) for an int32 ``x >= 0`` and a size ``y >= 0``."""
    divs = _DIVISORS[0]
    key = str(y)
    if key not in divs:
        k = len(divs)
        divs[key] = (tirx.Var(f"div{k}_m", "uint64"), tirx.Var(f"div{k}_s", "uint64"), y)
    m, s, _ = divs[key]
    one = tirx.const(1, dtype_of(y))
    q = tirx.Cast(dtype_of(x), tirx.shift_right(tirx.Cast("uint64", x) * m, s))
    if op == "/":
        return q * tirx.min(y, one)
    return x - q * tirx.max(y, one)


def is_quotient(e) -> bool:
    """``e`` is a quotient that :func:`divide` made (codegen/invariant.py
    computes one that changes with a register tile's row alone once per row)."""
    return isinstance(e, tirx.Cast) and type(e.value).__name__ == "RShift" and dtype_of(e.value) == "uint64"


def bind(divs: dict, body: tirx.Stmt) -> tirx.Stmt:
    """``body`` after the statements computing each divisor's ``M`` and ``s``
    (through a local array: see the module docstring)."""
    if not divs:
        return body
    cells = tirx.decl_buffer((2 * len(divs),), "uint64", name="divisors", scope="local")
    out = [tirx.AllocBuffer(cells)]
    # in the order met: a divisor may be a quotient of sizes by an earlier one (``h / (H / KV)``)
    for i, (m, s, y) in enumerate(divs.values()):
        d = tirx.max(y, tirx.const(1, dtype_of(y)))
        bits = tirx.Select(d > 1, tirx.const(32, "int32") - tirx.clz(tirx.Cast("int32", d - 1)), tirx.const(0, "int32"))
        shift = tirx.Cast("uint64", bits + 31)
        d64 = tirx.Cast("uint64", d)
        magic = tirx.truncdiv(tirx.shift_left(tirx.const(1, "uint64"), shift) + d64 - tirx.const(1, "uint64"), d64)
        out += [tirx.BufferStore(cells, magic, [2 * i]), tirx.BufferStore(cells, shift, [2 * i + 1]),
                tirx.Bind(m, tirx.BufferLoad(cells, [2 * i])), tirx.Bind(s, tirx.BufferLoad(cells, [2 * i + 1]))]
    return tirx.SeqStmt(out + [body])

