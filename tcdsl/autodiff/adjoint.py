"""Reverse-mode differentiation of a checked TC program (see docs/training.md).

The adjoint of ``def f(inputs) -> (outputs)`` is a TC program

    def f_grad(inputs, outputs, d_outputs) -> (d_inputs) {
      replay     # forward statements whose values the reverse sweep needs and
                 # cannot read from the inputs or outputs, and tapes of them
      init       # adjoint state a_X of every differentiable output and temporary
      reverse    # the statements in reverse order, loops run backwards
    }

Each statement ``X(I) op rhs`` becomes, in the reverse sweep, one statement
per tensor read by ``rhs`` (``a_R(J) += ...``, its ranges solved from the
read's indices: a gather, never an indexed write), then the update of the
adjoint of what it overwrote (``a_X(I) = 0`` or a factor).

Values: a value the reverse sweep needs is read from the forward inputs or
outputs when isl proves that nothing overwrites it later ("final"); the
adjoint of ``X = tanh(...)`` uses ``1 - X^2``, read from the output, rather
than recomputing its argument.  Otherwise the statements that compute it are
replayed before the sweep, and when the replayed tensor is overwritten later
(a temporary reused at every step), a tape keeps its value per step.

Contributions that accumulate into a weight's gradient with values that the
rest of the sweep no longer changes are moved out of the reverse loop, where
they run for all steps at once (a matrix product over T*B rows).
"""
from __future__ import annotations

from dataclasses import replace

import islpy as isl

from ..errors import InternalError, TcError, TcSemanticError
from ..sema import builtins as bt
from ..sema import types as ty
from ..sema.affine import NotAffine, isl_name, lift, params_prefix, read_pwaff, set_to_cond, to_isl
from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo, StmtInfo, readable
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc, to_tc
from . import exprs as ex
from .exprs import ZERO, select
from .order import Order, _reads
from .rules import Backprop
from .steps import AFTER, BEFORE, SEED, ReverseSteps, Tape, _Names


class Adjoint(ReverseSteps):
    def __init__(self, checked: CheckedDef, ranges: RangeInfo, wrt=None):
        self.checked = checked
        self.ranges = ranges
        self.info = checked.tensors
        self.sizes = set(checked.sizes)
        self.stmts = ranges.stmts
        self.order = Order(ranges)
        self.node = checked.node
        # names every statement must avoid: tensors, sizes, loop variables (and generated tensors)
        self.names = _Names(set(self.info) | self.sizes | {s.var for s in n.walk(self.node) if isinstance(s, n.For)})
        self.wrt = self._wrt(wrt)
        self.active = self._activity()
        floats = {i.dtype for i in self.info.values() if ty.is_float(i.dtype)}
        self.mixed = len(floats) > 1 or "float16" in floats
        # names in the adjoint
        self.d_in = {x: self.names.fresh(f"d_{x}") for x in self.wrt}
        self.d_out = {x: self.names.fresh(f"d_{x}") for x in checked.outputs}
        self.adj = {x: self.names.fresh(f"a_{x}") for x in self.info
                    if x in self.active and self.info[x].role != "input" and ty.is_float(self.info[x].dtype)}
        self.out_sizes: dict[str, tuple] = {}  # output -> dims in the adjoint's signature
        self.fresh_dims: dict[str, dict[int, str]] = {}
        for o in checked.outputs:
            self._output_dims(o)
        self.replayed: set[str] = set()
        self.rep_names: dict[str, str] = {}
        self.tapes: dict[tuple, Tape] = {}
        self._final: dict[tuple, bool] = {}
        self.contributed: set[str] = set()
        self.by_comp = {id(st.comp): st for st in self.stmts}
        self._modifies = {st.id: self._modifies_adjoint(st) for st in self.stmts}

    # ------------------------------------------------------------ setup
    def _wrt(self, wrt) -> tuple[str, ...]:
        inputs = self.checked.inputs
        if wrt is None:
            return tuple(x for x in inputs if ty.is_float(self.info[x].dtype))
        if isinstance(wrt, str):
            wrt = (wrt,)
        if not isinstance(wrt, (tuple, list)) or not all(isinstance(x, str) for x in wrt):
            raise TcError(f"wrt: expected an input's name or a list of them, got {wrt!r}")
        out = []
        for x in wrt:
            if x not in inputs:
                raise TcError(f"wrt: '{x}' is not an input of '{self.node.name}' "
                              f"(its inputs are {', '.join(inputs)})")
            if not ty.is_float(self.info[x].dtype):
                p = next(p for p in self.node.params if p.name == x)
                raise TcSemanticError(f"cannot differentiate with respect to '{x}': it is {self.info[x].dtype}, "
                                      f"not a floating-point tensor", p.span)
            if x not in out:
                out.append(x)
        return tuple(out)

    def _activity(self) -> set[str]:
        """Tensors whose values depend on a differentiable input (integer ones
        too: reading them with a gradient to pass is an error)."""
        active = set(self.wrt)
        changed = True
        while changed:
            changed = False
            for st in self.stmts:
                c = st.comp
                if c.tensor not in active and Backprop(active, c).active(c.rhs):
                    active.add(c.tensor)
                    changed = True
        return active

    def _output_dims(self, o: str) -> None:
        exprs = self.ranges.extent_exprs(o)
        dims = []
        fresh = {}
        for k, e in enumerate(exprs):
            if isinstance(e, n.SizeVar):
                dims.append(e.name)
            elif isinstance(e, n.Const) and isinstance(e.value, int):
                dims.append(e.value)
            else:
                name = self.names.fresh(f"{o}_n{k}")
                fresh[k] = name
                dims.append(name)
        self.out_sizes[o] = tuple(dims)
        self.fresh_dims[o] = fresh

    def _modifies_adjoint(self, st: StmtInfo) -> bool:
        """The reverse of ``st`` changes the adjoint of what it writes (reset, factor)."""
        c = st.comp
        if c.tensor not in self.active:
            return False
        plain = c.op == "=" or (c.initializes and not c.reduction_vars)
        me = ex.strip(n.Access(c.tensor, c.indices))
        if any(a.tensor == c.tensor and ex.strip(a) == me for a in _reads(c)):
            if c.op not in ("=", "+="):
                return True
            seed = n.Access(SEED, c.indices)
            try:
                parts = [d for a, d in Backprop(self.active, c).run(c.rhs, seed)
                         if a.tensor == c.tensor and ex.strip(a) == me]
            except TcError:
                return True
            total = parts[0] if parts else ex.ZERO
            for d in parts[1:]:
                total = ex.add(total, d)
            return not (c.op == "=" and total == seed)  # X = X + b leaves the adjoint as it is
        if plain:
            return self.order.written_before(st.id)
        if c.op == "+=":
            return False
        if c.initializes:
            return self.order.written_before(st.id)
        return True  # *=, max=, min= into an existing value

    # ------------------------------------------------------------ values
    def extent(self, tensor: str) -> tuple[n.Expr, ...]:
        return self.ranges.extent_exprs(tensor)

    def given(self, tensor: str, idx) -> n.Expr:
        """A read of a forward input or output as the adjoint receives it; an
        output whose extent is not a plain size is guarded by its own size."""
        acc = n.Access(tensor, tuple(idx))
        fresh = self.fresh_dims.get(tensor)
        if not fresh:
            return acc
        cond = None
        for k, size in fresh.items():
            cond = ex.land(cond, n.Binary("<", idx[k], n.SizeVar(size)))
        return select(cond, acc, ZERO)

    def rep_name(self, tensor: str) -> str:
        if tensor not in self.rep_names:
            if self.info[tensor].role == "temp":
                self.rep_names[tensor] = tensor
            else:
                self.rep_names[tensor] = self.names.fresh(f"{tensor}_r")
        return self.rep_names[tensor]

    def is_final(self, tensor: str, idx, k: int, when: str) -> bool:
        key = (tensor, tuple(expr_to_tc(i) for i in idx), k, when)
        if key not in self._final:
            if when == "after":
                self._final[key] = self.order.write_is_final(k)
            else:
                self._final[key] = self.order.read_is_final(k, tensor, idx)
        return self._final[key]

    def needs_replay(self, tensor: str, idx, k: int, when: str) -> bool:
        role = self.info[tensor].role
        if role == "input":
            return False
        return role == "temp" or not self.is_final(tensor, idx, k, when)

    def value(self, tensor: str, idx, k: int, when: str) -> n.Expr:
        """The value of ``tensor`` at ``idx`` just before (or after) statement ``k``."""
        idx = tuple(idx)
        role = self.info[tensor].role
        if role == "input":
            return n.Access(tensor, idx)
        if self.is_final(tensor, idx, k, when):
            if role == "output":
                return self.given(tensor, idx)
            self.replayed.add(tensor)
            return n.Access(self.rep_name(tensor), idx)
        self.replayed.add(tensor)
        tape = self._tape(tensor, idx, k, when)
        return n.Access(tape.name, tuple(n.IndexVar(v) for v in tape.loops) + idx)

    def _tape(self, tensor: str, idx, k: int, when: str) -> Tape:
        st = self.stmts[k]
        loops = [lp.var for lp in st.loops]
        cover: list = [None] * len(idx)
        covered: set[str] = set()
        own = set(st.vars)
        for d, e in enumerate(idx):
            lin = ex.linear(e) if not any(isinstance(x, n.Access) for x in n.walk(e)) else None
            if lin is None or any(name in own for name in lin if name != 1):
                continue
            in_loops = [name for name in lin if name in loops]
            if len(in_loops) == 1 and abs(lin[in_loops[0]]) == 1 and in_loops[0] not in covered:
                cover[d] = ex.strip(e)
                covered.add(in_loops[0])
        extra = tuple(v for v in loops if v not in covered)
        k, when = self._version_point(tensor, k, when)
        key = (tensor, k, when, tuple(expr_to_tc(c) if c is not None else None for c in cover))
        if key not in self.tapes:
            self.tapes[key] = Tape(self.names.fresh(f"{tensor}_tape"), tensor, k, when, tuple(cover), extra)
        return self.tapes[key]

    def _version_point(self, tensor: str, k: int, when: str) -> tuple[int, str]:
        """Where the value of ``tensor`` seen before/after statement ``k`` was
        made: right after the last statement of the same step that writes it,
        when that statement always runs before ``k`` (its block encloses
        ``k``'s) and nothing else writes it in between; else the point itself.
        Reads of one value then share one tape."""
        sk = self.order.skeleton

        def loops(x):
            last = max((i for i, e in enumerate(x) if isinstance(e, str)), default=-1)
            return x[:last + 1]
        last = k if when == "after" else k - 1
        for w in range(last, -1, -1):
            if loops(sk[w]) != loops(sk[k]):
                return k, when
            if self.stmts[w].comp.tensor == tensor:
                block_w, block_k = sk[w][:-1], sk[k][:-1]
                if block_k[:len(block_w)] == block_w:
                    return w, "after"
                return k, when
        return k, when

    def resolve(self, e: n.Expr, k: int) -> n.Expr:
        """Forward reads in a derivative -> the values they denote in the adjoint."""
        c = self.stmts[k].comp

        def fn(x):
            if not isinstance(x, n.Access):
                return None
            if x.tensor == SEED:
                return n.Access(self.adj[c.tensor], x.indices)
            if x.tensor == AFTER:
                return self.value(c.tensor, x.indices, k, "after")
            if x.tensor == BEFORE:
                return self.value(c.tensor, x.indices, k, "before")
            if x.tensor in self.info:
                return self.value(x.tensor, x.indices, k, "before")
            return None
        return ex.rewrite(e, fn)

    def _cost(self, e: n.Expr, k: int) -> int:
        """How many tensors ``e`` reads that must be replayed."""
        c = self.stmts[k].comp
        need = set()
        for a in ex.accesses(e):
            if a.tensor == AFTER and self.needs_replay(c.tensor, a.indices, k, "after"):
                need.add(c.tensor + "@after")
            elif a.tensor in self.info and self.needs_replay(a.tensor, a.indices, k, "before"):
                need.add(a.tensor)
        return len(need)

    # ------------------------------------------------------------ ranges
    def _pspace(self) -> isl.Space:
        return isl.Space.create_from_names(self.ranges.ctx, set=[], params=[isl_name(p) for p in self.ranges.params])

    def _param_pa(self, text: str) -> isl.PwAff:
        return isl.PwAff.read_from_str(self.ranges.ctx, params_prefix(self.ranges.params) + "{ [(" + text + ")] }")

    def _extent_pa(self, tensor: str, d: int) -> isl.PwAff:
        info = self.info[tensor]
        if info.dims is not None:
            x = info.dims[d]
            # a size name, a constant, or an expression of sizes (``double(2 * H, I) W``)
            return self._param_pa(isl_name(x) if isinstance(x, str) else str(x) if isinstance(x, int) else to_isl(x))
        return self.ranges.extents[tensor][d].align_params(self._pspace())

    def ranges_of(self, st: StmtInfo, names) -> list[n.RangeConstraint]:
        ctx = st.params_set
        out = []
        for v in names:
            lo, hi = st.ranges[v]
            out.append(n.RangeConstraint(v, readable(lo, ctx), readable(hi, ctx)))
        return out

    def lhs_ranges(self, st: StmtInfo) -> list[n.RangeConstraint]:
        own = [e.name for e in st.comp.indices if isinstance(e, n.IndexVar) and e.name in st.vars]
        return self.ranges_of(st, own)

    # ------------------------------------------------------------ gathers
    def gather(self, k: int, target: str, idx, adj: n.Expr) -> n.Comprehension | None:
        """``a_target(U) += adj`` summed over the instances of statement ``k``
        that read ``target`` at ``idx``: the read's indices are solved for the
        statement's variables where they can be (unit coefficients); the others
        become reduction variables, and what the box of ranges does not say is
        a guard."""
        st = self.stmts[k]
        V = list(st.vars)
        own = [e.name for e in st.comp.indices if isinstance(e, n.IndexVar)]
        solved: dict[str, dict] = {}
        used = set(V) | ex.names_in(adj)
        lhs: list[n.Expr] = []
        free: list[str] = []  # the new statement's lhs variables
        equal: list[tuple[str, n.Expr, bool]] = []  # (u, expression, affine) guards u == expression
        for d, e in enumerate(idx):
            lin = None if any(isinstance(x, n.Access) for x in n.walk(e)) else ex.linear(e)
            if lin is not None:
                for v, val in solved.items():
                    lin = ex.lin_subst(lin, v, val)
                names = [x for x in lin if x != 1]
                cand = [v for v in V if v in lin and abs(lin[v]) == 1 and v not in solved]
                if not any(x in V and x not in solved for x in names) and not any(x in free for x in names):
                    lhs.append(ex.lin_expr(lin, self.sizes))
                    continue
                if cand:
                    cand.sort(key=lambda v: (v not in own, V.index(v)))
                    v = cand[0]
                    c = lin[v]
                    if lin == {v: 1}:
                        u = v
                    else:
                        u = self._local(f"u{d}", used)
                    rest = {x: y for x, y in lin.items() if x != v}
                    value = ex.lin_add({u: 1}, rest, -1) if c == 1 else ex.lin_add(rest, {u: 1}, -1)
                    for w in list(solved):
                        solved[w] = ex.lin_subst(solved[w], v, value)
                    solved[v] = value
                    free.append(u)
                    lhs.append(n.IndexVar(u))
                    continue
                u = self._local(f"u{d}", used)
                free.append(u)
                lhs.append(n.IndexVar(u))
                equal.append((u, ex.lin_expr(lin, self.sizes), True))
                continue
            u = self._local(f"u{d}", used)
            free.append(u)
            lhs.append(n.IndexVar(u))
            equal.append((u, e, False))
        rest_vars = [v for v in V if v not in solved]
        dims = free + [v for v in rest_vars if v not in free]
        subst = {v: ex.lin_expr(val, self.sizes) for v, val in solved.items() if val != {v: 1}}
        dom = self._gather_domain(st, target, dims, solved, rest_vars, free, lhs, equal)
        if dom is None:
            return None
        wheres, guard = dom
        body = ex.substitute(adj, subst)
        for u, e, affine in equal:
            if not affine:
                e = ex.substitute(e, subst)
                hi = self.extent(target)[lhs.index(n.IndexVar(u))]
                e = n.Binary("max", n.Binary("min", e, n.Binary("-", hi, n.Const(1))), n.Const(0))
                guard = ex.land(guard, n.Binary("==", n.IndexVar(u), e))
        if guard is not None:
            body = select(guard, body, ZERO)
        body = self._cast(body, target)
        name = self.d_in[target] if self.info[target].role == "input" else self.adj[target]
        self.contributed.add(target)
        return n.Comprehension(name, tuple(lhs), "+=", body, tuple(wheres))

    def _local(self, base: str, used: set[str]) -> str:
        """A name for an index variable of one statement: not a global name nor in ``used``."""
        name, k = base, 1
        while name in used or name in self.names.taken or bt.lookup(name) is not None:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        return name

    def _cast(self, e: n.Expr, tensor: str) -> n.Expr:
        return n.Cast(self.info[tensor].dtype, e) if self.mixed else e

    def _gather_domain(self, st: StmtInfo, target, dims, solved, rest_vars, free, lhs, equal):
        ctx = self.ranges.ctx
        params = self.ranges.params
        space = isl.Space.create_from_names(ctx, set=[isl_name(v) for v in dims], params=[isl_name(p) for p in params])
        dspace = space

        def pa(e: n.Expr) -> isl.PwAff:
            return read_pwaff(ctx, params, dims, e).align_params(space.params())

        def lifted(p: isl.PwAff) -> isl.PwAff:
            return lift(p.align_params(self._pspace()), dspace)

        try:
            F = isl.Set.universe(space)
            for v, val in solved.items():
                e = pa(ex.lin_expr(val, self.sizes))
                lo, hi = st.ranges[v]
                F = F & e.ge_set(lifted(lo)) & e.lt_set(lifted(hi))
            for v in rest_vars:
                e = pa(n.IndexVar(v))
                lo, hi = st.ranges[v]
                F = F & e.ge_set(lifted(lo)) & e.lt_set(lifted(hi))
            for d, x in enumerate(lhs):
                if isinstance(x, n.IndexVar) and x.name in free:
                    e = pa(x)
                    zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(dspace))
                    F = F & e.ge_set(zero) & e.lt_set(lifted(self._extent_pa(target, d)))
            for u, e, affine in equal:
                if affine:
                    F = F & pa(n.IndexVar(u)).eq_set(pa(e))
            F = F.intersect_params(st.params_set.align_params(space.params())).coalesce()
        except (NotAffine, isl.Error) as e:
            raise InternalError(f"gather domain: {e}") from None
        if F.is_empty():
            return None
        wheres = []
        box = isl.Set.universe(space).intersect_params(st.params_set.align_params(space.params()))
        pctx = st.params_set
        fctx = pctx & F.params().align_params(pctx.get_space())
        for i, v in enumerate(dims):
            lo = readable(F.dim_min(i).coalesce(), fctx)
            hi = readable(F.dim_max(i).add_constant_val(1).coalesce(), fctx)
            bound = self._bound_set(pa, v, lo, hi)
            if bound is None:  # not affine as printed: the variable's own range, the guard does the rest
                if v in free:
                    d = [x.name if isinstance(x, n.IndexVar) else None for x in lhs].index(v)
                    lo, hi = n.Const(0), self._upper(target, d)
                else:
                    lo, hi = (readable(p, pctx) for p in st.ranges[v])
                bound = self._bound_set(pa, v, lo, hi)
                if bound is None:
                    raise InternalError(f"gather: no affine range for {v}")
            elif v in free and not self._writes_inside(pa, space, pctx, bound, v, target, lhs):
                # the range holds where F is not empty (``k in 1:2`` where K >= 2):
                # for other sizes it would write outside the target; its whole
                # extent instead, the guard does the rest
                d = [x.name if isinstance(x, n.IndexVar) else None for x in lhs].index(v)
                lo, hi = n.Const(0), self._upper(target, d)
                bound = self._bound_set(pa, v, lo, hi)
            wheres.append(n.RangeConstraint(v, lo, hi))
            box = box & bound
        guard = None
        if not box.is_subset(F):
            guard = set_to_cond(F.gist(box).coalesce())
        return wheres, guard

    def _writes_inside(self, pa, space, pctx, bound: isl.Set, v: str, target: str, lhs) -> bool:
        """The range ``bound`` of the lhs variable ``v`` lies inside the
        target's extent for every size of the context ``pctx``."""
        d = [x.name if isinstance(x, n.IndexVar) else None for x in lhs].index(v)
        inside = self._bound_set(pa, v, n.Const(0), self._upper(target, d))
        if inside is None:
            return True
        return bound.intersect_params(pctx.align_params(space.params())).is_subset(inside)

    def _bound_set(self, pa, v: str, lo: n.Expr, hi: n.Expr) -> isl.Set | None:
        try:
            e = pa(n.IndexVar(v))
            return e.ge_set(pa(lo)) & e.lt_set(pa(hi))
        except (NotAffine, isl.Error):
            return None

    def _upper(self, tensor: str, d: int) -> n.Expr:
        """An affine upper bound of the extent of ``tensor`` along ``d`` (the
        largest of its formulas, when the extent is piecewise)."""
        e = self.extent(tensor)[d]
        if not any(isinstance(x, n.Select) for x in n.walk(e)):
            return e
        pa = self.ranges.extents[tensor][d]
        top = None
        for _, aff in pa.get_pieces():
            p = isl.PwAff.from_aff(aff)
            top = p if top is None else top.max(p)
        return readable(top.coalesce(), self.ranges.size_context)

    # ------------------------------------------------------------ statements
def adjoint_def(checked: CheckedDef, ranges: RangeInfo, wrt=None) -> tuple[n.Def, "Adjoint"]:
    a = Adjoint(checked, ranges, wrt)
    return _no_constant_lhs(a.program(), set(checked.sizes)), a


def _no_constant_lhs(d: n.Def, sizes: set[str]) -> n.Def:
    """A left-hand side index without an index or loop variable (``a_gx(2, b, j)``,
    the adjoint of a read ``gx(2, b, j)``) is written as TC requires: a fresh
    index variable ranging over that one element (``a_gx(g0, b, j) ... where g0
    in 2:3``)."""
    used = {x.name for x in n.walk(d) if isinstance(x, n.Ident)}

    def fix(s, loops: frozenset):
        if isinstance(s, n.For):
            return replace(s, body=tuple(fix(x, loops | {s.var}) for x in s.body))
        if isinstance(s, n.If):
            return replace(s, then=tuple(fix(x, loops) for x in s.then),
                           orelse=tuple(fix(x, loops) for x in s.orelse))
        indices, wheres = [], list(s.wheres)
        for e in s.indices:
            if any(isinstance(x, n.Ident) and x.name not in sizes for x in n.walk(e)) or \
                    any(isinstance(x, n.IndexVar) for x in n.walk(e)):
                indices.append(e)
                continue
            k = 0
            while f"c{k}_" in used:
                k += 1
            name = f"c{k}_"
            used.add(name)
            indices.append(n.Ident(name))
            wheres.append(n.RangeConstraint(name, e, n.Binary("+", e, n.Const(1))))
        return replace(s, indices=tuple(indices), wheres=tuple(wheres))

    return replace(d, body=tuple(fix(s, frozenset()) for s in d.body))


def adjoint_text(checked: CheckedDef, ranges: RangeInfo, wrt=None) -> str:
    d, _ = adjoint_def(checked, ranges, wrt)
    return to_tc(d)
