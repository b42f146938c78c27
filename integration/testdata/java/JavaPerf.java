import java.util.*;
import java.util.concurrent.atomic.*;

import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

// JavaPerf is kafka-producer-perf-test with a warm-up: it produces 100-byte
// records (or --record-size) to a topic at a fixed rate (or as fast as it
// can with rate -1) with the Java producer's defaults plus the given
// properties, first for warm-up seconds that are not measured (JIT,
// connections, metadata), then for the measured seconds. It prints one
// line: "records/s MB/s p50 p99 p999 max failed=N" (latencies in ms, send
// to acknowledgement, as kafka-producer-perf-test measures them).
//
// Usage: JavaPerf bootstrap topic rate warmupSeconds seconds recordSize [key=value ...]
// Run by integration/java_test.go's TestJavaReplicationPerf.
public class JavaPerf {
    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = args[1];
        double rate = Double.parseDouble(args[2]);
        long warmupNs = (long) (Double.parseDouble(args[3]) * 1e9), measureNs = (long) (Double.parseDouble(args[4]) * 1e9);
        int size = Integer.parseInt(args[5]);
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (int i = 6; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            pp.put(kv[0], kv[1]);
        }
        // kafka-producer-perf-test's payload: random upper-case letters.
        byte[] value = new byte[size];
        Random rnd = new Random(7);
        for (int i = 0; i < size; i++) value[i] = (byte) ('A' + rnd.nextInt(26));

        int cap = (int) Math.min(200_000_000L, rate > 0 ? (long) (rate * measureNs / 1e9 * 1.1) + 1000 : 100_000_000L);
        float[] lat = new float[cap];
        AtomicInteger n = new AtomicInteger();
        AtomicLong failed = new AtomicLong();
        long sent = 0, measureFrom, flushed;
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            long start = System.nanoTime(), end;
            measureFrom = start + warmupNs;
            end = measureFrom + measureNs;
            long now;
            while ((now = System.nanoTime()) < end) {
                if (rate > 0) {
                    long due = start + (long) (sent * 1e9 / rate);
                    if (due > now) {
                        long sleep = due - now;
                        if (sleep > 200_000) Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
                        else Thread.onSpinWait();
                        continue;
                    }
                }
                final long t0 = System.nanoTime();
                final boolean measured = t0 >= measureFrom;
                p.send(new ProducerRecord<>(topic, value), (md, err) -> {
                    if (err != null) {
                        failed.incrementAndGet();
                        return;
                    }
                    if (measured) {
                        int i = n.getAndIncrement();
                        if (i < lat.length) lat[i] = (System.nanoTime() - t0) / 1e6f;
                    }
                });
                sent++;
            }
            p.flush();
            flushed = System.nanoTime();
            // Where the time went, from the producer's own metrics (stderr).
            for (var e : p.metrics().entrySet()) {
                String name = e.getKey().name();
                if (e.getKey().group().equals("producer-metrics") && List.of("request-latency-avg", "request-latency-max",
                        "batch-size-avg", "records-per-request-avg", "record-queue-time-avg", "bufferpool-wait-ratio",
                        "io-ratio", "io-wait-ratio", "request-rate").contains(name)) {
                    System.err.printf(Locale.ROOT, "%s=%s%n", name, e.getValue().metricValue());
                }
            }
        }
        int m = Math.min(n.get(), lat.length);
        float[] l = Arrays.copyOf(lat, m);
        Arrays.sort(l);
        // Throughput: the measured records, all acknowledged, over the time
        // from the first of them to the end of the flush.
        double secs = (flushed - measureFrom) / 1e9;
        System.out.printf(Locale.ROOT, "%.0f %.2f %.2f %.2f %.2f %.2f failed=%d%n", n.get() / secs, (double) n.get() * size / secs / 1e6,
            pct(l, 0.50), pct(l, 0.99), pct(l, 0.999), m > 0 ? l[m - 1] : 0, failed.get());
        System.exit(failed.get() == 0 ? 0 : 1);
    }

    static double pct(float[] sorted, double q) {
        if (sorted.length == 0) return 0;
        return sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))];
    }
}
