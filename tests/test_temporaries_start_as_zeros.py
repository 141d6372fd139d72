"""Temporaries start as zeros, as outputs do (SPEC 1.1, and the reference
interpreter, tcdsl.testing.evaluate): where a read may see an element no
write produced -- a ``+=`` onto a temporary in a loop, a hole read later, a
state read after zero steps -- the kernel fills the temporary with zeros
first (codegen/lower.py); the others are proven written before any read
(polyhedral/dataflow.py) and get no fill."""
import numpy as np
import pytest

import tcdsl
from tcdsl.testing import evaluate

MODES = ("never", "after-scheduling", "before-scheduling")

PROGRAMS = {
    "running sum": ("""def s(float(T,B) x) -> (y) {
      for t in T {
        a(b) += x(t, b)
        y(t, b) = a(b)
      }
    }""", [(5, 7)]),
    "a hole": ("""def s(float(N,M) A) -> (y) {
      tmp(i, j) = A(i, j) * 2.0 where i in 1:N, j in 0:M
      y(i, j) = tmp(i, j) + 1.0 where i in 0:N, j in 0:M
    }""", [(4, 19)]),
    "nested loops": ("""def s(float(L,T,B) x) -> (z) {
      for l in L {
        for t in T {
          acc(b) += x(l, t, b)
        }
        z(l, b) = acc(b)
      }
    }""", [(3, 4, 5)]),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("mode", MODES)
def test_a_temporary_read_before_written_reads_zeros(name, mode):
    src, shapes = PROGRAMS[name]
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    want = evaluate(src, args)
    for _ in range(3):  # a second call must not see the first one's values
        np.testing.assert_allclose(k(*args), want, rtol=1e-5, atol=1e-5)


def test_a_temporary_written_whole_gets_no_fill():
    src = """def c(float(B,C,L) x, float(O,C,K) w) -> (y) {
      col(b, c, k, t) = x(b, c, t + k) where t in 0:L - K + 1
      y(b, o, t) +=! col(b, c, k, t) * w(o, c, k)
    }"""
    k = tcdsl.compile(src, options={"disk_cache": False})
    assert "col_flat" not in k.script
    assert "a_flat" in tcdsl.compile(PROGRAMS["running sum"][0], options={"disk_cache": False}).script
