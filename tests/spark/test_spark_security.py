"""The pipelines on a secured listener (issue #17): ``riverlog-spark generate`` and ``run batch``
take Kafka's client properties with ``--command-config`` (the file Kafka's tools read), the
generator logs in with Riverlog's client and the batch export hands them to Spark's Kafka
connector (its Java client) as ``kafka.<key>``. The listener speaks SASL_SSL (PLAIN); the export
must hold exactly the records the generator wrote, read back over the plaintext listener."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.brokers import BrokerProcess
from support.certs import TestPki
from support.client_security import ClientSecurity
from support.spark_run import read_topic, riverlog_spark, run

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_etl="etl-secret";')


def test_generate_and_export_over_sasl_ssl(broker_factory: Callable[..., BrokerProcess], spark_jars: list[Path],
                                           tmp_path: Path) -> None:
    pki = TestPki.create(tmp_path / "pki")
    broker = broker_factory(start=False, name="spark-secure", overrides={
        "listener.name.secure.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.secure.plain.sasl.jaas.config": JAAS,
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": str(pki.broker_keystore)})
    port = broker.add_listener("SECURE", "SASL_SSL", advertised_host="localhost")
    broker.start()
    secure = f"localhost:{port}"
    config = ClientSecurity("SASL_SSL", ca=pki.truststore, mechanism="PLAIN", username="etl",
                            password="etl-secret").write_java_properties(tmp_path / "etl.properties")

    run(riverlog_spark("generate", "--bootstrap", secure, "--command-config", str(config), "--topic", "secured",
                       "--count", "120", "--partitions", "2", "--no-progress"),
        tmp_path / "generate.log", cwd=tmp_path)
    written = read_topic(broker.bootstrap, "secured")
    assert len(written) == 120

    out = tmp_path / "export"
    run(riverlog_spark("run", "batch", "--bootstrap", secure, "--command-config", str(config), "--topic", "secured",
                       "--output", str(out)), tmp_path / "batch.log", cwd=tmp_path)
    rows = {(row["partition"], row["offset"], row["value"]) for row in pq.read_table(out).to_pylist()}
    assert rows == {(r.partition, r.offset, (r.value or b"").decode()) for r in written}
