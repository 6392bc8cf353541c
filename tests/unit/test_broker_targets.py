"""The test harness's two broker targets start from the same single-node settings where those
decide what a test waits for (tests/support/brokers.py): a test must see the same broker,
whichever target runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.brokers import SINGLE_NODE_TEST_SETTINGS, BrokerProcess, kafka_dist

pytestmark = pytest.mark.unit


def riverlog_settings(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--set"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_riverlog_brokers_get_the_settings_kafka_brokers_get(tmp_path: Path) -> None:
    kafka = kafka_dist.server_properties(port=1, controller_port=2, log_dir=tmp_path, node_id=1)
    riverlog = riverlog_settings(BrokerProcess(tmp_path, target="riverlog").command())
    assert SINGLE_NODE_TEST_SETTINGS
    for key, value in SINGLE_NODE_TEST_SETTINGS.items():
        assert kafka[key] == value == riverlog[key], key


def test_a_tests_own_overrides_win(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, target="riverlog", overrides={"offsets.topic.num.partitions": 50})
    assert riverlog_settings(broker.command())["offsets.topic.num.partitions"] == "50"
