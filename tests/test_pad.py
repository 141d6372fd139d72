"""Zero-padded copies of inputs read under a bounds select (polyhedral/pad.py,
option ``pad``): which reads are padded, the copies' extents, and results
against NumPy at the edges (sizes smaller than the padding included), in
every specialize mode."""
import numpy as np
import pytest

import guard
import tcdsl
from tcdsl import driver
from tcdsl.polyhedral import pad
from tcdsl.syntax import nodes as n

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
@pytest.mark.slow
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


@pytest.mark.slow
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


# the kernel's extent a size: the high padding max(KH - 2, 0) is two pieces,
# so the copy ends KH - 2 past the input (for KH = 1 one element short of it)
NHWC = """
def conv(float(N,H,W,C) x, float(KH,KW,C,O) w) -> (y) {
  y(n, h, v, o) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W
                     ? x(n, h + kh - 1, v + kw - 1, c) : 0) * w(kh, kw, c, o)
    where h in 0:H, v in 0:W, kh in 0:KH, kw in 0:KW
}
"""


def test_a_padding_that_depends_on_a_kernel_size():
    assert [(x, lo, hi) for x, lo, hi in plan_of(NHWC).copies] == [("x", ("0", "1", "1", "0"),
                                                                          ("0", "KH - 2", "KW - 2", "0"))]
    tir = driver.emit(tcdsl.compile(NHWC, options={"disk_cache": False}), "tir")
    tiled = [line for line in tir.splitlines() if "acc[" in line and "x_pad" in line and " + " in line]
    assert tiled and not any("if_then_else" in line or "T.Select" in line for line in tiled)


@pytest.mark.parametrize("mode", MODES)
def test_nhwc_padding_against_numpy(mode):
    rng = np.random.default_rng(4)
    k = tcdsl.compile(NHWC, specialize=mode, options={"disk_cache": False})
    for N, H, W, C, O, KH, KW in [(1, 1, 1, 1, 1, 1, 1), (2, 4, 5, 3, 2, 3, 3), (1, 6, 3, 2, 17, 2, 4),
                                  (1, 2, 7, 3, 5, 5, 1)]:
        x = rng.standard_normal((N, H, W, C))
        w = rng.standard_normal((KH, KW, C, O))
        xp = np.pad(x, ((0, 0), (1, KH), (1, KW), (0, 0)))
        want = np.zeros((N, H, W, O))
        for kh in range(KH):
            for kw in range(KW):
                want += np.einsum("nhwc,co->nhwo", xp[:, kh:kh + H, kw:kw + W], w[kh, kw])
        got = k(x.astype(np.float32), w.astype(np.float32))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# circular padding: the sum reads a wrapped copy at affine indices
CIRCULAR = """
def conv(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! x(b, c, (t + k - 2) % L) * w(o, c, k) where t in 0:L, k in 0:K
}
"""
CIRCULAR2D = """
def conv(float(N,C,H,W) x, float(M,C,3,3) w) -> (y) {
  y(n, m, h, v) +=! x(n, c, (h + kh - 1 + H) % H, (v + kw - 1) % W) * w(m, c, kh, kw)
    where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
}
"""


def test_a_wrapped_read_of_a_sum_reads_a_wrapped_copy():
    p = plan_of(CIRCULAR)
    assert [(x, lo, hi) for x, lo, hi in p.copies] == [("x", ("0", "0", "2"), ("0", "0", "K - 3"))]
    assert list(p.wrapped.values()) == [(False, False, True)]
    p2 = plan_of(CIRCULAR2D)
    assert [(x, lo) for x, lo, _ in p2.copies] == [("x", ("0", "0", "(-H) + 1", "1"))]
    assert list(p2.wrapped.values()) == [(False, False, True, True)]
    for src in (CIRCULAR, CIRCULAR2D):
        tir = driver.emit(tcdsl.compile(src, options={"disk_cache": False}), "tir")
        tiled = [line for line in tir.splitlines() if "acc[" in line and "x_pad" in line and " + " in line]
        assert tiled and not any("%" in line or "truncmod" in line or "floormod" in line or "T.Select" in line
                                 for line in tiled)
    # a written tensor, or a modulus other than the extent, stays as written
    assert not plan_of("def f(float(N) x, float(K) w) -> (y) {\n  z(i) = x(i) * 2\n"
                       "  y(i) +=! z((i + k) % N) * w(k) where i in 0:N\n}")
    assert not plan_of("def f(float(N) x, float(K) w) -> (y) {\n"
                       "  y(i) +=! x((i + k) % 3) * w(k) where i in 0:N, k in 0:K\n}").wraps


def _circular_conv1d(x, w):
    L, K = x.shape[2], w.shape[2]
    xp = x[:, :, np.arange(-2, L + K) % L]
    return sum(np.einsum("bct,oc->bot", xp[:, :, k:k + L], w[:, :, k]) for k in range(K))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_wrapped_copies_against_numpy(mode):
    rng = np.random.default_rng(6)
    k1 = tcdsl.compile(CIRCULAR, specialize=mode, options={"disk_cache": False})
    k2 = tcdsl.compile(CIRCULAR2D, specialize=mode, options={"disk_cache": False})
    for B, C, L, O, K in [(1, 1, 1, 1, 1), (2, 3, 2, 4, 5), (1, 2, 9, 3, 3), (2, 3, 20, 17, 7)]:
        x, w = rng.standard_normal((B, C, L)), rng.standard_normal((O, C, K))
        np.testing.assert_allclose(k1(x.astype(np.float32), w.astype(np.float32)), _circular_conv1d(x, w),
                                   rtol=1e-4, atol=1e-4)
    for N, C, H, W, M in [(1, 1, 1, 1, 1), (2, 3, 2, 5, 4), (1, 2, 6, 7, 17)]:
        x, w = rng.standard_normal((N, C, H, W)), rng.standard_normal((M, C, 3, 3))
        xp = x[:, :, np.arange(-1, H + 1) % H][:, :, :, np.arange(-1, W + 1) % W]
        want = sum(np.einsum("nchw,mc->nmhw", xp[:, :, i:i + H, j:j + W], w[:, :, i, j])
                   for i in range(3) for j in range(3))
        np.testing.assert_allclose(k2(x.astype(np.float32), w.astype(np.float32)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_wrapped_copies_stay_inside_their_tensors():
    cases = [{"id": f"circular:{i}", "source": CIRCULAR, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"B": 2, "C": 3, "L": 9, "O": 4, "K": 5}, {"B": 1, "C": 2, "L": 2, "O": 3, "K": 7},
                                        {"B": 1, "C": 1, "L": 1, "O": 1, "K": 1}])]
    cases += [{"id": f"circular2d:{i}", "source": CIRCULAR2D, "sizes": sizes, "seed": i}
              for i, sizes in enumerate([{"N": 1, "C": 2, "H": 1, "W": 4, "M": 3}, {"N": 2, "C": 1, "H": 5, "W": 2, "M": 2}])]
    guard.assert_all_work(cases)


# the second convolution of a residual block reads a temporary under its
# padding select: a padded copy of it, made once just before the statement
BLOCK = """
def block(float(N,C,H,W) x, float(C,C,3,3) w1, float(C,C,3,3) w2) -> (y) {
  c1(n, o, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W
                      ? x(n, c, h + kh - 1, v + kw - 1) : 0) * w1(o, c, kh, kw)
    where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
  a1(n, o, h, v) = fmax(c1(n, o, h, v), 0)
  y(n, o, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W
                     ? a1(n, c, h + kh - 1, v + kw - 1) : 0) * w2(o, c, kh, kw)
    where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
}
"""


@pytest.mark.slow
def test_a_temporary_outside_loops_is_copied_padded_before_its_reader():
    p = plan_of(BLOCK)
    assert [x for x, _, _ in p.copies] == ["x"]
    assert [(x, lo, hi, fixed) for x, lo, hi, _, fixed in p.steps.values()] == [
        ("a1", ("0", "0", "1", "1"), ("0", "0", "1", "1"), (None,) * 4)]
    fe = driver.frontend(BLOCK)
    order = [c.tensor for c in n.walk(fe.checked.node) if isinstance(c, n.Comprehension)]
    assert order.index("a1") < order.index("a1_pad") < order.index("y")
    tir = driver.emit(tcdsl.compile(BLOCK, options={"disk_cache": False}), "tir")
    tiled = [line for line in tir.splitlines() if "acc[" in line and "a1_pad" in line and " + " in line]
    assert tiled and not any("if_then_else" in line or "T.Select" in line for line in tiled)


def _conv_same(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    H, W = x.shape[2:]
    return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + H, j:j + W], w[:, :, i, j]) for i in range(3) for j in range(3))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_block_against_numpy(mode):
    rng = np.random.default_rng(9)
    k = tcdsl.compile(BLOCK, specialize=mode, options={"disk_cache": False})
    for N, C, H, W in [(1, 1, 1, 1), (2, 3, 2, 5), (1, 4, 7, 6)]:
        x, w1, w2 = rng.standard_normal((N, C, H, W)), rng.standard_normal((C, C, 3, 3)), rng.standard_normal((C, C, 3, 3))
        want = _conv_same(np.maximum(_conv_same(x, w1), 0), w2)
        got = k(*(a.astype(np.float32) for a in (x, w1, w2)))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_block_stays_inside_its_tensors():
    cases = [{"id": f"block:{i}", "source": BLOCK, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"N": 1, "C": 2, "H": 3, "W": 4}, {"N": 2, "C": 1, "H": 1, "W": 1},
                                        {"N": 1, "C": 3, "H": 5, "W": 2}])]
    guard.assert_all_work(cases)


# a ConvLSTM: the state's convolution reads the gates' weight by rows of a
# weight with G rows (G >= 4 D at every call: smaller G is refused), and the
# batch dimension of the state comes from statements after the convolution
CONV_LSTM = """
def convlstm(float(T,B,C,H,W) x, float(G,C,3,3) Wx, float(G,D,3,3) Wh) -> (h) {
  for t in T {
    g(b, o, y, v) +=! (y + ky - 1 >= 0 && y + ky - 1 < H && v + kx - 1 >= 0 && v + kx - 1 < W ? x(t, b, c, y + ky - 1, v + kx - 1) : 0) * Wx(o, c, ky, kx) where ky in 0:3, kx in 0:3, o in 0:G, y in 0:H, v in 0:W
    if t > 0 { g(b, o, y, v) += (y + ky - 1 >= 0 && y + ky - 1 < H && v + kx - 1 >= 0 && v + kx - 1 < W ? h(t - 1, b, d, y + ky - 1, v + kx - 1) : 0) * Wh(o, d, ky, kx) where ky in 0:3, kx in 0:3, d in 0:D }
    cc(t, b, d, y, v) = sigmoid(g(b, D + d, y, v)) * (t > 0 ? cc(t - 1, b, d, y, v) : 0) + sigmoid(g(b, d, y, v)) * tanh(g(b, 2 * D + d, y, v)) where d in 0:D
    h(t, b, d, y, v) = sigmoid(g(b, 3 * D + d, y, v)) * tanh(cc(t, b, d, y, v))
  }
}
"""


def _conv_lstm(x, wx, wh, D):
    sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    h = c = None
    out = []
    for t in range(x.shape[0]):
        g = _conv_same(x[t], wx)
        if h is not None:
            g = g + _conv_same(h, wh)
        i, f, gg, o = (g[:, k * D:(k + 1) * D] for k in range(4))
        c = sig(i) * np.tanh(gg) if c is None else sig(f) * c + sig(i) * np.tanh(gg)
        h = sig(o) * np.tanh(c)
        out.append(h)
    return np.stack(out)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_a_conv_lstm_state_is_padded_at_the_sizes_a_call_may_have(mode):
    """The state's read ``h(t - 1, b, d, ..)`` stays inside ``h`` only where
    ``G >= 4 D``, the sizes a call may have: its select is a padding there,
    and the convolution reads a padded copy of the step's state."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the reads past h and g where G < 4 D: refused at the call)
        k = tcdsl.compile(CONV_LSTM, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        assert "h_pad" in k.script
    rng = np.random.default_rng(5)
    for T, B, C, H, W, D in [(3, 2, 3, 4, 5, 2), (2, 1, 1, 1, 1, 1), (3, 1, 2, 3, 17, 3)]:
        x = rng.standard_normal((T, B, C, H, W)).astype(np.float32)
        wx = (rng.standard_normal((4 * D, C, 3, 3)) / 3).astype(np.float32)
        wh = (rng.standard_normal((4 * D, D, 3, 3)) / 3).astype(np.float32)
        np.testing.assert_allclose(k(x, wx, wh, D=D), _conv_lstm(x.astype(np.float64), wx, wh, D), rtol=1e-4, atol=1e-5)
    with pytest.raises(tcdsl.TcError, match="out of bounds"):
        k(x, wx[:4 * D - 1], wh[:4 * D - 1], D=D)


def test_a_conv_lstm_stays_inside_its_tensors():
    cases = [{"id": f"convlstm:{i}", "source": CONV_LSTM, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"T": 3, "B": 2, "C": 2, "H": 3, "W": 4, "G": 8, "D": 2},
                                        {"T": 2, "B": 1, "C": 1, "H": 1, "W": 1, "G": 4, "D": 1},
                                        {"T": 2, "B": 1, "C": 3, "H": 5, "W": 2, "G": 13, "D": 3}])]
    guard.assert_all_work(cases)


# an im2col's weight read through the digits of one flat index: ``r % 3``
# runs over all of ``0:9 * C``, and ``r`` is in the other indices too
IM2COL = """
def conv(float(N,C,H,W) I, float(M,C,3,3) Wt) -> (O) {
  col(n, r, h, w) = I(n, r / 9, h + (r % 9) / 3, w + r % 3) where r in 0:9 * C, h in 0:H - 2, w in 0:W - 2
  O(n, m, h, w) +=! Wt(m, r / 9, (r % 9) / 3, r % 3) * col(n, r, h, w)
}
"""


def test_digits_of_a_flat_index_are_not_a_circular_padding():
    # a wrapped copy of Wt would be (M, C, 3, 9 * C): 3 * C times Wt
    assert not plan_of(IM2COL).wraps
    k = tcdsl.compile(IM2COL, options={"disk_cache": False})
    assert "Wt_pad" not in k.script
    rng = np.random.default_rng(5)
    for N, C, M, H, W in [(2, 3, 4, 5, 7), (1, 1, 2, 3, 3), (2, 5, 3, 8, 19)]:
        x, w = rng.standard_normal((N, C, H, W)), rng.standard_normal((M, C, 3, 3))
        want = np.zeros((N, M, H - 2, W - 2))
        for kh in range(3):
            for kw in range(3):
                want += np.einsum("nchw,mc->nmhw", x[:, :, kh:kh + H - 2, kw:kw + W - 2], w[:, :, kh, kw])
        np.testing.assert_allclose(k(x.astype(np.float32), w.astype(np.float32)), want, rtol=1e-4, atol=1e-4)
