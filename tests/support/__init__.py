"""Test support shared by the integration tiers.

- :mod:`support.brokers` starts a broker process (Riverlog, or Apache Kafka when
  ``RIVERLOG_TEST_TARGET=kafka``) on loopback ports and controls it with signals.
- :mod:`support.java_tools` runs Kafka's own Java command-line tools against it.
- :mod:`support.java_programs` compiles and runs the Java test programs of ``tests/java/``.
- :mod:`support.txn_checks` reads what transactions left behind, per isolation level.
- :mod:`support.clients` holds small client-side helpers (bounded polling, reading a topic back).

Tests import these as ``from support.brokers import BrokerProcess``: pytest puts the ``tests``
directory on ``sys.path`` because ``tests/conftest.py`` lives there (rootdir-relative import).
"""
