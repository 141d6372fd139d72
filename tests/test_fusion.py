"""The ``fusion`` schedule choice outside sequential loops
(polyhedral/schedule.py): a contraction that isl fuses with its consumer
loses its register tiles, so ``"auto"`` gives each statement a nest of its
own when that vectorizes more statements; row reductions (norms) keep isl's
fused pass over each row."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import emit

MLP = """def mlp(float(B,I) x, float(H,I) W1, float(H) b1, float(O,H) W2, float(O) b2) -> (y) {
  h(b, j) +=! x(b, i) * W1(j, i)
  h(b, j) = max(h(b, j) + b1(j), 0)
  y(b, o) +=! h(b, j) * W2(o, j)
  y(b, o) = y(b, o) + b2(o)
}"""

ATTENTION = """def attention(float(L,D) q, float(S,D) k, float(S,D) v) -> (o) {
  s(i, j) +=! q(i, d) * k(j, d)
  mx(i) max=! s(i, j)
  e(i, j) = exp(s(i, j) - mx(i))
  z(i) +=! e(i, j)
  o(i, d) +=! e(i, j) * v(j, d)
  o(i, d) = o(i, d) / z(i)
}"""

LAYERNORM = """def layernorm(float(N,C) x) -> (y) {
  mean(n) +=! x(n, c) / C
  d(n, c) = x(n, c) - mean(n)
  var(n) +=! d(n, c) * d(n, c) / C
  y(n, c) = d(n, c) * rsqrt(var(n) + 1e-5)
}"""


def mlp_ref(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1.T + b1, 0)
    return h @ w2.T + b2


def attention_ref(q, k, v):
    s = q.astype(np.float64) @ k.T
    e = np.exp(s - s.max(1, keepdims=True))
    return (e @ v) / e.sum(1, keepdims=True)


def _tiles(tir: str) -> int:
    """The register tiles (``acc`` buffers) of a TIR listing."""
    return len(re.findall(r"acc = T\.alloc_buffer", tir))


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("fusion", ["auto", "isl", "none"])
def test_every_choice_computes_the_mlp_and_attention(mode, fusion):
    rng = np.random.default_rng(3)
    w = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    args = (w(5, 7), w(9, 7), w(9), w(4, 9), w(4))
    got = tcdsl.compile(MLP, specialize=mode, options={"fusion": fusion})(*args)
    np.testing.assert_allclose(got, mlp_ref(*args), rtol=1e-4, atol=1e-4)
    qkv = (w(6, 3), w(10, 3), w(10, 3))
    got = tcdsl.compile(ATTENTION, specialize=mode, options={"fusion": fusion})(*qkv)
    np.testing.assert_allclose(got, attention_ref(*qkv), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("src", [MLP, ATTENTION])
@pytest.mark.slow
def test_auto_keeps_the_contractions_register_tiles(src):
    auto = emit(tcdsl.compile(src), "tir")
    fused = emit(tcdsl.compile(src, options={"fusion": "isl"}), "tir")
    assert _tiles(auto) > _tiles(fused), (_tiles(auto), _tiles(fused))


def test_row_reductions_keep_the_fused_pass():
    auto = emit(tcdsl.compile(LAYERNORM), "schedule")
    fused = emit(tcdsl.compile(LAYERNORM, options={"fusion": "isl"}), "schedule")
    assert auto == fused
    x = np.random.default_rng(0).standard_normal((6, 11)).astype(np.float32)
    y = tcdsl.compile(LAYERNORM)(x)
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


GREEDY = """def greedy(float(V,H) emb, float(H,H) Whh, float(V,H) Wo, float(B,H) h0, int32(B) start) -> (tok) {
  for t in S {
    if t == 0 { h(t, b, j) +=! h0(b, k) * Whh(j, k) }
    else      { h(t, b, j) +=! h(t - 1, b, k) * Whh(j, k) }
    if t == 0 { h(t, b, j) = tanh(h(t, b, j) + emb(start(b), j)) }
    else      { h(t, b, j) = tanh(h(t, b, j) + emb(tok(t - 1, b), j)) }
    logit(b, v) +=! h(t, b, j) * Wo(v, j)
    tok(t, b) argmax=! logit(b, v)
  }
}"""


def greedy_ref(emb, whh, wo, h0, start, steps):
    h, tok, out = h0.astype(np.float64), start, []
    for _ in range(steps):
        h = np.tanh(h @ whh.T + emb[tok])
        tok = (h @ wo.T).argmax(1).astype(np.int32)
        out.append(tok)
    return np.stack(out)


@pytest.mark.parametrize("fusion", ["auto", "outer", "isl", "none"])
def test_a_step_ending_in_an_argmax_gets_a_nest_per_statement_below_the_batch_loop(fusion):
    """isl puts the argmax, which needs whole rows of logits, after the rest of
    the step: ``"outer"`` (and ``"auto"``, which then vectorizes more) applies
    to each part of that sequence, so the recurrent and output products get
    register tiles instead of one fused serial loop over ``j``."""
    k = tcdsl.compile(GREEDY, options={"fusion": fusion, "disk_cache": False})
    tiles = _tiles(emit(k, "tir"))
    if fusion in ("auto", "outer", "none"):
        assert tiles >= 2
    else:
        assert tiles == 0
    rng = np.random.default_rng(7)
    V, H, B, S = 37, 19, 5, 6
    emb, h0 = rng.standard_normal((V, H)), rng.standard_normal((B, H))
    whh, wo = rng.standard_normal((H, H)) / np.sqrt(H), rng.standard_normal((V, H)) * 2 / np.sqrt(H)
    args = [a.astype(np.float32) for a in (emb, whh, wo, h0)]
    start = rng.integers(0, V, B).astype(np.int32)
    got = k(*args[:3], args[3], start, S=S)
    np.testing.assert_array_equal(got, greedy_ref(*[a.astype(np.float64) for a in args], start, S))


LSTM_PER_GATE = """def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4,I,H) Wx, float(4,H,H) Wh) -> (h) {
  for t in T {
    gx(g, b, j) +=! x(t, b, i) * Wx(g, i, j)
    if t == 0 { gh(g, b, j) +=! h0(b, k) * Wh(g, k, j) }
    else      { gh(g, b, j) +=! h(t - 1, b, k) * Wh(g, k, j) }
    ig(b, j) = sigmoid(gx(0, b, j) + gh(0, b, j))
    fg(b, j) = sigmoid(gx(1, b, j) + gh(1, b, j))
    cg(b, j) = tanh(gx(2, b, j) + gh(2, b, j))
    og(b, j) = sigmoid(gx(3, b, j) + gh(3, b, j))
    if t == 0 { c(t, b, j) = fg(b, j) * c0(b, j) + ig(b, j) * cg(b, j) }
    else      { c(t, b, j) = fg(b, j) * c(t - 1, b, j) + ig(b, j) * cg(b, j) }
    h(t, b, j) = og(b, j) * tanh(c(t, b, j))
  }
}"""


def test_auto_does_not_count_statements_that_a_serial_gate_loop_encloses():
    """isl fuses the elementwise gates into the gate loop ``g`` of the
    recurrent product, which makes ``g`` serial: its statements still end in
    vector loops, but lose the register tiles and the rows.  ``"auto"``
    counts a statement only when no more serial loops enclose it than it has
    reduction variables, and takes the nest per statement below the batch."""
    auto, outer = (tcdsl.compile(LSTM_PER_GATE, options={"fusion": f, "disk_cache": False}) for f in ("auto", "outer"))
    assert emit(auto, "isl-ast") == emit(outer, "isl-ast")
    assert emit(auto, "isl-ast") != emit(tcdsl.compile(LSTM_PER_GATE, options={"fusion": "isl"}), "isl-ast")
    rng = np.random.default_rng(5)
    T, B, I, H = 4, 3, 5, 7
    x, h0, c0 = rng.standard_normal((T, B, I)), rng.standard_normal((B, H)), rng.standard_normal((B, H))
    Wx, Wh = rng.standard_normal((4, I, H)) / 3, rng.standard_normal((4, H, H)) / 3
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h, c, ref = h0, c0, []
    for t in range(T):
        g = np.einsum("bi,gij->gbj", x[t], Wx) + np.einsum("bk,gkj->gbj", h, Wh)
        c = sig(g[1]) * c + sig(g[0]) * np.tanh(g[2])
        h = sig(g[3]) * np.tanh(c)
        ref.append(h)
    got = auto(*(a.astype(np.float32) for a in (x, h0, c0, Wx, Wh)))
    np.testing.assert_allclose(got, np.stack(ref), rtol=1e-4, atol=1e-5)


CROSS_ENTROPY = """def ce(float(N,C) x, int32(N) target) -> (loss) {
  mx(n) max=! x(n, c)
  z(n) +=! exp(x(n, c) - mx(n))
  loss +=! (log(z(n)) + mx(n) - x(n, target(n))) / N
}"""


SOFTMAX_MIDDLE = """def smid(float(B,N,D) x) -> (y) {
  m(b, d) max=! x(b, n, d)
  e(b, n, d) = exp(x(b, n, d) - m(b, d))
  z(b, d) +=! e(b, n, d)
  y(b, n, d) = e(b, n, d) / z(b, d)
}"""


def _softmax(x, axis):
    e = np.exp(x.astype(np.float64) - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("name", ["rows", "middle"])
def test_nests_over_the_same_rows_share_one_parallel_loop(name):
    """isl runs a softmax's normalisation as a second parallel pass over the
    tensor, after the sums; every dependence stays in a row (a batch), so
    one parallel loop over the rows runs them all while the row is in cache."""
    from helpers import SOFTMAX

    src = {"rows": SOFTMAX, "middle": SOFTMAX_MIDDLE}[name]
    # (without tables: the middle softmax's divisor z(b, d) would be a table of its reciprocal)
    k = tcdsl.compile(src, options={"disk_cache": False, "factor": False})
    separate = tcdsl.compile(src, options={"disk_cache": False, "fusion": "isl", "factor": False})
    assert k.script.count("T.parallel") == 1 and separate.script.count("T.parallel") == 2
    rng = np.random.default_rng(7)
    for shape in ([(1, 1), (3, 17), (5, 100), (64, 1030)] if name == "rows" else [(1, 1, 1), (2, 3, 17), (3, 40, 33)]):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(k(x), _softmax(x, 1), rtol=1e-4, atol=1e-6)


def test_rows_are_not_shared_when_a_dependence_crosses_them():
    """The mean over the whole tensor needs every row before any output
    (``y(n, c) = x(n, c) - m``): no shared loop over the rows."""
    src = """def center(float(N,C) x) -> (y) {
  m +=! x(n, c) / (N * C)
  y(n, c) = x(n, c) - m
}"""
    k = tcdsl.compile(src, options={"disk_cache": False})
    x = np.random.default_rng(8).standard_normal((37, 19)).astype(np.float32)
    np.testing.assert_allclose(k(x), x - x.astype(np.float64).mean(), rtol=1e-5, atol=1e-5)
    rows = tcdsl.compile(CROSS_ENTROPY, options={"disk_cache": False})
    t = np.random.default_rng(9).integers(0, 19, 37).astype(np.int32)
    xd = x.astype(np.float64)
    want = np.mean(np.log(np.exp(xd - xd.max(1, keepdims=True)).sum(1)) + xd.max(1) - xd[np.arange(37), t])
    np.testing.assert_allclose(rows(x, t), want, rtol=1e-5)


def test_a_reduction_over_the_rows_runs_after_their_parallel_loop():
    """isl fuses a cross entropy's row max and sum with the loss's sum over
    the rows into one loop, which the loss makes serial: the row max and
    sum then share one parallel loop over the rows and the loss sums the
    rows after it (isl's fused loop: no parallel loop at all)."""
    k = tcdsl.compile(CROSS_ENTROPY, options={"disk_cache": False})
    fused = tcdsl.compile(CROSS_ENTROPY, options={"disk_cache": False, "fusion": "isl"})
    assert "T.parallel" in k.script and "T.parallel" not in fused.script
    # the parallel loop holds the max and the sum, not the loss
    par = k.script[k.script.index("T.parallel"):]
    end = re.search(r"\n    \S", par)  # the next statement at the parallel loop's level
    head = par[:end.start() if end else len(par)]
    assert "mx[" in head and "z[" in head and "loss[()] = loss[()] +" not in head
    rng = np.random.default_rng(10)
    for N, C in [(1, 1), (2, 3), (17, 5), (100, 33), (513, 1000)]:
        x = (rng.standard_normal((N, C)) * 3).astype(np.float32)
        t = rng.integers(0, C, N).astype(np.int32)
        xd = x.astype(np.float64)
        want = np.mean(np.log(np.exp(xd - xd.max(1, keepdims=True)).sum(1)) + xd.max(1) - xd[np.arange(N), t])
        np.testing.assert_allclose(k(x, t), want, rtol=1e-5, atol=1e-6)


BATCHED_ATTENTION = """def mha(float(B,N,L,D) q, float(B,N,S,D) k, float(B,N,S,D) v) -> (o) {
  s(b, n, i, j) +=! q(b, n, i, d) * k(b, n, j, d)
  mx(b, n, i) max=! s(b, n, i, j)
  e(b, n, i, j) = exp(s(b, n, i, j) - mx(b, n, i))
  z(b, n, i) +=! e(b, n, i, j)
  o(b, n, i, d) +=! e(b, n, i, j) * v(b, n, j, d)
  o(b, n, i, d) = o(b, n, i, d) / z(b, n, i)
}"""

# the same contraction chain, but its second product reads a weight at every row
BATCHED_MLP = """def mlp(float(B,R,I) x, float(H,I) W1, float(O,H) W2) -> (y) {
  h(b, r, j) +=! x(b, r, i) * W1(j, i)
  y(b, r, o) +=! h(b, r, j) * W2(o, j)
}"""


def _top_loops(ast: str) -> int:
    """The loops at the top level of an isl AST listing (inside its braces when there are several)."""
    return len(re.findall(r"^  for \(" if ast.startswith("{") else r"^for \(", ast, re.M))


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_a_batch_of_contractions_runs_one_batch_element_after_the_other(mode):
    """Every statement of a multi-head attention is a nest of its own (each
    keeps its register tiles), all of them under one parallel loop over the
    batch: a batch element's scores are still in cache for its max, exps,
    sums and weighted sum, instead of each being a pass over whole tensors."""
    k = tcdsl.compile(BATCHED_ATTENTION, specialize=mode, options={"disk_cache": False})
    sizes = {"B": 3, "N": 2, "L": 5, "S": 7, "D": 4}
    rng = np.random.default_rng(11)
    q = rng.standard_normal((3, 2, 5, 4)).astype(np.float32)
    kk, v = (rng.standard_normal((3, 2, 7, 4)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(k(q, kk, v), np.stack([[attention_ref(q[b, n], kk[b, n], v[b, n]) for n in range(2)]
                                                      for b in range(3)]), rtol=1e-4, atol=1e-5)
    if mode == "never":
        ast = emit(k, "isl-ast")
        assert _top_loops(ast) == 1 and ast.startswith("// par\nfor (int c0 = 0; c0 < B;"), ast[:200]
        separate = tcdsl.compile(BATCHED_ATTENTION, options={"disk_cache": False, "fusion": "none"})
        assert _top_loops(emit(separate, "isl-ast")) >= 5
        assert _tiles(emit(k, "tir")) == _tiles(emit(separate, "tir")) > 0
    del sizes


# heads between the positions (a linear layer's output viewed (B, T, H, D)): the output's
# nest has the heads as its third loop
CAUSAL_BTHD = """def causal(float(B,T,H,D) q, float(B,T,H,D) k, float(B,T,H,D) v) -> (o) {
  s(b, h, i, j) +=! q(b, i, h, d) * k(b, j, h, d)
  sm(b, h, i, j) = j <= i ? s(b, h, i, j) * rsqrt(float(D)) : -1e30
  m(b, h, i) max=! sm(b, h, i, j)
  z(b, h, i) +=! exp(sm(b, h, i, j) - m(b, h, i))
  p(b, h, i, j) = exp(sm(b, h, i, j) - m(b, h, i)) / z(b, h, i)
  o(b, i, h, d) +=! p(b, h, i, j) * v(b, j, h, d)
}"""


def test_the_heads_are_a_second_shared_loop():
    """Below the shared loop over the batch, one over the heads
    (polyhedral/schedule_batch.py): a head's score matrices are still in
    cache for its max, exps, sums and weighted sum, not swept for all heads
    by each statement in turn; every nest keeps its register tiles."""
    k = tcdsl.compile(CAUSAL_BTHD, options={"disk_cache": False})
    ast = emit(k, "isl-ast")
    assert _top_loops(ast) == 1 and re.match(r"// par\nfor \(int c0 = 0; c0 < B; c0 \+= 1\) \{\s*// par\s*"
                                            r"for \(int c1 = 0; c1 < H; c1 \+= 1\) \{", ast), ast[:300]
    separate = tcdsl.compile(CAUSAL_BTHD, options={"disk_cache": False, "fusion": "none"})
    assert _tiles(emit(k, "tir")) == _tiles(emit(separate, "tir")) > 0
    _causal_matches(k, np.random.default_rng(12), [(2, 9, 3, 5)])


def _causal_matches(k, rng, shapes):
    """``k`` (CAUSAL_BTHD) against NumPy in float64 at each (B, T, H, D)."""
    for B, T, H, D in shapes:
        q, kk, v = (rng.standard_normal((B, T, H, D)) for _ in range(3))
        s = np.einsum("bihd,bjhd->bhij", q, kk) / np.sqrt(D)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        want = np.einsum("bhij,bjhd->bihd", p / p.sum(-1, keepdims=True), v)
        np.testing.assert_allclose(k(*(a.astype(np.float32) for a in (q, kk, v))), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_the_batch_and_heads_are_one_parallel_loop(mode):
    """The two shared loops run as one parallel loop over (batch, head)
    pairs (codegen/collapse.py, ``parallel_pair``): at batch 1 the heads
    share the cores, not one core every head."""
    k = tcdsl.compile(CAUSAL_BTHD, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        tir = emit(k, "tir")
        assert "for c0_pair in T.parallel(T.max(B, 0) * T.max(H, 0)):" in tir, tir[:2000]
        assert "T.parallel(B)" not in tir
    _causal_matches(k, np.random.default_rng(13), [(1, 9, 3, 5), (1, 1, 1, 1), (2, 17, 4, 16), (3, 5, 1, 2)])


def test_contractions_over_a_shared_weight_keep_their_own_nests():
    """A product that reads a weight at every batch element is not cut into
    batch elements (its panels serve all rows), nor are nests over different
    sizes fused: the MLP keeps a nest per statement, the GRU's copy of
    ``h0`` (over B) stays apart from its input projection (over T)."""
    ast = emit(tcdsl.compile(BATCHED_MLP, options={"disk_cache": False}), "isl-ast")
    assert _top_loops(ast) >= 3, ast
    rng = np.random.default_rng(2)
    x, w1, w2 = rng.standard_normal((2, 3, 5)), rng.standard_normal((6, 5)), rng.standard_normal((4, 6))
    got = tcdsl.compile(BATCHED_MLP)(*(a.astype(np.float32) for a in (x, w1, w2)))
    np.testing.assert_allclose(got, (x @ w1.T) @ w2.T, rtol=1e-4, atol=1e-4)
    gru = """def gru(float(T,B,I) x, float(B,H) h0, float(3,I,H) Wx) -> (hp, gx) {
  hp(b, j) = h0(b, j)
  gx(t, g, b, j) +=! x(t, b, i) * Wx(g, i, j)
}"""
    ast = emit(tcdsl.compile(gru, options={"disk_cache": False}), "isl-ast")
    assert "c0 < B" in ast and "c0 < T" in ast, ast


IM2COL = """
def c(float(B,C,L) x, float(O,C,K) w) -> (y) {
  col(b, c, k, t) = x(b, c, t + k) where t in 0:L - K + 1
  y(b, o, t) +=! col(b, c, k, t) * w(o, c, k)
}"""


def test_a_copy_fused_into_the_reduction_loops_does_not_count_as_tiled():
    """isl fuses an im2col copy into the channel and tap loops of the product
    that reads it (``for c, k { col(..); for o { for t { y += .. } } }``):
    those serial loops enclose the copy too, so the product has no register
    tile there and ``auto`` takes a nest per statement, where it has one."""
    tir = emit(tcdsl.compile(IM2COL), "tir")
    assert "acc = T.alloc_buffer" in tir
    fused = emit(tcdsl.compile(IM2COL, options={"fusion": "isl"}), "tir")
    assert "acc = T.alloc_buffer" not in fused
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 5, 19)).astype(np.float32), rng.standard_normal((7, 5, 3)).astype(np.float32)
    want = sum(np.einsum("oc,bct->bot", w[:, :, k].astype(np.float64), x[:, :, k:k + 17]) for k in range(3))
    for opts in (None, {"fusion": "isl"}):
        np.testing.assert_allclose(tcdsl.compile(IM2COL, options=opts)(x, w), want, rtol=1e-4, atol=1e-4)


CTC = """
def alpha(float(T,B,S) em, float(B,S) a0) -> (a) {
  for t in T {
    if t == 0 { a(t, b, s) = a0(b, s) + em(t, b, s) }
    else {
      p(b, s) = s > 0 ? a(t - 1, b, s - 1) : -1e30 where s in 0:S
      mx(b, s) = fmax(a(t - 1, b, s), p(b, s))
      a(t, b, s) = mx(b, s) + log(exp(a(t - 1, b, s) - mx(b, s)) + exp(p(b, s) - mx(b, s))) + em(t, b, s)
    }
  }
}"""


def test_a_select_piece_beside_exps_gets_nests_that_vectorize():
    """isl fuses the select's piece ``s >= 1`` of ``p`` with the exps and
    logs of the step: a guard beside the formulas' bindings.  ``auto`` takes
    a nest per statement, and the step's logsumexp runs in vector lanes.
    With isl's fusion it does too: isl puts the piece at ``s = 0`` before
    the loop over ``s``, in a block under the parallel mark, and the loop
    keeps the mark (codegen/lower.py; it ran one lane at a time)."""
    tir = emit(tcdsl.compile(CTC), "tir")
    # (b, s) as one vector loop over rows of a, mx (codegen/collapse.py), or s alone
    step = r"a(_rows_\d+)?\[t, (c\d+, )?c\d+_o \* \d+ \+ c\d+_v\] = mx"
    assert "T.vectorized" in tir and re.search(step, tir)
    fused = emit(tcdsl.compile(CTC, options={"fusion": "isl"}), "tir")
    assert re.search(step, fused)
    rng = np.random.default_rng(0)
    T, B, S = 5, 3, 11
    em, a0 = rng.standard_normal((T, B, S)), rng.standard_normal((B, S))
    want = [a0 + em[0]]
    for t in range(1, T):
        p = np.concatenate([np.full((B, 1), -1e30), want[-1][:, :-1]], 1)
        want.append(np.logaddexp(want[-1], p) + em[t])
    for opts in (None, {"fusion": "isl"}):
        got = tcdsl.compile(CTC, options=opts)(em.astype(np.float32), a0.astype(np.float32))
        np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=1e-4)


SPATIAL_SOFTMAX = """def spatial(float(N,C,H,W) f) -> (kx, ky) {
  mx(n, c) max=! f(n, c, h, w)
  e(n, c, h, w) = exp(f(n, c, h, w) - mx(n, c))
  z(n, c) +=! e(n, c, h, w)
  kx(n, c) +=! e(n, c, h, w) * w / z(n, c)
  ky(n, c) +=! e(n, c, h, w) * h / z(n, c)
}"""


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_exps_fused_into_sums_over_two_dimensions_get_their_own_vector_nest(mode):
    """isl fuses the exps into the loops of the three sums over (h, w), which
    carry the sums: one scalar pass, no statement in a vector loop.  Then
    every component gets a nest of its own under the rows' shared parallel
    loop: the exps in vectors, each sum a vectorized row reduction."""
    k = tcdsl.compile(SPATIAL_SOFTMAX, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        s = k.script
        assert re.search(r"for c\d_v in T\.vectorized\(\d+\):\n(\s+bt\S* = T\.\w+\(\)\n)*\s+e_rows\[", s), s
        assert not re.search(r"for c2, c3 in T\.grid\(H, W\):\n(.*\n){0,6}\s+e\[c0, c1, c2, c3\] = ", s), s
    rng = np.random.default_rng(12)
    for shape in [(1, 1, 1, 1), (2, 3, 5, 7), (3, 2, 16, 33)]:
        f = rng.standard_normal(shape).astype(np.float32)
        fd = f.astype(np.float64)
        p = np.exp(fd - fd.max((2, 3), keepdims=True))
        p /= p.sum((2, 3), keepdims=True)
        kx, ky = k(f)
        np.testing.assert_allclose(kx, (p * np.arange(shape[3])).sum((2, 3)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ky, (p * np.arange(shape[2])[:, None]).sum((2, 3)), rtol=1e-5, atol=1e-5)


ADAPTIVE_POOL = """def adapool(float(N,C,H,W) x) -> (y) {
  cnt(i, j) = float(((i + 1) * H + 6) / 7 - (i * H) / 7) * float(((j + 1) * W + 6) / 7 - (j * W) / 7) where i in 0:7, j in 0:7
  y(n, c, i, j) +=! ((i * H) / 7 + a < ((i + 1) * H + 6) / 7 && (j * W) / 7 + u < ((j + 1) * W + 6) / 7
      ? x(n, c, (i * H) / 7 + a, (j * W) / 7 + u) : 0) where i in 0:7, j in 0:7, a in 0:H / 7 + 2, u in 0:W / 7 + 2
  y(n, c, i, j) = y(n, c, i, j) / cnt(i, j)
}"""


def _adaptive_pool_ref(x):
    N, C, H, W = x.shape
    y = np.zeros((N, C, 7, 7))
    for i in range(7):
        for j in range(7):
            win = x[:, :, i * H // 7:-(-(i + 1) * H // 7), j * W // 7:-(-(j + 1) * W // 7)]
            y[:, :, i, j] = win.astype(np.float64).mean(axis=(2, 3))
    return y


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_statements_fused_under_a_few_fixed_rows_get_nests_over_the_batch(mode):
    """isl fused an adaptive pooling's table of window sizes ``cnt(i, j)``
    with the sums into one nest whose parallel loop ran over the 7 output
    rows, batch and channels inside it (each row swept every channel: 8.7x
    F.adaptive_avg_pool2d): fewer statements under such a loop, as many
    parallel and vectorized, take the nest per component."""
    k = tcdsl.compile(ADAPTIVE_POOL, specialize=mode, options={"disk_cache": False})
    fused = tcdsl.compile(ADAPTIVE_POOL, options={"disk_cache": False, "fusion": "isl"})
    assert re.search(r"for \w+ in T\.parallel\(7\)", fused.script)
    if mode == "never":
        # only the table of 7 x 7 runs under a parallel loop of 7
        pars = re.findall(r"for \w+ in T\.parallel\(([^)]*)\)", k.script)
        assert pars.count("7") <= 1 and any(p == "N" or p.startswith("T.max(N, 0") for p in pars), pars
    rng = np.random.default_rng(12)
    for shape in [(2, 3, 32, 32), (1, 2, 7, 7), (2, 5, 20, 11), (1, 1, 9, 50)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(k(x), _adaptive_pool_ref(x), rtol=1e-5, atol=1e-6, err_msg=f"{shape}")


KMEANS_STEP = """def km(float(N,D) X, float(K,D) C0) -> (C, assign) {
  C(k, d) = C0(k, d)
  for it in S {
    cc(k) +=! C(k, d) * C(k, d)
    xc(n, k) +=! X(n, d) * C(k, d)
    assign(n) argmin=! cc(k) - 2 * xc(n, k)
    C(k, d) = C(k, d) * 1.5
  }
}"""


def test_a_product_under_a_loop_that_fixes_its_columns_is_not_counted_as_tiles():
    """isl shared one parallel loop over the centroids ``k`` among their
    norms, the products ``xc(n, k)`` and the update of ``C``: the product's
    own ``k`` loop below it ran one iteration, a dot product per element,
    yet it counted as register tiles, so the schedule was kept (10 steps at
    (16384, 32, 32): 67 ms, 4.6 ms with a nest per component)."""
    k = tcdsl.compile(KMEANS_STEP, options={"disk_cache": False})
    assert re.search(r"acc\[r, [^\n]*\] = acc\[r, [^\n]*\] \+ X\[", k.script), k.script
    rng = np.random.default_rng(9)
    N, K, D, S = 37, 5, 6, 3
    X, C0 = rng.standard_normal((N, D)).astype(np.float32), rng.standard_normal((K, D)).astype(np.float32)
    C, assign = k(X, C0, S=S)
    Cw = C0.astype(np.float64)
    for _ in range(S):
        want = ((Cw * Cw).sum(1)[None] - 2 * X.astype(np.float64) @ Cw.T).argmin(1)
        Cw = Cw * 1.5
    np.testing.assert_allclose(C, Cw, rtol=1e-6)
    np.testing.assert_array_equal(assign, want)


KMEANS_LLOYD = """def km(float(N,D) X, float(K,D) C0) -> (C) {
  C(k, d) = C0(k, d)
  for it in S {
    cn(k) +=! C(k, d) * C(k, d)
    dist(n, k) +=! X(n, d) * C(k, d)
    dist(n, k) = cn(k) - 2 * dist(n, k)
    assign(n) argmin=! dist(n, k)
    cnt(k) +=! assign(n) == k ? 1.0 : 0.0 where k in 0:K
    sm(k, d) +=! assign(n) == k ? X(n, d) : 0.0 where k in 0:K
    C(k, d) = cnt(k) > 0 ? sm(k, d) / cnt(k) : C(k, d)
  }
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_a_tensor_updated_in_another_kernel_of_the_step_is_packed_at_each_step(mode):
    """k-means' scatters (the counts and sums by assignment) cut its step
    into kernels, so the centroids ``C`` are written in another kernel than
    the product ``dist(n, k) +=! X(n, d) * C(k, d)`` that reads them across
    their rows.  They are still copied to a panel at each step and the
    product keeps its register tiles (Kernel.loop_writes); it was a dot
    product per element, k outermost (8192 x 32, 64 centroids, 5 steps:
    ~71 -> ~8 ms)."""
    k = tcdsl.compile(KMEANS_LLOYD, specialize=mode, options={"disk_cache": False})
    if mode == "never":
        assert re.search(r"acc\[r, [^\n]*\] = acc\[r, [^\n]*\] \+ X\[", k.script), k.script
        assert "dist_lanes" not in k.script
    rng = np.random.default_rng(21)
    for N, D, K, S in [(300, 7, 20, 4), (64, 32, 3, 2), (5, 1, 1, 1)]:
        centers = 3 * rng.standard_normal((K, D))
        X = (centers[rng.integers(0, K, N)] + 0.5 * rng.standard_normal((N, D))).astype(np.float32)
        C0 = (centers + 0.5 * rng.standard_normal((K, D))).astype(np.float32)
        Cw = C0.astype(np.float64)
        for _ in range(S):
            a = ((Cw * Cw).sum(1)[None] - 2 * X @ Cw.T).argmin(1)
            cnt = np.bincount(a, minlength=K)[:, None]
            sm = np.zeros_like(Cw)
            np.add.at(sm, a, X)
            Cw = np.where(cnt > 0, sm / np.maximum(cnt, 1), Cw)
        np.testing.assert_allclose(k(X, C0, S=S), Cw, rtol=1e-4, atol=1e-4)


# the argmax reads ``sc`` at its best index so far: one row of it (model._whole), so
# isl may fuse the product into the argmax's loop over b, one row at a time
RETRIEVE = """def retrieve(float(B,D) u, float(N,D) items) -> (best, score) {
  sc(b, n) +=! u(b, d) * items(n, d)
  best(b) argmax=! sc(b, n)
  score(b) max=! sc(b, n)
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_product_fused_under_a_loop_over_other_statements_has_no_tile_rows(mode):
    """A parallel loop over several statements runs one row at a time: the
    product below it is a rank-1 update per ``d`` (100x slower at N = 50000),
    so the product keeps a nest of its own with register tiles."""
    k = tcdsl.compile(RETRIEVE, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(3)
    for B, D, N in [(1, 1, 1), (3, 5, 40), (9, 16, 100)]:
        u, items = rng.standard_normal((B, D)).astype(np.float32), rng.standard_normal((N, D)).astype(np.float32)
        best, score = k(u, items, N=N) if mode == "never" else k(u, items)
        want = u.astype(np.float64) @ items.astype(np.float64).T
        np.testing.assert_array_equal(best, want.argmax(1))
        np.testing.assert_allclose(score, want.max(1), rtol=1e-5, atol=1e-5)
    if mode == "never":
        assert "acc = T.alloc_buffer" in emit(k, "tir")
