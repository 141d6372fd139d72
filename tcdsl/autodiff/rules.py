"""Reverse mode through one right-hand side.

``backprop(rhs, seed, active, where)`` walks the expression from the root
with the adjoint ``seed`` and returns, for every read of an active tensor in
a value position, the adjoint that reaches it (``[(Access, adjoint)]``).
The derivative of each node is written with the node itself where that is
shorter (``tanh'(x) = 1 - tanh(x)^2`` uses the ``tanh(x)`` node), so that a
derivative that mentions the whole right-hand side can later read the value
the statement stored instead of recomputing it.

Ties follow PyTorch: ``min``/``max`` (``torch.minimum``/``maximum``) give
each side half of the adjoint; ``fmax``/``fmin`` give it to the first
argument (and to the other one when the first is NaN); ``fabs`` has
derivative 0 at 0.  Functions whose derivative is zero almost everywhere or
not available as a builtin (``floor ceil round trunc logb nextafter lgamma
tgamma``), casts of a differentiable value to an integer type, and indices
computed from a differentiable value are errors.
"""
from __future__ import annotations

import math
from typing import Callable

from ..errors import TcSemanticError
from ..sema import types as ty
from ..syntax import nodes as n
from .exprs import ONE, ZERO, add, call, cmp, const, div, is_const, mul, neg, select, square, sub

NOT_DIFFERENTIABLE = frozenset({"floor", "ceil", "round", "trunc", "logb", "nextafter", "lgamma", "tgamma"})

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)


def _sel(cond: n.Expr) -> n.Expr:
    return select(cond, ONE, ZERO)


def _fsel(a: n.Expr, b: n.Expr, op: str) -> list[n.Expr]:
    """fmax/fmin: the first argument is selected when it wins or ties, or when the second is NaN."""
    first = n.Binary("||", cmp(op, a, b), cmp("!=", b, b))
    return [_sel(first), select(first, ZERO, ONE)]


def _norm(args, r):
    return [div(a, r) for a in args]


def _rnorm(args, r):
    r3 = mul(r, square(r))
    return [neg(mul(a, r3)) for a in args]


# name -> partials(args, result) -> one expression per argument
PARTIALS: dict[str, Callable[[tuple[n.Expr, ...], n.Expr], list[n.Expr]]] = {
    "exp": lambda a, r: [r],
    "exp2": lambda a, r: [mul(r, const(math.log(2)))],
    "exp10": lambda a, r: [mul(r, const(math.log(10)))],
    "expm1": lambda a, r: [add(r, ONE)],
    "log": lambda a, r: [div(ONE, a[0])],
    "log2": lambda a, r: [div(ONE, mul(a[0], const(math.log(2))))],
    "log10": lambda a, r: [div(ONE, mul(a[0], const(math.log(10))))],
    "log1p": lambda a, r: [div(ONE, add(ONE, a[0]))],
    "sqrt": lambda a, r: [div(const(0.5), r)],
    "rsqrt": lambda a, r: [mul(const(-0.5), div(r, a[0]))],
    "cbrt": lambda a, r: [div(ONE, mul(const(3.0), square(r)))],
    "rcbrt": lambda a, r: [mul(const(-1.0 / 3.0), div(r, a[0]))],
    "tanh": lambda a, r: [sub(ONE, square(r))],
    "sigmoid": lambda a, r: [mul(r, sub(ONE, r))],
    "sin": lambda a, r: [call("cos", a[0])],
    "cos": lambda a, r: [neg(call("sin", a[0]))],
    "tan": lambda a, r: [add(ONE, square(r))],
    "asin": lambda a, r: [div(ONE, call("sqrt", sub(ONE, square(a[0]))))],
    "acos": lambda a, r: [neg(div(ONE, call("sqrt", sub(ONE, square(a[0])))))],
    "atan": lambda a, r: [div(ONE, add(ONE, square(a[0])))],
    "sinh": lambda a, r: [call("cosh", a[0])],
    "cosh": lambda a, r: [call("sinh", a[0])],
    "asinh": lambda a, r: [div(ONE, call("sqrt", add(square(a[0]), ONE)))],
    "acosh": lambda a, r: [div(ONE, call("sqrt", sub(square(a[0]), ONE)))],
    "atanh": lambda a, r: [div(ONE, sub(ONE, square(a[0])))],
    "erf": lambda a, r: [mul(const(2 / _SQRT_PI), call("exp", neg(square(a[0]))))],
    "erfc": lambda a, r: [mul(const(-2 / _SQRT_PI), call("exp", neg(square(a[0]))))],
    "erfcx": lambda a, r: [sub(mul(mul(const(2.0), a[0]), r), const(2 / _SQRT_PI))],
    "erfinv": lambda a, r: [mul(const(_SQRT_PI / 2), call("exp", square(r)))],
    "erfcinv": lambda a, r: [mul(const(-_SQRT_PI / 2), call("exp", square(r)))],
    "normcdf": lambda a, r: [mul(const(1 / _SQRT_2PI), call("exp", mul(const(-0.5), square(a[0]))))],
    "normcdfinv": lambda a, r: [mul(const(_SQRT_2PI), call("exp", mul(const(0.5), square(r))))],
    "fabs": lambda a, r: [select(cmp(">", a[0], ZERO), ONE, select(cmp("<", a[0], ZERO), const(-1.0), ZERO))],
    "pow": lambda a, r: [
        select(cmp("==", a[1], ZERO), ZERO, mul(a[1], call("pow", a[0], sub(a[1], ONE)))),
        select(n.Binary("&&", cmp("==", a[0], ZERO), cmp(">=", a[1], ZERO)), ZERO, mul(r, call("log", a[0]))),
    ],
    "fmax": lambda a, r: _fsel(a[0], a[1], ">="),
    "fmin": lambda a, r: _fsel(a[0], a[1], "<="),
    "hypot": lambda a, r: _norm(a, r),
    "norm3d": lambda a, r: _norm(a, r),
    "norm4d": lambda a, r: _norm(a, r),
    "rhypot": lambda a, r: _rnorm(a, r),
    "rnorm3d": lambda a, r: _rnorm(a, r),
    "rnorm4d": lambda a, r: _rnorm(a, r),
    "atan2": lambda a, r: [div(a[1], add(square(a[0]), square(a[1]))),
                           neg(div(a[0], add(square(a[0]), square(a[1]))))],
    "copysign": lambda a, r: [select(cmp("==", a[0], ZERO), ZERO, div(r, a[0])), ZERO],
    "fdim": lambda a, r: [_sel(cmp(">", a[0], a[1])), select(cmp(">", a[0], a[1]), const(-1.0), ZERO)],
    "fmod": lambda a, r: [ONE, neg(call("trunc", div(a[0], a[1])))],
    "remainder": lambda a, r: [ONE, neg(div(sub(a[0], r), a[1]))],
    "fma": lambda a, r: [a[1], a[0], ONE],
    "fdivide": lambda a, r: [div(ONE, a[1]), neg(div(r, a[1]))],
    "sinpi": lambda a, r: [mul(const(math.pi), call("cospi", a[0]))],
    "cospi": lambda a, r: [mul(const(-math.pi), call("sinpi", a[0]))],
    "j0": lambda a, r: [neg(call("j1", a[0]))],
    "j1": lambda a, r: [select(cmp("==", a[0], ZERO), const(0.5), sub(call("j0", a[0]), div(r, a[0])))],
    "y0": lambda a, r: [neg(call("y1", a[0]))],
    "y1": lambda a, r: [sub(call("y0", a[0]), div(r, a[0]))],
    "cyl_bessel_i0": lambda a, r: [call("cyl_bessel_i1", a[0])],
    "cyl_bessel_i1": lambda a, r: [select(cmp("==", a[0], ZERO), const(0.5),
                                          sub(call("cyl_bessel_i0", a[0]), div(r, a[0])))],
}


class Backprop:
    """Reverse mode through the right-hand side of one statement."""

    def __init__(self, active: set[str], stmt: n.Comprehension):
        self.active_tensors = active
        self.stmt = stmt
        self.out: list[tuple[n.Access, n.Expr]] = []
        self.guards: list[tuple[n.Expr, bool]] = []  # the selects around the node being visited

    def error(self, what: str, node: n.Node) -> TcSemanticError:
        return TcSemanticError(f"cannot differentiate the statement writing '{self.stmt.tensor}': {what}",
                               node.span or self.stmt.span)

    def active(self, e: n.Expr) -> bool:
        """``e`` depends on a differentiable tensor through values (not through indices)."""
        match e:
            case n.Access(tensor=t):
                return t in self.active_tensors
            case n.Binary(op=op) if op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||"):
                return False
            case n.Unary(op="!"):
                return False
            case n.Select(then=a, other=b):
                return self.active(a) or self.active(b)
        return any(self.active(c) for c in n.children(e) if isinstance(c, n.Expr))

    def run(self, e: n.Expr, adj: n.Expr) -> list[tuple[n.Access, n.Expr]]:
        self.visit(e, adj)
        return self.out

    def visit(self, e: n.Expr, adj: n.Expr) -> None:
        if is_const(adj, 0):
            return
        for idx in (e.indices if isinstance(e, n.Access) else ()):
            self._check_index(idx)
        if not self.active(e):
            return
        match e:
            case n.Access():
                if e.dtype is not None and not ty.is_float(e.dtype):
                    raise self.error(f"'{e.tensor}' holds integers computed from a differentiable value; "
                                     f"rounding has no derivative", e)
                for cond, taken in reversed(self.guards):  # reads stay in the branch that is taken
                    adj = select(cond, adj, ZERO) if taken else select(cond, ZERO, adj)
                self.out.append((e, adj))
            case n.Unary(op="-", operand=x):
                self.visit(x, neg(adj))
            case n.Binary(op="+", lhs=a, rhs=b):
                self.visit(a, adj)
                self.visit(b, adj)
            case n.Binary(op="-", lhs=a, rhs=b):
                self.visit(a, adj)
                self.visit(b, neg(adj))
            case n.Binary(op="*", lhs=a, rhs=b):
                self.visit(a, mul(adj, b))
                self.visit(b, mul(adj, a))
            case n.Binary(op="/", lhs=a, rhs=b):
                self.visit(a, div(adj, b))
                self.visit(b, neg(div(mul(adj, e), b)))
            case n.Binary(op="%", lhs=a, rhs=b):
                self.visit(a, adj)
                self.visit(b, neg(mul(adj, div(sub(a, e), b))))
            case n.Binary(op="max" | "min", lhs=a, rhs=b):
                wins = ">" if e.op == "max" else "<"
                tie = cmp("==", a, b)
                half = mul(const(0.5), adj)
                self.visit(a, select(tie, half, select(cmp(wins, a, b), adj, ZERO)))
                self.visit(b, select(tie, half, select(cmp(wins, a, b), ZERO, adj)))
            case n.Select(cond=c, then=a, other=b):
                for branch, taken in ((a, True), (b, False)):
                    self.guards.append((c, taken))
                    self.visit(branch, adj)
                    self.guards.pop()
            case n.Cast(to=to, operand=x):
                if not ty.is_float(to):
                    raise self.error(f"the cast to {to} rounds a differentiable value; it has no derivative", e)
                if x.dtype is not None and not ty.is_float(x.dtype):
                    raise self.error(f"'{_text(x)}' is an integer computed from a differentiable value; "
                                     f"rounding has no derivative", x)
                self.visit(x, adj)
            case n.BuiltinCall(name=name, args=args):
                self._builtin(e, name, args, adj)
            case _:
                raise self.error(f"{type(e).__name__} is not differentiable", e)

    def _builtin(self, e: n.BuiltinCall, name: str, args, adj) -> None:
        if name in NOT_DIFFERENTIABLE or name not in PARTIALS:
            raise self.error(f"'{name}' is not differentiable", e)
        partials = PARTIALS[name](args, e)
        for a, d in zip(args, partials):
            if self.active(a):
                self.visit(a, mul(adj, d))

    def _check_index(self, idx: n.Expr) -> None:
        for x in n.walk(idx):
            if isinstance(x, n.Access) and x.tensor in self.active_tensors:
                raise self.error(f"the index '{_text(idx)}' reads '{x.tensor}', which depends on a "
                                 f"differentiable input; an index has no derivative", idx)


def _text(e: n.Expr) -> str:
    from ..syntax.printer import expr_to_tc

    return expr_to_tc(e)
