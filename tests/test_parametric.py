"""The emitted code is parametric: one symbolic kernel serves every size."""
from __future__ import annotations

import re

import numpy as np

import tcdsl
from tcdsl.codegen.cpu import vector_lanes
from helpers import ELMAN, elman_inputs, reference


def test_elman_tir_keeps_sizes_symbolic():
    k = tcdsl.compile(ELMAN)
    script = k.script
    header = script[script.index("def elman_rnn("): script.index("):")]
    for size in ("T", "B", "Ci", "Co"):
        assert re.search(rf"\b{size}(_1)?: T\.int32", header), f"size {size} is not a parameter:\n{header}"
    # the buffers are shaped by those variables, not by constants
    assert re.search(r"input: T\.Buffer\(\(T(_1)?, B, Ci\)", script)
    assert re.search(r"hidden: T\.Buffer\(\(T(_1)?, B, Co\)", script)
    assert not re.search(r"T\.Buffer\(\(\d", script)
    # t is a serial loop around a parallel kernel
    assert re.search(r"for t in range\(", script)
    assert "T.parallel(" in script


def test_one_compilation_serves_all_sizes():
    k = tcdsl.compile(ELMAN, options={"disk_cache": False})
    assert k.cache_info()["compiles"] == 1
    calls = 0
    for T in (1, 3, 17):
        for B in (1, 4):
            inputs = elman_inputs(np.random.default_rng(T * 10 + B), T, B, 6, 5)
            np.testing.assert_allclose(k(*inputs), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)
            calls += 1
    info = k.cache_info()
    assert info["compiles"] == 1
    assert info["hits"] == calls
    assert info["disk_hits"] == 0


def test_schedule_keeps_t_outside_the_kernel():
    k = tcdsl.compile(ELMAN)
    sched = k.schedule
    assert "for t (sequential)" in sched
    assert '"par"' in sched and '"seq"' in sched  # coincident (b, co) and the serial reduction


def test_innermost_stride_one_loop_is_vectorized_with_a_tail():
    k = tcdsl.compile("def f(float(N,M) A, float(N,M) B) -> (C) { C(i,j) = A(i,j) * B(i,j) + 1 }")
    script = k.script
    # rows of A, B and C are adjacent: one parallel vector loop over N * M elements (codegen/collapse.py)
    lanes = vector_lanes()  # 16 with AVX-512, else 8
    assert f"for c0_o in T.parallel(T.max(T.max(N, 0) * T.max(M, 0), 0) // {lanes}):" in script
    assert f"T.vectorized({lanes})" in script
    assert re.search(rf"T\.max\(M, 0\), 0\) % {lanes}", script)  # the scalar tail for symbolic sizes
    A = np.random.default_rng(0).standard_normal((3, 21)).astype(np.float32)
    np.testing.assert_allclose(k(A, A), A * A + 1, rtol=1e-6)


def test_reduction_loop_is_vectorized_only_through_partial_accumulators():
    """A loop over the reduced dimension never becomes a plain vector loop
    (its iterations depend on each other through ``O(n)``); it runs with
    vector lanes of partial sums (codegen/cpu_reduce.py), or scalar without them."""
    src = "def s(float(N,K) A) -> (O) { O(n) +=! A(n,k) }"
    k = tcdsl.compile(src)
    assert "O_lanes = T.alloc_buffer((16,))" in k.script
    assert "O_lanes[c1_v] = O_lanes[c1_v] + A[" in k.script
    assert "vectorized" not in tcdsl.compile(src, options={"reduce_lanes": 0}).script
    A = np.random.default_rng(1).standard_normal((3, 37)).astype(np.float32)
    np.testing.assert_allclose(k(A), A.astype(np.float64).sum(1), rtol=1e-5)
