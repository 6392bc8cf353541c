"""Kafka's JAAS configuration values (``sasl.jaas.config``), parsed for the options they carry.

A value names one login module, a control flag and options, ended by ``;``::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

Riverlog reads the options (a PLAIN listener's ``user_<name>`` passwords, the broker's own
``username``/``password``); the module class only says which mechanism the entry is for.
Pure functions; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'\s*(?:"((?:\\.|[^"\\])*)"|([^\s=;"]+)|(=)|(;))')
FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas(text: str) -> JaasEntry:
    """The single entry of a ``sasl.jaas.config`` value; ValueError says what is wrong."""
    tokens: list[tuple[str, bool]] = []  # (text, quoted)
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"sasl.jaas.config: cannot read {text[pos:pos + 20]!r}")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append((re.sub(r"\\(.)", r"\1", quoted), True))
        else:
            tokens.append((word or equals or semicolon or "", False))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if len(tokens) < 3 or tokens[-1] != (";", False):
        raise ValueError("sasl.jaas.config must look like '<LoginModule class> required key=\"value\" ...;'")
    module, flag = tokens[0][0], tokens[1][0].lower()
    if flag not in FLAGS:
        raise ValueError(f"sasl.jaas.config: {flag!r} is not a control flag (required, requisite, sufficient, "
                         "optional)")
    options: dict[str, str] = {}
    rest = tokens[2:-1]
    if len(rest) % 3:
        raise ValueError("sasl.jaas.config: options must be key=value pairs")
    for i in range(0, len(rest), 3):
        (key, _), (eq, eq_quoted), (value, _) = rest[i:i + 3]
        if eq != "=" or eq_quoted:
            raise ValueError(f"sasl.jaas.config: option {key!r} has no '='")
        options[key] = value
    if ";" in (t for t, q in rest if not q):
        raise ValueError("sasl.jaas.config holds more than one login module; Kafka allows one")
    return JaasEntry(module, flag, options)
