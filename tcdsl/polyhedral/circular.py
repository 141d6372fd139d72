"""Circular indices: a read ``X(b, (i + 7) % N)`` split into its affine cases.

Users write a roll, a circular shift or a circular convolution with ``%`` by
a size::

    O(b, i) = X(b, (i + 7) % N) where i in 0:N

A remainder by a size is not affine: the read is an indirect one (clamped
into ``X``, a gather in every vector lane; ``torch.roll`` of 1024 x 4096
floats ran 5-6x faster).  ``plan(checked)`` finds each read index ``e % S``
with ``e`` affine in the index variables and ``S`` an affine expression of
the sizes, and ``rewrite(def, plan)`` reads through the cases of the floor
remainder instead::

    0 <= e && e < S   ? X(b, e)     :
    S <= e && e < 2*S ? X(b, e - S) :
    -S <= e && e < 0  ? X(b, e + S) : X(b, e % S)

Each case holds only where ``S >= 1``, and there it is ``e % S``; the last
read, as written, covers the rest (``e`` beyond twice the size, or ``S``
of 0): the same values at every size.  The conditions are affine, so the
statement's domain is split at them (polyhedral/split.py) into loops that
read ``X`` contiguously.  ``options={"circular": False}`` leaves programs as
written.

A remainder that is a digit of a flat index, ``x(b, c, p / W, p % W)`` with
``p`` in ``0:H*W``, is not split: ``p`` spans ``H`` multiples of ``W``, not a
few, and the cases would only peel the first rows off a loop that keeps the
remainder for the rest (:func:`few_wraps`).
"""
from __future__ import annotations

from dataclasses import replace

import islpy as isl

from ..sema.affine import NotAffine, isl_name, read_pwaff
from ..sema.check import CheckedDef
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc
from .hoist import equal_sets
from .model import Model
from .pad import _expr, _space


def plan(checked: CheckedDef, model: Model | None = None) -> frozenset:
    """The spans of the remainders to split: read indices ``e % S`` (with
    ``model``, only those whose ``e`` spans a few multiples of ``S`` in every
    statement that reads them)."""
    sizes = set(checked.sizes)
    flat = set()  # the spans of digits of a flat index
    if model is not None:
        for k in model.kernels():
            for s in k.stmts:
                for a in n.walk(s.info.comp.rhs):
                    if isinstance(a, n.Access):
                        flat.update(i.span for i in a.indices
                                    if _circular(i, sizes) and not few_wraps(s, i.lhs, i.rhs))
    out = set()
    for a in n.walk(checked.node):
        if not isinstance(a, n.Access):
            continue
        for idx in a.indices:
            if _circular(idx, sizes) and idx.span not in flat:
                out.add(idx.span)
                break  # one index per read
    return frozenset(out)


def few_wraps(s, e: n.Expr, divisor: n.Expr) -> bool:
    """The values of ``e`` over statement ``s``'s domain spread over a range
    that grows with the size ``divisor`` (``(t + k - 2 + L) % L``, a circular
    padding: a few multiples of ``L``), not one whose spread does not
    involve it (``p % W`` with ``p`` in ``0:H*W``: the digit of a flat
    index).  True where the spread cannot be computed (not affine)."""
    space = _space(s)
    coeffs = n.linear(divisor)
    if space is None or coeffs is None:
        return True
    dom, ctx, params, dims = space
    try:
        image = isl.Map.from_pw_aff(read_pwaff(ctx, params, dims, e).intersect_domain(dom)).range()
        spread = image.dim_max(0).sub(image.dim_min(0))
        sizes = [v for v, c in coeffs.items() if v != 1 and c > 0]
        pieces = spread.get_pieces()
        for _, aff in pieces:
            sp = aff.get_space()
            found = [sp.find_dim_by_name(isl.dim_type.param, isl_name(v)) for v in sizes]
            if not any(i >= 0 and aff.get_coefficient_val(isl.dim_type.param, i).is_pos() for i in found):
                return False
        return True
    except (NotAffine, isl.Error):
        return True


def _circular(e: n.Expr, sizes: set) -> bool:
    if not (isinstance(e, n.Binary) and e.op == "%" and e.span is not None):
        return False
    lhs, rhs = n.linear(e.lhs), n.linear(e.rhs)
    if lhs is None or rhs is None:
        return False
    divisor = set(rhs) - {1}
    return bool(divisor) and divisor <= sizes and bool(set(lhs) - {1} - sizes)


def pins(p: frozenset, model: Model) -> dict:
    """Span of each statement reading a remainder of ``p`` -> ``where``
    clauses of its variables' inferred ranges (those it does not give): the
    cases' reads (``x(b, (i + 1) - N)``) would bound them again, and narrow
    them, where a plain read (``x(b, i)``) gave them (a Lorenz-96 step with
    no ``where``: 12 -> 0.45 ms once its reads are split, one thread)."""
    out = {}
    for k in model.kernels():
        for s in k.stmts:
            c = s.info.comp
            if s.is_init or not any(isinstance(a, n.Access) and any(i.span in p for i in a.indices)
                                    for a in n.walk(c.rhs)):
                continue
            given = {w.var for w in c.wheres if isinstance(w, n.RangeConstraint)}
            out[c.span] = s.info.where_ranges(s.info.vars, given)
    return out


def rewrite(d: n.Def, p: frozenset, bounds: dict | None = None) -> n.Def:
    """``d`` (as parsed) reading through the cases of each remainder of
    ``p``, with ``bounds`` (:func:`pins`) added to the statements' ``where``."""

    def fn(node):
        if isinstance(node, n.Comprehension) and bounds and bounds.get(node.span):
            node = n.map_children(node, fn)
            return replace(node, wheres=tuple(node.wheres) + tuple(bounds[node.span]))
        if isinstance(node, n.Call):
            for k, a in enumerate(node.args):
                if isinstance(a, n.Binary) and a.op == "%" and a.span in p:
                    return _cases(node, k, a)
        return n.map_children(node, fn)

    return n.map_children(d, fn)  # every statement's right-hand side, in loops and branches too


def _cases(read: n.Call, k: int, rem: n.Binary) -> n.Expr:
    e, s = f"({expr_to_tc(rem.lhs)})", f"({expr_to_tc(rem.rhs)})"
    args = [expr_to_tc(a) for a in read.args]

    def at(index: str) -> str:
        return f"{read.name}({', '.join(args[:k] + [index] + args[k + 1:])})"

    text = (f"({e} >= 0 && {e} < {s}) ? {at(e)} : "
            f"(({e} >= {s} && {e} < 2 * {s}) ? {at(f'{e} - {s}')} : "
            f"(({e} < 0 && {e} >= -{s}) ? {at(f'{e} + {s}')} : {at(f'{e} % {s}')}))")
    return _expr(text, read.span)


def same_domains(model: Model, new_model: Model) -> bool:
    """Every statement of ``model`` runs the same points in ``new_model``:
    else the rewrite is dropped (driver.py).  The cases' reads constrain the
    ranges inference gives the variables (``B(i) = A(i) + A(i % N)`` has no
    ``where``: ``A(i - N)`` would narrow ``i`` to nothing)."""
    def domains(m: Model) -> dict:
        return {(s.info.comp.span, s.is_init): s.domain.reset_tuple_id() for k in m.kernels() for s in k.stmts}

    old, new = domains(model), domains(new_model)
    if old.keys() != new.keys():
        return False
    return all(equal_sets(a, new[key]) for key, a in old.items())
