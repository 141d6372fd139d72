"""tcdsl: Tensor Comprehensions with sequential loops, compiled through isl to TVM.

    k = tcdsl.compile(source, entry=None, target="llvm", specialize="never")
    outputs = k(*inputs)
"""
from __future__ import annotations

import os as _os

# TVM's CPU thread pool starts with one worker on small machines unless told
# otherwise; it reads this variable once, before the first parallel launch.
_os.environ.setdefault("TVM_NUM_THREADS", str(_os.cpu_count() or 1))

from .errors import TcError, TcSemanticError, TcShapeError, TcSyntaxError  # noqa: E402
from .runtime.kernel import Kernel  # noqa: E402
from .api import compile  # noqa: E402
from .options import MappingOptions  # noqa: E402
from .autodiff import gradient  # noqa: E402


def __getattr__(name: str):
    if name == "torch":  # tcdsl.torch imports PyTorch: only when asked for
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'tcdsl' has no attribute {name!r}")


__version__ = "0.1.0"
__all__ = ["compile", "gradient", "Kernel", "MappingOptions", "TcError", "TcSyntaxError", "TcSemanticError", "TcShapeError", "__version__"]
