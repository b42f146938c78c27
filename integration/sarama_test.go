package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSarama drives the broker with IBM/sarama at the protocol versions of
// three of its config.Version settings (2.1: DeleteTopics v3, ListOffsets
// v4; its default; its newest): an idempotent zstd producer with keys and
// headers, a consumer group that reads everything back and commits, the
// committed offsets through the admin client, and deleting the topic.
func TestSarama(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	for _, v := range []sarama.KafkaVersion{sarama.V2_1_0_0, sarama.DefaultVersion, sarama.MaxVersion} {
		t.Run(v.String(), func(t *testing.T) { saramaRoundTrip(t, c.BootstrapServers(), v) })
	}
}

func saramaRoundTrip(t *testing.T, brokers []string, version sarama.KafkaVersion) {
	const partitions, n = 6, 300
	topic, group := "sarama-"+version.String(), "sarama-group-"+version.String()
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "keel-test"
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = sarama.CompressionZSTD
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest

	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}

	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*sarama.ProducerMessage
	for i := range n {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("v%d", i)), Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}}})
	}
	if err := producer.SendMessages(msgs); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // key → "value header partition/offset", as acknowledged
	for i, m := range msgs {
		want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("v%d %d %d/%d", i, i, m.Partition, m.Offset)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cg, err := sarama.NewConsumerGroup(brokers, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &saramaHandler{seen: map[string]string{}, want: n, done: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
			t.Fatalf("consume: %v", err)
		}
	}
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	for k, w := range want {
		if got := h.seen[k]; got != w {
			t.Fatalf("record %s: consumed %q, produced %q", k, got, w)
		}
	}
	h.mu.Unlock()

	offsets, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2, 3, 4, 5}})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if b := offsets.GetBlock(topic, p); b == nil || b.Err != sarama.ErrNoError || b.Offset != end {
			t.Fatalf("partition %d: committed %+v, end %d", p, b, end)
		}
	}

	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	if err := client.RefreshMetadata(); err != nil {
		t.Fatal(err)
	}
	topics, err := client.Topics()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(topics, topic) {
		t.Fatalf("%s still listed after DeleteTopic", topic)
	}
}

// saramaHandler records what a consumer group reads and marks every
// message; it cancels the group once it has seen want distinct keys.
type saramaHandler struct {
	mu   sync.Mutex
	seen map[string]string
	want int
	done context.CancelFunc
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		header := ""
		if len(m.Headers) == 1 && string(m.Headers[0].Key) == "i" {
			header = string(m.Headers[0].Value)
		}
		h.mu.Lock()
		h.seen[string(m.Key)] = fmt.Sprintf("%s %s %d/%d", m.Value, header, m.Partition, m.Offset)
		complete := len(h.seen) == h.want
		h.mu.Unlock()
		s.MarkMessage(m, "")
		if complete {
			s.Commit()
			h.done()
		}
	}
	return nil
}

// TestSaramaTransactions: sarama's transactional producer commits, aborts
// and commits again, sending a consumer group's offsets with the last
// transaction (AddOffsetsToTxn, TxnOffsetCommit); its read_committed
// consumer reads only the committed records, and the group's offset is
// the one committed with the transaction.
func TestSaramaTransactions(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	const topic, group = "sarama-txn", "sarama-txn-group"
	cfg := sarama.NewConfig()
	cfg.Version = sarama.DefaultVersion
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = "sarama-txn-producer"
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	client, err := sarama.NewClient(c.BootstrapServers(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	txn := func(value string, commit bool, offsets bool) {
		t.Helper()
		if err := producer.BeginTxn(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(value)}); err != nil {
			t.Fatalf("send %s: %v", value, err)
		}
		if offsets {
			if err := producer.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: 7}}}, group); err != nil {
				t.Fatalf("offsets: %v", err)
			}
		}
		end := producer.CommitTxn
		if !commit {
			end = producer.AbortTxn
		}
		if err := end(); err != nil {
			t.Fatalf("end %s (commit %v): %v", value, commit, err)
		}
	}
	txn("c1", true, false)
	txn("a1", false, false)
	txn("c2", true, true)

	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("consume: %v", err)
		case <-timeout:
			t.Fatalf("read_committed read %q", got)
		}
	}
	if !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("read_committed read %q, want c1, c2", got)
	}
	offs, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if err != nil {
		t.Fatal(err)
	}
	if b := offs.GetBlock(topic, 0); b == nil || b.Offset != 7 {
		t.Fatalf("the group's offset committed with the transaction: %+v", b)
	}
}
