"""Connection limits, read from the broker config with Kafka's names and defaults.

``max.connections``, ``max.connections.per.ip`` (and ``...overrides``),
``max.connection.creation.rate``, ``connections.max.idle.ms``, ``queued.max.request.bytes``, and
Riverlog's own ``socket.request.frame.timeout.ms``. ``SocketServer`` applies them; this module
holds the values and the small pieces of arithmetic (per-IP limits, the creation rate).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..config import BrokerConfig, ConfigError

INT_MAX = 2**31 - 1  # Kafka's Integer.MAX_VALUE: "no limit"
# Kafka caps a creation-rate delay at its quota window (quota.window.size.seconds, 1 s).
MAX_RATE_DELAY_S = 1.0


def ip_key(host: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 addresses count as their IPv4 address."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Host names to addresses (Kafka resolves them once, when the config is read)."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConfigError(f"max.connections.per.ip.overrides names {host!r}, "
                              f"which does not resolve: {exc}") from None
        for info in infos:
            out[ip_key(str(info[4][0]))] = count
    return out


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # address (ip_key) -> limit
    max_connection_creation_rate: int = INT_MAX  # per second
    connections_max_idle_ms: int = 600_000  # negative: never
    request_frame_timeout_ms: int = 30_000
    queued_max_request_bytes: int = -1  # <= 0: no pool
    inter_broker_listener: str = "PLAINTEXT"

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionLimits:
        return cls(
            max_connections=config.get_int("max.connections"),
            max_connections_per_ip=config.get_int("max.connections.per.ip"),
            per_ip_overrides=resolve_overrides(config.max_connections_per_ip_overrides()),
            max_connection_creation_rate=config.get_int("max.connection.creation.rate"),
            connections_max_idle_ms=config.get_int("connections.max.idle.ms"),
            request_frame_timeout_ms=config.get_int("socket.request.frame.timeout.ms"),
            queued_max_request_bytes=config.get_int("queued.max.request.bytes"),
            inter_broker_listener=config.inter_broker_listener(),
        )

    def max_for_ip(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def check_interval_s(self) -> float:
        """How often idle connections and frame deadlines are checked: a tenth of the shorter
        timeout, between 50 ms and 1 s."""
        timeouts = [self.request_frame_timeout_ms]
        if self.connections_max_idle_ms > 0:
            timeouts.append(self.connections_max_idle_ms)
        return min(1.0, max(0.05, min(timeouts) / 10_000))


class CreationRate:
    """``max.connection.creation.rate``: a token bucket holding one second's worth of
    connections. ``delay`` records a new connection and says how long to hold its accept back
    (at most 1 s, Kafka's cap; with a rate of 0 every connection waits that second)."""

    def __init__(self, per_second: int, now: float) -> None:
        self.per_second = per_second
        self._tokens = float(per_second)
        self._stamp = now

    def delay(self, now: float) -> float:
        rate = self.per_second
        if rate <= 0:
            return MAX_RATE_DELAY_S
        self._tokens = min(float(rate), self._tokens + (now - self._stamp) * rate)
        self._stamp = now
        self._tokens = max(self._tokens - 1.0, -rate * MAX_RATE_DELAY_S)
        return 0.0 if self._tokens >= 0 else min(MAX_RATE_DELAY_S, -self._tokens / rate)
