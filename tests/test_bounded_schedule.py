"""Fixed-size scheduling under a time limit (polyhedral/bounded.py): the
schedules come back from a child process intact, a child past the limit is
killed, and the symbolic schedule then serves the sizes."""
from __future__ import annotations

import time

import islpy as isl
import numpy as np
import pytest

import tcdsl
from tcdsl import driver
from tcdsl.polyhedral import bounded
from tcdsl.polyhedral import schedule as sched_mod
from helpers import ELMAN, elman_inputs, reference

# isl's scheduler searches for more than an hour on this system at these
# sizes (islpy 2026.2), while the symbolic one is scheduled at once
# (the weight (O, K, C): k and c each last in one read, so the sum keeps the
# order written, (k, c), which isl's search at fixed sizes does not finish)
PADDED_WITH_ONE = """def pz(float(B, C, L) x, float(O, K, C) w) -> (y) {
  y(b, o, t) +=! (t + k - 1 >= 0 && t + k - 1 < L ? x(b, c, t + k - 1) : 1.0) * w(o, k, c) where t in 0:L, k in 0:K
}"""


def _padded_reference(x, w):
    B, C, L = x.shape
    O, K, _ = w.shape
    xp = np.concatenate([np.ones((B, C, 1)), x.astype(np.float64), np.ones((B, C, K))], axis=2)
    return np.stack([np.einsum("bcl,olc->bo", xp[:, :, t:t + K], w.astype(np.float64)) for t in range(L)], axis=2)


def _schedules(fixed):
    fe = driver.frontend(ELMAN.read_text())
    model = driver.model_for(fe, driver.parse_options(None).schedule)
    return model, sched_mod.schedule(model, fixed)


def test_the_child_sends_back_the_schedules_it_computed(monkeypatch):
    fixed = {"T": 5, "B": 3, "Ci": 4, "Co": 6}
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", "0")  # in this process
    model, here = _schedules(fixed)
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", "30")
    calls = []
    real = bounded.run
    monkeypatch.setattr(bounded, "run", lambda ctx, work, limit=None: calls.append(1) or real(ctx, work, limit))
    _, forked = _schedules(fixed)
    assert calls == [1]  # one child for all the kernels
    assert len(forked) == len(here) == len(model.kernels()) >= 2
    for i in here:
        # (read back, the pieces of a union may print in another order)
        again = isl.Schedule.read_from_str(model.ctx, here[i].to_str())
        assert forked[i].to_str() == again.to_str()
        assert "par" in forked[i].to_str()  # the marks the code generator reads survive


def test_a_child_past_the_limit_is_killed():
    ctx = isl.Context()
    start = time.monotonic()
    assert bounded.run(ctx, lambda: time.sleep(60) or [], limit=0.5) is None
    assert time.monotonic() - start < 30


def test_a_child_that_fails_gives_none():
    def fail():
        raise RuntimeError("isl failed")
    assert bounded.run(isl.Context(), fail, limit=10) is None


@pytest.mark.parametrize("text, want", [("", 30.0), ("2.5", 2.5), ("0", 0.0), ("-1", 0.0), ("soon", 30.0)])
def test_the_limit_comes_from_the_environment(monkeypatch, text, want):
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", text)
    assert bounded.seconds() == want


@pytest.mark.parametrize("symbolic, want", [(0.001, bounded.LEAST), (0.2, 0.2 * bounded.SCALE), (5.0, bounded.MOST)])
def test_the_limit_scales_with_the_symbolic_time(monkeypatch, symbolic, want):
    monkeypatch.delenv("TCDSL_SCHEDULE_SECONDS", raising=False)
    assert bounded.seconds(symbolic) == pytest.approx(want)
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", "2.5")  # a fixed limit wins
    assert bounded.seconds(symbolic) == 2.5


def test_a_search_that_does_not_end_is_cut_at_its_scaled_limit(monkeypatch):
    """Without TCDSL_SCHEDULE_SECONDS the child gets SCALE times what the
    symbolic schedules took, which are made once for all the size tuples and
    serve past the limit."""
    monkeypatch.delenv("TCDSL_SCHEDULE_SECONDS", raising=False)
    limits, symbolic = [], []
    real_run, real_kernel = bounded.run, sched_mod._schedule_kernel
    monkeypatch.setattr(bounded, "run", lambda ctx, work, limit=None: limits.append(limit) or real_run(ctx, work, limit))
    monkeypatch.setattr(sched_mod, "_schedule_kernel",
                        lambda k, fix, fusion="auto": (fix is None and symbolic.append(1)) or real_kernel(k, fix, fusion))
    fe = driver.frontend(PADDED_WITH_ONE)
    model = driver.model_for(fe, driver.parse_options(None).schedule)
    sizes = {"B": 2, "C": 3, "L": 13, "O": 17, "K": 3}
    got = sched_mod.schedule(model, sizes)
    kernels = model.kernels()
    assert len(symbolic) == len(kernels)
    schedules, took = model.symbolic["auto"]
    assert limits == [pytest.approx(min(bounded.MOST, max(bounded.LEAST, bounded.SCALE * took)))]
    # isl's search at these sizes takes hours: the symbolic schedules serve them
    for i, kern in enumerate(kernels):
        dom = kern.domain.intersect_params(sched_mod.fixed_set(model, sizes))
        assert got[i].to_str() == schedules[i].intersect_domain(dom).to_str()
    sched_mod.schedule(model, None)  # the symbolic kernel's: the same, not made again
    assert len(symbolic) == len(kernels)


def test_past_the_limit_the_symbolic_schedule_serves_the_sizes(monkeypatch):
    monkeypatch.setattr(bounded, "run", lambda ctx, work, limit=None: None)
    k = tcdsl.compile(ELMAN, specialize="before-scheduling",
                      options={"disk_cache": False, "measure_specialized": False})
    inputs = elman_inputs(np.random.default_rng(3), 6, 2, 5, 7)
    np.testing.assert_allclose(k(*inputs), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)
    fixed = {"T": 6, "B": 2, "Ci": 5, "Co": 7}
    model, got = _schedules(fixed)
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", "0")
    symbolic = sched_mod.schedule(model, None)
    for i, kern in enumerate(model.kernels()):
        dom = kern.domain.intersect_params(sched_mod.fixed_set(model, fixed))
        assert got[i].get_domain().is_equal(dom)
        assert got[i].to_str() == symbolic[i].intersect_domain(dom).to_str()


def test_a_program_isl_cannot_schedule_at_fixed_sizes_still_compiles(monkeypatch):
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", "2")
    results = []
    real = bounded.run
    monkeypatch.setattr(bounded, "run", lambda ctx, work, limit=None: results.append(real(ctx, work, limit)) or results[-1])
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 13)).astype(np.float32), rng.standard_normal((17, 3, 3)).astype(np.float32)
    k = tcdsl.compile(PADDED_WITH_ONE, specialize="before-scheduling",
                      options={"disk_cache": False, "measure_specialized": False})
    np.testing.assert_allclose(k(x, w), _padded_reference(x, w), rtol=1e-4, atol=1e-4)
    assert k.cache_info()["compiles"] == 1  # the per-size binary, not the symbolic one
    assert results == [None]  # the child ran out of time (isl's search here takes hours)


def test_a_child_reaped_unseen_still_gives_its_schedules(monkeypatch):
    """With SIGCHLD ignored the kernel reaps the child itself (waitpid finds
    no child): the text read from it still counts when it is whole."""
    import signal

    fixed = {"T": 4, "B": 2, "Ci": 3, "Co": 5}
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", "30")
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        model, got = _schedules(fixed)
        assert bounded.run(isl.Context(), lambda: (_ for _ in ()).throw(RuntimeError("no")), limit=10) is None
    finally:
        signal.signal(signal.SIGCHLD, old)
    monkeypatch.setenv("TCDSL_SCHEDULE_SECONDS", "0")
    _, here = _schedules(fixed)
    assert [isl.Schedule.read_from_str(model.ctx, here[i].to_str()).to_str() for i in here] == \
        [got[i].to_str() for i in got]
