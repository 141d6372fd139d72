"""Two nested parallel loops as one loop over their product
(codegen/collapse.py), and the split of a loop-invariant ``+=`` that lets
hoisting move an RNN's input projection out of its time loop
(polyhedral/accumulate.py).  Structure on the TIR, values against NumPy."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import frontend
from tcdsl.source import Source

NO_CACHE = {"disk_cache": False}

SEQ_LINEAR = """
def proj(float(T,B,I) x, float(I,J) W) -> (y) {
  y(t, b, j) +=! x(t, b, i) * W(i, j)
}
"""


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_a_contraction_over_a_batch_of_sequences_runs_as_one_matrix_product():
    k = tcdsl.compile(SEQ_LINEAR, options=NO_CACHE)
    assert re.search(r"x_rows = T\.decl_buffer\(\(T_1 \* B, I\w*\), data=x\.data\)", k.script)
    assert "y_rows = T.decl_buffer((T_1 * B, J), data=y.data)" in k.script
    assert "acc = T.alloc_buffer" in k.script  # register tiles over the T * B rows
    rng = np.random.default_rng(0)
    for T, B, I, J in [(1, 1, 1, 1), (7, 1, 13, 70), (3, 5, 33, 17), (5, 32, 64, 96)]:
        x, W = _rand(rng, T, B, I), _rand(rng, I, J)
        np.testing.assert_allclose(k(x, W), np.einsum("tbi,ij->tbj", x.astype(np.float64), W), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("src", [
    # b is used outside the pair of indices
    """def f(float(T,B,I) x, float(I,J) W, float(B) s) -> (y) {
      y(t, b, j) +=! x(t, b, i) * W(i, j) * s(b)
    }""",
    # the pair's second dimension is wider than the loop: rows are not contiguous
    """def f(float(T,C,I) x, float(I,J) W) -> (y) {
      y(t, b, j) +=! x(t, b, i) * W(i, j) where b in 0:C - 1
    }""",
    # the dimensions in the other order
    """def f(float(B,T,I) x, float(I,J) W) -> (y) {
      y(t, b, j) +=! x(b, t, i) * W(i, j)
    }""",
])
def test_loops_that_are_not_one_row_stay_two(src):
    k = tcdsl.compile(src, options=NO_CACHE)
    rng = np.random.default_rng(1)
    ins = [rng.standard_normal((4, 6, 9)).astype(np.float32), _rand(rng, 9, 11)]
    if "s(b)" in src:
        ins.append(_rand(rng, 6))
    got = k(*ins)
    x = ins[0].astype(np.float64)
    if "x(b, t, i)" in src:
        ref = np.einsum("bti,ij->tbj", x, ins[1])
        assert "x_rows" not in k.script
    elif "C - 1" in src:
        ref = np.einsum("tbi,ij->tbj", x[:, :5], ins[1])
        assert "x_rows" not in k.script
    else:
        ref = np.einsum("tbi,ij,b->tbj", x, ins[1], ins[2])
        assert "x_rows" not in k.script
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


ELMAN = open(__file__.rsplit("/", 2)[0] + "/examples/rnn/elman.tc").read()


def test_the_input_projection_added_onto_the_recurrence_is_hoisted():
    fe = frontend(Source(ELMAN))
    assert "hidden_in" in fe.checked.tensors
    assert "hidden_in" not in frontend(Source(ELMAN), hoist=False).checked.tensors
    k = tcdsl.compile(ELMAN, options=NO_CACHE)
    assert "input_rows = T.decl_buffer((T_1 * B, Ci), data=input.data)" in k.script
    rng = np.random.default_rng(2)
    for T, B, Ci, Co in [(1, 1, 1, 1), (9, 1, 40, 72), (5, 3, 17, 9)]:
        x, h0 = rng.standard_normal((T, B, Ci)), rng.standard_normal((B, Co))
        i2h, h2h = rng.standard_normal((Ci, Co)) / np.sqrt(Ci), rng.standard_normal((Co, Co)) / np.sqrt(Co)
        h, ref = h0, []
        for t in range(T):
            h = np.tanh(h @ h2h + x[t] @ i2h)
            ref.append(h)
        args = [a.astype(np.float32) for a in (x, h0, i2h, h2h)]
        np.testing.assert_allclose(k(*args), np.stack(ref), rtol=1e-4, atol=1e-5)


def test_a_sum_that_reads_what_the_loop_writes_is_not_split():
    src = """def f(float(T,N) x, float(N,N) W) -> (y) {
      for t in T {
        y(t, j) = x(t, j)
        y(t, j) += y(t, k) * W(k, j) where k in 0:N
      }
    }"""
    fe = frontend(Source(src))
    assert not any(name.endswith("_in") for name in fe.checked.tensors)


def test_a_tensor_also_read_without_the_pair_keeps_the_two_loops():
    """``X0(k, 0, 0)`` beside ``X0(i, j, l)``: a view with two dimensions
    merged would misread it (found by the random programs)."""
    from tcdsl.testing import evaluate

    src = """def fuzz(float(N, N, N) X0) -> (T2) {
      T2(i, j, l) +=! ((X0(i, j, l)) + (X0(k, 0, 0))) + (X0(0, 0, 0))
    }"""
    k = tcdsl.compile(src, options=NO_CACHE)
    assert "X0_rows" not in k.script
    rng = np.random.default_rng(3)
    for N in (1, 2, 5):
        x = rng.standard_normal((N, N, N)).astype(np.float32)
        np.testing.assert_allclose(k(x), evaluate(src, [x]), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------ the two innermost loops of a nest
GAP = "def gap(float(N,C,H,W) x) -> (y) { y(n, c) +=! x(n, c, h, v) / (H * W) }"
SCALE = "def scale(float(N,C,H,W) x, float(C) s) -> (y) { y(n, c, h, v) = x(n, c, h, v) * s(c) }"
MAX_POOL_ALL = "def m(float(N,C,H,W) x) -> (y) { y(n, c) max=! x(n, c, h, v) }"
SHAPES = [(2, 3, 14, 14), (1, 2, 7, 28), (1, 1, 1, 1), (2, 2, 3, 1), (1, 2, 1, 17), (2, 3, 33, 5)]


def test_a_reduction_over_a_feature_map_is_one_vector_reduction():
    k = tcdsl.compile(GAP, options=NO_CACHE)
    assert "x_rows = T.decl_buffer((N, C, H * W), data=x.data)" in k.script
    # one vector reduction over the H * W elements, no loop over h
    assert re.search(r"y_lanes\[\w+\] = y_lanes\[\w+\] \+ x_rows\[c0, c\d, \(\w+ \* 32 \+ \w+\) \* 16 \+ \w+\]", k.script)
    m = tcdsl.compile(MAX_POOL_ALL, options=NO_CACHE)
    assert "x_rows" in m.script
    rng = np.random.default_rng(1)
    for shape in SHAPES:
        x = _rand(rng, *shape)
        np.testing.assert_allclose(k(x), x.astype(np.float64).mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(m(x), x.max(axis=(2, 3)))


@pytest.mark.usefixtures("avx512_tiles")  # the TIR it reads is an AVX-512 host's
def test_a_map_over_a_feature_map_is_one_vector_loop():
    k = tcdsl.compile(SCALE, options=NO_CACHE)
    assert re.search(r"x_rows = T\.decl_buffer\(\(N, C, H \* W\), data=x\.data\)", k.script), k.script
    assert re.search(r"for \w+ in T\.vectorized\(16\):\n\s+y_rows\[", k.script), k.script
    rng = np.random.default_rng(2)
    for shape in SHAPES:
        x, s = _rand(rng, *shape), _rand(rng, shape[1])
        np.testing.assert_array_equal(k(x, s), x * s[None, :, None, None])


@pytest.mark.parametrize("src,ref", [
    # v indexes a tensor alone
    ("def f(float(N,C,H,W) x, float(W) s) -> (y) { y(n, c) +=! x(n, c, h, v) * s(v) }",
     lambda x, *s: np.einsum("nchw,w->nc", x.astype(np.float64), s[0])),
    # the inner loop is shorter than its dimension: rows of the pair are not contiguous
    ("def f(float(N,C,H,W) x) -> (y) { y(n, c) +=! x(n, c, h, v) where v in 0:W - 1 }",
     lambda x: x[..., :-1].astype(np.float64).sum(axis=(2, 3))),
    # the pair in one order in one tensor and in the other in another
    ("def f(float(N,C,H,W) x, float(N,C,W,H) z) -> (y) { y(n, c) +=! x(n, c, h, v) * z(n, c, v, h) }",
     lambda x, z: np.einsum("nchw,ncwh->nc", x.astype(np.float64), z)),
])
def test_pairs_that_are_not_rows_of_a_tensor_stay_two_loops(src, ref):
    k = tcdsl.compile(src, options=NO_CACHE)
    assert "x_rows" not in k.script
    rng = np.random.default_rng(3)
    for shape in SHAPES:
        x = _rand(rng, *shape)
        args = [x] + ([_rand(rng, shape[3])] if "s(v)" in src else []) \
            + ([_rand(rng, *shape[:2], shape[3], shape[2])] if "z(n" in src else [])
        np.testing.assert_allclose(k(*args), ref(*args), rtol=1e-5, atol=1e-5)


POINTWISE = """
def pointwise(float(N,C,H,W) x, float(O,C) w) -> (y) {
  y(n, o, h, v) +=! x(n, c, h, v) * w(o, c)
}
"""


def test_merged_feature_maps_stay_inside_their_tensors():
    import guard  # tests/guard.py: guard pages before and after every tensor

    # (POINTWISE below 16 columns: summed as y_p(n, h, v, o), register tiles over the rows (h, v))
    cases = [{"id": f"pair:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([(GAP, {"N": 2, "C": 3, "H": 7, "W": 9}),
                                               (GAP, {"N": 1, "C": 1, "H": 1, "W": 33}),
                                               (SCALE, {"N": 2, "C": 3, "H": 5, "W": 14}),
                                               (MAX_POOL_ALL, {"N": 1, "C": 2, "H": 17, "W": 3}),
                                               (POINTWISE, {"N": 2, "C": 5, "H": 7, "W": 7, "O": 19}),
                                               (POINTWISE, {"N": 1, "C": 1, "H": 3, "W": 1, "O": 33}),
                                               (POINTWISE, {"N": 3, "C": 17, "H": 2, "W": 15, "O": 4})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


STRIDED_CONV = """
def strided(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! x(b, c, 2 * t + k) * w(o, c, k) where t in 0:(L-K)/2+1
}
"""
CONV2D = """
def conv(float(N,C,H,W) x, float(M,C,KH,KW) w) -> (y) {
  y(n, m, h, v) +=! x(n, c, h + kh, v + kw) * w(m, c, kh, kw)
}
"""


def _strided_ref(x, w):
    B, C, L = x.shape
    O, _, K = w.shape
    n = max((L - K) // 2 + 1, 0)
    out = np.zeros((B, O, n))
    for k in range(K):
        out += np.einsum("bct,oc->bot", x[:, :, k:k + 2 * n - 1:2][:, :, :n], w[:, :, k])
    return out


@pytest.mark.parametrize("k_block", [0, 2, 7])
def test_a_register_tiles_channel_and_tap_loops_run_as_one(k_block):
    """A convolution of stride 2 reads a packed panel of its input, linear in
    ``c * K + k`` as its weights ``w(o, c, k)`` are: the tile's channel and
    tap loops run as one loop over the block's channels times K, each tile
    summing in the same order (channel, then tap)."""
    # (as written: below 32 output columns the symbolic kernel also holds the
    # program with the channels last, polyhedral/permute.py)
    k = tcdsl.compile(STRIDED_CONV, options={**NO_CACHE, "k_block": k_block, "transpose": False})
    s = k.script
    assert re.search(r"for c3_q in range\(T\.max\(c2_kn, 0\) \* T\.max\(K, 0\)\):", s)
    assert not re.search(r"for c2_k, c3_k in T\.grid\(c2_kn", s)
    rng = np.random.default_rng(k_block)
    for B, C, L, O, K in [(2, 3, 61, 9, 5), (1, 17, 100, 8, 3), (3, 8, 70, 12, 1), (1, 2, 4, 4, 4), (2, 5, 3, 8, 5)]:
        x, w = _rand(rng, B, C, L), _rand(rng, O, C, K)
        np.testing.assert_allclose(k(x, w), _strided_ref(x.astype(np.float64), w.astype(np.float64)),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_loops_whose_reads_are_not_linear_in_one_index_stay_nested():
    """A 3x3 convolution's taps read the input at ``h + kh`` and ``v + kw``
    (strides W and 1: not one run), and the window's row loop stays a loop."""
    k = tcdsl.compile(CONV2D, options=NO_CACHE)
    inner = [line for line in k.script.splitlines() if "_q in range(" in line]
    assert not any("KH" in line and "KW" in line for line in inner)
    rng = np.random.default_rng(3)
    x, w = _rand(rng, 2, 5, 9, 11), _rand(rng, 7, 5, 3, 3)
    ref = sum(np.einsum("nchw,mc->nmhw", x[:, :, i:i + 7, j:j + 9].astype(np.float64), w[:, :, i, j])
              for i in range(3) for j in range(3))
    np.testing.assert_allclose(k(x, w), ref, rtol=1e-4, atol=1e-4)
