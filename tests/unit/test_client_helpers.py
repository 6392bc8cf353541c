"""Small pure pieces of the client and CLI: bootstrap parsing, fetched-batch decoding, tables."""

from __future__ import annotations

import io

import pytest
from riverlog.cli.table import StreamingTable, cell, format_table
from riverlog.client.bootstrap import parse_address, parse_bootstrap
from riverlog.client.consumer import decode_fetched
from riverlog.protocol.record_batch import Compression, NewRecord, build_batch

pytestmark = pytest.mark.unit


def test_parse_bootstrap_lists_and_defaults() -> None:
    assert parse_bootstrap("a:1, b:2,") == [("a", 1), ("b", 2)]
    assert parse_address("broker") == ("broker", 9092)
    assert parse_address("[::1]:9093") == ("::1", 9093)
    assert parse_address("[::1]") == ("::1", 9092)


@pytest.mark.parametrize("bad", ["", ",", "a:b", "a:0", "a:70000", "::1:9092", "[::1", ":9092"])
def test_parse_bootstrap_rejects_malformed_addresses(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_bootstrap(bad)


def _batch(base: int, values: list[bytes], *, control: bool = False, codec: int = Compression.NONE) -> bytes:
    records = [NewRecord(v, b"k", (("h", b"v"),), 1000 + i) for i, v in enumerate(values)]
    return build_batch(records, base_offset=base, compression=codec, control=control)


@pytest.mark.parametrize("codec", list(Compression))
def test_decode_fetched_skips_records_before_the_position(codec: int) -> None:
    data = _batch(10, [b"a", b"b", b"c"], codec=codec) + _batch(13, [b"d"], codec=codec)
    records, position, complete = decode_fetched("t", 0, data, 11)
    assert [(r.offset, r.value) for r in records] == [(11, b"b"), (12, b"c"), (13, b"d")]
    assert position == 14 and complete
    assert records[0].headers == (("h", b"v"),) and records[0].timestamp == 1001


def test_decode_fetched_steps_over_control_batches_and_ignores_a_partial_tail() -> None:
    whole = _batch(0, [b"a"]) + _batch(1, [b"marker"], control=True)
    partial = _batch(2, [b"x" * 100])[:40]
    records, position, complete = decode_fetched("t", 3, whole + partial, 0)
    assert [r.value for r in records] == [b"a"]
    assert position == 2 and complete
    assert decode_fetched("t", 3, partial, 2) == ([], 2, False)


def test_format_table_aligns_and_right_aligns_numbers() -> None:
    text = format_table(["name", "count"], [["alpha", 5], ["b", 123], ["c", None]])
    assert text.splitlines() == [
        "NAME   COUNT",
        "alpha      5",
        "b        123",
        "c          -",
    ]


def test_cells_stay_on_one_line() -> None:
    assert cell("a\nb\tc") == "a\\nb\\tc"
    assert cell([1, 2]) == "1,2"
    assert cell(None) == "-"


def test_streaming_table_writes_header_once() -> None:
    out = io.StringIO()
    table = StreamingTable(out, ["p", "value"], [3])
    table.write([0, "x"])
    table.write([1, "long value"])
    assert out.getvalue() == "P    VALUE\n0    x\n1    long value\n"
