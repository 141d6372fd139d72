"""The batch-1 Elman RNN's persistent kernel alone: tcdsl's (one thread per
output, and with ``split``) against hand-written kernels of the same loop.

    python3 benchmarks/cuda_step_kernels.py [--out DIR]   # needs a CUDA GPU and CuPy

tcdsl compiles examples/rnn/elman.tc for CUDA; the persistent kernels (those
running the loop ``for t``) are taken from its CUDA source and launched with
CuPy with the arguments its host code passes (read from the host TIR), on
an input projection ``hidden_in`` computed beforehand, so only the loop is
timed.  benchmarks/cuda_step_kernels.cu holds the hand-written kernels (its
header says what each does).  Each kernel's result is checked against NumPy
in float64; times are CUDA-event medians of interleaved rounds, microseconds
per step, and the ratio to tcdsl's default kernel.  Without CuPy or a GPU it
says so and exits 0.  Results go to DIR/cuda-step-kernels.json.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = [(1, 128), (1, 256), (1, 64), (1, 33), (2, 64), (4, 256)]  # (B, C)
T = 256


def host_calls(host: str, sizes: dict) -> dict:
    """kernel name -> (argument list, threads per block) of each launch in
    the host TIR, the size expressions evaluated at ``sizes``."""
    env = dict(sizes)
    for name, expr in re.findall(r"^\s*(\w+): T\.let\[T\.int32\] = (.+)$", host, re.M):
        try:
            env[name] = eval(expr.replace("T.max(", "max(").replace("T.min(", "min("), {}, dict(env))
        except Exception:  # an expression of the call's arguments, not of the sizes
            pass
    calls = {}
    for name, args in re.findall(r'T\.call_ffi_kernel\("(\w+)", (.*?), launch_params', host):
        parts = [a.strip() for a in args.split(", ")]
        calls[name] = (parts[:-2], parts[-1])
    return calls, env


def persistent_kernels(src: str) -> list[tuple[str, int]]:
    """(name, threads) of the kernels of ``src`` that run the loop ``for t``."""
    found = re.findall(r"__launch_bounds__\((\d+)\) (\w+)\([^)]*\) \{\n(.*?)\n\}\n", src, re.S)
    return [(name, int(threads)) for threads, name, body in found if "for (int t = 0; t < T; ++t)" in body]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # no CuPy, no driver or no device
        print(f"no CUDA GPU with CuPy here ({type(e).__name__}): nothing to measure")
        return 0
    import tcdsl

    opts = ("--std=c++17",)
    hand = cp.RawModule(code=(ROOT / "benchmarks" / "cuda_step_kernels.cu").read_text(), options=opts)
    variants = {"tcdsl": {}, "tcdsl split": {"split": True}}
    kernels = {label: tcdsl.compile(ROOT / "examples" / "rnn" / "elman.tc", target="cuda", options=o)
               for label, o in variants.items()}
    modules = {label: cp.RawModule(code=k.source_code("cuda"), options=opts) for label, k in kernels.items()}
    i32 = np.int32

    def timeit(fn) -> float:
        fn()
        cp.cuda.Device().synchronize()
        s, e, ts = cp.cuda.Event(), cp.cuda.Event(), []
        for _ in range(args.repeat):
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
        return statistics.median(ts)

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    results = []
    for B, C in SIZES:
        rng = np.random.default_rng(0)
        W = (rng.standard_normal((C, C)) / np.sqrt(C)).astype(np.float32)
        h0 = (rng.standard_normal((B, C)) * 0.5).astype(np.float32)
        hin = (rng.standard_normal((T, B, C)) * 0.5).astype(np.float32)
        h, want = h0.astype(np.float64), []
        for t in range(T):
            h = np.tanh(h @ W.astype(np.float64) + hin[t])
            want.append(h)
        want = np.stack(want)
        dev = {"h0": cp.asarray(h0), "h2h": cp.asarray(W), "hidden_in": cp.asarray(hin),
               "hidden": cp.zeros((T, B, C), cp.float32)}
        cands = {}
        for label, k in kernels.items():
            calls, env = host_calls(k.source_code("host"), {"T_1": T, "B": B, "Ci": C, "Co": C})
            for name, threads in persistent_kernels(k.source_code("cuda")):
                if B * C > threads:  # the host runs this block only where every phase fits it
                    continue
                values = []
                for a in calls[name][0]:
                    m = re.fullmatch(r"(\w+?)(_\d+)?\.data", a)
                    values.append(dev[m.group(1)] if m else i32(eval(a, {}, dict(env))))
                fn = modules[label].get_function(name)
                cands[f"{label} ({threads})"] = (lambda fn=fn, threads=threads, values=tuple(values):
                                                 fn((1,), (threads,), values))
        if B == 1:
            P = max(p for p in (1, 2, 4, 8, 16, 32) if p * C <= 1024)
            g = max(g for g in (1, 2, 4, 8, 16, 32) if g * C <= 1024)
            flat = (dev["h0"], dev["h2h"], dev["hidden"], dev["hidden_in"], i32(C), i32(T))
            for kind, n, threads in (("cross_io", P, P * C), ("crossh_io", P, P * C), ("lanes_io", g, g * C),
                                     ("ilp_io", 0, max(32, C))):
                fn = hand.get_function(kind)
                cands[f"hand {kind.split('_')[0]}" + (f" x{n}" if n else "")] = (
                    lambda fn=fn, threads=threads, n=n: fn((1,), (threads,), flat + (i32(n),)))
        errors = {}
        for label, fn in cands.items():
            dev["hidden"].fill(0)
            fn()
            cp.cuda.Device().synchronize()
            errors[label] = float(np.abs(cp.asnumpy(dev["hidden"]) - want).max())
        times = {label: [] for label in cands}
        for _ in range(args.rounds):
            for label, fn in cands.items():
                times[label].append(timeit(fn))
        base = statistics.median(next(v for k, v in times.items() if k.startswith("tcdsl (")))
        for label in cands:
            us = statistics.median(times[label]) / T
            results.append({"B": B, "C": C, "kernel": label, "us_per_step": us, "vs_tcdsl": us * T / base,
                            "max_abs_error": errors[label]})
            print(f"B={B} C={C:4d}  {label:22s} {us:8.3f} us/step  {us * T / base:5.2f}x  err {errors[label]:.1e}",
                  flush=True)
    bad = [r for r in results if not r["max_abs_error"] < 1e-4]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda-step-kernels.json").write_text(json.dumps(results, indent=1))
    if bad:
        print(f"wrong results: {[(r['B'], r['C'], r['kernel']) for r in bad]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
