"""A sum into the rows an index names, on the CPU: a scatter-add.

The kernel holds one statement that polyhedral/scatter.py recognized,
``X(.., u, ..) += (u == g ? e : 0)`` (or ``u == g && w == h``: both
bound, as ``gu``); it runs as

    X = 0                                   (the init of ``+=!``, if any)
    for pc in parallel(chunks of p):        p: the first other lhs variable
      for r..:                              the reduction variables, in order
        gu = g                              (inside the lhs loops if g uses them)
        if lo_u <= gu < hi_u:
          for p in chunk, for the other lhs variables:
            X(.., gu, ..) += e[u := gu]

Each thread owns a chunk of ``p`` (64 values), so no two threads add to one
element, and each element receives its terms in the order of the reduction
variables, as a sum over them does.  The ranges are the domain's bounds
(a box, checked by polyhedral/scatter.py), written by isl over the sizes.

Where the reads run along the innermost reduction variable and none along
``p`` (``sd(i, c) +=! lab(j) == c ? dist(i, j) : 0``: a vector over ``i``
would read ``dist`` down a column and write ``sd`` at stride ``C``), the
lhs loops go outside instead, in blocks of 4 values of ``p`` per task
(``_rows``): ``for pb (parallel) { for r.. { gu = g; if ..: X(p, gu) += e
for the block's 4 p (unrolled) } }``, each read along its rows.  Where
the lhs element names ``p`` and ``u`` only, ``g`` does not read ``p``, and
``u``'s range is no longer than a row's terms, the block's elements are
summed in an accumulator whose vector lanes are its 4 values of ``p``
(``_lanes``): one vector update per term.
"""
from __future__ import annotations

import functools
from dataclasses import replace

import islpy as isl
from tvm import tirx

from ..polyhedral.model import Kernel
from ..polyhedral.schedule import fixed_set
from ..syntax import nodes as n
from .expr import INDEX, lower_expr, physical
from .lower import emit_statement, from_zero, seq

CHUNK = 64  # values of the parallel variable per task (at most)
LANES = 16  # (in vectors of)
ROWS = 4  # values of the first lhs variable per block where the reductions run inside (``_rows``)


def scatter_kernel(gen, k: Kernel, env: dict, step=None) -> tirx.Stmt | None:
    """The kernel ``k`` (``k.scatter`` set) as a TIR statement.  ``step``: the
    program's sequential loop whose body ``k`` is alone (``for n in N {
    dE(v, d) += idx(n) == v ? dy(n, d) : 0 }``, an embedding's gradient token
    by token): that loop inside each task's chunk, ``for pc (parallel) { for
    n { ... } }``, one parallel region instead of one per step (each task
    still owns its chunk's elements at every step); None where that does not
    hold (an initialization in the loop, a read of the tensor written, no
    chunks)."""
    sc = k.scatter
    update = next(s for s in k.stmts if s.name == sc.stmt and not s.is_init)
    init = next((s for s in k.stmts if s.is_init), None)
    comp = update.info.comp
    if step is not None:
        reads = [x for e in [sc.rhs] + [g for _, g in sc.picks] for x in n.walk(e) if isinstance(x, n.Access)]
        if init is not None or not gen.cpu.parallel or any(a.tensor == comp.tensor for a in reads):
            return None
        lo, hi = (lower_expr(b, env, {}, INDEX) for b in (step.lo, step.hi))
        step_var = tirx.Var(step.var, INDEX)
        env = {**env, step.var: from_zero(lo, step_var)}
    low = gen.ast_lowering(gen, {s.name: s for s in k.stmts}, env, k)
    fixed = {s: int(v.value) for s, v in gen.sig.size_vars.items() if isinstance(v, tirx.IntImm)}
    context = k.context & fixed_set(gen.model, fixed).align_params(k.context.get_space())
    build = isl.AstBuild.from_context(context)
    buffers = gen.sig.buffers

    def never(s) -> bool:  # (no instance at the sizes fixed: ``if t > 0`` in a loop of one step)
        return s is None or s.domain.intersect_params(context.align_params(s.domain.get_space())).is_empty()
    parallel = gen.cpu.parallel

    def bounds(dom: isl.Set, i: int) -> tuple[tirx.PrimExpr, tirx.PrimExpr]:
        lo = low.expr(build.expr_from_pw_aff(dom.dim_min(i)))
        hi = low.expr(build.expr_from_pw_aff(dom.dim_max(i)))
        return lo, hi - lo + 1

    def when(stmt: tirx.Stmt, s=None) -> tirx.Stmt:
        """``stmt`` where the statement ``s`` (the update) runs: an ``if`` of the
        program (``t == 0``) and the sizes for which its domain is not empty."""
        runs = (s or update).domain.params()
        if k.context.is_subset(runs):
            return stmt
        return tirx.IfThenElse(low.expr(build.expr_from_set(runs)), stmt, None)

    zero = None
    if init is not None and not never(init):
        ranges = {v: bounds(init.domain, i) for i, v in enumerate(init.dims)}
        loops = [(v, *ranges[v]) for v in init.dims]
        zero = when(_nest(loops, lambda e: emit_statement(init, {**low.env, **e}, buffers), parallel), init)

    if never(update):
        return zero if zero is not None else (None if step is not None else tirx.Evaluate(0))
    lhs = [e.name for e in comp.indices if isinstance(e, n.IndexVar) and e.name in update.dims]
    picked = {v for v, _ in sc.picks}
    others = [v for v in lhs if v not in picked]
    reduce = [v for v in update.dims if v not in lhs]
    ranges = {v: bounds(update.domain, i) for i, v in enumerate(update.dims)}
    stmt = replace(update, info=replace(update.info, comp=replace(comp, rhs=sc.rhs)))
    g_inner = any(n.names_in(g) & set(others) for _, g in sc.picks)

    def guarded(body_env: dict, inner) -> tirx.Stmt:
        binds, conds, rows = [], [], {}
        for v, g in sc.picks:
            gu, (lo, count) = tirx.Var(f"{v}_row", INDEX), ranges[v]
            binds.append(tirx.Bind(gu, lower_expr(g, {**low.env, **body_env}, buffers, INDEX)))
            conds += [lo <= gu, gu < lo + count]
            rows[v] = gu
        cond = conds[0]
        for c in conds[1:]:
            cond = tirx.And(cond, c)
        return seq(binds + [tirx.IfThenElse(cond, inner({**body_env, **rows}), None)])

    def store(e: dict) -> tirx.Stmt:
        return emit_statement(stmt, {**low.env, **e}, buffers)

    inner_loops = [(v, *ranges[v]) for v in others]
    reduce_loops = [(v, *ranges[v]) for v in reduce]
    if others and reduce and _along_reduction(sc, others[0], reduce[-1]):  # rows outside, blocks per task
        if step is not None and not parallel:
            return None
        p, p_lo, p_n = inner_loops[0]
        pb = tirx.Var(f"{p}_block", INDEX)

        def steps(s: tirx.Stmt) -> tirx.Stmt:
            return s if step is None else tirx.For(step_var, 0, tirx.max(hi - lo, 0), tirx.ForKind.SERIAL, when(s))
        lanes = None
        if not g_inner and others == [p] and not sc.more and \
                all(not n.names_in(e) & set(update.dims) or e == n.IndexVar(p) or e == n.IndexVar(sc.var)
                    for e in comp.indices):  # (the lhs element names p and u only)
            def element(pv, uv) -> tuple:
                idx = [lower_expr(e, {**low.env, p: pv, sc.var: uv}, buffers, INDEX) for e in comp.indices]
                return physical(buffers[comp.tensor], idx)

            def added(e: dict, into: tuple) -> tirx.Stmt:
                return emit_statement(stmt, {**low.env, **e}, buffers, into)
            lanes = (ranges[sc.var][1], lambda first: _lanes(p, p_lo + first, sc.var, ranges[sc.var], element,
                                                             reduce_loops, guarded, steps, added))
        body = _rows(pb, inner_loops, reduce_loops, guarded, store, g_inner, steps, lanes)
        loop = tirx.For(pb, 0, tirx.floordiv(tirx.max(p_n, 0) + ROWS - 1, ROWS),
                        tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL, body)
        return loop if step is not None else seq([zero, when(loop)])
    if parallel and others:  # chunks of the first other lhs variable, one per task
        p, p_lo, p_n = inner_loops[0]
        pc, pi, po = (tirx.Var(f"{p}_{x}", INDEX) for x in ("chunk", "in", "o"))
        # CHUNK values per task, fewer (16, 32, 48) where that leaves fewer than two tasks per
        # thread (a transposed sparse product's 64 columns: one task, one thread)
        cw = tirx.Var(f"{p}_width", INDEX)
        tasks = 2 * max(gen.cpu.threads, 1) * LANES
        per = tirx.max(tirx.min(tirx.floordiv(tirx.max(p_n, 0) + tasks - 1, tasks), CHUNK // LANES), 1) * LANES

        def lhs_nest(e: dict, leaf) -> tirx.Stmt:
            width = tirx.min(cw, p_n - pc * cw)

            def loop(i, count, kind, at=None) -> tirx.Stmt:
                first = p_lo + pc * cw + (i if at is None else at)
                inner = _nest(inner_loops[1:], lambda h: leaf({**e, p: first, **h}), False)
                return tirx.For(i, 0, count, kind, inner)
            if inner_loops[1:] or g_inner:
                return loop(pi, width, tirx.ForKind.SERIAL)
            # a whole chunk of the innermost variable in vectors, the last (narrower) one element by element
            vectors = tirx.For(po, 0, tirx.floordiv(cw, LANES), tirx.ForKind.SERIAL,
                               loop(pi, LANES, tirx.ForKind.VECTORIZED, po * LANES + pi))
            return tirx.IfThenElse(width == cw, vectors,
                                   loop(tirx.Var(f"{p}_rest", INDEX), width, tirx.ForKind.SERIAL))

        def outer(body: tirx.Stmt) -> tirx.Stmt:
            count = tirx.floordiv(tirx.max(p_n, 0) + cw - 1, cw)
            return seq([tirx.Bind(cw, per), tirx.For(pc, 0, count, tirx.ForKind.PARALLEL, body)])
    else:
        def lhs_nest(e: dict, leaf) -> tirx.Stmt:
            return _nest(inner_loops, lambda h: leaf({**e, **h}), False)

        def outer(body: tirx.Stmt) -> tirx.Stmt:
            return body
    private = None
    if parallel and not others and reduce and step is None and not sc.more and comp.op in _COMBINE \
            and not any(isinstance(x, n.Access) and x.tensor == comp.tensor
                        for e in (sc.rhs, sc.index) for x in n.walk(e)):
        private = _private(sc.var, ranges[sc.var], reduce_loops, guarded, buffers[comp.tensor].dtype, comp.op,
                           lambda uv: physical(buffers[comp.tensor], [lower_expr(
                               e, {**low.env, sc.var: uv}, buffers, INDEX) for e in comp.indices]),
                           lambda f, into: emit_statement(stmt, {**low.env, **f}, buffers, into))
    if g_inner:  # the index depends on the lhs variables: read it per element
        body = _nest(reduce_loops, lambda e: lhs_nest(e, lambda f: guarded(f, store)), False)
    else:  # once per instance of the reduction variables, for all the lhs loops
        body = _nest(reduce_loops, lambda e: guarded(e, lambda f: lhs_nest(f, store)), False)
    if step is not None:
        if not (parallel and others):
            return None
        return outer(tirx.For(step_var, 0, tirx.max(hi - lo, 0), tirx.ForKind.SERIAL, when(body)))
    if private is not None:
        body = tirx.IfThenElse(private[0], private[1], body)
    return seq([zero, when(outer(body))])


# op -> (combine, its identity for a dtype: -inf/inf for floats, the type's extremes for integers)
_COMBINE = {"+=!": (tirx.Add, lambda t: tirx.const(0, t)), "+=": (tirx.Add, lambda t: tirx.const(0, t)),
            "max=!": (tirx.Max, lambda t: tirx.const(float("-inf"), t) if "float" in t else tirx.min_value(t)),
            "min=!": (tirx.Min, lambda t: tirx.const(float("inf"), t) if "float" in t else tirx.max_value(t))}
PRIVATE_MAX = 16384  # elements of a destination that each task may sum into a copy of its own
PRIVATE_TERMS = 4096  # terms per task, at least (and at least 4 per element of its copy)
PRIVATE_TASKS = 64


def _private(u: str, u_range: tuple, reduce_loops: list, guarded, dtype: str, op: str, element, update) -> tuple:
    """(condition, statement): a sum into the few rows an index names, with
    no other lhs variable to share among tasks (``wn(l) +=! layer(i) == l ?
    w(i) * w(i) : 0``, a LAMB step's norms per layer), as tasks over chunks of
    the outermost reduction variable, each into a copy of its own, added in
    task order after them::

        P(c, u) = identity
        for c in parallel(tasks):  for r in chunk c, for r..:  gu = g;  if lo_u <= gu < hi_u:  P(c, gu) += e
        for u:  for c:  X(u) += P(c, u)

    The number of tasks depends on the sizes only (the same sums on every
    machine); the condition: the copies are small (``PRIVATE_MAX``) and
    there are two tasks at least, each of ``PRIVATE_TERMS`` and four terms
    per element of its copy (else the serial loop runs)."""
    combine, identity = _COMBINE[op]
    u_lo, u_n = u_range
    (r, r_lo, r_n), rest = reduce_loops[0], reduce_loops[1:]
    terms = functools.reduce(lambda a, b: a * b, [tirx.max(c, 0) for _, _, c in reduce_loops])
    tasks = tirx.min(PRIVATE_TASKS, tirx.floordiv(terms, tirx.max(tirx.max(u_n, 1) * 4, PRIVATE_TERMS)))
    cond = tirx.And(u_n <= PRIVATE_MAX, tasks >= 2)
    tv = tirx.Var(f"{u}_tasks", INDEX)
    width = tirx.floordiv(tirx.max(u_n, 1) + 15, 16) * 16  # (each task's copy in cache lines of its own)
    copy = tirx.decl_buffer((tirx.max(tv, 1) * width,), dtype, name=f"{u}_private")
    c, j, w, ri, z = (tirx.Var(name, INDEX) for name in (f"{r}_task", f"{u}_each", f"{u}_from", f"{r}_in", f"{u}_z"))
    clear = tirx.For(z, 0, tv * width, tirx.ForKind.SERIAL, tirx.BufferStore(copy, identity(dtype), [z]))
    per = tirx.floordiv(r_n + tv - 1, tv)

    def add(f: dict) -> tirx.Stmt:
        return update(f, (copy, [c * width + (f[u] - u_lo)]))
    inner = _nest(rest, lambda e: guarded({**e, r: r_lo + c * per + ri}, add), False)
    sums = tirx.For(c, 0, tv, tirx.ForKind.PARALLEL,
                    tirx.For(ri, 0, tirx.max(tirx.min(per, r_n - c * per), 0), tirx.ForKind.SERIAL, inner))
    buf, idx = element(u_lo + j)
    back = tirx.For(j, 0, u_n, tirx.ForKind.SERIAL, tirx.For(w, 0, tv, tirx.ForKind.SERIAL, tirx.BufferStore(
        buf, combine(tirx.BufferLoad(buf, idx), tirx.BufferLoad(copy, [w * width + j])), idx)))
    return cond, seq([tirx.Bind(tv, tasks), tirx.AllocBuffer(copy), clear, sums, back])


def _nest(loops: list, body, parallel: bool) -> tirx.Stmt:
    """Loops ``(name, first, count)`` around ``body(env)``; the outermost
    parallel when ``parallel``."""
    env: dict = {}
    vs = []
    for name, lo, _ in loops:
        v = tirx.Var(name, INDEX)
        vs.append(v)
        env[name] = lo + v
    out = body(env)
    for i in range(len(loops) - 1, -1, -1):
        kind = tirx.ForKind.PARALLEL if parallel and i == 0 else tirx.ForKind.SERIAL
        out = tirx.For(vs[i], 0, tirx.max(loops[i][2], 0), kind, out)
    return out


def _along_reduction(sc, p: str, r: str) -> bool:
    """Whether the reads of the term (and of the picked indices) run along the
    innermost reduction variable ``r``, not along ``p``, the lhs variable the
    chunks would vector: some read has ``r`` in its last index and ``p`` in
    another (``dist(i, j)`` of ``sd(i, c) +=! lab(j) == c ? dist(i, j) : 0``),
    none has ``p`` in its last index (``dy(n, d)`` of an embedding's
    gradient keeps its vectors along ``d``)."""
    reads = [x for e in [sc.rhs] + [g for _, g in sc.picks] for x in n.walk(e)
             if isinstance(x, n.Access) and x.indices]
    if any(p in n.names_in(a.indices[-1]) for a in reads):
        return False
    return any(r in n.names_in(a.indices[-1]) and any(p in n.names_in(i) for i in a.indices[:-1]) for a in reads)


def _rows(pb: tirx.Var, inner_loops: list, reduce_loops: list, guarded, store, g_inner: bool, steps,
          lanes) -> tirx.Stmt:
    """The block ``pb`` of ``ROWS`` values of the first lhs variable ``p``,
    the reduction loops inside the lhs loops (each read then moves along its
    contiguous axis)::

        if the block is whole:
          for the other lhs variables, for r..:
            gu = g;  if lo_u <= gu < hi_u:  for p in the block (unrolled):  X(.., gu, ..) += e
        else:  for p left, for the other lhs variables, for r..:  the same, one p at a time

    Each element still receives its terms in the order of the reduction
    variables; ``g`` is read once for the block's rows unless it reads the
    lhs variables."""
    (p, p_lo, p_n), rest = inner_loops[0], inner_loops[1:]

    def block(first: tirx.PrimExpr, count, kind) -> tirx.Stmt:
        k = tirx.Var(f"{p}_in", INDEX)

        def each(e: dict, leaf) -> tirx.Stmt:
            if count == 1:
                return leaf({**e, p: p_lo + first})
            return tirx.For(k, 0, count, kind, leaf({**e, p: p_lo + first + k}))
        if g_inner:
            inner = lambda e: each(e, lambda f: guarded(f, store))  # noqa: E731
        else:
            inner = lambda e: guarded(e, lambda f: each(f, store))  # noqa: E731
        return _nest(rest, lambda h: _nest(reduce_loops, lambda e: inner({**h, **e}), False), False)
    last = tirx.Var(f"{p}_last", INDEX)
    one = block(pb * ROWS + last, 1, tirx.ForKind.SERIAL)
    whole = steps(block(pb * ROWS, ROWS, tirx.ForKind.UNROLLED))
    if lanes is not None:  # the block's elements in vector lanes where they are no more than the terms of a row
        terms = functools.reduce(lambda a, b: a * b, [tirx.max(c, 0) for _, _, c in reduce_loops])
        whole = tirx.IfThenElse(lanes[0] <= terms, lanes[1](pb * ROWS), whole)
    return tirx.IfThenElse(pb * ROWS + ROWS <= p_n, whole,
                           steps(tirx.For(last, 0, p_n - pb * ROWS, tirx.ForKind.SERIAL, one)))


def _lanes(p: str, first: tirx.PrimExpr, u: str, u_range: tuple, element, reduce_loops: list, guarded, steps,
           update) -> tirx.Stmt:
    """The block of ``ROWS`` values of ``p`` from ``first`` with its elements
    ``X(p, u)`` in an accumulator ``acc(u, p)`` (the block's values of ``p``
    its vector lanes), copied in before the sums and out after them::

        acc(u, p) = X(p, u)  (all u, the block's p)
        for r..:  gu = g;  if lo_u <= gu < hi_u:  acc(gu, p) += e  (the block's p in one vector)
        X(p, u) = acc(u, p)

    one vector update per term instead of one scalar per row (each lane
    reads its row of the term); the terms of each element keep their order.
    ``element(p, u)``: the buffer and indices of ``X(p, u)``; ``update(env,
    into)``: the statement adding its term to ``into``."""
    u_lo, u_n = u_range
    buf, _ = element(first, u_lo)
    acc = tirx.decl_buffer((tirx.max(u_n, 1) * ROWS,), buf.dtype, name=f"{buf.name}_lanes")
    ci, ki, co, ko, k = (tirx.Var(name, INDEX) for name in (f"{u}_in", f"{p}_in", f"{u}_out", f"{p}_out", f"{p}_lane"))
    load = tirx.For(ci, 0, u_n, tirx.ForKind.SERIAL, tirx.For(ki, 0, ROWS, tirx.ForKind.UNROLLED, tirx.BufferStore(
        acc, tirx.BufferLoad(*element(first + ki, u_lo + ci)), [ci * ROWS + ki])))

    def add(f: dict) -> tirx.Stmt:
        return tirx.For(k, 0, ROWS, tirx.ForKind.VECTORIZED, update({**f, p: first + k}, (acc, [(f[u] - u_lo) * ROWS + k])))
    sums = steps(_nest(reduce_loops, lambda e: guarded(e, add), False))
    out_buf, out_idx = element(first + ko, u_lo + co)
    back = tirx.For(ko, 0, ROWS, tirx.ForKind.UNROLLED, tirx.For(co, 0, u_n, tirx.ForKind.SERIAL, tirx.BufferStore(
        out_buf, tirx.BufferLoad(acc, [co * ROWS + ko]), out_idx)))
    return seq([tirx.AllocBuffer(acc), load, sums, back])
