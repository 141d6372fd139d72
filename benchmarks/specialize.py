"""Specialized binaries against the symbolic kernel, at batch 1 and other small sizes.

For each program and size tuple, the symbolic kernel (``specialize="never"``)
and the binaries of ``after-scheduling`` and ``before-scheduling`` (measured
dispatch off, so that the specialized binary itself serves) run on the same
inputs in interleaved rounds; each round times ``--repeat`` calls of each, and
the median round is reported with each specialized binary's ratio to the
symbolic kernel (issue 13: at most about 1.10).

    .venv/bin/python benchmarks/specialize.py
    .venv/bin/python benchmarks/specialize.py --rounds 15 --only elman
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

RNN = ROOT / "examples" / "rnn"
MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
# A GRU with the weights in (in, out) layout, gates r, z, n as in torch.nn.GRU (the programs suite's).
from program_defs import GRU_IN_OUT as GRU  # noqa: E402


def _r(rng, *shape):
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def cases():
    """(name, source, inputs maker) for each program and size tuple."""
    out = []
    for T, B, C in [(256, 1, 128), (64, 1, 32), (32, 2, 64), (16, 3, 96)]:
        out.append((f"elman T={T} B={B} C={C}", RNN / "elman.tc",
                    lambda rng, T=T, B=B, C=C: (_r(rng, T, B, C), _r(rng, B, C), _r(rng, C, C), _r(rng, C, C))))
    for T, B, I, H in [(64, 1, 64, 64), (32, 1, 32, 128), (16, 2, 48, 48), (16, 64, 256, 512)]:
        out.append((f"lstm T={T} B={B} I={I} H={H}", RNN / "lstm.tc",
                    lambda rng, T=T, B=B, I=I, H=H: (_r(rng, T, B, I), _r(rng, B, H), _r(rng, B, H),
                                                     _r(rng, 4, I, H), _r(rng, 4, H, H), _r(rng, 4, H))))
        out.append((f"gru T={T} B={B} I={I} H={H}", GRU,
                    lambda rng, T=T, B=B, I=I, H=H: (_r(rng, T, B, I), _r(rng, B, H), _r(rng, 3, I, H),
                                                     _r(rng, 3, H, H), _r(rng, 3, H), _r(rng, 3, H))))
    for T, B, C, H in [(128, 1, 64, 64), (32, 2, 32, 96)]:
        out.append((f"qrnn T={T} B={B} C={C} H={H}", RNN / "qrnn.tc",
                    lambda rng, T=T, B=B, C=C, H=H: (_r(rng, T, B, C), _r(rng, 3, C, H), _r(rng, 3, C, H),
                                                     _r(rng, 3, H))))
    for M, K, N in [(1, 512, 512), (1, 256, 1), (3, 128, 256), (64, 64, 1)]:
        out.append((f"matmul M={M} K={K} N={N}", MATMUL,
                    lambda rng, M=M, K=K, N=N: (_r(rng, M, K), _r(rng, K, N))))
    return out


def _time(f, repeat: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - t0) / repeat


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="", help="only the cases whose name contains this")
    args = ap.parse_args()
    opts = {"measure_specialized": False}
    worst = 0.0
    print(f"{'case':34s} {'symbolic ms':>11s} {'after ms':>9s} {'ratio':>6s} {'before ms':>9s} {'ratio':>6s}")
    for name, src, make in cases():
        if args.only not in name:
            continue
        inputs = make(np.random.default_rng(0))
        ks = {mode: tcdsl.compile(src, specialize=mode, options=opts)
              for mode in ("never", "after-scheduling", "before-scheduling")}
        want = ks["never"](*inputs)
        want = want if isinstance(want, tuple) else (want,)
        for mode, k in ks.items():  # compiles the specialized binaries; checks they agree
            got = k(*inputs)
            for a, b in zip(got if isinstance(got, tuple) else (got,), want):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"{name} {mode}")
        times = {mode: [] for mode in ks}
        for _ in range(args.rounds):
            for mode, k in ks.items():
                times[mode].append(_time(lambda k=k: k(*inputs), args.repeat))
        med = {mode: statistics.median(v) * 1e3 for mode, v in times.items()}
        ra, rb = med["after-scheduling"] / med["never"], med["before-scheduling"] / med["never"]
        worst = max(worst, ra, rb)
        print(f"{name:34s} {med['never']:11.3f} {med['after-scheduling']:9.3f} {ra:6.2f} "
              f"{med['before-scheduling']:9.3f} {rb:6.2f}", flush=True)
    print(f"worst specialized / symbolic: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
