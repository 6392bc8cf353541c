"""PySpark pipelines on Riverlog through Spark's own Kafka connector (issue #6).

``cli`` is the ``riverlog-spark`` command; ``pipelines/`` holds the streaming ETL, the batch
export and the enrichment; ``deps`` resolves the connector jars; ``session`` starts Spark.
"""
