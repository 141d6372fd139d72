"""Register tiles of 8-byte elements (float64): half the columns and half
the lanes of the float32 defaults, so that a tile takes as many vector
registers as a float32 one (codegen/cpu.py, ``ChunkedLoop``).  With the
float32 shapes an Elman RNN in double spilled its accumulators (10.0-10.6
ms against 8.0-8.2 ms at (64, 32, 256, 256) on an Intel Xeon with
AVX-512).  Results against NumPy in every specialize mode; guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from tcdsl.options import host_defaults

MATMUL64 = "def mm(double(M,K) A, double(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
ELMAN64 = """def elman(double(T,B,I) x, double(H,I) Wih, double(H,H) Whh, double(H) bias) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * Wih(j, i)
    if t > 0 { a(b, j) += h(t - 1, b, k) * Whh(j, k) }
    h(t, b, j) = tanh(a(b, j) + bias(j))
  }
}"""


def _tiles(script: str, dtype: str) -> set[tuple[int, int]]:
    return {(int(r), int(c)) for r, c in re.findall(r'acc = T.alloc_buffer\(\((\d+), (\d+)\), "' + dtype + '"\\)', script)}


def test_double_tiles_have_half_the_columns_of_float_tiles():
    d = host_defaults()
    s64 = tcdsl.compile(MATMUL64, options={"disk_cache": False}).script
    assert (d["tile_rows"], d["tile_cols"] // 2) in _tiles(s64, "float64"), s64
    assert (d["tile_rows"], d["tile_cols"]) not in _tiles(s64, "float64")
    s32 = tcdsl.compile(MATMUL64.replace("double", "float"), options={"disk_cache": False}).script
    assert re.search(rf"acc = T.alloc_buffer\(\({d['tile_rows']}, {d['tile_cols']}\)\)", s32), s32


def test_explicit_tile_options_are_kept_for_doubles():
    s = tcdsl.compile(MATMUL64, options={"disk_cache": False, "tile_rows": 4, "tile_cols": 64,
                                         "vector_width": 16}).script
    assert (4, 64) in _tiles(s, "float64"), s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_doubles_match_numpy(mode):
    rng = np.random.default_rng(8)
    k = tcdsl.compile(MATMUL64, specialize=mode, options={"disk_cache": False})
    for M, K, N in [(5, 7, 9), (1, 1, 1), (33, 17, 70), (8, 64, 48)]:
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
        np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-12, atol=1e-12)
    e = tcdsl.compile(ELMAN64, specialize=mode, options={"disk_cache": False})
    for T, B, I, H in [(4, 3, 5, 7), (1, 1, 1, 1), (3, 9, 17, 33)]:
        x, Wih, Whh, b = (rng.standard_normal(s) / 4 for s in [(T, B, I), (H, I), (H, H), (H,)])
        h, out = np.zeros((B, H)), []
        for t in range(T):
            h = np.tanh(x[t] @ Wih.T + (h @ Whh.T if t else 0) + b)
            out.append(h)
        np.testing.assert_allclose(e(x, Wih, Whh, b), np.stack(out), rtol=1e-12, atol=1e-12)


def test_double_tiles_stay_inside_their_tensors():
    cases = [{"id": f"mm64:{i}", "source": MATMUL64, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"M": 9, "K": 5, "N": 33}, {"M": 1, "K": 3, "N": 70}])]
    cases += [{"id": "elman64", "source": ELMAN64, "sizes": {"T": 3, "B": 9, "I": 5, "H": 17}, "seed": 0}]
    guard.assert_all_work(cases)
