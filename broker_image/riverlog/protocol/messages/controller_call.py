"""RiverlogControllerCall (key 10000, Riverlog-internal): a broker's request to the active
controller of the metadata quorum.

Kafka has one RPC per controller operation (BrokerRegistration, BrokerHeartbeat, AlterPartition,
AllocateProducerIds) plus Envelope to forward admin requests. Riverlog brokers call the active
controller's ``ControllerApi`` methods instead: ``method`` names one, ``arguments`` carries its
arguments and ``result`` its return value, both in the JSON form of ``controller/quorum/codec.py``.
``metadata_offset`` is the end of the metadata log once the call's records were applied on the
controller: the caller waits until its own replica of the log has applied that far, so what it
reads from its image right after includes the change (as ``ControllerApi`` promises).

Only version 0, flexible. Never listed by ApiVersions: clients have no business calling it.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, STRING, f, message

REQUEST = message(
    "RiverlogControllerCallRequest",
    ApiKey.RIVERLOG_CONTROLLER_CALL,
    "0",
    "0+",
    [
        f("cluster_id", STRING),
        f("caller_id", INT32),  # the calling broker's node.id, for logs
        f("method", STRING),
        f("arguments", STRING),
    ],
)

RESPONSE = message(
    "RiverlogControllerCallResponse",
    ApiKey.RIVERLOG_CONTROLLER_CALL,
    "0",
    "0+",
    [
        f("error_code", INT16),  # NOT_CONTROLLER: ask the current leader; INCONSISTENT_CLUSTER_ID
        f("error_message", STRING, nullable="0+"),
        f("leader_id", INT32, default=-1),  # the quorum leader this node knows, -1 if none
        f("result", STRING, default=""),
        f("metadata_offset", INT64, default=-1),
    ],
)
