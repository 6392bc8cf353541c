"""A slice of an open file that a response carries instead of bytes.

The codec only needs its size; the server hands it to ``os.sendfile`` so record data goes from
the page cache to the socket without passing through Python (zero copy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True, slots=True)
class FileRegion:
    file: BinaryIO  # kept open by its segment until no response can still refer to it
    position: int
    size: int

    def fileno(self) -> int:
        return self.file.fileno()
