"""Dynamic shapes: the four ``specialize`` modes on a size-churning workload.

The workload (issue 4): ``--calls`` calls (300) of the Elman RNN
(examples/rnn/elman.tc) with T drawn uniformly from 1..``--tmax`` (256),
B=32, Ci=Co=256, a fixed seed.  For each mode it measures

* ``total_s``: a fresh kernel, compiled and called on the whole sequence:
  the time of ``tcdsl.compile`` plus all the calls, compiles included (for
  ``auto``, also when its background compiles had all finished);
* ``steady_per_call_ms``: the same sequence replayed once everything is
  compiled, the modes interleaved, ``--replays`` times, the best replay.
  ``auto`` is first called ``auto_threshold`` times on each size and its
  background builds are awaited; under its payback rule a size whose calls
  have not paid for a build keeps the symbolic kernel, so ``auto``'s steady
  replay mixes specialised binaries and the symbolic kernel (the run prints
  how many sizes got a binary);

and, for the whole run,

* ``symbolic_vs_specialized``: at a few values of T, the symbolic kernel's
  time per call divided by the ``after-scheduling`` and
  ``before-scheduling`` binaries' at the same sizes (median of
  ``--reps`` calls each);
* ``overhead``: on tiny sizes, the time of a call through the kernel
  (argument checks, size inference, output allocation, dispatch) against
  the raw TVM function called on ready arrays;
* ``disk``: the time to ready a kernel whose binary is in the disk cache:
  ``tcdsl.compile`` end to end and the disk-cache part alone, against a
  compile into an empty cache (which also exports the library).

The churn kernels run with the disk cache off (every mode compiles what it
needs; the numbers do not depend on earlier runs).  JSON goes to
``benchmarks/results/dynamic_shapes-<time>.json``.

    .venv/bin/python benchmarks/dynamic_shapes.py                     # the full workload
    .venv/bin/python benchmarks/dynamic_shapes.py --calls 100 --tmax 64  # shorter
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "rnn"))

import tcdsl  # noqa: E402
import reference  # noqa: E402  (examples/rnn/reference.py)
from tcdsl import driver  # noqa: E402
from tcdsl.runtime import cache  # noqa: E402
from tcdsl.dispatch import Kernel  # noqa: E402
from tcdsl.source import Source  # noqa: E402

ELMAN = ROOT / "examples" / "rnn" / "elman.tc"
MODES = ("never", "after-scheduling", "before-scheduling", "auto")


def inputs_for(rng, tmax: int, B: int, C: int):
    s = 1.0 / np.sqrt(C)
    full = (rng.standard_normal((tmax, B, C)) * s).astype(np.float32)
    h0 = (rng.standard_normal((B, C)) * s).astype(np.float32)
    i2h = (rng.standard_normal((C, C)) * s).astype(np.float32)
    h2h = (rng.standard_normal((C, C)) * s).astype(np.float32)
    return full, h0, i2h, h2h


def wait_for_background(k: Kernel, timeout: float = 600.0) -> None:
    """Until the background compiler has finished every size tuple ``auto`` handed it (built or failed)."""
    deadline = time.perf_counter() + timeout
    while k._in_flight and time.perf_counter() < deadline:
        time.sleep(0.02)


def churn(mode: str, Ts: list[int], data, args) -> tuple[dict, Kernel]:
    """A fresh kernel on the whole sequence: compile plus calls, compiles included."""
    full, h0, i2h, h2h = data
    options = {"disk_cache": False}
    if mode == "auto":
        options["auto_threshold"] = args.auto_threshold
    t0, c0 = time.perf_counter(), time.process_time()
    k = tcdsl.compile(ELMAN, specialize=mode, options=options)
    t_compile = time.perf_counter() - t0
    for T in Ts:
        k(full[:T], h0, i2h, h2h)
    t_calls_done, c_calls_done = time.perf_counter() - t0, time.process_time() - c0
    info = k.cache_info()
    wait_for_background(k)
    t_settled, c_settled = time.perf_counter() - t0, time.process_time() - c0
    T = Ts[0]  # a spot check of the results against NumPy
    ok = bool(np.allclose(k(full[:T], h0, i2h, h2h), reference.elman_rnn(full[:T], h0, i2h, h2h),
                          rtol=1e-4, atol=1e-4))
    return {"mode": mode, "first_compile_s": t_compile, "total_s": t_calls_done,
            "total_until_background_done_s": t_settled, "total_cpu_s": c_calls_done,
            "total_until_background_done_cpu_s": c_settled, "cache_info_after_calls": info, "correct": ok}, k


def settle_auto(k: Kernel, Ts: list[int], data) -> dict:
    """Call ``auto`` on each size of the sequence ``auto_threshold`` times and
    wait for the builds it starts: what it serves afterwards is its steady
    state.  Under the payback rule (``auto_payback``) a size gets a binary
    only once its calls have taken as long as a build, so small sizes stay
    on the symbolic kernel: ``specialized`` counts the sizes that got one."""
    full, h0, i2h, h2h = data
    t0 = time.perf_counter()
    calls = 0
    keys = []
    for T in sorted(set(Ts)):
        key = (T, h0.shape[0], full.shape[2], h0.shape[1])
        keys.append(key)
        while key not in k._binaries and k._seen[key] < k._auto_threshold:
            k(full[:T], h0, i2h, h2h)
            calls += 1
    wait_for_background(k)
    return {"calls": calls, "seconds": time.perf_counter() - t0, "cache_info": k.cache_info(),
            "specialized": sum(key in k._binaries for key in keys), "sizes": len(keys)}


def steady(kernels: dict, Ts: list[int], data, replays: int) -> dict[str, list[float]]:
    """Seconds per replay of the sequence, the modes interleaved (a loaded machine drifts)."""
    full, h0, i2h, h2h = data
    times = {m: [] for m in kernels}
    for _ in range(replays):
        for m, k in kernels.items():
            t, c = time.perf_counter(), time.process_time()
            for T in Ts:
                k(full[:T], h0, i2h, h2h)
            times[m].append((time.perf_counter() - t, time.process_time() - c))
    return times


def symbolic_vs_specialized(kernels: dict, data, Tvals: list[int], reps: int) -> list[dict]:
    """ms per call at each T (median of ``reps``; the modes interleaved call by call)."""
    full, h0, i2h, h2h = data
    modes = ("never", "after-scheduling", "before-scheduling")
    rows = []
    for T in Tvals:
        x = full[:T]
        times = {m: [] for m in modes}
        cpu = {m: [] for m in modes}
        for m in modes:
            kernels[m](x, h0, i2h, h2h)  # warm (and compiled)
        for _ in range(reps):
            for m in modes:
                t, c = time.perf_counter(), time.process_time()
                kernels[m](x, h0, i2h, h2h)
                times[m].append(time.perf_counter() - t)
                cpu[m].append(time.process_time() - c)
        row = {"T": T, **{f"{m}_ms": 1e3 * statistics.median(times[m]) for m in modes},
               **{f"{m}_cpu_ms": 1e3 * statistics.median(cpu[m]) for m in modes}}
        row["cpu_ratio_vs_after"] = row["never_cpu_ms"] / row["after-scheduling_cpu_ms"]
        row["cpu_ratio_vs_before"] = row["never_cpu_ms"] / row["before-scheduling_cpu_ms"]
        row["ratio_vs_after"] = row["never_ms"] / row["after-scheduling_ms"]
        row["ratio_vs_before"] = row["never_ms"] / row["before-scheduling_ms"]
        rows.append(row)
    return rows


def overhead(n: int, repeat: int) -> dict:
    """µs per call on tiny sizes: the kernel against its raw TVM function
    (the best of ``repeat`` batches of ``n`` calls: the machine is shared).
    ``*_cpu_us`` is the calling thread's CPU time (``time.thread_time``),
    which a loaded machine does not inflate: the overhead is Python work on
    this thread."""
    rng = np.random.default_rng(0)
    T, B, C = 2, 1, 2
    x, h0, i2h, h2h = (rng.standard_normal(s).astype(np.float32) for s in [(T, B, C), (B, C), (C, C), (C, C)])
    out = np.zeros((T, B, C), np.float32)
    result = {"sizes": {"T": T, "B": B, "Ci": C, "Co": C}, "calls": n, "repeat": repeat}

    def best(f) -> tuple[float, float]:
        f()
        wall, cpu = [], []
        for _ in range(repeat):
            t, c = time.perf_counter(), time.thread_time()
            for _ in range(n):
                f()
            wall.append((time.perf_counter() - t) / n)
            cpu.append((time.thread_time() - c) / n)
        return 1e6 * min(wall), 1e6 * min(cpu)

    for mode in ("never", "after-scheduling"):
        k = tcdsl.compile(ELMAN, specialize=mode, options={"disk_cache": False})
        k(x, h0, i2h, h2h)  # compiles the per-size binary (after-scheduling)
        b = k._binaries[None if mode == "never" else (T, B, C, C)]
        sizes = {"T": T, "B": B, "Ci": C, "Co": C}
        call_args = [sizes[s] for s in b.size_params] + [x, h0, i2h, h2h, out]
        fn = b.fn
        (raw, raw_c), (kern, kern_c), (kern_out, kern_out_c) = (
            best(lambda: fn(*call_args)), best(lambda: k(x, h0, i2h, h2h)),
            best(lambda: k(x, h0, i2h, h2h, out=out)))
        result[mode] = {"raw_us": raw, "kernel_us": kern, "kernel_out_us": kern_out,
                        "overhead_us": kern - raw, "overhead_out_us": kern_out - raw,
                        "raw_cpu_us": raw_c, "kernel_cpu_us": kern_c, "kernel_out_cpu_us": kern_out_c,
                        "overhead_cpu_us": kern_c - raw_c, "overhead_out_cpu_us": kern_out_c - raw_c}
    return result


def disk_ready(reps: int) -> dict:
    """ms to ready a kernel from the disk cache in a warm process (``tcdsl.compile``
    end to end, and its two parts: the front end, and the kernel made from the
    disk entry), against a compile into an empty cache (which also exports the
    library).  Median and best of wall time and of this thread's CPU time."""
    saved = {k: os.environ.get(k) for k in ("TCDSL_CACHE_DIR", "TCDSL_DISK_CACHE")}
    d = tempfile.mkdtemp(prefix="tcdsl-bench-cache-")
    os.environ["TCDSL_CACHE_DIR"], os.environ["TCDSL_DISK_CACHE"] = d, "1"
    samples: dict[str, list[tuple[float, float]]] = {"compile_into_empty_cache": [], "compile_from_disk": [],
                                                     "frontend": [], "kernel_from_disk": []}

    def timed(name, f):
        t, c = time.perf_counter(), time.thread_time()
        r = f()
        samples[name].append((time.perf_counter() - t, time.thread_time() - c))
        return r

    try:
        src = Source.load(ELMAN)
        for _ in range(max(1, reps // 4)):
            cache.clear()
            k = timed("compile_into_empty_cache", lambda: tcdsl.compile(ELMAN))
            assert k.cache_info()["compiles"] == 1
        for _ in range(reps):
            k = timed("compile_from_disk", lambda: tcdsl.compile(ELMAN))
            assert k.cache_info()["disk_hits"] == 1
            fe = timed("frontend", lambda: driver.frontend(src))
            k = timed("kernel_from_disk", lambda: Kernel(fe))
            assert k.cache_info()["disk_hits"] == 1
        result = {"reps": reps, "library_bytes": cache.info()["bytes"]}
        for name, xs in samples.items():
            wall, cpu = [w for w, _ in xs], [c for _, c in xs]
            result[name] = {"median_ms": 1e3 * statistics.median(wall), "best_ms": 1e3 * min(wall),
                            "median_cpu_ms": 1e3 * statistics.median(cpu), "best_cpu_ms": 1e3 * min(cpu)}
        return result
    finally:
        cache.clear()
        os.rmdir(d)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _git_state() -> dict:
    import subprocess

    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"head": git("rev-parse", "HEAD"), "dirty_files": git("status", "--porcelain", "--", "tcdsl").splitlines()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--tmax", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--channels", type=int, default=256, help="Ci = Co")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--auto-threshold", type=int, default=3)
    p.add_argument("--replays", type=int, default=1)
    p.add_argument("--reps", type=int, default=20, help="calls per timing in the ratio and disk measurements")
    p.add_argument("--ratio-T", default="1,16,64,256", help="values of T for the symbolic/specialized ratio")
    p.add_argument("--out", help="JSON path (default benchmarks/results/dynamic_shapes-<time>.json)")
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]

    rng = np.random.default_rng(args.seed)
    Ts = [int(t) for t in rng.integers(1, args.tmax + 1, args.calls)]
    data = inputs_for(np.random.default_rng(args.seed + 1), args.tmax, args.batch, args.channels)
    tcdsl.compile(ELMAN, options={"disk_cache": False})  # parser and imports warm before timing
    result = {
        "workload": {"program": "examples/rnn/elman.tc", "calls": args.calls, "T": [1, args.tmax],
                     "B": args.batch, "Ci": args.channels, "Co": args.channels, "seed": args.seed,
                     "distinct_T": len(set(Ts)), "auto_threshold": args.auto_threshold},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS"), "loadavg_at_start": os.getloadavg()},
        "versions": {"tcdsl": tcdsl.__version__, "tvm": __import__("tvm").__version__},
        "argv": sys.argv[1:],
        "git": _git_state(),
        "modes": {},
    }
    kernels = {}
    for mode in modes:
        r, kernels[mode] = churn(mode, Ts, data, args)
        result["modes"][mode] = r
        print(f"{mode:18s} total {r['total_s']:8.2f} s (background done {r['total_until_background_done_s']:.2f} s)"
              f"  process CPU {r['total_cpu_s']:8.2f} s ({r['total_until_background_done_cpu_s']:.2f} s)"
              f"  compiles {r['cache_info_after_calls']['compiles']:4d}  correct {r['correct']}", flush=True)
    if "auto" in kernels:
        result["auto_settle"] = st = settle_auto(kernels["auto"], Ts, data)
        print(f"auto settled: {st['calls']} more calls, {st['seconds']:.2f} s, {st['specialized']} of "
              f"{st['sizes']} sizes specialised (the rest served by the symbolic kernel), {st['cache_info']}",
              flush=True)
    times = steady(kernels, Ts, data, args.replays)
    for mode in modes:
        r = result["modes"][mode]
        r["replays_s"] = [w for w, _ in times[mode]]
        r["replays_cpu_s"] = [c for _, c in times[mode]]
        r["steady_per_call_ms"] = 1e3 * min(r["replays_s"]) / len(Ts)
        r["steady_per_call_cpu_ms"] = 1e3 * min(r["replays_cpu_s"]) / len(Ts)
        r["cache_info"] = kernels[mode].cache_info()
        print(f"{mode:18s} steady {r['steady_per_call_ms']:8.3f} ms/call (process CPU "
              f"{r['steady_per_call_cpu_ms']:8.3f} ms/call)", flush=True)

    if all(m in kernels for m in ("never", "after-scheduling", "before-scheduling")):
        Tvals = [min(int(t), args.tmax) for t in args.ratio_T.split(",")]
        rows = symbolic_vs_specialized(kernels, data, Tvals, args.reps)
        result["symbolic_vs_specialized"] = rows
        for r in rows:
            print(f"T={r['T']:4d}  symbolic {r['never_ms']:8.3f} ms  after {r['after-scheduling_ms']:8.3f} ms"
                  f"  before {r['before-scheduling_ms']:8.3f} ms  ratio {r['ratio_vs_after']:.3f} / "
                  f"{r['ratio_vs_before']:.3f}  (process CPU ratio {r['cpu_ratio_vs_after']:.3f} / "
                  f"{r['cpu_ratio_vs_before']:.3f})", flush=True)
        per_call = {m: r["steady_per_call_ms"] for m, r in result["modes"].items()}
        result["steady_ratio_never_vs_after"] = per_call["never"] / per_call["after-scheduling"]
        result["steady_ratio_never_vs_before"] = per_call["never"] / per_call["before-scheduling"]
    kernels.clear()

    result["overhead"] = ov = overhead(n=500, repeat=20)
    for mode in ("never", "after-scheduling"):
        o = ov[mode]
        print(f"overhead ({mode}): raw {o['raw_us']:.1f} µs, kernel {o['kernel_us']:.1f} µs "
              f"(+{o['overhead_us']:.1f}), with out= {o['kernel_out_us']:.1f} µs (+{o['overhead_out_us']:.1f}); "
              f"thread CPU time: raw {o['raw_cpu_us']:.1f}, kernel {o['kernel_cpu_us']:.1f} "
              f"(+{o['overhead_cpu_us']:.1f}), with out= {o['kernel_out_cpu_us']:.1f} "
              f"(+{o['overhead_out_cpu_us']:.1f})")
    result["disk"] = dk = disk_ready(args.reps)
    for name in ("compile_into_empty_cache", "compile_from_disk", "frontend", "kernel_from_disk"):
        x = dk[name]
        print(f"disk cache: {name:25s} median {x['median_ms']:7.2f} ms (best {x['best_ms']:7.2f}); "
              f"thread CPU median {x['median_cpu_ms']:7.2f} ms (best {x['best_cpu_ms']:7.2f})")

    result["machine"]["loadavg_at_end"] = os.getloadavg()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"dynamic_shapes-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    wrong = [m for m, r in result["modes"].items() if not r["correct"]]
    if wrong:
        print(f"WRONG RESULTS in mode(s) {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
