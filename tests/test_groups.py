"""Sums over groups of contiguous elements, summed per element first
(tcdsl/polyhedral/groups.py): a group norm over channels-last activations
sums each group's channels over the pixels per channel, in one pass along
the rows, then each group's channels.  Results against NumPy at odd sizes
in every specialize mode; the statements left as written where that would
not help."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl

GROUP_NORM_NHWC = """def gn(float(N,H,W,C) x, float(C) gamma, float(C) beta) -> (y, mean, var) {
  mean(n, g) +=! x(n, h, v, g * 8 + k) / (H * W * 8) where g in 0:C / 8, k in 0:8
  var(n, g) +=! (x(n, h, v, g * 8 + k) - mean(n, g)) * (x(n, h, v, g * 8 + k) - mean(n, g)) / (H * W * 8)
      where g in 0:C / 8, k in 0:8
  y(n, h, v, c) = (x(n, h, v, c) - mean(n, c / 8)) * rsqrt(var(n, c / 8) + 1e-5) * gamma(c) + beta(c)
}"""
GROUP_MAX = """def gmax(float(N,L,C) x) -> (m) {
  m(n, g) max=! x(n, t, g * 3 + k) where g in 0:C / 3, k in 0:3
}"""


def _group_norm(x, gamma, beta, per):
    x = x.astype(np.float64)
    N, H, W, C = x.shape
    G = C // per
    xs = x[..., :G * per].reshape(N, H, W, G, per)
    mean = xs.mean(axis=(1, 2, 4))
    var = ((xs - mean[:, None, None, :, None]) ** 2).mean(axis=(1, 2, 4))
    y = (xs - mean[:, None, None, :, None]) / np.sqrt(var[:, None, None, :, None] + 1e-5)
    y = y.reshape(N, H, W, G * per) * gamma[:G * per] + beta[:G * per]
    return y, mean, var


def test_a_group_norm_channels_last_sums_per_channel_first():
    s = tcdsl.compile(GROUP_NORM_NHWC, options={"disk_cache": False}).script
    # the per-channel sums over (h, v), then each group's 8 channels
    assert "mean_g = T.alloc_buffer((N, T.max(8 * (C // 8), 0))" in s, s
    assert "var_g = T.alloc_buffer((N, T.max(8 * (C // 8), 0))" in s, s
    # x is read along its channels (its rows), never as a group's 8 channels at each pixel
    # (as written: ``x[c0, c3, c4, c2 * 8 + c5_t]``, c2 the group, c5_t its channel)
    reads = re.findall(r"\bx\[[^\]]*\]", s)
    assert reads and not any(re.search(r"\* 8 \+ c\d+(_\w+)?\]$", r) for r in reads), reads


def test_left_as_written_without_chain():
    s = tcdsl.compile(GROUP_NORM_NHWC, options={"disk_cache": False, "chain": False}).script
    assert "mean_g" not in s
    reads = re.findall(r"\bx\[[^\]]*\]", s)
    assert any(re.search(r"\* 8 \+ c\d+(_\w+)?\]$", r) for r in reads), reads


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_group_sums_match_numpy(mode):
    rng = np.random.default_rng(7)
    k = tcdsl.compile(GROUP_NORM_NHWC, specialize=mode, options={"disk_cache": False})
    # C not a multiple of 8: the last channels belong to no group
    for N, H, W, C in [(2, 3, 5, 8), (1, 1, 1, 8), (3, 7, 2, 22), (2, 9, 9, 64)]:
        x = rng.standard_normal((N, H, W, C)).astype(np.float32)
        gamma, beta = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
        y, mean, var = k(x, gamma, beta)
        want_y, want_mean, want_var = _group_norm(x, gamma, beta, 8)
        np.testing.assert_allclose(mean, want_mean, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(var, want_var, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(y, want_y, rtol=1e-3, atol=1e-4)
    g = tcdsl.compile(GROUP_MAX, specialize=mode, options={"disk_cache": False})
    assert "m_g" in g.script
    for N, L, C in [(2, 5, 9), (1, 1, 3), (3, 40, 14)]:
        x = rng.standard_normal((N, L, C)).astype(np.float32)
        G = C // 3
        np.testing.assert_array_equal(g(x), x[..., :G * 3].reshape(N, L, G, 3).max(axis=(1, 3)))


@pytest.mark.parametrize("src", [
    # a 2x2 max pooling: the other reduction variable takes 2 values
    """def mp(float(N,C,H,W) x) -> (y) {
      y(n, c, h, v) max=! x(n, c, 2 * h + i, 2 * v + j) where h in 0:H / 2, v in 0:W / 2, i in 0:2, j in 0:2
    }""",
    # channels first: the groups are whole rows apart, each row contiguous already
    """def gm(float(N,C,L) x) -> (m) { m(n, g) +=! x(n, g * 4 + k, t) where g in 0:C / 4, k in 0:4 }""",
    # the group's elements summed alone: no other reduction variable
    """def gs(float(N,C) x) -> (m) { m(n, g) +=! x(n, g * 4 + k) where g in 0:C / 4, k in 0:4 }""",
    # a pixel_unshuffle fused into a 1x1 conv: the weight varies with j alone (per element it
    # would be read at c1 % 2 along the vector loop: 8.4 ms against 0.59 as written)
    """def s2d(float(B,C,H,W) x, float(O,4 * C) w) -> (y) {
      y(b, o, h, v) +=! x(b, c, 2 * h + i, 2 * v + j) * w(o, 4 * c + 2 * i + j)
          where h in 0:H / 2, v in 0:W / 2, i in 0:2, j in 0:2
    }""",
])
def test_left_as_written(src):
    s = tcdsl.compile(src, options={"disk_cache": False}).script
    assert "_g = T.alloc_buffer" not in s, s


def test_group_sums_stay_inside_their_tensors():
    # guard pages after and before every input and output (tests/guard.py)
    cases = [{"id": f"groups:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (GROUP_NORM_NHWC, {"N": 2, "H": 3, "W": 5, "C": 22}),
                 (GROUP_NORM_NHWC, {"N": 1, "H": 4, "W": 4, "C": 8}),
                 (GROUP_MAX, {"N": 3, "L": 9, "C": 14})])]
    guard.assert_all_work(cases)


def test_a_pixel_unshuffle_into_a_1x1_conv_matches_numpy():
    src = """def s2d(float(B,C,H,W) x, float(O,4 * C) w) -> (y) {
      y(b, o, h, v) +=! x(b, c, 2 * h + i, 2 * v + j) * w(o, 4 * c + 2 * i + j)
          where h in 0:H / 2, v in 0:W / 2, i in 0:2, j in 0:2
    }"""
    k = tcdsl.compile(src, options={"disk_cache": False})
    rng = np.random.default_rng(7)
    for B, C, H, W, O in ((1, 1, 2, 2, 1), (2, 3, 6, 10, 17), (1, 5, 4, 34, 3)):
        x = rng.standard_normal((B, C, H, W)).astype(np.float32)
        w = rng.standard_normal((O, 4 * C)).astype(np.float32)
        s2d = x.reshape(B, C, H // 2, 2, W // 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(B, 4 * C, H // 2, W // 2)
        want = np.einsum("bchw,oc->bohw", s2d.astype(np.float64), w)
        np.testing.assert_allclose(k(x, w), want, rtol=1e-4, atol=1e-4)
