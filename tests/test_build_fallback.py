"""A kernel whose code TVM's passes reject is built again without split
selects (dispatch.py ``_compile``): a Gaussian pyramid's reduce step,
channels-last, rows reflected at both borders, over ``(H + 1) / 2`` output
rows, made TVM's FlattenBuffer fold a floor division to one by 0 ("Check
failed: pb->value != 0") -- a traceback from TVM for a valid program.
Results against NumPy in every specialize mode."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl

PYRDOWN = """def f(float(N,H,W,C) x, float(5) g) -> (r) {
  r(n, i, j, c) +=! g(a) * x(n, (2 * i + a - 2 < 0 ? 2 - 2 * i - a : (2 * i + a - 2 >= H ? 2 * H - 2 * i - a : 2 * i + a - 2)), j, c)
      where i in 0:(H + 1) / 2
}"""


def _pyrdown(x, g):
    N, H, W, C = x.shape
    out = np.zeros((N, (H + 1) // 2, W, C))
    for i in range((H + 1) // 2):
        for a in range(5):
            y = 2 * i + a - 2
            y = -y if y < 0 else (2 * H - 2 - y if y >= H else y)
            out[:, i] += g[a] * x[:, y].astype(np.float64)
    return out


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_kernel_that_tvm_rejects_is_built_without_split_selects(mode):
    k = tcdsl.compile(PYRDOWN, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(3)
    for N, H, W, C in [(1, 3, 1, 1), (2, 5, 3, 17), (1, 8, 6, 20), (1, 7, 9, 33)]:
        x, g = rng.standard_normal((N, H, W, C)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
        np.testing.assert_allclose(k(x, g), _pyrdown(x, g), rtol=1e-5, atol=1e-5)
