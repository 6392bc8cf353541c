"""What the REST API does, in Confluent Schema Registry's semantics, over a :class:`Store`.

Reads answer from the store. Writes (on the writer instance only; others forward the HTTP
request) decide their records from the store under one lock, append them to the log and return
once the store has applied them: a write's answer always reflects the topic, never a guess.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import errors
from .compatibility import DEFAULT_MODE, MODES, compatibility_errors
from .formats import SCHEMA_TYPES, ParsedSchema, References, SchemaError, parse_schema
from .records import (
    Record,
    Reference,
    SchemaValue,
    config_record,
    delete_subject_record,
    mode_record,
    noop_record,
    schema_record,
    schema_tombstone,
)
from .store import Store, StoredSchema

log = logging.getLogger(__name__)

SchemaParser = Callable[[str, str, References], ParsedSchema]

REGISTRY_MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_REGISTRY_MODE = "READWRITE"
MAX_VERSION = 2**31 - 1


class WriteLog(Protocol):
    """Where writes go: ``append`` returns once the store has applied the records."""

    async def append(self, records: Sequence[Record]) -> None: ...


@dataclass(frozen=True)
class SchemaRequest:
    """The body of register, lookup and compatibility requests."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    id: int | None = None  # IMPORT mode only
    version: int | None = None  # IMPORT mode only

    @classmethod
    def from_json(cls, body: object) -> SchemaRequest:
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise errors.invalid_schema("the request has no \"schema\" string (empty schema)")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"unknown schemaType {schema_type!r}; one of {', '.join(SCHEMA_TYPES)}")
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise errors.unprocessable("\"references\" must be a list")
        references: list[Reference] = []
        for ref in refs:
            if not (isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(ref.get("subject"), str)
                    and isinstance(ref.get("version"), int) and not isinstance(ref.get("version"), bool)):
                raise errors.invalid_schema("a reference needs a \"name\", a \"subject\" and an integer \"version\"")
            references.append(Reference(ref["name"], ref["subject"], ref["version"]))
        return cls(schema, schema_type.upper(), tuple(references), _optional_int(body, "id"),
                   _optional_int(body, "version"))


def _optional_int(body: dict[str, Any], field: str) -> int | None:
    value = body.get(field)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value < 0):
        return None  # Confluent's clients send -1 (or nothing) for "not given"
    if not isinstance(value, int) or isinstance(value, bool):
        raise errors.unprocessable(f"\"{field}\" must be an integer")
    return value


def parse_version(text: str, *, allow_latest: bool = True) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or ``latest``/``-1`` (None)."""
    if allow_latest and text in ("latest", "-1"):
        return None
    try:
        number = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(text)
    return number


class Registry:
    def __init__(self, store: Store, log: WriteLog, *, parser: SchemaParser = parse_schema,
                 default_compatibility: str = DEFAULT_MODE) -> None:
        if default_compatibility not in MODES:
            raise ValueError(f"schema.compatibility.level {default_compatibility!r} is not one of {', '.join(MODES)}")
        self.store = store
        self.log = log
        self.parser = parser
        self.default_compatibility = default_compatibility
        self._write_lock = asyncio.Lock()
        self._parsed: dict[StoredSchema, ParsedSchema] = {}

    # --- parsing --------------------------------------------------------------------------------

    def _resolve(self, references: Sequence[Reference], seen: tuple[tuple[str, int], ...] = ()) -> dict[str, str]:
        """The referenced schemas' texts by name, nested references first (dependency order)."""
        out: dict[str, str] = {}
        for ref in references:
            target = self._reference_target(ref)
            if (target.subject, target.version) in seen:
                raise errors.invalid_schema(f"circular reference through {ref.subject} version {ref.version}")
            out.update(self._resolve(target.references, (*seen, (target.subject, target.version))))
            out[ref.name] = target.schema
        return out

    def _reference_target(self, ref: Reference) -> SchemaValue:
        if ref.version == -1:
            live = self.store.versions(ref.subject)
            target = live[-1] if live else None
        else:
            target = self.store.version(ref.subject, ref.version)
        if target is None:
            raise errors.invalid_schema(f"reference {ref.name!r} to subject {ref.subject!r} version "
                                        f"{ref.version} does not exist")
        return target

    def parse(self, schema_type: str, text: str, references: Sequence[Reference]) -> ParsedSchema:
        resolved = self._resolve(references)
        try:
            return self.parser(schema_type, text, resolved)
        except SchemaError as exc:
            raise errors.invalid_schema(str(exc)) from None
        except ImportError:
            # A build without this format's module (or its parsing library): the client's
            # schema is not at fault, but the answer must still be an API error, not a crash.
            log.exception("the %s format is not available", schema_type)
            raise errors.invalid_schema(f"schema type {schema_type} is not available in this registry") from None

    def _parsed_stored(self, stored: StoredSchema) -> ParsedSchema:
        """A registered schema, parsed (cached: compatibility checks parse every earlier version)."""
        parsed = self._parsed.get(stored)
        if parsed is None:
            parsed = self._parsed[stored] = self.parse(stored.schema_type, stored.schema, stored.references)
        return parsed

    def formatted(self, schema_type: str, text: str, references: Sequence[Reference], fmt: str | None) -> str:
        """A registered schema's text in the ``format`` a reader asked for. PROTOBUF
        ``serialized``: base64 of its FileDescriptorProto, which confluent-kafka's deserializers
        ask for. Other formats (and formats this registry does not know) are the stored text, as
        Confluent answers for formats a schema type does not have."""
        if fmt == "serialized" and schema_type == "PROTOBUF":
            parsed = self._parsed_stored(StoredSchema(schema_type, text, tuple(references)))
            serialized = getattr(parsed, "serialized", None)
            if callable(serialized):
                return str(serialized())
        return text

    def _parsed_version(self, value: SchemaValue) -> ParsedSchema:
        return self._parsed_stored(StoredSchema(value.schema_type, value.schema, value.references))

    # --- reads ----------------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.store.subjects(deleted=deleted) if s.startswith(prefix)]

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        found = self.store.versions(subject, deleted=deleted)
        if not found:
            raise errors.subject_not_found(subject)
        return [v.version for v in found]

    def version(self, subject: str, version_text: str, *, deleted: bool = False) -> SchemaValue:
        version = parse_version(version_text)
        if not self.store.has_subject(subject, deleted=True):
            raise errors.subject_not_found(subject)
        if version is None:
            found = self.store.versions(subject, deleted=deleted)
            if not found:
                raise errors.subject_not_found(subject)
            return found[-1]
        value = self.store.version(subject, version)
        if value is None or (value.deleted and not deleted):
            raise errors.version_not_found(version)
        return value

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> StoredSchema:
        stored = self.store.schema(schema_id)
        if stored is None:
            raise errors.schema_not_found(schema_id)
        if subject and not any(h.subject == subject for h in self.store.holders(schema_id, deleted=True)):
            raise errors.schema_not_found(schema_id)
        return stored

    def id_versions(self, schema_id: int, *, deleted: bool = False) -> list[SchemaValue]:
        self.schema_by_id(schema_id)
        return self.store.holders(schema_id, deleted=deleted)

    def referenced_by(self, subject: str, version_text: str) -> list[int]:
        value = self.version(subject, version_text, deleted=True)
        return self.store.referenced_by(value.subject, value.version)

    def schemas(self, *, prefix: str = "", deleted: bool = False, latest_only: bool = False) -> list[SchemaValue]:
        out: list[SchemaValue] = []
        for subject in self.store.subjects(deleted=deleted):
            if subject.startswith(prefix):
                found = self.store.versions(subject, deleted=deleted)
                out += found[-1:] if latest_only else found
        return out

    def lookup(self, subject: str, request: SchemaRequest, *, normalize: bool = False,
               deleted: bool = False) -> SchemaValue:
        """POST /subjects/{subject}: which version of the subject is this schema?"""
        if not self.store.has_subject(subject, deleted=deleted):
            raise errors.subject_not_found(subject)
        parsed = self.parse(request.schema_type, request.schema, request.references)
        for value in reversed(self.store.versions(subject, deleted=deleted)):
            if self._same(value, parsed, request.references, normalize):
                return value
        raise errors.schema_not_found()

    def _same(self, value: SchemaValue, parsed: ParsedSchema, references: Sequence[Reference],
              normalize: bool) -> bool:
        if value.schema_type != parsed.schema_type or value.references != tuple(references):
            return False
        if value.schema in (parsed.canonical(), parsed.normalized() if normalize else None):
            return True
        if not normalize:
            return False
        try:
            return self._parsed_version(value).normalized() == parsed.normalized()
        except errors.RegistryError:
            return False

    def compatibility(self, subject: str | None = None) -> str:
        """The mode in force for ``subject``: its own, else the global one, else the default."""
        return ((subject is not None and self.store.config(subject)) or self.store.config(None)
                or self.default_compatibility)

    def config(self, subject: str | None, *, default_to_global: bool = False) -> str:
        if subject is None:
            return self.compatibility(None)
        own = self.store.config(subject)
        if own is not None:
            return own
        if default_to_global:
            return self.compatibility(None)
        raise errors.subject_config_not_found(subject)

    def mode(self, subject: str | None, *, default_to_global: bool = False) -> str:
        if subject is None:
            return self.store.mode(None) or DEFAULT_REGISTRY_MODE
        own = self.store.mode(subject)
        if own is not None:
            return own
        if default_to_global:
            return self.mode(None)
        raise errors.subject_mode_not_found(subject)

    def _effective_mode(self, subject: str) -> str:
        return self.store.mode(subject) or self.store.mode(None) or DEFAULT_REGISTRY_MODE

    def check_compatibility(self, subject: str, version_text: str | None, request: SchemaRequest, *,
                            normalize: bool = False) -> list[str]:
        """Why ``request`` breaks the subject's mode against one version (``version_text``) or the
        versions the mode names (None); empty when compatible."""
        parsed = self.parse(request.schema_type, request.schema, request.references)
        mode = self.compatibility(subject)
        earlier = self.store.versions(subject) if version_text is None else [self.version(subject, version_text)]
        return compatibility_errors(mode, parsed, [(v.version, self._parsed_version(v)) for v in earlier])

    # --- writes ---------------------------------------------------------------------------------

    async def _write(self, records: Sequence[Record]) -> None:
        await self.log.append(records)

    async def repair(self) -> None:
        """Rewrite the keys whose last record a superseded writer wrote (see ``Store.repairs``),
        under the write lock so that no write of the same key interleaves."""
        async with self._write_lock:
            records = self.store.repairs()
            if records:
                await self._write(records)

    async def register(self, subject: str, request: SchemaRequest, *, normalize: bool = False) -> SchemaValue:
        """POST /subjects/{subject}/versions: the version holding this schema (an existing one
        when the subject already has it)."""
        if not subject or any(ord(c) < 0x20 for c in subject):
            raise errors.invalid_schema(f"invalid subject name {subject!r}")
        async with self._write_lock:
            mode = self._effective_mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.not_permitted(f"Subject {subject} is in read-only mode")
            parsed = self.parse(request.schema_type, request.schema, request.references)
            text = parsed.normalized() if normalize else parsed.canonical()
            live = self.store.versions(subject)
            for value in reversed(live):
                if self._same(value, parsed, request.references, normalize) and request.id in (None, value.id):
                    return value
            stored = StoredSchema(parsed.schema_type, text, request.references)
            if mode == "IMPORT":
                value = self._import_value(subject, stored, request)
            else:
                if request.id is not None or request.version is not None:
                    raise errors.not_permitted(f"Subject {subject} is not in import mode: a schema is registered "
                                               "with a given id or version only in IMPORT mode")
                problems = compatibility_errors(self.compatibility(subject), parsed,
                                                [(v.version, self._parsed_version(v)) for v in live])
                if problems:
                    raise errors.incompatible(subject, problems)
                schema_id = self.store.id_of(stored) or self.store.max_id + 1
                value = SchemaValue(subject, self.store.latest_version_number(subject) + 1, schema_id,
                                    stored.schema_type, stored.schema, stored.references)
            self._parsed.setdefault(stored, parsed)
            await self._write([schema_record(value)])
            return value

    def _import_value(self, subject: str, stored: StoredSchema, request: SchemaRequest) -> SchemaValue:
        """IMPORT mode: keep the id (and version) the client gives, as a migration copies them."""
        schema_id = request.id if request.id is not None else (self.store.id_of(stored) or self.store.max_id + 1)
        existing = self.store.schema(schema_id)
        if existing is not None and existing != stored:
            raise errors.not_permitted(f"Overwrite new schema with id {schema_id} is not permitted: the id "
                                       "already stands for another schema")
        version = request.version or self.store.latest_version_number(subject) + 1
        taken = self.store.version(subject, version)
        if taken is not None and taken.id != schema_id:
            raise errors.not_permitted(f"Subject {subject} version {version} already holds schema id {taken.id}")
        return SchemaValue(subject, version, schema_id, stored.schema_type, stored.schema, stored.references)

    def _check_writable(self, subject: str | None) -> None:
        mode = self._effective_mode(subject) if subject is not None else self.mode(None)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.not_permitted(f"Subject {subject or '(global)'} is in read-only mode")

    async def delete_version(self, subject: str, version_text: str, *, permanent: bool = False) -> int:
        version = parse_version(version_text)
        async with self._write_lock:
            self._check_writable(subject)
            if not self.store.has_subject(subject, deleted=True):
                raise errors.subject_not_found(subject)
            if version is None:
                live = self.store.versions(subject, deleted=permanent)
                if not live:
                    raise errors.version_not_found(version_text)
                version = live[-1].version
            value = self.store.version(subject, version)
            if value is None:
                raise errors.version_not_found(version)
            if not permanent:
                if value.deleted:
                    raise errors.version_soft_deleted(subject, version)
                users = self.store.referenced_by(subject, version)
                if users:
                    raise errors.reference_exists(f"One or more references exist to the schema "
                                                  f"{{subject={subject},version={version}}}: ids {users}")
                await self._write([schema_record(_deleted(value))])
            else:
                if not value.deleted:
                    raise errors.version_not_soft_deleted(subject, version)
                # The NOOP carries the id high-water mark past compaction of the tombstone.
                await self._write([schema_tombstone(subject, version), noop_record(self.store.max_id)])
            return version

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        async with self._write_lock:
            self._check_writable(subject)
            every = self.store.versions(subject, deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if not permanent:
                if not live:
                    raise errors.subject_soft_deleted(subject)
                for value in live:
                    users = self.store.referenced_by(subject, value.version)
                    if users:
                        raise errors.reference_exists(f"One or more references exist to the schema "
                                                      f"{{subject={subject},version={value.version}}}: ids {users}")
                await self._write([delete_subject_record(subject, every[-1].version)])
                return [v.version for v in live]
            if live:
                raise errors.subject_not_soft_deleted(subject)
            await self._write([*(schema_tombstone(subject, v.version) for v in every),
                               noop_record(self.store.max_id)])
            return [v.version for v in every]

    async def set_config(self, subject: str | None, body: object) -> str:
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in MODES:
            raise errors.invalid_compatibility(level)
        async with self._write_lock:
            await self._write([config_record(subject, level.upper())])
        return level.upper()

    async def delete_config(self, subject: str | None) -> str:
        async with self._write_lock:
            if subject is None:
                previous = self.compatibility(None)
            else:
                own = self.store.config(subject)
                if own is None:
                    if not self.store.has_subject(subject, deleted=True):
                        raise errors.subject_not_found(subject)
                    raise errors.subject_config_not_found(subject)
                previous = own
            await self._write([config_record(subject, None)])
            return previous

    async def set_mode(self, subject: str | None, body: object, *, force: bool = False) -> str:
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in REGISTRY_MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        async with self._write_lock:
            if mode == "IMPORT" and not force:
                # Importing into a registry that has schemas could collide with their ids.
                exists = self.store.has_subject(subject) if subject is not None else bool(self.store.subjects())
                if exists:
                    raise errors.not_permitted("Cannot import since found existing subjects; "
                                               "use force=true to set IMPORT mode anyway")
            await self._write([mode_record(subject, mode)])
        return mode

    async def delete_mode(self, subject: str) -> str:
        async with self._write_lock:
            own = self.store.mode(subject)
            if own is None:
                if not self.store.has_subject(subject, deleted=True):
                    raise errors.subject_not_found(subject)
                raise errors.subject_mode_not_found(subject)
            await self._write([mode_record(subject, None)])
            return own


def _deleted(value: SchemaValue) -> SchemaValue:
    return SchemaValue(value.subject, value.version, value.id, value.schema_type, value.schema,
                       value.references, deleted=True)


class InMemoryLog:
    """A log that is only this process's store: for a registry without Kafka (unit tests, and
    trying the REST API out). Records apply at once, at consecutive offsets."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.records: list[Record] = []

    async def append(self, records: Sequence[Record]) -> None:
        for key, value in records:
            self.records.append((key, value))
            self.store.apply(key, value, len(self.records) - 1)
