"""What the numbers ran on: CPU, cores, memory, kernel and every version that matters."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _java_version() -> str:
    try:
        result = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "not found"
    lines = (result.stderr or result.stdout).splitlines()
    return lines[0].strip() if lines else "unknown"


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return "not installed"


def describe() -> dict[str, Any]:
    import confluent_kafka
    from support.brokers import kafka_dist

    mem_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_bytes / 2**30, 1),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": _java_version(),
        "kafka": kafka_dist.kafka_version(),
        "riverlog": _version("riverlog"),
        # The package's own version: confluent_kafka.version() is a plain string in this
        # release, whose [0] would be its first character only.
        "confluent_kafka": _version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_java_tools": kafka_dist.kafka_version(),
        "uvloop": _version("uvloop"),
        "matplotlib": _version("matplotlib"),
    }
