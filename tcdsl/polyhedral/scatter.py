"""Sums that select one row through an index: run as a scatter-add.

The language has no indexed write, so a sum into the rows that an index
tensor names is written as a reduction over every row with a select::

    dE(v, d) +=! (idx(n) == v ? dy(n, d) : 0) where v in 0:V

(an embedding's gradient; the adjoint of a read ``E(idx(n), d)`` is this
statement too, docs/training.md).  As written it costs ``V x N x D`` terms of
which ``N x D`` are not zero: 34x ``index_add_`` at (N, D, V) = (4096, 256,
1000).  ``find`` recognizes such a statement: a ``+`` reduction whose
right-hand side is ``cond ? e : 0`` (or a product with such a factor) where
one conjunct of ``cond`` is ``u == g``, ``u`` an index variable of the left-hand
side used nowhere else on it, ``g`` an expression without ``u`` that reads a
tensor, and the statement's domain the product of ``u``'s range and the
other variables' box.  The model puts the statement in a kernel of its own
(polyhedral/model.py) and the CPU code generator (codegen/cpu_scatter.py)
runs it as

    dE(v, d) = 0                          (the init of ``+=!``)
    for n:  u = idx(n); if u in u's range: dE(u, d) += e   (for every d)

which adds the same non-zero terms to each element in the same order (only a
``-0.0`` element may become ``+0.0``).  A second conjunct ``w == h`` for
another left-hand side variable (a stiffness matrix assembled from element
pairs, ``K(p, q) +=! tri(e, a) == p && tri(e, c) == q ? ke(e, a, c) : 0``)
is picked too: ``K(tri(e, a), tri(e, c)) += ke(e, a, c)``, no loop over
``q``.  Other targets run the statement as written.

A ``max`` or ``min`` reduction whose other value is its identity, ``-inf``
or ``inf``, is the same scatter with its combination: a segment max by
destination node (a graph attention's softmax, ``mx(n, h) max=! dst(e) == n
? sc(e, h) : -inf``) ran over every node for every edge (at (N, E) = (4096,
32768), 47 ms against 0.1 ms for the same sum).  A finite stand-in (``-1e30``)
is no identity: an element no term picks would hold it.  The statement may
read the tensor it writes at another step of its loop (``dist(t - 1, q,
src(e))`` in Bellman-Ford's ``dist(t, q, n) min=! dst(e) == n ? dist(t - 1,
q, src(e)) + w(e) : inf``: ``_other_step``), never an element it writes.
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..sema.ranges import StmtInfo
from ..syntax import nodes as n


@dataclass(frozen=True)
class Scatter:
    """The update statement ``stmt`` adds ``rhs`` (``u`` bound to ``index``)
    at the element whose index ``var`` is ``index``; ``more``: further
    ``(var, index)`` pairs picked the same way (a matrix assembled from
    pairs, ``tri(e, a) == p && tri(e, c) == q``)."""

    stmt: str
    var: str
    index: n.Expr
    rhs: n.Expr
    more: tuple = ()

    @property
    def picks(self) -> tuple:
        """Every ``(var, index)`` pair, ``var``'s first."""
        return ((self.var, self.index),) + self.more


def find(info: StmtInfo) -> Scatter | None:
    """The scatter form of ``info`` (see the module docstring), or None."""
    c = info.comp
    if c.reduction not in ("+", "max", "min") or c.equivalent is not None:
        return None
    own = [e.name for e in c.indices if isinstance(e, n.IndexVar) and e.name in info.vars]
    if any(not (isinstance(e, n.IndexVar) and e.name in own) and n.names_in(e) & set(info.vars)
           for e in c.indices):
        return None  # an lhs index like ``H + j``: left as written (``t`` or ``t - 1`` of a loop is fine)
    if any(isinstance(x, n.Access) and x.tensor == c.tensor and not _other_step(x, c, info) for x in n.walk(c.rhs)):
        return None
    for u in own:
        found = _pick(c.rhs, u, c.reduction)
        if found is not None and _product(info):
            index, rhs = found
            more = []
            for w in own:  # another lhs variable picked in the rest (``tri(e, c) == q``)
                again = _pick(rhs, w, c.reduction) if w != u and all(w != v for v, _ in more) else None
                if again is not None and not n.names_in(again[0]) & set(own):
                    more.append((w, again[0]))
                    rhs = again[1]
            if more and n.names_in(index) & set(own):
                more, rhs = [], found[1]  # (an index that reads the lhs variables: one at a time)
            return Scatter(info.name, u, index, rhs, tuple(more))
    return None


def picked(ranges, comp: n.Comprehension) -> frozenset[str]:
    """The left-hand side variables that the statement ``comp`` (its span and
    tensor name it in ``ranges``) picks as a scatter: none where it is no
    scatter.  A term that uses one runs only where the pick holds, once per
    term of the sum: a table or copy over it (``cnt(n, rel(e))`` in ``agg(n,
    o) +=! dst(e) == n ? x(src(e), o) / cnt(n, rel(e)) : 0``) would compute
    every node for every edge."""
    if ranges is None:
        return frozenset()
    st = next((s for s in ranges.stmts if s.comp.span == comp.span and s.comp.tensor == comp.tensor), None)
    found = find(st) if st is not None else None
    return frozenset(v for v, _ in found.picks) if found is not None else frozenset()


def _other_step(a: n.Access, c: n.Comprehension, info: StmtInfo) -> bool:
    """The read ``a`` of the tensor the statement writes is at another step of
    its loop than every element it writes: an index pair of the loop's
    variables and sizes alone that differ by a constant (``dist(t - 1, q,
    src(e))`` in ``dist(t, q, n) min=! ...``, a relaxation of Bellman-Ford)."""
    for w, r in zip(c.indices, a.indices):
        lw, lr = n.linear(w), n.linear(r)
        if lw is None or lr is None or (set(lw) | set(lr)) & set(info.vars):
            continue
        diff = {k: lw.get(k, 0) - lr.get(k, 0) for k in set(lw) | set(lr)}
        if all(v == 0 for k, v in diff.items() if k != 1) and diff.get(1, 0) != 0:
            return True
    return False


_IDENTITY = {"+": 0, "max": -float("inf"), "min": float("inf")}


def _pick(e: n.Expr, u: str, reduction: str = "+") -> tuple[n.Expr, n.Expr] | None:
    """(g, e without the conjunct ``u == g``) when ``e`` is ``cond ? a : I``
    with that conjunct in ``cond`` (``I`` the identity of the reduction: 0,
    or -inf for ``max``, inf for ``min``), or for ``+`` a product, quotient or
    cast of such a term."""
    match e:
        case n.Select(cond=cond, then=then, other=n.Const(value=v)) if v == _IDENTITY[reduction]:
            parts = _conjuncts(cond)
            for i, p in enumerate(parts):
                g = _equal(p, u)
                if g is None:
                    continue
                rest = parts[:i] + parts[i + 1:]
                if not rest:
                    return g, then
                cond = rest[0]
                for r in rest[1:]:
                    cond = n.Binary("&&", cond, r)
                return g, n.Select(cond, then, e.other, dtype=e.dtype)
        case n.Binary(op="*" | "/" as op, lhs=a, rhs=b) if reduction == "+":
            for side in ("lhs", "rhs") if op == "*" else ("lhs",):  # (a quotient's numerator)
                got = _pick(getattr(e, side), u)
                if got is not None:
                    return got[0], n.Binary(op, got[1] if side == "lhs" else a, b if side == "lhs" else got[1],
                                            dtype=e.dtype)
        case n.Cast(to=to, operand=x) if reduction == "+":
            got = _pick(x, u)
            if got is not None:
                return got[0], n.Cast(to, got[1], dtype=e.dtype)
    return None


def _conjuncts(e: n.Expr) -> list[n.Expr]:
    if isinstance(e, n.Binary) and e.op == "&&":
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def _equal(e: n.Expr, u: str) -> n.Expr | None:
    """``g`` of ``u == g`` or ``g == u``: without ``u``, reading a tensor (in
    a checked statement; a call, in a parsed one: polyhedral/pick.py)."""
    if not (isinstance(e, n.Binary) and e.op == "=="):
        return None
    for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
        if isinstance(a, (n.IndexVar, n.Ident)) and a.name == u and u not in n.names_in(b) \
                and any(isinstance(x, (n.Access, n.Call)) for x in n.walk(b)):
            return b
    return None


def _product(info: StmtInfo, nonempty: bool = True) -> bool:
    """The domain is the product of its variables' ranges, each over the
    sizes (and loop variables) only, and (``nonempty``) not empty wherever
    the statement runs."""
    dom = info.domain
    dims = dom.dim(isl.dim_type.set)
    box = dom.params().add_dims(isl.dim_type.set, dims).set_tuple_name(dom.get_tuple_name())
    for i in range(dims):
        one = dom.project_out(isl.dim_type.set, i + 1, dims - i - 1).project_out(isl.dim_type.set, 0, i)
        one = one.insert_dims(isl.dim_type.set, 0, i).insert_dims(isl.dim_type.set, i + 1, dims - i - 1)
        box = box & one.set_tuple_name(dom.get_tuple_name())
    runs = info.params_set if info.params_set is not None else dom.params()
    return box.is_subset(dom) and (not nonempty or runs.is_subset(dom.params()))
