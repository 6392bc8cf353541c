"""The registry inside a broker (``schema.registry.listeners``, what ``make run`` and
``riverlog dev`` start): the broker refuses at start what that instance cannot serve, naming the
fix, rather than running without the registry it was asked for or serving it another way."""

from __future__ import annotations

import pytest
from riverlog.config import BrokerConfig, ConfigError
from riverlog.devcluster import QuorumDevCluster

pytestmark = pytest.mark.unit

PLAIN = {"listeners": "PLAINTEXT://127.0.0.1:9092"}


@pytest.mark.parametrize("extra, named", [
    ({"schema.registry.listeners": "https://127.0.0.1:8081"}, "http://HOST:PORT only"),
    ({"schema.registry.listeners": "127.0.0.1:8081"}, "http://HOST:PORT only"),
    ({"schema.registry.listeners": "http://127.0.0.1"}, "http://HOST:PORT only"),
    ({"schema.registry.listeners": "http://127.0.0.1:8081", "listeners": "SSL://127.0.0.1:9093",
      "inter.broker.listener.name": "SSL", "ssl.keystore.location": "/nonexistent.p12"},
     "needs a PLAINTEXT listener"),
    ({"schema.registry.listeners": "http://127.0.0.1:8081", "process.roles": "controller",
      "listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
      "controller.quorum.voters": "1@127.0.0.1:9093"}, "process.roles to include broker"),
])
def test_a_registry_the_broker_cannot_serve_is_refused(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({**PLAIN, **extra})
    assert named in str(refused.value)


def test_a_plaintext_broker_loads_with_its_registry() -> None:
    config = BrokerConfig({**PLAIN, "schema.registry.listeners": "http://127.0.0.1:8081"})
    assert config.get("schema.registry.listeners") == "http://127.0.0.1:8081"


def test_the_dev_cluster_runs_one_registry_in_its_first_broker(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = QuorumDevCluster(tmp_path, 3, ports={1: 9092, 2: 9093, 3: 9094}, metrics_ports={1: 0, 2: 0, 3: 0},
                               advertised_host="localhost",
                               registry_port=8081)
    listeners = [cluster.config(n).get("schema.registry.listeners") for n in (1, 2, 3)]
    assert listeners == ["http://127.0.0.1:8081", "", ""]
    assert cluster.config(1).get("schema.registry.host.name") == "localhost"
    assert "schema registry http://localhost:8081" in cluster.ready_message()
    assert QuorumDevCluster(tmp_path, 1, ports={1: 9092}, metrics_ports={1: 0}).config(1).get(
        "schema.registry.listeners") == ""
