"""TVM targets and building a PrimFunc into a callable function."""
from __future__ import annotations

import functools
import threading

import tvm
from tvm import tirx

from ..errors import TcError

_build_lock = threading.Lock()


@functools.cache
def host_cpu() -> str:
    return tvm.target.codegen.llvm_get_system_cpu()


def make_target(target) -> tvm.target.Target:
    """``"llvm"`` means the host CPU model (plain ``llvm`` emits SSE-only code)."""
    if isinstance(target, tvm.target.Target):
        return target
    if target in ("llvm", "cpu"):
        return tvm.target.Target({"kind": "llvm", "mcpu": host_cpu()})
    if target == "cuda":
        return tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host={"kind": "llvm", "mcpu": host_cpu()})
    raise TcError(f"unknown target '{target}'; use 'llvm' or 'cuda'")


def target_kind(target: tvm.target.Target) -> str:
    return str(target.kind.name)


def build(func: tirx.PrimFunc, target: tvm.target.Target):
    """Compile one PrimFunc; returns the ``tvm.runtime.Executable``."""
    mod = tvm.IRModule({func.attrs["global_symbol"]: func})
    with _build_lock:  # LLVM codegen is not re-entrant across threads in every build
        return tvm.compile(mod, target=target)
