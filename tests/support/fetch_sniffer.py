"""A TCP proxy on loopback that forwards a broker's traffic unchanged and notes every Fetch.

Clients reach the broker through it when the broker advertises the proxy's address (set
``advertised.listeners`` to ``sniffer.address``), so every connection a client makes after
bootstrap passes here too. For each Fetch request it records the fetch session id and epoch and
how many partitions the request names; for each Fetch response, the top-level error, the session
id and how many partitions it carries. That is what a test needs to see KIP-227 at work between
a real client and a real broker (Riverlog or Kafka) without trusting either side's own account.

Fetch bodies are decoded with Riverlog's codec (``riverlog.protocol.messages.fetch``), which the
unit tier checks against other clients' codecs; nothing here is on the broker's path.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field

from riverlog.protocol.header import decode_request_header, decode_response_header
from riverlog.protocol.messages import fetch
from riverlog.protocol.primitives import Reader

FETCH = 1


@dataclass(frozen=True)
class FetchSeen:
    """One Fetch request and its response, as they crossed the wire."""

    client_id: str | None
    version: int
    session_id: int
    session_epoch: int
    partitions: int  # named in the request
    forgotten: int
    error_code: int = -1  # the response's; -1 until it arrives
    response_session_id: int = 0
    response_partitions: int = 0


@dataclass
class FetchSniffer:
    target_host: str
    target_port: int
    seen: list[FetchSeen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket | None = None
    _closing: bool = False
    _sockets: set[socket.socket] = field(default_factory=set)

    def start(self) -> FetchSniffer:
        self._listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept_loop, daemon=True, name="fetch-sniffer").start()
        return self

    @property
    def port(self) -> int:
        assert self._listener is not None
        return int(self._listener.getsockname()[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def fetches(self) -> list[FetchSeen]:
        with self._lock:
            return [f for f in self.seen if f.error_code >= 0]

    def close(self) -> None:
        self._closing = True
        if self._listener is not None:
            self._listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.close()

    # --- forwarding -----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection((self.target_host, self.target_port), timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self._sockets |= {client, server}
            pending: dict[int, tuple[int, FetchSeen]] = {}  # correlation id -> (version, request)
            threading.Thread(target=self._pump, args=(client, server, pending, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, pending, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pending: dict[int, tuple[int, FetchSeen]],
              requests: bool) -> None:
        try:
            while True:
                head = _recv_exact(src, 4)
                frame = _recv_exact(src, struct.unpack(">i", head)[0])
                # Note before forwarding: the answer may come back before this thread runs again.
                if requests:
                    self._note_request(frame, pending)
                else:
                    self._note_response(frame, pending)
                dst.sendall(head + frame)
        except (OSError, ConnectionError):
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
                self._sockets.discard(sock)

    def _note_request(self, frame: bytes, pending: dict[int, tuple[int, FetchSeen]]) -> None:
        api_key, version, correlation_id = struct.unpack(">hhi", frame[:8])
        if api_key != FETCH or not fetch.REQUEST.supports(version):
            return
        reader = Reader(frame)
        header = decode_request_header(reader, fetch.REQUEST.is_flexible(version))
        body = fetch.REQUEST.decode(reader, version)
        seen = FetchSeen(header.client_id, version, body.get("session_id", 0), body.get("session_epoch", -1),
                         sum(len(t["partitions"]) for t in body["topics"]),
                         sum(len(t["partitions"]) for t in body.get("forgotten_topics_data") or []))
        pending[correlation_id] = (version, seen)

    def _note_response(self, frame: bytes, pending: dict[int, tuple[int, FetchSeen]]) -> None:
        correlation_id = struct.unpack(">i", frame[:4])[0]
        entry = pending.pop(correlation_id, None)
        if entry is None:
            return
        version, request = entry
        reader = Reader(frame)
        decode_response_header(reader, fetch.RESPONSE.is_flexible(version))
        body = fetch.RESPONSE.decode(reader, version)
        done = FetchSeen(request.client_id, version, request.session_id, request.session_epoch, request.partitions,
                         request.forgotten, body["error_code"], body.get("session_id", 0),
                         sum(len(t["partitions"]) for t in body["responses"]))
        with self._lock:
            self.seen.append(done)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)
