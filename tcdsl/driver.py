"""The pipeline, top to bottom.

    parse -> check -> infer_ranges -> build_model -> schedule -> build_ast -> lower_to_tir -> build

``frontend`` runs the size-independent stages once.  ``backend`` runs the
rest for one set of fixed sizes; the three ``specialize`` modes are three
orders of the same calls:

* ``never``:             schedule(symbolic) -> ast(symbolic) -> tir -> build       (once)
* ``after-scheduling``:  schedule(symbolic) once; per size tuple: ast(fixed) -> tir -> build
* ``before-scheduling``: per size tuple: schedule(fixed) -> ast(fixed) -> tir -> build

``STAGES`` is the table behind ``tcdsl compile --emit``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import islpy as isl

from .errors import InternalError, TcError
from .source import Source
from .syntax import nodes as n
from .syntax.parse import parse
from .syntax.printer import to_sexpr
from .sema.check import CheckedDef, check, select_def
from .sema.ranges import RangeInfo, infer_ranges
from .polyhedral.model import Model, build_model
from .polyhedral.bounds import check_bounds
from .polyhedral.schedule import build_ast, dump_schedules, schedule
from .codegen import checks  # also registers checked mode's callback for kernels from the disk cache

SPECIALIZE_MODES = ("never", "after-scheduling", "before-scheduling", "auto")


@dataclass
class Frontend:
    source: Source
    program: n.Program
    checked: CheckedDef
    ranges: RangeInfo
    model: Model

    @property
    def name(self) -> str:
        return self.checked.node.name


def frontend(source: Source, entry: str | None = None, *, strict_bounds: bool = False,
             hoist: bool = True) -> Frontend:
    """parse -> check -> infer_ranges -> build_model -> check_bounds (a warning
    for each read that may be out of bounds; an error when ``strict_bounds``)
    -> hoisting of loop-invariant statements (polyhedral/hoist.py), unless
    ``hoist`` is False."""
    program = parse(source)
    checked = check(program, entry)
    _dump("ast", lambda: to_sexpr(checked.node))
    ranges = infer_ranges(checked, isl.Context())
    _dump("ranges", ranges.dump)
    model = build_model(ranges)
    check_bounds(model, strict=strict_bounds)
    if hoist:
        checked, ranges, model = _hoisted(program, entry, checked, ranges, model)
    return Frontend(source, program, checked, ranges, model)


def frontend_with(source: Source, entry: str | None, options: dict | None) -> Frontend:
    """``frontend`` with the options that concern it: ``strict_bounds`` and
    ``hoist`` (see tcdsl.MappingOptions)."""
    options = options or {}
    hoist = options.get("hoist", True)
    if not isinstance(hoist, bool):
        raise TcError(f"options: 'hoist' must be True or False, got {hoist!r}")
    return frontend(source, entry, strict_bounds=bool(options.get("strict_bounds")), hoist=hoist)


def _hoisted(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model):
    """The program with its loop-invariant statements before their loops,
    checked and inferred again; the original when there are none, or when
    the rewritten program does not run exactly the same instances (see
    hoist.same_domains) -- a safety net, not an expected outcome."""
    import warnings

    from .polyhedral import hoist

    try:
        plan = hoist.plan(model)
        if not plan:
            return checked, ranges, model
        new_def = hoist.rewrite(select_def(program, entry), plan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the original program's warnings were given
            new_checked = check(n.Program((new_def,)), new_def.name)
            new_ranges = infer_ranges(new_checked, ranges.ctx)
            if not hoist.same_domains(ranges, new_ranges, plan):
                return checked, ranges, model
            new_model = build_model(new_ranges)
    except (TcError, InternalError, isl.Error) as e:  # the original program is valid and stays
        _dump("hoisted", lambda: f"not hoisted: {type(e).__name__}: {e}")
        return checked, ranges, model
    for k in new_model.kernels():
        k.serialize = all(s.info.comp.span in plan.ranges for s in k.stmts)
    _dump("hoisted", lambda: to_sexpr(new_checked.node))
    return new_checked, new_ranges, new_model


@dataclass
class Backend:
    schedules: dict[int, isl.Schedule]
    asts: dict[int, isl.AstNode]
    func: object  # tvm.tirx.PrimFunc
    signature: object  # codegen.tir.Signature
    fixed: dict[str, int]

    def ast_text(self) -> str:
        return "\n".join(a.to_C_str() for a in self.asts.values())


def backend(fe: Frontend, fixed: dict[str, int] | None = None, *, schedules=None,
            target_kind: str = "llvm", options: dict | None = None) -> Backend:
    """schedule (unless given) -> build_ast -> lower_to_tir, for sizes ``fixed``."""
    from .codegen.tir import lower_to_tir

    fixed = dict(fixed or {})
    if schedules is None:
        schedules = schedule_for(fe.model, fixed, target_kind)
    _dump("schedule", lambda: dump_schedules(fe.model, schedules))
    asts = build_ast(fe.model, schedules, fixed)
    checked, options = checks.codegen_options(options, target_kind)
    with checks.checking(checked):
        func, sig = lower_to_tir(fe.model, asts, fe.name, fixed, target_kind, options)
    _dump("tir", func.script)
    return Backend(schedules, asts, func, sig, fixed)


def schedule_for(model: Model, fixed: dict[str, int] | None, target_kind: str = "llvm") -> dict[int, isl.Schedule]:
    """The isl schedules for a target: CUDA has its own (codegen/cuda.py)."""
    if target_kind == "cuda":
        from .codegen import cuda

        return cuda.schedule(model, fixed)
    return schedule(model, fixed)


def _dump(stage: str, text: Callable[[], str]) -> None:
    """``TCDSL_DUMP=ranges,schedule,tir`` prints those stages to stderr."""
    wanted = os.environ.get("TCDSL_DUMP", "")
    if stage in wanted.split(","):
        import sys

        print(f"--- {stage}", file=sys.stderr)
        print(text(), file=sys.stderr)


# The --emit table: stage name -> text of that stage for a compiled kernel.
# ``sizes`` (every size of the def) asks for the stage as the kernel's
# specialize mode makes it for those sizes: before-scheduling schedules them,
# after-scheduling schedules symbolically and builds the AST, TIR and code for
# them.  None: the symbolic (or compile-time ``sizes=``) version.
STAGES: dict[str, Callable] = {
    "ast": lambda k, sizes=None: to_sexpr(k.frontend.checked.node) + "\n",
    "ranges": lambda k, sizes=None: k.frontend.ranges.dump(),
    "schedule": lambda k, sizes=None: dump_schedules(k.frontend.model, k.backend(sizes).schedules),
    "isl-ast": lambda k, sizes=None: k.backend(sizes).ast_text(),
    "tir": lambda k, sizes=None: k.script if sizes is None else k.backend(sizes).func.script(),
    "llvm": lambda k, sizes=None: k.source_code("ll", sizes),
    "c": lambda k, sizes=None: _c_source(k, sizes),
    "cuda": lambda k, sizes=None: k.source_code("cuda", sizes),
}


def _c_source(kernel, sizes: dict[str, int] | None) -> str:
    """The kernel's TIR through TVM's C code generator (codegen/csource.py);
    the binary that runs is LLVM's."""
    from .codegen import targets
    from .codegen.csource import c_source

    if targets.target_kind(kernel.target) != "llvm":
        raise TcError("C source needs target='llvm' (for 'cuda', see --emit cuda)")
    return c_source(kernel.ir_module if sizes is None else kernel.backend(sizes).func)


def emit(kernel, stage: str, sizes: dict[str, int] | None = None) -> str:
    """The text of ``stage`` for ``kernel``; with ``sizes``, specialised for
    them as the kernel's mode does (see ``STAGES``)."""
    if stage not in STAGES:
        raise TcError(f"unknown stage '{stage}'; choose one of {', '.join(STAGES)}")
    return STAGES[stage](kernel, sizes)
