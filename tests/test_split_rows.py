"""A strip loop with fewer strips than threads splits its reduction's steps
across the threads (codegen/cpu_strips.py, ``split_rows``): a column sum over
128 channels, batch-norm statistics on a channels-last batch, max/min/product
reductions, a bias gradient; sizes on both sides of the run-time switch,
NumPy float64 references, guard pages."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from tcdsl.codegen.cpu_strips import SPLIT_MIN_WORK

COLSUM = "def colsum(float(N,C) x) -> (s) { s(c) +=! x(n, c) }"
REDUCE = "def red(float(N,C) x) -> (s) {{ s(c) {op}=! x(n, c) }}"
BNSTAT = """def bnstat(float(N,H,W,C) x) -> (mean, var) {
  mean(c) +=! x(n, h, w, c) / (N * H * W)
  var(c) +=! (x(n, h, w, c) - mean(c)) * (x(n, h, w, c) - mean(c)) / (N * H * W)
}"""
DBIAS = "def dbias(float(B,T,O) dy) -> (db) { db(o) +=! dy(b, t, o) }"


def rows_for(C: int, threads: int) -> int:
    """Rows past the switch: SPLIT_MIN_WORK steps of the strip per thread."""
    return SPLIT_MIN_WORK * threads // min(C, 128) + 3


@pytest.mark.parametrize("threads", [2, 3])
def test_the_split_and_its_switch_in_the_tir(threads):
    s = tcdsl.compile(COLSUM, options={"cpu_threads": threads}).script
    assert f"s_part = T.alloc_buffer(({threads - 1}, C))" in s
    assert f"c0_tp in T.parallel({threads}):" in s
    # the other threads fold in order after the parallel loop, onto thread 0's sums
    assert f"for s_part_t in range(1, {threads}):" in s
    assert f"C < {128 * (threads - 1) + 1}" in s


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("N,C", [(None, 128), (None, 16), (None, 1), (None, 127), (None, 200),
                                 (7, 128), (1, 128), (0, 5), (4099, 3)])
def test_column_sums(threads, N, C):
    N = rows_for(C, threads) if N is None else N
    k = tcdsl.compile(COLSUM, options={"cpu_threads": threads})
    x = np.random.default_rng(N * 7 + C).standard_normal((N, C)).astype(np.float32)
    got = k(x)
    np.testing.assert_allclose(got, x.astype(np.float64).sum(0), rtol=1e-5, atol=2e-4 * np.sqrt(max(N, 1)) / 10)
    assert np.array_equal(k(x), got)  # the same order of sums on every call


@pytest.mark.parametrize("op,ref", [("max", np.max), ("min", np.min), ("*", np.prod)])
def test_other_reductions_start_the_partials_at_their_identity(op, ref):
    threads = 3
    k = tcdsl.compile(REDUCE.format(op=op), options={"cpu_threads": threads})
    assert "_part" in k.script
    N, C = rows_for(40, threads), 40
    rng = np.random.default_rng(5)
    # products of values near 1 stay finite; every partial's extremum is not the fold's start
    x = (1 + 1e-4 * rng.standard_normal((N, C))) if op == "*" else rng.standard_normal((N, C)) - 10
    x = x.astype(np.float32)
    np.testing.assert_allclose(k(x), ref(x.astype(np.float64), axis=0), rtol=1e-4)


def test_batch_norm_statistics_channels_last():
    k = tcdsl.compile(BNSTAT, options={"cpu_threads": 2})
    assert "mean_part" in k.script and "var_part" in k.script
    for shape in [(32, 28, 28, 128), (3, 5, 7, 128), (16, 14, 14, 40)]:
        x = (np.random.default_rng(1).standard_normal(shape) * 2 + 1).astype(np.float32)
        mean, var = k(x)
        x64 = x.astype(np.float64)
        np.testing.assert_allclose(mean, x64.mean((0, 1, 2)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(var, x64.var((0, 1, 2)), rtol=1e-4, atol=1e-5)


def test_bias_gradient():
    k = tcdsl.compile(DBIAS, options={"cpu_threads": 2})
    dy = np.random.default_rng(2).standard_normal((8, 512, 96)).astype(np.float32)
    np.testing.assert_allclose(k(dy), dy.astype(np.float64).sum((0, 1)), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("sum_", ["x(n, c) * w(c)", "exp(x(n, c) * w(c))"])
def test_statements_beside_the_tiles_in_a_strip(sum_):
    """A scale factored out of the sum (``s(c) = s(c) * w(c)`` after the
    tiles) runs after the partial results fold; a tile reading what a
    statement before it in the strip writes would read it before thread 0
    writes it: that strip is not split."""
    src = f"""def scaled(float(N,C) x, float(C) a) -> (w, s) {{
      w(c) = a(c) * 2
      s(c) +=! {sum_}
    }}"""
    k = tcdsl.compile(src, options={"cpu_threads": 2})
    N, C = rows_for(100, 2), 100
    rng = np.random.default_rng(4)
    x, a = (0.5 * rng.standard_normal((N, C))).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    w, s = k(x, a)
    x64, w64 = x.astype(np.float64), 2.0 * a.astype(np.float64)
    ref = (x64 * w64).sum(0) if sum_.startswith("x") else np.exp(x64 * w64).sum(0)
    np.testing.assert_allclose(w, w64, rtol=1e-6)
    np.testing.assert_allclose(s, ref, rtol=1e-4, atol=1e-3)


def test_split_strips_under_guard_pages():
    """Never out of bounds: the split strips with every input and output next
    to an inaccessible page (tests/guard.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import guard

    cases = [{"id": f"split:colsum[{N},{C}]", "source": COLSUM, "entry": "colsum", "sizes": {"N": N, "C": C}, "seed": 1}
             for N, C in [(rows_for(128, 2), 128), (rows_for(17, 2), 17), (rows_for(100, 2) + 1, 100)]]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)
