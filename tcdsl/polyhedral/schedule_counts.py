"""Counting what a schedule tree gives the CPU code generator: statements
that end in a vector loop, reductions in register-tile form, statements a
parallel loop iterates, tiles whose rows are short, statements that store
across their rows.  polyhedral/schedule.py compares candidate schedules
(isl's, one nest per component, the outer loop shared) by these counts, over
the maps of :func:`_stride_one` (each statement's stride-one index)."""
from __future__ import annotations

import islpy as isl

from ..sema.affine import isl_name, params_prefix
from ..syntax import nodes as n
from .model import Kernel, lift_param, maps
from .strides import transposed, unit_or_invariant

PARALLEL, SERIAL = "par", "seq"
# The mark of an outermost parallel loop that no dependence crosses between
# steps of the enclosing sequential ``for``: the code generator may run that
# ``for`` inside it, so no step waits for the others (``par`` otherwise).
PARALLEL_STEPS = "par_steps"
# above PARALLEL_STEPS: the steps of the two loops around the kernel (``for t { for s { ... } }``) may run
# inside its parallel loop, a biquad cascade's sections inside its samples (codegen/cpu_steps.py nested_steps)
STEPS_DEEP = "steps_deep"


def _vector_statements(root: isl.ScheduleNode, stride_one: isl.UnionMap, reductions: dict | None = None,
                       formulas: frozenset = frozenset()) -> int:
    """How many statements end in a parallel loop over their stride-one
    dimension.  With ``reductions`` (statement name -> number of reduction
    variables), a statement counts only when no more serial loops enclose it
    than it has reduction variables: a statement run inside a serial loop
    over something else (an LSTM's gate loop that isl made serial by fusing
    the elementwise gates into it) loses its register tiles and chunks."""
    NT = isl.schedule_node_type
    count = 0

    def serial_loops(name: str, dom: isl.Set, serial: list) -> int:
        n = 0
        for m in serial:
            n += _iterates(m, dom)
        return n

    def visit(node: isl.ScheduleNode, mark: str | None, serial: list) -> None:
        nonlocal count
        t = node.get_type()
        if t == NT.band:
            below = node.child(0)
            if mark == PARALLEL and not _has_band(below) and _walks(node, stride_one) and _unguarded(node, formulas):
                if reductions is None:
                    count += node.get_domain().n_set()
                else:
                    dl = node.get_domain().get_set_list()
                    for dom in (dl.get_at(i) for i in range(dl.n_set())):
                        name = dom.get_tuple_name()
                        if serial_loops(name, dom, serial) <= reductions.get(name, 0):
                            count += 1
            if mark != PARALLEL and mark != PARALLEL_STEPS and reductions is not None:
                serial = serial + [isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())]
        for c in range(node.n_children()):
            visit(node.child(c), node.mark_get_id().get_name() if t == NT.mark else None, serial)
    visit(root, None, [])
    return count


def _unguarded(node: isl.ScheduleNode, formulas: frozenset) -> bool:
    """False where the one-member band ``node`` runs a statement of
    ``formulas`` (one whose vector formulas bind values, exp or log) beside
    statements over other values of its loop: its body then holds a guard
    next to those bindings, which the CPU code does not vectorize (TVM's
    vectorizer, codegen/cpu.py ``_vectorized``)."""
    dl = node.get_domain().get_set_list()
    names = [dl.get_at(i).get_tuple_name() for i in range(dl.n_set())]
    if len(names) < 2 or not formulas & set(names):
        return True
    m = isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())
    images = [isl.UnionSet.from_set(dl.get_at(i)).apply(m) for i in range(dl.n_set())]
    return all(x.is_equal(images[0]) for x in images[1:])


def _tiled_statements(root: isl.ScheduleNode, stride_one: isl.UnionMap, reductions: dict) -> int:
    """How many reductions end in a parallel stride-one loop below serial
    loops that enclose no other statement: the form the CPU's register tiles
    take (``for k { for j (par) { S } }``, codegen/cpu_tiles.py).  A padded
    convolution's interior piece fused with its boundary pieces in one
    ``k`` loop has no tiles."""
    NT = isl.schedule_node_type
    count = 0

    def visit(node: isl.ScheduleNode, mark: str | None, alone: bool, shared: bool, rowless: bool = False) -> None:
        nonlocal count
        t = node.get_type()
        if t == NT.band:
            below = node.child(0)
            if mark == PARALLEL and not _has_band(below) and _walks(node, stride_one) and alone \
                    and not rowless and not _fixed_by_outer_loops(node):
                dl = node.get_domain().get_set_list()
                count += sum(1 for i in range(dl.n_set()) if reductions.get(dl.get_at(i).get_tuple_name(), 0))
            if mark == PARALLEL and _has_band(below):
                # a parallel loop over several reductions runs one row at a
                # time through all of them: no rows for the tiles below it
                # until a parallel loop of one of them (a matmul fused with
                # the argmax over its rows, ``for b { for d { for n } } }``:
                # a rank-1 update per d, 100x the tiled product; a product
                # and an elementwise statement after it keep their chunks)
                m = isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())
                dl = node.get_domain().get_set_list()
                rowless = len({dl.get_at(i).get_tuple_name() for i in range(dl.n_set())
                               if reductions.get(dl.get_at(i).get_tuple_name(), 0) and _iterates(m, dl.get_at(i))}) > 1
            if mark not in (PARALLEL, PARALLEL_STEPS):
                # statements this loop really iterates (an init at a constant position only precedes it)
                m = isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())
                dl = node.get_domain().get_set_list()
                moving = 0
                for i in range(dl.n_set()):
                    moving += _iterates(m, dl.get_at(i))
                # a serial loop that iterates another statement too (an
                # im2col copy fused into the channel loops of the product
                # that reads it) leaves no tile below it
                alone = moving == 1 and not shared
                shared = shared or moving > 1
        for c in range(node.n_children()):
            visit(node.child(c), node.mark_get_id().get_name() if t == NT.mark else None, alone, shared, rowless)
    visit(root, None, False, False)
    return count


def _fixed_by_outer_loops(node: isl.ScheduleNode) -> bool:
    """The band's values are fixed by the loops around it: it runs one
    iteration (k-means' ``xc(n, k) +=! X(n, d) * C(k, d)`` under an outer
    parallel loop over ``k`` shared with the centroids' update: its own ``k``
    loop below ``d`` is a unit loop, a dot product per element, not tiles)."""
    try:
        prefix = node.get_prefix_schedule_union_map()
        band = isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())
        return bool(prefix.reverse().apply_range(band).is_single_valued())
    except isl.Error:
        return False


# register tiles take this many rows (codegen/cpu_tiles.py: 4 or 8): a row
# loop of fewer iterations runs one-row tiles
SHORT_ROWS = 4


def _short_rows(root: isl.ScheduleNode, stride_one: isl.UnionMap, reductions: dict) -> int:
    """How many reductions end in a parallel stride-one loop (the register
    tiles' columns) whose nearest enclosing parallel loop (their rows) has a
    fixed number of iterations below SHORT_ROWS."""
    NT = isl.schedule_node_type
    count = 0

    def visit(node: isl.ScheduleNode, mark: str | None, rows: int | None) -> None:
        nonlocal count
        if node.get_type() == NT.band and mark in (PARALLEL, PARALLEL_STEPS):
            if mark == PARALLEL and not _has_band(node.child(0)) and _walks(node, stride_one):
                if rows is not None and rows < SHORT_ROWS:
                    dl = node.get_domain().get_set_list()
                    count += sum(1 for i in range(dl.n_set()) if reductions.get(dl.get_at(i).get_tuple_name(), 0))
            else:
                rows = _extent(node)
        for c in range(node.n_children()):
            visit(node.child(c), node.mark_get_id().get_name() if node.get_type() == NT.mark else None, rows)
    visit(root, None, None)
    return count


def _top_parallel(root: isl.ScheduleNode) -> bool:
    """The outermost loop of the schedule (of each part of a sequence at the
    top) carries no dependence."""
    NT = isl.schedule_node_type

    def first(node: isl.ScheduleNode) -> list:
        t = node.get_type()
        if t == NT.mark:
            return [node.mark_get_id().get_name() in (PARALLEL, PARALLEL_STEPS)] if node.child(0).get_type() == NT.band \
                else first(node.child(0))
        if t == NT.band:
            return [bool(node.band_member_get_coincident(0))]
        out = []
        for c in range(node.n_children()):
            out += first(node.child(c))
        return out
    return all(first(root))


def _parallel_statements(root: isl.ScheduleNode) -> int:
    """How many statements some parallel loop iterates (more than one value)."""
    NT = isl.schedule_node_type
    names: set[str] = set()

    def visit(node: isl.ScheduleNode, mark: str | None) -> None:
        t = node.get_type()
        if t == NT.band and mark in (PARALLEL, PARALLEL_STEPS):
            m = isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())
            dl = node.get_domain().get_set_list()
            for i in range(dl.n_set()):
                if _iterates(m, dl.get_at(i)):
                    names.add(dl.get_at(i).get_tuple_name())
        for c in range(node.n_children()):
            visit(node.child(c), node.mark_get_id().get_name() if t == NT.mark else None)
    visit(root, None)
    return len(names)


def _parallel_per_step(root: isl.ScheduleNode) -> int:
    """How many statements a parallel loop iterates inside a serial loop that
    iterates them too: a parallel region per step of that loop (a row sum
    fused with a sum into a scalar over the same variable, its rows inside:
    one region per column)."""
    NT = isl.schedule_node_type
    names: set[str] = set()

    def visit(node: isl.ScheduleNode, mark: str | None, serial: list) -> None:
        t = node.get_type()
        if t == NT.band:
            m = isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())
            dl = node.get_domain().get_set_list()
            for i in range(dl.n_set()):
                d = dl.get_at(i)
                if mark in (PARALLEL, PARALLEL_STEPS) and _iterates(m, d) and any(_iterates(x, d) for x in serial):
                    names.add(d.get_tuple_name())
            if mark not in (PARALLEL, PARALLEL_STEPS):
                serial = serial + [m]
        for c in range(node.n_children()):
            visit(node.child(c), node.mark_get_id().get_name() if t == NT.mark else None, serial)
    visit(root, None, [])
    return len(names)


def written_in_steps(k) -> set[str]:
    """The tensors that the statements of the kernel ``k`` write, or the other
    kernels of the sequential loop it runs in (else none): an operand of these
    read across its contiguous dimension is copied to a panel at each step
    (codegen/cpu_tiles.py), where the other operands read there are packed
    once per call instead (polyhedral/layout.py)."""
    return {s.info.comp.tensor for s in k.stmts} | set(getattr(k, "loop_writes", ())) if k.loops else set()


def _narrow_parallel_statements(root: isl.ScheduleNode, narrow: int) -> int:
    """How many statements run under an outermost parallel loop of at most
    ``narrow`` iterations whatever the sizes (the 7 output rows of an
    adaptive pooling, with the batch and channels inside)."""
    NT = isl.schedule_node_type
    names: set[str] = set()

    def visit(node: isl.ScheduleNode, mark: str | None) -> None:
        t = node.get_type()
        if t == NT.band and mark in (PARALLEL, PARALLEL_STEPS):
            n = _extent(node)
            if n is not None and n <= narrow:
                dl = node.get_domain().get_set_list()
                names.update(dl.get_at(i).get_tuple_name() for i in range(dl.n_set()))
            return
        for c in range(node.n_children()):
            visit(node.child(c), node.mark_get_id().get_name() if t == NT.mark else None)
    visit(root, None)
    return len(names)


def _stores_across_rows(root: isl.ScheduleNode, writes: isl.UnionMap) -> int:
    """How many statements of ``writes`` (``_stride_one(k, by_reads=False)``:
    each statement to the index its write walks with
    stride 1) have an innermost loop over something else: each store lands
    a row away from the last (a grid_sample's channels below its (n, i, j)
    loops)."""
    NT = isl.schedule_node_type
    count = 0

    def visit(node: isl.ScheduleNode, bands: tuple) -> None:
        nonlocal count
        if node.get_type() == NT.band and node.band_n_member() == 1:
            bands = bands + (node.band_get_partial_schedule_union_map(),)
        if node.n_children() == 0:
            dl = node.get_domain().get_set_list()
            for dom in (dl.get_at(i) for i in range(dl.n_set())):
                if writes.intersect_domain(isl.UnionSet.from_set(dom)).is_empty():
                    continue
                inner = next((m for m in reversed(bands) if _iterates(m, dom)), None)
                count += inner is not None and not inner.intersect_domain(isl.UnionSet.from_set(dom)).is_subset(writes)
            return
        for i in range(node.n_children()):
            visit(node.child(i), bands)

    visit(root, ())
    return count


def _has_band(node: isl.ScheduleNode) -> bool:
    if node.get_type() == isl.schedule_node_type.band:
        return True
    return any(_has_band(node.child(c)) for c in range(node.n_children()))


def _fused_across_rows(root: isl.ScheduleNode, stride_one: isl.UnionMap) -> bool:
    """Some statement of two or more dimensions has its stride-one dimension
    as a loop that holds another of its loops: its innermost loop walks
    across rows (isl fused it with a statement over the columns alone)."""
    NT = isl.schedule_node_type

    def iterated_below(node: isl.ScheduleNode, dom: isl.Set) -> bool:
        if node.get_type() == NT.band and _iterates(
                isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule()), dom):
            return True
        return any(iterated_below(node.child(c), dom) for c in range(node.n_children()))

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == NT.band and node.band_n_member() == 1 and _has_band(node.child(0)):
            umap = node.band_get_partial_schedule_union_map().intersect_domain(node.get_domain())
            dl = node.get_domain().get_set_list()
            for dom in (dl.get_at(i) for i in range(dl.n_set())):
                own = umap.intersect_domain(isl.UnionSet.from_set(dom))
                if dom.dim(isl.dim_type.set) >= 2 and not own.is_empty() and own.is_subset(stride_one) \
                        and iterated_below(node.child(0), dom):
                    return True
        return any(visit(node.child(c)) for c in range(node.n_children()))
    return visit(root)


def _steps_inside(root: isl.ScheduleNode) -> bool:
    """The schedule's outermost mark is PARALLEL_STEPS (see _mark_steps), under
    STEPS_DEEP where the steps of two loops run inside."""
    NT = isl.schedule_node_type
    node = root.child(0) if root.get_type() == NT.domain else root
    if node.get_type() == NT.mark and node.mark_get_id().get_name() == STEPS_DEEP:
        node = node.child(0)
    return node.get_type() == NT.mark and node.mark_get_id().get_name() == PARALLEL_STEPS


def _extent(band: isl.ScheduleNode) -> int | None:
    """How many values a one-member band takes, when no size decides it."""
    umap = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    if umap.is_empty():
        return None
    rng = isl.Set.from_union_set(umap.range())
    hi, lo = rng.dim_max_val(0), rng.dim_min_val(0)
    if not (hi.is_int() and lo.is_int()):
        return None
    return hi.sub(lo).to_python() + 1


def _walks(band: isl.ScheduleNode, stride_one: isl.UnionMap) -> bool:
    umap = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    return not umap.is_empty() and umap.is_subset(stride_one)


def _iterates(m: isl.UnionMap, dom: isl.Set) -> bool:
    """The loop ``m`` (a band's partial schedule) takes more than one value
    over the statement instances ``dom`` (an init at a constant position
    only precedes it)."""
    one = m.intersect_domain(isl.UnionSet.from_set(dom))
    return not one.is_empty() and not isl.Set.from_union_set(one.range()).is_singleton()


def _reduction_reads(k, reductions: dict) -> isl.UnionMap:
    out = isl.UnionMap.empty(k.context.get_space())
    for x in k.stmts:
        if reductions.get(x.name, 0):
            for m in x.reads:
                out = out.union(isl.UnionMap.from_map(m))
    return out


def _has_reduction(node: isl.ScheduleNode, reductions: dict) -> bool:
    dl = node.get_domain().get_set_list()
    return any(reductions.get(dl.get_at(i).get_tuple_name(), 0) for i in range(dl.n_set()))


def _leading_parallel(node: isl.ScheduleNode) -> int:
    """How many parallel loops a nest starts with, down its bands until the
    first serial loop or a node that is not a band."""
    count = 0
    while node.get_type() == isl.schedule_node_type.band:
        for m in range(node.band_n_member()):
            if not node.band_member_get_coincident(m):
                return count
            count += 1
        node = node.child(0)
    return count


def _formula_statements(k) -> frozenset:
    """The elementwise statements of ``k`` that call exp or log."""
    return frozenset(s.name for s in k.stmts if not s.is_init and s.info.comp.reduction is None and any(
        isinstance(x, (n.Call, n.BuiltinCall)) and x.name in ("exp", "log") for x in n.walk(s.info.comp.rhs)))


def _contracts(k) -> bool:
    """Some statement of ``k`` is a contraction: a reduction of a product of
    reads of two different tensors (a matmul's ``A(i, k) * B(k, j)``)."""
    for s in k.stmts:
        c = s.info.comp
        if s.is_init or c.reduction is None:
            continue
        if len({x.tensor for x in n.walk(c.rhs) if isinstance(x, n.Access)} - {c.tensor}) >= 2:
            return True
    return False


def _stride_one(k: Kernel, by_reads: bool = True) -> isl.UnionMap:
    """``{ S[...] -> [d] }``: each statement to the index variable its write
    walks with stride 1 (the last lhs index), when that is a variable of its
    own: with ``by_reads``, where its reads allow a vector loop over it;
    without, every statement that is no reduction."""
    out = isl.UnionMap.empty(k.context.get_space())
    stepped = written_in_steps(k)
    for s in k.stmts:
        last = s.info.comp.indices[-1] if s.info.comp.indices else None
        if not isinstance(last, n.IndexVar) or last.name not in s.dims:
            continue
        if not by_reads and s.info.comp.reduction_vars:
            continue
        reads = [x for x in n.walk(s.info.comp.rhs) if isinstance(x, n.Access)]
        # a strided read (e.g. a row sum) vectorizes into gathers: not worth
        # it, except the k x columns operand of a matmul-like reduction
        # outside sequential loops (``B(n, k)``), which the CPU generator
        # copies to a contiguous panel (codegen/cpu.py, _packable)
        red = s.info.comp.reduction_vars
        if by_reads and not all(unit_or_invariant(a, last.name)
                   or len(red) >= 1 and (not k.loops or a.tensor in stepped) and transposed(a, last.name, red, s.dims)
                   for a in reads):
            continue
        dims = ", ".join(map(isl_name, s.dims))
        m = isl.Map.read_from_str(k.context.get_ctx(), params_prefix(_params(k)) + "{ " + s.name
                                  + "[" + dims + "] -> [" + isl_name(last.name) + "] }")
        out = out.union(isl.UnionMap.from_map(m.intersect_domain(s.domain)))
    return out


def _params(k: Kernel) -> list[str]:
    sp = k.context.get_space()
    return [sp.get_dim_name(isl.dim_type.param, i) for i in range(sp.dim(isl.dim_type.param))]


def steps_independent(k, phi: isl.UnionMap, fix: isl.Set | None, depth: int = 1) -> bool:
    """Every pair of accesses to one element at two different steps, one of
    them a write, has the same value of ``phi`` (the outer band); the steps
    of the ``depth`` innermost loops around the kernel."""
    names = [isl_name(lp.var) for lp in k.loops[-depth:]]
    writes = k.accesses("writes")
    every = writes.union(k.accesses("reads")).union(k.accesses("may_reads"))
    if fix is not None:
        writes, every, phi = writes.intersect_params(fix), every.intersect_params(fix), phi.intersect_params(fix)

    def lift(umap: isl.UnionMap) -> isl.UnionMap | None:  # parameter t becomes the first input dim
        out = None
        for m in maps(umap):
            for t in reversed(names):
                m = lift_param(m, t) if m is not None else None
            if m is None:
                return None
            um = isl.UnionMap.from_map(m)
            out = um if out is None else out.union(um)
        return out

    W, A, P = lift(writes), lift(every), lift(phi)
    if W is None or A is None or P is None:
        return False
    stamped = None  # S[t, ...] -> [t, phi]
    for m in maps(P):
        d = m.domain()
        tdim = (isl.Map.identity(d.get_space().map_from_set()).intersect_domain(d)
                .project_out(isl.dim_type.out, depth, d.dim(isl.dim_type.set) - depth))
        um = isl.UnionMap.from_map(tdim.flat_range_product(m).reset_tuple_id(isl.dim_type.out))
        stamped = um if stamped is None else stamped.union(um)
    pairs = W.apply_range(A.reverse())
    pairs = pairs.union(pairs.reverse())
    rel = pairs.apply_domain(stamped).apply_range(stamped)
    if rel.is_empty():
        return True
    deltas = rel.deltas()
    dts = [f"dt{i}" for i in range(depth)]
    bad = isl.UnionSet.from_set(isl.Set.read_from_str(k.context.get_ctx(), "{ [" + ", ".join(dts) + ", dc] : ("
                                                      + " or ".join(f"{x} != 0" for x in dts) + ") and dc != 0 }"))
    return deltas.intersect(bad.align_params(deltas.get_space())).is_empty()
