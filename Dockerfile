# syntax=docker/dockerfile:1
# One image for the Riverlog broker and the Riverlog operator (see README, "Kubernetes").
#   docker run -p 9092:9092 riverlog                        a single broker, data in /var/lib/riverlog/data
#   docker run riverlog topics list --bootstrap-server ...  any `riverlog` subcommand
#   docker run --entrypoint riverlog-operator riverlog      the operator (the chart runs it this way)
# The install step is scripts/install.sh, the same one `make deps` (and so CI) runs; a test
# (tests/unit/test_dockerfile.py) checks that and the rest of this file, as no Docker engine runs
# in CI.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

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

# --- runtime: the same base, the virtualenv and code, no build leftovers, a non-root user -------
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
