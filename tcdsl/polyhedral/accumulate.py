"""Loop-invariant products added onto a tensor the loop computes.

TC's own Elman RNN adds the input projection onto the recurrent sum:

    hidden(t, b, co) +=! h2h(ci, co) * hidden(t - 1, b, ci)
    hidden(t, b, co) += i2h(ci, co) * input(t, b, ci)

The second statement's products depend on nothing the loop computes, but it
accumulates onto ``hidden``, which the loop does compute, so it cannot be
hoisted (polyhedral/hoist.py) and runs at every step: ``T`` small matrix
products instead of one with ``T * B`` rows.  ``split(...)`` rewrites such a
statement ``X(i) += rhs`` (``+=`` without ``!``, with reduction variables,
inside a ``for``, its right-hand side reading no tensor written in that
loop) into

    X_in(i) +=! rhs
    X(i) = X(i) + X_in(i)

so that hoisting can move the first statement out of the loop (``X_in``
gets the loop variable as an index).  The sum is reassociated: the products
are summed apart, then added, as PyTorch's RNNs add their two projections.

The driver (``_hoisted``) keeps the rewrite only when hoisting then moves
every new ``X_in`` statement out of its loop; the rewritten ``def`` is
checked and inferred again, and it is used only when the new statements run
exactly the original instances (``_same_instances``).
"""
from __future__ import annotations

import warnings
from dataclasses import replace

import islpy as isl

from ..sema.check import CheckedDef, check, select_def
from ..sema.ranges import RangeInfo, infer_ranges
from ..source import Span
from ..syntax import nodes as n
from .hoist import equal_sets
from .layout import _fresh, _names


def plan(checked: CheckedDef) -> dict:
    """Span of each statement to split -> the name of its new tensor."""
    d = checked.node
    taken = _names(d) | set(checked.tensors) | set(checked.sizes)
    out: dict = {}

    def visit(stmts, loop: n.For | None) -> None:
        for s in stmts:
            if isinstance(s, n.For):
                visit(s.body, s)
            elif isinstance(s, n.If):
                visit(s.then, loop)
                visit(s.orelse, loop)
            elif isinstance(s, n.Comprehension) and loop is not None and _candidate(s, loop):
                out[s.span] = _fresh(f"{s.tensor}_in", taken)

    visit(d.body, None)
    return out


def _candidate(c: n.Comprehension, loop: n.For) -> bool:
    if c.op != "+=" or not c.reduction_vars or c.equivalent is not None or c.span is None:
        return False
    if not all(isinstance(w, n.RangeConstraint) for w in c.wheres):
        return False
    written = {x.tensor for x in n.walk(loop) if isinstance(x, n.Comprehension)}
    reads = {x.tensor for x in n.walk(c.rhs) if isinstance(x, n.Access)}
    return not reads & written


def rewrite(d: n.Def, p: dict) -> n.Def:
    """``d`` (as parsed) with each statement of ``p`` split in two."""
    return replace(d, body=n.map_comprehensions(d.body, lambda s: _split(s, p[s.span]) if s.span in p else [s]))


def _split(c: n.Comprehension, name: str) -> list[n.Comprehension]:
    lhs_vars = {x.name for x in c.indices if isinstance(x, (n.Ident, n.IndexVar))}
    # the update gets a span of its own (the text up to the rhs): hoisting and
    # the checks below tell statements apart by their spans
    end = c.rhs.span.start if c.rhs.span is not None and c.rhs.span.start > c.span.start else c.span.start + 1
    span = Span(c.span.source, c.span.start, end)
    partial = replace(c, tensor=name, op="+=!")
    add = n.Comprehension(
        c.tensor, c.indices, "=",
        n.Binary("+", n.Call(c.tensor, c.indices, span=span), n.Call(name, c.indices, span=span), span=span),
        wheres=tuple(w for w in c.wheres if w.var in lhs_vars), span=span)
    return [partial, add]


def split(program: n.Program, entry: str | None, checked: CheckedDef, ranges: RangeInfo):
    """(program, checked, ranges, {new statement's span}) with the statements
    split, or None when there are none or the rewrite does not run the same
    instances."""
    p = plan(checked)
    if not p:
        return None
    new_def = rewrite(select_def(program, entry), p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the original program's warnings were given
        new_checked = check(n.Program((new_def,)), new_def.name)
        new_ranges = infer_ranges(new_checked, ranges.ctx)
    if not _same_instances(ranges, new_ranges, p):
        return None
    new_ranges.size_guards = ranges.size_guards  # the same reads, over the sizes only
    return n.Program((new_def,)), new_checked, new_ranges, frozenset(p)


def _same_instances(old: RangeInfo, new: RangeInfo, p: dict) -> bool:
    """Every tensor keeps its extents; each split statement's sum runs the
    original statement's instances, and its update the points that sum
    adds to."""
    for tensor, ext in old.extents.items():
        got = new.extents.get(tensor)
        if got is None or len(got) != len(ext):
            return False
        if not all(equal_sets(a, b) for a, b in zip(ext, got)):
            return False
    by_span = {s.comp.span: s for s in new.stmts}
    for st in old.stmts:
        if st.comp.span not in p:
            continue
        part = by_span.get(st.comp.span)
        add = next((s for s in new.stmts if s.comp.tensor == st.comp.tensor and s.comp.op == "="
                    and p[st.comp.span] in {x.tensor for x in n.walk(s.comp.rhs) if isinstance(x, n.Access)}), None)
        if part is None or add is None or not equal_sets(st.domain.reset_tuple_id(), part.domain.reset_tuple_id()):
            return False
        k = len(st.vars) - len(st.comp.reduction_vars)  # the lhs variables come first
        touched = st.domain.project_out(isl.dim_type.set, k, st.domain.dim(isl.dim_type.set) - k)
        if not equal_sets(touched.reset_tuple_id(), add.domain.reset_tuple_id()):
            return False
    return True

