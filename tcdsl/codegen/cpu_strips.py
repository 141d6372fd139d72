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

import functools
from dataclasses import dataclass, field
from typing import Callable

import islpy as isl
from tvm import sym, tirx
from tvm.tirx.analysis import undefined_vars

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT, iterator, loop_ids, strip_marks
from ..sema import types as ty
from .expr import INDEX
from .lower import has_node, loads, seq, uses

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
    strip) ``plain()``, the parallel loop over the strips; with fewer strips
    than threads, the reduction's steps split across the threads
    (:func:`split_rows`) where they are many."""
    body, _ = strip_marks(node.for_get_body())
    name = iterator(node)
    init, extent = low.loop_range(node)
    count = tirx.floordiv(tirx.max(extent, 0) + step - 1, step)
    threads = low.gen.cpu.threads
    split = split_rows(low, node, body, name, init, extent, step, count) if threads > 1 else None
    blocked = None
    if body.get_type() == NT.for_ and name not in loop_ids(body):
        k_name = iterator(body)
        _, k_ext = low.loop_range(body)
        k_ext = tirx.max(k_ext, 0)
        per = tirx.floordiv(count + threads - 1, threads)
        t, b, s = (tirx.Var(x, INDEX) for x in (name + "_th", k_name + "_sb", name + "_s"))
        kb = STRIP_K_BLOCK
        low.strip_block = block = StripBlock(k_name, b * kb, tirx.min(kb, k_ext - b * kb))
        try:
            inner = low.body_with(node, name, init + (t * per + s) * step, False)
        finally:
            low.strip_block = None
        if block.taken:
            mine = tirx.max(tirx.min(per, count - t * per), 0)
            blocked = tirx.For(t, 0, threads, tirx.ForKind.PARALLEL,
                               tirx.For(b, 0, tirx.floordiv(k_ext + kb - 1, kb), tirx.ForKind.SERIAL,
                                        tirx.For(s, 0, mine, tirx.ForKind.SERIAL, inner)))
    out = plain() if blocked is None else tirx.IfThenElse(count >= MIN_STRIPS, blocked, plain())
    return out if split is None else tirx.IfThenElse(split[0], split[1], out)


def strip_steps(low, chain: list) -> tuple | None:
    """(first, count): the block of its reduction loop ``chain[0]`` that a
    single strip's register tile runs, while :func:`strip_blocks` or
    :func:`split_rows` lowers its strip; else None."""
    block = getattr(low, "strip_block", None)
    if isinstance(block, RowSplit):
        return block.steps(low, chain)
    if block is None or iterator(chain[0]) != block.name:
        return None
    block.taken = True
    return block.first, block.count


class Steps(tuple):
    """(first, count) of a tile's reduction steps on one thread of a
    :class:`RowSplit`; ``split``: that split, where the tile accumulates into
    the thread's partial results."""
    split = None


# a reduction's combining operator and its identity for the partial results
# (a float sum's is -0.0, so that folding a partial that saw no step into an
# element leaves it as it was, -0.0 included)
_FOLDS = {"+": lambda a, b: a + b, "*": lambda a, b: a * b, "max": tirx.max, "min": tirx.min}


@dataclass
class RowSplit:
    """A strip loop's reduction steps cut into one run per thread
    (:func:`split_rows`): thread 0 runs the strips as they are over its
    steps, each other thread its steps of the register tiles into its own
    partial results (the tiles' accumulators load from and store to
    ``parts``, which start at the reductions' identities); then the partial
    results fold into the output, in thread order."""
    threads: int
    thread: tirx.PrimExpr
    part_mode: bool = False  # lowering the other threads' tiles (else thread 0's strips)
    parts: list = field(default_factory=list)  # [(output buffer, its partials, reduction)]
    extents: list = field(default_factory=list)  # [(steps of the split loop, steps of the whole chain)]
    taken: bool = False
    failed: bool = False

    def steps(self, low, chain: list) -> Steps:
        self.taken = True
        _, k = low.loop_range(chain[0])
        k = tirx.max(k, 0)
        work = k
        for c in chain[1:]:
            work = work * tirx.max(low.loop_range(c)[1], 0)
        self.extents.append((k, work))
        per = tirx.floordiv(k + self.threads - 1, self.threads)
        first = self.thread * per
        out = Steps((first, tirx.max(tirx.min(per, k - first), 0)))
        out.split = self if self.part_mode else None
        return out

    def part(self, s, buf: tirx.Buffer, idx: list) -> tuple:
        """(buffer, indices): the thread's partial result at the output element
        ``buf[idx]`` of the statement ``s``, in a row per thread (but 0) of as
        many elements as ``buf``."""
        red = s.info.comp.reduction
        if red not in _FOLDS or str(buf.dtype) == "bool":
            self.failed, red = True, "+"
        for b, p, r in self.parts:
            if b.same_as(buf):
                self.failed |= r != red  # (two reductions of different operators into one tensor)
                break
        else:
            size = functools.reduce(lambda a, b: a * b, buf.shape, tirx.const(1, INDEX))
            p = tirx.decl_buffer((self.threads - 1, size), buf.dtype, name=buf.name + "_part")
            self.parts.append((buf, p, red))
        return p, [self.thread - 1, _flat(buf.shape, idx)]

    def starts(self, t) -> tirx.Stmt:
        """Thread ``t``'s partial results at their first values."""
        out = []
        for _, p, red in self.parts:
            e = tirx.Var(p.name + "_e", INDEX)
            first = -0.0 if red == "+" and "float" in str(p.dtype) else ty.identity(red, str(p.dtype))
            out.append(tirx.For(e, 0, p.shape[1], tirx.ForKind.SERIAL,
                                tirx.BufferStore(p, tirx.const(first, p.dtype), [t - 1, e])))
        return seq(out)

    def folds(self) -> tirx.Stmt:
        """Every output element combined with the other threads' partial
        results, in thread order."""
        out = []
        for buf, p, red in self.parts:
            t = tirx.Var(p.name + "_t", INDEX)
            idx = [tirx.Var(f"{p.name}_{i}", INDEX) for i in range(len(buf.shape))]
            body = tirx.BufferStore(buf, _FOLDS[red](tirx.BufferLoad(buf, idx),
                                                     tirx.BufferLoad(p, [t - 1, _flat(buf.shape, idx)])), idx)
            for i, n in reversed(list(zip(idx, buf.shape))):
                body = tirx.For(i, 0, n, tirx.ForKind.SERIAL, body)
            out.append(tirx.For(t, 1, self.threads - 1, tirx.ForKind.SERIAL, body))
        return seq(out)


def _flat(shape, idx) -> tirx.PrimExpr:
    flat = tirx.const(0, INDEX)
    for n, i in zip(shape, idx):
        flat = flat * n + i
    return flat


# split only where each thread has this many steps of a strip's work at least
SPLIT_MIN_WORK = 1 << 14


def split_rows(low, node: isl.AstNode, body: isl.AstNode, name: str, init, extent, step: int, count):
    """(condition, statement): the strip loop ``node`` where its strips are
    fewer than the threads (a column sum over 128 channels, ``mean(c) +=!
    x(n, h, w, c)``, runs on one thread in one strip): its register tiles'
    reduction steps cut into one run per thread (:class:`RowSplit`), ``for
    thread (parallel) { for strip { body } }`` with thread 0 running the
    strips' statements as they are and the others only their tiles, into
    partial results that then fold into the outputs; the statements after the
    tiles (a factored sum's scale, ``s(c) = s(c) * w(c)``) run after the
    folds.  A sum's order changes from one chain to one per thread, combined
    in thread order: the same on every call.  None where a statement runs
    between two tiles, or a tile reads what a statement before it writes."""
    threads = low.gen.cpu.threads
    s = tirx.Var(name + "_sp", INDEX)
    t = tirx.Var(name + "_tp", INDEX)
    at = init + s * step
    split = RowSplit(threads, tirx.const(0, INDEX))
    # (a block's children as the block lowers them; else the body under its marks)
    children = isl_ast.children(body) if body.get_type() == NT.block else [node.for_get_body()]

    def lowered() -> tuple[list, list]:
        out, taken = [], []
        for child in children:
            split.taken = False
            with low.bound({name: at}):
                out.append(low.node(child, False, None))
            taken.append(split.taken)
        return out, taken
    low.strip_block = split
    try:
        first, taken = lowered()
        if not any(taken) or split.failed:
            return None
        split.part_mode, split.thread = True, t
        parts, _ = lowered()
    finally:
        low.strip_block = None
    # the statements before the tiles run on thread 0 with its steps, those after the folds
    a = taken.index(True)
    b = len(taken) - taken[::-1].index(True)
    if not all(taken[a:b]) or split.failed or not _private(parts[a:b], seq(first[:b]), [p for _, p, _ in split.parts]):
        return None
    sizes = [v for v in low.gen.sig.size_vars.values() if isinstance(v, tirx.Var)]
    cond = count < threads
    for k, work in split.extents:
        if len(undefined_vars(work, sizes)):
            return None
        cond = tirx.And(cond, tirx.And(k >= 2 * threads, work * tirx.min(extent, step) >= SPLIT_MIN_WORK * threads))
    run = tirx.For(t, 0, threads, tirx.ForKind.PARALLEL, tirx.IfThenElse(
        t == 0, tirx.For(s, 0, count, tirx.ForKind.SERIAL, seq(first[:b])),
        seq([split.starts(t), tirx.For(s, 0, count, tirx.ForKind.SERIAL, seq(parts[a:b]))])))
    after = [tirx.For(s, 0, count, tirx.ForKind.SERIAL, seq(first[b:]))] if b < len(first) else []
    return sym.Analyzer().simplify(cond), seq([tirx.AllocBuffer(p) for _, p, _ in split.parts]
                                              + [run, split.folds()] + after)


def _private(parts: list, first: tirx.Stmt, partials: list) -> bool:
    """The other threads' tiles store only to their own buffers and partial
    results, and read nothing that thread 0's statements write."""
    mine, written, read = [], [], []
    for x in parts:
        has_node(x, lambda n: isinstance(n, tirx.AllocBuffer) and mine.append(n.buffer))
        has_node(x, lambda n: isinstance(n, tirx.BufferStore) and written.append(n.buffer))
        read += [ld.buffer for ld in loads(x)]
    own = mine + partials
    if not all(any(b.same_as(o) for o in own) for b in written):
        return False
    shared = []
    has_node(first, lambda n: isinstance(n, tirx.BufferStore) and shared.append(n.buffer))
    return not any(b.same_as(w) for b in read for w in shared if not any(w.same_as(o) for o in own))


def few_rows(loop, body: isl.AstNode, name: str, init, extent, chunked: tirx.Stmt) -> tirx.Stmt:
    """Where the rows are at most two tiles per thread (a decoder's batch of
    8 rows times a vocabulary's (V, D) weights), each thread reading every
    column's operands for its few rows reads the whole weight matrix: the
    rows in one chunk, their widest column tiles in parallel instead
    (outside sequential loops; a run-time choice by the row count).  ``loop``:
    the ``cpu.ChunkedLoop``, ``chunked`` its loop over the chunks of rows."""
    m = loop.m
    if loop.wrap is not None or loop.in_loop or not m.parallel or m.threads < 2 or m.tile_rows < 2 \
            or not _shared_reads(loop, body, name):
        return chunked
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
    beside an ``if_then_else``) where the ``if_then_else``s are only the
    guards of clamped reads for an empty tensor (a gathered
    ``logp(t, b, ext(b, s))`` beside libm's Lets in a log-sum-exp): the vector
    loop where every such tensor is nonempty, a scalar loop where one is
    empty; else None (a scalar loop)."""
    from .expr import assume_nonempty
    if getattr(low, "assuming_nonempty", False):
        return None
    low.assuming_nonempty = True
    try:
        with assume_nonempty() as conds:
            out = low._vectorized(node, name, init, extent, parallel, parallel_ok)
    finally:
        low.assuming_nonempty = False
    if out is None or not conds:
        return None
    cond = conds[0]
    for c in conds[1:]:
        cond = tirx.And(cond, c)
    cond = sym.Analyzer().simplify(cond)
    v = tirx.Var(name + "_s", INDEX)
    scalar = tirx.For(v, 0, tirx.max(extent, 0), tirx.ForKind.SERIAL, low.body_with(node, name, init + v, parallel_ok))
    return tirx.IfThenElse(cond, out, scalar)
