"""Sizes beyond TC's names and constants, and lhs indices beyond variables.

* Declared sizes (``TensorInfo.dims``) may be sums of sizes times integer
  constants (``float(4 * H, I) W``): :func:`dim_expr`, :func:`dim_isl`.
* Free sizes: names that only loop bounds, where-range bounds, ``if``
  conditions and output types use (``for t in S``): :func:`free_size_names`.
* An lhs index may be an index variable plus or minus sizes and loop
  variables (``y(i, H + j)``): :func:`lhs_index_var`, :func:`unit_coefficient`.
* ``idx(b) argmax=! e``: :func:`arg_reduction` writes it as an assignment of
  the new index (a statement that reads its own element).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import TcSemanticError
from ..syntax import nodes as n
from .affine import NotAffine, isl_name, to_isl


def dim_expr(d: str | int | n.Expr, span=None) -> n.Expr:
    """A declared size (``TensorInfo.dims``) as an expression over sizes."""
    if isinstance(d, str):
        return n.SizeVar(d, span=span)
    if isinstance(d, int):
        return n.Const(d, span=span)
    return d


def dim_isl(d: str | int | n.Expr) -> str:
    """A declared size in isl's syntax."""
    return to_isl(dim_expr(d))


def free_size_names(d: n.Def, known: set[str]) -> list[tuple[str, object]]:
    """The free sizes of ``d``, in order of appearance: names in the types of
    the outputs, loop bounds, ``if`` conditions and where-range bounds that
    are not sizes of the inputs, tensors, loop variables or index variables
    of their statement (``for s in S``, ``where k in 0:K``)."""
    tensors = {p.name for p in d.params} | {o.name for o in d.outputs}
    tensors |= {c.tensor for c in _statements(d.body) if isinstance(c, n.Comprehension)}
    loops = {s.var for s in _statements(d.body) if isinstance(s, n.For)}
    skip = known | tensors | loops
    found: dict[str, object] = {}

    def names(e, exclude=()):
        for x in n.walk(e):
            if isinstance(x, n.Ident) and x.name not in skip and x.name not in exclude:
                found.setdefault(x.name, x.span)
    for o in d.outputs:
        if o.type is not None:
            for dim in o.type.dims:
                if isinstance(dim, str) and dim not in skip:
                    found.setdefault(dim, o.type.span)
                elif isinstance(dim, n.Expr):
                    names(dim)
    for s in _statements(d.body):
        match s:
            case n.For():
                names(s.lo)
                names(s.hi)
            case n.If():
                names(s.cond)
            case n.Comprehension():
                # A where-range bound may use sizes and loop variables only, so a
                # name there is a size unless the statement binds it: an lhs index,
                # a ranged variable or a where-let.  An rhs use of it is then the
                # size's value (``x(i + w - W) where w in 0:2*W+1``).
                own = {x.name for e in s.indices for x in n.walk(e) if isinstance(x, n.Ident)}
                own |= {w.var if isinstance(w, n.RangeConstraint) else w.name for w in s.wheres
                        if not isinstance(w, n.Exists)}
                for w in s.wheres:
                    if isinstance(w, n.RangeConstraint):
                        names(w.lo, own)
                        names(w.hi, own)
    return list(found.items())


def arg_reduction(s: n.Comprehension, lhs: tuple[n.Expr, ...], rhs: n.Expr,
                   reduction_vars: tuple[str, ...]) -> n.Expr:
    """``idx(b) argmax=! e`` over the one reduction variable ``j``: ``idx(b)``
    starts at -1 (the ``!``), then, for ``j`` in increasing order, becomes
    ``j`` where ``e`` is larger than ``e`` at the index held so far (strictly:
    the first maximum wins; a NaN is never larger).  One pass; the value at the
    index held is read again (``e`` with ``j := idx(b)``), not kept."""
    if len(reduction_vars) != 1:
        what = ", ".join(f"'{v}'" for v in reduction_vars) or "none"
        raise TcSemanticError(f"'{s.op}' needs exactly one reduction variable (the index it finds), "
                              f"but this statement has {what}", s.span)
    (j,) = reduction_vars
    held = n.Access(s.tensor, lhs, span=s.span)

    def at_held(x):
        if isinstance(x, n.IndexVar) and x.name == j:
            return held
        return n.map_children(x, at_held)
    index = n.IndexVar(j, span=s.span)
    better = n.Binary(">" if s.op == "argmax=!" else "<", rhs, at_held(rhs), span=rhs.span)
    first = n.Binary("<", held, n.Const(0, span=s.span), span=s.span)
    return n.Select(first, index, n.Select(better, index, held, span=rhs.span), span=rhs.span)


def unit_coefficient(e: n.Expr, var: str) -> bool:
    """``e`` is ``var`` or ``-var`` plus terms free of ``var`` (isl decides)."""
    from .affine import moves_by

    return moves_by(e, var, (1, -1))


def lhs_index_var(e: n.Expr, loops) -> str | None:
    """The statement's own index variable in a checked lhs index (``j`` in
    ``H + j``), or None when the index uses loop variables and sizes only."""
    for x in n.walk(e):
        if isinstance(x, n.IndexVar) and x.name not in loops:
            return x.name
    return None




def check_constant_dims(t: n.TensorType) -> None:
    elements = 1
    for d in t.dims:
        if isinstance(d, int) and not d < 2**31:
            raise TcSemanticError(f"size {d} does not fit in an index (int32)", t.span)
        elements *= d if isinstance(d, int) else 1
    if elements >= 2**31:  # its strides would leave int32 index arithmetic
        raise TcSemanticError(f"the constant sizes give {elements} elements, more than an int32 index "
                              f"can address", t.span)


def is_affine_index(e: n.Expr) -> bool:
    """An integer affine expression (isl must be able to read it as a subscript)."""
    if any(isinstance(x, (n.Cast, n.Select)) or (isinstance(x, n.Unary) and x.op == "!")
           or (isinstance(x, n.Binary) and x.op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||"))
           for x in n.walk(e)):
        return False
    try:
        to_isl(e)
    except NotAffine:
        return False
    return True


def _statements(stmts):
    for s in stmts:
        yield s
        match s:
            case n.For():
                yield from _statements(s.body)
            case n.If():
                yield from _statements(s.then + s.orelse)


# --------------------------------------------------------------- derived sizes
# A range bound over a product or a quotient of sizes (``where c in 0:G * G``,
# ``for t in 0:K * V``, an output of type ``float(N, K * V)``) is not affine in
# the sizes, so isl cannot take it; such a subterm becomes a size of its own,
# *derived*: a parameter of the polyhedral model like any size, which a call
# computes from the others (``runtime/args.bind_sizes``).  Its name spells the
# subterm (``G_x_G``); ``nodes.DERIVED_TEXT`` maps it back to the TC text, which
# the printer writes (a gradient's adjoint program derives it again).
_SPELL = {"*": "_x_", "/": "_div_", "%": "_mod_", "+": "_p_", "-": "_m_"}


def _sized(e: n.Expr, bound: set[str]) -> bool:
    """``e`` uses sizes only (names not in ``bound``, no loop or index variable), at least one."""
    names = [x for x in n.walk(e) if isinstance(x, (n.Ident, n.IndexVar, n.DimSize))]
    return bool(names) and all(isinstance(x, n.Ident) and x.name not in bound for x in names) and \
        all(isinstance(x, (n.Ident, n.Const, n.Binary, n.Unary)) for x in n.walk(e)) and \
        all(not isinstance(x, n.Const) or isinstance(x.value, int) for x in n.walk(e)) and \
        all(not isinstance(x, n.Binary) or x.op in ("+", "-", "*", "/", "%", "min", "max") for x in n.walk(e)) and \
        all(not isinstance(x, n.Unary) or x.op == "-" for x in n.walk(e))


def _nonaffine(e: n.Expr, bound: set[str]) -> bool:
    return isinstance(e, n.Binary) and (e.op == "*" and _sized(e.lhs, bound) and _sized(e.rhs, bound)
                                        or e.op in ("/", "%") and _sized(e.rhs, bound))


def _spelling(e: n.Expr) -> str:
    match e:
        case n.Ident(name=v):
            return v
        case n.Const(value=v):
            return str(v) if v >= 0 else f"neg{-v}"
        case n.Unary(operand=x):
            return "neg_" + _spelling(x)
        case n.Binary(op=op, lhs=a, rhs=b) if op in ("min", "max"):
            return f"{op}_{_spelling(a)}_{_spelling(b)}"
        case n.Binary(op=op, lhs=a, rhs=b):
            return _spelling(a) + _SPELL[op] + _spelling(b)
    raise TcSemanticError("not a size expression", e.span)


def derive_sizes(d: n.Def) -> tuple[n.Def, dict[str, n.Expr]]:
    """``d`` with every product or quotient of sizes in a where-range bound, a
    loop bound, an ``if`` condition or an output's declared type replaced by a
    derived size (see above), and the derived sizes: name -> the size
    expression it stands for."""
    from ..syntax.printer import expr_to_tc

    taken = {x.name for x in n.walk(d) if isinstance(x, (n.Ident, n.IndexVar, n.SizeVar))}
    taken |= {p.name for p in d.params} | {o.name for o in d.outputs}
    taken |= {x for t in [p.type for p in d.params] + [o.type for o in d.outputs if o.type is not None]
              for x in t.dims if isinstance(x, str)}
    derived: dict[str, n.Expr] = {}
    names: dict[str, str] = {}  # TC text -> name
    dims = {p.name: p.type.dims for p in d.params if p.type is not None and p.type.dims is not None}

    def plain(e: n.Expr) -> n.Expr:  # ``X.k`` of a dimension declared by a size's name: that name
        if isinstance(e, n.DimSize) and 0 <= e.dim < len(dims.get(e.tensor, ())) and isinstance(dims[e.tensor][e.dim], str):
            return n.Ident(dims[e.tensor][e.dim], span=e.span)
        return n.map_children(e, lambda x: plain(x) if isinstance(x, n.Expr) else x)

    def replace_in(e: n.Expr, bound: set[str]) -> n.Expr:
        if _nonaffine(plain(e), bound):
            e = plain(e)
            text = expr_to_tc(e)
            if text not in names:
                name = base = ("s" if _spelling(e)[0].isdigit() else "") + _spelling(e)
                k = 2
                while name in taken:
                    name, k = f"{base}_{k}", k + 1
                taken.add(name)
                names[text] = name
                derived[name] = e
                n.DERIVED_TEXT[name] = text
            return n.Ident(names[text], span=e.span)
        return n.map_children(e, lambda x: replace_in(x, bound) if isinstance(x, n.Expr) else x)

    def stmts(body, loops: set[str]):
        out = []
        for s in body:
            match s:
                case n.For():
                    s = replace(s, lo=replace_in(s.lo, loops),
                                hi=replace_in(s.hi, loops), body=stmts(s.body, loops | {s.var}))
                case n.If():
                    s = replace(s, cond=replace_in(s.cond, loops), then=stmts(s.then, loops),
                                orelse=stmts(s.orelse, loops))
                case n.Comprehension():
                    own = {x.name for e in s.indices for x in n.walk(e) if isinstance(x, n.Ident)}
                    own |= {w.var if isinstance(w, n.RangeConstraint) else w.name for w in s.wheres
                            if not isinstance(w, n.Exists)}
                    own |= loops
                    s = replace(s, wheres=tuple(replace(w, lo=replace_in(w.lo, own), hi=replace_in(w.hi, own))
                                                if isinstance(w, n.RangeConstraint) else w for w in s.wheres))
            out.append(s)
        return tuple(out) if isinstance(body, tuple) else out

    outputs = []
    for o in d.outputs:
        if o.type is not None:
            o = replace(o, type=replace(o.type, dims=tuple(replace_in(x, set()) if isinstance(x, n.Expr) else x
                                                           for x in o.type.dims)))
        outputs.append(o)
    new = replace(d, body=stmts(d.body, set()), outputs=tuple(outputs))
    return (new, derived) if derived else (d, {})


def derived_facts(derived: dict[str, n.Expr]) -> list[str]:
    """isl constraints that hold between the derived sizes and the others at
    every call (the sizes are at least 1): ``E_div_NH_2`` is ``floor(E_div_NH
    / 2)`` where ``E_div_NH`` stands for ``E / NH``; a quotient ``X / Y`` of
    sizes is at most ``X``; a product ``X * Y`` at least each factor.  Without
    them isl takes the derived sizes to be unrelated (``E_div_NH = 1``,
    ``E_div_NH_2 = 2``), and a read that holds for every call looks unproved."""
    from ..syntax.printer import expr_to_tc

    names = {expr_to_tc(e): name for name, e in derived.items()}

    def own(e: n.Expr, top: bool = True) -> n.Expr:
        """``e`` with each subterm that another derived size stands for as that
        size, and the names as sizes."""
        if not top and isinstance(e, n.Binary) and expr_to_tc(e) in names:
            return n.SizeVar(names[expr_to_tc(e)])
        if isinstance(e, n.Ident):
            return n.SizeVar(e.name)
        return n.map_children(e, lambda c: own(c, False) if isinstance(c, n.Expr) else c)

    facts: list[str] = []
    for name, e in derived.items():
        d, f = isl_name(name), own(e)
        try:
            facts.append(f"{d} = {to_isl(f)}")
            continue
        except NotAffine:
            pass
        if isinstance(f, n.Binary) and f.op in ("/", "*", "%"):
            try:
                a, b = to_isl(f.lhs), to_isl(f.rhs)
            except NotAffine:
                continue
            facts += {"/": [f"0 <= {d} <= {a}"], "*": [f"{d} >= {a}", f"{d} >= {b}"] if all(
                isinstance(x, n.SizeVar) and x.name not in derived for x in (f.lhs, f.rhs)) else [f"{d} >= 0"],
                      "%": [f"0 <= {d} < {b}"]}[f.op]
    return facts
