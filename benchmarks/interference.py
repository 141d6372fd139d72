"""Interference with PyTorch: a PyTorch op timed right after a tcdsl call.

TVM's worker threads spin after a parallel region before they sleep (up to
``TVM_THREAD_POOL_SPIN_COUNT`` yields, 300000 by TVM's default); while they
spin they compete with PyTorch's threads.  ``import tcdsl`` sets the count to
``tcdsl.THREAD_POOL_SPIN_COUNT`` unless the variable is set (docs/performance.md).

For each spin count (a child process each, the variable set before TVM
starts), the contenders run in interleaved rounds, and the median round is
reported:

* ``torch alone``: ``torch.nn.GRU`` after a pause of 50 ms with no tcdsl call;
* ``torch after tcdsl``: the same GRU timed right after a tcdsl Elman call;
* ``elman``, ``lstm``: tcdsl's own per-call time (its speed must not drop).

    .venv/bin/python benchmarks/interference.py
    .venv/bin/python benchmarks/interference.py --spin default 0 1000 --rounds 21
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RNN = ROOT / "examples" / "rnn"


def child(rounds: int) -> dict:
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch

    import tcdsl

    rng = np.random.default_rng(0)

    def r(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    elman = tcdsl.compile(RNN / "elman.tc")
    lstm = tcdsl.compile(RNN / "lstm.tc")
    T, B, C = 64, 32, 256
    e_in = (r(T, B, C), r(B, C), r(C, C), r(C, C))
    l_in = (r(T, B, C), r(B, C), r(B, C), r(4, C, C), r(4, C, C), r(4, C))
    gru = torch.nn.GRU(128, 128)
    x = torch.randn(32, 8, 128)
    for _ in range(3):
        elman(*e_in), lstm(*l_in)
        with torch.no_grad():
            gru(x)

    def torch_op() -> float:
        t0 = time.perf_counter()
        with torch.no_grad():
            gru(x)
        return time.perf_counter() - t0

    def timed(f) -> float:
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0

    times = {"torch alone": [], "torch after tcdsl": [], "elman": [], "lstm": []}
    for _ in range(rounds):
        time.sleep(0.05)
        times["torch alone"].append(torch_op())
        time.sleep(0.05)
        elman(*e_in)
        times["torch after tcdsl"].append(torch_op())
        time.sleep(0.05)
        times["elman"].append(statistics.median(timed(lambda: elman(*e_in)) for _ in range(3)))
        times["lstm"].append(statistics.median(timed(lambda: lstm(*l_in)) for _ in range(3)))
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spin", nargs="+", default=["default", "tcdsl"],
                    help="spin counts to compare: a number, 'default' (TVM's own, 300000), "
                         "'tcdsl' (what import tcdsl sets)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds)))
        return 0
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'spin count':>12s} {'torch alone':>12s} {'torch after':>12s} {'ratio':>6s} {'elman ms':>9s} {'lstm ms':>8s}")
    for spin in args.spin:
        env = dict(os.environ)
        env.pop("TVM_THREAD_POOL_SPIN_COUNT", None)
        if spin == "default":
            env["TVM_THREAD_POOL_SPIN_COUNT"] = "300000"
        elif spin != "tcdsl":
            env["TVM_THREAD_POOL_SPIN_COUNT"] = spin
        out = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(args.rounds)], env=env,
                             check=True, capture_output=True, text=True).stdout
        m = json.loads(out.strip().splitlines()[-1])
        print(f"{spin:>12s} {m['torch alone']:12.2f} {m['torch after tcdsl']:12.2f} "
              f"{m['torch after tcdsl'] / m['torch alone']:6.2f} {m['elman']:9.3f} {m['lstm']:8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
