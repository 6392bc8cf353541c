"""Run Apache Kafka's own Java command-line tools (kafka-topics, console producer/consumer, ...).

The shell scripts of a Kafka release are thin wrappers around ``java -cp <libs>/* <MainClass>``;
we call the main classes directly with the jars that ``bench/kafka_dist.py`` installs from
Maven Central. In Kafka 4.x the tools are Java classes under ``org.apache.kafka.tools``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from support.brokers import kafka_dist

TOPIC_COMMAND = kafka_dist.TOPIC_COMMAND_MAIN  # kafka-topics.sh
CONSOLE_PRODUCER = kafka_dist.CONSOLE_PRODUCER_MAIN  # kafka-console-producer.sh
CONSOLE_CONSUMER = kafka_dist.CONSOLE_CONSUMER_MAIN  # kafka-console-consumer.sh
GET_OFFSET_SHELL = kafka_dist.GET_OFFSET_SHELL_MAIN  # kafka-get-offsets.sh
DELETE_RECORDS = kafka_dist.DELETE_RECORDS_MAIN  # kafka-delete-records.sh
TRANSACTIONS = kafka_dist.TRANSACTIONS_MAIN  # kafka-transactions.sh
CONFIGS = kafka_dist.CONFIG_COMMAND_MAIN  # kafka-configs.sh
ACLS = "org.apache.kafka.tools.AclCommand"  # kafka-acls.sh


@dataclass(frozen=True)
class ToolResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """Everything needed to understand a failed tool run, for assertion messages."""
        return (
            f"command: {' '.join(self.args)}\nexit code: {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )


def run_java(cmd: list[str], main_class: str, *, stdin: str | None, timeout: float, check: bool) -> ToolResult:
    """Run a Java command line to its end within ``timeout`` seconds; an AssertionError with
    its output if it did not finish, or (``check``) failed."""
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        raise AssertionError(
            f"{main_class} did not finish within {timeout:.0f}s\n"
            f"command: {' '.join(cmd)}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"
        ) from exc
    result = ToolResult(cmd, proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise AssertionError(f"{main_class} failed\n{result.describe()}")
    return result


class JavaTools:
    """Runs Kafka tool main classes with a bounded wall-clock time."""

    def __init__(self, libs: Path, *, heap: str = "256m", system_properties: Mapping[str, str] | None = None) -> None:
        self.libs = Path(libs)
        self.heap = heap
        self.system_properties = dict(system_properties or {})

    def with_system_properties(self, properties: Mapping[str, str]) -> JavaTools:
        """The same tools run with these JVM system properties too (for example Kafka 4.x's
        ``org.apache.kafka.sasl.oauthbearer.allowed.urls``)."""
        return JavaTools(self.libs, heap=self.heap, system_properties={**self.system_properties, **properties})

    def command(self, main_class: str, args: Sequence[str]) -> list[str]:
        """The command line ``run`` uses, for a tool a test runs in the background."""
        return list(kafka_dist.java_command(self.libs, main_class, list(args), heap=self.heap,
                                            extra_jvm_args=kafka_dist.jvm_system_properties(self.system_properties)))

    def run(
        self,
        main_class: str,
        args: Sequence[str],
        *,
        stdin: str | None = None,
        timeout: float = 90.0,
        check: bool = True,
    ) -> ToolResult:
        # Tool output (what we assert on) is on stdout; slf4j logging goes to stderr at WARN so
        # that a failure's cause is visible without drowning the output.
        return run_java(self.command(main_class, args), main_class, stdin=stdin, timeout=timeout, check=check)

    # --- thin wrappers named after the shell scripts ----------------------------------------

    def topics(self, bootstrap: str, *args: str, **kwargs: object) -> ToolResult:
        return self.run(TOPIC_COMMAND, ["--bootstrap-server", bootstrap, *args], **kwargs)  # type: ignore[arg-type]

    def console_producer(
        self, bootstrap: str, topic: str, lines: Sequence[str], *args: str, timeout: float = 90.0
    ) -> ToolResult:
        stdin = "".join(line + "\n" for line in lines)
        return self.run(
            CONSOLE_PRODUCER,
            ["--bootstrap-server", bootstrap, "--topic", topic, *args],
            stdin=stdin,
            timeout=timeout,
        )

    def console_consumer(
        self, bootstrap: str, topic: str, *args: str, timeout: float = 90.0, check: bool = True
    ) -> ToolResult:
        return self.run(
            CONSOLE_CONSUMER,
            ["--bootstrap-server", bootstrap, "--topic", topic, *args],
            timeout=timeout,
            check=check,
        )

    def roundtrip_with_config(self, bootstrap: str, config: Path, topic: str, lines: Sequence[str]) -> list[str]:
        """kafka-topics --create, the console producer and the console consumer, each given
        ``--command-config config`` (a secured client's settings); the lines read back."""
        self.topics(bootstrap, "--command-config", str(config), "--create", "--topic", topic,
                    "--partitions", "1", "--replication-factor", "1")
        self.console_producer(bootstrap, topic, lines, "--command-config", str(config))
        out = self.console_consumer(bootstrap, topic, "--command-config", str(config), "--from-beginning",
                                    "--max-messages", str(len(lines)), "--timeout-ms", "30000")
        return out.stdout.split()

    def configs(self, bootstrap: str, *args: str, timeout: float = 90.0, check: bool = True) -> ToolResult:
        return self.run(CONFIGS, ["--bootstrap-server", bootstrap, *args], timeout=timeout, check=check)

    def acls(self, bootstrap: str, *args: str, timeout: float = 90.0, check: bool = True) -> ToolResult:
        return self.run(ACLS, ["--bootstrap-server", bootstrap, *args], timeout=timeout, check=check)

    def transactions(self, bootstrap: str, *args: str, timeout: float = 90.0, check: bool = True) -> ToolResult:
        return self.run(TRANSACTIONS, ["--bootstrap-server", bootstrap, *args], timeout=timeout, check=check)

    def get_offsets(self, bootstrap: str, *args: str, timeout: float = 90.0) -> ToolResult:
        return self.run(GET_OFFSET_SHELL, ["--bootstrap-server", bootstrap, *args], timeout=timeout)
