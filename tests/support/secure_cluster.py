"""A cluster whose node-to-node traffic is SASL_SSL (issue #17, acceptance 3), for both targets.

Clients keep the PLAINTEXT listener (the harness's workloads and checks use it); brokers
replicate over ``INTERNAL`` (SASL_SSL, SCRAM-SHA-512 as user ``broker``) and the quorum runs
over ``CONTROLLER`` (SASL_SSL, PLAIN as user ``controller``: Kafka, like Riverlog, cannot use
SCRAM there, the credentials living in the very log the controllers must agree on). Each node's
certificate names its own address, and host names are checked (Kafka's default). The broker
user's SCRAM credential exists before any broker replicates: Kafka's ``kafka-storage format
--add-scram`` writes it, Riverlog's ``bootstrap.scram.credentials`` has the first active
controller record it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from support.certs import TestPki

BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
CONTROLLER_USER, CONTROLLER_PASSWORD = "controller", "controller-secret"
SCRAM_CREDENTIAL = f"SCRAM-SHA-512=[name={BROKER_USER},password={BROKER_PASSWORD}]"


def _jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def secured_options(pki: TestPki) -> dict[str, Any]:
    """``process_cluster_factory`` options: per-node listeners, certificates and credentials."""

    def node_overrides(node: Any) -> Mapping[str, str]:
        keystore = pki.node_keystore(f"node{node.node_id}", node.host)
        tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
               "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.truststore)}
        host = node.host
        return {
            "listeners": f"PLAINTEXT://{host}:{node.port},CONTROLLER://{host}:{node.controller_port},"
                         f"INTERNAL://{host}:{node.internal_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{node.port},INTERNAL://{host}:{node.internal_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": _jaas(
                "org.apache.kafka.common.security.scram.ScramLoginModule",
                username=BROKER_USER, password=BROKER_PASSWORD),
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": _jaas(
                "org.apache.kafka.common.security.plain.PlainLoginModule",
                username=CONTROLLER_USER, password=CONTROLLER_PASSWORD,
                **{f"user_{CONTROLLER_USER}": CONTROLLER_PASSWORD}),
            "bootstrap.scram.credentials": SCRAM_CREDENTIAL,
            **{f"listener.name.internal.{k}": v for k, v in tls.items()},
            **{f"listener.name.controller.{k}": v for k, v in tls.items()},
        }

    return {"node_overrides": node_overrides, "format_args": ("--add-scram", SCRAM_CREDENTIAL)}

