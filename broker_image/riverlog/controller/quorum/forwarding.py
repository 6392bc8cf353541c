"""Controller calls on a quorum node: run by the active controller, forwarded by everyone else.

Decisions are made only by the *active controller* (see ``controller.py``). A ``ControllerApi``
call on the active controller runs there; on any other node it is forwarded to the active
controller over the CONTROLLER listener (``messages/controller_call.py``) and returns once this
node's own image has applied the result, so a caller may read ``image`` right after, as with the
local controller. Calls made while there is no active controller (an election, usually a second or
two) wait and retry up to ``CALL_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ...client.connection import BrokerConnection
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..image import MetadataImage
from ..raft import NotLeaderError
from . import codec
from .driver import LeadershipLostError, RaftDriver
from .transport import RaftTransport

log = logging.getLogger(__name__)

T = TypeVar("T")

CALL_TIMEOUT_S = 15.0  # how long a controller call waits for an active controller
RETRY_BACKOFF_S = 0.05
CATCH_UP_TIMEOUT_S = 5.0  # waiting for this node's image to include a forwarded call's records

# The ControllerApi methods a broker may call on the active controller.
FORWARDABLE = frozenset({
    "register_broker", "heartbeat", "fence_broker", "alter_partition", "elect_leaders", "create_topics",
    "delete_topics", "create_partitions", "alter_topic_configs", "alter_group_configs", "allocate_producer_id",
    "alter_partition_reassignments", "update_features", "alter_user_scram_credentials",
    "create_acls", "delete_acls",
    "alter_client_quotas",
})


class _LeaderChangedError(Exception):
    """A forwarded call was abandoned because the Raft leader or epoch changed meanwhile."""


class ControllerUnavailableError(KafkaError):
    code = ErrorCode.NOT_CONTROLLER

    def __init__(self, message: str = "", *, leader_hint: int | None = None) -> None:
        super().__init__(message)
        self.leader_hint = leader_hint  # the leader the refusing voter knows of, if any


class CallingNode(Protocol):
    """What routing needs of the quorum node it routes calls for (a ``QuorumController``)."""

    node_id: int
    image: MetadataImage
    driver: RaftDriver
    transport: RaftTransport

    @property
    def is_active(self) -> bool: ...

    async def wait_applied(self, offset: int, timeout: float) -> bool: ...


class CallRouter:
    """Routes each ``ControllerApi`` call of one node to the active controller, and keeps the
    connections forwarded calls go over (one per leader called)."""

    def __init__(self, node: CallingNode) -> None:
        self.node = node
        self._calls: dict[int, BrokerConnection] = {}  # leader id -> connection for forwarded calls
        self._leader_hint: int | None = None  # named by a voter that refused a call
        self._unreachable: int | None = None  # the last call target that could not be reached
        self._next_voter = -1

    async def route(self, method: str, local: Callable[[], Awaitable[T]], arguments: Sequence[Any],
                    options: Mapping[str, Any], *, catch_up: bool = True) -> T:
        """``local()`` if this node is the active controller, else ``method`` forwarded to the
        active controller; retried until one answers or ``CALL_TIMEOUT_S`` passed. With
        ``catch_up`` a forwarded call returns once this node's image includes its records."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CALL_TIMEOUT_S
        reason = "no controller elected yet"
        while True:
            if self.node.is_active:
                try:
                    return await local()
                except (NotLeaderError, LeadershipLostError) as exc:
                    reason = f"leadership moved during the call: {exc}"
            else:
                leader = self._call_target()
                if leader is not None:
                    try:
                        result: T = await self._forward_until_leader_changes(leader, method, arguments, options,
                                                                             catch_up)
                        self._unreachable = None
                        return result
                    except _LeaderChangedError as exc:
                        # The call may have been lost with an isolated old leader: ask again
                        # at once rather than wait out the request timeout (a broker's
                        # heartbeat stuck there would let the new controller fence it).
                        reason = str(exc)
                        self._leader_hint = None
                        await self._drop_call_connection(leader)
                    except ControllerUnavailableError as exc:
                        reason = str(exc)
                        self._leader_hint = exc.leader_hint
                    except Exception as exc:  # connection errors: the leader may be gone
                        reason = f"controller {leader} unreachable: {exc}"
                        await self._drop_call_connection(leader)
                        # Ask another voter next: it names the new leader (an observer learns
                        # of a new leader only when its own metadata fetch fails over).
                        self._leader_hint = None
                        self._unreachable = leader
            if loop.time() >= deadline:
                raise ControllerUnavailableError(
                    f"{method}: no active controller within {CALL_TIMEOUT_S:g}s ({reason})")
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _call_target(self) -> int | None:
        """Where to send a controller call: the leader a voter named in its last refusal, else
        the Raft leader this node knows, else (that one unreachable) the next other voter."""
        node_id, driver = self.node.node_id, self.node.driver
        voters = self.node.transport.voters
        hint = self._leader_hint
        if hint is not None and hint != node_id and hint in voters:
            return hint
        leader = driver.leader_id if driver.running else None
        if leader is not None and leader != node_id and leader in voters and leader != self._unreachable:
            return leader
        others = sorted(v for v in voters if v != node_id and v != self._unreachable)
        if not others:
            return None
        self._next_voter = (self._next_voter + 1) % len(others)
        return others[self._next_voter]

    async def _forward_until_leader_changes(
        self, leader: int, method: str, arguments: Sequence[Any], options: Mapping[str, Any], catch_up: bool
    ) -> Any:
        """``_forward``, abandoned when this node learns that another node leads the quorum."""
        driver = self.node.driver
        call = asyncio.ensure_future(self._forward(leader, method, arguments, options, catch_up))
        try:
            while not call.done():
                changed = asyncio.ensure_future(driver.soft_state_changed().wait())
                try:
                    await asyncio.wait({call, changed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                elected = driver.leader_id
                if not call.done() and elected is not None and elected != leader:
                    break
            if call.done():
                return call.result()
        finally:
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await call
        raise _LeaderChangedError(f"the quorum moved on while {method} waited for node {leader}")

    async def _forward(self, leader: int, method: str, arguments: Sequence[Any], options: Mapping[str, Any],
                       catch_up: bool) -> Any:
        node = self.node
        conn = self._calls.get(leader)
        if conn is None or conn.closed:
            address = node.transport.voters[leader]
            conn = await BrokerConnection.connect(
                address.host, address.port, client_id=f"controller-call-{node.node_id}",
                connect_timeout=2.0, request_timeout=CALL_TIMEOUT_S, negotiate=False,
                security=node.transport.security)
            self._calls[leader] = conn
        body = {"cluster_id": node.image.cluster_id, "caller_id": node.node_id, "method": method,
                "arguments": codec.to_wire({"args": tuple(arguments), "kwargs": dict(options)})}
        response = await conn.request(ApiKey.RIVERLOG_CONTROLLER_CALL, body, 0, timeout=CALL_TIMEOUT_S)
        error = ErrorCode(response["error_code"])
        if error == ErrorCode.NOT_CONTROLLER:
            hint = response.get("leader_id", -1)
            raise ControllerUnavailableError(response.get("error_message") or f"node {leader} is not the controller",
                                             leader_hint=hint if hint >= 0 and hint != leader else None)
        if error != ErrorCode.NONE:
            raise KafkaError(response.get("error_message") or error.name, error)
        if catch_up and not await node.wait_applied(response["metadata_offset"], CATCH_UP_TIMEOUT_S):
            log.warning("node %d: metadata still behind offset %d after %s; going on", node.node_id,
                        response["metadata_offset"], method)
        return codec.from_wire(response["result"])

    async def _drop_call_connection(self, leader: int) -> None:
        conn = self._calls.pop(leader, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        """Close the connections of forwarded calls."""
        for conn in self._calls.values():
            with contextlib.suppress(Exception):
                await conn.close()


__all__ = ["CALL_TIMEOUT_S", "FORWARDABLE", "CallRouter", "CallingNode", "ControllerUnavailableError"]
