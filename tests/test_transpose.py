"""Transposed copies of inputs read across their contiguous dimension inside
a sequential loop (tcdsl/polyhedral/layout.py): recurrent weights in
PyTorch's ``(out, in)`` layout get the same code as in ``(in, out)``."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import frontend
from tcdsl.source import Source

ELMAN_OI = """def elman_oi(float(T,B,I) x, float(B,H) h0, float(H,I) Wih, float(H,H) Whh) -> (h) {
  for t in T {
    a(b,j) +=! x(t,b,i) * Wih(j,i)
    if t == 0 {
      a(b,j) += h0(b,k) * Whh(j,k)
    } else {
      a(b,j) += h(t-1,b,k) * Whh(j,k)
    }
    h(t,b,j) = tanh(a(b,j))
  }
}"""

# PyTorch's GRU weights: (3, H, I) and (3, H, H), gates r, z, n
GRU_OI = """def gru_oi(float(T,B,I) x, float(B,H) h0, float(3,H,I) Wih, float(3,H,H) Whh) -> (h) {
  for t in T {
    gi(g,b,j) +=! x(t,b,i) * Wih(g,j,i)
    gh(g,b,j) +=! (t == 0 ? h0(b,k) : h(t-1,b,k)) * Whh(g,j,k)
    r(b,j) = sigmoid(gi(0,b,j) + gh(0,b,j))
    z(b,j) = sigmoid(gi(1,b,j) + gh(1,b,j))
    c(b,j) = tanh(gi(2,b,j) + r(b,j) * gh(2,b,j))
    h(t,b,j) = (1 - z(b,j)) * c(b,j) + z(b,j) * (t == 0 ? h0(b,j) : h(t-1,b,j))
  }
}"""


def elman_ref(x, h0, wih, whh):
    h, out = h0.astype(np.float64), []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ wih.T.astype(np.float64) + h @ whh.T.astype(np.float64))
        out.append(h)
    return np.stack(out)


def gru_ref(x, h0, wih, whh):
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h, out = h0.astype(np.float64), []
    for t in range(x.shape[0]):
        gi = np.einsum("bi,gji->gbj", x[t], wih)
        gh = np.einsum("bk,gjk->gbj", h, whh)
        r, z = sig(gi[0] + gh[0]), sig(gi[1] + gh[1])
        c = np.tanh(gi[2] + r * gh[2])
        h = (1 - z) * c + z * h
        out.append(h)
    return np.stack(out)


def _inputs(rng, T, B, I, H, gates=None):
    w = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    lead = (gates,) if gates else ()
    return (w(T, B, I), w(B, H), w(*lead, H, I), w(*lead, H, H))


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("sizes", [(5, 3, 7, 9), (1, 1, 1, 1), (4, 2, 16, 24)])
@pytest.mark.slow
def test_out_in_weights_agree_with_numpy(mode, sizes):
    rng = np.random.default_rng(sum(sizes))
    args = _inputs(rng, *sizes)
    got = tcdsl.compile(ELMAN_OI, specialize=mode)(*args)
    np.testing.assert_allclose(got, elman_ref(*args), rtol=1e-4, atol=1e-5)
    gargs = _inputs(rng, *sizes, gates=3)
    got = tcdsl.compile(GRU_OI, specialize=mode)(*gargs)
    np.testing.assert_allclose(got, gru_ref(*gargs), rtol=1e-4, atol=1e-5)


def test_the_copy_is_read_along_the_vector_lanes():
    from tcdsl.driver import emit

    tir = emit(tcdsl.compile(ELMAN_OI), "tir")
    # the recurrent product reads the copy in register tiles: the reduction
    # index first, the vector lanes (u * 8 + v) last
    reads = re.findall(r"Whh_t\[[^\]]*\]", tir)
    assert any(re.fullmatch(r"Whh_t\[c\d+_k, .*\(u \* 8 \+ v\)\]", r) for r in reads), reads
    assert not re.search(r"Whh\[[^\]]*\] \*|\* Whh\[", tir)  # the weights are read by the copy only
    # as written, the weights are read with the reduction index last: no
    # register tile, a dot product along k (in vector lanes of partial sums)
    plain = emit(tcdsl.compile(ELMAN_OI, options={"transpose": False}), "tir")
    assert re.search(r"\* Whh\[c\d+, \(c\d+_b \* 32 \+ c\d+_o\) \* 16 \+ c\d+_v\]", plain)
    assert "Whh_t" not in plain


def test_transpose_false_keeps_the_program_as_written():
    fe = frontend(Source(ELMAN_OI), transpose=False)
    assert "Whh_t" not in fe.checked.tensors
    fe = frontend(Source(ELMAN_OI))
    # Wih's product is hoisted out of the loop first: the CPU mapping packs it there
    assert "Whh_t" in fe.checked.tensors and "Wih_t" not in fe.checked.tensors
    rng = np.random.default_rng(0)
    args = _inputs(rng, 3, 2, 5, 6)
    np.testing.assert_allclose(tcdsl.compile(ELMAN_OI, options={"transpose": False})(*args), elman_ref(*args),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("source", [
    # outside a loop the CPU mapping packs the operand itself
    "def mm(float(M,K) A, float(N,K) B) -> (C) { C(i,j) +=! A(i,k) * B(j,k) }",
    # already contiguous along j
    "def f(float(T,B,K) x, float(K,H) W) -> (y) { for t in T { y(t,b,j) +=! x(t,b,k) * W(k,j) } }",
    # not plain index variables
    "def f(float(T,B,K) x, float(H,K) W) -> (y) { for t in T { y(t,b,j) +=! x(t,b,k) * W(j,K-1-k) } }",
])
def test_no_copy_where_it_would_not_help(source):
    fe = frontend(Source(source))
    assert not any(t.endswith("_t") for t in fe.checked.tensors)


def test_a_copy_of_a_name_in_use_gets_a_fresh_name():
    src = ELMAN_OI.replace("(h) {", "(h, Whh_t) {").replace(
        "    h(t,b,j) = tanh(a(b,j))", "    h(t,b,j) = tanh(a(b,j))\n    Whh_t(t,j) = a(0,j)")
    rng = np.random.default_rng(1)
    args = _inputs(rng, 3, 2, 4, 5)
    h, extra = tcdsl.compile(src)(*args)
    np.testing.assert_allclose(h, elman_ref(*args), rtol=1e-4, atol=1e-5)
    assert extra.shape == (3, 5)


def test_the_option_is_checked():
    with pytest.raises(tcdsl.TcError, match="transpose"):
        tcdsl.compile(ELMAN_OI, options={"transpose": 1})


# ------------------------------------------------------------ blocked transposing copies (codegen/cpu_transpose.py)
TRANSPOSE = "def tr(float(M,N) x) -> (y) {\n  y(j, i) = x(i, j)\n}"
NCHW_NHWC = "def nhwc(float(N,C,H,W) x) -> (y) {\n  y(n, h, w, c) = x(n, c, h, w)\n}"
SCALED = "def sc(float(M,N) x, float(N,M) z) -> (y) {\n  y(j, i) = 2 * x(i, j) + z(j, i)\n}"


def test_a_transposing_copy_runs_in_tiles():
    """``y(j, i) = x(i, j)``: blocks of two vectors of ``j``, each a tile's
    rows of ``y`` written a vector of ``i`` at a time (a whole line, gathered
    from the tile's rows of ``x``), at every size (written an element at a
    time down the block, rows a power of two apart shared a few cache sets:
    2048 x 512 took 1.5 ms against 0.55 in tiles); a plain copy keeps its
    one vector loop."""
    tir = tcdsl.compile(TRANSPOSE, options={"disk_cache": False, "vector_width": 8}).script
    assert re.search(r"if T\.max\(N, 0\) >= 16:\s*for c0_blk in T\.parallel\(T\.max\(N, 0\) // 16\):"
                     r"\s*for c1_tile, c0_in in T\.grid\(T\.max\(M, 0\) // 8, 16\):"
                     r"\s*for c1_lane in T\.vectorized\(8\):\s*y\[c0_blk \* 16 \+ c0_in, c1_tile \* 8 \+ c1_lane\] = "
                     r"x\[c1_tile \* 8 \+ c1_lane, c0_blk \* 16 \+ c0_in\]", tir), tir
    assert "M >= 512" not in tir
    plain = tcdsl.compile("def cp(float(M,N) x) -> (y) {\n  y(i, j) = x(i, j)\n}", options={"disk_cache": False}).script
    assert "_blk" not in plain


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (16, 16), (17, 33), (40, 7), (3, 100), (512, 16), (515, 37),
                                   (700, 5), (600, 130), (64, 256), (19, 40)])
def test_blocked_transposes_agree_with_numpy(mode, shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(tcdsl.compile(TRANSPOSE, specialize=mode)(x), x.T)
    z = rng.standard_normal(shape[::-1]).astype(np.float32)
    np.testing.assert_allclose(tcdsl.compile(SCALED, specialize=mode)(x, z), 2 * x.T + z, rtol=1e-6)
    v = rng.standard_normal((2, shape[0], 3, shape[1])).astype(np.float32)  # NCHW, C from the shape
    np.testing.assert_array_equal(tcdsl.compile(NCHW_NHWC, specialize=mode)(v), v.transpose(0, 2, 3, 1))


def test_blocked_transposes_under_guard_pages():
    """Never out of bounds: the blocks and the columns left, with every input
    and output next to an inaccessible page (tests/guard.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import guard

    cases = [{"id": f"transpose[{m},{n}]", "source": TRANSPOSE, "entry": "tr", "sizes": {"M": m, "N": n}, "seed": 1}
             for m, n in [(37, 33), (16, 15), (1, 40), (33, 1), (520, 33), (512, 7), (530, 16)]]
    cases += [{"id": f"nhwc[C={c}]", "source": NCHW_NHWC, "entry": "nhwc", "sizes": {"N": 2, "C": c, "H": 3, "W": 17},
               "seed": 2} for c in (19, 515)]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# PyTorch's stacked (4H, in) weights read gate by gate, ``Whh(H + j, k)``:
# each gate's rows at an offset of the stacked weight
LSTM_SLICES = """def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4*H,I) Wih, float(4*H,H) Whh) -> (h) {
  for t in T {
    xi(b, j) +=! x(t, b, k) * Wih(j, k) where j in 0:H
    xf(b, j) +=! x(t, b, k) * Wih(H + j, k) where j in 0:H
    xg(b, j) +=! x(t, b, k) * Wih(2 * H + j, k) where j in 0:H
    xo(b, j) +=! x(t, b, k) * Wih(3 * H + j, k) where j in 0:H
    if t == 0 {
      hi(b, j) +=! h0(b, k) * Whh(j, k) where j in 0:H
      hf(b, j) +=! h0(b, k) * Whh(H + j, k) where j in 0:H
      hg(b, j) +=! h0(b, k) * Whh(2 * H + j, k) where j in 0:H
      ho(b, j) +=! h0(b, k) * Whh(3 * H + j, k) where j in 0:H
    } else {
      hi(b, j) +=! h(t - 1, b, k) * Whh(j, k) where j in 0:H
      hf(b, j) +=! h(t - 1, b, k) * Whh(H + j, k) where j in 0:H
      hg(b, j) +=! h(t - 1, b, k) * Whh(2 * H + j, k) where j in 0:H
      ho(b, j) +=! h(t - 1, b, k) * Whh(3 * H + j, k) where j in 0:H
    }
    if t == 0 { c(t, b, j) = sigmoid(xf(b, j) + hf(b, j)) * c0(b, j) + sigmoid(xi(b, j) + hi(b, j)) * tanh(xg(b, j) + hg(b, j)) }
    else      { c(t, b, j) = sigmoid(xf(b, j) + hf(b, j)) * c(t - 1, b, j) + sigmoid(xi(b, j) + hi(b, j)) * tanh(xg(b, j) + hg(b, j)) }
    h(t, b, j) = sigmoid(xo(b, j) + ho(b, j)) * tanh(c(t, b, j))
  }
}"""


def lstm_slices_ref(x, h0, c0, Wih, Whh):
    x, h, c, Wih, Whh = (a.astype(np.float64) for a in (x, h0, c0, Wih, Whh))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    out = []
    for t in range(x.shape[0]):
        i, f, g, o = np.split(x[t] @ Wih.T + h @ Whh.T, 4, axis=1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        out.append(h)
    return np.stack(out)


def test_gate_rows_at_an_offset_read_the_copy():
    """Every gate's recurrent product reads the one transposed copy of the
    stacked weight, at the gate's columns, in register tiles: none reads
    ``Whh`` along its rows (a dot product per element)."""
    from tcdsl.driver import emit

    fe = frontend(Source(LSTM_SLICES))
    assert "Whh_t" in fe.checked.tensors
    tir = emit(tcdsl.compile(LSTM_SLICES), "tir")
    assert not re.search(r"Whh\[[^\]]*\] \*|\* Whh\[", tir), "a gate reads the weight as written"
    # the hoisted input projections outside the loop: register tiles over
    # packed panels, as for the gate at offset 0; no dot product along k
    assert "_lanes[" not in tir
    plain = emit(tcdsl.compile(LSTM_SLICES, options={"transpose": False}), "tir")
    assert "_lanes[" in plain


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("sizes", [(3, 2, 5, 4), (2, 5, 3, 9), (3, 4, 7, 30)])
@pytest.mark.slow
def test_gate_rows_at_an_offset_agree_with_numpy(mode, sizes):
    T, B, I, H = sizes
    rng = np.random.default_rng(sum(sizes))
    w = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    args = (w(T, B, I), w(B, H), w(B, H), w(4 * H, I), w(4 * H, H))
    got = tcdsl.compile(LSTM_SLICES, specialize=mode)(*args)
    np.testing.assert_allclose(got, lstm_slices_ref(*args), rtol=1e-4, atol=1e-5)


# a matrix-vector product per step, the matrix in (out, in) layout and no
# batch: its transposed copy is read as strips of columns down all the rows
POWER = """def power(float(N,N) A, float(N) v0) -> (v) {
  for t in T {
    if t == 0 { w(i) +=! A(i, j) * v0(j) } else { w(i) +=! A(i, j) * v(t - 1, j) }
    nn +=! w(i) * w(i)
    v(t, i) = w(i) / sqrt(nn)
  }
}"""


def power_ref(A, v0, T):
    A, v = A.astype(np.float64), v0.astype(np.float64)
    out = []
    for _ in range(T):
        w = A @ v
        v = w / np.sqrt(w @ w)
        out.append(v)
    return np.stack(out)


def test_transposed_copies_have_rows_longer_than_their_extent():
    """The copy's rows are ROW_PAD elements longer than N where a row is a
    multiple of ROW_ALIAS bytes (a row of 1024 floats put every row's strip
    into the same cache sets); the copied and the read elements are the same."""
    from tcdsl.codegen.lower import ROW_ALIAS, ROW_PAD

    s = tcdsl.compile(POWER, options={"disk_cache": False}).script
    assert (f"A_t = T.alloc_buffer((N, N), strides=(N + T.Select(N % {ROW_ALIAS // 4} == 0, {ROW_PAD}, 0), 1), "
            "align=4)") in s, s
    fixed = tcdsl.compile(POWER, specialize="before-scheduling", options={"disk_cache": False})
    assert f"strides=({1024 + ROW_PAD}, 1)" in fixed.backend({"N": 1024, "T": 2}).func.script()
    assert "strides=" not in fixed.backend({"N": 1000, "T": 2}).func.script().split("for ")[0]
    assert "w = T.alloc_buffer((N,), align=4)" in s  # the others stay dense
    # not on CUDA (built here, not run)
    cuda = tcdsl.compile(POWER, target="cuda", options={"disk_cache": False}).script
    assert "strides=" not in cuda.split("def power")[1].split("for ")[0]


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("N", [1, 7, 130, 512, 1024])
def test_padded_copies_agree_with_numpy(mode, N):
    rng = np.random.default_rng(N)
    A = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    v0 = rng.standard_normal(N).astype(np.float32)
    got = tcdsl.compile(POWER, specialize=mode)(A, v0, T=4)
    np.testing.assert_allclose(got, power_ref(A, v0, 4), rtol=1e-4, atol=1e-5)
    Wih = (rng.standard_normal((N, 3)) / 2).astype(np.float32)
    x, h0 = rng.standard_normal((5, 2, 3)).astype(np.float32), rng.standard_normal((2, N)).astype(np.float32)
    Whh = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    np.testing.assert_allclose(tcdsl.compile(ELMAN_OI, specialize=mode)(x, h0, Wih, Whh),
                               elman_ref(x, h0, Wih, Whh), rtol=1e-4, atol=1e-5)


def test_padded_copies_under_guard_pages():
    """Never out of bounds: the copy reads only the input's elements, with
    every input and output next to an inaccessible page (tests/guard.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import guard

    cases = [{"id": f"power[N={N}]", "source": POWER, "entry": "power", "sizes": {"N": N, "T": 3}, "seed": 1}
             for N in (1, 17, 129, 1024)]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# rows from time-major input into a batch-first output, the weight (out, in):
# per batch row, U rows of tiles over panels of W copied across its rows
ROWS_OI = """def proj(float(U,B,E) a, float(R,E) W) -> (g) {
  g(b, u, r) +=! a(u, b, e) * W(r, e)
}"""


def test_rows_after_the_last_full_tile_read_the_panel():
    """The rows left after the 4-row tiles (U = 65: one per batch row) run in
    one-row tiles inside each panel's scope, reading the copied panel, not
    the weight lane by lane after the panels (a gather per vector)."""
    tir = tcdsl.compile(ROWS_OI, options={"disk_cache": False}).script
    # (the rows of a chunk, the batch and chunks sharing the parallel loop: codegen/cpu_strips.batch_rows)
    one_row = re.split(r"for c1_t in range\((?:T\.max\(U, 0\)|c1_rows) % 4\):", tir)[1].split("for c3_w32")[0]
    assert "acc = T.alloc_buffer((1, 64))" in one_row and "W_packed[" in one_row, one_row
    assert re.search(r"W\[[^\]]*\(u \* 16 \+ v\), c2_k\]", one_row) is None, one_row


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_rows_after_the_last_full_tile_agree_with_numpy(mode):
    k = tcdsl.compile(ROWS_OI, specialize=mode)
    rng = np.random.default_rng(9)
    for U, B, E, R in [(65, 3, 40, 130), (9, 2, 17, 64), (3, 1, 5, 200), (1, 1, 1, 1)]:
        a, W = rng.standard_normal((U, B, E)).astype(np.float32), rng.standard_normal((R, E)).astype(np.float32)
        want = np.einsum("ube,re->bur", a.astype(np.float64), W.astype(np.float64))
        np.testing.assert_allclose(k(a, W), want, rtol=1e-5, atol=1e-4)


def test_rows_after_the_last_full_tile_under_guard_pages():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import guard

    cases = [{"id": f"rows_oi[{u},{r}]", "source": ROWS_OI, "entry": "proj", "sizes": {"U": u, "B": 2, "E": 19, "R": r},
              "seed": 3} for u, r in [(65, 130), (9, 64), (3, 70)]]
    cases += [{"id": f"head_proj[{d}]", "source": HEAD_PROJ, "entry": "kv",
               "sizes": {"S": 9, "B": 2, "E": 19, "NH": 2, "D": d}, "seed": 4} for d in (32, 48, 17)]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# keys of a head-split projection, W(h, d, c) in (out, in) layout: 32 columns per head
HEAD_PROJ = """def kv(float(S,B,E) mem, float(NH,D,E) W) -> (kk) {
  kk(b, h, j, d) +=! mem(j, b, c) * W(h, d, c)
}"""


def test_tiles_narrower_than_a_full_one_read_panels_of_a_weight_across_its_rows():
    """A head's 32 columns are tiles of half the width: they copy their panel
    of ``W`` too (a gather per vector before; (8, 8, 128, 32) keys from 256
    channels: 2.45 -> 0.52 ms)."""
    tir = tcdsl.compile(HEAD_PROJ, options={"disk_cache": False}).script
    half = tir.split("for c4_w32 in range(")[1].split("for c4_w16")[0]
    # (its whole reduction loop, or blocks of 512 steps past 4096: codegen/panels.py LONG_K)
    assert "W_block = T.alloc_buffer((T.min(T.max(E, 0), c3_kc) * 32,))" in half and "* W_packed[" in half, half


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_narrow_panels_agree_with_numpy(mode):
    k = tcdsl.compile(HEAD_PROJ, specialize=mode)
    rng = np.random.default_rng(10)
    for S, B, E, NH, D in [(9, 2, 40, 3, 32), (8, 1, 17, 2, 48), (3, 3, 5, 1, 33), (1, 1, 1, 1, 1)]:
        mem, W = rng.standard_normal((S, B, E)).astype(np.float32), rng.standard_normal((NH, D, E)).astype(np.float32)
        want = np.einsum("jbc,hdc->bhjd", mem.astype(np.float64), W.astype(np.float64))
        np.testing.assert_allclose(k(mem, W), want, rtol=1e-5, atol=1e-4)


# a bidirectional Elman with PyTorch-layout weights stacked by direction, read
# as a direction's slice U(0, j, k); and a stack whose layer loop selects W(l, j, k)
BI_ELMAN_OI = """def bi(float(T,B,H) x, float(2,H,H) U) -> (y) {
  for t in T {
    af(b, j) +=! (t == 0 ? 0 : hf(t - 1, b, k)) * U(0, j, k) where b in 0:B
    ab(b, j) +=! (t == 0 ? 0 : hb(T - t, b, k)) * U(1, j, k) where b in 0:B
    hf(t, b, j) = tanh(af(b, j) + x(t, b, j))
    hb(T - 1 - t, b, j) = tanh(ab(b, j) + x(T - 1 - t, b, j))
  }
  y(t, b, j) = hf(t, b, j) + hb(t, b, j)
}"""

STACK_OI = """def stack(float(T,B,H) x, float(L,H,H) W) -> (y) {
  for t in T {
    for l in L {
      a(b, j) +=! (l == 0 ? x(t, b, k) : hs(l - 1, b, k)) * W(l, j, k) where b in 0:B
      hs(l, b, j) = tanh(a(b, j))
    }
    y(t, b, j) = hs(L - 1, b, j)
  }
}"""


def _bi_ref(x, u):
    x, u = x.astype(np.float64), u.astype(np.float64)
    T = x.shape[0]
    hf, hb = np.zeros_like(x), np.zeros_like(x)
    for t in range(T):
        hf[t] = np.tanh((hf[t - 1] if t else 0 * x[0]) @ u[0].T + x[t])
        s = T - 1 - t
        hb[s] = np.tanh((hb[s + 1] if t else 0 * x[0]) @ u[1].T + x[s])
    return hf + hb


def _stack_ref(x, w):
    x, w = x.astype(np.float64), w.astype(np.float64)
    hs, out = np.zeros((w.shape[0],) + x.shape[1:]), []
    for t in range(x.shape[0]):
        for l in range(w.shape[0]):
            hs[l] = np.tanh((x[t] if l == 0 else hs[l - 1]) @ w[l].T)
        out.append(hs[-1].copy())
    return np.stack(out)


def test_a_slice_of_stacked_weights_reads_the_copy():
    """``U(0, j, k)``, ``U(1, j, k)``, ``W(l, j, k)``: the index that selects
    a direction's or a layer's weights stays in place and ``j`` moves last in
    one copy of the whole tensor (each direction was a strided read of ``U``
    at every step: a bidirectional LSTM 2.6x slower than with one weight per
    direction)."""
    fe = frontend(Source(BI_ELMAN_OI))
    text = fe.checked.node
    from tcdsl.syntax.printer import to_tc

    src = to_tc(text)
    assert "U_t(d0, d2, d1) = U(d0, d1, d2)" in src, src
    assert "U_t(0, k, j)" in src and "U_t(1, k, j)" in src and "* U(" not in src, src
    src = to_tc(frontend(Source(STACK_OI)).checked.node)
    assert "W_t(l, k, j)" in src and "* W(" not in src, src


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_slices_of_stacked_weights_agree_with_numpy(mode):
    rng = np.random.default_rng(5)
    for T, B, H in [(4, 3, 5), (1, 1, 1), (3, 2, 33)]:
        x = (rng.standard_normal((T, B, H)) * 0.5).astype(np.float32)
        u = (rng.standard_normal((2, H, H)) * 0.3).astype(np.float32)
        np.testing.assert_allclose(tcdsl.compile(BI_ELMAN_OI, specialize=mode)(x, u), _bi_ref(x, u),
                                   rtol=1e-4, atol=1e-5)
        w = (rng.standard_normal((3, H, H)) * 0.3).astype(np.float32)
        np.testing.assert_allclose(tcdsl.compile(STACK_OI, specialize=mode)(x, w), _stack_ref(x, w),
                                   rtol=1e-4, atol=1e-5)


def test_slices_of_stacked_weights_under_guard_pages():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import guard

    cases = [{"id": f"bi[{h}]", "source": BI_ELMAN_OI, "entry": "bi", "sizes": {"T": 3, "B": 2, "H": h}, "seed": 3}
             for h in (5, 17, 40)]
    cases += [{"id": f"stack[{h}]", "source": STACK_OI, "entry": "stack", "sizes": {"T": 2, "B": 3, "H": h, "L": 2},
               "seed": 4} for h in (7, 33)]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# value iteration: a matrix-vector product for each state s, every element of
# P read once per step (no register tile shares it across rows)
VALUE_ITERATION = """def vi(float(S,A,S) P, float(S,A) R, float gamma) -> (V) {
  for it in K {
    q(s, a) +=! P(s, a, n) * V(n)
    q(s, a) = R(s, a) + gamma * q(s, a)
    V(s) max=! q(s, a)
  }
}"""


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_a_batch_of_matrix_vector_products_is_not_transposed(mode):
    """``P(s, a, n)`` takes every lhs variable of ``q(s, a)``: summed along its
    rows as written, not copied to ``P_t(s, n, a)`` with the few actions in
    vector lanes (8 actions, 384 states, 40 steps: 43 -> 7.9 ms)."""
    k = tcdsl.compile(VALUE_ITERATION, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        assert "P_t" not in k.script, k.script
    rng = np.random.default_rng(12)
    for S, A, K in [(1, 1, 1), (7, 3, 4), (40, 8, 6), (33, 17, 3)]:
        P = rng.random((S, A, S)).astype(np.float32)
        P /= P.sum(-1, keepdims=True)
        R = rng.standard_normal((S, A)).astype(np.float32)
        V = np.zeros(S)
        for _ in range(K):
            V = (R + 0.9 * P.astype(np.float64) @ V).max(1)
        np.testing.assert_allclose(k(P, R, np.float32(0.9), K=K), V, rtol=1e-4, atol=1e-4)
