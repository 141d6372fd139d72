"""User errors (``TcError`` and subclasses) and compiler bugs (``InternalError``).

A user error is something the program or the call got wrong; it is reported
with its location and never with a traceback.  An ``InternalError`` is a bug
in tcdsl and is deliberately *not* a ``TcError``.
"""
from __future__ import annotations


class TcError(Exception):
    """Base class of every error caused by user input."""


class _LocatedError(TcError):
    def __init__(self, message: str, span: "source.Span | None" = None):  # (source imports this module)
        self.message = message
        self.span = span
        super().__init__(span.format(message) if span is not None else message)

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def col(self) -> int | None:
        return self.span.col if self.span else None


class TcSyntaxError(_LocatedError):
    """The source does not follow the grammar."""


class TcSemanticError(_LocatedError):
    """The source parses but is not a valid program (names, types, ranges, ...)."""


class TcShapeError(TcError):
    """A kernel was called with inputs that disagree with the program or each other."""


class TcWarning(UserWarning):
    """Something in the program that may be wrong but is not an error: a read
    that may go out of bounds (TC's "unchecked precondition")."""


class InternalError(Exception):
    """A broken invariant inside tcdsl: a bug, never the user's fault."""


def caller_level() -> int:
    """The ``stacklevel`` of the first frame outside tcdsl: a warning points
    at the user's ``tcdsl.compile`` call, not at tcdsl's own code."""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level
