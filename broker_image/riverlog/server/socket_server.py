"""The listeners of one node and the connections they accept, opened and shut down in one place.

Brokers and dedicated controllers both serve the Kafka protocol on TCP listeners; this class is
the one owner of those sockets. It opens listeners (all of a node's, or some first: a voter
serves its CONTROLLER listener before it joins the quorum, and client listeners only once its
logs are loaded), counts connections for the metrics, and closes everything either politely
(``close``: queued responses still go out) or as kill -9 would (``abort``: sockets dropped).

It also enforces the connection limits (``limits.py``), as Kafka's SocketServer does:

- ``max.connections``: at the limit the acceptor waits for a connection to close before it
  accepts the next one (Kafka blocks its acceptor the same way), so an excess client connects
  (the kernel's backlog completes the handshake) but gets no answer until a slot frees. When a
  listener group has several listeners, its ``inter.broker.listener.name`` listener is exempt and
  the least recently active connection of another listener is closed to make room.
- ``max.connection.creation.rate``: accepts are held back to that many per second (the
  inter-broker listener of a group of several is exempt), as Kafka's acceptor delays them.
- ``max.connections.per.ip`` and its overrides: the excess connection is accepted and closed.
- ``connections.max.idle.ms``: a connection that has neither sent bytes nor been sent a response
  for that long, and waits for nothing from the broker, is closed.
- ``socket.request.frame.timeout.ms`` (Riverlog's): a request frame must arrive completely within
  that time of its first byte, or the connection is closed.
- ``queued.max.request.bytes``: the memory pool for request bytes (``memory_pool.py``).

Each ``listen`` call is one group with its own counts and pool, like Kafka's separate socket
servers for a combined node's broker and controller: a broker listens on its CONTROLLER listener
and on its client listeners in two calls.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Callable, Iterable

from ..config import BrokerConfig, Listener
from ..metrics import Metrics
from ..security.authenticator import SaslSession, SaslSettings
from ..security.jwks import JwksCache
from ..security.jwks_refresher import JwksRefresher
from ..security.sasl.scram import ScramCredential
from ..security.sasl_config import sasl_settings
from ..security.tls import TlsContextSource, principal_rules, tls_sources
from .connection import Connection, Handler
from .limits import INT_MAX, ConnectionLimits, CreationRate, ip_key
from .memory_pool import MemoryPool

log = logging.getLogger(__name__)

# Kafka's default for the accept queue (socket.listen.backlog.size is not configurable here).
LISTEN_BACKLOG = 1024
# accept() failures that mean "out of descriptors or memory": wait, as asyncio's own server does.
_ACCEPT_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
# A TLS client must finish its handshake within this (Kafka leaves it to connections.max.idle.ms;
# a shorter bound frees the slot of a client that connected and never spoke).
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class _Group:
    """The listeners of one ``listen`` call: their connection counts, rate and memory pool."""

    def __init__(self, limits: ConnectionLimits, names: set[str], now: float) -> None:
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.connections: set[Connection] = set()
        self.pool = MemoryPool(limits.queued_max_request_bytes) if limits.queued_max_request_bytes > 0 else None
        rate = limits.max_connection_creation_rate
        self.rate = CreationRate(rate, now) if rate < INT_MAX else None
        # Kafka's "protected" listener: the inter-broker one, when the group has others too.
        inter_broker = limits.inter_broker_listener
        self.protected = inter_broker if len(names) > 1 and inter_broker in names else None
        self.slot_freed = asyncio.Event()


class SocketServer:
    def __init__(self, handler: Handler, *, max_frame: int, max_queued: int,
                 on_count: Callable[[int], None] | None = None,
                 config: BrokerConfig | None = None, metrics: Metrics | None = None,
                 scram_credential: Callable[[str, str], ScramCredential | None] | None = None) -> None:
        self._handler = handler
        self._max_frame = max_frame
        self._max_queued = max_queued
        self._on_count = on_count
        self.limits = ConnectionLimits.from_config(config) if config is not None else ConnectionLimits()
        self._metrics = metrics
        self.connections: set[Connection] = set()
        self._groups: list[_Group] = []
        self._group_of: dict[Connection, _Group] = {}
        self._accepting: list[asyncio.Task[None]] = []
        self._sweeper: asyncio.Task[None] | None = None
        # TLS listeners: their current server contexts and certificate principal mapping rules.
        self.tls: dict[str, TlsContextSource] = tls_sources(config) if config is not None else {}
        self._principal_rules = {name: principal_rules(config, name) for name in self.tls} if config else {}
        self._tls_reload_s = (config.get_int("ssl.file.reload.interval.ms") / 1000) if config else 30.0
        self._tls_reloader: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()
        # SASL listeners: what each enables; SCRAM credentials come from the metadata image.
        self.sasl: dict[str, SaslSettings] = sasl_settings(config) if config is not None else {}
        self._scram_credential = scram_credential or (lambda _user, _mechanism: None)
        # OAUTHBEARER listeners: their JWKS keys, fetched and kept current (security/jwks_refresher.py).
        self._jwks = {name: JwksCache(s.oauthbearer.jwks_url) for name, s in self.sasl.items() if s.oauthbearer}
        self._jwks_refreshers: dict[str, JwksRefresher] = {}
        if metrics is not None:
            metrics.queued_request_bytes.set_function(
                lambda: sum(g.pool.used for g in self._groups if g.pool is not None))

    async def listen(self, listeners: Iterable[Listener]) -> None:
        loop = asyncio.get_running_loop()
        listeners = list(listeners)
        for listener in listeners:
            await self._start_jwks_refresher(listener.name)
        opened: list[tuple[socket.socket, str]] = []
        try:
            for listener in listeners:
                # Empty host: every interface, as Kafka's listeners.
                opened += [(sock, listener.name) for sock in _bind(listener.host or None, listener.port)]
        except BaseException:
            for sock, _ in opened:
                sock.close()
            raise
        group = _Group(self.limits, {lst.name for lst in listeners}, loop.time())
        self._groups.append(group)
        for sock, name in opened:
            self._accepting.append(loop.create_task(self._accept_loop(sock, name, group)))
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep())
        if self.tls and self._tls_reloader is None:
            self._tls_reloader = loop.create_task(self._reload_tls())

    async def _start_jwks_refresher(self, listener: str) -> None:
        # Kafka fetches the keys before serving; so does this, once per listener.
        settings = self.sasl.get(listener)
        if settings is None or settings.oauthbearer is None or listener in self._jwks_refreshers:
            return
        refresher = JwksRefresher(self._jwks[listener], settings.oauthbearer, listener)
        self._jwks_refreshers[listener] = refresher
        await refresher.start()

    # Accepting ---------------------------------------------------------------------------

    async def _accept_loop(self, sock: socket.socket, listener: str, group: _Group) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    client, address = await loop.sock_accept(sock)
                except OSError as exc:
                    if exc.errno in (errno.EBADF, errno.EINVAL, errno.ENOTSOCK):
                        raise  # the listening socket itself is gone
                    if exc.errno in _ACCEPT_RESOURCE_ERRORS:
                        log.error("listener %s cannot accept (%s); retrying in 1 s", listener, exc)
                        await asyncio.sleep(1.0)
                    continue  # that one connection failed (ECONNABORTED, EPROTO, ...)
                try:
                    await self._admit(client, address, listener, group)
                except asyncio.CancelledError:
                    client.close()
                    raise
                except Exception as exc:  # this connection only (it may have gone already)
                    client.close()  # a no-op if its transport took the socket over
                    log.debug("listener %s: dropped a connection from %s: %r", listener, address, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("listener %s: accepting stopped", listener)
        finally:
            sock.close()

    async def _admit(self, client: socket.socket, address: object, listener: str, group: _Group) -> None:
        loop = asyncio.get_running_loop()
        limits = self.limits
        protected = listener == group.protected
        # Kafka's order: the broker-wide slot and rate first (the acceptor waits, holding this one
        # accepted socket), then the per-IP count.
        if not protected:
            if group.rate is not None:
                delay = group.rate.delay(loop.time())
                if delay > 0:
                    self._count_metric("delayed", "max_connection_creation_rate")
                    await asyncio.sleep(delay)
            if group.total >= limits.max_connections:
                self._count_metric("delayed", "max_connections")
                while group.total >= limits.max_connections:
                    group.slot_freed.clear()
                    await group.slot_freed.wait()
        host = address[0] if isinstance(address, tuple) else str(address)
        ip = ip_key(host)
        if group.per_ip.get(ip, 0) >= limits.max_for_ip(ip):
            log.info("refused connection from %s on %s: %d connections from it already", ip, listener,
                     group.per_ip.get(ip, 0))
            self._count_metric("refused", "max_connections_per_ip")
            client.close()
            return
        if protected and group.total >= limits.max_connections:
            self._close_least_recently_active(group, listener)
        made: list[Connection] = []

        def factory() -> Connection:
            sasl = self.sasl.get(listener)
            conn = Connection(self._handler, max_frame=self._max_frame, max_queued=self._max_queued,
                              on_close=self._connection_closed, pool=group.pool, listener=listener, ip=ip,
                              tls=listener in self.tls, principal_rules=self._principal_rules.get(listener),
                              sasl=SaslSession(sasl, self._scram_credential, self._jwks.get(listener))
                              if sasl is not None else None)
            made.append(conn)
            self.connections.add(conn)
            self._group_of[conn] = group
            group.connections.add(conn)
            group.total += 1
            group.per_ip[ip] = group.per_ip.get(ip, 0) + 1
            self._count()
            return conn

        tls = self.tls.get(listener)
        if tls is None:
            try:
                await loop.connect_accepted_socket(factory, client)
            except BaseException:
                for conn in made:
                    self._connection_closed(conn)
                raise
            return
        # The TLS handshake runs beside the accept loop: a client that connects and says
        # nothing must not hold up everyone else's accept until its handshake times out.
        handshake = loop.create_task(self._tls_handshake(factory, client, tls.context, listener, made))
        self._handshakes.add(handshake)
        handshake.add_done_callback(self._handshakes.discard)

    async def _tls_handshake(self, factory: Callable[[], Connection], client: socket.socket,
                             context: ssl.SSLContext, listener: str, made: list[Connection]) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(factory, client, ssl=context,
                                               ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except asyncio.CancelledError:
            client.close()
            for conn in made:
                self._connection_closed(conn)
            raise
        except Exception as exc:
            # Plaintext spoken to a TLS port, an untrusted or expired certificate, a timeout:
            # the connection is closed, the broker says why at INFO and counts it.
            client.close()
            for conn in made:
                self._connection_closed(conn)
            log.info("listener %s: TLS handshake with %s failed: %s", listener,
                     made[0].ip if made else "a client", exc)
            self._count_metric("refused", "tls_handshake")

    async def _reload_tls(self) -> None:
        """Pick up rotated certificates (see security/tls.py)."""
        while True:
            await asyncio.sleep(self._tls_reload_s)
            for source in self.tls.values():
                try:
                    source.check_for_changes()
                except Exception:
                    log.exception("listener %s: checking the TLS files failed", source.settings.listener)

    def _close_least_recently_active(self, group: _Group, listener: str) -> None:
        others = [c for c in group.connections
                  if c.listener != listener and c.made and not c.closed and not c.sending_file]
        if others:
            victim = min(others, key=lambda c: c.last_active)
            log.info("closing %s on %s: max.connections reached and %s is the inter-broker listener",
                     victim.peer, victim.listener, listener)
            self._count_metric("closed", "max_connections")
            victim.expire()

    def _connection_closed(self, conn: Connection) -> None:
        group = self._group_of.pop(conn, None)
        if group is None:
            return
        self.connections.discard(conn)
        group.connections.discard(conn)
        group.total -= 1
        left = group.per_ip.get(conn.ip, 1) - 1
        if left > 0:
            group.per_ip[conn.ip] = left
        else:
            group.per_ip.pop(conn.ip, None)
        group.slot_freed.set()
        self._count()

    def _count(self) -> None:
        if self._on_count is not None:
            self._on_count(len(self.connections))

    def _count_metric(self, kind: str, reason: str) -> None:
        if self._metrics is None:
            return
        counter = {"refused": self._metrics.connections_refused, "delayed": self._metrics.connections_delayed,
                   "closed": self._metrics.connections_closed}[kind]
        counter.labels(reason=reason).inc()

    # Idle connections and frame deadlines ---------------------------------------------------

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        limits = self.limits
        idle_s = limits.connections_max_idle_ms / 1000 if limits.connections_max_idle_ms > 0 else None
        frame_s = limits.request_frame_timeout_ms / 1000
        interval = limits.check_interval_s()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self.connections):
                if conn.closed or not conn.made or conn.sending_file:  # sendfile: checked once it is done
                    continue
                started = conn.frame_started
                if started is not None and now - started >= frame_s:
                    log.info("closing %s: a request frame took more than socket.request.frame.timeout.ms=%d "
                             "to arrive", conn.peer, limits.request_frame_timeout_ms)
                    self._count_metric("closed", "request_frame_timeout")
                    conn.expire()
                elif idle_s is not None and not conn.busy and now - conn.last_active > idle_s:
                    log.debug("closing %s: idle for more than connections.max.idle.ms=%d", conn.peer,
                              limits.connections_max_idle_ms)
                    self._count_metric("closed", "idle")
                    conn.expire()

    # Shutting down -------------------------------------------------------------------------

    def _stop_accepting(self) -> None:
        # The accept loops close their listening sockets as they end (once their pending accept is
        # cancelled, so no descriptor is closed under the event loop's feet).
        tasks, self._accepting = self._accepting, []
        for task in tasks:
            task.cancel()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._tls_reloader is not None:
            self._tls_reloader.cancel()
            self._tls_reloader = None
        for handshake in list(self._handshakes):
            handshake.cancel()
        for refresher in self._jwks_refreshers.values():
            refresher.stop()

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


def _bind(host: str | None, port: int) -> list[socket.socket]:
    """Listening sockets for host:port, one per address it resolves to (None: every interface,
    IPv4 and IPv6), as ``loop.create_server`` makes them."""
    infos = socket.getaddrinfo(host, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            if family == socket.AF_INET6 and not socket.has_ipv6:
                continue
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address {address!r}: "
                              f"{exc.strerror.lower() if exc.strerror else exc}") from None
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
