"""The fetch session cache (KIP-227, ``cluster/fetch_sessions.py``): epochs, updates, news-only
answers, fair order and Kafka's eviction rules. On the wire, against real clients and Kafka:
``tests/integration/test_fetch_sessions.py``."""

from __future__ import annotations

import random
import uuid

import pytest
from riverlog.cluster.fetch_sessions import (
    FETCH_SESSION_ID_NOT_FOUND,
    FETCH_SESSION_TOPIC_ID_ERROR,
    INVALID_FETCH_SESSION_EPOCH,
    MAX_EPOCH,
    CachedPartition,
    FetchPosition,
    FetchSessionCache,
    SessionError,
    next_epoch,
)
from riverlog.protocol.errors import ErrorCode

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.UUID(int=7)
EVICTION_MS = 120_000


def parts(n: int, offset: int = 0, topic: str = "t") -> list[CachedPartition]:
    return [CachedPartition(topic, TOPIC_ID, i, FetchPosition(offset, 1 << 20)) for i in range(n)]


def cache(slots: int = 10) -> FetchSessionCache:
    return FetchSessionCache(slots, EVICTION_MS, random.Random(1))


def test_error_codes_are_kafkas() -> None:
    assert FETCH_SESSION_ID_NOT_FOUND == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert INVALID_FETCH_SESSION_EPOCH == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert FETCH_SESSION_TOPIC_ID_ERROR == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_epochs_start_at_one_advance_per_request_and_wrap_past_the_initial_and_final() -> None:
    c = cache()
    session = c.create(parts(3), privileged=False, uses_topic_ids=True, now_ms=0)
    assert session is not None and session.session_id != 0 and session.epoch == 1
    assert c.incremental(session.session_id, 1, True, 10) is session
    assert session.epoch == 2
    with pytest.raises(SessionError) as wrong:
        c.incremental(session.session_id, 1, True, 20)  # a replayed or lost request
    assert wrong.value.code == INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(SessionError) as gone:
        c.incremental(session.session_id + 1, 2, True, 20)
    assert gone.value.code == FETCH_SESSION_ID_NOT_FOUND
    with pytest.raises(SessionError) as ids:
        c.incremental(session.session_id, 2, False, 20)
    assert ids.value.code == FETCH_SESSION_TOPIC_ID_ERROR
    assert next_epoch(MAX_EPOCH) == 1 and next_epoch(5) == 6


def test_incremental_updates_add_change_and_forget_partitions_in_order() -> None:
    c = cache()
    session = c.create(parts(3), privileged=False, uses_topic_ids=True, now_ms=0)
    assert session is not None
    moved = CachedPartition("t", TOPIC_ID, 1, FetchPosition(50, 1 << 20))
    added = CachedPartition("t", TOPIC_ID, 7, FetchPosition(0, 1 << 20))
    session.update([moved, added], [(TOPIC_ID, 0)])
    assert [(k[1], p.position.fetch_offset) for k, p in session.partitions.items()] == [(1, 50), (2, 0), (7, 0)]


def test_a_partition_that_returned_records_goes_last() -> None:
    c = cache()
    session = c.create(parts(4), privileged=False, uses_topic_ids=True, now_ms=0)
    assert session is not None
    session.rotate_to_back((TOPIC_ID, 1))
    assert [k[1] for k in session.partitions] == [0, 2, 3, 1]


def test_only_partitions_with_news_are_answered_and_what_was_sent_is_remembered() -> None:
    p = parts(1)[0]
    kw = {"error": 0, "last_stable_offset": 10, "log_start_offset": 0, "diverging": False}
    assert p.must_respond(records=0, high_watermark=10, **kw)  # first answer: everything is news
    assert not p.must_respond(records=0, high_watermark=10, **kw)
    assert p.must_respond(records=100, high_watermark=10, **kw)
    assert p.must_respond(records=0, high_watermark=10, **{**kw, "error": 6})
    assert p.must_respond(records=0, high_watermark=10, **kw)  # the error cleared: sent again
    assert not p.must_respond(records=0, high_watermark=10, **kw)
    assert p.must_respond(records=0, high_watermark=10, **{**kw, "log_start_offset": 4})
    assert p.must_respond(records=0, high_watermark=10, **{**kw, "diverging": True})


def test_no_session_for_an_empty_fetch_or_without_slots() -> None:
    assert cache().create([], privileged=False, uses_topic_ids=True, now_ms=0) is None
    assert cache(0).create(parts(2), privileged=False, uses_topic_ids=True, now_ms=0) is None


def test_a_full_cache_evicts_a_session_unused_for_the_eviction_time_first() -> None:
    c = cache(2)
    old = c.create(parts(50), privileged=True, uses_topic_ids=True, now_ms=0)
    busy = c.create(parts(50), privileged=True, uses_topic_ids=True, now_ms=0)
    assert old is not None and busy is not None
    c.incremental(busy.session_id, 1, True, EVICTION_MS)
    assert c.create(parts(1), privileged=False, uses_topic_ids=True, now_ms=EVICTION_MS + 1) is not None
    assert c.get(old.session_id) is None and c.get(busy.session_id) is busy
    assert c.evictions == 1


def test_young_consumer_sessions_are_safe_from_consumers_but_not_from_followers() -> None:
    c = cache(1)
    consumer = c.create(parts(10), privileged=False, uses_topic_ids=True, now_ms=0)
    assert consumer is not None
    # Another consumer, even with more partitions, may not evict a session younger than the eviction time.
    assert c.create(parts(100), privileged=False, uses_topic_ids=True, now_ms=1000) is None
    # A follower may.
    follower = c.create(parts(1), privileged=True, uses_topic_ids=True, now_ms=1000)
    assert follower is not None and c.get(consumer.session_id) is None
    # A young follower session is safe from everyone.
    assert c.create(parts(500), privileged=True, uses_topic_ids=True, now_ms=2000) is None


def test_old_sessions_go_to_a_more_valuable_newcomer_only() -> None:
    c = cache(2)
    small = c.create(parts(5), privileged=False, uses_topic_ids=True, now_ms=0)
    big = c.create(parts(20), privileged=False, uses_topic_ids=True, now_ms=0)
    assert small is not None and big is not None
    now = EVICTION_MS + 10
    for s in (small, big):  # both in use, both old enough to be evictable
        c.incremental(s.session_id, 1, True, now)
    # The least valuable evictable session (5 partitions) goes only to a bigger newcomer.
    assert c.create(parts(5), privileged=False, uses_topic_ids=True, now_ms=now) is None
    newcomer = c.create(parts(6), privileged=False, uses_topic_ids=True, now_ms=now)
    assert newcomer is not None and c.get(small.session_id) is None and c.get(big.session_id) is big
