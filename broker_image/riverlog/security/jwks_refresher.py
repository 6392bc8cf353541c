"""Fetching an OAUTHBEARER listener's JWKS and keeping its ``JwksCache`` current (the I/O half of
``jwks.py``), as Kafka's RefreshingHttpsJwks does.

- The first fetch happens before the listener opens (Kafka's validator fetches when it is
  configured, before the broker serves), retried with backoff; if it still fails the listener
  opens anyway, every token is refused until a later fetch succeeds, and the broker logs why.
- Then every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and sooner when a token names a key
  id the set lacks (``JwksCache.note_unknown_kid`` rate-limits that): the provider rotated keys.
- A failed fetch is retried after ``...retry.backoff.ms``, doubling, until
  ``...retry.backoff.max.ms`` has passed since the first attempt (Kafka's Retry); the keys in
  hand are kept meanwhile.

``file:`` URLs are read from disk, ``http(s):`` ones with urllib in a worker thread so the
event loop never blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlparse

from .authenticator import OAuthBearerSettings
from .jwks import JwksCache, parse_jwks

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
MAX_JWKS_BYTES = 1 << 20  # a JWKS is a few KiB; a larger answer is not one


def fetch_jwks(url: str, timeout: float = FETCH_TIMEOUT_S) -> bytes:
    """The JWKS document at ``url`` (blocking); OSError or ValueError on failure."""
    parsed = urlparse(url)
    if parsed.scheme.lower() == "file":
        data = Path(unquote(parsed.path)).read_bytes()
    else:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (scheme checked at start)
            data = response.read(MAX_JWKS_BYTES + 1)
    if len(data) > MAX_JWKS_BYTES:
        raise ValueError(f"the JWKS at {url} is larger than {MAX_JWKS_BYTES} bytes")
    return data


def retry_wait_ms(attempt: int, backoff_ms: int, remaining_ms: int) -> int:
    """Kafka's Retry: the wait after failed attempt ``attempt`` (1, 2, ...); <= 0 means give up."""
    return min(backoff_ms * 2 ** (attempt - 1), remaining_ms)


class JwksRefresher:
    def __init__(self, cache: JwksCache, settings: OAuthBearerSettings, listener: str) -> None:
        self.cache = cache
        self.settings = settings
        self.listener = listener
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        cache.on_refresh_wanted = self._wanted.set

    async def start(self) -> None:
        """The first fetch (with its retries), then the refresh loop in the background."""
        await self.refresh()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def refresh(self) -> bool:
        """One fetch with Kafka's retries; True if the keys were replaced."""
        url = self.settings.jwks_url
        deadline = time.monotonic() + self.settings.retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                document = await asyncio.to_thread(fetch_jwks, url)
                keys = parse_jwks(document)
            except (OSError, ValueError) as exc:
                wait = retry_wait_ms(attempt, self.settings.retry_backoff_ms,
                                     int((deadline - time.monotonic()) * 1000))
                if wait <= 0:
                    log.error("listener %s: cannot fetch the OAUTHBEARER JWKS from %s (%s); %s", self.listener, url,
                              exc, "keeping the keys in hand" if self.cache.loaded else "every token is refused "
                              "until a fetch succeeds")
                    return False
                log.warning("listener %s: fetching the JWKS from %s failed (%s); retrying in %d ms", self.listener,
                            url, exc, wait)
                await asyncio.sleep(wait / 1000)
                continue
            if not keys:
                log.warning("listener %s: the JWKS at %s holds no asymmetric signing key", self.listener, url)
            self.cache.replace(keys, int(time.time() * 1000))
            log.info("listener %s: loaded %d OAUTHBEARER verification key(s) from %s", self.listener, len(keys), url)
            return True

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # the scheduled refresh
                await asyncio.wait_for(self._wanted.wait(), self.settings.refresh_ms / 1000)
            self._wanted.clear()
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("listener %s: refreshing the JWKS failed", self.listener)
