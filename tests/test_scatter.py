"""Sums into the rows an index names, run as a scatter-add on the CPU
(tcdsl/polyhedral/scatter.py, tcdsl/codegen/cpu_scatter.py): an embedding's
gradient written as a select over every row, a histogram, the adjoint that
tcdsl.gradient derives for an indirect read.  Results against NumPy (indices
out of the rows' range add nothing), in every specialize mode; the kernel
has no loop over the rows; statements of other forms are left as written."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import emit, frontend
from tcdsl.source import Source
from helpers import rand

EMB = """def demb(int32(N) idx, float(N,D) dy) -> (dE) {
  dE(v, d) +=! (idx(n) == v ? dy(n, d) : 0) where v in 0:V
}"""
NO_CACHE = {"disk_cache": False}


def _scatter_ref(rows, index, values):
    out = np.zeros((rows,) + values.shape[1:])
    for i, v in enumerate(index):
        if 0 <= v < rows:
            out[v] += values[i]
    return out


def _found(src: str) -> list:
    from tcdsl.polyhedral import scatter
    return [scatter.find(info) for info in frontend(Source(src)).ranges.stmts]


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_embedding_gradient_matches_numpy(mode):
    rng = np.random.default_rng(0)
    k = tcdsl.compile(EMB, specialize=mode, options=NO_CACHE)
    for N, D, V in [(7, 5, 4), (1, 1, 1), (300, 130, 17), (64, 200, 1000)]:
        idx = rng.integers(-2, V + 2, N).astype(np.int32)  # some outside 0:V
        dy = rand(rng, N, D)
        np.testing.assert_allclose(k(idx, dy, V=V), _scatter_ref(V, idx, dy), rtol=1e-5, atol=1e-5)


def test_the_kernel_has_no_loop_over_the_rows():
    scat = tcdsl.compile(EMB, options=NO_CACHE).script
    assert "v_row: T.let[T.int32] = idx[n]" in scat, scat
    assert "if 0 <= v_row and v_row < V" in scat, scat
    assert "T.if_then_else(idx[" not in scat  # no row tested against the index
    plain = tcdsl.compile(EMB, options={**NO_CACHE, "scatter": False}).script
    # (the select a tile's mask, tested once per row and step: codegen/tile_masks.py)
    assert "v_row" not in plain and re.search(r"T\.if_then_else\(idx\[|T\.Select\(idx\[|if idx\[", plain), plain


def test_forms_found():
    src = """def f(int32(N,L) ids, float(N,L,D) g, float(N) w) -> (a, h, c, e) {
      a(v, d) +=! (ids(n, l) == v && l > 0 ? 1.0 : 0.0) * g(n, l, d) where v in 0:V
      h(v) +=! (v == ids(n, 0) ? 1 : 0) where v in 0:V
      c(d, v) +=! w(n) * (ids(n, d) == v ? g(n, d, 0) : 0) where v in 0:V, d in 0:L
      e(v) max=! (ids(n, 0) == v ? w(n) : 0) where v in 0:V
    }"""
    a, h, c, e = _found(src)
    assert a is not None and a.var == "v" and a.stmt == "S0"
    assert h is not None and h.var == "v"
    assert c is not None and c.var == "v"
    assert e is None  # max: 0 is not its identity


@pytest.mark.parametrize("src", [
    # the index is affine: a diagonal, not a scatter
    "def f(float(N,D) x) -> (y) { y(v, d) +=! (v == n ? x(n, d) : 0) where v in 0:N }",
    # not zero where the index differs
    "def f(int32(N) idx, float(N,D) x) -> (y) { y(v, d) +=! (idx(n) == v ? x(n, d) : 1) where v in 0:V }",
    # an assignment, not a sum
    "def f(int32(N) idx, float(N) x) -> (y) { y(v, n) = (idx(n) == v ? x(n) : 0) where v in 0:V }",
])
def test_other_forms_left_as_written(src):
    assert _found(src) == [None]


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_histogram_index_per_column_and_accumulate(mode):
    src = """def f(int32(N,L) ids, float(N,L) g, float(V,L) base) -> (hist, per, acc) {
      hist(v) +=! (v == ids(n, 0) ? 1 : 0) where v in 0:V
      per(v, l) +=! (ids(n, l) == v && g(n, l) > 0 ? 2.0 : 0.0) * g(n, l) where v in 0:V
      acc(v, l) = base(v, l)
      acc(v, l) += (ids(n, l) == v ? g(n, l) : 0)
    }"""
    rng = np.random.default_rng(1)
    k = tcdsl.compile(src, specialize=mode, options=NO_CACHE)
    # (hist, with no other lhs variable, twice: in tasks with copies of their own, and the serial loop)
    assert k.script.count("_row: T.let[T.int32]") == 4, k.script
    for N, L, V in [(9, 3, 5), (200, 70, 33)]:
        ids = rng.integers(-1, V + 1, (N, L)).astype(np.int32)
        g, base = rand(rng, N, L), rand(rng, V, L)
        hist, per, acc = k(ids, g, base, V=V)
        np.testing.assert_array_equal(hist, _scatter_ref(V, ids[:, 0], np.ones(N)).astype(np.int32))
        want = np.stack([_scatter_ref(V, ids[:, j], 2.0 * (g[:, j] > 0) * g[:, j]) for j in range(L)], 1)
        np.testing.assert_allclose(per, want, rtol=1e-5, atol=1e-5)
        want = base + np.stack([_scatter_ref(V, ids[:, j], g[:, j]) for j in range(L)], 1)
        np.testing.assert_allclose(acc, want, rtol=1e-5, atol=1e-5)


def test_scatter_inside_a_loop():
    src = """def f(int32(T,B) tok, float(T,B,D) x) -> (s) {
      for t in T {
        if t == 0 { s(t, v, d) +=! (tok(t, b) == v ? x(t, b, d) : 0) where v in 0:V }
        else      { s(t, v, d) = s(t - 1, v, d) where v in 0:V
                    s(t, v, d) += (tok(t, b) == v ? x(t, b, d) : 0) where v in 0:V }
      }
    }"""
    rng = np.random.default_rng(2)
    k = tcdsl.compile(src, options=NO_CACHE)
    assert "_row: T.let[T.int32]" in k.script
    T, B, D, V = 5, 6, 19, 7
    tok, x = rng.integers(0, V, (T, B)).astype(np.int32), rand(rng, T, B, D)
    step = np.stack([_scatter_ref(V, tok[t], x[t]) for t in range(T)])
    np.testing.assert_allclose(k(tok, x, V=V), np.cumsum(step, 0), rtol=1e-5, atol=1e-5)


EMB_LOOP = """def demb(int32(N) idx, float(N,D) dy) -> (dE) {
  for n in N {
    dE(v, d) += idx(n) == v ? dy(n, d) : 0 where v in 0:V
  }
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_a_scatter_alone_in_a_loop_runs_its_steps_inside_one_parallel_loop(mode):
    """Token by token (the loop's body is the scatter alone): each task owns
    a chunk of columns for every step, so the loop runs inside the parallel
    chunk loop -- one parallel region per call, not one per token."""
    k = tcdsl.compile(EMB_LOOP, specialize=mode, options=NO_CACHE)
    if mode == "never":
        assert re.search(r"for d_chunk in T\.parallel\(.*\):\n\s+for n in range", k.script), k.script
        assert k.script.count("T.parallel") == 1, k.script
    rng = np.random.default_rng(4)
    for N, D, V in [(7, 5, 4), (1, 1, 1), (300, 130, 17), (9, 200, 3)]:
        idx = rng.integers(-2, V + 2, N).astype(np.int32)
        dy = rand(rng, N, D)
        np.testing.assert_allclose(k(idx, dy, V=V), _scatter_ref(V, idx, dy), rtol=1e-5, atol=1e-5)


def test_a_scatter_that_reads_its_tensor_keeps_a_parallel_loop_per_step():
    # dE(v, d + 1) of the step before: another task's column; the steps stay outside
    src = """def f(int32(N) idx, float(N,D) dy) -> (dE) {
      for n in N {
        dE(v, d) += idx(n) == v ? dy(n, d) * (d + 1 < D ? dE(v, d + 1) : 1) : 0 where v in 0:V
      }
    }"""
    k = tcdsl.compile(src, options=NO_CACHE)
    assert not re.search(r"T\.parallel\(.*\):\n\s+for n in range", k.script), k.script
    rng = np.random.default_rng(5)
    N, D, V = 6, 70, 3
    idx, dy = rng.integers(0, V, N).astype(np.int32), rand(rng, N, D)
    want = np.zeros((V, D))
    for i in range(N):
        row = want[idx[i]].copy()
        want[idx[i]] += dy[i] * np.append(row[1:], 1)
    np.testing.assert_allclose(k(idx, dy, V=V), want, rtol=1e-5, atol=1e-5)


def test_gradient_of_an_embedding_is_a_scatter():
    torch = pytest.importorskip("torch")
    src = """def emb(float(V,D) E, int32(N,L) ids, float(D,O) W) -> (y) {
      h(n, d) +=! E(ids(n, l), d) / L
      y(n, o) +=! h(n, d) * W(d, o)
    }"""
    back = tcdsl.compile(tcdsl.gradient(src), options=NO_CACHE)
    assert "_row: T.let[T.int32]" in back.script
    rng = np.random.default_rng(3)
    V, D, N, L, O = 50, 12, 9, 4, 5
    E, W = rand(rng, V, D), rand(rng, D, O)
    ids = rng.integers(0, V, (N, L)).astype(np.int32)
    y = tcdsl.compile(src, options=NO_CACHE)(E, ids, W)
    dy = rand(rng, N, O)
    dE, dW = back(E, ids, W, y, dy)
    tE, tW = torch.tensor(E, requires_grad=True), torch.tensor(W, requires_grad=True)
    (tE[torch.from_numpy(ids).long()].mean(1) @ tW).backward(torch.from_numpy(dy))
    np.testing.assert_allclose(dE, tE.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dW, tW.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_scatter_under_guard_pages():
    """Indices below and past the rows, the table's first and last rows:
    nothing written outside the output (tests/guard.py)."""
    import guard

    def inputs(idx, D):
        dy = np.arange(len(idx) * D, dtype=np.float32).reshape(len(idx), D) / 7
        return [{"dtype": "int32", "shape": [len(idx)], "data": list(idx)},
                {"dtype": "float32", "shape": [len(idx), D], "data": dy.ravel().tolist()}]
    settings = [{"sizes": {"V": V}, "inputs": inputs(idx, D)}
                for V, D, idx in [(4, 3, [-1, 0, 3, 4, 2, 3, -7, 9]), (1, 1, [0, 1, -1]), (5, 70, [4, 0, 5, -1])]]
    src_col = """def f(int32(N,L) ids, float(N,L) g) -> (h) {
      h(v, l) +=! (ids(n, l) == v ? g(n, l) : 0) where v in 0:V
    }"""
    cases = [{"id": "scatter:rows", "source": EMB, "settings": settings},
             {"id": "scatter:loop", "source": EMB_LOOP, "settings": settings},
             {"id": "scatter:columns", "source": src_col, "settings": [{"sizes": {"V": 3}, "inputs": [
                 {"dtype": "int32", "shape": [3, 2], "data": [-1, 0, 2, 3, 1, 1]},
                 {"dtype": "float32", "shape": [3, 2], "data": [1, 2, 3, 4, 5, 6]}]}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or records


# a matrix assembled from pairs of an element's vertices (P1 finite elements)
PAIRS = """def assemble(int32(E,3) tri, float(E,3,3) ke) -> (K) {
  K(p, q) +=! tri(e, a) == p && tri(e, c) == q ? ke(e, a, c) : 0.0 where p in 0:N, q in 0:N
}"""

# two picked indices and a column loop shared out to the threads
PAIRS_COLUMNS = """def pairs(int32(M) src, int32(M) dst, float(M,D) w) -> (A) {
  A(i, j, d) +=! src(m) == i && dst(m) == j ? w(m, d) : 0 where i in 0:N, j in 0:N
}"""


def _pairs_ref(N, tri, ke):
    K = np.zeros((N, N))
    for e in range(tri.shape[0]):
        for a in range(3):
            for c in range(3):
                p, q = tri[e, a], tri[e, c]
                if 0 <= p < N and 0 <= q < N:
                    K[p, q] += ke[e, a, c]
    return K


def test_a_second_index_is_picked_too():
    (sc,) = _found(PAIRS)
    assert sc is not None and {v for v, _ in sc.picks} == {"p", "q"}
    script = tcdsl.compile(PAIRS, options=NO_CACHE).script
    assert "p_row" in script and "q_row" in script, script
    assert "T.if_then_else(tri[" not in script  # no element tested against the indices


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_pairs_match_numpy(mode):
    rng = np.random.default_rng(5)
    k = tcdsl.compile(PAIRS, specialize=mode, options=NO_CACHE)
    for E, N in [(6, 5), (1, 1), (40, 23)]:
        tri = rng.integers(-1, N + 1, (E, 3)).astype(np.int32)  # some outside 0:N
        ke = rand(rng, E, 3, 3)
        np.testing.assert_allclose(k(tri, ke, N=N), _pairs_ref(N, tri, ke), rtol=1e-5, atol=1e-5)
    kc = tcdsl.compile(PAIRS_COLUMNS, specialize=mode, options=NO_CACHE)
    M, D, N = 50, 70, 6
    src, dst = (rng.integers(-1, N + 1, M).astype(np.int32) for _ in range(2))
    w = rand(rng, M, D)
    want = np.zeros((N, N, D))
    for m in range(M):
        if 0 <= src[m] < N and 0 <= dst[m] < N:
            want[src[m], dst[m]] += w[m]
    np.testing.assert_allclose(kc(src, dst, w, N=N), want, rtol=1e-5, atol=1e-5)


def test_pairs_under_guard_pages():
    """Vertex ids below and past the matrix: nothing written outside it."""
    import guard

    tri = [-1, 0, 3, 2, 3, 4, 0, 1, 2]
    ke = [float(x) for x in range(27)]
    cases = [{"id": "scatter:pairs", "source": PAIRS, "settings": [{"sizes": {"N": N}, "inputs": [
        {"dtype": "int32", "shape": [3, 3], "data": tri},
        {"dtype": "float32", "shape": [3, 3, 3], "data": ke}]} for N in (1, 4)]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or records


# sums of a matrix's columns grouped by label (a silhouette score's per-cluster
# distances): the big read, dist(i, j), is contiguous along the reduction
# variable j, not along the rows i that a vector over the lhs would cross
GROUPSUM = """def groupsum(float(N,N) dist, int32(N) lab) -> (sd) {
  sd(i, c) +=! lab(j) == c ? dist(i, j) : 0.0 where c in 0:C
}"""

# the same with an index read per row, a second lhs variable outside the
# reductions, and an accumulation onto a tensor already written
ROWS_MORE = """def f(float(B,M,K) x, int32(M,K) ids, float(M,V) base) -> (per, grp, acc) {
  per(i, v) +=! ids(i, k) == v ? x(0, i, k) : 0.0 where v in 0:V
  grp(b, i, v) +=! ids(0, k) == v ? x(b, i, k) * 2.0 : 0.0 where v in 0:V
  acc(i, v) = base(i, v)
  acc(i, v) += ids(0, k) == v ? x(0, i, k) : 0.0
}"""

GROUPSUM_LOOP = """def f(float(T,N,K) x, int32(T,K) lab) -> (sd) {
  for t in T {
    sd(i, c) += lab(t, j) == c ? x(t, i, j) : 0.0 where c in 0:C
  }
}"""


def _groups(C, lab, x):
    """out[..., c] = the sum of x[..., j] over the j with lab[j] == c."""
    return np.stack([x[..., lab == c].sum(-1) for c in range(C)], -1) if C else np.zeros(x.shape[:-1] + (0,))


def test_rows_outside_where_the_read_runs_along_the_reduction():
    """The rows are the parallel loop (blocks of 4), the sum over j inside
    them: dist is read along its rows, no vector over 64 values of i (a read
    down a column, a write at stride C).  Where the groups are no more than
    the terms of a row, the block's sums are an accumulator whose vector
    lanes are its 4 rows, one vector update per term; else 4 scalar updates
    (unrolled).  The embedding's gradient keeps its vectors along d,
    contiguous in dy and dE."""
    script = tcdsl.compile(GROUPSUM, options=NO_CACHE).script
    assert re.search(r"for i_block in T\.parallel\(.*\):\n\s+if i_block \* 4 \+ 4 <= .*:\n"
                     r"\s+if C - 1 \+ 1 <= T\.max\(N - 1 \+ 1, 0\):\n\s+sd_lanes = T\.alloc_buffer", script), script
    assert re.search(r"for j in range.*\n.*c_row: T\.let\[T\.int32\] = lab\[j\]\n.*\n"
                     r"\s+for i_lane in T\.vectorized\(4\):\n\s+sd_lanes\[c_row \* 4 \+ i_lane\] = "
                     r"sd_lanes\[c_row \* 4 \+ i_lane\] \+ dist\[i_block \* 4 \+ i_lane, j\]", script), script
    assert re.search(r"for i_in in T\.unroll\(4\):\n\s+sd\[i_block \* 4 \+ i_in, c_row\] = "
                     r"sd\[i_block \* 4 \+ i_in, c_row\] \+ dist\[i_block \* 4 \+ i_in, j\]", script), script
    assert "T.vectorized(64)" not in script and "i_chunk" not in script, script
    emb = tcdsl.compile(EMB, options=NO_CACHE).script
    assert re.search(r"for d_chunk in T\.parallel\(.*\):\n\s+for n in range", emb), emb
    # (16 to 64 columns per task, in vectors of 16)
    assert "for d_in in T.vectorized(16):\n" in emb and "dy[n, d_chunk * d_width + (d_o * 16 + d_in)]" in emb, emb
    assert "_lanes" not in emb and "d_block" not in emb, emb
    more = tcdsl.compile(ROWS_MORE, options=NO_CACHE).script
    assert re.search(r"for i_block in T\.parallel\(.*\):\n\s+if .*:\n\s+for k in range", more), more
    assert re.search(r"for b_block in T\.parallel\(.*\):\n\s+if .*:\n\s+for i, k in T\.grid", more), more
    assert more.count("T.alloc_buffer") == 1 and "acc_lanes" in more, more  # (per reads its index per row)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_rows_outside_match_numpy(mode):
    rng = np.random.default_rng(6)
    k = tcdsl.compile(GROUPSUM, specialize=mode, options=NO_CACHE)
    for N, C in [(1, 1), (7, 3), (13, 19), (67, 5), (5, 1)]:  # blocks of 4 and the rows left over
        lab = rng.integers(-1, C + 1, N).astype(np.int32)  # some outside 0:C
        dist = rand(rng, N, N)
        np.testing.assert_allclose(k(dist, lab, C=C), _groups(C, lab, dist), rtol=1e-5, atol=1e-5)
    k = tcdsl.compile(ROWS_MORE, specialize=mode, options=NO_CACHE)
    for B, M, K, V in [(1, 1, 1, 1), (3, 9, 11, 17), (5, 6, 3, 2)]:
        ids = rng.integers(-1, V + 1, (M, K)).astype(np.int32)
        x, base = rand(rng, B, M, K), rand(rng, M, V)
        per, grp, acc = k(x, ids, base, V=V)
        want = np.stack([_groups(V, ids[i], x[0, i]) for i in range(M)])
        np.testing.assert_allclose(per, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(grp, _groups(V, ids[0], 2 * x), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(acc, base + _groups(V, ids[0], x[0]), rtol=1e-5, atol=1e-5)
    k = tcdsl.compile(GROUPSUM_LOOP, specialize=mode, options=NO_CACHE)
    if mode == "never":  # the steps inside the blocks of rows: one parallel region
        assert k.script.count("T.parallel") == 1 and "for i_block in T.parallel" in k.script, k.script
        assert re.search(r"sd_lanes = T\.alloc_buffer.*\n(.*\n){3}\s+for t, j in T\.grid", k.script), k.script
    for T_, N, K, C in [(1, 1, 1, 1), (3, 7, 5, 18), (2, 9, 4, 3)]:
        lab = rng.integers(-1, C + 1, (T_, K)).astype(np.int32)
        x = rand(rng, T_, N, K)
        want = sum(_groups(C, lab[t], x[t]) for t in range(T_))
        np.testing.assert_allclose(k(x, lab, C=C), want, rtol=1e-5, atol=1e-5)


def test_rows_outside_under_guard_pages():
    """Labels below and past the groups, the last block of rows short:
    nothing read or written outside the tensors."""
    import guard

    def setting(N, C, lab):
        dist = (np.arange(N * N, dtype=np.float32) / 7).tolist()
        return {"sizes": {"C": C}, "inputs": [{"dtype": "float32", "shape": [N, N], "data": dist},
                                              {"dtype": "int32", "shape": [N], "data": lab}]}
    settings = [setting(1, 1, [0]), setting(1, 2, [2]), setting(5, 17, [-1, 16, 0, 17, 3]),
                setting(7, 3, [2, 0, -5, 1, 3, 2, 2])]
    cases = [{"id": "scatter:rows", "source": GROUPSUM, "settings": settings, "mode": mode}
             for mode in ("never", "before-scheduling")]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or records


# a segment max and min by destination (a graph attention's softmax by node, shortest paths):
# the reduction's identity where the index differs, -inf for max, inf for min
SEGMENT = """def seg(float(E) v, int32(E) dst) -> (mx, mn) {
  mx(n) max=! dst(e) == n ? v(e) : -inf where n in 0:N
  mn(n, k) min=! dst(e) == n ? v(e) * float(k + 1) : inf where n in 0:N, k in 0:3
}"""
# Bellman-Ford's relaxation: the read of the tensor written is at the step before
RELAX = """def bf(int32(E) src, int32(E) dst, float(E) w, int32(Q) source) -> (dist) {
  for t in S {
    if t == 0 {
      dist(t, q, n) = source(q) == n ? 0.0 : inf where n in 0:N
    } else {
      dist(t, q, n) min=! dst(e) == n ? dist(t - 1, q, src(e)) + w(e) : inf where n in 0:N
      dist(t, q, n) = fmin(dist(t, q, n), dist(t - 1, q, n))
    }
  }
}"""


def test_a_segment_max_and_min_are_scatters():
    mx, mn = _found(SEGMENT)[:2]
    assert mx is not None and mx.var == "n" and mn is not None and mn.var == "n"
    # a finite stand-in for -inf is no identity; a read of the element's own step is no other step
    assert _found("def f(float(E) v, int32(E) d) -> (m) { m(n) max=! d(e) == n ? v(e) : -1e30 where n in 0:N }") \
        == [None]
    relax = [s for s in _found(RELAX) if s is not None]
    assert len(relax) == 1 and relax[0].var == "n"
    same = RELAX.replace("dist(t - 1, q, src(e)) + w(e)", "dist(t, q, src(e)) + w(e)")
    assert all(s is None for s in _found(same))


def _segment_ref(v, dst, N):
    mx = np.full(N, -np.inf, np.float64)
    mn = np.full((N, 3), np.inf, np.float64)
    for e, d in enumerate(dst):
        if 0 <= d < N:
            mx[d] = max(mx[d], v[e])
            for k in range(3):
                mn[d, k] = min(mn[d, k], v[e] * (k + 1))
    return mx, mn


def _relax_ref(src, dst, w, source, N, S):
    dist = np.full((S, len(source), N), np.inf, np.float32)
    for q, s0 in enumerate(source):
        if 0 <= s0 < N:
            dist[0, q, s0] = 0.0
    for t in range(1, S):
        dist[t] = dist[t - 1]
        for e in range(len(src)):
            a, b = src[e], dst[e]
            if 0 <= b < N:
                cand = dist[t - 1, :, min(max(a, 0), N - 1)] + w[e]
                dist[t, :, b] = np.minimum(dist[t, :, b], cand)
    return dist


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_segment_reductions_match_numpy(mode):
    k = tcdsl.compile(SEGMENT, specialize=mode, options=NO_CACHE)
    rng = np.random.default_rng(21)
    for E, N in [(1, 1), (9, 4), (40, 17), (5, 9)]:
        v = rng.standard_normal(E).astype(np.float32)
        dst = rng.integers(-1, N + 1, E).astype(np.int32)  # (indices outside 0:N pick no element)
        mx, mn = k(v, dst, N=N)
        want_mx, want_mn = _segment_ref(v, dst, N)
        np.testing.assert_array_equal(mx, want_mx.astype(np.float32))
        np.testing.assert_allclose(mn, want_mn, rtol=1e-6)
    bf = tcdsl.compile(RELAX, specialize=mode, options=NO_CACHE)
    for E, N, Q, S in [(1, 1, 1, 1), (10, 6, 2, 4), (60, 20, 3, 6)]:
        src, dst = rng.integers(0, N, E).astype(np.int32), rng.integers(0, N, E).astype(np.int32)
        w, source = rng.uniform(0.1, 1.0, E).astype(np.float32), rng.integers(0, N, Q).astype(np.int32)
        np.testing.assert_allclose(bf(src, dst, w, source, N=N, S=S), _relax_ref(src, dst, w, source, N, S),
                                   rtol=1e-6)


def test_segment_reductions_under_guard_pages():
    import guard

    def inputs(dst):
        return [{"dtype": "float32", "shape": [len(dst)], "data": [float(i % 5) - 2 for i in range(len(dst))]},
                {"dtype": "int32", "shape": [len(dst)], "data": list(dst)}]
    settings = [{"sizes": {"N": N}, "inputs": inputs(dst)}
                for N, dst in [(4, [-1, 0, 3, 4, 2, 3, -7, 9]), (1, [0, 1, -1]), (19, [18, 0, 19, -1, 5])]]
    guard.assert_all_work([{"id": "segment", "source": SEGMENT, "settings": settings, "options": NO_CACHE}])


def test_a_scatter_that_never_runs_at_the_fixed_sizes():
    """``if t > 0`` in a loop of one step, the sizes fixed before lowering:
    the scatter's domain is empty there (isl's bounds of an empty domain
    raised an error), and the elements keep what the first step wrote."""
    src = """def f(int32(E) dst, float(E) v) -> (h) {
      for t in S {
        if t == 0 { h(t, n) = 1.0 where n in 0:N }
        else { h(t, n) +=! dst(e) == n ? v(e) : 0.0 where n in 0:N }
      }
    }"""
    dst, v = np.array([0, 1, 1], np.int32), np.array([1.0, 2.0, 4.0], np.float32)
    for mode in ("after-scheduling", "before-scheduling"):
        k = tcdsl.compile(src, specialize=mode, options=NO_CACHE)
        np.testing.assert_array_equal(k(dst, v, N=3, S=1), np.ones((1, 3), np.float32))
        np.testing.assert_array_equal(k(dst, v, N=3, S=2), np.array([[1, 1, 1], [1, 6, 0]], np.float32))


# sums into the few rows an index names, no other lhs variable (codegen/cpu_scatter.py _private)
PER_LAYER = """def norms(float(N) w, int32(N) layer) -> (wn, cnt, hi, lo) {
  wn(l) +=! layer(i) == l ? w(i) * w(i) : 0.0 where l in 0:L
  cnt(l) +=! layer(i) == l ? 1 : 0 where l in 0:L
  hi(l) max=! layer(i) == l ? w(i) : -inf where l in 0:L
  lo(l) min=! layer(i) == l ? w(i) : inf where l in 0:L
}"""


def _per_layer_ref(w, layer, L):
    wn, cnt = np.zeros(L), np.zeros(L, np.int64)
    hi, lo = np.full(L, -np.inf), np.full(L, np.inf)
    for x, g in zip(w.astype(np.float64), layer):
        if 0 <= g < L:
            wn[g] += x * x
            cnt[g] += 1
            hi[g], lo[g] = max(hi[g], x), min(lo[g], x)
    return wn, cnt, hi, lo


def test_sums_into_a_few_rows_run_in_tasks_with_copies_of_their_own():
    tir = emit(tcdsl.compile(PER_LAYER, options=NO_CACHE), "tir")
    assert tir.count("l_private = T.alloc_buffer") == 4 and "for i_task in T.parallel(l_tasks)" in tir, tir


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_sums_into_a_few_rows_match_numpy(mode):
    """Below the size where tasks pay (one task: the serial loop), at two
    tasks and at many; layers out of range, empty layers, one layer; the
    counts exact, the max and min exact, the sums in another order."""
    k = tcdsl.compile(PER_LAYER, specialize=mode, options=NO_CACHE)
    rng = np.random.default_rng(5)
    for N, L in [(1, 1), (100, 7), (8192, 24), (8193, 3), (50000, 24), (70000, 1), (40000, 20000)]:
        w = rng.standard_normal(N).astype(np.float32)
        layer = rng.integers(-2, L + 2, N).astype(np.int32)
        got = k(w, layer, L=L)
        want = _per_layer_ref(w, layer, L)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2].astype(np.float32))
        np.testing.assert_array_equal(got[3], want[3].astype(np.float32))


def test_sums_into_a_few_rows_under_guard_pages():
    import guard

    def inputs(N, L):
        return [{"dtype": "float32", "shape": [N], "data": [float(i % 7) - 3 for i in range(N)]},
                {"dtype": "int32", "shape": [N], "data": [(i * 5) % (L + 3) - 1 for i in range(N)]}]
    settings = [{"sizes": {"L": L}, "inputs": inputs(N, L)} for N, L in [(8192, 1), (9000, 5), (5, 2)]]
    guard.assert_all_work([{"id": "private", "source": PER_LAYER, "settings": settings, "options": NO_CACHE}])


# a transposed sparse product: the rows of X a scatter picks are each read once
TSPMM = """def tspmm(int32(NNZ) rid, int32(NNZ) col, float(NNZ) val, float(R, D) X) -> (Y) {
  Y(c, d) +=! col(e) == c ? val(e) * X(rid(e), d) : 0.0 where c in 0:C
}"""


def test_a_scatter_reads_its_rows_in_place_in_tasks_of_a_few_columns():
    """No gathered copy of ``X(rid(e), d)`` (NNZ x D, each row read once:
    polyhedral/gather.py leaves out the picked variable), and at 64 columns
    more than one task (codegen/cpu_scatter.py: 16 to 64 columns per task)."""
    tir = emit(tcdsl.compile(TSPMM, options=NO_CACHE), "tir")
    assert "X_g" not in tir and "d_width" in tir, tir
    k = tcdsl.compile(TSPMM, options=NO_CACHE)
    rng = np.random.default_rng(9)
    for NNZ, R, C, D in [(1, 1, 1, 1), (30, 5, 7, 3), (200, 40, 33, 64), (100, 9, 8, 70), (50, 6, 5, 200)]:
        rid, col = rng.integers(0, R, NNZ).astype(np.int32), rng.integers(-1, C + 1, NNZ).astype(np.int32)
        val, X = rng.standard_normal(NNZ).astype(np.float32), rng.standard_normal((R, D)).astype(np.float32)
        want = np.zeros((C, D))
        for e in range(NNZ):
            if 0 <= col[e] < C:
                want[col[e]] += val[e] * X[rid[e]].astype(np.float64)
        np.testing.assert_allclose(k(rid, col, val, X, C=C), want, rtol=1e-5, atol=1e-5)


RGCN_MEAN = """def agg(float(R,N,O) xr, float(N,R) cnt, int32(E) src, int32(E) dst, int32(E) rel) -> (agg) {
  agg(n, o) +=! dst(e) == n ? xr(rel(e), src(e), o) / fmax(cnt(n, rel(e)), 1.0) : 0.0 where n in 0:N
}"""
GAT_INLINE = """def gat(float(N,H) es, float(N,H) ed, float(N,H,C) z, int32(E) src, int32(E) dst) -> (mx, out) {
  mx(n, h) max=! dst(e) == n ? fmax(es(src(e), h) + ed(n, h), 0.2 * (es(src(e), h) + ed(n, h))) : -inf where n in 0:N
  out(n, h, c) +=! dst(e) == n ? exp(fmax(es(src(e), h) + ed(n, h), 0.2 * (es(src(e), h) + ed(n, h))) - mx(n, h))
      * z(src(e), h, c) : 0.0 where n in 0:N
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_scatters_terms_of_the_picked_row_are_made_per_term(mode):
    """A term that reads the picked row (``cnt(n, rel(e))``, ``ed(n, h)``)
    is neither gathered (polyhedral/gather.py) nor tabled (polyhedral/tables.py)
    over every node for every edge: no (N, E) buffer (a relational GCN's
    mean at (N, E) = (4096, 32768) built two 512 MiB tables, 184 ms against
    1.3 ms); the results are NumPy's."""
    for src in (RGCN_MEAN, GAT_INLINE):
        tir = emit(tcdsl.compile(src, specialize=mode, options=NO_CACHE), "tir")
        assert not re.search(r"alloc_buffer\(\(N, E", tir), tir
    rng = np.random.default_rng(4)
    k = tcdsl.compile(RGCN_MEAN, specialize=mode, options=NO_CACHE)
    g = tcdsl.compile(GAT_INLINE, specialize=mode, options=NO_CACHE)
    for N, E, R, O in [(1, 1, 1, 1), (7, 20, 3, 5), (40, 300, 4, 33)]:
        xr, cnt = rng.standard_normal((R, N, O)).astype(np.float32), rng.integers(0, 4, (N, R)).astype(np.float32)
        src, rel = rng.integers(0, N, E).astype(np.int32), rng.integers(0, R, E).astype(np.int32)
        dst = rng.integers(-1, N + 1, E).astype(np.int32)  # some outside 0:N: add nothing
        want = np.zeros((N, O))
        for e in range(E):
            if 0 <= dst[e] < N:
                want[dst[e]] += xr[rel[e], src[e]] / max(cnt[dst[e], rel[e]], 1.0)
        np.testing.assert_allclose(k(xr, cnt, src, dst, rel, N=N), want, rtol=1e-5, atol=1e-5)
        H, C = 2, O
        es, ed = rng.standard_normal((N, H)).astype(np.float32), rng.standard_normal((N, H)).astype(np.float32)
        z = rng.standard_normal((N, H, C)).astype(np.float32)
        mx, out = np.full((N, H), -np.inf), np.zeros((N, H, C))
        sc = es[src].astype(np.float64) + np.where((0 <= dst) & (dst < N), 1, 0)[:, None] * ed[np.clip(dst, 0, N - 1)]
        sc = np.maximum(sc, 0.2 * sc)
        for e in range(E):
            if 0 <= dst[e] < N:
                mx[dst[e]] = np.maximum(mx[dst[e]], sc[e])
        for e in range(E):
            if 0 <= dst[e] < N:
                out[dst[e]] += np.exp(sc[e] - mx[dst[e]])[:, None] * z[src[e]]
        got_mx, got = g(es, ed, z, src, dst, N=N)
        np.testing.assert_allclose(got_mx, mx, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, out, rtol=1e-4, atol=1e-4)
