"""Compile an RNN example, run it on random inputs, check it against NumPy.

    python examples/rnn/run.py elman --sizes T=64,B=32,Ci=256,Co=256
    python examples/rnn/run.py qrnn  --sizes T=64,B=32,C=256,H=256
    python examples/rnn/run.py lstm  --sizes T=64,B=32,I=256,H=256
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

import tcdsl

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference  # noqa: E402

EXAMPLES = {
    "elman": ("elman.tc", reference.elman_rnn, "T=64,B=32,Ci=256,Co=256",
              lambda s: [(s["T"], s["B"], s["Ci"]), (s["B"], s["Co"]), (s["Ci"], s["Co"]), (s["Co"], s["Co"])]),
    "qrnn": ("qrnn.tc", reference.qrnn, "T=64,B=32,C=256,H=256",
             lambda s: [(s["T"], s["B"], s["C"]), (3, s["C"], s["H"]), (3, s["C"], s["H"]), (3, s["H"])]),
    "lstm": ("lstm.tc", reference.lstm, "T=64,B=32,I=256,H=256",
             lambda s: [(s["T"], s["B"], s["I"]), (s["B"], s["H"]), (s["B"], s["H"]), (4, s["I"], s["H"]),
                        (4, s["H"], s["H"]), (4, s["H"])]),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("example", choices=sorted(EXAMPLES))
    ap.add_argument("--sizes", help="e.g. T=64,B=32,Ci=256,Co=256")
    ap.add_argument("--specialize", default="never")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args(argv)
    file, ref, default_sizes, shapes = EXAMPLES[a.example]
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in (a.sizes or default_sizes).split(","))}
    t0 = time.perf_counter()
    k = tcdsl.compile(HERE / file, specialize=a.specialize)
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    inputs = [(rng.standard_normal(s) / np.sqrt(s[-2] if len(s) > 1 else 1)).astype(np.float32)
              for s in shapes(sizes)]
    outs = k(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    want = ref(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    err = max(float(np.abs(o - w).max()) for o, w in zip(outs, want))
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        k(*inputs)
        times.append(time.perf_counter() - t0)
    print(f"{a.example} {sizes}: compile {compile_s * 1e3:.0f} ms, run {np.median(times) * 1e3:.3f} ms "
          f"(median of {a.repeat}), max abs error vs NumPy {err:.2e}")
    ok = err < 1e-4
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
