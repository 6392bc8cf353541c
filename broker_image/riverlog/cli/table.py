"""Plain-text tables for the CLI's default ``--output table``.

Two shapes: :func:`format_table` when all rows are known (widths fit the content), and
:class:`StreamingTable` for output that arrives row by row (consume), where widths are fixed up
front and the last column is left unpadded so long values do not push later rows around.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TextIO

NULL_TEXT = "-"
_GAP = "  "


def cell(value: object) -> str:
    """How one value appears in a table: ``None`` as a dash, sequences comma-joined, and line
    breaks escaped so that every row stays on one line."""
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value) if value else NULL_TEXT
    text = str(value)
    if "\n" in text or "\r" in text or "\t" in text:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return text


def _is_number(text: str) -> bool:
    return text.lstrip("-").isdigit()


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Aligned columns under upper-case headers; all-numeric columns are right-aligned."""
    text_rows = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    numeric = [
        bool(text_rows) and all(_is_number(r[i]) or r[i] == NULL_TEXT for r in text_rows)
        for i in range(len(headers))
    ]
    last = len(headers) - 1

    def line(values: Sequence[str], is_header: bool) -> str:
        parts = []
        for i, text in enumerate(values):
            if numeric[i] and not is_header:
                parts.append(text.rjust(widths[i]))
            elif i == last:
                parts.append(text)  # no trailing spaces
            else:
                parts.append(text.ljust(widths[i]))
        return _GAP.join(parts).rstrip()

    out = [line([h.upper() for h in headers], True)]
    out += [line(r, False) for r in text_rows]
    return "\n".join(out)


class StreamingTable:
    """Rows written as they come; ``widths`` are minimum widths of all but the last column."""

    def __init__(self, stream: TextIO, headers: Sequence[str], widths: Sequence[int]) -> None:
        if len(widths) != len(headers) - 1:
            raise ValueError("give a width for every column but the last")
        self._stream = stream
        self._headers = [h.upper() for h in headers]
        self._widths = [max(w, len(h)) for w, h in zip(widths, headers, strict=False)]
        self._started = False

    def write(self, row: Sequence[object]) -> None:
        if not self._started:
            self._write_line(self._headers)
            self._started = True
        self._write_line([cell(v) for v in row])

    def _write_line(self, values: Sequence[str]) -> None:
        parts = [v.ljust(w) for v, w in zip(values, self._widths, strict=False)]
        parts.append(values[-1])
        self._stream.write(_GAP.join(parts).rstrip() + "\n")
