"""Range inference (TC's algorithm): hand-worked cases and goldens for the corpus."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tcdsl
from tcdsl import TcSemanticError
from tcdsl.errors import TcWarning
from tcdsl.driver import frontend
from tcdsl.codegen.signature import evaluate
from tcdsl.source import Source
from tcdsl.syntax.parse import parse

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "tests" / "programs").glob("*.tc")) + sorted((ROOT / "examples" / "rnn").glob("*.tc"))


def extents(src: str, sizes: dict[str, int], entry: str | None = None) -> dict[str, tuple[int, ...]]:
    fe = frontend(Source(src), entry)
    return {t: tuple(evaluate(e, sizes) for e in fe.ranges.extent_exprs(t)) for t in fe.checked.tensors}


# (program, sizes, tensor, extent worked out by hand from TC's rules)
CASES = [
    # a valid convolution reads nothing out of bounds: h + kh <= H - 1 for all kh < KH
    ("def c(float(H) I, float(KH) W) -> (O) { O(h) +=! I(h + kh) * W(kh) }", {"H": 10, "KH": 3}, "O", (8,)),
    # stride 2: 2h + kh <= H - 1  =>  h <= (H - KH) / 2
    ("def c(float(H) I, float(KH) W) -> (O) { O(h) +=! I(2 * h + kh) * W(kh) }", {"H": 10, "KH": 3}, "O", (4,)),
    ("def c(float(H) I, float(KH) W) -> (O) { O(h) +=! I(2 * h + kh) * W(kh) }", {"H": 11, "KH": 3}, "O", (5,)),
    # two reads of one variable: the intersection
    ("def f(float(N) A, float(M) B) -> (O) { O(i) = A(i) + B(i) }", {"N": 7, "M": 4}, "O", (4,)),
    # reversed index
    ("def f(float(N) A) -> (O) { O(i) = A(N - 1 - i) }", {"N": 6}, "O", (6,)),
    # where first: the clause wins over what the reads would allow
    ("def f(float(N) A) -> (O) { O(i) = A(i) where i in 0:3 }", {"N": 6}, "O", (3,)),
    # a written range starting above 0: the extent still starts at 0
    ("def f(float(N) A) -> (O) { O(i) = A(i - 1) where i in 1:N }", {"N": 6}, "O", (6,)),
    # several statements: the largest upper bound
    ("def f(float(N) A) -> (O) { O(i) = A(i) where i in 0:2  O(i) = A(i) }", {"N": 6}, "O", (6,)),
    # a loop variable covers its whole range
    ("def f(float(T, N) X) -> (O) { for t in 1:T { O(t, i) = X(t - 1, i) } }", {"T": 5, "N": 3}, "O", (5, 3)),
    # a 2-D pooling window with a where-bounded reduction
    ("def p(float(H, W) I) -> (O) { O(h, w) max=! I(2 * h + kh, 2 * w + kw) where kh in 0:2, kw in 0:2 }",
     {"H": 7, "W": 8}, "O", (3, 4)),
    # an empty reduction range does not empty the output: +=! still writes N zeros
    ("def f(float(N, K) A) -> (O) { O(i) +=! A(i, k) where k in 1:K }", {"N": 3, "K": 1}, "O", (3,)),
    # a loop that runs no step keeps the other dimensions, as NumPy's x[:, :0] does
    ("def f(float(B, L) X) -> (S) { for t in L - 1 { S(b, t) = X(b, t + 1) } }", {"B": 3, "L": 1}, "S", (3, 0)),
    ("def f(float(B, L) X) -> (S) { for t in 1:L { S(b, t) = X(b, t) } }", {"B": 4, "L": 1}, "S", (4, 0)),
    ("def f(float(B, L) X) -> (S) { for t in 1:L { S(b, t) = X(b, t) } }", {"B": 4, "L": 3}, "S", (4, 3)),
    # ... but a range that depends on the loop has nothing to give
    ("def f(float(L) X) -> (S) { for t in L - 1 { S(t, i) = X(i) where i in 0:t } }", {"L": 1}, "S", (0, 0)),
    # nor does an if over the loop variable that holds at no step: the state
    # written from the second step on has its B elements at T = 1 too
    ("def f(float(T, B) x) -> (h) { for t in T { if t > 0 { h(b) = x(t, b) } } }", {"T": 1, "B": 3}, "h", (3,)),
    ("def f(float(T, B) x) -> (h) { for t in T { if t > 0 { h(b) = x(t, b) } } }", {"T": 4, "B": 3}, "h", (3,)),
    ("def f(float(T, B) x) -> (h) { for t in T { if t >= 2 { h(b, t) = x(t, b) } } }", {"T": 2, "B": 3}, "h", (3, 0)),
    # an if over the sizes alone still leaves the tensor empty where it fails
    ("def f(float(T, B) x) -> (h) { for t in T { if T > 2 { h(b) = x(t, b) } } }", {"T": 1, "B": 3}, "h", (0,)),
]


@pytest.mark.parametrize("src,sizes,tensor,want", CASES)
def test_hand_worked_extents(src, sizes, tensor, want):
    assert extents(src, sizes)[tensor] == want


def test_a_scan_of_no_steps_returns_its_other_dimensions():
    k = tcdsl.compile("def cs(float(B, L) x) -> (s) {\n for t in L - 1 { s(b, t) = (t > 0 ? s(b, t - 1) : 0) + x(b, t) }\n}")
    for L in (1, 2, 6):
        x = np.random.default_rng(L).standard_normal((3, L)).astype(np.float32)
        np.testing.assert_allclose(k(x), np.cumsum(x[:, :L - 1], axis=1), rtol=1e-5)


def test_a_read_of_a_state_written_from_the_second_step_does_not_empty_the_output():
    # hn is written only where t > 0 and read only there (the select): at
    # T = 1 the output keeps its B rows (it had none, a shape of (1, 0))
    k = tcdsl.compile("def f(float(T, B) x) -> (y, hn) {\n  for t in T {\n    if t > 0 { hn(b) = 2 * x(t - 1, b) }\n"
                      "    y(t, b) = x(t, b) + (t > 0 ? hn(b) : 0)\n  }\n}", options={"disk_cache": False})
    for T in (1, 2, 5):
        x = np.random.default_rng(T).standard_normal((T, 3)).astype(np.float32)
        y, hn = k(x)
        want = x.copy()
        want[1:] += 2 * x[:-1]
        np.testing.assert_allclose(y, want, rtol=1e-6)
        np.testing.assert_allclose(hn, 2 * x[T - 2] if T > 1 else np.zeros(3), rtol=1e-6)


STATE_LATER = """def elman(float(T,B,I) x, float(I,H) W, float(H,H) U) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W(i, j)
    if t > 0 { u(b, j) +=! h(t - 1, b, k) * U(k, j) }
    h(t, b, j) = tanh(a(b, j) + (t > 0 ? u(b, j) : 0))
  }
}"""


def _elman(x, W, U):
    h, out = np.zeros((x.shape[1], W.shape[1])), []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        out.append(h)
    return np.stack(out)


def test_a_temporary_bounded_only_by_the_state_written_later_gets_the_states_rows():
    # u's b is bounded only by h, written further down the loop: the first
    # pass's placeholder range for it ([0, 1)) bounded nothing else, so h
    # keeps the B rows that a(b, j) gives it (it had 1, silently)
    assert extents(STATE_LATER, {"T": 4, "B": 3, "I": 2, "H": 5})["h"] == (4, 3, 5)
    assert extents(STATE_LATER, {"T": 4, "B": 3, "I": 2, "H": 5})["u"] == (3, 5)
    k = tcdsl.compile(STATE_LATER, options={"disk_cache": False})
    rng = np.random.default_rng(7)
    for T, B, I, H in [(1, 3, 2, 5), (4, 3, 2, 5), (6, 7, 9, 17)]:
        x, W, U = rng.standard_normal((T, B, I)), rng.standard_normal((I, H)) / 3, rng.standard_normal((H, H)) / 3
        got = k(*(a.astype(np.float32) for a in (x, W, U)))
        np.testing.assert_allclose(got, _elman(x, W, U), rtol=1e-4, atol=1e-5)


SELF_ATTENTION = """def f(float(T,B,I) x, float(I,H) W, float(H,H) V) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * W(i, j)
    if t > 0 {
      s(b, k) +=! h(k, b, j) * h(t - 1, b, j) where k in 0:t
      mx(b) max=! s(b, k) where k in 0:t
      e(b, k) = exp(s(b, k) - mx(b)) where k in 0:t
      z(b) +=! e(b, k) where k in 0:t
      ctx(b, j) +=! e(b, k) * h(k, b, j) where k in 0:t
      a(b, j) += ctx(b, k) / z(b) * V(k, j)
    }
    h(t, b, j) = tanh(a(b, j))
  }
}"""


def test_a_sum_over_the_states_written_later_is_bounded_by_them():
    # s's j is bounded only by h, written further down the loop (attention
    # over the RNN's own past states): the second pass bounds it by h's
    # extent (it was "cannot infer the range of 'j'")
    assert extents(SELF_ATTENTION, {"T": 5, "B": 2, "I": 3, "H": 4})["s"] == (2, 4)
    k = tcdsl.compile(SELF_ATTENTION, options={"disk_cache": False})
    rng = np.random.default_rng(8)
    for T, B, I, H in [(1, 2, 3, 4), (5, 3, 2, 6)]:
        x, W, V = rng.standard_normal((T, B, I)), rng.standard_normal((I, H)) / 2, rng.standard_normal((H, H)) / 2
        hs = []
        for t in range(T):
            a = x[t] @ W
            if t > 0:
                past = np.stack(hs[:t], 1)  # (B, t, H)
                sc = np.einsum("bkj,bj->bk", past, hs[-1])
                e = np.exp(sc - sc.max(1, keepdims=True))
                a = a + (np.einsum("bk,bkj->bj", e, past) / e.sum(1, keepdims=True)) @ V
            hs.append(np.tanh(a))
        got = k(*(v.astype(np.float32) for v in (x, W, V)))
        np.testing.assert_allclose(got, np.stack(hs), rtol=1e-4, atol=1e-5)


def test_an_unbounded_variable_asks_for_a_where_clause():
    with pytest.raises(tcdsl.TcSemanticError, match=r"cannot infer the range of 'j'; use a where clause"):
        tcdsl.compile("def f(float(N) A) -> (O) { O(i) +=! A(i) + j }")


def test_inferred_extents_match_numpy_slicing():
    """The inferred output shape is what NumPy's valid correlation gives."""
    src = "def c(float(N) I, float(K) W) -> (O) { O(n) +=! I(n + k) * W(k) }"
    I, W = np.arange(9, dtype=np.float32), np.array([1, 2, 3], np.float32)
    out = tcdsl.compile(src)(I, W)
    np.testing.assert_allclose(out, np.correlate(I, W, mode="valid"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_range_goldens(path, golden):
    text = path.read_text()
    dumps = []
    for d in parse(Source(text, path.name)).defs:
        dumps.append(f"## {d.name}\n" + frontend(Source(text, path.name), d.name).written.dump())
    name = path.stem if path.parent.name == "programs" else f"examples_rnn_{path.stem}"
    golden("ranges", name, "".join(dumps))


@pytest.mark.parametrize("src,tensor,text", [
    # several statements and reads: min/max, not nested selects (TC test_inference.cc TCF)
    ("def f(float(A_0, A_1, A_2) A, float(B_0, B_1, B_2) B, float(C_0, C_1, C_2) C) -> (O2, O3) {\n"
     "  O2(j, k, l) +=! B(j, k, l) + A(i, j, k)\n  O3(k, l, m) +=! C(k, l, m) + O2(j, k, l)\n}",
     "O3", "O3: [min(min(A_2, B_1), C_0), min(B_2, C_1), C_2]"),
    ("def f(float(N) A) -> (O) { O(i) = 1 where i in 0:5  O(i) = A(i) }", "O", "O: [max(5, N)]"),
])
def test_extents_print_as_min_max(src, tensor, text):
    dump = frontend(Source(src)).ranges.dump()
    assert text in dump.splitlines()


def test_inverted_indexing_runs_the_part_of_tcs_range_at_or_above_zero():
    """TC's inference.rst: i in [11 - I, 11); A is indexed from 0, so it has
    11 elements and i starts at max(0, 11 - I)."""
    fe = frontend(Source("def reverted(float(I) B) -> (A) {\n  A(i) = B(10 - i)\n}\n"))
    assert fe.ranges.dump().splitlines() == ["A: [11]", "B: [I]", "S0 A: i in [max(0, (-I) + 11), 11)"]


@pytest.mark.parametrize("src", [
    "def f(float(N) A) -> (B) {\n  B(i) = A(i + 5)\n}\n",                  # below 0 for every N
    "def f(float(N) A) -> (B) {\n  B(i) = A(i) where i in -1:N\n}\n",      # a where range is taken as written
    "def f(float(N) A) -> (B) {\n  B(i) = A(10 - i) where i in -2:11\n}\n",
])
def test_writes_below_zero_stay_errors(src):
    with pytest.raises(TcSemanticError) as info:
        frontend(Source(src, "w.tc"))
    # (an inferred range is shown: "(range inference gives 'i' the range [-5, N - 5); ...)")
    assert str(info.value).startswith("w.tc:2:5: 'B' may be written at a negative index along dimension 0")


ZERO_START = """def rnn(float(T,B,I) x, float(I,H) Wx, float(H,H) Wh) -> (h) {
  for t in T {
    a(b, j) +=! x(t, b, i) * Wx(i, j)
    if t > 0 {
      m(b, j) +=! h(t - 1, b, k) * Wh(k, j)
      a(b, j) = a(b, j) + m(b, j)
    }
    h(t, b, j) = tanh(a(b, j))
  }
}"""


def test_an_output_index_bounded_only_by_a_tensor_written_further_down():
    """``m(b, j) +=! h(t - 1, b, k) * Wh(k, j)`` above the statement that
    writes ``h``: ``b`` takes the extent ``h`` gets there (a second pass, as
    for a reduction variable of such a read), not "cannot infer"."""
    fe = frontend(Source(ZERO_START))
    assert "S1 m: b in [0, B)" in fe.ranges.dump().splitlines()
    k = tcdsl.compile(ZERO_START, options={"disk_cache": False})
    rng = np.random.default_rng(3)
    T, B, I, H = 4, 3, 5, 6
    x, wx, wh = rng.standard_normal((T, B, I)), rng.standard_normal((I, H)) / 3, rng.standard_normal((H, H)) / 3
    h, want = np.zeros((B, H)), []
    for t in range(T):
        h = np.tanh(x[t] @ wx + h @ wh)
        want.append(h)
    np.testing.assert_allclose(k(*(a.astype(np.float32) for a in (x, wx, wh))), np.stack(want), rtol=1e-5, atol=1e-5)
    # a variable that nothing bounds is still an error, in the second pass
    with pytest.raises(TcSemanticError, match="cannot infer the range of 'q'"):
        frontend(Source(ZERO_START.replace("m(b, j) +=!", "m(b, j, q) +=!").replace("a(b, j) + m(b, j)",
                                                                                      "a(b, j) + m(b, j, 0)")))


@pytest.mark.parametrize("loop", ["T - 1:-1", "T:0", "5:T - T + 2"])
def test_a_loop_that_runs_no_step_for_any_sizes_warns(loop):
    """``for t in T - 1:-1`` (Python's ``range(T - 1, -1, -1)``) is an empty
    range: a warning at the loop, saying how to run steps backwards."""
    import warnings

    src = f"def rev(float(T,B) x) -> (y) {{\n  for t in {loop} {{\n    y(t, b) = x(t, b)\n  }}\n}}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tcdsl.compile(src, options={"disk_cache": False})
    msgs = [str(w.message) for w in caught if issubclass(w.category, TcWarning)]
    assert any(m.startswith("<string>:2:7: the loop 'for t in") and "runs no step for any sizes" in m
               and "x(T - 1 - t, ...)" in m for m in msgs), msgs


@pytest.mark.parametrize("loop", ["T", "0:T", "T - 1:T", "1:T"])
def test_a_loop_that_runs_for_some_sizes_does_not_warn(loop):
    import warnings

    src = f"def fwd(float(T,B) x) -> (y) {{\n  for t in {loop} {{\n    y(t, b) = x(t, b)\n  }}\n}}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tcdsl.compile(src, options={"disk_cache": False})
    assert not [w for w in caught if "runs no step" in str(w.message)]


# the state decays before the step's input is added: its first statement reads
# only itself, which the statement below writes with the rows and columns of x
DECAY_FIRST = """def f(float(N,B,D) x) -> (y) {
  for n in N {
    if n > 0 { S(b, d) = 0.5 * S(b, d) }
    S(b, d) += x(n, b, d)
    y(n, b, d) = S(b, d)
  }
}"""


def test_a_statement_reading_only_its_own_tensor_gets_the_extent_written_below():
    assert extents(DECAY_FIRST, {"N": 4, "B": 3, "D": 5}) == {"x": (4, 3, 5), "y": (4, 3, 5), "S": (3, 5)}
    k = tcdsl.compile(DECAY_FIRST, options={"disk_cache": False})
    rng = np.random.default_rng(2)
    for N, B, D in [(1, 1, 1), (5, 3, 4), (3, 7, 33)]:
        x = rng.standard_normal((N, B, D)).astype(np.float32)
        S, want = np.zeros((B, D)), []
        for t in range(N):
            S = (0.5 * S if t else S) + x[t]
            want.append(S)
        np.testing.assert_allclose(k(x), np.stack(want), rtol=1e-5, atol=1e-6)
    # with nothing below to give it a size, it is still an error naming the variable
    with pytest.raises(tcdsl.TcError, match="cannot infer the range of 'b'"):
        tcdsl.compile("def f(float(N,D) x) -> (y) { for n in N { S(b, d) = 0.5 * S(b, d) "
                      "y(n, d) = x(n, d) } }")


NEVER_RUNS = """def rev(float(T,B,H) a, float(T,B,H) c) -> (y) {
  for t in T {
    y(t, b, j) = a(t, b, j) + (t > 0 ? y(t - 1, b, j) : 0)
    y(T - 1 - t, b, H + j) = c(t, b, j) + (t > 0 ? y(T - t, b, H + j) : 0)
  }
}"""


def test_a_statement_whose_reads_leave_no_range_is_an_error():
    """The second direction of a bidirectional state written into columns
    ``H + j`` of ``y``, reading its own previous step: that read bounds ``j``
    by the extent ``y`` has from the first statement (``H + j < H``), while
    ``c(t, b, j)`` gives ``j >= 0``: no ``j`` at all, so the statement wrote
    nothing and the call returned half of ``y``, silently.  An error at the
    statement names the variable and the clause that gives its range; with
    the clause the program runs, as NumPy computes it."""
    with pytest.raises(TcSemanticError, match=r"<string>:4:5: this statement never runs: the reads of its right "
                                              r"side leave no value of 'j' for any sizes; a 'where j in lo:hi'"):
        frontend(Source(NEVER_RUNS))
    k = tcdsl.compile(NEVER_RUNS.replace("H + j) : 0)", "H + j) : 0) where j in 0:H"),
                      options={"disk_cache": False})
    rng = np.random.default_rng(3)
    a, c = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    want = np.concatenate([np.cumsum(a, 0), np.cumsum(c, 0)[::-1]], axis=2)
    np.testing.assert_allclose(k(a, c), want, rtol=1e-5, atol=1e-5)
    # a statement that runs for some sizes only (here none below T = 3) is no error
    frontend(Source("def f(float(T) x) -> (y) {\n  y(i) = x(i + 2) where i in 0:T - 2\n}"))
