"""Parsing: golden AST dumps of the corpus, the print/parse round trip, and
lexing corner cases."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tcdsl import TcSyntaxError
from tcdsl.source import Source
from tcdsl.syntax import nodes as n
from tcdsl.syntax.parse import parse
from tcdsl.syntax.printer import to_sexpr, to_tc

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "tests" / "programs").glob("*.tc")) + sorted((ROOT / "examples" / "rnn").glob("*.tc"))


def _golden_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return path.stem if rel.parts[:2] == ("tests", "programs") else "_".join(rel.with_suffix("").parts)


CORPUS_IDS = [_golden_name(p) for p in CORPUS]


def pretty_sexpr(text: str, width: int = 100) -> str:
    """Break a one-line s-expression into indented lines for readable golden diffs.

    A list that fits in ``width`` stays on one line; otherwise each ``:field
    value`` pair goes on its own line.  Only whitespace changes."""
    tokens = re.findall(r"\(|\)|'[^']*'|[^\s()]+", text)
    pos = 0

    def read():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok != "(":
            return tok
        items = []
        while tokens[pos] != ")":
            items.append(read())
        pos += 1
        return items

    def flat(x) -> str:
        return x if isinstance(x, str) else "(" + " ".join(flat(i) for i in x) + ")"

    def fmt(x, indent: int) -> str:
        one = flat(x)
        if isinstance(x, str) or indent + len(one) <= width:
            return one
        groups, i = [], 0
        while i < len(x):  # keep ":field value" together
            if isinstance(x[i], str) and x[i].startswith(":") and i + 1 < len(x):
                groups.append((x[i] + " ", x[i + 1]))
                i += 2
            else:
                groups.append(("", x[i]))
                i += 1
        pad = " " * (indent + 1)
        lines = [key + fmt(val, indent + 1 + len(key)) for key, val in groups]
        return "(" + ("\n" + pad).join(lines) + ")"

    return fmt(read(), 0)


def test_pretty_sexpr_changes_only_whitespace():
    text = to_sexpr(parse((ROOT / "examples" / "rnn" / "elman.tc").read_text()))
    assert re.sub(r"\s+", " ", pretty_sexpr(text)) == text


# ------------------------------------------------------------------ corpus
@pytest.mark.parametrize("path", CORPUS, ids=CORPUS_IDS)
def test_ast_golden(path, golden):
    program = parse(Source(path.read_text(encoding="utf-8"), str(path)))
    golden("parse", _golden_name(path), pretty_sexpr(to_sexpr(program)))


@pytest.mark.parametrize("path", CORPUS, ids=CORPUS_IDS)
def test_round_trip(path):
    """STYLE 5: parse(print(parse(src))) == parse(src), for the whole corpus.
    The s-expressions are compared too: ``==`` cannot tell ``1`` from ``1.0``."""
    program = parse(path.read_text(encoding="utf-8"))
    again = parse(to_tc(program))
    assert again == program
    assert to_sexpr(again) == to_sexpr(program)
    assert to_tc(again) == to_tc(program)


def test_corpus_is_not_empty():
    assert len(CORPUS) >= 2


# ------------------------------------------------------------ corner cases
def _body(text: str) -> tuple:
    return parse(text).defs[0].body


def _rhs(expr: str, params: str = "float(N) A") -> n.Expr:
    (stmt,) = _body(f"def f({params}) -> (B) {{ B(i) = {expr} }}")
    return stmt.rhs


def _round_trips(text: str) -> None:
    p = parse(text)
    assert parse(to_tc(p)) == p
    assert to_sexpr(parse(to_tc(p))) == to_sexpr(p)


@pytest.mark.parametrize("literal, value", [
    ("1e-3", 1e-3), ("1E3", 1000.0), ("2.0f", 2.0), ("2.0F", 2.0), (".5", 0.5), ("3f", 3.0), ("1.", 1.0),
    ("1.5e-7", 1.5e-7), ("2.5e+2f", 250.0), ("7", 7), ("0", 0), ("12345678901234567890", 12345678901234567890),
])
def test_number_literals(literal, value):
    c = _rhs(literal)
    assert isinstance(c, n.Const)
    assert c.value == value and type(c.value) is type(value)
    _round_trips(f"def f(float(N) A) -> (B) {{ B(i) = A(i) * {literal} }}")


def test_huge_float_literal_round_trips():
    assert _rhs("1e400") == n.Const(float("inf"))
    _round_trips("def f(float(N) A) -> (B) { B(i) = A(i) * 1e400 }")


def test_negative_literal_is_unary_minus():
    assert _rhs("-1.5") == n.Unary("-", n.Const(1.5))
    assert _rhs("A(i) - -1") == n.Binary("-", n.Call("A", (n.Ident("i"),)), n.Unary("-", n.Const(1)))


def test_dim_size_is_not_a_float():
    rhs = _rhs("A.0 + X.1 * A(i)")
    assert rhs.lhs == n.DimSize("A", 0)
    assert rhs.rhs.lhs == n.DimSize("X", 1)


def test_constant_and_named_dim_sizes():
    (p,) = parse("def f(float(M, 256) L) -> (B) { B(i) = L(i, 0) }").defs[0].params
    assert p.type == n.TensorType("float32", ("M", 256))


@pytest.mark.parametrize("op", ["=", "+=", "*=", "min=", "max=", "+=!", "*=!", "min=!", "max=!"])
def test_assignment_operators(op):
    (s,) = _body(f"def f(float(N) A) -> (B) {{ B {op} A(i) }}")
    assert s.op == op and s.indices == ()
    _round_trips(f"def f(float(N) A) -> (B) {{ B(j) {op} A(i) }}")


def test_min_max_assignment_and_functions():
    (s,) = _body("def f(float(N) A) -> (B) { B(0) min=! min(A(i), max(A(i), 0)) }")
    assert s.op == "min=!"
    assert s.rhs == n.Binary("min", n.Call("A", (n.Ident("i"),)),
                             n.Binary("max", n.Call("A", (n.Ident("i"),)), n.Const(0)))


def test_comments():
    text = "# leading\ndef f(float(N) A) # after the signature\n -> (B) { # here\n B(i) = A(i) # trailing\n}\n# end"
    (s,) = _body(text)
    assert s == n.Comprehension("B", (n.Ident("i"),), "=", n.Call("A", (n.Ident("i"),)))


def test_equivalence_annotation():
    (s,) = _body("def f(float(N) A) -> (C) { C +=! A(i) <=> sum(A(i), 0) where i in 0:N }")
    assert s.equivalent == n.Equivalent("sum", (n.Call("A", (n.Ident("i"),)), n.Const(0)))
    assert s.wheres == (n.RangeConstraint("i", n.Const(0), n.Ident("N")),)
    _round_trips("def f(float(N) A) -> (C) { C +=! A(i) <=> sum(A(i), 0) where i in 0:N }")


def test_typed_outputs():
    d = parse("def f(float(M, N) A) -> (int32(M, N) o, float p, B) { o(i, j) = int32(A(i, j)) }").defs[0]
    assert d.outputs == (n.Output("o", n.TensorType("int32", ("M", "N"))),
                         n.Output("p", n.TensorType("float32", ())), n.Output("B", None))
    _round_trips("def f(float(M, N) A) -> (int32(M, N) o, float p, B) { o(i, j) = int32(A(i, j)) }")


def test_zero_rank_outputs():
    with_parens = _body("def f(float(N) A) -> (C) { C() +=! A(i) }")
    without = _body("def f(float(N) A) -> (C) { C +=! A(i) }")
    assert with_parens == without
    assert with_parens[0].indices == ()
    _round_trips("def f(float(N) A) -> (C) { C +=! A(i) }")


def test_zero_rank_parameter():
    d = parse("def f(float alpha, float(N) A) -> (B) { B(i) = alpha * A(i) }").defs[0]
    assert d.params[0].type == n.TensorType("float32", ())
    assert d.body[0].rhs.lhs == n.Ident("alpha")


@pytest.mark.parametrize("scalar, dtype", [
    ("float", "float32"), ("double", "float64"), ("half", "float16"), ("float16", "float16"),
    ("float32", "float32"), ("float64", "float64"), ("bool", "bool"), ("byte", "uint8"),
    ("int8", "int8"), ("int64", "int64"), ("uint16", "uint16"), ("uint64", "uint64"),
])
def test_scalar_types_and_casts(scalar, dtype):
    d = parse(f"def f({scalar}(N) A) -> (B) {{ B(i) = {scalar}(A(i)) }}").defs[0]
    assert d.params[0].type.dtype == dtype
    assert d.body[0].rhs == n.Cast(dtype, n.Call("A", (n.Ident("i"),)))
    _round_trips(f"def f({scalar}(N) A) -> (B) {{ B(i) = {scalar}(A(i)) }}")


def test_type_names_need_a_word_boundary():
    rhs = _rhs("float_x + int32x + floats", "float(N) A")
    assert {x.name for x in n.walk(rhs) if isinstance(x, n.Ident)} == {"float_x", "int32x", "floats"}


def test_for_ranges():
    (a,) = _body("def f(float(T) A) -> (C) { for t in T { C(t) = A(t) } }")
    (b,) = _body("def f(float(T) A) -> (C) { for t in 1:T-1 { C(t) = A(t) } }")
    assert (a.var, a.lo, a.hi) == ("t", n.Const(0), n.Ident("T"))
    assert (b.lo, b.hi) == (n.Const(1), n.Binary("-", n.Ident("T"), n.Const(1)))
    _round_trips("def f(float(T) A) -> (C) { for t in 1:T-1 { C(t) = A(t) } }")
    _round_trips("def f(float(T) A) -> (C) { for t in 0:T { C(t) = A(t) } }")


def test_nested_for():
    (outer,) = _body("def f(float(L, T) A) -> (C) { for l in L { for t in T { C(l, t) = A(l, t) } } }")
    assert isinstance(outer.body[0], n.For) and outer.body[0].var == "t"


def test_if_else_if_else():
    text = """def f(float(T) A) -> (C) {
      for t in T {
        if t == 0 { C(t) = A(t) }
        else if t < 3 && !(t == 1) || t >= T - 1 { C(t) = 1 }
        else { C(t) = 2 }
      }
    }"""
    (loop,) = _body(text)
    (first,) = loop.body
    assert first.cond == n.Binary("==", n.Ident("t"), n.Const(0))
    (second,) = first.orelse
    assert isinstance(second, n.If)
    assert second.cond.op == "||" and second.cond.lhs.op == "&&"
    assert second.orelse == (n.Comprehension("C", (n.Ident("t"),), "=", n.Const(2)),)
    _round_trips(text)
    assert "} else if " in to_tc(parse(text))


def test_else_block_with_an_if_inside_is_the_same_tree():
    a = parse("def f(float(T) A) -> (C) { for t in T { if t == 0 { C(t) = 1 } else if t == 1 { C(t) = 2 } } }")
    b = parse("def f(float(T) A) -> (C) { for t in T { if t == 0 { C(t) = 1 } else { if t == 1 { C(t) = 2 } } } }")
    assert a == b


def test_precedence():
    rhs = _rhs("A(i) + 2 * -A(i) > 1 ? 1 : 0 < 1 ? 2 : 3")
    assert isinstance(rhs, n.Select)
    assert rhs.cond.op == ">" and rhs.cond.lhs.op == "+" and rhs.cond.lhs.rhs.op == "*"
    assert isinstance(rhs.other, n.Select)  # ?: is right associative
    assert _rhs("A(i) - 1 - 2").lhs.op == "-"  # left associative
    assert _rhs("A(i) / 2 % 3").op == "%"
    _round_trips("def f(float(N) A) -> (B) { B(i) = A(i) + 2 * -A(i) > 1 ? 1 : 0 < 1 ? 2 : 3 }")


def test_where_clauses():
    (s,) = _body("def f(float(N) A) -> (B) { B(i) = A(j) where i in 0:N, j = i + 1, exists A(i) }")
    assert [type(w) for w in s.wheres] == [n.RangeConstraint, n.Let, n.Exists]
    _round_trips("def f(float(N) A) -> (B) { B(i) = A(j) where i in 0:N, j = i + 1, exists A(i) }")


def test_several_defs_and_empty_source():
    p = parse("def f(float(N) A) -> (B) { B(i) = A(i) }\ndef g(float(N) A) -> (B) { B(i) = A(i) }")
    assert [d.name for d in p.defs] == ["f", "g"]
    assert parse("# nothing\n").defs == ()


def test_spans_point_into_the_source():
    text = "def f(float(N) A) -> (B) {\n  B(i) = A(i) * 2\n}"
    (s,) = _body(text)
    assert (s.span.line, s.span.col) == (2, 3)
    assert text[s.rhs.span.start:s.rhs.span.end] == "A(i) * 2"


def test_syntax_error_is_located():
    with pytest.raises(TcSyntaxError) as info:
        parse(Source("def f(float(N) A) -> (B) {\n  B(i) = A(i) +\n}", "prog.tc"))
    assert (info.value.line, info.value.col) == (3, 1)
    assert str(info.value).startswith("prog.tc:3:1: ")
