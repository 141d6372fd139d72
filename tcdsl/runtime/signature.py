"""What the caller of a compiled kernel needs to know, as data.

The compiler makes a :class:`Signature` from the checked ``def`` and its
ranges (``codegen/signature.py``) and stores it beside the binary in the
disk cache (``runtime/cache.py``), so that a kernel loaded from there is
checked and called with this package alone, no compiler module:

* the inputs, in order: name, dtype, dims (a size's name, a constant, or a
  :class:`Linear` sum of sizes like ``4 * H``);
* the outputs: name, dtype, shape and whether the kernel writes every
  element before it reads any (then the zero fill is left out);
* every tensor's shape and the parts of its extent formulas that the kernel
  computes in int32 (the index range check of a call, ``args.SizeChecks``);
* the (output, input) pairs where an ``out=`` array may be that input
  itself, passed as it is (elsewhere sharing goes through a copy);
* the size guards: for each read that leaves its tensor for some sizes
  (polyhedral/bounds.py), a condition on the sizes under which a call is
  refused, and the message that names the read.

Shapes are Python expressions of the sizes, over a dict ``s``
(``max(s['T'] - 1, 0)``), made by the compiler from its own size
expressions; :func:`compile_shapes` turns them into one function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Linear:
    """A declared size like ``4 * H + 1``: ``sum(c * s[v]) + const``; a call
    solves it for one unknown size (``args.bind_sizes``)."""

    text: str  # as written in TC, for messages
    coeffs: tuple[tuple[str, int], ...]
    const: int

    def to_json(self) -> list:
        return ["linear", self.text, [list(c) for c in self.coeffs], self.const]

    @classmethod
    def from_json(cls, d) -> "Linear":
        return cls(d[1], tuple((v, c) for v, c in d[2]), d[3])


@dataclass(frozen=True)
class Param:
    name: str
    dtype: str
    dims: tuple[str | int | Linear, ...]


@dataclass(frozen=True)
class Output:
    name: str
    dtype: str
    shape: tuple[str, ...]  # Python expressions of the sizes ``s``, each at least 0
    fill: bool = True  # start as zeros (SPEC 1.1); False: every element is written before it is read


@dataclass(frozen=True)
class Extent:
    """A tensor's shape, and the int32 values its formulas compute on the way."""

    name: str
    shape: tuple[str, ...]
    parts: tuple[str, ...]


@dataclass(frozen=True)
class Signature:
    name: str  # the def
    sizes: tuple[str, ...]  # every size, in the order of size tuples
    inputs: tuple[Param, ...]
    outputs: tuple[Output, ...]
    extents: tuple[Extent, ...]
    target: str  # "llvm" or "cuda"
    # (Python condition over the sizes ``s``, "FILE:LINE:COL: 'A' would be read out of bounds")
    guards: tuple[tuple[str, str], ...] = ()
    # temporaries the caller allocates and passes after the outputs (CUDA: runtime/device.py)
    scratch: tuple[Output, ...] = ()
    # sizes a call computes from the others: (name, TC text, Python expression over ``s``)
    derived: tuple[tuple[str, str, str], ...] = ()
    # (output, input) index pairs: an out= array that is that input may be passed as it is (codegen/signature.py)
    in_place: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sizes": list(self.sizes), "target": self.target,
                "inputs": [[p.name, p.dtype, [d.to_json() if isinstance(d, Linear) else d for d in p.dims]]
                           for p in self.inputs],
                "outputs": [[o.name, o.dtype, list(o.shape), o.fill] for o in self.outputs],
                "extents": [[e.name, list(e.shape), list(e.parts)] for e in self.extents],
                "guards": [list(g) for g in self.guards],
                "scratch": [[o.name, o.dtype, list(o.shape)] for o in self.scratch],
                "derived": [list(x) for x in self.derived],
                "in_place": [list(x) for x in self.in_place]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Signature":
        return cls(d["name"], tuple(d["sizes"]),
                   tuple(Param(name, dtype, tuple(Linear.from_json(x) if isinstance(x, list) else x for x in dims))
                         for name, dtype, dims in d["inputs"]),
                   tuple(Output(name, dtype, tuple(shape), fill) for name, dtype, shape, fill in d["outputs"]),
                   tuple(Extent(name, tuple(shape), tuple(parts)) for name, shape, parts in d["extents"]),
                   d["target"], tuple((c, m) for c, m in d.get("guards", [])),
                   tuple(Output(name, dtype, tuple(shape), False) for name, dtype, shape in d.get("scratch", [])),
                   tuple(tuple(x) for x in d.get("derived", [])),
                   tuple((o, i) for o, i in d.get("in_place", [])))


def compile_shapes(shapes: list[tuple[str, ...]]) -> Callable[[dict[str, int]], tuple[tuple[int, ...], ...]]:
    """One Python function of the sizes that evaluates every shape of ``shapes``."""
    body = "".join("(" + "".join(f"{e}, " for e in shape) + "), " for shape in shapes)
    return _function(body)


def compile_values(values: tuple[str, ...]) -> Callable[[dict[str, int]], tuple[int, ...]]:
    return _function("".join(f"{e}, " for e in values))


def _function(body: str) -> Callable:
    # the text is the compiler's (codegen/signature.py): sizes, integers, + - * // % min max and comparisons
    return eval(f"lambda s: ({body})", {"__builtins__": {}, "min": min, "max": max, "int": int})  # noqa: S307
