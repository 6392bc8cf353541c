import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's share consumer (KafkaShareConsumer, KIP-932) scripted by the share group tests.
 *
 * Usage: {@code ShareClient <bootstrap>}, then one command per line on stdin, each answered by
 * one JSON line on stdout ({@code {"ok": true, ...}} or {@code {"ok": false, "error": ...}}),
 * as TxnClient. Consumers acknowledge explicitly ({@code share.acknowledgement.mode=explicit}).
 *
 * <pre>
 * consumer NAME GROUP TOPIC [key=value ...]   a share consumer subscribed to TOPIC
 * poll NAME TIMEOUT_MS DEFAULT [VALUE=TYPE ...] poll once and acknowledge every record returned:
 *                                             TYPE (accept, release, reject) given for its value,
 *                                             else DEFAULT; then commitSync. Answers the records
 *                                             (partition, offset, value, delivery count, type)
 *                                             and the partitions whose acknowledgement failed
 * hold NAME TIMEOUT_MS                        poll once and acknowledge nothing (the process is
 *                                             then killed while it holds the records)
 * produce TOPIC PARTITION VALUE ...           send values to a partition (one batch) and wait for the acks
 * offsets GROUP                               the group's share-partition start offsets and lag
 *                                             (Admin.listShareGroupOffsets: the durable state)
 * close NAME
 * </pre>
 */
public final class ShareClient {
    private final String bootstrap;
    private final Map<String, KafkaShareConsumer<String, String>> consumers = new HashMap<>();
    private KafkaProducer<String, String> producer;
    private Admin admin;

    private ShareClient(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        ShareClient client = new ShareClient(CommandLoop.bootstrap("ShareClient", args));
        CommandLoop.run(client::execute);
        client.closeAll();
    }

    private Map<String, Object> execute(String[] w) throws Exception {
        Map<String, Object> answer = new LinkedHashMap<>();
        switch (w[0]) {
            case "consumer": {
                Properties props = new Properties();
                props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                props.put(ConsumerConfig.GROUP_ID_CONFIG, w[2]);
                props.put(ConsumerConfig.CLIENT_ID_CONFIG, w[1]);
                props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                props.put("share.acknowledgement.mode", "explicit");
                for (int i = 4; i < w.length; i++) {
                    String[] kv = w[i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props);
                consumer.subscribe(List.of(w[3]));
                consumers.put(w[1], consumer);
                break;
            }
            case "poll": {
                KafkaShareConsumer<String, String> consumer = consumers.get(w[1]);
                Map<String, AcknowledgeType> rules = new HashMap<>();
                for (int i = 4; i < w.length; i++) {
                    String[] kv = w[i].split("=", 2);
                    rules.put(kv[0], type(kv[1]));
                }
                AcknowledgeType fallback = type(w[3]);
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(Long.parseLong(w[2])));
                List<Object> out = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    AcknowledgeType ack = rules.getOrDefault(r.value(), fallback);
                    consumer.acknowledge(r, ack);
                    Map<String, Object> rec = record(r);
                    rec.put("ack", ack.toString());
                    out.add(rec);
                }
                List<Object> failed = new ArrayList<>();
                if (!out.isEmpty()) {
                    Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
                        if (e.getValue().isPresent()) {
                            failed.add(e.getKey().partition() + ": " + e.getValue().get());
                        }
                    }
                }
                answer.put("records", out);
                answer.put("failed", failed);
                break;
            }
            case "hold": {
                ConsumerRecords<String, String> records = consumers.get(w[1]).poll(Duration.ofMillis(Long.parseLong(w[2])));
                List<Object> out = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    out.add(record(r));
                }
                answer.put("records", out);
                break;
            }
            case "produce": {
                if (producer == null) {
                    Properties props = new Properties();
                    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                    // The values of one command go as one batch: appended together, a waiting
                    // share fetch sees them all at once.
                    props.put(ProducerConfig.LINGER_MS_CONFIG, "100");
                    producer = new KafkaProducer<>(props);
                }
                int partition = Integer.parseInt(w[2]);
                for (int i = 3; i < w.length; i++) {
                    producer.send(new ProducerRecord<>(w[1], partition, null, w[i]));
                }
                producer.flush();
                break;
            }
            case "offsets": {
                if (admin == null) {
                    Properties props = new Properties();
                    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                    admin = Admin.create(props);
                }
                Map<TopicPartition, SharePartitionOffsetInfo> infos = admin
                        .listShareGroupOffsets(Map.of(w[1], new ListShareGroupOffsetsSpec()))
                        .partitionsToOffsetInfo(w[1]).get(30, TimeUnit.SECONDS);
                List<Object> out = new ArrayList<>();
                for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : infos.entrySet()) {
                    Map<String, Object> info = new LinkedHashMap<>();
                    info.put("topic", e.getKey().topic());
                    info.put("partition", e.getKey().partition());
                    // A share-partition without state yet comes back without an entry (null).
                    info.put("start_offset", e.getValue() == null ? -1 : e.getValue().startOffset());
                    info.put("lag", e.getValue() == null ? -1 : e.getValue().lag().orElse(-1L));
                    out.add(info);
                }
                answer.put("partitions", out);
                break;
            }
            case "close": {
                KafkaShareConsumer<String, String> consumer = consumers.remove(w[1]);
                consumer.close(Duration.ofSeconds(10));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
        return answer;
    }

    private static AcknowledgeType type(String name) {
        return AcknowledgeType.valueOf(name.toUpperCase());
    }

    private static Map<String, Object> record(ConsumerRecord<String, String> r) {
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("partition", r.partition());
        rec.put("offset", r.offset());
        rec.put("value", r.value());
        rec.put("delivery_count", r.deliveryCount().map(Short::intValue).orElse(-1));
        return rec;
    }

    private void closeAll() {
        for (KafkaShareConsumer<String, String> consumer : consumers.values()) {
            consumer.close(Duration.ofSeconds(5));
        }
        if (producer != null) {
            producer.close(Duration.ofSeconds(5));
        }
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
        }
    }
}
