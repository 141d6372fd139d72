"""Two sequential loops around one kernel, ``for t { for s { ... } }``, both
inside the kernel's parallel loop where the steps of both touch each row
alone (polyhedral/schedule_counts.py ``steps_independent``, mark
``steps_deep``; codegen/cpu_steps.py ``nested_steps``): one parallel region
per call, not one per step of the outer loop.  Results against NumPy in
every specialize mode and under guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import parallel_regions

NO_CACHE = {"disk_cache": False}

# a cascade of S biquad sections (transposed direct form II), scipy's sosfilt
SOSFILT = """def sosfilt(float(B,C,L) x, float(S,6) sos) -> (y) {
  for t in L {
    for s in S {
      if s == 0 { u(b, c) = x(b, c, t) } else { u(b, c) = y(b, c, t) }
      y(b, c, t) = sos(s, 0) * u(b, c) + z1(b, c, s)
      z1(b, c, s) = sos(s, 1) * u(b, c) - sos(s, 4) * y(b, c, t) + z2(b, c, s)
      z2(b, c, s) = sos(s, 2) * u(b, c) - sos(s, 5) * y(b, c, t)
    }
  }
}"""
# each step reads the next row's value of the step before: the outer steps keep a region each
NEIGHBOUR = """def nb(float(B,T,S) x) -> (v) {
  for t in T {
    for s in S {
      v(b) = 0.5 * v((b + 1) % B) + x(b, t, s)
    }
  }
}"""


def _sosfilt(x, sos):
    B, C, L = x.shape
    y = np.zeros((B, C, L))
    z1, z2 = np.zeros((B, C, len(sos))), np.zeros((B, C, len(sos)))
    for t in range(L):
        u = x[:, :, t]
        for s, (b0, b1, b2, _, a1, a2) in enumerate(sos):
            out = b0 * u + z1[:, :, s]
            z1[:, :, s] = b1 * u - a1 * out + z2[:, :, s]
            z2[:, :, s] = b2 * u - a2 * out
            u = out
        y[:, :, t] = u
    return y


def _nb(x):
    """Each step updates v in place, row after row (the next row's old value, the first row's new one)."""
    B, T, S = x.shape
    v = np.zeros(B)
    for t in range(T):
        for s in range(S):
            for b in range(B):
                v[b] = 0.5 * v[(b + 1) % B] + x[b, t, s]
    return v


def _sos(rng, S):
    sos = np.zeros((S, 6))
    sos[:, :3] = rng.uniform(-0.5, 0.5, (S, 3))
    sos[:, 3] = 1.0
    sos[:, 4:] = rng.uniform(-0.4, 0.4, (S, 2))  # (stable: small feedback)
    return sos.astype(np.float32)


def test_both_loops_run_inside_one_parallel_region():
    k = tcdsl.compile(SOSFILT, options=NO_CACHE)
    assert "steps_deep" in tcdsl.driver.emit(k, "schedule")
    assert parallel_regions(k.script) == 2, k.script  # (the transposed copy of x, then the steps)
    assert re.search(r"T\.parallel\(.*\):(\s+c0_\w+: T\.let.*)+\s+for t, s, c0_r in T\.grid", k.script), k.script
    k = tcdsl.compile(NEIGHBOUR, options=NO_CACHE)
    assert "steps_deep" not in tcdsl.driver.emit(k, "schedule")


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_nested_steps_agree_with_numpy(mode):
    rng = np.random.default_rng(4)
    k = tcdsl.compile(SOSFILT, specialize=mode, options=NO_CACHE)
    for B, C, L, S in [(1, 1, 1, 1), (2, 3, 9, 2), (17, 2, 30, 4), (3, 20, 5, 1)]:
        x, sos = rng.standard_normal((B, C, L)).astype(np.float32), _sos(rng, S)
        np.testing.assert_allclose(k(x, sos), _sosfilt(x.astype(np.float64), sos.astype(np.float64)),
                                   rtol=1e-4, atol=1e-5)
    k = tcdsl.compile(NEIGHBOUR, specialize=mode, options=NO_CACHE)
    for B, T, S in [(1, 1, 1), (5, 3, 2), (9, 4, 3)]:
        x = rng.standard_normal((B, T, S)).astype(np.float32)
        np.testing.assert_allclose(k(x), _nb(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_nested_steps_under_guard_pages():
    import guard
    cases = [{"id": "nested:sosfilt", "source": SOSFILT,
              "settings": [{"B": 2, "C": 3, "L": 5, "S": 2}, {"B": 1, "C": 1, "L": 1, "S": 1}, {"B": 17, "C": 2, "L": 3, "S": 3}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or [
        (r["id"], r["outcome"], r["detail"]) for r in records]
