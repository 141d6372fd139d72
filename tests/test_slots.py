"""A ring buffer written at one slot per step as a select over every slot
(tcdsl/codegen/slots.py): ``kb(s, b, d) = s == t % W ? k(t, b, d) : kb(s, b,
d)`` stores only at slot ``t % W``, under a test that it is one of the
slots, instead of rewriting the whole buffer at every step.  Results against
NumPy at sizes with fewer and more steps than slots, one slot, and a slot
index that leaves the buffer (nothing is written then), in every specialize
mode."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl

RING = """def ring(float(T,B,D) k) -> (o, o2) {
  for t in T {
    kb(s, b, d) = s == t % W ? k(t, b, d) : kb(s, b, d) where s in 0:W
    o(t, b, d) +=! s <= t ? kb(s, b, d) : 0
    kb2(s, b, d) = t - 2 == s ? 2 * k(t, b, d) : kb2(s, b, d) where s in 0:W
    o2(t, b, d) +=! s <= t - 2 ? kb2(s, b, d) : 0
  }
}"""


def _ring_ref(k, W):
    k = k.astype(np.float64)
    T = k.shape[0]
    o = np.stack([k[max(0, t - W + 1):t + 1].sum(0) for t in range(T)])
    # slot s holds 2 k(s + 2) from step s + 2 on, for s < W
    o2 = np.stack([2 * k[2:min(t, W + 1) + 1].sum(0) if t >= 2 else np.zeros(k.shape[1:]) for t in range(T)])
    return o, o2


def test_only_the_slot_is_stored():
    k = tcdsl.compile(RING, options={"disk_cache": False})
    for buf in ("kb", "kb2"):
        stores = re.findall(rf"^\s*{buf}\[.*$", k.script, re.M)
        assert stores and not any("if_then_else" in s or "T.Select(c" in s for s in stores), stores


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_ring_buffers_match_numpy(mode):
    kern = tcdsl.compile(RING, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(7)
    for T, B, D, W in [(9, 2, 17, 4), (3, 3, 5, 8), (6, 1, 16, 1), (20, 2, 33, 5)]:
        k = rng.standard_normal((T, B, D)).astype(np.float32)
        o, o2 = kern(k, W=W)
        want, want2 = _ring_ref(k, W)
        np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(o2, want2, rtol=1e-5, atol=1e-5)


def test_a_slot_that_moves_with_another_loop_of_the_statement():
    # the diagonal: the slot is the other index, which its own loop runs over;
    # whichever loop is outside, every diagonal element is written at each step
    src = """def diag(float(T,N) x) -> (o) {
  for t in T {
    M(s, d) = s == d ? x(t, d) + t : M(s, d) where s in 0:N, d in 0:N
    o(t, d) = M(d, d)
  }
}"""
    k = tcdsl.compile(src, options={"disk_cache": False})
    x = np.random.default_rng(2).standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(k(x), x + np.arange(5, dtype=np.float32)[:, None], rtol=1e-6)
