"""``tcdsl.autotune``: the tuning loop.

    check the sizes -> random inputs and the default kernel's outputs
    -> per generation: propose (search.py) -> build (measure.Builder, in
       parallel) -> measure (LocalRunner, or rpc.RpcRunner) -> record every
       measurement in the database -> tell the search
    -> confirm the best against the defaults (measured again, interleaved)
    -> on a local CPU, the finalists called in this process (confirm.py):
       the options kept are those that beat the defaults there
    -> for a workload: option sets and dispatch rule (workload.py)

Ctrl-C stops the loop; what was measured is in the database and in the
result (``interrupted=True``).
"""
from __future__ import annotations

import math
import os
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..codegen.signature import derived_sizes
from ..errors import TcError
from ..runtime.args import with_derived
from .database import Database, Key, Record, Workload
from .measure import Builder, Built, LocalRunner, Measured, TaskData
from .search import Search, Trial
from .space import space_for


@dataclass
class SizeResult:
    sizes: dict[str, int]
    options: dict
    seconds: float | None
    default_seconds: float | None

    @property
    def speedup(self) -> float | None:
        if not self.seconds or not self.default_seconds:
            return None
        return self.default_seconds / self.seconds


@dataclass
class TuneResult:
    """What ``autotune`` found: per size tuple the best options, their time
    and the defaults' (``speedup``); for a workload, the option sets kept
    and the dispatch rule; every trial; the database it was recorded in."""

    entry: str
    target: str
    per_size: list[SizeResult]
    trials: list[Trial]
    database: str
    seconds: float
    interrupted: bool = False
    option_sets: list[dict] = field(default_factory=list)
    rule: dict | None = None
    run: str = ""
    model_used: bool = False

    @property
    def best(self) -> dict:
        """The best options of the first (or only) size tuple."""
        return self.per_size[0].options if self.per_size else {}

    def table(self) -> str:
        """The best options and the speed-up per size tuple, as text."""
        from .reuse import format_sizes

        lines = [f"{'sizes':<28} {'default ms':>11} {'tuned ms':>10} {'speed-up':>9}  options"]
        for r in self.per_size:
            d = "-" if r.default_seconds is None else f"{r.default_seconds * 1e3:.3f}"
            t = "-" if r.seconds is None else f"{r.seconds * 1e3:.3f}"
            s = "-" if r.speedup is None else f"{r.speedup:.2f}x"
            opts = ", ".join(f"{k}={v}" for k, v in r.options.items()) or "(defaults)"
            lines.append(f"{format_sizes(r.sizes):<28} {d:>11} {t:>10} {s:>9}  {opts}")
        return "\n".join(lines)


def autotune(source, entry: str | None = None, *, sizes, weights=None, trials: int = 64, database=None,
             target: str = "llvm", rpc: dict | None = None, progress: Any = True, seed: int = 0,
             workers: int | None = None, repeat: int = 5, min_repeat_ms: float = 20.0,
             timeout: float = 300.0) -> TuneResult:
    """Search mapping options and schedule choices for ``source`` at ``sizes``
    (one ``{name: int}``, or a list of them with ``weights``); see docs/tuning.md.

    Every candidate is built in a worker process, run on random inputs,
    checked against the default kernel's outputs and timed (median of
    ``repeat``); every measurement goes to the tuning database (``database``:
    a path; None: ``$TCDSL_TUNING_DB`` or the default).  ``rpc={"tracker":
    "HOST:PORT", "key": NAME}`` measures on the devices of a TVM RPC tracker.
    ``timeout`` limits the default kernel's build and measurement; a
    candidate's run gets a limit from the default's time."""
    from ..source import Source
    from .. import driver
    from ..codegen import targets
    from .reuse import Tuned, program_key

    started = time.perf_counter()
    src = Source.load(source)
    fe = driver.frontend(src, entry)
    kind = targets.target_kind(targets.make_target(target))
    size_list, weight_list = _check_sizes(fe, sizes, weights)
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise TcError(f"trials: expected a positive integer, got {trials!r}")
    db = database if isinstance(database, Database) else Database(database)
    key = program_key(fe, kind)
    space = space_for(kind)
    seeds = _seeds(Tuned(db, key) if db.exists() else None, size_list, space)
    run_id = uuid.uuid4().hex[:12]
    report = _progress(progress, trials)
    if rpc is not None:  # an unreachable tracker fails before anything is built
        from .rpc import connect

        connect(rpc)
    with tempfile.TemporaryDirectory(prefix="tcdsl-tune-") as workdir:
        data = _task_data(target, fe, size_list, workdir, seed)
        builder = Builder(src.text, entry, target, workdir, workers or max(1, min(os.cpu_count() or 1, 4)),
                          timeout=timeout)
        runner = _runner(rpc, data, repeat, min_repeat_ms, kind)
        search = Search(space, size_list, weight_list, seeds=seeds, rng=random.Random(seed))
        libs: dict[int, Built] = {}
        interrupted, confirmed = False, None
        try:
            _loop(search, builder, runner, db, key, run_id, trials, report, libs, timeout, data)
            _confirm(search, runner, db, key, run_id, libs, data)
            builder.close()
            runner.close()
            if rpc is None and kind == "llvm" and search.default is not None and search.default.ok:
                from .confirm import confirm_here

                confirmed = confirm_here(search, _median_seconds, src.text, entry, target, data, db, key, run_id)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            builder.close()
            runner.close()
            report(None)
    return _result(search, fe.name, kind, db, key, run_id, time.perf_counter() - started, interrupted, weight_list,
                   confirmed)


def _check_sizes(fe, sizes, weights) -> tuple[list[dict[str, int]], list[float]]:
    names = list(fe.checked.sizes)
    size_list = [sizes] if isinstance(sizes, dict) else list(sizes) if isinstance(sizes, (list, tuple)) else None
    if not size_list:
        raise TcError("sizes: expected {name: int} or a non-empty list of them")
    out = []
    for s in size_list:
        if not isinstance(s, dict):
            raise TcError(f"sizes: expected {{name: int}}, got {type(s).__name__}")
        unknown = [k for k in s if k not in names]
        if unknown:
            raise TcError(f"sizes: {', '.join(map(repr, unknown))} {'is not a size' if len(unknown) == 1 else 'are not sizes'}"
                          f" of '{fe.name}' (sizes: {', '.join(names)})")
        s = with_derived(derived_sizes(fe.checked), s)  # (G_x_G of G * G: computed, not given)
        missing = [k for k in names if k not in s]
        if missing:
            raise TcError(f"sizes: {', '.join(missing)} missing (the def '{fe.name}' has sizes {', '.join(names)})")
        for k in names:
            v = s[k]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise TcError(f"sizes: '{k}' must be a positive integer, got {v!r}")
        out.append({k: int(s[k]) for k in names})
    if weights is None:
        weight_list = [1.0] * len(out)
    else:
        weight_list = list(weights) if isinstance(weights, (list, tuple)) else None
        if weight_list is None or len(weight_list) != len(out) or any(
                isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0 for w in weight_list) \
                or not sum(weight_list) > 0:
            raise TcError(f"weights: expected {len(out)} non-negative numbers (one per size tuple), not all 0")
    return out, [float(w) for w in weight_list]


def _seeds(tuned, size_list, space) -> list[dict]:
    """Options found before for these sizes: tuned at them, or reused from the nearest."""
    if tuned is None:
        return []
    out, seen = [], set()
    for s in size_list:
        p = space.point(tuned.for_sizes(s).options)
        if space.key(p) not in seen:
            seen.add(space.key(p))
            out.append(p)
    return out


def random_inputs(fe, sizes: dict[str, int], rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs for the def at ``sizes``: floats N(0, 1/n) with n the last
    dimension, integers in 0..3, booleans."""
    from ..codegen.signature import evaluate
    from ..sema.check import dim_expr

    inputs = []
    for p in fe.checked.node.params:
        shape = tuple(evaluate(dim_expr(d), sizes) for d in fe.checked.tensors[p.name].dims)  # also 4 * H
        dtype = fe.checked.tensors[p.name].dtype
        if dtype.startswith(("int", "uint")):
            inputs.append(rng.integers(0, 4, shape).astype(dtype))
        elif dtype == "bool":
            inputs.append(rng.integers(0, 2, shape).astype(bool))
        else:
            scale = 1.0 / math.sqrt(max(shape[-1], 1)) if shape else 1.0
            inputs.append((rng.standard_normal(shape) * scale).astype(dtype))
    return inputs


def _task_data(target, fe, size_list, workdir: str, seed: int) -> TaskData:
    """Inputs and the default kernel's outputs at every size tuple, saved for the runners."""
    from ..dispatch import Kernel
    from .reuse import format_sizes

    k = Kernel(fe, target=target, options={})
    data = TaskData(workdir, size_list, len(fe.checked.node.params), len(fe.checked.outputs))
    rng = np.random.default_rng(seed)
    for i, s in enumerate(size_list):
        inputs = random_inputs(fe, s, rng)
        try:
            outs = k(*inputs)
        except TcError as e:
            raise TcError(f"sizes {format_sizes(s)} do not fit '{fe.name}': {e}") from None
        outs = outs if isinstance(outs, tuple) else (outs,)
        for name, o in zip(fe.checked.outputs, outs):
            if 0 in np.shape(o):
                raise TcError(f"sizes {format_sizes(s)} do not fit '{fe.name}': its output '{name}' has the "
                              f"empty shape {tuple(np.shape(o))}")
        data.save(i, inputs, [np.asarray(o) for o in outs])
    return data


def _runner(rpc, data: TaskData, repeat: int, min_repeat_ms: float, kind: str):
    if rpc is None:
        if kind == "cuda" and not _cuda_present():
            raise TcError("target 'cuda': no CUDA device here to measure on (use rpc= for a remote one)")
        return LocalRunner(data, repeat, min_repeat_ms, kind)
    from .rpc import RpcRunner

    return RpcRunner(rpc, data, repeat, min_repeat_ms, kind)


def _cuda_present() -> bool:
    from ..codegen import targets

    return targets.cuda_device_present()


def _limit(search: Search, repeat: int, min_repeat_ms: float, first: float) -> float:
    """A candidate's time limit: ten times what a run as slow as the defaults
    takes to measure, plus a margin (a fresh runner process starts TVM)."""
    d = search.default
    if d is None:
        return first
    expected = sum(2 * t + repeat * max(t, min_repeat_ms / 1e3) for t in d.seconds)
    return 30.0 + 10.0 * expected


def _loop(search, builder, runner, db, key, run_id, trials, report, libs, timeout, data) -> None:
    batch = max(2 * builder.workers, 4)
    while len(search.trials) < trials:
        points = search.propose(min(batch, trials - len(search.trials)))
        if not points:
            break
        options = [search.space.options(p) for p in points]
        built = builder.build(options)
        group = list(zip(points, options, built))
        # the defaults (the first trial) are measured alone first: their time
        # sets the limit of every other candidate's run, so that one that
        # hangs is killed after a multiple of it, not after ``timeout``
        first = 1 if not search.trials else 0
        for part in (group[:first], group[first:]):
            if part:
                _measure(search, runner, db, key, run_id, report, libs, timeout, part)


def _measure(search, runner, db, key, run_id, report, libs, timeout, part) -> None:
    limit = _limit(search, runner.repeat, runner.min_repeat_ms, timeout)
    measured = runner.measure([(b, limit) for _, _, b in part], _best_times(search))
    new = [Trial(p, o, m.seconds, m.error, b.seconds, m.device) for (p, o, b), m in zip(part, measured)]
    search.tell(new)
    for t, (_, _, b) in zip(new, part):
        if t.ok and b.path:
            libs[t.index] = b
    _record(db, key, run_id, search.sizes, new)
    if search.trials[0].options or not search.trials[0].ok:
        raise TcError(f"the default kernel could not be measured: {search.trials[0].error}")
    for t in new:
        report(t, search)


def _best_times(search: Search) -> list[float | None]:
    best: list[float | None] = [None] * len(search.sizes)
    for t in search.trials:
        for i, s in enumerate(t.seconds):
            if s is not None and (best[i] is None or s < best[i]):
                best[i] = s
    return best


def _record(db: Database, key: Key, run_id: str, size_list, trials: list[Trial]) -> None:
    now = time.time()
    records = []
    for t in trials:
        for s, sec in zip(size_list, t.seconds):
            records.append(Record(s, t.options, sec, None if sec is not None else (t.error or "failed"),
                                  t.device, run_id, now))
    db.add(key, records)


def _confirm(search: Search, runner, db, key, run_id, libs: dict[int, Built], data: TaskData, rounds: int = 2) -> None:
    """Measure the best candidate of each size tuple again, interleaved with the
    defaults, so that a lucky measurement does not beat them (the database
    takes the median of all measurements of a candidate)."""
    d = search.default
    if d is None or 0 not in libs:
        return
    best_idx = set()
    for i in range(len(search.sizes)):
        ok = [t for t in search.trials if t.ok and t.index in libs]
        if ok:
            best_idx.add(min(ok, key=lambda t: t.seconds[i]).index)
    best_idx.discard(0)
    if not best_idx:
        return
    items, owners = [], []
    for _ in range(rounds):
        for idx in [0] + sorted(best_idx):
            items.append((libs[idx], _limit(search, runner.repeat, runner.min_repeat_ms, 300.0)))
            owners.append(search.trials[idx])
    measured: list[Measured] = runner.measure(items, [None] * len(search.sizes))
    extra = [Trial(t.point, t.options, m.seconds, m.error, 0.0, m.device) for t, m in zip(owners, measured)]
    _record(db, key, run_id, search.sizes, extra)
    for t, m in zip(owners, measured):
        t.repeats.append(m.seconds)


def _median_seconds(t: Trial, i: int) -> float | None:
    values = [t.seconds[i]] + [r[i] for r in t.repeats]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _result(search: Search, entry: str, kind: str, db: Database, key: Key, run_id: str, seconds: float,
            interrupted: bool, weights: list[float], confirmed=None) -> TuneResult:
    from .workload import learn_rule, select

    per_size = []
    d = search.default
    for i, s in enumerate(search.sizes):
        ok = [t for t in search.trials if t.ok]
        if not ok or d is None:
            per_size.append(SizeResult(s, {}, None, None))
            continue
        kept = confirmed.decision(i) if confirmed is not None else None
        if kept is not None:  # the in-process times decide (confirm.py), as the database does
            per_size.append(SizeResult(s, *kept))
            continue
        best = min(ok, key=lambda t: _median_seconds(t, i))
        per_size.append(SizeResult(s, dict(best.options), _median_seconds(best, i), _median_seconds(d, i)))
    result = TuneResult(entry, kind, per_size, list(search.trials), str(db.path), seconds, interrupted,
                        run=run_id, model_used=search.model_used)
    if len(search.sizes) > 1 and d is not None:
        ok = [t for t in search.trials if t.ok]
        ratios = [[_ratio(t, d, i) for i in range(len(search.sizes))] for t in ok]
        chosen, labels = select(ratios, weights)
        if chosen:
            sets = [dict(ok[c].options) for c in chosen]
            rule = learn_rule(list(search.sizes[0]), search.sizes, labels, weights)
            db.add_workload(key, Workload(search.sizes, weights, sets, rule, run_id))
            result.option_sets, result.rule = sets, rule
    return result


def _ratio(t: Trial, d: Trial, i: int) -> float | None:
    a, b = _median_seconds(t, i), _median_seconds(d, i)
    return None if a is None or not b else a / b


def _progress(progress, total: int) -> Callable:
    """``progress``: True (a tqdm bar on stderr, or lines without tqdm), False,
    or a callable ``f(trial, search)`` (``f(None, None)`` at the end)."""
    if callable(progress):
        return lambda t, s=None: progress(t, s)
    if not progress:
        return lambda t, s=None: None
    try:
        from tqdm import tqdm
    except ImportError:
        import sys

        def lines(t, s=None):
            if t is not None:
                best = s.score(s.ranked()[0]) if s.ranked() else math.inf
                print(f"trial {t.index + 1}/{total}: best {1 / best:.2f}x the defaults", file=sys.stderr)
        return lines
    bar = tqdm(total=total, desc="tuning", unit="trial", dynamic_ncols=True)

    def update(t, s=None):
        if t is None:
            bar.close()
            return
        ranked = s.ranked()
        if ranked and s.default is not None:
            bar.set_postfix_str(f"best {1 / s.score(ranked[0]):.2f}x the defaults")
        bar.update(1)
    return update
