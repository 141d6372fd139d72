"""Sums whose last indices are short, computed in a transposed temporary
(tcdsl/polyhedral/permute.py): a convolution's weight gradient with a 3x3
kernel, ``dw(o, c, kh, kw)``, is summed as ``dw_p(kh, kw, o, c)`` -- a
matmul per tap, rows ``o``, vector columns ``c`` -- and copied back.  The
results against NumPy at odd sizes in every specialize mode, ``+=`` onto an
``out=`` array, tcdsl.grad's weight gradient, and the statements it leaves
as written."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import rand
from tcdsl.driver import frontend
from tcdsl.source import Source
from tcdsl.syntax.printer import to_tc

DW2 = """def dconv(float(N,O,H,W) dy, float(N,C,P,Q) x) -> (dw) {
  dw(o, c, kh, kw) +=! dy(n, o, h, v) * x(n, c, h + kh, v + kw) where kh in 0:3, kw in 0:3
}"""
DW1 = """def dconv(float(B,O,L) dy, float(B,C,M) x) -> (dw) {
  dw(o, c, k) +=! dy(b, o, l) * x(b, c, l + k) where k in 0:5
}"""


def _dw2(dy, x):
    H, W = dy.shape[2:]
    win = np.stack([np.stack([x[:, :, i:i + H, j:j + W] for j in range(3)], -1) for i in range(3)], -2)
    return np.einsum("nohv,nchvij->ocij", dy.astype(np.float64), win.astype(np.float64))


def _dw1(dy, x):
    L = dy.shape[2]
    win = np.stack([x[:, :, k:k + L] for k in range(5)], -1)
    return np.einsum("bol,bclk->ock", dy.astype(np.float64), win.astype(np.float64))


def test_weight_gradient_is_summed_with_the_taps_first():
    k = tcdsl.compile(DW2, options={"disk_cache": False, "vector_width": 8, "tile_rows": 4, "tile_cols": 24})
    s = k.script
    # the temporary with the taps first; its tiles run along c, reading x's copied panel
    assert re.search(r"dw_p: T\.Buffer\(\(3, 3, ", s) or "dw_p = T.alloc_buffer((3, 3," in s \
        or re.search(r"dw_p\w* = T\.(alloc|decl)_buffer\(\(3, 3,", s), s
    assert "acc = T.alloc_buffer((4, 24))" in s, s
    assert "x_panel" in s, s
    # and the copy back to dw's own layout
    assert re.search(r"dw(_rows)?\[[^\]]*\] = dw_p(_rows)?\[", s), s


def test_left_as_written_without_transpose():
    s = tcdsl.compile(DW2, options={"disk_cache": False, "transpose": False}).script
    assert "dw_p" not in s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_weight_gradients_match_numpy(mode):
    rng = np.random.default_rng(5)
    k2 = tcdsl.compile(DW2, specialize=mode, options={"disk_cache": False})
    for N, O, C, H, W in [(2, 5, 7, 6, 9), (1, 9, 33, 4, 4), (3, 1, 1, 1, 1), (2, 16, 26, 7, 5)]:
        dy, x = rand(rng, N, O, H, W), rand(rng, N, C, H + 2, W + 2)
        np.testing.assert_allclose(k2(dy, x), _dw2(dy, x), rtol=1e-5, atol=1e-5)
    k1 = tcdsl.compile(DW1, specialize=mode, options={"disk_cache": False})
    for B, O, C, L in [(2, 5, 7, 11), (1, 13, 30, 3), (4, 8, 9, 40)]:
        dy, x = rand(rng, B, O, L), rand(rng, B, C, L + 4)
        np.testing.assert_allclose(k1(dy, x), _dw1(dy, x), rtol=1e-5, atol=1e-5)


def test_accumulating_sum_adds_to_the_given_array():
    src = DW2.replace("+=!", "+=")
    k = tcdsl.compile(src, options={"disk_cache": False})
    assert "dw_p" in k.script
    rng = np.random.default_rng(6)
    dy, x = rand(rng, 2, 5, 6, 7), rand(rng, 2, 11, 8, 9)
    start = rand(rng, 5, 11, 3, 3)
    out = start.copy()
    k(dy, x, out=(out,))
    np.testing.assert_allclose(out, start + _dw2(dy, x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k(dy, x), _dw2(dy, x), rtol=1e-5, atol=1e-5)  # an allocated output starts at 0


def test_gradient_of_a_3x3_convolution():
    from tcdsl.autodiff import gradient

    src = "def conv(float(N,C,H,W) x, float(O,C,3,3) w) -> (y) { y(n,o,h,v) +=! x(n,c,h+kh,v+kw) * w(o,c,kh,kw) }"
    k = tcdsl.compile(gradient(src), options={"disk_cache": False})
    assert "d_w_p" in k.script
    rng = np.random.default_rng(8)
    x, w = rand(rng, 2, 5, 7, 9), rand(rng, 6, 5, 3, 3)
    dy = rand(rng, 2, 6, 5, 7)
    y = np.zeros_like(dy)
    _, dw = k(x, w, y, dy)
    np.testing.assert_allclose(dw, _dw2(dy, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src", [
    # no rows to share a panel of W along o: o is no vector loop
    "def f(float(3,O,I) W, float(I) v) -> (z) { z(o, k) +=! W(k, o, i) * v(i) }",
    # a long last index: vectors along it
    "def f(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }",
    # an argmax keeps its order
    "def f(float(B,V,3) x) -> (i) { i(b, s) argmax=! x(b, v, s) }",
])
def test_left_as_written(src):
    s = tcdsl.compile(src, options={"disk_cache": False}).script
    assert "_p[" not in s and "_p:" not in s, s


# A 1-D weight gradient whose tap count the sizes give: permuted only when
# the taps are fewer than strides.TAPS at run time.
DW1_SIZED = """def dconv(float(B,O,L) dy, float(B,C,M) x) -> (dw) {
  dw(o, c, k) +=! dy(b, o, l) * x(b, c, l + k) where k in 0:M-L+1
}"""
CONV1 = """def conv(float(B,C,M) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! x(b, c, t + k) * w(o, c, k)
}"""


def _dw1_any(dy, x):
    L, K = dy.shape[2], x.shape[2] - dy.shape[2] + 1
    win = np.stack([x[:, :, k:k + L] for k in range(K)], -1)
    return np.einsum("bol,bclk->ock", dy.astype(np.float64), win.astype(np.float64))


def test_sized_taps_are_chosen_at_run_time():
    from tcdsl.polyhedral.strides import TAPS

    k = tcdsl.compile(DW1_SIZED, options={"disk_cache": False})
    s = k.script
    # both sums: the permuted one under the run-time test of the tap count
    assert "dw_p" in s, s
    assert f"if L + {TAPS - 2} >= M:" in s, s  # M - L + 1 < TAPS, as isl writes it
    assert re.search(r"dw(_rows)?\[[^\]]*\] = dw_p(_rows)?\[", s), s
    # a tap count the compile-time sizes fix picks one of them
    short = tcdsl.compile(DW1_SIZED, sizes={"L": 100, "M": 102}, options={"disk_cache": False}).script
    long = tcdsl.compile(DW1_SIZED, sizes={"L": 10, "M": 10 + TAPS}, options={"disk_cache": False}).script
    assert "dw_p" in short and "dw_p" not in long


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_sized_taps_match_numpy_on_both_sides_of_the_threshold(mode):
    from tcdsl.polyhedral.strides import TAPS

    rng = np.random.default_rng(9)
    k = tcdsl.compile(DW1_SIZED, specialize=mode, options={"disk_cache": False})
    for B, O, C, L, K in [(2, 5, 7, 11, 3), (1, 9, 17, 40, 1), (3, 4, 6, 9, TAPS - 1), (2, 3, 10, 5, TAPS),
                          (1, 6, 5, 3, TAPS + 37)]:
        dy, x = rand(rng, B, O, L), rand(rng, B, C, L + K - 1)
        np.testing.assert_allclose(k(dy, x), _dw1_any(dy, x), rtol=1e-5, atol=1e-5)


DW1_AMID = """def dconv(float(B,O,L) dy, float(B,C,M) x) -> (dw, s, n) {
  g(b, o, l) = tanh(dy(b, o, l))
  dw(o, c, k) +=! g(b, o, l) * x(b, c, l + k) where k in 0:M-L+1
  s(o, c) +=! dw(o, c, k)
  n(b) +=! g(b, o, l) * g(b, o, l)
}"""


def _stores(script: str, tensor: str) -> int:
    return len(re.findall(rf"\b{tensor}(_rows)?\[[^\]]*\] = ", script))


def test_only_the_sized_sum_is_kept_twice():
    # the statements before and after the sum whose taps the sizes count are
    # compiled once, outside the run-time test: not a copy of the program
    k = tcdsl.compile(DW1_AMID, options={"disk_cache": False})
    plain = tcdsl.compile(DW1_AMID, options={"disk_cache": False, "transpose": False})
    assert "dw_p" in k.script and "dw_p" not in plain.script
    for t in ("g", "s", "n"):
        assert _stores(k.script, t) == _stores(plain.script, t) > 0, t
    rng = np.random.default_rng(4)
    from tcdsl.polyhedral.strides import TAPS

    for B, O, C, L, K in [(2, 5, 7, 11, 3), (1, 3, 5, 4, TAPS + 3)]:
        dy, x = rand(rng, B, O, L), rand(rng, B, C, L + K - 1)
        g = np.tanh(dy.astype(np.float64))
        win = np.stack([x[:, :, j:j + L] for j in range(K)], -1)
        dw = np.einsum("bol,bclk->ock", g, win.astype(np.float64))
        got = k(dy, x)
        for a, want in zip(got, (dw, dw.sum(-1), (g * g).sum((1, 2)))):
            np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)


def test_forward_convolution_is_left_as_written():
    # the output position t has a tap's shape, but its window x(b, c, t + k)
    # is the rows' operand: a matmul per t would read x a few taps at a time.
    # (Narrower than a vector, its outputs are summed with the channels last,
    # test_narrow_rows_are_summed_with_the_channels_last: sizes fixed here.)
    wide = tcdsl.compile(CONV1, sizes={"M": 40, "K": 3}, options={"disk_cache": False})
    assert "_p[" not in wide.script and "_p:" not in wide.script, wide.script
    k = tcdsl.compile(CONV1, options={"disk_cache": False})
    rng = np.random.default_rng(10)
    for B, C, O, T, K in [(2, 5, 7, 3, 3), (1, 8, 9, 69, 5)]:
        x, w = rand(rng, B, C, T + K - 1), rand(rng, O, C, K)
        win = np.stack([x[:, :, k:k + T] for k in range(K)], -1)
        ref = np.einsum("bctk,ock->bot", win.astype(np.float64), w.astype(np.float64))
        np.testing.assert_allclose(k(x, w), ref, rtol=1e-5, atol=1e-5)


def test_tap_needs_a_reduction_variable_beside_it():
    # k beside the output index t (not summed): a shifted copy, no tap
    src = "def f(float(B,C,M) x, float(O,C) w) -> (y) { y(b, o, t, k) +=! x(b, c, t + k) * w(o, c) where t in 0:4, k in 0:M-3 }"
    s = tcdsl.compile(src, options={"disk_cache": False}).script
    assert "_p[" not in s and "_p:" not in s, s


# ------------------------------------------------ narrow output rows, channels last
CONV = """def conv(float(N,C,H,W) x, float(O,C,3,3) w, float(O) bias) -> (y) {
  y(n, o, h, v) +=! x(n, c, h + kh, v + kw) * w(o, c, kh, kw)
  y(n, o, h, v) = y(n, o, h, v) + bias(o)
}"""
CONV_S2 = """def conv(float(N,C,H,W) x, float(O,C,3,3) w) -> (y) {
  y(n, o, h, v) +=! x(n, c, 2 * h + kh, 2 * v + kw) * w(o, c, kh, kw) where h in 0:(H-3)/2+1, v in 0:(W-3)/2+1
}"""


def _conv(x, w, stride=1):
    N, C, H, W = x.shape
    Ho, Wo = (H - 3) // stride + 1, (W - 3) // stride + 1
    out = np.zeros((N, w.shape[0], Ho, Wo))
    for i in range(3):
        for j in range(3):
            win = x[:, :, i:i + stride * (Ho - 1) + 1:stride, j:j + stride * (Wo - 1) + 1:stride].astype(np.float64)
            out += np.einsum("nchv,oc->nohv", win, w[:, :, i, j].astype(np.float64))
    return out


def test_narrow_rows_are_summed_with_the_channels_last():
    s = tcdsl.compile(CONV, options={"disk_cache": False}).script
    # both programs: channels last below 16 output columns, as written above
    assert "if T.max(0, W - 2) < 16:" in s or "if W <= 17:" in s or "if W < 18:" in s, s
    assert re.search(r"w_t\w*\[[^\]]*\] = w\[", s), s  # the weight copied with o last
    assert "y_p" in s
    # sizes fixed at compile time pick one program
    wide = tcdsl.compile(CONV, sizes={"W": 34}, options={"disk_cache": False}).script
    narrow = tcdsl.compile(CONV, sizes={"W": 9}, options={"disk_cache": False}).script
    assert "y_p" not in wide and "w_t" not in wide
    assert "y_p" in narrow and "w_t" in narrow and "if W" not in narrow


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_narrow_and_wide_rows_match_numpy(mode):
    rng = np.random.default_rng(9)
    k = tcdsl.compile(CONV, specialize=mode, options={"disk_cache": False})
    k2 = tcdsl.compile(CONV_S2, specialize=mode, options={"disk_cache": False})
    for N, C, O, H, W in [(2, 5, 7, 9, 9), (1, 3, 33, 4, 19), (2, 17, 20, 6, 18), (1, 1, 1, 3, 3), (2, 4, 3, 5, 40)]:
        x, w, b = rand(rng, N, C, H, W), rand(rng, O, C, 3, 3), rand(rng, O)
        np.testing.assert_allclose(k(x, w, b), _conv(x, w) + b[None, :, None, None], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(k2(x, w), _conv(x, w, 2), rtol=1e-4, atol=1e-5)


POINTWISE = """def pointwise(float(N,C,H,W) x, float(O,C) w) -> (y) {
  y(n, o, h, v) +=! x(n, c, h, v) * w(o, c)
}"""


def test_a_1x1_convolution_on_narrow_rows_is_summed_with_the_channels_last():
    """Its plain ``h, v`` are windows of width one (_unit_window): below 16
    columns (a ResNet's 14x14 and 7x7 feature maps) channels last, from the
    weight copied with ``o`` last; wider, as written."""
    s = tcdsl.compile(POINTWISE, options={"disk_cache": False}).script
    assert "y_p" in s and re.search(r"w_t\w*\[[^\]]*\] = w\[", s), s
    # the tiles' rows are (h, v) as one loop, in the symbolic kernel too (the
    # temporary's shape is its branch's: collapse._same_extent)
    assert re.search(r"for c1_b in range\(T\.max\(H, 0\) \* T\.max\(W, 0\) // 4\)", s), s
    narrow = tcdsl.compile(POINTWISE, sizes={"W": 7}, options={"disk_cache": False}).script
    wide = tcdsl.compile(POINTWISE, sizes={"W": 28}, options={"disk_cache": False}).script
    assert "y_p" in narrow and "y_p" not in wide
    rng = np.random.default_rng(4)
    for mode in ["never", "before-scheduling"]:
        k = tcdsl.compile(POINTWISE, specialize=mode, options={"disk_cache": False})
        for N, C, H, W, O in [(2, 9, 7, 7, 33), (1, 1, 1, 1, 1), (3, 5, 2, 17, 4), (2, 16, 14, 14, 20)]:
            x, w = rand(rng, N, C, H, W), rand(rng, O, C)
            want = np.einsum("nchv,oc->nohv", x.astype(np.float64), w.astype(np.float64))
            np.testing.assert_allclose(k(x, w), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("src", [
    # a matmul: its columns are not a window
    "def mm(float(M,K) A, float(K,N) B) -> (C) { C(i, j) +=! A(i, k) * B(k, j) }",
    # a pointwise convolution over a sequence: one plain trailing index, a matmul's few columns
    "def pw1(float(B,C,L) x, float(O,C) w) -> (y) { y(b, o, t) +=! x(b, c, t) * w(o, c) }",
    # a batched matmul: its batch is read by both operands
    "def bmm(float(B,M,K) A, float(B,K,N) X) -> (Y) { Y(b, i, j) +=! A(b, i, k) * X(b, k, j) }",
    # a depthwise convolution: the channel moves the window's read too
    "def dw(float(N,C,H,W) x, float(C,3,3) w) -> (y) { y(n, c, h, v) +=! x(n, c, h + kh, v + kw) * w(c, kh, kw) }",
    # a max pooling: not a sum
    "def mp(float(N,C,H,W) x) -> (y) { y(n, c, h, v) max=! x(n, c, h + kh, v + kw) where kh in 0:3, kw in 0:3 }",
    # (_batch_last) heads that are the last index of a read (contiguous along them)
    "def f(float(B,T,NH) q, float(B,S,NH) k) -> (s) { s(b, i, j, h) +=! q(b, i, h) * k(b, j, h) }",
    # (_batch_last) every read uses every other index too: no register tile shares an operand
    "def f(float(B,NH,T,D) q, float(B,NH,T,D) k) -> (s) { s(b, i, h) +=! q(b, h, i, d) * k(b, h, i, d) }",
])
def test_narrow_rule_leaves_other_sums(src):
    s = tcdsl.compile(src, options={"disk_cache": False}).script
    assert "_p = T.alloc_buffer" not in s and "_t = T.alloc_buffer" not in s and "_p:" not in s, s


def test_strided_windows_take_channels_last_below_16_columns():
    # stride 2: the vectors along the output columns gather every other input
    at12 = tcdsl.compile(CONV_S2, sizes={"W": 25}, options={"disk_cache": False}).script  # 12 columns
    at20 = tcdsl.compile(CONV_S2, sizes={"W": 41}, options={"disk_cache": False}).script  # 20 columns
    assert "y_p" in at12 and "w_t" in at12
    assert "y_p" not in at20 and "w_t" not in at20
    unit = tcdsl.compile(CONV, sizes={"W": 22}, options={"disk_cache": False}).script  # stride 1, 20 columns
    assert "y_p" not in unit


@pytest.mark.parametrize("width", [20, 24, 32])
def test_strided_windows_read_panels_in_every_vector_tile(width):
    # 32 columns: a half-width tile of 4 x 64; 20 and 24: a vector tile and
    # one overlapping the last 16 columns; each gathers every other input of
    # the window once, to a panel the row tiles then read as vectors
    opts = {"disk_cache": False, "vector_width": 16, "tile_cols": 64, "tile_rows": 4}
    k = tcdsl.compile(CONV_S2, sizes={"N": 2, "C": 5, "O": 12, "W": 2 * width + 1, "H": 7}, options=opts)
    panels = [ln for ln in k.script.splitlines() if "acc[r, u * 16 + v] = acc[r, u * 16 + v] + x_panel[" in ln]
    tiles = ["_w32 * 32 + (u * 16 + v)"] if width == 32 else \
        ["_w16 * 16 + (u * 16 + v)", f"({width - 16} + (u * 16 + v) - {width - 16})"]
    assert all(any(t in ln for ln in panels) for t in tiles), panels
    rng = np.random.default_rng(7)
    x, w = rand(rng, 2, 5, 7, 2 * width + 1), rand(rng, 12, 5, 3, 3)
    np.testing.assert_allclose(k(x, w), _conv(x, w, stride=2), rtol=1e-4, atol=1e-5)


def test_a_weight_read_twice_is_copied_once():
    src = """def f(float(N,C,H,W) x, float(O,C,3,3) w) -> (y) {
      y(n, o, h, v) +=! x(n, c, h + kh, v + kw) * w(o, c, kh, kw) * w(o, c, kh, kw)
    }"""
    k = tcdsl.compile(src, options={"disk_cache": False})
    assert k.script.count("w_t = T.alloc_buffer") <= 1 and "w_t" in k.script
    assert "w_t1" not in k.script
    rng = np.random.default_rng(4)
    x, w = rand(rng, 2, 3, 6, 9), rand(rng, 4, 3, 3, 3)
    np.testing.assert_allclose(k(x, w), _conv(x, w * w), rtol=1e-4, atol=1e-5)


CHANNELS_LAST_INPUT_GRADIENT = """def g(float(N,O,H2,W2) a, float(O,C,3,3) w) -> (d_x) {
  w_t(o, kh, kw, c) = w(o, c, kh, kw)
  d_x_p(u2, u3, n, c) +=! (u3 - kw >= 0 && u2 - kh >= 0 && u3 - kw < W2 && u2 - kh < H2 ?
                          a(n, o, u2 - kh, u3 - kw) * w_t(o, kh, kw, c) : 0) where u2 in 0:H2+2, u3 in 0:W2+2, kh in 0:3, kw in 0:3
  d_x(n, c, u2, u3) = d_x_p(u2, u3, n, c)
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_a_guarded_window_summed_channels_last_compiles(mode):
    # the input gradient of a 3x3 convolution written with the channels last:
    # its edge pieces (split at the guard) have reduction ranges that move with
    # the output pixel, outside the rows; their tiles copy no panel (a panel's
    # allocation there read loop variables TVM found undefined)
    k = tcdsl.compile(CHANNELS_LAST_INPUT_GRADIENT, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(11)
    a, w = rand(rng, 9, 5, 6, 7), rand(rng, 5, 20, 3, 3)
    want = np.zeros((9, 20, 8, 9))
    for kh in range(3):
        for kw in range(3):
            want[:, :, kh:kh + 6, kw:kw + 7] += np.einsum("nohv,oc->nchv", a.astype(np.float64), w[:, :, kh, kw])
    np.testing.assert_allclose(k(a, w), want, rtol=1e-4, atol=1e-5)


NARROWED_SUMS = [
    # ``j`` narrowed to [1, 2) by the guarded read: dw(o, c, 0) is no term's
    """def f(float(C,W) x, float(O,W) dy) -> (dw) {
      dw(o, c, j) +=! (v + j - 1 >= 0 && v + j - 1 < W ? x(c, v + j - 1) : 0) * dy(o, v)
    }""",
    # the same onto values an ``=`` wrote first
    """def f(float(N,C,H,W) x, float(N,O,H,W) dy, float(O,C,3,3) w0) -> (dw) {
      dw(o, c, i, j) = w0(o, c, i, j) * 0.5
      dw(o, c, i, j) += (h + i - 1 >= 0 && h + i - 1 < H && v + j - 1 >= 0 && v + j - 1 < W ?
                         x(n, c, h + i - 1, v + j - 1) : 0) * dy(n, o, h, v)
    }""",
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_a_sum_over_part_of_its_tensor_is_not_permuted(which, mode):
    # its temporary would be copied back over elements the sum never writes
    from tcdsl.testing import evaluate
    src = NARROWED_SUMS[which]
    rng = np.random.default_rng(2)
    shapes = [[(2, 4), (3, 4)], [(1, 2, 3, 4), (1, 3, 3, 4), (3, 2, 3, 3)]][which]
    args = [rand(rng, *s) for s in shapes]
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    assert "_p = T.alloc_buffer" not in k.script
    np.testing.assert_allclose(k(*args), evaluate(src, args), rtol=1e-4, atol=1e-5)


SCORES_HEADS_LAST = """def scores(float(B,NH,T,D) q, float(B,NH,S,D) k) -> (s) {
  s(b, i, j, h) +=! q(b, h, i, d) * k(b, h, j, d)
}"""
# q and k as a linear layer's output viewed (B, T, NH, D): the heads after every other index in the reads too
SCORES_BTHD = """def scores(float(B,T,NH,D) q, float(B,S,NH,D) k) -> (s) {
  s(b, i, j, h) +=! q(b, i, h, d) * k(b, j, h, d)
}"""
BMM_BATCH_LAST = """def bmm(float(B,M,K) A, float(B,K,N) X) -> (Y) {
  Y(m, n, b) +=! A(b, m, k) * X(b, k, n)
}"""


def test_a_batch_index_written_last_is_summed_first():
    """Every read uses the heads ``h`` and none has them last: summed as
    ``s_p(b, h, i, j)``, a matmul per (b, h) vectorized along ``j``, then
    copied back (_batch_last)."""
    s = tcdsl.compile(SCORES_HEADS_LAST, options={"disk_cache": False}).script
    assert re.search(r"s_p\[c0, c\d+, [^\n]*\] = acc\[", s), s  # register tiles of s_p
    assert re.search(r" s\[c0, [^\n]*\] = s_p\[c0, ", s), s
    y = tcdsl.compile(BMM_BATCH_LAST, options={"disk_cache": False}).script
    assert "Y_p" in y, y
    off = tcdsl.compile(SCORES_HEADS_LAST, options={"disk_cache": False, "transpose": False}).script
    assert "s_p" not in off
    s = tcdsl.compile(SCORES_BTHD, options={"disk_cache": False}).script
    assert "s_p = T.alloc_buffer((B, NH, T_1, S)" in s and re.search(r"s_p\[c0, c\d+, [^\n]*\] = acc\[", s), s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_batch_last_sums_match_numpy(mode):
    rng = np.random.default_rng(8)
    k = tcdsl.compile(SCORES_HEADS_LAST, specialize=mode, options={"disk_cache": False})
    for B, NH, T, S, D in [(2, 3, 5, 7, 9), (1, 1, 1, 1, 1), (1, 9, 17, 33, 4), (2, 16, 8, 3, 1)]:
        q, kk = rand(rng, B, NH, T, D), rand(rng, B, NH, S, D)
        want = np.einsum("bhqd,bhkd->bqkh", q.astype(np.float64), kk.astype(np.float64))
        np.testing.assert_allclose(k(q, kk), want, rtol=1e-4, atol=1e-5)
    k = tcdsl.compile(SCORES_BTHD, specialize=mode, options={"disk_cache": False})
    for B, T, NH, S, D in [(2, 5, 3, 7, 9), (1, 1, 1, 1, 1), (1, 17, 9, 33, 4)]:
        q, kk = rand(rng, B, T, NH, D), rand(rng, B, S, NH, D)
        want = np.einsum("bqhd,bkhd->bqkh", q.astype(np.float64), kk.astype(np.float64))
        np.testing.assert_allclose(k(q, kk), want, rtol=1e-4, atol=1e-5)
    k = tcdsl.compile(BMM_BATCH_LAST, specialize=mode, options={"disk_cache": False})
    for B, M, K, N in [(3, 5, 7, 9), (17, 1, 2, 33)]:
        a, x = rand(rng, B, M, K), rand(rng, B, K, N)
        want = np.einsum("bmk,bkn->mnb", a.astype(np.float64), x.astype(np.float64))
        np.testing.assert_allclose(k(a, x), want, rtol=1e-4, atol=1e-5)


def test_batch_last_sums_stay_inside_their_tensors():
    import guard  # tests/guard.py: guard pages before and after every tensor

    cases = [{"id": f"batch-last:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (SCORES_HEADS_LAST, {"B": 2, "NH": 3, "T": 5, "S": 7, "D": 9}),
                 (SCORES_HEADS_LAST, {"B": 1, "NH": 9, "T": 1, "S": 33, "D": 1}),
                 (BMM_BATCH_LAST, {"B": 17, "M": 3, "K": 5, "N": 26}),
                 (SCORES_BTHD, {"B": 2, "T": 5, "NH": 3, "S": 19, "D": 9})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# a grouped linear layer: the groups g are the rows of the sum as written
GROUPED_LINEAR = """def grouped(float(B,G,I) x, float(G,I,O) W) -> (y) {
  y(b, g, o) +=! x(b, g, i) * W(g, i, o)
}"""
# a block-diagonal weight on flat features: parity.py splits i into (i / 32, i % 32) first
BLOCK_DIAGONAL = """def blockdiag(float(B, 32 * NB) X, float(NB, 32, 32) W) -> (Y) {
  Y(b, i) +=! X(b, 32 * (i / 32) + j) * W(i / 32, j, i % 32) where i in 0:32 * NB
}"""


def test_a_batch_index_in_the_rows_is_summed_first():
    """Every read uses the groups ``g``, the sum's rows as written, and ``x``
    alone uses ``b``: summed as ``y_p(g, b, o)``, a matmul per group with rows
    ``b`` in register tiles, and copied back (_batch_rows); the block-diagonal
    weight's blocks the same after the split by ``i / 32``."""
    y = tcdsl.compile(GROUPED_LINEAR, options={"disk_cache": False}).script
    assert "y_p = T.alloc_buffer((G, B, O)" in y and re.search(r"y_p\[c0, [^\n]*\] = acc\[", y), y
    assert re.search(r" y\[[^\n]*\] = y_p\[", y), y
    fe = frontend(Source(BLOCK_DIAGONAL))
    src = to_tc(fe.checked.node)
    assert "Y_par_p(i_q, b, i_p) +=!" in src and "Y_par(b, i_q, i_p) = Y_par_p(i_q, b, i_p)" in src, src
    off = tcdsl.compile(GROUPED_LINEAR, options={"disk_cache": False, "transpose": False}).script
    assert "y_p" not in off


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_batch_rows_sums_match_numpy(mode):
    rng = np.random.default_rng(9)
    k = tcdsl.compile(GROUPED_LINEAR, specialize=mode, options={"disk_cache": False})
    for B, G, I, O in [(5, 3, 7, 9), (1, 1, 1, 1), (33, 4, 16, 40)]:
        x, w = rand(rng, B, G, I), rand(rng, G, I, O)
        np.testing.assert_allclose(k(x, w), np.einsum("bgi,gio->bgo", x.astype(np.float64), w), rtol=1e-4, atol=1e-5)
    k = tcdsl.compile(BLOCK_DIAGONAL, specialize=mode, options={"disk_cache": False})
    for B, NB in [(3, 2), (1, 1), (17, 5)]:
        x, w = rand(rng, B, 32 * NB), rand(rng, NB, 32, 32)
        want = np.einsum("bnj,nji->bni", x.reshape(B, NB, 32).astype(np.float64), w).reshape(B, 32 * NB)
        np.testing.assert_allclose(k(x, w), want, rtol=1e-4, atol=1e-5)


def test_batch_rows_sums_stay_inside_their_tensors():
    import guard

    cases = [{"id": f"batch-rows:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (GROUPED_LINEAR, {"B": 5, "G": 3, "I": 7, "O": 9}),
                 (GROUPED_LINEAR, {"B": 33, "G": 2, "I": 1, "O": 40}),
                 (BLOCK_DIAGONAL, {"B": 7, "NB": 3})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)
