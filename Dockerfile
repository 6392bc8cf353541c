# syntax=docker/dockerfile:1
# One image for the Riverlog broker and the Riverlog operator (see README, "Kubernetes").
#   docker run -p 9092:9092 riverlog                        a single broker, data in /var/lib/riverlog/data
#   docker run riverlog topics list --bootstrap-server ...  any `riverlog` subcommand
#   docker run --entrypoint riverlog-operator riverlog      the operator (the chart runs it this way)
# The install step is scripts/install.sh, the same one `make deps` (and so CI) runs; a test
# (tests/unit/test_dockerfile.py) checks that and the rest of this file, as no Docker engine runs
# in CI.
#
# And the Connect image (issue #19), the default of the operator's Connect and Mirror workers:
#   docker build --target connect -t riverlog-connect .
# Apache Kafka's Connect runtime, FileStream connectors and MirrorMaker 2 at a pinned version,
# resolved from Maven Central through bench/kafka-pom.xml. More connector plugins: mount them
# (Connect's spec.plugins) or build a derived image that adds a directory of jars per plugin
# under /opt/riverlog-connect/plugins.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG MAVEN_IMAGE=maven:3.9-eclipse-temurin-17
ARG CONNECT_BASE_IMAGE=eclipse-temurin:17-jre
# Kafka's version for Connect: bench/kafka_dist.py's DEFAULT_KAFKA_VERSION and the pom's default.
ARG KAFKA_VERSION=4.3.1

# --- build: a virtualenv with the project and its runtime dependencies -------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /opt/riverlog
# Only what installing needs (.dockerignore keeps the rest of the tree out of the context).
COPY pyproject.toml ./
COPY scripts/install.sh scripts/
COPY broker_image broker_image
COPY operator operator
RUN sh scripts/install.sh /opt/riverlog/venv

# --- connect-libs: Connect's jars from Maven Central, without the broker, tools and Streams -------
FROM ${MAVEN_IMAGE} AS connect-libs
ARG KAFKA_VERSION
WORKDIR /build
COPY bench/kafka-pom.xml ./
# Then the Prometheus JMX exporter's Java agent at the pom's pinned version, apart from the class
# path: the launcher loads it with -javaagent when the operator asks for metrics.
RUN mvn -B -q -f kafka-pom.xml -P '!broker' -Dkafka.version=${KAFKA_VERSION} \
        -Doutput.dir=/opt/riverlog-connect/libs dependency:copy-dependencies \
    && mvn -B -q -f kafka-pom.xml -Doutput.dir=/opt/riverlog-connect/agent dependency:copy

# --- connect: a Java 17 runtime, the jars, the launcher, a non-root user -------------------------
FROM ${CONNECT_BASE_IMAGE} AS connect
# The same numeric uid/gid as the broker image: the operator's worker pods assume 10001.
RUN groupadd --system --gid 10001 connect \
    && useradd --system --uid 10001 --gid 10001 --home-dir /opt/riverlog-connect --no-create-home \
        --shell /usr/sbin/nologin connect \
    && mkdir -p /opt/riverlog-connect/plugins
COPY --from=connect-libs /opt/riverlog-connect/libs /opt/riverlog-connect/libs
COPY --from=connect-libs /opt/riverlog-connect/agent /opt/riverlog-connect/agent
COPY scripts/riverlog-connect /usr/local/bin/riverlog-connect
# The heap follows the container's memory limit; a worker out of memory exits and is restarted.
ENV RIVERLOG_CONNECT_JAVA_OPTS="-XX:MaxRAMPercentage=75.0 -XX:+ExitOnOutOfMemoryError"
USER 10001:10001
WORKDIR /opt/riverlog-connect
# The REST API, and the JMX exporter's /metrics (when RIVERLOG_CONNECT_METRICS_PORT is set).
EXPOSE 8083 9404
ENTRYPOINT ["riverlog-connect"]
CMD ["/etc/riverlog-connect/connect-distributed.properties"]

# --- runtime: the same base, the virtualenv and code, no build leftovers, a non-root user -------
# The last stage: what a plain `docker build .` makes.
FROM ${PYTHON_IMAGE} AS runtime
# A fixed numeric uid/gid: Kubernetes can only enforce runAsNonRoot on a numeric USER.
RUN groupadd --system --gid 10001 riverlog \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/riverlog --no-create-home \
        --shell /usr/sbin/nologin riverlog \
    && mkdir -p /var/lib/riverlog \
    && chown 10001:10001 /var/lib/riverlog
# The editable install points at /opt/riverlog/broker_image and /opt/riverlog/operator, so the
# tree is copied to the same path it was installed at.
COPY --from=build /opt/riverlog /opt/riverlog
ENV PATH=/opt/riverlog/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
# log.dirs defaults to ./data: broker data lands in /var/lib/riverlog/data (mount a volume there).
WORKDIR /var/lib/riverlog
# Kafka clients, the quorum's CONTROLLER listener, metrics and health (/metrics, /healthz, /readyz).
EXPOSE 9092 9093 9404
ENTRYPOINT ["riverlog"]
CMD ["broker"]
