"""Share sessions (KIP-932): what a share consumer fetches from one broker, and its epoch.

Like a fetch session (KIP-227), a share session lets a member name only the partitions that
change: ``ShareSessionEpoch`` 0 opens a session with the partitions named (no acknowledgements
may ride on it: the member holds nothing here yet), each later request must carry the session's
current epoch and moves it on (INVALID_SHARE_SESSION_EPOCH otherwise, SHARE_SESSION_NOT_FOUND
without a session), and -1 closes the session: its acknowledgements are applied, then the
member's remaining acquired records on this broker are released. Sessions are keyed by group
and member id (a member has one session per broker). Pure state, no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

SharePartitionKey = tuple[uuid.UUID, int]  # (topic id, partition)


class ShareSessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: list[SharePartitionKey] = field(default_factory=list)

    def update(self, added: Iterable[SharePartitionKey], forgotten: Iterable[SharePartitionKey]) -> None:
        gone = set(forgotten)
        kept = [k for k in self.partitions if k not in gone]
        for key in added:
            if key not in kept and key not in gone:
                kept.append(key)
        self.partitions = kept


DEFAULT_MAX_SESSIONS = 2000  # Kafka's group.share.max.share.sessions


class ShareSessionCache:
    """The sessions of one broker, at most ``max_sessions``: a member killed without closing its
    session leaves it behind, so opening one more evicts the least recently used (that member,
    if it comes back, gets SHARE_SESSION_NOT_FOUND and opens a new one)."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        # In order of last use (a dict keeps insertion order; a used session is moved to the end).
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str, partitions: Iterable[SharePartitionKey]) -> ShareSession:
        """Epoch 0: a new session (replacing one the member had)."""
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), list(dict.fromkeys(partitions)))
        self.sessions.pop((group_id, member_id), None)
        while len(self.sessions) >= self.max_sessions:
            del self.sessions[next(iter(self.sessions))]
        self.sessions[(group_id, member_id)] = session
        return session

    def advance(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """A request at ``epoch`` > 0 in an existing session: checked, then the epoch moves on."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                    f"The share session for member {member_id} was not found.")
        if epoch != session.epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"The share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = next_epoch(epoch)
        # Most recently used last.
        del self.sessions[(group_id, member_id)]
        self.sessions[(group_id, member_id)] = session
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        """Epoch -1: the session ends (its partitions are returned so records can be released)."""
        return self.sessions.pop((group_id, member_id), None)
