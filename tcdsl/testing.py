"""A reference interpreter: ``evaluate(program, inputs, entry=None)``.

A slow, direct NumPy implementation of the language (SPEC.md section 1), used
as the oracle of the property tests.  It shares the front end with the
compiler (parse, check, infer_ranges: the ranges *are* the language's
semantics) but executes every statement itself, without isl schedules or TVM:

1. Statements run in textual order, each as a whole comprehension.  ``for``
   loops run in order with their variable bound; ``if`` picks a branch.
2. A comprehension iterates its domain: the box of its variables' ranges,
   evaluated with the actual sizes, filtered by the exact domain (where
   conditions, ``if``s and loop ranges).  ``op=!`` first sets its written
   range to the identity of ``op``.  Reductions fold the right-hand side
   into the tensor in the lexicographic order of (lhs variables, reduction
   variables), which is the program order.
3. The right-hand side is evaluated vectorised over the whole domain.  When
   it reads the tensor being written at a place the statement also writes
   (other than the very element a point of ``=`` writes), the statement is
   re-run point by point in program order instead.
4. Expressions follow the compiler's typing rules (each node in its dtype,
   operands converted, literals adapting to their context, integer ``/`` and
   ``%`` rounding toward negative infinity, ``min``/``max`` as ``a < b ? a : b``,
   ``c ? a : b`` evaluating only the taken side).  Builtins use
   ``BUILTINS[name].numpy``; float16 math is done in float32.

Outputs and temporaries start as zeros.  A read out of bounds (on a point
that is really evaluated) raises :class:`OutOfBoundsRead` (undefined
behaviour in compiled code).  Integer ``x / 0`` and ``x % 0`` are 0, as in
NumPy and in compiled code.
"""
from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import InternalError
from .codegen.signature import check_index_range, evaluate as evaluate_size, signature
from .runtime.args import bind_sizes, prepare_input
from .sema import builtins as bt
from .sema import types as ty
from .sema.affine import pwaff_to_expr, set_to_cond
from .sema.check import check
from .sema.ranges import StmtInfo, infer_ranges
from .source import Source
from .syntax import nodes as n
from .syntax.parse import parse

__all__ = ["evaluate", "OutOfBoundsRead", "TooLarge", "MAX_POINTS"]

INDEX = "int32"


class OutOfBoundsRead(IndexError):
    """A read that the program really performs falls outside its tensor."""


class TooLarge(MemoryError):
    """A statement's domain has more points than :data:`MAX_POINTS`."""


# The most points one statement may have (the interpreter holds them all at once).
MAX_POINTS = 50_000_000


def evaluate(program: str | os.PathLike | n.Program, inputs: Sequence[Any], entry: str | None = None,
             sizes: dict[str, int] | None = None):
    """Run ``program`` (TC text, a ``.tc`` path or a parsed Program) on ``inputs``;
    ``sizes`` gives sizes as a kernel call does (``k(x, S=5)``: free sizes).

    Returns the single output, or a tuple in the ``-> (...)`` order, like a
    compiled kernel's call.  Raises the same ``TcError``s as compiling and
    calling for bad programs and bad inputs."""
    if isinstance(program, n.Program):
        checked, ranges, tree = _frontend(program, entry)
    else:
        source = Source.load(program)
        checked, ranges, tree = _frontend_of_text(source.text, source.name, entry)
    params = checked.node.params
    if len(inputs) != len(params):
        from .errors import TcShapeError

        raise TcShapeError(f"'{checked.node.name}' takes {len(params)} inputs, but {len(inputs)} were given")
    args = [prepare_input(p.name, x, checked.tensors[p.name].dtype, len(p.type.dims))
            for p, x in zip(params, inputs)]
    sig = signature(checked, ranges, "llvm")
    sizes = bind_sizes(sig.inputs, args, {}, sizes, checked.sizes, checked.node.name, sig.derived)
    check_index_range(ranges, sizes)
    tensors: dict[str, np.ndarray] = {p.name: np.asarray(a.value) for p, a in zip(params, args)}
    for t, info in checked.tensors.items():
        if info.role != "input":
            shape = tuple(max(0, evaluate_size(e, sizes)) for e in ranges.extent_exprs(t))
            tensors[t] = np.zeros(shape, dtype=info.dtype)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _Interpreter(tensors).block(tree, dict(sizes))
    outs = [tensors[o] for o in checked.outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)


# ------------------------------------------------------------------ planning
@functools.lru_cache(maxsize=64)
def _frontend_of_text(text: str, name: str, entry: str | None):
    return _frontend(parse(Source(text, name)), entry)


def _frontend(program: n.Program, entry: str | None):
    checked = check(program, entry)
    ranges = infer_ranges(checked)
    return checked, ranges, _plan(checked.node.body, iter(ranges.stmts), ranges.size_context)


@dataclass
class _Box:
    """A set of integer points over named variables, as tcdsl expressions over
    the parameters: per variable [lo, hi), where the bounds are defined, and
    the exact membership condition."""

    vars: tuple[str, ...]
    bounds: tuple[tuple[n.Expr, n.Expr], ...]
    defined: n.Expr | None  # where the bounds are defined (None: nowhere, the set is empty)
    member: n.Expr | None  # membership over parameters and variables (None: empty)


@dataclass
class _Stmt:
    info: StmtInfo
    domain: _Box
    init: _Box | None


def _box(s, vars_: tuple[str, ...], context) -> _Box:
    """The box of ``s``.  Conditions implied by ``context`` (sizes >= 1) are
    left out, as the compiled code leaves them out: a size of 0 at a call
    empties loops and tensors, it does not switch off unrelated statements."""
    if s.is_empty():
        return _Box(vars_, (), None, None)
    context = context.align_params(s.get_space().params())
    bounds, defined = [], None
    for k in range(len(vars_)):
        lo, hi = s.dim_min(k).gist_params(context), s.dim_max(k).add_constant_val(1).gist_params(context)
        dom = lo.domain() & hi.domain()
        defined = dom if defined is None else defined & dom
        bounds.append((pwaff_to_expr(lo), pwaff_to_expr(hi)))
    params = s.params() if defined is None else defined
    return _Box(vars_, tuple(bounds), _cond(params.gist(context)), _cond(s.gist_params(context)))


def _cond(s) -> n.Expr | None:
    s = s.compute_divs().coalesce()  # explicit divs: set_to_cond cannot print unknown ones
    return None if s.is_empty() else set_to_cond(s)


def _plan(stmts, infos, context) -> list:
    out = []
    for s in stmts:
        match s:
            case n.For():
                out.append(("for", s, _plan(s.body, infos, context)))
            case n.If():
                out.append(("if", s, _plan(s.then, infos, context), _plan(s.orelse, infos, context)))
            case n.Comprehension():
                info = next(infos)
                own = info.vars[: len(info.vars) - len(info.comp.reduction_vars)]
                init = _box(info.init_domain, own, context) if info.comp.initializes else None
                out.append(("stmt", _Stmt(info, _box(info.domain, info.vars, context), init)))
            case _:
                raise InternalError(f"unexpected statement {type(s).__name__}")
    return out


# ------------------------------------------------------------------ running
class _Interpreter:
    def __init__(self, tensors: dict[str, np.ndarray]):
        self.tensors = tensors

    def block(self, items: list, env: dict[str, int]) -> None:
        for it in items:
            match it:
                case ("for", s, body):
                    for t in range(_scalar(s.lo, env), _scalar(s.hi, env)):
                        self.block(body, {**env, s.var: t})
                case ("if", s, then, orelse):
                    self.block(then if _scalar(s.cond, env) else orelse, env)
                case ("stmt", st):
                    self.comprehension(st, env)

    def comprehension(self, st: _Stmt, env: dict[str, int]) -> None:
        comp = st.info.comp
        target = self.tensors[comp.tensor]
        dtype = target.dtype.name
        if st.init is not None:
            points = _points(st.init, env)
            if points is not None:
                grid, mask = points
                idx = self._lhs(comp, grid, env, target)
                ident = np.asarray(ty.identity(comp.reduction, dtype)).astype(dtype)
                _scatter(target, idx, mask, np.broadcast_to(ident, mask.shape))
        points = _points(st.domain, env)
        if points is None:
            return
        grid, mask = points
        n_own = len(st.info.vars) - len(comp.reduction_vars)
        ev = _Eval(self.tensors, env, grid, watch=comp.tensor)
        value = np.broadcast_to(ev.as_type(comp.rhs, dtype, mask), mask.shape)
        idx = self._lhs(comp, grid, env, target)
        if self._conflict(comp, ev.watched, idx, mask, target):
            self._pointwise(st, grid, mask, env, target)
            return
        if comp.reduction is None:
            _scatter(target, idx, mask, value)
            return
        own_shape = mask.shape[:n_own]
        own_idx = tuple(np.broadcast_to(i, mask.shape)[(...,) + (0,) * (mask.ndim - n_own)] for i in idx)
        acc = target[own_idx].copy() if target.size else np.zeros(own_shape, dtype)
        for r in np.ndindex(*mask.shape[n_own:]):
            sel = (...,) + r
            acc = np.where(mask[sel], _combine(comp.reduction, acc, value[sel], dtype), acc)
        touched = mask.reshape(own_shape + (-1,)).any(axis=-1)
        _scatter(target, own_idx, touched, acc)

    def _lhs(self, comp: n.Comprehension, grid: dict, env: dict, target: np.ndarray) -> list[np.ndarray]:
        out = []
        for k, e in enumerate(comp.indices):
            i = np.asarray(_int(e, env, grid))  # a variable, H + j, t - 1, ...
            if np.any(i < 0) or np.any(i >= target.shape[k]):
                raise InternalError(f"'{comp.tensor}' written out of its extent along dimension {k}")
            out.append(i)
        return out

    def _conflict(self, comp, watched, idx, mask, target) -> bool:
        """Does the rhs read an element this statement writes (besides, for
        ``=``, the element its own point writes)?"""
        if not watched:
            return False
        shape = target.shape
        flat_w = np.ravel_multi_index(tuple(np.broadcast_to(i, mask.shape) for i in idx), shape) \
            if target.ndim else np.zeros(mask.shape, np.int64)
        written = np.zeros(max(1, target.size), bool)
        written[flat_w[mask]] = True
        for ridx, active in watched:
            active = np.broadcast_to(active, mask.shape) & mask
            flat_r = np.broadcast_to(ridx, mask.shape)
            hits = written[flat_r] & active
            if comp.reduction is not None:
                if hits.any():
                    return True
            elif (hits & (flat_r != flat_w)).any():
                return True
        return False

    def _pointwise(self, st: _Stmt, grid: dict, mask: np.ndarray, env: dict, target: np.ndarray) -> None:
        comp = st.info.comp
        dtype = target.dtype.name
        axes = [np.ravel(grid[v]) for v in st.info.vars]
        for point in np.ndindex(*mask.shape):
            if not mask[point]:
                continue
            g = {v: np.asarray(axes[k][point[k]]) for k, v in enumerate(st.info.vars)}
            value = _Eval(self.tensors, env, g).as_type(comp.rhs, dtype, np.asarray(True))
            idx = tuple(int(i) for i in self._lhs(comp, g, env, target))
            if comp.reduction is None:
                target[idx] = value
            else:
                target[idx] = _combine(comp.reduction, target[idx], value, dtype)


def _scatter(target: np.ndarray, idx: list, mask: np.ndarray, values: np.ndarray) -> None:
    """``target[idx] = values`` at the points of ``mask``."""
    if target.ndim == 0:
        if mask.any():
            target[()] = np.broadcast_to(values, mask.shape)[mask][-1]
        return
    target[tuple(np.broadcast_to(i, mask.shape)[mask] for i in idx)] = np.broadcast_to(values, mask.shape)[mask]


def _points(box: _Box, env: dict[str, int]):
    """The grid (variable -> broadcastable int64 array) and the membership mask."""
    if box.member is None or not _scalar(box.defined, env):
        return None
    grid = {}
    rank = len(box.vars)
    for k, (v, (lo, hi)) in enumerate(zip(box.vars, box.bounds)):
        a, b = _scalar(lo, env), _scalar(hi, env)
        shape = [1] * rank
        shape[k] = max(0, b - a)
        grid[v] = np.arange(a, max(a, b), dtype=np.int64).reshape(shape)
    full = tuple(max(0, g.shape[k]) for k, g in enumerate(grid.values()))
    if 0 in full:
        return None
    if np.prod(full, dtype=np.float64) > MAX_POINTS:
        raise TooLarge(f"a statement with {' x '.join(map(str, full))} points (at most {MAX_POINTS})")
    mask = np.broadcast_to(np.asarray(_int(box.member, env, grid), dtype=bool), full)
    return (grid, mask) if mask.any() else None


def _scalar(e: n.Expr, env: dict[str, int]) -> int:
    return int(_int(e, env, {}))


def _int(e: n.Expr, env: dict, grid: dict):
    """Integer arithmetic over sizes, loop and index variables (size expressions,
    bounds and domain conditions), exact in int64, vectorised over ``grid``."""
    match e:
        case n.Const(value=v):
            return np.int64(v)
        case n.IndexVar(name=v) | n.SizeVar(name=v):
            return grid[v] if v in grid else np.int64(env[v])
        case n.Unary(op="-", operand=x):
            return -_int(x, env, grid)
        case n.Unary(op="!", operand=x):
            return np.logical_not(_int(x, env, grid))
        case n.Select(cond=c, then=a, other=b):
            return np.where(_int(c, env, grid), _int(a, env, grid), _int(b, env, grid))
        case n.Binary(op=op, lhs=a, rhs=b):
            return _INT_OPS[op](_int(a, env, grid), _int(b, env, grid))
    raise InternalError(f"not a size expression: {type(e).__name__}")


_INT_OPS = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.floor_divide, "%": np.mod,
    "min": np.minimum, "max": np.maximum, "==": np.equal, "!=": np.not_equal, "<": np.less,
    "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "&&": np.logical_and, "||": np.logical_or,
}


def _combine(op: str, old, value, dtype: str):
    if op in ("argmax", "argmin"):  # the rhs computes the new index (sema/sizes.py: arg_reduction)
        return value
    if dtype == "bool":  # + and max are "any", * and min are "all" (as compiled)
        return np.logical_or(old, value) if op in ("+", "max") else np.logical_and(old, value)
    match op:
        case "+":
            return (old + value).astype(dtype)
        case "*":
            return (old * value).astype(dtype)
        case "min":
            return np.where(old < value, old, value)
        case "max":
            return np.where(old > value, old, value)
    raise InternalError(f"unknown reduction {op}")


# --------------------------------------------------------------- expressions
class _Eval:
    """Typed evaluation of a right-hand side over a grid of points.

    ``mask`` says which points really evaluate a node: the untaken side of
    ``c ? a : b`` and the right side of ``a && b`` where ``a`` is false (of
    ``a || b`` where it is true) may read out of bounds.  Reads of ``watch`` are recorded
    (flat index, active mask) for the conflict check."""

    def __init__(self, tensors, env, grid, watch: str | None = None):
        self.tensors = tensors
        self.env = env
        self.grid = grid
        self.watch = watch
        self.watched: list[tuple[np.ndarray, np.ndarray]] = []

    def as_type(self, e: n.Expr, dtype: str, mask) -> np.ndarray:
        if isinstance(e, n.Const):
            return _const(e.value, dtype)
        if isinstance(e, n.Unary) and e.op == "-" and isinstance(e.operand, n.Const):
            return _const(-e.operand.value, dtype)
        return _cast(self.value(e, mask), dtype)

    def value(self, e: n.Expr, mask) -> np.ndarray:
        match e:
            case n.Const(value=v):
                return _const(v, e.dtype or ("float32" if isinstance(v, float) else INDEX))
            case n.IndexVar(name=v) | n.SizeVar(name=v):
                x = self.grid[v] if v in self.grid else np.int64(self.env[v])
                return _cast(_cast(x, INDEX), e.dtype or INDEX)
            case n.Access():
                return self._read(e, mask)
            case n.Cast(to=to, operand=x):
                return self.as_type(x, to, mask)
            case n.Unary(op="-", operand=x):
                return np.negative(self.as_type(x, e.dtype or INDEX, mask))
            case n.Unary(op="!", operand=x):
                return np.logical_not(self.as_type(x, "bool", mask))
            case n.Binary(op=op, lhs=a, rhs=b):
                return self._binary(e, op, a, b, mask)
            case n.Select(cond=c, then=a, other=b):
                t = e.dtype or INDEX
                cond = self.as_type(c, "bool", mask)
                x = self.as_type(a, t, np.logical_and(mask, cond))
                y = self.as_type(b, t, np.logical_and(mask, np.logical_not(cond)))
                return np.where(cond, x, y)
            case n.BuiltinCall(name=name, args=args):
                compute = "float32" if e.dtype == "float16" else e.dtype
                xs = [self.as_type(a, compute, mask) for a in args]
                return _cast(_cast(np.asarray(bt.BUILTINS[name].numpy(*xs)), compute), e.dtype)
        raise InternalError(f"cannot evaluate {type(e).__name__}")

    def _read(self, e: n.Access, mask) -> np.ndarray:
        arr = self.tensors[e.tensor]
        idx = [np.asarray(self.as_type(i, INDEX, mask), dtype=np.int64) for i in e.indices]
        shape = np.broadcast_shapes(np.shape(mask), *(np.shape(i) for i in idx))
        idx = [np.broadcast_to(i, shape) for i in idx]
        bad = np.zeros(shape, bool)
        for k, i in enumerate(idx):
            bad |= (i < 0) | (i >= arr.shape[k])
        bad &= np.broadcast_to(mask, shape)
        if bad.any():
            where = f"{e.span.source.name}:{e.span.line}:{e.span.col}: " if e.span is not None else ""
            point = tuple(int(i[bad][0]) for i in idx)
            raise OutOfBoundsRead(f"{where}'{e.tensor}{point}' is read, but '{e.tensor}' has shape {arr.shape}")
        if arr.size == 0:
            return np.zeros(shape, arr.dtype)
        clipped = tuple(np.clip(i, 0, arr.shape[k] - 1) for k, i in enumerate(idx))
        if e.tensor == self.watch:
            flat = np.ravel_multi_index(clipped, arr.shape) if arr.ndim else np.zeros(shape, np.int64)
            self.watched.append((flat, np.broadcast_to(mask, shape)))
        return arr[clipped] if arr.ndim else np.broadcast_to(arr, shape)

    def _binary(self, e: n.Binary, op: str, a: n.Expr, b: n.Expr, mask) -> np.ndarray:
        if op in ("&&", "||"):  # the right side is read only where the left one does not decide
            x = self.as_type(a, "bool", mask)
            y = self.as_type(b, "bool", np.logical_and(mask, x if op == "&&" else np.logical_not(x)))
            return np.logical_and(x, y) if op == "&&" else np.logical_or(x, y)
        if op in _COMPARE:
            t = _operand_type(a, b)
            return _COMPARE[op](self.as_type(a, t, mask), self.as_type(b, t, mask))
        t = e.dtype or INDEX
        x, y = self.as_type(a, t, mask), self.as_type(b, t, mask)
        match op:
            case "+" | "-" | "*":
                return _cast(_ARITH[op](x, y), t)
            case "/" if ty.is_int(t):  # NumPy's rules: x / 0 == x % 0 == 0, MIN / -1 wraps
                return _cast(np.floor_divide(x, y), t)
            case "%" if ty.is_int(t):
                return _cast(np.mod(x, y), t)
            case "/":
                return _cast(np.true_divide(x, y), t)
            case "%":
                return _cast(x - _cast(np.floor(_cast(np.true_divide(x, y), t)), t) * y, t)
            case "min":
                return np.where(x < y, x, y)
            case "max":
                return np.where(x > y, x, y)
        raise InternalError(f"unknown operator {op}")


_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply}
_COMPARE = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
            ">=": np.greater_equal}


def _operand_type(a: n.Expr, b: n.Expr) -> str:
    """The type a comparison of ``a`` and ``b`` is done in (``types.comparison_type``)."""
    return ty.comparison_type(a.dtype or INDEX, b.dtype or INDEX, a.value if isinstance(a, n.Const) else None,
                              b.value if isinstance(b, n.Const) else None)


def _const(v: int | float, dtype: str) -> np.ndarray:
    return np.asarray(ty.literal(v, dtype), dtype=dtype)


def _cast(x, dtype: str) -> np.ndarray:
    """Conversion as compiled: float to int truncates, anything to bool is ``!= 0``
    (NaN is false)."""
    x = np.asarray(x)
    if x.dtype.name == dtype:
        return x
    if dtype == "bool":
        return np.logical_or(x < 0, x > 0) if x.dtype.kind == "f" else x != 0
    return x.astype(dtype)

