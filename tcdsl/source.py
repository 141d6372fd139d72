"""Source text and locations: the one place where error locations are formatted."""
from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Source:
    """A program text and the name errors show for it (a path, or ``<string>``)."""

    text: str
    name: str = "<string>"

    @staticmethod
    def load(source: str | os.PathLike) -> "Source":
        """Read ``source`` as a path when it is a ``PathLike`` or names an existing
        ``.tc`` file; otherwise take it as program text."""
        if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and source.strip().endswith(".tc")
            and os.path.exists(source)
        ):
            path = os.fspath(source)
            with open(path, encoding="utf-8") as f:
                return Source(f.read(), path)
        if not isinstance(source, str):
            raise TypeError(f"source must be TC text or a path, not {type(source).__name__}")
        return Source(source)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        line = self.text.count("\n", 0, offset) + 1
        col = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return line, col

    def line_text(self, line: int) -> str:
        lines = self.text.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else ""


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open range of character offsets in a :class:`Source`."""

    source: Source = field(repr=False)
    start: int
    end: int

    @property
    def line(self) -> int:
        return self.source.line_col(self.start)[0]

    @property
    def col(self) -> int:
        return self.source.line_col(self.start)[1]

    def merge(self, other: "Span | None") -> "Span":
        if other is None:
            return self
        return Span(self.source, min(self.start, other.start), max(self.end, other.end))

    def format(self, message: str) -> str:
        """``FILE:LINE:COL: message``, then the source line, then carets under the span."""
        line, col = self.source.line_col(self.start)
        text = self.source.line_text(line)
        end_line, end_col = self.source.line_col(self.end)
        width = (end_col - col) if end_line == line and self.end > self.start else 1
        width = max(1, min(width, len(text) - col + 1 if len(text) >= col else 1))
        caret = " " * (col - 1) + "^" * width
        return f"{self.source.name}:{line}:{col}: {message}\n{text}\n{caret}"
