"""The callbacks of checked mode's kernels (codegen/checks.py), registered with TVM.

A checked kernel whose non-affine index is out of range calls the global
function ``CALLBACK.<k>`` (``k``: the guard's number in its statement) with
the statement's messages joined by :data:`SEPARATOR` and the extents; the
callback raises the ``TcError`` that names the index, which TVM carries back
to the caller of the kernel.  Registered when the runtime is imported, so a
kernel loaded from the disk cache finds them.
"""
from __future__ import annotations

import tvm_ffi

from ..errors import TcError

CALLBACK = "tcdsl.index_out_of_range"
CALLBACKS = 64  # guards per statement with their own message (later ones share a vaguer one)
SEPARATOR = "\x01"


def _raiser(k: int | None):
    def index_out_of_range(messages: str, *extents) -> int:
        parts = messages.split(SEPARATOR)
        if k is not None and k < len(extents) and 2 * k + 1 < len(parts) and extents[k] is not None:
            raise TcError(f"{parts[2 * k]}{extents[k]}{parts[2 * k + 1]}")
        raise TcError("a non-affine or indirect index is out of bounds (checked mode)")
    return index_out_of_range


for _k in range(CALLBACKS):
    tvm_ffi.register_global_func(f"{CALLBACK}.{_k}", _raiser(_k), override=True)
tvm_ffi.register_global_func(f"{CALLBACK}.more", _raiser(None), override=True)
tvm_ffi.register_error(TcError)
