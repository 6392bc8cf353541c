"""The JSON records the pipelines read, as Spark schemas (and their field names for Python code).

Events (``riverlog-spark generate`` writes them; key = event id)::

    {"event_id": "e-000042", "user": "u-007", "category": "books",
     "amount": 12.34, "ts": 1767225600123}

``ts`` is the event time in epoch milliseconds (the generator also uses it as the record's Kafka
timestamp). ``amount`` is read as DECIMAL(12,2), so sums are exact and a test can recompute
them with Python's Decimal.

Users (the enrichment's reference table, a compacted topic; key = user id, null value = deleted)::

    {"name": "Ada", "tier": "gold", "country": "NO"}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

AMOUNT_PRECISION = 12
AMOUNT_SCALE = 2
EVENT_FIELDS = ("event_id", "user", "category", "amount", "ts")
USER_FIELDS = ("name", "tier", "country")


def event_schema() -> StructType:
    from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType

    return StructType([
        StructField("event_id", StringType()),
        StructField("user", StringType()),
        StructField("category", StringType()),
        StructField("amount", DecimalType(AMOUNT_PRECISION, AMOUNT_SCALE)),
        StructField("ts", LongType()),
    ])


def user_schema() -> StructType:
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField(name, StringType()) for name in USER_FIELDS])
