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
from .strides import short, transposed, unit_or_invariant


@dataclass
class Plan:
    """Span of a sum -> its indices' order in the temporary (its dim k is the sum's dim perm[k])."""

    stmts: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.stmts)


def plan(model: Model) -> Plan:
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
            run = 0
            while run < len(names) and names[-1 - run] in s.dims and short(s, names[-1 - run]):
                run += 1
            if run == 0 or run == len(names) or names[-1 - run] not in s.dims:
                continue
            j = names[-1 - run]
            reads = [a for a in n.walk(c.rhs) if isinstance(a, n.Access)]
            if any(a.tensor == c.tensor for a in reads):
                continue
            if not all(unit_or_invariant(a, j) or transposed(a, j, c.reduction_vars, s.dims) for a in reads):
                continue
            m = len(names)
            out.stmts[c.span] = tuple(range(m - run, m)) + tuple(range(m - run))
    return out


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) with each sum of ``p`` computed in its temporary, copied back after it."""
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
