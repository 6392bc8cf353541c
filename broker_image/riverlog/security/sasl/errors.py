"""The one failure a SASL mechanism reports: the client is not authenticated."""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is what the client is told (Kafka's wording, no hint
    of which part was wrong, unless the mechanism gives its own ``message``, as OAUTHBEARER's
    RFC 7628 error answer is)."""

    def __init__(self, mechanism: str, detail: str = "invalid credentials", *, message: str | None = None) -> None:
        super().__init__(message or f"Authentication failed during authentication due to {detail} with SASL "
                                    f"mechanism {mechanism}")
        self.mechanism = mechanism
