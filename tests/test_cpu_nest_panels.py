"""Panels over a nest of reduction loops on the CPU (tcdsl/codegen/cpu_tiles.py,
``_Panels``): in ``dW(i, j) += X(t, b, i) * A(t, b, j)`` (the weight
gradients of an RNN) the reduction runs over ``t`` and ``b``, and ``A``'s
tile is copied to a panel of the nest's steps, in blocks of ``k_block``
steps of the nest (128 by default).  Symbolic sizes with tails in every
loop, offsets in the reduction's ranges (``t in 1:T``), three loops, and
the ``k_block`` option; NumPy is the reference."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import tcdsl
from helpers import rand

DW = "def dw(float(T,B,I) X, float(T,B,J) A) -> (dW) { dW(i, j) +=! X(t, b, i) * A(t, b, j) }"
# d_h2h of the Elman RNN: the reduction starts at t = 1 and reads t - 1
SHIFTED = ("def dh(float(T,B,I) Hd, float(T,B,J) A) -> (dW) "
           "{ dW(i, j) +=! Hd(t - 1, b, i) * A(t, b, j) where t in 1:T }")
TILE = {"tile_rows": 4, "tile_cols": 32, "vector_width": 8}  # fixed here: the defaults depend on the host
THREE = "def d3(float(T,B,S,I) X, float(T,B,S,J) A) -> (dW) { dW(i, j) +=! X(t, b, s, i) * A(t, b, s, j) }"


@functools.lru_cache(maxsize=None)
def _kernel(src: str, k_block: int = 0, **kw):
    return tcdsl.compile(src, options={"k_block": k_block, "disk_cache": False}, **kw)


def _check(k, shape_x, shape_a, ref, seed=0):
    rng = np.random.default_rng(seed)
    X, A = rand(rng, *shape_x), rand(rng, *shape_a)
    steps = int(np.prod(shape_x[:-1]))
    np.testing.assert_allclose(k(X, A), ref(X.astype(np.float64), A.astype(np.float64)),
                               rtol=1e-5, atol=2e-6 * max(steps, 1) ** 0.5 + 1e-6)


def _dw(X, A):
    return np.einsum("tbi,tbj->ij", X, A)


def _shifted(X, A):
    return np.einsum("tbi,tbj->ij", X[:-1], A[1:])


def test_the_nest_is_packed_in_blocks():
    """A's tile is copied in the nest's order (t, then b), in blocks of
    128 // B steps of t (at least one), and the tiles read it at t's stride
    B x 32 and b's 32, the block's steps in one loop."""
    s = tcdsl.compile(DW, options={**TILE, "disk_cache": False}).script
    assert re.search(r"c1_kc: T\.let\[T\.int32\] = T\.max\(128 // T\.max\(T\.max\(B, 0\), 1\), 1\)", s)
    assert "A_block = T.alloc_buffer((T.min(T.max(T_1, 0), c1_kc) * T.max(B, 0) * 32,))" in s
    assert "for c1_kb in range((T.max(T_1, 0) + c1_kc - 1) // c1_kc):" in s
    assert re.search(r"A_packed = T\.decl_buffer\(\(T_1, B, J\), data=A_block\.data, strides=\(32 \* T\.max\(B, 0\), 32, 1\)", s)
    # (from the first column of the product's group: it is alone in its kernel, cpu_strips.two_way)
    assert "A_panel[(c1_pk * T.max(B, 0) + c2_pk) * 32 + u * 8 + v] = A[c1_pk, c2_pk, c3_first + c3_w32 * 32 + u * 8 + v]" in s
    # the block's steps of t and b run as one loop (codegen/collapse.py, one_run): X and the panel are linear in t * B + b
    assert "for c2_q in range(T.max(c1_kn, 0) * T.max(B, 0)):" in s
    assert "X[c1_kb * c1_kc, c2_q, c0_lo + c0_b * 4 + r] * A_packed[c1_kb * c1_kc, c2_q, c3_first + c3_w32 * 32 + (u * 8 + v)]" in s


# (T, B, I, J): tails of rows (I), of columns (J: 64-wide tiles, 32, 16,
# vectors, single columns), blocks of t that do not divide T, B above 128
# (a block is one step of t), B = 1, T = 1, empty reductions
SIZES = [(7, 5, 13, 67), (64, 32, 40, 130), (3, 129, 9, 64), (10, 1, 16, 64), (1, 3, 17, 200), (5, 7, 8, 3),
         (9, 17, 33, 97), (0, 4, 8, 64), (5, 0, 16, 64), (0, 0, 9, 70)]


@pytest.mark.parametrize("T,B,I,J", SIZES)
@pytest.mark.parametrize("k_block", [0, 1, 7, 64, 1000])
def test_symbolic_sizes(T, B, I, J, k_block):
    _check(_kernel(DW, k_block), (T, B, I), (T, B, J), _dw, seed=T * 1000 + B * 10 + k_block)


@pytest.mark.parametrize("T,B,I,J", [(7, 5, 13, 67), (2, 9, 21, 64), (33, 4, 8, 129), (1, 2, 16, 64)])
def test_a_reduction_from_t_1(T, B, I, J):
    k = _kernel(SHIFTED)
    assert "A_packed" in k.script
    _check(k, (T, B, I), (T, B, J), _shifted, seed=T + B)


@pytest.mark.parametrize("k_block", [0, 5])
def test_three_reduction_loops(k_block):
    k = _kernel(THREE, k_block)
    assert re.search(r"A_packed = T\.decl_buffer\(\(T_1, B, S, J\), data=A_block\.data, strides=\(\d+ \* T\.max\(S, 0\) "
                     r"\* T\.max\(B, 0\), \d+ \* T\.max\(S, 0\), \d+, 1\)", k.script)
    for shape in [(3, 5, 7, 9, 70), (2, 1, 3, 16, 64), (4, 6, 2, 8, 33)]:
        T, B, S, I, J = shape
        rng = np.random.default_rng(sum(shape))
        X, A = rand(rng, T, B, S, I), rand(rng, T, B, S, J)
        np.testing.assert_allclose(k(X, A), np.einsum("tbsi,tbsj->ij", X.astype(np.float64), A),
                                   rtol=1e-5, atol=1e-5)


def test_specialized():
    k = _kernel(DW, specialize="before-scheduling")
    for T, B, I, J in [(7, 5, 13, 67), (64, 32, 40, 130)]:
        _check(k, (T, B, I), (T, B, J), _dw, seed=3)
    k = tcdsl.compile(DW, sizes={"T": 64, "B": 32, "I": 256, "J": 256}, options={"disk_cache": False})
    assert "A_packed" in k.script
    _check(k, (64, 32, 256), (64, 32, 256), _dw, seed=4)


def test_a_triangular_nest_is_not_packed():
    """The inner reduction loop's range depends on the outer one (the select's
    condition cuts the nest, ``split_selects``): no box, no panel."""
    src = ("def tri(float(T,I) X, float(T,J) A) -> (dW) "
           "{ dW(i, j) +=! X(t, i) * (s <= t ? A(s, j) : 0.0) }")
    k = _kernel(src)
    assert re.search(r"for c\d_k, c\d_k in T\.grid\(", k.script) is None  # the inner loop's extent moves
    assert "A_packed" not in k.script
    rng = np.random.default_rng(6)
    X, A = rand(rng, 9, 13), rand(rng, 9, 70)
    want = sum(np.outer(X[t], A[: t + 1].sum(0)) for t in range(9))
    np.testing.assert_allclose(k(X, A), want, rtol=1e-5, atol=1e-5)


# the right-hand tensor read twice at the same element (a squared difference):
# one panel serves both reads, no gather per vector
SQDIST = "def sq(float(N,D) x, float(M,D) y) -> (d) { d(i, j) +=! (x(i, k) - y(j, k)) * (x(i, k) - y(j, k)) }"
# read at two different elements: no panel (it would hold one of them only)
TWO_READS = "def tw(float(N,D) x, float(M,D) y) -> (d) { d(i, j) +=! x(i, k) * y(j, k) * y(j, D - 1 - k) }"


def test_a_tensor_read_twice_at_one_element_is_packed_once():
    s = tcdsl.compile(SQDIST, options={**TILE, "disk_cache": False}).script
    assert "y_packed" in s and "y_panel" in s
    # the main tiles read the panel at both places
    assert re.search(r"\(x\[[^\n]* - y_packed\[[^\n]*\) \* \(x\[[^\n]* - y_packed\[", s), s
    k = tcdsl.compile(SQDIST, options={"disk_cache": False})
    rng = np.random.default_rng(4)
    for N, M, D in ((37, 70, 5), (130, 129, 33), (4, 1, 1)):
        x, y = rand(rng, N, D), rand(rng, M, D)
        ref = ((x[:, None, :].astype(np.float64) - y[None]) ** 2).sum(-1)
        np.testing.assert_allclose(k(x, y), ref, rtol=1e-5, atol=1e-5)


def test_a_tensor_read_at_two_elements_is_not_packed():
    k = tcdsl.compile(TWO_READS, options={**TILE, "disk_cache": False})
    assert "y_packed" not in k.script
    rng = np.random.default_rng(6)
    x, y = rand(rng, 40, 7), rand(rng, 70, 7)
    ref = np.einsum("ik,jk,jk->ij", x.astype(np.float64), y, y[:, ::-1])
    np.testing.assert_allclose(k(x, y), ref, rtol=1e-5, atol=1e-5)


# one reduction loop, the rows' tensor read across its rows (dy(n, o), rows o):
# the panel is copied in blocks by default; a matmul's A(m, k) keeps one block
DW_ONE = "def dw1(float(N,O) dy, float(N,I) x) -> (dW) { dW(o, i) +=! dy(n, o) * x(n, i) }"
MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"


def test_rows_read_across_get_blocks_by_default():
    s = tcdsl.compile(DW_ONE, options={**TILE, "disk_cache": False}).script
    assert "x_packed" in s and re.search(r"for c\d_kb in range", s), s
    m = tcdsl.compile(MATMUL, options={**TILE, "disk_cache": False}).script
    # (one block, or blocks of 512 steps past 4096 at run time: codegen/panels.py LONG_K)
    assert "B_packed" in m and re.search(r"c\d_kc: T\.let\[T\.int32\] = T\.Select\(T\.max\(K, 0\) > 4096, 512, ", m), m


@pytest.mark.parametrize("N", [1, 127, 128, 300])
def test_rows_read_across_match_numpy(N):
    k = _kernel(DW_ONE)
    rng = np.random.default_rng(N)
    dy, x = rand(rng, N, 37), rand(rng, N, 70)
    np.testing.assert_allclose(k(dy, x), dy.T.astype(np.float64) @ x, rtol=1e-5, atol=2e-6 * N ** 0.5 + 1e-6)
