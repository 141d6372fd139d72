"""A sum of a product of three or more factors computed as two sums with fewer loops.

TC evaluates a comprehension as written: one loop per index variable.  A
product of three reads summed over two of its variables costs the product of
all the ranges, where a chain of two sums costs far less::

    y(b, o) +=! x(b, i) * A(i, r) * Bm(r, o)          # B * I * R * O steps
    s(b, t) +=! h(b, i) * W(i, j) * enc(b, t, j)      # B * T * I * J steps

are, with a temporary,

    y_c(b, r) +=! x(b, i) * A(i, r)                   # B * I * R
    y(b, o) +=! y_c(b, r) * Bm(r, o)                  # B * R * O

    s_c(b, j) +=! h(b, i) * W(i, j)                   # B * I * J
    s(b, t) +=! s_c(b, j) * enc(b, t, j)              # B * T * J

(a low-rank layer, Luong's "general" attention score) -- the order in which
``torch.einsum`` and NumPy's ``einsum(optimize=True)`` contract.  ``plan``
finds each ``+=!``/``+=`` statement whose right side is a product (``*``,
``/`` by a factor) of three or more factors, each of the sum's own type (the
temporary takes theirs: int8 or half factors would sum in int8 or half), with
two or more reduction variables, and the set ``R1`` of reduction variables whose factors, summed
first over ``R1`` alone, leave both sums with fewer loops than the
statement had (the sizes are symbolic: the number of loops is the measure,
and a split is taken only when the larger of the two sums has fewer loops
than the original, or as many where it makes a sum into fewer than two
output dimensions a product of two factors into two or more: a quadratic
form ``q(b) +=! x(b, i) * A(i, j) * x(b, j)``, see ``_reshaped``).  ``rewrite`` puts the first sum in a fresh temporary
right before the statement (in the same block: inside a ``for`` or an
``if`` branch) and reads it in the statement.  The pass repeats on the
rewritten program, so a chain of four factors becomes three sums.

A loop variable in the statement's indices (``I(w, b, i, A)`` in ``for w``)
is no loop of the sum: it is not counted, and the temporary keeps it as an
index.  A sum that reads the tensor it writes is split only where those
reads never touch an element it writes (``_apart``).

It applies only where the two sums run exactly the original's terms: the
driver (``_chained``) checks that the rewritten program's statements run the
instances they ran, that the statement's domain is the join of the two new
domains (no term lost or added where ranges depend on each other, as in
``x(t + k)``), that every element of the temporary it reads is one the
first sum initialized, and that no read may leave its tensor.  The results
differ from the program as written by rounding only; ``options={"chain":
False}`` leaves programs as written.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations

import islpy as isl

from ..sema.affine import isl_name
from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo, readable
from ..syntax import nodes as n
from .factor import _product
from .gather import _fresh
from .hoist import same_extents

MAX_FACTORS = 8


@dataclass(frozen=True)
class Chain:
    """A statement to split: the reduction variables summed first, the
    first sum's temporary and its index variables, in order."""

    first: frozenset[str]
    temp: str
    temp_vars: tuple[str, ...]
    bounds: tuple = ()  # the temporary's ``where`` ranges: the statement's inferred ones
    masked: str | None = None  # the temporary of a masked factor (:func:`masked_factors`)
    mask_vars: tuple[str, ...] = ()
    mask_at: tuple[int, bool] = (0, False)  # that factor's place; whether the select is the whole right side
    mask_bounds: tuple = ()


def plan(checked: CheckedDef, ranges: RangeInfo, model=None) -> dict[tuple, Chain]:
    """(statement span, tensor) -> :class:`Chain`, for the sums a chain makes
    cheaper (a statement split once keeps its span for its second sum).  A
    sum that reads the tensor it writes is split only where ``model`` shows
    those reads never touch an element it writes (an inside algorithm's
    ``I(w, ...) +=! R(A, P, Q) * I(m, ...) * I(w - 1 - m, ...)`` with ``m in
    0:w``: the first sum, computed before the statement starts, reads the
    same values)."""
    taken = _taken(checked.node)
    infos = {(st.comp.span, st.comp.tensor): st for st in ranges.stmts}
    out: dict[tuple, Chain] = {}
    loops = {s.span: frozenset(vs) for s, vs in n.comprehensions_in_loops(checked.node.body)}
    for s in n.walk(checked.node):
        key = (s.span, getattr(s, "tensor", None))
        if not isinstance(s, n.Comprehension) or s.span is None or key in out or key not in infos:
            continue
        own = any(isinstance(a, n.Access) and a.tensor == s.tensor for a in n.walk(s.rhs))
        c = _chain(checked, s, taken, own and _apart(model, s), loops.get(s.span, frozenset()))
        if c is None:
            continue
        # the first sum's variables keep the statement's ranges: its reads
        # alone may not tell them (a state ``h(t - 1, b, i)`` written later)
        st = infos[key]
        given = {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)}
        ctx = st.domain.params()

        def bounds(vs, every=False):
            out = []
            for v in vs:
                if (every or v not in given) and v in st.ranges:  # (an enclosing loop's variable has no range here)
                    lo, hi = st.ranges[v]
                    out.append(n.RangeConstraint(v, readable(lo, ctx), readable(hi, ctx)))
            return tuple(out)
        c = replace(c, bounds=bounds(c.temp_vars + tuple(sorted(c.first))))
        if c.masked is not None:
            if any(v not in st.ranges for v in c.mask_vars):
                continue
            c = replace(c, mask_bounds=bounds(c.mask_vars, every=True))
            taken.add(c.masked)
        out[key] = c
        taken.add(c.temp)
    return out


def _apart(model, s: n.Comprehension) -> bool:
    """The reads of the tensor ``s`` writes, on its right side, never touch an
    element ``s`` writes (at each value of the loops around it)."""
    if model is None:
        return False
    for k in model.kernels():
        for x in k.stmts:
            if x.is_init or x.info.comp.span != s.span or x.info.comp.tensor != s.tensor:
                continue
            name = isl_name(s.tensor)
            if any(m.get_tuple_name(isl.dim_type.out) == name for m in x.may_reads):
                return False
            written = x.writes[0].intersect_domain(x.domain).range()
            own = 1 if s.reduction is not None else 0  # (the sum's read of its own element)
            for m in x.reads[own:]:
                if m.get_tuple_name(isl.dim_type.out) == name and \
                        not m.intersect_domain(x.domain).range().intersect(written).is_empty():
                    return False
            return True
    return False


def _chain(checked: CheckedDef, s: n.Comprehension, taken: set[str], apart: bool = False,
           loops: frozenset = frozenset()) -> Chain | None:
    if s.op not in ("+=!", "+=") or s.equivalent is not None or len(s.reduction_vars) < 2:
        return None
    if not checked.tensors[s.tensor].dtype.startswith("float"):
        return None
    if any(isinstance(w, n.Let) for w in s.wheres):
        return None
    lhs = [x.name if isinstance(x, n.IndexVar) else None for x in s.indices]
    if None in lhs or len(set(lhs)) != len(lhs):
        return None
    if not apart and any(isinstance(a, n.Access) and a.tensor == s.tensor for a in n.walk(s.rhs)):
        return None
    rvars = set(s.reduction_vars)
    for w in s.wheres:  # a range bounded by another index variable ties their loops (not by a loop's)
        if isinstance(w, n.RangeConstraint) and (_vars(w.lo) | _vars(w.hi)) & (set(lhs) | rvars) - loops:
            return None
        if isinstance(w, n.Exists):
            return None
    factors, mask = masked_factors(s.rhs)
    if not 3 <= len(factors) <= MAX_FACTORS:
        return None
    # the temporary takes its factors' type: each of the sum's own type (an
    # int8 or half product summed in an int8 or half temporary wraps or
    # rounds; an integer quotient ``i / 2`` is no factor ``i`` over 2)
    out_t = checked.tensors[s.tensor].dtype
    if any(not isinstance(f, n.Const) and f.dtype != out_t for _, f in factors):
        return None
    # a loop variable is a parameter of the statement, not one of its loops: not
    # counted (a temporary keeps it as an index, ``all_vars``)
    every = set(lhs) | rvars
    everything = every - loops
    fvars = [_vars(f) & everything for _, f in factors]
    all_vars = [_vars(f) & every for _, f in factors]
    best = None
    reductions = sorted(rvars)
    for k in range(1, len(reductions) + 1):
        for first in combinations(reductions, k):
            r1 = set(first)
            inner = [i for i, vs in enumerate(fvars) if vs & r1]
            if len(inner) < 2 or len(inner) == len(factors):
                continue
            inner_vars = set().union(*(fvars[i] for i in inner))  # (R1 appears in no other factor)
            cost = sorted((len(inner_vars), len(everything - r1)), reverse=True)
            if cost[0] > len(everything) or cost[0] == len(everything) and not _reshaped(lhs, [fvars[i] for i in inner], inner_vars - r1):
                continue
            if best is None or cost < best[0]:
                best = (cost, r1, set().union(*(all_vars[i] for i in inner)))
    if best is None:
        return None
    _, r1, inner_vars = best
    order = lhs + [v for v in _ordered_vars(s.rhs) if v not in lhs]
    temp_vars = tuple(v for v in order if v in inner_vars - r1)
    temp = _fresh(f"{s.tensor}_c", taken)
    if mask is None:
        return Chain(frozenset(r1), temp, temp_vars)
    masked = _fresh(f"{s.tensor}_m", taken | {temp})
    return Chain(frozenset(r1), temp, temp_vars, masked=masked, mask_vars=_index_names(factors[mask[0]][1]),
                 mask_at=(mask[0], mask[3]))


def _reshaped(lhs: list, inner: list[set], temp_vars: set) -> bool:
    """A first sum with as many loops as the statement is still taken when
    it turns a sum into fewer than two output dimensions (a register tile
    has no columns) into a product of two factors with two or more (a
    matrix product): ``q(b) +=! x(b, i) * A(i, j) * x(b, j)``, a quadratic
    form, is ``q_c(b, j) +=! x(b, i) * A(i, j)`` then ``q(b) +=! q_c(b, j)
    * x(b, j)``, the order of ``(x @ A * x).sum(1)``.  ``inner``: the two
    factors' variables; some output of the first sum must be missing from
    one of them (an elementwise product summed, ``dy(n, h, w, c) * xc(n, h,
    w, c)`` into ``(c, w)``, is no matrix product: its sum over ``n, h``
    would run down a channels-last tensor's rows, a gather per element)."""
    return len(lhs) < 2 and len(inner) == 2 and len(temp_vars) >= 2 \
        and any(not all(v in f for f in inner) for v in temp_vars)


def masked_factors(e: n.Expr) -> tuple[list[tuple[str, n.Expr]], tuple[int, n.Expr, n.Expr, bool] | None]:
    """The factors of ``e`` (:func:`split`) and its mask: ``(k, cond, zero,
    outer)`` where ``e`` is ``cond ? <product> : 0`` (``outer``) or a factor is
    ``cond ? F : 0``, and the index variables of ``cond`` are among those of
    factor ``k``, a read at distinct index variables (``j > i ? G(i, j) *
    x(b, i) * x(b, j) : 0``, a factorization machine's pairwise sum); else
    None (on the checked statement, where sizes are no names).  The chain then
    reads that factor masked, ``(cond ? F : 0)``, from a temporary written
    first: its sums then run over boxes, a matrix product, where the select
    kept in a sum split it into triangles.  As ``split_selects`` does, this
    takes ``0 * x`` to be 0 (a NaN or an infinity in a masked-out term no
    longer gives NaN)."""
    def zero(x):
        return isinstance(x, n.Const) and not isinstance(x.value, bool) and x.value == 0

    def pick(factors, cond):
        want = _vars(cond)
        fits = [k for k, (op, f) in enumerate(factors) if op == "*" and _index_names(f) and want <= _vars(f)]
        return min(fits, key=lambda k: len(_vars(factors[k][1]))) if fits else None

    if isinstance(e, n.Select) and zero(e.other):
        factors = split(e.then)
        k = pick(factors, e.cond)
        if k is None:
            return split(e), None
        return factors, (k, e.cond, e.other, True)
    factors = split(e)
    for k, (op, f) in enumerate(factors):
        if op == "*" and isinstance(f, n.Select) and zero(f.other) and pick([("*", f.then)], f.cond) == 0:
            factors = factors[:k] + [("*", f.then)] + factors[k + 1:]
            return factors, (k, f.cond, f.other, False)
    return factors, None


def _unmasked(e: n.Expr, c: Chain) -> tuple[list[tuple[str, n.Expr]], tuple[int, n.Expr, n.Expr]]:
    """The factors and mask of a statement that :func:`plan` found masked, on
    the parsed statement (where sizes are names too: the plan's choice is
    kept, not made again)."""
    k, outer = c.mask_at
    if outer:
        return split(e.then), (k, e.cond, e.other)
    factors = split(e)
    f = factors[k][1]
    return factors[:k] + [("*", f.then)] + factors[k + 1:], (k, f.cond, f.other)


def _index_names(f: n.Expr) -> tuple[str, ...]:
    """The index names of a read at distinct plain index variables; () otherwise."""
    idx = f.indices if isinstance(f, n.Access) else f.args if isinstance(f, n.Call) else ()
    if not idx:
        return ()
    names = [x.name if isinstance(x, (n.IndexVar, n.Ident)) else None for x in idx]
    return tuple(names) if None not in names and len(set(names)) == len(names) else ()


def split(e: n.Expr) -> list[tuple[str, n.Expr]]:
    """The factors of the product ``e`` as ``("*" or "/", factor)`` pairs."""
    out: list[tuple[str, n.Expr]] = []

    def visit(x: n.Expr, op: str) -> None:
        if isinstance(x, n.Binary) and x.op == "*" and op == "*":
            visit(x.lhs, "*")
            visit(x.rhs, "*")
        elif isinstance(x, n.Binary) and x.op == "/" and op == "*":
            visit(x.lhs, "*")
            out.append(("/", x.rhs))
        else:
            out.append((op, x))

    visit(e, "*")
    return out


def rewrite(d: n.Def, p: dict[tuple, Chain]) -> n.Def:
    """``d`` (as parsed) with each statement of ``p`` as a chain of two sums."""
    return replace(d, body=_block(d.body, p))


def _block(body: tuple, p: dict[tuple, Chain]) -> tuple:
    out: list = []
    for s in body:
        if isinstance(s, n.For):
            out.append(replace(s, body=_block(s.body, p)))
        elif isinstance(s, n.If):
            out.append(replace(s, then=_block(s.then, p), orelse=_block(s.orelse, p)))
        elif isinstance(s, n.Comprehension) and (s.span, s.tensor) in p:
            out.extend(_split_stmt(s, p[s.span, s.tensor]))
        else:
            out.append(s)
    return tuple(out)


def _split_stmt(s: n.Comprehension, c: Chain) -> list[n.Comprehension]:
    factors, made = split(s.rhs), []
    if c.masked is not None:
        # the masked factor first, ``M(i, j) = cond ? F(i, j) : 0``, read in its place
        factors, (k, cond, zero) = _unmasked(s.rhs, c)
        f = factors[k][1]
        idx = tuple(n.Ident(v, span=f.span) for v in c.mask_vars)
        made.append(n.Comprehension(c.masked, idx, "=", n.Select(cond, f, zero, span=f.span), c.mask_bounds,
                                    span=f.span))
        factors = factors[:k] + [("*", n.Call(c.masked, idx, span=f.span))] + factors[k + 1:]
    inner = [f for f in factors if _vars(f[1]) & c.first]
    outer = [f for f in factors if not _vars(f[1]) & c.first]
    # the first sum and its read carry the span of the factors they sum (a
    # statement's span names it in the passes after this one)
    here = inner[0][1].span
    for _, f in inner[1:]:
        here = here.merge(f.span) if here is not None else f.span
    here = here or s.span
    temp_idx = tuple(n.Ident(v, span=here) for v in c.temp_vars)
    first_vars = set(c.temp_vars) | c.first
    wheres1 = tuple(w for w in s.wheres if isinstance(w, n.RangeConstraint) and w.var in first_vars)
    wheres2 = tuple(w for w in s.wheres if not (isinstance(w, n.RangeConstraint) and w.var in c.first))
    first = n.Comprehension(c.temp, temp_idx, "+=!", _product(inner, here), wheres1 + c.bounds, span=here)
    read = n.Call(c.temp, temp_idx, span=here)
    rest = [("*", read)] + outer
    return made + [first, replace(s, rhs=_product(rest, s.span), wheres=wheres2, reduction_vars=())]


def _vars(node: n.Node) -> set[str]:
    """The names below ``node`` (index variables, and sizes before the checker tells them apart)."""
    return {x.name for x in n.walk(node) if isinstance(x, (n.IndexVar, n.Ident))}


def _ordered_vars(node: n.Node) -> list[str]:
    seen: list[str] = []
    for x in n.walk(node):
        if isinstance(x, n.IndexVar) and x.name not in seen:
            seen.append(x.name)
    return seen


def _taken(d: n.Def) -> set[str]:
    names = {p.name for p in d.params} | {o.name for o in d.outputs}
    for x in n.walk(d):
        if isinstance(x, (n.Comprehension,)):
            names.add(x.tensor)
        elif isinstance(x, (n.IndexVar, n.Ident, n.SizeVar)):
            names.add(x.name)
        elif isinstance(x, n.For):
            names.add(x.var)
    for p in d.params:
        names.update(str(x) for x in p.type.dims)
    return names


def exact(old: RangeInfo, new: RangeInfo, p: dict[tuple, Chain]) -> bool:
    """The rewritten program (``new``) runs the terms ``old`` ran: every other
    statement its instances, each split statement's domain the join of its
    two sums' domains, every element of a temporary that the second sum
    reads one that the first initialized; every tensor of ``old`` keeps its
    extents."""
    if not same_extents(old, new):
        return False
    by_key = {(s.comp.span, s.comp.tensor): s for s in new.stmts}
    for st in old.stmts:
        ns = by_key.get((st.comp.span, st.comp.tensor))
        if ns is None:
            return False
        if (st.init_domain is None) != (ns.init_domain is None):
            return False
        if st.init_domain is not None and not _equal(_flat(st.init_domain), _flat(ns.init_domain)):
            return False
        c = p.get((st.comp.span, st.comp.tensor))
        if c is None:
            if not _equal(_flat(st.domain), _flat(ns.domain)):
                return False
            continue
        first = next((x for x in new.stmts if x.comp.tensor == c.temp), None)
        if first is None or first.init_domain is None:
            return False
        d1, d2 = _flat(first.domain), _flat(ns.domain)
        if not _equal(_flat(st.domain), _meet(d1, d2)):
            return False
        if not _subset(_project(d2, c.temp_vars, ns.vars), _flat(first.init_domain)):
            return False
        if c.masked is not None:  # every element of the masked factor read is one written
            m = next((x for x in new.stmts if x.comp.tensor == c.masked), None)
            if m is None:
                return False
            for reader in (first, ns):
                if any(isinstance(a, n.Access) and a.tensor == c.masked for a in n.walk(reader.comp.rhs)) and \
                        not _subset(_project(_flat(reader.domain), c.mask_vars, reader.vars), _flat(m.domain)):
                    return False
    return True


def _flat(s: isl.Set) -> isl.Set:
    """``s`` with its dimensions as parameters (named as the index variables)."""
    s = s.reset_tuple_id()
    return s.move_dims(isl.dim_type.param, s.dim(isl.dim_type.param), isl.dim_type.set, 0, s.dim(isl.dim_type.set))


def _aligned(a: isl.Set, b: isl.Set) -> tuple[isl.Set, isl.Set]:
    return a.align_params(b.get_space()), b.align_params(a.get_space())


def _equal(a: isl.Set, b: isl.Set) -> bool:
    a, b = _aligned(a, b)
    return a.is_equal(b)


def _meet(a: isl.Set, b: isl.Set) -> isl.Set:
    a, b = _aligned(a, b)
    return a & b


def _subset(a: isl.Set, b: isl.Set) -> bool:
    a, b = _aligned(a, b)
    return a.is_subset(b)


def _project(d: isl.Set, keep: tuple[str, ...], own: tuple[str, ...]) -> isl.Set:
    """``d`` (flat) with the index variables of ``own`` not in ``keep`` projected out."""
    for v in own:
        if v in keep:
            continue
        i = d.find_dim_by_name(isl.dim_type.param, isl_name(v))
        if i >= 0:
            d = d.project_out(isl.dim_type.param, i, 1)
    return d
