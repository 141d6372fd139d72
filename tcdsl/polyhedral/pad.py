"""Zero-padded copies of inputs read under a bounds select.

Users write a convolution's padding as a select that reads zero outside
the input::

    y(b, o, t) +=! (t + k - 2 >= 0 && t + k - 2 < L ? x(b, c, t + k - 2) : 0) * w(o, c, k)

The select's condition cuts the reduction's domain into an interior and
boundary pieces (polyhedral/split.py): the interior runs in register tiles,
but each boundary piece is a scalar nest with a few iterations along ``t``
and the whole ``o x k x c`` reduction around them -- in a 1-D convolution
a large share of the time.  A compiler for people who write ``F.pad`` first
does the same: ``plan(model)`` finds each such read -- a select ``c ? X(idx)
: 0`` of an input ``X`` (a parameter of the ``def``, never written) whose
condition ``c`` holds exactly where every index is inside ``X``'s extents,
over the statement's whole domain (isl decides, whatever the condition's
form), in a reduction (each element of ``X`` is read many times) -- and
``rewrite(def, plan)`` adds at the top of the ``def`` one copy per input
and padding::

    x_pad(d0, d1, d2) = (d2 - 2 >= 0 && d2 - 2 < L ? x(d0, d1, d2 - 2) : 0) where d2 in 0:L + 4

and reads ``x_pad(b, c, t + k - 2 + 2)`` instead: no select is left in the
reduction, which then runs in register tiles over its whole domain.  The
padding on each side is how far the index goes below 0 and past the extent
over the domain (isl's minimum and maximum, affine in the sizes: ``K - 1``
for a causal convolution); a padding that is not one affine expression of
the sizes leaves the read as written.  The copy costs one pass over ``X``.

Inside sequential loops (``Plan.steps``) the copy is of the step's slice
and is made just before the statement, in the same block of the loop's
body, at each step; ``X`` may then be a tensor the loop writes (a
convolutional RNN's state ``h(t - 1, b, c, y + ky - 1, z + kz - 1)``), but
not one the statement writes.  Outside loops a tensor that statements
write (the activation a residual block's second convolution reads) is
copied whole the same way, once, just before the statement.  Dimensions indexed by loop variables and
sizes only (``t - 1``) are fixed to that index and left out of the copy.

A sum's read of an input at a wrapped index ``e % E`` (``E`` the extent
of that dimension: circular padding) reads a wrapped copy the same way
(``_wrap_reads``), ``x_pad(d0, d1, d2) = x(d0, d1, (d2 - 2) % L)``.

The rewritten ``def`` is checked and inferred again (driver.py).
``options={"pad": False}`` leaves programs as written.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl

from ..sema.affine import NotAffine, isl_name, params_prefix, pwaff_to_expr, read_pwaff, to_isl
from ..syntax import nodes as n
from ..syntax.parse import parse
from ..syntax.printer import expr_to_tc
from .bounds import at_called_sizes
from .layout import _fresh, _names
from .model import Model


@dataclass
class Plan:
    """Select span -> (copy's name, low padding of each dimension as TC text)."""

    reads: dict = field(default_factory=dict)
    copies: dict = field(default_factory=dict)  # (input, low, high) -> (copy's name, span of its first read)
    extents: dict = field(default_factory=dict)  # input -> its extents as TC text
    # inside sequential loops: select span -> (tensor, low, high, copy's name,
    # the index of each dimension fixed by the loops as TC text, else None)
    steps: dict = field(default_factory=dict)
    # wrapped reads ``X(.., e % E, ..)`` of a sum (E the extent): read span ->
    # (copy's name, low padding of each dimension, which dimensions wrap, the read)
    wraps: dict = field(default_factory=dict)
    wrapped: dict = field(default_factory=dict)  # (input, low, high) of a wrapped copy -> which dimensions wrap

    def __bool__(self) -> bool:
        return bool(self.reads) or bool(self.wraps)

    @property
    def spans(self) -> set:
        return {span for _, span in self.copies.values()} | set(self.steps)


def plan(model: Model) -> Plan:
    checked = model.ranges.checked
    d = checked.node
    inputs = set(checked.inputs)
    written = {c.tensor for c in n.walk(d) if isinstance(c, n.Comprehension)}
    taken = _names(d) | set(checked.tensors) | set(checked.sizes)
    out = Plan()
    for k in model.kernels():
        loop_vars = {lp.var for lp in k.loops}
        for s in k.stmts:
            comp = s.info.comp
            if s.is_init or not comp.reduction_vars:
                continue
            for sel in n.walk(comp.rhs):
                if not (isinstance(sel, n.Select) and _zero(sel.other) and sel.span is not None):
                    continue
                read, pads = None, None
                for f in _product(sel.then):
                    # outside loops a copy of an input, made once; inside them a copy of
                    # the step's slice, made before the statement (which must not write it)
                    if isinstance(f, n.Access) and f.tensor != comp.tensor:
                        pads = _padding(model, s, sel.cond, f)
                        if pads is not None:
                            read = f
                            break
                if pads is None:
                    continue
                if read is not sel.then and not all(_in_bounds(model, s, f) for f in _product(sel.then)
                                                    if f is not read):
                    continue  # c ? X(..) * w(..) : 0 where w(..) may be outside w when c is false
                x = read.tensor
                low, high = pads
                if not any(v != "0" for v in low + high):
                    continue
                extents = tuple(expr_to_tc(e) for e in model.ranges.extent_exprs(x))
                if k.loops:
                    fixed = tuple(expr_to_tc(e) if n.names_in(e) <= loop_vars | set(checked.sizes) else None
                                  for e in read.indices)
                    if any(f is not None and (lo, hi) != ("0", "0") for f, lo, hi in zip(fixed, low, high)):
                        continue
                    if all(f is None for f in fixed):
                        continue  # the whole tensor at every step
                    out.extents[x] = extents
                    name = _fresh(f"{x}_pad", taken)
                    taken.add(name)
                    out.steps[sel.span] = (x, low, high, name, fixed)
                    out.reads[sel.span] = (name, low, fixed, read)
                    continue
                if x in written or x not in inputs:
                    # a temporary outside loops: copied whole, once, just before the statement
                    out.extents[x] = extents
                    name = _fresh(f"{x}_pad", taken)
                    taken.add(name)
                    out.steps[sel.span] = (x, low, high, name, (None,) * len(low))
                    out.reads[sel.span] = (name, low, (None,) * len(low), read)
                    continue
                out.extents[x] = extents
                key = (x, low, high)
                if key not in out.copies:
                    out.copies[key] = (_fresh(f"{x}_pad", taken), sel.span)
                out.reads[sel.span] = (out.copies[key][0], low, (None,) * len(low), read)
            if not k.loops:
                _wrap_reads(model, s, out, taken, inputs - written)
    return out


def _wrap_reads(model: Model, s, out: Plan, taken: set, inputs: set) -> None:
    """Plans a wrapped copy of each input that the sum ``s`` reads through
    an index ``e % E`` (``E`` the extent of that dimension, ``e`` affine):
    a circular padding, ``x(b, c, (t + k - 2) % L)``.  The copy holds the
    elements at ``e``'s values from its minimum to its maximum over the
    domain (one affine expression of the sizes each), ``x_pad(b, c, d) =
    x(b, c, (d - 2) % L) where d in 0:L + 4``, and the sum reads
    ``x_pad(b, c, t + k - 2 + 2)``: one plain convolution, no wrapped index
    nor select left in it (polyhedral/split.py would cut its domain into
    pieces at the wraps, the boundary ones scalar nests)."""
    space = _space(s)
    if space is None:
        return
    dom, ctx, params, dims = space
    context = _context(dom)
    for a in n.walk(s.info.comp.rhs):
        if not (isinstance(a, n.Access) and a.tensor in inputs and a.span is not None) or a.span in out.wraps:
            continue
        extents = model.ranges.extent_exprs(a.tensor)
        low, high, wraps = [], [], []
        for i, extent in zip(a.indices, extents):
            wrapped = isinstance(i, n.Binary) and i.op == "%" and expr_to_tc(i.rhs) == expr_to_tc(extent)
            if wrapped and not _own_variables(a.indices, len(wraps)):
                wraps = []  # a digit of a flat index, not a padding: no copy
                break
            wraps.append(wrapped)
            if not wrapped:
                low.append("0")
                high.append("0")
                continue
            try:
                reach = _reach(ctx, params, read_pwaff(ctx, params, dims, i.lhs).intersect_domain(dom), extent)
            except (NotAffine, isl.Error):
                return
            if reach is None:
                return
            below, above = (pa.gist(context).coalesce() for pa in reach)
            if below.n_piece() != 1 or above.n_piece() != 1:
                return
            low.append(expr_to_tc(pwaff_to_expr(below)))
            high.append(expr_to_tc(pwaff_to_expr(above)))
        if not any(wraps):
            continue
        key = (a.tensor, tuple(low), tuple(high))
        if key not in out.copies:
            name = _fresh(f"{a.tensor}_pad", taken)
            taken.add(name)
            out.copies[key] = (name, a.span)
            out.extents[a.tensor] = tuple(expr_to_tc(e) for e in extents)
            out.wrapped[key] = tuple(wraps)
        out.wraps[a.span] = (out.copies[key][0], tuple(low), tuple(wraps), a)


def _zero(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and e.value == 0


def _product(e: n.Expr) -> list[n.Expr]:
    """The factors of ``e`` (``e`` alone when it is not a product)."""
    if isinstance(e, n.Binary) and e.op == "*":
        return _product(e.lhs) + _product(e.rhs)
    return [e]


def _space(s):
    """The statement's domain, context, parameter and variable names, when
    its isl dimensions are its variables in order; else None."""
    dom = s.domain.reset_tuple_id()
    params = [dom.get_dim_name(isl.dim_type.param, i) for i in range(dom.dim(isl.dim_type.param))]
    dims = list(s.dims)
    if [isl_name(v) for v in dims] != [dom.get_dim_name(isl.dim_type.set, i) for i in range(dom.dim(isl.dim_type.set))]:
        return None
    return dom, dom.get_ctx(), params, dims


def _in_bounds(model: Model, s, e: n.Expr) -> bool:
    """Every read in ``e`` is inside its tensor over the statement's whole
    domain (affine indices only): ``e`` may be evaluated where a select's
    condition is false.  A factor moved out of ``c ? x(..) * w(..) : 0``
    turns the padding's 0 into ``0 * w(..)``: as ``F.pad`` then a product,
    NaN only where ``w`` holds an infinity or NaN."""
    space = _space(s)
    if space is None:
        return False
    dom, ctx, params, dims = space
    for a in n.walk(e):
        if isinstance(a, n.Select):
            return False
        if not isinstance(a, n.Access):
            continue
        try:
            for i, extent in zip(a.indices, model.ranges.extent_exprs(a.tensor)):
                idx = read_pwaff(ctx, params, dims, i).intersect_domain(dom)
                ext = read_pwaff(ctx, params, dims, extent)
                if not dom.is_subset(idx.ge_set(_zero_pa(idx)) & idx.lt_set(ext)):
                    return False
        except (NotAffine, isl.Error):
            return False
    return True


def _padding(model: Model, s, cond: n.Expr, read: n.Access) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(low, high) padding of each dimension of ``read``'s tensor as TC text,
    when ``cond`` holds exactly where ``read`` is inside the tensor over the
    statement's domain; else None."""
    space = _space(s)
    if space is None:
        return None
    dom, ctx, params, dims = space
    extents = model.ranges.extent_exprs(read.tensor)
    try:
        holds = isl.Set.read_from_str(ctx, params_prefix(params) + "{ [" + ", ".join(map(isl_name, dims)) + "] : "
                                      + to_isl(cond) + " }")
        idx = [read_pwaff(ctx, params, dims, e).intersect_domain(dom) for e in read.indices]
        ext = [read_pwaff(ctx, params, dims, e) for e in extents]
    except (NotAffine, isl.Error):
        return None
    inside = dom
    for i, e in zip(idx, ext):
        inside = inside & i.ge_set(_zero_pa(i)) & i.lt_set(e)
    # the same set at every size a call may have (a gate's rows h(t - 1, b, d, ..)
    # of a weight with G rows, where G < 4 * D is refused: bounds.SizeGuard)
    try:
        same = (holds & dom).is_equal(inside) or \
            at_called_sizes(model.ranges, holds & dom).is_equal(at_called_sizes(model.ranges, inside))
        context = at_called_sizes(model.ranges, _context(dom))
    except isl.Error:
        return None
    if not same:
        return None
    low, high = [], []
    for i, extent in zip(idx, extents):
        reach = _reach(ctx, params, i, extent)
        if reach is None:
            return None
        zero = _zero_pa(reach[0])
        texts = []
        for raw in reach:
            # the padding, or where that is not one affine expression of the
            # sizes (``max(KH - 2, 0)`` for ``h + kh - 1`` with a kernel of
            # KH rows) the distance itself: a negative one crops elements
            # that no read reaches, and the copy still holds every one read
            pa = raw.max(zero).gist(context).coalesce()
            if pa.n_piece() != 1:
                pa = raw.gist(context).coalesce()
            if pa.n_piece() != 1:
                return None
            texts.append(expr_to_tc(pwaff_to_expr(pa)))
        low.append(texts[0])
        high.append(texts[1])
    return tuple(low), tuple(high)


def _reach(ctx, params, idx: isl.PwAff, extent: n.Expr) -> tuple[isl.PwAff, isl.PwAff] | None:
    """How far the index ``idx`` (over the statement's domain) goes below 0
    and past ``extent``, as functions of the sizes (negative where it stays
    inside); None when the extent is no affine expression."""
    image = isl.Map.from_pw_aff(idx).range()
    lo, hi = image.dim_min(0), image.dim_max(0)
    try:
        e_params = isl.PwAff.read_from_str(ctx, params_prefix(params) + "{ [(" + to_isl(extent) + ")] }")
    except (NotAffine, isl.Error):
        return None
    return _zero_pa(lo).sub(lo), hi.sub(e_params).add(_one_pa(hi))


def _own_variables(indices, k: int) -> bool:
    """The variables of index ``k`` occur in no other index of the access:
    the copy, a box, holds just the elements read.  An im2col's digits
    ``w(m, r / 9, (r % 9) / 3, r % 3)`` share ``r``: a copy of ``r % 3`` over
    ``r``'s whole range would be ``3 * C`` times the tensor."""
    own = {x.name for x in n.walk(indices[k]) if isinstance(x, n.IndexVar)}
    return not any(isinstance(x, n.IndexVar) and x.name in own
                   for j, i in enumerate(indices) if j != k for x in n.walk(i))


def _zero_pa(pa: isl.PwAff) -> isl.PwAff:
    return isl.PwAff.from_aff(isl.Aff.zero_on_domain(isl.LocalSpace.from_space(pa.get_domain_space())))


def _one_pa(pa: isl.PwAff) -> isl.PwAff:
    aff = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(pa.get_domain_space()))
    return isl.PwAff.from_aff(aff.set_constant_val(isl.Val.one(pa.get_ctx())))


def _context(dom: isl.Set) -> isl.Set:
    """The sizes where the statement runs (its domain is not empty)."""
    return dom.params()


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) reading the padded copies of ``p``, which it computes first."""
    taken = _names(d)

    def fn(node):
        if isinstance(node, n.Select) and node.span in p.reads:
            name, low, fixed, read = p.reads[node.span]
            return _replace_read(node.then, read, lambda a: padded(a, name, low, fixed, node.span))
        if getattr(node, "span", None) in p.wraps and _same_read(node, p.wraps[node.span][3]):
            name, low, wraps, _ = p.wraps[node.span]
            args = tuple(x.lhs if w else x for x, w in zip(node.args, wraps))
            return padded(replace(node, args=args), name, low, (None,) * len(low), node.span)
        return n.map_children(node, fn)

    def padded(a, name, low, fixed, span):
        args = tuple(x if lo == "0" else n.Binary("+", x, _expr(lo, span), span=span)
                     for x, lo, f in zip(a.args, low, fixed) if f is None)
        return n.Call(name, args, span=span)

    def copy(tensor, low, high, name, span, fixed):
        ext = p.extents[tensor]
        wraps = p.wrapped.get((tensor, low, high), (False,) * len(low))
        vars_ = [None if f is not None else _fresh(f"d{k}", taken) for k, f in enumerate(fixed)]
        conds, args, wheres = [], [], []
        for v, f, lo, hi, e, w in zip(vars_, fixed, low, high, ext, wraps):
            if f is not None or (lo == "0" and hi == "0" and not w):
                args.append(f if f is not None else v)
                if f is None:  # (a tensor the loop writes later has no extent yet when the copy is inferred)
                    wheres.append(f"{v} in 0:({e})")
                continue
            shifted = v if lo == "0" else f"({v} - ({lo}))"
            if w:
                args.append(f"({shifted}) % ({e})")
            else:
                args.append(shifted)
                conds += [f"{shifted} >= 0", f"{shifted} < ({e})"]
            wheres.append(f"{v} in 0:({e}) + ({lo}) + ({hi})")
        value = f"{tensor}({', '.join(args)})"
        text = (f"{name}({', '.join(v for v in vars_ if v is not None)}) = "
                + (f"({' && '.join(conds)}) ? {value} : 0" if conds else value)
                + (" where " + ", ".join(wheres) if wheres else ""))
        return _respan(_statement(text), span)

    def block(stmts):
        """The statements of a loop's body, each reading a step's copy after it."""
        out = []
        for st in stmts:
            if isinstance(st, n.For):
                out.append(replace(st, body=block(st.body)))
            elif isinstance(st, n.If):
                out.append(replace(st, then=block(st.then), orelse=block(st.orelse)))
            else:
                # (a copy's spans are its read's, so that its messages point there: not rewritten)
                spans = {x.span for x in n.walk(st) if isinstance(x, n.Select)}
                out += [copy(t, lo, hi, name, span, fixed)
                        for span, (t, lo, hi, name, fixed) in p.steps.items() if span in spans]
                out.append(fn(st))
        return tuple(out)

    body = block(d.body)
    copies = [copy(tensor, low, high, name, span, (None,) * len(low))
              for (tensor, low, high), (name, span) in p.copies.items()]
    return replace(d, body=tuple(copies) + body)


def _replace_read(e: n.Expr, read: n.Access, make) -> n.Expr:
    """``e`` (the select's value: the read, or a product of it) with the
    factor equal to ``read`` (the planned one; the plan saw the checked
    program, whose nodes compare equal to the parsed ones) made by ``make``."""
    if isinstance(e, n.Binary) and e.op == "*":
        lhs = _replace_read(e.lhs, read, make)
        return replace(e, lhs=lhs) if lhs is not e.lhs else replace(e, rhs=_replace_read(e.rhs, read, make))
    return make(e) if _same_read(e, read) else e


def _same_read(e, read) -> bool:
    return isinstance(e, (n.Access, n.Call)) and getattr(e, "span", None) == read.span and \
        (e.tensor if isinstance(e, n.Access) else e.name) == read.tensor


def _statement(text: str) -> n.Comprehension:
    return parse(f"def pad() -> (out) {{\n  {text}\n}}").defs[0].body[0]


def _expr(text: str, span) -> n.Expr:
    return _respan(_statement(f"out(i) = {text}").rhs, span)


def _respan(node, span):
    """``node`` with every span set to ``span`` (the read it pads): messages
    about the copy point at the program's own text."""
    node = n.map_children(node, lambda c: _respan(c, span))
    return replace(node, span=span)
