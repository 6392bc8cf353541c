"""Automatic preferred-leader rebalance: a pure decision plus the periodic task that applies it.

After a broker fails and returns, the partitions it preferably leads (it is their first
replica) stay led elsewhere: leadership moved away and nothing moves it back, so load piles on
the survivors. With ``auto.leader.rebalance.enable`` (default true) the controller checks every
``leader.imbalance.check.interval.seconds`` (300) and, for each broker whose share of preferred
partitions led by someone else exceeds ``leader.imbalance.per.broker.percentage`` (10), moves
leadership back wherever the preferred replica is live and in the ISR (a preferred election, the
same as ElectLeaders type 0).

The per-broker percentage is the ZooKeeper-era controller's rule; KRaft's controller ignores
that setting and rebalances every partition whose preferred replica can lead. Riverlog honours
it, so operators keep the knob. Partitions in the middle of a reassignment are left alone: their
completion may move leadership anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..config import BrokerConfig
from .image import MetadataImage, PartitionImage, TopicImage
from .partition_ops import partition_change
from .records import Record

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderBalanceSettings:
    enabled: bool = True
    interval_s: float = 300.0
    imbalance_percentage: int = 10

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> LeaderBalanceSettings:
        return cls(config.get_bool("auto.leader.rebalance.enable"),
                   float(config.get_int("leader.imbalance.check.interval.seconds")),
                   config.get_int("leader.imbalance.per.broker.percentage"))


def imbalance_ratios(image: MetadataImage) -> dict[int, float]:
    """Per broker: the fraction of the partitions it preferably leads that others lead now."""
    preferred: dict[int, list[PartitionImage]] = {}
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if part.replicas:
                preferred.setdefault(part.replicas[0], []).append(part)
    return {broker: sum(1 for p in parts if p.leader != broker) / len(parts) for broker, parts in preferred.items()}


def preferred_leader_elections(image: MetadataImage, imbalance_percentage: int) -> list[Record]:
    """Records moving leadership back to preferred replicas on the brokers whose imbalance
    exceeds ``imbalance_percentage``; only where the preferred replica is live and in the ISR."""
    threshold = imbalance_percentage / 100
    over = {broker for broker, ratio in imbalance_ratios(image).items() if ratio > threshold}
    live = image.live_broker_ids()
    records: list[Record] = []
    for topic in sorted(image.topics.values(), key=lambda t: t.name):
        for index in sorted(topic.partitions):
            record = _move_back(topic, topic.partitions[index], over, live)
            if record is not None:
                records.append(record)
    return records


def _move_back(topic: TopicImage, part: PartitionImage, over: set[int], live: frozenset[int]) -> Record | None:
    if not part.replicas or part.reassigning:
        return None
    preferred = part.replicas[0]
    if preferred not in over or part.leader == preferred or preferred not in live or preferred not in part.isr:
        return None
    return partition_change(topic.topic_id, part, leader=preferred)


async def run_periodically(balance: Callable[[], Awaitable[object]], settings: LeaderBalanceSettings) -> None:
    """The controller owner's task: ``balance()`` every interval while enabled (cancel to stop)."""
    if not settings.enabled:
        return
    while True:
        await asyncio.sleep(settings.interval_s)
        try:
            await balance()
        except Exception:
            log.exception("automatic leader rebalance failed; retrying in %gs", settings.interval_s)
