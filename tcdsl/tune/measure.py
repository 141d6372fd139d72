"""Building and measuring candidates: the builder and the runners.

* **Builder** (:class:`Builder`): compiles candidates in worker processes
  (a ``ProcessPoolExecutor`` with the ``spawn`` start method: TVM builds are
  CPU-bound and LLVM is not re-entrant in one process).  Each build exports
  the candidate's binary (the symbolic one, as ``tcdsl.compile`` makes it by
  default) to a shared library in the run's work directory.
* **Local runner** (:class:`LocalRunner`): loads a library in one worker
  process of its own, runs it once on the task's inputs and compares the
  outputs with the default kernel's (a mismatch disqualifies the
  candidate), then times it with TVM's ``time_evaluator`` (a warm-up call,
  ``repeat`` timed repeats of at least ``min_repeat_ms`` each, the median).
  A run that takes longer than its time limit is killed with its process
  and the candidate is skipped; a crash does the same.
* The RPC runner (``tune/rpc.py``) does the same on remote devices with
  :func:`measure_module`.

The candidates are built while no measurement runs, and measured one at a
time: on a small machine a build running beside a measurement would slow it.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# A candidate this many times slower than the best time so far in its first
# (checking) run is not timed further: its first run is its time.
_HOPELESS = 3.0
# A kernel whose checking run took longer than this is timed with at most 3 repeats.
_LONG_RUN = 0.1


@dataclass
class Built:
    """A candidate's library, or why it has none."""

    path: str | None
    symbol: str = ""
    size_params: tuple[str, ...] = ()
    seconds: float = 0.0
    error: str | None = None
    # CUDA: the temporaries the caller allocates after the outputs, (dtype, shape formulas of the sizes)
    scratch: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass
class Measured:
    """Median seconds per size tuple (None where it failed), and the first failure's reason."""

    seconds: list[float | None]
    error: str | None = None
    device: str = "local"


@dataclass
class TaskData:
    """Inputs and reference outputs (the default kernel's) for each size tuple,
    as .npy files in ``workdir`` so that worker processes can map them."""

    workdir: str
    sizes: list[dict[str, int]]
    n_inputs: int
    n_outputs: int
    rtol: float = 1e-3
    atol: float = 1e-3
    _cache: dict = field(default_factory=dict, repr=False)

    def path(self, i: int, kind: str, j: int) -> str:
        return os.path.join(self.workdir, f"size{i}-{kind}{j}.npy")

    def save(self, i: int, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
        for j, a in enumerate(inputs):
            np.save(self.path(i, "in", j), a)
        for j, a in enumerate(outputs):
            np.save(self.path(i, "ref", j), a)

    def load(self, i: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if i not in self._cache:
            self._cache[i] = ([np.load(self.path(i, "in", j)) for j in range(self.n_inputs)],
                              [np.load(self.path(i, "ref", j), mmap_mode="r") for j in range(self.n_outputs)])
        return self._cache[i]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state


# ------------------------------------------------------------------ building
def build_candidate(source: str, entry: str | None, target: str, options: dict, path: str) -> Built:
    """Compile ``options`` into a library at ``path`` (runs in a worker process)."""
    started = time.perf_counter()
    try:
        from ..api import compile as tc_compile

        k = tc_compile(source, entry, target=target, options={**options, "disk_cache": False}, tuning_db=False)
        b = k._binaries[None]
        from ..codegen import targets

        targets.export(b.executable, path)
        return Built(path, str(b.backend.func.attrs["global_symbol"]), tuple(b.size_params),
                     time.perf_counter() - started, scratch=tuple((o.dtype, o.shape) for o in k.signature.scratch))
    except Exception as e:  # noqa: BLE001 -- a candidate that does not build is skipped, with its reason
        return Built(None, seconds=time.perf_counter() - started, error=_reason(e))


def _reason(e: BaseException) -> str:
    from ..errors import TcError

    if isinstance(e, TcError):
        return f"{type(e).__name__}: {e}"
    last = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
    where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}{where}"


@contextlib.contextmanager
def _main_hidden():
    """While worker processes start: they do not import the caller's main
    module.  Workers run only tcdsl's functions, and a script that calls
    ``tcdsl.autotune`` at its top level (no ``if __name__ == "__main__"``)
    would otherwise run again in every worker."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _submit(pool: cf.ProcessPoolExecutor, fn, *args) -> cf.Future:
    """``pool.submit``: a spawn pool starts its processes here, as they are needed."""
    with _main_hidden():
        return pool.submit(fn, *args)


def _spawn_pool(workers: int) -> cf.ProcessPoolExecutor:
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                  initializer=_quiet_worker)


def _quiet_worker() -> None:
    """Workers ignore Ctrl-C (the tuner stops them) and do not fight over the cores."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def kill_pool(pool: cf.ProcessPoolExecutor) -> None:
    """Stop ``pool`` at once, its running jobs included."""
    procs = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.kill()
        except Exception:  # noqa: BLE001 -- already gone
            pass
    for p in procs:
        p.join(timeout=5)


class Builder:
    """Candidates compiled in ``workers`` spawned processes."""

    def __init__(self, source: str, entry: str | None, target: str, workdir: str, workers: int,
                 timeout: float = 600.0):
        self.source, self.entry, self.target, self.workdir = source, entry, target, workdir
        self.workers, self.timeout = workers, timeout
        self._pool: cf.ProcessPoolExecutor | None = None
        self._count = 0

    def build(self, options_list: list[dict]) -> list[Built]:
        """Build all of ``options_list`` (in parallel); a build that takes longer
        than ``timeout`` is given up (its process killed)."""
        if self._pool is None:
            self._pool = _spawn_pool(self.workers)
        futures = []
        for opts in options_list:
            self._count += 1
            path = os.path.join(self.workdir, f"cand{self._count}.so")
            futures.append(_submit(self._pool, build_candidate, self.source, self.entry, self.target, opts, path))
        out: list[Built] = []
        deadline = time.monotonic() + self.timeout
        for f in futures:
            try:
                out.append(f.result(timeout=max(deadline - time.monotonic(), 0.1)))
            except cf.TimeoutError:
                out.append(Built(None, error=f"build took more than {self.timeout:.0f} s"))
                self.close()
                self._pool = _spawn_pool(self.workers)
            except cf.process.BrokenProcessPool:
                out.append(Built(None, error="the build crashed its worker process"))
                self.close()
                self._pool = _spawn_pool(self.workers)
        return out

    def close(self) -> None:
        if self._pool is not None:
            kill_pool(self._pool)
            self._pool = None


# ------------------------------------------------------------------ measuring
def measure_module(module, dev, built: Built, data: TaskData, size_index: int, *, repeat: int,
                   min_repeat_ms: float, best: float | None, to_device=None, inputs=None) -> float:
    """Seconds per call of ``built`` at size tuple ``size_index`` (the median
    of ``repeat`` timings), after a checking run whose outputs must match the
    references.  Raises ``ValueError`` on a mismatch.  ``to_device`` makes a
    device array from a NumPy one (default: a local CPU tensor)."""
    import tvm

    make = to_device or (lambda a: tvm.runtime.tensor(np.ascontiguousarray(a), dev))
    ins, refs = inputs if inputs is not None else data.load(size_index)
    sizes = data.sizes[size_index]
    args = [make(a) for a in ins]
    outs = [make(np.zeros(r.shape, r.dtype)) for r in refs]
    scratch = []
    if built.scratch:
        from ..runtime.signature import compile_shapes

        shapes = compile_shapes([shape for _, shape in built.scratch])(sizes)
        scratch = [tvm.runtime.empty(shape, dtype, dev) for (dtype, _), shape in zip(built.scratch, shapes)]
    fn = module[built.symbol]
    call = [int(sizes[s]) for s in built.size_params] + args + outs + scratch
    started = time.perf_counter()
    fn(*call)
    if hasattr(dev, "sync"):
        dev.sync()
    first = time.perf_counter() - started
    for j, (o, r) in enumerate(zip(outs, refs)):
        got = o.numpy()
        if not _close(got, np.asarray(r), data.rtol, data.atol):
            raise ValueError(f"output {j} differs from the default kernel's (max abs difference "
                             f"{_max_diff(got, np.asarray(r)):.3g})")
    if best is not None and first > _HOPELESS * best:
        return first
    if first > _LONG_RUN:
        repeat = min(repeat, 3)
    ev = module.time_evaluator(built.symbol, dev, number=1, repeat=repeat, min_repeat_ms=int(min_repeat_ms))
    return float(ev(*call).median)


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1.0)
        return bool(np.allclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True))
    return bool(np.array_equal(a, b))


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape or not a.size:
        return float("inf") if a.shape != b.shape else 0.0
    return float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def measure_local(built: Built, data: TaskData, repeat: int, min_repeat_ms: float,
                  best: list[float | None], kind: str = "llvm") -> Measured:
    """Load ``built`` here and measure it at every size tuple (runs in the
    runner's worker process), on this machine's first GPU for ``kind == "cuda"``."""
    import tvm

    try:
        module = tvm.runtime.load_module(built.path)
    except Exception as e:  # noqa: BLE001
        return Measured([None] * len(data.sizes), f"cannot load the library: {_reason(e)}")
    dev = tvm.cuda(0) if kind == "cuda" else tvm.cpu()
    seconds: list[float | None] = []
    error = None
    for i in range(len(data.sizes)):
        try:
            seconds.append(measure_module(module, dev, built, data, i, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                          best=best[i]))
        except Exception as e:  # noqa: BLE001 -- this size fails; the others may still run
            seconds.append(None)
            error = error or (str(e) if isinstance(e, ValueError) else _reason(e))
    return Measured(seconds, error)


class LocalRunner:
    """Measures libraries one at a time in a worker process of its own."""

    device = "local"

    def __init__(self, data: TaskData, repeat: int = 5, min_repeat_ms: float = 20.0, kind: str = "llvm"):
        self.data, self.repeat, self.min_repeat_ms, self.kind = data, repeat, min_repeat_ms, kind
        self._pool: cf.ProcessPoolExecutor | None = None

    def measure(self, items: list[tuple[Built, float]], best: list[float | None]) -> list[Measured]:
        """Measure each ``(built, time limit in seconds)``; a run past its limit
        is killed and the candidate skipped."""
        out = []
        for built, limit in items:
            if built.path is None:
                out.append(Measured([None] * len(self.data.sizes), built.error))
                continue
            if self._pool is None:
                self._pool = _spawn_pool(1)
            future = _submit(self._pool, measure_local, built, self.data, self.repeat, self.min_repeat_ms, list(best),
                             self.kind)
            try:
                m = future.result(timeout=limit)
            except cf.TimeoutError:
                m = Measured([None] * len(self.data.sizes), f"killed: ran for more than {limit:.1f} s")
                self.close()
            except cf.process.BrokenProcessPool:
                m = Measured([None] * len(self.data.sizes), "crashed its process")
                self.close()
            out.append(m)
            best = [b if s is None else (s if b is None else min(b, s)) for b, s in zip(best, m.seconds)]
        return out

    def close(self) -> None:
        if self._pool is not None:
            kill_pool(self._pool)
            self._pool = None


def remove_library(built: Built) -> None:
    if built.path:
        try:
            Path(built.path).unlink()
        except OSError:
            pass
