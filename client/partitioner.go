package client

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/keelstream/keel/network/record"
)

// Partitioner chooses partitions for a producer. ForTopic is called once per
// topic, the first time the producer sees it.
type Partitioner interface {
	ForTopic(topic string) TopicPartitioner
}

// TopicPartitioner chooses the partition of each record of one topic. It is
// called from every goroutine that calls Produce, concurrently, so it must
// be safe for concurrent use; it should not allocate. numPartitions is at
// least 1; the result must be in [0, numPartitions).
type TopicPartitioner interface {
	Partition(r *Record, numPartitions int32) int32
}

// DefaultPartitioner is the Java client's: records with a key go to
// toPositive(murmur2(key)) % numPartitions, so they land where a Java
// producer would put them; records without a key stick to one partition
// until about batchBytes have gone there, then move to another random one
// (KIP-480's sticky partitioner, with KIP-794's switch by bytes), which
// fills batches instead of spreading single records thinly.
func DefaultPartitioner(batchBytes int) Partitioner {
	return defaultPartitioner{batchBytes: int64(batchBytes)}
}

type defaultPartitioner struct{ batchBytes int64 }

func (d defaultPartitioner) ForTopic(string) TopicPartitioner {
	s := &stickyPartitioner{batchBytes: d.batchBytes}
	s.current.Store(-1)
	return s
}

// stickyPartitioner holds one topic's sticky state in atomics: a racing
// switch may move a few records to a different partition than a serial run
// would, which is harmless.
type stickyPartitioner struct {
	batchBytes int64
	current    atomic.Int32
	bytes      atomic.Int64
}

func (s *stickyPartitioner) Partition(r *Record, n int32) int32 {
	if r.Key != nil {
		return record.PartitionForKey(r.Key, n)
	}
	cur := s.current.Load()
	size := int64(len(r.Value)) + 16
	if cur < 0 || cur >= n || s.bytes.Add(size) > s.batchBytes {
		next := rand.Int32N(n)
		if n > 1 && next == cur {
			next = (next + 1) % n
		}
		if s.current.CompareAndSwap(cur, next) {
			s.bytes.Store(size)
		}
		return s.current.Load()
	}
	return cur
}

// ManualPartitioner sends every record to Record.Partition (which must
// exist; otherwise the record fails with UNKNOWN_TOPIC_OR_PARTITION).
func ManualPartitioner() Partitioner { return manualPartitioner{} }

type manualPartitioner struct{}

func (manualPartitioner) ForTopic(string) TopicPartitioner   { return manualPartitioner{} }
func (manualPartitioner) Partition(r *Record, _ int32) int32 { return r.Partition }

// RoundRobinPartitioner spreads records over partitions one by one,
// ignoring keys (Kafka's RoundRobinPartitioner).
func RoundRobinPartitioner() Partitioner { return roundRobin{} }

type roundRobin struct{}

func (roundRobin) ForTopic(string) TopicPartitioner { return &roundRobinTopic{} }

type roundRobinTopic struct{ next atomic.Uint32 }

func (r *roundRobinTopic) Partition(_ *Record, n int32) int32 {
	return int32((r.next.Add(1) - 1) % uint32(n))
}
