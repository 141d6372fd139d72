"""``tcdsl.Kernel``: which binary serves a call, and making it.

A :class:`Kernel` is the runtime's ``CompiledKernel`` (runtime/kernel.py:
checks, outputs, the call) with the compiler behind it, in the spirit of
JAX's dispatch or Numba's ``Dispatcher``: it keeps a binary per size tuple
(None: the symbolic one), and its ``specialize`` mode decides which of the
driver's orders makes one, and when:

* ``never``: the symbolic binary (``driver.never``), built at ``compile()``;
* ``after-scheduling``: one symbolic schedule, then a binary per size tuple
  (``driver.after_scheduling``) at its first call;
* ``before-scheduling``: a schedule and binary per size tuple
  (``driver.before_scheduling``) at its first call;
* ``auto``: the symbolic binary serves every call; a size tuple seen
  ``auto_threshold`` times whose calls have taken ``auto_payback`` times a
  build is specialised (after scheduling) by one background thread.

Before building, the kernel looks in the disk cache (runtime/cache.py) under
the key of :func:`key_fields`; a build is stored there with the signature
the runtime needs to call it alone.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import queue
import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from . import driver
from .codegen import targets
from .codegen.signature import signature as runtime_signature
from .errors import TcError
from .options import Options, parse as parse_options
from .polyhedral.bounds import check_call_sizes
from .polyhedral.dataflow import overwritten_outputs
from .runtime import cache
from .runtime.kernel import Binary, CompiledKernel
from .syntax.printer import to_tc

# auto: the assumed cost of a specialised build when the symbolic binary came
# from the disk cache (a build of the Elman RNN takes about 1 s here).
_COMPILE_ESTIMATE = 0.5


class _Binary(Binary):
    """A runtime binary with what made it: the backend (schedules, TIR) and
    the executable.  A binary read from the disk cache has only its
    function: the backend and an in-memory executable are rebuilt by
    ``remake`` the first time something asks for them (the inspection views)."""

    def __init__(self, backend: driver.Backend, target, executable=None, library=None):
        """``library``: the shared library the build was just written to (the
        disk cache), whose function is used instead of the executable's: the
        executable's would be compiled by LLVM's JIT, a second code generation
        of the module after the one that wrote the library."""
        self._backend = backend
        self._executable = executable if executable is not None else targets.build(backend.func, target)
        symbol = backend.func.attrs["global_symbol"]
        module = self._executable if library is None else library
        super().__init__(lambda: module[symbol], backend.signature.sizes)
        self.target = target
        self.from_disk = False

    @classmethod
    def loaded(cls, module, function: str, size_params, target, remake) -> "_Binary":
        b = cls.__new__(cls)
        Binary.__init__(b, lambda: module[function], size_params)
        b._backend = b._executable = None
        b.module, b.target, b.from_disk = module, target, True
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


class Kernel(CompiledKernel):
    """A compiled TC function.  Call it with the inputs, in the ``def``'s order.

    Read-only views of what was made: :attr:`ir_module` (the TVM IRModule),
    :attr:`script` (its TVMScript text), :attr:`schedule` (the isl schedule
    trees), :attr:`isl_ast` (the isl ASTs, as C)."""

    def __init__(self, fe: driver.Frontend, target: Any = "llvm", specialize: str = "never",
                 sizes: dict[str, int] | None = None, options: Options | dict | None = None, tuned=None):
        if specialize not in driver.SPECIALIZE_MODES:
            raise TcError(f"unknown specialize mode '{specialize}'; choose one of "
                          f"{', '.join(driver.SPECIALIZE_MODES)}")
        self.frontend = fe
        self.target = targets.make_target(target)
        self._kind = targets.target_kind(self.target)
        if self._kind not in ("llvm", "cuda"):
            raise TcError(f"target '{self._kind}' is not supported; use 'llvm' or 'cuda'")
        self.specialize = specialize
        self.options = parse_options(options)
        # options from the tuning database (tune/reuse.py): the symbolic
        # binary's are ``options``; ``_options_at`` gives a specialised one's
        self._tuned = tuned
        self._symbolic_choice = None
        self._options_origin = "given by options=" if self.options.given else "defaults"
        fixed = self._check_fixed(sizes or {})
        overwritten = overwritten_outputs(fe.model) if self._kind == "llvm" else frozenset()
        super().__init__(runtime_signature(fe.checked, fe.ranges, self._kind, overwritten), fixed,
                         reuse_outputs=self.options.runtime.reuse_outputs,
                         at_zero=lambda sizes, shapes: check_call_sizes(fe.ranges, sizes, shapes))
        self._auto_threshold = self.options.dispatch.auto_threshold
        self._auto_payback = self.options.dispatch.auto_payback
        self._spent: Counter = Counter()  # auto: seconds of calls per size tuple, until it is hot
        self._compile_estimate = _COMPILE_ESTIMATE
        self._binaries: dict[tuple | str | None, _Binary] = {}  # "empty": calls with a size of 0
        self._pending: set[tuple] = set()  # auto: size tuples handed to the background compiler
        self._in_flight = 0  # of those, how many it has not finished (built or failed)
        self._seen: Counter = Counter()
        self._stats = Counter(compiles=0, disk_hits=0, rejected=0)
        self.measured: dict[tuple, dict] = {}  # size tuple -> the times of its specialised and symbolic binaries
        self._symbolic_schedules = None
        self._disk_base: dict | None = None
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
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise TcError(f"sizes: '{k}' must be a non-negative integer, got {v!r}")
            if v >= 2**31:
                raise TcError(f"sizes: '{k}' = {v} does not fit in an index: sizes are int32, at most {2**31 - 1}")
        return {k: int(v) for k, v in sizes.items()}

    # ------------------------------------------------------------ compiling
    def backend(self, sizes: dict[str, int] | None = None) -> driver.Backend:
        """Run the size-dependent stages for ``sizes`` (None: the symbolic ones),
        in the order of the kernel's mode."""
        fe, kind, options = self.frontend, self._kind, self.options
        if sizes is None and self._symbolic_schedules is None:
            backend = driver.never(fe, self.fixed, kind, options)
            self._symbolic_schedules = backend.schedules
            return backend
        if sizes is None:  # (made again for the inspection views of a binary from the disk cache)
            return driver.after_scheduling(fe, self._symbolic_schedules, self.fixed, kind, options)
        fixed = {**self.fixed, **sizes}
        if self.specialize == "before-scheduling":
            return driver.before_scheduling(fe, fixed, kind, self._options_at(sizes))
        if self._symbolic_schedules is None:
            self._symbolic_schedules = driver.schedule_for(driver.model_for(fe, options.schedule), self.fixed, kind,
                                                           options.schedule)
        return driver.after_scheduling(fe, self._symbolic_schedules, fixed, kind, self._options_at(sizes))

    def _options_at(self, sizes: dict[str, int] | None) -> Options:
        """The options of the binary for ``sizes`` (None: the symbolic one)."""
        if self._tuned is None or sizes is None or self.specialize == "never":
            return self.options
        from .tune.reuse import per_size_options

        return parse_options(per_size_options(self, {**self.fixed, **sizes}))

    def options_for(self, **sizes: int):
        """``(options, origin)``: the :class:`tcdsl.MappingOptions` a call with
        these sizes runs with, and where they come from, in words: ``"tuned at
        T=64,B=32"``, ``"reused from T=64,B=32"``, ``"defaults"``, ... (see
        docs/tuning.md)."""
        from .tune.reuse import options_for

        return options_for(self, sizes)

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
        backend = self.backend(sizes)
        try:
            executable = targets.build(backend.func, self.target)
        except targets.TvmFailure:
            if not self.options.schedule.split_selects:
                raise
            # TVM's passes failed on this code (its simplifier folded a floor division by a
            # pyramid's reflected row index to one by 0, a case of split selects' pieces): the
            # kernel is built without the split, from then on
            self.options = dataclasses.replace(
                self.options, schedule=dataclasses.replace(self.options.schedule, split_selects=False))
            self._symbolic_schedules = None
            backend = self.backend(sizes)
            executable = targets.build(backend.func, self.target)
        library = None
        if disk is not None:
            fixed, size_params = {**self.fixed, **(sizes or {})}, tuple(backend.signature.sizes)
            path = cache.store(*disk, lambda path: targets.export(executable, path),
                               backend.func.attrs["global_symbol"], size_params,
                               {k: v for k, v in fixed.items() if k not in size_params}, self.signature.to_json())
            library = cache.load_library(path) if path is not None else None
        b = _Binary(backend, self.target, executable, library)
        with self._lock:
            self._stats["compiles"] += 1
        return b

    def _disk_key(self, sizes: dict[str, int] | None) -> tuple[str, dict] | None:
        """(key, key fields) of the disk cache entry for ``sizes``, or None when the disk cache is off."""
        if not cache.enabled(self.options.dispatch.disk_cache) or (self._kind == "cuda" and not targets.cuda_device_present()):
            # a CUDA library cannot be loaded back where there is no GPU: nothing to reuse
            return None
        if self._disk_base is None:
            self._disk_base = key_fields(
                program=to_tc(self.frontend.checked.node), entry=self.frontend.name, pipeline="never",
                fixed=self.fixed, sizes=None, target=str(self.target), options=self.options.cache_fields(self._kind))
        if sizes is None:
            fields = self._disk_base
        else:
            pipeline = "before-scheduling" if self.specialize == "before-scheduling" else "after-scheduling"
            fields = {**self._disk_base, "pipeline": pipeline, "sizes": {k: int(v) for k, v in sorted(sizes.items())}}
            if self._tuned is not None:  # this size's own options (tune/reuse.py)
                fields["options"] = json.loads(json.dumps(self._options_at(sizes).cache_fields(self._kind),
                                                          sort_keys=True, default=repr))
        return cache.key_of(fields), fields

    def _binary_for(self, sizes: dict[str, int]) -> tuple[_Binary, tuple, bool]:
        """The binary for these sizes, their size tuple, and whether later
        calls with them may go straight to that binary (through a plan)."""
        key = tuple(sizes[s] for s in self._size_names)
        if (0 in key or self._checks.as_written(sizes)) and self._kind == "llvm":
            return self._at_empty_size(), key, False
        if self.specialize == "never":
            self._hits[0] += 1
            return self._binaries[None], key, True
        # specialising assumes sizes >= 1: a 0 switched off every statement; the symbolic binary serves
        lookup = None if 0 in key else key
        b = self._binaries.get(lookup)
        if b is not None:
            self._hits[0] += 1
            return b, key, lookup is not None and lookup not in self._on_trial
        if self.specialize == "auto" and lookup is not None:
            return self._auto(key)
        b = self._binaries[lookup] = self._compile(lookup)
        if lookup is not None and self._measures():
            self._on_trial.add(lookup)  # measured against the symbolic binary at this call (_trial)
            return b, key, False
        return b, key, lookup is not None

    def _at_empty_size(self) -> _Binary:
        """The binary of calls with a size of 0: the program as written, none
        of its rewrites (hoisting, padded copies, split selects, factors,
        chains, transposed copies, parity classes, in-place temporaries),
        with symbolic sizes.  The rewrites, and the code generator's omission
        of conditions that sizes >= 1 imply, assume sizes of at least 1: a
        split select's edge piece ``y(0, j) = 1`` ran at ``N = 0``, and a
        padded copy of a filter of ``K = 0`` taps wrote before its buffer.
        The program as written is what ``bounds.check_call_sizes`` proves for
        the call's sizes (``at_zero``), before it runs."""
        b = self._binaries.get("empty")
        if b is not None:
            self._hits[0] += 1
            return b
        fe, options = self.frontend, self.options
        plain = dataclasses.replace(
            options,
            frontend=dataclasses.replace(options.frontend, hoist=False, gather=False, transpose=False, pad=False,
                                         parity=False, inplace=False, factor=False, chain=False,
                                         circular=False),
            schedule=dataclasses.replace(options.schedule, split_selects=False))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the program's warnings were given when it was compiled
            written = driver.frontend(fe.source, fe.name, plain.frontend, self._kind, fixed=self.fixed)
            b = _Binary(driver.never(written, self.fixed, self._kind, plain), self.target)
        with self._lock:
            self._stats["compiles"] += 1
            return self._binaries.setdefault("empty", b)

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
                    if self._measures():
                        self._on_trial.add(key)  # measured at this call, like one built here
                return b, key, key not in self._on_trial
        if start:
            _BACKGROUND.submit(self._specialize_in_background, key)
        self._hits[0] += 1
        return self._binaries[None], key, hot

    def _specialize_in_background(self, key: tuple) -> None:
        try:
            b = self._compile(key)
            with self._lock:
                self._binaries[key] = b
                if self._measures():
                    self._on_trial.add(key)  # the next call measures b against the symbolic binary
                self._fast.drop(key)  # the next call makes a plan with b
        except Exception as e:  # the symbolic binary keeps serving these sizes
            warnings.warn(f"tcdsl: specialising {self.frontend.name} for sizes {key} failed ({e}); "
                          f"the symbolic kernel keeps serving them", RuntimeWarning)
        finally:
            with self._lock:
                self._in_flight -= 1

    # ------------------------------------------------------ measured dispatch
    def _measures(self) -> bool:
        return self.options.dispatch.measure_specialized and self._kind == "llvm"

    def _trial(self, key: tuple, b, sizes: dict[str, int], args, shapes) -> _Binary:
        """A specialised binary serves its sizes only if it has been measured
        at least as fast as the symbolic binary on a real call's arguments;
        else the symbolic binary serves them (``cache_info()["rejected"]``,
        the times in ``k.measured``)."""
        with self._lock:
            if key not in self._on_trial:  # another call decided meanwhile
                return self._binaries.get(key, b)
            self._on_trial.discard(key)
        symbolic = self._binaries.get(None)
        if symbolic is None:
            symbolic = self._binary_of(None)
        if symbolic is b:
            return b
        specialised_s, symbolic_s = self.time_binaries([b, symbolic], sizes, args, shapes)
        self.measured[key] = {"specialized_s": specialised_s, "symbolic_s": symbolic_s,
                              "chosen": "specialized" if specialised_s <= symbolic_s else "symbolic"}
        if specialised_s <= symbolic_s:
            return b
        with self._lock:
            self._binaries[key] = symbolic
            self._stats["rejected"] += 1
            self._fast.drop(key)
        return symbolic

    # ------------------------------------------------- the runtime's hooks
    def _unsettled(self, key: tuple, seconds: float) -> None:
        if self.specialize == "auto":  # counted towards the payback of a specialised build
            self._spent[key] += seconds

    def _current(self, key: tuple, b: Binary) -> bool:
        return self._binaries.get(key, b) is b

    # ------------------------------------------------------------ inspection
    def cache_info(self) -> dict[str, int]:
        """Counts like ``functools.lru_cache``'s: binaries built (``compiles``),
        calls served by an existing binary (``hits``), binaries loaded from
        the on-disk cache (``disk_hits``), binaries held (``currsize``), and
        specialised binaries measured slower than the symbolic one on their
        sizes and therefore not used (``rejected``)."""
        return {"compiles": self._stats["compiles"], "hits": self._hits[0], "disk_hits": self._stats["disk_hits"],
                "currsize": len({id(b) for b in self._binaries.values()}), "rejected": self._stats["rejected"]}

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
        b = self._display_backend()
        return driver.dump_schedules(b.model, b.schedules)

    @property
    def isl_ast(self) -> str:
        return self._display_backend().ast_text()

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


# ---------------------------------------------------------- the disk cache
# Bump when the meaning of a key field changes.
KEY_FORMAT = 2


def key_fields(*, program: str, entry: str, pipeline: str, fixed: dict[str, int], sizes: dict[str, int] | None,
               target: str, options: dict[str, Any]) -> dict[str, Any]:
    """The disk cache key fields of one binary.  ``program`` is the normalised
    text of the ``def`` (``to_tc``), ``pipeline`` the order of stages that
    made it (``never``, ``after-scheduling`` or ``before-scheduling``;
    ``auto`` makes the same binaries as ``never`` and ``after-scheduling``
    and shares their entries), ``fixed`` the sizes fixed at compile time
    (``sizes=``), ``sizes`` the size tuple of a per-size binary (None for the
    symbolic one), ``options`` what of the options and the host decides the
    code (``Options.cache_fields``: the mapping, the CPU model, the thread
    count)."""
    import tvm

    from . import __version__

    return {
        "format": KEY_FORMAT,
        "program": program,
        "entry": entry,
        "pipeline": pipeline,
        "fixed": {k: int(v) for k, v in sorted(fixed.items())},
        "sizes": None if sizes is None else {k: int(v) for k, v in sorted(sizes.items())},
        "options": json.loads(json.dumps(options, sort_keys=True, default=repr)),
        "target": target,
        "tcdsl": __version__,
        "tvm": tvm.__version__,
        "compiler": compiler_fingerprint(),
    }


@functools.cache
def compiler_fingerprint() -> str:
    """sha256 of tcdsl's own source files: a change to the compiler makes new
    keys even when ``tcdsl.__version__`` stays the same (a development tree)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()
