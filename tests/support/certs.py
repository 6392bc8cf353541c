"""Test certificates: a CA, broker and client certificates in PEM, made with ``cryptography``.

Everything the TLS tests need for both targets (Riverlog and Apache Kafka read the same PEM
files): the broker's keystore (PKCS#8 private key and certificate chain in one file, Kafka's
``ssl.keystore.type=PEM`` layout), the truststore (the CA certificate), client certificates
signed by the CA, one from a CA nobody trusts and one that has expired.
"""

from __future__ import annotations

import datetime
import subprocess
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DAY = datetime.timedelta(days=1)


def _name(common_name: str, unit: str = "riverlog-tests") -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Riverlog"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


@dataclass(frozen=True)
class Authority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, name: str = "Riverlog Test CA") -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        return cls(key, cert)

    def issue(self, common_name: str, *, server: bool = False, unit: str = "riverlog-tests",
              expired: bool = False, addresses: tuple[str, ...] = ()
              ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (now - 10 * DAY, now - DAY) if expired else (now - DAY, now + 30 * DAY)
        builder = (x509.CertificateBuilder().subject_name(_name(common_name, unit))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end))
        if server:
            names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(IPv4Address("127.0.0.1"))]
            names += [x509.IPAddress(IPv4Address(a)) for a in addresses if a != "127.0.0.1"]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(self.key, hashes.SHA256())


def pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    """PKCS#8 PEM; with ``password``, encrypted by PBES1 (SHA-1, 3DES): the scheme both Java 17
    (Kafka) and OpenSSL read. Java 17 cannot read PBES2-encrypted keys, and ``cryptography``
    writes only PBES2 into PKCS#8, so OpenSSL's command line (a system dependency) encrypts it."""
    plain = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    if not password:
        return plain
    result = subprocess.run(["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-passout", f"pass:{password}"],
                            input=plain, capture_output=True, check=True, timeout=30)
    return result.stdout


@dataclass(frozen=True)
class ClientFiles:
    cert: Path
    key: Path
    keystore: Path  # key and certificate in one file, for Java's PEM keystore


@dataclass(frozen=True)
class TestPki:
    __test__ = False  # a helper, not a test class
    """Files under one directory: ``truststore.pem``, ``broker.pem`` and clients by name."""

    directory: Path
    ca: Authority

    @property
    def truststore(self) -> Path:
        return self.directory / "truststore.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.directory / "broker.pem"

    @classmethod
    def create(cls, directory: Path) -> TestPki:
        directory.mkdir(parents=True, exist_ok=True)
        pki = cls(directory, Authority.create())
        pki.truststore.write_bytes(pem_cert(pki.ca.cert))
        pki.write_broker_keystore()
        return pki

    def write_broker_keystore(self, common_name: str = "broker") -> None:
        key, cert = self.ca.issue(common_name, server=True)
        self.broker_keystore.write_bytes(pem_key(key) + pem_cert(cert) + pem_cert(self.ca.cert))

    def node_keystore(self, name: str, address: str) -> Path:
        """A keystore for one node of a cluster: its certificate names its IP address, so peers
        that check host names (Kafka's default, ssl.endpoint.identification.algorithm=https)
        accept it, and it serves as the node's client certificate too."""
        key, cert = self.ca.issue(name, server=True, addresses=(address,))
        path = self.directory / f"{name}.pem"
        path.write_bytes(pem_key(key) + pem_cert(cert) + pem_cert(self.ca.cert))
        return path

    def client(self, name: str, *, authority: Authority | None = None, expired: bool = False,
               unit: str = "riverlog-tests") -> ClientFiles:
        key, cert = (authority or self.ca).issue(name, expired=expired, unit=unit)
        files = ClientFiles(self.directory / f"{name}.crt", self.directory / f"{name}.key",
                            self.directory / f"{name}-keystore.pem")
        files.cert.write_bytes(pem_cert(cert))
        files.key.write_bytes(pem_key(key))
        files.keystore.write_bytes(pem_key(key) + pem_cert(cert))
        return files
