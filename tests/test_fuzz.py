"""Property tests and fuzzing (STYLE 5: hypothesis).

1. Random VALID programs (elementwise expressions, reductions, where
   clauses, guarded shifted reads, temporaries, ``for t`` recurrences under
   ``if t == 0 ... else ...``) with random small sizes: every ``specialize``
   mode agrees with the reference interpreter ``tcdsl.testing.evaluate``.
2. Printing a random expression and parsing it back gives an equal AST.
3. A mutation fuzzer over the corpus that runs the FULL pipeline (compile,
   then a call on small random inputs): every mutant works or raises
   ``TcError``.  It runs in a worker process, so that a crash is reported
   with its mutant instead of killing pytest.  ``python tests/test_fuzz.py
   --seconds 600`` runs it longer.  What it found is kept in ``REGRESSIONS``.

The default run is bounded (~90 s on two cores); ``-m slow`` runs more.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tcdsl  # noqa: E402
from tcdsl import TcError  # noqa: E402
from tcdsl.syntax import nodes as n  # noqa: E402
from tcdsl.syntax.parse import parse  # noqa: E402
from tcdsl.syntax.printer import expr_to_tc, to_tc  # noqa: E402
from tcdsl.testing import OutOfBoundsRead, evaluate  # noqa: E402

MODES = ("never", "after-scheduling", "before-scheduling")
FAST = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


# =========================================================== random programs
@dataclass
class Tensor:
    name: str
    dims: tuple[str, ...]  # size names
    exact: bool = True  # extents are exactly dims (inputs; outputs written over full ranges)


@dataclass
class Program:
    text: str
    inputs: list[Tensor]
    dtype: str
    sizes: tuple[str, ...]


class _Gen:
    """Builds one random program from hypothesis draws.  Every read is in
    bounds by construction: an index is a variable ranging over the very size
    of that dimension, a constant 0, or a shifted variable behind a guard."""

    def __init__(self, draw, dtype: str):
        self.draw = draw
        self.dtype = dtype
        self.type = "float" if dtype == "float32" else dtype
        self.inputs: list[Tensor] = []
        self.avail: list[Tensor] = []
        self.outputs: list[str] = []
        self.lines: list[str] = []
        self.count = 0

    def pick(self, xs):
        return self.draw(st.sampled_from(list(xs)))

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 99)) < p * 100

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # ------------------------------------------------------------ program
    def program(self) -> Program:
        for _ in range(self.draw(st.integers(1, 3))):
            rank = self.draw(st.integers(0 if self.inputs else 1, 3))
            t = Tensor(f"X{len(self.inputs)}", tuple(self.pick("NMK") for _ in range(rank)))
            self.inputs.append(t)
        self.avail = list(self.inputs)
        if self.dtype == "float32" and self.chance(0.4):
            self.recurrence("    ")
        for _ in range(self.draw(st.integers(1, 3))):
            self.statement("  ")
        if not self.outputs:
            self.statement("  ", force_output=True)
        sizes = sorted({d for t in self.inputs for d in t.dims}, key="TNMK".index)
        params = ", ".join(f"{self.type}({', '.join(t.dims)}) {t.name}" if t.dims else f"{self.type} {t.name}"
                           for t in self.inputs)
        text = f"def fuzz({params}) -> ({', '.join(self.outputs)}) {{\n" + "".join(self.lines) + "}\n"
        return Program(text, self.inputs, self.dtype, tuple(sizes))

    # ---------------------------------------------------------- statements
    def statement(self, pad: str, force_output: bool = False) -> None:
        base = self.pick([t for t in self.avail if t.dims] or self.avail)
        vars_ = {v: d for v, d in zip("ijl", base.dims)}
        temp = not force_output and self.chance(0.3)
        where = None
        if not temp and vars_ and self.chance(0.25) and all(t.exact for t in self.avail):
            v = self.pick(sorted(vars_))
            where = f" where {v} in {self.pick(['1', '2', '0'])}:{vars_[v]}"
        guards = not temp and self.chance(0.5)
        red = {}
        if self.chance(0.4):
            red_src = self.pick([t for t in self.avail if t.dims] or [base])
            if red_src.dims:
                red = {"k": self.pick(red_src.dims)}
        scope = {**vars_, **red}
        parts = [self.read(base, vars_, exact=True)]
        if red:
            src = self.pick([t for t in self.avail if red["k"] in t.dims])
            parts.append(self.read(src, scope, must=("k", red["k"])))
        parts.append(self.expr(scope, self.draw(st.integers(0, 3)), guards))
        rhs = self.combine(parts)
        lhs_vars = list(vars_)
        if len(lhs_vars) > 1 and self.chance(0.3):
            lhs_vars.reverse()
        if red:
            op = self.pick(["+=!", "max=!", "min=!"] + (["*=!"] if self.dtype == "float32" else []))
        else:
            op = "="
        name = self.fresh("T" if temp else "O")
        if not temp and red and self.chance(0.3):
            op = op.rstrip("!")  # outputs start as zeros
        lhs = f"{name}({', '.join(lhs_vars)})" if lhs_vars else name
        self.lines.append(f"{pad}{lhs} {op} {rhs}{where or ''}\n")
        dims = tuple(vars_[v] for v in lhs_vars)
        out = Tensor(name, dims, exact=not guards and where is None and not red)
        if not temp:
            self.outputs.append(name)
        if temp or self.chance(0.7):
            self.avail.append(out)
        if not temp and self.chance(0.2):  # a second, pointwise statement on the same output
            self.lines.append(f"{pad}{lhs} = {lhs} * {self.const()} + {self.read(base, vars_, exact=True)}{where or ''}\n")

    def recurrence(self, pad: str) -> None:
        """``for t in T`` with ``if t == 0 { h(t, ...) = ... } else { ... h(t-1, ...) ... }``."""
        s = self.pick("NMK")
        x = Tensor(f"X{len(self.inputs)}", ("T", s))
        self.inputs.append(x)
        self.avail = list(self.inputs)
        h = self.fresh("H")
        v = {"b": s}
        first = self.combine([self.read_t(x, "t"), self.expr(v, 1, False)])
        if self.chance(0.5):
            w = Tensor(f"X{len(self.inputs)}", (s, s))
            self.inputs.append(w)
            step, op = f"{w.name}(k, b) * {h}(t - 1, k)", "+=!"
        else:
            step, op = f"{self.const()} * {h}(t - 1, b)", "="
        rest = self.expr(v, 1, False)
        lines = ["  for t in T {\n"]
        if self.chance(0.5):
            tmp = self.fresh("T")
            lines.append(f"{pad}{tmp}(b) = {self.read_t(x, 't')} * {self.const()}\n")
            first = f"({first}) + {tmp}(b)"
        lines += [f"{pad}if t == 0 {{ {h}(t, b) = {first} }}\n",
                  f"{pad}else {{ {h}(t, b) {op} {step} }}\n"]
        if op == "+=!" or self.chance(0.5):
            lines.append(f"{pad}{h}(t, b) = tanh({h}(t, b) + {rest})\n")
        if self.chance(0.4):
            acc = self.fresh("A")
            lines.append(f"{pad}if t < {self.pick(['1', '2', 'T - 1'])} {{ {acc}(b) += {h}(t, b) }}\n")
            self.outputs.append(acc)
        lines.append("  }\n")
        self.lines += lines
        self.outputs.append(h)
        self.avail.append(Tensor(h, ("T", s)))

    # --------------------------------------------------------- expressions
    def read_t(self, x: Tensor, t: str) -> str:
        return f"{x.name}({t}, b)"

    def read(self, t: Tensor, scope: dict[str, str], exact: bool = False, must=None) -> str:
        """A read of ``t``: each index a variable of that size (or 0)."""
        idx = []
        used_must = False
        for d in t.dims:
            cands = [v for v, s in scope.items() if s == d]
            if must and must[1] == d and not used_must:
                idx.append(must[0])
                used_must = True
            elif exact:
                idx.append(next(v for v, s in scope.items() if s == d and v not in idx))
            elif cands and not self.chance(0.15):
                idx.append(self.pick(cands))
            else:
                idx.append("0")
        return f"{t.name}({', '.join(idx)})" if t.dims else t.name

    def guarded(self, scope: dict[str, str]) -> str | None:
        """``i > 0 ? X(i - 1) : e`` or ``i < N - 1 ? X(i + 1) : e``."""
        ts = [t for t in self.inputs if any(s in t.dims for s in scope.values())]
        if not ts:
            return None
        t = self.pick(ts)
        pos = self.pick([p for p, d in enumerate(t.dims) if d in scope.values()])
        v = self.pick([v for v, s in scope.items() if s == t.dims[pos]])
        read = self.read(t, scope)
        idx = read[read.index("(") + 1:-1].split(", ")
        if self.chance(0.5):
            idx[pos], cond = f"{v} - 1", f"{v} > 0"
        else:
            idx[pos], cond = f"{v} + 1", f"{v} < {t.dims[pos]} - 1"
        return f"({cond} ? {t.name}({', '.join(idx)}) : {self.const()})"

    def expr(self, scope: dict[str, str], depth: int, guards: bool) -> str:
        if depth <= 0 or self.chance(0.2):
            return self.leaf(scope, guards)
        sub = lambda: self.expr(scope, depth - 1, guards)  # noqa: E731
        kinds = ["+", "-", "*", "min", "max", "select", "neg"]
        kinds += ["tanh", "sigmoid", "fabs", "sqrt", "div"] if self.dtype == "float32" else ["idiv", "mod"]
        k = self.pick(kinds)
        match k:
            case "+" | "-" | "*":
                return f"({sub()} {k} {sub()})"
            case "min" | "max":
                return f"{k}({sub()}, {sub()})"
            case "neg":
                return f"-({sub()})"
            case "select":
                return f"({self.cond(scope)} ? {sub()} : {sub()})"
            case "sqrt":
                return f"sqrt(fabs({sub()}))"
            case "div":
                return f"({sub()} / (1 + fabs({sub()})))"
            case "idiv" | "mod":
                return f"({sub()} {'/' if k == 'idiv' else '%'} {self.pick([sub(), '3', '-2'])})"
            case _:
                return f"{k}({sub()})"

    def leaf(self, scope: dict[str, str], guards: bool) -> str:
        kinds = ["read", "read", "const"] + (["index"] if scope else []) + (["guarded"] if guards and scope else [])
        match self.pick(kinds):
            case "read":
                ts = [t for t in self.avail if all(d in scope.values() for d in t.dims) or self.chance(0.3)]
                return self.read(self.pick(ts or self.avail), scope)
            case "index":
                v = self.pick(sorted(scope))
                return f"{self.type}({v})" if self.chance(0.5) else v
            case "guarded":
                return self.guarded(scope) or self.const()
        return self.const()

    def cond(self, scope: dict[str, str]) -> str:
        """Conditions compare exact values (reads, indices), never rounded ones."""
        reads = [t for t in self.inputs if all(d in scope.values() for d in t.dims)]
        options = ["index"] if scope else []
        options += ["read"] if reads else []
        match self.pick(options or ["const"]):
            case "index":
                v = self.pick(sorted(scope))
                return f"{v} {self.pick(['<', '>=', '==', '!='])} {self.pick(['1', scope[v] + ' - 1'])}"
            case "read":
                a = self.read(self.pick(reads), scope)
                return f"{a} {self.pick(['<', '>', '<=', '!='])} {self.pick(['0', self.read(self.pick(reads), scope)])}"
        return "1 < 2"

    def const(self) -> str:
        if self.dtype == "float32":
            return self.pick(["0.5", "2", "1.5", "-0.25", "3.0f", "1e-3"])
        return self.pick(["1", "2", "3", "-1"])

    def combine(self, parts: list[str]) -> str:
        out = parts[0]
        for p in parts[1:]:
            out = f"({out}) {self.pick(['+', '*', '-'])} ({p})"
        return out


@st.composite
def programs(draw, dtype: str = "float32") -> Program:
    return _Gen(draw, dtype).program()


@st.composite
def size_settings(draw, names: tuple[str, ...]) -> dict[str, int]:
    return {s: draw(st.integers(1, 4)) for s in names}


def make_inputs(p: Program, sizes: dict[str, int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for t in p.inputs:
        shape = tuple(sizes[d] for d in t.dims)
        if p.dtype == "float32":
            out.append(rng.standard_normal(shape).astype(np.float32))
        else:
            out.append(rng.integers(-6, 7, shape).astype(p.dtype))
    return out


def check_against_interpreter(p: Program, settings_: list[dict[str, int]], modes=MODES) -> None:
    cases = []
    for k, sizes in enumerate(settings_):
        inputs = make_inputs(p, sizes, k)
        want = evaluate(p.text, inputs)
        cases.append((sizes, inputs, want if isinstance(want, tuple) else (want,)))
    for mode in modes:
        kernel = tcdsl.compile(p.text, specialize=mode)
        for sizes, inputs, want in cases:
            got = kernel(*inputs)
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, want):
                msg = f"mode {mode}, sizes {sizes}\n{p.text}"
                assert g.shape == w.shape and g.dtype == w.dtype, msg
                if p.dtype == "float32":
                    np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4, equal_nan=True, err_msg=msg)
                else:
                    np.testing.assert_array_equal(g, w, err_msg=msg)


def _with_sizes(kind: str = "float32"):
    @st.composite
    def draw_all(draw):
        p = draw(programs(kind))
        return p, [draw(size_settings(p.sizes)) for _ in range(2)]
    return draw_all()


@FAST
@given(_with_sizes("float32"))
def test_random_programs_agree_with_the_interpreter(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


@FAST
@given(_with_sizes("int32"))
def test_random_integer_programs_agree_with_the_interpreter(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


@pytest.mark.slow
@SLOW
@given(_with_sizes("float32"))
def test_random_programs_agree_with_the_interpreter_long(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


@pytest.mark.slow
@SLOW
@given(_with_sizes("int32"))
def test_random_integer_programs_agree_with_the_interpreter_long(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


# ================================================================ regressions
# What the fuzzers found, kept as tests.

def _in_subprocess(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter: a crash there fails the test, not pytest."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_integer_division_by_a_runtime_zero_does_not_trap():
    # SIGFPE killed the process (x86 idiv traps on 0 and on MIN / -1); now NumPy's answers
    r = _in_subprocess(
        "import numpy as np, tcdsl\n"
        "k = tcdsl.compile('def f(int32(N) A, int32(N) B) -> (Q, R) { Q(i) = A(i) / B(i)\\n R(i) = A(i) % B(i) }')\n"
        "a = np.array([5, -5, -2**31, 7] * 5, np.int32); b = np.array([0, 0, -1, 2] * 5, np.int32)\n"
        "q, r = k(a, b)\n"
        "with np.errstate(all='ignore'):\n"
        "    assert (q == np.floor_divide(a, b)).all() and (r == np.mod(a, b)).all(), (q, r)\n")
    assert r.returncode == 0, r.stderr[-2000:]


def test_vectorized_loop_with_negative_extent_writes_nothing():
    # `where j in 2:N` with N = 1: the isl loop runs 2 <= j < 1, but the vector
    # tail ran (N - 2) % 8 = 7 times and wrote before the output's start
    k = tcdsl.compile("def f(float(M, N) X, float(T) Z) -> (O) {\n  O(i, j) = X(i, j)\n"
                      "  for t in T { O(i, j) = 2 * X(i, j) where j in 2:N }\n}")
    for M, N in [(1, 1), (3, 1), (2, 2), (2, 11)]:
        big = np.full(M * N + 64, 7.0, np.float32)
        out = big[32:32 + M * N].reshape(M, N)
        x = np.arange(M * N, dtype=np.float32).reshape(M, N)
        k(x, np.ones(1, np.float32), out=out)
        assert (big[:32] == 7).all() and (big[32 + M * N:] == 7).all(), (M, N)
        np.testing.assert_array_equal(out, evaluate(k.frontend.source.text, [x, np.ones(1, np.float32)]))
