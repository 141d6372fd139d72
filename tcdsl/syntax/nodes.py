"""The tcdsl AST.

Node table (TC's names, `tc/lang/tree_views.h`, plus the loop extension):

=================  ============================================  =========
node               TC source                                     made by
=================  ============================================  =========
Program            several ``def``                               parser
Def                ``def f(params) -> (outputs) { stmts }``      parser
Param              ``float(M, K) A``                             parser
TensorType         ``float(M, K)``                               parser
Output             ``C`` or ``float(M) C`` in ``-> (...)``       parser
Comprehension      ``C(i, j) +=! A(i, k) * B(k, j) where ...``   parser
RangeConstraint    ``where i in lo:hi``                          parser
Exists             ``where exists X(i)``                         parser
Let                ``where x = expr``                            parser
Equivalent         ``<=> name(args)``                            parser
For                ``for t in T { ... }`` / ``for t in lo:hi``   parser
If                 ``if c { ... } else { ... }``                 parser
Ident              a name used as a value                        parser
Const              ``1``, ``2.5``, ``1e-3f``                     parser
Call               ``X(e, ...)`` before sema                     parser
Unary, Binary      ``-x``, ``!x``, ``a + b``, ``min(a, b)``      parser
Select             ``c ? a : b``                                 parser
DimSize            ``X.k``                                       parser
Cast               ``float(e)``                                  parser
Access             a tensor read ``X(e, ...)``                   sema
BuiltinCall        ``tanh(e)``                                   sema
IndexVar, SizeVar  a name resolved to an index or size variable  sema
=================  ============================================  =========

Nodes are frozen, slotted dataclasses with tuple fields.  ``span`` does not
take part in ``==``, so two parses of the same text compare equal.  Sema sets
``dtype`` on expressions; the parser leaves it ``None``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Union

from ..source import Span


def _span() -> Any:
    return field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Node:
    span: Span | None = _span()


# derived sizes (sema/sizes.py, ``derive_sizes``): name -> the TC text of the
# product or quotient of sizes it stands for, which the printer writes
DERIVED_TEXT: dict[str, str] = {}


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True)
class Expr(Node):
    dtype: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class Ident(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class IndexVar(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class SizeVar(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: int | float


@dataclass(frozen=True, slots=True)
class Call(Expr):
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Access(Expr):
    tensor: str
    indices: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class BuiltinCall(Expr):
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    op: str  # "-" or "!"
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: str  # + - * / % == != < <= > >= && || min max
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, slots=True)
class Select(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True, slots=True)
class DimSize(Expr):
    tensor: str
    dim: int


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    to: str  # canonical dtype name, e.g. "float32"
    operand: Expr


# ----------------------------------------------------------------- statements
@dataclass(frozen=True, slots=True)
class RangeConstraint(Node):
    var: str
    lo: Expr
    hi: Expr


@dataclass(frozen=True, slots=True)
class Exists(Node):
    expr: Expr


@dataclass(frozen=True, slots=True)
class Let(Node):
    name: str
    expr: Expr


WhereClause = Union[RangeConstraint, Exists, Let]


@dataclass(frozen=True, slots=True)
class Equivalent(Node):
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Comprehension(Node):
    """``tensor(indices) op rhs [<=> ...] [where ...]``.

    The parser keeps the lhs indices as expressions (TC parses them so);
    sema requires plain names and fills ``reduction_vars``."""

    tensor: str
    indices: tuple[Expr, ...]
    op: str  # "=", "+=", "+=!", ...
    rhs: Expr
    wheres: tuple[WhereClause, ...] = ()
    equivalent: Equivalent | None = None
    reduction_vars: tuple[str, ...] = ()

    @property
    def reduction(self) -> str | None:
        """The combining operator (``+ * min max argmax argmin``) or None for ``=``."""
        return None if self.op == "=" else self.op.rstrip("!").rstrip("=")

    @property
    def initializes(self) -> bool:
        return self.op.endswith("!")


@dataclass(frozen=True, slots=True)
class For(Node):
    var: str
    lo: Expr
    hi: Expr
    body: tuple["Stmt", ...]


@dataclass(frozen=True, slots=True)
class If(Node):
    cond: Expr
    then: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...] = ()


Stmt = Union[Comprehension, For, If]


# ------------------------------------------------------------------ functions
@dataclass(frozen=True, slots=True)
class TensorType(Node):
    dtype: str  # canonical: float32, float64, float16, int8 .. uint64, bool
    dims: tuple[str | int, ...] = ()


@dataclass(frozen=True, slots=True)
class Param(Node):
    name: str
    type: TensorType


@dataclass(frozen=True, slots=True)
class Output(Node):
    name: str
    type: TensorType | None = None


@dataclass(frozen=True, slots=True)
class Def(Node):
    name: str
    params: tuple[Param, ...]
    outputs: tuple[Output, ...]
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Program(Node):
    defs: tuple[Def, ...]


# ---------------------------------------------------------------------- walks
def map_children(node: Node, fn: Callable[[Any], Any]) -> Node:
    """Rebuild ``node`` with ``fn`` applied to every child node (also inside
    tuples).  Returns ``node`` itself when nothing changed."""
    changes = {}
    for f in fields(node):
        if f.name in ("span", "dtype"):
            continue
        value = getattr(node, f.name)
        if isinstance(value, Node):
            new = fn(value)
        elif isinstance(value, tuple) and any(isinstance(v, Node) for v in value):
            new = tuple(fn(v) if isinstance(v, Node) else v for v in value)
        else:
            continue
        if new is not value and new != value:
            changes[f.name] = new
    return replace(node, **changes) if changes else node


def children(node: Node) -> list[Node]:
    out: list[Node] = []
    map_children(node, lambda c: out.append(c) or c)
    return out


def walk(node: Node):
    """Yield ``node`` and all nodes below it, parents first."""
    yield node
    for c in children(node):
        yield from walk(c)


def comprehensions(stmts):
    """The comprehensions of a list of statements, in ``for`` bodies and both
    branches of ``if``s too, in textual order."""
    for s in stmts:
        if isinstance(s, For):
            yield from comprehensions(s.body)
        elif isinstance(s, If):
            yield from comprehensions(s.then)
            yield from comprehensions(s.orelse)
        elif isinstance(s, Comprehension):
            yield s


def comprehensions_in_loops(stmts, loops: tuple[str, ...] = ()):
    """(comprehension, the variables of the sequential loops around it) for
    the comprehensions of ``stmts``, in textual order (see :func:`comprehensions`)."""
    for s in stmts:
        if isinstance(s, For):
            yield from comprehensions_in_loops(s.body, loops + (s.var,))
        elif isinstance(s, If):
            yield from comprehensions_in_loops(s.then, loops)
            yield from comprehensions_in_loops(s.orelse, loops)
        elif isinstance(s, Comprehension):
            yield s, loops


def map_comprehensions(stmts, fn) -> tuple:
    """``stmts`` with each comprehension ``c`` (inside loops and branches too)
    replaced by the statements of the list ``fn(c)``."""
    out: list = []
    for s in stmts:
        if isinstance(s, For):
            out.append(replace(s, body=map_comprehensions(s.body, fn)))
        elif isinstance(s, If):
            out.append(replace(s, then=map_comprehensions(s.then, fn),
                               orelse=map_comprehensions(s.orelse, fn)))
        elif isinstance(s, Comprehension):
            out += fn(s)
        else:
            out.append(s)
    return tuple(out)


def names_in(e: Node) -> set[str]:
    """The names of the index variables, sizes and identifiers below ``e``."""
    return {x.name for x in walk(e) if isinstance(x, (IndexVar, SizeVar, Ident))}


def inline_lets(node: Node) -> Node:
    """``node`` (a program, def or statement as parsed) with each ``where x =
    e`` binding substituted into its statement and dropped, as the checked
    form reads it: rewrites of the parsed program then see the indices and
    conditions the bindings stand for (``p % 2 == 0 ? x(b, c, p / 2)`` with
    ``p = t + 1 - k``)."""
    if not isinstance(node, Comprehension):
        return map_children(node, inline_lets) if isinstance(node, (Program, Def, For, If)) else node
    lets = tuple(w for w in node.wheres if isinstance(w, Let))
    if not lets:
        return node
    return replace(node, indices=tuple(expand_lets(e, lets) for e in node.indices), rhs=expand_lets(node.rhs, lets),
                   wheres=tuple(expand_lets(w, lets) for w in node.wheres if not isinstance(w, Let)))


def expand_lets(e: Node, lets: tuple) -> Node:
    """``e`` with the names that the bindings ``lets`` give replaced by their values."""
    values = {w.name: w.expr for w in lets}

    def sub(x):
        if isinstance(x, Ident) and x.name in values:
            return sub(values[x.name])
        return map_children(x, sub)
    return sub(e)


def linear(e: Expr) -> dict | None:
    """``e`` as an integer linear form over names, or None when it is not one
    (a product of names, a division, a tensor read, ...)."""
    match e:
        case IndexVar(name=v) | SizeVar(name=v) | Ident(name=v):
            return {v: 1}
        case Const(value=v) if isinstance(v, int) and not isinstance(v, bool):
            return {1: v} if v else {}
        case Unary(op="-", operand=x):
            a = linear(x)
            return None if a is None else {k: -c for k, c in a.items()}
        case Binary(op="+" | "-", lhs=a, rhs=b):
            la, lb = linear(a), linear(b)
            if la is None or lb is None:
                return None
            sign = 1 if e.op == "+" else -1
            out = dict(la)
            for k, c in lb.items():
                out[k] = out.get(k, 0) + sign * c
            return {k: c for k, c in out.items() if c}
        case Binary(op="*", lhs=a, rhs=b):
            la, lb = linear(a), linear(b)
            if la is None or lb is None:
                return None
            if set(la) <= {1}:
                la, lb = lb, la
            if not set(lb) <= {1}:
                return None
            k = lb.get(1, 0)
            return {name: c * k for name, c in la.items() if c * k}
    return None
