"""Specialized kernels whose row loop is 1 (a batch of 1): isl drops the unit
loop (after-scheduling) or schedules without it (before-scheduling), and the
CPU mapping (codegen/cpu.py, ``CpuProgram.kernel``) runs the kernel as one
row, as the symbolic kernel runs that size, instead of launching a parallel
region per step of a reduction loop.  Structure checked on the TIR, values
against NumPy."""
from __future__ import annotations

import re
import numpy as np
import pytest
from tvm import tirx

import tcdsl
from helpers import (ELMAN, EXAMPLES, LSTM_GATES_GIVEN, QRNN, elman_inputs, lstm_gates_given_reference,
                     parallel_inside_serial, parallel_regions, qrnn_inputs, rand, reference)

LSTM = EXAMPLES / "lstm.tc"
MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
MODES = ["after-scheduling", "before-scheduling"]


def _regions_per_step(func) -> int:
    """Parallel loops directly inside the program's time loop ``t`` (per step)."""
    count = 0

    def visit(s, in_t):
        nonlocal count
        if isinstance(s, tirx.For):
            if s.kind == tirx.ForKind.PARALLEL and in_t:
                count += 1
            visit(s.body, in_t or s.loop_var.name == "t")
        elif isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                visit(x, in_t)
        elif isinstance(s, tirx.IfThenElse):
            visit(s.then_case, in_t)
            if s.else_case is not None:
                visit(s.else_case, in_t)
        elif isinstance(getattr(s, "body", None), tirx.Stmt):
            visit(s.body, in_t)
    visit(func.body, False)
    return count


@pytest.mark.parametrize("mode", MODES)
def test_batch_1_elman_has_no_parallel_region_inside_a_reduction_loop(mode):
    k = tcdsl.compile(ELMAN, specialize=mode, options={"disk_cache": False, "measure_specialized": False})
    b = k.backend({"T": 9, "B": 1, "Ci": 40, "Co": 72})
    assert parallel_inside_serial(b.func.body) == []
    assert _regions_per_step(b.func) == 0
    # the reductions still run in register tiles (one row of tiles, as wide as the host's vectors allow)
    assert re.search(r"T\.alloc_buffer\(\(1, (16|24|32|48|64|128|256)\)\)", b.func.script())
    rng = np.random.default_rng(11)
    for T, B, Ci, Co in [(9, 1, 40, 72), (3, 1, 5, 1), (9, 2, 40, 72)]:
        x = elman_inputs(rng, T, B, Ci, Co)
        np.testing.assert_allclose(k(*x), reference.elman_rnn(*x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_batch_1_lstm_and_qrnn_run_each_step_without_parallel_regions(mode):
    opts = {"disk_cache": False, "measure_specialized": False}
    lstm = tcdsl.compile(LSTM, specialize=mode, options=opts)
    b = lstm.backend({"T": 5, "B": 1, "I": 16, "H": 24})
    assert parallel_inside_serial(b.func.body) == [] and _regions_per_step(b.func) == 0
    rng = np.random.default_rng(12)
    x = [rand(rng, 5, 1, 16), rand(rng, 1, 24), rand(rng, 1, 24), rand(rng, 4, 16, 24), rand(rng, 4, 24, 24),
         rand(rng, 4, 24)]
    for got, want in zip(lstm(*x), reference.lstm(*x)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    qrnn = tcdsl.compile(QRNN, specialize=mode, options=opts)
    b = qrnn.backend({"T": 6, "B": 1, "C": 8, "H": 20})
    assert parallel_inside_serial(b.func.body) == []
    x = qrnn_inputs(rng, 6, 1, 8, 20)
    for got, want in zip(qrnn(*x), reference.qrnn(*x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_matrix_vector_product_keeps_the_reduction_inside(mode):
    """A matmul with one row: no parallel column loop per step of k."""
    k = tcdsl.compile(MATMUL, specialize=mode, options={"disk_cache": False, "measure_specialized": False})
    b = k.backend({"M": 1, "K": 33, "N": 70})
    assert parallel_inside_serial(b.func.body, allowed=()) == []
    rng = np.random.default_rng(13)
    for M, K, N in [(1, 33, 70), (1, 1, 1), (2, 33, 70)]:
        A, B = rand(rng, M, K), rand(rng, K, N)
        np.testing.assert_allclose(k(A, B), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-5)


def test_symbolic_kernels_keep_their_parallel_loops():
    """The one-row lowering is for unit loops: a symbolic kernel's rows stay
    chunked over threads (one parallel region for the whole recurrence)."""
    # (without hoisting: the input projection would be a parallel kernel of its own)
    k = tcdsl.compile(ELMAN, options={"disk_cache": False, "hoist": False})
    assert parallel_regions(k.script) == 1
    assert parallel_inside_serial(k.backend(None).func.body) == []


def _gru_reference(x, h0, Wx, Wh, bx, bh):
    x, h, Wx, Wh, bx, bh = (a.astype(np.float64) for a in (x, h0, Wx, Wh, bx, bh))
    out = []
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for t in range(x.shape[0]):
        gx = np.einsum("bi,gij->gbj", x[t], Wx) + bx[:, None, :]
        gh = np.einsum("bk,gkj->gbj", h, Wh) + bh[:, None, :]
        r, z = sig(gx[0] + gh[0]), sig(gx[1] + gh[1])
        n = np.tanh(gx[2] + r * gh[2])
        h = (1 - z) * n + z * h
        out.append(h)
    return np.stack(out)


def test_before_scheduling_keeps_the_symbolic_schedule_when_it_vectorizes_more():
    """With B = 1 fixed before scheduling, isl fuses a GRU step into one serial
    band over the columns (no vector loop); the symbolic schedule serves then."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from specialize import GRU

    k = tcdsl.compile(GRU, specialize="before-scheduling", options={"disk_cache": False, "measure_specialized": False})
    b = k.backend({"T": 4, "B": 1, "I": 8, "H": 40})
    assert "T.vectorized" in b.func.script() and parallel_inside_serial(b.func.body) == []
    rng = np.random.default_rng(14)
    for B in (1, 3):
        x = [rand(rng, 4, B, 8), rand(rng, B, 40), rand(rng, 3, 8, 40), rand(rng, 3, 40, 40), rand(rng, 3, 40),
             rand(rng, 3, 40)]
        np.testing.assert_allclose(k(*x), _gru_reference(*x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_specialized_lstm_at_batch_2_keeps_the_steps_inside_its_parallel_loop(mode):
    """The symbolic LSTM runs its time loop inside one parallel loop over the
    rows (one parallel region per call); with (T, B, I, H) = (16, 2, 48, 48)
    fixed before scheduling, isl's schedule launched two regions per step
    (2.6x slower than symbolic): the symbolic schedule serves then."""
    opts = {"disk_cache": False, "measure_specialized": False}
    lstm = tcdsl.compile(LSTM, specialize=mode, options=opts)
    sizes = {"T": 16, "B": 2, "I": 48, "H": 48}
    b = lstm.backend(sizes)
    assert _regions_per_step(b.func) == 0
    assert _regions_per_step(tcdsl.compile(LSTM, options=opts).backend().func) == 0  # as the symbolic kernel
    rng = np.random.default_rng(15)
    x = [rand(rng, 16, 2, 48), rand(rng, 2, 48), rand(rng, 2, 48), rand(rng, 4, 48, 48), rand(rng, 4, 48, 48),
         rand(rng, 4, 48)]
    for got, want in zip(lstm(*x), reference.lstm(*x)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_specialized_qrnn_at_batch_2_takes_tile_rows_from_the_steps(mode):
    """The QRNN's hoisted gate projections: with (T, B, C, H) = (32, 2, 32,
    96) fixed before scheduling, isl ran them parallel over the 31 steps with
    the 2 batch rows as the register tiles' rows (one-row tiles, 1.25x slower
    than symbolic); the symbolic schedule, parallel over the batch with the
    steps as rows, serves then (schedule.py ``_short_rows``)."""
    opts = {"disk_cache": False, "measure_specialized": False}
    qrnn = tcdsl.compile(QRNN, specialize=mode, options=opts)
    sizes = {"T": 32, "B": 2, "C": 32, "H": 96}
    text = qrnn.backend(sizes).func.script()
    loops = re.findall(r"for c0 in T\.parallel\((\d+)\)", text)
    assert loops and set(loops) == {"2"}, loops  # over the batch, never over the 31 steps
    assert "T.grid(1, 0)" not in text  # no row tile loop of zero full tiles
    rng = np.random.default_rng(16)
    x = qrnn_inputs(rng, 32, 2, 32, 96)
    for got, want in zip(qrnn(*x), reference.qrnn(*x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_specialized_lstm_keeps_its_gate_loop_parallel_and_its_register_tiles(mode):
    """With (T, B, H) = (4, 64, 512) fixed, isl fused the elementwise gates
    into the rows' loop after the gate loop, which it made serial: the
    recurrent product then ran without register tiles (3x slower than the
    symbolic kernel).  The symbolic schedule, whose reductions have no
    serial loop around them but their own, serves then (schedule.py)."""
    opts = {"disk_cache": False, "measure_specialized": False}
    k = tcdsl.compile(LSTM_GATES_GIVEN, specialize=mode, options=opts)
    sizes = {"T": 4, "B": 64, "H": 512}
    text = k.backend(sizes).func.script()
    assert "acc = T.alloc_buffer((4, 24))" in text or "acc = T.alloc_buffer((8, 48))" in text, text
    rng = np.random.default_rng(17)
    G, h0, c0 = rand(rng, 4, 4, 64, 512), rand(rng, 64, 512), rand(rng, 64, 512)
    Wh = (rand(rng, 4, 512, 512) / np.sqrt(512)).astype(np.float32)
    for got, want in zip(k(G, h0, c0, Wh), lstm_gates_given_reference(G, h0, c0, Wh)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
