"""Two nested parallel loops as one loop over their product
(codegen/collapse.py), and the split of a loop-invariant ``+=`` that lets
hoisting move an RNN's input projection out of its time loop
(polyhedral/accumulate.py).  Structure on the TIR, values against NumPy."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import frontend
from tcdsl.source import Source

NO_CACHE = {"disk_cache": False}

SEQ_LINEAR = """
def proj(float(T,B,I) x, float(I,J) W) -> (y) {
  y(t, b, j) +=! x(t, b, i) * W(i, j)
}
"""


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_a_contraction_over_a_batch_of_sequences_runs_as_one_matrix_product():
    k = tcdsl.compile(SEQ_LINEAR, options=NO_CACHE)
    assert re.search(r"x_rows = T\.decl_buffer\(\(T_1 \* B, I\w*\), data=x\.data\)", k.script)
    assert "y_rows = T.decl_buffer((T_1 * B, J), data=y.data)" in k.script
    assert "acc = T.alloc_local" in k.script  # register tiles over the T * B rows
    rng = np.random.default_rng(0)
    for T, B, I, J in [(1, 1, 1, 1), (7, 1, 13, 70), (3, 5, 33, 17), (5, 32, 64, 96)]:
        x, W = _rand(rng, T, B, I), _rand(rng, I, J)
        np.testing.assert_allclose(k(x, W), np.einsum("tbi,ij->tbj", x.astype(np.float64), W), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("src", [
    # b is used outside the pair of indices
    """def f(float(T,B,I) x, float(I,J) W, float(B) s) -> (y) {
      y(t, b, j) +=! x(t, b, i) * W(i, j) * s(b)
    }""",
    # the pair's second dimension is wider than the loop: rows are not contiguous
    """def f(float(T,C,I) x, float(I,J) W) -> (y) {
      y(t, b, j) +=! x(t, b, i) * W(i, j) where b in 0:C - 1
    }""",
    # the dimensions in the other order
    """def f(float(B,T,I) x, float(I,J) W) -> (y) {
      y(t, b, j) +=! x(b, t, i) * W(i, j)
    }""",
])
def test_loops_that_are_not_one_row_stay_two(src):
    k = tcdsl.compile(src, options=NO_CACHE)
    rng = np.random.default_rng(1)
    ins = [rng.standard_normal((4, 6, 9)).astype(np.float32), _rand(rng, 9, 11)]
    if "s(b)" in src:
        ins.append(_rand(rng, 6))
    got = k(*ins)
    x = ins[0].astype(np.float64)
    if "x(b, t, i)" in src:
        ref = np.einsum("bti,ij->tbj", x, ins[1])
        assert "x_rows" not in k.script
    elif "C - 1" in src:
        ref = np.einsum("tbi,ij->tbj", x[:, :5], ins[1])
        assert "x_rows" not in k.script
    else:
        ref = np.einsum("tbi,ij,b->tbj", x, ins[1], ins[2])
        assert "x_rows" not in k.script
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


ELMAN = open(__file__.rsplit("/", 2)[0] + "/examples/rnn/elman.tc").read()


def test_the_input_projection_added_onto_the_recurrence_is_hoisted():
    fe = frontend(Source(ELMAN))
    assert "hidden_in" in fe.checked.tensors
    assert "hidden_in" not in frontend(Source(ELMAN), hoist=False).checked.tensors
    k = tcdsl.compile(ELMAN, options=NO_CACHE)
    assert "input_rows = T.decl_buffer((T_1 * B, Ci), data=input.data)" in k.script
    rng = np.random.default_rng(2)
    for T, B, Ci, Co in [(1, 1, 1, 1), (9, 1, 40, 72), (5, 3, 17, 9)]:
        x, h0 = rng.standard_normal((T, B, Ci)), rng.standard_normal((B, Co))
        i2h, h2h = rng.standard_normal((Ci, Co)) / np.sqrt(Ci), rng.standard_normal((Co, Co)) / np.sqrt(Co)
        h, ref = h0, []
        for t in range(T):
            h = np.tanh(h @ h2h + x[t] @ i2h)
            ref.append(h)
        args = [a.astype(np.float32) for a in (x, h0, i2h, h2h)]
        np.testing.assert_allclose(k(*args), np.stack(ref), rtol=1e-4, atol=1e-5)


def test_a_sum_that_reads_what_the_loop_writes_is_not_split():
    src = """def f(float(T,N) x, float(N,N) W) -> (y) {
      for t in T {
        y(t, j) = x(t, j)
        y(t, j) += y(t, k) * W(k, j) where k in 0:N
      }
    }"""
    fe = frontend(Source(src))
    assert not any(name.endswith("_in") for name in fe.checked.tensors)


def test_a_tensor_also_read_without_the_pair_keeps_the_two_loops():
    """``X0(k, 0, 0)`` beside ``X0(i, j, l)``: a view with two dimensions
    merged would misread it (found by the random programs)."""
    from tcdsl.testing import evaluate

    src = """def fuzz(float(N, N, N) X0) -> (T2) {
      T2(i, j, l) +=! ((X0(i, j, l)) + (X0(k, 0, 0))) + (X0(0, 0, 0))
    }"""
    k = tcdsl.compile(src, options=NO_CACHE)
    assert "X0_rows" not in k.script
    rng = np.random.default_rng(3)
    for N in (1, 2, 5):
        x = rng.standard_normal((N, N, N)).astype(np.float32)
        np.testing.assert_allclose(k(x), evaluate(src, [x]), rtol=1e-5, atol=1e-5)
