package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/client/clienttest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sdkTxnOverrides keep a one-node cluster's internal topics at RF 1 and its
// group rebalances fast.
var sdkTxnOverrides = []string{
	"transaction.state.log.replication.factor=1",
	"transaction.state.log.min.isr=1",
	"transaction.state.log.num.partitions=4",
	"offsets.topic.replication.factor=1",
	"offsets.topic.num.partitions=4",
	"group.initial.rebalance.delay.ms=50",
	"group.min.session.timeout.ms=500",
}

// TestSDKTransactionsAgainstKeel runs the SDK transactional producer's
// suite (client/producer_txn_test.go runs it against franz-go's kfake)
// against a real Keel node: commit, abort, commit under read_committed;
// consumer group offsets committed with the transaction only; fencing by a
// second producer with the same transactional id; produce outside a
// transaction refused; Close aborting an open transaction.
func TestSDKTransactionsAgainstKeel(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, sdkTxnOverrides...)
	c.WaitReady(30 * time.Second)
	clienttest.RunTransactions(t, clienttest.Target{Bootstrap: c.BootstrapServers()})
}

// TestSDKTransactionsAgainstKeelCluster runs the commit/abort/commit and
// fencing scenarios against three nodes, where the transaction
// coordinator, the group coordinator and the partition leaders are
// usually different brokers.
func TestSDKTransactionsAgainstKeelCluster(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}, {ID: 3, Roles: "broker"}},
		"group.initial.rebalance.delay.ms=50", "group.min.session.timeout.ms=500")
	c.WaitReady(30 * time.Second)
	tgt := clienttest.Target{Bootstrap: c.BootstrapServers()}
	t.Run("CommitAbortCommit", func(t *testing.T) { clienttest.TxnCommitAbortCommit(t, tgt) })
	t.Run("OffsetsCommitOnlyWithTheTransaction", func(t *testing.T) { clienttest.TxnOffsetsCommitOnlyWithTheTransaction(t, tgt) })
	t.Run("SecondProducerFencesTheFirst", func(t *testing.T) { clienttest.TxnSecondProducerFencesTheFirst(t, tgt) })
}

// BenchmarkSDKTransactions measures the SDK's committed transactions per
// second (10 records each) against one Keel node, at transaction.version 2
// (a new cluster's) and then 0, where the SDK uses version 1.
func BenchmarkSDKTransactions(b *testing.B) {
	c := StartCluster(b, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, sdkTxnOverrides...)
	c.WaitReady(30 * time.Second)
	tgt := clienttest.Target{Bootstrap: c.BootstrapServers()}
	b.Run("transaction.version=2", func(b *testing.B) { clienttest.BenchmarkTransactions(b, tgt) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.Bootstrap...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 0, UpgradeType: 2})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		b.Fatal(err)
	}
	// Each run's producer is new: its ApiVersions carry the new level.
	b.Run("transaction.version=0", func(b *testing.B) { clienttest.BenchmarkTransactions(b, tgt) })
}

// TestSDKTransactionVersion2 runs the Keel SDK's transaction version 2
// cases that need a broker of their own (the suite above runs at version 2
// too, a new cluster's default) on one node.
func TestSDKTransactionVersion2(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, sdkTxnOverrides...)
	c.WaitReady(30 * time.Second)
	cl, adm := newClient(t, c)
	tgt := clienttest.Target{Bootstrap: c.BootstrapServers()}
	t.Run("LostEndTxnResponse", func(t *testing.T) { sdkTxnLostEndTxnResponse(t, tgt, adm) })
	t.Run("UpgradeFromVersion1", func(t *testing.T) { sdkTxnUpgradeToVersion2(t, tgt, cl, adm) }) // last: it changes the level
}

// sdkTxnLostEndTxnResponse: the connection dies after a commit's EndTxn v5
// reached the coordinator and before its answer (the new epoch) reached
// the producer. The producer sends the same EndTxn again, one epoch behind
// now, and the coordinator answers it as the retry it is: the same new
// epoch, not PRODUCER_FENCED. The next transaction commits at that epoch,
// and nothing is lost or doubled.
func sdkTxnLostEndTxnResponse(t *testing.T, tgt clienttest.Target, adm *kadm.Client) {
	s := newSDKTxnSession(t, tgt, "sdk-lost-endtxn")
	s.commit(1)
	pid, epoch := producerOf(s.ctx, t, adm, s.id)
	s.conns.loseEndTxnResponse.Store(true)
	s.commit(2)
	if lost, sent := s.conns.lost.Load(), s.conns.endTxns.Load(); lost != 1 || sent != 3 {
		t.Fatalf("%d EndTxn responses lost of %d sent, want 1 of 3 (the lost one's retry)", lost, sent)
	}
	s.commit(3)
	if id, e := producerOf(s.ctx, t, adm, s.id); id != pid || e != epoch+2 {
		t.Fatalf("after two commits, one of them retried: %d/%d, want %d/%d", id, e, pid, epoch+2)
	}
	clienttest.ReadCommitted(t, tgt, s.id, 2, s.want)
}

// sdkTxnUpgradeToVersion2: a Keel SDK producer on a cluster at
// transaction.version 0 uses transaction version 1 (its epoch stays put
// across commits). Once the operator upgrades the feature and the
// producer's connections are new (its ApiVersions then carry the newer
// features), the transaction that ends bumps the epoch with InitProducerId
// (as Java's client does on the move) and the next ones run under version
// 2, EndTxn bumping the epoch each time. Every committed record is read
// back with read_committed.
func sdkTxnUpgradeToVersion2(t *testing.T, tgt clienttest.Target, cl *kgo.Client, adm *kadm.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	setTxnVersion := func(level int16, upgradeType int8) {
		t.Helper()
		res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: upgradeType})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("transaction.version %d: %v", level, err)
		}
	}
	setTxnVersion(0, 2) // a safe downgrade: the cluster is new
	s := newSDKTxnSession(t, tgt, "sdk-tv-upgrade")
	s.commit(1)
	pid, epoch := producerOf(ctx, t, adm, s.id)
	s.commit(2)
	if id, e := producerOf(ctx, t, adm, s.id); id != pid || e != epoch {
		t.Fatalf("under transaction version 1 the producer moved from %d/%d to %d/%d", pid, epoch, id, e)
	}

	setTxnVersion(2, 1)
	// The newer features reach the producer with its next connections.
	waitFor(t, 10*time.Second, "the node at transaction.version 2", func() bool {
		kresp, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
		if err != nil {
			return false
		}
		for _, f := range kresp.(*kmsg.ApiVersionsResponse).FinalizedFeatures {
			if f.Name == "transaction.version" && f.MaxVersionLevel == 2 {
				return true
			}
		}
		return false
	})
	s.conns.closeAll()
	s.commit(3) // begun under version 1; the move bumps the epoch as it ends
	if id, e := producerOf(ctx, t, adm, s.id); id != pid || e != epoch+1 {
		t.Fatalf("after the move to transaction version 2: %d/%d, want %d/%d", id, e, pid, epoch+1)
	}
	s.commit(4)
	s.commit(5)
	if id, e := producerOf(ctx, t, adm, s.id); id != pid || e != epoch+3 {
		t.Fatalf("after two transactions under version 2: %d/%d, want %d/%d (EndTxn bumps each)", id, e, pid, epoch+3)
	}
	clienttest.ReadCommitted(t, tgt, s.id, 2, s.want)
}

// sdkTxnSession is an SDK transactional producer, with transactional id
// id, writing to a two-partition topic of the same name through a
// connTracker.
type sdkTxnSession struct {
	t     *testing.T
	ctx   context.Context
	id    string
	p     *client.Producer
	conns *connTracker
	want  []string // the committed values
}

func newSDKTxnSession(t *testing.T, tgt clienttest.Target, id string) *sdkTxnSession {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	clienttest.CreateTopic(t, clienttest.NewAdmin(t, tgt), id, 2)
	s := &sdkTxnSession{t: t, ctx: ctx, id: id, conns: &connTracker{}}
	s.p = clienttest.NewTxnProducer(t, tgt, id, client.Dialer(s.conns.dial))
	return s
}

// commit is transaction n: three records, committed.
func (s *sdkTxnSession) commit(n int) {
	t := s.t
	t.Helper()
	if err := s.p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		v := fmt.Sprintf("txn-%d-%d", n, i)
		if err := s.p.ProduceSync(s.ctx, client.StringRecord(s.id, v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		s.want = append(s.want, v)
	}
	if err := s.p.CommitTransaction(s.ctx); err != nil {
		t.Fatalf("commit %d: %v", n, err)
	}
}

// connTracker is a client.Dialer that can close every connection it made,
// or lose the response to one EndTxn request (loseEndTxnResponse): the
// request reaches the broker, and its connection closes before the client
// reads anything more.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn

	loseEndTxnResponse atomic.Bool
	lost               atomic.Int32 // EndTxn responses lost
	endTxns            atomic.Int32 // EndTxn requests sent
}

func (d *connTracker) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns = append(d.conns, conn)
	d.mu.Unlock()
	tc := &trackedConn{Conn: conn, d: d}
	tc.doomed.Store(-1)
	return tc, nil
}

type trackedConn struct {
	net.Conn
	d *connTracker
	// doomed: the correlation id of an EndTxn whose response is to be
	// lost, or -1.
	doomed atomic.Int64
}

// Write sees whole requests (the client writes a frame at once): a
// request's size (4 bytes), API key, version and correlation id.
func (c *trackedConn) Write(b []byte) (int, error) {
	if len(b) >= 12 && binary.BigEndian.Uint16(b[4:6]) == uint16(kmsg.EndTxn) {
		c.d.endTxns.Add(1)
		if c.d.loseEndTxnResponse.CompareAndSwap(true, false) {
			c.doomed.Store(int64(binary.BigEndian.Uint32(b[8:12])))
		}
	}
	return c.Conn.Write(b)
}

// Read closes the connection instead of handing over the doomed EndTxn's
// response (its size, then its correlation id): the broker has ended the
// transaction, and the client never learns it.
func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if corr := c.doomed.Load(); corr >= 0 && n >= 8 && int64(binary.BigEndian.Uint32(b[4:8])) == corr {
		c.d.lost.Add(1)
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return n, err
}

func (d *connTracker) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}
