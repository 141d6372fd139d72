"""Mapping a kernel's isl AST to CUDA: thread-bound launches under host code.

``lower_kernel(low, ast, options)`` is called by :class:`CudaProgram` (the
driver's lowering for target ``cuda``, :mod:`tcdsl.codegen.lower`) for
every kernel (an isl AST inside the program's sequential loops).  It returns the TIR of the kernel's *host* side: plain
statements and serial loops that TVM's host/device split keeps on the CPU,
around thread-bound loop nests that become ``__global__`` functions, one per
nest (one launch).  The program's sequential ``for`` loops are built by
``lower.py`` around that, so they become host loops launching the kernels at
every step.

How the isl AST is walked, from the top (the "host level"):

* a loop under a ``par`` mark (coincident: it carries no dependence) is a
  **launch**.  It and the ``par`` loops perfectly nested in it whose bounds do
  not depend on the outer ones (at most ``flatten`` of them) are flattened
  into one index ``flat = blockIdx.x * threads + threadIdx.x`` over the
  product of their extents, with a guard ``flat < extent`` for the partial
  last block (and, on the host, ``extent > 0`` for the launch itself).  The
  innermost flattened loop varies fastest across threads, so stores along it
  are coalesced.  Everything below -- ``seq`` loops (reductions), further
  loops, the statements -- runs serially in each thread, in the AST's order:
  consecutive statements under one coincident loop share the launch.
* a block's children are launched one after the other (each its own
  launch; the kernel boundary orders them).
* an ``if`` stays on the host: at the host level its condition can only
  involve sizes and the loop variables of host loops.
* a loop that carries a dependence (``seq``) and has a ``par`` loop inside
  becomes a host loop launching its body at every step -- or, where each of
  those launches would fit one block (every launch's thread count at most
  ``threads``, else at most ``persistent_threads``: size conditions checked
  on the host at the call), one **persistent** launch of one block of that
  many threads that runs the loop itself, each former launch a phase of the
  block's threads followed by ``__syncthreads()`` (``persistent``, default
  True; the batch-1 RNN steps, where a launch costs more than the step's
  work).  Its phases do what the launches do, on one block; the barrier
  orders them as the kernel boundaries did.  With ``split``, a phase's sums
  are split into parts across the block's threads (codegen/cuda_thread.py).
  The host loop stays for the other sizes, and where a launch's thread
  count depends on the loop's own variables.  One without any
  ``par`` loop inside, and any statement that is under no coincident loop
  (e.g. a 0-rank reduction ``O +=! A(i)``), is launched on a single thread
  (grid 1 x block 1) rather than left on the host: the data is on the device.

The schedules come from :mod:`tcdsl.polyhedral.gpu_schedule`, not from the
CPU path's: the GPU mapping wants the scheduler's outer coincident loops
outermost (they become the threads), while the CPU path may interchange
loops for vectorization.

Accumulators in registers (``registers``): see codegen/cuda_thread.py.

Options (``options=`` of :func:`tcdsl.compile`): ``threads`` (threads per
block, default 256, at most 1024), ``flatten`` (how many nested
coincident loops to map at most, default: all of the perfectly nested ones),
``registers`` (accumulators in registers, default True), ``persistent``
(one launch for a host loop whose launches are single blocks, default True),
``persistent_threads`` (its larger block, default 1024) and ``split`` (sums
across lanes, default False).  For tests,
``{"emulate": True}`` emits the thread-bound loops as serial loops, so that
the mapped program (guards, index arithmetic, registers, host loops) can be
built for the CPU and checked against NumPy on a machine without a GPU.
"""
from __future__ import annotations

import dataclasses

import islpy as isl
from tvm import tirx
from tvm.tirx import ForKind, IterVar

from ..errors import InternalError
from ..options import CudaMapping
from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT as _NT, iterator, loop_ids, unit_stride
from ..polyhedral.model import Kernel
from ..polyhedral.schedule import PARALLEL
from .expr import INDEX
from .cuda_thread import Parts, ThreadLowering, parts_count, simplify as _simplify
from .lower import AstLowering, ProgramLowering, seq as _seq


@dataclasses.dataclass
class _Persist:
    """The persistent launch being built: its thread index, the thread
    count of each of its phases and the block's, and the values of the
    thread index and the sizes alone that its split phases use
    (:meth:`hoist`), computed once before the loop: a phase recomputed its
    divisions by the sizes at every step, a cost the whole block pays."""

    tx: tirx.Var
    totals: list
    block: int
    hoisted: dict = dataclasses.field(default_factory=dict)  # printed value -> (local array, value)
    sizes: tuple = ()
    arrays: list = dataclasses.field(default_factory=list)  # the variables of the hoisted arrays

    def hoist(self, name: str, value: tirx.PrimExpr) -> tirx.PrimExpr:
        """A variable bound to ``value`` before the loop, where ``value``
        depends on the thread index and the sizes alone; else ``value``."""
        value = _simplify(value)
        free = tirx.analysis.undefined_vars(value, [self.tx, *self.sizes, *self.arrays])
        if free or isinstance(value, (tirx.IntImm, tirx.Var)):
            return value
        key = str(value)
        if key not in self.hoisted:  # a local array, not a let: TVM's simplifier put a let's value back
            buf = tirx.decl_buffer((1,), INDEX, name=f"{name}{len(self.hoisted)}", scope="local")
            self.hoisted[key] = (buf, value)
            self.arrays.extend(tirx.analysis.undefined_vars(tirx.BufferLoad(buf, [tirx.const(0, INDEX)]), []))
        return tirx.BufferLoad(self.hoisted[key][0], [tirx.const(0, INDEX)])

    def prologue(self) -> list[tirx.Stmt]:
        """The hoisted values' arrays and their stores, in order."""
        zero = [tirx.const(0, INDEX)]
        return ([tirx.AllocBuffer(b) for b, _ in self.hoisted.values()]
                + [tirx.BufferStore(b, v, zero) for b, v in self.hoisted.values()])


class CudaProgram(ProgramLowering):
    """The program on CUDA: its ``for`` loops on the host (serial loops
    around the launches) or persistent launches; each kernel through
    :func:`lower_kernel`."""

    persist: _Persist | None = None
    pad_rows = False  # (a thread's column reads are coalesced, not a strip down the rows)

    def kernel(self, k: Kernel, env: dict) -> tirx.Stmt:
        low = AstLowering(self, {s.name: s for s in k.stmts}, env)
        return lower_kernel(low, self.ast_of(k), self.options.cuda)

    def sequential(self, lp, body, env: dict) -> tirx.Stmt:
        return or_persistent(self, lambda: super(CudaProgram, self).sequential(lp, body, env))

    def scratch_params(self) -> tuple[str, ...]:
        """Every temporary is a parameter after the outputs, allocated by the
        caller (runtime/device.py): from PyTorch's allocator on PyTorch
        tensors, so that a ``torch.cuda.graph`` capturing a call keeps them in
        the graph's memory pool.  Allocated inside the host function, they
        would come from TVM's workspace pool, which frees a page to grow it:
        a captured graph would then write to freed memory.  The emulated
        mapping (a CPU build) allocates them inside as the CPU does."""
        return () if self.options.cuda.emulate else tuple(self.model.ranges.checked.temps)


def lower_kernel(low, ast: isl.AstNode, options: CudaMapping) -> tirx.Stmt:
    """The host-side TIR of one kernel (see the module docstring).  ``low`` is
    the ``lower.AstLowering`` of the kernel (its statements and environment);
    inside a persistent launch, the kernel's phases."""
    thread = ThreadLowering(low.gen, low.stmts, low.env, options.registers)
    return _Launcher(thread, options).host(ast)


def or_persistent(gen: CudaProgram, build) -> tirx.Stmt:
    """The host loop ``build()`` -- or, where the sizes allow, one launch of
    one block running the loop that ``build()`` makes inside the persistent
    context, its launches phases (see the module docstring): ``if <every
    phase's thread count <= threads>: <that launch in a block of threads>
    elif <... <= persistent_threads>: <in a block of persistent_threads>
    else: <host loop>``.  Only the host loop: option off, inside a
    persistent launch already, or a phase whose thread count depends on a
    loop variable."""
    loop = build()
    options = gen.options.cuda
    if not options.persistent or gen.persist is not None:
        return loop
    out = loop
    sizes = [x for x in gen.sig.size_vars.values() if isinstance(x, tirx.Var)]
    # split sums: the larger block alone, so that a phase has as many parts as fit
    blocks = {options.persistent_threads} if options.split and not options.emulate else \
        {options.threads, options.persistent_threads}
    for block in sorted(blocks, reverse=True):
        gen.persist = ctx = _Persist(tirx.Var("tx", INDEX), [], block, sizes=tuple(sizes))
        try:
            fused = build()
        finally:
            gen.persist = None
        if not ctx.totals or any(len(tirx.analysis.undefined_vars(t, sizes)) for t in ctx.totals):
            return loop
        fused = _seq(ctx.prologue() + [fused])
        if not options.emulate:  # emulated, every phase has its own serial loop of threads
            fused = _bind(False, tirx.Var("bx", INDEX), 1, ctx.tx, block, fused)
        totals = list({str(t): t for t in ctx.totals}.values())
        out = tirx.IfThenElse(_simplify(_all([t <= block for t in totals])), fused, out)
    return out


def thread_axis(tag: str) -> IterVar:
    return IterVar(None, tag, IterVar.ThreadIndex, tag)


class _Launcher:
    def __init__(self, low, options: CudaMapping):
        self.low = low
        self.threads = options.threads
        self.flatten = options.flatten
        self.emulate = options.emulate
        self.split = options.split and not options.emulate

    # ------------------------------------------------------------ host level
    def host(self, node: isl.AstNode) -> tirx.Stmt:
        """The TIR of ``node``: launches under host code, or inside a
        persistent launch (``gen.persist``) its phases."""
        t = node.get_type()
        inside = self.low.gen.persist is not None
        if not isl_ast.has(node, isl_ast.is_parallel_mark):
            if inside:  # on thread 0 of the block
                return self.phase(lambda tx: tirx.IfThenElse(tx == 0, self.low.node(node, False, None), None),
                                  tirx.const(1, INDEX))
            return self.single_thread(node)
        if t == _NT.block:
            return _seq([self.host(x) for x in isl_ast.children(node)])
        if t == _NT.if_:  # inside a persistent launch too, the same branch in every thread
            other = self.host(node.if_get_else_node()) if node.if_has_else_node() else None
            return tirx.IfThenElse(self.low._cond(node.if_get_cond()), self.host(node.if_get_then_node()), other)
        if t == _NT.mark:
            inner = node.mark_get_node()
            if isl_ast.mark(node) == PARALLEL and inner.get_type() == _NT.for_:
                return self.launch(inner)
            return self.host(inner)
        if t == _NT.for_:
            # a dependence-carrying loop with parallel work inside: a host loop of launches, or
            # one persistent launch where the sizes allow (inside one: a loop of its phases)
            return or_persistent(self.low.gen, lambda: self._serial(node))
        raise InternalError(f"unexpected isl AST node {t} at the host level of a CUDA kernel")

    def _serial(self, node: isl.AstNode) -> tirx.Stmt:
        name, init, extent = _header(self.low, node)
        v = tirx.Var(name, INDEX)
        with self.low.bound({name: init + v}):
            body = self.host(node.for_get_body())
        return tirx.For(v, 0, extent, ForKind.SERIAL, body)

    # ------------------------------------------------------- persistent loops
    def phase(self, make, total: tirx.PrimExpr) -> tirx.Stmt:
        """``make(tx)`` run by the block's threads, then a barrier.  The phase
        runs where the block has a thread for each of ``total`` (the host's
        condition)."""
        ctx = self.low.gen.persist
        ctx.totals.append(total)
        if self.emulate:
            tx = tirx.Var("tx", INDEX)
            return tirx.For(tx, 0, ctx.block, ForKind.SERIAL, make(tx))
        return _seq([make(ctx.tx), tirx.Evaluate(tirx.op.tvm_storage_sync("shared"))])

    # --------------------------------------------------------------- launches
    def launch(self, loop: isl.AstNode) -> tirx.Stmt:
        """One launch for the coincident loop ``loop`` and the coincident loops
        perfectly nested in it (a rectangular band), flattened onto threads."""
        band = [_header(self.low, loop)]
        body = loop.for_get_body()
        names = {band[0][0]}
        while self.flatten is None or len(band) < self.flatten:
            inner = _par_loop(body)
            if inner is None or loop_ids(inner) & names:
                break
            band.append(_header(self.low, inner))
            names.add(band[-1][0])
            body = inner.for_get_body()
        extents = [e for _, _, e in band]
        total = extents[0]
        for e in extents[1:]:
            total = total * e
        total = _simplify(total)
        threads = self.threads
        if isinstance(total, tirx.IntImm):
            threads = max(1, min(threads, total.value))
        positive = _simplify(_all([e > 0 for e in extents]))
        if self.low.gen.persist is not None:  # a phase of a persistent loop: one block, the thread count checked before
            if isinstance(positive, tirx.IntImm) and not positive.value:
                return tirx.Evaluate(tirx.const(0, INDEX))

            def make(tx):
                block = self.low.gen.persist.block
                guard = [] if isinstance(total, tirx.IntImm) and total.value == block else [tx < total]
                if not isinstance(positive, tirx.IntImm):
                    guard.insert(0, positive)
                stmt = self._flat(band, tx, lambda: self.low.node(body, False, None))
                stmt = tirx.IfThenElse(_all(guard), stmt, None) if guard else stmt
                split = self._parts(tx, total, band, body, positive) if self.split else None
                return stmt if split is None else split(stmt)
            return self.phase(make, total)
        bx, tx = tirx.Var("bx", INDEX), tirx.Var("tx", INDEX)
        flat = bx * threads + tx

        def make_launch():
            stmt = self.low.node(body, False, None)
            if not (isinstance(total, tirx.IntImm) and total.value % threads == 0):
                stmt = tirx.IfThenElse(flat < total, stmt, None)
            return stmt
        nest = _bind(self.emulate, bx, _simplify(tirx.ceildiv(total, threads)), tx, threads,
                     self._flat(band, flat, make_launch))
        if isinstance(positive, tirx.IntImm):
            return nest if positive.value else tirx.Evaluate(tirx.const(0, INDEX))
        return tirx.IfThenElse(positive, nest, None)

    def _parts(self, tx: tirx.Var, total: tirx.PrimExpr, band, body, positive: tirx.PrimExpr):
        """The phase with its sums split into parts (cuda_thread.py): a
        function of the phase with one thread per output giving ``if P >= 2:
        <first half> barrier <second half> else: <that phase>``; None where
        no sum splits or there are never two parts."""
        block = self.low.gen.persist.block
        count = parts_count(total, block)
        if isinstance(count, tirx.IntImm) and count.value < 2:
            return None
        loops = self._flat(band, tirx.truncmod(tx, total), lambda: self.low.split_loops(body))
        if loops is None:
            return None
        ctx = self.low.gen.persist
        P = ctx.hoist("parts", count)
        log2 = ctx.hoist("parts_log2", parts_count(total, block, log2=True))
        div = tirx.max(total, 1)  # computed before the sizes are known to be positive
        out, p = ctx.hoist("out", tirx.truncmod(tx, div)), ctx.hoist("part", tirx.truncdiv(tx, div))
        buffers = self.low.gen.sig.buffers
        slots = [tirx.decl_buffer((block,), buffers[t].dtype, name=f"{t}_part", scope="shared")
                 for plan, _ in filter(None, loops) for t, _ in plan]

        def half(combine: bool) -> tirx.Stmt:
            with self.low.splitting(Parts(p, P, log2, tx, out, total, loops, slots, combine)):
                return self._flat(band, out, lambda: self.low.node(body, False, None), True, True)

        sync = tirx.Evaluate(tirx.op.tvm_storage_sync("shared"))
        split = _seq([tirx.AllocBuffer(b) for b in slots]
                     + [tirx.IfThenElse(p < P, half(False), None), sync, tirx.IfThenElse(p == 0, half(True), None)])
        if not isinstance(positive, tirx.IntImm):  # the barrier under a condition of the sizes alone
            split = tirx.IfThenElse(positive, split, None)
        return lambda single: tirx.IfThenElse(P >= 2, split, single)

    def _flat(self, band, flat: tirx.PrimExpr, make, local: bool = False, hoist: bool = False) -> tirx.Stmt:
        """``make()`` with the band's loop variables bound to their values at
        the flattened index ``flat`` (the innermost varies fastest).  With
        ``local``, the values are computed once into a local array that the
        code reads: nvcc kept a divison by a size inside a loop whose trip
        count it could not prove positive (a lane's share of a sum), since a
        division hoisted out of it might trap.  With ``hoist`` (the halves of
        a phase split into parts), the divisions are computed once before a
        persistent launch's loop (:meth:`_Persist.hoist`): measured on an
        H100, that made the split phases faster and the phases of one thread
        per output slower (1.2x and 1.7x for the batch-1 Elman RNN's blocks
        of 256 at 128 and 256 units), so only the former do."""
        ctx = self.low.gen.persist
        hoisting = hoist and ctx is not None
        values, rest = {}, flat
        for name, init, extent in reversed(band[1:]):
            if hoisting:  # computed before the sizes are known to be positive: divided by at least 1
                div = tirx.max(extent, 1)
                values[name] = init + ctx.hoist("at", tirx.truncmod(rest, div))
                rest = ctx.hoist("at", tirx.truncdiv(rest, div))
            else:
                values[name] = init + tirx.truncmod(rest, extent)
                rest = tirx.truncdiv(rest, extent)
        values[band[0][0]] = band[0][1] + rest
        if not local:
            with self.low.bound(values):
                return make()
        at = tirx.decl_buffer((len(values),), INDEX, name="at", scope="local")
        with self.low.bound({name: tirx.BufferLoad(at, [k]) for k, name in enumerate(values)}):
            body = make()
        return _seq([tirx.AllocBuffer(at)] + [tirx.BufferStore(at, v, [k]) for k, v in enumerate(values.values())]
                    + [body])

    def single_thread(self, node: isl.AstNode) -> tirx.Stmt:
        """Code under no coincident loop: run on the device by one thread."""
        bx, tx = tirx.Var("bx", INDEX), tirx.Var("tx", INDEX)
        return _bind(self.emulate, bx, 1, tx, 1, self.low.node(node, False, None))


# ------------------------------------------------------------------ helpers
def _bind(emulate: bool, bx: tirx.Var, blocks, tx: tirx.Var, threads: int, body: tirx.Stmt) -> tirx.Stmt:
    if emulate:  # the threads one after the other (see the module docstring)
        return tirx.For(bx, 0, blocks, ForKind.SERIAL, tirx.For(tx, 0, threads, ForKind.SERIAL, body))
    inner = tirx.For(tx, 0, threads, ForKind.THREAD_BINDING, body, thread_binding=thread_axis("threadIdx.x"))
    return tirx.For(bx, 0, blocks, ForKind.THREAD_BINDING, inner, thread_binding=thread_axis("blockIdx.x"))


def _header(low, node: isl.AstNode) -> tuple[str, tirx.PrimExpr, tirx.PrimExpr]:
    """(iterator name, first value, trip count) of an isl ``for``."""
    if not unit_stride(node):
        raise InternalError("only unit-stride isl loops are mapped to threads")
    init, extent = low.loop_range(node)
    return iterator(node), init, _simplify(extent)


def _par_loop(node: isl.AstNode) -> isl.AstNode | None:
    """The loop of ``node`` if ``node`` is a ``par`` mark directly over a loop."""
    if not isl_ast.is_parallel_mark(node):
        return None
    inner = node.mark_get_node()
    return inner if inner.get_type() == _NT.for_ else None


def _all(conds: list[tirx.PrimExpr]) -> tirx.PrimExpr:
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out
