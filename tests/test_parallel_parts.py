"""Independent parts of a step (the two directions of a bidirectional RNN)
under one parallel loop over their rows (polyhedral/schedule.py,
``_outer_then_serialized`` for a set of parts, then ``_rows_fused``): the
steps run inside that loop and each direction's recurrent product keeps
register tiles of several batch rows.  isl had fused each direction's product
into the rows of its gates, one batch row per tile, a loop of steps around
two parallel regions.  Results against NumPy (float64) in every specialize
mode; guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

BILSTM = """def bilstm(float(T,B,I) x, float(4,I,H) Wf, float(4,H,H) Uf, float(4,I,H) Wb, float(4,H,H) Ub) -> (hf, hb) {
  for t in T {
    gf(g, b, j) +=! x(t, b, i) * Wf(g, i, j)
    gb(g, b, j) +=! x(T - 1 - t, b, i) * Wb(g, i, j)
    if t > 0 {
      gf(g, b, j) += hf(t - 1, b, k) * Uf(g, k, j)
      gb(g, b, j) += hb(T - t, b, k) * Ub(g, k, j)
      cf(t, b, j) = sigmoid(gf(1, b, j)) * cf(t - 1, b, j) + sigmoid(gf(0, b, j)) * tanh(gf(2, b, j))
      cb(T - 1 - t, b, j) = sigmoid(gb(1, b, j)) * cb(T - t, b, j) + sigmoid(gb(0, b, j)) * tanh(gb(2, b, j))
    } else {
      cf(t, b, j) = sigmoid(gf(0, b, j)) * tanh(gf(2, b, j))
      cb(T - 1 - t, b, j) = sigmoid(gb(0, b, j)) * tanh(gb(2, b, j))
    }
    hf(t, b, j) = sigmoid(gf(3, b, j)) * tanh(cf(t, b, j))
    hb(T - 1 - t, b, j) = sigmoid(gb(3, b, j)) * tanh(cb(T - 1 - t, b, j))
  }
}"""


def _lstm(x, W, U):
    """One direction over x's time axis, zero initial state, gates i, f, g, o."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    T, B, _ = x.shape
    H = U.shape[-1]
    h, c, out = np.zeros((B, H)), np.zeros((B, H)), []
    for t in range(T):
        g = np.einsum("bi,gij->gbj", x[t], W) + np.einsum("bk,gkj->gbj", h, U)
        c = sig(g[1]) * c + sig(g[0]) * np.tanh(g[2])
        h = sig(g[3]) * np.tanh(c)
        out.append(h)
    return np.stack(out)


def _bilstm(x, Wf, Uf, Wb, Ub):
    x, Wf, Uf, Wb, Ub = (a.astype(np.float64) for a in (x, Wf, Uf, Wb, Ub))
    return _lstm(x, Wf, Uf), _lstm(x[::-1], Wb, Ub)[::-1]


@pytest.mark.slow
def test_both_directions_run_their_steps_inside_one_parallel_loop():
    s = tcdsl.compile(BILSTM, options={"disk_cache": False}).script
    lines = s.splitlines()
    at = next(i for i, line in enumerate(lines) if "for t in range(" in line)
    depth = len(lines[at]) - len(lines[at].lstrip())
    around = next(line for line in reversed(lines[:at])
                  if line.lstrip().startswith("for ") and len(line) - len(line.lstrip()) < depth)
    # the loop of steps inside a parallel loop over chunks of the batch
    assert "T.parallel(" in around, around
    body = "\n".join(lines[at:])
    assert "T.parallel(" not in body, body[:2000]
    # both recurrent products in tiles of 8 batch rows
    for u in ("Uf", "Ub"):
        rows = {int(m) for m in re.findall(r"acc = T.alloc_buffer\(\((\d+), \d+\)\)\n(?:[^\n]*\n){1,12}?[^\n]*"
                                           + u + r"[_a-z]*\[", body)}
        assert 8 in rows, (u, rows)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_bidirectional_lstm_matches_numpy(mode):
    rng = np.random.default_rng(7)
    k = tcdsl.compile(BILSTM, specialize=mode, options={"disk_cache": False})
    for T, B, I, H in [(5, 9, 7, 17), (1, 1, 1, 1), (4, 17, 3, 50), (3, 2, 5, 4)]:
        args = [rand(rng, T, B, I), rand(rng, 4, I, H), rand(rng, 4, H, H), rand(rng, 4, I, H), rand(rng, 4, H, H)]
        hf, hb = k(*args)
        want_f, want_b = _bilstm(*args)
        np.testing.assert_allclose(hf, want_f, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(hb, want_b, rtol=1e-5, atol=1e-5)


def test_bidirectional_lstm_stays_inside_its_tensors():
    cases = [{"id": f"bilstm:{i}", "source": BILSTM, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"T": 3, "B": 9, "I": 5, "H": 17}, {"T": 2, "B": 1, "I": 1, "H": 33}])]
    guard.assert_all_work(cases)
