package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// newFake starts a kfake cluster (franz-go's in-process Kafka) that the test
// closes.
func newFake(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestClientBootstrapsAndKnowsEveryBroker(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(4, "t"))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if n := len(cl.Metadata().Brokers); n != 3 {
		t.Fatalf("%d brokers in metadata", n)
	}
	tm, err := cl.TopicMetadata(ctx, "t")
	if err != nil || len(tm.Partitions) != 4 {
		t.Fatalf("topic metadata %+v %v", tm, err)
	}
	for p := int32(0); p < 4; p++ {
		leader, err := cl.PartitionLeader(ctx, "t", p)
		if err != nil || leader != fake.LeaderFor("t", p) {
			t.Fatalf("leader of t-%d: %d %v, kfake says %d", p, leader, err, fake.LeaderFor("t", p))
		}
	}
	if _, err := cl.TopicMetadata(ctx, "missing"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("missing topic: %v", err)
	}
}

func TestClientPipelinesConcurrentRequestsOnOneConnection(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		go func() {
			_, err := cl.BrokerRequest(ctx, 0, kmsg.NewPtrMetadataRequest())
			errs <- err
		}()
	}
	for i := 0; i < 50; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestClientFindsAndCachesTheGroupCoordinator(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id, err := cl.Coordinator(ctx, GroupCoordinator, "g1")
	if err != nil || id != fake.CoordinatorFor("g1") {
		t.Fatalf("coordinator %d %v, kfake says %d", id, err, fake.CoordinatorFor("g1"))
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g1"
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g1"
	req.Groups = append(req.Groups, g)
	if _, err := cl.CoordinatorRequest(ctx, GroupCoordinator, "g1", req); err != nil {
		t.Fatal(err)
	}
}

func TestClientTimesOutAndClosesTheConnection(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...), RequestTimeout(200*time.Millisecond), RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Handled with neither response nor error: kfake never answers.
	fake.ControlKey(int16(kmsg.ListGroups), func(kmsg.Request) (kmsg.Response, error, bool) { return nil, nil, true })
	_, err = cl.BrokerRequest(ctx, 0, kmsg.NewPtrListGroupsRequest())
	if !errors.Is(err, ErrRequestTimeout) || !IsRetriable(err) {
		t.Fatalf("want a request timeout, got %v", err)
	}
	// The next request gets a fresh connection.
	if _, err := cl.BrokerRequest(ctx, 0, kmsg.NewPtrListGroupsRequest()); err != nil {
		t.Fatal(err)
	}
}

func TestMetadataIsRefreshedEveryMaxAge(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...), MetadataMaxAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if tm, err := cl.TopicMetadata(ctx, "t"); err != nil || len(tm.Partitions) != 2 {
		t.Fatalf("%+v %v", tm, err)
	}
	adm := NewAdminFromClient(cl)
	if rs, err := adm.CreatePartitions(ctx, 5, "t"); err != nil || rs[0].Err != nil {
		t.Fatalf("create partitions %+v %v", rs, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(cl.Metadata().Topics["t"].Partitions) != 5 {
		if time.Now().After(deadline) {
			t.Fatal("the cache never saw the new partitions")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProducerFollowsAMovedLeader(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), MetadataMaxAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, StringRecord("t", "before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	old := fake.LeaderFor("t", 0)
	if err := fake.MoveTopicPartition("t", 0, (old+1)%3); err != nil {
		t.Fatal(err)
	}
	// The cached leader answers NOT_LEADER_OR_FOLLOWER; the producer
	// refreshes its metadata and retries on the new leader.
	res := p.ProduceSync(ctx, StringRecord("t", "after"))
	if err := res.FirstErr(); err != nil || res[0].Record.Offset != 1 {
		t.Fatalf("after the move: %v offset %d", err, res[0].Record.Offset)
	}
	if got := p.Client().Metadata().Topics["t"].Partitions[0].Leader; got != (old+1)%3 {
		t.Fatalf("cached leader %d, want %d", got, (old+1)%3)
	}
}

// plain is SASL/PLAIN (RFC 4616) through the SASLMechanism hook.
type plain struct{ user, pass string }

func (plain) Name() string { return "PLAIN" }
func (p plain) Authenticate(context.Context, string) (SASLSession, []byte, error) {
	return p, []byte("\x00" + p.user + "\x00" + p.pass), nil
}
func (plain) Challenge([]byte) (bool, []byte, error) { return true, nil, nil }

func TestClientAuthenticatesThroughTheSASLHook(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...), SASL(plain{"admin", "secret"}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.TopicMetadata(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	_, err = NewClient(ctx, SeedBrokers(fake.ListenAddrs()...), SASL(plain{"admin", "wrong"}))
	if err == nil {
		t.Fatal("a wrong password authenticated")
	}
	if IsRetriable(err) {
		t.Fatalf("authentication failure is retriable: %v", err)
	}
}

func TestClientNegotiatesTheHighestCommonVersion(t *testing.T) {
	old := kversion.V2_8_0()
	fake := newFake(t, kfake.NumBrokers(1), kfake.MaxVersions(old), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrListGroupsRequest(), kmsg.NewPtrFindCoordinatorRequest()} {
		resp, err := cl.BrokerRequest(ctx, 0, req)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := old.LookupMaxKeyVersion(req.Key())
		if want > req.MaxVersion() {
			want = req.MaxVersion()
		}
		if resp.GetVersion() != want {
			t.Fatalf("%s at v%d, want v%d (Kafka 2.8's max)", kmsg.NameForKey(req.Key()), resp.GetVersion(), want)
		}
	}
	// DescribeQuorum did not exist in 2.8: refused locally, not sent.
	if _, err := cl.BrokerRequest(ctx, 0, kmsg.NewPtrDescribeQuorumRequest()); !errors.Is(err, ErrUnsupportedRequest) {
		t.Fatalf("describe quorum to a 2.8 broker: %v", err)
	}
}

func TestPipelinedResponsesReachTheirOwnRequests(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		go func() {
			var req kmsg.Request = kmsg.NewPtrMetadataRequest()
			if i%2 == 1 {
				req = kmsg.NewPtrListGroupsRequest()
			}
			rctx := ctx
			if i%7 == 0 { // some callers give up at once; their responses must be dropped
				c, cancel := context.WithCancel(ctx)
				cancel()
				rctx = c
			}
			resp, err := cl.BrokerRequest(rctx, 0, req)
			switch {
			case err != nil && i%7 == 0:
				errs <- nil
			case err != nil:
				errs <- err
			case resp.Key() != req.Key():
				errs <- fmt.Errorf("%s got a %s response", kmsg.NameForKey(req.Key()), kmsg.NameForKey(resp.Key()))
			default:
				errs <- nil
			}
		}()
	}
	for i := 0; i < 200; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestLongPollDoesNotHoldUpOtherRequests: Kafka (and kfake, which copies
// it) reads a connection's next request only after answering the previous
// one. A producer and a consumer sharing a Client, and a consumer's own
// group requests, must therefore not share the connection its long-poll
// Fetches wait on: a produce or a metadata request behind a parked Fetch
// would wait out fetch.max.wait.ms.
func TestLongPollDoesNotHoldUpOtherRequests(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "idle"))
	ctx := testCtx(t)
	cl, err := NewClient(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const maxWait = 3 * time.Second
	cons, err := NewConsumerFromClient(ctx, cl, ConsumePartitions(map[string]map[int32]int64{"idle": {0: OffsetLatest}}),
		FetchMaxWait(maxWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	prod, err := NewProducerFromClient(ctx, cl, Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close(ctx)
	polled := make(chan []*Record, 1)
	go func() {
		recs, _ := cons.Poll(ctx)
		polled <- recs
	}()
	time.Sleep(300 * time.Millisecond) // the consumer's Fetch is parked by now
	start := time.Now()
	if _, err := cl.FetchMetadata(ctx, []string{"idle"}); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &Record{Topic: "idle", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > maxWait/2 {
		t.Fatalf("metadata and produce took %v with a Fetch parked (fetch.max.wait.ms %v)", d, maxWait)
	}
	select {
	case recs := <-polled:
		if len(recs) != 1 || string(recs[0].Value) != "v" {
			t.Fatalf("polled %v", recs)
		}
	case <-time.After(maxWait / 2):
		t.Fatal("the parked Fetch was not answered by the produce")
	}
}
