"""The dispatcher's request metrics under hostile input (found by the protocol fuzzer,
``tests/cluster/test_protocol_fuzz.py``): API keys the broker does not serve share one label, so
a client cannot add a series per key to every scrape and to the broker's memory."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from riverlog.metrics import Metrics
from riverlog.server.dispatch import UNKNOWN_API_LABEL, Dispatcher

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def error_series(metrics: Metrics) -> dict[str, float]:
    return {sample.labels["api"]: sample.value
            for family in metrics.registry.collect() if family.name == "riverlog_request_errors"
            for sample in family.samples if sample.name == "riverlog_request_errors_total"}


def test_unknown_api_keys_share_one_error_label() -> None:
    metrics = Metrics()
    dispatcher = Dispatcher({}, metrics)
    conn: Any = SimpleNamespace(peer="test", sasl=None)
    keys = [k for k in range(-50, 2000) if k != 18]  # 18, ApiVersions, is answered in any version

    async def send_all() -> None:
        for key in keys:
            frame = struct.pack(">hhih", key, 0, 7, -1)
            response = await dispatcher.handle(memoryview(frame), conn)
            assert response is not None and response.close_after and response.chunks == []

    asyncio.run(send_all())
    assert error_series(metrics) == {UNKNOWN_API_LABEL: len(keys)}
