"""A product with few rows and many columns (codegen/cpu_strips.py
``few_rows``): a decoder's batch of 8 rows times a vocabulary's ``(V, D)``
weights.  Split by rows, each thread read the whole weight matrix for its
few rows; at most two row tiles per thread, the rows stay in one chunk and
their widest column tiles run in parallel (a choice at run time by the row
count).  NumPy is the reference, at row counts on both sides of the choice;
guard pages check that neither way reads outside its tensors."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

OUT_IN = "def lin(float(B, I) x, float(O, I) W) -> (y) { y(b, o) +=! x(b, i) * W(o, i) }"
# a product and a statement after it in one kernel: the body of each chunk is more than one tile
RELU_OUT_IN = ("def lin(float(B, I) x, float(O, I) W) -> (y, z) {\n  y(b, o) +=! x(b, i) * W(o, i)\n"
               "  z(b, o) = fmax(y(b, o), 0)\n}")
RELU_IN_OUT = ("def lin(float(B, I) x, float(I, O) W) -> (y, z) {\n  y(b, o) +=! x(b, i) * W(i, o)\n"
               "  z(b, o) = fmax(y(b, o), 0)\n}")
OPTS = {"tile_rows": 4, "tile_cols": 32, "vector_width": 8, "cpu_threads": 2, "disk_cache": False}
SIZES = [(1, 7, 5), (3, 64, 200), (8, 33, 130), (16, 16, 97), (17, 40, 300), (40, 9, 64), (2, 9, 127)]


@pytest.mark.parametrize("src", [RELU_OUT_IN, RELU_IN_OUT], ids=["out-in", "in-out"])
def test_few_rows_run_their_column_tiles_in_parallel(src):
    k = tcdsl.compile(src, options=OPTS)
    script = k.script
    # the run-time choice (2 tiles of 4 rows per thread, 2 threads; 2 tiles of 32 columns per thread,
    # as TVM simplifies it) and a parallel loop over column tiles
    assert re.search(r"if B <= 16 and 128 <= O:", script), script
    assert re.search(r"for c\d_w32 in T\.parallel", script), script
    rng = np.random.default_rng(0)
    for B, I, O in SIZES:
        x = rand(rng, B, I)
        W = rand(rng, O, I) if src == RELU_OUT_IN else rand(rng, I, O)
        want = x.astype(np.float64) @ (W.T if src == RELU_OUT_IN else W).astype(np.float64)
        y, z = k(x, W)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(z, np.maximum(want, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src", [OUT_IN, RELU_OUT_IN], ids=["folded", "two-copies"])
def test_few_rows_stay_inside_their_tensors(src):
    cases = [{"id": f"few-rows:{i}", "source": src, "sizes": sizes, "seed": i, "options": OPTS}
             for i, sizes in enumerate([{"B": 3, "I": 13, "O": 101}, {"B": 16, "I": 5, "O": 64},
                                        {"B": 17, "I": 8, "O": 40}])]
    guard.assert_all_work(cases)


MAX_PLUS = "def mp(float(B, I) x, float(O, I) W) -> (y) { y(b, o) max=! x(b, i) + W(o, i) }"
FROM_ONE = "def lin(float(B, I) x, float(O, I) W) -> (y) { y(b, o) +=! x(b, i) * W(o, i) where i in 1:I }"


@pytest.mark.parametrize("src", [OUT_IN, MAX_PLUS], ids=["sum", "max"])
def test_an_initialization_folds_into_the_tiles(src):
    """``y(b, o) +=! ...`` alone in its kernel: the tiles' accumulators start
    at the reduction's identity (0, -inf) instead of loading what a pass
    zeroing y stored (cpu_strips.folded_init); no such pass is left, and the
    product is one copy for few and many rows."""
    script = tcdsl.compile(src, options=OPTS).script
    assert not re.search(r"\by\[[^\]]*\] = T\.float32\(", script), script
    assert re.search(r"acc\[[^\]]*\] = T\.float32\((0\.0|\"-inf\")\)", script), script
    assert "_group" in script and "if B <= 16 and 128 <= O:" not in script, script
    k = tcdsl.compile(src, options=OPTS)
    rng = np.random.default_rng(2)
    for B, I, O in SIZES + [(5, 300, 70), (9, 1, 33)]:
        x, W = rand(rng, B, I), rand(rng, O, I)
        x64, W64 = x.astype(np.float64), W.astype(np.float64)
        want = x64 @ W64.T if src == OUT_IN else (x64[:, None, :] + W64[None, :, :]).max(-1)
        np.testing.assert_allclose(k(x, W), want, rtol=1e-5, atol=1e-5)


def test_an_initialization_that_covers_more_stays():
    """``where i in 1:I`` runs no step at I = 1, where y is still all zeros:
    the pass that zeroes y stays."""
    k = tcdsl.compile(FROM_ONE, options=OPTS)
    assert re.search(r"\by\[[^\]]*\] = T\.float32\(0", k.script), k.script
    rng = np.random.default_rng(3)
    for B, I, O in [(3, 1, 40), (4, 2, 65), (17, 9, 130)]:
        x, W = rand(rng, B, I), rand(rng, O, I)
        np.testing.assert_allclose(k(x, W), x[:, 1:].astype(np.float64) @ W[:, 1:].T.astype(np.float64),
                                   rtol=1e-5, atol=1e-5)


def test_rows_and_columns_of_one_size_keep_the_row_chunks():
    """r2(i, j) over N x N: at most 16 rows and 4 column tiles of 64 never
    both hold, so no run-time choice is emitted."""
    src = "def g(float(N, D) x) -> (r) { r(i, j) +=! x(i, d) * x(j, d) }"
    script = tcdsl.compile(src, options={**OPTS, "tile_cols": 64}).script
    assert "<= 16" not in script and "T.bool(False)" not in script, script


# the input projection of a recurrence, moved before its loop: one product alone in its kernel
PROJECTION = """
def f(float(T, B, I) x, float(O, I) W) -> (h) {
  for t in T {
    r(b, o) +=! x(t, b, i) * W(o, i)
    h(t, b, o) = tanh(r(b, o))
  }
}
"""


def _projection(x, W):
    return np.tanh(np.einsum("tbi,oi->tbo", x.astype(np.float64), W.astype(np.float64)))


def test_a_product_alone_is_one_copy_for_few_and_many_rows():
    """A register-tile product alone in its kernel is emitted once for both
    cases (cpu_strips.two_way): one parallel loop over chunks of rows times
    groups of column tiles, with 2 groups (the threads) when the rows are
    few and 1 otherwise -- not a copy per case.  NumPy at row counts on both
    sides of the choice and column counts that leave each group's tiles and
    the last group's rest of every width."""
    k = tcdsl.compile(PROJECTION, options=OPTS)
    script = k.script
    assert re.search(r"T\.Select\(T\.max\(T_1, 0\) \* T\.max\(B, 0\) <= 16 and 128 <= O, 2, 1\)", script), script
    assert "_group" in script and "_w32 in T.parallel" not in script, script
    # the full 4 x 32 tile once, with the copied panel, not twice per case; below two row tiles
    # W(o, i), read along i, is read as dot products (codegen/cpu_dot.py), not gathered 32 columns at a time
    assert script.count("acc = T.alloc_buffer((4, 32))") == 1, script
    assert any("_d1 in" in line for line in script.splitlines()), script
    rng = np.random.default_rng(1)
    for T, B, I, O in [(1, 1, 7, 5), (2, 3, 64, 200), (2, 8, 33, 130), (1, 16, 16, 97), (3, 6, 40, 300),
                       (5, 8, 9, 64), (2, 1, 9, 127), (1, 4, 5, 128), (4, 4, 3, 161)]:
        x, W = rand(rng, T, B, I), rand(rng, O, I)
        np.testing.assert_allclose(k(x, W), _projection(x, W), rtol=1e-5, atol=1e-5)


def test_a_product_alone_stays_inside_its_tensors():
    cases = [{"id": f"one-copy:{i}", "source": PROJECTION, "sizes": sizes, "seed": i, "options": OPTS}
             for i, sizes in enumerate([{"T": 1, "B": 3, "I": 13, "O": 161}, {"T": 2, "B": 8, "I": 5, "O": 128},
                                        {"T": 3, "B": 7, "I": 8, "O": 40}, {"T": 1, "B": 2, "I": 3, "O": 255}])]
    guard.assert_all_work(cases)
