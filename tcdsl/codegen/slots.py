"""Updates of one slot written as a select over all of them (before TVM's build).

A ring buffer or a cache written at one position per step, as users write
it::

    kb(s, b, d) = s == t % W ? k(t, b, d) : kb(s, b, d) where s in 0:W

is a loop over every slot ``s`` whose every store writes back the value it
loads, except at ``s == E`` (``E = t % W``, the same for all of them).
:func:`single_slot_updates` turns such a loop into that one iteration, under
the test that ``E`` is one of the loop's values::

    if 0 <= E < W { kb(E, b, d) = k(t, b, d) }

Every other iteration stored the element it had just loaded, so the result
is the same; the elements written are a subset of those written before.  A
streaming attention over a ring of 64 slots rewrote both of its buffers at
every step: a third of its time.  Applied to a loop (serial or parallel) whose
body holds only loops and such stores (of ``if_then_else`` or a select),
each with the same ``E``, free of the loop variables of the body.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .edges import _ORDINARY, _is_const, _vars
from .lower import is_if_then_else


def single_slot_updates(func: tirx.PrimFunc) -> tirx.PrimFunc:
    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, _one_slot)]))


def _branches(value):
    """(condition, value where it holds, value where it does not) of a select."""
    if is_if_then_else(value):
        return tuple(value.args)
    if isinstance(value, tirx.Select):
        return value.condition, value.true_value, value.false_value
    return None


def _slot(cond, v: tirx.Var):
    """``E`` when ``cond`` is ``v == E`` or ``E == v``, else None."""
    if not isinstance(cond, tirx.EQ):
        return None
    for a, b in ((cond.a, cond.b), (cond.b, cond.a)):
        if isinstance(a, tirx.Var) and a.same_as(v) and v not in set(_vars(b)):
            return b
    return None


def _one_slot(f: tirx.For):
    if f.kind not in _ORDINARY or (f.step is not None and not _is_const(f.step, 1)):
        return f
    v, slots, inner, ok = f.loop_var, [], set(), [True]

    def walk(s):
        if not ok[0]:
            return
        if isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                walk(x)
        elif isinstance(s, tirx.For):
            inner.add(s.loop_var)
            walk(s.body)
        elif isinstance(s, tirx.BufferStore):
            parts = _branches(s.value)
            e = _slot(parts[0], v) if parts else None
            back = parts[2] if parts else None
            if e is None or not isinstance(back, tvm.ir.TensorLoad) or not back.source.same_as(s.buffer) \
                    or not tvm_ffi.structural_equal(list(back.indices), list(s.indices)):
                ok[0] = False
                return
            slots.append(e)
        else:
            ok[0] = False
    walk(f.body)
    if not ok[0] or not slots or any(not tvm_ffi.structural_equal(e, slots[0]) for e in slots[1:]) \
            or set(_vars(slots[0])) & inner:
        return f
    e = slots[0]

    def taken(s):
        parts = _branches(s.value)
        return tirx.BufferStore(s.buffer, parts[1], s.indices) if parts is not None else s
    body = tvm_ffi.structural_map(f.body, [(tirx.BufferStore, taken)])
    body = tvm_ffi.structural_map(body, [(tirx.Var, lambda x: e if x.same_as(v) else x)])
    return tirx.IfThenElse(tirx.all(e >= f.min, e < f.min + f.extent), body, None)
