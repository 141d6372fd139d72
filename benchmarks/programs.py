"""A suite of programs written as a new user writes them (from README.md and
docs/ only), each timed against the best PyTorch or NumPy contender written
as a competent user would (the fused library op where there is one: nn.GRU,
nn.LSTM, F.conv1d, F.scaled_dot_product_attention, F.layer_norm, ...).

    .venv/bin/python benchmarks/programs.py                # all programs
    .venv/bin/python benchmarks/programs.py --quick        # fewer rounds: a smoke run
    .venv/bin/python benchmarks/programs.py --only gru     # names containing 'gru'
    .venv/bin/python benchmarks/programs.py --specialize   # also the specialised binaries

The programs are in benchmarks/program_defs.py.  Each is compiled with the
default options (``tcdsl.compile``; fresh output memory at each call, as the
contenders get), its result is checked against every contender (the script
exits 1 on a mismatch), then the contenders run in interleaved rounds with a
pause before each (see benchmarks/rnn.py) and the medians are compared:
``ratio`` is tcdsl's time over the fastest contender.  With ``--specialize``
the ``after-scheduling`` and ``before-scheduling`` binaries are timed in the
same rounds and their ratio to the symbolic kernel is printed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's tcdsl, not the installed one
import program_defs  # noqa: E402
from program_defs import PROGRAMS, Program  # noqa: E402
from rnn import FRESH, interleaved  # noqa: E402

import tcdsl  # noqa: E402

RTOL = 2e-3  # max abs error over max(1, max |reference|): float32 with long reductions and recurrences


def _numpy(r):
    if isinstance(r, (tuple, list)):
        return [_numpy(x) for x in r]
    if hasattr(r, "detach"):
        return r.detach().numpy()
    return np.asarray(r)


def error(got, want) -> float:
    got, want = np.asarray(_numpy(got)), np.asarray(_numpy(want))
    if got.shape != want.shape:
        return math.inf
    if got.dtype.kind in "iu":
        return float(np.count_nonzero(got != want))
    return float(np.abs(got.astype(np.float64) - want).max(initial=0) / max(1.0, float(np.abs(want).max(initial=0))))


def prepare(p: Program, sizes: dict, torch, specialize: str = "never", seed: int = 0):
    """Compile ``p``, make its inputs; returns (tcdsl call, contenders, errors by contender)."""
    rng = np.random.default_rng(seed)
    arrays = p.inputs(rng, sizes)
    tensors = [torch.from_numpy(a) for a in arrays]
    k = tcdsl.compile(p.src, specialize=specialize, options=FRESH)
    free = {n: sizes[n] for n in p.free}

    def run():
        return k(*arrays, **free)
    contenders = p.contenders(torch, arrays, tensors, sizes)
    got = p.pick(run())
    errors = {name: error(got, fn()) for name, fn in contenders.items()}
    return run, contenders, errors


def check(p: Program, sizes: dict, torch) -> dict[str, float]:
    """Errors of tcdsl's result against each contender at these sizes."""
    return prepare(p, sizes, torch)[2]


def _sizes_str(s: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in s.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="substrings of the program names to run, separated by commas")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 1 repeat: a smoke run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--specialize", action="store_true",
                    help="also time specialize='after-scheduling' and 'before-scheduling' against the symbolic kernel")
    ap.add_argument("--tiny", action="store_true", help="the tiny sizes of the smoke test (checks only)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads of PyTorch and of tcdsl's kernels (TVM_NUM_THREADS); default: all cores")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.repeat = 2, 1
    os.environ["TVM_NUM_THREADS"] = str(a.threads)  # read when TVM's thread pool starts, at the first call
    import torch

    torch.set_num_threads(a.threads)
    only = [x for x in (a.only or "").split(",") if x]
    progs = [p for p in PROGRAMS if not only or any(x in p.name for x in only)]
    rows, wrong = [], []
    print(f"{len(progs)} programs; load average {os.getloadavg()[0]:.2f}", flush=True)
    for p in progs:
        sizes = p.tiny if a.tiny else p.full
        t0 = time.perf_counter()
        run, contenders, errors = prepare(p, sizes, torch)
        compile_s = time.perf_counter() - t0
        bad = {n: e for n, e in errors.items() if not e <= RTOL}
        if bad:
            wrong.append(f"{p.name}: " + ", ".join(f"{n} error {e:.2e}" for n, e in bad.items()))
        if a.tiny:
            print(f"{p.name:36s} err {max(errors.values()):.1e} {'WRONG' if bad else 'ok'}", flush=True)
            continue
        timed = {"tcdsl": run, **contenders}
        if a.specialize:
            for mode in ("after-scheduling", "before-scheduling"):
                srun, _, serr = prepare(p, sizes, torch, specialize=mode)
                if not max(serr.values()) <= RTOL:
                    wrong.append(f"{p.name} ({mode}): error {max(serr.values()):.2e}")
                timed[f"tcdsl {mode}"] = srun
        times = interleaved(timed, a.rounds, a.repeat)
        best_name = min(contenders, key=times.__getitem__)
        row = {"name": p.name, "kind": p.kind, "sizes": sizes, "ms": {k: v * 1e3 for k, v in times.items()},
               "best": best_name, "ratio": times["tcdsl"] / times[best_name], "error": max(errors.values()),
               "setup s": compile_s}
        if a.specialize:
            row["symbolic / specialised"] = {m: times["tcdsl"] / times[f"tcdsl {m}"]
                                             for m in ("after-scheduling", "before-scheduling")}
        rows.append(row)
        spec = ""
        if a.specialize:
            spec = "  specialised/symbolic " + " ".join(
                f"{times[f'tcdsl {m}'] / times['tcdsl']:.2f}" for m in ("after-scheduling", "before-scheduling"))
        print(f"{p.name:36s} tcdsl {times['tcdsl'] * 1e3:8.3f} ms  {best_name} {times[best_name] * 1e3:8.3f} ms"
              f"  ratio {row['ratio']:5.2f}  err {row['error']:.1e}{spec}", flush=True)
    if rows:
        results = {"load average after": os.getloadavg(), "cpu": _cpu(), "argv": sys.argv[1:], "threads": a.threads,
                   "programs": rows}
        out_dir = HERE / "results"
        out_dir.mkdir(exist_ok=True)
        path = out_dir / f"programs-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps(results, indent=2))
        print(f"\nresults: {path}")
        print_table(rows, a.specialize, a.threads)
        chart(rows)
    for w in wrong:
        print(f"WRONG RESULT: {w}", file=sys.stderr)
    return 1 if wrong else 0


def _cpu() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def geomean(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def print_table(rows: list[dict], specialize: bool, threads: int) -> None:
    """The Markdown table of benchmarks/README.md."""
    print(f"\nCPU: {_cpu()}, {os.cpu_count()} cores, {threads} threads, load average {os.getloadavg()[0]:.2f}\n")
    head = "| program | sizes | tcdsl | fastest contender | ratio |"
    sep = "|---|---|---:|---|---:|"
    if specialize:
        head += " symbolic / after-sched. | symbolic / before-sched. |"
        sep += "---:|---:|"
    print(head)
    print(sep)
    for r in rows:
        ms = r["ms"]
        line = (f"| {r['name']} | {_sizes_str(r['sizes'])} | {ms['tcdsl']:.3g} ms | {r['best']} {ms[r['best']]:.3g} ms"
                f" | {r['ratio']:.2f} |")
        if specialize:
            s = r["symbolic / specialised"]
            line += f" {s['after-scheduling']:.2f} | {s['before-scheduling']:.2f} |"
        print(line)
    ratios = [r["ratio"] for r in rows]
    worst = max(rows, key=lambda r: r["ratio"])
    print(f"\ngeometric mean of the ratios: {geomean(ratios):.2f}; worst: {worst['ratio']:.2f} ({worst['name']})")
    if specialize:
        for m in ("after-scheduling", "before-scheduling"):
            v = [1 / r["symbolic / specialised"][m] for r in rows]
            print(f"{m} / symbolic: geometric mean {geomean(v):.2f}, worst {max(v):.2f}")


def chart(rows: list[dict], path: pathlib.Path | None = None) -> None:
    """A bar chart of the ratios: matplotlib when installed, else ASCII on stdout."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    if plt is not None:
        names, ratios = [r["name"] for r in rows], [r["ratio"] for r in rows]
        fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1))
        ax.barh(names, ratios, color=["tab:green" if x <= 1 else "tab:red" for x in ratios])
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("tcdsl time / fastest contender (lower is better)")
        fig.tight_layout()
        path = path or HERE / "results" / "programs.png"
        fig.savefig(path, dpi=100)
        print(f"chart: {path}")
        return
    print("\ntcdsl / fastest contender (log scale; '|' marks 1.0)")
    print(ascii_chart(rows))


def ascii_chart(rows: list[dict], width: int = 40) -> str:
    """Bars on a log2 scale from 1/8 to 8, '|' at 1."""
    lo, hi = -3.0, 3.0
    zero = round((0 - lo) / (hi - lo) * width)
    lines = []
    for r in rows:
        x = min(max(math.log2(r["ratio"]), lo), hi)
        pos = round((x - lo) / (hi - lo) * width)
        cells = [" "] * (width + 1)
        a, b = sorted((pos, zero))
        for i in range(a, b + 1):
            cells[i] = "#"
        cells[zero] = "|"
        lines.append(f"{r['name'][:36]:36s} {''.join(cells)} {r['ratio']:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
