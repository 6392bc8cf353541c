"""The registry's store: Confluent's ``_schemas`` records applied in order, and what they leave."""

from __future__ import annotations

import json

import pytest
from riverlog.schema_registry import records as rec
from riverlog.schema_registry.records import Reference, SchemaValue
from riverlog.schema_registry.store import Store, StoredSchema

pytestmark = pytest.mark.unit

A = '{"type":"string"}'
B = '{"type":"int"}'


def value(subject: str, version: int, schema_id: int, schema: str = A, **kw: object) -> SchemaValue:
    return SchemaValue(subject, version, schema_id, str(kw.pop("schema_type", "AVRO")), schema, **kw)  # type: ignore[arg-type]


def replay(*records: rec.Record) -> Store:
    store = Store()
    for offset, (key, val) in enumerate(records):
        store.apply(key, val, offset)
    return store


def test_confluents_key_and_value_formats_exactly() -> None:
    key, val = rec.schema_record(value("orders-value", 2, 7, B))
    assert json.loads(key) == {"keytype": "SCHEMA", "subject": "orders-value", "version": 2, "magic": 1}
    assert json.loads(val or b"") == {"subject": "orders-value", "version": 2, "id": 7, "schema": B,
                                      "deleted": False}
    proto = SchemaValue("p", 1, 3, "PROTOBUF", "syntax = \"proto3\";", (Reference("dep.proto", "dep", 1),))
    assert json.loads(rec.schema_record(proto)[1] or b"") == {
        "subject": "p", "version": 1, "id": 3, "schemaType": "PROTOBUF",
        "references": [{"name": "dep.proto", "subject": "dep", "version": 1}],
        "schema": "syntax = \"proto3\";", "deleted": False}
    assert json.loads(rec.config_record(None, "FULL")[0]) == {"keytype": "CONFIG", "subject": None, "magic": 0}
    assert json.loads(rec.config_record("s", "FULL")[1] or b"") == {"compatibilityLevel": "FULL"}
    assert json.loads(rec.mode_record("s", "IMPORT")[1] or b"") == {"mode": "IMPORT"}
    assert json.loads(rec.delete_subject_record("s", 3)[0]) == {"keytype": "DELETE_SUBJECT", "subject": "s",
                                                                "magic": 0}
    assert json.loads(rec.delete_subject_record("s", 3)[1] or b"") == {"subject": "s", "version": 3}
    assert json.loads(rec.noop_record(5)[0]) == {"keytype": "NOOP", "magic": 0}


def test_reads_records_as_confluents_registry_writes_them() -> None:
    # Written by hand as Confluent's Jackson serializer lays them out (extra fields included).
    store = replay(
        (b'{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}',
         b'{"subject":"t-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false,"md5":"x"}'),
        (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL","alias":null}'),
        (b'{"keytype":"NOOP","magic":0}', None),
    )
    assert store.subjects() == ["t-value"]
    assert store.schema(1) == StoredSchema("AVRO", '"string"')
    assert store.config(None) == "FULL"
    assert store.offset == 2


def test_one_id_per_distinct_schema_shared_across_subjects() -> None:
    store = replay(rec.schema_record(value("a", 1, 1, A)), rec.schema_record(value("b", 1, 1, A)),
                   rec.schema_record(value("b", 2, 2, B)))
    assert store.id_of(StoredSchema("AVRO", A)) == 1
    assert store.id_of(StoredSchema("AVRO", B)) == 2
    assert [(h.subject, h.version) for h in store.holders(1)] == [("a", 1), ("b", 1)]
    assert store.max_id == 2
    # The same text of another type, or with other references, is another schema.
    assert store.id_of(StoredSchema("JSON", A)) is None


def test_soft_delete_keeps_versions_until_hard_delete() -> None:
    store = replay(rec.schema_record(value("s", 1, 1, A)), rec.schema_record(value("s", 2, 2, B)),
                   rec.schema_record(SchemaValue("s", 1, 1, "AVRO", A, deleted=True)))
    assert [v.version for v in store.versions("s")] == [2]
    assert [v.version for v in store.versions("s", deleted=True)] == [1, 2]
    assert store.schema(1) is not None  # a soft-deleted version's id still resolves
    store.apply(*rec.delete_subject_record("s", 2))
    assert store.subjects() == [] and store.subjects(deleted=True) == ["s"]
    assert not store.has_subject("s") and store.has_subject("s", deleted=True)
    assert store.latest_version_number("s") == 2  # numbers stay taken while soft-deleted
    store.apply(*rec.schema_tombstone("s", 1))
    assert store.schema(1) is None and store.schema(2) is not None
    store.apply(*rec.clear_subject_record("s"))
    assert store.subjects(deleted=True) == [] and store.schema(2) is None
    assert store.max_id == 2  # ids are not given back


def test_hard_deleted_ids_stay_used_through_the_noop_high_water_mark() -> None:
    # After compaction only the NOOP (one key, its last value) remembers id 9 was issued.
    store = replay(rec.schema_record(value("s", 1, 4, A)), rec.noop_record(9))
    assert store.max_id == 9
    store.apply(*rec.noop_record(3))
    assert store.max_id == 9


def test_shared_id_survives_hard_delete_of_one_holder() -> None:
    store = replay(rec.schema_record(value("a", 1, 1, A)), rec.schema_record(value("b", 1, 1, A)),
                   rec.schema_tombstone("a", 1))
    assert store.schema(1) == StoredSchema("AVRO", A)
    assert store.id_of(StoredSchema("AVRO", A)) == 1


def test_config_and_mode_global_and_per_subject_with_deletes() -> None:
    store = replay(rec.config_record(None, "NONE"), rec.config_record("s", "FULL_TRANSITIVE"),
                   rec.mode_record(None, "READONLY"), rec.mode_record("s", "IMPORT"))
    assert (store.config(None), store.config("s"), store.config("t")) == ("NONE", "FULL_TRANSITIVE", None)
    assert (store.mode(None), store.mode("s")) == ("READONLY", "IMPORT")
    store.apply(*rec.config_record("s", None))
    store.apply(*rec.mode_record(None, None))
    assert store.config("s") is None and store.mode(None) is None and store.mode("s") == "IMPORT"


def test_references_and_referenced_by() -> None:
    ref = (Reference("com.acme.Money", "money", 1),)
    store = replay(rec.schema_record(value("money", 1, 1, A)),
                   rec.schema_record(value("order", 1, 2, B, references=ref)))
    assert store.referenced_by("money", 1) == [2]
    assert store.schema(2) == StoredSchema("AVRO", B, ref)
    assert store.id_of(StoredSchema("AVRO", B)) is None


@pytest.mark.parametrize("key,val", [
    (b"not json", b"{}"),
    (b'{"keytype":"SOMETHING_NEW","magic":0}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"t","version":1,"id":1,"schema":"x"}'),
    (None, b"{}"),
])
def test_records_not_understood_are_skipped_not_fatal(key: bytes | None, val: bytes) -> None:
    store = replay((key or b"", val) if key is not None else (b"", val), rec.schema_record(value("s", 1, 1)))
    assert store.skipped == 1
    assert store.subjects() == ["s"]


def test_records_of_a_superseded_writer_are_ignored() -> None:
    a1 = rec.stamp(rec.schema_record(value("a", 1, 1, A)), 1)
    store = replay(rec.noop_record(0, 1), a1)
    assert store.writer_epoch == 1 and store.subjects() == ["a"]
    # Writer 2 claims epoch 2; writer 1, paused through the election, resumes and writes id 2.
    store.apply(*rec.noop_record(1, 2), 2)
    store.apply(*rec.stamp(rec.schema_record(value("zombie", 1, 2, B)), 1), 3)
    assert store.rejected[-1] == 3 and store.subjects() == ["a"] and store.schema(2) is None
    store.apply(*rec.stamp(rec.schema_record(value("b", 1, 2, B)), 2), 4)
    assert store.subjects() == ["a", "b"] and store.schema(2) == StoredSchema("AVRO", B)
    # An epoch can be claimed once: a second claim of 2 (or a lower one) is ignored.
    store.apply(*rec.noop_record(2, 2), 5)
    assert (store.writer_epoch, store.writer_epoch_offset, store.rejected[-1]) == (2, 2, 5)
    # Records without an epoch (a Confluent registry wrote them; tombstones) always apply.
    store.apply(*rec.schema_record(value("c", 1, 3, '"x"')), 6)
    store.apply(*rec.schema_tombstone("c", 1), 7)
    assert store.subjects() == ["a", "b"] and store.max_id == 3
    stamped = json.loads(rec.stamp(rec.config_record(None, "FULL"), 4)[1] or b"")
    assert stamped == {"compatibilityLevel": "FULL", "writerEpoch": 4}


def compacted(records: list[rec.Record]) -> list[rec.Record]:
    """What log compaction leaves: each key's last record, in log order."""
    last = {key: offset for offset, (key, _) in enumerate(records)}
    return [r for offset, r in enumerate(records) if last[r[0]] == offset]


def test_fenced_records_stay_fenced_after_compaction_once_repaired() -> None:
    log = [
        rec.noop_record(0, 1),
        rec.stamp(rec.schema_record(value("s", 1, 1, A)), 1),
        rec.noop_record(1, 2),  # a new writer claims epoch 2
        # The old writer, resumed with stale state, writes version 2 of s with id 2 ...
        rec.stamp(rec.schema_record(value("s", 2, 2, B)), 1),
        # ... and the new writer hands out id 2 elsewhere.
        rec.stamp(rec.schema_record(value("t", 1, 2, '"t"')), 2),
        rec.noop_record(2, 3),  # a later election: compaction drops the epoch-2 claim
    ]
    store = replay(*log)
    assert [v.version for v in store.versions("s")] == [1]
    assert list(store.unrepaired) == [log[3][0]]
    # Unrepaired, compaction would bring the stale record back: id 2 twice.
    assert replay(*compacted(log)).version("s", 2) is not None
    repairs = store.repairs()
    assert repairs == [(log[3][0], None)]  # s version 2 never existed: a tombstone
    log += [rec.stamp(r, 3) for r in repairs]
    again = replay(*log)
    assert not again.unrepaired
    after = replay(*compacted(log))
    for state in (store, again, after):
        assert [v.version for v in state.versions("s")] == [1]
        assert state.holders(2) == [value("t", 1, 2, '"t"')]


def test_the_high_water_noop_of_a_write_is_not_an_epoch_claim() -> None:
    store = replay(rec.noop_record(0, 1), rec.stamp(rec.noop_record(7), 1))
    assert (store.writer_epoch, store.max_id, list(store.rejected)) == (1, 7, [])
