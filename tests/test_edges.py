"""Vector reads clamped into their tensor, plain where every lane is inside
(tcdsl/codegen/edges.py): the loop around them gets a second body without
the clamps, taken where a test of the lanes' bounds holds.  Results against
NumPy where the test holds, where it fails (the first and last vectors of a
row, the column tiles that start before a shift) and for shifts read from
data that leave the tensor."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import rand

# interleaved rotary embedding: the pair's other element, under a parity select
ROPE = """def rope(float(B,T,2*P) q, float(T,P) cs, float(T,P) sn) -> (y) {
  y(b, t, d) = q(b, t, d) * cs(t, d / 2)
             + (d % 2 == 0 ? -q(b, t, d + 1) : q(b, t, d - 1)) * sn(t, d / 2) where d in 0:2*P
}"""

# a dilated causal convolution per step, its dilation read from a table
DILATED = """def dilated(float(B,C,T) x, int32(L) dil, float(L,C,C,2) W) -> (h) {
  for l in L {
    if l == 0 { cur(b, c, t) = x(b, c, t) } else { cur(b, c, t) = h(l - 1, b, c, t) }
    h(l, b, o, t) +=! W(l, o, c, 1) * cur(b, c, t) + W(l, o, c, 0) * (t - dil(l) >= 0 ? cur(b, c, t - dil(l)) : 0)
  }
}"""


def _rope(q, cs, sn):
    q = q.astype(np.float64)
    other = np.empty_like(q)
    other[..., 0::2], other[..., 1::2] = -q[..., 1::2], q[..., 0::2]
    c, s = np.repeat(cs, 2, axis=1), np.repeat(sn, 2, axis=1)
    return q * c[None] + other * s[None]


def _dilated(x, dil, W):
    B, C, T = x.shape
    out, cur = [], x.astype(np.float64)
    t = np.arange(T)
    for l, d in enumerate(dil):
        shifted = (t.astype(np.int64) - int(d) + 2**31) % 2**32 - 2**31  # as int32 arithmetic wraps
        read = cur[:, :, np.clip(shifted, 0, T - 1)] * (shifted >= 0)
        cur = np.einsum("oc,bct->bot", W[l, :, :, 1], cur) + np.einsum("oc,bct->bot", W[l, :, :, 0], read)
        out.append(cur)
    return np.stack(out)


def test_a_rotary_embeddings_shifted_reads_are_plain_inside_the_row():
    s = tcdsl.compile(ROPE, options={"disk_cache": False}).script
    plain = re.findall(r"q\[[^\]]*, (\w+) \* 16 \+ (\w+) ([+-]) 1\]", s)
    assert {sign for *_, sign in plain} == {"+", "-"}, s
    assert re.search(r"\bif \w+ \* 16 \+ 1 >= 0 and", s), s  # the lanes' test, once per vector


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_rotary_embedding_matches_numpy(mode):
    rng = np.random.default_rng(11)
    k = tcdsl.compile(ROPE, specialize=mode, options={"disk_cache": False})
    for B, T, P in [(1, 1, 1), (2, 3, 8), (2, 5, 35), (1, 2, 64)]:
        q, cs, sn = rand(rng, B, T, 2 * P), rand(rng, T, P), rand(rng, T, P)
        np.testing.assert_allclose(k(q, cs, sn), _rope(q, cs, sn), rtol=1e-5, atol=1e-5)


def test_a_shift_read_from_a_table_is_plain_in_the_tiles_it_stays_inside():
    s = tcdsl.compile(DILATED, options={"disk_cache": False}).script
    # the test, in 64 bits, once per column tile; the tile's reads of cur at t - dil(l) in 32 bits
    assert re.search(r"if T.Cast\(\"int64\", \w+ \* \d+\) - T.Cast\(\"int64\", dil\[l\]\) >= T.int64\(0\)", s), s
    assert re.search(r"cur\[[^\]]*, \w+ \* \d+ \+ \(u \* 16 \+ v\) - dil\[l\]\]", s), s


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
@pytest.mark.slow
def test_dilations_from_a_table_match_numpy(mode):
    """Dilations from 1 to beyond the sequence, a negative one (its reads
    past the end are clamped to the last element) and the extremes of int32
    (their shifts wrap as int32 arithmetic does)."""
    rng = np.random.default_rng(12)
    k = tcdsl.compile(DILATED, specialize=mode, options={"disk_cache": False})
    for B, C, T, dil in [(1, 1, 1, [1]), (2, 3, 40, [1, 2, 4, 8, 16, 32]), (1, 9, 133, [3, -5, 0, 200, 64]),
                         (2, 4, 70, [2**31 - 1, -2**31, 17])]:
        x, W = rand(rng, B, C, T), rand(rng, len(dil), C, C, 2)
        d = np.array(dil, dtype=np.int32)
        np.testing.assert_allclose(k(x, d, W), _dilated(x, d, W), rtol=1e-4, atol=1e-4)
