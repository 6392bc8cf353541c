"""One client connection: size-prefixed frames in, responses out in request order.

Like Kafka, a connection's requests are handled one at a time, which keeps responses in order
without reordering buffers. Reading pauses when too many frames are queued, so a fast client
cannot make the broker buffer without bound, and while the request memory pool
(``queued.max.request.bytes``, ``memory_pool.py``) has nothing to reserve for a frame that has not
fully arrived (one complete in what was read goes on). A frame is buffered only as far as it has
arrived. Record data in responses arrives as file regions and is sent with ``os.sendfile`` straight
from the page cache (zero copy).

The connection keeps the times ``SocketServer`` checks: ``last_active`` (bytes in, a response
out) for ``connections.max.idle.ms``, ``frame_started`` (the first byte of a frame still
incomplete, None while the broker itself holds reading back) for the frame deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from ..protocol.file_region import FileRegion
from ..security.authenticator import SaslSession
from ..security.principal import ANONYMOUS, certificate_principal
from ..security.principal_mapping import Rule
from .memory_pool import MemoryPool

log = logging.getLogger(__name__)

_SIZE_BYTES = 4


@dataclass(slots=True)
class Response:
    chunks: list[bytes | FileRegion]
    close_after: bool = False
    # A client quota's throttle: once the response is sent, nothing more is read from the
    # connection for this long (Kafka mutes the channel, KIP-219).
    throttle_ms: int = 0


Handler = Callable[[memoryview, "Connection"], Awaitable[Response | None]]


# A client that reads nothing of a fetch response for this long is given up on.
SENDFILE_STALL_S = 30.0
# Record data sent over TLS is read from its segment in slices of this size.
TLS_READ_BYTES = 1 << 20


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _sendfile_when_writable(sock_fd: int, region: FileRegion, sent: int) -> None:
    """Finish a sendfile the socket could not take at once, on the event loop: wait for the
    socket to be writable, send what it takes, repeat. No thread waits on a slow reader.

    The transport owns ``sock_fd`` (the loop refuses a second watcher on it), so writability is
    watched on a duplicate of the descriptor: same socket, own registration, closed after."""
    loop = asyncio.get_running_loop()
    in_fd = region.fileno()
    watch_fd = os.dup(sock_fd)
    try:
        while sent < region.size:
            try:
                n = os.sendfile(watch_fd, in_fd, region.position + sent, region.size - sent)
            except BlockingIOError:
                n = -1
            if n == 0:
                raise ConnectionError("file region shorter than expected (segment truncated?)")
            if n > 0:
                sent += n
                continue
            writable: asyncio.Future[None] = loop.create_future()
            loop.add_writer(watch_fd, _resolve, writable)
            try:
                await asyncio.wait_for(writable, SENDFILE_STALL_S)
            except TimeoutError:
                raise TimeoutError(f"client did not read its fetch response for {SENDFILE_STALL_S:.0f} s") from None
            finally:
                loop.remove_writer(watch_fd)
    finally:
        os.close(watch_fd)


class Connection(asyncio.Protocol):
    def __init__(self, handler: Handler, *, max_frame: int, max_queued: int, on_close: Callable[[Connection], None],
                 pool: MemoryPool | None = None, listener: str = "", ip: str = "",
                 tls: bool = False, principal_rules: list[Rule] | None = None,
                 sasl: SaslSession | None = None):
        self._handler = handler
        self._max_frame = max_frame
        self._max_queued = max_queued
        self._on_close = on_close
        self._pool = pool
        self.listener = listener
        self.ip = ip
        # TLS connections map their client certificate to a principal (``principal_rules``);
        # their responses are encrypted here, so record data is copied, never sendfile'd.
        self.tls = tls
        self._principal_rules = principal_rules or []
        self.principal = ANONYMOUS
        # SASL listeners: the authentication state; requests are gated on it (dispatch.py).
        self.sasl = sasl
        # The frame being received: its size prefix so far, then its body so far (once its
        # declared size is reserved in the pool). Without a reservation, reading pauses and what
        # was read already waits in _stash (at most one read).
        self._head = bytearray()
        self._body: bytearray | None = None
        self._body_size = 0
        self._waiting_size = 0
        self._stash = b""
        # Complete frames and the pool bytes each holds; None once the connection is lost.
        self._queue: asyncio.Queue[tuple[memoryview, int] | None] = asyncio.Queue()
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._paused: set[str] = set()  # why the broker holds reading back: "in-flight", "memory", "throttled"
        self._writable = asyncio.Event()
        self._writable.set()
        self._worker: asyncio.Task[None] | None = None
        self._handling = False
        self.sending_file = False
        self.peer: str = "?"
        self.closed = False
        self.last_active = 0.0
        self.frame_started: float | None = None

    @property
    def made(self) -> bool:
        """connection_made has run: the times below are the connection's own."""
        return self._transport is not None

    @property
    def busy(self) -> bool:
        """The broker, not the client, is what the connection waits for: a request is being
        handled, or the next frame waits for pool memory. Such a connection is never idle."""
        return self._handling or self._waiting_size > 0

    # asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()
        if self.closed:  # closed before it was made (the server shutting down)
            transport.close()
            return
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if self.tls and self.sasl is None and not self._take_certificate_principal(transport):
            return  # (on SASL_SSL the principal is SASL's, as in Kafka)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._worker = self._loop.create_task(self._work())

    def _take_certificate_principal(self, transport: asyncio.BaseTransport) -> bool:
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        try:
            self.principal = certificate_principal(der, self._principal_rules)
        except ValueError as exc:  # no mapping rule applies, or an unreadable certificate
            log.info("closing %s on %s: its certificate gives no principal: %s", self.peer, self.listener, exc)
            self.closed = True
            transport.close()
            return False
        return True

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        assert self._loop is not None
        now = self._loop.time()
        self.last_active = now
        if self._waiting_size:
            # The transport was still delivering when reading paused: keep it with the rest.
            assert self._pool is not None
            self._pool.take(len(data))
            self._stash += data
            return
        self._consume(memoryview(data), now)

    def _consume(self, view: memoryview, now: float) -> None:
        pool = self._pool
        while view:
            body = self._body
            if body is not None:
                need = self._body_size - len(body)
                body += view[:need]
                view = view[need:]
                if len(body) == self._body_size:
                    self._body = None
                    self._deliver(memoryview(body).toreadonly(), self._body_size if pool is not None else 0)
                continue
            head = self._head
            if not head and len(view) >= _SIZE_BYTES:
                size = int.from_bytes(view[:_SIZE_BYTES], "big", signed=True)
                view = view[_SIZE_BYTES:]
            else:
                take = _SIZE_BYTES - len(head)
                head += view[:take]
                view = view[take:]
                if len(head) < _SIZE_BYTES:
                    break
                size = int.from_bytes(head, "big", signed=True)
                head.clear()
            if size < 8 or size > self._max_frame:
                # A frame too small to hold a header, negative or beyond socket.request.max.bytes:
                # the stream can't be trusted any more, so close as Kafka does.
                log.debug("closing %s: invalid frame size %d (max %d)", self.peer, size, self._max_frame)
                self.close()
                return
            if len(view) >= size:
                # The whole frame is at hand (one copy): it counts in the pool but never waits,
                # since holding it back would save no memory.
                if pool is not None:
                    pool.take(size)
                self._deliver(memoryview(bytes(view[:size])), size if pool is not None else 0)
                view = view[size:]
                continue
            if pool is not None and not pool.try_reserve(size):
                self._wait_for_memory(size, bytes(view))
                return
            # Only what has arrived is buffered, never the declared size.
            self._body = bytearray(view)
            self._body_size = size
            break
        if self._head or self._body is not None:
            if self.frame_started is None and not self._paused:
                self.frame_started = now
        else:
            self.frame_started = None

    def _deliver(self, frame: memoryview, charged: int) -> None:
        self.frame_started = None
        self._queue.put_nowait((frame, charged))
        if self._queue.qsize() >= self._max_queued:
            self._pause("in-flight")

    def _wait_for_memory(self, size: int, rest: bytes) -> None:
        assert self._pool is not None
        self._waiting_size = size
        self._stash = rest
        self._pool.take(len(rest))  # read already: in memory, so counted
        self._pause("memory")
        self._pool.wait(size, self._memory_granted)

    def _memory_granted(self) -> None:
        # Called by the pool with the frame's size reserved for us; carry on in a callback of
        # our own, not inside whoever released the memory.
        assert self._loop is not None
        self._loop.call_soon(self._start_waiting_frame)

    def _start_waiting_frame(self) -> None:
        assert self._pool is not None
        size, self._waiting_size = self._waiting_size, 0
        stash, self._stash = self._stash, b""
        if self.closed:
            self._pool.release(size + len(stash))
            return
        self._body = bytearray()
        self._body_size = size
        self._resume("memory")
        assert self._loop is not None
        self._consume(memoryview(stash), self._loop.time())
        self._pool.release(len(stash))  # now covered by the reservation or by its own frames

    def _pause(self, reason: str) -> None:
        if not self._paused and self._transport is not None and not self.closed:
            self._transport.pause_reading()
        self._paused.add(reason)
        self.frame_started = None  # the broker holds the frame back, not the client

    def _resume(self, reason: str) -> None:
        if reason not in self._paused:
            return
        self._paused.discard(reason)
        if self._paused or self.closed:
            return
        if self._transport is not None:
            self._transport.resume_reading()
        if self._head or self._body is not None:
            assert self._loop is not None
            self.frame_started = self._loop.time()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._writable.set()
        self._queue.put_nowait(None)
        pool = self._pool
        if pool is not None:
            if self._waiting_size and pool.cancel(self._memory_granted):
                # Not granted yet (otherwise _start_waiting_frame releases it all).
                pool.release(len(self._stash))
                self._waiting_size, self._stash = 0, b""
            if self._body is not None:
                pool.release(self._body_size)
        self._body = None
        self._on_close(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        if self._loop is not None:
            self.last_active = self._loop.time()  # the client is reading what was sent
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

    def expire(self) -> None:
        """Close for a limit (idle, frame deadline): politely, unless responses are stuck in the
        write buffer of a client that does not read them, which would keep it open forever."""
        if self._transport is not None and self._transport.get_write_buffer_size() > 0:
            self.abort()
        else:
            self.close()

    def _release(self, charged: int) -> None:
        if charged and self._pool is not None:
            self._pool.release(charged)

    async def _work(self) -> None:
        try:
            while True:
                item = await self._queue.get()
                if item is None or self.closed:
                    if item is not None:
                        self._release(item[1])
                    return
                frame, charged = item
                if "in-flight" in self._paused and self._queue.qsize() < self._max_queued // 2:
                    self._resume("in-flight")
                self._handling = True
                try:
                    response = await self._handler(frame, self)
                finally:
                    self._handling = False
                    del frame
                    self._release(charged)
                if response is None:
                    continue
                await self._send(response.chunks)
                if self._loop is not None:
                    self.last_active = self._loop.time()
                if response.close_after:
                    self.close()
                    return
                if response.throttle_ms > 0:
                    await self._mute(response.throttle_ms)
        except (ConnectionError, TimeoutError) as exc:
            log.info("connection %s: %s", self.peer, exc)
            self.close()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s: unexpected error, closing", self.peer)
            self.close()
        finally:
            while not self._queue.empty():
                left = self._queue.get_nowait()
                if left is not None:
                    self._release(left[1])

    async def _mute(self, throttle_ms: int) -> None:
        """Read nothing, and handle nothing already read, for the throttle time."""
        self._pause("throttled")
        try:
            await asyncio.sleep(throttle_ms / 1000.0)
        finally:
            self._resume("throttled")
            if self._loop is not None:
                self.last_active = self._loop.time()  # the broker, not the client, was silent

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
        if self.tls:
            await self._send_region_copied(transport, region)
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
            # The socket buffer filled up (or the file ended early): finish as the socket drains.
            self.sending_file = True  # we write to the socket ourselves: SocketServer must not close it
            try:
                await _sendfile_when_writable(fd, region, sent)
            finally:
                self.sending_file = False

    async def _send_region_copied(self, transport: asyncio.Transport, region: FileRegion) -> None:
        """TLS: the record bytes are read (from the page cache) and encrypted by the transport,
        a slice at a time, waiting for the client to read before the next."""
        fd = region.fileno()
        position, end = region.position, region.position + region.size
        while position < end:
            data = os.pread(fd, min(TLS_READ_BYTES, end - position), position)
            if not data:
                raise ConnectionError("file region shorter than expected (segment truncated?)")
            transport.write(data)
            position += len(data)
            if not self._writable.is_set():
                await self._writable.wait()
            if self.closed:
                return
