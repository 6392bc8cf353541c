"""What the client commands (topics, produce, consume) share: common options, running the async
command, turning expected failures into one clear line on stderr, JSON output and progress.

Expected failures (broker unreachable, unknown topic, a config the broker rejects...) never show
a traceback: the message names the problem and, where there is one, the fix.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from ..client.errors import (
    AuthenticationError,
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    ConnectionClosedError,
    RequestTimeoutError,
    UnsupportedApiError,
)
from ..config import parse_properties
from ..protocol.errors import ErrorCode, KafkaError
from ..security.client_config import ClientSecurity

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "RIVERLOG_BOOTSTRAP"

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A bad combination of options or a malformed value: exit code 2, like argparse."""


def client_options() -> argparse.ArgumentParser:
    """A parent parser with the options every client command takes."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,HOST:PORT]",
        help=f"brokers to connect to (default: ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})",
    )
    parent.add_argument(
        "--command-config", metavar="FILE",
        help="Kafka client properties for a secured listener (security.protocol, ssl.truststore.location, "
             "ssl.keystore.location, sasl.mechanism, sasl.jaas.config), as Kafka's tools take them",
    )
    parent.add_argument(
        "--output", choices=("table", "json"), default="table",
        help="table: aligned columns for people (default); json: one JSON document per line",
    )
    return parent


def client_security(args: argparse.Namespace) -> ClientSecurity | None:
    """The TLS and SASL settings of ``--command-config FILE``, or None for plaintext."""
    path = getattr(args, "command_config", None)
    if not path:
        return None
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--command-config {path}: no such file (it holds Kafka client properties such as "
                         "security.protocol=SASL_SSL)")
    return ClientSecurity.from_properties(parse_properties(file.read_text()), where=f"--command-config {path}")


def parse_key_values(items: list[str] | None, option: str) -> dict[str, str]:
    """``["a=1", "b=2"]`` to ``{"a": "1", "b": "2"}``; the value may itself contain '='."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def print_json(document: Any, stream: TextIO | None = None) -> None:
    print(json.dumps(document, ensure_ascii=False), file=stream or sys.stdout)


def describe_error(exc: BaseException, *, topic: str | None = None) -> str:
    """The one-line explanation of an expected failure, with the fix when there is one."""
    if isinstance(exc, BrokerUnreachableError):
        where = ", ".join(exc.addresses)
        return (f"cannot reach {where} ({exc.reason}): is the broker running? start one with `make run`, "
                f"or point --bootstrap-server (or ${BOOTSTRAP_ENV}) at a running broker")
    if isinstance(exc, AuthenticationError):
        return (f"{exc}: check the credentials and TLS settings given with --command-config (and that the "
                "address is a listener of that security protocol)")
    if isinstance(exc, ConnectionClosedError):
        return f"{exc}: check the address and the broker's log, then retry"
    if isinstance(exc, RequestTimeoutError):
        return f"{exc}: the broker may be overloaded or stuck; check its log, then retry"
    if isinstance(exc, UnsupportedApiError):
        return f"{exc}: this broker is too old or too new for this riverlog client"
    if isinstance(exc, BrokerError):
        return _describe_broker_error(exc, topic)
    if isinstance(exc, KafkaError):
        return f"{exc} ({exc.code.name})"
    return str(exc)


def _describe_broker_error(exc: BrokerError, topic: str | None) -> str:
    code = exc.code
    # The broker's sentence, without its final period, so that a hint can follow it.
    said = exc.broker_message.rstrip(". ") if exc.broker_message else None
    name = f"'{topic}'" if topic else "the topic"
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        if said and "has no partition" in said:
            return f"{said}: see the partitions with `riverlog topics describe {topic or 'TOPIC'}`"
        return (f"topic {name} does not exist: see `riverlog topics list`, or create it with "
                f"`riverlog topics create {topic or 'TOPIC'}`")
    if code == ErrorCode.TOPIC_ALREADY_EXISTS:
        return (f"topic {name} already exists: choose another name, or delete it first with "
                f"`riverlog topics delete {topic or 'TOPIC'}`")
    if code == ErrorCode.INVALID_CONFIG:
        return f"invalid config: {said or 'rejected by the broker'}: fix the KEY=VALUE and retry"
    if code == ErrorCode.INVALID_PARTITIONS:
        return (f"invalid partition count: {said or 'rejected by the broker'}: a topic has at least one "
                f"partition, and partitions can be added but never removed")
    if code == ErrorCode.INVALID_REPLICATION_FACTOR:
        return (f"invalid replication factor: {said or 'rejected by the broker'}: it must be at least 1 "
                f"and at most the number of brokers")
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        if said:
            return f"invalid topic name: {said}"
        return f"invalid topic name {name}: use letters, digits, '.', '_' and '-' (at most 249 characters)"
    if code == ErrorCode.SECURITY_DISABLED:
        return f"{exc}: the broker has no authorizer; set authorizer.class.name (and super.users) to use ACLs"
    if code in (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
        return f"{exc}: the principal lacks an ACL for this; a super user can grant it with `riverlog acls create`"
    if code == ErrorCode.MESSAGE_TOO_LARGE:
        return f"{exc}: the record is larger than the topic's max.message.bytes"
    return str(exc)


def run_command(command: Callable[[], Awaitable[int]], *, topic: str | None = None) -> int:
    """Run an async command; expected failures become one stderr line and exit code 1 or 2."""
    try:
        return asyncio.run(_await(command))
    except UsageError as exc:
        error(str(exc))
        return EXIT_USAGE
    except (ClientError, KafkaError) as exc:
        error(describe_error(exc, topic=topic))
        return EXIT_FAILURE
    except ValueError as exc:
        # Malformed input we validate ourselves (bootstrap address, acks, compression...).
        error(str(exc))
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader of our output went away (`... | head`): not an error of ours.
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stops the exit-time flush failing
        return EXIT_OK


async def _await(command: Callable[[], Awaitable[int]]) -> int:
    # asyncio.run wants a coroutine object, while commands may return any awaitable.
    return await command()


def error(message: str) -> None:
    print(f"riverlog: error: {message}", file=sys.stderr)


class Progress:
    """Prints a status line to stderr every ``interval`` seconds while an operation runs.

    On a terminal the line is redrawn in place; otherwise each update is a new line. Nothing is
    printed for operations that finish within the first interval.
    """

    def __init__(self, status: Callable[[], str], *, enabled: bool = True, interval: float = 1.0) -> None:
        self._status = status
        self._enabled = enabled
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._printed = False
        self._tty = sys.stderr.isatty()

    async def __aenter__(self) -> Progress:
        if self._enabled:
            self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._printed and self._tty:
            sys.stderr.write("\n")
            sys.stderr.flush()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            line = self._status()
            if self._tty:
                sys.stderr.write("\r\x1b[K" + line)
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()
            self._printed = True


class Rate:
    """Counts events and reports the count with the average rate since the start."""

    def __init__(self) -> None:
        self.count = 0
        self.started = time.monotonic()

    def per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.count / elapsed if elapsed > 0 else 0.0
