"""Costly terms that do not depend on every index of their statement, computed once as a table.

Users write a term where the formula has it::

    y(b, t, d) = x(b, t, d) + (d % 2 == 0 ? sin(t * exp(-d * 9.21 / D)) : cos(t * exp(-(d - 1) * 9.21 / D)))

The positional encoding depends on ``t`` and ``d`` only, but the statement
computes its ``sin``, ``cos`` and ``exp`` for every ``b`` again (32 times at
B = 32: 45 ms against 17 ms for PyTorch building the table once per call).
``plan(checked, ranges)`` finds, in each ``=`` statement at the top of the
``def`` (outside sequential loops; plain distinct indices, no ``where``),
the largest subexpressions that call a costly function (:data:`COSTLY`) and
use some but not all of the statement's index variables, and no tensor the
statement writes.  ``rewrite(def, plan)`` computes each in a temporary over
the variables it uses (in the order of the written tensor's indices) right
before the statement, which reads it::

    y_tab(t, d) = (d % 2 == 0 ? sin(...) : cos(...)) where t in 0:T, d in 0:D
    y(b, t, d) = x(b, t, d) + y_tab(t, d)

A table of index arithmetic gets the ranges of the written tensor's
dimensions; one that reads tensors gets them from its reads (range
inference), which hold every element the statement reads.  The values are
those of the program as written, computed once.  Part of the ``factor``
option (``options={"factor": False}`` leaves programs as written).

A square root (:data:`ROOTS`) is one vector instruction, but a slow one: it
counts as costly where the term uses the written tensor's last index, which
is the vector loop (a batch norm over ``(N, C)`` features, ``y(n, c) = (x(n,
c) - mean(c)) * rsqrt(var(c) + 1e-5)``: a vector square root and division
per element, 3x torch's ``batch_norm`` at 256 x 1024); a term without that
index is hoisted out of the vector loop already (codegen/invariant.py: a
layer norm's ``rsqrt(var(n) + 1e-5)``).  A divisor with a square root
becomes a table of its reciprocal, which the statement multiplies by:
``(x(n, c) - mean(c)) / sqrt(var(c) + 1e-5)`` reads ``y_tab(c) = 1 / sqrt(...)``
(a difference of rounding only, as PyTorch's normalisations compute it).
So does any divisor that reads tensors and lacks some of the statement's
indices (:func:`_divisor`): a column scaling's ``x(n, c) / nrm(c)``, or a
Gaussian naive Bayes likelihood's ``jll(n, c) +=! ... / var(c, d)``, which
divided by the same ``var(c, d)`` for every row (1.8 -> 1.1 ms at (8192,
64, 20) on the Intel Xeon).

Index and weight arithmetic without a costly call is worth a table too where
there is enough of it (:func:`cost` at least :data:`ARITH_MIN` operations)
and it varies along the vector loop (the written tensor's last index; a term
without it is hoisted out of that loop already).  A ``grid_sample`` written
with ``where`` bindings::

    y(n, c, i, j) = (1 - ax) * (1 - ay) * x(n, c, r0, c0) + ...
      where fx = fmin(fmax((g(n, i, j, 0) + 1) * 0.5 * (W - 1), 0.0), W - 1.0),
            c0 = min(max(int32(floor(fx)), 0), W - 1), ax = fx - float(c0), ...

clamps and rounds the sampling grid and computes four bilinear weights from
(n, i, j) alone, for every channel again (5.6x PyTorch's ``grid_sample`` at
(8, 64, 64, 64)).  Each weight becomes a table over (n, i, j), and so does
``floor(fx)`` inside the subscripts (a float table: the subscript keeps its
clamp, which proves the read in bounds); the statement then loads the
weights and gathers its four reads in a vector loop over (i, j).  A table
of a term of a ``where`` binding carries the statement's bindings; the
statement's bindings read the tables.

A sum's costly term that does not use every index of the tensor it writes is
a table too, over the variables it uses (the written tensor's, in order, then
the reduction variables).  An RNN-T joint network::

    z(b, t, u, v) +=! tanh(e(b, t, k) + p(b, u, k)) * W(v, k)

computed its ``tanh`` for every output column ``v`` again (52x PyTorch's
``tanh`` then ``linear`` at (4, 64, 16, 256, 128)); with the table over
``(b, t, u, k)`` the sum is a product of two reads with register tiles.
A costly term of indices alone that uses a reduction variable, a DFT's
basis ``cos(6.2831853 * ((f * n) % N) / N)`` in ``re(b, t, f) +=! x(b, 160
* t + n) * win(n) * cos(...)``, is a table over (f, n) in the ranges the sum
infers (167 -> 2.8 ms for a power spectrogram at (8, 16000, 400), one
thread on the Intel Xeon).
A cheap clamp (:data:`CLAMPS`) of one tensor's element is such a term too:
an FFN's second product written with its ReLU inside,
``out(b, t, c) += fmax(f(b, t, u), 0) * W2(c, u)``, 5.2 -> 3.8 ms at
(8, 128, 256, 1024) on the Intel Xeon.
Float arithmetic on two or more reads at plain indices is such a term too
(:func:`_combined`), also under a select whose condition tests only the
term's own variables (a masked covariance's ``t < len(b) ? (x(b, t, i) -
mu(b, i)) * (x(b, t, j) - mu(b, j)) : 0``: the sum becomes a Gram matrix of
one table, 9.4-14.5 -> 4.6-5.8 ms at (16, 512, 256) on the Intel Xeon),
not under one that tests another (a scatter's ``dst(e) == v ? ...``).  Sums in a sequential loop's body (or a branch) get
their tables in that body, made at every step right before the sum: an RK4
stage of an MLP vector field, ``k1(b, d) +=! tanh(a1(b, f)) * W2(f, d)`` and
``a2(b, f) +=! (cur(b, d) + 0.05 * k1(b, d)) * W1(d, f)`` inside ``for s``,
computed its ``tanh`` for every ``d`` and the argument for every ``f``
again: 68 -> 15 ms at (B, D, F, S) = (256, 64, 256, 50), 3.7x -> 0.7x a
PyTorch loop on the Intel Xeon.  An element-wise statement in a loop keeps
its terms: a step of element-wise statements runs the loop inside each
element, and a table of another shape in the step would stop that (RWKV's
recurrence: 1.5 -> 15 ms).

A term with a libm call that has no vector form (:data:`SCALAR_CALLS`,
``fmod``) used several times -- a ``where`` binding's, one node per use --
is a table over every index of its statement: a phased LSTM's gate
``kg(b, j) = phi < 0.5 * r_on ? 2 * phi / r_on : ... where phi = fmod(ts(b,
t) - shift(j), tau(j)) / tau(j)`` made five ``fmod`` calls per element
(1.6x a PyTorch loop with one thread), one now.

Such a table takes the ranges of its reduction variables from the
statement's ``where`` clauses and from its reads; :func:`kept` drops the
rewrite when the new program may read anything out of bounds that the
original did not (a term under a select on an index the table does not
have would be computed where the program never reads it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..errors import InternalError
from ..syntax import nodes as n
from ..syntax.printer import expr_to_tc, stmt_to_tc
from . import scatter
from .hoist import same_points

# Functions whose evaluation costs more than a table's store and load.
COSTLY = frozenset({
    "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "sinh", "cosh",
    "tanh", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "pow",
    "sinpi", "cospi", "lgamma", "tgamma", "cbrt",
})
# libm calls that have no vector form (one call per lane): a term with one,
# used several times (a ``where`` binding's), is a table even over every
# index of its statement, computed once per element instead of once per use.
SCALAR_CALLS = frozenset({"fmod", "fdim", "fma", "hypot", "lgamma", "tgamma", "cbrt", "erfc", "exp10", "atanh",
                          "cosh", "sinh", "j0", "j1", "logb"})
# Costly only along the vector loop (see above).
ROOTS = frozenset({"sqrt", "rsqrt"})
# A term of plain arithmetic is a table from this many operations on (a
# table costs a store and a load per element of it, and a load per use).
ARITH_MIN = 8
# NaN-propagating minimum and maximum: a comparison, two NaN tests, selects.
_DEAR = {"fmin": 4, "fmax": 4}
# Cheap functions (a ReLU, a clamp) worth a table inside a sum only: of a
# tensor's element, applied once per term for every skipped index again,
# they keep the sum from being a plain product of two reads in register tiles.
CLAMPS = frozenset({"fmax", "fmin", "fabs", "max", "min"})


@dataclass(frozen=True)
class Table:
    span: object  # of the subexpression (parsed and checked forms share it)
    dims: tuple[str, ...]  # its index variables, in the written tensor's order
    extents: tuple  # size expressions (parsed form) of those, or None: from the reads
    reciprocal: bool = False  # a divisor: the table holds 1 / it, the quotient becomes a product
    text: str | None = None  # the subexpression as TC source: another node with its span is not it
    bounds: tuple = ()  # ``where`` clauses of its variables (a sum's term without reads: the sum's ranges)


def cost(e: n.Expr) -> int:
    """Operations per evaluation of ``e``, roughly (a costly call counts as
    many as :data:`ARITH_MIN`, a division as four)."""
    own = 0
    if isinstance(e, n.BuiltinCall):
        own = ARITH_MIN if e.name in COSTLY else _DEAR.get(e.name, 1)
    elif isinstance(e, n.Binary):
        own = 4 if e.op in ("/", "%") else 1
    elif isinstance(e, n.Select):
        own = 2
    elif isinstance(e, (n.Unary, n.Cast, n.Access)):
        own = 1
    return own + sum(cost(c) for c in n.children(e) if isinstance(c, n.Expr))


def _of_one_element(e: n.Expr, used: set[str]) -> bool:
    """``e`` reads a tensor at plain index variables that are all of
    ``used``: its table is no larger than that read (``fmax(f(b, t, u), 0)``,
    not a clamp of a window ``x(b, c, t + k)``, whose table would hold each
    element once per ``k``)."""
    return any(isinstance(a, n.Access) and all(isinstance(i, n.IndexVar) for i in a.indices)
               and {i.name for i in a.indices} == used for a in n.walk(e))


def _combined(e: n.Expr) -> bool:
    """``e`` is float arithmetic on two or more reads, each at plain index
    variables (``cur(b, d) + 0.05 * k1(b, d)``, an RK4 stage's argument in
    ``a2(b, f) +=! (cur(b, d) + 0.05 * k1(b, d)) * W1(d, f)``): in a sum it is
    computed for every skipped index again and keeps the sum from being a
    product of two reads; its table is no larger than its reads."""
    if not isinstance(e, (n.Binary, n.Unary)) or not (e.dtype or "").startswith("float"):
        return False
    if isinstance(e, n.Binary) and e.op not in ("+", "-", "*", "/"):
        return False
    acc = [a for a in n.walk(e) if isinstance(a, n.Access)]
    return len(acc) >= 2 and all(isinstance(i, n.IndexVar) for a in acc for i in a.indices) and not any(
        isinstance(x, (n.Select, n.Call)) for x in n.walk(e))


def _divisor(e: n.Expr, written: str, loops: frozenset, fewer) -> bool:
    """``e`` divides by a float term that reads tensors (not ``written``) and
    whose index variables ``u`` satisfy ``fewer(u)`` (some of the
    statement's are missing): ``jll(n, c) +=! ... / var(c, d)`` divides by
    the same ``var(c, d)`` for every ``n``.  A vector division costs as much
    as ten products; the divisor becomes a table of its reciprocal (a
    difference of rounding only, as for a square root's)."""
    if not (isinstance(e, n.Binary) and e.op == "/" and (e.dtype or "").startswith("float")):
        return False
    r = e.rhs
    used = {x.name for x in n.walk(r) if isinstance(x, n.IndexVar)} - loops
    reads = {x.tensor for x in n.walk(r) if isinstance(x, n.Access)}
    return bool(used and reads and written not in reads and r.span is not None
                and (r.dtype or "").startswith("float") and fewer(used))


def plan(checked, ranges) -> dict[object, list[Table]]:
    """Statement span -> the tables its right side's costly terms become."""
    from .hoist import _parsed

    out: dict[object, list[Table]] = {}
    for s, outer in n.comprehensions_in_loops(checked.node.body):
        loops = frozenset(outer)
        if s.span is None:
            continue
        if s.op == "=" and not all(isinstance(w, n.RangeConstraint) for w in s.wheres):
            continue
        reduced = s.op != "="
        if loops and not reduced:
            # (an element-wise step stays as written: its statements run the
            # steps inside each element (RWKV's recurrence, 1.5 ms), which a
            # table of another shape in the step would stop (15 ms))
            continue
        if reduced and not all(isinstance(w, (n.RangeConstraint, n.Let)) for w in s.wheres):
            continue
        idx = [x.name for x in s.indices if isinstance(x, n.IndexVar)]
        if len(idx) != len(s.indices) or len(set(idx)) != len(idx):
            continue
        idx = [v for v in idx if v not in loops]  # (a step's slice: the table is made at each step)
        if len(idx) < (1 if reduced else 2):
            continue
        if not checked.tensors[s.tensor].dtype.startswith("float"):
            continue
        found: list[tuple[n.Expr, bool]] = []  # (term, a divisor with a square root)
        domain = set(idx) | set(s.reduction_vars)
        repeats: dict = {}  # span -> uses (a ``where`` binding's term is one node per use, with one span)
        for x in n.walk(s.rhs):
            if isinstance(x, n.Expr) and x.span is not None:
                repeats[x.span] = repeats.get(x.span, 0) + 1

        def reciprocal_of(d: n.Expr) -> None:
            if all(f.span != d.span for f, _ in found):
                found.append((d, True))

        def visit(e: n.Expr, divisor: bool = False, guarded: bool | frozenset = False) -> None:
            used = {x.name for x in n.walk(e) if isinstance(x, n.IndexVar)} - loops
            if isinstance(guarded, frozenset):  # under selects whose conditions use only these variables
                guarded = not guarded <= used
            reads = {x.tensor for x in n.walk(e) if isinstance(x, n.Access)}
            calls = {x.name for x in n.walk(e) if isinstance(x, n.BuiltinCall)}
            if reduced:  # a sum's costly term that is the same for some of its written indices
                # (plain arithmetic under a select stays: the select may pick few
                # terms, a scatter's ``dst(e) == v ? x(src(e), d) * w(e) : 0``)
                combined = _combined(e) and e is not s.rhs and not guarded
                # (a costly term of indices alone, a DFT's ``cos(2 * pi * ((f * n) % N) / N)``,
                # too: a table over (f, n) in the sum's ranges, not a cos per (b, t, f, n))
                own = reads or calls & COSTLY and used & set(s.reduction_vars)
                if (calls & COSTLY or calls & CLAMPS and _of_one_element(e, used) or combined) and own \
                        and s.tensor not in reads and e.span is not None and used < domain and set(idx) - used:
                    if all(f.span != e.span for f, _ in found):
                        found.append((e, False))
                    return
                if not guarded and _divisor(e, s.tensor, loops, lambda u: u < domain and set(idx) - u):
                    reciprocal_of(e.rhs)
                    visit(e.lhs, guarded=guarded)
                    return
                if isinstance(e, n.Select) and guarded is not True:
                    # a select on variables the term has (a mask ``t < len(b)`` around
                    # ``(x(b, t, i) - mu(b, i)) * (x(b, t, j) - mu(b, j))``) picks the same
                    # elements of its table for every skipped index: no fewer to compute
                    cond = frozenset(x.name for x in n.walk(e.cond) if isinstance(x, n.IndexVar)) - loops
                    visit(e.cond, guarded=True)
                    for c in (e.then, e.other):
                        visit(c, guarded=cond | (guarded or frozenset()))
                    return
                for c in n.children(e):
                    if isinstance(c, n.Expr):
                        visit(c, guarded=guarded or isinstance(e, n.Select))
                return
            if _divisor(e, s.tensor, loops, lambda u: u < set(idx) and idx[-1] in u):
                reciprocal_of(e.rhs)
                visit(e.lhs)
                return
            if used == set(idx) and calls & SCALAR_CALLS and e.span is not None and repeats.get(e.span, 0) > 1 \
                    and not reads & {s.tensor}:
                if all(f.span != e.span for f, _ in found):
                    found.append((e, False))
                return
            roots = bool(calls & ROOTS) and idx[-1] in used
            heavy = idx[-1] in used and cost(e) >= ARITH_MIN
            spread = any(_spread(x, idx[-1]) for x in n.walk(e))
            if not (calls & COSTLY or roots or heavy or spread):
                return
            # (a subscript's integer arithmetic stays: its clamps prove the read in bounds)
            arith = heavy and (e.dtype or "").startswith("float")
            if used and used < set(idx) and not reads & {s.tensor} and e.span is not None and (
                    calls & COSTLY or roots or arith or _spread(e, idx[-1])):
                if all(f.span != e.span for f, _ in found):
                    found.append((e, divisor and roots))
                return
            if isinstance(e, n.Binary) and e.op == "/":
                visit(e.lhs)
                visit(e.rhs, divisor=True)
                return
            for c in n.children(e):
                if isinstance(c, n.Expr):
                    visit(c)

        visit(s.rhs)
        picks = scatter.picked(ranges, s) if found else frozenset()
        # (a scatter's term that uses a picked variable runs once per term of
        # the sum, where the pick holds: its table would hold every value of it)
        found = [(e, r) for e, r in found if not picks & {x.name for x in n.walk(e) if isinstance(x, n.IndexVar)}]
        if not found:
            continue
        dims_all = ranges.extent_exprs(s.tensor)
        lhs = [x.name for x in s.indices]
        tables = []
        order = idx + [v for v in s.reduction_vars if v not in idx]
        for e, reciprocal in found:
            used = {x.name for x in n.walk(e) if isinstance(x, n.IndexVar)} - loops
            dims = _read_order(e, tuple(v for v in order if v in used), set(s.reduction_vars))
            reads = any(isinstance(x, n.Access) for x in n.walk(e))
            if not reads and set(dims) - set(lhs):  # (the sum's own variables: their inferred ranges)
                if idx[-1] in dims:  # read along the vector loop, as a product's right side: that index last
                    dims = tuple(v for v in dims if v not in idx) + tuple(v for v in dims if v in idx)
                st = next((st for st in ranges.stmts if st.comp.span == s.span and st.comp.tensor == s.tensor), None)
                if st is not None and set(dims) <= set(st.ranges):
                    tables.append(Table(e.span, dims, None, reciprocal, _text(e), st.where_ranges(dims)))
                continue
            extents = None if reads else tuple(_parsed(dims_all[lhs.index(v)], {}, checked.derived) for v in dims)
            tables.append(Table(e.span, dims, extents, reciprocal, _text(e)))
        out[s.span] = tables
    return out


def rewrite(d: n.Def, p: dict[object, list[Table]]) -> n.Def:
    """``d`` (as parsed) with the tables of ``p`` before the statements that
    read them (in the same loop body or branch)."""
    from .layout import _names

    taken = _names(d) | {c.tensor for c in n.walk(d) if isinstance(c, n.Comprehension)}
    return replace(d, body=_block(d.body, p, taken))


def _block(stmts, p: dict[object, list[Table]], taken: set[str]) -> tuple:
    from .layout import _fresh

    body: list = []
    for st in stmts:
        if isinstance(st, n.For):
            body.append(replace(st, body=_block(st.body, p, taken)))
            continue
        if isinstance(st, n.If):
            body.append(replace(st, then=_block(st.then, p, taken), orelse=_block(st.orelse, p, taken)))
            continue
        tables = p.get(st.span) if isinstance(st, n.Comprehension) else None
        if not tables:
            body.append(st)
            continue
        by_span, made, emitted = {}, {}, set()
        for t in tables:
            name = _fresh(f"{st.tensor}_tab", taken)
            by_span[t.span] = (name, t)

        def fn(e):
            if isinstance(e, n.Binary) and e.op == "/":
                hit = by_span.get(getattr(e.rhs, "span", None))
                if hit is not None and hit[1].reciprocal and not isinstance(e.rhs, n.Ident):
                    rhs = fn(e.rhs)  # the table of 1 / rhs, where its term is the one planned
                    if isinstance(rhs, n.Call) and rhs.name in {name for name, _ in by_span.values()} | set(made.values()):
                        return n.Binary("*", fn(e.lhs), rhs, span=e.span)
                    return n.Binary("/", fn(e.lhs), rhs, span=e.span)
            hit = by_span.get(getattr(e, "span", None)) if isinstance(e, n.Expr) else None
            if hit is not None and not isinstance(e, n.Ident) and hit[1].text is not None \
                    and _text(n.expand_lets(e, lets)) == hit[1].text:
                name, t = hit
                idx = tuple(n.Ident(v, span=e.span) for v in t.dims)
                wheres = t.bounds or tuple(w for w in st.wheres if isinstance(w, n.RangeConstraint) and w.var in t.dims) \
                    if t.extents is None else tuple(
                    n.RangeConstraint(v, n.Const(0, span=e.span), x, span=e.span) for v, x in zip(t.dims, t.extents))
                value = n.Binary("/", n.Const(1.0, span=e.span), e, span=e.span) if t.reciprocal else e
                # the same term at other indices (a covariance's X(n, i) - m(i)
                # and X(n, j) - m(j)): one table, read at each one's indices
                key = _renamed(stmt_to_tc(n.Comprehension("_", idx, "=", value, wheres + lets)), t.dims)
                name = made.setdefault(key, name)
                if name == hit[0] and name not in emitted:  # (a binding's term, once for all its uses)
                    emitted.add(name)
                    body.append(n.Comprehension(name, idx, "=", value, wheres + lets, span=e.span))
                return n.Call(name, idx, span=e.span)
            return n.map_children(e, fn)

        lets = tuple(w for w in st.wheres if isinstance(w, n.Let))  # as written: a table computes its term
        wheres = tuple(replace(w, expr=fn(w.expr)) if isinstance(w, n.Let) else w for w in st.wheres)
        body.append(replace(st, rhs=fn(st.rhs), wheres=wheres))
    return tuple(body)


def _read_order(e: n.Expr, dims: tuple[str, ...], reduction: set[str]) -> tuple[str, ...]:
    """``dims`` of a sum's table that has reduction variables, in the order
    its term's reads have them: the variables nearer the last index of the
    reads inner (a centered covariance's ``X(n, i) - m(i)``: ``(n, i)``, read
    along ``i`` as ``X`` is, not ``(i, n)``, whose columns ``j`` of the
    product ``tab(i, n) * tab(j, n)`` are a row apart)."""
    if not reduction & set(dims):
        return dims
    depth = {}
    for a in n.walk(e):
        if isinstance(a, n.Access) and len(a.indices) >= 2:
            for p, x in enumerate(a.indices):
                for v in n.walk(x):
                    if isinstance(v, n.IndexVar) and v.name in dims:
                        depth[v.name] = min(depth.get(v.name, len(a.indices)), len(a.indices) - 1 - p)
    return tuple(sorted(dims, key=lambda v: -depth.get(v, len(dims))))


def _spread(e: n.Expr, v: str) -> bool:
    """``e`` reads a tensor at ``v / K`` in its last index (``cs(t, d / 2)``
    of an interleaved rotary embedding): along the vector loop over ``v``
    its lanes repeat each element ``K`` times, a gather; a table over the
    statement's indices it uses reads them as one vector."""
    if not isinstance(e, n.Access) or not e.indices:
        return False
    last = e.indices[-1]
    return isinstance(last, n.Binary) and last.op == "/" and isinstance(last.lhs, n.IndexVar) \
        and last.lhs.name == v and isinstance(last.rhs, n.Const) and isinstance(last.rhs.value, int) \
        and last.rhs.value >= 2 and e.dtype is not None and e.dtype.startswith("float")


def _text(e: n.Expr) -> str | None:
    """``e`` as TC text, the same for the checked and the parsed program (a
    scalar input is ``Access(tau, ())`` in one, ``tau`` in the other)."""
    def plain(x):
        if isinstance(x, n.Access) and not x.indices:
            return n.Ident(x.tensor, span=x.span)
        return n.map_children(x, lambda y: plain(y) if isinstance(y, n.Expr) else y)
    try:
        return expr_to_tc(plain(e))
    except InternalError:  # (a node the printer does not know: matches nothing, no table)
        return None


def _renamed(text: str, dims: tuple[str, ...]) -> str:
    """``text`` with the index variables ``dims`` (not tensors or functions
    of those names) named by their positions."""
    for k, v in enumerate(dims):
        text = re.sub(rf"(?<![\w.]){re.escape(v)}(?![\w(])", f"@{k}", text)
    return text


def kept(old, new, model, plan) -> bool:
    """Whether the rewritten program reads nothing out of bounds that the
    original did not (a sum's table over its reduction variables takes their
    ranges from its reads and ``where`` clauses: a read of the table outside
    it, or a read of the table's own that the original made only under a
    select, is not kept)."""
    from .bounds import reads_as_before

    return reads_as_before(old, new, model) and same_points(old, new, inits=False)
