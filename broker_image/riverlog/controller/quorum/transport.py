"""Raft messages over Kafka's KRaft RPCs: the network side of the :class:`RaftDriver`.

Outbound, every request message of the core (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
FetchSnapshot) becomes a Kafka request to the destination voter's CONTROLLER listener
(``controller.quorum.voters``); its response is turned back into a core message and delivered.
Each destination gets two connections: fetches (which the leader holds for up to
``fetch_max_wait_ms``) on one, everything else on the other, because a Kafka connection answers
its requests strictly in order and a parked fetch must not delay a vote.

Inbound, a request handler (``handlers/quorum.py``) hands the decoded message to the driver and
waits for the core's response to that sender, which ``send`` routes back to it instead of to the
network. Responses are paired with waiting requests by sender and message type, oldest first; a
fetch response also by the fetch position it echoes, so an answer never goes to a fetch it was
not computed for.

Lost, late or duplicated messages are fine: the core re-sends after its request timeout and
ignores stale answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ...client.connection import BrokerConnection
from ...security.client_config import ClientSecurity
from ..raft import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteResponse,
)
from . import wire
from .driver import RaftDriver, Transport

log = logging.getLogger(__name__)

_RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse, FetchSnapshotResponse)


@dataclass(frozen=True)
class Address:
    host: str
    port: int


@dataclass
class _Waiter:
    future: asyncio.Future[Message]
    fetch_position: tuple[int, int] | None  # (fetch_offset, last_fetched_epoch) of a fetch


class RaftTransport(Transport):
    def __init__(self, node_id: int, cluster_id: str, voters: Mapping[int, Address], *,
                 request_timeout_s: float, fetch_wait_s: float, security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        # TLS and SASL towards the other voters: the controller listener's settings.
        self.security = security
        self.cluster_id = cluster_id
        self.voters = dict(voters)
        self.request_timeout_s = request_timeout_s
        self.fetch_wait_s = fetch_wait_s
        self.driver: RaftDriver | None = None
        # (sender, response type) -> requests from that sender waiting for the core's answer
        self._waiting: dict[tuple[int, type], list[_Waiter]] = {}
        self._connections: dict[tuple[int, str], BrokerConnection] = {}
        self._connecting: dict[tuple[int, str], asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        # Fetch responses this node received with no error, for "have I caught up" checks.
        self.last_fetch_high_watermark: int | None = None
        self.fetch_responses = 0

    # Outbound ------------------------------------------------------------------------------

    def send(self, msg: Message) -> None:
        if self._closed:
            return
        if isinstance(msg, _RESPONSES):
            self._answer(msg)
            return
        task = asyncio.get_running_loop().create_task(self._call(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, msg: Message) -> None:
        lane = "fetch" if isinstance(msg, (FetchRequest, FetchSnapshotRequest)) else "control"
        timeout = self.request_timeout_s + (self.fetch_wait_s if lane == "fetch" else 0)
        try:
            conn = await self._connection(msg.dst, lane)
            api_key, version, body = wire.encode_request(msg, self.cluster_id)
            response = await conn.request(api_key, body, version, timeout=timeout)
            reply = wire.decode_response(api_key, response, msg)
        except (TimeoutError, OSError, ConnectionError) as exc:
            log.debug("raft %d -> %d: %s failed: %s", self.node_id, msg.dst, type(msg).__name__, exc)
            await self._drop(msg.dst, lane)
            return
        except Exception as exc:  # a client error (closed connection, timeout, bad answer)
            log.debug("raft %d -> %d: %s failed: %r", self.node_id, msg.dst, type(msg).__name__, exc)
            await self._drop(msg.dst, lane)
            return
        if isinstance(reply, FetchResponse) and not reply.error:
            self.fetch_responses += 1
            self.last_fetch_high_watermark = reply.high_watermark
        if self.driver is not None:
            self.driver.deliver(reply)

    async def _connection(self, dst: int, lane: str) -> BrokerConnection:
        key = (dst, lane)
        lock = self._connecting.setdefault(key, asyncio.Lock())
        async with lock:
            conn = self._connections.get(key)
            if conn is not None and not conn.closed:
                return conn
            address = self.voters.get(dst)
            if address is None:
                raise ConnectionError(f"node {dst} is not a voter in controller.quorum.voters")
            conn = await BrokerConnection.connect(
                address.host, address.port, client_id=f"raft-{self.node_id}",
                connect_timeout=self.request_timeout_s, request_timeout=self.request_timeout_s,
                negotiate=False, security=self.security)
            self._connections[key] = conn
            return conn

    async def _drop(self, dst: int, lane: str) -> None:
        conn = self._connections.pop((dst, lane), None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # Inbound -------------------------------------------------------------------------------

    async def handle(self, msg: Message, response_type: type) -> Message | None:
        """Deliver an inbound request and wait for the core's answer (``None`` if none came in
        time: the caller answers nothing and the sender's request times out, as if lost)."""
        driver = self.driver
        if driver is None or self._closed:
            return None
        position = (msg.fetch_offset, msg.last_fetched_epoch) if isinstance(msg, FetchRequest) else None
        waiter = _Waiter(asyncio.get_running_loop().create_future(), position)
        queue = self._waiting.setdefault((msg.src, response_type), [])
        queue.append(waiter)
        driver.deliver(msg)
        timeout = self.request_timeout_s + (self.fetch_wait_s if isinstance(msg, FetchRequest) else 0)
        try:
            return await asyncio.wait_for(waiter.future, timeout)
        except TimeoutError:
            return None
        finally:
            if waiter in queue:
                queue.remove(waiter)

    def _answer(self, msg: Message) -> None:
        queue = self._waiting.get((msg.dst, type(msg)))
        if not queue:
            return  # its request gave up waiting: the sender will retry
        position = (msg.fetch_offset, msg.last_fetched_epoch) if isinstance(msg, FetchResponse) else None
        for waiter in queue:
            if waiter.future.done():
                continue
            if position is not None and waiter.fetch_position != position:
                continue
            waiter.future.set_result(msg)
            queue.remove(waiter)
            return

    # Life cycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for key in list(self._connections):
            await self._drop(*key)
        for queue in self._waiting.values():
            for waiter in queue:
                if not waiter.future.done():
                    waiter.future.cancel()
        self._waiting.clear()


__all__ = ["Address", "RaftTransport"]
