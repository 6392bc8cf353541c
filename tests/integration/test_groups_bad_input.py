"""Acceptance 6: group requests that are wrong on purpose get Kafka's exact error codes, and
disturb nothing else.

Real clients never send these, so the requests are built field by field with Riverlog's own
client connection and protocol schemas (:mod:`support.group_protocol`): unknown or inconsistent
protocols, wrong generations, unknown member ids, commits for deleted topics, oversized commit
and join metadata, session timeouts outside the broker's range, a stale static instance, and the
answers around a rebalance (REBALANCE_IN_PROGRESS exactly where Kafka gives it).

Every scenario runs next to a healthy group whose id hashes to the same ``__consumer_offsets``
partition (so it shares the coordinator's state with the misbehaving group): it heartbeats
throughout, and afterwards must still be Stable in the same generation, with working commits.
The expected codes were checked against Apache Kafka (RIVERLOG_TEST_TARGET=kafka).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from riverlog.client.admin import AdminClient
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.group_protocol import (
    Heartbeater,
    RawMember,
    assignment,
    code_name,
    colocated_group,
    commit_offsets,
    describe_group,
    fetch_offsets,
    subscription,
)
from support.groups import GROUP_BROKER_SETTINGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "bad-input"
PARTITIONS = 3
# Not Kafka's defaults (6 s and 30 min), so the test also checks the settings are honoured.
MIN_SESSION_MS = 5_000
MAX_SESSION_MS = 120_000
SESSION_MS = 10_000
OFFSETS_PARTITIONS = int(str(GROUP_BROKER_SETTINGS["offsets.topic.num.partitions"]))
# offset.metadata.max.bytes, Kafka's default.
MAX_COMMIT_METADATA = 4096
SCENARIO_TIMEOUT = 120.0

NONE = ErrorCode.NONE


@pytest.fixture(scope="module")
def group_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    broker = module_broker_factory({
        **GROUP_BROKER_SETTINGS,
        "group.min.session.timeout.ms": MIN_SESSION_MS,
        "group.max.session.timeout.ms": MAX_SESSION_MS,
    })
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    return broker


def expect(actual: int, expected: int, what: str) -> None:
    assert actual == expected, f"{what}: got {code_name(actual)}, Kafka answers {code_name(expected)}"


def expect_all(codes: dict[tuple[str, int], int], expected: dict[tuple[str, int], int], what: str) -> None:
    got = {k: code_name(v) for k, v in codes.items()}
    want = {k: code_name(v) for k, v in expected.items()}
    assert got == want, f"{what}: got {got}, Kafka answers {want}"


@contextlib.asynccontextmanager
async def healthy_neighbour(broker: BrokerProcess, near: str) -> AsyncIterator[RawMember]:
    """A one-member group sharing ``near``'s offsets partition, heartbeating all along; on exit
    it must be undisturbed: same generation, Stable, heartbeats and commits answered NONE."""
    group_id = colocated_group(near, OFFSETS_PARTITIONS, f"healthy-{near}")
    member = await RawMember.open(broker.host, broker.port, group_id, session_timeout_ms=SESSION_MS)
    heartbeats: Heartbeater | None = None
    try:
        await member.join_and_sync({TOPIC: list(range(PARTITIONS))})
        generation = member.generation
        expect_all(await member.commit({(TOPIC, 0): 1}), {(TOPIC, 0): NONE}, "healthy group's commit")
        heartbeats = Heartbeater(member).start()
        yield member
        await heartbeats.stop()
        heartbeats.check()
        assert member.generation == generation
        expect(await member.heartbeat(), NONE, "healthy group's heartbeat afterwards")
        expect_all(await member.commit({(TOPIC, 0): 2}), {(TOPIC, 0): NONE}, "healthy group's commit afterwards")
        error, offsets = await fetch_offsets(member.conn, group_id, {TOPIC: [0]})
        expect(error, NONE, "healthy group's offset fetch")
        assert offsets[(TOPIC, 0)][0] == 2, offsets
        described = await describe_group(member.conn, group_id)
        assert described["group_state"] == "Stable", described
        assert [m["member_id"] for m in described["members"]] == [member.member_id], described
        leave = await member.leave()
        expect(leave["error_code"], NONE, "healthy member's LeaveGroup")
    finally:
        if heartbeats is not None:
            await heartbeats.stop()
        await member.close()


def run(broker: BrokerProcess, group: str, scenario: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        async with healthy_neighbour(broker, group):
            await scenario()

    asyncio.run(asyncio.wait_for(main(), SCENARIO_TIMEOUT))
    broker.assert_alive()


async def stable_member(broker: BrokerProcess, group: str, instance_id: str | None = None) -> RawMember:
    member = await RawMember.open(broker.host, broker.port, group, session_timeout_ms=SESSION_MS,
                                  instance_id=instance_id)
    await member.join_and_sync({TOPIC: list(range(PARTITIONS))})
    return member


# --- JoinGroup ------------------------------------------------------------------------------------


def test_first_join_without_member_id_is_told_to_rejoin_with_one(group_broker: BrokerProcess) -> None:
    group = "bad-member-id-required"

    async def scenario() -> None:
        member = await RawMember.open(group_broker.host, group_broker.port, group, session_timeout_ms=SESSION_MS)
        try:
            first = await member.join(follow_member_id_required=False)
            expect(first["error_code"], ErrorCode.MEMBER_ID_REQUIRED, "JoinGroup v4+ with an empty member id")
            assert first["member_id"], f"MEMBER_ID_REQUIRED must carry the member id to use: {first}"
            second = await member.join(member_id=first["member_id"])
            expect(second["error_code"], NONE, "JoinGroup with the member id handed out")
            assert second["member_id"] == first["member_id"] == second["leader"], second
            assert second["generation_id"] == 1 and second["protocol_name"] == "range", second
            # Not knowing the member id: a made-up one for a group that does not exist.
            stranger = RawMember(member.conn, "bad-no-such-group")
            unknown = await stranger.join(member_id="made-up-member")
            expect(unknown["error_code"], ErrorCode.UNKNOWN_MEMBER_ID, "JoinGroup with an unknown member id")
        finally:
            await member.close()

    run(group_broker, group, scenario)


def test_join_with_inconsistent_protocols(group_broker: BrokerProcess) -> None:
    group = "bad-protocols"

    async def scenario() -> None:
        incumbent = await stable_member(group_broker, group)
        newcomer = await RawMember.open(group_broker.host, group_broker.port, group, session_timeout_ms=SESSION_MS)
        try:
            generation = incumbent.generation
            # A group nobody has joined yet: no protocols at all, or no protocol type.
            fresh = RawMember(newcomer.conn, "bad-protocols-fresh")
            r = await fresh.join(protocols=[])
            expect(r["error_code"], ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "JoinGroup with no protocols")
            r = await fresh.join(protocol_type="")
            expect(r["error_code"], ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "JoinGroup with an empty protocol type")
            # The incumbent's group: no protocol in common, or another protocol type. Kafka
            # refuses before handing out a member id.
            r = await newcomer.join(protocols=[("no-such-assignor", subscription([TOPIC]))])
            expect(r["error_code"], ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "JoinGroup with no protocol in common")
            r = await newcomer.join(protocol_type="connect")
            expect(r["error_code"], ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "JoinGroup with another protocol type")
            # Refused joins change nothing: no rebalance, the incumbent alone, still on "range".
            expect(await incumbent.heartbeat(), NONE, "incumbent's heartbeat after refused joins")
            described = await describe_group(incumbent.conn, group)
            assert described["group_state"] == "Stable" and described["protocol_data"] == "range", described
            assert [m["member_id"] for m in described["members"]] == [incumbent.member_id], described
            assert incumbent.generation == generation
            # A newcomer offering the group's protocol among others is accepted.
            joining = asyncio.ensure_future(newcomer.join(
                protocols=[("no-such-assignor", b""), ("range", subscription([TOPIC]))]))
            expect(await _heartbeat_until_rebalance(incumbent), ErrorCode.REBALANCE_IN_PROGRESS,
                   "incumbent's heartbeat once a compatible member joins")
            rejoined = await incumbent.join()
            joined = await joining
            expect(rejoined["error_code"], NONE, "incumbent's rejoin")
            expect(joined["error_code"], NONE, "compatible newcomer's join")
            assert joined["protocol_name"] == rejoined["protocol_name"] == "range", joined
            assert joined["generation_id"] == rejoined["generation_id"] == generation + 1, (joined, rejoined)
            await newcomer.leave()
            await incumbent.leave()
        finally:
            await incumbent.close()
            await newcomer.close()

    run(group_broker, group, scenario)


async def _heartbeat_until_rebalance(member: RawMember, attempts: int = 50) -> int:
    """Heartbeat until the answer is not NONE (a join elsewhere takes a moment to arrive)."""
    code = NONE
    for _ in range(attempts):
        code = await member.heartbeat()
        if code != NONE:
            return code
        await asyncio.sleep(0.1)
    return code


def test_session_timeouts_outside_the_configured_range(group_broker: BrokerProcess) -> None:
    group = "bad-session"

    async def scenario() -> None:
        member = await RawMember.open(group_broker.host, group_broker.port, group)
        try:
            for session in (MIN_SESSION_MS - 1, MAX_SESSION_MS + 1, 0, -1):
                r = await member.join(session_timeout_ms=session)
                expect(r["error_code"], ErrorCode.INVALID_SESSION_TIMEOUT, f"JoinGroup with session {session} ms")
                assert r["generation_id"] == -1, r
            # The bounds themselves are valid (each in a group of its own).
            for session in (MIN_SESSION_MS, MAX_SESSION_MS):
                bound = RawMember(member.conn, f"{group}-{session}")
                r = await bound.join(session_timeout_ms=session)
                expect(r["error_code"], NONE, f"JoinGroup with session {session} ms")
                expect((await bound.leave())["error_code"], NONE, "LeaveGroup")
            # The refused joins left no group behind.
            described = await describe_group(member.conn, group)
            assert described["group_state"] == "Dead" and not described["members"], described
        finally:
            await member.close()

    run(group_broker, group, scenario)


def test_oversized_join_metadata(group_broker: BrokerProcess) -> None:
    group = "bad-big-metadata"

    async def scenario() -> None:
        member = await RawMember.open(group_broker.host, group_broker.port, group, session_timeout_ms=SESSION_MS)
        try:
            # Large but within every limit (Kafka stores group state records up to 1 MiB):
            # everything round-trips byte for byte.
            big = subscription([TOPIC]) + bytes(range(256)) * 2048  # ~512 KiB of user data
            joined = await member.join(protocols=[("range", big)])
            expect(joined["error_code"], NONE, f"JoinGroup with {len(big)} bytes of metadata")
            assert [m["metadata"] for m in joined["members"]] == [big], "the leader must see the metadata as sent"
            synced = await member.sync({member.member_id: assignment({TOPIC: [0]})})
            expect(synced["error_code"], NONE, "SyncGroup after a large join")
            described = await describe_group(member.conn, group)
            assert [m["member_metadata"] for m in described["members"]] == [big]
            expect(await member.heartbeat(), NONE, "heartbeat of the member with large metadata")
            await member.leave()

            # Beyond what fits in one record of the offsets topic (2 MiB, the limit being 1 MiB):
            # Kafka answers the join, then fails the SyncGroup with UNKNOWN_SERVER_ERROR because
            # the group record cannot be written, and the group goes back to preparing a
            # rebalance. Crashing, hanging or dropping the connection would be wrong.
            huge = subscription([TOPIC]) + b"\x5a" * (2 * 1024 * 1024)
            giant = RawMember(member.conn, f"{group}-huge", session_timeout_ms=SESSION_MS)
            joined = await giant.join(protocols=[("range", huge)])
            expect(joined["error_code"], NONE, f"JoinGroup with {len(huge)} bytes of metadata")
            synced = await giant.sync({giant.member_id: assignment({TOPIC: [0]})})
            expect(synced["error_code"], ErrorCode.UNKNOWN_SERVER_ERROR,
                   f"SyncGroup of a group whose {len(huge)} bytes of metadata cannot be stored")
            expect(await giant.heartbeat(), ErrorCode.REBALANCE_IN_PROGRESS, "heartbeat after the failed SyncGroup")
            await giant.leave()
            # The connection still works for ordinary requests.
            expect((await describe_group(member.conn, group))["error_code"], NONE, "DescribeGroups afterwards")
        finally:
            await member.close()

    run(group_broker, group, scenario)


# --- generations and members ------------------------------------------------------------------------


def test_wrong_generations_are_illegal(group_broker: BrokerProcess) -> None:
    group = "bad-generation"

    async def scenario() -> None:
        member = await stable_member(group_broker, group)
        try:
            g = member.generation
            expect_all(await member.commit({(TOPIC, 0): 10}), {(TOPIC, 0): NONE}, "commit in generation")
            for wrong in (g + 1, g - 1, 1000):
                expect(await member.heartbeat(generation=wrong), ErrorCode.ILLEGAL_GENERATION,
                       f"Heartbeat with generation {wrong} (current {g})")
                expect_all(await member.commit({(TOPIC, 0): 99}, generation=wrong),
                           {(TOPIC, 0): ErrorCode.ILLEGAL_GENERATION},
                           f"OffsetCommit with generation {wrong} (current {g})")
            synced = await member.sync({}, generation=g + 1)
            expect(synced["error_code"], ErrorCode.ILLEGAL_GENERATION, f"SyncGroup with generation {g + 1}")
            # None of it took effect: the offset from the right generation stands.
            error, offsets = await fetch_offsets(member.conn, group, {TOPIC: [0]})
            assert error == NONE and offsets[(TOPIC, 0)][0] == 10, offsets
            expect(await member.heartbeat(), NONE, "heartbeat with the right generation")
            described = await describe_group(member.conn, group)
            assert described["group_state"] == "Stable" and len(described["members"]) == 1, described
            await member.leave()
        finally:
            await member.close()

    run(group_broker, group, scenario)


def test_unknown_members(group_broker: BrokerProcess) -> None:
    group = "bad-member"

    async def scenario() -> None:
        member = await stable_member(group_broker, group)
        try:
            g = member.generation
            stranger = "not-a-member"
            expect(await member.heartbeat(member_id=stranger), ErrorCode.UNKNOWN_MEMBER_ID,
                   "Heartbeat from an unknown member")
            expect((await member.sync({}, member_id=stranger))["error_code"], ErrorCode.UNKNOWN_MEMBER_ID,
                   "SyncGroup from an unknown member")
            expect_all(await member.commit({(TOPIC, 1): 5}, member_id=stranger),
                       {(TOPIC, 1): ErrorCode.UNKNOWN_MEMBER_ID}, "OffsetCommit from an unknown member")
            # A commit without member id and generation is only for groups without members.
            expect_all(await commit_offsets(member.conn, group, {(TOPIC, 1): 6}),
                       {(TOPIC, 1): ErrorCode.UNKNOWN_MEMBER_ID}, "standalone OffsetCommit to a group with members")
            # A group nobody ever joined has no members to heartbeat as.
            lost = RawMember(member.conn, "bad-member-no-such-group", member_id=stranger, generation=1)
            expect(await lost.heartbeat(), ErrorCode.UNKNOWN_MEMBER_ID, "Heartbeat to a group that does not exist")
            left = await RawMember(member.conn, group, member_id=stranger).leave()
            if member.version(ApiKey.LEAVE_GROUP) >= 3:
                # Batched leaves answer per member; the request as a whole succeeds.
                expect(left["error_code"], NONE, "LeaveGroup v3+ naming an unknown member")
                assert [(m["member_id"], m["error_code"]) for m in left["members"]] == [
                    (stranger, ErrorCode.UNKNOWN_MEMBER_ID)
                ], left
            else:
                expect(left["error_code"], ErrorCode.UNKNOWN_MEMBER_ID, "LeaveGroup of an unknown member")
            # The real member was not touched by any of it.
            error, offsets = await fetch_offsets(member.conn, group, {TOPIC: [1]})
            assert error == NONE and offsets[(TOPIC, 1)][0] == -1, f"a refused commit was stored: {offsets}"
            expect(await member.heartbeat(), NONE, "the real member's heartbeat")
            assert member.generation == g
            described = await describe_group(member.conn, group)
            assert [m["member_id"] for m in described["members"]] == [member.member_id], described
            await member.leave()
        finally:
            await member.close()

    run(group_broker, group, scenario)


def test_stale_static_instance_is_fenced(group_broker: BrokerProcess) -> None:
    group = "bad-fenced"

    async def scenario() -> None:
        old = await stable_member(group_broker, group, instance_id="instance-a")
        new = await RawMember.open(group_broker.host, group_broker.port, group, instance_id="instance-a",
                                   session_timeout_ms=SESSION_MS)
        try:
            # The same instance id joining again replaces the member: new member id, same
            # generation, no rebalance.
            joined = await new.join()
            expect(joined["error_code"], NONE, "JoinGroup of a known group.instance.id")
            assert joined["member_id"] != old.member_id and joined["generation_id"] == old.generation, joined
            synced = await new.sync({})
            expect(synced["error_code"], NONE, "SyncGroup of the replacing instance")
            assert synced["assignment"] == assignment({TOPIC: list(range(PARTITIONS))}), (
                "the replacing instance gets the assignment of the one it replaced"
            )
            expect(await old.heartbeat(), ErrorCode.FENCED_INSTANCE_ID, "Heartbeat of the replaced instance")
            expect_all(await old.commit({(TOPIC, 0): 3}), {(TOPIC, 0): ErrorCode.FENCED_INSTANCE_ID},
                       "OffsetCommit of the replaced instance")
            expect((await old.sync({}))["error_code"], ErrorCode.FENCED_INSTANCE_ID,
                   "SyncGroup of the replaced instance")
            expect(await new.heartbeat(), NONE, "Heartbeat of the replacing instance")
            described = await describe_group(new.conn, group)
            assert [(m["member_id"], m["group_instance_id"]) for m in described["members"]] == [
                (new.member_id, "instance-a")
            ], described
            assert described["group_state"] == "Stable", described
            await new.leave()
        finally:
            await old.close()
            await new.close()

    run(group_broker, group, scenario)


def test_rebalance_in_progress_exactly_where_kafka_returns_it(group_broker: BrokerProcess) -> None:
    group = "bad-rebalance"

    async def scenario() -> None:
        first = await stable_member(group_broker, group)
        second = await RawMember.open(group_broker.host, group_broker.port, group, session_timeout_ms=SESSION_MS)
        try:
            g = first.generation
            # The second member's join puts the group in PreparingRebalance until the first rejoins.
            required = await second.join(follow_member_id_required=False)
            expect(required["error_code"], ErrorCode.MEMBER_ID_REQUIRED, "second member's first join")
            joining = asyncio.ensure_future(second.join(member_id=required["member_id"]))
            expect(await _heartbeat_until_rebalance(first), ErrorCode.REBALANCE_IN_PROGRESS,
                   "Heartbeat while the group prepares a rebalance")
            assert (await describe_group(first.conn, group))["group_state"] == "PreparingRebalance"
            # Commits of the current generation are still accepted while preparing.
            expect_all(await first.commit({(TOPIC, 0): 4}), {(TOPIC, 0): NONE},
                       "OffsetCommit while the group prepares a rebalance")
            rejoined = await first.join()
            joined = await joining
            second.member_id, second.generation = joined["member_id"], joined["generation_id"]
            second.protocol_name, second.leader = joined["protocol_name"], joined["leader"]
            assert rejoined["generation_id"] == joined["generation_id"] == g + 1, (rejoined, joined)
            assert rejoined["leader"] == joined["leader"] in (first.member_id, second.member_id), (rejoined, joined)
            leader, follower = (first, second) if first.is_leader else (second, first)
            assert len((rejoined if leader is first else joined)["members"]) == 2
            assert (joined if leader is first else rejoined)["members"] == [], "only the leader gets the members"
            assert (await describe_group(first.conn, group))["group_state"] == "CompletingRebalance"
            # Waiting for the leader's assignment: heartbeats are fine, commits are not.
            expect(await follower.heartbeat(), NONE, "Heartbeat while the group completes a rebalance")
            expect_all(await follower.commit({(TOPIC, 0): 5}), {(TOPIC, 0): ErrorCode.REBALANCE_IN_PROGRESS},
                       "OffsetCommit while the group completes a rebalance")
            expect_all(await follower.commit({(TOPIC, 0): 5}, generation=g), {(TOPIC, 0): ErrorCode.ILLEGAL_GENERATION},
                       "OffsetCommit of the previous generation")
            follower_sync = asyncio.ensure_future(follower.sync({}))
            leader_sync = await leader.sync({
                leader.member_id: assignment({TOPIC: [0, 1]}), follower.member_id: assignment({TOPIC: [2]}),
            })
            expect(leader_sync["error_code"], NONE, "leader's SyncGroup")
            follower_synced = await follower_sync
            expect(follower_synced["error_code"], NONE, "follower's SyncGroup")
            assert follower_synced["assignment"] == assignment({TOPIC: [2]})
            assert leader_sync["assignment"] == assignment({TOPIC: [0, 1]})
            expect_all(await follower.commit({(TOPIC, 2): 7}), {(TOPIC, 2): NONE}, "commit once Stable")
            error, offsets = await fetch_offsets(first.conn, group, {TOPIC: [0, 2]})
            assert error == NONE and offsets[(TOPIC, 0)][0] == 4 and offsets[(TOPIC, 2)][0] == 7, offsets
            # A clean leave starts the next rebalance at once.
            expect((await leader.leave())["error_code"], NONE, "LeaveGroup")
            expect(await follower.heartbeat(), ErrorCode.REBALANCE_IN_PROGRESS, "Heartbeat after the leader left")
            await follower.leave()
        finally:
            await first.close()
            await second.close()

    run(group_broker, group, scenario)


# --- OffsetCommit -----------------------------------------------------------------------------------


def test_commits_for_unknown_and_deleted_topics(group_broker: BrokerProcess) -> None:
    group = "bad-deleted-topic"
    doomed = "bad-input-doomed"
    create_topic(group_broker.bootstrap, doomed, 2)

    async def scenario() -> None:
        # Only its connection to the coordinator is used: this group never has members.
        member = await RawMember.open(group_broker.host, group_broker.port, group)
        try:
            # Standalone commits (no member, generation -1): what assign()-only consumers do.
            expect_all(await commit_offsets(member.conn, group, {(doomed, 0): 3, (TOPIC, 0): 1}),
                       {(doomed, 0): NONE, (TOPIC, 0): NONE}, "standalone commit")
            expect_all(
                await commit_offsets(member.conn, group, {("bad-never-created", 0): 1, (TOPIC, PARTITIONS): 1,
                                                          (TOPIC, 1): 2}),
                {("bad-never-created", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                 (TOPIC, PARTITIONS): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 1): NONE},
                "commit for a topic that never existed and a partition beyond the count",
            )
            async with AdminClient(group_broker.bootstrap) as admin:
                await admin.delete_topic(doomed)
            # Deletion reaches the coordinator asynchronously: a bounded wait for the refusal.
            codes: dict[tuple[str, int], int] = {}
            for _ in range(100):
                codes = await commit_offsets(member.conn, group, {(doomed, 0): 4, (TOPIC, 0): 2})
                if codes[(doomed, 0)] != NONE:
                    break
                await asyncio.sleep(0.2)
            expect_all(codes, {(doomed, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 0): NONE},
                       "commit for a deleted topic")
            # The deleted topic's offsets go with it; the others stay.
            everything: dict[tuple[str, int], tuple[int, str | None, int]] = {}
            for _ in range(100):
                error, everything = await fetch_offsets(member.conn, group)
                expect(error, NONE, "OffsetFetch of all topics")
                if (doomed, 0) not in everything:
                    break
                await asyncio.sleep(0.2)
            assert {k: v[0] for k, v in everything.items()} == {(TOPIC, 0): 2, (TOPIC, 1): 2}, everything
            error, named = await fetch_offsets(member.conn, group, {doomed: [0]})
            assert error == NONE and named[(doomed, 0)][0] == -1, named
        finally:
            await member.close()

    run(group_broker, group, scenario)


def test_commit_metadata_larger_than_the_limit(group_broker: BrokerProcess) -> None:
    group = "bad-commit-metadata"

    async def scenario() -> None:
        member = await stable_member(group_broker, group)
        try:
            fits = "m" * MAX_COMMIT_METADATA
            too_big = "x" * (MAX_COMMIT_METADATA + 1)
            expect_all(await member.commit({(TOPIC, 1): 1}, metadata="before"), {(TOPIC, 1): NONE}, "commit")
            # One request, two partitions: the oversized one is refused, the other stored.
            codes = await member.commit({(TOPIC, 0): 7, (TOPIC, 1): 8},
                                        metadata={(TOPIC, 0): fits, (TOPIC, 1): too_big})
            expect_all(codes, {(TOPIC, 0): NONE, (TOPIC, 1): ErrorCode.OFFSET_METADATA_TOO_LARGE},
                       f"commit with {len(fits)} and {len(too_big)} characters of metadata")
            error, offsets = await fetch_offsets(member.conn, group, {TOPIC: [0, 1]})
            expect(error, NONE, "OffsetFetch")
            assert offsets[(TOPIC, 0)][:2] == (7, fits)
            assert offsets[(TOPIC, 1)][:2] == (1, "before"), "the refused commit must not replace the offset"
            # The same limit for standalone commits to a group without members.
            codes = await commit_offsets(member.conn, "bad-commit-metadata-standalone", {(TOPIC, 2): 1},
                                         metadata=too_big)
            expect_all(codes, {(TOPIC, 2): ErrorCode.OFFSET_METADATA_TOO_LARGE}, "standalone oversized commit")
            expect(await member.heartbeat(), NONE, "heartbeat after the refused commits")
            await member.leave()
        finally:
            await member.close()

    run(group_broker, group, scenario)
