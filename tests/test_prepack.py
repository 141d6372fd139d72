"""Inside a sequential loop an input (or a temporary the loop does not
write) read by the register tiles as a panel (an RNN's recurrent weight) is
packed whole once per call, before the loop, in panels of ``tile_cols`` columns (codegen/panels.py
``pack_whole``); every step's tiles read the panels contiguously instead of
rows of the weight at a power-of-two stride (an LSTM at (T, B, H) =
(128, 64, 512): 155 -> 118 ms for its recurrent part).  Structure checked on
the TIR, values against NumPy (float64 for the recurrences), memory with
guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl
from helpers import LSTM_GATES_GIVEN, lstm_gates_given_reference, rand

# the recurrent weight in (in, out) layout per gate, and in PyTorch's (out, in)
# layout (a transposing copy); B rows per step, H columns
LSTM_GIVEN = LSTM_GATES_GIVEN

ELMAN_OUT_IN = """
def rnn(float(T,B,H) x, float(B,H) h0, float(H,H) Whh) -> (h) {
  hp(b, j) = h0(b, j)
  for t in T {
    a(b, j) +=! hp(b, k) * Whh(j, k)
    h(t, b, j) = tanh(x(t, b, j) + a(b, j))
    hp(b, j) = h(t, b, j)
  }
}"""


_lstm_ref = lstm_gates_given_reference


def _elman_ref(x, h0, Whh):
    hp = h0.astype(np.float64)
    out = []
    for t in range(x.shape[0]):
        hp = np.tanh(x[t] + np.einsum("bk,jk->bj", hp, Whh.astype(np.float64)))
        out.append(hp)
    return np.stack(out)


def _tir(src, **options):
    return tcdsl.compile(src, tuning_db=False, options=options).backend(None).func.script()


@pytest.mark.usefixtures("avx512_tiles")  # the TIR it reads is an AVX-512 host's
def test_recurrent_weight_is_packed_once_before_the_loop():
    text = _tir(LSTM_GIVEN)
    # the fill comes before the time loop and writes the whole weight
    fill = text.index("Wh_whole[")
    assert fill < text.index("for t in range"), text
    # the main register tiles of every step read the panels, not Wh
    assert re.search(r"acc\[r, u \* 16 \+ v\] \+ hp\[[^\]]*\] \* Wh_packed\[", text), text
    assert "Wh_packed" not in text[:fill]


def test_no_copy_for_rows_that_fill_no_tile():
    # symbolic: the copy runs only when the batch fills a register tile (a
    # batch of 1 runs none, and reads Wh itself as before)
    text = _tir(LSTM_GIVEN)
    assert re.search(r"if T\.max\(.*B.*\) >= \d+:\s+for Wh_o in T\.parallel", text), text
    # fixed at a batch of 1: no copy at all
    k = tcdsl.compile(LSTM_GIVEN, tuning_db=False, specialize="after-scheduling", sizes={"B": 1})
    assert "Wh_whole" not in k.backend({"B": 1}).func.script()


def test_prepack_off_reads_the_weight_itself():
    text = _tir(LSTM_GIVEN, prepack=False)
    assert "Wh_whole" not in text and "Wh_packed" not in text


SCALED_BEFORE = """
def rnn(float(T,B,H) x, float(B,H) h0, float(H,H) W0) -> (h) {
  W(k, j) = W0(k, j) * 0.5
  hp(b, j) = h0(b, j)
  for t in T {
    a(b, j) +=! hp(b, k) * W(k, j)
    h(t, b, j) = tanh(x(t, b, j) + a(b, j))
    hp(b, j) = h(t, b, j)
  }
}"""

# the weight changes at every step: never packed once
SCALED_EACH_STEP = """
def rnn(float(T,B,H) x, float(B,H) h0, float(H,H) W0, float(T) s) -> (h) {
  hp(b, j) = h0(b, j)
  for t in T {
    W(k, j) = W0(k, j) * s(t)
    a(b, j) +=! hp(b, k) * W(k, j)
    h(t, b, j) = tanh(x(t, b, j) + a(b, j))
    hp(b, j) = h(t, b, j)
  }
}"""


def test_a_temporary_computed_before_the_loop_is_packed_after_it_is_computed():
    text = _tir(SCALED_BEFORE)
    assert "W_whole" in text
    # the copy comes after W's own kernel and before the loop
    # (W's kernel writes W through its flat view W_rows, codegen/collapse.py)
    first = min(i for i in (text.find("W["), text.find("W_rows[")) if i >= 0)
    assert first < text.index("W_whole[") < text.index("for t in range"), text
    k = tcdsl.compile(SCALED_BEFORE, tuning_db=False)
    rng = np.random.default_rng(9)
    T, B, H = 4, 17, 100
    x, h0, W0 = rand(rng, T, B, H), rand(rng, B, H), (rand(rng, H, H) / np.sqrt(H)).astype(np.float32)
    np.testing.assert_allclose(k(x, h0, W0), _elman_ref(x, h0, (W0 * 0.5).T), rtol=1e-4, atol=2e-5)


def test_a_tensor_written_inside_the_loop_is_not_packed_whole():
    assert "W_whole" not in _tir(SCALED_EACH_STEP)
    k = tcdsl.compile(SCALED_EACH_STEP, tuning_db=False)
    rng = np.random.default_rng(10)
    T, B, H = 4, 17, 100
    x, h0, W0 = rand(rng, T, B, H), rand(rng, B, H), (rand(rng, H, H) / np.sqrt(H)).astype(np.float32)
    sc = rng.uniform(0.5, 1.5, T).astype(np.float32)
    hp, ref = h0.astype(np.float64), []
    for t in range(T):
        hp = np.tanh(x[t] + hp @ (W0.astype(np.float64) * sc[t]))
        ref.append(hp)
    np.testing.assert_allclose(k(x, h0, W0, sc), np.stack(ref), rtol=1e-4, atol=2e-5)


# a tensor the loop writes, times itself transposed (a Newton-Schulz step's
# A = X X^T): the step's register tiles read a panel of X copied at that step
# (codegen/cpu_tiles.py), where they read X a lane at a time before
GRAM_EACH_STEP = """
def gram(float(M,N) X0) -> (Y) {
  for s in 3 {
    if s == 0 { X(s, i, j) = X0(i, j) }
    else {
      A(i, k) +=! X(s - 1, i, j) * X(s - 1, k, j) / N
      X(s, i, j) +=! A(i, k) * X(s - 1, k, j) / M
    }
  }
  Y(i, j) = X(2, i, j)
}"""


def _gram_ref(X0):
    x = X0.astype(np.float64)
    for _ in range(2):
        x = (x @ x.T / x.shape[1]) @ x / x.shape[0]
    return x


def test_a_tensor_the_loop_writes_is_read_transposed_through_a_panel_of_the_step():
    text = _tir(GRAM_EACH_STEP)
    loop = text.index("for s in range")
    assert loop < text.index("X_panel = "), text
    assert re.search(r"acc\[r, u \* \d+ \+ v\] \+ X\[[^\]]*\] \* X_packed\[", text), text
    assert "A_lanes" not in text  # (the dot products it was)
    # a weight written at each step in the usual layout is read as it is (no copy per step)
    assert "W_panel" not in _tir(SCALED_EACH_STEP)


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_a_transposed_product_of_the_step_matches_numpy(mode):
    k = tcdsl.compile(GRAM_EACH_STEP, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(11)
    # rows for panels (>= 8) and not, columns of full panels, a tail, fewer than a vector
    for M, N in ((50, 37), (48, 24), (7, 30), (9, 5), (1, 3)):
        X0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        np.testing.assert_allclose(k(X0), _gram_ref(X0), rtol=1e-4, atol=1e-5, err_msg=f"{(M, N)}")


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_lstm_with_packed_weight_matches_numpy(mode):
    k = tcdsl.compile(LSTM_GIVEN, tuning_db=False, specialize=mode)
    rng = np.random.default_rng(3)
    # H: a multiple of the 48-column panels, panels and a tail, below one panel
    _check_lstm(k, rng, ((5, 17, 96), (4, 16, 100), (3, 9, 20), (2, 1, 50)))


def _check_lstm(k, rng, shapes) -> None:
    """``k`` (LSTM_GIVEN) against NumPy at each (T, B, H) of ``shapes``."""
    for T, B, H in shapes:
        G, h0, c0 = rand(rng, T, 4, B, H), rand(rng, B, H), rand(rng, B, H)
        Wh = (rand(rng, 4, H, H) / np.sqrt(H)).astype(np.float32)
        h, c = k(G, h0, c0, Wh)
        hr, cr = _lstm_ref(G, h0, c0, Wh)
        np.testing.assert_allclose(h, hr, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(c, cr, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("transpose", [True, False])
def test_out_in_weight_matches_numpy(transpose):
    # (out, in): transposed by the frontend before the loop (a temporary the
    # loop does not write: packed whole), or read across its rows
    k = tcdsl.compile(ELMAN_OUT_IN, tuning_db=False, options={"transpose": transpose})
    assert ("Whh_t_whole" in k.backend(None).func.script()) == transpose
    rng = np.random.default_rng(4)
    for T, B, H in ((6, 20, 144), (3, 16, 61)):
        x, h0, Whh = rand(rng, T, B, H), rand(rng, B, H), (rand(rng, H, H) / np.sqrt(H)).astype(np.float32)
        np.testing.assert_allclose(k(x, h0, Whh), _elman_ref(x, h0, Whh), rtol=1e-4, atol=2e-5)


ELMAN_IN_OUT_BATCH_FIRST = """
def rnn(float(B,T,H) x, float(B,H) h0, float(H,H) W) -> (h) {
  hp(b, j) = h0(b, j)
  for t in T {
    a(b, j) +=! hp(b, k) * W(k, j)
    h(b, t, j) = tanh(x(b, t, j) + a(b, j))
    hp(b, j) = h(b, t, j)
  }
}"""


def test_in_out_weight_batch_first_is_packed_and_matches_numpy():
    k = tcdsl.compile(ELMAN_IN_OUT_BATCH_FIRST, tuning_db=False)
    assert "W_whole" in k.backend(None).func.script()
    rng = np.random.default_rng(6)
    for B, T, H in ((20, 6, 144), (16, 3, 61), (9, 2, 48)):
        x, h0, W = rand(rng, B, T, H), rand(rng, B, H), (rand(rng, H, H) / np.sqrt(H)).astype(np.float32)
        ref = _elman_ref(x.transpose(1, 0, 2), h0, W.T).transpose(1, 0, 2)
        np.testing.assert_allclose(k(x, h0, W), ref, rtol=1e-4, atol=2e-5)


def test_packed_weights_stay_inside_their_tensors():
    # guard pages after and before every input and output (tests/guard.py)
    cases = [{"id": f"prepack:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (LSTM_GIVEN, {"T": 3, "B": 17, "H": 96}),
                 (LSTM_GIVEN, {"T": 2, "B": 16, "H": 53}),
                 (ELMAN_OUT_IN, {"T": 3, "B": 18, "H": 97}),
                 (ELMAN_IN_OUT_BATCH_FIRST, {"T": 3, "B": 18, "H": 97}),
                 (SCALED_BEFORE, {"T": 3, "B": 18, "H": 97}),
                 (GRAM_EACH_STEP, {"M": 33, "N": 29}), (GRAM_EACH_STEP, {"M": 8, "N": 50})])]
    guard.assert_all_work(cases)


# ------------------------------------------------ the columns after the panels
# 4 x 24 tiles (AVX2's inside a sequential loop): the columns the 24-wide
# panels leave go to packed panels of 16, with one 24-wide panel fewer where
# that leaves less than a vector (H = 512: 20 x 24 + 2 x 16, not 21 x 24 + 8,
# whose 4 x 8 tile read the weight at a stride of H and was a chain of
# dependent FMAs: the LSTM's recurrent part 8% slower)
AVX2_TILES = {"vector_width": 8, "tile_rows": 4, "tile_cols": 24}


def _loop_extent(text: str, name: str) -> str:
    m = re.search(rf"for {name} in range\(([^\n]*)\):", text)
    assert m, text
    return m.group(1)


def test_columns_after_the_panels_read_panels_of_two_vectors():
    text = _tir(LSTM_GIVEN, **AVX2_TILES)
    fill = text.index("Wh_rest[")
    assert fill < text.index("for t in range"), text
    # the 16-wide tiles read the second pack, contiguously
    assert re.search(r"acc\[r, u \* 8 \+ v\] \+ hp\[[^\]]*\] \* Wh_packed\[", text), text
    assert re.search(r"Wh_packed = T\.decl_buffer\([^\n]*data=Wh_rest\.data", text), text
    assert "_w16" in text  # (and a loop of 8-wide tiles, for rows of 8 to 15 columns only: see below)


@pytest.mark.parametrize("H, wide, two_vectors", [(512, 20, 2), (520, 21, 1), (56, 1, 2), (48, 2, 0), (32, 0, 2)])
def test_panels_of_two_vectors_take_the_columns_left(H, wide, two_vectors):
    sizes = {"T": 2, "B": 64, "H": H}
    k = tcdsl.compile(LSTM_GIVEN, tuning_db=False, specialize="after-scheduling", sizes=sizes, options=AVX2_TILES)
    text = k.backend(sizes).func.script()
    tiles24 = re.search(r"for (\w+_w24) in range\((\d+)\)", text)
    assert tiles24 and int(tiles24.group(2)) == wide, text
    tiles16 = re.search(r"for (\w+_w16) in range\((\d+)\)", text)
    assert (int(tiles16.group(2)) if tiles16 else 0) == two_vectors, text
    assert ("Wh_rest" in text) == bool(two_vectors)
    assert not re.search(r"for \w+_w8 in range\([1-9]", text)  # no tile of one vector reads Wh itself


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_lstm_with_panels_of_two_vectors_matches_numpy(mode):
    k = tcdsl.compile(LSTM_GIVEN, tuning_db=False, specialize=mode, options=AVX2_TILES)
    rng = np.random.default_rng(7)
    # H % 24: 8 (one panel fewer), 16 (one more panel of 16), 13 (fewer, then a tail), 0, below one panel;
    # below 24 and 16 columns: one vector and the tail (9 to 15 columns lost their first ones in session 22)
    _check_lstm(k, rng, ((3, 9, 56), (2, 8, 40), (3, 5, 61), (2, 4, 48), (2, 6, 19), (2, 8, 32),
                         (2, 8, 13), (2, 4, 9), (3, 8, 15), (2, 5, 8)))


def test_panels_of_two_vectors_stay_inside_their_tensors():
    cases = [{"id": f"rest:{i}", "source": LSTM_GIVEN, "sizes": sizes, "seed": i, "options": AVX2_TILES}
             for i, sizes in enumerate([{"T": 2, "B": 9, "H": 56}, {"T": 2, "B": 8, "H": 61}, {"T": 2, "B": 4, "H": 40}])]
    guard.assert_all_work(cases)
