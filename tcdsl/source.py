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
            return Source.read(os.fspath(source))
        if not isinstance(source, str):
            raise TypeError(f"source must be TC text or a path, not {type(source).__name__}")
        return Source(source)

    @staticmethod
    def read(path: str) -> "Source":
        """The program in the file ``path``, which must be UTF-8 text."""
        with open(path, "rb") as f:
            data = f.read()
        try:
            return Source(data.decode("utf-8"), path)
        except UnicodeDecodeError as e:
            from .errors import TcSyntaxError

            line = data.count(b"\n", 0, e.start) + 1
            col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            raise TcSyntaxError(f"{path}:{line}:{col}: the file is not UTF-8 text "
                                f"(byte 0x{data[e.start]:02x})") from None

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
