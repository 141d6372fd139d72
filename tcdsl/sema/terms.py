"""Sums whose terms do not use the same reduction variables (run by ``check``).

TC sums a reduction's whole right-hand side over every reduction variable, so
``a(b, j) +=! x(b, i) * W(i, j) + h(b, k) * U(k, j)`` adds each product once
per value of the other's variable: almost always an RNN cell's two sums
written as one.  tcdsl computes what TC does and warns.
"""
from __future__ import annotations

import warnings

from ..errors import TcWarning, caller_level
from ..syntax import nodes as n


def warn_partial_sums(body) -> None:
    """:func:`warn_partial_terms` for every sum of a checked ``def``'s body."""
    for c in n.comprehensions(body):
        if c.op in ("+=!", "+=") and c.reduction_vars:
            warn_partial_terms(c.tensor, c.rhs, set(c.reduction_vars))


def _terms(e: n.Expr) -> list[n.Expr]:
    """The terms of a sum (through ``+``, ``-`` and unary ``-``)."""
    if isinstance(e, n.Binary) and e.op in ("+", "-"):
        return _terms(e.lhs) + _terms(e.rhs)
    if isinstance(e, n.Unary) and e.op == "-":
        return _terms(e.operand)
    return [e]


def warn_partial_terms(tensor: str, rhs: n.Expr, reduction: set[str]) -> None:
    """Warn when a sum's right-hand side adds terms that do not use the same
    reduction variables: ``a(b, j) +=! x(b, i) * W(i, j) + h(b, k) * U(k, j)``
    sums the whole right-hand side over every pair ``(i, k)``, so each
    product is also summed over the other's variable (TC's semantics); the
    two sums of a cell are two statements.  ``where`` bindings are already
    substituted in ``rhs``."""
    terms = _terms(rhs)
    if len(terms) < 2 or any(isinstance(x, n.Ident) for t in terms for x in n.walk(t)):
        return
    used = [{x.name for x in n.walk(t) if isinstance(x, n.IndexVar)} & reduction for t in terms]
    every = set().union(*used)
    for t, u in zip(terms, used):
        missing = sorted(every - u)
        if missing:
            where = (f"{t.span.source.name}:{t.span.line}:{t.span.col}: " if t.span is not None else "")
            names = ", ".join(f"'{v}'" for v in missing)
            warnings.warn(TcWarning(
                f"{where}this term of the sum into '{tensor}' does not use the reduction variable{'s' if len(missing) > 1 else ''} "
                f"{names} that another term sums over, so it is also summed over {names} (a reduction sums its whole "
                f"right-hand side over every reduction variable); to add sums over different variables, write one "
                f"'+=!' statement per sum"), stacklevel=caller_level())
            return
