"""Copies that transpose, in blocks of columns read whole.

``y(j, i) = x(i, j)`` -- a user's transpose, or the copy ``Whh_t(k, j) =
Whh(j, k)`` that polyhedral/layout.py makes of weights in PyTorch's (out,
in) layout -- is two parallel loops ``for j { for i { .. } }`` whose inner
loop writes ``y`` contiguously and reads ``x`` down a column, one cache
line (and, for large ``x``, one page) per element: a 1024 x 1024 copy took
3.4 ms on a 2-core AMD EPYC (1.8 ms in blocks), a power iteration of 50
steps 7.0 (5.9).

:func:`transposed_pair` runs such a pair in tiles: the outer loop in blocks
of ``2 * lanes`` iterations, and inside each block the inner loop in steps of
``lanes``, each row of the block's ``y`` getting ``lanes`` contiguous
elements (a vector store: a whole line) gathered from the ``lanes`` rows of
``x`` that the tile reads, which stay in cache through it.  Written an
element at a time down the block's rows of ``y`` (the block vectorized
across them), those rows shared a few cache sets wherever the rows were a
power of two apart: 2048 x 512 took 1.5 ms against 0.32 for 2000 x 500 and
0.55 in tiles (Intel Xeon, 2 threads); reading down whole columns as written
(one line per element, the lines kept from one outer iteration to the next
only while they fit in cache and in their sets), 300 x 4096 took 1.3 ms
against 0.59 in tiles.  The inner iterations left after the last full step,
then the outer ones left after the last full block, run one element at a
time (those in parallel).  It applies when the body is one store whose last index moves
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
from .lower import coefficient as coeff, loads, uses


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
    lanes = low.gen.cpu.resolved(False).vector_width
    w = 2 * lanes  # two vectors: a 64-byte line of float32 on AVX2
    extent, n_inner = tirx.max(extent, 0), tirx.max(inner_extent, 0)
    kind = tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL

    def row(outer) -> tuple:
        """(step variable, vector step, the rest one element at a time) of
        the inner loop for the outer iteration ``outer``."""
        vo, vi, vr = (tirx.Var(inner_name + s, INDEX) for s in ("_tile", "_lane", "_rest"))
        with low.bound({name: init + outer}):
            tile = low.body_with(inner, inner_name, inner_init + vo * lanes + vi, False)
            rest = low.body_with(inner, inner_name, inner_init + tirx.floordiv(n_inner, lanes) * lanes + vr, False)
        return vo, tirx.For(vi, 0, lanes, tirx.ForKind.VECTORIZED, tile), \
            tirx.For(vr, 0, tirx.floormod(n_inner, lanes), tirx.ForKind.SERIAL, rest)

    uo, ui, ur, ut = (tirx.Var(name + s, INDEX) for s in ("_blk", "_in", "_row", "_left"))
    # a tile of ``w`` rows of ``y`` by ``lanes`` columns, its rows one after another
    vo, tile, _ = row(uo * w + ui)
    _, _, rest = row(uo * w + ur)
    block = tirx.For(uo, 0, tirx.floordiv(extent, w), kind, tirx.SeqStmt([
        tirx.For(vo, 0, tirx.floordiv(n_inner, lanes), tirx.ForKind.SERIAL, tirx.For(ui, 0, w, tirx.ForKind.SERIAL, tile)),
        tirx.For(ur, 0, w, tirx.ForKind.SERIAL, rest)]))
    # the rows left run in parallel too: with fewer than a block (a transpose
    # of 8 columns) they are all of them
    vo, tile, rest = row(tirx.floordiv(extent, w) * w + ut)
    left = tirx.For(ut, 0, tirx.floormod(extent, w), kind, tirx.SeqStmt([
        tirx.For(vo, 0, tirx.floordiv(n_inner, lanes), tirx.ForKind.SERIAL, tile), rest]))
    return tirx.SeqStmt([tirx.IfThenElse(extent >= w, block, None),
                         tirx.IfThenElse(tirx.floormod(extent, w) > 0, left, None)])
