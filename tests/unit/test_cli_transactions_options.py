"""``riverlog transactions``: what is decided before any broker is asked (options, states, the
running time shown) - the commands themselves run against brokers in
tests/integration/test_cli_transactions.py."""

from __future__ import annotations

import argparse

import pytest
from riverlog.cli import transactions_cmd as txn
from riverlog.cli.client_common import UsageError
from riverlog.cli.main import build_parser
from riverlog.client.admin import TransactionDescription
from riverlog.client.cluster import BrokerInfo

pytestmark = pytest.mark.unit


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["transactions", *args])


def test_abort_takes_a_start_offset_or_all_three_epochs() -> None:
    txn._check_abort_options(parse("abort", "--topic", "t", "--partition", "0", "--start-offset", "5"))
    txn._check_abort_options(parse("abort", "--topic", "t", "--partition", "0", "--producer-id", "7",
                                   "--producer-epoch", "0", "--coordinator-epoch", "-1"))
    with pytest.raises(UsageError, match="--start-offset"):
        txn._check_abort_options(parse("abort", "--topic", "t", "--partition", "0"))
    with pytest.raises(UsageError, match="add --coordinator-epoch"):
        txn._check_abort_options(parse("abort", "--topic", "t", "--partition", "0", "--producer-id", "7",
                                       "--producer-epoch", "0"))
    with pytest.raises(UsageError, match="leave out --producer-id"):
        txn._check_abort_options(parse("abort", "--topic", "t", "--partition", "0", "--start-offset", "5",
                                       "--producer-id", "7"))
    with pytest.raises(UsageError, match="--partition must be 0 or more"):
        txn._check_abort_options(parse("abort", "--topic", "t", "--partition", "-1", "--start-offset", "5"))


def test_states_are_spelled_as_kafka_spells_them() -> None:
    assert txn._known_states(["ongoing", "COMPLETECOMMIT"]) == ["Ongoing", "CompleteCommit"]
    assert txn._known_states(None) is None
    with pytest.raises(UsageError, match="not a transaction state"):
        txn._known_states(["Running"])


def test_only_an_open_transaction_has_a_running_time() -> None:
    def described(state: str, start: int) -> TransactionDescription:
        return TransactionDescription("id", state, 60_000, start, 1, 0, (), BrokerInfo(1, "h", 1))

    assert txn._duration(described("Ongoing", 1_000), 4_000) == 3_000
    assert txn._duration(described("PrepareAbort", 1_000), 4_000) == 3_000
    assert txn._duration(described("CompleteCommit", 1_000), 4_000) is None
    assert txn._duration(described("Empty", -1), 4_000) is None
    assert txn._partitions_text([("b", 2), ("a", 1), ("a", 0)]) == "a:0,1;b:2"
    assert txn._time_text(-1) is None
    assert txn._time_text(1_767_225_600_123) == "2026-01-01T00:00:00.123Z"
