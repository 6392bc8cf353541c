"""How ``riverlog schemas`` reaches a registry: its URL, basic auth credentials and the CAs that
check an https registry, under the property names Confluent's clients read.

``--config FILE`` holds client properties as confluent-kafka's ``SchemaRegistryClient`` and Java's
serializers name them (the ``schema.registry.`` prefixed forms too):

- ``basic.auth.credentials.source``: ``USER_INFO`` (``basic.auth.user.info=user:password``) or
  ``URL`` (``https://user:password@host:8081``);
- ``ssl.ca.location`` (PEM), or ``schema.registry.ssl.truststore.location`` with ``.type``
  (PEM or PKCS12) and ``.password``;
- a client certificate for a registry that asks for one: ``ssl.certificate.location`` and
  ``ssl.key.location`` (PEM), or ``schema.registry.ssl.keystore.location`` (``.type``,
  ``.password``, ``schema.registry.ssl.key.password``).

``--user`` and ``--ca-file`` (or ``$RIVERLOG_SCHEMA_REGISTRY_USER_INFO`` and
``$RIVERLOG_SCHEMA_REGISTRY_CA``) win over the file.
"""

from __future__ import annotations

import base64
import os
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ConfigError, parse_properties
from ..security.keystores import pkcs12_keystore, store_type, truststore_pem
from ..security.tls import load_inline_chain

DEFAULT_URL = "http://localhost:8081"
URL_ENV = "RIVERLOG_SCHEMA_REGISTRY_URL"
USER_INFO_ENV = "RIVERLOG_SCHEMA_REGISTRY_USER_INFO"
CA_ENV = "RIVERLOG_SCHEMA_REGISTRY_CA"


@dataclass(frozen=True)
class Connection:
    url: str  # without credentials
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None


def _prop(props: Mapping[str, str], name: str) -> str:
    """A client property under its plain or its ``schema.registry.`` prefixed name."""
    return str(props.get(name) or props.get(f"schema.registry.{name}") or "").strip()


def _credentials(url: str, props: Mapping[str, str], user: str) -> tuple[str, str]:
    """(the URL without user info, user:password or "")."""
    parts = urllib.parse.urlsplit(url)
    in_url = ""
    if parts.username is not None:
        in_url = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    if user:
        return parts.geturl(), user
    source = (_prop(props, "basic.auth.credentials.source") or ("URL" if in_url else "USER_INFO")).upper()
    if source == "URL":
        return parts.geturl(), in_url
    if source != "USER_INFO":
        raise ConfigError(f"basic.auth.credentials.source={source}: riverlog schemas reads USER_INFO or URL")
    return parts.geturl(), _prop(props, "basic.auth.user.info")


def _ssl_context(props: Mapping[str, str], ca_file: str) -> ssl.SSLContext:
    cadata = None
    trust = ca_file or _prop(props, "ssl.ca.location") or _prop(props, "ssl.truststore.location")
    if trust:
        kind = "PEM" if ca_file or _prop(props, "ssl.ca.location") else store_type(
            trust, _prop(props, "ssl.truststore.type"), "schema.registry.ssl.truststore.location")
        cadata = truststore_pem(trust, kind, _prop(props, "ssl.truststore.password"), "the registry's CA")
    context = ssl.create_default_context(cadata=cadata)
    try:
        if _prop(props, "ssl.certificate.location"):
            context.load_cert_chain(_prop(props, "ssl.certificate.location"),
                                    _prop(props, "ssl.key.location") or None,
                                    password=_prop(props, "ssl.key.password") or None)
        elif _prop(props, "ssl.keystore.location"):
            location = _prop(props, "ssl.keystore.location")
            if store_type(location, _prop(props, "ssl.keystore.type"), "ssl.keystore.location") == "PKCS12":
                opened = pkcs12_keystore(location, _prop(props, "ssl.keystore.password"),
                                         _prop(props, "ssl.key.password"), "ssl.keystore.location")
                load_inline_chain(context, opened.chain, opened.key, None)
            else:
                context.load_cert_chain(location, password=_prop(props, "ssl.key.password") or None)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"cannot load the client certificate: {exc}") from None
    return context


def connection(url: str = "", *, config: str = "", user: str = "", ca_file: str = "",
               environ: Mapping[str, str] = os.environ) -> Connection:
    """--url, else the file's ``url``, else ``$RIVERLOG_SCHEMA_REGISTRY_URL``, else localhost:8081."""
    props = parse_properties(Path(config).read_text()) if config else {}
    user = user or environ.get(USER_INFO_ENV, "")
    ca_file = ca_file or environ.get(CA_ENV, "")
    url = url or _prop(props, "url").split(",")[0].strip() or environ.get(URL_ENV, "") or DEFAULT_URL
    plain_url, user_info = _credentials(url, props, user)
    headers = {}
    if user_info:
        if ":" not in user_info:
            raise ConfigError("basic auth credentials are user:password")
        headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
    context = _ssl_context(props, ca_file) if plain_url.startswith("https://") else None
    return Connection(plain_url, headers, context)
