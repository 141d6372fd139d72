"""What makes a statement fit for a register tile (codegen/cpu_tiles.py),
checked on its isl relations."""
from __future__ import annotations

import islpy as isl

from ..polyhedral.model import IslStmt


def accumulates_privately(s: IslStmt) -> bool:
    """``S`` reads no element it writes except the one it accumulates into
    (its first read, added for the reduction): the accumulator may then live
    in registers while ``S`` runs over its reduction variables."""
    if s.is_init or s.info.comp.reduction in (None, "argmax", "argmin") or not s.writes:
        return False
    tensor = s.writes[0].get_tuple_name(isl.dim_type.out)
    if any(m.get_tuple_name(isl.dim_type.out) == tensor for m in s.may_reads):
        return False
    written = s.writes[0].range()
    for m in s.reads[1:]:
        if m.get_tuple_name(isl.dim_type.out) == tensor and not m.range().intersect(written).is_empty():
            return False
    return True


def runs_in_one_step(s: IslStmt, loop_var: str) -> bool:
    """``S`` runs at a single value of the enclosing sequential loop's variable
    (the ``t == 0`` branch of a recurrence): not worth a register tile's code."""
    d = s.domain.params()
    i = d.find_dim_by_name(isl.dim_type.param, loop_var)
    if i < 0:
        return False
    d = d.move_dims(isl.dim_type.set, 0, isl.dim_type.param, i, 1)
    d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
    return d.is_singleton()
