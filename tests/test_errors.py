"""Programs that must fail, each one a row ``(source, line, col, message_regex)``
(Halide ``test/error/``, xDSL ``test_parser_error.py``), and a fuzz check that
bad source only ever raises ``TcError``."""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

import tcdsl
from tcdsl import TcError, TcSemanticError, TcSyntaxError
from tcdsl.driver import frontend
from tcdsl.source import Source

ROOT = Path(__file__).resolve().parents[1]
SIG = "def f(float(N) A) -> (B) "

SYNTAX_ERRORS = [
    # missing '->'
    ("def f(float(N) A) (B) { B(i) = A(i) }", 1, 19, r"unexpected '\('; expected '->'"),
    # unbalanced braces and parentheses
    (SIG + "{\n  B(i) = A(i)\n", 1, 26, r"'\{' is never closed"),
    (SIG + "{\n  for t in N {\n    B(t) = A(t)\n}\n", 1, 26, r"'\{' is never closed"),
    (SIG + "{ B(i) = A(i) }\n}", 2, 1, r"^unmatched '\}'$"),
    (SIG + "{ B(i) = A(i)) }", 1, 39, r"unmatched '\)'"),
    (SIG + "{ B(i) = (A(i) + 1 }", 1, 45, r"unmatched '\}' \(the '\(' at line 1, column 35 is still open\)"),
    (SIG + "{ B(i) = A(i\n}", 2, 1, r"unmatched '\}' \(the '\(' at line 1, column 36 is still open\)"),
    # missing operand
    (SIG + "{ B(i) = A(i) + }", 1, 42, r"unexpected '\}'; expected an expression$"),
    (SIG + "{\n  B(i) = A(i) *\n}", 3, 1, r"expected an expression"),
    (SIG + "{ B(i) = A(i, ) }", 1, 40, r"unexpected '\)'; expected an expression"),
    (SIG + "{ B(i) = }", 1, 35, r"unexpected '\}'; expected an expression"),
    # bad tokens
    (SIG + "{ B(i) = A(i) $ 2 }", 1, 40, r"^unexpected character '\$'$"),
    (SIG + "{ B(i) = A(i); }", 1, 39, r"unexpected character ';': TC statements need no ';'"),
    (SIG + "{ B(i) = A[i] }", 1, 36, r"'\[': tensors are indexed with parentheses"),
    (SIG + "{ B(i) = A(i) & A(i) }", 1, 40, r"did you mean '&&'"),
    (SIG + "{ B(i) = 'x' }", 1, 35, r"TC has no strings"),
    # common mistakes, in words
    (SIG + "{ B(i) == A(i) }", 1, 34, r"unexpected '='.*assign with '='"),
    (SIG + "{ B(i) -= A(i) }", 1, 33, r"expected an assignment operator.*TC has no '-='"),
    (SIG + "{ B(i) = A(i) ** 2 }", 1, 41, r"TC has no '\*\*'; use pow"),
    (SIG + "{ B(i) = A(i) where i in 0..N }", 1, 53, r"ranges are written 'lo:hi'"),
    (SIG + "{ B(i) = A(i) where i = 0:N }", 1, 51, r"a range is written 'where i in lo:hi'"),
    ("def f(float(N) A) -> (B) { for t in N { if t = 0 { B(t) = A(t) } } }", 1, 46, r"use '==' to compare"),
    ("def f(A) -> (B) { B(i) = A(i) }", 1, 7, r"expected '\)' or a type .*as in 'float\(N\) A'"),
    ("def f(float(N) A float(N) C) -> (B) { B(i) = A(i) }", 1, 18, r"unexpected 'float'; expected '\)' or ','"),
    ("def f(float(N) A) -> B { B(i) = A(i) }", 1, 22, r"unexpected 'B'; expected '\('"),
    (SIG + "{ B(i) A(i) }", 1, 33, r"unexpected 'A'; expected an assignment operator"),
    (SIG + "{ B(i) = A(i) }\nelse { }", 2, 1, r"'else' must follow the '\}' of an 'if'"),
    ("f(float(N) A) -> (B) { B(i) = A(i) }", 1, 1, r"unexpected 'f'; expected 'def'"),
    (SIG + "{ B(i) = A(i) }\ndef", 2, 4, r"unexpected end of the input; expected a name"),
    # limits
    (SIG + "{ B(i) = A(i)" + " + 1" * 200 + " }", 1, 35, r"nested more than \d+ levels deep"),
    (SIG + "{ B(i) = A(" + "1" * 200 + ") }", 1, 37, r"integer literal too long"),
]

SEMANTIC_ERRORS = [
    (SIG + "{ B(i) = Z(i) }", 1, 35, r"^unknown tensor or function 'Z'$"),
    # TC's expectBool (sema.h): ! && || and the condition of ?: take bools
    (SIG + "{ B(i) = !A(i) ? 1.0 : 0.0 }", 1, 36, r"^'!' needs a bool \(a comparison or a bool tensor\), not float32"),
    (SIG + "{ B(i) = A(i) ? 1.0 : 0.0 }", 1, 35, r"^the condition of '\?:' needs a bool.*not float32; compare it"),
    (SIG + "{ B(i) = (A(i) > 0 && i) ? 1.0 : 0.0 }", 1, 48, r"^'&&' needs a bool .*not int32"),
    (SIG + "{ B(i) = (A(i) || A(i) > 0) ? 1.0 : 0.0 }", 1, 36, r"^'\|\|' needs a bool .*not float32"),
    (SIG + "{ B(i) = Q.0 }", 1, 35, r"unknown tensor 'Q'"),
    (SIG + "{ B(i) = tanh(A(i), A(i)) }", 1, 35, r"'tanh' takes 1 argument, but 2 are given"),
    (SIG + "{ B(i) = pow(A(i)) }", 1, 35, r"'pow' takes 2 arguments, but 1 is given"),
    (SIG + "{ B(i) = A(i, i) }", 1, 35, r"'A' has 1 dimension, but 2 indices are given"),
    ("def f(float(M, N) A) -> (B) {\n  B(i) = A(i)\n}", 2, 10, r"'A' has 2 dimensions, but 1 index is given"),
    (SIG + "{ B(i) = A(i) + A }", 1, 42, r"'A' has 1 dimension, but 0 indices are given"),
    (SIG + "{ B(i) = A.3 }", 1, 35, r"'A' has 1 dimension; 'A.3' does not exist"),
    (SIG + "{\n  B(i) = A(i)\n  B(i, j) = A(i)\n}", 3, 3, r"'B' was written with 1 index, but 2 are given here"),
    ("def f(float(N) A) -> (float(N, N) B) { B(i) = A(i) }", 1, 40, r"declared with 2 dimensions, but 1 index is given"),
    # '=' with a reduction variable
    (SIG + "{ B(i) = A(i) * A(j) }", 1, 44,
     r"'j' appears only on the right-hand side, which makes it a reduction variable.*use '\+=!'"),
    (SIG + "{ B(i) = A(i) where exists A(j) }", 1, 55, r"'j' .* reduction variable"),
    (SIG + "{ B(i) = i < W ? A(i) : 0 }", 1, 39, r"'W' .* reduction variable.*if 'W' is meant as a size, a free size "
     r"must first appear in a loop bound, a where range, an 'if' condition or an output's type"),
    # sizes and tensors mixed up
    (SIG + "{ B(i) = N(i) }", 1, 35, r"'N' is a size, not a tensor"),
    (SIG + "{ N(i) = A(i) }", 1, 28, r"'N' is a size, not a tensor"),
    ("def f(float(N) A, float(M) N) -> (B) { B(i) = A(i) }", 1, 28, r"'N' is a size and cannot name a tensor"),
    ("def f(float(N) A) -> (N) { N(i) = A(i) }", 1, 23, r"'N' is a size and cannot name an output"),
    (SIG + "{ B(A) = A(0) }", 1, 30, r"'A' is a tensor, not an index variable"),
    # declarations
    ("def f(float(N) A, float(N) A) -> (B) { B(i) = A(i) }", 1, 28, r"parameter 'A' is declared twice"),
    ("def f(float(N) A) -> (A) { A(i) = A(i) }", 1, 23, r"'A' is already declared"),
    # M is a free size (given at the call), so nothing says N <= M
    ("def f(float(N) A) -> (float(M) B) { B(i) = A(i) }", 1, 37,
     r"'B' may be written out of its declared size: for sizes N=\d+, M=\d+ at i=\d+"),
    # writing an input, reading before writing, outputs never written
    (SIG + "{ A(i) = A(i) + 1 }", 1, 28, r"'A' is an input and cannot be written"),
    (SIG + "{\n  B(i) = C(i)\n  C(i) = A(i)\n}", 2, 10, r"^'C' is read before it is written$"),
    (SIG + "{\n  B(i) = A(i) + S\n  S +=! A(k)\n}", 2, 17, r"'S' is read before it is written"),
    (SIG + "{ B(i) = A(i) + (i > 0 ? B(i - 1) : 0) }", 1, 51, r"'B' is read before it is written; a statement that "
     r"reads other points of the tensor it writes needs a statement before it that writes 'B'"),
    ("def f(float(N) A) -> (B, C) {\n  B(i) = A(i)\n}", 1, 26, r"output 'C' is never written"),
    # range inference
    (SIG + "{ B(i) = 1 }", 1, 30, r"cannot infer the range of 'i'; use a where clause \('where i in lo:hi'\)"),
    (SIG + "{ B(i) = A(i * i) }", 1, 30, r"cannot infer the range of 'i'"),
    (SIG + "{ B(i) +=! A(k % 2) }", 1, 30, r"cannot infer the range of 'i'"),
    (SIG + "{ for t in T { B(i) +=! A(i) where i in 0:t * t } }", 1, 66,
     r"a where-range bound must be affine in sizes and loop variables"),
    (SIG + "{ B(i) = A(i) where i in 0:A(0) }", 1, 53, r"a where-range may only use sizes, loop variables"),
    (SIG + "{ B(i) = A(i) where i in -1:N }", 1, 30, r"'B' may be written at a negative index along dimension 0"),
    (SIG + "{ B(i) = A(i) where N in 0:3 }", 1, 46, r"'N' is not an index variable of this statement"),
    # loops and conditions
    ("def f(float(T) A) -> (B) {\n  for t in T {\n    if t * t == 1 { B(t) = A(t) }\n  }\n}", 3, 8,
     r"this must be an affine condition"),
    ("def f(float(T) A) -> (B) { for t in T { if A(t) > 0 { B(t) = A(t) } } }", 1, 44,
     r"an 'if' condition may only use sizes, loop variables and constants"),
    ("def f(float(T) A) -> (B) { for t in A(0) { B(t) = A(t) } }", 1, 37,
     r"a loop bound may only use sizes, loop variables and constants"),
    ("def f(float(T) A) -> (B) { for t in A { B(t) = A(t) } }", 1, 37, r"'A' is not a size or loop variable"),
    ("def f(float(T) A) -> (B) { for T in T { B(T) = A(T) } }", 1, 32, r"loop variable 'T' hides an existing name"),
    ("def f(float(T) A) -> (B) { for t in T { for t in T { B(t) = A(t) } } }", 1, 45,
     r"loop variable 't' hides an existing name"),
    # left-hand sides
    (SIG + "{ B(i, i) = A(i) }", 1, 33, r"index variable 'i' appears twice on the left-hand side"),
    (SIG + "{ B(i - 1) = A(i) }", 1, 30, r"'B' may be written at a negative index along dimension 0"),
    (SIG + "{ B(2 * i) = A(i) }", 1, 30, r"a left-hand side index must be an index variable, an affine"),
    (SIG + "{ B(i + k) = A(i) + A(k) }", 1, 30, r"a left-hand side index may use one index variable"),
    ("def f(float(N) A) -> (B) { for t in N { B(t * t) = A(t) } }", 1, 43, r"left-hand side index"),
    ("def f(float(N) A) -> (B) { for t in N { B(t == 0) = A(t) } }", 1, 43, r"left-hand side index"),
    ("def f(float(N) A) -> (B) { for t in N { B(1.5) = A(t) } }", 1, 43, r"left-hand side index"),
    # types
    ("def f(float(N) A) -> (int32(N) o) { o(i) = A(i) }", 1, 44,
     r"assigning a float32 value to 'o', declared int32, narrows it; add a cast"),
    ("def f(float(N) A) -> (int32(N) o) { o(i) = int32(A(i)) * 1.5 }", 1, 44, r"narrows it"),
    (SIG + "{ B(i) = A(i * 1.5) }", 1, 37, r"an index must be an integer, but this is a float32 value"),
    ("def f(int32(N) A) -> (B) { B(i) = A(i) / 0 }", 1, 42, r"integer division by zero"),
    ("def f(int32(N) A) -> (B) { B(i) = A(i) % 0 }", 1, 42, r"integer remainder by zero"),
    # choosing the def
    ("def f(float(N) A) -> (B) { B(i) = A(i) }\ndef g(float(N) A) -> (B) { B(i) = A(i) }", 2, 5,
     r"the source defines 2 functions \(f, g\); choose one with entry="),
    ("def f(float(N) A) -> (B) { B(i) = A(i) }\ndef f(float(N) A) -> (B) { B(i) = A(i) }", 1, 5,
     r"'f' is defined more than once"),
    ("# nothing here\n", 1, 1, r"the source defines no function"),
]


def _check_located(e: tcdsl.TcError, name: str, source: str, line: int, col: int, regex: str) -> None:
    assert (e.line, e.col) == (line, col), str(e)
    text = str(e)
    assert text.startswith(f"{name}:{line}:{col}: "), text
    head, src_line, caret = text.split("\n")
    assert re.search(regex, head[len(f"{name}:{line}:{col}: "):]), text
    assert src_line == source.splitlines()[line - 1], text
    assert caret.startswith(" " * (col - 1) + "^") and not caret.strip(" ^"), text
    assert e.message in head


def _ids(rows):
    return [re.sub(r"\W+", "_", r[3])[:40].strip("_") for r in rows]


@pytest.mark.parametrize("source, line, col, regex", SYNTAX_ERRORS, ids=_ids(SYNTAX_ERRORS))
def test_syntax_error(source, line, col, regex):
    with pytest.raises(TcSyntaxError) as info:
        tcdsl.compile(source)
    _check_located(info.value, "<string>", source, line, col, regex)


@pytest.mark.parametrize("source, line, col, regex", SEMANTIC_ERRORS, ids=_ids(SEMANTIC_ERRORS))
def test_semantic_error(source, line, col, regex):
    with pytest.raises(TcSemanticError) as info:
        tcdsl.compile(source)
    _check_located(info.value, "<string>", source, line, col, regex)


def test_unknown_entry():
    source = "def f(float(N) A) -> (B) { B(i) = A(i) }\ndef g(float(N) A) -> (B) { B(i) = A(i) }"
    with pytest.raises(TcSemanticError) as info:
        tcdsl.compile(source, entry="h")
    _check_located(info.value, "<string>", source, 1, 5, r"no function named 'h'; the source defines f, g")


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.tc"
    source = "def f(float(N) A) -> (B) {\n  B(i) = A(i) + Z(i)\n}\n"
    path.write_text(source)
    for arg in (path, str(path)):
        with pytest.raises(TcSemanticError) as info:
            tcdsl.compile(arg)
        _check_located(info.value, str(path), source, 2, 17, r"unknown tensor or function 'Z'")


def test_syntax_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.tc"
    source = "def f(float(N) A) -> (B) {\n  B(i) = A(i) +\n}\n"
    path.write_text(source)
    with pytest.raises(TcSyntaxError) as info:
        tcdsl.compile(path)
    _check_located(info.value, str(path), source, 3, 1, r"expected an expression")


def test_error_classes():
    assert issubclass(TcSyntaxError, TcError) and issubclass(TcSemanticError, TcError)
    assert not issubclass(tcdsl.errors.InternalError, TcError)


# ------------------------------------------------------------------- fuzzing
CORPUS = sorted((ROOT / "tests" / "programs").glob("*.tc")) + sorted((ROOT / "examples" / "rnn").glob("*.tc"))
# Replacement tokens: brackets, operators, keywords and literals of every kind.
POOL = ["(", ")", "{", "}", ",", "+", "*", "/", "%", "=", "==", "+=!", "+=", "min=!", "max=", "0", "1", "1.5", "-1",
        "t", "T", "i", "for", "if", "else", "where", "in", ":", "exists", "float", "int32", "->", "<=>", "!", "?",
        "<", ".", "0:3", "def", "A", "N", "tanh", "-", "&&", "#", "\n", "1e-3", "2.0f", ".5", "X.0", "1e999", "$"]
_TOKEN = re.compile(r"\w+|\.\d+|\S")


def _defs() -> list[str]:
    """Every def of the corpus on its own, so the mutated text has one entry."""
    out = []
    for path in CORPUS:
        out += [chunk for chunk in re.split(r"(?m)^(?=def )", path.read_text(encoding="utf-8")) if "def " in chunk]
    return out


def _mutate(rng: random.Random, text: str) -> str:
    tokens = [m.span() for m in _TOKEN.finditer(text)]
    start, end = rng.choice(tokens)
    match rng.randrange(6):
        case 0:
            return text[: rng.randrange(len(text))]  # truncation
        case 1:
            return text[:start] + text[end:]  # a token deleted
        case 2:
            return text[:start] + rng.choice(POOL) + text[end:]  # a token replaced
        case 3:
            return text[:start] + rng.choice(POOL) + " " + text[start:]  # a token inserted
        case 4:
            s2, e2 = rng.choice(tokens)
            return text[:start] + text[s2:e2] + text[end:]  # a token copied over another
        case _:
            s2, e2 = rng.choice(tokens)
            lo, hi = sorted((start, s2))
            return text[:lo] + text[hi:]  # a stretch deleted


def test_mutated_programs_raise_only_tc_errors():
    rng = random.Random(20240607)
    defs = _defs()
    assert defs
    escaped = []
    for _ in range(500):
        text = _mutate(rng, rng.choice(defs))
        try:
            frontend(Source(text))
        except TcError:
            pass
        except Exception as e:  # anything else is a front-end bug
            escaped.append(f"{type(e).__name__}: {e}\n--- source:\n{text}")
    assert not escaped, f"{len(escaped)} non-TcError exceptions; first:\n{escaped[0]}"
