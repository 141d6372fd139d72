"""A term added to a sum right after it becomes the sum's start
(tcdsl/polyhedral/addend.py): a convolution's or a linear layer's bias is
where its sum starts, not one more pass over the output.  Results against
NumPy at odd sizes in every specialize mode; the statements left as written
where the addition covers other elements than the sum."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

LINEAR = """def lin(float(B,I) x, float(O,I) W, float(O) bias) -> (y) {
  y(b, o) +=! x(b, i) * W(o, i)
  y(b, o) = y(b, o) + bias(o)
}"""
LINEAR_LEFT = LINEAR.replace("y(b, o) = y(b, o) + bias(o)", "y(b, o) = 2 * bias(o) + y(b, o)")
DEPTHWISE_NHWC = """def dw(float(N,H,W,C) x, float(3,3,C) w, float(C) b) -> (y) {
  y(n, h, v, c) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kv - 1 >= 0 && v + kv - 1 < W
      ? x(n, h + kh - 1, v + kv - 1, c) : 0) * w(kh, kv, c) where h in 0:H, v in 0:W, kh in 0:3, kv in 0:3
  y(n, h, v, c) = y(n, h, v, c) + b(c)
}"""
# the addition covers min(N, P) elements: the sum's others keep their values
SHORTER = """def f(float(N,K) a, float(P) z) -> (y) {
  y(i) +=! a(i, k)
  y(i) = y(i) + z(i)
}"""


def _depthwise(x, w, b):
    x = x.astype(np.float64)
    N, H, W, C = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    y = sum(xp[:, kh:kh + H, kv:kv + W, :] * w[kh, kv] for kh in range(3) for kv in range(3))
    return y + b


@pytest.mark.slow
def test_a_bias_is_where_the_sum_starts():
    s = tcdsl.compile(DEPTHWISE_NHWC, options={"disk_cache": False}).script
    # no pass adding b to y after the sum; y starts from b
    assert not re.search(r"\by(_rows)?\[[^\n]*\] = y(_rows)?\[[^\n]*\] \+ b\[", s), s
    assert re.search(r"\by(_rows)?\[[^\n]*\] = b\[", s), s
    s = tcdsl.compile(LINEAR, options={"disk_cache": False}).script
    assert not re.search(r"\by\[[^\n]*\] = y\[[^\n]*\] \+ bias\[", s), s


def test_left_as_written_without_factor():
    s = tcdsl.compile(DEPTHWISE_NHWC, options={"disk_cache": False, "factor": False}).script
    assert re.search(r"\by(_rows)?\[[^\n]*\] = y(_rows)?\[[^\n]*\] \+ b\[", s), s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_started_sums_match_numpy(mode):
    rng = np.random.default_rng(13)
    for src, scale in ((LINEAR, 1.0), (LINEAR_LEFT, 2.0)):
        k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
        for B, I, O in [(3, 5, 7), (1, 1, 1), (9, 33, 70)]:
            x, W, bias = rand(rng, B, I), rand(rng, O, I), rand(rng, O)
            want = x.astype(np.float64) @ W.T.astype(np.float64) + scale * bias
            np.testing.assert_allclose(k(x, W, bias), want, rtol=1e-5, atol=1e-5)
    k = tcdsl.compile(DEPTHWISE_NHWC, specialize=mode, options={"disk_cache": False})
    for N, H, W, C in [(2, 3, 5, 4), (1, 1, 1, 1), (3, 9, 7, 37)]:
        x, w, b = rand(rng, N, H, W, C), rand(rng, 3, 3, C), rand(rng, C)
        np.testing.assert_allclose(k(x, w, b), _depthwise(x, w, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_an_addition_over_fewer_elements_stays(mode):
    k = tcdsl.compile(SHORTER, specialize=mode, options={"disk_cache": False})
    assert re.search(r"\by\[[^\n]*\] = y\[[^\n]*\] \+ z\[", k.script), k.script
    rng = np.random.default_rng(2)
    for N, K, P in [(5, 3, 2), (4, 2, 6), (3, 1, 3)]:
        a, z = rand(rng, N, K), rand(rng, P)
        want = a.astype(np.float64).sum(1)
        m = min(N, P)
        want[:m] += z[:m]
        np.testing.assert_allclose(k(a, z)[:N], want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_started_sums_stay_inside_their_tensors():
    # guard pages after and before every input and output (tests/guard.py)
    cases = [{"id": f"addend:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (DEPTHWISE_NHWC, {"N": 2, "H": 3, "W": 5, "C": 19}),
                 (LINEAR, {"B": 5, "I": 7, "O": 33}), (LINEAR_LEFT, {"B": 17, "I": 3, "O": 9})])]
    guard.assert_all_work(cases)
