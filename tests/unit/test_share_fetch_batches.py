"""What ShareFetch sends back (``handlers/share_fetch.py``): the whole batches of a log read with
the offset after each, the read cut after the batch holding the last acquired offset, and which
batches a read_committed share group must not deliver (aborted transactions' data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from riverlog.handlers.share_fetch import aborted_spans, up_to, whole_batches
from riverlog.protocol.file_region import FileRegion
from riverlog.protocol.record_batch import NewRecord, build_batch
from riverlog.storage.txn_index import AbortedTxn

pytestmark = pytest.mark.unit


def batches_file(tmp_path: Path) -> tuple[list[bytes], Path]:
    # Offsets 0-2, 3, 4-5 in three batches.
    encoded = [build_batch([NewRecord(value=b"v", key=None, timestamp=0)] * n, base_offset=base)
               for base, n in ((0, 3), (3, 1), (4, 2))]
    path = tmp_path / "segment"
    path.write_bytes(b"".join(encoded))
    return encoded, path


def test_whole_batches_and_the_cut(tmp_path: Path) -> None:
    encoded, path = batches_file(tmp_path)
    sizes = [len(b) for b in encoded]
    with open(path, "rb") as f:
        # A region ending inside the third batch: only two whole batches.
        region = FileRegion(f, 0, sizes[0] + sizes[1] + sizes[2] - 5)
        found = whole_batches([region])
        assert [b.next_offset for b in found] == [3, 4]
        full = whole_batches([FileRegion(f, 0, sum(sizes))])
        assert [b.next_offset for b in full] == [3, 4, 6]
        assert up_to(full, 1) == [FileRegion(f, 0, sizes[0])]
        assert up_to(full, 3) == [FileRegion(f, 0, sizes[0] + sizes[1])]
        assert up_to(full, 5) == [FileRegion(f, 0, sum(sizes))]
        # Two regions of the file stay two regions.
        split = whole_batches([FileRegion(f, 0, sizes[0]), FileRegion(f, sizes[0], sizes[1] + sizes[2])])
        assert up_to(split, 4) == [FileRegion(f, 0, sizes[0]), FileRegion(f, sizes[0], sizes[1] + sizes[2])]


def test_aborted_spans_are_the_aborted_transactions_data_batches(tmp_path: Path) -> None:
    # Producer 7: a committed transaction (0-1, marker 2), then an aborted one (3-4, marker 5);
    # producer 8's transaction (6) is aborted too; producer 9 writes outside any transaction (7).
    v = [NewRecord(value=b"v", key=None, timestamp=0)]
    layout = [(0, 7, 2, True, False), (2, 7, 1, True, True), (3, 7, 2, True, False), (5, 7, 1, True, True),
              (6, 8, 1, True, False), (7, 9, 1, False, False)]
    path = tmp_path / "segment"
    path.write_bytes(b"".join(build_batch(v * n, base_offset=base, producer_id=pid, producer_epoch=0,
                                          transactional=txn, control=ctl) for base, pid, n, txn, ctl in layout))
    aborted = [AbortedTxn(7, 3, 5, 6), AbortedTxn(8, 6, 8, 9)]
    with open(path, "rb") as f:
        batches = whole_batches([FileRegion(f, 0, path.stat().st_size)])
        assert [(b.base_offset, b.producer_id, b.transactional_data) for b in batches] == [
            (0, 7, True), (2, 7, False), (3, 7, True), (5, 7, False), (6, 8, True), (7, 9, False)]
        assert aborted_spans(batches, aborted) == [(3, 4), (6, 6)]
        assert aborted_spans(batches, []) == []
