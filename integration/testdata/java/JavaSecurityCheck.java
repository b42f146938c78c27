import java.io.FileReader;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

// JavaSecurityCheck drives one of Keel's secured listeners with the Java
// client: an admin call, the idempotent producer and a consumer group, all
// with the security properties of the first file (security.protocol=SSL
// with a keystore, or SASL_SSL with sasl.jaas.config, ...); then a client
// with those of the second file (no certificate, a wrong password), which
// the broker must refuse. Run by integration/java_test.go's
// TestJavaClientSSL and TestJavaClientSASL. Exits 1 on a failure.
public class JavaSecurityCheck {
    static Properties load(String bs, String path) throws Exception {
        Properties p = new Properties();
        try (FileReader r = new FileReader(path)) {
            p.load(r);
        }
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bs);
        return p;
    }

    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = args[3];
        Properties secured = load(bs, args[1]);
        Properties refused = load(bs, args[2]);

        try (Admin admin = Admin.create(secured)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 2))).all().get(30, TimeUnit.SECONDS);
            int brokers = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).size();
            if (brokers != 2) throw new AssertionError("describeCluster: " + brokers + " brokers, want 2");
        }
        System.out.println("ok: admin");

        Properties pp = new Properties();
        pp.putAll(secured);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int n = 2000;
        try (Producer<String, String> p = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < n; i++) sent.add(p.send(new ProducerRecord<>(topic, "k" + (i % 11), "v" + i)));
            for (Future<RecordMetadata> f : sent) f.get(30, TimeUnit.SECONDS);
        }
        System.out.println("ok: " + n + " records produced (idempotent, acks=all)");

        Properties cp = new Properties();
        cp.putAll(secured);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Set<String> seen = new HashSet<>();
        try (Consumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) seen.add(r.value());
            }
            c.commitSync();
        }
        if (seen.size() != n) throw new AssertionError("consumed " + seen.size() + " of " + n);
        System.out.println("ok: " + n + " records consumed in a group");

        refused.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        refused.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "4000");
        try (Admin admin = Admin.create(refused)) {
            admin.describeCluster().nodes().get(10, TimeUnit.SECONDS);
            throw new AssertionError("a client with the second file's properties was served");
        } catch (ExecutionException e) {
            System.out.println("ok: refused: " + e.getCause());
        }
    }
}
