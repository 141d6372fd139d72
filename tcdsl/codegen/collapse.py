"""Two perfectly nested parallel loops run as one loop over their product.

A contraction over a batch of sequences, ``y(t, b, j) +=! x(t, b, i) *
W(i, j)`` -- an RNN's input projection once hoisted out of its time loop
(polyhedral/hoist.py), a linear layer applied to every position -- has two
parallel loops ``t`` and ``b`` above its reduction.  The CPU mapping
(codegen/cpu.py) cuts the outermost parallel loop into chunks of rows and
gives the rows register tiles; with ``t`` as the rows each row is a loop
over ``b``, tiled on its own: at batch 1 no tile is full, and a right-hand
panel is copied once per ``t``.  Seen as one loop over ``r = t * B + b``
the kernel is one matrix product with ``T * B`` rows (10x faster at batch
1, 2.8x at batch 32 for the Elman RNN's projection, measured against the
same program written over ``r``).

:func:`collapse` allows it when the outer loop's body is the inner parallel
loop alone, both start at 0, the inner loop's extent does not depend on the
outer variable, and the two variables occur nowhere but as two adjacent
indices ``(.., t, b, ..)`` of tensors whose dimension of ``b`` has exactly
the inner loop's extent: each such tensor is then read through a view with
those two dimensions merged (:class:`~tcdsl.codegen.expr.Merged`), indexed
by the collapsed row, and ``b`` is bound to 0.

The same holds below the outermost loop, for a parallel loop and the one
it consists of above register tiles (``CpuAstLowering._for``): a 1x1
convolution on narrow feature maps, summed as ``y_p(n, h, v, o)``
(polyhedral/permute.py), takes its tiles' rows from ``(h, v)``, 49 of them
at 7 x 7, not 7 from ``v`` (in the symbolic kernel the temporary's shape
depends on the branch: the arm of the branch that uses it is compared).

The same holds for the two innermost loops of a nest (``CpuAstLowering``'s
``_pair``, codegen/cpu.py): both parallel, ``y(n, c, h, v) = ...`` with
``v`` of 14 or 28 steps is one vector loop over ``H * W`` instead of ``H``
loops each of a vector tail; both reductions, the mean over a feature map,
``y(n, c) +=! x(n, c, h, v)``, is one vector reduction over ``H * W``
elements (the global average pool of benchmarks/programs.py, 32x256x14x14:
0.61 -> 0.23 ms on the project's Intel Xeon, docs/internals.md).
"""
from __future__ import annotations

import contextlib
import functools

import islpy as isl
import tvm
import tvm_ffi
from tvm import sym, tirx

from ..polyhedral import isl_ast
from ..polyhedral.isl_ast import NT, iterator, strip_marks
from ..polyhedral.schedule import PARALLEL
from .expr import INDEX, Folded, Merged, Partial, dtype_of, wide_indices
from .lower import has_node, is_if_then_else, uses

_LOAD = type(tirx.decl_buffer((1,), "float32", name="probe")[0])


def collapse(low, node: isl.AstNode, name: str, init: tirx.PrimExpr, marks: tuple = (PARALLEL,)):
    """(the inner loop's body, its iterator, its extent, {tensor: Merged}) when
    the loop ``node`` (iterator ``name``, first value ``init``) and the loop
    it consists of, marked one of ``marks`` (parallel by default), run as one
    loop; else None."""
    inner, mark = strip_marks(node.for_get_body())
    if mark not in marks or inner.get_type() != NT.for_ or not _zero(init) or low.loop_step(inner) != 1:
        return None
    iname = iterator(inner)
    if name in isl_ast.ids(inner.for_get_init()) or name in isl_ast.ids(inner.for_get_cond()):
        return None
    init1, ext1 = low.loop_range(inner)
    if not _zero(init1):
        return None
    v0, v1 = tirx.Var(name + "_p", INDEX), tirx.Var(iname + "_p", INDEX)
    with low.bound({name: v0, iname: v1}):
        tir = low.node(inner.for_get_body(), False, None)
    pairs: dict[str, int] = {}
    if not _only_as_pairs(tir, v0, v1, pairs) or not pairs:
        return None
    buffers = {**low.gen.sig.buffers, **low.buffer_override}
    an = sym.Analyzer()
    merged = {}
    for tensor, d in pairs.items():
        buf = buffers.get(tensor)
        if buf is None or isinstance(buf, (Folded, Merged, Partial)) or not _same_extent(an, buf.shape[d + 1], ext1):
            return None
        shape = list(buf.shape)
        view = tirx.decl_buffer(shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:], buf.dtype,
                                name=tensor + "_rows", data=buf.data)
        merged[tensor] = Merged(buf, view, d)
    return inner.for_get_body(), iname, ext1, merged


@contextlib.contextmanager
def merged_rows(low, views: dict, inner: str):
    """While the collapsed loop's body is lowered: the tensors of ``views``
    read through them, the inner loop's variable ``inner`` bound to 0."""
    saved = low.buffer_override
    low.buffer_override = {**saved, **views}
    try:
        with low.bound({inner: tirx.const(0, INDEX)}):
            yield
    finally:
        low.buffer_override = saved


def divide(low, node: isl.AstNode, name: str, init: tirx.PrimExpr):
    """(the inner loop's body, the row's name, the number of rows, the rules
    binding the two iterators from the row) when the parallel loop ``node``
    (iterator ``name``, first value ``init``) and the parallel loop it
    consists of may run as one loop over rows ``r``, ``name = r // E`` and
    the inner iterator ``r % E`` (``E`` its extent), whatever tensors they
    index and however: both start at 0 with step 1, the inner loop's bounds
    do not move with ``name``, and no loop bound or condition below moves
    with either (the register tiles' checks on the rows see neither
    iterator).  Else None."""
    inner, mark = strip_marks(node.for_get_body())
    if mark != PARALLEL or inner.get_type() != NT.for_ or not _zero(init) or low.loop_step(inner) != 1:
        return None
    iname = iterator(inner)
    if name in isl_ast.loop_ids(inner):
        return None
    init1, ext1 = low.loop_range(inner)
    _, ext0 = low.loop_range(node)
    if not _zero(init1) or _bounds_use(inner.for_get_body(), {name, iname}):
        return None
    # the rows run through the iterator that more reads have in their last
    # index fastest (a convolution's ``x(n, c, h + kh, v + kw)``: v, the rows
    # of a tile then read neighbouring elements), else through the inner one.
    # C division: the rows are never negative, and TVM lowers a floordiv by a
    # size through a Let, which an unrolled register tile cannot bind twice
    # (lower.unroll_unsafe)
    v0, v1 = tirx.Var(name + "_p", INDEX), tirx.Var(iname + "_p", INDEX)
    with low.bound({name: v0, iname: v1}):
        tir = low.node(inner.for_get_body(), False, None)
    found: list = []
    has_node(tir, lambda x: isinstance(x, _LOAD) and bool(found.append(x)))  # (every load of the body)
    last = [list(ld.indices)[-1] for ld in found if len(ld.indices)]
    if sum(uses(x, v0) for x in last) > sum(uses(x, v1) for x in last):
        every = tirx.max(ext0, 1)  # (no row runs where a loop has no step)
        rules = [(name, lambda r: tirx.truncmod(r, every)), (iname, lambda r: tirx.truncdiv(r, every))]
    else:
        every = tirx.max(ext1, 1)
        rules = [(name, lambda r: tirx.truncdiv(r, every)), (iname, lambda r: tirx.truncmod(r, every))]
    return inner.for_get_body(), f"{name}_{iname}", tirx.max(ext0, 0) * tirx.max(ext1, 0), rules


@contextlib.contextmanager
def divided_rows(low, row: str, rules: list):
    """While the divided loops' body is lowered: binding ``row`` binds the two
    iterators by ``rules`` (:func:`divide`, ``AstLowering.derived``)."""
    saved = low.derived
    low.derived = {**saved, row: rules}
    try:
        yield
    finally:
        low.derived = saved


def _bounds_use(node: isl.AstNode, names: set[str]) -> bool:
    """Some loop bound or condition in ``node`` uses one of ``names``."""
    node, _ = strip_marks(node)
    t = node.get_type()
    if t == NT.for_:
        return bool(isl_ast.loop_ids(node) & names) or _bounds_use(node.for_get_body(), names)
    if t == NT.if_:
        return bool(isl_ast.ids(node.if_get_cond()) & names) or _bounds_use(node.if_get_then_node(), names) or (
            node.if_has_else_node() and _bounds_use(node.if_get_else_node(), names))
    if t == NT.block:
        return any(_bounds_use(x, names) for x in isl_ast.children(node))
    return False


def declarations(merged: dict) -> list[tirx.Stmt]:
    return [tirx.DeclBuffer(m.view, data=m.tensor.data) for m in merged.values()]


def _same_extent(an: sym.Analyzer, dim: tirx.PrimExpr, ext: tirx.PrimExpr) -> bool:
    """A tensor's dimension ``dim`` has the loop's extent ``ext`` wherever the
    loop runs.  A temporary that only one branch of the kernel uses has a
    shape that is zero in the others (``max(if_then_else(W >= 16, 0, W),
    0)``, polyhedral/permute.py): the loop reads it, so it runs in the branch
    where the shape is its other arm, and that arm is compared."""
    if an.can_prove_equal(dim, ext) or an.can_prove_equal(dim, tirx.max(ext, 0)):
        return True  # (a loop of no steps reads nothing: ``max(U + 1, 0)`` is ``U + 1`` where it runs)
    live = _live_arm(dim)
    return live is not None and an.can_prove_equal(tirx.max(live, 0), tirx.max(ext, 0))


def _live_arm(e):
    """``X`` of ``max(if_then_else(c, 0, X), 0)`` or ``if_then_else(c, X, 0)``
    (either arm zero, the max optional); else None."""
    if isinstance(e, tirx.Max) and _zero(e.b):
        e = e.a
    if isinstance(e, tirx.Select):
        a, b = e.true_value, e.false_value
    elif is_if_then_else(e):
        _, a, b = e.args
    else:
        return None
    return b if _zero(a) else a if _zero(b) else None


def _zero(x) -> bool:
    return isinstance(x, tirx.IntImm) and x.value == 0


def _only_as_pairs(root, v0: tirx.Var, v1: tirx.Var, pairs: dict) -> bool:
    """``v0`` and ``v1`` occur in ``root`` only as indices ``d`` and ``d + 1``
    of loads and stores (``pairs``: buffer name -> ``d``, one ``d`` per
    buffer), and every access of such a buffer has them there (its view
    serves all of its accesses)."""
    ok = True
    unpaired: set[str] = set()  # buffers also accessed without the pair (X(k, 0) beside X(t, b))

    def pair(buffer_name: str, indices) -> list:
        nonlocal ok
        idx = list(indices)
        for d in range(len(idx) - 1):
            if idx[d].same_as(v0) and idx[d + 1].same_as(v1):
                if pairs.setdefault(buffer_name, d) != d:
                    ok = False
                return idx[:d] + idx[d + 2:]
        unpaired.add(buffer_name)
        return idx

    def walk(x) -> None:
        nonlocal ok
        if not ok or x is None:
            return
        if isinstance(x, tirx.Var):
            if x.same_as(v0) or x.same_as(v1):
                ok = False
            return
        if isinstance(x, _LOAD):
            for i in pair(x.source.name, x.indices):
                walk(i)
            return
        if isinstance(x, tirx.BufferStore):
            for i in pair(x.buffer.name, x.indices):
                walk(i)
            walk(x.value)
            return
        for f in ("a", "b", "value", "condition", "true_value", "false_value", "body", "then_case", "else_case",
                  "min", "extent"):
            y = getattr(x, f, None)
            if y is not None and not isinstance(y, (int, float, str)):
                walk(y)
        for f in ("args", "seq", "indices"):
            for y in getattr(x, f, None) or ():
                walk(y)

    walk(root)
    return ok and not unpaired & set(pairs)


def one_run(value: tirx.PrimExpr, steps: list[tirx.Var], extents: list[tirx.PrimExpr]) -> bool:
    """A register tile's reduction loops (outer to inner; ``steps`` their
    values, ``extents`` their numbers of iterations) may run as one loop
    over the product of their extents, the innermost variable counting on
    and the others staying at their first values: every use of the variables
    in ``value`` (the tile's update) is in the flat offset of a load, linear
    in them, and each one's coefficient is the next one's times the next
    loop's extent.  A convolution's channel and tap loops over its packed
    panel ``x_panel((c * K + k) * 24 + j)`` and its weights ``w(o, c, k)``:
    one loop of ``C * K`` steps instead of ``C`` loops of ``K`` (5) steps,
    each with its own entry and exit.  The order of the sum is the same."""
    if len(steps) < 2 or not all(isinstance(v, tirx.Var) for v in steps):
        return False
    found = []

    def offsets(x) -> bool:  # the flat offsets of the loads; False where a step is used elsewhere
        if isinstance(x, _LOAD):
            flat = x.source.offset_of([_narrow(i) for i in x.indices])
            if len(flat) != 1:
                return False
            found.append(flat[0])
            return True
        if isinstance(x, tirx.Var):
            return not any(x.same_as(v) for v in steps)
        kids = [getattr(x, f, None) for f in ("a", "b", "value", "condition", "true_value", "false_value")]
        kids += list(getattr(x, "args", None) or ())
        if isinstance(x, tirx.Let):
            kids += [x.body]
        return all(offsets(y) for y in kids if isinstance(y, tvm.ir.expr.Expr))

    if not offsets(value) or not found:
        return False
    an = sym.Analyzer()
    with contextlib.ExitStack() as scopes:
        # (where an inner loop has no step, neither form runs a step)
        for e in extents[1:]:
            scopes.enter_context(an.constraint_scope(e >= 1))
            if isinstance(e, tirx.Max) and _zero(e.b):  # max(K, 0) >= 1: K >= 1
                scopes.enter_context(an.constraint_scope(e.a >= 1))
        for off in found:
            coeffs = sym.detect_linear_equation(off, list(steps))
            if len(coeffs) != len(steps) + 1:
                return False
            for i in range(len(steps) - 1):
                if not an.can_prove(coeffs[i] == coeffs[i + 1] * extents[i + 1]):
                    return False
    return True


def _narrow(e):
    """``e`` without its widening casts of integers (an index cast to 64 bits,
    ``int64(c)``): the values are the same, and linear in the variables."""
    def strip(x):
        wide, narrow = dtype_of(x), dtype_of(x.value)
        if wide.startswith("int") and narrow.startswith("int") and int(wide[3:]) >= int(narrow[3:]):
            return x.value
        return x
    return tvm_ffi.structural_map(e, [(tirx.Cast, strip)])


def run_as_one(tile, i: int, innermost, ks=None) -> tirx.Stmt | None:
    """The reduction loops ``tile.chain[i:]`` of a register tile
    (codegen/cpu_tiles.py, ``_Tile``) as one loop around ``innermost()``
    when :func:`one_run` allows it, else None; ``ks`` as in ``_Tile._nest``."""
    from .panels import sliding_window

    low, rest = tile.low, tile.chain[i:]
    names = [iterator(x) for x in rest]
    if any(set(names[:j + 1]) & isl_ast.loop_ids(x) for j, x in enumerate(rest[1:])):
        return None
    wide = sliding_window(low, tile.chain, tile.call, tile.row, tile.j_name)  # (as _nest's innermost loop)
    firsts, exts = [], []
    for x in rest:
        init, ext = low.loop_range(x)
        if ks is not None and iterator(x) == ks[0]:
            init, ext = init + ks[1], ks[2]
        firsts.append(init)
        exts.append(tirx.max(ext, 0))
    fixed = [tile.row, tile.j_name] + ([tile.depth[0]] if tile.depth else [])
    probe = {x: tirx.Var(x + "_p", INDEX) for x in names + fixed}
    with low.bound(probe), wide_indices(wide):
        _, _, value, _ = low.statement_parts(tile.call)
    if not one_run(value, [probe[x] for x in names], exts):
        return None
    q = tirx.Var(names[-1] + "_q", INDEX)
    with low.bound({**dict(zip(names[:-1], firsts[:-1])), names[-1]: firsts[-1] + q}), wide_indices(wide):
        body = innermost()
    return tirx.For(q, 0, functools.reduce(lambda a, b: a * b, exts), tirx.ForKind.SERIAL, body)


def parallel_pair(low, node: isl.AstNode, name: str, init, extent, rows) -> tirx.Stmt | None:
    """The outermost parallel loop ``node`` and the parallel loop that is its
    whole body, above nests of their own (a batch and its heads, the loops
    attention's nests share: polyhedral/schedule_batch.py), as one parallel
    loop over their pairs; None otherwise.  At batch 1 the batch loop alone
    ran every head's nests on one core.  Only above nests of two loops or
    more (a loop of vectors inside stays one, or a pair of adjacent indices:
    ``_pair``), not where the inner loop's iterations are a register tile's
    rows (``rows``: the CPU's ChunkedLoop), alone or with the loop inside it
    (a 1x1 convolution's ``h, v``), nor where its range moves with ``node``."""
    inner, mark = strip_marks(node.for_get_body())
    nest = lambda x: isl_ast.is_loop(x) and isl_ast.has(x.for_get_body(), isl_ast.is_loop)  # noqa: E731
    if inner.get_type() != NT.for_ or mark != PARALLEL or low.loop_step(inner) != 1 \
            or not isl_ast.has(inner.for_get_body(), nest):
        return None
    probe = tirx.Var(name + "_p", INDEX)
    with low.bound({name: probe}):
        i_init, i_extent = low.loop_range(inner)
        if _rows(low, inner, i_init, rows):  # (its iterations are a register tile's rows: it stays that)
            return None
    if uses(i_init, probe) or uses(i_extent, probe):
        return None
    r, n_in = tirx.Var(name + "_pair", INDEX), tirx.max(i_extent, 0)
    outer_v, inner_v = tirx.Var(name, INDEX), tirx.Var(iterator(inner), INDEX)
    with low.bound({name: outer_v}):
        body = low.body_with(inner, iterator(inner), inner_v, False)
    bind = [tirx.Bind(outer_v, init + tirx.floordiv(r, n_in)), tirx.Bind(inner_v, i_init + tirx.floormod(r, n_in))]
    return tirx.For(r, 0, tirx.max(extent, 0) * n_in, tirx.ForKind.PARALLEL, tirx.SeqStmt(bind + [body]))


def _rows(low, node: isl.AstNode, init, rows) -> bool:
    """The loop ``node`` runs a register tile's rows, alone or with the loop
    it consists of (cpu.py, ``_for``: ``collapse``, ``divide``)."""
    name = iterator(node)
    merged = collapse(low, node, name, init)
    if merged is not None:
        inner_body, inner, _, views = merged
        with merged_rows(low, views, inner):
            if rows.has_micro(inner_body, name):
                return True
    elif divide(low, node, name, init) is not None:
        return True
    return rows.has_micro(node.for_get_body(), name)
