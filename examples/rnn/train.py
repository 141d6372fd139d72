"""Train a recurrent model built from a tcdsl op on the adding problem.

    .venv/bin/python examples/rnn/train.py                    # tcdsl vs PyTorch, 300 steps
    .venv/bin/python examples/rnn/train.py --plot curves.png  # also draw both loss curves (matplotlib)
    .venv/bin/python examples/rnn/train.py --ddp --steps 5    # two processes, DistributedDataParallel

The adding problem (Hochreiter & Schmidhuber): a sequence of T pairs (value
in [0, 1), marker), two of the markers are 1; the target is the sum of the
two marked values.  A model that predicts the mean (1.0) has a loss of
about 0.167; one that has learned the task goes far below.

The model is an Elman RNN (examples/rnn/elman.tc, as a tcdsl.torch.op:
its backward is the compiled adjoint from tcdsl.gradient) and a linear
read-out of the last state.  The same model is built from torch.nn.RNN
with the same initial weights and trained on the same batches; the script
prints both loss curves and exits with 1 when they differ by more than the
tolerance.

With --ddp it starts two processes on 127.0.0.1 (torch.distributed, gloo),
wraps the model in DistributedDataParallel, gives each rank half of every
batch, and checks after every backward that both ranks hold identical
gradients, equal to those of the whole batch in one process, and after the
last step that both hold identical parameters (equal to the whole batch's).
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

import torch

import tcdsl
import tcdsl.torch

HERE = Path(__file__).resolve().parent


def adding_batch(gen: torch.Generator, batch: int, steps: int):
    """Inputs (T, B, 2) and targets (B,)."""
    values = torch.rand(steps, batch, generator=gen)
    marks = torch.zeros(steps, batch)
    for b in range(batch):
        first = int(torch.randint(0, steps // 2, (1,), generator=gen))
        second = int(torch.randint(steps // 2, steps, (1,), generator=gen))
        marks[first, b] = marks[second, b] = 1.0
    x = torch.stack([values, marks], dim=-1)
    return x, (values * marks).sum(dim=0)


class TcdslRNN(torch.nn.Module):
    """hidden(t) = tanh(hidden(t-1) . h2h + x(t) . i2h), then a linear read-out of the last step."""

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        self.rnn = tcdsl.torch.op(HERE / "elman.tc")
        self.i2h = torch.nn.Parameter(torch.empty(inputs, hidden))
        self.h2h = torch.nn.Parameter(torch.empty(hidden, hidden))
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        h0 = x.new_zeros(x.shape[1], self.h2h.shape[0])
        hidden = self.rnn(x, h0, self.i2h, self.h2h)
        return self.out(hidden[-1]).squeeze(-1)


class TorchRNN(torch.nn.Module):
    """The same model from torch.nn.RNN (weights stored transposed: W_ih = i2h^T)."""

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        self.rnn = torch.nn.RNN(inputs, hidden, bias=False)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        hidden, _ = self.rnn(x)
        return self.out(hidden[-1]).squeeze(-1)


def twins(hidden: int, seed: int) -> tuple[TcdslRNN, TorchRNN]:
    """The two models with the same initial weights."""
    torch.manual_seed(seed)
    ref = TorchRNN(2, hidden)
    ours = TcdslRNN(2, hidden)
    with torch.no_grad():
        ours.i2h.copy_(ref.rnn.weight_ih_l0.T)
        ours.h2h.copy_(ref.rnn.weight_hh_l0.T)
        ours.out.load_state_dict(ref.out.state_dict())
    return ours, ref


def train(model: torch.nn.Module, steps: int, batch: int, length: int, seed: int, lr: float) -> list[float]:
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x, y = adding_batch(gen, batch, length)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def plot(curves: dict[str, list[float]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, losses in curves.items():
        ax.plot(losses, label=name, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("MSE loss")
    ax.set_yscale("log")
    ax.set_title("adding problem: Elman RNN, tcdsl op vs torch.nn.RNN")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ------------------------------------------------------------------ DDP
def _ddp_worker(rank: int, world: int, port: int, args, failures) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        model, _ = twins(args.hidden, args.seed)
        single = TcdslRNN(2, args.hidden)  # the whole batch in one process, for comparison
        single.load_state_dict(model.state_dict())
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
        opt1 = torch.optim.SGD(single.parameters(), lr=args.lr)
        gen = torch.Generator().manual_seed(args.seed)  # every rank draws the same batches
        half = args.batch // world
        for step in range(args.steps):
            x, y = adding_batch(gen, half * world, args.length)
            part = slice(rank * half, (rank + 1) * half)
            loss = torch.nn.functional.mse_loss(ddp(x[:, part]), y[part])
            opt.zero_grad()
            loss.backward()
            opt1.zero_grad()
            torch.nn.functional.mse_loss(single(x), y).backward()
            for (name, p), q in zip(model.named_parameters(), single.parameters()):
                mine = p.grad.detach().clone()
                every = [torch.empty_like(mine) for _ in range(world)]
                dist.all_gather(every, mine)
                if any(not torch.equal(every[0], g) for g in every[1:]):
                    failures.put(f"step {step}: ranks hold different gradients of {name}")
                if not torch.allclose(mine, q.grad, rtol=1e-4, atol=1e-6):
                    failures.put(f"step {step}: rank {rank}'s gradient of {name} differs from the whole batch's "
                                 f"(max {float((mine - q.grad).abs().max()):.2e})")
            opt.step()
            opt1.step()
            if rank == 0:
                print(f"ddp step {step}: loss {loss.item():.5f} (rank 0's half)", flush=True)
        # after the steps, both ranks hold the same parameters, those of the whole-batch run
        for (name, p), q in zip(model.named_parameters(), single.parameters()):
            mine = p.detach().clone()
            every = [torch.empty_like(mine) for _ in range(world)]
            dist.all_gather(every, mine)
            if any(not torch.equal(every[0], w) for w in every[1:]):
                failures.put(f"after {args.steps} steps: ranks hold different parameters {name}")
            if not torch.allclose(mine, q.detach(), rtol=1e-4, atol=1e-6):
                failures.put(f"after {args.steps} steps: rank {rank}'s parameter {name} differs from the "
                             f"whole batch's (max {float((mine - q.detach()).abs().max()):.2e})")
    finally:
        dist.destroy_process_group()
    # Leave without the interpreter's shutdown: DDP keeps the gloo process group alive until the final garbage
    # collection, and a gloo worker thread that frees its last all_gather then needs the GIL of an interpreter
    # being torn down, which aborts the process (terminate called without an active exception; a known
    # torch.distributed shutdown race, about 1 run in 6 here). Everything to report is flushed first.
    failures.close()
    failures.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ddp(args) -> int:
    import torch.multiprocessing as mp

    # compile the op and its adjoint once here: the ranks load both from the disk cache
    model, _ = twins(args.hidden, args.seed)
    x, y = adding_batch(torch.Generator().manual_seed(0), 2, args.length)
    torch.nn.functional.mse_loss(model(x), y).backward()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    failures = ctx.Queue()
    mp.spawn(_ddp_worker, args=(2, port, args, failures), nprocs=2, join=True)
    problems = []
    while not failures.empty():
        problems.append(failures.get())
    for p in problems:
        print("FAIL:", p)
    print("DDP: identical gradients and parameters on both ranks" if not problems else "DDP: MISMATCH")
    return 1 if problems else 0


# ------------------------------------------------------------------ main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=10, help="sequence length T")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=0.02,
                   help="largest allowed difference of the two loss curves, relative to the loss")
    p.add_argument("--plot", metavar="PNG", help="draw both loss curves into this file (needs matplotlib)")
    p.add_argument("--ddp", action="store_true", help="two processes with DistributedDataParallel")
    args = p.parse_args(argv)
    if args.ddp:
        return run_ddp(args)
    ours, ref = twins(args.hidden, args.seed)
    curves = {"tcdsl op": train(ours, args.steps, args.batch, args.length, args.seed, args.lr),
              "torch.nn.RNN": train(ref, args.steps, args.batch, args.length, args.seed, args.lr)}
    a, b = curves["tcdsl op"], curves["torch.nn.RNN"]
    for step in sorted(set(range(0, args.steps, max(1, args.steps // 6))) | {args.steps - 1}):
        print(f"step {step:4d}: tcdsl {a[step]:.5f}  torch {b[step]:.5f}")
    worst = max(abs(u - v) / max(abs(v), 1e-3) for u, v in zip(a, b))
    tail = sum(a[-20:]) / len(a[-20:])
    print(f"largest relative difference of the curves: {worst:.2e}; mean loss of the last 20 steps: {tail:.4f}")
    if args.plot:
        try:
            plot(curves, args.plot)
            print(f"curves drawn into {args.plot}")
        except ImportError:
            print("--plot needs matplotlib (pip install matplotlib, or make bench, which installs it)")
    if worst > args.tolerance:
        print("MISMATCH")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
