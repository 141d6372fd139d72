"""``out=`` arrays that share memory with an input (or with each other).

A kernel reads its inputs as they were when it was called, whatever ``out=``
points at: an ``out=`` array that shares memory with an input is written
through a copy and the result copied into it after the call (as NumPy's
``out=`` behaves).  Two ``out=`` arrays sharing memory are refused.  Each
case is checked on the first call (the general path) and on a later call with
the same shapes (the fast call, which must leave it to the general path).
"""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl

REVERSE = "def rev(float(N) A, float(N) B) -> (C) { C(i) = A(N - 1 - i) + B(i) }"
SHIFT = "def shift(float(N) A) -> (C) { C(i) = A(i) + A(i + 1) where i in 0:N-1 }"
MATMUL = "def mm(float(N,N) A, float(N,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
ACCUMULATE = "def acc(float(N) A) -> (C) { C(i) += A(N - 1 - i) }"
AXPY = "def axpy(float(N) X, float(N) Y, float a) -> (Z) { Z(i) = a * X(i) + Y(i) }"
TWO = "def two(float(N) A) -> (P, Q) { P(i) = A(i) * 2\n Q(i) = A(N - 1 - i) }"
LOOP = """
def smooth(float(N) H0) -> (H) {
  H(i) = H0(i)
  for t in 3 {
    H(i) = 0.5 * H(i) + 0.25 * H0((i + 1) % N) + 0.25 * H0((i + N - 1) % N)
  }
}
"""


def _rng(seed=0):
    return np.random.default_rng(seed)


def _twice(k, make_args, out_index):
    """Call ``k`` twice on fresh arguments (first call: the general path; second: a planned shape),
    with ``out=`` the argument at ``out_index``; both results, each with its inputs' copies taken before."""
    results = []
    for _ in range(2):
        args = make_args()
        before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        r = k(*args, out=args[out_index])
        assert r is args[out_index]
        results.append((r, before))
    return results


@pytest.mark.parametrize("n", [7, 64, 1000])
def test_an_input_read_at_another_index_is_read_as_it_was(n):
    k = tcdsl.compile(REVERSE)
    for r, (a, b) in _twice(k, lambda: [_rng(n).standard_normal(n).astype(np.float32),
                                        _rng(n + 1).standard_normal(n).astype(np.float32)], 0):
        np.testing.assert_allclose(r, a[::-1] + b, rtol=1e-6)


def test_a_view_one_element_along_is_read_as_it_was():
    k = tcdsl.compile(SHIFT)
    for _ in range(2):
        buf = np.arange(1, 34, dtype=np.float32)
        expected = buf[:-1] + buf[1:]
        r = k(buf, out=buf[:-1])  # C(i) lands on A(i): C(0) written before A(1) is read, unless copied
        np.testing.assert_array_equal(r, expected)
        np.testing.assert_array_equal(buf[:-1], expected)
        assert buf[-1] == 33


def test_a_matrix_product_into_its_own_operand():
    k = tcdsl.compile(MATMUL)
    for seed in range(2):
        a = _rng(seed).standard_normal((40, 40))
        a32 = a.astype(np.float32)
        b = _rng(seed + 5).standard_normal((40, 40)).astype(np.float32)
        expected = a32.astype(np.float64) @ b
        r = k(a32, b, out=a32)
        assert r is a32
        np.testing.assert_allclose(a32, expected, rtol=1e-4, atol=1e-4)
        a32 = a.astype(np.float32)
        np.testing.assert_allclose(k(b, a32, out=a32), b.astype(np.float64) @ a.astype(np.float32), rtol=1e-4,
                                   atol=1e-4)


def test_plus_equals_accumulates_into_what_the_shared_array_held():
    k = tcdsl.compile(ACCUMULATE)
    for _ in range(2):
        a = np.arange(10, dtype=np.float32)
        k(a, out=a)  # C starts as what the array holds (a) and adds A reversed, read as it was
        np.testing.assert_array_equal(a, np.arange(10) + np.arange(10)[::-1])


def test_an_elementwise_update_in_place():
    k = tcdsl.compile(AXPY)
    for x_out in (True, False):
        for _ in range(2):
            x = _rng(1).standard_normal(100).astype(np.float32)
            y = _rng(2).standard_normal(100).astype(np.float32)
            expected = np.float32(3) * x + y
            target = x if x_out else y
            assert k(x, y, 3.0, out=target) is target
            np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-6)  # (a fused multiply-add)


def test_a_loop_reading_its_input_at_neighbours_every_step():
    k = tcdsl.compile(LOOP)
    h0 = _rng(3).standard_normal(20)
    h = h0.copy()
    for _ in range(3):
        h = 0.5 * h + 0.25 * np.roll(h0, -1) + 0.25 * np.roll(h0, 1)
    for _ in range(2):
        x = h0.astype(np.float32)
        k(x, out=x)
        np.testing.assert_allclose(x, h, rtol=1e-5, atol=1e-6)


def test_one_of_two_outputs_shares_memory_with_the_input():
    k = tcdsl.compile(TWO)
    for _ in range(2):
        a = np.arange(6, dtype=np.float32)
        q = np.zeros(6, np.float32)
        p, q2 = k(a, out=(q, a))
        assert p is q and q2 is a
        np.testing.assert_array_equal(p, np.arange(6) * 2)
        np.testing.assert_array_equal(a, np.arange(6)[::-1])


def test_two_out_arrays_sharing_memory_are_refused():
    k = tcdsl.compile(TWO)
    a = np.arange(6, dtype=np.float32)
    buf = np.zeros(6, np.float32)
    k(a, out=(np.zeros(6, np.float32), np.zeros(6, np.float32)))  # a plan for these shapes
    for pair in ((buf, buf), (buf, buf.view()), [buf.view(), buf]):
        with pytest.raises(tcdsl.TcShapeError, match="out= arrays for 'P' and 'Q' share memory"):
            k(a, out=pair)


def test_out_arrays_apart_from_the_inputs_still_take_the_fast_call():
    from tcdsl.runtime.fastcall import MISS

    k = tcdsl.compile(REVERSE)
    a, b = np.ones(50, np.float32), np.ones(50, np.float32)
    c = np.zeros(50, np.float32)
    k(a, b, out=c)  # the general path makes the plan
    fast_call = k._fast_calls[np.ndarray]
    assert fast_call((a, b), c) is c
    np.testing.assert_array_equal(c, 2 * np.ones(50))
    for shared in (a, a[::-1], b.view()):  # (b itself: an in-place pair, below)
        assert fast_call((a, b), shared) is MISS
    assert fast_call((a, b), [c]) is c


def test_torch_tensors_and_a_numpy_array_that_share_memory():
    torch = pytest.importorskip("torch")
    k = tcdsl.compile(REVERSE)
    for _ in range(2):
        a = torch.arange(9, dtype=torch.float32)
        b = torch.ones(9)
        expected = a.flip(0) + b
        assert k(a, b, out=a) is a
        assert torch.equal(a, expected)
    for _ in range(2):  # a NumPy input and a PyTorch out= over the same memory
        x = np.arange(9, dtype=np.float32)
        t = torch.from_numpy(x)
        r = k(x, np.ones(9, np.float32), out=t)
        assert r is t
        np.testing.assert_array_equal(x, np.arange(9)[::-1] + 1)


# Where the out= array may be the input itself, passed as it is (no copy):
# one "=" statement writes the output, outside loops and branches, reading the
# input only at its own indices and no temporary; no other statement reads the input.
ADAM = """
def adam(float(N) p, float(N) g, float(N) m, float(N) v, float lr) -> (p1, m1, v1) {
  m1(i) = 0.9 * m(i) + 0.1 * g(i)
  v1(i) = 0.999 * v(i) + 0.001 * g(i) * g(i)
  p1(i) = p(i) - lr * m1(i) / (sqrt(v1(i)) + 1e-8)
}
"""
READ_AFTER = "def r(float(N) A) -> (B, C) { B(i) = A(i) * 2\n C(i) = B(N - 1 - i) }"
IN_PLACE = [
    (AXPY, {("Z", "X"), ("Z", "Y")}),
    (REVERSE, {("C", "B")}),                      # A is read at N - 1 - i
    (SHIFT, set()),                               # A(i + 1)
    (MATMUL, set()),                              # a sum
    (ACCUMULATE, set()),                          # += reads what C holds
    (TWO, set()),                                 # A is read by both statements
    (LOOP, set()),                                # H is written twice, once in a loop
    (ADAM, {("p1", "p"), ("m1", "m"), ("v1", "v")}),  # g is read by two statements
    ("def t(float(N,M) A) -> (B) { B(i, j) = A(j, i) }", set()),
    ("def s(float(N) A) -> (B) { e(i) = exp(A(i))\n B(i) = e(i) / A(i) }", set()),  # a temporary: its memory may be B's
    (READ_AFTER, {("B", "A")}),                   # C reads B, written before
    (READ_AFTER.replace("def r", "def r2").replace(") }", ") + A(0) }"), set()),  # C reads A too
    ("def f(float(N) A) -> (B) { for t in 2 { B(i) = A(i) * 2 } }", set()),
    ("def i(int32(N) A) -> (B) { B(i) = float(A(i)) }", set()),  # another dtype
]


@pytest.mark.parametrize("src, pairs", IN_PLACE, ids=[s.split("(")[0].split()[-1] for s, _ in IN_PLACE])
def test_which_outputs_may_be_their_input_itself(src, pairs):
    k = tcdsl.compile(src)
    sig = k.signature
    assert {(sig.outputs[o].name, sig.inputs[i].name) for o, i in sig.in_place} == pairs


def test_an_in_place_pair_takes_the_fast_call_and_others_still_copy():
    from tcdsl.runtime.fastcall import MISS

    k = tcdsl.compile(ADAM)
    rng = _rng(4)
    p, g, m, v = (rng.standard_normal(300).astype(np.float32) for _ in range(4))
    v = np.abs(v)
    m1 = 0.9 * m + 0.1 * g
    v1 = np.float32(0.999) * v + np.float32(0.001) * g * g
    p1 = p - 0.01 * m1 / (np.sqrt(v1) + 1e-8)
    fresh = k(p, g, m, v, 0.01)
    for x, want in zip(fresh, (p1, m1, v1)):
        np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-6)
    for step in range(3):  # the general path, then the fast call, both in place
        args = [x.copy() for x in (p, g, m, v)]
        out = (args[0], args[2], args[3])
        if step == 2:
            assert k._fast_calls[np.ndarray]((*args, 0.01), out) is not MISS
        else:
            assert k(*args, 0.01, out=out) is not None
        for x, want in zip(out, (p1, m1, v1)):
            np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-6)
    args = [x.copy() for x in (p, g, m, v)]
    assert k._fast_calls[np.ndarray]((*args, 0.01), (args[1], args[2], args[3])) is MISS  # p1 into g: a copy
    k(*args, 0.01, out=(args[1], args[2], args[3]))
    for x, want in zip((args[1], args[2], args[3]), (p1, m1, v1)):
        np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-6)


def test_a_later_statement_reads_the_output_written_in_place():
    k = tcdsl.compile(READ_AFTER)
    assert [(o, i) for o, i in k.signature.in_place] == [(0, 0)]
    for _ in range(2):
        a = np.arange(9, dtype=np.float32)
        c = np.zeros(9, np.float32)
        k(a, out=(a, c))
        np.testing.assert_array_equal(a, 2 * np.arange(9))
        np.testing.assert_array_equal(c, 2 * np.arange(9)[::-1])


def _corpus_cases():
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "programs"))
    import cases

    return cases.CASES


@pytest.mark.slow
@pytest.mark.parametrize("case", _corpus_cases(), ids=lambda c: c.name)
def test_corpus_programs_in_place_agree_with_fresh_outputs(case):
    """Every in-place pair of every corpus program: the output written into its own input gives what a fresh output holds."""
    import pathlib

    k = tcdsl.compile(pathlib.Path(__file__).resolve().parent / "programs" / case.file, case.entry)
    for n, sizes in enumerate(case.sizes):
        for o, i in k.signature.in_place:
            inputs = case.make_inputs(np.random.default_rng(n), **sizes)
            want = k(*inputs)
            want = want if isinstance(want, tuple) else (want,)
            inputs = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
            if not isinstance(inputs[i], np.ndarray) or inputs[i].shape != want[o].shape:
                continue  # (sizes where the output is not the input's shape: a call would refuse it)
            outs = [np.zeros_like(w) for w in want]
            outs[o] = inputs[i]
            got = k(*inputs, out=tuple(outs) if len(outs) > 1 else outs[0])
            got = got if isinstance(got, tuple) else (got,)
            assert got[o] is inputs[i]
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)
