import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Consumer group members (KafkaConsumer, either group protocol) and background producers in one
 * JVM, scripted by the group protocol acceptance tests (issue #21: KIP-848 members joining and
 * leaving while records flow, regex subscriptions, online migration between the protocols).
 *
 * Usage: {@code GroupMembers <bootstrap>}, then one command per line on stdin, each answered by
 * one JSON line on stdout ({@code {"ok": true, ...}} or {@code {"ok": false, "error": ...}}), as
 * TxnClient.
 *
 * Each member runs on its own thread: poll, remember every record, commit what it polled
 * (commitSync), again and again. Its ConsumerRebalanceListener records each assignment change
 * as an event numbered from one counter shared by every member of the process. The callbacks
 * run on the members' polling threads, and a partition moves from one member to another only
 * through the coordinator (the giver's revocation callback returns before its client tells the
 * coordinator, which only then hands the partition out), so the event numbers order the
 * revocation before the matching assignment: a test replays the events in that order to check
 * that no partition is ever owned by two members, without comparing clocks.
 *
 * <pre>
 * member NAME GROUP SUBSCRIPTION [key=value ...]   start a member; SUBSCRIPTION is topics:T1,T2,
 *                                                  pattern:RE2J (SubscriptionPattern, the broker
 *                                                  resolves it) or regex:JAVA (java.util.regex,
 *                                                  resolved by the client); key=value are consumer
 *                                                  properties (group.protocol=consumer ...)
 * close NAME                                       stop polling and close the member (it leaves
 *                                                  the group, revoking its partitions first)
 * status                                           every member: owned partitions, records
 *                                                  consumed, running, errors; every producer's count
 * events SINCE                                     the assignment events numbered SINCE or later
 * consumed NAME                                    the records a member consumed: [topic, partition, offset],
 *                                                  and those whose commit did not succeed
 * produce_start NAME TOPIC PARTITIONS PAUSE_MS     a producer sending to the partitions in turn,
 *                                                  one record every PAUSE_MS, until stopped
 * produce_stop NAME                                stop it; answers every acknowledged record
 *                                                  [topic, partition, offset] and the failures
 * </pre>
 */
public final class GroupMembers {
    private static final Duration POLL = Duration.ofMillis(100);

    private final String bootstrap;
    private final AtomicLong sequence = new AtomicLong();
    private final List<Map<String, Object>> events = new ArrayList<>();
    private final Map<String, Member> members = new LinkedHashMap<>();
    private final Map<String, Producer> producers = new LinkedHashMap<>();

    private GroupMembers(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        GroupMembers program = new GroupMembers(CommandLoop.bootstrap("GroupMembers", args));
        CommandLoop.run(program::execute);
        program.closeAll();
    }

    private Map<String, Object> execute(String[] w) throws Exception {
        Map<String, Object> answer = new LinkedHashMap<>();
        switch (w[0]) {
            case "member": {
                if (members.containsKey(w[1]) && members.get(w[1]).thread.isAlive()) {
                    throw new IllegalArgumentException("member " + w[1] + " is running");
                }
                Properties props = new Properties();
                props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                props.put(ConsumerConfig.GROUP_ID_CONFIG, w[2]);
                props.put(ConsumerConfig.CLIENT_ID_CONFIG, w[1]);
                props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                for (int i = 4; i < w.length; i++) {
                    String[] kv = w[i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                Member member = new Member(w[1], w[3], props);
                members.put(w[1], member);
                member.thread.start();
                break;
            }
            case "close": {
                Member member = members.get(w[1]);
                member.stopping = true;
                member.consumer.wakeup();
                member.thread.join(60_000);
                answer.put("closed", !member.thread.isAlive());
                answer.put("errors", member.errors());
                break;
            }
            case "status": {
                Map<String, Object> out = new LinkedHashMap<>();
                for (Member m : members.values()) {
                    Map<String, Object> s = new LinkedHashMap<>();
                    s.put("owned", m.owned());
                    s.put("consumed", m.consumedCount());
                    s.put("running", m.thread.isAlive() && !m.stopping);
                    s.put("errors", m.errors());
                    out.put(m.name, s);
                }
                answer.put("members", out);
                Map<String, Object> produced = new LinkedHashMap<>();
                for (Producer p : producers.values()) {
                    produced.put(p.name, p.ackedCount());
                }
                answer.put("produced", produced);
                break;
            }
            case "events": {
                long since = Long.parseLong(w[1]);
                List<Object> out = new ArrayList<>();
                synchronized (events) {
                    for (Map<String, Object> e : events) {
                        if ((Long) e.get("seq") >= since) {
                            out.add(e);
                        }
                    }
                }
                answer.put("events", out);
                break;
            }
            case "consumed": {
                Member member = members.get(w[1]);
                answer.put("records", member.consumed());
                answer.put("uncommitted", member.uncommitted());
                break;
            }
            case "produce_start": {
                Producer p = new Producer(w[1], w[2], Integer.parseInt(w[3]), Long.parseLong(w[4]));
                producers.put(w[1], p);
                p.thread.start();
                break;
            }
            case "produce_stop": {
                Producer p = producers.get(w[1]);
                p.stopping = true;
                p.thread.join(60_000);
                answer.put("acked", p.acked());
                answer.put("failed", p.failures());
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
        return answer;
    }

    private void event(String member, String kind, Collection<TopicPartition> partitions) {
        // The number is taken under the lock that orders the list, so the list is in number order.
        synchronized (events) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("seq", sequence.getAndIncrement());
            e.put("member", member);
            e.put("kind", kind);
            e.put("partitions", names(partitions));
            events.add(e);
        }
    }

    private static List<String> names(Collection<TopicPartition> partitions) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            out.add(tp.topic() + ":" + tp.partition());
        }
        out.sort(null);
        return out;
    }

    /** One group member polling on its own thread. */
    private final class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final String subscription;
        final Thread thread;
        volatile boolean stopping;
        private final Set<TopicPartition> owned = new java.util.HashSet<>();
        private final List<List<Object>> consumed = new ArrayList<>();
        // Records polled whose commit failed (or was cut short by close): another member may read them again.
        private final List<List<Object>> uncommitted = new ArrayList<>();
        private final List<String> errors = new ArrayList<>();

        Member(String name, String subscription, Properties props) {
            this.name = name;
            this.subscription = subscription;
            this.consumer = new KafkaConsumer<>(props);
            this.thread = new Thread(this, "member-" + name);
            this.thread.setDaemon(true);
        }

        @Override
        public void run() {
            try {
                subscribe();
                while (!stopping) {
                    ConsumerRecords<String, String> records;
                    try {
                        records = consumer.poll(POLL);
                    } catch (WakeupException e) {
                        continue;
                    } catch (Exception e) {
                        error("poll", e);
                        continue;
                    }
                    if (records.isEmpty()) {
                        continue;
                    }
                    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                    List<List<Object>> polled = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : records) {
                        polled.add(List.of(r.topic(), r.partition(), r.offset()));
                        next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    synchronized (this) {
                        consumed.addAll(polled);
                    }
                    try {
                        consumer.commitSync(next);
                    } catch (Exception e) {
                        // A WakeupException is close asked while committing: the loop ends.
                        if (!(e instanceof WakeupException)) {
                            error("commit", e);
                        }
                        synchronized (this) {
                            uncommitted.addAll(polled);
                        }
                    }
                }
            } catch (Exception e) {
                error("member", e);
            } finally {
                try {
                    consumer.close(Duration.ofSeconds(30));
                } catch (Exception e) {
                    error("close", e);
                }
                event(name, "closed", List.of());
            }
        }

        private void subscribe() {
            if (subscription.startsWith("topics:")) {
                consumer.subscribe(List.of(subscription.substring("topics:".length()).split(",")), this);
            } else if (subscription.startsWith("pattern:")) {
                consumer.subscribe(new SubscriptionPattern(subscription.substring("pattern:".length())), this);
            } else if (subscription.startsWith("regex:")) {
                consumer.subscribe(Pattern.compile(subscription.substring("regex:".length())), this);
            } else {
                throw new IllegalArgumentException("subscription " + subscription);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            // Everything polled was committed after its poll: nothing is left to commit here.
            synchronized (this) {
                owned.removeAll(partitions);
            }
            // Numbered as the callback returns: the member processes nothing of them after this.
            event(name, "revoked", partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            // Numbered as the callback starts, before the member reads any of them.
            event(name, "assigned", partitions);
            synchronized (this) {
                owned.addAll(partitions);
            }
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            synchronized (this) {
                owned.removeAll(partitions);
            }
            event(name, "lost", partitions);
        }

        synchronized List<String> owned() {
            return names(owned);
        }

        synchronized int consumedCount() {
            return consumed.size();
        }

        synchronized List<Object> consumed() {
            return new ArrayList<>(consumed);
        }

        synchronized List<Object> uncommitted() {
            return new ArrayList<>(uncommitted);
        }

        synchronized List<String> errors() {
            return new ArrayList<>(errors);
        }

        private synchronized void error(String where, Exception e) {
            // Bounded: a member failing in a loop must not fill the heap.
            if (errors.size() < 50) {
                errors.add(where + ": " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
    }

    /** A producer sending to the partitions of a topic in turn until stopped. */
    private final class Producer implements Runnable {
        final String name;
        final String topic;
        final int partitions;
        final long pauseMs;
        final Thread thread;
        volatile boolean stopping;
        private final KafkaProducer<String, String> producer;
        private final List<List<Object>> acked = new ArrayList<>();
        private final List<String> failures = new ArrayList<>();

        Producer(String name, String topic, int partitions, long pauseMs) {
            this.name = name;
            this.topic = topic;
            this.partitions = partitions;
            this.pauseMs = pauseMs;
            Properties props = new Properties();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ProducerConfig.CLIENT_ID_CONFIG, name);
            props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            this.producer = new KafkaProducer<>(props);
            this.thread = new Thread(this, "producer-" + name);
            this.thread.setDaemon(true);
        }

        @Override
        public void run() {
            long i = 0;
            try {
                while (!stopping) {
                    int partition = (int) (i % partitions);
                    String value = name + "-" + i;
                    producer.send(new ProducerRecord<>(topic, partition, null, value), (metadata, e) -> {
                        synchronized (this) {
                            if (e != null) {
                                failures.add(value + ": " + e);
                            } else {
                                acked.add(List.of(metadata.topic(), metadata.partition(), metadata.offset()));
                            }
                        }
                    });
                    i++;
                    Thread.sleep(pauseMs);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                producer.flush();
                producer.close(Duration.ofSeconds(30));
            }
        }

        synchronized int ackedCount() {
            return acked.size();
        }

        synchronized List<Object> acked() {
            return new ArrayList<>(acked);
        }

        synchronized List<String> failures() {
            return new ArrayList<>(failures);
        }
    }

    private void closeAll() throws InterruptedException {
        for (Producer p : producers.values()) {
            p.stopping = true;
        }
        for (Member m : members.values()) {
            m.stopping = true;
            m.consumer.wakeup();
        }
        for (Producer p : producers.values()) {
            p.thread.join(30_000);
        }
        for (Member m : members.values()) {
            m.thread.join(30_000);
        }
    }
}
