"""The ``_schemas`` topic's records, in Confluent Schema Registry's own JSON key and value formats.

Keeping Confluent's format means a Confluent registry can read a topic Riverlog's registry wrote
and the other way round (a migration in either direction is "point the other registry at the
topic"). Keys (JSON objects, ``magic`` 1 for schema keys, 0 for the others):

- ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}``: value ``{"subject","version","id",
  "schemaType" (absent for AVRO),"references" (absent when none),"schema","deleted"}``; a null
  value (tombstone) hard-deletes that version.
- ``{"keytype":"CONFIG","subject":S or null,"magic":0}``: value ``{"compatibilityLevel":MODE}``;
  null deletes the subject's (or the global) setting.
- ``{"keytype":"MODE","subject":S or null,"magic":0}``: value ``{"mode":MODE}``; null deletes it.
- ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}``: value ``{"subject":S,"version":V}``:
  every version up to V is soft-deleted.
- ``{"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}``: value ``{"subject":S}``: the subject's
  soft-deleted versions are gone (hard-deleted).
- ``{"keytype":"NOOP","magic":0}``: written by a writer to find the end of the topic. Confluent
  writes a null value; Riverlog writes ``{"maxId":N,"writerEpoch":E}``: the highest id issued so
  far, so that the id high-water mark survives compaction of hard-deleted schemas' tombstones, and
  the epoch the new writer claims (a Confluent reader ignores NOOP values).

Values a Riverlog writer writes also carry ``"writerEpoch"`` (Confluent ignores unknown fields):
readers ignore a record stamped with an epoch below the latest claimed one, which fences a writer
that was paused through an election and resumes writing (see store.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KEY_TYPES = ("SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema's reference to another subject's version, under the ``name`` the schema uses."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out


@dataclass(frozen=True, slots=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        if self.keytype == "SCHEMA":
            return {"keytype": "SCHEMA", "subject": self.subject, "version": self.version, "magic": 1}
        if self.keytype == "NOOP":
            return {"keytype": "NOOP", "magic": 0}
        return {"keytype": self.keytype, "subject": self.subject, "magic": 0}


class RecordError(ValueError):
    """A ``_schemas`` record this registry cannot understand (skipped, with a warning)."""


def encode(obj: dict[str, Any] | None) -> bytes | None:
    if obj is None:
        return None
    # Compact, and in the field order above, as Confluent's Jackson writes them.
    return json.dumps(obj, separators=(",", ":")).encode()


def encode_key(key: Key) -> bytes:
    data = encode(key.to_json())
    assert data is not None
    return data


def _object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"{what} is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordError(f"{what} is not a JSON object")
    return obj


def decode_key(data: bytes | None) -> Key:
    if data is None:
        raise RecordError("record without a key")
    obj = _object(data, "key")
    keytype = obj.get("keytype")
    if keytype not in KEY_TYPES:
        raise RecordError(f"unknown keytype {keytype!r}")
    subject = obj.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise RecordError("key subject is not a string")
    version = obj.get("version")
    if keytype == "SCHEMA" and (not isinstance(subject, str) or not isinstance(version, int)):
        raise RecordError("SCHEMA key without subject and version")
    if keytype in ("DELETE_SUBJECT", "CLEAR_SUBJECT") and not isinstance(subject, str):
        raise RecordError(f"{keytype} key without subject")
    return Key(keytype, subject, version if isinstance(version, int) else None, obj)


def decode_schema_value(data: bytes) -> SchemaValue:
    obj = _object(data, "SCHEMA value")
    try:
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in obj.get("references") or ())
        return SchemaValue(
            subject=str(obj["subject"]), version=int(obj["version"]), id=int(obj["id"]),
            schema_type=str(obj.get("schemaType") or "AVRO"), schema=str(obj["schema"]),
            references=refs, deleted=bool(obj.get("deleted", False)))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"bad SCHEMA value: {exc!r}") from None


def decode_value(data: bytes | None, what: str) -> dict[str, Any] | None:
    return None if data is None else _object(data, what)


# --- building records ------------------------------------------------------------------------------

Record = tuple[bytes, bytes | None]


def schema_record(value: SchemaValue) -> Record:
    return encode_key(Key("SCHEMA", value.subject, value.version)), encode(value.to_json())


def schema_tombstone(subject: str, version: int) -> Record:
    return encode_key(Key("SCHEMA", subject, version)), None


def config_record(subject: str | None, level: str | None) -> Record:
    return encode_key(Key("CONFIG", subject)), encode(None if level is None else {"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    return encode_key(Key("MODE", subject)), encode(None if mode is None else {"mode": mode})


def delete_subject_record(subject: str, version: int) -> Record:
    return encode_key(Key("DELETE_SUBJECT", subject)), encode({"subject": subject, "version": version})


def clear_subject_record(subject: str) -> Record:
    return encode_key(Key("CLEAR_SUBJECT", subject)), encode({"subject": subject})


def noop_record(max_id: int, writer_epoch: int | None = None) -> Record:
    body: dict[str, Any] = {"maxId": max_id}
    if writer_epoch is not None:
        body[WRITER_EPOCH] = writer_epoch
    return encode_key(Key("NOOP")), encode(body)


# Riverlog's fencing of superseded writers (store.py): an extra value field, which Confluent's
# readers ignore as they ignore every unknown property.
WRITER_EPOCH = "writerEpoch"


def stamp(record: Record, writer_epoch: int) -> Record:
    """``record`` with the writer's epoch in its value (tombstones have no value to carry it)."""
    key, value = record
    if value is None or key == encode_key(Key("NOOP")):
        # A NOOP with an epoch is a claim (store.py); the id high-water NOOPs writes add are not.
        return record
    body = json.loads(value)
    body[WRITER_EPOCH] = writer_epoch
    return key, encode(body)


def writer_epoch_of(value: bytes | None) -> int | None:
    if value is None:
        return None
    try:
        body = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    epoch = body.get(WRITER_EPOCH) if isinstance(body, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
