"""The code inside a CUDA thread: accumulators in registers, and sums split
into parts across a persistent block's threads.  :mod:`tcdsl.codegen.cuda`
maps the loops of a kernel onto launches and threads; :class:`ThreadLowering`
lowers what one thread runs.

Accumulators in registers: inside a thread, a serial loop whose body writes a
location that does not move with the loop (``C(m, n)`` in ``for k: C(m, n) +=
A(m, k) * B(k, n)``) keeps that location in a local variable for the loop --
loaded before, stored after, guarded by ``extent > 0`` -- when the write is
unconditional in the loop body and every other access of that tensor in the
loop is provably to another element (``hidden(t-1, b, c)`` against
``hidden(t, b, co)``).  Otherwise every iteration would load and store global
memory: nvcc cannot prove the ``__restrict__`` pointer's other accesses
distinct.  ``{"registers": False}`` turns this off.

Parts (``split``, default False, inside a persistent launch): a phase with at
most half as many outputs as the block has threads (the batch-1 RNN step: 128
outputs, 1024 threads) runs in two halves around a barrier.  Thread ``tx``
takes output ``tx % outputs`` and part ``p = tx / outputs`` of ``P`` (the
largest power of two up to 32 with ``outputs * P <= threads``, from the sizes
at the call): consecutive threads take consecutive outputs, so a warp reads a
weight ``W(k, o)`` as one output per thread does.  First, each part computes
its share ``k = p, p + P, ...`` of every split sum into a register, from the
operator's identity, and stores it to shared memory; after the barrier, part 0
runs the phase as one thread per output, each split loop replaced by the
element's value combined with the ``P`` partial values, in order.  A loop is
split where it is at the top of the phase (under no other loop) and only adds
(or multiplies) into its register accumulators -- a sum ``+=`` or product
``*=``, nothing else written, the accumulated elements read nowhere else in
the loop -- and reads nothing the phase writes (checked index by index: the
Elman step reads ``hidden(t - 1, b, k)`` and writes ``hidden(t, b, co)``), so
computing it before the phase's other statements changes nothing but the
order of the sum.  Shared memory holds one value per thread and accumulator.
Emulated on the CPU (``emulate``) there are no parts.  Section 5 of
docs/cuda.md has the measurements.
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
from .lower import AstLowering, emit_statement, seq, uses

# the accumulations a phase may split: operator -> identity
_IDENTITY = {"+": 0, "*": 1}
_NOTHING = tirx.Evaluate(tirx.const(0, "int32"))  # a statement the first half of a split phase leaves out


@dataclasses.dataclass(frozen=True)
class Parts:
    """How a phase's sums are split (module docstring): the thread's part
    ``p`` of ``count`` (``2 ** log2``), its slot ``tx`` and output ``out`` of ``total``, the
    split loops' (plan, operators) in the order of :func:`_top_loops` (None
    for a loop that is not split), the shared buffers (one per accumulator,
    in that order), and ``combine``: lowering the second half."""

    p: tirx.PrimExpr
    count: tirx.PrimExpr
    log2: tirx.PrimExpr
    tx: tirx.PrimExpr
    out: tirx.PrimExpr
    total: tirx.PrimExpr
    loops: list
    slots: list
    combine: bool = False


def parts_count(total: tirx.PrimExpr, threads: int, log2: bool = False) -> tirx.PrimExpr:
    """The largest power of two ``P <= 32`` with ``total * P <= threads``
    (1 where ``total`` exceeds ``threads / 2``); with ``log2``, its log2."""
    out = tirx.const(0 if log2 else 1, INDEX)
    for k in range(1, 6):  # the last test that holds decides
        out = tirx.Select(total * (1 << k) <= threads, tirx.const(k if log2 else 1 << k, INDEX), out)
    return simplify(out)


class ThreadLowering(AstLowering):
    """The AST lowering of code inside a thread, with register promotion
    (see the module docstring): ``_for`` plans it, ``_user`` applies it by
    renaming the promoted accesses of a statement to a local buffer; inside
    :meth:`splitting`, one half of a phase whose sums are split into parts."""

    def __init__(self, gen, stmts, env, registers: bool = True):
        super().__init__(gen, stmts, env)
        self.registers = registers
        self.promoted: dict[str, list[tuple[list, tirx.Buffer]]] = {}  # tensor -> [(indices, local)]
        self.parts: Parts | None = None  # lowering a half of a phase whose sums are split
        self._top = 0  # top loops of the phase met so far
        self._depth = 0  # loops around the node being lowered, inside the phase

    @contextlib.contextmanager
    def splitting(self, parts: Parts | None):
        """Lower a phase's body as one half of ``parts`` (None: one thread per
        output, as inside a split loop)."""
        saved = self.parts, self._top, self._depth
        self.parts, self._top, self._depth = parts, 0, 0
        try:
            yield
        finally:
            self.parts, self._top, self._depth = saved

    def node(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        parts = self.parts
        if parts is None:
            return super().node(node, parallel_ok, mark)
        t = node.get_type()
        if t == _NT.for_ and self._depth == 0:
            k, self._top = self._top, self._top + 1
            if parts.loops[k] is not None:
                return (self._combined if parts.combine else self._partial)(node, k)
        if not parts.combine and t in (_NT.for_, _NT.user):  # the first half computes the split sums only
            return _NOTHING
        if not parts.combine and t == _NT.block:
            stmts = [self.node(x, parallel_ok, None) for x in _children(node)]
            return seq([x for x in stmts if x is not _NOTHING] or [_NOTHING])
        if t == _NT.for_:
            self._depth += 1
            try:
                return super().node(node, parallel_ok, mark)
            finally:
                self._depth -= 1
        return super().node(node, parallel_ok, mark)  # if, block, mark, user: as written

    def split_loops(self, body: isl.AstNode) -> list | None:
        """For each loop at the top of a phase's ``body`` (under no other loop,
        in order) its (plan, operators) where it splits (module docstring),
        else None; None where none splits."""
        if not self.registers:
            return None
        writes = self._writes(body)
        if writes is None:
            return None
        loops = []
        for loop in _top_loops(body):
            plan = self._plan(loop)
            ops = self._split_ops(loop, plan) if plan else None
            if ops:
                _, reads = self._survey(loop)
                if any(t == w and _relation(idx, widx) != "distinct" for t, idx in reads for w, widx in writes):
                    ops = None  # it reads what the phase writes: in the phase's order, on one thread
            loops.append((plan, ops) if ops else None)
        return loops if any(x is not None for x in loops) else None

    def _writes(self, body: isl.AstNode) -> list[tuple[str, list]] | None:
        """The (tensor, indices) written by the statements of ``body``, the
        loop variables symbolic; None: something :meth:`_walk` does not
        analyse."""
        writes: list = []
        try:
            self._walk(body, False, [], [], writes, [])
        except _NoPlan:
            return None
        return [(tensor, idx) for tensor, idx, _ in writes]

    def _partial(self, loop: isl.AstNode, k: int) -> tirx.Stmt:
        """The first half of split loop ``k``: this part's share of its sums,
        from the identity, stored to the thread's slot."""
        parts = self.parts
        plan, ops = self._plan(loop), parts.loops[k][1]  # the plan's indices as bound here
        name = iterator(loop)
        init, extent = self.loop_range(loop)
        count = simplify(tirx.shift_right(tirx.max(extent - parts.p + parts.count - 1, 0), parts.log2))
        c = tirx.Var(f"{name}_p", INDEX)
        with self._promoting(plan) as locals_, self.splitting(None):
            with self.bound({name: init + parts.p + c * parts.count}):
                body = self.node(loop.for_get_body(), False, None)
        zero = [tirx.const(0, INDEX)]
        stmts = [tirx.AllocBuffer(local) for _, _, local in locals_]
        stmts += [tirx.BufferStore(local, tirx.const(_IDENTITY[op], buf.dtype), zero)
                  for (buf, _, local), op in zip(locals_, ops)]
        stmts.append(tirx.For(c, 0, count, tirx.ForKind.SERIAL, body))
        slots = self._slots(k)
        stmts += [tirx.BufferStore(slot, tirx.BufferLoad(local, zero), [parts.tx])
                  for slot, (_, _, local) in zip(slots, locals_)]
        return tirx.SeqStmt(stmts)

    def _combined(self, loop: isl.AstNode, k: int) -> tirx.Stmt:
        """The second half of split loop ``k``: each accumulated element
        combined with the parts' values, in order, where the loop has an
        iteration."""
        parts = self.parts
        plan, ops = self._plan(loop), parts.loops[k][1]
        q = tirx.Var(f"{iterator(loop)}_q", INDEX)
        zero = [tirx.const(0, INDEX)]
        locals_ = self._locals(plan)
        stmts = [tirx.AllocBuffer(local) for _, _, local in locals_]
        stmts += [tirx.BufferStore(local, tirx.BufferLoad(buf, idx), zero) for buf, idx, local in locals_]
        adds = []
        for slot, (buf, idx, local), op in zip(self._slots(k), locals_, ops):
            mine, other = tirx.BufferLoad(local, zero), tirx.BufferLoad(slot, [q * parts.total + parts.out])
            adds.append(tirx.BufferStore(local, mine + other if op == "+" else mine * other, zero))
        stmts.append(tirx.For(q, 0, parts.count, tirx.ForKind.SERIAL, seq(adds)))
        stmts += [tirx.BufferStore(buf, tirx.BufferLoad(local, zero), idx) for buf, idx, local in locals_]
        return self._if_iterates(loop, tirx.SeqStmt(stmts))

    def _slots(self, k: int) -> list[tirx.Buffer]:
        """The shared buffers of split loop ``k``'s accumulators."""
        first = sum(len(x[0]) for x in self.parts.loops[:k] if x is not None)
        return self.parts.slots[first:first + len(self.parts.loops[k][0])]

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
        locals_ = self._locals(plan)
        for (tensor, _), (_, idx, local) in zip(plan, locals_):
            self.promoted.setdefault(tensor, []).append((idx, local))
        try:
            yield locals_
        finally:
            for tensor, _ in plan:
                self.promoted[tensor].pop()
                if not self.promoted[tensor]:
                    del self.promoted[tensor]

    def _locals(self, plan: list[tuple[str, list]]) -> list[tuple[tirx.Buffer, list, tirx.Buffer]]:
        """(tensor's buffer, indices, a one-element local buffer) for each of
        ``plan``'s accumulators."""
        buffers = self.gen.sig.buffers
        return [(buffers[tensor], idx, tirx.decl_buffer((1,), buffers[tensor].dtype, name=f"{tensor}_acc",
                                                         scope="local"))
                for tensor, idx in plan]

    def _if_iterates(self, node: isl.AstNode, stmt: tirx.Stmt) -> tirx.Stmt:
        """``stmt`` where the loop ``node`` has an iteration."""
        _, extent = self.loop_range(node)
        positive = simplify(extent > 0)
        if isinstance(positive, tirx.IntImm) and positive.value:
            return stmt
        return tirx.IfThenElse(positive, stmt, None)

    # ------------------------------------------------------------ parts
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
        name = iterator(loop)
        v = tirx.Var(name, INDEX)
        inner.append(v)
        try:
            with self.bound({name: v}):
                self._walk(loop.for_get_body(), True, must, inner, writes, reads)
        except _NoPlan:
            return None
        return writes, reads

    def _walk(self, node: isl.AstNode, direct: bool, must: list, inner: list, writes: list, reads: list) -> None:
        """:meth:`_accesses` of every statement of ``node``, its loops'
        variables symbolic (added to ``inner``); ``direct``: ``node`` runs
        at every iteration of the loop around it.  _NoPlan: a node it does
        not analyse."""
        t = node.get_type()
        if t == _NT.for_:
            name = iterator(node)
            v = tirx.Var(name, INDEX)
            inner.append(v)
            with self.bound({name: v}):
                self._walk(node.for_get_body(), False, must, inner, writes, reads)
        elif t == _NT.if_:
            for x in _children(node):
                self._walk(x, False, must, inner, writes, reads)
        elif t in (_NT.block, _NT.mark):
            for x in _children(node):
                self._walk(x, direct, must, inner, writes, reads)
        elif t == _NT.user:
            self._accesses(node.user_get_expr(), direct, must, writes, reads)
        else:
            raise _NoPlan

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


def _children(node: isl.AstNode) -> list[isl.AstNode]:
    """The nodes directly under an ``if``, block or mark."""
    t = node.get_type()
    if t == _NT.if_:
        return [node.if_get_then_node()] + ([node.if_get_else_node()] if node.if_has_else_node() else [])
    if t == _NT.block:
        return list(isl_ast.children(node))
    if t == _NT.mark:
        return [node.mark_get_node()]
    return []


def _top_loops(node: isl.AstNode):
    """The loops of ``node`` under no other loop, in the order of the AST."""
    if node.get_type() == _NT.for_:
        yield node
        return
    for x in _children(node):
        yield from _top_loops(x)


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
