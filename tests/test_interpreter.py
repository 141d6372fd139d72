"""The reference interpreter (``tcdsl.testing.evaluate``) against the NumPy
references of the whole corpus, and a few semantic corner cases of its own."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

from tcdsl import TcSemanticError, TcShapeError
from tcdsl.testing import OutOfBoundsRead, evaluate

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"
sys.path.insert(0, str(PROGRAMS))
import cases  # noqa: E402  (tests/programs/cases.py)


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_corpus(case):
    for i, sizes in enumerate(case.sizes):
        inputs = case.make_inputs(np.random.default_rng(i), **sizes)
        got = evaluate(PROGRAMS / case.file, inputs, case.entry)
        got = got if isinstance(got, tuple) else (got,)
        want = case.reference(*inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, f"sizes {sizes}: shape {g.shape}, NumPy {w.shape}"
            assert g.dtype == w.dtype, f"sizes {sizes}: dtype {g.dtype}, NumPy {w.dtype}"
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=f"sizes {sizes}")


def f32(*xs):
    return np.asarray(xs, dtype=np.float32)


def test_floor_division_and_modulo():
    src = "def f(int32(N) A, int32(N) B) -> (Q, R) { Q(i) = A(i) / B(i)\n R(i) = A(i) % B(i) }"
    a, b = np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)
    q, r = evaluate(src, [a, b])
    assert q.tolist() == [3, -4, -4, 3] and r.tolist() == [1, 1, -1, -1]
    q, r = evaluate(src, [a, np.array([0, 0, -1, -1], np.int32)])  # NumPy's x / 0 == x % 0 == 0
    assert q.tolist() == [0, 0, -7, 7] and r.tolist() == [0, 0, 0, 0]


def test_select_evaluates_only_the_taken_side():
    src = "def f(float(N) A) -> (B) { B(i) = i > 0 ? A(i - 1) : 0 where i in 0:N }"
    np.testing.assert_array_equal(evaluate(src, [f32(1, 2, 3)]), f32(0, 1, 2))


def test_out_of_bounds_read_is_reported():
    src = "def f(float(N) A) -> (B) { B(i) = A(i - 1) where i in 0:N }"
    with pytest.raises(OutOfBoundsRead, match=r"<string>:1:35: 'A\(-1,\)' is read"):
        evaluate(src, [f32(1, 2, 3)])


def test_bang_initialises_and_plain_reduction_accumulates():
    src = ("def f(float(N, K) A) -> (S, M) {\n  S(i) +=! A(i, k)\n  S(i) += A(i, k)\n"
           "  M(i) max=! A(i, k)\n  M(i) min= A(i, k)\n}")
    a = np.array([[1, -2, 3], [-4, -5, -6]], np.float32)
    s, m = evaluate(src, [a])
    np.testing.assert_array_equal(s, f32(4, -30))
    np.testing.assert_array_equal(m, f32(-2, -6))


def test_statement_reading_its_own_writes_runs_in_program_order():
    # a scan written as one comprehension: B(i) depends on B(i - 1), written earlier
    src = "def f(float(N) A) -> (B) { B(i) = A(i)\n B(i) = A(i) + (i > 0 ? B(i - 1) : 0) where i in 0:N }"
    np.testing.assert_array_equal(evaluate(src, [f32(1, 2, 3, 4)]), f32(1, 3, 6, 10))
    # a pointwise self-read stays vectorised and means the old value
    src = "def f(float(N) A) -> (B) { B(i) = A(i)\n B(i) = B(i) * 2 }"
    np.testing.assert_array_equal(evaluate(src, [f32(1, 2)]), f32(2, 4))


def test_loops_conditions_and_temporaries():
    src = """def f(float(T, N) x) -> (y) {
      for t in T {
        if t == 0 { h(n) = x(t, n) } else { h(n) = h(n) + x(t, n) }
        y(t, n) = h(n) * 2
      }
    }"""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(evaluate(src, [x]), 2 * np.cumsum(x, axis=0))


def test_elman_with_zero_steps_gives_an_empty_output():
    src = (PROGRAMS / "elman_rnn.tc")
    rng = np.random.default_rng(0)
    out = evaluate(src, [rng.standard_normal(s).astype(np.float32) for s in [(0, 2, 3), (2, 4), (3, 4), (4, 4)]])
    assert out.shape == (0, 2, 4)


def test_casts_and_types():
    src = "def f(float(N) A) -> (int32(N) I, B) { I(i) = int32(A(i))\n B(i) = A(i) != 0 }"
    i, b = evaluate(src, [f32(-1.7, 0, 2.9, np.nan)])
    assert i.dtype == np.int32 and i[:3].tolist() == [-1, 0, 2]
    assert b.dtype == np.bool_ and b.tolist() == [True, False, True, True]


def test_errors_are_tc_errors():
    with pytest.raises(TcSemanticError):
        evaluate("def f(float(N) A) -> (B) { B(i) = Z(i) }", [f32(1)])
    with pytest.raises(TcShapeError):
        evaluate("def f(float(N) A, float(N) C) -> (B) { B(i) = A(i) + C(i) }", [f32(1), f32(1, 2)])
