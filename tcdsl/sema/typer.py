"""Types of a checked definition: each tensor's dtype (a fixed point over the
statements, so that an untyped output gets the promotion of everything
written to it), then each expression node's (:class:`Typer`, used by
:mod:`tcdsl.sema.check`)."""
from __future__ import annotations

from dataclasses import replace

from ..errors import TcSemanticError
from ..syntax import nodes as n
from . import types as ty


class Typer:
    """Assigns dtypes: tensors first (a fixed point over the statements, so
    an untyped output gets the promotion of everything written to it), then
    every expression node."""

    def __init__(self, checker):  # a check._Checker
        self.c = checker
        self.types = {t: i.dtype for t, i in checker.tensors.items()}

    def type_body(self, body):
        comps = [s for s in n.comprehensions(body)]
        for _ in range(len(comps) + 1):
            changed = False
            for s in comps:
                rhs = self.expr_type(s.rhs)
                if rhs is None:
                    continue
                cur = self.types[s.tensor]
                info = self.c.tensors[s.tensor]
                if cur == "?" or (info.dims is None and cur != ty.promote(cur, rhs) and
                                  not self._declared(s.tensor)):
                    self.types[s.tensor] = rhs if cur == "?" else ty.promote(cur, rhs)
                    changed = True
            if not changed:
                break
        for t, info in list(self.c.tensors.items()):
            dtype = self.types[t] if self.types[t] != "?" else "float32"
            self.c.tensors[t] = replace(info, dtype=dtype)
            self.types[t] = dtype
        return self._annotate_stmts(body)

    def _declared(self, t: str) -> bool:
        o = self.c._output_decl(t)
        return o is not None and o.type is not None

    def expr_type(self, e: n.Expr) -> str | None:
        match e:
            case n.Const(value=v):
                return "float32" if isinstance(v, float) else "int32"
            case n.IndexVar() | n.SizeVar():
                return "int32"
            case n.Access(tensor=t):
                d = self.types[t]
                return None if d == "?" else d
            case n.Cast(to=to):
                return to
            case n.Unary(op="!"):
                return "bool"
            case n.Unary(operand=x):
                return _arithmetic(self.expr_type(x))
            case n.Binary(op=op) if op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||"):
                return "bool"
            case n.Binary(lhs=a, rhs=b):
                return _arithmetic(self._join(e, a, b))
            case n.Select(then=a, other=b):
                return self._join(e, a, b)
            case n.BuiltinCall(args=args):
                ts = [self.expr_type(a) for a in args]
                if any(t is None for t in ts):
                    return None
                return max([t for t in ts if ty.is_float(t)] or ["float32"], key=ty.bits)
        raise AssertionError(f"cannot type {type(e).__name__}")

    def _join(self, e, a: n.Expr, b: n.Expr) -> str | None:
        ta, tb = self.expr_type(a), self.expr_type(b)
        if ta is None or tb is None:
            return ta or tb
        # rule 5: literals adapt to the other operand
        if isinstance(a, n.Const) and not isinstance(b, n.Const) and not (ty.is_int(tb) and ta != "int32"):
            return tb
        if isinstance(b, n.Const) and not isinstance(a, n.Const) and not (ty.is_int(ta) and tb != "int32"):
            return ta
        return ty.promote(ta, tb)

    @staticmethod
    def _expect_bool(e: n.Expr) -> None:
        """TC's rule (sema.h, expectBool): the operands of ``! && ||`` and the
        condition of ``?:`` are bool -- comparisons, bool tensors, or these."""
        match e:
            case n.Unary(op="!", operand=x):
                operands, what = [x], "'!'"
            case n.Binary(op=op, lhs=a, rhs=b) if op in ("&&", "||"):
                operands, what = [a, b], f"'{op}'"
            case n.Select(cond=c):
                operands, what = [c], "the condition of '?:'"
            case _:
                return
        for x in operands:
            if x.dtype is not None and x.dtype != "bool":
                raise TcSemanticError(f"{what} needs a bool (a comparison or a bool tensor), not {x.dtype}; "
                                      f"compare it, e.g. 'x != 0'", x.span or e.span)

    def _annotate(self, e: n.Expr) -> n.Expr:
        e = n.map_children(e, lambda c: self._annotate(c) if isinstance(c, n.Expr) else c)
        e = replace(e, dtype=self.expr_type(e))
        if (isinstance(e, n.Binary) and e.op in ("/", "%") and isinstance(e.rhs, n.Const) and e.rhs.value == 0
                and e.dtype is not None and not ty.is_float(e.dtype)):
            what = "division" if e.op == "/" else "remainder"
            raise TcSemanticError(f"integer {what} by zero", e.rhs.span or e.span)
        self._expect_bool(e)
        if isinstance(e, n.Access):
            for c in (x for i in e.indices for x in n.walk(i) if isinstance(x, n.Const)):
                _check_index_literal(c)
            for i in e.indices:
                if i.dtype is not None and ty.is_float(i.dtype):
                    raise TcSemanticError(f"an index must be an integer, but this is a {i.dtype} value; "
                                          f"cast it, e.g. int32(...)", i.span or e.span)
        return e

    def _annotate_stmts(self, stmts):
        out = []
        for s in stmts:
            match s:
                case n.For():
                    out.append(replace(s, body=self._annotate_stmts(s.body)))
                case n.If():
                    out.append(replace(s, then=self._annotate_stmts(s.then), orelse=self._annotate_stmts(s.orelse)))
                case n.Comprehension():
                    rhs = self._annotate(s.rhs)
                    dst = self.types[s.tensor]
                    if self._declared(s.tensor) and ty.is_narrowing(rhs.dtype, dst):
                        raise TcSemanticError(f"assigning a {rhs.dtype} value to '{s.tensor}', declared {dst}, "
                                              f"narrows it; add a cast", s.rhs.span or s.span)
                    wheres = tuple(replace(w, expr=self._annotate(w.expr)) if isinstance(w, n.Exists) else w
                                   for w in s.wheres)
                    out.append(replace(s, rhs=rhs, wheres=wheres))
        return tuple(out)


def _arithmetic(dtype: str | None) -> str | None:
    """Arithmetic on bools is done in int32, as C promotes them (TIR has no bool arithmetic)."""
    return "int32" if dtype == "bool" else dtype


def _check_index_literal(c: n.Const) -> None:
    """Index arithmetic is int32 (SPEC: sizes beyond it are refused at the call)."""
    if isinstance(c.value, int) and not -2**31 <= c.value < 2**31:
        raise TcSemanticError(f"{c.value} does not fit in an index (int32)", c.span)
