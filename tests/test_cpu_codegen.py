"""The CPU code generator's mapping (tcdsl/codegen/cpu.py): chunks of rows,
register tiles for reductions, the sequential loop inside the parallel one.
Each structural check comes with a NumPy check of the code it describes."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.codegen.cpu import vector_lanes
from helpers import ELMAN, QRNN, conv2d_valid, elman_inputs, parallel_regions, qrnn_inputs, rand, reference

MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
# Every step reads all of the previous step's x: the rows depend on each other.
MIXING = """def mix(float(T,N) x0, float(N,N) W) -> (x) {
  for t in T {
    if t == 0 { x(t,i) = x0(t,i) } else { x(t,i) +=! x(t-1,j) * W(j,i) }
  }
}"""


def _mixing_reference(x0, W):
    x = np.zeros_like(x0, dtype=np.float64)
    x[0] = x0[0]
    for t in range(1, x0.shape[0]):
        x[t] = x[t - 1] @ W
    return x


TILE = {"tile_rows": 6, "tile_cols": 32, "vector_width": 8}  # fixed here: the defaults depend on the host


def test_matmul_accumulates_in_a_register_tile():
    k = tcdsl.compile(MATMUL, options=TILE)
    # a 6 x 32 tile of accumulators, loaded before the k loop, updated as 8-wide vectors
    assert "T.alloc_buffer((6, 32))" in k.script
    assert re.search(r"for c\d_k in range\(.*K.*\):\s+for r in T\.unroll\(6\):\s+for u in T\.unroll\(4\):"
                     r"\s+for v in T\.vectorized\(8\):\s+acc\[r, u \* 8 \+ v\] = acc\[r, u \* 8 \+ v\] \+", k.script)
    # the columns left over by the 32-wide tiles: 8-wide tiles, then single columns
    assert "T.alloc_buffer((6, 8))" in k.script and "T.alloc_buffer((1, 1))" in k.script


def test_wide_tiles_update_column_vector_by_column_vector():
    """A tile with more column vectors than rows (2 x 48: 6 vectors) updates
    one vector at a time for all its rows, so that the rows' 2 scalars, not
    its 6 vectors, stay in registers beside the 12 accumulators (16 on
    AVX2); loading and storing the accumulators keep rows outermost."""
    k = tcdsl.compile(MATMUL, options={"tile_rows": 2, "tile_cols": 48, "vector_width": 8})
    s = k.script
    assert re.search(r"for c\d_k in range\(.*K.*\):\s+for u in T\.unroll\(6\):\s+for r in T\.unroll\(2\):"
                     r"\s+for v in T\.vectorized\(8\):\s+acc\[r, u \* 8 \+ v\] = acc\[r, u \* 8 \+ v\] \+", s)
    assert re.search(r"acc = T\.alloc_buffer\(\(2, 48\)\)\s+for r in T\.unroll\(2\):\s+for u in T\.unroll\(6\):", s)
    rng = np.random.default_rng(4)
    for M, K, N in [(5, 7, 100), (2, 3, 48), (1, 1, 1)]:
        A, B = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        np.testing.assert_allclose(k(A, B), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


def test_default_tiles_fit_the_host():
    from tcdsl import host, options
    from tcdsl.codegen import targets

    m = options.parse({}).cpu.resolved(in_loop=False)
    assert (m.tile_rows, m.tile_cols, m.vector_width) == tuple(options.host_defaults().values())
    assert m.vector_width == (16 if host.avx512() else 8)
    assert f"T.alloc_buffer(({m.tile_rows}, {m.tile_cols}))" in tcdsl.compile(MATMUL).script
    # inside a sequential loop (an RNN's batch rows): the loop's own default, within the registers
    r = options.parse({}).cpu.resolved(in_loop=True)
    assert r.tile_rows * r.tile_cols * 4 <= options.MAX_TILE_BYTES and r.tile_cols % r.vector_width == 0
    assert (r.tile_rows, r.tile_cols) == tuple(options.host_defaults(in_loop=True).values())[:2]
    assert f"T.alloc_buffer(({r.tile_rows}, {r.tile_cols}))" in tcdsl.compile(ELMAN).script
    # a vector width alone keeps the tile's number of vectors
    assert options.parse({"vector_width": 4}).cpu.resolved(False).tile_cols == m.tile_cols // m.vector_width * 4
    if host.avx512():  # LLVM may use zmm registers for the 16-lane vectors
        assert "-prefer-256-bit" in str(targets.make_target("llvm"))


def test_matmul_copies_the_shared_panel():
    """B's k x 32 panel is copied to contiguous memory when at least two row
    tiles of a chunk use it (rows of B at a power-of-two stride share cache
    sets); A, which moves with the rows, is read in place."""
    k = tcdsl.compile(MATMUL, options=TILE)
    assert re.search(r"B_panel\[c\d_pk \* 32 \+ u \* 8 \+ v\] = B\[c\d_pk, ", k.script)
    assert re.search(r"acc\[r, u \* 8 \+ v\] \+ A\[.*\] \* B_packed\[", k.script)
    assert "A_panel" not in k.script


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (5, 3, 37), (4, 8, 32), (9, 17, 71), (33, 2, 40), (3, 0, 9),
                                   (50, 37, 70), (130, 64, 33)])
def test_matmul_tiles_and_tails(M, K, N):
    """Sizes around the tile edges: rows in 4s plus 1..3, columns in 32s,
    8s and single ones, an empty reduction."""
    rng = np.random.default_rng(M * 100 + N)
    A, B = rand(rng, M, K), rand(rng, K, N)
    k = tcdsl.compile(MATMUL)
    np.testing.assert_allclose(k(A, B), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


def test_rows_after_the_last_full_tile_get_wider_tiles():
    """The rows left after the last full row tile (all of them at batch 1)
    run one at a time in tiles of 16 and 8 vectors, so that a row still has
    enough accumulators to hide the FMA latency."""
    k = tcdsl.compile(MATMUL, options=TILE)  # 6 x 32 tiles of 8-wide vectors
    assert "T.alloc_buffer((1, 128))" in k.script and "T.alloc_buffer((1, 64))" in k.script
    rng = np.random.default_rng(7)
    assert "T.alloc_buffer((1, 4))" in k.script  # half a vector before single columns
    for M, N in [(1, 500), (3, 192), (7, 257), (2, 63), (1, 13)]:  # 128-, 64-, 32-, 8-, 4-wide and single columns
        A, B = rand(rng, M, 19), rand(rng, 19, N)
        np.testing.assert_allclose(k(A, B), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    x = elman_inputs(rng, 6, 1, 9, 300)  # batch 1: every row is left over
    np.testing.assert_allclose(tcdsl.compile(ELMAN)(*x), reference.elman_rnn(*x), rtol=1e-5, atol=1e-5)


BIASED = """def lin(float(M,K) A, float(K,N) B, float(M,N) bias) -> (C) {
  C(m,n) = bias(m,n)
  C(m,n) += A(m,k) * B(k,n)
}"""


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.slow
def test_last_vector_overlaps_and_stores_only_new_columns(overlap):
    """The columns after the last full vector (37 = 4 x 8 + 5) run as one
    vector ending at the last column, whose first 3 lanes were summed by the
    tile before it and are stored unchanged (a select on the store): with a
    ``+=`` onto a bias the output would add the products twice there.
    Columns fewer than a vector take the narrow tiles, here and in the
    steps of a recurrence."""
    k = tcdsl.compile(BIASED, options={**TILE, "overlap_tail": overlap})
    assert ("T.Select(" in k.script) == overlap
    rng = np.random.default_rng(11)
    for M, K, N in [(7, 5, 37), (13, 9, 33), (1, 4, 15), (6, 3, 7), (5, 2, 8), (12, 11, 71)]:
        A, B, bias = rand(rng, M, K), rand(rng, K, N), rand(rng, M, N)
        np.testing.assert_allclose(k(A, B, bias), bias + A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    k = tcdsl.compile(ELMAN, options={"tile_cols": 16, "vector_width": 8, "overlap_tail": overlap})
    for B, C in [(6, 21), (5, 37), (1, 13), (3, 8)]:
        x = elman_inputs(rng, 4, B, 7, C)
        np.testing.assert_allclose(k(*x), reference.elman_rnn(*x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [
    {"cpu_threads": 1}, {"cpu_threads": 3}, {"chunk_rows": 1}, {"chunk_rows": 5, "tile_rows": 2},
    {"tile_cols": 16, "vector_width": 4}, {"parallel": False}, {"register_tiles": False},
])
def test_mapping_options_keep_results(options):
    rng = np.random.default_rng(1)
    A, B = rand(rng, 11, 13), rand(rng, 13, 45)
    k = tcdsl.compile(MATMUL, options=options)
    np.testing.assert_allclose(k(A, B), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    x = elman_inputs(rng, 5, 7, 9, 20)
    np.testing.assert_allclose(tcdsl.compile(ELMAN, options=options)(*x), reference.elman_rnn(*x),
                               rtol=1e-5, atol=1e-5)


def test_register_tiles_option():
    assert "acc = T.alloc_buffer" not in tcdsl.compile(MATMUL, options={"register_tiles": False}).script
    assert "T.alloc_buffer((2, 16))" in tcdsl.compile(MATMUL, options={"tile_rows": 2, "tile_cols": 16,
                                                                       "vector_width": 8}).script


@pytest.mark.parametrize("bad, message", [
    ({"tile_rows": -1}, "'tile_rows' must be a positive integer"),
    ({"tile_cols": 12}, "multiple of 'vector_width'"),
    ({"tile_rows": 16, "tile_cols": 32}, "too large"),  # 512 elements: more than 28 AVX-512 registers
    ({"parallel": 1}, "'parallel' must be True or False"),
    ({"cpu_threads": -1}, "'cpu_threads' must be a positive integer"),
])
def test_bad_mapping_options(bad, message):
    with pytest.raises(tcdsl.TcError, match=message):
        tcdsl.compile(MATMUL, options=bad)


def test_rnn_steps_run_inside_the_parallel_loop():
    """Elman and QRNN rows (batch entries) never depend on each other across
    steps, so the schedule marks the parallel loop par_steps and the time loop
    runs inside each thread's chunk: one parallel region per call."""
    steps_inside = (r"for c0_chunk in T\.parallel\(.*\):\s+c0_lo: T\.let\[T\.int32\] = .*\s+"
                    r"c0_rows: T\.let\[T\.int32\] = .*\s+for t(, c0_r in T\.grid| in range)\(")
    for path in (ELMAN, QRNN):
        k = tcdsl.compile(path, options={"hoist": False})
        assert "par_steps" in tcdsl.driver.emit(k, "schedule")
        assert re.search(steps_inside, k.script), path
        assert parallel_regions(k.script) == 1
    # with the QRNN's gates hoisted (test_hoist.py), the loop that is left runs inside
    k = tcdsl.compile(QRNN)
    assert re.search(steps_inside, k.script) and parallel_regions(k.script) > 1
    rng = np.random.default_rng(2)
    for T, B, C, H in [(1, 1, 1, 1), (6, 5, 3, 9), (4, 9, 8, 33)]:
        x = qrnn_inputs(rng, T, B, C, H)
        h, c = k(*x)
        rh, rc = reference.qrnn(*x)
        np.testing.assert_allclose(h, rh, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c, rc, rtol=1e-5, atol=1e-5)


def test_steps_inside_option_puts_the_loop_back_outside():
    k = tcdsl.compile(ELMAN, options={"steps_inside": False, "hoist": True})
    # (between them only the chunk size's bindings, codegen/cpu_strips.opaque)
    assert re.search(r"for t in range\(.*\):\s+(c0_ck\S*: .*\n\s+)*for c0_chunk in T\.parallel", k.script)
    x = elman_inputs(np.random.default_rng(3), 4, 6, 5, 12)
    np.testing.assert_allclose(k(*x), reference.elman_rnn(*x), rtol=1e-5, atol=1e-5)


def test_rows_that_depend_on_each_other_keep_one_parallel_region_per_step():
    k = tcdsl.compile(MIXING)
    assert "par_steps" not in tcdsl.driver.emit(k, "schedule")
    assert re.search(r"for t in range\(.*\):", k.script)
    assert not re.search(r"T\.parallel\(.*\):\s+for t in range", k.script)
    rng = np.random.default_rng(4)
    for T, N in [(1, 3), (5, 9), (7, 40)]:
        x0, W = rand(rng, T, N), rand(rng, N, N)
        np.testing.assert_allclose(k(x0, W), _mixing_reference(x0, W), rtol=1e-4, atol=1e-5)


def test_mapping_options_object():
    opts = tcdsl.MappingOptions(tile_rows=2, tile_cols=16)
    assert opts.to_dict() == {"tile_rows": 2, "tile_cols": 16}
    assert tcdsl.MappingOptions.from_dict({"tile_rows": 2, "tile_cols": 16, "disk_cache": False}) == opts
    assert opts.replace(tile_rows=0).to_dict() == {"tile_cols": 16}  # 0: the host default
    k = tcdsl.compile(MATMUL, options=opts)
    assert "T.alloc_buffer((2, 16))" in k.script
    A, B = rand(np.random.default_rng(5), 7, 5), rand(np.random.default_rng(6), 5, 19)
    np.testing.assert_allclose(k(A, B), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    with pytest.raises(tcdsl.TcError, match="expected a dict or tcdsl.MappingOptions"):
        tcdsl.compile(MATMUL, options=[("tile_rows", 2)])


CONV = ("def conv(float(N,C,H,W) I, float(M,C,KH,KW) Wt) -> (O) "
        "{ O(n,m,h,w) +=! I(n,c,h+kh,w+kw) * Wt(m,c,kh,kw) }")


def test_convolution_tiles_rows_of_an_inner_parallel_loop():
    """Convolution without deep tiles (``tile_depth`` 1, see
    test_cpu_depth.py for the default): the register tile sits below the
    parallel n and m loops, over output rows h x columns w, accumulating over
    the kh, kw, c nest (the window outside the channels)."""
    k = tcdsl.compile(CONV, options={**TILE, "tile_depth": 1})
    assert re.search(r"for c\d_k, c\d_k, c\d_k in T\.grid\(T\.max\(KH, 0\), T\.max\(KW, 0\), T\.max\(C, 0\)\):"
                     r"\s+for r in T\.unroll\(6\):", k.script)
    # the tile's rows are output rows h (below n and m), not images n
    # (the outer indices in 64 bits: test_cpu_depth.py::test_sliding_windows_read_with_64_bit_offsets)
    plain = re.sub(r'T\.Cast\("int64", ([^,\]()]+)\)(?=[,\]])', r"\1", k.script)
    assert re.search(r"I_1\[c0, c\d_k, c\d_b \* 6 \+ r \+ c\d_k, ", plain)
    rng = np.random.default_rng(7)
    for ishape, wshape in [((2, 3, 7, 40), (5, 3, 2, 3)), ((1, 1, 1, 1), (1, 1, 1, 1)), ((3, 2, 9, 9), (4, 2, 3, 3))]:
        I, W = rand(rng, *ishape), rand(rng, *wshape)
        np.testing.assert_allclose(k(I, W), conv2d_valid(I.astype(np.float64), W), rtol=1e-5, atol=1e-5)


PADDED_CONV = """def conv(float(B, C, H, W) x, float(O, C, 3, 3) w) -> (y) {
  y(b, o, i, j) +=! (i + kh - 1 >= 0 && i + kh - 1 < H && j + kw - 1 >= 0 && j + kw - 1 < W
                     ? x(b, c, i + kh - 1, j + kw - 1) : 0) * w(o, c, kh, kw)
    where i in 0:H, j in 0:W, kh in 0:3, kw in 0:3
}"""


def test_batch_and_chunks_of_channels_share_the_parallel_loop():
    """A convolution's batch loop holds register tiles whose rows are the
    output channels: one parallel loop runs over the pairs (image, chunk of
    channels), so at batch 1 every thread gets channels (the batch loop alone
    gave batch 1 one core)."""
    k = tcdsl.compile(PADDED_CONV)
    m = re.search(r"for (c\d)_pair in T\.parallel\(T\.max\(B, 0\) \* \(\(T\.max\(O, 0\) \+ (\w+) - 1\) // \2\)\):"
                  r"\s+(\w+) = T\.alloc_local\(\(2,\), \"int32\"\)\s+\3\[0\] = \1_pair // .*\s+\3\[1\] = \1_pair % .*"
                  r"\s+c\d: T\.let\[T\.int32\] = \3\[0\]\s+\1_chunk: T\.let\[T\.int32\] = \3\[1\]", k.script)
    assert m, "no parallel loop over (image, chunk of channels)"
    # the image and chunk are computed once per iteration (through a local array the simplifier does not
    # see through), not in every index: there, divisions by a variable took TVM's LowerIntrin minutes
    assert k.script.count(m.group(1) + "_pair //") == 1
    rng = np.random.default_rng(11)
    for B, C, H, W, O in [(1, 3, 9, 20, 37), (3, 5, 7, 17, 9), (2, 1, 1, 1, 1), (1, 4, 5, 33, 64)]:
        x, w = rand(rng, B, C, H, W), rand(rng, O, C, 3, 3)
        padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        np.testing.assert_allclose(k(x, w), conv2d_valid(padded, w), rtol=1e-5, atol=1e-5)


def test_source_code_formats():
    k = tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) * 2 }")
    assert "define" in k.source_code("ll")
    assert re.search(r"\bv(mul|add)ps\b", k.source_code("asm"))  # AVX: the host CPU target
    c = k.source_code("c")  # TVM's C code generator, not LLVM IR
    assert "int32_t" in c and "#include" in c and "define void" not in c
    with pytest.raises(tcdsl.TcError, match="unknown format 'x'"):
        k.source_code("x")


def test_statements_of_one_step_get_lean_register_tiles():
    """The t == 0 branch of the Elman RNN (h0 . h2h) runs in one step of the
    time loop: register tiles of the main width, but none of the narrower
    column tiles or leftover-row tiles the other steps' h2h product gets (less
    code to compile where the loop is long)."""
    s = tcdsl.compile(ELMAN).script
    assert re.search(r"acc\[r, [^\]]*\] \+ h2h\[[^\]]*\] \* h0\[", s)
    assert re.search(r"acc\[r, [^\]]*\] \+ h2h\[[^\]]*\] \* hidden\[t - 1", s)
    lean = len(re.findall(r"\* h0\[", s))
    full = len(re.findall(r"\* hidden\[t - 1", s))
    assert lean < full, (lean, full)


# A stack of layers in a loop: the first layer's product (x . W(0)) runs in one
# step of ``for l``, a quarter of the work at L = 4
MLP_LAYERS = """def mlp(float(B,H) x, float(L,H,H) W) -> (h) {
  for l in L {
    if l == 0 { h(l, b, j) +=! x(b, k) * W(l, k, j) }
    else { h(l, b, j) +=! h(l - 1, b, k) * W(l, k, j) }
    h(l, b, j) = fmax(h(l, b, j), 0)
  }
}"""


def test_the_first_layer_of_a_loop_of_layers_runs_in_register_tiles():
    s = tcdsl.compile(MLP_LAYERS, options={"disk_cache": False}).script
    assert re.search(r"acc\[r, [^\]]*\] = acc\[r, [^\]]*\] \+ x\[[^\n]*\* W", s), s
    rng = np.random.default_rng(4)
    for mode in ("never", "after-scheduling"):
        k = tcdsl.compile(MLP_LAYERS, specialize=mode, options={"disk_cache": False})
        for B, H, L in [(1, 1, 1), (5, 7, 3), (19, 40, 2)]:
            x, W = rand(rng, B, H), rand(rng, L, H, H)
            want, h = [], x.astype(np.float64)
            for l in range(L):
                h = np.maximum(h @ W[l], 0)
                want.append(h)
            np.testing.assert_allclose(k(x, W), np.stack(want), rtol=1e-5, atol=1e-5)


# Layers in a loop whose projection has a gate index before the batch and time
# (a transformer's ``qkv(g, b, t, o)``): three gates are too few rows for a tile
LAYER_GATES = """def layers(float(B,T,C) x, float(L,3,C,C) W) -> (y) {
  for l in L {
    if l == 0 { cur(b, t, c) = x(b, t, c) } else { cur(b, t, c) = y(l - 1, b, t, c) }
    q(g, b, t, o) +=! cur(b, t, c) * W(l, g, o, c)
    y(l, b, t, o) = q(0, b, t, o) * q(1, b, t, o) + q(2, b, t, o)
  }
}"""


def test_tiles_in_a_loop_take_rows_that_share_the_weights():
    """In a loop of layers the projection's register tiles take their rows
    from ``t``, whose rows all read the same panel of ``W``, not from the gate
    ``g``, each of whose rows reads a panel of its own (every ``t`` read all of
    ``W`` again: a 2-layer transformer encoder ran 3.5x the same layer called
    twice)."""
    s = tcdsl.compile(LAYER_GATES, options={"disk_cache": False}).script
    updates = re.findall(r"acc\[r, [^\]]*\] = acc\[r, [^\]]*\] \+ cur\[([^\]]*)\] \* W\w*\[([^\]]*)\]", s)
    assert updates, s
    for cur, w in updates:
        assert re.search(r"\br\b", cur) and not re.search(r"\br\b", w), (cur, w)
    rng = np.random.default_rng(5)
    for mode in ("never", "after-scheduling"):
        k = tcdsl.compile(LAYER_GATES, specialize=mode, options={"disk_cache": False})
        for B, T, C, L in [(1, 1, 1, 1), (2, 9, 5, 3), (3, 20, 33, 2)]:
            x, W = rand(rng, B, T, C), rand(rng, L, 3, C, C)
            want, cur = [], x.astype(np.float64)
            for l in range(L):
                q = np.einsum("btc,goc->gbto", cur, W[l])
                cur = q[0] * q[1] + q[2]
                want.append(cur)
            np.testing.assert_allclose(k(x, W), np.stack(want), rtol=1e-4, atol=1e-4)


# a gated layer in a loop: two gates outside the output channels
GATED_LOOP = """def gl(float(B,C,T) x, float(L,2,C,C) W) -> (h) {
  for l in L {
    if l == 0 { cur(b, c, t) = x(b, c, t) } else { cur(b, c, t) = h(l - 1, b, c, t) }
    a(g, b, o, t) +=! W(l, g, o, c) * cur(b, c, t)
    h(l, b, o, t) = tanh(a(0, b, o, t)) * sigmoid(a(1, b, o, t))
  }
}"""


def test_two_gates_give_no_rows_where_the_channels_inside_can():
    """Two gates, fewer than a tile's rows, fixed by the program: the tiles
    take their rows from the output channels ``o`` inside them (WaveNet's
    gated convolution ran its tiles' rows in the leftover tiles of two rows)."""
    s = tcdsl.compile(GATED_LOOP, options={"disk_cache": False}).script
    ups = re.findall(r"acc\[r, [^\]]*\] = acc\[r, [^\]]*\] \+ W\w*\[([^\]]*)\] \* cur", s)
    assert ups, s
    assert not any(re.match(r"l, \w+ \* \d+ \+ r,", idx) for idx in ups), ups
    rng = np.random.default_rng(6)
    k = tcdsl.compile(GATED_LOOP, options={"disk_cache": False})
    for B, C, T, L in [(1, 1, 1, 1), (2, 9, 21, 3)]:
        x, W = rand(rng, B, C, T), rand(rng, L, 2, C, C)
        want, cur = [], x.astype(np.float64)
        for l in range(L):
            a = np.einsum("goc,bct->gbot", W[l], cur)
            cur = np.tanh(a[0]) / (1 + np.exp(-a[1]))
            want.append(cur)
        np.testing.assert_allclose(k(x, W), np.stack(want), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_strided_isl_loops():
    """With sizes fixed before scheduling isl may find a stride (a convolution
    with strides 2 and 3 over a padded input): such a loop runs over its
    values (it raised 'only unit-stride isl loops are generated')."""
    import pathlib
    import sys

    programs = pathlib.Path(__file__).resolve().parent / "programs"
    sys.path.insert(0, str(programs))
    import cases

    case = cases.by_name("padded_conv")
    sizes = {"N": 2, "C": 3, "H": 6, "W": 5, "M": 2, "KH": 3, "KW": 2}
    k = tcdsl.compile(programs / case.file, case.entry, specialize="before-scheduling")
    inputs = case.make_inputs(np.random.default_rng(8), **sizes)
    for got, want in zip(k(*inputs), case.reference(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("file, entry", [("lstm.tc", "lstm"), ("gru.tc", "gru")])
def test_lstm_and_gru_steps_keep_their_vector_loops(file, entry):
    """isl fuses an LSTM step into one band that its reductions make serial
    (no vector loop: 1.2 s for (64, 32, 256)); the schedule keeps the outer
    parallel loop over b, with the time loop inside it, and gives every
    statement its own nest, innermost loop parallel (vectorized)."""
    from helpers import ROOT

    k = tcdsl.compile(ROOT / "tests" / "programs" / file, entry, options={"hoist": False})
    ast = tcdsl.driver.emit(k, "isl-ast").split("// par_steps")[1]
    statements = re.findall(r"^\s*(S\d+)\(", ast, re.M)
    assert statements
    for s in set(statements):  # the loop around each statement is a `par` loop
        assert re.search(r"// par\n\s*for \(int (c\d+)[^\n]*\n\s*" + s + r"\(", ast), s
    assert re.search(r"T\.parallel\(.*\):\s+c0_lo: .*\s+c0_rows\w*: .*\s+for t(, c0_r\w* in T\.grid| in range)\(", k.script)
    # the LSTM's gate loop g runs outside the register tiles over the batch rows (both loops are parallel)
    from tcdsl.options import host_defaults

    rows, cols = tuple(host_defaults(in_loop=True).values())[:2]
    assert entry != "lstm" or re.search(
        rf"for c1 in range\([34]\):\s+(for c4_w{cols} in range\(.*\):\s+(\w+_packed = T\.decl_buffer\(.*\)\s+)?"
        rf"for c0_b in range\(c0_rows\w* // {rows}\)"
        rf"|for c4_w{cols}, c0_b in T\.grid\(.*, c0_rows\w* // {rows}\)):\s+acc = T\.alloc_buffer\(\({rows}, {cols}\)\)",
        k.script)


# QRNN fo-pooling alone (benchmarks/rnn.py): an elementwise recurrence
FO_POOL = """def fo_pool(float(T,B,C) F, float(T,B,C) Z, float(T,B,C) O) -> (h) {
  for t in T {
    if t == 0 { c(t,b,j) = (1 - F(t,b,j)) * Z(t,b,j) }
    else      { c(t,b,j) = F(t,b,j) * c(t-1,b,j) + (1 - F(t,b,j)) * Z(t,b,j) }
    h(t,b,j) = O(t,b,j) * c(t,b,j)
  }
}"""


def _fo_pool_reference(F, Z, O):
    c = np.zeros(F.shape[1:])
    h = np.empty(F.shape)
    for t in range(F.shape[0]):
        c = F[t] * c + (1 - F[t]) * Z[t]
        h[t] = O[t] * c
    return h


@pytest.mark.parametrize("sizes", [None, {"T": 9, "B": 5, "C": 21}])
def test_elementwise_recurrence_streams_each_threads_columns(sizes):
    """Every thread runs all the steps over its own rows (one parallel region,
    no barrier between steps), the state in one slot updated in place, the columns in
    stride-1 vectors; results checked at sizes that leave a vector tail and
    an uneven last chunk."""
    k = tcdsl.compile(FO_POOL, sizes=sizes)
    s = k.script
    assert parallel_regions(s) == 1
    assert re.search(r"for c0_chunk in T\.parallel\(.*\):\s+c0_lo: .*\s+c0_rows: .*\s+"
                     rf"for t, c0_r in T\.grid\(.*\):\s+for c1_o in range\(.*\):\s+for c1_v in T\.vectorized\({vector_lanes()}\):", s)
    assert re.search(r"c = T\.alloc_buffer\(\(1, ", s)
    rng = np.random.default_rng(5)
    for T, B, C in ([(9, 5, 21)] if sizes else [(1, 1, 1), (9, 5, 21), (3, 7, 8), (17, 3, 131)]):
        F, Z, O = (rng.random((T, B, C), dtype=np.float32) for _ in range(3))
        np.testing.assert_allclose(k(F, Z, O), _fo_pool_reference(F, Z, O), rtol=1e-5, atol=1e-6)


def test_gathered_rows_get_tiles_of_half_the_rows_and_twice_the_columns():
    """An embedding bag reads each row of its table through an index: its
    register tiles take half the host's rows and twice its columns, so that a
    tile reads a gathered row whole; results against NumPy, tails included."""
    from tcdsl.driver import emit
    from tcdsl.options import host_defaults

    src = "def bag(int32(B,L) idx, float(V,E) emb) -> (y) { y(b, e) +=! emb(idx(b, l), e) / L }"
    d = host_defaults(False)
    rows, cols = max(1, d["tile_rows"] // 2), 2 * d["tile_cols"]
    k = tcdsl.compile(src, options={"disk_cache": False})
    assert f"acc = T.alloc_buffer(({rows}, {cols}))" in emit(k, "tir")
    given = tcdsl.compile(src, options={"disk_cache": False, "tile_rows": d["tile_rows"]})
    assert f"acc = T.alloc_buffer(({d['tile_rows']}, {d['tile_cols']}))" in emit(given, "tir")  # options win
    rng = np.random.default_rng(5)
    for B, L, V, E in [(1, 1, 1, 1), (5, 3, 7, 2 * cols + 9), (9, 4, 50, cols)]:
        idx = rng.integers(0, V, (B, L)).astype(np.int32)
        emb = rng.standard_normal((V, E)).astype(np.float32)
        np.testing.assert_allclose(k(idx, emb), emb[idx].mean(1), rtol=1e-5, atol=1e-6)


def test_a_bag_beside_a_deeper_product_leaves_the_product_the_hosts_tiles():
    """DeepFM: a bag ``s(b, k) +=! E(idx(b, f), k)`` fused with ``h1(b, o) +=!
    W1(o, f, k) * E(idx(b, f), k)``, a product over (f, k) per output: the
    product keeps the host's tiles (half the rows cost it 1.3x torch)."""
    from tcdsl.driver import emit
    from tcdsl.options import host_defaults

    src = """def f(int32(B,F) idx, float(N,K) E, float(H,F,K) W1) -> (h1, s) {
  s(b, k) +=! E(idx(b, f), k)
  h1(b, o) +=! W1(o, f, k) * E(idx(b, f), k)
}"""
    d = host_defaults(False)
    k = tcdsl.compile(src, options={"disk_cache": False})
    tir = emit(k, "tir")
    assert f"acc = T.alloc_buffer(({d['tile_rows']}, {d['tile_cols']}))" in tir, tir
    assert f"acc = T.alloc_buffer(({max(1, d['tile_rows'] // 2)}, {2 * d['tile_cols']}))" not in tir, tir
    rng = np.random.default_rng(6)
    for B, F, K, N, H in [(1, 1, 1, 1, 1), (9, 3, 5, 11, 70), (5, 4, 16, 30, 9)]:
        idx = rng.integers(0, N, (B, F)).astype(np.int32)
        E, W1 = rng.standard_normal((N, K)).astype(np.float32), rng.standard_normal((H, F, K)).astype(np.float32)
        h1, s = k(idx, E, W1)
        np.testing.assert_allclose(s, E[idx].sum(1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(h1, E[idx].reshape(B, -1) @ W1.reshape(H, -1).T, rtol=1e-4, atol=1e-4)


def test_looked_up_rows_of_a_projection_keep_the_hosts_tiles():
    """``emb(tok(b), i) * W(i, j)``: the gathered row stays while the reduction runs (a projection of
    looked-up rows, a matmul): the host's tile shape."""
    from tcdsl.driver import emit
    from tcdsl.options import host_defaults

    src = "def f(int32(B) tok, float(V,I) emb, float(I,J) W) -> (y) { y(b, j) +=! emb(tok(b), i) * W(i, j) }"
    d = host_defaults(False)
    k = tcdsl.compile(src, options={"disk_cache": False})
    assert f"acc = T.alloc_buffer(({d['tile_rows']}, {d['tile_cols']}))" in emit(k, "tir")
    rng = np.random.default_rng(6)
    tok = rng.integers(0, 7, 9).astype(np.int32)
    emb, w = rng.standard_normal((7, 5)).astype(np.float32), rng.standard_normal((5, 70)).astype(np.float32)
    np.testing.assert_allclose(k(tok, emb, w), emb[tok] @ w, rtol=1e-5, atol=1e-5)



def test_loop_invariant_nested_conditions_keep_both_branches():
    # TVM's HoistIfThenElse dropped the ``then`` branch when it hoisted an
    # ``if`` whose ``else`` holds another ``if`` out of a loop; the build
    # pipeline leaves the pass out (codegen/targets.py)
    import tvm
    from tvm.script import tirx as T
    from tcdsl.codegen import targets

    @T.prim_func
    def f(C: T.int32, L: T.int32, w: T.Buffer((3, 8), "float32"), y: T.Buffer((8,), "float32")):
        for c1 in range(3):
            for c2 in range(C):
                if c1 == 2:
                    y[L - 1] = y[L - 1] + w[2, c2]
                else:
                    if c1 == 0:
                        y[0] = y[0] + w[0, c2]
    ex = targets.build(f.with_attr("global_symbol", "f"), targets.make_target("llvm"))
    w = np.arange(24, dtype=np.float32).reshape(3, 8) + 1
    y = tvm.runtime.tensor(np.zeros(8, np.float32))
    ex["f"](5, 8, tvm.runtime.tensor(w), y)
    want = np.zeros(8, np.float32)
    want[7], want[0] = w[2, :5].sum(), w[0, :5].sum()
    np.testing.assert_array_equal(y.numpy(), want)
