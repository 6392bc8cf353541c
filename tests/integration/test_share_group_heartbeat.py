"""ShareGroupHeartbeat, ShareGroupDescribe and ListGroups for a KIP-932 share group, spoken over
the wire by four members the way KafkaShareConsumer does (client-generated member ids, epoch 0 to
join, -1 to leave): every member is assigned a partition of the 2-partition topic, both
partitions are covered, and a member leaving is gone from the description."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

GROUP = "share-heartbeat-group"
WAIT_S = 60.0


async def heartbeat(conn: BrokerConnection, member_id: str, epoch: int, topics: list[str] | None) -> dict:
    return await conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, {
        "group_id": GROUP, "member_id": member_id, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": topics})


async def wait_for_coordinator(conn: BrokerConnection) -> None:
    """FindCoordinator until the group's coordinator is ready (the first call makes the broker
    create ``__consumer_offsets``), as a client does before its first heartbeat."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        resp = await conn.request(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [GROUP]})
        if resp["coordinators"][0]["error_code"] == ErrorCode.NONE:
            probe = await heartbeat(conn, str(uuid.uuid4()), 1, None)  # unknown member: answered by a loaded shard
            if probe["error_code"] in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_MEMBER_ID):
                return
        await asyncio.sleep(0.5)
    raise AssertionError("the group coordinator did not become available")


async def scenario(host: str, port: int, topic_id: uuid.UUID) -> None:
    conn = await BrokerConnection.connect(host, port)
    try:
        await wait_for_coordinator(conn)
        members = {str(uuid.uuid4()): 0 for _ in range(4)}
        assigned: dict[str, list[int]] = {}
        for member_id in members:
            resp = await heartbeat(conn, member_id, 0, ["queue"])
            assert resp["error_code"] == ErrorCode.NONE, resp
            assert resp["member_id"] == member_id and resp["member_epoch"] > 0
            members[member_id] = resp["member_epoch"]
            if resp["assignment"] is not None:
                assigned[member_id] = [p for tp in resp["assignment"]["topic_partitions"]
                                       if tp["topic_id"] == topic_id for p in tp["partitions"]]
        # Heartbeat until every member holds a partition (Kafka initializes the share-partitions'
        # state before it assigns them, so the first answers may hold nothing yet).
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for member_id, epoch in members.items():
                resp = await heartbeat(conn, member_id, epoch, None)
                assert resp["error_code"] == ErrorCode.NONE, resp
                members[member_id] = resp["member_epoch"]
                if resp["assignment"] is not None:
                    assigned[member_id] = [p for tp in resp["assignment"]["topic_partitions"]
                                           if tp["topic_id"] == topic_id for p in tp["partitions"]]
            if len(assigned) == 4 and all(assigned.values()):
                break
            await asyncio.sleep(0.5)
        assert len(assigned) == 4 and all(assigned.values()), assigned
        assert {p for parts in assigned.values() for p in parts} == {0, 1}

        described = await conn.request(ApiKey.SHARE_GROUP_DESCRIBE, {"group_ids": [GROUP],
                                                                     "include_authorized_operations": False})
        [group] = described["groups"]
        assert (group["error_code"], group["group_state"], group["assignor_name"]) == (ErrorCode.NONE, "Stable",
                                                                                       "simple")
        assert {m["member_id"] for m in group["members"]} == set(members)
        for m in group["members"]:
            assert m["subscribed_topic_names"] == ["queue"]
            assert [tp["topic_name"] for tp in m["assignment"]["topic_partitions"]] == ["queue"]

        listed = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": ["share"]})
        assert [(g["group_id"], g["group_type"]) for g in listed["groups"]] == [(GROUP, "share")]

        leaving = next(iter(members))
        resp = await heartbeat(conn, leaving, -1, None)
        assert (resp["error_code"], resp["member_epoch"]) == (ErrorCode.NONE, -1)
        described = await conn.request(ApiKey.SHARE_GROUP_DESCRIBE, {"group_ids": [GROUP],
                                                                     "include_authorized_operations": False})
        assert leaving not in {m["member_id"] for m in described["groups"][0]["members"]}
        # A heartbeat at a member epoch the coordinator never gave is fenced.
        some, epoch = list(members.items())[1]
        resp = await heartbeat(conn, some, epoch + 100, None)
        assert resp["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
        # Joining needs a subscription (Kafka's request check).
        resp = await heartbeat(conn, str(uuid.uuid4()), 0, None)
        assert resp["error_code"] == ErrorCode.INVALID_REQUEST
    finally:
        await conn.close()


def test_share_group_members_are_assigned_and_described(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic("queue", 2, 1)]).values():
        fut.result(15)
    host, port = broker.bootstrap.rsplit(":", 1)
    metadata = asyncio.run(_topic_id(host, int(port)))
    asyncio.run(scenario(host, int(port), metadata))


async def _topic_id(host: str, port: int) -> uuid.UUID:
    conn = await BrokerConnection.connect(host, port)
    try:
        resp = await conn.request(ApiKey.METADATA, {"topics": [{"name": "queue", "topic_id": uuid.UUID(int=0)}],
                                                    "allow_auto_topic_creation": False})
        [topic] = resp["topics"]
        topic_id: uuid.UUID = topic["topic_id"]
        return topic_id
    finally:
        await conn.close()
