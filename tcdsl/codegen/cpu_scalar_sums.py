"""Sums into a scalar over a nest of loops (codegen/cpu.py).

A sum into a 0-d tensor whose loops merge into one (``s +=! x(i, j)``) is a
vectorized reduction shared out among the threads, with float64 totals
(codegen/cpu_reduce.py).  Where they do not -- a select that split selects
cut into pieces (``s +=! i != j ? exp(-g(l) * K(i, j)) : 0``: ``j < i``,
then ``j > i``), a short loop outside the long ones (``exp(-g(l) * K(i,
j))``: ``l`` first), a triangle -- each innermost loop's reduction was added
to the element in float32, one row at a time, on one thread: about 3
million terms of a sum of 8e5 lost 1.3e-3 of it.  :func:`scalar_nest` runs
such a nest, whose statements all add into 0-d tensors that none of them
reads, as:

* the outermost loop's iterations shared out among the threads (one thread
  when the nest looks short, :data:`NEST_MIN`),
* inside a thread, each outer iteration summed into a float32 partial of its
  own (every statement's stores redirected to it, the vectorized reductions
  inside included), added to the thread's float64 total after it,
* the threads' totals added in thread order, then into the element once.
"""
from __future__ import annotations

import functools

import islpy as isl
from tvm import tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT
from ..syntax import nodes as n
from .expr import INDEX
from .scratch import STACK

_FLOATS = ("float32", "float16", "float64")
# statement instances per thread (estimated) below which the nest runs on the
# calling thread, as a shared vectorized reduction does (cpu_reduce.SHARED_MIN)
NEST_MIN = 16384


def _calls(node: isl.AstNode) -> list:
    t = node.get_type()
    if t == NT.user:
        return [node.user_get_expr()]
    return [c for x in isl_ast.below(node) for c in _calls(x)]


def _read_names(e: n.Expr) -> set[str]:
    return {x.tensor if isinstance(x, n.Access) else x.name for x in n.walk(e) if isinstance(x, (n.Access, n.Ident))}


def scalar_tensors(low, node: isl.AstNode) -> dict | None:
    """tensor -> its buffer, for the 0-d tensors that the statements below
    ``node`` add into, when every statement there adds into one (a float
    ``+``, no init) and none reads any of them; else None."""
    stmts = [low.stmts[isl_ast.statement(c)] for c in _calls(node)]
    if not stmts:
        return None
    out = {}
    for s in stmts:
        c = s.info.comp
        buf = low.gen.sig.buffers.get(c.tensor)
        if s.is_init or c.reduction != "+" or c.indices or buf is None or str(buf.dtype) not in _FLOATS \
                or c.tensor in low.buffer_override:
            return None
        out[c.tensor] = buf
    if any(_read_names(s.info.comp.rhs) & set(out) for s in stmts):
        return None
    return out


def _estimate(low, node: isl.AstNode, depth: int = 0):
    """The iterations of the nest along its first loop at each level, the
    loops' bounds taken at the middle of the loops around them (a triangle's
    half)."""
    body, _ = isl_ast.strip_marks(node)
    while body.get_type() in (NT.block, NT.if_):
        body = isl_ast.below(body)[0]
        body, _ = isl_ast.strip_marks(body)
    if body.get_type() != NT.for_ or depth > 8:
        return tirx.const(1, "int64")
    init, extent = low.loop_range(body)
    extent = tirx.max(extent, 0)
    with low.bound({isl_ast.iterator(body): init + tirx.floordiv(extent, 2)}):
        inner = _estimate(low, body.for_get_body(), depth + 1)
    return tirx.Cast("int64", extent) * inner


def scalar_nest(low, node: isl.AstNode, name: str, init, extent, threads: int) -> tirx.Stmt | None:
    """The loop nest ``node`` (iterator ``name``, ``extent`` iterations from
    ``init``) of sums into 0-d tensors as the module docstring says, or None
    when its statements do not all qualify (:func:`scalar_tensors`)."""
    if not set(low.env) <= low.top or (low.kernel is not None and low.kernel.loops) or low.wrap is not None:
        return None  # (a nest inside a loop of the kernel, or of the program)
    tensors = scalar_tensors(low, node)
    if tensors is None or not isl_ast.has(node.for_get_body(), isl_ast.is_loop):
        return None
    n_iter = tirx.max(extent, 0)
    zero = tirx.const(0, INDEX)

    def run(nthreads: int) -> tirx.Stmt:
        vp, vo = tirx.Var(name + "_p", INDEX), tirx.Var(name + "_o", INDEX)
        first = tirx.floordiv(vp * n_iter, nthreads) if nthreads > 1 else zero
        last = tirx.floordiv((vp + 1) * n_iter, nthreads) if nthreads > 1 else n_iter
        parts, totals, slots = {}, {}, {}
        for t, buf in tensors.items():
            parts[t] = tirx.decl_buffer((), buf.dtype, name=t + "_part", scope=STACK)
            totals[t] = tirx.decl_buffer((1,), "float64", name=t + "_total", scope=STACK)
            slots[t] = tirx.decl_buffer((nthreads,), "float64", name=t + "_threads")
        saved = low.buffer_override
        low.buffer_override = {**saved, **parts}
        try:
            body = low.body_with(node, name, init + first + vo, False)
        finally:
            low.buffer_override = saved
        starts = [tirx.BufferStore(parts[t], tirx.const(0.0, b.dtype), []) for t, b in tensors.items()]
        adds = [tirx.BufferStore(totals[t], tirx.BufferLoad(totals[t], [zero])
                                 + tirx.Cast("float64", tirx.BufferLoad(parts[t], [])), [zero]) for t in tensors]
        loop = tirx.For(vo, 0, last - first, tirx.ForKind.SERIAL, tirx.SeqStmt(starts + [body] + adds))
        per_thread = tirx.SeqStmt(
            [tirx.AllocBuffer(b) for t in tensors for b in (parts[t], totals[t])]
            + [tirx.BufferStore(totals[t], tirx.const(0.0, "float64"), [zero]) for t in tensors] + [loop]
            + [tirx.BufferStore(slots[t], tirx.BufferLoad(totals[t], [zero]), [vp]) for t in tensors])
        kind = tirx.ForKind.PARALLEL if nthreads > 1 else tirx.ForKind.SERIAL
        finals = []
        for t, buf in tensors.items():
            got = functools.reduce(tirx.Add, [tirx.BufferLoad(slots[t], [tirx.const(q, INDEX)])
                                              for q in range(nthreads)])
            finals.append(tirx.BufferStore(buf, tirx.BufferLoad(buf, []) + tirx.Cast(buf.dtype, got), []))
        return tirx.SeqStmt([tirx.AllocBuffer(slots[t]) for t in tensors]
                            + [tirx.For(vp, 0, nthreads, kind, per_thread)] + finals)

    one = run(1)
    if threads < 2:
        return one
    big = tirx.all(n_iter >= threads, _estimate(low, node) >= tirx.const(NEST_MIN * threads, "int64"))
    return tirx.IfThenElse(big, run(threads), one)
