"""Loop-invariant statements, computed for every step before their loop.

A statement inside ``for t`` whose instances depend on nothing the rest of
the loop computes -- the input projection of an RNN, ``xw(t, b, i) +=! x(t,
b, j) * W(j, i)`` -- can run for all ``t`` at once, before the loop: one big
parallel kernel (a matmul with ``T * B`` rows) instead of ``T`` small ones.
``hoist(d, model)`` finds such statements with isl and returns the rewritten
``def`` (the parsed AST, to be checked again), or None when there are none.

The analysis, for a loop whose body is one kernel (no nested ``for``):

* Every access is lifted to ``S[t, vars] -> X[...]`` (the loop variable
  becomes a dimension) and every instance gets its place in the original
  execution order ``[t, position, init/update, vars]``.
* Expansion: a temporary used only inside the loop, whose every read at step
  ``t`` reads a value written at step ``t`` (isl flow analysis: no read
  without a source, every dependence at equal ``t``), gets ``t`` as a new
  first index (``z(b, j)`` becomes ``z(t, b, j)``).  That removes the
  dependences between steps that only come from reusing its storage (the
  gates of a QRNN).
* A statement is hoisted, in textual order, when every pair of conflicting
  instances (same element, one a write) keeps its order: hoisted instances
  before the others and before later hoisted statements, and none of its
  instances at two different steps conflict (it runs as one comprehension
  over ``t``).  Its ``if`` conditions and loop range become ``where t in
  lo:hi`` -- only when they describe one interval of ``t``.
* Hoisting happens only when some hoisted statement is a reduction (the
  work worth moving); a temporary is expanded only when one of its writers
  is hoisted.

The rewritten program is checked and its ranges inferred again by the
caller, which compares every hoisted statement's domain and every tensor's
extents with the original ones (``same_domains``) and keeps the original
program when anything differs.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl

from ..sema.affine import _aff_to_expr, isl_name, params_prefix, to_isl, underived
from ..sema.ranges import RangeInfo, StmtInfo
from ..syntax import nodes as n
from .bounds import at_called_sizes
from .model import Block, ForLoop, IslStmt, Kernel, Model, lift_param, maps

NT = isl.dim_type


@dataclass
class Plan:
    """What to rewrite: hoisted statements (by source span) with the range of
    their loop variable, and expanded temporaries with that variable."""

    ranges: dict[object, tuple[str, n.Expr, n.Expr]] = field(default_factory=dict)  # span -> (t, lo, hi)
    expanded: dict[str, str] = field(default_factory=dict)  # tensor -> t
    position: dict[str, int] = field(default_factory=dict)  # tensor -> where t goes in its indices
    hoisted_ids: dict[int, str] = field(default_factory=dict)  # StmtInfo.id -> t
    renamed: dict[object, str] = field(default_factory=dict)  # span -> t's name in the hoisted statement

    def __bool__(self) -> bool:
        return bool(self.ranges)


def plan(model: Model) -> Plan:
    """The statements to hoist and the temporaries to expand, loop by loop."""
    out = Plan()
    for fl in _loops(model.body):
        if len(fl.body.items) == 1 and isinstance(fl.body.items[0], Kernel):
            _Loop(model.ranges, fl.body.items[0], out).analyze()
    return out


def _loops(b: Block):
    for it in b.items:
        if isinstance(it, ForLoop):
            yield it
            yield from _loops(it.body)
        elif not isinstance(it, Kernel):
            yield from _loops(it.then)
            yield from _loops(it.orelse)


def _union(maps) -> isl.UnionMap | None:
    out = None
    for m in maps:
        um = m if isinstance(m, (isl.UnionMap, isl.UnionSet)) else isl.UnionMap.from_map(m)
        out = um if out is None else out.union(um)
    return out


class _Loop:
    def __init__(self, ranges: RangeInfo, k: Kernel, out: Plan):
        self.r, self.k, self.out = ranges, k, out
        self.t = k.loops[-1].var
        self.tn = isl_name(self.t)
        self.ctx = ranges.ctx

    # ---------------------------------------------------------------- lifting
    def lift(self, m: isl.Map) -> isl.Map:
        """The loop variable (a parameter) as the first input dimension."""
        return lift_param(m, self.tn)

    def stamp(self, s: IslStmt) -> isl.Map:
        """``S[t, vars] -> [t]``."""
        d = self.lift(isl.Map.from_domain(s.domain)).domain()
        return (isl.Map.identity(d.get_space().map_from_set()).intersect_domain(d)
                .project_out(NT.out, 1, d.dim(NT.set) - 1).reset_tuple_id(NT.out))

    def with_t(self, s: IslStmt, m: isl.Map) -> isl.Map:
        """``S[t, vars] -> X[e]`` becomes ``S[t, vars] -> X[t, e]``."""
        name = m.get_tuple_name(NT.out)
        return self.stamp(s).flat_range_product(m).set_tuple_name(NT.out, name)

    def analyze(self) -> None:
        k = self.k
        infos: list[StmtInfo] = []
        for s in k.stmts:
            if s.info not in infos:
                infos.append(s.info)
        if not any(self._worth_it(i, infos) for i in infos):
            return
        self.order = _union(self.stamp(s).flat_range_product(self.lift(m)).reset_tuple_id(NT.out)
                            for s in k.stmts for m in maps(k.order.intersect_domain(
                                isl.UnionSet.from_set(s.domain))))
        self.infos = infos
        self.lt = self.order.lex_lt_union_map(self.order)  # p -> q: p runs before q
        # Expand every temporary that can be; then only those that a hoisted
        # statement running at several steps writes, and decide again.
        expand = {z for z in self._temps() if self._expandable(z)}
        hoisted, found = self._greedy(expand)
        expand &= {i.comp.tensor for i in hoisted if self._steps(i)}
        hoisted, found = self._greedy(expand)
        if not any(i.comp.reduction_vars and self._steps(i) for i in hoisted):
            return
        for info in hoisted:
            lo, hi = found[info.id]
            self.out.ranges[info.comp.span] = (self.t, lo, hi)
            self.out.hoisted_ids[info.id] = self.t
        for z in expand & {i.comp.tensor for i in hoisted}:
            self.out.expanded[z] = self.t
            self.out.position[z] = self._position(z, [i.comp for i in hoisted if i.comp.tensor == z])

    def _greedy(self, expand: set[str]):
        """The statements that can be hoisted, in textual order, with their
        step ranges, when the temporaries ``expand`` are expanded."""
        k = self.k
        reads, writes = self._accesses(expand)
        every = reads.union(writes)
        conf = writes.apply_range(every.reverse())
        conf = conf.union(conf.reverse())
        hoisted: list[StmtInfo] = []
        found: dict[int, tuple[n.Expr, n.Expr]] = {}
        for info in self.infos:
            own = [s for s in k.stmts if s.info is info]
            interval = self._interval(info)
            if interval is None or not self._lhs_ok(info, expand):
                continue
            if self._legal(own, [s for s in k.stmts if s.info in hoisted], conf, self.lt):
                hoisted.append(info)
                found[info.id] = interval
        return hoisted, found

    # ------------------------------------------------------------- expansion
    def _temps(self) -> set[str]:
        """Temporaries accessed by this loop's statements and nowhere else."""
        mine = {s.info.id for s in self.k.stmts}
        inside, outside = set(), set()
        for st in self.r.stmts:
            names = {st.comp.tensor} | {x.tensor for x in n.walk(st.comp) if isinstance(x, n.Access)}
            (inside if st.id in mine else outside).update(names)
        temps = set(self.r.checked.temps)
        return {z for z in inside - outside if z in temps}

    def _expandable(self, z: str) -> bool:
        k = self.k
        if any(m.get_tuple_name(NT.out) == isl_name(z) for s in k.stmts for m in s.may_reads):
            return False
        # t becomes an index of z: it must never be negative (`for t in -1:T`)
        negative = isl.Set.read_from_str(self.ctx, params_prefix(self.r.params) + "{ : " + self.tn + " < 0 }")
        if not (k.context & negative.align_params(k.context.get_space())).is_empty():
            return False
        zn = isl_name(z)
        sinks = _union(self.lift(m) for s in k.stmts for m in s.reads if m.get_tuple_name(NT.out) == zn)
        sources = _union(self.lift(m) for s in k.stmts for m in s.writes if m.get_tuple_name(NT.out) == zn)
        if sinks is None or sources is None:
            return sinks is None and sources is not None
        flow = (isl.UnionAccessInfo.from_sink(sinks).set_must_source(sources)
                .set_schedule_map(self.order).compute_flow())
        if not self._refused(flow.get_may_no_source()).is_empty():
            return False
        stamps = _union(self.stamp(s) for s in k.stmts)
        steps = flow.get_may_dependence().apply_domain(stamps).apply_range(stamps)
        return steps.is_empty() or steps.deltas().is_subset(
            isl.UnionSet.from_set(isl.Set.read_from_str(self.ctx, "{ [0] }")).align_params(steps.get_space()))

    def _refused(self, x: isl.UnionSet) -> isl.UnionSet:
        """``x`` without the sizes that a call is refused for (a read out of
        bounds there: ``a(b, 2 * H + j)`` of an ``a(b, c)`` over ``G`` columns
        reads an element nobody wrote only where ``G < 3 * H``)."""
        return at_called_sizes(self.r, x)

    def _position(self, z: str, comps: list) -> int:
        """Where ``t`` goes among the indices of the expanded ``z``: first
        when a leading dimension has a constant extent (an LSTM's 4 gates: as
        the outermost parallel loop it would leave cores idle); else beside
        the index that ``t`` stands beside in an operand of the hoisted
        statements (before ``b`` for ``x(t, b, i)``: the nest's two loops
        then run as one loop over ``T * B`` rows, codegen/collapse.py -- the
        embedding -> LSTM of benchmarks/programs.py: 21.1, 20.9 -> 18.6, 15.8 ms
        in alternating runs; after ``b`` for a batch-first ``x(b, t, i)``),
        unless that makes it
        the last, contiguous one, or an operand reads a shifted step
        (``x(t - 1, b, i)``: its rows are no view's); else before the last one, so that the
        hoisted nest's rows are the steps (a matmul of ``T`` rows per batch
        row, which keeps its register tiles with one batch row)."""
        extents = self.r.extents[z]
        if len(extents) < 2 or any(pa.is_cst() for pa in extents[:-1]):
            return 0
        if any(isinstance(acc, n.Access) and any(
                not isinstance(x, (n.IndexVar, n.Ident)) and any(
                    isinstance(y, (n.IndexVar, n.Ident)) and y.name == self.t for y in n.walk(x))
                for x in acc.indices) for c in comps for acc in n.walk(c.rhs)):
            # a shifted step (a QRNN's x(t - 1, b, i)): no view merges its rows
            return len(extents) - 1
        for c in comps:
            lhs = [getattr(x, "name", None) for x in c.indices]
            for acc in n.walk(c.rhs):
                if not isinstance(acc, n.Access):
                    continue
                idx = [x.name if isinstance(x, (n.IndexVar, n.Ident)) else None for x in acc.indices]
                for d in range(len(idx) - 1):
                    a, b = idx[d], idx[d + 1]
                    if a == self.t and b in lhs and b != self.t:
                        return lhs.index(b)
                    if b == self.t and a in lhs and a != self.t and lhs.index(a) + 1 < len(lhs):
                        return lhs.index(a) + 1
        return len(extents) - 1

    def _accesses(self, expand: set[str]) -> tuple[isl.UnionMap, isl.UnionMap]:
        """Lifted reads (with may-reads) and writes, expanded tensors with ``t``."""
        def lifted(s, m):
            m = self.lift(m)
            return self.with_t(s, m) if m.get_tuple_name(NT.out) in {isl_name(z) for z in expand} else m
        reads = _union(lifted(s, m) for s in self.k.stmts for m in s.reads + s.may_reads)
        writes = _union(lifted(s, m) for s in self.k.stmts for m in s.writes)
        return reads if reads is not None else writes.subtract(writes), writes

    # ------------------------------------------------------------- legality
    def _legal(self, own: list[IslStmt], before: list[IslStmt], conf, lt) -> bool:
        dom = _union(isl.UnionSet.from_set(self.lift(isl.Map.from_domain(s.domain)).domain()) for s in own)
        pairs = conf.intersect_domain(dom)
        mine = pairs.intersect_range(dom)
        stamps = _union(self.stamp(s) for s in own)
        steps = mine.apply_domain(stamps).apply_range(stamps)
        if not steps.is_empty() and not steps.deltas().is_subset(
                isl.UnionSet.from_set(isl.Set.read_from_str(self.ctx, "{ [0] }")).align_params(steps.get_space())):
            return False
        others = pairs.subtract(mine)
        if before:
            bdom = _union(isl.UnionSet.from_set(self.lift(isl.Map.from_domain(s.domain)).domain()) for s in before)
            with_hoisted = others.intersect_range(bdom)
            if not with_hoisted.subtract(lt.reverse()).is_empty():
                return False
            others = others.subtract(with_hoisted)
        return others.subtract(lt).is_empty()

    def _lhs_ok(self, info: StmtInfo, expand: set[str]) -> bool:
        """``t`` becomes an index variable: it must appear on the left-hand
        side once, bare, and not in a where-range bound."""
        c = info.comp
        bare = sum(1 for e in c.indices if isinstance(e, n.IndexVar) and e.name == self.t)
        inside = any(self._uses_t(e) for e in c.indices if not isinstance(e, n.IndexVar))
        if c.tensor in expand:
            bare += 1
        ranges = [w for w in c.wheres if isinstance(w, n.RangeConstraint)]
        return bare == 1 and not inside and not any(self._uses_t(w.lo) or self._uses_t(w.hi) for w in ranges)

    def _worth_it(self, info: StmtInfo, infos: list[StmtInfo]) -> bool:
        """A quick look before the analysis: a reduction that runs at several
        steps and reads nothing the loop writes."""
        if not info.comp.reduction_vars or not self._steps(info):
            return False
        if not info.comp.initializes and any(i.comp.tensor == info.comp.tensor for i in infos if i is not info):
            return False  # accumulates into what another statement of the loop writes
        written = {i.comp.tensor for i in infos}
        read = {x.tensor for x in n.walk(info.comp.rhs) if isinstance(x, n.Access)}
        return not read & written

    def _steps(self, info: StmtInfo) -> bool:
        """Whether the statement may run at two or more steps."""
        st = self._t_set(info)
        m = isl.Map.from_domain_and_range(st, st)
        return not m.intersect(isl.Map.lex_lt(st.get_space())).is_empty()

    def _t_set(self, info: StmtInfo) -> isl.Set:
        """``{ [t] }``: the steps at which the statement runs, over the other parameters."""
        ps = info.params_set
        i = ps.find_dim_by_name(NT.param, self.tn)
        return ps.move_dims(NT.set, 0, NT.param, i, 1).coalesce()

    def _uses_t(self, e: n.Expr) -> bool:
        return any(isinstance(x, n.IndexVar) and x.name == self.t for x in n.walk(e))

    def _interval(self, info: StmtInfo) -> tuple[n.Expr, n.Expr] | None:
        """``(lo, hi)`` with ``lo <= t < hi`` exactly the steps at which the
        statement runs (loop range and ``if`` conditions), or None."""
        if info.params_set.find_dim_by_name(NT.param, self.tn) < 0:
            return None
        st = self._t_set(info)
        if st.is_empty():
            return None
        lo, hi = st.dim_min(0).coalesce(), st.dim_max(0).coalesce()
        affs = []
        for pa in (lo, hi):
            pieces = pa.get_pieces()
            if len(pieces) != 1 or pieces[0][1].dim(NT.div) > 0:
                return None
            affs.append(pieces[0][1])
        bounds = [_aff_to_expr(a) for a in affs]
        params = [p for p in st.get_space().get_var_names(NT.param)]
        box = isl.Set.read_from_str(self.ctx, "[" + ", ".join(params) + "] -> { [" + self.tn + "] : "
                                    + to_isl(bounds[0]) + " <= " + self.tn + " <= " + to_isl(bounds[1]) + " }")
        known = self.k.context
        j = known.find_dim_by_name(NT.param, self.tn)
        known = known.project_out(NT.param, j, 1)
        box = box.align_params(st.get_space()).intersect_params(known.align_params(st.get_space()))
        if not box.is_equal(st.intersect_params(known.align_params(st.get_space()))):
            return None
        # Equal for sizes >= 1; a size may be 0 at run time, where the loop
        # runs no step: the interval must lie in the loop's range for every
        # size (`0:1` for `if t == 0` does not; the code, generated for sizes
        # >= 1, could not clamp it).
        start = bounds[0]
        end = _aff_to_expr(affs[1].add_constant_val(isl.Val.one(self.ctx)))
        loop = self.k.loops[-1]
        if not (self._never(f"{to_isl(start)} < {to_isl(loop.lo)}")
                and self._never(f"{to_isl(end)} > {to_isl(loop.hi)} and {to_isl(end)} > {to_isl(start)}")):
            return None
        names = {isl_name(p): p for p in self.r.params}
        d = self.r.checked.derived
        return _parsed(start, names, d), _parsed(end, names, d)

    def _never(self, cond: str) -> bool:
        """``cond`` over the parameters holds for no values of them (sizes 0 included)."""
        return isl.Set.read_from_str(self.ctx, params_prefix(self.r.params) + "{ : " + cond + " }").is_empty()


def _parsed(e: n.Expr, names: dict[str, str], derived: dict | None = None) -> n.Expr:
    """A checked size expression as the parser writes it (sema/affine.underived)."""
    return underived(e, derived, names)


# ------------------------------------------------------------------ rewrite
def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` with the hoisted statements before their loops and the expanded
    temporaries indexed by the loop variable.  In a hoisted statement the
    loop variable becomes an index variable with a fresh name (``t_1``; the
    loop keeps ``t``) and the range ``where t_1 in lo:hi``."""
    taken = {x.name for x in n.walk(d) if isinstance(x, n.Ident)} | {x.name for x in n.walk(d) if isinstance(x, n.Call)}
    taken |= {s.var for s in n.walk(d) if isinstance(s, n.For)} | {x.name for x in d.params + d.outputs}
    taken |= {dim for x in d.params for dim in x.type.dims if isinstance(dim, str)}

    def fresh(t: str) -> str:
        k = 1
        while f"{t}_{k}" in taken:
            k += 1
        taken.add(f"{t}_{k}")
        return f"{t}_{k}"

    def stmts(body) -> tuple:
        out = []
        for s in body:
            if isinstance(s, n.For):
                lifted, rest = _extract(stmts(s.body), s.var)
                v = fresh(s.var) if lifted else s.var
                for c in lifted:
                    t, lo, hi = p.ranges[c.span]
                    p.renamed[c.span] = v
                    c = _rename(expand(c, s.var), t, v)
                    out.append(replace(c, wheres=c.wheres + (n.RangeConstraint(v, lo, hi, span=c.span),)))
                if rest:
                    out.append(replace(s, body=tuple(expand(x, s.var) for x in rest)))
            elif isinstance(s, n.If):
                out.append(replace(s, then=stmts(s.then), orelse=stmts(s.orelse)))
            else:
                out.append(s)
        return tuple(out)

    def _extract(body, t: str) -> tuple[list, tuple]:
        """The statements hoisted out of the loop over ``t``, and the rest."""
        lifted, rest = [], []
        for s in body:
            if isinstance(s, n.Comprehension) and s.span in p.ranges and p.ranges[s.span][0] == t:
                lifted.append(s)
            elif isinstance(s, n.If):
                in_then, then = _extract(s.then, t)
                in_else, orelse = _extract(s.orelse, t)
                lifted += in_then + in_else
                if then:
                    rest.append(replace(s, then=then, orelse=orelse))
                elif orelse:
                    rest.append(replace(s, cond=n.Unary("!", s.cond, span=s.cond.span), then=orelse, orelse=()))
            else:
                rest.append(s)
        return lifted, tuple(rest)

    def expand(node, t: str):
        """The temporaries expanded for the loop over ``t`` indexed by ``t``."""
        def with_t(name: str, indices: tuple, span) -> tuple:
            k = p.position[name]
            return indices[:k] + (n.Ident(t, span=span),) + indices[k:]

        def fn(x):
            if isinstance(x, n.Comprehension) and p.expanded.get(x.tensor) == t:
                x = replace(x, indices=with_t(x.tensor, x.indices, x.span))
            if isinstance(x, n.Call) and p.expanded.get(x.name) == t:
                return replace(x, args=with_t(x.name, tuple(fn(a) for a in x.args), x.span))
            if isinstance(x, n.Ident) and p.expanded.get(x.name) == t:
                return n.Call(x.name, (n.Ident(t, span=x.span),), span=x.span)
            return n.map_children(x, fn)
        return fn(node)

    return replace(d, body=stmts(d.body))


def _rename(c: n.Comprehension, old: str, new: str) -> n.Comprehension:
    def fn(x):
        if isinstance(x, n.Ident) and x.name == old:
            return replace(x, name=new)
        return n.map_children(x, fn)
    return fn(c)


def same_domains(old: RangeInfo, new: RangeInfo, p: Plan) -> bool:
    """True when every hoisted statement runs exactly the instances it ran
    inside its loop, and every tensor (but the expanded ones) keeps its
    extents: the check that makes the rewrite safe to use."""
    if not same_extents(old, new, p.expanded):
        return False
    by_span = {s.comp.span: s for s in new.stmts}
    for st in old.stmts:
        if st.id not in p.hoisted_ids:
            continue
        ns = by_span.get(st.comp.span)
        if ns is None:
            return False
        t, v = p.hoisted_ids[st.id], p.renamed[st.comp.span]
        for a, b in ((st.domain, ns.domain), (st.init_domain, ns.init_domain)):
            if (a is None) != (b is None):
                return False
            if a is not None:
                a, b = _lifted(a, t), _lifted(b, v)
                if not equal_sets(a, b):
                    return False
    return True


def same_extents(old: RangeInfo, new: RangeInfo, skip=frozenset()) -> bool:
    """Every tensor of ``old`` but those of ``skip`` has the same extents in ``new``."""
    for tensor, ext in old.extents.items():
        if tensor in skip:
            continue
        got = new.extents.get(tensor)
        if got is None or len(got) != len(ext):
            return False
        if not all(equal_sets(a, b) for a, b in zip(ext, got)):
            return False
    return True


def _lifted(s: isl.Set, t: str) -> isl.Set:
    """``s`` with ``t`` (a parameter or a dimension) as its first dimension,
    the others in their order, the tuple name dropped."""
    tn = isl_name(t)
    i = s.find_dim_by_name(NT.param, tn)
    if i >= 0:
        s = s.move_dims(NT.set, 0, NT.param, i, 1)
    else:
        j = s.find_dim_by_name(NT.set, tn)
        names = [s.get_dim_name(NT.set, x) for x in range(s.dim(NT.set))]
        order = [names[j]] + names[:j] + names[j + 1:]
        perm = isl.Map.read_from_str(s.get_ctx(), "{ [" + ", ".join(names) + "] -> [" + ", ".join(order) + "] }")
        s = s.reset_tuple_id().apply(perm.align_params(s.get_space()))
    return s.reset_tuple_id()


# --------------------------------------------------------- by rows per step
def rows_per_step(ranges: RangeInfo, p: Plan, fixed: dict[str, int] | None = None) -> n.Expr | None:
    """The rows of a step of the hoisted work, as a size expression (parsed
    form; a constant when the sizes ``fixed`` give it): the extent of the
    second-to-last dimension of the tensor the first hoisted reduction
    writes (the batch ``B`` of ``xw(t, b, j)`` or of an LSTM's ``gates(g, b,
    j)``: a step's register tiles run over it); None when that tensor has
    fewer than two dimensions."""
    for st in ranges.stmts:
        c = st.comp
        if c.span not in p.ranges or c.reduction is None:
            continue
        dims = ranges.extent_exprs(c.tensor)
        if len(dims) < 2:
            return None
        rows = _parsed(dims[-2], {}, ranges.checked.derived)
        names = {x.name for x in n.walk(rows) if isinstance(x, n.Ident)}
        if names and fixed and names <= set(fixed):
            value = _value(rows, fixed)
            if value is not None:
                return n.Const(value=value, span=rows.span)
        return rows
    return None


def _value(e: n.Expr, sizes: dict[str, int]) -> int | None:
    """An integer size expression at ``sizes`` (None: not one this can evaluate)."""
    if isinstance(e, n.Const) and isinstance(e.value, int):
        return e.value
    if isinstance(e, n.Ident):
        return int(sizes[e.name])
    if isinstance(e, n.Unary) and e.op == "-":
        a = _value(e.operand, sizes)
        return None if a is None else -a
    if isinstance(e, n.Binary) and e.op in ("+", "-", "*", "/", "%", "min", "max"):
        a, b = _value(e.lhs, sizes), _value(e.rhs, sizes)
        if a is None or b is None or (e.op in "/%" and b == 0):
            return None
        if e.op in "/%":  # integer division and remainder round toward negative infinity
            return a // b if e.op == "/" else a % b
        return {"+": a + b, "-": a - b, "*": a * b, "min": min(a, b), "max": max(a, b)}[e.op]
    return None


def by_rows(original: n.Def, hoisted: n.Def, rows: n.Expr, threshold: int) -> n.Def:
    """One ``def`` running ``original`` when ``rows >= threshold`` and
    ``hoisted`` otherwise: ``if rows >= threshold { original } else
    { hoisted }``, the temporaries of the hoisted branch renamed (an expanded
    temporary has one more dimension there).  Hoisting pays when a step has
    few rows: a step's projection is then a thin matrix product, whose
    weights are read once per step for a few rows, against one product with
    ``T * B`` rows before the loop.  With rows enough for a full register
    tile per thread, the step's product runs as fast as the hoisted one, and
    the hoisted version only adds writing all steps' results to memory and
    reading them back (measured on 2 cores, interleaved: GRU, LSTM and Elman
    RNNs at (T, B, 256, 256) ran 0.85-0.98 of the hoisted time unhoisted
    from B = 16 on, 1.1-2.1 times it below B = 8)."""
    outputs = {o.name for o in original.outputs}
    temps = {c.tensor for c in n.walk(hoisted) if isinstance(c, n.Comprehension)} - outputs
    taken = {x.name for x in n.walk(hoisted) if isinstance(x, (n.Ident, n.Call))} | temps | outputs
    taken |= {x.name for x in original.params} | {c.tensor for c in n.walk(original) if isinstance(c, n.Comprehension)}
    names = {}
    for t in sorted(temps):
        k, new = 1, f"{t}_hoisted"
        while new in taken:
            k, new = k + 1, f"{t}_hoisted{k}"
        taken.add(new)
        names[t] = new

    def fn(node):
        if isinstance(node, n.Comprehension) and node.tensor in names:
            node = replace(node, tensor=names[node.tensor])
        elif isinstance(node, n.Call) and node.name in names:
            node = replace(node, name=names[node.name])
        return n.map_children(node, fn)

    span = original.body[0].span if original.body else None
    cond = n.Binary(op=">=", lhs=rows, rhs=n.Const(value=threshold, span=span), span=span)
    branch = n.If(cond=cond, then=tuple(original.body), orelse=tuple(fn(s) for s in hoisted.body), span=span)
    return replace(original, body=(branch,))


def equal_sets(a: isl.Set, b: isl.Set) -> bool:
    """The isl sets ``a`` and ``b`` hold the same points (parameters aligned first)."""
    return a.align_params(b.get_space()).is_equal(b.align_params(a.get_space()))


def same_points(old: RangeInfo, new: RangeInfo, inits: bool = True) -> bool:
    """Every statement of ``old`` runs the instances it ran in ``new`` (found
    by its span: a rewrite numbers the statements anew), with ``inits`` its
    initialization too; ``new`` may have statements of its own."""
    by_span = {s.comp.span: s for s in new.stmts}
    for st in old.stmts:
        ns = by_span.get(st.comp.span)
        if ns is None:
            return False
        pairs = [(st.domain, ns.domain)] + ([(st.init_domain, ns.init_domain)] if inits else [])
        for a, b in pairs:
            if (a is None) != (b is None):
                return False
            if a is not None and not equal_sets(a.reset_tuple_id(), b.reset_tuple_id()):
                return False
    return True
