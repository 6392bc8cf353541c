"""A consumer-group member in its own process, for tests that kill, close or restart members.

Run as ``python group_member.py --bootstrap HOST:PORT --group G --topic T [options]``. It runs a
confluent-kafka (librdkafka) consumer subscribed to the topic, commits synchronously after
processing each record, and reports on stdout, one JSON object per line:

- ``{"event": "started", "pid": ...}``
- ``{"event": "assign" | "revoke" | "lost", "partitions": [...], "incremental": bool,
  "generation": g, "member_id": "..."}`` from the rebalance callbacks
- ``{"event": "record", "partition": p, "offset": o, "key": ..., "value": ...}`` when a record is
  processed (its offset is committed right after)
- ``{"event": "commit_failed", "partition": p, "offset": o, "error": "..."}``
- ``{"event": "status", "generation": g, "member_id": "...", "assignment": [...]}`` on request
- ``{"event": "error", "code": "...", "fatal": bool, "text": "..."}`` for client errors
- ``{"event": "closed"}`` after a clean close

Commands on stdin, one per line: ``status`` and ``close`` (a clean close, which makes a dynamic
member send LeaveGroup). End of stdin also closes. Every event carries ``"t"``, the system-wide
monotonic clock, so a test can order events of several processes.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import struct
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

# librdkafka's serialized consumer group metadata starts with this magic and the generation id
# (a native-endian int32, as rd_kafka_consumer_group_metadata_write copies it), which is the
# only place the Python binding exposes the generation the member is in.
_CGMD_MAGIC = b"CGMDv2:"


def emit(event: str, **fields: Any) -> None:
    fields = {"event": event, "t": time.monotonic(), **fields}
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def generation(consumer: Consumer) -> int:
    data = consumer.consumer_group_metadata()
    if not isinstance(data, bytes) or not data.startswith(_CGMD_MAGIC):
        return -2
    (value,) = struct.unpack_from("=i", data, len(_CGMD_MAGIC))
    return int(value)


def member_id(consumer: Consumer) -> str | None:
    try:
        return consumer.memberid()
    except (KafkaException, RuntimeError):
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--client-id", default="group-member")
    p.add_argument("--instance-id", default=None, help="group.instance.id (static membership)")
    p.add_argument("--strategy", default="range", help="partition.assignment.strategy")
    p.add_argument("--session-timeout-ms", type=int, default=10_000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=500)
    p.add_argument("--max-poll-interval-ms", type=int, default=60_000)
    p.add_argument("--no-commit", action="store_true", help="process records without committing")
    return p.parse_args(argv)


RETRIABLE_COMMIT_ERRORS = (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "partition.assignment.strategy": args.strategy,
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": args.heartbeat_interval_ms,
        # librdkafka refuses a poll interval (the rebalance timeout) below the session timeout.
        "max.poll.interval.ms": max(args.max_poll_interval_ms, args.session_timeout_ms),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        # Errors reach the test as events; librdkafka's own log lines would only add noise.
        "log_level": 3,
        "error_cb": lambda err: emit("error", code=err.name(), fatal=err.fatal(), text=err.str()),
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    cooperative = args.strategy == "cooperative-sticky"

    def report(kind: str, partitions: list[TopicPartition]) -> None:
        emit(
            kind,
            partitions=sorted(tp.partition for tp in partitions),
            incremental=cooperative,
            generation=generation(consumer),
            member_id=member_id(consumer),
        )

    # Callbacks run inside poll(), between the records we process, so a record is always
    # processed and committed before its partition can be revoked: that is what makes "each
    # record exactly once" hold across rebalances.
    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        report("assign", partitions)
        if cooperative:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)

    # Commits refused because a rebalance is under way (REBALANCE_IN_PROGRESS, or
    # ILLEGAL_GENERATION while the client still holds the previous generation) are normal with
    # Kafka too; they are retried once the member knows the new generation, and at the latest
    # before the partition is handed over.
    pending: dict[int, TopicPartition] = {}

    def flush_pending(only: set[int] | None = None) -> None:
        for partition, tp in list(pending.items()):
            if only is not None and partition not in only:
                continue
            try:
                consumer.commit(offsets=[tp], asynchronous=False)
                del pending[partition]
            except KafkaException as exc:
                if exc.args[0].code() not in RETRIABLE_COMMIT_ERRORS:
                    del pending[partition]
                    emit("commit_failed", partition=partition, offset=tp.offset - 1, error=str(exc))

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        flush_pending({tp.partition for tp in partitions})
        report("revoke", partitions)
        if cooperative:
            c.incremental_unassign(partitions)
        else:
            c.unassign()

    def on_lost(c: Consumer, partitions: list[TopicPartition]) -> None:
        report("lost", partitions)
        if cooperative:
            c.incremental_unassign(partitions)
        else:
            c.unassign()

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    emit("started", pid=os.getpid())
    stdin_open = True
    try:
        while True:
            if stdin_open:
                ready, _, _ = select.select([sys.stdin], [], [], 0)
                if ready:
                    line = sys.stdin.readline()
                    command = line.strip()
                    if not line or command == "close":
                        break
                    if command == "status":
                        emit(
                            "status",
                            generation=generation(consumer),
                            member_id=member_id(consumer),
                            assignment=sorted(tp.partition for tp in consumer.assignment()),
                        )
            msg: Message | None = consumer.poll(0.1)
            if pending:
                flush_pending()
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    emit("error", code=err.name(), fatal=err.fatal(), text=err.str())
                continue
            # "Processing" is reporting the record; the commit follows it, so a member killed
            # in between leaves a processed but uncommitted record (delivered again to the next
            # owner: at least once), never a committed record that nobody processed.
            key = msg.key()
            value = msg.value()
            emit(
                "record",
                partition=msg.partition(),
                offset=msg.offset(),
                key=None if key is None else key.decode(errors="replace"),
                value=None if value is None else value.decode(errors="replace"),
            )
            if not args.no_commit:
                try:
                    consumer.commit(message=msg, asynchronous=False)
                except KafkaException as exc:
                    if exc.args[0].code() in RETRIABLE_COMMIT_ERRORS:
                        pending[msg.partition()] = TopicPartition(msg.topic(), msg.partition(), msg.offset() + 1)
                        emit("commit_deferred", partition=msg.partition(), offset=msg.offset(), error=str(exc))
                    else:
                        emit("commit_failed", partition=msg.partition(), offset=msg.offset(), error=str(exc))
    finally:
        if pending:
            flush_pending()
        consumer.close()
    emit("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
