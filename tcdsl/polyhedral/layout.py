"""Transposed copies of inputs read across their contiguous dimension.

The CPU code vectorizes a statement along the last index of the tensor it
writes (``j`` of ``a(b, j)``), and the register tiles load each operand
along that index.  An input read with that index in an earlier dimension
and a reduction index last -- recurrent weights in PyTorch's ``(out, in)``
layout, ``a(b, j) += h(t - 1, b, k) * Whh(j, k)``, or a matmul's
``B(j, k)`` -- has stride ``K`` along ``j``: no vector loads, no register
tile, a scalar loop.  TC's users write both layouts; the code should not
care.

``plan(checked)`` finds such reads: an input (a parameter of the ``def``,
never written), indexed by distinct index variables (each alone or plus an
offset of sizes and constants: a gate's rows ``Whh(H + j, k)`` of a stacked
weight) and by indices that select a slice (constants, sizes, loop
variables: a direction's weights ``U(0, q, j, k)``, kept in place), that has the
written tensor's last index ``j`` in a dimension other than its last, and
that is read inside a sequential ``for`` (so the same elements are read at
every step; outside loops the CPU mapping packs such an operand into a
panel itself, codegen/cpu_tiles.py).  Not where the input's last index is
summed over and every read moves with ``j`` (``kd(t, q) min=! d(q, n) ...``:
no operand is reused across ``j``, and the sum runs in vector lanes along
the rows as written), nor where the input's indices take every lhs variable,
two or more (value iteration's ``q(s, a) +=! P(s, a, n) * V(n)``: a
matrix-vector product per row ``s``, each element read once per step, so a
register tile shares nothing across its rows; with ``a`` in vector lanes, 8
actions filled half a vector: 43 -> 7.9 ms at 384 states.  One matrix-vector
product, ``a(j) +=! Whh(j, k) * h(t - 1, k)``, keeps the copy: its columns
accumulate in registers, 3.0 -> 0.86 ms at H = 256).  ``rewrite(def, plan)`` adds one statement per (input, permutation)
at the top of the ``def``, ``Whh_t(k, j) = Whh(j, k)`` with ``j`` moved
last, and reads the copy instead: one pass over the weights per call, out
of the sequential loop, against ``T * B`` passes of a strided read.

The rewritten ``def`` is checked and inferred again (driver.py), like the
hoisted one; the bounds are unchanged (the copy has the input's extents,
permuted).  ``options={"transpose": False}`` leaves programs as written.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..sema.check import CheckedDef
from ..syntax import nodes as n


@dataclass
class Plan:
    """Access span -> (copy's name, permutation: the copy's dim k is the input's dim perm[k])."""

    reads: dict = field(default_factory=dict)
    copies: dict = field(default_factory=dict)  # (input, perm) -> (copy's name, span of its first read)

    def __bool__(self) -> bool:
        return bool(self.reads)


def plan(checked: CheckedDef) -> Plan:
    d = checked.node
    inputs = {p.name for p in d.params}
    written = {c.tensor for c in n.walk(d) if isinstance(c, n.Comprehension)}
    taken = _names(d) | set(checked.tensors) | set(checked.sizes)
    out = Plan()

    def statement(c: n.Comprehension, loops: frozenset) -> None:
        in_loop = bool(loops)
        last = c.indices[-1] if c.indices else None
        if not isinstance(last, (n.IndexVar, n.Ident)):
            return
        j = last.name
        own = {x.name for x in c.indices if isinstance(x, (n.IndexVar, n.Ident))} - loops
        # every read moves with j: no operand is reused across j's vector lanes
        no_reuse = all(any(isinstance(y, n.IndexVar) and y.name == j for x in a.indices for y in n.walk(x))
                       for a in n.walk(c.rhs) if isinstance(a, n.Access))
        for acc in n.walk(c.rhs):
            if not (isinstance(acc, n.Access) and acc.tensor in inputs and acc.tensor not in written):
                continue
            # an index without index variables of the statement (a constant, sizes, the loop's
            # variables: a direction's or a layer's weights W(0, q, j, k), W(l, q, j, k)) selects
            # a slice: it stays where it is, and the copy covers every slice
            names = [f"#{k}" if _fixed(x, loops) else _index_var(x) for k, x in enumerate(acc.indices)]
            if None in names or acc.span is None or any(x in loops for x in names):
                continue
            if len(set(names)) != len(names) or j not in names or names[-1] == j:
                continue
            if not in_loop:
                continue  # outside loops the CPU mapping packs such an operand itself (codegen/cpu_tiles.py)
            if names[-1] in c.reduction_vars and (no_reuse or len(own) >= 2 and own <= set(names)):
                continue  # summed along its rows, each element read once per step: a vector reduction
            k = names.index(j)
            perm = tuple(x for x in range(len(names)) if x != k) + (k,)
            key = (acc.tensor, perm)
            if key not in out.copies:
                out.copies[key] = (_fresh(f"{acc.tensor}_t", taken), acc.span)
            out.reads[acc.span] = (out.copies[key][0], perm)

    for s, loops in n.comprehensions_in_loops(d.body):
        statement(s, frozenset(loops))
    return out


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) reading the copies of ``p``, which it computes first."""
    taken = _names(d)

    def fn(node):
        if isinstance(node, n.Call) and node.span in p.reads:
            name, perm = p.reads[node.span]
            return n.Call(name, tuple(node.args[k] for k in perm), span=node.span)
        return n.map_children(node, fn)

    body = tuple(fn(s) for s in d.body)
    copies = []
    for (tensor, perm), (name, span) in p.copies.items():
        vars_ = [_fresh(f"d{k}", taken) for k in range(len(perm))]
        lhs = tuple(n.Ident(vars_[k], span=span) for k in perm)
        rhs = n.Call(tensor, tuple(n.Ident(v, span=span) for v in vars_), span=span)
        copies.append(n.Comprehension(name, lhs, "=", rhs, span=span))
    return replace(d, body=tuple(copies) + body)


def _index_var(x: n.Expr) -> str | None:
    """The index variable of an index that is one, or one plus or minus an
    offset without index variables (a gate's rows of a stacked weight,
    ``Whh(2 * H + j, k)``); None otherwise."""
    if isinstance(x, n.IndexVar):
        return x.name
    if isinstance(x, n.Binary) and x.op in ("+", "-"):
        lhs, rhs = _has_index_var(x.lhs), _has_index_var(x.rhs)
        if lhs and not rhs:
            return _index_var(x.lhs)
        if rhs and not lhs and x.op == "+":
            return _index_var(x.rhs)
    return None


def _fixed(x: n.Expr, loops: frozenset) -> bool:
    """An index that no index variable of the statement moves: constants,
    sizes and the enclosing loops' variables, no reads."""
    return all(not isinstance(y, n.Access) and not (isinstance(y, n.IndexVar) and y.name not in loops)
               for y in n.walk(x))


def _has_index_var(x: n.Expr) -> bool:
    return any(isinstance(y, (n.IndexVar, n.Access)) for y in n.walk(x))


def _names(d: n.Def) -> set[str]:
    out = {x.name for x in n.walk(d) if isinstance(x, (n.Ident, n.Call, n.IndexVar, n.SizeVar))}
    out |= {s.var for s in n.walk(d) if isinstance(s, n.For)} | {x.name for x in d.params + d.outputs}
    out |= {dim for x in d.params for dim in x.type.dims if isinstance(dim, str)}
    return out


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name
