"""One description of how a test client connects securely, spelled for each client library.

librdkafka (confluent-kafka, kcat), kafka-python, aiokafka and Java's kafka-clients each name
the same settings differently; tests describe them once (:class:`ClientSecurity`) and ask for
the spelling they need.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"  # SSL, SASL_PLAINTEXT, SASL_SSL
    ca: Path | None = None  # the CA that signs the broker's certificate
    cert: Path | None = None  # the client's certificate (mutual TLS)
    key: Path | None = None  # its private key (PKCS#8 PEM)
    keystore: Path | None = None  # key and certificate in one PEM file, for Java
    mechanism: str | None = None  # SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    username: str = ""
    password: str = ""

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def librdkafka(self) -> dict[str, str]:
        conf = {"security.protocol": self.protocol.lower()}
        if self.ca:
            conf["ssl.ca.location"] = str(self.ca)
        if self.cert and self.key:
            conf["ssl.certificate.location"] = str(self.cert)
            conf["ssl.key.location"] = str(self.key)
        if self.mechanism:
            conf.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                         "sasl.password": self.password})
        return conf

    def kcat_args(self) -> list[str]:
        return [arg for key, value in self.librdkafka().items() for arg in ("-X", f"{key}={value}")]

    def kcat_env(self, directory: Path) -> dict[str, str]:
        """kcat's environment. Debian's kcat links librdkafka 2.0.2, whose SCRAM client fails
        against any broker (Apache Kafka's too) under OpenSSL 3; for SCRAM it runs on the
        librdkafka that confluent-kafka ships (same C API, a symlink in ``directory``)."""
        env = dict(os.environ)
        if self.mechanism and self.mechanism.startswith("SCRAM"):
            import confluent_kafka

            bundled = sorted((Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs")
                             .glob("librdkafka*.so*"))
            assert bundled, "confluent-kafka's wheel ships no librdkafka"
            directory.mkdir(parents=True, exist_ok=True)
            link = directory / "librdkafka.so.1"
            if not link.exists():
                with contextlib.suppress(FileExistsError):
                    link.symlink_to(bundled[0])
            env["LD_LIBRARY_PATH"] = str(directory)
        return env

    def kafka_python(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            conf.update(ssl_cafile=str(self.ca) if self.ca else None, ssl_check_hostname=True)
            if self.cert and self.key:
                conf.update(ssl_certfile=str(self.cert), ssl_keyfile=str(self.key))
        if self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.password)
        return conf

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.cert and self.key:
            context.load_cert_chain(str(self.cert), str(self.key))
        return context

    def aiokafka(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            conf["ssl_context"] = self.ssl_context()
        if self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.password)
        return conf

    def java_properties(self) -> dict[str, str]:
        props = {"security.protocol": self.protocol}
        if self.ca:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)})
        if self.keystore:
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore)})
        if self.mechanism:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            props.update({"sasl.mechanism": self.mechanism,
                          "sasl.jaas.config": f'{module} required username="{self.username}" '
                                              f'password="{self.password}";'})
        return props


    def write_java_properties(self, path: Path) -> Path:
        """A ``--command-config`` file for Kafka's CLI tools."""
        path.write_text("".join(f"{k}={v}\n" for k, v in self.java_properties().items()))
        return path


PLAINTEXT = ClientSecurity()
