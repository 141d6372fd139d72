"""Checking call arguments and inferring sizes from them (runtime/signature.py).

Inputs are NumPy arrays or DLPack tensors (PyTorch CPU tensors are passed
to TVM as they are, without a copy).  Every disagreement with the ``def``
becomes a :class:`TcShapeError` naming the argument and the dimension, in
the form ``argument 'h0' dim 1: size 7, but size 'Co' is 5 (from 'h2h' dim 0)``.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import TcShapeError
from .signature import Param, Signature, compile_shapes, compile_values

_TORCH_DTYPES = {
    "torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16", "torch.bool": "bool",
    "torch.int8": "int8", "torch.int16": "int16", "torch.int32": "int32", "torch.int64": "int64",
    "torch.uint8": "uint8", "torch.uint16": "uint16", "torch.uint32": "uint32", "torch.uint64": "uint64",
}


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def overlaps(a: Any, b: Any) -> bool:
    """Contiguous arrays ``a`` and ``b`` (NumPy, or PyTorch on any device)
    share some byte of memory."""
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return bool(np.may_share_memory(a, b))
    (da, la, ha), (db, lb, hb) = _extent(a), _extent(b)
    return da == db and la < hb and lb < ha


def same_memory(a: Any, b: Any) -> bool:
    """Contiguous ``a`` and ``b`` are the same elements: the same bytes, shape and dtype."""
    return _extent(a) == _extent(b) and tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype)


def _extent(x: Any) -> tuple[str, int, int]:
    """(device, first byte, one past the last byte) of contiguous ``x``; an empty range when it has no elements."""
    if is_torch(x):
        lo = x.data_ptr()
        return str(x.device), lo, lo + x.numel() * x.element_size()
    lo = x.__array_interface__["data"][0]
    return "cpu", lo, lo + x.nbytes


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
        if str(x.layout) != "torch.strided":
            raise TcShapeError(f"argument '{name}': a {str(x.layout).removeprefix('torch.')} tensor, but the "
                               f"kernel takes dense (strided) tensors; convert it with .to_dense()")
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
    if type(x) is np.ndarray and not x.flags.writeable:
        x = _writeable_view(x)
    if len(shape) != rank:
        raise TcShapeError(f"argument '{name}': expected {rank} dimension{'s' * (rank != 1)}, got {len(shape)} "
                           f"(shape {tuple(shape)})")
    return Arg(x, tuple(shape), dtype)


def _writeable_view(x: np.ndarray) -> np.ndarray:
    """A writeable view of the read-only, C-contiguous array ``x`` (a
    read-only memory map, ``np.frombuffer`` of bytes): kernels take arrays
    through DLPack, whose version in TVM cannot mark one read-only, and never
    write their inputs.  No copy; the view keeps ``x`` alive."""
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    memory = (ctypes.c_char * x.nbytes).from_address(x.ctypes.data)
    memory.keep = x
    return np.frombuffer(memory, dtype=x.dtype).reshape(x.shape)


@functools.cache
def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype(dtype)


def _check_dtype(name: str, got: str, want: str) -> None:
    if got != want:
        raise TcShapeError(f"argument '{name}': dtype {got}, but the kernel expects {want}")


def bind_sizes(params: tuple[Param, ...], args: list[Arg], fixed: dict[str, int],
               given: dict[str, Any] | None = None, names: tuple[str, ...] | None = None,
               name: str = "the kernel", derived: tuple[tuple[str, str, str], ...] = ()) -> dict[str, int]:
    """Every size of the def (``names``; None: those the inputs have), for
    these inputs: from the input shapes (a size name binds to the dimension;
    a declared ``4 * H`` is solved for ``H``), from ``given`` (sizes passed
    at the call) and from ``fixed`` (``sizes=`` at compile time).  Checks
    repeated names, constants, declared sums, and that they all agree; a
    size nothing determines is an error.  ``name``: the def, for messages."""
    given = _check_given(dict(given or {}), fixed, names, name)
    sizes: dict[str, int] = {}
    origin: dict[str, str] = {}
    linear = []
    for p, a in zip(params, args):
        for k, d in enumerate(p.dims):
            got = a.shape[k]
            if isinstance(d, int):
                if got != d:
                    raise TcShapeError(f"argument '{p.name}' dim {k}: size {got}, but the def declares {d}")
            elif isinstance(d, str):
                _bind(p.name, k, d, got, sizes, origin, fixed, given)
            else:
                linear.append((p.name, k, d, got))
    for d, v in {**fixed, **given}.items():
        if d not in sizes:
            sizes[d], origin[d] = v, "given at the call" if d in given else "fixed at compile time"
    _solve(linear, sizes, origin)
    _derive(derived, sizes, fixed, given)
    missing = [s for s in (names or ()) if s not in sizes]
    if missing:
        raise _undetermined(missing[0], linear, name)
    return sizes


def with_derived(derived: tuple[tuple[str, str, str], ...], sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` with the derived sizes computed from them (a tuner's sizes, ``options_for``'s)."""
    out = dict(sizes)
    _derive(derived, out, {}, dict(sizes))
    return out


@functools.lru_cache(maxsize=256)
def _value_of(python: str) -> Callable[[dict[str, int]], tuple[int, ...]]:
    return compile_values((python,))


def _derive(derived: tuple[tuple[str, str, str], ...], sizes: dict[str, int], fixed: dict[str, int],
            given: dict[str, int]) -> None:
    """The derived sizes (``G_x_G`` = ``G * G``, sema/sizes.py) from the others, once those are known;
    one given at the call (or bound from a shape) must be that value."""
    for d, text, python in derived:
        try:
            value = _value_of(python)(sizes)[0]
        except KeyError:  # a size it needs is missing: reported as missing
            continue
        except ZeroDivisionError:
            raise TcShapeError(f"size '{d}' = {text} divides by zero at "
                               + ", ".join(f"{k}={v}" for k, v in sorted(sizes.items()))) from None
        if value < 0 or value > MAX_ELEMENTS:
            raise TcShapeError(f"size '{d}' = {text} is {value}: a size is an int32 from 0 to {MAX_ELEMENTS}")
        if d in fixed and fixed[d] != value:
            raise TcShapeError(f"size '{d}' = {text} is {value}, but was fixed to {fixed[d]} at compile time")
        if d in sizes and sizes[d] != value:
            how = "given at the call" if d in given else "from an input's shape"
            raise TcShapeError(f"size '{d}' is {text} = {value} here, but {sizes[d]} {how}")
        sizes[d] = value


def _check_given(given: dict[str, Any], fixed: dict[str, int], names, name: str) -> dict[str, int]:
    for k, v in given.items():
        if names is not None and k not in names:
            raise TcShapeError(f"'{k}' is not a size of '{name}' (sizes: {', '.join(names)})")
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise TcShapeError(f"size '{k}': expected a non-negative integer, got {v!r}")
        if v > MAX_ELEMENTS:
            raise TcShapeError(f"size '{k}' = {v} does not fit in an index: sizes are int32, at most {MAX_ELEMENTS}")
        if k in fixed and v != fixed[k]:
            raise TcShapeError(f"size '{k}' is {v} at the call, but was fixed to {fixed[k]} at compile time")
    return {k: int(v) for k, v in given.items()}


def _bind(param: str, k: int, d: str, got: int, sizes, origin, fixed, given) -> None:
    if d in sizes:
        if got != sizes[d]:
            raise TcShapeError(f"argument '{param}' dim {k}: size {got}, but size '{d}' is {sizes[d]} ({origin[d]})")
    elif d in given and got != given[d]:
        raise TcShapeError(f"argument '{param}' dim {k}: size {got}, but size '{d}' is {given[d]} (given at the call)")
    elif d in fixed and got != fixed[d]:
        raise TcShapeError(f"argument '{param}' dim {k}: size {got}, but size '{d}' was fixed to "
                           f"{fixed[d]} at compile time")
    else:
        sizes[d], origin[d] = got, f"from '{param}' dim {k}"


def _solve(linear: list, sizes: dict[str, int], origin: dict[str, str]) -> None:
    """Declared sums like ``4 * H``: each one with a single unknown size gives
    it (an integer >= 0, or the shape does not fit); the others must equal
    their input's dimension."""
    pending = list(linear)
    while pending:
        left = []
        for param, k, d, got in pending:
            unknown = [v for v, _ in d.coeffs if v not in sizes]
            if len(unknown) > 1:
                left.append((param, k, d, got))
                continue
            rest = got - d.const - sum(c * sizes[v] for v, c in d.coeffs if v in sizes)
            if not unknown:
                if rest != 0:
                    known = ", ".join(f"{v}={sizes[v]} ({origin[v]})" for v, _ in d.coeffs)
                    raise TcShapeError(f"argument '{param}' dim {k}: size {got}, but the def declares "
                                       f"{d.text} = {got - rest}" + (f" for {known}" if known else ""))
                continue
            (u,) = unknown
            c = dict(d.coeffs)[u]
            if rest % c or rest // c < 0:
                raise TcShapeError(f"argument '{param}' dim {k}: size {got} does not fit the declared "
                                   f"{d.text}: no size {u} >= 0 gives {got}")
            sizes[u], origin[u] = rest // c, f"from '{param}' dim {k} = {d.text}"
        if len(left) == len(pending):
            return
        pending = left


def _undetermined(size: str, linear: list, name: str) -> TcShapeError:
    for param, k, d, _ in linear:
        if size in dict(d.coeffs):
            return TcShapeError(f"size '{size}' cannot be inferred from argument '{param}' dim {k} "
                                f"({d.text}); give it at the call ({size}=...) or at compile time "
                                f"(sizes={{'{size}': ...}})")
    return TcShapeError(f"size '{size}' is not given: no input's shape determines it; give it at the call "
                        f"({name}(..., {size}=...)) or at compile time (sizes={{'{size}': ...}})")


# Tensors are indexed with int32 arithmetic (flat offsets included).
MAX_ELEMENTS = 2**31 - 1


class SizeChecks:
    """The index range check of a signature's calls, compiled once: refuse
    sizes for which some tensor (input, output or temporary) would have more
    than 2**31 - 1 elements, or whose extent formulas leave int32 on the way
    (the kernel evaluates them in int32): index arithmetic would overflow.
    Zero-size tensors are fine (``T = 0`` gives empty outputs), but sizes of
    0 are outside the context the program was proved in (sizes >= 1): a
    call with one passes only ``at_zero``'s check (the compiler's bounds
    proof for these sizes, polyhedral/bounds.py), and without one it is
    refused.  Sizes for which a read would leave its tensor (the signature's
    guards: polyhedral/bounds.py proved the reads for all other sizes) are
    refused, unless ``at_zero`` proves the program as written for them
    (a guard over sizes is coarser than the proof at known sizes): such
    calls run the program as written (:meth:`as_written`).  Each size tuple
    that passes is not checked again."""

    def __init__(self, signature: Signature):
        self._tensors = [(e.name, compile_shapes([e.shape]), compile_values(e.parts)) for e in signature.extents]
        self._guards = [(compile_values((f"int({cond})",)), message) for cond, message in signature.guards]
        self._seen: set[tuple] = set()
        self._as_written: set[tuple] = set()
        # a call a guard names runs the program as written where the compiler's
        # proof for its sizes holds (``e % D < D / 2 ? x(e + D / 2) : ...``
        # with E = 8, D = 4): calls with such sizes take :meth:`as_written`
        self.written_code = signature.target == "llvm"

    def as_written(self, sizes: dict[str, int]) -> bool:
        """Whether a call with these sizes (checked) needs the program as
        written: a guard names its sizes, the proof for them holds."""
        return bool(self._as_written) and tuple(sorted(sizes.items())) in self._as_written

    def check(self, sizes: dict[str, int], at_zero: Callable | None = None) -> None:
        """Raises TcShapeError for sizes out of range (see the class docstring);
        ``at_zero(sizes, shapes)`` raises for sizes with a 0 that the program
        cannot run with."""
        key = tuple(sorted(sizes.items()))
        if key in self._seen:
            return
        given = ", ".join(f"{k}={v}" for k, v in sizes.items())
        shapes = {}
        for t, shape_of, parts_of in self._tensors:
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
        if 0 in sizes.values():
            if at_zero is None:
                raise TcShapeError(f"sizes {given}: a size of 0 needs the compiler's bounds check of this "
                                   f"call; compile the kernel with tcdsl.compile to call it with these sizes")
            at_zero(sizes, shapes)
        for cond, message in self._guards:
            if cond(sizes)[0]:
                if at_zero is None or not self.written_code:
                    raise TcShapeError(f"sizes {given}: {message} for these sizes")
                at_zero(sizes, shapes)  # raises, naming an instance, unless the program is in bounds here
                self._as_written.add(key)  # the guard's sizes hold more than it reads: the program as written runs
                break
        if len(self._seen) > 1024:
            self._seen.clear()
            self._as_written.clear()
        self._seen.add(key)
