"""The code inside a CUDA thread: accumulators in registers, and a sum split
across the lanes of a warp.  :mod:`tcdsl.codegen.cuda` maps the loops of a
kernel onto launches and threads; :class:`ThreadLowering` lowers what one
thread (or one group of lanes) runs.

Accumulators in registers: inside a thread, a serial loop whose body writes a
location that does not move with the loop (``C(m, n)`` in ``for k: C(m, n) +=
A(m, k) * B(k, n)``) keeps that location in a local variable for the loop --
loaded before, stored after, guarded by ``extent > 0`` -- when the write is
unconditional in the loop body and every other access of that tensor in the
loop is provably to another element (``hidden(t-1, b, c)`` against
``hidden(t, b, co)``).  Otherwise every iteration would load and store global
memory: nvcc cannot prove the ``__restrict__`` pointer's other accesses
distinct.  ``{"registers": False}`` turns this off.

Lanes (``split``, default False, inside a persistent launch): a phase with fewer outputs than
the block has threads (the batch-1 RNN step: 128 outputs, 1024 threads) gives
each output a group of ``g`` consecutive lanes of a warp, ``g`` the largest
power of two up to 32 with ``outputs * g <= threads`` (computed from the
sizes, at the call).  A register-accumulated loop of the phase whose body only
adds (or multiplies) into its accumulators -- a sum ``+=`` or product ``*=``,
nothing else written, the accumulated elements read nowhere else in the loop
-- runs its iterations ``lane, lane + g, ...`` on the group's lanes (``UNROLL``
per trip of the loop: nvcc left it rolled), each lane
from the operator's identity (lane 0 from the element's value), and the
partial values are combined by ``__shfl_down_sync`` within the group (at most
five steps); lane 0 stores the result.  Everything else of the phase runs on
lane 0 alone, as it ran on the output's thread before.  A group's lanes take
the same branch at every condition of the phase (those depend on the output,
the loop variables and the sizes, never on the lane), so each shuffle is met
by the whole group, whose lanes it names in its mask.  Only the order of the
sum changes.  Emulated on the CPU (``emulate``) there are no lanes (``g =
1``).  On an H100 it measured slower than a thread per output (docs/cuda.md,
section 1), hence off by default; it stays in the tuner's space.
"""
from __future__ import annotations

import contextlib
import dataclasses

import islpy as isl
from tvm import tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT as _NT, iterator
from ..syntax import nodes as n
from .expr import INDEX, lower_expr
from .lower import AstLowering, emit_statement, uses

WARP = 32
UNROLL = 4  # a lane's iterations per trip of its loop (a power of two)
# the accumulations a group of lanes may split: operator -> identity
_IDENTITY = {"+": 0, "*": 1}


@dataclasses.dataclass(frozen=True)
class Lanes:
    """The lanes of one output inside a phase: ``lane`` (0 to ``g - 1``) and
    ``log2`` of the group size ``g`` (expressions of the thread index and the
    sizes), and the warp lane of the thread (for the shuffles' masks)."""

    lane: tirx.PrimExpr
    log2: tirx.PrimExpr
    warp_lane: tirx.PrimExpr

    @property
    def size(self) -> tirx.PrimExpr:
        return simplify(tirx.const(1, INDEX) << self.log2)


def group_log2(total: tirx.PrimExpr, threads: int) -> tirx.PrimExpr:
    """log2 of the largest power of two ``g <= 32`` with ``total * g <=
    threads`` (0 where ``total`` exceeds ``threads / 2``)."""
    out = tirx.const(0, INDEX)
    for k in range(1, 6):  # the last test that holds decides
        out = tirx.Select(total * (1 << k) <= threads, tirx.const(k, INDEX), out)
    return simplify(out)


class ThreadLowering(AstLowering):
    """The AST lowering of code inside a thread, with register promotion
    (see the module docstring): ``_for`` plans it, ``_user`` applies it by
    renaming the promoted accesses of a statement to a local buffer; inside
    :meth:`lanes`, the split of a phase's sums across lanes."""

    def __init__(self, gen, stmts, env, registers: bool = True):
        super().__init__(gen, stmts, env)
        self.registers = registers
        self.promoted: dict[str, list[tuple[list, tirx.Buffer]]] = {}  # tensor -> [(indices, local)]
        self.split: Lanes | None = None  # lowering a phase's code outside its split loops
        self.splits = 0  # loops split so far

    @contextlib.contextmanager
    def lanes(self, lanes: Lanes | None):
        """Lower a phase's body with its sums split across ``lanes`` (None:
        one thread per output)."""
        saved, self.split = self.split, lanes
        try:
            yield
        finally:
            self.split = saved

    def node(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        if self.split is None:
            return super().node(node, parallel_ok, mark)
        t = node.get_type()
        if t == _NT.for_:
            plan = self._plan(node) if self.registers else []
            ops = self._split_ops(node, plan) if plan else None
            if ops:
                self.splits += 1
                return self._split_for(node, plan, ops)
        if t in (_NT.for_, _NT.user):  # on lane 0 alone, as the output's thread ran it
            with self.lanes(None):
                stmt = super().node(node, parallel_ok, mark)
            return tirx.IfThenElse(self.split.lane == 0, stmt, None)
        return super().node(node, parallel_ok, mark)  # if, block, mark: the same for the group's lanes

    def _for(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        plan = self._plan(node) if self.registers else []
        if not plan:
            return super()._for(node, parallel_ok, mark)
        with self._promoting(plan) as locals_:
            loop = super()._for(node, parallel_ok, mark)
        zero = [tirx.const(0, INDEX)]
        stmts = [tirx.AllocBuffer(local) for _, _, local in locals_]
        stmts += [tirx.BufferStore(local, tirx.BufferLoad(buf, idx), zero) for buf, idx, local in locals_]
        stmts.append(loop)
        stmts += [tirx.BufferStore(buf, tirx.BufferLoad(local, zero), idx) for buf, idx, local in locals_]
        return self._if_iterates(node, tirx.SeqStmt(stmts))

    @contextlib.contextmanager
    def _promoting(self, plan: list[tuple[str, list]]):
        """The local buffers of ``plan``'s accumulators, (tensor's buffer,
        indices, local) each, promoted while the context lasts."""
        buffers = self.gen.sig.buffers
        locals_ = []
        for tensor, idx in plan:
            buf = buffers[tensor]
            local = tirx.decl_buffer((1,), buf.dtype, name=f"{tensor}_acc", scope="local")
            self.promoted.setdefault(tensor, []).append((idx, local))
            locals_.append((buf, idx, local))
        try:
            yield locals_
        finally:
            for tensor, _ in plan:
                self.promoted[tensor].pop()
                if not self.promoted[tensor]:
                    del self.promoted[tensor]

    def _if_iterates(self, node: isl.AstNode, stmt: tirx.Stmt) -> tirx.Stmt:
        """``stmt`` where the loop ``node`` has an iteration."""
        _, extent = self.loop_range(node)
        positive = simplify(extent > 0)
        if isinstance(positive, tirx.IntImm) and positive.value:
            return stmt
        return tirx.IfThenElse(positive, stmt, None)

    # ------------------------------------------------------------ lanes
    def _split_ops(self, loop: isl.AstNode, plan: list[tuple[str, list]]) -> list[str] | None:
        """The operator of each of ``plan``'s accumulators where the
        register-accumulated ``loop`` only accumulates into them, with one
        splittable operator each (module docstring); else None."""
        if self.loop_step(loop) != 1:
            return None
        found = self._survey(loop)
        if found is None:
            return None
        writes, reads = found
        ops: dict[int, str] = {}
        for tensor, idx, op in writes:
            k = next((k for k, (t, i) in enumerate(plan) if t == tensor and _relation(idx, i) == "same"), None)
            if k is None or op not in _IDENTITY or ops.setdefault(k, op) != op:
                return None
        if len(ops) != len(plan):
            return None
        if any(_relation(idx, i) != "distinct" for tensor, idx in reads for t, i in plan if t == tensor):
            return None
        return [ops[k] for k in range(len(plan))]

    def _split_for(self, loop: isl.AstNode, plan: list[tuple[str, list]], ops: list[str]) -> tirx.Stmt:
        lanes = self.split
        g = lanes.size
        name = iterator(loop)
        init, extent = self.loop_range(loop)
        # the lane's iterations (the loop has one, checked below: extent - lane + g - 1 >= 0)
        count = simplify(tirx.shift_right(extent - lanes.lane + g - 1, lanes.log2))
        q, r = tirx.Var(f"{name}_q", INDEX), tirx.Var(f"{name}_r", INDEX)
        with self._promoting(plan) as locals_, self.lanes(None):
            def at(c: tirx.PrimExpr) -> tirx.Stmt:  # the lane's iteration c
                with self.bound({name: init + lanes.lane + c * g}):
                    return self.node(loop.for_get_body(), False, None)
            # UNROLL iterations per trip, their loads independent: nvcc left the loop rolled
            main = tirx.For(q, 0, tirx.shift_right(count, UNROLL.bit_length() - 1), tirx.ForKind.SERIAL,
                            tirx.SeqStmt([at(q * UNROLL + u) for u in range(UNROLL)]))
            rest = tirx.For(r, 0, tirx.bitwise_and(count, UNROLL - 1), tirx.ForKind.SERIAL,
                            at(tirx.shift_right(count, UNROLL.bit_length() - 1) * UNROLL + r))
        zero = [tirx.const(0, INDEX)]
        first = lanes.lane == 0
        stmts = [tirx.AllocBuffer(local) for _, _, local in locals_]
        for (buf, idx, local), op in zip(locals_, ops):
            stmts.append(tirx.IfThenElse(first, tirx.BufferStore(local, tirx.BufferLoad(buf, idx), zero),
                                         tirx.BufferStore(local, tirx.const(_IDENTITY[op], buf.dtype), zero)))
        stmts += [main, rest]
        mask = _group_mask(lanes, g)
        for off in (16, 8, 4, 2, 1):
            step = []
            for (buf, idx, local), op in zip(locals_, ops):
                mine = tirx.BufferLoad(local, zero)
                other = tirx.call_intrin(buf.dtype, "tirx.tvm_warp_shuffle_down", mask, mine, off, g, WARP)
                step.append(tirx.BufferStore(local, mine + other if op == "+" else mine * other, zero))
            cond = simplify(g > off)
            if not (isinstance(cond, tirx.IntImm) and not cond.value):
                stmts.append(tirx.IfThenElse(cond, tirx.SeqStmt(step) if len(step) > 1 else step[0], None))
        stores = [tirx.BufferStore(buf, tirx.BufferLoad(local, zero), idx) for buf, idx, local in locals_]
        stmts.append(tirx.IfThenElse(first, tirx.SeqStmt(stores) if len(stores) > 1 else stores[0], None))
        return self._if_iterates(loop, tirx.SeqStmt(stmts))

    # ------------------------------------------------- accumulators in registers
    def _user(self, call: isl.AstExpr) -> tirx.Stmt:
        if not self.promoted:
            return super()._user(call)
        name = isl_ast.statement(call)
        s = self.stmts[name]
        args = [self.expr(x) for x in isl_ast.args(call)[1:]]
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
        return emit_statement(s2, env, buffers)

    def _plan(self, loop: isl.AstNode) -> list[tuple[str, list]]:
        """The (tensor, indices) to keep in registers over ``loop``."""
        found = self._survey(loop, must := [], inner := [])
        if found is None:
            return []
        writes, reads = found
        accesses = [(t, i) for t, i, _ in writes] + reads
        plan: list[tuple[str, list]] = []
        for tensor, idx in must:
            if tensor in self.promoted or any(t == tensor and _relation(idx, i) == "same" for t, i in plan):
                continue
            if any(uses(e, v) for e in idx for v in inner):
                continue
            if all(_relation(idx, i) in ("same", "distinct") for t, i in accesses if t == tensor):
                plan.append((tensor, idx))
        return plan

    def _survey(self, loop: isl.AstNode, must: list | None = None, inner: list | None = None):
        """The writes (tensor, indices, operator: None for ``=`` and inits)
        and the reads (tensor, indices) of the statements in ``loop``, with
        the loop variables symbolic; the writes done at every iteration go to
        ``must``, the loop variables to ``inner``.  None: something the
        survey does not analyse."""
        must = [] if must is None else must
        inner = [] if inner is None else inner
        writes, reads = [], []

        def walk(node: isl.AstNode, direct: bool) -> None:
            t = node.get_type()
            if t == _NT.for_:
                name = iterator(node)
                v = tirx.Var(name, INDEX)
                inner.append(v)
                with self.bound({name: v}):
                    walk(node.for_get_body(), False)
            elif t == _NT.if_:
                walk(node.if_get_then_node(), False)
                if node.if_has_else_node():
                    walk(node.if_get_else_node(), False)
            elif t == _NT.block:
                for x in isl_ast.children(node):
                    walk(x, direct)
            elif t == _NT.mark:
                walk(node.mark_get_node(), direct)
            elif t == _NT.user:
                self._accesses(node.user_get_expr(), direct, must, writes, reads)
            else:
                raise _NoPlan

        name = iterator(loop)
        v = tirx.Var(name, INDEX)
        inner.append(v)
        try:
            with self.bound({name: v}):
                walk(loop.for_get_body(), True)
        except _NoPlan:
            return None
        return writes, reads

    def _accesses(self, call: isl.AstExpr, direct: bool, must: list, writes: list, reads: list) -> None:
        s = self.stmts[isl_ast.statement(call)]
        args = [self.expr(x) for x in isl_ast.args(call)[1:]]
        env = {**self.env, **dict(zip(s.dims, args))}
        buffers = self.gen.sig.buffers
        c = s.info.comp
        idx = [lower_expr(e, env, buffers, INDEX) for e in c.indices]
        writes.append((c.tensor, idx, None if s.is_init else c.reduction))
        if direct:
            must.append((c.tensor, idx))

        def read(e) -> None:
            if isinstance(e, n.Access):
                reads.append((e.tensor, [lower_expr(i, env, buffers, INDEX) for i in e.indices]))
            _map_children(e, lambda x: (read(x), x)[1])

        if not s.is_init:
            read(c.rhs)


class _NoPlan(Exception):
    """Something in the loop that the promotion does not analyse."""


def _group_mask(lanes: Lanes, g: tirx.PrimExpr) -> tirx.PrimExpr:
    """The warp lanes of the thread's group: ``g`` bits from the group's
    first lane."""
    u = "uint32"
    first = tirx.bitwise_and(lanes.warp_lane, tirx.bitwise_not(g - 1))
    ones = tirx.shift_right(tirx.const(0xFFFFFFFF, u), (WARP - g).astype(u))
    return simplify(tirx.shift_left(ones, first.astype(u)))


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
        d = simplify(x - y)
        if isinstance(d, tirx.IntImm):
            if d.value != 0:
                return "distinct"
        else:
            same = False
    return "same" if same else "unknown"


def simplify(e: tirx.PrimExpr) -> tirx.PrimExpr:
    """``e`` simplified by TVM's analyzer."""
    from tvm import sym

    return sym.Analyzer().simplify(e)
