"""Kafka's config providers in the registry's properties: ``${provider:path:key}`` references
resolved at start, so a secret (a SCRAM password, a keystore password) can live in a mounted file
instead of the properties file or the command line, where any process of the pod could read it.

The providers and their names are Kafka's (``config.providers=dir``,
``config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider``),
so the lines Kafka clients and Connect workers use work here unchanged:

- ``DirectoryConfigProvider``: ``${dir:/etc/secret:password}`` is the content of the file
  ``/etc/secret/password`` (a Kubernetes Secret mounted as a directory);
- ``FileConfigProvider``: ``${file:/etc/app.properties:key}`` is ``key``'s value in that
  properties file;
- ``EnvVarConfigProvider``: ``${env:NAME}`` (or ``${env::NAME}``) is the environment variable.

A reference to a provider that is not configured, a missing file or key, or a path outside
``config.providers.<name>.param.allowed.paths`` stops the registry with the reason, as Kafka does:
a password silently left as its ``${...}`` text would only fail later, at the broker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..config import ConfigError, parse_properties

DIRECTORY = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
KINDS = {DIRECTORY: "directory", FILE: "file", ENV: "env"}

# Kafka's ConfigTransformer pattern: ${provider:[path:]key}.
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


def _providers(props: Mapping[str, str]) -> dict[str, tuple[str, list[Path] | None]]:
    """Each configured provider's kind and allowed paths (None: any)."""
    configured: dict[str, tuple[str, list[Path] | None]] = {}
    for name in (n.strip() for n in props.get("config.providers", "").split(",")):
        if not name:
            continue
        cls = props.get(f"config.providers.{name}.class", "").strip()
        if cls not in KINDS:
            raise ConfigError(f"config.providers.{name}.class={cls!r}: the registry reads "
                              f"{', '.join(sorted(KINDS))}")
        allowed = props.get(f"config.providers.{name}.param.allowed.paths", "").strip()
        paths = [Path(p.strip()).resolve() for p in allowed.split(",") if p.strip()] if allowed else None
        configured[name] = (KINDS[cls], paths)
    return configured


def _read(kind: str, allowed: list[Path] | None, path: str, key: str, reference: str) -> str:
    if kind == "env":
        value = os.environ.get(key)
        if value is None:
            raise ConfigError(f"{reference}: no environment variable {key}")
        return value
    target = Path(path).resolve()
    if allowed is not None and not any(target == a or a in target.parents for a in allowed):
        raise ConfigError(f"{reference}: {path} is outside the provider's allowed.paths")
    try:
        if kind == "directory":
            return (target / key).read_text()
        values = parse_properties(target.read_text())
    except OSError as exc:
        raise ConfigError(f"{reference}: {exc.strerror or exc}: {exc.filename or path}") from None
    if key not in values:
        raise ConfigError(f"{reference}: {path} has no key {key}")
    return values[key]


def resolve(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` with every ``${provider:path:key}`` reference replaced by its value."""
    providers = _providers(props)
    resolved: dict[str, str] = {}
    for prop, value in props.items():
        def substitute(match: re.Match[str], prop: str = prop) -> str:
            name, path, key = match.group(1), match.group(3) or "", match.group(4)
            if name not in providers:
                raise ConfigError(f"{prop} refers to config provider {name!r}, which config.providers does not "
                                  f"name (e.g. config.providers={name} and config.providers.{name}.class={DIRECTORY})")
            kind, allowed = providers[name]
            return _read(kind, allowed, path, key, f"{prop} (${{{name}:{path}:{key}}})")

        resolved[prop] = REFERENCE.sub(substitute, value) if not prop.startswith("config.providers") else value
    return resolved
