"""Sums whose last index is short, computed in a transposed temporary.

The CPU code vectorizes a statement along the last index of the tensor it
writes, and its register tiles store vectors along it.  A convolution's
weight gradient, as users (and tcdsl.grad) write it::

    dw(o, c, kh, kw) +=! dy(n, o, h, v) * x(n, c, h + kh, v + kw) where kh in 0:3, kw in 0:3

ends in ``kw``, of 3 values: a vector of 8 lanes holds 3 of them, and the
sum over ``(n, h, v)`` ran one output at a time (N, O, C, H, W = 16, 64,
64, 28, 28: 75-103 ms on 2 cores, ``torch.nn.grad.conv2d_weight`` 16 ms).
``plan(model)`` finds each ``+=!`` or ``+=`` (or ``*``, ``max``, ``min``) sum outside
sequential loops, whose lhs variables range over its tensor's whole box
(``_writes_whole``: the copy back covers the box), whose trailing indices take fewer than
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
a panel (codegen/panels.py): 75-103 -> 13 ms on the program above.  A forward convolution whose output rows are narrower than a vector
(``_narrow``, ``NARROW``) is computed with its channels last, from its
weight copied with the channel last.  Part of the ``transpose`` option
(``options={"transpose": False}`` leaves programs as written).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl

from ..syntax import nodes as n
from .layout import _fresh, _names
from .model import Model
from .hoist import _parsed, _value
from . import dataflow, strides
from .strides import TAPS, short, tap, transposed, unit_or_invariant, uses


@dataclass
class Plan:
    """Span of a sum -> its indices' order in the temporary (its dim k is the
    sum's dim perm[k]); ``dynamic``: span -> the extents (size expressions)
    of its trailing indices whose count the sizes give, each of which must
    be under ``strides.TAPS`` at run time for the temporary to be used."""

    stmts: dict = field(default_factory=dict)
    dynamic: dict = field(default_factory=dict)
    # span -> (tensor, dimension) of the reads copied with that dimension
    # last (a narrow convolution's weight ``w(o, c, kh, kw)``: ``w_t(c, kh, kw, o)``)
    transposed: dict = field(default_factory=dict)

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
            if not _writes_whole(model, k, s):
                continue
            if not _short_plan(out, s, names, reads, ranges, fixed) and ranges is not None:
                _narrow(out, s, names, reads, ranges, fixed)
            if c.span not in out.stmts:
                _batch_last(out, s, names, reads)
            if c.span not in out.stmts:
                _batch_rows(out, s, names, reads)
    return out


def _writes_whole(model: Model, k, s) -> bool:
    """The lhs variables of ``s`` range over its tensor's whole box, at every
    size: the temporary (initialized over those ranges) is copied back over
    the whole tensor, and an element outside them (a reduction range narrowed
    by a guarded read: ``dw(o, c, j)`` of a padded window at ``j = 0``) would
    get the temporary's garbage."""
    info = s.info
    names = [x.name for x in info.comp.indices]
    if info.init_domain is None or tuple(info.vars[:len(names)]) != tuple(names) or len(set(names)) != len(names):
        return False
    try:
        box = dataflow.box(model.ranges, info.comp.tensor).reset_tuple_id()
        own = info.init_domain.reset_tuple_id()
        own = own.align_params(box.get_space())
        box = box.align_params(own.get_space()).intersect_params(k.context.align_params(own.get_space()))
        return box.subtract(own).is_empty()
    except isl.Error:
        return False


def _short_plan(out: Plan, s, names: list[str], reads: list, ranges, fixed) -> bool:
    """Plan ``s`` when its trailing indices are short (see :func:`plan`)."""
    c = s.info.comp
    run, dynamic, taps = 0, [], []
    while run < len(names) and names[-1 - run] in s.dims:
        d = names[-1 - run]
        if not short(s, d):
            if ranges is None or not tap(s, reads, d, c.reduction_vars):
                break
            ext = _parsed(ranges.extent_exprs(c.tensor)[len(names) - 1 - run], {}, ranges.checked.derived)
            names_in = {x.name for x in n.walk(ext) if isinstance(x, n.Ident)}
            value = _value(ext, fixed) if fixed and names_in <= set(fixed) else None
            if value is not None and value >= TAPS:
                break
            if value is None:
                dynamic.append((ext, TAPS))
            taps.append(d)
        run += 1
    if run == 0 or run == len(names) or names[-1 - run] not in s.dims:
        return False
    j = names[-1 - run]
    if any(uses(a.indices, d) and not uses(a.indices, j) for a in reads for d in taps):
        # the window is the rows' operand (a forward convolution's
        # ``x(b, c, t + k)`` for outputs ``y(b, o, t)``): permuted,
        # its rows would be read a few taps at a time (16 x 128 x 32
        # outputs: 1.2-1.3 -> 2.4-2.6 ms); a weight gradient's
        # window is the columns' operand, copied to a panel
        return False
    if any(a.tensor == c.tensor for a in reads):
        return False
    if not all(unit_or_invariant(a, j) or transposed(a, j, c.reduction_vars, s.dims) for a in reads):
        return False
    m = len(names)
    out.stmts[c.span] = tuple(range(m - run, m)) + tuple(range(m - run))
    if dynamic:
        out.dynamic[c.span] = dynamic
    return True


def rewrite(d: n.Def, p: Plan) -> n.Def:
    """``d`` (as parsed) with each sum of ``p`` computed in its temporary,
    copied back after it.  With sums whose trailing indices are short only
    at some sizes (``p.dynamic``): ``if`` they all are ``{ those statements
    with every sum of p permuted } else { with the others }``, around the
    statements from the first such sum to the last only, so that a long tap count
    keeps the sum as written (a 1-D weight gradient of 128 taps ran 0.97 of
    torch.nn.grad.conv1d_weight as written, 1.11 permuted; of 3 taps, 9.9
    and 0.8)."""
    if not p.dynamic:
        return _rewrite(d, p)
    static = Plan({k: v for k, v in p.stmts.items() if k not in p.dynamic}, {},
                  {k: v for k, v in p.transposed.items() if k not in p.dynamic})
    # only the statements from the first such sum to the last are kept twice:
    # a copy of the whole program would double its code and compile time
    at = [i for i, st in enumerate(d.body) if isinstance(st, n.Comprehension) and st.span in p.dynamic]
    if not at:  # (none of them a statement of the body itself: nothing to choose between)
        return _rewrite(d, static)
    lo, hi = at[0], at[-1] + 1
    taken = _names(d)
    then = _rewrite(d, p, d.body[lo:hi], taken)
    orelse = _rewrite(d, static, d.body[lo:hi], set(taken))
    span = d.body[lo].span
    cond = None
    for exts in p.dynamic.values():
        for e, limit in exts:
            c = n.Binary(op="<", lhs=e, rhs=n.Const(value=limit, span=span), span=span)
            cond = c if cond is None else n.Binary(op="&&", lhs=cond, rhs=c, span=span)
    taken |= _names(then) | _names(orelse)
    return replace(d, body=_rewrite(d, static, d.body[:lo], taken).body
                   + (n.If(cond=cond, then=then.body, orelse=orelse.body, span=span),)
                   + _rewrite(d, static, d.body[hi:], taken).body)


def _rewrite(d: n.Def, p: Plan, stmts=None, taken: set | None = None) -> n.Def:
    """``d`` with the sums of ``p`` among ``stmts`` (default: its body) permuted,
    its body those statements; fresh names avoid ``taken`` (default: d's)."""
    taken = _names(d) if taken is None else taken
    body = []
    for st in d.body if stmts is None else stmts:
        # (a rewrite before may have made several statements of one span: parity.py's sum
        # and its copy back; the plan's is the sum with as many indices)
        if not (isinstance(st, n.Comprehension) and st.span in p.stmts and st.op != "="
                and len(st.indices) == len(p.stmts[st.span])):
            body.append(st)
            continue
        perm = p.stmts[st.span]
        for tensor, dim in p.transposed.get(st.span, ()):
            st, copy = _transpose_reads(st, tensor, dim, taken)
            body.append(copy)
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


# A sum whose output rows are windows narrower than this at run time (a
# convolution's 14 or 7 output columns, fewer than a 16-lane vector) is
# computed with its channels last (``_narrow``).  Measured on 2 cores of an
# AMD EPYC with AVX-512, 3x3 convolutions (N, C=O, output H=W), as written
# / channels last / torch.nn.functional.conv2d: (8, 512, 7) 65 / 10.6 / 5.3
# ms, (8, 256, 14) 23 / 9.2 / 4.5, (8, 128, 22) 3.9 / 3.8 / 2.7, (8, 128,
# 28) 4.6 / 5.0 / 4.3.
# 1x1 convolutions (benchmarks/programs.py, symbolic kernels, medians, same
# machine), as written / windows first, y_p(h, v, n, o) / y_p(n, h, v, o):
# (N, C=O, H=W) = (8, 512, 7) 21.5 / 2.99 / 2.58 ms, (8, 256, 14) 8.2 /
# 3.5 / 2.2 ms, F.conv2d 1.6-2.2 ms.
NARROW = 16
# ... and the same limit when a window moves by 2 or more per output (a
# strided convolution): as written, every column tile a vector wide or more
# gathers the window's every other input once, to a panel (codegen/cpu_tiles.py),
# and only narrower ones gather per vector.  3x3 stride 2, (N, C, O, output
# width), default / channels last / torch.nn.functional.conv2d (ms, same
# machine): (8, 128, 128, 16) 2.5-2.7 / 3.2 / 1.5; (8, 128, 128, 12) 7.0 /
# 2.4 / 0.9; (8, 64, 64, 20) 1.6 / 1.35 / 0.67; (8, 32, 64, 24) 0.95 / 1.08 /
# 0.50; (8, 64, 128, 32) 3.1-3.4 / 3.6 / 3.0.
NARROW_STRIDED = 16


def _narrow(out: Plan, s, names: list[str], reads: list, ranges, fixed) -> None:
    """Plan a sum whose trailing output indices slide a window over a read
    (``y(n, o, h, v) +=! x(n, c, h + kh, v + kw) * w(o, c, kh, kw)``: ``h``,
    ``v``) with the channel ``o`` before them: when the last index takes
    fewer than NARROW values (at run time, or at the sizes ``fixed``), the
    sum is computed with the windows first, ``y_p(h, v, n, o)``, vectorized
    along ``o``, from ``w`` copied with ``o`` last, and copied back.  Two or
    more plain trailing indices count as windows of width one (a 1x1
    convolution ``y(n, o, h, v) +=! x(n, c, h, v) * w(o, c)``, _unit_window);
    that sum is computed as ``y_p(n, h, v, o)``."""
    c = s.info.comp
    if c.reduction != "+" or any(a.tensor == c.tensor for a in reads):
        return
    if any(isinstance(x, n.Select) for x in n.walk(c.rhs)):
        return  # a guarded window (an input gradient's edges, split into pieces): as written
    red = set(c.reduction_vars)
    run = units = 0
    while run < len(names) - 1:
        if not _window(reads, names[-1 - run], red):
            if not _unit_window(reads, names[-1 - run], names[len(names) - run:]):
                break
            units += 1
        run += 1
    if run == 0 or run == units < 2:  # (one plain trailing index: a matmul whose columns are few)
        return
    j = names[-1 - run]
    if j not in s.dims or any(uses(a.indices, j) and any(uses(a.indices, d) for d in names[len(names) - run:])
                              for a in reads):
        return
    moved: list[tuple[str, int]] = []
    for a in reads:
        if not uses(a.indices, j):
            continue
        *outer, last = a.indices
        if isinstance(last, n.IndexVar) and last.name == j and not uses(outer, j):
            continue  # contiguous along j already
        plain = all(isinstance(x, n.IndexVar) for x in a.indices) and len({x.name for x in a.indices}) == len(a.indices)
        if not plain:
            return
        dim = [x.name for x in a.indices].index(j)
        if (a.tensor, dim) in moved:
            continue  # read twice: one copy serves both reads
        if any(t == a.tensor for t, _ in moved):
            return
        moved.append((a.tensor, dim))
    if not moved:
        return
    ext = _parsed(ranges.extent_exprs(c.tensor)[len(names) - 1], {}, ranges.checked.derived)
    names_in = {x.name for x in n.walk(ext) if isinstance(x, n.Ident)}
    if not names_in:
        return  # a constant width: a short index (strides.short), or wide enough
    value = _value(ext, fixed) if fixed and names_in <= set(fixed) else None
    unit = all(strides.plus(e, d, (1,)) for a in reads for e in a.indices for d in names[len(names) - run:]
               if uses([e], d))
    limit = NARROW if unit else NARROW_STRIDED
    if value is not None and value >= limit:
        return
    m = len(names)
    if units == run and m - run >= 2:
        # windows of one: the batch first, then the windows, ``y_p(n, h, v, o)``:
        # a register tile's four rows are four neighbouring x(n, c, h, v); with
        # the sizes fixed each batch entry's (h, v) are one run of rows
        # (codegen/collapse.py)
        out.stmts[c.span] = (0,) + tuple(range(m - run, m)) + tuple(range(1, m - run))
    else:
        out.stmts[c.span] = tuple(range(m - run, m)) + tuple(range(m - run))
    out.transposed[c.span] = moved
    if value is None:
        out.dynamic[c.span] = [(ext, limit)]


def _batch_last(out: Plan, s, names: list[str], reads: list) -> None:
    """Plan a product whose last index is a batch of it: every read uses it,
    none in its last index, as attention's scores with the heads last,
    ``s(b, i, j, h) +=! q(b, h, i, d) * k(b, h, j, d)``.  Vectorized along
    ``h`` every lane reads other rows of both operands: two loads per
    multiply-add, no operand shared across a register tile (8 x 8 x 256 x
    256 x 64: 137-204 ms, 4-7x ``torch.einsum``).  The sum is computed with
    ``h`` after the indices that come before it in every read, ``s_p(b, h,
    i, j)``, a matmul per ``(b, h)`` with ``k`` copied to panels, and copied
    back: when the new last index ``j`` is one the code may vectorize along
    and the rows ``i`` and the columns ``j`` each leave one operand
    invariant (register tiles reuse it)."""
    c = s.info.comp
    if c.reduction != "+" or not c.reduction_vars or len(names) < 3 or len(reads) < 2:
        return
    h = names[-1]
    if any(a.tensor == c.tensor for a in reads) or h not in s.dims:
        return
    if not all(uses(a.indices, h) and not uses(a.indices[-1:], h) for a in reads):
        return

    def first(a, d: str) -> int:
        return next(i for i, e in enumerate(a.indices) if uses([e], d))

    pos = 0
    while pos < len(names) - 1 and all(first(a, names[pos]) < first(a, h) for a in reads if uses(a.indices, names[pos])):
        pos += 1
    if pos >= len(names) - 2:
        # ``h`` after every other index in the reads too (``q(b, i, h, d) *
        # k(b, j, h, d)``, a linear layer's output viewed ``(B, T, NH, D)``):
        # before the last two, a matmul per ``(b, h)`` all the same
        pos = len(names) - 3
    perm = tuple(range(pos)) + (len(names) - 1,) + tuple(range(pos, len(names) - 1))
    rows, j = names[perm[-2]], names[perm[-1]]
    if j not in s.dims or rows not in s.dims:
        return
    red = c.reduction_vars
    if not all(unit_or_invariant(a, j) or transposed(a, j, red, s.dims) for a in reads):
        return
    if all(uses(a.indices, j) for a in reads) or all(uses(a.indices, rows) for a in reads):
        return
    out.stmts[c.span] = perm


def _batch_rows(out: Plan, s, names: list[str], reads: list) -> None:
    """Plan a product whose rows (the index before the last) are a batch of
    it -- every read uses them -- while an index before them is not: a
    grouped linear layer ``y(b, g, o) +=! x(b, g, i) * W(g, i, o)`` (a
    block-diagonal weight's blocks).  Its register tiles take the rows from
    ``g``, along which both operands change: no reuse, one multiply-add per
    load (1024 x 32 groups of 32 x 32: 3.2 ms, 0.54 with the groups first).
    The sum is computed with the batch before the first index that is none,
    ``y_p(g, b, o)``, a matmul per ``g`` with rows ``b``, and copied back,
    when the last index ``o`` is one the code may vectorize along and the new
    rows leave an operand invariant."""
    c = s.info.comp
    # (three indices, rows, groups, columns: timed on a suite with 4-D attention sums
    # whose heads are their rows, ``s(b, i, h, j)``, the copy back made them slower)
    if c.reduction != "+" or not c.reduction_vars or len(names) != 3 or len(reads) != 2:
        return
    g, j = names[-2], names[-1]
    if any(a.tensor == c.tensor for a in reads) or g not in s.dims or j not in s.dims:
        return
    # the groups in an index of every read without a division (``32 * g + j``, not ``(o / 32)
    # * CG + c``, a grouped convolution's input channels), the columns not read by every operand
    def undivided(e) -> bool:
        return uses([e], g) and not any(isinstance(x, n.Binary) and x.op in ("/", "%") for x in n.walk(e))
    if not all(any(undivided(e) for e in a.indices) for a in reads) or all(uses(a.indices, j) for a in reads):
        return
    pos = next((i for i, x in enumerate(names[:-2]) if not all(uses(a.indices, x) for a in reads)), None)
    if pos is None or names[pos] not in s.dims:
        return
    red = c.reduction_vars
    if not all(unit_or_invariant(a, j) or transposed(a, j, red, s.dims) for a in reads):
        return
    perm = tuple(range(pos)) + (len(names) - 2,) + tuple(range(pos, len(names) - 2)) + (len(names) - 1,)
    rows = names[perm[-2]]
    if all(uses(a.indices, rows) for a in reads):
        return
    # a matmul per group: the operand the rows leave invariant is a (k, columns) panel
    # (not a depthwise convolution's taps ``w(c, k)``)
    if not any(not uses(a.indices, rows) and uses(a.indices, j) and any(uses(a.indices, r) for r in red)
               for a in reads):
        return
    out.stmts[c.span] = perm


def _window(reads: list, d: str, red: set) -> bool:
    """Every read that uses ``d`` (one does) has it in one index, with a
    coefficient of 1 to 4, beside a reduction variable (``h + kh``,
    ``2 * v + kw``)."""
    using = [a for a in reads if uses(a.indices, d)]
    for a in using:
        idx = [e for e in a.indices if uses([e], d)]
        if len(idx) != 1 or not ({x.name for x in n.walk(idx[0]) if isinstance(x, n.IndexVar)} & red):
            return False
        if not strides.plus(idx[0], d, strides.SMALL_STRIDES):
            return False
    return bool(using)


def _unit_window(reads: list, d: str, later: list[str]) -> bool:
    """A window of width one (a 1x1 convolution ``x(n, c, h, v)`` for outputs
    ``y(n, o, h, v)``): every read that uses ``d`` (one does) has it alone in
    one index and uses the trailing indices after it too (which ``o``, read
    by the weight alone, does not)."""
    using = [a for a in reads if uses(a.indices, d)]
    return bool(using) and all(
        sum(uses([e], d) for e in a.indices) == 1 and any(isinstance(e, n.IndexVar) and e.name == d for e in a.indices)
        and all(uses(a.indices, x) for x in later) for a in using)


def _transpose_reads(st: n.Comprehension, tensor: str, dim: int, taken: set[str]):
    """(``st`` reading ``tensor`` from a copy with its dimension ``dim``
    last, the copy's statement); ``st`` as parsed."""
    name = _fresh(f"{tensor}_t", taken)
    copy = None

    def fn(x):
        nonlocal copy
        if isinstance(x, n.Call) and x.name == tensor and len(x.args) > dim:
            args = x.args[:dim] + x.args[dim + 1:] + (x.args[dim],)
            if copy is None:
                copy = n.Comprehension(name, args, "=", x, span=st.span)
            return replace(x, name=name, args=args)
        return None
    def walk(x):
        x = n.map_children(x, walk)
        out = fn(x)
        return x if out is None else out
    new = replace(st, rhs=walk(st.rhs))
    return new, copy
