"""Band members that isl skewed by an outer one, unskewed.

isl's scheduler keeps dependence distances small: a sum over a tubelet,
``tok(b, t, i, j, e) +=! x(b, c, 2 * t + kt, ...) * w(e, c, kt, kh, kw)``
with ``kt`` in ``0:2``, got the loops ``c`` and then ``c + kt`` (the
accumulation from ``(c, 1, ...)`` to ``(c + 1, 0, ...)`` is at distance 0
along ``c + kt``): a loop from ``c`` to ``c + 1`` whose reads of ``w`` at
``kt = c5 - c4`` no longer simplified, no panel copied, 30x slower than with
``kt`` as a size.  :func:`unskewed` subtracts from (or adds to) a band
member an enclosing member wherever that leaves fewer variables in the
statements' schedule functions (``c + kt`` below ``c``: ``kt``).  The
schedule stays valid: a dependence not yet carried by the outer members has
the same distance along the new member as along the old one (the outer
member's distance is 0), and one already carried needs nothing more.
"""
from __future__ import annotations

import islpy as isl

BAND = isl.schedule_node_type.band


def unskewed(node: isl.ScheduleNode, outer: tuple = ()) -> isl.ScheduleNode:
    """Every one-member band below ``node`` (bands split by schedule._split)
    unskewed against the members enclosing it; returns the node at
    ``node``'s position."""
    if node.get_type() == BAND and node.band_n_member() == 1:
        member = node.band_get_partial_schedule().get_union_pw_aff(0)
        best = member
        for o in reversed(outer):
            o = o.intersect_domain(member.domain())
            for cand in (best.sub(o), best.add(o)):
                (n, const), (n0, const0) = _terms(cand), _terms(best)
                if n < n0 and const <= const0:  # (not a loop repeated inside itself made a constant)
                    best = cand
        if best is not member:
            coincident, permutable = node.band_member_get_coincident(0), node.band_get_permutable()
            node = node.delete().insert_partial_schedule(isl.MultiUnionPwAff.from_union_pw_aff(best))
            node = node.band_member_set_coincident(0, coincident).band_set_permutable(permutable)
        outer = outer + (best,)
    for c in range(node.n_children()):
        node = unskewed(node.child(c), outer).parent()
    return node


def _terms(upa: isl.UnionPwAff) -> tuple[int, int]:
    """The variables with a nonzero coefficient, summed over the pieces, and
    the pieces with none."""
    count = [0, 0]

    def piece(_set, aff):
        n = sum(1 for i in range(aff.dim(isl.dim_type.in_)) if not aff.get_coefficient_val(isl.dim_type.in_, i).is_zero())
        count[0] += n
        count[1] += n == 0

    def pw(p):
        p.foreach_piece(piece)
    upa.foreach_pw_aff(pw)
    return count[0], count[1]
