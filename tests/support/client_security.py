"""One description of how a test client connects securely, spelled for each client library.

librdkafka (confluent-kafka, kcat), kafka-python, aiokafka and Java's kafka-clients each name
the same settings differently; tests describe them once (:class:`ClientSecurity`) and ask for
the spelling they need.

OAUTHBEARER (:class:`OAuthLogin`): an OAuth client id and secret at a token endpoint. librdkafka
fetches tokens itself (``sasl.oauthbearer.method=oidc``) or is handed them by ``oauth_cb``;
Java uses Kafka's OAuthBearerLoginCallbackHandler; kafka-python and aiokafka are given token
providers that fetch from the endpoint. ``fixed_token`` hands every client one given token
instead (an invalid one, in tests of refusals).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OAUTH_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OAUTH_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


@dataclass(frozen=True)
class OAuthLogin:
    token_url: str
    client_id: str
    client_secret: str
    librdkafka_method: str = "oidc"  # or "callback": oauth_cb, tokens fetched by the test
    fixed_token: str | None = None  # every client presents this token instead

    def fetch(self) -> tuple[str, float]:
        """(an access token, its expiry in epoch seconds) from the endpoint (client credentials)."""
        if self.fixed_token is not None:
            return self.fixed_token, time.time() + 3600
        basic = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        request = urllib.request.Request(
            self.token_url, data=urllib.parse.urlencode({"grant_type": "client_credentials"}).encode(),
            headers={"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (a test endpoint)
            answer = json.loads(response.read())
        return answer["access_token"], time.time() + float(answer["expires_in"])


def _kafka_python_provider(login: OAuthLogin) -> Any:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return login.fetch()[0]

    return Provider()


def _aiokafka_provider(login: OAuthLogin) -> Any:
    import asyncio

    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            token, _ = await asyncio.to_thread(login.fetch)
            return token

    return Provider()


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"  # SSL, SASL_PLAINTEXT, SASL_SSL
    ca: Path | None = None  # the CA that signs the broker's certificate
    cert: Path | None = None  # the client's certificate (mutual TLS)
    key: Path | None = None  # its private key (PKCS#8 PEM)
    keystore: Path | None = None  # key and certificate in one PEM file, for Java
    mechanism: str | None = None  # SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
    username: str = ""
    password: str = ""
    oauth: OAuthLogin | None = None  # OAUTHBEARER's login

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def librdkafka(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security.protocol": self.protocol.lower()}
        if self.ca:
            conf["ssl.ca.location"] = str(self.ca)
        if self.cert and self.key:
            conf["ssl.certificate.location"] = str(self.cert)
            conf["ssl.key.location"] = str(self.key)
        if self.oauth is not None:
            conf["sasl.mechanism"] = "OAUTHBEARER"
            login = self.oauth
            if login.librdkafka_method == "oidc" and login.fixed_token is None:
                conf.update({"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": login.client_id,
                             "sasl.oauthbearer.client.secret": login.client_secret,
                             "sasl.oauthbearer.token.endpoint.url": login.token_url})
            else:
                # librdkafka calls this for a token, with its sasl.oauthbearer.config (unused here),
                # and wants (token, expiry in epoch seconds).
                conf["oauth_cb"] = lambda _config: login.fetch()
        elif self.mechanism:
            conf.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                         "sasl.password": self.password})
        return conf

    def kcat_args(self) -> list[str]:
        settings = self.librdkafka()
        assert "oauth_cb" not in settings, "kcat fetches OAUTHBEARER tokens itself: use librdkafka_method='oidc'"
        return [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]

    def kcat_env(self, directory: Path) -> dict[str, str]:
        """kcat's environment. Debian's kcat links librdkafka 2.0.2, whose SCRAM client fails
        against any broker (Apache Kafka's too) under OpenSSL 3; for SCRAM it runs on the
        librdkafka that confluent-kafka ships."""
        if self.mechanism and self.mechanism.startswith("SCRAM"):
            return bundled_librdkafka_env(directory)
        return dict(os.environ)

    def kafka_python(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            conf.update(ssl_cafile=str(self.ca) if self.ca else None, ssl_check_hostname=True)
            if self.cert and self.key:
                conf.update(ssl_certfile=str(self.cert), ssl_keyfile=str(self.key))
        if self.oauth is not None:
            conf.update(sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=_kafka_python_provider(self.oauth))
        elif self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.password)
        return conf

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.cert and self.key:
            context.load_cert_chain(str(self.cert), str(self.key))
        return context

    def aiokafka(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            conf["ssl_context"] = self.ssl_context()
        if self.oauth is not None:
            conf.update(sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=_aiokafka_provider(self.oauth))
        elif self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.password)
        return conf

    def java_properties(self) -> dict[str, str]:
        props = {"security.protocol": self.protocol}
        if self.ca:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)})
        if self.keystore:
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore)})
        if self.oauth is not None:
            # Kafka 4.x's own OAuth client: client credentials at the token endpoint (the JVM must
            # also allow the URL: org.apache.kafka.sasl.oauthbearer.allowed.urls).
            props.update({"sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": OAUTH_LOGIN_HANDLER,
                          "sasl.oauthbearer.token.endpoint.url": self.oauth.token_url,
                          "sasl.jaas.config": f'{OAUTH_LOGIN_MODULE} required clientId="{self.oauth.client_id}" '
                                              f'clientSecret="{self.oauth.client_secret}";'})
        elif self.mechanism:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            props.update({"sasl.mechanism": self.mechanism,
                          "sasl.jaas.config": f'{module} required username="{self.username}" '
                                              f'password="{self.password}";'})
        return props


    def write_java_properties(self, path: Path) -> Path:
        """A ``--command-config`` file for Kafka's CLI tools."""
        path.write_text("".join(f"{k}={v}\n" for k, v in self.java_properties().items()))
        return path


PLAINTEXT = ClientSecurity()


def bundled_librdkafka_env(directory: Path) -> dict[str, str]:
    """An environment in which kcat runs on the librdkafka 2.16 confluent-kafka's wheel bundles
    (a ``librdkafka.so.1`` symlink in ``directory`` first on LD_LIBRARY_PATH): Debian's kcat
    1.7.1 links the system's 2.0.2, whose SCRAM fails under OpenSSL 3 and which has no OIDC.
    librdkafka keeps its C ABI, so the same kcat binary works on either."""
    import confluent_kafka

    bundled = sorted((Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs").glob("librdkafka*.so*"))
    assert bundled, "confluent-kafka's wheel ships no librdkafka"
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / "librdkafka.so.1"
    if not link.exists():
        with contextlib.suppress(FileExistsError):
            link.symlink_to(bundled[0])
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(directory), env.get("LD_LIBRARY_PATH", "")) if p)
    return env
