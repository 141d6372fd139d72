"""Golden files for the back end's stages of a few representative programs:
the isl schedule trees (``schedule``), their isl ASTs (``isl-ast``) and the
TIR (``tir``) of the Elman RNN, the QRNN, the LSTM, a matmul and a
convolution.  ``pytest --update-goldens`` rewrites tests/golden/<stage>/
(tests/conftest.py); review the diff.

The CPU mapping is given in full (threads, tiles, vector width), so that the
TIR does not depend on the machine's core count or AVX-512.
"""
from __future__ import annotations

import pytest

import tcdsl
from tcdsl import driver
from helpers import ROOT

PROGRAMS = {
    "elman": (ROOT / "examples" / "rnn" / "elman.tc", None),
    "qrnn": (ROOT / "examples" / "rnn" / "qrnn.tc", None),
    "lstm": (ROOT / "examples" / "rnn" / "lstm.tc", None),
    "matmul": (ROOT / "tests" / "programs" / "matmul.tc", "matmul"),
    "convolution": (ROOT / "tests" / "programs" / "convolution.tc", "convolution"),
}
MAPPING = {"cpu_threads": 4, "tile_rows": 4, "tile_cols": 32, "vector_width": 8, "disk_cache": False}


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def kernel(request):
    path, entry = PROGRAMS[request.param]
    return request.param, tcdsl.compile(path, entry, options=MAPPING)


@pytest.mark.parametrize("stage", ["schedule", "isl-ast", "tir"])
def test_stage_golden(kernel, stage, golden):
    name, k = kernel
    golden(stage, name, driver.emit(k, stage))
