"""Apache Avro's Java library as the judge of the schema registry's Avro rules.

Confluent Schema Registry parses Avro schemas with ``org.apache.avro.Schema.Parser`` and checks
compatibility with ``org.apache.avro.SchemaCompatibility``; Riverlog's registry reimplements both
in Python (``riverlog.schema_registry.formats.avro``). To keep the two honest, the tests hand
their schemas to ``tests/java_avro/AvroCompatCheck.java`` and compare verdicts.

Avro's jars are resolved once with Maven (``tests/java_avro/avro-pom.xml``) into
``~/.cache/riverlog/avro-<version>/libs`` (``RIVERLOG_CACHE`` moves ``~/.cache/riverlog``;
``RIVERLOG_AVRO_VERSION`` picks another release), and the program is compiled through
:class:`support.java_programs.JavaPrograms`, whose cache is keyed by sources and jar names: warm
runs start one JVM and fetch and compile nothing. ``python tests/support/avro_java.py`` installs
and compiles (``make java-deps`` does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_AVRO_VERSION = "1.12.2"
TESTS_DIR = Path(__file__).resolve().parents[1]
SOURCES = TESTS_DIR / "java_avro"
POM_PATH = SOURCES / "avro-pom.xml"
MAIN_CLASS = "AvroCompatCheck"
_COMPLETE_MARKER = ".complete"


class AvroJavaError(RuntimeError):
    """Installing or running Avro's Java check failed; the message says why."""


def avro_version() -> str:
    return os.environ.get("RIVERLOG_AVRO_VERSION", DEFAULT_AVRO_VERSION)


def libs_dir(version: str | None = None) -> Path:
    from support.brokers import kafka_dist

    return Path(kafka_dist.cache_root()) / f"avro-{version or avro_version()}" / "libs"


def is_installed(version: str | None = None) -> bool:
    version = version or avro_version()
    libs = libs_dir(version)
    return (libs / _COMPLETE_MARKER).is_file() and (libs / f"avro-{version}.jar").is_file()


def install(version: str | None = None, *, timeout: float = 600.0) -> Path:
    """Resolve Avro's jars into the cache (idempotent; instant when cached) and return the
    ``libs`` directory. Assembled in a sibling directory and renamed, so an interrupted install
    never leaves a directory later runs would trust."""
    from support.brokers import kafka_dist

    version = version or avro_version()
    target = libs_dir(version)
    if is_installed(version):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise AvroJavaError("Maven ('mvn') is not on PATH; it is needed to fetch Avro's jars")
    target.parent.mkdir(parents=True, exist_ok=True)
    with kafka_dist.file_lock(target.parent / ".install.lock"):
        if is_installed(version):
            return target
        staging = Path(tempfile.mkdtemp(prefix="libs-staging-", dir=target.parent))
        try:
            cmd = [mvn, "-B", "-q", "-f", str(POM_PATH), f"-Davro.version={version}",
                   f"-Doutput.dir={staging}", "dependency:copy-dependencies"]
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if result.returncode != 0:
                raise AvroJavaError(f"mvn failed (exit {result.returncode}) resolving Avro {version}:\n"
                                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
            if not (staging / f"avro-{version}.jar").is_file():
                raise AvroJavaError(f"avro-{version}.jar missing after mvn copy-dependencies")
            (staging / _COMPLETE_MARKER).write_text(version + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return target


def command() -> list[str]:
    """The ``java`` command line of the check program (installing and compiling first if needed)."""
    from support.java_programs import JavaPrograms

    return JavaPrograms(install(), sources=SOURCES).command(MAIN_CLASS)


def verdicts(jobs: Sequence[dict[str, Any]], *, timeout: float = 180.0) -> list[dict[str, Any]]:
    """Avro Java's answer to each job (see AvroCompatCheck.java for their shape), in one JVM."""
    cmd = command()
    proc = subprocess.run(cmd, input=json.dumps(list(jobs)), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AvroJavaError(f"{MAIN_CLASS} failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}")
    # One JSON object a line. Not splitlines(): it also splits at U+2028 and friends, which
    # Jackson writes unescaped inside strings.
    answers = [json.loads(line) for line in proc.stdout.split("\n") if line.strip()]
    if len(answers) != len(jobs):
        raise AvroJavaError(f"{MAIN_CLASS} answered {len(answers)} of {len(jobs)} jobs:\n{proc.stderr[-6000:]}")
    return answers


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS_DIR))  # run as a script: make ``support`` importable
    print(" ".join(command()))
