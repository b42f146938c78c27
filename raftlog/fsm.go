package raftlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/keelstream/keel/metadata"
)

// Update is what a subscriber receives after the FSM applied entries.
type Update struct {
	// Image is the newest image.
	Image *metadata.Image
	// Changes is what changed between the image of the subscriber's
	// previous Update and Image (several applies coalesce into one Update
	// when the subscriber is slow). Empty when Reset is set.
	Changes metadata.Changes
	// Reset means Image replaced the previous one wholesale (the first
	// Update of a subscription, or a snapshot installed from the leader):
	// Changes is empty and the subscriber must reconcile its state with the
	// whole image.
	Reset bool
}

// subscription is one subscriber's mailbox: a channel of capacity one that
// only the publisher (holding fsm.mu) sends on. See fsm.publishLocked.
type subscription struct {
	ch   chan Update
	once sync.Once
}

// fsm applies committed metadata batches into images (raft.BatchingFSM).
//
// Raft calls ApplyBatch, Apply, Snapshot and Restore from its single FSM
// goroutine; every other method may be called from any goroutine. image and
// applied are atomics so readers never lock; mu guards subs and notify and
// serializes publication, and is only ever held for non-blocking work.
type fsm struct {
	logger hclog.Logger

	image    atomic.Pointer[metadata.Image]
	applied  atomic.Int64 // highest log index the FSM has processed (applied or skipped)
	restores atomic.Int64 // snapshots restored, for tests and logs
	// sinceSnapshot is the bytes of metadata records applied since the
	// last snapshot taken or restored, and snapshotAt (unix nanoseconds)
	// when that was: what snapshotLoop decides on.
	sinceSnapshot atomic.Int64
	snapshotAt    atomic.Int64

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	notify chan struct{} // closed and replaced whenever applied advances
}

func newFSM(logger hclog.Logger) *fsm {
	f := &fsm{logger: logger, subs: map[*subscription]struct{}{}, notify: make(chan struct{})}
	f.image.Store(metadata.EmptyImage())
	f.snapshotAt.Store(time.Now().UnixNano())
	return f
}

// ApplyBatch applies committed entries in order (raft.BatchingFSM). A
// command entry that fails to decode or that the image rejects is logged and
// skipped, and its response is the error: Apply is deterministic, so every
// node skips it alike. Configuration entries only advance the applied index.
// Subscribers are notified once per call.
func (f *fsm) ApplyBatch(logs []*raft.Log) []interface{} {
	resps := make([]interface{}, len(logs))
	img := f.image.Load()
	var changes metadata.Changes
	applied := 0
	last := f.applied.Load()
	for i, l := range logs {
		last = int64(l.Index)
		if l.Type != raft.LogCommand {
			continue
		}
		f.sinceSnapshot.Add(int64(len(l.Data)))
		records, err := metadata.DecodeBatch(l.Data)
		if err != nil {
			f.logger.Error("skipping undecodable metadata batch", "offset", l.Index, "error", err)
			resps[i] = fmt.Errorf("metadata offset %d: %w: %w", l.Index, ErrApplyFailed, err)
			continue
		}
		next, ch, err := img.Apply(int64(l.Index), records)
		if err != nil {
			f.logger.Error("skipping metadata batch the image rejects", "offset", l.Index, "records", len(records), "error", err)
			resps[i] = fmt.Errorf("metadata offset %d: %w: %w", l.Index, ErrApplyFailed, err)
			continue
		}
		img = next
		if applied == 0 {
			changes = ch // fresh from Apply, owned by us
		} else {
			mergeChanges(&changes, ch)
		}
		applied++
	}
	f.image.Store(img)
	f.mu.Lock()
	f.advanceLocked(last)
	if applied > 0 {
		f.publishLocked(Update{Image: img, Changes: changes})
	}
	f.mu.Unlock()
	return resps
}

// snapshotDue reports whether a snapshot is due: maxBytes (if > 0) of
// records applied since the last one, or any applied and maxAge (if > 0)
// passed since it.
func (f *fsm) snapshotDue(now time.Time, maxBytes int64, maxAge time.Duration) bool {
	n := f.sinceSnapshot.Load()
	switch {
	case n == 0:
		return false
	case maxBytes > 0 && n >= maxBytes:
		return true
	}
	return maxAge > 0 && now.Sub(time.Unix(0, f.snapshotAt.Load())) >= maxAge
}

// Apply applies one entry (raft.FSM; Raft uses ApplyBatch).
func (f *fsm) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

// Snapshot captures the current image (raft.FSM). It only takes pointers;
// encoding happens in Persist, concurrently with later applies, which is
// safe because images are immutable.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.sinceSnapshot.Store(0)
	f.snapshotAt.Store(time.Now().UnixNano())
	return &fsmSnapshot{img: f.image.Load(), applied: f.applied.Load()}, nil
}

// Restore replaces the state with a snapshot (raft.FSM): at start-up, or
// when the leader installs a snapshot on a follower that fell behind its
// trailing logs. Subscribers get a Reset update.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read metadata snapshot: %w", err)
	}
	snap, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	img := metadata.EmptyImage()
	if snap.imageOffset >= 0 {
		if img, _, err = img.Apply(snap.imageOffset, snap.records); err != nil {
			return fmt.Errorf("restore metadata snapshot at offset %d: %w", snap.imageOffset, err)
		}
	}
	f.image.Store(img)
	f.sinceSnapshot.Store(0)
	f.snapshotAt.Store(time.Now().UnixNano())
	f.restores.Add(1)
	f.mu.Lock()
	f.advanceLocked(snap.applied)
	f.publishLocked(Update{Image: img, Reset: true})
	f.mu.Unlock()
	f.logger.Info("restored metadata snapshot", "applied", snap.applied, "image-offset", snap.imageOffset, "records", len(snap.records))
	return nil
}

// advanceLocked records the applied index and wakes WaitForOffset callers.
func (f *fsm) advanceLocked(index int64) {
	f.applied.Store(index)
	close(f.notify)
	f.notify = make(chan struct{})
}

// publishLocked delivers u to every subscriber without ever blocking the
// FSM goroutine: each mailbox holds one Update; if the subscriber has not
// taken the previous one yet, it is taken back, coalesced with u (newest
// image, union of changes) and put back. The latest image is never dropped.
// Sends happen only here and in subscribe, both under f.mu, so after the
// mailbox is emptied the final send cannot block.
func (f *fsm) publishLocked(u Update) {
	for s := range f.subs {
		select {
		case s.ch <- u:
			continue
		default:
		}
		merged := u
		select {
		case old := <-s.ch:
			merged = coalesce(old, u)
		default: // the subscriber took it meanwhile
		}
		s.ch <- merged
	}
}

// subscribe registers a subscriber whose first Update is the current image
// with Reset set.
func (f *fsm) subscribe() (<-chan Update, func()) {
	s := &subscription{ch: make(chan Update, 1)}
	f.mu.Lock()
	s.ch <- Update{Image: f.image.Load(), Reset: true}
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	cancel := func() {
		s.once.Do(func() {
			f.mu.Lock()
			delete(f.subs, s)
			close(s.ch)
			f.mu.Unlock()
		})
	}
	return s.ch, cancel
}

// waitApplied blocks until the FSM processed index offset, ctx ends or
// closed closes.
func (f *fsm) waitApplied(ctx context.Context, offset int64, closed <-chan struct{}) error {
	for {
		f.mu.Lock()
		if f.applied.Load() >= offset {
			f.mu.Unlock()
			return nil
		}
		ch := f.notify
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			return ErrClosed
		}
	}
}

// coalesce merges two consecutive updates into one. It never modifies old
// or next: their maps and slices may have gone to other subscribers too.
func coalesce(old, next Update) Update {
	if old.Reset || next.Reset {
		return Update{Image: next.Image, Reset: true}
	}
	acc := cloneChanges(old.Changes)
	mergeChanges(&acc, next.Changes)
	return Update{Image: next.Image, Changes: acc}
}

func cloneChanges(c metadata.Changes) metadata.Changes {
	out := metadata.Changes{
		Partitions:    make(map[metadata.PartitionKey]*metadata.Partition, len(c.Partitions)),
		DeletedTopics: append([]*metadata.Topic(nil), c.DeletedTopics...),
		Brokers:       append([]int32(nil), c.Brokers...),
		Configs:       append([]metadata.ConfigResource(nil), c.Configs...),
	}
	for k, v := range c.Partitions {
		out.Partitions[k] = v
	}
	return out
}

// mergeChanges folds next (later) into acc, which the caller owns. A topic
// deleted by next drops acc's changes to its partitions, as Image.Apply does
// within one batch.
func mergeChanges(acc *metadata.Changes, next metadata.Changes) {
	if acc.Partitions == nil {
		acc.Partitions = map[metadata.PartitionKey]*metadata.Partition{}
	}
	for _, t := range next.DeletedTopics {
		for k := range acc.Partitions {
			if k.TopicID == t.ID {
				delete(acc.Partitions, k)
			}
		}
	}
	for k, v := range next.Partitions {
		acc.Partitions[k] = v
	}
	acc.DeletedTopics = append(acc.DeletedTopics, next.DeletedTopics...)
	for _, b := range next.Brokers {
		if !containsBroker(acc.Brokers, b) {
			acc.Brokers = append(acc.Brokers, b)
		}
	}
	for _, r := range next.Configs {
		if !containsConfig(acc.Configs, r) {
			acc.Configs = append(acc.Configs, r)
		}
	}
}

func containsBroker(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func containsConfig(s []metadata.ConfigResource, v metadata.ConfigResource) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// fsmSnapshot is one image captured for a snapshot.
type fsmSnapshot struct {
	img     *metadata.Image
	applied int64
}

// Persist encodes the image into the sink (raft.FSMSnapshot). It runs on a
// Raft snapshot goroutine, concurrently with applies.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	data, err := encodeSnapshot(s.applied, s.img)
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist metadata snapshot at offset %d: %w", s.applied, err)
	}
	return sink.Close()
}

// Release is a no-op: the snapshot holds only an immutable image.
func (s *fsmSnapshot) Release() {}

// Snapshot payload: the magic, a format version, the FSM's applied index
// and the image offset (both int64 big-endian), then the image's
// SnapshotRecords as one metadata.EncodeBatch batch. The applied index is
// stored because Raft's Restore does not tell the FSM which index the
// snapshot covers.
var snapshotMagic = []byte("KEELMETA")

const (
	snapshotFormat    byte = 1
	snapshotHeaderLen      = 8 + 1 + 8 + 8
)

// errCorruptSnapshot is a snapshot payload that cannot be decoded.
var errCorruptSnapshot = errors.New("corrupt metadata snapshot")

func encodeSnapshot(applied int64, img *metadata.Image) ([]byte, error) {
	batch, err := metadata.EncodeBatch(img.SnapshotRecords())
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, snapshotHeaderLen+len(batch))
	out = append(out, snapshotMagic...)
	out = append(out, snapshotFormat)
	out = binary.BigEndian.AppendUint64(out, uint64(applied))
	out = binary.BigEndian.AppendUint64(out, uint64(img.Offset()))
	return append(out, batch...), nil
}

type decodedSnapshot struct {
	applied     int64
	imageOffset int64
	records     []metadata.Record
}

func decodeSnapshot(data []byte) (decodedSnapshot, error) {
	if len(data) < snapshotHeaderLen || !bytes.Equal(data[:8], snapshotMagic) {
		return decodedSnapshot{}, fmt.Errorf("%w: bad header", errCorruptSnapshot)
	}
	if data[8] != snapshotFormat {
		return decodedSnapshot{}, fmt.Errorf("%w: format %d (this build reads %d)", errCorruptSnapshot, data[8], snapshotFormat)
	}
	s := decodedSnapshot{
		applied:     int64(binary.BigEndian.Uint64(data[9:])),
		imageOffset: int64(binary.BigEndian.Uint64(data[17:])),
	}
	records, err := metadata.DecodeBatch(data[snapshotHeaderLen:])
	if err != nil {
		return decodedSnapshot{}, fmt.Errorf("%w: %w", errCorruptSnapshot, err)
	}
	s.records = records
	return s, nil
}
