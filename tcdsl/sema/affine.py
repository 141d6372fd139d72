"""Between tcdsl expressions and isl: affine text out, piecewise affine back.

``to_isl(expr)`` prints an expression in isl's syntax, or raises
:class:`NotAffine`; isl itself rejects products of two variables, which we
turn into ``NotAffine`` too.  ``pwaff_to_expr`` turns an ``isl.PwAff`` (a
range bound, an extent) into a tcdsl expression built from ``SizeVar``,
``IndexVar``, ``Const``, ``+ - * / min max`` and ``Select``.
"""
from __future__ import annotations

from itertools import combinations

import islpy as isl

from ..syntax import nodes as n

# Words isl's parser reserves; a tcdsl name equal to one gets a suffix.
_ISL_WORDS = {"and", "or", "not", "mod", "min", "max", "floor", "ceil", "floord", "exists", "infty",
              "true", "false", "NaN", "rat", "implies", "cond", "ceild", "div"}


class NotAffine(Exception):
    """The expression is not affine in index variables, loop variables and sizes."""

    def __init__(self, expr: n.Expr):
        super().__init__("not affine")
        self.expr = expr


def isl_name(name: str) -> str:
    return name + "_" if name in _ISL_WORDS else name


def to_isl(e: n.Expr) -> str:
    """isl text for an integer-valued affine expression (or a condition)."""
    match e:
        case n.IndexVar(name=v) | n.SizeVar(name=v):
            return isl_name(v)
        case n.Const(value=v) if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        case n.Unary(op="-", operand=x):
            return f"(-{to_isl(x)})"
        case n.Unary(op="!", operand=x):
            return f"(not {to_isl(x)})"
        case n.Binary(op="/", lhs=a, rhs=n.Const(value=c)) if isinstance(c, int) and c > 0:
            return f"floor(({to_isl(a)})/{c})"
        case n.Binary(op="%", lhs=a, rhs=n.Const(value=c)) if isinstance(c, int) and c > 0:
            return f"(({to_isl(a)}) mod {c})"
        case n.Binary(op="*", lhs=a, rhs=b):
            if not (_is_int_const(a) or _is_int_const(b)):
                raise NotAffine(e)
            return f"({to_isl(a)} * {to_isl(b)})"
        case n.Binary(op=op, lhs=a, rhs=b) if op in ("min", "max"):
            return f"{op}({to_isl(a)}, {to_isl(b)})"
        case n.Binary(op=op, lhs=a, rhs=b) if op in _ISL_OPS:
            return f"({to_isl(a)} {_ISL_OPS[op]} {to_isl(b)})"
    raise NotAffine(e)


_ISL_OPS = {"+": "+", "-": "-", "==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
            "&&": "and", "||": "or"}


def _is_int_const(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and isinstance(e.value, int) or (
        isinstance(e, n.Unary) and e.op == "-" and _is_int_const(e.operand))


def linear_form(e: n.Expr) -> tuple[dict[str, int], int] | None:
    """``e`` as ``{size: coefficient}, constant`` when it is a linear
    expression of sizes with integer coefficients (``4 * H + 1``), else None.
    Declared shapes are such expressions: a call solves them for a size."""
    match e:
        case n.SizeVar(name=v):
            return {v: 1}, 0
        case n.Const(value=v) if isinstance(v, int) and not isinstance(v, bool):
            return {}, v
        case n.Unary(op="-", operand=x):
            f = linear_form(x)
            return None if f is None else ({k: -c for k, c in f[0].items()}, -f[1])
        case n.Binary(op="+" | "-" as op, lhs=a, rhs=b):
            fa, fb = linear_form(a), linear_form(b)
            if fa is None or fb is None:
                return None
            sign = 1 if op == "+" else -1
            coeffs = dict(fa[0])
            for k, c in fb[0].items():
                coeffs[k] = coeffs.get(k, 0) + sign * c
            return {k: c for k, c in coeffs.items() if c}, fa[1] + sign * fb[1]
        case n.Binary(op="*", lhs=a, rhs=b):
            fa, fb = linear_form(a), linear_form(b)
            if fa is None or fb is None or (fa[0] and fb[0]):
                return None
            (coeffs, k), c = (fa, fb[1]) if fa[0] else (fb, fa[1])
            return {v: x * c for v, x in coeffs.items() if x * c}, k * c
    return None


def params_prefix(params) -> str:
    return "[" + ", ".join(isl_name(p) for p in params) + "] -> "


def read_pwaff(ctx: isl.Context, params, dims, e: n.Expr) -> isl.PwAff:
    """``e`` as a PwAff on the set ``[dims]`` (raises NotAffine)."""
    text = to_isl(e)
    try:
        return isl.PwAff.read_from_str(ctx, params_prefix(params) + "{ [" + ", ".join(map(isl_name, dims))
                                       + "] -> [(" + text + ")] }")
    except isl.Error:
        raise NotAffine(e) from None


def read_param_set(ctx: isl.Context, params, cond: n.Expr) -> isl.Set:
    """A condition over parameters as an isl set (raises NotAffine)."""
    try:
        return isl.Set.read_from_str(ctx, params_prefix(params) + "{ : " + to_isl(cond) + " }")
    except isl.Error:
        raise NotAffine(cond) from None


def lift(pa: isl.PwAff, space: isl.Space) -> isl.PwAff:
    """A parameter-only PwAff as a function on the set space ``space``."""
    pa = pa.align_params(space.params())
    space = space.align_params(pa.get_space().params())
    ma = isl.MultiAff.zero(isl.Space.map_from_domain_and_range(space, pa.get_domain_space()))
    return pa.pullback_multi_aff(ma)


# ------------------------------------------------------------ isl -> tcdsl
def pwaff_to_expr(pa: isl.PwAff) -> n.Expr:
    pa = pa.coalesce()
    pieces = pa.get_pieces()
    if not pieces:
        return n.Const(0)
    if len(pieces) == 2:  # min(a, b) / max(a, b) read better than a select
        a, b = (isl.PwAff.from_aff(aff) for _, aff in pieces)
        for op, combined in (("min", a.min(b)), ("max", a.max(b))):
            if combined.is_equal(pa):
                return n.Binary(op, _aff_to_expr(pieces[0][1]), _aff_to_expr(pieces[1][1]))
    out = _aff_to_expr(pieces[-1][1])
    for s, aff in reversed(pieces[:-1]):
        out = n.Select(set_to_cond(s), _aff_to_expr(aff), out)
    return out


def set_to_cond(s: isl.Set | isl.BasicSet) -> n.Expr:
    disj = []
    # compute_divs: isl may keep a div unknown (existential), which get_aff cannot print
    for bs in (s if isinstance(s, isl.Set) else isl.Set.from_basic_set(s)).compute_divs().get_basic_sets():
        conj = []
        for c in bs.get_constraints():
            e = _aff_to_expr(c.get_aff())
            conj.append(n.Binary("==" if c.is_equality() else ">=", e, n.Const(0)))
        disj.append(_fold("&&", conj) if conj else n.Binary("==", n.Const(0), n.Const(0)))
    return _fold("||", disj)


def _fold(op: str, xs: list[n.Expr]) -> n.Expr:
    out = xs[0]
    for x in xs[1:]:
        out = n.Binary(op, out, x)
    return out


def _val(v: isl.Val) -> tuple[int, int]:
    return v.get_num_si(), v.get_den_val().get_num_si()


def _aff_to_expr(aff: isl.Aff) -> n.Expr:
    den = _val(aff.get_denominator_val())[0]
    terms: list[tuple[int, n.Expr]] = []
    for kind, mk in ((isl.dim_type.param, n.SizeVar), (isl.dim_type.in_, n.IndexVar)):
        for i in range(aff.dim(kind)):
            num, d = _val(aff.get_coefficient_val(kind, i))
            if num:
                terms.append((num * den // d, mk(_unisl(aff.get_dim_name(kind, i)))))
    for i in range(aff.dim(isl.dim_type.div)):
        num, d = _val(aff.get_coefficient_val(isl.dim_type.div, i))
        if num:
            terms.append((num * den // d, _aff_to_expr(aff.get_div(i))))
    num, d = _val(aff.get_constant_val())
    const = num * den // d
    expr = _linear(terms, const)
    return n.Binary("/", expr, n.Const(den)) if den != 1 else expr


def _unisl(name: str) -> str:
    return name[:-1] if name.endswith("_") and name[:-1] in _ISL_WORDS else name


def _linear(terms: list[tuple[int, n.Expr]], const: int) -> n.Expr:
    out: n.Expr | None = None
    for c, x in terms:
        mag = x if abs(c) == 1 else n.Binary("*", n.Const(abs(c)), x)
        if out is None:
            out = mag if c > 0 else n.Unary("-", mag)
        else:
            out = n.Binary("+" if c > 0 else "-", out, mag)
    if out is None:
        return n.Const(const)
    if const:
        out = n.Binary("+" if const > 0 else "-", out, n.Const(abs(const)))
    return out


def moves_by(e: n.Expr, var: str, coefficients: tuple[int, ...]) -> bool:
    """``e`` is ``c * var`` plus terms free of ``var`` for one of
    ``coefficients`` (``t + k - K + 1`` moves by 1 with ``t``; isl decides)."""
    e = _opaque(e, var)
    names = sorted({x.name for x in n.walk(e) if isinstance(x, (n.IndexVar, n.SizeVar)) and x.name != var})
    try:
        pa = read_pwaff(isl.DEFAULT_CONTEXT, names, [var], e)
    except NotAffine:
        return False
    v = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(pa.get_domain_space()), isl.dim_type.set, 0)
    return any(not pa.sub(v.scale_val(isl.Val.int_from_si(pa.get_ctx(), c))).involves_dims(isl.dim_type.in_, 0, 1)
               for c in coefficients)


def _opaque(e: n.Expr, var: str) -> n.Expr:
    """``e`` with each read or call free of ``var`` named as a value of its
    own (a dilation read from a table, ``t - dil(l)``, moves by 1 with ``t``)."""
    found: dict = {}

    def fn(x):
        if isinstance(x, (n.Access, n.BuiltinCall, n.Cast)) \
                and not any(isinstance(y, n.IndexVar) and y.name == var for y in n.walk(x)):
            return n.SizeVar(found.setdefault(id(x), f"_v{len(found)}"), dtype="int32")
        return n.map_children(x, fn)
    return fn(e)


def readable(pa: isl.PwAff, context: isl.Set) -> n.Expr:
    """``pa`` as an expression, for the sizes (and loop variables) in ``context``.

    isl splits a ``min``/``max`` of several bounds (several statements writing
    one tensor, two reads bounding one variable) into pieces, which would print
    as nested selects.  When a ``min``/``max`` of the pieces' formulas (and 0)
    equals ``pa`` on ``context``, that formula is returned instead; isl decides
    the equality.  Otherwise the pieces are printed as selects."""
    pa = pa.gist_params(context.align_params(pa.get_domain_space().params())).coalesce()
    pieces = pa.get_pieces()
    if len(pieces) < 2:
        return pwaff_to_expr(pa)
    ctx = context.align_params(pa.get_domain_space().params())
    want = pa.intersect_params(ctx)
    terms: list[tuple[isl.PwAff, n.Expr]] = []
    for _, aff in pieces + [(None, isl.Aff.zero_on_domain(isl.LocalSpace.from_space(pa.get_domain_space())))]:
        term = isl.PwAff.from_aff(aff)
        if not any(term.is_equal(t) for t, _ in terms):
            terms.append((term, pwaff_to_expr(term)))
    if len(terms) <= _MAX_TERMS:
        for cand, expr in _min_max_formulas(terms):
            if cand.intersect_params(ctx).is_equal(want):
                return expr
    return pwaff_to_expr(pa)


_MAX_TERMS = 5  # candidates grow quickly with the number of formulas; beyond this, print the pieces


def _min_max_formulas(terms):
    """``min``/``max`` combinations of the terms, simplest first: one term,
    then ``min``/``max`` of 2..all terms, then one level of nesting
    (``max(a, min(b, c))``, ``min(a, max(b, c))``)."""
    def fold(op, group):
        pa, e = group[0]
        for p2, e2 in group[1:]:
            pa, e = (pa.min(p2) if op == "min" else pa.max(p2)), n.Binary(op, e, e2)
        return pa, e

    yield from terms
    for k in range(2, len(terms) + 1):
        for group in combinations(terms, k):
            yield fold("min", group)
            yield fold("max", group)
    for outer, inner in (("max", "min"), ("min", "max")):
        for k in range(2, len(terms)):
            for group in combinations(terms, k):
                folded = fold(inner, group)
                for t in terms:
                    if t not in group:
                        yield fold(outer, (t, folded))


def underived(e: n.Expr, derived: dict | None, names: dict[str, str] | None = None) -> n.Expr:
    """The checked size expression ``e`` as the parser writes it: a derived
    size (``E_div_DH``, sema/sizes.py) as the expression it stands for (as a
    name it would be a size of its own in a rewritten program), the other
    sizes and index variables as names, renamed by ``names``; for rewrites'
    ``where`` clauses and extents."""
    derived, names = derived or {}, names or {}
    if isinstance(e, (n.SizeVar, n.IndexVar, n.Ident)) and e.name in derived:
        return derived[e.name]
    if isinstance(e, (n.SizeVar, n.IndexVar)):
        return n.Ident(names.get(e.name, e.name), span=e.span)
    return n.map_children(e, lambda x: underived(x, derived, names) if isinstance(x, n.Expr) else x)
