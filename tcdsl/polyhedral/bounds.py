"""Static bounds checks: every affine read and write inside its tensor.

``check_bounds(model, strict=False)`` is the stage entry point; it runs after
``build_model`` and returns the reads it could not prove (also issued as
:class:`~tcdsl.errors.TcWarning`).  For every comprehension and every
tensor read with affine indices, isl decides whether some statement instance
allowed by the context (sizes >= 1, loop ranges, ``if`` conditions, the
statement's domain) reads outside the tensor's extents:

* a read is checked where it is evaluated: in the ``then`` branch of
  ``c ? a : b`` where ``c`` may hold, in the ``else`` branch where it may not,
  in the right operand of ``a && b`` where ``a`` may hold and of ``a || b``
  where it may not (the affine comparisons of a condition decide, a
  quotient or remainder by a size taken as a variable bounded as it is,
  :func:`_abstracted`; a comparison with a tensor value may go either way):
  ``i > 0 ? A(i - 1) : 0``, ``i >= 1 && A(i - 1) > 0`` and
  ``p % W > 0 ? A(p - 1) : 0`` are in bounds;
* a read that leaves its tensor for *every* size is an error
  (:class:`~tcdsl.errors.TcSemanticError`: ``A(i + 1) where i in 0:N``
  always reads ``A(N)``); one that leaves it for *some* sizes (TC's
  "unchecked precondition", ``I(i, i + j, j)`` of a ``float(N, NM, M) I``)
  is a warning naming the access (``FILE:LINE:COL``) and a counterexample
  from ``sample_point``, and the sizes for which it leaves are kept
  (``RangeInfo.size_guards``): a call with such sizes is refused with a
  :class:`~tcdsl.errors.TcShapeError` before the kernel runs
  (runtime/args.py), unless :func:`check_call_sizes` proves the program as
  written for the call's sizes (known sizes make ``e % D`` affine): then
  the call runs the program as written.  Under ``strict=True``
  (``options={"strict_bounds": True}``) both are errors;
* a write outside a declared output size (``-> (float(N) B)``) is an error;
  writes to tensors whose sizes are inferred are inside them by construction
  (the extents cover every write), which is asserted.

Non-affine and indirect reads cannot be proved and are not reported here
(the code generator clamps their indices into the tensor).

:func:`guarded_reads` names the reads that are inside their tensor only
where their conditions hold (``A(i - 1)`` of ``i > 0 ? A(i - 1) : 0``).
The code generator keeps their indices inside the tensor as well
(codegen/expr.py): TVM's simplifier merges nested conditions into one
``&&``, which LLVM evaluates without short-circuit, so a read under a
condition may run where the condition is false.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import islpy as isl

from ..errors import InternalError, TcSemanticError, TcWarning, caller_level
from ..sema.affine import NotAffine, isl_name, lift, params_prefix, set_to_cond, to_isl
from ..sema.check import dim_isl
from ..sema.ranges import RangeInfo, StmtInfo
from ..syntax import nodes as n
from .model import Model

_CMP = ("==", "!=", "<", "<=", ">", ">=", "&&", "||")


@dataclass(frozen=True)
class OutOfBounds:
    """A read that may go out of bounds, with a counterexample."""

    access: n.Access
    what: str  # "'A' may be read out of bounds: for sizes ...: A(-1), but ..."
    sizes: isl.Set | None = None  # the sizes (parameters: sizes only) for which it is read out of bounds
    always: bool = False  # for every size the program accepts

    @property
    def message(self) -> str:
        """``FILE:LINE:COL: what``, the source line and a caret."""
        return self.access.span.format(self.what) if self.access.span is not None else self.what


def check_bounds(model: Model, strict: bool = False) -> list[OutOfBounds]:
    """Check every statement of ``model`` (see the module docstring).  Warns
    (or raises, when ``strict``) for each read that may be out of bounds and
    returns them; raises TcSemanticError for a write out of a declared size."""
    checker = _Checker(model.ranges)
    found: list[OutOfBounds] = []
    for st in model.ranges.stmts:
        checker.writes(st)
        found += checker.reads(st)
    for f in found:
        if f.always:
            raise TcSemanticError(f.what.replace("may be read out of bounds", "is read out of bounds for every size"),
                                  f.access.span)
        if strict:
            raise TcSemanticError(f.what, f.access.span)
    guards = []
    for f in found:
        warnings.warn(TcWarning(f.message), stacklevel=caller_level())
        guards.append(SizeGuard(set_to_cond(f.sizes.coalesce()), f.access, f.sizes.coalesce()))
    model.ranges.size_guards = tuple(guards)
    return found


@dataclass(frozen=True)
class SizeGuard:
    """The sizes for which a read leaves its tensor, as a condition over the
    sizes (``cond``): a call with such sizes is refused (codegen/signature.py
    hands it to the runtime)."""

    cond: n.Expr
    access: n.Access
    sizes: isl.Set | None = None  # the same, as an isl set over the sizes

    @property
    def message(self) -> str:
        where = (f"{self.access.span.source.name}:{self.access.span.line}:{self.access.span.col}: "
                 if self.access.span is not None else "")
        return f"{where}'{self.access.tensor}' would be read out of bounds"


def at_called_sizes(ranges: RangeInfo, x):
    """``x`` (a set or union set) without the sizes a call is refused for:
    those at which some read leaves its tensor (:class:`SizeGuard`)."""
    for g in ranges.size_guards or ():
        if g.sizes is not None:
            x = x.intersect_params(g.sizes.params().complement().align_params(x.get_space()))
    return x


def guarded_reads(s, ranges: RangeInfo) -> frozenset[int]:
    """The ``id``s of the affine reads of the isl statement ``s`` (a
    model.IslStmt: a comprehension, or a piece of one, polyhedral/split.py)
    that leave their tensor somewhere in its domain, though not where they
    are evaluated (see the module docstring); computed once per statement."""
    if s.guarded_reads is None:
        st = _Stmt(s.name, s.dims, s.domain, s.info.comp, s.info.loops)
        checker, out = _Checker(ranges), set()
        for acc, domain in checker._guarded_accesses(st, st.comp.rhs, st.domain):
            if domain is st.domain:
                continue  # evaluated everywhere: proved in bounds, or refused, or guarded at the call
            try:
                m = checker._map(st, st.domain, acc.tensor, acc.indices)
            except NotAffine:
                continue
            if not checker._outside(m, acc.tensor).is_empty():
                out.add(id(acc))
        s.guarded_reads = frozenset(out)
    return s.guarded_reads


@dataclass(frozen=True)
class _Stmt:
    """What the checks read of a statement: an isl statement seen as a StmtInfo."""

    name: str
    vars: tuple[str, ...]
    domain: isl.Set
    comp: n.Comprehension
    loops: tuple = ()


def check_call_sizes(ranges: RangeInfo, sizes: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> None:
    """At a call with sizes outside the context the program was checked in (a
    size of 0), prove the accesses again for these sizes and the tensors'
    ``shapes``: the compiled code leaves out conditions implied by sizes >= 1,
    so a statement unrelated to the empty size still runs, and may read or
    write an empty tensor (``where i in 0:1`` reading ``x(i, j)`` with N = 0).
    Also at a call whose sizes a size guard names: with the sizes known, a
    guard ``e % D < D / 2`` is affine and may prove the read.
    Raises TcShapeError for the first access that would leave its tensor."""
    checker = _CallChecker(ranges, sizes, shapes)
    for st in ranges.stmts:
        try:
            checker.writes(st)
        except (TcSemanticError, InternalError):
            raise _call_error(sizes, st.comp, f"'{st.comp.tensor}' would be written out of bounds") from None
        for f in checker.reads(st):
            raise _call_error(sizes, f.access, f.what.replace("may be read", "would be read"))


def _call_error(sizes: dict[str, int], node: n.Node, what: str) -> TcShapeError:
    from ..errors import TcShapeError

    where = f"{node.span.source.name}:{node.span.line}:{node.span.col}: " if node.span is not None else ""
    given = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return TcShapeError(f"sizes {given}: {where}{what}")


class _Checker:
    def __init__(self, ranges: RangeInfo):
        self.r = ranges
        self.ctx = ranges.ctx
        self.params = ranges.params
        self._extents: dict[str, isl.Set] = {}

    # ----------------------------------------------------------- extents
    def extent_set(self, tensor: str) -> isl.Set:
        """``{ tensor[o0, ...] : 0 <= ok < extent_k }`` over the parameters."""
        if tensor in self._extents:
            return self._extents[tensor]
        info = self.r.checked.tensors[tensor]
        dims = [f"o{k}" for k in range(info.rank)]
        space = isl.Space.create_from_names(self.ctx, set=dims, params=[isl_name(p) for p in self.params])
        space = space.set_tuple_name(isl.dim_type.set, isl_name(tensor))
        box = isl.Set.universe(space)
        ls = isl.LocalSpace.from_space(space)
        for k in range(info.rank):
            var = isl.PwAff.var_on_domain(ls, isl.dim_type.set, k)
            ext = lift(self._extent(tensor, k), space)
            box = box & var.ge_set(isl.PwAff.zero_on_domain(ls)) & var.lt_set(ext)
        self._extents[tensor] = box
        return box

    def _extent(self, tensor: str, k: int) -> isl.PwAff:
        info = self.r.checked.tensors[tensor]
        if info.dims is not None:
            text = dim_isl(info.dims[k])
            return isl.PwAff.read_from_str(self.ctx, params_prefix(self.params) + "{ [(" + text + ")] }")
        return self.r.extents[tensor][k]

    def _map(self, st: StmtInfo, domain: isl.Set, tensor: str, indices) -> isl.Map:
        text = (params_prefix(self.params) + "{ " + st.name + "[" + ", ".join(map(isl_name, st.vars)) + "] -> "
                + isl_name(tensor) + "[" + ", ".join(to_isl(e) for e in indices) + "] }")
        try:
            m = isl.Map.read_from_str(self.ctx, text)
        except isl.Error:
            raise NotAffine(indices[0] if indices else n.Const(0)) from None
        return m.intersect_domain(domain)

    def _outside(self, m: isl.Map, tensor: str) -> isl.Map:
        ext = self.extent_set(tensor).align_params(m.get_space().params())
        return m.subtract_range(ext)

    # ------------------------------------------------------------ writes
    def writes(self, st: StmtInfo) -> None:
        """The update's writes and, for ``op=!``, the init's (over the lhs box)."""
        c = st.comp
        self._writes(st, self.domain(st, st.domain), c)
        if c.initializes:
            own = st.vars[: len(st.vars) - len(c.reduction_vars)]
            pad = st.init_domain.insert_dims(isl.dim_type.set, len(own), len(c.reduction_vars))
            for k, v in enumerate(st.vars):
                pad = pad.set_dim_name(isl.dim_type.set, k, isl_name(v))
            self._writes(st, self.domain(st, pad.set_tuple_name(st.name)), c)

    def domain(self, st: StmtInfo, s: isl.Set) -> isl.Set:
        """The instances of ``st`` to check (overridden for concrete sizes)."""
        return s

    def _writes(self, st: StmtInfo, domain: isl.Set, c: n.Comprehension) -> None:
        bad = self._outside(self._map(st, domain, c.tensor, c.indices), c.tensor)
        if bad.is_empty():
            return
        if self.r.checked.tensors[c.tensor].dims is None:
            raise InternalError(f"{st.name} writes '{c.tensor}' outside its inferred extent: {bad}")
        raise TcSemanticError(f"'{c.tensor}' may be written out of its declared size: "
                              f"{self._witness(bad, st, c.tensor)}", c.span)

    # ------------------------------------------------------------- reads
    def reads(self, st: StmtInfo) -> list[OutOfBounds]:
        out: list[OutOfBounds] = []
        for acc, domain in self._guarded_accesses(st, st.comp.rhs, self.domain(st, st.domain)):
            try:
                m = self._map(st, domain, acc.tensor, acc.indices)
            except NotAffine:
                continue  # indirect or non-affine: cannot be proved
            bad = self._outside(m, acc.tensor)
            if not bad.is_empty():
                what = f"'{acc.tensor}' may be read out of bounds: {self._witness(bad, st, acc.tensor)}"
                sizes = self._bad_sizes(bad)
                context = self.r.size_context.align_params(sizes.get_space())
                out.append(OutOfBounds(acc, what, sizes, context.is_subset(sizes.align_params(context.get_space()))))
        return out

    def _bad_sizes(self, bad: isl.Map) -> isl.Set:
        """The sizes for which some instance of ``bad`` exists: its
        parameters, with the loop variables' (kept in the domain's
        parameter constraints) projected out."""
        s = bad.domain().params()
        names = {isl_name(x) for x in self.r.checked.sizes}
        for k in reversed(range(s.dim(isl.dim_type.param))):
            if s.get_dim_name(isl.dim_type.param, k) not in names:
                s = s.project_out(isl.dim_type.param, k, 1)
        return s

    def _guarded_accesses(self, st: StmtInfo, e: n.Expr, domain: isl.Set):
        """(access, the part of the domain where it is evaluated), for every
        tensor read in ``e``: ``c ? a : b`` narrows the domain of ``a`` to
        where ``c`` may hold and that of ``b`` to where it may not; ``a && b``
        that of ``b`` to where ``a`` may hold, ``a || b`` to where it may not.
        An access evaluated everywhere comes with ``domain`` itself."""
        match e:
            case n.Select(cond=c, then=a, other=b):
                yield from self._guarded_accesses(st, c, domain)
                may, must = self._condition(st, c, domain)
                yield from self._guarded_accesses(st, a, may)
                yield from self._guarded_accesses(st, b, domain if must is None else domain - must)
                return
            case n.Binary(op="&&" | "||" as op, lhs=a, rhs=b):
                yield from self._guarded_accesses(st, a, domain)
                may, must = self._condition(st, a, domain)
                yield from self._guarded_accesses(st, b, may if op == "&&" else
                                                  domain if must is None else domain - must)
                return
            case n.Access():
                yield e, domain
        for child in n.children(e):
            if isinstance(child, n.Expr):
                yield from self._guarded_accesses(st, child, domain)

    def _condition(self, st: StmtInfo, c: n.Expr, domain: isl.Set) -> tuple[isl.Set, isl.Set | None]:
        """(where ``c`` may hold, where it must hold) within ``domain``: the
        first is ``domain`` itself and the second None when nothing is known
        (a comparison of tensor values)."""
        match c:
            case n.Binary(op="&&" | "||" as op, lhs=a, rhs=b):
                (may_a, must_a), (may_b, must_b) = self._condition(st, a, domain), self._condition(st, b, domain)
                if op == "&&":
                    may = domain if may_a is domain and may_b is domain else may_a & may_b
                    must = None if must_a is None or must_b is None else must_a & must_b
                else:
                    may = domain if may_a is domain or may_b is domain else may_a | may_b
                    must = must_a if must_b is None else must_b if must_a is None else must_a | must_b
                return may, must
            case n.Unary(op="!", operand=a):
                may_a, must_a = self._condition(st, a, domain)
                return (domain if must_a is None else domain - must_a), (None if may_a is domain else domain - may_a)
            case n.Binary(op=op) if op in _CMP:
                c = self._sized(c)
                head = params_prefix(self.params) + "{ " + st.name + "[" + ", ".join(map(isl_name, st.vars)) + "] : "

                def where(text: str) -> isl.Set:
                    guard = isl.Set.read_from_str(self.ctx, head + text + " }").align_params(st.domain.get_space().params())
                    return self.domain(st, guard).align_params(domain.get_space().params()) & domain
                try:
                    guard = where(to_isl(c))
                    return guard, guard
                except (NotAffine, isl.Error):
                    pass
                try:  # quotients and remainders by a size, as variables bounded as they are (_abstracted)
                    facts: list[tuple[str, str]] = []
                    cond = to_isl(_abstracted(c, facts))
                    names, known = ", ".join(v for v, _ in facts), " and ".join(f for _, f in facts)
                    may = where(f"exists ({names} : {known} and {cond})")
                    return may, domain - where(f"exists ({names} : {known} and not {cond})")
                except (NotAffine, isl.Error):
                    pass
        return domain, None

    def _sized(self, e: n.Expr) -> n.Expr:
        """``e`` as the checks read it (overridden for concrete sizes)."""
        return e

    # ------------------------------------------------------- witnesses
    def _witness(self, bad: isl.Map, st: StmtInfo, tensor: str) -> str:
        """``for sizes N=1, M=2 at t=0, i=0: A(-1, 0)``, from a sample point."""
        p = bad.wrap().sample_point()
        space = bad.get_space()
        val = lambda kind, k: p.get_coordinate_val(kind, k).to_python()  # noqa: E731
        params = {space.get_dim_name(isl.dim_type.param, k): val(isl.dim_type.param, k)
                  for k in range(space.dim(isl.dim_type.param))}
        sizes = ", ".join(f"{s}={params[isl_name(s)]}" for s in self.r.checked.sizes if isl_name(s) in params)
        n_in = len(st.vars)
        loops = [f"{lp.var}={params[isl_name(lp.var)]}" for lp in st.loops if isl_name(lp.var) in params]
        where = loops + [f"{v}={val(isl.dim_type.set, k)}" for k, v in enumerate(st.vars)]
        index = ", ".join(str(val(isl.dim_type.set, n_in + k)) for k in range(space.dim(isl.dim_type.out)))
        shape = ", ".join(_expr_text(e) for e in self.r.extent_exprs(tensor))
        return (f"for sizes {sizes or '(none)'}" + (f" at {', '.join(where)}" if where else "")
                + f": {tensor}({index}), but '{tensor}' has size ({shape})")


def _abstracted(e: n.Expr, facts: list[tuple[str, str]]) -> n.Expr:
    """``e`` with each quotient ``a / S`` and remainder ``a % S`` by a
    non-constant ``S`` (``p % W > 0``, ``e % D < D / 2``: not affine) as a
    new variable, and in ``facts`` (its isl name, what is known of it):
    ``0 <= a % S < S`` and ``a % S = a`` where ``0 <= a < S``, ``0 <= a / S
    <= a`` for ``a >= 0``, ``a / S = 0`` exactly where ``a < S``; nothing
    where ``S <= 0``.  A condition on the variables holds where the original
    may hold, so ``p % W > 0 ? x(p - 1) : 0`` reads ``x`` at ``p >= 1``
    only."""
    if isinstance(e, n.Binary) and e.op in ("/", "%") and not (
            isinstance(e.rhs, n.Const) and isinstance(e.rhs.value, int) and e.rhs.value > 0):
        a, s = to_isl(_abstracted(e.lhs, facts)), to_isl(_abstracted(e.rhs, facts))
        v = f"_q{len(facts)}"
        if e.op == "%":
            known = (f"({s} >= 1 and 0 <= {v} < {s} and ({a} < 0 or {v} <= {a})"
                     f" and ({a} < 0 or {a} >= {s} or {v} = {a}))")
        else:
            known = (f"({s} >= 1 and (({a} >= 0 and 0 <= {v} <= {a} and ({v} <= 0 or {a} >= {s})"
                     f" and ({v} >= 1 or {a} < {s})) or ({a} < 0 and {a} <= {v} < 0)))")
        facts.append((v, f"({known} or {s} <= 0)"))
        return n.IndexVar(v)
    return n.map_children(e, lambda x: _abstracted(x, facts) if isinstance(x, n.Expr) else x)


def _expr_text(e: n.Expr) -> str:
    from ..syntax.printer import expr_to_tc

    return expr_to_tc(e)


class _CallChecker(_Checker):
    """The checks for concrete sizes: statement domains as the compiled code
    iterates them (gisted by sizes >= 1, then the sizes fixed), tensors as
    allocated (``shapes``)."""

    def __init__(self, ranges: RangeInfo, sizes: dict[str, int], shapes: dict[str, tuple[int, ...]]):
        super().__init__(ranges)
        self.sizes = sizes
        self.shapes = shapes

    def domain(self, st: StmtInfo, s: isl.Set) -> isl.Set:
        # the program's loops run with these sizes: their ranges hold, sizes >= 1 need not
        loops = isl.Set.read_from_str(self.ctx, params_prefix(self.params) + "{ : }")
        for lp in st.loops:
            cond = n.Binary("&&", n.Binary("<=", lp.lo, n.IndexVar(lp.var)), n.Binary("<", n.IndexVar(lp.var), lp.hi))
            loops = loops & isl.Set.read_from_str(self.ctx, params_prefix(self.params) + "{ : " + to_isl(cond) + " }")
        loops = loops.align_params(s.get_space().params())
        context = self.r.size_context.align_params(s.get_space().params()) & loops
        s = s.gist_params(context).intersect_params(loops)
        for k in range(s.dim(isl.dim_type.param)):
            name = s.get_dim_name(isl.dim_type.param, k)
            size = next((v for p, v in self.sizes.items() if isl_name(p) == name), None)
            if size is not None:
                s = s.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(self.ctx, size))
        return s

    def _sized(self, e: n.Expr) -> n.Expr:
        # with the sizes known, ``e % D`` is a remainder by a constant, which isl reads
        if isinstance(e, n.SizeVar) and e.name in self.sizes:
            return n.Const(int(self.sizes[e.name]))
        return n.map_children(e, lambda x: self._sized(x) if isinstance(x, n.Expr) else x)

    def _map(self, st: StmtInfo, domain: isl.Set, tensor: str, indices) -> isl.Map:
        return super()._map(st, domain, tensor, tuple(self._sized(e) for e in indices))

    def extent_set(self, tensor: str) -> isl.Set:
        shape = self.shapes[tensor]
        dims = [f"o{k}" for k in range(len(shape))]
        cond = " and ".join(f"0 <= {d} < {e}" for d, e in zip(dims, shape)) or "true"
        return isl.Set.read_from_str(self.ctx, params_prefix(self.params) + "{ " + isl_name(tensor)
                                     + "[" + ", ".join(dims) + "] : " + cond + " }")


def reads_as_before(old: RangeInfo, new: RangeInfo, model: Model) -> bool:
    """Whether the rewritten program (``new``, its ``model``) may read out of
    bounds only where the original (``old``) may: every read that
    :func:`check_bounds` cannot prove is one the original's size guards
    name (a rewrite that gives a read new ranges is kept only so)."""
    from ..errors import TcError

    guards = new.size_guards
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = check_bounds(model)
    except TcError:
        return False
    finally:
        new.size_guards = guards
    known = {g.access.span for g in old.size_guards or ()}
    return all(f.access.span in known for f in found)
