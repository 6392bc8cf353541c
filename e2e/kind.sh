#!/usr/bin/env bash
# End to end on a local kind cluster: build the image, load it into kind, install the chart,
# apply the sample Cluster and Topic, then produce and consume through the bootstrap Service.
#
# NEEDS DOCKER (a running engine) and is therefore NOT run by `make test` nor by CI, whose
# machines have none; the `k8s` test tier (tests/k8s/, a real kube-apiserver) is what runs there.
#
# Tools: docker, kind, kubectl, helm on PATH (`make k8s-deps` builds kind, kubectl and helm into
# ~/.cache/riverlog/k8s/<version>/bin; that directory is added to PATH when it exists).
#
# Settings (environment):
#   KIND_CLUSTER  kind cluster name               (riverlog-e2e)
#   NAMESPACE     namespace for chart and samples (riverlog)
#   IMAGE         image name:tag to build and load (riverlog:e2e)
#   KCAT_IMAGE    a kcat image for the client pods (edenhill/kcat:1.7.1)
#   KEEP=1        keep the kind cluster afterwards (it is deleted otherwise, also on failure)
#   SCENARIOS=0   skip the e2e tier's scenarios (tests/e2e/test_cluster_e2e.py, issue #7: leader
#                 pod deletion under load, rolling restart, scaling 3->5->3, deletion policies;
#                 tests/e2e/test_security_e2e.py, issue #18: Users, ACLs, quotas, CA renewal),
#                 which otherwise run unchanged against the kind cluster after the smoke test
set -euo pipefail

cd "$(dirname "$0")/.."
KIND_CLUSTER=${KIND_CLUSTER:-riverlog-e2e}
NAMESPACE=${NAMESPACE:-riverlog}
IMAGE=${IMAGE:-riverlog:e2e}
KCAT_IMAGE=${KCAT_IMAGE:-edenhill/kcat:1.7.1}
KEEP=${KEEP:-0}
SCENARIOS=${SCENARIOS:-1}
CLUSTER_FILE=examples/cluster.yaml
TOPIC_FILE=examples/topic.yaml

for cache in "${XDG_CACHE_HOME:-$HOME/.cache}"/riverlog/k8s/*/bin; do
  [ -d "$cache" ] && PATH="$cache:$PATH"
done
export PATH

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'kind.sh: %s\n' "$*" >&2; exit 1; }

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done
docker info >/dev/null 2>&1 || die "no Docker engine is reachable: this script needs one (it is not part of make test)"

cleanup() {
  local code=$?
  if [ "$code" -ne 0 ]; then
    log "failed (exit $code): operator log and resources"
    kubectl -n "$NAMESPACE" logs deployment/riverlog-operator --tail=100 || true
    kubectl -n "$NAMESPACE" get clusters,topics,statefulsets,pods,pvc -o wide || true
  fi
  if [ "$KEEP" = 1 ]; then
    log "kept kind cluster $KIND_CLUSTER (kind delete cluster --name $KIND_CLUSTER)"
  else
    kind delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
  fi
  exit "$code"
}
trap cleanup EXIT

log "kind cluster $KIND_CLUSTER"
if ! kind get clusters | grep -qx "$KIND_CLUSTER"; then
  kind create cluster --name "$KIND_CLUSTER" --wait 180s
fi
kubectl config use-context "kind-$KIND_CLUSTER" >/dev/null

log "image $IMAGE"
docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"

log "helm install (chart charts/riverlog, namespace $NAMESPACE)"
helm upgrade --install riverlog charts/riverlog --namespace "$NAMESPACE" --create-namespace \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=Never \
  --wait --timeout 5m

log "sample Cluster and Topic"
cluster=$(kubectl -n "$NAMESPACE" apply -f "$CLUSTER_FILE" -o name)  # cluster.riverlog.dev/NAME
topic=$(kubectl -n "$NAMESPACE" apply -f "$TOPIC_FILE" -o name)        # topic.riverlog.dev/NAME
kubectl -n "$NAMESPACE" wait "$cluster" --for=condition=Ready --timeout=10m
kubectl -n "$NAMESPACE" wait "$topic" --for=condition=Ready --timeout=5m
kubectl -n "$NAMESPACE" get clusters,topics
bootstrap=$(kubectl -n "$NAMESPACE" get "$cluster" -o jsonpath='{.status.bootstrapServers}')
kafka_topic=$(kubectl -n "$NAMESPACE" get "$topic" -o jsonpath='{.status.topicName}')
[ -n "$bootstrap" ] || die "$cluster reports no bootstrapServers"
[ -n "$kafka_topic" ] || kafka_topic=${topic#*/}

log "produce 100 records to $kafka_topic via $bootstrap (kcat, acks=all)"
seq 1 100 | sed 's/^/record-/' | kubectl -n "$NAMESPACE" run kcat-produce --rm -i --restart=Never \
  --image="$KCAT_IMAGE" -- -b "$bootstrap" -t "$kafka_topic" -P -X acks=all

log "consume them back"
consumed=$(kubectl -n "$NAMESPACE" run kcat-consume --rm -i --restart=Never --quiet \
  --image="$KCAT_IMAGE" -- -b "$bootstrap" -t "$kafka_topic" -C -o beginning -c 100 -e -q)
count=$(printf '%s\n' "$consumed" | grep -c '^record-')
[ "$count" -eq 100 ] || die "consumed $count records, expected 100"
log "OK: 100 records produced and consumed through $bootstrap"

[ "$SCENARIOS" = 1 ] || exit 0

# The scenarios install their own release in their own namespace; the chart's cluster-wide
# objects (CRDs, ClusterRoles) are shared, so the smoke test's release goes first.
log "removing the smoke test's release before the scenarios"
kubectl -n "$NAMESPACE" delete clusters,topics --all --wait=true --timeout=5m
helm uninstall riverlog --namespace "$NAMESPACE" --wait
kubectl delete namespace "$NAMESPACE" --wait=true --timeout=5m

# Client pods run Python with confluent-kafka: the Riverlog image plus that one package.
client_image="${IMAGE%:*}-e2e-client:${IMAGE##*:}"
log "client image $client_image"
printf 'FROM %s\nUSER root\nRUN pip install --no-cache-dir confluent-kafka==2.16.1\n' "$IMAGE" | docker build -t "$client_image" -
kind load docker-image "$client_image" --name "$KIND_CLUSTER"

log "e2e scenarios (pytest tests/e2e/test_cluster_e2e.py tests/e2e/test_security_e2e.py against kind-$KIND_CLUSTER)"
make deps >/dev/null
kind get kubeconfig --name "$KIND_CLUSTER" > "${TMPDIR:-/tmp}/riverlog-kind.kubeconfig"
RIVERLOG_E2E_KUBECONFIG="${TMPDIR:-/tmp}/riverlog-kind.kubeconfig" \
RIVERLOG_E2E_CLIENT_IMAGE="$client_image" \
RIVERLOG_E2E_HELM_SET="image.repository=${IMAGE%:*},image.tag=${IMAGE##*:},image.pullPolicy=Never" \
  .venv/bin/python -m pytest -m e2e -v tests/e2e/test_cluster_e2e.py tests/e2e/test_security_e2e.py
log "OK: the e2e scenarios passed on kind"
