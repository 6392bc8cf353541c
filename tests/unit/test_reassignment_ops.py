"""Partition reassignments and automatic leader rebalance: the controller's pure decisions
(``controller/reassignment.py``, the completion rule in ``partition_ops``, ``leader_balance``)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from riverlog.controller import leader_balance, partition_ops
from riverlog.controller import reassignment as ra
from riverlog.controller.image import TOPIC_RESOURCE, MetadataImage, PartitionImage
from riverlog.controller.local import LocalController
from riverlog.controller.partition_ops import AlterPartitionRequest
from riverlog.controller.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    Endpoint,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    from_json,
    to_json,
)
from riverlog.controller.topic_ops import NewTopic
from riverlog.protocol.errors import ErrorCode

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.uuid4()


def endpoint(n: int) -> tuple[Endpoint, ...]:
    return (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + n),)


def cluster(replicas: tuple[int, ...] = (1, 2, 3), isr: tuple[int, ...] | None = None, leader: int | None = None,
            *, brokers: tuple[int, ...] = (1, 2, 3, 4, 5), unclean: bool | None = None) -> MetadataImage:
    records: list[Record] = [RegisterBrokerRecord(n, endpoint(n), None, False, f"inc-{n}") for n in brokers]
    records += [TopicRecord("t", TOPIC_ID), PartitionRecord(
        TOPIC_ID, 0, replicas, replicas if isr is None else isr, replicas[0] if leader is None else leader)]
    if unclean is not None:
        records.append(ConfigRecord(TOPIC_RESOURCE, "t", "unclean.leader.election.enable", str(unclean).lower()))
    return MetadataImage(cluster_id="c").apply(records)


def part(image: MetadataImage) -> PartitionImage:
    return image.topics["t"].partitions[0]


def reassign(image: MetadataImage, replicas: tuple[int, ...] | None, *, topic: str = "t", partition: int = 0,
             allow_rf_change: bool = True) -> tuple[MetadataImage, ra.ReassignmentResult, list[Record]]:
    outcome = ra.alter_partition_reassignments(image, [(topic, partition, replicas)],
                                               allow_replication_factor_change=allow_rf_change)
    (result,) = outcome.results
    return image.apply(outcome.records), result, outcome.records


def leader_adds(image: MetadataImage,
                new_isr: tuple[int, ...]) -> tuple[MetadataImage, partition_ops.AlterPartitionResult]:
    """The partition's leader proposes ``new_isr`` (AlterPartition)."""
    p = part(image)
    broker = image.brokers[p.leader]
    outcome = partition_ops.alter_partition(image, p.leader, broker.epoch, [
        AlterPartitionRequest(TOPIC_ID, 0, p.leader_epoch, p.partition_epoch, new_isr)])
    assert outcome.error == ErrorCode.NONE
    (result,) = outcome.results
    return image.apply(outcome.records), result


def state(p: PartitionImage) -> tuple[object, ...]:
    return p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas


# Starting and completing -------------------------------------------------------------------


def test_a_move_grows_the_replicas_then_completes_when_the_new_replica_joins_the_isr() -> None:
    image = cluster()
    image, result, records = reassign(image, (2, 3, 4))
    assert result.error == ErrorCode.NONE and len(records) == 1
    p = part(image)
    # Target first, then the replicas being removed; leader and ISR unchanged for now.
    assert state(p) == ((2, 3, 4, 1), (1, 2, 3), 1, (4,), (1,))
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)
    assert p.reassigning

    # The leader (broker 1, being removed) adds the caught-up broker 4: the reassignment
    # completes in the same change and leadership moves to the first target replica in the ISR.
    image, answer = leader_adds(image, (1, 2, 3, 4))
    p = part(image)
    assert state(p) == ((2, 3, 4), (2, 3, 4), 2, (), ())
    assert (p.leader_epoch, p.partition_epoch) == (1, 2)
    assert not p.reassigning
    assert answer.error == ErrorCode.NEW_LEADER_ELECTED


def test_completion_that_keeps_the_leader_still_bumps_the_leader_epoch() -> None:
    image, _, _ = reassign(cluster(), (1, 2, 4))
    assert state(part(image)) == ((1, 2, 4, 3), (1, 2, 3), 1, (4,), (3,))
    image, result = leader_adds(image, (1, 2, 3, 4))
    p = part(image)
    assert state(p) == ((1, 2, 4), (1, 2, 4), 1, (), ())
    # Replica 3 left: a new leader epoch (Kafka's rule), and the leader hears it in the answer.
    assert (p.leader_epoch, p.partition_epoch) == (1, 2)
    assert result.error == ErrorCode.NONE
    assert (result.leader, result.leader_epoch, result.isr, result.partition_epoch) == (1, 1, (1, 2, 4), 2)


def test_every_added_replica_must_join_the_isr_before_completion() -> None:
    image, _, _ = reassign(cluster(), (4, 5, 1))
    assert state(part(image)) == ((4, 5, 1, 2, 3), (1, 2, 3), 1, (4, 5), (2, 3))
    image, result = leader_adds(image, (1, 2, 3, 4))
    assert result.error == ErrorCode.NONE
    assert state(part(image)) == ((4, 5, 1, 2, 3), (1, 2, 3, 4), 1, (4, 5), (2, 3))
    image, result = leader_adds(image, (1, 2, 3, 4, 5))
    # Broker 1 stays a replica, in the ISR and live: it keeps leading; the preferred replica is 4 now.
    assert result.error == ErrorCode.NONE
    assert state(part(image)) == ((4, 5, 1), (1, 4, 5), 1, (), ())


def test_a_shrink_with_an_in_sync_target_completes_at_once() -> None:
    image, result, records = reassign(cluster(), (2, 3))
    assert result.error == ErrorCode.NONE
    assert len(records) == 1
    p = part(image)
    assert state(p) == ((2, 3), (2, 3), 2, (), ())
    assert p.leader_epoch == 1


def test_a_shrink_waits_for_an_out_of_sync_target_replica() -> None:
    image, _, _ = reassign(cluster(isr=(1, 2)), (2, 3))
    assert state(part(image)) == ((2, 3, 1), (1, 2), 1, (), (1,))
    assert part(image).reassigning
    image, result = leader_adds(image, (1, 2, 3))
    assert result.error == ErrorCode.NEW_LEADER_ELECTED
    assert state(part(image)) == ((2, 3), (2, 3), 2, (), ())


def test_reordering_changes_the_preferred_replica_without_a_reassignment() -> None:
    image, result, records = reassign(cluster(), (3, 2, 1))
    assert result.error == ErrorCode.NONE and len(records) == 1
    p = part(image)
    assert state(p) == ((3, 2, 1), (1, 2, 3), 1, (), ())
    assert p.leader_epoch == 0  # nobody left
    # The same target again changes nothing.
    again, result, records = reassign(image, (3, 2, 1))
    assert result.error == ErrorCode.NONE and records == [] and again == image


def test_a_new_target_during_a_reassignment_replaces_it() -> None:
    image, _, _ = reassign(cluster(), (2, 3, 4))
    image, result, _ = reassign(image, (2, 3, 5))
    assert result.error == ErrorCode.NONE
    # Computed against the current replica list (which holds 4 and 1).
    assert state(part(image)) == ((2, 3, 5, 1, 4), (1, 2, 3), 1, (5,), (1, 4))
    image, _ = leader_adds(image, (1, 2, 3, 5))
    assert state(part(image)) == ((2, 3, 5), (2, 3, 5), 2, (), ())


def test_fencing_the_leader_mid_reassignment_elects_from_the_isr_and_keeps_the_reassignment() -> None:
    image, _, _ = reassign(cluster(), (2, 3, 4))
    image = image.apply(partition_ops.fence_broker(image, 1))
    assert state(part(image)) == ((2, 3, 4, 1), (2, 3), 2, (4,), (1,))
    # The new leader completes it once broker 4 catches up.
    image, result = leader_adds(image, (2, 3, 4))
    assert result.error == ErrorCode.NONE
    assert state(part(image)) == ((2, 3, 4), (2, 3, 4), 2, (), ())


def test_an_unclean_election_can_complete_a_reassignment() -> None:
    # Moving {1} to {2}: broker 1 dies before 2 caught up; with unclean election allowed the
    # controller elects 2, whose ISR of one is the whole target.
    image = cluster((1,), unclean=True)
    image, _, _ = reassign(image, (2,))
    assert state(part(image)) == ((2, 1), (1,), 1, (2,), (1,))
    image = image.apply(partition_ops.fence_broker(image, 1))
    assert state(part(image)) == ((2,), (2,), 2, (), ())


# Cancelling --------------------------------------------------------------------------------


def test_cancel_reverts_to_the_original_replicas() -> None:
    image, _, _ = reassign(cluster(), (2, 3, 4))
    epoch = part(image).leader_epoch
    image, result, records = reassign(image, None)
    assert result.error == ErrorCode.NONE and len(records) == 1
    p = part(image)
    # The original set, in the order of the current list (as Kafka: the original order is not
    # recorded anywhere, so the preferred replica may change).
    assert state(p) == ((2, 3, 1), (1, 2, 3), 1, (), ())
    assert p.leader_epoch == epoch + 1  # broker 4 was dropped
    # Nothing to cancel any more.
    _, result, records = reassign(image, None)
    assert (result.error, result.message, records) == (
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.", [])


def test_cancel_drops_added_replicas_from_the_isr_and_their_leadership() -> None:
    image, _, _ = reassign(cluster((1, 2)), (3, 4))
    image, _ = leader_adds(image, (1, 2, 3))
    image = image.apply(partition_ops.fence_broker(image, 1))
    assert state(part(image)) == ((3, 4, 1, 2), (2, 3), 3, (3, 4), (1, 2))
    image, result, _ = reassign(image, None)
    assert result.error == ErrorCode.NONE
    assert state(part(image)) == ((1, 2), (2,), 2, (), ())


def test_cancel_that_needs_an_unclean_election_is_refused_unless_allowed() -> None:
    for unclean, code in ((None, ErrorCode.INVALID_REPLICA_ASSIGNMENT), (True, ErrorCode.NONE)):
        # Moving {1} to {2, 3}: broker 2 joined the ISR, then broker 1 dropped out of it.
        image = cluster((1,), unclean=unclean)
        image = image.apply([PartitionChangeRecord(TOPIC_ID, 0, leader=2, isr=(2,), replicas=(2, 3, 1),
                                                   adding_replicas=(2, 3), removing_replicas=(1,))])
        after, result, _ = reassign(image, None)
        assert result.error == code, result
        if code == ErrorCode.NONE:
            assert state(part(after)) == ((1,), (1,), 1, (), ())
        else:
            assert "unclean leader election" in (result.message or "")
            assert after == image


# Refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("topic", "partition", "replicas", "code", "message"), [
    ("nope", 0, (1, 2, 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
    ("t", 7, (1, 2, 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:7."),
    ("nope", 0, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
    ("t", 0, (), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes an empty replica list."),
    ("t", 0, (1, 2, 2), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes the broker 2 more than once."),
    ("t", 0, (1, 2, 9), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes broker 9, but no such broker is registered."),
])
def test_refusals(topic: str, partition: int, replicas: tuple[int, ...] | None, code: ErrorCode,
                  message: str) -> None:
    image = cluster()
    after, result, records = reassign(image, replicas, topic=topic, partition=partition)
    assert (result.topic, result.partition, result.error, result.message) == (topic, partition, code, message)
    assert records == [] and after == image


def test_a_fenced_broker_may_be_a_target() -> None:
    image = cluster()
    image = image.apply([BrokerRegistrationChangeRecord(4, image.brokers[4].epoch, True)])
    _, result, _ = reassign(image, (2, 3, 4))
    assert result.error == ErrorCode.NONE


def test_replication_factor_change_can_be_forbidden() -> None:
    image = cluster()
    _, result, _ = reassign(image, (1, 2), allow_rf_change=False)
    assert result.error == ErrorCode.INVALID_REPLICATION_FACTOR
    _, result, _ = reassign(image, (2, 3, 4), allow_rf_change=False)
    assert result.error == ErrorCode.NONE
    # During a reassignment the factor is the target's, not the wider replica list's.
    moving, _, _ = reassign(image, (2, 3, 4))
    _, result, _ = reassign(moving, (2, 3, 5), allow_rf_change=False)
    assert result.error == ErrorCode.NONE
    _, result, _ = reassign(moving, (2, 3, 4, 5), allow_rf_change=False)
    assert result.error == ErrorCode.INVALID_REPLICATION_FACTOR


def test_items_of_one_request_are_independent_and_see_each_other() -> None:
    image = cluster()
    outcome = ra.alter_partition_reassignments(image, [("t", 0, (2, 3, 4)), ("nope", 0, (1,)), ("t", 0, None)])
    assert [r.error for r in outcome.results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                  ErrorCode.NONE]
    assert state(part(image.apply(outcome.records))) == ((2, 3, 1), (1, 2, 3), 1, (), ())


# Listing -----------------------------------------------------------------------------------


def test_list_reports_ongoing_reassignments_only() -> None:
    image = cluster()
    image = image.apply([PartitionRecord(TOPIC_ID, 1, (1, 2, 3), (1, 2, 3), 1)])
    assert ra.list_partition_reassignments(image) == []
    image, _, _ = reassign(image, (2, 3, 4), partition=1)
    expected = ra.OngoingReassignment("t", 1, (2, 3, 4, 1), (4,), (1,))
    assert ra.list_partition_reassignments(image) == [expected]
    assert ra.list_partition_reassignments(image, [("t", [0, 1, 5]), ("nope", [0])]) == [expected]
    assert ra.list_partition_reassignments(image, [("t", [0])]) == []


def test_reassignment_fields_round_trip_through_json_and_old_records_still_load() -> None:
    records: list[Record] = [
        PartitionRecord(TOPIC_ID, 0, (2, 3, 1), (1, 2), 1, 3, 4, (3,), (1,)),
        PartitionChangeRecord(TOPIC_ID, 0, replicas=(2, 3, 1), adding_replicas=(3,), removing_replicas=()),
    ]
    for record in records:
        assert from_json(to_json(record)) == record
    old = {"type": "partition_change", "topic_id": str(TOPIC_ID), "partition": 0, "leader": 2, "isr": [2],
           "replicas": None}
    assert from_json(old) == PartitionChangeRecord(TOPIC_ID, 0, leader=2, isr=(2,))


# Automatic leader rebalance ----------------------------------------------------------------


def three_partitions(leaders: tuple[int, int, int], isr: tuple[int, ...] = (1, 2, 3)) -> MetadataImage:
    """Partitions 0, 1, 2 preferred by brokers 1, 2, 3, led by ``leaders``."""
    image = cluster(brokers=(1, 2, 3))
    return image.apply([PartitionRecord(TOPIC_ID, i, tuple((i + k) % 3 + 1 for k in range(3)), isr, leaders[i])
                        for i in range(3)])


def test_leadership_goes_back_to_live_in_sync_preferred_replicas() -> None:
    image = three_partitions((2, 2, 3))
    assert leader_balance.imbalance_ratios(image) == {1: 1.0, 2: 0.0, 3: 0.0}
    records = leader_balance.preferred_leader_elections(image, 10)
    after = image.apply(records)
    assert [after.topics["t"].partitions[i].leader for i in range(3)] == [1, 2, 3]
    assert after.topics["t"].partitions[0].leader_epoch == 1
    assert leader_balance.preferred_leader_elections(after, 10) == []


def test_no_rebalance_below_the_threshold_or_when_the_preferred_replica_cannot_lead() -> None:
    # Broker 1 is the preferred replica of partitions 0 and 3 and leads one: 50% imbalance.
    image = three_partitions((2, 2, 3)).apply([PartitionRecord(TOPIC_ID, 3, (1, 2, 3), (1, 2, 3), 1)])
    assert leader_balance.imbalance_ratios(image)[1] == 0.5
    assert leader_balance.preferred_leader_elections(image, 50) == []  # not above 50%
    assert len(leader_balance.preferred_leader_elections(image, 49)) == 1
    # Not in the ISR, or fenced: it stays where it is.
    assert leader_balance.preferred_leader_elections(three_partitions((2, 2, 3), isr=(2, 3)), 10) == []
    fenced = three_partitions((2, 2, 3))
    fenced = fenced.apply([BrokerRegistrationChangeRecord(1, fenced.brokers[1].epoch, True)])
    assert leader_balance.preferred_leader_elections(fenced, 10) == []


def test_partitions_being_reassigned_are_not_rebalanced() -> None:
    image, _, _ = reassign(cluster(leader=2), (1, 2, 4))
    assert part(image).leader == 2 and part(image).reassigning
    assert leader_balance.preferred_leader_elections(image, 0) == []


# The local controller ----------------------------------------------------------------------


def test_local_controller_reassigns_lists_rebalances_and_persists(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = LocalController(tmp_path / "meta", 1, "cid")
        controller.replay()
        epochs = {n: await controller.register_broker(n, f"i{n}", endpoint(n), None) for n in (1, 2, 3, 4)}
        for n in (1, 2, 3, 4):
            await controller.heartbeat(n, epochs[n])
        await controller.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})], validate_only=False,
                                       default_partitions=1, default_replication=3)
        (result,) = await controller.alter_partition_reassignments([("t", 0, [2, 3, 4])])
        assert result.error == ErrorCode.NONE
        (ongoing,) = await controller.list_partition_reassignments()
        assert (ongoing.replicas, ongoing.adding, ongoing.removing) == ((2, 3, 4, 1), (4,), (1,))
        p = controller.image.topics["t"].partitions[0]
        topic_id = controller.image.topics["t"].topic_id
        outcome = await controller.alter_partition(1, epochs[1], [
            AlterPartitionRequest(topic_id, 0, p.leader_epoch, p.partition_epoch, (1, 2, 3, 4))])
        assert outcome.results[0].error == ErrorCode.NEW_LEADER_ELECTED
        assert await controller.list_partition_reassignments() == []
        p = controller.image.topics["t"].partitions[0]
        assert (p.replicas, p.leader) == ((2, 3, 4), 2)

        # Broker 2 fails and returns (into the ISR): the rebalance pass gives it back leadership.
        await controller.fence_broker(2)
        await controller.heartbeat(2, epochs[2])
        p = controller.image.topics["t"].partitions[0]
        assert p.leader == 3
        p = controller.image.topics["t"].partitions[0]
        await controller.alter_partition(3, epochs[3], [
            AlterPartitionRequest(topic_id, 0, p.leader_epoch, p.partition_epoch, (2, 3, 4))])
        assert await controller.balance_leaders(10) == 1
        assert controller.image.topics["t"].partitions[0].leader == 2
        assert await controller.balance_leaders(10) == 0

        again = LocalController(tmp_path / "meta", 1, "cid")
        again.replay()
        assert again.image == controller.image

    asyncio.run(scenario())
