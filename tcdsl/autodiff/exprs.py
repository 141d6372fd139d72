"""Expression helpers for the adjoint: smart constructors that fold the
trivial cases (``0 * x``, ``1 * x``, ``x + 0``), substitution of names,
and integer linear forms of index expressions.

Generated nodes carry no ``dtype``: the adjoint is printed as TC text and
checked again, and sema types it then."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from ..syntax import nodes as n

ZERO = n.Const(0.0)
ONE = n.Const(1.0)


def const(v: float) -> n.Const:
    return n.Const(float(v))


def is_const(e: n.Expr, v: float) -> bool:
    return isinstance(e, n.Const) and not isinstance(e.value, bool) and e.value == v


def neg(a: n.Expr) -> n.Expr:
    if isinstance(a, n.Const) and a.value == 0:
        return ZERO
    if isinstance(a, n.Unary) and a.op == "-":
        return a.operand
    return n.Unary("-", a)


def add(a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(a, 0):
        return b
    if is_const(b, 0):
        return a
    if isinstance(b, n.Unary) and b.op == "-":
        return n.Binary("-", a, b.operand)
    return n.Binary("+", a, b)


def sub(a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(b, 0):
        return a
    if is_const(a, 0):
        return neg(b)
    return n.Binary("-", a, b)


def mul(a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(a, 0) or is_const(b, 0):
        return ZERO
    if is_const(a, 1):
        return b
    if is_const(b, 1):
        return a
    if is_const(a, -1):
        return neg(b)
    if is_const(b, -1):
        return neg(a)
    if isinstance(a, n.Unary) and a.op == "-":
        return neg(mul(a.operand, b))
    if isinstance(b, n.Unary) and b.op == "-":
        return neg(mul(a, b.operand))
    return n.Binary("*", a, b)


def div(a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(a, 0):
        return ZERO
    if is_const(b, 1):
        return a
    if isinstance(a, n.Unary) and a.op == "-":
        return neg(div(a.operand, b))
    return n.Binary("/", a, b)


def select(c: n.Expr, a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(a, 0) and is_const(b, 0):
        return ZERO
    if a == b:
        return a
    return n.Select(c, a, b)


def cmp(op: str, a: n.Expr, b: n.Expr) -> n.Expr:
    return n.Binary(op, a, b)


def land(a: n.Expr | None, b: n.Expr | None) -> n.Expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return n.Binary("&&", a, b)


def call(name: str, *args: n.Expr) -> n.Expr:
    return n.BuiltinCall(name, tuple(args))


def square(a: n.Expr) -> n.Expr:
    return mul(a, a)


# ------------------------------------------------------------ substitution
def rewrite(e: n.Node, fn: Callable[[n.Node], n.Node | None]) -> n.Node:
    """Bottom-up rewrite: ``fn`` sees each node (children first rewritten)
    and returns a replacement or None to keep it."""
    e = n.map_children(e, lambda c: rewrite(c, fn))
    out = fn(e)
    return e if out is None else out


def substitute(e: n.Node, names: Mapping[str, n.Expr]) -> n.Node:
    """Replace the variables (index, size or unresolved names) in ``names``."""
    if not names:
        return e

    def fn(x):
        if isinstance(x, (n.IndexVar, n.SizeVar, n.Ident)) and x.name in names:
            return names[x.name]
        if isinstance(x, n.RangeConstraint) and x.var in names:
            new = names[x.var]
            if isinstance(new, (n.IndexVar, n.Ident)):
                return replace(x, var=new.name)
        return None
    return rewrite(e, fn)


names_in = n.names_in


def accesses(e: n.Node) -> list[n.Access]:
    return [x for x in n.walk(e) if isinstance(x, n.Access)]


def strip(e: n.Node) -> n.Node:
    """``e`` without dtypes and spans (so generated and checked trees compare equal)."""
    def fn(x):
        if isinstance(x, n.Expr) and x.dtype is not None:
            return replace(x, dtype=None, span=None)
        if x.span is not None:
            return replace(x, span=None)
        return None
    return rewrite(e, fn)


# ----------------------------------------------------------- linear forms
Linear = dict  # name -> int coefficient; the key 1 holds the constant


linear = n.linear  # (syntax/nodes.py: shared with polyhedral/parity.py)


def lin_add(a: Linear, b: Linear, scale: int = 1) -> Linear:
    out = dict(a)
    for k, c in b.items():
        out[k] = out.get(k, 0) + scale * c
    return {k: c for k, c in out.items() if c}


def lin_subst(a: Linear, name: str, value: Linear) -> Linear:
    c = a.get(name, 0)
    if not c:
        return a
    rest = {k: v for k, v in a.items() if k != name}
    return lin_add(rest, value, c)


def lin_expr(a: Linear, sizes: set[str]) -> n.Expr:
    """The linear form as an expression (sizes as SizeVar, other names as IndexVar)."""
    out: n.Expr | None = None
    for k, c in a.items():
        if k == 1:
            continue
        x: n.Expr = n.SizeVar(k) if k in sizes else n.IndexVar(k)
        term = x if abs(c) == 1 else n.Binary("*", n.Const(abs(c)), x)
        if out is None:
            out = term if c > 0 else n.Unary("-", term)
        else:
            out = n.Binary("+" if c > 0 else "-", out, term)
    k = a.get(1, 0)
    if out is None:
        return n.Const(k)
    if k:
        out = n.Binary("+" if k > 0 else "-", out, n.Const(abs(k)))
    return out
