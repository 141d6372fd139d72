"""GPU benchmarks: the Elman RNN, the QRNN and the LSTM on CUDA against PyTorch.

    .venv/bin/python benchmarks/cuda_rnn.py            # needs a CUDA GPU and a CUDA build of torch

For the Elman RNN at (T, B, C) = (64, 32, 256), (256, 1, 128) and (256, 4,
256), the QRNN at (64, 32, 256), (256, 1, 128) and (512, 32, 512) and the
LSTM of examples/rnn/lstm.tc at (T, B, I, H) = (128, 64, 256, 512), (256, 1,
32, 32) and (256, 1, 128, 128) it reports, per time step:

* tcdsl's kernels (``target="cuda"``, DLPack CUDA tensors in and out, so no
  host copies are timed), called as they are and replayed as a CUDA graph
  captured around one call (``torch.cuda.CUDAGraph``; left out when the
  capture fails).  Where a step's launches are single blocks (batch 1 here)
  the default is one persistent launch for all steps (a block of 256
  threads where each step's launches fit one, else of 1024); "launch per
  step" is the same program with ``persistent: False`` (the host loop),
  "split" with ``split: True`` (sums split into parts across a block of 1024), "blocks
  of 256" with ``persistent_threads: 256``;
* ``torch.nn.RNN`` / ``torch.nn.LSTM`` (cuDNN) and PyTorch loops;
* the launch overhead: a program whose step is one kernel copying one
  element, per step (what the host loop and a launch cost), called and
  replayed as a graph, and the same program as one persistent launch (what a
  step's barrier costs, plus the call's own cost spread over the steps).

CUDA events time each contender, medians over interleaved rounds; results go
to benchmarks/results/cuda-<timestamp>.json.  Without a GPU it says so and
exits 0 (nothing to measure); the numerics are tested by tests/test_cuda.py.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "rnn"))
import reference  # noqa: E402

import tcdsl  # noqa: E402
from tcdsl.codegen import targets  # noqa: E402

SHAPES = [(64, 32, 256), (256, 1, 128)]
ELMAN_SHAPES = SHAPES + [(256, 4, 256)]
QRNN_SHAPES = SHAPES + [(512, 32, 512)]
LSTM_SHAPES = [(128, 64, 256, 512), (256, 1, 32, 32), (256, 1, 128, 128)]
# Where a step's outputs fit one block of 1024 threads (the persistent launch), the same program
# also with a launch per step, with its sums split into parts, and with blocks of 256 threads only
VARIANTS = {"tcdsl (launch per step)": {"persistent": False}, "tcdsl (split)": {"split": True},
            "tcdsl (blocks of 256)": {"persistent_threads": 256}}
# One statement per step, one element (N = 1): the cost of the host loop and a launch.
EMPTY_STEP = "def step(float(T,N) x) -> (y) { for t in T { y(t, i) = x(t, i) } }"


def _timer(torch):
    def run(fn, repeat: int) -> float:
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        out = []
        for _ in range(repeat):
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        return statistics.median(out)
    return run


def _rand(rng, *shape):
    return (rng.standard_normal(shape) / np.sqrt(shape[-2] if len(shape) > 1 else 1)).astype(np.float32)


def elman(torch, T, B, C, options=None):
    rng = np.random.default_rng(0)
    x, h0, i2h, h2h = _rand(rng, T, B, C), _rand(rng, B, C), _rand(rng, C, C), _rand(rng, C, C)
    k = tcdsl.compile(ROOT / "examples" / "rnn" / "elman.tc", target="cuda", options=options)
    dx, dh0, di2h, dh2h = (torch.from_numpy(a).cuda() for a in (x, h0, i2h, h2h))
    err = float(np.abs(k(dx, dh0, di2h, dh2h).cpu().numpy() - reference.elman_rnn(x, h0, i2h, h2h)).max())
    rnn = torch.nn.RNN(C, C, bias=False, nonlinearity="tanh").cuda()
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(di2h.T)
        rnn.weight_hh_l0.copy_(dh2h.T)

    def torch_loop():
        h, out = dh0, []
        for t in range(T):
            h = torch.tanh(h @ dh2h + dx[t] @ di2h)
            out.append(h)
        return torch.stack(out)

    def cudnn():
        with torch.no_grad():
            return rnn(dx, dh0[None])
    return {"tcdsl": lambda: k(dx, dh0, di2h, dh2h), "torch.nn.RNN (cuDNN)": cudnn, "torch loop": torch_loop}, err


def qrnn(torch, T, B, C, options=None):
    rng = np.random.default_rng(1)
    x, W0, W1, bias = _rand(rng, T, B, C), _rand(rng, 3, C, C), _rand(rng, 3, C, C), _rand(rng, 3, C)
    k = tcdsl.compile(ROOT / "examples" / "rnn" / "qrnn.tc", target="cuda", options=options)
    dx, dW0, dW1, db = (torch.from_numpy(a).cuda() for a in (x, W0, W1, bias))
    err = float(np.abs(k(dx, dW0, dW1, db)[0].cpu().numpy() - reference.qrnn(x, W0, W1, bias)[0]).max())

    def torch_loop():
        prev, c, hs = torch.zeros_like(dx[0]), torch.zeros(B, C, device="cuda"), []
        for t in range(T):
            g = torch.einsum("bi,kij->kbj", dx[t], dW0) + torch.einsum("bi,kij->kbj", prev, dW1) + db[:, None]
            z, f, o = torch.tanh(g[0]), torch.sigmoid(g[1]), torch.sigmoid(g[2])
            c = f * c + (1 - f) * z
            hs.append(o * c)
            prev = dx[t]
        return torch.stack(hs)
    return {"tcdsl": lambda: k(dx, dW0, dW1, db), "torch loop": torch_loop}, err


def lstm(torch, T, B, I, H, options=None):
    rng = np.random.default_rng(2)
    x, h0, c0 = _rand(rng, T, B, I), _rand(rng, B, H), _rand(rng, B, H)
    Wx, Wh, bias = _rand(rng, 4, I, H), _rand(rng, 4, H, H), _rand(rng, 4, H)
    k = tcdsl.compile(ROOT / "examples" / "rnn" / "lstm.tc", target="cuda", options=options)
    d = [torch.from_numpy(a).cuda() for a in (x, h0, c0, Wx, Wh, bias)]
    err = float(np.abs(k(*d)[0].cpu().numpy() - reference.lstm(x, h0, c0, Wx, Wh, bias)[0]).max())
    net = torch.nn.LSTM(I, H).cuda()
    with torch.no_grad():  # torch's (4H, in) weights of gates i, f, g, o
        net.weight_ih_l0.copy_(d[3].permute(0, 2, 1).reshape(4 * H, I))
        net.weight_hh_l0.copy_(d[4].permute(0, 2, 1).reshape(4 * H, H))
        net.bias_ih_l0.copy_(d[5].reshape(-1))
        net.bias_hh_l0.zero_()
    dx, dh0, dc0, dWx, dWh, db = d

    def cudnn():
        with torch.no_grad():
            return net(dx, (dh0[None], dc0[None]))

    def torch_loop():
        h, c, hs = dh0, dc0, []
        gx = torch.einsum("tbi,gij->tgbj", dx, dWx) + db[:, None]
        for t in range(T):
            g = gx[t] + torch.einsum("bk,gkj->gbj", h, dWh)
            c = torch.sigmoid(g[1]) * c + torch.sigmoid(g[0]) * torch.tanh(g[2])
            h = torch.sigmoid(g[3]) * torch.tanh(c)
            hs.append(h)
        return torch.stack(hs)
    return {"tcdsl": lambda: k(*d), "torch.nn.LSTM (cuDNN)": cudnn, "torch loop": torch_loop}, err


def as_graph(torch, fn):
    """``fn`` replayed from a CUDA graph captured around one call, or None
    when the capture fails (the error is printed)."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize()
        return g.replay
    except Exception as e:  # noqa: BLE001 - reported, the benchmark goes on
        print(f"  (CUDA graph capture failed: {type(e).__name__}: {str(e).splitlines()[0][:200]})")
        torch.cuda.synchronize()
        return None


def launch_overhead(torch, T: int, timer) -> dict:
    """Microseconds per step of a step whose kernel copies one element: one
    launch per step (``persistent: False``), called and replayed as a CUDA
    graph, and the persistent launch (one for all steps), called."""
    x = torch.zeros((T, 1), device="cuda")
    per_step = tcdsl.compile(EMPTY_STEP, target="cuda", options={"persistent": False})
    out = {"launch per step": timer(lambda: per_step(x), 20) / T * 1e6}
    g = as_graph(torch, lambda: per_step(x))
    if g is not None:
        out["launch per step, CUDA graph"] = timer(g, 20) / T * 1e6
    persistent = tcdsl.compile(EMPTY_STEP, target="cuda")
    out["persistent"] = timer(lambda: persistent(x), 20) / T * 1e6
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results",
                    help="folder of the results' JSON file")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to compare with")
        return 0
    if not (targets.cuda_device_present() and torch.cuda.is_available()):
        print("no CUDA GPU here (or torch without CUDA): nothing to measure")
        return 0
    timer = _timer(torch)
    results = {"device": torch.cuda.get_device_name(), "workloads": {}}
    print(f"device: {results['device']}")
    work = [("elman", elman, s) for s in ELMAN_SHAPES] + [("qrnn", qrnn, s) for s in QRNN_SHAPES] \
        + [("lstm", lstm, s) for s in LSTM_SHAPES]
    for name, make, shape in work:
        T = shape[0]
        contenders, err = make(torch, *shape)
        graph = as_graph(torch, contenders["tcdsl"])
        if graph is not None:
            contenders = {"tcdsl": contenders["tcdsl"], "tcdsl (CUDA graph)": graph,
                          **{n: f for n, f in contenders.items() if n != "tcdsl"}}
        if shape[1] * shape[-1] * (4 if name == "lstm" else 1) <= 1024:  # the persistent launch
            for label, options in VARIANTS.items():
                contenders[label] = make(torch, *shape, options=options)[0]["tcdsl"]
        samples = {n: [] for n in contenders}
        for _ in range(a.rounds):
            for n, fn in contenders.items():
                samples[n].append(timer(fn, a.repeat))
        per_step = {n: statistics.median(v) / T * 1e6 for n, v in samples.items()}
        key = f"{name} ({','.join(map(str, shape))})"
        results["workloads"][key] = {"us per step": per_step, "max_abs_err": err}
        print(f"{key:24s} " + "  ".join(f"{n} {v:8.2f}" for n, v in per_step.items()) + f"  us/step, err {err:.1e}",
              flush=True)
    for T in (64, 256):
        over = launch_overhead(torch, T, timer)
        results[f"launch overhead us per step (T={T})"] = over
        print(f"launch overhead (T={T}): " + ", ".join(f"{n} {v:.2f}" for n, v in over.items()) + " us per step")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"cuda-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
