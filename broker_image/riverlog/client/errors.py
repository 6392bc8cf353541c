"""Exceptions of the client that are about the transport rather than a broker's answer.

A broker's answer with a non-zero error code becomes a :class:`riverlog.protocol.errors.KafkaError`
(carrying the code); the classes here cover what happens before or around an answer: the broker
cannot be reached, it hung up, it is silent for too long, or it does not speak an API at all.
"""

from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError


class ClientError(Exception):
    """Base class of the client's own (non-protocol) errors."""


class BrokerUnreachableError(ClientError):
    """No TCP connection could be made to any of the addresses tried."""

    def __init__(self, addresses: list[str], reason: str) -> None:
        self.addresses = addresses
        self.reason = reason
        super().__init__(f"cannot reach {', '.join(addresses)}: {reason}")


class ConnectionClosedError(ClientError):
    """The broker closed the connection (or it broke) while requests were outstanding."""

    def __init__(self, address: str, detail: str = "") -> None:
        self.address = address
        super().__init__(f"connection to {address} closed{': ' + detail if detail else ''}")


class AuthenticationError(ClientError):
    """TLS or SASL refused this client (untrusted certificate, wrong password, unknown mechanism)."""

    def __init__(self, address: str, detail: str) -> None:
        self.address = address
        self.detail = detail
        super().__init__(f"authentication with {address} failed: {detail}")


class RequestTimeoutError(ClientError):
    """No response arrived within the request timeout."""

    def __init__(self, address: str, api_name: str, timeout: float) -> None:
        self.address = address
        super().__init__(f"{api_name} request to {address} got no response within {timeout:g}s")


class UnsupportedApiError(ClientError):
    """The broker does not implement an API, or no version that this client also knows."""

    def __init__(self, address: str, api_name: str, detail: str) -> None:
        self.address = address
        self.api_name = api_name
        super().__init__(f"broker {address} does not support {api_name}: {detail}")


def _code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class BrokerError(KafkaError):
    """A broker answered with a non-zero error code.

    ``code`` is the protocol error code, ``broker_message`` the broker's own explanation (when
    the API carries one) and ``operation`` what the client was doing, so callers can both branch
    on the code and show people the broker's words.
    """

    def __init__(self, code: int, operation: str, broker_message: str | None = None) -> None:
        self.raw_code = code
        self.operation = operation
        self.broker_message = broker_message or None
        error_code = _code(code)
        name = error_code.name if error_code.value == code else f"error code {code}"
        detail = f"{name}: {broker_message}" if broker_message else name
        super().__init__(f"{operation} failed: {detail}", error_code)


def check_error(code: int, operation: str, broker_message: str | None = None) -> None:
    """Raise :class:`BrokerError` unless ``code`` is 0."""
    if code != ErrorCode.NONE:
        raise BrokerError(code, operation, broker_message)


# Codes after which the same request may succeed once metadata is refreshed (leadership moved,
# a topic is still being created) or simply later; the client retries these within a deadline.
RETRIABLE_CODES = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})
# Of those, the ones that mean "the partition leader is elsewhere or unknown": refresh metadata.
STALE_METADATA_CODES = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
})
