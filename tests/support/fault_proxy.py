"""A fault-injecting TCP proxy for network-partition tests between brokers on loopback.

Each ``Link`` listens on its own loopback port and forwards to one target. The test flips its
mode while traffic flows:

- ``pass``: bytes go through unchanged (optionally delayed by ``delay_s``);
- ``blackhole``: connections stay open but nothing is forwarded in either direction, like a
  partition where packets are silently dropped (the peers' timeouts must notice);
- ``reject``: existing connections are reset and new ones are closed at once, like a crashed or
  firewalled host that answers with RST.

Everything runs on the caller's asyncio loop (``start``/``stop`` are coroutines), so it can sit
between in-process brokers as well as between broker processes. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

MODES = ("pass", "blackhole", "reject")


@dataclass
class LinkStats:
    connections: int = 0
    bytes_forwarded: int = 0
    bytes_dropped: int = 0


@dataclass
class Link:
    target_host: str
    target_port: int
    mode: str = "pass"
    delay_s: float = 0.0
    stats: LinkStats = field(default_factory=LinkStats)
    port: int = 0
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> Link:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self._reset_all()

    def set_mode(self, mode: str, *, delay_s: float | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        if delay_s is not None:
            self.delay_s = delay_s
        if mode == "reject":
            self._reset_all()

    def _reset_all(self) -> None:
        for writer in list(self._writers):
            transport = writer.transport
            if isinstance(transport, asyncio.WriteTransport):
                transport.abort()  # RST, not a polite FIN
        self._writers.clear()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.mode == "reject":
            client_writer.transport.abort()
            return
        try:
            target_reader, target_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            client_writer.transport.abort()
            return
        self.stats.connections += 1
        self._writers.update((client_writer, target_writer))
        pumps = [
            asyncio.ensure_future(self._pump(client_reader, target_writer)),
            asyncio.ensure_future(self._pump(target_reader, client_writer)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_writer, target_writer):
                self._writers.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            if self.mode == "blackhole":
                self.stats.bytes_dropped += len(data)
                continue
            if self.mode == "reject":
                return
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            writer.write(data)
            await writer.drain()
            self.stats.bytes_forwarded += len(data)
