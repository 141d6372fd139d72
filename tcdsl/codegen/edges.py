"""Loops whose vector reads are clamped into their tensor, versioned so that
where every lane is inside, the reads are plain (before TVM's build).

A read the program makes only under a condition (``d % 2 == 0 ? -q(b, t,
h, d + 1) : q(b, t, h, d - 1)``, a rotary embedding's pairs) or at an index
computed from data (``cur(b, c, t - dil(l))``, a WaveNet layer's dilation
read from a table) is clamped into its tensor (codegen/expr.py, rule 3 and
``_index``): ``max(min(x, extent - 1), 0)``.  Inside a vector loop the
clamped lanes are no longer consecutive, and LLVM loads them one by one
(a gather).  Where every lane's ``x`` is inside ``[0, extent - 1]`` the clamp
changes nothing, so this pass gives the innermost loop (serial or parallel)
whose variable such an ``x`` moves with two bodies: the one without the
clamps where, over the loops inside it, ``x`` stays inside the tensor (a
test of the bounds TVM's interval analysis gives, once per iteration: per
vector of a row, or per column tile of register tiles), else the original.
An index computed on data wraps as 32-bit arithmetic does (``_wrap_to``):
the test bounds its 64-bit value, and the plain body computes it in 32
bits, equal wherever the test holds.  Only where the plain lanes are
consecutive (``x`` moves by 1 with the vector loop): elsewhere (``e // D``)
the second body would gather as the first does.

Rotary embedding of (2, 1024, 16, 128): 6.7-7.1 -> 4.9 ms; a WaveNet stack
of 8 layers (2, 64, 2048), dilations from a table: 106 -> 25-27 ms (Intel
Xeon, 2 threads, ``benchmarks/programs.py --only "rope,wavenet"``).

The same versioning serves a read at a quotient by a size along a vector
loop (:func:`quotient_runs`): where the vector's lanes share the quotient,
one scalar read instead of a multiplication per lane and a gather.
"""
from __future__ import annotations

import functools

import tvm
import tvm_ffi
from tvm import sym, tirx

from .divisors import is_quotient

_ORDINARY = (tirx.ForKind.SERIAL, tirx.ForKind.PARALLEL)


def versioned(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with its clamped vector reads plain where they are inside, and
    its vector lanes' quotients by a size one scalar where they are equal
    (:func:`quotient_runs`)."""
    body = tvm_ffi.structural_map(func.body, [(tirx.For, quotient_runs)])
    return func.with_body(tvm_ffi.structural_map(body, [(tirx.For, _version)]))


def _vars(e) -> list:
    out: list = []
    tvm_ffi.structural_map(e, [(tirx.Var, lambda v: out.append(v) or v)])
    return out


def _uses(e, names: set) -> bool:
    return any(v in names for v in _vars(e))


def _is_const(e, value: int) -> bool:
    return isinstance(e, tirx.IntImm) and e.value == value


def _clamp(m: tirx.Max):
    """(x, top) when ``m`` is ``max(min(x, top), 0)``, ``x`` and ``top``
    without the round trips that hide them from TVM's simplifier (a guarded
    read's float64, a gathered read's reinterpretation: codegen/expr.py
    ``_index``)."""
    if not isinstance(m.a, tirx.Min) or not _is_const(m.b, 0):
        return None
    x, top = _bare(m.a.a), m.a.b
    if isinstance(top, tirx.Sub) and _is_const(top.b, 1):
        top = _bare(top.a) - 1
    return (x, top) if str(x.ty) == "int32" else None


def _bare(x):
    """``x`` without a round trip through float64 or a float32's bits."""
    if isinstance(x, tirx.Cast) and str(x.ty) == "int32" and isinstance(x.value, tirx.Cast) \
            and str(x.value.ty) == "float64":
        return x.value.value
    if _is_reinterpret(x) and _is_reinterpret(x.args[0]) and str(x.args[0].args[0].ty) == "int32":
        return x.args[0].args[0]
    return x


def _is_reinterpret(x) -> bool:
    return isinstance(x, tvm.ir.expr.Call) and getattr(x.op, "name", "") == "tirx.reinterpret"


def _wrapped(x):
    """The 64-bit value of ``x`` when ``x`` is ``_wrap_to`` of it (a 32-bit
    wrap of arithmetic on data), else None."""
    if not isinstance(x, tirx.Cast) or str(x.ty) != "int32" or not isinstance(x.value, tirx.Sub):
        return None
    xor, sign = x.value.a, x.value.b
    if not _is_const(sign, 1 << 31) or not isinstance(xor, tirx.BitwiseXor) or not _is_const(xor.b, 1 << 31):
        return None
    low = xor.a
    if not isinstance(low, tirx.BitwiseAnd) or not _is_const(low.b, (1 << 32) - 1):
        return None
    return low.a


def _narrow(w):
    """The 64-bit sum ``w`` of 32-bit values computed in 32 bits, or None."""
    if isinstance(w, tirx.Cast) and str(w.value.ty) == "int32":
        return w.value
    if isinstance(w, tirx.IntImm):
        return tirx.const(w.value, "int32") if -(1 << 31) <= w.value < (1 << 31) else None
    if isinstance(w, (tirx.Add, tirx.Sub, tirx.Mul)):
        a, b = _narrow(w.a), _narrow(w.b)
        return None if a is None or b is None else type(w)(a, b)
    return None


def _inner(body) -> tuple[dict, set, set]:
    """The loops inside ``body``: {variable: its interval}, the vectorized
    ones' variables, and every variable bound inside it."""
    doms: dict = {}
    vector: set = set()
    bound: set = set()

    def loop(f):
        bound.add(f.loop_var)
        if f.step is not None and not _is_const(f.step, 1):
            return f  # (no interval: an x that moves with it is not versioned)
        doms[f.loop_var] = sym.IntervalSet(f.min, f.min + f.extent - 1)
        if f.kind == tirx.ForKind.VECTORIZED:
            vector.add(f.loop_var)
        return f

    def bind(b):
        bound.add(b.var)
        return b
    tvm_ffi.structural_map(body, [(tirx.For, loop), (tirx.Bind, bind)])
    return doms, vector, bound


def _version(f: tirx.For):
    if f.kind not in _ORDINARY:
        return f
    doms, vector, bound = _inner(f.body)
    if not vector:
        return f
    # an x may move with the vector and unrolled loops inside (the lanes of a
    # tile), not with another loop or a value bound inside (x is tested once
    # per iteration of f); a read in it only where no condition inside f
    # guards it (it is read before them)
    fixed = bound - vector - _unrolled(f.body) | bound - set(doms)
    guarded = _has(f.body, tirx.IfThenElse)
    an = sym.Analyzer()
    sites: list = []
    conds: list = []

    def visit(m):
        found = _clamp(m)
        if found is None:
            return m
        x, top = found
        wide = _wrapped(x)
        value = wide if wide is not None else x
        names = set(_vars(value))
        plain = _narrow(wide) if wide is not None else x
        if plain is None or f.loop_var not in names or len(names & vector) != 1 or names & fixed \
                or _uses(top, bound) or guarded and _has(value, tvm.ir.TensorLoad) \
                or not _consecutive(plain, (names & vector).pop()):
            return m
        span = an.int_set(value, {v: doms[v] for v in names & bound})
        lo, hi = span.min_value, span.max_value
        if _uses(lo, bound) or _uses(hi, bound) or "inf" in str(lo) or "inf" in str(hi):
            return m
        t = str(value.ty)
        conds.append(tirx.And(lo >= tirx.const(0, t), hi <= tirx.Cast(t, top)))
        sites.append((m, plain))
        return m

    tvm_ffi.structural_map(f.body, [(tirx.Max, visit)])
    if not sites:
        return f

    def plain(m):
        return next((p for s, p in sites if tvm_ffi.structural_equal(s, m)), m)

    fast = tvm_ffi.structural_map(f.body, [(tirx.Max, plain)])
    cond = conds[0]
    for c in conds[1:]:
        cond = tirx.And(cond, c)
    body = tirx.IfThenElse(cond, fast, f.body)
    return tirx.For(f.loop_var, f.min, f.extent, f.kind, body, f.thread_binding, f.annotations, f.step)


def _consecutive(x, lane) -> bool:
    """``x`` moves by 1 with the vector loop's variable ``lane``: its lanes,
    unclamped, are consecutive (not so ``e // D`` of a merge of heads)."""
    coeffs = sym.detect_linear_equation(x, [lane])
    return len(coeffs) == 2 and isinstance(coeffs[0], tirx.IntImm) and coeffs[0].value == 1


def _has(node, kind) -> bool:
    found: list = []
    tvm_ffi.structural_map(node, [(kind, lambda x: found.append(x) or x)])
    return bool(found)


def _unrolled(body) -> set:
    out: set = set()

    def loop(f):
        if f.kind == tirx.ForKind.UNROLLED:
            out.add(f.loop_var)
        return f
    tvm_ffi.structural_map(body, [(tirx.For, loop)])
    return out


def quotient_runs(f: tirx.For) -> tirx.For:
    """The loop ``f`` (serial or parallel) with two bodies where a vector loop
    inside reads at a quotient by a size (divisors.divide: the quotient ``q``
    of an index ``x`` that moves with the vector's lanes, and the unrolled
    loops', not with another loop inside ``f``): where ``x``'s first and last
    values have one quotient, ``q`` is that one value (a scalar read
    broadcast: a per-group scale ``sc(n, k / (K / NG))`` along ``k``), else
    the lanes' quotients as before (a gather).  Without it each lane's
    quotient, a 64-bit multiplication, and the gather cost 15x a read of
    ``sc(n, k / 128)``.  Only quotients in the indices of reads (code size)."""
    if f.kind not in _ORDINARY:
        return f
    doms, vector, bound = _inner(f.body)
    if not vector:
        return f
    lanes = vector | _unrolled(f.body)
    an, sites = sym.Analyzer(), []

    def visit(e):
        if not is_quotient(e):
            return e
        x = e.value.a.a.value  # Cast(t, (Cast(uint64, x) * m) >> s)
        names = set(_vars(x)) & bound
        if f.loop_var not in _vars(x) or not names & vector or names - lanes or names - set(doms):
            return e
        span = an.int_set(x, {v: doms[v] for v in names})
        lo, hi = span.min_value, span.max_value
        if "inf" in str(lo) or "inf" in str(hi) or _uses(lo, bound) or _uses(hi, bound):
            return e
        sites.append((e, _quotient_at(e, lo), _quotient_at(e, hi)))
        return e

    def load(ld):
        for i in ld.indices:
            tvm_ffi.structural_map(i, [(tirx.Cast, visit)])
        return ld
    tvm_ffi.structural_map(f.body, [(tvm.ir.TensorLoad, load)])
    if not sites:
        return f
    cond = functools.reduce(tirx.And, [tirx.EQ(a, b) for _, a, b in sites])
    fast = tvm_ffi.structural_map(f.body, [(tirx.Cast, lambda e: next(
        (a for s, a, _ in sites if tvm_ffi.structural_equal(s, e)), e))])
    body = tirx.IfThenElse(cond, fast, f.body)
    return tirx.For(f.loop_var, f.min, f.extent, f.kind, body, f.thread_binding, f.annotations, f.step)


def _quotient_at(q, x) -> tirx.PrimExpr:
    """The quotient ``q`` (made by divisors.divide) of the index ``x`` instead."""
    return tirx.Cast(q.ty, tirx.shift_right(tirx.Cast("uint64", x) * q.value.a.b, q.value.b))
