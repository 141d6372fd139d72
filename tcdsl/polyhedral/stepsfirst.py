"""A state stored with its step last, computed with its step first.

The CPU code vectorizes a statement along the last index of the tensor it
writes, and its register tiles store vectors along it.  A state written at
one step of a loop per statement, with the step its last index, as users who
keep PyTorch's ``(B, C, L)`` layout write it::

    for t in T {
      d(b, j, t) max=! d(b, i, t - 1) + tr(j, i)      (a Viterbi step, time last)
      ...
    }

has no such index: at each step the statement writes ``d(b, j, t)`` at a
stride of ``T`` along ``j``, and the reduction reads the previous step's
``d(b, i, t - 1)`` at the same stride -- a scalar loop per element, where
the same program with ``d(t, b, j)`` is a register-tiled product per step.
``plan(checked, ranges)`` finds each such tensor: written only by statements
whose last index has no index variable of theirs (the loop's variable,
``T - 1 - u``, a constant, sizes) and others that have no loop variable,
under a sequential loop for one of them at least, and read by a reduction
across its rows (a reduction variable in an index other than the last).
``rewrite(def, plan)`` moves its last index first in every access, under a
new name, and for an output copies it back at the end::

    d_s(t, b, j) max=! d_s(t - 1, b, i) + tr(j, i)
    ...
    d(b, j, t) = d_s(t, b, j)                          (an output only)

The same values at the same steps; the copy is one pass over the output.
Part of the ``transpose`` option.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..sema.check import CheckedDef
from ..syntax import nodes as n
from .layout import _fresh, _names


@dataclass
class Plan:
    """tensor -> its new name; ``outputs``: those copied back at the end."""

    names: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)  # tensor -> its rank

    def __bool__(self) -> bool:
        return bool(self.names)


def _vars(e: n.Expr) -> set[str]:
    return {x.name for x in n.walk(e) if isinstance(x, (n.IndexVar, n.Ident))}


def plan(checked: CheckedDef, ranges=None) -> Plan:
    d = checked.node
    inputs = {p.name for p in d.params}
    taken = _names(d) | set(checked.tensors) | set(checked.sizes)
    writes: dict[str, list] = {}
    across: set[str] = set()
    for c, loops in n.comprehensions_in_loops(d.body):
        writes.setdefault(c.tensor, []).append((c, frozenset(loops)))
        red = set(c.reduction_vars)
        for a in n.walk(c.rhs):
            if isinstance(a, n.Access) and len(a.indices) >= 2 and any(_vars(i) & red for i in a.indices[:-1]):
                across.add(a.tensor)
    out = Plan()
    for tensor, ws in writes.items():
        if tensor in inputs or tensor not in across or any(len(c.indices) < 2 for c, _ in ws):
            continue
        stepped = False
        ok = True
        for c, loops in ws:
            last, rest = c.indices[-1], c.indices[:-1]
            if _vars(last) - loops or any(_vars(i) & loops for i in rest):
                ok = False
                break
            stepped = stepped or bool(_vars(last) & loops)
        if ok and stepped:
            out.names[tensor] = _fresh(f"{tensor}_s", taken)
            if tensor in checked.outputs:
                out.outputs[tensor] = len(ws[0][0].indices)
    return out


def _first(args: tuple) -> tuple:
    return (args[-1],) + tuple(args[:-1])


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) computing each tensor of ``p`` with its last index first."""
    taken = _names(d) | set(p.names.values())

    def fn(node):
        if isinstance(node, n.Comprehension) and node.tensor in p.names:
            node = n.map_children(node, fn)
            return replace(node, tensor=p.names[node.tensor], indices=_first(node.indices))
        if isinstance(node, n.Call) and node.name in p.names:
            node = n.map_children(node, fn)
            return replace(node, name=p.names[node.name], args=_first(node.args))
        return n.map_children(node, fn)

    body = tuple(fn(s) for s in d.body)
    copies = []
    for tensor, rank in p.outputs.items():
        span = d.span  # (no statement's: later passes key their plans by a statement's span)
        vars_ = [_fresh(f"d{k}", taken) for k in range(rank)]
        lhs = tuple(n.Ident(v, span=span) for v in vars_)
        copies.append(n.Comprehension(tensor, lhs, "=", n.Call(p.names[tensor], _first(lhs), span=span), span=span))
    return replace(d, body=body + tuple(copies))
