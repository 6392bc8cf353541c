"""G1's settle condition (bench/harness/rebalance.py, issue #21): a group has settled after a
join only when every member owns a partition, none is owned twice and all are owned."""

from __future__ import annotations

import sys

import pytest
from support.brokers import REPO_ROOT

if str(REPO_ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "bench"))

from harness.rebalance import JoinTimes, join_one_by_one, settled, unowned  # noqa: E402  (bench/ is reached by path)

pytestmark = pytest.mark.unit


def test_settled_needs_every_member_busy_nothing_twice_and_everything_owned() -> None:
    assert settled([{0, 1}, {2, 3}], 4)
    assert not settled([{0, 1, 2, 3}, set()], 4)  # the new member has nothing yet
    assert not settled([{0, 1}, {1, 2, 3}], 4)  # partition 1 owned twice
    assert not settled([{0}, {2, 3}], 4)  # partition 1 owned by nobody
    assert not settled([set(), set()], 4)  # a classic group mid-rebalance: everything revoked
    assert not settled([{0, 1}, {2, 7}], 4)  # a partition the topic does not have


def test_unowned_counts_the_topics_partitions_nobody_owns() -> None:
    assert unowned([{0, 1}, {2, 3}], 4) == 0
    assert unowned([set(), set()], 4) == 4  # a classic group mid-rebalance
    assert unowned([{0, 1}, {1}], 4) == 2
    assert unowned([{0, 9}], 4) == 3  # a partition the topic does not have counts for nothing


def test_join_times_summarise_each_join() -> None:
    times = JoinTimes((1.0, 3.0, 2.0), (0.0, 12.0, 6.0))
    assert (times.total, times.mean, times.worst, times.unowned_mean) == (6.0, 2.0, 3.0, 6.0)


def test_an_unknown_protocol_is_refused_before_any_client_starts() -> None:
    with pytest.raises(ValueError, match="one of classic, consumer"):
        join_one_by_one("127.0.0.1:1", "t", 4, 2, "eager")
