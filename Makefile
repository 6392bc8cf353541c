# Two commands matter: `make run` (a local broker on localhost:9092 with a schema registry on
# http://localhost:8081, data in ./data) and
# `make test` (install everything, then lint, type-check and run every test tier).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
# The integration tier's modules on two workers (pytest-xdist); PARALLEL= runs them one at a time.
PARALLEL ?= -n 2 --dist loadfile
PYTEST_ARGS ?=
PORT ?= 9092
METRICS_PORT ?= 9404
# The schema registry (issue #20) make run starts inside the broker process.
SCHEMA_REGISTRY_PORT ?= 8081
DATA ?= ./data
# make run listens on loopback only: the broker has no authentication yet. HOST=0.0.0.0 (and
# ADVERTISED_HOST=<a name clients can reach>) is the explicit choice to serve other machines.
HOST ?= 127.0.0.1
ADVERTISED_HOST ?= localhost

.PHONY: run run-secure test lint typecheck unit integration cluster k8s e2e spark deps system-deps java-deps avro-deps k8s-deps spark-deps chart-crds clean bench fuzz txn-soak

# scripts/install.sh is also the Dockerfile's install step: the image installs what CI tested.
$(STAMP): pyproject.toml scripts/install.sh
	PYTHON=$(PYTHON) sh scripts/install.sh $(VENV) test
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

deps: $(STAMP)

run: deps
	$(BIN)/riverlog broker --set log.dirs=$(DATA) \
		--set listeners=PLAINTEXT://$(HOST):$(PORT) --set advertised.listeners=PLAINTEXT://$(ADVERTISED_HOST):$(PORT) \
		--set metrics.host=$(HOST) --set metrics.port=$(METRICS_PORT) \
		--set schema.registry.listeners=http://$(HOST):$(SCHEMA_REGISTRY_PORT) --set schema.registry.host.name=$(ADVERTISED_HOST)

# The secured local start (issue #17): SASL_SSL with SCRAM on localhost:9094, CA, certificate and
# admin user made on the first start under data-secure/tls (client.properties is printed).
run-secure: deps
	$(BIN)/riverlog local-secure --data $(DATA)-secure

# From Debian: kcat (librdkafka's CLI), etcd-server (the k8s tier's store), openssl (its
# certificates) and shellcheck (lints the shell scripts); Kafka's Java tools and server come from
# Maven Central.
system-deps:
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	[ -x /usr/bin/etcd ] || missing="$$missing etcd-server"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v shellcheck >/dev/null 2>&1 || missing="$$missing shellcheck"; \
	[ -z "$$missing" ] || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing >/dev/null; }

java-deps: deps
	$(BIN)/python bench/kafka_dist.py install >/dev/null

# Apache Avro's Java library (Maven Central, cached in ${RIVERLOG_CACHE:-~/.cache/riverlog}/avro-<version>)
# and tests/java_avro compiled against it: the unit tier checks the schema registry's Avro rules
# against org.apache.avro in one JVM (tests/unit/test_sr_avro_compatibility.py). Needs the JDK.
avro-deps: deps
	$(BIN)/python tests/support/avro_java.py >/dev/null

# kube-apiserver, kube-controller-manager, kubectl, helm and kind built from Go modules (minutes
# when cold), cached in ${XDG_CACHE_HOME:-~/.cache}/riverlog/k8s/<version>/bin for the k8s tier.
# Plus promtool, taken from Debian's prometheus package (checks the chart's alerts and dashboard).
k8s-deps: deps system-deps
	$(BIN)/python tests/support/kube_build.py >/dev/null
	$(BIN)/python tests/support/promtool.py >/dev/null

# Spark's Kafka connector (spark-sql-kafka-0-10_2.13 at pyspark's version) and the jars it needs
# beyond pyspark's own, resolved once with Maven into ${XDG_CACHE_HOME:-~/.cache}/riverlog/spark/<version>/jars
# (warm runs fetch nothing); the spark tier runs pipelines in local mode with them.
spark-deps: deps
	$(BIN)/riverlog-spark jars >/dev/null

# The chart ships copies of crds/ (Helm installs a chart's crds/ folder); a test checks they match.
chart-crds:
	rm -f charts/riverlog/crds/*.yaml
	cp crds/*.yaml charts/riverlog/crds/

lint: deps
	$(BIN)/ruff check broker_image operator spark tests bench e2e

typecheck: deps
	$(BIN)/mypy

# Two pytest runs: every tier but integration one test at a time, then the integration tier with
# its modules on two workers (--dist loadfile keeps a module's shared broker on one worker). The
# integration tests mostly wait on brokers and clients, so two at a time took the tier from 16.5
# to 9 minutes on two cores; the cluster tier's fuzz and fault runs and the k8s and e2e tiers'
# settle checks stay alone. Both runs always run; the recipe fails with the first failing pytest
# exit code (5, "no tests", included), so make fails.
test: deps system-deps java-deps avro-deps k8s-deps spark-deps lint typecheck
	@serial=0; parallel=0; \
	$(BIN)/python -m pytest --durations=40 -m "not integration" $(PYTEST_ARGS) || serial=$$?; \
	$(BIN)/python -m pytest --durations=20 -m integration $(PARALLEL) $(PYTEST_ARGS) || parallel=$$?; \
	echo "pytest exit codes: every tier but integration $$serial, integration $$parallel"; \
	[ $$serial -ne 0 ] && exit $$serial; exit $$parallel

unit: deps system-deps avro-deps
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

integration: deps system-deps java-deps
	$(BIN)/python -m pytest -m integration $(PARALLEL) $(PYTEST_ARGS)

cluster: deps
	$(BIN)/python -m pytest -m cluster $(PYTEST_ARGS)

# The cluster tier's protocol fuzzer (tests/cluster/test_protocol_fuzz.py, 1,000,000 requests in
# make test) at length: FUZZ_CASES mutated requests against a 3-node cluster, stopped after
# FUZZ_SECONDS (then failing if short of the count); outcomes, rate and memory on stdout.
# RIVERLOG_FUZZ_SEED=<n> in the environment picks another seed.
FUZZ_CASES ?= 20000000
FUZZ_SECONDS ?= 3600
# It also runs AUTH_FUZZ_CASES of the malformed SASL and TLS input of
# tests/integration/test_auth_fuzz.py (1,500 in make test; RIVERLOG_AUTH_FUZZ_SEED picks a seed).
AUTH_FUZZ_CASES ?= 100000
fuzz: deps
	RIVERLOG_FUZZ_CASES=$(FUZZ_CASES) RIVERLOG_FUZZ_SECONDS=$(FUZZ_SECONDS) \
		$(BIN)/python -m pytest -s tests/cluster/test_protocol_fuzz.py $(PYTEST_ARGS)
	RIVERLOG_AUTH_FUZZ_CASES=$(AUTH_FUZZ_CASES) \
		$(BIN)/python -m pytest -s tests/integration/test_auth_fuzz.py $(PYTEST_ARGS)

# The cluster tier's transactional fault test (tests/cluster/test_fault_injection_transactions.py,
# issue #16: exactly-once consume-transform-produce while nodes, coordinators included, are killed,
# frozen and cut off; 2 seeds of 60 s of faults in make test) at length: TXN_SOAK_RUNS seeds of
# TXN_SOAK_SECONDS of faults each. RIVERLOG_FAULT_SEED=<n> replays one seed;
# RIVERLOG_TEST_TARGET=kafka runs it against Apache Kafka.
TXN_SOAK_RUNS ?= 5
TXN_SOAK_SECONDS ?= 300
txn-soak: deps
	RIVERLOG_TXN_FAULT_RUNS=$(TXN_SOAK_RUNS) RIVERLOG_FAULT_SECONDS=$(TXN_SOAK_SECONDS) \
		$(BIN)/python -m pytest -s tests/cluster/test_fault_injection_transactions.py $(PYTEST_ARGS)

k8s: deps k8s-deps
	$(BIN)/python -m pytest -m k8s $(PYTEST_ARGS)

# The k8s tier's control plane plus a test node (e2e/node_agent, needs root for unshare/mount).
e2e: deps java-deps k8s-deps
	$(BIN)/python -m pytest -m e2e $(PYTEST_ARGS)

spark: deps spark-deps
	$(BIN)/python -m pytest -m spark $(PYTEST_ARGS)

# W1–W11 and the OpenMessaging-style O16x1..O100x4 against Riverlog and Apache Kafka (issues #8, #15),
# with every broker's CPU per GB and memory: table on stdout, every run's values in
# bench/results/latest.json, the plot in docs/benchmarks/bench.png. BENCH_ARGS adds options,
# e.g. BENCH_ARGS="--rounds 2" or BENCH_ARGS="--workloads W1,W3" (the schema registry's:
# BENCH_ARGS="--workloads SR1,SR1I,SR2").
bench: deps java-deps
	$(BIN)/python bench/run.py --out bench/results/latest.json --plot docs/benchmarks/bench.png $(BENCH_ARGS)

clean:
	rm -rf $(VENV) data .mypy_cache .ruff_cache .pytest_cache
