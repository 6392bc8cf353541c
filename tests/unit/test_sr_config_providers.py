"""Kafka's config providers in the registry's properties: a SCRAM password read from a mounted
Secret file (what the operator does) instead of the properties or the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from riverlog.config import ConfigError
from riverlog.schema_registry.config_providers import DIRECTORY, ENV, FILE, resolve
from riverlog.schema_registry.settings import settings_from

pytestmark = pytest.mark.unit

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="registry" password="{}";'


def test_a_password_from_a_mounted_secret_directory_reaches_the_kafka_client(tmp_path: Path) -> None:
    (tmp_path / "password").write_text("s3cret")
    settings = settings_from({
        "kafkastore.bootstrap.servers": "SASL_PLAINTEXT://k:9092", "kafkastore.security.protocol": "SASL_PLAINTEXT",
        "kafkastore.sasl.mechanism": "SCRAM-SHA-512", "config.providers": "dir",
        "config.providers.dir.class": DIRECTORY, "config.providers.dir.param.allowed.paths": str(tmp_path),
        "kafkastore.sasl.jaas.config": JAAS.format(f"${{dir:{tmp_path}:password}}")})
    assert settings.kafka_security is not None and settings.kafka_security.sasl
    assert (settings.kafka_security.username, settings.kafka_security.password) == ("registry", "s3cret")


def test_file_and_env_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "app.properties").write_text("topic=_schemas_from_file\n")
    monkeypatch.setenv("SR_GROUP", "group-from-env")
    props = resolve({"config.providers": "file,env", "config.providers.file.class": FILE,
                     "config.providers.env.class": ENV,
                     "kafkastore.topic": f"${{file:{tmp_path}/app.properties:topic}}",
                     "schema.registry.group.id": "${env:SR_GROUP}", "host.name": "sr-${env::SR_GROUP}"})
    assert props["kafkastore.topic"] == "_schemas_from_file"
    assert props["schema.registry.group.id"] == "group-from-env"
    assert props["host.name"] == "sr-group-from-env"


@pytest.mark.parametrize("extra, named", [
    ({"kafkastore.topic": "${dir:/tmp:x}"}, "config.providers does not name"),
    ({"config.providers": "dir", "config.providers.dir.class": "com.example.Vault",
      "kafkastore.topic": "${dir:/tmp:x}"}, "the registry reads"),
    ({"config.providers": "dir", "config.providers.dir.class": DIRECTORY,
      "config.providers.dir.param.allowed.paths": "/nonexistent-allowed", "kafkastore.topic": "${dir:/etc:hostname}"},
     "outside the provider's allowed.paths"),
    ({"config.providers": "dir", "config.providers.dir.class": DIRECTORY,
      "kafkastore.topic": "${dir:/nonexistent-dir:password}"}, "No such file"),
    ({"config.providers": "env", "config.providers.env.class": ENV,
      "kafkastore.topic": "${env:RIVERLOG_SURELY_UNSET_VARIABLE}"}, "no environment variable"),
])
def test_an_unresolvable_reference_stops_the_registry_with_the_reason(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from({"kafkastore.bootstrap.servers": "k:9092", **extra})
    assert named in str(refused.value)
