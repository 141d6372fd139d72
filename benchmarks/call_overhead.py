"""Call overhead: a kernel call against its raw TVM function, on tiny sizes.

The kernel is ``C(i) = A(i) + B(i)`` on 16 float32 elements (as in
``benchmarks/rnn.py``'s ``call_overhead``), called in a loop with arrays of
shapes it has seen before: NumPy, NumPy with ``out=``, PyTorch CPU tensors
(when torch is installed), and a scaled variant with a Python float for its
0-rank input.  Each case runs ``--batches`` batches of ``--calls`` calls,
the cases interleaved batch by batch (the machine is shared), and reports
the best and the median batch in µs per call.

    .venv/bin/python benchmarks/call_overhead.py
    .venv/bin/python benchmarks/call_overhead.py --mode auto --batches 60
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tcdsl  # noqa: E402

ADD = "def add(float(N) A, float(N) B) -> (C) { C(i) = A(i) + B(i) }"
SCALE = "def scale(float(N) A, float s) -> (C) { C(i) = A(i) * s }"


def cases(mode: str) -> dict:
    opts = {"disk_cache": False, "auto_threshold": 3}
    add, scale = (tcdsl.compile(src, specialize=mode, options=opts) for src in (ADD, SCALE))
    A, C = np.ones(16, np.float32), np.zeros(16, np.float32)
    for _ in range(5):  # compiles the per-size binary (and, for auto, hands it to the background)
        add(A, A)
        scale(A, 2.0)
    deadline = time.time() + 120
    while getattr(add, "_in_flight", 0) and time.time() < deadline:
        time.sleep(0.05)
    add(A, A)
    b = add._binaries.get((16,)) or add._binaries[None]
    fn, size_args = b.fn, [16][:len(b.size_params)]
    out = {"raw TVM function": lambda: fn(*size_args, A, A, C),
           "k(A, B)": lambda: add(A, A),
           "k(A, B, out=C)": lambda: add(A, A, out=C),
           "k(A, 2.0) (0-rank input)": lambda: scale(A, 2.0)}
    try:
        import torch
    except ImportError:
        return out
    tA, tC = torch.ones(16), torch.zeros(16)
    add(tA, tA)
    out["raw TVM function, torch"] = lambda: fn(*size_args, tA, tA, tC)
    out["k(A, B), torch"] = lambda: add(tA, tA)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="never", choices=("never", "after-scheduling", "before-scheduling", "auto"))
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--batches", type=int, default=40)
    a = p.parse_args(argv)
    fns = cases(a.mode)
    times: dict[str, list[float]] = {c: [] for c in fns}
    for _ in range(a.batches):
        for c, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(a.calls):
                f()
            times[c].append((time.perf_counter() - t0) / a.calls * 1e6)
    print(f"specialize={a.mode}, {a.batches} batches of {a.calls} calls, µs per call")
    for c, xs in times.items():
        print(f"  {c:28s} best {min(xs):6.2f}   median {statistics.median(xs):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
