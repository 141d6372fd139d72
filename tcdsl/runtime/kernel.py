"""The compiled kernel users call: argument checks, output allocation,
per-size binaries, and what the kernel shows of itself."""
from __future__ import annotations

import queue
import threading
import time
import warnings
from collections import Counter
from typing import Any

import numpy as np

from ..errors import TcError, TcShapeError
from .. import driver
from ..codegen import targets
from . import cache
from . import device
from .args import Arg, bind_sizes, check_index_range, is_torch, prepare_input, shape_function
from .fastcall import MISS, FastPath
from .pool import KEEP, OutputPool
from ..polyhedral.dataflow import overwritten_outputs

# tvm_ffi releases the GIL for every call.  Taking it back waits, while
# another thread runs Python (auto's background compiler), for that thread's
# switch interval (5 ms): a 2 us kernel called in a loop then ran 100 times a
# second instead of 50000.  Planned calls whose first run took less than this
# (CPU time of the calling thread) keep the GIL; longer ones let other
# threads run meanwhile.
_KEEP_GIL_BELOW = 1e-3
# auto: the assumed cost of a specialised build when the symbolic binary came
# from the disk cache (a build of the Elman RNN takes about 1 s here).
_COMPILE_ESTIMATE = 0.5


class _Binary:
    """One compiled function and the sizes it was specialised for.

    A binary read from the disk cache has only its function: the backend
    (schedules, TIR) and an in-memory executable are rebuilt by ``remake``
    the first time something asks for them (the inspection views)."""

    def __init__(self, backend: driver.Backend, target):
        self._backend = backend
        self._executable = targets.build(backend.func, target)
        symbol = backend.func.attrs["global_symbol"]
        self.fn, self.fn_keeping_gil = self._executable[symbol], _keeping_gil(self._executable[symbol])
        self.size_params = backend.signature.sizes
        self.target = target
        self.from_disk = False

    @classmethod
    def loaded(cls, module, function: str, size_params, target, remake) -> "_Binary":
        b = cls.__new__(cls)
        b._backend = b._executable = None
        b.module, b.fn, b.size_params = module, module[function], tuple(size_params)
        b.fn_keeping_gil = _keeping_gil(module[function])
        b.target, b.from_disk = target, True
        b._remake, b._lazy_lock = remake, threading.Lock()
        return b

    @property
    def backend(self) -> driver.Backend:
        if self._backend is None:
            with self._lazy_lock:
                if self._backend is None:
                    self._backend = self._remake()
        return self._backend

    @property
    def executable(self):
        if self._executable is None:
            backend = self.backend
            with self._lazy_lock:
                if self._executable is None:
                    self._executable = targets.build(backend.func, self.target)
        return self._executable


class Kernel:
    """A compiled TC function.  Call it with the inputs, in the ``def``'s order.

    Read-only views of what was made: :attr:`ir_module` (the TVM IRModule),
    :attr:`script` (its TVMScript text), :attr:`schedule` (the isl schedule
    trees), :attr:`isl_ast` (the isl ASTs, as C)."""

    def __init__(self, fe: driver.Frontend, target: Any = "llvm", specialize: str = "never",
                 sizes: dict[str, int] | None = None, options: dict | None = None):
        if specialize not in driver.SPECIALIZE_MODES:
            raise TcError(f"unknown specialize mode '{specialize}'; choose one of "
                          f"{', '.join(driver.SPECIALIZE_MODES)}")
        self.frontend = fe
        self.target = targets.make_target(target)
        self._kind = targets.target_kind(self.target)
        if self._kind not in ("llvm", "cuda"):
            raise TcError(f"target '{self._kind}' is not supported; use 'llvm' or 'cuda'")
        self.specialize = specialize
        self.options = dict(options or {})
        self.fixed = self._check_fixed(sizes or {})
        self._auto_threshold = int(self.options.get("auto_threshold", 3))
        self._auto_payback = self.options.get("auto_payback", 1.0)
        if isinstance(self._auto_payback, bool) or not isinstance(self._auto_payback, (int, float)) \
                or not self._auto_payback >= 0:
            raise TcError(f"options: 'auto_payback' must be a number >= 0, got {self._auto_payback!r}")
        self._spent: Counter = Counter()  # auto: seconds of calls per size tuple, until it is hot
        self._compile_estimate = _COMPILE_ESTIMATE
        self._lock = threading.Lock()
        self._binaries: dict[tuple | None, _Binary] = {}
        self._pending: set[tuple] = set()  # auto: size tuples handed to the background compiler
        self._in_flight = 0  # of those, how many it has not finished (built or failed)
        self._seen: Counter = Counter()
        self._stats = Counter(compiles=0, disk_hits=0)
        self._symbolic_schedules = None
        self._disk_base: dict | None = None
        self._init_fast_calls()
        if specialize in ("never", "auto"):
            disk_hits, started = self._stats["disk_hits"], time.perf_counter()
            self._binaries[None] = self._compile(None)
            if self._stats["disk_hits"] == disk_hits:  # built here: what a specialised build will cost
                self._compile_estimate = time.perf_counter() - started

    def _check_fixed(self, sizes: dict[str, int]) -> dict[str, int]:
        known = set(self.frontend.checked.sizes)
        for k, v in sizes.items():
            if k not in known:
                raise TcError(f"sizes: '{k}' is not a size of '{self.frontend.name}' (sizes: {', '.join(self.frontend.checked.sizes)})")
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise TcError(f"sizes: '{k}' must be a non-negative integer, got {v!r}")
        return {k: int(v) for k, v in sizes.items()}

    # ------------------------------------------------------------ compiling
    def backend(self, sizes: dict[str, int] | None = None) -> driver.Backend:
        """Run the size-dependent stages for ``sizes`` (None: the symbolic ones)."""
        fixed = {**self.fixed, **(sizes or {})}
        if sizes is not None and self.specialize == "before-scheduling":
            return driver.backend(self.frontend, fixed, target_kind=self._kind, options=self.options)
        if self._symbolic_schedules is None:
            self._symbolic_schedules = driver.schedule_for(self.frontend.model, self.fixed, self._kind)
        return driver.backend(self.frontend, fixed, schedules=self._symbolic_schedules, target_kind=self._kind,
                              options=self.options)

    def _compile(self, key: tuple | None, *, disk_only: bool = False) -> _Binary | None:
        """The binary for size tuple ``key`` (None: the symbolic one): from the
        disk cache when it is there, else built (and stored there).  With
        ``disk_only``, None instead of building."""
        sizes = None if key is None else dict(zip(self.frontend.checked.sizes, key))
        disk = self._disk_key(sizes)
        if disk is not None:
            hit = cache.load(*disk)
            if hit is not None:
                b = _Binary.loaded(hit.module, hit.function, hit.size_params, self.target,
                                   lambda: self.backend(sizes))
                with self._lock:
                    self._stats["disk_hits"] += 1
                return b
        if disk_only:
            return None
        b = _Binary(self.backend(sizes), self.target)
        with self._lock:
            self._stats["compiles"] += 1
        if disk is not None:
            cache.store(*disk, b.executable, b.backend.func.attrs["global_symbol"], b.size_params)
        return b

    def _disk_key(self, sizes: dict[str, int] | None) -> tuple[str, dict] | None:
        """(key, key fields) of the disk cache entry for ``sizes``, or None when the disk cache is off."""
        if not cache.enabled(self.options) or (self._kind == "cuda" and not targets.cuda_device_present()):
            # a CUDA library cannot be loaded back where there is no GPU: nothing to reuse
            return None
        if self._disk_base is None:
            from ..syntax.printer import to_tc

            self._disk_base = cache.fields(
                program=to_tc(self.frontend.checked.node), entry=self.frontend.name, pipeline="never",
                fixed=self.fixed, sizes=None, target=str(self.target), options=self.options)
        if sizes is None:
            fields = self._disk_base
        else:
            pipeline = "before-scheduling" if self.specialize == "before-scheduling" else "after-scheduling"
            fields = {**self._disk_base, "pipeline": pipeline, "sizes": {k: int(v) for k, v in sorted(sizes.items())}}
        return cache.key_of(fields), fields

    def _binary_for(self, sizes: dict[str, int]) -> tuple[_Binary, tuple, bool]:
        """The binary for these sizes, their size tuple, and whether later
        calls with them may go straight to that binary (through a plan)."""
        key = tuple(sizes[s] for s in self._size_names)
        if self.specialize == "never":
            self._hits[0] += 1
            return self._binaries[None], key, True
        # specialising assumes sizes >= 1: a 0 switched off every statement; the symbolic binary serves
        lookup = None if 0 in key else key
        b = self._binaries.get(lookup)
        if b is not None:
            self._hits[0] += 1
            return b, key, lookup is not None
        if self.specialize == "auto" and lookup is not None:
            return self._auto(key)
        b = self._binaries[lookup] = self._compile(lookup)
        return b, key, lookup is not None

    def _auto(self, key: tuple) -> tuple[_Binary, tuple, bool]:
        """Serve from the symbolic binary; specialise hot size tuples in the background.
        Calls are counted here until a size tuple is hot; from then on a plan
        serves it (the symbolic binary, then the specialised one)."""
        with self._lock:
            self._seen[key] += 1
            first = self._seen[key] == 1
            start = (self._seen[key] >= self._auto_threshold and key not in self._pending
                     and self._spent[key] >= self._auto_payback * self._compile_estimate)
            if start:
                self._pending.add(key)
                self._in_flight += 1
            hot = key in self._pending
        if first and not start:  # specialised in an earlier run? then use it at once
            b = self._compile(key, disk_only=True)
            if b is not None:
                with self._lock:
                    self._binaries[key] = b
                return b, key, True
        if start:
            _BACKGROUND.submit(self._specialize_in_background, key)
        self._hits[0] += 1
        return self._binaries[None], key, hot

    def _specialize_in_background(self, key: tuple) -> None:
        try:
            b = self._compile(key)
            with self._lock:
                self._binaries[key] = b
                self._fast.drop(key)  # the next call makes a plan with b
        except Exception as e:  # the symbolic binary keeps serving these sizes
            warnings.warn(f"tcdsl: specialising {self.frontend.name} for sizes {key} failed ({e}); "
                          f"the symbolic kernel keeps serving them", RuntimeWarning)
        finally:
            with self._lock:
                self._in_flight -= 1

    # --------------------------------------------------------------- calling
    def __call__(self, *inputs: Any, out: Any = None):
        fast_call = self._fast_calls.get(type(inputs[0])) if inputs else None
        if fast_call is not None:
            result = fast_call(inputs, out)
            if result is not MISS:
                return result
        return self._call(inputs, out)

    def _call(self, inputs: tuple, out: Any):
        """The general path: every check, the binary, and a plan so that the
        fast call serves these input shapes from now on (runtime/fastcall.py)."""
        checked = self.frontend.checked
        params = checked.node.params
        if len(inputs) != len(params):
            raise TcShapeError(f"'{self.frontend.name}' takes {len(params)} input{'s' * (len(params) != 1)} "
                               f"({', '.join(p.name for p in params)}), but {len(inputs)} were given")
        args = [prepare_input(p.name, x, checked.tensors[p.name].dtype, len(p.type.dims), self._device)
                for p, x in zip(params, inputs)]
        sizes = bind_sizes(checked, args, self.fixed)
        check_index_range(self.frontend.ranges, sizes)
        shapes = self._output_shapes(sizes)
        outs = self._outputs(args, shapes, out, any(v == 0 for v in sizes.values()))
        b, key, settled = self._binary_for(sizes)
        if self._kind == "cuda":  # data to the GPU and back: runtime/device.py
            values = device.call(b.fn, [sizes[s] for s in b.size_params], args, outs,
                                 [p.name for p in params] + list(self._output_names), allocated=out is None)
            return values[0] if len(values) == 1 else tuple(values)
        call_args = [sizes[s] for s in b.size_params] + [_device_arg(a) for a in args + outs]
        started, wall = time.thread_time(), time.perf_counter()  # CPU time: not the wait for the GIL after the call
        b.fn(*call_args)
        if settled:
            self._remember(args, key, b, sizes, shapes, time.thread_time() - started)
        elif self.specialize == "auto":
            self._spent[key] += time.perf_counter() - wall
        values = [a.value for a in outs]
        return values[0] if len(values) == 1 else tuple(values)

    def _outputs(self, args: list[Arg], shapes: tuple[tuple[int, ...], ...], out, zero_size: bool) -> list[Arg]:
        """The output arrays: ``out``'s, checked, or new ones; ``zero_size``:
        some size is 0 (the proof that an output needs no zero fill assumes
        sizes >= 1, as range inference does: a loop of 0 steps writes nothing)."""
        checked = self.frontend.checked
        names = self._output_names
        if out is None:
            use_torch = any(is_torch(a.value) for a in args)
            return [_new_output(s, checked.tensors[o].dtype, use_torch, self._allocators, i, zero_size)
                    for i, (o, s) in enumerate(zip(names, shapes))]
        given = out if isinstance(out, (tuple, list)) else (out,)
        if len(given) != len(names):
            raise TcShapeError(f"out=: expected {len(names)} arrays, got {len(given)}")
        result = []
        for o, s, x in zip(names, shapes, given):
            a = prepare_input(o, x, checked.tensors[o].dtype, len(s), self._device)
            if a.value is not x:
                raise TcShapeError(f"out= array for '{o}' must be C-contiguous")
            if a.shape != s:
                raise TcShapeError(f"out= array for '{o}': shape {a.shape}, but the inputs give {s}")
            result.append(a)
        return result

    # ------------------------------------------------------- the fast path
    def _init_fast_calls(self) -> None:
        """Per-kernel tables for the calls: the size order, the outputs'
        shape formulas compiled to one Python function, the fast path."""
        checked = self.frontend.checked
        self._size_names = tuple(checked.sizes)
        self._output_names = tuple(checked.outputs)
        self._output_shapes = shape_function([self.frontend.ranges.extent_exprs(o) for o in self._output_names])
        params = checked.node.params
        # outputs that need no zero fill come from the pool (runtime/pool.py)
        reuse = self.options.get("reuse_outputs", True)
        if not isinstance(reuse, bool):
            raise TcError(f"options: 'reuse_outputs' must be True or False, got {reuse!r}")
        overwritten = overwritten_outputs(self.frontend.model) if self._kind == "llvm" else frozenset()
        self.output_pool = OutputPool(keep=KEEP * max(len(self._output_names), 1))
        self._allocators = {"numpy": [(self.output_pool.empty if reuse else np.empty) if o in overwritten
                                      else np.zeros for o in self._output_names],
                            "torch": [o in overwritten for o in self._output_names]}
        self._fast = FastPath([checked.tensors[p.name].dtype for p in params], [len(p.type.dims) for p in params],
                              [checked.tensors[o].dtype for o in self._output_names], self._allocators,
                              enabled=self._kind == "llvm" and bool(params) and bool(self._output_names))
        self._plans, self._hits, self._fast_calls = self._fast.plans, self._fast.hits, self._fast.calls

    def _remember(self, args: list[Arg], key: tuple, b: _Binary, sizes: dict[str, int],
                  shapes: tuple[tuple[int, ...], ...], seconds: float) -> None:
        """The plan for these input shapes: a later call with them goes straight to ``b``.
        If this call took ``seconds`` < ``_KEEP_GIL_BELOW``, later ones keep the GIL."""
        in_shapes = tuple(a.shape for a in args)
        if any(0 in s for s in in_shapes + shapes):  # zero-size arrays are passed as TVM tensors: general path
            return
        fn = b.fn_keeping_gil if seconds < _KEEP_GIL_BELOW else b.fn
        with self._lock:
            if self._binaries.get(key, b) is b:  # else a specialised binary arrived meanwhile
                self._fast.add(in_shapes, key, (fn, tuple(sizes[s] for s in b.size_params), shapes))
        if args:  # (a call without inputs always takes the general path)
            self._fast.add_library_of(args[0].value)

    # ------------------------------------------------------------ inspection
    def cache_info(self) -> dict[str, int]:
        """Counts like ``functools.lru_cache``'s: binaries built (``compiles``),
        calls served by an existing binary (``hits``), binaries loaded from
        the on-disk cache (``disk_hits``), and binaries held (``currsize``)."""
        return {"compiles": self._stats["compiles"], "hits": self._hits[0], "disk_hits": self._stats["disk_hits"],
                "currsize": len(self._binaries)}

    def _binary_of(self, sizes: dict[str, int] | None) -> _Binary:
        """The binary a call with ``sizes`` would use, once specialised (None: the symbolic one)."""
        key = None
        if sizes is not None and self.specialize != "never":
            missing = [s for s in self._size_names if s not in sizes]
            if missing:
                raise TcError(f"sizes: {', '.join(missing)} missing; a specialised binary needs every size")
            key = tuple(int(sizes[s]) for s in self._size_names)
            key = None if 0 in key else key
        b = self._binaries.get(key)
        if b is None:
            b = self._compile(key)
            with self._lock:
                b = self._binaries.setdefault(key, b)
        return b

    def _display_backend(self) -> driver.Backend:
        return self._binary_of(None).backend

    @property
    def ir_module(self):
        import tvm

        f = self._display_backend().func
        return tvm.IRModule({f.attrs["global_symbol"]: f})

    @property
    def script(self) -> str:
        return self._display_backend().func.script()

    @property
    def schedule(self) -> str:
        from ..polyhedral.schedule import dump_schedules

        return dump_schedules(self.frontend.model, self._display_backend().schedules)

    @property
    def isl_ast(self) -> str:
        return self._display_backend().ast_text()

    @property
    def _device(self) -> str:
        return "cuda" if self._kind == "cuda" else "cpu"

    def source_code(self, fmt: str, sizes: dict[str, int] | None = None) -> str:
        """Generated code: ``"ll"`` (LLVM IR of the host/CPU module), ``"asm"``
        (its assembly), ``"c"`` (C from TVM's C code generator, target 'llvm'
        only; the binary that runs is LLVM's), and for target 'cuda' also
        ``"cuda"`` (the kernels' CUDA C) and
        ``"host"`` (TVMScript of the host side, with its kernel launches).
        ``sizes`` (every size): the binary this kernel's mode makes for them
        (built now if it has none yet); None: the symbolic binary."""
        b = self._binary_of(sizes)
        if fmt in ("cuda", "host"):
            if self._kind != "cuda":
                raise TcError(f"{'CUDA source' if fmt == 'cuda' else 'host code'} needs target='cuda'")
            return targets.cuda_source(b.executable) if fmt == "cuda" else targets.host_tir(b.backend.func, self.target)
        if fmt == "c":
            from .. import driver

            return driver.emit(self, "c", sizes)
        if fmt not in ("ll", "asm"):
            raise TcError(f"source_code: unknown format '{fmt}' (ll, asm, c, cuda, host)")
        return b.executable.mod.inspect_source(fmt)

    def __repr__(self) -> str:
        return f"<tcdsl.Kernel {self.frontend.name} target={self._kind} specialize={self.specialize}>"


class _Background:
    """The one thread that compiles the hot size tuples of every ``auto``
    kernel, one at a time, in the order they became hot.  Lowering and isl
    run Python and hold the GIL (TVM's passes and LLVM release it): the
    threads that call kernels then compete with one compile, never with one
    per hot size tuple.  Idle, the thread waits on its queue without the GIL."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, job, *args) -> None:
        self._queue.put((job, args))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="tcdsl-specialize", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            job, args = self._queue.get()
            try:
                job(*args)
            except Exception as e:  # reported as any thread's exception; the next job still runs
                threading.excepthook(threading.ExceptHookArgs((type(e), e, e.__traceback__, threading.current_thread())))


_BACKGROUND = _Background()


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


def _device_arg(a: Arg):
    """Zero-size arrays are passed as TVM tensors: TVM rejects their strides."""
    if 0 in a.shape:
        import tvm

        return tvm.runtime.empty(a.shape, a.dtype, tvm.cpu())
    return a.value
