// Kafka 4.4's share consumer features that need ShareFetch and
// ShareAcknowledge v2, for the share-group tests: the record-limit acquire
// mode (KIP-1206) and renew acknowledgements (KIP-1222).
//
// Usage: java -cp '<kafka libs>/*' ShareRenew.java BOOTSTRAP TOPIC GROUP LOCK_MS
//
// It produces ten records in one batch to TOPIC (one partition), then:
// - member "limited" (share.acquire.mode=record_limit, max.poll.records=3)
//   polls once and prints "LIMITED <offset>:<delivery count> ...";
// - for three lock durations it renews those records every third of one
//   (printing "RENEWED <offset>:<delivery count> ..." as the poll after
//   each renewal hands them back), while member "batched"
//   (the default batch_optimized mode, max.poll.records=3) polls and
//   accepts what it gets ("BATCHED ..." per poll);
// - "limited" then accepts its records ("ACCEPTED ...") and "batched"
//   polls once more for anything left; "DONE" ends the run.
// A failed acknowledgement prints "ACK-ERROR <partition> <error>" and exits 1.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareRenew {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        long lockMs = Long.parseLong(args[3]);
        produceOneBatch(bootstrap, topic);
        try (KafkaShareConsumer<String, String> limited = consumer(bootstrap, group, "record_limit");
             KafkaShareConsumer<String, String> batched = consumer(bootstrap, group, "batch_optimized")) {
            limited.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> held = pollUntilSome(limited, Duration.ofSeconds(60));
            System.out.println("LIMITED " + describe(held));
            System.out.flush();

            batched.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + 3 * lockMs;
            for (int round = 0; System.currentTimeMillis() < until; round++) {
                for (ConsumerRecord<String, String> r : held) {
                    limited.acknowledge(r, AcknowledgeType.RENEW);
                }
                // Renewals go on a ShareAcknowledge (commitSync) or on the
                // next poll's ShareFetch; either way that poll hands the
                // renewed records back, to be acknowledged again.
                if (round % 2 == 0) {
                    check(limited.commitSync());
                }
                held = pollUntilSome(limited, Duration.ofSeconds(10));
                System.out.println("RENEWED " + describe(held));
                System.out.flush();
                acceptAll(batched, batched.poll(Duration.ofMillis(lockMs / 3)));
            }
            for (ConsumerRecord<String, String> r : held) {
                limited.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            check(limited.commitSync());
            System.out.println("ACCEPTED " + describe(held));
            acceptAll(batched, batched.poll(Duration.ofMillis(2 * lockMs)));
        }
        System.out.println("DONE");
    }

    static void produceOneBatch(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("linger.ms", "500");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
            }
            producer.flush();
        }
    }

    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String mode) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("share.acquire.mode", mode);
        p.put("max.poll.records", "3");
        p.put("client.id", mode);
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static List<ConsumerRecord<String, String>> pollUntilSome(
            KafkaShareConsumer<String, String> c, Duration timeout) {
        long until = System.currentTimeMillis() + timeout.toMillis();
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        while (got.isEmpty() && System.currentTimeMillis() < until) {
            c.poll(Duration.ofMillis(500)).forEach(got::add);
        }
        return got;
    }

    static void acceptAll(KafkaShareConsumer<String, String> c, Iterable<ConsumerRecord<String, String>> records) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        records.forEach(got::add);
        if (got.isEmpty()) {
            return;
        }
        for (ConsumerRecord<String, String> r : got) {
            c.acknowledge(r, AcknowledgeType.ACCEPT);
        }
        check(c.commitSync());
        System.out.println("BATCHED " + describe(got));
        System.out.flush();
    }

    static String describe(List<ConsumerRecord<String, String>> records) {
        StringBuilder out = new StringBuilder();
        for (ConsumerRecord<String, String> r : records) {
            out.append(' ').append(r.offset()).append(':').append(r.deliveryCount().orElse((short) -1));
        }
        return out.toString().trim();
    }

    static void check(Map<TopicIdPartition, Optional<KafkaException>> results) {
        results.forEach((tp, error) -> error.ifPresent(e -> {
            System.out.println("ACK-ERROR " + tp + " " + e);
            System.out.flush();
            System.exit(1);
        }));
    }
}
