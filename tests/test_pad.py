"""Zero-padded copies of inputs read under a bounds select (polyhedral/pad.py,
option ``pad``): which reads are padded, the copies' extents, and results
against NumPy at the edges (sizes smaller than the padding included), in
every specialize mode."""
import numpy as np
import pytest

import tcdsl
from tcdsl import driver
from tcdsl.polyhedral import pad

MODES = ("never", "after-scheduling", "before-scheduling")

SAME = """
def same(float(B,C,L) x, float(O,C,5) w, float(O) bias) -> (y) {
  y(b, o, t) +=! (t + k - 2 >= 0 && t + k - 2 < L ? x(b, c, t + k - 2) : 0) * w(o, c, k) where t in 0:L, k in 0:5
  y(b, o, t) = y(b, o, t) + bias(o)
}
"""
CAUSAL = """
def causal(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! (t + k - K + 1 >= 0 ? x(b, c, t + k - K + 1) : 0) * w(o, c, k) where t in 0:L, k in 0:K
}
"""
DILATED = """
def dilated(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! (0 <= t + 3 * (k - K + 1) ? x(b, c, t + 3 * (k - K + 1)) : 0) * w(o, c, k) where t in 0:L, k in 0:K
}
"""
CONV2D = """
def conv2d(float(N,C,H,W) x, float(M,C,3,3) w) -> (y) {
  y(n, m, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W
                     ? x(n, c, h + kh - 1, v + kw - 1) : 0) * w(m, c, kh, kw)
                     where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
}
"""


def conv1d(x, w, left, dilation=1, right=0):
    """NumPy: y(b, o, t) = sum_{c,k} xp(b, c, t + dilation * k) w(o, c, k), xp padded by left/right zeros."""
    B, C, L = x.shape
    O, _, K = w.shape
    xp = np.concatenate([np.zeros((B, C, left)), x.astype(np.float64), np.zeros((B, C, right))], axis=2)
    y = np.zeros((B, O, L))
    for k in range(K):
        y += np.einsum("bct,oc->bot", xp[:, :, k * dilation:k * dilation + L], w[:, :, k].astype(np.float64))
    return y


def plan_of(src):
    return pad.plan(driver.frontend(src, pad=False).model)


def test_the_padding_of_each_read():
    """Low and high padding per dimension: 2 and 2 for 'same', K - 1 and 0 for a causal convolution,
    3 (K - 1) for a dilated one; both spatial dimensions of a 2-D convolution."""
    assert [(x, lo, hi) for x, lo, hi in plan_of(SAME).copies] == [("x", ("0", "0", "2"), ("0", "0", "2"))]
    assert [(x, lo, hi) for x, lo, hi in plan_of(CAUSAL).copies] == [("x", ("0", "0", "K - 1"), ("0", "0", "0"))]
    assert [(x, lo, hi) for x, lo, hi in plan_of(DILATED).copies] == [("x", ("0", "0", "(3 * K) - 3"),
                                                                             ("0", "0", "0"))]
    assert [(x, lo, hi) for x, lo, hi in plan_of(CONV2D).copies] == [("x", ("0", "0", "1", "1"),
                                                                            ("0", "0", "1", "1"))]


@pytest.mark.parametrize("src", [
    # the condition is stricter than the bounds: reads zero inside the input too
    "def f(float(B,L) x, float(K) w) -> (y) {\n"
    "  y(b, t) +=! (t + k - 2 >= 1 && t + k - 2 < L ? x(b, t + k - 2) : 0) * w(k) where t in 0:L, k in 0:5\n}",
    # the condition is on another index than the read's
    "def f(float(B,L) x, float(K) w) -> (y) {\n"
    "  y(b, t) +=! (t - k >= 0 ? x(b, t + k) : 0) * w(k) where t in 0:L - K + 1, k in 0:K\n}",
    # not zero outside
    "def f(float(B,L) x, float(K) w) -> (y) {\n"
    "  y(b, t) +=! (t + k - 1 >= 0 ? x(b, t + k - 1) : 1) * w(k) where t in 0:L - K + 1, k in 0:K\n}",
    # no reduction: the copy would cost what the statement does
    "def f(float(B,L) x) -> (y) {\n  y(b, t) = (t - 1 >= 0 ? x(b, t - 1) : 0)\n}",
    # the input is written: no input at all, a temporary
    "def f(float(B,L) x, float(K) w) -> (y) {\n  z(b, t) = x(b, t) * 2\n"
    "  y(b, t) +=! (t + k - 1 >= 0 ? z(b, t + k - 1) : 0) * w(k) where t in 0:L - K + 1, k in 0:K\n}",
])
def test_reads_that_stay_as_written(src):
    assert not plan_of(src)


def test_inside_a_loop_the_steps_slice_is_padded():
    """(Hoisting first moves the statement out of the loop: not here.)  The copy
    holds the step's slice, x(t, ...), made before the statement at each step."""
    src = ("def f(float(T,B,L) x, float(K) w) -> (y) {\n  for t in T {\n"
           "    y(t, b, i) +=! (i + k - 1 >= 0 ? x(t, b, i + k - 1) : 0) * w(k) where i in 0:L - K + 1, k in 0:K\n  }\n}")
    p = pad.plan(driver.frontend(src, pad=False, hoist=False).model)
    [(tensor, low, high, _, fixed)] = p.steps.values()
    assert (tensor, low, high, fixed) == ("x", ("0", "0", "1"), ("0", "0", "0"), ("t", None, None))
    assert plan_of(src)  # hoisted out of the loop, then padded
    # no index fixed by the loop: the copy would be of the whole tensor at every step
    whole = ("def f(float(T,B) x, float(K) w) -> (y) {\n  for t in T {\n"
             "    y(t, b) +=! (t - k >= 0 ? x(t - k, b) : 0) * w(k) where k in 0:K\n  }\n}")
    assert not pad.plan(driver.frontend(whole, pad=False, hoist=False).model)


CONV_RNN = """
def convrnn(float(T,B,C,H,W) x, float(C,C,3,3) Wh) -> (h) {
  for t in T {
    if t == 0 { h(t, b, o, y, z) = tanh(x(t, b, o, y, z)) }
    else {
      u(b, o, y, z) +=! (y + ky - 1 >= 0 && y + ky - 1 < H && z + kz - 1 >= 0 && z + kz - 1 < W ?
                         h(t - 1, b, c, y + ky - 1, z + kz - 1) : 0) * Wh(o, c, ky, kz)
          where y in 0:H, z in 0:W, ky in 0:3, kz in 0:3
      h(t, b, o, y, z) = tanh(x(t, b, o, y, z) + u(b, o, y, z))
    }
  }
}
"""


def _conv_rnn(x, wh):
    T, B, C, H, W = x.shape
    h = np.zeros(x.shape)
    h[0] = np.tanh(x[0])
    for t in range(1, T):
        hp = np.pad(h[t - 1], ((0, 0), (0, 0), (1, 1), (1, 1)))
        u = sum(np.einsum("bcyz,oc->boyz", hp[:, :, i:i + H, j:j + W], wh[:, :, i, j])
                for i in range(3) for j in range(3))
        h[t] = np.tanh(x[t] + u)
    return h


def test_a_state_written_in_the_loop_is_padded_step_by_step():
    """A convolutional RNN reads the previous step's state under a padding
    select: the copy is the step's slice h(t - 1) with a zero border, made in
    the loop before the convolution, whose reduction then has no select."""
    p = pad.plan(driver.frontend(CONV_RNN, pad=False).model)
    [(tensor, low, high, _, fixed)] = p.steps.values()
    assert (tensor, low, high, fixed) == ("h", ("0", "0", "0", "1", "1"), ("0", "0", "0", "1", "1"),
                                          ("t - 1", None, None, None, None))
    rng = np.random.default_rng(3)
    for mode in MODES:
        k = tcdsl.compile(CONV_RNN, specialize=mode, options={"disk_cache": False})
        assert "h_pad" in k.script and "u[" in k.script
        for T, B, C, H, W in [(3, 1, 2, 1, 1), (4, 2, 3, 5, 7), (2, 1, 1, 2, 9)]:
            x = rng.standard_normal((T, B, C, H, W)).astype(np.float32)
            wh = (rng.standard_normal((C, C, 3, 3)) / (3 * C)).astype(np.float32)
            np.testing.assert_allclose(k(x, wh), _conv_rnn(x.astype(np.float64), wh), rtol=1e-5, atol=1e-5)


def test_no_select_left_in_the_reduction():
    k = tcdsl.compile(SAME, options={"disk_cache": False})
    tir = driver.emit(k, "tir")
    assert "x_pad" in tir
    # the reduction's register tiles read the copy; only the copy tests the bounds
    tiled = [line for line in tir.splitlines() if "acc[" in line and "x_pad[" in line]
    assert tiled and not any("if_then_else" in line or "T.Select" in line for line in tiled)


@pytest.mark.parametrize("mode", MODES)
def test_results_against_numpy(mode):
    rng = np.random.default_rng(0)
    same = tcdsl.compile(SAME, specialize=mode, options={"disk_cache": False})
    causal = tcdsl.compile(CAUSAL, specialize=mode, options={"disk_cache": False})
    dilated = tcdsl.compile(DILATED, specialize=mode, options={"disk_cache": False})
    for B, C, L, O, K in [(2, 3, 1, 4, 3), (1, 2, 3, 2, 5), (2, 5, 37, 6, 3), (3, 4, 70, 9, 2)]:
        x = rng.standard_normal((B, C, L)).astype(np.float32)
        w5 = rng.standard_normal((O, C, 5)).astype(np.float32)
        bias = rng.standard_normal(O).astype(np.float32)
        np.testing.assert_allclose(same(x, w5, bias), conv1d(x, w5, 2, right=2) + bias[None, :, None],
                                   rtol=1e-4, atol=1e-4)
        w = rng.standard_normal((O, C, K)).astype(np.float32)
        np.testing.assert_allclose(causal(x, w), conv1d(x, w, K - 1), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(dilated(x, w), conv1d(x, w, 3 * (K - 1), dilation=3), rtol=1e-4, atol=1e-4)


def test_conv2d_against_numpy():
    rng = np.random.default_rng(1)
    k = tcdsl.compile(CONV2D, options={"disk_cache": False})
    for N, C, H, W, M in [(1, 2, 1, 1, 3), (2, 3, 5, 7, 4)]:
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        want = np.zeros((N, M, H, W))
        for kh in range(3):
            for kw in range(3):
                want += np.einsum("nchw,mc->nmhw", xp[:, :, kh:kh + H, kw:kw + W], w[:, :, kh, kw])
        np.testing.assert_allclose(k(x, w), want, rtol=1e-4, atol=1e-4)


# the select around the whole product, as users also write it
SAME_PRODUCT = """
def same(float(B,C,L) x, float(O,C,5) w, float(O) bias) -> (y) {
  y(b, o, t) +=! t + k - 2 >= 0 && t + k - 2 < L ? bias(o) * x(b, c, t + k - 2) * w(o, c, k) : 0
    where t in 0:L, k in 0:5
}
"""
CONV2D_PRODUCT = CONV2D.replace("? x(n, c, h + kh - 1, v + kw - 1) : 0) * w(m, c, kh, kw)",
                                "? x(n, c, h + kh - 1, v + kw - 1) * w(m, c, kh, kw) : 0)")


def test_a_select_around_the_whole_product_is_padded_too():
    """``c ? x(..) * w(..) : 0`` reads the padded copy as ``(c ? x(..) : 0) *
    w(..)`` does, when the other factors' reads are inside their tensors
    without the condition; NumPy agrees at the edges, in every mode."""
    assert [(x, lo, hi) for x, lo, hi in plan_of(SAME_PRODUCT).copies] == [("x", ("0", "0", "2"), ("0", "0", "2"))]
    assert [x for x, _, _ in plan_of(CONV2D_PRODUCT).copies] == ["x"]
    assert driver.emit(tcdsl.compile(CONV2D_PRODUCT, options={"disk_cache": False}), "tir") == \
        driver.emit(tcdsl.compile(CONV2D, options={"disk_cache": False}), "tir")
    rng = np.random.default_rng(3)
    for mode in MODES:
        k = tcdsl.compile(SAME_PRODUCT, specialize=mode, options={"disk_cache": False})
        for B, C, L, O in [(2, 3, 1, 4), (1, 2, 3, 2), (2, 5, 37, 6)]:
            x = rng.standard_normal((B, C, L)).astype(np.float32)
            w = rng.standard_normal((O, C, 5)).astype(np.float32)
            bias = rng.standard_normal(O).astype(np.float32)
            np.testing.assert_allclose(k(x, w, bias), conv1d(x, w, 2, right=2) * bias[None, :, None],
                                       rtol=1e-4, atol=1e-4)


def test_a_product_whose_other_factor_needs_the_condition_stays_as_written():
    """``w(t + k - 1)`` is outside ``w`` where the condition is false: moving
    it out of the select would read it there."""
    src = ("def f(float(L) x, float(L) w) -> (y) {\n"
           "  y(t) +=! t + k - 1 >= 0 && t + k - 1 < L ? x(t + k - 1) * w(t + k - 1) : 0 where t in 0:L, k in 0:3\n}")
    assert not plan_of(src)
    x, w = np.arange(1, 6, dtype=np.float32), np.arange(2, 7, dtype=np.float32)
    xw = np.pad(x * w, 1)
    np.testing.assert_allclose(tcdsl.compile(src)(x, w), xw[:-2] + xw[1:-1] + xw[2:])


def test_option_off_keeps_the_select():
    k = tcdsl.compile(SAME, options={"pad": False, "disk_cache": False})
    assert "x_pad" not in driver.emit(k, "tir")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 5)).astype(np.float32)
    bias = np.zeros(4, np.float32)
    np.testing.assert_allclose(k(x, w, bias), conv1d(x, w, 2, right=2), rtol=1e-4, atol=1e-4)
    with pytest.raises(tcdsl.TcError, match="pad"):
        tcdsl.compile(SAME, options={"pad": 1})
