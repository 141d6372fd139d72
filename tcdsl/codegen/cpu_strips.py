"""Strips of columns whose reduction runs in blocks (codegen/cpu.py).

A vector loop under a reduction loop with no parallel loop around it runs in
strips of STRIP columns (polyhedral/schedule.py, ``_sink_vector_bands``):
``for strip (parallel) { for i { for j in the strip } }``, each strip one
register tile over the whole ``i`` loop (``CpuAstLowering._one_row_tile``).
A matrix-vector product with an (in, out) matrix, ``y(j) +=! x(i) * W(i,
j)``, then reads each strip's 512 bytes of a row, 16 KiB apart from the next
row's at 4096 columns: no hardware prefetcher follows that stride.  Outside
sequential loops the strips are therefore dealt out to the threads in
contiguous runs, and each thread runs the reduction in blocks of
STRIP_K_BLOCK steps outside its strips: ``for thread (parallel) { for i
block { for its strips { tile over the block's rows } } }``, reading a
block's rows sequentially across the thread's columns (the tiles load and
store their accumulators once per block).  Every element still sums its
products in ``i`` order.  GEMV (in, out) 4096^2 on an AMD EPYC (AVX2): 7.6 ->
4.6 ms (numpy 3.4).  Only where the rows span a page
or more (MIN_STRIPS), decided at run time."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import islpy as isl
import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.tirx.analysis import undefined_vars

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT, iterator, loop_ids, strip_marks
from .expr import INDEX
from .lower import has_node, is_if_then_else, loads, uses

STRIP_K_BLOCK = 16
# Blocks only from this many strips (1024 columns: rows of 4 KiB and more,
# a page); narrower rows the prefetchers follow, and the blocks' loads and
# stores of the accumulators cost more than they save (a column sum over 256
# or 512 columns: 1.12x slower in blocks).
MIN_STRIPS = 8


@dataclass
class StripBlock:
    """The steps ``first .. first + count - 1`` of the reduction loop ``name``
    that the tiles of a strip run (``low.strip_block`` while
    :func:`strip_blocks` lowers the strip); ``taken``: a tile ran them."""
    name: str
    first: tirx.PrimExpr
    count: tirx.PrimExpr
    taken: bool = False


def strip_blocks(low, node: isl.AstNode, step: int, plain: Callable[[], tirx.Stmt]) -> tirx.Stmt:
    """The strip loop ``node`` (of ``step`` columns per strip) as above where
    there are at least MIN_STRIPS strips, else (and where its body is not one
    register tile over a reduction loop whose bounds do not depend on the
    strip) ``plain()``, the parallel loop over the strips."""
    body, _ = strip_marks(node.for_get_body())
    name = iterator(node)
    if body.get_type() != NT.for_ or name in loop_ids(body):
        return plain()
    k_name = iterator(body)
    _, k_ext = low.loop_range(body)
    k_ext = tirx.max(k_ext, 0)
    init, extent = low.loop_range(node)
    count = tirx.floordiv(tirx.max(extent, 0) + step - 1, step)
    threads = low.gen.cpu.threads
    per = tirx.floordiv(count + threads - 1, threads)
    t, b, s = (tirx.Var(x, INDEX) for x in (name + "_th", k_name + "_sb", name + "_s"))
    kb = STRIP_K_BLOCK
    low.strip_block = block = StripBlock(k_name, b * kb, tirx.min(kb, k_ext - b * kb))
    try:
        inner = low.body_with(node, name, init + (t * per + s) * step, False)
    finally:
        low.strip_block = None
    if not block.taken:
        return plain()
    mine = tirx.max(tirx.min(per, count - t * per), 0)
    blocked = tirx.For(t, 0, threads, tirx.ForKind.PARALLEL,
                       tirx.For(b, 0, tirx.floordiv(k_ext + kb - 1, kb), tirx.ForKind.SERIAL,
                                tirx.For(s, 0, mine, tirx.ForKind.SERIAL, inner)))
    return tirx.IfThenElse(count >= MIN_STRIPS, blocked, plain())


def strip_steps(low, chain: list) -> tuple | None:
    """(first, count): the block of its reduction loop ``chain[0]`` that a
    single strip's register tile runs, while :func:`strip_blocks` lowers its
    strip; else None."""
    block = getattr(low, "strip_block", None)
    if block is None or iterator(chain[0]) != block.name:
        return None
    block.taken = True
    return block.first, block.count


def few_rows(loop, body: isl.AstNode, name: str, init, extent, chunked: tirx.Stmt, chunk) -> tirx.Stmt:
    """Where the rows are at most two tiles per thread (a decoder's batch of
    8 rows times a vocabulary's (V, D) weights), each thread reading every
    column's operands for its few rows reads the whole weight matrix: the
    rows in one chunk, their widest column tiles in parallel instead
    (outside sequential loops; a run-time choice by the row count).  ``loop``:
    the ``cpu.ChunkedLoop``, ``chunked`` its loop over the chunks of ``chunk`` rows."""
    m = loop.m
    if loop.wrap is not None or loop.in_loop or not m.parallel or m.threads < 2 or m.tile_rows < 2 \
            or not _shared_reads(loop, body, name):
        return chunked
    one = two_way(loop, body, name, init, extent, chunk)
    if one is not None:
        return chunked if isinstance(one, int) else one
    lo, rows = tirx.Var(name + "_lo", INDEX), tirx.Var(name + "_rows", INDEX)
    saved = loop.tiles.rows_extent, loop.tiles.parallel_columns
    loop.tiles.rows_extent, loop.tiles.parallel_columns = extent, True
    try:
        alt = loop.rows(body, name, lo, rows)
    finally:
        loop.tiles.rows_extent, loop.tiles.parallel_columns = saved
    loops = []  # every parallel loop, in the order of the statement
    par = lambda x: isinstance(x, tirx.For) and x.kind == tirx.ForKind.PARALLEL  # noqa: E731
    has_node(alt, lambda x: par(x) and loops.append(x))
    if not loops or any(has_node(x.body, par) for x in loops):
        return chunked
    # ... and enough column tiles for every thread, the first such loop's count over the sizes alone
    sizes = [v for v in loop.low.gen.sig.size_vars.values() if isinstance(v, tirx.Var)]
    if len(undefined_vars(loops[0].extent, sizes)) or len(undefined_vars(extent, sizes)):
        return chunked
    alt = tirx.SeqStmt([tirx.Bind(lo, init), tirx.Bind(rows, extent), alt])
    few = sym.Analyzer().simplify(tirx.And(extent <= 2 * m.tile_rows * m.threads, loops[0].extent >= 2 * m.threads))
    if isinstance(few, tirx.IntImm) and not few.value:  # (the rows and columns of one size: N x N)
        return chunked
    return tirx.IfThenElse(few, alt, chunked)


def batch_rows(loop, node: isl.AstNode, name: str, init, extent) -> tirx.Stmt | None:
    """The outermost parallel loop ``node`` (a batch) whose body is a parallel
    loop of register tiles' rows (a convolution's output channels: ``for b {
    for o { tiles over o``), as one parallel loop over the pairs (batch, chunk
    of rows); None otherwise.  ``loop``: the ``cpu.ChunkedLoop``.  The batch
    loop alone ran at batch 1 on one core (a 3x3 convolution of 64 channels
    at 64 x 64, batch 1: 2.1-2.2 -> 1.1 ms on two cores, ``F.conv2d`` 1.0-1.1)."""
    inner, mark = strip_marks(node.for_get_body())
    if inner.get_type() != NT.for_ or mark != "par" or loop.low.loop_step(inner) != 1:
        return None
    b = tirx.Var(name, INDEX)
    with loop.low.bound({name: b}):
        i_init, i_extent = loop.low.loop_range(inner)
        if uses(i_init, b) or uses(i_extent, b) or not loop.has_micro(inner.for_get_body(), iterator(inner)):
            return None
        return loop._chunks(inner.for_get_body(), iterator(inner), i_init, i_extent, (b, init, extent))


def opaque(name: str, binds: list) -> list[tirx.Stmt]:
    """Statements binding each variable of ``binds`` [(var, value)] to its
    value through a local array, which TVM's simplifier does not see through
    (it substitutes a bound variable's value wherever the variable is used:
    a chunk's row count, a formula of mins and selects, met in every row
    index of every tile took its passes 3-4x as long).  Constants (sizes
    fixed before scheduling) are bound as they are, for the simplifier to use."""
    simplify = sym.Analyzer().simplify
    known = [tirx.Bind(x, simplify(v)) for x, v in binds if isinstance(simplify(v), tirx.IntImm)]  # (as they are)
    binds = [(x, v) for x, v in binds if not isinstance(simplify(v), tirx.IntImm)]
    if not binds:
        return known
    cells = tirx.decl_buffer((len(binds),), INDEX, name=name, scope="local")
    return known + [tirx.AllocBuffer(cells)] + [tirx.BufferStore(cells, v, [i]) for i, (_, v) in enumerate(binds)] + [
        tirx.Bind(x, tirx.BufferLoad(cells, [i])) for i, (x, _) in enumerate(binds)]


def opaque_size(name: str, value: tirx.PrimExpr) -> tuple[tirx.PrimExpr, list[tirx.Stmt]]:
    """``value`` as it is where it is a constant (specialized sizes), else a
    variable bound to it through :func:`opaque`: (the expression to use, the
    statements that bind it)."""
    if isinstance(sym.Analyzer().simplify(value), tirx.IntImm):
        return value, []
    v = tirx.Var(name, INDEX)
    return v, opaque(name, [(v, value)])


def two_way(loop, body: isl.AstNode, name: str, init, extent, chunk) -> tirx.Stmt | None:
    """:func:`few_rows` as one copy of the code: ``for p (parallel) { rows of
    chunk p // G, columns of group p % G }``, where a group is a run of whole
    main-width column tiles (the last one also the rest: RegisterTiles.groups)
    and G is 1 (chunks of rows, each with all columns) or, with few rows, the
    thread count (one chunk of all rows, its columns in G groups).  Where the
    body is one register-tile part (independent statements, so that each group
    may run its columns of one after those of another); else None (two copies,
    one per case, as before).  ``0`` where the rows are never few."""
    m, tiles = loop.m, loop.tiles
    parts = isl_ast.parts(body)
    fresh = folded_init(loop, parts, name)
    if fresh is not None:  # the tile's accumulators start at the identity: no pass zeroing the output before
        parts = parts[1:]
    bare = strip_marks(parts[0])[0] if len(parts) == 1 else None
    if bare is None or bare.get_type() != NT.for_ or tiles.parts(bare, name) is None:
        return None
    group, groups = tirx.Var(name + "_group", INDEX), tirx.Var(name + "_groups", INDEX)
    lo, rows, ck = (tirx.Var(name + x, INDEX) for x in ("_lo", "_rows", "_ck"))
    saved = tiles.rows_extent, tiles.groups, tiles.windows, tiles.fresh
    tiles.rows_extent, tiles.groups, tiles.windows = extent, (group, groups), []
    tiles.fresh = {fresh} if fresh is not None else set()
    try:
        inner = loop.rows(parts[0] if fresh is not None else body, name, lo, rows)
        units = tiles.windows
    finally:
        tiles.rows_extent, tiles.groups, tiles.windows, tiles.fresh = saved
    sizes = [v for v in loop.low.gen.sig.size_vars.values() if isinstance(v, tirx.Var)]
    if not units or len(undefined_vars(units[0], sizes)) or len(undefined_vars(extent, sizes)):
        return None
    few = sym.Analyzer().simplify(tirx.And(extent <= 2 * m.tile_rows * m.threads, units[0] >= 2 * m.threads))
    if isinstance(few, tirx.IntImm) and not few.value:  # (the rows and columns of one size: N x N)
        return 0
    p = tirx.Var(name + "_chunk", INDEX)
    at = tirx.floordiv(p, groups) * ck
    return tirx.SeqStmt(opaque(name + "_split", [(groups, tirx.Select(few, m.threads, 1)),
                                                 (ck, tirx.max(tirx.Select(few, extent, chunk), 1))]) + [
        tirx.For(p, 0, tirx.floordiv(extent + ck - 1, ck) * groups, tirx.ForKind.PARALLEL, tirx.SeqStmt([
            tirx.Bind(group, tirx.floormod(p, groups)), tirx.Bind(lo, init + at),
            tirx.Bind(rows, tirx.min(ck, extent - at)), inner]))])


def folded_init(loop, parts: list, row: str) -> str | None:
    """The update statement of ``parts`` = [the initialization of an ``op=!``
    (``y(b, o) = 0``), its update as one register-tile part (``y(b, o) +=
    x(b, i) * W(o, i)``)] when the update writes exactly the elements that the
    initialization does, and for each of them runs the same reduction steps
    (its domain the product of the two): its tiles may start from the
    identity instead of loading what the initialization stored (``tiles.fresh``).
    Else None."""
    if len(parts) != 2:
        return None
    low = loop.low
    bare = strip_marks(parts[1])[0]
    found = loop.tiles.parts(bare, row) if bare.get_type() == NT.for_ else None
    if found is None or len(found[1]) != 1:
        return None
    update = low.stmts[isl_ast.statement(found[1][0][1])]
    calls: set[str] = set()

    def collect(node: isl.AstNode) -> bool:
        if node.get_type() == NT.user:
            calls.add(isl_ast.statement(node.user_get_expr()))
        return False
    isl_ast.has(parts[0], collect)
    init = low.stmts[next(iter(calls))] if len(calls) == 1 else None
    if init is None or not init.is_init or update.is_init or init.info is not update.info \
            or init.info.comp.reduction is None:
        return None
    own = len(init.dims)
    dom = update.domain.reset_tuple_id()
    lhs = dom.project_out(isl.dim_type.set, own, dom.dim(isl.dim_type.set) - own)
    steps = dom.project_out(isl.dim_type.set, 0, own)
    if not lhs.is_equal(init.domain.reset_tuple_id().align_params(lhs.get_space())) \
            or not dom.is_equal(lhs.flat_product(steps).align_params(dom.get_space())):
        return None
    return update.name


def _shared_reads(loop, node: isl.AstNode, row: str) -> bool:
    """Some register tile below ``node`` reads, at each step of its reduction,
    a tensor whose index does not move with the row ``row`` (a weight that
    every row reads whole, ``W(v, d)`` of ``y(b, v) +=! x(b, d) * W(v, d)``):
    only then do rows split across threads read it once per thread.  A
    softmax's or a norm's rows read only their own elements."""
    node, _ = strip_marks(node)
    t = node.get_type()
    if t == NT.block:
        return any(_shared_reads(loop, x, row) for x in isl_ast.children(node))
    if t == NT.if_:
        return _shared_reads(loop, node.if_get_then_node(), row) or (
            node.if_has_else_node() and _shared_reads(loop, node.if_get_else_node(), row))
    if t != NT.for_:
        return False
    low = loop.low
    found = loop.tiles.parts(node, row)
    if found is None:
        name = iterator(node)
        with low.bound({name: tirx.Var(name + "_p", INDEX)}):
            return _shared_reads(loop, node.for_get_body(), row)
    chain, leaves = found
    for inner, call in leaves:
        probe = {x: tirx.Var(x + "_p", INDEX) for x in {iterator(c) for c in chain} | {row, iterator(inner)}}
        with low.bound(probe):
            _, _, value, _ = low.statement_parts(call)
        steps = [probe[iterator(c)] for c in chain]
        for ld in loads(value):
            if not any(uses(x, probe[row]) for x in ld.indices) and any(uses(x, k) for k in steps for x in ld.indices):
                return True
    return False


def nonempty_vectors(low, node, name: str, init, extent, parallel: bool, parallel_ok: bool) -> tirx.Stmt | None:
    """``low._vectorized(...)`` for a body whose vector loop TVM refuses (a Let
    beside an ``if_then_else``: a gathered ``logp(t, b, ext(b, s))`` or a
    CTC step's ``s >= 2 && ... ? prev(b, s - 2) : -1e30`` beside libm's Lets
    in a log-sum-exp): the vector loop, its ``if_then_else``s as selects
    (:func:`branches_as_selects`), where every tensor a read is clamped into
    is nonempty, a scalar loop where one is empty; None (a scalar loop) in a
    checked kernel, whose reads outside their tensors raise errors."""
    from . import checks
    from .expr import assume_nonempty
    if getattr(low, "assuming_nonempty", False) or checks.enabled():
        return None
    low.assuming_nonempty = True
    try:
        with assume_nonempty() as conds:
            out = low._vectorized(node, name, init, extent, parallel, parallel_ok)
    finally:
        low.assuming_nonempty = False
    if out is None or not conds:
        return out
    cond = conds[0]
    for c in conds[1:]:
        cond = tirx.And(cond, c)
    cond = sym.Analyzer().simplify(cond)
    v = tirx.Var(name + "_s", INDEX)
    scalar = tirx.For(v, 0, tirx.max(extent, 0), tirx.ForKind.SERIAL, low.body_with(node, name, init + v, parallel_ok))
    return tirx.IfThenElse(cond, out, scalar)


def branches_as_selects(body: tirx.Stmt) -> tirx.Stmt:
    """``body`` with each ``c ? a : b`` (``if_then_else``) a ``Select``, which
    computes both sides in every lane.  Safe in a vector loop's lanes (they
    are points of the statement's domain) when the tensors are nonempty
    (``nonempty_vectors``): a read is in its tensor wherever the domain
    holds, or its indices are clamped into it (codegen/expr.py, rule 3);
    integer division by 0 gives 0."""
    def select(c):
        return tirx.Select(c.args[0], c.args[1], c.args[2]) if is_if_then_else(c) else c
    return tvm_ffi.structural_map(body, [(tvm.ir.expr.Call, select)])
