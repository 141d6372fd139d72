"""Scheduling with the sizes fixed, under a time limit.

isl's scheduler can search for a very long time on some systems with fixed
sizes that it solves at once symbolically (a 1-D convolution whose padding
is a select on the input, at B, C, L, O, K = 2, 3, 13, 17, 3: more than an
hour).  isl offers no way to stop it from another thread (islpy keeps the
GIL during ``compute_schedule``) and an operations quota large enough for
an LSTM takes tens of seconds to run out.  So ``run(ctx, work, limit)``
computes the schedules (one per kernel) in a forked child process and reads
them back as text; when the child has not answered after ``limit`` seconds it
is killed and ``run`` returns None: the caller then serves the symbolic
schedules restricted to the sizes, which the AST specialises as
``after-scheduling`` does.  (The fork costs about 40 ms with TVM loaded, once
per size tuple.)

The limit scales with the time the symbolic schedules took, which the
caller computes first: ``SCALE`` times that, at least ``LEAST`` and at most
``MOST`` seconds.  At the full sizes of benchmarks/program_defs.py isl
schedules with the sizes fixed in 0.9 to 19 times the symbolic time (median
2x; 19x a WaveNet stack); the searches that do not end (2 of those 320
programs, and a channels-last group norm of the tests at 64 channels) take
hours, and waiting 30 s for each made every such size tuple a 30-s compile.  ``TCDSL_SCHEDULE_SECONDS`` sets a fixed
limit instead (``0``, or a platform without ``fork``: computed in the process,
without a limit).
"""
from __future__ import annotations

import os
import select
import signal
import time
from typing import Callable

import islpy as isl

SCALE = 40.0
LEAST = 3.0
MOST = 30.0


def seconds(symbolic: float | None = None) -> float:
    """The time limit: ``TCDSL_SCHEDULE_SECONDS`` when set (0: none), else
    scaled to ``symbolic``, the seconds the symbolic schedules took."""
    text = os.environ.get("TCDSL_SCHEDULE_SECONDS", "")
    try:
        if text.strip():
            return max(float(text), 0.0)
    except ValueError:
        pass
    return MOST if symbolic is None else min(MOST, max(LEAST, SCALE * symbolic))


def symbolic(model, fusion: str, schedule_kernel) -> tuple[list[isl.Schedule], float]:
    """The symbolic schedules of ``model``'s kernels (``schedule_kernel(k,
    None, fusion)``) and the seconds they took: made once per model (its
    ``symbolic`` memo) for all the size tuples scheduled before scheduling."""
    memo = model.symbolic
    if fusion not in memo:
        start = time.perf_counter()
        memo[fusion] = ([schedule_kernel(k, None, fusion) for k in model.kernels()], time.perf_counter() - start)
    return memo[fusion]


def run(ctx: isl.Context, work: Callable[[], list[isl.Schedule]],
        limit: float | None = None) -> list[isl.Schedule] | None:
    """``work()``'s schedules, computed in a child process; None when it took
    longer than ``limit`` seconds or the child failed."""
    limit = seconds() if limit is None else limit
    if limit <= 0 or not hasattr(os, "fork"):
        return work()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, write the schedule as text, leave without cleanup
        code = 1
        try:
            os.close(r)
            data = "\0".join(s.to_str() for s in work()).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks: list[bytes] = []
    deadline = time.monotonic() + limit
    finished = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                break
            chunk = os.read(r, 1 << 16)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # SIGCHLD ignored: the child was reaped already
            status = None
    if not finished or status is not None and (not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0):
        return None
    try:
        return [isl.Schedule.read_from_str(ctx, text) for text in b"".join(chunks).decode().split("\0")]
    except (isl.Error, UnicodeDecodeError):  # (cut short: a child that failed after all, reaped unseen)
        return None
