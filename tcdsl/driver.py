"""The pipeline, top to bottom.

    frontend:  parse -> check -> infer_ranges -> build_model -> check_bounds -> circular -> chain -> hoist -> gather -> pad -> inplace
               -> factor -> transpose
    backend:   split selects -> schedule for the target -> fold plan -> build_ast -> lower_to_tir -> build

:func:`frontend` runs the size-independent stages once per ``compile()``.
The rest runs for one set of fixed sizes (none: all symbolic); the
``specialize`` modes are three orders of the same stages, one function each:

* :func:`never`:             schedule(symbolic) -> fold plan -> ast(symbolic) -> tir         (once)
* :func:`after_scheduling`:  schedule(symbolic) once; per size tuple: fold plan -> ast(fixed) -> tir
* :func:`before_scheduling`: per size tuple: schedule(fixed) -> fold plan -> ast(fixed) -> tir

and :func:`build` makes the binary.  Every order schedules and lowers
:func:`model_for` the schedule options: the frontend's model, its statements
split at their selects' affine conditions unless ``split_selects`` is off
(polyhedral/split.py).  Every stage is a function of the
previous stage's value (and of its own options record, tcdsl/options.py).
Each target schedules and lowers in its own way (:func:`target`: the CPU's
schedule and ``codegen/cpu.py``, the GPU's schedule and ``codegen/cuda.py``);
``dispatch.py`` decides which order runs when, and keeps the binaries.

``STAGES`` is the table behind ``tcdsl compile --emit``.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import Callable

import islpy as isl

from .errors import InternalError, TcError
from .options import FrontendOptions, LoweringOptions, Options, ScheduleOptions, parse as parse_options
from .source import Source
from .syntax import nodes as n
from .syntax.parse import parse
from .syntax.printer import to_sexpr
from .sema.check import CheckedDef, check, select_def
from .sema.ranges import RangeInfo, infer_ranges, same_output_shapes
from .sema.terms import warn_partial_sums
from .polyhedral.model import Model, build_model
from .polyhedral.bounds import check_bounds
from .polyhedral.narrowing import check_narrowing
from .polyhedral.contract import Fold, plan_folds
from .polyhedral.isl_ast import build_ast
from .polyhedral.schedule import dump_schedules

SPECIALIZE_MODES = ("never", "after-scheduling", "before-scheduling", "auto")


@dataclass
class Frontend:
    source: Source
    program: n.Program
    checked: CheckedDef
    ranges: RangeInfo
    model: Model
    _split: Model | None = dataclasses.field(default=None, repr=False, compare=False)
    # the ranges ``--emit ranges`` prints: the program's, hoisted and padded
    # as the options say, before its layouts are changed (permute.py,
    # layout.py: copies and temporaries of the code generator's choosing)
    written: RangeInfo | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.checked.node.name


def model_for(fe: Frontend, options: ScheduleOptions) -> Model:
    """The model the size-dependent stages schedule and lower: ``fe.model``
    with its statements split at their selects' affine conditions
    (polyhedral/split.py) when ``split_selects`` is on; made once per frontend."""
    if not options.split_selects:
        return fe.model
    if fe._split is None:
        from .polyhedral.split import split_model

        fe._split = split_model(fe.model)
        _dump("split", lambda: dump_split(fe._split))
    return fe._split


def dump_split(model: Model) -> str:
    """Each kernel's statements with their domains and right-hand sides."""
    from .syntax.printer import expr_to_tc

    lines = []
    for i, k in enumerate(model.kernels()):
        for st in k.stmts:
            rhs = "init" if st.is_init else expr_to_tc(st.info.comp.rhs)
            lines.append(f"# kernel {i}: {st.name} {st.domain}: {rhs}")
    return "\n".join(lines)


def frontend(source: Source, entry: str | None = None, options: FrontendOptions | None = None,
             target_kind: str = "llvm", fixed: dict[str, int] | None = None, specialize: str = "never",
             **fields) -> Frontend:
    """parse -> check -> infer_ranges -> build_model -> check_bounds (a warning for each read that may be
    out of bounds; an error when ``strict_bounds``) -> one-hot temporaries into their sums (onehot.py), sums
    over a variable one term selects read that term (pick.py), unless ``gather`` is False -> states kept step first (stepsfirst.py),
    arg-reductions over columns (argsplit.py), unless ``transpose`` is False -> hoisting of
    loop-invariant statements (polyhedral/hoist.py), unless ``hoist`` is False -> zero-padded copies of
    inputs read under a padding select (polyhedral/pad.py), unless ``pad`` is False -> temporaries
    computed in the output they end in (polyhedral/inplace.py), unless ``inplace`` is False -> a sum's
    invariant factors applied after it (polyhedral/factor.py), unless ``factor`` is False -> transposed
    copies of inputs read across their contiguous dimension in a loop (polyhedral/layout.py), unless
    ``transpose`` is False.  ``fields`` (``strict_bounds=``, ``hoist=``, ``pad=``, ``inplace=``,
    ``factor=``, ``transpose=``) change ``options``.  ``hoist`` ``"auto"`` on the CPU (``target_kind``
    "llvm") keeps both programs, the hoisted one for steps of few rows (:func:`rows_threshold`), or the
    one of them that the sizes ``fixed`` at compile time choose; on a GPU, and for the binaries of the
    ``specialize`` modes other than "never" (each built for its sizes, from a schedule of the hoisted
    program), it hoists."""
    options = dataclasses.replace(options or FrontendOptions(), **fields)
    strict_bounds, hoist = options.strict_bounds, options.hoist
    program = parse(source)
    checked = check(program, entry)
    warn_partial_sums(checked.node.body)
    _dump("ast", lambda: to_sexpr(checked.node))
    ranges = infer_ranges(checked, isl.Context())
    _dump("ranges", ranges.dump)
    model = build_model(ranges)
    check_bounds(model, strict=strict_bounds)
    check_narrowing(model)
    rewritten, serial = n.inline_lets(program), frozenset()
    if options.gather:  # (one-hot temporaries inlined into their sums, then picked or scattered)
        rewritten, checked, ranges, model = _by("inlined", "onehot")(rewritten, entry, checked, ranges, model)
        rewritten, checked, ranges, model = _by("picked", "pick")(rewritten, entry, checked, ranges, model)
    if options.circular:
        rewritten, checked, ranges, model = _circular(rewritten, entry, checked, ranges, model)
    if options.chain:
        rewritten, checked, ranges, model = _chained(rewritten, entry, checked, ranges, model)
    for stage, module in ((("per head", "heads"), ("grouped", "groups")) if options.chain else ()) + (
            (("steps first", "stepsfirst"), ("argsplit", "argsplit")) if options.transpose else ()):
        rewritten, checked, ranges, model = _by(stage, module)(rewritten, entry, checked, ranges, model)
    if hoist:
        threshold = rows_threshold() if hoist == "auto" and target_kind == "llvm" and specialize == "never" \
            else None
        rewritten, checked, ranges, model, serial = _hoisted(rewritten, entry, checked, ranges, model, threshold,
                                                             fixed or {})
    if options.gather:
        rewritten, checked, ranges, model = _gathered(rewritten, entry, checked, ranges, model)
    if options.parity:
        rewritten, checked, ranges, model = _parity(rewritten, entry, checked, ranges, model)
    pads = frozenset()
    if options.pad:
        rewritten, checked, ranges, model, pads = _padded(rewritten, entry, checked, ranges, model)
    if options.inplace:
        rewritten, checked, ranges, model = _by("inplace", "inplace")(rewritten, entry, checked, ranges, model)
    if options.factor:
        rewritten, checked, ranges, model = _by("factored", "factor")(rewritten, entry, checked, ranges, model)
        rewritten, checked, ranges, model = _by("started", "addend")(rewritten, entry, checked, ranges, model)
        rewritten, checked, ranges, model = _by("tabled", "tables")(rewritten, entry, checked, ranges, model)
    written = ranges
    if options.transpose:
        rewritten, checked, ranges, model = _permuted(rewritten, entry, checked, ranges, model, fixed or {})
        checked, ranges, model = _transposed(rewritten, entry, checked, ranges, model, serial)
    for k in model.kernels():  # a padded copy in a nest of its own, not fused into the reduction's loops
        if pads & {s.info.comp.span for s in k.stmts}:
            k.serialize = True
    return Frontend(source, program, checked, ranges, model, written=written)


def _by(stage: str, module: str) -> Callable:
    """A stage that rewrites the program by ``polyhedral/<module>.py``'s
    ``rewrite(def, plan(checked, ranges))``, kept where the module's
    ``kept(old ranges, new ranges, new model, plan)`` (if it has one) holds;
    see :func:`_rewritten`: the sums over groups of contiguous elements
    summed per element first (groups.py), each temporary that ends in an
    output of its shape computed in that output (inplace.py), each sum's
    factors that do not depend on its reduction variables applied once after
    it (factor.py), each sum started from the term added right after it
    (addend.py), the costly terms that do not depend on every index of their
    statement computed once, in tables (tables.py)."""
    import importlib

    mod = importlib.import_module(f".polyhedral.{module}", __package__)

    def run(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model):
        out = _rewritten(stage, program, entry, checked, ranges, model, lambda: mod.plan(checked, ranges),
                         mod.rewrite)
        keep = getattr(mod, "kept", None)
        if out[4] is not None and keep is not None and not keep(ranges, out[2], out[3], out[4]):
            return program, checked, ranges, model
        return out[:4]
    return run


def _chained(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model):
    """The program computing each sum of a product of three or more factors
    as a chain of two sums with fewer loops (polyhedral/chain.py), repeated
    while a sum splits further (three times at most); a rewrite is kept only
    when the new sums run exactly the original's terms and every read stays in
    its tensor."""
    import warnings

    from .polyhedral import chain

    for _ in range(3):
        try:
            plan = chain.plan(checked, ranges, model)
            if not plan:
                break
            new_def = chain.rewrite(select_def(program, entry), plan)
            new_checked, new_ranges, new_model = _checked_again(new_def, ranges)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                safe = chain.exact(ranges, new_ranges, plan) and not check_bounds(new_model)
            new_ranges.size_guards = ranges.size_guards  # (check_bounds found none and set them to none)
        except (TcError, InternalError, isl.Error) as e:
            _dump("chained", lambda: f"not chained: {type(e).__name__}: {e}")
            break
        if not safe:
            _dump("chained", lambda: "not chained: the two sums would not run the same terms")
            break
        program, checked, ranges, model = n.Program((new_def,)), new_checked, new_ranges, new_model
        _dump("chained", lambda: to_sexpr(checked.node))
    return program, checked, ranges, model


def _circular(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model):
    """The program reading through the cases of each ``e % S`` by a size (polyhedral/circular.py)."""
    from .polyhedral import circular

    out = _rewritten("circular", program, entry, checked, ranges, model, lambda: circular.plan(checked, model),
                     lambda d, p: circular.rewrite(d, p, circular.pins(p, model)))
    if out[4] is not None and not circular.same_domains(model, out[3]):
        _dump("circular", lambda: "not circular: a statement's domain would change")
        return program, checked, ranges, model
    return out[:4]


def _gathered(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model):
    """The program reading once-gathered copies of its sums' reads through an
    index (polyhedral/gather.py), kept only when every statement runs the
    instances it ran and every copy is read within its bounds; see
    :func:`_rewritten`."""
    import warnings

    from .polyhedral import gather

    out = _rewritten("gathered", program, entry, checked, ranges, model, lambda: gather.plan(checked, ranges), gather.rewrite)
    if out[4] is None:
        return out[:4]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            safe = gather.same_domains(ranges, out[2]) and not check_bounds(out[3])
    except TcError:
        safe = False
    if not safe:
        return program, checked, ranges, model
    out[2].size_guards = ranges.size_guards  # (check_bounds found none and set them to none)
    return out[:4]


def _permuted(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model,
              fixed: dict[str, int]):
    """The program computing each sum whose last indices are short (at the
    sizes ``fixed`` at compile time, or at run time) in a temporary with them
    first (polyhedral/permute.py); see :func:`_rewritten`."""
    from .polyhedral import permute

    return _rewritten("permuted", program, entry, checked, ranges, model, lambda: permute.plan(model, ranges, fixed),
                      permute.rewrite)[:4]


def _parity(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model):
    """The program summing each transposed convolution by its outputs'
    remainders (polyhedral/parity.py); see :func:`_rewritten`."""
    from .polyhedral import parity

    return _rewritten("parity", program, entry, checked, ranges, model, lambda: parity.plan(model),
                      parity.rewrite)[:4]


def _padded(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model):
    """The program reading zero-padded copies of the inputs it reads under a
    padding select (polyhedral/pad.py), and the copies' spans; see
    :func:`_rewritten`."""
    from .polyhedral import pad

    *out, plan = _rewritten("padded", program, entry, checked, ranges, model, lambda: pad.plan(model), pad.rewrite)
    return (*out, frozenset(plan.spans) if plan else frozenset())


def _rewritten(stage: str, program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo,
               model: Model, make_plan: Callable, rewrite: Callable):
    """(program, checked, ranges, model, plan): ``program`` rewritten by
    ``rewrite(def, plan)``, checked and inferred again, its kernels keeping
    ``Kernel.serialize`` where they hold a statement of a serialized kernel
    (the hoisted ones); the original with a None plan when ``make_plan()``
    finds nothing, or when the rewritten program fails a check (a safety
    net, not an expected outcome)."""
    try:
        plan = make_plan()
        if not plan:
            return program, checked, ranges, model, None
        new_def = rewrite(select_def(program, entry), plan)
        new_checked, new_ranges, new_model = _checked_again(new_def, ranges)
    except (TcError, InternalError, isl.Error) as e:
        _dump(stage, lambda: f"not {stage}: {type(e).__name__}: {e}")
        return program, checked, ranges, model, None
    serial = {s.info.comp.span for k in model.kernels() if k.serialize for s in k.stmts}
    for k in new_model.kernels():
        k.serialize = bool(serial & {s.info.comp.span for s in k.stmts})
    _dump(stage, lambda: to_sexpr(new_checked.node))
    return n.Program((new_def,)), new_checked, new_ranges, new_model, plan


def _checked_again(new_def: n.Def, ranges: RangeInfo):
    """check -> infer_ranges -> build_model of a rewritten ``def`` (no warnings, the original gave them), refused
    (InternalError) where an output's shape changed; the original's size guards."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new_checked = check(n.Program((new_def,)), new_def.name)
        new_ranges = infer_ranges(new_checked, ranges.ctx)
        same_output_shapes(ranges, new_ranges)
        new_model = build_model(new_ranges)
    new_ranges.size_guards = ranges.size_guards
    new_ranges.padded_rows = ranges.padded_rows
    return new_checked, new_ranges, new_model


def _transposed(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model,
                serial: frozenset = frozenset()):
    """The program reading transposed copies of the inputs it reads across
    their contiguous dimension (polyhedral/layout.py), checked and inferred
    again; the original when there are none, or when the rewritten program
    fails a check (a safety net, not an expected outcome).  ``serial``: the
    spans of the hoisted statements; a kernel of those and the copies runs
    one statement after the other (``Kernel.serialize``)."""
    from .polyhedral import layout

    plan = layout.plan(checked)
    if not plan:
        return checked, ranges, model
    try:
        new_def = layout.rewrite(select_def(program, entry), plan)
        new_checked, new_ranges, new_model = _checked_again(new_def, ranges)
    except (TcError, InternalError, isl.Error) as e:
        _dump("transposed", lambda: f"not transposed: {type(e).__name__}: {e}")
        return checked, ranges, model
    copies = {span for _, span in plan.copies.values()}
    new_ranges.padded_rows = ranges.padded_rows | {name for name, _ in plan.copies.values()}
    for k in new_model.kernels():  # a copy fused with the statements after it would run in their loop order
        spans = {s.info.comp.span for s in k.stmts}
        k.serialize = spans <= serial | copies or bool(spans & copies)
    _dump("transposed", lambda: to_sexpr(new_checked.node))
    return new_checked, new_ranges, new_model


def rows_threshold() -> int:
    """The rows per step from which a step's own projection is as fast as the
    hoisted one (polyhedral/hoist.py, ``by_rows``): a full register tile of a
    kernel inside a loop for every thread."""
    from . import host
    from .options import host_defaults

    return host.threads() * host_defaults(in_loop=True)["tile_rows"]


def _hoisted(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model,
             threshold: int | None = None, fixed: dict[str, int] | None = None):
    """The program with its loop-invariant statements before their loops,
    checked and inferred again; the original when there are none, or when
    the rewritten program does not run exactly the same instances (see
    hoist.same_domains) -- a safety net, not an expected outcome.  First a
    ``+=`` of loop-invariant products onto a tensor the loop computes is
    split so that its sum can be hoisted (polyhedral/accumulate.py): kept
    when hoisting then moves every such sum out of its loop.  ``threshold``:
    the hoisted program only for steps of fewer rows than this
    (``hoist.by_rows``; None: always), decided now when the sizes ``fixed``
    at compile time give the rows."""
    from .polyhedral import accumulate

    try:
        pre = accumulate.split(program, entry, checked, ranges)
    except (TcError, InternalError, isl.Error) as e:  # the original program is valid and stays
        _dump("hoisted", lambda: f"not split: {type(e).__name__}: {e}")
        pre = None
    if pre is not None:
        program2, checked2, ranges2, spans = pre
        out = _hoist(program2, entry, checked2, ranges2, build_model(ranges2), spans, threshold, program, fixed)
        if out is not None:
            return out or (program, checked, ranges, model, frozenset())
    return _hoist(program, entry, checked, ranges, model, threshold=threshold, fixed=fixed) \
        or (program, checked, ranges, model, frozenset())


def _hoist(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo, model: Model,
           required: frozenset = frozenset(), threshold: int | None = None, original: n.Program | None = None,
           fixed: dict[str, int] | None = None):
    """``_hoisted``'s rewrite of ``program``, or None when nothing (or not
    every statement of ``required``, by span) is hoisted; an empty tuple when
    the steps' rows are known and never fewer than ``threshold`` (hoisting
    would not pay).  With rows not known, both: ``original`` (default
    ``program``; the program before a split of its sums) for steps of many
    rows, the hoisted one for the others."""
    import warnings

    from .polyhedral import hoist

    try:
        plan = hoist.plan(model)
        if not plan or not required <= set(plan.ranges):
            return None
        new_def = hoist.rewrite(select_def(program, entry), plan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the original program's warnings were given
            new_checked = check(n.Program((new_def,)), new_def.name)
            new_ranges = infer_ranges(new_checked, ranges.ctx)
            if not hoist.same_domains(ranges, new_ranges, plan):
                return None
            new_model = build_model(new_ranges)
            new_ranges.size_guards = ranges.size_guards  # the same reads, over the sizes only
    except (TcError, InternalError, isl.Error) as e:  # the original program is valid and stays
        _dump("hoisted", lambda: f"not hoisted: {type(e).__name__}: {e}")
        return None
    rows = hoist.rows_per_step(ranges, plan, fixed) if threshold else None
    if isinstance(rows, n.Const):
        if rows.value >= threshold:
            _dump("hoisted", lambda: f"not hoisted: {rows.value} rows per step")
            return ()
    elif rows is not None:
        try:  # both programs, chosen by the rows at run time
            both = hoist.by_rows(select_def(original or program, entry), new_def, rows, threshold)
            both_checked, both_ranges, both_model = _checked_again(both, ranges)
            new_def, new_checked, new_ranges, new_model = both, both_checked, both_ranges, both_model
        except (TcError, InternalError, isl.Error) as e:  # the hoisted program stays
            _dump("hoisted", lambda: f"not chosen by rows: {type(e).__name__}: {e}")
    for k in new_model.kernels():
        k.serialize = all(s.info.comp.span in plan.ranges for s in k.stmts)
    _dump("hoisted", lambda: to_sexpr(new_checked.node))
    return n.Program((new_def,)), new_checked, new_ranges, new_model, frozenset(plan.ranges)


@dataclass
class Backend:
    """The size-dependent stages' values for the sizes ``fixed``."""

    schedules: dict[int, isl.Schedule]
    folds: dict[str, Fold]
    asts: dict[int, isl.AstNode]
    func: object  # tvm.tirx.PrimFunc
    signature: object  # codegen.lower.Signature
    fixed: dict[str, int]
    model: Model | None = None  # the model scheduled and lowered (model_for)

    def ast_text(self) -> str: return "\n".join(a.to_C_str() for a in self.asts.values())  # noqa: E704


# ----------------------------------------------------------- the orders
def never(fe: Frontend, fixed: dict[str, int], target_kind: str, options: Options) -> Backend:
    """The symbolic kernel (sizes ``fixed`` at compile time are constants)."""
    schedules = schedule_for(model_for(fe, options.schedule), fixed, target_kind, options.schedule)
    return _lower(fe, schedules, fixed, target_kind, options)


def after_scheduling(fe: Frontend, schedules: dict[int, isl.Schedule], sizes: dict[str, int], target_kind: str,
                     options: Options) -> Backend:
    """A kernel for ``sizes`` from the symbolic ``schedules`` (:func:`never`'s, with the same ``options.schedule``)."""
    return _lower(fe, schedules, sizes, target_kind, options)


def before_scheduling(fe: Frontend, sizes: dict[str, int], target_kind: str, options: Options) -> Backend:
    """A kernel for ``sizes``, scheduled with them substituted."""
    schedules = schedule_for(model_for(fe, options.schedule), sizes, target_kind, options.schedule)
    return _lower(fe, schedules, sizes, target_kind, options)


def _lower(fe: Frontend, schedules: dict[int, isl.Schedule], fixed: dict[str, int], target_kind: str,
           options: Options) -> Backend:
    """The stages after scheduling: fold plan -> build_ast -> lower_to_tir."""
    model = model_for(fe, options.schedule)
    folds = fold_plan(model, target_kind, options.lowering)
    asts = build_ast(model, schedules, fixed)
    func, sig = lower(model, asts, fe.name, fixed, folds, target_kind, options)
    return Backend(schedules, folds, asts, func, sig, fixed, model)


def backend(fe: Frontend, fixed: dict[str, int] | None = None, *, schedules=None, target_kind: str = "llvm",
            options: Options | dict | None = None) -> Backend:
    """:func:`before_scheduling` for the sizes ``fixed``, or :func:`after_scheduling` given their ``schedules``."""
    options, fixed = parse_options(options), dict(fixed or {})
    if schedules is None:
        return before_scheduling(fe, fixed, target_kind, options)
    return after_scheduling(fe, schedules, fixed, target_kind, options)


# ----------------------------------------------------------- the stages
@dataclass(frozen=True)
class Target:
    """How a target schedules (``schedule(model, fixed)``) and lowers (a
    ``codegen.lower.ProgramLowering``), and whether its temporaries fold."""

    schedule: Callable
    program: type
    folds: bool


@functools.cache
def target(kind: str) -> Target:
    """The target table: ``llvm`` (the CPU) and ``cuda``.  Built at first use:
    the code generators import TVM, which ``tcdsl check`` does not need."""
    from .codegen import cpu, cuda
    from .polyhedral import gpu_schedule, schedule

    # the CUDA generator's register promotion builds its own accesses: no folding there
    # schedule(model, fixed, ScheduleOptions): only the CPU's has a choice (fusion)
    table = {"llvm": Target(lambda m, f, o: schedule.schedule(m, f, o.fusion), cpu.CpuProgram, True),
             "cuda": Target(lambda m, f, o: gpu_schedule.schedule(m, f), cuda.CudaProgram, False)}
    if kind not in table:
        raise TcError(f"target '{kind}' is not supported; use 'llvm' or 'cuda'")
    return table[kind]


def schedule_for(model: Model, fixed: dict[str, int] | None, target_kind: str = "llvm",
                 options: ScheduleOptions | None = None) -> dict[int, isl.Schedule]:
    """The isl schedules for a target (polyhedral/schedule.py, gpu_schedule.py)."""
    schedules = target(target_kind).schedule(model, fixed, options or ScheduleOptions())
    _dump("schedule", lambda: dump_schedules(model, schedules))
    return schedules


def fold_plan(model: Model, target_kind: str, options: LoweringOptions) -> dict[str, Fold]:
    """The temporaries kept in a few slots (polyhedral/contract.py)."""
    return plan_folds(model) if options.fold and target(target_kind).folds else {}


def lower(model: Model, asts: dict[int, isl.AstNode], name: str, fixed: dict[str, int], folds: dict[str, Fold],
          target_kind: str, options: Options):
    """isl ASTs -> a TIR PrimFunc and its signature (codegen/lower.py, with the target's
    lowering; CPU: codegen/edges.py); checked mode guards the non-affine indices."""
    from .codegen import checks, edges, slots
    from .codegen.lower import lower_to_tir

    if options.lowering.checked and target_kind != "llvm":
        raise TcError(f"options: 'checked' is supported for target 'llvm' only, not '{target_kind}'")
    with checks.checking(options.lowering.checked):
        func, sig = lower_to_tir(model, asts, name, fixed, folds, target(target_kind).program, options)
    func = slots.select_loops(edges.versioned(func)) if target_kind == "llvm" and not options.lowering.checked else func
    _dump("tir", func.script)
    return func, sig


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
    "ranges": lambda k, sizes=None: (k.frontend.written or k.frontend.ranges).dump(),
    "schedule": lambda k, sizes=None: _schedule_text(k.backend(sizes)),
    "isl-ast": lambda k, sizes=None: k.backend(sizes).ast_text(),
    "tir": lambda k, sizes=None: k.script if sizes is None else k.backend(sizes).func.script(),
    "llvm": lambda k, sizes=None: k.source_code("ll", sizes),
    "c": lambda k, sizes=None: _c_source(k, sizes),
    "cuda": lambda k, sizes=None: k.source_code("cuda", sizes),
}


def _schedule_text(b: Backend) -> str:
    return dump_schedules(b.model, b.schedules)


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
