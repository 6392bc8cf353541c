import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Java KafkaConsumers with {@code group.protocol=consumer} (KIP-848), one thread each, scripted by
 * the consumer-protocol tests. Every ownership change a ConsumerRebalanceListener sees, every
 * record consumed and every offset committed gets a number from one counter shared by all
 * threads, so the test can replay them in the order they happened.
 *
 * Usage: {@code GroupProtocolClient <bootstrap>}, then one command per line on stdin, each
 * answered by one JSON line on stdout:
 * <pre>
 * member NAME GROUP TOPIC        a consumer subscribed to TOPIC; it polls, and commits
 *                                synchronously what each non-empty poll returned
 * pattern NAME GROUP REGEX       the same, subscribed to a broker-side RE2/J pattern
 *                                (SubscriptionPattern)
 * stop NAME                      close the consumer (its listener sees the revocation)
 * report                         every event so far: ownership changes, records, commits
 * </pre>
 */
public final class GroupProtocolClient {
    private final String bootstrap;
    private final Map<String, Member> members = new HashMap<>();
    private final AtomicLong sequence = new AtomicLong();
    private final List<String> events = new ArrayList<>();

    private GroupProtocolClient(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: GroupProtocolClient <bootstrap servers>");
            System.exit(2);
        }
        GroupProtocolClient client = new GroupProtocolClient(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            String answer;
            try {
                answer = client.handle(w);
            } catch (Exception e) {
                answer = "{\"ok\": false, \"error\": " + quote(e.toString()) + "}";
            }
            System.out.println(answer);
            System.out.flush();
        }
        for (Member m : client.members.values()) {
            m.stop();
        }
    }

    private String handle(String[] w) throws Exception {
        switch (w[0]) {
            case "member":
            case "pattern": {
                Member m = new Member(w[1], w[2], w[3], w[0].equals("pattern"));
                members.put(w[1], m);
                m.start();
                return "{\"ok\": true}";
            }
            case "stop": {
                Member m = members.remove(w[1]);
                String failure = m.stop();
                return "{\"ok\": " + (failure == null) + ", \"error\": " + quote(failure) + "}";
            }
            case "report": {
                synchronized (events) {
                    return "{\"ok\": true, \"events\": [" + String.join(", ", events) + "]}";
                }
            }
            default:
                return "{\"ok\": false, \"error\": \"unknown command " + w[0] + "\"}";
        }
    }

    private void event(String json) {
        synchronized (events) {
            events.add(json);
        }
    }

    private static String quote(String s) {
        if (s == null) {
            return "null";
        }
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    private static String partitions(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(quote(tp.topic() + ":" + tp.partition()));
        }
        return "[" + String.join(", ", out) + "]";
    }

    private final class Member implements ConsumerRebalanceListener {
        private final String name;
        private final String topicOrRegex;
        private final boolean regex;
        private final KafkaConsumer<String, String> consumer;
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final Thread thread;
        private volatile String failure;

        Member(String name, String group, String topicOrRegex, boolean regex) {
            this.name = name;
            this.topicOrRegex = topicOrRegex;
            this.regex = regex;
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            consumer = new KafkaConsumer<>(props);
            thread = new Thread(this::run, "member-" + name);
        }

        void start() {
            thread.start();
        }

        String stop() throws InterruptedException {
            running.set(false);
            thread.join(120_000);
            return thread.isAlive() ? "the consumer did not close in 120 s" : failure;
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            ownership("assigned", parts);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            ownership("revoked", parts);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            ownership("lost", parts);
        }

        private void ownership(String kind, Collection<TopicPartition> parts) {
            if (!parts.isEmpty()) {
                event("{\"seq\": " + sequence.incrementAndGet() + ", \"member\": " + quote(name) + ", \"kind\": \""
                    + kind + "\", \"partitions\": " + partitions(parts) + "}");
            }
        }

        private void run() {
            try {
                if (regex) {
                    consumer.subscribe(new SubscriptionPattern(topicOrRegex), this);
                } else {
                    consumer.subscribe(List.of(topicOrRegex), this);
                }
                while (running.get()) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    if (records.isEmpty()) {
                        continue;
                    }
                    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        event("{\"seq\": " + sequence.incrementAndGet() + ", \"member\": " + quote(name)
                            + ", \"kind\": \"record\", \"topic\": " + quote(r.topic()) + ", \"partition\": "
                            + r.partition() + ", \"offset\": " + r.offset() + ", \"value\": " + quote(r.value()) + "}");
                        next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    try {
                        consumer.commitSync(next);
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : next.entrySet()) {
                            event("{\"seq\": " + sequence.incrementAndGet() + ", \"member\": " + quote(name)
                                + ", \"kind\": \"commit\", \"topic\": " + quote(e.getKey().topic())
                                + ", \"partition\": " + e.getKey().partition() + ", \"offset\": "
                                + e.getValue().offset() + "}");
                        }
                    } catch (Exception e) {
                        // A commit refused while the assignment moves: the records are read again
                        // by the next owner, which the test allows (at least once).
                        event("{\"seq\": " + sequence.incrementAndGet() + ", \"member\": " + quote(name)
                            + ", \"kind\": \"commit_failed\", \"error\": " + quote(e.toString()) + "}");
                    }
                }
            } catch (Exception e) {
                failure = e.toString();
            } finally {
                consumer.close(Duration.ofSeconds(30));
            }
        }
    }
}
