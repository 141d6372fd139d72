"""Integer division and remainder (rounding down, Python's sign rule) by
values and by constants, and register tiles over an index divided by a size
(codegen/expr.py ``floordiv``, codegen/invariant.py ``RowTerms``)."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from helpers import grouped_conv1d

OPTS = {"disk_cache": False}


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_division_by_values_rounds_down(dtype):
    k = tcdsl.compile(f"def f({dtype}(N) A, {dtype}(N) B) -> (Q, R) {{ Q(i) = A(i) / B(i)\n R(i) = A(i) % B(i) }}",
                      options=OPTS)
    rng = np.random.default_rng(1)
    a = rng.integers(-1000, 1000, 4099).astype(dtype)
    b = rng.integers(-9, 10, 4099).astype(dtype)
    q, r = k(a, b)
    nz = b != 0
    np.testing.assert_array_equal(q[nz], a[nz] // b[nz])
    np.testing.assert_array_equal(r[nz], a[nz] % b[nz])
    assert not q[~nz].any() and not r[~nz].any()  # x / 0 and x % 0 are 0, as NumPy's


@pytest.mark.parametrize("c", [3, -3, 7, -8, 12])
def test_division_by_constants_rounds_down(c):
    k = tcdsl.compile(f"def f(int32(N) A) -> (Q, R) {{ Q(i) = A(i) / {c}\n R(i) = A(i) % {c} }}", options=OPTS)
    a = np.arange(-300, 301, dtype=np.int32)
    q, r = k(a)
    np.testing.assert_array_equal(q, a // c)
    np.testing.assert_array_equal(r, a % c)


GROUPED = """def gconv(float(B,C,L) x, float(O,CG,K) w) -> (y) {
  y(b, o, t) +=! x(b, (o / (O / G)) * CG + c, t + k) * w(o, c, k) where t in 0:L - K + 1
}"""


@pytest.mark.parametrize("O,G", [(12, 4), (10, 2), (24, 8), (7, 7)])
def test_register_tiles_over_an_index_divided_by_a_size(O, G):
    """A grouped convolution with its group written through sizes: register
    tiles (their rows cross groups where the group size is not a multiple of
    the tile's rows), each row's group computed once per tile before the
    reduction loops, not in them."""
    src = GROUPED.replace("G)", f"{G})")
    k = tcdsl.compile(src, options=OPTS)
    script = k.script
    assert "T.unroll" in script and "row_term0" in script
    # the division is in the cells' values only, never inside the reduction loops
    inner = [line for line in script.splitlines() if "acc[r, u" in line and "x[" in line]
    assert inner and not any("T.Div(" in line or "truncmod" in line for line in inner)
    rng = np.random.default_rng(O)
    CG = 3
    x = rng.standard_normal((2, G * CG, 29)).astype(np.float32)
    w = rng.standard_normal((O, CG, 3)).astype(np.float32)
    np.testing.assert_allclose(k(x, w), grouped_conv1d(x.astype(np.float64), w.astype(np.float64), G),
                               rtol=1e-4, atol=1e-4)
