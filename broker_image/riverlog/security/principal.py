"""Who a connection is: Kafka's principal, ``User:<name>``.

A connection nobody authenticated (PLAINTEXT, or TLS without a client certificate) is
``User:ANONYMOUS``, as in Kafka. A TLS client's certificate gives its subject's distinguished
name in RFC 2253 form (``CN=app,OU=ops,O=example``, most specific first, as Java prints it),
mapped by ``ssl.principal.mapping.rules``.
"""

from __future__ import annotations

from cryptography import x509

from .principal_mapping import Rule, principal_name

USER_TYPE = "User"
ANONYMOUS = f"{USER_TYPE}:ANONYMOUS"


def user(name: str) -> str:
    return f"{USER_TYPE}:{name}"


def certificate_dn(der: bytes) -> str:
    """The subject of a DER certificate as RFC 2253 names it (Java's X500Principal.getName())."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def certificate_principal(der: bytes | None, rules: list[Rule]) -> str:
    """The principal of a TLS peer: ANONYMOUS without a certificate, else its mapped DN
    (NoMatchingRule when no mapping rule applies: the client is not authenticated)."""
    if der is None:
        return ANONYMOUS
    return user(principal_name(rules, certificate_dn(der)))
