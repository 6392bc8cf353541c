"""The share-partitions a broker leads: one :class:`SharePartition` per (group, topic id,
partition), taken up on a group's first fetch and kept durable through the share coordinator.

Taking a share-partition up reads its state (``persister.py``): a share-partition written before
-- by this broker or by the partition's previous leader -- continues from its start offset and
in-flight batches (locks do not survive a move: acquired records come back available, with
their delivery counts); one never written starts where the group's ``share.auto.offset.reset``
says, and that start is written at once, so a leader change does not move it. The group's
share-partition settings (lock duration, delivery count limit, record locks: group configs over
the broker's) are handed in at every fetch, so a changed group config applies from the next
fetch on, as Kafka reads them when it acquires records. After acknowledgements the whole
in-flight state is written again (one write at a time per share-partition, so the last write
always carries the newest state, and the acknowledgements made during one share the next); an
acknowledgement whose write fails is taken back, so its records are delivered again once their
lock lapses, as Kafka's are. A share-partition taken up in an older leader epoch is dropped and
read again: another leader may have moved it on meanwhile; so is one whose write was fenced, and
one nobody holds records of when a share session opens on it (offsets altered by an admin while
the group was empty take effect).

The asyncio shell around the pure share-partitions: the handlers pass the log's offsets and the
time in.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..group_config import LATEST, ShareReset, effective_int, limits_from
from ..protocol.errors import ErrorCode, KafkaError
from .partition import AcknowledgementUndo, SharePartition, ShareSettings, StateBatch

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from .persister import SharePersister

log = logging.getLogger(__name__)

ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


def share_settings(config: BrokerConfig, overrides: Mapping[str, str] | None = None) -> ShareSettings:
    """A group's share-partition settings: its group configs (``overrides``) over the broker's."""
    limits = limits_from(config.props)
    return ShareSettings(
        record_lock_duration_ms=effective_int(overrides, "share.record.lock.duration.ms",
                                              config.get_int("group.share.record.lock.duration.ms"), limits),
        delivery_count_limit=effective_int(overrides, "share.delivery.count.limit",
                                           config.get_int("group.share.delivery.count.limit"), limits),
        max_record_locks=effective_int(overrides, "share.partition.max.record.locks",
                                       config.get_int("group.share.partition.max.record.locks"), limits),
    )


@dataclass(frozen=True)
class Start:
    """What a share-partition without state needs to choose its start offset."""

    reset: ShareReset = LATEST
    now_ms: int = 0
    offset_for_timestamp: Callable[[int], int | None] | None = None


@dataclass
class _WriteRound:
    """Acknowledgements waiting for the next state write: one write carries them all."""

    done: asyncio.Future[ErrorCode]
    undos: list[AcknowledgementUndo] = field(default_factory=list)


# What a state write carries: state epoch, leader epoch, start offset, state batches, and the
# in-flight records already done.
_State = tuple[int, int, int, list[StateBatch], int]


@dataclass
class _Entry:
    part: SharePartition
    leader_epoch: int
    writer: asyncio.Task[None] | None = None  # writing the rounds, while there are any
    next_round: _WriteRound | None = None

    @property
    def writing(self) -> bool:
        return self.writer is not None and not self.writer.done()


def _state_of(entry: _Entry) -> _State:
    part = entry.part
    return part.state_epoch, entry.leader_epoch, part.start_offset, part.state_batches(), part.delivery_complete_count()


class SharePartitionManager:
    def __init__(self, settings: ShareSettings, persister: SharePersister | None = None) -> None:
        self.settings = settings  # the broker's; a group's own come with each take_up
        self.persister = persister
        self._entries: dict[ShareKey, _Entry] = {}
        self._taking_up: dict[ShareKey, asyncio.Lock] = {}

    async def take_up(self, key: ShareKey, leader_epoch: int, log_start_offset: int, log_end_offset: int,
                      settings: ShareSettings | None = None, start: Start | None = None) -> SharePartition:
        """The share-partition, read from the share coordinator the first time in this leader
        epoch, with the group's ``settings`` from now on; ``start`` says where one without state
        starts. Raises KafkaError when its state cannot be read or its start written."""
        settings = settings or self.settings
        start = start or Start()
        entry = self._entries.get(key)
        if entry is None or entry.leader_epoch != leader_epoch:
            lock = self._taking_up.setdefault(key, asyncio.Lock())
            async with lock:
                entry = self._entries.get(key)
                if entry is None or entry.leader_epoch != leader_epoch:
                    entry = await self._read(key, leader_epoch, log_start_offset, log_end_offset, settings, start)
                    self._entries[key] = entry
        entry.part.settings = settings
        entry.part.advance_log_start(log_start_offset)
        return entry.part

    async def _read(self, key: ShareKey, leader_epoch: int, log_start: int, log_end: int,
                    settings: ShareSettings, start: Start) -> _Entry:
        def fresh() -> SharePartition:
            return SharePartition.initialize(start.reset, log_start, log_end, settings, now_ms=start.now_ms,
                                             offset_for_timestamp=start.offset_for_timestamp)

        if self.persister is None:
            return _Entry(fresh(), leader_epoch)
        code, state = await self.persister.read(*key, leader_epoch)
        if code != ErrorCode.NONE or state is None:
            raise KafkaError(f"reading the share state of {key}: {code.name}", code)
        if state.start_offset >= 0:
            part = SharePartition.from_state(state.start_offset, state.batches, settings, state.state_epoch)
            log.info("share group %s: %s-%d taken up from its state at offset %d", key[0], key[1], key[2],
                     part.start_offset)
            return _Entry(part, leader_epoch)
        entry = _Entry(fresh(), leader_epoch)
        code = await self._write(key, entry)
        if code != ErrorCode.NONE:
            raise KafkaError(f"writing the start of {key}: {code.name}", code)
        return entry

    def refresh_if_idle(self, key: ShareKey) -> None:
        """A share session opens on the partition: a share-partition nobody holds records of is
        read again at its next fetch, so offsets altered meanwhile (a new state epoch) apply."""
        entry = self._entries.get(key)
        if entry is not None and entry.part.acquired_count() == 0 and not entry.writing:
            del self._entries[key]

    def get(self, key: ShareKey, leader_epoch: int) -> SharePartition | None:
        entry = self._entries.get(key)
        return entry.part if entry is not None and entry.leader_epoch == leader_epoch else None

    def persist_soon(self, key: ShareKey, undo: AcknowledgementUndo | None = None) -> asyncio.Future[ErrorCode]:
        """Have the share-partition's state written (after acknowledgements); a future of the
        outcome. Writes go one at a time per share-partition, so the last one always carries the
        newest state. With none under way the write starts here, with the state as it is now (a
        ShareFetch asks before acquiring more records, so the write carries no new acquisitions);
        else the acknowledgement joins the next write, which all acknowledgements made meanwhile
        share (group commit: members acknowledging the same partition wait for one write, not one
        each). When a write fails, the acknowledgements ``undo`` describes are taken back."""
        loop = asyncio.get_running_loop()
        entry = self._entries.get(key)
        if entry is None or self.persister is None:
            done: asyncio.Future[ErrorCode] = loop.create_future()
            done.set_result(ErrorCode.NONE)
            return done
        if entry.writing:
            round_ = entry.next_round
            if round_ is None:
                round_ = entry.next_round = _WriteRound(loop.create_future())
            if undo is not None:
                round_.undos.append(undo)
            return round_.done
        round_ = _WriteRound(loop.create_future(), [undo] if undo is not None else [])
        entry.writer = loop.create_task(self._write_rounds(key, entry, round_, _state_of(entry)))
        return round_.done

    async def _write_rounds(self, key: ShareKey, entry: _Entry, round_: _WriteRound, state: _State) -> None:
        while True:
            try:
                code = await self._send(key, state)
            except Exception:
                log.exception("share group %s: writing the state of %s-%d failed", key[0], key[1], key[2])
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            if code != ErrorCode.NONE:
                for undo in reversed(round_.undos):
                    entry.part.rollback(undo)
            if code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH) \
                    and self._entries.get(key) is entry:
                # Altered offsets or a newer leader: what this broker holds is stale, read it again.
                del self._entries[key]
            round_.done.set_result(code)
            if entry.next_round is None:
                return
            # The next round's state is taken now: it holds every acknowledgement that joined it
            # (each was applied before it joined).
            round_, entry.next_round = entry.next_round, None
            state = _state_of(entry)

    async def _write(self, key: ShareKey, entry: _Entry) -> ErrorCode:
        return await self._send(key, _state_of(entry))

    async def _send(self, key: ShareKey, state: _State) -> ErrorCode:
        if self.persister is None:
            return ErrorCode.NONE
        group_id, topic_id, partition = key
        state_epoch, leader_epoch, start_offset, batches, done = state
        return await self.persister.write(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset,
                                          batches, done)

    def items(self) -> list[tuple[ShareKey, int, SharePartition]]:
        """(key, leader epoch taken up in, share-partition) of every share-partition held here."""
        return [(key, entry.leader_epoch, entry.part) for key, entry in self._entries.items()]

    def release_member(self, group_id: str, member_id: str, now_ms: int) -> None:
        """A member's share session closed: what it holds on this broker is released."""
        for (group, _, _), entry in self._entries.items():
            if group == group_id:
                entry.part.expire_locks(now_ms)
                entry.part.release_member(member_id)
