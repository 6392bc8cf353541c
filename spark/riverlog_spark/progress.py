"""A dependency-free progress bar for the generator.

On a terminal it redraws one line (``\\r``); into a file or pipe it writes a line at every tenth
of the way, so logs stay short and readable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def render(done: int, total: int, elapsed: float, width: int = 30) -> str:
    """``[#########.....................]  300/1000  30%  150/s``"""
    fraction = 1.0 if total <= 0 else min(1.0, done / total)
    filled = int(round(fraction * width))
    rate = done / elapsed if elapsed > 0 else 0.0
    digits = len(str(total))
    return f"[{'#' * filled}{'.' * (width - filled)}] {done:>{digits}}/{total}  {fraction:4.0%}  {rate:,.0f}/s"


class ProgressBar:
    def __init__(self, total: int, *, stream: TextIO | None = None, label: str = "",
                 width: int = 30, min_interval: float = 0.1) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.label = f"{label} " if label else ""
        self.width = width
        self.min_interval = min_interval
        self.done = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_tenth = -1

    def update(self, count: int = 1) -> None:
        self.done += count
        if self._tty:
            now = time.monotonic()
            if now - self._last_draw >= self.min_interval or self.done >= self.total:
                self._last_draw = now
                self.stream.write(f"\r{self.label}{self._line()}")
                self.stream.flush()
        else:
            tenth = 10 if self.total <= 0 else min(10, self.done * 10 // self.total)
            if tenth > self._last_tenth:
                self._last_tenth = tenth
                self.stream.write(f"{self.label}{self._line()}\n")
                self.stream.flush()

    def close(self) -> None:
        if self._tty:
            self.stream.write(f"\r{self.label}{self._line()}\n")
            self.stream.flush()
        elif self._last_tenth < 10 or self.done != self.total:
            self.stream.write(f"{self.label}{self._line()}\n")
            self.stream.flush()

    def _line(self) -> str:
        return render(self.done, self.total, time.monotonic() - self._start, self.width)
