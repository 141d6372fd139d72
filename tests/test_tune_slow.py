"""Real tuning runs (``-m slow``): reused options at an untuned size are no
slower than the defaults, and a seeded re-tune is not worse than a cold one."""
from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

import tcdsl
from helpers import ELMAN, elman_inputs

pytestmark = pytest.mark.slow

TUNED = {"T": 32, "B": 16, "Ci": 128, "Co": 128}
UNTUNED = {"T": 48, "B": 16, "Ci": 128, "Co": 128}


def median_time(k, args, reps=30) -> float:
    k(*args)
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        k(*args)
        out.append(time.perf_counter() - t)
    return statistics.median(out)


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = tmp_path_factory.mktemp("tune") / "t.sqlite"
    tcdsl.autotune(ELMAN, sizes=TUNED, trials=16, database=path, progress=False)
    return path


def test_reused_options_at_an_untuned_size_are_no_slower_than_the_defaults(database):
    k = tcdsl.compile(ELMAN, tuning_db=database)
    opts, origin = k.options_for(**UNTUNED)
    assert origin == "reused from T=32,B=16,Ci=128,Co=128"
    k0 = tcdsl.compile(ELMAN, tuning_db=False)
    args = elman_inputs(np.random.default_rng(0), *UNTUNED.values())
    np.testing.assert_allclose(k(*args), k0(*args), rtol=1e-4, atol=1e-5)
    tuned, default = [], []
    for _ in range(5):  # interleaved: the machine's load drifts
        tuned.append(median_time(k, args))
        default.append(median_time(k0, args))
    assert statistics.median(tuned) <= 1.1 * statistics.median(default)


def test_a_seeded_retune_is_not_worse_than_a_cold_one(database, tmp_path):
    """With the same budget of 8 trials at the untuned size: the re-tune seeded
    from the database measures the reused options in its first generation,
    so its best is at least as good as theirs; a cold run has only luck."""
    import shutil

    seeded_db = tmp_path / "seeded.sqlite"
    shutil.copy(database, seeded_db)
    seeded = tcdsl.autotune(ELMAN, sizes=UNTUNED, trials=8, database=seeded_db, progress=False)
    cold = tcdsl.autotune(ELMAN, sizes=UNTUNED, trials=8, database=tmp_path / "cold.sqlite", progress=False,
                          seed=1)
    reused = tcdsl.compile(ELMAN, tuning_db=database).options_for(**UNTUNED)[0].to_dict()
    assert reused in [t.options for t in seeded.trials[:4]]
    # speed-ups over each run's own defaults; 10% for the noise of two runs apart
    assert seeded.per_size[0].speedup >= 0.9 * cold.per_size[0].speedup
