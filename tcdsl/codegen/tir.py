"""isl AST + statements -> one TVM TIR ``PrimFunc``.

``lower_to_tir(model, asts, name, fixed=None, target_kind="llvm")`` is the
stage entry point.  The function's parameters are the sizes (``int32``
scalars, or nothing for sizes fixed to constants), then the input buffers,
then the output buffers; temporaries are allocated inside.  Each sequential
``for`` of the program is a serial TIR loop around its body's kernels (on
CUDA: a host loop launching them); each kernel is its isl AST, with the
outermost loop under a ``par`` mark made parallel (CPU).  Statement
instances are emitted by substituting the AST's arguments for the
statement's index variables in its right-hand side.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import islpy as isl
import tvm
from tvm import tirx

from ..errors import InternalError, TcError
from ..syntax import nodes as n
from ..sema import types as ty
from ..sema.affine import isl_name, pwaff_to_expr
from ..polyhedral.contract import plan_folds
from ..polyhedral.model import Block, Branch, ForLoop, IslStmt, Kernel, Model
from ..polyhedral.schedule import PARALLEL, PARALLEL_STEPS
from .cpu import (ChunkedLoop, has_node, accumulates_privately, cpu_mapping, loop_ids, runs_in_one_step,
                  strip_marks, unit_stride)
from .expr import INDEX, Folded, dtype_of, lower_expr, physical

_OP = isl.ast_expr_op_type


@dataclass
class Signature:
    """What the caller needs to know about the PrimFunc's parameters."""

    sizes: tuple[str, ...]  # symbolic sizes passed as int32 scalars, in order
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    buffers: dict[str, tirx.Buffer] = field(default_factory=dict)
    size_vars: dict[str, tirx.PrimExpr] = field(default_factory=dict)


def lower_to_tir(model: Model, asts: dict[int, isl.AstNode], name: str,
                 fixed: dict[str, int] | None = None, target_kind: str = "llvm",
                 options: dict | None = None) -> tuple[tirx.PrimFunc, Signature]:
    """Build the PrimFunc (see the module docstring).  ``options`` are the
    ``options=`` of the kernel (the CUDA mapping reads its own from them)."""
    checked = model.ranges.checked
    fixed = fixed or {}
    size_vars = {s: tirx.const(int(fixed[s]), INDEX) if s in fixed else tirx.Var(s, INDEX) for s in checked.sizes}
    sig = Signature(tuple(s for s in checked.sizes if s not in fixed), checked.inputs, checked.outputs,
                    size_vars=size_vars)
    # temporaries folded into a few slots (polyhedral/contract.py); on the CPU
    # only: the CUDA generator's register promotion builds its own accesses
    fold = (options or {}).get("fold", True)
    if not isinstance(fold, bool):
        raise TcError(f"options: 'fold' must be True or False, got {fold!r}")
    folds = plan_folds(model) if target_kind == "llvm" and fold else {}
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
            sig.buffers[t] = tirx.decl_buffer(shape, info.dtype, name=t, data_alignment=elem)
    gen = _Gen(model, asts, sig, target_kind, options)
    body = gen.block(model.body, dict(size_vars))
    temps = [tirx.AllocBuffer(b.buffer if isinstance(b, Folded) else b) for b in (sig.buffers[t] for t in checked.temps)]
    if temps:
        body = tirx.SeqStmt(temps + [body])
    params = [size_vars[s] for s in sig.sizes] + [sig.buffers[t] for t in sig.inputs + sig.outputs]
    func = tirx.PrimFunc(params, body).with_attr("global_symbol", name).with_attr("tirx.noalias", True)
    return func, sig


def _seq(stmts: list[tirx.Stmt]) -> tirx.Stmt:
    stmts = [s for s in stmts if s is not None]
    if not stmts:
        return tirx.Evaluate(tirx.const(0, INDEX))
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


class _Gen:
    def __init__(self, model: Model, asts, sig: Signature, target_kind: str, options: dict | None = None):
        self.model = model
        self.options = options or {}
        self.asts = asts
        self.sig = sig
        self.target_kind = target_kind
        self.kernel_index = {id(k): i for i, k in enumerate(model.kernels())}
        self.cpu = cpu_mapping(self.options) if target_kind == "llvm" else None
        self._private: dict[str, bool] = {}

    def one_step(self, s: IslStmt) -> bool:
        """See :func:`tcdsl.codegen.cpu.runs_in_one_step` (inside a sequential loop)."""
        loops = next((k.loops for k in self.model.kernels() if s in k.stmts), ())
        return bool(loops) and runs_in_one_step(s, isl_name(loops[-1].var))

    def private_accumulator(self, s: IslStmt) -> bool:
        """See :func:`tcdsl.codegen.cpu.accumulates_privately` (cached per statement)."""
        if s.name not in self._private:
            self._private[s.name] = accumulates_privately(s)
        return self._private[s.name]

    # ---------------------------------------------------------- program tree
    def block(self, b: Block, env: dict) -> tirx.Stmt:
        return _seq([self.item(it, env) for it in b.items])

    def item(self, it, env: dict) -> tirx.Stmt:
        match it:
            case Kernel():
                return self.kernel(it, env)
            case ForLoop(loop=lp, body=body):
                inside = self._steps_inside(lp, body, env)
                if inside is not None:
                    return inside
                v = tirx.Var(lp.var, INDEX)
                lo = lower_expr(lp.lo, env, {}, INDEX)
                hi = lower_expr(lp.hi, env, {}, INDEX)
                inner = self.block(body, {**env, lp.var: _from_zero(lo, v)})
                return tirx.For(v, 0, tirx.max(hi - lo, 0), tirx.ForKind.SERIAL, inner)
            case Branch(cond=c, then=a, orelse=b):
                return tirx.IfThenElse(lower_expr(c, env, {}, "bool"), self.block(a, env),
                                       self.block(b, env) if b.items else None)
        raise InternalError(f"unexpected item {type(it).__name__}")

    def kernel(self, k: Kernel, env: dict, wrap=None) -> tirx.Stmt:
        stmts = {s.name: s for s in k.stmts}
        ast = self.asts[self.kernel_index[id(k)]]
        if self.target_kind == "cuda":  # thread-bound launches under host code: codegen/cuda.py
            from .cuda import lower_kernel

            return lower_kernel(_AstLowering(self, stmts, env), ast, self.options)
        low = _AstLowering(self, stmts, env, k)
        low.wrap = wrap
        return low.node(ast, parallel_ok=True, mark=None)

    def _steps_inside(self, lp, body: Block, env: dict) -> tirx.Stmt | None:
        """The ``for`` run inside its body's parallel loop (codegen/cpu.py), when
        the body is one kernel whose outer loop the schedule marked
        ``par_steps`` and whose bounds do not depend on the step."""
        if self.cpu is None or not self.cpu.steps_inside or len(body.items) != 1 \
                or not isinstance(body.items[0], Kernel):
            return None
        k = body.items[0]
        top, mark = strip_marks(self.asts[self.kernel_index[id(k)]])
        if mark != PARALLEL_STEPS or top.get_type() != isl.ast_node_type.for_ or lp.var in loop_ids(top) \
                or not unit_stride(top):
            return None
        lo = lower_expr(lp.lo, env, {}, INDEX)
        hi = lower_expr(lp.hi, env, {}, INDEX)
        holder: list[_AstLowering] = []

        def wrap(make):
            v = tirx.Var(lp.var, INDEX)
            with holder[0].bound({lp.var: _from_zero(lo, v)}):
                inner = make()
            return tirx.For(v, 0, tirx.max(hi - lo, 0), tirx.ForKind.SERIAL, inner)

        stmts = {s.name: s for s in k.stmts}
        low = _AstLowering(self, stmts, env, k)
        low.wrap = wrap
        holder.append(low)
        return low.node(self.asts[self.kernel_index[id(k)]], parallel_ok=True, mark=None)


class _AstLowering:
    wrap = None  # the enclosing sequential loop, when it runs inside the parallel one
    buffer_override: dict = {}  # tensor -> Buffer read instead (packed panels, codegen/cpu.py)

    def __init__(self, gen: _Gen, stmts: dict[str, IslStmt], env: dict, kernel: Kernel | None = None):
        self.gen = gen
        self.stmts = stmts
        self.env = dict(env)
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
        """``self.env`` with ``values`` bound, restored afterwards."""
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

    def node(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        t = node.get_type()
        NT = isl.ast_node_type
        if t == NT.for_:
            return self._for(node, parallel_ok, mark)
        if t == NT.if_:
            then = self.node(node.if_get_then_node(), parallel_ok, None)
            other = self.node(node.if_get_else_node(), parallel_ok, None) if node.if_has_else_node() else None
            return tirx.IfThenElse(self._cond(node.if_get_cond()), then, other)
        if t == NT.block:
            ch = node.block_get_children()
            return _seq([self.node(ch.get_at(i), parallel_ok, None) for i in range(ch.n_ast_node())])
        if t == NT.mark:
            return self.node(node.mark_get_node(), parallel_ok, node.mark_get_id().get_name())
        if t == NT.user:
            return self._user(node.user_get_expr())
        raise InternalError(f"unexpected isl AST node {t}")

    def _for(self, node: isl.AstNode, parallel_ok: bool, mark: str | None) -> tirx.Stmt:
        name = node.for_get_iterator().get_id().get_name()
        inc = node.for_get_inc()
        if inc.get_type() != isl.ast_expr_type.int or inc.get_val().to_python() < 1:
            raise InternalError(f"unexpected isl loop increment {inc.to_C_str()}")
        step = int(inc.get_val().to_python())
        init, extent = self.loop_range(node)
        if step != 1:  # isl found a stride (sizes fixed before scheduling): a plain loop over its values
            if mark == PARALLEL_STEPS:
                mark = PARALLEL
            v = tirx.Var(name, INDEX)
            count = tirx.floordiv(tirx.max(extent, 0) + step - 1, step)
            parallel = parallel_ok and mark == PARALLEL and self.gen.target_kind == "llvm" and self.gen.cpu.parallel
            body = self._body_with(node, name, init + v * step, parallel_ok and not parallel)
            return tirx.For(v, 0, count, tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL, body)
        if mark == PARALLEL_STEPS:
            mark = PARALLEL
        outer = parallel_ok and mark == PARALLEL and self.gen.target_kind == "llvm"
        if outer:
            chunked = ChunkedLoop(self, self.gen.cpu, self.wrap).emit(node, name, init, extent)
            if chunked is not None:
                return chunked
        elif mark == PARALLEL and self.gen.target_kind == "llvm":
            rows = ChunkedLoop(self, self.gen.cpu, None)
            if rows.has_micro(node.for_get_body(), name):  # register tiles below an inner parallel loop
                return rows.rows(node.for_get_body(), name, init, tirx.max(extent, 0))
        parallel = outer and self.gen.cpu.parallel
        inner_ok = parallel_ok and not outer
        if mark == PARALLEL and self.gen.target_kind == "llvm" and not _has_loop(node.for_get_body()):
            vec = self._vectorized(node, name, init, extent, parallel, inner_ok)
            if vec is not None:
                return vec
        v = tirx.Var(name, INDEX)
        body = self._body_with(node, name, _from_zero(init, v), inner_ok)
        kind = tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL
        return tirx.For(v, 0, extent, kind, body)

    def _body_with(self, node: isl.AstNode, name: str, value: tirx.PrimExpr, parallel_ok: bool) -> tirx.Stmt:
        with self.bound({name: value}):
            return self.node(node.for_get_body(), parallel_ok, None)

    def _vectorized(self, node, name: str, init, extent, parallel: bool, parallel_ok: bool) -> tirx.Stmt | None:
        """An innermost coincident loop whose stores are stride-1 in it becomes a
        main loop of VECTOR_WIDTH-wide vector iterations plus a scalar tail (TVM
        vectorizes constant extents only)."""
        w = VECTOR_WIDTH
        extent = tirx.max(extent, 0)  # an isl loop may run zero times with a negative extent; % would not
        vo, vi, vt = (tirx.Var(name + suffix, INDEX) for suffix in ("_o", "_v", "_t"))
        main_body = self._body_with(node, name, init + vo * w + vi, parallel_ok)
        if not _stride_one_stores(main_body, vi):
            return None
        if has_node(main_body, _is_if_then_else) and has_node(main_body, (tirx.Let,)):
            # TVM 0.27's vectorizer fails on a Let beside an if_then_else ("Let
            # cannot bind the same var to two different values"; found by the
            # random programs: `(i >= T - 1 ? 2 : X(i, j)) * tanh(tanh(float(j)))`)
            return None
        n_main = tirx.floordiv(extent, w)
        tail_body = self._body_with(node, name, init + n_main * w + vt, parallel_ok)
        main = tirx.For(vo, 0, n_main, tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL,
                        tirx.For(vi, 0, w, tirx.ForKind.VECTORIZED, main_body))
        return tirx.SeqStmt([main, tirx.For(vt, 0, tirx.floormod(extent, w), tirx.ForKind.SERIAL, tail_body)])

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
        args = [e.get_op_arg(i) for i in range(e.get_op_n_arg())]
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
        args = [e.get_op_arg(i) for i in range(e.get_op_n_arg())]
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
        name = call.get_op_arg(0).get_id().get_name()
        s = self.stmts[name]
        args = [_index(self.expr(call.get_op_arg(i + 1))) for i in range(call.get_op_n_arg() - 1)]
        env = {**self.env, **dict(zip(s.dims, args))}
        return _statement(s, env, self.gen.sig.buffers)

    def statement_parts(self, call: isl.AstExpr):
        """(buffer, indices, value, combine) of an update statement instance:
        it stores ``combine(buffer[indices], value)``."""
        s = self.stmts[call.get_op_arg(0).get_id().get_name()]
        args = [_index(self.expr(call.get_op_arg(i + 1))) for i in range(call.get_op_n_arg() - 1)]
        env = {**self.env, **dict(zip(s.dims, args))}
        buffers = self.gen.sig.buffers
        if self.buffer_override:
            buffers = {**buffers, **self.buffer_override}
        return _parts(s, env, buffers)


VECTOR_WIDTH = 8


def _index(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """An isl AST value used as a loop bound or index: int32 (it fits there, or the
    tensor would be too large; only intermediate constants may need int64)."""
    return x if dtype_of(x) == INDEX else tirx.Cast(INDEX, x)


def _from_zero(init: tirx.PrimExpr, v: tirx.Var) -> tirx.PrimExpr:
    """The iterator of a loop emitted as ``for v in range(extent)``: ``init + v``.
    TVM 0.27 miscompiles loops with a nonzero min: in ``for c0 in range(-2, 1):
    for c1 in range(max(0, c0), 2)`` its loop normalisation rewrote
    ``max(0, c0)`` wrongly (tests/test_fuzz.py), so every loop starts at 0."""
    return v if isinstance(init, tirx.IntImm) and init.value == 0 else init + v


def _has_loop(node: isl.AstNode) -> bool:
    t = node.get_type()
    NT = isl.ast_node_type
    if t == NT.for_:
        return True
    if t == NT.if_:
        return _has_loop(node.if_get_then_node()) or (node.if_has_else_node() and _has_loop(node.if_get_else_node()))
    if t == NT.block:
        ch = node.block_get_children()
        return any(_has_loop(ch.get_at(i)) for i in range(ch.n_ast_node()))
    if t == NT.mark:
        return _has_loop(node.mark_get_node())
    return False


def _stride_one_stores(stmt: tirx.Stmt, v: tirx.Var) -> bool:
    """Every store's last index moves by exactly 1 with ``v``."""
    from tvm import sym as arith

    stores = list(_stores(stmt))
    for x in stores:
        if not x.indices:
            return False
        coeffs = arith.detect_linear_equation(x.indices[-1], [v])
        if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm) or coeffs[0].value != 1:
            return False
    return bool(stores)


def _is_if_then_else(x) -> bool:
    return isinstance(x, tvm.ir.expr.Call) and getattr(x.op, "name", "") == "prim.if_then_else"


def _stores(stmt: tirx.Stmt):
    """The BufferStores in a statement built by this module."""
    if isinstance(stmt, tirx.BufferStore):
        yield stmt
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            yield from _stores(s)
    elif isinstance(stmt, tirx.IfThenElse):
        yield from _stores(stmt.then_case)
        if stmt.else_case is not None:
            yield from _stores(stmt.else_case)
    elif isinstance(stmt, tirx.For):
        yield from _stores(stmt.body)


def _statement(s: IslStmt, env: dict, buffers: dict) -> tirx.Stmt:
    buf, idx, value, combine = _parts(s, env, buffers)
    return tirx.BufferStore(buf, combine(tirx.BufferLoad(buf, idx), value), idx)


def _parts(s: IslStmt, env: dict, buffers: dict):
    """(buffer, indices, value, combine(old, value)) of a statement instance."""
    c = s.info.comp
    buf, idx = physical(buffers[c.tensor], [lower_expr(e, env, buffers, INDEX) for e in c.indices])
    dtype = buf.dtype
    if s.is_init:
        return buf, idx, tirx.const(ty.identity(c.reduction, str(dtype)), dtype), lambda old, v: v
    value = lower_expr(c.rhs, env, buffers, str(dtype), wrap=True)
    if str(dtype) == "bool" and c.reduction is not None:
        # bool has no arithmetic in TIR: + and max are "any", * and min are "all"
        return buf, idx, value, (tirx.Or if c.reduction in ("+", "max") else tirx.And)
    match c.reduction:
        case None:
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
