"""spark/k8s and spark/Dockerfile read offline (no Docker engine and no Spark operator here):
the manifests parse and agree with each other, with the image and with the CLI; the Dockerfile
passes hadolint and its build context holds what it copies. tests/k8s/test_spark_manifests.py
checks the manifests against a real API server."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from riverlog_spark import cli
from support.image_stage import parse_dockerfile

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "spark" / "k8s"
DOCKERFILE = ROOT / "spark" / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
IMAGE = f"riverlog-spark:{PYPROJECT['project']['version']}"
PYSPARK_PIN = next(d for d in PYPROJECT["project"]["optional-dependencies"]["spark"] if d.startswith("pyspark=="))
IMAGE_MAIN = "/opt/riverlog/spark/riverlog_spark/__main__.py"


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def test_every_manifest_parses_into_known_kinds() -> None:
    kinds = sorted(d["kind"] for path in sorted(K8S.glob("*.yaml")) for d in load(path.name))
    assert kinds == ["PersistentVolumeClaim", "Pod", "Pod", "Role", "RoleBinding", "ServiceAccount", "SparkApplication"]
    for path in K8S.glob("*.yaml"):
        for doc in load(path.name):
            assert doc["apiVersion"] and doc["metadata"], path.name
            if doc["kind"] != "Pod":  # templates get their namespace from Spark
                assert doc["metadata"]["namespace"] == "riverlog", path.name


def test_rbac_binds_the_drivers_service_account() -> None:
    account, role, binding = load("rbac.yaml")
    name = account["metadata"]["name"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "riverlog"}]
    assert load("driver-pod-template.yaml")[0]["spec"]["serviceAccountName"] == name
    # The chart's option (templates/spark-rbac.yaml) grants the same rules.
    chart = (ROOT / "charts" / "riverlog" / "templates" / "spark-rbac.yaml").read_text()
    rules = yaml.safe_load(chart.split("kind: Role\n", 1)[1].split("---", 1)[0].split("rules:", 1)[1])
    assert rules == role["rules"]


def test_pod_templates_mount_the_checkpoint_claim() -> None:
    claim = load("checkpoints-pvc.yaml")[0]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # driver and executors both write
    for name, container in (("driver", "spark-kubernetes-driver"), ("executor", "spark-kubernetes-executor")):
        pod = load(f"{name}-pod-template.yaml")[0]
        spec = pod["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 10001  # the image's USER
        assert [c["name"] for c in spec["containers"]] == [container]
        assert spec["containers"][0]["image"] == IMAGE
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["checkpoints"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        assert mounts["checkpoints"] == "/var/lib/riverlog-spark/checkpoints"


def test_spark_application_matches_the_templates_the_image_and_the_cli() -> None:
    app = load("sparkapplication.yaml")[0]
    assert (app["apiVersion"], app["kind"]) == ("sparkoperator.k8s.io/v1beta2", "SparkApplication")
    spec = app["spec"]
    assert (spec["type"], spec["mode"], spec["pythonVersion"]) == ("Python", "cluster", "3")
    assert spec["sparkVersion"] == PYSPARK_PIN.split("==")[1]
    assert spec["image"] == IMAGE
    assert spec["mainApplicationFile"] == f"local://{IMAGE_MAIN}"
    assert (ROOT / "spark" / "riverlog_spark" / "__main__.py").exists()
    # The arguments are a valid riverlog-spark command line, and the checkpoint is on the volume.
    args = cli.build_parser().parse_args(spec["arguments"])
    assert (args.command, args.pipeline) == ("run", "etl")
    assert args.checkpoint.startswith("/var/lib/riverlog-spark/checkpoints/")
    assert spec["driver"]["serviceAccount"] == load("rbac.yaml")[0]["metadata"]["name"]
    # The operator's pod templates repeat the template files.
    for role in ("driver", "executor"):
        template = load(f"{role}-pod-template.yaml")[0]
        assert spec[role]["template"] == {"metadata": template["metadata"], "spec": template["spec"]}


def test_submit_script_is_shellcheck_clean_and_uses_the_files_here() -> None:
    script = (K8S / "submit.sh").read_text()
    for name in ("driver-pod-template.yaml", "executor-pod-template.yaml"):
        assert f"$here/{name}" in script and (K8S / name).exists()
    assert f"local://{IMAGE_MAIN}" in script and IMAGE in script
    for path in (K8S / "submit.sh", ROOT / "spark" / "docker" / "entrypoint.sh"):
        proc = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_docs_spark_submit_lines_use_real_options() -> None:
    text = (ROOT / "docs" / "spark.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    commands = [c for b in blocks for c in b.replace("\\\n", " ").splitlines() if "riverlog_spark/__main__.py" in c]
    assert len(commands) >= 3
    parser = cli.build_parser()
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "spark-submit"
        main = next(i for i, w in enumerate(words) if w.endswith("riverlog_spark/__main__.py"))
        parser.parse_args(words[main + 1:])  # what follows the script is a riverlog-spark command


def _ignored(path: str, patterns: list[str]) -> bool:
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        candidates = [path, *(str(p) for p in Path(path).parents if str(p) != ".")]
        if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
            excluded = not negate
    return excluded


def test_dockerfile_stages_and_context() -> None:
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    build, runtime = stages
    assert (build.name, runtime.name) == ("spark-build", "spark-runtime")
    patterns = [line.strip() for line in (ROOT / "spark" / "Dockerfile.dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for copy in build.all("COPY"):
        *sources, _target = copy.split()
        for source in sources:
            assert (ROOT / source).exists(), source
            assert not _ignored(source, patterns), f"{source} is outside the build context"
    for private in ("tests", "bench", "charts", ".git", "spark/k8s"):
        assert _ignored(private, patterns), private
    # pyspark and the project through the shared install step, with the spark extra.
    assert any(shlex.split(r)[:4] == ["sh", "scripts/install.sh", "/opt/riverlog/venv", "spark"]
               for r in build.all("RUN"))
    # The runtime takes only the built tree, runs as the pod templates' user, through the entrypoint.
    assert all(c.startswith("--from=spark-build ") for c in runtime.all("COPY"))
    assert runtime.all("USER")[-1] == "10001:10001"
    entrypoint = json.loads(runtime.all("ENTRYPOINT")[-1])
    assert entrypoint[-1] == "/opt/riverlog/spark/docker/entrypoint.sh"
    assert (ROOT / "spark" / "docker" / "entrypoint.sh").exists()
    # SPARK_HOME is the pyspark of the base image's Python.
    env = " ".join(runtime.all("ENV"))
    python = re.search(r"python:(\d+\.\d+)", build.base)
    assert python and f"SPARK_HOME=/opt/riverlog/venv/lib/python{python.group(1)}/site-packages/pyspark" in env


def test_dockerfile_hadolint_is_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    proc = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_entrypoint_runs_executors_with_sparks_variables(tmp_path: Path) -> None:
    # A stand-in `java` that prints its arguments: the executor command line Spark expects.
    fake = tmp_path / "java"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "SPARK_HOME": "/spark", "SPARK_JAVA_OPT_0": "-Da=1 2",
           "SPARK_JAVA_OPT_1": "-Db=x", "SPARK_EXECUTOR_MEMORY": "1g", "SPARK_DRIVER_URL": "spark://d:7078",
           "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "app-1",
           "SPARK_EXECUTOR_POD_IP": "10.0.0.5", "SPARK_EXECUTOR_POD_NAME": "etl-exec-3"}
    out = subprocess.run(["sh", str(ROOT / "spark" / "docker" / "entrypoint.sh"), "executor"], env=env,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[:6] == ["-Da=1 2", "-Db=x", "-Xms1g", "-Xmx1g", "-cp", "/spark/jars/*"]
    assert out[6] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(out[7::2], out[8::2], strict=True))
    assert flags == {"--driver-url": "spark://d:7078", "--executor-id": "3", "--cores": "1", "--app-id": "app-1",
                     "--hostname": "10.0.0.5", "--resourceProfileId": "0", "--podName": "etl-exec-3"}
