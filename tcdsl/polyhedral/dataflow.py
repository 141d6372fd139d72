"""Dataflow over the whole program: which outputs need no zero fill.

Outputs the kernel allocates start as zeros (SPEC 1.1).  When every element
of an output is written, and no read of it -- an update's ``+=``, a later
statement, the next step of a loop -- can see a value that no write produced,
the zeros are never seen: the runtime then allocates the output without
filling it, and may hand back the memory of an earlier call's output that
nobody holds any more (runtime/pool.py).  For a 32 MiB output that is the
difference between streaming it once and touching every page of fresh
memory first.

The whole program's schedule is the isl map of every statement instance to
``[item, t0, item, t1, ..., kernel's program order]``: the position of the
enclosing items in their blocks, interleaved with the enclosing loops'
variables (lifted from parameters to dimensions), then the order of the
statements within one step (Kernel.order).  A program with a branch around
loops (a :class:`Branch`) is not analysed: its outputs keep the zero fill.
"""
from __future__ import annotations

import islpy as isl

from ..sema.affine import NotAffine, isl_name, lift, params_prefix
from ..sema.check import dim_isl
from .model import Block, Branch, ForLoop, Kernel, Model, lift_param, maps


def overwritten_outputs(model: Model) -> frozenset[str]:
    """The outputs whose initial contents no read can see (see the module docstring)."""
    return overwritten(model, model.ranges.checked.outputs)


def overwritten(model: Model, tensors) -> frozenset[str]:
    """Those of ``tensors`` whose initial contents no read can see: outputs
    (above), and temporaries, which start as zeros too where a read could
    see them (codegen/lower.py fills those)."""
    program = program_schedule(model)
    if program is None:
        return frozenset()
    out = set()
    for tensor in tensors:
        try:
            if _overwritten(model, program, tensor):
                out.add(tensor)
        except (isl.Error, NotAffine):
            continue  # not analysable here: keep the zero fill
    return frozenset(out)


class Program:
    """The kernels of a program with their place in it, and the schedule of
    every statement instance (see the module docstring)."""

    def __init__(self, placed: list[tuple[Kernel, tuple[int, ...]]], unplaced: list[Kernel],
                 schedule: isl.UnionMap):
        self.placed = placed  # (kernel, positions of its enclosing items, its own last)
        self.unplaced = unplaced  # kernels under a branch around loops: not in the schedule
        self.schedule = schedule

    def accesses(self, tensor: str) -> tuple[isl.UnionMap | None, isl.UnionMap | None] | None:
        """(writes, reads) of ``tensor`` over the scheduled instances (reads
        include the may-reads of non-affine indices); None when a kernel
        under a branch accesses it."""
        name = isl_name(tensor)

        def touches(s) -> bool:
            return any(m.get_tuple_name(isl.dim_type.out) == name for m in s.writes + s.reads + s.may_reads)

        if any(touches(s) for k in self.unplaced for s in k.stmts):
            return None
        writes = reads = None
        for k, _ in self.placed:
            for s in k.stmts:
                for kind in ("writes", "reads", "may_reads"):
                    for m in getattr(s, kind):
                        if m.get_tuple_name(isl.dim_type.out) != name:
                            continue
                        lifted = _lift(m, k)
                        if lifted is None:
                            return None
                        um = isl.UnionMap.from_map(lifted)
                        if kind == "writes":
                            writes = um if writes is None else writes.union(um)
                        else:
                            reads = um if reads is None else reads.union(um)
        return writes, reads

    def statement_writes(self, name: str) -> isl.Set | None:
        """The elements statement ``name`` (an update, ``S3``) writes over all
        steps of its loops, as a set over the sizes; None when it is not
        scheduled here or its loops cannot be lifted."""
        for k, _ in self.placed:
            for s in k.stmts:
                if s.name == name and s.writes:
                    lifted = _lift(s.writes[0], k)
                    return None if lifted is None else lifted.range()
        return None

    def reads_have_sources(self, writes: isl.UnionMap | None, reads: isl.UnionMap | None) -> bool:
        """Every read instance reads a value some earlier write produced."""
        if reads is None:
            return True
        if writes is None:
            return False
        flow = (isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
                .set_schedule_map(self.schedule).compute_flow())
        return flow.get_may_no_source().is_empty()


def program_schedule(model: Model) -> Program | None:
    """The :class:`Program` of ``model``; None when it has no kernel, or a
    loop variable could not be lifted."""
    placed: list[tuple[Kernel, tuple[int, ...]]] = []
    unplaced: list[Kernel] = []

    def visit(b: Block, path: tuple[int, ...], under_branch: bool) -> None:
        for i, it in enumerate(b.items):
            if isinstance(it, Kernel):
                (unplaced.append(it) if under_branch else placed.append((it, path + (i,))))
            elif isinstance(it, ForLoop):
                visit(it.body, path + (i,), under_branch)
            elif isinstance(it, Branch):
                visit(it.then, path, True)
                visit(it.orelse, path, True)
    visit(model.body, (), False)
    sched = _schedule(placed)
    return None if sched is None else Program(placed, unplaced, sched)


def _lift(m: isl.Map, k: Kernel) -> isl.Map | None:
    """``m`` (over kernel ``k``'s parameters) with the enclosing loops'
    variables as its first input dimensions, outermost first."""
    m = m.intersect_params(k.context)
    for lp in reversed(k.loops):
        m = lift_param(m, isl_name(lp.var))
        if m is None:
            return None
    return m


def _schedule(placed) -> isl.UnionMap | None:
    parts = []
    for k, path in placed:
        depth = len(k.loops)
        for om in maps(k.order):
            m = _lift(om, k)
            if m is None:
                return None
            m = m.insert_dims(isl.dim_type.out, 0, 2 * depth + 1)
            for j in range(depth):
                m = m.equate(isl.dim_type.in_, j, isl.dim_type.out, 2 * j + 1)
            for j, p in enumerate(path):
                m = m.fix_val(isl.dim_type.out, 2 * j, isl.Val.int_from_si(m.get_ctx(), p))
            parts.append(m)
    if not parts:
        return None
    width = max(m.dim(isl.dim_type.out) for m in parts)
    sched = None
    for m in parts:
        base = m.dim(isl.dim_type.out)
        if base < width:
            m = m.add_dims(isl.dim_type.out, width - base)
            for i in range(base, width):
                m = m.fix_val(isl.dim_type.out, i, isl.Val.zero(m.get_ctx()))
        um = isl.UnionMap.from_map(m)
        sched = um if sched is None else sched.union(um)
    return sched


def _overwritten(model: Model, program: Program, tensor: str) -> bool:
    accesses = program.accesses(tensor)
    if accesses is None or accesses[0] is None:
        return False
    writes, reads = accesses
    # every element written, for all sizes (the box from the inferred extents:
    # a Select of sizes, ``K > L ? 0 : K``, has no affine text)
    whole = box(model.ranges, tensor)
    written = writes.range()
    box_u = isl.UnionSet.from_set(whole.align_params(written.get_space()))
    written = written.align_params(box_u.get_space())
    if reads is not None:  # (an indirect read may read any element, of the box: reads stay in it)
        reads = reads.intersect_range(box_u.align_params(reads.get_space()))
    return box_u.is_subset(written) and program.reads_have_sources(writes, reads)


def box(r, tensor: str) -> isl.Set:
    """``{ tensor[i0, ...] : 0 <= ik < extent_k }`` over the sizes."""
    info = r.checked.tensors[tensor]
    space = isl.Space.create_from_names(r.ctx, set=[f"i{k}" for k in range(info.rank)],
                                        params=[isl_name(z) for z in r.checked.sizes])
    space = space.set_tuple_name(isl.dim_type.set, isl_name(tensor))
    box = isl.Set.universe(space).intersect_params(r.size_context.align_params(space.params()))
    ls = isl.LocalSpace.from_space(space)
    for k in range(info.rank):
        if info.dims is not None:
            ext = isl.PwAff.read_from_str(r.ctx, params_prefix(r.checked.sizes) + "{ [(" + dim_isl(info.dims[k])
                                          + ")] }")
        else:
            ext = r.extents[tensor][k]
        var = isl.PwAff.var_on_domain(ls, isl.dim_type.set, k)
        box = box & var.ge_set(isl.PwAff.zero_on_domain(ls)) & var.lt_set(lift(ext, space))
    return box
