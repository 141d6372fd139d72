"""Sums whose last index is short, computed in a transposed temporary.

The CPU code vectorizes a statement along the last index of the tensor it
writes, and its register tiles store vectors along it.  A convolution's
weight gradient, as users (and tcdsl.grad) write it::

    dw(o, c, kh, kw) +=! dy(n, o, h, v) * x(n, c, h + kh, v + kw) where kh in 0:3, kw in 0:3

ends in ``kw``, of 3 values: a vector of 8 lanes holds 3 of them, and the
sum over ``(n, h, v)`` ran one output at a time (N, O, C, H, W = 16, 64,
64, 28, 28: 75-103 ms on 2 cores, ``torch.nn.grad.conv2d_weight`` 16 ms).
``plan(model)`` finds each ``+=!`` or ``+=`` (or ``*``, ``max``, ``min``) sum outside
sequential loops whose trailing indices take fewer than
``strides.SHORT`` values each whatever the sizes, and whose next index
``j`` (``c`` above) is one the code may vectorize along -- every read
contiguous or invariant along it, or the k x columns operand of a
matmul-like sum, copied to a panel (``x(n, c, h + kh, v + kw)``: a
reduction variable in the last index, ``j`` alone in another;
strides.transposed).  ``rewrite(def, plan)`` computes the sum in a
temporary with the short indices first and copies it back::

    dw_p(kh, kw, o, c) +=! dy(n, o, h, v) * x(n, c, h + kh, v + kw) where kh in 0:3, kw in 0:3
    dw(o, c, kh, kw) = dw_p(kh, kw, o, c)

(``dw(o, c, kh, kw) += dw_p(kh, kw, o, c)`` for a ``+=`` that starts from
``dw``'s values, as tcdsl.grad's weight gradients do).
Each element sums the same terms in the same order; the copy is one pass
over the (small) result.  The sum is then a matmul per ``(kh, kw)``: rows
``o``, columns ``c`` in register tiles, ``x``'s window copied transposed to
a panel (codegen/panels.py): 75-103 -> 13 ms on the program above.  Part of
the ``transpose`` option (``options={"transpose": False}`` leaves programs
as written).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..syntax import nodes as n
from .layout import _fresh, _names
from .model import Model
from .hoist import _parsed, _value
from .strides import TAPS, short, tap, transposed, unit_or_invariant, uses


@dataclass
class Plan:
    """Span of a sum -> its indices' order in the temporary (its dim k is the
    sum's dim perm[k]); ``dynamic``: span -> the extents (size expressions)
    of its trailing indices whose count the sizes give, each of which must
    be under ``strides.TAPS`` at run time for the temporary to be used."""

    stmts: dict = field(default_factory=dict)
    dynamic: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.stmts)


def plan(model: Model, ranges=None, fixed: dict[str, int] | None = None) -> Plan:
    """The sums to compute permuted.  With ``ranges`` (the program's
    RangeInfo), a trailing index that is a convolution's tap counted by the
    sizes (``k in 0:M-L+1``, strides.tap) counts as short when it takes fewer
    than strides.TAPS values at run time: ``rewrite`` then keeps both
    programs, or the one that the sizes ``fixed`` at compile time choose."""
    out = Plan()
    for k in model.kernels():
        if k.loops:
            continue
        for s in k.stmts:
            c = s.info.comp
            if s.is_init or c.reduction in (None, "argmax", "argmin") or not c.reduction_vars:
                continue
            if not all(isinstance(x, n.IndexVar) for x in c.indices):
                continue
            names = [x.name for x in c.indices]
            reads = [a for a in n.walk(c.rhs) if isinstance(a, n.Access)]
            run, dynamic, taps = 0, [], []
            while run < len(names) and names[-1 - run] in s.dims:
                d = names[-1 - run]
                if not short(s, d):
                    if ranges is None or not tap(s, reads, d, c.reduction_vars):
                        break
                    ext = _parsed(ranges.extent_exprs(c.tensor)[len(names) - 1 - run], {})
                    names_in = {x.name for x in n.walk(ext) if isinstance(x, n.Ident)}
                    value = _value(ext, fixed) if fixed and names_in <= set(fixed) else None
                    if value is not None and value >= TAPS:
                        break
                    if value is None:
                        dynamic.append(ext)
                    taps.append(d)
                run += 1
            if run == 0 or run == len(names) or names[-1 - run] not in s.dims:
                continue
            j = names[-1 - run]
            if any(uses(a.indices, d) and not uses(a.indices, j) for a in reads for d in taps):
                # the window is the rows' operand (a forward convolution's
                # ``x(b, c, t + k)`` for outputs ``y(b, o, t)``): permuted,
                # its rows would be read a few taps at a time (16 x 128 x 32
                # outputs: 1.2-1.3 -> 2.4-2.6 ms); a weight gradient's
                # window is the columns' operand, copied to a panel
                continue
            if any(a.tensor == c.tensor for a in reads):
                continue
            if not all(unit_or_invariant(a, j) or transposed(a, j, c.reduction_vars, s.dims) for a in reads):
                continue
            m = len(names)
            out.stmts[c.span] = tuple(range(m - run, m)) + tuple(range(m - run))
            if dynamic:
                out.dynamic[c.span] = dynamic
    return out


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) with each sum of ``p`` computed in its temporary,
    copied back after it.  With sums whose trailing indices are short only
    at some sizes (``p.dynamic``): ``if`` they all are ``{ d with every sum
    of p permuted } else { d with the others }``, so that a long tap count
    keeps the sum as written (a 1-D weight gradient of 128 taps ran 0.97 of
    torch.nn.grad.conv1d_weight as written, 1.11 permuted; of 3 taps, 9.9
    and 0.8)."""
    if not p.dynamic:
        return _rewrite(d, p)
    static = Plan({k: v for k, v in p.stmts.items() if k not in p.dynamic})
    then = _rewrite(d, p)
    orelse = _rewrite(d, static) if static else d
    span = d.body[0].span if d.body else None
    cond = None
    for exts in p.dynamic.values():
        for e in exts:
            c = n.Binary(op="<", lhs=e, rhs=n.Const(value=TAPS, span=span), span=span)
            cond = c if cond is None else n.Binary(op="&&", lhs=cond, rhs=c, span=span)
    return replace(d, body=(n.If(cond=cond, then=then.body, orelse=orelse.body, span=span),))


def _rewrite(d: n.Def, p: Plan) -> n.Def:
    taken = _names(d)
    body = []
    for st in d.body:
        if not (isinstance(st, n.Comprehension) and st.span in p.stmts):
            body.append(st)
            continue
        perm = p.stmts[st.span]
        name = _fresh(f"{st.tensor}_p", taken)
        moved = tuple(st.indices[k] for k in perm)
        # a sum that starts from the tensor's values (``+=``, tcdsl.grad's
        # weight gradients): the temporary starts from the identity, and is
        # added to them
        init = st.op.endswith("!")
        body.append(replace(st, tensor=name, indices=moved, op=st.op if init else st.op + "!"))
        body.append(n.Comprehension(st.tensor, st.indices, "=" if init else st.op, n.Call(name, moved, span=st.span),
                                    span=st.span))
    return replace(d, body=tuple(body))
