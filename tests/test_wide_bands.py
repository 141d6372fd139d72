"""The outermost parallel loop of a nest is the wide one (schedule.py,
``_lift_wide_bands``): an LSTM cell written over ``gates(g, b, j)`` with the
input projections given had isl's schedule put the 4-iteration gate loop
outermost, so the recurrent GEMM ran on one thread with one-row register tiles
(10x slower than with the batch loop outside).  Structure checked on the
schedule and the TIR, values against NumPy in every specialize mode."""
from __future__ import annotations

import re

import numpy as np
import pytest
from tvm import tirx

import tcdsl
from tcdsl.driver import emit
from helpers import LSTM_GATES_GIVEN, lstm_gates_given_reference, parallel_inside_serial, rand

CELL = LSTM_GATES_GIVEN
# a small fixed loop next to the vector loop stays outside it
ROWS = "def rows(float(3,N) x, float(3) s) -> (y) { y(g, n) = x(g, n) * s(g) }"


_numpy_cell = lstm_gates_given_reference


def _outer_parallel_extents(func) -> list:
    """The extent of every parallel loop that is not inside another loop but
    the program's time loop ``t``."""
    out = []

    def visit(s, depth):
        if isinstance(s, tirx.For):
            if s.kind == tirx.ForKind.PARALLEL and depth == 0:
                out.append(s.extent)
            visit(s.body, depth + (s.loop_var.name != "t"))
        elif isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                visit(x, depth)
        elif isinstance(s, tirx.IfThenElse):
            visit(s.then_case, depth)
            if s.else_case is not None:
                visit(s.else_case, depth)
        elif isinstance(getattr(s, "body", None), tirx.Stmt):
            visit(s.body, depth)
    visit(func.body, 0)
    return out


def test_gate_loop_gives_way_to_the_batch_loop():
    k = tcdsl.compile(CELL, tuning_db=False)
    text = emit(k, "schedule")
    # the GEMM's nest: the batch loop b first, the gate loop g inside it
    first = re.search(r'S3\[g, b, j, k\] -> \[\((\w)\)\]', text)
    assert first is not None and first.group(1) == "b", text
    func = k.backend(None).func
    extents = [str(e) for e in _outer_parallel_extents(func)]
    # no parallel loop of the 4 gates (nor a single-chunk loop made of them)
    assert extents and all(e not in ("1", "4") for e in extents), extents


def test_stride_one_loop_stays_innermost():
    k = tcdsl.compile(ROWS, tuning_db=False)
    assert "T.vectorized" in k.backend(None).func.script()
    rng = np.random.default_rng(1)
    x, s = rand(rng, 3, 37), rand(rng, 3)
    np.testing.assert_allclose(k(x, s), x * s[:, None], rtol=1e-6)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_cell_matches_numpy(mode):
    k = tcdsl.compile(CELL, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(0)
    for T, B, H in ((5, 9, 20), (3, 1, 17)):
        G, h0, c0, Wh = rand(rng, T, 4, B, H), rand(rng, B, H), rand(rng, B, H), rand(rng, 4, H, H) * 0.3
        h, c = k(G, h0, c0, Wh)
        rh, rc = _numpy_cell(G, h0, c0, Wh)
        np.testing.assert_allclose(h, rh, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c, rc, rtol=1e-4, atol=1e-5)


COLSUM = "def colsum(float(N,C) x) -> (y) { y(j) +=! x(i, j) }"
COLSOFTMAX = """
def colsoftmax(float(N,C) x) -> (y) {
  m(j) max=! x(i, j)
  e(i, j) = exp(x(i, j) - m(j))
  s(j) +=! e(i, j)
  y(i, j) = e(i, j) / s(j)
}
"""


@pytest.mark.parametrize("src", [COLSUM, COLSOFTMAX])
def test_column_reductions_run_strips_in_parallel_outside_the_row_loop(src):
    func = tcdsl.compile(src, tuning_db=False).backend(None).func
    text = func.script()
    assert "T.parallel" in text and "T.vectorized" in text
    assert parallel_inside_serial(func.body, allowed=()) == [], text
    # strips of 128 columns: a thread streams 512 bytes of each row
    assert "T.parallel((T.max(C, 0) + 128 - 1) // 128)" in text, text


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_column_reductions_match_numpy(mode):
    ks = tcdsl.compile(COLSUM, tuning_db=False, specialize=mode)
    km = tcdsl.compile(COLSOFTMAX, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(3)
    for N, C in ((7, 200), (33, 64), (5, 1), (300, 129)):
        x = rand(rng, N, C)
        np.testing.assert_allclose(ks(x), x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
        e = np.exp(x - x.max(0))
        np.testing.assert_allclose(km(x), e / e.sum(0), rtol=1e-5, atol=1e-7)
