"""Strided vector loads as contiguous loads and a shuffle (CPU builds).

A vectorized loop reading a tensor at a constant stride other than 1 -- the
window of a convolution of stride 2, ``x(n, c, 2 * h + kh, 2 * v + kw)``
with ``v`` the vector loop, or a reversed index ``x(T - 1 - t)`` -- reaches
TVM's LLVM code generator as a load whose index is ``Ramp(base, s, lanes)``,
which it emits as one scalar load and one insert per lane.  This pass,
run after TVM's lowering (codegen/targets.py, ``PIPELINE``), rewrites such a load of a small
stride (``|s| <= MAX_STRIDE``) into the few contiguous vector loads that
cover the elements from its first lane to its last, and a ``Shuffle``
picking its lanes out of them: for stride 2 and 16 lanes, two 16-lane loads
and one two-source permute (``vpermt2ps`` with AVX-512) instead of 16
scalar loads (a 3x3 convolution of stride 2, 8x64x65x65 * 128x64x3x3:
28.6 -> 12-14.6 ms on this project's Intel Xeon).

The loads read only elements between the first and the last lane's, which
the original load reads too (the last vector starts ``lanes`` elements
before the last lane's element, overlapping the one before it): no address
outside what the program reads is touched.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

MAX_STRIDE = 4

_LOAD = tvm.ir.TensorLoad
_RAMP = type(tirx.Ramp(tirx.IntImm("int32", 0), 1, 4))
_INT = type(tirx.IntImm("int32", 1))


def shuffled(load):
    """``load`` as contiguous loads and a shuffle, or ``load`` itself when
    its index is not a ramp of a small constant stride."""
    if len(load.indices) != 1:
        return load
    idx = load.indices[0]
    if not isinstance(idx, _RAMP) or not isinstance(idx.stride, _INT) or not isinstance(idx.lanes, (int, _INT)):
        return load
    s, n = int(idx.stride.value), int(idx.lanes)
    if s in (0, 1) or abs(s) > MAX_STRIDE or n < 2 or "x" in str(load.source.dtype):
        return load
    span = abs(s) * (n - 1) + 1                     # elements from the lowest lane's to the highest's
    lo = idx.base if s > 0 else idx.base + s * (n - 1)
    count = -(-span // n)
    starts = [min(i * n, span - n) for i in range(count)]
    vectors = [tirx.BufferLoad(load.source, [tirx.Ramp(lo + st, 1, n)]) for st in starts]
    picks = []
    for lane in range(n):
        e = s * lane if s > 0 else s * lane + span - 1  # the lane's element, counted from lo
        v = min(e // n, count - 1)
        picks.append(tirx.IntImm("int32", v * n + e - starts[v]))
    return tirx.Shuffle(vectors, picks)


def map_nodes(mod: tvm.IRModule, node_type, fn) -> tvm.IRModule:
    """``mod`` with ``fn`` applied to every node of ``node_type`` in its PrimFuncs' bodies, innermost first."""
    funcs = {}
    for gv, f in mod.functions.items():
        if isinstance(f, tirx.PrimFunc):
            f = f.with_body(tvm_ffi.structural_map(f.body, [(node_type, fn)]))
        funcs[gv] = f
    return tvm.IRModule(funcs, attrs=mod.attrs)


@tvm.transform.module_pass(opt_level=0, name="tcdsl.StridedLoads")
def strided_loads(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    return map_nodes(mod, _LOAD, shuffled)

