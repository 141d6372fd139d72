"""A read that moves by a few elements per step of the output's stride-one
loop (a convolution of stride 2, ``x(b, c, 2 * t + k)``) no longer keeps that
loop from being the vector loop (polyhedral/strides.py, ``SMALL_STRIDES``): the
reduction ran as a scalar dot product over the 5 taps, 64x slower than
torch's conv1d.  Outside sequential loops the strided window is copied once
per column tile to a panel that every row tile reads as contiguous vectors
(codegen/cpu_tiles.py, ``Remapped``).  Structure checked on the TIR, values
against NumPy, memory with guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

CONV_S2 = ("def conv(float(B,C,L) x, float(O,C,K) w) -> (y) "
           "{ y(b, o, t) +=! x(b, c, 2 * t + k) * w(o, c, k) where t in 0:(L-K)/2+1 }")
# stride 3 and a window that starts later
CONV_S3 = ("def conv(float(B,C,L) x, float(O,C,K) w) -> (y) "
           "{ y(b, o, t) +=! x(b, c, 3 * t + k + 1) * w(o, c, k) where t in 0:(L-K-1)/3+1 }")
# stride 8: stays a reduction over the taps (too many lanes apart to gather)
CONV_S8 = ("def conv(float(B,C,L) x, float(O,C,K) w) -> (y) "
           "{ y(b, o, t) +=! x(b, c, 8 * t + k) * w(o, c, k) where t in 0:(L-K)/8+1 }")


def _conv(x, w, stride, start=0):
    B, C, L = x.shape
    O, _, K = w.shape
    T = (L - K - start) // stride + 1
    y = np.zeros((B, O, T))
    for k in range(K):
        win = x[:, :, start + k: start + k + stride * (T - 1) + 1: stride].astype(np.float64)
        y += np.einsum("bct,oc->bot", win, w[:, :, k])
    return y


@pytest.mark.usefixtures("avx512_tiles")  # the TIR it reads is an AVX-512 host's
def test_stride_two_output_loop_is_the_vector_loop_with_register_tiles():
    text = tcdsl.compile(CONV_S2, tuning_db=False).backend(None).func.script()
    assert "T.vectorized" in text and "acc = T.alloc_buffer((4, 64))" in text, text
    assert "_lanes" not in text  # no horizontal sum over the taps


def test_large_stride_keeps_the_reduction_vector():
    text = tcdsl.compile(CONV_S8, tuning_db=False).backend(None).func.script()
    assert "acc = T.alloc_buffer((4, 64))" not in text


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("src,stride,start", [(CONV_S2, 2, 0), (CONV_S3, 3, 1), (CONV_S8, 8, 0)])
def test_strided_convolutions_match_numpy(mode, src, stride, start):
    k = tcdsl.compile(src, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(5)
    for B, C, L, O, K in ((2, 3, 300, 9, 5), (1, 2, 40, 4, 3), (3, 1, 9, 1, 1)):
        x, w = rand(rng, B, C, L), rand(rng, O, C, K)
        np.testing.assert_allclose(k(x, w), _conv(x, w, stride, start), rtol=1e-4, atol=1e-5)


# a strided read under a select (padding written as a select): never copied
# to a panel, whose copy would read every element of its box
CAUSAL_S2 = ("def conv(float(B,C,L) x, float(O,C,K) w) -> (y) "
             "{ y(b, o, t) +=! (2 * t + k - K + 1 >= 0 ? x(b, c, 2 * t + k - K + 1) : 0) * w(o, c, k) "
             "where t in 0:(L+1)/2, k in 0:K }")


def test_stride_two_window_is_copied_to_a_panel_the_row_tiles_share():
    text = tcdsl.compile(CONV_S2, tuning_db=False).backend(None).func.script()
    assert "x_panel[" in text
    # the main tiles read the panel (contiguous in the column), not x
    assert re.search(r"acc\[r, u \* \d+ \+ v\] \+ x_panel\[", text), text


def test_a_strided_read_under_a_select_is_not_copied():
    k = tcdsl.compile(CAUSAL_S2, tuning_db=False)
    assert "x_panel" not in k.backend(None).func.script()
    rng = np.random.default_rng(8)
    B, C, L, O, K = 2, 3, 301, 9, 4
    x, w = rand(rng, B, C, L), rand(rng, O, C, K)
    padded = np.concatenate([np.zeros((B, C, K - 1), np.float32), x], axis=2)
    T = (L + 1) // 2
    ref = _conv(padded, w, 2)[:, :, :T]
    np.testing.assert_allclose(k(x, w), ref, rtol=1e-4, atol=1e-5)


def test_strided_panels_stay_inside_their_tensors():
    # guard pages after and before every input and output (tests/guard.py)
    cases = [{"id": f"strided:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (CONV_S2, {"B": 2, "C": 3, "L": 300, "O": 9, "K": 5}),
                 (CONV_S2, {"B": 1, "C": 2, "L": 137, "O": 8, "K": 3}),
                 (CONV_S3, {"B": 1, "C": 2, "L": 400, "O": 5, "K": 4}),
                 (CAUSAL_S2, {"B": 1, "C": 2, "L": 200, "O": 9, "K": 4})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)
