"""The broker's client quota sensors: what each request counts against, and for how long it is
throttled (Kafka's ClientQuotaManager and ClientRequestQuotaManager).

Three kinds, each with its own quota key: Produce counts the request's bytes against
``producer_byte_rate``, a consumer's Fetch the response's bytes against ``consumer_byte_rate``,
and every client request its handling time against ``request_percentage`` (percent of one
request thread: a request that keeps the broker busy 10 ms counts 1 percent-second). A kind is
counted only while some entity has its key set, as in Kafka.

Each sensor (one per kind and metric tags, see ``resolution.py``) is a ``SampledRate``; a value
that takes the rate above the bound is still counted, and the answer is how long the client must
wait (request time throttles at most one window, as Kafka bounds it). Sensors idle for an hour
are dropped (Kafka expires inactive quota sensors after an hour). The sensors' rates, bounds and
throttle totals are read by ``metrics.py`` at scrape time.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from ..clock import now_ms
from ..metrics import QuotaStats
from .rate import SampledRate, WindowConfig, throttle_time_ms
from .resolution import Entity, Tags, bound_for_tags, resolve

SENSOR_EXPIRY_MS = 3_600_000
_SWEEP_EVERY = 1024  # recordings between sweeps of idle sensors


class QuotaKind(enum.Enum):
    PRODUCE = ("produce", "producer_byte_rate")
    FETCH = ("fetch", "consumer_byte_rate")
    REQUEST = ("request", "request_percentage")

    def __init__(self, label: str, key: str) -> None:
        self.label = label
        self.key = key


@dataclass
class Sensor:
    rate: SampledRate
    bound: float | None
    last_ms: int
    throttle_ms_total: int = 0
    throttled: int = 0
    value_total: float = 0.0



@dataclass
class ClientQuotaManager:
    config: WindowConfig = field(default_factory=WindowConfig)
    clock: Callable[[], int] = now_ms
    _quotas: Mapping[Entity, Mapping[str, float]] = field(default_factory=dict)
    _enabled: frozenset[QuotaKind] = frozenset()
    _sensors: dict[tuple[QuotaKind, Tags], Sensor] = field(default_factory=dict)
    _recorded: int = 0

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        """New quotas from the metadata image: bounds change at once, rates carry on (a
        changed quota may regroup clients under other tags, whose sensors start afresh)."""
        self._quotas = quotas
        self._enabled = frozenset(kind for kind in QuotaKind
                                  if any(kind.key in values for values in quotas.values()))
        for (kind, tags), sensor in self._sensors.items():
            sensor.bound = bound_for_tags(quotas, kind.key, tags)

    @property
    def active(self) -> bool:
        """Some quota is set: requests need counting at all."""
        return bool(self._enabled)

    def enabled(self, kind: QuotaKind) -> bool:
        return kind in self._enabled

    def _sensor(self, kind: QuotaKind, user: str, client_id: str, now: int) -> Sensor:
        bound, tags = resolve(self._quotas, kind.key, user, client_id)
        sensor = self._sensors.get((kind, tags))
        if sensor is None:
            sensor = self._sensors[(kind, tags)] = Sensor(SampledRate(self.config), bound, now)
        sensor.bound = bound  # the quota may have changed since; the rate carries on
        return sensor

    def record(self, kind: QuotaKind, user: str, client_id: str, value: float, now: int | None = None) -> int:
        """Count ``value`` for this client; the throttle time in milliseconds (0 within quota)."""
        if kind not in self._enabled:
            return 0
        now = self.clock() if now is None else now
        self._maybe_sweep(now)
        sensor = self._sensor(kind, user, client_id, now)
        sensor.last_ms = now
        sensor.value_total += value
        sensor.rate.record(value, now)
        if sensor.bound is None:
            return 0
        rate = sensor.rate.measure(now)
        throttle = throttle_time_ms(rate, sensor.bound, sensor.rate.window_size_ms(now))
        if kind is QuotaKind.REQUEST:
            throttle = min(throttle, self.config.window_ms)
        return throttle

    def max_value_in_window(self, kind: QuotaKind, user: str, client_id: str) -> float | None:
        """What the quota lets through over the windows a young rate divides by (Kafka caps a
        consumer's fetch to it, so one response can always be answered); None without a quota."""
        if kind not in self._enabled:
            return None
        bound, _tags = resolve(self._quotas, kind.key, user, client_id)
        if bound is None:
            return None
        return bound * (self.config.samples - 1) * self.config.window_ms / 1000.0

    def unrecord(self, kind: QuotaKind, user: str, client_id: str, value: float, now: int | None = None) -> None:
        """Take back a value counted for a response that was not sent (a throttled fetch is
        answered empty, as Kafka answers it)."""
        if kind in self._enabled:
            now = self.clock() if now is None else now
            sensor = self._sensor(kind, user, client_id, now)
            sensor.value_total -= value
            sensor.rate.record(-value, now)

    def throttled(self, kind: QuotaKind, user: str, client_id: str, throttle_ms: int) -> None:
        """The client was throttled for ``throttle_ms`` on this kind's account (metrics)."""
        sensor = self._sensors.get((kind, resolve(self._quotas, kind.key, user, client_id)[1]))
        if sensor is not None:
            sensor.throttle_ms_total += throttle_ms
            sensor.throttled += 1

    def _maybe_sweep(self, now: int) -> None:
        self._recorded += 1
        if self._recorded % _SWEEP_EVERY:
            return
        for key in [k for k, s in self._sensors.items() if now - s.last_ms > SENSOR_EXPIRY_MS]:
            del self._sensors[key]

    def stats(self) -> Iterator[QuotaStats]:
        now = self.clock()
        for (kind, (user, client_id)), sensor in list(self._sensors.items()):
            yield (kind.label, user, client_id, sensor.rate.measure(now),
                   math.nan if sensor.bound is None else sensor.bound,
                   sensor.throttle_ms_total, sensor.throttled, sensor.value_total)
