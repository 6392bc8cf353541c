"""The share-partition manager's state writes: one at a time per share-partition, and the
acknowledgements made while one is under way share the next (group commit); a failed write takes
back every acknowledgement it carried. The persister here is a stand-in that holds each write
until the test lets it through, so the test sees which acknowledgements share a write."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

import pytest
from riverlog.group_config import EARLIEST
from riverlog.protocol.errors import ErrorCode
from riverlog.share.manager import SharePartitionManager, Start
from riverlog.share.partition import AcknowledgementBatch, AcknowledgeType, ShareSettings, StateBatch
from riverlog.share.persister import PersistedState, SharePersister

pytestmark = pytest.mark.unit

KEY = ("g", uuid.UUID(int=7), 0)
SETTINGS = ShareSettings(record_lock_duration_ms=30_000, delivery_count_limit=5, max_record_locks=200)


class HeldPersister:
    """Answers reads with "never written"; holds every write until ``let_through``."""

    def __init__(self) -> None:
        self.writes: list[list[StateBatch]] = []
        self.codes: list[ErrorCode] = []  # the outcome of each write, in order (NONE past the end)
        self._gate = asyncio.Event()

    async def read(self, *_: Any) -> tuple[ErrorCode, PersistedState]:
        return ErrorCode.NONE, PersistedState(0, -1, ())

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch], delivery_complete_count: int) -> ErrorCode:
        number = len(self.writes)
        self.writes.append(list(batches))
        await self._gate.wait()
        return self.codes[number] if number < len(self.codes) else ErrorCode.NONE

    def let_through(self) -> None:
        self._gate.set()

    def hold(self) -> None:
        self._gate.clear()


async def _three_members_holding_records(persister: HeldPersister) -> SharePartitionManager:
    manager = SharePartitionManager(SETTINGS, cast(SharePersister, persister))
    persister.let_through()  # the start of a share-partition never written is written at once
    part = await manager.take_up(KEY, 0, 0, 9, SETTINGS, Start(EARLIEST))
    persister.hold()
    for member in "abc":
        part.acquire(member, 0, 9, 3)
    return manager


def _accept(manager: SharePartitionManager, member: str, first: int) -> Any:
    part = manager.get(KEY, 0)
    assert part is not None
    undo = part.acknowledge(member, [AcknowledgementBatch(first, first + 2, (AcknowledgeType.ACCEPT,))], 0)
    return manager.persist_soon(KEY, undo)


def test_acknowledgements_made_during_a_write_share_the_next_one() -> None:
    async def scenario() -> None:
        persister = HeldPersister()
        manager = await _three_members_holding_records(persister)
        first = _accept(manager, "a", 0)
        await asyncio.sleep(0)  # a's write is under way
        later = [_accept(manager, "b", 3), _accept(manager, "c", 6)]
        await asyncio.sleep(0)
        assert len(persister.writes) == 2  # the start, then a's alone
        persister.let_through()
        assert await first == ErrorCode.NONE
        assert await asyncio.gather(*later) == [ErrorCode.NONE, ErrorCode.NONE]
        assert len(persister.writes) == 3  # b's and c's together
        part = manager.get(KEY, 0)
        assert part is not None and part.start_offset == 9 and part.acquired_count() == 0

    asyncio.run(scenario())


def test_a_failed_write_takes_back_every_acknowledgement_it_carried() -> None:
    async def scenario() -> None:
        persister = HeldPersister()
        manager = await _three_members_holding_records(persister)
        persister.codes = [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE]
        first = _accept(manager, "a", 0)
        await asyncio.sleep(0)
        later = [_accept(manager, "b", 3), _accept(manager, "c", 6)]
        await asyncio.sleep(0)
        persister.let_through()
        assert await first == ErrorCode.NONE
        assert await asyncio.gather(*later) == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
        part = manager.get(KEY, 0)
        assert part is not None
        # a's acceptance stands; b and c hold their records again, to acknowledge once more.
        assert part.acquired_by("a") == [] and part.acquired_by("b") == [3, 4, 5] and part.acquired_by("c") == [6, 7, 8]
        assert part.start_offset == 3

    asyncio.run(scenario())


def test_a_write_carries_the_state_as_it_was_asked_for_not_later_acquisitions() -> None:
    # A ShareFetch asks for its acknowledgements' write before it acquires more records: the write
    # must not carry those (the state written would grow with every fetch's new records).
    async def scenario() -> None:
        persister = HeldPersister()
        manager = SharePartitionManager(SETTINGS, cast(SharePersister, persister))
        persister.let_through()
        part = await manager.take_up(KEY, 0, 0, 9, SETTINGS, Start(EARLIEST))
        part.acquire("a", 0, 3, 3)
        undo = part.acknowledge("a", [AcknowledgementBatch(0, 2, (AcknowledgeType.ACCEPT,))], 0)
        write = manager.persist_soon(KEY, undo)
        part.acquire("b", 0, 9, 6)  # the fetch that carried the acknowledgement, acquiring more
        assert await write == ErrorCode.NONE
        assert persister.writes[-1] == []  # start offset 3, nothing in flight as of the ask
        assert part.acquired_by("b") == [3, 4, 5, 6, 7, 8]

    asyncio.run(scenario())
