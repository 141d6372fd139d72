"""Grouped convolutions over channels-last activations, written with the
group's first input channel as ``(o / G) * G + i``: the input is the same
element over each run of G output channels, so the output channels are the
vector loop and the register tiles' columns (the weight ``w(o, i, k)``
copied to a panel), not the sum over ``i`` in vector lanes with a
horizontal sum per output (polyhedral/strides.py, ``unit_or_invariant``).
Results against NumPy at group sizes that divide the vector width, exceed
it and straddle it, in every specialize mode, and under guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl


def _src(g: int, pad: bool) -> str:
    if pad:
        read = f"(t + k - K / 2 >= 0 && t + k - K / 2 < L ? x(b, t + k - K / 2, (o / {g}) * {g} + i) : 0)"
        where = "where t in 0:L, k in 0:K"
    else:
        read = f"x(b, t + k, (o / {g}) * {g} + i)"
        where = "where t in 0:L - K + 1, k in 0:K"
    return f"""def gconv(float(B,L,C) x, float(C,{g},K) w, float(C) bias) -> (y) {{
  p(b, t, o) +=! {read} * w(o, i, k) {where}
  y(b, t, o) = p(b, t, o) + bias(o)
}}"""


def _ref(x, w, bias, pad: bool):
    x, w = x.astype(np.float64), w.astype(np.float64)
    B, L, C = x.shape
    _, G, K = w.shape
    P = K // 2 if pad else 0
    xp = np.zeros((B, L + 2 * K, C))
    xp[:, P:P + L] = x
    Lo = L if pad else L - K + 1
    groups = (np.arange(C) // G) * G
    y = np.zeros((B, Lo, C))
    for k in range(K):
        for i in range(G):
            y += xp[:, k:k + Lo, groups + i] * w[None, None, :, i, k]
    return y + bias


def test_output_channels_are_the_vector_loop():
    s = tcdsl.compile(_src(16, True), options={"disk_cache": False}).script
    # the weight copied to a panel along the output channels, tiles of accumulators
    assert "w_packed" in s, s
    # no vector of the 16 products over i summed lane by lane for each output
    assert not re.search(r"\bp_lanes\b|\by_lanes\b", s), s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("g,pad", [(16, True), (3, False), (8, True), (24, False)])
def test_matches_numpy(g, pad, mode):
    k = tcdsl.compile(_src(g, pad), specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(g)
    for B, L, groups, K in [(1, 1 if pad else 3, 1, 3), (2, 13, 3, 4), (3, 40, 5, 5), (1, 9, 2, 1)]:
        C = groups * g
        x = rng.standard_normal((B, L, C)).astype(np.float32)
        w = rng.standard_normal((C, g, K)).astype(np.float32)
        bias = rng.standard_normal(C).astype(np.float32)
        np.testing.assert_allclose(k(x, w, bias), _ref(x, w, bias, pad), rtol=1e-4, atol=1e-4)


def test_no_read_or_write_outside_a_tensor():
    cases = [{"id": f"grouped:{g}:{pad}", "source": _src(g, pad), "settings": settings, "expect": "agree"}
             for g, pad, settings in [
                 (16, True, [{"B": 1, "L": 3, "C": 32, "K": 4}, {"B": 2, "L": 1, "C": 16, "K": 3}]),
                 (3, False, [{"B": 2, "L": 6, "C": 9, "K": 2}, {"B": 1, "L": 5, "C": 3, "K": 5}])]]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), records
