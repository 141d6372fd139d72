"""Stride tests on a statement's reads (syntax nodes), for the choice of its
vector loop (schedule.py, ``_stride_one``) and of a sum's layout
(permute.py)."""
from __future__ import annotations

import islpy as isl

from .layout import _index_var


# Fewer values than this, whatever the sizes (``kw in 0:3``): a sum's last
# index too short for a vector (polyhedral/permute.py).
SHORT = 8


def short(s, d: str) -> bool:
    """The statement ``s``'s variable ``d`` takes fewer than SHORT values,
    whatever the sizes."""
    i = s.dims.index(d)
    dom = s.domain.project_out(isl.dim_type.set, i + 1, len(s.dims) - i - 1).project_out(isl.dim_type.set, 0, i)
    ext = dom.dim_max(0).sub(dom.dim_min(0)).coalesce()
    vals = []
    ext.foreach_piece(lambda _s, a: vals.append(a.get_constant_val() if a.is_cst() else None))
    return len(vals) == 1 and vals[0] is not None and vals[0].to_python() + 1 < SHORT


# A convolution tap counted by the sizes (``tap``) counts as short below this
# many values at run time: a 1-D weight gradient (B, O, C, L = 16, 128, 128,
# ~250, 2 cores) ran as written at 9.9, 1.5, 0.97 and 0.71 times
# torch.nn.grad.conv1d_weight for 3, 16, 128 and 225 taps; with the taps
# first (polyhedral/permute.py) at 0.80, 0.93, 1.11 and 1.07.
TAPS = 64


def uses(exprs, d: str) -> bool:
    """The index variable ``d`` appears in one of ``exprs``."""
    from ..syntax import nodes as n

    return any(isinstance(x, n.IndexVar) and x.name == d for e in exprs for x in n.walk(e))


def tap(s, reads, d: str, red) -> bool:
    """``d`` is a convolution's tap whose count is a size expression
    (``k in 0:M-L+1``, a weight gradient's kernel width): it takes a
    non-constant number of values, and every read that uses it has it in its
    last index only, with coefficient 1, next to a reduction variable
    (``x(b, c, l + k)``) -- the window slides along the sum's own index, so
    the few taps users write are short at run time."""
    from ..syntax import nodes as n

    if short(s, d):
        return False
    using = [a for a in reads if uses(a.indices, d)]
    if not using:
        return False
    for a in using:
        *outer, last = a.indices
        if uses(outer, d):
            return False
        names = {x.name for x in n.walk(last) if isinstance(x, n.IndexVar)}
        if not (names - {d}) & set(red) or not plus(last, d):
            return False
    return True


def unit_or_invariant(access, d: str) -> bool:
    """``access`` reads contiguous elements as ``d`` moves (``d`` only in
    its last index, with coefficient 1), or the same element, or one element
    per run of ``K`` steps (``mean(n, c / 8)``: a group's value for each of
    its channels)."""
    from ..syntax import nodes as n

    def uses(e) -> bool:
        return any(isinstance(x, n.IndexVar) and x.name == d for x in n.walk(e))

    def is_d(e) -> bool:
        return isinstance(e, n.IndexVar) and e.name == d

    *outer, last = access.indices or (n.Const(0),)
    if any(uses(e) for e in outer):
        return False
    if not uses(last) or is_d(last):
        return True
    if _in_runs(last, d):
        return True
    return plus(last, d, SMALL_STRIDES)


def _in_runs(e, d: str) -> bool:
    """``d`` appears in ``e`` only as ``(d + a) / K`` for constants ``K >= 2``:
    the same value over runs of ``K`` steps (``c / 8``, a grouped
    convolution's input channel ``(o / 16) * 16 + i``)."""
    from ..syntax import nodes as n

    if isinstance(e, n.Binary) and e.op == "/" and isinstance(e.rhs, n.Const) \
            and isinstance(e.rhs.value, int) and e.rhs.value >= 2 and plus(e.lhs, d):
        return True
    if isinstance(e, n.IndexVar):
        return e.name != d
    if isinstance(e, n.Binary) and e.op in ("+", "-", "*"):
        return _in_runs(e.lhs, d) and _in_runs(e.rhs, d)
    return not any(isinstance(x, n.IndexVar) and x.name == d for x in n.walk(e))


# A read whose last index moves by up to this many elements per step of the
# vector loop (a convolution of stride 2: ``x(b, c, 2 * t + k)``) still makes
# it the vector loop: a few strided lanes per vector against a scalar loop.
SMALL_STRIDES = (1, 2, 3, 4)


def plus(e, d: str, coefficients: tuple[int, ...] = (1,)) -> bool:
    """``e`` is ``c * d`` plus terms free of ``d`` for one of ``coefficients``
    (``t + k - K + 1``; isl decides; a product, quotient or remainder free
    of ``d`` is one term, affine or not: ``h * K + i`` of a flattened head
    moves by 1 with ``i``)."""
    from ..sema.affine import moves_by
    from ..syntax import nodes as n

    found: dict = {}

    def fn(x):
        if isinstance(x, n.Binary) and x.op in ("*", "/", "%") \
                and not any(isinstance(y, n.IndexVar) and y.name == d for y in n.walk(x)):
            return n.SizeVar(found.setdefault(id(x), f"_p{len(found)}"), dtype="int32")
        return n.map_children(x, fn)
    return moves_by(fn(e), d, coefficients)


def transposed(access, d: str, red, dims: tuple[str, ...]) -> bool:
    """``access`` is ``X(.., d, .., r)``: ``d`` (or ``H + d``, a gate's rows)
    alone in one index that is not the last, a reduction variable ``r`` (of
    ``red``) in the last one, alone or plus terms of other variables and
    sizes (``x(n, c, h + kh, v + kw)``), and some other variable of the statement
    (``dims``) not in it -- a matmul's ``B(n, k)`` next to ``A(m, k)``, a
    bilinear form's ``W(o, i, j)`` next to ``x1(b, i) * x2(b, j)``: contiguous
    along ``r``, copied to a panel contiguous along ``d`` that all rows share."""
    from ..syntax import nodes as n

    idx = access.indices
    if len(idx) < 2:
        return False
    last = {x.name for x in n.walk(idx[-1]) if isinstance(x, n.IndexVar)}
    r = last & set(red)  # (or ``v + kw``: a window of a weight gradient's input at a fixed offset kw)
    if len(r) != 1 or d in last or not plus(idx[-1], r.pop()):
        return False
    used = {x.name for e in idx for x in n.walk(e) if isinstance(x, n.IndexVar)}
    if not set(dims) - used - {d, *red}:
        return False  # no rows to share a panel (a row sum O(n) +=! A(n, k))
    uses = [e for e in idx[:-1] if any(isinstance(x, n.IndexVar) and x.name == d for x in n.walk(e))]
    return len(uses) == 1 and _index_var(uses[0]) == d
