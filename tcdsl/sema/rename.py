"""Renaming the index variables of a statement that clash with a loop variable.

Run by ``check`` (sema/check.py) on the body of the ``def``.
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import nodes as n
from . import builtins as bt


def rename_loop_clashes(body: tuple, taken: set[str]) -> tuple:
    """Rename a statement's index or reduction variable that has the name of
    a loop variable elsewhere in the ``def`` (``y(t) = x(t)`` beside ``for t
    in T``): the polyhedral stages see every loop variable of the ``def`` as a
    parameter, and one name cannot be both."""
    loops: set[str] = set()

    def collect(stmts):
        for s in stmts:
            if isinstance(s, n.For):
                loops.add(s.var)
                collect(s.body)
            elif isinstance(s, n.If):
                collect(s.then + s.orelse)
    collect(body)
    if not loops:
        return body

    def comp(c: n.Comprehension, enclosing: tuple[str, ...]) -> n.Comprehension:
        own = [x.name for e in c.indices for x in n.walk(e)  # `j` of `H + j` too
               if isinstance(x, n.IndexVar) and x.name not in enclosing]
        clash = [v for v in own + list(c.reduction_vars) if v in loops]
        if not clash:
            return c
        used = taken | loops | {x.name for x in n.walk(c) if isinstance(x, n.IndexVar)}
        new: dict[str, str] = {}
        for v in clash:
            k = 1
            while f"{v}_{k}" in used or bt.lookup(f"{v}_{k}") is not None:
                k += 1
            new[v] = f"{v}_{k}"
            used.add(new[v])

        def fn(x):
            if isinstance(x, n.IndexVar) and x.name in new:
                return replace(x, name=new[x.name])
            if isinstance(x, n.RangeConstraint) and x.var in new:
                x = replace(x, var=new[x.var])
            return n.map_children(x, fn)
        c = fn(c)
        return replace(c, reduction_vars=tuple(new.get(v, v) for v in c.reduction_vars))

    def stmts(ss, enclosing):
        out = []
        for s in ss:
            if isinstance(s, n.For):
                out.append(replace(s, body=stmts(s.body, enclosing + (s.var,))))
            elif isinstance(s, n.If):
                out.append(replace(s, then=stmts(s.then, enclosing), orelse=stmts(s.orelse, enclosing)))
            else:
                out.append(comp(s, enclosing))
        return tuple(out)
    return stmts(body, ())
