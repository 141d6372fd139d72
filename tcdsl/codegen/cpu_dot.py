"""Dot products in vector lanes for the columns of a register tile that no
vector covers (codegen/cpu_tiles.py ``tail``).

A contraction whose output has fewer columns than a vector -- the logits of
10 classes, ``z(n, c) +=! X(n, d) * W(c, d)`` -- gets no vector tile: each
of its columns was a scalar sum over ``d`` for the tile's rows, with the
operands read one element at a time (or, for 8 of them, gathered 8 rows of
``W`` at a time).  Where every operand that moves with the reduction is
stride-1 in it, each column of a row tile is instead a dot product in
vector lanes: ``nr x lanes`` partial sums (registers), one vector step of
the reduction at a time for all the tile's rows, folded by a balanced tree
into the element after the vector steps, then the last steps one by one.
The columns run inside the row tiles, so a tile's rows stay in L1 for all
of them.

Like :func:`~tcdsl.codegen.cpu_reduce.vector_reduction` (and under the same
option, ``reduce_lanes``), a float sum then adds in another order than the
reduction loop's: lanes, then the tree, then the last steps.
"""
from __future__ import annotations

from tvm import tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import iterator, loop_ids
from ..sema import types as ty
from .cpu_reduce import _tree
from .expr import INDEX
from .lower import coefficient, loads, uses
from .scratch import STACK


def dot_lanes(gen, chain, call, row: str, j_name: str) -> bool:
    """Whether the single columns of this tile statement may be dot products
    in lanes: one reduction loop (not ragged, not a deep or strip tile), a
    float sum, and every load that moves with the reduction stride-1 in it in
    its last index only (and outside selects), none of the written tensor."""
    low, m = gen.low, gen.m
    if not m.reduce_lanes or m.vector_width < 4 or len(chain) != 1 or gen.depth or gen.single:
        return False
    k = iterator(chain[0])
    if row in loop_ids(chain[0]):
        return False
    s = low.stmts[isl_ast.statement(call)]
    if s.is_init or s.info.comp.reduction != "+":
        return False
    probe = {x: tirx.Var(x + "_dot", INDEX) for x in (row, j_name, k)}
    with low.bound(probe):
        buf, idx, value, _ = low.statement_parts(call)
    kv = probe[k]
    if str(buf.dtype) not in ("float32", "float64") or any(uses(x, kv) for x in idx):
        return False
    reads = loads(value)
    if len(loads(value, unguarded=True)) != len(reads):
        return False  # (a select's branch: its vector lanes would load both sides)
    moving = False
    for ld in reads + [ld for x in idx for ld in loads(x)]:
        ix = list(ld.indices)
        if ld.source.data.same_as(buf.data) or not ix or any(uses(x, kv) for x in ix[:-1]):
            return False
        c = coefficient(ix[-1], kv)
        if c not in (0, 1):
            return False
        moving |= c == 1
    return moving


def dot_tile(tile, r0, nr: int) -> tirx.Stmt:
    """Rows r0 .. r0+nr-1 of ``tile``'s single column as dot products in
    lanes (see the module docstring)."""
    low, lanes = tile.low, tile.m.vector_width
    k = iterator(tile.chain[0])
    init, ext = low.loop_range(tile.chain[0])
    ext = tirx.max(ext, 0)
    r, v, kq, kt = (tirx.Var(x, INDEX) for x in ("r", "v", f"{k}_q", f"{k}_t"))

    def parts(rr, kk):
        with low.bound({**tile.zeros, tile.row: r0 + rr, tile.j_name: tile.col0, k: kk}):
            return low.statement_parts(tile.call)

    buf, _, _, combine = parts(tirx.const(0, INDEX), init)
    acc = tirx.decl_buffer((nr, lanes), buf.dtype, name="acc", scope=STACK)

    def rows(body) -> tirx.Stmt:
        return tirx.For(r, 0, nr, tirx.ForKind.UNROLLED, body)

    def vector(body) -> tirx.Stmt:
        return rows(tirx.For(v, 0, lanes, tirx.ForKind.VECTORIZED, body))

    zero = vector(tirx.BufferStore(acc, tirx.const(0, buf.dtype), [r, v]))
    _, _, value, _ = parts(r, init + kq * lanes + v)
    step = vector(tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [r, v]), value), [r, v]))
    main = tirx.For(kq, 0, tirx.floordiv(ext, lanes), tirx.ForKind.SERIAL, step)
    _, idx, _, _ = parts(r, init)
    total = _tree([tirx.BufferLoad(acc, [r, tirx.const(i, INDEX)]) for i in range(lanes)], combine)
    s = low.stmts[isl_ast.statement(tile.call)]
    before = tirx.BufferLoad(buf, idx) if s.name not in tile.gen.fresh else \
        tirx.const(ty.identity(s.info.comp.reduction, str(buf.dtype)), buf.dtype)  # (cpu_strips.folded_init)
    fold = rows(tirx.BufferStore(buf, combine(before, total), idx))
    _, idx, value, _ = parts(r, init + tirx.floordiv(ext, lanes) * lanes + kt)
    last = tirx.For(kt, 0, tirx.floormod(ext, lanes), tirx.ForKind.SERIAL,
                    rows(tirx.BufferStore(buf, combine(tirx.BufferLoad(buf, idx), value), idx)))
    return tirx.SeqStmt([tirx.AllocBuffer(acc), zero, main, fold, last])


def dot_columns(tile_at, first, count, rows_of) -> tirx.Stmt:
    """``count`` single columns from ``first`` (``tile_at(column)``: a
    tile's column) as dot products, inside the rows' loops: ``rows_of(cols)``
    wraps them around ``cols(r0, nr)``, the columns of rows r0 .. r0+nr-1."""
    j = tirx.Var(f"{tile_at(first).j_name}_d1", INDEX)
    return rows_of(lambda r0, nr: tirx.For(j, 0, tirx.max(count, 0), tirx.ForKind.SERIAL,
                                           dot_tile(tile_at(first + j), r0, nr)))


def row_tiles(row: str, lo, n, rb: int, cols) -> tirx.Stmt:
    """``cols(r0, rb)`` for each full tile of ``rb`` rows from ``lo`` (``n`` rows)."""
    sb = tirx.Var(row + "_b", INDEX)
    return tirx.For(sb, 0, tirx.floordiv(n, rb), tirx.ForKind.SERIAL, cols(lo + sb * rb, rb))
