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


@pytest.mark.parametrize("O,G", [(32, 4), (20, 2), (16, 16)])
def test_tiles_whose_rows_share_their_group_read_its_input_once(O, G):
    """Where every row of a register tile is in the same group (8 or 10 output
    channels per group under tiles of 4 rows; 20 / 2 also has tiles across two
    groups), the tile runs a variant in which all rows read the first row's
    group, so that the group's input vector is loaded once for the tile's
    rows (the affine ``o / 32`` gets that from LLVM): both variants agree with
    NumPy."""
    src = GROUPED.replace("G)", f"{G})")
    k = tcdsl.compile(src, options=OPTS)
    script = k.script
    assert "if row_term0[1] == row_term0[0] and row_term0[2] == row_term0[0] and row_term0[3] == row_term0[0]:" \
        in script
    inner = [line for line in script.splitlines() if "acc[r, u" in line and "x[" in line]
    assert any("row_term0[0]" in line for line in inner) and any("row_term0[r]" in line for line in inner)
    rng = np.random.default_rng(O + G)
    CG = 5
    x = rng.standard_normal((3, G * CG, 41)).astype(np.float32)
    w = rng.standard_normal((O, CG, 3)).astype(np.float32)
    np.testing.assert_allclose(k(x, w), grouped_conv1d(x.astype(np.float64), w.astype(np.float64), G),
                               rtol=1e-4, atol=1e-4)


GROUPED_2D = """def gconv2d(float(B,C,H,W) x, float(O,CG,KH,KW) w) -> (y) {
  y(b, o, h, v) +=! x(b, (o / (O / G)) * CG + c, h + kh, v + kw) * w(o, c, kh, kw)
    where h in 0:H - KH + 1, v in 0:W - KW + 1
}"""


@pytest.mark.parametrize("O,G", [(16, 2), (12, 2)])
def test_2d_tiles_whose_rows_share_their_group(O, G):
    """The same in a 2-D convolution (two window loops around the tile's
    channel loop): 8 and 6 channels per group."""
    k = tcdsl.compile(GROUPED_2D.replace("G)", f"{G})"), options=OPTS)
    assert "row_term0[0]" in k.script
    rng = np.random.default_rng(O)
    CG = 3
    x = rng.standard_normal((2, G * CG, 9, 37)).astype(np.float64)
    w = rng.standard_normal((O, CG, 3, 3)).astype(np.float64)
    per = O // G
    ref = np.zeros((2, O, 7, 35))
    for o in range(O):
        xs = x[:, (o // per) * CG:(o // per + 1) * CG]
        for kh in range(3):
            for kw in range(3):
                ref[:, o] += np.einsum("bchw,c->bhw", xs[:, :, kh:kh + 7, kw:kw + 35], w[o, :, kh, kw])
    np.testing.assert_allclose(k(x.astype(np.float32), w.astype(np.float32)), ref, rtol=1e-4, atol=1e-4)


NESTED = """def unflat(int32(N) x, float(A, B, C, D) shape) -> (y, z) {
  y(n) = n % (B * C * D) % (C * D) % D + n % (B * C * D) % (C * D) / D + n / (B * C * D) where n in 0:N
  z(n) = x(n) % (B * C * D) % (C * D) % D + (x(n) % (C * D)) / D + (n - 9) / (C * D) + (n - 9) % D
}"""


def _np_div(a, b):
    return a // b if b else np.zeros_like(a)


def _np_mod(a, b):
    return a % b if b else np.zeros_like(a)


@pytest.mark.parametrize("specialize", ["never", "after-scheduling", "before-scheduling"])
def test_nested_remainders_by_sizes_stay_small(specialize):
    """Mixed-radix indices, ``n % (B * C * D) % (C * D) % D``: a divisor made
    of sizes is never negative, so each level names its operands once or
    twice. Guarded as a divisor of any sign, every level repeated its
    operands three and four times: this program took minutes to compile."""
    k = tcdsl.compile(NESTED, specialize=specialize, options=OPTS)
    if specialize == "never":
        assert len(k.script) < 8000
    else:
        assert len(k.backend({"A": 2, "B": 3, "C": 5, "D": 7, "N": 211}).func.script()) < 8000
    rng = np.random.default_rng(3)
    for A, B, C, D, N in [(1, 2, 3, 4, 50), (2, 3, 5, 7, 211), (1, 1, 1, 1, 6), (2, 0, 3, 4, 13), (1, 2, 3, 0, 13)]:
        x = rng.integers(-500, 500, N).astype(np.int32)
        y, z = k(x, np.zeros((A, B, C, D), np.float32))
        n = np.arange(N)
        BCD, CD = B * C * D, C * D
        want_y = _np_mod(_np_mod(_np_mod(n, BCD), CD), D) + _np_div(_np_mod(_np_mod(n, BCD), CD), D) + _np_div(n, BCD)
        want_z = (_np_mod(_np_mod(_np_mod(x, BCD), CD), D) + _np_div(_np_mod(x, CD), D) + _np_div(n - 9, CD)
                  + _np_mod(n - 9, D))
        np.testing.assert_array_equal(y, want_y)
        np.testing.assert_array_equal(z, want_z)
