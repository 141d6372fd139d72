"""Scheduling each kernel with isl, for the GPU mapping (codegen/cuda.py).

``schedule(model, fixed=None)`` is the stage entry point for target
``cuda``: the GPU mapping wants the scheduler's outer coincident loops
outermost (they become the threads), while the CPU schedule
(:mod:`tcdsl.polyhedral.schedule`) may interchange loops for vectorization.
"""
from __future__ import annotations

import islpy as isl

from .schedule import fixed_set, mark_bands


def schedule(model, fixed: dict[str, int] | None = None) -> dict[int, isl.Schedule]:
    """One isl schedule per kernel for the GPU mapping (keyed like
    :func:`tcdsl.polyhedral.schedule.schedule`): every dependence as validity,
    proximity and coincidence constraint, as TC does, then every band split
    into one-member bands under ``par``/``seq`` marks.

    isl fuses as much as it can; when that leaves fewer than two outer
    coincident loops over some part of the kernel (the LSTM's gates and
    state update fused into one band parallel in ``b`` only), the kernel is
    also scheduled with outer coincidence and with each strongly connected
    component apart (isl's ``schedule_outer_coincidence`` and
    ``schedule_serialize_sccs``), and the schedule with the most outer
    parallelism (see :func:`outer_parallelism`) wins, the most fused on ties
    -- the spirit of TC's ``Preserve3Coincident`` fusion strategy."""
    fix = fixed_set(model, fixed) if fixed else None
    out = {}
    for i, k in enumerate(model.kernels()):
        dom, deps, context = k.domain, k.deps, k.context
        if fix is not None:
            dom, deps, context = dom.intersect_params(fix), deps.intersect_params(fix), context & fix
        sc = (isl.ScheduleConstraints.on_domain(dom).set_context(context)
              .set_validity(deps).set_coincidence(deps).set_proximity(deps))
        best = sc.compute_schedule()
        depth = outer_parallelism(best.get_root())
        if depth < 2:
            for settings in ({"outer_coincidence": 1}, {"outer_coincidence": 1, "serialize_sccs": 1}):
                other = _with_isl_options(model.ctx, settings, sc.compute_schedule)
                d = outer_parallelism(other.get_root())
                if d > depth:
                    best, depth = other, d
        out[i] = mark_bands(best.get_root()).get_schedule()
    return out


def outer_parallelism(node: isl.ScheduleNode) -> int:
    """The number of outer coincident loops that the mapping can flatten onto
    threads, at the worst place of the schedule tree (sequence and set
    children are launched apart; a band counts its leading coincident
    members, and goes on into a child band when all of its are)."""
    t = node.get_type()
    T = isl.schedule_node_type
    if t == T.band:
        n = node.band_n_member()
        k = 0
        while k < n and node.band_member_get_coincident(k):
            k += 1
        if k == n and node.n_children() and node.child(0).get_type() == T.band:
            return k + outer_parallelism(node.child(0))
        return k
    if t in (T.sequence, T.set):
        return min(outer_parallelism(node.child(c)) for c in range(node.n_children()))
    if t == T.leaf or not node.n_children():
        return 0
    return outer_parallelism(node.child(0))


def _with_isl_options(ctx: isl.Context, settings: dict[str, int], f):
    """``f()`` with isl's ``schedule_<name>`` options set, then restored."""
    saved = {k: getattr(ctx, f"get_schedule_{k}")() for k in settings}
    try:
        for k, v in settings.items():
            getattr(ctx, f"set_schedule_{k}")(v)
        return f()
    finally:
        for k, v in saved.items():
            getattr(ctx, f"set_schedule_{k}")(v)
