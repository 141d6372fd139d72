"""isl AST + statements -> one TVM TIR ``PrimFunc``: the target-neutral part.

``lower_to_tir(model, asts, name, fixed, folds, program, options)`` is the
stage entry point.  The function's parameters are the sizes (``int32``
scalars, or nothing for sizes fixed to constants), then the input buffers,
then the output buffers; temporaries are allocated inside (a temporary in
``folds``, the fold plan of polyhedral/contract.py, in a few slots), except
where the target's lowering passes them in after the outputs
(:meth:`ProgramLowering.scratch_params`: CUDA, whose caller allocates them).  Each
sequential ``for`` of the program is a serial TIR loop around its body's
kernels; each kernel is its isl AST, loop by loop.  Statement instances are
emitted by substituting the AST's arguments for the statement's index
variables in its right-hand side.

What a target does differently is a subclass of :class:`ProgramLowering`
(the program's loops and branches) and of :class:`AstLowering` (a kernel's
isl AST): ``codegen/cpu.py`` (parallel chunks, register tiles, vectors) and
``codegen/cuda.py`` (thread-bound launches under host loops); the driver
picks one from its target table.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import islpy as isl
import tvm
from tvm import sym, tirx

from ..errors import InternalError
from ..options import Options
from ..syntax import nodes as n
from ..sema import types as ty
from ..polyhedral.dataflow import overwritten
from ..polyhedral import isl_ast
from ..polyhedral.contract import Fold
from ..polyhedral.model import Block, Branch, ForLoop, IslStmt, Kernel, Model
from ..polyhedral.bounds import guarded_reads
from .expr import INDEX, Folded, dtype_of, lower_expr, physical
from . import divisors, formulas

_OP = isl.ast_expr_op_type


@dataclass
class Signature:
    """What the caller needs to know about the PrimFunc's parameters."""

    sizes: tuple[str, ...]  # symbolic sizes passed as int32 scalars, in order
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    buffers: dict[str, tirx.Buffer] = field(default_factory=dict)
    size_vars: dict[str, tirx.PrimExpr] = field(default_factory=dict)
    scratch: tuple[str, ...] = ()  # temporaries passed in after the outputs


def lower_to_tir(model: Model, asts: dict[int, isl.AstNode], name: str, fixed: dict[str, int] | None = None,
                 folds: dict[str, Fold] | None = None, program: type["ProgramLowering"] | None = None,
                 options: Options | None = None) -> tuple[tirx.PrimFunc, Signature]:
    """Build the PrimFunc (see the module docstring) with the target's
    ``program`` lowering (default: plain loops, :class:`ProgramLowering`)."""
    options = options or Options()
    checked = model.ranges.checked
    fixed = fixed or {}
    folds = folds or {}
    size_vars = {s: tirx.const(int(fixed[s]), INDEX) if s in fixed else tirx.Var(s, INDEX) for s in checked.sizes}
    sig = Signature(tuple(s for s in checked.sizes if s not in fixed), checked.inputs, checked.outputs,
                    size_vars=size_vars)
    for t, info in checked.tensors.items():
        # an extent is at least 0 (range inference assumes sizes >= 1: `T - 1` is -1 at T = 0)
        shape = [lower_expr(e, size_vars, {}, INDEX) if isinstance(e, (n.SizeVar, n.Const))
                 else tirx.max(lower_expr(e, size_vars, {}, INDEX), 0) for e in model.ranges.extent_exprs(t)]
        elem = max(1, ty.bits(info.dtype) // 8)
        if t in folds:
            f = folds[t]
            shape[f.dim] = tirx.const(f.size, INDEX)
            sig.buffers[t] = Folded(tirx.decl_buffer(shape, info.dtype, name=t, data_alignment=elem), f.dim, f.size)
        else:
            strides = _padded_strides(shape, elem) if t in model.ranges.padded_rows and t not in checked.inputs \
                and t not in checked.outputs and (program or ProgramLowering).pad_rows and len(shape) >= 2 else None
            sig.buffers[t] = tirx.decl_buffer(shape, info.dtype, name=t, data_alignment=elem, strides=strides)
    gen = (program or ProgramLowering)(model, asts, sig, options)
    with divisors.size_divisors() if gen.size_divisions else contextlib.nullcontext({}) as divs:
        body = divisors.bind(divs, gen.program(model.body, dict(size_vars)))
    sig.scratch = gen.scratch_params()
    local = [t for t in checked.temps if t not in sig.scratch]
    temps = [tirx.AllocBuffer(b.buffer if isinstance(b, Folded) else b) for b in (sig.buffers[t] for t in local)]
    # temporaries start as zeros, as outputs do (SPEC 1.1), where a read may
    # see an element no write produced (``a(b) += x(t, b)`` in a loop, a
    # hole read later): the others are written before any read (dataflow.py)
    written = overwritten(model, local) if local else frozenset()
    fills = [_zero_fill(sig.buffers[t]) for t in local if t not in written]
    if temps:
        body = tirx.SeqStmt(temps + fills + [body])
    params = [size_vars[s] for s in sig.sizes] + [sig.buffers[t] for t in sig.inputs + sig.outputs + sig.scratch]
    func = tirx.PrimFunc(params, body).with_attr("global_symbol", name).with_attr("tirx.noalias", True)
    return func, sig


# Elements past its last extent in each row of a temporary of
# ``RangeInfo.padded_rows`` whose rows are a multiple of ROW_ALIAS bytes: such
# a row maps a column strip's elements in every row to the same few cache
# sets, and a strip read down the rows evicts itself (a power iteration's
# transposed 1024 x 1024 matrix: 114 -> 47 us per step, the row-by-row
# product 44 us).  Other rows are left as they are (rows of 256 floats
# padded: the Elman RNN without a batch 5-10% slower).
ROW_PAD = 16
ROW_ALIAS = 2048


def _padded_strides(shape: list, elem: int) -> list | None:
    last = shape[-1]
    pad = sym.Analyzer().simplify(tirx.Select(tirx.floormod(last, max(1, ROW_ALIAS // elem)) == 0,
                                              tirx.const(ROW_PAD, INDEX), tirx.const(0, INDEX)))
    if isinstance(pad, tirx.IntImm) and pad.value == 0:
        return None  # (sizes fixed before scheduling: dense rows)
    strides = [tirx.const(1, INDEX)]
    for k in range(len(shape) - 1, 0, -1):
        strides.insert(0, strides[0] * (shape[k] + pad if k == len(shape) - 1 else shape[k]))
    return strides


def _zero_fill(b) -> tirx.Stmt:
    """Every element of the buffer ``b`` (a Folded one's whole buffer) set to 0."""
    buf = b.buffer if isinstance(b, Folded) else b
    size = tirx.const(1, INDEX)
    if buf.strides:  # padded rows (_padded_strides): the whole allocation
        size = tirx.max(buf.shape[0], 0) * buf.strides[0]
    for e in ([] if buf.strides else buf.shape):
        size = size * tirx.max(e, 0)
    flat = tirx.decl_buffer((size,), buf.dtype, name=buf.name + "_flat", data=buf.data)
    i = tirx.Var(buf.name + "_z", INDEX)
    loop = tirx.For(i, 0, size, tirx.ForKind.SERIAL, tirx.BufferStore(flat, tirx.const(0, buf.dtype), [i]))
    return tirx.SeqStmt([tirx.DeclBuffer(flat, data=buf.data), loop])


def _writes(it) -> set[str]:
    """The tensors that the statements of a program item write."""
    match it:
        case Kernel():
            return {s.info.comp.tensor for s in it.stmts}
        case ForLoop(body=body):
            return set().union(*(_writes(x) for x in body.items))
        case Branch(then=a, orelse=b):
            return set().union(*(_writes(x) for x in a.items + b.items))
    return set()


def seq(stmts: list[tirx.Stmt | None]) -> tirx.Stmt:
    """One statement of several (None left out; an empty list is a no-op)."""
    stmts = [s for s in stmts if s is not None]
    if not stmts:
        return tirx.Evaluate(tirx.const(0, INDEX))
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


class ProgramLowering:
    """The program tree: blocks, sequential loops, branches, kernels.  A
    target overrides :meth:`sequential` (how a ``for`` is run) and sets
    :attr:`ast_lowering` (how a kernel's isl AST is lowered)."""

    ast_lowering: type["AstLowering"]  # set below
    pad_rows = True  # the rows of RangeInfo.padded_rows laid out longer (_padded_strides; not on CUDA)
    size_divisions = False  # divisions by sizes as multiplications (codegen/divisors.py; the CPU)

    def __init__(self, model: Model, asts: dict[int, isl.AstNode], sig: Signature, options: Options):
        self.model = model
        self.options = options
        self.asts = asts
        self.sig = sig
        self.kernel_index = {id(k): i for i, k in enumerate(model.kernels())}
        # tensors packed whole before the top-level item being lowered
        # (codegen/panels.py pack_whole): key -> (buffer, its fill, conditions)
        self.prologue: dict = {}
        self.item_writes: set[str] = set()  # the tensors that item writes
        for k in model.kernels():  # the reads whose indices are kept inside (codegen/expr.py, rule 3)
            for s in k.stmts:
                if not s.is_init:
                    guarded_reads(s, model.ranges)

    def scratch_params(self) -> tuple[str, ...]:
        """The temporaries the caller allocates and passes after the outputs
        (none here: they are allocated inside the function)."""
        return ()

    def program(self, b: Block, env: dict) -> tirx.Stmt:
        """The program's top-level items, each preceded by the copies its
        kernels asked for (:attr:`prologue`): an input, or a temporary the
        item does not write (an RNN's transposed weight, computed before its
        loop), does not change while the item runs."""
        out = []
        for it in b.items:
            self.item_writes = _writes(it)
            self.prologue = {}
            stmt = self.item(it, env)
            whole = list(self.prologue.values())
            out += [tirx.AllocBuffer(buf) for buf, _, _ in whole]
            for _, fill, when in whole:  # when: the conditions of the kernels reading it (None: always)
                out.append(fill if any(c is None for c in when) else tirx.IfThenElse(tirx.any(*when), fill, None))
            out.append(stmt)
        self.prologue = {}
        return seq(out)

    def ast_of(self, k: Kernel) -> isl.AstNode:
        return self.asts[self.kernel_index[id(k)]]

    def block(self, b: Block, env: dict) -> tirx.Stmt:
        return seq([self.item(it, env) for it in b.items])

    def item(self, it, env: dict) -> tirx.Stmt:
        match it:
            case Kernel():
                return self.kernel(it, env)
            case ForLoop(loop=lp, body=body):
                return self.sequential(lp, body, env)
            case Branch(cond=c, then=a, orelse=b):
                return tirx.IfThenElse(lower_expr(c, env, {}, "bool"), self.block(a, env),
                                       self.block(b, env) if b.items else None)
        raise InternalError(f"unexpected item {type(it).__name__}")

    def sequential(self, lp, body: Block, env: dict) -> tirx.Stmt:
        """A ``for`` of the program: a serial loop around its body."""
        v = tirx.Var(lp.var, INDEX)
        lo = lower_expr(lp.lo, env, {}, INDEX)
        hi = lower_expr(lp.hi, env, {}, INDEX)
        inner = self.block(body, {**env, lp.var: from_zero(lo, v)})
        return tirx.For(v, 0, tirx.max(hi - lo, 0), tirx.ForKind.SERIAL, inner)

    def kernel(self, k: Kernel, env: dict) -> tirx.Stmt:
        low = self.ast_lowering(self, {s.name: s for s in k.stmts}, env, k)
        return low.node(self.ast_of(k), parallel_ok=True, mark=None)


class AstLowering:
    """One kernel's isl AST, node by node, with the environment that binds
    the AST's iterators (and the sizes, and the program's loop variables) to
    TIR expressions.  Loops are plain serial loops here; a target overrides
    :meth:`_for`."""

    buffer_override: dict = {}  # tensor -> Buffer read instead (packed panels, codegen/cpu_tiles.py; merged rows, collapse.py)
    # name -> [(iterator, rule)]: binding the name binds each iterator to
    # rule(value) too (two loops' rows as one, codegen/collapse.py, divided_rows)
    derived: dict = {}

    def __init__(self, gen: ProgramLowering, stmts: dict[str, IslStmt], env: dict, kernel: Kernel | None = None):
        self.gen = gen
        self.stmts = stmts
        self.env = dict(env)
        self.top = frozenset(self.env)  # what is bound outside every loop of the kernel
        self.kernel = kernel

    def independent(self, names: list[str]) -> bool:
        """No dependence of the kernel goes between two of these statements."""
        if self.kernel is None or self.kernel.deps is None:
            return False
        doms = [isl.UnionSet.from_set(self.stmts[x].domain) for x in names]
        for i, a in enumerate(doms):
            for j, b in enumerate(doms):
                if i != j and not self.kernel.deps.intersect_domain(a).intersect_range(b).is_empty():
                    return False
        return True

    @contextlib.contextmanager
    def bound(self, values: dict):
        """``self.env`` with ``values`` bound, restored afterwards (and the
        iterators that ``self.derived`` derives from them)."""
        if self.derived:
            values = {**values, **{x: rule(v) for k, v in values.items() for x, rule in self.derived.get(k, ())}}
        saved = {k: self.env.get(k) for k in values}
        self.env.update(values)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    self.env.pop(k, None)
                else:
                    self.env[k] = v

    def loop_range(self, node: isl.AstNode) -> tuple[tirx.PrimExpr, tirx.PrimExpr]:
        """(first value, number of iterations) of an isl ``for``."""
        init = _index(self.expr(node.for_get_init()))
        cond = node.for_get_cond()
        op = cond.get_op_type()
        if cond.get_op_arg(0).get_type() != isl.ast_expr_type.id or op not in (_OP.lt, _OP.le):
            raise InternalError(f"unexpected loop condition {cond.to_C_str()}")
        bound = _index(self.expr(cond.get_op_arg(1)))
        return init, bound - init + (1 if op == _OP.le else 0)

    def loop_step(self, node: isl.AstNode) -> int:
        inc = node.for_get_inc()
        if inc.get_type() != isl.ast_expr_type.int or inc.get_val().to_python() < 1:
            raise InternalError(f"unexpected isl loop increment {inc.to_C_str()}")
        return int(inc.get_val().to_python())

    def node(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        t = node.get_type()
        NT = isl_ast.NT
        if t == NT.for_:
            return self._for(node, parallel_ok, mark)
        if t == NT.if_:
            then = self.node(node.if_get_then_node(), parallel_ok, None)
            other = self.node(node.if_get_else_node(), parallel_ok, None) if node.if_has_else_node() else None
            return tirx.IfThenElse(self._cond(node.if_get_cond()), then, other)
        if t == NT.block:
            # under a parallel mark, the pieces of its loop that isl split around a value (a select's
            # ``i == p`` split off, polyhedral/split.py): each piece is a parallel loop
            inner = mark if mark == isl_ast.PARALLEL else None
            return seq([self.node(x, parallel_ok, inner if x.get_type() == NT.for_ else None)
                        for x in isl_ast.children(node)])
        if t == NT.mark:
            return self.node(node.mark_get_node(), parallel_ok, isl_ast.mark(node))
        if t == NT.user:
            return self._user(node.user_get_expr())
        raise InternalError(f"unexpected isl AST node {t}")

    def _for(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        """A serial loop from 0 (a stride that isl found with sizes fixed before
        scheduling: a loop over its values)."""
        return self.plain_loop(node, parallel_ok, tirx.ForKind.SERIAL)

    def plain_loop(self, node: isl.AstNode, parallel_ok: bool, kind: tirx.ForKind) -> tirx.Stmt:
        name = isl_ast.iterator(node)
        step = self.loop_step(node)
        init, extent = self.loop_range(node)
        v = tirx.Var(name, INDEX)
        inner_ok = parallel_ok and kind != tirx.ForKind.PARALLEL
        if step != 1:
            count = tirx.floordiv(tirx.max(extent, 0) + step - 1, step)
            return tirx.For(v, 0, count, kind, self.body_with(node, name, init + v * step, inner_ok))
        return tirx.For(v, 0, extent, kind, self.body_with(node, name, from_zero(init, v), inner_ok))

    def body_with(self, node: isl.AstNode, name: str, value: tirx.PrimExpr, parallel_ok: bool) -> tirx.Stmt:
        with self.bound({name: value}):
            return self.node(node.for_get_body(), parallel_ok, None)

    # --------------------------------------------------------- expressions
    def expr(self, e: isl.AstExpr) -> tirx.PrimExpr:
        ET = isl.ast_expr_type
        t = e.get_type()
        if t == ET.int:  # isl may combine constants beyond int32 (t >= T - 2147483647): those in int64
            v = int(e.get_val().to_python())
            return tirx.const(v, INDEX if -2**31 <= v < 2**31 else "int64")
        if t == ET.id:
            name = e.get_id().get_name()
            key = name[:-1] if name not in self.env and name.endswith("_") else name
            return self.env[key]
        op = e.get_op_type()
        args = isl_ast.args(e)
        if op in (_OP.and_, _OP.and_then, _OP.or_, _OP.or_else, _OP.eq, _OP.le, _OP.lt, _OP.ge, _OP.gt):
            return self._cond(e)
        a = [self.expr(x) for x in args]
        match op:
            case _OP.add:
                return a[0] + a[1]
            case _OP.sub:
                return a[0] - a[1]
            case _OP.mul:
                return a[0] * a[1]
            case _OP.minus:
                return -a[0]
            case _OP.div | _OP.fdiv_q | _OP.pdiv_q:
                return tirx.floordiv(a[0], a[1])
            case _OP.pdiv_r | _OP.zdiv_r:
                return tirx.floormod(a[0], a[1])
            case _OP.min | _OP.max:
                out = a[0]
                for x in a[1:]:
                    out = tirx.min(out, x) if op == _OP.min else tirx.max(out, x)
                return out
            case _OP.cond | _OP.select:
                return tirx.Select(self._cond(args[0]), _index(a[1]), _index(a[2]))
        raise InternalError(f"unexpected isl AST expression {e.to_C_str()}")

    def _cond(self, e: isl.AstExpr) -> tirx.PrimExpr:
        op = e.get_op_type()
        args = isl_ast.args(e)
        if op in (_OP.and_, _OP.and_then):
            return tirx.And(self._cond(args[0]), self._cond(args[1]))
        if op in (_OP.or_, _OP.or_else):
            return tirx.Or(self._cond(args[0]), self._cond(args[1]))
        a, b = self.expr(args[0]), self.expr(args[1])
        cmp = {_OP.eq: tirx.EQ, _OP.le: tirx.LE, _OP.lt: tirx.LT, _OP.ge: tirx.GE, _OP.gt: tirx.GT}
        if op not in cmp:
            raise InternalError(f"unexpected isl AST condition {e.to_C_str()}")
        if dtype_of(a) != dtype_of(b):
            a, b = tirx.Cast("int64", a), tirx.Cast("int64", b)
        return cmp[op](a, b)

    # ---------------------------------------------------------- statements
    def _user(self, call: isl.AstExpr) -> tirx.Stmt:
        s = self.stmts[isl_ast.statement(call)]
        args = [_index(self.expr(x)) for x in isl_ast.args(call)[1:]]
        env = {**self.env, **dict(zip(s.dims, args))}
        buffers = self.gen.sig.buffers
        if self.buffer_override:
            buffers = {**buffers, **self.buffer_override}
        return emit_statement(s, env, buffers)

    def statement_parts(self, call: isl.AstExpr):
        """(buffer, indices, value, combine) of an update statement instance:
        it stores ``combine(buffer[indices], value)``."""
        s = self.stmts[isl_ast.statement(call)]
        args = [_index(self.expr(x)) for x in isl_ast.args(call)[1:]]
        env = {**self.env, **dict(zip(s.dims, args))}
        buffers = self.gen.sig.buffers
        if self.buffer_override:
            buffers = {**buffers, **self.buffer_override}
        return _parts(s, env, buffers)


ProgramLowering.ast_lowering = AstLowering


def _index(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """An isl AST value used as a loop bound or index: int32 (it fits there, or the
    tensor would be too large; only intermediate constants may need int64)."""
    return x if dtype_of(x) == INDEX else tirx.Cast(INDEX, x)


def from_zero(init: tirx.PrimExpr, v: tirx.Var) -> tirx.PrimExpr:
    """The iterator of a loop emitted as ``for v in range(extent)``: ``init + v``.
    TVM 0.27 miscompiles loops with a nonzero min: in ``for c0 in range(-2, 1):
    for c1 in range(max(0, c0), 2)`` its loop normalisation rewrote
    ``max(0, c0)`` wrongly (tests/test_fuzz.py), so every loop starts at 0."""
    return v if isinstance(init, tirx.IntImm) and init.value == 0 else init + v


def emit_statement(s: IslStmt, env: dict, buffers: dict, into: tuple | None = None) -> tirx.Stmt:
    """The store of a statement instance, after the bindings of the nested
    arguments of its vector formulas (codegen/formulas.py ``bindings``);
    ``into``: the (buffer, indices) updated instead of its element."""
    (buf, idx, value, combine), binds = with_bindings(lambda: _parts(s, env, buffers))
    buf, idx = into or (buf, idx)
    store = tirx.BufferStore(buf, combine(tirx.BufferLoad(buf, idx), value), idx)
    if not binds:
        return store
    return tirx.SeqStmt([tirx.Bind(v, x) for v, x in binds] + [store])


def _extern_call(e) -> bool:
    return isinstance(e, tvm.ir.expr.Call) and getattr(e.op, "name", "") == "tirx.call_pure_extern"


def with_bindings(parts):
    """``parts()`` (buffer, indices, value, combine) lowered inside
    ``formulas.bindings`` and the (variable, value) pairs to bind before the
    statement; lowered again without any where they may not be bound
    (:func:`binds_kept`)."""
    with formulas.bindings() as binds:
        out = parts()
    if not binds_kept(binds, out[2]):
        return parts(), []
    return out, list(binds)


def binds_kept(binds, value) -> bool:
    """The bindings of a statement's formulas (``formulas.bindings``) may
    precede it: not for a chain of more than two, nor beside a libm call
    (``fmax(x, 0) + log(1 + exp(-fabs(x)))``: TVM's vectorizer runs such a
    statement lane by lane and loses the bound variable)."""
    return not (binds and (has_node(value, _extern_call) or any(has_node(x, _extern_call) for _, x in binds)))


def nonneg_dims(s: IslStmt) -> frozenset[str]:
    """The index variables of ``s`` that its domain keeps >= 0."""
    if s.nonneg is None:
        dom = s.domain
        s.nonneg = frozenset(v for k, v in enumerate(s.dims)
                             if dom.is_subset(dom.lower_bound_val(isl.dim_type.set, k, isl.Val.zero(dom.get_ctx()))))
    return s.nonneg


def _parts(s: IslStmt, env: dict, buffers: dict):
    """(buffer, indices, value, combine(old, value)) of a statement instance."""
    c = s.info.comp
    buf, idx = physical(buffers[c.tensor], [lower_expr(e, env, buffers, INDEX, nonneg=nonneg_dims(s))
                                            for e in c.indices])
    dtype = buf.dtype
    if s.is_init:
        return buf, idx, tirx.const(ty.identity(c.reduction, str(dtype)), dtype), lambda old, v: v
    value = lower_expr(c.rhs, env, buffers, str(dtype), wrap=True, guarded=s.guarded_reads or frozenset(),
                       nonneg=nonneg_dims(s))
    if str(dtype) == "bool" and c.reduction is not None:
        # bool has no arithmetic in TIR: + and max are "any", * and min are "all"
        return buf, idx, value, (tirx.Or if c.reduction in ("+", "max") else tirx.And)
    match c.reduction:
        case None | "argmax" | "argmin":  # an arg-reduction's rhs computes the new index
            combine = _replace
        case "+":
            combine = _add
        case "*":
            combine = _mul
        case "min":
            combine = tirx.min
        case "max":
            combine = tirx.max
        case _:
            raise InternalError(f"unknown reduction {c.reduction}")
    return buf, idx, value, combine


def _replace(old, value):
    return value


def _add(old, value):
    return old + value


def _mul(old, value):
    return old * value


# --------------------------------------------------------- TIR helpers
def has_node(e, match, memo: dict | None = None) -> bool:
    """Some node of the expression or statement ``e`` (as this package builds
    them) is an instance of ``match`` (a tuple of types) or satisfies it (a
    predicate).  ``memo`` (a dict kept by the caller across calls with the
    same ``match``) holds the answers for the nodes already walked: a caller
    asking about every node of a tree then walks it once, not once per level."""
    if memo is not None:
        hit = memo.get(e)  # TVM objects hash and compare by reference
        if hit is None:
            hit = memo[e] = _has_node(e, match, memo)
        return hit
    return _has_node(e, match, None)


def _has_node(e, match, memo) -> bool:
    if isinstance(match, tuple) and isinstance(e, match) or not isinstance(match, tuple) and match(e):
        return True
    for f in ("a", "b", "value", "condition", "true_value", "false_value", "body", "then_case", "else_case"):
        y = getattr(e, f, None)
        if y is not None and has_node(y, match, memo):
            return True
    for f in ("args", "indices", "seq"):
        ys = getattr(e, f, None)
        if ys is not None and any(has_node(y, match, memo) for y in ys):
            return True
    return False


def unroll_unsafe(e) -> bool:
    """``e`` is a Let or a node that TVM 0.27 lowers to one (a floor division
    or remainder, except by a power of two: a shift or a mask): in an unrolled
    register tile the same Let variable would be bound once per copy, which
    its simplifier rejects ("Binding of variable rmod ... conflicts"; found by
    the random programs)."""
    if isinstance(e, (tirx.FloorDiv, tirx.FloorMod)):
        d = e.b
        return not (isinstance(d, tirx.IntImm) and d.value > 0 and d.value & (d.value - 1) == 0)
    return isinstance(e, tirx.Let)


def loads(e, unguarded: bool = False) -> list:
    """The BufferLoads in a TIR expression, in a fixed order; ``unguarded``:
    only those outside the branches of ``if_then_else``s (a ``Select``'s
    sides are both computed: their reads are inside their tensors wherever
    the statement runs, codegen/expr.py rule 3)."""
    out = []

    def walk(x):
        if isinstance(x, _LOAD):
            out.append(x)
            return
        if unguarded and is_if_then_else(x):
            walk(x.args[0])
            return
        for f in ("a", "b", "value", "condition", "true_value", "false_value", "body"):
            if hasattr(x, f):
                walk(getattr(x, f))
        if hasattr(x, "args"):
            for y in x.args:
                walk(y)
    walk(e)
    return out


_LOAD = type(tirx.decl_buffer((1,), "float32", name="probe")[0])


def is_if_then_else(x) -> bool:
    return isinstance(x, tvm.ir.expr.Call) and getattr(x.op, "name", "") == "prim.if_then_else"


def coefficient(x: tirx.PrimExpr, v: tirx.Var) -> int | None:
    """The constant coefficient of ``v`` in ``x``; None if ``x`` is not linear in it."""
    from tvm import sym as arith

    coeffs = arith.detect_linear_equation(x, [v])
    if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm):
        return None
    return coeffs[0].value


def uses(x: tirx.PrimExpr, v: tirx.Var) -> bool:
    """``x`` may depend on ``v`` (not linear in it counts as depending)."""
    return coefficient(x, v) != 0
