"""The certificate authorities a Cluster's security rests on (issue #18), as Strimzi keeps them:
a cluster CA that signs the brokers' certificates (what clients trust) and a clients CA that signs
the client certificates of ``User`` resources with TLS authentication (what brokers trust).

Pure functions of their inputs (the time is given, keys come from ``cryptography``): make a CA,
issue a certificate with the DNS names it must carry, decide when one is due for renewal, and
build the trust bundle that keeps old and new CA valid together while a renewal rolls through
(the brokers reload key and trust files without a restart, so renewing loses no availability).

Renewing a CA keeps its key and its name, as Strimzi's renewal does: a client that loaded the
old CA certificate still verifies certificates the renewed one signs (same issuer name, same key,
same key identifier), so running clients keep working without re-reading the bundle. Replacing
a CA makes a new key; clients must then load the new bundle before the old CA expires.
Keys are ECDSA P-256, certificates SHA-256, PEM throughout (Kafka's ``ssl.keystore.type=PEM``).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_CA_VALIDITY_DAYS = 365
DEFAULT_RENEWAL_DAYS = 30
ORGANIZATION = "riverlog.dev"


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate, both PEM."""

    key_pem: bytes
    cert_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @property
    def not_after(self) -> datetime.datetime:
        return self.certificate.not_valid_after_utc

    @property
    def keystore_pem(self) -> bytes:
        """Key then certificate in one file: Kafka's PEM keystore layout."""
        return self.key_pem + self.cert_pem


def _name(common_name: str, unit: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def new_ca(common_name: str, unit: str, now: datetime.datetime,
           validity: datetime.timedelta = datetime.timedelta(days=DEFAULT_CA_VALIDITY_DAYS),
           key_pem: bytes | None = None) -> Issued:
    """A self-signed CA; with ``key_pem`` (a renewal) the existing key signs a new certificate."""
    if key_pem is None:
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        loaded = serialization.load_pem_private_key(key_pem, password=None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey)
        key = loaded
    name = _name(common_name, unit)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            # A few minutes back: a node whose clock is slightly behind still accepts it.
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(_pem_key(key), cert.public_bytes(serialization.Encoding.PEM))


def issue(ca: Issued, common_name: str, unit: str, now: datetime.datetime, validity: datetime.timedelta, *,
          dns_names: tuple[str, ...] = (), server: bool = False, client: bool = True) -> Issued:
    """A certificate signed by ``ca``; a server certificate names ``dns_names`` and may also act
    as a client (a broker is a client of the other brokers) unless ``client`` is false (a
    certificate only for serving: the brokers would not take it as a client's). Never valid past
    the CA itself."""
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = ca.certificate
    key = ec.generate_private_key(ec.SECP256R1())
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + \
        ([ExtendedKeyUsageOID.CLIENT_AUTH] if client or not server else [])
    builder = (x509.CertificateBuilder().subject_name(_name(common_name, unit)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
                              critical=False))
    if dns_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]),
                                        critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return Issued(_pem_key(key), cert.public_bytes(serialization.Encoding.PEM) + ca.cert_pem)


def due_for_renewal(cert_pem: bytes, now: datetime.datetime,
                    renew_before: datetime.timedelta = datetime.timedelta(days=DEFAULT_RENEWAL_DAYS)) -> bool:
    """True when the (first) certificate of ``cert_pem`` expires within ``renew_before``, or
    already has (Strimzi's renewal window)."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc - now <= renew_before


def trust_bundle(current: Issued, previous_cert_pem: bytes | None, now: datetime.datetime) -> bytes:
    """What peers trust: the current CA, and the one it replaced while that one is still valid,
    so certificates of both generations verify during a renewal."""
    bundle = current.cert_pem
    if previous_cert_pem and x509.load_pem_x509_certificate(previous_cert_pem).not_valid_after_utc > now:
        bundle += previous_cert_pem
    return bundle


def broker_dns_names(cluster: str, namespace: str, ordinal: int, headless_service: str,
                     bootstrap_service: str) -> tuple[str, ...]:
    """Every name a client may dial a broker by: its pod's stable name under the headless
    Service, and the bootstrap Service, short and fully qualified."""
    pod = f"{cluster}-{ordinal}"
    names = [f"{pod}.{headless_service}.{namespace}.svc.cluster.local", f"{pod}.{headless_service}.{namespace}.svc",
             f"{pod}.{headless_service}.{namespace}", f"{pod}.{headless_service}"]
    for service in (bootstrap_service, headless_service):
        names += [f"{service}.{namespace}.svc.cluster.local", f"{service}.{namespace}.svc",
                  f"{service}.{namespace}", service]
    return tuple(names)


def expiry_of(cert_pem: bytes) -> datetime.datetime:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc
