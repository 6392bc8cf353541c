"""The listeners of one node and the connections they accept, opened and shut down in one place.

Brokers and dedicated controllers both serve the Kafka protocol on TCP listeners; this class is
the one owner of those sockets. It opens listeners (all of a node's, or some first: a voter
serves its CONTROLLER listener before it joins the quorum, and client listeners only once its
logs are loaded), counts connections for the metrics, and closes everything either politely
(``close``: queued responses still go out) or as kill -9 would (``abort``: sockets dropped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from ..config import Listener
from .connection import Connection, Handler

# Kafka's default for the accept queue (socket.listen.backlog.size is not configurable here).
LISTEN_BACKLOG = 1024


class SocketServer:
    def __init__(self, handler: Handler, *, max_frame: int, max_queued: int,
                 on_count: Callable[[int], None] | None = None) -> None:
        self._handler = handler
        self._max_frame = max_frame
        self._max_queued = max_queued
        self._on_count = on_count
        self.connections: set[Connection] = set()
        self._servers: list[asyncio.Server] = []

    async def listen(self, listeners: Iterable[Listener]) -> None:
        loop = asyncio.get_running_loop()
        for listener in listeners:
            server = await loop.create_server(
                self._new_connection,
                host=listener.host or None,  # empty host: every interface, as Kafka's listeners
                port=listener.port,
                reuse_address=True,
                backlog=LISTEN_BACKLOG,
            )
            self._servers.append(server)

    def _new_connection(self) -> Connection:
        conn = Connection(self._handler, max_frame=self._max_frame, max_queued=self._max_queued,
                          on_close=self._connection_closed)
        self.connections.add(conn)
        self._count()
        return conn

    def _connection_closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self._count()

    def _count(self) -> None:
        if self._on_count is not None:
            self._on_count(len(self.connections))

    def _stop_accepting(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()

    def close(self) -> None:
        """Stop accepting and close every connection (what is already buffered still goes out)."""
        self._stop_accepting()
        for conn in list(self.connections):
            conn.close()

    def abort(self) -> None:
        """Stop accepting and drop every connection at once (a crash, for fault tests)."""
        self._stop_accepting()
        for conn in list(self.connections):
            conn.abort()
