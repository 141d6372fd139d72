"""Vector math from glibc's libmvec for the vector lanes of libm functions (CPU builds).

TVM vectorizes ``sin(x(i))`` of a vector loop into ``llvm.sin`` of a vector,
which LLVM's x86 back end scalarizes into one ``sinf`` call per lane: a
16-lane loop ran 16 libm calls per vector (a Goertzel filter bank, a
structure factor ``sum exp(i q.x)`` as ``cos`` and ``sin``, rotary position
angles computed in the kernel).  glibc's libmvec has the vector variants
under the x86-64 vector function ABI names (``_ZGVeN16v_sinf``: AVX-512, 16
float lanes; ``_ZGVdN8v_sinf``: AVX2, 8; ``_ZGVbN4v_sinf``: SSE, 4; the
float64 ones with half the lanes), accurate to a few ulp over the whole
float range (their argument reduction is exact; NaN and infinities as libm).
This pass, run after TVM's lowering (codegen/targets.py's ``PIPELINE``),
rewrites each vector call of such an intrinsic whose lane count and ISA the
host has into a call of that variant; scalar calls and other lane counts
stay as they were.

The functions that TVM does not vectorize or lowers inaccurately
(:data:`_OWNED`: float64 ``tanh``, ``erf``, ``asin``, ...) are this module's
at every call of a CPU build: vectorizable intrinsics before TVM's
vectorizer, libmvec's variant or one libm call per lane after it.

The symbols must resolve in this process before LLVM's JIT links a kernel
(an unresolved symbol there is a crash, not an error): :func:`available`
loads ``libmvec.so.1`` with ``RTLD_GLOBAL`` once, and without it (not glibc,
not x86-64) nothing is rewritten.  Exported kernels (the disk cache) link
``-lmvec`` (:func:`link_options`).
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import platform

import tvm
from tvm import tirx

from .. import host
from .strided import map_nodes

# intrinsic -> (libmvec base name, number of vector arguments): the libm
# intrinsics that TVM's vectorizer keeps as vector calls (TVectorizable)
_FUNCTIONS = {
    "tirx.sin": ("sin", 1), "tirx.cos": ("cos", 1), "tirx.tan": ("tan", 1),
    "tirx.exp2": ("exp2", 1), "tirx.log10": ("log10", 1), "tirx.pow": ("pow", 2),
    # float64 (float32 has formulas of its own, codegen/formulas.py, but for nested arguments)
    "tirx.exp": ("exp", 1), "tirx.log": ("log", 1),
}
# libm functions whose every call this module lowers on the CPU (TVM's own
# lowerings of them are inaccurate formulas, "unknown intrinsic" on vectors,
# or absent): intrinsic -> (libm / libmvec base name, arguments).  Before
# TVM's vectorizer, their libm calls become these intrinsics
# (:func:`intrinsics_in`), which the vectorizer takes as vectorizable during a
# CPU build (:func:`vectorizable`); after it, a vector call becomes libmvec's
# variant, or one libm call per lane where there is none, and a scalar call
# the libm call (:func:`_rewrite`).
_OWNED = {
    "tirx.tanh": ("tanh", 1), "tirx.sinh": ("sinh", 1), "tirx.cosh": ("cosh", 1),
    "tirx.atanh": ("atanh", 1), "tirx.erf": ("erf", 1), "tirx.log1p": ("log1p", 1),
    "tirx.asin": ("asin", 1), "tirx.acos": ("acos", 1), "tirx.atan": ("atan", 1),
    "tirx.asinh": ("asinh", 1), "tirx.acosh": ("acosh", 1), "tirx.atan2": ("atan2", 2),
    # (a constant exponent below 3 that formulas.pow_ leaves to libm: a gamma curve's pow(v, 2.4))
    "tirx.pow": ("pow", 2),
}
_FUNCTIONS.update(_OWNED)
# libm symbol -> intrinsic, for the calls that codegen/mathlib.py emits as libm's
_FROM_LIBM = {name + suffix: op for op, (name, _) in _OWNED.items() for suffix in ("", "f")}
# the vector function ABI's ISA letters, widest first, and their lanes of float32
_WIDTHS = (("e", 16), ("d", 8), ("b", 4))

_CALL = tvm.ir.expr.Call


@functools.cache
def _library() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        return ctypes.CDLL("libmvec.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None


def available() -> bool:
    """libmvec is loaded (globally, for the JIT's symbol lookup)."""
    return _library() is not None


@functools.cache
def _isas() -> frozenset[str]:
    """The vector ABI letters the host runs: b (SSE4), d (AVX2), e (AVX-512)."""
    isas = {"b"}
    try:
        with tvm.target.Target({"kind": "llvm", "mcpu": host.cpu()}):
            if tvm.target.codegen.llvm_cpu_has_features("avx2"):
                isas.add("d")
    except Exception:  # an LLVM without the query: SSE only
        pass
    if host.avx512():
        isas.add("e")
    return frozenset(isas)


def variant(op: str, dtype: str) -> tuple[str, int] | None:
    """The libmvec function for intrinsic ``op`` on vectors of ``dtype``
    (``"float32x16"``) and its lane count, which divides the vector's: the
    widest the host runs; None where there is none (not such a function,
    a lane count no variant divides, no libmvec)."""
    if op not in _FUNCTIONS or "x" not in dtype or not available():
        return None
    scalar, _, lanes = dtype.partition("x")
    per = {"float32": 1, "float64": 2}.get(scalar)
    if per is None or not lanes.isdigit():
        return None
    name, arity = _FUNCTIONS[op]
    for isa, width in _WIDTHS:
        n = width // per
        symbol = f"_ZGV{isa}N{n}{'v' * arity}_{name}{'f' if per == 1 else ''}"
        if isa in _isas() and int(lanes) % n == 0 and hasattr(_library(), symbol):
            return symbol, n
    return None


def _in_parts(dtype: str, args, n: int, symbol: str) -> "tirx.PrimExpr":
    """``symbol`` called on each part of ``n`` lanes of the vectors ``args``
    (of ``dtype``), the results joined: each argument bound once, its parts
    picked out by shuffles (``n`` = 1: one scalar call per lane)."""
    scalar, _, lanes = dtype.partition("x")
    piece = scalar if n == 1 else f"{scalar}x{n}"
    vars_ = [tirx.Var(f"vm_arg{i}", dtype) for i in range(len(args))]
    parts = [tirx.call_pure_extern(piece, symbol, *[tirx.Shuffle([v], [tirx.IntImm("int32", k * n + j)
                                                                       for j in range(n)]) for v in vars_])
             for k in range(int(lanes) // n)]
    out = tirx.Shuffle(parts, [tirx.IntImm("int32", j) for j in range(int(lanes))])
    for v, a in reversed(list(zip(vars_, args))):
        out = tirx.Let(v, a, out)
    return out


def _libm_call(op: str, dtype: str, args) -> "tirx.PrimExpr":
    """libm's ``op`` of scalar ``args``, or of each lane of vector ones."""
    scalar, _, lanes = dtype.partition("x")
    symbol = _OWNED[op][0] + ("f" if scalar == "float32" else "")
    return _in_parts(dtype, args, 1, symbol) if lanes else tirx.call_pure_extern(dtype, symbol, *args)


def _rewrite(call):
    op = getattr(call.op, "name", None)
    if op not in _FUNCTIONS:
        return call
    dtype = str(getattr(call.ty, "dtype", ""))
    found = variant(op, dtype)
    if found is None:
        return _libm_call(op, dtype, call.args) if op in _OWNED and dtype.startswith("float") else call
    symbol, n = found
    if int(dtype.partition("x")[2]) == n:
        return tirx.call_pure_extern(dtype, symbol, *call.args)
    return _in_parts(dtype, call.args, n, symbol)  # float64 in 16 lanes: two calls of 8


@tvm.transform.module_pass(opt_level=0, name="tcdsl.VectorMath")
def vector_math(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    return map_nodes(mod, _CALL, _rewrite)


def _intrinsic(call):
    if getattr(call.op, "name", None) != "tirx.call_pure_extern":
        return call
    op = _FROM_LIBM.get(str(getattr(call.args[0], "value", "")))
    dtype = str(getattr(call.ty, "dtype", ""))
    if op is None or dtype not in ("float32", "float64"):
        return call
    if op == "tirx.pow" and isinstance(call.args[2], (tirx.FloatImm, tirx.IntImm)) and call.args[2].value >= 3:
        return call  # (TVM's simplifier prints a warning for each intrinsic pow of a constant 3 or more)
    return _CALL(tvm.ir.Op.get(op), list(call.args[1:]), attrs=call.attrs, ret_ty=call.ty)


@tvm.transform.module_pass(opt_level=0, name="tcdsl.LibmIntrinsics")
def intrinsics_in(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    """The libm calls of :data:`_OWNED`'s functions as their intrinsics, which
    the vectorizer can widen (run before TVM's lowering)."""
    return map_nodes(mod, _CALL, _intrinsic)


@contextlib.contextmanager
def vectorizable():
    """Within: TVM's vectorizer widens calls of :data:`_OWNED`'s intrinsics
    (an operator attribute, global to the process: hold the build lock)."""
    ops = [tvm.ir.Op.get(name) for name in _OWNED]
    added = [op for op in ops if op.get_attr("TVectorizable") is None]
    for op in added:
        op.set_attr("TVectorizable", True)
    try:
        yield
    finally:
        for op in added:
            op.reset_attr("TVectorizable")


def link_options() -> list[str]:
    """Linker options of an exported CPU kernel: libmvec where it is used."""
    return ["-lmvec"] if available() else []
