"""The one failure a SASL mechanism reports: the client is not authenticated."""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is what the client is told (Kafka's wording, no hint
    of which part was wrong)."""

    def __init__(self, mechanism: str, detail: str = "invalid credentials") -> None:
        super().__init__(f"Authentication failed during authentication due to {detail} with SASL mechanism "
                         f"{mechanism}")
        self.mechanism = mechanism
