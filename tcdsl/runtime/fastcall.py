"""The hot path of a kernel call: a function generated once per kernel.

A call whose inputs are C-contiguous CPU arrays of the declared dtypes, all
NumPy or all PyTorch, with shapes that an earlier call already checked,
needs none of the general checks again: the input shapes decide the sizes,
the binary, its size arguments and the output shapes.  Those are kept as a
*plan* per tuple of input shapes (``Kernel._plans``), and the generated
function checks only types, dtypes and layout, then looks the shapes up.
Anything else (another type or dtype, a non-contiguous array, shapes not
seen yet, an ``out=`` that is not exactly right or shares memory with an
input) returns :data:`MISS`, and
the general path (``Kernel._call``) runs: it raises the documented
``TcShapeError``s and makes the plan.

For ``elman_rnn(input, h0, i2h, h2h) -> (hidden)`` and NumPy the function is::

    def fast_call(inputs, out):
        if len(inputs) != 4:
            return MISS
        a0, a1, a2, a3 = inputs
        if not (type(a0) is ndarray and a0.dtype is d0 and a0.flags.c_contiguous
                and type(a1) is ndarray and ...):
            return MISS
        plan = plans.get((a0.shape, a1.shape, a2.shape, a3.shape))
        if plan is None:
            return MISS
        fn, size_args, (s0,) = plan
        if out is None:
            o0 = alloc0(s0, dtype=t0)
        elif type(out) is ndarray and out.dtype is t0 and out.flags.c_contiguous and out.shape == s0:
            o0 = out
        elif (type(out) is tuple or type(out) is list) and len(out) == 1:
            o0, = out
            if not (type(o0) is ndarray and ... and o0.shape == s0):
                return MISS
        else:
            return MISS
        if out is not None and (shares(o0, a0) or shares(o0, a1) or shares(o0, a2) or shares(o0, a3)):
            return MISS  # the general path writes into a copy (np.may_share_memory; PyTorch: byte ranges)
        try:
            fn(*size_args, a0, a1, a2, a3, o0)
        except BufferError:  # a read-only array, which DLPack cannot pass
            return MISS
        hits[0] += 1
        return o0

Outputs the kernel allocates start as zeros (SPEC 1.1): ``alloc0`` is
``np.zeros``, unless the kernel writes every element of the output before
it reads any (polyhedral/dataflow.py): then the zeros would never be seen,
and the output comes from the kernel's pool (runtime/pool.py).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .args import is_torch, overlaps

MISS = object()
"""Returned by a fast call that cannot serve the call: the general path must."""

# Plans kept per kernel: a workload that keeps making new shapes starts over
# beyond this many (a plan is remade by one general call).
MAX_PLANS = 4096


class FastPath:
    """One kernel's plans and fast calls.  ``plans`` maps a tuple of input
    shapes to ``(fn, size_args, output_shapes)``; ``calls`` maps an array
    type to its fast call; ``hits[0]`` counts the calls they served."""

    def __init__(self, dtypes: list[str], ranks: list[int], out_dtypes: list[str], allocators: dict,
                 in_place: tuple = (), enabled: bool = True):
        self.plans: dict[tuple, tuple] = {}
        self.hits = [0]
        self.calls: dict[type, Callable] = {}
        self._shapes_of: dict[tuple, tuple] = {}  # size tuple -> the input shapes of its plan
        self._signature = (list(dtypes), list(ranks), list(out_dtypes), allocators, tuple(in_place))
        self._enabled = enabled
        if enabled:
            self.calls[np.ndarray] = make_fast_call("numpy", *self._signature, self.plans, self.hits)

    def add(self, in_shapes: tuple, key: tuple, plan: tuple) -> None:
        """Serve ``in_shapes`` (those of size tuple ``key``) with ``plan`` from now on."""
        if len(self.plans) >= MAX_PLANS:
            self.plans.clear()
            self._shapes_of.clear()
        self.plans[in_shapes] = plan
        self._shapes_of[key] = in_shapes

    def drop(self, key: tuple) -> None:
        """Forget the plan of size tuple ``key`` (its binary changed)."""
        self.plans.pop(self._shapes_of.pop(key, None), None)

    def add_library_of(self, value: Any) -> None:
        """A fast call for PyTorch tensors too, once a call with them made a plan (no torch import before)."""
        if self._enabled and type(value) not in self.calls and is_torch(value):
            import torch

            if type(value) is torch.Tensor:
                self.calls[torch.Tensor] = make_fast_call("torch", *self._signature, self.plans, self.hits)


# For each array library: when the fast call takes an array {a} of dtype {d}
# (the dtype object).
_LIBRARIES = {
    "numpy": {"takes": "type({a}) is ndarray and {a}.dtype is {d} and {a}.flags.c_contiguous"},
    "torch": {"takes": "type({a}) is Tensor and {a}.dtype is {d} and {a}.is_cpu and {a}.layout is strided "
                       "and {a}.is_contiguous()"},
}


def make_fast_call(library: str, dtypes: list[str], ranks: list[int], out_dtypes: list[str], allocators: dict,
                   in_place: tuple, plans: dict, hits: list[int]) -> Callable:
    """The fast call for inputs of ``dtypes`` and ``ranks`` and outputs of
    ``out_dtypes``, all arrays of ``library`` ("numpy" or "torch"); output
    ``i`` is allocated by ``allocators["numpy"][i]`` (``np.zeros``, or
    ``np.empty`` or the kernel's output pool when the kernel writes every
    element) or, for torch, by ``torch.empty`` where ``allocators["torch"][i]``
    is true, else ``torch.zeros``; all inputs are arrays of the library, except
    that a 0-rank input may also be a Python or NumPy scalar (converted as
    ``prepare_input`` does); ``in_place``: the (output, input) pairs where
    the ``out=`` array may be the input itself (Signature.in_place); ``plans`` maps a tuple of input shapes to
    ``(fn, size_args, output_shapes)``, and ``hits[0]`` counts the calls served."""
    lib = _LIBRARIES[library]
    names: dict[str, Any] = {"MISS": MISS, "plans": plans, "hits": hits, "asarray": np.asarray,
                             "SCALARS": (int, float, bool, np.generic),
                             "shares": np.may_share_memory if library == "numpy" else overlaps}
    if library == "numpy":
        names.update(ndarray=np.ndarray)
        names.update({f"alloc{i}": f for i, f in enumerate(allocators["numpy"])})
        dtype_object = np.dtype
    else:
        import torch

        names.update(Tensor=torch.Tensor, strided=torch.strided)
        names.update({f"alloc{i}": torch.empty if e else torch.zeros for i, e in enumerate(allocators["torch"])})
        dtype_object = lambda d: getattr(torch, d)  # noqa: E731
    a = [f"a{i}" for i in range(len(dtypes))]
    o = [f"o{i}" for i in range(len(out_dtypes))]
    names.update({f"d{i}": dtype_object(d) for i, d in enumerate(dtypes)})
    names.update({f"t{i}": dtype_object(d) for i, d in enumerate(out_dtypes)})
    names.update({f"n{i}": np.dtype(d) for i, d in enumerate(dtypes) if ranks[i] == 0})
    takes = " and ".join(lib["takes"].format(a=x, d=f"d{i}") for i, x in enumerate(a) if ranks[i]) or "True"
    scalars = [line for i, x in enumerate(a) if ranks[i] == 0 for line in (
        f"    if not ({lib['takes'].format(a=x, d=f'd{i}')}):",
        f"        if not isinstance({x}, SCALARS):",
        "            return MISS",
        f"        {x} = asarray({x}, dtype=n{i})")]
    shapes = "".join(f"{x}.shape, " for x in a)
    lines = [
        "def fast_call(inputs, out):",
        f"    if len(inputs) != {len(a)}:",
        "        return MISS",
        f"    {''.join(x + ', ' for x in a)}= inputs" if a else "    pass  # no inputs",
        f"    if not ({takes}):",
        "        return MISS",
        *scalars,
        f"    plan = plans.get(({shapes}))",
        "    if plan is None:",
        "        return MISS",
        f"    fn, size_args, ({''.join(f's{i}, ' for i in range(len(o)))}) = plan",
        "    if out is None:",
        *[f"        {x} = alloc{i}(s{i}, dtype=t{i})" for i, x in enumerate(o)],
    ]
    if len(o) == 1:  # out= one array
        lines += [f"    elif {_taken(lib, 'out', 't0', 's0')}:",
                  "        o0 = out"]
    lines += [f"    elif (type(out) is tuple or type(out) is list) and len(out) == {len(o)}:",
              f"        {''.join(x + ', ' for x in o)}= out",
              f"        if not ({' and '.join(_taken(lib, x, f't{i}', f's{i}') for i, x in enumerate(o))}):",
              "            return MISS",
              "    else:",
              "        return MISS",
              *_apart(a, o, in_place),
              "    try:",
              f"        fn(*size_args, {', '.join(a + o)})",
              "    except BufferError:  # a read-only array (DLPack cannot pass one): the general path",
              "        return MISS",
              "    hits[0] += 1",
              f"    return {o[0] if len(o) == 1 else '(' + ''.join(x + ', ' for x in o) + ')'}"]
    code = "\n".join(lines) + "\n"
    exec(compile(code, f"<tcdsl fast call ({library})>", "exec"), names)
    fast_call = names["fast_call"]
    fast_call.source = code
    return fast_call


def _apart(a: list[str], o: list[str], in_place: tuple = ()) -> list[str]:
    """Lines that leave to the general path a call whose ``out=`` arrays
    share memory with an input or with each other (it copies or refuses),
    unless an ``out=`` array is the very input of an ``in_place`` pair."""
    tests = [f"(shares({x}, {y}) and {x} is not {y})" if (i, j) in in_place else f"shares({x}, {y})"
             for i, x in enumerate(o) for j, y in enumerate(a)]
    tests += [f"shares({x}, {y})" for i, x in enumerate(o) for y in o[:i]]
    if not tests:
        return []
    return ["    if out is not None and (" + " or ".join(tests) + "):",
            "        return MISS"]


def _taken(lib: dict, a: str, d: str, s: str) -> str:
    """``a`` is an ``out=`` array the fast call takes: of dtype ``d``, shape ``s``, contiguous."""
    return f"{lib['takes'].format(a=a, d=d)} and {a}.shape == {s}"
