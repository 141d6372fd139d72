"""Checked mode: ``tcdsl.compile(..., options={"checked": True})``.

Affine reads are proved in bounds before code generation (or reported, see
``polyhedral/bounds.py``).  Non-affine and indirect indices (``B(C(i))``,
``A(i * j)``) escape isl: by default ``codegen/expr.py`` clamps them into the
tensor, so bad data never reads outside a buffer but gives a quiet wrong
answer.  In checked mode such an index is compared with its extent instead;
out of range, the generated code calls back into Python, which raises a
``TcError`` naming the file, line and column of the index, the tensor, the
dimension and its size.  The check costs a comparison and a branch per
non-affine index; the callback runs only on the error path.

How it is wired:

1. ``driver`` lowers to TIR under :func:`checking` (a context variable, so
   that ``lower_expr``'s signature stays as it is); ``options.parse`` made
   the CPU mapping of a checked kernel serial.
2. ``_Lower._index`` (``codegen/expr.py``) calls :meth:`Guards.guard` for
   each non-affine index when :func:`enabled` (one :class:`Guards` per
   ``_Lower``, i.e. per right-hand side).
3. The callbacks are global TVM functions that ``runtime/checked.py``
   registers (the runtime imports it, so a kernel loaded from the disk cache
   finds them too).

Limits: CPU (``llvm``) only.  A checked kernel runs on one thread: TVM's
thread pool turns an error raised in a worker into a ``RuntimeError``
("Task 1 error: ...") and loses the ``TcError`` type.  The callbacks get
only values that are safe to compute anywhere (messages and extents, which
are size expressions), not the bad index itself: TVM evaluates a packed
call's arguments ahead of the whole statement, also where the index sits in
the untaken branch of ``c ? a : b`` (see :class:`Guards` for the other
consequence).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import tvm
from tvm import tirx

from ..runtime.checked import CALLBACK, CALLBACKS as _CALLBACKS, SEPARATOR as _SEPARATOR
from ..source import Span

_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("tcdsl_checked", default=False)
_MARK = "\x00"  # where the message goes inside the formatted span


def enabled() -> bool:
    """Is TIR being generated for a checked kernel?"""
    return _ENABLED.get()


@contextlib.contextmanager
def checking(on: bool) -> Iterator[None]:
    """Generate checked (``on``) or clamped indices inside the ``with``."""
    token = _ENABLED.set(bool(on))
    try:
        yield
    finally:
        _ENABLED.reset(token)


class Guards:
    """The guards of one right-hand side, in the order they are made.

    TVM evaluates the arguments of every packed call of a statement ahead of
    it, into ONE argument stack that each call overwrites from slot 0 (its
    LowerTVMBuiltin): a call then sees the arguments of the statement's last
    call.  So the k-th guard calls the k-th callback (``CALLBACK.k``, the
    number in the function name, not on the stack) with the messages and
    extents of guards 0..k: every call's arguments begin the same way, and
    the k-th callback finds its own entry in whichever it gets."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.extents: list[tirx.PrimExpr] = []

    def guard(self, index: tirx.PrimExpr, extent: tirx.PrimExpr, tensor: str, dim: int,
              span: Span | None) -> tirx.PrimExpr:
        """``index`` where ``0 <= index < extent``, else the call that raises."""
        k = len(self.extents)
        self.parts += _message_parts(tensor, dim, span)
        self.extents.append(extent)
        messages = tvm.ir.StringImm(_SEPARATOR.join(self.parts))
        fail = tirx.call_packed(f"{CALLBACK}.{k if k < _CALLBACKS else 'more'}", messages, *self.extents)
        ok = tirx.And(tirx.GE(index, 0), tirx.LT(index, extent))
        return tirx.if_then_else(ok, index, fail)


def _message_parts(tensor: str, dim: int, span: Span | None) -> list[str]:
    """The error message before and after the size (only known at run time)."""
    what = f"'{tensor}' is read out of bounds: its index along dimension {dim} is not in [0, "
    if span is None or _MARK in span.source.text or _SEPARATOR in span.source.text:
        return [what, ")"]
    before, after = span.format(_MARK).split(_MARK, 1)
    return [before + what, ")" + after]
