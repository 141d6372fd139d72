"""Facts about the machine that the generated CPU code depends on.

The CPU model (LLVM's ``-mcpu``), whether it has AVX-512 (the register
tiles' defaults), and the number of threads the parallel loops are cut for
(``TVM_NUM_THREADS``, which ``import tcdsl`` sets to the number of cores
unless it is set).  The code generator reads them here, and the disk cache
key (``options.Options.cache_fields``) holds every one of them, so a binary
made for one machine or thread count is never loaded for another.
"""
from __future__ import annotations

import functools
import os


@functools.cache
def cpu() -> str:
    """LLVM's name of the host CPU (``-mcpu``)."""
    import tvm

    return tvm.target.codegen.llvm_get_system_cpu()


@functools.cache
def avx512() -> bool:
    """The host CPU has AVX-512 (512-bit vectors, 32 vector registers)."""
    import tvm

    try:
        with tvm.target.Target({"kind": "llvm", "mcpu": cpu()}):
            return bool(tvm.target.codegen.llvm_cpu_has_features("avx512f"))
    except Exception:  # an LLVM without the query: assume not
        return False


def threads() -> int:
    """The threads of TVM's CPU pool: ``TVM_NUM_THREADS``, else the number of cores."""
    env = os.environ.get("TVM_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)
