"""Share sessions (``share/sessions.py``): opening, epochs, partitions added and forgotten,
closing, and the least recently used session evicted when the cache is full."""

from __future__ import annotations

import uuid

import pytest
from riverlog.protocol.errors import ErrorCode
from riverlog.share.sessions import MAX_EPOCH, ShareSessionCache, ShareSessionError, next_epoch

pytestmark = pytest.mark.unit

T = uuid.UUID(int=1)


def test_epochs_move_on_and_mismatches_are_refused() -> None:
    cache = ShareSessionCache()
    session = cache.open("g", "m", [(T, 0), (T, 0), (T, 1)])
    assert (session.epoch, session.partitions) == (1, [(T, 0), (T, 1)])
    assert cache.advance("g", "m", 1).epoch == 2
    with pytest.raises(ShareSessionError) as stale:
        cache.advance("g", "m", 1)
    assert stale.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    with pytest.raises(ShareSessionError) as missing:
        cache.advance("g", "other", 1)
    assert missing.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert next_epoch(MAX_EPOCH) == 1


def test_partitions_added_and_forgotten_and_close() -> None:
    cache = ShareSessionCache()
    session = cache.open("g", "m", [(T, 0)])
    session.update([(T, 1), (T, 2)], [(T, 0)])
    assert session.partitions == [(T, 1), (T, 2)]
    assert cache.close("g", "m") is session
    assert cache.close("g", "m") is None


def test_the_least_recently_used_session_is_evicted_when_full() -> None:
    cache = ShareSessionCache(max_sessions=2)
    cache.open("g", "a", [])
    cache.open("g", "b", [])
    cache.advance("g", "a", 1)  # a is used after b
    cache.open("g", "c", [])
    assert set(cache.sessions) == {("g", "a"), ("g", "c")}
