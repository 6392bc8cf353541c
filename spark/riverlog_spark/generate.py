"""Generated events (and the users reference table) for trying and testing the pipelines.

``events(...)`` is a pure, seeded function, so a run can be reproduced; ``produce(...)`` writes
records with Riverlog's own async producer (key = event id or user id, the event time as the
record timestamp), showing a progress bar.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from .progress import ProgressBar

if TYPE_CHECKING:
    from riverlog.security.client_config import ClientSecurity

    from .avro_events import AvroEncoder

DEFAULT_CATEGORIES = ("books", "games", "music", "garden", "tools")
TIERS = ("bronze", "silver", "gold")
COUNTRIES = ("NO", "SE", "DK", "FI", "IS")
NAMES = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Leslie", "Frances", "John", "Radia")


@dataclass(frozen=True)
class EventSpec:
    count: int
    start_ms: int
    step_ms: int = 100  # event times advance by this much per event
    jitter_ms: int = 0  # plus a random delay in [0, jitter_ms]: out-of-order arrival
    users: int = 20
    categories: Sequence[str] = DEFAULT_CATEGORIES
    seed: int = 1
    id_prefix: str = "e-"


def user_id(index: int) -> str:
    return f"u-{index:04d}"


def events(spec: EventSpec) -> list[dict[str, Any]]:
    rng = random.Random(spec.seed)
    out = []
    for i in range(spec.count):
        cents = rng.randint(100, 20_000)
        out.append({
            "event_id": f"{spec.id_prefix}{i:06d}",
            "user": user_id(rng.randrange(spec.users)),
            "category": rng.choice(list(spec.categories)),
            # Whole cents written as a decimal number; repr of cents/100 is exactly two places.
            "amount": cents / 100,
            "ts": spec.start_ms + i * spec.step_ms + (rng.randint(0, spec.jitter_ms) if spec.jitter_ms else 0),
        })
    return out


def users(count: int, seed: int = 1) -> list[tuple[str, dict[str, str]]]:
    rng = random.Random(seed)
    return [
        (user_id(i), {"name": rng.choice(NAMES), "tier": rng.choice(TIERS), "country": rng.choice(COUNTRIES)})
        for i in range(count)
    ]


def encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


Record = tuple[bytes | None, bytes | None, int | None]  # key, value, timestamp (None: now)


async def produce(bootstrap: str, topic: str, records: Sequence[Record], *,
                  progress: TextIO | None = None, label: str = "", security: ClientSecurity | None = None) -> None:
    """Write the records in order, acks=all; a progress bar to ``progress`` if given; TLS and
    SASL as ``security`` says (from ``--command-config``)."""
    from riverlog.client.producer import Producer

    bar = ProgressBar(len(records), stream=progress, label=label) if progress is not None else None
    async with Producer(bootstrap, acks="all", client_id="riverlog-spark-generate", linger_ms=10,
                        security=security) as producer:
        pending = []
        for key, value, timestamp in records:
            future = await producer.send(topic, value, key, timestamp_ms=timestamp)
            if bar is not None:
                future.add_done_callback(lambda _f: bar.update())
            pending.append(future)
        await producer.flush()
        await asyncio.gather(*pending)
    if bar is not None:
        bar.close()


def event_records(items: Sequence[dict[str, Any]], avro: AvroEncoder | None = None) -> list[Record]:
    """Events as records: JSON values, or Avro in the registry's wire format with ``avro``."""
    if avro is None:
        return [(str(e["event_id"]).encode(), encode(e), int(e["ts"])) for e in items]
    from .avro_events import avro_event

    return [(str(e["event_id"]).encode(), avro.encode(avro_event(e)), int(e["ts"])) for e in items]


def user_records(items: Sequence[tuple[str, dict[str, str]]]) -> list[Record]:
    return [(key.encode(), encode(value), None) for key, value in items]


def now_ms() -> int:
    return int(time.time() * 1000)


async def ensure_topic(bootstrap: str, topic: str, *, partitions: int = -1,
                       configs: dict[str, str] | None = None, security: ClientSecurity | None = None) -> bool:
    """Create ``topic`` unless it exists (True if this call created it)."""
    from riverlog.client.admin import AdminClient
    from riverlog.client.errors import BrokerError
    from riverlog.protocol.errors import ErrorCode

    async with AdminClient(bootstrap, client_id="riverlog-spark-generate", security=security) as admin:
        try:
            await admin.create_topic(topic, partitions, configs=configs or {})
        except BrokerError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return False
    return True
