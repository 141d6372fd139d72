"""Register tiles for the reductions of the CPU's parallel loops (codegen/cpu.py).

A part of a chunk's body of the form ``for k { for j (parallel) { S } }``
(or a nest ``for k1 { for k2 { ... for j { S } } }``, as in a convolution)
where ``S`` accumulates into an element that does not move with the ``k``s
and is stride-1 in ``j`` becomes a micro-kernel: for each tile of
``tile_rows`` rows x ``tile_cols`` columns the accumulators live in a local
buffer (registers after unrolling) for the whole ``k`` loop, loaded before
it and stored after it.  Column tiles run outermost in the chunk, so a tile
of the right-hand matrix is reused by all of the chunk's rows while it is in
cache; they are cut at three widths (``tile_cols``, one vector, one
element), so symbolic sizes need no guards in the main tiles.  Legal when
``S`` reads no element that the part writes except through its accumulator
(checked with isl in :func:`~tcdsl.codegen.tile_checks.accumulates_privately`); ``j`` is coincident, so
its iterations may be reordered, and each accumulator still sums ``k`` in
order.

When a panel of the right-hand matrix is copied (:class:`_Panels`), the
``k`` loop is cut into blocks of ``k_block`` steps outside the row tiles, so
the block's panel stays in L1 while all of the chunk's rows use it; each
accumulator still sums ``k`` in order.
"""
from __future__ import annotations

import functools
from typing import Callable

import islpy as isl
from tvm import sym, tirx
from tvm.tirx.analysis import undefined_vars

from ..options import DEFAULT_DEPTH_K_BLOCK, CpuMapping
from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT, iterator, loop_ids, strip_marks, unit_stride
from ..polyhedral.schedule_counts import written_in_steps
from .expr import INDEX, wide_indices
from . import invariant
from ..sema import types as ty
from .collapse import run_as_one
from .scratch import STACK
from .cpu_strips import opaque, strip_steps
from .cpu_dot import all_columns, dot_columns, dot_lanes, gathers_columns, row_tiles
from .lower import from_zero, has_node, loads as _loads, seq, unroll_unsafe, uses as _uses
from .panels import (_Column, _Panels, _Prepacked, balanced_panels, box_of_sizes, pack_whole, packable, rest_packs,
                     rows_across as reads_across_rows, sliding_window, window_loops_outside)
from .tile_checks import accumulates_privately, runs_in_one_step, packed_loop, transposed_loop  # noqa: F401  (for cpu.py)


# ---------------------------------------------------------------- TIR side
class RegisterTiles:
    """Finds the micro-kernels of a chunk's body (:meth:`parts`) and emits
    them (:meth:`emit`); ``low`` is the kernel's ``cpu.CpuAstLowering``, ``m``
    its resolved CPU mapping."""

    def __init__(self, low, m: CpuMapping, single: bool = False):
        self.low = low
        self.m = m
        # tiles of a single row, its value bound by the caller (cpu.py, CpuAstLowering._one_row_tile): no panels
        self.single = single
        # (name, first value, count): the iterations of a parallel loop that
        # each tile covers besides its rows (``ChunkedLoop._outside`` in
        # codegen/cpu.py), while the parts of its body are emitted; else None
        self.depth: tuple[str, tirx.PrimExpr, int] | None = None
        # the rows of the chunked loop around the tiles (ChunkedLoop._chunks), when known
        self.rows_extent: tirx.PrimExpr | None = None
        self.parallel_columns = False  # the first width's column tiles in parallel (cpu_strips.few_rows)
        # (group, groups): the statements' columns in that many groups of whole main-width tiles, this
        # one's only (cpu_strips.two_way); each group's count of main tiles in all goes in ``windows``
        self.groups: tuple[tirx.PrimExpr, tirx.PrimExpr] | None = None
        self.windows: list[tirx.PrimExpr] = []
        # update statements whose initialization was folded into their tiles (cpu_strips.folded_init)
        self.fresh: set[str] = set()

    def _fixed(self, row: str) -> set[str]:
        """Loop variables that a tile's loops may not depend on."""
        return {row} | ({self.depth[0]} if self.depth else set())

    def parts(self, outer: isl.AstNode, row: str):
        """(reduction loops, [(column loop, statement call)]) when ``outer`` is
        ``for k1 { for k2 ... { for j (par) { S } ... } }`` with every ``S``
        fit for a register tile and no dependence between two of them (so the
        ``k`` loops can be split into one nest per statement), else None."""
        fixed = self._fixed(row)
        # the outer reduction loop's bounds may move with the row (a triangular ``k <= i`` piece of a
        # split select): each tile runs the steps all its rows share, and the others row by row (_Tile.tile)
        if not self.m.register_tiles or (fixed - {row}) & loop_ids(outer) or not unit_stride(outer):
            return None
        chain = [outer]
        body, _ = strip_marks(outer.for_get_body())
        while body.get_type() == NT.for_ and not self._column_loop(body):
            if fixed & loop_ids(body) or not unit_stride(body):
                return None
            chain.append(body)
            body, _ = strip_marks(body.for_get_body())
        leaves = isl_ast.parts(body) if body.get_type() == NT.block else [chain[-1].for_get_body()]
        names = {iterator(n) for n in chain}
        out = []
        for node in leaves:
            one = self._micro_one(names, node, row)
            if one is None:
                return None
            out.append(one)
        if len(out) > 1 and not self.low.independent([isl_ast.statement(c) for _, c in out]):
            return None
        return chain, out

    @staticmethod
    def _column_loop(node: isl.AstNode) -> bool:
        user, _ = strip_marks(node.for_get_body())
        return user.get_type() == NT.user

    def _micro_one(self, k_names: set[str], node: isl.AstNode, row: str):
        inner, mark = strip_marks(node)
        if inner.get_type() != NT.for_ or mark not in ("par", "par_steps") or loop_ids(inner) & (self._fixed(row) | k_names) \
                or not unit_stride(inner):
            return None
        user, _ = strip_marks(inner.for_get_body())
        if user.get_type() != NT.user:
            return None
        call = user.user_get_expr()
        s = self.low.stmts[isl_ast.statement(call)]
        if str(self.low.gen.sig.buffers[s.info.comp.tensor].dtype) == "bool":
            return None
        if not self.low.gen.private_accumulator(s):
            return None
        j_name = iterator(inner)
        # the accumulated element must not move with any k, and must move by 1 with j
        probe = {x: tirx.Var(x + "_p", INDEX) for x in k_names | {row, j_name}}
        with self.low.bound(probe):
            buf, idx, value, _ = self.low.statement_parts(call)
        if not idx or any(_uses(x, probe[k]) for x in idx for k in k_names):
            return None
        if has_node(value, unroll_unsafe) or any(has_node(x, unroll_unsafe) for x in idx):
            return None
        coeffs = sym.detect_linear_equation(idx[-1], [probe[j_name]])
        if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm) or coeffs[0].value != 1:
            return None
        if any(_uses(x, probe[j_name]) for x in idx[:-1]):
            return None
        return inner, call

    def shares_columns(self, parts, row: str, name: str | None) -> bool:
        """The reads of ``parts`` (what :meth:`parts` found) that move with the
        column do not move with the rows but with the loop ``name``, and each
        accumulated element moves with ``name`` in an index of its own: the
        loop may then run outside the row tiles, several of its iterations in
        each tile (``ChunkedLoop._outside`` in codegen/cpu.py).  With no
        ``name``: those reads do not move with the rows (the rows share them)."""
        chain, leaves = parts
        for inner, call in leaves:
            j = iterator(inner)
            probe = {x: tirx.Var(x + "_p", INDEX) for x in {iterator(c) for c in chain} | {row, j, name or j}}
            with self.low.bound(probe):
                _, idx, value, _ = self.low.statement_parts(call)
            cols = [x for ld in _loads(value) if any(_uses(y, probe[j]) for y in ld.indices) for x in ld.indices]
            if any(_uses(x, probe[row]) for x in cols):
                return False
            if name is None:
                continue
            if not any(_uses(x, probe[name]) for x in cols):
                return False
            mine = [x for x in idx if _uses(x, probe[name])]
            if len(mine) != 1 or _uses(mine[0], probe[row]) or _uses(mine[0], probe[j]):
                return False
            coeffs = sym.detect_linear_equation(mine[0], [probe[name]])
            if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm) or coeffs[0].value == 0:
                return False
        return True

    def emit(self, parts, row: str, lo, n) -> tirx.Stmt:
        """The micro-kernels of ``parts`` (what :meth:`parts` found) for rows lo .. lo+n-1."""
        chain, leaves = parts
        return seq([self._micro_one_stmt(chain, leaf, row, lo, n) for leaf in leaves])

    def _micro_one_stmt(self, chain, leaf, row: str, lo, n) -> tirx.Stmt:
        inner, call = leaf
        m = self.m
        j_name = iterator(inner)
        # the reduction loops' names bound to 0 while the column loop's range is read (it does
        # not depend on them) and while the accumulated element is (it does not move with them)
        zeros = {iterator(n): tirx.const(0, INDEX) for n in chain}
        with self.low.bound(zeros):
            j_init, j_ext = self.low.loop_range(inner)
        j_ext = tirx.max(j_ext, 0)
        depth = self.depth[2] if self.depth else 1
        # a tile over several iterations of the depth loop: as many accumulators in all
        main = max(m.vector_width, m.tile_cols // depth // m.vector_width * m.vector_width)
        window = []
        if self.groups is not None:  # this group's columns: whole main tiles, the last group also the rest
            g, groups = self.groups
            units = tirx.floordiv(j_ext, main)
            per = tirx.floordiv(units + groups - 1, groups)
            # (opaque: the strips' nested counts over these formulas took TVM's simplifier minutes)
            begin = tirx.min(g * per, units) * main
            first, count = tirx.Var(j_name + "_first", INDEX), tirx.Var(j_name + "_count", INDEX)
            window = opaque(j_name + "_window", [(first, begin), (count, tirx.Select(
                g == groups - 1, j_ext, tirx.min((g + 1) * per, units) * main) - begin)])
            self.windows.append(units)
            j_init, j_ext = j_init + first, tirx.max(count, 0)
        return seq(window + [self._columns_of(chain, call, row, lo, n, j_name, j_init, j_ext, zeros, main, depth)])

    def _columns_of(self, chain, call, row: str, lo, n, j_name: str, j_init, j_ext, zeros, main: int,
                    depth: int) -> tirx.Stmt:
        m = self.m
        # Panels are copied outside sequential loops only: inside one, every step would copy
        # them again for the few rows of a batch (the Elman RNN: no gain, twice the code).
        in_loop = self.low.kernel is None or bool(self.low.kernel.loops)
        ragged = row in loop_ids(chain[0])  # the rows' reduction ranges differ (see _Tile.tile)
        # a statement that runs at one step of its loop (an ``if l == 0`` branch) gets the main tiles
        # only: worth tiles where the loop is short (layers), little code where long (an RNN's first step)
        lean = in_loop and self.low.gen.one_step(self.low.stmts[isl_ast.statement(call)])
        copies = not self.depth and not ragged and not self.single and not lean  # panels may be copied
        # ... but for a tensor the loop writes, read across its last dimension
        # (``X(s - 1, k, j)`` of a Newton-Schulz step; docs/internals.md)
        stepped = written_in_steps(self.low.kernel) if in_loop and self.low.kernel is not None else set()
        packed = [p for p in self._packable(chain, call, row, j_name) if not in_loop or p[0] in stepped
                  and p[1] is not None and max(p[1]) > p[2]] \
            if (not in_loop or stepped) and copies and box_of_sizes(self.low, chain, row, j_name) else []
        rows_across = bool(packed) and reads_across_rows(self.low, chain, call, row, j_name)
        # a strided read (a convolution of stride 2) or one across its tensor (``W(r, e)``) is copied to a panel
        # for every column tile a vector wide or more; the second's serve the rows after the last full tile too
        strided = any(dims is None for _, dims, _ in packed)
        across = not strided and any(max(dims) > col for _, dims, col in packed)

        def strips(widths, tag: str, body_of, start=tirx.const(0, INDEX), first=None) -> tuple[list, tirx.PrimExpr]:
            """Column tiles of each width in turn from ``start`` (of the first
            width ``first`` tiles, if given, else as many as fit): their loops,
            and the first column they leave."""
            stmts = []
            for i, w in enumerate(dict.fromkeys(widths)):
                count = first if i == 0 and first is not None else tirx.floordiv(j_ext - start, w)
                jt = tirx.Var(f"{j_name}_{tag}{w}", INDEX)
                tile = _Tile(self, chain, call, row, j_name, j_init + start + jt * w, w, zeros)
                par = tirx.ForKind.PARALLEL if self.parallel_columns and i == 0 else tirx.ForKind.SERIAL
                stmts.append(tirx.For(jt, 0, count, par, body_of(tile, jt)))
                start = start + count * w
            return stmts, start

        def columns(pack: bool) -> tirx.Stmt:
            # outside sequential loops also half-width tiles: a 4 x 64 tile leaves 32 columns to 16-wide ones
            half = (m.tile_cols // 2,) if not in_loop and m.tile_cols >= 4 * m.vector_width and not lean else ()
            if depth > 1:
                half = ()
            # outside sequential loops also vectors of a half and a quarter of the width before
            # single columns (a convolution's 28 columns: 16 + 8 + 4; single columns were most of its time)
            vw = m.vector_width
            narrow = tuple(w for w in (vw // 2, vw // 4) if w >= 4) if (not in_loop or depth > 1) and not lean else ()

            def body(tile, jt) -> tirx.Stmt:
                if pack and packed and (tile.w == m.tile_cols or (strided or across) and tile.w in half + (vw,)):
                    return _Panels(self, chain, call, row, j_name, tile.col0, tile.w, packed, rows_across).around(
                        lambda ks: tile.rows(lo, n, ks, rest=across and tile.w == m.tile_cols))
                if pack and whole and tile.w == m.tile_cols:
                    return _Prepacked(self, call, row, j_name, tile.col0, tile.w, jt, whole).around(
                        lambda: tile.rows(lo, n, rest=False))
                if pack and rest and tile.w == 2 * m.vector_width:
                    return _Prepacked(self, call, row, j_name, tile.col0, tile.w, jt, rest).around(
                        lambda: tile.rows(lo, n, rest=False))
                return channel_blocks(tile)
            # inside a sequential loop, the columns after the packed panels of tile_cols = 3 vectors in packed
            # panels of 2 (fewer 3-vector panels where that leaves less than a vector: panels.balanced_panels)
            rest = rest_packs(self.low.gen, whole, j_ext, m, self._when_rows()) \
                if pack and whole and main == m.tile_cols == 3 * m.vector_width else []
            if rest:  # (and one vector: fewer than 16 columns in all leave up to 15)
                stmts, start = strips((main, 2 * m.vector_width, m.vector_width), "w", body,
                                      first=balanced_panels(j_ext, main, 2 * m.vector_width))
            else:
                stmts, start = strips((main,) + half + (m.vector_width,), "w", body)
            stmts.append(tail(start, narrow, channel_blocks,
                              over_of=lambda tile: body(tile, None) if pack and strided else channel_blocks(tile),
                              rows_of=lambda cols: row_tiles(row, lo, n, m.tile_rows, cols)))
            done = tirx.floordiv(j_ext, main) * main if pack and across and main == m.tile_cols else None
            return seq(stmts + [leftover_rows(done)])

        def channel_blocks(tile) -> tirx.Stmt:
            """The row tiles of ``tile``'s columns; deep ones (outside sequential
            loops) in blocks of ``k_block`` steps of the reduction loop that
            indexes a dimension alone (a convolution's input channels ``c``)
            outside the row tiles, whose block's input rows then stay in L1
            (docs/internals.md, CPU mapping); not over one reduction loop."""
            moving = {row, j_name, *self.depth[:1]} | {iterator(c) for c in chain} if self.depth else set()
            if depth == 1 or in_loop or len(chain) < 2 or (loop_ids(chain[0]) - {iterator(chain[0])}) & moving:
                return tile.rows(lo, n, rest=False)
            kb = m.k_block or DEFAULT_DEPTH_K_BLOCK
            with self.low.bound(zeros):
                _, ext = self.low.loop_range(chain[0])
            ext = tirx.max(ext, 0)
            b = tirx.Var(f"{iterator(chain[0])}_kb", INDEX)
            return tirx.For(b, 0, tirx.floordiv(ext + kb - 1, kb), tirx.ForKind.SERIAL,
                            tile.rows(lo, n, (b * kb, tirx.min(kb, ext - b * kb)), rest=False))

        dot = dot_lanes(self, chain, call, row, j_name)
        # columns that a vector would gather, rows too few for a panel: dot products (codegen/cpu_dot.py)
        gathers = dot and gathers_columns(self, chain, call, row, j_name)

        def dots(r0, rows, first=tirx.const(0, INDEX)) -> tirx.Stmt:
            return all_columns(lambda c0: _Tile(self, chain, call, row, j_name, c0, 1, zeros), j_init + first,
                               j_ext - first, row, r0, rows, m.tile_rows)

        def tail(start, narrow, body_of, over_of=None, rows_of=None) -> tirx.Stmt:
            """The columns from ``start`` on (fewer than a vector): when the row
            has a vector's worth of columns, one vector tile that ends at its last
            column and overlaps the tiles before it, storing only its new columns
            (a convolution's 28 columns: 16 + 16 lanes instead of 16 + 8 + 4, one
            pass less over the reduction); else narrower vectors and single
            columns, or dot products in lanes (``rows_of``: codegen/cpu_dot.py)."""
            vw, first = m.vector_width, start
            if dot and rows_of is not None:
                singles = [dot_columns(lambda c0: _Tile(self, chain, call, row, j_name, c0, 1, zeros),
                                       j_init + start, j_ext - start, rows_of)]
            else:
                singles, _ = strips(narrow + (1,), "n", lambda tile, _: body_of(tile), start)
            if vw < 4 or not m.overlap_tail or lean:
                return seq(singles)
            over = _Tile(self, chain, call, row, j_name, j_init + j_ext - vw, vw, zeros, keep_below=j_init + first)
            return tirx.IfThenElse(tirx.all(first < j_ext, j_ext >= vw), (over_of or body_of)(over),
                                   tirx.IfThenElse(first < j_ext, seq(singles), None))

        def leftover_rows(first=None) -> tirx.Stmt | None:
            """The rows after the last full row tile (all of them for a batch
            of 1): inside sequential loops first in tiles of half the rows and
            twice the columns (a thread's 2 rows under tiles of 4: as many
            accumulators), then one at a time, in tiles of 16 vectors, then 8
            (as many accumulators as a full tile holds at most), then one
            vector, half a vector and single columns: a 1 x 64 tile has 4
            accumulators, too few to hide the FMA latency; 1 x 256 has 16."""
            rb = m.tile_rows
            if rb == 1:
                return None
            if gathers:
                return dots(lo + tirx.floordiv(n, rb) * rb, tirx.floormod(n, rb),
                            tirx.const(0, INDEX) if first is None else first)
            r = tirx.Var(row + "_t", INDEX)
            left = tirx.floormod(n, rb)
            half = rb // 2 if rb >= 4 and depth == 1 and in_loop and not self.single and not lean else 0
            r0 = lo + tirx.floordiv(n, rb) * rb + (tirx.floordiv(left, half) * half if half else 0) + r
            vw = m.vector_width
            # (no tile_cols-wide tiles here: one variant less to compile, 0.85 -> 0.79 s for the Elman RNN)
            wide = tuple(w for w in (16 * vw, 8 * vw, 4 * vw) if w * depth <= m.tile_rows * m.tile_cols)[:2]
            if self.single:  # a strip of columns: its width in as few tiles as may be (64 = 4 vectors, not 4 x 1)
                wide = tuple(w for w in (8 * vw, 4 * vw, 2 * vw) if w * depth <= m.tile_rows * m.tile_cols)
            # narrower vectors before single columns: a single column's sum is one chain of
            # dependent FMAs (a batch-1 RNN with 200 columns: 8 of them took 4 of its 6 us per step)
            narrow = tuple(w for w in (vw // 2,) if w >= 4 and not lean)
            if lean:
                wide = ()
            ks = strip_steps(self.low, chain) if self.single else None
            first = tirx.const(0, INDEX) if first is None else first  # (the columns before: in the panels)
            stmts, start = strips(wide + (vw,), "v", lambda tile, _: tile.tile(r0, 1, ks), first)
            stmts.append(tail(start, narrow, lambda tile: tile.tile(r0, 1, ks), rows_of=lambda cols: cols(r0, 1)))
            if not half:
                return tirx.For(r, 0, left, tirx.ForKind.SERIAL, seq(stmts))
            q = tirx.Var(row + "_h", INDEX)
            h0 = lo + tirx.floordiv(n, rb) * rb + q * half
            hs, start = strips((max(2 * m.tile_cols // vw * vw, vw), vw), "h", lambda t, _: t.tile(h0, half), first)
            hs.append(tail(start, narrow, lambda tile: tile.tile(h0, half), rows_of=lambda cols: cols(h0, half)))
            return seq([tirx.For(q, 0, tirx.floordiv(left, half), tirx.ForKind.SERIAL, seq(hs)),
                        tirx.For(r, 0, tirx.floormod(left, half), tirx.ForKind.SERIAL, seq(stmts))])

        # inside one, inputs (and temporaries the loop does not write) read as panels
        # (an RNN's recurrent weight) are packed whole, once per call (panels.pack_whole)
        whole = self._whole(chain, call, row, j_name, j_init) if in_loop and copies else []
        few = (lambda: dots(lo, n)) if gathers and not whole else None
        if isinstance(n, tirx.IntImm) and n.value < m.tile_rows and not packed:
            # a known row count below a full tile (one row: a unit loop isl dropped)
            return few() if few is not None else leftover_rows()
        if whole:
            packed = []  # (one kind of panel per tile)
        if not packed:
            return few() if few is not None else columns(bool(whole))
        # a panel is worth copying when several row tiles read it
        return tirx.IfThenElse(n >= 2 * m.tile_rows, columns(True), few() if few is not None else columns(False))

    def _whole(self, chain, call, row: str, j_name: str, j_init) -> list:
        """The tensors of :meth:`_packable` that are inputs of the program or
        temporaries that the program's top-level item around this kernel
        does not write, read at column ``j`` itself (its loop from 0), packed
        whole in panels of ``tile_cols`` columns before that item: (tensor,
        kdims, jdim, the packed buffer).  Their contents do not change while
        the item runs, so one copy serves every step of its sequential loops."""
        m, gen = self.m, self.low.gen
        if not m.prepack or m.tile_cols % m.vector_width or not (isinstance(j_init, tirx.IntImm) and j_init.value == 0):
            return []
        probe = {x: tirx.Var(x + "_p", INDEX) for x in [row, j_name] + [iterator(c) for c in chain]}
        with self.low.bound(probe):
            _, _, value, _ = self.low.statement_parts(call)
        at_column = {ld.source.name: ld.indices for ld in _loads(value)
                     if not any(_uses(x, probe[row]) for x in ld.indices)}
        out = []
        for name, kdims, jdim in self._packable(chain, call, row, j_name):
            tensor = gen.sig.buffers[name]
            # an input, or a temporary that the top-level item around does not write
            fixed = name in gen.sig.inputs or name not in gen.sig.outputs and name not in gen.item_writes
            if kdims is None or not fixed or not isinstance(tensor, tirx.Buffer) \
                    or not at_column[name][jdim].same_as(probe[j_name]):
                continue
            panels = sym.Analyzer().simplify(tirx.floordiv(tirx.max(tensor.shape[jdim], 0), m.tile_cols))
            if isinstance(panels, tirx.IntImm) and panels.value == 0:
                continue  # fewer columns than one panel at the sizes fixed
            key = (name, tuple(kdims), jdim, m.tile_cols)
            if key not in gen.prologue:
                gen.prologue[key] = (*pack_whole(tensor, kdims, jdim, m.tile_cols, m.vector_width), [])
            # the copy is needed only when some chunk has a full row tile (a
            # batch of 1 runs no such tile: no copy, as before)
            gen.prologue[key][2].append(self._when_rows())
            out.append((tensor, kdims, jdim, gen.prologue[key][0], 0))
        return out

    def _when_rows(self) -> tirx.PrimExpr | None:
        """The condition, over the sizes alone, that the kernel's rows fill a
        register tile (None: always, or not known before the program)."""
        extent = self.rows_extent
        if extent is None:
            return None
        sizes = [v for v in self.low.gen.sig.size_vars.values() if isinstance(v, tirx.Var)]
        if len(undefined_vars(extent, sizes)):
            return None
        return tirx.max(extent, 0) >= self.m.tile_rows

    _packable = packable  # (panels.py)


class _Tile(_Column):
    """Register tiles of a column tile over a run of rows; ``chain`` are the
    reduction loops, ``zeros`` binds their names to 0."""

    def __init__(self, gen: RegisterTiles, chain, call, row: str, j_name: str, col0, w: int, zeros: dict,
                 keep_below=None):
        super().__init__(gen, call, row, j_name, col0, w)
        self.chain = chain
        self.zeros = zeros
        self.depth = gen.depth
        # columns below this one were stored by an earlier tile: stored again
        # unchanged (the overlapping last tile of a row, see ``tail``)
        self.keep_below = keep_below

    def rows(self, lo, n, ks=None, rest: bool = True) -> tirx.Stmt:
        """The tiles of rows lo .. lo+n-1; ``ks`` = (first, count): only these steps of the (single)
        reduction loop, counted from its first value; ``rest`` False: the full row tiles only."""
        rb = self.m.tile_rows
        sb = tirx.Var(self.row + "_b", INDEX)
        full = tirx.For(sb, 0, tirx.floordiv(n, rb), tirx.ForKind.SERIAL, self.tile(lo + sb * rb, rb, ks))
        if rb == 1 or not rest:
            return full
        r = tirx.Var(self.row + "_t", INDEX)
        return tirx.SeqStmt([full, tirx.For(r, 0, tirx.floormod(n, rb), tirx.ForKind.SERIAL,
                                            self.tile(lo + tirx.floordiv(n, rb) * rb + r, 1, ks))])

    def tile(self, r0, nr: int, ks=None) -> tirx.Stmt:
        """One register tile: rows r0 .. r0+nr-1 x the tile's columns (x the
        depth loop's iterations, when there is one)."""
        low, w, row, j_name, col0 = self.low, self.w, self.row, self.j_name, self.col0
        vw = self.m.vector_width if w % self.m.vector_width == 0 else w if w in (2, 4, 8) else 1
        s = low.stmts[isl_ast.statement(self.call)]
        depth_name, depth_first, nd = self.depth if self.depth else (None, None, 1)
        acc = tirx.decl_buffer((nd * nr, w), low.gen.sig.buffers[s.info.comp.tensor].dtype, name="acc",
                               scope=STACK)

        def lanes(body_of: Callable, rows: int | None = None, order: str = "dru") -> tirx.Stmt:
            """for d, r, u (unrolled, in ``order``) for v (vectorized): body_of(d, r, col)"""
            r, u, v = (tirx.Var(x, INDEX) for x in ("r", "u", "v"))
            d = tirx.Var("d", INDEX) if nd > 1 else tirx.const(0, INDEX)
            inner = tirx.For(v, 0, vw, tirx.ForKind.VECTORIZED if vw > 1 else tirx.ForKind.SERIAL,
                             body_of(d, r, u * vw + v))
            loops = {"d": (d, nd), "r": (r, nr if rows is None else rows), "u": (u, w // vw)}
            for x, n in (loops[c] for c in order[::-1] if c != "d" or nd > 1):
                inner = tirx.For(x, 0, n, tirx.ForKind.UNROLLED, inner)
            return inner

        def at(d, r, extra=None):
            out = {row: r0 + r, **(extra or {})}
            if depth_name is not None:
                out[depth_name] = depth_first + d
            return out

        def element(d, r, c):
            with low.bound({**self.zeros, **at(d, r, {j_name: col0 + c})}):
                buf, idx, _, _ = low.statement_parts(self.call)
            return buf, idx

        def load(d, r, c):
            buf, idx = element(d, r, c)
            return tirx.BufferStore(acc, tirx.BufferLoad(buf, idx), [d * nr + r, c])

        def start(d, r, c):  # the identity, where the initialization was folded in (the first block's)
            return tirx.BufferStore(acc, tirx.const(ty.identity(s.info.comp.reduction, str(acc.dtype)), acc.dtype),
                                    [d * nr + r, c])
        if s.name in self.gen.fresh:
            at_first = True if ks is None else sym.Analyzer().simplify(ks[0] == 0)
            if isinstance(at_first, tirx.IntImm):
                at_first = bool(at_first.value)
            first = at_first if isinstance(at_first, bool) else None
            first = lanes(start) if first else lanes(load) if first is False \
                else tirx.IfThenElse(at_first, lanes(start), lanes(load))
        else:
            first = lanes(load)

        def store(d, r, c):
            buf, idx = element(d, r, c)
            value = tirx.BufferLoad(acc, [d * nr + r, c])
            if self.keep_below is not None:
                value = tirx.Select(col0 + c >= self.keep_below, value, tirx.BufferLoad(buf, idx))
            return tirx.BufferStore(buf, value, idx)

        terms = invariant.RowTerms(nd * nr)  # the row's divisions by a value, once per tile

        def update(d, r, c):
            with low.bound(at(d, r, {j_name: col0 + c})):
                _, _, value, combine = low.statement_parts(self.call)
                if terms is not None:
                    value = terms.take(value, r, d, nr, [low.env[iterator(x)] for x in self.chain] + [c])
            return tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [d * nr + r, c]), value), [d * nr + r, c])

        if row in loop_ids(self.chain[0]):
            terms = None
            return tirx.SeqStmt([tirx.AllocBuffer(acc), first, self._ragged(r0, nr, nd, lanes, update),
                                 lanes(store)])
        saved = self.chain
        if (ks is None or self.depth) and self.m.reorder_reductions:  # (a deep tile's ks: channel_blocks)
            self.chain = window_loops_outside(self.low, self.depth, self.chain, self.call, row, j_name)
        try:
            # LLVM keeps the operands the inner unrolled loops reuse in registers
            # (the vectors of a row, or the rows' scalars), one of the outer's at
            # a time: the fewer inside.  AVX2's 4 x 3 x 8 convolution tile (4
            # channels' scalars, 3 rows' vectors) as r, d, u: 12 accumulators + 3
            # + 1 registers of 16 (d, r, u: + 4 + 1, one spilled); a 2 x 48 tile
            # as u, r: 12 + 2 + 1 (r, u: + 6 + 1)
            vectors = nd * (w // vw)
            order = "rdu" if vectors < nr else "dur" if vectors > nr > 1 else "dru"
            def build() -> tirx.Stmt:
                return self._nest(0, lambda: lanes(update, order=order), ks and (iterator(saved[0]),) + tuple(ks))
            nest = build()
            same = terms.uniform_when()
            if same is not None:  # the rows' terms may all be equal: a variant that reads row 0's
                terms.uniform = True
                nest = tirx.IfThenElse(same, build(), nest)
        finally:
            self.chain = saved
        return tirx.SeqStmt([tirx.AllocBuffer(acc), first] + terms.fill(nr, nd) + [nest, lanes(store)])

    def _ragged(self, r0, nr: int, nd: int, lanes: Callable, update: Callable) -> tirx.Stmt:
        """The reduction of a tile whose outer loop's range moves with the row
        (``for k in 0 .. i`` of a triangular piece): the steps every row of
        the tile has, ``[max first, min end)``, as one tile; before them the
        steps of each row below that range and after them those above it, row
        by row.  Each row still sums its steps in increasing ``k``."""
        low, node = self.low, self.chain[0]
        name = iterator(node)
        simplify = sym.Analyzer().simplify
        # the bounds live in a local array (LLVM keeps it in registers): TVM's
        # passes see through variables, and a band's nested min/max
        # (``k >= i - 2 && k <= i + 3``) took them half a minute per kernel
        cells = tirx.decl_buffer((2 * nr + 2,), INDEX, name=f"{name}_range", scope="local")
        binds = [tirx.AllocBuffer(cells)]
        def bind(x: tirx.PrimExpr) -> tirx.PrimExpr:
            binds.append(tirx.BufferStore(cells, simplify(x), [len(binds) - 1]))
            return tirx.BufferLoad(cells, [len(binds) - 2])
        ranges = []
        for r in range(nr):
            with low.bound({self.row: r0 + r}):
                init, ext = low.loop_range(node)
            ranges.append((bind(init), bind(init + tirx.max(ext, 0))))
        lo = bind(functools.reduce(tirx.max, [a for a, _ in ranges]))
        hi = bind(tirx.max(functools.reduce(tirx.min, [b for _, b in ranges]), lo))

        def run(first, end, body_of) -> tirx.Stmt:
            k = tirx.Var(name + "_k", INDEX)
            with low.bound({name: first + k}):
                body = self._nest(1, body_of)
            return tirx.For(k, 0, simplify(tirx.max(end - first, 0)), tirx.ForKind.SERIAL, body)

        def one_row(r: int) -> Callable:
            return lambda: lanes(lambda d, rr, c: update(d, tirx.const(r, INDEX), c), rows=1)

        before = [run(a, tirx.min(lo, b), one_row(r)) for r, (a, b) in enumerate(ranges)]
        after = [run(tirx.max(hi, a), b, one_row(r)) for r, (a, b) in enumerate(ranges)]
        return tirx.SeqStmt(binds + [seq(before + [run(lo, hi, lambda: lanes(update))] + after)])

    def _nest(self, i: int, innermost: Callable, ks=None) -> tirx.Stmt:
        """The reduction loops chain[i:], in their order, around ``innermost()``;
        ``ks`` = (name, first, count): only these steps of the loop ``name``
        (see :meth:`rows`)."""
        if i == len(self.chain):
            return innermost()
        run = run_as_one(self, i, innermost, ks) if i + 1 < len(self.chain) else None
        if run is not None:
            return run
        node = self.chain[i]
        name = iterator(node)
        init, ext = self.low.loop_range(node)
        k = tirx.Var(name + "_k", INDEX)
        wide = i == len(self.chain) - 1 and sliding_window(self.low, self.chain, self.call, self.row, self.j_name)
        if ks is not None and name == ks[0]:
            it, ext = init + ks[1] + k, ks[2]
        else:
            it, ext = from_zero(init, k), tirx.max(ext, 0)
        with self.low.bound({name: it}), wide_indices(wide):
            body = self._nest(i + 1, innermost, ks)
        return tirx.For(k, 0, ext, tirx.ForKind.SERIAL, body)
