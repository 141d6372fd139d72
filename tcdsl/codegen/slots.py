"""Updates of one slot written as a select over all of them (before TVM's build).

A ring buffer or a cache written at one position per step, as users write
it::

    kb(s, b, d) = s == t % W ? k(t, b, d) : kb(s, b, d) where s in 0:W

is a loop over every slot ``s`` whose every store writes back the value it
loads, except at ``s == E`` (``E = t % W``, the same for all of them).
:func:`select_loops` turns such a loop into that one iteration, under
the test that ``E`` is one of the loop's values::

    if 0 <= E < W { kb(E, b, d) = k(t, b, d) }

Every other iteration stored the element it had just loaded, so the result
is the same; the elements written are a subset of those written before.  A
streaming attention over a ring of 64 slots rewrote both of its buffers at
every step: a third of its time.  Applied to a loop (serial or parallel) whose
body holds only loops and such stores (of ``if_then_else`` or a select),
each with the same ``E``, free of the loop variables of the body.

Sums up to a length.  A bag or a sequence summed up to its own length,
as users write it::

    out(b, d) +=! j < lens(b) ? psw(off(b) + j) * E(ids(off(b) + j), d) : 0 where j in 0:L

runs ``j`` over all ``L`` steps, adding zeros past ``lens(b)``.
:func:`_to_length` ends such a reduction loop at the largest of the lengths
its stores test (a register tile's rows each test their own): a loop whose
body holds only loops and stores ``A[i] = A[i] + select(j < X, v, 0)`` (an
``if_then_else`` too, ``j`` the loop's variable, ``X`` free of it, the
condition possibly one term of a conjunction) runs ``j`` up to ``max(X)``
over the values of the inner unrolled loops ``X`` depends on (``k0 + j <
X`` in a block of a blocked loop: ``j`` up to ``X - k0``).  The steps
dropped added exact zeros; the conditions stay, except where one length
serves every store (a masked covariance's ``t < len(b)`` around a tile whose
rows are its features): every step left passes the test, which is dropped.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import sym, tirx

from .edges import _ORDINARY, _is_const, _vars
from .tile_masks import masked_tiles, select_branches as _branches


def select_loops(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with its loops of one slot's updates as that slot and its sums
    up to a length as the loops to that length (:func:`_to_length`)."""
    func = func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, lambda f: _to_length(_one_slot(f)))]))
    return masked_tiles(func)  # (the tiles' masks left, once per row and step: codegen/tile_masks.py)


def _slot(cond, v: tirx.Var):
    """``E`` when ``cond`` is ``v == E`` or ``E == v``, else None."""
    if not isinstance(cond, tirx.EQ):
        return None
    for a, b in ((cond.a, cond.b), (cond.b, cond.a)):
        if isinstance(a, tirx.Var) and a.same_as(v) and v not in set(_vars(b)):
            return b
    return None


def _loop_stores(f) -> tuple[list, list] | None:
    """(stores, inner loops) of the serial or parallel unit-step loop ``f``
    when its body holds only loops and stores; else None."""
    if not isinstance(f, tirx.For) or f.kind not in _ORDINARY or (f.step is not None and not _is_const(f.step, 1)):
        return None
    stores, loops = [], []

    def walk(s) -> bool:
        if isinstance(s, tirx.SeqStmt):
            return all(walk(x) for x in s.seq)
        if isinstance(s, tirx.For):
            loops.append(s)
            return walk(s.body)
        if isinstance(s, tirx.BufferStore):
            stores.append(s)
            return True
        return False
    return (stores, loops) if walk(f.body) else None


def _one_slot(f: tirx.For):
    found = _loop_stores(f)
    if found is None:
        return f
    v, slots, inner = f.loop_var, [], {x.loop_var for x in found[1]}
    for s in found[0]:
        parts = _branches(s.value)
        e = _slot(parts[0], v) if parts else None
        back = parts[2] if parts else None
        if e is None or not isinstance(back, tvm.ir.TensorLoad) or not back.source.same_as(s.buffer) \
                or not tvm_ffi.structural_equal(list(back.indices), list(s.indices)):
            return f
        slots.append(e)
    if not slots or any(not tvm_ffi.structural_equal(e, slots[0]) for e in slots[1:]) \
            or set(_vars(slots[0])) & inner:
        return f
    e = slots[0]

    def taken(s):
        parts = _branches(s.value)
        return tirx.BufferStore(s.buffer, parts[1], s.indices) if parts is not None else s
    body = tvm_ffi.structural_map(f.body, [(tirx.BufferStore, taken)])
    body = tvm_ffi.structural_map(body, [(tirx.Var, lambda x: e if x.same_as(v) else x)])
    return tirx.IfThenElse(tirx.all(e >= f.min, e < f.min + f.extent), body, None)


# at most this many copies of a length over the inner loops it depends on (a tile's rows)
MAX_LENGTHS = 16


def _length(cond, v: tirx.Var):
    """``X`` where ``cond`` (or a term of its conjunction) is ``v < X``,
    ``X > v``, ``v <= X - 1`` ..., with ``X`` free of ``v``; else None."""
    if isinstance(cond, tirx.And):
        x = _length(cond.a, v)
        return x if x is not None else _length(cond.b, v)
    for kind, lo_hi, plus in ((tirx.LT, True, 0), (tirx.GT, False, 0), (tirx.LE, True, 1), (tirx.GE, False, 1)):
        if isinstance(cond, kind):
            lo, hi = (cond.a, cond.b) if lo_hi else (cond.b, cond.a)
            if v in set(_vars(hi)):
                return None
            if isinstance(lo, tirx.Var) and lo.same_as(v):
                return hi + plus if plus else hi
            # ``k0 + v < X`` (a block of a blocked reduction loop): ``v < X - k0``
            if isinstance(lo, tirx.Add):
                for a, b in ((lo.a, lo.b), (lo.b, lo.a)):
                    if isinstance(a, tirx.Var) and a.same_as(v) and v not in set(_vars(b)):
                        return hi - b + plus if plus else hi - b
    return None


def _added_up_to(s: tirx.BufferStore, v: tirx.Var):
    """``X`` where the store is ``A[i] = A[i] + select(v < X, value, 0)``
    (either order of the sum; see :func:`_length`), else None."""
    if not isinstance(s.value, tirx.Add):
        return None
    for acc, term in ((s.value.a, s.value.b), (s.value.b, s.value.a)):
        parts = _branches(term)
        if isinstance(acc, tvm.ir.TensorLoad) and acc.source.same_as(s.buffer) and parts is not None \
                and tvm_ffi.structural_equal(list(acc.indices), list(s.indices)) \
                and isinstance(parts[2], (tirx.FloatImm, tirx.IntImm)) and parts[2].value == 0:
            x = _length(parts[0], v)
            if x is not None:
                return x
    return None


def _to_length(f):
    found = _loop_stores(f)
    if found is None:
        return f
    v, lengths = f.loop_var, []
    for s in found[0]:
        x = _added_up_to(s, v)
        if x is None:
            return f
        lengths.append(x)
    if not lengths:
        return f
    # the inner loops' variables, with their constant extents (None: another loop)
    inner = [(x.loop_var, x.extent.value if isinstance(x.extent, tirx.IntImm) and _is_const(x.min, 0)
              and x.kind != tirx.ForKind.VECTORIZED else None) for x in found[1]]
    copies = []
    for x in lengths:
        over = [(u, n) for u, n in inner if any(u.same_as(w) for w in _vars(x))]
        if any(n is None for _, n in over):
            return f
        subs = [[]]
        for u, n in over:
            subs = [d + [(u, tirx.const(i, "int32"))] for d in subs for i in range(n)]
        if len(copies) + len(subs) > MAX_LENGTHS:
            return f
        for d in subs:
            copies.append(tvm_ffi.structural_map(x, [(tirx.Var, lambda w, d=d: next((c for u, c in d if u.same_as(w)), w))]))
    end = copies[0]
    for x in copies[1:]:
        end = tirx.max(end, x)
    extent = sym.Analyzer().simplify(tirx.min(f.extent, tirx.max(end - f.min, 0)))
    body = f.body
    if len(copies) == 1:
        # one length for every store (a covariance's ``t < len(b)`` around a tile whose rows are
        # the features, not ``b``): every step left passes the test, which is dropped
        body = tvm_ffi.structural_map(body, [(tirx.BufferStore, lambda st: _untested(st, v))])
    return tirx.For(v, f.min, extent, f.kind, body, f.thread_binding, f.annotations, f.step)


def _untested(s: tirx.BufferStore, v: tirx.Var) -> tirx.BufferStore:
    """``A[i] = A[i] + value`` for ``A[i] = A[i] + select(v < X, value, 0)``
    whose test is that one comparison alone; the store as it is otherwise."""
    if _added_up_to(s, v) is None:
        return s
    for acc, term in ((s.value.a, s.value.b), (s.value.b, s.value.a)):
        parts = _branches(term)
        if parts is not None and isinstance(acc, tvm.ir.TensorLoad) and not isinstance(parts[0], tirx.And) \
                and _length(parts[0], v) is not None:
            return tirx.BufferStore(s.buffer, acc + parts[1], s.indices)
    return s
