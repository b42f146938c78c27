import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.serialization.*;

// JavaSSLCheck drives Keel's SSL listener with the Java client and stores
// made by keytool: an admin call, the idempotent producer and a consumer
// group, all with security.protocol=SSL and a client certificate (the
// listener has ssl.client.auth=required); then a client without a
// keystore, which the broker must refuse. Run by
// integration/java_test.go's TestJavaClientSSL. Exits 1 on a failure.
public class JavaSSLCheck {
    public static void main(String[] args) throws Exception {
        String bs = args[0], truststore = args[1], trustPass = args[2], keystore = args[3], keyPass = args[4];
        String topic = "java-tls";
        Properties ssl = new Properties();
        ssl.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bs);
        ssl.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SSL");
        ssl.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, truststore);
        ssl.put(SslConfigs.SSL_TRUSTSTORE_PASSWORD_CONFIG, trustPass);
        Properties withCert = new Properties();
        withCert.putAll(ssl);
        withCert.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PKCS12");
        withCert.put(SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG, keystore);
        withCert.put(SslConfigs.SSL_KEYSTORE_PASSWORD_CONFIG, keyPass);
        withCert.put(SslConfigs.SSL_KEY_PASSWORD_CONFIG, keyPass);

        try (Admin admin = Admin.create(withCert)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 2))).all().get(30, TimeUnit.SECONDS);
            int brokers = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).size();
            if (brokers != 2) throw new AssertionError("describeCluster over TLS: " + brokers + " brokers, want 2");
        }
        System.out.println("ok: admin over TLS");

        Properties pp = new Properties();
        pp.putAll(withCert);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int n = 2000;
        try (Producer<String, String> p = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < n; i++) sent.add(p.send(new ProducerRecord<>(topic, "k" + (i % 11), "v" + i)));
            for (Future<RecordMetadata> f : sent) f.get(30, TimeUnit.SECONDS);
        }
        System.out.println("ok: " + n + " records produced over TLS (idempotent, acks=all)");

        Properties cp = new Properties();
        cp.putAll(withCert);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, "java-tls-group");
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
        if (seen.size() != n) throw new AssertionError("consumed " + seen.size() + " of " + n + " over TLS");
        System.out.println("ok: " + n + " records consumed over TLS in a group");

        // No client certificate: the listener requires one.
        Properties noCert = new Properties();
        noCert.putAll(ssl);
        noCert.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        noCert.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "4000");
        try (Admin admin = Admin.create(noCert)) {
            admin.describeCluster().nodes().get(10, TimeUnit.SECONDS);
            throw new AssertionError("a client without a certificate was served");
        } catch (ExecutionException e) {
            System.out.println("ok: a client without a certificate is refused: " + e.getCause());
        }
    }
}
