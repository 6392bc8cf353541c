"""The registry's state, built only by applying ``_schemas`` records in log order.

Pure: no I/O, no clock. Every instance (writer or not) holds one and feeds it what it reads from
the topic, so all instances answer reads from the same state once they have read the same
offsets. The writer decides new records from this state (e.g. the next id is ``max_id + 1``) and
sees its own writes only when they come back from the topic, like everyone else.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, replace

from .records import (
    RecordError,
    Reference,
    SchemaValue,
    decode_key,
    decode_schema_value,
    decode_value,
    writer_epoch_of,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """What an id stands for: one id per distinct (type, schema text, references)."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


class Store:
    def __init__(self) -> None:
        self._versions: dict[str, dict[int, SchemaValue]] = {}
        self._by_id: dict[int, StoredSchema] = {}
        self._id_of: dict[StoredSchema, int] = {}
        # Which (subject, version)s hold an id: an id disappears with its last version (hard delete).
        self._holders: dict[int, set[tuple[str, int]]] = {}
        self.max_id = 0  # never goes down: ids are not reused, even after a hard delete
        self.global_config: str | None = None
        self.subject_config: dict[str, str] = {}
        self.global_mode: str | None = None
        self.subject_mode: dict[str, str] = {}
        self.offset = -1  # of the last record applied
        self.skipped = 0  # records not understood (written by something else), skipped
        # Writer fencing: the highest epoch a new writer has claimed (in a NOOP) and where.
        self.writer_epoch = 0
        self.writer_epoch_offset = -1
        self.rejected: deque[int] = deque(maxlen=1024)  # offsets of records fenced off, latest last
        # The compacted view: each key's last applied value. A fenced-off record that is the last
        # of its key would survive compaction while what it hides would not, and a replay after
        # compaction would apply it; the writer rewrites such keys (``repairs``) to close that.
        self._last: dict[bytes, bytes | None] = {}
        self.unrepaired: dict[bytes, int] = {}

    # --- applying records -----------------------------------------------------------------------

    def apply(self, key: bytes | None, value: bytes | None, offset: int = -1) -> None:
        """Apply one ``_schemas`` record. A record this registry does not understand is logged
        and skipped: one bad record must not stop an instance from serving."""
        if offset >= 0:
            self.offset = max(self.offset, offset)
        if not self._admitted(key, value, offset):
            self.rejected.append(offset)
            if key is not None and not _is_noop(key):  # a NOOP's only effect is the claim it lost
                self.unrepaired[key] = offset
            log.warning("_schemas record at offset %d ignored: written by a writer superseded by epoch %d",
                        offset, self.writer_epoch)
            return
        if key is not None:
            self._last[key] = value
            self.unrepaired.pop(key, None)
        try:
            self._apply(key, value)
        except RecordError as exc:
            self.skipped += 1
            log.warning("_schemas record at offset %d skipped: %s", offset, exc)

    def _admitted(self, key: bytes | None, value: bytes | None, offset: int) -> bool:
        """Fencing: a NOOP claiming an epoch must claim a higher one than any before; any other
        stamped record must carry the current epoch or a later one. Unstamped records (Confluent's
        registry wrote them, or a tombstone) are always applied."""
        epoch = writer_epoch_of(value)
        if epoch is None:
            return True
        if _is_noop(key):
            if epoch <= self.writer_epoch:
                return False
            self.writer_epoch, self.writer_epoch_offset = epoch, offset
            return True
        if epoch < self.writer_epoch:
            return False
        # Records of an epoch imply its claim: after compaction removed the claiming NOOP, they
        # still keep records of older epochs that follow them out.
        self.writer_epoch = epoch
        return True

    def repairs(self) -> list[tuple[bytes, bytes | None]]:
        """For each key whose last record was fenced off: its last applied value (a tombstone
        when none was), for the current writer to write again."""
        return [(key, self._last.get(key)) for key in self.unrepaired]

    def _apply(self, key_data: bytes | None, value: bytes | None) -> None:
        key = decode_key(key_data)
        if key.keytype == "SCHEMA":
            assert key.subject is not None and key.version is not None
            if value is None:
                self._remove(key.subject, key.version)
                return
            schema = decode_schema_value(value)
            if (schema.subject, schema.version) != (key.subject, key.version):
                raise RecordError(f"SCHEMA value for {schema.subject}/{schema.version} under key "
                                  f"{key.subject}/{key.version}")
            self._put(schema)
        elif key.keytype == "CONFIG":
            self._setting(self.subject_config, "global_config", key.subject,
                          decode_value(value, "CONFIG value"), "compatibilityLevel")
        elif key.keytype == "MODE":
            self._setting(self.subject_mode, "global_mode", key.subject, decode_value(value, "MODE value"), "mode")
        elif key.keytype == "DELETE_SUBJECT":
            body = decode_value(value, "DELETE_SUBJECT value")
            assert key.subject is not None
            if body is None:
                return  # compaction's tombstone of an old delete: nothing to undo
            upto = body.get("version")
            if not isinstance(upto, int):
                raise RecordError("DELETE_SUBJECT value without a version")
            for version, schema in list(self._versions.get(key.subject, {}).items()):
                if version <= upto and not schema.deleted:
                    self._versions[key.subject][version] = replace(schema, deleted=True)
        elif key.keytype == "CLEAR_SUBJECT":
            assert key.subject is not None
            if value is None:
                return
            for version, schema in list(self._versions.get(key.subject, {}).items()):
                if schema.deleted:
                    self._remove(key.subject, version)
        elif key.keytype == "NOOP":
            body = decode_value(value, "NOOP value")
            if body is not None and isinstance(body.get("maxId"), int):
                self.max_id = max(self.max_id, body["maxId"])

    def _setting(self, per_subject: dict[str, str], global_attr: str, subject: str | None,
                 body: dict[str, object] | None, field: str) -> None:
        setting = None if body is None else body.get(field)
        if setting is not None and not isinstance(setting, str):
            raise RecordError(f"{field} is not a string")
        if subject is None:
            setattr(self, global_attr, setting)
        elif setting is None:
            per_subject.pop(subject, None)
        else:
            per_subject[subject] = setting

    def _put(self, schema: SchemaValue) -> None:
        old = self._versions.get(schema.subject, {}).get(schema.version)
        if old is not None:
            self._release(old)
        self._versions.setdefault(schema.subject, {})[schema.version] = schema
        stored = StoredSchema(schema.schema_type, schema.schema, schema.references)
        self._by_id[schema.id] = stored
        self._id_of.setdefault(stored, schema.id)
        self._holders.setdefault(schema.id, set()).add((schema.subject, schema.version))
        self.max_id = max(self.max_id, schema.id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self._versions.get(subject, {})
        old = versions.pop(version, None)
        if not versions:
            self._versions.pop(subject, None)
        if old is not None:
            self._release(old)

    def _release(self, old: SchemaValue) -> None:
        holders = self._holders.get(old.id, set())
        holders.discard((old.subject, old.version))
        if not holders:
            self._holders.pop(old.id, None)
            stored = self._by_id.pop(old.id, None)
            if stored is not None and self._id_of.get(stored) == old.id:
                del self._id_of[stored]

    # --- reading --------------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s, vs in self._versions.items() if deleted or any(not v.deleted for v in vs.values()))

    def has_subject(self, subject: str, *, deleted: bool = False) -> bool:
        return any(deleted or not v.deleted for v in self._versions.get(subject, {}).values())

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, oldest first; soft-deleted ones only with ``deleted``."""
        return [v for _, v in sorted(self._versions.get(subject, {}).items()) if deleted or not v.deleted]

    def version(self, subject: str, version: int) -> SchemaValue | None:
        """That version, soft-deleted or not."""
        return self._versions.get(subject, {}).get(version)

    def latest_version_number(self, subject: str) -> int:
        """Highest version the subject has held, soft-deleted included (0 for none): a new
        version gets the next number, so a soft-deleted number is never given again."""
        return max(self._versions.get(subject, {}), default=0)

    def schema(self, schema_id: int) -> StoredSchema | None:
        return self._by_id.get(schema_id)

    def id_of(self, stored: StoredSchema) -> int | None:
        return self._id_of.get(stored)

    def holders(self, schema_id: int, *, deleted: bool = False) -> list[SchemaValue]:
        """The (subject, version)s registered with this id, by subject then version."""
        out = [self._versions[s][v] for s, v in self._holders.get(schema_id, set())]
        return sorted((x for x in out if deleted or not x.deleted), key=lambda x: (x.subject, x.version))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name this subject version."""
        ids = {v.id for vs in self._versions.values() for v in vs.values() if not v.deleted
               and any(r.subject == subject and r.version == version for r in v.references)}
        return sorted(ids)

    def schema_count(self) -> int:
        return len(self._by_id)

    def config(self, subject: str | None) -> str | None:
        return self.global_config if subject is None else self.subject_config.get(subject)

    def mode(self, subject: str | None) -> str | None:
        return self.global_mode if subject is None else self.subject_mode.get(subject)


def _is_noop(key: bytes | None) -> bool:
    try:
        return decode_key(key).keytype == "NOOP"
    except RecordError:
        return False
