"""The SparkSession every pipeline runs in, and the Kafka source/sink options they share.

Two ways to start a pipeline end here:

- ``riverlog-spark run ...`` starts Spark itself: local mode (``local[2]`` unless ``--master``),
  with the connector jars from the cache (``deps.py``) passed as ``spark.jars``;
- ``spark-submit ... riverlog_spark/__main__.py run ...``: spark-submit already started the JVM
  (it tells PySpark the gateway port in ``PYSPARK_GATEWAY_PORT``) with the master and the jars
  or ``--packages`` of its command line, so none are set here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import deps

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"

# Small by default: the pipelines' state and shuffles are small, and the test machines have two
# cores. Spark's 200 shuffle partitions would mean 200 state-store tasks per micro-batch.
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "768m",
    "spark.ui.enabled": "false",
    # Progress bars of stages would garble the pipeline's own output.
    "spark.ui.showConsoleProgress": "false",
    # Windows, dates and the JSON written out are in UTC whatever the machine's zone.
    "spark.sql.session.timeZone": "UTC",
}


LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


@dataclass(frozen=True)
class SparkOptions:
    """How to start Spark: master (None: local[2], or spark-submit's), extra ``--conf`` pairs."""

    app_name: str
    master: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "WARN"


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session_conf(options: SparkOptions, jars: list[str]) -> dict[str, str]:
    """The configuration set on the builder (pure, for tests): defaults, jars, then the user's."""
    conf = dict(DEFAULT_CONF)
    if jars:
        conf["spark.jars"] = ",".join(jars)
    conf.update(options.conf)
    return conf


def build_session(options: SparkOptions) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(options.app_name)
    if under_spark_submit():
        # The JVM is up with spark-submit's settings. Only SQL settings can still change, and a
        # default of ours must not override what spark-submit's --conf (or a SparkApplication's
        # sparkConf) chose; the user's own --conf here wins over both.
        spark = builder.getOrCreate()
        submitted = spark.sparkContext.getConf()
        for key, value in session_conf(options, []).items():
            if key.startswith("spark.sql.") and (key in options.conf or not submitted.contains(key)):
                spark.conf.set(key, value)
    else:
        master = options.master or DEFAULT_MASTER
        builder = builder.master(master)
        jars = [] if deps.bundled_with_spark() else [str(p) for p in deps.connector_jars()]
        conf = session_conf(options, jars)
        if master.startswith("local"):
            # A local driver has no one to talk to but itself: keep it on loopback rather than
            # on whatever address the host name resolves to.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            conf = {**LOCAL_CONF, **conf}
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(options.log_level)
    return spark


def kafka_options(bootstrap: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Options of the connector's source and sink: the bootstrap plus ``kafka.*`` settings.

    ``extra`` keys without the ``kafka.`` prefix are connector options (``failOnDataLoss``...);
    the prefix passes a setting to the Java client itself (``kafka.security.protocol``...).
    """
    options = {"kafka.bootstrap.servers": bootstrap}
    options.update(extra or {})
    return options


def security_options(client_properties: Mapping[str, str]) -> dict[str, str]:
    """A ``--command-config`` file's Kafka client properties (``security.protocol``, ``ssl.*``,
    ``sasl.*``) as connector options: each passed to the connector's Java client as ``kafka.<key>``."""
    return {f"kafka.{key}": value for key, value in client_properties.items()}


# What the pipelines' readers see of transactional topics: only committed transactions' records,
# never those of aborted or still-open ones (the connector's own default is read_uncommitted).
READ_ISOLATION_OPTION = "kafka.isolation.level"
DEFAULT_READ_ISOLATION = "read_committed"


def reader_options(bootstrap: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Options of the connector's source: :func:`kafka_options` reading with
    ``kafka.isolation.level=read_committed`` unless ``extra`` sets another level
    (``kafka.isolation.level=read_uncommitted`` also shows aborted and open transactions)."""
    return {READ_ISOLATION_OPTION: DEFAULT_READ_ISOLATION, **kafka_options(bootstrap, extra)}
