"""The share coordinator's records (``share/state_records.py``: Kafka's ShareSnapshot and
ShareUpdate, checked against the JSON specs in Kafka 4.3.1's share-coordinator jar) and its
state machine (``share/state_shard.py``): initialize, write, read, delete, fencing by state and
leader epoch, loading from the records, and a ShareUpdate applied over its snapshot."""

from __future__ import annotations

import json
import re
import uuid
import zipfile

import pytest
from riverlog.protocol.errors import ErrorCode
from riverlog.share import state_records
from riverlog.share.partition import RecordState, SharePartition, StateBatch
from riverlog.share.state_records import ShareSnapshot, ShareStateKey, ShareStateRecord, ShareUpdate
from riverlog.share.state_shard import ShareStateShard
from support.brokers import kafka_dist

pytestmark = pytest.mark.unit

KEY = ShareStateKey("g", uuid.UUID(int=9), 1)
A, ACK, ARCH = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def kafka_spec(name: str) -> dict:
    libs = kafka_dist.install()
    jar = libs / f"kafka-share-coordinator-{kafka_dist.kafka_version()}.jar"
    with zipfile.ZipFile(jar) as zf:
        text = zf.read(f"common/message/{name}.json").decode()
    return json.loads(re.sub(r"(?m)^\s*//.*$", "", text))


def names(fields: list[dict]) -> list[str]:
    return [re.sub(r"(?<!^)(?=[A-Z])", "_", fld["name"]).lower() for fld in fields]


@pytest.mark.parametrize(("name", "ours"), [
    ("ShareSnapshotKey", state_records._KEY), ("ShareUpdateKey", state_records._KEY),
    ("ShareSnapshotValue", state_records._SNAPSHOT_VALUE), ("ShareUpdateValue", state_records._UPDATE_VALUE)])
def test_layouts_follow_kafkas_specs(name: str, ours: object) -> None:
    spec = kafka_spec(name)
    fields = ours.fields  # type: ignore[attr-defined]
    assert [fld.name for fld in fields] == names(spec["fields"])
    for fld, j in zip(fields, spec["fields"], strict=True):
        assert fld.tag == j.get("tag"), fld.name
        if "fields" in j:
            assert [x.name for x in fld.type.item.fields] == names(j["fields"])
    if name.endswith("Key"):
        assert spec["apiKey"] == (0 if "Snapshot" in name else 1)


def test_records_round_trip_and_a_known_encoding() -> None:
    snapshot = ShareStateRecord(KEY, ShareSnapshot(2, 1, 5, 10, (StateBatch(10, 12, A, 1),), 3, 100, 200))
    update = ShareStateRecord(KEY, ShareUpdate(2, 5, 11, (StateBatch(11, 11, ACK, 1),), 4), state_records.UPDATE)
    tombstone = ShareStateRecord(KEY, None)
    for record in (snapshot, update, tombstone):
        assert state_records.decode(*state_records.encode(record)) == record
    key, _ = state_records.encode(snapshot)
    assert key == b"\x00\x00" + b"\x00\x01g" + KEY.topic_id.bytes + b"\x00\x00\x00\x01"


def test_write_then_read_and_load_from_the_records() -> None:
    shard = ShareStateShard(0)
    assert shard.read(KEY, 0) == (ErrorCode.NONE, None)
    part = SharePartition(0)
    part.acquire("m", 0, 5, 100)
    decision = shard.write(KEY, 0, 3, part.start_offset, tuple(part.state_batches()), 0, 1000)
    assert decision.error == ErrorCode.NONE and len(decision.records) == 1
    error, state = shard.read(KEY, 3)
    assert error == ErrorCode.NONE and state is not None
    again = SharePartition.from_state(state.start_offset, state.batches)
    assert again.state_batches() == part.state_batches()
    loaded = ShareStateShard(0)
    for record in decision.records:
        loaded.replay(state_records.decode(*state_records.encode(record)))
    assert loaded.states == shard.states


def test_stale_leaders_and_state_epochs_are_fenced() -> None:
    shard = ShareStateShard(0)
    shard.write(KEY, 1, 5, 0, (), -1, 1)
    assert shard.write(KEY, 1, 4, 0, (), -1, 2).error == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write(KEY, 0, 6, 0, (), -1, 2).error == ErrorCode.FENCED_STATE_EPOCH
    assert shard.read(KEY, 4)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.read(KEY, -1)[0] == ErrorCode.NONE  # an admin's summary is not fenced
    assert shard.write(KEY, 1, 6, 3, (StateBatch(3, 3, A, 2),), -1, 3).error == ErrorCode.NONE
    assert shard.states[KEY].snapshot_epoch == 1


def test_initialize_moves_the_state_epoch_and_resets_the_state() -> None:
    shard = ShareStateShard(0)
    shard.write(KEY, 0, 5, 7, (StateBatch(7, 9, A, 1),), -1, 1)
    assert shard.initialize(KEY, 0, 100, 2).error == ErrorCode.FENCED_STATE_EPOCH
    assert shard.initialize(KEY, 1, 100, 2).error == ErrorCode.NONE
    state = shard.states[KEY]
    assert (state.state_epoch, state.start_offset, state.batches) == (1, 100, ())
    assert shard.write(KEY, 0, 6, 7, (), -1, 3).error == ErrorCode.FENCED_STATE_EPOCH


def test_delete_writes_a_tombstone() -> None:
    shard = ShareStateShard(0)
    assert shard.delete(KEY).records == []
    shard.write(KEY, 0, 0, 0, (), -1, 1)
    [tombstone] = shard.delete(KEY).records
    assert tombstone.value is None and KEY not in shard.states


def test_an_update_applies_over_its_snapshot() -> None:
    shard = ShareStateShard(0)
    shard.replay(ShareStateRecord(KEY, ShareSnapshot(0, 0, 1, 10, (StateBatch(10, 14, A, 1),))))
    shard.replay(ShareStateRecord(KEY, ShareUpdate(0, 1, 11, (StateBatch(12, 12, ARCH, 5),)), state_records.UPDATE))
    assert shard.states[KEY].start_offset == 11
    assert shard.states[KEY].batches == (StateBatch(11, 11, A, 1), StateBatch(12, 12, ARCH, 5),
                                         StateBatch(13, 14, A, 1))
