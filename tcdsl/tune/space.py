"""The search space of the tuner: every choice the default code generator
makes, with the values it may take.

A *point* is a dict with a value for every knob of the space.  The default
point is :class:`tcdsl.MappingOptions`' defaults, so the first pick of the
code generator is one point of the space and a tuned point means the same
thing as the options a user writes: ``space.options(point)`` is the
``options=`` dict (the fields that differ from the defaults), and
``space.point(options)`` goes back.  A point is valid when the code
generator accepts it: the rules live where the options are read
(``options.parse``: ``tile_cols`` a multiple of ``vector_width``, a
register tile that fits the registers, threads per block), and
:meth:`Space.valid` asks it.

Each knob is ordinal (numbers: a mutation prefers the neighbouring values)
or categorical (booleans, names).  ``features`` encodes a point as numbers
for the cost model.
"""
from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, fields
from typing import Any

from ..errors import TcError
from ..options import MappingOptions

Point = dict[str, Any]


@dataclass(frozen=True)
class Knob:
    """One choice: its option name, the values searched, the default's value."""

    name: str
    values: tuple
    default: Any

    @property
    def ordinal(self) -> bool:
        return all(isinstance(v, int) and not isinstance(v, bool) for v in self.values if v is not None)

    def encode(self, value: Any) -> list[float]:
        """Numbers for the cost model: log2 for sizes and counts, one-hot for names."""
        if self.ordinal:
            return [0.0 if value is None else math.log2(float(value) + 1.0)]
        if all(isinstance(v, bool) for v in self.values):
            return [float(bool(value))]
        return [float(value == v) for v in self.values]


def _default(name: str) -> Any:
    return MappingOptions.__dataclass_fields__[name].default


def _cpu_knobs(avx512: bool) -> tuple[Knob, ...]:
    # 0 in the tile fields and k_block: the code generator's own choice (host_defaults)
    widths = (0, 8, 16) if avx512 else (0, 4, 8)
    values = {
        "tile_rows": (0, 1, 2, 3, 4, 6, 8, 12),
        "tile_cols": (0, 16, 24, 32, 48, 64, 80, 96, 128),
        "vector_width": widths,
        "chunk_rows": (8, 16, 32, 64, 128, 256, 512, 1024),
        "k_block": (0, 32, 64, 128, 256),
        "reduce_lanes": (0, 8, 16, 32),
        "tile_depth": (0, 1, 2, 3, 6),
        "overlap_tail": (True, False),
        "reorder_reductions": (True, False),
        "prepack": (True, False),
        "parallel": (True, False),
        "steps_inside": (True, False),
        "register_tiles": (True, False),
        "hoist": (True, "auto", False),
        "fold": (True, False),
        "fusion": ("auto", "isl", "outer", "none"),
        "split_selects": (True, False),
    }
    return tuple(Knob(k, v, _default(k)) for k, v in values.items())


def _cuda_knobs() -> tuple[Knob, ...]:
    values = {
        "threads": (32, 64, 128, 256, 512, 1024),
        "flatten": (None, 1, 2, 3),
        "registers": (True, False),
        "persistent": (True, False),
        "persistent_threads": (256, 512, 1024),
        "split": (False, True),
        "hoist": (True, False),  # ("auto" hoists on a GPU)
        "fold": (True, False),
    }
    return tuple(Knob(k, v, _default(k)) for k, v in values.items())


class Space:
    """The knobs of one target kind (``"llvm"`` or ``"cuda"``)."""

    def __init__(self, target_kind: str, knobs: tuple[Knob, ...]):
        self.target_kind = target_kind
        self.knobs = knobs
        self._by_name = {k.name: k for k in knobs}
        for k in knobs:
            assert k.default in k.values, f"the default of {k.name} must be one of its values"

    # ------------------------------------------------------------ points
    def default(self) -> Point:
        """The code generator's own pick (every option at its default)."""
        return {k.name: k.default for k in self.knobs}

    def options(self, point: Point) -> dict:
        """The ``options=`` dict of ``point``: the knobs that differ from the defaults."""
        return {k.name: point[k.name] for k in self.knobs if point[k.name] != k.default}

    def point(self, options: dict | MappingOptions | None) -> Point:
        """The point of an ``options=`` dict (knobs it does not name: defaults;
        keys that are not knobs of this space are dropped)."""
        if isinstance(options, MappingOptions):
            options = options.to_dict()
        p = self.default()
        p.update({k: v for k, v in (options or {}).items() if k in self._by_name})
        return p

    def key(self, point: Point) -> str:
        """A canonical text of the point's options (equal points, equal keys)."""
        import json

        return json.dumps(self.options(point), sort_keys=True)

    def canonical(self, point: Point) -> Point:
        """``point`` with the knobs that change nothing set to their defaults
        (without register tiles, the tile shape is not used), so that two
        points making the same code are measured once."""
        p = dict(point)
        if self.target_kind == "llvm" and p.get("register_tiles") is False:
            for name in ("tile_rows", "tile_cols", "k_block", "tile_depth"):
                p[name] = self._by_name[name].default
        return p

    def valid(self, point: Point) -> bool:
        """The code generator accepts ``point`` (see the module docstring)."""
        from ..options import parse

        try:
            parse(self.options(point))
        except TcError:
            return False
        return True

    # ------------------------------------------------------------ moves
    def random(self, rng: random.Random) -> Point:
        for _ in range(1000):
            p = self.canonical({k.name: rng.choice(k.values) for k in self.knobs})
            if self.valid(p):
                return p
        return self.default()

    def mutate(self, point: Point, rng: random.Random, changes: int | None = None) -> Point:
        """``point`` with one to three knobs changed (an ordinal knob moves to a
        neighbouring value two times out of three); always valid."""
        for _ in range(100):
            p = dict(point)
            for k in rng.sample(self.knobs, changes or rng.choice((1, 1, 2, 3))):
                others = [v for v in k.values if v != p[k.name]]
                if not others:
                    continue
                if k.ordinal and p[k.name] in k.values and rng.random() < 2 / 3:
                    i = k.values.index(p[k.name])
                    near = [k.values[j] for j in (i - 1, i + 1) if 0 <= j < len(k.values)]
                    p[k.name] = rng.choice(near)
                else:
                    p[k.name] = rng.choice(others)
            p = self.canonical(p)
            if p != point and self.valid(p):
                return p
        return self.random(rng)

    def crossover(self, a: Point, b: Point, rng: random.Random) -> Point:
        """Each knob from ``a`` or ``b``; ``a`` when the mix is not valid."""
        for _ in range(20):
            p = self.canonical({k.name: (a if rng.random() < 0.5 else b)[k.name] for k in self.knobs})
            if self.valid(p):
                return p
        return dict(a)

    def features(self, point: Point) -> list[float]:
        out: list[float] = []
        for k in self.knobs:
            out.extend(k.encode(point[k.name]))
        return out

    def __len__(self) -> int:
        """The number of points, valid or not."""
        return math.prod(len(k.values) for k in self.knobs)

    def __repr__(self) -> str:
        return f"<tcdsl.tune.Space {self.target_kind}: {', '.join(k.name for k in self.knobs)}>"


@functools.cache
def space_for(target_kind: str) -> Space:
    """The space of ``target_kind``, built once per process."""
    if target_kind == "cuda":
        return Space("cuda", _cuda_knobs())
    if target_kind != "llvm":
        raise TcError(f"target '{target_kind}' is not supported; use 'llvm' or 'cuda'")
    from ..host import avx512

    return Space("llvm", _cpu_knobs(avx512()))


# Every knob names a field of MappingOptions: the space and the options cannot drift apart.
assert {k.name for k in _cpu_knobs(True) + _cuda_knobs()} <= {f.name for f in fields(MappingOptions)}
