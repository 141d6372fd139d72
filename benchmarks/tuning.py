"""Autotuning: tuned options against the defaults and PyTorch.

Three parts (``--only`` picks some):

* ``lstm``: examples/rnn/lstm.tc at (T, B, I, H) = (128, 64, 256, 512)
  (I != H: the program's I and H sizes), tuned with ``--trials`` (48), then
  the default kernel, the tuned kernel (``tcdsl.compile`` taking the options
  from the database) and ``torch.nn.LSTM`` with the same weights, timed
  interleaved (``--rounds`` rounds, the median of each);
* ``conv``: a 3x3 convolution, input 16x64x30x30, weights 64x64x3x3,
  against ``torch.nn.functional.conv2d``;
* ``churn``: the workload of benchmarks/dynamic_shapes.py (the Elman RNN,
  B=32, Ci=Co=256, T drawn from 1..``--tmax``): one shape-generic tuning
  run over a few values of T (weights: how often the calls fall near each)
  against tuning each of those sizes on its own with the same number of
  trials per run; the tuning times, and the sequence of calls run by the
  default kernel and by the tuned ones.

Every tuning run writes to a fresh database in a temporary directory (the
user's is not touched).  JSON goes to ``benchmarks/results/tuning-<time>.json``.

    .venv/bin/python benchmarks/tuning.py                       # everything (long)
    .venv/bin/python benchmarks/tuning.py --only lstm --trials 48
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

import tcdsl  # noqa: E402

LSTM = ROOT / "examples" / "rnn" / "lstm.tc"
ELMAN = ROOT / "examples" / "rnn" / "elman.tc"
CONV = """
def conv3x3(float(N,C,H,W) I, float(M,C,KH,KW) W1) -> (O) {
  O(n, m, h, w) +=! I(n, c, h + kh, w + kw) * W1(m, c, kh, kw)
}
"""


MAX_ABS_ERROR = 1e-3  # the tuned kernels' outputs against the default kernel's and PyTorch's (float32)


def _rand(rng, *shape, scale=None):
    s = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
    return (rng.standard_normal(shape) * s).astype(np.float32)


SETTLE = 0.2  # seconds between contenders


def interleaved(fns: dict, rounds: int, inner: int = 3) -> dict[str, float]:
    """Median seconds per call of each function, timed in turns (a loaded
    machine drifts), SETTLE seconds apart: PyTorch's OpenMP threads spin
    after its call and took a core from whichever contender came next (the
    default convolution measured 4.5 ms right after conv2d, 2.2 ms alone)."""
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            time.sleep(SETTLE)
            t = time.perf_counter()
            for _ in range(inner):
                f()
            times[k].append((time.perf_counter() - t) / inner)
    return {k: statistics.median(v) for k, v in times.items()}


def tune(source, sizes, trials: int, db: str, weights=None, progress=True) -> dict:
    t = time.perf_counter()
    r = tcdsl.autotune(source, sizes=sizes, weights=weights, trials=trials, database=db, progress=progress)
    elapsed = time.perf_counter() - t
    print(r.table(), flush=True)
    return {"result": r, "seconds": elapsed, "trials": len(r.trials), "failed": sum(not x.ok for x in r.trials),
            "best": [x.options for x in r.per_size], "speedup_in_tuner": [x.speedup for x in r.per_size]}


def lstm(args, db: str, torch) -> dict:
    T, B, I, H = args.lstm
    rng = np.random.default_rng(2)
    x, h0, c0 = _rand(rng, T, B, I), _rand(rng, B, H), _rand(rng, B, H)
    Wx, Wh, bias = _rand(rng, 4, I, H), _rand(rng, 4, H, H), _rand(rng, 4, H)
    sizes = {"T": T, "B": B, "I": I, "H": H}
    tuned = tune(LSTM, sizes, args.trials, db, progress=not args.no_progress)
    k0 = tcdsl.compile(LSTM, tuning_db=False)
    k1 = tcdsl.compile(LSTM, tuning_db=db)
    opts, origin = k1.options_for(**sizes)
    fns = {"default": lambda: k0(x, h0, c0, Wx, Wh, bias), "tuned": lambda: k1(x, h0, c0, Wx, Wh, bias)}
    err = float(np.abs(k1(x, h0, c0, Wx, Wh, bias)[0] - k0(x, h0, c0, Wx, Wh, bias)[0]).max())
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
        net = torch.nn.LSTM(I, H)
        with torch.no_grad():  # torch: weight (4H, I) with gates i, f, g, o stacked; ours Wx(g, i, j)
            net.weight_ih_l0.copy_(torch.from_numpy(Wx.transpose(0, 2, 1).reshape(4 * H, I).copy()))
            net.weight_hh_l0.copy_(torch.from_numpy(Wh.transpose(0, 2, 1).reshape(4 * H, H).copy()))
            net.bias_ih_l0.copy_(torch.from_numpy(bias.reshape(-1)))
            net.bias_hh_l0.zero_()
        tx, th0, tc0 = torch.from_numpy(x), torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]

        def run_torch():
            with torch.no_grad():
                return net(tx, (th0, tc0))
        fns["torch.nn.LSTM"] = run_torch
        err = max(err, float(np.abs(k1(x, h0, c0, Wx, Wh, bias)[0] - run_torch()[0].numpy()).max()))
    times = interleaved(fns, args.rounds)
    out = _summary("lstm", sizes, tuned, times, "torch.nn.LSTM", origin, opts, err)
    # an untuned size: the options reused from the tuned one against the defaults
    T2, B2 = max(T // 2, 1), max(B // 2 + 3, 1)
    x2, h2, c2 = _rand(rng, T2, B2, I), _rand(rng, B2, H), _rand(rng, B2, H)
    other = {"T": T2, "B": B2, "I": I, "H": H}
    at = interleaved({"default": lambda: k0(x2, h2, c2, Wx, Wh, bias), "reused": lambda: k1(x2, h2, c2, Wx, Wh, bias)},
                     args.rounds)
    out["untuned"] = {"sizes": other, "origin": k1.options_for(**other)[1], "times_ms": {k: v * 1e3 for k, v in at.items()},
                      "reused_vs_default": at["reused"] / at["default"]}
    print(f"lstm at {other} ({out['untuned']['origin']}): default {at['default'] * 1e3:.2f} ms, "
          f"reused {at['reused'] * 1e3:.2f} ms: reused/default {out['untuned']['reused_vs_default']:.3f}", flush=True)
    return out


def conv(args, db: str, torch) -> dict:
    N, C, Hs, Ws, M, K = 16, 64, 30, 30, 64, 3
    rng = np.random.default_rng(3)
    inp, w = _rand(rng, N, C, Hs, Ws, scale=1.0), _rand(rng, M, C, K, K, scale=1.0 / np.sqrt(C * K * K))
    sizes = {"N": N, "C": C, "H": Hs, "W": Ws, "M": M, "KH": K, "KW": K}
    tuned = tune(CONV, sizes, args.trials, db, progress=not args.no_progress)
    k0 = tcdsl.compile(CONV, tuning_db=False)
    k1 = tcdsl.compile(CONV, tuning_db=db)
    opts, origin = k1.options_for(**sizes)
    fns = {"default": lambda: k0(inp, w), "tuned": lambda: k1(inp, w)}
    err = float(np.abs(k1(inp, w) - k0(inp, w)).max())
    if torch is not None:
        ti, tw = torch.from_numpy(inp), torch.from_numpy(w)

        def run_torch():
            with torch.no_grad():
                return torch.nn.functional.conv2d(ti, tw)
        fns["torch conv2d"] = run_torch
        err = max(err, float(np.abs(k1(inp, w) - run_torch().numpy()).max()))
    times = interleaved(fns, args.rounds)
    return _summary("conv", sizes, tuned, times, "torch conv2d", origin, opts, err)


def _summary(name, sizes, tuned, times, torch_name, origin, opts, err) -> dict:
    out = {"sizes": sizes, "tuning_seconds": tuned["seconds"], "trials": tuned["trials"],
           "failed_trials": tuned["failed"], "best_options": tuned["best"][0],
           "speedup_in_tuner": tuned["speedup_in_tuner"][0], "origin": origin,
           "times_ms": {k: v * 1e3 for k, v in times.items()}, "max_abs_error": err,
           "tuned_vs_default": times["tuned"] / times["default"]}
    line = f"{name}: default {times['default'] * 1e3:.2f} ms, tuned {times['tuned'] * 1e3:.2f} ms"
    if torch_name in times:
        out["tuned_vs_torch"] = times["tuned"] / times[torch_name]
        out["default_vs_torch"] = times["default"] / times[torch_name]
        line += (f", {torch_name} {times[torch_name] * 1e3:.2f} ms: tuned/torch {out['tuned_vs_torch']:.3f}, "
                 f"default/torch {out['default_vs_torch']:.3f}")
    print(line + f"; tuning {tuned['seconds']:.0f} s for {tuned['trials']} trials ({origin})", flush=True)
    return out


def churn(args, tmp: str) -> dict:
    """Shape-generic tuning of the churn workload against tuning each size on its own."""
    rng = np.random.default_rng(args.seed)
    Ts = [int(t) for t in rng.integers(1, args.tmax + 1, args.calls)]
    B, C = 32, 256
    picks = sorted({max(1, int(round(args.tmax * q))) for q in (0.06, 0.25, 0.5, 0.75, 1.0)})
    nearest = [min(picks, key=lambda p: abs(np.log2(p) - np.log2(t))) for t in Ts]
    weights = [nearest.count(p) for p in picks]
    workload = [{"T": p, "B": B, "Ci": C, "Co": C} for p in picks]
    db_generic = os.path.join(tmp, "generic.sqlite")
    generic = tune(ELMAN, workload, args.churn_trials, db_generic, weights=weights, progress=not args.no_progress)
    db_each = os.path.join(tmp, "each.sqlite")
    each_seconds = 0.0
    for s in workload:
        each_seconds += tune(ELMAN, s, args.churn_trials, db_each, progress=not args.no_progress)["seconds"]
    s = 1.0 / np.sqrt(C)
    full = (np.random.default_rng(1).standard_normal((args.tmax, B, C)) * s).astype(np.float32)
    h0, i2h, h2h = (_rand(np.random.default_rng(i), *sh) for i, sh in ((2, (B, C)), (3, (C, C)), (4, (C, C))))
    kernels = {
        "default (never)": tcdsl.compile(ELMAN, tuning_db=False),
        "default (after-scheduling)": tcdsl.compile(ELMAN, specialize="after-scheduling", tuning_db=False),
        "workload-tuned (never)": tcdsl.compile(ELMAN, tuning_db=db_generic),
        "workload-tuned (after-scheduling)": tcdsl.compile(ELMAN, specialize="after-scheduling",
                                                           tuning_db=db_generic),
        "per-size tuned (after-scheduling)": tcdsl.compile(ELMAN, specialize="after-scheduling", tuning_db=db_each),
    }
    for k in kernels.values():  # every binary built before timing
        for T in sorted(set(Ts)):
            k(full[:T], h0, i2h, h2h)
    seq = {name: (lambda k=k: [k(full[:T], h0, i2h, h2h) for T in Ts]) for name, k in kernels.items()}
    times = interleaved(seq, args.rounds, inner=1)
    out = {"picks_T": picks, "weights": weights, "trials_per_run": args.churn_trials,
           "generic_tuning_seconds": generic["seconds"], "per_size_tuning_seconds": each_seconds,
           "option_sets": generic["result"].option_sets, "sequence_ms": {k: v * 1e3 for k, v in times.items()}}
    print(f"churn: shape-generic tuning {generic['seconds']:.0f} s vs per size {each_seconds:.0f} s "
          f"({len(picks)} sizes, {args.churn_trials} trials per run)", flush=True)
    for k, v in times.items():
        print(f"churn: {k:36s} {v * 1e3:9.1f} ms for {len(Ts)} calls", flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="lstm,conv,churn")
    p.add_argument("--trials", type=int, default=48)
    p.add_argument("--churn-trials", type=int, default=16)
    p.add_argument("--lstm", type=lambda s: tuple(int(x) for x in s.split(",")), default=(128, 64, 256, 512),
                   help="T,B,I,H")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--tmax", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out")
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    result = {"argv": sys.argv[1:], "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                                "loadavg_at_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="tcdsl-bench-tuning-") as tmp:
        parts = args.only.split(",")
        if "lstm" in parts:
            result["lstm"] = lstm(args, os.path.join(tmp, "lstm.sqlite"), torch)
        if "conv" in parts:
            result["conv"] = conv(args, os.path.join(tmp, "conv.sqlite"), torch)
        if "churn" in parts:
            result["churn"] = churn(args, tmp)
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"tuning-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    print(f"load average at start {result['machine']['loadavg_at_start']}, at end {result['machine']['loadavg_at_end']}")
    print(f"wrote {out}")
    # the tuned kernel against the default one and PyTorch (outputs of order 1: an absolute bound)
    wrong = [f"{name}: max abs error {result[name]['max_abs_error']:.2e}" for name in ("lstm", "conv")
             if name in result and not result[name]["max_abs_error"] <= MAX_ABS_ERROR]
    for w in wrong:
        print("WRONG", w)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
