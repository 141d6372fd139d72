"""Transposed convolutions summed by their outputs' remainders
(polyhedral/parity.py): which sums are split, the results against NumPy
(strides 2 and 3, offsets, the remainder written either way round, odd
sizes, every specialize mode), the same results with ``parity`` off, and no
read or write outside a tensor (guard pages)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tcdsl
import tcdsl.testing
from tcdsl import driver
from tcdsl.errors import TcWarning
from tcdsl.polyhedral import parity

sys.path.insert(0, str(Path(__file__).resolve().parent))
import guard  # noqa: E402
from helpers import rand  # noqa: E402

CONVT2D = """def convt(float(N,C,H,W) x, float(C,O,4,4) w) -> (y) {
  y(n, o, i, j) +=! ((i - kh) % 2 == 0 && (j - kw) % 2 == 0 && i - kh >= 0 && j - kw >= 0
                     && (i - kh) / 2 < H && (j - kw) / 2 < W ?
                     x(n, c, (i - kh) / 2, (j - kw) / 2) : 0) * w(c, o, kh, kw)
      where i in 0:2*H+2, j in 0:2*W+2, kh in 0:4, kw in 0:4
}"""

# stride 3, kernel K, padding 1 (PyTorch's output is cropped by one on each side), a bias after
CONVT1D_S3 = """def convt(float(B,C,L) x, float(C,O,K) w, float(O) bias) -> (y) {
  y(b, o, t) +=! ((t + 1 - k) % 3 == 0 && t + 1 - k >= 0 && (t + 1 - k) / 3 < L ?
                  x(b, c, (t + 1 - k) / 3) : 0) * w(c, o, k)
      where t in 0:3*L+K-3, k in 0:K
  y(b, o, t) = y(b, o, t) + bias(o)
}"""

# the remainder the other way round, and the select on the right of the product
CONVT1D_REV = """def convt(float(B,C,L) x, float(C,O,K) w) -> (y) {
  y(b, o, t) +=! w(c, o, k) * ((k - t) % 2 == 0 && t - k >= 0 && (t - k) / 2 < L ? x(b, c, (t - k) / 2) : 0)
      where t in 0:2*L+K-2, k in 0:K
}"""

# stride 3 as CONVT1D_S3, the input position bound by a where clause
CONVT1D_LET = """def convt(float(B,C,L) x, float(C,O,K) w, float(O) bias) -> (y) {
  y(b, o, t) +=! (p % 3 == 0 && p >= 0 && p / 3 < L ? x(b, c, p / 3) : 0) * w(c, o, k)
      where p = t + 1 - k, t in 0:3*L+K-3, k in 0:K
  y(b, o, t) = y(b, o, t) + bias(o)
}"""


def _convt_ref(x, w, stride, pad, out_len):
    """NumPy: y[b, o, t] = sum over c, k with t + pad - k = stride * u of x[b, c, u] w[c, o, k] (any rank)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    y = np.zeros((x.shape[0], w.shape[1]) + tuple(out_len))
    for kk in np.ndindex(*w.shape[2:]):
        for uu in np.ndindex(*x.shape[2:]):
            t = tuple(stride * u - pad + k for u, k in zip(uu, kk))
            if all(0 <= ti < o for ti, o in zip(t, out_len)):
                y[(slice(None), slice(None)) + t] += x[(slice(None), slice(None)) + uu] @ w[(slice(None), slice(None)) + kk]
    assert nd == len(out_len)
    return y


def _plan(src):
    # the program's sums as written (factor off: a bias after a sum would start it, addend.py)
    fe = driver.frontend(src, parity=False, factor=False)
    return parity.plan(fe.model)


def test_the_pairs_of_output_and_tap_found():
    (pairs, name), = _plan(CONVT2D).stmts.values()
    assert name == "y_par"
    assert [(q.v, q.k, q.s, q.e) for q in pairs] == [("i", "kh", 2, 0), ("j", "kw", 2, 0)]
    (pairs, _), = _plan(CONVT1D_S3).stmts.values()
    assert [(q.v, q.k, q.s, q.e) for q in pairs] == [("t", "k", 3, 1)]
    (pairs, _), = _plan(CONVT1D_REV).stmts.values()
    assert [(q.v, q.k, q.s, q.e) for q in pairs] == [("t", "k", 2, 0)]


@pytest.mark.parametrize("src", [
    # the select added, not a factor: the other terms count where the remainder is not 0
    "def f(float(L) x, float(K) w) -> (y) { y(t) +=! ((t - k) % 2 == 0 ? x(t / 2) : 0) + w(k) "
    "where t in 0:2*L, k in 0:K }",
    # the remainder of a sum of two outputs
    "def f(float(L) x, float(K) w) -> (y) { y(t, u) +=! ((t + u - k) % 2 == 0 ? x(t / 2) : 0) * w(k) "
    "where t in 0:2*L, u in 0:2, k in 0:K }",
])
def test_sums_that_are_not_split(src):
    assert not _plan(src)


def test_a_range_inferred_only_at_some_sizes_is_kept():
    """Without ``kh in 0:KH``, range inference narrows ``kh`` to ``0:1``, and
    only where ``KH <= 2`` (the read of ``x`` under the select constrains it):
    at KH = 3 the sum is empty.  The split would have summed ``kh = 0`` at
    every size; it is not taken, and the kernel agrees with the interpreter."""
    src = ("def f(float(H) x, float(KH) w) -> (y) { y(i) +=! ((i-kh) % 2 == 0 && (i-kh)/2 >= 0 && (i-kh)/2 < H "
           "? x((i-kh)/2) : 0) * w(kh) where i in 0:2*H+KH-2 }")
    with pytest.warns(TcWarning, match="narrows the reduction variable 'kh'"):
        assert not _plan(src)
        k = tcdsl.compile(src, options={"disk_cache": False})
    x, w2, w3 = np.array([1, 2, 3], np.float32), np.array([1, 10], np.float32), np.array([1, 10, 100], np.float32)
    np.testing.assert_array_equal(k(x, w3), np.zeros(7))
    np.testing.assert_array_equal(k(x, w2), [1, 0, 2, 0, 3, 0])
    for w in (w2, w3):
        np.testing.assert_array_equal(k(x, w), tcdsl.testing.evaluate(src, [x, w]))


def test_a_position_bound_by_a_where_clause_is_split_too():
    # the binding stands for ``t + 1 - k`` in the condition and the read, as in CONVT1D_S3
    (pairs, _), = _plan(CONVT1D_LET).stmts.values()
    assert [(q.v, q.k, q.s, q.e) for q in pairs] == [("t", "k", 3, 1)]
    s = tcdsl.compile(CONVT1D_LET, options={"disk_cache": False}).script
    assert "y_par = T.alloc_buffer((B, O, 3, " in s and "acc = T.alloc_buffer(" in s


def test_the_program_sums_each_class_in_its_own_loops():
    k = tcdsl.compile(CONVT2D, options={"disk_cache": False})
    s = k.script
    assert "y_par = T.alloc_buffer((N, O, 2, 2, " in s
    sums = s.split("y_par = T.alloc_buffer")[1].split("y[")[0]
    sums = "\n".join(x for x in sums.splitlines() if "_ck" not in x)  # (a chunk's size divides by the threads)
    assert not re.search(r"(%|//) 2\b", sums), sums  # no remainder or quotient left in the sums
    assert "acc = T.alloc_buffer(" in sums and "x_pad[" in sums  # register tiles over a padded copy


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_convt2d_matches_numpy(mode):
    k = tcdsl.compile(CONVT2D, specialize=mode, options={"disk_cache": False})
    plain = tcdsl.compile(CONVT2D, options={"disk_cache": False, "parity": False})
    rng = np.random.default_rng(1)
    for N, C, H, W, O in [(1, 1, 1, 1, 1), (2, 3, 5, 4, 7), (1, 9, 3, 11, 2)]:
        x, w = rand(rng, N, C, H, W), rand(rng, C, O, 4, 4)
        want = _convt_ref(x, w, 2, 0, (2 * H + 2, 2 * W + 2))
        got = k(x, w)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(plain(x, w), got, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
@pytest.mark.parametrize("src", [CONVT1D_S3, CONVT1D_REV, CONVT1D_LET], ids=["stride 3, offset", "reversed",
                                                                            "where binding"])
def test_convt1d_matches_numpy(src, mode):
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(2)
    for B, C, L, O, K in [(1, 1, 1, 1, 1), (2, 3, 7, 5, 4), (3, 2, 4, 3, 6), (1, 4, 9, 2, 2)]:
        x, w = rand(rng, B, C, L), rand(rng, C, O, K)
        if src is not CONVT1D_REV:
            bias = rand(rng, O)
            want = _convt_ref(x, w, 3, 1, (3 * L + K - 3,)) + bias[None, :, None]
            got = k(x, w, bias)
        else:
            want = _convt_ref(x, w, 2, 0, (2 * L + K - 2,))
            got = k(x, w)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_no_read_or_write_outside_a_tensor():
    cases = [{"id": f"parity:{name}", "source": src, "settings": settings, "expect": "agree"}
             for name, src, settings in [
                 ("convt2d", CONVT2D, [{"N": 1, "C": 2, "H": 3, "W": 2, "O": 3}, {"N": 2, "C": 1, "H": 1, "W": 5, "O": 1}]),
                 ("convt1d_s3", CONVT1D_S3, [{"B": 1, "C": 2, "L": 4, "O": 3, "K": 5}, {"B": 2, "C": 1, "L": 1, "O": 2, "K": 3}]),
                 ("convt1d_rev", CONVT1D_REV, [{"B": 2, "C": 3, "L": 5, "O": 2, "K": 4}])]]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), records


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("cond,read", [
    ("(k - t + 1) % 3 == 0", "(t + 1 - k) / 3"),   # the read's constant is not the condition's
    ("(t - k + 1) % 3 == 0", "(t + 1 - k) / 3"),
    ("(k - t - 1) % 3 == 0", "(t + 1 - k) / 3"),
    ("(t - k) % 2 == 0", "(t - k) / 2"),
])
def test_remainder_conditions_with_either_sign(cond, read):
    from tcdsl.testing import evaluate
    s = 3 if "% 3" in cond else 2
    src = f"""def f(float(L) x, float(K) w) -> (y) {{
      y(t) +=! ({cond} && {read} >= 0 && {read} < L ? x({read}) : 0) * w(k)
        where t in 0:{s} * L + K - 2, k in 0:K
    }}"""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(7).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    for mode in ("never", "before-scheduling"):
        k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
        np.testing.assert_allclose(k(x, w), evaluate(src, [x, w]), rtol=1e-5, atol=1e-5)


# nn.ConvTranspose1d(C, O, 6, stride=3) with the taps by quotient and remainder:
# output t reads x at t / 3 - m with the tap t % 3 + 3 m (no select on a remainder)
CONVT1D_DIVMOD = """def ct3(float(B,C,L) x, float(C,O,6) w, float(O) bias) -> (y) {
  y(b, o, t) +=! (t / 3 - m >= 0 && t / 3 - m < L ? x(b, c, t / 3 - m) : 0) * w(c, o, t % 3 + 3 * m)
      where t in 0:3*L+3, m in 0:2
  y(b, o, t) = y(b, o, t) + bias(o)
}"""


def test_an_output_read_only_by_quotient_and_remainder_is_split():
    (pairs, name), = _plan(CONVT1D_DIVMOD).stmts.values()
    assert name == "y_par" and [(q.v, q.k, q.s) for q in pairs] == [("t", None, 3)]
    s = tcdsl.compile(CONVT1D_DIVMOD, options={"disk_cache": False}).script
    sums = s.split("y_par = T.alloc_buffer")[1].split("y[")[0]
    assert "acc = T.alloc_buffer(" in sums and not re.search(r"(%|//) 3\b", sums), sums


@pytest.mark.parametrize("src", [
    # t also read as itself: not split
    "def f(float(L) x, float(K) w) -> (y) { y(t) +=! x(t / 2) * w(t % 2 + k) * t where t in 0:2*L, k in 0:K-1 }",
    # two divisors
    "def f(float(L) x, float(K) w) -> (y) { y(t) +=! x(t / 2) * w(t % 3 + k) where t in 0:2*L, k in 0:K-2 }",
    # a remainder only
    "def f(float(K) x, float(K) w) -> (y) { y(t) +=! x(k) * w(t % 2 + k) where t in 0:5, k in 0:K-1 }",
])
def test_outputs_read_otherwise_are_not_split(src):
    assert not _plan(src)


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_quotient_and_remainder_taps_match_numpy(mode):
    k = tcdsl.compile(CONVT1D_DIVMOD, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(4)
    for B, C, L, O in [(1, 1, 1, 1), (2, 3, 7, 5), (3, 2, 4, 3), (1, 4, 9, 2)]:
        x, w, bias = rand(rng, B, C, L), rand(rng, C, O, 6), rand(rng, O)
        want = _convt_ref(x, w, 3, 0, (3 * L + 3,)) + bias[None, :, None]
        np.testing.assert_allclose(k(x, w, bias), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,src", [("divmod", "CONVT1D_DIVMOD"), ("offset", "CONVT1D_OFFSET")])
def test_quotient_and_remainder_taps_stay_inside_their_tensors(name, src):
    cases = [{"id": f"parity:{name}", "source": globals()[src], "expect": "agree",
              "settings": [{"B": 1, "C": 2, "L": 4, "O": 3}, {"B": 2, "C": 1, "L": 1, "O": 2}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), records


# nn.ConvTranspose1d(C, O, 16, stride=8, padding=4) by quotient and remainder of t + 4 (HiFi-GAN's
# upsampling): output t reads x at (t + 4) / 8 - m with the tap (t + 4) % 8 + 8 m
CONVT1D_OFFSET = """def up(float(B,C,L) x, float(C,O,16) w) -> (y) {
  y(b, o, t) +=! ((t + 4) / 8 - m >= 0 && (t + 4) / 8 - m < L ? x(b, c, (t + 4) / 8 - m) : 0)
                 * w(c, o, (t + 4) % 8 + 8 * m) where t in 0:8 * L, m in 0:2
}"""
# stride 3, an offset above the stride: (t + 5) / 3 = (t + 2) / 3 + 1
CONVT1D_OFFSET_BIG = """def up(float(B,C,L) x, float(C,O,6) w) -> (y) {
  y(b, o, t) +=! ((t + 5) / 3 - m - 1 >= 0 && (t + 5) / 3 - m - 1 < L ? x(b, c, (t + 5) / 3 - m - 1) : 0)
                 * w(c, o, (t + 5) % 3 + 3 * m) where t in 0:3 * L + 1, m in 0:2
}"""


def test_an_output_read_by_quotient_and_remainder_of_an_offset_is_split():
    (pairs, name), = _plan(CONVT1D_OFFSET).stmts.values()
    assert name == "y_par" and [(q.v, q.k, q.s, q.e) for q in pairs] == [("t", None, 8, 4)]
    s = tcdsl.compile(CONVT1D_OFFSET, options={"disk_cache": False}).script
    sums = s.split("y_par = T.alloc_buffer")[1].split("y[")[0]
    # register tiles, no remainder left (the quotient of t_p + 4 bounds a loop, once per class)
    assert "acc = T.alloc_buffer(" in sums and not re.search(r"% 8\b", sums), sums
    # a negative offset (a dividend below 0 at t = 0) and two offsets are left as written
    assert not _plan(CONVT1D_OFFSET.replace("(t + 4)", "(t - 4)"))
    assert not _plan(CONVT1D_OFFSET.replace("(t + 4) % 8", "(t + 3) % 8"))


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_quotient_and_remainder_of_an_offset_match_numpy(mode):
    rng = np.random.default_rng(5)
    k = tcdsl.compile(CONVT1D_OFFSET, specialize=mode, options={"disk_cache": False})
    for B, C, L, O in [(1, 1, 1, 1), (2, 3, 5, 4), (1, 2, 3, 3)]:
        x, w = rand(rng, B, C, L), rand(rng, C, O, 16)
        want = _convt_ref(x, w, 8, 4, (8 * L,))
        np.testing.assert_allclose(k(x, w), want, rtol=1e-5, atol=1e-5)
    k = tcdsl.compile(CONVT1D_OFFSET_BIG, specialize=mode, options={"disk_cache": False})
    for B, C, L, O in [(1, 1, 1, 1), (2, 3, 5, 4)]:
        x, w = rand(rng, B, C, L), rand(rng, C, O, 6)
        want = _convt_ref(x, w, 3, 2, (3 * L + 1,))
        np.testing.assert_allclose(k(x, w), want, rtol=1e-5, atol=1e-5)



# a sub-pixel convolution (ESPCN, EDSR's upsampler): the bias written first, the
# 3x3 convolution added with ``+=``, pixel_shuffle(2) by quotient and remainder
SUBPIXEL = """def up(float(N,C,H,W) x, float(4 * F,C,3,3) w, float(4 * F) bias) -> (y) {
  y(n, f, i, j) = bias(4 * f + 2 * (i % 2) + j % 2) where n in 0:N, f in 0:F, i in 0:2 * H, j in 0:2 * W
  y(n, f, i, j) += (i / 2 + kh - 1 >= 0 && i / 2 + kh - 1 < H && j / 2 + kw - 1 >= 0 && j / 2 + kw - 1 < W
                    ? x(n, c, i / 2 + kh - 1, j / 2 + kw - 1) : 0) * w(4 * f + 2 * (i % 2) + j % 2, c, kh, kw)
      where f in 0:F, i in 0:2 * H, j in 0:2 * W, kh in 0:3, kw in 0:3
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_sum_added_to_a_bias_is_split_too(mode):
    """``+=`` adds the split sum to what the tensor holds (a scalar dot product
    of 3 taps per output before: 381 ms against 3.7 at (2, 64, 48, 48, 64))."""
    assert _plan(SUBPIXEL).stmts
    k = tcdsl.compile(SUBPIXEL, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(6)
    for N, C, H, W, F in [(1, 1, 1, 1, 1), (2, 3, 5, 4, 2), (1, 2, 3, 6, 3)]:
        x, w, bias = rand(rng, N, C, H, W), rand(rng, 4 * F, C, 3, 3), rand(rng, 4 * F)
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        conv = sum(np.einsum("nchw,oc->nohw", xp[:, :, a:a + H, b:b + W], w[:, :, a, b])
                   for a in range(3) for b in range(3)) + bias[None, :, None, None]
        want = conv.reshape(N, F, 2, 2, H, W).transpose(0, 1, 4, 2, 5, 3).reshape(N, F, 2 * H, 2 * W)
        np.testing.assert_allclose(k(x, w, bias), want, rtol=1e-4, atol=1e-4)
