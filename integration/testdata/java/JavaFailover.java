import java.io.IOException;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.*;

// JavaFailover runs the Java client's idempotent acks=all producer (its
// defaults) and a consumer-group member against a cluster while the test
// restarts, kills and fails its nodes. It prints "producing" once the
// topic exists and produces until stdin closes; then it flushes and checks:
// no failed send; every acknowledged record read back at its offset; the
// group member, which lives through every change, saw every acknowledged
// record. Its last line is "ok" when all held. Run by
// integration/java_test.go.
public class JavaFailover {
    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = "jf";
        int parts = 6;
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, parts, (short) 3).configs(Map.of("min.insync.replicas", "2")))).all().get();
        }

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        Map<String, long[]> acked = new ConcurrentHashMap<>(); // value -> {partition, offset}
        Map<String, AtomicInteger> failed = new ConcurrentHashMap<>();

        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                }
            } catch (IOException e) {
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        // The group member: reads as the cluster changes under it.
        Map<String, long[]> seenByGroup = new ConcurrentHashMap<>();
        List<String> groupErrors = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stopGroup = new AtomicBoolean();
        Thread member = new Thread(() -> {
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, "jf-group");
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of(topic));
                while (!stopGroup.get()) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        seenByGroup.put(r.value(), new long[] {r.partition(), r.offset()});
                    }
                    try {
                        c.commitAsync();
                    } catch (Exception e) {
                        groupErrors.add(e.toString());
                    }
                }
            } catch (Exception e) {
                groupErrors.add(e.toString());
            }
        });
        member.start();

        long n = 0;
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            System.out.println("producing");
            System.out.flush();
            while (!stop.get()) {
                for (int i = 0; i < 20; i++, n++) {
                    String v = "v" + n;
                    p.send(new ProducerRecord<>(topic, "k" + (n % 97), v), (md, err) -> {
                        if (err != null) {
                            failed.computeIfAbsent(err.toString(), k -> new AtomicInteger()).incrementAndGet();
                        } else {
                            acked.put(v, new long[] {md.partition(), md.offset()});
                        }
                    });
                }
                Thread.sleep(2);
            }
            p.flush();
        }
        System.out.printf("produced %d, acknowledged %d, failed %s%n", n, acked.size(), failed);
        boolean ok = failed.isEmpty() && acked.size() == n;

        // Read everything back from the start, by assignment.
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Map<String, long[]> seen = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < parts; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (!seen.keySet().containsAll(acked.keySet()) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    seen.put(r.value(), new long[] {r.partition(), r.offset()});
                }
            }
        }
        int missing = 0, moved = 0;
        for (Map.Entry<String, long[]> e : acked.entrySet()) {
            long[] s = seen.get(e.getKey());
            if (s == null) missing++;
            else if (s[0] != e.getValue()[0] || s[1] != e.getValue()[1]) moved++;
        }
        System.out.printf("read back %d: %d acknowledged missing, %d at another offset%n", seen.size(), missing, moved);
        ok &= missing == 0 && moved == 0;

        long deadline = System.currentTimeMillis() + 60_000;
        while (!seenByGroup.keySet().containsAll(acked.keySet()) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        stopGroup.set(true);
        member.join();
        int groupMissing = 0;
        for (String v : acked.keySet()) if (!seenByGroup.containsKey(v)) groupMissing++;
        System.out.printf("group member saw %d: %d acknowledged missing, errors %s%n", seenByGroup.size(), groupMissing, groupErrors);
        ok &= groupMissing == 0;
        System.out.println(ok ? "ok" : "FAILED");
        System.exit(ok ? 0 : 1);
    }
}
