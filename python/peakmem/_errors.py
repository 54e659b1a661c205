"""Exceptions raised by peakmem."""

from __future__ import annotations


class TraceError(ValueError):
    """The trace is malformed or cannot be sized.

    ``str(err)`` is the full message: ``file:line:col: message``, the offending
    line and a caret under the column. The parts are attributes.
    """

    def __init__(
        self,
        rendered: str,
        file: str = "",
        line: int = 0,
        column: int = 0,
        message: str = "",
        line_text: str = "",
    ) -> None:
        super().__init__(rendered)
        self.file = file
        self.line = line
        self.column = column
        self.message = message or rendered
        self.line_text = line_text
