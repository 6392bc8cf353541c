"""Reading and writing Kafka's primitive wire types over in-memory buffers (no I/O).

Kafka is big-endian throughout; "compact" encodings (flexible versions) prefix lengths with an
unsigned varint holding length + 1 so that 0 can mean null.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from .file_region import FileRegion

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID: Final = uuid.UUID(int=0)


class DecodeError(ValueError):
    """The bytes do not form a valid value of the expected type (truncated, negative size...)."""


class Reader:
    """A cursor over a buffer. Every read checks bounds so garbage input raises DecodeError."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise DecodeError(f"need {n} bytes at {start}, have {self.end - start}")
        self.pos = start + n
        return start

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._take(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._take(8))[0]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._take(8))[0]

    def boolean(self) -> bool:
        return self.int8() != 0

    def uuid(self) -> uuid.UUID:
        start = self._take(16)
        return uuid.UUID(bytes=bytes(self.buf[start : start + 16]))

    def uvarint(self) -> int:
        result = 0
        shift = 0
        while True:
            if self.pos >= self.end:
                raise DecodeError("truncated varint")
            byte = self.buf[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise DecodeError("varint too long")

    def varint(self) -> int:
        raw = self.uvarint()
        return (raw >> 1) ^ -(raw & 1)

    def raw(self, n: int) -> memoryview:
        start = self._take(n)
        return self.buf[start : start + n]

    def string(self, n: int) -> str:
        try:
            return str(self.raw(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid utf-8 string: {exc}") from None


class Writer:
    """Appends encoded values to a bytearray."""

    __slots__ = ("buf", "splices")

    def __init__(self) -> None:
        self.buf = bytearray()
        # File regions to send between byte ranges: (position in buf, region).
        self.splices: list[tuple[int, FileRegion]] = []

    def splice(self, region: FileRegion) -> None:
        """Reserve the region's place in the output without copying its bytes."""
        self.splices.append((len(self.buf), region))

    def chunks(self) -> list[bytes | FileRegion]:
        """The output as bytes interleaved with file regions, in wire order."""
        if not self.splices:
            return [bytes(self.buf)]
        out: list[bytes | FileRegion] = []
        last = 0
        view = memoryview(self.buf)
        for pos, region in self.splices:
            if pos > last:
                out.append(bytes(view[last:pos]))
            out.append(region)
            last = pos
        if last < len(self.buf):
            out.append(bytes(view[last:]))
        return out

    def size(self) -> int:
        return len(self.buf) + sum(region.size for _, region in self.splices)

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID | None) -> None:
        self.buf += (v or ZERO_UUID).bytes

    def uvarint(self, v: int) -> None:
        buf = self.buf
        while v > 0x7F:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data


def encode_uvarint(v: int) -> bytes:
    w = Writer()
    w.uvarint(v)
    return bytes(w.buf)
