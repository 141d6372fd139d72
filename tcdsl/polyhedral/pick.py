"""A sum over a variable that one term selects: that term alone.

An embedding looked up as a one-hot product, the way JAX code writes it,

    x(n, d) +=! (ids(n) == v ? 1.0 : 0.0) * E(v, d) where v in 0:V

sums V terms of which at most one is not zero: N x V x D multiply-adds for
N x D values (a dense product with the one-hot matrix).  ``plan`` finds the
``+`` reductions whose right-hand side is ``cond ? a : 0`` (or a product or
cast with such a factor, polyhedral/scatter.py ``_pick``) where a conjunct
of ``cond`` is ``v == g``, ``v`` a reduction variable and ``g`` an expression
without ``v`` that reads a tensor; ``rewrite`` drops ``v`` and reads the one
term:

    x(n, d) +=! (0 <= ids(n) && ids(n) < V ? 1.0 * E(ids(n), d) : 0) where n in .., d in ..

``v``'s range must not depend on the other variables (the statement's domain
a product of its variables' ranges), and the remaining variables keep their
inferred ranges as ``where`` clauses (a read through ``v`` may have bounded
them).  An index read through ``g`` is clamped to its tensor, as every
indirect read is.  The sum of one term and zeros is that term, so the value
is the same; only a non-finite value in a row the index does not select no
longer turns the sum into NaN (``0 * inf``), as with ``F.embedding`` against
a one-hot product.  Picked in order: ``(a(n) == v && b(n) == w ? ...)``
drops both.
"""
from __future__ import annotations

from dataclasses import replace

from ..autodiff.exprs import substitute
from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo, readable
from ..syntax import nodes as n
from .scatter import _pick, _product


def plan(checked: CheckedDef, ranges: RangeInfo) -> dict:
    """Statement span -> ([(v, lo, hi)] picked in order, the other variables' ``where`` ranges, the new op)."""
    infos = {(st.comp.span, st.comp.tensor): st for st in ranges.stmts}
    out = {}
    for s, _ in n.comprehensions_in_loops(checked.node.body):
        if not isinstance(s, n.Comprehension) or s.reduction != "+" or s.equivalent is not None or s.span is None:
            continue
        st = infos.get((s.span, s.tensor))
        if st is None or any(not isinstance(w, n.RangeConstraint) for w in s.wheres) \
                or not _product(st, nonempty=False):
            continue
        rhs, picked = s.rhs, []
        for v in s.reduction_vars:
            found = _pick(rhs, v)
            if found is None:
                continue
            ctx = st.domain.params()
            lo, hi = (readable(b, ctx) for b in st.ranges[v])
            if n.names_in(lo) & set(st.vars) or n.names_in(hi) & set(st.vars):
                continue
            picked.append((v, lo, hi))
            rhs = substitute(found[1], {v: found[0]})
        if not picked:
            continue
        gone = {v for v, _, _ in picked}
        bounds = st.where_ranges(st.vars, gone | {w.var for w in s.wheres})
        # a ``+=!`` left without a reduction variable is the one term: ``=``
        op = "=" if s.op == "+=!" and not set(s.reduction_vars) - gone else s.op
        out[s.span] = (tuple(picked), bounds, op)
    return out


def rewrite(d: n.Def, p: dict) -> n.Def:
    """``d`` (as parsed) with each sum of ``p`` reading its picked terms only."""
    return replace(d, body=_block(d.body, p))


def _block(stmts, p: dict) -> tuple:
    out = []
    for s in stmts:
        if isinstance(s, n.For):
            out.append(replace(s, body=_block(s.body, p)))
        elif isinstance(s, n.If):
            out.append(replace(s, then=_block(s.then, p), orelse=_block(s.orelse, p)))
        elif isinstance(s, n.Comprehension) and s.span in p:
            out.append(_one(s, *p[s.span]))
        else:
            out.append(s)
    return tuple(out)


def _one(s: n.Comprehension, picked, bounds, op: str) -> n.Comprehension:
    rhs, conds = s.rhs, []
    for v, lo, hi in picked:
        found = _pick(rhs, v)
        if found is None:  # (the parsed statement is not the checked one: left as written)
            return s
        g, rest = found
        conds += [n.Binary("<=", lo, g), n.Binary("<", g, hi)]
        rhs = substitute(rest, {v: g})
    cond = conds[0]
    for c in conds[1:]:
        cond = n.Binary("&&", cond, c)
    gone = {v for v, _, _ in picked}
    wheres = tuple(w for w in s.wheres if not (isinstance(w, n.RangeConstraint) and w.var in gone)) + bounds
    return replace(s, op=op, rhs=n.Select(cond, rhs, n.Const(0), span=s.rhs.span), wheres=wheres)
