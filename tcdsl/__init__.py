"""tcdsl: Tensor Comprehensions with sequential loops, compiled through isl to TVM.

    k = tcdsl.compile(source, entry=None, target="llvm", specialize="never")
    outputs = k(*inputs)

``compile``, ``Kernel`` and ``MappingOptions`` are imported on first use
(they bring in TVM), so that ``import tcdsl`` and the command line's
``--help`` and ``check`` start quickly, and a kernel loaded from the disk
cache (``tcdsl.runtime.kernel.load``) needs no compiler module.
"""
from __future__ import annotations

import os as _os

# TVM's CPU thread pool starts with one worker on small machines unless told
# otherwise; it reads this variable once, before the first parallel launch.
_os.environ.setdefault("TVM_NUM_THREADS", str(_os.cpu_count() or 1))
# After a parallel region TVM's workers yield in a loop this many times before
# they sleep (TVM's default, 300000, keeps them competing with PyTorch's and
# NumPy's threads for tens of milliseconds after a kernel returns).  A few
# hundred microseconds still cover the gaps between the parallel regions of
# one call.  TVM reads the variable once, when its pool starts; a value the
# user set first is kept (docs/api.md, "Threads").
THREAD_POOL_SPIN_COUNT = 1000
_os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", str(THREAD_POOL_SPIN_COUNT))

from . import _tvm_import  # noqa: E402

_tvm_import.install()  # TVM's import would import PyTorch too (2 s): only when the user does

from .errors import TcError, TcSemanticError, TcShapeError, TcSyntaxError  # noqa: E402

__version__ = "0.1.0"
__all__ = ["compile", "autotune", "gradient", "Kernel", "MappingOptions", "TcError", "TcSyntaxError", "TcSemanticError", "TcShapeError", "__version__"]

_LAZY = {"compile": ("api", "compile"), "Kernel": ("dispatch", "Kernel"),
         "MappingOptions": ("options", "MappingOptions"), "autotune": ("tune.tuner", "autotune"),
         "gradient": ("autodiff", "gradient")}


def __getattr__(name: str):
    if name == "torch":  # tcdsl.torch imports PyTorch: only when asked for
        import importlib

        return importlib.import_module(".torch", __name__)
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tcdsl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | {"torch"})
