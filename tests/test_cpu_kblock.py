"""k-blocking of packed reductions on the CPU (tcdsl/codegen/cpu.py, ``_Panels``):
with ``k_block`` > 0 the reduction loop of a matmul-like kernel is cut into
blocks of ``k_block`` steps (the default, 0, keeps it whole), each block of the right-hand panel copied once and used by all row
tiles.  Sizes around the block edges and tails, symbolic and specialized,
and the ``k_block`` option."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import tcdsl
from helpers import rand

MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


def _check(k, M, K, N, seed=0):
    rng = np.random.default_rng(seed + M * 10007 + K * 101 + N)
    A, B = rand(rng, M, K), rand(rng, K, N)
    got = k(A, B)
    want = A.astype(np.float64) @ B.astype(np.float64)
    # fp32 sums of K products of inputs of magnitude <= 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * max(K, 1) ** 0.5 + 1e-6)
    return A, B, got


# K around the edges of 64-step blocks (63/64/65, 127/128/129, ...) and tails
SIZES = [(9, 1, 65), (17, 7, 64), (33, 100, 129), (8, 63, 64), (8, 64, 64), (8, 65, 64), (8, 127, 64),
         (8, 128, 64), (8, 129, 64), (41, 300, 67), (65, 1000, 130), (13, 257, 193), (3, 300, 64), (10, 0, 64)]
BLOCK = 64


@functools.lru_cache(maxsize=None)
def _kernel(k_block: int, **compile_args):
    return tcdsl.compile(MATMUL, options={"k_block": k_block}, **compile_args)


@pytest.mark.parametrize("k_block", [0, BLOCK])
@pytest.mark.parametrize("M,K,N", SIZES)
def test_symbolic_sizes(M, K, N, k_block):
    _check(_kernel(k_block), M, K, N)


@pytest.mark.parametrize("k_block", [0, BLOCK])
@pytest.mark.parametrize("M,K,N", [(33, 100, 129), (8, 129, 64), (41, 300, 67), (24, 1, 64), (8, 128, 64)])
def test_specialized_sizes(M, K, N, k_block):
    _check(_kernel(k_block, specialize="before-scheduling"), M, K, N)
    _check(tcdsl.compile(MATMUL, sizes={"K": K}, options={"k_block": k_block}), M, K, N)


def test_the_edge_tests_block():
    """The kernels the size tests above run with ``k_block`` really cut the
    reduction loop into blocks of BLOCK steps."""
    assert f"+ {BLOCK} - 1) // {BLOCK}" in _kernel(BLOCK).script
    # (the default: one block up to LONG_K steps, blocks of LONG_K_BLOCK past it, chosen at run time)
    assert re.search(r"c\d_kc: T\.let\[T\.int32\] = T\.Select\(T\.max\(K, 0\) > 4096, 512, T\.max\(T\.max\(K, 0\), 1\)\)",
                     _kernel(0).script), _kernel(0).script


@pytest.mark.parametrize("k_block", [1, 7, 64, 1 << 20])
def test_block_size_keeps_results_bitwise(k_block):
    """Each element still sums its products in k order: the block size
    changes no bit of the result."""
    base = tcdsl.compile(MATMUL)
    k = tcdsl.compile(MATMUL, options={"k_block": k_block})
    for M, K, N in [(41, 300, 67), (16, 129, 128), (9, 5, 64)]:
        A, B, got = _check(k, M, K, N)
        np.testing.assert_array_equal(got, base(A, B))


def test_mapping_options_field():
    opts = tcdsl.MappingOptions(k_block=32)
    assert opts.to_dict() == {"k_block": 32}
    assert tcdsl.MappingOptions.from_dict({"k_block": 32}) == opts
    assert tcdsl.MappingOptions().k_block == 0
    k = tcdsl.compile(MATMUL, options=opts)
    assert "(T.max(K, 0) + 32 - 1) // 32" in k.script
    _check(k, 20, 70, 64)


def test_default_block_size():
    from tcdsl.options import DEFAULT_K_BLOCK, parse

    assert parse({}).cpu.resolved(False).k_block == DEFAULT_K_BLOCK
    assert parse({"k_block": 0}).cpu.resolved(False).k_block == DEFAULT_K_BLOCK
    assert parse({"k_block": 5}).cpu.resolved(True).k_block == 5
    # the default: the whole reduction loop in one block, unless it is long (codegen/panels.py LONG_K)
    script = tcdsl.compile(MATMUL).script
    assert "B_block" in script and "T.Select(T.max(K, 0) > 4096, 512, T.max(T.max(K, 0), 1))" in script, script


@pytest.mark.parametrize("M,K,N", [(5, 4096, 64), (9, 4097, 70), (17, 5000, 33), (4, 9000, 130)])
def test_a_long_reduction_runs_in_blocks_bitwise(M, K, N):
    """Past LONG_K steps the default cuts the loop into blocks of 512 (the
    panel of a K x 64 column tile stays in a core's share of L2): the same
    bits as one block of any size."""
    A, B, got = _check(_kernel(0), M, K, N)
    np.testing.assert_array_equal(got, _kernel(1 << 20)(A, B))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "64"])
def test_bad_block_size(bad):
    with pytest.raises(tcdsl.TcError, match="'k_block' must be a positive integer"):
        tcdsl.compile(MATMUL, options={"k_block": bad})(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))


def test_block_loop_in_the_code():
    """With a packed panel: for each column tile, a loop over the k blocks
    around the block's copy and all row tiles, each reading only its block."""
    script = tcdsl.compile(MATMUL, options={"k_block": 96}).script
    kb = re.search(r"for (c\d_kb) in range\(\(T\.max\(K, 0\) \+ 96 - 1\) // 96\):\s+"
                   r"(c\d_kn): T\.let\[T\.int32\] = T\.min\(96, T\.max\(K, 0\) - \1 \* 96\)", script)
    assert kb, script
    assert re.search(r"B_block = T\.alloc_buffer\(\(T\.min\(T\.max\(K, 0\), 96\) \* \d+,\)\)", script)
    assert re.search(rf"for c\d_q in range\({kb.group(2)}\):", script)  # the block's copy
    assert re.search(rf"for c\d_k in range\({kb.group(2)}\):\s+for r in T\.unroll", script)  # the row tiles


def test_no_blocks_without_packing():
    """Inside a sequential loop no panel is copied and the reduction loop
    stays whole (an RNN's kernels)."""
    from helpers import ELMAN

    # (hoisting would move the input projection out of the loop, where it is packed)
    script = tcdsl.compile(ELMAN, options={"hoist": False}).script
    assert "_kb in range" not in script and "_panel" not in script


# ------------------------------------------------- transposed operands
# A right-hand operand read as B(n, k) (contiguous along the reduction) is
# copied to the same contiguous k x columns panel; the schedule puts the
# column loop innermost for it (polyhedral/strides.py, transposed).
TRANSPOSED = {
    "nt": ("def mm(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }", lambda A, B: A @ B.T),
    "tt": ("def mm(float(K,M) A, float(N,K) B) -> (C) { C(m,n) +=! A(k,m) * B(n,k) }", lambda A, B: A.T @ B.T),
    "batched_nt": ("def mm(float(G,M,K) A, float(G,N,K) B) -> (C) { C(g,m,n) +=! A(g,m,k) * B(g,n,k) }",
                   lambda A, B: A @ B.transpose(0, 2, 1)),
}


@pytest.mark.parametrize("name", TRANSPOSED)
@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_transposed_right_hand_operand(name, mode):
    src, ref = TRANSPOSED[name]
    k = tcdsl.compile(src, specialize=mode)
    rng = np.random.default_rng(len(name))
    for M, K, N in [(37, 129, 70), (8, 1, 64), (64, 300, 129)]:
        if name == "batched_nt":
            A, B = rand(rng, 3, M, K), rand(rng, 3, N, K)
        elif name == "tt":
            A, B = rand(rng, K, M), rand(rng, N, K)
        else:
            A, B = rand(rng, M, K), rand(rng, N, K)
        want = ref(A.astype(np.float64), B.astype(np.float64))
        np.testing.assert_allclose(k(A, B), want, rtol=1e-5, atol=2e-6 * K ** 0.5 + 1e-6)


def test_transposed_operand_is_copied_to_a_panel():
    script = tcdsl.compile(TRANSPOSED["nt"][0]).script
    # the copy reads rows of B(n, k) as contiguous vectors along k,
    # transposes blocks of them with shuffles, and stores contiguous vectors
    # of the panel; the steps after the last full block are copied one
    # element per lane, along the column n; the register tiles read the
    # panel (vectors of the host's width), not B
    assert re.search(r"B_r0: T\.let\[T\.float32x(\d+)\] = B\[.*, T\.Ramp\(.*, 1, \1\)\]", script), script
    assert "T.Shuffle([B_r0, B_r" in script
    assert re.search(r"B_panel\[.*:.*\] = B_t1_0", script)
    # (the columns of the product's group first: it is alone in its kernel, cpu_strips.two_way)
    assert re.search(r"B_panel\[.*\] = B\[(c\d_first \+ )?c\d_w(\d+) \* \2 \+ c\d_ur \* \d+ \+ c\d_vr", script), script
    assert "B_packed[" in script


@pytest.mark.parametrize("vw", [8, 16])
def test_transposing_copy_in_register_blocks(vw):
    # blocks of vw x vw elements: every row and step count around a block's
    # multiple, at either vector width (AVX2's 8 lanes, AVX-512's 16)
    src, ref = TRANSPOSED["nt"]
    k = tcdsl.compile(src, options={"vector_width": vw, "disk_cache": False})
    assert "T.Shuffle(" in k.script
    rng = np.random.default_rng(vw)
    for M, K, N in [(8, vw - 1, 4 * vw), (9, vw, 4 * vw + 1), (16, 3 * vw + 5, 8 * vw), (20, 2 * vw, 13)]:
        A, B = rand(rng, M, K), rand(rng, N, K)
        np.testing.assert_allclose(k(A, B), ref(A.astype(np.float64), B.astype(np.float64)), rtol=1e-5, atol=1e-5)


AVX2_TILES = {"vector_width": 8, "tile_rows": 4, "tile_cols": 24, "disk_cache": False}


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_column_counts_around_the_panel_widths_match_numpy(mode):
    """With 4 x 24 tiles: every column count around 8, 16 and 24 columns, and 256."""
    k = tcdsl.compile(MATMUL, specialize=mode, options=AVX2_TILES)
    for N in (9, 13, 15, 16, 23, 24, 31, 32, 40, 47, 56, 61, 64, 256):
        _check(k, 33, 19, N, seed=N)


# a weight per expert (or head, or gate) in PyTorch's (out, in) layout: the
# column o moves the weight by a row, the expert e is a parallel loop between
# the batch rows and the tiles
PER_EXPERT = "def moe(float(B,D) x, float(E,O,D) W) -> (h) { h(b, e, o) +=! x(b, d) * W(e, o, d) }"
PER_EXPERT_LOOP = """
def heads(float(T,B,D) x, float(E,O,D) W) -> (h) {
  for t in T { h(t, b, e, o) +=! x(t, b, d) * W(e, o, d) }
}"""


def test_weight_per_expert_out_in_is_copied_transposed_one_expert_at_a_time():
    # a tile over several experts would read W with lanes D apart (a gather
    # per vector); one expert at a time, each column tile's panel is W's
    # transpose, copied with shuffles
    script = tcdsl.compile(PER_EXPERT, options={"vector_width": 8, "disk_cache": False}).script
    assert "T.Shuffle([W_r0, W_r" in script, script
    # the main tiles read the panel, one expert (c1) at a time
    # (the reduction's step counted from its block's first, c2_kb * c2_kc: long loops run in blocks)
    assert re.search(r"\* W_packed\[c1, c3_w(\d+) \* \1 \+ \(u \* 8 \+ v\), (c2_kb \* c2_kc \+ )?c2_k\]", script), script


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
@pytest.mark.parametrize("src", [PER_EXPERT, PER_EXPERT_LOOP], ids=["plain", "in a loop"])
def test_weight_per_expert_out_in_matches_numpy(src, mode):
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(7)
    for B, D, E, O in [(9, 19, 3, 29), (16, 64, 4, 48), (5, 8, 1, 7), (33, 100, 2, 72)]:
        W = rand(rng, E, O, D)
        if src is PER_EXPERT:
            x = rand(rng, B, D)
            want = np.einsum("bd,eod->beo", x.astype(np.float64), W.astype(np.float64))
        else:
            x = rand(rng, 3, B, D)
            want = np.einsum("tbd,eod->tbeo", x.astype(np.float64), W.astype(np.float64))
        np.testing.assert_allclose(k(x, W), want, rtol=1e-5, atol=2e-6 * D ** 0.5 + 1e-6)
