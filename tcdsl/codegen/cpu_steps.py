"""Pieces of the CPU lowering for a sequential ``for`` run inside its kernel's
parallel loop (``par_steps``, :meth:`tcdsl.codegen.cpu.CpuProgram.sequential`).

* :func:`branch_loop`: a step that branches on the loop variable (isl tests
  the condition outside the branches' loops, polyhedral/branches.py) as one
  loop whose body holds the test, so that the steps can run inside it.
* :func:`strided_rows` / ``STEP_ROWS``: a row whose step is a single element
  at a stride (a batch of rows scanned along their last axis, ``s(b, t) =
  s(b, t - 1) + x(b, t)``) runs its steps in blocks of a few rows: the steps
  of a whole chunk of rows touched a cache line per row at every step, all
  at one stride (a power of two aliases them onto one cache set).
* :func:`nested_steps`, :func:`steps_wrap`: ``for t { for s { kernel } }``
  with both loops inside the kernel's parallel loop, where the schedule found
  the steps of both independent at each row (``STEPS_DEEP``: a cascade of
  biquad sections inside the samples of each channel, one parallel region
  per call instead of one per sample).
* :func:`step_rows`: two parallel loops over such rows (a (B, C, L) batch
  scanned along L) as one loop over their product, so that the blocks are
  of rows (b, c).
"""
from __future__ import annotations

import islpy as isl
from tvm import tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT, iterator, loop_ids, strip_marks
from ..polyhedral.model import ForLoop, Kernel
from ..polyhedral.schedule import PARALLEL, STEPS_DEEP
from ..syntax import nodes as n
from .collapse import collapse, declarations, merged_rows
from .expr import INDEX, lower_expr
from .lower import from_zero

# Rows whose steps run together when each step of a row is one strided
# element (a cumsum of 256 rows x 1024 along the rows on a 2-core AMD EPYC,
# medians of 30 calls: 0.97 ms with the whole chunk of 128 rows at each step, 0.24 ms in blocks
# of 4, 0.30 with 8, 0.44 with 1).
STEP_ROWS = 4


class WithBody:
    """A loop node as the lowering sees it, with another body."""

    def __init__(self, node: isl.AstNode, body):
        self._node, self._body = node, body

    def for_get_body(self):
        return self._body

    def __getattr__(self, attr):
        return getattr(self._node, attr)


class _If:
    """An ``if`` node whose branches are other nodes (the bodies of the loops
    that isl put in its branches)."""

    def __init__(self, node: isl.AstNode, then, other):
        self._node, self._then, self._other = node, then, other

    def get_type(self):
        return NT.if_

    def if_get_cond(self) -> isl.AstExpr:
        return self._node.if_get_cond()

    def if_get_then_node(self):
        return self._then

    def if_has_else_node(self) -> bool:
        return self._other is not None

    def if_get_else_node(self):
        return self._other


class _Mark:
    """A mark node above another node."""

    def __init__(self, name: str, node):
        self._name, self._node = name, node

    def get_type(self):
        return NT.mark

    def mark_get_id(self) -> isl.Id:
        return isl.Id(self._name)

    def mark_get_node(self):
        return self._node


def branch_loop(node: isl.AstNode, mark: str | None = None):
    """``if (c) { for i ... A } else { for i ... B }`` (also ``else if``
    chains; isl hoisted conditions on the parameters only), the loops alike
    (iterator, bounds, stride), as ``for i { if (c) A else B }``; None otherwise.
    With ``mark``, every loop must be right below a mark of that name, and
    the loop comes back below one."""
    loops = []

    def swapped(x):
        bare, found = strip_marks(x)
        if bare.get_type() == NT.for_:
            if mark is not None and found != mark:
                return None
            loops.append(bare)
            return bare.for_get_body()
        if bare.get_type() != NT.if_:
            return None
        then = swapped(bare.if_get_then_node())
        other = swapped(bare.if_get_else_node()) if bare.if_has_else_node() else None
        if then is None or bare.if_has_else_node() and other is None:
            return None
        return _If(bare, then, other)

    body = swapped(node)
    if body is None or not isinstance(body, _If) or len({_signature(x) for x in loops}) != 1:
        return None
    return WithBody(loops[0], body) if mark is None else _Mark(mark, WithBody(loops[0], body))


def _signature(loop: isl.AstNode) -> tuple[str, ...]:
    return (iterator(loop),) + tuple(e.to_C_str() for e in (loop.for_get_init(), loop.for_get_cond(), loop.for_get_inc()))


def step_rows(chunked, node: isl.AstNode, name: str, init: tirx.PrimExpr, extent: tirx.PrimExpr) -> tirx.Stmt | None:
    """The chunks of a :class:`~tcdsl.codegen.cpu.ChunkedLoop` with the steps
    inside, over the rows of its loop and the parallel loop below it (also
    through a branch on the step) as one, when the two collapse
    (codegen/collapse.py) into rows that are each one strided element per
    step; else None.  A scan of a (B, C, L) batch along L then runs the
    steps of the rows (b, c) in blocks of STEP_ROWS: each step of a row b
    alone touched C cache lines on C pages (8 x 64 x 1024: 2.8 -> 0.75 ms)."""
    inner, _ = strip_marks(node.for_get_body())
    if inner.get_type() == NT.if_:
        inner = branch_loop(inner, PARALLEL)
        if inner is None:
            return None
        node = WithBody(node, inner)
    steps = chunked.low.step_vars
    bare, _ = strip_marks(inner)
    if bare.get_type() == NT.for_ and set(steps) & loop_ids(bare):  # rows that change from step to step
        return None
    with chunked.low.bound({x: tirx.Var(x, INDEX) for x in steps}):
        merged = collapse(chunked.low, node, name, init)
    if merged is None:
        return None
    inner_body, inner_name, inner_extent, views = merged
    written = [m for t, m in views.items() if t in {x.info.comp.tensor for x in chunked.low.kernel.stmts}]
    if isl_ast.has(inner_body, isl_ast.is_loop) or not written or any(
            m.dim + 2 == len(m.tensor.shape) for m in written):  # rows of stride 1: vector steps serve them
        return None
    with merged_rows(chunked.low, views, inner_name):
        rows = tirx.max(extent, 0) * tirx.max(inner_extent, 0)
        return tirx.SeqStmt(declarations(views) + [chunked._chunks(inner_body, name, init, rows)])


def stride_one_stores(stmt: tirx.Stmt, v: tirx.Var) -> bool:
    """Every store's last index moves by exactly 1 with ``v``."""
    from tvm import sym as arith

    found = list(stores(stmt))
    for x in found:
        if not x.indices:
            return False
        coeffs = arith.detect_linear_equation(x.indices[-1], [v])
        if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm) or coeffs[0].value != 1:
            return False
    return bool(found)


def strided_rows(stmt: tirx.Stmt, r: str) -> bool:
    """Some loop named ``r`` in ``stmt`` stores at a stride other than 1."""
    if isinstance(stmt, tirx.For) and stmt.loop_var.name == r:
        return not stride_one_stores(stmt.body, stmt.loop_var)
    return any(strided_rows(x, r) for x in _children(stmt))


def stores(stmt: tirx.Stmt):
    """The BufferStores in a statement built by the CPU lowering."""
    if isinstance(stmt, tirx.BufferStore):
        yield stmt
    for x in _children(stmt):
        yield from stores(x)


def _children(stmt: tirx.Stmt) -> list[tirx.Stmt]:
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, tirx.IfThenElse):
        return [stmt.then_case] + ([stmt.else_case] if stmt.else_case is not None else [])
    return [stmt.body] if isinstance(stmt, tirx.For) else []


def nested_steps(gen, lp, body) -> tuple:
    """((t, s), kernel) for ``for t { for s { kernel } }`` whose inner loop's
    bounds do not use ``t`` and whose kernel's schedule is marked STEPS_DEEP
    (polyhedral/schedule.py ``_mark_steps``); else ((t,), None)."""
    it = body.items[0] if len(body.items) == 1 else None
    if isinstance(it, ForLoop) and len(it.body.items) == 1 and isinstance(it.body.items[0], Kernel):
        k, inner = it.body.items[0], it.loop
        node, deep = gen.ast_of(k), False
        while node.get_type() == NT.mark:
            deep, node = deep or isl_ast.mark(node) == STEPS_DEEP, node.mark_get_node()
        if deep and k.scatter is None and lp.var not in n.names_in(inner.lo) | n.names_in(inner.hi):
            return (lp, inner), k
    return (lp,), None


def steps_wrap(low, loops: tuple, env: dict):
    """The sequential loops ``loops`` (outermost first) around a step's body,
    inside the parallel loop (``CpuAstLowering.wrap``)."""
    bounds = [(lower_expr(x.lo, env, {}, INDEX), lower_expr(x.hi, env, {}, INDEX)) for x in loops]

    def wrap(make):
        vs = [tirx.Var(x.var, INDEX) for x in loops]
        with low.bound({x.var: from_zero(lo, v) for x, v, (lo, _) in zip(loops, vs, bounds)}):
            inner = make()
        for v, (lo, hi) in reversed(list(zip(vs, bounds))):
            inner = tirx.For(v, 0, tirx.max(hi - lo, 0), tirx.ForKind.SERIAL, inner)
        return inner
    return wrap
