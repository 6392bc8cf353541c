"""One module per API, each exporting REQUEST and RESPONSE; ``MESSAGES`` indexes them by key.

The codec knows more APIs than the broker serves: only those with a handler are advertised.
"""

from __future__ import annotations

import importlib

from ..schema import Message

# Module names in this package; each defines REQUEST and RESPONSE for one API key.
MODULES = (
    "api_versions",
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "offset_for_leader_epoch",
    "init_producer_id",
    "describe_cluster",
    "delete_records",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_log_dirs",
    "describe_producers",
    "find_coordinator",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "describe_groups",
    "list_groups",
    "offset_commit",
    "offset_fetch",
    "delete_groups",
    "offset_delete",
    # KIP-848 consumer groups (coordinator/consumer_*.py).
    "consumer_group_heartbeat",
    "consumer_group_describe",
    # KIP-932 share groups: client APIs, share-state RPCs, admin calls (only those with a
    # handler are advertised).
    "share_group_heartbeat",
    "share_group_describe",
    "share_fetch",
    "share_acknowledge",
    "initialize_share_group_state",
    "read_share_group_state",
    "write_share_group_state",
    "delete_share_group_state",
    "read_share_group_state_summary",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "txn_offset_commit",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_topic_partitions",
    "update_features",
    # Authentication (security/sasl/).
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    # Authorization (security/acl.py, controller/acls.py).
    "describe_acls",
    "create_acls",
    "delete_acls",
    # Client quotas (controller/client_quotas.py, quotas/).
    "describe_client_quotas",
    "alter_client_quotas",
    # Transactions (the transaction coordinator, transactions/).
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "describe_transactions",
    "list_transactions",
    "write_txn_markers",  # written by partition leaders (handlers/txn_markers.py)
    # KRaft: the quorum's own RPCs and the broker-to-controller APIs.
    "vote",
    "begin_quorum_epoch",
    "end_quorum_epoch",
    "describe_quorum",
    "alter_partition",
    "fetch_snapshot",
    "broker_registration",
    "broker_heartbeat",
    "allocate_producer_ids",
    "controller_call",
)


def _load() -> dict[int, tuple[Message, Message]]:
    table: dict[int, tuple[Message, Message]] = {}
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        request: Message = module.REQUEST
        response: Message = module.RESPONSE
        table[request.api_key] = (request, response)
    return table


MESSAGES: dict[int, tuple[Message, Message]] = _load()
