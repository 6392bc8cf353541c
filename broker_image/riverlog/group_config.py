"""Group-level configs (config resource type GROUP, 32): Kafka 4.3's names, types, defaults and
validation, and the values a group runs with.

An admin sets them per group with IncrementalAlterConfigs (``kafka-configs.sh --entity-type
groups``); they live in the metadata log as ConfigRecords of resource type 32, so every broker's
image carries them. Each one's default is its broker synonym (``group.share.record.lock.duration.ms``
for ``share.record.lock.duration.ms``), and its bounds are the broker's min/max settings, as in
Kafka's GroupConfig.

Riverlog honours the consumer-group and share-group session/heartbeat settings and the
share-partition ones (lock duration, delivery count limit, record locks, auto offset reset,
isolation level). The rest are described with their defaults; setting one is refused with
INVALID_CONFIG unless the value is what Riverlog does anyway
(``share.renew.acknowledge.enable=true``), since accepting a setting that changes nothing would
mislead. Riverlog has no streams groups, and computes assignments at each heartbeat (no
assignment interval).

Pure: the broker's settings come in as ``limits``, a mapping of broker property to value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .topic_config import ConfigType

GROUP_RESOURCE = 32


class InvalidGroupConfig(ValueError):
    """A group config change Kafka (or Riverlog) refuses: INVALID_CONFIG with this message."""


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    doc: str
    default: str  # Kafka's own default, used when no broker synonym is known
    synonym: str | None = None  # the broker property supplying the default
    at_least: int | None = None
    bounds: tuple[str, str] | None = None  # broker (min, max) properties bounding an override
    choices: tuple[str, ...] = ()
    # Values Riverlog can run with; None: every valid value.
    honoured: Callable[[str], bool] | None = None


def _never(_: str) -> bool:
    return False


_INT, _STR, _BOOL = ConfigType.INT, ConfigType.STRING, ConfigType.BOOLEAN

_DEFS = (
    GroupConfigDef("consumer.session.timeout.ms", _INT,
                   "The timeout to detect client failures when using the consumer group protocol.", "45000",
                   "group.consumer.session.timeout.ms", 1,
                   ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")),
    GroupConfigDef("consumer.heartbeat.interval.ms", _INT,
                   "The heartbeat interval given to the members of a consumer group.", "5000",
                   "group.consumer.heartbeat.interval.ms", 1,
                   ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")),
    GroupConfigDef("consumer.assignment.interval.ms", _INT,
                   "The interval between assignment updates for a consumer group.", "1000",
                   "group.consumer.assignment.interval.ms", 0,
                   ("group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms"),
                   honoured=_never),
    GroupConfigDef("share.session.timeout.ms", _INT,
                   "The timeout to detect client failures when using the share group protocol.", "45000",
                   "group.share.session.timeout.ms", 1,
                   ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")),
    GroupConfigDef("share.heartbeat.interval.ms", _INT,
                   "The heartbeat interval given to the members of a share group.", "5000",
                   "group.share.heartbeat.interval.ms", 1,
                   ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")),
    GroupConfigDef("share.record.lock.duration.ms", _INT,
                   "The record acquisition lock duration in milliseconds for share groups.", "30000",
                   "group.share.record.lock.duration.ms", 1000,
                   ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms")),
    GroupConfigDef("share.delivery.count.limit", _INT,
                   "The maximum number of delivery attempts for a record delivered to a share group.", "5",
                   "group.share.delivery.count.limit", 2,
                   ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit")),
    GroupConfigDef("share.partition.max.record.locks", _INT,
                   "Share-group record lock limit per share-partition.", "2000",
                   "group.share.partition.max.record.locks", 100,
                   ("group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks")),
    GroupConfigDef("share.auto.offset.reset", _STR,
                   "The strategy to initialize the share-partition start offset: earliest, latest or "
                   "by_duration:<ISO8601 duration>.", "latest"),
    GroupConfigDef("share.isolation.level", _STR,
                   "Controls how to read records written transactionally.", "read_uncommitted",
                   choices=("read_committed", "read_uncommitted")),
    GroupConfigDef("share.renew.acknowledge.enable", _BOOL,
                   "Whether the renew acknowledge type is enabled for the share group.", "true",
                   honoured=lambda v: v.strip().lower() == "true"),
    GroupConfigDef("share.assignment.interval.ms", _INT,
                   "The interval between assignment updates for a share group.", "1000",
                   "group.share.assignment.interval.ms", 0,
                   ("group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"),
                   honoured=_never),
    GroupConfigDef("streams.session.timeout.ms", _INT,
                   "The timeout to detect client failures when using the streams group protocol.", "45000",
                   "group.streams.session.timeout.ms", 1,
                   ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"), honoured=_never),
    GroupConfigDef("streams.heartbeat.interval.ms", _INT, "The heartbeat interval given to the members.", "5000",
                   "group.streams.heartbeat.interval.ms", 1,
                   ("group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
                   honoured=_never),
    GroupConfigDef("streams.num.standby.replicas", _INT, "The number of standby replicas for each task.", "0",
                   "group.streams.num.standby.replicas", 0, ("", "group.streams.max.standby.replicas"),
                   honoured=_never),
    GroupConfigDef("streams.initial.rebalance.delay.ms", _INT,
                   "The amount of time the group coordinator will wait for more streams clients to join a new "
                   "group before performing the first rebalance.", "3000",
                   "group.streams.initial.rebalance.delay.ms", 0, honoured=_never),
    GroupConfigDef("streams.assignment.interval.ms", _INT,
                   "The interval between assignment updates for a streams group.", "1000",
                   "group.streams.assignment.interval.ms", 0,
                   ("group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms"),
                   honoured=_never),
)
# Kafka's definition order: its describe lists them so, and its checks run so.
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in _DEFS}

# Kafka's defaults of the broker settings group configs depend on that Riverlog's broker does not
# define (it has no streams groups and no assignment intervals).
_KAFKA_BROKER_DEFAULTS = {
    "group.consumer.assignment.interval.ms": "1000",
    "group.consumer.min.assignment.interval.ms": "0",
    "group.consumer.max.assignment.interval.ms": "15000",
    "group.share.assignment.interval.ms": "1000",
    "group.share.min.assignment.interval.ms": "0",
    "group.share.max.assignment.interval.ms": "15000",
    "group.streams.session.timeout.ms": "45000",
    "group.streams.min.session.timeout.ms": "45000",
    "group.streams.max.session.timeout.ms": "60000",
    "group.streams.heartbeat.interval.ms": "5000",
    "group.streams.min.heartbeat.interval.ms": "5000",
    "group.streams.max.heartbeat.interval.ms": "15000",
    "group.streams.num.standby.replicas": "0",
    "group.streams.max.standby.replicas": "2",
    "group.streams.initial.rebalance.delay.ms": "3000",
    "group.streams.min.assignment.interval.ms": "0",
    "group.streams.max.assignment.interval.ms": "15000",
}


def limits_from(props: Mapping[str, str]) -> dict[str, str]:
    """The broker settings group configs depend on (synonyms and bounds), from broker ``props``."""
    keys = {k for d in _DEFS for k in (d.synonym, *(d.bounds or ())) if k}
    return {k: props.get(k, _KAFKA_BROKER_DEFAULTS.get(k, "")) for k in sorted(keys)}


def default_value(definition: GroupConfigDef, limits: Mapping[str, str]) -> str:
    if definition.synonym and limits.get(definition.synonym):
        return limits[definition.synonym]
    return definition.default


# --- validation, as Kafka's GroupConfig.validate ------------------------------------------------


def _invalid(name: str, value: str, why: str) -> InvalidGroupConfig:
    return InvalidGroupConfig(f"Invalid value {value} for configuration {name}: {why}")


def _parse(definition: GroupConfigDef, value: str) -> int | str | bool:
    """The value as Kafka's ConfigDef parses and checks it (type, lower bound, choices)."""
    name = definition.name
    if definition.type == _INT:
        text = value.strip()
        if not re.fullmatch(r"[+-]?\d+", text) or not -(2**31) <= int(text) < 2**31:
            raise _invalid(name, value, "Not a number of type INT")
        number = int(text)
        if definition.at_least is not None and number < definition.at_least:
            raise _invalid(name, value, f"Value must be at least {definition.at_least}")
        return number
    if definition.type == _BOOL:
        text = value.strip().lower()
        if text not in ("true", "false"):
            raise _invalid(name, value, "Expected value to be either true or false")
        return text == "true"
    if definition.choices and value not in definition.choices:
        raise _invalid(name, value, f"String must be one of: {', '.join(definition.choices)}")
    if name == "share.auto.offset.reset":
        try:
            parse_share_reset(value)
        except ValueError:
            raise _invalid(name, value, f"Invalid value `{value}` for configuration {name}. The value must be "
                                        "either 'earliest', 'latest' or of the format "
                                        "'by_duration:<PnDTnHnMn.nS>'.") from None
    return value


def validate(values: Mapping[str, str], limits: Mapping[str, str]) -> None:
    """Check a group's complete set of overrides ``values`` (after the change); raises
    InvalidGroupConfig with Kafka's message for the first problem, in Kafka's order: unknown
    names, then each value's type and lower bound, then the broker's bounds, then each session
    timeout against its heartbeat interval (overrides merged with the defaults). Last, Riverlog's
    own refusal of a setting it cannot honour."""
    for name in values:
        if name not in GROUP_CONFIGS:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
    parsed: dict[str, int | str | bool] = {}
    for name, definition in GROUP_CONFIGS.items():
        if name in values:
            parsed[name] = _parse(definition, values[name])
    for name, definition in GROUP_CONFIGS.items():
        value = parsed.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or definition.bounds is None:
            continue
        low, high = definition.bounds
        if low and value < int(limits[low]):
            raise InvalidGroupConfig(f"{name} must be greater than or equal to {low}")
        if high and value > int(limits[high]):
            raise InvalidGroupConfig(f"{name} must be less than or equal to {high}")
    for kind in ("consumer", "share", "streams"):
        session, interval = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if session not in values and interval not in values:
            continue
        if _merged_int(session, parsed, limits) <= _merged_int(interval, parsed, limits):
            raise InvalidGroupConfig(f"{session} must be greater than {interval}")
    for name, value in values.items():
        honoured = GROUP_CONFIGS[name].honoured
        if honoured is not None and not honoured(value):
            raise InvalidGroupConfig(f"Riverlog does not support group config {name}={value} yet")


def _merged_int(name: str, parsed: Mapping[str, int | str | bool], limits: Mapping[str, str]) -> int:
    value = parsed.get(name)
    if isinstance(value, int):
        return value
    return int(default_value(GROUP_CONFIGS[name], limits))


# --- the values a group runs with -------------------------------------------------------------


def effective_int(overrides: Mapping[str, str] | None, name: str, default: int, limits: Mapping[str, str]) -> int:
    """The group's value of int config ``name``: its override kept within the broker's current
    bounds (Kafka clamps too, since the bounds may have changed since it was set), else
    ``default`` (the broker's setting)."""
    raw = (overrides or {}).get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        return default
    bounds = GROUP_CONFIGS[name].bounds
    if bounds is not None:
        low, high = bounds
        if low and limits.get(low):
            value = max(value, int(limits[low]))
        if high and limits.get(high):
            value = min(value, int(limits[high]))
    return value


@dataclass(frozen=True)
class ShareReset:
    """A parsed ``share.auto.offset.reset``: ``earliest``, ``latest`` or ``by_duration`` (the
    share-partition starts at the first record no older than ``duration_ms``)."""

    kind: str
    duration_ms: int = 0


LATEST = ShareReset("latest")
EARLIEST = ShareReset("earliest")

# java.time.Duration.parse's format: [-+]P[nD][T[nH][nM][n[.f]S]], letters in either case.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_iso_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as Java's Duration.parse reads one; ValueError if
    it is not one."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    sign, days, t_part, hours, minutes, seconds, fraction = match.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    if t_part is not None and t_part.upper() == "T":
        raise ValueError(f"no time after T in {text!r}")
    ms = (int(days or 0) * 86_400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    secs = int(seconds or 0)
    frac_ms = int((fraction or "").ljust(3, "0")[:3])
    ms += secs * 1000 + (-frac_ms if seconds is not None and seconds.startswith("-") else frac_ms)
    return -ms if sign == "-" else ms


def parse_share_reset(value: str) -> ShareReset:
    """``share.auto.offset.reset`` as Kafka reads it (exact lower-case words); ValueError for
    anything else, ``none`` included, and for a negative duration."""
    if value in ("earliest", "latest"):
        return ShareReset(value)
    prefix = "by_duration:"
    if value.startswith(prefix):
        ms = parse_iso_duration_ms(value[len(prefix):])
        if ms < 0:
            raise ValueError("Negative duration is not supported in by_duration offset reset strategy.")
        return ShareReset("by_duration", ms)
    raise ValueError(f"Unknown share auto offset reset strategy: {value}")


def share_reset(overrides: Mapping[str, str] | None) -> ShareReset:
    """The group's reset strategy (latest unless overridden; a stored value that no longer
    parses falls back to latest rather than failing fetches)."""
    raw = (overrides or {}).get("share.auto.offset.reset")
    if raw is None:
        return LATEST
    try:
        return parse_share_reset(raw)
    except ValueError:
        return LATEST


def share_read_committed(overrides: Mapping[str, str] | None) -> bool:
    """Whether the group reads only committed transactional records (``share.isolation.level``)."""
    return (overrides or {}).get("share.isolation.level") == "read_committed"
