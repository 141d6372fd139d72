"""Parsing: TC text -> :mod:`tcdsl.syntax.nodes`.

``parse(source)`` is the stage entry point.  The grammar is loaded once,
here, from ``grammar/tc.lark`` (shipped as the package ``tcdsl.grammar``).
Every AST node is built in this module only, by the transformer below; every
Lark error becomes a :class:`TcSyntaxError` in ``_syntax_error``.
"""
from __future__ import annotations

import functools
from importlib import resources

import lark
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..errors import TcError, TcSyntaxError
from ..source import Source, Span
from . import nodes as n

# TC's scalar type names -> canonical dtype names.
SCALAR_TYPES: dict[str, str] = {
    "float": "float32", "float32": "float32", "double": "float64", "float64": "float64",
    "half": "float16", "float16": "float16", "bool": "bool", "byte": "uint8",
    **{f"{s}int{b}": f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)},
}


@functools.cache
def _parser() -> Lark:
    text = resources.files("tcdsl.grammar").joinpath("tc.lark").read_text(encoding="utf-8")
    return Lark(text, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=True)


def parse(source: Source | str) -> n.Program:
    """Parse TC text into a :class:`~tcdsl.syntax.nodes.Program`.

    Raises :class:`TcSyntaxError` (with the location and a caret) for text
    that does not follow the grammar.  Never lets a Lark exception escape."""
    src = source if isinstance(source, Source) else Source(source)
    try:
        tree = _parser().parse(src.text)
    except UnexpectedInput as e:
        raise _syntax_error(src, e) from None
    try:
        return _Build(src).transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, TcError):
            raise e.orig_exc from None
        raise


# Terminal names -> words, for "expected ..." messages.
_WORDS = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "SCALAR_TYPE": "a type",
    "ASSIGN_OP": "an assignment operator (=, +=, +=!, ...)", "CMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/' or '%'", "LPAR": "'('", "RPAR": "')'",
    "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','", "COLON": "':'", "DOT": "'.'",
    "MINUS": "'-'", "BANG": "'!'", "QMARK": "'?'", "EQUAL": "'='", "__ANON_0": "'->'",
    "$END": "the end of the input",
}


def _describe(terminal: str) -> str:
    if terminal in _WORDS:
        return _WORDS[terminal]
    pattern = _parser().get_terminal(terminal).pattern if _has_terminal(terminal) else None
    if pattern is not None and pattern.type == "str":
        return f"'{pattern.value}'"
    return terminal.lower()


def _has_terminal(name: str) -> bool:
    try:
        _parser().get_terminal(name)
        return True
    except KeyError:
        return False


def _syntax_error(src: Source, e: UnexpectedInput) -> TcSyntaxError:
    pos = getattr(e, "pos_in_stream", None)
    if isinstance(e, UnexpectedToken):
        tok = e.token
        pos = tok.start_pos if tok.start_pos is not None else len(src.text)
        found = "the end of the input" if tok.type == "$END" else f"'{tok.value}'"
        expected = sorted({_describe(t) for t in e.expected})
        msg = f"unexpected {found}; expected " + _join(expected)
        end = pos + max(1, len(str(tok.value)) if tok.type != "$END" else 1)
        return TcSyntaxError(msg, Span(src, pos, end))
    if isinstance(e, UnexpectedCharacters):
        ch = src.text[e.pos_in_stream] if e.pos_in_stream < len(src.text) else ""
        return TcSyntaxError(f"unexpected character '{ch}'", Span(src, e.pos_in_stream, e.pos_in_stream + 1))
    if isinstance(e, UnexpectedEOF):
        return TcSyntaxError("unexpected end of the input", Span(src, len(src.text), len(src.text)))
    return TcSyntaxError(str(e).splitlines()[0], Span(src, pos or 0, (pos or 0) + 1))


def _join(words: list[str]) -> str:
    if len(words) > 6:
        words = words[:6] + ["..."]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _parse_number(text: str) -> int | float:
    if text.rstrip("fF") != text or any(c in text for c in ".eE"):
        return float(text.rstrip("fF"))
    return int(text)


@v_args(meta=True)
class _Build(Transformer):
    """Lark tree -> nodes.  One method per grammar rule or alias."""

    def __init__(self, src: Source):
        super().__init__(visit_tokens=False)
        self.src = src

    def _span(self, meta) -> Span | None:
        if getattr(meta, "empty", True):
            return None
        return Span(self.src, meta.start_pos, meta.end_pos)

    def _tok_span(self, tok: Token) -> Span:
        return Span(self.src, tok.start_pos, tok.end_pos)

    # -- functions
    def start(self, meta, defs):
        return n.Program(tuple(defs), span=self._span(meta))

    def def_(self, meta, items):
        name, *rest = items
        params = tuple(p for p in rest if isinstance(p, n.Param))
        outputs = tuple(o for o in rest if isinstance(o, n.Output))
        body = rest[-1]
        return n.Def(str(name), params, outputs, body, span=self._tok_span(name))

    def param(self, meta, items):
        ty, name = items
        return n.Param(str(name), ty, span=self._tok_span(name))

    def typed_out(self, meta, items):
        ty, name = items
        return n.Output(str(name), ty, span=self._tok_span(name))

    def untyped_out(self, meta, items):
        return n.Output(str(items[0]), None, span=self._tok_span(items[0]))

    def tensor_type(self, meta, items):
        scalar, *dims = items
        return n.TensorType(SCALAR_TYPES[str(scalar)], tuple(d for d in dims if d is not None),
                            span=self._span(meta))

    def dim_name(self, meta, items):
        return str(items[0])

    def dim_const(self, meta, items):
        return int(items[0])

    def block(self, meta, stmts):
        return tuple(stmts)

    # -- statements
    def comprehension(self, meta, items):
        name, indices, op, rhs, equivalent, wheres = items
        return n.Comprehension(str(name), indices or (), str(op), rhs, wheres or (), equivalent,
                               span=self._tok_span(name))

    def lhs_indices(self, meta, items):
        return tuple(i for i in items if i is not None)

    def equivalent(self, meta, items):
        name, *args = items
        return n.Equivalent(str(name), tuple(a for a in args if a is not None), span=self._span(meta))

    def where_clauses(self, meta, items):
        return tuple(items)

    def range_constraint(self, meta, items):
        var, lo, hi = items
        return n.RangeConstraint(str(var), lo, hi, span=self._tok_span(var))

    def exists(self, meta, items):
        return n.Exists(items[0], span=self._span(meta))

    def let(self, meta, items):
        return n.Let(str(items[0]), items[1], span=self._tok_span(items[0]))

    def for_stmt(self, meta, items):
        var, first, second, body = items
        lo, hi = (n.Const(0, span=first.span), first) if second is None else (first, second)
        return n.For(str(var), lo, hi, body, span=self._tok_span(var))

    def if_stmt(self, meta, items):
        cond, then, orelse = items
        return n.If(cond, then, orelse or (), span=cond.span)

    def else_if(self, meta, items):
        return (items[0],)

    # -- expressions
    def select(self, meta, items):
        return n.Select(*items, span=self._span(meta))

    def _binary(self, meta, op, lhs, rhs):
        return n.Binary(op, lhs, rhs, span=self._span(meta))

    def or_(self, meta, items):
        return self._binary(meta, "||", *items)

    def and_(self, meta, items):
        return self._binary(meta, "&&", *items)

    def compare(self, meta, items):
        lhs, op, rhs = items
        return self._binary(meta, str(op), lhs, rhs)

    def binary(self, meta, items):
        lhs, op, rhs = items
        return self._binary(meta, str(op), lhs, rhs)

    def min_(self, meta, items):
        return self._binary(meta, "min", *items)

    def max_(self, meta, items):
        return self._binary(meta, "max", *items)

    def neg(self, meta, items):
        return n.Unary("-", items[0], span=self._span(meta))

    def not_(self, meta, items):
        return n.Unary("!", items[0], span=self._span(meta))

    def call(self, meta, items):
        name, *args = items
        return n.Call(str(name), tuple(a for a in args if a is not None), span=self._span(meta))

    def dim_size(self, meta, items):
        name, k = items
        return n.DimSize(str(name), int(k), span=self._span(meta))

    def cast(self, meta, items):
        ty, e = items
        return n.Cast(SCALAR_TYPES[str(ty)], e, span=self._span(meta))

    def ident(self, meta, items):
        return n.Ident(str(items[0]), span=self._tok_span(items[0]))

    def int_const(self, meta, items):
        return n.Const(int(items[0]), span=self._tok_span(items[0]))

    def float_const(self, meta, items):
        return n.Const(_parse_number(str(items[0])), span=self._tok_span(items[0]))


__all__ = ["parse", "SCALAR_TYPES"]
