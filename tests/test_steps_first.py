"""A state stored with its step last, computed with its step first
(polyhedral/stepsfirst.py): which tensors move, the copy back of an output,
register tiles for the step's product, results against NumPy in every
specialize mode and under guard pages."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from tcdsl import driver
from tcdsl.polyhedral import stepsfirst
from tcdsl.syntax.printer import to_tc

NO_CACHE = {"disk_cache": False}

VITERBI = """def vit(float(B,S,T) emit, float(S,S) tr, float(S) init) -> (score, bp) {
  for t in T {
    if t == 0 { d(b, j, t) = init(j) + emit(b, j, 0) }
    else {
      d(b, j, t) max=! d(b, i, t - 1) + tr(j, i)
      bp(b, j, t) argmax=! d(b, i, t - 1) + tr(j, i)
      d(b, j, t) = d(b, j, t) + emit(b, j, t)
    }
  }
  score(b) max=! d(b, j, T - 1)
}"""
# an Elman RNN over a (B, C, L) input, its state an output in the same layout, run backwards
ELMAN = """def elman(float(B,I,L) x, float(I,H) W, float(H,H) U) -> (h) {
  for u in L {
    a(b, j) +=! x(b, i, L - 1 - u) * W(i, j)
    if u > 0 { a(b, j) += h(b, k, L - u) * U(k, j) }
    h(b, j, L - 1 - u) = tanh(a(b, j))
  }
}"""
SCAN = """def scan(float(B,L) x) -> (s) {
  for t in L { s(b, t) = x(b, t) + (t > 0 ? s(b, t - 1) : 0) }
}"""


def _plan(src):
    fe = driver.frontend(src, transpose=False)
    return stepsfirst.plan(fe.checked, fe.ranges)


def test_which_states_move():
    assert set(_plan(VITERBI).names) == {"d"} and not _plan(VITERBI).outputs
    p = _plan(ELMAN)
    assert set(p.names) == {"h"} and p.outputs == {"h": 3}
    assert not _plan(SCAN)  # (no reduction reads it across its rows)
    assert not _plan(VITERBI.replace("d(b, j, t)", "d(t, b, j)").replace("d(b, i, t - 1)", "d(t - 1, b, i)")
                     .replace("d(b, j, T - 1)", "d(T - 1, b, j)"))
    text = to_tc(driver.frontend(ELMAN).checked.node)
    assert "h_s((L - 1) - u, b, j) = tanh(" in text and "h_s(L - u, b, k) * U(k, j)" in text, text
    assert text.rstrip().rstrip("}").rstrip().endswith("h(d0, d1, d2) = h_s(d2, d0, d1)"), text


def test_the_step_is_a_tiled_product():
    tir = driver.emit(tcdsl.compile(VITERBI, options=NO_CACHE), "tir")
    assert "d_s = T.alloc_buffer((T_1, B, S)" in tir and "acc = T.alloc_buffer" in tir, tir


def _viterbi(emit, tr, init):
    B, S, T = emit.shape
    d, bp = np.zeros((B, S, T)), np.zeros((B, S, T), np.int64)
    d[:, :, 0] = init + emit[:, :, 0]
    for t in range(1, T):
        cand = d[:, None, :, t - 1] + tr[None, :, :]
        bp[:, :, t], d[:, :, t] = cand.argmax(-1), cand.max(-1) + emit[:, :, t]
    return d[:, :, T - 1].max(1), bp


def _elman(x, W, U):
    B, I, L = x.shape
    h, state = np.zeros((B, W.shape[1], L)), None
    for u in range(L):
        a = x[:, :, L - 1 - u] @ W + (state @ U if u else 0)
        state = h[:, :, L - 1 - u] = np.tanh(a)
    return h


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_states_step_first_agree_with_numpy(mode):
    rng = np.random.default_rng(6)
    k = tcdsl.compile(VITERBI, specialize=mode, options=NO_CACHE)
    for B, S, T in [(1, 1, 1), (2, 3, 4), (3, 17, 6), (5, 40, 3)]:
        emit = rng.standard_normal((B, S, T)).astype(np.float32)
        tr, init = rng.standard_normal((S, S)).astype(np.float32), rng.standard_normal(S).astype(np.float32)
        score, bp = k(emit, tr, init)
        want_score, want_bp = _viterbi(*(a.astype(np.float64) for a in (emit, tr, init)))
        np.testing.assert_allclose(score, want_score, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(bp[:, :, 1:], want_bp[:, :, 1:])
    k = tcdsl.compile(ELMAN, specialize=mode, options=NO_CACHE)
    for B, I, L, H in [(1, 1, 1, 1), (2, 3, 5, 4), (3, 7, 6, 33)]:
        x = rng.standard_normal((B, I, L)).astype(np.float32)
        W, U = (rng.standard_normal(s).astype(np.float32) / 3 for s in ((I, H), (H, H)))
        np.testing.assert_allclose(k(x, W, U), _elman(*(a.astype(np.float64) for a in (x, W, U))),
                                   rtol=1e-4, atol=1e-5)


def test_states_step_first_under_guard_pages():
    import guard
    cases = [{"id": "steps first:viterbi", "source": VITERBI,
              "settings": [{"B": 2, "S": 3, "T": 4}, {"B": 1, "S": 1, "T": 1}, {"B": 3, "S": 17, "T": 2}]},
             {"id": "steps first:elman", "source": ELMAN,
              "settings": [{"B": 2, "I": 3, "L": 4, "H": 5}, {"B": 1, "I": 1, "L": 1, "H": 1}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or [
        (r["id"], r["outcome"], r["detail"]) for r in records]
