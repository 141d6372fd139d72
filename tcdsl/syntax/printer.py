"""Printing the AST: back to TC text (``to_tc``) and as s-expressions (``to_sexpr``).

``parse(to_tc(parse(src))) == parse(src)`` holds for every program: the TC
printer parenthesises every compound sub-expression, so precedence never
needs to be reconstructed.
"""
from __future__ import annotations

from ..errors import InternalError
from . import nodes as n

_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "float16"}


def to_tc(node: n.Node) -> str:
    match node:
        case n.Program(defs=defs):
            return "\n".join(to_tc(d) for d in defs)
        case n.Def():
            params = ", ".join(f"{_type(p.type)} {p.name}" for p in node.params)
            outs = ", ".join(f"{_type(o.type)} {o.name}" if o.type else o.name for o in node.outputs)
            return f"def {node.name}({params}) -> ({outs}) {{\n{_block(node.body, 1)}}}\n"
    raise InternalError(f"to_tc: {type(node).__name__}")


def _type(t: n.TensorType) -> str:
    name = _TYPE_NAMES.get(t.dtype, t.dtype)
    dims = (expr_to_tc(d) if isinstance(d, n.Expr) else str(d) for d in t.dims)
    return f"{name}({', '.join(dims)})" if t.dims else name


def stmt_to_tc(s: n.Stmt) -> str:
    """One statement as TC source."""
    return _stmt(s, 0)


def _block(stmts, depth: int) -> str:
    return "".join(_stmt(s, depth) for s in stmts)


def _stmt(s: n.Stmt, depth: int) -> str:
    pad = "  " * depth
    match s:
        case n.For():
            from_zero = isinstance(s.lo, n.Const) and type(s.lo.value) is int and s.lo.value == 0
            rng = expr_to_tc(s.hi) if from_zero else f"{expr_to_tc(s.lo)}:{expr_to_tc(s.hi)}"
            return f"{pad}for {s.var} in {rng} {{\n{_block(s.body, depth + 1)}{pad}}}\n"
        case n.If():
            return pad + _if(s, depth) + "\n"
        case n.Comprehension():
            lhs = s.tensor + ("(" + ", ".join(expr_to_tc(i) for i in s.indices) + ")" if s.indices else "()")
            out = f"{pad}{lhs} {s.op} {expr_to_tc(s.rhs)}"
            if s.equivalent:
                out += f" <=> {s.equivalent.name}(" + ", ".join(expr_to_tc(a) for a in s.equivalent.args) + ")"
            if s.wheres:
                out += " where " + ", ".join(_where(w) for w in s.wheres)
            return out + "\n"
    raise InternalError(f"to_tc: {type(s).__name__}")


def _if(s: n.If, depth: int) -> str:
    """``if c { } else if c { } else { }``: an else-block holding just an If prints as ``else if``."""
    pad = "  " * depth
    out = f"if {expr_to_tc(s.cond)} {{\n{_block(s.then, depth + 1)}{pad}}}"
    match s.orelse:
        case ():
            return out
        case (n.If() as inner,):
            return out + " else " + _if(inner, depth)
    return out + f" else {{\n{_block(s.orelse, depth + 1)}{pad}}}"


def _where(w: n.WhereClause) -> str:
    match w:
        case n.RangeConstraint():
            return f"{w.var} in {expr_to_tc(w.lo)}:{expr_to_tc(w.hi)}"
        case n.Exists():
            return f"exists {expr_to_tc(w.expr)}"
        case n.Let():
            return f"{w.name} = {expr_to_tc(w.expr)}"
    raise InternalError(f"to_tc: {type(w).__name__}")


def expr_to_tc(e: n.Expr) -> str:
    match e:
        case n.Ident(name=v) | n.SizeVar(name=v) if v in n.DERIVED_TEXT:
            return f"({n.DERIVED_TEXT[v]})"  # a derived size as the product it stands for (sema/sizes.py)
        case n.Ident(name=v) | n.IndexVar(name=v) | n.SizeVar(name=v):
            return v
        case n.Const(value=v):
            return _number(v)
        case n.Call(name=f, args=args) | n.Access(tensor=f, indices=args) | n.BuiltinCall(name=f, args=args):
            return f + "(" + ", ".join(expr_to_tc(a) for a in args) + ")"
        case n.Unary(op="-", operand=n.Const(value=float() as v)) if v == float("inf"):
            return "-(inf)"  # `-inf` would read back as the one literal -inf
        case n.Unary(op=op, operand=x):
            return f"{op}{_paren(x)}"
        case n.Binary(op=op, lhs=a, rhs=b) if op in ("min", "max"):
            return f"{op}({expr_to_tc(a)}, {expr_to_tc(b)})"
        case n.Binary(op=op, lhs=a, rhs=b):
            return f"{_paren(a)} {op} {_paren(b)}"
        case n.Select(cond=c, then=a, other=b):
            return f"{_paren(c)} ? {_paren(a)} : {_paren(b)}"
        case n.DimSize(tensor=t, dim=k):
            return f"{t}.{k}"
        case n.Cast(to=to, operand=x):
            return f"{_TYPE_NAMES.get(to, to)}({expr_to_tc(x)})"
    raise InternalError(f"expr_to_tc: {type(e).__name__}")


def _number(v: int | float) -> str:
    """A literal that reads back as ``v`` (``inf`` also for a literal too large for a double)."""
    if isinstance(v, float):
        return "inf" if v == float("inf") else repr(v)
    return str(v)


def _paren(e: n.Expr) -> str:
    s = expr_to_tc(e)
    if isinstance(e, (n.Binary, n.Select, n.Unary)) and not (isinstance(e, n.Binary) and e.op in ("min", "max")):
        return f"({s})"
    if isinstance(e, n.Const) and (e.value < 0 or repr(e.value).startswith("-")):
        return f"({s})"
    return s


def to_sexpr(node) -> str:
    """A deterministic s-expression dump of any node (spans left out)."""
    if isinstance(node, tuple):
        return "(" + " ".join(to_sexpr(x) for x in node) + ")"
    if not isinstance(node, n.Node):
        return repr(node)
    from dataclasses import fields

    parts = [type(node).__name__]
    for f in fields(node):
        if f.name == "span":
            continue
        value = getattr(node, f.name)
        if f.name == "dtype" and value is None:
            continue
        if value in ((), None) and f.name in ("wheres", "equivalent", "reduction_vars", "orelse"):
            continue
        parts.append(f":{f.name} {to_sexpr(value)}")
    return "(" + " ".join(parts) + ")"
