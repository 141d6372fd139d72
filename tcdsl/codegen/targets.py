"""TVM targets and building a PrimFunc into a callable function.

CUDA (see docs/cuda.md): the target is ``{"kind": "cuda", "arch": ...}`` with
the host CPU as its host (the arch of GPU 0 when there is one, else
``sm_90``).  Before a CUDA build, :func:`verify_memory` checks that no buffer
is touched outside thread bindings (``tvm.compile`` does not report that; it
silently builds a host-only module).  Builds run with
``TVM_CUDA_COMPILE_MODE=nvcc`` and ``TVM_CUDA_NVCC_NO_FAST_MATH=1``: TVM's
default (NVRTC) and nvcc's ``--use_fast_math`` both swap ``tanhf``, ``expf``,
division, ... for approximations that miss NumPy by more than the tests
allow.  Without a GPU, ``tvm.compile`` only generates CUDA source;
:func:`nvcc_compile` compiles it with nvcc to check it.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading

import tvm
from tvm import tirx
from tvm.tirx import compilation_pipeline

from .. import host
from ..errors import InternalError, TcError
from ..runtime.device import cuda_device_present
from . import scratch, strided, vecmath

_build_lock = threading.Lock()

# TVM's default TIR pipeline for CPU builds, then tcdsl's passes over the lowered code:
# strided vector loads as contiguous loads and a shuffle (strided.py), libm vector calls
# as libmvec's (vecmath.py)
PIPELINE = "tcdsl_cpu"


def _cpu_pipeline():
    lower, host_passes, device = compilation_pipeline.get_tir_pipeline("default")
    return (tvm.transform.Sequential([vecmath.intrinsics_in, lower, strided.strided_loads, vecmath.vector_math]),
            host_passes, device)


compilation_pipeline.register_tir_pipeline(PIPELINE, _cpu_pipeline)


def make_target(target) -> tvm.target.Target:
    """``"llvm"`` means the host CPU model (plain ``llvm`` emits SSE-only code).
    With AVX-512, LLVM is told not to prefer 256-bit vectors, so that the
    16-lane vectors of the register tiles (codegen/cpu.py) use zmm registers
    instead of pairs of ymm.  LLVM runs at -O2: the code is vectorized in TIR
    already, and -O3 only unrolled the remainder loops (up to 7 copies of a
    tanh tail), which cost compile time and no run time."""
    if isinstance(target, tvm.target.Target):
        return target
    if target in ("llvm", "cpu"):
        if host.avx512():
            return tvm.target.Target({"kind": "llvm", "mcpu": host.cpu(), "mattr": ["-prefer-256-bit"],
                                      "opt-level": 2})
        return tvm.target.Target({"kind": "llvm", "mcpu": host.cpu(), "opt-level": 2})
    if target == "cuda":
        return tvm.target.Target({"kind": "cuda", "arch": cuda_arch()}, host={"kind": "llvm", "mcpu": host.cpu()})
    raise TcError(f"unknown target '{target}'; use 'llvm' or 'cuda'")


def target_kind(target: tvm.target.Target) -> str:
    return str(target.kind.name)


TvmFailure = tvm.error.InternalError  # a check inside TVM's passes failed


def build(func: tirx.PrimFunc, target: tvm.target.Target):
    """Compile one PrimFunc; returns the ``tvm.runtime.Executable``."""
    func = scratch.scratch_bindings(func, cpu=target_kind(target) != "cuda")
    mod = tvm.IRModule({func.attrs["global_symbol"]: func})
    if target_kind(target) == "cuda":
        verify_memory(mod, target)
        with _build_lock, cuda_compile_env(), tvm.transform.PassContext(disabled_pass=_DISABLED_PASSES):
            return tvm.compile(mod, target=target)
    # LLVM codegen is not re-entrant across threads in every build.  TIR's
    # common subexpression elimination is left to LLVM (its CSE), which is
    # cheaper on the unrolled register tiles.
    config = {"tirx.disable_cse_tir": True}
    with _build_lock, vecmath.vectorizable():
        try:
            with tvm.transform.PassContext(disabled_pass=_DISABLED_PASSES, config=config):
                return tvm.compile(mod, target=target, tir_pipeline=PIPELINE)
        except tvm.error.InternalError as e:
            # TVM's vectorizer rejects some nests of formulas' ``Let`` bindings
            # (``tanh(sigmoid(x)) * 0.5`` of a loop-invariant ``x`` in a vector
            # reduction); the kernel is then built with scalar loops rather than
            # not at all.
            if "Let cannot bind the same var" not in str(e):
                raise
            with tvm.transform.PassContext(disabled_pass=_DISABLED_PASSES,
                                           config={**config, "tirx.disable_vectorize": True}):
                return tvm.compile(mod, target=target, tir_pipeline=PIPELINE)


def export(executable, path: str) -> None:
    """Write a CPU build as a shared library (the disk cache's entries)."""
    with _build_lock:  # export re-enters LLVM code generation
        options = vecmath.link_options()
        executable.export_library(path, **({"options": options} if options else {}))


# s_tir.CompactBufferAllocation raised "Divide by zero" (its region estimate) on a
# temporary indexed through skewed isl loops (tests/test_fuzz.py); our temporaries
# are allocated at their full extents and need no compaction.
# s_tir.HoistIfThenElse (TVM 0.27) drops or swaps branches when it hoists an
# ``if`` whose branch holds another ``if`` out of a loop: ``for c2 { if c1 == 2
# { A } else { if c1 == 0 { B } } }`` loses ``A`` (the edge pieces of a sum
# padded with a non-zero value, polyhedral/split.py, lost their terms;
# tests/test_cpu_codegen.py).  isl's AST already puts conditions outside the
# loops they do not depend on; without the pass, the 195 programs of
# benchmarks/programs.py lower the same but for conditions on sizes hoisted
# over a few iterations.
_DISABLED_PASSES = ["s_tir.CompactBufferAllocation", "s_tir.HoistIfThenElse"]


# ------------------------------------------------------------------ CUDA
DEFAULT_CUDA_ARCH = "sm_90"


@functools.cache
def cuda_arch() -> str:
    """``sm_XY`` of GPU 0, or ``sm_90`` without a GPU."""
    if cuda_device_present():
        version = str(tvm.cuda(0).compute_version)  # e.g. "9.0"
        major, _, minor = version.partition(".")
        if major.isdigit() and minor.isdigit():
            return f"sm_{major}{minor}"
    return DEFAULT_CUDA_ARCH


@contextlib.contextmanager
def cuda_compile_env():
    """nvcc without fast math for the CUDA builds made inside (see the module docstring)."""
    wanted = {"TVM_CUDA_COMPILE_MODE": "nvcc", "TVM_CUDA_NVCC_NO_FAST_MATH": "1"}
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def verify_memory(mod: tvm.IRModule, target: tvm.target.Target) -> None:
    """TVM's VerifyMemory on the module bound to ``target``: every buffer
    access must be inside thread bindings.  A failure is a tcdsl bug (the
    CUDA mapping left a statement on the host)."""
    check = tvm.transform.Sequential([
        tvm.tirx.transform.BindTarget(target),
        tvm.s_tir.transform.LowerOpaqueBlock(),  # thread-bound For loops -> thread_extent attributes
        tvm.tirx.transform.VerifyMemory(),
    ])
    try:
        check(mod)
    except Exception as e:  # tvm raises RuntimeError/TVMError with the list of variables
        lines = [ln.strip() for ln in str(e).splitlines() if "directly accessed by host memory" in ln]
        names = sorted({ln.split("`")[1] for ln in lines if ln.count("`") >= 2})
        raise InternalError(
            "CUDA mapping left buffer accesses on the host, outside thread bindings "
            f"({', '.join(names) or 'see below'}); this is a tcdsl bug.\n{e}") from None


def cuda_source(executable) -> str:
    """The CUDA C source of a CUDA build (all its kernels)."""
    return "\n".join(m.inspect_source() for m in executable.mod.imports if m.kind == "cuda")


def host_tir(func: tirx.PrimFunc, target: tvm.target.Target) -> str:
    """TVMScript of the host side of a CUDA build after TVM's host/device
    split: the host loops and the ``T.call_ffi_kernel`` launches in them."""
    from tvm.tirx.build import split_host_device_mods

    func = scratch.scratch_bindings(func, cpu=False)
    mod = tvm.IRModule({func.attrs["global_symbol"]: func})
    mod = tvm.tirx.transform.BindTarget(target.with_host(target.host))(mod)
    pipeline, _, _ = tvm.tirx.get_default_tir_pipeline(target)
    with _build_lock, tvm.transform.PassContext(disabled_pass=_DISABLED_PASSES):
        host_mod, _ = split_host_device_mods(pipeline(mod))
    return host_mod.script()


def nvcc_compile(source: str, target: tvm.target.Target, target_format: str = "fatbin") -> bytes:
    """Compile CUDA source with nvcc for ``target``'s arch, as a CUDA build
    does it on a GPU machine (no fast math).  Needs nvcc, not a GPU."""
    from tvm.support import nvcc

    with cuda_compile_env(), target:
        return nvcc.compile_cuda(source, target_format=target_format, compiler="nvcc")
