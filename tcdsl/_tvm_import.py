"""Import TVM without importing PyTorch.

``tvm_ffi`` and ``tvm.relax`` import PyTorch, when it is installed, as soon
as they are imported (for DLPack helpers that tcdsl does not use): about 2 s
of every process's start, and of every ``tcdsl`` command, for users who never
touch PyTorch.  :func:`install` puts a finder first on ``sys.meta_path`` that
runs the first import of ``tvm`` or ``tvm_ffi`` with ``import torch`` failing
(``sys.modules["torch"] = None``) and restored right after, unless PyTorch
was imported before.  PyTorch imported later works with TVM as usual: its
tensors cross into kernels through ``__dlpack_c_exchange_api__`` (torch 2.13
has it natively) or ``__dlpack__``, both looked up at each call; only the
helpers that ``tvm.relax.BasePyModule`` and ``tvm_ffi.use_torch_stream`` keep
at import stay off, and tcdsl uses neither.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

_MODULES = ("tvm", "tvm_ffi")


class _WithoutTorchLoader(importlib.abc.Loader):
    """Runs ``inner``'s module with ``import torch`` failing, then puts
    ``inner`` back as the module's loader."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        sys.modules["torch"] = None  # type: ignore[assignment]
        try:
            self.inner.exec_module(module)
        finally:
            if "torch" in sys.modules and sys.modules["torch"] is None:
                del sys.modules["torch"]
            module.__loader__ = self.inner
            if module.__spec__ is not None:
                module.__spec__.loader = self.inner


class _TvmWithoutTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        # "torch" in sys.modules: imported already, or blocked by an outer import of tvm
        if name not in _MODULES or "torch" in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _WithoutTorchLoader(spec.loader)
        return spec


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once); a no-op once TVM or
    PyTorch is imported."""
    if any(m in sys.modules for m in _MODULES + ("torch",)):
        return
    if not any(isinstance(f, _TvmWithoutTorch) for f in sys.meta_path):
        sys.meta_path.insert(0, _TvmWithoutTorch())
