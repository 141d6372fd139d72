"""Training benchmarks: forward + backward of tcdsl ops against torch.nn, same run.

    .venv/bin/python benchmarks/training.py                     # Elman and LSTM (64,32,256)
    .venv/bin/python benchmarks/training.py --only elman --rounds 9

Each workload is one ``tcdsl.torch.op`` (examples/rnn/elman.tc,
examples/rnn/lstm.tc; its backward is the compiled adjoint of
``tcdsl.gradient``) and the torch.nn module with the same weights
(``torch.nn.RNN(bias=False)``, ``torch.nn.LSTM`` with ``bias_hh = 0``).  One
call is the forward and ``torch.autograd.grad`` of ``(out * G).sum()`` for a
fixed random ``G`` with respect to every input (data, initial state,
weights), float32.  Each runs on all cores and, as a second contender, on
one thread (PyTorch's ``set_num_threads``, TVM's thread pool for tcdsl): on
a loaded machine one thread can beat all cores, as a thread that waits at a
barrier for a descheduled one wastes its slice.  The ratio is the faster
tcdsl contender's time over the faster torch one's.  The contenders run in interleaved rounds (A, B, A, B,
...) with a pause before each (a thread pool that still spins would take a
core from the next one); the figure is the median over rounds.  Before the
timing, the gradients of the two contenders are compared: the script exits
with 1 when one differs by more than TOLERANCE (relative to the largest
element of torch's), and prints a Markdown table (benchmarks/README.md).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tcdsl.torch  # noqa: E402
import rnn  # noqa: E402  (benchmarks/rnn.py: interleaved rounds, a pause of rnn.SETTLE before each contender)
from rnn import SETTLE, interleaved  # noqa: E402

TOLERANCE = 1e-3  # largest difference of a gradient, relative to the largest |element| of torch's
TARGETS = {"Elman (64,32,256)": 1.0}  # issue 15: tcdsl fwd+bwd <= 1.0 x torch.nn.RNN




def _rand(gen, *shape, scale=None):
    s = scale if scale is not None else (shape[-2] ** -0.5 if len(shape) > 1 else 1.0)
    return (torch.randn(shape, generator=gen) * s).requires_grad_()


def _fwd_bwd(f, inputs, grads_out):
    """The forward, then the gradient of sum(out * G) w.r.t. every input."""
    def run():
        outs = f(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        loss = sum((o * g).sum() for o, g in zip(outs, grads_out) if g is not None)
        return torch.autograd.grad(loss, inputs)
    return run


def _threads(fn, n):
    """``fn`` run with PyTorch on ``n`` threads."""
    def run():
        old = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            return fn()
        finally:
            torch.set_num_threads(old)
    return run


def _tvm_threads(fn, n):
    """``fn`` run with TVM's thread pool (tcdsl's kernels) on ``n`` threads."""
    import tvm

    config = tvm.get_global_func("runtime.config_threadpool")

    def run():
        config(1, n)
        try:
            return fn()
        finally:
            config(1, 0)  # back to the default (TVM_NUM_THREADS, or one per core)
    return run


def _with_one_thread(contenders: dict) -> dict:
    """Every contender also with one thread, when the machine has more cores."""
    out = dict(contenders)
    if (os.cpu_count() or 1) > 1:
        for k, fn in contenders.items():
            out[f"{k}, 1 thread"] = _threads(fn, 1) if k.startswith("torch") else _tvm_threads(fn, 1)
    return out


def elman(T, B, H):
    gen = torch.Generator().manual_seed(0)
    x, h0, i2h, h2h = _rand(gen, T, B, H, scale=1.0), _rand(gen, B, H, scale=1.0), _rand(gen, H, H), _rand(gen, H, H)
    G = torch.randn(T, B, H, generator=gen)
    op = tcdsl.torch.op(ROOT / "examples" / "rnn" / "elman.tc")
    rnn = torch.nn.RNN(H, H, bias=False, nonlinearity="tanh")
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(i2h.T)
        rnn.weight_hh_l0.copy_(h2h.T)
    tx, th0 = x.detach().clone().requires_grad_(), h0.detach()[None].clone().requires_grad_()
    ours = _fwd_bwd(op, (x, h0, i2h, h2h), (G,))
    theirs = _fwd_bwd(lambda a, b, wi, wh: rnn(a, b)[0], (tx, th0, rnn.weight_ih_l0, rnn.weight_hh_l0), (G,))
    gx, gh0, gi, gh = ours()
    tgx, tgh0, tgi, tgh = theirs()
    pairs = {"d_x": (gx, tgx), "d_h0": (gh0, tgh0[0]), "d_i2h": (gi, tgi.T), "d_h2h": (gh, tgh.T)}
    return _with_one_thread({"tcdsl op": ours, "torch.nn.RNN": theirs}), pairs


def lstm(T, B, H):
    gen = torch.Generator().manual_seed(1)
    x, h0, c0 = _rand(gen, T, B, H, scale=1.0), _rand(gen, B, H, scale=1.0), _rand(gen, B, H, scale=1.0)
    Wx, Wh, bias = _rand(gen, 4, H, H), _rand(gen, 4, H, H), _rand(gen, 4, H, scale=0.1)
    G = torch.randn(T, B, H, generator=gen)
    op = tcdsl.torch.op(ROOT / "examples" / "rnn" / "lstm.tc")
    net = torch.nn.LSTM(H, H)
    with torch.no_grad():  # torch: weight (4H, I), gates i, f, g, o stacked; ours Wx(g, i, j)
        net.weight_ih_l0.copy_(Wx.transpose(1, 2).reshape(4 * H, H))
        net.weight_hh_l0.copy_(Wh.transpose(1, 2).reshape(4 * H, H))
        net.bias_ih_l0.copy_(bias.reshape(-1))
        net.bias_hh_l0.zero_()
    tx = x.detach().clone().requires_grad_()
    th0, tc0 = h0.detach()[None].clone().requires_grad_(), c0.detach()[None].clone().requires_grad_()
    ours = _fwd_bwd(op, (x, h0, c0, Wx, Wh, bias), (G, None))
    tin = (tx, th0, tc0, net.weight_ih_l0, net.weight_hh_l0, net.bias_ih_l0)
    theirs = _fwd_bwd(lambda a, h, c, *_: net(a, (h, c))[0], tin, (G,))
    gx, gh0, gc0, gWx, gWh, gb = ours()
    tgx, tgh0, tgc0, tgWx, tgWh, tgb = theirs()
    pairs = {"d_x": (gx, tgx), "d_h0": (gh0, tgh0[0]), "d_c0": (gc0, tgc0[0]),
             "d_Wx": (gWx, tgWx.reshape(4, H, H).transpose(1, 2)),
             "d_Wh": (gWh, tgWh.reshape(4, H, H).transpose(1, 2)), "d_bias": (gb, tgb.reshape(4, H))}
    return _with_one_thread({"tcdsl op": ours, "torch.nn.LSTM": theirs}), pairs


WORKLOADS = {
    "Elman (64,32,256)": lambda: elman(64, 32, 256),
    "LSTM (64,32,256)": lambda: lstm(64, 32, 256),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="substring of the workload names to run (case-insensitive)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--settle", type=float, default=SETTLE, help="seconds of sleep before each contender")
    a = ap.parse_args(argv)
    rnn.SETTLE = a.settle
    torch.set_num_threads(os.cpu_count() or 1)
    load = os.getloadavg()[0]
    rows, wrong = [], []
    for name, make in WORKLOADS.items():
        if a.only and a.only.lower() not in name.lower():
            continue
        contenders, pairs = make()
        errs = {k: float((u - v).abs().max() / v.abs().max().clamp_min(1e-12)) for k, (u, v) in pairs.items()}
        worst = max(errs.values())
        if worst > TOLERANCE:
            wrong.append(f"{name}: gradients differ: " + ", ".join(f"{k} {e:.1e}" for k, e in errs.items()))
        times = interleaved(contenders, a.rounds, a.repeat)
        mine = {k: v for k, v in times.items() if k.startswith("tcdsl")}
        times = {k: v for k, v in times.items() if k not in mine}
        ours = min(mine.values())
        ratio = ours / min(times.values())  # the fastest tcdsl against the fastest torch contender
        target = TARGETS.get(name)
        verdict = "-" if target is None else f"<= {target}: {'met' if ratio <= target else 'NOT met'}"
        others = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in times.items())
        ours_s = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in mine.items())
        rows.append((name, ours_s, others, ratio, worst, verdict))
        print(f"{name:20s} {ours_s}  {others}  ratio {ratio:5.2f}  "
              f"max grad diff {worst:.1e}  {verdict}", flush=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "?") if os.path.exists("/proc/cpuinfo") else "?"
    print(f"\n{cpu}, {os.cpu_count()} cores; load average before: {load:.2f}, after: {os.getloadavg()[0]:.2f}\n")
    print("| forward + backward | tcdsl op | torch.nn | ratio to the fastest | max gradient difference | target |")
    print("|---|---:|---|---:|---:|---|")
    for name, ours, others, ratio, worst, verdict in rows:
        print(f"| {name} | {ours} | {others} | {ratio:.2f} | {worst:.1e} | {verdict} |")
    for w in wrong:
        print(f"WRONG GRADIENT: {w}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
