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

from dataclasses import dataclass, field, replace

import islpy as isl

from ..errors import InternalError, TcError, TcSemanticError
from ..sema import builtins as bt
from ..sema import types as ty
from ..sema.affine import NotAffine, lift, params_prefix, read_pwaff, set_to_cond, isl_name
from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo, StmtInfo, readable
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc, to_tc
from . import exprs as ex
from .exprs import ONE, ZERO, const, div, mul, select, sub
from .order import Order, _reads
from .rules import Backprop

SEED = "\0seed"
AFTER = "\0after"
BEFORE = "\0before"


@dataclass
class Tape:
    name: str
    tensor: str
    stmt: int
    when: str  # "before" or "after" statement ``stmt``
    cover: tuple  # per dimension: the index expression when it pins a loop variable, else None
    loops: tuple[str, ...]  # the loop variables the tape adds as leading dimensions


@dataclass
class Contribution:
    stmt: n.Comprehension
    sinkable: bool
    target: str  # forward tensor whose adjoint it accumulates into


@dataclass
class _Names:
    taken: set[str] = field(default_factory=set)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken or bt.lookup(name) is not None:
            k += 1
            name = f"{base}{k}"
        self.taken.add(name)
        return name


class Adjoint:
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
            return self._param_pa(isl_name(x) if isinstance(x, str) else str(x))
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
            wheres.append(n.RangeConstraint(v, lo, hi))
            box = box & bound
        guard = None
        if not box.is_subset(F):
            guard = set_to_cond(F.gist(box).coalesce())
        return wheres, guard

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
    def reverse_comp(self, k: int) -> list:
        """The reverse of statement ``k``: aux statements, contributions, the update of a_X."""
        st = self.stmts[k]
        c = st.comp
        X = c.tensor
        if X not in self.adj:
            return []
        I = tuple(c.indices)
        seed = n.Access(SEED, I)
        has_red = bool(c.reduction_vars)
        red = c.reduction
        plain = c.op == "=" or (c.initializes and not has_red)
        aux: list[n.Comprehension] = []
        update: n.Expr | None = None  # new a_X(I), in terms of SEED; None: unchanged
        bp = Backprop(self.active, c)
        g = c.rhs
        if plain or red == "+":
            contribs = bp.run(g, seed)
            if plain or c.initializes:
                update = ZERO if self.order.written_before(k) else None
        elif red == "*":
            if not has_red:  # X = X_old * g
                xo = n.Access(BEFORE, I)
                contribs = bp.run(g, mul(seed, xo))
                update = mul(seed, g)
            else:
                nz, pnz = self.names.fresh(f"{X}_nz"), self.names.fresh(f"{X}_pnz")
                lhs_r, all_r = self.lhs_ranges(st), self.ranges_of(st, st.vars)
                is0 = n.Binary("==", g, ZERO)
                if c.initializes:
                    aux.append(n.Comprehension(nz, I, "+=!", select(is0, ONE, ZERO), tuple(all_r)))
                    aux.append(n.Comprehension(pnz, I, "*=!", select(is0, ONE, g), tuple(all_r)))
                else:
                    xo = n.Access(BEFORE, I)
                    aux.append(n.Comprehension(nz, I, "=", select(n.Binary("==", xo, ZERO), ONE, ZERO), tuple(lhs_r)))
                    aux.append(n.Comprehension(nz, I, "+=", select(is0, ONE, ZERO), tuple(all_r)))
                    aux.append(n.Comprehension(pnz, I, "=", select(n.Binary("==", xo, ZERO), ONE, xo), tuple(lhs_r)))
                    aux.append(n.Comprehension(pnz, I, "*=", select(is0, ONE, g), tuple(all_r)))
                nzI, pnzI = n.Access(nz, I), n.Access(pnz, I)

                def others(f):
                    return select(n.Binary("==", nzI, ZERO), div(pnzI, f),
                                  select(n.Binary("&&", n.Binary("==", nzI, ONE), n.Binary("==", f, ZERO)), pnzI, ZERO))
                contribs = bp.run(g, mul(seed, others(g)))
                if c.initializes:
                    update = ZERO if self.order.written_before(k) else None
                else:
                    update = mul(seed, others(n.Access(BEFORE, I)))
        elif red in ("max", "min"):
            wins = ">" if red == "max" else "<"
            if not has_red:  # X = max(X_old, g), ties half and half
                xo = n.Access(BEFORE, I)
                tie = n.Binary("==", g, xo)
                half = mul(const(0.5), seed)
                contribs = bp.run(g, select(tie, half, select(n.Binary(wins, g, xo), seed, ZERO)))
                update = select(tie, half, select(n.Binary(wins, xo, g), seed, ZERO))
            else:  # ties share the adjoint evenly (torch.amax)
                xn = n.Access(AFTER, I)
                cnt = self.names.fresh(f"{X}_cnt")
                all_r = self.ranges_of(st, st.vars)
                hit = n.Binary("==", g, xn)
                if c.initializes:
                    aux.append(n.Comprehension(cnt, I, "+=!", select(hit, ONE, ZERO), tuple(all_r)))
                else:
                    xo = n.Access(BEFORE, I)
                    aux.append(n.Comprehension(cnt, I, "=", select(n.Binary("==", xo, xn), ONE, ZERO),
                                               tuple(self.lhs_ranges(st))))
                    aux.append(n.Comprehension(cnt, I, "+=", select(hit, ONE, ZERO), tuple(all_r)))
                share = div(seed, n.Access(cnt, I))
                contribs = bp.run(g, select(hit, share, ZERO))
                if c.initializes:
                    update = ZERO if self.order.written_before(k) else None
                else:
                    update = select(n.Binary("==", n.Access(BEFORE, I), xn), share, ZERO)
        else:
            raise InternalError(f"reduction {c.op}")

        # reads of X itself
        self_adj = None
        others_: list[tuple[n.Access, n.Expr]] = []
        for a, d in contribs:
            if a.tensor == X:
                if ex.strip(a) == ex.strip(n.Access(X, I)):
                    if not (c.op == "=" or (c.op == "+=" and not has_red)):
                        raise TcSemanticError(f"cannot differentiate the statement writing '{X}': it reads the "
                                              f"element it updates with '{c.op}'", a.span or c.span)
                    self_adj = d if self_adj is None else ex.add(self_adj, d)
                    continue
                if not self.order.disjoint(k, a.indices):
                    raise TcSemanticError(f"cannot differentiate the statement writing '{X}': it reads elements "
                                          f"of '{X}' that it also writes", a.span or c.span)
            others_.append((a, d))
        if self_adj is not None:
            update = self_adj if c.op == "=" else ex.add(seed, self_adj)
            if update == seed:  # X = X + b: the adjoint passes through unchanged
                update = None

        # group the contributions by the element they reach
        groups: dict[tuple, list] = {}
        for a, d in others_:
            key = (a.tensor, tuple(expr_to_tc(i) for i in a.indices))
            if key in groups:
                groups[key][1] = ex.add(groups[key][1], d)
            else:
                groups[key] = [a, d]

        # the trick: a derivative that mentions the whole right-hand side reads the stored value
        rhs = c.rhs
        def trick(e):
            return ex.rewrite(e, lambda x: n.Access(AFTER, I) if isinstance(x, n.Expr) and x == rhs else None)
        exprs = [d for _, d in groups.values()] + ([update] if update is not None else [])
        use_trick = False
        if plain and any(any(x == rhs for x in n.walk(e)) for e in exprs):
            with_trick = sum(self._cost(trick(e), k) for e in exprs)
            without = sum(self._cost(e, k) for e in exprs)
            use_trick = with_trick <= without

        def finish(e):
            return self.resolve(trick(e) if use_trick else e, k)

        out: list = []
        for a in aux:
            out.append(replace(a, rhs=finish(a.rhs)))
        sinkable = not self._modifies[k] and not aux and not self.order.read_before(k) and not \
            self.order.written_before(k, only=[w for w in self.order.writers(X) if self._modifies[w]])
        for a, d in groups.values():
            stmt = self.gather(k, a.tensor, a.indices, finish(d))
            if stmt is not None:
                out.append(Contribution(stmt, sinkable, a.tensor))
        if update is not None:
            rng = self.ranges_of(st, [e.name for e in I if isinstance(e, n.IndexVar) and e.name in st.vars]) \
                if plain else self.lhs_ranges(st)
            value = finish(update) if not ex.is_const(update, 0) else n.Cast(self.info[X].dtype, n.Const(0))
            if not ex.is_const(update, 0):
                value = self._cast(value, X)
            out.append(n.Comprehension(self.adj[X], I, "=", value, tuple(rng)))
        return out

    # ------------------------------------------------------------ the sweep
    def reverse_block(self, stmts, loops: tuple[n.For, ...] = (), conds=()) -> list:
        out: list = []
        for s in reversed(stmts):
            match s:
                case n.Comprehension():
                    out += self.reverse_comp(self.by_comp[id(s)].id)
                case n.If():
                    then = self.reverse_block(s.then, loops, conds + ((s.cond, True),))
                    orelse = self.reverse_block(s.orelse, loops, conds + ((s.cond, False),))
                    out += _if(s.cond, then, orelse)
                case n.For():
                    body = self.reverse_block(s.body, loops + (s,), ())
                    body, sunk = self._sink(s, body, loops)
                    body = [_unwrap(b) for b in body]
                    if body:
                        flip = n.Binary("-", n.Binary("-", n.Binary("+", s.lo, s.hi) if not _zero(s.lo) else s.hi,
                                                      n.Const(1)), n.IndexVar(s.var))
                        body = [ex.substitute(b, {s.var: flip}) for b in body]
                        out.append(n.For(s.var, s.lo, s.hi, tuple(body)))
                    out += sunk
        return out

    def _sink(self, loop: n.For, body: list, outer: tuple[n.For, ...]):
        """Move the sinkable contributions of ``body`` (directly in it or under
        its ``if``s) after the loop, the loop variable becoming one of theirs."""
        written = {c.tensor for c in _comps(loop.body)}
        sunk: list = []

        def visit(items, conds):
            keep = []
            for it in items:
                if isinstance(it, Contribution) and it.sinkable and it.target not in written:
                    moved = self._sunk(loop, it.stmt, conds)
                    if moved is not None:
                        sunk.extend(_retarget(moved, it.target))
                        continue
                if isinstance(it, _IfItems):
                    then = visit(it.then, conds + ((it.cond, True),))
                    orelse = visit(it.orelse, conds + ((it.cond, False),))
                    keep += _if(it.cond, then, orelse)
                    continue
                keep.append(it)
            return keep
        return visit(body, ()), sunk

    def _sunk(self, loop: n.For, c: n.Comprehension, conds) -> list | None:
        """``c`` moved out of ``loop``: the steps at which it runs (the loop's
        range and the conditions on its variable) must be one interval, which
        becomes a where-range; conditions without the variable stay around it."""
        t = loop.var
        for i in c.indices:
            if t in ex.names_in(i) and not (isinstance(i, n.IndexVar) and i.name == t):
                return None
        for w in c.wheres:
            if isinstance(w, n.RangeConstraint) and (t in ex.names_in(w.lo) or t in ex.names_in(w.hi)):
                return None
        cond = n.Binary("&&", n.Binary("<=", loop.lo, n.IndexVar(t)), n.Binary("<", n.IndexVar(t), loop.hi))
        outer = []
        for cd, taken in conds:
            cd = cd if taken else n.Unary("!", cd)
            if t in ex.names_in(cd):
                cond = n.Binary("&&", cond, cd)
            else:
                outer.append(cd)
        interval = self._interval(t, cond)
        if interval is None:
            return None
        if self._one_step(t, interval):
            item = ex.substitute(c, {t: interval.lo})
        else:
            item = replace(c, wheres=c.wheres + (interval,))
        items: list = [Contribution(item, True, "")]
        for cd in reversed(outer):
            items = [_IfItems(cd, items, [])]
        return items

    def _one_step(self, t: str, r: n.RangeConstraint) -> bool:
        """``r`` holds exactly one value of ``t`` for every size."""
        from ..sema.affine import to_isl

        params = [p for p in self.ranges.params if p != t]
        try:
            s = isl.Set.read_from_str(self.ranges.ctx, params_prefix(params) + "{ : " + to_isl(
                n.Binary("!=", n.Binary("-", r.hi, r.lo), n.Const(1))) + " }")
        except (NotAffine, isl.Error):
            return False
        return s.intersect_params(self.ranges.size_context.align_params(s.get_space().params())).is_empty()

    def _interval(self, t: str, cond: n.Expr) -> n.RangeConstraint | None:
        """``where t in lo:hi`` for the values of ``t`` where ``cond`` holds, if they are one interval."""
        from ..sema.affine import to_isl

        params = [p for p in self.ranges.params if p != t]
        pre = params_prefix(params) + "{ [" + isl_name(t) + "] : "
        ctx = self.ranges.ctx
        try:
            s = isl.Set.read_from_str(ctx, pre + to_isl(cond) + " }")
            s = s.intersect_params(self.ranges.size_context.align_params(s.get_space().params()))
            if s.is_empty():
                return None
            lo = readable(s.dim_min(0), s.params())
            hi = readable(s.dim_max(0).add_constant_val(1), s.params())
            got = isl.Set.read_from_str(ctx, pre + to_isl(lo) + " <= " + isl_name(t) + " < " + to_isl(hi) + " }")
            got = got.intersect_params(self.ranges.size_context.align_params(got.get_space().params()))
            got = got.align_params(s.get_space().params())
            if not got.is_equal(s.align_params(got.get_space().params())):
                return None
        except (NotAffine, isl.Error):
            return None
        return n.RangeConstraint(t, lo, hi)

    # ------------------------------------------------------------ replay
    def replay_closure(self) -> None:
        work = list(self.replayed)
        while work:
            q = work.pop()
            for w in self.order.writers(q):
                for a in _reads(self.stmts[w].comp):
                    r = a.tensor
                    if r in self.replayed or self.info[r].role == "input":
                        continue
                    if self.info[r].role == "temp" or not self.is_final(r, a.indices, w, "before"):
                        self.replayed.add(r)
                        work.append(r)

    def replay_comp(self, st: StmtInfo) -> n.Comprehension:
        c = st.comp

        def fn(x):
            if isinstance(x, n.Access) and x.tensor in self.info:
                if x.tensor in self.replayed:
                    return n.Access(self.rep_name(x.tensor), x.indices)
                if self.info[x.tensor].role == "output":
                    return self.given(x.tensor, x.indices)
            return None
        rhs = ex.rewrite(ex.strip(c.rhs), fn)
        return n.Comprehension(self.rep_name(c.tensor), tuple(ex.strip(i) for i in c.indices),
                               c.op, rhs, tuple(self.ranges_of(st, st.vars)))

    def tape_comp(self, tape: Tape) -> n.Comprehension:
        src = self.rep_name(tape.tensor)
        ext = self.extent(tape.tensor)
        lhs: list[n.Expr] = [n.IndexVar(v) for v in tape.loops]
        idx: list[n.Expr] = []
        wheres = []
        for d, cov in enumerate(tape.cover):
            if cov is not None:
                idx.append(cov)
            else:
                v = self._local(f"i{d}", set())
                idx.append(n.IndexVar(v))
                wheres.append(n.RangeConstraint(v, n.Const(0), self._upper(tape.tensor, d)))
        return n.Comprehension(tape.name, tuple(lhs + idx), "=", n.Access(src, tuple(idx)), tuple(wheres))

    def replay_block(self, stmts) -> list:
        out: list = []
        for s in stmts:
            match s:
                case n.Comprehension():
                    st = self.by_comp[id(s)]
                    tapes = list({id(t): t for t in self.tapes.values()}.values())
                    out += [self.tape_comp(t) for t in tapes if t.stmt == st.id and t.when == "before"]
                    if s.tensor in self.replayed:
                        out.append(self.replay_comp(st))
                    out += [self.tape_comp(t) for t in tapes if t.stmt == st.id and t.when == "after"]
                case n.If():
                    out += _if(s.cond, self.replay_block(s.then), self.replay_block(s.orelse))
                case n.For():
                    body = self.replay_block(s.body)
                    if body:
                        out.append(n.For(s.var, s.lo, s.hi, tuple(body)))
        return out

    # ------------------------------------------------------------ program
    def program(self) -> n.Def:
        body_rev = [_unwrap(x) for x in self.reverse_block(self.node.body)]
        self.replay_closure()
        replay = self.replay_block(self.node.body)
        # an output's adjoint that the sweep only reads is the given d_<output> itself
        written = {c.tensor for c in _comps(body_rev)}
        alias = {self.adj[x]: self.d_out[x] for x in self.checked.outputs
                 if x in self.adj and self.adj[x] not in written and not self.fresh_dims.get(x)}
        if alias:
            body_rev = [ex.rewrite(b, lambda e: n.Access(alias[e.tensor], e.indices)
                                   if isinstance(e, n.Access) and e.tensor in alias else None) for b in body_rev]
        init: list = []
        for x in self.replayed:
            if self.info[x].role == "output":
                init.append(self._fill(self.rep_name(x), x, None))
        for x in self.info:
            if x in self.adj and self.adj[x] not in alias:
                src = self.d_out[x] if self.info[x].role == "output" else None
                init.append(self._fill(self.adj[x], x, src))
        tail = []
        for x in self.wrt:
            if x not in self.contributed:
                tail.append(self._fill(self.d_in[x], x, None))
        params = list(self.node.params)
        for o in self.checked.outputs:
            t = n.TensorType(self.info[o].dtype, self.out_sizes[o])
            params.append(n.Param(o, t))
        for o in self.checked.outputs:
            params.append(n.Param(self.d_out[o], n.TensorType(self.info[o].dtype, self.out_sizes[o])))
        outs = []
        for x in self.wrt:
            p = next(p for p in self.node.params if p.name == x)
            outs.append(n.Output(self.d_in[x], n.TensorType(p.type.dtype, p.type.dims)))
        body_rev = self._transposed(body_rev)
        body = tuple(self.transposes + replay + init + body_rev + tail)
        name = self.names.fresh(f"{self.node.name}_grad")
        return n.Def(name, tuple(params), tuple(outs), body)

    def _transposed(self, stmts: list) -> list:
        """Reads of an input whose last index is summed over while the
        statement's last index appears earlier in it (``a(t-1, b, ci) +=
        a(t, b, co) * h2h(ci, co)``: a product with the transposed weight) read
        a transposed copy instead, made once at the start, so that the
        innermost loop reads memory contiguously as the forward's does."""
        self.transposes: list[n.Comprehension] = []
        made: dict[tuple, str] = {}

        def comp(c: n.Comprehension) -> n.Comprehension:
            if c.op != "+=" or not c.indices or not isinstance(c.indices[-1], n.IndexVar):
                return c
            j = c.indices[-1].name
            lhs_vars = {i.name for i in c.indices if isinstance(i, n.IndexVar)}

            def fn(x):
                if not (isinstance(x, n.Access) and x.tensor in self.info and self.info[x.tensor].role == "input"
                        and len(x.indices) >= 2):
                    return None
                last = x.indices[-1]
                if not (isinstance(last, n.IndexVar) and last.name not in lhs_vars):
                    return None
                pos = [p for p, i in enumerate(x.indices[:-1]) if isinstance(i, n.IndexVar) and i.name == j]
                if not pos:
                    return None
                p = pos[0]
                key = (x.tensor, p)
                if key not in made:
                    made[key] = self._transpose(x.tensor, p)
                idx = list(x.indices)
                idx[p], idx[-1] = idx[-1], idx[p]
                return n.Access(made[key], tuple(idx))
            return replace(c, rhs=ex.rewrite(c.rhs, fn))

        def walk(items):
            out = []
            for it in items:
                match it:
                    case n.Comprehension():
                        out.append(comp(it))
                    case n.For():
                        out.append(replace(it, body=tuple(walk(it.body))))
                    case n.If():
                        out.append(replace(it, then=tuple(walk(it.then)), orelse=tuple(walk(it.orelse))))
                    case _:
                        out.append(it)
            return out
        return walk(stmts)

    def _transpose(self, tensor: str, p: int) -> str:
        name = self.names.fresh(f"{tensor}_T")
        dims = self.info[tensor].dims
        vs = [self._local(f"i{d}", set()) for d in range(len(dims))]
        src = [n.IndexVar(v) for v in vs]
        dst = list(src)
        dst[p], dst[-1] = dst[-1], dst[p]
        wheres = tuple(n.RangeConstraint(v, n.Const(0), n.SizeVar(d) if isinstance(d, str) else n.Const(d))
                       for v, d in zip(vs, dims))
        self.transposes.append(n.Comprehension(name, tuple(dst), "=", n.Access(tensor, tuple(src)), wheres))
        return name

    def _fill(self, name: str, like: str, src: str | None) -> n.Comprehension:
        """``name(i, ...) = src(i, ...)`` (or 0) over the extent of ``like``."""
        ext = self.extent(like)
        vs = [self._local(f"i{d}", set()) for d in range(len(ext))]
        wheres = tuple(n.RangeConstraint(v, n.Const(0), self._upper(like, d)) for d, v in enumerate(vs))
        idx = tuple(n.IndexVar(v) for v in vs)
        rhs = n.Cast(self.info[like].dtype, n.Const(0))
        if src:
            rhs = n.Access(src, idx)
            cond = None
            for d, size in self.fresh_dims.get(like, {}).items():
                cond = ex.land(cond, n.Binary("<", idx[d], n.SizeVar(size)))
            if cond is not None:
                rhs = n.Select(cond, rhs, n.Cast(self.info[like].dtype, n.Const(0)))
        return n.Comprehension(name, idx, "=", rhs, wheres)


def _retarget(items: list, target: str) -> list:
    out = []
    for it in items:
        if isinstance(it, Contribution):
            out.append(Contribution(it.stmt, True, target))
        else:
            out.append(_IfItems(it.cond, _retarget(it.then, target), _retarget(it.orelse, target)))
    return out


@dataclass
class _IfItems:
    cond: n.Expr
    then: list
    orelse: list


def _if(cond, then: list, orelse: list) -> list:
    if not then and not orelse:
        return []
    if any(isinstance(x, (Contribution, _IfItems)) for x in then + orelse):
        return [_IfItems(cond, then, orelse)]
    if not then:
        return [n.If(n.Unary("!", cond), tuple(orelse))]
    return [n.If(cond, tuple(then), tuple(orelse))]


def _unwrap(x):
    if isinstance(x, Contribution):
        return x.stmt
    if isinstance(x, _IfItems):
        then = [_unwrap(y) for y in x.then]
        orelse = [_unwrap(y) for y in x.orelse]
        return _if(x.cond, then, orelse)[0]
    return x


def _zero(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and e.value == 0


def _comps(stmts):
    for s in stmts:
        match s:
            case n.For():
                yield from _comps(s.body)
            case n.If():
                yield from _comps(s.then)
                yield from _comps(s.orelse)
            case n.Comprehension():
                yield s


def adjoint_def(checked: CheckedDef, ranges: RangeInfo, wrt=None) -> tuple[n.Def, "Adjoint"]:
    a = Adjoint(checked, ranges, wrt)
    return a.program(), a


def adjoint_text(checked: CheckedDef, ranges: RangeInfo, wrt=None) -> str:
    d, _ = adjoint_def(checked, ranges, wrt)
    return to_tc(d)
