package broker

// The transaction coordinator's marker writer (Kafka's
// TransactionMarkerChannelManager): once a transaction is prepared to
// commit or abort, a COMMIT or ABORT marker goes to every partition it
// wrote to, through WriteTxnMarkers to the partition's current leader, and
// the coordinator completes the transaction only when every partition
// answered. Partitions whose leader moved, is unknown, or is short of
// in-sync replicas are retried after txnMarkerRetryBackoff with the leader
// looked up again; partitions whose topic was deleted are dropped (nothing
// is left to end there), as Kafka does. A marker refused as fenced
// (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) means a newer
// coordinator or producer epoch owns the transaction: this writer gives up
// and the transaction stays prepared for the next coordinator, which
// re-sends the markers when it loads.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/storage"
)

// txnMarkerRetryBackoff is the pause before markers are re-sent to the
// partitions that could not take them.
const txnMarkerRetryBackoff = 100 * time.Millisecond

// errMarkersFenced says a partition refused a marker as coming from a
// fenced coordinator or producer epoch.
var errMarkersFenced = errors.New("transaction markers fenced")

// markerJob is one transaction's markers.
type markerJob struct {
	transactionalID  string
	producerID       int64
	producerEpoch    int16
	commit           bool
	coordinatorEpoch int32
	partitions       []storage.TopicPartition
}

// brokerConns holds one inter-broker connection per destination broker,
// for one kind of request this node sends (transaction markers,
// transaction verifications), so that one kind never waits behind the
// other.
//
// Concurrency: mu guards conns; safe from any goroutine.
type brokerConns struct {
	dial     DialFunc // set before the first conn
	clientID string
	mu       sync.Mutex
	conns    map[int32]*kafkaConn
	closed   bool
}

// conn returns the connection to broker id at addr, replacing one to an
// old address.
func (c *brokerConns) conn(id int32, addr string) (*kafkaConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("broker closing")
	}
	kc := c.conns[id]
	if kc == nil || kc.addr != addr {
		if kc != nil {
			kc.close()
		}
		if c.conns == nil {
			c.conns = map[int32]*kafkaConn{}
		}
		kc = newKafkaConn(addr, c.clientID, c.dial)
		c.conns[id] = kc
	}
	return kc, nil
}

// topicEntry is the entry of topic in *entries (a request's or response's
// per-topic list), appended with newEntry the first time the topic comes;
// index remembers where each topic's entry is.
func topicEntry[T any](entries *[]T, index map[string]int, topic string, newEntry func(topic string) T) *T {
	i, ok := index[topic]
	if !ok {
		i = len(*entries)
		index[topic] = i
		*entries = append(*entries, newEntry(topic))
	}
	return &(*entries)[i]
}

// close drops every connection; conn fails from then on.
func (c *brokerConns) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, kc := range c.conns {
		kc.close()
	}
	c.conns = nil
}

// writeTxnMarkers sends job's markers until every partition took its
// marker or was dropped (nil), a partition refused it as fenced
// (errMarkersFenced), or ctx ends.
func (b *Broker) writeTxnMarkers(ctx context.Context, job markerJob) error {
	left := job.partitions
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(txnMarkerRetryBackoff):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var retry []storage.TopicPartition
		byLeader := map[int32][]storage.TopicPartition{}
		img := b.currentImage()
		for _, tp := range left {
			t, ok := img.Topic(tp.Topic)
			switch {
			case !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions):
				b.log.Info("dropping a transaction marker for a partition that no longer exists",
					"transactional_id", job.transactionalID, "partition", tp)
			case t.Partitions[tp.Partition].Leader < 0:
				retry = append(retry, tp)
			default:
				l := t.Partitions[tp.Partition].Leader
				byLeader[l] = append(byLeader[l], tp)
			}
		}
		leaders := make([]int32, 0, len(byLeader))
		for id := range byLeader {
			leaders = append(leaders, id)
		}
		sort.Slice(leaders, func(i, j int) bool { return leaders[i] < leaders[j] })
		for _, id := range leaders {
			failed, err := b.sendTxnMarkers(ctx, id, job, byLeader[id])
			if err != nil {
				return err
			}
			retry = append(retry, failed...)
		}
		if len(retry) == 0 {
			return nil
		}
		if attempt%50 == 49 {
			b.log.Warn("transaction markers still not written; retrying", "transactional_id", job.transactionalID,
				"producer_id", job.producerID, "partitions", len(retry), "attempts", attempt+1)
		}
		left = retry
	}
}

// sendTxnMarkers sends job's marker for parts to broker id and returns the
// partitions to retry.
func (b *Broker) sendTxnMarkers(ctx context.Context, id int32, job markerJob, parts []storage.TopicPartition) ([]storage.TopicPartition, error) {
	addr, ok := b.brokerAddr(id)
	if !ok {
		return parts, nil
	}
	kc, err := b.txnMarkerConns.conn(id, addr)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = job.producerID, job.producerEpoch, job.commit, job.coordinatorEpoch
	byTopic := map[string]int{}
	for _, tp := range parts {
		t := topicEntry(&mk.Topics, byTopic, tp.Topic, func(name string) kmsg.WriteTxnMarkersRequestMarkerTopic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = name
			return t
		})
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, mk)
	rctx, cancel := context.WithTimeout(ctx, txnMarkerTimeout+5*time.Second)
	defer cancel()
	resp, err := kc.request(rctx, pinnedVersion{req, 1})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log.Debug("sending transaction markers failed; retrying", "broker", id, "error", err)
		return parts, nil
	}
	wr, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok || len(wr.Markers) != 1 {
		return parts, nil
	}
	answered := map[storage.TopicPartition]int16{}
	for _, t := range wr.Markers[0].Topics {
		for _, p := range t.Partitions {
			answered[storage.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
		}
	}
	var retry []storage.TopicPartition
	for _, tp := range parts {
		code, ok := answered[tp]
		switch {
		case !ok:
			retry = append(retry, tp)
		case code == 0:
		case code == kerr.InvalidProducerEpoch.Code, code == kerr.TransactionCoordinatorFenced.Code:
			b.log.Warn("a partition refused a transaction marker as fenced; leaving the transaction to a newer coordinator",
				"transactional_id", job.transactionalID, "producer_id", job.producerID, "partition", tp,
				"error", kerr.ErrorForCode(code))
			return nil, fmt.Errorf("%s: %w", tp, errMarkersFenced)
		default:
			retry = append(retry, tp)
		}
	}
	return retry, nil
}
