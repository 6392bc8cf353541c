"""Kafka's on-disk log: segments with offset and time indexes, recovery, retention."""

from .config import LogConfig
from .log import AppendInfo, Log, ReadInfo

__all__ = ["AppendInfo", "Log", "LogConfig", "ReadInfo"]
