"""The k8s tier's control plane itself: what the operator and chart tests rely on it doing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import kube_build
from support.kube import KubeCluster, KubeStartError, wait_until

pytestmark = pytest.mark.k8s

# A CRD of this test's own group, so it cannot collide with the project's CRDs in the session.
CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.kube-infra.test.riverlog.dev
spec:
  group: kube-infra.test.riverlog.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gdg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [partitions]
            x-kubernetes-validations:
            - rule: "self.maxSize >= self.minSize"
              message: "maxSize must not be below minSize"
            properties:
              minSize: {type: integer, default: 1}
              maxSize: {type: integer, default: 10}
              partitions:
                type: integer
                minimum: 1
                x-kubernetes-validations:
                - rule: "self >= oldSelf"
                  message: "partitions may not decrease"
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


def gadget(namespace: str, name: str, **spec: int) -> str:
    return json.dumps({
        "apiVersion": "kube-infra.test.riverlog.dev/v1",
        "kind": "Gadget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })


def get_json(kube: KubeCluster, *args: str) -> Any:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


def test_api_server_answers_with_the_built_version(kube: KubeCluster) -> None:
    assert kube.kubectl("get", "--raw", "/readyz").stdout == "ok"
    versions = json.loads(kube.kubectl("version", "-o", "json").stdout)
    assert versions["serverVersion"]["gitVersion"] == kube_build.K8S_VERSION
    assert versions["clientVersion"]["gitVersion"] == kube_build.K8S_VERSION
    # The admin really is cluster-admin under RBAC.
    assert kube.kubectl("auth", "can-i", "*", "*", "--all-namespaces").stdout.strip() == "yes"


def test_rbac_is_enforced_for_other_users(kube: KubeCluster) -> None:
    namespace = kube.namespace("rbac")
    # A ServiceAccount without bindings may not list Secrets; impersonation asks the authorizer.
    kube.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    user = f"system:serviceaccount:{namespace}:nobody"
    proc = kube.kubectl("auth", "can-i", "list", "secrets", "-n", namespace, "--as", user, check=False)
    assert proc.stdout.strip() == "no"
    kube.kubectl("create", "role", "read-secrets", "--verb=list", "--resource=secrets", "-n", namespace)
    kube.kubectl("create", "rolebinding", "nobody-reads", "--role=read-secrets",
                 f"--serviceaccount={namespace}:nobody", "-n", namespace)
    assert kube.kubectl("auth", "can-i", "list", "secrets", "-n", namespace, "--as", user).stdout.strip() == "yes"


def test_namespace_is_created_and_usable_from_the_python_client(kube: KubeCluster) -> None:
    from kubernetes import client

    namespace = kube.namespace("Some_Prefix")
    assert namespace.startswith("some-prefix-")
    with kube.api_client() as api:
        core = client.CoreV1Api(api)
        status = core.read_namespace(namespace).status
        assert status is not None and status.phase == "Active"
        accounts = core.list_namespaced_service_account(namespace).items
    names = [sa.metadata.name for sa in accounts if sa.metadata is not None]
    assert "default" in names
    assert kube.namespace("Some_Prefix") != namespace


def test_crd_with_cel_rules_applies_and_rejects_invalid_objects(kube: KubeCluster) -> None:
    kube.kubectl("apply", "-f", "-", input=CRD)
    kube.kubectl("wait", "--for=condition=Established", "crd/gadgets.kube-infra.test.riverlog.dev",
                 "--timeout=60s")
    namespace = kube.namespace("crd")

    kube.kubectl("apply", "-f", "-", input=gadget(namespace, "ok", partitions=3))
    created = get_json(kube, "gdg", "ok", "-n", namespace)
    assert created["spec"] == {"partitions": 3, "minSize": 1, "maxSize": 10}  # schema defaults applied

    # A rule on an object (CEL, x-kubernetes-validations) refuses the create.
    bad = kube.kubectl("apply", "-f", "-", input=gadget(namespace, "bad", partitions=1, minSize=5, maxSize=2),
                       check=False)
    assert bad.returncode != 0
    assert "maxSize must not be below minSize" in bad.stderr
    assert kube.kubectl("get", "gadget", "bad", "-n", namespace, check=False).returncode != 0

    # OpenAPI validation (minimum) still applies next to the CEL rules.
    zero = kube.kubectl("apply", "-f", "-", input=gadget(namespace, "zero", partitions=0), check=False)
    assert zero.returncode != 0
    assert "spec.partitions" in zero.stderr

    # A transition rule compares with the stored object: growing is fine, shrinking is refused.
    kube.kubectl("apply", "-f", "-", input=gadget(namespace, "ok", partitions=5))
    shrink = kube.kubectl("apply", "-f", "-", input=gadget(namespace, "ok", partitions=4), check=False)
    assert shrink.returncode != 0
    assert "partitions may not decrease" in shrink.stderr
    assert get_json(kube, "gadget", "ok", "-n", namespace)["spec"]["partitions"] == 5

    # The status subresource is separate: a spec apply never changes status.
    kube.kubectl("patch", "gadget", "ok", "-n", namespace, "--subresource=status", "--type=merge",
                 "-p", '{"status": {"seen": true}}')
    assert get_json(kube, "gadget", "ok", "-n", namespace)["status"] == {"seen": True}


STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: web, namespace: {namespace}}}
spec:
  serviceName: web
  replicas: 2
  # OrderedReady would create web-1 only once web-0 is Ready, which it never is without a kubelet.
  podManagementPolicy: Parallel
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: main
        image: registry.invalid/never-pulled:1
        volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Gi}}}}
"""


def test_statefulset_controller_creates_pods_and_claims(kube: KubeCluster) -> None:
    namespace = kube.namespace("sts")
    kube.kubectl("apply", "-f", "-", input=STATEFULSET.format(namespace=namespace))
    sts_uid = get_json(kube, "statefulset", "web", "-n", namespace)["metadata"]["uid"]

    def names(kind: str) -> list[str]:
        return sorted(item["metadata"]["name"] for item in get_json(kube, kind, "-n", namespace)["items"])

    assert wait_until(lambda: names("pods") == ["web-0", "web-1"], 60, "pods of the StatefulSet")
    assert wait_until(lambda: names("pvc") == ["data-web-0", "data-web-1"], 60, "claims of the StatefulSet")
    pod = get_json(kube, "pod", "web-0", "-n", namespace)
    assert pod["metadata"]["ownerReferences"][0]["uid"] == sts_uid
    assert pod["status"]["phase"] == "Pending"  # no scheduler, no kubelet
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data-web-0"

    # Scaling the StatefulSet is seen by the controller too (through the scale subresource).
    kube.kubectl("scale", "statefulset", "web", "--replicas=3", "-n", namespace)
    assert wait_until(lambda: names("pods") == ["web-0", "web-1", "web-2"], 60, "pod of the scale-up")


def test_deleting_an_owner_cascades_to_owned_objects(kube: KubeCluster) -> None:
    namespace = kube.namespace("gc")
    kube.kubectl("create", "configmap", "owner", "-n", namespace, "--from-literal=role=owner")
    owner = get_json(kube, "configmap", "owner", "-n", namespace)
    owned = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "owned",
            "namespace": namespace,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"],
            }],
        },
        "data": {"role": "owned"},
    }
    kube.kubectl("apply", "-f", "-", input=json.dumps(owned))
    kube.kubectl("create", "configmap", "bystander", "-n", namespace)

    kube.kubectl("delete", "configmap", "owner", "-n", namespace, "--wait=true")

    def remaining() -> list[str]:
        return sorted(item["metadata"]["name"] for item in get_json(kube, "configmaps", "-n", namespace)["items"])

    # kube-root-ca.crt is published into every namespace by the controller-manager.
    assert wait_until(lambda: remaining() == ["bystander", "kube-root-ca.crt"], 60,
                      "garbage collection of the owned ConfigMap")


def test_a_pod_marked_ready_lets_an_ordered_rollout_go_on(kube: KubeCluster) -> None:
    namespace = kube.namespace("ordered")
    ordered = STATEFULSET.format(namespace=namespace).replace("podManagementPolicy: Parallel",
                                                             "podManagementPolicy: OrderedReady")
    kube.kubectl("apply", "-f", "-", input=ordered)

    def pods() -> list[str]:
        return sorted(item["metadata"]["name"] for item in get_json(kube, "pods", "-n", namespace)["items"])

    wait_until(lambda: pods() == ["web-0"], 60, "first pod of the ordered rollout")
    kube.mark_pod_ready(namespace, "web-0")
    assert wait_until(lambda: pods() == ["web-0", "web-1"], 60, "second pod once the first is ready")
    assert wait_until(
        lambda: get_json(kube, "statefulset", "web", "-n", namespace)["status"].get("readyReplicas") == 1,
        60, "the StatefulSet counting the ready pod",
    )


class _BrokenApiServer(KubeCluster):
    def _apiserver_args(self) -> list[str]:
        return [*super()._apiserver_args(), "--no-such-flag=1"]


def test_a_control_plane_that_cannot_start_says_why(tmp_path: Path, k8s_bin: Path) -> None:
    cluster = _BrokenApiServer(tmp_path, bin_dir=k8s_bin)
    with pytest.raises(KubeStartError) as failure:
        cluster.start(timeout=60)
    message = str(failure.value)
    assert "kube-apiserver exited" in message
    assert "unknown flag: --no-such-flag" in message  # the apiserver's own words, from its log tail
    assert cluster.components == []  # etcd, which had started, was stopped again
