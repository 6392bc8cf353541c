"""What ShareFetch sends back (``handlers/share_fetch.py``): the whole batches of a log read with
the offset after each, and the read cut after the batch holding the last acquired offset."""

from __future__ import annotations

from pathlib import Path

import pytest
from riverlog.handlers.share_fetch import up_to, whole_batches
from riverlog.protocol.file_region import FileRegion
from riverlog.protocol.record_batch import NewRecord, build_batch

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
