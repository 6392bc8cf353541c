import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client (kafka-clients) scripted by the Python acceptance tests of transactions.
 *
 * Usage: {@code TxnClient <bootstrap>}, then one command per line on stdin; every command is
 * answered by exactly one JSON line on stdout: {@code {"ok": true, ...}} or
 * {@code {"ok": false, "error": "<exception class>", "chain": [...], "message": "..."}}.
 * The program exits at the end of its input. Words are separated by spaces; keys and values
 * carry none.
 *
 * <pre>
 * producer NAME TRANSACTIONAL_ID [key=value ...]   create a transactional producer
 * init NAME | begin NAME | commit NAME | abort NAME | close NAME
 * send NAME TOPIC PARTITION KEY VALUE               send and wait for the ack: offset
 * read ISOLATION TOPIC:PARTITIONS ...               read every partition from the beginning up to
 *                                                   its end offset for that isolation level
 *                                                   (read_committed: the last stable offset)
 * end_offsets ISOLATION TOPIC:PARTITIONS ...
 * transform NAME GROUP INPUT OUTPUT TOTAL ABORT_EVERY   consume-transform-produce (see below)
 * feature NAME                                      finalized level of a feature (0 if none)
 * set_feature NAME LEVEL                            upgrade or (safely) downgrade a feature
 * describe_txn TRANSACTIONAL_ID                     the coordinator's state, producer id and epoch
 * </pre>
 */
public final class TxnClient {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long DEADLINE_MS = 90_000;

    private final String bootstrap;
    private final Map<String, KafkaProducer<String, String>> producers = new HashMap<>();

    private TxnClient(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        TxnClient client = new TxnClient(CommandLoop.bootstrap("TxnClient", args));
        CommandLoop.run(client::execute);
        client.closeAll();
    }

    private Map<String, Object> execute(String[] w) throws Exception {
        Map<String, Object> answer = new LinkedHashMap<>();
        switch (w[0]) {
            case "producer": {
                Properties props = new Properties();
                props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, w[2]);
                props.put(ProducerConfig.CLIENT_ID_CONFIG, "txn-client-" + w[1]);
                props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                for (int i = 3; i < w.length; i++) {
                    String[] kv = w[i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                producers.put(w[1], new KafkaProducer<>(props));
                return answer;
            }
            case "init":
                producer(w[1]).initTransactions();
                return answer;
            case "begin":
                producer(w[1]).beginTransaction();
                return answer;
            case "commit":
                producer(w[1]).commitTransaction();
                return answer;
            case "abort":
                producer(w[1]).abortTransaction();
                return answer;
            case "close":
                producers.remove(w[1]).close(Duration.ofSeconds(10));
                return answer;
            case "send": {
                ProducerRecord<String, String> record =
                    new ProducerRecord<>(w[2], Integer.parseInt(w[3]), w[4], w[5]);
                RecordMetadata meta = producer(w[1]).send(record).get();
                answer.put("topic", meta.topic());
                answer.put("partition", meta.partition());
                answer.put("offset", meta.offset());
                return answer;
            }
            case "read":
                return read(w[1], partitions(w, 2));
            case "end_offsets": {
                try (KafkaConsumer<String, String> consumer = consumer(w[1], null)) {
                    answer.put("end_offsets", byName(consumer.endOffsets(partitions(w, 2))));
                }
                return answer;
            }
            case "transform":
                return transform(producer(w[1]), w[2], w[3], w[4], Integer.parseInt(w[5]), Integer.parseInt(w[6]));
            case "feature":
                try (Admin admin = admin()) {
                    FinalizedVersionRange range =
                        admin.describeFeatures().featureMetadata().get().finalizedFeatures().get(w[1]);
                    answer.put("level", range == null ? 0 : range.maxVersionLevel());
                }
                return answer;
            case "set_feature":
                try (Admin admin = admin()) {
                    short level = Short.parseShort(w[2]);
                    FinalizedVersionRange range =
                        admin.describeFeatures().featureMetadata().get().finalizedFeatures().get(w[1]);
                    short current = range == null ? 0 : range.maxVersionLevel();
                    FeatureUpdate.UpgradeType type = level < current
                        ? FeatureUpdate.UpgradeType.SAFE_DOWNGRADE : FeatureUpdate.UpgradeType.UPGRADE;
                    admin.updateFeatures(Map.of(w[1], new FeatureUpdate(level, type)), new UpdateFeaturesOptions())
                        .all().get();
                }
                return answer;
            case "describe_txn":
                try (Admin admin = admin()) {
                    TransactionDescription d = admin.describeTransactions(List.of(w[1])).description(w[1]).get();
                    answer.put("state", d.state().toString());
                    answer.put("producer_id", d.producerId());
                    answer.put("producer_epoch", d.producerEpoch());
                }
                return answer;
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }

    private Admin admin() {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    private KafkaProducer<String, String> producer(String name) {
        KafkaProducer<String, String> producer = producers.get(name);
        if (producer == null) {
            throw new IllegalArgumentException("no producer named " + name);
        }
        return producer;
    }

    private static List<TopicPartition> partitions(String[] w, int from) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = from; i < w.length; i++) {
            String[] tc = w[i].split(":");
            for (int p = 0; p < Integer.parseInt(tc[1]); p++) {
                out.add(new TopicPartition(tc[0], p));
            }
        }
        return out;
    }

    private KafkaConsumer<String, String> consumer(String isolation, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            // Several small transactions instead of one, so commits and aborts interleave.
            props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5");
        }
        return new KafkaConsumer<>(props);
    }

    private static Map<String, Object> byName(Map<TopicPartition, Long> offsets) {
        Map<String, Object> out = new LinkedHashMap<>();
        offsets.forEach((tp, offset) -> out.put(tp.topic() + "-" + tp.partition(), offset));
        return out;
    }

    private static Map<String, Object> record(ConsumerRecord<String, String> r) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("topic", r.topic());
        out.put("partition", r.partition());
        out.put("offset", r.offset());
        out.put("key", r.key());
        out.put("value", r.value());
        return out;
    }

    /** Everything from the beginning up to the end offsets of the isolation level, taken once
     *  at the start: for read_committed the last stable offset, which an open transaction holds
     *  back. The reached positions are part of the answer. */
    private Map<String, Object> read(String isolation, List<TopicPartition> tps) {
        Map<String, Object> answer = new LinkedHashMap<>();
        List<Object> records = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = consumer(isolation, null)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (!reached(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("did not reach the end offsets " + end + " within "
                        + DEADLINE_MS + " ms; got " + records.size() + " records");
                }
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    records.add(record(r));
                }
            }
            Map<TopicPartition, Long> positions = new LinkedHashMap<>();
            for (TopicPartition tp : tps) {
                positions.put(tp, consumer.position(tp));
            }
            answer.put("records", records);
            answer.put("end_offsets", byName(end));
            answer.put("positions", byName(positions));
        }
        return answer;
    }

    private static boolean reached(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    /**
     * The exactly-once loop: a read_committed consumer in GROUP reads INPUT; each poll's records
     * are written to OUTPUT (same partition, key kept, value "t(" + value + ")") in one
     * transaction together with the group's offsets (sendOffsetsToTransaction). Every
     * ABORT_EVERY-th transaction is aborted instead (0: never), after which the consumer rewinds
     * to the group's committed offsets and processes the records again. Stops once TOTAL input
     * records have been committed.
     */
    private Map<String, Object> transform(
        KafkaProducer<String, String> producer, String group, String input, String output, int total, int abortEvery
    ) {
        Map<String, Object> answer = new LinkedHashMap<>();
        List<Object> transactions = new ArrayList<>();
        int committedRecords = 0;
        try (KafkaConsumer<String, String> consumer = consumer("read_committed", group)) {
            consumer.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (committedRecords < total) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("committed only " + committedRecords + " of " + total
                        + " input records within " + DEADLINE_MS + " ms");
                }
                ConsumerRecords<String, String> records = consumer.poll(POLL);
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                List<Object> inputs = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(), "t(" + r.value() + ")"));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    inputs.add(r.value());
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                // Aborting drops records still waiting in the producer's buffer; flushing first
                // puts every attempt in the log, so read_uncommitted sees aborted ones too.
                producer.flush();
                Map<String, Object> txn = new LinkedHashMap<>();
                boolean abort = abortEvery > 0 && (transactions.size() + 1) % abortEvery == 0;
                if (abort) {
                    producer.abortTransaction();
                    rewind(consumer);
                } else {
                    producer.commitTransaction();
                    committedRecords += records.count();
                }
                txn.put("outcome", abort ? "abort" : "commit");
                txn.put("inputs", inputs);
                transactions.add(txn);
            }
        }
        answer.put("transactions", transactions);
        answer.put("committed_records", committedRecords);
        return answer;
    }

    /** After an abort: back to the group's committed offsets (the beginning if none). */
    private static void rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) {
                consumer.seekToBeginning(List.of(tp));
            } else {
                consumer.seek(tp, om.offset());
            }
        }
    }

    private void closeAll() {
        for (KafkaProducer<String, String> producer : producers.values()) {
            producer.close(Duration.ofSeconds(5));
        }
    }
}
