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
   --seconds 600 [--seed N]`` runs it longer (``TCDSL_FUZZ_SEED`` picks the
   default test's seed, 0 unless set; a failure prints the seed to replay);
   ``TCDSL_FUZZ_SECONDS`` (default 15) is the default test's budget,
   ``TCDSL_FUZZ_LONG_SECONDS`` (default 600) the slow one's.  What it found
   is kept in ``REGRESSIONS`` (fixed) and ``PENDING`` (not yet, under slow).
   ``--guard`` (always in the slow test) puts the inputs next to guard pages.
4. The random programs of 1 under the guard-page harness (tests/guard.py):
   a sample by default, more under slow.

The default run is bounded (~70 s on two cores); ``-m slow`` runs more.
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
from dataclasses import dataclass
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
from tcdsl import testing  # noqa: E402
from tcdsl.testing import OutOfBoundsRead, evaluate  # noqa: E402

MODES = ("never", "after-scheduling", "before-scheduling")
FAST = settings(max_examples=12, deadline=None, print_blob=True, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=400, deadline=None, print_blob=True, suppress_health_check=list(HealthCheck))


# =========================================================== random programs
@dataclass
class Tensor:
    name: str
    dims: tuple[str, ...]  # size names
    exact: bool = True  # extents are exactly dims (inputs; outputs written over full ranges)
    double: bool = False  # declared float(2 * N, ...): its first dimension is twice dims[0]


@dataclass
class Program:
    text: str
    inputs: list[Tensor]
    dtype: str
    sizes: tuple[str, ...]
    free: tuple[str, ...] = ()  # sizes no input carries: given at the call


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
        if self.chance(0.2):  # an affine size in a declared shape: float(2 * N, ...)
            base = self.pick(t for t in self.inputs if t.dims)
            self.inputs.append(Tensor(f"X{len(self.inputs)}", base.dims, double=True))
        self.free: list[str] = []
        self.avail = [t for t in self.inputs if not t.double]
        if self.dtype == "float32" and self.chance(0.4):
            self.recurrence("    ")
        for _ in range(self.draw(st.integers(1, 3))):
            self.statement("  ")
        if not self.outputs:
            self.statement("  ", force_output=True)
        sizes = sorted({d for t in self.inputs for d in t.dims}, key="TNMK".index)
        params = ", ".join(f"{self.type}({', '.join(self.declared(t))}) {t.name}" if t.dims
                           else f"{self.type} {t.name}" for t in self.inputs)
        text = f"def fuzz({params}) -> ({', '.join(self.outputs)}) {{\n" + "".join(self.lines) + "}\n"
        return Program(text, self.inputs, self.dtype, tuple(sizes) + tuple(self.free), tuple(self.free))

    @staticmethod
    def declared(t: Tensor) -> list[str]:
        return [f"2 * {t.dims[0]}", *t.dims[1:]] if t.double else list(t.dims)

    # ---------------------------------------------------------- statements
    def statement(self, pad: str, force_output: bool = False) -> None:
        base = self.pick([t for t in self.avail if t.dims] or self.avail)
        vars_ = {v: d for v, d in zip("ijl", base.dims)}
        temp = not force_output and self.chance(0.3)
        where = None
        if not temp and vars_ and self.chance(0.25) and all(t.exact for t in self.avail):
            v = self.pick(sorted(vars_))
            hi = vars_[v]
            if self.chance(0.3):  # the same size as X.k
                t, k = self.pick([(t, k) for t in self.inputs for k, d in enumerate(t.dims) if d == hi and not t.double])
                hi = f"{t.name}.{k}"
            where = f" where {v} in {self.pick(['1', '2', '0'])}:{hi}"
        guards = not temp and self.chance(0.5)
        red = {}
        if self.chance(0.4):
            red_src = self.pick([t for t in self.avail if t.dims and t.exact and "T" not in t.dims] or [base])
            if red_src.dims:
                red = {"k": self.pick(red_src.dims)}
        scope = {**vars_, **red}
        parts = [self.read(base, vars_, exact=True)]
        if red:
            src = self.pick([t for t in self.avail if red["k"] in t.dims and self.readable(t, scope)])
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
        arg = not temp and red and self.chance(0.15)
        if arg:  # the index of the first extreme (int32)
            op = self.pick(["argmax=!", "argmin=!"])
        if not temp and not red and where is None and self.chance(0.1):  # a free size, given at the call
            f = f"F{len(self.free)}"
            self.free.append(f)
            lhs_vars = ["f", *lhs_vars]
            rhs, where = f"({rhs}) + {self.type}(f)", f" where f in 0:{f}"
            vars_ = {"f": f, **vars_}
        lhs = f"{name}({', '.join(lhs_vars)})" if lhs_vars else name
        self.lines.append(f"{pad}{lhs} {op} {rhs}{where or ''}\n")
        dims = tuple(vars_[v] for v in lhs_vars)
        out = Tensor(name, dims, exact=not guards and where is None and not red)
        if not temp:
            self.outputs.append(name)
        if arg:
            return
        concat = not temp and lhs_vars and where is None and self.chance(0.2)
        if (temp or self.chance(0.7)) and not concat:
            self.avail.append(out)
        if not temp and self.chance(0.2):  # a second, pointwise statement on the same output
            self.lines.append(f"{pad}{lhs} = {lhs} * {self.const()} + {self.read(base, vars_, exact=True)}{where or ''}\n")
        if concat:  # more of the output after its end: name(.., d + v, ..) = ...
            k = self.pick(range(len(lhs_vars)))
            shifted = [f"{vars_[v]} + {v}" if i == k else v for i, v in enumerate(lhs_vars)]
            self.lines.append(f"{pad}{name}({', '.join(shifted)}) = {self.read(base, vars_, exact=True)} * "
                              f"{self.const()}\n")

    def recurrence(self, pad: str) -> None:
        """``for t in T`` with ``if t == 0 { h(t, ...) = ... } else { ... h(t-1, ...) ... }``."""
        s = self.pick("NMK")
        x = Tensor(f"X{len(self.inputs)}", ("T", s))
        self.inputs.append(x)
        self.avail = [t for t in self.inputs if not t.double]
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
        if self.chance(0.4):  # an input projection: hoisted before the loop (polyhedral/hoist.py)
            w = Tensor(f"X{len(self.inputs)}", (s, s))
            self.inputs.append(w)
            proj = self.fresh("P")
            if self.chance(0.5):  # a temporary, expanded by t when hoisted
                lines.append(f"{pad}{proj}(b) +=! {x.name}(t, k) * {w.name}(k, b)\n")
                rest = f"({rest}) + {proj}(b)"
            else:
                lines.append(f"{pad}{proj}(t, b) +=! {x.name}(t, k) * {w.name}(k, b)\n")
                rest = f"({rest}) + {proj}(t, b)"
                self.outputs.append(proj)
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
        if self.chance(0.3):  # the state a temporary: kept in two slots (polyhedral/contract.py)
            y = self.fresh("Y")
            lines.append(f"{pad}{y}(t, b) = {h}(t, b) * {self.const()}\n")
            h = y
        lines.append("  }\n")
        self.lines += lines
        self.outputs.append(h)
        self.avail.append(Tensor(h, ("T", s)))

    # --------------------------------------------------------- expressions
    def read_t(self, x: Tensor, t: str) -> str:
        return f"{x.name}({t}, b)"

    def readable(self, t: Tensor, scope: dict[str, str]) -> bool:
        """A tensor whose extents may be smaller than its dims (a where clause,
        a guarded read), or may be 0 (T), is only read through variables:
        inference narrows them."""
        return all(d in scope.values() for d in t.dims) or t.exact and "T" not in t.dims

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
                # a variable of that size not used yet, else one used already
                # (the must variable may have taken the only one)
                # (none of that size in scope: a constant index)
                idx.append(next((v for v in cands if v not in idx), None) or (self.pick(cands) if cands else "0"))
            elif cands and (not t.exact or d == "T" or not self.chance(0.15)):
                idx.append(self.pick(cands))
            else:
                idx.append("0")
        return f"{t.name}({', '.join(idx)})" if t.dims else t.name

    def guarded(self, scope: dict[str, str]) -> str | None:
        """``i > 0 ? X(i - 1) : e`` or ``i < N - 1 ? X(i + 1) : e``."""
        ts = [t for t in self.inputs if any(s in t.dims for s in scope.values()) and self.readable(t, scope)]
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
        doubled = [t for t in self.inputs if t.double and all(d in scope.values() for d in t.dims)]
        kinds += ["double"] if doubled else []
        match self.pick(kinds):
            case "double":  # float(2 * N, ..) X: X(N + i, ..) or X(2 * i + 1, ..)
                t = self.pick(doubled)
                idx = self.read(Tensor(t.name, t.dims), scope)[len(t.name) + 1:-1].split(", ")
                v = self.pick([v for v, d in scope.items() if d == t.dims[0]])
                idx[0] = self.pick([f"{t.dims[0]} + {v}", f"2 * {v} + 1", v])
                return f"{t.name}({', '.join(idx)})"
            case "read":
                ts = [t for t in self.avail if all(d in scope.values() for d in t.dims)
                      or self.readable(t, scope) and self.chance(0.3)]
                return self.read(self.pick(ts), scope) if ts else self.const()
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
    return {s: draw(st.integers(0 if s == "T" else 1, 4)) for s in names}  # T = 0: no steps


def make_inputs(p: Program, sizes: dict[str, int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for t in p.inputs:
        shape = tuple(sizes[d] * (2 if t.double and k == 0 else 1) for k, d in enumerate(t.dims))
        if p.dtype == "float32":
            out.append(rng.standard_normal(shape).astype(np.float32))
        else:
            out.append(rng.integers(0 if p.dtype.startswith("u") else -6, 7, shape).astype(p.dtype))
    return out


def check_against_interpreter(p: Program, settings_: list[dict[str, int]], modes=MODES) -> None:
    cases = []
    for k, sizes in enumerate(settings_):
        inputs = make_inputs(p, sizes, k)
        free = {f: sizes[f] for f in p.free}
        want = evaluate(p.text, inputs, sizes=free)
        cases.append((sizes, inputs, want if isinstance(want, tuple) else (want,), free))
    for mode in modes:
        kernel = tcdsl.compile(p.text, specialize=mode)
        for sizes, inputs, want, free in cases:
            got = kernel(*inputs, **free)
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, want):
                msg = f"mode {mode}, sizes {sizes}\n{p.text}"
                assert g.shape == w.shape and g.dtype == w.dtype, msg
                if p.dtype == "float32":
                    np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4, equal_nan=True, err_msg=msg)
                else:
                    np.testing.assert_array_equal(g, w, err_msg=msg)


INT_TYPES = ("int32", "int64", "int16", "uint32")


def _with_sizes(kind: str | tuple[str, ...] = "float32"):
    """A random program of dtype ``kind`` ("int": one of INT_TYPES, or a tuple
    of dtypes to pick from) and two random size settings."""
    dtypes = INT_TYPES if kind == "int" else (kind,) if isinstance(kind, str) else kind

    @st.composite
    def draw_all(draw):
        p = draw(programs(draw(st.sampled_from(dtypes))))
        return p, [draw(size_settings(p.sizes)) for _ in range(2)]
    return draw_all()


# From a fixed seed, as the integer programs below: a default run (and CI)
# draws the same programs every time; the slow runs draw new ones.
@settings(max_examples=12, derandomize=True, database=None, deadline=None, print_blob=True,
          suppress_health_check=list(HealthCheck))
@given(_with_sizes("float32"))
def test_random_programs_agree_with_the_interpreter(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


# Every integer type of INT_TYPES, unsigned included (the wrap-around bug of
# test_unsigned_arithmetic_wraps_around is fixed), from a fixed seed; the slow
# runs draw more programs.
@settings(max_examples=12, derandomize=True, database=None, deadline=None, print_blob=True,
          suppress_health_check=list(HealthCheck))
@given(_with_sizes("int"))
def test_random_integer_programs_agree_with_the_interpreter(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


@pytest.mark.slow
@FAST
@given(_with_sizes("int"))
def test_random_integer_programs_agree_with_the_interpreter_all_types(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


# TVM 0.27's LLVM backend emits `add nuw`, `sub nuw` and `mul nuw` for
# uint32/uint64 (and `nsw` for int32/int64), so a wrapping expression was
# poison and LLVM folded it (found by the random integer program test; the
# interpreter wraps, as NumPy and C do).  Values of 8 to 32 bits are now
# computed in 64 bits and wrapped back (codegen/expr.py).
@pytest.mark.parametrize("mode", MODES)
def test_unsigned_arithmetic_wraps_around(mode):
    src = ("def f(uint32(K) X0, uint32(K, N, N) X2) -> (O1) {\n  O1(i) +=! X0(i) * X2(k, 0, 0) + 1\n"
           "  O1(i) = O1(i) * uint32(-1) + X0(i)\n}")
    x0, x2 = np.array([5], np.uint32), np.array([[[2, 3], [4, 5]]], np.uint32)
    want = evaluate(src, [x0, x2])
    assert want[0] == np.uint32(2**32 - 6) and want[0].dtype == np.uint32  # -(5 * 2 + 1) + 5
    np.testing.assert_array_equal(tcdsl.compile(src, specialize=mode)(x0, x2), want)


@pytest.mark.slow
@SLOW
@given(_with_sizes("float32"))
def test_random_programs_agree_with_the_interpreter_long(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


@pytest.mark.slow
@SLOW
@given(_with_sizes("int"))
def test_random_integer_programs_agree_with_the_interpreter_long(case):
    p, sizes = case
    check_against_interpreter(p, sizes)


# ====================================================== under guard pages
# The same random programs, run by the guard-page harness (tests/guard.py):
# every input and output next to a PROT_NONE page, in a child process, so a
# read or write outside a tensor is a reported fault.  A small sample in the
# default run; ``-m slow`` (or ``TCDSL_FUZZ_GUARD_PROGRAMS=N``) runs more.

def sample_programs(count: int, kind: str | tuple[str, ...] = "float32") -> list[tuple[Program, list[dict]]]:
    """``count`` random programs with their size settings, always the same ones."""
    from hypothesis import Phase

    out: list = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(_with_sizes(kind))
    def collect(case):
        out.append(case)

    collect()
    return out


def guard_cases(samples: list[tuple[Program, list[dict]]], prefix: str) -> list[dict]:
    """Cases of tests/guard.py: each program compiled once (in a specialize mode
    by turns) and run with each size setting on make_inputs' inputs."""
    import guard

    return [{"id": f"{prefix}{k}", "source": p.text, "entry": "fuzz", "mode": MODES[k % len(MODES)],
             "settings": [{"sizes": sizes, "inputs": [guard.explicit(x) for x in make_inputs(p, sizes, j)]}
                          for j, sizes in enumerate(settings_)]}
            for k, (p, settings_) in enumerate(samples)]


def check_under_guard_pages(count_float: int, count_int: int) -> None:
    import guard

    cases = guard_cases(sample_programs(count_float), "float") + \
        guard_cases(sample_programs(count_int, "int"), "int")
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, f"{len(bad)} of {len(records)} ({guard.counts(records)}):\n{guard.report(bad)}"
    assert sum(r["outcome"] == "works" for r in records) >= len(records) // 2, guard.counts(records)


def test_random_programs_under_guard_pages():
    n = int(os.environ.get("TCDSL_FUZZ_GUARD_PROGRAMS", 8))
    check_under_guard_pages(n - n // 2, n // 2)


@pytest.mark.slow
def test_random_programs_under_guard_pages_long():
    check_under_guard_pages(200, 100)


# ======================================================== printer round trip
_NAMES = st.sampled_from(["A", "B", "x", "i", "j", "t", "N", "foo", "h2h"])
_OPS = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "min", "max"]
_LEAVES = st.one_of(
    st.builds(n.Ident, _NAMES),
    st.builds(n.Const, st.integers(0, 10**40)),
    st.builds(n.Const, st.floats(0, 1e300) | st.just(float("inf"))),
    st.builds(n.DimSize, _NAMES, st.integers(0, 9)),
)


def _extend(sub):
    return st.one_of(
        st.builds(n.Unary, st.sampled_from(["-", "!"]), sub),
        st.builds(n.Binary, st.sampled_from(_OPS), sub, sub),
        st.builds(n.Select, sub, sub, sub),
        st.builds(n.Call, st.sampled_from(["A", "tanh", "foo", "fmax", "pow"]),
                  st.lists(sub, min_size=1, max_size=3).map(tuple)),
        st.builds(n.Cast, st.sampled_from(["float32", "float64", "float16", "int32", "int8", "uint8", "int64", "bool"]),
                  sub),
    )


EXPRESSIONS = st.recursive(_LEAVES, _extend, max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_printed_expressions_parse_back_equal(e):
    text = f"def f(float(N) A) -> (B) {{ B(i) = {expr_to_tc(e)} }}"
    program = parse(text)
    assert program.defs[0].body[0].rhs == e, text
    assert parse(to_tc(program)) == program


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


def test_integer_division_guard_survives_simplification():
    # the guard was a Select; TVM simplified its branch under `i != 0` to `x / i`
    # and then evaluated both branches: SIGFPE again (random int program); and
    # TVM folds `0 - u` to 0 for unsigned u, which broke a bit-trick guard
    r = _in_subprocess(
        "import numpy as np, tcdsl\n"
        "from tcdsl.testing import evaluate\n"
        "src = 'def f(int32(M, K) X) -> (O) { O(i, j) = X(i, j) * ((i == 1 ? X(0, 0) : 2) / i) }'\n"
        "x = np.arange(12, dtype=np.int32).reshape(4, 3) - 5\n"
        "assert (tcdsl.compile(src)(x) == evaluate(src, [x])).all()\n"
        "for dt in ('uint8', 'uint32', 'uint64', 'int8', 'int64'):\n"
        "    src = f'def f({dt}(N) A, {dt}(N) B) -> (Q, R) {{ Q(i) = A(i) / B(i)\\n R(i) = A(i) % B(i) }}'\n"
        "    a = np.array([7, 7, 7, 100, 9] * 4).astype(dt); b = np.array([0, 1, 2, 3, -1] * 4).astype(dt)\n"
        "    for g, w in zip(tcdsl.compile(src)(a, b), evaluate(src, [a, b])):\n"
        "        assert (g == w).all(), (dt, g, w)\n")
    assert r.returncode == 0, r.stderr[-2000:]


def test_int32_min_constant():
    # TVM failed on floor division by the constant INT_MIN and folded x == INT_MIN to false
    a = np.array([5, -5, -2**31, 0, -2**31 + 1, 2**31 - 1] * 3, np.int32)
    for e in ["a(i) == -2147483648", "a(i) <= -2147483648", "a(i) / -2147483648", "a(i) % -2147483648"]:
        src = f"def f(int32(N) a) -> (q) {{ q(i) = {e} }}"
        for mode in ("never", "before-scheduling"):
            np.testing.assert_array_equal(tcdsl.compile(src, specialize=mode)(a), evaluate(src, [a]), err_msg=e)


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


def test_vector_reduction_of_nested_formulas_builds():
    # TVM's vectorizer failed ("Let cannot bind the same var to two different values") on the
    # vector reduction of `tanh(sigmoid(c)) * 0.5` with a loop-invariant c: the kernel is now
    # built with scalar loops instead of not at all
    src = ("def fuzz(float(N, N, N) X0) -> (T2) {\n"
           "  T2(l, j, i) +=! ((X0(i, j, l)) + (X0(k, 0, 0))) + ((tanh(sigmoid(X0(0, 0, 0))) * 0.5))\n}")
    rng = np.random.default_rng(1)
    for mode in MODES:
        k = tcdsl.compile(src, specialize=mode)
        for N in (1, 3, 17):
            x = rng.standard_normal((N, N, N)).astype(np.float32)
            want = (np.transpose(x, (2, 1, 0)) + x[:, 0, 0].sum() / N + np.tanh(1 / (1 + np.exp(-x[0, 0, 0]))) * 0.5) * N
            np.testing.assert_allclose(k(x), want, rtol=1e-5, atol=1e-5)


def test_loops_starting_below_zero():
    # the isl schedule skewed O2's loops (c0 = l - i from 1 - N); TVM 0.27 miscompiled
    # `for c0 in range(1 - N, N): for c1 in range(max(0, c0), ...)` (wrong values, writes
    # out of bounds); codegen now starts every loop at 0
    src = ("def fuzz(float(N) X0, float(K) X1, float(N, M, N) X2) -> (O2, O3) {\n"
           "  O2(l, j, i) = X2(i, j, l)\n  O3(i) min= X1(i) - O2(k, 0, k)\n}")
    rng = np.random.default_rng(0)
    for mode in MODES:
        k = tcdsl.compile(src, specialize=mode)
        for N, M, K in [(4, 1, 3), (3, 2, 2)]:
            inputs = [rng.standard_normal(s).astype(np.float32) for s in [(N,), (K,), (N, M, N)]]
            for g, w in zip(k(*inputs), evaluate(src, inputs)):
                np.testing.assert_array_equal(g, w)


def test_temporary_indexed_through_skewed_loops_compiles():
    # TVM's s_tir.CompactBufferAllocation raised "Divide by zero" estimating T3's
    # region under the skewed schedule, for N=2, M=4 before scheduling
    p = Program("def fuzz(float(N, M, N) X0) -> (O1, O2) {\n  O1(i, j, l) +=! X0(i, j, l) + X0(k, 0, i) + 0.5\n"
                "  O2(i, j, l) += X0(i, j, l) + X0(i, k, i) + tanh(float(i)) + O1(l, j, 0)\n"
                "  T3(l, j, i) = O1(i, j, l) + O2(l, j, l)\n}\n", [Tensor("X0", ("N", "M", "N"))], "float32", ("N", "M"))
    check_against_interpreter(p, [{"N": 2, "M": 4}, {"N": 1, "M": 1}])


def test_zero_size_keeps_unrelated_statements():
    # with T = 0 the specialized modes substituted T into a context of sizes >= 1,
    # which left no statement at all: O3, independent of T, stayed zero
    p = Program("def fuzz(float(N, N) X0, float X2, float(T, M) X3) -> (H1, O3, O4) {\n"
                "  for t in T {\n    if t == 0 { H1(t, b) = X3(t, b) * min(b, X2) }\n"
                "    else { H1(t, b) = 3.0f * H1(t - 1, b) }\n  }\n"
                "  O3(i, j) min=! X0(i, j) * X0(k, 0) * i where j in 2:N\n"
                "  O4(i, j) = H1(i, j) - fabs(float(i))\n}\n",
                [Tensor("X0", ("N", "N")), Tensor("X2", ()), Tensor("X3", ("T", "M"))], "float32", ("T", "N", "M"))
    check_against_interpreter(p, [{"T": 0, "N": 3, "M": 1}, {"T": 1, "N": 4, "M": 2}])


def test_an_extent_below_zero_at_size_zero():
    # O5's rows are where `i + 1` stays in X3: T - 1 of them, -1 at T = 0; the
    # output is then empty (was: NumPy's "negative dimensions" from the runtime)
    p = Program("def fuzz(float(T, K) X3) -> (O5) {\n"
                "  O5(j, i) = X3(i, j) + (i < T - 1 ? X3(i + 1, 0) : 0.5)\n}\n",
                [Tensor("X3", ("T", "K"))], "float32", ("T", "K"))
    check_against_interpreter(p, [{"T": 0, "K": 2}, {"T": 1, "K": 3}, {"T": 5, "K": 2}])


def test_a_select_beside_a_formula_with_lets_compiles():
    # TVM 0.27's vectorizer rejected a Let (the tanh formula) beside an
    # if_then_else in one vectorized loop ("Let cannot bind the same var to
    # two different values"): that loop now stays scalar (codegen/tir.py)
    p = Program("def fuzz(float(T, K) X3) -> (O5) {\n"
                "  O5(j, i) = (i >= T - 1 ? 2 : tanh(X3(i, j))) * tanh(tanh(float(j)))\n}\n",
                [Tensor("X3", ("T", "K"))], "float32", ("T", "K"))
    check_against_interpreter(p, [{"T": 3, "K": 2}, {"T": 20, "K": 3}])


# ============================================================ mutation fuzzer
CORPUS = sorted((ROOT / "tests" / "programs").glob("*.tc")) + sorted((ROOT / "examples" / "rnn").glob("*.tc"))
POOL = ["(", ")", "{", "}", ",", "+", "-", "*", "/", "%", "=", "==", "!=", "<=", "+=!", "+=", "*=!", "min=!", "max=",
        "0", "1", "2", "1.5", "-1", "t", "T", "i", "j", "k", "N", "A", "for", "if", "else", "where", "in", ":",
        "exists", "float", "double", "half", "int32", "int8", "uint8", "bool", "int64", "->", "<=>", "!", "?", "<",
        ".", "0:3", "def", "tanh", "exp", "pow", "fmax", "min", "max", "&&", "||", "#", "\n", "1e-3", "2.0f", ".5",
        "X.0", "A.1", "1e999", "$", "t-1", "t+1", "T-1-t", "i-1", "float(", "int32(", "? 1 :"]
HUGE = ["2147483647", "2147483648", "4294967296", "99999999999", "9223372036854775807", "18446744073709551616",
        "-2147483648", "1e38", "1e39", "3.4e38f", "1e308", "1e999", "1e-45", "0", "65536", "46341"]
_TOKEN = re.compile(r"\d+\.?\d*(?:[eE][-+]?\d+)?f?|\w+|\.\d+|[-+*/%=!<>&|]=?!?|\S")
_NUMBER = re.compile(r"(?<![\w.])\d+\.?\d*(?:[eE][-+]?\d+)?f?")


def corpus_defs() -> list[str]:
    """Every def of the corpus on its own, so a mutant has one entry."""
    out = []
    for path in CORPUS:
        out += [c for c in re.split(r"(?m)^(?=def )", path.read_text(encoding="utf-8")) if "def " in c]
    return out


def mutate(rng: random.Random, text: str) -> str:
    tokens = [m.span() for m in _TOKEN.finditer(text)] or [(0, 0)]
    start, end = rng.choice(tokens)
    s2, e2 = rng.choice(tokens)
    match rng.randrange(10):
        case 0:
            return text[: rng.randrange(len(text) + 1)]  # truncation
        case 1:
            return text[:start] + text[end:]  # a token deleted
        case 2:
            return text[:start] + rng.choice(POOL) + text[end:]  # a token replaced
        case 3:
            return text[:start] + rng.choice(POOL) + " " + text[start:]  # a token inserted
        case 4:
            if s2 < start:
                start, end, s2, e2 = s2, e2, start, end
            if end > s2:
                return text
            return text[:start] + text[s2:e2] + text[end:s2] + text[start:end] + text[e2:]  # two tokens swapped
        case 5:
            lo, hi = sorted((start, s2))
            return text[:lo] + text[hi:]  # a stretch deleted
        case 6:
            nums = list(_NUMBER.finditer(text))
            if not nums:
                return text[:start] + rng.choice(HUGE) + text[start:]
            m = rng.choice(nums)
            return text[:m.start()] + rng.choice(HUGE) + text[m.end():]  # a huge number
        case 7:
            depth = rng.choice([5, 30, 95, 99, 100, 101, 150, 400])
            kind = rng.choice(["(", "-(", "tanh(", "float(", "!("])
            return text[:start] + kind * depth + text[start:end] + ")" * depth + text[end:]  # deep nesting
        case 8:
            lines = text.splitlines(keepends=True)
            if not lines:
                return text
            k = rng.randrange(len(lines))
            return "".join(lines[:k] + [lines[k]] * rng.choice([2, 3]) + lines[k:])  # a line repeated
        case _:
            body = text.find("{")
            if body < 0:
                return text
            depth = rng.choice([1, 3, 40, 120])  # statements nested in loops / ifs
            head = "".join(rng.choice(["for t%d in 2 { " % d, "if 1 < 2 { "]) for d in range(depth))
            close = text.rfind("}")
            return text[:body + 1] + head + text[body + 1:close] + "}" * depth + text[close:]


def mutant(seed: int, index: int, defs: list[str]) -> str:
    rng = random.Random(seed * 1_000_003 + index)
    text = rng.choice(defs)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        text = mutate(rng, text)
    return text


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _inputs(kernel, rng: np.random.Generator, sizes: dict[str, int]) -> list[np.ndarray] | None:
    checked = kernel.frontend.checked
    out = []
    for p in checked.node.params:
        shape = tuple(sizes[d] if isinstance(d, str) else d for d in p.type.dims)
        if int(np.prod(shape, dtype=np.float64)) > 100_000:
            return None
        dtype = checked.tensors[p.name].dtype
        if dtype.startswith("float"):
            out.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:  # small values: integer tensors are often indices
            out.append(rng.integers(0, 2, shape).astype(dtype))
    return out


def _elements(kernel, sizes: dict[str, int]) -> int:
    """How many elements all tensors have together (0 when some size is refused)."""
    from tcdsl.codegen.signature import evaluate as size_value

    ranges = kernel.frontend.ranges
    total = 0
    for t in ranges.checked.tensors:
        count = 1
        for e in ranges.extent_exprs(t):
            count *= max(0, size_value(e, sizes))
        total += count
    return total


def run_mutant(text: str, index: int = 0, mode: str | None = None, size: int | None = None,
               guarded: bool = False) -> tuple[str, str]:
    """Compile ``text`` and, when it compiles, call it on small random inputs
    (every size ``size``, or random in 1..3).  Returns (outcome, detail);
    outcome "failure" means something other than a TcError escaped,
    "mismatch" that the kernel and the interpreter disagree (values, shapes,
    dtypes, or one of them raising a TcError where the other runs); both
    fail the tests.  "skipped" are the mutants the interpreter cannot judge
    (an out-of-bounds read is undefined for compiled code, or it runs too long).
    ``guarded``: the kernel reads inputs next to a PROT_NONE page
    (tests/guard.py; after the end or before the start, by turns), so that
    a read outside one kills the worker, which reports the mutant."""
    rng = random.Random(index)
    mode = mode or rng.choice(MODES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            kernel = tcdsl.compile(text, specialize=mode)
        except TcError:
            return "rejected", ""
        except Exception as e:  # noqa: BLE001 -- anything else is a bug
            return "failure", f"compile ({mode}): {type(e).__name__}: {e}"
        sizes = {s: size or rng.randint(1, 3) for s in kernel.frontend.checked.sizes}
        inputs = _inputs(kernel, np.random.default_rng(index), sizes)
        if inputs is None:
            return "skipped", "inputs too large"
        if _elements(kernel, sizes) > 1_000_000:
            return "skipped", "tensors too large"
        want = None
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        try:
            want = evaluate(text, inputs)
        except (OutOfBoundsRead, _Timeout, MemoryError) as e:  # TooLarge is a MemoryError
            return "skipped", f"interpreter: {type(e).__name__}"  # undefined (or too long) for compiled code
        except TcError as e:
            want = e
        except Exception as e:  # noqa: BLE001
            return "failure", f"interpreter: {type(e).__name__}: {e}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        if guarded:
            import guard

            inputs = [guard.guarded_copy(x, guard.DIRECTIONS[index % 2]) for x in inputs]
        try:
            got = kernel(*inputs)
        except TcError as e:
            if want is None or isinstance(want, TcError):
                return "rejected", "call"
            return "mismatch", f"{mode} {sizes}: the call raised {type(e).__name__} ({e}), the interpreter ran"
        except Exception as e:  # noqa: BLE001
            return "failure", f"call ({mode}, sizes {sizes}): {type(e).__name__}: {e}"
    if isinstance(want, TcError):
        return "mismatch", f"{mode} {sizes}: the call ran, the interpreter raised {type(want).__name__}: {want}"
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        if g.shape != w.shape or g.dtype != w.dtype:
            return "mismatch", f"{mode} {sizes}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        if not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-3, atol=1e-3, equal_nan=True):
            return "mismatch", f"{mode} {sizes}: values differ"
    return "works", ""


def fuzz_worker(seed: int, start: int, seconds: float, state: Path, results: Path, guarded: bool = False) -> None:
    testing.MAX_POINTS = 2_000_000  # a mutant the interpreter cannot run quickly is skipped
    defs = corpus_defs()
    end = time.time() + seconds
    i = start
    while time.time() < end:
        text = mutant(seed, i, defs)
        state.write_text(json.dumps({"index": i, "text": text}))
        outcome, detail = run_mutant(text, i, guarded=guarded)
        with results.open("a") as f:
            f.write(json.dumps({"index": i, "outcome": outcome, "detail": detail,
                                "text": text if outcome in ("failure", "mismatch") else ""}) + "\n")
        i += 1


def run_fuzzer(seconds: float, seed: int, at_least: int = 0, guarded: bool = False) -> list[dict]:
    """Mutants for ``seconds`` (and on until ``at_least`` of them ran, so that
    a loaded machine still checks the same first mutants of the seed), in
    worker processes; a worker that dies (a crash) or hangs is reported with
    the mutant it was running.  ``guarded``: inputs next to guard pages
    (``run_mutant``)."""
    with tempfile.TemporaryDirectory() as tmp:
        state, results = Path(tmp) / "state.json", Path(tmp) / "results.jsonl"
        results.touch()
        end = time.time() + seconds
        hard_end = end + 600  # at_least: at most ten more minutes
        start, records = 0, []

        def ran() -> list[int]:
            return [json.loads(line)["index"] for line in results.read_text().splitlines()] + \
                [r["index"] for r in records]

        while time.time() < end - 1:
            budget = max(1.0, end - time.time() - 6)  # the worker's import takes a few seconds
            cmd = [sys.executable, __file__, "--worker", "--seed", str(seed), "--start", str(start),
                   "--seconds", str(budget), "--state", str(state), "--results", str(results)] + \
                (["--guard"] if guarded else [])
            try:
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=budget + 120)
                code, err = proc.returncode, proc.stderr[-3000:]
            except subprocess.TimeoutExpired:
                code, err = "hang", "a mutant ran for more than 2 minutes"
            if code == 0:
                if len(ran()) >= at_least or time.time() > hard_end:
                    break
                start, end = max(ran() + [start - 1]) + 1, time.time() + 30  # the mutants after those that ran
                continue
            last = json.loads(state.read_text()) if state.exists() else {"index": start, "text": "?"}
            records.append({"index": last["index"], "outcome": "failure", "text": last["text"],
                            "detail": f"worker died ({code}): {err}"})
            start = last["index"] + 1
        records += [json.loads(line) for line in results.read_text().splitlines()]
    return records


def _report(records: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))


# Mutants that once let a non-TcError out (or crashed), kept as regression rows:
# (what went wrong, the mutant).  Each must now work or raise TcError, and
# agree with the interpreter when it runs.
REGRESSIONS = [
    ("TVM: binding of variable rmod conflicts (floor remainder in an unrolled register tile)",
     "def fuzz(int32(K, M, K) X0) -> (O1) {\n  O1(i, j, l) max=! ((X0(i, j, l)) * (X0(k, j, i))) + (j % -2)\n}\n"),
    ("TVM: binding of variable s conflicts (a Let of a signed-to-unsigned cast, repeated by a guarded division)",
     "def fuzz(uint32(N) X0) -> (O1) {\n  O1(i) += ((X0(i)) + (X0(k))) + (X0(0)) where i in 1:N\n"
     "  O1(i) = O1(i) * 1 + X0(i) where i in 1:N\n  T2(i) = (X0(i)) + ((uint32(i) / O1(i)))\n}\n"),
    ("TVM: cannot make uint from negative value -1 (a negative constant into uint32)",
     "def f(uint32(N) X) -> (O) { O(i) = X(i) * min(-1, 3) }"),
    ("TVM: literal 4294967296 exceeds range of int32 (constants folded across a wrapping product)",
     "def f(int32(N) A) -> (B) { B(i) = (A(i) * 65536 * 65536) == 0 ? 1 : 0 }"),
    ("InternalError: unknown intrinsic tirx.cosh (no vector lowering on llvm)",
     "def f(float(N) A) -> (B) { B(i) = cosh(A(i)) + sinh(A(i)) }"),
    ("IndentationError from the generated fast call (a def without outputs)",
     "def f(float(N) a) -> () { c(i) = a(i) }"),
    ("TVM: literal 99999999999 exceeds range of int32 (a where bound)",
     "def test_type_uint64(uint64(N) A) -> (B) { B(k) +=! A(i) where k in 0:99999999999 }"),
    ("TVM: literal 18446744073709551616 exceeds range of int32 (an index)",
     "def f(float(B, C, R) Data, float(C) W) -> (O) {\n  O(b, c, r) += Data(b, c, 18446744073709551616) * W(c)\n}"),
    ("TVM: literal 1e+308 exceeds maximum of float16", "def scale_half(half(N) A) -> (B) {\n  B(i) = A(i) * 1e308\n}"),
    ("TVM: literal 1e+308 exceeds maximum of float32 (in a ?: under +=!)",
     "def f(float(K, L) A) -> (P) {\n  P(k, l) +=! (l >= r) ? 0.0 : (A(k, r) > 0.0) ? 1e308 : 0.0 where r in 0:L\n}"),
    ("TVM: literal 300 exceeds range of int8", "def f(int8(N) A) -> (B) { B(i) = A(i) + 300 }"),
    ("OverflowError: int32(1e999)", "def f(float(N) A) -> (B) { B(i) = int32(1e999) + A(i) }"),
    ("TVM: literal 9223372036854775806 exceeds range of int32 (a constant size)",
     "def f(float(9223372036854775807, I) W, float(I) x) -> (y) { y(g) +=! W(g, i) * x(i) }"),
    ("TVM: bool arithmetic (now int32, as in C)",
     "def f(bool(N) A, bool(N) B) -> (Q, R, S) {\n  Q(i) = A(i) + B(i) * 2\n  R(i) = -A(i) / B(i)\n"
     "  S(i) = min(A(i), B(i)) % 2\n}"),
    ("TVM: cannot make uint from negative value -1 (unary minus of an unsigned value)",
     "def f(uint32(N) A, uint8(N) B) -> (Q, R) {\n  Q(i) = -A(i) + (0 - A(i))\n  R(i) = -(B(i) - 9)\n}"),
    ("TVM: cannot make uint from negative value -1 (its simplifier pushed uint32(-i) inside)",
     "def fuzz(uint32(K) X0) -> (O1) {\n  O1(i) = (X0(i)) + (-(i)) where i in 0:K\n"
     "  O1(i) = O1(i) * 2 + X0(i) where i in 0:K\n}"),
    ("TVM: a zero reinterpret shortcut requires pointer result type (uint32(j) with j == 0)",
     "def fuzz(uint32(M, N) X0, uint32(N, M, N) X1) -> (O2) {\n"
     "  T1(i, j, l) = X1(i, j, l) - max(min(X1(l, j, l), uint32(j)), uint32(i) / 3) % (-X1(l, j, l) * (3 / X1(l, j, l)))\n"
     "  O2(l, j, i) min= T1(i, j, l) * X1(i, k, i) * min((j - T1(l, j, i)) / 3, l % 3)\n}"),
    ("TVM: Mismatched O.strides (the extent 2147483646 * KW overflowed int32 in the kernel)",
     "def f(float(N, H, W) I, float(KH, KW) W1) -> (O) {\n"
     "  O(n, h, w) +=! I(n, h + kh, 2147483647 * w + kw) * W1(kh, kw)\n}"),
    ("TVM: literal 2147483648 exceeds range of int32 (floor division by the constant INT_MIN)",
     "def divmod_const(int32(N) a) -> (q, r) {\n  q(i) = a(i) / -2147483648\n  r(i) = a(i) % -2147483648\n}"),
    ("TVM folded x == -2147483648 on int32 to false",
     "def f(int32(N) a) -> (q, r) {\n  q(i) = a(i) == -2147483648\n  r(i) = a(i) <= -2147483648 ? 1 : 2\n}"),
    ("TVM: literal 2147483648 exceeds range of int32 (an isl AST guard combining constants)",
     "def g(float(T, B) x) -> (y) {\n  for t in T {\n    if t == 0 { y(t, b) = x(t, b) }\n"
     "    else if t < 3 && t != 1 { y(t, b) = 0.5 * y(t-1, b) }\n"
     "    else if t >= T - 2147483647 || t == 1 { y(t, b) = y(t-1, b) - x(t, b) }\n"
     "    else { y(t, b) = fmin(y(t-1, b), x(t, b)) }\n  }\n}"),
    ("hang: an output of 2**31 - 1 elements (8 GB) in the interpreter",
     "def e15_ge(float a, float b) -> (c) { c(i) = float(a >= - b) where i in 0:2147483647 }"),
    ("TVM: literal exceeds range of int32 (a constant output size)",
     "def f(float(N) x) -> (float(4294967296) y) { y(i) = x(i) }"),
]


# Found by longer fuzzing runs and not fixed yet, in code outside the fuzzer's
# reach (runtime/fastcall.py): each moves to REGRESSIONS once it passes.
PENDING: list[tuple[str, str]] = []


@pytest.mark.slow
@pytest.mark.parametrize("text", [r[1] for r in PENDING], ids=[r[0][:50] for r in PENDING])
def test_pending_mutants(text):
    for mode in MODES:
        outcome, detail = run_mutant(text, mode=mode, size=2)
        assert outcome in ("works", "rejected", "skipped"), detail


@pytest.mark.parametrize("text", [r[1] for r in REGRESSIONS], ids=[r[0][:50] for r in REGRESSIONS])
def test_regression_mutants(text):
    for mode in MODES:
        for size in (1, 2, None):
            outcome, detail = run_mutant(text, mode=mode, size=size)
            assert outcome in ("works", "rejected", "skipped"), detail


def _fuzz_seed(default: int) -> int:
    """``TCDSL_FUZZ_SEED`` replays (or explores) another sequence of mutants;
    the default is fixed, so that a run in CI is reproducible."""
    return int(os.environ.get("TCDSL_FUZZ_SEED", default))


def _check_records(records: list[dict], seed: int) -> None:
    bad = [r for r in records if r["outcome"] in ("failure", "mismatch")]
    print(f"seed {seed}: {_report(records)}")
    assert not bad, (f"{len(bad)} mutants failed or disagreed with the interpreter ({_report(records)}); "
                     f"replay with TCDSL_FUZZ_SEED={seed} or `python tests/test_fuzz.py --seed {seed} "
                     f"--mismatches`; first (mutant {bad[0]['index']}, {bad[0]['outcome']}):\n"
                     f"{bad[0]['detail']}\n--- source:\n{bad[0]['text']}")


def test_mutated_corpus_runs_or_raises_tc_errors():
    seed = _fuzz_seed(0)
    # at least the seed's first 30 mutants (seed 0: mutants 4, 10 and 26 of them run; a loaded
    # machine that ran 22 in the 15 s found 2 and failed)
    records = run_fuzzer(float(os.environ.get("TCDSL_FUZZ_SECONDS", 15)), seed=seed, at_least=30)
    assert len(records) > 10, f"seed {seed}: {_report(records)}"
    assert sum(r["outcome"] == "works" for r in records) >= 3, f"seed {seed}: {_report(records)}"
    _check_records(records, seed)


@pytest.mark.slow
def test_mutated_corpus_long():
    seed = _fuzz_seed(1)
    _check_records(run_fuzzer(float(os.environ.get("TCDSL_FUZZ_LONG_SECONDS", 600)), seed=seed, guarded=True), seed)


def main(argv: list[str]) -> int:
    """``python tests/test_fuzz.py [--seconds S] [--seed N]``: fuzz, print what failed."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--state", type=Path)
    ap.add_argument("--results", type=Path)
    ap.add_argument("--guard", action="store_true", help="inputs next to guard pages (tests/guard.py)")
    ap.add_argument("--mismatches", action="store_true", help="(kept for old command lines: mismatches always print)")
    args = ap.parse_args(argv)
    if args.worker:
        fuzz_worker(args.seed, args.start, args.seconds, args.state, args.results, args.guard)
        return 0
    records = run_fuzzer(args.seconds, args.seed, guarded=args.guard)
    shown = ("failure", "mismatch")
    for r in records:
        if r["outcome"] in shown:
            print(f"=== mutant {r['index']}: {r['outcome']}: {r['detail']}\n{r['text']}")
    print(_report(records))
    return 1 if any(r["outcome"] in ("failure", "mismatch") for r in records) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
