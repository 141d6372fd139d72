"""Checking call arguments and inferring sizes from them.

Inputs are NumPy arrays or DLPack tensors (PyTorch CPU tensors are passed
to TVM as they are, without a copy).  Every disagreement with the ``def``
becomes a :class:`TcShapeError` naming the argument and the dimension, in
the form ``argument 'h0' dim 1: size 7, but size 'Co' is 5 (from 'h2h' dim 0)``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import TcShapeError
from ..sema.check import CheckedDef
from ..syntax import nodes as n

_TORCH_DTYPES = {
    "torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16", "torch.bool": "bool",
    "torch.int8": "int8", "torch.int16": "int16", "torch.int32": "int32", "torch.int64": "int64",
    "torch.uint8": "uint8", "torch.uint16": "uint16", "torch.uint32": "uint32", "torch.uint64": "uint64",
}


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


@dataclass
class Arg:
    value: Any  # np.ndarray or torch.Tensor, contiguous
    shape: tuple[int, ...]
    dtype: str


def prepare_input(name: str, x: Any, dtype: str, rank: int, device: str = "cpu") -> Arg:
    """Check rank and dtype; make contiguous (a copy only when needed).
    ``device``: where the kernel runs ("cpu" or "cuda"); PyTorch tensors may
    be on the CPU or on that device."""
    if is_torch(x):
        if x.device.type not in ("cpu", device):
            raise TcShapeError(f"argument '{name}': tensor is on {x.device}, but the kernel runs on the "
                               f"{'CPU' if device == 'cpu' else device.upper()}")
        got = _TORCH_DTYPES.get(str(x.dtype), str(x.dtype))
        _check_dtype(name, got, dtype)
        if not x.is_contiguous():
            x = x.contiguous()
        shape = tuple(int(s) for s in x.shape)
    elif type(x) is np.ndarray and x.dtype is _np_dtype(dtype) and x.flags.c_contiguous:
        shape = x.shape  # the common case, kept cheap: it is paid on every call
    else:
        if isinstance(x, (int, float, bool, np.generic)) and rank == 0:
            x = np.asarray(x, dtype=dtype)
        if not isinstance(x, np.ndarray):
            if hasattr(x, "__dlpack__"):
                x = np.from_dlpack(x)
            else:
                raise TcShapeError(f"argument '{name}': expected a NumPy array or a DLPack tensor, "
                                   f"got {type(x).__name__}")
        _check_dtype(name, str(x.dtype), dtype)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        shape = x.shape
    if len(shape) != rank:
        raise TcShapeError(f"argument '{name}': expected {rank} dimension{'s' * (rank != 1)}, got {len(shape)} "
                           f"(shape {tuple(shape)})")
    return Arg(x, tuple(shape), dtype)


@functools.cache
def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype(dtype)


def _check_dtype(name: str, got: str, want: str) -> None:
    if got != want:
        raise TcShapeError(f"argument '{name}': dtype {got}, but the kernel expects {want}")


def bind_sizes(checked: CheckedDef, args: list[Arg], fixed: dict[str, int]) -> dict[str, int]:
    """Sizes from the input shapes; checks repeated names, constants and ``fixed``."""
    sizes: dict[str, int] = {}
    origin: dict[str, tuple[str, int]] = {}
    for p, a in zip(checked.node.params, args):
        for k, d in enumerate(p.type.dims):
            got = a.shape[k]
            if isinstance(d, int):
                if got != d:
                    raise TcShapeError(f"argument '{p.name}' dim {k}: size {got}, but the def declares {d}")
            elif d in sizes:
                if got != sizes[d]:
                    t, j = origin[d]
                    raise TcShapeError(f"argument '{p.name}' dim {k}: size {got}, but size '{d}' is "
                                       f"{sizes[d]} (from '{t}' dim {j})")
            else:
                if d in fixed and got != fixed[d]:
                    raise TcShapeError(f"argument '{p.name}' dim {k}: size {got}, but size '{d}' was fixed to "
                                       f"{fixed[d]} at compile time")
                sizes[d], origin[d] = got, (p.name, k)
    return sizes


# Tensors are indexed with int32 arithmetic (flat offsets included).
MAX_ELEMENTS = 2**31 - 1
_CHECKS: dict[int, tuple[Any, dict[str, tuple[Callable, Callable]], set]] = {}


def check_index_range(ranges: Any, sizes: dict[str, int]) -> None:
    """Refuse sizes for which some tensor (input, output or temporary) would
    have more than 2**31 - 1 elements, or whose extent formulas leave int32
    on the way (the kernel evaluates them in int32): index arithmetic would
    overflow.  Zero-size tensors are fine (``T = 0`` gives empty outputs).
    ``ranges`` is the kernel's RangeInfo; its extents are compiled to Python
    once (``_range_checks``), and each size tuple is checked once."""
    entry = _CHECKS.get(id(ranges))
    if entry is None or entry[0] is not ranges:
        if len(_CHECKS) > 256:
            _CHECKS.clear()
        entry = _CHECKS[id(ranges)] = (ranges, _range_checks(ranges), set())
    key = tuple(sorted(sizes.items()))
    if key in entry[2]:
        return
    given = ", ".join(f"{k}={v}" for k, v in sizes.items())
    shapes = {}
    for t, (shape_of, parts_of) in entry[1].items():
        shape = shapes[t] = tuple(max(0, d) for d in shape_of(sizes)[0])
        count = 1
        for d in shape:
            count *= d
        if count > MAX_ELEMENTS:
            raise TcShapeError(f"sizes {given} give '{t}' shape {shape}, {count} elements; tensors are indexed "
                               f"with int32, so at most {MAX_ELEMENTS} elements are supported")
        if not all(-2**31 <= v < 2**31 for v in parts_of(sizes)):
            raise TcShapeError(f"sizes {given}: the size of '{t}' is computed with int32 arithmetic, "
                               f"which overflows for these sizes")
    if 0 in sizes.values():  # outside the context sizes >= 1 the program was proved in
        from ..polyhedral.bounds import check_call_sizes

        check_call_sizes(ranges, sizes, shapes)
    if len(entry[2]) > 1024:
        entry[2].clear()
    entry[2].add(key)


def _range_checks(ranges: Any) -> dict[str, tuple[Callable, Callable]]:
    """Per tensor: its shape as a function of the sizes, and the values of
    every part of its extent formulas that the kernel computes in int32
    (sizes, constants, negations and arithmetic), in the order of ``n.walk``."""
    checks = {}
    for t in ranges.checked.tensors:
        exprs = ranges.extent_exprs(t)
        parts = [part for e in exprs for part in n.walk(e) if _in_int32(part)]
        values = "".join(_python(part) + ", " for part in parts)
        checks[t] = (shape_function([exprs]), eval(f"lambda s: ({values})", {"min": min, "max": max, "int": int}))
    return checks


def _in_int32(part: n.Expr) -> bool:
    match part:
        case n.Binary(op="+" | "-" | "*" | "/" | "%" | "min" | "max") | n.SizeVar() | n.Const() | n.Unary(op="-"):
            return True
    return False


def evaluate(e: n.Expr, sizes: dict[str, int]) -> int:
    """Value of a size expression (extents, as built from isl)."""
    match e:
        case n.Const(value=v):
            return int(v)
        case n.SizeVar(name=v) | n.IndexVar(name=v):
            return sizes[v]
        case n.Unary(op="-", operand=x):
            return -evaluate(x, sizes)
        case n.Select(cond=c, then=a, other=b):
            return evaluate(a, sizes) if _truth(c, sizes) else evaluate(b, sizes)
        case n.Binary(op=op, lhs=a, rhs=b):
            x, y = evaluate(a, sizes), evaluate(b, sizes)
            return _ARITH[op](x, y)
    raise AssertionError(f"cannot evaluate {e!r}")


def shape_function(shapes: list[tuple[n.Expr, ...]]) -> Callable[[dict[str, int]], tuple[tuple[int, ...], ...]]:
    """``evaluate`` of every extent of ``shapes``, compiled once into one
    Python function of the sizes (a call evaluates them per size tuple).  An
    extent is at least 0: range inference assumes sizes >= 1, so ``T - 1``
    (a tensor written where ``i + 1`` stays in a size-T input) is -1 at T = 0,
    where nothing is written."""
    body = "".join("(" + "".join(f"max({_python(e)}, 0), " for e in shape) + "), " for shape in shapes)
    return eval(f"lambda s: ({body})", {"min": min, "max": max, "int": int})  # noqa: S307 (our own text)


def _python(e: n.Expr) -> str:
    """Python text of a size expression over the dict ``s``, with ``evaluate``'s meaning."""
    match e:
        case n.Const(value=v):
            return repr(int(v))
        case n.SizeVar(name=v) | n.IndexVar(name=v):
            return f"s[{v!r}]"
        case n.Unary(op="-", operand=x):
            return f"(-{_python(x)})"
        case n.Select(cond=c, then=a, other=b):
            return f"({_python(a)} if {_python_truth(c)} else {_python(b)})"
        case n.Binary(op="min" | "max" as op, lhs=a, rhs=b):
            return f"{op}({_python(a)}, {_python(b)})"
        case n.Binary(op=op, lhs=a, rhs=b) if op in _ARITH:
            text = f"{_python(a)} {_PY_OPS.get(op, op)} {_python(b)}"
            return f"int({text})" if op in _COMPARISONS else f"({text})"
    raise AssertionError(f"cannot evaluate {e!r}")


def _python_truth(c: n.Expr) -> str:
    match c:
        case n.Binary(op="&&" | "||" as op, lhs=a, rhs=b):
            return f"({_python_truth(a)} {'and' if op == '&&' else 'or'} {_python_truth(b)})"
        case n.Unary(op="!", operand=a):
            return f"(not {_python_truth(a)})"
    return f"({_python(c)} != 0)"


def _truth(c: n.Expr, sizes) -> bool:
    match c:
        case n.Binary(op="&&", lhs=a, rhs=b):
            return _truth(a, sizes) and _truth(b, sizes)
        case n.Binary(op="||", lhs=a, rhs=b):
            return _truth(a, sizes) or _truth(b, sizes)
        case n.Unary(op="!", operand=a):
            return not _truth(a, sizes)
    return bool(evaluate(c, sizes))


_ARITH = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x // y,
    "%": lambda x, y: x % y, "min": min, "max": max, "==": lambda x, y: int(x == y),
    "!=": lambda x, y: int(x != y), "<": lambda x, y: int(x < y), "<=": lambda x, y: int(x <= y),
    ">": lambda x, y: int(x > y), ">=": lambda x, y: int(x >= y),
}
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
_PY_OPS = {"/": "//"}  # floor division, as TC's integer / (and Python's %)
