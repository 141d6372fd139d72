"""Panels of the CPU's register tiles (codegen/cpu_tiles.py): the part of
a right-hand operand that a column tile reads, copied once to a contiguous
buffer that every row tile of the chunk then reads (:class:`_Panels`), and
what the tiles of one column tile share (:class:`_Column`).

A panel is read through a view of the tensor (its strides map the tensor's
indices into the panel) when the column and each reduction loop move an
index of their own by 1; a strided window (``x(b, c, 2 * t + k)``: column
and tap share one index, the column moving it by 2) has no such view, and
its loads find the panel's element from the loops' current values instead
(:class:`~tcdsl.codegen.expr.Remapped`).

Inside a sequential loop a panel copied per step would be copied again at
every step; an input of the program, or a temporary the loop does not
write, read there as a panel (the recurrent weight of an RNN) is instead
packed whole, once per call, right before the program's top-level item
holding the loop (:func:`pack_whole`, :class:`_Prepacked`,
``lower.ProgramLowering.program``)."""
from __future__ import annotations

from typing import Callable

import tvm_ffi
from tvm import sym, tirx
from tvm.tirx import ForKind
from tvm.tirx.analysis import undefined_vars

from ..options import DEFAULT_NEST_K_BLOCK
from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import iterator, loop_ids
from .expr import INDEX, Partial, Remapped
from .lower import coefficient, from_zero, loads, seq, uses

LONG_K, LONG_K_BLOCK = 4096, 512  # steps of a reduction loop past which it runs in blocks, and theirs


def strided_reads(value, j: tirx.Var, ks: list) -> set[str]:
    """The tensors that ``value`` reads, outside any conditional, at an
    element whose last index moves with the column ``j`` by more than one
    (``x(b, c, 2 * t + k)``) and with some reduction loop of ``ks``.  A
    tensor also read under a select or ``if_then_else`` is not taken: the
    panel's copy reads every element of its box, a guarded read only where
    its condition holds."""
    seen: dict[str, list] = {}
    for ld in loads(value, unguarded=True):
        seen.setdefault(ld.source.name, []).append(ld)
    everywhere: dict[str, int] = {}
    for ld in loads(value):
        everywhere[ld.source.name] = everywhere.get(ld.source.name, 0) + 1
    out = set()
    for name, lds in seen.items():
        idx = list(lds[0].indices)
        if len(lds) != everywhere[name] or not idx or not any(uses(x, k) for x in idx for k in ks):
            continue
        c = coefficient(idx[-1], j)
        if c is not None and c > 1:
            out.add(name)
    return out


def rows_across(low, chain, call, row: str, j_name: str) -> bool:
    """A tensor read with the row is read across its rows: the outer
    reduction loop moves some index of it but the last (``dy(n, o)`` of a
    weight gradient ``dW(o, i) +=! dy(n, o) * x(n, i)``, rows ``o``): a
    row tile uses a few elements of each cache line it loads, and the
    lines are reused by the next row tiles only while the panel's block is
    short (see _Panels)."""
    k_name = iterator(chain[0])
    probe = {x: tirx.Var(x + "_p", INDEX) for x in [row, j_name] + [iterator(c) for c in chain]}
    with low.bound(probe):
        _, _, value, _ = low.statement_parts(call)
    for ld in loads(value):
        idx = list(ld.indices)
        if (any(uses(x, probe[row]) for x in idx) and any(uses(x, probe[k_name]) for x in idx[:-1])
                and not uses(idx[-1], probe[k_name])):
            return True
    return False


def box_of_sizes(low, chain, row: str, j_name: str) -> bool:
    """The reduction loops' ranges depend on nothing but the sizes, the
    rows, the column and each other: not on other loops around the tile,
    which TVM's lowering finds undefined where it places the panel's
    allocation ("variable c1 has been used before definition").  A piece
    of a split guarded window written channels last (an input gradient's
    edge, ``u - kh >= 0`` with ``u`` outside the rows) has such ranges, and
    is tiled without panels."""
    names = [iterator(c) for c in chain]
    probe = {x: tirx.Var(x + "_p", INDEX) for x in [row, j_name] + names}
    known = [v for v in low.gen.sig.size_vars.values() if isinstance(v, tirx.Var)] + list(probe.values())
    with low.bound(probe):
        for c in chain:
            init, ext = low.loop_range(c)
            if len(undefined_vars(init, known)) or len(undefined_vars(ext, known)):
                return False
    return True


def sliding_window(low, chain: list, call, row: str, j_name: str) -> bool:
    """Whether the innermost of the reduction loops ``chain`` of a register
    tile reads with 64-bit indices (expr.wide_indices): for a sliding window
    -- two reduction loops or more and a read whose last index moves with
    the column and a reduction loop, a convolution's ``I(n, c, h + kh, w +
    kw)`` -- the reads move by a product of sizes (``H * W`` per channel)
    that LLVM recomputed at each step in 32 bits; in 64 bits it bumps a
    pointer.  Measured on an AMD EPYC (AVX2): the causal, dilated and GLU
    convolutions 1.8-2x faster, conv_transpose1d 1.5x, same-padded and
    grouped conv1d 1.1x.  Not where a read's lanes lie apart (stride 2: 1.8x
    slower), nor for one reduction loop (a matrix product) or no window (a
    bilinear form): slower there."""
    if len(chain) < 2:
        return False
    names = [iterator(c) for c in chain]
    probe = {x: tirx.Var(x + "_p", INDEX) for x in names + [row, j_name]}
    with low.bound(probe):
        _, _, value, _ = low.statement_parts(call)
    ks, j = [probe[x] for x in names], probe[j_name]
    window = any(ld.indices and uses(ld.indices[-1], j) and any(uses(ld.indices[-1], k) for k in ks)
                 for ld in loads(value))
    return window and not strided_reads(value, j, ks)


def window_loops_outside(low, depth, chain: list, call, row: str, j_name: str) -> list:
    """The reduction loops ``chain`` in the order a register tile runs them
    (``depth``: the tile's depth loop, see RegisterTiles.depth, or None):
    the loops that only ever index a dimension alone (a convolution's input
    channel ``c``) inside the ones that shift another index (its window
    ``kh``, ``kw`` of ``I(n, c, h + kh, w + kw)``), each group in the
    schedule's order.  A window is short (3 steps of a 3x3 kernel): run
    innermost, its loop is entered C x KH times per tile, and each entry
    costs the address arithmetic of every read and a loop exit; with the
    channels innermost the tile's inner loop runs C steps (a 3x3
    convolution on one core: 152 -> 214 GFLOP/s).  Every accumulator still
    sums each product once; only the order of the sum changes.  Kept as
    scheduled when a loop's bounds depend on another of the chain."""
    names = [iterator(c) for c in chain]
    if len(chain) < 2 or any((loop_ids(c) - {x}) & set(names) for c, x in zip(chain, names)):
        return chain
    probe = {x: tirx.Var(x + "_p", INDEX) for x in names + [row, j_name]}
    if depth is not None:
        probe[depth[0]] = tirx.Var(depth[0] + "_p", INDEX)
    with low.bound(probe):
        _, _, value, _ = low.statement_parts(call)
    window = set()
    for ld in loads(value):
        for x in ld.indices:
            used = [v for v in probe if uses(x, probe[v])]
            if len(used) > 1:
                window |= {v for v in used if v in names}
    outer = [c for c, x in zip(chain, names) if x in window]
    inner = [c for c, x in zip(chain, names) if x not in window]
    return outer + inner if outer and inner else chain


def row_dims(low, call, row: str) -> frozenset:
    """The statement's index variables that move with the loop ``row`` (every
    other loop bound to a probe of its own meanwhile)."""
    s = low.stmts[isl_ast.statement(call)]
    args = isl_ast.args(call)[1:]
    names = set().union(*(isl_ast.ids(a) for a in args))
    probe = {x: tirx.Var(x + "_p", INDEX) for x in names | {row}}
    with low.bound(probe):
        values = [low.expr(x) for x in args]
    return frozenset(d for d, a in zip(s.dims, values) if uses(a, probe[row]))


class _Column:
    """One statement (``call``) on one column tile: ``w`` columns of the loop
    ``j_name`` from ``col0``, for rows of the loop ``row``; ``gen`` is the
    :class:`~tcdsl.codegen.cpu_tiles.RegisterTiles` emitting them."""

    def __init__(self, gen, call, row: str, j_name: str, col0, w: int):
        self.gen = gen
        self.low = gen.low
        self.m = gen.m
        self.call = call
        self.row = row
        self.j_name = j_name
        self.col0 = col0
        self.w = w


class _Panels(_Column):
    """Copies of the panels of :meth:`RegisterTiles._packable` for one column
    tile, and the statement reading them instead of the tensors.

    The outer reduction loop is cut into blocks of ``k_block`` steps (over
    several reduction loops: of as many of its steps as make ``k_block``
    steps of the whole nest, at least one), outside the row tiles: for each
    block, its panel (the block's steps of the nest x ``w`` columns, in the
    nest's order) is copied (it stays in L1 while all row tiles use it), then
    every row tile loads its accumulators, adds the block's steps and stores
    them.  Each element still sums the reduction in order, so the results do
    not depend on the block size."""

    def __init__(self, gen, chain, call, row: str, j_name: str, col0, w: int, packed,
                 rows_across: bool = False):
        super().__init__(gen, call, row, j_name, col0, w)
        self.chain = chain
        self.packed = packed
        self.rows_across = rows_across

    def _locate(self, names: list, ranges: list, inner_ext: list, k_init) -> Callable:
        """The panel's index of the element a row tile's load reads, from the
        values the tile binds to the reduction loops and the column (the
        panel holds step (k, inner steps) of the nest x ``w`` columns)."""
        low = self.low

        def locate():
            step = low.env[names[0]] - k_init
            for x, (first, _), e in zip(names[1:], ranges[1:], inner_ext):
                step = step * e + (low.env[x] - first)
            return step * self.w + (low.env[self.j_name] - self.col0)
        return locate

    def around(self, make: Callable) -> tirx.Stmt:
        """The panels' copies around ``make((first, count))``, the row tiles for
        ``count`` steps of the outer reduction loop from its ``first``-th."""
        low, w = self.low, self.w
        names = [iterator(c) for c in self.chain]
        k_name = names[0]
        ranges = [low.loop_range(c) for c in self.chain]
        k_init, k_ext = ranges[0]
        k_ext = tirx.max(k_ext, 0)
        inner_ext = [tirx.max(e, 0) for _, e in ranges[1:]]
        inner = tirx.const(1, INDEX)  # steps of the inner loops per step of the outer one
        for e in inner_ext:
            inner = inner * e
        # k_block 0: one block, the whole loop (over a nest, or with the rows'
        # tensor read across its rows: blocks of DEFAULT_NEST_K_BLOCK steps;
        # dW(o, i) +=! dy(n, o) * x(n, i) at (N, O, I) = (4096, 512, 768): 48 -> 24 ms)
        kc = self.m.k_block or (DEFAULT_NEST_K_BLOCK if len(self.chain) > 1 or self.rows_across else 0)
        blocked = bool(kc)
        head = []
        if not blocked:  # one block, unless the loop is long: its panel past a core's share of L2
            # (an LM head's backward dh(n, d) +=! dlog(n, v) * E(v, d) over V = 16384: 68.7 -> 17.2 ms)
            kc = tirx.Var(k_name + "_kc", INDEX)
            head.append(tirx.Bind(kc, tirx.Select(k_ext > LONG_K, LONG_K_BLOCK, tirx.max(k_ext, 1))))
            blocked = True
        if blocked and len(self.chain) > 1:  # steps of the outer loop per block, bound once
            steps_per_block = tirx.max(tirx.floordiv(tirx.const(kc, INDEX), tirx.max(inner, 1)), 1)
            kc = tirx.Var(k_name + "_kc", INDEX)
            head.append(tirx.Bind(kc, steps_per_block))
        vw = self.m.vector_width
        kb = tirx.Var(k_name + "_kb", INDEX)
        kn = tirx.Var(k_name + "_kn", INDEX)  # steps in this block
        k0 = kb * kc if blocked else tirx.const(0, INDEX)
        q = tirx.Var(k_name + "_q", INDEX)  # the step in the block
        k = tirx.Var(k_name + "_pk", INDEX)  # the step, k0 + q
        ks = [tirx.Var(x + "_pk", INDEX) for x in names[1:]]  # the inner loops' steps
        u, v = tirx.Var("u", INDEX), tirx.Var("v", INDEX)
        steps = {k_name: from_zero(k_init, k), **{x: from_zero(r[0], kv) for x, r, kv in zip(names[1:], ranges[1:], ks)}}
        # the tensors' reads at (k, column), those that do not move with the row
        rp = tirx.Var(self.row + "_p", INDEX)
        with low.bound({self.row: rp, self.j_name: self.col0 + u * vw + v, **steps}):
            _, _, value, _ = low.statement_parts(self.call)
        reads = {ld.source.name: ld for ld in loads(value) if not any(uses(x, rp) for x in ld.indices)}
        firsts = {k_name: k_init + k0, **{x: r[0] for x, r in zip(names[1:], ranges[1:])}}
        with low.bound({self.row: rp, self.j_name: self.col0, **firsts}):
            _, _, first, _ = low.statement_parts(self.call)
        origin = {ld.source.name: ld for ld in loads(first) if not any(uses(x, rp) for x in ld.indices)}
        at_row = row_dims(low, self.call, self.row)
        # the panel's stride of each reduction loop: the inner loops' steps x w
        strides = []
        stride = tirx.const(w, INDEX)
        for e in reversed(inner_ext):
            strides.insert(0, stride)
            stride = stride * e
        strides.insert(0, stride)  # the outer loop's: inner * w
        step = k
        for kv, e in zip(ks, inner_ext):
            step = step * e + kv
        decls, fills, views, transposed = [], [], {}, []
        for name, kdims, jdim in self.packed:
            src = reads[name]
            tensor = low.gen.sig.buffers[name]
            block = tirx.decl_buffer(((tirx.min(k_ext, kc) if blocked else k_ext) * inner * w,), tensor.dtype,
                                     name=name + "_block")
            head.append(tirx.AllocBuffer(block))
            # the block seen as the whole panel: step (k, inner steps) at its number in the nest * w
            panel = tirx.decl_buffer((k_ext * inner * w,), tensor.dtype, name=name + "_panel", data=block.data,
                                     elem_offset=-(k0 * inner * w))
            decls.append(tirx.DeclBuffer(panel, data=block.data))
            if self._transposes(kdims, jdim, src):
                transposed.append((name, kdims[0], panel))
            else:
                fills.append(tirx.BufferStore(panel, src, [step * w + u * vw + v]))
            if kdims is None:
                views[name] = Remapped(tensor, panel, self._locate(names, ranges, inner_ext, k_init))
                continue
            # the tensor seen through the panel: element (.., k-index, .., col) at
            # the sum of (k-index - its value at the block's first step) x the
            # loop's stride, + (col - col0)
            rank = len(src.indices)
            by_dim = dict(zip(kdims, strides))
            view_strides = [by_dim.get(d, 1 if d == jdim else 0) for d in range(rank)]
            o = origin[name].indices
            offset = -o[jdim]
            for d, st in by_dim.items():
                offset = offset - o[d] * st
            view = tirx.decl_buffer(tensor.shape, tensor.dtype, name=name + "_packed", data=block.data,
                                    strides=view_strides, elem_offset=offset)
            decls.append(tirx.DeclBuffer(view, data=block.data))
            views[name] = Partial(tensor, view, at_row)

        def copy_of(stores):
            copy = tirx.For(u, 0, w // vw, tirx.ForKind.UNROLLED, tirx.For(v, 0, vw, tirx.ForKind.VECTORIZED,
                                                                           seq(stores)))
            for kv, e in reversed(list(zip(ks, inner_ext))):
                copy = tirx.For(kv, 0, e, tirx.ForKind.SERIAL, copy)
            return copy
        fill = seq([tirx.For(q, 0, kn, tirx.ForKind.SERIAL, tirx.SeqStmt([tirx.Bind(k, k0 + q), copy_of(fills)]))
                    if fills else None]
                   + [self._transpose_copy(one, k0, kn, k_init, k_name) for one in transposed])
        saved = low.buffer_override
        low.buffer_override = {**saved, **views}
        try:
            body = make((k0, kn))
        finally:
            low.buffer_override = saved
        block = tirx.SeqStmt([tirx.Bind(kn, tirx.min(kc, k_ext - k0) if blocked else k_ext)] + decls + [fill, body])
        if blocked:
            block = tirx.For(kb, 0, tirx.floordiv(k_ext + kc - 1, kc), tirx.ForKind.SERIAL, block)
        return tirx.SeqStmt(head + [block])

    def _transposes(self, kdims, jdim, src) -> bool:
        """The panel of ``src`` is its transpose: one reduction loop, which
        moves the tensor's last index (contiguous), and the column another
        (a matmul's ``B(n, k)``, PyTorch's ``(out, in)`` weights)."""
        vw = self.m.vector_width
        return (len(self.chain) == 1 and kdims is not None and len(kdims) == 1 and kdims[0] == len(src.indices) - 1
                and jdim != kdims[0] and vw in (8, 16) and self.w % vw == 0)

    def _transpose_copy(self, one, k0, kn, k_init, k_name: str) -> tirx.Stmt:
        """The copy of a transposed panel (:meth:`_transposes`) in blocks of
        ``vw`` columns x ``vw`` steps: ``vw`` contiguous vectors of the
        tensor's rows, transposed in registers (log2(vw) rounds of two-vector
        shuffles that swap the off-diagonal halves, quarters, ...), stored as
        ``vw`` contiguous vectors of the panel; the steps after the last full
        block as before, one element per lane.  The element-per-lane copy of
        a 768 x 768 weight took 1 ms per panel (a gather per vector), half the
        time of ``x @ W.T`` on one core."""
        name, kd, panel = one
        low, w, vw = self.low, self.w, self.m.vector_width
        dtype = str(panel.dtype)
        qb, ub = tirx.Var(k_name + "_qb", INDEX), tirx.Var(k_name + "_ub", INDEX)
        base = k0 + qb * vw  # the block's first step
        rows = []
        rp = tirx.Var(self.row + "_p", INDEX)
        for n in range(vw):
            with low.bound({self.row: rp, self.j_name: self.col0 + ub * vw + n,
                            k_name: from_zero(k_init, base)}):
                _, _, value, _ = low.statement_parts(self.call)
            ld = next(x for x in loads(value) if x.source.name == name and not any(uses(i, rp) for i in x.indices))
            idx = list(ld.indices)
            idx[kd] = tirx.Ramp(idx[kd], 1, vw)
            rows.append(tirx.BufferLoad(ld.source, idx))
        binds = []

        def bound(exprs, tag):
            out = []
            for i, e in enumerate(exprs):
                var = tirx.Var(f"{name}_{tag}{i}", f"{dtype}x{vw}")
                binds.append(tirx.Bind(var, e))
                out.append(var)
            return out
        cur = bound(rows, "r")
        b = vw // 2
        while b >= 1:
            nxt = [None] * vw
            lo = [tirx.IntImm("int32", x if not x & b else vw + x - b) for x in range(vw)]
            hi = [tirx.IntImm("int32", x + b if not x & b else vw + x) for x in range(vw)]
            for i in range(vw):
                if not i & b:
                    nxt[i] = tirx.Shuffle([cur[i], cur[i + b]], lo)
                    nxt[i + b] = tirx.Shuffle([cur[i], cur[i + b]], hi)
            cur = bound(nxt, f"t{b}_")
            b //= 2
        stores = [tirx.BufferStore(panel, cur[c], [tirx.Ramp((base + c) * w + ub * vw, 1, vw)]) for c in range(vw)]
        blocks = tirx.For(qb, 0, tirx.floordiv(kn, vw), tirx.ForKind.SERIAL,
                          tirx.For(ub, 0, w // vw, tirx.ForKind.SERIAL, seq(binds + stores)))
        # the steps after the last full block, one element per lane
        q, u, v = (tirx.Var(k_name + x, INDEX) for x in ("_qr", "_ur", "_vr"))
        first = k0 + tirx.floordiv(kn, vw) * vw
        with low.bound({self.row: rp, self.j_name: self.col0 + u * vw + v,
                        k_name: from_zero(k_init, first + q)}):
            _, _, value, _ = low.statement_parts(self.call)
        ld = next(x for x in loads(value) if x.source.name == name and not any(uses(i, rp) for i in x.indices))
        lane = tirx.For(v, 0, vw, tirx.ForKind.VECTORIZED,
                        tirx.BufferStore(panel, ld, [(first + q) * w + u * vw + v]))
        rest = tirx.For(q, 0, kn - tirx.floordiv(kn, vw) * vw, tirx.ForKind.SERIAL,
                        tirx.For(u, 0, w // vw, tirx.ForKind.UNROLLED, lane))
        return seq([blocks, rest])


def _product(xs) -> tirx.PrimExpr:
    out = tirx.const(1, INDEX)
    for x in xs:
        out = out * x
    return out


def whole_layout(tensor: tirx.Buffer, kdims: list[int], jdim: int, w: int, j0=0):
    """The layout of ``tensor`` packed whole in panels of ``w`` columns (its
    dimension ``jdim``) from column ``j0``: [other dimensions..., panel,
    kdims..., w], the columns past the last full panel left out.  Returns
    (the other dimensions, the number of panels, the elements of one panel)."""
    shape = [tirx.max(e, 0) for e in tensor.shape]
    others = [d for d in range(len(shape)) if d != jdim and d not in kdims]
    panels = tirx.floordiv(tirx.max(shape[jdim] - j0, 0) if _nonzero(j0) else shape[jdim], w)
    return others, panels, _product(shape[d] for d in kdims) * w


def _nonzero(x) -> bool:
    return not (isinstance(x, int) and x == 0 or isinstance(x, tirx.IntImm) and x.value == 0)


def balanced_panels(extent, w: int, narrow: int):
    """Panels of ``w`` columns that ``extent`` columns start with when the
    columns after them go to panels of ``narrow`` (``w < 2 * narrow``): one
    fewer than fit when the columns left would be ``2 * narrow - w`` to
    ``narrow - 1`` (H = 512 in 24 and 16: 20 x 24 + 2 x 16, not 21 x 24 + 8,
    whose tile of one vector per row is a chain of dependent FMAs)."""
    left = tirx.floormod(extent, w)
    fewer = tirx.all(extent >= w, left >= 2 * narrow - w, left < narrow)
    one_fewer = tirx.Select(fewer, tirx.const(1, INDEX), tirx.const(0, INDEX))
    return sym.Analyzer().simplify(tirx.floordiv(extent, w) - one_fewer)


def pack_whole(tensor: tirx.Buffer, kdims: list[int], jdim: int, w: int, vw: int, j0=0, tag: str = "whole"):
    """(the buffer, the statement filling it): ``tensor`` copied whole to
    panels of ``w`` columns from column ``j0`` (:func:`whole_layout`), the
    panels in parallel."""
    shape = [tirx.max(e, 0) for e in tensor.shape]
    others, panels, per_panel = whole_layout(tensor, kdims, jdim, w, j0)
    count = _product([shape[d] for d in others] + [panels])
    whole = tirx.decl_buffer((count * per_panel,), tensor.dtype, name=f"{tensor.name}_{tag}")
    o = tirx.Var(tensor.name + "_o", INDEX)
    idx: list = [None] * len(shape)
    rest = o
    idx_p = tirx.floormod(rest, panels)
    rest = tirx.floordiv(rest, panels)
    for d in reversed(others):
        idx[d] = tirx.floormod(rest, shape[d])
        rest = tirx.floordiv(rest, shape[d])
    ks = [tirx.Var(f"{tensor.name}_k{d}", INDEX) for d in kdims]
    for d, kv in zip(kdims, ks):
        idx[d] = kv
    u, v = tirx.Var("u", INDEX), tirx.Var("v", INDEX)
    idx[jdim] = (j0 + idx_p * w if _nonzero(j0) else idx_p * w) + u * vw + v
    step = tirx.const(0, INDEX)
    for d, kv in zip(kdims, ks):
        step = step * shape[d] + kv
    body = tirx.BufferStore(whole, tirx.BufferLoad(tensor, idx), [(o * per_panel) + step * w + u * vw + v])
    body = tirx.For(u, 0, w // vw, ForKind.UNROLLED, tirx.For(v, 0, vw, ForKind.VECTORIZED, body))
    for d, kv in reversed(list(zip(kdims, ks))):
        body = tirx.For(kv, 0, shape[d], ForKind.SERIAL, body)
    return whole, tirx.For(o, 0, count, ForKind.PARALLEL, body)


def rest_packs(gen, whole: list, j_ext, m, when) -> list:
    """The tensors of ``whole`` (``RegisterTiles._whole``: tensor, kdims,
    jdim, buffer, 0) packed again, in panels of two vectors, from the column
    where the ``tile_cols``-wide tiles stop (:func:`balanced_panels`), each
    fill registered in ``gen.prologue`` under the condition ``when``: [] unless
    each has as many columns as the kernel's column loop (``j_ext``: the packs
    start at a column computed from the tensor's shape) and, at fixed sizes,
    such a panel exists."""
    w, out = 2 * m.vector_width, []
    for tensor, kdims, jdim, _, _ in whole:
        ext = tirx.max(tensor.shape[jdim], 0)
        if not sym.Analyzer().can_prove_equal(ext, j_ext):
            return []
        j0 = balanced_panels(ext, m.tile_cols, w) * m.tile_cols
        panels = sym.Analyzer().simplify(tirx.floordiv(tirx.max(ext - j0, 0), w))
        if isinstance(panels, tirx.IntImm) and panels.value == 0:
            return []
        key = (tensor.name, tuple(kdims), jdim, w, "rest")
        if key not in gen.prologue:
            gen.prologue[key] = (*pack_whole(tensor, kdims, jdim, w, m.vector_width, j0, "rest"), [])
        gen.prologue[key][2].append(when)
        out.append((tensor, kdims, jdim, gen.prologue[key][0], j0))
    return out


class _Prepacked(_Column):
    """The reads of one column tile (the ``jt``-th of ``w`` columns from
    the packs' first column ``j0``) from tensors packed whole
    (:func:`pack_whole`): each tensor is seen through a view whose strides
    map its indices into the tile's panel."""

    def __init__(self, gen, call, row: str, j_name: str, col0, w: int, jt, packs):
        super().__init__(gen, call, row, j_name, col0, w)
        self.jt = jt
        self.packs = packs  # (tensor, kdims, jdim, whole buffer, first column j0)

    def around(self, make: Callable) -> tirx.Stmt:
        """The views around ``make()``, the row tiles.  (Cutting the
        reduction into blocks whose panel stays in L1, as :class:`_Panels`
        does, measured no faster here: the LSTM's 512 x 48 panel streams
        from L2.)"""
        low, w = self.low, self.w
        decls, views = [], {}
        at_row = row_dims(low, self.call, self.row)
        for tensor, kdims, jdim, whole, j0 in self.packs:
            shape = [tirx.max(e, 0) for e in tensor.shape]
            others, panels, per_panel = whole_layout(tensor, kdims, jdim, w, j0)
            strides: list = [None] * len(shape)
            strides[jdim] = tirx.const(1, INDEX)
            stride = tirx.const(w, INDEX)
            for d in reversed(kdims):
                strides[d] = stride
                stride = stride * shape[d]
            stride = panels * per_panel
            for d in reversed(others):
                strides[d] = stride
                stride = stride * shape[d]
            # column j0 + jt * w + c of the tensor is element c of panel jt
            view = tirx.decl_buffer(tensor.shape, tensor.dtype, name=tensor.name + "_packed", data=whole.data,
                                    strides=strides,
                                    elem_offset=self.jt * (per_panel - w) - j0 if _nonzero(j0) else self.jt * (per_panel - w))
            decls.append(tirx.DeclBuffer(view, data=whole.data))
            views[tensor.name] = Partial(tensor, view, at_row)
        saved = low.buffer_override
        low.buffer_override = {**saved, **views}
        try:
            body = make()
        finally:
            low.buffer_override = saved
        return tirx.SeqStmt(decls + [body])


def packable(self, chain, call, row: str, j_name: str) -> list[tuple[str, list[int], int]]:
    """The tensors read as a k x columns panel shared by all rows
    (``B(k, n)`` of a matmul, or ``B(n, k)``; over several reduction loops
    ``A(t, b, n)`` of ``dW(i, n) += X(t, b, i) * A(t, b, n)``): one element
    of the tensor read in the statement (at one place or several), one
    index moving with the column by 1 and one with each reduction loop by 1
    (a dimension of its own each), none with the row.  Their tiles are copied to a contiguous panel before the
    row tiles use them: rows of a big matrix at a power-of-two stride fall
    into a few cache sets otherwise, and a transposed operand would be a
    gather per vector.  The inner reduction loops' bounds may not depend
    on the outer ones' (the panel is a box).
    Returns (tensor, index of each reduction loop's dimension, index of its column dimension)."""
    k_names = [iterator(c) for c in chain]
    for i, c in enumerate(chain[1:]):
        if loop_ids(c) & set(k_names[:i + 1]):
            return []
    probe = {x: tirx.Var(x + "_p", INDEX) for x in [row, j_name] + k_names}
    with self.low.bound(probe):
        buf, _, value, _ = self.low.statement_parts(call)
    by_name: dict[str, list] = {}
    for ld in loads(value):
        by_name.setdefault(ld.source.name, []).append(ld)
    strided = strided_reads(value, probe[j_name], [probe[x] for x in k_names])
    out = []
    for name, lds in by_name.items():
        # the reads that do not move with the row (``X(n, i) * X(n, j)``: X(n, i) stays, expr.Partial), of one
        # element per step (read twice at the same indices, ``(x(i, k) - y(j, k)) ** 2``, is one read)
        at_rows = [ld for ld in lds if any(uses(x, probe[row]) for x in ld.indices)]
        lds = [ld for ld in lds if not any(ld.same_as(r) for r in at_rows)]
        if name == buf.name or not lds or len(lds[0].indices) < len(chain) + 1:
            continue
        if any(not tvm_ffi.structural_equal(list(ld.indices), list(lds[0].indices)) for ld in lds[1:]):
            continue
        idx = list(lds[0].indices)
        if name in strided:
            if at_rows:
                continue
            # the columns' lanes lie apart in the tensor (a convolution of
            # stride 2): a panel found from the loops' values (Remapped),
            # read as contiguous vectors by every row tile
            out.append((name, None, None))
            continue
        dims = [[d for d, x in enumerate(idx) if uses(x, probe[v])] for v in [j_name] + k_names]
        if any(len(ds) != 1 for ds in dims) or len({ds[0] for ds in dims}) != len(dims):
            continue
        if any(coefficient(idx[ds[0]], probe[v]) != 1 for ds, v in zip(dims, [j_name] + k_names)):
            continue
        out.append((name, [ds[0] for ds in dims[1:]], dims[0][0]))
    return out
