"""Silent narrowing: where TC's range inference leaves out what was meant.

``check_narrowing(model)`` is the stage entry point; it runs after
``build_model`` (beside ``check_bounds``) and returns what it found, also
issued as :class:`~tcdsl.errors.TcWarning`.  TC's rule stays: every read
constrains the range of its variables, also a read under ``c ? a : b``.
Three of its consequences are easy to miss, and each gets a located warning
that shows the inferred range and the ``where`` clause that would widen it:

* a reduction variable whose range ends up smaller than a dimension it
  indexes directly, for some sizes: in ``y(t) +=! (t + k - K + 1 >= 0 ?
  x(t + k - K + 1) : 0) * w(k) where t in 0:L`` the read of ``x`` narrows
  ``k`` to ``[K - 1, K)``, and the sum uses one tap of ``w``;
* an output element that no statement writes, where a statement's lhs
  variable was narrowed by inference and would write it with a wider range
  (a recurrence ``alpha(t, s) = ... alpha(t - 1, s - 1) ...`` that never
  writes ``alpha(t, 0)``);
* an element that an update of a tensor written before skips, where its lhs
  variable was narrowed so: ``u(i) = u(i) + (i > 0 ? e(i - 1) : 5)`` after
  ``u(i) = u0(i)`` updates ``u(i)`` for ``i`` in ``[1, N)`` only, and
  ``u(0)`` keeps the value before the update (a multigrid prolongation's
  correction that missed the first rows and the last).

Variables with a ``where`` range are what the user asked for and are not
reported; neither are holes no narrowed variable explains (``for t in 1:N``
writing ``D(t)``).  ``options={"strict_bounds": True}`` does not make these
errors: the programs are valid TC.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import islpy as isl

from ..errors import TcWarning, caller_level
from ..sema.affine import NotAffine, isl_name, params_prefix
from ..sema.check import dim_isl, lhs_index_var
from ..sema.ranges import RangeInfo, StmtInfo, readable
from ..source import Span
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc
from .dataflow import box, program_schedule
from .model import Model

_RULE = "every read constrains the range of its variables, also a read under '?:'"
_RULE_LOGIC = "every read constrains the range of its variables, also a read on the right of '&&' or '||'"


def _rule(st: StmtInfo, read: n.Access | None) -> str:
    """The rule as it applies to ``read``: under '?:', or on the right of '&&' / '||'."""
    def under_select(e: n.Expr, inside: bool) -> bool | None:
        if e is read:
            return inside
        for c in n.children(e):
            if isinstance(c, n.Expr):
                found = under_select(c, inside or (isinstance(e, n.Select) and c is not e.cond))
                if found is not None:
                    return found
        return None
    return _RULE_LOGIC if read is not None and under_select(st.comp.rhs, False) is False else _RULE


@dataclass(frozen=True)
class Narrowing:
    """One finding: where, and what (the inferred range and the fix)."""

    span: Span | None
    what: str

    @property
    def message(self) -> str:
        return self.span.format(self.what) if self.span is not None else self.what


def check_narrowing(model: Model) -> list[Narrowing]:
    """Warn about narrowed reduction variables and unwritten output elements
    (see the module docstring); returns the findings."""
    r = model.ranges
    found: list[Narrowing] = []
    for st in r.stmts:
        found += _reduction(r, st)
    holes = _holes(model)
    found += holes + _skipped(model, {f.span for f in holes})
    for f in found:
        warnings.warn(TcWarning(f.message), stacklevel=caller_level())
    return found


# ------------------------------------------------------- reduction variables
def _reduction(r: RangeInfo, st: StmtInfo) -> list[Narrowing]:
    out = []
    given = _where_vars(st)
    accesses = [x for x in n.walk(st.comp.rhs) if isinstance(x, n.Access)]
    for v in st.comp.reduction_vars:
        if v in given:
            continue
        lo, hi = st.ranges[v]
        for acc in accesses:
            dims = [k for k, e in enumerate(acc.indices) if isinstance(e, n.IndexVar) and e.name == v]
            if not dims:
                continue
            k = dims[0]
            ext = _extent(r, acc.tensor, k, lo)
            zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(lo.get_domain_space()))
            narrow = (lo.gt_set(zero) | hi.lt_set(ext)) & st.domain.params()
            # sizes for which the sum has no term at all while its output has elements and the
            # dimension does too (every tap narrowed away: the output is all zeros)
            empty = _empty_sum(st, ext)
            empty = empty & _empty_range(st, v).align_params(empty.get_space())
            if narrow.is_empty() and empty.is_empty():
                continue
            culprit = _guarded_read(st, v)
            if culprit is None:
                continue  # narrowed by a read that is always made: what TC users expect
            rng = _range_text(st, v)
            if narrow.is_empty():
                narrow, rng = empty, "an empty range"
            size = _bound_text(_at_large_sizes(r.extent_exprs(acc.tensor)[k]))
            what = (f"range inference narrows the reduction variable '{v}' to {rng} "
                    f"({_sizes(r, narrow)}), but '{v}' indexes all of dimension {k} of '{acc.tensor}' "
                    f"(size {size}): {_rule(st, culprit)}"
                    + f" (here {_text(culprit)})"
                    + f"; 'where {v} in 0:{size}' would widen it")
            out.append(Narrowing(culprit.span or acc.span, what))
            break
    return out


def _empty_sum(st: StmtInfo, ext: isl.PwAff) -> isl.Set:
    """The sizes (and loop values) at which ``st``'s output has elements, the
    dimension of extent ``ext`` too, and the sum's domain is empty."""
    if st.init_domain is None:
        return isl.Set.empty(st.domain.params().get_space())
    lhs = st.init_domain.params()
    ext = ext.align_params(lhs.get_space())
    zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(ext.get_domain_space()))
    wide = ext.gt_set(zero).align_params(lhs.get_space())
    return (lhs & wide).subtract(st.domain.params().align_params(lhs.get_space())).coalesce()


def _empty_range(st: StmtInfo, v: str) -> isl.Set:
    """The sizes (and loop values) at which ``v``'s own range is empty: an
    empty sum is blamed on the variable that has no value, not on another."""
    has = st.var_sets[v].params()
    return st.params_set.align_params(has.get_space()).subtract(has.align_params(st.params_set.get_space()))


def _extent(r: RangeInfo, tensor: str, k: int, like: isl.PwAff) -> isl.PwAff:
    info = r.checked.tensors[tensor]
    if info.dims is not None:
        ext = isl.PwAff.read_from_str(r.ctx, params_prefix(r.params) + "{ [(" + dim_isl(info.dims[k]) + ")] }")
    else:
        ext = r.extents[tensor][k]
    return ext.align_params(like.get_domain_space().params()).align_params(like.get_space().params())


# ------------------------------------------------------------ output holes
def _holes(model: Model) -> list[Narrowing]:
    program = program_schedule(model)
    if program is None:
        return []
    r = model.ranges
    out = []
    for tensor in r.checked.outputs + tuple(r.checked.temps):
        try:
            hole = _hole(r, program, tensor)
            if hole is not None and tensor not in r.checked.outputs:
                hole = _read(program, tensor, hole)  # a temporary's hole matters where it is read
            if hole is not None:
                out += _blame(r, program, tensor, hole)
        except (isl.Error, NotAffine):
            continue  # not analysable: no warning
    return out


def _hole(r: RangeInfo, program, tensor: str) -> isl.Set | None:
    """The elements of ``tensor``'s box no statement writes (over the sizes), or None."""
    accesses = program.accesses(tensor)
    if accesses is None or accesses[0] is None:
        return None
    whole = box(r, tensor)
    written = accesses[0].range().align_params(whole.get_space())
    hole = isl.UnionSet.from_set(whole.align_params(written.get_space())).subtract(written)
    if hole.is_empty():
        return None
    return hole.extract_set(whole.align_params(hole.get_space()).get_space())


def _read(program, tensor: str, hole: isl.Set) -> isl.Set | None:
    """The elements of ``hole`` that some statement reads, or None."""
    reads = program.accesses(tensor)[1]
    if reads is None:
        return None
    read = reads.range().align_params(hole.get_space())
    part = isl.UnionSet.from_set(hole.align_params(read.get_space())).intersect(read)
    if part.is_empty():
        return None
    return part.extract_set(hole.align_params(part.get_space()).get_space())


def _blame(r: RangeInfo, program, tensor: str, hole: isl.Set) -> list[Narrowing]:
    """The statements whose narrowed lhs variable, widened, would write into ``hole``."""
    for st in r.stmts:
        if st.comp.tensor != tensor:
            continue
        written = program.statement_writes(st.name)
        if written is None:
            continue
        given = _where_vars(st)
        loops = tuple(lp.var for lp in st.loops)
        for d, e in enumerate(st.comp.indices):
            v = lhs_index_var(e, loops)
            if v is None or v in given or v in st.comp.reduction_vars or _guarded_read(st, v) is None:
                continue
            widened = written.eliminate(isl.dim_type.set, d, 1).align_params(hole.get_space())
            near = widened.align_params(hole.get_space()) & hole.align_params(widened.get_space())
            if near.is_empty():
                continue
            size = _intended(r, _guarded_read(st, v), v) or _bound_text(_at_large_sizes(r.extent_exprs(tensor)[d]))
            fix = f"'where {v} in 0:{size}'" if isinstance(e, n.IndexVar) else f"a where clause on '{v}'"
            what = (f"'{tensor}' has elements no statement writes ({_sizes(r, near, tensor)}): range inference "
                    f"gives '{v}' the range {_range_text(st, v)} here, and {_rule(st, _guarded_read(st, v))}; "
                    f"{fix} would widen it")
            return [Narrowing(e.span or st.comp.span, what)]
    return []


# ------------------------------------------------------- skipped updates
def _updates(st: StmtInfo) -> bool:
    """``st`` updates the values its tensor holds: an accumulation without
    ``!``, or ``=`` reading the element it writes (``u(i) = u(i) + ...``)."""
    c = st.comp
    if c.reduction is not None:
        return not c.initializes
    return any(_own(c, a) for a in n.walk(c.rhs))


def _own(c: n.Comprehension, e: n.Expr) -> bool:
    """``e`` reads the element ``c`` writes."""
    return isinstance(e, n.Access) and e.tensor == c.tensor and \
        [expr_to_tc(x) for x in e.indices] == [expr_to_tc(x) for x in c.indices]


def _neutral_elsewhere(c: n.Comprehension) -> bool:
    """The update adds ``c ? a : 0`` (or multiplies by ``c ? a : 1``): where
    the condition leaves out the read that narrows, it changes nothing (an
    in-place scan, ``ii(i, j) = ii(i, j) + (i > 0 ? ii(i - 1, j) : 0)``)."""
    term, op = c.rhs, c.reduction
    if op is None and isinstance(term, n.Binary) and term.op in ("+", "*"):
        op, term = term.op, term.rhs if _own(c, term.lhs) else term.lhs if _own(c, term.rhs) else None
    if op not in ("+", "*") or not isinstance(term, n.Select):
        return False
    unit = 0 if op == "+" else 1
    return any(isinstance(x, n.Const) and x.value == unit for x in (term.then, term.other))


def _skipped(model: Model, reported: set) -> list[Narrowing]:
    """Updates whose narrowed lhs variable, widened, would update elements of
    their tensor that they skip (elements no statement writes are holes,
    reported as such)."""
    r = model.ranges
    program = None
    out = []
    for st in r.stmts:
        spans = {st.comp.span} | {e.span for e in st.comp.indices}
        if not _updates(st) or spans & reported or _neutral_elsewhere(st.comp):
            continue
        given, loops = _where_vars(st), tuple(lp.var for lp in st.loops)
        for d, e in enumerate(st.comp.indices):
            v = lhs_index_var(e, loops)
            if v is None or v in given or v in st.comp.reduction_vars or _guarded_read(st, v) is None:
                continue
            try:
                program = program or program_schedule(model)
                written = program.statement_writes(st.name) if program is not None else None
                if written is None:
                    break
                whole = box(r, st.comp.tensor)
                widened = written.eliminate(isl.dim_type.set, d, 1).align_params(whole.get_space())
                skipped = (widened & whole.align_params(widened.get_space())).subtract(
                    written.align_params(widened.get_space()))
                if skipped.is_empty():
                    continue
            except (isl.Error, NotAffine):
                break  # not analysable: no warning
            tensor = st.comp.tensor
            size = _intended(r, _guarded_read(st, v), v) or _bound_text(_at_large_sizes(r.extent_exprs(tensor)[d]))
            fix = f"'where {v} in 0:{size}'" if isinstance(e, n.IndexVar) else f"a where clause on '{v}'"
            what = (f"this update of '{tensor}' skips elements it would update with a wider range "
                    f"({_sizes(r, skipped, tensor)}), which keep their earlier values: range inference gives "
                    f"'{v}' the range {_range_text(st, v)} here, and {_rule(st, _guarded_read(st, v))}; "
                    f"{fix} would widen it")
            out.append(Narrowing(e.span or st.comp.span, what))
            break
    return out


# ----------------------------------------------------------------- helpers
def _where_vars(st: StmtInfo) -> set[str]:
    return {w.var for w in st.comp.wheres if isinstance(w, n.RangeConstraint)}


def _intended(r: RangeInfo, read: n.Access | None, v: str) -> str | None:
    """The size of the dimension that the guarded ``read`` indexes with ``v``
    plus an offset (``x(b, c, l + 2 * k - 2)``: ``L``), as TC text: the range
    a user who guards the read with a select means ``v`` to cover."""
    if read is None:
        return None
    dims = [k for k, e in enumerate(read.indices) if _uses(e, v)]
    if len(dims) != 1 or (n.linear(read.indices[dims[0]]) or {}).get(v) != 1:
        return None  # (``tgt(b, s / 2)``, ``x(2 * s)``: its size is not the range meant for ``s``)
    return _bound_text(_at_large_sizes(r.extent_exprs(read.tensor)[dims[0]]))


_LARGE = 1 << 20


def _at_large_sizes(e: n.Expr) -> n.Expr:
    """``e`` with each ``c ? a : b`` over the sizes replaced by the branch it
    takes when every size is large (an extent ``(((-L) + 2) >= 0) ? 0 : L``
    reads ``L``); ``e`` itself where a condition cannot be evaluated."""
    if isinstance(e, n.Select):
        cond = _value(e.cond)
        if cond is not None:
            return _at_large_sizes(e.then if cond else e.other)
        return e
    if isinstance(e, n.Binary):
        return n.Binary(e.op, _at_large_sizes(e.lhs), _at_large_sizes(e.rhs), span=e.span, dtype=e.dtype)
    return e


def _value(e: n.Expr):
    """The value of an expression over the sizes with every size ``_LARGE``, or None."""
    if isinstance(e, n.Const):
        return e.value
    if isinstance(e, (n.SizeVar, n.Ident)):
        return _LARGE
    if isinstance(e, n.Unary):
        x = _value(e.operand)
        return None if x is None else (-x if e.op == "-" else not x)
    if isinstance(e, n.Binary):
        a, b = _value(e.lhs), _value(e.rhs)
        if a is None or b is None:
            return None
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "<": lambda: a < b,
               "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b, "==": lambda: a == b,
               "!=": lambda: a != b, "&&": lambda: bool(a) and bool(b), "||": lambda: bool(a) or bool(b),
               "min": lambda: min(a, b), "max": lambda: max(a, b)}
        return ops[e.op]() if e.op in ops else None
    return None


def _bound_text(e: n.Expr) -> str:
    """A where-range bound as TC text; a ``?:`` in parentheses (it contains ':')."""
    text = expr_to_tc(e)
    return f"({text})" if isinstance(e, n.Select) else text


def _text(e: n.Expr) -> str:
    """The source text of ``e`` (as the user wrote it), or its printed form."""
    if e.span is not None:
        return e.span.source.text[e.span.start:e.span.end]
    return expr_to_tc(e)


def _guarded_read(st: StmtInfo, v: str) -> n.Access | None:
    """A read under a branch of ``c ? a : b``, or on the right of ``&&`` or
    ``||`` (evaluated only where the left does not decide: ``t == 0 ||
    x(t - 1) > 0``), whose index uses ``v`` (not as a bare index): it narrows
    ``v`` although the condition may exclude it.  An indirect index says
    nothing about the range, and an index that a read made everywhere (in
    the condition, say) also has narrows ``v`` as much without the guard:
    neither makes the read the culprit."""
    def reads(e: n.Expr, guarded: bool):
        if isinstance(e, n.Select):
            yield from reads(e.cond, guarded)
            yield from reads(e.then, True)
            yield from reads(e.other, True)
            return
        if isinstance(e, n.Binary) and e.op in ("&&", "||"):
            yield from reads(e.lhs, guarded)
            yield from reads(e.rhs, True)
            return
        if isinstance(e, n.Access):
            yield e, guarded
        for c in n.children(e):
            if isinstance(c, n.Expr):
                yield from reads(c, guarded)

    def narrowing(a: n.Access):
        return {(a.tensor, k, expr_to_tc(e)) for k, e in enumerate(a.indices)
                if _uses(e, v) and not isinstance(e, n.IndexVar)
                and not any(isinstance(x, n.Access) for x in n.walk(e))}
    found = list(reads(st.comp.rhs, False))
    always = set().union(*(narrowing(a) for a, guarded in found if not guarded))
    return next((a for a, guarded in found if guarded and narrowing(a) - always), None)


def _uses(e: n.Expr, v: str) -> bool:
    return any(isinstance(x, n.IndexVar) and x.name == v for x in n.walk(e))


def _range_text(st: StmtInfo, v: str) -> str:
    lo, hi = st.ranges[v]
    ctx = st.domain.params()
    return f"[{expr_to_tc(readable(lo, ctx))}, {expr_to_tc(readable(hi, ctx))})"


def _sizes(r: RangeInfo, s: isl.Set, tensor: str | None = None) -> str:
    """``for sizes K=2, L=1`` (and ``: alpha(1, 0)``), from a point of ``s``."""
    p = s.sample_point()
    space = s.get_space()
    params = {space.get_dim_name(isl.dim_type.param, k): p.get_coordinate_val(isl.dim_type.param, k).to_python()
              for k in range(space.dim(isl.dim_type.param))}
    sizes = ", ".join(f"{z}={params[isl_name(z)]}" for z in r.checked.sizes if isl_name(z) in params)
    text = f"for sizes {sizes}" if sizes else "for all sizes"
    if tensor is not None:
        idx = ", ".join(str(p.get_coordinate_val(isl.dim_type.set, k).to_python())
                        for k in range(space.dim(isl.dim_type.set)))
        text += f": {tensor}({idx})"
    return text
