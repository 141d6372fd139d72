"""Large outputs in whole transparent huge pages (tcdsl/runtime/hugepages.py):
aligned on 2 MiB, zeros where asked, huge pages where the system gives
them, unmapped when dropped, and the kernels' results unchanged."""
from __future__ import annotations

import gc
import mmap
import pathlib
import sys

import numpy as np
import pytest

import tcdsl
from tcdsl.runtime import hugepages
from tcdsl.runtime.hugepages import HUGE_PAGE, MIN_BYTES

from test_cpu_codegen import FO_POOL, _fo_pool_reference

LINUX = sys.platform.startswith("linux")
needs_huge_pages = pytest.mark.skipif(not LINUX or not hasattr(mmap, "MADV_HUGEPAGE"),
                                      reason="no madvise(MADV_HUGEPAGE) here")


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@needs_huge_pages
@pytest.mark.parametrize("make", [hugepages.empty, hugepages.zeros])
@pytest.mark.parametrize("shape,dtype", [((1 << 23,), "float32"), ((3, 7, 400003), "float32"), ((5, 838861), "float64")])
def test_large_arrays_start_on_a_huge_page(make, shape, dtype):
    a = make(shape, dtype)
    assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous and a.flags.writeable
    assert a.nbytes >= MIN_BYTES and _address(a) % HUGE_PAGE == 0 and hugepages.in_huge_pages(a)
    if make is hugepages.zeros:
        assert not a.any()
    a[...] = 1
    assert a.sum() == a.size


@pytest.mark.parametrize("make", [hugepages.empty, hugepages.zeros])
def test_small_arrays_are_numpys(make):
    a = make((MIN_BYTES // 4 - 1,), np.float32)
    assert a.shape == (MIN_BYTES // 4 - 1,) and not hugepages.in_huge_pages(a)
    if make is hugepages.zeros:
        assert not a.any()


def _mapped_at(addr: int) -> bool:
    """Some mapping of /proc/self/maps holds the byte at ``addr``."""
    for line in pathlib.Path("/proc/self/maps").read_text().splitlines():
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo <= addr < hi:
            return True
    return False


@needs_huge_pages
@pytest.mark.skipif(not LINUX, reason="reads /proc/self/maps")
def test_dropping_the_array_unmaps_it():
    """Each array's own mapping goes when the last reference to it does (the
    addresses are checked, not the number of mappings: other threads of the
    process map and unmap memory meanwhile)."""
    arrays = [hugepages.empty((MIN_BYTES,), np.uint8) for _ in range(20)]
    addrs = [_address(a) for a in arrays]
    assert all(_mapped_at(x) for x in addrs)
    views = arrays[0][1:], arrays[1].reshape(2, -1)
    del arrays
    gc.collect()
    assert _mapped_at(addrs[0]) and _mapped_at(addrs[1])  # held through the views
    assert sum(_mapped_at(x) for x in addrs[2:]) <= 1  # (an address may be mapped again by someone else)
    del views
    gc.collect()
    assert sum(_mapped_at(x) for x in addrs) <= 1


def _anon_huge_kb(a: np.ndarray) -> int:
    """AnonHugePages of the mapping that holds ``a`` (/proc/self/smaps)."""
    addr, kb, inside = _address(a), 0, False
    for line in pathlib.Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= addr < hi
        elif inside and head == "AnonHugePages:":
            kb += int(line.split()[1])
    return kb


def _thp_mode() -> str:
    try:
        text = pathlib.Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "never"
    return text[text.index("[") + 1:text.index("]")]


@needs_huge_pages
@pytest.mark.skipif(not LINUX or _thp_mode() == "never", reason="transparent huge pages are off")
def test_written_memory_is_in_huge_pages():
    a = hugepages.empty((MIN_BYTES + 12288,), np.uint8)
    a[...] = 1
    # the kernel may fall back to small pages when memory is fragmented; one is enough to see the advice
    assert _anon_huge_kb(a) >= HUGE_PAGE // 1024


@needs_huge_pages
@pytest.mark.parametrize("options", [{"reuse_outputs": False}, {}])
def test_kernel_outputs_in_huge_pages_are_right(options):
    """The fo-pooling output (no zero fill) fresh or from the pool, and a
    partly written output's (zero filled), at sizes over MIN_BYTES with a vector tail."""
    T, B, C = 67, 24, 5219  # 33.6 MB, C % 8 == 3
    rng = np.random.default_rng(0)
    F, Z, O = (rng.random((T, B, C), dtype=np.float32) for _ in range(3))
    k = tcdsl.compile(FO_POOL, options=options)
    want = _fo_pool_reference(F, Z, O)
    for _ in range(3):  # the pool hands back the memory of dropped outputs
        h = k(F, Z, O)
        assert hugepages.in_huge_pages(h)
        np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-6)
        del h
    # only some steps write: the output needs its zeros
    k = tcdsl.compile("def f(float(T,B) X) -> (y) { for t in T { if t > 0 { y(t, b) = X(t, b) } } }",
                      options=options)
    X = rng.random((5, 1677727), dtype=np.float32)
    for _ in range(2):
        y = k(X)
        assert hugepages.in_huge_pages(y)
        np.testing.assert_array_equal(y[1:], X[1:])
        np.testing.assert_array_equal(y[0], 0)
        y[...] = 7  # a dirty array dropped: the next call's zeros must not be it
        del y
