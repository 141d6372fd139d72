"""The branches of a step under one loop nest, so the steps can run inside it.

A ``for`` whose body branches on its variable (``if t == 0 { s(b, t) = x(b, t) }
else { s(b, t) = s(b, t - 1) + x(b, t) }``, or a select on ``t`` that
:mod:`tcdsl.polyhedral.split` cut into one statement per case) gives a kernel
whose statements never run at the same step.  isl schedules each in a nest of
its own, under a ``set``, so the step has no single outer parallel loop and
the ``for`` cannot run inside one (``par_steps``, see
:func:`tcdsl.polyhedral.schedule._mark_steps`): one parallel region per
step, and a batch of rows scanned along their last axis paid a barrier for
every element (a batched cumsum of 256 x 1024 took 2.3-3.9 ms, 0.19 ms
once the steps run inside).

:func:`merged` puts the branches' loops under one band per level (the union
of their schedules): legal because at any one step only one branch has points,
so the branches share no dependence inside the kernel and each keeps its own
loop order.  isl's AST still tests the condition outside the loops, under the
band's mark; the CPU lowering runs the steps inside the shared parallel loop
and the test inside the steps (codegen/cpu_steps.py).
"""
from __future__ import annotations

import islpy as isl

NT = isl.schedule_node_type


def merged(root: isl.ScheduleNode) -> isl.ScheduleNode | None:
    """The schedule with the nests of a top-level ``set`` or ``sequence`` of
    branches fused level by level (unmarked, for ``mark_bands``), or None
    when the branches can run at one step or are not nests of one-member
    bands of equal depth."""
    top = root.child(0) if root.get_type() == NT.domain else root
    if top.get_type() not in (NT.set, NT.sequence) or top.n_children() < 2:
        return None
    chains, params = [], []
    for i in range(top.n_children()):
        f = top.child(i)
        chain = _chain(f.child(0)) if f.get_type() == NT.filter else None
        if not chain:
            return None
        chains.append(chain)
        params.append(f.get_domain().intersect(f.filter_get_filter()).params())
    if len({len(c) for c in chains}) != 1:
        return None
    for i in range(len(params)):
        for j in range(i):
            if not params[i].intersect(params[j]).is_empty():
                return None
    node = isl.Schedule.from_domain(top.get_domain()).get_root().child(0)
    for level in reversed(range(len(chains[0]))):
        mupa = chains[0][level][0]
        for c in chains[1:]:
            mupa = mupa.union_add(c[level][0])
        node = node.insert_partial_schedule(mupa).band_member_set_coincident(0, all(c[level][1] for c in chains))
    return node.get_schedule().get_root()


def _chain(node: isl.ScheduleNode) -> list[tuple[isl.MultiUnionPwAff, bool]] | None:
    """The one-member bands from ``node`` down to a leaf (marks skipped), each
    with its coincidence, or None when anything else is on the way."""
    out = []
    while node.get_type() != NT.leaf:
        t = node.get_type()
        if t == NT.band:
            if node.band_n_member() != 1:
                return None
            out.append((node.band_get_partial_schedule(), bool(node.band_member_get_coincident(0))))
        elif t != NT.mark or node.n_children() != 1:
            return None
        node = node.child(0)
    return out


def nests(top: isl.ScheduleNode, sets: bool) -> list[isl.ScheduleNode]:
    """The filters of the nests under ``top``, a sequence or set: its
    children, and with ``sets`` the children of a child that is itself a
    sequence or set (a branch of several statements, each in a nest of its
    own: a Viterbi step's max, argmax and sum under ``else``, beside the
    ``if t == 0`` branch's nest)."""
    out = []
    for i in range(top.n_children()):
        f = top.child(i)
        inner = f.child(0)
        if sets and inner.get_type() in (NT.sequence, NT.set):
            out.extend(inner.child(j) for j in range(inner.n_children()))
        else:
            out.append(f)
    return out
