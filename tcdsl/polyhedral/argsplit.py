"""An arg-reduction read across its rows, as reductions over the columns.

``bp(b, j) argmax=! v(b, i) + trans(i, j)`` (Viterbi's back-pointers) keeps
one index per output element and compares each candidate with the value at
the index held so far (sema/sizes.py ``arg_reduction``): the CPU runs it
element by element with the reduction in vector lanes, and ``trans(i, j)``
moves by a whole row along ``i``: a gather per lane (86x the time of the
same statement with ``max=!``, whose columns ``j`` run in vector lanes and
register tiles).  ``plan(checked, ranges)`` finds such statements: an
``argmax=!``/``argmin=!`` whose last lhs index is one of its variables,
``j``, along which every read is contiguous or invariant (one of them moving),
and some read of which is not contiguous along the reduction variable ``i``.
``rewrite(def, plan)`` writes each as reductions over ``i`` for every
element at once, whose columns then run in vector loops and register tiles
like any sum (for ``argmax=!``; ``argmin=!`` alike)::

    bp_first(b, j) min=! (e > -inf || e < inf) ? 2 * i + 1 : 2 * i
    bp_best(b, j)  max=! e > -inf ? e : -inf
    bp(b, j)       min=! (e > -inf ? e : -inf) == bp_best(b, j) ? i : 2147483647
    bp(b, j) = bp_first(b, j) == 2147483647 ? -1
             : bp_first(b, j) % 2 == 0 ? bp_first(b, j) / 2 : bp(b, j)

``bp_first`` is twice the first index, plus one where its value is no NaN
(ordered compares, false for a NaN: a simplifier folds ``e != e``, and
``fmax`` would bind a Let that a register tile cannot unroll); ``bp_best``
the largest value that is no NaN.  The same index as the one pass: the
first of the largest values, a NaN skipped unless it comes first (then it
stays), -1 over an empty range (an integer ``e`` has no NaN: its plain
maximum, and the first index alone).  ``e`` is computed three times
instead of once.  Part of the ``transpose`` option.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..source import Span
from ..syntax import nodes as n
from .layout import _fresh, _names
from .strides import unit_or_invariant

NONE = 2147483647  # no index (the identity of an int32 min=!)


@dataclass(frozen=True)
class Split:
    var: str  # the reduction variable
    own: tuple  # the temporaries' indices: the lhs's own index variables, in order
    is_float: bool


def plan(checked, ranges=None) -> dict:
    """Statement span -> Split."""
    out: dict = {}
    for s, loops in n.comprehensions_in_loops(checked.node.body):
        if s.op not in ("argmax=!", "argmin=!") or s.span is None or len(s.reduction_vars) != 1:
            continue
        (i,) = s.reduction_vars
        if not s.indices or not isinstance(s.indices[-1], n.IndexVar) or s.indices[-1].name in loops:
            continue
        j = s.indices[-1].name
        own = [x.name for x in s.indices if isinstance(x, n.IndexVar) and x.name not in loops]
        # every lhs index is one of its variables or free of them (a loop variable, a constant)
        moving = lambda x: any(isinstance(y, n.IndexVar) and y.name not in loops for y in n.walk(x))  # noqa: E731
        if len(set(own)) != len(own) or any(not isinstance(x, n.IndexVar) and moving(x) for x in s.indices):
            continue
        e = _value(s.rhs)
        if e is None:
            continue
        reads = [a for a in n.walk(e) if isinstance(a, n.Access)]
        if any(a.tensor == s.tensor for a in reads):
            continue
        moves = lambda a, v: any(isinstance(y, n.IndexVar) and y.name == v  # noqa: E731
                                 for x in a.indices for y in n.walk(x))
        if not any(moves(a, j) for a in reads) or not all(unit_or_invariant(a, j) for a in reads):
            continue
        if all(unit_or_invariant(a, i) for a in reads):
            continue  # contiguous along the reduction: its vector lanes serve
        out[s.span] = Split(i, tuple(own), str(e.dtype or "").startswith(("float", "bfloat")))
    return out


def _value(rhs: n.Expr) -> n.Expr | None:
    """``e`` of the checked arg-reduction ``first ? j : (e > e@held ? j : held)``."""
    inner = rhs.other if isinstance(rhs, n.Select) else None
    if isinstance(inner, n.Select) and isinstance(inner.cond, n.Binary) and inner.cond.op in (">", "<"):
        return inner.cond.lhs
    return None


def rewrite(d: n.Def, p: dict) -> n.Def:
    """``d`` (as parsed) with each statement of ``p`` as its four statements."""
    taken = _names(d)
    return replace(d, body=n.map_comprehensions(d.body, lambda s: _split(s, p[s.span], taken) if s.span in p else [s]))


def _split(s: n.Comprehension, x: Split, taken: set) -> list[n.Comprehension]:
    sp = [Span(s.span.source, s.span.start, s.span.start + k) for k in range(4)]
    e, i, big = s.rhs, x.var, n.Const(NONE, span=s.span)
    first, best = _fresh(f"{s.tensor}_first", taken), _fresh(f"{s.tensor}_best", taken)
    own = tuple(n.Ident(v, span=s.span) for v in x.own)
    at = lambda name: n.Call(name, own, span=s.span)  # noqa: E731
    idx, here = n.Ident(i, span=s.span), n.Call(s.tensor, s.indices, span=s.span)
    c = lambda v: n.Const(v, span=s.span)  # noqa: E731
    bin_ = lambda op, a, b: n.Binary(op, a, b, span=s.span)  # noqa: E731
    sel = lambda cond, a, b: n.Select(cond, a, b, span=s.span)  # noqa: E731
    lo = s.op == "argmin=!"
    inf = c(float("inf"))
    worst = inf if lo else n.Unary("-", inf, span=s.span)
    lhs_ranges = tuple(w for w in s.wheres if not (isinstance(w, n.RangeConstraint) and w.var == i))
    if x.is_float:
        # ordered compares, false for a NaN: no v != v (a simplifier folds it), no fmax (a Let)
        number = bin_("||", bin_(">", e, n.Unary("-", inf, span=s.span)), bin_("<", e, inf))
        value = sel(bin_("<" if lo else ">", e, worst), e, worst)
        # twice the first index, plus 1 where its value is no NaN
        start = sel(number, bin_("+", bin_("*", c(2), idx), c(1)), bin_("*", c(2), idx))
        last = sel(bin_("==", at(first), big), c(-1),
                   sel(bin_("==", bin_("%", at(first), c(2)), c(0)), bin_("/", at(first), c(2)), here))
    else:
        value, start = e, sel(bin_("==", e, e), idx, idx)
        last = sel(bin_("==", at(first), big), c(-1), here)
    return [
        n.Comprehension(first, own, "min=!", start, s.wheres, span=sp[0]),
        n.Comprehension(best, own, "min=!" if lo else "max=!", value, s.wheres, span=sp[1]),
        n.Comprehension(s.tensor, s.indices, "min=!", sel(bin_("==", value, at(best)), idx, big), s.wheres,
                        span=sp[2]),
        n.Comprehension(s.tensor, s.indices, "=", last, lhs_ranges, span=sp[3]),
    ]
