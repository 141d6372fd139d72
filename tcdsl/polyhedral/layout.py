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
never written), indexed by distinct plain index variables, that has the
written tensor's last index ``j`` in a dimension other than its last, and
that is read inside a sequential ``for`` (so the same elements are read at
every step; outside loops the CPU mapping packs such an operand into a
panel itself, codegen/cpu_tiles.py).  ``rewrite(def, plan)`` adds one statement per (input, permutation)
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
from ..syntax.parse import parse


@dataclass
class Plan:
    """Access span -> (copy's name, permutation: the copy's dim k is the input's dim perm[k]);
    strided reads: access span -> (copy's name, stride)."""

    reads: dict = field(default_factory=dict)
    copies: dict = field(default_factory=dict)  # (input, perm) -> (copy's name, span of its first read)
    strided: dict = field(default_factory=dict)
    strided_copies: dict = field(default_factory=dict)  # (input, stride) -> (copy's name, span, last extent)

    def __bool__(self) -> bool:
        return bool(self.reads or self.strided)

    def spans(self) -> set:
        """The spans of the copies' statements."""
        return {c[1] for c in self.copies.values()} | {c[1] for c in self.strided_copies.values()}


def plan(checked: CheckedDef) -> Plan:
    d = checked.node
    inputs = {p.name for p in d.params}
    written = {c.tensor for c in n.walk(d) if isinstance(c, n.Comprehension)}
    taken = _names(d) | set(checked.tensors) | set(checked.sizes)
    out = Plan()

    def visit(stmts, in_loop: bool) -> None:
        for s in stmts:
            if isinstance(s, n.For):
                visit(s.body, True)
            elif isinstance(s, n.If):
                visit(s.then, in_loop)
                visit(s.orelse, in_loop)
            elif isinstance(s, n.Comprehension):
                statement(s, in_loop)

    def statement(c: n.Comprehension, in_loop: bool) -> None:
        last = c.indices[-1] if c.indices else None
        if not isinstance(last, (n.IndexVar, n.Ident)):
            return
        j = last.name
        _strided(c, j, inputs, written, taken, out)
        for acc in n.walk(c.rhs):
            if not (isinstance(acc, n.Access) and acc.tensor in inputs and acc.tensor not in written):
                continue
            if not all(isinstance(x, n.IndexVar) for x in acc.indices) or acc.span is None:
                continue
            names = [x.name for x in acc.indices]
            if len(set(names)) != len(names) or j not in names or names[-1] == j:
                continue
            if not in_loop:
                continue  # outside loops the CPU mapping packs such an operand itself (codegen/cpu_tiles.py)
            k = names.index(j)
            perm = tuple(x for x in range(len(names)) if x != k) + (k,)
            key = (acc.tensor, perm)
            if key not in out.copies:
                out.copies[key] = (_fresh(f"{acc.tensor}_t", taken), acc.span)
            out.reads[acc.span] = (out.copies[key][0], perm)

    visit(d.body, False)
    return out


def _strided(c: n.Comprehension, j: str, inputs: set, written: set, taken: set, out: Plan) -> None:
    """The reads of ``c`` of an input whose last index is ``s * j + e``
    (``s`` a constant >= 2, ``j`` the last index of the tensor ``c`` writes,
    nowhere else in the read) -- a convolution of stride 2, ``x(n, c, 2 *
    h + kh, 2 * v + kw)`` -- and that also read a window in another
    dimension (an index with a reduction variable and another variable): the
    vector loop over ``j`` reads every ``s``-th element, a shuffle of two
    vectors per vector, in the register tiles that cover several output rows
    (codegen/cpu.py, ``tile_depth``).  They read a copy whose last dimension
    is split in ``s`` phases, ``x_s(.., r, q) = x(.., s * q + r)``, instead:
    ``x_s(.., e % s, j + e / s)``, contiguous in ``j``.  (A 1-D convolution
    of stride 2 reads through a packed panel instead, codegen/panels.py.)"""
    reductions = set(c.reduction_vars)
    for acc in n.walk(c.rhs):
        if not (isinstance(acc, n.Access) and acc.tensor in inputs and acc.tensor not in written) \
                or not acc.indices or acc.span is None:
            continue
        found = _stride_of(acc.indices[-1], j)
        if found is None or any(j in _vars(x) for x in acc.indices[:-1]):
            continue
        if not any(len(_vars(x)) >= 2 and _vars(x) & reductions for x in acc.indices[:-1]):
            continue
        key = (acc.tensor, found)
        if key not in out.strided_copies:
            out.strided_copies[key] = (_fresh(f"{acc.tensor}_s{found}", taken), acc.span, len(acc.indices))
        out.strided[acc.span] = (out.strided_copies[key][0], found)


def _vars(e) -> set[str]:
    return {x.name for x in n.walk(e) if isinstance(x, (n.IndexVar, n.Ident))}


def _terms(e, sign: int = 1) -> list | None:
    """``e`` as signed terms of a sum (None: not a sum of terms)."""
    if isinstance(e, n.Binary) and e.op in ("+", "-"):
        a, b = _terms(e.lhs, sign), _terms(e.rhs, sign if e.op == "+" else -sign)
        return None if a is None or b is None else a + b
    return [(sign, e)]


def _stride_of(e, j: str) -> int | None:
    """``s`` where ``e`` is ``s * j`` plus terms without ``j`` (``s`` >= 2)."""
    terms = _terms(e)
    if terms is None:
        return None
    with_j = [(sg, t) for sg, t in terms if j in _vars(t)]
    if len(with_j) != 1 or with_j[0][0] != 1:
        return None
    t = with_j[0][1]
    if not (isinstance(t, n.Binary) and t.op == "*"):
        return None
    for a, b in ((t.lhs, t.rhs), (t.rhs, t.lhs)):
        if isinstance(a, n.Const) and isinstance(a.value, int) and a.value >= 2 and isinstance(b, (n.IndexVar, n.Ident)) \
                and b.name == j:
            return a.value
    return None


def _split_read(node: n.Call, s: int, name: str) -> n.Call:
    """``x(.., s * j + e)`` as ``x_s(.., e % s, j + e / s)``."""
    span = node.span
    terms = _terms(node.args[-1])
    j = next(t for _, t in terms if isinstance(t, n.Binary) and t.op == "*" and
             any(isinstance(x, (n.IndexVar, n.Ident)) and not isinstance(x, n.Const) for x in (t.lhs, t.rhs)))
    jvar = j.rhs if isinstance(j.lhs, n.Const) else j.lhs
    rest = n.Const(0, span=span)
    for sign, t in terms:
        if t is j:
            continue
        rest = n.Binary("+" if sign > 0 else "-", rest, t, span=span)
    phase = n.Binary("%", rest, n.Const(s, span=span), span=span)
    shift = n.Binary("+", jvar, n.Binary("/", rest, n.Const(s, span=span), span=span), span=span)
    return n.Call(name, tuple(node.args[:-1]) + (phase, shift), span=span)


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) reading the copies of ``p``, which it computes first."""
    taken = _names(d)

    def fn(node):
        if isinstance(node, n.Call) and node.span in p.reads:
            name, perm = p.reads[node.span]
            return n.Call(name, tuple(node.args[k] for k in perm), span=node.span)
        if isinstance(node, n.Call) and node.span in p.strided:
            return _split_read(node, p.strided[node.span][1], p.strided[node.span][0])
        return n.map_children(node, fn)

    body = tuple(fn(s) for s in d.body)
    copies = []
    for (tensor, perm), (name, span) in p.copies.items():
        vars_ = [_fresh(f"d{k}", taken) for k in range(len(perm))]
        lhs = tuple(n.Ident(vars_[k], span=span) for k in perm)
        rhs = n.Call(tensor, tuple(n.Ident(v, span=span) for v in vars_), span=span)
        copies.append(n.Comprehension(name, lhs, "=", rhs, span=span))
    params = {x.name: x for x in d.params}
    for (tensor, s), (name, span, rank) in p.strided_copies.items():
        dims = [_fresh(f"d{k}", taken) for k in range(rank - 1)]
        r, q = _fresh("r", taken), _fresh("q", taken)
        size = params[tensor].type.dims[-1]
        text = (f"{name}({', '.join(dims + [r, q])}) = ({s} * {q} + {r} < {size}) ? "
                f"{tensor}({', '.join(dims + [f'{s} * {q} + {r}'])}) : 0 where {r} in 0:{s}, {q} in 0:({size} + {s - 1}) / {s}")
        copies.append(_respan(_statement(text), span))
    return replace(d, body=tuple(copies) + body)


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


def _statement(text: str) -> n.Comprehension:
    return parse(f"def pad() -> (out) {{\n  {text}\n}}").defs[0].body[0]


def _expr(text: str, span) -> n.Expr:
    return _respan(_statement(f"out(i) = {text}").rhs, span)


def _respan(node, span):
    """``node`` with every span set to ``span`` (the read it copies): messages
    about the copy point at the program's own text."""
    node = n.map_children(node, lambda c: _respan(c, span))
    return replace(node, span=span)
