"""The reverse sweep of an adjoint (``Adjoint``'s statement-level steps):
each forward statement's contributions in reverse order, loops reversed and
contributions sunk out of them, the replay of overwritten values, and the
transposed copies of weights; with the small records they share."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl

from ..errors import InternalError, TcSemanticError
from ..sema import builtins as bt
from ..sema.affine import NotAffine, params_prefix, isl_name
from ..sema.ranges import StmtInfo, readable
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc
from . import exprs as ex
from .exprs import ONE, ZERO, const, div, mul, select
from .order import _reads
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




class ReverseSteps:
    """The statement-level half of :class:`adjoint.Adjoint` (a mixin: it uses
    the tapes, names and ranges the other half keeps)."""

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
        written = {c.tensor for c in n.comprehensions(loop.body)}
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
            if not self._every_size(t, cond):
                return None  # the step is missing for an empty size: it stays in the loop
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

    def _every_size(self, t: str, cond: n.Expr) -> bool:
        """Some ``t`` meets ``cond`` for every size >= 0, also at a call with an
        empty size (sizes of 0 are outside the context the ranges were inferred
        in): ``t == 0`` in ``for t in T`` is missing at ``T = 0``, where the
        step, substituted after the loop, would read ``a(0, ...)`` of an empty
        tensor."""
        from ..sema.affine import to_isl

        sizes = [p for p in self.ranges.params if p != t]
        pre = params_prefix(sizes) + "{ [" + isl_name(t) + "] : "
        try:
            s = isl.Set.read_from_str(self.ranges.ctx, pre + to_isl(cond) + " }")
            every = isl.Set.read_from_str(self.ranges.ctx, params_prefix(sizes) + "{ : " + " and ".join(
                [f"{isl_name(p)} >= 0" for p in sizes] or ["true"]) + " }")
            every = every.align_params(s.get_space().params())
            return every.is_subset(s.params().align_params(every.get_space()))
        except (NotAffine, isl.Error):
            return False

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
        written = {c.tensor for c in n.comprehensions(body_rev)}
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
        wheres = tuple(n.RangeConstraint(v, n.Const(0), n.SizeVar(d) if isinstance(d, str) else
                                         n.Const(d) if isinstance(d, int) else d)  # d: an expression (2 * H)
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
