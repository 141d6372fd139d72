"""A sum over a variable that one term selects reads that term alone
(tcdsl/polyhedral/pick.py): an embedding looked up as a one-hot product,
an embedding bag, two indices picking a row of a 3-D table, a ``+=`` onto a
first value.  NumPy is the reference (indices outside the table add
nothing), in every specialize mode; the kernel has no loop over the table's
rows; sums of other forms are left as written; guard pages check that an
index outside the table reads nothing outside it."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import rand

NO_CACHE = {"disk_cache": False}
ONE_HOT = """def emb(int32(N) ids, float(V,D) E) -> (x) {
  x(n, d) +=! (ids(n) == v ? 1.0 : 0.0) * E(v, d) where v in 0:V
}"""
BAG = """def bag(int32(N,L) ids, float(V,D) E) -> (x) {
  x(n, d) +=! (ids(n, l) == v ? E(v, d) : 0) / L where v in 0:V
}"""
TWO = """def two(int32(N) a, int32(N) b, float(P,Q,D) E) -> (x) {
  x(n, d) +=! (a(n) == p && b(n) == q ? E(p, q, d) : 0) where p in 0:P, q in 0:Q
}"""
ONTO = """def onto(int32(N) ids, float(V,D) E, float(N,D) x0) -> (x) {
  x(n, d) = x0(n, d)
  x(n, d) += (ids(n) == v ? 2.0 : 0.0) * E(v, d) where v in 0:V
}"""
MODES = ["never", "after-scheduling", "before-scheduling"]


def _rows(E, ids):
    """E[ids] with zero rows where an index is outside E (float64)."""
    ok = (ids >= 0) & (ids < E.shape[0])
    return np.where(ok[..., None], E.astype(np.float64)[np.clip(ids, 0, E.shape[0] - 1)], 0.0)


@pytest.mark.parametrize("mode", MODES)
def test_a_one_hot_product_reads_one_row(mode):
    k = tcdsl.compile(ONE_HOT, specialize=mode, options=NO_CACHE)
    if mode == "never":
        # the index read once per element, no loop over the V rows
        assert "ids[" in k.script and not re.search(r"for \w+ in [^\n]*\bV\b", k.script), k.script
        dense = tcdsl.compile(ONE_HOT, options={**NO_CACHE, "gather": False}).script
        assert re.search(r"in [^\n]*T\.max\(V, 0\)", dense), dense
    rng = np.random.default_rng(0)
    for N, V, D in [(1, 1, 1), (5, 4, 3), (40, 9, 33), (7, 300, 20)]:
        ids, E = rng.integers(-2, V + 2, N).astype(np.int32), rand(rng, V, D)
        np.testing.assert_allclose(k(ids, E), _rows(E, ids), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_a_bag_two_picks_and_an_accumulation(mode):
    rng = np.random.default_rng(1)
    bag, two, onto = (tcdsl.compile(s, specialize=mode, options=NO_CACHE) for s in (BAG, TWO, ONTO))
    for N, V, D in [(1, 1, 1), (6, 5, 3), (33, 70, 17)]:
        E = rand(rng, V, D)
        ids = rng.integers(-1, V + 1, (N, 3)).astype(np.int32)
        np.testing.assert_allclose(bag(ids, E), _rows(E, ids).mean(1), rtol=1e-5, atol=1e-6)
        a, b = rng.integers(-1, V + 1, N).astype(np.int32), rng.integers(0, 4, N).astype(np.int32)
        T3 = rand(rng, V, 3, D)
        want = np.where(((a >= 0) & (a < V) & (b < 3))[:, None],
                        T3.astype(np.float64)[np.clip(a, 0, V - 1), np.clip(b, 0, 2)], 0.0)
        np.testing.assert_allclose(two(a, b, T3), want, rtol=1e-6, atol=1e-6)
        x0 = rand(rng, N, D)
        np.testing.assert_allclose(onto(ids[:, 0], E, x0), x0 + 2 * _rows(E, ids[:, 0]), rtol=1e-5, atol=1e-6)
    if mode == "never":
        for k in (bag, two, onto):
            assert not re.search(r"for \w+ in [^\n]*\b[VP]\b", k.script), k.script


def test_a_row_the_index_does_not_select_does_not_matter():
    # as F.embedding: an inf in another row no longer makes the sum NaN (0 * inf)
    k = tcdsl.compile(ONE_HOT, options=NO_CACHE)
    E = np.arange(12, dtype=np.float32).reshape(4, 3)
    E[2] = np.inf
    np.testing.assert_array_equal(k(np.array([0, 3, 1], np.int32), E), E[[0, 3, 1]])


def test_the_picked_term_keeps_the_inferred_range():
    # TC: E(v + n) keeps v + n inside E for every n, v in 0:V - N + 1; an
    # index past that range selects nothing, as in the sum as written
    src = "def f(int32(N) ids, float(V) E) -> (x) {\n  x(n) +=! (ids(n) == v ? E(v + n) : 0)\n}"
    k = tcdsl.compile(src, options=NO_CACHE)
    assert not re.search(r"for \w+ in [^\n]*\bV\b", k.script), k.script
    ids, E = np.array([0, 1, -1, 2, 3, 0], np.int32), np.arange(1, 9, dtype=np.float32)
    want = [E[i + n] if 0 <= i < 8 - 6 + 1 else 0 for n, i in enumerate(ids)]
    np.testing.assert_allclose(k(ids, E), want)
    np.testing.assert_allclose(tcdsl.compile(src, options={**NO_CACHE, "gather": False})(ids, E), want)


def test_a_range_of_a_loop_variable_is_picked():
    src = """def f(int32(T, N) ids, float(T, D) E) -> (x) {
      for t in T { x(t, n, d) +=! (ids(t, n) == s ? E(s, d) : 0) where s in 0:t + 1 }
    }"""
    k = tcdsl.compile(src, options=NO_CACHE)
    assert not re.search(r"for \w+ in [^\n]*\bt\b \+ 1", k.script), k.script
    rng = np.random.default_rng(2)
    T, N, D = 5, 4, 3
    ids, E = rng.integers(-1, T + 1, (T, N)).astype(np.int32), rand(rng, T, D)
    want = np.stack([np.where(((ids[t] >= 0) & (ids[t] <= t))[:, None], E[np.clip(ids[t], 0, T - 1)], 0)
                     for t in range(T)])
    np.testing.assert_allclose(k(ids, E), want, rtol=1e-6)


def test_picked_rows_stay_inside_the_table():
    def inputs(ids, V, D):
        E = np.arange(V * D, dtype=np.float32) / 7
        return [{"dtype": "int32", "shape": [len(ids)], "data": list(ids)},
                {"dtype": "float32", "shape": [V, D], "data": E.tolist()}]
    settings = [{"sizes": {}, "inputs": inputs(ids, V, D)}
                for V, D, ids in [(4, 3, [-1, 0, 3, 4, 2, -7, 9]), (1, 1, [0, 1, -1]), (5, 70, [4, 0, 5, -1])]]
    cases = [{"id": "pick:one-hot", "source": ONE_HOT, "settings": settings}]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad and all(r["outcome"] == "works" for r in records), guard.report(bad) or records


CONFUSION = """def confusion(float(N,K) logits, int32(N) y) -> (cm, acc) {
  pred(n) argmax=! logits(n, k)
  oh(n, i) = y(n) == i ? 1.0 : 0.0 where i in 0:K
  ph(n, j) = pred(n) == j ? 1.0 : 0.0 where j in 0:K
  cm(i, j) +=! oh(n, i) * ph(n, j)
  hit +=! pred(n) == y(n) ? 1.0 : 0.0
  acc = hit / N
}"""
ONE_HOT_TEMP = """def emb(int32(N) ids, float(V,D) E) -> (x) {
  oh(n, v) = ids(n) == v ? 1.0 : 0.0 where v in 0:V
  x(n, d) +=! oh(n, v) * E(v, d)
}"""


def _tensors(src, **options):
    from tcdsl.driver import frontend
    from tcdsl.source import Source
    return set(frontend(Source(src), **options).checked.tensors)


@pytest.mark.parametrize("mode", MODES)
def test_one_hot_temporaries_go_into_their_sums(mode):
    """The one-hot temporaries (polyhedral/onehot.py) are not written: the
    confusion matrix is a scatter-add of N ones, the embedding a pick."""
    assert not {"oh", "ph"} & _tensors(CONFUSION) and "oh" not in _tensors(ONE_HOT_TEMP)
    assert {"oh", "ph"} <= _tensors(CONFUSION, gather=False)
    conf = tcdsl.compile(CONFUSION, specialize=mode, options=NO_CACHE)
    emb = tcdsl.compile(ONE_HOT_TEMP, specialize=mode, options=NO_CACHE)
    if mode == "never":
        assert "i_row: T.let[T.int32] = y[n]" in conf.script, conf.script
        assert not re.search(r"for \w+ in [^\n]*\bV\b", emb.script), emb.script
    rng = np.random.default_rng(3)
    for N, K in [(1, 1), (9, 4), (200, 13)]:
        logits, y = rand(rng, N, K), rng.integers(-1, K + 1, N).astype(np.int32)
        cm, acc = conf(logits, y)
        pred = logits.argmax(1)
        want = np.zeros((K, K))
        for a, b in zip(y, pred):
            if 0 <= a < K:
                want[a, b] += 1
        np.testing.assert_array_equal(cm, want)
        np.testing.assert_allclose(acc, np.mean(pred == y), rtol=1e-6)
        ids, E = rng.integers(-1, K + 1, N).astype(np.int32), rand(rng, K, 6)
        np.testing.assert_allclose(emb(ids, E), _rows(E, ids), rtol=1e-6, atol=1e-6)


def test_a_one_hot_temporary_read_elsewhere_stays():
    # read by an elementwise statement too, or an output: written as before
    src = ONE_HOT_TEMP.replace("-> (x) {", "-> (x, z) {").replace("}", "  z(v, n) = 2 * oh(n, v)\n}")
    assert "oh" in _tensors(src)
    assert "oh" in _tensors(ONE_HOT_TEMP.replace("-> (x)", "-> (x, oh)"))
    k = tcdsl.compile(src, options=NO_CACHE)
    rng = np.random.default_rng(4)
    ids, E = rng.integers(-1, 6, 8).astype(np.int32), rand(rng, 5, 3)
    x, z = k(ids, E)
    np.testing.assert_allclose(x, _rows(E, ids), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(z, 2.0 * (ids[None, :] == np.arange(5)[:, None]))
