"""Semantic checks: names, tensors, index and reduction variables, types.

``check(program, entry)`` is the stage entry point.  It returns a
:class:`CheckedDef`: a new, typed tree in which every ``Call`` has become an
``Access`` or a ``BuiltinCall``, every name an ``IndexVar`` or a ``SizeVar``,
``where x = e`` bindings are substituted, and every expression carries its
``dtype``.  The input tree is not modified.  Ranges are inferred later
(:mod:`tcdsl.sema.ranges`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import TcSemanticError
from ..syntax import nodes as n
from . import builtins as bt
from .affine import linear_form
from .rename import rename_loop_clashes
from .sizes import (arg_reduction, check_constant_dims, derive_sizes, dim_expr, dim_isl, free_size_names,  # noqa: F401
                    is_affine_index, lhs_index_var, unit_coefficient)
from .typer import Typer, _check_index_literal


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    role: str  # "input", "output" or "temp"
    rank: int
    # declared dims (inputs, typed outputs): a size name, a constant, or an
    # affine expression of sizes (SizeVar nodes; ``4 * H``)
    dims: tuple[str | int | n.Expr, ...] | None
    span: object = None


@dataclass(frozen=True)
class CheckedDef:
    node: n.Def
    tensors: dict[str, TensorInfo]
    sizes: tuple[str, ...]  # size names: those of the params in order of appearance, then the free ones
    size_origin: dict[str, tuple[str, int] | None]  # size -> (tensor, dim) that first declares it; None: free
    # sizes that stand for a product or quotient of sizes (``G_x_G``: ``G * G``), computed at a call
    derived: dict[str, n.Expr] = field(default_factory=dict)

    @property
    def free_sizes(self) -> tuple[str, ...]:
        """Sizes no input's shape mentions (loop bounds, where ranges, output
        types only): given at compile time (``sizes=``) or at the call."""
        return tuple(s for s in self.sizes if self.size_origin[s] is None and s not in self.derived)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.node.params)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.node.outputs)

    @property
    def temps(self) -> tuple[str, ...]:
        return tuple(t for t, i in self.tensors.items() if i.role == "temp")


def check(program: n.Program, entry: str | None = None) -> CheckedDef:
    """Select the ``def`` to compile and check it (see the module docstring)."""
    d = select_def(program, entry)
    return _Checker(d).run()


def select_def(program: n.Program, entry: str | None) -> n.Def:
    names = [d.name for d in program.defs]
    for d in program.defs:
        if names.count(d.name) > 1:
            raise TcSemanticError(f"'{d.name}' is defined more than once", d.span)
    if not program.defs:
        raise TcSemanticError("the source defines no function ('def')", program.span)
    if entry is None:
        if len(program.defs) > 1:  # point at the second def: that is where the choice arises
            raise TcSemanticError(f"the source defines {len(names)} functions ({', '.join(names)}); "
                                  f"choose one with entry= (--entry on the command line)", program.defs[1].span)
        return program.defs[0]
    for d in program.defs:
        if d.name == entry:
            return d
    raise TcSemanticError(f"no function named '{entry}'; the source defines {', '.join(names)}",
                          program.defs[0].span)


class _Checker:
    def __init__(self, d: n.Def):
        self.d = d
        self.tensors: dict[str, TensorInfo] = {}
        self.sizes: dict[str, tuple[str, int] | None] = {}
        self.out_dims: dict[str, tuple[str | int | n.Expr, ...]] = {}
        self.written: set[str] = set()
        self.write_rank: dict[str, int] = {}
        # Inside a `for`, a tensor written anywhere in the loop body may be read
        # before its write (a recurrence reading the previous iteration's value).
        self.carried: set[str] = set()
        self.first_rank = {c.tensor: len(c.indices) for c in n.comprehensions(d.body)}

    # ------------------------------------------------------------- signature
    def run(self) -> CheckedDef:
        original = self.d
        self.d, derived = derive_sizes(self.d)
        for p in self.d.params:
            self._declare_param(p)
        for name, span in free_size_names(original, set(self.sizes)):
            _not_builtin(name, span, "a size")
            self.sizes[name] = None
        for name in derived:
            self.sizes[name] = None
        outputs = set()
        for o in self.d.outputs:
            _not_builtin(o.name, o.span, "an output")
            if o.name in self.tensors or o.name in outputs:
                raise TcSemanticError(f"'{o.name}' is already declared", o.span)
            if o.name in self.sizes:
                raise TcSemanticError(f"'{o.name}' is a size and cannot name an output", o.span)
            outputs.add(o.name)
            if o.type is not None:
                check_constant_dims(o.type)
                self.out_dims[o.name] = tuple(self._dim(d, o.type, None) for d in o.type.dims)
        body = self._stmts(self.d.body, loops=())
        for o in self.d.outputs:
            if o.name not in self.written:
                raise TcSemanticError(f"output '{o.name}' is never written", o.span)
        body = Typer(self).type_body(body)
        body = rename_loop_clashes(body, set(self.sizes) | set(self.tensors))
        node = replace(self.d, body=body)
        return CheckedDef(node, self.tensors, tuple(self.sizes), dict(self.sizes), derived)

    def _declare_param(self, p: n.Param) -> None:
        _not_builtin(p.name, p.span, "a tensor")
        if p.name in self.tensors:
            raise TcSemanticError(f"parameter '{p.name}' is declared twice", p.span)
        if p.name in self.sizes:
            raise TcSemanticError(f"'{p.name}' is a size and cannot name a tensor", p.span)
        check_constant_dims(p.type)
        dims = tuple(self._dim(d, p.type, (p.name, k)) for k, d in enumerate(p.type.dims))
        self.tensors[p.name] = TensorInfo(p.name, p.type.dtype, "input", len(p.type.dims), dims, p.span)

    def _dim(self, d: str | int | n.Expr, t: n.TensorType, origin: tuple[str, int] | None) -> str | int | n.Expr:
        """A declared size: a name (a new one is declared, with ``origin``),
        a constant, or a linear expression of sizes (``4 * H``, ``X.0``)."""
        if isinstance(d, int):
            return d
        if isinstance(d, str):
            self._size_name(d, t.span, origin)
            return d

        def fn(x):
            match x:
                case n.Ident(name=name):
                    self._size_name(name, x.span, origin)
                    return n.SizeVar(name, span=x.span)
                case n.DimSize():
                    return self._dim_size(x)
            return n.map_children(x, fn)
        e = fn(d)
        if linear_form(e) is None:
            raise TcSemanticError("a size must be a name, a constant, or a sum of sizes times integer constants "
                                  "(like '4 * H' or '2 * N + 1')", d.span or t.span)
        return e

    def _size_name(self, d: str, span, origin: tuple[str, int] | None) -> None:
        _not_builtin(d, span, "a size")
        if d in self.tensors:
            raise TcSemanticError(f"'{d}' is a tensor and cannot be used as a size", span)
        if d not in self.sizes:
            if origin is None:
                raise TcSemanticError(f"unknown size '{d}'", span)
            self.sizes[d] = origin

    def _output_decl(self, name: str) -> n.Output | None:
        return next((o for o in self.d.outputs if o.name == name), None)

    # ------------------------------------------------------------ statements
    def _stmts(self, stmts, loops: tuple[str, ...]) -> tuple[n.Stmt, ...]:
        return tuple(self._stmt(s, loops) for s in stmts)

    def _stmt(self, s: n.Stmt, loops: tuple[str, ...]) -> n.Stmt:
        match s:
            case n.For():
                if s.var in self.sizes or s.var in self.tensors or s.var in loops:
                    raise TcSemanticError(f"loop variable '{s.var}' hides an existing name", s.span)
                lo = self._size_expr(s.lo, loops, "a loop bound")
                hi = self._size_expr(s.hi, loops, "a loop bound")
                saved = self.carried
                self.carried = saved | {c.tensor for c in n.comprehensions(s.body)}
                body = self._stmts(s.body, loops + (s.var,))
                self.carried = saved
                return replace(s, lo=lo, hi=hi, body=body)
            case n.If():
                cond = self._size_expr(s.cond, loops, "an 'if' condition")
                return replace(s, cond=cond, then=self._stmts(s.then, loops), orelse=self._stmts(s.orelse, loops))
            case n.Comprehension():
                return self._comprehension(s, loops)
            case _:
                raise AssertionError(f"unexpected statement {type(s).__name__}")

    def _size_expr(self, e: n.Expr, loops: tuple[str, ...], what: str) -> n.Expr:
        """Resolve an expression over sizes (also ``X.k``) and loop variables only."""
        def fn(x):
            match x:
                case n.Ident(name=name):
                    if name in loops:
                        return n.IndexVar(name, span=x.span)
                    if name in self.sizes:
                        return n.SizeVar(name, span=x.span)
                    raise TcSemanticError(f"'{name}' is not a size or loop variable; {what} may only use those",
                                          x.span)
                case n.DimSize():
                    return self._dim_size(x)
                case n.Call():
                    raise TcSemanticError(f"{what} may only use sizes, loop variables and constants", x.span)
                case n.Const(value=float()):  # TC: 'expected integral type'
                    raise TcSemanticError(f"{what} may only use integers, but {x.value:g} is a float", x.span)
                case n.Const():
                    _check_index_literal(x)
            return n.map_children(x, fn)
        return fn(e)

    def _comprehension(self, s: n.Comprehension, loops: tuple[str, ...]) -> n.Comprehension:
        info = self.tensors.get(s.tensor)
        if info is not None and info.role == "input":
            raise TcSemanticError(f"'{s.tensor}' is an input and cannot be written", s.span)
        if s.tensor in self.sizes:
            raise TcSemanticError(f"'{s.tensor}' is a size, not a tensor", s.span)
        _not_builtin(s.tensor, s.span, "a tensor")
        lets = _lets(s)
        lhs, own = self._lhs(s, loops)
        if s.tensor in self.write_rank and self.write_rank[s.tensor] != len(lhs):
            raise TcSemanticError(f"'{s.tensor}' was written with {_count(self.write_rank[s.tensor], 'index')}, "
                                  f"but {len(lhs)} are given here", s.span)
        decl = self._output_decl(s.tensor)
        if decl is not None and decl.type is not None and len(decl.type.dims) != len(lhs):
            raise TcSemanticError(f"output '{s.tensor}' is declared with {_count(len(decl.type.dims), 'dimension')}, "
                                  f"but {_count(len(lhs), 'index')} {_are(len(lhs))} given", s.span)
        scope = _Scope(self, loops, own, lets, s.tensor)
        wheres = []
        for w in s.wheres:
            match w:
                case n.RangeConstraint():
                    self._range_var(w, loops, lets)
                    wheres.append(replace(w, lo=self._size_expr(w.lo, loops, "a where-range"),
                                          hi=self._size_expr(w.hi, loops, "a where-range")))
                case n.Exists():
                    wheres.append(replace(w, expr=scope.resolve(w.expr)))
                case n.Let():
                    pass
        rhs = scope.resolve(s.rhs)
        for w in s.wheres:  # TC: a variable only constrained by a where-range is a reduction variable
            if isinstance(w, n.RangeConstraint) and w.var not in scope.order:
                scope.order.append(w.var)
                scope.first_use[w.var] = w.span
        reduction_vars = tuple(v for v in scope.order if v not in own)
        if reduction_vars and s.op == "=":
            v = reduction_vars[0]
            hint = ""
            if v[:1].isupper():
                hint = (f"; if '{v}' is meant as a size, a free size must first appear in a loop bound, a where "
                        f"range, an 'if' condition or an output's type (docs/language.md, step 12)")
            raise TcSemanticError(
                f"'{v}' appears only on the right-hand side, which makes it a reduction "
                f"variable, but '=' is not a reduction; use '+=!' (or '*=!', 'min=!', 'max=!')" + hint,
                scope.first_use[v])
        if s.tensor not in self.tensors:
            self.tensors[s.tensor] = self.new_tensor(s.tensor, len(lhs), s.span)
        self.written.add(s.tensor)
        self.write_rank[s.tensor] = len(lhs)
        if s.op in ("argmax=!", "argmin=!"):
            rhs = arg_reduction(s, lhs, rhs, reduction_vars)
        else:
            reduction_vars = _contiguous_last(rhs, reduction_vars, s.tensor)
        eq = s.equivalent and replace(s.equivalent, args=tuple(scope.resolve(a) for a in s.equivalent.args))
        return replace(s, indices=lhs, rhs=rhs, wheres=tuple(wheres), reduction_vars=reduction_vars,
                       equivalent=eq)

    def _range_var(self, w: n.RangeConstraint, loops, lets) -> None:
        """``where v in lo:hi`` must name an index variable (TC: 'undefined variable')."""
        if w.var in loops or w.var in self.sizes:
            raise TcSemanticError(f"'{w.var}' is not an index variable of this statement", w.span)
        if w.var in lets:
            raise TcSemanticError(f"'{w.var}' is bound by 'where {w.var} = ...', so it is not an index variable "
                                  f"and has no range", w.span)
        if w.var in self.tensors or w.var in self.first_rank:
            raise TcSemanticError(f"'{w.var}' is a tensor, not an index variable", w.span)
        _not_builtin(w.var, w.span, "an index variable")

    def _dim_size(self, e: n.DimSize) -> n.Expr:
        """``X.k``: the size of dimension ``k`` of ``X``, as declared."""
        t, k = e.tensor, e.dim
        info = self.tensors.get(t)
        if info is None:
            raise TcSemanticError(f"unknown tensor '{t}'", e.span)
        if info.dims is None:
            raise TcSemanticError(f"'{t}.{k}' is not supported yet for tensors without declared sizes", e.span)
        if not 0 <= k < len(info.dims):
            raise TcSemanticError(f"'{t}' has {_count(len(info.dims), 'dimension')}; '{t}.{k}' does not exist",
                                  e.span)
        return dim_expr(info.dims[k], e.span)

    def new_tensor(self, name: str, rank: int, span=None) -> TensorInfo:
        decl = self._output_decl(name)
        role = "output" if decl is not None else "temp"
        dtype = decl.type.dtype if decl is not None and decl.type is not None else "?"
        dims = self.out_dims.get(name)
        return TensorInfo(name, dtype, role, rank, dims, span)

    def _lhs(self, s: n.Comprehension, loops) -> tuple[tuple[n.Expr, ...], dict[str, None]]:
        own: dict[str, None] = {}
        out = []
        for e in s.indices:
            if isinstance(e, n.Ident) and e.name not in loops and e.name not in self.sizes:
                self._own_var(e, own)
                out.append(n.IndexVar(e.name, span=e.span))
            else:
                out.append(self._lhs_index(e, loops, own, s.tensor))
        return tuple(out), own

    def _own_var(self, e: n.Ident, own: dict[str, None]) -> None:
        if e.name in own:
            raise TcSemanticError(f"index variable '{e.name}' appears twice on the left-hand side", e.span)
        if e.name in self.tensors:
            raise TcSemanticError(f"'{e.name}' is a tensor, not an index variable", e.span)
        _not_builtin(e.name, e.span, "an index variable")
        own[e.name] = None

    def _lhs_index(self, e: n.Expr, loops, own: dict[str, None], tensor: str) -> n.Expr:
        """An lhs index other than a bare variable: an affine expression of
        loop variables and sizes (``t - 1``), plus or minus at most one index
        variable of the statement (``H + j``, ``N - 1 - i``): the tensor's
        element ``H + j`` is written for every ``j`` of ``j``'s range."""
        names = [x for x in n.walk(e) if isinstance(x, n.Ident) and x.name not in loops and x.name not in self.sizes]
        var = names[0].name if names else None
        if len({x.name for x in names}) > 1:
            raise TcSemanticError("a left-hand side index may use one index variable (plus or minus sizes, loop "
                                  "variables and constants)", e.span)
        scope = loops + ((var,) if var is not None else ())
        try:
            index = self._size_expr(e, scope, "a left-hand side index")
        except TcSemanticError:
            index = None
        if index is None or not is_affine_index(index) or (var is not None and not unit_coefficient(index, var)):
            raise TcSemanticError("a left-hand side index must be an index variable, an affine expression of "
                                  "loop variables and sizes (like 't - 1'), or one index variable plus or minus "
                                  "such an expression (like 'H + j' or 'N - 1 - i')", e.span)
        if not any(isinstance(x, n.IndexVar) for x in n.walk(index)):
            # TC's grammar has only index variables on the left-hand side
            raise TcSemanticError("a left-hand side index must use an index or loop variable; a constant "
                                  "index is not allowed, as in TC (for one element, write "
                                  f"'{tensor}(k) ... where k in 0:1')", e.span)
        if var is not None:
            self._own_var(names[0], own)
        return index

class _Scope:
    """Name resolution for the right-hand side of one comprehension."""

    def __init__(self, checker: _Checker, loops, own: dict[str, None], lets: dict[str, n.Expr], writing: str = ""):
        self.c = checker
        self.writing = writing
        self.loops = loops
        self.own = own
        self.lets = lets
        self.order: list[str] = list(own)
        self.first_use: dict[str, object] = {}
        self._expanding: set[str] = set()

    def resolve(self, e: n.Expr) -> n.Expr:
        match e:
            case n.Ident(name=name):
                return self._name(name, e)
            case n.Call(name=name, args=args):
                return self._call(e, name, tuple(self.resolve(a) for a in args))
            case n.DimSize():
                return self.c._dim_size(e)
        return n.map_children(e, self.resolve)

    def _name(self, name: str, e: n.Expr) -> n.Expr:
        if name in self.lets:
            if name in self._expanding:
                raise TcSemanticError(f"'{name}' is defined in terms of itself", e.span)
            self._expanding.add(name)
            out = self.resolve(self.lets[name])
            self._expanding.discard(name)
            return out
        if name in self.loops:
            return n.IndexVar(name, span=e.span)
        if name in self.c.sizes:
            return n.SizeVar(name, span=e.span)
        info = self.c.tensors.get(name)
        if info is None and self.c.first_rank.get(name) == 0:  # a 0-rank tensor, written later
            if name not in self.c.carried:
                raise TcSemanticError(f"'{name}' is read before it is written", e.span)
            info = self.c.tensors[name] = self.c.new_tensor(name, 0)
        if info is not None:
            if info.rank != 0:
                raise TcSemanticError(f"'{name}' has {_count(info.rank, 'dimension')}, but 0 indices are given",
                                      e.span)
            self._check_readable(name, e)
            return n.Access(name, (), span=e.span)
        if name not in self.order:
            _not_builtin(name, e.span, "an index variable")
            self.order.append(name)
            self.first_use[name] = e.span
        return n.IndexVar(name, span=e.span)

    def _check_readable(self, name: str, e: n.Expr) -> None:
        info = self.c.tensors.get(name)
        if info is not None and info.role != "input" and name not in self.c.written and name not in self.c.carried:
            self._unwritten(name, e)

    def _unwritten(self, name: str, e: n.Expr):
        hint = ""
        if name == self.writing:
            hint = (f"; a statement that reads other points of the tensor it writes needs a statement before it "
                    f"that writes '{name}' (its first points, or all of it), or a 'for' loop over the steps")
        raise TcSemanticError(f"'{name}' is read before it is written" + hint, e.span)

    def _call(self, e: n.Call, name: str, args: tuple[n.Expr, ...]) -> n.Expr:
        info = self.c.tensors.get(name)
        if info is None and name in self.c.carried:
            self.c.tensors[name] = self.c.new_tensor(name, self.c.first_rank[name])
            info = self.c.tensors[name]
        if info is not None:
            rank = self.c.write_rank.get(name, info.rank)
            if len(args) != rank:
                raise TcSemanticError(f"'{name}' has {_count(rank, 'dimension')}, but "
                                      f"{_count(len(args), 'index')} {_are(len(args))} given", e.span)
            self._check_readable(name, e)
            return n.Access(name, args, span=e.span)
        b = bt.lookup(name)
        if b is not None:
            if len(args) != b.arity:
                raise TcSemanticError(f"'{name}' takes {_count(b.arity, 'argument')}, "
                                      f"but {len(args)} {_are(len(args))} given", e.span)
            return n.BuiltinCall(name, args, span=e.span)
        if name in self.c.sizes:
            raise TcSemanticError(f"'{name}' is a size, not a tensor", e.span)
        if name in self.c.first_rank:
            self._unwritten(name, e)
        raise TcSemanticError(f"unknown tensor or function '{name}'", e.span)

def _lets(s: n.Comprehension) -> dict[str, n.Expr]:
    """The ``where x = e`` bindings of a statement; TC: a name is bound once."""
    lets: dict[str, n.Expr] = {}
    for w in s.wheres:
        if isinstance(w, n.Let):
            if w.name in lets:
                raise TcSemanticError(f"'{w.name}' is bound twice in the where clauses of this statement", w.span)
            _not_builtin(w.name, w.span, "a where binding")
            lets[w.name] = w.expr
    return lets


def _not_builtin(name: str, span, what: str) -> None:
    """TC: a builtin function's name cannot be redefined (it would hide the function)."""
    if bt.lookup(name) is not None:
        raise TcSemanticError(f"'{name}' is a builtin function and cannot name {what}", span)


def _count(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {'indices' if word == 'index' else word + 's'}"


def _are(k: int) -> str:
    return "is" if k == 1 else "are"


def _contiguous_last(rhs: n.Expr, reduction_vars: tuple[str, ...], tensor: str) -> tuple[str, ...]:
    """The reduction variables in their order of appearance, but the one that
    most reads have in their last index (with coefficient 1) and fewest in
    another last, as the innermost loop: ``loss +=! w(c) * y(n, c) + x(n, c)`` sums over ``(n, c)``,
    not ``(c, n)``, whose inner loop read ``x`` and ``y`` a row apart (5.8x
    slower).  TC leaves the order of a reduction's terms open (a sum that
    reads its own output keeps the order written, as does a tie)."""
    if len(reduction_vars) < 2:
        return reduction_vars
    # reads with the variable in their last index, less those with it in another one; among
    # those of the best score, the one last in reads of more dimensions (``exp(-g(l) * K(i, j))``:
    # ``j`` of the matrix ``K``, not ``l`` of the short vector ``g``, as the inner loop)
    score = dict.fromkeys(reduction_vars, 0)
    weight = dict.fromkeys(reduction_vars, 0)
    for a in n.walk(rhs):
        if isinstance(a, n.Access) and a.tensor == tensor:
            return reduction_vars
        if isinstance(a, n.Access) and a.indices:
            lin = n.linear(a.indices[-1]) or {}
            earlier = {x.name for e in a.indices[:-1] for x in n.walk(e) if isinstance(x, n.IndexVar)}
            for v in score:
                score[v] += (lin.get(v) == 1) - (v in earlier)
                weight[v] += len(a.indices) if lin.get(v) == 1 else 0
    best = max(score.values())
    if best <= 0:
        return reduction_vars
    heaviest = max(weight[v] for v in reduction_vars if score[v] == best)
    if score[reduction_vars[-1]] == best and weight[reduction_vars[-1]] == heaviest:
        return reduction_vars
    inner = next(v for v in reduction_vars if score[v] == best and weight[v] == heaviest)
    return tuple(v for v in reduction_vars if v != inner) + (inner,)
