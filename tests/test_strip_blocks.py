"""Strips of columns whose reduction runs in blocks (codegen/cpu_strips.py):
a matrix-vector product with an (in, out) matrix outside sequential loops
(and a column sum, whose strips have no register tile), at sizes on both sides of the run-time switch (8 strips of
128 columns), with ragged strips, blocks and tails; NumPy references."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.codegen.cpu_strips import MIN_STRIPS, STRIP_K_BLOCK

GEMV = "def gemv(float(I) x, float(I,O) W) -> (y) { y(j) +=! x(i) * W(i, j) }"
COLSUM = "def colsum(float(N,C) x) -> (s) { s(c) +=! x(n, c) }"
# inside a sequential loop the strips stay as they were
LOOPED = """def pw(float(T,N) v0, float(N,N) A) -> (v) {
  for t in T {
    if t == 0 { v(t, j) = v0(t, j) } else { v(t, j) +=! v(t - 1, i) * A(i, j) }
  }
}"""


def test_gemv_blocks_the_reduction_across_each_threads_strips():
    s = tcdsl.compile(GEMV, options={"vector_width": 8}).script
    assert f"(T.max(O, 0) + 128 - 1) // 128 >= {MIN_STRIPS}:" in s
    assert re.search(r"for c\d_th in T\.parallel\(\d+\):\s+for c\d_sb, c\d_s, _fixed_row_t in T\.grid\("
                     rf"\(T\.max\(I_1, 0\) \+ {STRIP_K_BLOCK} - 1\) // {STRIP_K_BLOCK}, ", s)
    assert f"for c1_k in range(T.min({STRIP_K_BLOCK}, T.max(I_1, 0) - c1_sb * {STRIP_K_BLOCK})):" in s
    # below the switch: the strips in parallel, each over the whole reduction
    assert re.search(r"else:\s+for c0 in T\.parallel\(\(T\.max\(O, 0\) \+ 128 - 1\) // 128\):", s)


@pytest.mark.parametrize("I,O", [(4096, 1024), (37, 1100), (1000, 2049), (16, 1027), (5, 7), (1, 1), (300, 130)])
def test_gemv_results(I, O):
    k = tcdsl.compile(GEMV)
    rng = np.random.default_rng(I + O)
    x = rng.standard_normal(I).astype(np.float32)
    W = (rng.standard_normal((I, O)) / np.sqrt(I)).astype(np.float32)
    np.testing.assert_allclose(k(x, W), x.astype(np.float64) @ W, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("N,C", [(100, 1200), (33, 2000), (3, 8)])
def test_column_sum(N, C):
    k = tcdsl.compile(COLSUM)  # (strips without a register tile: not blocked)
    x = np.random.default_rng(N).standard_normal((N, C)).astype(np.float32)
    np.testing.assert_allclose(k(x), x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


def test_not_inside_sequential_loops():
    k = tcdsl.compile(LOOPED)
    assert "_th in T.parallel(" not in k.script
    rng = np.random.default_rng(3)
    v0 = rng.standard_normal((4, 1500)).astype(np.float32)
    A = (rng.standard_normal((1500, 1500)) / 40).astype(np.float32)
    ref = np.zeros((4, 1500))
    ref[0] = v0[0]
    for t in range(1, 4):
        ref[t] = ref[t - 1] @ A
    np.testing.assert_allclose(k(v0, A), ref, rtol=1e-4, atol=1e-4)


def test_blocked_strips_under_guard_pages():
    """Never out of bounds: the blocked strips with every input and output next
    to an inaccessible page (tests/guard.py), ragged last strip and block."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import guard

    cases = [{"id": f"strips:gemv[{I},{O}]", "source": GEMV, "entry": "gemv", "sizes": {"I": I, "O": O}, "seed": 1}
             for I, O in [(37, 1100), (16, 1027), (33, 1024)]]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)
