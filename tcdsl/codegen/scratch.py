"""The bound arguments of nested vector formulas as scratch buffers (before TVM's build).

A formula whose argument holds another formula binds that argument to a
variable first (codegen/formulas.py ``bindings``; ``tirx.Bind`` statements
before the statement's store, codegen/lower.py ``emit_statement``).  TVM's
arithmetic analyzer, which its LLVM code generator and its passes consult,
substitutes a bound variable's value wherever the variable appears and
simplifies the result; a chain of formulas, each using its argument several
times, then grows exponentially (Mish, ``x * tanh(log(1 + exp(x)))``, took
15 s to compile, ``tanh(sigmoid(tanh(exp(x))))`` 352 s).  A value stored to
a buffer and loaded back is opaque to the analyzer, and LLVM keeps a small
stack buffer in registers: this pass turns each such ``Bind`` into a store
to a buffer of one element and its uses into loads of it, and widens the
buffers inside a vectorized loop to one element per lane, indexed by the
loop's variable, allocated before the loop (TVM's vectorizer turns the store
and the loads into vector ones; a single element would be shared by the
lanes).
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

# the name formulas.py gives its bound variables
PREFIX = "act"

# The scope of the CPU code's small buffers allocated once per row or per
# vector iteration (a row reduction's partial sums, hoisted per-row terms,
# these scratch values): TVM 0.27 places an allocation of the "global" scope
# of a constant size under 1 KiB on the stack, where LLVM keeps it in
# registers, and takes every "local" one from its workspace pool, one call
# to allocate and one to free per allocation.  Layer norm over 4096 x 1024
# rows: 2.1-2.4 -> 1.3-1.7 ms, softmax rows 3.0-3.7 -> 2.3-2.5 ms (A/B, the
# two trees alternating, five runs each).  Register tiles' accumulators too
# (codegen/cpu_tiles.py): a tile over a short reduction pays the pool's two
# calls for little work -- a batch of 8192 16 x 16 matmuls spent most of its
# time in them, 7.9-8.3 -> 1.3-1.4 ms; large tiles (matmul, LSTM, conv)
# within this machine's noise in an A/B run.
STACK = "global"


def _scratch(b, scope: str) -> bool:
    return b.name.startswith(PREFIX) and b.scope() == scope and len(b.shape) == 1


def _stored(seq: tirx.SeqStmt, scope: str):
    """``seq`` with its bindings of formula arguments as scratch stores, or None."""
    items = list(seq.seq)
    if not any(isinstance(s, tirx.Bind) and s.var.name.startswith(PREFIX) for s in items):
        return None
    zero = tirx.const(0, "int32")
    loads: dict = {}
    out = []
    for s in items:
        if loads:
            s = tvm_ffi.structural_map(s, [(tirx.Var, lambda v: loads.get(v, v))])
        if isinstance(s, tirx.Bind) and s.var.name.startswith(PREFIX):
            buf = tirx.decl_buffer((1,), str(s.var.ty), name=s.var.name, scope=scope)
            out += [tirx.AllocBuffer(buf), tirx.BufferStore(buf, s.value, [zero])]
            loads[s.var] = tirx.BufferLoad(buf, [zero])
        else:
            out.append(s)
    return tirx.SeqStmt(out)


def _widened(loop: tirx.For, scope: str):
    """A vectorized ``loop`` with its scratch buffers one element per lane."""
    if loop.kind != tirx.ForKind.VECTORIZED:
        return loop
    wide: list = []  # (buffer, its widened copy); the bound variables' names repeat

    def alloc(a):
        if not _scratch(a.buffer, scope) or a.buffer.shape[0].value != 1:
            return a
        w = tirx.decl_buffer((loop.extent,), a.buffer.dtype, name=a.buffer.name, scope=scope)
        wide.append((a.buffer, w))
        return tirx.Evaluate(tirx.const(0, "int32"))  # allocated before the loop

    body = tvm_ffi.structural_map(loop.body, [(tirx.AllocBuffer, alloc)])
    if not wide:
        return loop

    def swap(buf):
        return next((new for old, new in wide if old.same_as(buf)), None)

    def store(s):
        new = swap(s.buffer)
        return tirx.BufferStore(new, s.value, [loop.loop_var]) if new is not None else s

    def load(ld):
        new = swap(ld.source)
        return tirx.BufferLoad(new, [loop.loop_var]) if new is not None else ld

    body = tvm_ffi.structural_map(body, [(tirx.BufferStore, store), (tvm.ir.TensorLoad, load)])
    loop = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations)
    return tirx.SeqStmt([tirx.AllocBuffer(w) for _, w in wide] + [loop])


def scratch_bindings(func: tirx.PrimFunc, cpu: bool) -> tirx.PrimFunc:
    """``func`` with its formulas' bindings in scratch buffers: on the CPU of
    the :data:`STACK` scope, on CUDA "local" (registers)."""
    scope = STACK if cpu else "local"
    body = tvm_ffi.structural_map(func.body, [(tirx.SeqStmt, lambda s: _stored(s, scope) or s)])
    body = tvm_ffi.structural_map(body, [(tirx.For, lambda f: _widened(f, scope))])
    return func.with_body(body)
