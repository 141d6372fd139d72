"""Scheduling each kernel with isl, and building its isl AST.

``schedule(model, fixed=None)`` is the stage entry point: it computes, for
every kernel, an isl schedule tree from the kernel's dependences (all of them
as validity, proximity and coincidence constraints, as TC does, so reduction
loops come out non-coincident and the coincident ones are parallel).  Every
band is then split into single-member bands, each under a mark ``par`` or
``seq`` saying whether that loop carries no dependence; the code generator
reads those marks.  ``fixed`` substitutes sizes before scheduling.

``build_ast(model, schedules, fixed=None)`` turns each schedule into an isl
AST under the kernel's context (sizes >= 1, loop variables in range, and the
fixed sizes, if any, substituted after scheduling).
"""
from __future__ import annotations

import islpy as isl

from ..sema.affine import isl_name, params_prefix
from .model import Kernel, Model

PARALLEL, SERIAL = "par", "seq"


def fixed_set(model: Model, fixed: dict[str, int] | None) -> isl.Set:
    """The parameter set ``{ : N = 4 and ... }`` for the fixed sizes."""
    params = model.ranges.params
    conds = [f"{isl_name(k)} = {int(v)}" for k, v in sorted((fixed or {}).items()) if k in params]
    return isl.Set.read_from_str(model.ctx, params_prefix(params) + "{ : " + (" and ".join(conds) or "true") + " }")


def schedule(model: Model, fixed: dict[str, int] | None = None) -> dict[int, isl.Schedule]:
    """One isl schedule per kernel, keyed by the kernel's index in ``model.kernels()``."""
    fix = fixed_set(model, fixed) if fixed else None
    return {i: _schedule_kernel(k, fix) for i, k in enumerate(model.kernels())}


def _schedule_kernel(k: Kernel, fix: isl.Set | None) -> isl.Schedule:
    dom, deps, context = k.domain, k.deps, k.context
    if fix is not None:
        dom, deps, context = dom.intersect_params(fix), deps.intersect_params(fix), context & fix
    sc = (isl.ScheduleConstraints.on_domain(dom).set_context(context)
          .set_validity(deps).set_coincidence(deps).set_proximity(deps))
    sched = sc.compute_schedule()
    # A hand-written walk rather than isl's node callbacks: an exception inside
    # an islpy callback is swallowed and can corrupt the process.
    return _mark(sched.get_root()).get_schedule()


def _mark(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Split every band below ``node`` into one-member bands, each under a
    ``par``/``seq`` mark; returns the node at ``node``'s position."""
    if node.get_type() != isl.schedule_node_type.band:
        for c in range(node.n_children()):
            node = _mark(node.child(c)).parent()
        return node
    n = node.band_n_member()
    coincident = [bool(node.band_member_get_coincident(i)) for i in range(n)]
    for _ in range(n - 1):
        node = node.band_split(1).child(0)
    node = _mark(node.child(0)).parent()
    ctx = node.get_ctx()
    for i in reversed(range(n)):
        node = node.insert_mark(isl.Id(PARALLEL if coincident[i] else SERIAL, context=ctx))
        if i > 0:
            node = node.parent()
    return node


def build_ast(model: Model, schedules: dict[int, isl.Schedule],
              fixed: dict[str, int] | None = None) -> dict[int, isl.AstNode]:
    """The isl AST of every kernel (see the module docstring)."""
    fix = fixed_set(model, fixed)
    out = {}
    for i, k in enumerate(model.kernels()):
        build = isl.AstBuild.from_context(k.context & fix.align_params(k.context.get_space()))
        out[i] = build.node_from_schedule(schedules[i])
    return out


def dump_schedules(model: Model, schedules: dict[int, isl.Schedule]) -> str:
    """The schedule trees, each under the sequential loops that enclose it."""
    lines = []
    for i, k in enumerate(model.kernels()):
        loops = "".join(f"for {lp.var} (sequential) > " for lp in k.loops)
        lines.append(f"# kernel {i}: {loops}{', '.join(s.name for s in k.stmts)}")
        lines.append(schedules[i].get_root().to_str())
    return "\n".join(lines) + "\n"
