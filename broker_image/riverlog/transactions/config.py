"""Settings of the transaction coordinator, read once from the broker's Kafka-named properties."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig
from ..security.client_config import ClientSecurity, inter_broker_security


@dataclass(frozen=True)
class TxnConfig:
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000
    max_timeout_ms: int = 900_000
    topic_num_partitions: int = 50
    topic_replication_factor: int = 3
    topic_min_isr: int = 2
    topic_segment_bytes: int = 100 * 1024 * 1024
    load_buffer_size: int = 5 * 1024 * 1024
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    # How long an append to __transaction_state may wait for the ISR (Kafka: request.timeout.ms).
    write_timeout_ms: int = 30_000
    # Marker requests: answer timeout, and the pause before another round to leaders that failed.
    marker_request_timeout_ms: int = 30_000
    marker_retry_backoff_ms: int = 100
    # TLS and SASL towards other brokers (markers, partition adds): the inter-broker listener's.
    security: ClientSecurity | None = None

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> TxnConfig:
        return cls(
            security=inter_broker_security(config),
            transactional_id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
            max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            topic_num_partitions=config.get_int("transaction.state.log.num.partitions"),
            topic_replication_factor=config.get_int("transaction.state.log.replication.factor"),
            topic_min_isr=config.get_int("transaction.state.log.min.isr"),
            topic_segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
            load_buffer_size=config.get_int("transaction.state.log.load.buffer.size"),
            abort_timed_out_interval_ms=config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_interval_ms=config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms"),
        )
