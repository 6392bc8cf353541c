"""HTTP basic authentication as Confluent's registry does it (Jetty's): users, passwords and roles
from a Jetty property file, and the decision for one request's ``Authorization`` header.

A users file holds one user a line, as Jetty's ``PropertyUserStore`` reads it::

    # user: password[,role ...]
    alice: alice-secret,admin
    bob: MD5:639bae9ac6b3e1a84cebb7b403297b79,developer     # the password "you"
    carol: OBF:1v2j1uum1xtv1zej1zer1xtn1uvk1v1v,reader      # "password"
    dave: CRYPT:daImzLL/Xi2tY,admin                         # "dave-secret"

Passwords are plain, ``MD5:`` (hex MD5 of the password), ``OBF:`` (Jetty's reversible
obfuscation, not a protection) or ``CRYPT:`` (Unix DES crypt, salted by its first two
characters; needs Python's ``crypt`` module, present up to Python 3.12). Confluent's route to the
file is a JAAS file whose section named after the realm holds
``org.eclipse.jetty.jaas.spi.PropertyFileLoginModule`` with ``file="..."``;
:func:`users_file_from_jaas` reads that. Parsing is pure; the caller reads the files.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..security.jaas import parse_jaas

PROPERTY_FILE_MODULE = "org.eclipse.jetty.jaas.spi.PropertyFileLoginModule"
ANY_ROLE = "*"


class UsersFileError(ValueError):
    """A users or JAAS file that cannot be used; the message names the line and the fix."""


@dataclass(frozen=True)
class Credential:
    """A stored password in one of Jetty's forms; :meth:`matches` compares in constant time."""

    kind: str  # "", "MD5", "OBF" or "CRYPT"
    stored: str

    def matches(self, password: str) -> bool:
        if self.kind == "MD5":
            offered = hashlib.md5(password.encode(), usedforsecurity=False).hexdigest()
            return hmac.compare_digest(offered, self.stored.lower())
        if self.kind == "CRYPT":
            return hmac.compare_digest(_crypt()(password, self.stored), self.stored)
        plain = deobfuscate(self.stored) if self.kind == "OBF" else self.stored
        return hmac.compare_digest(password.encode(), plain.encode())


@dataclass(frozen=True)
class User:
    name: str
    credential: Credential
    roles: frozenset[str]


def deobfuscate(text: str) -> str:
    """Jetty's ``Password.deobfuscate``: groups of four base-36 digits, one byte each (``U`` marks
    a byte written as-is, for non-ASCII input)."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "U":
            i += 1
            out.append((int(text[i:i + 4], 36) >> 8) & 0xFF)
        else:
            value = int(text[i:i + 4], 36)
            out.append(((value // 256 + value % 256 - 254) // 2) & 0xFF)
        i += 4
    return out.decode("utf-8", errors="replace")


def _crypt() -> Callable[[str, str], str]:
    with warnings.catch_warnings():  # deprecated in 3.11, gone in 3.13: refused at load there
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    return crypt.crypt


def _credential(text: str, where: str) -> Credential:
    for kind in ("MD5", "OBF", "CRYPT"):
        if text.startswith(kind + ":"):
            stored = text[len(kind) + 1:]
            if kind == "MD5" and not re.fullmatch(r"[0-9a-fA-F]{32}", stored):
                raise UsersFileError(f"{where}: an MD5: password is 32 hex digits")
            if kind == "OBF":
                try:
                    deobfuscate(stored)
                except ValueError:
                    raise UsersFileError(f"{where}: not a Jetty OBF: password") from None
            if kind == "CRYPT":
                try:
                    _crypt()
                except ImportError:
                    raise UsersFileError(f"{where}: CRYPT: passwords need Python's crypt module, which this "
                                         "Python lacks; use an MD5: password") from None
            return Credential(kind, stored)
    return Credential("", text)


def parse_users(text: str, source: str = "the users file") -> dict[str, User]:
    """``user: password[,role,...]`` lines (``=`` works as well as ``:``; ``#`` and ``!`` comments)."""
    users: dict[str, User] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        where = f"{source} line {number}"
        match = re.match(r"([^:=\s]+)\s*[:=]\s*(.*)$", line)
        if match is None or not match.group(2).strip():
            raise UsersFileError(f"{where}: expected 'user: password[,role,...]'")
        name, rest = match.group(1), match.group(2)
        password, *roles = [part.strip() for part in rest.split(",")]
        if not password:
            raise UsersFileError(f"{where}: user {name} has an empty password")
        users[name] = User(name, _credential(password, where), frozenset(r for r in roles if r))
    return users


def users_file_from_jaas(text: str, realm: str, source: str = "the JAAS file") -> str:
    """The ``file`` option of the realm's ``PropertyFileLoginModule`` entry in a JAAS file::

        SchemaRegistry-Props {
          org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required
          file="/etc/schema-registry/password-file";
        };
    """
    text = re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)
    sections = {m.group(1): m.group(2) for m in re.finditer(r"([\w.\-]+)\s*\{(.*?)\}\s*;", text, flags=re.DOTALL)}
    if realm not in sections:
        named = ", ".join(sections) or "none"
        raise UsersFileError(f"{source} has no section named after authentication.realm={realm} (sections: {named})")
    for entry_text in _entries(sections[realm]):
        try:
            entry = parse_jaas(entry_text)
        except ValueError as exc:
            raise UsersFileError(f"{source}, section {realm}: {exc}") from None
        if entry.module == PROPERTY_FILE_MODULE:
            if not entry.options.get("file"):
                raise UsersFileError(f"{source}, section {realm}: {PROPERTY_FILE_MODULE} needs file=\"...\"")
            return entry.options["file"]
    raise UsersFileError(f"{source}, section {realm}: Riverlog reads users with {PROPERTY_FILE_MODULE} only "
                         "(no other login module is supported)")


def _entries(body: str) -> Iterable[str]:
    """A section's login module entries, each ended by ``;`` outside quotes."""
    start, quoted = 0, False
    for i, ch in enumerate(body):
        if ch == '"' and (i == 0 or body[i - 1] != "\\"):
            quoted = not quoted
        elif ch == ";" and not quoted:
            yield body[start:i + 1]
            start = i + 1


@dataclass(frozen=True)
class Decision:
    status: int  # 200 allowed, 401 no or wrong credentials, 403 a user without an allowed role
    user: str = ""


class BasicAuthenticator:
    """Who a request's ``Authorization`` header names, and whether a role lets them in."""

    def __init__(self, users: dict[str, User], roles: Iterable[str], realm: str) -> None:
        self.users = users
        self.roles = frozenset(roles)
        self.realm = realm
        # Checked for unknown users too, so a wrong name costs as long as a wrong password.
        self._decoy = Credential("", "riverlog-no-such-user")

    def decide(self, header: str | None) -> Decision:
        if not header or header[:6].lower() != "basic ":
            return Decision(401)
        try:
            name, _, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return Decision(401)
        user = self.users.get(name)
        matched = (user.credential if user is not None else self._decoy).matches(password)
        if user is None or not matched:
            return Decision(401)
        if ANY_ROLE in self.roles or user.roles & self.roles:
            return Decision(200, name)
        return Decision(403, name)

    def challenge(self) -> str:
        return f'Basic realm="{self.realm}"'
