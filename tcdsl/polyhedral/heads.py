"""A sum over a flat index of heads read by its digits, computed per head first.

Users merge attention heads as PyTorch's ``.view(B, T, NH * DH)`` does,
naming the flat channel ``e`` and its head ``e / DH``::

    ctx(b, i, e) +=! p(b, e / DH, i, j) * v(b, j, e) where e in 0:NH * DH

``e / DH`` with ``DH`` a size is no affine index: isl cannot model the read,
the sum gets no register tiles, and runs as a dot product per element (30 ms
against 0.70 ms for the same sum written per head, ``ctx(b, i, h, d) +=! p(b,
h, i, j) * v(b, j, h * DH + d)``, at (B, T, NH, DH) = (8, 128, 8, 32)).
``plan(checked, ranges)`` finds each ``+=!`` (``max=!``, ``min=!``) statement
whose last left-hand side variable ``e`` -- the vector loop and a register
tile's columns, which such a read keeps from both; an outer one only where
such a read is under a select, which the padding pass cannot copy (an outer
one reads a row per value as written: a grouped conv1d's ``x(b, (o / (O /
8)) * CG + c, t + k)`` by output channel ran faster so than per head, with
copies) -- its right side and ``where`` values read only as ``e / S``, ``e % S`` or a whole
index ``e``, at least once as ``e / S``, ``S`` an expression of sizes.
``rewrite(def, plan)`` computes the sum per head ``h`` and digit ``d`` in
``0:S`` in a temporary (``e / S`` -> ``h``, ``e % S`` -> ``d``, ``e`` -> ``h *
S + d``), then copies it to the tensor, whose elements are the temporary's
in the same order::

    ctx_h(b, i, h, d) +=! p(b, h, i, j) * v(b, j, h * DH + d) where h in 0:NH, d in 0:DH
    ctx(b, i, e) = ctx_h(b, i, e / DH, e % DH) where e in 0:NH * DH

For ``e`` in ``0:A * S`` (a ``where``), ``h`` runs over ``0:A``; for another
range ``0:X`` (inferred, or a ``where``), over ``0:X / S``, and the elements
past the last whole head run as written in a statement of their own (none
where ``S`` divides ``X``).  ``h`` also stays below the extent of every
dimension read at ``e / S``, so that each such read is proved in bounds
(``kept``); the elements past it run as written too.
(polyhedral/gather.py then copies ``v``'s heads apart).  The terms and their
order are the program's: the results are the same.  Part of the ``chain``
option (``options={"chain": False}`` leaves programs as written).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..source import Span
from ..syntax import nodes as n
from ..sema.affine import underived
from ..syntax.printer import expr_to_tc

OPS = ("+=!", "max=!", "min=!")


@dataclass(frozen=True)
class Heads:
    var: str  # the flat left-hand side variable ``e``
    divisor: str  # ``S``, as TC source
    # ``e``'s range ``0:X`` as inferred (parsed form) where no ``where`` gives
    # it: ``h`` then takes ``0:X / S`` and a tail statement the rest
    inferred: n.Expr | None = None
    # the extents of the dimensions read at ``e / S`` (parsed form): ``h`` stays
    # below each, so that every read of the sum per head is in bounds
    limits: tuple = ()


def _name(x) -> str | None:
    return x.name if isinstance(x, (n.IndexVar, n.Ident)) else None


def _digit(x, var: str, divisor: str) -> bool:
    """``x`` is ``var / S`` or ``var % S``."""
    return isinstance(x, n.Binary) and x.op in ("/", "%") and _name(x.lhs) == var \
        and expr_to_tc(x.rhs) == divisor


def _uses_ok(e, var: str, divisor: str, index: bool = False) -> tuple[bool, bool]:
    """(every use of ``var`` in ``e`` is a digit or a whole index, or that plus
    sizes, one is ``var / S``)."""
    if _digit(e, var, divisor):
        return True, e.op == "/"
    if _name(e) == var:
        return index, False
    ok, div = True, False
    subscripts = set()
    if isinstance(e, (n.Access, n.Call)):
        subscripts = {id(i) for i in (e.indices if isinstance(e, n.Access) else e.args)}
    for c in n.children(e):
        if isinstance(c, n.Node):
            if id(c) in subscripts and _shifted(c, var):
                continue  # (``qkv(b, j, 2 * C + e)``: ``e`` plus sizes, a whole index moved)
            a, b = _uses_ok(c, var, divisor, id(c) in subscripts)
            ok, div = ok and a, div or b
    return ok, div


def _shifted(e, var: str) -> bool:
    """The index ``e`` is ``var`` plus terms of sizes and constants only."""
    lin = n.linear(e)
    return lin is not None and lin.get(var) == 1 and not any(
        isinstance(x, n.IndexVar) and x.name != var for x in n.walk(e)) and not isinstance(e, n.IndexVar)


def _guarded(e, var: str, under: bool = False) -> bool:
    """A read at ``var / S`` is in a branch of a select in ``e``."""
    if isinstance(e, n.Access):
        return under and any(isinstance(x, n.Binary) and x.op == "/" and _name(x.lhs) == var
                             for i in e.indices for x in n.walk(i))
    if isinstance(e, n.Select):
        return _guarded(e.cond, var, under) or _guarded(e.then, var, True) or _guarded(e.other, var, True)
    return any(_guarded(c, var, under) for c in n.children(e) if isinstance(c, n.Node))


def _outer(hi: n.Expr, divisor: str) -> n.Expr | None:
    """``A`` of a range's end ``A * S`` or ``S * A``."""
    if isinstance(hi, n.Binary) and hi.op == "*":
        for a, b in ((hi.lhs, hi.rhs), (hi.rhs, hi.lhs)):
            if expr_to_tc(b) == divisor:
                return a
    return None


def _limits(s: n.Comprehension, var: str, divisor: str, ranges, derived: dict) -> tuple:
    """The extents (parsed form) of the dimensions ``s`` reads at ``var / S``."""
    out: dict[str, n.Expr] = {}
    for a in n.walk(s.rhs):
        if not isinstance(a, n.Access):
            continue
        for p, i in enumerate(a.indices):
            if _digit(i, var, divisor) and i.op == "/":
                ext = underived(ranges.extent_exprs(a.tensor)[p], derived)
                out.setdefault(expr_to_tc(ext), ext)
    return tuple(out.values())


def _find(s: n.Comprehension, st, ranges, derived: dict) -> Heads | None:
    if s.op not in OPS or s.span is None or s.equivalent is not None:
        return None
    lhs = [_name(x) for x in s.indices]
    if None in lhs or len(set(lhs)) != len(lhs):
        return None
    if any(isinstance(x, (n.Access, n.Call)) and getattr(x, "tensor", getattr(x, "name", None)) == s.tensor
           for x in n.walk(s.rhs)):
        return None
    index_vars = set(lhs) | set(s.reduction_vars)
    lets = tuple(w.expr for w in s.wheres if isinstance(w, n.Let))
    # the last index: the vector loop and a register tile's columns, which a
    # read at ``e / S`` keeps from both; an outer one where such a read is under
    # a select (padding: the padding pass copies affine reads only, a grouped
    # 3x3 convolution NCHW 7.7 -> 1.9 ms); otherwise an outer one reads a row
    # per value as written (a grouped conv1d's ``x(b, (o / (O / 8)) * CG + c,
    # t + k)``: per head it took copies of ``x`` and of the output, 2-3x slower)
    for var in lhs[-1:] + [v for v in lhs[:-1] if _guarded(s.rhs, v)]:
        for x in (y for e in (s.rhs,) + lets for y in n.walk(e)):
            if not (isinstance(x, n.Binary) and x.op == "/" and _name(x.lhs) == var):
                continue
            divisor = expr_to_tc(x.rhs)
            if isinstance(x.rhs, n.Const) or {_name(y) for y in n.walk(x.rhs)} & index_vars:
                continue  # (a constant divisor is affine to isl already)
            uses = [_uses_ok(e, var, divisor) for e in (s.rhs,) + lets]
            if not all(ok for ok, _ in uses) or not any(div for _, div in uses):
                continue
            rng = [w for w in s.wheres if isinstance(w, n.RangeConstraint) and w.var == var]
            if rng:
                hi = underived(rng[0].hi, derived)  # (``NH * DH`` is the derived size ``NH_x_DH`` once checked)
                if len(rng) == 1 and expr_to_tc(rng[0].lo) == "0" and not any(
                        isinstance(y, (n.Select, n.IndexVar)) for y in n.walk(hi)):
                    return Heads(var, divisor, None, _limits(s, var, divisor, ranges, derived))
                continue
            if st is None or var not in st.ranges:
                continue
            (got,) = st.where_ranges([var])
            hi = underived(got.hi, derived)
            if expr_to_tc(got.lo) == "0" and not any(isinstance(y, (n.Select, n.IndexVar)) for y in n.walk(hi)):
                return Heads(var, divisor, hi, _limits(s, var, divisor, ranges, derived))
    return None


def plan(checked, ranges=None) -> dict[object, Heads]:
    """Statement span -> :class:`Heads`, for the sums of the module docstring."""
    if ranges is None:
        return {}
    infos = {(st.comp.span, st.comp.tensor): st for st in ranges.stmts} if ranges is not None else {}
    out: dict[object, Heads] = {}
    for s, _loops in n.comprehensions_in_loops(checked.node.body):
        found = _find(s, infos.get((s.span, s.tensor)), ranges, checked.derived)
        if found is not None:
            out[s.span] = found
    return out


def rewrite(d: n.Def, p: dict[object, Heads]) -> n.Def:
    """``d`` (as parsed) with each planned sum computed per head first."""
    from .layout import _fresh, _names

    taken = _names(d) | {c.tensor for c in n.walk(d) if isinstance(c, n.Comprehension)}

    def block(stmts) -> tuple:
        out: list = []
        for st in stmts:
            if isinstance(st, n.For):
                out.append(replace(st, body=block(st.body)))
                continue
            if isinstance(st, n.If):
                out.append(replace(st, then=block(st.then), orelse=block(st.orelse)))
                continue
            plan_ = p.get(st.span) if isinstance(st, n.Comprehension) else None
            if plan_ is None:
                out.append(st)
                continue
            out.extend(_split(st, plan_, taken, _fresh))
        return tuple(out)

    return replace(d, body=block(d.body))


def _split(st: n.Comprehension, hd: Heads, taken: set[str], fresh) -> tuple:
    sp = st.span
    var, divisor = hd.var, hd.divisor
    size = next(x.rhs for e in (st.rhs,) + tuple(w.expr for w in st.wheres if isinstance(w, n.Let))
                for x in n.walk(e) if _digit(x, var, divisor) and x.op == "/")
    rng = next((w for w in st.wheres if isinstance(w, n.RangeConstraint) and w.var == var), None)
    hi = rng.hi if rng is not None else hd.inferred
    outer = _outer(hi, divisor)
    exact = outer is not None
    outer = outer or n.Binary("/", hi, size, span=sp)
    for lim in hd.limits:
        if expr_to_tc(lim) != expr_to_tc(outer):
            outer, exact = n.Binary("min", outer, lim, span=sp), False
    temp = fresh(f"{st.tensor}_h", taken)
    h = fresh("h", taken)
    taken.update((temp, h))
    dg = fresh("d", taken)
    taken.add(dg)

    def digits(e):
        if _digit(e, var, divisor):
            return n.Ident(h if e.op == "/" else dg, span=e.span)
        if _name(e) == var:
            return n.Binary("+", n.Binary("*", n.Ident(h, span=e.span), size, span=e.span),
                            n.Ident(dg, span=e.span), span=e.span)
        return n.map_children(e, digits)

    at = next(i for i, x in enumerate(st.indices) if _name(x) == var)
    lhs = st.indices[:at] + (n.Ident(h, span=sp), n.Ident(dg, span=sp)) + st.indices[at + 1:]
    ranges = (n.RangeConstraint(h, n.Const(0, span=sp), outer, span=sp),
              n.RangeConstraint(dg, n.Const(0, span=sp), size, span=sp))
    rest = tuple(replace(w, expr=digits(w.expr)) if isinstance(w, n.Let) else w for w in st.wheres if w is not rng)
    here = st.rhs.span or sp  # (a statement's span names it in the passes after this one)
    first = n.Comprehension(temp, lhs, st.op, digits(st.rhs), rest + ranges, span=here)
    flat = n.Ident(var, span=sp)
    read = n.Call(temp, st.indices[:at] + (n.Binary("/", flat, size, span=sp), n.Binary("%", flat, size, span=sp))
                  + st.indices[at + 1:], span=sp)
    whole = n.Binary("*", outer, size, span=sp)
    if not exact:  # (``A * S`` is a derived size: as a ``min`` with ``X``, the copy and the tail cover ``0:X``)
        whole = n.Binary("min", whole, hi, span=sp)
    others = tuple(w for w in rest if isinstance(w, n.RangeConstraint) and w.var in {_name(x) for x in st.indices})
    copy = replace(st, op="=", rhs=read, wheres=(n.RangeConstraint(var, n.Const(0, span=sp), whole, span=sp),)
                   + others, reduction_vars=())
    if exact:
        return first, copy
    # the elements past the last whole head (none where ``A * S`` is the
    # range), as written: their reads stay clamped into their tensors
    # (its nodes get spans of their own, past the text: the passes after this
    # one find a read by its span)
    count = iter(range(len(sp.source.text) + 1, 1 << 40))

    def respan(e):
        kw = {}
        for f in fields(e):
            v = getattr(e, f.name)
            if f.name in ("span", "dtype"):
                continue
            if isinstance(v, n.Node):
                kw[f.name] = respan(v)
            elif isinstance(v, tuple):
                kw[f.name] = tuple(respan(x) if isinstance(x, n.Node) else x for x in v)
        return replace(e, span=Span(sp.source, sp.start, next(count)), **kw)

    kept = tuple(replace(w, expr=respan(w.expr)) if isinstance(w, n.Let) else w for w in st.wheres if w is not rng)
    tail = replace(st, rhs=respan(st.rhs), wheres=kept + (n.RangeConstraint(var, whole, hi, span=sp),),
                   span=Span(sp.source, sp.start, next(count)))
    return first, copy, tail


def kept(old, new, model, plan) -> bool:
    """Whether the rewritten program reads nothing out of bounds that the
    original did not (the reads at ``h`` are affine, and proved)."""
    from .bounds import reads_as_before

    return reads_as_before(old, new, model)
