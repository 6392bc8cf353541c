import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Share-group throughput (issue #21's benchmark S1): THREADS KafkaShareConsumers of one share
 * group, one per thread, poll as fast as they can with implicit acknowledgement (every record a
 * poll returned is accepted with the next poll, as Kafka's ShareConsumerPerformance does).
 * Records whose value starts with "warm" are the harness's warm-up (a share group starts at the
 * log end, so the harness produces warm-up records until every partition delivered one); the
 * others are counted.
 *
 * Usage: {@code ShareThroughput <bootstrap>}, then commands on stdin, each answered by one JSON
 * line on stdout:
 * <pre>
 * start GROUP TOPIC THREADS      start the consumers
 * warm                           the partitions a warm-up record was seen from
 * pause                          stop polling (the records to measure are then produced, so
 *                                the consumers read a backlog, not the producer's pace)
 * resume                         poll again
 * wait COUNT TIMEOUT_MS          until COUNT records were counted, then commitSync on every
 *                                consumer; answers the count and the seconds from the first
 *                                counted record to the last acknowledgement committed
 * stop                           close the consumers
 * </pre>
 */
public final class ShareThroughput {
    private final String bootstrap;
    private final List<Thread> threads = new ArrayList<>();
    private final List<KafkaShareConsumer<byte[], byte[]>> consumers = new ArrayList<>();
    private final Set<Integer> warmPartitions = ConcurrentHashMap.newKeySet();
    private final AtomicLong counted = new AtomicLong();
    private final AtomicLong firstNanos = new AtomicLong(0);
    private final AtomicBoolean running = new AtomicBoolean(true);
    private final AtomicBoolean committing = new AtomicBoolean(false);
    private final AtomicBoolean paused = new AtomicBoolean(false);
    private final AtomicLong committed = new AtomicLong();
    private volatile String failure;

    private ShareThroughput(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        ShareThroughput app = new ShareThroughput(CommandLoop.bootstrap("ShareThroughput", args));
        CommandLoop.run(app::execute);
        app.stop();
    }

    private Map<String, Object> execute(String[] w) throws Exception {
        Map<String, Object> answer = new LinkedHashMap<>();
        switch (w[0]) {
            case "start":
                start(w[1], w[2], Integer.parseInt(w[3]));
                break;
            case "warm":
                answer.put("partitions", new ArrayList<>(warmPartitions));
                answer.put("failure", failure);
                break;
            case "pause":
                paused.set(true);
                Thread.sleep(300);  // a poll under way (at most 100 ms) returns first
                break;
            case "resume":
                paused.set(false);
                break;
            case "wait":
                waitFor(Long.parseLong(w[1]), Long.parseLong(w[2]), answer);
                break;
            case "stop":
                stop();
                break;
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
        return answer;
    }

    private void start(String group, String topic, int count) {
        for (int i = 0; i < count; i++) {
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-" + i);
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            props.put("share.acknowledgement.mode", "implicit");
            KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props);
            consumer.subscribe(List.of(topic));
            consumers.add(consumer);
            Thread t = new Thread(() -> run(consumer), "share-" + i);
            threads.add(t);
            t.start();
        }
    }

    private void run(KafkaShareConsumer<byte[], byte[]> consumer) {
        boolean committedHere = false;
        try {
            while (running.get()) {
                if (committing.get()) {
                    if (!committedHere) {
                        consumer.commitSync(Duration.ofSeconds(30));
                        committedHere = true;
                        committed.incrementAndGet();
                    }
                    Thread.sleep(10);
                    continue;
                }
                if (paused.get()) {
                    Thread.sleep(5);
                    continue;
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                long now = System.nanoTime();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] v = r.value();
                    if (v != null && v.length >= 4 && v[0] == 'w' && v[1] == 'a' && v[2] == 'r' && v[3] == 'm') {
                        warmPartitions.add(r.partition());
                    } else {
                        firstNanos.compareAndSet(0, now);
                        counted.incrementAndGet();
                    }
                }
            }
        } catch (Exception e) {
            failure = e.toString();
        }
    }

    private void waitFor(long count, long timeoutMs, Map<String, Object> answer) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (counted.get() < count && failure == null && System.currentTimeMillis() < deadline) {
            Thread.sleep(5);
        }
        if (counted.get() < count) {
            throw new IllegalStateException("counted " + counted.get() + " of " + count
                + (failure == null ? "" : "; a consumer failed: " + failure));
        }
        // Acknowledgements of the last records ride on the next poll: commit them everywhere.
        committing.set(true);
        while (committed.get() < consumers.size() && failure == null && System.currentTimeMillis() < deadline) {
            Thread.sleep(1);
        }
        long end = System.nanoTime();
        if (committed.get() < consumers.size()) {
            throw new IllegalStateException("commitSync did not finish");
        }
        answer.put("records", counted.get());
        answer.put("seconds", (end - firstNanos.get()) / 1e9);
    }

    private void stop() throws InterruptedException {
        running.set(false);
        for (Thread t : threads) {
            t.join(30_000);
        }
        for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
            c.close(Duration.ofSeconds(10));
        }
        threads.clear();
        consumers.clear();
    }
}
