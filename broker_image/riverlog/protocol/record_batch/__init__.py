"""Kafka record batch v2 (magic 2), split by concern; this package re-exports what the rest of the tree uses.

Pure: no I/O. The broker's hot path only touches the 61-byte batch header and the CRC; building and
decoding records (with compression) exist for the CLI and tests, and the compaction scan for the
log cleaner.

- :mod:`.batch_header`: the wire layout, header parsing, validation and in-place patching
- :mod:`.record_fields`: zigzag varints and length-prefixed bytes inside a record
- :mod:`.compression`: the gzip / snappy / lz4 / zstd codecs of a records section
- :mod:`.build`: encoding records into a batch
- :mod:`.decode`: decoding a batch's records (consumer side)
- :mod:`.control`: transaction marker control batches (build and parse)
- :mod:`.compaction_scan`: locating and copying records without decoding them (log compaction)
"""

from __future__ import annotations

from .batch_header import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CRC_POS,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    INT32_MAX,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Compression,
    check_produce_records,
    compute_crc,
    corrupt,
    iter_batches,
    patch_offset_and_epoch,
    read_header,
    sequence_add,
    set_log_append_time,
    validate_batch,
)
from .build import NewRecord, assemble_batch, build_batch
from .compaction_scan import RawRecord, copy_record, records_section, scan_records
from .compression import XERIAL_MAGIC
from .control import TxnMarker, build_txn_marker, parse_txn_marker
from .decode import Record, decode_records, iter_records
from .record_fields import read_varint, write_varint

__all__ = [
    "ATTRIBUTES_POS",
    "COMPRESSION_MASK",
    "CRC_POS",
    "DELETE_HORIZON_MASK",
    "HEADER_SIZE",
    "INT32_MAX",
    "LENGTH_POS",
    "LOG_OVERHEAD",
    "MAGIC_POS",
    "MIN_BATCH_LENGTH",
    "XERIAL_MAGIC",
    "BatchHeader",
    "Compression",
    "NewRecord",
    "RawRecord",
    "Record",
    "TxnMarker",
    "assemble_batch",
    "build_batch",
    "build_txn_marker",
    "check_produce_records",
    "compute_crc",
    "copy_record",
    "corrupt",
    "decode_records",
    "iter_batches",
    "iter_records",
    "parse_txn_marker",
    "patch_offset_and_epoch",
    "read_header",
    "read_varint",
    "records_section",
    "scan_records",
    "sequence_add",
    "set_log_append_time",
    "validate_batch",
    "write_varint",
]
