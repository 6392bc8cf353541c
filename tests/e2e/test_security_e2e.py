"""Issue #18's e2e scenarios: a secured Cluster run by the chart's operator on the test node, with
its applications as ``User`` resources whose credentials reach client Pods through Secrets.

In order, on one installation: a Cluster with a TLS+SCRAM listener, a mutual-TLS listener and
authorization, Topics created through the operator's own credentials; a SCRAM User and a TLS
User with ACLs produce and consume from Pods, a User without ACLs is denied (1); a User with a
produce quota is throttled to it while one without is not (3); both CAs, made with a short
validity, are renewed while an acks=all producer runs, the brokers serve the renewed
certificates without a restart and nothing acknowledged is lost (1); deleting the Users revokes
their access (1). Clients print ``TAG {json}`` lines (``pod_clients``); the test reads them.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from chart_install import install_chart
from node_agent.agent import NodeAgent
from pod_clients import LOAD, ClientPod, clean_result
from support.kube import KubeCluster, wait_until

pytestmark = pytest.mark.e2e

WAIT = 300.0
CLUSTER = "secure"
TOPIC = "payments"
BULK = "bulk"
SCRAM_PORT, MTLS_PORT = 9094, 9095
QUOTA = 32 * 1024  # bytes/s: the bulk User's produce quota
CA_DIR, USER_DIR = "/etc/riverlog-ca", "/etc/riverlog-user"

# Produce (acks=all, idempotent) and/or consume ``count`` records; report what was acknowledged
# and read, and every error name librdkafka raised (authentication and authorization failures).
ACCESS = r"""
import json, os, sys, time, uuid
from confluent_kafka import Consumer, KafkaException, Producer
bootstrap, topic, mode, count, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
group = sys.argv[6] if len(sys.argv) > 6 else "none"
conf = {**json.loads(os.environ.get("KAFKA_CONFIG") or "{}"), "bootstrap.servers": bootstrap}
errors, out = set(), {"acked": 0, "consumed": 0}
FATAL = ("_AUTHENTICATION", "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
         "CLUSTER_AUTHORIZATION_FAILED", "SASL_AUTHENTICATION_FAILED")
def on_error(err):
    errors.add(err.name())
deadline = time.monotonic() + seconds
if mode in ("produce", "both"):
    acked = []
    def done(err, msg):
        if err is None:
            acked.append(1)
        else:
            errors.add(err.name())
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True, "error_cb": on_error,
                         "message.timeout.ms": int(seconds * 1000)})
    try:
        for i in range(count):
            producer.produce(topic, value=f"{topic}-{i}".encode(), on_delivery=done)
        while len(producer) and time.monotonic() < deadline and not (errors & set(FATAL)):
            producer.poll(0.5)
        producer.flush(1)
    except KafkaException as exc:  # a fatal error (e.g. no right to an idempotent producer id)
        errors.add(exc.args[0].name())
    out["acked"] = len(acked)
if mode in ("consume", "both"):
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "error_cb": on_error})
    consumer.subscribe([topic])
    seen = set()
    try:
        while len(seen) < count and time.monotonic() < deadline and not (errors & set(FATAL)):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.add(msg.error().name())
                continue
            seen.add((msg.partition(), msg.offset()))
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        errors.add(exc.args[0].name())
    out["consumed"] = len(seen)
    consumer.close()
out["errors"] = sorted(errors)
print("ACCESS", json.dumps(out, sort_keys=True), flush=True)
"""

# Produce 1 KiB records offering ``rate`` bytes/s for ``seconds``; report the acknowledged bytes
# after a warm-up (a quota's first window lets a burst through) and the longest throttle time
# the brokers asked for (librdkafka's statistics).
THROTTLE = r"""
import json, os, sys, time
from confluent_kafka import Producer
bootstrap, topic, rate = sys.argv[1], sys.argv[2], int(sys.argv[3])
seconds, warm_up = float(sys.argv[4]), float(sys.argv[5])
conf = {**json.loads(os.environ.get("KAFKA_CONFIG") or "{}"), "bootstrap.servers": bootstrap}
throttle = [0]
def stats(text):
    for b in json.loads(text).get("brokers", {}).values():
        throttle[0] = max(throttle[0], (b.get("throttle") or {}).get("max", 0))
acks = []
producer = Producer({**conf, "acks": "all", "linger.ms": 5, "statistics.interval.ms": 500, "stats_cb": stats})
value = b"x" * 1024
start = time.monotonic()
sent = 0
while time.monotonic() - start < seconds:
    while sent < int((time.monotonic() - start) * rate / len(value)):
        try:
            producer.produce(topic, value=value,
                             on_delivery=lambda e, m: acks.append(time.monotonic()) if e is None else None)
        except BufferError:
            break
        sent += 1
    producer.poll(0.05)
producer.flush(60)
end = time.monotonic()
measured = [t for t in acks if t >= start + warm_up]
print("RATE", json.dumps({"bytes_per_s": len(measured) * len(value) / (end - start - warm_up),
                          "acked": len(acks), "throttle_max_ms": throttle[0]}), flush=True)
"""

# Every broker's certificate as served on its TLS port, verified against the mounted CA bundle
# (re-read each round); until each expires at least ``min_days`` from now, or time is up.
CERTS = r"""
import json, os, socket, ssl, sys, time
cluster, ns, port, brokers = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
min_days, seconds = float(sys.argv[6]), float(sys.argv[7])
deadline = time.monotonic() + seconds
while True:
    ctx = ssl.create_default_context(cafile=os.environ["CA_FILE"])
    days = {}
    for i in range(brokers):
        host = f"{cluster}-{i}.{cluster}-brokers.{ns}.svc"
        try:
            with socket.create_connection((host, port), timeout=10) as raw, \
                    ctx.wrap_socket(raw, server_hostname=host) as tls:
                days[host] = (ssl.cert_time_to_seconds(tls.getpeercert()["notAfter"]) - time.time()) / 86400
        except Exception as exc:
            days[host] = repr(exc)
    print("CERTS", json.dumps({"t": time.time(), "days": days}), flush=True)
    done = all(isinstance(d, float) and d >= min_days for d in days.values())
    if done or time.monotonic() > deadline:
        print("FINAL", json.dumps({"renewed": done, "days": days}), flush=True)
        break
    time.sleep(2)
"""


def get(kube: KubeCluster, kind: str, name: str, ns: str) -> dict[str, Any] | None:
    proc = kube.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def ready(obj: dict[str, Any] | None) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


def secret_data(kube: KubeCluster, name: str, ns: str) -> dict[str, str]:
    secret = get(kube, "secret", name, ns) or {}
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def user(name: str, auth: str, acls: list[dict[str, Any]], quotas: dict[str, int] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterRef": {"name": CLUSTER}, "authentication": {"type": auth},
                            "authorization": {"acls": acls}}
    if quotas:
        spec["quotas"] = quotas
    return {"apiVersion": "riverlog.dev/v1alpha1", "kind": "User", "metadata": {"name": name}, "spec": spec}


def topic_acl(name: str, *operations: str) -> dict[str, Any]:
    return {"resource": {"type": "topic", "name": name, "patternType": "literal"}, "operations": list(operations)}


def group_acl(prefix: str) -> dict[str, Any]:
    return {"resource": {"type": "group", "name": prefix, "patternType": "prefix"}, "operations": ["Read"]}


@dataclass
class Secured:
    kube: KubeCluster
    node: NodeAgent | None
    ns: str

    def bootstrap(self, port: int) -> str:
        return f"{CLUSTER}-bootstrap.{self.ns}.svc:{port}"

    def _ca_volume(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        # What every client trusts: the cluster CA bundle the operator publishes (no private key).
        return ([{"name": "cluster-ca", "secret": {"secretName": f"{CLUSTER}-cluster-ca-cert"}}],
                [{"name": "cluster-ca", "mountPath": CA_DIR, "readOnly": True}])

    def scram_client(self, pod: str, username: str, script: str, *args: str,
                     password: str | None = None) -> ClientPod:
        """A pod authenticating as ``username`` with the password from the User's Secret (or the
        one given, to show a deleted User's password no longer works)."""
        volumes, mounts = self._ca_volume()
        secret_ref = {"valueFrom": {"secretKeyRef": {"name": username, "key": "password"}}}
        env = [{"name": "PASSWORD", **({"value": password} if password is not None else secret_ref)},
               {"name": "KAFKA_CONFIG", "value": json.dumps({
                   "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": username,
                   "sasl.password": "$(PASSWORD)", "ssl.ca.location": f"{CA_DIR}/ca.crt"})}]
        return ClientPod(self.kube, self.node, self.ns, pod, script, [self.bootstrap(SCRAM_PORT), *args],
                         env=env, volumes=volumes, mounts=mounts)

    def tls_client(self, pod: str, secret: str, script: str, *args: str) -> ClientPod:
        """A pod authenticating with the client certificate of a TLS User's Secret (``secret``)."""
        volumes, mounts = self._ca_volume()
        volumes.append({"name": "user", "secret": {"secretName": secret}})
        mounts.append({"name": "user", "mountPath": USER_DIR, "readOnly": True})
        env = [{"name": "KAFKA_CONFIG", "value": json.dumps({
            "security.protocol": "SSL", "ssl.ca.location": f"{CA_DIR}/ca.crt",
            "ssl.certificate.location": f"{USER_DIR}/user.crt", "ssl.key.location": f"{USER_DIR}/user.key"})}]
        return ClientPod(self.kube, self.node, self.ns, pod, script, [self.bootstrap(MTLS_PORT), *args],
                         env=env, volumes=volumes, mounts=mounts)

    def cert_checker(self, pod: str, min_days: float, seconds: float) -> ClientPod:
        volumes, mounts = self._ca_volume()
        return ClientPod(self.kube, self.node, self.ns, pod, CERTS,
                         ["-", CLUSTER, self.ns, str(SCRAM_PORT), "3", str(min_days), str(seconds)],
                         env=[{"name": "CA_FILE", "value": f"{CA_DIR}/ca.crt"}], volumes=volumes, mounts=mounts)

    def access(self, client: ClientPod, timeout: float = 240.0) -> dict[str, Any]:
        found: dict[str, Any] = client.wait_for("ACCESS", timeout)
        return found

    def cluster(self) -> dict[str, Any] | None:
        return get(self.kube, "cluster", CLUSTER, self.ns)

    def ca_not_after(self) -> dict[str, str]:
        status = (self.cluster() or {}).get("status") or {}
        return {k: v.get("notAfter", "") for k, v in (status.get("certificateAuthorities") or {}).items()}


@pytest.fixture(scope="module")
def sec(kube: KubeCluster, node: NodeAgent | None) -> Iterator[Secured]:
    ns = kube.namespace("e2e-security")
    install_chart(kube, "riverlog-sec", ns)
    yield Secured(kube, node, ns)
    # Stop the brokers for the tiers and modules after this one.
    kube.kubectl("delete", "cluster", CLUSTER, "-n", ns, "--timeout=180s", "--ignore-not-found", check=False)


def test_users_with_acls_produce_and_consume_from_pods_and_a_user_without_is_denied(sec: Secured) -> None:
    kube, ns = sec.kube, sec.ns
    cluster = {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": CLUSTER},
               "spec": {"replicas": 3, "storage": {"size": "1Gi", "deleteClaim": True},
                        "listeners": [
                            {"name": "SCRAM", "port": SCRAM_PORT, "tls": True,
                             "authentication": {"type": "scram-sha-512"}},
                            {"name": "MTLS", "port": MTLS_PORT, "tls": True, "authentication": {"type": "tls"}}],
                        "authorization": {"superUsers": []},
                        # A short-lived CA (the shortest the CRD takes), renewed by the last scenario.
                        "certificateAuthority": {"validityDays": 2, "renewalDays": 1},
                        "config": {"default.replication.factor": 3, "min.insync.replicas": 2}}}
    topics = [{"apiVersion": "riverlog.dev/v1alpha1", "kind": "Topic", "metadata": {"name": name},
               "spec": {"clusterRef": {"name": CLUSTER}, "partitions": partitions, "replicationFactor": 3,
                        "config": {"min.insync.replicas": 2}}} for name, partitions in ((TOPIC, 3), (BULK, 1))]
    users = [user("shop", "scram-sha-512", [topic_acl(TOPIC, "Read", "Write", "Describe"), group_acl("shop-"),
                                             group_acl("verify-")]),
             user("audit", "tls", [topic_acl(TOPIC, "Read", "Describe"), group_acl("audit-")]),
             user("stranger", "scram-sha-512", []),
             user("bulk", "scram-sha-512", [topic_acl(BULK, "Write", "Describe")], {"producerByteRate": QUOTA}),
             user("free", "scram-sha-512", [topic_acl(BULK, "Write", "Describe")])]
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": [cluster, *topics, *users]}))
    wait_until(lambda: ready(sec.cluster()), WAIT, "the secured Cluster Ready")
    # Topics and Users are created through the operator's own certificate: nobody else may.
    for kind, name in [("topic", TOPIC), ("topic", BULK)] + [("user", u["metadata"]["name"]) for u in users]:
        wait_until(lambda kind=kind, name=name: ready(get(kube, kind, name, ns)), WAIT, f"{kind} {name} Ready")
    assert set(secret_data(kube, "audit", ns)) >= {"user.crt", "user.key", "ca.crt"}
    assert set(secret_data(kube, "shop", ns)) >= {"password", "sasl.jaas.config"}

    shop = sec.access(sec.scram_client("shop-client", "shop", ACCESS, TOPIC, "both", "300", "120", "shop-e2e"))
    assert shop == {"acked": 300, "consumed": 300, "errors": []}, shop
    audit = sec.access(sec.tls_client("audit-client", "audit", ACCESS, TOPIC, "consume", "300", "120", "audit-e2e"))
    assert audit == {"acked": 0, "consumed": 300, "errors": []}, audit
    # The TLS User may read but not write.
    audit_writes = sec.access(sec.tls_client("audit-writer", "audit", ACCESS, TOPIC, "produce", "5", "30"))
    assert audit_writes["acked"] == 0 and any("AUTHORIZATION_FAILED" in e for e in audit_writes["errors"]), audit_writes
    stranger = sec.access(sec.scram_client("stranger-client", "stranger", ACCESS, TOPIC, "both", "5", "30",
                                           "shop-stranger"))
    assert stranger["acked"] == 0 and stranger["consumed"] == 0, stranger
    assert any("AUTHORIZATION_FAILED" in e for e in stranger["errors"]), stranger
    assert not any("AUTHENTICATION" in e for e in stranger["errors"]), stranger  # known, just not allowed


def test_a_user_with_a_produce_quota_is_throttled_to_it(sec: Secured) -> None:
    offered = 4 * QUOTA
    bulk = sec.scram_client("bulk-client", "bulk", THROTTLE, BULK, str(offered), "12", "4")
    free = sec.scram_client("free-client", "free", THROTTLE, BULK, str(offered), "12", "4")
    limited, unlimited = bulk.wait_for("RATE", 240), free.wait_for("RATE", 240)
    print(f"quota {QUOTA} B/s, offered {offered} B/s: bulk (limited) {limited}, free {unlimited}")
    # The brokers told the limited producer to back off and its rate stayed near its quota; the
    # other, offering the same, got what it offered and was never throttled.
    assert limited["throttle_max_ms"] > 0, limited
    assert limited["bytes_per_s"] <= 1.5 * QUOTA, limited
    assert unlimited["throttle_max_ms"] == 0, unlimited
    assert unlimited["bytes_per_s"] >= 0.8 * offered, unlimited


def test_short_lived_cas_are_renewed_under_an_acks_all_producer_with_nothing_lost(sec: Secured) -> None:
    kube, ns = sec.kube, sec.ns
    before = sec.ca_not_after()
    assert set(before) == {"cluster", "clients"}, before
    for when in before.values():  # made with the short validity asked for
        left = datetime.datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC) \
            - datetime.datetime.now(datetime.UTC)
        assert left < datetime.timedelta(days=2, minutes=1), before
    audit_cert = secret_data(kube, "audit", ns)["user.crt"]
    pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in json.loads(kube.kubectl(
        "get", "pods", "-n", ns, "-l", f"riverlog.dev/cluster={CLUSTER}", "-o", "json").stdout)["items"]}
    assert len(pods) == 3, pods

    load = sec.scram_client("load-renewal", "shop", LOAD, TOPIC, "600", "100")
    wait_until(lambda: (load.log().last("PROGRESS") or {}).get("acked", 0) > 200, WAIT, "records acknowledged")
    # Both CAs (two days left) now fall inside the renewal window: the operator renews them as
    # it would a day before expiry, for 30 days, keeping their keys.
    kube.kubectl("patch", "cluster", CLUSTER, "-n", ns, "--type=merge", "-p", json.dumps(
        {"spec": {"certificateAuthority": {"validityDays": 30, "renewalDays": 29}}}))
    wait_until(lambda: all(sec.ca_not_after().get(k, "") > before[k] for k in before), WAIT,
               "both CAs renewed in the Cluster's status")
    # Every broker serves its re-issued certificate, reloaded from the updated Secret volume.
    checked = sec.cert_checker("cert-check", 20, 240).finish()
    final = checked.last("FINAL")
    assert final["renewed"], final
    wait_until(lambda: secret_data(kube, "audit", ns)["user.crt"] != audit_cert, WAIT,
               "the TLS User's certificate re-issued under the renewed clients CA")
    # The producer kept going past the renewal, then checks every record it had acknowledged.
    acked_then = (load.log().last("PROGRESS") or {}).get("acked", 0)
    wait_until(lambda: (load.log().last("PROGRESS") or {}).get("acked", 0) > acked_then + 300, WAIT,
               "records acknowledged after the renewal")
    load.stop()
    result = load.finish().last("RESULT")
    print(f"CA renewal: before {before}, after {sec.ca_not_after()}; certificates served {final['days']}; "
          f"load result {result}")
    assert clean_result(result) == [], result
    # No broker was restarted for it.
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in json.loads(kube.kubectl(
        "get", "pods", "-n", ns, "-l", f"riverlog.dev/cluster={CLUSTER}", "-o", "json").stdout)["items"]}
    assert now == pods
    # New clients, trusting the renewed bundle, with the re-issued client certificate, work.
    audit = sec.access(sec.tls_client("audit-after", "audit", ACCESS, TOPIC, "consume", "300", "120", "audit-renewed"))
    assert audit["consumed"] >= 300 and audit["errors"] == [], audit


def test_deleting_users_revokes_their_access(sec: Secured) -> None:
    kube, ns = sec.kube, sec.ns
    password = secret_data(kube, "shop", ns)["password"]
    audit_files = secret_data(kube, "audit", ns)
    kube.kubectl("delete", "user", "shop", "audit", "-n", ns, "--timeout=120s")
    wait_until(lambda: get(kube, "secret", "shop", ns) is None and get(kube, "secret", "audit", ns) is None, WAIT,
               "the Users' Secrets deleted")
    # The SCRAM credential is gone: the old password no longer authenticates.
    shop = sec.access(sec.scram_client("shop-revoked", "shop", ACCESS, TOPIC, "produce", "5", "60",
                                       password=password))
    assert shop["acked"] == 0 and any("AUTHENTICATION" in e for e in shop["errors"]), shop
    # A certificate cannot be taken back before it expires, but its ACLs are gone: a copy of
    # the deleted TLS User's Secret still connects and is refused everything.
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "audit-copy"}, "type": "Opaque",
         "stringData": audit_files}))
    audit = sec.access(sec.tls_client("audit-revoked", "audit-copy", ACCESS, TOPIC, "consume", "5", "60",
                                      "audit-revoked"))
    assert audit["consumed"] == 0 and any("AUTHORIZATION_FAILED" in e for e in audit["errors"]), audit

