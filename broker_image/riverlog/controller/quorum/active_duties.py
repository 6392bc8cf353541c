"""What the active controller does on its own, unasked: broker sessions and leader rebalance.

The active controller fences brokers whose heartbeats stop (``broker.session.timeout.ms``); a
newly elected one first gives every live broker a fresh session, as Kafka's does. A broker whose
heartbeat is late and whose listener refuses connections is fenced at once: its process is gone
(``liveness.py``). It also moves partition leadership back to preferred leaders
(``auto.leader.rebalance.enable``, ``leader_balance.py``). Other nodes run the same loops idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from ..image import MetadataImage
from ..leader_balance import LeaderBalanceSettings
from ..raft import NotLeaderError
from . import liveness
from .driver import LeadershipLostError, RaftDriver
from .forwarding import ControllerUnavailableError

log = logging.getLogger(__name__)

# A sleep that ends this much later than asked means the loop was blocked (not just scheduling
# noise): the excess is excused from every broker's session.
STALL_EXCUSED_S = 0.2


class ActiveController(Protocol):
    """What the duties need of the controller they run for (a ``QuorumController``)."""

    node_id: int
    image: MetadataImage
    driver: RaftDriver
    last_heartbeat: dict[int, float]
    session_timeout_ms: int
    heartbeat_interval_ms: int
    inter_broker_listener: str
    leader_balance: LeaderBalanceSettings

    @property
    def is_active(self) -> bool: ...

    def begin_active_term(self) -> None: ...

    def excuse_stall(self, seconds: float) -> None: ...

    async def commit_bootstrap_credentials(self) -> None: ...

    async def fence_expired(self, session_timeout_ms: int) -> list[int]: ...

    async def fence_if_still_silent(self, broker_id: int, last_heartbeat: float, address: tuple[str, int]) -> None: ...

    async def balance_leaders(self, imbalance_percentage: int) -> int: ...


class ActiveDuties:
    """The active controller's periodic work, as loops every node runs (idle unless active)."""

    def __init__(self, controller: ActiveController) -> None:
        self.controller = controller
        self._active_epoch: int | None = None
        # broker id -> the heartbeat time its listener was last probed for (once per late beat)
        self._probed: dict[int, float] = {}
        self.probes: set[asyncio.Task[None]] = set()

    async def keep_sessions(self) -> None:
        """While active: fence brokers whose sessions expired. On becoming active: fresh sessions
        for every live broker (their heartbeats went to the previous controller), new producer id
        blocks (the previous controller's may be partly handed out)."""
        controller = self.controller
        interval = max(0.05, min(controller.session_timeout_ms / 6000, controller.heartbeat_interval_ms / 5000))
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(interval)
            # Woken late: the loop was blocked, and heartbeats waited unread in their sockets.
            stall = loop.time() - before - interval
            if stall > STALL_EXCUSED_S:
                controller.excuse_stall(stall)
            if not controller.is_active:
                self._active_epoch = None
                continue
            epoch = controller.driver.epoch
            if self._active_epoch != epoch:
                self._active_epoch = epoch
                controller.begin_active_term()
                log.info("node %d is the active controller (epoch %d)", controller.node_id, epoch)
                try:
                    await controller.commit_bootstrap_credentials()
                except (NotLeaderError, LeadershipLostError, ControllerUnavailableError):
                    self._active_epoch = None  # lost it meanwhile: the next active term tries again
                except Exception:
                    log.exception("recording bootstrap SCRAM credentials failed")
                continue
            try:
                await controller.fence_expired(controller.session_timeout_ms)
            except (NotLeaderError, LeadershipLostError, ControllerUnavailableError):
                pass
            except Exception:
                log.exception("fencing expired brokers failed")
            self._probe_late_brokers()

    def _probe_late_brokers(self) -> None:
        """Probe the listener of every live broker whose heartbeat is overdue (see liveness.py)."""
        controller = self.controller
        now = asyncio.get_running_loop().time()
        late_after = liveness.LATE_HEARTBEATS * controller.heartbeat_interval_ms / 1000
        for broker_id in sorted(controller.image.live_broker_ids()):
            last = controller.last_heartbeat.get(broker_id)
            if broker_id == controller.node_id or last is None or now - last < late_after:
                continue
            if self._probed.get(broker_id) == last:
                continue  # probed already since its last heartbeat
            self._probed[broker_id] = last
            task = asyncio.get_running_loop().create_task(self._fence_if_gone(broker_id, last))
            self.probes.add(task)
            task.add_done_callback(self.probes.discard)

    async def _fence_if_gone(self, broker_id: int, last_heartbeat: float) -> None:
        controller = self.controller
        broker = controller.image.brokers.get(broker_id)
        address = None if broker is None else liveness.probe_address(broker, controller.inter_broker_listener)
        if address is None or not await liveness.nothing_listens(*address):
            return
        with contextlib.suppress(NotLeaderError, LeadershipLostError):
            await controller.fence_if_still_silent(broker_id, last_heartbeat, address)

    async def balance_leaders(self) -> None:
        """Automatic leader rebalance (``auto.leader.rebalance.enable``), run by the active
        controller only."""
        settings = self.controller.leader_balance
        if not settings.enabled:
            return
        while True:
            await asyncio.sleep(settings.interval_s)
            if not self.controller.is_active:
                continue
            try:
                await self.controller.balance_leaders(settings.imbalance_percentage)
            except (NotLeaderError, LeadershipLostError):
                pass
            except Exception:
                log.exception("automatic leader rebalance failed; retrying in %gs", settings.interval_s)


__all__ = ["ActiveController", "ActiveDuties"]
