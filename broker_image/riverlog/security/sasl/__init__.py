"""SASL mechanisms, each a pure state machine: tokens in, tokens out, a principal at the end.

``plain.py`` (PLAIN, RFC 4616), ``scram.py`` (SCRAM-SHA-256 and SCRAM-SHA-512, RFC 5802/7677),
``oauthbearer.py`` (OAUTHBEARER, RFC 7628, with JWTs checked by ``security/jwt_validator.py``).
The connection-level exchange (SaslHandshake, SaslAuthenticate, re-authentication) is in
``security/authenticator.py``.
"""
