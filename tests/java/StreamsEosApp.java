import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.WindowStore;

/**
 * A Kafka Streams application with {@code processing.guarantee=exactly_once_v2}, run by
 * tests/cluster/test_streams_exactly_once.py (acceptance 3 of issue #16).
 *
 * <p>Usage: {@code StreamsEosApp <bootstrap> <application id> <state dir> <orders> <payments> <output>}.
 * It runs until its stdin says {@code close} or ends, then closes cleanly. Every state change is
 * one JSON line on stdout ({@code {"state": "RUNNING"}}), a replaced stream thread
 * {@code {"thread_error": "..."}}; logging goes to stderr.
 *
 * <p>The topology, whose output is deterministic as a multiset whatever the timing, the
 * rebalances and the crashes, so that an independent computation can predict it exactly:
 * <pre>
 * orders   (key user,    value "orderId,amount")  --selectKey(orderId)--> repartition
 * payments (key orderId, value "paymentId")
 * join within 5 s (inner, windowed stream-stream join: two window stores with changelogs)
 *   --> (orderId, "user,orderId,paymentId") --selectKey(user)--> repartition
 *   --> tumbling 10 s windows, count (window store with a changelog, caching off, so every
 *       joined record emits exactly one update: 1, 2, ..., n per user and window)
 *   --> output (key "user@windowStart", value count)
 * </pre>
 */
public final class StreamsEosApp {
    private StreamsEosApp() {
    }

    static Topology build(String orders, String payments, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        // orders: key user, value "orderId,amount" -> key orderId, value user (repartitioned
        // before the join, which needs both sides partitioned by order id).
        KStream<String, String> ordersByOrderId = builder
            .stream(orders, Consumed.with(Serdes.String(), Serdes.String()).withName("orders-source"))
            .map((user, value) -> KeyValue.pair(value.split(",")[0], user), Named.as("key-by-order"));
        KStream<String, String> paymentStream = builder
            .stream(payments, Consumed.with(Serdes.String(), Serdes.String()).withName("payments-source"));
        KStream<String, String> paid = ordersByOrderId.join(
            paymentStream,
            (user, paymentId) -> user + "," + paymentId,
            JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(5), Duration.ofHours(2)),
            StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String())
                .withName("order-payment").withStoreName("order-payment-store"));
        paid
            .selectKey((orderId, value) -> value.split(",")[0], Named.as("key-by-user"))
            .groupByKey(Grouped.with("paid-by-user", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofHours(2)))
            .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("paid-per-user-window")
                .withCachingDisabled())
            .toStream(Named.as("counts"))
            .map((window, count) -> KeyValue.pair(window.key() + "@" + window.window().start(), Long.toString(count)),
                 Named.as("format"))
            .to(output, Produced.with(Serdes.String(), Serdes.String()).withName("output-sink"));
        return builder.build();
    }

    private static void say(String json) {
        synchronized (System.out) {
            System.out.println(json);
            System.out.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: StreamsEosApp <bootstrap> <application id> <state dir> <orders> <payments> <output>");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // A crashed instance's partitions move on after 6 s (the broker's minimum) instead of 45.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.METADATA_MAX_AGE_CONFIG), 5000);
        props.put(StreamsConfig.producerPrefix("metadata.max.age.ms"), 5000);

        KafkaStreams streams = new KafkaStreams(build(args[3], args[4], args[5]), props);
        streams.setStateListener((now, before) -> say("{\"state\": " + Json.write(now.name()) + "}"));
        streams.setUncaughtExceptionHandler(exception -> {
            Throwable root = exception;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            say("{\"thread_error\": " + Json.write(exception.toString()) + ", \"root\": " + Json.write(root.toString()) + "}");
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().equals("close")) {
                break;
            }
        }
        boolean clean = streams.close(Duration.ofSeconds(60));
        say("{\"closed\": " + clean + "}");
        System.exit(clean ? 0 : 1);
    }
}
