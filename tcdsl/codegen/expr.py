"""Lowering typed tcdsl expressions to TIR expressions.

Rules (TC semantics, see SPEC 1.1):

1. Every node is computed in its own ``dtype`` (set by sema); operands are
   converted to the operation's type, and literals are emitted directly in
   the type they adapt to (so ``0.1`` next to a double is the double 0.1).
2. Integer ``/`` and ``%`` are floor division and its remainder (by a
   run-time 0 they give 0, as NumPy does: the hardware would trap); on floats
   ``/`` is true division and ``%`` is ``a - floor(a / b) * b``.
3. ``c ? a : b`` is a ``Select``, both sides computed (in a vector loop,
   TVM turns an ``if_then_else`` whose condition differs between lanes into
   one scalar branch per lane: a masked update ``m(i) > 0 ? a(i) : b(i)``
   ran 10x slower), ``&&`` and ``||`` are ``And``/``Or``; an
   ``if_then_else`` where a side has a guarded read (below), which is in
   its tensor only where the condition holds, a read at a clamped index or
   an integer division by a run-time value (TVM's simplifier takes a
   ``Select``'s condition as known in its sides, and may drop a clamp or a
   divisor's guard that it makes redundant there: ``t - d(l) >= 0 ?
   x(t - d(l)) : 0`` read ``x`` at -1), and in a checked kernel
   (codegen/checks.py), whose reads outside their tensors raise errors.  TVM's simplifier folds nested
   conditions into one ``&&`` that LLVM evaluates whole, so an operand may
   run where the program does not ask for it: a read that is in its tensor
   only where its conditions hold
   (``i > 0 ? A(i-1) : 0``, ``i >= 1 && A(i-1) > 0``; the ``guarded`` reads
   of polyhedral/bounds.py) has its indices clamped into the tensor through
   a conversion the simplifier cannot see through, and reads 0 from an empty
   tensor.  Where the condition holds, the clamp changes nothing.  A side
   whose only such nodes are reads at data-dependent indices (a gather,
   ``ty >= 0 && ty < H ? img(b, c, ty, tx) : 0`` in a bilinear warp) is a
   ``Select`` after all: those reads' clamps and the sizes they test go
   through a reinterpretation of their bits (:func:`_opaque`), of which
   the simplifier knows no bounds, so the condition cannot make the clamp
   redundant (a conversion through float64 keeps the bounds of its operand:
   TVM dropped the ``max(.., 0)`` of ``x(b, t - d(l))`` under ``t - d(l) >=
   0``).  An optical-flow warp at (4, 64, 64, 96), one thread: 16-26 ->
   6.5-11 ms (torch's ``grid_sample`` 3.1-8.8 on a busy machine).
4. Builtins come from :mod:`tcdsl.codegen.mathlib`; float16 is computed in float32.
5. Tensor indices are int32 (tensor values used as indices are converted).
"""
from __future__ import annotations

import contextlib
import math

from typing import Mapping

from tvm import tirx

from ..errors import InternalError
from ..syntax import nodes as n
from ..sema import types as ty
from . import checks, divisors, mathlib
from .intarith import (_division_by_min, _guarded_division, _is_min, _negate, _pow2, _safe_divisor,
                       _sized_division, _to_unsigned, _wrap_to, dtype_of, floordiv, floormod)

INDEX = "int32"


class Folded:
    """A temporary kept in ``size`` slots along dimension ``dim``
    (polyhedral/contract.py): ``buffer`` is what is allocated, element
    ``(.., i, ..)`` of the tensor lives at ``(.., i % size, ..)``.  Stands in
    for the tensor's buffer in the code generator's ``buffers`` maps; the
    places that build a load or a store of a tensor call :func:`physical`."""

    def __init__(self, buffer: tirx.Buffer, dim: int, size: int):
        self.buffer, self.dim, self.size = buffer, dim, size

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self):
        return self.buffer.shape


class Merged:
    """A tensor whose dimensions ``dim`` and ``dim + 1`` are read as one row
    index (two perfectly nested parallel loops run as one loop over their
    product, codegen/collapse.py): ``view`` is the buffer with the two
    dimensions merged; a load or store keeps the index of ``dim`` (the
    collapsed row) and drops that of ``dim + 1`` (bound to 0 there)."""

    def __init__(self, tensor: tirx.Buffer, view: tirx.Buffer, dim: int):
        self.tensor, self.view, self.dim = tensor, view, dim

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def shape(self):
        return self.tensor.shape


class _StandIn:
    """What stands for ``self.tensor`` in the code generator's ``buffers``
    maps: the tensor's dtype, name and shape."""

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def shape(self):
        return self.tensor.shape


class Remapped(_StandIn):
    """A tensor read through a copied panel whose element a load finds from
    the loops' current values rather than from the tensor's indices (a
    strided window ``x(b, c, 2 * t + k)``: no strided view of the panel
    exists; codegen/cpu_tiles.py, ``_Panels``).  ``locate()`` gives the
    panel's index for the load being built."""

    def __init__(self, tensor: tirx.Buffer, panel: tirx.Buffer, locate):
        self.tensor, self.panel, self.locate = tensor, panel, locate


class Partial(_StandIn):
    """A tensor read at several places of a statement, of which only those
    that do not move with the row tile's rows read a packed panel: the Gram
    matrix ``G(i, j) +=! X(n, i) * X(n, j)`` reads ``X(n, j)`` from the panel
    and ``X(n, i)`` from ``X``.  ``row_dims`` are the statement's index
    variables bound to the row (codegen/panels.py)."""

    def __init__(self, tensor, view, row_dims: frozenset):
        self.tensor, self.view, self.row_dims = tensor, view, row_dims

    def pick(self, indices: list):
        """The buffer a read at ``indices`` (the program's index expressions) uses."""
        for i in indices:
            for node in n.walk(i):
                if isinstance(node, n.IndexVar) and node.name in self.row_dims:
                    return self.tensor
        return self.view


_WIDE = [False]  # inside wide_indices()
_NONEMPTY: list = [None]  # inside assume_nonempty(): the conditions assumed


@contextlib.contextmanager
def assume_nonempty():
    """Reads lowered inside the context take the tensors they clamp into as
    nonempty: no ``if_then_else`` that gives 0 for an empty one.  Yields the
    list of the conditions assumed (over sizes), for the caller to test once
    around the code it made."""
    saved, _NONEMPTY[0] = _NONEMPTY[0], []
    try:
        yield _NONEMPTY[0]
    finally:
        _NONEMPTY[0] = saved


@contextlib.contextmanager
def wide_indices(on: bool = True):
    """Reads of global tensors lowered inside the context index them with
    64-bit values: their offsets are computed in 64 bits, which LLVM can
    turn into pointers bumped by a stride in a loop (it cannot widen 32-bit
    products that may overflow)."""
    saved, _WIDE[0] = _WIDE[0], on
    try:
        yield
    finally:
        _WIDE[0] = saved


def physical(buf, indices: list) -> tuple[tirx.Buffer, list]:
    """The buffer and indices a load or store of ``buf[indices]`` uses: the
    slot of a :class:`Folded` temporary, ``i & (size - 1)`` (``size`` is a
    power of two, and its indices are never negative: range inference and
    the bounds check keep them in the tensor).  Not ``%``: TVM lowers a
    remainder through a ``Let``, which an unrolled register tile cannot bind
    twice ("Let cannot bind the same var to two different values")."""
    if isinstance(buf, Merged):
        idx = list(indices)
        return buf.view, idx[:buf.dim + 1] + idx[buf.dim + 2:]
    if isinstance(buf, Remapped):
        return buf.panel, [buf.locate()]
    if not isinstance(buf, Folded):
        return buf, indices
    idx = list(indices)
    idx[buf.dim] = tirx.bitwise_and(idx[buf.dim], buf.size - 1) if buf.size > 1 else tirx.const(0, INDEX)
    return buf.buffer, idx


def lower_expr(e: n.Expr, env: Mapping[str, tirx.PrimExpr], buffers: Mapping[str, tirx.Buffer],
               dtype: str | None = None, wrap: bool = False, guarded: frozenset[int] = frozenset(),
               nonneg: frozenset[str] = frozenset()) -> tirx.PrimExpr:
    """``e`` as a TIR expression of type ``dtype`` (default: ``e.dtype``).
    ``wrap``: integer ``+ - *`` of 8 to 32 bits wrap around (two's complement)
    as in C and NumPy -- for values; index and size arithmetic stays plain.
    ``guarded``: the ``id``s of the reads to keep inside their tensor (rule 3).
    ``nonneg``: index variables that are never negative (the statement's
    domain says so): ``/`` and ``%`` of such values by a positive divisor
    are C's, without the corrections for a negative operand."""
    return _Lower(env, buffers, wrap, guarded, nonneg).as_type(e, dtype or e.dtype or INDEX)


class _Lower:
    def __init__(self, env, buffers, wrap: bool = False, guarded: frozenset[int] = frozenset(),
                 nonneg: frozenset[str] = frozenset()):
        self.env = env
        self.buffers = buffers
        self.wrap = wrap
        self.guarded = guarded
        self.nonneg = nonneg
        self.opaque = False  # clamps of gathered reads hidden from TVM's simplifier (a select's side)

    def as_type(self, e: n.Expr, dtype: str) -> tirx.PrimExpr:
        if isinstance(e, n.Const):
            return tirx.const(_const_value(e.value, dtype), dtype)
        if isinstance(e, n.Unary) and e.op == "-" and isinstance(e.operand, n.Const):
            return tirx.const(_const_value(-e.operand.value, dtype), dtype)
        x = self.lower(e)
        return _convert(x, dtype)

    def lower(self, e: n.Expr) -> tirx.PrimExpr:
        match e:
            case n.Const(value=v):
                return tirx.const(v, e.dtype or ("float32" if isinstance(v, float) else INDEX))
            case n.IndexVar(name=v) | n.SizeVar(name=v):
                x = self.env[v]
                return _convert(x, e.dtype or INDEX)
            case n.Access(tensor=t, indices=idx):
                buf = self.buffers[t]
                if isinstance(buf, Partial):
                    buf = buf.pick(idx)
                keep = id(e) in self.guarded
                # a folded dimension's slot (physical) is inside by construction
                inside = [keep and not (isinstance(buf, Folded) and k == buf.dim) for k in range(len(idx))]
                pb, pidx = physical(buf, [self._index(i, buf.shape[k], t, k, inside[k]) for k, i in enumerate(idx)])
                if _WIDE[0] and len(pidx) > 1 and pb.scope() == "global":
                    pidx = [tirx.Cast("int64", x) for x in pidx[:-1]] + pidx[-1:]
                load = tirx.BufferLoad(pb, pidx)
                clamped = [buf.shape[k] for k, i in enumerate(idx)
                           if (inside[k] or not _is_affine(i)) and not isinstance(buf.shape[k], tirx.IntImm)]
                if clamped and not checks.enabled():
                    # clamping cannot keep a read inside an empty tensor: such a read gives 0
                    if self.opaque:  # (the select's condition may imply the sizes positive)
                        clamped = [_opaque(x) for x in clamped]
                    nonempty = clamped[0] > 0
                    for x in clamped[1:]:
                        nonempty = tirx.And(nonempty, x > 0)
                    if _NONEMPTY[0] is not None:
                        _NONEMPTY[0].append(nonempty)
                        return load
                    return tirx.if_then_else(nonempty, load, tirx.const(0, str(buf.dtype)))
                return load
            case n.Cast(to=to, operand=x):
                return self.as_type(x, to)
            case n.Unary(op="-", operand=x):
                t = e.dtype or INDEX
                v = self.as_type(x, t)
                if self._wraps(t) and not t.startswith("u") and not isinstance(v, tirx.IntImm):
                    return _wrap_to(-tirx.Cast("int64", v), t)
                return _negate(v)
            case n.Unary(op="!", operand=x):
                return tirx.Not(self.as_type(x, "bool"))
            case n.Binary(op=op, lhs=a, rhs=b):
                return self._binary(e, op, a, b)
            case n.Select(cond=c, then=a, other=b):
                t = e.dtype or INDEX
                taken = [x for side in (a, b) for x in n.walk(side) if _taken_only(x, self.guarded)]
                if taken and not checks.enabled() and all(_gathered(x, self.guarded) for x in taken):
                    # gathers only (reads at data-dependent indices): with their clamps out of
                    # the simplifier's sight, both sides may run in every lane (a vector loop
                    # keeps a Select; an if_then_else on a lane's condition runs lane by lane)
                    saved, self.opaque = self.opaque, True
                    try:
                        return tirx.Select(self.as_type(c, "bool"), self.as_type(a, t), self.as_type(b, t))
                    finally:
                        self.opaque = saved
                if checks.enabled() or taken:
                    # (a checked read raises its error only where its select takes it; a guarded one
                    # is inside its tensor only there; and TVM's simplifier, which takes a Select's
                    # condition as known in its sides, may drop a clamp or a divisor's guard that
                    # the condition makes redundant there)
                    return tirx.if_then_else(self.as_type(c, "bool"), self.as_type(a, t), self.as_type(b, t))
                return tirx.Select(self.as_type(c, "bool"), self.as_type(a, t), self.as_type(b, t))
            case n.BuiltinCall(name=name, args=args):
                return self._builtin(e, name, args)
        raise InternalError(f"cannot lower {type(e).__name__}")

    def _index(self, e: n.Expr, extent: tirx.PrimExpr, tensor: str = "", dim: int = 0,
               keep: bool = False) -> tirx.PrimExpr:
        """Affine indices are kept in bounds by range inference (and proved by
        the bounds check); a non-affine or indirect one (``B(C(i))``, ``A(i*j)``)
        depends on data or escapes isl, so it is clamped into the tensor rather
        than read out of bounds (which could crash the process), or, in checked
        mode (codegen/checks.py), compared with the extent: out of range, the
        kernel raises a TcError naming dimension ``dim`` of ``tensor``.
        ``keep``: an affine index of a guarded read (rule 3), clamped."""
        # an index held in a wider integer (an int64 index tensor) is first
        # saturated into [-1, extent] in its own type, so that 2**32 + 1 is
        # past the end, not 1 once cut to 32 bits
        wide = e.dtype if e.dtype in ("int64", "uint32", "uint64") and not _is_affine(e) else None
        # index arithmetic stays plain, but on data (``idx(n) + 1``) it wraps as
        # values do: INT32_MAX + 1 is INT32_MIN, out of range, not an
        # overflow that LLVM may assume away (and with it the range test)
        saved, self.wrap = self.wrap, any(isinstance(x, n.Access) for x in n.walk(e))
        try:
            x = self.as_type(e, wide or INDEX)
        finally:
            self.wrap = saved
        if wide is not None:
            x = tirx.min(x, tirx.Cast(wide, extent))
            x = tirx.Cast(INDEX, x if wide.startswith("u") else tirx.max(x, tirx.const(-1, wide)))
        if _is_affine(e):
            if keep:
                # through float64 and back: exact, kept by TVM's simplifier (a
                # constant folds; LLVM folds the pair away after TVM is done)
                opaque = tirx.Cast(INDEX, tirx.Cast("float64", x))
                return tirx.max(tirx.min(opaque, extent - 1), 0)
            return x
        if checks.enabled():
            if not hasattr(self, "_guards"):  # the guards of this right-hand side (see checks.Guards)
                self._guards = checks.Guards()
            return self._guards.guard(x, extent, tensor, dim, e.span)
        if self.opaque:
            return tirx.max(tirx.min(_opaque(x), _opaque(extent) - 1), 0)
        return tirx.max(tirx.min(x, extent - 1), 0)

    def _binary(self, e: n.Binary, op: str, a: n.Expr, b: n.Expr) -> tirx.PrimExpr:
        if op in ("&&", "||"):
            x, y = self.as_type(a, "bool"), self.as_type(b, "bool")
            return tirx.And(x, y) if op == "&&" else tirx.Or(x, y)
        if op in _COMPARE:
            t = _operand_type(a, b)
            x, y = self.as_type(a, t), self.as_type(b, t)
            if t == "int32" and any(isinstance(v, tirx.IntImm) and v.value == -2**31 for v in (x, y)):
                x, y = tirx.Cast("int64", x), tirx.Cast("int64", y)  # TVM folds x == -2147483648 to false
            return _COMPARE[op](x, y)
        t = e.dtype or INDEX
        if op in ("+", "-", "*") and self._wraps(t) and not self._fits(e) and not self._narrow(e, t):
            # TVM's LLVM backend marks integer + - * nsw/nuw (no wrap): an
            # overflow would be poison that LLVM folds away.  In 64 bits these
            # cannot overflow; the result wraps back into t.
            if not t.startswith("u"):
                return _wrap_to(self._wide(e, t)[0], t)
            wide = "uint64" if op != "-" else "int64"
            x, y = self.as_type(a, t), self.as_type(b, t)
            xw, yw = tirx.Cast(wide, x), tirx.Cast(wide, y)
            r = xw + yw if op == "+" else xw - yw if op == "-" else xw * yw
            return _wrap_to(r, t)
        x, y = self.as_type(a, t), self.as_type(b, t)
        match op:
            case "+":
                return x + y
            case "-":
                return _negate(y) if isinstance(x, tirx.IntImm) and x.value == 0 else x - y
            case "*":
                return x * y
            case "/" | "%" if ty.is_int(t) and _is_min(y):
                return _division_by_min(op, x, t)
            case "/" | "%" if ty.is_int(t) and not _safe_divisor(y) and self.is_nonneg(b, t):
                if t == INDEX and divisors.active() and divisors.of_sizes(b) and self.is_nonneg(a, t) \
                        and (op == "/" or divisors.plain(x)):
                    return divisors.divide(op, x, y)  # (a multiplication: codegen/divisors.py)
                return _sized_division(op, x, y, self.is_nonneg(a, t))
            case "/" | "%" if ty.is_int(t) and not _safe_divisor(y):
                return _guarded_division(op, x, y, t)
            case "/" | "%" if ty.is_int(t) and isinstance(y, tirx.IntImm) and y.value > 0 and not _pow2(y) \
                    and self.is_nonneg(a, t):
                return tirx.truncdiv(x, y) if op == "/" else tirx.truncmod(x, y)
            case "/":
                if ty.is_int(t):
                    return floordiv(x, y)
                if _is_zero(y):
                    # IEEE x / 0 (TVM's constant folder refuses to divide by zero)
                    return x * tirx.const(float("inf"), t)
                return tirx.Div(x, y)
            case "%":
                return floormod(x, y) if ty.is_int(t) else x - tirx.floor(tirx.Div(x, y)) * y
            case "min":
                return tirx.min(x, y)
            case "max":
                return tirx.max(x, y)
        raise InternalError(f"unknown operator {op}")

    def _wide(self, e: n.Expr, t: str) -> tuple[tirx.PrimExpr, int]:
        """``e``, a signed integer of type ``t`` (at most 32 bits) that wraps,
        in int64 without its wrapping, and a bound on its magnitude: a tree
        of ``+ - *`` is wrapped once, at its root (wrapping is a ring
        homomorphism, so the result is the same as wrapping every step).
        An operand is wrapped first only where the int64 value could
        overflow.  TVM's simplifier takes time exponential in the nesting of
        casts (each level ~3.5x: a chain of ten wrapped int32 steps, an ROI
        pool's bin bounds, took minutes to compile)."""
        limit, leaf = 1 << 63, 1 << (ty.bits(t) - 1)  # |value| <= bound < 2**63
        if isinstance(e, n.Binary) and e.op in ("+", "-", "*") and (e.dtype or INDEX) == t and not self._fits(e):
            # (an operand of another type is converted: a leaf)
            (x, bx), (y, by) = (self._wide(v, t) if (v.dtype or INDEX) == t else self._leaf(v, t) for v in (e.lhs, e.rhs))
            combine = (lambda u, v: u * v) if e.op == "*" else (lambda u, v: u + v)
            # wrap the larger operand, then the other, until the result fits in int64
            for _ in range(2):
                if combine(bx, by) < limit:
                    break
                if bx >= by:
                    x, bx = tirx.Cast("int64", _wrap_to(x, t)), leaf
                else:
                    y, by = tirx.Cast("int64", _wrap_to(y, t)), leaf
            r = x + y if e.op == "+" else x - y if e.op == "-" else x * y
            return r, combine(bx, by)
        if isinstance(e, n.Unary) and e.op == "-" and (e.dtype or INDEX) == t == (e.operand.dtype or INDEX) \
                and not isinstance(e.operand, n.Const):
            x, bx = self._wide(e.operand, t)
            return -x, bx
        return self._leaf(e, t)

    def _narrow(self, e: n.Expr, t: str) -> bool:
        """A signed ``e`` whose value cannot leave ``t``: sums and products of
        narrower integers (``int32(xq(n, k)) * int32(wq(o, k))`` of two int8
        tensors), computed in ``t`` without wrapping (a vector multiply of
        int32, not of int64)."""
        return not t.startswith("u") and self._bound(e, t) < 1 << (ty.bits(t) - 1)

    def _bound(self, e: n.Expr, t: str) -> int:
        """A bound on the magnitude of ``e``'s value as :meth:`_wide` computes it."""
        if isinstance(e, n.Binary) and e.op in ("+", "-", "*") and (e.dtype or INDEX) == t and not self._fits(e):
            bx, by = (self._bound(v, t) if (v.dtype or INDEX) == t else self._leaf_bound(v, t) for v in (e.lhs, e.rhs))
            return bx * by if e.op == "*" else bx + by
        if isinstance(e, n.Unary) and e.op == "-" and (e.dtype or INDEX) == t == (e.operand.dtype or INDEX) \
                and not isinstance(e.operand, n.Const):
            return self._bound(e.operand, t)
        return self._leaf_bound(e, t)

    def _leaf(self, e: n.Expr, t: str) -> tuple[tirx.PrimExpr, int]:
        x = self.as_type(e, t)
        return tirx.Cast("int64", x), abs(x.value) if isinstance(x, tirx.IntImm) else self._leaf_bound(e, t)

    @staticmethod
    def _leaf_bound(e: n.Expr, t: str) -> int:
        """A bound on ``e`` converted to ``t``: a constant's magnitude; a value
        of a narrower integer type (``int32(xq(n, k))`` of an int8 tensor)
        keeps its range; anything else may be any value of ``t``."""
        if isinstance(e, n.Const) and isinstance(e.value, (bool, int)) and not str(t).startswith("u"):
            v = int(e.value)
            if -(1 << (ty.bits(t) - 1)) <= v < 1 << (ty.bits(t) - 1):
                return abs(v)
        src = e.dtype or t
        if isinstance(e, n.Cast) and ty.is_int(src) and e.operand.dtype and ty.is_int(e.operand.dtype) \
                and ty.bits(e.operand.dtype) < ty.bits(src) \
                and (e.operand.dtype.startswith("u") or e.operand.dtype == "bool" or not src.startswith("u")):
            src = e.operand.dtype  # (a widening that keeps the value: int32 of an int8 or a uint8)
        if src == "bool":
            return 1
        if ty.is_int(src) and ty.bits(src) < ty.bits(t):
            return (1 << ty.bits(src)) - 1 if src.startswith("u") else 1 << (ty.bits(src) - 1)
        return 1 << (ty.bits(t) - 1)

    def _wraps(self, t: str) -> bool:
        return self.wrap and ty.is_int(t) and ty.bits(t) <= 32

    def _fits(self, e: n.Expr) -> bool:
        """``e`` is a product of sizes that cannot leave int32: its sizes are
        dimensions of one tensor (the runtime refuses a tensor of more than
        2**31 - 1 elements, runtime/args.py), or with the sizes fixed, its
        value is below 2**31.  Such a product needs no wrapping and is >= 0."""
        names = []
        stack = [e]
        while stack:
            x = stack.pop()
            if isinstance(x, n.Binary) and x.op == "*":
                stack += [x.lhs, x.rhs]
            elif isinstance(x, n.SizeVar) and x.name in self.env:
                names.append(x.name)
            else:
                return False
        vals = [self.env[v] for v in names]
        if all(isinstance(v, tirx.IntImm) for v in vals):
            return math.prod(v.value for v in vals) < 2**31
        for buf in self.buffers.values():
            dims = list(getattr(buf, "shape", ()))
            for v in vals:
                k = next((i for i, d in enumerate(dims) if d.same_as(v)), None)
                if k is None:
                    break
                dims.pop(k)
            else:
                return True
        return False

    def is_nonneg(self, e: n.Expr, t: str) -> bool:
        """``e``, computed in the integer type ``t``, is never negative: sizes,
        index variables of ``self.nonneg``, constants >= 0, and their sums,
        products (that do not wrap), quotients, remainders, min and max."""
        match e:
            case n.Const(value=v):
                return isinstance(v, int) and v >= 0
            case n.SizeVar():
                return True
            case n.IndexVar(name=v):
                return v in self.nonneg
            case n.Binary(op="+" | "*", lhs=a, rhs=b) if not self._wraps(t):
                return self.is_nonneg(a, t) and self.is_nonneg(b, t)
            case n.Binary(op="*") if self._fits(e):
                return True
            case n.Binary(op="/" | "min", lhs=a, rhs=b):
                return self.is_nonneg(a, t) and self.is_nonneg(b, t)
            case n.Binary(op="%", rhs=b):
                return self.is_nonneg(b, t)  # x % 0 is 0; else it has the divisor's sign
            case n.Binary(op="max", lhs=a, rhs=b):
                return self.is_nonneg(a, t) or self.is_nonneg(b, t)
            case n.Select(then=a, other=b):
                return self.is_nonneg(a, t) and self.is_nonneg(b, t)
        return False

    def _builtin(self, e: n.BuiltinCall, name: str, args) -> tirx.PrimExpr:
        if name not in mathlib.LOWERINGS:
            raise InternalError(f"unknown builtin {name}")
        compute = "float32" if e.dtype == "float16" else e.dtype
        out = mathlib.lower(name, [self.as_type(a, compute) for a in args], compute)
        return out if dtype_of(out) == e.dtype else tirx.Cast(e.dtype, out)


def _convert(x: tirx.PrimExpr, dtype: str) -> tirx.PrimExpr:
    """``x`` as ``dtype``.  A signed integer becomes unsigned through
    non-negative masks (:func:`_to_unsigned`): TVM's simplifier pushed a plain
    ``uint32(-i)`` into the vector ramp of ``-i`` and failed to make the
    constant ``uint32(-1)`` (a reinterpret instead trips LLVM codegen on a
    constant 0)."""
    src = dtype_of(x)
    if src == dtype:
        return x
    if dtype.startswith("u") and src.startswith("int"):
        if isinstance(x, tirx.IntImm):
            return tirx.const(x.value % (1 << ty.bits(dtype)), dtype)
        # No Let here: a caller may repeat the expression (a guarded division
        # uses its operands twice), and two Lets of one variable are rejected.
        return _to_unsigned(x, dtype)
    return tirx.Cast(dtype, x)


def _taken_only(x: n.Expr, guarded) -> bool:
    """A node of a select's side that must be computed only where the side is
    taken: a guarded read, a read at a clamped index, an integer division or
    remainder by a run-time value (its guard against 0 is a max that a
    condition ``d > 0`` makes redundant)."""
    if isinstance(x, n.Access):
        return id(x) in guarded or not all(map(_is_affine, x.indices))
    return isinstance(x, n.Binary) and x.op in ("/", "%") and ty.is_int(x.dtype or INDEX) \
        and not isinstance(x.rhs, n.Const)


def _gathered(x: n.Expr, guarded) -> bool:
    """``x`` (a node :func:`_taken_only` names) is a read at a clamped index, not a guarded one."""
    return isinstance(x, n.Access) and id(x) not in guarded


def _opaque(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """The int32 ``x``, its bits reinterpreted as a float32 and back: TVM's
    simplifier knows nothing of the value, not even bounds that ``x`` has
    under a select's condition (a conversion through float64 keeps them:
    ``v >= 0`` made ``max(.., 0)`` of its clamp redundant); LLVM folds the
    pair away."""
    if isinstance(x, tirx.IntImm):
        return x
    return tirx.reinterpret(INDEX, tirx.reinterpret("float32", x))


def _is_affine(e: n.Expr) -> bool:
    from ..sema.affine import NotAffine, to_isl

    try:
        to_isl(e)
        return True
    except NotAffine:
        return False


def _is_zero(x: tirx.PrimExpr) -> bool:
    from tvm import sym

    x = sym.Analyzer().simplify(x)
    return isinstance(x, (tirx.FloatImm, tirx.IntImm)) and x.value == 0


def _operand_type(a: n.Expr, b: n.Expr) -> str:
    """The type a comparison of ``a`` and ``b`` is done in (``types.comparison_type``)."""
    return ty.comparison_type(a.dtype or INDEX, b.dtype or INDEX, a.value if isinstance(a, n.Const) else None,
                              b.value if isinstance(b, n.Const) else None)


def _const_value(v, dtype: str):
    return ty.literal(v, dtype)  # TVM rejects literals outside the type's range


_COMPARE = {"==": tirx.EQ, "!=": tirx.NE, "<": tirx.LT, "<=": tirx.LE, ">": tirx.GT, ">=": tirx.GE}
