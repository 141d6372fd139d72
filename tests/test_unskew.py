"""Band members that isl skewed by an enclosing one, unskewed
(polyhedral/unskew.py): a tubelet embedding's temporal tap ``kt`` in
``0:2`` was scheduled as ``c + kt`` below ``c``, a loop from ``c`` to
``c + 1`` whose weight reads did not simplify (30x slower than with the
tap count a size)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl import driver

OPTS = {"disk_cache": False}
TUBELET = """def tub(float(B,C,T,H,W) x, float(E,C,2,4,4) w) -> (tok) {
  tok(b, t, i, j, e) +=! x(b, c, 2 * t + kt, 4 * i + kh, 4 * j + kw) * w(e, c, kt, kh, kw)
    where t in 0:T / 2, i in 0:H / 4, j in 0:W / 4
}"""


def _reference(x, w):
    B, C, T, H, W = x.shape
    x = x[:, :, :T // 2 * 2, :H // 4 * 4, :W // 4 * 4].astype(np.float64)
    p = x.reshape(B, C, T // 2, 2, H // 4, 4, W // 4, 4)
    return np.einsum("bctuihjw,ecuhw->btije", p, w.astype(np.float64))


@pytest.fixture(scope="module")
def k():
    return tcdsl.compile(TUBELET, options=OPTS)


def test_a_short_tap_loop_is_not_skewed_by_the_channels(k):
    sched = driver.emit(k, "schedule")
    assert re.search(r"S0\[b, t, i, j, e, c, kt, kh, kw\] -> \[\(kt\)\]", sched), sched
    assert "c + kt" not in sched
    assert not re.search(r"T\.max\((c\d_k) \+ 1 - \1 \+ 1, 0\)", k.script)  # (the skewed loop's extent)


@pytest.mark.parametrize("shape", [(1, 3, 4, 8, 8), (2, 2, 5, 9, 13), (1, 1, 2, 4, 4)])
def test_unskewed_tubelets_match_numpy(k, shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((5, shape[1], 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(k(x, w), _reference(x, w), rtol=1e-4, atol=1e-4)
