"""A sum's read through an index (or through two digits of index arithmetic,
h * DH + d), reused across the sum's other indices, is
copied once before the sum (polyhedral/gather.py): the embedding feeding an
RNN's hoisted input projection.  The rewrite is checked on the frontend's
statements, values against NumPy (float64 for the recurrence), memory with
guard pages."""
from __future__ import annotations

import numpy as np
import pytest

import guard
import tcdsl
from tcdsl import driver
from tcdsl.syntax import nodes as n

EMB_PROJ = """
def proj(int32(N) tok, float(V,I) emb, float(R,I) W) -> (y) {
  y(n, r) +=! emb(tok(n), i) * W(r, i)
}"""

EMB_RNN = """
def rnn(int32(T,B) tok, float(V,I) emb, float(I,H) Wx, float(H,H) Wh, float(B,H) h0) -> (h) {
  for t in T {
    a(b, j) +=! emb(tok(t, b), i) * Wx(i, j)
    if t == 0 { a(b, j) += h0(b, k) * Wh(k, j) }
    else      { a(b, j) += h(t - 1, b, k) * Wh(k, j) }
    h(t, b, j) = tanh(a(b, j))
  }
}"""

# batch-first outputs from time-major tokens, a blank (0) prepended by a select:
# the copy is laid out as the sum's rows, emb_g(b, u, i), not as the read names them
BLANK_FIRST = """
def pred(int32(U,B) tok, float(V,I) emb, float(R,I) W) -> (y) {
  y(b, u, r) +=! emb(u > 0 ? tok(u - 1, b) : 0, i) * W(r, i) where u in 0:U + 1
}"""

# the index read is the sum's own reduction variable: nothing to reuse it across
NOT_REUSED = """
def pick(float(N,K) x, int32(N,K) idx, float(K) w) -> (y) {
  y(n) +=! x(n, idx(n, k)) * w(k)
}"""


# the read may see what the sum itself writes: never copied before it
ALIASED = """
def f(float(N) A, int32(N) I) -> (O) {
  O(i) = A(i)
  O(i) += O(I(j)) * A(j)
}"""


def _tensors(src: str, **options) -> list[str]:
    opts = tcdsl.options.parse(options or None)
    fe = driver.frontend(src, None, opts.frontend, "llvm")
    return [s.comp.tensor for s in fe.ranges.stmts]


def test_the_embedding_is_gathered_before_the_projection():
    assert _tensors(EMB_PROJ)[:2] == ["emb_g", "y"]
    assert "emb_g" not in _tensors(EMB_PROJ, gather=False)


def test_inside_a_loop_the_hoisted_projection_reads_the_gathered_rows():
    # hoisted: a(t, b, j) +=! emb_g(t, b, i) * Wx(i, j) before the loop, the copy before it
    names = _tensors(EMB_RNN)
    assert names[:2] == ["emb_g", "a"], names
    assert "emb_g" not in _tensors(EMB_RNN, hoist=False)  # inside the loop: left as written


def test_the_copy_has_the_dimensions_of_the_sum_in_its_order():
    fe = driver.frontend(BLANK_FIRST, None, tcdsl.options.parse(None).frontend, "llvm")
    copy = next(s.comp for s in fe.ranges.stmts if s.comp.tensor == "emb_g")
    assert [x.name for x in copy.indices] == ["b", "u", "i"]
    # its rows and the sum's run as one loop over (b, u): one matrix product
    script = tcdsl.compile(BLANK_FIRST, tuning_db=False, options={"disk_cache": False}).script
    assert "emb_g_rows = T.decl_buffer((B * T.max(U + 1, 0), I_1), data=emb_g.data)" in script


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
@pytest.mark.slow
def test_a_blank_first_projection_matches_numpy(mode):
    k = tcdsl.compile(BLANK_FIRST, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(7)
    for U, B, V, I, R in ((5, 3, 11, 19, 37), (9, 8, 4, 16, 64), (1, 1, 2, 3, 5)):
        tok = rng.integers(0, V, (U, B)).astype(np.int32)
        emb, W = rng.standard_normal((V, I)).astype(np.float32), rng.standard_normal((R, I)).astype(np.float32)
        ids = np.concatenate([np.zeros((B, 1), np.int64), tok.T], axis=1)  # (B, U + 1)
        want = emb.astype(np.float64)[ids] @ W.astype(np.float64).T
        np.testing.assert_allclose(k(tok, emb, W), want, rtol=1e-4, atol=1e-4)


def test_a_read_not_reused_stays_as_written():
    assert "x_g" not in _tensors(NOT_REUSED) and len(_tensors(NOT_REUSED)) == 1


def test_a_read_of_the_tensor_the_sum_writes_stays_as_written():
    assert _tensors(ALIASED) == ["O", "O"]
    k = tcdsl.compile(ALIASED, tuning_db=False)
    A = np.arange(1, 6, dtype=np.float32)
    idx = np.array([4, 0, 0, 2, 1], dtype=np.int32)
    O = A.astype(np.float64).copy()
    for i in range(5):  # in order: each element sums over j while the earlier ones already changed
        for j in range(5):
            O[i] += O[idx[j]] * A[j]
    np.testing.assert_allclose(k(A, idx), O, rtol=1e-5)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_gathered_projection_matches_numpy(mode):
    k = tcdsl.compile(EMB_PROJ, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(5)
    for N, V, I, R in ((37, 11, 19, 53), (64, 100, 32, 48), (1, 3, 5, 7)):
        tok = rng.integers(0, V, N).astype(np.int32)
        emb, W = rng.standard_normal((V, I)).astype(np.float32), rng.standard_normal((R, I)).astype(np.float32)
        want = emb.astype(np.float64)[tok] @ W.astype(np.float64).T
        np.testing.assert_allclose(k(tok, emb, W), want, rtol=1e-4, atol=1e-4)


def test_gathered_rnn_matches_numpy_and_the_program_as_written():
    rng = np.random.default_rng(6)
    T, B, V, I, H = 7, 9, 30, 24, 40
    tok = rng.integers(0, V, (T, B)).astype(np.int32)
    emb = rng.standard_normal((V, I)).astype(np.float32)
    Wx = (rng.standard_normal((I, H)) / np.sqrt(I)).astype(np.float32)
    Wh = (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
    h0 = rng.standard_normal((B, H)).astype(np.float32)
    hp, want = h0.astype(np.float64), []
    for t in range(T):
        hp = np.tanh(emb.astype(np.float64)[tok[t]] @ Wx + hp @ Wh)
        want.append(hp)
    got = tcdsl.compile(EMB_RNN, tuning_db=False)(tok, emb, Wx, Wh, h0)
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=2e-5)
    # the same sums in the same order: bit-identical to the program as written
    as_written = tcdsl.compile(EMB_RNN, tuning_db=False, options={"gather": False})(tok, emb, Wx, Wh, h0)
    np.testing.assert_array_equal(got, as_written)


def test_gathered_copies_stay_inside_their_tensors():
    cases = [{"id": f"gather:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([(EMB_PROJ, {"N": 13, "V": 7, "I": 9, "R": 17}),
                                               (EMB_RNN, {"T": 3, "B": 5, "V": 6, "I": 10, "H": 12}),
                                               (BLANK_FIRST, {"U": 6, "B": 3, "V": 5, "I": 7, "R": 19})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# heads split by index arithmetic, with the head count and width free sizes (not
# factors of a declared dimension): reads h * DH + d are not affine
HEADS = """
def att(float(B,L,D3) qkv, float(D,D) Wo) -> (y) {
  s(b, h, i, j) +=! qkv(b, i, h * DH + d) * qkv(b, j, D + h * DH + d) where h in 0:NH, d in 0:DH
  o(b, h, i, d) +=! s(b, h, i, j) * qkv(b, j, 2 * D + h * DH + d) where d in 0:DH
  y(b, i, n) +=! o(b, h, i, d) * Wo(n, h * DH + d)
}"""
# ViT patches: token n at row n / GW, column n % GW of a grid of P x P patches
PATCHES = """
def patches(float(B,C,H,W) img, float(E,C,P,P) w) -> (pe) {
  pe(b, n, e) +=! img(b, c, (n / (W / P)) * P + py, (n % (W / P)) * P + px) * w(e, c, py, px)
      where n in 0:NP
}"""
# overlapping windows l * S + k (k in 0:K, S a free stride) and a division alone
# would copy elements many times: left as written (the Kronecker layer's
# output split by its digits first, its read becomes two digits)
OVERLAP = """
def conv(float(B,C,N) x, float(O,C,K) w, float(S) g) -> (y) {
  y(b, o, l) +=! x(b, c, l * S + k) * w(o, c, k) * g(0) where l in 0:LO
}"""
KRON = """
def kron(float(NB,F) X, float(P,P) A, float(Q) g) -> (Y) {
  Y(b, i) +=! A(i / Q, p) * X(b, p * Q + i % Q) * g(i % Q) where i in 0:F
}"""


def test_digit_reads_are_copied_as_views():
    names = _tensors(HEADS)
    assert {"qkv_g", "qkv_g2", "qkv_g3", "Wo_g"} <= set(names), names
    assert "img_g" in _tensors(PATCHES)
    assert not [t for t in _tensors(OVERLAP) if t.endswith("_g")]
    # the Kronecker layer's output is split by ``i / Q``, ``i % Q`` first (polyhedral/heads.py):
    # then ``X(b, p * Q + d)`` is two digits, copied as a view (32 -> 4.2 ms, benchmarks/programs.py)
    assert {"Y_h", "X_g"} <= set(_tensors(KRON)), _tensors(KRON)
    assert not [t for t in _tensors(KRON, chain=False) if t.endswith("_g")]


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_heads_by_index_arithmetic_match_numpy(mode):
    k = tcdsl.compile(HEADS, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(7)
    for B, L, NH, DH in ((2, 5, 3, 4), (1, 17, 2, 16), (3, 8, 4, 8)):
        D = NH * DH
        qkv = rng.standard_normal((B, L, 3 * D)).astype(np.float32)
        Wo = rng.standard_normal((D, D)).astype(np.float32)
        q, kk, v = (qkv.astype(np.float64)[:, :, i * D:(i + 1) * D].reshape(B, L, NH, DH) for i in range(3))
        s = np.einsum("bihd,bjhd->bhij", q, kk)
        o = np.einsum("bhij,bjhd->bhid", s, v)
        y = np.einsum("bhid,nhd->bin", o, Wo.astype(np.float64).reshape(D, NH, DH))
        np.testing.assert_allclose(k(qkv, Wo, NH=NH, DH=DH), y, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_patches_and_left_as_written_reads_match_numpy(mode):
    rng = np.random.default_rng(8)
    k = tcdsl.compile(PATCHES, tuning_db=False, specialize=mode)
    for B, C, H, W, P, E in ((2, 3, 8, 12, 4, 5), (1, 2, 6, 6, 3, 7)):
        img = rng.standard_normal((B, C, H, W)).astype(np.float32)
        w = rng.standard_normal((E, C, P, P)).astype(np.float32)
        t = img.astype(np.float64).reshape(B, C, H // P, P, W // P, P)
        want = np.einsum("bcypxq,ecpq->byxe", t, w).reshape(B, -1, E)
        np.testing.assert_allclose(k(img, w, NP=(H // P) * (W // P)), want, rtol=1e-4, atol=1e-4)
    conv = tcdsl.compile(OVERLAP, tuning_db=False, specialize=mode)
    x, w = rng.standard_normal((2, 3, 20)).astype(np.float32), rng.standard_normal((4, 3, 5)).astype(np.float32)
    S = 3
    want = np.stack([np.einsum("bck,ock->bo", x[:, :, l * S:l * S + 5], w) for l in range((20 - 5) // S + 1)], -1)
    np.testing.assert_allclose(conv(x, w, np.ones(S, np.float32), LO=(20 - 5) // S + 1), want, rtol=1e-4, atol=1e-4)
    kron = tcdsl.compile(KRON, tuning_db=False, specialize=mode)
    P_, Q = 3, 4
    X, A = rng.standard_normal((5, P_ * Q)).astype(np.float32), rng.standard_normal((P_, P_)).astype(np.float32)
    want = np.einsum("ip,bpq->biq", A, X.reshape(5, P_, Q)).reshape(5, -1)
    np.testing.assert_allclose(kron(X, A, np.ones(Q, np.float32)), want, rtol=1e-4, atol=1e-4)


def test_digit_copies_stay_inside_their_tensors():
    cases = [{"id": f"gather-digits:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([(HEADS, {"B": 2, "L": 5, "D3": 36, "D": 12, "NH": 3, "DH": 4}),
                                               (PATCHES, {"B": 1, "C": 2, "H": 9, "W": 6, "P": 3, "E": 4, "NP": 6})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# a recurrent weight in PyTorch's (3H, H) layout read by gate and row, q * H + j, inside the
# time loop (in both arms of a branch, over ranges that differ by the operand): one copy of the
# whole weight, made once at the top with the row j last, read at every step
GATES_IN_LOOP = """
def gru(float(B,T,I) x, float(B,H) h0, float(3*H,H) w_hh) -> (out) {
  for t in T {
    if t == 0 { ah(b, q, j) +=! h0(b, k) * w_hh(q * H + j, k) where q in 0:3, j in 0:H }
    else      { ah(b, q, j) +=! out(b, t - 1, k) * w_hh(q * H + j, k) where q in 0:3, j in 0:H }
    out(b, t, j) = tanh(ah(b, 0, j) + sigmoid(ah(b, 1, j)) * ah(b, 2, j) + x(b, t, j))
  }
}"""
# the rows' range moves with the step (j in 0:t + 1): no copy serves every step
MOVING = """
def tri(float(T,N) x, float(2*N,N) w) -> (y) {
  for t in T {
    y(t, q, j) +=! x(t, k) * w(q * N + j, k) where q in 0:2, j in 0:min(t + 1, N)
  }
}"""


def test_a_gate_read_in_a_loop_is_copied_once_at_the_top():
    fe = driver.frontend(GATES_IN_LOOP, None, tcdsl.options.parse(None).frontend, "llvm")
    copies = [st.comp for st in fe.ranges.stmts if st.comp.tensor.startswith("w_hh")]
    assert [c.tensor for c in copies] == ["w_hh_g"], copies
    # first, before the loop, with the row last
    assert fe.checked.node.body[0].tensor == "w_hh_g"
    from tcdsl.syntax.printer import expr_to_tc
    assert [expr_to_tc(x) for x in fe.checked.node.body[0].indices] == ["q", "k", "j"]
    assert "w_hh_g" not in _tensors(GATES_IN_LOOP, gather=False)
    assert not any(t.startswith("w_g") for t in _tensors(MOVING))


def _gates_ref(x, h0, w):
    B, T, _ = x.shape
    H = h0.shape[1]
    out = np.zeros((B, T, H))
    h = h0.astype(np.float64)
    for t in range(T):
        a = (h @ w.T.astype(np.float64)).reshape(B, 3, H)
        h = np.tanh(a[:, 0] + 1 / (1 + np.exp(-a[:, 1])) * a[:, 2] + x[:, t, :H])
        out[:, t] = h
    return out


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_gates_in_a_loop_match_numpy(mode):
    k = tcdsl.compile(GATES_IN_LOOP, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(5)
    for B, T, I, H in [(1, 1, 1, 1), (3, 4, 9, 7), (2, 3, 20, 17), (5, 2, 50, 48)]:
        x = rng.standard_normal((B, T, I)).astype(np.float32)
        h0 = rng.standard_normal((B, H)).astype(np.float32)
        w = (rng.standard_normal((3 * H, H)) / np.sqrt(H)).astype(np.float32)
        np.testing.assert_allclose(k(x, h0, w), _gates_ref(x, h0, w), rtol=1e-4, atol=1e-4)
    m = tcdsl.compile(MOVING, specialize=mode, options={"disk_cache": False})
    x, w = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
    want = np.zeros((4, 2, 3), np.float32)
    for t in range(4):
        for q in range(2):
            want[t, q, :min(t + 1, 3)] = (x[t] @ w[q * 3:q * 3 + 3].T)[:min(t + 1, 3)]
    np.testing.assert_allclose(m(x, w), want, rtol=1e-5, atol=1e-5)


def test_gate_copies_in_a_loop_stay_inside_their_tensors():
    cases = [{"id": "gather-loop", "source": GATES_IN_LOOP,
              "settings": [{"B": 2, "T": 3, "I": 9, "H": 7}, {"B": 1, "T": 2, "I": 3, "H": 5}]}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# a Kronecker-factored layer: the sum is chained in two (chain.py) whatever the order of its
# factors, and the flat input is gathered into (n, p, q) for the first product in every order
KRON_ORDERS = [f"""def kron(float(N,M) x, float(I,P) A, float(J,Q) Bk) -> (y) {{
  y(n, i, j) +=! {a} * {b} * {c}
}}""" for a, b, c in [("A(i, p)", "Bk(j, q)", "x(n, p * Q + q)"), ("x(n, p * Q + q)", "Bk(j, q)", "A(i, p)"),
                      ("Bk(j, q)", "A(i, p)", "x(n, p * Q + q)"), ("A(i, p)", "x(n, p * Q + q)", "Bk(j, q)")]]


@pytest.mark.parametrize("src", KRON_ORDERS)
def test_a_kronecker_layer_gathers_its_input_in_any_factor_order(src):
    assert "x_g" in _tensors(src), _tensors(src)
    k = tcdsl.compile(src, options={"disk_cache": False})
    rng = np.random.default_rng(3)
    for N, P, Q, I, J in [(1, 1, 1, 1, 1), (3, 4, 5, 6, 2), (7, 3, 17, 5, 19)]:
        x = rng.standard_normal((N, P * Q)).astype(np.float32)
        A = rng.standard_normal((I, P)).astype(np.float32)
        B = rng.standard_normal((J, Q)).astype(np.float32)
        want = np.einsum("ip,jq,npq->nij", A.astype(np.float64), B, x.reshape(N, P, Q))
        np.testing.assert_allclose(k(x, A, B), want, rtol=1e-4, atol=1e-4)


# a grouped 3x3 convolution on channels-last input, padding as a select: the
# input's channel is two digits, its rows and columns shifted by the taps
GCONV_NHWC = """
def gconv(float(N,H,W,C) x, float(G,OG,CG,3,3) wt) -> (y) {
  y(n, h, w, g, o) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && w + kw - 1 >= 0 && w + kw - 1 < W
      ? x(n, h + kh - 1, w + kw - 1, g * CG + ci) : 0) * wt(g, o, ci, kh, kw)
      where h in 0:H, w in 0:W, kh in 0:3, kw in 0:3
}"""


def test_a_digit_read_at_shifted_rows_is_copied_once_per_element():
    """The copy splits the channel only, ``x_g(n, i1, i2, g, ci)``, rows and
    columns spanning their dimensions (a copy by the read's variables held
    each element once per tap: 9 times), and the sum reads it at ``h + kh -
    1``, which the padding pass then pads."""
    fe = driver.frontend(GCONV_NHWC, None, tcdsl.options.parse(None).frontend, "llvm")
    copy = next(s for s in fe.ranges.stmts if s.comp.tensor == "x_g")
    assert len(copy.comp.indices) == 5, copy.comp
    assert "x_g_pad" in _tensors(GCONV_NHWC)


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_grouped_channels_last_convolution_matches_numpy(mode):
    k = tcdsl.compile(GCONV_NHWC, tuning_db=False, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(11)
    for N, H, W, G, OG, CG in ((1, 1, 1, 1, 1, 1), (2, 5, 7, 3, 2, 4), (1, 4, 3, 2, 5, 3)):
        x = rng.standard_normal((N, H, W, G * CG)).astype(np.float32)
        wt = rng.standard_normal((G, OG, CG, 3, 3)).astype(np.float32)
        xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0))).reshape(N, H + 2, W + 2, G, CG)
        want = np.zeros((N, H, W, G, OG))
        for kh in range(3):
            for kw in range(3):
                want += np.einsum("nhwgc,goc->nhwgo", xp[:, kh:kh + H, kw:kw + W], wt[..., kh, kw])
        np.testing.assert_allclose(k(x, wt), want, rtol=1e-4, atol=1e-4)


def test_grouped_channels_last_copies_stay_inside_their_tensors():
    cases = [{"id": "gather-gconv-nhwc", "source": GCONV_NHWC,
              "sizes": {"N": 2, "H": 3, "W": 4, "C": 6, "G": 3, "OG": 2, "CG": 2}, "seed": 3}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


# the group read from the output channel, ``o / (O * CG / C)``: the heads pass
# (polyhedral/heads.py) splits ``o``, then the weight's digits ``h1 * OG + d``
# name a derived size in their range (``O_x_CG_div_C``) and are copied too
GCONV_DIV = """
def gconv(float(N,H,W,C) x, float(O,CG,3,3) wt) -> (y) {
  y(n, h, w, o) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && w + kw - 1 >= 0 && w + kw - 1 < W
      ? x(n, h + kh - 1, w + kw - 1, (o / (O * CG / C)) * CG + ci) : 0) * wt(o, ci, kh, kw)
      where h in 0:H, w in 0:W, kh in 0:3, kw in 0:3
}"""


def test_group_by_a_quotient_of_sizes_is_split_and_copied():
    names = _tensors(GCONV_DIV)
    assert {"x_g", "wt_g", "y_h"} <= set(names), names
    k = tcdsl.compile(GCONV_DIV, tuning_db=False, options={"disk_cache": False})
    rng = np.random.default_rng(12)
    for N, H, W, G, OG, CG in ((1, 1, 1, 1, 1, 1), (2, 5, 7, 3, 2, 4), (1, 4, 3, 2, 5, 3)):
        x = rng.standard_normal((N, H, W, G * CG)).astype(np.float32)
        wt = rng.standard_normal((G * OG, CG, 3, 3)).astype(np.float32)
        xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0))).reshape(N, H + 2, W + 2, G, CG)
        want = np.zeros((N, H, W, G, OG))
        for kh in range(3):
            for kw in range(3):
                want += np.einsum("nhwgc,goc->nhwgo", xp[:, kh:kh + H, kw:kw + W],
                                  wt.reshape(G, OG, CG, 3, 3)[..., kh, kw])
        np.testing.assert_allclose(k(x, wt), want.reshape(N, H, W, G * OG), rtol=1e-4, atol=1e-4)


# heads ranged by a quotient of sizes, ``h in 0:E / DH`` (a derived size): the copies'
# ranges name it as the expression it stands for (they named ``E_div_DH``, which the
# rewritten program could not check: no copy, 86 ms against 8 at (4, 256, 512, 64))
FLAT_CAUSAL = """
def att(float(B,T,E) qn, float(B,T,E) kn, float(B,T,E) v) -> (o) {
  s(b, h, i, j) +=! qn(b, i, h * DH + d) * kn(b, j, h * DH + d) where h in 0:E / DH, d in 0:DH
  mx(b, h, i) max=! j <= i ? s(b, h, i, j) : -inf
  p(b, h, i, j) = j <= i ? exp(s(b, h, i, j) - mx(b, h, i)) : 0
  z(b, h, i) +=! p(b, h, i, j)
  o(b, h, i, d) +=! p(b, h, i, j) * v(b, j, h * DH + d) / z(b, h, i) where d in 0:DH
}"""


def test_heads_ranged_by_a_quotient_of_sizes_are_copied():
    assert {"qn_g", "kn_g", "v_g"} <= set(_tensors(FLAT_CAUSAL)), _tensors(FLAT_CAUSAL)
    k = tcdsl.compile(FLAT_CAUSAL, tuning_db=False, options={"disk_cache": False})
    rng = np.random.default_rng(13)
    for B, T, NH, DH in ((1, 1, 1, 1), (2, 5, 3, 4), (1, 7, 2, 8)):
        q, kk, v = (rng.standard_normal((B, T, NH * DH)).astype(np.float32) for _ in range(3))
        qh, kh, vh = (a.astype(np.float64).reshape(B, T, NH, DH).transpose(0, 2, 1, 3) for a in (q, kk, v))
        s = qh @ kh.transpose(0, 1, 3, 2)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        want = (p / p.sum(-1, keepdims=True)) @ vh
        np.testing.assert_allclose(k(q, kk, v, DH=DH), want, rtol=1e-4, atol=1e-4)


# a DiT's final linear fused with its unpatchify: the weight's row from the pixel's
# remainders ``h % 2``, ``w % 2``; a copy by ``(ch, h, w, d)`` held each row once per
# patch (37 MB of a 150 KB weight): left as written, for the parity pass to split
UNPATCHIFY = """
def unpatch(float(B,N,D) t, float(4 * C,D) Wl) -> (img) {
  img(b, ch, h, w) +=! t(b, (h / 2) * G + w / 2, d) * Wl(((h % 2) * 2 + w % 2) * C + ch, d)
      where ch in 0:C, h in 0:2 * G, w in 0:2 * G
}"""


def test_a_read_by_remainders_only_is_not_copied():
    assert not [x for x in _tensors(UNPATCHIFY) if x.startswith("Wl_g")], _tensors(UNPATCHIFY)
    k = tcdsl.compile(UNPATCHIFY, tuning_db=False, options={"disk_cache": False})
    rng = np.random.default_rng(14)
    for B, G, D, C in ((1, 1, 1, 1), (2, 3, 5, 2), (1, 4, 3, 3)):
        t = rng.standard_normal((B, G * G, D)).astype(np.float32)
        Wl = rng.standard_normal((4 * C, D)).astype(np.float64)
        lin = t.astype(np.float64) @ Wl.T  # (B, G*G, 4C): patch n, (py, px, ch)
        want = lin.reshape(B, G, G, 2, 2, C).transpose(0, 5, 1, 3, 2, 4).reshape(B, C, 2 * G, 2 * G)
        np.testing.assert_allclose(k(t, Wl.astype(np.float32), G=G), want, rtol=1e-4, atol=1e-4)


# a ResNet shortcut: a 1x1 convolution of stride 2, ``x`` read at ``2 * j`` for every
# output channel again: copied once, contiguous (4.8 -> 0.8 ms at (4, 256, 28, 28))
STRIDED = """
def sc(float(N,C,H,W) x, float(O,C) wd) -> (y) {
  y(n, o, i, j) +=! x(n, c, 2 * i, 2 * j) * wd(o, c) where i in 0:(H + 1) / 2, j in 0:(W + 1) / 2
}"""
# a 3x3 window of stride 2 would copy each element once per tap: left as written
STRIDED_WINDOW = """
def cv(float(N,C,H,W) x, float(O,C,3,3) w) -> (y) {
  y(n, o, i, j) +=! x(n, c, 2 * i + kh, 2 * j + kw) * w(o, c, kh, kw) where i in 0:(H - 1) / 2, j in 0:(W - 1) / 2
}"""


def test_a_strided_read_reused_across_outputs_is_copied_contiguous():
    assert "x_g" in _tensors(STRIDED) and "x_g" not in _tensors(STRIDED_WINDOW)
    k = tcdsl.compile(STRIDED, tuning_db=False, options={"disk_cache": False})
    rng = np.random.default_rng(15)
    for N, C, H, W, O in ((1, 1, 1, 1, 1), (2, 3, 5, 7, 4), (1, 4, 8, 6, 3)):
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        wd = rng.standard_normal((O, C)).astype(np.float32)
        want = np.einsum("nchw,oc->nohw", x.astype(np.float64)[:, :, ::2, ::2], wd)
        np.testing.assert_allclose(k(x, wd), want, rtol=1e-4, atol=1e-4)


UP_BLOCK = """def upbl(float(B,H2,W2,C1) u, float(B,H2,W2,C2) s, float(O,C1 + C2,3,3) w, float(O) bias) -> (y) {
  y(b, i, j, o) +=! (i + kh - 1 >= 0 && i + kh - 1 < H2 && j + kw - 1 >= 0 && j + kw - 1 < W2
                     ? (c < C1 ? u(b, i + kh - 1, j + kw - 1, c) : s(b, i + kh - 1, j + kw - 1, c - C1)) : 0)
                    * w(o, c, kh, kw)
     where i in 0:H2, j in 0:W2, kh in 0:3, kw in 0:3, c in 0:C1 + C2
  y(b, i, j, o) = fmax(y(b, i, j, o) + bias(o), 0)
}"""


def _up_block(u, s, w, bias):
    x = np.concatenate([u, s], -1).astype(np.float64)
    N, H, W, _ = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    y = np.zeros((N, H, W, w.shape[0]))
    for kh in range(3):
        for kw in range(3):
            y += xp[:, kh:kh + H, kw:kw + W] @ w[:, :, kh, kw].T.astype(np.float64)
    return np.maximum(y + bias, 0)


def test_a_concatenation_inside_a_convolution_is_copied_once():
    """A U-Net up-block's ``torch.cat`` as a select on the channel inside the
    padding select: the select and both reads ran once per tap and output
    channel (179 ms, 60x torch's cat then conv2d at (2, 64, 64, 64 + 32, 32));
    the concatenation is copied once, ``y_cat(b, i1, i2, c)``, and the sum
    reads it at ``i + kh - 1``, which the padding pass pads (4.9 ms)."""
    fe = driver.frontend(UP_BLOCK, None, tcdsl.options.parse(None).frontend, "llvm")
    copy = next(s for s in fe.ranges.stmts if s.comp.tensor == "y_cat")
    assert len(copy.comp.indices) == 4 and isinstance(copy.comp.rhs, n.Select), copy.comp
    assert "y_cat_pad" in _tensors(UP_BLOCK)
    # a linear layer over a concatenation (no shifted index) stays as written: the split schedule serves it
    linear = "def f(float(B,C1) x1, float(B,C2) x2, float(O,C) W) -> (y) {" \
             " y(b,o) +=! (c < C1 ? x1(b,c) : x2(b,c-C1)) * W(o,c) where c in 0:C }"
    assert not any("_cat" in t for t in _tensors(linear))


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_concatenation_inside_a_convolution_matches_numpy(mode):
    k = tcdsl.compile(UP_BLOCK, tuning_db=False, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(12)
    for B, H, W, C1, C2, O in ((1, 1, 1, 1, 1, 1), (2, 5, 7, 3, 2, 4), (1, 4, 3, 17, 5, 18)):
        u, s = (rng.standard_normal((B, H, W, c)).astype(np.float32) for c in (C1, C2))
        w, bias = rng.standard_normal((O, C1 + C2, 3, 3)).astype(np.float32), rng.standard_normal(O).astype(np.float32)
        np.testing.assert_allclose(k(u, s, w, bias), _up_block(u, s, w, bias), rtol=1e-4, atol=1e-4)


def test_a_concatenation_copy_stays_inside_its_tensors():
    cases = [{"id": f"gather-cat-{i}", "source": UP_BLOCK, "sizes": sizes, "seed": 4}
             for i, sizes in enumerate(({"B": 2, "H2": 3, "W2": 4, "C1": 3, "C2": 2, "O": 5},
                                        {"B": 1, "H2": 1, "W2": 2, "C1": 1, "C2": 4, "O": 1}))]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)


UPSAMPLE_CONV = """def upconv(float(B, C, H, W) x, float(O, C, 3, 3) Wc, float(O) bc) -> (y) {
  y(b, o, i, j) +=! (i + kh - 1 >= 0 && i + kh - 1 < 2 * H && j + kw - 1 >= 0 && j + kw - 1 < 2 * W
                     ? x(b, c, (i + kh - 1) / 2, (j + kw - 1) / 2) : 0) * Wc(o, c, kh, kw)
      where i in 0:2 * H, j in 0:2 * W, kh in 0:3, kw in 0:3
  y(b, o, i, j) += bc(o)
}"""


def _upsample_conv(x, w, bias):
    u = x.astype(np.float64).repeat(2, 2).repeat(2, 3)
    B, C, H, W = u.shape
    up = np.pad(u, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((B, w.shape[0], H, W))
    for kh in range(3):
        for kw in range(3):
            y += np.einsum("bchw,oc->bohw", up[:, :, kh:kh + H, kw:kw + W], w[:, :, kh, kw])
    return y + bias[:, None, None]


def test_a_nearest_upsample_inside_a_convolution_is_copied_upsampled():
    """A VAE decoder's nearest 2x upsample fused into its 3x3 convolution
    reads ``x`` at ``(j + kw - 1) / 2`` along the vector loop: a gather per
    multiply-add (29 ms, 14x torch's ``interpolate`` then ``conv2d`` at (1,
    64, 32, 32), one thread).  The copy is the upsampled input, ``x_g(b, c,
    i2, i3) = x(b, c, i2 / 2, i3 / 2)``, then padded: 1.7 ms."""
    fe = driver.frontend(UPSAMPLE_CONV, None, tcdsl.options.parse(None).frontend, "llvm")
    copy = next(s for s in fe.ranges.stmts if s.comp.tensor == "x_g")
    assert [type(i).__name__ for i in copy.comp.rhs.indices] == ["IndexVar", "IndexVar", "Binary", "Binary"]
    assert "x_g_pad" in _tensors(UPSAMPLE_CONV)
    # a read at a quotient along another index than the vector loop's stays as written
    rows = "def f(float(N,K) x, float(K,M) w) -> (y) { y(i, j) +=! x(i / 2, k) * w(k, j) }"
    assert "x_g" not in _tensors(rows)


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_nearest_upsample_inside_a_convolution_matches_numpy(mode):
    k = tcdsl.compile(UPSAMPLE_CONV, tuning_db=False, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(13)
    for B, C, H, W, O in ((1, 1, 1, 1, 1), (2, 3, 5, 4, 17), (1, 5, 3, 9, 2)):
        x = rng.standard_normal((B, C, H, W)).astype(np.float32)
        w, bias = rng.standard_normal((O, C, 3, 3)).astype(np.float32), rng.standard_normal(O).astype(np.float32)
        np.testing.assert_allclose(k(x, w, bias), _upsample_conv(x, w, bias), rtol=1e-4, atol=1e-4)


def test_an_upsampled_copy_stays_inside_its_tensors():
    cases = [{"id": f"gather-up-{i}", "source": UPSAMPLE_CONV, "sizes": sizes, "seed": 5}
             for i, sizes in enumerate(({"B": 2, "C": 3, "H": 3, "W": 4, "O": 5},
                                        {"B": 1, "C": 1, "H": 1, "W": 2, "O": 17}))]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)
