"""Autotuning: the search space, the tuning database, options reuse in
``tcdsl.compile`` and ``tcdsl.autotune`` on tiny programs (a few trials).

Real tuning runs are in tests/test_tune_slow.py (``-m slow``) and
benchmarks/tuning.py."""
from __future__ import annotations

import dataclasses
import multiprocessing
import pathlib
import random
import statistics
import time

import numpy as np
import pytest

import tcdsl
from tcdsl.tune import database as dbm
from tcdsl.tune.database import IN_PROCESS, Database, Record
from tcdsl.tune.reuse import Tuned, program_key
from tcdsl.tune.space import space_for
from tcdsl.tune.workload import dispatch, learn_rule, select
from helpers import ELMAN, elman_inputs, reference

SMALL = {"T": 3, "B": 2, "Ci": 4, "Co": 8}

LSTM = """
def lstm(float(T,B,I) x, float(B,H) h0, float(B,H) c0,
         float(4,I,H) Wx, float(4,H,H) Wh, float(4,H) bias) -> (h, c) {
  hp(b, j) = h0(b, j)
  cp(b, j) = c0(b, j)
  for t in T {
    gates(g, b, j) +=! x(t, b, i) * Wx(g, i, j)
    gates(g, b, j) += hp(b, k) * Wh(g, k, j)
    gates(g, b, j) = gates(g, b, j) + bias(g, j)
    c(t, b, j) = sigmoid(gates(1, b, j)) * cp(b, j)
               + sigmoid(gates(0, b, j)) * tanh(gates(2, b, j))
    h(t, b, j) = sigmoid(gates(3, b, j)) * tanh(c(t, b, j))
    hp(b, j) = h(t, b, j)
    cp(b, j) = c(t, b, j)
  }
}
"""


def lstm_reference(x, h0, c0, Wx, Wh, bias):
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    hs, cs = [], []
    for t in range(x.shape[0]):
        g = np.einsum("bi,gij->gbj", x[t], Wx) + np.einsum("bk,gkj->gbj", h, Wh) + bias[:, None, :]
        c = sig(g[1]) * c + sig(g[0]) * np.tanh(g[2])
        h = sig(g[3]) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return np.stack(hs), np.stack(cs)


def elman_key(target="llvm"):
    from tcdsl import driver
    from tcdsl.source import Source

    return program_key(driver.frontend(Source.load(ELMAN)), target)


# ------------------------------------------------------------------ space
def test_the_default_point_is_the_code_generators_own_pick():
    space = space_for("llvm")
    d = space.default()
    assert space.options(d) == {}
    defaults = tcdsl.MappingOptions()
    for k in space.knobs:
        assert d[k.name] == getattr(defaults, k.name)
    assert space.point(tcdsl.MappingOptions(tile_rows=6)) == {**d, "tile_rows": 6}


def test_validity_is_the_code_generators():
    space = space_for("llvm")
    bad = space.point({"tile_cols": 24, "vector_width": 16})  # 24 is not a multiple of 16
    assert not space.valid(bad)
    with pytest.raises(tcdsl.TcError, match="multiple of 'vector_width'"):
        tcdsl.compile(ELMAN, options=space.options(bad))
    too_big = space.point({"tile_rows": 12, "tile_cols": 128})
    assert not space.valid(too_big)
    assert space.valid(space.point({"tile_rows": 6, "tile_cols": 64}))


def test_moves_give_valid_distinct_points():
    space, rng = space_for("llvm"), random.Random(1)
    d = space.default()
    for _ in range(50):
        p = space.random(rng)
        assert space.valid(p)
        m = space.mutate(p, rng)
        assert space.valid(m) and m != p
        assert space.valid(space.crossover(p, m, rng))
        assert len(space.features(p)) == len(space.features(d))


def test_the_first_generation_is_the_defaults_and_their_neighbours():
    from tcdsl.tune.search import Search

    space = space_for("llvm")
    d = space.default()
    for seed in range(3):
        search = Search(space, [{"T": 8}], [1.0], rng=random.Random(seed))
        batch = search.propose(8)
        assert batch[0] == d and len(batch) == 8
        assert len({space.key(p) for p in batch}) == 8
        changed = [sum(p[k.name] != d[k.name] for k in space.knobs) for p in batch[1:]]
        # three quarters of the batch: the defaults with one knob changed;
        # the last quarter random points, farther away
        assert changed[:5] == [1] * 5, changed
        assert all(c >= 1 for c in changed[5:]), changed


def test_without_register_tiles_the_tile_shape_is_not_a_choice():
    space = space_for("llvm")
    a = space.canonical(space.point({"register_tiles": False, "tile_rows": 2}))
    b = space.canonical(space.point({"register_tiles": False, "tile_rows": 6}))
    assert space.key(a) == space.key(b)


def test_cuda_space_checks_threads():
    space = space_for("cuda")
    assert space.options(space.default()) == {}
    assert not space.valid({**space.default(), "threads": 4096})


# ------------------------------------------------------------------ fusion
@pytest.mark.parametrize("fusion", ["auto", "isl", "outer", "none"])
def test_every_fusion_choice_computes_the_lstm(fusion):
    rng = np.random.default_rng(0)
    T, B, I, H = 4, 3, 5, 8
    args = [rng.standard_normal(s).astype(np.float32) * 0.4
            for s in [(T, B, I), (B, H), (B, H), (4, I, H), (4, H, H), (4, H)]]
    h, c = tcdsl.compile(LSTM, options={"fusion": fusion}, tuning_db=False)(*args)
    rh, rc = lstm_reference(*args)
    np.testing.assert_allclose(h, rh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c, rc, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_fusion_choices_are_different_schedules():
    scheds = {f: tcdsl.compile(LSTM, options={"fusion": f}, tuning_db=False).schedule for f in ("isl", "outer", "none")}
    assert len(set(scheds.values())) == 3


def test_bad_fusion_is_a_tc_error():
    with pytest.raises(tcdsl.TcError, match="'fusion' must be one of"):
        tcdsl.compile(LSTM, options={"fusion": "max"})


# ------------------------------------------------------------------ database
def rec(sizes, options, seconds, run="r1", device="local"):
    return Record(sizes, options, seconds, None if seconds is not None else "failed", device, run, time.time())


def test_database_keeps_every_measurement_and_the_median_decides(tmp_path):
    db, key = Database(tmp_path / "t.sqlite"), elman_key()
    s = dict(SMALL)
    db.add(key, [rec(s, {}, 1.0), rec(s, {"tile_rows": 2}, 0.5), rec(s, {"tile_rows": 2}, 2.0),
                 rec(s, {"tile_rows": 2}, 1.5), rec(s, {"fold": False}, 0.9), rec(s, {"parallel": False}, None)])
    assert len(db.records(key)) == 6 and len(db.records(key, ok_only=True)) == 5
    (options, seconds), = db.best(key).values()
    assert options == {"fold": False} and seconds == 0.9  # tile_rows=2's median is 1.5
    other = dataclasses.replace(key, cpu="another cpu")
    assert db.records(other) == []


def test_in_process_records_decide_and_the_defaults_keep_a_near_tie(tmp_path):
    db, key = Database(tmp_path / "t.sqlite"), elman_key()
    # the runner process found tile_rows=2 twice as fast; called in process it is 1% faster: a tie
    db.add(key, [rec(SMALL, {}, 1.0), rec(SMALL, {"tile_rows": 2}, 0.5),
                 rec(SMALL, {}, 2.00, device=IN_PROCESS), rec(SMALL, {}, 2.02, device=IN_PROCESS),
                 rec(SMALL, {"tile_rows": 2}, 1.98, device=IN_PROCESS),
                 rec(SMALL, {"tile_rows": 2}, 1.99, device=IN_PROCESS)])
    (options, seconds), = db.best(key).values()
    assert options == {} and seconds == pytest.approx(2.01)
    # a clear win in process is kept
    db.add(key, [rec(SMALL, {}, 1.0, run="r2"), rec(SMALL, {"fold": False}, 1.0, run="r2"),
                 rec(SMALL, {}, 2.0, run="r2", device=IN_PROCESS), rec(SMALL, {"fold": False}, 1.5, run="r2",
                                                                         device=IN_PROCESS)])
    (options, seconds), = db.best(key).values()
    assert options == {"fold": False} and seconds == 1.5


def test_the_defaults_win_unless_beaten_by_the_margin():
    from tcdsl.tune.database import MARGIN, choose

    assert choose({"{}": 1.0, '{"fold": false}': 1.0 - MARGIN / 2}) == "{}"
    assert choose({"{}": 1.0, '{"fold": false}': 1.0 - 2 * MARGIN}) == '{"fold": false}'
    assert choose({'{"fold": false}': 1.0, '{"tile_rows": 2}': 0.99}) == '{"tile_rows": 2}'  # no defaults measured


def test_a_candidate_is_kept_only_when_it_wins_round_after_round():
    from tcdsl.tune.confirm import Confirmed, sign_test

    assert sign_test(15, 15) == pytest.approx(0.5 ** 15) and sign_test(0, 15) == 1.0
    assert sign_test(11, 15) < 0.1 < sign_test(10, 15)
    d = [1.0] * 15
    fold, tiles = '{"fold": false}', '{"tile_rows": 2}'
    options = {"{}": {}, fold: {"fold": False}, tiles: {"tile_rows": 2}}
    # 10% faster in the median, but in only 9 of 15 rounds (a drifting machine): the defaults stay
    lucky = [0.5] * 9 + [1.2] * 6
    kept, seconds, default = Confirmed([{"{}": d, fold: lucky}], options).decision(0)
    assert kept == {} and seconds == default == 1.0
    # 5% faster in 12 of 15 rounds: kept; of two such, the one with the smaller median ratio
    steady, better = [0.95] * 12 + [1.01] * 3, [0.9] * 12 + [1.02] * 3
    assert Confirmed([{"{}": d, fold: steady}], options).decision(0) == ({"fold": False}, 0.95, 1.0)
    assert Confirmed([{"{}": d, fold: steady, tiles: better}], options).decision(0)[0] == {"tile_rows": 2}
    # within the margin: the defaults
    assert Confirmed([{"{}": d, fold: [0.99] * 15}], options).decision(0)[0] == {}


def test_the_tuners_decision_overrides_the_medians(tmp_path):
    db, key = Database(tmp_path / "t.sqlite"), elman_key()
    db.add(key, [rec(SMALL, {}, 1.0), rec(SMALL, {"fold": False}, 0.5)])
    db.add_decision(key, SMALL, {}, 1.0, "r1")
    (options, seconds), = db.best(key).values()
    assert options == {} and seconds == 1.0
    db.add(key, [rec(SMALL, {}, 1.0, run="r2"), rec(SMALL, {"fold": False}, 0.5, run="r2")])  # a newer run, undecided
    (options, _), = db.best(key).values()
    assert options == {"fold": False}


def test_the_latest_run_at_a_size_wins(tmp_path):
    db, key = Database(tmp_path / "t.sqlite"), elman_key()
    db.add(key, [rec(SMALL, {"tile_rows": 2}, 0.1, run="old"), rec(SMALL, {"fold": False}, 0.9, run="new")])
    (options, _), = db.best(key).values()
    assert options == {"fold": False}


def _write_many(path: str, n: int, tag: str) -> None:
    from tcdsl.tune.database import Database, Key, Record

    db = Database(path)
    key = Key("p", "e", "llvm", "cpu")
    for i in range(n):
        db.add(key, [Record({"N": i}, {"tag": tag}, float(i), None, "local", tag, 0.0)])


@pytest.mark.slow
def test_concurrent_tuners_lose_no_record(tmp_path):
    path = str(tmp_path / "t.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(path, 60, f"w{i}")) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert Database(path).count() == 180


def test_default_location_is_beside_the_disk_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TCDSL_TUNING_DB", raising=False)
    monkeypatch.setenv("TCDSL_CACHE_DIR", str(tmp_path / "cache"))
    assert Database().path == tmp_path / "cache" / dbm.FILE_NAME
    monkeypatch.setenv("TCDSL_TUNING_DB", str(tmp_path / "mine.sqlite"))
    assert Database().path == tmp_path / "mine.sqlite"


# ------------------------------------------------------------------ reuse
def tuned_db(tmp_path, entries):
    db = Database(tmp_path / "t.sqlite")
    db.add(elman_key(), [rec(s, o, t) for s, o, t in entries])
    return db


def run_elman(k, **sizes):
    s = {**SMALL, **sizes}
    args = elman_inputs(np.random.default_rng(0), s["T"], s["B"], s["Ci"], s["Co"])
    np.testing.assert_allclose(k(*args), reference.elman_rnn(*args), rtol=1e-4, atol=1e-5)


def test_compile_takes_tuned_options_and_says_where_they_come_from(tmp_path):
    tuned = {"tile_rows": 2, "fold": False}
    db = tuned_db(tmp_path, [(SMALL, {}, 1.0), (SMALL, tuned, 0.5)])
    k = tcdsl.compile(ELMAN, tuning_db=db.path)
    assert k.options.to_dict() == tuned
    opts, origin = k.options_for(**SMALL)
    assert opts == tcdsl.MappingOptions(**tuned) and origin == "tuned at T=3,B=2,Ci=4,Co=8"
    opts, origin = k.options_for(**{**SMALL, "T": 50})
    assert opts == tcdsl.MappingOptions(**tuned) and origin == "reused from T=3,B=2,Ci=4,Co=8"
    run_elman(k)
    run_elman(k, T=7)


def test_tuning_db_false_and_explicit_options_win(tmp_path):
    db = tuned_db(tmp_path, [(SMALL, {"tile_rows": 2}, 0.5)])
    k = tcdsl.compile(ELMAN, tuning_db=False)
    assert k.options_for(**SMALL) == (tcdsl.MappingOptions(), "defaults")
    k = tcdsl.compile(ELMAN, options={"fold": False}, tuning_db=db.path)
    assert k.options_for(**SMALL) == (tcdsl.MappingOptions(fold=False), "given by options=")
    k = tcdsl.compile(ELMAN, tuning_db=tmp_path / "none.sqlite")
    assert k.options_for(**SMALL) == (tcdsl.MappingOptions(), "defaults")
    assert not (tmp_path / "none.sqlite").exists()  # reading never creates a database


def test_the_nearest_tuned_size_is_reused(tmp_path):
    near, far = {**SMALL, "T": 40}, {**SMALL, "T": 3}
    db = tuned_db(tmp_path, [(far, {"tile_rows": 2}, 0.5), (near, {"tile_rows": 3}, 0.5)])
    k = tcdsl.compile(ELMAN, specialize="after-scheduling", tuning_db=db.path)
    opts, origin = k.options_for(**{**SMALL, "T": 64})
    assert opts.tile_rows == 3 and origin == "reused from T=40,B=2,Ci=4,Co=8"
    opts, origin = k.options_for(**{**SMALL, "T": 2})
    assert opts.tile_rows == 2 and origin == "reused from T=3,B=2,Ci=4,Co=8"


def test_specialised_binaries_get_their_sizes_options(tmp_path):
    a, b = {**SMALL, "T": 3}, {**SMALL, "T": 40}
    db = tuned_db(tmp_path, [(a, {"tile_rows": 2, "hoist": False}, 0.5), (b, {"tile_rows": 3}, 0.5)])
    k = tcdsl.compile(ELMAN, specialize="before-scheduling", tuning_db=db.path)
    assert k._options_at(a).cpu.tile_rows == 2 and k._options_at(b).cpu.tile_rows == 3
    # hoist is decided by the frontend, once for the kernel: the symbolic choice (the last tuned size)
    assert "hoist" not in k._options_at(a).keys()
    run_elman(k, T=3)
    run_elman(k, T=40)
    # a binary per size tuple (and the symbolic one they are measured against, dispatch.py)
    assert k.cache_info()["compiles"] >= 2


def test_a_broken_database_warns_and_compiles_with_defaults(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.warns(RuntimeWarning, match="using the default options"):
        k = tcdsl.compile(ELMAN, tuning_db=bad)
    assert k.options_for(**SMALL)[1] == "defaults"


def test_options_for_checks_the_sizes(tmp_path):
    k = tcdsl.compile(ELMAN, tuning_db=False)
    with pytest.raises(tcdsl.TcError, match="'X' is not a size"):
        k.options_for(X=3)
    with pytest.raises(tcdsl.TcError, match="missing"):
        k.options_for(T=3)


# ------------------------------------------------------------------ workload rule
def test_select_keeps_the_sets_that_cover_the_workload():
    ratios = [[1.0, 1.0, 1.0],   # the defaults
              [0.5, 1.2, 1.2],   # best at size 0
              [1.2, 0.6, 0.7],   # best at sizes 1 and 2
              [0.9, 0.9, 0.9]]
    chosen, labels = select(ratios, [1, 1, 1])
    assert sorted(chosen) == [1, 2]
    assert [chosen[i] for i in labels] == [1, 2, 2]
    assert select(ratios, [1, 0, 0], max_sets=1)[0] == [1]


def test_the_dispatch_rule_separates_sizes():
    names = ["T", "B"]
    sizes = [{"T": t, "B": 8} for t in (2, 4, 8, 64, 128, 256)]
    labels = [0, 0, 0, 1, 1, 1]
    rule = learn_rule(names, sizes, labels, [1] * 6)
    assert [dispatch(rule, s) for s in sizes] == labels
    assert dispatch(rule, {"T": 3, "B": 8}) == 0 and dispatch(rule, {"T": 1000, "B": 8}) == 1
    assert dispatch(learn_rule(names, sizes, [1] * 6, [1] * 6), {"T": 5, "B": 1}) == 1


# ------------------------------------------------------------------ autotune
@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One tiny tuning run of the Elman RNN (4 trials), shared by the tests below."""
    path = tmp_path_factory.mktemp("tune") / "t.sqlite"
    result = tcdsl.autotune(ELMAN, sizes=SMALL, trials=4, database=path, progress=False)
    return result, Database(path)


@pytest.mark.slow
def test_autotune_measures_the_defaults_first_and_never_loses_to_them(tuned):
    result, _ = tuned
    assert len(result.trials) == 4 and not result.interrupted
    assert result.trials[0].options == {} and result.trials[0].ok
    r, = result.per_size
    assert r.sizes == SMALL and r.seconds > 0 and r.default_seconds > 0
    assert r.speedup >= 1.0  # the defaults are a candidate: the best is at least as fast
    assert "T=3,B=2,Ci=4,Co=8" in result.table()


def test_autotune_records_every_measurement(tuned):
    from tcdsl.tune.reuse import host_cpu

    result, db = tuned
    rows = list(db)
    assert len(rows) >= 4  # four trials, and the confirmation of the best
    key = elman_key()
    assert {(r["program"], r["entry"], r["target"], r["cpu"]) for r in rows} == {
        (key.program, key.entry, "llvm", host_cpu())}
    assert all(r["sizes"] == SMALL and r["device"] in ("local", IN_PROCESS) and r["run"] == result.run for r in rows)
    assert {json_key(r["options"]) for r in rows} >= {json_key(t.options) for t in result.trials}


def test_autotune_confirms_the_finalists_in_its_own_process(tuned):
    from tcdsl.tune.confirm import ROUNDS

    result, db = tuned
    here = [r for r in db if r["device"] == IN_PROCESS]
    per_options = {}
    for r in here:
        per_options.setdefault(json_key(r["options"]), []).append(r["seconds"])
    ok = [t for t in result.trials if t.ok]
    assert "{}" in per_options and len(per_options) == 1 + min(2, len(ok) - 1)
    assert all(len(v) == ROUNDS and all(x > 0 for x in v) for v in per_options.values())
    # what the tuner reports is what the database keeps: the in-process rounds decide
    r, = result.per_size
    kept = json_key(r.options)
    medians = {o: statistics.median(v) for o, v in per_options.items()}
    assert r.seconds == medians[kept] and r.default_seconds == medians["{}"]
    (options, seconds), = db.best(elman_key()).values()
    assert options == r.options and seconds == r.seconds


def json_key(d):
    import json

    return json.dumps(d, sort_keys=True)


def test_compile_reuses_the_tuning_result(tuned):
    result, db = tuned
    k = tcdsl.compile(ELMAN, tuning_db=db.path)
    opts, origin = k.options_for(**SMALL)
    assert origin == "tuned at T=3,B=2,Ci=4,Co=8"
    assert opts == tcdsl.MappingOptions(**result.best)
    run_elman(k)


@pytest.mark.slow
def test_a_retune_starts_from_the_options_found_before(tmp_path):
    """The seeds (options tuned at the nearest size) are measured in the first
    generation, right after the defaults: a short re-tune starts where the
    earlier one ended instead of from scratch."""
    found = {"tile_rows": 1, "chunk_rows": 64, "fusion": "isl"}
    db = tuned_db(tmp_path, [(SMALL, {}, 1.0), (SMALL, found, 0.5)])
    result = tcdsl.autotune(ELMAN, sizes={**SMALL, "T": 5}, trials=2, database=db.path, progress=False)
    assert [t.options for t in result.trials] == [{}, found]


def test_ctrl_c_keeps_what_was_measured(tmp_path):
    seen = []

    def progress(trial, search):
        if trial is not None:
            seen.append(trial)
            raise KeyboardInterrupt

    path = tmp_path / "t.sqlite"
    result = tcdsl.autotune(ELMAN, sizes=SMALL, trials=20, database=path, progress=progress)
    assert result.interrupted and len(seen) == 1
    assert 1 <= len(result.trials) < 20
    assert len(list(Database(path))) == len(result.trials)  # the whole first batch was recorded
    assert result.per_size[0].default_seconds is not None


@pytest.mark.parametrize("sizes, message", [
    ({"T": 3, "B": 2, "Ci": 4}, "Co missing"),
    ({**SMALL, "X": 1}, "'X' is not a size"),
    ({**SMALL, "T": 0}, "'T' must be a positive integer"),
    ([], "non-empty list"),
])
def test_bad_sizes_are_tc_errors(tmp_path, sizes, message):
    with pytest.raises(tcdsl.TcError, match=message):
        tcdsl.autotune(ELMAN, sizes=sizes, trials=2, database=tmp_path / "t.sqlite", progress=False)
    assert not (tmp_path / "t.sqlite").exists()


def test_bad_weights_and_trials_are_tc_errors(tmp_path):
    with pytest.raises(tcdsl.TcError, match="weights"):
        tcdsl.autotune(ELMAN, sizes=[SMALL, SMALL], weights=[1], database=tmp_path / "t.sqlite")
    with pytest.raises(tcdsl.TcError, match="trials"):
        tcdsl.autotune(ELMAN, sizes=SMALL, trials=0, database=tmp_path / "t.sqlite")


def test_sizes_that_leave_an_output_empty_do_not_fit(tmp_path):
    src = "def conv1d(float(N,W) I, float(K) F) -> (O) { O(n, w) +=! I(n, w + k) * F(k) }"
    with pytest.raises(tcdsl.TcError, match="do not fit 'conv1d'.*'O' has the empty shape"):
        tcdsl.autotune(src, sizes={"N": 2, "W": 2, "K": 5}, trials=2, database=tmp_path / "t.sqlite",
                       progress=False)


# ------------------------------------------------------------------ runner
MATMUL = "def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"


def matmul_task(tmp_path, sizes_list):
    """TaskData for the matmul at each of ``sizes_list`` (references from NumPy)."""
    from tcdsl.tune.measure import TaskData

    data = TaskData(str(tmp_path), sizes_list, 2, 1)
    rng = np.random.default_rng(0)
    for i, s in enumerate(sizes_list):
        a = rng.standard_normal((s["M"], s["K"])).astype(np.float32)
        b = rng.standard_normal((s["K"], s["N"])).astype(np.float32)
        data.save(i, [a, b], [a @ b])
    return data


def test_the_runner_kills_a_run_past_its_limit_and_goes_on(tmp_path):
    from tcdsl.tune.measure import LocalRunner, build_candidate

    big = {"M": 1200, "K": 1200, "N": 1200}
    data = matmul_task(tmp_path, [{"M": 8, "K": 8, "N": 8}])
    built = build_candidate(MATMUL, None, "llvm", {"parallel": False, "register_tiles": False},
                            str(tmp_path / "k.so"))
    assert built.error is None
    runner = LocalRunner(data, repeat=2, min_repeat_ms=1)
    try:
        first, = runner.measure([(built, 60.0)], [None])  # starts the runner's process
        assert first.error is None and first.seconds[0] > 0
        (tmp_path / "big").mkdir()
        runner.data = matmul_task(tmp_path / "big", [big])
        killed, = runner.measure([(built, 0.2)], [None])
        assert killed.seconds == [None] and "killed: ran for more than 0.2 s" in killed.error
        runner.data = data
        again, = runner.measure([(built, 60.0)], [None])
        assert again.error is None and again.seconds[0] > 0
    finally:
        runner.close()


def test_a_crashing_candidate_is_skipped(tmp_path):
    import subprocess

    from tcdsl.tune.measure import LocalRunner, build_candidate

    data = matmul_task(tmp_path, [{"M": 8, "K": 8, "N": 8}])
    good = build_candidate(MATMUL, None, "llvm", {}, str(tmp_path / "k.so"))
    # a library that kills the process that loads it
    (tmp_path / "boom.c").write_text("#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "boom.so"), str(tmp_path / "boom.c")], check=True)
    crashing = dataclasses.replace(good, path=str(tmp_path / "boom.so"))
    missing = dataclasses.replace(good, path=str(tmp_path / "missing.so"))
    runner = LocalRunner(data, repeat=1, min_repeat_ms=1)
    try:
        crashed, no_library, fine = runner.measure([(crashing, 60.0), (missing, 60.0), (good, 60.0)], [None])
    finally:
        runner.close()
    assert crashed.seconds == [None] and crashed.error == "crashed its process"
    assert no_library.seconds == [None] and "cannot load the library" in no_library.error
    assert fine.error is None and fine.seconds[0] > 0


@pytest.mark.slow
def test_a_wrong_candidate_is_disqualified(tmp_path):
    from tcdsl.tune.measure import LocalRunner, build_candidate

    data = matmul_task(tmp_path, [{"M": 8, "K": 8, "N": 8}])
    np.save(data.path(0, "ref", 0), np.zeros((8, 8), np.float32) + 1)  # references that no kernel meets
    built = build_candidate(MATMUL, None, "llvm", {}, str(tmp_path / "k.so"))
    runner = LocalRunner(data, repeat=1, min_repeat_ms=1)
    try:
        m, = runner.measure([(built, 60.0)], [None])
    finally:
        runner.close()
    assert m.seconds == [None] and "differs from the default kernel's" in m.error


def test_a_candidate_that_does_not_build_is_skipped(tmp_path):
    from tcdsl.tune.measure import build_candidate

    built = build_candidate(MATMUL, None, "llvm", {"tile_cols": 24, "vector_width": 16}, str(tmp_path / "k.so"))
    assert built.path is None and "TcError" in built.error


# ------------------------------------------------------------------ workload
def test_a_workload_tune_keeps_option_sets_and_a_rule_that_compile_uses(tmp_path):
    path = tmp_path / "t.sqlite"
    small, large = SMALL, {**SMALL, "T": 12}
    result = tcdsl.autotune(ELMAN, sizes=[small, large], weights=[3, 1], trials=3, database=path, progress=False)
    assert [r.sizes for r in result.per_size] == [small, large]
    assert 1 <= len(result.option_sets) <= 3 and result.rule["names"] == ["T", "B", "Ci", "Co"]
    w = Database(path).workload(elman_key())
    assert w.sizes == [small, large] and w.weights == [3.0, 1.0] and w.option_sets == result.option_sets
    k = tcdsl.compile(ELMAN, specialize="after-scheduling", tuning_db=path)
    opts, origin = k.options_for(**{**SMALL, "T": 7})
    assert origin == "dispatched by the rule of the workload tuned at T=3,B=2,Ci=4,Co=8; T=12,B=2,Ci=4,Co=8"
    chosen = result.option_sets[dispatch(result.rule, {**SMALL, "T": 7})]
    shared = ("hoist", "fusion", "split_selects")  # the kernel's own under after-scheduling (docs/tuning.md)
    assert {k: v for k, v in opts.to_dict().items() if k not in shared} == \
        {k: v for k, v in chosen.items() if k not in shared}
    run_elman(k, T=7)
    symbolic = tcdsl.compile(ELMAN, tuning_db=path)  # one binary: the options of the dominant size
    assert symbolic.options_for(**small)[1] == "tuned at T=3,B=2,Ci=4,Co=8"
    assert symbolic.options_for(**{**SMALL, "T": 7})[1] == "reused from T=3,B=2,Ci=4,Co=8"


# ------------------------------------------------------------------ tcdsl tune
def test_cli_tune_prints_the_table_and_records(tmp_path, capsys):
    from tcdsl.cli import main

    path = tmp_path / "t.sqlite"
    rc = main(["tune", str(ELMAN), "--sizes", "T=3,B=2,Ci=4,Co=8", "--trials", "2", "--database", str(path),
               "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "T=3,B=2,Ci=4,Co=8" in out and "speed-up" in out and f"recorded in {path}" in out
    assert len({json_key(r["options"]) for r in Database(path)}) == 2


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "T=3,B=2"], "Ci, Co missing"),
    (["--sizes", "T=3,B=2,Ci=4,Co=8", "--weights", "a"], "--weights"),
    (["--sizes", "T=3,B=2,Ci=4,Co=8", "--rpc-key", "x"], "--rpc-tracker and --rpc-key go together"),
])
def test_cli_tune_errors(tmp_path, capsys, argv, message):
    from tcdsl.cli import main

    rc = main(["tune", str(ELMAN), "--database", str(tmp_path / "t.sqlite"), "--no-progress"] + argv)
    err = capsys.readouterr().err
    assert rc == 1 and message in err and "Traceback" not in err


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc not installed")
def test_a_cuda_candidate_carries_the_temporaries_its_caller_allocates(tmp_path):
    """A CUDA library's host function takes the program's temporaries after
    its outputs (the runtime allocates them on the GPU): the runner must pass
    as many arguments as the host function has parameters, each temporary
    with its shape at the sizes."""
    from tcdsl.runtime.signature import compile_shapes
    from tcdsl.tune.measure import build_candidate

    src = (pathlib.Path(__file__).parents[1] / "examples" / "rnn" / "lstm.tc").read_text()
    built = build_candidate(src, None, "cuda", {}, str(tmp_path / "c.so"))
    assert built.error is None
    k = tcdsl.compile(src, target="cuda", options={"disk_cache": False}, tuning_db=False)
    params = k._binaries[None].backend.func.params
    assert len(built.size_params) + 6 + 2 + len(built.scratch) == len(params)
    shapes = compile_shapes([shape for _, shape in built.scratch])({"T": 5, "B": 3, "I": 4, "H": 7})
    assert sorted(shapes) == [(3, 7), (3, 7), (5, 4, 3, 7)]
    assert {dtype for dtype, _ in built.scratch} == {"float32"}


def test_the_defaults_are_measured_alone_first_and_set_the_others_time_limit(tmp_path):
    """A candidate that hangs must be killed after a multiple of the defaults'
    time, also in the first batch: before the defaults had been measured, the
    whole first batch ran under the tuner's ``timeout`` (300 s)."""
    from tcdsl.tune import tuner
    from tcdsl.tune.measure import Built, Measured
    from tcdsl.tune.search import Search

    class Builder:
        workers = 2

        def build(self, options):
            return [Built(str(tmp_path / f"{i}.so"), "f") for i, _ in enumerate(options)]

    class Runner:
        repeat, min_repeat_ms = 5, 20.0

        def __init__(self):
            self.calls = []

        def measure(self, items, best):
            self.calls.append([limit for _, limit in items])
            return [Measured([0.001]) for _ in items]

    runner, seen = Runner(), []
    search = Search(space_for("llvm"), [SMALL], [1.0])
    db = Database(tmp_path / "t.sqlite")
    tuner._loop(search, Builder(), runner, db, elman_key(), "run", 6, lambda t, s=None: seen.append(t), {},
                300.0, None)
    assert [len(c) for c in runner.calls] == [1, 3, 2]  # the defaults alone, then the rest of the first batch
    assert runner.calls[0] == [300.0]
    limit = 30.0 + 10.0 * (2 * 0.001 + 5 * 0.02)
    assert runner.calls[1] == [pytest.approx(limit)] * 3 and runner.calls[2] == [pytest.approx(limit)] * 2
    assert [t.index for t in seen] == list(range(6)) and search.trials[0].options == {}
