"""Every program of the corpus (tests/programs) against its NumPy reference.

The corpus ports Tensor Comprehensions' own kernels (library, benchmarks,
examples, tests) and adds RNNs of the loop extension; see
tests/programs/README.md.  The default run compiles a representative subset
(``cases.representative()``: every ``.tc`` file and every tag) and each
specialised case in one mode; ``pytest -m slow`` runs the rest.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import tcdsl

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"
sys.path.insert(0, str(PROGRAMS))
import cases  # noqa: E402  (tests/programs/cases.py)


def run_case(case: cases.Case, kernel: tcdsl.Kernel) -> None:
    for i, sizes in enumerate(case.sizes):
        inputs = case.make_inputs(np.random.default_rng(i), **sizes)
        got = kernel(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        want = case.reference(*inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, f"sizes {sizes}: shape {g.shape}, NumPy {w.shape}"
            assert g.dtype == w.dtype, f"sizes {sizes}: dtype {g.dtype}, NumPy {w.dtype}"
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=f"sizes {sizes}")


# By default a representative subset (cases.representative(): every .tc file
# and every tag); ``-m slow`` runs the rest.
@pytest.mark.parametrize("case", cases.params())
def test_corpus_symbolic(case):
    run_case(case, tcdsl.compile(PROGRAMS / case.file, case.entry))


SPECIALIZED = [c for c in cases.CASES if "rnn" in c.tags or c.name in
               ("matmul", "convolution", "convolution_s2x2", "lut", "wavenet1", "prefix_sum", "gated_scan")]


MODES = ("after-scheduling", "before-scheduling")


# Each case in one mode by default, the modes by turns (both modes run); the
# other mode under ``-m slow``.
@pytest.mark.parametrize("case, mode", [
    pytest.param(c, mode, id=f"{c.name}-{mode}", marks=[] if mode == MODES[k % 2] else [pytest.mark.slow])
    for k, c in enumerate(SPECIALIZED) for mode in MODES])
def test_corpus_specialized(case, mode):
    run_case(case, tcdsl.compile(PROGRAMS / case.file, case.entry, specialize=mode))
