"""The search strategy: evolution guided by a cost model.

Each generation proposes a batch of points to measure:

* the first one starts with the default point (every other candidate is
  compared with it), then the *seeds* (options found before: tuned at these
  sizes, or reused from the nearest tuned sizes), then the default point
  with one knob changed, and a quarter of the batch random valid points;
* later ones breed a pool of children from the best points measured so far
  (mutations of one to three knobs, and crossovers of two parents), drop
  those already measured, and -- once there are enough measurements --
  rank the pool with a cost model and take the most promising, keeping a
  quarter of the batch for children picked at random (exploration).

The cost model is a random forest (scikit-learn's
``RandomForestRegressor``) learned from every measurement: features are the
point's knobs (``Space.features``) and the logarithms of the sizes, the
target the logarithm of the time relative to the defaults' at that size.  A
candidate's score is the weighted mean over the workload of its relative
times, so one search serves one size tuple or a whole workload.  Without
scikit-learn the search stays evolutionary (children picked at random).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .space import Point, Space

# Relative time given to a failed candidate when the model learns from it.
_FAILED = 4.0
# Measurements needed before the model ranks the pool.
_MODEL_AFTER = 6


@dataclass
class Trial:
    """One measured candidate: its point and time at each size tuple (None: failed)."""

    point: Point
    options: dict
    seconds: list[float | None]
    error: str | None = None
    build_seconds: float = 0.0
    device: str = "local"
    index: int = 0
    repeats: list = field(default_factory=list)  # later measurements (the confirmation)

    @property
    def ok(self) -> bool:
        return self.error is None and all(s is not None for s in self.seconds)


@dataclass
class Search:
    space: Space
    sizes: list[dict[str, int]]
    weights: list[float]
    seeds: list[Point] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    trials: list[Trial] = field(default_factory=list)
    use_model: bool = True

    def __post_init__(self) -> None:
        self._seen: set[str] = set()
        total = sum(self.weights) or 1.0
        self._w = [w / total for w in self.weights]
        self.model_used = False

    # ----------------------------------------------------------- scores
    @property
    def default(self) -> Trial | None:
        return self.trials[0] if self.trials and self.trials[0].ok and not self.trials[0].options else None

    def ratios(self, t: Trial) -> list[float | None]:
        d = self.default
        if d is None:
            return [None] * len(self.sizes)
        return [None if s is None else s / ds for s, ds in zip(t.seconds, d.seconds)]

    def score(self, t: Trial) -> float:
        """Weighted mean relative time over the workload (1: the defaults'); inf when it failed."""
        if not t.ok:
            return math.inf
        return sum(w * r for w, r in zip(self._w, self.ratios(t)))

    def ranked(self) -> list[Trial]:
        return sorted((t for t in self.trials if t.ok), key=self.score)

    # ----------------------------------------------------------- proposing
    def propose(self, n: int) -> list[Point]:
        """The next ``n`` points to measure (fewer when the space runs out)."""
        out: list[Point] = []
        if not self.trials:
            for p in [self.space.default()] + [self.space.canonical(s) for s in self.seeds]:
                if len(out) < n and self._fresh(p) and self.space.valid(p):
                    out.append(self._take(p))
            # then the defaults' neighbours, one knob changed: a random point
            # of the whole space is mostly far worse (an LSTM's first random
            # points ran up to 2.8x the defaults), and the knob that pays
            # alone (hoisting off, another chunk of rows) was seldom tried
            # alone; a quarter of the batch stays random (exploration)
            base = self.space.default()
            for _ in range(50 * n):
                if len(out) >= n - n // 4:
                    break
                p = self.space.mutate(base, self.rng, 1)
                if self._fresh(p):
                    out.append(self._take(p))
        pool = self._pool(max(32, 16 * n))
        if len(out) < n and pool:
            picked = self._rank(pool, n - len(out))
            out.extend(self._take(p) for p in picked)
        for _ in range(200 * n):
            if len(out) >= n:
                break
            p = self.space.random(self.rng)
            if self._fresh(p):
                out.append(self._take(p))
        return out

    def tell(self, trials: list[Trial]) -> None:
        for t in trials:
            t.index = len(self.trials)
            self.trials.append(t)
            self._seen.add(self.space.key(t.point))

    def _fresh(self, p: Point) -> bool:
        return self.space.key(p) not in self._seen

    def _take(self, p: Point) -> Point:
        self._seen.add(self.space.key(p))
        return p

    def _pool(self, size: int) -> list[Point]:
        """Children of the best points so far (none before the first measurement)."""
        parents = [t.point for t in self.ranked()[:6]]
        if not parents:
            return []
        pool: dict[str, Point] = {}
        for _ in range(size * 4):
            if len(pool) >= size:
                break
            a = parents[min(int(self.rng.expovariate(0.7)), len(parents) - 1)]
            if len(parents) > 1 and self.rng.random() < 0.3:
                child = self.space.mutate(self.space.crossover(a, self.rng.choice(parents), self.rng), self.rng, 1) \
                    if self.rng.random() < 0.5 else self.space.crossover(a, self.rng.choice(parents), self.rng)
            else:
                child = self.space.mutate(a, self.rng)
            key = self.space.key(child)
            if key not in self._seen:
                pool[key] = child
        return list(pool.values())

    def _rank(self, pool: list[Point], n: int) -> list[Point]:
        """The ``n`` most promising of ``pool`` by the cost model, a quarter at random."""
        predicted = self._predict(pool) if self.use_model else None
        if predicted is None:
            return self.rng.sample(pool, min(n, len(pool)))
        self.model_used = True
        explore = n // 4
        order = sorted(range(len(pool)), key=lambda i: predicted[i])
        chosen = order[:n - explore]
        rest = order[n - explore:]
        chosen += self.rng.sample(rest, min(explore, len(rest)))
        return [pool[i] for i in chosen]

    def _predict(self, pool: list[Point]) -> list[float] | None:
        """Predicted scores of ``pool``, or None without enough data or scikit-learn."""
        if self.default is None or len(self.trials) < _MODEL_AFTER:
            return None
        try:
            from sklearn.ensemble import RandomForestRegressor
        except ImportError:
            return None
        X, y = [], []
        for t in self.trials:
            ratios = self.ratios(t)
            for s, r in zip(self.sizes, ratios):
                X.append(self._row(t.point, s))
                y.append(math.log(_FAILED if r is None or not t.ok else r))
        model = RandomForestRegressor(n_estimators=48, random_state=self.rng.randrange(1 << 30), n_jobs=1)
        model.fit(X, y)
        rows = [self._row(p, s) for p in pool for s in self.sizes]
        pred = model.predict(rows)
        k = len(self.sizes)
        return [sum(w * math.exp(pred[i * k + j]) for j, w in enumerate(self._w)) for i in range(len(pool))]

    def _row(self, p: Point, sizes: dict[str, int]) -> list[float]:
        return self.space.features(p) + [math.log2(float(v) + 1.0) for _, v in sorted(sizes.items())]
