"""Output memory handed back to later calls (a caching allocator).

A kernel returns new arrays for its outputs.  A large NumPy array is fresh
memory from the operating system every time (glibc maps allocations of 32
MiB and more directly, and unmaps them when they are freed), and the kernel
then pays a page fault and the zeroing of every page it writes: for the
QRNN's fo-pooling at (512, 32, 512), 3 ms of a 10 ms call.  When an output
needs no zero fill (polyhedral/dataflow.py proves every element written
before any read), the kernel takes its memory from this pool instead: the
arrays it returned earlier that nobody references any more.

An array is free when the only reference to it is the pool's own: the
caller dropped it and no view, ``torch.from_numpy`` tensor, memoryview or
DLPack capsule of it is alive (each of those holds a reference to it).  So
reusing it is exactly what freeing and allocating the memory again would
have done, without the page faults.  The pool keeps at most ``keep``
arrays per shape and dtype (the kernel asks for :data:`KEEP` per output: a
loop that still holds the previous results while it makes the next ones
reuses the ones before), for at most
:data:`MAX_SHAPES` shapes, and only arrays of :data:`MIN_BYTES` or more
(smaller ones are recycled quickly by NumPy and malloc).
``options={"reuse_outputs": False}`` turns it off; :meth:`OutputPool.clear`
gives the memory back.
"""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict

import numpy as np

from . import hugepages

MIN_BYTES = 1 << 20
KEEP = 2
MAX_SHAPES = 8

_getrefcount = sys.getrefcount


class OutputPool:
    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._kept: OrderedDict[tuple, list[np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An array of ``shape`` and ``dtype`` with undefined contents."""
        dtype = np.dtype(dtype)
        count = 1
        for s in shape:
            count *= s
        if count * dtype.itemsize < MIN_BYTES:
            return np.empty(shape, dtype)
        key = (shape, dtype)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                kept = self._kept[key] = []
                if len(self._kept) > MAX_SHAPES:
                    self._kept.popitem(last=False)
            else:
                self._kept.move_to_end(key)
            for a in kept:
                # the references: the list, the variable ``a``, the call's argument
                if _getrefcount(a) == 3:
                    return a
            a = hugepages.empty(shape, dtype)
            if len(kept) < self._keep:
                kept.append(a)
            return a

    def clear(self) -> None:
        """Forget every kept array (the memory of those nobody holds is freed)."""
        with self._lock:
            self._kept.clear()

    def kept_bytes(self) -> int:
        with self._lock:
            return sum(a.nbytes for arrays in self._kept.values() for a in arrays)
