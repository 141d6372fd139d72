"""``tcdsl.MappingOptions``: how a kernel is mapped onto the machine.

The counterpart of Tensor Comprehensions' ``MappingOptions``: the schedule
(what may run in parallel, in which order) comes from isl; these options say
how the code generator uses it.  The defaults are chosen so that a program
gets good code without any options; every field can be changed::

    opts = tcdsl.MappingOptions(tile_rows=6, tile_cols=16)
    k = tcdsl.compile(src, options=opts)
    k = tcdsl.compile(src, options=opts.to_dict() | {"disk_cache": False})

``options=`` also takes a plain dict with the same keys (and the keys of the
other stages: ``disk_cache``, ``auto_threshold``, ``strict_bounds``, ...).
Invalid values raise :class:`tcdsl.TcError` when the kernel is compiled.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .codegen.cpu import CpuMapping


@dataclass(frozen=True)
class MappingOptions:
    """Mapping options for the CPU (LLVM) and CUDA code generators.

    CPU (see docs/internals.md, "CPU mapping"):

    * ``tile_rows`` x ``tile_cols``: the register tile of a reduction (rows of
      the outer parallel loop x columns of the innermost stride-1 loop).
    * ``vector_width``: elements per vector instruction (``tile_cols`` is a
      multiple of it).  0 in these three: the host's defaults (4 x 64 in
      16-lane vectors with AVX-512, 8 x 48 inside a sequential loop; else
      4 x 24 in 8-lane vectors, 2 x 48 inside a sequential loop).
    * ``chunk_rows``: at most this many rows of the parallel loop per chunk
      (a chunk's columns tiles reuse the same right-hand data from cache, and
      its copied panels, see ``k_block``); every thread gets as many chunks,
      of equal size.
    * ``cpu_threads``: threads the chunks are cut for (0: ``TVM_NUM_THREADS``,
      or the number of cores).
    * ``parallel``: run the outermost coincident loop on all cores.
    * ``steps_inside``: run a sequential ``for`` inside the parallel loop when
      the dependences allow it (no barrier between steps); ``False`` keeps it
      outside, one parallel region per step.
    * ``register_tiles``: use register tiles for reductions.
    * ``k_block``: steps of the reduction loop per block when a right-hand
      panel is copied (a matmul's ``B(k, n)`` outside sequential loops): each
      block of the panel is copied once and stays in L1 while all row tiles
      of the chunk use it.  The results do not depend on it (every element
      still sums in ``k`` order).  0 (the default): one block, the whole loop
      (on a 2 MiB L2 the whole ``K x 64`` panel stays in cache; blocks
      measured no faster at 1024^3 and slower at 1536^3).
    * ``hoist``: compute the statements of a sequential ``for`` that depend on
      nothing else the loop computes (an RNN's input projection) for all
      steps before the loop, as one parallel kernel (polyhedral/hoist.py).
    * ``fold``: keep a temporary indexed by a sequential loop's variable in
      as many slots as steps it lives (``c(t % 2, b, j)`` for a state read at
      ``t`` and ``t - 1``) instead of one per step (polyhedral/contract.py).

    CUDA (see docs/cuda.md): ``threads`` per block, ``flatten``,
    ``registers``, ``emulate``.
    """

    tile_rows: int = CpuMapping.tile_rows
    tile_cols: int = CpuMapping.tile_cols
    vector_width: int = CpuMapping.vector_width
    chunk_rows: int = CpuMapping.chunk_rows
    cpu_threads: int = CpuMapping.cpu_threads
    parallel: bool = CpuMapping.parallel
    steps_inside: bool = CpuMapping.steps_inside
    register_tiles: bool = CpuMapping.register_tiles
    k_block: int = CpuMapping.k_block
    hoist: bool = True
    fold: bool = True
    threads: int = 256
    flatten: int | None = None
    registers: bool = True
    emulate: bool = False

    def to_dict(self) -> dict:
        """The fields that differ from the defaults (the form ``options=`` keeps
        and the disk cache keys on)."""
        default = MappingOptions()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}

    @classmethod
    def from_dict(cls, d: dict) -> "MappingOptions":
        """The mapping options of an ``options=`` dict (other keys ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def replace(self, **changes) -> "MappingOptions":
        return dataclasses.replace(self, **changes)


def as_dict(options) -> dict:
    """``options=`` of :func:`tcdsl.compile` as a plain dict."""
    if options is None:
        return {}
    if isinstance(options, MappingOptions):
        return options.to_dict()
    if not isinstance(options, dict):
        from .errors import TcError

        raise TcError(f"options: expected a dict or tcdsl.MappingOptions, got {type(options).__name__}")
    return dict(options)
