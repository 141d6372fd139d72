"""One-hot temporaries read by sums: the select in the sum instead.

A confusion matrix written with one-hot temporaries, as NumPy code builds it,

    oh(n, i) = y(n) == i ? 1.0 : 0.0 where i in 0:K
    ph(n, j) = pred(n) == j ? 1.0 : 0.0 where j in 0:K
    cm(i, j) +=! oh(n, i) * ph(n, j)

writes two N x K tensors and sums N x K x K products (a dense matmul),
where ``cm(i, j) +=! (y(n) == i ? 1.0 : 0.0) * (pred(n) == j ? 1.0 : 0.0)``
is a scatter-add of N ones (polyhedral/scatter.py); a one-hot temporary
read by a product over its index is a pick (polyhedral/pick.py).  ``plan``
finds the temporaries written once, by ``t(i..) = cond ? a : b`` with
constant ``a`` and ``b`` and a conjunct ``i == g`` of ``cond`` (``g`` reading
a tensor), read only by ``+`` sums of the same block after it, at plain
index variables, whose other reads no later statement writes; ``rewrite``
puts the select into each sum (its variables keep their inferred ranges
as ``where`` clauses) and drops the temporary.  A compare and a select
cost about what the load they replace did, so the sums that stay sums
lose nothing.
"""
from __future__ import annotations

from dataclasses import replace

from ..autodiff.exprs import substitute
from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo
from ..syntax import nodes as n
from .scatter import _conjuncts, _equal


def plan(checked: CheckedDef, ranges: RangeInfo) -> dict:
    """{"drop": spans of the temporaries' statements, "temps": {tensor: its lhs
    variables}, "readers": {span: the reader's ``where`` ranges}}."""
    body = checked.node.body
    infos = {(st.comp.span, st.comp.tensor): st for st in ranges.stmts}
    writes: dict[str, int] = {}
    for c in n.comprehensions(body):
        writes[c.tensor] = writes.get(c.tensor, 0) + 1
    out = {"drop": set(), "temps": {}, "readers": {}}
    for block in _blocks(body):
        for i, s in enumerate(block):
            if not _one_hot(s, checked, writes):
                continue
            reads = {a.tensor for a in n.walk(s.rhs) if isinstance(a, n.Access)}
            if any(c.tensor in reads for c in _after(body, s)):
                continue
            readers = [c for c in n.comprehensions(body) if c is not s and _reads(c, s.tensor)]
            if not readers or any(not _fit(c, s.tensor, block[i + 1:]) for c in readers):
                continue
            bounds = {}
            for c in readers:
                st = infos.get((c.span, c.tensor))
                if st is None or c.span is None:
                    break
                bounds[c.span] = st.where_ranges(st.vars, {w.var for w in c.wheres})
            else:
                out["drop"].add(s.span)
                out["temps"][s.tensor] = tuple(e.name for e in s.indices)
                for span, b in bounds.items():
                    out["readers"][span] = out["readers"].get(span, ()) + b
    return out if out["drop"] else {}


def _blocks(stmts):
    yield list(stmts)
    for s in stmts:
        if isinstance(s, n.For):
            yield from _blocks(s.body)
        elif isinstance(s, n.If):
            yield from _blocks(s.then)
            yield from _blocks(s.orelse)


def _one_hot(s, checked: CheckedDef, writes: dict) -> bool:
    if not isinstance(s, n.Comprehension) or s.op != "=" or s.span is None or writes.get(s.tensor) != 1 \
            or s.tensor in checked.outputs or checked.tensors[s.tensor].dims is not None:
        return False
    names = [e.name if isinstance(e, n.IndexVar) else None for e in s.indices]
    if None in names or len(set(names)) != len(names) or any(not isinstance(w, n.RangeConstraint) for w in s.wheres):
        return False
    e = s.rhs
    if not (isinstance(e, n.Select) and isinstance(e.then, n.Const) and isinstance(e.other, n.Const)):
        return False
    return any(_equal(p, u) is not None for p in _conjuncts(e.cond) for u in names) \
        and not any(isinstance(a, n.Access) and a.tensor == s.tensor for a in n.walk(e))


def _after(stmts, s) -> list:
    """The comprehensions after ``s`` in the whole body (any block)."""
    found, out = False, []
    for c in n.comprehensions(stmts):
        if found:
            out.append(c)
        found = found or c is s
    return out


def _reads(c: n.Comprehension, tensor: str) -> bool:
    return any(isinstance(a, n.Access) and a.tensor == tensor for w in (c.rhs, *c.wheres) for a in n.walk(w))


def _fit(c: n.Comprehension, tensor: str, rest: list) -> bool:
    """``c`` sums (``+``), sits in ``rest`` (the block after the temporary's
    statement, not nested), and reads ``tensor`` at plain index variables."""
    if c.reduction != "+" or not any(c is x for x in rest) or c.span is None \
            or any(not isinstance(w, n.RangeConstraint) for w in c.wheres):
        return False
    return all(all(isinstance(x, n.IndexVar) for x in a.indices)
               for a in n.walk(c.rhs) if isinstance(a, n.Access) and a.tensor == tensor)


def rewrite(d: n.Def, p: dict) -> n.Def:
    """``d`` (as parsed) without the temporaries of ``p``, their selects in the sums that read them."""
    defs = {}
    for c in n.comprehensions(d.body):
        if c.span in p["drop"]:
            defs[c.tensor] = c
    return replace(d, body=_block(d.body, p, defs))


def _block(stmts, p: dict, defs: dict) -> tuple:
    out = []
    for s in stmts:
        if isinstance(s, n.For):
            out.append(replace(s, body=_block(s.body, p, defs)))
        elif isinstance(s, n.If):
            out.append(replace(s, then=_block(s.then, p, defs), orelse=_block(s.orelse, p, defs)))
        elif isinstance(s, n.Comprehension) and s.span in p["drop"]:
            continue
        elif isinstance(s, n.Comprehension) and s.span in p["readers"]:
            out.append(replace(s, rhs=_inline(s.rhs, p["temps"], defs), wheres=s.wheres + p["readers"][s.span]))
        else:
            out.append(s)
    return tuple(out)


def _inline(e: n.Expr, temps: dict, defs: dict) -> n.Expr:
    if isinstance(e, n.Call) and e.name in temps:
        return substitute(defs[e.name].rhs, dict(zip(temps[e.name], e.args)))
    return n.map_children(e, lambda x: _inline(x, temps, defs))
