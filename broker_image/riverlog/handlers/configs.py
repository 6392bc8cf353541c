"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, brokers and groups.

With an authorizer, as Kafka: describing needs DESCRIBE_CONFIGS and altering ALTER_CONFIGS, on the
topic (else TOPIC_AUTHORIZATION_FAILED), on the group (else GROUP_AUTHORIZATION_FAILED) or, for a
broker or broker logger, on the cluster (else CLUSTER_AUTHORIZATION_FAILED), resource by resource;
a denied topic's existence does not leak. Group configs (``group_config.py``) are
checked by the controller, which is handed this broker's bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..controller.image import BROKER_RESOURCE, TOPIC_RESOURCE
from ..group_config import GROUP_CONFIGS, GROUP_RESOURCE, limits_from
from ..group_config import default_value as group_default
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from ..topic_config import TOPIC_CONFIGS, ConfigSource, ConfigType, default_value
from .authorize import DENIED_MESSAGE, Operation, on_cluster, on_group, on_topic
from .common import Body, error_message

if TYPE_CHECKING:
    from .host import BrokerHost

BROKER_LOGGER_RESOURCE = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
NO_DEFAULT_GROUP = "Default group resources are not allowed."

# Replication throttles (KIP-73) are not implemented, so none is ever set; deleting one is a
# no-op that succeeds, as on Kafka when none is set. kafka-reassign-partitions --verify deletes
# them all once a reassignment is done and fails if that fails.
BROKER_THROTTLES = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                              "replica.alter.log.dirs.io.max.bytes.per.second"})
TOPIC_THROTTLES = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"})
_SENSITIVE_HINTS = ("password", "secret", "sasl.jaas")


def _entry(name: str, value: str | None, source: ConfigSource, ctype: ConfigType, doc: str,
           synonyms: list[Body], version: int, read_only: bool = False) -> Body:
    sensitive = any(h in name for h in _SENSITIVE_HINTS)
    return {
        "name": name, "value": None if sensitive else value, "read_only": read_only,
        "is_default": source == ConfigSource.DEFAULT_CONFIG, "config_source": source,
        "is_sensitive": sensitive, "synonyms": synonyms, "config_type": ctype, "documentation": doc,
    }


def _topic_configs(broker: BrokerHost, name: str, keys: list[str] | None, synonyms: bool, version: int) -> list[Body]:
    overrides = broker.image.topic_configs(name)
    out = []
    for key, definition in TOPIC_CONFIGS.items():
        if keys is not None and key not in keys:
            continue
        default = default_value(definition, broker.config)
        static = definition.broker_key in broker.config.explicit
        if key in overrides:
            value, source = overrides[key], ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value = default
            source = ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG
        syn: list[Body] = []
        if synonyms:
            if key in overrides:
                syn.append({"name": key, "value": overrides[key], "source": ConfigSource.DYNAMIC_TOPIC_CONFIG})
            if definition.broker_key:
                syn.append({"name": definition.broker_key, "value": default,
                            "source": ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG})
        out.append(_entry(key, value, source, definition.type, definition.doc, syn, version))
    return out


def _group_configs(broker: BrokerHost, name: str, keys: list[str] | None, synonyms: bool, version: int) -> list[Body]:
    """Every group config Kafka has: the group's override (GROUP_CONFIG) or the broker's value."""
    overrides = broker.image.configs.get((GROUP_RESOURCE, name), {})
    limits = limits_from(broker.config.props)
    out = []
    for key, definition in GROUP_CONFIGS.items():
        if keys is not None and key not in keys:
            continue
        default = group_default(definition, limits)
        static = definition.synonym in broker.config.explicit
        broker_source = ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG
        if key in overrides:
            value, source = overrides[key], ConfigSource.GROUP_CONFIG
        else:
            value, source = default, ConfigSource.DEFAULT_CONFIG
        syn: list[Body] = []
        if synonyms:
            if key in overrides:
                syn.append({"name": key, "value": overrides[key], "source": ConfigSource.GROUP_CONFIG})
            if definition.synonym:
                syn.append({"name": definition.synonym, "value": default, "source": broker_source})
        out.append(_entry(key, value, source, definition.type, definition.doc, syn, version))
    return out


def _broker_configs(broker: BrokerHost, keys: list[str] | None, version: int) -> list[Body]:
    out = []
    for key, value in sorted(broker.config.props.items()):
        if keys is not None and key not in keys:
            continue
        source = ConfigSource.STATIC_BROKER_CONFIG if key in broker.config.explicit else ConfigSource.DEFAULT_CONFIG
        out.append(_entry(key, value, source, ConfigType.STRING, "", [], version, read_only=True))
    return out


def _denied(broker: BrokerHost, ctx: RequestContext, operation: Operation, rtype: int, rname: str) -> ErrorCode | None:
    """The authorization error of ``operation`` on a config resource, or None when allowed."""
    if rtype == TOPIC_RESOURCE:
        return None if on_topic(broker, ctx, operation, rname) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if rtype in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
        return None if on_cluster(broker, ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if rtype == GROUP_RESOURCE:
        return None if on_group(broker, ctx, operation, rname) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None


async def handle_describe_configs(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    results = []
    for res in req["resources"]:
        rtype, rname = res["resource_type"], res["resource_name"]
        keys = res.get("configuration_keys")
        result: Body = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": rtype,
                        "resource_name": rname, "configs": []}
        denied = _denied(broker, ctx, Operation.DESCRIBE_CONFIGS, rtype, rname)
        if denied is not None:
            result.update(error_code=denied, error_message=DENIED_MESSAGE[denied])
        elif rtype == TOPIC_RESOURCE:
            if rname not in broker.image.topics:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"Topic {rname} does not exist")
            else:
                result["configs"] = _topic_configs(broker, rname, keys, bool(req.get("include_synonyms")),
                                                   ctx.version)
        elif rtype == BROKER_RESOURCE:
            if rname not in ("", str(broker.node_id)):
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message=f"Unexpected broker id, expected {broker.node_id} or empty string")
            else:
                result["configs"] = _broker_configs(broker, keys, ctx.version)
        elif rtype == BROKER_LOGGER_RESOURCE:
            result["configs"] = []
        elif rtype == GROUP_RESOURCE:
            if not rname:
                result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=NO_DEFAULT_GROUP)
            else:
                result["configs"] = _group_configs(broker, rname, keys, bool(req.get("include_synonyms")),
                                                   ctx.version)
        else:
            result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"Unsupported resource type {rtype}")
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def _resource_error(rtype: int, rname: str, code: ErrorCode, message: str | None) -> Body:
    return {"error_code": code, "error_message": error_message(code, message), "resource_type": rtype,
            "resource_name": rname}


def _unsupported_resource(rtype: int, rname: str) -> Body:
    if rtype == BROKER_RESOURCE:
        return _resource_error(rtype, rname, ErrorCode.INVALID_REQUEST,
                               "dynamic broker configs are not supported yet: set them in server.properties")
    return _resource_error(rtype, rname, ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}")


async def handle_alter_configs(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    responses = []
    for res in req["resources"]:
        rtype, rname = res["resource_type"], res["resource_name"]
        denied = _denied(broker, ctx, Operation.ALTER_CONFIGS, rtype, rname)
        if denied is not None:
            responses.append(_resource_error(rtype, rname, denied, DENIED_MESSAGE[denied]))
            continue
        values = {c["name"]: c["value"] for c in res["configs"]}
        validate_only = bool(req.get("validate_only"))
        if rtype == GROUP_RESOURCE:
            # Kafka forwards a legacy AlterConfigs of a group to its controller: the group's
            # overrides become exactly the ones given.
            outcome = await broker.controller.alter_group_configs(
                rname, values, replace_all=True, validate_only=validate_only, limits=limits_from(broker.config.props))
            responses.append(_resource_error(rtype, rname, outcome.error, outcome.message))
            continue
        if rtype != TOPIC_RESOURCE:
            responses.append(_unsupported_resource(rtype, rname))
            continue
        outcome = await broker.controller.alter_topic_configs(
            rname, values, replace_all=True, validate_only=validate_only)
        responses.append(_resource_error(rtype, rname, outcome.error, outcome.message))
    return {"throttle_time_ms": 0, "responses": responses}


async def handle_incremental_alter_configs(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    responses = []
    for res in req["resources"]:
        rtype, rname = res["resource_type"], res["resource_name"]
        denied = _denied(broker, ctx, Operation.ALTER_CONFIGS, rtype, rname)
        if denied is not None:
            responses.append(_resource_error(rtype, rname, denied, DENIED_MESSAGE[denied]))
            continue
        if rtype == BROKER_RESOURCE and all(c["config_operation"] == DELETE and c["name"] in BROKER_THROTTLES
                                            for c in res["configs"]):
            responses.append(_resource_error(rtype, rname, ErrorCode.NONE, None))
            continue
        if rtype == GROUP_RESOURCE:
            responses.append(await _alter_group(broker, rname, res["configs"], bool(req.get("validate_only"))))
            continue
        if rtype != TOPIC_RESOURCE:
            responses.append(_unsupported_resource(rtype, rname))
            continue
        if rname not in broker.image.topics:
            responses.append(_resource_error(rtype, rname, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             f"Topic {rname} does not exist"))
            continue
        current = dict(broker.image.topic_configs(rname))
        changes: dict[str, Any] = {}
        problem: str | None = None
        for c in res["configs"]:
            name, op, value = c["name"], c["config_operation"], c["value"]
            if op == DELETE and name in TOPIC_THROTTLES:
                continue
            definition = TOPIC_CONFIGS.get(name)
            if definition is None:
                problem = f"Unknown topic config name: {name}"
                break
            if op == SET:
                changes[name] = value
            elif op == DELETE:
                changes[name] = None
            elif op in (APPEND, SUBTRACT):
                if definition.type != ConfigType.LIST:
                    problem = f"Config {name} is not a list: APPEND and SUBTRACT need a list config"
                    break
                base = current.get(name, default_value(definition, broker.config))
                items = [v for v in base.split(",") if v]
                given = [v for v in (value or "").split(",") if v]
                if op == APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                changes[name] = ",".join(items)
            else:
                problem = f"Unknown config operation {op}"
                break
        if problem:
            responses.append(_resource_error(rtype, rname, ErrorCode.INVALID_CONFIG, problem))
            continue
        outcome = await broker.controller.alter_topic_configs(
            rname, changes, replace_all=False, validate_only=bool(req.get("validate_only")))
        responses.append(_resource_error(rtype, rname, outcome.error, outcome.message))
    return {"throttle_time_ms": 0, "responses": responses}


async def _alter_group(broker: BrokerHost, name: str, configs: list[Body], validate_only: bool) -> Body:
    """IncrementalAlterConfigs of one group: SET and DELETE (no group config is a list, so
    APPEND and SUBTRACT are refused as Kafka refuses them on a non-list config)."""
    changes: dict[str, str | None] = {}
    for c in configs:
        op, key = c["config_operation"], c["name"]
        if op == SET:
            changes[key] = c["value"]
        elif op == DELETE:
            changes[key] = None
        elif op in (APPEND, SUBTRACT):
            verb = "APPEND" if op == APPEND else "SUBTRACT"
            return _resource_error(GROUP_RESOURCE, name, ErrorCode.INVALID_CONFIG,
                                   f"Can't {verb} to key {key} because its type is not LIST.")
        else:
            return _resource_error(GROUP_RESOURCE, name, ErrorCode.INVALID_CONFIG, f"Unknown config operation {op}")
    outcome = await broker.controller.alter_group_configs(
        name, changes, replace_all=False, validate_only=validate_only, limits=limits_from(broker.config.props))
    return _resource_error(GROUP_RESOURCE, name, outcome.error, outcome.message)
