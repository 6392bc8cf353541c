"""One client connection: size-prefixed frames in, responses out in request order.

Like Kafka, a connection's requests are handled one at a time, which keeps responses in order
without reordering buffers. Reading pauses when too many frames are queued, so a fast client
cannot make the broker buffer without bound. Record data in responses arrives as file regions and
is sent with ``os.sendfile`` straight from the page cache (zero copy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from ..protocol.file_region import FileRegion

log = logging.getLogger(__name__)

_SIZE_BYTES = 4


@dataclass(slots=True)
class Response:
    chunks: list[bytes | FileRegion]
    close_after: bool = False


Handler = Callable[[memoryview, "Connection"], Awaitable[Response | None]]


def _sendfile_blocking(sock_fd: int, region: FileRegion, sent: int) -> None:
    """Finish a sendfile the event loop could not complete at once, waiting for writability."""
    poller = select.poll()
    poller.register(sock_fd, select.POLLOUT)
    in_fd = region.fileno()
    while sent < region.size:
        try:
            n = os.sendfile(sock_fd, in_fd, region.position + sent, region.size - sent)
        except BlockingIOError:
            n = -1
        if n == 0:
            raise ConnectionError("file region shorter than expected (segment truncated?)")
        if n > 0:
            sent += n
            continue
        if not poller.poll(30_000):
            raise TimeoutError("client did not read its fetch response for 30 s")


class Connection(asyncio.Protocol):
    def __init__(self, handler: Handler, *, max_frame: int, max_queued: int, on_close: Callable[[Connection], None]):
        self._handler = handler
        self._max_frame = max_frame
        self._max_queued = max_queued
        self._on_close = on_close
        self._buf = bytearray()
        self._queue: asyncio.Queue[memoryview | None] = asyncio.Queue()
        self._transport: asyncio.Transport | None = None
        self._paused_reading = False
        self._writable = asyncio.Event()
        self._writable.set()
        self._worker: asyncio.Task[None] | None = None
        self.peer: str = "?"
        self.closed = False

    # asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._worker = asyncio.get_running_loop().create_task(self._work())

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= _SIZE_BYTES:
            size = int.from_bytes(buf[:_SIZE_BYTES], "big", signed=True)
            if size < 8 or size > self._max_frame:
                # A frame too small to hold a header, negative or beyond socket.request.max.bytes:
                # the stream can't be trusted any more, so close as Kafka does.
                log.debug("closing %s: invalid frame size %d (max %d)", self.peer, size, self._max_frame)
                self.close()
                return
            if len(buf) < _SIZE_BYTES + size:
                break
            frame = memoryview(bytes(buf[_SIZE_BYTES : _SIZE_BYTES + size]))
            del buf[: _SIZE_BYTES + size]
            self._queue.put_nowait(frame)
        if self._queue.qsize() >= self._max_queued and not self._paused_reading and self._transport:
            self._paused_reading = True
            self._transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._writable.set()
        self._queue.put_nowait(None)
        self._on_close(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # Work --------------------------------------------------------------------------------

    def close(self) -> None:
        if self._transport and not self.closed:
            self._transport.close()
        self.closed = True

    def abort(self) -> None:
        """Drop the connection without sending what is still buffered (a crash, for tests)."""
        if self._transport and not self.closed:
            self._transport.abort()
        self.closed = True

    async def _work(self) -> None:
        try:
            while True:
                frame = await self._queue.get()
                if frame is None or self.closed:
                    return
                if self._paused_reading and self._queue.qsize() < self._max_queued // 2 and self._transport:
                    self._paused_reading = False
                    self._transport.resume_reading()
                response = await self._handler(frame, self)
                if response is None:
                    continue
                await self._send(response.chunks)
                if response.close_after:
                    self.close()
                    return
        except (ConnectionError, TimeoutError) as exc:
            log.info("connection %s: %s", self.peer, exc)
            self.close()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s: unexpected error, closing", self.peer)
            self.close()

    async def _send(self, chunks: list[bytes | FileRegion]) -> None:
        transport = self._transport
        if transport is None or self.closed:
            return
        for chunk in chunks:
            if self.closed:
                return
            if isinstance(chunk, FileRegion):
                await self._send_region(transport, chunk)
            else:
                transport.write(chunk)
        if not self._writable.is_set():
            await self._writable.wait()  # backpressure: a slow reader holds up only itself

    async def _send_region(self, transport: asyncio.Transport, region: FileRegion) -> None:
        if region.size == 0:
            return
        # Bytes already handed to the transport must reach the socket first.
        if transport.get_write_buffer_size() > 0:
            transport.set_write_buffer_limits(high=0, low=0)
            if transport.get_write_buffer_size() > 0:
                self._writable.clear()
            await self._writable.wait()
            transport.set_write_buffer_limits()
            if self.closed:
                return
        sock = transport.get_extra_info("socket")
        fd = sock.fileno()
        sent = 0
        try:
            sent = os.sendfile(fd, region.fileno(), region.position, region.size)
        except BlockingIOError:
            sent = 0
        if sent < region.size:
            # The socket buffer filled up (or the file ended early): finish in a thread that
            # can block on writability without holding up the event loop.
            await asyncio.get_running_loop().run_in_executor(None, _sendfile_blocking, fd, region, sent)
