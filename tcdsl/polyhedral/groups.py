"""Sums over groups of contiguous elements, summed per element first.

A group norm over channels-last activations, as users write it::

    mean(n, g) +=! x(n, h, v, g * 8 + k) / (H * W * 8) where g in 0:C / 8, k in 0:8

sums, for each group ``g``, 8 contiguous channels at every pixel: each group
is a pass of its own over the whole image, 32 bytes of every 1 KiB row, a
scalar loop of 8 (5x ``F.group_norm`` at (8, 32, 32, 256)).  Summed over the
pixels per channel first, then over each group's channels, it is a column
sum along the rows of ``x`` (one pass, in vectors) and a short sum::

    mean_g(n, c) +=! x(n, h, v, c) / (H * W * 8) where c in 0:C / 8 * 8
    mean(n, g) +=! mean_g(n, g * 8 + k) where g in 0:C / 8, k in 0:8

``plan(checked, ranges)`` finds each ``+=!`` (``max=!``, ``min=!``) statement at the
top of the ``def`` whose right side reads a tensor at a last index ``g * K
+ k``: ``g`` one of its lhs variables and ``k`` a reduction variable, both
ranged by ``where`` clauses from 0 (``k`` to a constant ``K`` >= 2), and
other reduction variables that this index does not use, not all of them
short (a 2x2 max pooling, ``x(n, c, 2 * h + i, 2 * v + j)``, stays as written).  ``rewrite(def,
plan)`` computes the sum over the other reduction variables per element
``c = g * K + k`` in a temporary (``g`` and ``k`` elsewhere in the statement
become ``c / K`` and ``c % K``), then the sum over ``k``.  The results
differ by rounding only.  Part of the ``chain`` option (a sum computed as
two sums; ``options={"chain": False}`` leaves programs as written).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..syntax import nodes as n

OPS = ("+=!", "max=!", "min=!")
# The other reduction variables must sum more than a window of this many
# values each (a 2x2 pooling's rows stay as written).
SHORT = 16


@dataclass(frozen=True)
class Group:
    g: str  # the lhs variable of the groups
    k: str  # the reduction variable over a group's elements
    size: int  # K: elements per group


def _range(s: n.Comprehension, var: str) -> n.RangeConstraint | None:
    found = [w for w in s.wheres if isinstance(w, n.RangeConstraint) and w.var == var]
    if len(found) != 1 or not (isinstance(found[0].lo, n.Const) and found[0].lo.value == 0):
        return None
    return found[0]


def _short(s: n.Comprehension, var: str) -> bool:
    """``var`` takes at most SHORT values, by a ``where`` range of constants."""
    return any(isinstance(w, n.RangeConstraint) and w.var == var and isinstance(w.lo, n.Const)
               and isinstance(w.hi, n.Const) and w.hi.value - w.lo.value <= SHORT for w in s.wheres)


def plan(checked, ranges=None) -> dict[object, Group]:
    """Statement span -> its group (see above)."""
    out: dict[object, Group] = {}
    for s in checked.node.body:
        if not isinstance(s, n.Comprehension) or s.op not in OPS or s.span is None:
            continue
        lhs = [x.name for x in s.indices if isinstance(x, n.IndexVar)]
        red = set(s.reduction_vars)
        if len(lhs) != len(s.indices) or len(set(lhs)) != len(lhs) or len(red) < 2:
            continue
        reads = [x for x in n.walk(s.rhs) if isinstance(x, n.Access)]
        if any(a.tensor == s.tensor for a in reads):
            continue
        for a in reads:
            form = n.linear(a.indices[-1]) if a.indices else None
            if not form or 1 in form or len(form) != 2:
                continue
            ks = [v for v, c in form.items() if c == 1 and v in red]
            gs = [v for v, c in form.items() if v in lhs and isinstance(c, int) and c >= 2]
            if len(ks) != 1 or len(gs) != 1:
                continue
            k, g, size = ks[0], gs[0], form[gs[0]]
            rk, rg = _range(s, k), _range(s, g)
            if rk is None or rg is None or not (isinstance(rk.hi, n.Const) and rk.hi.value == size):
                continue
            if all(_short(s, v) for v in red - {k}):
                continue  # a pooling window (``x(n, c, 2 * h + i, 2 * v + j)``): its rows are short too
            if not _in_groups_only(s.rhs, g, k, size):
                continue  # (a factor that varies with ``k`` alone, a pixel_unshuffle's weight ``w(o, 4 * c + 2 * i + j)``)
            out[s.span] = Group(g, k, size)  # (the other reduction variables are not in this index)
            break
    return out


def _in_groups_only(e: n.Expr, g: str, k: str, size: int) -> bool:
    """``k`` appears in ``e`` only in indices ``g * size + k``: per element
    ``c`` the term is the same function of ``c`` as of ``(g, k)``.  A
    pixel_unshuffle fused into a 1x1 convolution, ``x(b, c, 2 * h + i, 2 * v +
    j) * w(o, 4 * c + 2 * i + j)``, would read ``w`` at ``c % 2`` along its
    vector loop (8.4 ms, 14x torch; 0.59 as written)."""
    if isinstance(e, n.Access):
        return all(n.linear(i) == {g: size, k: 1} or not any(isinstance(x, n.IndexVar) and x.name == k
                                                             for x in n.walk(i)) for i in e.indices)
    if isinstance(e, n.IndexVar):
        return e.name != k
    return all(_in_groups_only(c, g, k, size) for c in n.children(e) if isinstance(c, n.Expr))


def rewrite(d: n.Def, p: dict[object, Group]) -> n.Def:
    """``d`` (as parsed) with each planned sum computed per element first."""
    from .layout import _fresh, _names

    taken = _names(d) | {c.tensor for c in n.walk(d) if isinstance(c, n.Comprehension)}
    body: list = []
    for st in d.body:
        grp = p.get(st.span) if isinstance(st, n.Comprehension) else None
        if grp is None:
            body.append(st)
            continue
        sp = st.span
        temp, c = _fresh(f"{st.tensor}_g", taken), _fresh("c", taken)
        size = n.Const(grp.size, span=sp)

        def element(e):
            """``e`` with the group's element as ``c``: ``g * K + k`` -> ``c``, ``g`` -> ``c / K``, ``k`` -> ``c % K``."""
            if isinstance(e, n.Expr) and n.linear(e) == {grp.g: grp.size, grp.k: 1}:
                return n.Ident(c, span=e.span)
            if isinstance(e, n.Ident) and e.name == grp.g:
                return n.Binary("/", n.Ident(c, span=e.span), size, span=e.span)
            if isinstance(e, n.Ident) and e.name == grp.k:
                return n.Binary("%", n.Ident(c, span=e.span), size, span=e.span)
            return n.map_children(e, element)

        rg = next(w for w in st.wheres if isinstance(w, n.RangeConstraint) and w.var == grp.g)
        rk = next(w for w in st.wheres if isinstance(w, n.RangeConstraint) and w.var == grp.k)
        rest = tuple(w for w in st.wheres if w is not rg and w is not rk)
        lhs = [x for x in st.indices if not (isinstance(x, n.Ident) and x.name == grp.g)]
        c_range = n.RangeConstraint(c, n.Const(0, span=sp), n.Binary("*", rg.hi, size, span=sp), span=sp)
        wheres = tuple(replace(w, expr=element(w.expr)) if isinstance(w, n.Let) else w for w in rest)
        # the first sum carries the span of its right side (a statement's span names it in the passes after this one)
        here = st.rhs.span or sp
        body.append(n.Comprehension(temp, tuple(lhs) + (n.Ident(c, span=here),), st.op, element(st.rhs),
                                    (c_range,) + wheres, span=here))
        at = n.Binary("+", n.Binary("*", n.Ident(grp.g, span=sp), size, span=sp), n.Ident(grp.k, span=sp), span=sp)
        read = n.Call(temp, tuple(lhs) + (at,), span=sp)
        body.append(replace(st, rhs=read, wheres=(rg, rk)))
    return replace(d, body=tuple(body))
