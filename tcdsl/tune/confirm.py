"""The last word on a local CPU: the finalists timed where users run them.

The search measures each candidate with TVM's ``time_evaluator`` on its
exported library in a runner process.  That ranks candidates well enough to
search, but it is not the call users make: ``Kernel.__call__`` in their own
process, which allocates its outputs and shares the machine with whatever
else runs there.  On a busy 2-core machine the two disagreed by more than
the differences between the best candidates (an LSTM's finalist measured
1.18x faster than the defaults in the runner and 1.1x slower in the calling
process).

So, after the search, the defaults and the best ``FINALISTS`` candidates of
each size tuple are compiled here and called through ``Kernel.__call__``,
interleaved: each round calls every candidate once (a fast one several
times), in a rotating order, ``PAUSE`` seconds apart, for ``ROUNDS`` rounds.
A machine shared with other work drifts by tens of percent within seconds
(the same LSTM call took 121 to 191 ms in one minute), so a candidate is
compared with the defaults round by round: it is kept only when the median
of its per-round ratios to the defaults is below ``1 - MARGIN`` *and* it was
faster in so many rounds that chance alone would do it less than
``SIGNIFICANCE`` of the time (a one-sided sign test).  Otherwise the
defaults stay: a tuned kernel is never slower than the default one.

Every round's time goes to the database (device
:data:`~.database.IN_PROCESS`), and the decision per size tuple too
(:meth:`~.database.Database.add_decision`), which is what ``tcdsl.compile``
then uses.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import numpy as np

from .database import IN_PROCESS, MARGIN, Record, options_text

FINALISTS = 2
ROUNDS = 15
SIGNIFICANCE = 0.1
PAUSE = 0.05  # seconds between candidates: a parallel kernel's pool threads spin for a while after it
MIN_ROUND_SECONDS = 0.02  # a round calls a fast kernel several times


@dataclass
class Confirmed:
    """Per size tuple: the round times (seconds per call) of each candidate (by options text)."""

    rounds: list[dict[str, list[float]]]
    options: dict[str, dict]

    def decision(self, i: int) -> tuple[dict, float, float] | None:
        """The options kept at size tuple ``i``, their median time and the
        defaults' (None: the defaults were not timed)."""
        per = self.rounds[i]
        d = per.get("{}")
        if not d:
            return None
        best, best_ratio = "{}", 1.0 - MARGIN
        for o, ts in per.items():
            if o == "{}" or len(ts) != len(d):
                continue
            ratios = [a / b for a, b in zip(ts, d)]
            r = statistics.median(ratios)
            if r < best_ratio and sign_test(sum(x < 1.0 for x in ratios), len(ratios)) <= SIGNIFICANCE:
                best, best_ratio = o, r
        return self.options[best], statistics.median(per[best]), statistics.median(d)


def sign_test(wins: int, n: int) -> float:
    """The chance of ``wins`` or more wins in ``n`` rounds between equals."""
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2.0 ** n


def finalists(search, median_seconds, count: int = FINALISTS) -> list:
    """The default trial and the ``count`` fastest other trials of each size tuple."""
    picked = {0: search.trials[0]}
    for i in range(len(search.sizes)):
        ok = [t for t in search.trials if t.ok and t.index != 0]
        ok.sort(key=lambda t: median_seconds(t, i))
        for t in ok[:count]:
            picked.setdefault(t.index, t)
    return list(picked.values())


def confirm_here(search, median_seconds, source: str, entry: str | None, target: str, data, db, key, run_id: str,
                 rounds: int = ROUNDS, pause: float = PAUSE) -> Confirmed | None:
    """Time the finalists in this process (see the module docstring) and
    record the rounds; None when the defaults cannot be compiled here."""
    from ..api import compile as tc_compile

    kernels, options = {}, {}
    for t in finalists(search, median_seconds):
        try:
            kernels[options_text(t.options)] = tc_compile(source, entry, target=target, options=dict(t.options),
                                                           tuning_db=False)
            options[options_text(t.options)] = dict(t.options)
        except Exception:  # noqa: BLE001 -- a finalist that does not build here is left out
            if not t.options:
                return None
    if "{}" not in kernels or len(kernels) < 2:
        return None
    result = Confirmed([{o: [] for o in kernels} for _ in data.sizes], options)
    order = list(kernels)
    for i in range(len(data.sizes)):
        inputs, refs = data.load(i)
        calls = {}
        for o, k in kernels.items():
            started = time.perf_counter()
            outs = k(*inputs)
            first = time.perf_counter() - started
            outs = outs if isinstance(outs, tuple) else (outs,)
            if all(np.shape(a) == np.shape(r) and np.allclose(a, r, rtol=data.rtol, atol=data.atol * max(
                    float(np.max(np.abs(r))) if np.size(r) else 0.0, 1.0), equal_nan=True) for a, r in zip(outs, refs)):
                calls[o] = max(1, math.ceil(MIN_ROUND_SECONDS / max(first, 1e-6)))
        for r in range(rounds):
            turn = order[r % len(order):] + order[:r % len(order)]
            for o in turn:
                if o not in calls:
                    continue
                time.sleep(pause)
                started = time.perf_counter()
                for _ in range(calls[o]):
                    kernels[o](*inputs)
                result.rounds[i][o].append((time.perf_counter() - started) / calls[o])
    now = time.time()
    db.add(key, [Record(s, options[o], sec, None, IN_PROCESS, run_id, now)
                 for s, per in zip(data.sizes, result.rounds) for o, times in per.items() for sec in times])
    for i, s in enumerate(data.sizes):
        kept = result.decision(i)
        if kept is not None:
            db.add_decision(key, s, kept[0], kept[1], run_id)
    return result
