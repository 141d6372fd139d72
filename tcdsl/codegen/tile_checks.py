"""What makes a statement fit for a register tile (codegen/cpu_tiles.py),
checked on its isl relations."""
from __future__ import annotations

import islpy as isl

from ..polyhedral.model import IslStmt
from ..syntax import nodes as n


def accumulates_privately(s: IslStmt) -> bool:
    """``S`` reads no element it writes except the one it accumulates into
    (its first read, added for the reduction): the accumulator may then live
    in registers while ``S`` runs over its reduction variables."""
    if s.is_init or s.info.comp.reduction in (None, "argmax", "argmin") or not s.writes:
        return False
    tensor = s.writes[0].get_tuple_name(isl.dim_type.out)
    if any(m.get_tuple_name(isl.dim_type.out) == tensor for m in s.may_reads):
        return False
    written = s.writes[0].range()
    for m in s.reads[1:]:
        if m.get_tuple_name(isl.dim_type.out) == tensor and not m.range().intersect(written).is_empty():
            return False
    return True


def runs_in_one_step(s: IslStmt, loop_var: str) -> bool:
    """``S`` runs at a single value of the enclosing sequential loop's variable
    (the ``t == 0`` branch of a recurrence, the first layer of ``for l in L``):
    its register tiles are of the main width only (codegen/cpu_tiles.py,
    ``lean``): worth it where the loop is short (a stack of 4 layers of a
    1024 x 512 MLP: 14.2 -> 7.6 ms, untiled it was half of the time), little
    code where it is long (an RNN's first step: +5% compile time against
    no tiles, +24% with every tile width)."""
    d = s.domain.params()
    i = d.find_dim_by_name(isl.dim_type.param, loop_var)
    if i < 0:
        return False
    d = d.move_dims(isl.dim_type.set, 0, isl.dim_type.param, i, 1)
    d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
    return d.is_singleton()


def transposed_columns(low, parts, row: str, name: str) -> bool:
    """Some read of the micro-kernels ``parts`` (``RegisterTiles.parts``)
    moves with the column and with the loop ``name`` but not in its last,
    contiguous index: the columns' lanes lie a row apart in memory, PyTorch's
    ``(out, in)`` layout of a weight per ``name``, ``h(b, e, o) +=! x(b, d) *
    We(e, o, d)``.  A tile covering several iterations of ``name`` would
    gather every vector; one iteration at a time, the column tiles copy the
    weight's panel transposed (panels._Panels) instead ((B, E, O, D) =
    (256, 8, 512, 512): 47 -> 9.3 ms on 2 cores)."""
    from tvm import tirx

    from ..polyhedral.isl_ast import iterator
    from .expr import INDEX
    from .lower import coefficient, loads, uses
    chain, leaves = parts
    for inner, call in leaves:
        j = iterator(inner)
        probe = {x: tirx.Var(x + "_p", INDEX) for x in {iterator(c) for c in chain} | {row, j, name}}
        with low.bound(probe):
            _, _, value, _ = low.statement_parts(call)
        for ld in loads(value):
            idx = list(ld.indices)
            if any(uses(x, probe[j]) for x in idx) and any(uses(x, probe[name]) for x in idx) \
                    and coefficient(idx[-1], probe[j]) == 0:
                return True
    return False


def transposed_loop(chunked, node, row: str) -> bool:
    """:func:`transposed_columns` for the micro-kernels in the parallel loop
    ``node`` of ``chunked`` (codegen/cpu.py, ``ChunkedLoop._outside_rows``)."""
    from tvm import tirx

    from ..polyhedral.isl_ast import iterator
    from .expr import INDEX
    name = iterator(node)
    with chunked.low.bound({name: tirx.Var(name + "_p", INDEX)}):
        return any(transposed_columns(chunked.low, p, row, name)
                   for p in chunked._micro_parts(node.for_get_body(), row))


def packed_loop(chunked, node, row: str) -> bool:
    """Some micro-kernel in the parallel loop ``node`` of ``chunked`` reads a
    k x columns panel that its column tiles copy (RegisterTiles._packable: a
    weight ``Wx(g, i, j)`` per gate of ``G(t, b, g, j) +=! x(t, b, i) *
    Wx(g, i, j)``).  Tiles deep over ``node`` copy no panels: one iteration at
    a time, the copied panel serves every row tile ((T, B, I, H) = (128, 64,
    256, 512): 149 -> 67 ms on 2 cores)."""
    from tvm import tirx

    from ..polyhedral.isl_ast import iterator
    from .expr import INDEX
    name = iterator(node)
    tiles = chunked.tiles
    with chunked.low.bound({name: tirx.Var(name + "_p", INDEX)}):
        return any(tiles._packable(chain, call, row, iterator(inner))
                   for chain, leaves in chunked._micro_parts(node.for_get_body(), row)
                   for inner, call in leaves)


def panels_shared_across(chunked, node, outer: str) -> bool:
    """The tiles of the parallel loop ``node`` (rows: its iterations) copy a
    panel, and every tensor they copy is read at the same elements whatever
    the enclosing loop ``outer`` (bound by the caller): a panel that the rows
    of both loops could share (codegen/collapse.py, ``divide``).  Not an
    RNN's weight per gate ``Wih(g, j, i)`` below ``for g``: its rows would
    read a panel per gate."""
    from tvm import tirx

    from ..polyhedral.isl_ast import iterator
    from .expr import INDEX
    from .lower import loads, uses
    row = iterator(node)
    tiles = chunked.tiles
    found = False
    with chunked.low.bound({row: tirx.Var(row + "_p", INDEX)}):
        for chain, leaves in chunked._micro_parts(node.for_get_body(), row):
            for inner, call in leaves:
                packed = {t for t, _, _ in tiles._packable(chain, call, row, iterator(inner))}
                if not packed:
                    continue
                found = True
                probe = tirx.Var(outer + "_q", INDEX)
                steps = {iterator(x): tirx.Var(iterator(x) + "_p", INDEX) for x in [*chain, inner]}
                with chunked.low.bound({outer: probe, **steps}):
                    _, _, value, _ = chunked.low.statement_parts(call)
                if any(ld.source.name in packed and any(uses(x, probe) for x in ld.indices) for ld in loads(value)):
                    return False
    return found


def wide_elements(kernel) -> bool:
    """Some statement of ``kernel`` computes 8-byte values (float64, int64):
    half the lanes per vector register, so its tiles get half the columns
    and lanes of the float32 defaults, as many registers (codegen/cpu.py,
    ``ChunkedLoop``; an Elman RNN in float64 at (64, 32, 256, 256) spilled
    its 8 x 48 accumulators: 10.0-10.6 -> 8.0-8.2 ms)."""
    return kernel is not None and any((s.info.comp.rhs.dtype or "").endswith("64") for s in kernel.stmts)


def gathers(kernel) -> bool:
    """The largest reductions of ``kernel`` (by loop depth) read a tensor at
    an index computed from another tensor's values at a reduction variable:
    every step of the reduction reads another row (an embedding bag's
    ``emb(idx(b, l), e)``, not a projection of looked-up rows, ``emb(tok(t,
    b), i) * W(r, i)``, whose rows stay while ``i`` runs).  A bag beside a
    deeper product (DeepFM's ``s(b, k) +=! E(idx(b, f), k)`` and ``h1(b, o)
    +=! W1(o, f, k) * E(idx(b, f), k)``) leaves the product its tiles: 5.7
    -> 4.3 ms at (2048, 26, 16, 400) on the Intel Xeon."""
    if kernel is None:
        return False
    depth = {True: 0, False: 0}
    for st in kernel.stmts:
        comp = st.info.comp
        if st.is_init or not comp.reduction_vars:
            continue
        red, bag = set(comp.reduction_vars), False
        for a in n.walk(comp.rhs):
            if not isinstance(a, n.Access):
                continue
            inner = [x for i in a.indices for x in n.walk(i) if isinstance(x, n.Access)]
            if any(isinstance(v, n.IndexVar) and v.name in red for x in inner for i in x.indices for v in n.walk(i)):
                bag = True
                break
        depth[bag] = max(depth[bag], len(st.dims))
    return depth[True] > 0 and depth[True] >= depth[False]
    for st in kernel.stmts:
        comp = st.info.comp
        if st.is_init or not comp.reduction_vars:
            continue
        red = set(comp.reduction_vars)
        for a in n.walk(comp.rhs):
            if not isinstance(a, n.Access):
                continue
            inner = [x for i in a.indices for x in n.walk(i) if isinstance(x, n.Access)]
            if any(isinstance(v, n.IndexVar) and v.name in red for x in inner for i in x.indices for v in n.walk(i)):
                return True
    return False
