"""The listener probe behind fast fencing: only a refused connection says a process is gone."""

from __future__ import annotations

import asyncio
import socket

import pytest
from riverlog.controller.image import BrokerImage
from riverlog.controller.quorum.liveness import nothing_listens, probe_address
from riverlog.controller.records import Endpoint

pytestmark = pytest.mark.unit


def test_a_closed_port_is_refused_and_a_listening_one_is_not() -> None:
    async def scenario() -> None:
        with socket.socket() as listening:
            listening.bind(("127.0.0.1", 0))
            listening.listen()  # never accepts in the application: the kernel does
            assert not await nothing_listens("127.0.0.1", listening.getsockname()[1])
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]  # bound, not listening: connections are refused
            assert await nothing_listens("127.0.0.1", port)

    asyncio.run(scenario())


def test_the_inter_broker_listener_is_probed_and_a_wildcard_host_is_not() -> None:
    broker = BrokerImage(1, (Endpoint("PLAINTEXT", "10.0.0.1", 9092), Endpoint("REPLICATION", "10.0.0.1", 9093)),
                         None, False)
    assert probe_address(broker, "REPLICATION") == ("10.0.0.1", 9093)
    assert probe_address(broker, None) == ("10.0.0.1", 9092)
    anywhere = BrokerImage(2, (Endpoint("PLAINTEXT", "0.0.0.0", 9092),), None, False)
    assert probe_address(anywhere, "PLAINTEXT") is None
