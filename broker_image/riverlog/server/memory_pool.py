"""The memory pool for request bytes (``queued.max.request.bytes``), after Kafka's.

As in Kafka's non-strict ``SimpleMemoryPool``, a frame still arriving reserves its declared size
once its size prefix is in, and the reservation succeeds while *any* memory is left (so the pool
can be overdrawn by at most one ``socket.request.max.bytes`` frame); a connection whose frame gets
no reservation stops reading until memory is released, and the reservation is released once the
request has been handled or its connection closes (Kafka frees most requests' buffers once parsed,
produce requests' once handled). Released memory goes to the waiting connections oldest first
(Kafka unmutes every waiting channel and lets them race).

Two differences, so that half-sent requests cannot stall everyone else: a frame that is already
complete in what was read takes its bytes from the pool but never waits (holding it back would
save no memory; Kafka, which reads the size prefix alone first, stops every connection once its
pool is spent); and a reservation is bookkeeping only, the connection buffers only the bytes that
have arrived (Kafka allocates the declared size at once).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"pool capacity must be positive, got {capacity}")
        self.capacity = capacity
        self.available = capacity
        self._waiters: deque[tuple[int, Callable[[], None]]] = deque()

    @property
    def used(self) -> int:
        return self.capacity - self.available

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes if any memory is left and nobody waits before us."""
        if self.available <= 0 or self._waiters:
            return False
        self.available -= size
        return True

    def take(self, size: int) -> None:
        """Count bytes that are in memory already (a frame complete in what was read, or what a
        waiting connection had read): never refused."""
        self.available -= size

    def wait(self, size: int, granted: Callable[[], None]) -> None:
        """Queue for ``size`` bytes: ``granted`` is called once they are reserved for the caller."""
        self._waiters.append((size, granted))

    def cancel(self, granted: Callable[[], None]) -> bool:
        """Leave the queue (a connection closed while waiting). False when no longer queued: the
        memory was reserved already and ``granted`` is on its way."""
        for entry in self._waiters:
            if entry[1] == granted:
                self._waiters.remove(entry)
                return True
        return False

    def release(self, size: int) -> None:
        self.available += size
        granted: list[Callable[[], None]] = []
        while self._waiters and self.available > 0:
            wanted, callback = self._waiters.popleft()
            self.available -= wanted
            granted.append(callback)
        for callback in granted:
            callback()
