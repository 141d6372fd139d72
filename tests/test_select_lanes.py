"""A select ``c ? a : b`` whose condition differs between the lanes of a
vector loop is a TIR ``Select`` (both sides computed, codegen/expr.py rule
3): TVM turns an ``if_then_else`` with a vector condition into one scalar
branch per lane (a masked update ran 10x slower).  Where a side reads a
guarded read -- in its tensor only where the condition holds -- the select
stays an ``if_then_else``.  Results against NumPy, with NaN and infinity in
the side not taken; guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

OPTS = {"disk_cache": False}

LEAKY = """def f(float(N,M) x, float(N,M) w) -> (y) {
  y(i, j) = x(i, j) > 0 ? w(i, j) : 0.1 * x(i, j)
}"""
# a select between two weight tables inside a sum (Bernoulli naive Bayes)
BERNOULLI = """def f(float(N,F) X, float(C,F) logp, float(C,F) log1mp, float thr) -> (jll) {
  jll(n, c) +=! X(n, f) > thr ? logp(c, f) : log1mp(c, f)
}"""
# a masked recurrent update: the mask chooses between the new and the old state
MASKED = """def f(float(T,B,H) x, float(T,B) m, float(H,H) U) -> (h) {
  for t in T {
    u(b, j) +=! (t > 0 ? h(t - 1, b, k) : 0) * U(k, j)
    h(t, b, j) = m(t, b) > 0 ? tanh(x(t, b, j) + u(b, j)) : (t > 0 ? h(t - 1, b, j) : 0)
  }
}"""
# a shift read from data: the index is clamped into x, and the select's condition would tell TVM's
# simplifier the clamp is redundant in the side it guards (a Select computes that side in every lane)
DELAYED = """def f(float(B,T) x, int32(L) d) -> (y) {
  y(l, b, t) = t - d(l) >= 0 ? x(b, t - d(l)) : 0 where t in 0:T
}"""
# the shifted read is inside its tensor only where t > 0: no split, a guarded read
SHIFTED = """def f(float(N,M) x) -> (y) {
  y(i, j) = j > 0 ? x(i, j - 1) : x(i, j) where j in 0:M
}"""


def _vector_lines(script: str) -> list[str]:
    lines = script.splitlines()
    out = []
    for k, line in enumerate(lines):
        if "T.vectorized" in line:
            indent = len(line) - len(line.lstrip())
            for nxt in lines[k + 1:]:
                if len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                out.append(nxt)
    return out


def test_a_lane_dependent_select_is_a_vector_select():
    body = _vector_lines(tcdsl.compile(LEAKY, options=OPTS).script)
    assert any("T.Select(" in line for line in body) and not any("if_then_else" in line for line in body), body


def test_a_read_at_a_clamped_index_is_a_vector_select_that_keeps_its_clamp():
    """The side's read is clamped through a conversion TVM's simplifier does
    not see through (codegen/expr.py rule 3): the select's condition cannot
    make the clamp redundant, and the select is computed in every lane."""
    script = tcdsl.compile(DELAYED, options=OPTS).script
    body = _vector_lines(script)
    stores = [line for line in body if re.match(r"\s*y(_rows)?\[", line)]
    assert stores and all("T.Select(" in line for line in stores), stores
    # a lane's condition is never an if_then_else's (only the tensor's nonemptiness is)
    nonempty = 'if_then_else(T.reinterpret("int32", T.reinterpret("float32", T_1)) > 0,'
    assert all(line.count("if_then_else(") == line.count(nonempty) for line in stores), stores
    # where the vector's reads may leave x, they are clamped into it
    assert any("T.max(T.min(" in line for line in stores), stores
    k = tcdsl.compile(DELAYED, options=OPTS)
    rng = np.random.default_rng(2)
    x = rand(rng, 3, 20)
    d = np.array([0, 5, 19, 20, 40, -3], np.int32)
    want = np.zeros((6, 3, 20), np.float32)
    for l, dl in enumerate(d):
        for t in range(20):
            if t - dl >= 0:
                want[l, :, t] = x[:, min(t - dl, 19)]  # (a read past the end is clamped into x)
    np.testing.assert_array_equal(k(x, d), want)


def test_a_guarded_read_keeps_its_if_then_else():
    script = tcdsl.compile(SHIFTED, options={**OPTS, "split_selects": False}).script
    stores = [line for line in script.splitlines() if re.match(r"\s*y(_rows)?\[", line)]
    assert stores and all("T.if_then_else(" in line and "T.Select(" not in line for line in stores), stores


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_selects_match_numpy(mode):
    rng = np.random.default_rng(11)
    leaky = tcdsl.compile(LEAKY, specialize=mode, options=OPTS)
    for N, M in [(1, 1), (3, 17), (5, 33), (2, 100)]:
        x, w = rand(rng, N, M), rand(rng, N, M)
        w[x <= 0] = np.nan  # the side not taken
        x[0, 0] = -np.inf
        want = np.where(x > 0, w, np.float32(0.1) * x)
        np.testing.assert_array_equal(leaky(x, w), want)
    bern = tcdsl.compile(BERNOULLI, specialize=mode, options=OPTS)
    for N, F, C in [(1, 1, 1), (7, 33, 10), (9, 16, 17), (13, 5, 3)]:
        X, lp, l1 = rand(rng, N, F), rand(rng, C, F), rand(rng, C, F)
        thr = np.float32(0.2)
        sel = (X > thr).astype(np.float64)
        want = sel @ lp.T.astype(np.float64) + (1 - sel) @ l1.T.astype(np.float64)
        np.testing.assert_allclose(bern(X, lp, l1, thr), want, rtol=1e-5, atol=1e-5)
    masked = tcdsl.compile(MASKED, specialize=mode, options=OPTS)
    for T, B, H in [(1, 1, 1), (4, 3, 17), (3, 2, 40)]:
        x, U = rand(rng, T, B, H), rand(rng, H, H) * 0.3
        m = (rng.random((T, B)) > 0.4).astype(np.float32)
        h = np.zeros((T, B, H))
        prev = np.zeros((B, H))
        for t in range(T):
            new = np.tanh(x[t].astype(np.float64) + prev @ U.astype(np.float64))
            h[t] = np.where(m[t][:, None] > 0, new, prev)
            prev = h[t]
        np.testing.assert_allclose(masked(x, m, U), h, rtol=1e-5, atol=1e-5)
    shifted = tcdsl.compile(SHIFTED, specialize=mode, options={**OPTS, "split_selects": False})
    for N, M in [(1, 1), (2, 19), (3, 40)]:
        x = rand(rng, N, M)
        want = np.concatenate([x[:, :1], x[:, :-1]], axis=1)
        np.testing.assert_array_equal(shifted(x), want)


def test_selects_stay_inside_their_tensors():
    cases = []
    for i, sizes in enumerate([{"N": 1, "M": 1}, {"N": 3, "M": 17}, {"N": 2, "M": 40}]):
        cases.append({"id": f"leaky:{i}", "source": LEAKY, "sizes": sizes, "seed": i, "options": OPTS})
        cases.append({"id": f"shifted:{i}", "source": SHIFTED, "sizes": sizes, "seed": i,
                      "options": {**OPTS, "split_selects": False}})
    for i, sizes in enumerate([{"N": 1, "F": 1, "C": 1}, {"N": 7, "F": 33, "C": 10}, {"N": 5, "F": 17, "C": 19}]):
        cases.append({"id": f"bernoulli:{i}", "source": BERNOULLI, "sizes": sizes, "seed": i, "options": OPTS})
    for i, sizes in enumerate([{"B": 1, "T": 1, "L": 1}, {"B": 3, "T": 20, "L": 6}, {"B": 2, "T": 33, "L": 2}]):
        cases.append({"id": f"delayed:{i}", "source": DELAYED, "sizes": sizes, "seed": i, "options": OPTS})
    for i, sizes in enumerate([{"T": 1, "B": 1, "H": 1}, {"T": 3, "B": 2, "H": 17}]):
        cases.append({"id": f"masked:{i}", "source": MASKED, "sizes": sizes, "seed": i, "options": OPTS})
    guard.assert_all_work(cases)


def test_a_select_between_two_tables_in_a_sum_is_a_dot_product():
    """Fewer columns than a vector, each a dot product along f in vector
    lanes, the select in every lane (codegen/cpu_dot.py): the reads of both
    sides are inside their tensors wherever the sum runs."""
    script = tcdsl.compile(BERNOULLI, options=OPTS).script
    dots = [line for line in script.splitlines() if "acc[r, v] = acc[r, v] +" in line]
    assert dots and all("T.Select(" in line and re.search(r"\* (8|16) \+ v\]", line) for line in dots), dots[:2]


def test_a_division_by_data_under_its_condition_does_not_trap():
    """``c(i) > 0 ? s(i) / c(i) : -1``: the divisor's guard against 0 would be
    redundant under the condition, so the select computes its side only
    where taken (an if_then_else); lanes with c = 0 give -1, no SIGFPE."""
    src = """def f(int32(N) s, int32(N) c) -> (y) {
      y(i) = c(i) > 0 ? s(i) / c(i) + s(i) % c(i) : -1
    }"""
    k = tcdsl.compile(src, options=OPTS)
    rng = np.random.default_rng(6)
    for N in (1, 17, 64):
        s = rng.integers(-50, 50, N).astype(np.int32)
        c = rng.integers(-2, 4, N).astype(np.int32)
        c[0] = 0
        want = np.where(c > 0, np.floor_divide(s, np.where(c > 0, c, 1)) + np.mod(s, np.where(c > 0, c, 1)), -1)
        np.testing.assert_array_equal(k(s, c), want.astype(np.int32))


# a bilinear sample at data-dependent positions, zeros outside the image (optical flow's backward warp)
WARP = """def f(float(B,C,H,W) img, float(B,2,H,W) flow) -> (out) {
  out(b, c, h, w) = (ty >= 0 && ty < H && tx >= 0 && tx < W ? img(b, c, ty, tx) : 0) * (1 - ax) * (1 - ay)
                  + (ty >= 0 && ty < H && tx + 1 >= 0 && tx + 1 < W ? img(b, c, ty, tx + 1) : 0) * ax * (1 - ay)
                  + (ty + 1 >= 0 && ty + 1 < H && tx >= 0 && tx < W ? img(b, c, ty + 1, tx) : 0) * (1 - ax) * ay
                  + (ty + 1 >= 0 && ty + 1 < H && tx + 1 >= 0 && tx + 1 < W ? img(b, c, ty + 1, tx + 1) : 0) * ax * ay
    where fx = float(w) + flow(b, 0, h, w), fy = float(h) + flow(b, 1, h, w),
          tx = int32(floor(fx)), ty = int32(floor(fy)), ax = fx - floor(fx), ay = fy - floor(fy)
}"""
# a lookup in a table of its own size, which may be empty
LOOKUP = """def f(int32(N) idx, float(M) tab) -> (y) {
  y(i) = idx(i) >= 0 && idx(i) < M ? tab(idx(i)) : -1
}"""


def test_gathers_under_selects_are_vector_selects():
    """Reads at data-dependent indices under a lane's condition: their
    clamps are hidden from TVM's simplifier (codegen/expr.py rule 3), so the
    selects are computed in every lane rather than lane by lane."""
    body = _vector_lines(tcdsl.compile(WARP, options=OPTS).script)
    stores = [line for line in body if re.match(r"\s*out\[", line)]
    assert stores and all(line.count("T.Select(") == 4 for line in stores), stores
    # the only if_then_else left tests the image's sizes, the same in every lane
    assert all(line.count("if_then_else(") == line.count('if_then_else(T.reinterpret("int32", T.reinterpret('
                                                          '"float32", H)) > 0 and') for line in stores), stores


def _warp(img, flow):
    B, C, H, W = img.shape
    fx = np.arange(W)[None, None, :] + flow[:, 0].astype(np.float64)
    fy = np.arange(H)[None, :, None] + flow[:, 1].astype(np.float64)
    x0, y0 = np.floor(fx).astype(int), np.floor(fy).astype(int)
    ax, ay = fx - x0, fy - y0
    out = np.zeros((B, C, H, W))
    for dy, dx, wt in [(0, 0, (1 - ax) * (1 - ay)), (0, 1, ax * (1 - ay)), (1, 0, (1 - ax) * ay), (1, 1, ax * ay)]:
        ys, xs = y0 + dy, x0 + dx
        ok = (ys >= 0) & (ys < H) & (xs >= 0) & (xs < W)
        for b in range(B):
            v = img[b][:, np.clip(ys[b], 0, H - 1), np.clip(xs[b], 0, W - 1)]
            out[b] += np.where(ok[b], v, 0) * wt[b]
    return out


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_gathers_under_selects_match_numpy(mode):
    rng = np.random.default_rng(5)
    warp = tcdsl.compile(WARP, specialize=mode, options=OPTS)
    for B, C, H, W in [(1, 1, 1, 1), (2, 3, 5, 17), (1, 2, 7, 40)]:
        img = rand(rng, B, C, H, W)
        flow = (4 * rng.standard_normal((B, 2, H, W))).astype(np.float32)
        flow[0, 0, 0, 0] = 1e9  # far outside: the read is clamped, the select gives 0
        np.testing.assert_allclose(warp(img, flow), _warp(img, flow), rtol=1e-4, atol=1e-4)
    lookup = tcdsl.compile(LOOKUP, specialize=mode, options=OPTS)
    for N, M in [(1, 1), (33, 5), (17, 0)]:
        idx = rng.integers(-3, M + 3, N).astype(np.int32)
        tab = rand(rng, M)
        want = np.where((idx >= 0) & (idx < M), tab[np.clip(idx, 0, max(M - 1, 0))] if M else 0, -1)
        np.testing.assert_array_equal(lookup(idx, tab), want.astype(np.float32))


def test_gathers_under_selects_stay_inside_their_tensors():
    cases = [{"id": f"warp:{i}", "source": WARP, "sizes": sizes, "seed": i, "options": OPTS}
             for i, sizes in enumerate([{"B": 1, "C": 1, "H": 1, "W": 1}, {"B": 2, "C": 3, "H": 5, "W": 19}])]
    cases += [{"id": f"lookup:{i}", "source": LOOKUP, "sizes": sizes, "seed": i, "options": OPTS}
              for i, sizes in enumerate([{"N": 17, "M": 0}, {"N": 33, "M": 1}, {"N": 40, "M": 7}])]
    guard.assert_all_work(cases)
