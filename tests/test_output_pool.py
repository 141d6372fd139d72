"""Outputs without a zero fill, and their memory reused across calls
(polyhedral/dataflow.py, runtime/pool.py).

An output needs no zero fill when every element is written before any read
can see it; the tests check that analysis on programs where it holds and
where it must not (``+=`` without ``!``, elements never written, a read of
a later step), and that results stay right when a call gets the memory of
an earlier call's output -- never one that is still referenced.
"""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import frontend
from tcdsl.polyhedral.dataflow import overwritten_outputs
from tcdsl.runtime.pool import MIN_BYTES
from tcdsl.source import Source
from tcdsl.testing import evaluate

from helpers import ELMAN, elman_inputs, rand


def overwritten(src: str, entry: str | None = None) -> set[str]:
    return set(overwritten_outputs(frontend(Source(src, "<test>"), entry).model))


@pytest.mark.parametrize("src,want", [
    ("def f(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }", {"C"}),
    ("def f(float(N) A) -> (B, C) { B(i) = A(i) * 2\n C(i) = B(i) + 1 }", {"B", "C"}),
    # a recurrence: step t reads what step t - 1 wrote
    ("""def f(float(T,B) X) -> (h) {
          for t in T { if t == 0 { h(t, b) = X(t, b) } else { h(t, b) = h(t - 1, b) + X(t, b) } } }""", {"h"}),
    # an accumulation over the steps, initialised before the loop
    ("""def f(float(T,B) X) -> (s) {
          s(b) = 0.0 where b in 0:B
          for t in T { s(b) = s(b) + X(t, b) } }""", {"s"}),
])
def test_outputs_written_before_read(src, want):
    assert overwritten(src) == want


@pytest.mark.parametrize("src", [
    # += without ! accumulates into the zeros
    "def f(float(M,K) A, float(K,N) B) -> (C) { C(m, n) += A(m, k) * B(k, n) }",
    # max= without ! compares with the zeros
    "def f(float(N,K) A) -> (C) { C(n) max= A(n, k) }",
    # elements 0 .. KH-2 of each row are never written
    """def f(float(M,C,KH) W, float(N,M,H) O) -> (I) {
         I(n, c, h) +=! O(n, m, h - kh) * W(m, c, kh) }""",
    # step t reads the last step's element before that step writes it
    """def f(float(T,B) X) -> (y) {
         for t in T { y(t, b) = X(t, b) + y(T - 1, b) } }""",
    # only some steps write
    """def f(float(T,B) X) -> (y) {
         for t in T { if t > 0 { y(t, b) = X(t, b) } } }""",
])
def test_outputs_that_need_the_zeros(src):
    assert overwritten(src) == set()


def test_a_loop_of_no_steps_leaves_the_zeros():
    # sizes are >= 1 for the analysis, as for range inference; a call with
    # T = 0 runs no step, and gets its zeros
    src = """def f(float(T,B) X) -> (s) {
               for t in T { if t == 0 { s(b) = X(t, b) } else { s(b) = s(b) + X(t, b) } } }"""
    assert overwritten(src) == {"s"}
    k = tcdsl.compile(src)
    rng = np.random.default_rng(5)
    x = rand(rng, 3, BIG)
    np.testing.assert_allclose(k(x), x.sum(axis=0), rtol=1e-5, atol=1e-5)
    for _ in range(2):
        np.testing.assert_array_equal(k(np.ones((0, BIG), np.float32)), np.zeros(BIG, np.float32))


def test_the_examples():
    assert overwritten(ELMAN.read_text()) == {"hidden"}


BIG = MIN_BYTES // 4  # float32 elements of one pooled array

SCALE = "def scale(float(N) A, float(N) B) -> (C) { C(i) = A(i) * B(i) + 1 }"


def test_a_dropped_output_is_reused_and_fully_rewritten():
    k = tcdsl.compile(SCALE)
    rng = np.random.default_rng(0)
    a, b = rand(rng, 2 * BIG), rand(rng, 2 * BIG)
    first = k(a, b)
    address = first.ctypes.data
    del first
    c, d = rand(rng, 2 * BIG), rand(rng, 2 * BIG)
    second = k(c, d)
    assert second.ctypes.data == address  # the same memory, handed back
    np.testing.assert_allclose(second, c * d + 1, rtol=1e-6, atol=1e-6)


def test_outputs_still_referenced_are_never_reused():
    k = tcdsl.compile(SCALE)
    rng = np.random.default_rng(1)
    inputs = [(rand(rng, 2 * BIG), rand(rng, 2 * BIG)) for _ in range(4)]
    held = k(*inputs[0])  # the caller keeps it
    view = k(*inputs[1])[10:20]  # only a view of the second is kept
    shared = memoryview(k(*inputs[2]))  # a buffer export of the third
    for _ in range(3):
        k(*inputs[3])
    np.testing.assert_allclose(held, inputs[0][0] * inputs[0][1] + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(view, (inputs[1][0] * inputs[1][1] + 1)[10:20], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(shared), inputs[2][0] * inputs[2][1] + 1, rtol=1e-6, atol=1e-6)


def test_a_torch_tensor_sharing_an_output_keeps_it():
    torch = pytest.importorskip("torch")
    k = tcdsl.compile(SCALE)
    rng = np.random.default_rng(6)
    a, b = rand(rng, 2 * BIG), rand(rng, 2 * BIG)
    shared = torch.from_numpy(k(a, b))
    for _ in range(3):
        k(b, a + 1)
    np.testing.assert_allclose(shared.numpy(), a * b + 1, rtol=1e-6, atol=1e-6)


def test_an_output_that_needs_its_zeros_gets_them_on_every_call():
    src = "def acc(float(N,K) A) -> (C) { C(n) += A(n, k) }"
    k = tcdsl.compile(src)
    rng = np.random.default_rng(2)
    for _ in range(3):
        a = rand(rng, BIG, 3)
        np.testing.assert_allclose(k(a), a.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert k.output_pool.kept_bytes() == 0


def test_the_elman_rnn_reusing_its_output():
    k = tcdsl.compile(ELMAN)
    rng = np.random.default_rng(3)
    for T in (40, 40, 41):  # 40 x 64 x 128 floats: 1.25 MiB, pooled
        inputs = elman_inputs(rng, T, 64, 32, 128)
        got = k(*inputs)
        np.testing.assert_allclose(got, evaluate(ELMAN, inputs), rtol=2e-5, atol=2e-5)
        del got
    assert k.output_pool.kept_bytes() > 0


def test_torch_outputs_are_right_without_the_zero_fill():
    torch = pytest.importorskip("torch")
    k = tcdsl.compile(SCALE)
    a, b = torch.rand(1000), torch.rand(1000)
    for _ in range(2):
        got = k(a, b)
        assert isinstance(got, torch.Tensor)
        torch.testing.assert_close(got, a * b + 1)


def test_reuse_can_be_turned_off():
    k = tcdsl.compile(SCALE, options={"reuse_outputs": False})
    rng = np.random.default_rng(4)
    a, b = rand(rng, 2 * BIG), rand(rng, 2 * BIG)
    for _ in range(2):
        np.testing.assert_allclose(k(a, b), a * b + 1, rtol=1e-6, atol=1e-6)
    assert k.output_pool.kept_bytes() == 0
    with pytest.raises(tcdsl.TcError, match="reuse_outputs"):
        tcdsl.compile(SCALE, options={"reuse_outputs": "yes"})


BRANCH = """def f(float(T,B) X) -> (y, z) {
  for t in T { y(t, b) = X(t, b) }
  if T > 2 { for t in T { z(t, b) = X(t, b) * 2 } }
}"""


def test_outputs_beside_a_branch_around_loops():
    # the analysis leaves the kernels under a branch around loops out: z,
    # written only there, keeps its zero fill; y is still proved
    assert overwritten(BRANCH) == {"y"}
    k = tcdsl.compile(BRANCH)
    rng = np.random.default_rng(8)
    for T in (3, 2, 4):
        x = rand(rng, T, BIG)
        y, z = k(x)
        np.testing.assert_array_equal(y, x)
        if T > 2:
            np.testing.assert_array_equal(z, 2 * x)
        else:  # nothing written: z's inferred extent is empty
            assert z.size == 0
        del y, z


TWO = "def two(float(N) A) -> (B, C) { B(i) = A(i) + 1\n C(i) = A(i) * 2 }"


def test_two_outputs_of_one_shape_are_reused_while_the_last_pair_is_held():
    # a loop that still holds the previous call's pair while it makes the next
    k = tcdsl.compile(TWO)
    rng = np.random.default_rng(9)
    a = rand(rng, 2 * BIG)
    b, c = k(a)
    addresses = set()
    for _ in range(4):
        x = rand(rng, 2 * BIG)
        b, c = k(x)  # the pair before is dropped only after this call
        np.testing.assert_array_equal(b, x + 1)
        np.testing.assert_array_equal(c, x * 2)
        addresses.update((b.ctypes.data, c.ctypes.data))
    assert len(addresses) == 4  # two pairs of memory, taking turns
    assert k.output_pool.kept_bytes() == 4 * a.nbytes  # 2 per output
