"""Scheduling each kernel with isl, for the CPU.

``schedule(model, fixed=None)`` is the stage entry point: it computes, for
every kernel, an isl schedule tree from the kernel's dependences (all of them
as validity, proximity and coincidence constraints, as TC does, so reduction
loops come out non-coincident and the coincident ones are parallel).  Every
band is then split into single-member bands, each under a mark ``par`` or
``seq`` saying whether that loop carries no dependence; the code generator
reads those marks.  ``fixed`` substitutes sizes before scheduling.
``fusion`` chooses, for a kernel inside a sequential ``for``, between isl's
schedule and ``_outer_then_serialized``'s, and outside, for a kernel with a
contraction, between isl's and one nest per component (see ``FUSION``).
The GPU mapping schedules with :mod:`tcdsl.polyhedral.gpu_schedule`; both
schedules become isl ASTs in :mod:`tcdsl.polyhedral.isl_ast`.
"""
from __future__ import annotations

import islpy as isl

from ..options import FUSION
from .unskew import unskewed
from ..sema.affine import isl_name, params_prefix
from ..syntax import nodes as n
from . import bounded, branches
from .model import Kernel, Model
from .schedule_batch import at_one_value, heads_fused
from .schedule_counts import (PARALLEL, PARALLEL_STEPS, SERIAL, STEPS_DEEP, steps_independent, _contracts, _extent, _formula_statements,  # noqa: F401
                              _narrow_parallel_statements, written_in_steps, _stores_across_rows, _stride_one, _params,
                              _has_reduction, _leading_parallel, _parallel_per_step, _parallel_statements, _reduction_reads, _short_rows, _steps_inside,
                              _tiled_statements, _top_parallel, _vector_statements, _walks, _fused_across_rows)

# The ``fusion`` option: which schedule a kernel inside a sequential ``for``
# gets.  "auto": the one of the next two whose statements end in more
# vectorizable loops; "isl": isl's (it fuses what it can); "outer": the
# outermost parallel loop shared, each statement in a nest of its own below
# it (_outer_then_serialized), when isl's outermost loop is parallel (for
# each part of a sequence at the top, _outer_parts: an argmax after the step);
# "none": isl with every strongly connected component in a nest of its own
# (isl's serialize_sccs).  Outside sequential loops "auto" chooses between
# "isl" and "none" for a kernel with a contraction (_contracts), "outer" is
# "isl" there.
# (The choices are listed in options.py, which checks the option.)


def fixed_set(model: Model, fixed: dict[str, int] | None) -> isl.Set:
    """The parameter set ``{ : N = 4 and ... }`` for the fixed sizes."""
    params = model.ranges.params
    conds = [f"{isl_name(k)} = {int(v)}" for k, v in sorted((fixed or {}).items()) if k in params]
    return isl.Set.read_from_str(model.ctx, params_prefix(params) + "{ : " + (" and ".join(conds) or "true") + " }")


def schedule(model: Model, fixed: dict[str, int] | None = None, fusion: str = "auto") -> dict[int, isl.Schedule]:
    """One isl schedule per kernel, keyed by the kernel's index in ``model.kernels()``."""
    assert fusion in FUSION, fusion  # checked by options.parse
    fix = fixed_set(model, fixed) if fixed else None
    kernels = model.kernels()
    if fix is None:
        return dict(enumerate(bounded.symbolic(model, fusion, _schedule_kernel)[0]))
    # with the sizes fixed first, under a time limit (bounded.py) scaled to
    # what the symbolic schedules took; past it, those restricted to the sizes
    symbolic, took = bounded.symbolic(model, fusion, _schedule_kernel)
    got = bounded.run(model.ctx, lambda: [_schedule_kernel(k, fix, fusion) for k in kernels], bounded.seconds(took))
    if got is None:
        got = [s.intersect_domain(k.domain.intersect_params(fix)) for s, k in zip(symbolic, kernels)]
    return dict(enumerate(got))


def _schedule_kernel(k: Kernel, fix: isl.Set | None, fusion: str = "auto") -> isl.Schedule:
    dom, deps, context = k.domain, k.deps, k.context
    if fix is not None:
        dom, deps, context = dom.intersect_params(fix), deps.intersect_params(fix), context & fix
    sc = (isl.ScheduleConstraints.on_domain(dom).set_context(context)
          .set_validity(deps).set_coincidence(deps).set_proximity(deps))
    sched = _compute(sc, k.serialize or fusion == "none")
    stride_one = _stride_one(k)
    root = _finish(sched, stride_one)
    if not k.loops and not k.serialize and fusion == "auto" and len(k.stmts) > 1 and _contracts(k):
        # outside sequential loops: isl's fused nest, or every strongly
        # connected component in a nest of its own -- a contraction fused
        # with its consumer loses its register tiles (an MLP's two layers,
        # attention's scores and row max); row reductions (norms) keep
        # isl's fused pass over each row
        other = _finish(_compute(sc, True), stride_one)
        red = _reductions(k)
        if ((_tiled_statements(other, stride_one, red), _vector_statements(other, stride_one))
                > (_tiled_statements(root, stride_one, red), _vector_statements(root, stride_one))):
            root = other
        # the nests of the components under one shared parallel loop (a
        # batch: every operand of a reduction has its own slice at each of
        # its values) when each reduction keeps a parallel loop of its own
        # below it for its tiles' rows: attention's scores, row max, exps,
        # sums and weighted sum then run one batch element after the other
        # while its rows are in cache, not each as a pass over whole tensors
        # (1.1-1.4x faster on a 2-core AMD EPYC)
        fused = None
        if len({x.info.comp.tensor for x in k.stmts}) > 1:
            reads = _reduction_reads(k, red)
            fused = heads_fused(_rows_fused(_compute(sc, True), sc, rows_below=red, batch_reads=reads), sc, red, reads)
        if fused is not None:
            fused = _finish(fused, stride_one)
            if ((_tiled_statements(fused, stride_one, red), _vector_statements(fused, stride_one))
                    >= (_tiled_statements(root, stride_one, red), _vector_statements(root, stride_one))):
                root = fused
    if not k.loops and not k.serialize and fusion == "auto" and len(k.stmts) > 1 and not _contracts(k):
        # isl's nests over the same rows, one after the other (a softmax's
        # normalisation after its row sums): one parallel loop over the rows,
        # so that each row is still in cache for the next nest
        other = _rows_fused(sched, sc)
        if other is not None:
            other = _finish(other, stride_one)
            if _vector_statements(other, stride_one) >= _vector_statements(root, stride_one):
                root = other
        # no statement left in a vector loop (a spatial softmax's exps fused with its sums over h, w
        # into one scalar pass: 39 -> 9 ms): a nest per component, sharing the rows' parallel loop
        other = _rows_fused(_compute(sc, True), sc) if not _vector_statements(root, stride_one) else None
        if other is not None and _vector_statements(other := _finish(other, stride_one), stride_one):
            root = other
        # statements (no reductions) whose stores leave their rows (a grid_sample's weight
        # tables over (n, i, j) fused with its channels innermost below them: each store 16 KiB
        # from the last, 2.4x slower): a nest per component, where fewer statements store across
        # their rows and as many run in parallel and in vectors
        writes = _stride_one(k, by_reads=False)
        if _stores_across_rows(root, writes):
            # (tables of other rows than their reader's, a resize's weights over the output
            # columns j fused with it over (j, n, c, i): a nest each, 34 -> 8.6 ms)
            serial = _compute(sc, True)
            other = _rows_fused(serial, sc) or serial
            if other is not None and _stores_across_rows(other := _finish(other, stride_one), writes) < \
                    _stores_across_rows(root, writes) and _parallel_statements(other) >= _parallel_statements(root) \
                    and _vector_statements(other, stride_one) >= _vector_statements(root, stride_one):
                root = other
    if not k.loops and not k.serialize and fusion == "auto" and len(k.stmts) > 1 \
            and _narrow_parallel_statements(root, NARROW):
        # isl fused the statements under a loop over a few rows fixed by the
        # program, the batch inside (an adaptive pooling's 7 output rows with
        # a table of window sizes over them: every row swept all channels, 8.7x
        # F.adaptive_avg_pool2d): a nest per component, where fewer statements
        # run under such a loop and as many in vectors and in parallel
        other = _finish(_compute(sc, True), stride_one)
        if (_narrow_parallel_statements(other, NARROW) < _narrow_parallel_statements(root, NARROW)
                and _parallel_statements(other) >= _parallel_statements(root)
                and _vector_statements(other, stride_one) >= _vector_statements(root, stride_one)):
            root = other
    if not k.loops and not k.serialize and fusion == "auto" and len(k.stmts) > 1 and not _top_parallel(root):
        # isl fused a reduction over the rows into their loop, which it made
        # serial (a cross entropy's ``loss +=! ... / N`` with each row's max
        # and sum: the whole loss on one core): a nest per component,
        # consecutive ones over the same rows sharing one parallel loop, and
        # the reduction over the rows after them
        serial = _compute(sc, True)
        other = _finish(_row_runs(serial, sc) or serial, stride_one)
        # (or as many, fewer in a parallel loop per step of a serial one: a sum into a scalar
        # over the columns that a row sum's columns were fused with, 47 -> 5.6 ms)
        if (_parallel_statements(other), _vector_statements(other, stride_one), -_parallel_per_step(other)) > (
                _parallel_statements(root), _vector_statements(root, stride_one), -_parallel_per_step(root)):
            root = other
    if k.loops and not k.serialize and fusion in ("auto", "outer"):
        other = _outer_then_serialized(sched, sc)
        raw_parts = other if other is not None and \
            other.get_root().child(0).get_type() == isl.schedule_node_type.sequence else None
        if other is not None:
            other = _finish(other, stride_one)
            # (with sizes fixed first, a unit batch loop may vanish: the old count, see below)
            red = _reductions(k) if fix is None else None
            if fusion == "outer" or _vector_statements(other, stride_one, red) > _vector_statements(root, stride_one, red):
                root = other
        # parts of a step (a bidirectional RNN's two directions, the
        # branches of an if) each under its own parallel loop over the same
        # rows, the steps outside: one parallel loop over those rows for all
        # of them, so that the steps run inside it (PARALLEL_STEPS), isl's
        # nests or a nest per statement below it, whichever keeps more
        # reductions in register tiles, then more statements in vector loops
        # (isl fused each direction's product of a bidirectional LSTM into
        # the rows of its gates, one row per tile: 2.7x torch.nn.LSTM)
        if fusion == "auto" and not _steps_inside(_mark_steps(root, k, fix)):
            red, tiles = (_reductions(k) if fix is None else None), _reductions(k)
            best = None
            for parts in (sched, raw_parts):
                fused = _rows_fused(parts, sc, sets=True) if parts is not None else None
                if fused is None or not _steps_inside(_mark_steps(fused := _finish(fused, stride_one), k, fix)):
                    continue
                score = (_tiled_statements(fused, stride_one, tiles), _vector_statements(fused, stride_one, red))
                if best is None or score > best[0]:
                    best = (score, fused)
            if best is not None and best[0] >= (_tiled_statements(root, stride_one, tiles),
                                                _vector_statements(root, stride_one, red)):
                root = best[1]
        if fusion == "auto" and not _top_parallel(root):
            # isl fused a reduction over the rows into their loop, which it
            # made serial (``w(i) +=! A(i, j) * v(j)`` then ``nn +=! w(i) *
            # w(i)``: a power iteration's step on one core): a nest per
            # component keeps the rows parallel
            other = _finish(_compute(sc, True), stride_one)
            red = _reductions(k) if fix is None else None
            if (_vector_statements(other, stride_one, red), _parallel_statements(other)) > (
                    _vector_statements(root, stride_one, red), _parallel_statements(root)):
                root = other
        elif fusion == "auto" and _fused_across_rows(root, stride_one):
            # isl fused a statement over the columns with an update of a matrix
            # over (rows, columns), the columns outermost: the update's inner
            # loop walks the rows (a Gauss-Jordan step, ``row(j) = A(p, j) /
            # piv`` and ``A(i, j) = ... - f(i) * row(j)``): a nest per
            # component, where more statements end in vector loops
            other = _finish(_compute(sc, True), stride_one)
            red = _reductions(k) if fix is None else None
            if _vector_statements(other, stride_one, red) > _vector_statements(root, stride_one, red) \
                    and _parallel_statements(other) >= _parallel_statements(root):
                root = other
        if fusion == "auto" and len(k.stmts) > 1 and _products(k):
            # isl fused a matmul into the rows of the statements around it
            # (a Newton-Schulz step's ``A2(i, k) +=! A(i, l) * A(l, k)`` with
            # the product by X that reads its rows: a dot product per
            # element, 6x torch): a nest per component when more of its
            # reductions keep register tiles, and the steps did not run
            # inside a parallel loop (an RNN's batch, PARALLEL_STEPS)
            other = _finish(_compute(sc, True), stride_one)
            red = _reductions(k)
            if _tiled_statements(other, stride_one, red) > _tiled_statements(root, stride_one, red) \
                    and not _steps_inside(_mark_steps(root, k, fix)):
                root = other
        lets = _formula_statements(k)
        if fusion == "auto" and lets:  # (a CTC-like recursion's select piece fused with its exps: no vector loop)
            other = _finish(_compute(sc, True), stride_one)
            red = _reductions(k) if fix is None else None
            if _vector_statements(other, stride_one, red, lets) > _vector_statements(root, stride_one, red, lets):
                root = other
    if k.loops:
        root = _mark_steps(root, k, fix)
        one = branches.merged(root) if not _steps_inside(root) else None
        if one is not None and _steps_inside(one := _mark_steps(mark_bands(one), k, fix)):
            root = one  # the branches of a step under one parallel loop, the steps inside it
    if fix is not None:
        # With the sizes fixed first isl may fuse what the symbolic schedule
        # keeps apart (a GRU at batch 1: one serial band over the columns, the
        # reductions inside, no vector loop): the symbolic schedule, which the
        # AST then specialises, serves when more of its statements end in a
        # vector loop.
        # Likewise when the symbolic schedule runs the steps inside its
        # parallel loop (one parallel region per call, PARALLEL_STEPS) and
        # this one does not (a region per step: an LSTM at batch 2 was 2.6x
        # slower before-scheduling than symbolic).
        # Then when more of its reductions keep their register tiles: no
        # serial loop around them but their own reduction loops (an LSTM at
        # (B, H) = (64, 512) whose gate loop isl fused with the elementwise
        # gates, which made it serial: 3x slower than symbolic).
        # And when, all else equal, fewer of its reductions take their tiles'
        # rows from a loop shorter than a tile (a QRNN at B = 2, _short_rows).
        sym = _schedule_kernel(k, None, fusion)
        red = _reductions(k)
        fixed_sym = sym.intersect_domain(dom).get_root()
        if (_vector_statements(sym.get_root(), stride_one), _steps_inside(sym.get_root()),
                _vector_statements(fixed_sym, stride_one, red), -_short_rows(fixed_sym, stride_one, red)) > (
                _vector_statements(root, stride_one), _steps_inside(root), _vector_statements(root, stride_one, red),
                -_short_rows(root, stride_one, red)):
            return sym.intersect_domain(dom)
    return root.get_schedule()


def _products(k: Kernel) -> bool:
    """Some reduction of ``k`` sums a product of two reads that move with its
    reduction variables (a matmul, ``A(i, l) * A(l, k)`` or ``Bm(i, k) *
    X(s - 1, k, j)`` of one tensor or of the one it writes, at another step)."""
    for s in k.stmts:
        c = s.info.comp
        if s.is_init or c.reduction is None or not c.reduction_vars:
            continue
        red = set(c.reduction_vars)
        moving = [a for a in n.walk(c.rhs) if isinstance(a, n.Access)
                  and {x.name for e in a.indices for x in n.walk(e) if isinstance(x, n.IndexVar)} & red]
        if len(moving) >= 2:
            return True
    return False


def _reductions(k: Kernel) -> dict[str, int]:
    """Each statement's number of reduction variables (0 for an init)."""
    return {x.name: 0 if x.is_init else len(x.info.comp.reduction_vars) for x in k.stmts}


def _compute(sc: isl.ScheduleConstraints, serialize: bool) -> isl.Schedule:
    ctx = sc.get_ctx()
    before = ctx.get_schedule_serialize_sccs()
    ctx.set_schedule_serialize_sccs(1 if serialize else before)
    try:
        return sc.compute_schedule()
    finally:
        ctx.set_schedule_serialize_sccs(before)


def _finish(sched: isl.Schedule, stride_one: isl.UnionMap) -> isl.ScheduleNode:
    """Split the bands, sink the vector loops, mark par/seq."""
    # Hand-written walks rather than isl's node callbacks: an exception inside
    # an islpy callback is swallowed and can corrupt the process.
    root = unskewed(_split(sched.get_root()))
    root = _lift_wide_bands(root, stride_one)
    root = _sink_vector_bands(root, stride_one)
    return mark_bands(root)


def _outer_then_serialized(sched: isl.Schedule, sc: isl.ScheduleConstraints) -> isl.Schedule | None:
    """The outermost loop of ``sched`` when it is parallel (the rows of a
    step: an RNN's batch), and below it each statement in a nest of its own
    (isl's serialize_sccs).  isl fuses the statements of an LSTM step into one
    band that the reductions make serial, so its ``j`` loop cannot be
    vectorized; this schedule keeps the outer parallel loop (and with it the
    time loop inside it, see PARALLEL_STEPS) and gives every statement its
    own vector loop.  Valid: the outer loop is coincident (no dependence
    between its iterations) and the inner schedule respects every dependence."""
    NT = isl.schedule_node_type
    node = sched.get_root().child(0)
    if node.get_type() in (NT.sequence, NT.set):  # (a set's parts are independent: any order)
        return _outer_parts(node, sc)
    if node.get_type() != NT.band or not node.band_member_get_coincident(0):
        return None
    if node.band_n_member() > 1:
        node = node.band_split(1)
    outer = node.band_get_partial_schedule()
    inner = _compute(sc, True).get_root().child(0)
    return inner.insert_partial_schedule(outer).band_member_set_coincident(0, True).get_schedule()


def _rows_fused(sched: isl.Schedule, sc: isl.ScheduleConstraints,
                rows_below: dict | None = None, batch_reads: isl.UnionMap | None = None,
                sets: bool = False) -> isl.Schedule | None:
    """isl's sequence of nests at the top, each under a parallel loop, as
    one parallel loop (the union of theirs) with isl's nests below it, when every dependence stays at
    one value of that loop: a softmax ``y(n, c) = e(n, c) / s(n)`` after the
    row sums ``s(n) +=! e(n, c)`` then runs while the row is in cache, not as
    a second pass over the whole tensor.  With ``rows_below`` (statement ->
    its reduction loops), only when each nest holding a reduction has a
    second parallel loop before its first serial one, for its tiles' rows,
    and the loops have the same values in every nest; with ``batch_reads``
    (the reductions' reads), only when each element read is read at one
    value of the shared loop.  None otherwise."""
    NT = isl.schedule_node_type
    seq = sched.get_root().child(0)
    if seq.get_type() not in ((NT.sequence, NT.set) if sets else (NT.sequence,)) or seq.n_children() < 2:
        return None
    outer, ranges = None, []
    for part in branches.nests(seq, sets):
        band = part.child(0)
        if band.get_type() != NT.band or not band.band_member_get_coincident(0):
            return None
        if rows_below is not None and _has_reduction(part, rows_below) and _leading_parallel(band) < 2:
            return None
        if band.band_n_member() > 1:
            band = band.band_split(1)
        part = band.band_get_partial_schedule()
        if rows_below is not None:
            ranges.append(isl.UnionMap.from_multi_union_pw_aff(part).intersect_domain(band.get_domain()).range())
        outer = part if outer is None else outer.union_add(part)
    if ranges:
        # the same loop in every nest (a batch), not loops over different
        # sizes: each nest's values are all of them, where it runs at all
        every = ranges[0]
        for r in ranges[1:]:
            every = every.union(r)
        if not all(r.is_equal(every.intersect_params(r.params())) for r in ranges):
            return None
    phi = isl.UnionMap.from_multi_union_pw_aff(outer)
    if batch_reads is not None and not batch_reads.reverse().apply_range(phi).is_single_valued():
        return None  # a reduction reads an operand at every value of the loop (a weight): no batch
    if not at_one_value(sc, phi, 1):
        return None
    inner = sched.get_root().child(0)  # isl's nests, each now at one value of the shared loop
    return inner.insert_partial_schedule(outer).band_member_set_coincident(0, True).get_schedule()


def _row_runs(sched: isl.Schedule, sc: isl.ScheduleConstraints) -> isl.Schedule | None:
    """isl's sequence of nests at the top with each run of consecutive nests
    under a parallel loop fused as :func:`_rows_fused` fuses them (where it
    can), in isl's order, which respects the dependences between the runs;
    None when no run has two nests."""
    NT = isl.schedule_node_type
    seq = sched.get_root().child(0)
    if seq.get_type() != NT.sequence:
        return None
    runs: list[tuple[bool, list[int]]] = []
    for i in range(seq.n_children()):
        band = seq.child(i).child(0)
        ok = band.get_type() == NT.band and bool(band.band_member_get_coincident(0))
        if ok and runs and runs[-1][0]:
            runs[-1][1].append(i)
        else:
            runs.append((ok, [i]))
    if not any(ok and len(ix) > 1 for ok, ix in runs):
        return None
    out = None
    for ok, ix in runs:
        dom = seq.child(ix[0]).filter_get_filter()
        for i in ix[1:]:
            dom = dom.union(seq.child(i).filter_get_filter())
        sub = _restricted(sc, dom)
        part = _compute(sub, True)
        fused = _rows_fused(part, sub) if ok and len(ix) > 1 else None
        part = fused if fused is not None else part
        out = part if out is None else out.sequence(part)
    return out


def _outer_parts(seq: isl.ScheduleNode, sc: isl.ScheduleConstraints) -> isl.Schedule | None:
    """:func:`_outer_then_serialized` for each part of a sequence at the top
    (isl put an argmax, or a statement that needs a whole row first, after
    the rest), the parts kept in isl's order, which respects the dependences
    between them; None when no part changes."""
    out, changed = None, False
    for i in range(seq.n_children()):
        dom = seq.child(i).filter_get_filter()
        sub = _restricted(sc, dom)
        part = _compute(sub, False)
        top = part.get_root().child(0)
        better = _outer_then_serialized(part, sub) if top.get_type() == isl.schedule_node_type.band else None
        changed = changed or better is not None
        part = better if better is not None else part
        out = part if out is None else out.sequence(part)
    return out if changed else None


def _restricted(sc: isl.ScheduleConstraints, dom: isl.UnionSet) -> isl.ScheduleConstraints:
    def within(m: isl.UnionMap) -> isl.UnionMap:
        return m.intersect_domain(dom).intersect_range(dom)
    return (isl.ScheduleConstraints.on_domain(sc.get_domain().intersect(dom)).set_context(sc.get_context())
            .set_validity(within(sc.get_validity())).set_coincidence(within(sc.get_coincidence()))
            .set_proximity(within(sc.get_proximity())))


def _mark_steps(root: isl.ScheduleNode, k: Kernel, fix: isl.Set | None) -> isl.ScheduleNode:
    """Rename the outermost ``par`` mark to ``par_steps`` when the steps of the
    innermost enclosing ``for`` only depend on each other at equal values of
    that loop (see PARALLEL_STEPS)."""
    NT = isl.schedule_node_type
    node = root.child(0) if root.get_type() == NT.domain else root
    if node.get_type() != NT.mark or node.mark_get_id().get_name() != PARALLEL:
        return root
    band = node.child(0)
    phi = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    if not steps_independent(k, phi, fix):
        return root
    node = node.delete().insert_mark(isl.Id(PARALLEL_STEPS, context=node.get_ctx()))
    # the two loops around it (STEPS_DEEP), for statements without sums (whose panels may be packed per
    # step of the outer loop: a stacked Elman's layers, 4.3 -> 5.3 ms with both loops inside)
    if len(k.loops) >= 2 and not any(x.info.comp.reduction_vars for x in k.stmts) and steps_independent(k, phi, fix, 2):
        node = node.insert_mark(isl.Id(STEPS_DEEP, context=node.get_ctx()))
    return node.parent() if root.get_type() == NT.domain else node


def _split(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Split every band below ``node`` into one-member bands (flags kept)."""
    if node.get_type() == isl.schedule_node_type.band and node.band_n_member() > 1:
        node = node.band_split(1)
    for c in range(node.n_children()):
        node = _split(node.child(c)).parent()
    return node


# A parallel loop of at most this many iterations (a gate or direction
# index) gives way to a wider parallel loop directly inside it.
NARROW = 16


def _lift_wide_bands(node: isl.ScheduleNode, stride_one: isl.UnionMap) -> isl.ScheduleNode:
    """Interchange the two outermost loops of a nest when both are coincident,
    the outer one runs a few iterations fixed by the program (``g`` of
    ``gates(g, b, j)``, 4) and the inner one more (``b``, the batch) and is
    not the stride-one loop the vector loop wants innermost: the outermost
    parallel loop is the one split across threads and the one register tiles
    take their rows from, so a 4-row outer loop left an LSTM's recurrent GEMM
    on one thread with one-row tiles.  Legal because neither loop carries a
    dependence: with a zero distance at the outer level every remaining
    dependence also has a zero distance at the inner one, in either order."""
    NT = isl.schedule_node_type
    if node.get_type() == NT.band:
        if node.band_member_get_coincident(0) and node.n_children() == 1:
            inner = node.child(0)
            if (inner.get_type() == NT.band and inner.band_member_get_coincident(0)
                    and not _walks(inner, stride_one)):
                outer_n, inner_n = _extent(node), _extent(inner)
                if outer_n is not None and outer_n <= NARROW and (inner_n is None or inner_n > outer_n):
                    po, pi = node.band_get_partial_schedule(), inner.band_get_partial_schedule()
                    perm_o, perm_i = node.band_get_permutable(), inner.band_get_permutable()
                    node = node.delete().delete()
                    for part, perm in ((po, perm_o), (pi, perm_i)):  # inserted above: the inner one last
                        node = (node.insert_partial_schedule(part).band_member_set_coincident(0, True)
                                .band_set_permutable(perm))
        return node  # only a nest's outermost loop
    for c in range(node.n_children()):
        node = _lift_wide_bands(node.child(c), stride_one).parent()
    return node


# Columns per thread-parallel strip of a vector loop under a reduction loop
# (_sink_vector_bands): 512 bytes of a row, and 256 columns still make 2
# strips (docs/internals.md: GEMV 4096^2 6.1 ms with strips of 64, 4.8 ms).
STRIP = 128


def _sink_vector_bands(node: isl.ScheduleNode, stride_one: isl.UnionMap,
                       parallel_outside: bool = False) -> isl.ScheduleNode:
    """Interchange for vectorization: a coincident loop that every statement
    below it writes with stride 1 is sunk below the serial (reduction) loops
    under it, so it ends up innermost (``for b, for ci, for co`` instead of
    ``for b, for co, for ci``).  Legal because a coincident loop carries no
    dependence, so any position is valid for it.

    When no parallel loop encloses it, the loop is first cut into strips of
    STRIP iterations and only the points of a strip are sunk: the strips stay
    outside as the parallel loop (a column sum ``y(j) +=! x(i, j)``: ``for
    strip (parallel), for i, for j (vector)`` instead of a parallel region
    launched for every row ``i``)."""
    NT = isl.schedule_node_type
    if node.get_type() == NT.band:
        coincident = bool(node.band_member_get_coincident(0))
        if coincident and _has_serial_band(node.child(0)) and _walks(node, stride_one):
            n = _extent(node)
            if not parallel_outside and (n is None or n > STRIP):
                node = node.band_tile(isl.MultiVal.zero(node.band_get_space()).set_val(
                    0, isl.Val.int_from_si(node.get_ctx(), STRIP)))
                node = node.band_member_set_coincident(0, True).child(0).band_member_set_coincident(0, True)
                umap = node.band_get_partial_schedule_union_map().intersect_domain(node.get_domain())
                node = _set_coincident(node.band_sink(), umap)
                return _sink_vector_bands(node, stride_one, True).parent()
            umap = node.band_get_partial_schedule_union_map().intersect_domain(node.get_domain())
            node = node.band_sink()
            node = _set_coincident(node, umap)
            return _sink_vector_bands(node, stride_one, parallel_outside)
        parallel_outside = parallel_outside or coincident
    for c in range(node.n_children()):
        node = _sink_vector_bands(node.child(c), stride_one, parallel_outside).parent()
    return node


def _has_serial_band(node: isl.ScheduleNode) -> bool:
    if node.get_type() == isl.schedule_node_type.band and not node.band_member_get_coincident(0):
        return True
    return any(_has_serial_band(node.child(c)) for c in range(node.n_children()))


def _set_coincident(node: isl.ScheduleNode, umap: isl.UnionMap) -> isl.ScheduleNode:
    """Mark the bands that ``band_sink`` made from ``umap`` coincident again."""
    if node.get_type() == isl.schedule_node_type.band:
        own = node.band_get_partial_schedule_union_map().intersect_domain(node.get_domain())
        if own.is_subset(umap):
            node = node.band_member_set_coincident(0, True)
    for c in range(node.n_children()):
        node = _set_coincident(node.child(c), umap).parent()
    return node


def mark_bands(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Split every band below ``node`` into one-member bands, each under a
    ``par``/``seq`` mark; returns the node at ``node``'s position."""
    if node.get_type() != isl.schedule_node_type.band:
        for c in range(node.n_children()):
            node = mark_bands(node.child(c)).parent()
        return node
    n = node.band_n_member()
    coincident = [bool(node.band_member_get_coincident(i)) for i in range(n)]
    for _ in range(n - 1):
        node = node.band_split(1).child(0)
    node = mark_bands(node.child(0)).parent()
    ctx = node.get_ctx()
    for i in reversed(range(n)):
        node = node.insert_mark(isl.Id(PARALLEL if coincident[i] else SERIAL, context=ctx))
        if i > 0:
            node = node.parent()
    return node


def dump_schedules(model: Model, schedules: dict[int, isl.Schedule]) -> str:
    """The schedule trees, each under the sequential loops that enclose it."""
    lines = []
    for i, k in enumerate(model.kernels()):
        loops = "".join(f"for {lp.var} (sequential) > " for lp in k.loops)
        lines.append(f"# kernel {i}: {loops}{', '.join(s.name for s in k.stmts)}")
        lines.append(schedules[i].get_root().to_str().replace("# YOU ARE HERE\n", ""))
    return "\n".join(lines) + "\n"
