"""Sums up to a length (tcdsl/codegen/slots.py, ``_to_length``): a reduction
``+=! j < lens(b) ? v : 0`` runs its loop up to the largest length that its
stores test instead of over the whole range; NumPy references with lengths
past the range, zero and negative, in every specialize mode."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl

MODES = ["never", "after-scheduling", "before-scheduling"]

EBAG = """def ebag(int32(NNZ) ids, float(NNZ) psw, int32(B) lens, int32(B) off, float(V,D) E) -> (out) {
  out(b, d) +=! j < lens(b) ? psw(off(b) + j) * E(ids(off(b) + j), d) : 0 where j in 0:L
}"""
# a masked mean over a padded batch: the test reads lens on the right, written `len >= t + 1`
POOL = """def pool(float(B,T,D) h, int32(B) n) -> (s) {
  s(b, d) +=! n(b) >= t + 1 ? h(b, t, d) : 0
}"""


def _bags(rng, B, L, V, lens):
    off = np.concatenate([[0], np.cumsum(np.clip(lens, 0, L))[:-1]]).astype(np.int32)
    nnz = max(int(np.clip(lens, 0, L).sum()), 1)
    return rng.integers(0, V, nnz).astype(np.int32), rng.uniform(0, 1, nnz).astype(np.float32), off


def test_the_loop_ends_at_the_largest_length_of_the_tile():
    s = tcdsl.compile(EBAG, options={"disk_cache": False}).script
    loops = re.findall(r"for (c\d_k) in range\((.*)\):", s)
    assert loops and all("lens[" in ext for _, ext in loops), loops
    assert any("T.max(lens[" in ext for _, ext in loops), loops  # a tile of two rows: the larger of their lengths


@pytest.mark.parametrize("mode", MODES)
def test_bags_against_numpy(mode):
    k = tcdsl.compile(EBAG, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(1)
    for B, L, V, D in [(37, 9, 11, 20), (5, 4, 3, 130), (1, 1, 1, 1), (64, 16, 50, 64)]:
        lens = rng.integers(-2, L + 3, B).astype(np.int32)  # negative, zero and past L
        lens[0] = L + 5
        ids, psw, off = _bags(rng, B, L, V, lens)
        E = rng.standard_normal((V, D)).astype(np.float32)
        ref = np.zeros((B, D))
        for b in range(B):
            for j in range(min(lens[b], L)):
                ref[b] += psw[off[b] + j] * E[ids[off[b] + j]].astype(np.float64)
        got = k(ids, psw, lens, off, E, L=L)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_masked_sum_against_numpy(mode):
    k = tcdsl.compile(POOL, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(2)
    for B, T, D in [(9, 30, 17), (4, 5, 128), (2, 1, 3)]:
        h = rng.standard_normal((B, T, D)).astype(np.float32)
        n = rng.integers(-1, T + 2, B).astype(np.int32)
        mask = np.arange(T)[None, :] < n[:, None]
        np.testing.assert_allclose(k(h, n), (h.astype(np.float64) * mask[:, :, None]).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_a_length_in_a_conjunction(mode):
    src = "def f(float(B,T,D) h, int32(B) n) -> (s) {\n  s(b, d) +=! t < n(b) && t >= 2 ? h(b, t, d) : 0\n}"
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        assert re.search(r"for c\d_k in range\(.*n\[", k.script) or re.search(r"in range\(.*n\[", k.script)
    rng = np.random.default_rng(4)
    h = rng.standard_normal((7, 33, 40)).astype(np.float32)
    n = np.array([0, 1, 2, 3, 33, 40, 17], np.int32)
    t = np.arange(33)[None, :]
    mask = (t >= 2) & (t < n[:, None])
    np.testing.assert_allclose(k(h, n), (h.astype(np.float64) * mask[:, :, None]).sum(1), rtol=1e-5, atol=1e-5)


def test_a_select_that_adds_something_past_the_length_keeps_its_loop():
    src = "def f(float(B,T) h, int32(B) n) -> (s) {\n  s(b) +=! t < n(b) ? h(b, t) : 1\n}"
    k = tcdsl.compile(src, options={"disk_cache": False})
    h = np.random.default_rng(3).standard_normal((6, 40)).astype(np.float32)
    n = np.array([0, 3, 40, 50, -1, 17], np.int32)
    ref = np.where(np.arange(40)[None, :] < n[:, None], h, 1).sum(1)
    np.testing.assert_allclose(k(h, n), ref, rtol=1e-5, atol=1e-5)
