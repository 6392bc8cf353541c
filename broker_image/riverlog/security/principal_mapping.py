"""``ssl.principal.mapping.rules``: a TLS client's distinguished name to a principal name.

Kafka's syntax and semantics: a comma-separated list of ``RULE:pattern/replacement/[LU]`` and
``DEFAULT`` entries, tried in order; the first rule whose pattern matches the whole DN (in RFC
2253 form, ``CN=app,OU=ops,O=example``) gives the name, with ``$1``... in the replacement standing
for the pattern's groups and an optional ``L``/``U`` lower- or upper-casing it. ``DEFAULT`` gives
the DN itself. When no rule matches, the client is not authenticated.

Pure functions; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"

# Kafka's grammar: a rule is DEFAULT, RULE:<pattern>/<replacement>/[LU], or anything else
# (refused below). Slashes and backslashes inside pattern and replacement are escaped with "\".
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule gives a name for this DN: the client cannot be authenticated."""


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


def _python_replacement(java: str, groups: int) -> str:
    """A Java ``replaceAll`` replacement as a Python one: ``$n`` are group references (a number
    beyond the pattern's groups loses digits until it fits, as Kafka does, else stays literal),
    a backslash makes the next character literal."""
    out: list[str] = []
    i = 0
    while i < len(java):
        ch = java[i]
        if ch == "\\" and i + 1 < len(java):
            out.append(java[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        match = _BACK_REFERENCE.match(java, i) if ch == "$" else None
        if match is not None and not match.group(1).startswith("0"):
            digits = match.group(1)
            while int(digits) > groups and len(digits) > 1:
                digits = digits[:-1]
            if int(digits) <= groups:
                out.append(f"\\g<{digits}>")
                i += 1 + len(digits)
                continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


def parse_rules(spec: str | None) -> list[Rule]:
    """The rules of an ``ssl.principal.mapping.rules`` value; ValueError names a bad one."""
    text = (spec if spec else DEFAULT_RULES).strip()
    rules: list[Rule] = []
    for match in _SPLITTER.finditer(text):
        entry = match.group(1)
        if not entry:
            continue  # empty rules are ignored
        parsed = _PARSER.match(entry)
        if parsed is None or parsed.end() != len(entry) or parsed.group(5):
            raise ValueError(f"invalid ssl.principal.mapping.rules entry {entry!r} "
                             "(expected DEFAULT or RULE:pattern/replacement/[LU])")
        if parsed.group(1):
            rules.append(Rule(None))
            continue
        try:
            pattern = re.compile(parsed.group(2))
        except re.error as exc:
            raise ValueError(f"invalid pattern in ssl.principal.mapping.rules entry {entry!r}: {exc}") from None
        rules.append(Rule(pattern, parsed.group(3), parsed.group(4)))
    return rules


def principal_name(rules: list[Rule], dn: str) -> str:
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"no ssl.principal.mapping.rules entry applies to {dn!r}")
