"""Index-set splitting at a select's affine condition.

``split_model(model)`` is the stage entry point (the schedule option
``split_selects``, driver.model_for).  A statement whose right-hand side has
a select ``c ? a : b`` with ``c`` affine in the statement's variables, the
sizes and the enclosing loop variables (``sema/affine.py``'s ``to_isl``
decides) becomes several isl statements: one on the part of its domain where
``c`` holds, with the select replaced by ``a``, one on the rest, with ``b``.
The inner loops of each then carry no select::

    y(b, o, t) +=! (t + k - K + 1 >= 0 ? x(b, c, t + k - K + 1) : 0) * w(o, c, k)

becomes ``S1_0`` on ``t + k - K + 1 >= 0`` reading ``x(...) * w(...)``; the
other piece's right-hand side is ``0 * w(o, c, k)``, which simplifies to
``0``, the identity of ``+``: it changes nothing and is left out (the init
``S1_init`` still covers every element of ``y``).  Such a simplification
assumes ``0 * w`` is 0 (a NaN or infinite ``w`` in the padding no longer
gives NaN).

Every select of a piece whose condition holds, or fails, on the whole piece
is resolved, so nested selects, repeated conditions and conditions that are
always true on the domain need no piece of their own.  A condition on a
loop variable only (``t == 0 ? h0(i) : h(t - 1, i)`` inside ``for t``) splits
on a parameter: isl's AST guards each piece with ``if (t == 0)``.  Pieces
that are empty for every size are removed; pieces empty for the sizes fixed
at scheduling disappear from isl's AST.  A statement is cut into at most
``MAX_PIECES`` pieces; a select that would make more stays a select, and so
does one whose condition is not affine (``x(i) > 0 ? ...``).

A statement that reads the tensor it writes at another element, where
the two meet on a thinner set (Floyd-Warshall's step ``D(i, j) = fmin(D(i,
j), D(i, k) + D(k, j))`` inside ``for k``: the read ``D(i, k)`` is the
element written at ``j == k``), is also cut there, below, at and above
(``j < k``, ``j == k``, ``j > k``; then ``i`` against ``k`` for ``D(k,
j)``): each piece then reads only elements that other pieces write, so it
carries no dependence of its own, and its loops run in parallel and in
vectors, where the whole domain was one serial wavefront (N = 512: 407 ms
before, on an AMD EPYC).  At most ``MAX_MEET_PIECES`` pieces.

A piece of an assignment whose right-hand side is the element it writes
(the other branch of ``A(b, i, j) = i > k && j > k ? <update> : A(b, i, j)``,
Gaussian elimination in place) changes nothing and is left out too: the
update then reads column and row ``k`` that no piece writes, and its rows run
in vectors (batched 64 x 64 LU: 4.8 -> 1.2 ms on an Intel Xeon).  A
condition on a lattice of the last output variable (``v % 2 == 0``) is not
split: its pieces would step the inner loop by 2 (see ``_strided_inner``).

The pieces of a statement keep its position in the program order (the
order map of a piece is the statement's, restricted to its domain), so the
dependences between them are those between the statement's instances.
"""
from __future__ import annotations

import dataclasses

import islpy as isl

from ..sema import types as ty
from ..sema.affine import NotAffine, isl_name, params_prefix, to_isl
from ..syntax import nodes as n
from .model import Block, Branch, ForLoop, IslStmt, Kernel, Model, _accesses, _Builder, maps

MAX_PIECES = 4
MAX_MEET_PIECES = 9


def split_model(model: Model) -> Model:
    """The model with its statements split at their selects' affine
    conditions (the model itself when no statement changes)."""
    builder = _Builder(model.ranges, iter(()))
    changed = False

    def block(b: Block) -> Block:
        nonlocal changed
        items = []
        for it in b.items:
            if isinstance(it, Kernel):
                k = _split_kernel(it, builder)
                changed = changed or k is not it
                items.append(k)
            elif isinstance(it, ForLoop):
                items.append(ForLoop(it.loop, block(it.body)))
            else:
                items.append(Branch(it.cond, block(it.then), block(it.orelse)))
        return Block(items)

    body = block(model.body)
    return Model(model.ranges, body) if changed else model


def _split_kernel(k: Kernel, builder: _Builder) -> Kernel:
    if k.scatter is not None:  # run as a scatter-add (polyhedral/scatter.py): no select left to split
        return k
    stmts: list[IslStmt] = []
    order = isl.UnionMap.empty(k.order.get_space())
    by_name = {m.get_tuple_name(isl.dim_type.in_): m for m in maps(k.order)}
    changed = False
    for s in k.stmts:
        if s.name not in by_name:  # an empty domain has no order (``where i in 8:4``): kept as it is
            stmts.append(s)
            continue
        pieces = None if s.is_init else _pieces(s, k.context, builder)
        if pieces is None:
            stmts.append(s)
            order = order.union(isl.UnionMap.from_map(by_name[s.name]))
            continue
        changed = True
        for p in pieces:
            stmts.append(p)
            m = by_name[s.name]
            m = m.intersect_domain(p.domain.set_tuple_name(s.name).align_params(m.get_space()))
            order = order.union(isl.UnionMap.from_map(m.set_tuple_name(isl.dim_type.in_, p.name)))
    if not changed or not stmts:
        return k
    return Kernel(stmts, k.loops, k.context, order, serialize=k.serialize, scatter=k.scatter,
                  loop_writes=k.loop_writes)


def _pieces(s: IslStmt, context: isl.Set, builder: _Builder) -> list[IslStmt] | None:
    """The statements that replace ``s`` (possibly none: every piece was an
    identity of its reduction), or None when ``s`` stays as it is."""
    comp = s.info.comp
    rhs0 = comp.rhs
    # (an assignment's wrapped reads are split at the source, polyhedral/circular.py; a sum's
    # are not there: the cases' reads narrow the ranges inferred for its variables, and
    # circular.py drops that rewrite, so they are cut here on the domain as it is)
    wrapped = _wrapped(rhs0, s) if comp.reduction is not None else rhs0
    if wrapped is not comp.rhs:
        s = dataclasses.replace(s, info=dataclasses.replace(s.info, comp=dataclasses.replace(comp, rhs=wrapped)))
        comp = s.info.comp
    conds = _Conditions(s, context)
    dtype = builder.r.checked.tensors[comp.tensor].dtype

    def useless(rhs: n.Expr) -> bool:  # the identity of the reduction, or the element assigned
        rhs = simplify(rhs)
        return _is_identity(rhs, comp.reduction, dtype) or _is_self(rhs, comp)
    pieces = [(dom, conds.resolve(comp.rhs, dom)) for dom in _interior(s, conds)]
    for cut in _meets(s, conds):
        split = [(part.coalesce(), conds.resolve(rhs, part)) for dom, rhs in pieces for part in
                 (dom & c for c in cut) if not conds.empty(part)]
        if len(split) <= MAX_MEET_PIECES:
            pieces = split
    refused = _strided_inner(s, conds, [x for _, rhs in pieces for x in n.walk(rhs) if isinstance(x, n.Select)])
    while True:
        cond = next((c for _, rhs in pieces for c in _split_conds(rhs, conds) if c not in refused), None)
        if cond is None:
            break
        split = []
        for dom, rhs in pieces:
            if cond not in _split_conds(rhs, conds):
                split.append((dom, rhs))
                continue
            for part in (dom & conds.set(cond), dom - conds.set(cond)):
                if not conds.empty(part):
                    split.append((part.coalesce(), conds.resolve(rhs, part)))
        # a piece that changes nothing is left out below; it does not count against the cap
        split = [(dom, rhs) for dom, rhs in split if not useless(rhs)]
        refused.add(cond)  # split once: a condition that resolving leaves in a piece stays a select there
        if len(split) <= MAX_PIECES:
            pieces = split
    if len(pieces) == 1 and pieces[0][1] == comp.rhs:
        return None  # no select split or resolved
    if wrapped is not rhs0 and all(_has_remainder(rhs) for _, rhs in pieces):
        return None  # no piece resolved its wrapped index: the statement stays as written
    kept = [(dom, simplify(rhs)) for dom, rhs in pieces if not useless(rhs)]
    out = []
    for i, (dom, rhs) in enumerate(kept):
        name = s.name if len(kept) == 1 else f"{s.name}_{i}"
        info = dataclasses.replace(s.info, comp=dataclasses.replace(comp, rhs=rhs))
        p = IslStmt(name, info, False, s.dims, dom.set_tuple_name(name))
        p.writes.append(builder._map(p, comp.tensor, comp.indices))
        if comp.reduction is not None:
            p.reads.append(builder._map(p, comp.tensor, comp.indices))
        for acc in _accesses(rhs):
            try:
                p.reads.append(builder._map(p, acc.tensor, acc.indices))
            except NotAffine:
                p.may_reads.append(builder._whole(p, acc.tensor, acc.indices))
        out.append(p)
    return out


# The multiples of a size that a wrapped index ``e % N`` is resolved for (then
# ``e - m * N`` on the part of the domain where ``m * N <= e < (m + 1) * N``).
WRAPS = (0, 1, -1, 2, -2)


def _wrapped(e: n.Expr, s: IslStmt) -> n.Expr:
    """``e`` with each index ``a % N`` of a read (``a`` affine, ``N`` a size:
    circular padding ``x(b, c, (t + k - 2 + L) % L)`` in a sum) as a chain of
    selects on the ranges of ``a`` (:data:`WRAPS`), the remainder last, so
    that the pieces of the statement read at affine indices; ``e`` itself
    (the same object) when there is none.  Not the digit of a flat index
    (``p % W`` with ``p`` in ``0:H*W``: circular.few_wraps)."""
    from .circular import few_wraps

    def index(x: n.Expr) -> n.Expr:
        if isinstance(x, n.Binary) and x.op == "%" and isinstance(x.rhs, n.SizeVar):
            try:
                to_isl(x.lhs)
            except NotAffine:
                return n.map_children(x, lambda y: index(y) if isinstance(y, n.Expr) else y)
            if not few_wraps(s, x.lhs, x.rhs):
                return x
            a, size, out = x.lhs, x.rhs, x
            for m in reversed(WRAPS):
                lo, hi = _times(m, size, a), _times(m + 1, size, a)
                cond = n.Binary("&&", n.Binary("<=", lo, a, dtype="bool", span=x.span),
                                n.Binary("<", a, hi, dtype="bool", span=x.span), dtype="bool", span=x.span)
                value = a if m == 0 else n.Binary("-", a, lo, dtype=a.dtype, span=x.span)
                out = n.Select(cond, value, out, dtype=x.dtype, span=x.span)
            return out
        return n.map_children(x, lambda y: index(y) if isinstance(y, n.Expr) else y)

    def visit(x: n.Expr) -> n.Expr:
        if isinstance(x, n.Access):
            idx = tuple(index(i) for i in x.indices)
            if idx != x.indices:
                return dataclasses.replace(x, indices=idx)
        return n.map_children(x, lambda y: visit(y) if isinstance(y, n.Expr) else y)

    out = visit(e)
    return e if out == e else out


def _times(m: int, size: n.SizeVar, like: n.Expr) -> n.Expr:
    if m == 0:
        return n.Const(0, dtype=like.dtype, span=size.span)
    if m == 1:
        return size
    return n.Binary("*", n.Const(m, dtype=size.dtype, span=size.span), size, dtype=size.dtype, span=size.span)


def _has_remainder(e: n.Expr) -> bool:
    """``e`` reads at an index ``a % N`` with ``N`` a size."""
    return any(isinstance(x, n.Binary) and x.op == "%" and isinstance(x.rhs, n.SizeVar) for x in n.walk(e))


def _meets(s: IslStmt, conds: "_Conditions") -> list[tuple[isl.Set, isl.Set, isl.Set]]:
    """For each index where a read of the tensor that ``s`` assigns (no
    reduction) differs from the write by more than a constant, the parts of
    the domain where the read's index is below, at and above the written
    one; only where the meeting is thinner than the domain."""
    comp = s.info.comp
    if comp.reduction is not None:
        return []
    cuts, seen = [], set()
    for acc in _accesses(comp.rhs):
        if acc.tensor != comp.tensor or len(acc.indices) != len(comp.indices):
            continue
        for f, g in zip(comp.indices, acc.indices):
            try:
                key = (to_isl(f), to_isl(g))
            except NotAffine:
                continue
            if key[0] == key[1] or key in seen:
                continue
            seen.add(key)
            cut = tuple(conds.text(f"{key[0]} {op} {key[1]}") for op in ("<", "=", ">"))
            if any(c is None for c in cut) or conds.empty(s.domain & cut[1]) or conds.empty(s.domain - cut[1]):
                continue
            cuts.append(cut)
    return cuts


def _strided_inner(s: IslStmt, conds: "_Conditions", selects: list[n.Select]) -> set[n.Expr]:
    """The conditions that hold on a lattice of the statement's last output
    variable (``v % 2 == 0`` in a bilinear 2x upsample, ``... ? r(v / 2 - 1) :
    r(v / 2 + 1)``), of selects whose values call no function.  Split there,
    each piece would step that variable by 2, and the innermost loop would
    store every other element in scalars; kept as a select, the loop runs in
    vectors over every element and blends the two values.  Where a value calls
    a function (``d % 2 == 0 ? sin(..) : cos(..)``), computing both costs more
    than the strided stores (sinusoidal positional encoding: 5.4-5.9 ms split,
    6.3 ms kept).  Selects on outer variables still split: strided rows are
    rows."""
    comp = s.info.comp
    last = comp.indices[-1] if comp.indices else None
    if not isinstance(last, n.IndexVar) or last.name not in s.dims:
        return set()
    pos = s.dims.index(last.name)
    out = set()
    for x in selects:
        c = x.cond
        cs = conds.set(c)
        if cs is None or c in out or any(isinstance(y, (n.BuiltinCall, n.Call)) for v in (x.then, x.other)
                                         for y in n.walk(v)):
            continue
        for bs in cs.get_basic_sets():
            if any(bs.get_div(i).involves_dims(isl.dim_type.in_, pos, 1) for i in range(bs.dim(isl.dim_type.div))):
                out.add(c)
                break
    return out


def _interior(s: IslStmt, conds: "_Conditions") -> list[isl.Set]:
    """A reduction's domain cut where its selects' conditions do not depend on
    the reduction variables: the *interior* (the output elements for which
    every condition holds for all of their reduction instances, or fails for
    all) and the rest.  A padded convolution's interior ``2 <= t < L - 2``
    then runs its columns over the same range at every ``k`` (register
    tiles); splitting at the condition alone would give each ``k`` its own
    column range.  ``[s.domain]`` when there is no such interior."""
    comp = s.info.comp
    dom = s.domain
    n_all = dom.dim(isl.dim_type.set)
    n_lhs = n_all - len(comp.reduction_vars)
    sets = [c for c in (conds.set(x) for x in _selects(comp.rhs)) if c is not None]
    if not comp.reduction_vars or comp.reduction is None or not sets or n_lhs < 1:
        return [dom]

    for c in sets:  # a reduction over the outputs' own range (a triangle, j <= i): no interior worth a piece
        outs = [i for i in range(n_lhs) if c.involves_dims(isl.dim_type.set, i, 1)]
        reds = [i for i in range(n_lhs, n_all) if c.involves_dims(isl.dim_type.set, i, 1)]
        if any(_extent_params(dom, r) & _extent_params(dom, o) for r in reds for o in outs):
            return [dom]

    def outputs(x: isl.Set) -> isl.Set:
        return x.project_out(isl.dim_type.set, n_lhs, n_all - n_lhs)

    every = outputs(dom)
    good = every
    for c in sets:
        holds = every - outputs(dom - c)
        fails = every - outputs(dom & c)
        good = good & (holds | fails)
    if conds.empty(good) or conds.empty(every - good):
        return [dom]
    inside = dom & good.insert_dims(isl.dim_type.set, n_lhs, n_all - n_lhs).set_tuple_name(dom.get_tuple_name())
    return [inside.coalesce(), (dom - inside).coalesce()]


def _extent_params(dom: isl.Set, i: int) -> set[int]:
    """The parameters (sizes) that dimension ``i``'s bounds in ``dom`` depend on."""
    out = set()
    for pa in (dom.dim_min(i), dom.dim_max(i)):
        for _, aff in pa.get_pieces():
            out |= {p for p in range(aff.dim(isl.dim_type.param)) if aff.involves_dims(isl.dim_type.param, p, 1)}
    return out


class _Conditions:
    """The isl sets of a statement's select conditions (None: not affine)."""

    def __init__(self, s: IslStmt, context: isl.Set):
        self.s = s
        self.context = context
        self.sets: dict[n.Expr, isl.Set | None] = {}
        sp = context.get_space()
        self.params = [sp.get_dim_name(isl.dim_type.param, i) for i in range(sp.dim(isl.dim_type.param))]

    def set(self, cond: n.Expr) -> isl.Set | None:
        if cond not in self.sets:
            self.sets[cond] = self._read(cond)
        return self.sets[cond]

    def _read(self, cond: n.Expr) -> isl.Set | None:
        try:
            return self.text(to_isl(cond))
        except NotAffine:
            return None

    def text(self, cond: str) -> isl.Set | None:
        """The set of the statement's instances where the isl condition ``cond`` holds."""
        try:
            text = (params_prefix(self.params) + "{ " + self.s.name + "[" + ", ".join(map(isl_name, self.s.dims))
                    + "] : " + cond + " }")
            out = isl.Set.read_from_str(self.context.get_ctx(), text)
        except isl.Error:
            return None
        return out.align_params(self.s.domain.get_space()).set_tuple_name(self.s.domain.get_tuple_name())

    def empty(self, dom: isl.Set) -> bool:
        return dom.intersect_params(self.context.align_params(dom.get_space())).is_empty()

    def resolve(self, e: n.Expr, dom: isl.Set) -> n.Expr:
        """``e`` with each select whose condition holds (fails) on all of
        ``dom`` replaced by its first (second) value, and the affine parts
        of the other conditions that do resolved (:meth:`reduce`)."""
        if isinstance(e, n.Select):
            c = self.reduce(e.cond, dom)
            if c is True:
                return self.resolve(e.then, dom)
            if c is False:
                return self.resolve(e.other, dom)
            if c is not e.cond:
                e = dataclasses.replace(e, cond=c)
        return n.map_children(e, lambda x: self.resolve(x, dom) if isinstance(x, n.Expr) else x)

    def reduce(self, cond: n.Expr, dom: isl.Set) -> bool | n.Expr:
        """True or False where ``cond`` holds or fails on all of ``dom``; else
        ``cond`` with its ``&&`` and ``||`` operands that do resolved
        (``j >= L - len(b)`` of ``j <= i && j >= L - len(b)`` where ``j <=
        i`` holds).  A read in an operand that is dropped was guarded by the
        one that decided it, and one that stays is guarded on ``dom`` as
        before."""
        c = self.set(cond)
        if c is not None:
            return True if self.empty(dom - c) else False if self.empty(dom & c) else cond
        if not (isinstance(cond, n.Binary) and cond.op in ("&&", "||")):
            return cond
        a, b = self.reduce(cond.lhs, dom), self.reduce(cond.rhs, dom)
        decides, neutral = (False, True) if cond.op == "&&" else (True, False)
        if a is decides:
            return decides  # (the right operand is not evaluated where the left decides)
        if a is neutral:
            return b
        if b is decides:
            # the left operand is evaluated first; dropping it drops only reads, which is
            # safe where they read at affine indices (in range by the ranges inferred),
            # not where a run-time index could be out of range (checked mode reports it)
            return decides if _affine_reads(cond.lhs) else cond
        if b is neutral:
            return a
        return cond if a is cond.lhs and b is cond.rhs else dataclasses.replace(cond, lhs=a, rhs=b)


def _affine_reads(e: n.Expr) -> bool:
    """Every read in ``e`` is at affine indices."""
    for x in n.walk(e):
        if isinstance(x, n.Access):
            try:
                for i in x.indices:
                    to_isl(i)
            except NotAffine:
                return False
    return True


def _selects(e: n.Expr) -> list[n.Expr]:
    """The conditions of the selects in ``e``, outermost first."""
    return [x.cond for x in n.walk(e) if isinstance(x, n.Select)]


def _split_conds(e: n.Expr, conds: _Conditions) -> list[n.Expr]:
    """The conditions to split ``e``'s domain at, outermost first: its
    selects' affine conditions, and the affine operands of the ``&&`` and
    ``||`` of the others (``j <= i`` of a causal and padding mask, ``j <= i
    && j >= L - len(b)``), but no lattice (``v % 2 == 0``: see
    ``_strided_inner``)."""
    def atoms(c: n.Expr) -> list[n.Expr]:
        if isinstance(c, n.Binary) and c.op in ("&&", "||"):
            return atoms(c.lhs) + atoms(c.rhs)
        return [c]
    out = []
    for c in _selects(e):
        if conds.set(c) is not None:
            out.append(c)
            continue
        out += [a for a in atoms(c) if (x := conds.set(a)) is not None
                and all(bs.dim(isl.dim_type.div) == 0 for bs in x.get_basic_sets())]
    return out


def _zero(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and not isinstance(e.value, bool) and e.value == 0


def _one(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and not isinstance(e.value, bool) and e.value == 1


def _const(value, like: n.Expr) -> n.Const:
    dtype = like.dtype
    if dtype is not None and ty.is_float(dtype):
        value = float(value)
    return n.Const(value, dtype=dtype, span=like.span)


def simplify(e: n.Expr) -> n.Expr:
    """``0 * x``, ``x * 1``, ``x + 0``, ``x - 0``, ``-0``, sums and products
    of two constants and casts of integral constants folded (what replacing
    a select by ``0`` leaves)."""
    e = n.map_children(e, lambda x: simplify(x) if isinstance(x, n.Expr) else x)
    match e:
        case n.Binary(op="+" | "-" | "*" as op, lhs=n.Const(value=a), rhs=n.Const(value=b)) if (
                not isinstance(a, bool) and not isinstance(b, bool) and e.dtype is not None
                and (ty.is_float(e.dtype) or isinstance(a, int) and isinstance(b, int))):
            v = a + b if op == "+" else a - b if op == "-" else a * b
            if ty.is_float(e.dtype) or -2**31 <= v < 2**31:  # (no int32 wrap-around to mimic)
                return _const(v, e)
        case n.Binary(op="*", lhs=a, rhs=b) if _zero(a) or _zero(b):
            return _const(0, e)
        case n.Binary(op="*", lhs=a, rhs=b) if _one(a) and b.dtype == e.dtype:
            return b
        case n.Binary(op="*" | "/", lhs=a, rhs=b) if _one(b) and a.dtype == e.dtype:
            return a
        case n.Binary(op="+", lhs=a, rhs=b) if _zero(a) and b.dtype == e.dtype:
            return b
        case n.Binary(op="+" | "-", lhs=a, rhs=b) if _zero(b) and a.dtype == e.dtype:
            return a
        case n.Unary(op="-", operand=a) if _zero(a):
            return _const(0, e)
        case n.Cast(to=to, operand=n.Const(value=v)) if (not isinstance(v, bool) and float(v).is_integer()
                                                          and (ty.is_float(to) or ty.is_int(to))):
            return n.Const(float(v) if ty.is_float(to) else int(v), dtype=to, span=e.span)
    return e


def _is_self(rhs: n.Expr, comp) -> bool:
    """``rhs`` is the element that the assignment writes (the other branch
    of ``A(i, j) = i > k ? ... : A(i, j)``): the piece changes nothing."""
    if comp.reduction is not None or not isinstance(rhs, n.Access) or rhs.tensor != comp.tensor:
        return False
    if len(rhs.indices) != len(comp.indices):
        return False
    try:
        return all(to_isl(f) == to_isl(g) for f, g in zip(comp.indices, rhs.indices))
    except NotAffine:
        return False


def _is_identity(rhs: n.Expr, reduction: str | None, dtype: str) -> bool:
    """``rhs`` is a constant that leaves an element of the reduction as it is."""
    if reduction not in ("+", "*", "min", "max") or not isinstance(rhs, n.Const):
        return False
    return rhs.value == ty.identity(reduction, dtype)
