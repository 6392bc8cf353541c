"""DescribeTopicPartitions (Kafka 4's paginated topic description) against a live broker."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey

pytestmark = pytest.mark.integration


async def describe_all(host: str, port: int, names: list[str], limit: int) -> list[dict]:
    """Follow the cursor page by page, as Kafka's admin client does."""
    conn = await BrokerConnection.connect(host, port)
    pages = []
    cursor = None
    try:
        for _ in range(20):
            resp = await conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {
                "topics": [{"name": n} for n in names], "response_partition_limit": limit, "cursor": cursor})
            pages.append(resp)
            cursor = resp["next_cursor"]
            if cursor is None:
                break
    finally:
        await conn.close()
    return pages


def test_paginated_description_covers_every_partition_once(broker_factory) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic("alpha", 5, 1), NewTopic("beta", 2, 1)]).values():
        fut.result(15)
    host, port = broker.bootstrap.rsplit(":", 1)
    pages = asyncio.run(describe_all(host, int(port), ["beta", "alpha", "nope"], limit=3))
    seen = [(t["name"], p["partition_index"]) for page in pages for t in page["topics"] for p in t["partitions"]]
    assert sorted(seen) == [("alpha", i) for i in range(5)] + [("beta", 0), ("beta", 1)]
    assert len(seen) == len(set(seen))
    assert all(len([p for t in page["topics"] for p in t["partitions"]]) <= 3 for page in pages)
    assert len(pages) == 3  # 7 partitions, 3 per page
    unknown = [t for page in pages for t in page["topics"] if t["name"] == "nope"]
    assert unknown and unknown[0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    first = next(t for t in pages[0]["topics"] if t["name"] == "alpha")
    assert first["partitions"][0]["leader_id"] == 1 and first["partitions"][0]["isr_nodes"] == [1]
