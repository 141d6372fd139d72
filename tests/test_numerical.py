"""Compiled kernels against NumPy: matmul, batched matmul, Elman RNN, QRNN."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
import tcdsl.testing
from helpers import ELMAN, QRNN, elman_inputs, qrnn_inputs, rand, reference

MATMUL = "def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
BMM = "def bmm(float(Z,M,K) A, float(Z,K,N) B) -> (C) { C(z, m, n) +=! A(z, m, k) * B(z, k, n) }"


@pytest.fixture(scope="module")
def matmul():
    return tcdsl.compile(MATMUL)


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (3, 5, 7), (16, 16, 16), (33, 17, 9), (1, 64, 1)])
def test_matmul(matmul, M, K, N):
    rng = np.random.default_rng(M * 100 + K * 10 + N)
    A, B = rand(rng, M, K), rand(rng, K, N)
    np.testing.assert_allclose(matmul(A, B), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("Z,M,K,N", [(1, 1, 1, 1), (2, 3, 4, 5), (5, 8, 3, 1)])
def test_batched_matmul(Z, M, K, N):
    k = tcdsl.compile(BMM)
    rng = np.random.default_rng(Z)
    A, B = rand(rng, Z, M, K), rand(rng, Z, K, N)
    np.testing.assert_allclose(k(A, B), np.einsum("zmk,zkn->zmn", A.astype(np.float64), B), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def elman():
    return tcdsl.compile(ELMAN)


@pytest.mark.parametrize("T,B,Ci,Co", [(1, 1, 1, 1), (1, 4, 3, 5), (5, 1, 4, 6), (17, 4, 8, 5), (8, 3, 16, 32)])
def test_elman(elman, T, B, Ci, Co):
    inputs = elman_inputs(np.random.default_rng(T + B), T, B, Ci, Co)
    np.testing.assert_allclose(elman(*inputs), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("T,B,C,H", [(1, 1, 1, 1), (1, 3, 4, 2), (6, 1, 5, 3), (9, 4, 8, 16)])
def test_qrnn(T, B, C, H):
    k = tcdsl.compile(QRNN)
    inputs = qrnn_inputs(np.random.default_rng(T * B), T, B, C, H)
    h, cell = k(*inputs)
    h_ref, c_ref = reference.qrnn(*inputs)
    np.testing.assert_allclose(h, h_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cell, c_ref, rtol=1e-5, atol=1e-5)


def test_outputs_start_at_zero_and_out_accumulates():
    k = tcdsl.compile("def acc(float(N) A) -> (O) { O(i) += A(i) }")
    A = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(k(A), A)  # kernel-allocated outputs start as zeros
    out = np.full(4, 10, dtype=np.float32)
    res = k(A, out=out)
    assert res is out
    np.testing.assert_array_equal(out, A + 10)  # `+=` accumulates into what out= holds


def test_out_must_match_inferred_shape(matmul):
    A, B = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(tcdsl.TcShapeError, match=r"shape \(4, 4\).*\(2, 4\)"):
        matmul(A, B, out=np.zeros((4, 4), np.float32))


def test_several_outputs_and_temporaries():
    src = """
    def f(float(N) A) -> (S, P) {
      tmp(i) = A(i) * 2
      S(i) = tmp(i) + 1
      P +=! tmp(i)
    }"""
    A = np.arange(5, dtype=np.float32)
    s, p = tcdsl.compile(src)(A)
    np.testing.assert_allclose(s, 2 * A + 1)
    np.testing.assert_allclose(p, 2 * A.sum())
    assert p.shape == ()


def test_reductions_min_max_product():
    src = """
    def r(float(N, K) A) -> (mn, mx, pr) {
      mn(n) min=! A(n, k)
      mx(n) max=! A(n, k)
      pr(n) *=! A(n, k)
    }"""
    A = np.random.default_rng(3).uniform(0.5, 1.5, (4, 6)).astype(np.float32)
    mn, mx, pr = tcdsl.compile(src)(A)
    np.testing.assert_allclose(mn, A.min(1))
    np.testing.assert_allclose(mx, A.max(1))
    np.testing.assert_allclose(pr, A.astype(np.float64).prod(1), rtol=1e-5)


def test_integer_floor_division_and_modulo():
    src = "def d(int32(N) A, int32(N) B) -> (Q, R) { Q(i) = A(i) / B(i)  R(i) = A(i) % B(i) }"
    A = np.array([7, -7, 7, -7, 0, -1], np.int32)
    B = np.array([2, 2, -2, -2, 3, 3], np.int32)
    q, r = tcdsl.compile(src)(A, B)
    np.testing.assert_array_equal(q, np.floor_divide(A, B))
    np.testing.assert_array_equal(r, np.mod(A, B))


def test_convolution_range_inference():
    src = "def conv(float(N,C,H,W) I, float(M,C,KH,KW) Wt) -> (O) { O(n,m,h,w) +=! I(n,c,h+kh,w+kw) * Wt(m,c,kh,kw) }"
    rng = np.random.default_rng(0)
    I, Wt = rand(rng, 2, 3, 7, 6), rand(rng, 4, 3, 3, 2)
    out = tcdsl.compile(src)(I, Wt)
    assert out.shape == (2, 4, 5, 5)
    ref = np.zeros(out.shape)
    for kh in range(3):
        for kw in range(2):
            ref += np.einsum("nchw,mc->nmhw", I[:, :, kh:kh + 5, kw:kw + 5].astype(np.float64), Wt[:, :, kh, kw])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_for_lo_hi_and_else_if():
    src = """
    def f(float(T, N) X) -> (O) {
      for t in 1:T {
        if t == 1 { O(t, i) = X(t, i) }
        else if t < 4 { O(t, i) = O(t - 1, i) + X(t, i) }
        else { O(t, i) = O(t - 1, i) * 2 }
      }
    }"""
    X = np.random.default_rng(1).standard_normal((7, 3)).astype(np.float32)
    want = np.zeros_like(X, dtype=np.float64)
    for t in range(1, 7):
        want[t] = X[t] if t == 1 else (want[t - 1] + X[t] if t < 4 else want[t - 1] * 2)
    np.testing.assert_allclose(tcdsl.compile(src)(X), want, rtol=1e-5, atol=1e-6)


def test_nested_for_layers_and_time():
    src = """
    def stacked(float(T, N) X, float(L, N, N) Wt) -> (H) {
      for l in L {
        for t in T {
          if l == 0 { H(l, t, j) +=! X(t, i) * Wt(l, i, j) }
          else { H(l, t, j) +=! H(l - 1, t, i) * Wt(l, i, j) }
          H(l, t, j) = tanh(H(l, t, j))
        }
      }
    }"""
    rng = np.random.default_rng(2)
    X, Wt = rand(rng, 4, 3), rand(rng, 2, 3, 3)
    want = np.zeros((2, 4, 3))
    for l in range(2):
        for t in range(4):
            want[l, t] = np.tanh((X[t] if l == 0 else want[l - 1, t]) @ Wt[l])
    np.testing.assert_allclose(tcdsl.compile(src)(X, Wt), want, rtol=1e-5, atol=1e-6)


def test_zero_length_sequence(elman):
    inputs = elman_inputs(np.random.default_rng(0), 0, 2, 3, 4)
    out = elman(*inputs)
    assert out.shape == (0, 2, 4)


def test_torch_in_torch_out(elman):
    torch = pytest.importorskip("torch")
    inputs = elman_inputs(np.random.default_rng(5), 4, 2, 3, 5)
    out = elman(*[torch.from_numpy(x) for x in inputs])
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)


def test_torch_out_is_written_in_place(matmul):
    torch = pytest.importorskip("torch")
    A, B = torch.ones(2, 3), torch.ones(3, 4)
    C = torch.zeros(2, 4)
    assert matmul(A, B, out=C) is C
    assert torch.all(C == 3)


def test_float_division_by_a_constant_zero_follows_ieee():
    k = tcdsl.compile("def f(float(N) A) -> (o) { o(i) = A(i) / (2 - 1 * 2) }")
    out = k(np.array([1, -1, 0], np.float32))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


def test_bool_reductions_are_any_and_all():
    src = ("def f(float(R,C) A, float(C) x) -> (anyv, allv) { anyv(r) +=! A(r,c) != 0 && x(c) != 0 "
           " allv(r) *=! A(r,c) != 0 || x(c) != 0 }")
    A = np.array([[1, 0, 1], [0, 0, 0]], np.float32)
    x = np.array([0, 1, 0], np.float32)
    anyv, allv = tcdsl.compile(src)(A, x)
    np.testing.assert_array_equal(anyv, np.any((A != 0) & (x != 0), axis=1))
    np.testing.assert_array_equal(allv, np.all((A != 0) | (x != 0), axis=1))


def test_indirect_read_of_an_empty_tensor_gives_zero():
    """An indirect index is clamped into its tensor; an empty tensor has no
    element to clamp to, so the read gives 0 (and never touches memory)."""
    k = tcdsl.compile("def f(float(M) T, int32(N) I) -> (O) { O(i) = T(I(i)) }")
    np.testing.assert_array_equal(k(np.zeros(0, np.float32), np.array([0, 3, -1], np.int32)), np.zeros(3))
    np.testing.assert_array_equal(k(np.arange(4, dtype=np.float32), np.array([0, 3, -1, 9], np.int32)),
                                  [0, 3, 0, 3])


@pytest.mark.parametrize("cond,expected", [
    ("A(i) == 1", lambda A, X: A == 1), ("A(i) != 0", lambda A, X: A != 0), ("A(i) < 1", lambda A, X: A < 1),
    ("A(i) == 2", lambda A, X: A == 2), ("A(i) > -1", lambda A, X: A > -1),
    ("(X(i) > 0) == A(i)", lambda A, X: (X > 0) == A), ("A(i) >= A(i)", lambda A, X: A >= A)])
def test_bools_compare_as_the_integers_0_and_1(cond, expected):
    """A bool compared with an integer or another bool, as NumPy compares
    them (TVM's LLVM backend had compared 1-bit values as floats)."""
    src = f"def f(bool(N) A, float(N) X) -> (B) {{ B(i) = {cond} ? 1.0 : 0.0 }}"
    A = np.array([True, False, True, False, True])
    X = np.array([1.0, -1.0, -2.0, 3.0, 0.0], np.float32)
    want = expected(A, X).astype(np.float32)
    np.testing.assert_array_equal(tcdsl.compile(src)(A, X), want)
    np.testing.assert_array_equal(tcdsl.testing.evaluate(src, [A, X]), want)
