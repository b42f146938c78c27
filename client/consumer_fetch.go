package client

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// This file is the Consumer's fetch path: the dispatcher that sends one
// Fetch at a time to each partition leader, incremental fetch sessions
// (KIP-227), and decoding record batches (network/record) into Records,
// including read_committed filtering of aborted transactions (KIP-98).

// Fetch-level error codes handled here.
const (
	codeOffsetOutOfRange      int16 = 1
	codeFetchSessionNotFound  int16 = 70
	codeInvalidFetchSessEpoch int16 = 71
)

// maxDecompressedBatch bounds one batch's decompressed size, so that a
// corrupt or hostile batch cannot exhaust memory.
const maxDecompressedBatch = 256 << 20

// fetchSession is the client side of one broker's incremental fetch session
// (KIP-227). Guarded by Consumer.mu; only the broker's single in-flight
// fetch uses it.
type fetchSession struct {
	id    int32
	epoch int32
	// sent holds the partitions in the broker's session and the fetch
	// offset last sent for each: a partition is resent only when its offset
	// changes, and listed as forgotten when it leaves the fetch.
	sent map[groupTP]int64
}

func (s *fetchSession) reset() { s.id, s.epoch, s.sent = 0, 0, nil }

// fetchItem is one partition in one Fetch.
type fetchItem struct {
	ps     *partState
	gen    uint64
	offset int64
	epoch  int32 // current leader epoch from metadata (KIP-320 fencing)
}

// fetchDispatcher starts a Fetch to every leader that has fetchable
// partitions and no Fetch in flight. It runs until Close.
func (c *Consumer) fetchDispatcher() {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-c.run.Done():
			return
		case <-c.fetchWake:
		case <-retry.C:
		}
		if c.startFetches() {
			// Some partitions have no known leader: refresh and retry.
			c.cl.TriggerMetadataRefresh()
			retry.Reset(c.cl.cfg.retryBackoff)
		}
	}
}

// startFetches groups the fetchable partitions by leader and starts a fetch
// goroutine per idle leader. It reports whether a partition had no leader.
func (c *Consumer) startFetches() (noLeader bool) {
	meta := c.cl.Metadata()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run.Err() != nil {
		return false
	}
	byLeader := map[int32][]fetchItem{}
	lagging := map[int32]bool{} // some fetchable partition is behind its high watermark
	waiting := map[int32]bool{} // some partition's records wait for Poll
	for tp, ps := range c.parts {
		t := meta.Topics[tp.Topic]
		if t == nil || int(tp.Partition) >= len(t.Partitions) || t.Partitions[tp.Partition].Leader < 0 {
			noLeader = noLeader || ps.fetchOffset >= 0
			continue
		}
		pm := t.Partitions[tp.Partition]
		if ps.buffered {
			waiting[pm.Leader] = true
		}
		if ps.fetchOffset < 0 || ps.inflight || ps.buffered || c.busy[pm.Leader] {
			continue
		}
		if ps.highWater < 0 || ps.fetchOffset < ps.highWater {
			lagging[pm.Leader] = true
		}
		byLeader[pm.Leader] = append(byLeader[pm.Leader], fetchItem{ps: ps, gen: ps.gen, offset: ps.fetchOffset, epoch: pm.LeaderEpoch})
	}
	for leader, items := range byLeader {
		if !lagging[leader] && waiting[leader] {
			// Every fetchable partition is caught up: a Fetch now would
			// only long-poll (fetch.max.wait.ms) and hold up the partitions
			// whose records Poll is about to take. Fetch them all together
			// once Poll frees those (drain kicks the dispatcher).
			continue
		}
		c.busy[leader] = true
		for _, it := range items {
			it.ps.inflight = true
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.fetchFrom(leader, items)
		}()
	}
	return noLeader
}

// fetchFrom sends one Fetch to leader for items and hands the results to
// Poll's buffer.
func (c *Consumer) fetchFrom(leader int32, items []fetchItem) {
	backoff := false
	defer func() {
		if backoff {
			_ = sleepCtx(c.run, c.cl.cfg.retryBackoff)
		}
		c.mu.Lock()
		for _, it := range items {
			it.ps.inflight = false
		}
		delete(c.busy, leader)
		c.mu.Unlock()
		c.kickFetch()
	}()

	req, sess, full, newSent := c.buildFetch(leader, items)
	kresp, err := c.cl.BrokerRequest(c.run, leader, req)
	if err != nil {
		if c.run.Err() == nil {
			c.resetSession(sess)
			c.cl.TriggerMetadataRefresh()
			backoff = true
		}
		return
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		c.resetSession(sess)
		// A lost session is repaired by the next (full) fetch at once.
		backoff = resp.ErrorCode != codeFetchSessionNotFound && resp.ErrorCode != codeInvalidFetchSessEpoch
		return
	}
	if sess != nil {
		c.mu.Lock()
		switch {
		case full && resp.SessionID > 0:
			sess.id, sess.epoch, sess.sent = resp.SessionID, 1, newSent
		case full:
			sess.reset() // the broker made no session: stay sessionless
		default:
			sess.sent = newSent
			if sess.epoch == math.MaxInt32 {
				sess.epoch = 1 // KIP-227: the epoch wraps to 1, never 0
			} else {
				sess.epoch++
			}
		}
		c.mu.Unlock()
	}

	byTP := make(map[groupTP]*fetchItem, len(items))
	for i := range items {
		byTP[items[i].ps.tp] = &items[i]
	}
	refresh := false
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			it := byTP[groupTP{t.Topic, p.Partition}]
			if it == nil {
				continue
			}
			if r := c.handleFetchPartition(t.Topic, it, p); r {
				refresh = true
			}
		}
	}
	if refresh {
		c.cl.TriggerMetadataRefresh()
		backoff = true
	}
}

// buildFetch makes the Fetch for items, using leader's session when
// sessions are on. It returns the session (nil when off), whether the
// request is a full one, and the session's partition set if it succeeds.
func (c *Consumer) buildFetch(leader int32, items []fetchItem) (*kmsg.FetchRequest, *fetchSession, bool, map[groupTP]int64) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(c.cfg.fetchMaxWait.Milliseconds())
	req.MinBytes = c.cfg.fetchMinBytes
	req.MaxBytes = c.cfg.fetchMaxBytes
	req.IsolationLevel = int8(c.cfg.isolation)
	req.SessionEpoch = -1 // sessionless unless a session is used

	c.mu.Lock()
	var sess *fetchSession
	full := true
	if c.cfg.fetchSessions {
		sess = c.sessions[leader]
		if sess == nil {
			sess = &fetchSession{}
			c.sessions[leader] = sess
		}
		req.SessionID, req.SessionEpoch = sess.id, sess.epoch
		full = sess.id == 0
		if full {
			req.SessionEpoch = 0 // ask for a new session
		}
	}
	var prev map[groupTP]int64
	if sess != nil && !full {
		prev = sess.sent
	}
	c.mu.Unlock()

	newSent := make(map[groupTP]int64, len(items))
	byTopic := map[string][]kmsg.FetchRequestTopicPartition{}
	for _, it := range items {
		tp := it.ps.tp
		newSent[tp] = it.offset
		if off, ok := prev[tp]; ok && off == it.offset {
			continue // unchanged: the session remembers it
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = tp.Partition
		p.FetchOffset = it.offset
		p.CurrentLeaderEpoch = it.epoch
		p.LastFetchedEpoch = -1
		p.LogStartOffset = -1
		p.PartitionMaxBytes = c.cfg.fetchMaxPartBytes
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	forgotten := map[string][]int32{}
	for tp := range prev {
		if _, ok := newSent[tp]; !ok {
			forgotten[tp.Topic] = append(forgotten[tp.Topic], tp.Partition)
		}
	}
	for _, t := range sortedTopics(forgotten) {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = t, forgotten[t]
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req, sess, full, newSent
}

func (c *Consumer) resetSession(s *fetchSession) {
	if s == nil {
		return
	}
	c.mu.Lock()
	s.reset()
	c.mu.Unlock()
}

// handleFetchPartition applies one partition's fetch result. It reports
// whether metadata looks stale (leadership moved).
func (c *Consumer) handleFetchPartition(topic string, it *fetchItem, p *kmsg.FetchResponseTopicPartition) bool {
	switch p.ErrorCode {
	case 0:
	case codeOffsetOutOfRange:
		c.mu.Lock()
		if c.parts[it.ps.tp] == it.ps && it.ps.gen == it.gen {
			it.ps.seekLocked(c.resetOffset())
		}
		c.mu.Unlock()
		c.wakePoll()
		return false
	default:
		err := errorWithMessage(p.ErrorCode, nil)
		if IsRetriable(err) {
			// NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH,
			// UNKNOWN_TOPIC_OR_PARTITION, ...: find the new leader.
			return true
		}
		c.mu.Lock()
		c.fetchErrs = append(c.fetchErrs, fmt.Errorf("fetch %s-%d: %w", topic, p.Partition, err))
		c.mu.Unlock()
		c.wakePoll()
		return false
	}

	recs, next, derr := decodeFetchedRecords(topic, p, it.offset, c.cfg.isolation == ReadCommitted)
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := it.ps
	if c.parts[ps.tp] != ps || ps.gen != it.gen {
		return false // seeked or revoked while the fetch was in flight
	}
	ps.highWater = p.HighWatermark
	if derr != nil && len(recs) == 0 {
		c.fetchErrs = append(c.fetchErrs, fmt.Errorf("fetch %s-%d at offset %d: %w", topic, p.Partition, it.offset, derr))
		c.wakePoll()
		return false
	}
	if len(recs) > 0 {
		c.buffered = append(c.buffered, &fetchedPartition{ps: ps, gen: ps.gen, recs: recs, next: next})
		ps.buffered = true
		ps.fetchOffset = next
		c.wakePoll()
		return false
	}
	if next > ps.fetchOffset {
		// Only control batches or aborted records: skip over them.
		ps.fetchOffset, ps.position = next, next
	}
	return false
}

// decodeFetchedRecords turns one partition's record batches into Records,
// skipping records before fetchOffset (a compressed batch is returned whole),
// control batches, and, for read_committed, batches of aborted transactions.
// It returns the next offset to fetch. Keys, values and header values alias
// the response buffer (or a batch's decompressed buffer), which nothing else
// reuses.
func decodeFetchedRecords(topic string, p *kmsg.FetchResponseTopicPartition, fetchOffset int64, readCommitted bool) ([]Record, int64, error) {
	next := fetchOffset
	var aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
	var activeAborts map[int64]bool
	if readCommitted && len(p.AbortedTransactions) > 0 {
		aborted = slices.Clone(p.AbortedTransactions)
		slices.SortFunc(aborted, func(a, b kmsg.FetchResponseTopicPartitionAbortedTransaction) int {
			return int(min(max(a.FirstOffset-b.FirstOffset, -1), 1))
		})
		activeAborts = map[int64]bool{}
	}

	// Size the record slab from the batch headers: one allocation for the
	// whole partition.
	// whole partition. Headers only (no CRC): Batches checks CRCs below.
	total := 0
	for rest := p.RecordBatches; ; {
		size, err := record.PeekBatchSize(rest)
		if err != nil || size > len(rest) {
			break
		}
		if h, err := record.ParseHeader(rest); err == nil && h.NextOffset() > fetchOffset {
			total += int(min(max(h.RecordCount, 0), int32(size)))
		}
		rest = rest[size:]
	}
	recs := make([]Record, 0, total)

	bs := record.NewBatches(p.RecordBatches)
	var r record.Record
	for batch, h, ok := bs.Next(); ok; batch, h, ok = bs.Next() {
		if h.NextOffset() <= fetchOffset {
			continue
		}
		next = h.NextOffset()
		if readCommitted {
			// KIP-98: an aborted transaction's batches come after its
			// first offset and before its ABORT marker.
			for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
				activeAborts[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
			if h.IsControl() {
				if activeAborts != nil && isAbortMarker(batch, h) {
					delete(activeAborts, h.ProducerID)
				}
				continue
			}
			if h.IsTransactional() && activeAborts[h.ProducerID] {
				continue
			}
		} else if h.IsControl() {
			continue
		}
		data := record.RecordsBytes(batch)
		if codec := h.Compression(); codec != record.CompressionNone {
			var err error
			data, err = record.Decompress(codec, nil, data, maxDecompressedBatch)
			if err != nil {
				return recs, h.BaseOffset, fmt.Errorf("decompress %s batch at offset %d: %w", codec, h.BaseOffset, err)
			}
		}
		it := record.NewRecordIterator(h, data)
		for {
			r.Headers = nil // headers must not be shared between records
			if !it.Next(&r) {
				break
			}
			if r.Offset < fetchOffset {
				continue
			}
			recs = append(recs, Record{
				Topic:         topic,
				Partition:     p.Partition,
				Offset:        r.Offset,
				Timestamp:     time.UnixMilli(r.Timestamp),
				TimestampType: TimestampType(h.TimestampType()),
				Key:           r.Key,
				Value:         r.Value,
				Headers:       r.Headers,
				LeaderEpoch:   h.PartitionLeaderEpoch,
				ProducerID:    h.ProducerID,
				ProducerEpoch: h.ProducerEpoch,
			})
		}
		if err := it.Err(); err != nil {
			next = h.BaseOffset
			if n := len(recs); n > 0 && recs[n-1].Offset >= next {
				next = recs[n-1].Offset + 1
			}
			return recs, next, fmt.Errorf("records of batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	if err := bs.Err(); err != nil {
		return recs, next, err
	}
	return recs, next, nil
}

// isAbortMarker reports whether a control batch holds an ABORT marker.
func isAbortMarker(batch []byte, h record.BatchHeader) bool {
	it := record.NewRecordIterator(h, record.RecordsBytes(batch))
	var r record.Record
	if !it.Next(&r) {
		return false
	}
	typ, err := record.ParseControlRecord(r.Key)
	return err == nil && typ == record.ControlAbort
}
