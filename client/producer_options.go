package client

import (
	"time"

	"github.com/keelstream/keel/network/record"
)

// producerOpt is an Opt that only a Producer applies.
type producerOpt struct{ fn func(*producerConfig) }

func (producerOpt) isOpt() {}

// Acks is the producer's acks setting: how many replicas must have the
// records before a Produce request is answered.
type Acks int16

const (
	// AcksNone (acks=0): no response at all; offsets are unknown and a
	// lost connection loses records silently.
	AcksNone Acks = 0
	// AcksLeader (acks=1): the leader has appended the records.
	AcksLeader Acks = 1
	// AcksAll (acks=all, -1): every in-sync replica has them, and the ISR
	// is at least min.insync.replicas. Required by idempotence.
	AcksAll Acks = -1
)

// Compression codecs for ProducerCompression (Kafka's compression.type).
const (
	CompressionNone   = record.CompressionNone
	CompressionGzip   = record.CompressionGzip
	CompressionSnappy = record.CompressionSnappy
	CompressionLZ4    = record.CompressionLZ4
	CompressionZstd   = record.CompressionZstd
)

type producerConfig struct {
	acks            Acks
	acksSet         bool
	idempotent      bool
	idempotentSet   bool
	compression     record.Compression
	batchSize       int
	linger          time.Duration
	bufferMemory    int64
	maxBlock        time.Duration
	maxInFlight     int
	deliveryTimeout time.Duration
	maxRequestSize  int
	produceTimeout  time.Duration
	partitioner     Partitioner
	transactionalID string
	txnTimeout      time.Duration
}

func defaultProducerConfig() producerConfig {
	return producerConfig{
		acks:            AcksAll,
		idempotent:      true,
		compression:     record.CompressionNone,
		batchSize:       16 << 10,
		linger:          5 * time.Millisecond,
		bufferMemory:    32 << 20,
		maxBlock:        60 * time.Second,
		maxInFlight:     5,
		deliveryTimeout: 2 * time.Minute,
		maxRequestSize:  1 << 20,
		produceTimeout:  30 * time.Second,
		txnTimeout:      60 * time.Second,
	}
}

// RequiredAcks sets acks. Default AcksAll. Choosing AcksNone or AcksLeader
// turns idempotence off unless ProducerIdempotence(true) was also given, in
// which case NewProducer fails (Kafka's rule: idempotence needs acks=all).
func RequiredAcks(a Acks) Opt {
	return producerOpt{func(c *producerConfig) { c.acks, c.acksSet = a, true }}
}

// ProducerIdempotence sets enable.idempotence. Default on: the producer gets
// a producer id (InitProducerId) and numbers its batches per partition, so a
// batch retried after a lost response is not appended twice and ordering
// holds with up to 5 requests in flight (KIP-98, KIP-679).
func ProducerIdempotence(on bool) Opt {
	return producerOpt{func(c *producerConfig) { c.idempotent, c.idempotentSet = on, true }}
}

// ProducerCompression sets compression.type for every batch. Default none.
func ProducerCompression(c record.Compression) Opt {
	return producerOpt{func(cfg *producerConfig) { cfg.compression = c }}
}

// BatchSize sets batch.size: a partition's batch is sent as soon as its
// records reach this many (uncompressed) bytes. Records larger than
// batch.size go in a batch of their own. Default 16 KiB.
func BatchSize(n int) Opt {
	return producerOpt{func(c *producerConfig) { c.batchSize = n }}
}

// Linger sets linger.ms: how long a batch that is not full waits for more
// records before it is sent. 0 sends as soon as the sender is free (records
// still batch up while earlier requests are in flight). Default 5ms, Kafka
// 4.0's default (KIP-1030).
func Linger(d time.Duration) Opt {
	return producerOpt{func(c *producerConfig) { c.linger = d }}
}

// BufferMemory sets buffer.memory: the bytes of records buffered and not yet
// acknowledged. Produce blocks while it is full, up to MaxBlock. Default
// 32 MiB.
func BufferMemory(n int64) Opt {
	return producerOpt{func(c *producerConfig) { c.bufferMemory = n }}
}

// MaxBlock sets max.block.ms: the longest Produce blocks waiting for buffer
// memory or for a topic's metadata before failing the record with
// ErrMaxBlock. Default 60s.
func MaxBlock(d time.Duration) Opt {
	return producerOpt{func(c *producerConfig) { c.maxBlock = d }}
}

// MaxInFlight sets max.in.flight.requests.per.connection: Produce requests
// sent to one broker and not yet answered. With idempotence it must be at
// most 5 (the broker remembers the last 5 batches per producer), and a
// partition's retried batch is sent alone. Default 5.
func MaxInFlight(n int) Opt {
	return producerOpt{func(c *producerConfig) { c.maxInFlight = n }}
}

// DeliveryTimeout sets delivery.timeout.ms: the bound on the time from
// Produce to the callback, retries included (KIP-91). Default 2m.
func DeliveryTimeout(d time.Duration) Opt {
	return producerOpt{func(c *producerConfig) { c.deliveryTimeout = d }}
}

// MaxRequestSize sets max.request.size: the largest Produce request, and so
// the largest record. Default 1 MiB.
func MaxRequestSize(n int) Opt {
	return producerOpt{func(c *producerConfig) { c.maxRequestSize = n }}
}

// ProduceRequestTimeout sets the broker-side timeout in Produce requests
// (the producer's request.timeout.ms as the broker sees it: how long acks=all
// may wait for the ISR). Default 30s.
func ProduceRequestTimeout(d time.Duration) Opt {
	return producerOpt{func(c *producerConfig) { c.produceTimeout = d }}
}

// WithPartitioner replaces the default partitioner (murmur2 on the key,
// sticky for keyless records).
func WithPartitioner(p Partitioner) Opt {
	return producerOpt{func(c *producerConfig) { c.partitioner = p }}
}

// TransactionalID sets transactional.id and makes the producer
// transactional (KIP-98): NewProducer finds the transaction coordinator and
// calls InitProducerId with the id (Java's initTransactions), which fences
// any earlier producer with the same id and aborts its open transaction.
// Records may then only be produced between BeginTransaction and
// CommitTransaction or AbortTransaction.
//
// It implies idempotence and acks=all: NewProducer fails if
// ProducerIdempotence(false) or RequiredAcks other than AcksAll was also
// given, as Kafka's producer refuses the combination. An empty id is the
// default: not transactional.
func TransactionalID(id string) Opt {
	return producerOpt{func(c *producerConfig) { c.transactionalID = id }}
}

// TransactionTimeout sets transaction.timeout.ms: how long the transaction
// coordinator lets a transaction stay open before it aborts it on its own
// (and fences this producer's epoch). The broker refuses values above its
// transaction.max.timeout.ms. Only meaningful with TransactionalID.
// Default 60s, as in Kafka.
func TransactionTimeout(d time.Duration) Opt {
	return producerOpt{func(c *producerConfig) { c.txnTimeout = d }}
}
