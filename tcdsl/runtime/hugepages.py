"""Large output arrays in whole transparent huge pages.

A kernel's output of 32 MiB or more is fresh memory from the operating
system at every call (glibc maps such blocks directly and unmaps them when
they are freed; smaller ones it recycles), and the kernel pays a page fault,
and the zeroing of the page, for every page it first writes.  NumPy asks for
huge pages on allocations of 4 MiB and more, but glibc's mapping does not
start on a 2 MiB boundary, so the first and last (up to) 2 MiB of the array
stay in 4 KiB pages: about 500 faults on the 32 MiB output of the QRNN's
fo-pooling at (512, 32, 512), taken inside the kernel by its threads.

:func:`empty` maps :data:`MIN_BYTES` or more with the array starting on a
huge-page boundary and asks for huge pages over all of it (a size that is
not a whole number of them ends in 4 KiB pages): one fault per 2 MiB.
Measured interleaved on 2 busy cores: fo-pooling 8.5 -> 7.3 ms, a 64 MiB
elementwise kernel 11.9 -> 8.2 ms.  (Filling the pages in before the kernel
runs, ``MADV_POPULATE_WRITE``, zeroes them in one thread: slower for the
elementwise kernel, 14.2 ms, and no faster for fo-pooling.  Below 32 MiB
glibc's recycled memory takes no faults at all, which a fresh mapping would:
a 16 MiB output was 0.7 ms against 1.6.)  The memory of an anonymous mapping
reads as zeros, so the same arrays serve outputs that need a zero fill
(:func:`zeros`).  The array keeps the mapping alive (its ``base``); dropping
the array unmaps it, as freeing NumPy's memory does.  Where huge pages
cannot be asked for (no ``madvise`` in :mod:`mmap`, or the system refuses),
it is plain NumPy.
"""
from __future__ import annotations

import mmap

import numpy as np

HUGE_PAGE = 2 << 20
MIN_BYTES = 32 << 20  # what glibc always maps afresh (smaller blocks: see the module docstring)
_ADVICE = getattr(mmap, "MADV_HUGEPAGE", None)
_usable = _ADVICE is not None and hasattr(mmap.mmap, "madvise")


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    count = 1
    for s in shape:
        count *= s
    return count * dtype.itemsize


def _mapped(shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> np.ndarray | None:
    global _usable
    try:
        m = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        raw = np.frombuffer(m, np.uint8)
        offset = -raw.__array_interface__["data"][0] % HUGE_PAGE
        m.madvise(_ADVICE, offset, -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE)
    except (OSError, ValueError):  # no huge pages here: ask no more
        _usable = False
        return None
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


def empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An array of ``shape`` and ``dtype``, its contents undefined (zeros when
    it is in huge pages)."""
    dtype = np.dtype(dtype)
    nbytes = _nbytes(shape, dtype)
    if _usable and nbytes >= MIN_BYTES:
        a = _mapped(tuple(shape), dtype, nbytes)
        if a is not None:
            return a
    return np.empty(shape, dtype)


def zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An array of zeros (in huge pages when it is large)."""
    dtype = np.dtype(dtype)
    nbytes = _nbytes(shape, dtype)
    if _usable and nbytes >= MIN_BYTES:
        a = _mapped(tuple(shape), dtype, nbytes)
        if a is not None:
            return a
    return np.zeros(shape, dtype)


def in_huge_pages(a: np.ndarray) -> bool:
    """``a`` was made by :func:`empty` or :func:`zeros` in a mapping of its own
    that starts on a huge-page boundary."""
    b = a
    while isinstance(b, np.ndarray):
        b = b.base
    return isinstance(b, memoryview) and isinstance(b.obj, mmap.mmap) and \
        a.__array_interface__["data"][0] % HUGE_PAGE == 0
