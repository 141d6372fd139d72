"""A second shared batch loop under the first (schedule.py's ``_rows_fused``).

Attention's statements -- scores ``s(b, h, i, j)``, their row max, exps,
sums and the weighted sum ``o(b, i, h, d)`` -- each run in a nest of its own
under one shared parallel loop over the batch ``b``; every nest then sweeps
all heads of its batch element, ``H`` score matrices (12 x 256 x 256
floats: 3 MiB) written by one nest and read back by the next from beyond
L2.  :func:`heads_fused` shares a second loop among the nests, the heads,
where it can: each nest's loop over the values the first nest's second loop
takes (``h`` of ``o(b, i, h, d)`` is its third loop: any parallel loop of
the nest's leading band may be taken, since every dependence then stays at
one value of the pair), every dependence at one value of the pair, each
reduction's operands read at one value (a batch, not a weight shared by
all), and each nest holding a reduction left a parallel loop of its own for
its tiles' rows.  The statements of one head then run one after the other
while its matrices are in cache.
"""
from __future__ import annotations

import islpy as isl

from .schedule_counts import _has_reduction, _leading_parallel

NT = isl.schedule_node_type


def at_one_value(sc: isl.ScheduleConstraints, phi: isl.UnionMap, dims: int) -> bool:
    """Every dependence of ``sc`` stays at one value of the shared loops
    ``phi`` (``dims`` of them)."""
    zero = isl.Set.read_from_str(sc.get_ctx(), "{ [" + ", ".join(["0"] * dims) + "] }")
    sets = sc.get_validity().apply_domain(phi).apply_range(phi).deltas().get_set_list()
    return all(d.is_subset(zero.align_params(d.get_space())) for d in (sets.get_at(i) for i in range(sets.n_set())))


def _parallel_members(band: isl.ScheduleNode) -> list[int]:
    """The members after the first of a nest's band that are parallel and
    come before its first serial one."""
    out = []
    for m in range(1, band.band_n_member()):
        if not band.band_member_get_coincident(m):
            break
        out.append(m)
    return out


def _values(upa: isl.UnionPwAff, band: isl.ScheduleNode) -> isl.Set:
    return isl.Set.from_union_set(isl.UnionMap.from_union_pw_aff(upa).intersect_domain(band.get_domain()).range())


def heads_fused(sched: isl.Schedule | None, sc: isl.ScheduleConstraints, rows_below: dict,
                batch_reads: isl.UnionMap) -> isl.Schedule | None:
    """``sched`` (a shared loop over a sequence of nests) with a second
    shared loop below the first (see the module docstring); ``sched`` itself
    where there is none to share; None when ``sched`` is None."""
    if sched is None:
        return None
    top = sched.get_root().child(0)
    if top.get_type() != NT.band or top.n_children() != 1:
        return sched
    seq = top.child(0)
    if seq.get_type() != NT.sequence or seq.n_children() < 2:
        return sched
    bands = [seq.child(i).child(0) for i in range(seq.n_children())]
    if any(b.get_type() != NT.band for b in bands):
        return sched
    if any(_has_reduction(seq.child(i), rows_below) and _leading_parallel(b) < 3 for i, b in enumerate(bands)):
        return sched
    first = bands[0].band_get_partial_schedule()
    for m in _parallel_members(bands[0]):  # the first nest's loop to share, then the others' loops over its values
        inner = _shared(bands, _values(first.get_at(m), bands[0]))
        if inner is None:
            continue
        phi = isl.UnionMap.from_multi_union_pw_aff(top.band_get_partial_schedule().flat_range_product(inner))
        if not batch_reads.reverse().apply_range(phi).is_single_valued():
            continue
        if at_one_value(sc, phi, 2):
            return seq.insert_partial_schedule(inner).band_member_set_coincident(0, True).get_schedule()
    return sched


def _shared(bands, reference: isl.Set) -> isl.MultiUnionPwAff | None:
    """A parallel loop of each nest over the ``reference`` values, as one
    partial schedule; None where a nest has none."""
    second = None
    for band in bands:
        part = band.band_get_partial_schedule()
        picked = None
        for m in _parallel_members(band):
            vals = _values(part.get_at(m), band)
            if vals.is_equal(reference.intersect_params(vals.params())):
                picked = part.get_at(m)
                break
        if picked is None:
            return None
        second = picked if second is None else second.union_add(picked)
    return isl.MultiUnionPwAff.from_union_pw_aff(second)
