"""Copies that transpose, in blocks of columns read whole.

``y(j, i) = x(i, j)`` -- a user's transpose, or the copy ``Whh_t(k, j) =
Whh(j, k)`` that polyhedral/layout.py makes of weights in PyTorch's (out,
in) layout -- is two parallel loops ``for j { for i { .. } }`` whose inner
loop writes ``y`` contiguously and reads ``x`` down a column, one cache
line (and, for large ``x``, one page) per element: a 1024 x 1024 copy took
3.4 ms on a 2-core AMD EPYC (1.8 ms in blocks), a power iteration of 50
steps 7.0 (5.9).

:func:`transposed_pair` runs such a pair with the outer loop in blocks of
``2 * lanes`` iterations, the inner loop inside each block, and the block
vectorized: each step of the inner loop reads ``2 * lanes`` contiguous
elements of a row of ``x`` (vector loads) and writes them down the block's
columns of ``y``, whose ``2 * lanes`` rows stay in cache while the inner
loop runs along them.  The iterations left after the last full block run
in parallel, one column each.  Below :data:`MIN_COLUMN` inner iterations
the column's lines stay in L1 from one outer iteration to the next, and
the loops run as written (a run-time test: the sizes are symbolic).  It
applies when the body is one store whose last index moves
by exactly 1 with the inner variable and not with the outer one, and some
load's last index moves by exactly 1 with the outer variable and not with
the inner one, while another of its indices moves with the inner one.
"""
from __future__ import annotations

from tvm import tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT, iterator, strip_marks
from ..polyhedral.schedule import PARALLEL
from .expr import INDEX
from .lower import coefficient as coeff, from_zero, loads, uses

# Inner extents from which the blocks serve: a column of 512 elements reads
# 512 lines, 32 KiB, an AMD EPYC's (Zen 3) L1 data cache
MIN_COLUMN = 512


def transposed_pair(low, node, name: str, init, extent, mark: str | None, parallel: bool,
                    parallel_ok: bool) -> tirx.Stmt | None:
    """``node`` (a parallel loop whose body is one parallel loop over one
    statement) as blocks of its iterations around the inner loop, see the
    module docstring; None when it is no transposing copy."""
    inner, inner_mark = strip_marks(node.for_get_body())
    if mark != PARALLEL or inner.get_type() != NT.for_ or inner_mark != PARALLEL \
            or isl_ast.has(inner.for_get_body(), isl_ast.is_loop) or low.loop_step(inner) != 1:
        return None
    inner_name = iterator(inner)
    u, v = tirx.Var(name + "_u", INDEX), tirx.Var(inner_name + "_w", INDEX)
    with low.bound({name: init + u}):
        inner_init, inner_extent = low.loop_range(inner)
        body = low.body_with(inner, inner_name, inner_init + v, False)
    if any(uses(e, u) for e in (inner_init, inner_extent)) or not isinstance(body, tirx.BufferStore):
        return None
    store = body
    if not store.indices or coeff(store.indices[-1], v) != 1 or coeff(store.indices[-1], u) != 0:
        return None
    if not any(ld.indices and coeff(ld.indices[-1], u) == 1 and coeff(ld.indices[-1], v) == 0
               and any(uses(i, v) for i in ld.indices[:-1]) for ld in loads(store.value)):
        return None
    w = 2 * low.gen.cpu.resolved(False).vector_width  # two vectors: a 64-byte line of float32 on AVX2
    extent = tirx.max(extent, 0)
    uo, ui, vv, ut = (tirx.Var(name + s, INDEX) for s in ("_blk", "_in", "_col", "_left"))
    with low.bound({name: init + uo * w + ui}):
        block_body = low.body_with(inner, inner_name, inner_init + vv, False)
    block = tirx.For(uo, 0, tirx.floordiv(extent, w), tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL,
                     tirx.For(vv, 0, tirx.max(inner_extent, 0), tirx.ForKind.SERIAL,
                              tirx.For(ui, 0, w, tirx.ForKind.VECTORIZED, block_body)))
    with low.bound({name: init + tirx.floordiv(extent, w) * w + ut}):
        left_body = low.body_with(inner, inner_name, inner_init + vv, False)
    # the iterations left run in parallel too: with fewer than a block (a
    # transpose of 8 columns) they are all of them
    left = tirx.For(ut, 0, tirx.floormod(extent, w), tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL,
                    tirx.For(vv, 0, tirx.max(inner_extent, 0), tirx.ForKind.SERIAL, left_body))
    blocked = tirx.SeqStmt([tirx.IfThenElse(extent >= w, block, None),
                            tirx.IfThenElse(tirx.floormod(extent, w) > 0, left, None)])
    # the loops as written where the column's lines fit in L1 (an NCHW -> NHWC
    # copy over 64 channels: 1.26x faster so than in blocks, measured)
    r = tirx.Var(name, INDEX)
    written = tirx.For(r, 0, extent, tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL,
                       low.body_with(node, name, from_zero(init, r), parallel_ok))
    return tirx.IfThenElse(inner_extent >= MIN_COLUMN, blocked, written)

