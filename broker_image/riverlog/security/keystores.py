"""Java key and trust stores as PEM text, for OpenSSL.

Java services name their stores with ``ssl.keystore.type`` / ``ssl.truststore.type``: PKCS12 (the
JDK's default since Java 9), JKS (older default, a Java-only format) or PEM. OpenSSL reads PEM
only, so a PKCS12 store is opened here with ``cryptography`` and handed on as PEM text; a JKS
store is recognised by its magic number and refused with the ``keytool`` command that converts it.
The type may be left out: the file's first bytes say which it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from ..config import ConfigError

STORE_TYPES = ("PEM", "PKCS12")
_JKS_MAGIC = b"\xfe\xed\xfe\xed"


@dataclass(frozen=True)
class PemKeystore:
    key: str  # an unencrypted PKCS#8 private key
    chain: str  # the certificate, then its issuers


def store_type(path: str, declared: str, setting: str) -> str:
    """PEM or PKCS12: the declared type, else what the file's first bytes show."""
    kind = declared.strip().upper()
    try:
        head = Path(path).read_bytes()[:64]
    except OSError as exc:
        raise ConfigError(f"{setting}={path}: cannot read it: {exc.strerror or exc}") from None
    if head.startswith(_JKS_MAGIC) or kind == "JKS":
        raise ConfigError(f"{setting}={path} is a JKS store, a format only Java reads: convert it with "
                          f"`keytool -importkeystore -srckeystore {path} -destkeystore store.p12 "
                          "-deststoretype PKCS12` and set the store type to PKCS12")
    if kind in ("", "JKS"):
        kind = "PEM" if head.lstrip().startswith(b"-----BEGIN") else "PKCS12"
    if kind not in STORE_TYPES:
        raise ConfigError(f"{setting} type {kind}: use one of {', '.join(STORE_TYPES)}")
    return kind


def _pkcs12(path: str, password: str, setting: str) -> pkcs12.PKCS12KeyAndCertificates:
    try:
        return pkcs12.load_pkcs12(Path(path).read_bytes(), password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{setting}={path}: cannot open the PKCS12 store (wrong password?): {exc}") from None


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def pkcs12_keystore(path: str, store_password: str, key_password: str, setting: str) -> PemKeystore:
    """The private key and chain of a PKCS12 keystore. Java's keytool protects the key with the
    store password unless told otherwise, so ``ssl.key.password`` is tried only if it differs."""
    bundle: pkcs12.PKCS12KeyAndCertificates | None = None
    for password in dict.fromkeys((store_password, key_password)):
        try:
            bundle = pkcs12.load_pkcs12(Path(path).read_bytes(), password.encode() if password else None)
            break
        except (ValueError, TypeError):
            continue
    if bundle is None:
        bundle = _pkcs12(path, store_password, setting)  # raises with the reason
    if bundle.key is None or bundle.cert is None:
        raise ConfigError(f"{setting}={path}: the PKCS12 store holds no private key with its certificate")
    key = bundle.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()).decode()
    chain = _pem(bundle.cert.certificate) + "".join(_pem(c.certificate) for c in bundle.additional_certs)
    return PemKeystore(key, chain)


def truststore_pem(path: str, kind: str, password: str, setting: str) -> str:
    """The trusted CA certificates of a store, as PEM text."""
    if kind == "PEM":
        try:
            return Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{setting}={path}: cannot read it: {exc}") from None
    bundle = _pkcs12(path, password, setting)
    certs = [c.certificate for c in bundle.additional_certs]
    if bundle.cert is not None:
        certs.insert(0, bundle.cert.certificate)
    if not certs:
        raise ConfigError(f"{setting}={path}: the PKCS12 truststore holds no certificates")
    return "".join(_pem(c) for c in certs)
