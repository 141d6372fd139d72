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

The same dot products serve every column where the rows are too few for a
panel copy (codegen/cpu_tiles.py copies a panel from 2 row tiles on) and a
vector of columns would gather: a right operand whose column moves an index
other than its last, the one the reduction moves (``K(b, h, s, d)`` of an
attention's scores ``sc(b, h, t, s) +=! q(b, h, t, d) * K(b, h, s, d)`` for
the 1 to 7 queries of a decode or a speculative verification step; a
vector of 16 keys was 16 loads a row of ``K`` apart, for every ``d``):
:func:`gathers_columns`, :func:`all_columns`.

Like :func:`~tcdsl.codegen.cpu_reduce.vector_reduction` (and under the same
option, ``reduce_lanes``), a float sum then adds in another order than the
reduction loop's: lanes, then the tree, then the last steps.
"""
from __future__ import annotations

from tvm import sym, tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import iterator, loop_ids
from ..sema import types as ty
from .cpu_reduce import _lanes_combined
from .expr import INDEX
from .lower import coefficient, has_node, is_if_then_else, loads, uses
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
    # (a branch taken where a condition holds in some lanes only: the lanes would load both sides;
    # a clamped read's guard for an empty tensor, over the sizes alone, is the same in every lane)
    if has_node(value, lambda x: is_if_then_else(x) and any(uses(x.args[0], p) for p in probe.values())):
        return False
    moving = False
    for ld in reads + [ld for x in idx for ld in loads(x)]:
        ix = list(ld.indices)
        if ld.source.data.same_as(buf.data):
            return False
        if not ix:
            continue  # (a scalar: a threshold, a learning rate)
        if any(uses(x, kv) for x in ix[:-1]):
            return False
        c = coefficient(ix[-1], kv)
        if c not in (0, 1):
            return False
        moving |= c == 1
    return moving


def gathers_columns(gen, chain, call, row: str, j_name: str) -> bool:
    """A load of the statement moves with the column ``j_name`` in an index
    before its last, which the reduction moves (stride 1): a vector over the
    columns would gather it, a dot product reads it contiguously.  (Only
    asked where :func:`dot_lanes` holds.)"""
    low = gen.low
    k = iterator(chain[0])
    probe = {x: tirx.Var(x + "_g", INDEX) for x in (row, j_name, k)}
    with low.bound(probe):
        _, _, value, _ = low.statement_parts(call)
        _, ext = low.loop_range(chain[0])
    ext = sym.Analyzer().simplify(ext)
    if isinstance(ext, tirx.IntImm) and ext.value < 4 * gen.m.vector_width:
        return False  # (a short reduction: the lanes' fold would cost more than the gathers)
    return any(coefficient(ld.indices[-1], probe[k]) == 1 and any(uses(x, probe[j_name]) for x in ld.indices[:-1])
               for ld in loads(value) if len(ld.indices) >= 2)


def all_columns(tile_at, first, count, row: str, lo, n, rb: int) -> tirx.Stmt:
    """Columns ``first`` .. ``first + count - 1`` of rows lo .. lo+n-1 as dot
    products (``tile_at(column)``: a tile's column): tiles of ``rb`` rows,
    then of 2, then one row (7 rows: 4 + 2 + 1, three passes over the
    columns' operands, not four)."""
    def rows_of(cols):
        if rb == 1:
            return row_tiles(row, lo, n, 1, cols)
        base, left = lo + tirx.floordiv(n, rb) * rb, tirx.floormod(n, rb)
        q, r = tirx.Var(row + "_h", INDEX), tirx.Var(row + "_t", INDEX)
        pairs = [tirx.For(q, 0, tirx.floordiv(left, 2), tirx.ForKind.SERIAL, cols(base + q * 2, 2))] if rb > 2 else []
        last = base + (tirx.floordiv(left, 2) * 2 if pairs else 0)
        rest = tirx.For(r, 0, tirx.floormod(left, 2) if pairs else left, tirx.ForKind.SERIAL, cols(last + r, 1))
        return tirx.SeqStmt([row_tiles(row, lo, n, rb, cols), *pairs, rest])
    return dot_columns(tile_at, first, count, rows_of)


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
    total = _lanes_combined(acc, lanes, combine, r)
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
    name = f"{tile_at(first).j_name}_d1"

    def cols(r0, nr: int) -> tirx.Stmt:
        j = tirx.Var(name, INDEX)  # (a variable of its own in each loop)
        return tirx.For(j, 0, tirx.max(count, 0), tirx.ForKind.SERIAL, dot_tile(tile_at(first + j), r0, nr))
    return rows_of(cols)


def row_tiles(row: str, lo, n, rb: int, cols) -> tirx.Stmt:
    """``cols(r0, rb)`` for each full tile of ``rb`` rows from ``lo`` (``n`` rows)."""
    sb = tirx.Var(row + "_b", INDEX)
    return tirx.For(sb, 0, tirx.floordiv(n, rb), tirx.ForKind.SERIAL, cols(lo + sb * rb, rb))
