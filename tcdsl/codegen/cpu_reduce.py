"""Vectorized reductions along an innermost loop (codegen/cpu.py).

isl cannot mark a loop parallel when a statement in it accumulates into an
element that does not move with the loop -- a row's maximum or sum,
``mx(n) max=! x(n, c)``, softmax's ``s(n) +=! e(n, c)``, a dot product
``sc(i, j) +=! q(i, d) * k(j, d)`` -- so the innermost loop would run one
element at a time with one accumulator, and LLVM may not reorder a float
sum to vectorize it.  :func:`vector_reduction` runs such a loop as vector
iterations of ``lanes`` elements:

* each accumulating statement gets ``lanes`` partial accumulators (a local
  buffer, registers after LLVM), started at the reduction's identity;
* every other statement of the loop stores stride-1 in the loop's variable
  (a map over the row, as softmax's ``e(n, c)``), so its lanes are the
  elements of consecutive iterations;
* after every block of ``block`` vector iterations the partials are combined
  (a balanced tree) into the element -- a float32 sum's blocks into a
  float64 total first, added to the element once --, then a scalar loop
  does the rest.

Legal when nothing but the accumulators carries a value from one iteration
to the next: an accumulating statement reads no element that the loop
writes and no other statement reads or writes its tensor, and every read of
a tensor that the loop stores is of the element stored in the same
iteration.  A sum then adds in another order than ``for c`` (lanes, then
blocks, as NumPy's pairwise summation): in float32 the rounding error grows
with the block's length instead of the row's.
"""
from __future__ import annotations

import functools

import islpy as isl
from tvm import sym, tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT
from ..sema import types as ty
from .expr import INDEX, dtype_of
from .formulas import is_nan
from .lower import coefficient, is_if_then_else, loads, seq, uses, with_bindings
from .scratch import STACK

_ASSOCIATIVE = ("+", "*", "min", "max")


def _calls(node: isl.AstNode) -> list | None:
    """The statement calls of a loop body made of calls only (else None)."""
    t = node.get_type()
    if t == NT.user:
        return [node.user_get_expr()]
    if t == NT.block:
        out = []
        for x in isl_ast.children(node):
            c = _calls(x)
            if c is None:
                return None
            out += c
        return out
    return None


def _same_element(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    an = sym.Analyzer()
    return all(an.can_prove_equal(x, y) for x, y in zip(a, b))


def _index_loads(idx: list) -> list:
    return [ld for x in idx for ld in loads(x)]


def _bound_parts(low, call):
    """(buffer, indices, value, bindings, combine) of a statement instance, a
    formula's argument that holds another formula bound first
    (``formulas.bindings``; the bindings as ``Bind`` statements)."""
    (buf, idx, value, combine), binds = with_bindings(lambda: low.statement_parts(call))
    return buf, idx, value, [tirx.Bind(v, x) for v, x in binds], combine


def _lanes_init(acc: tirx.Buffer, name: str, lanes: int, reduction: str) -> tirx.Stmt:
    lane = tirx.Var(name + "_l", INDEX)
    ident = tirx.const(ty.identity(reduction, str(acc.dtype)), acc.dtype)
    return tirx.For(lane, 0, lanes, tirx.ForKind.VECTORIZED, tirx.BufferStore(acc, ident, [lane]))


def _lanes_combined(acc: tirx.Buffer, lanes: int, combine, row=None) -> tirx.PrimExpr:
    """The partial accumulators (of ``row`` of a 2-d ``acc``) combined by a
    balanced tree: a float vector's halves added as vectors, lane ``i`` with
    lane ``i + lanes / 2`` (four vector steps for 16 lanes; each lane
    extracted and added alone cost 15 scalar additions per sum: 5 ns for a
    sum of 16 floats, 3x ``torch.pdist`` at D = 16)."""
    at = [] if row is None else [row]
    if lanes < 2 or lanes & (lanes - 1) or not str(acc.dtype).startswith("float"):
        return _tree([tirx.BufferLoad(acc, at + [tirx.const(i, INDEX)]) for i in range(lanes)], combine)
    value = tirx.BufferLoad(acc, at + [tirx.Ramp(tirx.const(0, INDEX), tirx.const(1, INDEX), lanes)])
    bound, width = [], lanes
    while width > 1:
        half = width // 2
        x = tirx.Var(f"{acc.name}_{width}", f"{acc.dtype}x{width}")
        bound.append((x, value))
        value = combine(tirx.Shuffle([x], [tirx.const(i, "int32") for i in range(half)]),
                        tirx.Shuffle([x], [tirx.const(i, "int32") for i in range(half, width)]))
        width = half
    for x, v in reversed(bound):
        value = tirx.Let(x, v, value)
    return value


def _elsewhere(a: list, b: list, loop_vars) -> bool:
    """Element ``a`` does not move with the loop and is provably not ``b``
    (in some dimension: ``t - 1`` against ``t``)."""
    if len(a) != len(b) or any(uses(x, v) for x in a for v in loop_vars):
        return False
    an = sym.Analyzer()
    return any(an.can_prove(tirx.NE(x, y)) for x, y in zip(a, b))


def _arg_parts(value, buf, idx):
    """``(e at j, e at the index held, comparison)`` of an arg-reduction's
    lowered value, ``held < 0 ? j : (e(j) < e(held) ? j : held)``
    (sema/sizes.py ``arg_reduction``), or None."""
    inner = value.args[2] if is_if_then_else(value) else value.false_value if isinstance(value, tirx.Select) else None
    if is_if_then_else(inner):
        better = inner.args[0]
    elif isinstance(inner, tirx.Select):  # (codegen/expr.py rule 3: its clamped read is a gather's)
        better = inner.condition
    else:
        return None
    if not isinstance(better, (tirx.LT, tirx.GT)) or str(buf.dtype) != "int32" \
            or dtype_of(better.a) not in ("float32", "float64", "int32", "int64", "int8", "int16"):
        return None
    return better.a, better.b, type(better)


def _tree(vals: list, combine) -> tirx.PrimExpr:
    """``vals`` combined by a balanced tree."""
    while len(vals) > 1:
        vals = [combine(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i] for i in range(0, len(vals), 2)]
    return vals[0]


def _arg_lanes(buf, idx, ebuf, eidx, arg, j, init, vi, lanes: int):
    """An arg-reduction in lanes: each lane keeps the value and the index of
    its best element so far, as the scalar statement would over the lane's
    elements (a NaN is taken only as the very first element, where nothing
    is held yet); after each block the lanes are folded without branches
    (the best value, then the smallest index holding it) and the result
    replaces the element where it is strictly better than the value at the
    index held (earlier blocks hold smaller indices).  Returns (buffers,
    step, lane inits, fold)."""
    e, eh, better = arg
    vdt, zero = dtype_of(e), tirx.const(0, INDEX)
    bv = tirx.decl_buffer((lanes,), vdt, name=buf.name + "_lv", scope=STACK)
    bi = tirx.decl_buffer((lanes,), "int32", name=buf.name + "_li", scope=STACK)
    cv = tirx.decl_buffer((1,), vdt, name=buf.name + "_cv", scope=STACK)
    ci = tirx.decl_buffer((1,), "int32", name=buf.name + "_ci", scope=STACK)
    held = tirx.BufferLoad(buf, idx)
    j32 = tirx.Cast("int32", j) if dtype_of(j) != "int32" else j
    first = tirx.And(tirx.EQ(j, init), held < 0)
    # (tested on its bits: TVM and LLVM fold a float ``e == e`` to true)
    ok = tirx.Or(tirx.Not(is_nan(e, vdt)), first) if "float" in vdt else tirx.const(True, "bool")
    lv, li = tirx.BufferLoad(bv, [vi]), tirx.BufferLoad(bi, [vi])
    # the choice kept in lanes of int32 (a bool let does not vectorize, and a
    # let of a select's value loses its binding in TVM's vectorizer), so that
    # the value and the index are each one select away from the comparison
    tk = tirx.decl_buffer((lanes,), "int32", name=buf.name + "_tk", scope=STACK)
    take = tirx.Select(tirx.Or(better(e, lv), tirx.And(li < 0, ok)), tirx.const(1, "int32"), tirx.const(0, "int32"))
    taken = tirx.BufferLoad(tk, [vi]) != 0
    step = seq([tirx.BufferStore(tk, take, [vi]), tirx.BufferStore(bi, tirx.Select(taken, j32, li), [vi]),
                tirx.BufferStore(bv, tirx.Select(taken, e, lv), [vi])])
    lane = tirx.Var(buf.name + "_l", INDEX)
    worst = ty.identity("min" if better is tirx.LT else "max", vdt)
    init_lanes = tirx.For(lane, 0, lanes, tirx.ForKind.VECTORIZED,
                          seq([tirx.BufferStore(bi, tirx.const(-1, "int32"), [lane]),
                               tirx.BufferStore(bv, tirx.const(worst, vdt), [lane])]))
    # the fold, branch-free: the best value of the lanes holding an index
    # (a balanced tree), then the smallest index holding it; a NaN held is the
    # very first element (lane 0), which nothing replaces
    pick_best = tirx.min if better is tirx.LT else tirx.max
    big = tirx.const(2**31 - 1, "int32")
    lv_k = [tirx.BufferLoad(bv, [tirx.const(q, INDEX)]) for q in range(lanes)]
    li_k = [tirx.BufferLoad(bi, [tirx.const(q, INDEX)]) for q in range(lanes)]
    valid = [tirx.And(i >= 0, tirx.Not(is_nan(v, vdt))) if "float" in vdt else i >= 0 for v, i in zip(lv_k, li_k)]
    c_v, c_i = tirx.BufferLoad(cv, [zero]), tirx.BufferLoad(ci, [zero])
    best = _tree([tirx.Select(ok_q, v, tirx.const(worst, vdt)) for ok_q, v in zip(valid, lv_k)], pick_best)
    first_idx = _tree([tirx.Select(tirx.And(ok_q, tirx.EQ(v, c_v)), i, big)
                       for ok_q, v, i in zip(valid, lv_k, li_k)], tirx.min)
    nan_first = tirx.And(li_k[0] >= 0, is_nan(lv_k[0], vdt)) if "float" in vdt else None
    held_e = tirx.BufferLoad(ebuf, eidx)
    replace = tirx.And(tirx.And(c_i >= 0, c_i < big), tirx.Or(held_e < 0, better(c_v, eh)))
    fold = [tirx.BufferStore(cv, best, [zero]), tirx.BufferStore(ci, first_idx, [zero])]
    if nan_first is not None:
        fold.append(tirx.IfThenElse(nan_first, seq([tirx.BufferStore(cv, lv_k[0], [zero]),
                                                    tirx.BufferStore(ci, li_k[0], [zero])]), None))
    fold = seq(fold + [tirx.IfThenElse(replace, tirx.BufferStore(ebuf, c_i, eidx), None)])
    return [bv, bi, tk, cv, ci], step, init_lanes, fold


def vector_reduction(low, node: isl.AstNode, name: str, init: tirx.PrimExpr, extent: tirx.PrimExpr,
                     lanes: int, block: int, threads: int = 0) -> tirx.Stmt | None:
    """The innermost loop ``node`` (iterator ``name``, ``extent`` iterations
    from ``init``) as vector iterations with partial accumulators (see the
    module docstring), or None when it does not qualify.  ``threads`` > 1:
    the blocks are shared out among that many threads, each with its own
    partial results, combined in thread order after them (a loss summed over
    a whole tensor, outside any parallel loop)."""
    calls = _calls(node.for_get_body())
    if not calls or lanes < 2:
        return None
    vb, vo, vi = (tirx.Var(name + x, INDEX) for x in ("_b", "_o", "_v"))
    n = tirx.max(extent, 0)
    n_vec = tirx.floordiv(n, lanes)
    j = init + (vb * block + vo) * lanes + vi
    parts = []
    with low.bound({name: j}):
        for call in calls:
            s = low.stmts[isl_ast.statement(call)]
            buf, idx, value, binds, combine = _bound_parts(low, call)
            value = (value, binds)
            moves = [uses(x, vi) or uses(x, vo) or uses(x, vb) for x in idx]
            if not any(moves):
                c = s.info.comp
                if c.reduction in ("argmin", "argmax") and not s.is_init:
                    arg = _arg_parts(value[0], buf, idx)
                    if arg is None or binds:
                        return None
                    parts.append(("arg", s, call, buf, idx, value, arg))
                    continue
                if s.is_init or c.reduction not in _ASSOCIATIVE or str(buf.dtype) == "bool":
                    return None
                # (reads of other elements of its tensor: checked below, in this loop)
                parts.append(("acc", s, call, buf, idx, value, combine))
            elif (coefficient(idx[-1], vi) == 1 and coefficient(idx[-1], vo) == lanes
                  and not any(moves[:-1])):
                parts.append(("map", s, call, buf, idx, value, combine))
            else:
                return None
    if not any(p[0] in ("acc", "arg") for p in parts):
        return None
    # nothing but the accumulators carries a value from one iteration to the next
    stored = {}
    for kind, _, _, buf, idx, _, _ in parts:
        stored.setdefault(buf.name, []).append((kind, idx))
    data = {p[3].data for p in parts}
    loop_vars = (vi, vo, vb)
    for kind, _, _, buf, idx, (value, binds), _ in parts:
        reads = loads(value) + [ld for b in binds for ld in loads(b.value)] + _index_loads(idx)
        for ld in reads:
            if ld.source.name not in stored:
                if any(ld.source.data.same_as(d) for d in data):
                    return None  # another view of a tensor the loop writes
                continue
            writes = stored[ld.source.name]
            if all(k != "map" and _elsewhere(list(ld.indices), w, loop_vars) for k, w in writes):
                continue  # an element that no iteration of the loop writes (kd(t - 1, q) beside kd(t, q))
            if kind == "arg" and ld.source.name == buf.name and _same_element(list(ld.indices), idx):
                continue  # the index held so far
            if kind in ("acc", "arg") and ld.source.name == buf.name:
                return None
            if any(k != "map" for k, _ in writes) or not all(_same_element(list(ld.indices), w) for _, w in writes):
                return None
    for data, writes in stored.items():
        if any(k != "map" for k, _ in writes) and len(writes) > 1:
            return None
        if not all(_same_element(writes[0][1], w) for _, w in writes):
            return None

    # threads: only accumulators (a map's stores would be shared out too: fine,
    # but such loops run inside a row's parallel loop already)
    threads = threads if threads > 1 and all(p[0] == "acc" for p in parts) else 0
    shared = _shared_out(low, node, name, init, n, parts, lanes, block, threads) if threads else None
    accs = {}
    body, inits, combines = [], [], []
    totals, inits_once, finals, allocs_arg = [], [], [], []
    for kind, s, call, buf, idx, (value, binds), combine in parts:
        if kind == "map":
            body.append(seq(binds + [tirx.BufferStore(buf, combine(tirx.BufferLoad(buf, idx), value), idx)]))
            continue
        if kind == "arg":
            with low.bound({name: init}):  # the element does not move with the loop
                ebuf, eidx, _, _ = low.statement_parts(call)
            lane_bufs, step, init_lanes, fold = _arg_lanes(buf, idx, ebuf, eidx, combine, j, init, vi, lanes)
            allocs_arg.extend(lane_bufs)
            body.append(step)
            inits.append(init_lanes)
            combines.append(fold)
            continue
        acc = tirx.decl_buffer((lanes,), buf.dtype, name=buf.name + "_lanes", scope=STACK)
        accs[call] = acc
        body.append(seq(binds + [tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [vi]), value), [vi])]))
        inits.append(_lanes_init(acc, name, lanes, s.info.comp.reduction))
        with low.bound({name: init}):  # the element does not move with the loop
            ebuf, eidx, _, _ = low.statement_parts(call)
        vals = [_lanes_combined(acc, lanes, combine)]
        if s.info.comp.reduction == "+" and str(buf.dtype) in ("float32", "float16"):
            # the blocks' sums add up in float64, stored into the element once
            total = tirx.decl_buffer((1,), "float64", name=buf.name + "_total", scope=STACK)
            totals.append(total)
            zero = tirx.const(0, INDEX)
            inits_once.append(tirx.BufferStore(total, tirx.const(0.0, "float64"), [zero]))
            combines.append(tirx.BufferStore(total, tirx.BufferLoad(total, [zero]) + tirx.Cast("float64", vals[0]),
                                             [zero]))
            finals.append(tirx.BufferStore(ebuf, tirx.BufferLoad(ebuf, eidx)
                                           + tirx.Cast(buf.dtype, tirx.BufferLoad(total, [zero])), eidx))
        else:
            combines.append(tirx.BufferStore(ebuf, combine(tirx.BufferLoad(ebuf, eidx), vals[0]), eidx))
    inner = tirx.For(vi, 0, lanes, tirx.ForKind.VECTORIZED, tirx.SeqStmt(body) if len(body) > 1 else body[0])
    count = tirx.min(block, n_vec - vb * block)
    blk = tirx.SeqStmt(inits + [tirx.For(vo, 0, count, tirx.ForKind.SERIAL, inner)] + combines)
    main = tirx.For(vb, 0, tirx.floordiv(n_vec + block - 1, block), tirx.ForKind.SERIAL, blk)
    vt = tirx.Var(name + "_t", INDEX)
    tail = tirx.For(vt, 0, tirx.floormod(n, lanes), tirx.ForKind.SERIAL,
                    low.body_with(node, name, init + n_vec * lanes + vt, False))
    allocs = [tirx.AllocBuffer(b) for b in list(accs.values()) + totals + allocs_arg]
    out = tirx.SeqStmt(allocs + inits_once + [main] + finals + [tail])
    # a short sum stays on the calling thread: waking the pool costs microseconds
    return out if shared is None else tirx.IfThenElse(n >= SHARED_MIN * threads, shared, out)


# elements per thread below which a reduction is not shared out (about the
# time a parallel region takes to start, summed on one core)
SHARED_MIN = 16384


def _shared_out(low, node, name: str, init, n, parts: list, lanes: int, block: int, threads: int) -> tirx.Stmt:
    """:func:`vector_reduction`'s loop with its blocks shared out among
    ``threads``: thread ``p`` runs blocks ``[p * nb / threads, (p + 1) * nb /
    threads)`` into slot ``p`` of each accumulator's partial results (float64
    for a float32 sum), started at the identity; then the slots are combined
    into the element in order, and a scalar loop does the iterations left."""
    vp, vb, vo, vi = (tirx.Var(name + x, INDEX) for x in ("_p", "_b", "_o", "_v"))
    n_vec = tirx.floordiv(n, lanes)
    nb = tirx.floordiv(n_vec + block - 1, block)
    first, last = tirx.floordiv(vp * nb, threads), tirx.floordiv((vp + 1) * nb, threads)
    j = init + ((first + vb) * block + vo) * lanes + vi
    body, inits, combines, slots_init, allocs, slot_allocs, finals = [], [], [], [], [], [], []
    zero = tirx.const(0, INDEX)
    with low.bound({name: j}):
        values = []
        for _, s, call, _, _, _, _ in parts:
            buf, _, value, binds, combine = _bound_parts(low, call)
            values.append((s, call, buf, value, binds, combine))
    stores = []  # each thread's total into its slot
    for s, call, buf, value, binds, combine in values:
        red = s.info.comp.reduction
        wide = red == "+" and str(buf.dtype) in ("float32", "float16")
        sdtype = "float64" if wide else str(buf.dtype)
        acc = tirx.decl_buffer((lanes,), buf.dtype, name=buf.name + "_lanes", scope=STACK)
        total = tirx.decl_buffer((1,), sdtype, name=buf.name + "_total", scope=STACK)
        slots = tirx.decl_buffer((threads,), sdtype, name=buf.name + "_threads")
        allocs += [acc, total]
        body.append(seq(binds + [tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [vi]), value), [vi])]))
        ident = ty.identity(red, str(buf.dtype))
        inits.append(_lanes_init(acc, name, lanes, red))
        lanes_total = _lanes_combined(acc, lanes, combine)
        mine = tirx.BufferLoad(total, [zero])
        combines.append(tirx.BufferStore(total, combine(mine, tirx.Cast(sdtype, lanes_total)) if wide
                                         else combine(mine, lanes_total), [zero]))
        slots_init.append(tirx.BufferStore(total, tirx.const(ident, sdtype), [zero]))
        stores.append(tirx.BufferStore(slots, mine, [vp]))
        with low.bound({name: init}):  # the element does not move with the loop
            ebuf, eidx, _, _ = low.statement_parts(call)
        slot_allocs.append(tirx.AllocBuffer(slots))
        got = [tirx.BufferLoad(slots, [tirx.const(q, INDEX)]) for q in range(threads)]
        if wide:  # the threads' float64 totals added up, then into the element once
            finals.append(tirx.BufferStore(ebuf, tirx.BufferLoad(ebuf, eidx)
                                           + tirx.Cast(buf.dtype, functools.reduce(tirx.Add, got)), eidx))
        else:
            finals.append(tirx.BufferStore(ebuf, functools.reduce(combine, got, tirx.BufferLoad(ebuf, eidx)), eidx))
    inner = tirx.For(vi, 0, lanes, tirx.ForKind.VECTORIZED, seq(body))
    count = tirx.min(block, n_vec - (first + vb) * block)
    blk = tirx.SeqStmt(inits + [tirx.For(vo, 0, count, tirx.ForKind.SERIAL, inner)] + combines)
    per_thread = seq([tirx.AllocBuffer(a) for a in allocs] + slots_init
                     + [tirx.For(vb, 0, last - first, tirx.ForKind.SERIAL, blk)] + stores)
    main = tirx.For(vp, 0, threads, tirx.ForKind.PARALLEL, per_thread)
    vt = tirx.Var(name + "_t", INDEX)
    tail = tirx.For(vt, 0, tirx.floormod(n, lanes), tirx.ForKind.SERIAL,
                    low.body_with(node, name, init + n_vec * lanes + vt, False))
    return tirx.SeqStmt(slot_allocs + [main] + finals + [tail])
