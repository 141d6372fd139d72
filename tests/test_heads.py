"""A sum over a flat index of heads read by its digits ``e / DH`` is computed
per head first, then copied to the flat tensor (tcdsl/polyhedral/heads.py):
the rewrite on the frontend's statements, values against NumPy and against
the program as written (``options={"chain": False}``), a tail for sizes
where ``DH`` does not divide the range, memory with guard pages."""
from __future__ import annotations

import numpy as np
import pytest

import guard
import tcdsl
from tcdsl import driver

# the weighted sum of attention with its heads merged as ``.view(B, T, NH * DH)``
MERGE = """
def ctx(float(B,NH,T,T) p, float(B,T,E) v) -> (c) {
  c(b, i, e) +=! p(b, e / DH, i, j) * v(b, j, e) where e in 0:NH * DH
}"""
# the same without a ``where``: ``e`` ranges over ``v``'s channels, the
# softmax's normaliser read at the head too, a scale per channel of a head
MERGE_INFERRED = """
def ctx(float(B,NH,T,T) s, float(B,NH,T) z, float(B,T,E) v, float(DH) g) -> (c) {
  c(b, i, e) +=! exp(s(b, e / DH, i, j)) / z(b, e / DH, i) * v(b, j, e) * g(e % DH)
}"""
# a constant divisor is affine already: left as written
CONSTANT = """
def ctx(float(B,NH,T,T) p, float(B,T,E) v) -> (c) {
  c(b, i, e) +=! p(b, e / 4, i, j) * v(b, j, e) where e in 0:NH * 4
}"""


def _stmts(src: str, **options) -> list:
    opts = tcdsl.options.parse(options or None)
    return driver.frontend(src, None, opts.frontend, "llvm").ranges.stmts


def _tensors(src: str, **options) -> list[str]:
    return [s.comp.tensor for s in _stmts(src, **options)]


def test_the_sum_runs_per_head_then_is_copied():
    names = _tensors(MERGE)
    assert names.count("c") == 1 and "c_h" in names, names
    copy = next(s for s in _stmts(MERGE) if s.comp.tensor == "c")
    assert copy.comp.op == "=", copy.comp
    # without a ``where``: a tail statement for the channels past the last whole head
    names = _tensors(MERGE_INFERRED)
    assert "c_h" in names and names.count("c") >= 2, names
    assert "c_h" not in _tensors(CONSTANT)
    assert "c_h" not in _tensors(MERGE, chain=False)


def _ref(p, v, NH, DH):
    B, _, T, _ = p.shape
    ph = p.astype(np.float64)
    vh = v.astype(np.float64)[:, :, :NH * DH].reshape(B, T, NH, DH)
    return np.einsum("bhij,bjhd->bihd", ph, vh).reshape(B, T, NH * DH)


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_per_head_sums_match_numpy_and_the_program_as_written(mode):
    rng = np.random.default_rng(5)
    k = tcdsl.compile(MERGE, specialize=mode, options={"disk_cache": False})
    for B, NH, T, DH in ((1, 1, 1, 1), (2, 3, 5, 4), (1, 4, 17, 8)):
        p = rng.standard_normal((B, NH, T, T)).astype(np.float32)
        v = rng.standard_normal((B, T, NH * DH)).astype(np.float32)
        np.testing.assert_allclose(k(p, v, DH=DH), _ref(p, v, NH, DH), rtol=1e-4, atol=1e-4)
    k = tcdsl.compile(MERGE_INFERRED, specialize=mode, options={"disk_cache": False})
    plain = tcdsl.compile(MERGE_INFERRED, specialize=mode, options={"disk_cache": False, "chain": False})
    # E = NH * DH (no tail), DH not dividing E (a tail of E % DH channels), E < DH (all tail)
    for B, NH, T, E, DH in ((2, 3, 5, 12, 4), (1, 2, 6, 7, 3), (1, 1, 3, 2, 5), (2, 4, 9, 32, 8)):
        s = rng.standard_normal((B, NH, T, T)).astype(np.float32)
        z = (1 + rng.random((B, NH, T))).astype(np.float32)
        v = rng.standard_normal((B, T, E)).astype(np.float32)
        g = rng.standard_normal(DH).astype(np.float32)
        got = k(s, z, v, g)
        np.testing.assert_allclose(got, plain(s, z, v, g), rtol=1e-5, atol=1e-5)
        if E == NH * DH:
            want = _ref(np.exp(s.astype(np.float64)) / z[..., None], v * np.tile(g, NH), NH, DH)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_per_head_sums_stay_inside_their_tensors():
    cases = [{"id": f"heads:{i}", "source": MERGE_INFERRED, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"B": 1, "NH": 2, "T": 3, "E": 7, "DH": 3},
                                        {"B": 2, "NH": 2, "T": 4, "E": 8, "DH": 4},
                                        {"B": 1, "NH": 1, "T": 2, "E": 9, "DH": 2}])]
    cases.append({"id": "heads:where", "source": MERGE, "sizes": {"B": 2, "NH": 3, "T": 3, "E": 6, "DH": 2}})
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)


# linear attention's numerator, the feature map of ``q`` in a ``where`` value read
# at ``(c / DH) * DH + d``, the state at ``kv(b, c / DH, d, c % DH)``, ``c`` in ``0:E``
LINEAR = """
def num(float(B,T,E) q, float(B,NH,DH,DH) kv) -> (y) {
  y(b, t, c) +=! (qq > 0 ? qq + 1 : exp(qq)) * kv(b, c / DH, d, c % DH)
      where c in 0:E, d in 0:DH, qq = q(b, t, (c / DH) * DH + d)
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_where_value_read_by_digits_runs_per_head(mode):
    """The ``where`` value is read at the head too: per head (216 -> 7.2 ms at
    (8, 512, 512, 64)); its read of ``q``, used three times, is copied once
    (polyhedral/gather.py made a copy of each copy)."""
    names = _tensors(LINEAR)
    assert "y_h" in names and [t for t in names if t.startswith("q_g")] == ["q_g"], names
    k = tcdsl.compile(LINEAR, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(8)
    for B, T, NH, DH, E in ((1, 1, 1, 1, 1), (2, 5, 3, 4, 12), (1, 4, 2, 3, 7), (2, 3, 2, 2, 4)):
        q = rng.standard_normal((B, T, E)).astype(np.float32)
        kv = rng.standard_normal((B, NH, DH, DH)).astype(np.float32)
        f = np.where(q > 0, q + 1, np.exp(q)).astype(np.float64)
        want = np.zeros((B, T, E))
        for c in range(E):  # (a channel past NH heads reads the last one: the program's clamped read)
            h = c // DH
            if h < NH:
                want[:, :, c] = np.einsum("btd,bd->bt", f[:, :, h * DH:(h + 1) * DH], kv[:, h, :, c % DH])
        if E == NH * DH:
            np.testing.assert_allclose(k(q, kv), want, rtol=1e-4, atol=1e-4)
        plain = tcdsl.compile(LINEAR, specialize=mode, options={"disk_cache": False, "chain": False})
        np.testing.assert_allclose(k(q, kv), plain(q, kv), rtol=1e-5, atol=1e-5)


# a grouped 3x3 convolution NCHW with its padding as a select, the group of the output
# channel ``o / (O * CG / C)``: an outer index, split because the read is under the
# select (as written no padded copy: 7.7 ms against 1.7 at (4, 256, 28, 28), groups of 8)
GCONV_NCHW = """
def gconv(float(N,C,H,W) x, float(O,CG,3,3) w) -> (y) {
  y(n, o, h, v) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && v + kw - 1 >= 0 && v + kw - 1 < W
      ? x(n, o / (O * CG / C) * CG + ci, h + kh - 1, v + kw - 1) : 0) * w(o, ci, kh, kw)
      where h in 0:H, v in 0:W, kh in 0:3, kw in 0:3
}"""
# the same without padding: reads a row per ``o`` as written, faster so than with copies
GCONV1D = """
def gconv(float(B,C,L) x, float(O,CG,K) w) -> (y) {
  y(b, o, t) +=! x(b, (o / (O / 8)) * CG + c, t + k) * w(o, c, k) where t in 0:L - K + 1
}"""


def test_an_outer_index_is_split_where_its_read_is_under_a_select():
    assert "y_h" in _tensors(GCONV_NCHW) and "x_g_pad" in _tensors(GCONV_NCHW), _tensors(GCONV_NCHW)
    assert "y_h" not in _tensors(GCONV1D), _tensors(GCONV1D)
    k = tcdsl.compile(GCONV_NCHW, options={"disk_cache": False})
    rng = np.random.default_rng(9)
    for N, H, W, G, OG, CG in ((1, 1, 1, 1, 1, 1), (2, 5, 4, 3, 2, 2), (1, 3, 6, 2, 3, 4)):
        x = rng.standard_normal((N, G * CG, H, W)).astype(np.float32)
        w = rng.standard_normal((G * OG, CG, 3, 3)).astype(np.float32)
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1))).reshape(N, G, CG, H + 2, W + 2)
        wg = w.astype(np.float64).reshape(G, OG, CG, 3, 3)
        want = sum(np.einsum("ngchw,goc->ngohw", xp[..., a:a + H, b:b + W], wg[..., a, b])
                   for a in range(3) for b in range(3)).reshape(N, G * OG, H, W)
        np.testing.assert_allclose(k(x, w), want, rtol=1e-4, atol=1e-4)


# BERT's fused qkv: the values are columns 2 * C + e of one (B, T, 3 * C) tensor
FUSED_QKV = """
def ctx(float(B,NH,T,T) p, float(B,T,3 * C) qkv) -> (c) {
  c(b, i, e) +=! p(b, e / (C / NH), i, j) * qkv(b, j, 2 * C + e) where e in 0:C
}"""


def test_a_read_at_the_flat_index_plus_sizes_runs_per_head():
    assert "c_h" in _tensors(FUSED_QKV), _tensors(FUSED_QKV)
    k = tcdsl.compile(FUSED_QKV, options={"disk_cache": False})
    rng = np.random.default_rng(10)
    for B, NH, T, DH in ((1, 1, 1, 1), (2, 3, 5, 4), (1, 2, 7, 8)):
        C = NH * DH
        p = rng.standard_normal((B, NH, T, T)).astype(np.float32)
        qkv = rng.standard_normal((B, T, 3 * C)).astype(np.float32)
        np.testing.assert_allclose(k(p, qkv, C=C), _ref(p, qkv[:, :, 2 * C:], NH, DH), rtol=1e-4, atol=1e-4)
