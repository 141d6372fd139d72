"""Factors of a sum that do not depend on its reduction variables, applied once after it.

Users scale a sum inside it, as the formula reads::

    o(b, n, i, d) +=! e(b, n, i, j) * v(b, n, j, d) / z(b, n, i)
    s(b, n, i, j) +=! q(b, n, i, d) * k(b, n, j, d) * rsqrt(float(D))
    mean(n) +=! x(n, c) / C

Each term then pays a division or a multiplication that is the same for
every step of the reduction (``z(b, n, i)`` does not depend on ``j``), and
the sum is no longer a plain product of two reads, so it gets no register
tiles (the attention's weighted sum ran a vector division per multiply-add).
``plan(checked, ranges)`` finds each ``+=!`` statement (at the top of the
``def``, in a loop or a branch) whose right side is a product (``*``, ``/`` of float values: an integer
quotient ``k / 3`` is floor division, no factor) with factors that do not
depend on its reduction variables; ``rewrite(def, plan)`` sums the other factors
and applies those once per element in a statement right after it::

    o(b, n, i, d) +=! e(b, n, i, j) * v(b, n, j, d)
    o(b, n, i, d) = o(b, n, i, d) / z(b, n, i)

A ``+=`` statement adds its sum to what the tensor holds, so its sum goes
to a temporary first (``y_f``, its variables keeping the ranges inferred
for the statement: a state ``h(t - 1, b, k)`` written later in a loop does
not tell them), and the tensor gets the temporary times the factors::

    a(b, j) += exp(-fmax(wd(j) * dt(t, b), 0)) * h(t - 1, b, k) * U(k, j)

is (a state decayed by the time since the last step, GRU-D)::

    a_f(b, j) +=! h(t - 1, b, k) * U(k, j)
    a(b, j) += a_f(b, j) * exp(-fmax(wd(j) * dt(t, b), 0))

This is the sum's distributive law (the sum of ``a * c`` is ``c`` times the
sum of ``a``): the results differ from the program as written by rounding
only.  It applies where the new statement covers exactly the elements the
sum wrote (``same_cover``; the new statement comes right after the sum, so
other statements may write the tensor too: ``z(b, o) = z(b, o) + bias(o)``
after the sum, as polyhedral/inplace.py makes it): the written tensor is a
float tensor, its indices are distinct index variables, and no ``where`` clause
mentions them but ranges of sizes for them, which the new statement takes
too (``y(b, t, d) +=! (s <= t ? x(b, s, d) : 0) / (t + 1) where s in 0:T,
t in 0:T``, a running mean: ``/ (t + 1)`` once per element).  The rewritten ``def`` is checked and inferred again
(driver.py); ``options={"factor": False}`` leaves programs as written.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..sema.check import CheckedDef
from ..syntax import nodes as n
from .layout import _fresh


@dataclass(frozen=True)
class Sum:
    """A ``+=!`` statement to rewrite: its reduction variables and the names
    (``where`` lets) whose value may depend on them."""

    reduction: frozenset[str]
    # the spans of the quotients of float values (``e / z(b, n, i)``): an
    # integer quotient (``x(k) * (k / 3)``, floor division) is no factor
    divisions: frozenset = frozenset()
    # the span of the statement after it (its first factor's)
    after: frozenset = frozenset()
    # for a ``+=`` statement, the temporary that sums the other factors (the
    # statement after it adds the temporary times the factors to the tensor),
    # and the ranges of the written indices, as inferred for the statement
    temp: str | None = None
    bounds: tuple = ()


def plan(checked: CheckedDef, ranges=None) -> dict[object, Sum]:
    """Statement span -> :class:`Sum`, for the sums with invariant factors."""
    body = checked.node.body
    taken = _names(checked.node) | set(checked.tensors) | set(checked.sizes)
    infos = {(st.comp.span, st.comp.tensor): st for st in ranges.stmts} if ranges is not None else {}
    out: dict[object, Sum] = {}
    for s, loops in n.comprehensions_in_loops(body):
        if not isinstance(s, n.Comprehension) or s.op not in ("+=!", "+=") or s.equivalent is not None:
            continue
        if not s.reduction_vars or s.span is None:
            continue
        if not checked.tensors[s.tensor].dtype.startswith("float"):
            continue
        lhs = [_name(x) for x in s.indices]
        if None in lhs or len(set(lhs)) != len(lhs):
            continue
        if any(_where_names(w) & set(lhs) and not _lhs_range(w, lhs) for w in s.wheres):
            continue
        if any(isinstance(a, n.Access) and a.tensor == s.tensor and not _earlier_step(s, a, loops)
               for a in n.walk(s.rhs)):
            continue
        dependent = frozenset(s.reduction_vars) | {w.name for w in s.wheres if isinstance(w, n.Let)}
        divisions = frozenset(x.span for x in n.walk(s.rhs) if isinstance(x, n.Binary) and x.op == "/"
                              and x.span is not None and x.dtype is not None and x.dtype.startswith("float"))
        inv, dep = split(s.rhs, dependent, divisions)
        if inv and dep:
            temp, bounds = None, ()
            st = infos.get((s.span, s.tensor))
            if st is None and (s.op == "+=" or ranges is not None):
                continue
            if st is not None:
                # The sum keeps its ranges: the factors moved out of it may be
                # the only reads that bound a variable (``m(t, b)`` in ``hn(b,
                # j) +=! m(t, b) * h(t - 1, b, k) * U(j, k)``, where the state
                # ``h`` written later in the loop does not tell b's range).
                given = {w.var for w in s.wheres if isinstance(w, n.RangeConstraint)}
                bounds = st.where_ranges(lhs + sorted(s.reduction_vars), given)
            if s.op == "+=":
                temp = _fresh(f"{s.tensor}_f", taken)
                taken.add(temp)
            out[s.span] = Sum(dependent, divisions, frozenset({inv[0][1].span or s.span}), temp, bounds)
    return out


def _earlier_step(s: n.Comprehension, a: n.Access, loops: tuple[str, ...]) -> bool:
    """The read ``a`` of the tensor ``s`` writes is of an earlier step of a
    loop: ``P(t - 1, b, i, k)`` where ``s`` writes ``P(t, b, i, j)``."""
    for x, y in zip(s.indices, a.indices):
        if isinstance(x, (n.IndexVar, n.Ident)) and x.name in loops and isinstance(y, n.Binary) and y.op == "-" \
                and isinstance(y.lhs, (n.IndexVar, n.Ident)) and y.lhs.name == x.name \
                and isinstance(y.rhs, n.Const) and isinstance(y.rhs.value, int) and y.rhs.value > 0:
            return True
    return False


def same_cover(new_model, p: dict[object, Sum]) -> bool:
    """In the rewritten program's model, the statement after each sum of
    ``p`` runs exactly the points the sum initialises (inside loops, where
    other statements write the tensor, ranges inference could give it
    more): else the rewrite is dropped (driver.py)."""
    inits, after = {}, {}
    for k in new_model.kernels():
        for st in k.stmts:
            c = st.info.comp
            if st.is_init and c.span in p:
                inits[c.span] = (c.tensor, st.domain.reset_tuple_id())
            elif not st.is_init and c.op in ("=", "+="):
                after.setdefault((c.tensor, c.span), []).append(st.domain.reset_tuple_id())
    for span in p:
        if span not in inits:
            return False
        tensor, dom = inits[span]
        if p[span].temp is not None and tensor != p[span].temp:
            return False
        # (a ``+=`` statement's temporary is initialised, the tensor added to after it)
        mine = [d for (t, sp), ds in after.items() if (t == tensor or p[span].temp is not None)
                and sp in p[span].after for d in ds]
        if len(mine) != 1:
            return False
        other = mine[0].align_params(dom.get_space())
        if not dom.align_params(other.get_space()).is_equal(other):
            return False
    return True


def split(e: n.Expr, dependent: frozenset[str],
          divisions: frozenset = frozenset()) -> tuple[list[tuple[str, n.Expr]], list[tuple[str, n.Expr]]]:
    """The factors of the product ``e`` as ``("*" or "/", factor)`` pairs:
    those without a name of ``dependent``, and the others.  A quotient whose
    divisor depends on them, or that is not one of the float ``divisions``
    (spans), stays one factor."""
    inv: list[tuple[str, n.Expr]] = []
    dep: list[tuple[str, n.Expr]] = []

    def visit(x: n.Expr, op: str) -> None:
        if isinstance(x, n.Binary) and x.op == "*" and op == "*":
            visit(x.lhs, "*")
            visit(x.rhs, "*")
        elif (isinstance(x, n.Binary) and x.op == "/" and op == "*" and x.span in divisions
              and not (_names(x.rhs) & dependent)):
            visit(x.lhs, "*")
            inv.append(("/", x.rhs))
        else:
            (dep if _names(x) & dependent else inv).append((op, x))

    visit(e, "*")
    return inv, dep


def rewrite(d: n.Def, p: dict[object, Sum]) -> n.Def:
    """``d`` (as parsed) with each sum of ``p`` followed by its invariant factors."""
    return replace(d, body=_block(d.body, p))


def _block(stmts, p: dict[object, Sum]) -> tuple:
    body: list[n.Stmt] = []
    for s in stmts:
        if isinstance(s, n.For):
            body.append(replace(s, body=_block(s.body, p)))
            continue
        if isinstance(s, n.If):
            body.append(replace(s, then=_block(s.then, p), orelse=_block(s.orelse, p)))
            continue
        if not isinstance(s, n.Comprehension) or s.span not in p:
            body.append(s)
            continue
        inv, dep = split(s.rhs, p[s.span].reduction, p[s.span].divisions)
        if not inv or not dep:
            # the parsed statement's names are not the checked ones (a reduction
            # variable renamed because a loop has its name, sema/rename.py:
            # ``avg(b, j) +=! h(t, b, j) / T`` after ``for t``): left as written
            # (same_cover then drops the rewrite)
            body.append(s)
            continue
        temp = p[s.span].temp
        body.append(replace(s, rhs=_product(dep, s.rhs.span), wheres=s.wheres + p[s.span].bounds,
                            **({"tensor": temp, "op": "+=!"} if temp else {})))
        here = inv[0][1].span or s.span
        value: n.Expr = n.Call(temp or s.tensor, s.indices, span=here)
        for op, f in inv:
            value = n.Binary(op, value, f, span=f.span or here)
        lhs = [_name(x) for x in s.indices]  # (plan let only ranges of sizes name them)
        wheres = tuple(w for w in s.wheres + p[s.span].bounds if isinstance(w, n.RangeConstraint) and w.var in lhs)
        body.append(n.Comprehension(s.tensor, s.indices, "+=" if temp else "=", value, wheres, span=here))
    return tuple(body)


def _lhs_range(w: n.Node, lhs: list) -> bool:
    """``w`` gives an lhs variable a range of sizes and constants (``where t
    in 0:T``, for a variable that no read bounds): the statement after the
    sum takes it too, and covers the elements the sum wrote."""
    return isinstance(w, n.RangeConstraint) and w.var in lhs and not _names(w.lo) | _names(w.hi)


def _product(factors: list[tuple[str, n.Expr]], span) -> n.Expr:
    out = factors[0][1] if factors[0][0] == "*" else n.Binary("/", n.Const(1.0, span=span), factors[0][1], span=span)
    for op, f in factors[1:]:
        out = n.Binary(op, out, f, span=f.span or span)
    return out


def _name(x: n.Expr) -> str | None:
    return x.name if isinstance(x, (n.IndexVar, n.Ident)) else None


def _where_names(w: n.Node) -> set[str]:
    """The names a ``where`` clause binds or reads."""
    bound = {w.var} if isinstance(w, n.RangeConstraint) else {w.name} if isinstance(w, n.Let) else set()
    return bound | _names(w)


def _names(node: n.Node) -> set[str]:
    """Index variables and other names (sizes, ``where`` lets) below ``node``."""
    return {x.name for x in n.walk(node) if isinstance(x, (n.IndexVar, n.Ident))}


def kept(old, new, new_model, p: dict[object, Sum]) -> bool:
    """The rewrite of ``p`` stays (driver._by): see :func:`same_cover`."""
    return same_cover(new_model, p)
