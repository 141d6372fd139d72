"""Reverse-mode automatic differentiation of TC programs: ``tcdsl.gradient``.

    src = tcdsl.gradient(source, entry=None, wrt=None)   # TC text of def <entry>_grad

See :mod:`tcdsl.autodiff.adjoint` for how the adjoint is built and
docs/training.md for the rules and a walk-through.
"""
from __future__ import annotations

import os
import warnings

from ..source import Source
from ..syntax.parse import parse
from ..syntax.printer import to_tc
from ..sema.check import check
from ..sema.ranges import infer_ranges
from .adjoint import Adjoint, _no_constant_lhs

__all__ = ["gradient", "Adjoint", "analyse"]


def analyse(source: str | os.PathLike, entry: str | None = None, wrt=None) -> Adjoint:
    """The :class:`Adjoint` of the ``def`` ``entry`` of ``source``, built (its
    ``program()`` already called: ``.text`` holds the TC text)."""
    src = source if isinstance(source, Source) else Source.load(source)
    program = parse(src)
    checked = check(program, entry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranges = infer_ranges(checked)
    a = Adjoint(checked, ranges, wrt)
    a.text = to_tc(_no_constant_lhs(a.program(), set(checked.sizes)))
    return a


def gradient(source: str | os.PathLike, entry: str | None = None, wrt=None) -> str:
    """The reverse-mode adjoint of ``entry`` in ``source`` as TC text: ``def
    <entry>_grad(<inputs>, <outputs>, d_<output>...) -> (d_<input>, ...)``
    with one ``d_<input>`` per input in ``wrt`` (a name or a list of names;
    default: every floating-point input).  Raises :class:`tcdsl.TcError` for
    what cannot be differentiated."""
    return analyse(source, entry, wrt).text
