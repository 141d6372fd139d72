"""benchmarks/programs.py at tiny sizes: every program of the suite compiles
with the default options and computes what its PyTorch/NumPy contenders
compute (correctness only, no timing).  The default run checks DEFAULT (the
first program of every kind, an LSTM, the greedy decoder and the programs
that compile in well under a second); ``pytest -m slow`` checks the others."""
from __future__ import annotations

import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import program_defs  # noqa: E402
import programs  # noqa: E402


def test_the_suite_has_at_least_25_programs_of_every_kind():
    assert len(program_defs.PROGRAMS) >= 25
    assert len({p.name for p in program_defs.PROGRAMS}) == len(program_defs.PROGRAMS)
    kinds = {p.kind for p in program_defs.PROGRAMS}
    assert {"rnn", "attention", "norm", "conv", "matmul", "loss", "embedding"} <= kinds


def _first_of_every_kind() -> set[str]:
    firsts: dict[str, str] = {}
    for p in program_defs.PROGRAMS:
        firsts.setdefault(p.kind, p.name)
    return set(firsts.values())


DEFAULT = _first_of_every_kind() | {
    "lstm (in,out) per gate", "greedy decoder (argmax fed back)", "layer norm", "rms norm",
    "conv1d same padding + bias", "dilated causal conv1d (d=4)", "depthwise conv1d (K=7 same)",
    "depthwise conv2d 3x3 valid", "linear + gelu", "mse loss"}


def test_the_default_subset_names_programs_of_the_suite():
    assert DEFAULT <= {p.name for p in program_defs.PROGRAMS}


@pytest.mark.parametrize("p", [pytest.param(p, id=p.name, marks=[] if p.name in DEFAULT else [pytest.mark.slow])
                               for p in program_defs.PROGRAMS])
def test_program_matches_its_contenders_at_tiny_sizes(p):
    errors = programs.check(p, p.tiny, torch)
    assert errors, "a program without a contender"
    assert all(e <= programs.RTOL for e in errors.values()), errors


def test_error_sees_a_wrong_result():
    import numpy as np

    a = np.ones((2, 3), np.float32)
    assert programs.error(a, a) == 0
    assert programs.error(a, a + 0.1) > programs.RTOL
    assert programs.error(a, a[:1]) == float("inf")
    assert programs.error(np.array([1, 2], np.int32), np.array([1, 3], np.int32)) == 1


def test_ascii_chart_marks_one_and_the_ratio():
    rows = [{"name": "a", "ratio": 2.0}, {"name": "b", "ratio": 0.5}]
    lines = programs.ascii_chart(rows).splitlines()
    assert len(lines) == 2 and all("|" in line for line in lines)
    assert lines[0].endswith("2.00") and lines[1].endswith("0.50")
    assert lines[0].index("#") > lines[1].index("#")
