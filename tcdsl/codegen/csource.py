"""``--emit c``: the kernel's TIR as C source, from TVM's ``c`` target.

The binary a kernel runs is built by LLVM (``codegen/targets.py``); this is
the same ``PrimFunc`` put through TVM's C code generator instead, for reading
(and for toolchains without LLVM).  The C code calls TVM's runtime API
(``TVMBackendParallelLaunch`` for parallel loops, ``TVMFFIErrorSetRaised...``
for argument checks) and compiles against TVM's and tvm-ffi's headers.

TVM 0.27's C target has no lowering for most float math intrinsics
(``Unresolved call ... tirx.fabs``); this module registers one for the ``c``
target only: the C99 ``<math.h>`` function of that name, with the ``f``
suffix in float32, and float16 computed in float32.
"""
from __future__ import annotations

import tvm
from tvm import tirx

# TIR intrinsic -> <math.h> function (float64 name; float32 adds "f").
_MATH = {
    "tirx.fabs": "fabs", "tirx.floor": "floor", "prim.ceil": "ceil", "tirx.ceil": "ceil",
    "tirx.trunc": "trunc", "tirx.round": "nearbyint", "tirx.nearbyint": "nearbyint",
    "tirx.exp": "exp", "tirx.exp2": "exp2", "tirx.exp10": "exp10", "tirx.log": "log", "tirx.log2": "log2",
    "prim.log2": "log2", "tirx.log10": "log10", "tirx.log1p": "log1p", "tirx.pow": "pow",
    "tirx.sqrt": "sqrt", "tirx.sin": "sin", "tirx.cos": "cos", "tirx.tan": "tan", "tirx.asin": "asin",
    "tirx.acos": "acos", "tirx.atan": "atan", "tirx.atan2": "atan2", "tirx.sinh": "sinh",
    "tirx.cosh": "cosh", "tirx.tanh": "tanh", "tirx.asinh": "asinh", "tirx.acosh": "acosh",
    "tirx.atanh": "atanh", "tirx.erf": "erf", "tirx.fmod": "fmod", "tirx.hypot": "hypot",
    "tirx.copysign": "copysign", "tirx.nextafter": "nextafter", "tirx.ldexp": "ldexp",
}


def c_source(func: tirx.PrimFunc | tvm.IRModule) -> str:
    """The C source TVM's ``c`` target generates for ``func``.  Vectorized
    loops are emitted as plain loops (the C compiler vectorizes): the C
    target has no vector form of the math functions."""
    with tvm.transform.PassContext(config={"tirx.disable_vectorize": True}):
        return tvm.compile(func, target="c").mod.inspect_source()


def _lower_math(name: str):
    def rule(call):
        dtype = str(call.ty)
        if dtype == "float32":
            return tirx.call_pure_extern("float32", name + "f", *call.args)
        if dtype == "float64":
            return tirx.call_pure_extern("float64", name, *call.args)
        if dtype == "float16":
            args = [tirx.Cast("float32", a) for a in call.args]
            return tirx.Cast("float16", tirx.call_pure_extern("float32", name + "f", *args))
        return call
    return rule


def _register() -> None:
    for op, name in _MATH.items():
        try:
            tvm.ir.Op.get(op)
        except Exception:  # noqa: BLE001 -- an intrinsic this TVM does not have
            continue
        tirx.register_intrin_lowering(op, "c", f=_lower_math(name), level=99)


_register()
