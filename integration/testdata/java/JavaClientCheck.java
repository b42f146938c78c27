import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.quota.*;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.common.utils.Utils;

// JavaClientCheck drives Keel with the Java client (kafka-clients 3.x):
// admin calls, the idempotent producer under every codec, consumer groups
// and offsets, acks=0/1, size limits, consumer positioning, static
// membership. It prints one line per check and exits 1 if any failed.
// Run by integration/java_test.go.
public class JavaClientCheck {
    static String bs;
    static int failures = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            failures++;
            System.out.println("FAIL: " + what);
        } else {
            System.out.println("ok: " + what);
        }
    }

    // eventually retries f for up to 10 s while it fails or its result is
    // not ok: in a cluster of several brokers, one may answer before the
    // metadata a call just changed reaches it, as with Kafka.
    static <T> T eventually(Callable<T> f, java.util.function.Predicate<T> ok) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            try {
                T v = f.call();
                if (ok.test(v) || System.currentTimeMillis() > deadline) return v;
            } catch (ExecutionException e) {
                if (System.currentTimeMillis() > deadline) throw e;
            }
            Thread.sleep(100);
        }
    }

    public static void main(String[] args) throws Exception {
        bs = args[0];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        try (Admin admin = Admin.create(ap)) {
            adminChecks(admin);
            for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
                produceConsume(admin, codec);
            }
            groupChecks(admin);
            moreChecks(admin);
        }
        System.out.println(failures == 0 ? "ALL OK" : failures + " FAILURES");
        System.exit(failures == 0 ? 0 : 1);
    }

    static void adminChecks(Admin admin) throws Exception {
        DescribeClusterResult dc = admin.describeCluster();
        Collection<Node> nodes = dc.nodes().get();
        check(nodes.size() >= 1, "describeCluster nodes " + nodes + " controller " + dc.controller().get() + " id " + dc.clusterId().get());

        NewTopic nt = new NewTopic("j-admin", 3, (short) 1).configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
        admin.createTopics(List.of(nt)).all().get();
        try {
            admin.createTopics(List.of(new NewTopic("j-admin", 3, (short) 1))).all().get();
            check(false, "duplicate createTopics fails");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException, "duplicate createTopics: " + e.getCause());
        }
        try {
            admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all().get();
            check(false, "invalid topic name refused");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidTopicException, "invalid name: " + e.getCause());
        }
        TopicDescription td = eventually(() -> admin.describeTopics(List.of("j-admin")).allTopicNames().get().get("j-admin"), x -> true);
        check(td.partitions().size() == 3 && td.topicId() != null && !td.topicId().equals(Uuid.ZERO_UUID), "describeTopics " + td);
        // by id (DescribeTopicPartitions is 3.7+; 3.4 uses Metadata v12 by id)
        TopicDescription byId = admin.describeTopics(TopicCollection.ofTopicIds(List.of(td.topicId()))).allTopicIds().get().get(td.topicId());
        check(byId != null && byId.name().equals("j-admin"), "describeTopics by id " + (byId == null ? null : byId.name()));
        check(admin.listTopics().names().get().contains("j-admin"), "listTopics");

        ConfigResource cr = new ConfigResource(ConfigResource.Type.TOPIC, "j-admin");
        Config c = eventually(() -> admin.describeConfigs(List.of(cr)).all().get().get(cr), x -> x.get("retention.ms") != null && x.get("retention.ms").value().equals("3600000"));
        ConfigEntry rm = c.get("retention.ms");
        check(rm != null && rm.value().equals("3600000") && rm.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "describeConfigs retention.ms " + rm);
        ConfigEntry sb = c.get("segment.bytes");
        check(sb != null && sb.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG, "describeConfigs default segment.bytes " + sb);
        admin.incrementalAlterConfigs(Map.of(cr, List.of(
            new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
            new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)))).all().get();
        c = eventually(() -> admin.describeConfigs(List.of(cr)).all().get().get(cr), x -> x.get("retention.ms").value().equals("7200000"));
        check(c.get("retention.ms").value().equals("7200000"), "incrementalAlterConfigs SET " + c.get("retention.ms"));
        check(c.get("cleanup.policy").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "incrementalAlterConfigs DELETE " + c.get("cleanup.policy"));
        try {
            admin.incrementalAlterConfigs(Map.of(cr, List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "abc"), AlterConfigOp.OpType.SET)))).all().get();
            check(false, "bad config value refused");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidConfigurationException || e.getCause() instanceof org.apache.kafka.common.errors.InvalidRequestException, "bad config value: " + e.getCause());
        }
        ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(admin.describeCluster().nodes().get().iterator().next().id()));
        Config bc = admin.describeConfigs(List.of(br)).all().get().get(br);
        check(bc.get("log.retention.hours") != null || bc.get("log.retention.ms") != null, "describeConfigs broker (" + bc.entries().size() + " entries)");

        admin.createPartitions(Map.of("j-admin", NewPartitions.increaseTo(5))).all().get();
        td = eventually(() -> admin.describeTopics(List.of("j-admin")).allTopicNames().get().get("j-admin"), x -> x.partitions().size() == 5);
        check(td.partitions().size() == 5, "createPartitions -> " + td.partitions().size());

        Map<Integer, Map<String, LogDirDescription>> ld = admin.describeLogDirs(nodes.stream().map(Node::id).toList()).allDescriptions().get();
        check(!ld.isEmpty() && ld.values().iterator().next().size() >= 1, "describeLogDirs " + ld.keySet());

        FeatureMetadata fm = admin.describeFeatures().featureMetadata().get();
        System.out.println("  features: " + fm);

        try {
            QuorumInfo qi = admin.describeMetadataQuorum().quorumInfo().get();
            check(qi.leaderId() >= 0 && !qi.voters().isEmpty(), "describeMetadataQuorum leader " + qi.leaderId() + " voters " + qi.voters().size());
        } catch (ExecutionException e) {
            check(false, "describeMetadataQuorum: " + e.getCause());
        }

        admin.deleteTopics(List.of("j-admin")).all().get();
        Thread.sleep(500);
        check(!admin.listTopics().names().get().contains("j-admin"), "deleteTopics");
        admin.createTopics(List.of(new NewTopic("j-byid", 1, (short) 1))).all().get();
        Uuid bid = eventually(() -> admin.describeTopics(List.of("j-byid")).allTopicNames().get().get("j-byid"), x -> true).topicId();
        admin.deleteTopics(TopicCollection.ofTopicIds(List.of(bid))).all().get();
        Thread.sleep(500);
        check(!admin.listTopics().names().get().contains("j-byid"), "deleteTopics by id");
    }

    static void produceConsume(Admin admin, String codec) throws Exception {
        String topic = "j-" + codec;
        int parts = 6, n = 20000;
        admin.createTopics(List.of(new NewTopic(topic, parts, (short) 1))).all().get();
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // 3.x defaults: enable.idempotence=true, acks=all
        Map<String, List<long[]>> acked = new ConcurrentHashMap<>();
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        long t0 = System.nanoTime();
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < n; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, "key-" + (i % 997), "value-" + i);
                r.headers().add("h", ("hv" + i).getBytes(StandardCharsets.UTF_8));
                fs.add(p.send(r));
            }
            p.flush();
        }
        Map<Integer, Long> lastOff = new HashMap<>();
        boolean partOk = true, orderOk = true;
        for (int i = 0; i < n; i++) {
            RecordMetadata md = fs.get(i).get();
            int want = Utils.toPositive(Utils.murmur2(("key-" + (i % 997)).getBytes(StandardCharsets.UTF_8))) % parts;
            if (md.partition() != want) partOk = false;
            Long prev = lastOff.get(md.partition());
            if (prev != null && md.offset() != prev + 1) orderOk = false;
            lastOff.put(md.partition(), md.offset());
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        check(partOk, codec + ": keyed records land on murmur2's partition");
        check(orderOk, codec + ": acked offsets consecutive per partition");
        System.out.printf("  %s: produced %d in %.2fs%n", codec, n, secs);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, "g-" + codec);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int got = 0;
        boolean contentOk = true;
        Map<Integer, Long> seen = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (got < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    int i = Integer.parseInt(r.value().substring(6));
                    Header h = r.headers().lastHeader("h");
                    if (!r.key().equals("key-" + (i % 997)) || h == null || !new String(h.value(), StandardCharsets.UTF_8).equals("hv" + i)) contentOk = false;
                    RecordMetadata md = fs.get(i).get();
                    if (md.partition() != r.partition() || md.offset() != r.offset()) contentOk = false;
                    Long prev = seen.get(r.partition());
                    if (prev != null && r.offset() <= prev) contentOk = false;
                    seen.put(r.partition(), r.offset());
                    got++;
                }
            }
            c.commitSync();
            check(got == n, codec + ": consumed " + got + " of " + n);
            check(contentOk, codec + ": every key, value, header, offset as produced");
            Map<TopicPartition, OffsetAndMetadata> com = c.committed(new HashSet<>(c.assignment()));
            long sum = com.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            check(sum == n, codec + ": committed offsets sum " + sum);
        }
        // offsets by time and ends
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < parts; i++) tps.add(new TopicPartition(topic, i));
        Map<TopicPartition, OffsetSpec> specE = new HashMap<>(), specL = new HashMap<>(), specT = new HashMap<>(), specM = new HashMap<>();
        for (TopicPartition tp : tps) {
            specE.put(tp, OffsetSpec.earliest());
            specL.put(tp, OffsetSpec.latest());
            specT.put(tp, OffsetSpec.forTimestamp(0));
            specM.put(tp, OffsetSpec.maxTimestamp());
        }
        long lsum = admin.listOffsets(specL).all().get().values().stream().mapToLong(ListOffsetsResult.ListOffsetsResultInfo::offset).sum();
        long esum = admin.listOffsets(specE).all().get().values().stream().mapToLong(ListOffsetsResult.ListOffsetsResultInfo::offset).sum();
        long tsum = admin.listOffsets(specT).all().get().values().stream().mapToLong(ListOffsetsResult.ListOffsetsResultInfo::offset).sum();
        check(lsum == n && esum == 0 && tsum == 0, codec + ": listOffsets latest " + lsum + " earliest " + esum + " ts0 " + tsum);
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> mx = admin.listOffsets(specM).all().get();
        boolean mxOk = true;
        for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e : mx.entrySet()) {
            if (e.getValue().offset() < 0 || e.getValue().offset() >= lastOff.getOrDefault(e.getKey().partition(), 0L) + 1) mxOk = false;
        }
        check(mxOk, codec + ": listOffsets maxTimestamp " + mx.values().iterator().next());
        // DeleteRecords
        admin.deleteRecords(Map.of(new TopicPartition(topic, 0), RecordsToDelete.beforeOffset(10))).all().get();
        long e0 = admin.listOffsets(Map.of(new TopicPartition(topic, 0), OffsetSpec.earliest())).all().get().get(new TopicPartition(topic, 0)).offset();
        check(e0 == 10, codec + ": deleteRecords -> earliest " + e0);
    }

    static void groupChecks(Admin admin) throws Exception {
        Collection<ConsumerGroupListing> gs = admin.listConsumerGroups().all().get();
        check(gs.size() >= 5, "listConsumerGroups " + gs.size());
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of("g-zstd")).all().get().get("g-zstd");
        check(d.state() == ConsumerGroupState.EMPTY, "describeConsumerGroups g-zstd " + d.state());
        Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets("g-zstd").partitionsToOffsetAndMetadata().get();
        check(offs.size() == 6, "listConsumerGroupOffsets " + offs.size());
        TopicPartition tp0 = new TopicPartition("j-zstd", 0);
        admin.alterConsumerGroupOffsets("g-zstd", Map.of(tp0, new OffsetAndMetadata(12, "meta"))).all().get();
        offs = admin.listConsumerGroupOffsets("g-zstd").partitionsToOffsetAndMetadata().get();
        check(offs.get(tp0).offset() == 12 && "meta".equals(offs.get(tp0).metadata()), "alterConsumerGroupOffsets " + offs.get(tp0));
        admin.deleteConsumerGroupOffsets("g-zstd", Set.of(tp0)).all().get();
        offs = admin.listConsumerGroupOffsets("g-zstd").partitionsToOffsetAndMetadata().get();
        check(!offs.containsKey(tp0), "deleteConsumerGroupOffsets");
        admin.deleteConsumerGroups(List.of("g-none")).all().get();
        check(admin.listConsumerGroups().all().get().stream().noneMatch(g -> g.groupId().equals("g-none")), "deleteConsumerGroups");

        // two members of one group share the partitions (cooperative-sticky is 3.x's second default assignor)
        for (String assignor : new String[] {"org.apache.kafka.clients.consumer.RangeAssignor", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}) {
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, "g2-" + assignor.hashCode());
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            cp.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> a = new KafkaConsumer<>(cp); KafkaConsumer<String, String> b = new KafkaConsumer<>(cp)) {
                a.subscribe(List.of("j-lz4"));
                b.subscribe(List.of("j-lz4"));
                int got = 0;
                long deadline = System.currentTimeMillis() + 40000;
                while (got < 20000 - 10 && System.currentTimeMillis() < deadline) {
                    got += a.poll(Duration.ofMillis(200)).count();
                    got += b.poll(Duration.ofMillis(200)).count();
                }
                check(got == 20000 - 10, assignor + ": two members read " + got + " (a " + a.assignment().size() + " b " + b.assignment().size() + ")");
                check(a.assignment().size() + b.assignment().size() == 6 && !a.assignment().isEmpty() && !b.assignment().isEmpty(), assignor + ": split 6 partitions");
            }
        }
    }

    static Properties prod(String... kv) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return p;
    }

    static Properties cons(String... kv) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return p;
    }

    static void moreChecks(Admin admin) throws Exception {
            admin.createTopics(List.of(new NewTopic("k2", 3, (short) 1))).all().get();
            TopicPartition p0 = new TopicPartition("k2", 0);
            // acks=0 loses what a leader not yet hosting the new partition
            // refuses: start once the leader answers for it.
            eventually(() -> admin.listOffsets(Map.of(p0, OffsetSpec.latest())).all().get().get(p0).offset(), x -> x == 0);

            // acks=0 and acks=1 without idempotence.
            for (String acks : new String[] {"0", "1"}) {
                try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(prod("acks", acks, "enable.idempotence", "false"))) {
                    List<Future<RecordMetadata>> fs = new ArrayList<>();
                    for (int i = 0; i < 1000; i++) fs.add(p.send(new ProducerRecord<>("k2", 0, null, ("a" + acks + "-" + i).getBytes())));
                    p.flush();
                    RecordMetadata last = fs.get(999).get();
                    check(acks.equals("0") ? last.offset() == -1 : last.offset() >= 999, "acks=" + acks + " last offset " + last.offset());
                }
            }
            Thread.sleep(300);
            long end = admin.listOffsets(Map.of(p0, OffsetSpec.latest())).all().get().get(p0).offset();
            check(end == 2000, "acks=0 and acks=1 records all appended: end " + end);

            // A record over the broker's message.max.bytes (1 MiB default).
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(prod("max.request.size", "5000000", "compression.type", "none"))) {
                p.send(new ProducerRecord<>("k2", 0, null, new byte[2_000_000])).get();
                check(false, "2 MB record refused");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.RecordTooLargeException, "2 MB record: " + e.getCause());
            }
            // Same with max.message.bytes raised on the topic: accepted.
            ConfigResource cr = new ConfigResource(ConfigResource.Type.TOPIC, "k2");
            admin.incrementalAlterConfigs(Map.of(cr, List.of(new AlterConfigOp(new ConfigEntry("max.message.bytes", "3000000"), AlterConfigOp.OpType.SET)))).all().get();
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(prod("max.request.size", "5000000", "compression.type", "none"))) {
                // The partition's leader may take a moment to apply the new limit.
                RecordMetadata md = eventually(() -> p.send(new ProducerRecord<>("k2", 1, null, new byte[2_000_000])).get(), x -> true);
                check(md.offset() == 0, "2 MB record after max.message.bytes=3000000: offset " + md.offset());
            }
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cons())) {
                TopicPartition p1 = new TopicPartition("k2", 1);
                c.assign(List.of(p1));
                c.seekToBeginning(List.of(p1));
                ConsumerRecords<byte[], byte[]> rs = ConsumerRecords.empty();
                long deadline = System.currentTimeMillis() + 10000;
                while (rs.isEmpty() && System.currentTimeMillis() < deadline) rs = c.poll(Duration.ofMillis(300));
                check(rs.count() == 1 && rs.iterator().next().value().length == 2_000_000, "2 MB record read back by a consumer at default fetch sizes: " + rs.count());
            }

            // Transactions: commit, abort, commit again, and a consumer
            // group's offsets sent to the transaction; read_committed sees
            // only the committed records, read_uncommitted all of them.
            admin.createTopics(List.of(new NewTopic("j-txn", 1, (short) 3))).all().get();
            TopicPartition tx0 = new TopicPartition("j-txn", 0);
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(prod("transactional.id", "tx-1"))) {
                p.initTransactions();
                p.beginTransaction();
                p.send(new ProducerRecord<>("j-txn", 0, null, "c1".getBytes())).get();
                p.commitTransaction();
                p.beginTransaction();
                p.send(new ProducerRecord<>("j-txn", 0, null, "a1".getBytes())).get();
                p.abortTransaction();
                p.beginTransaction();
                p.send(new ProducerRecord<>("j-txn", 0, null, "c2".getBytes())).get();
                p.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(42)), new ConsumerGroupMetadata("j-txn-group"));
                p.commitTransaction();
            }
            for (String level : List.of("read_committed", "read_uncommitted")) {
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cons("isolation.level", level))) {
                    c.assign(List.of(tx0));
                    c.seekToBeginning(List.of(tx0));
                    List<String> vals = new ArrayList<>();
                    long deadline = System.currentTimeMillis() + 10000;
                    int want = level.equals("read_committed") ? 2 : 3;
                    while (vals.size() < want && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) vals.add(new String(r.value()));
                    }
                    String expect = level.equals("read_committed") ? "[c1, c2]" : "[c1, a1, c2]";
                    check(vals.toString().equals(expect), level + " consumer of a transactional topic: " + vals);
                    long txEnd = c.endOffsets(List.of(tx0)).get(tx0);
                    check(txEnd == 6, level + " end offset after three transactions (3 records, 3 markers): " + txEnd);
                }
            }
            Map<TopicPartition, OffsetAndMetadata> txOffsets = eventually(
                () -> admin.listConsumerGroupOffsets("j-txn-group").partitionsToOffsetAndMetadata().get(),
                m -> m.containsKey(p0) && m.get(p0).offset() == 42);
            check(txOffsets.get(p0).offset() == 42, "offsets sent to a committed transaction: " + txOffsets);

            // Consumer positioning: offsetsForTimes, begin/end, seek, position, read_committed.
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cons("isolation.level", "read_committed"))) {
                Map<TopicPartition, Long> ends = c.endOffsets(List.of(p0));
                Map<TopicPartition, Long> begins = c.beginningOffsets(List.of(p0));
                check(ends.get(p0) == 2000 && begins.get(p0) == 0, "endOffsets/beginningOffsets read_committed " + ends + " " + begins);
                Map<TopicPartition, OffsetAndTimestamp> ts = c.offsetsForTimes(Map.of(p0, 0L));
                check(ts.get(p0) != null && ts.get(p0).offset() == 0, "offsetsForTimes(0) " + ts);
                Map<TopicPartition, OffsetAndTimestamp> fut = c.offsetsForTimes(Map.of(p0, System.currentTimeMillis() + 3600_000L));
                check(fut.get(p0) == null, "offsetsForTimes(future) " + fut);
                c.assign(List.of(p0));
                c.seek(p0, 1500);
                int got = 0;
                long first = -1;
                long deadline = System.currentTimeMillis() + 10000;
                while (got < 500 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) {
                        if (first < 0) first = r.offset();
                        got++;
                    }
                }
                check(first == 1500 && got == 500 && c.position(p0) == 2000, "seek 1500: first " + first + " got " + got + " position " + c.position(p0));
                // out of range with auto.offset.reset=none
            }
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cons("auto.offset.reset", "none", "group.id", "oor"))) {
                c.assign(List.of(p0));
                c.seek(p0, 5000);
                try {
                    for (int i = 0; i < 20; i++) c.poll(Duration.ofMillis(200));
                    check(false, "seek past end with auto.offset.reset=none raises");
                } catch (OffsetOutOfRangeException e) {
                    check(true, "seek past end: " + e.getMessage());
                }
            }

            // Static membership: a member that leaves and comes back with the same
            // group.instance.id keeps its partitions without a rebalance.
            String gid = "static-g";
            Properties sp = cons("group.id", gid, "group.instance.id", "inst-1", "auto.offset.reset", "earliest", "session.timeout.ms", "30000");
            Set<TopicPartition> firstAssign;
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(sp)) {
                c.subscribe(List.of("k2"));
                long deadline = System.currentTimeMillis() + 15000;
                while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(200));
                firstAssign = new HashSet<>(c.assignment());
                c.commitSync();
            }
            ConsumerGroupDescription gd = admin.describeConsumerGroups(List.of(gid)).all().get().get(gid);
            check(gd.members().size() == 1 && gd.members().iterator().next().groupInstanceId().orElse("").equals("inst-1"), "static member stays in the group after close: " + gd.state() + " " + gd.members());
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(sp)) {
                c.subscribe(List.of("k2"));
                long deadline = System.currentTimeMillis() + 15000;
                while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(200));
                check(c.assignment().equals(firstAssign), "static member rejoins with " + c.assignment());
            }
            admin.removeMembersFromConsumerGroup(gid, new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove("inst-1")))).all().get();
            gd = admin.describeConsumerGroups(List.of(gid)).all().get().get(gid);
            check(gd.members().isEmpty(), "removeMembersFromConsumerGroup: " + gd.members().size());

            // Less common admin calls.
            try {
                admin.electLeaders(ElectionType.PREFERRED, Set.of(p0)).all().get();
                check(true, "electLeaders preferred");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.ElectionNotNeededException, "electLeaders preferred: " + e.getCause());
            }
            Map<TopicPartition, PartitionReassignment> ra = admin.listPartitionReassignments().reassignments().get();
            check(ra.isEmpty(), "listPartitionReassignments " + ra);
            ClientQuotaEntity qe = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, "slow"));
            // Nothing matches yet: an empty answer (kafka-configs --describe --entity-type clients).
            Map<ClientQuotaEntity, Map<String, Double>> none = admin.describeClientQuotas(
                ClientQuotaFilter.contains(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, "slow")))).entities().get();
            check(none.isEmpty(), "client quotas before any is set " + none);
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(qe, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0))))).all().get();
            Map<ClientQuotaEntity, Map<String, Double>> qs = eventually(() -> admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get(), x -> x.containsKey(qe));
            check(qs.containsKey(qe) && qs.get(qe).get("producer_byte_rate") == 1024.0, "client quotas " + qs);
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(prod())) {
                p.send(new ProducerRecord<>("k2", 2, null, "x".getBytes())).get();
                DescribeProducersResult dp = admin.describeProducers(List.of(new TopicPartition("k2", 2)));
                check(!dp.all().get().get(new TopicPartition("k2", 2)).activeProducers().isEmpty(), "describeProducers " + dp.all().get());
            }
            try {
                Collection<AclBinding> acls = admin.describeAcls(AclBindingFilter.ANY).values().get();
                System.out.println("  describeAcls: " + acls);
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.SecurityDisabledException, "describeAcls without an authorizer: " + e.getCause());
            }
            // kafka-configs --entity-type broker-loggers: the root logger's level, changed at run time.
            String nodeId = String.valueOf(admin.describeCluster().nodes().get().iterator().next().id());
            ConfigResource lr = new ConfigResource(ConfigResource.Type.BROKER_LOGGER, nodeId);
            ConfigEntry root = admin.describeConfigs(List.of(lr)).all().get().get(lr).get("root");
            check(root != null && root.value().equals("INFO"), "broker logger root " + root);
            admin.incrementalAlterConfigs(Map.of(lr, List.of(new AlterConfigOp(new ConfigEntry("root", "DEBUG"), AlterConfigOp.OpType.SET)))).all().get();
            root = admin.describeConfigs(List.of(lr)).all().get().get(lr).get("root");
            check(root.value().equals("DEBUG"), "broker logger root after SET DEBUG " + root);
            admin.incrementalAlterConfigs(Map.of(lr, List.of(new AlterConfigOp(new ConfigEntry("root", "INFO"), AlterConfigOp.OpType.SET)))).all().get();
            try {
                admin.incrementalAlterConfigs(Map.of(lr, List.of(new AlterConfigOp(new ConfigEntry("kafka.server.ReplicaManager", "DEBUG"), AlterConfigOp.OpType.SET)))).all().get();
                check(false, "an unknown logger refused");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidConfigurationException, "an unknown logger: " + e.getCause());
            }
            try {
                admin.alterPartitionReassignments(Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(99))))).all().get();
                check(false, "reassignment onto an unknown broker refused");
            } catch (ExecutionException e) {
                check(true, "reassignment onto an unknown broker: " + e.getCause());
            }
    }
}
