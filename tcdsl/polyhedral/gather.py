"""Reads through an index, gathered once before the sum that reuses them.

An embedding lookup feeding a matmul reads a row of a table through an index
tensor at every term of the sum::

    g_in(t, b, r) +=! emb(tok(t, b), i) * Wih(r, i)

Each value ``emb(tok(t, b), i)`` is read again for every column ``r``: the
register tiles load the index, then the row it names, inside their
reduction loop, and a tile's rows come from scattered rows of the table (an
embedding feeding an LSTM at (T, B, I, H) = (64, 32, 256, 256): 37 ms
against 22 with the rows gathered first, the LSTM alone 20).  ``plan``
finds, in the statements at the top of the ``def`` (outside every ``for``:
the hoisted input projection of an RNN is one), each sum's reads whose
indices read a tensor and whose value is reused across an index of the sum
that they do not use (and that read nothing the sum writes); ``rewrite`` copies each such read once, into a new
temporary indexed by the variables it uses, right before the sum, which
then reads the copy::

    emb_g(t, b, i) = emb(tok(t, b), i)
    g_in(t, b, r) +=! emb_g(t, b, i) * Wih(r, i)

A read through index arithmetic that isl cannot model is copied the same
way when each such index is two digits (:func:`_digits`): heads
``qkv(b, i, h * DH + d)`` with free sizes NH and DH, patches ``img(b, c,
(n / GW) * P + py, ...)``; the copy ``qkv_g(b, h, i, d)`` makes the sum a
batched matmul instead of dot products over clamped reads.

Where the read's other indices include an affine one of several terms (a
grouped convolution on channels-last input, ``x(n, h + kh - 1, w + kw - 1,
g * CG + ci)``), a copy by the read's variables would hold each element once
per tap; the copy then splits the digits only, each such index spanning its
dimension: ``x_g(n, i1, i2, g, ci) = x(n, i1, i2, g * CG + ci)``, read at
``x_g(n, h + kh - 1, w + kw - 1, g, ci)`` (affine: the padding pass pads it).

A concatenation inside a sum, a select on a reduction variable between
reads of two tensors at the same shifted indices (a U-Net up-block's
``torch.cat`` inside its convolution's padding), is copied once the same
way (:func:`_concatenated`), and so is an input's read at a quotient by a
constant along the sum's vector loop (a nearest upsample fused into a
convolution, ``x(b, c, (i + kh - 1) / 2, (j + kw - 1) / 2)``: the copy is
the upsampled input, :func:`_upsampled`).

The values summed and their order are unchanged (results bit-identical).
The driver keeps the rewrite only when every statement of the program runs
the instances it ran before and every tensor keeps its extents
(``same_domains``), and the copy is read within its bounds;
``options={"gather": False}`` leaves programs as written.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..sema.affine import NotAffine, to_isl
from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo, readable
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc
from . import scatter
from .hoist import same_extents, same_points


@dataclass(frozen=True)
class Gather:
    """One read to copy: its span (the parsed ``def``'s read has the same),
    the variables it uses in order, the new temporary's name."""

    span: object
    variables: tuple[str, ...]
    name: str
    bounds: tuple = ()  # ``where`` ranges of the copy's variables the sum does not give: its inferred ones
    top: bool = False  # an input read in a sequential loop: copied once, at the top of the ``def``
    # per variable, the read's index position whose expression the sum passes
    # for it (an affine index of several terms, ``h + kh - 1``: the copy spans
    # that whole dimension), or None: the variable itself
    positions: tuple = ()
    select: bool = False  # ``span`` is a select of two reads (a concatenation), copied whole (:func:`_concatenated`)
    divisors: tuple = ()  # per variable, K where the read's index at its position is ``e / K`` (:func:`_upsampled`)


def plan(checked: CheckedDef, ranges: RangeInfo | None = None) -> dict[object, list[Gather]]:
    """Statement span -> the reads of that sum to gather first."""
    taken = set(checked.tensors) | {p.name for p in checked.node.params}
    out: dict[object, list[Gather]] = {}
    infos = {(st.comp.span, st.comp.tensor): st for st in ranges.stmts} if ranges is not None else {}
    written = {c.tensor for c in n.walk(checked.node) if isinstance(c, n.Comprehension)}
    inputs = {p.name: checked.tensors[p.name].dims for p in checked.node.params if p.name not in written}
    copies: dict[tuple, str] = {}  # (read, variables, bounds) of an input's copy at the top -> its name

    for s, loops in n.comprehensions_in_loops(checked.node.body):
        found = _gathers(s, infos.get((s.span, s.tensor)), frozenset(loops), inputs, taken, copies)
        if found:
            out[s.span] = found
    return out


def _gathers(s: n.Comprehension, st, loops: frozenset, inputs: dict, taken: set[str],
             copies: dict[tuple, str]) -> list[Gather]:
    """The reads of the sum ``s`` to copy (see the module docstring); in a
    sequential loop (``loops``: its variables) only reads of the inputs
    through two digits, copied once at the top of the ``def``."""
    if s.op not in ("+=!", "+=") or not s.reduction_vars or s.span is None:
        return []
    lets = {w.name for w in s.wheres if isinstance(w, n.Let)}
    lhs = {x.name for x in s.indices if isinstance(x, (n.IndexVar, n.Ident))}
    # the variables a scatter picks (``col(e) == c ? val(e) * X(rid(e), d) : 0``: one ``c`` per
    # term) reuse nothing: its gathered rows would each be read once; a read that
    # uses one is made only where the pick holds (a copy would hold every ``c`` per term)
    found_scatter = scatter.find(st) if st is not None else None
    picks = {v for v, _ in found_scatter.picks} if found_scatter is not None else set()
    lhs -= picks
    found: list[Gather] = [] if loops or st is None else _concatenated(s, st, lhs, lets, taken)
    inside = {x.span for g in found for sel in n.walk(s.rhs) if isinstance(sel, n.Select) and sel.span == g.span
              for x in n.walk(sel)}
    for a in n.walk(s.rhs):
        if not isinstance(a, n.Access) or a.span is None or any(g.span == a.span for g in found) or a.span in inside:
            continue  # (a ``where`` value used several times is one read: one copy)
        indirect = any(isinstance(x, n.Access) for i in a.indices for x in n.walk(i))
        strided = not indirect and not loops and _strided(a, s)
        up = None if indirect or loops or st is None or a.tensor not in inputs or _names_of(a) & lets \
            else _upsampled(a, s, inputs[a.tensor], lhs, taken, st)
        if up is not None:
            found.append(up)
            continue
        if not indirect and not strided and not (any(_not_affine(i) for i in a.indices) and st is not None
                                                 and all(_digits(i, s, st) for i in a.indices if _not_affine(i))):
            continue
        if loops and (indirect or a.tensor not in inputs or _names_of(a) & loops):
            continue  # in a loop: only an input's elements, the same at every step
        dims = inputs.get(a.tensor)
        if any(isinstance(x, n.Access) and x.tensor == s.tensor for x in n.walk(a)):
            continue  # reads what the sum writes: the sum may change it while it runs
        if any(isinstance(x, (n.IndexVar, n.Ident)) and x.name in lets for x in n.walk(a)):
            continue  # a ``where`` value inside
        # the copy's dimensions as the read names them, those of the sum's
        # own among them in the sum's order (its rows then run as the
        # sum's: ``g(b, u, r)`` reads ``emb_g(b, u, e)`` for ``emb(y(u - 1,
        # b), e)``, two loops the code generator can join)
        seen = list(dict.fromkeys(x.name for x in n.walk(a) if isinstance(x, n.IndexVar)))
        if picks & set(seen):
            continue
        if not indirect and any(_divided_only(a, v) for v in seen):
            continue  # (a copy over ``h`` of a read at ``h % 2``: each element once per ``h / 2``)
        if not loops and not indirect and not strided and dims and not (lhs <= set(seen)):
            whole = _reshaped(a, s, dims, taken, st)
            if whole is not None:
                found.append(whole)
                continue
        order = [x.name for x in s.indices if isinstance(x, (n.IndexVar, n.Ident))]
        own = iter(sorted((v for v in seen if v in order), key=order.index))
        variables = tuple(next(own) if v in order else v for v in seen)
        if not variables or not (lhs - set(variables)):
            continue  # nothing to reuse it across
        if loops and order and order[-1] in variables and variables[-1] != order[-1]:
            # read at every step: the copy has the sum's last index last, so that its
            # vectors and register tiles load it contiguously (a gate's rows of a
            # recurrent weight in PyTorch's layout, ``w_hh(q * H + j, k)``: ``w_hh_g(q, k, j)``)
            variables = tuple(v for v in variables if v != order[-1]) + (order[-1],)
        # a variable only a non-affine index uses has no range there (``h`` of ``qkv(b, j, h * DH + d)``)
        given = {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)}
        bounds = st.where_ranges(variables, given) if not indirect else ()
        if not loops:
            name = _fresh(a.tensor + "_g", taken)
            taken.add(name)
            found.append(Gather(a.span, variables, name, bounds))
            continue
        bounds += tuple(w for w in s.wheres if isinstance(w, n.RangeConstraint) and w.var in variables)
        # a variable alone in an index of the input: the copy spans that whole dimension (the
        # same copy for every read of it, ``h0(b, k) * w_hh(q * H + j, k)`` and ``h(t - 1, b, k) * ...``)
        whole = {x.name: dims[i] for i, x in enumerate(a.indices)
                 if isinstance(x, n.IndexVar) and isinstance(dims[i], (str, int))} if dims else {}
        bounds = tuple(n.RangeConstraint(b.var, n.Const(value=0), _extent(whole[b.var])) if b.var in whole else b
                       for b in bounds)
        if {v for v in variables} - {b.var for b in bounds} or any(_names_of(b) & loops for b in bounds):
            continue  # a range that moves with the loop: not one copy for all steps
        key = (expr_to_tc(a), variables, tuple(map(expr_to_tc, (x for b in bounds for x in (b.lo, b.hi)))))
        if key not in copies:
            copies[key] = _fresh(a.tensor + "_g", taken)
            taken.add(copies[key])
        found.append(Gather(a.span, variables, copies[key], bounds, top=True))
    return found


def _concatenated(s: n.Comprehension, st, lhs: set[str], lets: set[str], taken: set[str]) -> list[Gather]:
    """The concatenations in the sum ``s`` to copy first: a select on one
    reduction variable ``c`` between reads of two tensors (not ``s``'s) at
    the same indices but the one of ``c``, with an index of several terms
    among them (a U-Net up-block's ``torch.cat`` inside its convolution's
    padding, ``c < C1 ? u(b, i + kh - 1, j + kw - 1, c) : s(b, i + kh - 1, j
    + kw - 1, c - C1)``: the select and both reads once per tap and output
    channel, 60x torch's ``cat`` then ``conv2d``).  The copy spans such an
    index's values (``cat(b, i1, i2, c) = c < C1 ? u(b, i1, i2, c) : s(b,
    i1, i2, c - C1)``, their ranges inferred from the reads) and the sum
    reads ``cat(b, i + kh - 1, j + kw - 1, c)``, a padded convolution."""
    out: list[Gather] = []
    names = _names_of(s) | taken
    for e in n.walk(s.rhs):
        if not (isinstance(e, n.Select) and e.span is not None and isinstance(e.then, n.Access)
                and isinstance(e.other, n.Access) and e.then.tensor != e.other.tensor
                and len(e.then.indices) == len(e.other.indices) and s.tensor not in (e.then.tensor, e.other.tensor)):
            continue
        cond = _names_of(e.cond)
        if len(cond) != 1 or not cond <= set(s.reduction_vars) or _names_of(e) & lets:
            continue
        (c,) = cond
        variables: list[str] = []
        positions: list[int | None] = []
        for p, (x, y) in enumerate(zip(e.then.indices, e.other.indices)):
            if c in _names_of(x) or c in _names_of(y):
                if _names_of(x) != {c} or _names_of(y) != {c} \
                        or c in variables:
                    break
                variables.append(c)
                positions.append(None)
            elif expr_to_tc(x) != expr_to_tc(y) or any(isinstance(z, n.Access) for z in n.walk(x)):
                break
            elif isinstance(x, n.IndexVar):
                variables.append(x.name)
                positions.append(None)
            elif _names_of(x) and not _not_affine(x):
                v = _fresh(f"i{p}", names)
                names.add(v)
                variables.append(v)
                positions.append(p)
            else:
                break
        else:
            if c in variables and any(q is not None for q in positions) and len(set(variables)) == len(variables) \
                    and lhs - set(variables):
                given = {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)}
                bounds = tuple(w for w in s.wheres if isinstance(w, n.RangeConstraint) and w.var == c) \
                    or st.where_ranges([c], given)
                name = _fresh(s.tensor + "_cat", taken)
                taken.add(name)
                out.append(Gather(e.span, tuple(variables), name, bounds, positions=tuple(positions), select=True))
    return out


def _upsampled(a: n.Access, s: n.Comprehension, dims: tuple, lhs: set[str], taken: set[str], st) -> Gather | None:
    """The copy of an input's read at a quotient by a constant along the
    sum's vector loop (its last written index), reused across another of
    its indices: a nearest 2x upsample fused into a convolution, ``x(b, c,
    (i + kh - 1) / 2, (j + kw - 1) / 2) * w(o, c, kh, kw)``, loads each
    lane's element alone (a gather per multiply-add: 9.5x torch's
    ``interpolate`` then ``conv2d``).  The copy is the upsampled input,
    ``x_g(b, c, i2, i3) = x(b, c, i2 / 2, i3 / 2)`` over ``0:2 * H``, ``0:2 *
    W``, read at ``x_g(b, c, i + kh - 1, j + kw - 1)`` (affine: the padding
    pass pads it).  None where the read is no such."""
    order = [x.name for x in s.indices if isinstance(x, (n.IndexVar, n.Ident))]
    if not order or len(order) != len(s.indices) or len(dims) != len(a.indices) \
            or any(isinstance(x, n.Access) for i in a.indices for x in n.walk(i)) or s.tensor == a.tensor:
        return None
    names = _names_of(s) | taken
    # (a transposed convolution's ``(i - kh) % 2 == 0 ? x(.., (i - kh) / 2) : 0``: the parity split's)
    parity = {expr_to_tc(x.lhs) for x in n.walk(s.rhs) if isinstance(x, n.Binary) and x.op == "%"}
    variables, positions, divisors, extra, spread = [], [], [], [], False
    for p, i in enumerate(a.indices):
        if isinstance(i, n.IndexVar):
            variables.append(i.name)
            positions.append(None)
            divisors.append(None)
            continue
        k = None
        if isinstance(i, n.Binary) and i.op == "/" and isinstance(i.rhs, n.Const) and isinstance(i.rhs.value, int) \
                and i.rhs.value >= 2:
            k, i = i.rhs.value, i.lhs
        if not _names_of(i) or _not_affine(i) or not isinstance(dims[p], (str, int)) or n.linear(i) is None \
                or expr_to_tc(i) in parity:
            return None
        spread |= k is not None and order[-1] in _names_of(i)
        v = _fresh(f"i{p}", names)
        names.add(v)
        variables.append(v)
        positions.append(p)
        divisors.append(k)
        hi = _extent(dims[p]) if k is None else n.Binary("*", n.Const(value=k), _extent(dims[p]))
        extra.append(n.RangeConstraint(v, n.Const(value=0), hi))
    if not spread or len(set(variables)) != len(variables) or not (lhs - _names_of(a)):
        return None
    return _copy_of(a, s, st, taken, variables, positions, extra, tuple(divisors))


def _copy_of(a: n.Access, s: n.Comprehension, st, taken: set[str], variables: list, positions: list,
             extra: list, divisors: tuple = ()) -> Gather:
    """The copy of ``a`` over ``variables``: those the read has as its own
    indices (``positions`` None) in the sum's ranges, the others in ``extra``."""
    given = {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)}
    own = [v for v, q in zip(variables, positions) if q is None]
    name = _fresh(a.tensor + "_g", taken)
    taken.add(name)
    return Gather(a.span, tuple(variables), name, st.where_ranges(own, given) + tuple(extra),
                  positions=tuple(positions), divisors=divisors)


def _reshaped(a: n.Access, s: n.Comprehension, dims: tuple, taken: set[str], st) -> Gather | None:
    """The copy of an input's read through two digits whose other indices
    include an affine one of several terms (a grouped convolution's
    ``x(n, h + kh - 1, w + kw - 1, g * CG + ci)``): the input with the digits
    split, ``x_g(n, i1, i2, g, ci) = x(n, i1, i2, g * CG + ci)``, each such
    index spanning its whole dimension (a copy of the variables would hold
    each element once per ``kh, kw``: 9 times); the sum reads ``x_g(n, h +
    kh - 1, w + kw - 1, g, ci)``.  None where no index is such."""
    if not any(_names_of(i) and not isinstance(i, n.IndexVar) and not _not_affine(i) for i in a.indices):
        return None
    if any(isinstance(i, n.IndexVar) for i in a.indices) and len({i.name for i in a.indices
                                                                   if isinstance(i, n.IndexVar)}) != \
            sum(isinstance(i, n.IndexVar) for i in a.indices):
        return None
    names = _names_of(s) | taken
    variables: list[str] = []
    positions: list[int | None] = []
    extra: list[n.RangeConstraint] = []
    for p, i in enumerate(a.indices):
        if _not_affine(i):
            digits = list(dict.fromkeys(x.name for x in n.walk(i) if isinstance(x, n.IndexVar)))
            variables += digits
            positions += [None] * len(digits)
        elif isinstance(i, n.IndexVar) or not _names_of(i):
            if isinstance(i, n.IndexVar):
                variables.append(i.name)
                positions.append(None)
            else:
                return None  # (a constant index: the copy would need that dimension dropped)
        elif not isinstance(dims[p], (str, int)):
            return None
        else:
            v = _fresh(f"i{p}", names)
            names.add(v)
            variables.append(v)
            positions.append(p)
            extra.append(n.RangeConstraint(v, n.Const(value=0), _extent(dims[p])))
    if len(set(variables)) != len(variables):
        return None
    return _copy_of(a, s, st, taken, variables, positions, extra)


def _strided(a: n.Access, s: n.Comprehension) -> bool:
    """The read ``a`` moves by a constant stride of 2 or more along the sum's
    last written index, each of its indices one variable at most (a ResNet
    shortcut's 1x1 stride-2 convolution, ``sc(n, o, i, j) +=! x(n, c, 2 * i,
    2 * j) * wd(o, c)``: its 14-column tiles read ``x`` at stride 2 for every
    ``o`` again, 4.8 ms against 0.8 with a contiguous copy; a window ``2 * j +
    kw`` would copy each element once per tap)."""
    order = [x.name for x in s.indices if isinstance(x, (n.IndexVar, n.Ident))]
    if not order or len(order) != len(s.indices) or not a.indices:
        return False
    names = set(order) | set(s.reduction_vars)
    forms = [n.linear(i) for i in a.indices]
    if any(f is None or sum(1 for k in f if k in names) > 1 for f in forms):
        return False
    return abs(forms[-1].get(order[-1], 0)) >= 2 and isinstance(forms[-1].get(order[-1]), int)


def _divided_only(a: n.Access, v: str) -> bool:
    """The read ``a`` uses ``v`` only in remainders (``Wl(((h % 2) * 2 + w %
    2) * C + ch, d)``, a DiT's unpatchify): a copy indexed by ``v`` would hold
    each element it reads once per quotient (37 MB of a 150 KB weight).  A
    quotient and a remainder together (``img(b, c, (n / GW) * P + py, (n %
    GW) * P + px)``) name ``v`` whole; quotients alone (grouped-query
    attention's ``k(b, j, (h / (H / KV)) * DH + d)``) copy each element once
    per member of its group, a batched matmul's operand."""
    ops: set[str] = set()

    def walk(e, under: str | None = None) -> None:
        if isinstance(e, n.IndexVar) and e.name == v:
            ops.add(under or "")
        elif isinstance(e, n.Binary) and e.op in ("/", "%"):
            walk(e.lhs, under or e.op)
            walk(e.rhs, under)
        else:
            for c in n.children(e):
                walk(c, under)
    for i in a.indices:
        walk(i)
    return ops == {"%"}


def _extent(d: str | int) -> n.Expr:
    return n.Ident(name=d) if isinstance(d, str) else n.Const(value=d)


def _names_of(e: n.Node) -> set[str]:
    return {x.name for x in n.walk(e) if isinstance(x, (n.IndexVar, n.Ident))}


def rewrite(d: n.Def, p: dict[object, list[Gather]]) -> n.Def:
    """``d`` (as parsed) with each planned read copied before its sum (an
    input's read in a loop: once, at the top of the ``def``)."""
    top: dict[str, n.Comprehension] = {}

    def stmts(body) -> tuple | None:
        out: list[n.Stmt] = []
        for s in body:
            if isinstance(s, n.For):
                inner = stmts(s.body)
                if inner is None:
                    return None
                out.append(replace(s, body=inner))
                continue
            if isinstance(s, n.If):
                then, orelse = stmts(s.then), stmts(s.orelse)
                if then is None or orelse is None:
                    return None
                out.append(replace(s, then=then, orelse=orelse))
                continue
            gathers = p.get(getattr(s, "span", None)) if isinstance(s, n.Comprehension) else None
            if not gathers:
                out.append(s)
                continue
            rhs = s.rhs
            for g in gathers:
                if g.select:
                    sel = next((x for x in n.walk(rhs) if x.span == g.span and isinstance(x, n.Select)), None)
                    if sel is None or not (_is_read(sel.then) and _is_read(sel.other)):
                        return None
                    copy, passed = _concatenation(sel, g)
                    out.append(n.Comprehension(g.name, tuple(n.Ident(v, span=g.span) for v in g.variables), "=",
                                               copy, wheres=g.bounds, span=g.span))
                    rhs = _replaced(rhs, g.span, n.Call(g.name, passed, span=g.span), select=True)
                    continue
                read = next((x for x in n.walk(rhs) if x.span == g.span and _is_read(x)), None)
                if read is None:
                    return None  # (not found in the parsed statement: the program as written)
                idx = tuple(n.Ident(v, span=g.span) for v in g.variables)
                passed = idx
                if g.positions:  # (whole dimensions: the copy reads them at its variables)
                    read, passed = _named(read, g)
                if g.top:
                    top.setdefault(g.name, n.Comprehension(g.name, idx, "=", read, wheres=g.bounds, span=g.span))
                else:
                    ranges = tuple(w for w in s.wheres if isinstance(w, n.RangeConstraint) and w.var in g.variables)
                    out.append(n.Comprehension(g.name, idx, "=", read, wheres=ranges + g.bounds, span=g.span))
                rhs = _replaced(rhs, g.span, n.Call(g.name, passed, span=g.span))
            out.append(replace(s, rhs=rhs))
        return tuple(out)

    body = stmts(d.body)
    if body is None:
        return d
    return replace(d, body=tuple(top.values()) + body)


def same_domains(old: RangeInfo, new: RangeInfo) -> bool:
    """Every statement of ``old`` runs the same instances in ``new`` and every
    tensor of ``old`` keeps its extents."""
    return same_extents(old, new) and same_points(old, new)


def _is_read(e: n.Node) -> bool:
    """A tensor's read, as parsed or checked (a product that another pass
    built, chain.py's ``A(i, p) * x(n, p * Q + q)``, may carry a factor's span)."""
    return isinstance(e, (n.Call, n.Access))


def _replaced(e: n.Node, span, new: n.Expr, select: bool = False) -> n.Node:
    """``e`` with the read (``select``: the select) at ``span`` replaced by ``new``."""
    if (isinstance(e, n.Select) if select else _is_read(e)) and e.span == span:
        return new
    return n.map_children(e, lambda c: _replaced(c, span, new, select))


def _named(read: n.Expr, g: Gather) -> tuple[n.Expr, tuple]:
    """``read`` with its indices at ``g.positions`` named by the copy's
    variables (``v / K`` where ``g.divisors`` has ``K``: an upsampled copy),
    and the indices the sum reads the copy at."""
    field = "args" if isinstance(read, n.Call) else "indices"
    args = list(getattr(read, field))
    ks = g.divisors or (None,) * len(g.positions)
    passed = tuple(n.Ident(v, span=g.span) if q is None else args[q].lhs if k else args[q]
                   for v, q, k in zip(g.variables, g.positions, ks))
    for v, q, k in zip(g.variables, g.positions, ks):
        if q is not None:
            args[q] = n.Ident(v, span=g.span) if not k else \
                n.Binary("/", n.Ident(v, span=g.span), n.Const(value=k), span=g.span)
    return replace(read, **{field: tuple(args)}), passed


def _concatenation(sel: n.Select, g: Gather) -> tuple[n.Expr, tuple]:
    """The copy's value (``sel`` with both reads' indices named, :func:`_named`)
    and the indices the sum reads it at."""
    then, passed = _named(sel.then, g)
    return replace(sel, then=then, other=_named(sel.other, g)[0]), passed


def _not_affine(e: n.Expr) -> bool:
    """The index ``e`` moves with an index variable but is no affine
    expression of them and the sizes: ``h * DH + d``, ``n / (W / P)``."""
    if not any(isinstance(x, n.IndexVar) for x in n.walk(e)):
        return False
    try:
        to_isl(e)
    except NotAffine:
        return True
    return False


def _digits(e: n.Expr, s: n.Comprehension, st) -> bool:
    """The non-affine index ``e`` is two digits, ``X * M + d`` (plus terms
    without index variables), with ``d`` ranging over ``0:M``: ``h * DH +
    d``, ``(n / GW) * P + py``.  The copy then holds each element it reads
    once (no larger than the tensor read); overlapping windows ``l * S + k``
    with ``k`` in ``0:K``, or ``i / Q`` alone, would copy elements many times."""
    terms: list[n.Expr] = []

    def split(x):
        if isinstance(x, n.Binary) and x.op == "+":
            split(x.lhs)
            split(x.rhs)
        else:
            terms.append(x)
    split(e)
    moving = [t for t in terms if any(isinstance(x, n.IndexVar) for x in n.walk(t))]
    if len(moving) != 2:
        return False
    prod = next((t for t in moving if isinstance(t, n.Binary) and t.op == "*"), None)
    digit = next((t for t in moving if isinstance(t, n.IndexVar)), None)
    if prod is None or digit is None:
        return False
    sides = [x for x in (prod.lhs, prod.rhs) if not any(isinstance(y, n.IndexVar) for y in n.walk(x))]
    if len(sides) != 1:
        return False
    where = next((w for w in s.wheres if isinstance(w, n.RangeConstraint) and w.var == digit.name), None)
    if where is not None:
        lo, hi = expr_to_tc(where.lo), expr_to_tc(where.hi)
    elif digit.name in st.ranges:
        lo, hi = (expr_to_tc(readable(b, st.domain.params())) for b in st.ranges[digit.name])
    else:
        return False
    return lo == "0" and _bare(hi) == _bare(expr_to_tc(sides[0]))


def _bare(text: str) -> str:
    """``text`` without parentheses around all of it (the printer writes a
    derived size, ``O_x_CG_div_C``, as ``((O * CG) / C)``)."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1]
    return text


def _fresh(base: str, taken: set[str]) -> str:
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name
