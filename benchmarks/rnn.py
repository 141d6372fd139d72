"""CPU benchmarks: tcdsl against PyTorch and NumPy, measured in the same run.

    .venv/bin/python benchmarks/rnn.py                 # all workloads
    .venv/bin/python benchmarks/rnn.py --only elman --rounds 5

Each workload runs its contenders in interleaved rounds (A, B, C, A, B, C,
...), each round timing a few repeats; the figure reported is the median
over all rounds, so a noisy neighbour hurts every contender alike.  Results
go to benchmarks/results/rnn-<timestamp>.json and, when matplotlib is
installed, a bar chart of the ratios beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "rnn"))
sys.path.insert(0, str(ROOT))  # this checkout's tcdsl, not the installed one
import reference  # noqa: E402

import tcdsl  # noqa: E402


# Every contender gets fresh memory for its outputs at each call, as PyTorch and
# NumPy do: tcdsl's reuse of a dropped output's memory (runtime/pool.py) is off.
FRESH = {"reuse_outputs": False}


def _time(fn, repeat: int) -> float:
    fn()  # warm
    best = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best.append(time.perf_counter() - t0)
    return statistics.median(best)


SETTLE = 0.2  # seconds between contenders (see interleaved)
TOLERANCE = 1e-3  # max abs error of tcdsl's (and the loops') results: the script fails above it


def interleaved(contenders: dict, rounds: int, repeat: int) -> dict[str, float]:
    """Medians over rounds of every contender in turn.  Before each contender
    the process sleeps SETTLE seconds: the previous one's thread pool (OpenMP
    in PyTorch and NumPy's BLAS, TVM's) spins for a while after its work, and
    on two cores a spinning pool takes a core from the next contender."""
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            time.sleep(SETTLE)
            samples[name].append(_time(fn, repeat))
    return {k: statistics.median(v) for k, v in samples.items()}


def _rand(rng, *shape):
    return (rng.standard_normal(shape) / np.sqrt(shape[-2] if len(shape) > 1 else 1)).astype(np.float32)


def elman(T, B, C, torch):
    rng = np.random.default_rng(0)
    x, h0, i2h, h2h = _rand(rng, T, B, C), _rand(rng, B, C), _rand(rng, C, C), _rand(rng, C, C)
    k = tcdsl.compile(ROOT / "examples" / "rnn" / "elman.tc", options=FRESH)
    out = {"tcdsl": lambda: k(x, h0, i2h, h2h), "numpy loop": lambda: _numpy_elman(x, h0, i2h, h2h)}
    if torch is not None:
        rnn = torch.nn.RNN(C, C, bias=False, nonlinearity="tanh")
        with torch.no_grad():
            rnn.weight_ih_l0.copy_(torch.from_numpy(i2h.T.copy()))
            rnn.weight_hh_l0.copy_(torch.from_numpy(h2h.T.copy()))
        tx, th0 = torch.from_numpy(x), torch.from_numpy(h0)[None]

        def run_torch():
            with torch.no_grad():
                return rnn(tx, th0)
        out["torch.nn.RNN"] = run_torch
    err = float(np.abs(k(x, h0, i2h, h2h) - reference.elman_rnn(x, h0, i2h, h2h)).max())
    return out, err


def elman_symbolic(T, B, C, torch):
    """The symbolic kernel (one binary for all sizes) against the one
    specialised to these sizes (``after-scheduling``), same inputs."""
    rng = np.random.default_rng(0)
    x, h0, i2h, h2h = _rand(rng, T, B, C), _rand(rng, B, C), _rand(rng, C, C), _rand(rng, C, C)
    src = ROOT / "examples" / "rnn" / "elman.tc"
    k = tcdsl.compile(src, options=FRESH)
    ks = tcdsl.compile(src, specialize="after-scheduling", options=FRESH)
    ks(x, h0, i2h, h2h)  # builds the binary for these sizes
    out = {"tcdsl": lambda: k(x, h0, i2h, h2h), "specialized": lambda: ks(x, h0, i2h, h2h)}
    err = float(np.abs(k(x, h0, i2h, h2h) - ks(x, h0, i2h, h2h)).max())
    return out, err


def _numpy_elman(x, h0, i2h, h2h):
    h = h0
    out = np.empty((x.shape[0],) + h0.shape, np.float32)
    for t in range(x.shape[0]):
        h = np.tanh(h @ h2h + x[t] @ i2h)
        out[t] = h
    return out


def qrnn(T, B, C, torch):
    rng = np.random.default_rng(1)
    x, W0, W1, bias = _rand(rng, T, B, C), _rand(rng, 3, C, C), _rand(rng, 3, C, C), _rand(rng, 3, C)
    k = tcdsl.compile(ROOT / "examples" / "rnn" / "qrnn.tc", options=FRESH)
    out = {"tcdsl": lambda: k(x, W0, W1, bias)}
    if torch is not None:
        tx, tW0, tW1, tb = (torch.from_numpy(a) for a in (x, W0, W1, bias))

        def run_torch():
            # as a PyTorch user writes it: the gates depend on the inputs only, so
            # they are computed for all steps with one product each before the loop
            with torch.no_grad():
                prev = torch.cat([torch.zeros_like(tx[:1]), tx[:-1]])
                g = torch.einsum("tbi,kij->ktbj", tx, tW0) + torch.einsum("tbi,kij->ktbj", prev, tW1)
                g += tb[:, None, None]
                z, f, o = torch.tanh(g[0]), torch.sigmoid(g[1]), torch.sigmoid(g[2])
                h = torch.empty_like(tx)
                c = torch.zeros(B, C)
                for t in range(T):
                    c.mul_(f[t]).addcmul_(1 - f[t], z[t])
                    torch.mul(o[t], c, out=h[t])
                return h
        out["torch loop"] = run_torch
    h, _ = k(x, W0, W1, bias)
    want = reference.qrnn(x, W0, W1, bias)[0]
    err = float(np.abs(h - want).max())
    if torch is not None:  # the contender computes the same thing
        err = max(err, float(np.abs(out["torch loop"]().numpy() - want).max()))
    return out, err


def lstm(T, B, C, torch):
    """examples/rnn/lstm.tc against torch.nn.LSTM with the same weights (and,
    to show what hoisting the input projection gives, tcdsl without it)."""
    rng = np.random.default_rng(2)
    x, h0, c0 = _rand(rng, T, B, C), _rand(rng, B, C), _rand(rng, B, C)
    Wx, Wh, bias = _rand(rng, 4, C, C), _rand(rng, 4, C, C), _rand(rng, 4, C)
    path = ROOT / "examples" / "rnn" / "lstm.tc"
    k, k0 = tcdsl.compile(path, options=FRESH), tcdsl.compile(path, options={**FRESH, "hoist": False})
    out = {"tcdsl": lambda: k(x, h0, c0, Wx, Wh, bias), "tcdsl, hoist off": lambda: k0(x, h0, c0, Wx, Wh, bias)}
    err = float("nan")
    if torch is not None:
        net = torch.nn.LSTM(C, C)
        with torch.no_grad():  # torch: weight (4H, I) with gates i, f, g, o stacked; ours Wx(g, i, j)
            net.weight_ih_l0.copy_(torch.from_numpy(Wx.transpose(0, 2, 1).reshape(4 * C, C).copy()))
            net.weight_hh_l0.copy_(torch.from_numpy(Wh.transpose(0, 2, 1).reshape(4 * C, C).copy()))
            net.bias_ih_l0.copy_(torch.from_numpy(bias.reshape(-1)))
            net.bias_hh_l0.zero_()
        tx, th0, tc0 = torch.from_numpy(x), torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]

        def run_torch():
            with torch.no_grad():
                return net(tx, (th0, tc0))
        out["torch.nn.LSTM"] = run_torch
        err = float(np.abs(k(x, h0, c0, Wx, Wh, bias)[0] - run_torch()[0].numpy()).max())
    return out, err


# The cell state c is a temporary, as in the NumPy and torch loops (they
# return h only): tcdsl keeps one step of it, updated in place (polyhedral/contract.py).
FO_POOL = """
def fo_pool(float(T,B,C) F, float(T,B,C) Z, float(T,B,C) O) -> (h) {
  for t in T {
    if t == 0 { c(t,b,j) = (1 - F(t,b,j)) * Z(t,b,j) }
    else      { c(t,b,j) = F(t,b,j) * c(t-1,b,j) + (1 - F(t,b,j)) * Z(t,b,j) }
    h(t,b,j) = O(t,b,j) * c(t,b,j)
  }
}
"""


def fo_pool(T, B, C, torch):
    """QRNN fo-pooling alone (the gates given): the recurrence of the QRNN."""
    rng = np.random.default_rng(4)
    F = (1 / (1 + np.exp(-rng.standard_normal((T, B, C))))).astype(np.float32)
    Z = np.tanh(rng.standard_normal((T, B, C))).astype(np.float32)
    O = (1 / (1 + np.exp(-rng.standard_normal((T, B, C))))).astype(np.float32)
    k = tcdsl.compile(FO_POOL, options=FRESH)
    out = {"tcdsl": lambda: k(F, Z, O)}

    G = 1 - F  # the loops get (1 - F) precomputed; tcdsl computes it in the kernel

    def numpy_loop():  # in place: no temporary per step
        c = np.zeros((B, C), np.float32)
        h = np.empty_like(F)
        tmp = np.empty((B, C), np.float32)
        for t in range(T):
            np.multiply(F[t], c, out=c)
            np.multiply(G[t], Z[t], out=tmp)
            c += tmp
            np.multiply(O[t], c, out=h[t])
        return h
    out["numpy loop"] = numpy_loop
    if torch is not None:
        tF, tG, tZ, tO = (torch.from_numpy(a) for a in (F, G, Z, O))

        def run_torch():  # in place, as numpy_loop
            with torch.no_grad():
                c = torch.zeros(B, C)
                h = torch.empty_like(tF)
                for t in range(T):
                    c.mul_(tF[t]).addcmul_(tG[t], tZ[t])
                    torch.mul(tO[t], c, out=h[t])
                return h
        out["torch loop"] = run_torch
    want = numpy_loop()
    err = float(np.abs(k(F, Z, O) - want).max())
    if torch is not None:
        err = max(err, float(np.abs(out["torch loop"]().numpy() - want).max()))
    return out, err


def matmul(N, torch):
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((N, N)).astype(np.float32), rng.standard_normal((N, N)).astype(np.float32)
    k = tcdsl.compile("def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }", options=FRESH)
    out = {"tcdsl": lambda: k(A, B), "numpy": lambda: A @ B}
    if torch is not None:
        tA, tB = torch.from_numpy(A), torch.from_numpy(B)
        out["torch.matmul"] = lambda: torch.matmul(tA, tB)
    err = float(np.abs(k(A, B) - A.astype(np.float64) @ B).max() / N)
    return out, err


def conv(torch):
    rng = np.random.default_rng(3)
    I, W = _rand(rng, 8, 32, 34, 34), _rand(rng, 32, 32, 3, 3)
    k = tcdsl.compile("def conv(float(N,C,H,W) I, float(M,C,KH,KW) Wt) -> (O) "
                      "{ O(n,m,h,w) +=! I(n,c,h+kh,w+kw) * Wt(m,c,kh,kw) }", options=FRESH)
    out = {"tcdsl": lambda: k(I, W)}
    if torch is not None:
        tI, tW = torch.from_numpy(I), torch.from_numpy(W)
        out["torch conv2d"] = lambda: torch.nn.functional.conv2d(tI, tW)
    err = 0.0
    if torch is not None:
        err = float(np.abs(k(I, W) - torch.nn.functional.conv2d(torch.from_numpy(I), torch.from_numpy(W)).numpy()).max())
    return out, err


# Targets: tcdsl's time over the fastest of the named contenders, at most this.
# fo-pooling's was 0.15 x a PyTorch loop that allocated per op; against the
# fastest in-place loop it is 0.3.
TARGETS = {
    "elman (64,32,256)": (("torch.nn.RNN", "numpy loop"), 0.9),
    "elman batch 1 (256,1,128)": (("numpy loop",), 0.45),
    "qrnn fo-pooling (512,32,512)": (("numpy loop", "torch loop"), 0.3),
    "matmul 1024^3": (("torch.matmul",), 1.25),
    "elman symbolic / specialized (64,32,256)": (("specialized",), 1.10),
}

WORKLOADS = {
    "elman (64,32,256)": ("elman", lambda torch: elman(64, 32, 256, torch)),
    "elman batch 1 (256,1,128)": ("elman", lambda torch: elman(256, 1, 128, torch)),
    "lstm (64,32,256)": ("lstm", lambda torch: lstm(64, 32, 256, torch)),
    "qrnn fo-pooling (512,32,512)": ("qrnn", lambda torch: fo_pool(512, 32, 512, torch)),
    "qrnn with gates (512,32,512)": ("qrnn", lambda torch: qrnn(512, 32, 512, torch)),
    "matmul 1024^3": ("matmul", lambda torch: matmul(1024, torch)),
    "conv 8x32x34x34 * 32x32x3x3": ("conv", lambda torch: conv(torch)),
    "elman symbolic / specialized (64,32,256)": ("elman", lambda torch: elman_symbolic(64, 32, 256, torch)),
}


def compile_time(repeat: int = 3) -> float:
    src = (ROOT / "examples" / "rnn" / "elman.tc").read_text()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        tcdsl.compile(src, options={"disk_cache": False})
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def call_overhead(repeat: int = 2000) -> dict[str, float]:
    k = tcdsl.compile("def add(float(N) A, float(N) B) -> (C) { C(i) = A(i) + B(i) }")
    A = np.ones(16, np.float32)
    C = np.zeros(16, np.float32)
    fn = k._binaries[None].fn
    n = np.int32(16)

    def loop(f):
        t0 = time.perf_counter()
        for _ in range(repeat):
            f()
        return (time.perf_counter() - t0) / repeat
    return {"kernel call (16 elements)": loop(lambda: k(A, A)),
            "kernel call with out=": loop(lambda: k(A, A, out=C)),
            "raw TVM function": loop(lambda: fn(16, A, A, C))} if n else {}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="substring of the workload names to run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chart", help="also write the chart here (e.g. benchmarks/rnn.png)")
    ap.add_argument("--settle", type=float, default=SETTLE, help="seconds of sleep before each contender")
    a = ap.parse_args(argv)
    globals()["SETTLE"] = a.settle
    try:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
    except ImportError:
        torch = None
    results = {"threads": os.environ.get("TVM_NUM_THREADS"), "load average": os.getloadavg(), "workloads": {}}
    wrong: list[str] = []
    for name, (_, make) in WORKLOADS.items():
        if a.only and a.only not in name:
            continue
        contenders, err = make(torch)
        if err > TOLERANCE:  # NaN (no reference to compare with) passes
            wrong.append(f"{name}: max abs error {err:.2e} > {TOLERANCE}")
        times = interleaved(contenders, a.rounds, a.repeat)
        others = {k: v for k, v in times.items() if not k.startswith("tcdsl")}
        best = min(others.values()) if others else float("nan")
        results["workloads"][name] = {"ms": {k: v * 1e3 for k, v in times.items()}, "max_abs_err": err,
                                      "tcdsl / fastest other": times["tcdsl"] / best}
        row = "  ".join(f"{k} {v * 1e3:8.3f} ms" for k, v in times.items())
        target = ""
        if name in TARGETS and all(c in times for c in TARGETS[name][0]):
            against, limit = TARGETS[name]
            r = times["tcdsl"] / min(times[c] for c in against)
            results["workloads"][name]["target"] = {"against": against, "at most": limit, "ratio": r}
            target = f"  target <= {limit} x {' / '.join(against)}: {r:.2f} {'met' if r <= limit else 'NOT met'}"
        print(f"{name:32s} {row}  ratio {times['tcdsl'] / best:6.2f}  err {err:.1e}{target}", flush=True)
    if not a.only:
        results["compile elman s"] = compile_time()
        results["call overhead us"] = {k: v * 1e6 for k, v in call_overhead().items()}
        print(f"compile elman: {results['compile elman s'] * 1e3:.0f} ms")
        for k, v in results["call overhead us"].items():
            print(f"{k}: {v:.2f} us")
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out_dir / f"rnn-{stamp}.json").write_text(json.dumps(results, indent=2))
    _chart(results, out_dir / f"rnn-{stamp}.png")
    if a.chart:
        _chart(results, pathlib.Path(a.chart))
    _print_table(results)
    for w in wrong:
        print(f"WRONG RESULT: {w}", file=sys.stderr)
    return 1 if wrong else 0


def _print_table(results: dict) -> None:
    """The results as the Markdown table of benchmarks/README.md."""
    print(f"\nload average before: {results['load average'][0]:.2f}, after: {os.getloadavg()[0]:.2f}\n")
    print("| workload | tcdsl | others | ratio to the fastest | target |")
    print("|---|---:|---|---:|---|")
    for name, w in results["workloads"].items():
        ms = w["ms"]
        others = ", ".join(f"{k} {v:.3g} ms" for k, v in ms.items() if k != "tcdsl")
        t = w.get("target")
        target = f"<= {t['at most']} x {' / '.join(t['against'])}: {'met' if t['ratio'] <= t['at most'] else 'NOT met'}" \
            if t else "-"
        print(f"| {name} | {ms['tcdsl']:.3g} ms | {others} | {w['tcdsl / fastest other']:.2f} | {target} |")


def _chart(results: dict, path: pathlib.Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    names = list(results["workloads"])
    ratios = [results["workloads"][n]["tcdsl / fastest other"] for n in names]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.barh(names, ratios, color=["tab:green" if r <= 1 else "tab:red" for r in ratios])
    ax.axvline(1.0, color="black", linewidth=0.8)
    for i, n in enumerate(names):  # issue 6's target, where there is one
        t = results["workloads"][n].get("target")
        if t:
            ax.plot([t["at most"]] * 2, [i - 0.4, i + 0.4], color="tab:blue", linewidth=2)
    ax.set_xlabel("tcdsl time / fastest other contender (lower is better; blue: target)")
    ax.set_xscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"chart: {path}")


if __name__ == "__main__":
    sys.exit(main())
