"""Riverlog's schema registry (issue #20): Confluent Schema Registry's REST API, so every Kafka
serializer that talks to one (confluent-kafka's, Spark's ``from_avro`` with a registry, Kafka
Connect's converters) works against it unchanged.

Layout:

- ``formats/``: one module per schema type (``avro``, ``protobuf``, ``json_schema``), each a
  :class:`formats.base.ParsedSchema`: parsing with references, the canonical and normalized
  forms, and the compatibility rules of that format (what a reader schema can read of data
  written with another). Pure: no I/O.
- ``compatibility.py``: the modes (BACKWARD, FORWARD, FULL, their transitive forms, NONE) over
  a subject's versions, on top of a format's rules.
"""
