"""Register tiles whose terms are masked per row and step: the rows' steps
that add nothing are skipped.

A sum over a bag, a padded sequence or a ragged row written with a select
whose condition names the row and the reduction step but not the column,

    out(b, d) +=! offs(b) + j < end(b) ? scale(r) * float(Q(r, d)) + bias(r) : 0 where r = ids(offs(b) + j)

(an embedding bag to its longest bag ``L``, a masked mean, a padding mask
``mask(b, j) ? x(b, j, d) : 0``), computes ``e`` in every lane and adds 0
where the condition fails: each step reads its rows of ``Q`` (clamped in)
whether or not the bag has that many.  :func:`masked_lanes` gives the tile's
update (``for d, r (unrolled) { for u (unrolled) { for v (vector) { acc +=
c ? e : 0 } } }``) as ``for d, r { if c { for u, v { acc += e } } }``: the
test once per row and step, the columns only where it holds.  The same sums
in the same order (a term that is skipped was a 0 added), for a sum
(``+``) whose select has 0 on its other side.
"""
from __future__ import annotations

from typing import Callable

import tvm
from tvm import tirx
from tvm.tirx.analysis import undefined_vars

from .expr import INDEX
from .lower import is_if_then_else


def _masked(value: tirx.PrimExpr):
    """(condition, term) of ``c ? e : 0`` (a Select or an if_then_else), else None."""
    if isinstance(value, tirx.Select):
        c, e, z = value.condition, value.true_value, value.false_value
    elif is_if_then_else(value):
        c, e, z = value.args
    else:
        return None
    if not (isinstance(z, (tirx.FloatImm, tirx.IntImm)) and z.value == 0):
        return None
    return c, e


def masked_lanes(update: Callable, nd: int, nr: int, w: int, vw: int) -> tirx.Stmt | None:
    """The tile's update with the columns inside a test of its rows' mask
    (see the module docstring), or None where ``update(d, r, c)`` (the store
    ``acc[d * nr + r, c] = acc[..] + value``) is not a sum of a masked term
    whose mask leaves out the columns."""
    r, u, v = (tirx.Var(x, INDEX) for x in ("r", "u", "v"))
    d = tirx.Var("d", INDEX) if nd > 1 else tirx.const(0, INDEX)
    store = update(d, r, u * vw + v)
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return None
    load, value = store.value.a, store.value.b
    if not (isinstance(load, tvm.ir.expr.TensorLoad) and load.source.same_as(store.buffer)):
        return None
    parts = _masked(value)
    if parts is None:
        return None
    cond, term = parts
    if any(x.same_as(u) or x.same_as(v) for x in undefined_vars(cond)):
        return None
    inner = tirx.For(v, 0, vw, tirx.ForKind.VECTORIZED if vw > 1 else tirx.ForKind.SERIAL,
                     tirx.BufferStore(store.buffer, tirx.Add(load, term), store.indices))
    out = tirx.IfThenElse(cond, tirx.For(u, 0, w // vw, tirx.ForKind.UNROLLED, inner), None)
    out = tirx.For(r, 0, nr, tirx.ForKind.UNROLLED, out)
    return tirx.For(d, 0, nd, tirx.ForKind.UNROLLED, out) if nd > 1 else out
