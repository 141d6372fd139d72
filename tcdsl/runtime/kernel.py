"""Calling compiled code: argument checks, output allocation, the call.

:class:`CompiledKernel` calls the binaries of one ``def`` from what the
compiler stored with them (runtime/signature.py): it checks the inputs
(``args.prepare_input``: count, rank, dtype, device), binds the sizes from
their shapes (``args.bind_sizes``), checks the sizes' index range, allocates
the outputs (or checks ``out=``), asks :meth:`CompiledKernel._binary_for`
for the binary of these sizes, and calls it with the sizes first, then the
buffers.  Once the general path has checked a tuple of input shapes, it
leaves a plan for them, and the next such call takes the fast path
(runtime/fastcall.py).

Which binary serves which sizes is the subclass's: ``dispatch.Kernel``
compiles and specialises them (the compiler), :func:`load` serves the one
binary of a disk cache entry -- with this package alone, no compiler module.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

import numpy as np

from ..errors import TcShapeError
from . import cache, checked as _checked, device, hugepages  # noqa: F401  (checked: the callbacks of checked kernels)
from .args import Arg, SizeChecks, bind_sizes, is_torch, overlaps, prepare_input, same_memory
from .fastcall import MISS, FastPath
from .pool import KEEP, OutputPool
from .signature import Signature, compile_shapes

# tvm_ffi releases the GIL for every call.  Taking it back waits, while
# another thread runs Python (auto's background compiler), for that thread's
# switch interval (5 ms): a 2 us kernel called in a loop then ran 100 times a
# second instead of 50000.  Planned calls whose first run took less than this
# (CPU time of the calling thread) keep the GIL; longer ones let other
# threads run meanwhile.
_KEEP_GIL_BELOW = 1e-3


class Binary:
    """One compiled function: it takes the sizes ``size_params`` (int32), then
    the buffers.  ``function()`` looks the function up (each call a handle of
    its own: ``fn_keeping_gil`` is set to keep the GIL, ``fn`` is not)."""

    def __init__(self, function: Callable[[], Any], size_params):
        self.fn, self.fn_keeping_gil = function(), _keeping_gil(function())
        self.size_params = tuple(size_params)


class CompiledKernel:
    """Calls the binaries of one ``def`` (see the module docstring).
    ``fixed``: sizes every binary has as constants; ``at_zero(sizes,
    shapes)``: the compiler's bounds check of a call with a size of 0 (None:
    such calls are refused, ``args.SizeChecks``)."""

    def __init__(self, signature: Signature, fixed: dict[str, int] | None = None, *, reuse_outputs: bool = True,
                 at_zero: Callable | None = None):
        self.signature = signature
        self.fixed = dict(fixed or {})
        self._kind = signature.target
        self._at_zero = at_zero
        self._lock = threading.Lock()
        self._checks = SizeChecks(signature)
        self._size_names = signature.sizes
        self._output_names = tuple(o.name for o in signature.outputs)
        self._in_place = frozenset(signature.in_place)
        self._output_shapes = compile_shapes([o.shape for o in signature.outputs])
        self._scratch_shapes = compile_shapes([o.shape for o in signature.scratch])
        # outputs that need no zero fill come from the pool (runtime/pool.py)
        self.output_pool = OutputPool(keep=KEEP * max(len(self._output_names), 1))
        fill = [o.fill or self._kind != "llvm" for o in signature.outputs]
        self._allocators = {"numpy": [hugepages.zeros if f else self.output_pool.empty if reuse_outputs
                                      else hugepages.empty for f in fill],
                            "torch": [not f for f in fill]}
        params = signature.inputs
        self._fast = FastPath([p.dtype for p in params], [len(p.dims) for p in params],
                              [o.dtype for o in signature.outputs], self._allocators, signature.in_place,
                              enabled=self._kind == "llvm" and bool(params) and bool(self._output_names))
        self._plans, self._hits, self._fast_calls = self._fast.plans, self._fast.hits, self._fast.calls
        self._on_trial: set[tuple] = set()  # size tuples whose new binary the dispatcher measures first

    def _binary_for(self, sizes: dict[str, int]) -> tuple[Binary, tuple, bool]:
        """The binary for these sizes, their size tuple, and whether later
        calls with them may go straight to that binary (through a plan)."""
        raise NotImplementedError

    # --------------------------------------------------------------- calling
    def __call__(self, *inputs: Any, out: Any = None, **sizes: int):
        """``sizes``: sizes given at the call (``k(h0, S=5)``), needed for the
        free sizes (no input's shape has them) not fixed at compile time."""
        fast_call = self._fast_calls.get(type(inputs[0])) if inputs and not sizes else None
        if fast_call is not None:
            result = fast_call(inputs, out)
            if result is not MISS:
                return result
        return self._call(inputs, out, sizes)

    def _call(self, inputs: tuple, out: Any, given: dict[str, int] | None = None):
        """The general path: every check, the binary, and a plan so that the
        fast call serves these input shapes from now on (runtime/fastcall.py);
        not for a call with ``given`` sizes: the plans go by input shapes."""
        sig = self.signature
        params = sig.inputs
        if len(inputs) != len(params):
            raise TcShapeError(f"'{sig.name}' takes {len(params)} input{'s' * (len(params) != 1)} "
                               f"({', '.join(p.name for p in params)}), but {len(inputs)} were given")
        args = [prepare_input(p.name, x, p.dtype, len(p.dims), self._device) for p, x in zip(params, inputs)]
        sizes = bind_sizes(params, args, self.fixed, given, sig.sizes, sig.name, sig.derived)
        self._checks.check(sizes, self._at_zero)
        shapes = self._output_shapes(sizes)
        outs, back = self._outputs(args, shapes, out, any(v == 0 for v in sizes.values()))
        b, key, settled = self._binary_for(sizes)
        if key in self._on_trial:  # the dispatcher measures b against the binary it would replace
            b, settled = self._trial(key, b, sizes, args, shapes), True
        if self._kind == "cuda":  # data to the GPU and back: runtime/device.py
            scratch = [(o.dtype, shape) for o, shape in zip(sig.scratch, self._scratch_shapes(sizes))]
            values = device.call(b.fn, [sizes[s] for s in b.size_params], args, outs,
                                 [p.name for p in params] + list(self._output_names), allocated=out is None,
                                 scratch=scratch)
            values = _copy_back(values, back)
            return values[0] if len(values) == 1 else tuple(values)
        call_args = [sizes[s] for s in b.size_params] + [_device_arg(a) for a in args + outs]
        started, wall = time.thread_time(), time.perf_counter()  # CPU time: not the wait for the GIL after the call
        b.fn(*call_args)
        if settled and not given:
            self._remember(args, key, b, sizes, shapes, time.thread_time() - started)
        elif not settled:
            self._unsettled(key, time.perf_counter() - wall)
        values = _copy_back([a.value for a in outs], back)
        return values[0] if len(values) == 1 else tuple(values)

    def _unsettled(self, key: tuple, seconds: float) -> None:
        """A call with size tuple ``key`` that took ``seconds`` was served without a plan."""

    def _trial(self, key: tuple, b: Binary, sizes: dict[str, int], args: list[Arg],
               shapes: tuple[tuple[int, ...], ...]) -> Binary:
        """The binary that serves size tuple ``key`` (in ``_on_trial``) from now
        on, decided at a call with these arguments."""
        return b

    def time_binaries(self, binaries: list[Binary], sizes: dict[str, int], args: list[Arg],
                      shapes: tuple[tuple[int, ...], ...], rounds: int = 3) -> list[float]:
        """Median seconds of a run of each of ``binaries`` on ``args`` (scratch
        outputs, so a call's own outputs are untouched), in interleaved rounds
        after a warm-up run each; one round when a run takes over 50 ms."""
        outs = [np.zeros(s, np.dtype(o.dtype)) for o, s in zip(self.signature.outputs, shapes)]

        def run(b: Binary) -> float:
            call_args = [sizes[s] for s in b.size_params] + [_device_arg(a) for a in args] + \
                [_device_arg(Arg(o, o.shape, str(o.dtype))) for o in outs]
            t0 = time.perf_counter()
            b.fn(*call_args)
            return time.perf_counter() - t0

        warm = [run(b) for b in binaries]
        samples = [[] for _ in binaries]
        for _ in range(rounds if max(warm) < 0.05 else 1):
            for i, b in enumerate(binaries):
                samples[i].append(run(b))
        return [sorted(t)[len(t) // 2] for t in samples]

    def _outputs(self, args: list[Arg], shapes: tuple[tuple[int, ...], ...], out,
                 zero_size: bool) -> tuple[list[Arg], list[tuple[int, Any]]]:
        """The output arrays: ``out``'s, checked, or new ones; ``zero_size``:
        some size is 0 (the proof that an output needs no zero fill assumes
        sizes >= 1, as range inference does: a loop of 0 steps writes nothing).
        Also ``(i, array)`` for each ``out=`` array that shares memory with an
        input: the kernel writes output ``i`` into a copy of it instead (with
        what it holds, for ``+=``), and ``_copy_back`` copies the result into
        ``array`` after the call, so that the kernel reads its inputs as they
        were, as NumPy's ``out=`` does; except where the array is the input
        itself and the signature's ``in_place`` pairs say each element is read
        only before the same element is written (codegen/signature.py)."""
        outputs = self.signature.outputs
        if out is None:
            use_torch = any(is_torch(a.value) for a in args)
            return [_new_output(s, o.dtype, use_torch, self._allocators, i, zero_size)
                    for i, (o, s) in enumerate(zip(outputs, shapes))], []
        given = out if isinstance(out, (tuple, list)) else (out,)
        if len(given) != len(outputs):
            raise TcShapeError(f"out=: expected {len(outputs)} arrays, got {len(given)}")
        result = []
        for o, s, x in zip(outputs, shapes, given):
            if isinstance(x, np.ndarray) and not x.flags.writeable:
                raise TcShapeError(f"out= array for '{o.name}' is read-only")
            a = prepare_input(o.name, x, o.dtype, len(s), self._device)
            if a.value is not x:
                raise TcShapeError(f"out= array for '{o.name}' must be C-contiguous")
            if a.shape != s:
                raise TcShapeError(f"out= array for '{o.name}': shape {a.shape}, but the inputs give {s}")
            for other, b in zip(outputs, result):
                if overlaps(a.value, b.value):
                    raise TcShapeError(f"out= arrays for '{other.name}' and '{o.name}' share memory")
            result.append(a)
        back = []
        for i, a in enumerate(result):
            sharing = [j for j, x in enumerate(args) if overlaps(a.value, x.value)]
            if sharing and not (len(sharing) == 1 and (i, sharing[0]) in self._in_place
                                and same_memory(a.value, args[sharing[0]].value)):
                back.append((i, a.value))
                result[i] = Arg(_copy_of(a.value, keep=not self._allocators["torch"][i]), a.shape, a.dtype)
        return result, back

    def _remember(self, args: list[Arg], key: tuple, b: Binary, sizes: dict[str, int],
                  shapes: tuple[tuple[int, ...], ...], seconds: float) -> None:
        """The plan for these input shapes: a later call with them goes straight to ``b``.
        If this call took ``seconds`` < ``_KEEP_GIL_BELOW``, later ones keep the GIL."""
        in_shapes = tuple(a.shape for a in args)
        if any(0 in s for s in in_shapes + shapes):  # zero-size arrays are passed as TVM tensors: general path
            return
        fn = b.fn_keeping_gil if seconds < _KEEP_GIL_BELOW else b.fn
        with self._lock:
            if self._current(key, b):  # else a specialised binary arrived meanwhile
                self._fast.add(in_shapes, key, (fn, tuple(sizes[s] for s in b.size_params), shapes))
        if args:  # (a call without inputs always takes the general path)
            self._fast.add_library_of(args[0].value)

    def _current(self, key: tuple, b: Binary) -> bool:
        """``b`` still serves size tuple ``key`` (called under the lock)."""
        return True

    @property
    def _device(self) -> str:
        return "cuda" if self._kind == "cuda" else "cpu"


class StoredKernel(CompiledKernel):
    """The binary of one disk cache entry (:func:`load`); it serves the sizes it was made for."""

    def __init__(self, entry: cache.Loaded):
        super().__init__(Signature.from_json(entry.signature), entry.fixed)
        self.binary = Binary(lambda: entry.module[entry.function], entry.size_params)
        self.path = entry.path

    def _binary_for(self, sizes: dict[str, int]) -> tuple[Binary, tuple, bool]:
        self._hits[0] += 1
        return self.binary, tuple(sizes[s] for s in self._size_names), True

    def __repr__(self) -> str:
        return f"<tcdsl stored kernel {self.signature.name} from {self.path.name}>"


def load(entry: str | os.PathLike) -> StoredKernel:
    """The kernel of a disk cache entry (its ``<key>.json``, runtime/cache.py),
    loaded and called with the runtime alone.  A call with a size of 0 is
    refused (it needs the compiler's bounds check; ``tcdsl.compile`` makes
    the same kernel with it)."""
    return StoredKernel(cache.load_entry(entry))


def _keeping_gil(fn):
    """``fn`` (a handle of its own) set to keep the GIL while it runs."""
    fn.release_gil = False
    return fn


def _new_output(shape, dtype: str, use_torch: bool, allocators: dict, i: int, zero_size: bool) -> Arg:
    """Output ``i``: zeros, or (the kernel writes every element before
    reading any, and no size is 0) uninitialised memory, from the pool for NumPy."""
    if use_torch:
        import torch

        make = torch.empty if allocators["torch"][i] and not zero_size else torch.zeros
        return Arg(make(shape, dtype=getattr(torch, dtype)), shape, dtype)
    make = np.zeros if zero_size else allocators["numpy"][i]
    return Arg(make(shape, dtype=np.dtype(dtype)), shape, dtype)


def _copy_of(x: Any, keep: bool) -> Any:
    """A new array like ``x``: a copy when ``keep``, else uninitialised."""
    if is_torch(x):
        return x.clone() if keep else x.new_empty(x.shape)
    return x.copy() if keep else np.empty_like(x)


def _copy_back(values: list, back: list[tuple[int, Any]]) -> list:
    """``values`` with each ``(i, array)`` of ``back``: ``values[i]`` copied into ``array``."""
    for i, x in back:  # (values[i] is the copy _copy_of made of x: the same library)
        if is_torch(x):
            x.copy_(values[i])
        else:
            np.copyto(x, values[i])
        values[i] = x
    return values


def _device_arg(a: Arg):
    """Zero-size arrays are passed as TVM tensors: TVM rejects their strides."""
    if 0 in a.shape:
        import tvm

        return tvm.runtime.empty(a.shape, a.dtype, tvm.cpu())
    return a.value
