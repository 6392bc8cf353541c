"""The share-partition state machine (``riverlog.share.partition``), with explicit times: SPSO and
SPEO, acquisition with locks and delivery counts, each acknowledgement type, lock expiry, a
leaving member, the delivery count limit, the in-flight window, ``share.auto.offset.reset``,
the log start moving, and the persisted state batches."""

from __future__ import annotations

import pytest
from riverlog.group_config import EARLIEST, LATEST
from riverlog.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    InvalidAcknowledgement,
    InvalidRecordState,
    RecordState,
    SharePartition,
    ShareSettings,
    StateBatch,
)

pytestmark = pytest.mark.unit

LOCK = 1000
SETTINGS = ShareSettings(record_lock_duration_ms=LOCK, delivery_count_limit=3, max_record_locks=10)
ACCEPT, RELEASE, REJECT, RENEW, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                       AcknowledgeType.RENEW, AcknowledgeType.GAP)


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(int(t) for t in types))


def states(part: SharePartition) -> dict[int, tuple[RecordState, int]]:
    return {o: (r.state, r.delivery_count) for o, r in sorted(part.in_flight.items())}


def fresh(start: int = 0) -> SharePartition:
    return SharePartition(start, SETTINGS)


def test_auto_offset_reset_latest_starts_at_log_end_earliest_at_log_start() -> None:
    latest = SharePartition.initialize(LATEST, 5, 20, SETTINGS)
    assert (latest.start_offset, latest.end_offset) == (20, 20)
    assert latest.acquire("m", 0, 20, 100) == []
    earliest = SharePartition.initialize(EARLIEST, 5, 20, SETTINGS)
    assert (earliest.start_offset, earliest.end_offset) == (5, 5)
    assert earliest.acquire("m", 0, 20, 3) == [AcquiredRange(5, 7, 1)]


def test_acquire_hands_out_new_offsets_up_to_the_fetchable_end_and_max_records() -> None:
    part = fresh()
    assert part.acquire("a", 0, 4, 100) == [AcquiredRange(0, 3, 1)]
    assert part.end_offset == 4 and part.start_offset == 0
    assert part.acquire("b", 0, 4, 100) == []  # everything in flight is held by a
    assert part.acquire("b", 0, 9, 2) == [AcquiredRange(4, 5, 1)]
    assert part.acquired_by("a") == [0, 1, 2, 3] and part.acquired_by("b") == [4, 5]
    rec = part.in_flight[4]
    assert (rec.state, rec.member_id, rec.lock_deadline_ms) == (RecordState.ACQUIRED, "b", LOCK)


def test_accept_acknowledges_and_the_start_offset_moves_past_done_records() -> None:
    part = fresh()
    part.acquire("a", 0, 5, 100)
    part.acknowledge("a", [ack(1, 2, ACCEPT)], 10)
    assert part.start_offset == 0  # offset 0 still acquired
    part.acknowledge("a", [ack(0, 0, ACCEPT)], 10)
    assert part.start_offset == 3 and part.end_offset == 5
    assert states(part) == {3: (RecordState.ACQUIRED, 1), 4: (RecordState.ACQUIRED, 1)}
    part.acknowledge("a", [ack(3, 4, ACCEPT)], 10)
    assert part.start_offset == part.end_offset == 5 and part.in_flight == {}


def test_release_makes_records_available_again_first_before_new_ones() -> None:
    part = fresh()
    part.acquire("a", 0, 3, 100)
    part.acknowledge("a", [ack(1, 1, RELEASE)], 10)
    assert states(part)[1] == (RecordState.AVAILABLE, 1)
    # Another member gets the released record first, delivered a second time, then new offsets.
    assert part.acquire("b", 20, 6, 3) == [AcquiredRange(1, 1, 2), AcquiredRange(3, 4, 1)]
    assert part.in_flight[1].member_id == "b"


def test_reject_and_gap_archive() -> None:
    part = fresh()
    part.acquire("a", 0, 4, 100)
    part.acknowledge("a", [ack(0, 0, REJECT), ack(1, 1, GAP)], 10)
    assert part.start_offset == 2
    part.acknowledge("a", [ack(3, 3, REJECT)], 10)
    assert states(part) == {2: (RecordState.ACQUIRED, 1), 3: (RecordState.ARCHIVED, 1)}
    assert part.acquire("b", 10, 4, 100) == []  # archived records are never delivered again


def test_one_type_per_offset() -> None:
    part = fresh()
    part.acquire("a", 0, 4, 100)
    part.acknowledge("a", [ack(0, 3, ACCEPT, RELEASE, REJECT, ACCEPT)], 10)
    assert states(part) == {1: (RecordState.AVAILABLE, 1), 2: (RecordState.ARCHIVED, 1),
                            3: (RecordState.ACKNOWLEDGED, 1)}
    assert part.start_offset == 1


def test_renew_extends_the_lock() -> None:
    part = fresh()
    part.acquire("a", 0, 2, 100)
    part.acknowledge("a", [ack(0, 0, RENEW)], 900)
    assert part.in_flight[0].lock_deadline_ms == 900 + LOCK
    assert part.expire_locks(LOCK) == [1]
    assert part.in_flight[0].state is RecordState.ACQUIRED
    assert part.next_lock_deadline() == 1900
    assert part.expire_locks(1900) == [0]


def test_lock_expiry_releases_records_at_the_deadline_not_before() -> None:
    part = fresh()
    part.acquire("a", 0, 3, 100)
    assert part.next_lock_deadline() == LOCK
    assert part.expire_locks(LOCK - 1) == []
    assert part.expire_locks(LOCK) == [0, 1, 2]
    assert states(part) == {o: (RecordState.AVAILABLE, 1) for o in range(3)}
    assert part.next_lock_deadline() is None
    # The member whose lock expired can no longer acknowledge them.
    with pytest.raises(InvalidRecordState):
        part.acknowledge("a", [ack(0, 0, ACCEPT)], LOCK + 1)


def test_delivery_count_limit_archives_instead_of_releasing() -> None:
    part = fresh()  # limit 3
    for attempt in (1, 2, 3):
        assert part.acquire("a", attempt * 10, 1, 100) == [AcquiredRange(0, 0, attempt)]
        if attempt < 3:
            part.acknowledge("a", [ack(0, 0, RELEASE)], attempt * 10)
            assert states(part)[0] == (RecordState.AVAILABLE, attempt)
    # The third delivery's lock expires: over the limit, archived, and the start moves past it.
    assert part.expire_locks(30 + LOCK) == [0]
    assert part.in_flight == {} and part.start_offset == 1
    assert part.acquire("a", 2000, 1, 100) == []


def test_delivery_count_limit_on_release_too() -> None:
    part = SharePartition(0, ShareSettings(record_lock_duration_ms=LOCK, delivery_count_limit=1))
    part.acquire("a", 0, 2, 100)
    part.acknowledge("a", [ack(0, 0, RELEASE)], 5)
    assert part.start_offset == 1  # archived on its first release
    part.release_member("a")
    assert part.start_offset == 2 and part.in_flight == {}


def test_a_leaving_member_releases_what_it_holds_only() -> None:
    part = fresh()
    part.acquire("a", 0, 2, 100)
    part.acquire("b", 0, 4, 100)
    assert part.release_member("a") == [0, 1]
    assert states(part) == {0: (RecordState.AVAILABLE, 1), 1: (RecordState.AVAILABLE, 1),
                            2: (RecordState.ACQUIRED, 1), 3: (RecordState.ACQUIRED, 1)}
    assert part.acquired_by("b") == [2, 3]


def test_acknowledging_records_held_by_another_member_or_not_in_flight_fails_as_a_whole() -> None:
    part = fresh()
    part.acquire("a", 0, 2, 100)
    part.acquire("b", 0, 3, 100)
    with pytest.raises(InvalidRecordState):
        part.acknowledge("a", [ack(0, 0, ACCEPT), ack(2, 2, ACCEPT)], 10)
    assert states(part)[0] == (RecordState.ACQUIRED, 1)  # the valid batch was not applied either
    with pytest.raises(InvalidRecordState):
        part.acknowledge("a", [ack(5, 5, ACCEPT)], 10)
    part.acknowledge("a", [ack(0, 0, ACCEPT)], 10)
    with pytest.raises(InvalidRecordState):  # already acknowledged
        part.acknowledge("a", [ack(0, 0, ACCEPT)], 10)


@pytest.mark.parametrize("batch", [ack(3, 2, ACCEPT), ack(0, 2, ACCEPT, ACCEPT), ack(0, 0, 7)])
def test_malformed_acknowledgements(batch: AcknowledgementBatch) -> None:
    part = fresh()
    part.acquire("a", 0, 4, 100)
    with pytest.raises(InvalidAcknowledgement):
        part.acknowledge("a", [batch], 10)


def test_the_in_flight_window_bounds_new_acquisitions() -> None:
    part = fresh()  # max_record_locks 10
    assert part.acquire("a", 0, 100, 100) == [AcquiredRange(0, 9, 1)]
    assert not part.has_acquirable(100)
    assert part.acquire("b", 0, 100, 100) == []
    part.acknowledge("a", [ack(0, 2, ACCEPT)], 10)  # the start moves: three more fit
    assert part.has_acquirable(100)
    assert part.acquire("b", 10, 100, 100) == [AcquiredRange(10, 12, 1)]
    # Acknowledged records past the start still count towards the window.
    part.acknowledge("a", [ack(4, 9, ACCEPT)], 10)
    assert part.acquire("b", 10, 100, 100) == []


def test_has_acquirable_sees_released_records_and_new_offsets() -> None:
    part = fresh()
    assert not part.has_acquirable(0)
    assert part.has_acquirable(1)
    part.acquire("a", 0, 1, 100)
    assert not part.has_acquirable(1)
    part.acknowledge("a", [ack(0, 0, RELEASE)], 1)
    assert part.has_acquirable(1)


def test_log_start_moving_past_in_flight_records() -> None:
    part = fresh()
    part.acquire("a", 0, 5, 100)
    part.advance_log_start(3)
    assert part.start_offset == 3 and sorted(part.in_flight) == [3, 4]
    part.advance_log_start(8)  # beyond everything handed out
    assert (part.start_offset, part.end_offset, part.in_flight) == (8, 8, {})
    assert part.acquire("a", 0, 9, 100) == [AcquiredRange(8, 8, 1)]


def test_state_batches_compress_ranges_and_write_acquired_as_available() -> None:
    part = fresh()
    part.acquire("a", 0, 6, 100)
    part.acknowledge("a", [ack(1, 2, ACCEPT), ack(3, 3, REJECT)], 10)
    part.acknowledge("a", [ack(5, 5, RELEASE)], 10)
    assert part.acquire("b", 20, 6, 1) == [AcquiredRange(5, 5, 2)]
    assert part.state_batches() == [
        StateBatch(0, 0, RecordState.AVAILABLE, 1),  # acquired by a, written as available
        StateBatch(1, 2, RecordState.ACKNOWLEDGED, 1),
        StateBatch(3, 3, RecordState.ARCHIVED, 1),
        StateBatch(4, 4, RecordState.AVAILABLE, 1),
        StateBatch(5, 5, RecordState.AVAILABLE, 2),
    ]
    assert part.delivery_complete_count() == 3


def test_from_state_rebuilds_without_locks_and_keeps_delivery_counts() -> None:
    batches = [StateBatch(10, 11, RecordState.ACKNOWLEDGED, 1), StateBatch(12, 12, RecordState.ACQUIRED, 2),
               StateBatch(14, 14, RecordState.ARCHIVED, 3)]
    part = SharePartition.from_state(10, batches, SETTINGS, state_epoch=4)
    assert (part.start_offset, part.end_offset, part.state_epoch) == (12, 15, 4)
    assert states(part) == {12: (RecordState.AVAILABLE, 2), 13: (RecordState.AVAILABLE, 0),
                            14: (RecordState.ARCHIVED, 3)}
    assert part.acquire("a", 0, 16, 100) == [AcquiredRange(12, 12, 3), AcquiredRange(13, 13, 1),
                                             AcquiredRange(15, 15, 1)]
    # Delivered three times now: its next release archives it.
    part.acknowledge("a", [ack(12, 12, RELEASE)], 1)
    assert states(part)[13] == (RecordState.ACQUIRED, 1) and part.start_offset == 13


def test_from_state_round_trips_state_batches() -> None:
    part = fresh()
    part.acquire("a", 0, 6, 100)
    part.acknowledge("a", [ack(0, 1, ACCEPT, RELEASE), ack(3, 3, REJECT)], 10)
    again = SharePartition.from_state(part.start_offset, part.state_batches(), SETTINGS)
    assert again.state_batches() == part.state_batches()
    assert (again.start_offset, again.end_offset) == (part.start_offset, part.end_offset)


def test_next_acquirable_offset_and_the_fetchable_end_bounding_released_records() -> None:
    part = fresh()
    assert part.next_acquirable_offset(0) is None
    assert part.next_acquirable_offset(3) == 0
    part.acquire("a", 0, 4, 100)
    assert part.next_acquirable_offset(4) is None
    assert part.next_acquirable_offset(6) == 4
    part.acknowledge("a", [ack(2, 3, RELEASE)], 1)
    assert part.next_acquirable_offset(6) == 2
    # Only what the leader could read (below the given end) is handed out.
    assert part.acquire("b", 1, 3, 100) == [AcquiredRange(2, 2, 2)]
    assert part.next_acquirable_offset(6) == 3


def test_acknowledgements_outside_the_in_flight_records_are_refused_without_walking_them() -> None:
    part = fresh(start=10)
    part.acquire("a", 0, 12, 100)
    with pytest.raises(InvalidRecordState):
        part.acknowledge("a", [ack(11, 2**62, ACCEPT)], 1)
    with pytest.raises(InvalidRecordState):
        part.acknowledge("a", [ack(0, 10, ACCEPT)], 1)


def test_from_state_cuts_a_state_larger_than_the_window() -> None:
    part = SharePartition.from_state(0, [StateBatch(0, 2**62, RecordState.AVAILABLE, 1)], SETTINGS)
    assert (part.start_offset, part.end_offset) == (0, SETTINGS.max_record_locks)


def test_rollback_takes_back_a_failed_acknowledgement_and_the_lock_then_redelivers() -> None:
    # Kafka rolls an acknowledgement back when its state write fails: the records are held by
    # their member again (same lock), so an accepted record not written is delivered again.
    part = fresh()
    part.acquire("a", 0, 6, 6)
    part.acknowledge("a", [ack(0, 1, ACCEPT)], 10)  # written
    undo = part.acknowledge("a", [ack(2, 3, ACCEPT), ack(4, 4, REJECT), ack(5, 5, RELEASE)], 10)
    assert part.start_offset == 5
    part.rollback(undo)
    assert part.start_offset == 2
    assert states(part) == {o: (RecordState.ACQUIRED, 1) for o in range(2, 6)}
    assert part.acquired_by("a") == [2, 3, 4, 5] and part.in_flight[2].lock_deadline_ms == LOCK
    assert part.expire_locks(LOCK) == [2, 3, 4, 5]
    assert part.acquire("b", LOCK, 6, 10) == [AcquiredRange(2, 5, 2)]


def test_rollback_leaves_a_record_changed_since_and_keeps_done_records_between() -> None:
    part = fresh()
    part.acquire("a", 0, 4, 4)
    undo = part.acknowledge("a", [ack(0, 0, ACCEPT), ack(3, 3, RELEASE)], 10)
    part.acknowledge("a", [ack(1, 2, ACCEPT)], 10)  # another acknowledgement, written
    assert part.acquire("b", 10, 4, 10) == [AcquiredRange(3, 3, 2)]  # the released record went on
    part.rollback(undo)
    assert states(part) == {0: (RecordState.ACQUIRED, 1), 1: (RecordState.ACKNOWLEDGED, 1),
                            2: (RecordState.ACKNOWLEDGED, 1), 3: (RecordState.ACQUIRED, 2)}
    assert part.acquired_by("a") == [0] and part.acquired_by("b") == [3]
    assert part.start_offset == 0


def test_locks_restored_by_a_rollback_still_expire_after_an_expiry_check_found_none() -> None:
    part = fresh()
    part.acquire("a", 0, 2, 2)
    undo = part.acknowledge("a", [ack(0, 1, ACCEPT)], 10)
    assert part.expire_locks(LOCK) == []  # nothing held: no lock left to expire
    part.rollback(undo)
    assert part.expire_locks(LOCK - 1) == []
    assert part.expire_locks(LOCK) == [0, 1]
    assert states(part) == {0: (RecordState.AVAILABLE, 1), 1: (RecordState.AVAILABLE, 1)}


def test_a_renewed_lock_expires_at_its_new_deadline() -> None:
    part = fresh()
    part.acquire("a", 0, 2, 2)
    part.acknowledge("a", [ack(0, 0, RENEW)], LOCK - 1)
    assert part.expire_locks(LOCK) == [1]
    assert part.expire_locks(2 * LOCK - 2) == []
    assert part.expire_locks(2 * LOCK - 1) == [0]


def test_acquisition_finds_records_released_behind_ones_still_held() -> None:
    # Acquisition scans the window from the lowest offset that may be available: a record
    # released below records still held, or after a scan stopped at max_records, is found.
    part = fresh()
    assert part.acquire("a", 0, 6, 6) == [AcquiredRange(0, 5, 1)]
    part.acknowledge("a", [ack(4, 4, RELEASE)], 10)
    part.acknowledge("a", [ack(1, 1, RELEASE)], 10)
    assert part.acquire("b", 10, 8, 1) == [AcquiredRange(1, 1, 2)]
    assert part.acquire("b", 10, 8, 2) == [AcquiredRange(4, 4, 2), AcquiredRange(6, 6, 1)]
    assert part.expire_locks(LOCK) == [0, 2, 3, 5]
    assert part.acquire("c", LOCK, 8, 10) == [AcquiredRange(0, 0, 2), AcquiredRange(2, 3, 2),
                                              AcquiredRange(5, 5, 2), AcquiredRange(7, 7, 1)]


def test_archive_acquired_drops_aborted_records_from_what_is_handed_out() -> None:
    part = fresh()
    ranges = part.acquire("a", 0, 8, 8)
    assert ranges == [AcquiredRange(0, 7, 1)]
    kept = part.archive_acquired("a", ranges, [(0, 1), (4, 5)])
    assert kept == [AcquiredRange(2, 3, 1), AcquiredRange(6, 7, 1)]
    assert part.start_offset == 2  # archived at the front: done
    assert states(part)[4] == (RecordState.ARCHIVED, 1) and part.acquired_by("a") == [2, 3, 6, 7]
    assert part.archive_acquired("b", kept, [(2, 3)]) == kept  # not b's: left alone
