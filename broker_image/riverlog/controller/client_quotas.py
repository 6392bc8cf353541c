"""Client quotas in the metadata log, decided as KRaft's ClientQuotaControlManager decides them.

An entity is a user, a client id, or a user together with a client id; a None name is that type's
default entity (``--entity-default`` / ``<default>`` in kafka-configs). Its quotas are
``producer_byte_rate`` and ``consumer_byte_rate`` (whole bytes per second),
``request_percentage`` (percent of one request thread's time) and ``controller_mutation_rate``.

AlterClientQuotas: every entity is validated on its own and answered on its own (INVALID_REQUEST
with Kafka's messages: an unknown entity type or key, an empty name, a value not above zero, a
fractional byte rate); what is accepted is committed together. A removal of a quota the entity
does not have and a value equal to the current one produce no record, as in Kafka.

DescribeClientQuotas answers from the image with Kafka's filter: per entity type an exact name, the
default entity, or any entity of the type; ``strict`` leaves out entities of other types too.

Kafka's ``ip`` entities (``connection_creation_rate``) are refused with INVALID_REQUEST: Riverlog
enforces no connection rate, and a quota it stored but did not enforce would mislead.

Pure functions of the image; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from .image import MetadataImage
from .records import ClientQuotaRecord, QuotaEntity

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

# Kafka's QuotaConfig.userAndClientQuotaConfigs: each key and whether its value is integral (LONG).
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS: Mapping[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
LONG_MAX = 2**63 - 1

# DescribeClientQuotas match types.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


@dataclass(frozen=True)
class QuotaOp:
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True)
class QuotaAlteration:
    entity: tuple[tuple[str, str | None], ...]  # as the request lists it
    ops: tuple[QuotaOp, ...]


@dataclass(frozen=True)
class QuotaOutcome:
    entity: tuple[tuple[str, str | None], ...]
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


class QuotaFilterError(Exception):
    """A DescribeClientQuotas filter Kafka refuses; ``code`` is the answer's error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def normalize(entity: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    """The entity as records and the image key it: one name per type (a type listed twice keeps
    its last name, as Kafka's map does), sorted by type."""
    return tuple(sorted(dict(entity).items(), key=lambda pair: pair[0]))


def describe_entity(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity.toString, which its messages quote."""
    inner = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _entity_problem(entity: QuotaEntity) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    for kind, name in entity:
        if kind == IP:
            return "ip quotas (connection_creation_rate) are not supported by Riverlog"
        if kind not in (USER, CLIENT_ID):
            return f"Unhandled client quota entity type: {kind}"
        if name is not None and not name:
            return f"Empty {kind} not supported"
    return None


def _value_problem(key: str, value: float) -> str | None:
    integral = QUOTA_KEYS.get(key)
    if integral is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:  # NaN too
        return f"Quota {key} must be greater than 0"
    if integral:
        if value > LONG_MAX:
            return f"Proposed value for {key} is too large for a LONG."
        if math.isinf(value) or abs(math.fmod(value, 1.0)) > 1e-6:
            return f"{key} cannot be a fractional value."
    elif math.isinf(value):
        return f"Proposed value for {key} is not a finite number."
    return None


def alter_quotas(image: MetadataImage, alterations: Sequence[QuotaAlteration]
                 ) -> tuple[list[QuotaOutcome], list[ClientQuotaRecord]]:
    """One outcome per distinct entity (in request order) and the records of those accepted."""
    results: dict[QuotaEntity, QuotaOutcome] = {}
    records: list[ClientQuotaRecord] = []
    for alteration in alterations:
        entity = normalize(alteration.entity)
        wanted: dict[str, float | None] = {}
        duplicate_key = False
        for op in alteration.ops:
            if op.key in wanted:
                duplicate_key = True
            else:
                wanted[op.key] = None if op.remove else op.value
        if duplicate_key or entity in results:
            # Kafka answers a key named twice the same way as an entity named twice.
            results[entity] = QuotaOutcome(alteration.entity, ErrorCode.INVALID_REQUEST,
                                           f"Ignoring duplicate entity {describe_entity(entity)}")
            continue
        problem = _entity_problem(entity)
        current = image.client_quotas.get(entity, {})
        changes: list[ClientQuotaRecord] = []
        for key, value in wanted.items():
            if problem is not None:
                break
            if value is None:
                if key in current:
                    changes.append(ClientQuotaRecord(entity, key, None))
                continue
            problem = _value_problem(key, value)
            if problem is None and current.get(key) != value:
                changes.append(ClientQuotaRecord(entity, key, float(value)))
        if problem is not None:
            results[entity] = QuotaOutcome(alteration.entity, ErrorCode.INVALID_REQUEST, problem)
            continue
        records.extend(changes)
        results[entity] = QuotaOutcome(alteration.entity)
    return list(results.values()), records


@dataclass(frozen=True)
class QuotaFilter:
    entity_type: str
    match_type: int
    match: str | None


def _parse_filter(components: Sequence[QuotaFilter]) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    any_of: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in any_of:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                                   f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaFilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            any_of.add(c.entity_type)
        else:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    named = set(exact) | any_of
    if IP in named and named & {USER, CLIENT_ID}:
        raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                               "Invalid entity filter component combination. IP filter component should not be "
                               "used with user or clientId filter component.")
    return exact, any_of


def describe_quotas(image: MetadataImage, components: Sequence[QuotaFilter], strict: bool
                    ) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities the filter matches with their quotas; QuotaFilterError for a filter Kafka
    refuses."""
    exact, any_of = _parse_filter(components)
    out: list[tuple[QuotaEntity, Mapping[str, float]]] = []
    for entity, values in image.client_quotas.items():
        names = dict(entity)
        if strict and len(names) != len(exact) + len(any_of):
            continue
        if any(kind not in names or names[kind] != name for kind, name in exact.items()):
            continue
        if any(kind not in names for kind in any_of):
            continue
        out.append((entity, values))
    return out
