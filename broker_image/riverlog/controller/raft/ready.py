"""The batch of outputs the driver drains from a node after feeding it inputs."""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Message
from .types import Entry, HardState, Role, Snapshot


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state the driver reacts to: who leads, and whether this node does."""

    role: Role
    epoch: int
    leader_id: int | None


@dataclass(slots=True)
class Ready:
    """Everything a node produced since the previous ``ready()``.

    The driver handles Readys one at a time, in order, and within one Ready:

    1. persist, in this order (fsync before step 2):
       a. ``hard_state`` (if not None) — the quorum-state file;
       b. ``snapshot`` (if not None) — write the snapshot durably;
       c. ``truncate_to`` (if not None) — delete stored entries at offsets >= it;
       d. ``log_start`` (if not None) — the log now starts here: delete stored entries below it;
          if the stored log is now empty, the next entry will be appended at this offset;
       e. ``entries`` — append; the first one's offset is the stored log end after a-d.
    2. then, in any order:
       - send ``messages`` (each has ``dst``); losing some is fine, the core retries;
       - if ``restore`` is not None, reset the state machine to ``restore.data`` (it replaces
         everything applied so far), then apply ``committed`` in order (skipping ``control``
         entries; they are in the list so offsets stay contiguous).

    The driver may feed more inputs to the node while it persists a Ready (pipelining), as long
    as Readys are persisted and acted on in order. A crash may lose any unpersisted suffix.
    """

    messages: list[Message] = field(default_factory=list)
    hard_state: HardState | None = None
    snapshot: Snapshot | None = None
    truncate_to: int | None = None
    log_start: int | None = None
    entries: list[Entry] = field(default_factory=list)
    restore: Snapshot | None = None
    committed: list[Entry] = field(default_factory=list)
    high_watermark: int = 0
    soft_state: SoftState | None = None  # set when role, epoch or leader changed

    @property
    def must_persist(self) -> bool:
        """True when something must be fsynced before the messages may go out."""
        return (
            self.hard_state is not None
            or self.snapshot is not None
            or self.truncate_to is not None
            or self.log_start is not None
            or bool(self.entries)
        )
