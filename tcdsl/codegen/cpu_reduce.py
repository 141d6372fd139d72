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
from .expr import INDEX
from .lower import coefficient, loads, seq, uses, with_bindings
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


def _lanes_combined(acc: tirx.Buffer, lanes: int, combine) -> tirx.PrimExpr:
    """The partial accumulators combined by a balanced tree."""
    vals = [tirx.BufferLoad(acc, [tirx.const(i, INDEX)]) for i in range(lanes)]
    while len(vals) > 1:
        vals = [combine(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i] for i in range(0, len(vals), 2)]
    return vals[0]


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
                if (s.is_init or c.reduction not in _ASSOCIATIVE or str(buf.dtype) == "bool"
                        or not low.gen.private_accumulator(s)):
                    return None
                parts.append(("acc", s, call, buf, idx, value, combine))
            elif (coefficient(idx[-1], vi) == 1 and coefficient(idx[-1], vo) == lanes
                  and not any(moves[:-1])):
                parts.append(("map", s, call, buf, idx, value, combine))
            else:
                return None
    if not any(p[0] == "acc" for p in parts):
        return None
    # nothing but the accumulators carries a value from one iteration to the next
    stored = {}
    for kind, _, _, buf, idx, _, _ in parts:
        stored.setdefault(buf.name, []).append((kind, idx))
    for kind, _, _, buf, idx, (value, binds), _ in parts:
        reads = loads(value) + [ld for b in binds for ld in loads(b.value)] + _index_loads(idx)
        for ld in reads:
            if ld.source.name not in stored:
                continue
            writes = stored[ld.source.name]
            if kind == "acc" and ld.source.name == buf.name:
                return None
            if any(k == "acc" for k, _ in writes) or not all(_same_element(list(ld.indices), w) for _, w in writes):
                return None
    for data, writes in stored.items():
        if any(k == "acc" for k, _ in writes) and len(writes) > 1:
            return None
        if not all(_same_element(writes[0][1], w) for _, w in writes):
            return None

    # threads: only accumulators (a map's stores would be shared out too: fine,
    # but such loops run inside a row's parallel loop already)
    threads = threads if threads > 1 and all(p[0] == "acc" for p in parts) else 0
    shared = _shared_out(low, node, name, init, n, parts, lanes, block, threads) if threads else None
    accs = {}
    body, inits, combines = [], [], []
    totals, inits_once, finals = [], [], []
    for kind, s, call, buf, idx, (value, binds), combine in parts:
        if kind == "map":
            body.append(seq(binds + [tirx.BufferStore(buf, combine(tirx.BufferLoad(buf, idx), value), idx)]))
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
    allocs = [tirx.AllocBuffer(b) for b in list(accs.values()) + totals]
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
