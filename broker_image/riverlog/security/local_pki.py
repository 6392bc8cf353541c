"""A certificate authority and a broker certificate for a secured local start (``riverlog
local-secure``), made once with ``cryptography`` and kept beside the data.

Not for production: the CA's key sits next to the broker's. What it gives a developer is the real
thing end to end (TLS with a verifiable chain, a SCRAM login) on their own machine, with the files
any Kafka client reads: ``ca.pem`` (the truststore), ``broker.pem`` (the PEM keystore: key, then
certificate chain) and ``client.properties`` (``--command-config`` for Kafka's tools and
Riverlog's CLI). Files are written owner-readable only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=825)
ADMIN_USER = "admin"


@dataclass(frozen=True)
class LocalFiles:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def password(self) -> Path:
        return self.directory / "admin.password"

    @property
    def client_properties(self) -> Path:
        return self.directory / "client.properties"


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Riverlog local"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def ensure_local_pki(directory: Path, hosts: list[str]) -> LocalFiles:
    """The files under ``directory``, made if missing (kept across restarts, so clients keep
    trusting the same CA and the admin keeps its password). ``hosts`` are the names and
    addresses the broker certificate must carry."""
    files = LocalFiles(directory)
    if files.ca.is_file() and files.keystore.is_file() and files.password.is_file():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("Riverlog local CA")
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .sign(ca_key, hashes.SHA256()))
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(["localhost", "127.0.0.1", *hosts]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("riverlog-broker")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    files.ca.write_bytes(ca_pem)
    _write_private(files.keystore, _pem_key(key) + cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
    _write_private(directory / "ca-key.pem", _pem_key(ca_key))
    _write_private(files.password, secrets.token_urlsafe(18).encode())
    return files


def client_properties(files: LocalFiles) -> str:
    """``--command-config`` for the admin user over the secured listener."""
    password = files.password.read_text().strip()
    return ("security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN_USER}" password="{password}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={files.ca}\n")
