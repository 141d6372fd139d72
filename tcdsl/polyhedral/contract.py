"""Storage contraction: a temporary indexed by a sequential loop's variable
kept in a few slots instead of one per step.

A recurrence written the natural way stores every step's state::

    for t in T {
      if t == 0 { c(t, b, j) = (1 - F(t, b, j)) * Z(t, b, j) }
      else      { c(t, b, j) = F(t, b, j) * c(t - 1, b, j) + (1 - F(t, b, j)) * Z(t, b, j) }
      h(t, b, j) = O(t, b, j) * c(t, b, j)
    }

When ``c`` is a temporary, only ``c(t)`` and ``c(t - 1)`` are ever live: the
code generator could allocate ``c`` as ``(2, B, C)`` and read and write
``c(t & 1, b, j)`` (a ``T``-fold smaller buffer that stays in cache instead
of a stream to memory); and since each ``c(t - 1, b, j)`` is read only by
the instance that writes ``c(t, b, j)``, one slot updated in place does
(``(1, B, C)``, half the cache, see ``_in_place``).  The classic polyhedral storage-mapping
optimisation, for its most common case:

* every statement that reads or writes the temporary is in a kernel directly
  in the body of the same sequential ``for`` (none outside it, none in a
  nested ``for``: each step's accesses are then all the accesses);
* along one dimension every access is ``t - k`` with ``k`` a constant
  between ``kmin`` and ``kmax`` (all its instances, for all sizes), so at step
  ``t`` only indices ``t - kmax .. t - kmin`` are live and ``kmax - kmin + 1``
  slots hold them without collision (rounded up to a power of two, so that
  the slot is ``index & (slots - 1)``);
* every read reads a value written before it (isl's dataflow over the whole
  program's schedule, polyhedral/dataflow.py, with the loops' variables as
  schedule dimensions), so no read could see a slot's older occupant where
  the full tensor would have held something else;
* a window of two steps takes one slot when every read of step ``t - 1`` is
  by the instance that writes the same element at step ``t`` and no element
  of a step is written twice (``_in_place``).

``plan_folds(model)`` returns the temporaries to fold; codegen/tir.py
allocates them with ``size`` slots along ``dim`` and takes that index
modulo ``size`` (codegen/expr.py, ``physical``).
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..sema.affine import isl_name
from .dataflow import program_schedule
from .model import Block, Branch, ForLoop, Kernel, Model, lift_param

# More slots than this: not worth folding (a window this wide is rare).
MAX_SLOTS = 8


@dataclass(frozen=True)
class Fold:
    tensor: str
    dim: int  # the dimension indexed by the loop variable
    size: int  # slots kept along it


def plan_folds(model: Model) -> dict[str, Fold]:
    """The temporaries to store in a few slots (see the module docstring)."""
    checked = model.ranges.checked
    users: dict[str, list[Kernel]] = {}
    for k in model.kernels():
        for s in k.stmts:
            for m in s.writes + s.reads + s.may_reads:
                mine = users.setdefault(m.get_tuple_name(isl.dim_type.out), [])
                if not any(x is k for x in mine):
                    mine.append(k)
    owner = _direct_loops(model.body)
    out: dict[str, Fold] = {}
    program = None
    for t in checked.temps:
        kernels = users.get(isl_name(t), [])
        loops = {id(owner.get(id(k))) for k in kernels}
        if not kernels or len(loops) != 1 or owner.get(id(kernels[0])) is None:
            continue
        fold = _fold(t, owner[id(kernels[0])], kernels, len(model.ranges.extent_exprs(t)))
        if fold is None:
            continue
        program = program or program_schedule(model)
        accesses = program.accesses(t) if program is not None else None
        if accesses is not None and program.reads_have_sources(*accesses):
            out[t] = fold
    return out


def _direct_loops(body: Block) -> dict[int, ForLoop | None]:
    """id(kernel) -> the ``for`` whose body holds it directly (None: top level,
    or under a branch)."""
    out: dict[int, ForLoop | None] = {}

    def visit(b: Block, loop: ForLoop | None) -> None:
        for it in b.items:
            if isinstance(it, Kernel):
                out[id(it)] = loop
            elif isinstance(it, ForLoop):
                visit(it.body, it)
            elif isinstance(it, Branch):
                visit(it.then, None)
                visit(it.orelse, None)
    visit(body, None)
    return out


def _fold(tensor: str, loop: ForLoop, kernels: list[Kernel], rank: int) -> Fold | None:
    """The dimension and slots to fold ``tensor`` into, from the window of
    ``t - k`` of its accesses (the reads' sources are checked after)."""
    name, var = isl_name(tensor), isl_name(loop.loop.var)
    accesses = []
    per_statement: list[tuple[list[isl.Map], list[isl.Map]]] = []  # (writes, reads) of each statement
    for k in kernels:
        for s in k.stmts:
            if any(m.get_tuple_name(isl.dim_type.out) == name for m in s.may_reads):
                return None  # a non-affine read: it may read any element
            mine: tuple[list[isl.Map], list[isl.Map]] = ([], [])
            for kind, ms in ((0, s.writes), (1, s.reads)):
                for m in ms:
                    if m.get_tuple_name(isl.dim_type.out) == name:
                        lifted = lift_param(m.intersect_params(k.context), var)
                        if lifted is None:
                            return None
                        accesses.append(lifted)
                        mine[kind].append(lifted)
            per_statement.append(mine)
    best: Fold | None = None
    for d in range(rank):
        window = _window(accesses, d)
        if window is None:
            continue
        live = window[1] - window[0] + 1
        size = 1 << (live - 1).bit_length()  # a power of two: the slot is index & (size - 1)
        if window == (-1, 0) and _in_place(per_statement, d):
            size = 1
        if size <= MAX_SLOTS and (best is None or size < best.size):
            best = Fold(tensor, d, size)
    return best


def _in_place(per_statement: list[tuple[list[isl.Map], list[isl.Map]]], d: int) -> bool:
    """Steps ``t - 1`` and ``t`` (along dimension ``d``) kept in one slot, each
    step overwriting the last in place: legal when every read of step
    ``t - 1`` is by the statement instance that writes the same element at
    step ``t`` (an elementwise recurrence, ``c(t, b, j) = F * c(t - 1, b, j)
    + ...``: the instance reads the old value before it stores the new one,
    and no other instance wants the old value), and no element of a step is
    written twice (a second write's instance would have overwritten the old
    value before the first one read it).  Reads of step ``t`` see what the
    step wrote, as with two slots."""
    writes = None
    for ws, rs in per_statement:
        for w in ws:
            u = isl.UnionMap.from_map(w)
            writes = u if writes is None else writes.union(u)
        for r in rs:
            old = r.add_constraint(isl.Constraint.equality_alloc(isl.LocalSpace.from_space(r.get_space()))
                                   .set_coefficient_val(isl.dim_type.out, d, 1)
                                   .set_coefficient_val(isl.dim_type.in_, 0, -1)
                                   .set_constant_val(1))  # index_d = t - 1
            if old.is_empty():
                continue
            if not ws:
                return False
            new = old.apply_range(_plus_one(old.get_space().range(), d))
            own = ws[0]
            for w in ws[1:]:
                own = own.union(w)
            if not new.is_subset(own):
                return False
    return writes is not None and writes.reverse().is_single_valued()


def _plus_one(space: isl.Space, d: int) -> isl.Map:
    """``{ x -> x' : x'_d = x_d + 1, the other dimensions equal }`` over ``space``."""
    n = space.dim(isl.dim_type.set)
    m = isl.Map.universe(isl.Space.map_from_set(space))
    for i in range(n):
        c = isl.Constraint.equality_alloc(isl.LocalSpace.from_space(m.get_space()))
        c = c.set_coefficient_val(isl.dim_type.out, i, 1).set_coefficient_val(isl.dim_type.in_, i, -1)
        if i == d:
            c = c.set_constant_val(-1)
        m = m.add_constraint(c)
    return m


def _window(accesses: list[isl.Map], d: int) -> tuple[int, int] | None:
    """(min, max) of ``index_d - t`` over every instance of every access
    (``t`` is input dimension 0), for all sizes; None when unbounded."""
    lo = hi = None
    for m in accesses:
        n_in, n_out = m.dim(isl.dim_type.in_), m.dim(isl.dim_type.out)
        x = m.project_out(isl.dim_type.in_, 1, n_in - 1)
        x = x.project_out(isl.dim_type.out, d + 1, n_out - d - 1).project_out(isl.dim_type.out, 0, d)
        x = x.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
        delta = x.deltas()
        delta = delta.project_out(isl.dim_type.param, 0, delta.dim(isl.dim_type.param))
        if delta.is_empty():
            continue
        if not delta.is_bounded():
            return None
        a = _value(delta.lexmin())
        b = _value(delta.lexmax())
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    return None if lo is None else (lo, hi)


def _value(point_set: isl.Set) -> int:
    return point_set.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
