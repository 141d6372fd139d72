"""Deep register tiles on the CPU (tcdsl/codegen/cpu.py, ``ChunkedLoop._outside``;
the ``tile_depth`` option): a parallel loop between the rows and a reduction
whose column reads move with it and not with the rows (a convolution's
output row ``h`` below its channel rows ``m``) runs outside the row tiles,
``tile_depth`` of its iterations in each tile; and the columns left after
the full tiles run in vectors of half and a quarter of the width before
single columns.  Each structural check comes with a NumPy check, at odd
sizes (tails of rows, depth and columns), symbolic and specialized."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import conv2d_valid, rand

CONV = ("def conv(float(N,C,H,W) I, float(M,C,KH,KW) Wt) -> (O) "
        "{ O(n,m,h,w) +=! I(n,c,h+kh,w+kw) * Wt(m,c,kh,kw) }")
BMM = "def bmm(float(B,M,K) X, float(B,K,N) Y) -> (Z) { Z(b,m,n) +=! X(b,m,k) * Y(b,k,n) }"
# fixed here: the defaults depend on the host
DEEP = {"tile_rows": 4, "tile_cols": 32, "vector_width": 8, "tile_depth": 4}


# (input, weights): output rows (h) not a multiple of the depth, channels (m)
# not a multiple of the tile's rows, columns (w) that leave vectors of 8, 4 and
# single columns, and sizes below one tile
SHAPES = [((2, 3, 11, 40), (7, 3, 3, 3)), ((1, 2, 6, 33), (5, 2, 2, 3)), ((3, 2, 9, 9), (4, 2, 3, 3)),
          ((1, 1, 1, 1), (1, 1, 1, 1)), ((2, 5, 14, 14), (9, 5, 3, 1)), ((1, 4, 3, 20), (3, 4, 1, 5))]


def _plain(script: str) -> str:
    """``script`` without the 64-bit casts of a sliding window's reads
    (test_sliding_windows_read_with_64_bit_offsets)."""
    return re.sub(r'T\.Cast\("int64", ([^,\]()]+)\)(?=[,\]])', r"\1", script)


def _check_conv(k, shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    for ishape, wshape in shapes:
        I, W = rand(rng, *ishape), rand(rng, *wshape)
        np.testing.assert_allclose(k(I, W), conv2d_valid(I.astype(np.float64), W), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_convolution_tiles_channels_times_output_rows():
    """Rows are the output channels m, each tile covers 4 output rows h
    (4 x 4 accumulator rows of 8 columns: 32 / 4), h runs in blocks of 4
    outside the tiles, then one row at a time; the inputs' vectors do not
    move with m, the weights' scalars not with h."""
    k = tcdsl.compile(CONV, options=DEEP)
    s = k.script
    assert "acc = T.alloc_buffer((16, 8))" in s
    assert re.search(r"for c\d_d in range\(T\.max\(H - KH \+ 1, 0\) // 4\):", s)
    # the channels c in blocks of 32 outside the row tiles (every column tile,
    # the overlapping last one too), the window (kh, kw) outside the block's
    # channels: the tile's inner loop runs 32 steps
    assert s.count("(T.max(C, 0) + 32 - 1) // 32, T.max(M, 0) // 4)") == 4
    assert re.search(r"for c\d_w8, c(\d)_kb, c\d_b in T\.grid\(T\.max\(W - KW \+ 1, 0\) // 8, "
                     r"\(T\.max\(C, 0\) \+ 32 - 1\) // 32, T\.max\(M, 0\) // 4\):", s)
    assert re.search(r"for c\d_k, c\d_k, c\d_k in T\.grid\(T\.max\(KH, 0\), T\.max\(KW, 0\), "
                     r"T\.min\(32, T\.max\(C, 0\) - c\d_kb \* 32\)\):"
                     r"\s+for d in T\.unroll\(4\):\s+for r in T\.unroll\(4\):", s)
    assert re.search(r"I_1\[c0, c(\d)_kb \* 32 \+ c\1_k, c\d_d \* 4 \+ d \+ c\d_k, ", _plain(s))
    assert re.search(r"Wt\[c\d_b \* 4 \+ r, c(\d)_kb \* 32 \+ c\1_k, c\d_k, c\d_k\]", _plain(s))
    # the h left after the blocks of 4, one at a time
    assert re.search(r"for c\d(, c\d_r)? in (range|T\.grid)\(T\.max\(H - KH \+ 1, 0\) % 4", s)
    _check_conv(k)


def test_convolution_specialized():
    k = tcdsl.compile(CONV, options=DEEP, specialize="before-scheduling")
    _check_conv(k, SHAPES[:3], seed=1)
    k = tcdsl.compile(CONV, sizes={"C": 64, "H": 30, "W": 30, "M": 64, "KH": 3, "KW": 3})
    assert "for d in T.unroll(" in k.script
    rng = np.random.default_rng(2)
    I, W = rand(rng, 2, 64, 30, 30), rand(rng, 64, 64, 3, 3)
    np.testing.assert_allclose(k(I, W), conv2d_valid(I.astype(np.float64), W), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k_block", [0, 5, 256])
def test_channel_blocks(k_block):
    """Deep tiles run their channel loop in blocks of ``k_block`` steps (0: 32)
    outside the row tiles, each block adding to what the blocks before it
    stored: channel counts of one block, several, and a partial last one."""
    k = tcdsl.compile(CONV, options={**DEEP, "k_block": k_block})
    kb = k_block or 32
    assert f"(T.max(C, 0) + {kb} - 1) // {kb}" in k.script
    _check_conv(k, SHAPES + [((2, 37, 7, 19), (3, 37, 3, 3)), ((1, 64, 6, 10), (5, 64, 2, 2))], seed=kb)


def test_no_channel_blocks_over_one_reduction_loop():
    """A correlation per head, ``o(b, i, h, d) +=! e(b, h, i, j) * v(b, h, j + d)``,
    gets deep tiles (depth ``h``; ``v``'s window is no panel to copy) but its
    single reduction loop ``j`` is not cut into blocks (measured slower);
    results against NumPy."""
    src = "def av(float(B,H,T,T) e, float(B,H,S) v) -> (o) { o(b, i, h, d) +=! e(b, h, i, j) * v(b, h, j + d) }"
    k = tcdsl.compile(src, options={"tile_rows": 4, "tile_cols": 24, "vector_width": 8, "tile_depth": 3})
    # (no blocks of a fixed size: one block, or blocks of 512 steps past 4096, codegen/panels.py LONG_K)
    assert "for d in T.unroll(3)" in k.script and not re.search(r"_kb in range\(\(T\.max\(\w+, 0\) \+ \d+ - 1\)", k.script)
    assert "_kb" not in k.script or "> 4096, 512, " in k.script
    rng = np.random.default_rng(12)
    e, v = rand(rng, 2, 5, 37, 37), rand(rng, 2, 5, 56)
    want = np.einsum("bhij,bhjd->bihd", e.astype(np.float64),
                     np.stack([v[:, :, d:d + 37] for d in range(20)], axis=-1))
    np.testing.assert_allclose(k(e, v), want, rtol=1e-5, atol=1e-5)


def test_attention_heads_one_at_a_time_with_a_copied_panel():
    """Attention's ``o(b, i, h, d) +=! e(b, h, i, j) * v(b, j, h, d)``: ``v``
    is a j x d panel per head, copied once per column tile, so the heads run
    one at a time rather than in deep tiles (packed_loop)."""
    src = "def av(float(B,H,T,T) e, float(B,T,H,D) v) -> (o) { o(b, i, h, d) +=! e(b, h, i, j) * v(b, j, h, d) }"
    k = tcdsl.compile(src, options={"tile_rows": 4, "tile_cols": 24, "vector_width": 8, "tile_depth": 3})
    assert "for d in T.unroll(3)" not in k.script and "v_panel" in k.script
    rng = np.random.default_rng(12)
    e, v = rand(rng, 2, 5, 37, 37), rand(rng, 2, 37, 5, 19)
    np.testing.assert_allclose(k(e, v), np.einsum("bhij,bjhd->bihd", e.astype(np.float64), v),
                               rtol=1e-5, atol=1e-5)


def test_shallow_tiles_update_channel_by_channel():
    """A tile of 4 channels x 3 output rows of one vector (AVX2's default
    conv tile) updates channel by channel: the 3 rows' input vectors are
    loaded once, then each channel's weight is broadcast and used 3 times
    (12 accumulators + 3 + 1 registers; rows outermost kept 4 broadcasts
    live and spilled an accumulator).  With as many row vectors as channels
    (4 x 4) the order stays rows outermost; loads and stores keep it too."""
    k = tcdsl.compile(CONV, options={"tile_rows": 4, "tile_cols": 24, "vector_width": 8, "tile_depth": 3})
    s = k.script
    assert "acc = T.alloc_buffer((12, 8))" in s
    assert re.search(r"T\.grid\(T\.max\(KH, 0\), T\.max\(KW, 0\), T\.min\(32, T\.max\(C, 0\) - c\d_kb \* 32\)\):"
                     r"\s+for r in T\.unroll\(4\):\s+for d in T\.unroll\(3\):", s)
    assert re.search(r"acc = T\.alloc_buffer\(\(12, 8\)\)\s+for d in T\.unroll\(3\):\s+for r in T\.unroll\(4\):", s)
    _check_conv(k, seed=11)
    deep = tcdsl.compile(CONV, options=DEEP).script
    assert not re.search(r"for r in T\.unroll\(4\):\s+for d in T\.unroll", deep)


@pytest.mark.parametrize("depth", [2, 3])
def test_other_depths(depth):
    k = tcdsl.compile(CONV, options={**DEEP, "tile_depth": depth})
    assert f"for d in T.unroll({depth}):" in k.script
    assert f"// {depth}):" in k.script
    _check_conv(k, seed=depth)


@pytest.mark.slow
def test_reduction_order_option():
    """``reorder_reductions=False`` keeps the schedule's order of the
    reduction loops (c, kh, kw) in the tiles; the results agree either way."""
    k = tcdsl.compile(CONV, options={**DEEP, "reorder_reductions": False})
    assert re.search(r"for c\d_k, c\d_k, c\d_k in T\.grid\(T\.max\(C, 0\), T\.max\(KH, 0\), T\.max\(KW, 0\)\):"
                     r"\s+for d in T\.unroll\(4\):", k.script)
    assert "T.grid(T.max(KH, 0), T.max(KW, 0), T.max(C, 0))" not in k.script
    _check_conv(k, seed=8)


def test_depth_one_keeps_output_rows_as_tile_rows():
    k = tcdsl.compile(CONV, options={**DEEP, "tile_depth": 1})
    assert "for d in T.unroll(" not in k.script
    assert re.search(r"I_1\[c0, c\d_k, c\d_b \* 4 \+ r \+ c\d_k, ", _plain(k.script))
    _check_conv(k, SHAPES[:2], seed=3)


def test_narrow_vectors_before_single_columns():
    """Without the overlapping last vector: 40 - 3 + 1 = 38 output columns: 4
    vectors of 8, then 4, then 2 single columns (in tiles of 8, 4 and 1
    columns)."""
    k = tcdsl.compile(CONV, options={**DEEP, "overlap_tail": False})
    assert re.search(r"for c\d_w8, c\d_b in T\.grid\(", k.script)
    for w in (4, 1):
        assert re.search(rf"for c\d_n{w}, c\d_b in T\.grid\(", k.script), w
    assert "T.vectorized(4)" in k.script
    assert not re.search(r"O\[[^\]]*\] = T\.Select\(", k.script)  # (no store keeping the columns before)
    _check_conv(k, seed=5)


def test_overlapping_last_vector():
    """The columns left after the full vectors (38 = 4 x 8 + 6) run as one
    vector of 8 ending at the last column (columns 30 .. 37), which stores
    columns 32 .. 37 only: its first two were summed by the tile before it.
    Rows with fewer columns than a vector keep the narrow tiles."""
    k = tcdsl.compile(CONV, options=DEEP)
    s = k.script
    assert re.search(r"if T\.max\(W - KW \+ 1, 0\) // 8 \* 8 < T\.max\(W - KW \+ 1, 0\) "
                     r"and T\.max\(W - KW \+ 1, 0\) >= 8:", s)
    assert re.search(r"O\[[^\]]*T\.max\(W - KW \+ 1, 0\) - 8 \+ \(u \* 8 \+ v\)\] = T\.Select\(", s)
    _check_conv(k, seed=6)
    k = tcdsl.compile(CONV, options=DEEP, sizes={"W": 30, "KW": 3})
    _check_conv(k, [(i, w) for i, w in SHAPES if i[3] == 30 and w[3] == 3] + [((2, 3, 5, 30), (5, 3, 2, 3))], seed=7)


def test_batch_matmul_keeps_its_rows():
    """In a batch matmul the column reads Y(b, k, n) move with the batch b:
    rows stay m below b, no deep tiles."""
    k = tcdsl.compile(BMM, options=DEEP)
    assert "for d in T.unroll(" not in k.script
    rng = np.random.default_rng(4)
    for b, m, kk, n in [(3, 7, 5, 37), (1, 1, 1, 1), (2, 9, 17, 30)]:
        X, Y = rand(rng, b, m, kk), rand(rng, b, kk, n)
        np.testing.assert_allclose(k(X, Y), np.einsum("bmk,bkn->bmn", X.astype(np.float64), Y), rtol=1e-5, atol=1e-5)


def test_depth_inside_a_sequential_loop_is_not_used():
    """Inside a sequential loop the gate loop of an LSTM-like kernel runs outside
    the tiles one iteration at a time, whatever ``tile_depth`` says."""
    src = """def g(float(T,B,K) x, float(G,K,J) Wx) -> (y) {
      for t in T { y(t,g,b,j) +=! x(t,b,k) * Wx(g,k,j) }
    }"""
    k = tcdsl.compile(src, options={**DEEP, "hoist": False})
    assert "for d in T.unroll(" not in k.script
    rng = np.random.default_rng(5)
    x, W = rand(rng, 3, 5, 6), rand(rng, 4, 6, 19)
    np.testing.assert_allclose(k(x, W), np.einsum("tbk,gkj->tgbj", x.astype(np.float64), W), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_tile_depth(bad):
    with pytest.raises(tcdsl.TcError, match="tile_depth"):
        tcdsl.compile(CONV, options={"tile_depth": bad})


def test_too_deep_a_tile():
    with pytest.raises(tcdsl.TcError, match="depth 8 x 4 rows x 16 columns is too large"):
        tcdsl.compile(CONV, options={"tile_rows": 4, "tile_cols": 64, "vector_width": 16, "tile_depth": 8})


def test_parts_after_the_tiles_and_a_strided_convolution():
    """A bias added after the reduction (a plain part, run for each of the
    tile's output rows), and a stride of 2 in ``h`` (the accumulated element
    still moves with ``h`` alone)."""
    src = """def convb(float(N,C,H,W) I, float(M,C,KH,KW) Wt, float(M) bias) -> (O) {
      O(n, m, h, w) +=! I(n, c, 2 * h + kh, w + kw) * Wt(m, c, kh, kw) where h in 0:(H - KH) / 2 + 1
      O(n, m, h, w) = O(n, m, h, w) + bias(m)
    }"""
    k = tcdsl.compile(src, options=DEEP)
    assert "for d in T.unroll(4):" in k.script
    rng = np.random.default_rng(8)
    for ishape, wshape in [((2, 3, 19, 23), (6, 3, 3, 3)), ((1, 2, 9, 40), (5, 2, 1, 2))]:
        I, W, b = rand(rng, *ishape), rand(rng, *wshape), rand(rng, wshape[0])
        KH = wshape[2]
        full = conv2d_valid(I.astype(np.float64), W)
        want = full[:, :, ::2][:, :, :(ishape[2] - KH) // 2 + 1] + b[None, :, None, None]
        np.testing.assert_allclose(k(I, W, b), want, rtol=1e-5, atol=1e-5)


def _reduction_reads(script: str) -> list[str]:
    """The register tiles' reduction statements (``acc[...] = acc[...] + ...``)."""
    return [line for line in script.splitlines() if re.search(r"acc\[.*\] = acc\[.*\] \+ ", line)]


def test_sliding_windows_read_with_64_bit_offsets():
    """A register tile whose reductions slide a window over its columns (a
    convolution, two reduction loops or more) reads its global tensors with
    64-bit outer indices in the innermost reduction loop, so that LLVM can
    bump a pointer by ``H * W`` per channel (codegen/panels.py
    ``sliding_window``); the last index, which carries the vector lanes,
    stays 32-bit.  Not a matrix product (one reduction loop), not a bilinear
    form (no window), not the input of a stride-2 window whose lanes lie
    apart (its copy in a contiguous panel may be: the weights then are).
    The results are those of NumPy (_check_conv and the 1-D case)."""
    # (as written: narrow rows would also hold the channels-last program, polyhedral/permute.py)
    k = tcdsl.compile(CONV, options={**DEEP, "transpose": False})
    reads = _reduction_reads(k.script)
    assert reads and all('I_1[T.Cast("int64", ' in r and 'Wt[T.Cast("int64", ' in r for r in reads)
    assert all(not re.search(r'T\.Cast\("int64", [^,\]]*\+ \(u \* \d+ \+ v\)', r) for r in reads)  # lanes: 32-bit
    _check_conv(k)
    conv1d = tcdsl.compile("def c(float(B,C,T) x, float(O,C,K) w) -> (y) "
                           "{ y(b,o,t) +=! x(b,c,t+k) * w(o,c,k) }", options={"transpose": False})
    assert all("T.Cast(\"int64\"" in r for r in _reduction_reads(conv1d.script))
    rng = np.random.default_rng(1)
    x, w = rand(rng, 2, 5, 37), rand(rng, 6, 5, 4)
    want = np.einsum("bcti,oci->bot", np.lib.stride_tricks.sliding_window_view(x, 4, axis=2), w)
    np.testing.assert_allclose(conv1d(x, w), want, rtol=1e-5, atol=1e-5)
    for src in ("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
                "def bil(float(B,I) x1, float(B,J) x2, float(O,I,J) W) -> (y) "
                "{ y(b,o) +=! x1(b,i) * W(o,i,j) * x2(b,j) }"):
        reads = _reduction_reads(tcdsl.compile(src).script)
        assert reads and not any("int64" in r for r in reads), src
    s2 = tcdsl.compile("def s2(float(N,C,H,W) I, float(M,C,KH,KW) Wt) -> (O) { O(n,m,h,w) +=! "
                       "I(n,c,2*h+kh,2*w+kw) * Wt(m,c,kh,kw) where h in 0:(H-KH)/2+1, w in 0:(W-KW)/2+1 }")
    reads = _reduction_reads(s2.script)
    assert any("I_1[c0, " in r for r in reads) and not any('I_1[T.Cast("int64"' in r for r in reads)


CONV3D = ("def conv3d(float(N,C,D,H,W) I, float(M,C,KD,KH,KW) Wt) -> (O) "
          "{ O(n,m,d,h,w) +=! I(n,c,d+kd,h+kh,w+kw) * Wt(m,c,kd,kh,kw) }")


def _conv3d_ref(I, W):
    N, C, D, H, Wd = I.shape
    M, _, KD, KH, KW = W.shape
    out = np.zeros((N, M, D - KD + 1, H - KH + 1, Wd - KW + 1))
    for kd in range(KD):
        for kh in range(KH):
            for kw in range(KW):
                win = I[:, :, kd:kd + D - KD + 1, kh:kh + H - KH + 1, kw:kw + Wd - KW + 1].astype(np.float64)
                out += np.einsum("ncdhw,mc->nmdhw", win, W[:, :, kd, kh, kw].astype(np.float64))
    return out


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
@pytest.mark.slow
def test_conv3d_tiles_channels_times_output_rows_depth_outside(mode):
    """A nest of two parallel loops between the channel rows m and the
    reduction (a 3-D convolution's output depth d and row h): d runs outside
    the tiles one iteration at a time, h in blocks of tile_depth as in 2-D,
    so the tiles' rows are still the channels (the weights' scalars do not
    move with h, the inputs' vectors not with m)."""
    k = tcdsl.compile(CONV3D, specialize=mode, options=DEEP)
    s = _plain(k.script)
    if mode == "never":
        assert "acc = T.alloc_buffer((16, 8))" in s
        assert re.search(r"for c\d_d in range\(T\.max\(H - KH \+ 1, 0\) // 4\):", s), s
        assert re.search(r"Wt\[c1_b \* 4 \+ r, ", s), s
    rng = np.random.default_rng(11)
    for ishape, wshape in [((2, 3, 5, 11, 40), (7, 3, 2, 3, 3)), ((1, 2, 3, 6, 9), (5, 2, 3, 2, 1)),
                           ((1, 1, 1, 1, 1), (1, 1, 1, 1, 1))]:
        I, W = rand(rng, *ishape), rand(rng, *wshape)
        np.testing.assert_allclose(k(I, W), _conv3d_ref(I, W), rtol=1e-5, atol=1e-5)


# a weight per gate read as a k x columns panel: G's rows are (t, b), the gate
# g lies between them and the columns j (a batch-first gate layout)
GATES_BATCH_FIRST = ("def proj(float(T,B,I) x, float(4,I,H) Wx) -> (G) "
                     "{ G(t, b, g, j) +=! x(t, b, i) * Wx(g, i, j) }")


def test_packed_panel_beats_depth_one_gate_at_a_time():
    """Tiles deep over g copy no panels and read Wx's columns a row of H
    apart at every step; one gate at a time, each column tile copies its
    panel of Wx once for all the row tiles."""
    k = tcdsl.compile(GATES_BATCH_FIRST, options={**DEEP, "disk_cache": False})
    s = k.script
    assert "Wx_panel" in s and re.search(r"\* Wx_packed\[", s), s
    assert not re.search(r"for c\d_d in range", s), s  # no blocks of gates
    assert "acc = T.alloc_buffer((4, 32))" in s, s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_gates_batch_first_match_numpy(mode):
    k = tcdsl.compile(GATES_BATCH_FIRST, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(3)
    for T, B, I, H in [(3, 5, 7, 41), (2, 8, 33, 64), (1, 1, 1, 1), (4, 9, 16, 29)]:
        x, W = rand(rng, T, B, I), rand(rng, 4, I, H)
        want = np.einsum("tbi,gij->tbgj", x.astype(np.float64), W.astype(np.float64))
        np.testing.assert_allclose(k(x, W), want, rtol=1e-5, atol=2e-6 * I ** 0.5 + 1e-6)
