"""The polyhedral model: kernels, isl statements, accesses, dependences.

``build_model(ranges)`` is the stage entry point.  It cuts the body of the
``def`` into a :class:`Block` of items:

* :class:`Kernel` -- a maximal run of comprehensions (including those under
  ``if``s that contain no ``for``).  Each comprehension is one isl statement
  ``S<k>[vars]``; an ``op=!`` comprehension also gets ``S<k>_init[lhs vars]``.
  Inside a ``for``, the loop variables are *parameters* of the kernel's
  model, so the isl scheduler cannot move them, ``if`` conditions on them are
  uniform domain constraints, and the kernel is what runs once per step.
* :class:`ForLoop` -- a sequential ``for`` whose body is a nested block.
* :class:`Branch` -- an ``if`` whose branches contain ``for`` loops.

A sum into the rows an index names (``dE(v, d) +=! (idx(n) == v ? dy(n, d) :
0)``, polyhedral/scatter.py) is a kernel of its own, ``Kernel.scatter`` set.

Accesses are kept one map per reference (TC tags its references the same
way); a non-affine index makes the reference a may-access of the whole
tensor.  Dependences follow TC (``Scop::computeAllDependences``): flow
dependences from reads to writes, false (anti and output) dependences from
writes to earlier reads and writes, with the writes as must-sources.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import islpy as isl

from ..syntax import nodes as n
from ..sema.affine import NotAffine, isl_name, params_prefix, to_isl
from ..sema.ranges import Loop, RangeInfo, StmtInfo
from . import scatter
from .scatter import Scatter


@dataclass
class IslStmt:
    """One isl statement: a comprehension's update, or the init of an ``op=!``."""

    name: str
    info: StmtInfo
    is_init: bool
    dims: tuple[str, ...]
    domain: isl.Set
    writes: list[isl.Map] = field(default_factory=list)
    reads: list[isl.Map] = field(default_factory=list)
    may_reads: list[isl.Map] = field(default_factory=list)
    # ``id``s of the reads that stay in their tensor only under their
    # conditions (polyhedral/bounds.py guarded_reads; None: not computed yet)
    guarded_reads: frozenset[int] | None = None
    # the index variables the domain keeps >= 0 (codegen/lower.py nonneg_dims)
    nonneg: frozenset[str] | None = field(default=None, compare=False)


@dataclass
class Kernel:
    stmts: list[IslStmt]
    loops: tuple[Loop, ...]
    context: isl.Set  # parameters: sizes >= 1 and the enclosing loop ranges
    order: isl.UnionMap  # textual (program) order within one step
    _deps: isl.UnionMap | None = None
    # Statements hoisted out of a loop (polyhedral/hoist.py): scheduled one
    # after the other (isl's serialize_sccs), so that each is a clean nest --
    # statements of different step ranges fused into one band would each sit
    # under a condition, and lose their register tiles.
    serialize: bool = False
    # A sum into the rows an index names (polyhedral/scatter.py): the kernel
    # holds that statement alone, and the CPU runs it as a scatter-add.
    scatter: "Scatter | None" = None
    # the tensors written anywhere in the body of the outermost sequential
    # loop around it (its own statements' and other kernels' of the step:
    # k-means' centroids, updated after the scatter that cuts its step)
    loop_writes: frozenset = frozenset()

    @property
    def deps(self) -> isl.UnionMap:
        """The dependences (see the module docstring), computed when first
        needed: a kernel loaded from the disk cache is never scheduled."""
        if self._deps is None:
            self._deps = _dependences(self)
        return self._deps

    @property
    def domain(self) -> isl.UnionSet:
        out = isl.UnionSet.empty(self.context.get_space())
        for s in self.stmts:
            out = out.union(isl.UnionSet.from_set(s.domain))
        return out

    def accesses(self, kind: str) -> isl.UnionMap:
        out = isl.UnionMap.empty(self.context.get_space())
        for s in self.stmts:
            for m in getattr(s, kind):
                out = out.union(isl.UnionMap.from_map(m))
        return out


@dataclass
class ForLoop:
    loop: Loop
    body: "Block"


@dataclass
class Branch:
    cond: n.Expr
    then: "Block"
    orelse: "Block"


Item = Union[Kernel, ForLoop, Branch]


@dataclass
class Block:
    items: list[Item]


@dataclass
class Model:
    ranges: RangeInfo
    body: Block
    # fusion -> (the symbolic schedules, the seconds they took): schedule.py's
    # memo for the size tuples scheduled before scheduling
    symbolic: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def ctx(self) -> isl.Context:
        return self.ranges.ctx

    def kernels(self) -> list[Kernel]:
        out: list[Kernel] = []

        def visit(b: Block) -> None:
            for it in b.items:
                if isinstance(it, Kernel):
                    out.append(it)
                elif isinstance(it, ForLoop):
                    visit(it.body)
                else:
                    visit(it.then)
                    visit(it.orelse)
        visit(self.body)
        return out


def build_model(ranges: RangeInfo) -> Model:
    """Cut the program into kernels and build their isl statements, accesses
    and dependences (see the module docstring)."""
    by_comp = iter(ranges.stmts)
    body = _Builder(ranges, by_comp).block(ranges.checked.node.body, ())
    return Model(ranges, body)


def _has_for(stmts) -> bool:
    for s in stmts:
        if isinstance(s, n.For) or (isinstance(s, n.If) and (_has_for(s.then) or _has_for(s.orelse))):
            return True
    return False


class _Builder:
    def __init__(self, ranges: RangeInfo, stmts):
        self.r = ranges
        self.ctx = ranges.ctx
        self.stmts = stmts  # StmtInfo in textual order, consumed as comprehensions are met
        self.loop_writes: frozenset = frozenset()  # Kernel.loop_writes of the loop being built

    def block(self, stmts, loops: tuple[Loop, ...]) -> Block:
        items: list[Item] = []
        run: list[StmtInfo] = []
        for s in stmts:
            if isinstance(s, n.For) or (isinstance(s, n.If) and (_has_for(s.then) or _has_for(s.orelse))):
                if run:
                    items.append(self.kernel(run, loops))
                    run = []
                if isinstance(s, n.For):
                    if not loops:
                        self.loop_writes = frozenset(c.tensor for c in n.walk(s) if isinstance(c, n.Comprehension))
                    items.append(ForLoop(Loop(s.var, s.lo, s.hi), self.block(s.body, loops + (Loop(s.var, s.lo, s.hi),))))
                else:
                    items.append(Branch(s.cond, self.block(s.then, loops), self.block(s.orelse, loops)))
            else:
                for info in self._flatten(s):
                    sc = scatter.find(info)
                    if sc is None:
                        run.append(info)
                        continue
                    if run:
                        items.append(self.kernel(run, loops))
                        run = []
                    items.append(self.kernel([info], loops))
                    items[-1].scatter = sc
        if run:
            items.append(self.kernel(run, loops))
        return Block(items)

    def _flatten(self, s) -> list[StmtInfo]:
        if isinstance(s, n.Comprehension):
            return [next(self.stmts)]
        return [x for c in s.then + s.orelse for x in self._flatten(c)]

    # ----------------------------------------------------------------- kernel
    def kernel(self, infos: list[StmtInfo], loops: tuple[Loop, ...]) -> Kernel:
        stmts: list[IslStmt] = []
        for info in infos:
            if info.comp.initializes:
                stmts.append(self._init_stmt(info))
            stmts.append(self._update_stmt(info))
        context = self._context(loops)
        order = self._order(stmts)
        return Kernel(stmts, loops, context, order, loop_writes=self.loop_writes if loops else frozenset())

    def _context(self, loops) -> isl.Set:
        space = isl.Space.create_from_names(self.ctx, set=[], params=[isl_name(p) for p in self.r.params])
        ctx = self.r.size_context.align_params(space)
        for lp in loops:
            cond = n.Binary("&&", n.Binary("<=", lp.lo, n.IndexVar(lp.var)), n.Binary("<", n.IndexVar(lp.var), lp.hi))
            ctx = ctx & isl.Set.read_from_str(self.ctx, params_prefix(self.r.params) + "{ : " + to_isl(cond) + " }")
        return ctx

    def _update_stmt(self, info: StmtInfo) -> IslStmt:
        s = IslStmt(info.name, info, False, info.vars, info.domain)
        c = info.comp
        s.writes.append(self._map(s, c.tensor, c.indices))
        if c.reduction is not None:
            s.reads.append(self._map(s, c.tensor, c.indices))
        for acc in _accesses(c.rhs):
            try:
                s.reads.append(self._map(s, acc.tensor, acc.indices))
            except NotAffine:
                s.may_reads.append(self._whole(s, acc.tensor, acc.indices))
        return s

    def _init_stmt(self, info: StmtInfo) -> IslStmt:
        own = info.vars[: len(info.vars) - len(info.comp.reduction_vars)]
        dom = info.init_domain.set_tuple_name(info.name + "_init")
        s = IslStmt(info.name + "_init", info, True, own, dom)
        s.writes.append(self._map(s, info.comp.tensor, info.comp.indices))
        return s

    def _map(self, s: IslStmt, tensor: str, indices) -> isl.Map:
        text = (params_prefix(self.r.params) + "{ " + s.name + "[" + ", ".join(map(isl_name, s.dims)) + "] -> "
                + isl_name(tensor) + "[" + ", ".join(to_isl(e) for e in indices) + "] }")
        try:
            m = isl.Map.read_from_str(self.ctx, text)
        except isl.Error:
            raise NotAffine(indices[0] if indices else n.Const(0)) from None
        return m.intersect_domain(s.domain)

    def _whole(self, s: IslStmt, tensor: str, indices) -> isl.Map:
        """The elements a read with a data-dependent index may touch: each
        affine index as it is, any value at the others (an argmax's read at
        its best index so far, ``d(b, bp(b, j), t - 1)``, touches row ``b`` of
        step ``t - 1`` only, not all of ``d``: the steps of its loop stay
        independent)."""
        head = params_prefix(self.r.params) + "{ " + s.name + "[" + ", ".join(map(isl_name, s.dims)) + "] -> "
        outs = []
        for i, e in enumerate(indices):
            try:
                text = to_isl(e)
                isl.Map.read_from_str(self.ctx, head + "[" + text + "] }")
                outs.append(text)
            except (NotAffine, isl.Error):
                outs.append(f"o{i}")
        text = head + isl_name(tensor) + "[" + ", ".join(outs) + "] }"
        return isl.Map.read_from_str(self.ctx, text).intersect_domain(s.domain)

    def _order(self, stmts: list[IslStmt]) -> isl.UnionMap:
        """Program order within one step: [position, init-or-update, dims...]."""
        width = max((len(s.dims) for s in stmts), default=0)
        out = None
        pos = 0
        for s in stmts:
            dims = list(map(isl_name, s.dims))
            pad = ["0"] * (width - len(dims))
            m = isl.Map.read_from_str(self.ctx, params_prefix(self.r.params) + "{ " + s.name + "[" + ", ".join(dims)
                                      + "] -> [" + ", ".join([str(pos), "0" if s.is_init else "1"] + dims + pad)
                                      + "] }").intersect_domain(s.domain)
            um = isl.UnionMap.from_map(m)
            out = um if out is None else out.union(um)
            if not s.is_init:
                pos += 1
        return out


def _flow(sinks: isl.UnionMap, must: isl.UnionMap, may: isl.UnionMap, order: isl.UnionMap) -> isl.UnionMap:
    return (isl.UnionAccessInfo.from_sink(sinks).set_must_source(must).set_may_source(may)
            .set_schedule_map(order).compute_flow().get_may_dependence())


def _dependences(k: Kernel) -> isl.UnionMap:
    writes = k.accesses("writes")
    reads = k.accesses("reads").union(k.accesses("may_reads"))
    empty = isl.UnionMap.empty(writes.get_space())
    raw = _flow(reads, writes, empty, k.order)
    false = _flow(writes, writes, reads, k.order)
    return raw.union(false).coalesce()


def maps(umap: isl.UnionMap) -> list[isl.Map]:
    """The maps of a union map."""
    ml = umap.get_map_list()
    return [ml.get_at(i) for i in range(ml.n_map())]


def lift_param(m: isl.Map, param: str) -> isl.Map | None:
    """``m`` with the parameter ``param`` (isl name; a loop variable) moved to
    the first input dimension, the statement's name kept (move_dims drops
    it); None when ``m`` has no such parameter."""
    i = m.find_dim_by_name(isl.dim_type.param, param)
    if i < 0:
        return None
    name = m.get_tuple_name(isl.dim_type.in_)
    return m.move_dims(isl.dim_type.in_, 0, isl.dim_type.param, i, 1).set_tuple_name(isl.dim_type.in_, name)


def _accesses(e: n.Expr) -> list[n.Access]:
    return [x for x in n.walk(e) if isinstance(x, n.Access)]


def unit_dimension(stmts, fix: isl.Set) -> bool:
    """Some statement of ``stmts`` has a dimension of a single value under the
    sizes ``fix`` (schedule.fixed_set)."""
    for s in stmts:
        dom = s.domain.intersect_params(fix.align_params(s.domain.get_space()))
        n = dom.dim(isl.dim_type.set)
        for i in range(n):
            d = dom.project_out(isl.dim_type.set, i + 1, n - i - 1).project_out(isl.dim_type.set, 0, i)
            if not d.is_empty() and isl.Map.from_domain_and_range(d, d).deltas().is_subset(
                    isl.Set.read_from_str(d.get_ctx(), "{ [0] }").align_params(d.get_space())):
                return True
    return False
