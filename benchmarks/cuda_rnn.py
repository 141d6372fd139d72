"""GPU benchmarks of issue 5: the Elman RNN and the QRNN on CUDA against PyTorch.

    .venv/bin/python benchmarks/cuda_rnn.py            # needs a CUDA GPU and a CUDA build of torch

For (T, B, C) = (64, 32, 256) and (256, 1, 128) it reports, per time step:

* tcdsl's kernels (``target="cuda"``, DLPack CUDA tensors in and out, so no
  host copies are timed) for ``examples/rnn/elman.tc`` and ``qrnn.tc``;
* ``torch.nn.RNN`` (cuDNN) and a PyTorch loop for the Elman RNN, a PyTorch
  loop for the QRNN;
* the launch overhead: a program whose step is one kernel copying one
  element, per step (what the host loop and a launch cost).

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


def elman(torch, T, B, C):
    rng = np.random.default_rng(0)
    x, h0, i2h, h2h = _rand(rng, T, B, C), _rand(rng, B, C), _rand(rng, C, C), _rand(rng, C, C)
    k = tcdsl.compile(ROOT / "examples" / "rnn" / "elman.tc", target="cuda")
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


def qrnn(torch, T, B, C):
    rng = np.random.default_rng(1)
    x, W0, W1, bias = _rand(rng, T, B, C), _rand(rng, 3, C, C), _rand(rng, 3, C, C), _rand(rng, 3, C)
    k = tcdsl.compile(ROOT / "examples" / "rnn" / "qrnn.tc", target="cuda")
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


def launch_overhead(torch, T: int, timer) -> float:
    """Seconds per step of a step whose kernel copies one element."""
    k = tcdsl.compile(EMPTY_STEP, target="cuda")
    x = torch.zeros((T, 1), device="cuda")
    return timer(lambda: k(x), 20) / T


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
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
    for T, B, C in SHAPES:
        for name, make in (("elman", elman), ("qrnn", qrnn)):
            contenders, err = make(torch, T, B, C)
            samples = {n: [] for n in contenders}
            for _ in range(a.rounds):
                for n, fn in contenders.items():
                    samples[n].append(timer(fn, a.repeat))
            per_step = {n: statistics.median(v) / T * 1e6 for n, v in samples.items()}
            key = f"{name} ({T},{B},{C})"
            results["workloads"][key] = {"us per step": per_step, "max_abs_err": err}
            print(f"{key:22s} " + "  ".join(f"{n} {v:8.2f} us/step" for n, v in per_step.items()) + f"  err {err:.1e}")
        results["launch overhead us per step"] = launch_overhead(torch, T, timer) * 1e6
        print(f"launch overhead (T={T}): {results['launch overhead us per step']:.2f} us per step")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / f"cuda-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
