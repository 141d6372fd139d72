"""Kernel options: ``tcdsl.MappingOptions`` and the ``options=`` of :func:`tcdsl.compile`.

``options=`` (a dict, a :class:`MappingOptions` or None) is parsed and
checked once, by :func:`parse`, into an :class:`Options`: one frozen record
per stage that reads options, and each stage receives its record only::

    frontend   FrontendOptions  strict_bounds, hoist, gather, transpose, pad, parity, inplace, factor, chain,
                                circular (driver.frontend)
    schedule   ScheduleOptions  fusion, split_selects             (polyhedral/schedule.py, split.py)
    lowering   LoweringOptions  fold, checked                     (fold plan, TIR)
    cpu        CpuMapping       tile_rows, ..., k_block           (codegen/cpu.py)
    cuda       CudaMapping      threads, flatten, registers, emulate (codegen/cuda.py)
    dispatch   DispatchOptions  disk_cache, auto_threshold, auto_payback, measure_specialized (dispatch.py)
    runtime    RuntimeOptions   reuse_outputs                     (runtime/kernel.py)

A key that no record has is a :class:`tcdsl.TcError` naming the nearest
known key (``tile_rowz`` -> ``tile_rows``), and so is a value of the wrong
type or range.  :meth:`Options.cache_fields` is the part of the disk cache
key that the options and the host decide.

The counterpart of Tensor Comprehensions' ``MappingOptions``: the schedule
(what may run in parallel, in which order) comes from isl; these options say
how the code generator uses it.  The defaults are chosen so that a program
gets good code without any options; every field can be changed::

    opts = tcdsl.MappingOptions(tile_rows=6, tile_cols=16)
    k = tcdsl.compile(src, options=opts)
    k = tcdsl.compile(src, options=opts.to_dict() | {"disk_cache": False})
"""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any, Callable

from . import host
from .errors import TcError

# Local accumulator buffers stay on the stack (TVM moves larger ones to the heap).
MAX_TILE_BYTES = 448 * 4  # 28 of the 32 AVX-512 registers

# Steps of the reduction loop per block when a panel is packed (codegen/cpu.py,
# _Panels); 0: one block.  Blocks of 128 (a 128 x 64 fp32 panel block is 32
# KiB, in the 48 KiB L1) gained 9% on the 1024^3 matmul with 64-row chunks,
# nothing with the 256-row chunks (the whole K x 64 panel stays in the 2 MiB
# L2), and lost 5-8% at 1536^3: see docs/internals.md ("CPU mapping").
DEFAULT_K_BLOCK = 0
# The same over a nest of several reduction loops (a weight gradient
# ``dW(i, j) += X(t, b, i) * A(t, b, j)``): blocks of this many steps of the
# nest.  dW at (T, B, I, H) = (64, 32, 256, 256), one thread: 1.15 ms with
# blocks of 64 or 128, 1.26 with 256, 1.7 with one block, 1.9 without a panel.
DEFAULT_NEST_K_BLOCK = 128

# Steps per block of a deep register tile's channel loop (codegen/cpu_tiles.py,
# ``channel_blocks``), ``k_block`` 0: a 3x3 convolution's tiles then read a
# block's 32 channels x 5 input rows from L1 (0.91x at 16x64x30x30 on an AMD
# EPYC with AVX2; 64: 0.99x, 16: 0.94x).
DEFAULT_DEPTH_K_BLOCK = 32

# At most this many iterations of a parallel loop between the rows and a
# reduction (a convolution's output row ``h`` below its channel rows ``m``)
# in one register tile by default (``tile_depth`` 0: as many as the vectors
# of a tile's row, 4 x 16 in a 4 x 64 tile), in kernels outside sequential loops (codegen/cpu.py,
# ChunkedLoop._outside): the tile's column vectors are loaded once for all
# its rows and its row scalars once for all these iterations.  The 3x3
# convolution of benchmarks/tuning.py, one thread: 7.2 ms with 4 x 4 x 16
# tiles, 10.2 with depth 2, 12.0 with 3, 8.7 with 6 x 4 and 5 x 4, 19.3
# without (torch conv2d 4.2-4.4 ms).
MAX_TILE_DEPTH = 4

MAX_CUDA_THREADS = 1024


@dataclass(frozen=True)
class FrontendOptions:
    """``driver.frontend``: bounds reads that may leave their tensor are errors
    (``strict_bounds``) instead of warnings; loop-invariant statements are
    hoisted out of sequential loops (``hoist``, polyhedral/hoist.py); inputs
    read across their contiguous dimension are read from a transposed copy
    (``transpose``, polyhedral/layout.py), and a sum whose last indices are
    short is computed with them first (polyhedral/permute.py); inputs read under a select that
    pads them with zeros are read from a zero-padded copy (``pad``,
    polyhedral/pad.py); a temporary that ends in an output of its shape is
    computed in that output (``inplace``, polyhedral/inplace.py); a sum's
    factors that do not depend on its reduction variables are applied once
    after it (``factor``, polyhedral/factor.py); a sum's reads through an
    index are copied once before it (``gather``, polyhedral/gather.py); a
    sum of a product of three or more factors runs as a chain of two sums
    with fewer loops (``chain``, polyhedral/chain.py); a sum whose taps are
    picked by its outputs' remainders (a transposed convolution of stride 2)
    is split by them (``parity``, polyhedral/parity.py); a read at a
    remainder by a size (``X(b, (i + 7) % N)``) reads through the remainder's
    affine cases (``circular``, polyhedral/circular.py)."""

    strict_bounds: bool = False
    hoist: bool | str = True
    gather: bool = True
    transpose: bool = True
    pad: bool = True
    parity: bool = True
    inplace: bool = True
    factor: bool = True
    chain: bool = True
    circular: bool = True


# The choices of the ``fusion`` option (polyhedral/schedule.py, FUSION).
FUSION = ("auto", "isl", "outer", "none")


@dataclass(frozen=True)
class ScheduleOptions:
    """The CPU's schedule (polyhedral/schedule.py): ``fusion`` chooses between
    isl's schedule and one statement per nest (below a shared parallel loop
    inside a sequential ``for``; see ``FUSION`` there);
    ``split_selects`` cuts a statement's domain at its selects' affine
    conditions first (polyhedral/split.py), so padding and boundary selects
    leave the inner loops, and where a read of the tensor it assigns meets
    the write (Floyd-Warshall's ``D(i, k)`` at ``j == k``), so that each
    piece runs in parallel."""

    fusion: str = "auto"
    split_selects: bool = True


@dataclass(frozen=True)
class LoweringOptions:
    """The fold plan and the TIR: temporaries folded into a few slots
    (``fold``, polyhedral/contract.py); non-affine indices checked at run time
    (``checked``, codegen/checks.py; such a kernel runs on one thread)."""

    fold: bool = True
    checked: bool = False


@dataclass(frozen=True)
class CpuMapping:
    """The CPU mapping (see :class:`MappingOptions`).  A 0 in ``tile_rows``,
    ``tile_cols`` or ``vector_width`` means the host's default
    (:func:`host_defaults`); in ``k_block``, :data:`DEFAULT_K_BLOCK`; in
    ``tile_depth``, the vectors of a tile's row (at most
    :data:`MAX_TILE_DEPTH`)."""

    tile_rows: int = 0
    tile_cols: int = 0
    vector_width: int = 0
    chunk_rows: int = 256
    cpu_threads: int = 0  # 0: TVM_NUM_THREADS, or the number of cores
    parallel: bool = True
    steps_inside: bool = True
    register_tiles: bool = True
    k_block: int = 0
    reduce_lanes: int = 16
    tile_depth: int = 0
    overlap_tail: bool = True
    reorder_reductions: bool = True
    prepack: bool = True
    scatter: bool = True

    def resolved(self, in_loop: bool) -> "CpuMapping":
        """The tile fields that are 0 filled in with :func:`host_defaults` for a
        kernel inside a sequential loop or not (a vector width alone keeps the
        default tile's number of vectors per row)."""
        auto = host_defaults(in_loop)
        if self.vector_width and not self.tile_cols:
            auto["tile_cols"] = max(auto["tile_cols"] // auto["vector_width"], 1) * self.vector_width
        given = {k: getattr(self, k) for k in auto if getattr(self, k)}
        r = dataclasses.replace(self, **{**auto, **given, "k_block": self.k_block or DEFAULT_K_BLOCK})
        # by default as many accumulators as a tile of tile_rows x tile_cols, at most MAX_TILE_DEPTH deep
        depth = self.tile_depth or max(1, min(r.tile_cols // r.vector_width, MAX_TILE_DEPTH))
        return dataclasses.replace(r, tile_depth=depth)

    @property
    def threads(self) -> int:
        return self.cpu_threads or host.threads()


@dataclass(frozen=True)
class CudaMapping:
    """The CUDA mapping (codegen/cuda.py, docs/cuda.md): ``threads`` per block,
    at most ``flatten`` nested coincident loops on the threads (None: all),
    accumulators in ``registers``; a host loop whose launches each fit a
    block of ``persistent_threads`` as one ``persistent`` launch of one such
    block, whose phases ``split`` their sums into parts across the block's
    threads where they have at most half as many outputs; ``emulate`` builds the
    thread loops as serial loops (tests on the CPU)."""

    threads: int = 256
    flatten: int | None = None
    registers: bool = True
    persistent: bool = True
    persistent_threads: int = 1024
    split: bool = False
    emulate: bool = False


@dataclass(frozen=True)
class DispatchOptions:
    """``dispatch.Kernel``: the on-disk cache, and when ``auto`` specialises."""

    disk_cache: bool = True
    auto_threshold: int = 3
    auto_payback: float = 1.0
    measure_specialized: bool = True


@dataclass(frozen=True)
class RuntimeOptions:
    """Calling a kernel: outputs that need no zero fill reuse the memory of
    earlier results that nobody holds (runtime/pool.py)."""

    reuse_outputs: bool = True


def host_defaults(in_loop: bool = False) -> dict[str, int]:
    """Register tiles that fit the host's vector registers.  With AVX-512 (32
    registers of 16 floats): 4 x 64 (16 registers) for a kernel on its own,
    8 x 48 (24) inside a sequential loop.  Measured, interleaved, on this
    machine: the 1024^3 matmul 9.3 ms against 11.4 ms for 6 x 32 (8 x 48:
    9.4, 7 x 64: 9.6, 12 x 32: 11.7), a 3x3 convolution 2.20 against 2.38
    ms, a batch matmul with 100 columns 0.91 against 1.52 ms; inside the
    time loop of the Elman RNN at (64, 32, 256) 2.31 ms with 8 x 48 against
    2.71 with 4 x 64 (batch 12: 2.45 against 2.76; the LSTM 10.7 against
    11.4; batch 1 and 3 and the QRNN alike: their rows are left over, see
    ``leftover_rows`` in codegen/cpu_tiles.py).  Without AVX-512 (16
    registers of 8): 4 x 24, inside a sequential loop too.  Measured on an
    AMD EPYC (Zen 3, AVX2), interleaved: the LSTM at (128, 64, 256, 512)
    221-255 ms against 388-561 for 2 x 48 (4 x 16: 249, 6 x 16: 317, 3 x 32:
    511), at (64, 32, 256, 256) 23.5 against 44.4, the Elman RNN at (64,
    32, 256) 5.9 against 7.0 ms; a batch of 4 as fast as with 2 x 48 once a
    thread's 2 rows run in tiles of 2 x 48 (``leftover_rows``) and the rows
    split evenly when there are fewer tiles than threads (codegen/cpu.py,
    ``ChunkedLoop``)."""
    if host.avx512():
        rows, cols, vw = (8, 48, 16) if in_loop else (4, 64, 16)
    else:
        rows, cols, vw = 4, 24, 8
    return {"tile_rows": rows, "tile_cols": cols, "vector_width": vw}


# ------------------------------------------------------------------ checks
def _bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TcError(f"options: '{key}' must be True or False, got {v!r}")
    return v


def _int(low: int, message: str = "a positive integer") -> Callable[[str, Any], int]:
    def check(key: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise TcError(f"options: '{key}' must be {message}, got {v!r}")
        return v
    return check


def _cuda_threads(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_CUDA_THREADS:
        raise TcError(f"options: '{key}' must be an integer from 1 to {MAX_CUDA_THREADS}, got {v!r}")
    return v


def _flatten(key: str, v: Any) -> int | None:
    return None if v is None or v == "none" else _int(1)(key, v)  # "none": the CLI's word for None


def _hoist(key: str, v: Any) -> bool | str:
    if not isinstance(v, bool) and v != "auto":
        raise TcError(f"options: '{key}' must be True, False or 'auto', got {v!r}")
    return v


def _fusion(key: str, v: Any) -> str:
    if v not in FUSION:
        raise TcError(f"options: '{key}' must be one of {', '.join(map(repr, FUSION))}, got {v!r}")
    return v


def _payback(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
        raise TcError(f"options: '{key}' must be a number >= 0, got {v!r}")
    return v


# key -> (record, check); a 0 in the tile fields means "the host's default"
_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "strict_bounds": ("frontend", _bool), "hoist": ("frontend", _hoist), "transpose": ("frontend", _bool),
    "pad": ("frontend", _bool), "parity": ("frontend", _bool), "inplace": ("frontend", _bool),
    "factor": ("frontend", _bool),
    "chain": ("frontend", _bool),
    "gather": ("frontend", _bool),
    "circular": ("frontend", _bool),
    "fusion": ("schedule", _fusion),
    "split_selects": ("schedule", _bool),
    "fold": ("lowering", _bool), "checked": ("lowering", _bool),
    "tile_rows": ("cpu", _int(0)), "tile_cols": ("cpu", _int(0)), "vector_width": ("cpu", _int(0)),
    "chunk_rows": ("cpu", _int(1)), "cpu_threads": ("cpu", _int(0)),
    "parallel": ("cpu", _bool), "steps_inside": ("cpu", _bool), "register_tiles": ("cpu", _bool),
    "k_block": ("cpu", _int(0, "a positive integer (0: the default)")),
    "reduce_lanes": ("cpu", _int(0, "an integer >= 0 (0: scalar reductions)")),
    "tile_depth": ("cpu", _int(0, "a positive integer (0: the default)")), "overlap_tail": ("cpu", _bool),
    "reorder_reductions": ("cpu", _bool), "prepack": ("cpu", _bool), "scatter": ("cpu", _bool),
    "threads": ("cuda", _cuda_threads), "flatten": ("cuda", _flatten), "registers": ("cuda", _bool),
    "persistent": ("cuda", _bool), "persistent_threads": ("cuda", _cuda_threads), "split": ("cuda", _bool),
    "emulate": ("cuda", _bool),
    "disk_cache": ("dispatch", _bool), "auto_threshold": ("dispatch", _int(1)), "auto_payback": ("dispatch", _payback),
    "measure_specialized": ("dispatch", _bool),
    "reuse_outputs": ("runtime", _bool),
}
_RECORDS = {"frontend": FrontendOptions, "schedule": ScheduleOptions, "lowering": LoweringOptions, "cpu": CpuMapping, "cuda": CudaMapping,
            "dispatch": DispatchOptions, "runtime": RuntimeOptions}
# Records that decide the generated code (the disk cache key); the others say how it is run.
_CODE_RECORDS = ("frontend", "schedule", "lowering", "cpu", "cuda")


@dataclass(frozen=True)
class Options:
    """``options=`` parsed (see the module docstring).  ``given`` keeps the
    keys as the user gave them; ``keys()`` and ``[key]`` read those, so
    ``{**kernel.options, "hoist": False}`` makes a new ``options=``."""

    frontend: FrontendOptions = FrontendOptions()
    schedule: ScheduleOptions = ScheduleOptions()
    lowering: LoweringOptions = LoweringOptions()
    cpu: CpuMapping = CpuMapping()
    cuda: CudaMapping = CudaMapping()
    dispatch: DispatchOptions = DispatchOptions()
    runtime: RuntimeOptions = RuntimeOptions()
    given: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dict(self.given)

    def keys(self):
        return self.to_dict().keys()

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def cache_fields(self, target_kind: str) -> dict[str, Any]:
        """What of the options and the host the generated code depends on: the
        code records (with the CPU tiles resolved), and for the CPU the host's
        CPU model, its AVX-512 and the threads the parallel loops are cut for
        (``per_thread`` in codegen/cpu.py).  Two processes with equal fields
        make the same code; any difference makes a new disk cache entry."""
        out: dict[str, Any] = {r: dataclasses.asdict(getattr(self, r)) for r in _CODE_RECORDS}
        if target_kind == "llvm":
            out["cpu"] = {**dataclasses.asdict(self.cpu.resolved(False)), "in_loop":
                          dataclasses.asdict(self.cpu.resolved(True)), "threads": self.cpu.threads}
            out["host"] = {"cpu": host.cpu(), "avx512": host.avx512()}
        return out


def parse(options: Options | MappingOptions | dict | None) -> Options:
    """``options=`` of :func:`tcdsl.compile` checked and split into the stages'
    records (see the module docstring); an :class:`Options` is returned as it is."""
    if isinstance(options, Options):
        return options
    if options is None:
        given: dict[str, Any] = {}
    elif isinstance(options, MappingOptions):
        given = options.to_dict()
    elif isinstance(options, dict):
        given = dict(options)
    else:
        raise TcError(f"options: expected a dict or tcdsl.MappingOptions, got {type(options).__name__}")
    fields: dict[str, dict[str, Any]] = {r: {} for r in _RECORDS}
    for key, value in given.items():
        if key not in _KEYS:
            raise TcError(f"options: unknown option {key!r}{_nearest(key)}")
        record, check = _KEYS[key]
        fields[record][key] = check(key, value)
    if fields["lowering"].get("checked"):
        fields["cpu"]["parallel"] = False  # a checked kernel runs on one thread (codegen/checks.py)
    records = {r: cls(**fields[r]) for r, cls in _RECORDS.items()}
    _check_tiles(records["cpu"])
    return Options(**records, given=tuple(sorted(given.items())))


def _nearest(key: Any) -> str:
    close = difflib.get_close_matches(str(key), list(_KEYS), n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; the options are {', '.join(sorted(_KEYS))}"


def _check_tiles(m: CpuMapping) -> None:
    for in_loop in (False, True):
        r = m.resolved(in_loop)
        if r.tile_cols % r.vector_width:
            raise TcError(f"options: 'tile_cols' ({r.tile_cols}) must be a multiple of 'vector_width' "
                          f"({r.vector_width})")
        if r.tile_rows * r.tile_cols * 4 > MAX_TILE_BYTES:
            raise TcError(f"options: a register tile of {r.tile_rows} x {r.tile_cols} elements is too large "
                          f"(at most {MAX_TILE_BYTES // 4} elements)")
        if not in_loop and r.tile_depth > 1 and r.tile_depth * r.tile_rows * r.vector_width * 4 > MAX_TILE_BYTES:
            raise TcError(f"options: a register tile of depth {r.tile_depth} x {r.tile_rows} rows x "
                          f"{r.vector_width} columns is too large (at most {MAX_TILE_BYTES // 4} elements)")


@dataclass(frozen=True)
class MappingOptions:
    """Mapping options for the CPU (LLVM) and CUDA code generators.

    CPU (see docs/internals.md, "CPU mapping"):

    * ``tile_rows`` x ``tile_cols``: the register tile of a reduction (rows of
      the outer parallel loop x columns of the innermost stride-1 loop).
    * ``vector_width``: elements per vector instruction (``tile_cols`` is a
      multiple of it).  0 in these three: the host's defaults (4 x 64 in
      16-lane vectors with AVX-512, 8 x 48 inside a sequential loop; else
      4 x 24 in 8-lane vectors).
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
      panel is copied (a matmul's ``B(k, n)`` outside sequential loops; over
      a nest of reduction loops, ``A(t, b, n)`` of a weight gradient
      ``dW(i, n) += X(t, b, i) * A(t, b, n)``, steps of the nest): each
      block of the panel is copied once and stays in L1 while all row tiles
      of the chunk use it.  The results do not depend on it (every element
      still sums in ``k`` order).  0 (the default): one block, the whole loop
      (on a 2 MiB L2 the whole ``K x 64`` panel stays in cache; blocks
      measured no faster at 1024^3 and slower at 1536^3), blocks of 512 where
      the loop is longer than 4096 steps at run time; over a nest, or
      when the rows' tensor is read across its rows (``dy(n, o)`` of a
      weight gradient ``dW(o, i) +=! dy(n, o) * x(n, i)``), blocks of 128 steps.
      In deep tiles (``tile_depth``): steps per block of the loop that
      indexes a dimension alone (a convolution's input channels), the blocks
      outside the row tiles; 0: blocks of 32 (:data:`DEFAULT_DEPTH_K_BLOCK`).
    * ``reduce_lanes``: partial accumulators of a reduction along an
      innermost loop (a row's max or sum, a dot product): the loop runs as
      vector iterations of this many elements (codegen/cpu_reduce.py); 0
      keeps one accumulator, one element at a time.
    * ``tile_depth``: a parallel loop between the rows and a reduction
      whose column vectors do not move with the rows but with that loop (a
      convolution ``O(n, m, h, w)``: rows ``m``, columns ``w``, the loop
      ``h``) runs outside the row tiles, this many of its iterations in each
      tile (``m x h x w`` accumulators; the columns narrowed to keep the
      tile's size), in kernels outside sequential loops (inside them such a
      loop runs outside the tiles one iteration at a time).  0 (the default):
      the vectors of a tile's row, at most 4 (4 x 4 x 16 with AVX-512, 4 x 3
      x 8 without); 1: no such tiles.
    * ``overlap_tail``: the columns of a register tile's row left after its
      full vectors (fewer than a vector: 12 of a convolution's 28) run as
      one vector tile that ends at the row's last column, overlapping the
      tile before it and storing only the new columns (every element is
      still summed once, in order); ``False``: narrower vectors, then single
      columns.
    * ``reorder_reductions``: a register tile over several reduction loops
      runs the loops that shift another index (a convolution's window
      ``kh``, ``kw`` of ``I(n, c, h + kh, w + kw)``: a few steps each)
      outside the ones that do not (its channels ``c``), so that its inner
      loop is long; ``False``: the schedule's order.  Only the order of
      each sum changes.
    * ``prepack``: inside a sequential ``for``, an input of the program (or
      a temporary computed before the loop) that a register tile reads as a
      panel (an RNN's recurrent weight ``Wh(g, k, j)``) is copied once per
      call, before the loop, to panels of ``tile_cols`` columns that the
      tiles of every step read contiguously; ``False``: every step reads the
      tensor itself.
    * ``scatter``: a sum into the rows an index names, written as a select
      over every row (``dE(v, d) +=! (idx(n) == v ? dy(n, d) : 0)``, an
      embedding's gradient, as tcdsl.gradient writes it too), runs as a
      scatter-add: each term added to the row ``idx(n)`` only
      (polyhedral/scatter.py, codegen/cpu_scatter.py); ``False``: as
      written, every row tested for every term.
    * ``hoist``: compute the statements of a sequential ``for`` that depend on
      nothing else the loop computes (an RNN's input projection) for all
      steps before the loop, as one parallel kernel (polyhedral/hoist.py).
      ``"auto"``: on the CPU, the symbolic kernel (``specialize="never"``)
      holds both programs and hoists only when a step has fewer rows (an
      RNN's batch) than a full register tile for every thread; on a GPU and
      in the other ``specialize`` modes, as True.
    * ``transpose``: read an input that a statement reads across its
      contiguous dimension (``Whh(j, k)`` for ``a(b, j)``) from a transposed
      copy made once per call (polyhedral/layout.py); compute a sum whose
      last indices take fewer than 8 values (a 3x3 convolution's weight
      gradient ``dw(o, c, kh, kw)``) in a temporary with them first, copied
      back after it (polyhedral/permute.py).
    * ``pad``: read an input that a reduction reads under a select giving 0
      outside its extents (a convolution's padding, ``(t + k - 2 >= 0 && t +
      k - 2 < L ? x(b, c, t + k - 2) : 0)``) from a zero-padded copy made once
      per call, so that no select is left in the reduction
      (polyhedral/pad.py).
    * ``parity``: a ``+=!`` sum whose taps are picked by the remainders of its
      outputs (a transposed convolution of stride 2 written with ``(i - kh) %
      2 == 0`` selects) is computed by those remainders, each class of
      outputs a plain convolution (polyhedral/parity.py).
    * ``circular``: a read at a remainder by a size (a roll, ``X(b, (i + 7) %
      N)``) reads through the remainder's affine cases (``0 <= e < N``: at
      ``e``, ``N <= e < 2N``: at ``e - N``, ...), which split the domain into
      loops of contiguous reads (polyhedral/circular.py).
    * ``inplace``: a temporary whose last statement writes an output of its
      shape from it element by element (a softmax's ``y(n, c) = e(n, c) /
      s(n)``) is computed in that output, which that statement then updates
      in place: no temporary as large as the output (polyhedral/inplace.py).
    * ``factor``: a ``+=!`` sum's factors that do not depend on its reduction
      variables (``/ z(b, n, i)`` in ``o(b, n, i, d) +=! e(b, n, i, j) *
      v(b, n, j, d) / z(b, n, i)``, a constant scale) are applied once per
      element in a statement after the sum instead of once per term
      (polyhedral/factor.py); the results differ by rounding only.  And an
      ``=`` statement's costly terms (``exp``, ``sin``, ...) that do not
      depend on all its indices (a positional encoding over ``(t, d)``
      added to ``x(b, t, d)``) are computed once, in a table
      (polyhedral/tables.py); a term added to a sum right after it (a
      bias) is where the sum starts (polyhedral/addend.py).
    * ``chain``: a sum of a product of three or more factors that two sums
      compute with fewer loops (``x(b, i) * A(i, r) * Bm(r, o)`` summed over
      ``i`` and ``r``) runs as a chain: the factors of ``i`` summed first
      into a temporary (polyhedral/chain.py); the results differ by rounding
      only.  And a sum over groups of contiguous elements (a channels-last
      group norm's ``x(n, h, v, g * 8 + k)``) is summed per element first,
      then per group (polyhedral/groups.py).
    * ``gather``: a sum's read through an index reused across the sum's
      other indices (``emb(tok(t, b), i)`` in ``g(t, b, r) +=! emb(tok(t,
      b), i) * W(r, i)``, an embedding feeding a projection) is copied once,
      outside every ``for``, into a temporary the sum then reads
      (polyhedral/gather.py); the results are unchanged.
    * ``fold``: keep a temporary indexed by a sequential loop's variable in
      as many slots as steps it lives (``c(t % 2, b, j)`` for a state read at
      ``t`` and ``t - 1``) instead of one per step (polyhedral/contract.py).

    Schedule (CPU): ``fusion``: ``"auto"`` (the default: for a kernel
    inside a sequential ``for`` whichever of the next two vectorizes more
    statements; outside, for a kernel with a contraction, whichever of
    ``"isl"`` and ``"none"``), ``"isl"`` (isl's schedule, fused where it can),
    ``"outer"`` (the outermost parallel loop shared, each statement in a
    nest of its own below it), ``"none"`` (each strongly connected component
    in a nest of its own); see polyhedral/schedule.py.  ``split_selects``
    (default True): a statement whose right-hand side has a select
    ``c ? a : b`` with an affine condition ``c`` (``t + k - K + 1 >= 0``,
    ``t == 0``) runs as one statement where ``c`` holds (reading ``a``) and
    one where it does not (``b``), so no select is left in the inner loops;
    a piece that adds 0 to a sum is left out (polyhedral/split.py).

    CUDA (see docs/cuda.md): ``threads`` per block, ``flatten``,
    ``registers``, ``persistent``, ``persistent_threads``, ``split``,
    ``emulate``.
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
    reduce_lanes: int = CpuMapping.reduce_lanes
    tile_depth: int = CpuMapping.tile_depth
    overlap_tail: bool = CpuMapping.overlap_tail
    reorder_reductions: bool = CpuMapping.reorder_reductions
    prepack: bool = CpuMapping.prepack
    scatter: bool = CpuMapping.scatter
    hoist: bool | str = FrontendOptions.hoist
    transpose: bool = FrontendOptions.transpose
    pad: bool = FrontendOptions.pad
    parity: bool = FrontendOptions.parity
    inplace: bool = FrontendOptions.inplace
    factor: bool = FrontendOptions.factor
    chain: bool = FrontendOptions.chain
    gather: bool = FrontendOptions.gather
    circular: bool = FrontendOptions.circular
    fold: bool = LoweringOptions.fold
    fusion: str = ScheduleOptions.fusion
    split_selects: bool = ScheduleOptions.split_selects
    threads: int = CudaMapping.threads
    flatten: int | None = CudaMapping.flatten
    registers: bool = CudaMapping.registers
    persistent: bool = CudaMapping.persistent
    persistent_threads: int = CudaMapping.persistent_threads
    split: bool = CudaMapping.split
    emulate: bool = CudaMapping.emulate

    def to_dict(self) -> dict:
        """The fields that differ from the defaults (the form ``options=`` keeps)."""
        default = MappingOptions()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}

    @classmethod
    def from_dict(cls, d: dict) -> "MappingOptions":
        """The mapping options of an ``options=`` dict (the other stages' keys ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def replace(self, **changes) -> "MappingOptions":
        return dataclasses.replace(self, **changes)
