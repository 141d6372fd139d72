"""CPU code generation for a kernel's outermost parallel loop.

The isl AST says which loops are parallel (``par`` marks) and in what order
the statements run; :mod:`tcdsl.codegen.tir` turns it into TIR loop by loop.
For the outermost parallel loop of a kernel on the CPU this module does more,
the work a hand-written CPU kernel does:

* **Chunks of rows.**  The parallel loop (call its iterations *rows*) is cut
  into one chunk per thread (at most ``chunk_rows`` rows each), and inside a
  chunk every part of the loop body runs for all the chunk's rows before the
  next part.  That is legal because the loop is coincident: no dependence
  goes from one row to another.
* **Register tiles for reductions.**  A part of the body of the form
  ``for k { for j (parallel) { S } }`` where ``S`` accumulates into an
  element that does not move with ``k`` and is stride-1 in ``j`` becomes a
  micro-kernel: for each tile of ``tile_rows`` rows x ``tile_cols`` columns
  the accumulators live in a local buffer (registers after unrolling) for the
  whole ``k`` loop, loaded before it and stored after it.  Column tiles run
  outermost in the chunk, so a tile of the right-hand matrix is reused by all
  of the chunk's rows while it is in cache.  Legal when ``S`` reads no element
  that the part writes except through its accumulator (checked with isl in
  :func:`accumulates_privately`); ``j`` is coincident, so its iterations may
  be reordered, and each accumulator still sums ``k`` in order.
* **Blocks of the reduction loop.**  When a panel of the right-hand matrix
  is copied (``_Panels``), the ``k`` loop is cut into blocks of ``k_block``
  steps outside the row tiles, so the block's panel stays in L1 while all
  of the chunk's rows use it; each accumulator still sums ``k`` in order.
* **The sequential loop inside.**  When the schedule marks the loop
  ``par_steps`` (no dependence between steps of the enclosing ``for``
  crosses rows, see :mod:`tcdsl.polyhedral.schedule`), that ``for`` runs
  inside each chunk, so the steps need no barrier between threads: one
  parallel region for the whole recurrence instead of one per step.

Column tiles are cut at three widths (``tile_cols``, one vector, one
element), so symbolic sizes need no guards in the main tiles.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Callable

import islpy as isl
from tvm import tirx

from ..errors import TcError
from ..polyhedral.model import IslStmt
from .expr import INDEX

_OP = isl.ast_expr_op_type
NT = isl.ast_node_type

# Local accumulator buffers stay on the stack (TVM moves larger ones to the heap).
_MAX_TILE_BYTES = 448 * 4  # 28 of the 32 AVX-512 registers


@dataclass(frozen=True)
class CpuMapping:
    """The CPU mapping options (see :class:`tcdsl.MappingOptions`).  A 0 in
    ``tile_rows``, ``tile_cols`` or ``vector_width`` means the host's default
    (:func:`host_defaults`); in ``k_block``, no blocks (:data:`DEFAULT_K_BLOCK`)."""

    tile_rows: int = 0
    tile_cols: int = 0
    vector_width: int = 0
    chunk_rows: int = 256
    cpu_threads: int = 0  # 0: TVM_NUM_THREADS, or the number of cores
    parallel: bool = True
    steps_inside: bool = True
    register_tiles: bool = True
    k_block: int = 0  # 0: DEFAULT_K_BLOCK, the whole reduction loop in one block


    def resolved(self, in_loop: bool) -> "CpuMapping":
        """The tile fields that are 0 filled in with :func:`host_defaults` for a
        kernel inside a sequential loop or not (a vector width alone keeps the
        default tile's number of vectors per row)."""
        auto = host_defaults(in_loop)
        if self.vector_width and not self.tile_cols:
            auto["tile_cols"] = max(auto["tile_cols"] // auto["vector_width"], 1) * self.vector_width
        given = {k: getattr(self, k) for k in auto if getattr(self, k)}
        return dataclasses.replace(self, **{**auto, **given, "k_block": self.k_block or DEFAULT_K_BLOCK})

    @property
    def threads(self) -> int:
        if self.cpu_threads:
            return self.cpu_threads
        env = os.environ.get("TVM_NUM_THREADS", "")
        return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)


CPU_KEYS = {f for f in CpuMapping.__dataclass_fields__}

# Steps of the reduction loop per block when a panel is packed (see
# _Panels); 0: one block.  Blocks of 128 (a 128 x 64 fp32 panel block is 32
# KiB, in the 48 KiB L1) gained 9% on the 1024^3 matmul with 64-row chunks,
# nothing with the 256-row chunks (the whole K x 64 panel stays in the 2 MiB
# L2), and lost 5-8% at 1536^3: see docs/internals.md ("CPU mapping").
DEFAULT_K_BLOCK = 0


def host_defaults(in_loop: bool = False) -> dict[str, int]:
    """Register tiles that fit the host's vector registers.  With AVX-512 (32
    registers of 16 floats): 4 x 64 (16 registers) for a kernel on its own,
    8 x 48 (24) inside a sequential loop.  Measured, interleaved, on this
    machine: the 1024^3 matmul 9.3 ms against 11.4 ms for 6 x 32 (8 x 48:
    9.4, 7 x 64: 9.6, 12 x 32: 11.7), a 3x3 convolution 2.20 against 2.38
    ms, a batch matmul with 100 columns 0.91 against 1.52 ms; inside the
    time loop of the Elman RNN at (64, 32, 256) 2.31 ms with 8 x 48 against
    2.71 with 4 x 64 (batch 12: 2.45 against 2.76; the LSTM 10.7 against
    11.4; batch 1 and 3 and the QRNN alike: their rows are left over, see
    ``leftover_rows``).  Without AVX-512 (16 registers of 8): 4 x 24 for a
    kernel on its own, 2 x 48 inside a sequential loop, whose rows are few."""
    from .targets import host_avx512

    if host_avx512():
        rows, cols, vw = (8, 48, 16) if in_loop else (4, 64, 16)
    else:
        rows, cols, vw = (2, 48, 8) if in_loop else (4, 24, 8)
    return {"tile_rows": rows, "tile_cols": cols, "vector_width": vw}


def cpu_mapping(options: dict | None) -> CpuMapping:
    """The CPU mapping of ``options=`` (unknown keys belong to other stages)."""
    given = {k: v for k, v in (options or {}).items() if k in CPU_KEYS
             and not (k in ("tile_rows", "tile_cols", "vector_width", "k_block") and v == 0
                      and not isinstance(v, bool))}
    for k, v in given.items():
        if k in ("parallel", "steps_inside", "register_tiles"):
            if not isinstance(v, bool):
                raise TcError(f"options: '{k}' must be True or False, got {v!r}")
        elif k == "k_block" and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise TcError(f"options: 'k_block' must be a positive integer (0: the default), got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or v < (0 if k == "cpu_threads" else 1):
            raise TcError(f"options: '{k}' must be a positive integer, got {v!r}")
    m = CpuMapping(**given)
    for in_loop in (False, True):
        r = m.resolved(in_loop)
        if r.tile_cols % r.vector_width:
            raise TcError(f"options: 'tile_cols' ({r.tile_cols}) must be a multiple of 'vector_width' "
                          f"({r.vector_width})")
        if r.tile_rows * r.tile_cols * 4 > _MAX_TILE_BYTES:
            raise TcError(f"options: a register tile of {r.tile_rows} x {r.tile_cols} elements is too large "
                          f"(at most {_MAX_TILE_BYTES // 4} elements)")
    return m


# ----------------------------------------------------------------- isl side
def accumulates_privately(s: IslStmt) -> bool:
    """``S`` reads no element it writes except the one it accumulates into
    (its first read, added for the reduction): the accumulator may then live
    in registers while ``S`` runs over its reduction variables."""
    if s.is_init or s.info.comp.reduction is None or not s.writes:
        return False
    tensor = s.writes[0].get_tuple_name(isl.dim_type.out)
    if any(m.get_tuple_name(isl.dim_type.out) == tensor for m in s.may_reads):
        return False
    written = s.writes[0].range()
    for m in s.reads[1:]:
        if m.get_tuple_name(isl.dim_type.out) == tensor and not m.range().intersect(written).is_empty():
            return False
    return True


def runs_in_one_step(s: IslStmt, loop_var: str) -> bool:
    """``S`` runs at a single value of the enclosing sequential loop's variable
    (the ``t == 0`` branch of a recurrence): not worth a register tile's code."""
    d = s.domain.params()
    i = d.find_dim_by_name(isl.dim_type.param, loop_var)
    if i < 0:
        return False
    d = d.move_dims(isl.dim_type.set, 0, isl.dim_type.param, i, 1)
    d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
    return d.is_singleton()


def ast_ids(e: isl.AstExpr) -> set[str]:
    """The identifiers (iterators and parameters) in an isl AST expression."""
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if t == isl.ast_expr_type.op:
        out: set[str] = set()
        for i in range(e.get_op_n_arg()):
            out |= ast_ids(e.get_op_arg(i))
        return out
    return set()


def unit_stride(node: isl.AstNode) -> bool:
    inc = node.for_get_inc()
    return inc.get_type() == isl.ast_expr_type.int and inc.get_val().to_python() == 1


def loop_ids(node: isl.AstNode) -> set[str]:
    """The identifiers in a for node's bounds."""
    return ast_ids(node.for_get_init()) | ast_ids(node.for_get_cond())


def strip_marks(node: isl.AstNode) -> tuple[isl.AstNode, str | None]:
    mark = None
    while node.get_type() == NT.mark:
        mark = node.mark_get_id().get_name()
        node = node.mark_get_node()
    return node, mark


# ---------------------------------------------------------------- TIR side
class ChunkedLoop:
    """Emits the outermost parallel loop of a kernel (see the module docstring).

    ``low`` is the kernel's ``tir._AstLowering``; ``wrap(make)`` wraps the
    body made by ``make()`` in the enclosing sequential loop when that loop
    runs inside (and binds its variable while ``make`` runs)."""

    def __init__(self, low, mapping: CpuMapping, wrap: Callable | None):
        self.low = low
        self.in_loop = low.kernel is not None and bool(low.kernel.loops)
        self.m = mapping.resolved(self.in_loop)
        self.wrap = wrap

    def emit(self, node: isl.AstNode, name: str, init: tirx.PrimExpr, extent: tirx.PrimExpr) -> tirx.Stmt | None:
        body = node.for_get_body()
        if self.wrap is None and not self.has_micro(body, name):
            return None
        m = self.m
        extent = tirx.max(extent, 0)
        per_thread = tirx.floordiv(tirx.floordiv(extent + m.tile_rows - 1, m.tile_rows) + m.threads - 1, m.threads)
        # as many chunks per thread as chunk_rows requires, of equal size (in
        # whole tiles), so that every thread gets as many
        tiles = max(m.chunk_rows // m.tile_rows, 1)
        count = tirx.max(tirx.floordiv(per_thread + tiles - 1, tiles), 1)
        chunk = tirx.max(tirx.floordiv(per_thread + count - 1, count) * m.tile_rows, 1)
        if m.chunk_rows < m.tile_rows:
            chunk = tirx.const(m.chunk_rows, INDEX)
        ch = tirx.Var(name + "_chunk", INDEX)
        # the chunk's first row and row count, bound once (TVM's simplifier and
        # LLVM would otherwise meet the whole formula in every index)
        lo, rows = tirx.Var(name + "_lo", INDEX), tirx.Var(name + "_rows", INDEX)
        bind = [tirx.Bind(lo, init + ch * chunk), tirx.Bind(rows, tirx.min(chunk, extent - ch * chunk))]

        def make():
            return self.rows(body, name, lo, rows)
        inner = self.wrap(make) if self.wrap is not None else make()
        kind = tirx.ForKind.PARALLEL if m.parallel else tirx.ForKind.SERIAL
        return tirx.For(ch, 0, tirx.floordiv(extent + chunk - 1, chunk), kind, tirx.SeqStmt(bind + [inner]))

    # ------------------------------------------------------------ body parts
    def has_micro(self, node: isl.AstNode, row: str, inherited: str | None = None, outside: bool = True) -> bool:
        node, mark = strip_marks(node)
        mark = mark or inherited
        t = node.get_type()
        if t == NT.block:
            ch = node.block_get_children()
            return any(self.has_micro(ch.get_at(i), row, None, outside) for i in range(ch.n_ast_node()))
        if t == NT.if_:
            return self.has_micro(node.if_get_then_node(), row, mark, outside) or (
                node.if_has_else_node() and self.has_micro(node.if_get_else_node(), row, mark, outside))
        return t == NT.for_ and (self._micro_parts(node, row) is not None
                                 or outside and self._outside_rows(node, mark, row))

    def _outside_rows(self, node: isl.AstNode, mark: str | None, row: str) -> bool:
        """A parallel loop between the rows and micro-kernels (an LSTM's gate
        loop ``g`` in ``for b { for g { for k { for j`` ...): it may run
        outside the row tiles, ``for g { tiles over b { for k { for j``,
        since both loops carry no dependence."""
        if mark != "par" or row in loop_ids(node) or not unit_stride(node) or not self.in_loop:
            return False  # (outside sequential loops the rows are many: measured slower there)
        name = node.for_get_iterator().get_id().get_name()
        with self.low.bound({name: tirx.Var(name + "_p", INDEX)}):  # one such loop, not a nest of them
            return self.has_micro(node.for_get_body(), row, outside=False)   # (a convolution's m, h: see below)

    def rows(self, node: isl.AstNode, row: str, lo: tirx.PrimExpr, n: tirx.PrimExpr,
             inherited: str | None = None) -> tirx.Stmt:
        """``node`` for rows lo .. lo+n-1: micro-kernels for all rows at once,
        runs of other parts in a loop over the rows.  ``inherited``: the mark
        above an ``if`` whose branch ``node`` is (isl puts a condition on the
        parameters between a band's mark and its loop)."""
        from .tir import _seq

        out: list[tirx.Stmt] = []
        plain: list[isl.AstNode] = []

        def flush():
            if plain:
                out.append(self._plain(list(plain), row, lo, n))
                plain.clear()

        parts = self._parts(node)
        for part in parts:
            bare, mark = strip_marks(part)
            mark = mark or (inherited if len(parts) == 1 else None)
            micro = self._micro_parts(bare, row) if bare.get_type() == NT.for_ else None
            if micro is not None:
                flush()
                out.append(self._micro(bare, micro, row, lo, n))
            elif bare.get_type() == NT.for_ and self._outside_rows(bare, mark, row):
                flush()
                name = bare.for_get_iterator().get_id().get_name()
                init, extent = self.low.loop_range(bare)
                v = tirx.Var(name, INDEX)
                with self.low.bound({name: init + v}):
                    body = self.rows(bare.for_get_body(), row, lo, n)
                out.append(tirx.For(v, 0, extent, tirx.ForKind.SERIAL, body))
            elif bare.get_type() == NT.if_ and row not in ast_ids(bare.if_get_cond()) and self.has_micro(bare, row):
                flush()
                then = self.rows(bare.if_get_then_node(), row, lo, n, mark)
                other = self.rows(bare.if_get_else_node(), row, lo, n, mark) if bare.if_has_else_node() else None
                out.append(tirx.IfThenElse(self.low._cond(bare.if_get_cond()), then, other))
            else:
                plain.append(part)
        flush()
        return _seq(out)

    def _parts(self, node: isl.AstNode) -> list[isl.AstNode]:
        bare, _ = strip_marks(node)
        if bare.get_type() == NT.block:
            ch = bare.block_get_children()
            return [p for i in range(ch.n_ast_node()) for p in self._parts(ch.get_at(i))]
        return [node]

    def _plain(self, parts: list[isl.AstNode], row: str, lo, n) -> tirx.Stmt:
        from .tir import _seq

        r = tirx.Var(row + "_r", INDEX)
        with self.low.bound({row: lo + r}):
            body = _seq([self.low.node(p, False, None) for p in parts])
        return tirx.For(r, 0, n, tirx.ForKind.SERIAL, body)

    # ---------------------------------------------------------- micro-kernel
    def _micro_parts(self, outer: isl.AstNode, row: str):
        """(reduction loops, [(column loop, statement call)]) when ``outer`` is
        ``for k1 { for k2 ... { for j (par) { S } ... } }`` with every ``S``
        fit for a register tile and no dependence between two of them (so the
        ``k`` loops can be split into one nest per statement), else None."""
        if not self.m.register_tiles or row in loop_ids(outer) or not unit_stride(outer):
            return None
        chain = [outer]
        body, _ = strip_marks(outer.for_get_body())
        while body.get_type() == NT.for_ and not self._column_loop(body):
            if row in loop_ids(body) or not unit_stride(body):
                return None
            chain.append(body)
            body, _ = strip_marks(body.for_get_body())
        leaves = self._parts(body) if body.get_type() == NT.block else [chain[-1].for_get_body()]
        names = {n.for_get_iterator().get_id().get_name() for n in chain}
        out = []
        for node in leaves:
            one = self._micro_one(names, node, row)
            if one is None:
                return None
            out.append(one)
        if len(out) > 1 and not self.low.independent([c.get_op_arg(0).get_id().get_name() for _, c in out]):
            return None
        return chain, out

    @staticmethod
    def _column_loop(node: isl.AstNode) -> bool:
        user, _ = strip_marks(node.for_get_body())
        return user.get_type() == NT.user

    def _micro_one(self, k_names: set[str], node: isl.AstNode, row: str):
        inner, mark = strip_marks(node)
        if inner.get_type() != NT.for_ or mark not in ("par", "par_steps") or loop_ids(inner) & ({row} | k_names) \
                or not unit_stride(inner):
            return None
        user, _ = strip_marks(inner.for_get_body())
        if user.get_type() != NT.user:
            return None
        call = user.user_get_expr()
        s = self.low.stmts[call.get_op_arg(0).get_id().get_name()]
        if str(self.low.gen.sig.buffers[s.info.comp.tensor].dtype) == "bool":
            return None
        if not self.low.gen.private_accumulator(s) or self.low.gen.one_step(s):
            return None
        j_name = inner.for_get_iterator().get_id().get_name()
        # the accumulated element must not move with any k, and must move by 1 with j
        from tvm import sym as arith

        probe = {x: tirx.Var(x + "_p", INDEX) for x in k_names | {row, j_name}}
        with self.low.bound(probe):
            buf, idx, value, _ = self.low.statement_parts(call)
        if not idx or any(_uses(x, probe[k]) for x in idx for k in k_names):
            return None
        if has_node(value, _UNROLL_UNSAFE) or any(has_node(x, _UNROLL_UNSAFE) for x in idx):
            return None
        coeffs = arith.detect_linear_equation(idx[-1], [probe[j_name]])
        if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm) or coeffs[0].value != 1:
            return None
        if any(_uses(x, probe[j_name]) for x in idx[:-1]):
            return None
        return inner, call

    def _micro(self, outer: isl.AstNode, parts, row: str, lo, n) -> tirx.Stmt:
        from .tir import _seq

        chain, leaves = parts
        return _seq([self._micro_one_stmt(chain, leaf, row, lo, n) for leaf in leaves])

    def _micro_one_stmt(self, chain, leaf, row: str, lo, n) -> tirx.Stmt:
        from .tir import _seq

        inner, call = leaf
        m = self.m
        j_name = inner.for_get_iterator().get_id().get_name()
        # the reduction loops' names bound to 0 while the column loop's range is
        # read (it does not depend on them) and while the accumulated element is
        # (it does not move with them)
        zeros = {n.for_get_iterator().get_id().get_name(): tirx.const(0, INDEX) for n in chain}
        with self.low.bound(zeros):
            j_init, j_ext = self.low.loop_range(inner)
        j_ext = tirx.max(j_ext, 0)
        # Panels are copied outside sequential loops only: inside one, every
        # step would copy them again for the few rows of a batch (measured on
        # the Elman RNN: no gain, twice the code to compile).
        in_loop = self.low.kernel is None or bool(self.low.kernel.loops)
        packed = self._packable(chain, call, row, j_name) if len(chain) == 1 and not in_loop else []

        def columns(pack: bool) -> tirx.Stmt:
            stmts = []
            start = tirx.const(0, INDEX)
            # outside sequential loops also half-width tiles: a 4 x 64 tile
            # leaves 32 columns (a convolution's output rows) to 16-wide ones
            half = (m.tile_cols // 2,) if not in_loop and m.tile_cols >= 4 * m.vector_width else ()
            for w in dict.fromkeys((m.tile_cols,) + half + (m.vector_width, 1)):
                count = j_ext - start if w == 1 else tirx.floordiv(j_ext - start, w)
                jt = tirx.Var(f"{j_name}_w{w}", INDEX)
                col0 = j_init + start + jt * w
                tile = _Tile(self, chain, call, row, j_name, col0, w, zeros)
                if pack and w == m.tile_cols:
                    body = _Panels(self, chain[0], call, row, j_name, col0, w, packed).around(
                        lambda ks, tile=tile: tile.rows(lo, n, ks, rest=False))
                else:
                    body = tile.rows(lo, n, rest=False)
                stmts.append(tirx.For(jt, 0, count, tirx.ForKind.SERIAL, body))
                start = start + count * w
            return _seq(stmts + [leftover_rows()])

        def leftover_rows() -> tirx.Stmt | None:
            """The rows after the last full row tile (all of them for a batch
            of 1), one at a time, in tiles of 16 vectors, then 8 (as many
            accumulators as a full tile holds at most), then one vector, half
            a vector and single columns: a 1 x 64 tile has 4 accumulators,
            too few to hide the FMA latency; 1 x 256 has 16, as many as a
            4 x 64 one."""
            rb = m.tile_rows
            if rb == 1:
                return None
            r = tirx.Var(row + "_t", INDEX)
            r0 = lo + tirx.floordiv(n, rb) * rb + r
            stmts = []
            start = tirx.const(0, INDEX)
            vw = m.vector_width
            # (no tile_cols-wide tiles here: one variant less to compile, 0.85 -> 0.79 s for the Elman RNN)
            wide = tuple(w for w in (16 * vw, 8 * vw, 4 * vw) if w <= m.tile_rows * m.tile_cols)[:2]
            # narrower vectors before single columns: a single column's sum is
            # one chain of dependent FMAs (a batch-1 RNN with 200 columns:
            # 8 of them took 4 of its 6 us per step)
            narrow = tuple(w for w in (vw // 2,) if w >= 4)
            for w in dict.fromkeys(wide + (vw,) + narrow + (1,)):
                count = j_ext - start if w == 1 else tirx.floordiv(j_ext - start, w)
                jt = tirx.Var(f"{j_name}_v{w}", INDEX)
                tile = _Tile(self, chain, call, row, j_name, j_init + start + jt * w, w, zeros)
                stmts.append(tirx.For(jt, 0, count, tirx.ForKind.SERIAL, tile.tile(r0, 1)))
                start = start + count * w
            return tirx.For(r, 0, tirx.floormod(n, rb), tirx.ForKind.SERIAL, _seq(stmts))

        if not packed:
            return columns(False)
        # a panel is worth copying when several row tiles read it
        return tirx.IfThenElse(n >= 2 * m.tile_rows, columns(True), columns(False))

    def _packable(self, chain, call, row: str, j_name: str) -> list[tuple[str, int]]:
        """The tensors read as a k x columns panel shared by all rows
        (``B(k, n)`` of a matmul, or ``B(n, k)``): one read of the tensor in
        the statement, one index moving with the column by 1 and another with
        k by 1, none with the row.  Their tiles are copied to a contiguous
        panel before the row tiles use them: rows of a big matrix at a
        power-of-two stride fall into a few cache sets otherwise, and a
        transposed operand would be a gather per vector.
        Returns (tensor, index of its k dimension, index of its column dimension)."""
        k_name = chain[0].for_get_iterator().get_id().get_name()
        probe = {x: tirx.Var(x + "_p", INDEX) for x in (row, j_name, k_name)}
        with self.low.bound(probe):
            buf, _, value, _ = self.low.statement_parts(call)
        loads: dict[str, list] = {}
        for ld in _loads(value):
            loads.setdefault(ld.source.name, []).append(ld)
        out = []
        for name, lds in loads.items():
            if name == buf.name or len(lds) != 1 or len(lds[0].indices) < 2:
                continue
            idx = list(lds[0].indices)
            if any(_uses(x, probe[row]) for x in idx):
                continue
            jdims = [d for d, x in enumerate(idx) if _uses(x, probe[j_name])]
            kdims = [d for d, x in enumerate(idx) if _uses(x, probe[k_name])]
            if len(jdims) != 1 or len(kdims) != 1 or jdims == kdims:
                continue
            if _coefficient(idx[jdims[0]], probe[j_name]) != 1 or _coefficient(idx[kdims[0]], probe[k_name]) != 1:
                continue
            out.append((name, kdims[0], jdims[0]))
        return out

class _Column:
    """One statement (``call``) on one column tile: ``w`` columns of the loop
    ``j_name`` from ``col0``, for rows of the loop ``row``."""

    def __init__(self, gen: ChunkedLoop, call, row: str, j_name: str, col0, w: int):
        self.low = gen.low
        self.m = gen.m
        self.call = call
        self.row = row
        self.j_name = j_name
        self.col0 = col0
        self.w = w


class _Tile(_Column):
    """Register tiles of a column tile over a run of rows; ``chain`` are the
    reduction loops, ``zeros`` binds their names to 0."""

    def __init__(self, gen: ChunkedLoop, chain, call, row: str, j_name: str, col0, w: int, zeros: dict):
        super().__init__(gen, call, row, j_name, col0, w)
        self.chain = chain
        self.zeros = zeros

    def rows(self, lo, n, ks=None, rest: bool = True) -> tirx.Stmt:
        """The tiles of rows lo .. lo+n-1; ``ks`` = (first, count): only these
        steps of the (single) reduction loop, counted from its first value;
        ``rest`` False: the full row tiles only."""
        rb = self.m.tile_rows
        sb = tirx.Var(self.row + "_b", INDEX)
        full = tirx.For(sb, 0, tirx.floordiv(n, rb), tirx.ForKind.SERIAL, self.tile(lo + sb * rb, rb, ks))
        if rb == 1 or not rest:
            return full
        r = tirx.Var(self.row + "_t", INDEX)
        rest = tirx.For(r, 0, tirx.floormod(n, rb), tirx.ForKind.SERIAL,
                        self.tile(lo + tirx.floordiv(n, rb) * rb + r, 1, ks))
        return tirx.SeqStmt([full, rest])

    def tile(self, r0, nr: int, ks=None) -> tirx.Stmt:
        """One register tile: rows r0 .. r0+nr-1 x the tile's columns."""
        low, w, row, j_name, col0 = self.low, self.w, self.row, self.j_name, self.col0
        vw = self.m.vector_width if w % self.m.vector_width == 0 else w if w in (2, 4, 8) else 1
        s = low.stmts[self.call.get_op_arg(0).get_id().get_name()]
        acc = tirx.decl_buffer((nr, w), low.gen.sig.buffers[s.info.comp.tensor].dtype, name="acc", scope="local")

        def lanes(body_of: Callable) -> tirx.Stmt:
            """for r (unrolled) for u (unrolled) for v (vectorized): body_of(r, col)"""
            r, u, v = (tirx.Var(x, INDEX) for x in ("r", "u", "v"))
            body = body_of(r, u * vw + v)
            inner = tirx.For(v, 0, vw, tirx.ForKind.VECTORIZED if vw > 1 else tirx.ForKind.SERIAL, body)
            return tirx.For(r, 0, nr, tirx.ForKind.UNROLLED, tirx.For(u, 0, w // vw, tirx.ForKind.UNROLLED, inner))

        def element(r, c):
            with low.bound({**self.zeros, row: r0 + r, j_name: col0 + c}):
                buf, idx, _, _ = low.statement_parts(self.call)
            return buf, idx

        def load(r, c):
            buf, idx = element(r, c)
            return tirx.BufferStore(acc, tirx.BufferLoad(buf, idx), [r, c])

        def store(r, c):
            buf, idx = element(r, c)
            return tirx.BufferStore(buf, tirx.BufferLoad(acc, [r, c]), idx)

        def update(r, c):
            with low.bound({row: r0 + r, j_name: col0 + c}):
                _, _, value, combine = low.statement_parts(self.call)
            return tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [r, c]), value), [r, c])

        nest = self._nest(0, lambda: lanes(update), ks)
        return tirx.SeqStmt([tirx.AllocBuffer(acc), lanes(load), nest, lanes(store)])

    def _nest(self, i: int, innermost: Callable, ks=None) -> tirx.Stmt:
        """The reduction loops chain[i:], in their order, around ``innermost()``;
        ``ks``: see :meth:`rows` (for chain[0])."""
        if i == len(self.chain):
            return innermost()
        node = self.chain[i]
        name = node.for_get_iterator().get_id().get_name()
        init, ext = self.low.loop_range(node)
        k = tirx.Var(name + "_k", INDEX)
        from .tir import _from_zero

        if i == 0 and ks is not None:
            first, ext = ks
            with self.low.bound({name: init + first + k}):
                body = self._nest(i + 1, innermost)
            return tirx.For(k, 0, ext, tirx.ForKind.SERIAL, body)
        with self.low.bound({name: _from_zero(init, k)}):
            body = self._nest(i + 1, innermost)
        return tirx.For(k, 0, tirx.max(ext, 0), tirx.ForKind.SERIAL, body)


class _Panels(_Column):
    """Copies of the panels of :meth:`ChunkedLoop._packable` for one column
    tile, and the statement reading them instead of the tensors.

    The reduction loop is cut into blocks of ``k_block`` steps, outside the
    row tiles: for each block, its ``k_block x w`` panel is copied (it stays
    in L1 while all row tiles use it), then every row tile loads its
    accumulators, adds the block's steps and stores them.  Each element still
    sums ``k`` in order, so the results do not depend on the block size."""

    def __init__(self, gen: ChunkedLoop, k_loop, call, row: str, j_name: str, col0, w: int, packed):
        super().__init__(gen, call, row, j_name, col0, w)
        self.k_loop = k_loop
        self.packed = packed

    def around(self, make: Callable) -> tirx.Stmt:
        """The panels' copies around ``make((first, count))``, the row tiles for
        ``count`` steps of the reduction loop from its ``first``-th."""
        from .tir import _from_zero, _seq

        low, w = self.low, self.w
        kc = self.m.k_block
        k_name = self.k_loop.for_get_iterator().get_id().get_name()
        k_init, k_ext = low.loop_range(self.k_loop)
        k_ext = tirx.max(k_ext, 0)
        vw = self.m.vector_width
        kb = tirx.Var(k_name + "_kb", INDEX)
        kn = tirx.Var(k_name + "_kn", INDEX)  # steps in this block
        k0 = kb * kc if kc else tirx.const(0, INDEX)  # k_block 0: one block, the whole loop
        q = tirx.Var(k_name + "_q", INDEX)  # the step in the block
        k = tirx.Var(k_name + "_pk", INDEX)  # the step, k0 + q
        u, v = tirx.Var("u", INDEX), tirx.Var("v", INDEX)
        # the tensors' reads at (k, column): rows do not matter (bound to any value)
        with low.bound({self.row: tirx.const(0, INDEX), self.j_name: self.col0 + u * vw + v,
                        k_name: _from_zero(k_init, k)}):
            _, _, value, _ = low.statement_parts(self.call)
        reads = {ld.source.name: ld for ld in _loads(value)}
        with low.bound({self.row: tirx.const(0, INDEX), self.j_name: self.col0, k_name: k_init + k0}):
            _, _, first, _ = low.statement_parts(self.call)
        origin = {ld.source.name: ld for ld in _loads(first)}
        head, decls, fills, views = [], [], [], {}
        for name, kdim, jdim in self.packed:
            src = reads[name]
            tensor = low.gen.sig.buffers[name]
            block = tirx.decl_buffer(((tirx.min(k_ext, kc) if kc else k_ext) * w,), tensor.dtype,
                                     name=name + "_block")
            head.append(tirx.AllocBuffer(block))
            # the block seen as the whole k_ext x w panel: step k at k * w
            panel = tirx.decl_buffer((k_ext * w,), tensor.dtype, name=name + "_panel", data=block.data,
                                     elem_offset=-(k0 * w))
            decls.append(tirx.DeclBuffer(panel, data=block.data))
            fills.append(tirx.BufferStore(panel, src, [k * w + u * vw + v]))
            # the tensor seen through the panel: element (.., k-index, .., col) at
            # (k-index - its value at the block's first k) * w + (col - col0)
            rank = len(src.indices)
            strides = [w if d == kdim else 1 if d == jdim else 0 for d in range(rank)]
            o = origin[name].indices
            offset = -(o[kdim] * w + o[jdim])
            view = tirx.decl_buffer(tensor.shape, tensor.dtype, name=name + "_packed", data=block.data,
                                    strides=strides, elem_offset=offset)
            decls.append(tirx.DeclBuffer(view, data=block.data))
            views[name] = view
        fill = tirx.For(q, 0, kn, tirx.ForKind.SERIAL, tirx.SeqStmt([tirx.Bind(k, k0 + q), tirx.For(
            u, 0, w // vw, tirx.ForKind.UNROLLED, tirx.For(v, 0, vw, tirx.ForKind.VECTORIZED, _seq(fills)))]))
        saved = low.buffer_override
        low.buffer_override = {**saved, **views}
        try:
            body = make((k0, kn))
        finally:
            low.buffer_override = saved
        block = tirx.SeqStmt([tirx.Bind(kn, tirx.min(kc, k_ext - k0) if kc else k_ext)] + decls + [fill, body])
        if kc:
            block = tirx.For(kb, 0, tirx.floordiv(k_ext + kc - 1, kc), tirx.ForKind.SERIAL, block)
        return tirx.SeqStmt(head + [block])


# Nodes that TVM 0.27 lowers to a Let (floor division and remainder by
# constants) or that are one: in an unrolled register tile the same Let
# variable ends up bound once per copy, which its simplifier rejects
# ("Binding of variable rmod ... conflicts"; found by the random programs).
_UNROLL_UNSAFE = (tirx.FloorDiv, tirx.FloorMod, tirx.Let)


def has_node(e, match) -> bool:
    """Some node of the expression or statement ``e`` (as this package builds
    them) is an instance of ``match`` (a tuple of types) or satisfies it (a
    predicate)."""
    if isinstance(match, tuple) and isinstance(e, match) or not isinstance(match, tuple) and match(e):
        return True
    for f in ("a", "b", "value", "condition", "true_value", "false_value", "body", "then_case", "else_case"):
        if getattr(e, f, None) is not None and has_node(getattr(e, f), match):
            return True
    for f in ("args", "indices", "seq"):
        if hasattr(e, f) and any(has_node(y, match) for y in getattr(e, f)):
            return True
    return False


def _loads(e) -> list:
    """The BufferLoads in a TIR expression, in a fixed order."""
    out = []

    def walk(x):
        if isinstance(x, _LOAD):
            out.append(x)
            return
        for f in ("a", "b", "value", "condition", "true_value", "false_value", "body"):
            if hasattr(x, f):
                walk(getattr(x, f))
        if hasattr(x, "args"):
            for y in x.args:
                walk(y)
    walk(e)
    return out


_LOAD = type(tirx.decl_buffer((1,), "float32", name="probe")[0])


def _coefficient(x: tirx.PrimExpr, v: tirx.Var) -> int | None:
    """The constant coefficient of ``v`` in ``x``; None if ``x`` is not linear in it."""
    from tvm import sym as arith

    coeffs = arith.detect_linear_equation(x, [v])
    if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm):
        return None
    return coeffs[0].value


def _uses(x: tirx.PrimExpr, v: tirx.Var) -> bool:
    """``x`` may depend on ``v`` (not linear in it counts as depending)."""
    return _coefficient(x, v) != 0
