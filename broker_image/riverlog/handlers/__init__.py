"""Request handlers, one module per API family, and the table that binds them to the server."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.messages import MESSAGES
from ..server.dispatch import Api, RequestContext
from .acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from .api_versions import handle_api_versions
from .client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from .cluster_info import handle_describe_cluster, handle_describe_log_dirs, handle_elect_leaders
from .configs import handle_alter_configs, handle_describe_configs, handle_incremental_alter_configs
from .consumer_groups import handle_consumer_group_describe, handle_consumer_group_heartbeat
from .features import handle_update_features
from .fetch import handle_fetch
from .group_offsets import handle_offset_commit, handle_offset_delete, handle_offset_fetch, handle_txn_offset_commit
from .groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_sync_group,
)
from .host import BrokerHost, QuorumHost
from .list_offsets import handle_list_offsets
from .metadata import handle_describe_topic_partitions, handle_metadata
from .produce import handle_produce
from .producer_ids import handle_describe_producers, handle_init_producer_id
from .quorum import (
    handle_begin_quorum_epoch,
    handle_controller_api_versions,
    handle_controller_call,
    handle_controller_fetch,
    handle_describe_quorum,
    handle_end_quorum_epoch,
    handle_fetch_snapshot,
    handle_vote,
)
from .reassignments import handle_alter_partition_reassignments, handle_list_partition_reassignments
from .records_admin import handle_delete_records, handle_offset_for_leader_epoch
from .sasl import handle_sasl_authenticate, handle_sasl_handshake
from .scram import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials
from .share_fetch import handle_share_acknowledge, handle_share_fetch
from .share_groups import (
    handle_alter_share_group_offsets,
    handle_delete_share_group_offsets,
    handle_describe_share_group_offsets,
    handle_share_group_describe,
    handle_share_group_heartbeat,
)
from .share_state import (
    handle_delete_share_group_state,
    handle_initialize_share_group_state,
    handle_read_share_group_state,
    handle_read_share_group_state_summary,
    handle_write_share_group_state,
)
from .topics import handle_create_partitions, handle_create_topics, handle_delete_topics
from .transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
)
from .txn_markers import handle_write_txn_markers

BrokerHandler = Callable[[BrokerHost, RequestContext, dict[str, Any]], Awaitable[dict[str, Any] | None]]

# The metadata quorum's APIs, served by brokers and dedicated controllers alike.
QUORUM_HANDLERS: dict[ApiKey, Callable[[QuorumHost, RequestContext, dict[str, Any]],
                                       Awaitable[dict[str, Any] | None]]] = {
    ApiKey.VOTE: handle_vote,
    ApiKey.BEGIN_QUORUM_EPOCH: handle_begin_quorum_epoch,
    ApiKey.END_QUORUM_EPOCH: handle_end_quorum_epoch,
    ApiKey.FETCH_SNAPSHOT: handle_fetch_snapshot,
    ApiKey.DESCRIBE_QUORUM: handle_describe_quorum,
    ApiKey.RIVERLOG_CONTROLLER_CALL: handle_controller_call,
}

HANDLERS: dict[ApiKey, BrokerHandler] = {
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.METADATA: handle_metadata,
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,  # KIP-932 share groups
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: handle_delete_share_group_offsets,
    ApiKey.SHARE_FETCH: handle_share_fetch,  # at the partition leader (share/)
    ApiKey.SHARE_ACKNOWLEDGE: handle_share_acknowledge,
    # The share coordinator's RPCs (share/coordinator.py), from partition leaders.
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: handle_initialize_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE: handle_read_share_group_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: handle_write_share_group_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: handle_delete_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: handle_read_share_group_state_summary,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    # Transactions (the transaction coordinator; InitProducerId above).
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,  # inter-broker: coordinator to partition leaders
    ApiKey.UPDATE_FEATURES: handle_update_features,  # finalized features (transaction.version)
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,  # authentication (security/authenticator.py)
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,  # authorization (security/acl.py, controller/acls.py)
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,  # enforced by quotas/
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    # The metadata quorum (Fetch on __cluster_metadata goes through handle_fetch too).
    **QUORUM_HANDLERS,
}


# Advertised minimum versions that differ from what we decode. Kafka 4 still advertises
# Produce from v0 (and rejects v0-2 when used) because librdkafka refuses to produce compressed
# batches to a broker whose Produce range does not start at 0 (KAFKA-18659).
ADVERTISED_MIN = {ApiKey.PRODUCE: 0}


def build_apis(broker: BrokerHost) -> dict[int, Api]:
    return _bind(HANDLERS, broker)


# A dedicated controller (process.roles=controller) serves only the metadata quorum's APIs.
CONTROLLER_HANDLERS: dict[ApiKey, Callable[[QuorumHost, RequestContext, dict[str, Any]],
                                           Awaitable[dict[str, Any] | None]]] = {
    ApiKey.API_VERSIONS: handle_controller_api_versions,
    ApiKey.FETCH: handle_controller_fetch,
    **QUORUM_HANDLERS,
}


def build_controller_apis(node: QuorumHost) -> dict[int, Api]:
    return _bind(CONTROLLER_HANDLERS, node)


def _bind(table: Mapping[ApiKey, Callable[..., Awaitable[dict[str, Any] | None]]], host: object) -> dict[int, Api]:
    apis: dict[int, Api] = {}
    for key, fn in table.items():
        request, response = MESSAGES[key]
        apis[key] = Api(int(key), request, response, functools.partial(fn, host),
                        ADVERTISED_MIN.get(key, request.valid[0]), request.valid[1])
    return apis
