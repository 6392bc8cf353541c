"""JSON forms of what travels through the metadata quorum.

* A metadata log entry is one committed batch of records (``encode_records`` /
  ``decode_records``): the records of one controller decision apply together or not at all.
* A controller call (``messages/controller_call.py``) carries a ``ControllerApi`` method's
  arguments and result: dataclasses, enums, UUIDs, bytes, tuples and maps, each tagged so it comes back
  as the same type (``to_wire`` / ``from_wire``). Only the classes registered here are built on
  decode: a peer cannot make this node instantiate anything else.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ...protocol.errors import ErrorCode
from ...security import acl
from .. import acls, client_quotas, features, partition_ops, reassignment, scram, topic_ops
from ..api import HeartbeatResult
from ..records import Endpoint, Record, from_json, to_json

# Records are plain dataclasses; the JSON of ``records.py`` (``type`` tag) is the metadata log's.


def encode_records(records: Sequence[Record]) -> bytes:
    return json.dumps([to_json(r) for r in records], separators=(",", ":")).encode()


def decode_records(data: bytes) -> list[Record]:
    return [from_json(item) for item in json.loads(data)]


# Controller calls ------------------------------------------------------------------------------

_DATACLASSES: dict[str, type] = {}
_ENUMS: dict[str, type[enum.Enum]] = {
    cls.__name__: cls
    for cls in (ErrorCode, acl.ResourceType, acl.PatternType, acl.Operation, acl.Permission)
}


def register(cls: type) -> type:
    """Allow ``cls`` (a dataclass) in controller calls."""
    _DATACLASSES[cls.__name__] = cls
    return cls


for _cls in (HeartbeatResult, Endpoint, topic_ops.NewTopic, topic_ops.Outcome,
             partition_ops.AlterPartitionRequest, partition_ops.AlterPartitionResult,
             partition_ops.AlterPartitionOutcome, partition_ops.ElectionOutcome,
             reassignment.ReassignmentResult, features.FeatureUpdate, features.FeatureOutcome,
             scram.ScramDeletion, scram.ScramUpsertion, scram.UserOutcome, acl.AclBinding, acl.AclFilter,
             acls.AclCreation, acls.AclDeletion, client_quotas.QuotaAlteration, client_quotas.QuotaOp,
             client_quotas.QuotaOutcome):
    register(_cls)


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, enum.Enum):  # before int: IntEnum is an int
        return {"$enum": type(value).__name__, "v": value.value}
    if isinstance(value, int):
        return value
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(value).decode()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if getattr(type(value), "TYPE", None) is not None:  # a metadata record
            return {"$record": to_json(value)}  # type: ignore[arg-type]
        name = type(value).__name__
        if name not in _DATACLASSES:
            raise TypeError(f"{name} is not registered for controller calls")
        return {"$dc": name, "f": {fl.name: _encode(getattr(value, fl.name)) for fl in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v) for v in value]}
    if isinstance(value, (list, Sequence)) and not isinstance(value, (bytes, bytearray)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {"$map": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise TypeError(f"cannot send a {type(value).__name__} in a controller call")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$enum" in value:
        return _ENUMS[value["$enum"]](value["v"])
    if "$uuid" in value:
        return uuid.UUID(value["$uuid"])
    if "$bytes" in value:
        return base64.b64decode(value["$bytes"])
    if "$record" in value:
        return from_json(value["$record"])
    if "$tuple" in value:
        return tuple(_decode(v) for v in value["$tuple"])
    if "$map" in value:
        return {_decode(k): _decode(v) for k, v in value["$map"]}
    if "$dc" in value:
        cls = _DATACLASSES[value["$dc"]]  # KeyError: not an allowed class
        return cls(**{k: _decode(v) for k, v in value["f"].items()})
    raise ValueError(f"unknown value in a controller call: {sorted(value)}")


def to_wire(value: Any) -> str:
    return json.dumps(_encode(value), separators=(",", ":"))


def from_wire(text: str) -> Any:
    return _decode(json.loads(text))


__all__ = ["decode_records", "encode_records", "from_wire", "register", "to_wire"]
