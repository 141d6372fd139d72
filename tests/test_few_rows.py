"""Rows fewer than the threads' register tiles (an RNN's small batch): the
parallel loop cuts the rows evenly, no more than an even share per thread
(codegen/cpu.py, ``ChunkedLoop._chunks``), and the rows a thread has left
below a full tile run first in tiles of half the rows and twice the columns
(codegen/cpu_tiles.py, ``leftover_rows``)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import ELMAN, elman_inputs, rand, reference

TILES = {"tile_rows": 4, "tile_cols": 24, "vector_width": 8, "disk_cache": False}


class _T:
    """What the chunk counts in the printed TIR call (``T.max``, ``T.min``, ``T.Select``)."""
    max, min = staticmethod(max), staticmethod(min)
    Select = staticmethod(lambda c, a, b: a if c else b)


class _Cells(dict):
    def __missing__(self, key):
        return self.setdefault(key, {})


def _chunks_at(k, **sizes) -> list[int]:
    """The parallel chunk loops' trip counts, read from the printed TIR and
    evaluated at ``sizes`` (the time size is printed ``T_1``), with the
    integer bindings and local array cells before them (the chunk size is
    stored and read back: codegen/cpu_strips.py ``opaque``)."""
    env = _Cells({"T": _T, **{("T_1" if n == "T" else n): v for n, v in sizes.items()}})
    counts = []
    for line in k.script.splitlines():
        loop = re.match(r"\s*for \w+_chunk in T\.parallel\((.*)\):", line)
        if loop:
            counts.append(eval(loop.group(1), {}, env))
            continue
        bind = re.match(r"\s*(\w+)(?:\[(\d+)\])?(?:: T\.(?:let\[T\.int32\]|int32))? = (.*)$", line)
        if bind and (bind.group(2) or ": T." in line):
            try:
                value = eval(bind.group(3), {}, env)
            except Exception:  # (a binding of a loop variable: not needed for the counts)
                continue
            if bind.group(2):
                env[bind.group(1)][int(bind.group(2))] = value
            else:
                env[bind.group(1)] = value
    return counts


@pytest.mark.parametrize("threads, batch, chunks", [(2, 4, 2), (2, 3, 2), (2, 1, 1), (4, 4, 4), (4, 6, 3),
                                                     (2, 12, 2), (2, 64, 2), (3, 7, 3)])
def test_every_thread_gets_rows(threads, batch, chunks):
    """Elman's recurrence runs as one chunk per thread over the batch: at a
    batch of 4 with tiles of 4 rows, two threads get 2 rows each (one chunk
    of 4 before: one thread idle); 12 rows on 2 threads 6 and 6."""
    k = tcdsl.compile(ELMAN, options={**TILES, "cpu_threads": threads})
    counts = _chunks_at(k, T=8, B=batch, Ci=16, Co=16)
    assert counts[-1] == chunks, counts  # the last parallel loop: the one around the time loop


def test_half_tiles_take_the_leftover_rows():
    k = tcdsl.compile(ELMAN, options={**TILES, "cpu_threads": 2})
    step = k.script[k.script.index("for t in range("):]
    # the rows left below a full tile of 4: tiles of 2 rows x 48 columns, then single rows
    assert re.search(r"for c\d+_h in range\(c\d+_rows\w* % 4 // 2\):", step)
    assert "acc = T.alloc_buffer((2, 48))" in step
    assert re.search(r"for c\d+_t in range\(c\d+_rows\w* % 4 % 2\):", step)
    # outside the time loop (the hoisted projection of T * B rows) no half tiles
    assert "alloc_buffer((2, 48))" not in k.script[:k.script.index("for t in range(")]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_elman_at_every_small_batch(threads):
    """Each batch from 1 to 13 exercises a different split of full, half and
    single rows over the chunks; Co = 61 adds column tails."""
    k = tcdsl.compile(ELMAN, options={**TILES, "cpu_threads": threads})
    rng = np.random.default_rng(threads)
    for batch in range(1, 14):
        args = elman_inputs(rng, 5, batch, 19, 61)
        want = reference.elman_rnn(*(a.astype(np.float64) for a in args))
        np.testing.assert_allclose(k(*args), want, rtol=1e-4, atol=1e-4, err_msg=f"B={batch}")


LSTM_OI = """def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0, float(4,H,I) Wx, float(4,H,H) Wh) -> (h, c) {
  hp(b, j) = h0(b, j)
  cp(b, j) = c0(b, j)
  for t in T {
    gates(g, b, j) +=! x(t, b, i) * Wx(g, j, i)
    gates(g, b, j) += hp(b, k) * Wh(g, j, k)
    c(t, b, j) = sigmoid(gates(1, b, j)) * cp(b, j) + sigmoid(gates(0, b, j)) * tanh(gates(2, b, j))
    h(t, b, j) = sigmoid(gates(3, b, j)) * tanh(c(t, b, j))
    hp(b, j) = h(t, b, j)
    cp(b, j) = c(t, b, j)
  }
}"""


def test_lstm_in_pytorch_layout_at_small_batches():
    k = tcdsl.compile(LSTM_OI, options={**TILES, "cpu_threads": 2})
    rng = np.random.default_rng(0)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for batch in (1, 2, 3, 5, 6, 9):
        T, I, H = 4, 13, 53
        x, h0, c0 = rand(rng, T, batch, I), rand(rng, batch, H), rand(rng, batch, H)
        Wx, Wh = rand(rng, 4, H, I), rand(rng, 4, H, H)
        h, c = k(x, h0, c0, Wx, Wh)
        hp, cp = h0.astype(np.float64), c0.astype(np.float64)
        for t in range(T):
            g = np.einsum("bi,gji->gbj", x[t], Wx) + np.einsum("bk,gjk->gbj", hp, Wh)
            cp = sig(g[1]) * cp + sig(g[0]) * np.tanh(g[2])
            hp = sig(g[3]) * np.tanh(cp)
            np.testing.assert_allclose(c[t], cp, rtol=1e-4, atol=1e-4, err_msg=f"B={batch} t={t}")
            np.testing.assert_allclose(h[t], hp, rtol=1e-4, atol=1e-4, err_msg=f"B={batch} t={t}")
