"""TVM's thread-pool settings that ``import tcdsl`` makes (tcdsl/__init__.py):
a short spin after a parallel region, so that its workers stop competing with
PyTorch's threads soon after a kernel returns; a value the user set is kept."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import tcdsl

ROOT = Path(__file__).resolve().parent.parent
SHOW = "import tcdsl, os; print(os.environ['TVM_THREAD_POOL_SPIN_COUNT'], os.environ['TVM_NUM_THREADS'])"


def _run(env_extra: dict) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_THREAD_POOL_SPIN_COUNT", "TVM_NUM_THREADS")}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", SHOW], env=env, capture_output=True, text=True,
                          check=True).stdout.split()


def test_import_sets_a_short_spin_unless_the_user_set_one():
    assert tcdsl.THREAD_POOL_SPIN_COUNT < 300000  # TVM's default
    assert _run({})[0] == str(tcdsl.THREAD_POOL_SPIN_COUNT)
    assert _run({"TVM_THREAD_POOL_SPIN_COUNT": "0", "TVM_NUM_THREADS": "3"}) == ["0", "3"]


def test_parallel_kernels_still_compute_right_after_the_pool_sleeps():
    k = tcdsl.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
                      options={"disk_cache": False})
    assert "T.parallel" in k.script
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((40, 17)).astype(np.float32), rng.standard_normal((17, 30)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(k(A, B), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-5)
