"""CPU code generation: parallel chunks, register tiles, vectors.

The isl AST says which loops are parallel (``par`` marks) and in what order
the statements run; :mod:`tcdsl.codegen.lower` turns it into TIR loop by
loop.  On the CPU (:class:`CpuProgram`, the driver's lowering for target
``llvm``) a kernel's parallel loops get the work a hand-written CPU kernel
does:

* **Chunks of rows.**  The outermost parallel loop (call its iterations
  *rows*) is cut into one chunk per thread (at most ``chunk_rows`` rows
  each), and inside a chunk every part of the loop body runs for all the
  chunk's rows before the next part.  That is legal because the loop is
  coincident: no dependence goes from one row to another.
* **Register tiles for reductions** (:mod:`tcdsl.codegen.cpu_tiles`): a
  reduction's accumulators stay in registers over its reduction loop, for
  tiles of rows x columns.
* **The sequential loop inside.**  When the schedule marks the loop
  ``par_steps`` (no dependence between steps of the enclosing ``for``
  crosses rows, see :mod:`tcdsl.polyhedral.schedule`), that ``for`` runs
  inside each chunk, so the steps need no barrier between threads: one
  parallel region for the whole recurrence instead of one per step.
* **Vectors.**  An innermost parallel loop whose stores are stride-1 becomes
  vector iterations and a scalar tail.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import islpy as isl
from tvm import tirx

from ..options import CpuMapping
from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT, iterator, loop_ids, strip_marks, unit_stride
from ..polyhedral.model import Block, IslStmt, Kernel, unit_dimension
from ..polyhedral.schedule import PARALLEL, PARALLEL_STEPS, SERIAL, fixed_set
from ..sema.affine import isl_name
from . import invariant
from .collapse import collapse, declarations, divide, divided_rows, merged_rows, parallel_pair
from .cpu_reduce import vector_reduction
from .cpu_scalar_sums import scalar_nest
from .cpu_scatter import scatter_kernel
from .cpu_steps import STEP_ROWS, WithBody, branch_loop, nested_steps, step_rows, steps_wrap, stride_one_stores, strided_rows
from .cpu_strips import batch_rows, branches_as_selects, few_rows, nonempty_vectors, opaque, opaque_size, strip_blocks
from .cpu_tiles import RegisterTiles, accumulates_privately, packed_loop, runs_in_one_step, transposed_loop
from .tile_checks import gathers, panels_shared_across, wide_elements
from .cpu_transpose import transposed_pair
from .expr import INDEX
from .lower import AstLowering, ProgramLowering, from_zero, has_node, is_if_then_else, seq


# Lanes of a plain vectorized loop (a map, a row's normalisation): the
# mapping's ``vector_width``, by default 16 with AVX-512 (a map of tanh and
# sigmoid over 512 x 4096 floats took 1.85 ms with 16 lanes against 2.3 ms
# with 8 on an Intel Xeon, Emerald Rapids) and 8 without.
def vector_lanes(mapping: CpuMapping | None = None) -> int:
    """The lanes of a plain vectorized loop under ``mapping`` (None: the defaults)."""
    return (mapping or CpuMapping()).resolved(False).vector_width


REDUCE_BLOCK = 32  # vector iterations between combining a reduction's lanes (codegen/cpu_reduce.py)


class CpuProgram(ProgramLowering):
    """The program on the CPU: a ``for`` runs inside its body's parallel loop
    when it can (:meth:`sequential`); kernels are lowered by
    :class:`CpuAstLowering`."""

    size_divisions = True

    def __init__(self, *args):
        super().__init__(*args)
        self.cpu = self.options.cpu
        self._private: dict[str, bool] = {}

    def one_step(self, s: IslStmt) -> bool:
        """See :func:`tcdsl.codegen.cpu_tiles.runs_in_one_step` (inside a sequential loop)."""
        loops = next((k.loops for k in self.model.kernels() if s in k.stmts), ())
        return bool(loops) and runs_in_one_step(s, isl_name(loops[-1].var))

    def private_accumulator(self, s: IslStmt) -> bool:
        """See :func:`tcdsl.codegen.cpu_tiles.accumulates_privately` (cached per statement)."""
        if s.name not in self._private:
            self._private[s.name] = accumulates_privately(s)
        return self._private[s.name]

    def kernel(self, k: Kernel, env: dict) -> tirx.Stmt:
        """A kernel runs as one row (:meth:`ChunkedLoop.one_row`), as the symbolic kernel runs a batch of 1,
        when its outermost parallel loop is missing: isl dropped it, a loop of one iteration at the fixed sizes
        (:func:`_outer_loop_dropped`), or its outermost loops are serial with parallel loops below them (``for k
        { for j (par) ... }``, :func:`_serial_outside`: scheduled without the unit loop when the sizes were fixed
        first) -- a parallel region per step of a reduction loop, or several per step of a sequential ``for``,
        costs more than the step.  The second case only inside sequential loops or where a dimension of the
        kernel is 1 at the fixed sizes; elsewhere (a symbolic kernel outside any ``for``, whose loops may be
        long) the inner loops stay parallel.  A scatter-add kernel is lowered by codegen/cpu_scatter.py."""
        if k.scatter is not None and self.cpu.scatter:
            return scatter_kernel(self, k, env)
        ast = self.ast_of(k)
        guard, inner = _size_guard(ast, k)
        if self.cpu.parallel and (_outer_loop_dropped(inner) or _serial_outside(inner)
                                  and (bool(k.loops) or self._unit_dimension(k))):
            low = CpuAstLowering(self, {s.name: s for s in k.stmts}, env, k)
            out = ChunkedLoop(low, self.cpu, None).one_row(inner)
            return out if guard is None else tirx.IfThenElse(low._cond(guard), out, None)
        return super().kernel(k, env)

    def _unit_dimension(self, k: Kernel) -> bool:
        """Some statement of ``k`` has a dimension of a single value at the sizes
        fixed in this lowering (none: the symbolic kernel)."""
        fixed = {s: int(v.value) for s, v in self.sig.size_vars.items() if isinstance(v, tirx.IntImm)}
        return bool(fixed) and unit_dimension(k.stmts, fixed_set(self.model, fixed))

    def sequential(self, lp, body: Block, env: dict) -> tirx.Stmt:
        """The ``for`` inside its body's parallel loop, where the body is one kernel whose outer loop the schedule
        marked ``par_steps``, its bounds not the step's, or a scatter (cpu_scatter.py); else a serial loop."""
        k = body.items[0] if len(body.items) == 1 and isinstance(body.items[0], Kernel) else None
        loops, k = ((lp,), k) if k is not None else nested_steps(self, lp, body)
        inside = scatter_kernel(self, k, env, lp) if k is not None and k.scatter is not None and self.cpu.scatter \
            and self.cpu.steps_inside else None
        if inside is not None or not self.cpu.steps_inside or k is None or (k.scatter is not None and self.cpu.scatter):
            return inside if inside is not None else super().sequential(lp, body, env)
        # a condition over the sizes around the kernel (a branch of an ``if``
        # over the sizes, polyhedral/hoist.py ``by_rows``): tested once, outside
        guard, ast = _size_guard(self.ast_of(k), k)
        top, mark = strip_marks(ast)
        if mark == PARALLEL_STEPS and top.get_type() == NT.if_:  # branches on the step (polyhedral/branches.py)
            top = branch_loop(top) or top
        if mark != PARALLEL_STEPS or top.get_type() != NT.for_ or any(x.var in loop_ids(top) for x in loops) \
                or not unit_stride(top):
            return super().sequential(lp, body, env)
        low = CpuAstLowering(self, {s.name: s for s in k.stmts}, env, k)
        low.wrap, low.step_vars = steps_wrap(low, loops, env), tuple(x.var for x in loops)
        out = low.node(top, parallel_ok=True, mark=PARALLEL_STEPS)
        return out if guard is None else tirx.IfThenElse(low._cond(guard), out, None)


ONE_ROW = "_fixed_row"  # the row of CpuAstLowering._one_row_tile's tiles: no loop of the program


class CpuAstLowering(AstLowering):
    """A kernel's isl AST on the CPU: the outermost parallel loop in chunks (:class:`ChunkedLoop`), register
    tiles, vectorized innermost loops, sums into 0-d tensors over a nest (codegen/cpu_scalar_sums.py)."""

    wrap: Callable | None = None  # the enclosing sequential loop, when it runs inside the parallel one
    step_vars: tuple = ()  # that loop's variable (and its inner one's: cpu_steps.nested_steps)

    def node(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        if mark is not None and node.get_type() == NT.if_:  # a condition on the parameters between a mark and its loop
            other = self.node(node.if_get_else_node(), parallel_ok, mark) if node.if_has_else_node() else None
            return tirx.IfThenElse(self._cond(node.if_get_cond()), self.node(node.if_get_then_node(), parallel_ok, mark), other)
        return super().node(node, parallel_ok, mark)

    def _for(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        cpu = self.gen.cpu
        mark = PARALLEL if mark == PARALLEL_STEPS else mark
        outer = parallel_ok and mark == PARALLEL
        step = self.loop_step(node)
        if step != 1:  # a stride (sizes fixed before scheduling, or strips of columns): a plain loop
            if not (outer and cpu.parallel):
                return self.plain_loop(node, parallel_ok, tirx.ForKind.SERIAL)
            if self.kernel is None or not self.kernel.loops:
                return strip_blocks(self, node, step, lambda: self.plain_loop(node, parallel_ok, tirx.ForKind.PARALLEL))
            par = self.plain_loop(node, parallel_ok, tirx.ForKind.PARALLEL)
            # in a sequential loop, a single strip runs on the calling thread: a
            # parallel region per step for one iteration costs more than the step
            # (a triangular solve of 512 x 64, one strip: 1.2-2.3 -> 0.33-0.49 ms)
            _, extent = self.loop_range(node)
            count = tirx.floordiv(tirx.max(extent, 0) + step - 1, step)
            return tirx.IfThenElse(count >= 2, par, self.plain_loop(node, False, tirx.ForKind.SERIAL))
        name = iterator(node)
        init, extent = self.loop_range(node)
        if outer:
            chunked = ChunkedLoop(self, cpu, self.wrap).emit(node, name, init, extent)
            if chunked is not None:
                return chunked
        elif mark == PARALLEL:
            rows = ChunkedLoop(self, cpu, None)
            merged = collapse(self, node, name, init)
            if merged is not None:  # for h { for v { tiles: rows (h, v) (a 1x1 convolution's y_p(n, h, v, o))
                inner_body, inner, inner_extent, views = merged
                with merged_rows(self, views, inner):
                    if rows.has_micro(inner_body, name):
                        n_rows = tirx.max(extent, 0) * tirx.max(inner_extent, 0)
                        return tirx.SeqStmt(declarations(views) + [rows.rows(inner_body, name, init, n_rows)])
            if rows.has_micro(node.for_get_body(), name) and not rows.fewer_than_inner(node, extent):
                return rows.rows(node.for_get_body(), name, init, tirx.max(extent, 0))  # (tiles below it)
            divided = divide(self, node, name, init) if merged is None and self._panel_per_step(node, name) else None
            if divided is not None:  # for v { for n { tiles: rows (v, n), read as x(n, c, h + kh, v + kw) too
                inner_body, row, n_rows, rules = divided
                with divided_rows(self, row, rules):
                    if rows.has_micro(inner_body, row):
                        return rows.rows(inner_body, row, tirx.const(0, INDEX), n_rows)
        if not parallel_ok and mark == SERIAL:
            tiled = self._one_row_tile(node)
            if tiled is not None:
                return tiled
        parallel = outer and cpu.parallel
        inner_ok = parallel_ok and not outer
        pair = self._pair(node, name, init, extent, mark, parallel, inner_ok) or transposed_pair(
            self, node, name, init, extent, mark, parallel, inner_ok)
        if pair is not None:
            return pair
        if mark == PARALLEL and not isl_ast.has(node.for_get_body(), isl_ast.is_loop):
            vec = self._vectorized(node, name, init, extent, parallel, inner_ok)
            if vec is not None:
                return vec
        if mark != PARALLEL and cpu.reduce_lanes and not isl_ast.has(node.for_get_body(), isl_ast.is_loop):
            vec = vector_reduction(self, node, name, init, extent, cpu.reduce_lanes, REDUCE_BLOCK,
                                   self._reduction_threads(parallel_ok))
            if vec is not None:
                return vec
        if parallel and self.wrap is None and \
                (both := parallel_pair(self, node, name, init, extent, ChunkedLoop(self, cpu, None))) is not None:
            return both
        if mark != PARALLEL and (sums := scalar_nest(self, node, name, init, extent, self._reduction_threads(parallel_ok))):
            return sums
        v = tirx.Var(name, INDEX)
        body = self.body_with(node, name, from_zero(init, v), inner_ok)
        return tirx.For(v, 0, extent, tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL, body)

    def _panel_per_step(self, node: isl.AstNode, name: str) -> bool:
        """The parallel loop ``node`` holds a parallel loop whose rows' tiles
        copy a panel (tile_checks.packed_loop), once per iteration of ``node``
        (a narrow convolution's weight, once per output pixel) that does not
        move with ``node`` (tile_checks.panels_shared_across): its iterations
        and the inner loop's then run as one loop of rows (collapse.divide)
        that share each panel.  Not otherwise: tiles over the inner loop
        alone may share more (a row's weight, one broadcast for all rows)."""
        inner, mark = strip_marks(node.for_get_body())
        if mark != PARALLEL or inner.get_type() != NT.for_:
            return False
        with self.bound({name: tirx.Var(name + "_p", INDEX)}):
            return panels_shared_across(ChunkedLoop(self, self.gen.cpu, None), inner, name)

    def _reduction_threads(self, parallel_ok: bool) -> int:
        """Threads sharing the blocks of a vector reduction no loop encloses (a loss over a whole tensor)."""
        cpu, in_loop = self.gen.cpu, self.kernel is not None and bool(self.kernel.loops)
        outermost = set(self.env) <= self.top  # no loop of the kernel encloses it
        return cpu.threads if parallel_ok and outermost and cpu.parallel and not in_loop else 0

    def _one_row_tile(self, node: isl.AstNode) -> tirx.Stmt | None:
        """A reduction nest ``for k { for j (par) { S } }`` lowered where its
        rows are already fixed -- inside a parallel loop that
        :class:`ChunkedLoop` does not tile, as the strips of columns of a
        matrix-vector product (polyhedral/schedule.py, ``_sink_vector_bands``:
        ``for strip (parallel, step 128) { for k { for j in the strip } }``,
        a batch-1 RNN's step, a power iteration, a triangular solve) -- as a
        one-row register tile: the accumulators stay in registers over the
        whole ``k`` loop instead of a partial sum stored and loaded at every
        step.  None when the nest is no such micro-kernel."""
        m = self.gen.cpu.resolved(self.kernel is not None and bool(self.kernel.loops))
        if not m.register_tiles:
            return None
        tiles = RegisterTiles(self, m, single=True)
        micro = tiles.parts(node, ONE_ROW)
        if micro is None:
            return None
        return tiles.emit(micro, ONE_ROW, tirx.const(0, INDEX), tirx.const(1, INDEX))

    def _pair(self, node, name: str, init, extent, mark: str | None, parallel: bool,
              parallel_ok: bool) -> tirx.Stmt | None:
        """The two innermost loops of a nest, both parallel or both not, as one
        vector loop (:meth:`_vectorized`) or vector reduction
        (:func:`~tcdsl.codegen.cpu_reduce.vector_reduction`) over their
        product, when their variables occur only as two adjacent indices of
        every tensor they index (codegen/collapse.py); else None."""
        cpu = self.gen.cpu
        inner, inner_mark = strip_marks(node.for_get_body())
        if inner.get_type() != NT.for_ or isl_ast.has(inner.for_get_body(), isl_ast.is_loop):
            return None
        if mark == PARALLEL:
            marks = (PARALLEL,)
        elif cpu.reduce_lanes:
            marks = (SERIAL, None)  # a reduction loop, marked or not
        else:
            return None
        threads = self._reduction_threads(parallel_ok)
        merged = collapse(self, node, name, init, marks)
        if merged is None:
            return None
        body, inner_name, inner_extent, views = merged
        total = tirx.max(extent, 0) * tirx.max(inner_extent, 0)
        with merged_rows(self, views, inner_name):
            both = WithBody(node, body)
            if mark == PARALLEL:
                out = self._vectorized(both, name, init, total, parallel, parallel_ok)
            else:
                out = vector_reduction(self, both, name, init, total, cpu.reduce_lanes, REDUCE_BLOCK, threads)
        return None if out is None else tirx.SeqStmt(declarations(views) + [out])

    def _vectorized(self, node, name: str, init, extent, parallel: bool, parallel_ok: bool) -> tirx.Stmt | None:
        """An innermost coincident loop whose stores are stride-1 in it becomes a main loop of
        :func:`vector_lanes`-wide vector iterations plus a scalar tail (TVM vectorizes constant extents only)."""
        w = vector_lanes(self.gen.cpu)
        extent = tirx.max(extent, 0)  # an isl loop may run zero times with a negative extent; % would not
        vo, vi, vt = (tirx.Var(name + suffix, INDEX) for suffix in ("_o", "_v", "_t"))
        main_body = self.body_with(node, name, init + vo * w + vi, parallel_ok)
        if not stride_one_stores(main_body, vi):
            return None
        if has_node(main_body, is_if_then_else) and has_node(main_body, (tirx.Let,)):
            # TVM 0.27's vectorizer fails on a Let beside an if_then_else ("Let
            # cannot bind the same var to two different values"; found by the
            # random programs: `(i >= T - 1 ? 2 : X(i, j)) * tanh(tanh(float(j)))`)
            if not getattr(self, "assuming_nonempty", False):
                return nonempty_vectors(self, node, name, init, extent, parallel, parallel_ok)
            main_body = branches_as_selects(main_body)
        n_main = tirx.floordiv(extent, w)
        tail_body = self.body_with(node, name, init + n_main * w + vt, parallel_ok)
        # a row's divisor or rsqrt, computed once (codegen/invariant.py)
        bindings, (main_body, tail_body) = invariant.hoist([main_body, tail_body], [vo, vi, vt])
        main = tirx.For(vo, 0, n_main, tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL,
                        tirx.For(vi, 0, w, tirx.ForKind.VECTORIZED, main_body))
        tail = tirx.For(vt, 0, tirx.floormod(extent, w), tirx.ForKind.SERIAL, tail_body)
        if not bindings:
            return tirx.SeqStmt([main, tail])
        out = tirx.SeqStmt(invariant.held(bindings, [main, tail]))
        return tirx.IfThenElse(extent > 0, out, None)  # the terms read only where the loop runs


CpuProgram.ast_lowering = CpuAstLowering


class ChunkedLoop:
    """Emits the outermost parallel loop of a kernel (see the module docstring).

    ``low`` is the kernel's :class:`CpuAstLowering`; ``wrap(make)`` wraps the
    body made by ``make()`` in the enclosing sequential loop when that loop
    runs inside (and binds its variable while ``make`` runs)."""

    def __init__(self, low, mapping: CpuMapping, wrap: Callable | None):
        self.low = low
        self.in_loop = low.kernel is not None and bool(low.kernel.loops)
        self.m = mapping.resolved(self.in_loop)
        if not self.in_loop and not mapping.tile_rows and not mapping.tile_cols and gathers(low.kernel):
            # rows read through an index (an embedding bag's emb(idx(b, l), e)):
            # half the rows, twice the columns, so that a tile reads each
            # gathered row whole, once (B=1024, L=32, E=128: 0.85 -> 0.55 ms)
            self.m = dataclasses.replace(self.m, tile_rows=max(1, self.m.tile_rows // 2),
                                         tile_cols=2 * self.m.tile_cols)
        if not mapping.tile_cols and not mapping.vector_width and wide_elements(low.kernel):  # (float64)
            self.m = dataclasses.replace(self.m, tile_cols=self.m.tile_cols // 2, vector_width=self.m.vector_width // 2)
        self.wrap = wrap
        self.tiles = RegisterTiles(low, self.m)

    def emit(self, node: isl.AstNode, name: str, init: tirx.PrimExpr, extent: tirx.PrimExpr) -> tirx.Stmt | None:
        body = node.for_get_body()
        if self.wrap is None:
            merged = collapse(self.low, node, name, init)
            if merged is not None:  # for t (par) { for b (par) { ... } }: one loop over t * B rows
                inner_body, inner, inner_extent, views = merged
                with merged_rows(self.low, views, inner):
                    if self.has_micro(inner_body, name):
                        rows = tirx.max(extent, 0) * tirx.max(inner_extent, 0)
                        return tirx.SeqStmt(declarations(views) + [self._chunks(inner_body, name, init, rows)])
            if not self.has_micro(body, name):
                return batch_rows(self, node, name, init, extent)
        else:
            rows = step_rows(self, node, name, init, extent)
            if rows is not None:
                return rows
        return self._chunks(body, name, init, extent)

    def _chunks(self, body: isl.AstNode, name: str, init: tirx.PrimExpr, extent: tirx.PrimExpr,
                outer: tuple | None = None) -> tirx.Stmt:  # outer: (var, first, extent) of a batch (batch_rows)
        m, n_outer = self.m, tirx.max(outer[2], 0) if outer else 1
        extent = tirx.max(extent, 0)
        per_thread = tirx.floordiv(tirx.floordiv(extent + m.tile_rows - 1, m.tile_rows) * n_outer + m.threads - 1, m.threads)
        # as many chunks per thread as chunk_rows requires, of equal size (in
        # whole tiles), so that every thread gets as many
        tiles = max(m.chunk_rows // m.tile_rows, 1)
        count = tirx.max(tirx.floordiv(per_thread + tiles - 1, tiles), 1)
        chunk = tirx.max(tirx.floordiv(per_thread + count - 1, count) * m.tile_rows, 1)
        if m.chunk_rows < m.tile_rows:
            chunk = tirx.const(m.chunk_rows, INDEX)
        elif m.parallel and m.threads > 1 and m.tile_rows > 1:
            # no more rows than an even share per thread: with fewer whole
            # tiles than threads (an RNN's batch of 4 under tiles of 4 rows)
            # every thread gets rows, which run in the leftover tiles, rather
            # than one thread them all; with a few tiles more than threads
            # (12 rows, 4-row tiles, 2 threads) 6 and 6 rows, not 8 and 4
            chunk = tirx.min(chunk, tirx.max(tirx.floordiv(extent * n_outer + m.threads - 1, m.threads), 1))
        ch = tirx.Var(name + "_chunk", INDEX)
        # the chunk's size, first row and row count, bound once (cpu_strips.opaque_size)
        lo, rows = tirx.Var(name + "_lo", INDEX), tirx.Var(name + "_rows", INDEX)
        chunk, around = opaque_size(name + "_ck", chunk)
        bind = [tirx.Bind(lo, init + ch * chunk), tirx.Bind(rows, tirx.min(chunk, extent - ch * chunk))]

        def make():
            saved = self.tiles.rows_extent
            self.tiles.rows_extent = extent
            try:
                return self.rows(body, name, lo, rows)
            finally:
                self.tiles.rows_extent = saved
        inner = self.wrap(make) if self.wrap is not None else make()
        if self.wrap is not None and not isl_ast.has(body, isl_ast.is_loop) and strided_rows(inner, name + "_r"):
            inner = self._row_blocks(body, name, lo, rows)
        kind = tirx.ForKind.PARALLEL if m.parallel else tirx.ForKind.SERIAL
        count = tirx.floordiv(extent + chunk - 1, chunk)
        if outer is not None:  # one loop over (batch, chunk) pairs
            p = tirx.Var(name + "_pair", INDEX)
            pair = opaque(name + "_pr", [(outer[0], outer[1] + tirx.floordiv(p, count)), (ch, tirx.floormod(p, count))])
            return seq(around + [tirx.For(p, 0, n_outer * count, kind, tirx.SeqStmt(pair + bind + [inner]))])
        out = tirx.For(ch, 0, count, kind, tirx.SeqStmt(bind + [inner]))
        return seq(around + [few_rows(self, body, name, init, extent, out, chunk)])

    def _row_blocks(self, body: isl.AstNode, name: str, lo, rows) -> tirx.Stmt:
        """The chunk's rows in blocks of STEP_ROWS, the steps inside each block."""
        blk = tirx.Var(name + "_blk", INDEX)
        first, n = lo + blk * STEP_ROWS, tirx.min(STEP_ROWS, rows - blk * STEP_ROWS)
        make = lambda: self.rows(body, name, first, n)  # noqa: E731
        return tirx.For(blk, 0, tirx.floordiv(rows + STEP_ROWS - 1, STEP_ROWS), tirx.ForKind.SERIAL, self.wrap(make))

    def one_row(self, node: isl.AstNode) -> tirx.Stmt:
        """The kernel ``node`` as the body of a single row that no loop names
        (a unit row loop that isl dropped): its reduction loops stay outside
        its column loops, in register tiles, with no parallel loop inside."""
        return self.rows(node, "_one_row", tirx.const(0, INDEX), tirx.const(1, INDEX))

    # ------------------------------------------------------------ body parts
    def has_micro(self, node: isl.AstNode, row: str, inherited: str | None = None, outside: bool = True) -> bool:
        node, mark = strip_marks(node)
        mark = mark or inherited
        t = node.get_type()
        if t == NT.block:
            return any(self.has_micro(x, row, None, outside) for x in isl_ast.children(node))
        if t == NT.if_:
            return self.has_micro(node.if_get_then_node(), row, mark, outside) or (
                node.if_has_else_node() and self.has_micro(node.if_get_else_node(), row, mark, outside))
        return t == NT.for_ and (self.tiles.parts(node, row) is not None
                                 or outside and self._outside_rows(node, mark, row))

    def _outside_rows(self, node: isl.AstNode, mark: str | None, row: str) -> bool:
        """A parallel loop between the rows and micro-kernels (an LSTM's gate
        loop ``g`` in ``for b { for g { for k { for j`` ...): it may run
        outside the row tiles, ``for g { tiles over b { for k { for j``,
        since both loops carry no dependence.  Outside sequential loops (whose
        rows are many: slower there in general) only when the reads moving with
        the column move with it, not with the rows (RegisterTiles.shares_columns),
        and each tile covers several of its iterations (``tile_depth``: a conv
        ``O(n, m, h, w)``, rows ``m``, loads ``I(n, c, h + kh, w + kw)`` once
        for all its channels, ``W1(m, c, kh, kw)`` once for all its ``h``) or
        such a read is transposed (tile_checks.transposed_loop: one iteration
        at a time, its panels copied).  Outside sequential loops also a nest
        of such loops, the outer ones one iteration at a time (a 3-D conv's
        ``d`` around ``h``, rows ``o``: 18-21 -> 11-12 ms at (2, 32, 10, 30, 30)).
        Inside them, when no read moving with the column moves with the rows
        (RegisterTiles.shares_columns: a transformer layer's ``qkv(g, b, t,
        o)`` in ``for l``, rows ``g`` and ``t`` outside, read all of ``W`` at
        each ``t``; its rows are ``t``: 3.5x -> 1.2x the layer called twice)."""
        if mark != "par" or row in loop_ids(node) or not unit_stride(node):
            return False
        deep = not self.in_loop
        if deep and self.tiles.depth is not None:
            return False
        with self.low.bound({iterator(node): tirx.Var(iterator(node) + "_p", INDEX)}):
            if not self.has_micro(node.for_get_body(), row, outside=False):  # (a convolution's m, h: see below)
                return deep and self.has_micro(node.for_get_body(), row)
            parts = self._micro_parts(node.for_get_body(), row)
            if not deep:
                return all(self.tiles.shares_columns(p, row, None) for p in parts)
            return (self.m.tile_depth > 1 or transposed_loop(self, node, row)) and all(
                self.tiles.shares_columns(p, row, iterator(node)) for p in parts)

    def fewer_than_inner(self, node: isl.AstNode, extent) -> bool:
        """``node`` has fewer iterations than a tile has rows, fixed, and the
        parallel loop right inside it can be the rows (WaveNet's gates
        ``a(g, b, o, t)``: rows ``o``, not the two ``g``)."""
        inner, mark = strip_marks(node.for_get_body())
        if not isinstance(extent, tirx.IntImm) or extent.value >= self.m.tile_rows or mark != PARALLEL \
                or inner.get_type() != NT.for_:
            return False
        with self.low.bound({iterator(node): tirx.Var(iterator(node) + "_p", INDEX)}):
            return self.has_micro(inner.for_get_body(), iterator(inner))

    def _micro_parts(self, node: isl.AstNode, row: str) -> list:
        """What :meth:`RegisterTiles.parts` finds in the parts of ``node``
        (through blocks and conditions)."""
        node, _ = strip_marks(node)
        t = node.get_type()
        if t == NT.block:
            return [p for x in isl_ast.children(node) for p in self._micro_parts(x, row)]
        if t == NT.if_:
            return self._micro_parts(node.if_get_then_node(), row) + (
                self._micro_parts(node.if_get_else_node(), row) if node.if_has_else_node() else [])
        found = self.tiles.parts(node, row) if t == NT.for_ else None
        return [found] if found is not None else []

    def _outside(self, node: isl.AstNode, row: str, lo, n) -> tirx.Stmt:
        """The loop ``node`` (see :meth:`_outside_rows`) around the row tiles of
        its body; outside sequential loops in blocks of ``tile_depth``
        iterations that each tile covers (then the iterations left, one at a
        time).  One at a time too when a column tile copies a panel
        (tile_checks.packed_loop): deep tiles copy none."""
        name = iterator(node)
        init, extent = self.low.loop_range(node)
        body = node.for_get_body()
        with self.low.bound({name: tirx.Var(name + "_p", INDEX)}):  # (the outer loops of a nest: one at a time)
            inner = self.has_micro(body, row, outside=False)
        nd = self.m.tile_depth if not self.in_loop and self.tiles.depth is None and inner \
            and not transposed_loop(self, node, row) and not packed_loop(self, node, row) else 1
        v = tirx.Var(name, INDEX)
        if nd <= 1:
            with self.low.bound({name: init + v}):
                return tirx.For(v, 0, extent, tirx.ForKind.SERIAL, self.rows(body, row, lo, n))
        extent = tirx.max(extent, 0)
        vb = tirx.Var(name + "_d", INDEX)
        first = init + vb * nd
        self.tiles.depth = (name, first, nd)
        try:
            with self.low.bound({name: first}):
                full = self.rows(body, row, lo, n)
        finally:
            self.tiles.depth = None
        # the first iteration left, bound once: a division in the tiles' indices cannot be unrolled
        left = tirx.Var(name + "_left", INDEX)
        with self.low.bound({name: left + v}):
            rest = self.rows(body, row, lo, n)
        return tirx.SeqStmt([tirx.For(vb, 0, tirx.floordiv(extent, nd), tirx.ForKind.SERIAL, full),
                             tirx.Bind(left, init + tirx.floordiv(extent, nd) * nd),
                             tirx.For(v, 0, tirx.floormod(extent, nd), tirx.ForKind.SERIAL, rest)])

    def rows(self, node: isl.AstNode, row: str, lo: tirx.PrimExpr, n: tirx.PrimExpr,
             inherited: str | None = None) -> tirx.Stmt:
        """``node`` for rows lo .. lo+n-1: micro-kernels for all rows at once,
        runs of other parts in a loop over the rows.  ``inherited``: the mark
        above an ``if`` whose branch ``node`` is (isl puts a condition on the
        parameters between a band's mark and its loop)."""
        out: list[tirx.Stmt] = []
        plain: list[isl.AstNode] = []

        def flush():
            if plain:
                out.append(self._plain(list(plain), row, lo, n))
                plain.clear()

        parts = isl_ast.parts(node)
        for part in parts:
            bare, mark = strip_marks(part)
            mark = mark or (inherited if len(parts) == 1 else None)
            micro = self.tiles.parts(bare, row) if bare.get_type() == NT.for_ else None
            if micro is not None:
                flush()
                out.append(self.tiles.emit(micro, row, lo, n))
            elif bare.get_type() == NT.for_ and self._outside_rows(bare, mark, row):
                flush()
                out.append(self._outside(bare, row, lo, n))
            elif bare.get_type() == NT.if_ and not self.tiles._fixed(row) & isl_ast.ids(bare.if_get_cond()) \
                    and self.has_micro(bare, row):
                flush()
                then = self.rows(bare.if_get_then_node(), row, lo, n, mark)
                other = self.rows(bare.if_get_else_node(), row, lo, n, mark) if bare.if_has_else_node() else None
                out.append(tirx.IfThenElse(self.low._cond(bare.if_get_cond()), then, other))
            else:
                plain.append(part)
        flush()
        return seq(out)

    def _plain(self, parts: list[isl.AstNode], row: str, lo, n) -> tirx.Stmt:
        r = tirx.Var(row + "_r", INDEX)
        depth = self.tiles.depth
        d = tirx.Var("d", INDEX)
        with self.low.bound({row: lo + r, **({depth[0]: depth[1] + d} if depth else {})}):
            body = seq([self.low.node(p, False, None) for p in parts])
        loop = tirx.For(r, 0, n, tirx.ForKind.SERIAL, body)
        return tirx.For(d, 0, depth[2], tirx.ForKind.SERIAL, loop) if depth else loop


def _size_guard(ast: isl.AstNode, k: Kernel):
    """(condition, body) when ``ast`` is ``if (c) body`` with no ``else`` and
    ``c`` over the sizes only (a branch of an ``if`` over the sizes,
    polyhedral/hoist.py ``by_rows``); else (None, ``ast``)."""
    bare, _ = strip_marks(ast)
    if bare.get_type() == NT.if_ and not bare.if_has_else_node() \
            and not isl_ast.ids(bare.if_get_cond()) & {isl_name(lp.var) for lp in k.loops}:
        return bare.if_get_cond(), bare.if_get_then_node()
    return None, ast


def _outer_loop_dropped(ast: isl.AstNode) -> bool:
    """The kernel's outermost band is marked parallel, but its loop (isl names
    it ``c0``) is not in the AST: it had a single iteration."""
    bare, mark = strip_marks(ast)
    return mark in (PARALLEL, PARALLEL_STEPS) and not isl_ast.has(
        bare, lambda x: x.get_type() == NT.for_ and iterator(x) == "c0")


def _serial_outside(node: isl.AstNode) -> bool:
    """Some serial loop of ``node`` that no parallel loop encloses has a
    parallel loop below it (lowered as it is, a parallel region per step)."""
    bare, mark = strip_marks(node)
    if bare.get_type() == NT.for_:
        if mark in (PARALLEL, PARALLEL_STEPS):
            return False
        return isl_ast.has(bare.for_get_body(), lambda x: isl_ast.is_parallel_mark(x)
                           and strip_marks(x)[0].get_type() == NT.for_)
    if mark in (PARALLEL, PARALLEL_STEPS) and bare.get_type() == NT.block:  # (a loop split around i == p)
        return any(x.get_type() != NT.for_ and _serial_outside(x) for x in isl_ast.below(bare))
    return any(_serial_outside(x) for x in isl_ast.below(bare))
