"""An arg-reduction read across its rows (``bp(b, j) argmax=! v(b, i) +
trans(i, j)``, Viterbi's back-pointers) computed as reductions over the
columns (polyhedral/argsplit.py): the same index as the one pass of
docs/language.md step 13 -- the first of the largest values, a NaN skipped
unless it comes first, -1 over an empty range -- checked against a Python
loop of that rule on values with ties, infinities and NaNs, in the three
specialize modes; where it applies (columns in vector loops, no lanes over
the rows) and where it must not (a read contiguous along the reduction)."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from tcdsl.polyhedral import argsplit

NO_CACHE = {"disk_cache": False}

ARGMAX = """def am(float(B,K) v, float(K,K) tr) -> (o) {
  o(b, j) argmax=! v(b, i) + tr(i, j)
}"""

ARGMIN = """def am(float(B,K) v, float(K,K) tr) -> (o) {
  o(b, j) argmin=! v(b, i) * tr(i, j)
}"""

MASKED = """def am(float(B,K) v, float(K,K) tr) -> (o) {
  o(b, j) argmax=! i <= j ? v(b, i) + tr(i, j) : -inf
}"""

FROM_TWO = """def am(float(B,K) v, float(K,K) tr) -> (o) {
  o(b, j) argmax=! v(b, i) + tr(i, j) where i in 2:K
}"""

INTS = """def am(int32(B,K) v, int32(K,K) tr) -> (o) {
  o(b, j) argmax=! v(b, i) + tr(i, j)
}"""

VITERBI = """def vit(float(T,B,K) em, float(K,K) trans) -> (bp, v) {
  for t in T {
    if t == 0 { v(t, b, j) = em(t, b, j) }
    else {
      v(t, b, j) max=! v(t-1, b, i) + trans(i, j)
      bp(t, b, j) argmax=! v(t-1, b, i) + trans(i, j)
      v(t, b, j) = v(t, b, j) + em(t, b, j)
    }
  }
}"""


def _one_pass(e: np.ndarray, lo: int, is_max: bool) -> np.ndarray:
    """docs/language.md step 13 over the last axis of ``e`` from ``lo``."""
    out = np.full(e.shape[:-1], -1, np.int32)
    for pos in np.ndindex(*e.shape[:-1]):
        held = -1
        for i in range(lo, e.shape[-1]):
            x = e[pos + (i,)]
            if held < 0 or (x > e[pos + (held,)] if is_max else x < e[pos + (held,)]):
                held = i
        out[pos] = held
    return out


def _values(rng, shape, dtype, special: bool):
    a = rng.integers(-3, 3, shape).astype(dtype)  # small integers: many ties
    if special:
        m = rng.random(shape) < 0.2
        a[m] = rng.choice([np.nan, np.inf, -np.inf], m.sum())
    return a


CASES = {
    # source -> (e(v, tr) as [b, j, i], first index, argmax?)
    ARGMAX: (lambda v, tr: v[:, None, :] + tr.T[None], 0, True),
    ARGMIN: (lambda v, tr: v[:, None, :] * tr.T[None], 0, False),
    MASKED: (lambda v, tr: np.where(np.tril(np.ones(tr.shape, bool))[None], v[:, None, :] + tr.T[None], -np.inf), 0,
             True),
    FROM_TWO: (lambda v, tr: v[:, None, :] + tr.T[None], 2, True),
}


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("src", list(CASES), ids=["argmax", "argmin", "masked", "from_two"])
def test_the_first_best_index_as_one_pass_finds_it(src, mode):
    fn, lo, is_max = CASES[src]
    k = tcdsl.compile(src, specialize=mode, options=NO_CACHE)
    if mode == "never":
        assert "o_best" in k.script and "o_lv" not in k.script, k.script
    rng = np.random.default_rng(7)
    for B, K, special in [(3, 20, False), (2, 37, True), (1, 1, True), (4, 2, True), (2, 17, True), (1, 64, True)]:
        v, tr = _values(rng, (B, K), np.float32, special), _values(rng, (K, K), np.float32, special)
        with np.errstate(all="ignore"):
            want = _one_pass(fn(v, tr), lo, is_max)
        np.testing.assert_array_equal(k(v, tr), want, err_msg=f"{B}x{K}")


def test_integers_have_no_nan_test():
    k = tcdsl.compile(INTS, options=NO_CACHE)
    assert "o_best" in k.script
    rng = np.random.default_rng(8)
    for B, K in [(3, 20), (1, 1), (2, 33)]:
        v, tr = _values(rng, (B, K), np.int32, False), _values(rng, (K, K), np.int32, False)
        np.testing.assert_array_equal(k(v, tr), _one_pass(v[:, None, :] + tr.T[None], 0, True))


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_viterbi_back_pointers_in_a_loop_match_the_one_pass(mode):
    k = tcdsl.compile(VITERBI, specialize=mode, options=NO_CACHE)
    ref = tcdsl.compile(VITERBI, specialize=mode, options={**NO_CACHE, "transpose": False})
    if mode == "never":
        assert "bp_best" in k.script and "bp_best" not in ref.script
    rng = np.random.default_rng(9)
    for T, B, K, special in [(5, 3, 20, False), (4, 2, 48, True), (1, 1, 1, False), (3, 1, 17, True)]:
        em, trans = _values(rng, (T, B, K), np.float32, special), _values(rng, (K, K), np.float32, special)
        bp, v = k(em, trans)
        bp_ref, v_ref = ref(em, trans)
        np.testing.assert_array_equal(v, v_ref)
        np.testing.assert_array_equal(bp[1:], bp_ref[1:])
        with np.errstate(all="ignore"):
            for t in range(1, T):
                np.testing.assert_array_equal(bp[t], _one_pass(v[t - 1][:, None, :] + trans.T[None], 0, True))


@pytest.mark.parametrize("src", [
    # contiguous along the reduction: its vector lanes serve
    "def am(float(B,K) x) -> (o) { o(b) argmax=! x(b, i) }",
    "def am(float(B,J,K) x) -> (o) { o(b, j) argmax=! x(b, j, i) }",
    # no read moves with the columns
    "def am(float(B,K) x, float(K) w) -> (o) { o(b, j) argmax=! x(b, i) * w(i) where j in 0:4 }",
])
def test_not_where_the_rows_are_contiguous_or_no_read_moves_with_the_columns(src):
    from tcdsl.driver import frontend

    fe = frontend(src, transpose=False)
    assert not argsplit.plan(fe.checked)
