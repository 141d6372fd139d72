"""Work that does not change along a vectorized loop, done once before it.

A row's normalisation divides every element by a value of the row (a
softmax's ``y(n, c) / s(n)``) or applies a call to it (a layer norm's
``rsqrt(var(n) + 1e-5)``).  In the innermost vectorized loop such a term is
computed again for every vector: a vector division costs as much as ten
multiplications, and LLVM does not move the load of ``s(n)`` out of the loop
(it cannot tell that the stores to ``y`` leave ``s`` alone).
:func:`hoist` binds each such term to a variable computed once before the
loop, and turns ``a / d`` with an invariant ``d`` read from a tensor into
``a * (1 / d)`` (a difference of rounding only, as PyTorch's softmax does).

A term is invariant when it reads no loop variable, no variable bound inside
the loop, and no buffer the loop stores to; it is hoisted only from the part
of an expression that every iteration evaluates (not from a select's
branches, the arguments of ``if_then_else`` or the right operand of ``&&`` /
``||``): a read there may be valid only where its condition holds.  The
caller evaluates the bindings only when the loop runs at least once.
"""
from __future__ import annotations

import functools

import tvm
import tvm_ffi
from tvm import sym, tirx

from . import divisors
from .expr import INDEX, dtype_of as _dtype
from .lower import _LOAD, has_node, loads
from .scratch import STACK

_BINARY = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod, tirx.Min, tirx.Max,
           tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE)


class _Hoist:
    def __init__(self, loop_vars, stored, bound):
        self.loop_vars = loop_vars
        self.stored = stored
        self.bound = bound
        self.bindings: list[tuple[tirx.Var, tirx.PrimExpr]] = []

    # ---------------------------------------------------------------- analysis
    def invariant(self, e) -> bool:
        if isinstance(e, tirx.Var):
            return not any(e.same_as(v) for v in self.loop_vars) and not any(e.same_as(v) for v in self.bound)
        if isinstance(e, _LOAD):
            return not any(e.source.data.same_as(b) for b in self.stored) and all(self.invariant(i) for i in e.indices)
        if isinstance(e, (tirx.IntImm, tirx.FloatImm, tvm.ir.expr.StringImm)):
            return True
        if isinstance(e, tvm.ir.expr.Call):
            return _pure(e) and all(self.invariant(a) for a in e.args)
        if isinstance(e, _BINARY + (tirx.And, tirx.Or)):
            return self.invariant(e.a) and self.invariant(e.b)
        if isinstance(e, (tirx.Cast, tirx.Not)):
            return self.invariant(e.value if isinstance(e, tirx.Cast) else e.a)
        if isinstance(e, tirx.Select):
            return all(self.invariant(x) for x in (e.condition, e.true_value, e.false_value))
        return False  # Let and anything else: left in place

    def bind(self, e, name: str = "inv") -> tirx.Var:
        for v, value in self.bindings:
            if tvm_ffi.structural_equal(value, e):
                return v
        v = tirx.Var(f"{name}{len(self.bindings)}", _dtype(e))
        self.bindings.append((v, e))
        return v

    # ---------------------------------------------------------------- rewrite
    def expr(self, e):
        if not _dtype(e).startswith("float"):
            return e
        if isinstance(e, tvm.ir.expr.Call) and self.invariant(e) and _is_math(e):
            return self.bind(e)
        if isinstance(e, tirx.Div) and self.invariant(e.b) and not self.invariant(e.a) and loads(e.b):
            one = tirx.FloatImm(_dtype(e), 1.0)
            return tirx.Mul(self.expr(e.a), self.bind(tirx.Div(one, e.b), "rcp"))
        if isinstance(e, _BINARY):
            return type(e)(self.expr(e.a), self.expr(e.b))
        if isinstance(e, tirx.Cast):
            return tirx.Cast(_dtype(e), self.expr(e.value))
        if isinstance(e, tirx.Select):  # only the condition is evaluated every time
            return tirx.Select(e.condition, e.true_value, e.false_value)
        if isinstance(e, tirx.Let):
            return tirx.Let(e.var, self.expr(e.value), self.expr(e.body))
        if isinstance(e, tvm.ir.expr.Call) and _is_math(e):
            return tvm.ir.expr.Call(e.op, [self.expr(a) for a in e.args], attrs=e.attrs, ret_ty=_dtype(e))
        return e

    def stmt(self, s):
        if isinstance(s, tirx.BufferStore):
            return tirx.BufferStore(s.buffer, self.expr(s.value), s.indices)
        if isinstance(s, tirx.SeqStmt):
            return tirx.SeqStmt([self.stmt(x) for x in s.seq])
        return s  # conditions, loops, bindings: left as they are


def _pure(c) -> bool:
    """A call without effects: not a packed call (the checked mode's error
    callback) or an extern call that is not marked pure."""
    name = getattr(c.op, "name", "")
    return "packed" not in name and name != "tirx.call_extern"


def _is_math(c) -> bool:
    """A pure math call (an intrinsic or a libm function), not
    ``if_then_else`` or a reinterpretation."""
    name = getattr(c.op, "name", "")
    return name.startswith("tirx.") and name != "tirx.reinterpret" and _pure(c)


def _stored(s, out: list) -> bool:
    """Collect the buffers ``s`` stores to; False when ``s`` holds a statement
    this module does not read (then nothing is hoisted)."""
    if isinstance(s, tirx.BufferStore):
        out.append(s.buffer.data)
        return True
    if isinstance(s, tirx.SeqStmt):
        return all(_stored(x, out) for x in s.seq)
    return False


def _bound_vars(e, out: list) -> None:
    if isinstance(e, tirx.Let):
        out.append(e.var)
    for f in ("a", "b", "value", "body", "condition", "true_value", "false_value"):
        x = getattr(e, f, None)
        if isinstance(x, tvm.ir.expr.Expr):
            _bound_vars(x, out)
    if isinstance(e, tvm.ir.expr.Call):
        for a in e.args:
            _bound_vars(a, out)


def hoist(bodies: list[tirx.Stmt], loop_vars: list[tirx.Var]):
    """``(bindings, bodies)``: the bodies with their invariant terms replaced
    by variables, and those variables with their values (in order).  The
    bodies are those of one loop split in parts (a vector loop and its scalar
    tail): the same term gets the same variable in each."""
    stored: list = []
    if not all(_stored(b, stored) for b in bodies):
        return [], bodies
    bound: list = []
    for b in bodies:
        for s in ([b] if isinstance(b, tirx.BufferStore) else list(b.seq)):
            _bound_vars(s.value, bound)
    h = _Hoist(loop_vars, stored, bound)
    out = [h.stmt(b) for b in bodies]
    return h.bindings, out


def held(bindings: list, stmts: list) -> list:
    """``stmts`` after the hoisted terms of :func:`hoist`, each computed once
    into a one-element local buffer and read from it where its variable was.
    Not a ``Bind``: TVM's passes bind a let variable's value in their
    analyzers, and the integer-set analysis of a float value built from an
    index (``float(i) * rcp0`` in a tanh's let, ``rcp0 = 1 / (1 + |X0(0)|)``)
    stopped the build with an internal error (found by the random
    programs).  LLVM keeps the element in a register."""
    out, loads_of = [], {}
    for v, value in bindings:
        buf = tirx.decl_buffer((1,), _dtype(value), name=v.name, scope=STACK)
        out += [tirx.AllocBuffer(buf), tirx.BufferStore(buf, _read(value, loads_of), [0])]
        loads_of[v] = tirx.BufferLoad(buf, [0])
    return out + [_read(st, loads_of) for st in stmts]


def _read(node, loads_of: dict):
    """``node`` with the variables of ``loads_of`` replaced by their loads."""
    if not loads_of:
        return node

    def swap(v):
        for var, ld in loads_of.items():
            if v.same_as(var):
                return ld
        return v
    return tvm_ffi.structural_map(node, [(tirx.Var, swap)])


def _wide(e: tirx.PrimExpr) -> tirx.PrimExpr:
    return e if _dtype(e) == "int64" else tirx.Cast("int64", e)


def _by_value(e) -> bool:
    """A division by a value that is not a constant (LLVM moves one by a
    constant itself), or by a size as a multiplication (codegen/divisors.py)."""
    return isinstance(e, (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)) and not isinstance(e.b, tirx.IntImm) \
        or divisors.is_quotient(e)


class RowTerms:
    """The integer terms of a register tile's update that change with its row
    alone -- a division in an index, as a grouped convolution's ``(o / (O /
    G)) * CG`` -- computed once per row into a small local array before the
    tile's reduction loops, and read from it inside them.  LLVM does not
    move such a division out of the loops itself: a division it moves
    might trap where the loop would not have run.  Only terms without loads
    and with a division by a value (the others cost less than the array, or
    LLVM moves them) are taken;
    their divisors never trap (codegen/expr.py guards a division by a value
    that may be 0 or -1).  A term is kept with the tile's row and depth
    variables replaced by the class's own, so that the same term of another
    copy of the update (each ``lanes`` of the tile binds fresh ones) finds
    its cells.

    A read whose indices hold such a division is read through a flat view of
    its tensor at ``base + rest``, its row's part of the offset (the
    reduction loops and the column at 0) one cell: the rows of two loops as
    one (codegen/collapse.py, ``divide``) read a convolution's input at
    ``x(r % N, c, h + kh, r / N + kw)``, whose offset LLVM computed again,
    product by product and division by division, at every step of the
    reduction for every row; ``x_flat(base(r) + (c * H + kh) * W + kw)`` is
    an addition."""

    def __init__(self, rows: int):
        self.rows = rows
        self.r, self.d = tirx.Var("r", INDEX), tirx.Var("d", INDEX)
        self.terms: list[tuple[tirx.Buffer, tirx.PrimExpr]] = []  # (cells, term over self.r and self.d)
        self.views: dict[str, tuple[tirx.Buffer, tirx.Buffer]] = {}  # tensor -> (tensor, its flat view)
        # True: every row reads the first row's cells (the tile's variant for
        # when all its rows' terms are equal, see :meth:`uniform_when`)
        self.uniform = False

    def take(self, value: tirx.PrimExpr, r: tirx.Var, d, nr: int, moving: list) -> tirx.PrimExpr:
        """``value`` (the update of row ``d * nr + r``) with its terms that use
        none of the variables of ``moving`` (the reduction loops' values, the
        column) replaced by their cells."""
        moving = [v for m in moving for v in tirx.analysis.undefined_vars(m)]
        own = {r: self.r, **({d: self.d} if isinstance(d, tirx.Var) else {})}

        def moves(e) -> bool:
            return any(v.same_as(m) for v in tirx.analysis.undefined_vars(e) for m in moving)

        divides: dict = {}

        def cell(e):
            term = _read(e, own)
            for cells, known in self.terms:
                if tvm_ffi.structural_equal(known, term):
                    return tirx.BufferLoad(cells, [tirx.const(0, INDEX)] if self.uniform else [d * nr + r])
            # (a term first met in the uniform variant is not in its condition: its own row's cell)
            cells = tirx.decl_buffer((self.rows,), _dtype(e), name=f"row_term{len(self.terms)}", scope=STACK)
            self.terms.append((cells, term))
            return tirx.BufferLoad(cells, [d * nr + r])

        def visit(e):
            if isinstance(e, _LOAD):
                flat = self._flat(e, moving, (r, d), cell, divides)
                return e if flat is None else flat
            if not _dtype(e).startswith("int") or isinstance(e, (tirx.IntImm, tirx.Var)):
                return e
            if not has_node(e, _by_value, divides) or loads(e) or moves(e):
                return e
            return cell(e)
        return tvm_ffi.structural_map(value, [(tvm.ir.expr.Expr, visit)], order="pre")

    def _flat(self, ld, moving: list, rows: tuple, cell, divides: dict):
        """The load ``ld`` read at its row's cell plus the rest of its offset
        (see the class), or None where its indices hold no division by a
        value, read a tensor, or its offset is no sum of a part of the row and
        a part of the loops."""
        buf, idx = ld.source, list(ld.indices)
        if not any(has_node(x, _by_value, divides) for x in idx) or any(loads(x) for x in idx):
            return None
        if len(buf.strides) or not (isinstance(buf.elem_offset, tirx.IntImm) and buf.elem_offset.value == 0):
            return None
        flat = buf.offset_of(idx)
        if len(flat) != 1:
            return None
        # the offset as a sum of the row's parts (the divisions, standing as
        # variables of their own, and the row variables) times coefficients
        # that the loops leave alone, and a rest
        held: dict = {}

        def hold(e):
            if not _by_value(e):
                return e
            v = tirx.Var(f"q{len(held)}", _dtype(e))
            held[v] = e
            return v
        offset = tvm_ffi.structural_map(flat[0], [(tvm.ir.expr.Expr, hold)], order="pre")
        parts = list(held) + [x for x in rows if isinstance(x, tirx.Var)]
        coeffs = sym.detect_linear_equation(offset, parts)
        if len(coeffs) != len(parts) + 1:
            return None
        if any(v.same_as(m) for c in coeffs[:-1] for v in tirx.analysis.undefined_vars(c) for m in moving):
            return None
        zero = tirx.const(0, _dtype(offset))
        base = _read(functools.reduce(lambda a, b: a + b, [c * v for c, v in zip(coeffs, parts)], zero), held)
        rest = coeffs[-1]
        if buf.name not in self.views:
            size = functools.reduce(lambda a, b: a * b, list(buf.shape), tirx.const(1, _dtype(flat[0])))
            self.views[buf.name] = (buf, tirx.decl_buffer((size,), buf.dtype, name=buf.name + "_flat", data=buf.data))
        # in 64 bits: LLVM then moves the row's address, ``x + base``, out of the loops
        return tirx.BufferLoad(self.views[buf.name][1], [cell(_wide(base)) + _wide(rest)])

    def uniform_when(self) -> tirx.PrimExpr | None:
        """The condition that every row of the tile has the same terms (a
        grouped convolution's tile of 4 output channels in one group): the
        tile then runs a variant whose rows all read the first row's cells,
        so that LLVM sees that they read the same elements (one vector load
        of the group's input row for the 4 rows, not 4).  None: no terms, or
        one row."""
        if not self.terms or self.rows < 2:
            return None
        zero = tirx.const(0, INDEX)
        return tirx.all(*[tirx.EQ(tirx.BufferLoad(cells, [tirx.const(i, INDEX)]), tirx.BufferLoad(cells, [zero]))
                          for cells, _ in self.terms for i in range(1, self.rows)])

    def fill(self, nr: int, nd: int) -> list[tirx.Stmt]:
        """The flat views, the cells' allocations and their values, row by row (unrolled)."""
        out = [tirx.DeclBuffer(view, data=buf.data) for buf, view in self.views.values()]
        for cells, term in self.terms:
            r2, d2 = tirx.Var("r", INDEX), tirx.Var("d", INDEX) if nd > 1 else tirx.const(0, INDEX)
            store = tirx.BufferStore(cells, _read(term, {self.r: r2, self.d: d2}), [d2 * nr + r2])
            loop = tirx.For(r2, 0, nr, tirx.ForKind.UNROLLED, store)
            out += [tirx.AllocBuffer(cells), tirx.For(d2, 0, nd, tirx.ForKind.UNROLLED, loop) if nd > 1 else loop]
        return out

