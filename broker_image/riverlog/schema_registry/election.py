"""Electing the writer through a classic consumer group, as Confluent's registry does.

Every instance joins the group (``schema-registry`` by default) with protocol type ``sr`` and its
identity as member metadata: ``{"host", "port", "scheme", "leader_eligibility", "version"}``
(JSON), plus ``"writer": true`` from the writer so far. The group leader (whichever member the
coordinator picks) chooses the writer among the eligible members: the writer so far if it is
still a member (a new instance joining does not move the writer), else the eligible member with
the smallest URL. The choice
goes to everyone in the SyncGroup assignment, ``{"version", "error", "leader", "leader_identity"}``.

When an instance dies, the coordinator drops it after the session timeout, the others rejoin and
a new writer is chosen. Between "a rebalance began" and "the new assignment arrived" nobody is
the writer: writes then answer 50004 (unknown leader) and clients retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..client import AdminClient, BrokerConnection, ClientError
from ..client.errors import BrokerError
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..security.client_config import ClientSecurity

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"
SESSION_TIMEOUT_MS = 6000  # a dead writer is replaced within about this long
REBALANCE_TIMEOUT_MS = 10000
HEARTBEAT_INTERVAL = 1.0

_REJOIN = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                     ErrorCode.MEMBER_ID_REQUIRED})
_RECONNECT = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


@dataclass(frozen=True)
class Identity:
    host: str
    port: int
    scheme: str = "http"
    leader_eligibility: bool = True

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "scheme": self.scheme,
                "leader_eligibility": self.leader_eligibility, "version": 1}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Identity:
        return cls(str(obj["host"]), int(obj["port"]), str(obj.get("scheme", "http")),
                   bool(obj.get("leader_eligibility", True)))


def choose_writer(members: dict[str, Identity], previous: Identity | None) -> str | None:
    """The member id that writes: the previous writer if still here, else the smallest URL."""
    eligible = {m: i for m, i in members.items() if i.leader_eligibility}
    if not eligible:
        return None
    for member, identity in eligible.items():
        if identity == previous:
            return member
    return min(eligible, key=lambda m: (eligible[m].url, m))


def assignment(writer: str | None, members: dict[str, Identity]) -> bytes:
    body: dict[str, Any] = {"version": 1, "error": 0 if writer else 1, "leader": writer,
                            "leader_identity": members[writer].to_json() if writer else None}
    return json.dumps(body).encode()


# (writer's identity or None, whether it is this instance): called on every new assignment and
# with (None, False) when a rebalance starts.
OnAssignment = Callable[[Identity | None, bool], Awaitable[None]]


class WriterElection:
    def __init__(self, bootstrap: str, group_id: str, identity: Identity, on_assignment: OnAssignment, *,
                 security: ClientSecurity | None = None) -> None:
        self.group_id = group_id
        self.identity = identity
        self.on_assignment = on_assignment
        self.admin = AdminClient(bootstrap, client_id="riverlog-schema-registry-election", security=security)
        self.member_id = ""
        self.generation = -1
        self.writer: Identity | None = None
        self._task: asyncio.Task[None] | None = None
        self._conn: BrokerConnection | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None and self.member_id:
            # Leave, so the others elect a new writer now rather than after the session timeout.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.request(ApiKey.LEAVE_GROUP, {
                    "group_id": self.group_id, "member_id": self.member_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None}]}), 3.0)
        await self.admin.close()

    async def _set(self, writer: Identity | None) -> None:
        changed = writer != self.writer
        self.writer = writer
        if changed:
            log.info("schema registry: writer is %s", "being elected" if writer is None else
                     f"{writer.url}{' (this instance)' if writer == self.identity else ''}")
        await self.on_assignment(writer, writer is not None and writer == self.identity)

    async def _run(self) -> None:
        while True:
            try:
                await self._connect()
                await self._member_loop()
            except asyncio.CancelledError:
                raise
            except (ClientError, OSError, BrokerError, ValueError, KeyError) as exc:
                log.warning("schema registry: writer election: %s; retrying", exc)
            await self._set(None)
            self._conn = None
            await asyncio.sleep(0.5)

    async def _connect(self) -> None:
        coordinator = await self.admin.find_group_coordinator(self.group_id)
        self._conn = await self.admin.cluster.connection_to(coordinator.node_id)

    async def _member_loop(self) -> None:
        while True:
            if not await self._join_and_sync():
                continue
            while True:
                await asyncio.sleep(HEARTBEAT_INTERVAL)
                code = await self._heartbeat()
                if code == ErrorCode.NONE:
                    continue
                await self._set(None)  # no writer while the group rebalances
                if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    self.member_id = "" if code == ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
                    break
                if code == ErrorCode.REBALANCE_IN_PROGRESS:
                    break
                raise BrokerError(code, "heartbeat")

    async def _request(self, api_key: int, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        assert self._conn is not None
        return await self._conn.request(api_key, body, timeout=timeout)

    async def _join_and_sync(self) -> bool:
        body = {
            "group_id": self.group_id, "session_timeout_ms": SESSION_TIMEOUT_MS,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "member_id": self.member_id, "group_instance_id": None,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": PROTOCOL_NAME, "metadata": json.dumps(
                {**self.identity.to_json(), "writer": self.writer == self.identity}).encode()}],
            "reason": None,
        }
        joined = await self._request(ApiKey.JOIN_GROUP, body, timeout=REBALANCE_TIMEOUT_MS / 1000 + 15)
        if joined["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = joined["member_id"]
            return False
        if joined["error_code"] in _REJOIN:
            self.member_id = "" if joined["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
            return False
        if joined["error_code"] != ErrorCode.NONE:
            raise BrokerError(joined["error_code"], "join the writer election group")
        self.member_id = joined["member_id"]
        self.generation = joined["generation_id"]
        assignments = []
        if joined["leader"] == self.member_id:
            metadata = {m["member_id"]: json.loads(m["metadata"]) for m in joined["members"]}
            members = {m: Identity.from_json(meta) for m, meta in metadata.items()}
            # The writer so far says so itself: the group leader may be a newcomer that knows nothing.
            said = [members[m] for m, meta in metadata.items() if meta.get("writer") is True]
            writer = choose_writer(members, said[0] if said else self.writer)
            data = assignment(writer, members)
            assignments = [{"member_id": m, "assignment": data} for m in members]
        synced = await self._request(ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": PROTOCOL_TYPE, "protocol_name": PROTOCOL_NAME,
            "assignments": assignments}, timeout=REBALANCE_TIMEOUT_MS / 1000 + 15)
        if synced["error_code"] in _REJOIN:
            return False
        if synced["error_code"] != ErrorCode.NONE:
            raise BrokerError(synced["error_code"], "sync the writer election group")
        chosen = json.loads(synced["assignment"]) if synced["assignment"] else {}
        identity = chosen.get("leader_identity")
        await self._set(Identity.from_json(identity) if identity else None)
        return True

    async def _heartbeat(self) -> int:
        response = await self._request(ApiKey.HEARTBEAT, {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None})
        code: int = response["error_code"]
        if code in _RECONNECT:
            raise BrokerError(code, "heartbeat")
        return code
