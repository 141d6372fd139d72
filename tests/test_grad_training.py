"""examples/rnn/train.py: training with a tcdsl op matches PyTorch, and DDP gives both ranks the same gradients."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import ROOT

pytest.importorskip("torch")

TRAIN = ROOT / "examples" / "rnn" / "train.py"


@pytest.mark.slow
def test_loss_curve_matches_pytorch(capsys):
    sys.path.insert(0, str(TRAIN.parent))
    try:
        import train
    finally:
        sys.path.remove(str(TRAIN.parent))
    assert train.main(["--steps", "40", "--tolerance", "1e-3"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("OK")
    first = next(line for line in out.splitlines() if line.startswith("step    0:"))
    last = next(line for line in out.splitlines() if line.startswith("step   39:"))
    assert float(last.split()[3]) < float(first.split()[3])  # it learns


@pytest.mark.slow
def test_ddp_two_processes_identical_gradients_and_parameters():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(TRAIN), "--ddp", "--steps", "3", "--hidden", "8", "--length", "6",
                           "--batch", "8"], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "DDP: identical gradients and parameters on both ranks" in proc.stdout
    assert "ddp step 2:" in proc.stdout
