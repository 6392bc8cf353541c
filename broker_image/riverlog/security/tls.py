"""TLS for SSL (and, later, SASL_SSL) listeners, configured with Kafka's property names.

Keys and certificates come in PEM, as Kafka's ``ssl.keystore.type=PEM``: either a file
(``ssl.keystore.location``, the private key and the certificate chain in one file, the key
optionally encrypted with ``ssl.key.password``) or inline values (``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``). Trusted CAs come from ``ssl.truststore.location`` or inline
``ssl.truststore.certificates`` (``ssl.truststore.type=PEM``). ``ssl.client.auth`` is none,
requested or required. Each setting may be given for one listener as
``listener.name.<listener>.<key>``, which wins over the plain key, as in Kafka.

Files are checked for changes every ``ssl.file.reload.interval.ms`` (Riverlog's own setting,
default 30 s): when the keystore or truststore file changes (the operator rotates certificates
by rewriting the Secret's files), new connections get a context built from the new files; open
connections keep theirs. A change that does not load (a half-written file) keeps the old
context and is retried at the next check.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..config import BrokerConfig, ConfigError
from .principal_mapping import Rule, parse_rules

log = logging.getLogger(__name__)

# The security protocols whose listeners speak TLS.
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def listener_setting(config: BrokerConfig, listener: str, key: str) -> str:
    """``listener.name.<listener>.<key>`` if set, else ``key`` (Kafka's per-listener override)."""
    scoped = f"listener.name.{listener.lower()}.{key}"
    if scoped in config.props:
        return config.props[scoped]
    return config.get(key)


@dataclass(frozen=True)
class TlsSettings:
    listener: str
    keystore_location: str
    keystore_key: str
    keystore_chain: str
    key_password: str
    truststore_location: str
    truststore_certificates: str
    client_auth: str
    protocols: tuple[str, ...]

    @classmethod
    def of(cls, config: BrokerConfig, listener: str) -> TlsSettings:
        def get(key: str) -> str:
            return listener_setting(config, listener, key).strip()

        settings = cls(
            listener=listener,
            keystore_location=get("ssl.keystore.location"),
            keystore_key=get("ssl.keystore.key"),
            keystore_chain=get("ssl.keystore.certificate.chain"),
            key_password=get("ssl.key.password"),
            truststore_location=get("ssl.truststore.location"),
            truststore_certificates=get("ssl.truststore.certificates"),
            client_auth=(get("ssl.client.auth") or "none").lower(),
            protocols=tuple(p.strip() for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")
                            if p.strip()),
        )
        settings.check(config)
        return settings

    def check(self, config: BrokerConfig) -> None:
        """Refuse what Kafka refuses, and what Riverlog cannot honour, with the fix."""
        where = f"listener {self.listener}"

        def get(key: str) -> str:
            return listener_setting(config, self.listener, key).strip()

        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            kind = get(key).upper()
            if kind and kind != "PEM":
                raise ConfigError(f"{key}={kind} on {where}: Riverlog reads PEM only; convert the store "
                                  "(openssl pkcs12 -in store.p12 -nodes) and set "
                                  f"{key}=PEM")
        if get("ssl.keystore.password"):
            raise ConfigError(f"ssl.keystore.password on {where}: a PEM keystore has no store password; "
                              "use ssl.key.password for an encrypted key, as Kafka does")
        if get("ssl.truststore.password"):
            raise ConfigError(f"ssl.truststore.password on {where}: a PEM truststore has no password "
                              "(Kafka refuses it too); remove it")
        if self.keystore_location and (self.keystore_key or self.keystore_chain):
            raise ConfigError(f"{where} sets both ssl.keystore.location and an inline ssl.keystore.key/"
                              "ssl.keystore.certificate.chain; use one")
        if bool(self.keystore_key) != bool(self.keystore_chain):
            raise ConfigError(f"{where}: ssl.keystore.key and ssl.keystore.certificate.chain go together")
        if not (self.keystore_location or self.keystore_key):
            raise ConfigError(f"{where} serves TLS but has no key and certificate: set ssl.keystore.type=PEM and "
                              "ssl.keystore.location=<file with the private key and certificate chain>")
        if self.truststore_location and self.truststore_certificates:
            raise ConfigError(f"{where} sets both ssl.truststore.location and ssl.truststore.certificates; use one")
        if self.client_auth not in CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth={self.client_auth} on {where} must be none, requested or required")
        if self.client_auth != "none" and not (self.truststore_location or self.truststore_certificates):
            raise ConfigError(f"ssl.client.auth={self.client_auth} on {where} needs the CAs that sign client "
                              "certificates: set ssl.truststore.type=PEM and ssl.truststore.location")
        unknown = [p for p in self.protocols if p not in _PROTOCOLS]
        if unknown or not self.protocols:
            raise ConfigError(f"ssl.enabled.protocols on {where} may hold TLSv1.2 and TLSv1.3, got "
                              f"{','.join(self.protocols) or 'nothing'}")
        if get("ssl.cipher.suites"):
            raise ConfigError(f"ssl.cipher.suites on {where}: Riverlog uses OpenSSL's default suites for the "
                              "enabled protocols and cannot map Java suite names; remove it")

    def watched_files(self) -> list[Path]:
        return [Path(p) for p in (self.keystore_location, self.truststore_location) if p]

    def server_context(self) -> ssl.SSLContext:
        """A fresh server context from the current files (ssl.SSLError or OSError if they do not load)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        versions = sorted(_PROTOCOLS[p] for p in self.protocols)
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
        password = self.key_password or None
        if self.keystore_location:
            context.load_cert_chain(self.keystore_location, password=password)
        else:
            load_inline_chain(context, self.keystore_chain, self.keystore_key, password)
        if self.truststore_location:
            context.load_verify_locations(cafile=self.truststore_location)
        elif self.truststore_certificates:
            context.load_verify_locations(cadata=self.truststore_certificates)
        context.verify_mode = CLIENT_AUTH[self.client_auth]
        return context


def load_inline_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # OpenSSL loads keys from files only: write them to a private temporary file, gone at once.
    fd, name = tempfile.mkstemp(prefix="riverlog-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(name, password=password)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


class TlsContextSource:
    """The current server context of one listener, rebuilt when its files change."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self._stamps = self._file_stamps()
        try:
            self.context = settings.server_context()
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ConfigError(f"listener {settings.listener}: cannot load its TLS key, certificate or "
                              f"truststore: {exc}") from None
        self.reloads = 0

    def _file_stamps(self) -> list[tuple[int, int, int] | None]:
        stamps: list[tuple[int, int, int] | None] = []
        for path in self.settings.watched_files():
            try:
                st = path.stat()
                stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                stamps.append(None)
        return stamps

    def check_for_changes(self) -> bool:
        """Rebuild the context if a watched file changed; True if the new one is in use."""
        stamps = self._file_stamps()
        if stamps == self._stamps:
            return False
        try:
            context = self.settings.server_context()
        except (ssl.SSLError, OSError, ValueError) as exc:
            log.warning("listener %s: TLS files changed but do not load (%s); still serving the previous "
                        "certificate, trying again at the next check", self.settings.listener, exc)
            return False
        self._stamps = stamps
        self.context = context
        self.reloads += 1
        log.info("listener %s: TLS key, certificate or truststore reloaded from %s", self.settings.listener,
                 ", ".join(str(p) for p in self.settings.watched_files()))
        return True


def tls_sources(config: BrokerConfig) -> dict[str, TlsContextSource]:
    """A context source for every listener whose security protocol is SSL or SASL_SSL."""
    return {lst.name: TlsContextSource(TlsSettings.of(config, lst.name))
            for lst in config.listeners() if config.security_protocol(lst.name) in TLS_PROTOCOLS}


def principal_rules(config: BrokerConfig, listener: str) -> list[Rule]:
    try:
        return parse_rules(listener_setting(config, listener, "ssl.principal.mapping.rules"))
    except ValueError as exc:
        raise ConfigError(f"listener {listener}: {exc}") from None
