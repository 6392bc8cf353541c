"""A rate over sampled time windows, and the throttle time that brings it back to a quota.

Kafka measures a client's byte rate (and request time) with a ``Rate`` over a ``SampledStat``:
``quota.window.num`` samples (11) of ``quota.window.size.seconds`` (1 s) each. A value is added
to the current sample; a sample older than one window is complete and the next value starts a
new one, reusing the oldest slot (one more slot than samples is kept, for a sample that started
before the monitored span but overlaps it). Samples whose last value is older than all windows
together are reset. The rate is the samples' total over the time since the oldest sample
started, counted as at least ``samples - 1`` whole windows, so a client's first bytes do not read
as a huge rate.

When the rate exceeds the quota, the client is throttled for as long as the rate needs to fall
back to it: ``(rate - quota) / quota * window size``, rounded to whole milliseconds (Kafka's
``QuotaUtils.throttleTime``).

Pure: times are given by the caller in milliseconds (``clock.now_ms`` in the broker).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowConfig:
    samples: int = 11  # quota.window.num
    window_ms: int = 1000  # quota.window.size.seconds, in milliseconds


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_ms = now_ms
        self.value = 0.0


class SampledRate:
    """Kafka's Rate over a SampledStat (per second)."""

    def __init__(self, config: WindowConfig) -> None:
        self.config = config
        self._samples: list[_Sample] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.config.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_ms = now_ms

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire = self.config.samples * self.config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_ms >= expire:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate divides by: since the oldest sample started, at least
        ``samples - 1`` whole windows, at least 1 ms."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        window = self.config.window_ms
        full = elapsed // window
        if full < self.config.samples - 1:
            elapsed += (self.config.samples - 1 - full) * window
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(rate: float, bound: float, window_size_ms: int) -> int:
    """How long the client waits for ``rate`` to fall back to ``bound``; 0 within the quota."""
    if rate <= bound:
        return 0
    return round((rate - bound) / bound * window_size_ms)
