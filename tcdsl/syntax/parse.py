"""Parsing: TC text -> :mod:`tcdsl.syntax.nodes`.

``parse(source)`` is the stage entry point.  The grammar is loaded once,
here, from ``grammar/tc.lark`` (shipped as the package ``tcdsl.grammar``).
Every AST node is built in this module only, by the transformer below; every
Lark error becomes a :class:`TcSyntaxError` in ``_syntax_error``.
"""
from __future__ import annotations

import functools
import math
import re
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
    _check_depth(src, tree)
    try:
        return _Build(src).transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, TcError):
            raise e.orig_exc from None
        raise


# The passes walk expressions recursively, a few Python frames per level; far
# below the interpreter's recursion limit.  Real programs nest a few levels.
MAX_DEPTH = 100


def _check_depth(src: Source, tree: lark.Tree) -> None:
    """Reject absurdly deep nesting here, as a user error, rather than let a
    ``RecursionError`` out of a later pass."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TcSyntaxError(f"nested more than {MAX_DEPTH} levels deep, which tcdsl does not support; "
                                f"split long expressions into several statements",
                                Span(src, node.meta.start_pos, node.meta.end_pos))
        stack.extend((c, depth + 1) for c in reversed(node.children) if isinstance(c, lark.Tree))


# Terminal names -> words, for "expected ..." messages.  Terminals written as
# plain strings in the grammar ('->', 'where', ...) are quoted as they are.
_WORDS = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "SCALAR_TYPE": "a type",
    "ASSIGN_OP": "an assignment operator (=, +=, +=!, ...)", "CMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/' or '%'", "$END": "the end of the input",
}
# Sets of terminals that read better as one word: the terminals that can start
# an expression or a statement, and the binary operators.
_GROUPS = (
    ({"INT", "FLOAT"}, {"NAME", "INT", "FLOAT", "SCALAR_TYPE", "LPAR", "MINUS", "BANG", "MIN", "MAX"},
     "an expression"),
    ({"ADD_OP", "MUL_OP"}, {"ADD_OP", "MUL_OP", "CMP_OP", "QMARK", "&&", "||"}, "an operator"),
    ({"FOR", "IF"}, {"NAME", "FOR", "IF"}, "a statement"),
)
# Characters that are not TC, and what the user probably meant.
_CHAR_HINTS = {
    ";": "TC statements need no ';'",
    "[": "tensors are indexed with parentheses, as in A(i, j)",
    "]": "tensors are indexed with parentheses, as in A(i, j)",
    "&": "did you mean '&&'?",
    "|": "did you mean '||'?",
    "'": "TC has no strings",
    '"': "TC has no strings",
}
_OPEN, _CLOSE = "({", ")}"


def _terminal_key(name: str) -> str:
    """The terminal's name, or its text for anonymous string terminals (``__ANON_2`` -> ``||``)."""
    try:
        pattern = _parser().get_terminal(name).pattern
    except KeyError:
        return name
    return pattern.value if name.startswith("__ANON") and pattern.type == "str" else name


def _describe(name: str) -> str:
    if name in _WORDS:
        return _WORDS[name]
    try:
        pattern = _parser().get_terminal(name).pattern
    except KeyError:
        return name.lower()
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower()


def _expected(terminals) -> str:
    keys = {_terminal_key(t) for t in terminals}
    words = []
    for marker, members, word in _GROUPS:
        if marker <= keys:
            keys -= members
            words.append(word)
    names = {_terminal_key(t): t for t in terminals}
    words += sorted({_describe(names[k]) for k in keys})
    return _join(words)


def _syntax_error(src: Source, e: UnexpectedInput) -> TcSyntaxError:
    """The one place where Lark's errors become :class:`TcSyntaxError`."""
    text = src.text
    if isinstance(e, UnexpectedCharacters):
        pos = e.pos_in_stream
        ch = text[pos] if pos < len(text) else ""
        hint = _CHAR_HINTS.get(ch)
        return TcSyntaxError(f"unexpected character '{ch}'" + (f": {hint}" if hint else ""), Span(src, pos, pos + 1))
    if isinstance(e, UnexpectedToken) and e.token.type != "$END":
        return _unexpected_token(src, e)
    if isinstance(e, (UnexpectedToken, UnexpectedEOF)):
        unclosed = _brackets(text)
        if unclosed:
            pos = unclosed[-1]
            return TcSyntaxError(f"'{text[pos]}' is never closed", Span(src, pos, pos + 1))
        pos = len(text.rstrip())
        expected = getattr(e, "expected", None)
        msg = "unexpected end of the input" + (f"; expected {_expected(expected)}" if expected else "")
        return TcSyntaxError(msg, Span(src, pos, pos))
    pos = getattr(e, "pos_in_stream", None) or 0
    return TcSyntaxError(str(e).splitlines()[0], Span(src, pos, pos + 1))


def _unexpected_token(src: Source, e: UnexpectedToken) -> TcSyntaxError:
    text, tok = src.text, e.token
    pos = tok.start_pos
    span = Span(src, pos, pos + max(1, len(str(tok.value))))
    if tok.value in _CLOSE:
        unclosed = _brackets(text[:pos])
        if not unclosed or text[unclosed[-1]] != _OPEN[_CLOSE.index(tok.value)]:
            return TcSyntaxError(f"unmatched '{tok.value}'" + _still_open(src, unclosed), span)
    msg = f"unexpected '{tok.value}'; expected {_expected(e.expected)}"
    hint = _token_hint(text, tok, {_terminal_key(t) for t in e.expected})
    return TcSyntaxError(msg + (f" ({hint})" if hint else ""), span)


def _still_open(src: Source, unclosed: list[int]) -> str:
    if not unclosed:
        return ""
    line, col = src.line_col(unclosed[-1])
    return f" (the '{src.text[unclosed[-1]]}' at line {line}, column {col} is still open)"


def _token_hint(text: str, tok: Token, expected: set[str]) -> str | None:
    """A word on common mistakes, recognised by the token and what was expected."""
    before = text[:tok.start_pos].rstrip()
    after = text[tok.end_pos:tok.end_pos + 1]
    if tok.value == "." and "." in (after, before[-1:]) and "COLON" in expected:
        return "ranges are written 'lo:hi'"
    if tok.value == "=" and "CMP_OP" in expected:
        return "use '==' to compare"
    if tok.value == "=" and before.endswith("=") and "INT" in expected:
        return "assign with '='; '==' compares"
    if tok.value == "*" and before.endswith("*"):
        return "TC has no '**'; use pow(a, b)"
    if tok.value in ("-", "/", "%") and after == "=" and expected == {"ASSIGN_OP"}:
        return f"TC has no '{tok.value}='"
    if tok.value == ":" and re.search(r"(\bwhere|,)\s*\w+\s*=[^=,]*$", before):
        return "a range is written 'where i in lo:hi'"
    if tok.type == "NAME" and "SCALAR_TYPE" in expected and "INT" not in expected:
        return f"parameters are declared with a type, as in 'float(N) {tok.value}'"
    if tok.value == "else":
        return "'else' must follow the '}' of an 'if'"
    return None


def _brackets(text: str) -> list[int]:
    """Offsets of the brackets still open at the end of ``text`` (comments skipped)."""
    stack: list[int] = []
    i = 0
    while 0 <= i < len(text):
        ch = text[i]
        if ch == "#":
            i = text.find("\n", i)
            continue
        if ch in _OPEN:
            stack.append(i)
        elif ch in _CLOSE and stack and text[stack[-1]] == _OPEN[_CLOSE.index(ch)]:
            stack.pop()
        i += 1
    return stack


def _join(words: list[str]) -> str:
    if len(words) > 6:
        words = words[:6] + ["..."]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _dim(d: n.Expr) -> str | int | n.Expr:
    """A size as TensorType keeps it: a name, a constant, or an expression."""
    match d:
        case n.Ident(name=name):
            return name
        case n.Const(value=int() as v):
            return v
    return d


def _parse_number(text: str) -> int | float:
    if text in ("inf", "nan"):
        return math.inf if text == "inf" else math.nan  # one NaN object: parses compare equal
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
        # An empty program still gets a span, for "the source defines no function".
        return n.Program(tuple(defs), span=self._span(meta) or Span(self.src, 0, 0))

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
        return n.TensorType(SCALAR_TYPES[str(scalar)], tuple(_dim(d) for d in dims if d is not None),
                            span=self._span(meta))


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
        x = items[0]
        if "".join(self.src.text[meta.start_pos:meta.end_pos].split()) == "-inf":
            return n.Const(-math.inf, span=self._span(meta))  # one literal, typed as `inf` is
        return n.Unary("-", x, span=self._span(meta))

    def not_(self, meta, items):
        return n.Unary("!", items[0], span=self._span(meta))

    def call(self, meta, items):
        name, *args = items
        return n.Call(str(name), tuple(a for a in args if a is not None), span=self._span(meta))

    def dim_size(self, meta, items):
        name, k = items
        return n.DimSize(str(name), self._int(k), span=self._span(meta))

    def cast(self, meta, items):
        ty, e = items
        return n.Cast(SCALAR_TYPES[str(ty)], e, span=self._span(meta))

    def ident(self, meta, items):
        return n.Ident(str(items[0]), span=self._tok_span(items[0]))

    def int_const(self, meta, items):
        return n.Const(self._int(items[0]), span=self._tok_span(items[0]))

    def _int(self, tok: Token) -> int:
        if len(tok) > 100:  # Python refuses to convert very long digit strings
            raise TcSyntaxError("integer literal too long", self._tok_span(tok))
        return int(tok)

    def float_const(self, meta, items):
        return n.Const(_parse_number(str(items[0])), span=self._tok_span(items[0]))


__all__ = ["parse", "SCALAR_TYPES"]
