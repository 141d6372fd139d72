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

# the inner step branches on its variable (its two statements merged under one parallel loop,
# polyhedral/branches.py): the steps_deep mark above par_steps still counts as the steps inside
SCAN_IN_LOOP = """def f(float(B,N) d) -> (dp) {
  for t in S {
    for k in N {
      if k == 0 { dp(b, k) = d(b, k) } else { dp(b, k) = d(b, k) + 0.5 * dp(b, k - 1) }
    }
  }
}"""
# Crank-Nicolson for the heat equation: an explicit half step, then a Thomas solve (forward and
# back substitution) inside the time loop; each inner loop runs inside the parallel loop over b
CRANK_NICOLSON = """def cn(float(B,N) u0, float r) -> (u) {
  for k in N {
    if k == 0 { cp(k) = -r / (2 + 2 * r) } else { cp(k) = -r / (2 + 2 * r + r * cp(k - 1)) }
  }
  u(b, i) = u0(b, i)
  for t in S {
    dd(b, i) = r * ((i > 0 ? u(b, i - 1) : 0) + (i < N - 1 ? u(b, i + 1) : 0)) + (2 - 2 * r) * u(b, i) where i in 0:N
    for k in N {
      if k == 0 { dp(b, k) = dd(b, k) / (2 + 2 * r) }
      else { dp(b, k) = (dd(b, k) + r * dp(b, k - 1)) / (2 + 2 * r + r * cp(k - 1)) }
    }
    for k in N {
      if k == 0 { u(b, N - 1 - k) = dp(b, N - 1 - k) }
      else { u(b, N - 1 - k) = dp(b, N - 1 - k) - cp(N - 1 - k) * u(b, N - k) }
    }
  }
}"""


def _crank_nicolson(u0, r, S):
    B, N = u0.shape
    A = np.diag(np.full(N, 2 + 2 * r)) - r * (np.eye(N, k=1) + np.eye(N, k=-1))
    Bm = np.diag(np.full(N, 2 - 2 * r)) + r * (np.eye(N, k=1) + np.eye(N, k=-1))
    u = u0.astype(np.float64)
    for _ in range(S):
        u = np.linalg.solve(A, Bm @ u.T).T
    return u


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
    k = tcdsl.compile(SCAN_IN_LOOP, options=NO_CACHE)
    assert parallel_regions(k.script) == 1, k.script
    assert re.search(r"T\.parallel\(.*\):(\s+c0_\w+: T\.let.*)+\s+for c0_blk, t, k in T\.grid", k.script), k.script
    # the time loop outside, each Thomas sweep inside the parallel loop over b (not a region per k)
    k = tcdsl.compile(CRANK_NICOLSON, options=NO_CACHE)
    assert len(re.findall(r"for c0_blk, k in T\.grid", k.script)) == 2, k.script
    assert not re.search(r"for k in range\(.*\):\s+for c0\w* in T\.parallel", k.script), k.script


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
    k = tcdsl.compile(SCAN_IN_LOOP, specialize=mode, sizes={"S": 3} if mode == "before-scheduling" else None,
                      options=NO_CACHE)
    for B, N in [(1, 1), (5, 7), (37, 33)]:
        d = rng.standard_normal((B, N)).astype(np.float32)
        want = np.zeros((B, N))
        for j in range(N):
            want[:, j] = d[:, j] + (0.5 * want[:, j - 1] if j else 0)
        np.testing.assert_allclose(k(d, S=3), want, rtol=1e-5, atol=1e-5)
    k = tcdsl.compile(CRANK_NICOLSON, specialize=mode, sizes={"S": 4} if mode == "before-scheduling" else None,
                      options=NO_CACHE)
    for B, N in [(1, 1), (5, 7), (19, 40)]:
        u0, r = rng.standard_normal((B, N)).astype(np.float32), np.float32(0.3)
        np.testing.assert_allclose(k(u0, r, S=4), _crank_nicolson(u0, 0.3, 4), rtol=1e-4, atol=1e-5)


def test_nested_steps_under_guard_pages():
    import guard
    cases = [{"id": "nested:sosfilt", "source": SOSFILT,
              "settings": [{"B": 2, "C": 3, "L": 5, "S": 2}, {"B": 1, "C": 1, "L": 1, "S": 1}, {"B": 17, "C": 2, "L": 3, "S": 3}]},
             {"id": "nested:scan", "source": SCAN_IN_LOOP, "settings": [{"B": 1, "N": 1, "S": 1}, {"B": 9, "N": 17, "S": 2}]},
             {"id": "nested:crank-nicolson", "source": CRANK_NICOLSON,
              "settings": [{"B": 1, "N": 1, "S": 1}, {"B": 9, "N": 17, "S": 2}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or [
        (r["id"], r["outcome"], r["detail"]) for r in records]
