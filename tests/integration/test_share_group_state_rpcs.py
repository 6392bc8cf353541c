"""The share coordinator's RPCs over the wire, as a partition leader uses them: FindCoordinator
with key type 2 for a share-partition, InitializeShareGroupState, WriteShareGroupState,
ReadShareGroupState, ReadShareGroupStateSummary, DeleteShareGroupState."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

WAIT_S = 60.0
GROUP = "state-group"
UNKNOWN_TOPIC_ID = uuid.UUID(int=0x1234)


def coordinator_key(topic_id: uuid.UUID) -> str:
    return f"{GROUP}:{base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}:0"


def topics(topic_id: uuid.UUID, **partition: object) -> list[dict]:
    return [{"topic_id": topic_id, "partitions": [{"partition": 0, **partition}]}]


async def until_served(conn: BrokerConnection, api: ApiKey, body: dict) -> dict:
    """Retry while the share coordinator is being created and loaded."""
    deadline = time.monotonic() + WAIT_S
    while True:
        resp = await conn.request(api, body)
        code = resp["results"][0]["partitions"][0]["error_code"]
        if code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.NOT_COORDINATOR) or time.monotonic() > deadline:
            return resp["results"][0]["partitions"][0]
        await asyncio.sleep(0.5)


async def scenario(host: str, port: int, topic_id: uuid.UUID) -> None:
    conn = await BrokerConnection.connect(host, port)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            found = await conn.request(ApiKey.FIND_COORDINATOR,
                                       {"key_type": 2, "coordinator_keys": [coordinator_key(topic_id)]})
            [coordinator] = found["coordinators"]
            if coordinator["error_code"] == ErrorCode.NONE or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert coordinator["error_code"] == ErrorCode.NONE, coordinator
        assert (coordinator["host"], coordinator["port"]) == (host, port)

        init = await until_served(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE,
                                  {"group_id": GROUP, "topics": topics(topic_id, state_epoch=1, start_offset=10)})
        assert init["error_code"] == ErrorCode.NONE, init
        batches = [{"first_offset": 10, "last_offset": 11, "delivery_state": 2, "delivery_count": 1},
                   {"first_offset": 12, "last_offset": 12, "delivery_state": 0, "delivery_count": 3}]
        written = await until_served(conn, ApiKey.WRITE_SHARE_GROUP_STATE, {"group_id": GROUP, "topics": topics(
            topic_id, state_epoch=1, leader_epoch=0, start_offset=10, delivery_complete_count=2,
            state_batches=batches)})
        assert written["error_code"] == ErrorCode.NONE, written
        read = await until_served(conn, ApiKey.READ_SHARE_GROUP_STATE,
                                  {"group_id": GROUP, "topics": topics(topic_id, leader_epoch=0)})
        assert (read["error_code"], read["state_epoch"], read["start_offset"]) == (ErrorCode.NONE, 1, 10)
        assert read["state_batches"] == batches
        summary = await until_served(conn, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
                                     {"group_id": GROUP, "topics": topics(topic_id, leader_epoch=0)})
        assert (summary["error_code"], summary["state_epoch"], summary["start_offset"]) == (ErrorCode.NONE, 1, 10)
        # A write from an older state epoch is fenced.
        stale = await until_served(conn, ApiKey.WRITE_SHARE_GROUP_STATE, {"group_id": GROUP, "topics": topics(topic_id,
            state_epoch=0, leader_epoch=0, start_offset=10, state_batches=[])})
        assert stale["error_code"] == ErrorCode.FENCED_STATE_EPOCH
        unknown = await until_served(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, {
            "group_id": GROUP, "topics": topics(UNKNOWN_TOPIC_ID, state_epoch=1, start_offset=0)})
        assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        deleted = await until_served(conn, ApiKey.DELETE_SHARE_GROUP_STATE,
                                     {"group_id": GROUP, "topics": topics(topic_id)})
        assert deleted["error_code"] == ErrorCode.NONE, deleted
    finally:
        await conn.close()


def test_share_state_written_read_and_deleted(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic("stateful", 1, 1)]).values():
        fut.result(15)
    host, port = broker.bootstrap.rsplit(":", 1)
    asyncio.run(scenario(host, int(port), asyncio.run(_topic_id(host, int(port)))))


async def _topic_id(host: str, port: int) -> uuid.UUID:
    conn = await BrokerConnection.connect(host, port)
    try:
        resp = await conn.request(ApiKey.METADATA, {"topics": [{"name": "stateful", "topic_id": uuid.UUID(int=0)}],
                                                    "allow_auto_topic_creation": False})
        topic_id: uuid.UUID = resp["topics"][0]["topic_id"]
        return topic_id
    finally:
        await conn.close()
