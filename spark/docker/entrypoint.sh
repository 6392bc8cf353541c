#!/bin/sh
# Entrypoint of the riverlog-spark image (spark/Dockerfile).
#
# Spark on Kubernetes starts its pods with a first argument naming the role, and expects the
# image to turn it into a process (Spark's own images do the same in their entrypoint):
#   driver ARGS...    spark-submit in client mode inside the driver pod, bound to the pod's IP
#                     (SPARK_DRIVER_BIND_ADDRESS, set by Spark from the downward API)
#   executor          the executor backend, configured entirely by SPARK_* variables that the
#                     driver puts in the executor pod
# Anything else runs as given, e.g. `riverlog-spark run etl --bootstrap ...` (local mode in one
# pod) or `riverlog-spark generate ...`.
set -eu

: "${SPARK_HOME:?SPARK_HOME must point at the pyspark installation}"
classpath="$SPARK_HOME/jars/*"
if [ -n "${SPARK_DIST_CLASSPATH:-}" ]; then
  classpath="$classpath:$SPARK_DIST_CLASSPATH"
fi

case "${1:-}" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark in driver pods}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    # JVM options come as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order; each is one argument
    # (they may hold spaces), so they become this shell's positional parameters.
    set --
    i=0
    opt=
    while :; do
      eval "opt=\${SPARK_JAVA_OPT_$i-__unset__}"
      [ "$opt" = "__unset__" ] && break
      set -- "$@" "$opt"
      i=$((i + 1))
    done
    exec java "$@" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "$classpath" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?}" \
      --executor-id "${SPARK_EXECUTOR_ID:?}" \
      --cores "${SPARK_EXECUTOR_CORES:?}" \
      --app-id "${SPARK_APPLICATION_ID:?}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-}"
    ;;
  "")
    exec riverlog-spark --help
    ;;
  *)
    exec "$@"
    ;;
esac
