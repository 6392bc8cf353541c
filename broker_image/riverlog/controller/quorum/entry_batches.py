"""Raft log entries <-> Kafka record batches (v2), as a Fetch response carries them.

Pure functions, no I/O. A run of consecutive entries with the same epoch and control flag is one
batch: its partition leader epoch is the entries' epoch, its control attribute their flag, and
each record's value an entry's data (with a null key). Received records must describe a log the
fetcher can append: consecutive offsets from its fetch offset, epochs that never go back.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...protocol import record_batch
from ...protocol.errors import KafkaError
from ..raft.messages import FetchRequest
from ..raft.types import Entry
from .field_codecs import Decoding, FieldCodec, WireError


def entries_to_records(entries: Sequence[Entry]) -> bytes:
    """Record batches v2 holding ``entries`` (which must have consecutive offsets): one batch per
    run of entries with the same epoch and control flag; the batch's partition leader epoch is
    the entries' epoch, its control attribute their flag; each record's value is an entry's
    data, with a null key."""
    out = bytearray()
    run: list[Entry] = []
    for entry in entries:
        if run and entry.offset != run[-1].offset + 1:
            raise ValueError(f"entries are not consecutive: {run[-1].offset} then {entry.offset}")
        if run and (entry.epoch != run[0].epoch or entry.control != run[0].control):
            out += _batch(run)
            run = []
        run.append(entry)
    if run:
        out += _batch(run)
    return bytes(out)


def _batch(run: Sequence[Entry]) -> bytes:
    return record_batch.build_batch(
        [record_batch.NewRecord(value=bytes(e.data)) for e in run],
        base_offset=run[0].offset,
        partition_leader_epoch=run[0].epoch,
        control=run[0].control,
    )


def records_to_entries(data: bytes | bytearray | memoryview | None) -> tuple[Entry, ...]:
    """The entries of record batches written by :func:`entries_to_records` (or any v2 batches with
    one valued record per offset). Raises :class:`WireError` for a corrupt or truncated batch
    (bad CRC, magic, length or record count) and for offsets that are not consecutive, within a
    batch or from one batch to the next."""
    if not data:
        return ()
    out: list[Entry] = []
    try:
        for header in record_batch.iter_batches(data):
            record_batch.validate_batch(data, header)
            if out and header.base_offset != out[-1].offset + 1:
                raise WireError(f"batch at offset {header.base_offset} does not follow offset {out[-1].offset}")
            expected = header.base_offset
            for record in record_batch.decode_records(data, header):
                if record.offset != expected:
                    raise WireError(f"record at offset {record.offset} where {expected} was expected")
                if record.value is None:
                    raise WireError(f"record at offset {record.offset} has no value")
                out.append(Entry(record.offset, header.partition_leader_epoch, record.value, header.is_control))
                expected += 1
    except KafkaError as exc:
        raise WireError(f"bad record batch: {exc}") from exc
    return tuple(out)


def check_fetched_entries(entries: Sequence[Entry], request: FetchRequest, leader_epoch: int) -> None:
    """Entries must continue the fetcher's log as the request described it: from the fetch offset,
    with epochs from its last fetched epoch up to the leader's, never decreasing."""
    if entries[0].offset != request.fetch_offset:
        raise WireError(f"Fetch: entries start at {entries[0].offset}, the fetch was from {request.fetch_offset}")
    previous = request.last_fetched_epoch
    for entry in entries:
        if entry.epoch < previous or entry.epoch > leader_epoch:
            raise WireError(f"Fetch: entry {entry.offset} of epoch {entry.epoch} after epoch {previous} "
                            f"from a leader of epoch {leader_epoch}")
        previous = entry.epoch


class FetchedEntries(FieldCodec):
    """``FetchResponse.entries`` <-> the partition's ``records``. Received entries are checked
    against the request and the answering leader's epoch (``epoch``, decoded before them)."""

    kind = "bytes"

    def to_wire(self, value: Sequence[Entry]) -> bytes:
        return entries_to_records(value)

    def from_wire(self, value: bytes | memoryview | None, decoding: Decoding) -> tuple[Entry, ...]:
        entries = records_to_entries(value)
        if entries:
            check_fetched_entries(entries, decoding.request, decoding.decoded["epoch"])
        return entries


__all__ = ["FetchedEntries", "check_fetched_entries", "entries_to_records", "records_to_entries"]
