"""Temporaries computed in the output they end in.

A softmax or a layer norm as users write them keeps a temporary as large as
the output, and its last statement turns it into the output element by
element::

    e(n, c) = exp(x(n, c) - mx(n))
    s(n) +=! e(n, c)
    y(n, c) = e(n, c) / s(n)

The temporary costs an allocation and a write and a read of its whole size
in memory (16 MB for a 4096 x 1024 softmax).  ``plan(checked, ranges)``
finds each temporary ``e`` whose last statement (in the order of the
``def``) writes an output ``y`` with ``=`` and reads ``e`` only at the
element it writes (``e(n, c)`` for ``y(n, c)``), where ``y`` has the extents
and type of ``e``, is not read in that statement otherwise, and is not used
by any statement before it; all of them at the top of the ``def`` (no
sequential loop or branch touches either).  ``rewrite(def, plan)`` then
writes ``y`` wherever the program wrote ``e``: the statements compute the
same values (``y`` holds nothing before and ``e`` is read nowhere after) and
the last one updates ``y`` in place, ``y(n, c) = y(n, c) / s(n)`` -- the
program a user who cares about memory writes.

The rewritten ``def`` is checked and inferred again (driver.py).
``options={"inplace": False}`` leaves programs as written.
"""
from __future__ import annotations

from dataclasses import replace

from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc


def plan(checked: CheckedDef, ranges: RangeInfo) -> dict[str, str]:
    """Temporary -> the output it is computed in."""
    body = checked.node.body
    outputs = set(checked.outputs)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for e in checked.temps:
        users = [i for i, s in enumerate(body) if e in _tensors(s)]
        if not users or any(not isinstance(body[i], n.Comprehension) for i in users):
            continue
        last = body[users[-1]]
        y = last.tensor
        if y not in outputs or y in taken or last.op != "=" or last.equivalent is not None:
            continue
        if any(y in _tensors(s) for s in body[:users[-1]]):
            continue
        if checked.tensors[e].dtype != checked.tensors[y].dtype or _extents(ranges, e) != _extents(ranges, y):
            continue
        lhs = tuple(x.name if isinstance(x, (n.IndexVar, n.Ident)) else None for x in last.indices)
        reads = [a for a in n.walk(last.rhs) if isinstance(a, n.Access)]
        if None in lhs or any(a.tensor == y for a in reads) or any(w for w in last.wheres if e in _tensors(w)):
            continue
        if not all(a.tensor != e or tuple(_name(x) for x in a.indices) == lhs for a in reads):
            continue
        out[e] = y
        taken.add(y)
    return out


def _name(x: n.Expr) -> str | None:
    return x.name if isinstance(x, (n.IndexVar, n.Ident)) else None


def _extents(ranges: RangeInfo, t: str) -> tuple[str, ...]:
    return tuple(expr_to_tc(x) for x in ranges.extent_exprs(t))


def _tensors(node: n.Node) -> set[str]:
    """Tensors a statement (or anything below it) reads or writes."""
    out = set()
    for x in n.walk(node):
        if isinstance(x, n.Comprehension):
            out.add(x.tensor)
        elif isinstance(x, n.Access):
            out.add(x.tensor)
        elif isinstance(x, n.Call):
            out.add(x.name)
    return out


def rewrite(d: n.Def, mapping: dict[str, str]) -> n.Def:
    """``d`` (as parsed) with each temporary of ``mapping`` written and read as its output."""
    def fn(node):
        if isinstance(node, n.Call) and node.name in mapping:
            return replace(n.map_children(node, fn), name=mapping[node.name])
        if isinstance(node, n.Comprehension) and node.tensor in mapping:
            return replace(n.map_children(node, fn), tensor=mapping[node.tensor])
        return n.map_children(node, fn)

    return replace(d, body=tuple(fn(s) for s in d.body))
