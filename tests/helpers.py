"""Shared helpers for the numerical tests (NumPy is the reference)."""
from __future__ import annotations

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "rnn"
sys.path.insert(0, str(EXAMPLES))
import reference  # noqa: E402  (examples/rnn/reference.py)

ELMAN = EXAMPLES / "elman.tc"
QRNN = EXAMPLES / "qrnn.tc"


def rand(rng: np.random.Generator, *shape: int, dtype=np.float32) -> np.ndarray:
    scale = 1.0 / np.sqrt(shape[-2]) if len(shape) > 1 and shape[-2] > 0 else 1.0
    return (rng.standard_normal(shape) * scale).astype(dtype)


def elman_inputs(rng, T, B, Ci, Co):
    return [rand(rng, T, B, Ci), rand(rng, B, Co), rand(rng, Ci, Co), rand(rng, Co, Co)]


def qrnn_inputs(rng, T, B, C, H):
    return [rand(rng, T, B, C), rand(rng, 3, C, H), rand(rng, 3, C, H), rand(rng, 3, H)]
