"""Contractions with fewer output columns than a vector: each column of a
row tile is a dot product in vector lanes where every operand is stride-1
in the reduction (codegen/cpu_dot.py; 10 classes' logits ``X(n, d) *
W(c, d)``).  Values against NumPy at sizes that leave row tiles, lane tails
and single rows; the structure on the TIR (the ``_d1`` column loop inside
the row tiles, vector lanes over the reduction); where it must not apply
(an operand strided in the reduction, a select's branch, ``reduce_lanes``
off) the columns stay scalar and the results the same."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl

NO_CACHE = {"disk_cache": False}

LOGITS = """
def logits(float(N,D) X, float(C,D) W, float(C) b, float(N) mu) -> (z) {
  z(n, c) +=! (X(n, d) - mu(n)) * W(c, d)
  z(n, c) = z(n, c) + b(c)
}
"""

LOGITS64 = LOGITS.replace("float(", "double(")

# W read across its rows (stride C in d): no dot products
STRIDED = """
def logits_t(float(N,D) X, float(D,C) W) -> (z) {
  z(n, c) +=! X(n, d) * W(d, c)
}
"""

# a select on data: both sides are read in every lane (their reads are inside
# their tensors wherever the statement runs), dot products as without it
MASKED = """
def masked(float(N,D) X, float(C,D) W) -> (z) {
  z(n, c) +=! (X(n, d) > 0 ? X(n, d) * W(c, d) : 0)
}
"""

# a read inside its tensor only where the select takes it (d >= 1; not split):
# vector lanes would load it where it is not
GUARDED = """
def shifted(float(N,D) X, float(C,D) W) -> (z) {
  z(n, c) +=! (d > 0 ? X(n, d - 1) : 0) * W(c, d) where d in 0:D
}
"""

# softmax regression: the logits of a weight the loop updates
TRAIN = """
def train(float(N,D) X, float(N,C) Y, float(C,D) W0, float lr) -> (W) {
  W(c, d) = W0(c, d)
  for it in S {
    z(n, c) +=! X(n, d) * W(c, d)
    mx(n) max=! z(n, c)
    e(n, c) = exp(z(n, c) - mx(n))
    se(n) +=! e(n, c)
    g(n, c) = e(n, c) / se(n) - Y(n, c)
    gW(c, d) +=! g(n, c) * X(n, d)
    W(c, d) = W(c, d) - lr * gW(c, d) / N
  }
}
"""


def _data(rng, n, d, c, dtype=np.float32):
    return (rng.standard_normal((n, d)).astype(dtype), rng.standard_normal((c, d)).astype(dtype),
            rng.standard_normal(c).astype(dtype), rng.standard_normal(n).astype(dtype))


def _logits(X, W, b, mu):
    X, W, b, mu = (np.asarray(a, np.float64) for a in (X, W, b, mu))
    return (X - mu[:, None]) @ W.T + b


@pytest.mark.parametrize("n,d,c", [(13, 37, 10), (64, 256, 3), (5, 16, 1), (9, 15, 15), (1, 40, 7), (30, 1, 5)])
def test_narrow_logits_match_numpy(n, d, c):
    k = tcdsl.compile(LOGITS, options=NO_CACHE)
    args = _data(np.random.default_rng(n * 100 + d + c), n, d, c)
    np.testing.assert_allclose(k(*args), _logits(*args), rtol=2e-5, atol=2e-5 * np.sqrt(d))


def test_narrow_logits_float64():
    k = tcdsl.compile(LOGITS64, options=NO_CACHE)
    args = _data(np.random.default_rng(1), 21, 53, 6, np.float64)
    np.testing.assert_allclose(k(*args), _logits(*args), rtol=1e-12, atol=1e-12)


def test_columns_are_dot_products_inside_the_row_tiles():
    script = tcdsl.compile(LOGITS, options=NO_CACHE).script
    # the single columns' loop, inside a row tile, its lanes over d
    assert "c2_d1" in script or any("_d1" in line and "for" in line for line in script.splitlines())
    lanes = [line for line in script.splitlines() if "acc[r, v] = acc[r, v] +" in line]
    assert lanes and all("* 16 + v]" in line for line in lanes)
    off = tcdsl.compile(LOGITS, options={**NO_CACHE, "reduce_lanes": 0}).script
    assert not any("_d1 in" in line for line in off.splitlines())


@pytest.mark.parametrize("src", [STRIDED, GUARDED, MASKED])
def test_no_dot_products_where_lanes_do_not_fit(src):
    k = tcdsl.compile(src, options={**NO_CACHE, "split_selects": False, "pad": False})
    assert any("_d1 in" in line for line in k.script.splitlines()) == (src is MASKED)
    rng = np.random.default_rng(2)
    n, d, c = 11, 33, 6
    X = rng.standard_normal((n, d)).astype(np.float32)
    if src is STRIDED:
        W = rng.standard_normal((d, c)).astype(np.float32)
        want = X.astype(np.float64) @ W
    elif src is GUARDED:
        W = rng.standard_normal((c, d)).astype(np.float32)
        want = np.concatenate([np.zeros((n, 1)), X[:, :-1]], 1).astype(np.float64) @ W.T.astype(np.float64)
    else:
        W = rng.standard_normal((c, d)).astype(np.float32)
        want = np.maximum(X, 0).astype(np.float64) @ W.T
    np.testing.assert_allclose(k(X, W), want, rtol=2e-5, atol=1e-4)


def test_lanes_off_gives_the_same_logits():
    args = _data(np.random.default_rng(3), 17, 70, 9)
    on = tcdsl.compile(LOGITS, options=NO_CACHE)(*args)
    off = tcdsl.compile(LOGITS, options={**NO_CACHE, "reduce_lanes": 0})(*args)
    np.testing.assert_allclose(on, off, rtol=1e-5, atol=1e-5)


def test_softmax_regression_steps_match_numpy():
    rng = np.random.default_rng(4)
    n, d, c, steps, lr = 50, 37, 10, 4, 0.5
    X = rng.standard_normal((n, d)).astype(np.float32)
    Y = np.eye(c, dtype=np.float32)[rng.integers(0, c, n)]
    W0 = (rng.standard_normal((c, d)) / np.sqrt(d)).astype(np.float32)
    k = tcdsl.compile(TRAIN, options=NO_CACHE)
    assert any("_d1 in" in line for line in k.script.splitlines())
    got = k(X, Y, W0, np.float32(lr), S=steps)
    W = W0.astype(np.float64)
    for _ in range(steps):
        z = X @ W.T
        e = np.exp(z - z.max(1, keepdims=True))
        g = e / e.sum(1, keepdims=True) - Y
        W = W - lr * (g.T @ X) / n
    np.testing.assert_allclose(got, W, rtol=1e-4, atol=1e-5)


# attention scores of a few queries against many keys: K(b, s, d) moves with the column s in an index
# before its last; below two row tiles of queries no panel is copied, and a vector over s gathered
SCORES = """
def scores(float(B,T,D) q, float(B,L,D) K) -> (sc) {
  sc(b, t, s) +=! q(b, t, d) * K(b, s, d)
}
"""


def _gathered_lanes(script: str, tensor: str) -> list[str]:
    """The loads of ``tensor`` whose vector lane ``v`` is in an index before the last."""
    out = []
    for m in re.finditer(tensor + r"\[([^\[\]]*)\]", script):
        idx = m.group(1).split(", ")
        if any(re.search(r"\bv\b", x) for x in idx[:-1]):
            out.append(m.group(0))
    return out


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_few_queries_read_keys_as_dot_products(mode):
    k = tcdsl.compile(SCORES, specialize=mode, options=NO_CACHE)
    rng = np.random.default_rng(7)
    for B, T, L, D in [(2, 1, 37, 64), (1, 2, 16, 17), (3, 5, 40, 33), (1, 7, 19, 128), (2, 9, 21, 16), (1, 1, 1, 1)]:
        q, K = rng.standard_normal((B, T, D)).astype(np.float32), rng.standard_normal((B, L, D)).astype(np.float32)
        want = np.einsum("btd,bsd->bts", q.astype(np.float64), K.astype(np.float64))
        np.testing.assert_allclose(k(q, K), want, rtol=2e-5, atol=2e-5 * np.sqrt(D))
    if mode == "never":
        script = k.script
        assert any("_d1 in" in line for line in script.splitlines())
        # (but the vector that ends at the last column, after the panels of many rows: a tail)
        gathered = [x for x in _gathered_lanes(script, "K") if not re.search(r"T\.max\(L, 0\) - \d+ \+", x)]
        assert not gathered, gathered[:3]


def test_few_queries_stay_inside_their_tensors():
    import guard

    cases = [{"id": f"scores:{i}", "source": SCORES, "sizes": sizes, "seed": i, "options": NO_CACHE}
             for i, sizes in enumerate([{"B": 1, "T": 1, "L": 37, "D": 64}, {"B": 2, "T": 5, "L": 19, "D": 33},
                                        {"B": 1, "T": 7, "L": 16, "D": 128}, {"B": 1, "T": 9, "L": 21, "D": 70}])]
    guard.assert_all_work(cases)


# grouped-query attention: the key head h / (H / KV) is not affine, a clamped index whose
# guard for an empty tensor is over the sizes alone, the same in every lane
GQA = """
def gqa(float(B,T,H,D) q, float(B,L,KV,D) K) -> (sc) {
  sc(b, h, t, s) +=! q(b, t, h, d) * K(b, s, h / (H / KV), d)
}
"""


def test_a_clamped_head_index_still_reads_keys_as_dot_products():
    k = tcdsl.compile(GQA, options=NO_CACHE)
    assert any("_d1 in" in line for line in k.script.splitlines())
    rng = np.random.default_rng(8)
    for B, T, H, KV, L, D in [(1, 1, 4, 2, 19, 64), (2, 5, 6, 3, 16, 33), (1, 3, 2, 2, 1, 1)]:
        q = rng.standard_normal((B, T, H, D)).astype(np.float32)
        K = rng.standard_normal((B, L, KV, D)).astype(np.float32)
        Kh = np.repeat(K, H // KV, axis=2).astype(np.float64)
        want = np.einsum("bthd,bshd->bhts", q.astype(np.float64), Kh)
        np.testing.assert_allclose(k(q, K), want, rtol=2e-5, atol=2e-5 * np.sqrt(D))
