"""The controller's pure decisions on brokers, leaders and ISRs (``controller/partition_ops.py``)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from riverlog.controller import partition_ops as ops
from riverlog.controller.image import TOPIC_RESOURCE, MetadataImage, PartitionImage
from riverlog.controller.local import LocalController
from riverlog.controller.partition_ops import AlterPartitionRequest
from riverlog.controller.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    Endpoint,
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


def cluster(isr: tuple[int, ...] = (1, 2, 3), leader: int = 1, *, unclean: bool | None = None) -> MetadataImage:
    records: list[Record] = [RegisterBrokerRecord(n, endpoint(n), None, False, f"inc-{n}") for n in (1, 2, 3)]
    records += [TopicRecord("t", TOPIC_ID), PartitionRecord(TOPIC_ID, 0, (1, 2, 3), isr, leader)]
    if unclean is not None:
        records.append(ConfigRecord(TOPIC_RESOURCE, "t", "unclean.leader.election.enable", str(unclean).lower()))
    return MetadataImage(cluster_id="c").apply(records)


def part(image: MetadataImage) -> PartitionImage:
    return image.topics["t"].partitions[0]


def apply(image: MetadataImage, records: list[Record]) -> MetadataImage:
    return image.apply(records)


# Brokers and their epochs ------------------------------------------------------------------


def test_broker_epoch_is_the_registration_offset_and_stale_changes_are_ignored() -> None:
    image = cluster()
    assert [image.brokers[n].epoch for n in (1, 2, 3)] == [0, 1, 2]
    image = image.apply([BrokerRegistrationChangeRecord(2, 99, True)])  # not its registration
    assert not image.brokers[2].fenced
    image = image.apply([BrokerRegistrationChangeRecord(2, 1, True)])
    assert image.brokers[2].fenced
    assert image.live_broker_ids() == {1, 3}


def test_new_records_round_trip_through_json() -> None:
    records: list[Record] = [RegisterBrokerRecord(4, endpoint(4), "r1", True, "abc"),
                             BrokerRegistrationChangeRecord(4, 7, False)]
    for record in records:
        assert from_json(to_json(record)) == record
    # Records written before incarnations existed still load.
    old = {"type": "register_broker", "broker_id": 1, "endpoints": [{"listener": "P", "host": "h", "port": 1}],
           "rack": None, "fenced": False}
    assert from_json(old) == RegisterBrokerRecord(1, (Endpoint("P", "h", 1),), None, False, "")


# Fencing -----------------------------------------------------------------------------------


def test_fencing_the_leader_elects_the_next_isr_replica_and_bumps_epochs() -> None:
    image = cluster()
    after = apply(image, ops.fence_broker(image, 1))
    p = part(after)
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (2, (2, 3), 1, 1)
    assert after.brokers[1].fenced


def test_fencing_a_follower_shrinks_the_isr_without_a_leader_change() -> None:
    image = cluster()
    p = part(apply(image, ops.fence_broker(image, 3)))
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2), 0, 1)


def test_the_last_isr_member_stays_and_the_partition_goes_offline() -> None:
    image = cluster(isr=(1,))
    after = apply(image, ops.fence_broker(image, 1))
    assert (part(after).leader, part(after).isr) == (-1, (1,))
    # Fencing again changes nothing.
    assert ops.fence_broker(after, 1) == []
    # When it returns it leads again (it holds every acknowledged record); it is not the case
    # for an out-of-sync replica: unfencing broker 2 elects nobody.
    assert ops.unfence_broker(after, 2) == []
    back = apply(after, ops.unfence_broker(after, 1))
    assert (part(back).leader, part(back).isr, part(back).leader_epoch) == (1, (1,), 2)
    assert not back.brokers[1].fenced


def test_unclean_election_takes_a_live_replica_out_of_the_isr() -> None:
    image = cluster(isr=(1,), unclean=True)
    after = apply(image, ops.fence_broker(image, 1))
    assert (part(after).leader, part(after).isr) == (2, (2,))
    # The broker default applies when the topic does not say.
    image = cluster(isr=(1,))
    assert part(apply(image, ops.fence_broker(image, 1, unclean_default=True))).leader == 2
    # And a topic's "false" beats a broker default of true.
    image = cluster(isr=(1,), unclean=False)
    assert part(apply(image, ops.fence_broker(image, 1, unclean_default=True))).leader == -1


def test_an_unfenced_broker_rejoins_as_a_follower_outside_the_isr() -> None:
    image = cluster()
    image = apply(image, ops.fence_broker(image, 1))
    back = apply(image, ops.unfence_broker(image, 1))
    p = part(back)
    assert (p.leader, p.isr) == (2, (2, 3))
    assert not back.brokers[1].fenced


def test_registering_a_new_incarnation_fences_the_old_one_first() -> None:
    image = cluster()
    # The same process registering again (a retried request) changes nothing.
    assert ops.register_broker(image, 1, "inc-1", endpoint(1), None) == []
    records = ops.register_broker(image, 1, "inc-1b", endpoint(1), None)
    after = apply(image, records)
    assert after.brokers[1].fenced and after.brokers[1].incarnation_id == "inc-1b"
    assert after.brokers[1].epoch > image.brokers[1].epoch
    assert (part(after).leader, part(after).isr) == (2, (2, 3))


# AlterPartition -----------------------------------------------------------------------------


def request(image: MetadataImage, isr: tuple[int, ...], **changes: object) -> AlterPartitionRequest:
    p = part(image)
    fields: dict[str, object] = {"topic_id": TOPIC_ID, "partition": 0, "leader_epoch": p.leader_epoch,
                                 "partition_epoch": p.partition_epoch, "new_isr": isr,
                                 "broker_epochs": tuple(image.brokers[r].epoch for r in isr)}
    fields.update(changes)
    return AlterPartitionRequest(**fields)  # type: ignore[arg-type]


def test_alter_partition_commits_an_isr_change_from_the_leader() -> None:
    image = cluster()
    outcome = ops.alter_partition(image, 1, image.brokers[1].epoch, [request(image, (1, 2))])
    assert outcome.error == ErrorCode.NONE
    (result,) = outcome.results
    assert (result.error, result.leader, result.isr, result.leader_epoch, result.partition_epoch) == \
        (ErrorCode.NONE, 1, (1, 2), 0, 1)
    after = apply(image, outcome.records)
    assert part(after).isr == (1, 2) and part(after).partition_epoch == 1
    # Proposing the current ISR is a success without a record.
    same = ops.alter_partition(after, 1, after.brokers[1].epoch, [request(after, (1, 2))])
    assert same.records == [] and same.results[0].partition_epoch == 1


@pytest.mark.parametrize("change, code", [
    ({"leader_epoch": -1}, ErrorCode.FENCED_LEADER_EPOCH),
    ({"leader_epoch": 1}, ErrorCode.NOT_CONTROLLER),
    ({"partition_epoch": 5}, ErrorCode.INVALID_UPDATE_VERSION),
    ({"new_isr": (2, 3), "broker_epochs": ()}, ErrorCode.INVALID_REQUEST),
    ({"new_isr": (1, 4), "broker_epochs": ()}, ErrorCode.INVALID_REQUEST),
    ({"new_isr": (1, 1), "broker_epochs": ()}, ErrorCode.INVALID_REQUEST),
    ({"broker_epochs": (0, 1, 77)}, ErrorCode.INELIGIBLE_REPLICA),
    ({"topic_id": uuid.uuid4()}, ErrorCode.UNKNOWN_TOPIC_ID),
    ({"partition": 3}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
])
def test_alter_partition_refusals(change: dict[str, object], code: ErrorCode) -> None:
    image = cluster(isr=(1, 2))
    outcome = ops.alter_partition(image, 1, image.brokers[1].epoch, [request(image, (1, 2, 3), **change)])
    assert outcome.error == ErrorCode.NONE
    assert [r.error for r in outcome.results] == [code]
    assert outcome.records == []


def test_alter_partition_refuses_stale_brokers_and_non_leaders() -> None:
    image = cluster()
    assert ops.alter_partition(image, 1, 12345, [request(image, (1, 2))]).error == ErrorCode.STALE_BROKER_EPOCH
    outcome = ops.alter_partition(image, 2, image.brokers[2].epoch, [request(image, (1, 2))])
    assert outcome.results[0].error == ErrorCode.INVALID_REQUEST


def test_a_fenced_broker_cannot_join_an_isr() -> None:
    image = cluster()
    image = apply(image, ops.fence_broker(image, 3))
    outcome = ops.alter_partition(image, 1, image.brokers[1].epoch, [request(image, (1, 2, 3))])
    assert outcome.results[0].error == ErrorCode.INELIGIBLE_REPLICA


def test_requests_of_one_batch_see_each_other() -> None:
    image = cluster()
    first = request(image, (1, 2))
    second = request(image, (1,))  # decided on the same (now outdated) partition epoch
    outcome = ops.alter_partition(image, 1, image.brokers[1].epoch, [first, second])
    assert [r.error for r in outcome.results] == [ErrorCode.NONE, ErrorCode.INVALID_UPDATE_VERSION]


# ElectLeaders --------------------------------------------------------------------------------


def test_preferred_leader_election() -> None:
    image = cluster()
    assert ops.elect_leaders(image, "t", 0, ops.PREFERRED_ELECTION).error == ErrorCode.ELECTION_NOT_NEEDED
    image = apply(image, ops.fence_broker(image, 1))
    image = apply(image, ops.unfence_broker(image, 1))
    # Back but not in the ISR yet: it cannot lead.
    outcome = ops.elect_leaders(image, "t", 0, ops.PREFERRED_ELECTION)
    assert outcome.error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    image = apply(image, ops.alter_partition(image, 2, image.brokers[2].epoch, [request(image, (1, 2, 3))]).records)
    outcome = ops.elect_leaders(image, "t", 0, ops.PREFERRED_ELECTION)
    assert outcome.error == ErrorCode.NONE
    assert part(apply(image, outcome.records)).leader == 1
    assert ops.elect_leaders(image, "nope", 0, 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_unclean_election_on_request() -> None:
    image = cluster(isr=(1,))
    assert ops.elect_leaders(image, "t", 0, ops.UNCLEAN_ELECTION).error == ErrorCode.ELECTION_NOT_NEEDED
    image = apply(image, ops.fence_broker(image, 1))
    outcome = ops.elect_leaders(image, "t", 0, ops.UNCLEAN_ELECTION)
    assert outcome.error == ErrorCode.NONE
    assert (part(apply(image, outcome.records)).leader, part(apply(image, outcome.records)).isr) == (2, (2,))


# The local controller around them --------------------------------------------------------------


def test_local_controller_shared_by_brokers_persists_their_lifecycle(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = LocalController(tmp_path / "meta", 1, "cid")
        controller.replay()
        seen: list[int] = []
        unsubscribe = controller.subscribe(lambda old, new: seen.append(new.offset))
        epochs = {n: await controller.register_broker(n, f"i{n}", endpoint(n), None) for n in (1, 2, 3)}
        assert all(controller.image.brokers[n].fenced for n in (1, 2, 3))
        for n in (1, 2, 3):
            result = await controller.heartbeat(n, epochs[n])
            assert result.error == ErrorCode.NONE and not result.fenced
        (outcome,) = await controller.create_topics([NewTopic("t", 1, 3)], validate_only=False,
                                                    default_partitions=1, default_replication=3)
        assert outcome.error == ErrorCode.NONE
        leader = controller.image.topics["t"].partitions[0].leader
        await controller.fence_broker(leader)
        assert controller.image.topics["t"].partitions[0].leader not in (leader, -1)
        assert controller.controller_id in controller.image.live_broker_ids()
        stale = await controller.heartbeat(2, 999)
        assert stale.error == ErrorCode.STALE_BROKER_EPOCH
        # A controlled shutdown fences the broker and moves its leadership.
        new_leader = controller.image.topics["t"].partitions[0].leader
        shutdown = await controller.heartbeat(new_leader, epochs[new_leader], want_shutdown=True)
        assert shutdown.fenced and controller.image.brokers[new_leader].fenced
        unsubscribe()
        count = len(seen)
        await controller.allocate_producer_id(3)
        assert len(seen) == count  # no longer notified

        again = LocalController(tmp_path / "meta", 1, "cid")
        again.replay()
        assert again.image == controller.image

    asyncio.run(scenario())


def test_local_controller_fences_brokers_whose_heartbeats_stop(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = LocalController(tmp_path / "meta", 1, "cid")
        controller.replay()
        epochs = {n: await controller.register_broker(n, f"i{n}", endpoint(n), None) for n in (1, 2)}
        for n in (1, 2):
            await controller.heartbeat(n, epochs[n])
        # Ten seconds of silence against a 5 s session, set rather than slept (no timing margin
        # for a loaded machine to eat).
        controller.last_heartbeat[1] -= 10
        controller.last_heartbeat[2] -= 10
        await controller.heartbeat(2, epochs[2])
        assert await controller.fence_expired(5000) == [1]
        assert controller.image.brokers[1].fenced and not controller.image.brokers[2].fenced

    asyncio.run(scenario())


def test_a_blocked_event_loop_is_not_counted_as_silence(tmp_path: Path) -> None:
    # The loop was blocked (a 1,000-partition topic applied at once): heartbeats sat unread in
    # their sockets, so the stall is excused and nobody is fenced; silence beyond it still is.
    async def scenario() -> None:
        controller = LocalController(tmp_path / "meta", 1, "cid")
        controller.replay()
        epoch = await controller.register_broker(1, "i1", endpoint(1), None)
        await controller.heartbeat(1, epoch)
        # A ten-second stall (set back rather than slept) against a 5 s session.
        controller.last_heartbeat[1] -= 10
        controller.excuse_stall(10)
        assert await controller.fence_expired(5000) == []
        controller.last_heartbeat[1] -= 6  # then silence beyond the stall
        assert await controller.fence_expired(5000) == [1]

    asyncio.run(scenario())


def test_a_heartbeat_waiting_behind_a_slow_decision_still_counts(tmp_path: Path) -> None:
    # The heartbeat arrives while another decision holds the controller (as a commit waiting for
    # the quorum does); the expiry check that runs meanwhile must not fence the broker for it.
    async def scenario() -> None:
        controller = LocalController(tmp_path / "meta", 1, "cid")
        controller.replay()
        epoch = await controller.register_broker(1, "i1", endpoint(1), None)
        await controller.heartbeat(1, epoch)
        # Silent for 10 s against a 5 s session, set rather than slept: with real sleeps close to
        # the timeout, a loaded machine's scheduling delay alone expired the new heartbeat too.
        controller.last_heartbeat[1] -= 10
        async with controller._lock:
            beat = asyncio.create_task(controller.heartbeat(1, epoch))
            expiry = asyncio.create_task(controller.fence_expired(5000))
            await asyncio.sleep(0.05)
        assert await expiry == []
        assert (await beat).error == ErrorCode.NONE
        assert not controller.image.brokers[1].fenced

    asyncio.run(scenario())
