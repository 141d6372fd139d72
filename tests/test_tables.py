"""Costly terms that do not depend on every index of their statement,
computed once in a table (tcdsl/polyhedral/tables.py): a sinusoidal
positional encoding added to a batch is computed over (t, d) once, not for
every b.  Results against NumPy at odd sizes in every specialize mode; the
statements left as written."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

PE = """def pe(float(B,T,D) x) -> (y) {
  y(b, t, d) = x(b, t, d) + (d % 2 == 0 ? sin(t * exp(-d * 9.210340372 / D))
                                        : cos(t * exp(-(d - 1) * 9.210340372 / D)))
}"""
SCALED = """def f(float(B,T,D) x, float(T,D) w) -> (y) {
  y(b, t, d) = x(b, t, d) * exp(w(t, d)) + tanh(x(b, t, d))
}"""


def _pe(x):
    B, T, D = x.shape
    t, d = np.arange(T)[:, None].astype(np.float64), np.arange(D)[None].astype(np.float64)
    table = np.where(d % 2 == 0, np.sin(t * np.exp(-d * 9.210340372 / D)),
                     np.cos(t * np.exp(-(d - 1) * 9.210340372 / D)))
    return x + table


def test_positional_encoding_is_a_table():
    s = tcdsl.compile(PE, options={"disk_cache": False}).script
    # the table over (t, d), computed before y and read by it
    assert "y_tab = T.alloc_buffer((T_1, D)" in s, s
    assert re.search(r"y\[c1, c0, [^\n]*\] = x\[c1, c0, [^\n]*\] \+ y_tab\[c0, ", s), s
    # sin and cos once per (t, d), outside the loop over b
    assert all("y_tab[" in line.split("=")[0] for line in s.splitlines() if "T.sin(" in line or "T.cos(" in line), s


def test_left_as_written_without_factor():
    s = tcdsl.compile(PE, options={"disk_cache": False, "factor": False}).script
    assert "y_tab" not in s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_tables_match_numpy(mode):
    rng = np.random.default_rng(3)
    k = tcdsl.compile(PE, specialize=mode, options={"disk_cache": False})
    for B, T, D in [(2, 5, 7), (1, 1, 1), (3, 33, 10)]:
        x = rand(rng, B, T, D)
        np.testing.assert_allclose(k(x), _pe(x), rtol=1e-5, atol=2e-5)
    k2 = tcdsl.compile(SCALED, specialize=mode, options={"disk_cache": False})
    assert "y_tab" in k2.script
    for B, T, D in [(2, 5, 7), (4, 9, 17)]:
        x, w = rand(rng, B, T, D), rand(rng, T, D)
        want = x.astype(np.float64) * np.exp(w.astype(np.float64))[None] + np.tanh(x.astype(np.float64))
        np.testing.assert_allclose(k2(x, w), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src", [
    # the costly term uses every index
    "def f(float(B,T) x) -> (y) { y(b, t) = exp(x(b, t)) }",
    # the term that skips b is cheap
    "def f(float(B,T) x) -> (y) { y(b, t) = x(b, t) + t * 2.0 }",
    # a sum's costly term over all of the sum's indices
    "def f(float(B,T) x, float(T) w) -> (y) { y(b) +=! exp(x(b, t) * w(t)) }",
])
def test_left_as_written(src):
    s = tcdsl.compile(src, options={"disk_cache": False}).script
    assert "_tab" not in s, s


BN_RSQRT = """def bn(float(N,C) x, float(C) gamma, float(C) beta) -> (y, mean, var) {
  mean(c) +=! x(n, c) / N
  var(c) +=! (x(n, c) - mean(c)) * (x(n, c) - mean(c)) / N
  y(n, c) = (x(n, c) - mean(c)) * rsqrt(var(c) + 1e-5) * gamma(c) + beta(c)
}"""
BN_DIV = BN_RSQRT.replace("* rsqrt(var(c) + 1e-5)", "/ sqrt(var(c) + 1e-5)")
LAYER_NORM = """def ln(float(N,C) x) -> (y, mean, var) {
  mean(n) +=! x(n, c) / C
  var(n) +=! (x(n, c) - mean(n)) * (x(n, c) - mean(n)) / C
  y(n, c) = (x(n, c) - mean(n)) / sqrt(var(n) + 1e-5)
}"""


def _bn(x, gamma, beta):
    x = x.astype(np.float64)
    mean, var = x.mean(0), x.var(0)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def test_a_square_root_along_the_vector_loop_is_a_table():
    """A batch norm over (N, C) features: its rsqrt of var(c) varies along
    the vector loop c, so it is computed once per c, not per element."""
    s = tcdsl.compile(BN_RSQRT, options={"disk_cache": False}).script
    assert "y_tab = T.alloc_buffer((C,)" in s, s
    assert all("y_tab[" in line.split("=")[0] for line in s.splitlines() if "T.rsqrt(" in line), s


def test_a_divisor_with_a_square_root_is_a_table_of_its_reciprocal():
    s = tcdsl.compile(BN_DIV, options={"disk_cache": False}).script
    assert re.search(r"y_tab\[[^\n]*\] = T\.float32\(1\.0\) / T\.sqrt\(var\[", s), s
    assert re.search(r"y\[[^\n]*= \(x\[[^\n]*\] - mean\[[^\n]*\]\) \* y_tab\[", s), s
    assert not any("T.sqrt(" in line and "y_tab[" not in line.split("=")[0] for line in s.splitlines()), s


GNB = """def gnb(float(N,D) X, float(C,D) theta, float(C,D) var) -> (jll) {
  jll(n, c) +=! (X(n, d) - theta(c, d)) * (X(n, d) - theta(c, d)) / var(c, d)
}"""
COLUMN_DIV = "def f(float(N,C) x, float(C) nrm) -> (y) { y(n, c) = x(n, c) / nrm(c) }"


def test_a_divisor_without_every_index_is_a_table_of_its_reciprocal():
    """A Gaussian naive Bayes log-likelihood divides by ``var(c, d)``, the
    same for every row ``n``; a column scaling divides by ``nrm(c)`` along
    the vector loop: each divisor becomes a table of 1 / it, computed once
    (a vector division costs as much as ten products: the likelihood at
    (8192, 64, 20) took 1.8 ms, 1.1 ms with the table)."""
    s = tcdsl.compile(GNB, options={"disk_cache": False}).script
    assert re.search(r"jll_tab[^\n]*\] = T\.float32\(1\.0\) / var", s), s
    assert not any(" / var" in line and "jll_tab" not in line.split("=")[0] for line in s.splitlines()), s
    s = tcdsl.compile(COLUMN_DIV, options={"disk_cache": False}).script
    assert re.search(r"y_tab[^\n]*\] = T\.float32\(1\.0\) / nrm", s), s
    # a divisor of the rows is hoisted out of the vector loop instead (codegen/invariant.py)
    rows = tcdsl.compile(COLUMN_DIV.replace("float(C) nrm", "float(N) nrm").replace("nrm(c)", "nrm(n)"),
                         options={"disk_cache": False}).script
    assert "_tab" not in rows, rows


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_reciprocal_tables_match_numpy(mode):
    rng = np.random.default_rng(8)
    k = tcdsl.compile(GNB, specialize=mode, options={"disk_cache": False})
    for N, D, C in [(5, 3, 2), (33, 17, 20), (1, 1, 1)]:
        X, th = rand(rng, N, D), rand(rng, C, D)
        v = rng.uniform(0.5, 2.0, (C, D)).astype(np.float32)
        want = (((X[:, None, :] - th[None]).astype(np.float64) ** 2) / v[None]).sum(2)
        np.testing.assert_allclose(k(X, th, v), want, rtol=1e-5, atol=1e-5)
    k = tcdsl.compile(COLUMN_DIV, specialize=mode, options={"disk_cache": False})
    x, nrm = rand(rng, 7, 19), rand(rng, 19)
    x[0, :3], nrm[:3] = [1.0, -1.0, 0.0], 0.0  # x / 0: inf, -inf and NaN, as written
    with np.errstate(divide="ignore", invalid="ignore"):
        want = x.astype(np.float64) / nrm
    np.testing.assert_allclose(k(x, nrm), want, rtol=1e-6)


def test_a_square_root_of_the_rows_stays_in_its_statement():
    """A layer norm's sqrt(var(n)) does not vary along the vector loop c: the
    code generator hoists it out of that loop (codegen/invariant.py)."""
    s = tcdsl.compile(LAYER_NORM, options={"disk_cache": False}).script
    assert "y_tab" not in s, s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_square_root_tables_match_numpy(mode):
    rng = np.random.default_rng(5)
    for src in (BN_RSQRT, BN_DIV):
        k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
        for N, C in [(3, 5), (1, 1), (17, 33), (64, 130)]:
            x, gamma, beta = rand(rng, N, C), rand(rng, C), rand(rng, C)
            y, mean, var = k(x, gamma, beta)
            np.testing.assert_allclose(y, _bn(x, gamma, beta), rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(var, x.astype(np.float64).var(0), rtol=1e-4, atol=1e-5)
    k = tcdsl.compile(LAYER_NORM, specialize=mode, options={"disk_cache": False})
    x = rand(rng, 7, 19)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(k(x)[0], want, rtol=1e-4, atol=1e-4)


# Bilinear sampling at a grid of points, clamped at the border (torch's
# grid_sample with padding_mode="border", align_corners=True), written with
# where bindings: the grid's arithmetic and the four weights depend on
# (n, i, j) only, not on the channel.
GRID_SAMPLE = """def gs(float(N,C,H,W) x, float(N,P,Q,2) g) -> (y) {
  y(n,c,i,j) = (1 - ax) * (1 - ay) * x(n,c,r0,c0) + ax * (1 - ay) * x(n,c,r0,c1)
             + (1 - ax) * ay * x(n,c,r1,c0) + ax * ay * x(n,c,r1,c1)
    where fx = fmin(fmax((g(n,i,j,0) + 1) * 0.5 * (W - 1), 0.0), W - 1.0),
          fy = fmin(fmax((g(n,i,j,1) + 1) * 0.5 * (H - 1), 0.0), H - 1.0),
          c0 = min(max(int32(floor(fx)), 0), W - 1), r0 = min(max(int32(floor(fy)), 0), H - 1),
          c1 = min(c0 + 1, W - 1), r1 = min(r0 + 1, H - 1),
          ax = fx - float(c0), ay = fy - float(r0)
}"""


def _grid_sample(x, g):
    x, g = x.astype(np.float64), g.astype(np.float64)
    N, C, H, W = x.shape
    fx = np.clip((g[..., 0] + 1) * 0.5 * (W - 1), 0, W - 1)
    fy = np.clip((g[..., 1] + 1) * 0.5 * (H - 1), 0, H - 1)
    c0, r0 = np.floor(fx).astype(int), np.floor(fy).astype(int)
    c1, r1 = np.minimum(c0 + 1, W - 1), np.minimum(r0 + 1, H - 1)
    ax, ay = (fx - c0)[:, None], (fy - r0)[:, None]
    n = np.arange(N)[:, None, None, None]
    c = np.arange(C)[None, :, None, None]
    at = lambda r, q: x[n, c, r[:, None], q[:, None]]  # noqa: E731
    return ((1 - ax) * (1 - ay) * at(r0, c0) + ax * (1 - ay) * at(r0, c1)
            + (1 - ax) * ay * at(r1, c0) + ax * ay * at(r1, c1))


def test_weights_and_grid_arithmetic_of_a_grid_sample_are_tables():
    """The statement loads the weights and floor(fx), floor(fy) from tables
    over (n, i, j) and runs in a vector loop over (i, j), its channels in a
    loop outside it; the tables read the grid, the statement does not."""
    s = tcdsl.compile(GRID_SAMPLE, options={"disk_cache": False}).script
    assert s.count(" = T.alloc_buffer((N, P, Q)") == 6, s
    stores = [line for line in s.splitlines() if re.match(r"\s*y(_rows)?\[", line)]
    assert stores and not any("g[" in line or "fmin" in line or "T.floor(" in line for line in stores), s
    vector = s[:s.index(stores[0])].rsplit("for ", 1)[1]
    assert "T.vectorized(" in vector, s


def test_a_grid_sample_without_factor_keeps_its_arithmetic():
    k = tcdsl.compile(GRID_SAMPLE, options={"disk_cache": False, "factor": False})
    # (g read in place, or through the view of its rows merged with the vector loop's)
    assert "y_tab" not in k.script and re.search(r"\bg(_rows)?\[", k.script)
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    g = rng.uniform(-1.3, 1.3, (2, 4, 9, 2)).astype(np.float32)
    np.testing.assert_allclose(k(x, g), _grid_sample(x, g), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_grid_sample_tables_match_numpy(mode):
    rng = np.random.default_rng(11)
    k = tcdsl.compile(GRID_SAMPLE, specialize=mode, options={"disk_cache": False})
    for N, C, H, W, P, Q in [(2, 3, 5, 7, 4, 9), (1, 1, 1, 1, 1, 1), (3, 17, 9, 2, 5, 33), (1, 2, 1, 6, 3, 3)]:
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        g = rng.uniform(-1.3, 1.3, (N, P, Q, 2)).astype(np.float32)  # also beyond the border
        np.testing.assert_allclose(k(x, g), _grid_sample(x, g), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("src", [
    # a few operations along the vector loop: loaded and computed in place
    "def f(float(N,C,J) x, float(N,J) w) -> (y) { y(n, c, j) = x(n, c, j) * (w(n, j) * 2.0 + 1.0) }",
    # arithmetic that the vector loop j leaves unchanged: hoisted out of it (codegen/invariant.py)
    "def f(float(N,C,J) x, float(N,C) s) -> (y) { y(n, c, j) = x(n, c, j) * fmin(fmax(s(n, c) * 2.0 + 1.0, 0.0), 6.0) }",
])
def test_cheap_or_row_invariant_arithmetic_stays(src):
    s = tcdsl.compile(src, options={"disk_cache": False}).script
    assert "_tab" not in s, s


def test_grid_sample_tables_stay_inside_their_tensors():
    # guard pages after and before every input and output (tests/guard.py)
    cases = [{"id": f"grid-sample:{i}", "source": GRID_SAMPLE, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"N": 2, "C": 3, "H": 5, "W": 7, "P": 4, "Q": 9},
                                        {"N": 1, "C": 17, "H": 1, "W": 2, "P": 3, "Q": 33}])]
    guard.assert_all_work(cases)


# A sum whose costly term is the same for every output column: an RNN-T joint
# network, tanh(enc + pred) computed once per (b, t, u, k), not once per v.
JOINT = """def joint(float(B,T,H) e, float(B,U,H) p, float(V,H) W, float(V) bias) -> (z) {
  z(b, t, u, v) +=! tanh(e(b, t, k) + p(b, u, k)) * W(v, k)
  z(b, t, u, v) = z(b, t, u, v) + bias(v)
}"""
# The costly term under a select on an index it does not use: a table over
# (b, i) would read x(b, i) for every i of the sum, past x's end where L2 > L,
# which the program reads only where o + i < L.  It is not kept.
GUARDED = """def f(float(B,L) x, float(O,L2) w) -> (y) {
  y(b, o) +=! (o + i < L ? exp(x(b, i)) : 0.0) * w(o, i) where i in 0:L2
}"""


def _joint(e, p, W, bias):
    e, p, W = (a.astype(np.float64) for a in (e, p, W))
    return np.tanh(e[:, :, None, :] + p[:, None, :, :]) @ W.T + bias


def test_a_sums_costly_term_is_a_table_over_its_own_indices():
    s = tcdsl.compile(JOINT, options={"disk_cache": False}).script
    # the table over (b, t, u, k) in the order of z's indices then the reduction's
    assert "z_tab = T.alloc_buffer((B, T_1, U, H)" in s, s
    # tanh (a polynomial with exp: T.reinterpret) only where the table is written
    assert all("z_tab[" in line.split(" = ")[0] for line in s.splitlines() if "T.reinterpret(" in line), s
    # and the product reads it in register tiles
    assert re.search(r"acc\[[^\n]*\] = acc\[[^\n]*\] \+ z_tab", s), s


def test_a_table_that_would_read_more_than_the_program_is_not_kept():
    assert "y_tab" not in tcdsl.compile(GUARDED, options={"disk_cache": False}).script


def test_a_sums_term_without_its_rows_index_is_computed_once_per_column():
    # exp(w(t)) once per t, not once per (b, t)
    s = tcdsl.compile("def f(float(B,T) x, float(T) w) -> (y) { y(b) +=! x(b, t) * exp(w(t)) }",
                      options={"disk_cache": False}).script
    assert "y_tab = T.alloc_buffer((T_1,)" in s, s


def test_a_sums_costly_term_stays_without_factor():
    s = tcdsl.compile(JOINT, options={"disk_cache": False, "factor": False}).script
    assert "z_tab" not in s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_sum_tables_match_numpy(mode):
    rng = np.random.default_rng(5)
    k = tcdsl.compile(JOINT, specialize=mode, options={"disk_cache": False})
    for B, T, U, H, V in [(2, 3, 5, 7, 9), (1, 1, 1, 1, 1), (3, 17, 2, 33, 20)]:
        e, p = rand(rng, B, T, H), rand(rng, B, U, H)
        W, bias = rand(rng, V, H), rand(rng, 1, V)[0]
        np.testing.assert_allclose(k(e, p, W, bias), _joint(e, p, W, bias), rtol=1e-5, atol=1e-5)
    g = tcdsl.compile(GUARDED, specialize=mode, options={"disk_cache": False})
    for B, L, O, L2 in [(2, 5, 3, 8), (1, 1, 1, 1), (3, 7, 4, 7), (2, 6, 2, 3)]:
        x, w = rand(rng, B, L), rand(rng, O, L2)
        xe = np.zeros((B, L2))
        n = min(L, L2)
        xe[:, :n] = np.exp(x[:, :n].astype(np.float64))
        o, i = np.arange(O)[:, None], np.arange(L2)[None]
        want = np.einsum("bi,oi->bo", xe, np.where(o + i < L, w, 0).astype(np.float64))
        np.testing.assert_allclose(g(x, w), want, rtol=1e-5, atol=1e-5)


def test_sum_tables_stay_inside_their_tensors():
    cases = [{"id": f"joint:{i}", "source": JOINT, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"B": 2, "T": 3, "U": 5, "H": 7, "V": 9},
                                        {"B": 1, "T": 17, "U": 1, "H": 33, "V": 2}])]
    cases += [{"id": f"guarded:{i}", "source": GUARDED, "sizes": sizes, "seed": i}
              for i, sizes in enumerate([{"B": 2, "L": 5, "O": 3, "L2": 8}, {"B": 2, "L": 6, "O": 2, "L2": 3}])]
    guard.assert_all_work(cases)


# An FFN's second product with its ReLU inside: fmax once per (b, t, u) in a
# table, not once per term for every output column c again.
FFN = """def ffn(float(B,T,C) x, float(F,C) W1, float(C,F) W2) -> (out) {
  f(b, t, u) +=! x(b, t, c) * W1(u, c)
  out(b, t, c) = x(b, t, c)
  out(b, t, c) += fmax(f(b, t, u), 0) * W2(c, u)
}"""
# A clamp of a window x(b, c, t + k): its table would hold each element once per k
WINDOW = """def f(float(B,C,L) x, float(O,C,K) w) -> (y) {
  y(b, o, t) +=! fmin(x(b, c, t + k), 6.0) * w(o, c, k) where t in 0:L - K + 1
}"""


@pytest.mark.slow
def test_a_sums_clamp_of_one_element_is_a_table():
    s = tcdsl.compile(FFN, options={"disk_cache": False}).script
    assert "out_tab = T.alloc_buffer((B, T_1, F)" in s, s
    assert re.search(r"acc\[[^\n]*\] = acc\[[^\n]*\] \+ out_tab", s), s
    assert "y_tab" not in tcdsl.compile(WINDOW, options={"disk_cache": False}).script
    assert "out_tab" not in tcdsl.compile(FFN, options={"disk_cache": False, "factor": False}).script


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_clamp_tables_match_numpy(mode):
    rng = np.random.default_rng(6)
    k = tcdsl.compile(FFN, specialize=mode, options={"disk_cache": False})
    for B, T, C, F in [(1, 1, 1, 1), (2, 3, 5, 7), (3, 5, 17, 33)]:
        x, W1, W2 = rand(rng, B, T, C), rand(rng, F, C), rand(rng, C, F)
        f = np.maximum(x.astype(np.float64) @ W1.T, 0)
        np.testing.assert_allclose(k(x, W1, W2), x + f @ W2.T, rtol=1e-5, atol=1e-5)
    cases = [{"id": f"ffn:{i}", "source": FFN, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"B": 2, "T": 3, "C": 5, "F": 7}, {"B": 1, "T": 1, "C": 1, "F": 1}])]
    if mode == "never":
        guard.assert_all_work(cases)


# Two Runge-Kutta stages of an MLP vector field inside a loop: the stage's
# tanh skips the output column d, its argument (cur + 0.05 * k1) skips the
# output column f; each is a table made at every step.
RK = """def rk(double(B,D) start, double(D,F) W1, double(F,D) W2) -> (y) {
  for s in S {
    if s == 0 { cur(b, d) = start(b, d) } else { cur(b, d) = y(s - 1, b, d) }
    a1(b, f) +=! cur(b, d) * W1(d, f)
    k1(b, d) +=! tanh(a1(b, f)) * W2(f, d)
    a2(b, f) +=! (cur(b, d) + 0.05 * k1(b, d)) * W1(d, f)
    k2(b, d) +=! tanh(a2(b, f)) * W2(f, d)
    y(s, b, d) = cur(b, d) + 0.1 * (k1(b, d) + k2(b, d))
  }
}"""


def _rk(start, W1, W2, S):
    y, out = start, []
    for _ in range(S):
        k1 = np.tanh(y @ W1) @ W2
        k2 = np.tanh((y + 0.05 * k1) @ W1) @ W2
        y = y + 0.1 * (k1 + k2)
        out.append(y)
    return np.stack(out)


def test_a_sums_terms_in_a_loop_are_tables_made_at_each_step():
    s = tcdsl.compile(RK, options={"disk_cache": False}).script
    step = s[s.index("for s in"):]
    for table in ("k1_tab", "a2_tab", "k2_tab"):
        assert f"{table}[" in step, (table, s)
    # the sums are products of two reads, in register tiles
    assert len(re.findall(r"acc\[[^\n]*\] = acc\[[^\n]*\] \+ [a-z0-9_]*_tab\[", s)) >= 3, s
    assert "_tab" not in tcdsl.compile(RK, options={"disk_cache": False, "factor": False}).script


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_tables_in_a_loop_match_numpy(mode):
    rng = np.random.default_rng(7)
    k = tcdsl.compile(RK, specialize=mode, options={"disk_cache": False})
    for B, D, F, S in [(1, 1, 1, 1), (2, 3, 5, 4), (3, 17, 33, 6)]:
        start, W1, W2 = rng.standard_normal((B, D)), rng.standard_normal((D, F)) / 3, rng.standard_normal((F, D)) / 3
        np.testing.assert_allclose(k(start, W1, W2, S=S), _rk(start, W1, W2, S), rtol=1e-12, atol=1e-12)


def test_an_element_wise_step_keeps_its_terms():
    """A costly term of an element-wise statement in a loop stays: the step's
    statements then run the loop inside each element."""
    src = """def f(float(T,B,C) k, float(C) w) -> (n) {
      for t in T {
        if t == 0 { n(t, b, c) = k(t, b, c) } else { n(t, b, c) = exp(-w(c)) * n(t - 1, b, c) + k(t, b, c) }
      }
    }"""
    assert "_tab" not in tcdsl.compile(src, options={"disk_cache": False}).script


def test_a_sums_combined_reads_at_shifted_indices_stay():
    """``x(b, c, t + k) - m(b, c)`` would be a table of each window, K times
    the input: left in the sum."""
    src = """def f(float(B,C,L) x, float(B,C) m, float(O,C,K) w) -> (y) {
      y(b, o, t) +=! (x(b, c, t + k) - m(b, c)) * w(o, c, k) where t in 0:L - K + 1
    }"""
    assert "y_tab" not in tcdsl.compile(src, options={"disk_cache": False}).script


def test_a_sum_that_is_a_product_of_two_reads_is_not_a_table():
    """The whole right side of a sum repeated along a written index (a
    statement moved out of a loop gets the loop's index, polyhedral/hoist.py)
    is the sum itself: no table of it."""
    src = """def f(float(B,K) x, float(K,J) W) -> (y) {
      y(l, b, j) +=! x(b, k) * W(k, j) where l in 0:3
    }"""
    assert "y_tab" not in tcdsl.compile(src, options={"disk_cache": False}).script


def test_arithmetic_under_a_select_of_a_sum_stays():
    """A scatter written as a select over the rows, ``dst(e) == v ? x(src(e),
    d) * w(e) : 0``, adds each term to one row only (polyhedral/scatter.py):
    a table of the product would be computed for every (d, e) and kept the
    sum from being a scatter (10 -> 151 ms at (16384, 128, 131072))."""
    src = """def gcn(float(N,D) x, int64(E) src, int64(E) dst, float(E) w) -> (out) {
      out(v, d) +=! (dst(e) == v ? x(src(e), d) * w(e) : 0) where v in 0:N
    }"""
    k = tcdsl.compile(src, options={"disk_cache": False})
    assert "out_tab" not in k.script
    rng = np.random.default_rng(8)
    N, D, E = 7, 5, 30
    x, w = rand(rng, N, D), rand(rng, 1, E)[0]
    s, d = rng.integers(0, N, E), rng.integers(0, N, E)
    want = np.zeros((N, D))
    np.add.at(want, d, x[s].astype(np.float64) * w[:, None])
    np.testing.assert_allclose(k(x, s, d, w), want, rtol=1e-5, atol=1e-5)


COV = """def cov(float(N,D) X) -> (C) {
  m(i) +=! X(n, i) / N
  C(i, j) +=! (X(n, i) - m(i)) * (X(n, j) - m(j)) / (N - 1)
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_the_same_term_at_two_indices_is_one_table_laid_out_as_read(mode):
    """A centered covariance's two factors are the same term at ``i`` and at
    ``j``: one table, read at both.  It is laid out as ``X`` is, ``(n, i)``:
    the product's columns ``j`` are then next to each other.  (factor.py
    rebuilds the product with the span of its last factor, so the product
    and that factor share a span: only the factor is the table.)"""
    k = tcdsl.compile(COV, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        assert re.findall(r"C_tab\w* = T.alloc_buffer\(\(([^)]*)\), align", k.script) == ["N, D"], k.script
    rng = np.random.default_rng(9)
    for N, D in [(2, 1), (5, 3), (40, 37)]:
        x = rand(rng, N, D)
        np.testing.assert_allclose(k(x), np.cov(x.astype(np.float64).T).reshape(D, D), rtol=1e-4, atol=1e-5)


ROPE = """def rope(float(B,T,2*P) q, float(T,P) cs, float(T,P) sn) -> (y) {
  y(b, t, d) = q(b, t, d) * cs(t, d / 2)
             + (d % 2 == 0 ? -q(b, t, d + 1) : q(b, t, d - 1)) * sn(t, d / 2) where d in 0:2*P
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_a_read_at_half_the_vector_index_is_a_table_of_the_indices_it_uses(mode):
    """An interleaved rotary embedding reads ``cs(t, d / 2)``: along the
    vector loop over ``d`` each element twice, a gather.  As tables over ``(t,
    d)`` (each element repeated, read by every ``b``) the statement reads
    them as vectors."""
    k = tcdsl.compile(ROPE, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        assert len(re.findall(r"y_tab\w* = T.alloc_buffer\(\(T_1, T.max\(2 \* P, 0\)\), align", k.script)) == 2, k.script
    rng = np.random.default_rng(13)
    for B, T, P in [(1, 1, 1), (2, 3, 8), (3, 5, 35)]:
        q, cs, sn = rand(rng, B, T, 2 * P), rand(rng, T, P), rand(rng, T, P)
        q64, c, s = q.astype(np.float64), np.repeat(cs, 2, axis=1), np.repeat(sn, 2, axis=1)
        other = np.empty_like(q64)
        other[..., 0::2], other[..., 1::2] = -q64[..., 1::2], q64[..., 0::2]
        np.testing.assert_allclose(k(q, cs, sn), q64 * c + other * s, rtol=1e-5, atol=1e-5)


def test_a_term_that_narrows_its_statement_gets_no_table():
    """``tanh(i > 0 ? X(i - 1, 0, 0) : 0.5)`` narrows ``i`` to [1, N) (a read
    under a select constrains its variables): a table of it, read at plain
    indices, ran the statement at i = 0 too (found by test_fuzz)."""
    from tcdsl.testing import evaluate

    src = """def f(float(N, N, N) X) -> (O) {
  O(l, j, i) = X(i, j, l) + tanh(i > 0 ? X(i - 1, 0, 0) : 0.5)
  O(l, j, i) = O(l, j, i) * 0.5 + X(i, j, l)
}"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tcdsl.compile(src)
        for N in (1, 2, 3):
            x = np.random.default_rng(N).standard_normal((N, N, N)).astype(np.float32)
            np.testing.assert_allclose(k(x), evaluate(src, [x]), rtol=1e-5, atol=1e-6)


# a covariance over each sequence's first len(b) steps: the mask tests variables the centred
# terms have, so each term is a table over (b, t, d) and the sum a Gram matrix of the table;
# its reduction loop ends at len(b) (codegen/slots.py), where the test always holds and is dropped
MASKED_COV = """def mcov(float(B,T,D) x, int32(B) len) -> (cov) {
  mu(b, d) +=! t < len(b) ? x(b, t, d) : 0
  mu(b, d) = mu(b, d) / float(len(b))
  cov(b, i, j) +=! t < len(b) ? (x(b, t, i) - mu(b, i)) * (x(b, t, j) - mu(b, j)) : 0
}"""


def test_a_masked_sum_of_centred_products_is_a_gram_matrix_of_a_table():
    s = tcdsl.compile(MASKED_COV, options={"disk_cache": False}).script
    assert "cov_tab = T.alloc_buffer((B, T_1, D)" in s, s
    products = [line for line in s.splitlines() if re.search(r"acc\[[^\n]*\] = acc\[[^\n]*\] \+ cov_tab", line)]
    assert products and not any("if_then_else" in line for line in products), products


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_masked_covariance_matches_numpy(mode):
    k = tcdsl.compile(MASKED_COV, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(21)
    for B, T, D, lens in [(1, 1, 1, [1]), (3, 7, 5, [7, 1, 4]), (4, 300, 20, [300, 129, 128, 2]), (2, 140, 67, [3, 140])]:
        x = rand(rng, B, T, D)
        want = np.zeros((B, D, D))
        for b, n in enumerate(lens):
            xc = x[b, :n].astype(np.float64) - x[b, :n].astype(np.float64).mean(0)
            want[b] = xc.T @ xc
        np.testing.assert_allclose(k(x, np.array(lens, np.int32)), want, rtol=1e-4, atol=1e-3)


def test_masked_covariance_stays_inside_its_tensors():
    rng = np.random.default_rng(5)
    cases = [{"id": f"masked-cov:{i}", "source": MASKED_COV, "sizes": {"B": B, "T": T, "D": D},
              "inputs": [{"dtype": "float32", "shape": [B, T, D], "data": rng.standard_normal(B * T * D).tolist()},
                         {"dtype": "int32", "shape": [B], "data": lens}]}
             for i, (B, T, D, lens) in enumerate([(2, 5, 3, [5, 2]), (1, 3, 17, [3]), (2, 130, 4, [130, 129])])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


PHASE = """def phase(float(B,J) ts, float(J) tau) -> (k) {
  k(b, j) = phi < 0.5 ? 2 * phi : (phi < 0.8 ? 2 - 2 * phi : 0.001 * phi)
    where phi = fmod(ts(b, j), tau(j)) / tau(j)
}"""


def test_a_binding_with_a_scalar_libm_call_used_several_times_is_one_table():
    """fmod has no vector form (a libm call per lane): the binding, used five
    times, is a table over every index of the statement, one call per
    element (a phased LSTM's gate), not five."""
    k = tcdsl.compile(PHASE, options={"disk_cache": False})
    plain = tcdsl.compile(PHASE, options={"disk_cache": False, "factor": False})
    assert "k_tab" in k.script and plain.script.count("fmodf") >= 5 * 2, plain.script
    assert k.script.count("fmodf") < plain.script.count("fmodf"), k.script
    rng = np.random.default_rng(9)
    for B, J in [(1, 1), (3, 17), (20, 40)]:
        ts, tau = rng.random((B, J)).astype(np.float32) * 100, rng.random(J).astype(np.float32) * 19 + 1
        phi = np.fmod(ts.astype(np.float64), tau) / tau
        want = np.where(phi < 0.5, 2 * phi, np.where(phi < 0.8, 2 - 2 * phi, 0.001 * phi))
        np.testing.assert_allclose(k(ts, tau), want, rtol=1e-5, atol=1e-6)


def test_a_divisor_over_a_renamed_variable_stays_a_division():
    """A sum whose variable has the name of an earlier loop's (``t``, renamed
    ``t_1`` by the checker) divided by a term the table plan picked: where
    no table is made the division stays (it was a product by the divisor)."""
    src = """def f(float(S,S) A, float(B,T) x) -> (xi) {
      for t in T { c(t, b) = x(b, t) }
      xi(r, s) +=! A(r, s) / c(t, b)
    }"""
    rng = np.random.default_rng(5)
    for mode in ("never", "after-scheduling"):
        k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
        for S, B, T in [(3, 4, 5), (1, 1, 1), (7, 2, 9)]:
            A, x = rand(rng, S, S), (rng.random((B, T)) + 0.5).astype(np.float32)
            want = A.astype(np.float64) * (1.0 / x.astype(np.float64)).sum()
            np.testing.assert_allclose(k(A, x), want, rtol=1e-5, atol=1e-5)


# a rotary table over ``d`` in ``0:C / NH`` (a derived size) read at ``d % (C / NH / 2)``,
# and an unrelated SwiGLU down projection with its ``sigmoid`` inside the sum
ROPE_AND_SWIGLU = """def f(float(B,T,C) x, int32(B,T) pid, float(F,C) Wg, float(C,F) Wd) -> (y) {
  cs(b, t, d) = cos(float(pid(b, t)) * pow(10000.0, -2.0 * float(d % (C / NH / 2)) / float(C / NH))) where d in 0:C / NH
  gt(b, t, f) +=! x(b, t, c) * Wg(f, c)
  y(b, t, c) +=! cs(b, t, 0) * gt(b, t, f) * sigmoid(gt(b, t, f)) * Wd(c, f)
}"""


def test_tables_whose_ranges_name_derived_sizes_are_kept():
    """The table's range named the derived size ``C_div_NH``, a size of its own
    in the rewritten program, unrelated to ``C / NH``: its read looked
    unproved, and every table of the program was dropped (a Qwen2 block with
    the SwiGLU's ``sigmoid`` in the down sum: 23x PyTorch, 1.0x with them).
    The derived sizes are their expressions now, and isl knows how they
    relate (``C_div_NH_2 = floor(C_div_NH / 2)``)."""
    from tcdsl import driver
    names = [s.comp.tensor for s in driver.frontend(ROPE_AND_SWIGLU).ranges.stmts]
    assert "cs_tab" in names and "y_tab" in names, names
    k = tcdsl.compile(ROPE_AND_SWIGLU, options={"disk_cache": False})
    rng = np.random.default_rng(17)
    for B, T, C, NH, F in ((1, 1, 2, 1, 1), (2, 3, 8, 2, 5), (1, 4, 12, 3, 7)):
        x, Wg, Wd = rand(rng, B, T, C), rand(rng, F, C), rand(rng, C, F)
        pid = rng.integers(0, 50, (B, T)).astype(np.int32)
        g = np.einsum("btc,fc->btf", x.astype(np.float64), Wg)
        cs0 = np.cos(pid.astype(np.float64))  # d = 0: the power is 1
        want = cs0[..., None] * np.einsum("btf,cf->btc", g / (1 + np.exp(-g)), Wd)
        np.testing.assert_allclose(k(x, pid, Wg, Wd, NH=NH), want, rtol=1e-4, atol=1e-4)


def test_a_costly_term_with_a_scalar_input_is_a_table():
    # a temperature given as a scalar input (MoCo's InfoNCE gradient): the
    # term was planned but never substituted (the scalar printed as tau() in
    # one program and tau in the other), so exp ran once per (n, j, d)
    src = "def f(float(N,Q) neg, float(Q,D) queue, float(N) mx, float tau) -> (dq) {\n" \
          "  dq(n, d) +=! exp(neg(n, j) / tau - mx(n)) * queue(j, d)\n}"
    k = tcdsl.compile(src, options={"disk_cache": False})
    assert "dq_tab = T.alloc_buffer((N, Q)" in k.script, k.script
    assert all("dq_tab[" in line.split(" = ")[0] for line in k.script.splitlines() if "T.reinterpret(" in line)
    rng = np.random.default_rng(0)
    neg, queue, mx = rand(rng, 5, 7), rand(rng, 7, 3), rand(rng, 5)
    tau = np.array(0.5, "float32")
    ref = np.exp(neg.astype(np.float64) / 0.5 - mx[:, None]) @ queue
    np.testing.assert_allclose(k(neg, queue, mx, tau), ref, rtol=1e-5)


DFT = """def stft_pow(float(B,L) x, float(N) win) -> (P) {
  re(b, t, f) +=! x(b, 160 * t + n) * win(n) * cos(6.2831853 * ((f * n) % N) / N) where f in 0:N/2+1
  im(b, t, f) +=! x(b, 160 * t + n) * win(n) * sin(6.2831853 * ((f * n) % N) / N) where f in 0:N/2+1
  P(b, t, f) = re(b, t, f) * re(b, t, f) + im(b, t, f) * im(b, t, f)
}"""


def test_a_sums_costly_term_of_indices_alone_is_a_table_in_the_sums_ranges():
    # a DFT's basis, cos(2 pi (f n mod N) / N), computed per (b, t, f, n): 167 ms
    # against 1.5 ms for torch's framed matmul; a table over (f, n) (the range of
    # n inferred from win(n)), 2.8 ms one thread at (8, 16000, 400) on the Intel Xeon
    k = tcdsl.compile(DFT, options={"disk_cache": False})
    # (n, f): read along f, the vector loop, as the right side of a product
    assert len(re.findall(r"_tab = T.alloc_buffer\(\(N, T.max\(N // 2 \+ 1, 0\)\)", k.script)) == 2, k.script
    assert all("_tab[" in line.split(" = ")[0] for line in k.script.splitlines() if "T.cos(" in line or "T.sin(" in line)
    rng = np.random.default_rng(3)
    for B, L, N in ((2, 700, 9), (1, 400, 400), (3, 165, 6)):
        x, win = rng.standard_normal((B, L)), rng.random(N)
        frames = np.lib.stride_tricks.sliding_window_view(x, N, axis=1)[:, ::160] * win
        ref = np.abs(np.fft.rfft(frames, axis=-1)) ** 2
        got = k(x.astype("float32"), win.astype("float32"))
        np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())
