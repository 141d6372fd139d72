"""A term added to a sum right after it becomes the sum's start.

Users add a bias after a convolution or a linear layer as a statement of its
own::

    y(n, h, v, c) +=! x(n, h + kh - 1, v + kv - 1, c) * w(kh, kv, c) where ...
    y(n, h, v, c) = y(n, h, v, c) + b(c)

The sum first fills ``y`` with zeros, then its register tiles load ``y``,
add the products and store it, then the bias is one more pass over ``y``
(reading and writing all of it: a 3x3 depthwise convolution channels-last
at (8, 56, 56, 128), 1.8 ms, against 1.3 ms without the bias statement).
``plan(checked, ranges)`` finds each ``+=!`` statement at the top of the
``def`` followed by an ``=`` statement of the same tensor and lhs variables
(no ``where`` range) whose right side is ``T(vars) + e`` or ``e + T(vars)``
with ``e`` reading no tensor the sum writes; ``rewrite(def, plan)`` starts
the sum from ``e``::

    y(n, h, v, c) = b(c) where n in 0:N, h in 0:H, v in 0:W, c in 0:C
    y(n, h, v, c) += x(n, h + kh - 1, v + kv - 1, c) * w(kh, kv, c) where ...

(the ranges those of ``y``'s dimensions).  The driver keeps the rewritten
program only where the start runs exactly the instances of the addition and
the sum those of the sum as written, so that every element is the start
plus the same products in the same order: ``b + (p1 + p2 + ...)`` becomes
``(b + p1) + p2 + ...``, a difference of rounding only.  Part of the
``factor`` option, after the factors of the sums are applied after them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..syntax import nodes as n
from .hoist import equal_sets


@dataclass(frozen=True)
class Start:
    sum_span: object  # of the +=! statement
    add_span: object  # of the = statement after it
    addend_left: bool  # ``e + T(vars)``: the addend is the left operand
    extents: tuple  # the sizes of the tensor's dimensions (parsed expressions)


def _addend(s: n.Comprehension, tensor: str, lhs: list[str]) -> bool | None:
    """Whether ``s`` (``T(vars) = ...``) adds to its own element on the left
    (``e + T(vars)``: True), on the right (False), or is no such addition (None)."""
    if not (isinstance(s.rhs, n.Binary) and s.rhs.op == "+"):
        return None

    def own(e) -> bool:
        return (isinstance(e, n.Access) and e.tensor == tensor
                and [x.name if isinstance(x, n.IndexVar) else None for x in e.indices] == lhs)

    for left, (mine, other) in ((False, (s.rhs.lhs, s.rhs.rhs)), (True, (s.rhs.rhs, s.rhs.lhs))):
        if own(mine) and not any(isinstance(x, n.Access) and x.tensor == tensor for x in n.walk(other)):
            return left
    return None


def plan(checked, ranges) -> list[Start]:
    """The sums to start from the term added right after them."""
    from .hoist import _parsed

    out: list[Start] = []
    body = checked.node.body
    for s1, s2 in zip(body, body[1:]):
        if not (isinstance(s1, n.Comprehension) and isinstance(s2, n.Comprehension)):
            continue
        if s1.op != "+=!" or s2.op != "=" or s1.tensor != s2.tensor or s2.wheres or None in (s1.span, s2.span):
            continue
        lhs = [x.name if isinstance(x, n.IndexVar) else None for x in s1.indices]
        if None in lhs or len(set(lhs)) != len(lhs) or [getattr(x, "name", None) for x in s2.indices] != lhs:
            continue
        if any(isinstance(x, n.Access) and x.tensor == s1.tensor for x in n.walk(s1.rhs)):
            continue
        left = _addend(s2, s1.tensor, lhs)
        if left is not None:
            out.append(Start(s1.span, s2.span, left, tuple(_parsed(x, {}, ranges.checked.derived)
                                                                  for x in ranges.extent_exprs(s1.tensor))))
    return out


def rewrite(d: n.Def, p: list[Start]) -> n.Def:
    """``d`` (as parsed) with each planned sum started from its addend."""
    sums = {x.sum_span: x for x in p}
    adds = {x.add_span: x for x in p}
    body: list = []
    for st in d.body:
        if isinstance(st, n.Comprehension) and st.span in adds:
            continue  # (now the sum's start)
        start = sums.get(st.span) if isinstance(st, n.Comprehension) else None
        if start is None:
            body.append(st)
            continue
        add = next(x for x in d.body if isinstance(x, n.Comprehension) and x.span == start.add_span)
        e = add.rhs.lhs if start.addend_left else add.rhs.rhs
        sp = add.span
        wheres = tuple(n.RangeConstraint(x.name, n.Const(0, span=sp), hi, span=sp)
                       for x, hi in zip(st.indices, start.extents))
        lets = tuple(w for w in add.wheres if isinstance(w, n.Let))
        body.append(n.Comprehension(st.tensor, st.indices, "=", e, wheres + lets, span=sp))
        body.append(replace(st, op="+="))
    return replace(d, body=tuple(body))


def kept(old, new, model, p: list[Start]) -> bool:
    """The start of each sum runs the instances of the addition it replaces
    and the sum those it ran (``old``, ``new``: RangeInfo; driver._by)."""
    by_span = {s.comp.span: s for s in new.stmts}
    old_by_span = {s.comp.span: s for s in old.stmts}
    for x in p:
        pairs = ((old_by_span[x.add_span].domain, by_span[x.add_span].domain),
                 (old_by_span[x.sum_span].domain, by_span[x.sum_span].domain),
                 (old_by_span[x.sum_span].init_domain, by_span[x.add_span].domain))
        for a, b in pairs:
            a, b = a.reset_tuple_id(), b.reset_tuple_id()
            if not equal_sets(a, b):
                return False
    return True
