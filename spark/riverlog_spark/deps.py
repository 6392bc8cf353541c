"""Spark's Kafka connector jars (and Spark's Avro data source), resolved from Maven Central once
and cached.

pyspark ships Spark but not its Kafka connector (``spark-sql-kafka-0-10_2.13``) nor its Avro
data source (``spark-avro_2.13``, whose ``from_avro`` decodes schema-registry values). Spark's own
``--packages`` would fetch it with Ivy on every cold driver; instead ``make spark-deps`` (and the
Docker image's build) runs Maven once with ``connector-pom.xml`` and keeps the jars in
``${XDG_CACHE_HOME:-~/.cache}/riverlog/spark/<version>/jars``. Later runs find the completion
marker and fetch nothing.

Only jars that pyspark does not already ship are kept (by artifact name, whatever the version):
a second copy of Scala, Hadoop or slf4j at another version on the driver's class path would
only cause conflicts, and ``--packages`` leaves those to Spark's own jars as well.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

POM_PATH = Path(__file__).resolve().parent / "connector-pom.xml"
SETTINGS_PATH = Path(__file__).resolve().parent / "maven-settings.xml"
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"
AVRO_ARTIFACT = "spark-avro_2.13"
# Spark's artifacts connector-pom.xml lists, each at pyspark's version. A cache resolved before
# one of them joined the pom lacks its jar and is resolved again.
SPARK_ARTIFACTS = (CONNECTOR_ARTIFACT, AVRO_ARTIFACT)
_COMPLETE_MARKER = ".complete"
# Set in the Docker image: the jars were resolved at build time into this directory.
JARS_DIR_ENV = "RIVERLOG_SPARK_JARS_DIR"

# "kafka-clients-3.9.0.jar" -> "kafka-clients": the version starts at the first "-<digits>.";
# "spark-sql-kafka-0-10_2.13-4.0.0.jar" shows why a lone "-<digit>" is not enough.
_ARTIFACT_RE = re.compile(r"^(?P<name>.+?)-\d+\.[^/]*\.jar$")


class SparkDepsError(RuntimeError):
    """The connector could not be resolved; the message says why."""


def spark_version() -> str:
    """The installed pyspark's version: the connector must be exactly this one."""
    import pyspark

    return str(pyspark.__version__)


def connector_coordinate(version: str | None = None) -> str:
    """Maven coordinate for ``spark-submit --packages``."""
    return f"org.apache.spark:{CONNECTOR_ARTIFACT}:{version or spark_version()}"


def package_coordinates(version: str | None = None) -> str:
    """Every artifact of the pom, comma-separated, for ``spark-submit --packages``."""
    version = version or spark_version()
    return ",".join(f"org.apache.spark:{artifact}:{version}" for artifact in SPARK_ARTIFACTS)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "riverlog" / "spark"


def jars_dir(version: str | None = None) -> Path:
    override = os.environ.get(JARS_DIR_ENV)
    if override:
        return Path(override)
    return cache_dir() / (version or spark_version()) / "jars"


def spark_home_jars() -> Path:
    """The jars Spark runs with: ``$SPARK_HOME/jars``, else those inside the pyspark package."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def artifact_name(jar_name: str) -> str:
    match = _ARTIFACT_RE.match(jar_name)
    return match.group("name") if match else jar_name.removesuffix(".jar")


def missing_from(resolved: Iterable[str], shipped: Iterable[str]) -> list[str]:
    """The resolved jar names whose artifact is not among the shipped jars, sorted."""
    have = {artifact_name(name) for name in shipped}
    return sorted(name for name in resolved if artifact_name(name) not in have)


def bundled_with_spark() -> bool:
    """Whether Spark's own jars already hold the connector and spark-avro (the riverlog-spark
    image puts them there)."""
    have = {artifact_name(p.name) for p in spark_home_jars().glob("*.jar")}
    return all(artifact in have for artifact in SPARK_ARTIFACTS)


def is_installed(version: str | None = None) -> bool:
    version = version or spark_version()
    target = jars_dir(version)
    return (target / _COMPLETE_MARKER).is_file() and all(
        (target / f"{artifact}-{version}.jar").is_file() for artifact in SPARK_ARTIFACTS)


def connector_jars(version: str | None = None) -> list[Path]:
    """The cached jars (absolute paths); SparkDepsError if they were never resolved."""
    target = jars_dir(version)
    if not is_installed(version):
        raise SparkDepsError(
            f"Spark's Kafka connector and spark-avro are not in {target}: run `make spark-deps` or "
            "`riverlog-spark jars`"
        )
    return sorted(target.glob("*.jar"))


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    # Two test sessions (or make and a test) may resolve at once; the second waits and then
    # finds the finished copy.
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure(version: str | None = None, *, timeout: float = 900.0) -> list[Path]:
    """Resolve the connector into the cache unless it is there; return its jars.

    The jars are assembled in a sibling temporary directory and renamed into place, so an
    interrupted run never leaves a partial directory that later runs would trust.
    """
    version = version or spark_version()
    target = jars_dir(version)
    if is_installed(version):
        return connector_jars(version)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SparkDepsError("Maven ('mvn') is not on PATH; it resolves Spark's Kafka connector")
    with _file_lock(target.parent / ".resolve.lock"):
        if is_installed(version):
            return connector_jars(version)
        staging = Path(tempfile.mkdtemp(prefix="jars-staging-", dir=target.parent))
        try:
            cmd = [
                mvn, "-B", "-q", "-s", str(SETTINGS_PATH), "-f", str(POM_PATH),
                f"-Dspark.version={version}", f"-Doutput.dir={staging}",
                "dependency:copy-dependencies",
            ]
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if result.returncode != 0:
                raise SparkDepsError(
                    f"mvn failed (exit {result.returncode}) resolving {connector_coordinate(version)}:\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
                )
            shipped = [p.name for p in spark_home_jars().glob("*.jar")]
            keep = set(missing_from((p.name for p in staging.glob("*.jar")), shipped))
            for artifact in SPARK_ARTIFACTS:
                if f"{artifact}-{version}.jar" not in keep:
                    raise SparkDepsError(f"{artifact}-{version}.jar missing after mvn copy-dependencies")
            for jar in staging.glob("*.jar"):
                if jar.name not in keep:
                    jar.unlink()
            (staging / _COMPLETE_MARKER).write_text(version + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return connector_jars(version)
