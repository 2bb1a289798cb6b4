// A Kafka Streams word count for the streams-group tests: it reads lines
// from an input topic, splits them into words, counts each word through a
// repartition topic into a state store (with a changelog), and writes
// "word=count" to an output topic, exactly once.
//
// Usage: java -cp '<kafka libs>/*' StreamsWordCount.java BOOTSTRAP APP_ID
//            INPUT OUTPUT GROUP_PROTOCOL STATE_DIR [STORE [INSTANCE_ID]]
// STORE is "memory" (the default) or "rocksdb" (state kept on disk, whose
// offsets members report when they join); INSTANCE_ID makes the instance
// a static member (group.instance.id).
// It runs until killed (SIGTERM closes it cleanly and leaves the group)
// and prints "STATE <state>" on each state change.

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[4]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, -1);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        boolean onDisk = args.length > 6 && args[6].equals("rocksdb");
        if (args.length > 7) {
            props.put(StreamsConfig.consumerPrefix("group.instance.id"), args[7]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\s+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long>as(onDisk
                    ? Stores.persistentKeyValueStore("counts")
                    : Stores.inMemoryKeyValueStore("counts"))
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()))
            .toStream()
            .mapValues((word, count) -> word + "=" + count)
            .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        done.await();
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
