"""Data folders written by the earlier single-node mode, carried over to the one-voter quorum.

Single-node mode used to keep its metadata as JSON lines in ``__cluster_metadata-0/records.jsonl``
(the local controller's file). It is now a one-voter Raft quorum, as KRaft runs a lone node, so
the metadata lives where every quorum node keeps it (``quorum/storage.py``). On the first start
with an old folder, the records are replayed into an image and written as the quorum's first
snapshot (end offset 0, epoch 0: the Raft log starts after it), then the old file is renamed to
``records.jsonl.migrated`` so it is never read again but stays for a downgrade by hand.

A crash between the two steps is harmless: a snapshot already present means the carry-over
happened, and only the rename is redone. A folder holding both the old file and a quorum log
without that snapshot has two histories; the broker refuses it and says which file to remove.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ...storage.files import fsync_dir
from ..image import MetadataImage
from ..local import read_records_file
from ..raft import Snapshot
from ..snapshot import image_to_records
from . import codec
from .storage import QuorumStorage

log = logging.getLogger(__name__)

LEGACY_RECORDS_NAME = "records.jsonl"
MIGRATED_SUFFIX = ".migrated"


class LegacyMetadataError(ValueError):
    """The folder holds metadata in both formats and no carried-over snapshot joins them."""


def migrate_legacy_records(metadata_dir: Path, cluster_id: str) -> int | None:
    """Carry ``records.jsonl`` in ``metadata_dir`` over into the quorum's storage. Returns how
    many records were carried over, or None when there was nothing to do."""
    legacy = metadata_dir / LEGACY_RECORDS_NAME
    if not legacy.exists():
        return None
    storage = QuorumStorage(metadata_dir)
    try:
        stored = storage.load()
    finally:
        storage.close()
    if stored.snapshot is None and stored.entries:
        raise LegacyMetadataError(
            f"{metadata_dir} holds both the old single-node metadata file {LEGACY_RECORDS_NAME} and a "
            f"metadata quorum log ({storage.log_path.name}). Keep the history you want: remove "
            f"{storage.log_path.name} and quorum-state to carry {LEGACY_RECORDS_NAME} over, or move "
            f"{LEGACY_RECORDS_NAME} away to keep the quorum log")
    count = 0
    if stored.snapshot is None:
        records, _ = read_records_file(legacy)
        image = MetadataImage(cluster_id=cluster_id).apply(records)
        storage.write_snapshot(Snapshot(0, 0, codec.encode_records(image_to_records(image))))
        count = len(records)
        log.info("carried %d metadata records of the earlier single-node format from %s over to the "
                 "metadata quorum's storage (%d topics, %d brokers)", count, legacy, len(image.topics),
                 len(image.brokers))
    legacy.rename(legacy.with_name(legacy.name + MIGRATED_SUFFIX))
    fsync_dir(metadata_dir)
    return count
