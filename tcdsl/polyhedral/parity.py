"""Strided transposed convolutions: a sum split by the parity of its outputs.

Users write a transposed convolution of stride ``s`` as TC reads it, one
select per output, the taps that reach it picked by a remainder::

    y(n, o, i, j) +=! ((i - kh) % 2 == 0 && (j - kw) % 2 == 0 && i - kh >= 0 && ...
                       ? x(n, c, (i - kh) / 2, (j - kw) / 2) : 0) * w(c, o, kh, kw)

Only one tap in ``s`` along each such dimension reaches an output, and which
one depends on the output's remainder ``i % s``: the reduction loops carry
strides that move with the output loops, so no loop nest runs them in
vectors (N, C, H, W, O = 8, 64, 16, 16, 32: 110 ms on 2 cores, against
``F.conv_transpose2d`` 2-4 ms).  ``plan(model)`` finds each such pair of an
output variable ``v`` and a reduction variable ``k`` -- a factor ``c ? ... :
0`` of a ``+=!`` (``+=``) sum outside sequential loops whose condition has a conjunct
``(v - k + e) % s == 0`` (or ``(k - v + e)``), ``e`` free of variables,
``s`` a constant of at least 2, both variables ranging from 0 -- and
``rewrite(def, plan)`` computes the sum in a temporary indexed by the
remainders (just before the first output they split) and the quotients,
the taps numbered within their class::

    y_par(n, o, i_p, j_p, i_q, j_q) +=! (<in range>) ? (<the sum's right-hand side at
        i = 2 * i_q + i_p, kh = 2 * kh_a + (i_p + e) % 2, ...>) : 0
        where i_p in 0:2, i_q in 0:(<extent of i> + 1) / 2, kh_a in 0:(<extent of kh> + 1) / 2, ...
    y(n, o, i, j) = y_par(n, o, i % 2, j % 2, i / 2, j / 2) where i in 0:<extent>, j in 0:<extent>

This is a change of variables over the points where the condition holds
(the others add 0), so every output sums the same terms in the same order.
In the temporary the remainder condition holds everywhere (polyhedral/split.py
drops it) and the input's index ``(v - k + e) / s`` becomes ``v_q - k_a`` plus a
constant per class: a plain convolution per class, in register tiles, and its
bounds select a padding copy (polyhedral/pad.py).  Measured on the program
above: 104-110 -> 3.4-3.6 ms.

An output variable that the sum reads only as ``v / s`` and ``v % s`` (the
taps of a transposed convolution written by quotient and remainder, ``x(b,
c, t / 3 - m) * w(c, o, t % 3 + 3 * m)``) is split the same way, without a
tap: ``v / s`` becomes ``v_q`` and ``v % s`` becomes ``v_p`` (stride 3,
(B, C, L, O) = (8, 128, 512, 64): 140 -> 3.9-4.2 ms); also where it is read
as ``(v + e) / s`` and ``(v + e) % s``, one constant ``e >= 0`` (PyTorch's
padding), with ``v + e % s = s * v_q + v_p``.
A ``+=`` sum is split the same way and adds the temporary to what the tensor
holds: a sub-pixel convolution (ESPCN, EDSR's upsampler) with its bias
written first, ``y(n, f, i, j) = bias(4 * f + 2 * (i % 2) + j % 2)``, then
``y(n, f, i, j) += (..) * w(4 * f + 2 * (i % 2) + j % 2, c, kh, kw)`` read at
``i / 2 + kh - 1``: 381 -> 3.7 ms at (N, C, H, W, F) = (2, 64, 48, 48, 64).
``options={"parity": False}`` leaves programs as written.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl

from ..sema.affine import NotAffine, isl_name, pwaff_to_expr
from ..syntax import nodes as n
from ..syntax.printer import _where, expr_to_tc
from .layout import _fresh, _names
from .model import Model
from .pad import _expr, _respan, _statement


@dataclass(frozen=True)
class Pair:
    v: str  # the output variable
    k: str | None  # the reduction variable; None: ``v`` is only read as ``v / s`` and ``v % s``
    s: int  # the stride
    e: int  # the constant of v - k + e, reduced modulo s; without k: of the reads' (v + e) / s
    ext_v: str  # the variables' extents as TC text
    ext_k: str | None


@dataclass
class Plan:
    """Statement span -> (its pairs, the temporary's name)."""

    stmts: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.stmts)


def _conjuncts(c):
    if isinstance(c, n.Binary) and c.op == "&&":
        return _conjuncts(c.lhs) + _conjuncts(c.rhs)
    return [c]


def _factors(e):
    """The selects multiplying the whole of ``e`` (``sel * w``, ``sel / d``)."""
    if isinstance(e, n.Select):
        return [e]
    if isinstance(e, n.Binary) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    if isinstance(e, n.Binary) and e.op == "/":
        return _factors(e.lhs)
    return []


def _remainders(cond, out_vars, red_vars) -> list[tuple[str, str, int, int]]:
    """(v, k, s, e) of each conjunct ``(v - k + e) % s == 0`` of ``cond``."""
    found = []
    for c in _conjuncts(cond):
        if not (isinstance(c, n.Binary) and c.op == "=="):
            continue
        mod, zero = (c.lhs, c.rhs) if isinstance(c.rhs, n.Const) else (c.rhs, c.lhs)
        if not (isinstance(zero, n.Const) and zero.value == 0 and isinstance(mod, n.Binary) and mod.op == "%"
                and isinstance(mod.rhs, n.Const) and isinstance(mod.rhs.value, int) and mod.rhs.value >= 2):
            continue
        lin = n.linear(mod.lhs)
        if lin is None or set(lin) - {1} - set(out_vars) - set(red_vars):
            continue
        vs = [x for x in lin if x in out_vars]
        ks = [x for x in lin if x in red_vars]
        if len(vs) != 1 or len(ks) != 1 or len(lin) - (1 in lin) != 2:
            continue
        v, k, s = vs[0], ks[0], mod.rhs.value
        if (lin[v], lin[k]) not in ((1, -1), (-1, 1)):
            continue
        e = lin.get(1, 0) * lin[v]  # v - k + e
        found.append((v, k, s, e % s))
    return found


def plan(model: Model) -> Plan:
    out = Plan()
    taken = _names(model.ranges.checked.node) | set(model.ranges.checked.tensors)
    for k in model.kernels():
        if k.loops:
            continue
        for s in k.stmts:
            comp = s.info.comp
            if s.is_init or comp.op not in ("+=!", "+=") or comp.span is None:
                continue
            lhs = [x.name for x in comp.indices if isinstance(x, (n.Ident, n.IndexVar))]
            if len(lhs) != len(comp.indices) or len(set(lhs)) != len(lhs):
                continue
            pairs = {}
            for sel in _factors(comp.rhs):
                if isinstance(sel.other, n.Const) and sel.other.value == 0:
                    for v, kk, st, e in _remainders(sel.cond, lhs, comp.reduction_vars):
                        if v not in pairs and kk not in {p[1] for p in pairs.values()}:
                            pairs[v] = (v, kk, st, e)
            for v in lhs:  # outputs read only divided: ``x(b, c, t / 3 - m) * w(c, o, t % 3 + 3 * m)``
                found_div = _divided(comp.rhs, v)
                if v not in pairs and found_div:
                    pairs[v] = (v, None, *found_div)
            if not pairs:
                continue
            found = []
            for v, kk, st, e in pairs.values():
                try:
                    exts = [_extent(s, x, k.context) if x else "" for x in (v, kk)]
                except (NotAffine, isl.Error):
                    break
                if None in exts:
                    break
                found.append(Pair(v, kk, st, e, *exts))
            else:
                out.stmts[comp.span] = (tuple(found), _fresh(f"{comp.tensor}_par", taken))
    return out


def _remainder_last(e, v: str, s: int) -> bool:
    """Some read of ``e`` (parsed or checked) has ``v % s`` as its last index."""
    def last(x):
        idx = x.indices if isinstance(x, n.Access) else x.args if isinstance(x, n.Call) else ()
        return idx[-1] if idx else None
    return any(isinstance(i := last(x), n.Binary) and i.op == "%" and _offset(i.lhs, v) is not None
               and isinstance(i.rhs, n.Const) and i.rhs.value == s for x in n.walk(e))


def _offset(x, v: str) -> int | None:
    """``e`` where ``x`` is ``v + e`` (``e`` a constant of at least 0); else None."""
    lin = n.linear(x)
    if lin is None or set(lin) - {1} != {v} or lin[v] != 1 or lin.get(1, 0) < 0:
        return None
    return lin.get(1, 0)


def _divided(e, v: str) -> tuple[int, int] | None:
    """``(s, e)`` when every read of ``v`` in ``e`` is ``(v + e) / s`` or
    ``(v + e) % s`` (one constant ``s`` of at least 2, one constant ``e`` of
    at least 0, so that the dividend is never negative; at least once a
    quotient); else None."""
    ok, forms, quotients = set(), set(), 0
    for x in n.walk(e):
        if isinstance(x, n.Binary) and x.op in ("/", "%") and isinstance(x.rhs, n.Const) \
                and isinstance(x.rhs.value, int) and x.rhs.value >= 2 and (off := _offset(x.lhs, v)) is not None:
            ok.update(id(r) for r in n.walk(x.lhs) if isinstance(r, n.IndexVar))
            forms.add((x.rhs.value, off))
            quotients += x.op == "/"
    reads = [x for x in n.walk(e) if isinstance(x, n.IndexVar) and x.name == v]
    if len(forms) != 1 or not quotients or any(id(x) not in ok for x in reads):
        return None
    return forms.pop()


def _extent(s, var: str, context: isl.Set) -> str | None:
    """The extent of ``var`` over the statement's domain as TC text, when it
    starts at 0 and is one affine expression of the sizes; else None.  Also
    None where the domain is empty at some sizes of the ``context``: the
    rewrite's ranges would not keep that (a range inferred as ``kh in 0:1``
    only where ``KH <= 2``)."""
    dom = s.domain
    names = [dom.get_dim_name(isl.dim_type.set, i) for i in range(dom.dim(isl.dim_type.set))]
    if isl_name(var) not in names:
        return None
    i = names.index(isl_name(var))
    if not context.is_subset(dom.params()):
        return None
    context = dom.params()
    lo = dom.dim_min(i).gist(context).coalesce()
    hi = dom.dim_max(i).gist(context).coalesce()
    if lo.n_piece() != 1 or hi.n_piece() != 1 or not lo.is_cst() or not lo.plain_is_equal(
            isl.PwAff.from_aff(isl.Aff.zero_on_domain(isl.LocalSpace.from_space(lo.get_domain_space())))):
        return None
    return f"({expr_to_tc(pwaff_to_expr(hi))}) + 1"


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) with each statement of ``p`` split by its outputs' remainders."""
    taken = _names(d)
    body = []
    for st in d.body:
        if isinstance(st, n.Comprehension) and st.span in p.stmts:
            body += _split(st, *p.stmts[st.span], taken)
        else:
            body.append(st)
    return replace(d, body=tuple(body))


def _split(st: n.Comprehension, pairs, name: str, taken: set) -> list:
    lhs = [x.name for x in st.indices]
    fresh = {q.v: (_fresh(f"{q.v}_p", taken), _fresh(f"{q.v}_q", taken)) for q in pairs}
    taps = {q.k: _fresh(f"{q.k}_a", taken) for q in pairs if q.k}
    subst = {}
    # a divided output read as ``(v + e) / s``: v + e % s = s * v_q + v_p
    shift = {q.v: q.e % q.s if q.k is None else 0 for q in pairs}
    for q in pairs:
        vp, vq = fresh[q.v]
        subst[q.v] = f"({q.s} * {vq} + {vp} - {shift[q.v]})" if shift[q.v] else f"({q.s} * {vq} + {vp})"
        if q.k:
            subst[q.k] = f"({q.s} * {taps[q.k]} + ({vp} + {q.e}) % {q.s})" if q.e else f"({q.s} * {taps[q.k]} + {vp})"

    def quotient(e) -> str | None:
        """``(v - k + c) / s`` of a pair as ``v_q - k_a + (v_p + c) / s`` (exact:
        ``k`` is ``s * k_a + (v_p + c) % s``), so that the read moves with
        ``v_q`` by 1, without a division TVM would keep in a vector's lanes;
        ``v / s`` and ``v % s`` of a divided output as ``v_q`` and ``v_p``."""
        if isinstance(e, n.Binary) and e.op in ("/", "%") and isinstance(e.rhs, n.Const):
            q = next((q for q in pairs if q.k is None and q.s == e.rhs.value and _offset(e.lhs, q.v) == q.e), None)
            if q is not None:
                vp, vq = fresh[q.v]
                if e.op == "%":
                    return vp
                return f"({vq} + {q.e // q.s})" if q.e // q.s else vq
        if not (isinstance(e, n.Binary) and e.op == "/" and isinstance(e.rhs, n.Const)):
            return None
        lin = n.linear(e.lhs)
        for q in pairs:
            if lin is not None and e.rhs.value == q.s and set(lin) - {1} == {q.v, q.k} \
                    and (lin[q.v], lin[q.k]) == (1, -1):
                c = lin.get(1, 0)
                if (c - q.e) % q.s:
                    # not the condition's constant (``(k - t + 1) % 3 == 0``
                    # read at ``(t + 1 - k) / 3``): the division is not exact,
                    # and stays as written over the substituted variables
                    return None
                vp, vq = fresh[q.v]
                return f"({vq} - {taps[q.k]})" if c == 0 else f"({vq} - {taps[q.k]} + ({vp} + {c}) / {q.s})"
        return None

    def sub(e):
        text = subst.get(e.name) if isinstance(e, (n.Ident, n.IndexVar)) else quotient(e)
        return n.map_children(e, sub) if text is None else _expr(text, e.span)

    guard = " && ".join(f"{subst[q.v]} < {q.ext_v}" + (f" && {subst[q.v]} >= 0" if shift[q.v] else "")
                        + (f" && {subst[q.k]} < {q.ext_k}" if q.k else "") for q in pairs)
    wheres = [f"{fresh[q.v][0]} in 0:{q.s}, {fresh[q.v][1]} in 0:({q.ext_v} + {q.s - 1 + shift[q.v]}) / {q.s}"
              + (f", {taps[q.k]} in 0:({q.ext_k} + {q.s - 1}) / {q.s}" if q.k else "") for q in pairs]
    moved = set(subst)
    for w in st.wheres:
        if isinstance(w, n.RangeConstraint) and w.var in moved:
            continue
        if n.names_in(w) & moved:
            return [st]  # a where clause over the moved variables: left as written
        wheres.append(_where(w))
    # the remainders just before the first output they split (a convolution's
    # channel rows stay outside, the quotients inside, as in its output); an
    # output that is only divided, and read as ``v % s`` in a last index, keeps
    # its place and layout, ``v = s * v_q + v_p`` as ``(v_q, v_p)`` (a
    # block-diagonal weight's block ``i / 32`` and column ``i % 32``: the column
    # innermost, as in the weight; a transposed convolution's ``x(.., t / 3 -
    # m)`` reads along the quotient, which stays innermost)
    first_split = min(lhs.index(q.v) for q in pairs)
    idx = lhs[:first_split] + [fresh[q.v][0] for q in pairs] + [fresh[v][1] if v in fresh else v
                                                                 for v in lhs[first_split:]]
    divided = all(q.k is None and _remainder_last(st.rhs, q.v, q.s) for q in pairs)
    if divided:
        idx = [x for v in lhs for x in ((fresh[v][1], fresh[v][0]) if v in fresh else (v,))]
    # the right-hand side keeps its nodes' spans (pad.py finds its selects by them)
    first = _respan(_statement(f"{name}({', '.join(idx)}) +=! 0 where {', '.join(wheres)}"), st.span)
    first = replace(first, rhs=n.Select(_expr(guard, st.span), sub(st.rhs), n.Const(0, span=st.span),
                                        span=st.span))
    by_v = {q.v: q for q in pairs}
    plus = {v: f"({v} + {shift[v]})" if shift[v] else v for v in by_v}
    back = lhs[:first_split] + [f"{plus[q.v]} % {q.s}" for q in pairs] + [
        f"{plus[v]} / {by_v[v].s}" if v in by_v else v for v in lhs[first_split:]]
    if divided:
        back = [x for v in lhs for x in ((f"{plus[v]} / {by_v[v].s}", f"{plus[v]} % {by_v[v].s}") if v in by_v
                                         else (v,))]
    ranges = ", ".join(f"{q.v} in 0:{q.ext_v}" for q in pairs)
    # (a ``+=`` sum adds to what the tensor holds: a bias written first, ``y(..) = bias(..)``)
    held = f"{st.tensor}({', '.join(lhs)}) + " if st.op == "+=" else ""
    second = _statement(f"{st.tensor}({', '.join(lhs)}) = {held}{name}({', '.join(back)}) where {ranges}")
    return [first, _respan(second, st.span)]

