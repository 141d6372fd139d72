"""Register tiles whose terms are masked per row and step: the rows' steps
that add nothing are skipped.

A sum over a bag, a padded sequence or a ragged row written with a select
whose condition names the row and the reduction step but not the column,

    out(b, d) +=! offs(b) + j < end(b) ? scale(r) * float(Q(r, d)) + bias(r) : 0 where r = ids(offs(b) + j)

(an embedding bag to its longest bag ``L``, a masked mean, a padding mask
``mask(b, j) ? x(b, j, d) : 0``), computes the term in every lane and adds
0 where the condition fails: each step reads its rows of ``Q`` (clamped in)
whether or not the bag has that many.  :func:`masked_tiles`, run on the
function after :func:`tcdsl.codegen.slots.select_loops` (which ends a loop
at the largest length its tile's rows test, and drops a test that all of
them share), gives each tile update left, ``for d, r, u (unrolled) { for v
(vector) { acc[..] = acc[..] + (c ? e : 0) } }``, as ``for (the unrolled
loops c names) { if c { for (the others) { for v { acc[..] = acc[..] + e }
} } }``: the test once per row and step, the columns only where it holds.
The loops may be reordered: each of their iterations updates its own
accumulator.  The same sums in the same order (a term that is skipped was a
0 added).
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.analysis import undefined_vars

from .lower import is_if_then_else


def masked_tiles(func: tirx.PrimFunc) -> tirx.PrimFunc:
    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, _masked_nest)]))


def select_branches(value):
    """(condition, value where it holds, value where it does not) of a select
    (a Select or an if_then_else), else None."""
    if is_if_then_else(value):
        return tuple(value.args)
    if isinstance(value, tirx.Select):
        return value.condition, value.true_value, value.false_value
    return None


def _masked(value):
    """(condition, term) of ``c ? e : 0``, else None."""
    parts = select_branches(value)
    if parts is None or not (isinstance(parts[2], (tirx.FloatImm, tirx.IntImm)) and parts[2].value == 0):
        return None
    return parts[0], parts[1]


def _masked_nest(f):
    """The tile update ``f`` (unrolled loops around one vectorized loop
    around one accumulator update) with its mask outside the loops it does
    not name and inside those it names; ``f`` itself otherwise.  The maps
    run inside out: a mask already taken out of the inner loops moves out
    of ``f`` too where ``f`` is not one that it names."""
    loops, node, cond = [], f, None
    while isinstance(node, tirx.For) and node.kind == tirx.ForKind.UNROLLED:
        loops.append(node)
        node = node.body
    if isinstance(node, tirx.IfThenElse) and node.else_case is None and loops:
        cond, node = node.condition, node.then_case
        while isinstance(node, tirx.For) and node.kind == tirx.ForKind.UNROLLED:
            loops.append(node)
            node = node.body
    if not loops or not isinstance(node, tirx.For) or node.kind != tirx.ForKind.VECTORIZED:
        return f
    vec, store = node, node.body
    if not isinstance(store, tirx.BufferStore) or store.buffer.name != "acc" or not isinstance(store.value, tirx.Add):
        return f
    load, term = store.value.a, store.value.b
    if not (isinstance(load, tvm.ir.expr.TensorLoad) and load.source.same_as(store.buffer)):
        return f
    if cond is None:
        parts = _masked(term)
        if parts is None:
            return f
        cond, term = parts
    used = undefined_vars(cond)
    if any(x.same_as(vec.loop_var) for x in used):
        return f
    outer = [lp for lp in loops if any(x.same_as(lp.loop_var) for x in used)]
    inner = [lp for lp in loops if not any(x.same_as(lp.loop_var) for x in used)]
    out = tirx.For(vec.loop_var, vec.min, vec.extent, vec.kind, tirx.BufferStore(store.buffer, tirx.Add(load, term),
                                                                                   store.indices))
    for lp in reversed(inner):
        out = tirx.For(lp.loop_var, lp.min, lp.extent, lp.kind, out)
    out = tirx.IfThenElse(cond, out, None)
    for lp in reversed(outer):
        out = tirx.For(lp.loop_var, lp.min, lp.extent, lp.kind, out)
    return out
