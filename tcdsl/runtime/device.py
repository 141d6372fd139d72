"""Calling a CUDA binary: moving the data to the GPU and back.

* PyTorch CUDA tensors (DLPack) are used in place; the outputs are PyTorch
  tensors allocated on the same device.  Inputs that are on the CPU (NumPy,
  PyTorch CPU) are copied there.  tvm_ffi launches on PyTorch's current
  stream for that device.
* Otherwise (NumPy arrays, PyTorch CPU tensors) the inputs are copied to GPU
  0 and the outputs copied back into the host arrays the kernel returns (or
  into the ``out=`` arrays).
* The program's temporaries (``scratch``) are allocated here for each call
  and passed after the outputs: by PyTorch's caching allocator on PyTorch
  CUDA tensors -- under ``torch.cuda.graph`` capture that is the graph's own
  memory pool, kept as long as the graph -- else by TVM on the device.

Without a GPU, a call raises ``TcError("no CUDA device ...")``.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import TcError, TcShapeError
from .args import Arg, is_torch


@functools.cache
def cuda_device_present() -> bool:
    """Whether TVM sees CUDA device 0 (False when the CUDA runtime cannot load)."""
    import tvm

    try:
        return bool(tvm.cuda(0).exist)
    except Exception:  # no libcuda: TVM's CUDA device API is not enabled
        return False


def _is_cuda_tensor(x: Any) -> bool:
    return is_torch(x) and x.device.type == "cuda"


def call(fn, size_args: list[int], args: list[Arg], outs: list[Arg], names: list[str],
         allocated: bool, scratch: list[tuple[str, tuple[int, ...]]] = ()) -> list[Any]:
    """Run ``fn`` on the GPU and return the output values.  ``outs`` are the
    host outputs (zeros when ``allocated``, else the ``out=`` arrays);
    ``names`` are the inputs' then the outputs' names, for messages;
    ``scratch`` the (dtype, shape) of each temporary."""
    if not cuda_device_present():
        raise TcError("no CUDA device: this kernel was compiled for target 'cuda', but TVM sees no GPU "
                      "(tvm.cuda(0).exist is false); its CUDA source is in kernel.source_code('cuda')")
    import tvm

    on = next((a.value.device for a in args + outs if _is_cuda_tensor(a.value)), None)
    if on is not None:
        return _call_torch(fn, size_args, args, outs, names, allocated, on, scratch)
    dev = tvm.cuda(0)
    dev_args = [_to_device(a, dev) for a in args]
    dev_outs = [_to_device(a, dev) for a in outs]
    fn(*size_args, *dev_args, *dev_outs, *(tvm.runtime.empty(shape, dtype, dev) for dtype, shape in scratch))
    for a, d in zip(outs, dev_outs):
        if 0 not in a.shape:
            _copy_back(d.numpy(), a.value)
    return [a.value for a in outs]


def host_array(x: Any) -> np.ndarray:
    """A C-contiguous NumPy array of a host argument, of the same shape: a
    0-d array (a scalar input or output) stays 0-d, where
    ``np.ascontiguousarray`` would make it 1-d and the kernel would refuse it
    ("Mismatched ndim")."""
    host = x.detach().cpu().numpy() if is_torch(x) else np.asarray(x)
    return host if host.flags.c_contiguous else np.ascontiguousarray(host).reshape(host.shape)


def _to_device(a: Arg, dev):
    import tvm

    if 0 in a.shape:
        return tvm.runtime.empty(a.shape, a.dtype, dev)
    return tvm.runtime.tensor(host_array(a.value), dev)


def _copy_back(result: np.ndarray, host: Any) -> None:
    if is_torch(host):
        import torch

        host.copy_(torch.from_numpy(result))
    else:
        np.copyto(host, result)


def _call_torch(fn, size_args, args: list[Arg], outs: list[Arg], names: list[str], allocated: bool, on,
                scratch) -> list[Any]:
    """Some tensor is a PyTorch CUDA tensor on device ``on``: everything runs
    there, and allocated outputs are PyTorch tensors on ``on``."""
    import torch
    import tvm

    dev = tvm.cuda(on.index if on.index is not None else torch.cuda.current_device())
    results = [torch.zeros(a.shape, dtype=getattr(torch, a.dtype), device=on) if allocated else a.value
               for a in outs]
    values, back = [], []
    for name, a, x in zip(names, args + outs, [a.value for a in args] + results):
        if _is_cuda_tensor(x) and x.device != on:
            raise TcShapeError(f"argument '{name}': tensor is on {x.device}, but other tensors are on {on}")
        if 0 in a.shape:
            values.append(tvm.runtime.empty(a.shape, a.dtype, dev))
        elif _is_cuda_tensor(x):
            values.append(x)
        else:  # a host array: copy it over; an out= array also back after the call
            t = (x.detach() if is_torch(x) else torch.from_numpy(host_array(x))).to(on)
            if any(x is r for r in results):
                back.append((t, x))
            values.append(t)
    for dtype, shape in scratch:
        values.append(tvm.runtime.empty(shape, dtype, dev) if 0 in shape
                      else torch.empty(shape, dtype=getattr(torch, dtype), device=on))
    fn(*size_args, *values)
    for t, host in back:
        _copy_back(t.cpu().numpy(), host)
    return results
