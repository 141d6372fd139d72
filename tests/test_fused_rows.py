"""A step that isl fused across rows: Gauss-Jordan elimination over the
pivots in a ``for`` loop, ``row(j) = A(p, j) / piv`` fused with the update
``A(i, j) = ... - f(i) * row(j)`` over the columns, its inner loop walking
the rows with a stride (polyhedral/schedule.py ``_fused_across_rows``):
each statement in a nest of its own, the update's pieces split at ``i ==
p`` each a parallel loop over rows (codegen/lower.py, a block under a
parallel mark), vector loops over the columns.  Results against NumPy,
guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl

GAUSS_JORDAN = """def solve(float(D,D) A0, float(D) b) -> (w) {
  A(i, j) = A0(i, j)
  w(i) = b(i)
  for p in D {
    piv = A(p, p)
    f(i) = A(i, p)
    row(j) = A(p, j) / piv
    rp = w(p) / piv
    A(i, j) = i == p ? row(j) : A(i, j) - f(i) * row(j)
    w(i) = i == p ? rp : w(i) - f(i) * rp
  }
}"""


def test_the_update_walks_columns_in_vectors_and_rows_in_parallel():
    k = tcdsl.compile(GAUSS_JORDAN, options={"disk_cache": False})
    step = k.script[k.script.index("for p in"):]
    # the rows before and after the pivot's, each a parallel loop, the columns in vectors
    updates = re.findall(r"for (c\d) in T\.parallel\((?:p|D - \(p \+ 1\))\):\s+for (c\d)_o in range\(.*\):\s+"
                         r"for \2_v in T\.vectorized\(16\):\s+A\[", step)
    assert len(updates) == 2, step


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_gauss_jordan_in_a_loop_matches_numpy(mode):
    k = tcdsl.compile(GAUSS_JORDAN, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(8)
    for D in (1, 5, 17, 40):
        A = (rng.standard_normal((D, D)) + D * np.eye(D)).astype(np.float32)
        b = rng.standard_normal(D).astype(np.float32)
        np.testing.assert_allclose(k(A, b), np.linalg.solve(A.astype(np.float64), b), rtol=1e-4, atol=1e-4)


def test_gauss_jordan_in_a_loop_under_guard_pages():
    guard.assert_all_work([{"id": f"gauss-jordan:{D}", "source": GAUSS_JORDAN, "sizes": {"D": D}, "seed": D,
                            "options": {"disk_cache": False}} for D in (1, 3, 19)])
