"""Bad calls raise TcShapeError naming the argument and the dimension."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from helpers import ELMAN


@pytest.fixture(scope="module")
def elman():
    return tcdsl.compile(ELMAN)


def ok_inputs(T=3, B=2, Ci=4, Co=5):
    return [np.zeros(s, np.float32) for s in [(T, B, Ci), (B, Co), (Ci, Co), (Co, Co)]]


def test_wrong_number_of_inputs(elman):
    with pytest.raises(tcdsl.TcShapeError, match="takes 4 inputs .* but 3 were given"):
        elman(*ok_inputs()[:3])


def test_wrong_rank(elman):
    x = ok_inputs()
    x[1] = np.zeros((2, 5, 1), np.float32)
    with pytest.raises(tcdsl.TcShapeError, match="argument 'h0': expected 2 dimensions, got 3"):
        elman(*x)


def test_wrong_dtype(elman):
    x = ok_inputs()
    x[2] = x[2].astype(np.float64)
    with pytest.raises(tcdsl.TcShapeError, match="argument 'i2h': dtype float64, but the kernel expects float32"):
        elman(*x)


def test_inconsistent_sizes_name_both_places(elman):
    x = ok_inputs()
    x[1] = np.zeros((2, 7), np.float32)
    with pytest.raises(tcdsl.TcShapeError, match=r"argument 'i2h' dim 1: size 5, but size 'Co' is 7 \(from 'h0' dim 1\)"):
        elman(*x)


def test_sizes_fixed_at_compile_time():
    k = tcdsl.compile(ELMAN, sizes={"Co": 5})
    assert k(*ok_inputs()).shape == (3, 2, 5)
    with pytest.raises(tcdsl.TcShapeError, match="size 'Co' was fixed to 5"):
        k(*ok_inputs(Co=6))


def test_non_contiguous_inputs_are_accepted(elman):
    x = ok_inputs()
    big = np.random.default_rng(0).standard_normal((5, 10)).astype(np.float32)
    x[3] = big[:, ::2]
    assert not x[3].flags.c_contiguous
    ref = elman(*[np.ascontiguousarray(a) for a in x])
    np.testing.assert_array_equal(elman(*x), ref)


def test_misaligned_input_does_not_crash(elman):
    x = ok_inputs()
    buf = np.zeros(3 * 2 * 4 + 1, np.float32)
    x[0] = buf[1:].reshape(3, 2, 4)  # 4 bytes past an aligned address
    assert x[0].ctypes.data % 64 != 0
    assert elman(*x).shape == (3, 2, 5)


def test_nan_and_inf_pass_through():
    k = tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) * 2 }")
    out = k(np.array([np.nan, np.inf, -np.inf, 1], np.float32))
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf and out[3] == 2


def test_out_of_range_indirect_indices_are_clamped_not_read_out_of_bounds():
    k = tcdsl.compile("def f(float(N) B, int32(M) C) -> (A) { A(i) = B(C(i)) }")
    B = np.arange(4, dtype=np.float32)
    out = k(B, np.array([3, 100_000_000, -100_000_000, 1], np.int32))
    np.testing.assert_array_equal(out, [3, 3, 0, 1])  # no crash; in-range indices read their element


def test_run_rejects_an_unknown_size(capsys):
    from tcdsl.cli import main

    from helpers import ELMAN as path

    assert main(["run", str(path), "--sizes", "T=2,B=1,Ci=2,Co=2,Z=3"]) == 1
    assert "Z is not a size of 'elman_rnn'" in capsys.readouterr().err
