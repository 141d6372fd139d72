"""Mapping a kernel's isl AST to CUDA: thread-bound launches under host code.

``lower_kernel(low, ast, options)`` is called by :mod:`tcdsl.codegen.tir`
for every kernel (an isl AST inside the program's sequential loops) when the
target is CUDA.  It returns the TIR of the kernel's *host* side: plain
statements and serial loops that TVM's host/device split keeps on the CPU,
around thread-bound loop nests that become ``__global__`` functions, one per
nest (one launch).  The program's sequential ``for`` loops are built by
``tir.py`` around that, so they become host loops launching the kernels at
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
  becomes a host loop launching its body at every step; one without any
  ``par`` loop inside, and any statement that is under no coincident loop
  (e.g. a 0-rank reduction ``O +=! A(i)``), is launched on a single thread
  (grid 1 x block 1) rather than left on the host: the data is on the device.

The schedules come from :func:`schedule`, not from the CPU path's: the GPU
mapping wants the scheduler's outer coincident loops outermost (they become
the threads), while the CPU path may interchange loops for vectorization.

Accumulators in registers: inside a thread, a serial loop whose body
writes a location that does not move with the loop (``C(m, n)`` in
``for k: C(m, n) += A(m, k) * B(k, n)``) keeps that location in a local
variable for the loop -- loaded before, stored after, guarded by
``extent > 0`` -- when the write is unconditional in the loop body and every
other access of that tensor in the loop is provably to another element
(``hidden(t-1, b, c)`` against ``hidden(t, b, co)``).  Otherwise every
iteration would load and store global memory: nvcc cannot prove the
``__restrict__`` pointer's other accesses distinct.  ``{"registers": False}``
turns this off.

Options (``options=`` of :func:`tcdsl.compile`): ``threads`` (threads per
block, default 256, at most 1024), ``flatten`` (how many nested
coincident loops to map at most, default: all of the perfectly nested ones)
and ``registers`` (accumulators in registers, default True).  For tests,
``{"emulate": True}`` emits the thread-bound loops as serial loops, so that
the mapped program (guards, index arithmetic, registers, host loops) can be
built for the CPU and checked against NumPy on a machine without a GPU.
"""
from __future__ import annotations

import dataclasses

import islpy as isl
from tvm import tirx
from tvm.tirx import ForKind, IterVar

from ..errors import InternalError, TcError
from ..polyhedral.schedule import PARALLEL, fixed_set, mark_bands
from ..syntax import nodes as n
from .cpu import ast_ids, unit_stride
from .expr import INDEX, lower_expr
from .tir import _AstLowering, _statement

_NT = isl.ast_node_type

DEFAULT_THREADS = 256
MAX_THREADS = 1024


def mapping_options(options: dict | None) -> dict:
    """The CUDA mapping options out of ``options=``, checked (other keys are ignored)."""
    options = options or {}
    threads = options.get("threads", DEFAULT_THREADS)
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise TcError(f"options: 'threads' must be an integer from 1 to {MAX_THREADS}, got {threads!r}")
    flatten = options.get("flatten")
    if flatten is not None and (isinstance(flatten, bool) or not isinstance(flatten, int) or flatten < 1):
        raise TcError(f"options: 'flatten' must be a positive integer, got {flatten!r}")
    registers = options.get("registers", True)
    if not isinstance(registers, bool):
        raise TcError(f"options: 'registers' must be True or False, got {registers!r}")
    emulate = options.get("emulate", False)
    if not isinstance(emulate, bool):
        raise TcError(f"options: 'emulate' must be True or False, got {emulate!r}")
    return {"threads": threads, "flatten": flatten, "registers": registers, "emulate": emulate}


def lower_kernel(low, ast: isl.AstNode, options: dict | None = None) -> tirx.Stmt:
    """The host-side TIR of one kernel (see the module docstring).  ``low`` is
    the ``tir._AstLowering`` of the kernel (its statements and environment)."""
    options = mapping_options(options)
    thread = _ThreadLowering(low.gen, low.stmts, low.env, options["registers"])
    return _Launcher(thread, options).host(ast)


def schedule(model, fixed: dict[str, int] | None = None) -> dict[int, isl.Schedule]:
    """One isl schedule per kernel for the GPU mapping (keyed like
    :func:`tcdsl.polyhedral.schedule.schedule`): every dependence as validity,
    proximity and coincidence constraint, as TC does, then every band split
    into one-member bands under ``par``/``seq`` marks.

    isl fuses as much as it can; when that leaves fewer than two outer
    coincident loops over some part of the kernel (the LSTM's gates and
    state update fused into one band parallel in ``b`` only), the kernel is
    also scheduled with outer coincidence and with each strongly connected
    component apart (isl's ``schedule_outer_coincidence`` and
    ``schedule_serialize_sccs``), and the schedule with the most outer
    parallelism (see :func:`outer_parallelism`) wins, the most fused on ties
    -- the spirit of TC's ``Preserve3Coincident`` fusion strategy."""
    fix = fixed_set(model, fixed) if fixed else None
    out = {}
    for i, k in enumerate(model.kernels()):
        dom, deps, context = k.domain, k.deps, k.context
        if fix is not None:
            dom, deps, context = dom.intersect_params(fix), deps.intersect_params(fix), context & fix
        sc = (isl.ScheduleConstraints.on_domain(dom).set_context(context)
              .set_validity(deps).set_coincidence(deps).set_proximity(deps))
        best = sc.compute_schedule()
        depth = outer_parallelism(best.get_root())
        if depth < 2:
            for settings in ({"outer_coincidence": 1}, {"outer_coincidence": 1, "serialize_sccs": 1}):
                other = _with_isl_options(model.ctx, settings, sc.compute_schedule)
                d = outer_parallelism(other.get_root())
                if d > depth:
                    best, depth = other, d
        out[i] = mark_bands(best.get_root()).get_schedule()
    return out


def outer_parallelism(node: isl.ScheduleNode) -> int:
    """The number of outer coincident loops that the mapping can flatten onto
    threads, at the worst place of the schedule tree (sequence and set
    children are launched apart; a band counts its leading coincident
    members, and goes on into a child band when all of its are)."""
    t = node.get_type()
    T = isl.schedule_node_type
    if t == T.band:
        n = node.band_n_member()
        k = 0
        while k < n and node.band_member_get_coincident(k):
            k += 1
        if k == n and node.n_children() and node.child(0).get_type() == T.band:
            return k + outer_parallelism(node.child(0))
        return k
    if t in (T.sequence, T.set):
        return min(outer_parallelism(node.child(c)) for c in range(node.n_children()))
    if t == T.leaf or not node.n_children():
        return 0
    return outer_parallelism(node.child(0))


def _with_isl_options(ctx: isl.Context, settings: dict[str, int], f):
    """``f()`` with isl's ``schedule_<name>`` options set, then restored."""
    saved = {k: getattr(ctx, f"get_schedule_{k}")() for k in settings}
    try:
        for k, v in settings.items():
            getattr(ctx, f"set_schedule_{k}")(v)
        return f()
    finally:
        for k, v in saved.items():
            getattr(ctx, f"set_schedule_{k}")(v)


def thread_axis(tag: str) -> IterVar:
    return IterVar(None, tag, IterVar.ThreadIndex, tag)


class _Launcher:
    def __init__(self, low, options: dict):
        self.low = low
        self.threads = options["threads"]
        self.flatten = options["flatten"]
        self.emulate = options["emulate"]

    # ------------------------------------------------------------ host level
    def host(self, node: isl.AstNode) -> tirx.Stmt:
        t = node.get_type()
        if not _has_par(node):
            return self.single_thread(node)
        if t == _NT.block:
            ch = node.block_get_children()
            return _seq([self.host(ch.get_at(i)) for i in range(ch.n_ast_node())])
        if t == _NT.if_:
            other = self.host(node.if_get_else_node()) if node.if_has_else_node() else None
            return tirx.IfThenElse(self.low._cond(node.if_get_cond()), self.host(node.if_get_then_node()), other)
        if t == _NT.mark:
            inner = node.mark_get_node()
            if node.mark_get_id().get_name() == PARALLEL and inner.get_type() == _NT.for_:
                return self.launch(inner)
            return self.host(inner)
        if t == _NT.for_:
            # a dependence-carrying loop with parallel work inside: a host loop of launches
            name, init, extent = _header(self.low, node)
            v = tirx.Var(name, INDEX)
            with self.low.bound({name: init + v}):
                body = self.host(node.for_get_body())
            return tirx.For(v, 0, extent, ForKind.SERIAL, body)
        raise InternalError(f"unexpected isl AST node {t} at the host level of a CUDA kernel")

    # --------------------------------------------------------------- launches
    def launch(self, loop: isl.AstNode) -> tirx.Stmt:
        """One launch for the coincident loop ``loop`` and the coincident loops
        perfectly nested in it (a rectangular band), flattened onto threads."""
        band = [_header(self.low, loop)]
        body = loop.for_get_body()
        names = {band[0][0]}
        while self.flatten is None or len(band) < self.flatten:
            inner = _par_loop(body)
            if inner is None or _loop_ids(inner) & names:
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
        bx, tx = tirx.Var("bx", INDEX), tirx.Var("tx", INDEX)
        flat = bx * threads + tx
        values, rest = {}, flat
        for name, init, extent in reversed(band[1:]):
            values[name] = init + tirx.truncmod(rest, extent)
            rest = tirx.truncdiv(rest, extent)
        values[band[0][0]] = band[0][1] + rest
        with self.low.bound(values):
            stmt = self.low.node(body, False, None)
        if not (isinstance(total, tirx.IntImm) and total.value % threads == 0):
            stmt = tirx.IfThenElse(flat < total, stmt, None)
        nest = _bind(self.emulate, bx, _simplify(tirx.ceildiv(total, threads)), tx, threads, stmt)
        positive = _simplify(_all([e > 0 for e in extents]))
        if isinstance(positive, tirx.IntImm):
            return nest if positive.value else tirx.Evaluate(tirx.const(0, INDEX))
        return tirx.IfThenElse(positive, nest, None)

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
    return node.for_get_iterator().get_id().get_name(), init, _simplify(extent)


def _par_loop(node: isl.AstNode) -> isl.AstNode | None:
    """The loop of ``node`` if ``node`` is a ``par`` mark directly over a loop."""
    if node.get_type() != _NT.mark or node.mark_get_id().get_name() != PARALLEL:
        return None
    inner = node.mark_get_node()
    return inner if inner.get_type() == _NT.for_ else None


def _loop_ids(loop: isl.AstNode) -> set[str]:
    """Names used by a loop's bounds."""
    return ast_ids(loop.for_get_init()) | ast_ids(loop.for_get_cond().get_op_arg(1))


def _has_par(node: isl.AstNode) -> bool:
    t = node.get_type()
    if t == _NT.mark:
        return node.mark_get_id().get_name() == PARALLEL or _has_par(node.mark_get_node())
    if t == _NT.for_:
        return _has_par(node.for_get_body())
    if t == _NT.if_:
        return _has_par(node.if_get_then_node()) or (node.if_has_else_node() and _has_par(node.if_get_else_node()))
    if t == _NT.block:
        ch = node.block_get_children()
        return any(_has_par(ch.get_at(i)) for i in range(ch.n_ast_node()))
    return False


def _simplify(e: tirx.PrimExpr) -> tirx.PrimExpr:
    from tvm import sym

    return sym.Analyzer().simplify(e)


def _all(conds: list[tirx.PrimExpr]) -> tirx.PrimExpr:
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


def _seq(stmts: list[tirx.Stmt]) -> tirx.Stmt:
    stmts = [s for s in stmts if s is not None]
    if not stmts:
        return tirx.Evaluate(tirx.const(0, INDEX))
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


# ------------------------------------------------- accumulators in registers
class _ThreadLowering(_AstLowering):
    """The AST lowering of code inside a thread, with register promotion
    (see the module docstring): ``_for`` plans it, ``_user`` applies it by
    renaming the promoted accesses of a statement to a local buffer."""

    def __init__(self, gen, stmts, env, registers: bool = True):
        super().__init__(gen, stmts, env)
        self.registers = registers
        self.promoted: dict[str, list[tuple[list, tirx.Buffer]]] = {}  # tensor -> [(indices, local)]

    def _for(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        plan = self._plan(node) if self.registers else []
        if not plan:
            return super()._for(node, parallel_ok, mark)
        buffers = self.gen.sig.buffers
        locals_ = []
        for tensor, idx in plan:
            buf = buffers[tensor]
            local = tirx.decl_buffer((1,), buf.dtype, name=f"{tensor}_acc", scope="local")
            self.promoted.setdefault(tensor, []).append((idx, local))
            locals_.append((buf, idx, local))
        try:
            loop = super()._for(node, parallel_ok, mark)
        finally:
            for tensor, _ in plan:
                self.promoted[tensor].pop()
                if not self.promoted[tensor]:
                    del self.promoted[tensor]
        zero = [tirx.const(0, INDEX)]
        stmts = [tirx.AllocBuffer(local) for _, _, local in locals_]
        stmts += [tirx.BufferStore(local, tirx.BufferLoad(buf, idx), zero) for buf, idx, local in locals_]
        stmts.append(loop)
        stmts += [tirx.BufferStore(buf, tirx.BufferLoad(local, zero), idx) for buf, idx, local in locals_]
        _, _, extent = _header(self, node)
        positive = _simplify(extent > 0)
        if isinstance(positive, tirx.IntImm) and positive.value:
            return tirx.SeqStmt(stmts)
        return tirx.IfThenElse(positive, tirx.SeqStmt(stmts), None)

    def _user(self, call: isl.AstExpr) -> tirx.Stmt:
        if not self.promoted:
            return super()._user(call)
        name = call.get_op_arg(0).get_id().get_name()
        s = self.stmts[name]
        args = [self.expr(call.get_op_arg(i + 1)) for i in range(call.get_op_n_arg() - 1)]
        env = {**self.env, **dict(zip(s.dims, args))}
        buffers = dict(self.gen.sig.buffers)
        zero = (n.Const(value=0, dtype=INDEX),)

        def local_name(tensor: str, indices) -> str | None:
            idx = [lower_expr(e, env, buffers, INDEX) for e in indices]
            for k, (pidx, local) in enumerate(self.promoted.get(tensor, ())):
                if _relation(idx, pidx) == "same":
                    buffers[f"{tensor}#{k}"] = local
                    return f"{tensor}#{k}"
            return None

        def rename(e):
            if isinstance(e, n.Access):
                e = dataclasses.replace(e, indices=tuple(rename(i) for i in e.indices))
                to = local_name(e.tensor, e.indices)
                return dataclasses.replace(e, tensor=to, indices=zero) if to else e
            return _map_children(e, rename)

        c = s.info.comp
        comp = c if s.is_init else dataclasses.replace(c, rhs=rename(c.rhs))  # an init has no rhs to read
        to = local_name(c.tensor, c.indices)
        if to:
            comp = dataclasses.replace(comp, tensor=to, indices=zero)
        s2 = dataclasses.replace(s, info=dataclasses.replace(s.info, comp=comp))
        return _statement(s2, env, buffers)

    def _plan(self, loop: isl.AstNode) -> list[tuple[str, list]]:
        """The (tensor, indices) to keep in registers over ``loop``."""
        inner: list[tirx.Var] = []
        must, accesses = [], []  # (tensor, idx): unconditional writes; every access

        def walk(node: isl.AstNode, direct: bool) -> None:
            t = node.get_type()
            if t == _NT.for_:
                name = node.for_get_iterator().get_id().get_name()
                v = tirx.Var(name, INDEX)
                inner.append(v)
                with self.bound({name: v}):
                    walk(node.for_get_body(), False)
            elif t == _NT.if_:
                walk(node.if_get_then_node(), False)
                if node.if_has_else_node():
                    walk(node.if_get_else_node(), False)
            elif t == _NT.block:
                ch = node.block_get_children()
                for i in range(ch.n_ast_node()):
                    walk(ch.get_at(i), direct)
            elif t == _NT.mark:
                walk(node.mark_get_node(), direct)
            elif t == _NT.user:
                self._accesses(node.user_get_expr(), direct, must, accesses)
            else:
                raise _NoPlan

        name = loop.for_get_iterator().get_id().get_name()
        v = tirx.Var(name, INDEX)
        inner.append(v)
        try:
            with self.bound({name: v}):
                walk(loop.for_get_body(), True)
        except _NoPlan:
            return []
        plan: list[tuple[str, list]] = []
        for tensor, idx in must:
            if tensor in self.promoted or any(t == tensor and _relation(idx, i) == "same" for t, i in plan):
                continue
            if any(_uses(e, inner) for e in idx):
                continue
            if all(_relation(idx, i) in ("same", "distinct") for t, i in accesses if t == tensor):
                plan.append((tensor, idx))
        return plan

    def _accesses(self, call: isl.AstExpr, direct: bool, must: list, accesses: list) -> None:
        s = self.stmts[call.get_op_arg(0).get_id().get_name()]
        args = [self.expr(call.get_op_arg(i + 1)) for i in range(call.get_op_n_arg() - 1)]
        env = {**self.env, **dict(zip(s.dims, args))}
        buffers = self.gen.sig.buffers
        c = s.info.comp
        write = (c.tensor, [lower_expr(e, env, buffers, INDEX) for e in c.indices])
        accesses.append(write)
        if direct:
            must.append(write)

        def reads(e) -> None:
            if isinstance(e, n.Access):
                accesses.append((e.tensor, [lower_expr(i, env, buffers, INDEX) for i in e.indices]))
            _map_children(e, lambda x: (reads(x), x)[1])

        if not s.is_init:
            reads(c.rhs)


class _NoPlan(Exception):
    """Something in the loop that the promotion does not analyse."""


def _map_children(e, f):
    """``e`` with ``f`` applied to its direct sub-expressions (tcdsl nodes)."""
    changes = {}
    for fld in dataclasses.fields(e):
        v = getattr(e, fld.name)
        if isinstance(v, n.Expr):
            changes[fld.name] = f(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, n.Expr) for x in v):
            changes[fld.name] = tuple(f(x) for x in v)
    return dataclasses.replace(e, **changes) if changes else e


def _relation(a: list, b: list) -> str:
    """"same" (equal in every dimension), "distinct" (provably differ in
    some dimension) or "unknown", for two index lists of one tensor."""
    if len(a) != len(b):
        return "unknown"
    same = True
    for x, y in zip(a, b):
        d = _simplify(x - y)
        if isinstance(d, tirx.IntImm):
            if d.value != 0:
                return "distinct"
        else:
            same = False
    return "same" if same else "unknown"


def _uses(e: tirx.PrimExpr, vs: list[tirx.Var]) -> bool:
    from tvm.tirx.analysis import undefined_vars

    free = undefined_vars(e)
    return any(v.same_as(f) for v in vs for f in free)
