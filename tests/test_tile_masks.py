"""Register tiles of a sum whose term is masked per row and step
(codegen/tile_masks.py): the columns run only where the mask holds.
Results against NumPy in every specialize mode and under guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import emit

NO_CACHE = {"disk_cache": False}

# an int8 row-quantized embedding bag to its longest bag L, bags given by offsets
QBAG = """def qbag(int32(NNZ) ids, int32(B) offs, uint8(V,D) Q, float(V) scale, float(V) bias) -> (out) {
  out(b, d) +=! offs(b) + j < (b + 1 < B ? offs(b + 1) : NNZ) ? scale(r) * float(Q(r, d)) + bias(r) : 0
      where b in 0:B, j in 0:L, r = ids(offs(b) + j)
}"""
# a padding mask read from a tensor
MASKED = """def masked(float(B,T,D) x, float(B,T) m, float(D,E) W) -> (y) {
  y(b, e) +=! m(b, t) > 0.5 ? x(b, t, d) * W(d, e) : 0
}"""


def _qbag(ids, offs, Q, scale, bias, L):
    B, (V, D) = len(offs), Q.shape
    out = np.zeros((B, D))
    for b in range(B):
        end = offs[b + 1] if b + 1 < B else len(ids)
        for j in range(L):
            if offs[b] + j < end:
                r = min(max(ids[offs[b] + j], 0), V - 1)
                out[b] += scale[r] * Q[r].astype(np.float64) + bias[r]
    return out


def _bags(rng, B, L, V, D):
    lens = rng.integers(0, L + 1, B)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int32)
    ids = rng.integers(0, V, max(int(lens.sum()), 1)).astype(np.int32)
    Q = rng.integers(0, 256, (V, D)).astype(np.uint8)
    return ids, offs, Q, rng.uniform(0.01, 0.1, V).astype(np.float32), rng.uniform(-1, 1, V).astype(np.float32)


def test_the_columns_run_under_a_test_of_the_rows_mask():
    tir = emit(tcdsl.compile(QBAG, options=NO_CACHE), "tir")
    assert re.search(r"for r in T\.unroll\(\d+\):\n\s+if .*offs\[.*\n\s+for u in T\.unroll", tir), tir
    tir = emit(tcdsl.compile(MASKED, options=NO_CACHE), "tir")
    assert re.search(r"for r in T\.unroll\(\d+\):\n\s+if m\[.*\] > T\.float32\(0\.5\):\n\s+for u in T\.unroll", tir), tir


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_masked_tiles_agree_with_numpy(mode):
    rng = np.random.default_rng(8)
    k = tcdsl.compile(QBAG, specialize=mode, options=NO_CACHE)
    for B, L, V, D in [(1, 1, 1, 1), (3, 4, 5, 7), (9, 6, 20, 130), (2, 13, 8, 33)]:
        ids, offs, Q, scale, bias = _bags(rng, B, L, V, D)
        got = k(ids, offs, Q, scale, bias, L=L)
        np.testing.assert_allclose(got, _qbag(ids, offs, Q, scale, bias, L), rtol=1e-4, atol=1e-4)
    k = tcdsl.compile(MASKED, specialize=mode, options=NO_CACHE)
    for B, T, D, E in [(1, 1, 1, 1), (5, 3, 4, 17), (9, 8, 20, 70)]:
        x, W = rng.standard_normal((B, T, D)).astype(np.float32), rng.standard_normal((D, E)).astype(np.float32)
        m = (rng.random((B, T)) > 0.4).astype(np.float32)
        want = np.einsum("btd,de->be", x.astype(np.float64) * (m > 0.5)[..., None], W.astype(np.float64))
        np.testing.assert_allclose(k(x, m, W), want, rtol=1e-4, atol=1e-4)


def test_masked_tiles_under_guard_pages():
    import guard
    cases = [{"id": "masks:qbag", "source": QBAG, "settings": [{"sizes": {"L": 3}, "inputs": [
        {"dtype": "int32", "shape": [5], "data": [0, 4, 2, 1, 3]},
        {"dtype": "int32", "shape": [3], "data": [0, 2, 2]},
        {"dtype": "uint8", "shape": [5, 19], "data": [(i * 7) % 256 for i in range(95)]},
        {"dtype": "float32", "shape": [5], "data": [0.5, 1, 2, 3, 4]},
        {"dtype": "float32", "shape": [5], "data": [1, 2, 3, 4, 5]}]}]},
        {"id": "masks:masked", "source": MASKED, "settings": [{"B": 9, "T": 3, "D": 5, "E": 33},
                                                              {"B": 1, "T": 1, "D": 1, "E": 1}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or [
        (r["id"], r["outcome"], r["detail"]) for r in records]
