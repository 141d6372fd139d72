"""benchmarks/programs.py at tiny sizes: every program of the suite compiles
with the default options and computes what its PyTorch/NumPy contenders
compute (correctness only, no timing).  The default run checks DEFAULT (the
first program of every kind that compiles in under 8 s, an LSTM and the
greedy decoder); ``pytest -m slow`` checks the others."""
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


# Programs that take 8 s or more to compile and check at tiny sizes: the next
# program of their kind stands for it in the default run.
LONG = {
    "one decode step of a llama block: rms norm, qkv, attention over cache + new token, o-proj + residual, "
    "rms norm, swiglu + residual",
    "mixture of experts, dense softmax gate", "wavenet 3 gated layers d=1,2,4 + skip sum",
    "crnn: conv1d + maxpool + gru",
    "graph readout: segment mean + max by sorted int32 graph ids, then linear (G free)",
    "conv1d weight gradient", "packed gru (pack_padded_sequence), state frozen past len, batch-first",
    "v2 mlp fwd+bwd cross-entropy"}


def _first_of_every_kind() -> set[str]:
    firsts: dict[str, str] = {}
    for p in program_defs.PROGRAMS:
        if p.name not in LONG:
            firsts.setdefault(p.kind, p.name)
    for p in program_defs.PROGRAMS:  # a kind of long programs only
        firsts.setdefault(p.kind, p.name)
    return set(firsts.values())


DEFAULT = _first_of_every_kind() | {"lstm (in,out) per gate", "greedy decoder (argmax fed back)"}


def test_the_default_subset_names_programs_of_the_suite():
    assert DEFAULT | LONG <= {p.name for p in program_defs.PROGRAMS}


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
