#!/bin/sh
# spark-submit of a Riverlog pipeline to Kubernetes, cluster mode (docs/spark.md, "On Kubernetes").
#
#   K8S_API=https://<api server>:6443 spark/k8s/submit.sh etl \
#       --bootstrap demo-bootstrap.riverlog.svc:9092 --checkpoint /var/lib/riverlog-spark/checkpoints/etl
#
# The driver pod runs `riverlog-spark run <pipeline> ...` from the riverlog-spark image
# (spark/Dockerfile) as the riverlog-spark ServiceAccount (rbac.yaml), with the pod templates
# next to this script; the checkpoint volume is checkpoints-pvc.yaml. Settings: NAMESPACE
# (riverlog), IMAGE (riverlog-spark:0.1.0), EXECUTORS (2), WAIT (true: follow the application
# until it ends), SPARK_SUBMIT (spark-submit from PATH; pyspark installs one). Spark reads the
# API server's credentials from the kubeconfig (KUBECONFIG), as kubectl does.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
api=${K8S_API:?set K8S_API to the API server URL, e.g. https://127.0.0.1:6443}
pipeline=${1:?usage: submit.sh PIPELINE [riverlog-spark run options]}
shift
exec "${SPARK_SUBMIT:-spark-submit}" \
  --master "k8s://$api" \
  --deploy-mode cluster \
  --name "riverlog-$pipeline" \
  --conf "spark.kubernetes.namespace=${NAMESPACE:-riverlog}" \
  --conf "spark.kubernetes.container.image=${IMAGE:-riverlog-spark:0.1.0}" \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=riverlog-spark \
  --conf "spark.kubernetes.driver.podTemplateFile=$here/driver-pod-template.yaml" \
  --conf "spark.kubernetes.executor.podTemplateFile=$here/executor-pod-template.yaml" \
  --conf "spark.executor.instances=${EXECUTORS:-2}" \
  --conf "spark.kubernetes.submission.waitAppCompletion=${WAIT:-true}" \
  local:///opt/riverlog/spark/riverlog_spark/__main__.py run "$pipeline" "$@"
