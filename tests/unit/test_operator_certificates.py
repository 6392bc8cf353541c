"""The operator's certificate authorities (issue #18): certificates it issues pass a real TLS
handshake (OpenSSL, in memory) for every name a client dials, a renewed CA's bundle verifies
both generations, and renewal is due inside the window, not before."""

from __future__ import annotations

import datetime
import os
import ssl
import tempfile
from pathlib import Path

import pytest
from riverlog_operator.certificates import (
    Issued,
    broker_dns_names,
    due_for_renewal,
    expiry_of,
    issue,
    new_ca,
    trust_bundle,
)

pytestmark = pytest.mark.unit

NOW = datetime.datetime.now(datetime.UTC)
YEAR = datetime.timedelta(days=365)
NAMES = broker_dns_names("events", "prod", 1, "events-brokers", "events-bootstrap")


def _handshake(server: Issued, trusted: bytes, hostname: str, client: Issued | None = None,
               clients_ca: bytes | None = None) -> None:
    """A TLS handshake between two in-memory ends; raises ssl.SSLError if either refuses."""
    with tempfile.TemporaryDirectory() as tmp:
        keystore = Path(tmp) / "server.pem"
        keystore.write_bytes(server.keystore_pem)
        os.chmod(keystore, 0o600)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(str(keystore))
        if clients_ca is not None:
            server_ctx.load_verify_locations(cadata=clients_ca.decode())
            server_ctx.verify_mode = ssl.CERT_REQUIRED
        client_ctx = ssl.create_default_context(cadata=trusted.decode())
        if client is not None:
            client_keystore = Path(tmp) / "client.pem"
            client_keystore.write_bytes(client.keystore_pem)
            client_ctx.load_cert_chain(str(client_keystore))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_end = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    server_end = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, end, out, peer_in in (("client", client_end, c_out, s_in), ("server", server_end, s_out, c_in)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            return
    raise AssertionError(f"the handshake did not finish: {done}")


def test_broker_certificates_verify_for_every_name_clients_dial() -> None:
    ca = new_ca("cluster-ca", "events", NOW)
    broker = issue(ca, "events-1", "events", NOW, YEAR, dns_names=NAMES, server=True)
    for hostname in ("events-1.events-brokers.prod.svc.cluster.local", "events-bootstrap.prod.svc",
                     "events-bootstrap"):
        _handshake(broker, ca.cert_pem, hostname)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(broker, ca.cert_pem, "events-2.events-brokers.prod.svc")  # another broker's name
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(broker, new_ca("other", "x", NOW).cert_pem, "events-bootstrap")  # an untrusted CA


def test_client_certificates_from_the_clients_ca_are_accepted_by_brokers() -> None:
    cluster_ca, clients_ca = new_ca("cluster-ca", "events", NOW), new_ca("clients-ca", "events", NOW)
    broker = issue(cluster_ca, "events-0", "events", NOW, YEAR, dns_names=NAMES, server=True)
    alice = issue(clients_ca, "alice", "events", NOW, YEAR)
    _handshake(broker, cluster_ca.cert_pem, "events-bootstrap", client=alice, clients_ca=clients_ca.cert_pem)
    mallory = issue(new_ca("rogue", "x", NOW), "alice", "events", NOW, YEAR)
    with pytest.raises(ssl.SSLError):
        _handshake(broker, cluster_ca.cert_pem, "events-bootstrap", client=mallory, clients_ca=clients_ca.cert_pem)


def test_a_renewed_ca_bundle_trusts_both_generations_while_the_old_one_is_valid() -> None:
    old = new_ca("cluster-ca", "events", NOW - datetime.timedelta(days=340))
    new = new_ca("cluster-ca", "events", NOW)
    old_broker = issue(old, "events-0", "events", NOW, YEAR, dns_names=NAMES, server=True)
    new_broker = issue(new, "events-0", "events", NOW, YEAR, dns_names=NAMES, server=True)
    bundle = trust_bundle(new, old.cert_pem, NOW)
    _handshake(old_broker, bundle, "events-bootstrap")  # brokers not yet renewed
    _handshake(new_broker, bundle, "events-bootstrap")
    # Once the old CA has expired it leaves the bundle.
    assert trust_bundle(new, old.cert_pem, NOW + datetime.timedelta(days=30)) == new.cert_pem


def test_a_ca_renewed_with_its_key_is_verified_by_clients_that_trust_only_the_old_certificate() -> None:
    """Why renewal keeps the key: a client that loaded the CA before the renewal (and never
    re-reads its truststore, like librdkafka) still accepts brokers re-issued under the renewed
    CA certificate, and the renewed certificate alone verifies brokers issued before it."""
    old = new_ca("cluster-ca", "events", NOW - datetime.timedelta(days=340))
    renewed = new_ca("cluster-ca", "events", NOW, key_pem=old.key_pem)
    assert renewed.not_after > old.not_after and renewed.cert_pem != old.cert_pem
    _handshake(issue(renewed, "events-0", "events", NOW, YEAR, dns_names=NAMES, server=True), old.cert_pem,
               "events-bootstrap")
    _handshake(issue(old, "events-0", "events", NOW, YEAR, dns_names=NAMES, server=True), renewed.cert_pem,
               "events-bootstrap")
    # A replaced CA (a new key) is not: such clients must load the new bundle first.
    replaced = new_ca("cluster-ca", "events", NOW)
    with pytest.raises(ssl.SSLError):
        _handshake(issue(replaced, "events-0", "events", NOW, YEAR, dns_names=NAMES, server=True), old.cert_pem,
                   "events-bootstrap")


def test_renewal_is_due_inside_the_window_and_issued_certificates_never_outlive_their_ca() -> None:
    ca = new_ca("cluster-ca", "events", NOW, validity=datetime.timedelta(days=40))
    assert not due_for_renewal(ca.cert_pem, NOW, datetime.timedelta(days=30))
    assert due_for_renewal(ca.cert_pem, NOW + datetime.timedelta(days=11), datetime.timedelta(days=30))
    assert due_for_renewal(ca.cert_pem, NOW + datetime.timedelta(days=41))  # expired
    broker = issue(ca, "events-0", "events", NOW, YEAR, dns_names=NAMES, server=True)
    assert expiry_of(broker.cert_pem) <= expiry_of(ca.cert_pem)
