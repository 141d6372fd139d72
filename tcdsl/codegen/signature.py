"""The runtime's view of a def (runtime/signature.py), made from the front end's.

:func:`signature` turns the checked ``def`` and its ranges into the data a
compiled kernel is checked and called with: the parameters, the outputs'
shapes and zero fill, and every tensor's extents as Python expressions of
the sizes (``max(s['T'] - 1, 0)``), the text of :func:`size_text`.

:func:`check_index_range` is the same check of a call for a caller that has
the front end (the interpreter, tcdsl/testing.py): the runtime's check,
and at a size of 0 the bounds proof again (polyhedral/bounds.py).
"""
from __future__ import annotations

from typing import Any, Callable

from ..polyhedral.bounds import check_call_sizes
from ..runtime.args import MAX_ELEMENTS, SizeChecks  # noqa: F401  (MAX_ELEMENTS: the limit checked)
from ..runtime.signature import Extent, Linear, Output, Param, Signature, compile_shapes
from ..sema.check import CheckedDef
from ..sema.ranges import RangeInfo
from ..syntax import nodes as n


def signature(checked: CheckedDef, ranges: RangeInfo, target: str, overwritten: frozenset[str] = frozenset()) -> Signature:
    """The runtime's signature of ``checked`` for ``target``; the outputs in
    ``overwritten`` (polyhedral/dataflow.py) need no zero fill."""
    inputs = tuple(Param(p.name, checked.tensors[p.name].dtype, tuple(_dim(d) for d in checked.tensors[p.name].dims))
                   for p in checked.node.params)
    outputs = tuple(Output(o, checked.tensors[o].dtype, _shape(ranges.extent_exprs(o)), o not in overwritten)
                    for o in checked.outputs)
    extents = tuple(Extent(t, _shape(ranges.extent_exprs(t)),
                           tuple(size_text(part) for e in ranges.extent_exprs(t) for part in n.walk(e)
                                 if _in_int32(part)))
                    for t in checked.tensors)
    guards = tuple((_python_truth(g.cond), g.message) for g in ranges.size_guards)
    # CUDA's host function takes its temporaries after the outputs (codegen/cuda.py, CudaProgram.scratch_params)
    scratch = tuple(Output(t, checked.tensors[t].dtype, _shape(ranges.extent_exprs(t)), False)
                    for t in checked.temps) if target == "cuda" else ()
    return Signature(checked.node.name, tuple(checked.sizes), inputs, outputs, extents, target, guards, scratch,
                     derived_sizes(checked), in_place_pairs(checked) if target == "llvm" else ())


def in_place_pairs(checked: CheckedDef) -> tuple[tuple[int, int], ...]:
    """(output, input) index pairs where an ``out=`` array that is the input
    itself may be passed to the binary as it is (runtime/kernel.py; other
    sharing goes through a copy): the output is written by one ``=``
    statement outside any loop or branch, which reads the input only at its
    own left-hand side's indices, reads neither the output nor a temporary,
    and no other statement reads that input.  Each element of the input is
    then read only by the instance that writes the same element of the
    output, before it writes it; other statements read the output as its
    own (the compiler orders them around its writes), and no temporary is
    computed in the output's memory (polyhedral/inplace.py places only those
    that the output's statement reads)."""
    body = checked.node.body
    top = [s for s in body if isinstance(s, n.Comprehension)]
    every = list(n.comprehensions(body))
    temps = set(checked.temps)

    def reads(s: n.Comprehension, tensor: str) -> list[n.Access]:
        return [x for x in n.walk(s) if isinstance(x, n.Access) and x.tensor == tensor]

    def names(indices) -> list[str | None]:
        return [x.name if isinstance(x, (n.IndexVar, n.Ident)) else None for x in indices]

    pairs = []
    for i, o in enumerate(checked.outputs):
        writers = [s for s in every if s.tensor == o]
        if len(writers) != 1 or not any(writers[0] is s for s in top):
            continue
        w = writers[0]
        lhs = names(w.indices)
        if (w.op != "=" or w.reduction_vars or None in lhs or len(set(lhs)) != len(lhs)
                or any(isinstance(x, n.Access) and (x.tensor == o or x.tensor in temps) for x in n.walk(w))):
            continue
        for j, p in enumerate(checked.inputs):
            if (checked.tensors[p].dtype == checked.tensors[o].dtype
                    and not any(reads(s, p) for s in every if s is not w)
                    and all(names(a.indices) == lhs for a in reads(w, p))):
                pairs.append((i, j))
    return tuple(pairs)


def derived_sizes(checked: CheckedDef) -> tuple[tuple[str, str, str], ...]:
    """The derived sizes of ``checked`` (``G_x_G`` for ``G * G``, sema/sizes.py): name, TC text, Python text."""
    from ..syntax.printer import expr_to_tc

    def sized(x):
        return n.SizeVar(x.name) if isinstance(x, n.Ident) else n.map_children(x, sized)
    return tuple((name, expr_to_tc(e), _python(sized(e))) for name, e in checked.derived.items())


def _dim(d: str | int | n.Expr) -> str | int | Linear:
    """A declared size for the runtime; ``4 * H`` as a :class:`Linear`."""
    if isinstance(d, (str, int)):
        return d
    from ..sema.affine import linear_form
    from ..syntax.printer import expr_to_tc

    coeffs, const = linear_form(d)
    return Linear(expr_to_tc(d), tuple(coeffs.items()), const)


def _shape(exprs) -> tuple[str, ...]:
    """An extent is at least 0: range inference assumes sizes >= 1, so ``T - 1``
    (a tensor written where ``i + 1`` stays in a size-T input) is -1 at T = 0,
    where nothing is written."""
    return tuple(f"max({size_text(e)}, 0)" for e in exprs)


_CHECKS: dict[int, tuple[Any, SizeChecks]] = {}


def check_index_range(ranges: RangeInfo, sizes: dict[str, int]) -> None:
    """Refuse sizes for which some tensor would have more than 2**31 - 1
    elements or whose extent formulas leave int32 (``args.SizeChecks``); at
    a size of 0 prove the accesses again for these sizes
    (``bounds.check_call_sizes``).  The checks of ``ranges`` are made once."""
    entry = _CHECKS.get(id(ranges))
    if entry is None or entry[0] is not ranges:
        if len(_CHECKS) > 256:
            _CHECKS.clear()
        entry = _CHECKS[id(ranges)] = (ranges, SizeChecks(signature(ranges.checked, ranges, "llvm")))
    entry[1].check(sizes, at_zero=lambda sizes, shapes: check_call_sizes(ranges, sizes, shapes))


def shape_function(shapes: list[tuple[n.Expr, ...]]) -> Callable[[dict[str, int]], tuple[tuple[int, ...], ...]]:
    """``evaluate`` of every extent of ``shapes`` (each at least 0), compiled
    once into one Python function of the sizes."""
    return compile_shapes([_shape(shape) for shape in shapes])


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


def size_text(e: n.Expr) -> str:
    """Python text of a size expression over the dict ``s``, with ``evaluate``'s meaning."""
    return _python(e)


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
