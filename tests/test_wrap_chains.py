"""Integer arithmetic on data that wraps, as NumPy's does: a chain of
``+ - *`` is computed in 64 bits and wrapped once, at its root
(codegen/expr.py ``_wide``).  Wrapped at every step, each level nested a
cast that TVM's simplifier handles in time exponential in the depth: an ROI
pooling's bin bounds as chained ``where`` bindings did not compile in 30
minutes."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl

OPTS = {"disk_cache": False}

# ten data-dependent steps in one chain, with products that leave int32
CHAIN = """
def chain(T(N) a, T(N) b, T(N) c) -> (y) {
  y(i) = a(i) * b(i) * c(i) + a(i) * a(i) * a(i) * b(i) - c(i) * T(3) + b(i) * b(i) - a(i) + c(i) * c(i) * c(i) * c(i) - T(7)
}
"""


def _chain_ref(a, b, c, dtype):
    with np.errstate(over="ignore"):
        t = np.dtype(dtype).type
        return a * b * c + a * a * a * b - c * t(3) + b * b - a + c * c * c * c - t(7)


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8"])
def test_a_chain_of_wrapping_steps_wraps_as_numpy(dtype):
    k = tcdsl.compile(CHAIN.replace("T", dtype), options=OPTS)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    for N in (1, 7, 33):
        a, b, c = (rng.integers(info.min, info.max, N, endpoint=True).astype(dtype) for _ in range(3))
        a[0], b[0], c[0] = info.min, info.max, info.min
        np.testing.assert_array_equal(k(a, b, c), _chain_ref(a, b, c, dtype))


def test_a_sum_is_wrapped_once():
    """A chain of sums, differences and products by constants is wrapped
    once, at its root, in each copy of the store (a vector loop and its
    tail); wrapped at every step, its 11 steps nested 11 casts."""
    src = """
    def chain(int32(N) a, int32(N) b, int32(N) c) -> (y) {
      y(i) = a(i) + b(i) - c(i) * 3 + a(i) * -5 - b(i) + c(i) + a(i) * 1000000 - b(i) + 2 * c(i) - a(i) + b(i) - 9
    }"""
    script = tcdsl.compile(src, options=OPTS).script
    stores = sum(1 for ln in script.splitlines() if ln.strip().startswith("y["))
    assert stores >= 1 and script.count("4294967295") == stores, script
    rng = np.random.default_rng(6)
    a, b, c = (rng.integers(-2**31, 2**31, 40).astype(np.int32) for _ in range(3))
    with np.errstate(over="ignore"):
        want = a + b - c * 3 + a * -5 - b + c + a * 1000000 - b + 2 * c - a + b - 9
    np.testing.assert_array_equal(tcdsl.compile(src, options=OPTS)(a, b, c), want.astype(np.int32))


# the bins of an adaptive pooling over segments [seg(r, 0), seg(r, 1)], bounds as chained bindings
BINS = """
def bins(float(L,C) feat, int32(R,2) seg) -> (out) {
  out(r, p, c) +=! (u < he - hs ? feat(hs + u, c) : 0.0)
    where p in 0:P, u in 0:K, n = seg(r, 1) - seg(r, 0) + 1,
          hs = seg(r, 0) + p * n / P, he = seg(r, 0) + ((p + 1) * n + P - 1) / P
}
"""


def test_bin_bounds_as_chained_bindings_compile_and_agree():
    k = tcdsl.compile(BINS, options=OPTS)
    rng = np.random.default_rng(8)
    for L, C, R, P in [(20, 3, 4, 3), (9, 1, 2, 4), (33, 17, 5, 7)]:
        feat = rng.standard_normal((L, C)).astype(np.float32)
        s0 = rng.integers(0, L, R)
        seg = np.stack([s0, rng.integers(s0, L)], 1).astype(np.int32)
        out = k(feat, seg, P=P, K=L)
        want = np.zeros((R, P, C), np.float32)
        for r in range(R):
            n = seg[r, 1] - seg[r, 0] + 1
            for p in range(P):
                hs, he = seg[r, 0] + p * n // P, seg[r, 0] + ((p + 1) * n + P - 1) // P
                want[r, p] = feat[hs:he].sum(0)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


# int8 operands widened to int32: every product and sum of a few of them fits
W8A8 = """
def w8a8(int8(N,K) xq, int8(O,K) wq, int32(O) b) -> (acc) {
  acc(n, o) +=! int32(xq(n, k)) * int32(wq(o, k)) + int32(xq(n, k)) * 3
  acc(n, o) = acc(n, o) + b(o)
}
"""


def test_products_of_narrower_integers_are_not_widened():
    """``int32(x) * int32(w)`` of two int8 values cannot leave int32: it is
    computed in int32 (a vector multiply of int32 lanes), not in int64 and
    wrapped back (codegen/expr.py ``_narrow``)."""
    k = tcdsl.compile(W8A8, options=OPTS)
    updates = [ln for ln in k.script.splitlines() if "wq" in ln and "xq" in ln and "=" in ln]
    assert updates and not any("int64" in ln or "4294967295" in ln for ln in updates), updates[:3]
    rng = np.random.default_rng(3)
    for N, K, O in [(1, 1, 1), (5, 7, 3), (9, 300, 33)]:
        x = rng.integers(-128, 128, (N, K)).astype(np.int8)
        w = rng.integers(-128, 128, (O, K)).astype(np.int8)
        x[0, 0], w[0, 0] = -128, -128
        b = rng.integers(-2**20, 2**20, O).astype(np.int32)
        want = x.astype(np.int32) @ w.astype(np.int32).T + 3 * x.astype(np.int32).sum(1)[:, None] + b
        np.testing.assert_array_equal(k(x, w, b), want)


def test_products_that_leave_int32_still_wrap():
    src = """
    def p(int16(N) a, int16(N) b, int16(N) c) -> (y) {
      y(i) = int32(a(i)) * int32(b(i)) * int32(c(i)) + int32(a(i)) * int32(b(i))
    }"""
    k = tcdsl.compile(src, options=OPTS)
    rng = np.random.default_rng(4)
    a, b, c = (rng.integers(-2**15, 2**15, 40).astype(np.int16) for _ in range(3))
    a[0], b[0], c[0] = -2**15, -2**15, -2**15
    A, B, C = (v.astype(np.int32) for v in (a, b, c))
    with np.errstate(over="ignore"):
        want = A * B * C + A * B
    np.testing.assert_array_equal(k(a, b, c), want)


def test_the_bound_of_a_cast_is_its_values_range():
    """``uint8(x)`` of an int8 value is up to 255, not 127 (the bound of a
    cast is its own type's range, or its operand's where the cast widens
    without changing the value): four of them multiplied leave int32
    (255**4 > 2**31) and wrap as NumPy's do."""
    src = """
    def p(int8(N) a) -> (y) {
      y(i) = int32(uint8(a(i))) * int32(uint8(a(i))) * int32(uint8(a(i))) * int32(uint8(a(i)))
    }"""
    k = tcdsl.compile(src, options=OPTS)
    a = np.array([-1, -128, 127, 0, 5, -2], np.int8)
    u = a.astype(np.uint8).astype(np.int32)
    with np.errstate(over="ignore"):
        want = u * u * u * u
    np.testing.assert_array_equal(k(a), want)
