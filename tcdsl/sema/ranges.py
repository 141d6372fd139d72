"""Range inference (TC's algorithm) and tensor extents.

``infer_ranges(checked)`` is the stage entry point.  For every comprehension,
in textual order, it finds the range of each index variable:

1. ``where i in lo:hi`` clauses first (TC: where ranges take precedence).
2. Then rounds: every access ``X(..., e, ...)`` whose index expression ``e``
   is affine with exactly one unresolved variable ``v`` yields the maximal
   range of ``v`` for which ``e`` stays inside ``X`` for *all* values of the
   already resolved variables.  Candidates of one round are intersected.
   Rounds repeat until nothing changes.
3. A variable left unresolved is an error that asks for a where clause.

A read of a tensor that no statement has written yet (a loop-carried read
of a temporary written further down the loop body) bounds nothing in that
order; when such a read has a reduction variable to bound, inference runs
once more, and the read then bounds it with the tensor's shape from the
first pass.

Then it computes each written tensor's extent: along each dimension, the
largest index written plus one, over all statements that write it (an
index that may be negative is an error).  Everything is kept as isl objects
over the *parameters*: the sizes and the enclosing loop variables.  Sizes
are assumed >= 1 while inferring (as TC does).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from ..errors import InternalError, TcSemanticError
from ..syntax import nodes as n
from .affine import NotAffine, isl_name, lift, params_prefix, read_param_set, read_pwaff, readable, underived
from .check import CheckedDef, dim_expr, dim_isl, lhs_index_var
from .sizes import derived_facts


@dataclass(frozen=True)
class Loop:
    var: str
    lo: n.Expr
    hi: n.Expr


@dataclass
class StmtInfo:
    """One comprehension with everything later stages need about it."""

    id: int
    comp: n.Comprehension
    loops: tuple[Loop, ...]
    conds: tuple[tuple[n.Expr, bool], ...]  # enclosing if conditions and the branch taken
    vars: tuple[str, ...]  # the statement's own dimensions: lhs index variables, then reduction variables
    domain: isl.Set  # S<id>[vars] over the parameters (sizes and loop variables)
    ranges: dict[str, tuple[isl.PwAff, isl.PwAff]] = field(default_factory=dict)
    init_domain: isl.Set | None = None  # the lhs variables' box: where an ``op=!`` initializes
    var_sets: dict[str, isl.Set] = field(default_factory=dict)  # each variable's own constraints
    params_set: isl.Set | None = None  # sizes, loop ranges and if conditions of this statement
    derived: dict = field(default_factory=dict)  # the program's derived sizes (sema/sizes.py)
    # lhs dimension -> [lo, hi) of the indices written there, for an index
    # like ``H + j`` (a variable moved by sizes): shown by ``--emit ranges``
    shifted: dict[int, tuple[isl.PwAff, isl.PwAff]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"S{self.id}"

    def where_ranges(self, names, given=()) -> tuple:
        """``where v in lo:hi`` clauses of the inferred ranges of the variables
        ``names`` (those of the statement, not in ``given``): a rewrite keeps
        them where it drops a read that bounded them."""
        ctx, d = self.domain.params(), self.derived
        return tuple(n.RangeConstraint(v, underived(readable(self.ranges[v][0], ctx), d),
                                       underived(readable(self.ranges[v][1], ctx), d))
                     for v in names if v not in given and v in self.ranges)


@dataclass
class RangeInfo:
    ctx: isl.Context
    checked: CheckedDef
    params: tuple[str, ...]  # sizes, then loop variables
    stmts: list[StmtInfo]
    extents: dict[str, tuple[isl.PwAff, ...]]  # over the sizes only
    size_context: isl.Set  # what is known about the sizes: >= 1, constant dims
    # reads that leave their tensor for some sizes (polyhedral/bounds.py): a
    # call with such sizes is refused
    size_guards: tuple = ()
    # temporaries whose rows the CPU code lays out longer than their last
    # extent (the transposed copies of polyhedral/layout.py; codegen/lower.py)
    padded_rows: frozenset = frozenset()

    def extent_exprs(self, tensor: str) -> tuple[n.Expr, ...]:
        info = self.checked.tensors[tensor]
        if info.dims is not None:
            return tuple(dim_expr(d) for d in info.dims)
        return tuple(readable(pa, self.size_context) for pa in self.extents[tensor])

    def dump(self) -> str:
        """One line per tensor (``hidden: [T, B, Co]``), then one per statement
        and variable (``S0 hidden: b in [0, B)``); deterministic."""
        from ..syntax.printer import expr_to_tc

        lines = []
        for t in sorted(self.checked.tensors):
            lines.append(f"{t}: [" + ", ".join(expr_to_tc(e) for e in self.extent_exprs(t)) + "]")
        free = self.checked.free_sizes
        if free:
            lines.append("free sizes: " + ", ".join(free))
        for s in self.stmts:
            for v in s.vars:
                lo, hi = s.ranges[v]
                lines.append(f"{s.name} {s.comp.tensor}: {v} in [{self._bound(lo, s)}, {self._bound(hi, s)})")
            for k, (lo, hi) in sorted(s.shifted.items()):
                index = expr_to_tc(s.comp.indices[k])
                lines.append(f"{s.name} {s.comp.tensor}: dim {k} written at {index} in "
                             f"[{self._bound(lo, s)}, {self._bound(hi, s)})")
        return "\n".join(lines) + "\n"

    def _bound(self, pa: isl.PwAff, s: StmtInfo) -> str:
        from ..syntax.printer import expr_to_tc

        return expr_to_tc(readable(pa, s.domain.params()))


def infer_ranges(checked: CheckedDef, ctx: isl.Context | None = None) -> RangeInfo:
    """Infer ranges and extents (see the module docstring)."""
    ctx = ctx or isl.Context()
    loops = _loop_vars(checked.node.body)
    params = tuple(checked.sizes) + tuple(v for v in loops if v not in checked.sizes)
    # TC assumes sizes >= 1; a declared shape like 2*N - 1 is >= 0 at every call; derived sizes' relations
    compound = [dim_isl(d) + " >= 0" for p in checked.node.params for d in checked.tensors[p.name].dims
                if isinstance(d, n.Expr)] + derived_facts(checked.derived)
    sizes_ok = " and ".join([f"{isl_name(s)} >= 1" for s in checked.sizes] + compound) or "true"
    size_context = isl.Set.read_from_str(ctx, params_prefix(checked.sizes) + "{ : " + sizes_ok + " }")
    info = RangeInfo(ctx, checked, params, [], {}, size_context)
    first = _Inference(info)
    first.stmts(checked.node.body, (), ())
    if not first.late:
        return _runs(info)
    # a sum read a tensor before any statement wrote it (a loop-carried read
    # of a temporary written further down the loop body: an attention
    # decoder's context of step t - 1): once more, with the shapes found for
    # such reads, so that they bound the sum's variables as every read does
    # (a tensor that a placeholder range wrote and a statement further down
    # wrote as well, ``if t > 0 { S(b, d) = 0.5 * S(b, d) }`` above ``S(b,
    # d) += x(t, b, d)``: the extent of those other writes)
    info = RangeInfo(ctx, checked, params, [], {}, size_context)
    _Inference(info, late_extents={**first.info.extents, **first.real}, late_own=first.late_own,
               late_unknown=frozenset(first.unknown - set(first.real))).stmts(checked.node.body, (), ())
    return _runs(info)


def _runs(info: RangeInfo) -> RangeInfo:
    """``info``, once no read bounds a variable to nothing for every size (``y(T - 1 - t, b, H + j) = c(t,
    b, j) + (t > 0 ? y(T - t, b, H + j) : 0)`` where ``y`` has ``H`` columns: no ``j``, the statement
    silently writing nothing); an empty ``where`` range is meant (TC's ``i in 8:4``)."""
    for st in info.stmts:
        s, runs = st.comp, st.params_set is not None and not st.params_set.is_empty() and st.domain.is_empty()
        empty = [v for v in st.vars if runs and st.var_sets.get(v) is not None and st.var_sets[v].is_empty()]
        if not empty or {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)} & set(empty):
            continue
        own = any(isinstance(a, n.Access) and a.tensor == s.tensor for a in n.walk(s.rhs))
        raise TcSemanticError(
            f"this statement never runs: the reads of its right side leave no value of "
            f"{', '.join(repr(v) for v in empty)} for any sizes; a 'where {empty[0]} in lo:hi' clause gives its "
            f"range" + (f" (its read of '{s.tensor}' bounds them by the extent '{s.tensor}' has before it)" if own
                        else ""), s.span)
    return info


def _loop_vars(stmts) -> list[str]:
    out: list[str] = []
    for s in stmts:
        if isinstance(s, n.For):
            out += [s.var] + [v for v in _loop_vars(s.body) if v != s.var]
        elif isinstance(s, n.If):
            out += _loop_vars(s.then) + _loop_vars(s.orelse)
    return list(dict.fromkeys(out))


class _Inference:
    def __init__(self, info: RangeInfo, late_extents: dict | None = None, late_own: set | None = None,
                 late_unknown: frozenset = frozenset()):
        self.info = info
        self.ctx = info.ctx
        self.params = info.params
        # tensor -> the sizes for which a statement so far writes it
        self.written_for: dict[str, isl.Set] = {}
        # the extents found by a first pass, for a reduction variable of a read
        # made before the tensor is written; ``late``: there was such a read
        self.first = late_extents is None
        self.late_extents = late_extents or {}
        self.late = False
        self.reduction_vars: tuple[str, ...] = ()
        # (statement span, variable): an output index that only such a read
        # bounds (``m(b, j) +=! h(t - 1, b, k) * W(k, j)`` above the statement
        # that writes ``h``), found by the first pass, bounded by the second
        self.late_own: set = late_own or set()
        # tensors whose extent the first pass took from such a placeholder
        # range ([0, 1)): it says nothing, so no read of them bounds a
        # variable in that pass, nor a late read in the second
        self.unknown: set[str] = set()
        self.late_unknown = late_unknown
        # tensor -> its extent from the statements with no placeholder range (first pass)
        self.real: dict[str, tuple] = {}
        self._span = None
        self._maybe_late: set[str] = set()

    def stmts(self, stmts, loops: tuple[Loop, ...], conds) -> None:
        for s in stmts:
            match s:
                case n.For():
                    if self.first:
                        self._empty_loop(s, loops, conds)
                    self.stmts(s.body, loops + (Loop(s.var, s.lo, s.hi),), conds)
                case n.If():
                    self._param_set((), conds + ((s.cond, True),))  # checks the condition is affine
                    self.stmts(s.then, loops, conds + ((s.cond, True),))
                    self.stmts(s.orelse, loops, conds + ((s.cond, False),))
                case n.Comprehension():
                    self._comprehension(s, loops, conds)

    def _empty_loop(self, s: n.For, loops: tuple[Loop, ...], conds) -> None:
        """Warn when ``for t in lo:hi`` runs no step for any sizes (``for t in
        T - 1:-1``, a Python ``range(T - 1, -1, -1)``: the loop's steps only
        go up; a backward loop reads and writes ``T - 1 - t``)."""
        import warnings

        from ..errors import TcWarning, caller_level
        from ..syntax.printer import expr_to_tc

        try:
            runs = self._param_set(loops, conds) & self._read_cond(n.Binary("<", s.lo, s.hi), s.hi)
        except TcSemanticError:
            return  # (a bound that is no affine expression: reported where the loop's range is used)
        if not runs.is_empty():
            return
        where = f"{s.span.source.name}:{s.span.line}:{s.span.col}: " if s.span is not None else ""
        lo, hi = expr_to_tc(s.lo), expr_to_tc(s.hi)
        warnings.warn(TcWarning(
            f"{where}the loop 'for {s.var} in {lo}:{hi}' runs no step for any sizes: a loop goes from its first "
            f"bound up to (not including) its second; to run steps backwards, loop forwards over them and index "
            f"with the reversed step ('for {s.var} in T' reading x(T - 1 - {s.var}, ...))"),
            stacklevel=caller_level())

    # ---------------------------------------------------------------- context
    def _param_set(self, loops: tuple[Loop, ...], conds) -> isl.Set:
        """Sizes >= 1, loop variables in their ranges, if conditions."""
        ps = self.info.size_context.align_params(self._param_space())
        for lp in loops:
            ps = ps & self._read_cond(n.Binary("<=", lp.lo, n.IndexVar(lp.var)), lp.lo)
            ps = ps & self._read_cond(n.Binary("<", n.IndexVar(lp.var), lp.hi), lp.hi)
        for cond, taken in conds:
            c = self._read_cond(cond, cond)
            ps = ps & (c if taken else c.complement())
        return ps

    def _param_space(self) -> isl.Space:
        return isl.Space.create_from_names(self.ctx, set=[], params=[isl_name(p) for p in self.params])

    def _read_cond(self, cond: n.Expr, where: n.Expr) -> isl.Set:
        try:
            return read_param_set(self.ctx, self.params, cond).align_params(self._param_space())
        except NotAffine as e:
            raise TcSemanticError("this must be an affine condition or bound over loop variables and sizes "
                                  "(no tensor reads, no products of variables)", e.expr.span or where.span) from None

    # -------------------------------------------------------- comprehensions
    def _comprehension(self, s: n.Comprehension, loops: tuple[Loop, ...], conds) -> None:
        loop_names = tuple(lp.var for lp in loops)
        own = [v for v in (lhs_index_var(e, loop_names) for e in s.indices) if v is not None]
        vars_ = tuple(own) + s.reduction_vars
        self.reduction_vars = s.reduction_vars
        self._span, self._maybe_late = s.span, set()
        pset = self._param_set(loops, conds)
        space = isl.Space.create_from_names(self.ctx, set=[isl_name(v) for v in vars_],
                                            params=[isl_name(p) for p in self.params])
        box = isl.Set.universe(space).intersect_params(pset)
        # each variable's own constraints: the lhs ones make the init domain and the extents
        var_sets = {v: box for v in vars_}
        resolved: set[str] = set()
        where_vars = {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)}
        for w in s.wheres:
            if isinstance(w, n.RangeConstraint) and w.var in vars_:
                interval = self._interval(vars_, w.var, w.lo, w.hi, space)
                box = box & interval
                var_sets[w.var] = var_sets[w.var] & interval
                resolved.add(w.var)
        accesses = _accesses(s.rhs) + [a for w in s.wheres if isinstance(w, n.Exists) for a in _accesses(w.expr)]
        box = self._rounds(accesses, vars_, resolved, box, var_sets, space)
        if resolved != set(vars_) and s.tensor in self.info.extents:
            # Extension: a tensor already written has a size; its lhs bounds
            # variables that no read determines.
            lhs = n.Access(s.tensor, s.indices)
            box = self._rounds([lhs], vars_, resolved, box, var_sets, space)
            box = self._rounds(accesses, vars_, resolved, box, var_sets, space)
        placeholder = False
        for v in vars_:
            if v not in resolved and self.first and v in self._maybe_late:
                placeholder = True
                # bounded in the second pass by the extent the read tensor gets further down
                # (a sum's variable by that extent as ever: ``h(k, b, j) * h(t - 1, b, j)``)
                if v in own:
                    self.late_own.add((s.span, v))
                self.unknown.add(s.tensor)
                self.late = True
                zero_one = self._interval(vars_, v, n.Const(0), n.Const(1), space)
                box, var_sets[v] = box & zero_one, var_sets[v] & zero_one
                resolved.add(v)
        for v in vars_:
            if v not in resolved:
                raise TcSemanticError(f"cannot infer the range of '{v}'; use a where clause "
                                      f"('where {v} in lo:hi')", _first_use(s, v) or s.span)
        for e in s.indices:
            if isinstance(e, n.IndexVar) and e.name in own and e.name not in where_vars:
                box, var_sets[e.name] = self._clip_at_zero(e.name, vars_, box, var_sets[e.name], pset)
        box = box.coalesce()
        st = StmtInfo(len(self.info.stmts), s, loops, conds, vars_, box.set_tuple_name(f"S{len(self.info.stmts)}"))
        for k, v in enumerate(vars_):
            try:
                lo, hi = box.dim_min(k), box.dim_max(k)
            except isl.Error:
                raise TcSemanticError(f"cannot infer a bounded range for '{v}'; use a where clause "
                                      f"('where {v} in lo:hi')", _first_use(s, v) or s.span) from None
            st.ranges[v] = (lo.coalesce(), hi.add_constant_val(1).coalesce())
        own_box = isl.Set.universe(space).intersect_params(pset)
        for v in own:
            own_box = own_box & var_sets[v]
        st.init_domain = own_box.project_out(isl.dim_type.set, len(own), len(vars_) - len(own)).coalesce()
        st.var_sets, st.params_set, st.derived = var_sets, pset, self.info.checked.derived
        self.info.stmts.append(st)
        ext = self._extend(st)
        if self.first and ext is not None and not placeholder:
            old = self.real.get(s.tensor)
            self.real[s.tensor] = ext if old is None else tuple(
                self._simplest(a.union_max(b.align_params(a.get_space().params())).coalesce()) for a, b in zip(old, ext))

    def _clip_at_zero(self, v: str, vars_, box: isl.Set, var_set: isl.Set, pset: isl.Set):
        """TC's inverted indexing: ``A(i) = B(10 - i)`` for ``float(I) B`` gives
        ``i`` the range ``[11 - I, 11)``, which starts below 0 once ``I > 11``.
        An output is indexed from 0, so the instances below 0 are not run:
        ``A`` has 11 elements and ``i`` runs over ``[max(0, 11 - I), 11)``.
        Only when, for every size (and loop value), the inferred range has a
        part at 0 or above; otherwise the range is left alone and the write
        below 0 is an error (``_extend``), as for a ``where`` range."""
        nonneg = isl.Set.read_from_str(self.ctx, params_prefix(self.params) + "{ [" + ", ".join(
            map(isl_name, vars_)) + "] : " + isl_name(v) + " >= 0 }").align_params(var_set.get_space().params())
        if var_set.is_subset(nonneg) or not pset.is_subset((var_set & nonneg).params()):
            return box, var_set
        return box & nonneg, var_set & nonneg

    def _rounds(self, accesses, vars_, resolved: set, box, var_sets, space):
        """TC's rounds; updates ``resolved`` and returns the narrowed boxes."""
        while True:
            found: dict[str, isl.Set] = {}
            for acc in accesses:
                for k, e in enumerate(acc.indices):
                    self._candidate(acc, k, e, vars_, resolved, var_sets, space, found)
            if not found:
                return box
            for v, allowed in found.items():
                box = box & allowed
                var_sets[v] = var_sets[v] & allowed
                resolved.add(v)

    def _interval(self, vars_, v: str, lo: n.Expr, hi: n.Expr, space) -> isl.Set:
        cond = n.Binary("&&", n.Binary("<=", lo, n.IndexVar(v)), n.Binary("<", n.IndexVar(v), hi))
        try:
            text = params_prefix(self.params) + "{ [" + ", ".join(map(isl_name, vars_)) + "] : "
            from .affine import to_isl
            return isl.Set.read_from_str(self.ctx, text + to_isl(cond) + " }").align_params(space.params())
        except (NotAffine, isl.Error):
            raise TcSemanticError("a where-range bound must be affine in sizes and loop variables"
                                  + _size_product_hint(lo, hi), lo.span or hi.span) from None

    def _candidate(self, acc: n.Access, k: int, e: n.Expr, vars_, resolved, var_sets, space, found) -> None:
        """The range of the one unresolved variable of ``e`` for which ``e`` stays
        inside ``acc.tensor`` for all values of the resolved variables *of e*:
        variables that ``e`` does not use (an empty reduction range, say) do not
        narrow it (TC solves each access on its own)."""
        names = {x.name for x in n.walk(e) if isinstance(x, n.IndexVar)} & set(vars_)
        if any(isinstance(x, n.Access) for x in n.walk(e)):
            return  # indirect index: says nothing about the range
        unresolved = names - resolved
        if len(unresolved) != 1:
            return
        extent = None if acc.tensor in self.unknown else self._extent(acc.tensor, k)
        if extent is None and self.first and (acc.tensor not in self.info.extents or acc.tensor in self.unknown):
            self._maybe_late.add(next(iter(unresolved)))
        if extent is None and (next(iter(unresolved)) in self.reduction_vars
                               or (self._span, next(iter(unresolved))) in self.late_own):
            if acc.tensor in self.late_extents and acc.tensor not in self.late_unknown:
                extent = self.late_extents[acc.tensor][k].align_params(self._param_space())
            else:
                self.late = True
        if extent is None:
            return
        here = self._sizes_of(var_sets[next(iter(unresolved))])
        if self.info.checked.tensors[acc.tensor].dims is None and not here.is_subset(
                self.written_for.get(acc.tensor, here)):
            # written so far only for other sizes (in the other branch of an
            # ``if`` over the sizes): its extent says nothing here
            return
        try:
            pa = read_pwaff(self.ctx, self.params, vars_, e).align_params(space.params())
        except NotAffine:
            return
        (v,) = unresolved
        box = var_sets[v]  # the statement's parameter context, plus v's where-range if any
        for u in names & resolved:
            box = box & var_sets[u]
        size = lift(extent, pa.get_domain_space())
        zero = lift(isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(self._param_space())),
                    pa.get_domain_space())
        bad = (pa.lt_set(zero) | pa.ge_set(size)).reset_space(space) & box
        pos = vars_.index(v)
        for i in range(len(vars_)):
            if i != pos:
                bad = bad.eliminate(isl.dim_type.set, i, 1)
        allowed = bad.complement().intersect_params(box.params())
        found[v] = found[v] & allowed if v in found else allowed

    def _sizes_of(self, box: isl.Set) -> isl.Set:
        """The sizes for which ``box`` (a statement's set over the sizes and
        loop variables) is not empty."""
        ps = box.params()
        for name in self.params:
            pos = ps.find_dim_by_name(isl.dim_type.param, isl_name(name))
            if pos >= 0 and name not in self.info.checked.sizes:
                ps = ps.project_out(isl.dim_type.param, pos, 1)
        return ps.coalesce()

    def _extent(self, tensor: str, k: int) -> isl.PwAff | None:
        info = self.info.checked.tensors[tensor]
        if info.dims is not None:
            text = dim_isl(info.dims[k])
            return isl.PwAff.read_from_str(self.ctx, params_prefix(self.params) + "{ [(" + text + ")] }")
        ext = self.info.extents.get(tensor)
        return ext[k].align_params(self._param_space()) if ext else None

    # --------------------------------------------------------------- extents
    def _written_along(self, st: StmtInfo, e: n.Expr) -> isl.Set:
        """The indices written along one dimension, as a 1-D set over the sizes.
        An lhs variable contributes its own range, whatever the other
        dimensions do (so an empty dimension does not empty the others)."""
        from .affine import to_isl

        var = lhs_index_var(e, tuple(lp.var for lp in st.loops))
        if var is not None:
            pos = st.vars.index(var)
            dim = st.var_sets[var]
            dim = dim.project_out(isl.dim_type.set, pos + 1, len(st.vars) - pos - 1).project_out(isl.dim_type.set, 0, pos)
            if not isinstance(e, n.IndexVar):  # H + j: the range of j, moved
                shift = isl.Map.read_from_str(self.ctx, params_prefix(self.params) + "{ [" + isl_name(var)
                                              + "] -> [(" + to_isl(e) + ")] }")
                dim = dim.apply(shift.align_params(dim.get_space().params()))
        else:
            dim = isl.Set.read_from_str(self.ctx, params_prefix(self.params) + "{ [(" + to_isl(e) + ")] }")
            dim = dim.intersect_params(st.params_set.align_params(dim.get_space().params()))
        everywhere = dim
        for lp in st.loops:
            pos = dim.find_dim_by_name(isl.dim_type.param, isl_name(lp.var))
            if pos >= 0:
                dim = dim.project_out(isl.dim_type.param, pos, 1)
                everywhere = everywhere.drop_constraints_involving_dims(isl.dim_type.param, pos, 1).project_out(
                    isl.dim_type.param, pos, 1)
        ctx = self.info.size_context.align_params(dim.get_space().params())
        dim = dim.intersect_params(ctx)
        if var is not None and st.loops:
            # Where a loop runs no step, an lhs variable whose range does not
            # depend on the loop still gives its extent: ``for t in L - 1 {
            # s(b, t) = ... }`` at L = 1 makes s of shape (B, 0), not (0, 0);
            # so does an ``if`` over loop variables that holds at no step
            # (``if t > 0 { hn(b) = ... }`` at T = 1: hn has B elements).
            over_loops = tuple(c for c in st.conds if any(isinstance(x, n.IndexVar) for x in n.walk(c[0])))
            idle = ctx.subtract(self._sizes_of(self._param_set(st.loops, over_loops)).align_params(ctx.get_space()))
            everywhere = everywhere.intersect_params(ctx)
            if not idle.is_empty() and everywhere.is_bounded():
                dim = dim | everywhere.intersect_params(idle)
        return dim.coalesce()

    def _simplest(self, pa: isl.PwAff) -> isl.PwAff:
        """One of ``pa``'s formulas alone, when it equals ``pa`` for all sizes
        (``max`` over several writes is often piecewise only on paper)."""
        ctx = self.info.size_context.align_params(pa.get_domain_space().params())
        want = pa.intersect_params(ctx)
        for _, aff in pa.get_pieces():
            total = isl.PwAff.from_aff(aff)
            if total.intersect_params(ctx).is_equal(want):
                return total
        return pa

    def _total_extent(self, hi: isl.PwAff) -> isl.PwAff:
        """``hi`` is defined only where something is written (e.g. not for
        H < KH in a valid convolution).  There the extent must be 0, not
        undefined, so that later reads see an empty tensor.  A single formula
        is extended to all sizes as ``max(formula, 0)`` (or the formula itself
        when it is never negative), which reads well and indexes cheaply."""
        zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(hi.get_domain_space()))
        pieces = hi.get_pieces()
        if len(pieces) != 1:
            return hi.union_max(zero).coalesce()
        total = isl.PwAff.from_aff(pieces[0][1])
        ctx = self.info.size_context.align_params(total.get_domain_space().params())
        rest = ctx.subtract(hi.domain().params())
        if not rest.is_subset(total.neg().nonneg_set().params()):
            return hi.union_max(zero).coalesce()  # the formula is positive where nothing is written
        if ctx.is_subset(total.nonneg_set().params()):
            return total
        return total.max(zero).coalesce()

    def _extend(self, st: StmtInfo) -> tuple | None:
        """Grow the written tensor's extent to cover this statement's writes;
        their own extent (None for a tensor of a declared shape)."""
        s = st.comp
        info = self.info.checked.tensors[s.tensor]
        loops = tuple(lp.var for lp in st.loops)
        for k, e in enumerate(s.indices):
            if not isinstance(e, n.IndexVar) and lhs_index_var(e, loops) is not None:
                written = self._written_along(st, e)
                st.shifted[k] = (written.dim_min(0).coalesce(), written.dim_max(0).add_constant_val(1).coalesce())
        if info.dims is not None:
            return
        # the sizes it is written for: those of its conditions over the sizes
        # only (a condition on a loop variable, ``if t > 2``, still writes
        # the tensor for every size)
        mine = self.info.size_context.align_params(self._param_space())
        for cond, taken in st.conds:
            if not any(isinstance(x, n.IndexVar) for x in n.walk(cond)):
                c = self._read_cond(cond, cond)
                mine = mine & (c if taken else c.complement())
        mine = self._sizes_of(mine)
        old_sizes = self.written_for.get(s.tensor)
        self.written_for[s.tensor] = mine if old_sizes is None else (old_sizes | mine).coalesce()
        from ..syntax.printer import expr_to_tc

        ext = []
        for k, e in enumerate(s.indices):
            written = self._written_along(st, e)
            if not (written & _below_zero(written, 0)).is_empty():
                var = lhs_index_var(e, loops)
                hint = ""
                if var is not None and not any(isinstance(w, n.RangeConstraint) and w.var == var for w in s.wheres):
                    lo, hi = st.ranges[var]
                    hint = (f" (range inference gives '{var}' the range [{expr_to_tc(readable(lo, st.domain.params()))}, "
                            f"{expr_to_tc(readable(hi, st.domain.params()))}); a where clause can narrow it)")
                raise TcSemanticError(f"'{s.tensor}' may be written at a negative index along dimension {k}" + hint,
                                      e.span or s.span)
            ext.append(self._total_extent(written.dim_max(0).add_constant_val(1).coalesce()))
        own = tuple(ext)
        old = self.info.extents.get(s.tensor)
        if old is not None:
            ext = [self._simplest(a.union_max(b.align_params(a.get_space().params())).coalesce())
                   for a, b in zip(old, ext)]
        self.info.extents[s.tensor] = tuple(ext)
        return own


def same_output_shapes(old: RangeInfo, new: RangeInfo) -> None:
    """Raise InternalError where a rewrite of the program (``new``) gives an
    output of ``old`` another extent for some sizes."""
    for o in old.checked.outputs:
        for k, (a, b) in enumerate(zip(old.extents.get(o, ()), new.extents.get(o, ()))):
            ctx = old.size_context.align_params(a.get_domain_space().params())
            if not a.intersect_params(ctx).is_equal(b.align_params(a.get_space().params()).intersect_params(ctx)):
                raise InternalError(f"the rewritten program gives output '{o}' another extent along dimension {k}")


def _below_zero(s: isl.Set, k: int) -> isl.Set:
    c = isl.Constraint.inequality_alloc(isl.LocalSpace.from_space(s.get_space()))
    c = c.set_coefficient_val(isl.dim_type.set, k, -1).set_constant_val(-1)  # -x_k - 1 >= 0
    return isl.Set.universe(s.get_space()).add_constraint(c)


def _accesses(e: n.Expr) -> list[n.Access]:
    return [x for x in n.walk(e) if isinstance(x, n.Access)]


def _first_use(s: n.Comprehension, v: str):
    for x in n.walk(s):
        if isinstance(x, n.IndexVar) and x.name == v and x.span is not None:
            return x.span
    return None


def _size_product_hint(*bounds: n.Expr) -> str:
    """The way around a bound that multiplies or divides sizes (``0:G * G``,
    ``0:K * V``, ``(L - K + M) / M``): that value as a size of its own."""
    def sized(e: n.Expr) -> bool:
        return any(isinstance(y, n.SizeVar) for y in n.walk(e))
    for b in bounds:
        for x in n.walk(b):
            if isinstance(x, n.Binary) and x.op in ("*", "/", "%") and sized(x.rhs) and (x.op != "*" or sized(x.lhs)):
                return ("; a product or quotient of sizes is not: give that value as a size of its own "
                        "(a free size passed at the call, docs/language.md step 12) and use it in the range")
    return ""
