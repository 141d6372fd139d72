"""Temporaries indexed by a sequential loop's variable kept in a few slots
(polyhedral/contract.py, codegen/tir.py).

Each program runs folded (the default) and with ``fold=False``, for symbolic
and specialized sizes, against the reference interpreter (tcdsl.testing),
which runs the program as written; the tests also check which temporaries
fold, into how many slots, and that the emitted buffer has that size.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import tcdsl
from tcdsl.driver import frontend
from tcdsl.polyhedral.contract import plan_folds
from tcdsl.source import Source
from tcdsl.testing import evaluate

from helpers import rand


def folds(src: str) -> dict[str, tuple[int, int]]:
    return {t: (f.dim, f.size) for t, f in plan_folds(frontend(Source(src, "<test>")).model).items()}


def alloc_shape(kernel, tensor: str) -> str:
    m = re.search(rf"\b{tensor} = T\.alloc_buffer\(\(([^)]*)\)", kernel.script)
    assert m, kernel.script
    return m.group(1)


@functools.cache
def compiled(src: str, mode: str, fold: bool) -> tcdsl.Kernel:
    """One kernel per program, mode and fold option for the whole module: the
    size settings of a test run on the same kernel (a specialising one builds
    a binary per size tuple)."""
    return tcdsl.compile(src, specialize=mode, options={"disk_cache": False} | ({} if fold else {"fold": False}))


def assert_runs_like_the_interpreter(src: str, inputs, modes=("never", "after-scheduling")):
    want = evaluate(src, inputs)
    want = want if isinstance(want, tuple) else (want,)
    for mode in modes:
        for fold in (True, False):
            got = compiled(src, mode, fold)(*inputs)
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


FO_POOL = """
def fo_pool(float(T,B,C) F, float(T,B,C) Z, float(T,B,C) O) -> (h) {
  for t in T {
    if t == 0 { c(t, b, j) = (1 - F(t, b, j)) * Z(t, b, j) }
    else      { c(t, b, j) = F(t, b, j) * c(t - 1, b, j) + (1 - F(t, b, j)) * Z(t, b, j) }
    h(t, b, j) = O(t, b, j) * c(t, b, j)
  }
}"""


@pytest.mark.parametrize("T,B,C", [(1, 1, 1), (2, 3, 5), (9, 4, 37), (16, 8, 64)])
def test_an_elementwise_recurrent_state_is_updated_in_place(T, B, C):
    # each c(t, b, j) is read (as c(t - 1, b, j)) only by the instance that
    # writes c(t, b, j): one slot, overwritten in place
    assert folds(FO_POOL) == {"c": (0, 1)}
    rng = np.random.default_rng(T * 100 + C)
    inputs = [rng.random((T, B, C), dtype=np.float32) for _ in range(3)]
    assert_runs_like_the_interpreter(FO_POOL, inputs)
    # the buffer: 1 slot of (B, C), whatever T is; T slots without folding
    assert alloc_shape(tcdsl.compile(FO_POOL), "c").startswith("1, B, C")
    assert alloc_shape(tcdsl.compile(FO_POOL, options={"fold": False}), "c").startswith("T")


WINDOW = """
def window(float(T,B) X) -> (y) {
  for t in T {
    s(t, b) = X(t, b) * 2
    if t >= 2 { y(t, b) = s(t, b) + s(t - 1, b) + s(t - 2, b) }
    else      { y(t, b) = s(t, b) }
  }
}"""


def test_a_window_of_three_steps_keeps_four_slots():
    # slots come in powers of two: the slot is the index & (slots - 1)
    assert folds(WINDOW) == {"s": (0, 4)}
    rng = np.random.default_rng(1)
    assert_runs_like_the_interpreter(WINDOW, [rand(rng, 11, 5)])


INNER = """
def layers(float(L,T,B) X) -> (h) {
  for l in L {
    for t in T {
      if t == 0 { c(l, t, b) = X(l, t, b) } else { c(l, t, b) = 0.5 * c(l, t - 1, b) + X(l, t, b) }
      h(l, t, b) = c(l, t, b)
    }
  }
}"""


def test_the_state_of_an_inner_loop_folds_along_its_variable():
    assert folds(INNER) == {"c": (1, 1)}
    rng = np.random.default_rng(2)
    assert_runs_like_the_interpreter(INNER, [rand(rng, 3, 7, 4)])


# The state read by a reduction in the next step (a register-tiled matmul
# inside the loop reads the folded buffer).
MATMUL_STATE = """
def rnn(float(T,B,C) X, float(C,C) W) -> (h) {
  for t in T {
    if t == 0 { c(t, b, j) = X(t, b, j) }
    else      { c(t, b, j) +=! c(t - 1, b, i) * W(i, j) }
    h(t, b, j) = tanh(c(t, b, j))
  }
}"""


# Found by the random programs: the state read in a 1-row register tile,
# unrolled, where a remainder (lowered through a Let) could not be bound twice.
FUZZ_STATE = """def fuzz(float(T, K) X3, float(K, K) X4, float(K, K) X5) -> (Y4) {
  for t in T {
    P2(b) +=! X3(t, k) * X5(k, b)
    if t == 0 { H1(t, b) = X3(t, b) * 1.5 }
    else { H1(t, b) +=! X4(k, b) * H1(t - 1, k) }
    H1(t, b) = tanh(H1(t, b) + P2(b))
    Y4(t, b) = H1(t, b) * -0.25
  }
}"""


@pytest.mark.parametrize("T,K", [(1, 2), (5, 3), (9, 300)])
@pytest.mark.slow
def test_a_state_in_an_unrolled_register_tile(T, K):
    assert folds(FUZZ_STATE) == {"H1": (0, 2)}
    rng = np.random.default_rng(K)
    assert_runs_like_the_interpreter(FUZZ_STATE, [rand(rng, T, K), rand(rng, K, K), rand(rng, K, K)])


@pytest.mark.parametrize("T,B,C", [(4, 3, 5), (6, 9, 70)])
def test_a_state_read_by_a_reduction(T, B, C):
    assert folds(MATMUL_STATE) == {"c": (0, 2)}
    rng = np.random.default_rng(C)
    assert_runs_like_the_interpreter(MATMUL_STATE, [rand(rng, T, B, C), rand(rng, C, C)])


# Two steps live, and the old value wanted where the new one is written: two slots.
TWO_SLOTS = [
    # a step's element written twice: the first write would clobber the old value
    """def f(float(T,B) X) -> (h) {
         for t in T {
           if t == 0 { c(t, b) = X(t, b) } else { c(t, b) = X(t, b) * 2
                                                  c(t, b) = c(t - 1, b) + X(t, b) }
           h(t, b) = c(t, b) } }""",
    # the old value of another element (written earlier in the step)
    """def f(float(T,B) X) -> (h) {
         for t in T {
           if t == 0 { c(t, b) = X(t, b) } else { c(t, b) = c(t - 1, b) + c(t - 1, B - 1 - b) }
           h(t, b) = c(t, b) } }""",
    # the old value read by another statement, after the update
    """def f(float(T,B) X) -> (h) {
         for t in T {
           if t == 0 { c(t, b) = X(t, b) } else { c(t, b) = c(t - 1, b) * X(t, b) }
           if t == 0 { h(t, b) = c(t, b) } else { h(t, b) = c(t, b) + c(t - 1, b) } } }""",
]


@pytest.mark.parametrize("src", TWO_SLOTS)
def test_old_values_wanted_elsewhere_keep_two_slots(src):
    assert folds(src) == {"c": (0, 2)}
    rng = np.random.default_rng(6)
    for T, B in [(1, 1), (6, 5), (9, 16)]:
        assert_runs_like_the_interpreter(src, [rand(rng, T, B)])


STATE_ONLY_NOW = """
def f(float(T,B) X) -> (h) {
  for t in T {
    s(t, b) = X(t, b) + 1
    h(t, b) = s(t, b) * s(t, b)
  }
}"""


def test_a_temporary_of_one_step_keeps_one_slot():
    assert folds(STATE_ONLY_NOW) == {"s": (0, 1)}
    rng = np.random.default_rng(3)
    assert_runs_like_the_interpreter(STATE_ONLY_NOW, [rand(rng, 5, 6)])
    assert alloc_shape(tcdsl.compile(STATE_ONLY_NOW), "s").startswith("1, B")


# What must not fold: the full tensor is needed, or folding could change
# what a read sees.
@pytest.mark.parametrize("src", [
    # read after the loop: every step's value is needed
    """def f(float(T,B) X) -> (h, w) {
         for t in T { c(t, b) = X(t, b)
                      h(t, b) = c(t, b) }
         w(b) +=! c(t, b)
       }""",
    # written in one loop, read in another
    """def f(float(T,B) X) -> (h) {
         for t in T { c(t, b) = X(t, b) }
         for t in T { h(t, b) = c(t, b) }
       }""",
    # some steps read an element no step wrote
    """def f(float(T,B) X) -> (h) {
         for t in T { if t > 2 { c(t, b) = X(t, b) }
                      h(t, b) = c(t, b) }
       }""",
    # read through a data-dependent index
    """def f(float(T,B) X, int32(T) P) -> (h) {
         for t in T { c(t, b) = X(t, b)
                      h(t, b) = c(P(t), b) }
       }""",
    # indexed by the loop variable scaled: no fixed window
    """def f(float(T,B) X) -> (h) {
         for t in T { c(2 * t, b) = X(t, b)
                      h(t, b) = c(2 * t, b) + c(t, b) }
       }""",
    # an output is never folded
    """def f(float(T,B) X) -> (c) {
         for t in T { if t == 0 { c(t, b) = X(t, b) } else { c(t, b) = c(t - 1, b) + X(t, b) } }
       }""",
])
def test_what_does_not_fold(src):
    assert folds(src) == {}


def test_not_folded_programs_still_run():
    src = """def f(float(T,B) X) -> (h, w) {
               for t in T { c(t, b) = X(t, b) * 3
                            h(t, b) = c(t, b) }
               w(b) +=! c(t, b)
             }"""
    rng = np.random.default_rng(4)
    assert_runs_like_the_interpreter(src, [rand(rng, 7, 3)], modes=("never",))


def test_cuda_keeps_whole_buffers():
    # the CUDA generator's register promotion builds accesses of its own; its temporaries are
    # parameters, allocated by the caller (docs/cuda.md, section 4)
    k = tcdsl.compile(FO_POOL, target="cuda", options={"disk_cache": False})
    assert re.search(r"\bc: T\.Buffer\(\(T_1, B, C\)", k.script)
    assert [o.shape for o in k.signature.scratch if o.name == "c"] == [("max(s['T'], 0)", "max(s['B'], 0)",
                                                                        "max(s['C'], 0)")]


def test_the_option():
    assert tcdsl.MappingOptions(fold=False).to_dict() == {"fold": False}
    k = tcdsl.compile(FO_POOL, options=tcdsl.MappingOptions(fold=False))
    assert alloc_shape(k, "c").startswith("T")
    with pytest.raises(tcdsl.TcError, match="'fold' must be True or False"):
        tcdsl.compile(FO_POOL, options={"fold": 1})
