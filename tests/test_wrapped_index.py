"""A read at a wrapped index ``a % N`` (``N`` a size, ``a`` affine) in a
sum: circular padding.  The statement is cut where ``a`` lies in ``[m N, (m +
1) N)`` (polyhedral/split.py, ``_wrapped``; a roll, an assignment, is split
at the source by polyhedral/circular.py), and each piece reads at ``a - m N``, an
affine index: a circularly padded convolution's interior is a plain
convolution with register tiles (80x ``F.conv1d`` after ``F.pad(circular)``
before, at (16, 128, 512) * (128, 128, 5)).  Results against NumPy at odd
sizes, including sizes below the padding (several wraps, the remainder
left), in every specialize mode; guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

CIRCULAR = """def conv(float(B,C,L) x, float(O,C,5) w) -> (y) {
  y(b, o, t) +=! x(b, c, (t + k - 2 + L) % L) * w(o, c, k) where t in 0:L, k in 0:5
}"""
ROLL = """def roll(float(B,N) x) -> (y) {
  y(b, i) = x(b, (i + 7) % N) where i in 0:N
}"""
# the index is not affine: the remainder stays as written
GATHERED = """def g(float(B,N) x, int32(N) p) -> (y) {
  y(b, i) = x(b, (p(i) + 1) % N)
}"""


def _circular(x, w):
    L = x.shape[-1]
    idx = (np.arange(L)[:, None] + np.arange(5)[None] - 2) % L
    return np.einsum("bctk,ock->bot", x.astype(np.float64)[:, :, idx], w.astype(np.float64))


def test_circular_padding_reads_at_affine_indices_in_register_tiles():
    s = tcdsl.compile(CIRCULAR, options={"disk_cache": False}).script
    tiles = [line for line in s.splitlines() if re.search(r"acc\[[^\n]*\] = acc\[[^\n]*\] \+ ", line)]
    assert tiles, s
    assert not any("%" in line or "truncmod" in line or "floormod" in line for line in tiles), tiles[:4]


def test_a_roll_copies_without_a_remainder_for_most_of_its_elements():
    s = tcdsl.compile(ROLL, options={"disk_cache": False}).script
    assert re.search(r"y\[[^\n]*\] = x\[[^\n%]*\+ 7\]", s), s


def test_a_non_affine_wrapped_index_stays():
    s = tcdsl.compile(GATHERED, options={"disk_cache": False}).script
    assert s.count("x[") >= 1 and ("%" in s or "floormod" in s or "T.if_then_else" in s or "truncmod" in s), s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_wrapped_indices_match_numpy(mode):
    rng = np.random.default_rng(9)
    k = tcdsl.compile(CIRCULAR, specialize=mode, options={"disk_cache": False})
    for B, C, L, O in [(2, 3, 9, 4), (1, 1, 1, 1), (2, 2, 2, 3), (3, 5, 4, 17), (1, 2, 33, 2)]:
        x, w = rand(rng, B, C, L), rand(rng, O, C, 5)
        np.testing.assert_allclose(k(x, w), _circular(x, w), rtol=1e-5, atol=1e-5)
    r = tcdsl.compile(ROLL, specialize=mode, options={"disk_cache": False})
    for B, N in [(2, 9), (1, 1), (3, 3), (2, 7), (1, 40)]:
        x = rand(rng, B, N)
        np.testing.assert_array_equal(r(x), np.roll(x, -7, axis=1))
    g = tcdsl.compile(GATHERED, specialize=mode, options={"disk_cache": False})
    x, p = rand(rng, 2, 6), rng.integers(0, 6, 6).astype(np.int32)
    np.testing.assert_array_equal(g(x, p), x[:, (p + 1) % 6])


def test_wrapped_indices_stay_inside_their_tensors():
    cases = [{"id": f"circular:{i}", "source": CIRCULAR, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"B": 2, "C": 3, "L": 9, "O": 4}, {"B": 1, "C": 2, "L": 2, "O": 3},
                                        {"B": 1, "C": 1, "L": 1, "O": 1}])]
    cases += [{"id": f"roll:{i}", "source": ROLL, "sizes": sizes, "seed": i}
              for i, sizes in enumerate([{"B": 2, "N": 9}, {"B": 1, "N": 3}, {"B": 2, "N": 1}])]
    guard.assert_all_work(cases)


# positions flattened as p = h * W + w and read back as digits (a non-local
# block's projections): p spans H multiples of W, not a few
FLAT = """def proj(float(B,C,H,W) x, float(I,C) wt) -> (th) {
  th(b, p, i) +=! wt(i, c) * x(b, c, p / W, p % W) where p in 0:H*W
}"""


def test_the_digit_of_a_flat_index_is_not_cut_into_pieces():
    from tcdsl import driver
    from tcdsl.options import parse as parse_options

    k = tcdsl.compile(FLAT, options={"disk_cache": False})
    model = driver.model_for(k.frontend, parse_options({}).schedule)
    names = [s.name for kern in model.kernels() for s in kern.stmts if not s.is_init]
    assert len(names) == 1, names  # was four: p < W, W <= p < 2W, 2W <= p < 3W and the rest
    circ = tcdsl.compile(CIRCULAR, options={"disk_cache": False})
    model = driver.model_for(circ.frontend, parse_options({}).schedule)
    assert len([s for kern in model.kernels() for s in kern.stmts if not s.is_init]) > 1


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_a_flat_index_matches_numpy(mode):
    rng = np.random.default_rng(4)
    k = tcdsl.compile(FLAT, specialize=mode, options={"disk_cache": False})
    for B, C, H, W, I in [(2, 3, 5, 7, 4), (1, 1, 1, 1, 1), (1, 2, 9, 2, 17), (2, 5, 1, 6, 3)]:
        x, wt = rand(rng, B, C, H, W), rand(rng, I, C)
        ref = np.einsum("ic,bcp->bpi", wt.astype(np.float64), x.astype(np.float64).reshape(B, C, H * W))
        np.testing.assert_allclose(k(x, wt), ref, rtol=1e-5, atol=1e-5)
