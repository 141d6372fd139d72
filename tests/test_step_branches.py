"""A step that branches on its loop variable still runs its steps inside the
parallel loop (polyhedral/branches.py, codegen/cpu_steps.py), and rows whose
step is one strided element run their steps in blocks of a few rows (the
rows of a (B, C, L) batch are its pairs (b, c))."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import parallel_regions

SCANS = """
def ifelse(float(B,L) x) -> (s) {
  for t in L {
    if t == 0 { s(b, t) = x(b, t) } else { s(b, t) = s(b, t - 1) + x(b, t) }
  }
}
def select(float(B,L) x) -> (s) {
  for t in L {
    s(b, t) = x(b, t) + (t > 0 ? s(b, t - 1) : 0)
  }
}
def returns(float(B,L) r) -> (R) {
  for t in L {
    R(b, L - 1 - t) = r(b, L - 1 - t) + (t > 0 ? 0.5 * R(b, L - t) : 0)
  }
}
def three(float(B,L) x) -> (s) {
  for t in L {
    if t == 0 { s(b, t) = x(b, t) }
    else if t < 3 { s(b, t) = 2 * s(b, t - 1) + x(b, t) }
    else { s(b, t) = s(b, t - 1) - x(b, t) }
  }
}
def rows2(float(B,C,L) x) -> (s) {
  for t in L {
    if t == 0 { s(b, c, t) = x(b, c, t) } else { s(b, c, t) = fmax(s(b, c, t - 1), x(b, c, t)) }
  }
}
def decay(float(B,C,L) x, float(B,C) a) -> (s) {
  for t in L {
    s(b, c, t) = x(b, c, t) + (t > 0 ? a(b, c) * s(b, c, t - 1) : 0)
  }
}
def neighbors(float(B,C,L) x) -> (s) {
  for t in L {
    if t == 0 { s(b, c, t) = x(b, c, t) } else { s(b, c, t) = s(b, (c + 1) % C, t - 1) + x(b, c, t) }
  }
}
def columns(float(L,B) x) -> (s) {
  for t in L {
    if t == 0 { s(t, b) = x(t, b) } else { s(t, b) = s(t - 1, b) + x(t, b) }
  }
}
"""


def _scan(x: np.ndarray, entry: str, a: np.ndarray | None = None) -> np.ndarray:
    """The programs above, step by step in float64 along the last axis (``columns``: the first)."""
    x = np.moveaxis(x.astype(np.float64), 0, -1) if entry == "columns" else x.astype(np.float64)
    s = np.zeros_like(x)
    L = x.shape[-1]
    for t in range(L):
        if entry == "returns":
            u = L - 1 - t
            s[..., u] = x[..., u] + (0.5 * s[..., u + 1] if t > 0 else 0)
        elif t == 0:
            s[..., 0] = x[..., 0]
        elif entry == "three":
            s[..., t] = 2 * s[..., t - 1] + x[..., t] if t < 3 else s[..., t - 1] - x[..., t]
        elif entry == "rows2":
            s[..., t] = np.maximum(s[..., t - 1], x[..., t])
        elif entry == "decay":
            s[..., t] = a * s[..., t - 1] + x[..., t]
        elif entry == "neighbors":
            s[..., t] = np.roll(s[..., t - 1], -1, axis=1) + x[..., t]
        else:
            s[..., t] = s[..., t - 1] + x[..., t]
    return np.moveaxis(s, -1, 0) if entry == "columns" else s


ENTRIES = ["ifelse", "select", "returns", "three", "rows2", "decay", "columns"]
BATCHES = ["rows2", "decay", "neighbors"]  # (B, C, L)


@pytest.mark.parametrize("entry", ENTRIES)
def test_the_steps_run_inside_one_parallel_region(entry):
    k = tcdsl.compile(SCANS, entry)
    assert "par_steps" in tcdsl.driver.emit(k, "schedule")
    assert parallel_regions(k.script) == 1
    assert re.search(r"T\.parallel\(.*\):(\s+c0_\w+: T\.let.*)+\s+for (c0_blk, )?t", k.script), k.script
    # a row's step is one element at a stride of L: blocks of rows; down a column, whole chunks
    assert ("_blk" in k.script) == (entry != "columns")
    # a (B, C, L) batch: the rows are the pairs (b, c) (codegen/cpu_steps.py step_rows)
    assert ("s_rows = T.decl_buffer((B * C, L)" in k.script) == (entry in BATCHES)


def test_rows_that_read_their_neighbours_are_not_merged():
    """``s(b, c, t)`` reads ``s(b, c + 1, t - 1)``: the steps run inside the
    loop over b, each step over all of c; blocks of (b, c) rows would read a
    neighbour's step before it was computed."""
    k = tcdsl.compile(SCANS, "neighbors")
    assert parallel_regions(k.script) == 1
    assert "_rows = T.decl_buffer" not in k.script and "_blk" not in k.script
    x = np.random.default_rng(5).uniform(-1, 1, (3, 10, 9)).astype(np.float32)
    np.testing.assert_allclose(k(x), _scan(x, "neighbors"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("entry", ENTRIES + ["neighbors"])
def test_scans_agree_with_numpy(entry, mode):
    k = tcdsl.compile(SCANS, entry, specialize=mode)
    rng = np.random.default_rng(7)
    for shape in [(1, 1), (5, 1), (1, 6), (7, 9), (13, 64)]:
        shape = (3,) + shape if entry in BATCHES else shape[::-1] if entry == "columns" else shape
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        if entry == "decay":
            a = rng.uniform(-1, 1, shape[:2]).astype(np.float32)
            np.testing.assert_allclose(k(x, a), _scan(x, entry, a), rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_allclose(k(x), _scan(x, entry), rtol=1e-5, atol=1e-5)


RECURRENT = """
def mix(float(T,N) x, float(N,N) W) -> (h) {
  for t in T {
    if t == 0 { h(t, j) = x(t, j) } else { h(t, j) +=! W(j, k) * h(t - 1, k) }
  }
}
"""


def test_rows_that_read_each_other_across_steps_keep_a_region_per_step():
    """``h(t, j)`` reads every ``h(t - 1, k)``: the steps cannot run inside the rows' loop."""
    k = tcdsl.compile(RECURRENT)
    assert "par_steps" not in tcdsl.driver.emit(k, "schedule")
    assert re.search(r"for t in range\(.*\):", k.script)
    rng = np.random.default_rng(3)
    x, W = rng.uniform(-1, 1, (6, 9)).astype(np.float32), rng.uniform(-0.3, 0.3, (9, 9)).astype(np.float32)
    h = np.zeros((6, 9))
    h[0] = x[0]
    for t in range(1, 6):
        h[t] = W.astype(np.float64) @ h[t - 1]
    np.testing.assert_allclose(k(x, W), h, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_scans_stay_inside_their_tensors():
    import guard  # tests/guard.py: guard pages before and after every tensor

    cases = [{"id": f"{entry}:{mode}", "source": SCANS, "entry": entry, "mode": mode, "seed": i,
              "settings": [{"B": 5, "L": 7, "C": 2}, {"B": 1, "L": 1, "C": 1}, {"B": 9, "L": 2, "C": 3}]}
             for i, (entry, mode) in enumerate((e, m) for e in ENTRIES + ["neighbors"] for m in ("never", "before-scheduling"))]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# Viterbi with the time last: the ``else`` branch is three nests (max, argmax, add),
# and the argmax reads its best index so far, ``d(b, bp(b, j, t), t - 1)``
VITERBI = """
def vit(float(B,S,T) emit, float(S,S) tr, float(S) init) -> (d, bp) {
  for t in T {
    if t == 0 { d(b, j, t) = init(j) + emit(b, j, 0) }
    else {
      d(b, j, t) max=! d(b, i, t - 1) + tr(j, i)
      bp(b, j, t) argmax=! d(b, i, t - 1) + tr(j, i)
      d(b, j, t) = d(b, j, t) + emit(b, j, t)
    }
  }
}
"""


def _viterbi(emit, tr, init):
    B, S, T = emit.shape
    d, bp = np.zeros((B, S, T)), np.zeros((B, S, T), np.int64)
    d[:, :, 0] = init + emit[:, :, 0]
    for t in range(1, T):
        cand = d[:, None, :, t - 1] + tr[None, :, :]  # (b, j, i)
        bp[:, :, t] = cand.argmax(-1)
        d[:, :, t] = cand.max(-1) + emit[:, :, t]
    return d, bp


def test_a_branch_of_several_nests_runs_its_steps_inside_the_rows():
    """The branches' nests under one parallel loop over ``b`` (branches.nests),
    legal because the argmax's read at a data-dependent index touches row
    ``b`` of step ``t - 1`` only (model._whole), not all of ``d``."""
    # (with ``transpose`` on, the state is kept step first: polyhedral/stepsfirst.py, tests/test_steps_first.py)
    k = tcdsl.compile(VITERBI, options={"disk_cache": False, "transpose": False})
    sched = tcdsl.driver.emit(k, "schedule")
    assert "par_steps" in sched, sched
    assert parallel_regions(k.script) == 1


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_viterbi_time_last_agrees_with_numpy(mode):
    k = tcdsl.compile(VITERBI, specialize=mode, options={"disk_cache": False, "transpose": False})
    rng = np.random.default_rng(11)
    for B, S, T in [(1, 1, 1), (2, 3, 4), (3, 17, 6), (5, 40, 3)]:
        emit = rng.standard_normal((B, S, T)).astype(np.float32)
        tr, init = rng.standard_normal((S, S)).astype(np.float32), rng.standard_normal(S).astype(np.float32)
        d, bp = k(emit, tr, init)
        want_d, want_bp = _viterbi(emit.astype(np.float64), tr.astype(np.float64), init.astype(np.float64))
        np.testing.assert_allclose(d, want_d, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(bp[:, :, 1:], want_bp[:, :, 1:])
