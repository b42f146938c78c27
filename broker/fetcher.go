package broker

// Follower fetchers: Kafka's ReplicaFetcherManager and ReplicaFetcherThread.
//
// A partition this node follows (a replica, not the leader) is fetched from
// its leader by one of num.replica.fetchers fetchers of that leader (one
// goroutine and connection each), chosen as Kafka's
// AbstractFetcherManager.getFetcherId does: abs(31 * hashCode(topic) +
// partition) % num.replica.fetchers. Before its first fetch in a leader epoch the
// follower truncates any divergent suffix by asking the leader
// OffsetForLeaderEpoch for its own latest epoch (KIP-101, KIP-279) — never by
// its high watermark alone, which may lose acknowledged records or keep
// divergent ones. It then fetches from its log end offset, appends the
// leader's batches byte for byte and takes the high watermark from the
// response. A DivergingEpoch in a fetch response (v12+, KIP-595) truncates
// the same way. Each fetcher fetches in a KIP-227 fetch session with its
// leader (followerSession), as Kafka's followers do.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// maxTruncationRounds bounds the KIP-279 OffsetForLeaderEpoch rounds.
const maxTruncationRounds = 16

// replicaFetchers holds the fetchers of the leaders this node follows.
//
// Concurrency: mu guards byKey; called from ApplyMetadata and from
// removePartition (applyMu held), so additions and removals are ordered.
type replicaFetchers struct {
	b     *Broker
	mu    sync.Mutex
	byKey map[fetcherKey]*replicaFetcher
	// count is num.replica.fetchers, as last set (resize).
	count int
}

// fetcherKey names one fetcher: its leader and its index among the
// leader's num.replica.fetchers.
type fetcherKey struct{ leader, id int32 }

// fetcherID is Kafka's getFetcherId for a partition.
func fetcherID(tp storage.TopicPartition, fetchers int) int32 {
	if fetchers <= 1 {
		return 0
	}
	// Wraps like Java's int; then Kafka's Utils.abs.
	h := 31*record.JavaStringHashCode(tp.Topic) + tp.Partition
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % int32(fetchers)
}

// followerFetch is a partition's fetch state in its fetcher. Owned by the
// fetcher's mu.
type followerFetch struct {
	p           *partition
	leaderEpoch int32
	// truncated: the OffsetForLeaderEpoch step of this epoch is done.
	truncated bool
	// retryAt delays the partition after an error (replica.fetch.backoff.ms).
	retryAt time.Time
	// quickRetries counts the short backoffs taken because the leader had
	// not yet caught up with the metadata that made it leader
	// (leaderBehind). The fetcher's goroutine alone uses it.
	quickRetries int
}

// A leader that answers as if it did not lead the partition, right after
// this follower learned it does, is usually just behind on the metadata
// log: the follower retries after leaderCatchUpBackoff, up to
// maxQuickRetries times in a leader epoch, before falling back to
// replica.fetch.backoff.ms (Kafka's fetcher backs off fully each time,
// which a new topic's first acks=all produce then waits out).
const (
	leaderCatchUpBackoff = 50 * time.Millisecond
	maxQuickRetries      = 40
)

// leaderBehind reports whether a partition's fetch error says the leader
// does not (yet) know itself leader of it in this follower's epoch.
func leaderBehind(err error) bool {
	for _, e := range []error{kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.UnknownLeaderEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// replicaFetcher fetches the partitions led by one broker.
//
// Concurrency: mu guards parts and their followerFetch fields, and is held
// across every change the fetcher makes to a follower's log (locked); one
// goroutine (run) does the fetching and alone uses conn. Lock order:
// replicaFetchers.mu, mu, then the partition's hwMu. stop is closed by replicaFetchers when the fetcher has
// nothing left to fetch; the Broker's context stops it at Close.
type replicaFetcher struct {
	b      *Broker
	leader int32
	key    fetcherKey
	conn   *kafkaConn
	wake   chan struct{}
	stop   chan struct{}
	// session is the fetch session with the leader; run (and backoff,
	// which only run calls) alone use it.
	session followerSession

	mu    sync.Mutex
	parts map[*partition]*followerFetch
	// nextRetry is when the first partition backing off is due again (zero:
	// none); a fetch's long poll ends by then, so that the partition is
	// named again on time. run alone uses it.
	nextRetry time.Time
	// abort cancels the fetch in flight (nil when none): follow calls it
	// for a partition new to this node (see follow), which the fetch
	// parked at the leader for up to replica.fetch.wait.max.ms does not
	// name.
	abort context.CancelCauseFunc
}

// errNewPartition aborts a fetch in flight so that the next one names a
// partition new to this node that the fetcher just took on: a new topic's first acks=all produce
// then waits for the followers' next fetch, not for their long polls to run
// out (up to replica.fetch.wait.max.ms).
var errNewPartition = errors.New("a partition was added to the fetcher")

// errFetcherStopped aborts the fetch in flight of a fetcher left with no
// partitions: it stops without waiting for the answer.
var errFetcherStopped = errors.New("the fetcher stopped")

// followerSession is the follower's side of a KIP-227 fetch session with
// its leader (Kafka's FetchSessionHandler). A full fetch (epoch 0) asks the
// leader to keep the partitions and their fetch state; each later fetch
// names only the partitions whose state changed, and those to forget, and
// the leader answers only for partitions with something new. Without it
// every fetch lists, and every answer checks, every partition the two
// brokers share, however few of them change.
type followerSession struct {
	id    int32 // 0: none
	epoch int32 // of the next fetch; 0 (initialSessionEpoch) means a full fetch
	// sent is the state the leader holds for each partition in the session.
	sent map[fetchKey]sessionState // by topic id, as followers fetch
}

// sessionState is a partition's fetch state as a Fetch sends it.
type sessionState struct {
	fetchOffset, logStartOffset   int64
	leaderEpoch, lastFetchedEpoch int32
	partitionMaxBytes             int32
}

// reset makes the next fetch a full one. With closeExisting the full fetch
// names the current session, which the leader then drops (Kafka's
// nextCloseExisting, after a failed fetch); otherwise it asks for a new one
// (after FETCH_SESSION_ID_NOT_FOUND).
func (s *followerSession) reset(closeExisting bool) {
	if !closeExisting {
		s.id = 0
	}
	s.epoch, s.sent = initialSessionEpoch, nil
}

func newReplicaFetchers(b *Broker) *replicaFetchers {
	return &replicaFetchers{b: b, byKey: map[fetcherKey]*replicaFetcher{}, count: b.cfg.NumReplicaFetchers}
}

// follow makes p fetched from leader in leaderEpoch; a new leader epoch
// (or a new leader) repeats the truncation step (Kafka's makeFollower).
// fresh says p is new to this node (a new topic or replica): the fetch in
// flight is then cut short so that the next one names it at once
// (errNewPartition). A partition this node had already (a leader change)
// waits for the fetch in flight, as before.
func (fs *replicaFetchers) follow(p *partition, leader, leaderEpoch int32, fresh bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	key := fetcherKey{leader, fetcherID(p.tp, fs.count)}
	for k, f := range fs.byKey {
		if k != key {
			fs.removeLocked(f, p)
		}
	}
	f := fs.fetcherLocked(key)
	if f == nil {
		return // closing
	}
	f.mu.Lock()
	ff := f.parts[p]
	if ff == nil || ff.leaderEpoch != leaderEpoch {
		f.parts[p] = &followerFetch{p: p, leaderEpoch: leaderEpoch}
	}
	if fresh && ff == nil && f.abort != nil {
		f.abort(errNewPartition)
	}
	f.mu.Unlock()
	f.signal()
}

// fetcherLocked returns the fetcher of key, starting it if need be; nil
// when the broker is closing. fs.mu is held.
func (fs *replicaFetchers) fetcherLocked(key fetcherKey) *replicaFetcher {
	if f := fs.byKey[key]; f != nil {
		return f
	}
	f := &replicaFetcher{
		b: fs.b, leader: key.leader, key: key, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		conn:  newKafkaConn("", "keel-replica-fetcher-"+strconv.Itoa(int(fs.b.nodeID)), fs.b.dial),
		parts: map[*partition]*followerFetch{},
	}
	f.conn.receiveBuffer = fs.b.cfg.ReplicaSocketReceiveBufferBytes
	if !fs.b.spawn(f.run) {
		return nil
	}
	fs.byKey[key] = f
	return f
}

// resize applies a new num.replica.fetchers (a dynamic broker config, as
// Kafka's resizeThreadPool): each followed partition whose fetcher index
// changes moves to its new fetcher with its fetch state (a truncation
// already done for its leader epoch is not repeated); a fetcher left with
// no partitions stops, dropping its fetch in flight, whose answer for a
// moved partition would be ignored anyway (replicaFetcher.locked).
func (fs *replicaFetchers) resize(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n < 1 || n == fs.count {
		return
	}
	fs.count = n
	type move struct {
		from *replicaFetcher
		ff   followerFetch
	}
	var moves []move
	for key, f := range fs.byKey {
		f.mu.Lock()
		for p, ff := range f.parts {
			if fetcherID(p.tp, n) != key.id {
				moves = append(moves, move{f, followerFetch{p: p, leaderEpoch: ff.leaderEpoch, truncated: ff.truncated}})
			}
		}
		f.mu.Unlock()
	}
	for _, m := range moves {
		fs.removeLocked(m.from, m.ff.p)
		to := fs.fetcherLocked(fetcherKey{m.from.leader, fetcherID(m.ff.p.tp, n)})
		if to == nil {
			return // closing
		}
		ff := m.ff
		to.mu.Lock()
		to.parts[ff.p] = &ff
		to.mu.Unlock()
		to.signal()
	}
}

// unfollow stops fetching p (it became leader, lost its leader, or is no
// longer hosted).
func (fs *replicaFetchers) unfollow(p *partition) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.byKey {
		fs.removeLocked(f, p)
	}
}

// removeLocked removes p from f, stopping f when it is left empty. fs.mu
// is held.
func (fs *replicaFetchers) removeLocked(f *replicaFetcher, p *partition) {
	f.mu.Lock()
	delete(f.parts, p)
	empty := len(f.parts) == 0
	if empty && f.abort != nil {
		// The fetch in flight is for nothing now; a leader that stopped
		// answering (paused, cut off) would otherwise keep the
		// goroutine for replica.socket.timeout.ms.
		f.abort(errFetcherStopped)
	}
	f.mu.Unlock()
	if empty {
		close(f.stop)
		delete(fs.byKey, f.key)
	}
}

func (f *replicaFetcher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// locked runs fn — a change to the follower's log — with f.mu held, if ff
// is still current: once unfollow (which takes f.mu) returns, the fetcher
// changes the partition's log no more, so a new leader's appends never
// mix with a fetch from the old one. fn must not take f.mu.
func (f *replicaFetcher) locked(ff *followerFetch, fn func() error) (ran bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parts[ff.p] != ff || ff.p.removed.Load() {
		return false, nil
	}
	return true, fn()
}

// current returns ff if it is still p's fetch state (not replaced by a new
// leader epoch, not removed).
func (f *replicaFetcher) current(ff *followerFetch) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[ff.p] == ff
}

func (f *replicaFetcher) backoff(ff *followerFetch) { f.backoffFor(ff, f.b.cfg.ReplicaFetchBackoff) }

// backoffFor leaves ff out of the fetches for d.
func (f *replicaFetcher) backoffFor(ff *followerFetch, d time.Duration) {
	f.mu.Lock()
	ff.retryAt = time.Now().Add(d)
	f.mu.Unlock()
	// Name it again when it is next fetched, whether or not its fetch
	// state changed: the leader's answer may (an unknown topic id becomes
	// known). Until then it is forgotten from the session, so the leader
	// uses no fetch state of it the follower did not just send.
	key := fetchKey{id: ff.p.topicID, partition: ff.p.tp.Partition}
	if st, ok := f.session.sent[key]; ok {
		st.fetchOffset = -1 // never a fetch offset sent
		f.session.sent[key] = st
	}
}

// run is the fetcher's goroutine.
func (f *replicaFetcher) run() {
	defer f.conn.close()
	b := f.b
	for {
		select {
		case <-f.stop:
			return
		case <-b.closing():
			return
		default:
		}
		ready, next := f.ready()
		f.nextRetry = next
		if len(ready) == 0 {
			if !f.idle(next) {
				return
			}
			continue
		}
		addr, ok := b.brokerAddr(f.leader)
		if !ok {
			for _, ff := range ready {
				f.backoff(ff)
			}
			continue
		}
		f.conn.addr = addr
		var fetchable []*followerFetch
		for _, ff := range ready {
			f.mu.Lock()
			truncated := ff.truncated
			f.mu.Unlock()
			if !truncated {
				if err := f.truncate(ff); err != nil {
					b.log.Warn("follower truncation failed", "partition", ff.p.tp, "leader", f.leader, "error", err)
					f.backoff(ff)
					continue
				}
			}
			if !f.current(ff) {
				continue
			}
			if f.throttled(ff) {
				// Kafka's shouldFollowerThrottle: left out of the fetch
				// until the rate is back under the bound.
				f.backoff(ff)
				continue
			}
			fetchable = append(fetchable, ff)
		}
		fetchable = f.syncDurable(fetchable)
		if len(fetchable) > 0 {
			if err := f.fetch(fetchable); errors.Is(err, errNewPartition) {
				continue // fetch again at once, naming it
			} else if errors.Is(err, errFetcherStopped) {
				return
			} else if err != nil {
				if b.ctx.Err() == nil {
					b.log.Warn("follower fetch failed", "leader", f.leader, "error", err)
				}
				f.conn.close()
				for _, ff := range fetchable {
					f.backoff(ff)
				}
			}
		}
	}
}

// throttled reports whether ff's partition is under this broker's follower
// replication throttle, out of the ISR, with the rate over its bound
// (quota.go).
func (f *replicaFetcher) throttled(ff *followerFetch) bool {
	st := ff.p.state.Load()
	return st != nil && st.followerThrottled && !slices.Contains(st.isr, f.b.nodeID) && f.b.followerQuota.exceeded(f.b.now())
}

// idle waits for a change, the next backed-off partition (next, if not
// zero) or the stop; false means stop.
func (f *replicaFetcher) idle(next time.Time) bool {
	var timer <-chan time.Time
	if !next.IsZero() {
		t := time.NewTimer(time.Until(next))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-f.wake:
	case <-timer:
	case <-f.stop:
		return false
	case <-f.b.closing():
		return false
	}
	return true
}

// ready returns the partitions that may be fetched now, and when the next
// backed-off one may. A replica in a failed log dir is never fetched again
// (Kafka removes its fetcher): it could not append what it got.
func (f *replicaFetcher) ready() ([]*followerFetch, time.Time) {
	now := time.Now()
	var out []*followerFetch
	var next time.Time
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ff := range f.parts {
		if ff.p.removed.Load() || ff.p.log.Offline() {
			continue
		}
		if ff.retryAt.After(now) {
			if next.IsZero() || ff.retryAt.Before(next) {
				next = ff.retryAt
			}
			continue
		}
		out = append(out, ff)
	}
	return out, next
}

// brokerAddr is the inter-broker listener address of broker id.
func (b *Broker) brokerAddr(id int32) (string, bool) {
	br, ok := b.currentImage().Broker(id)
	if !ok {
		return "", false
	}
	ep, ok := br.Endpoint(b.cfg.InterBrokerListenerName)
	if !ok {
		return "", false
	}
	return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), true
}

// truncate is the KIP-101/KIP-279 step: ask the leader for the end offset
// of the follower's latest epoch and truncate what lies beyond it; repeat
// while the follower lacks the leader's epoch.
func (f *replicaFetcher) truncate(ff *followerFetch) error {
	l := ff.p.log
	for range maxTruncationRounds {
		latest, ok := l.LeaderEpochCache().LatestEpoch()
		if !ok {
			break // nothing written with an epoch: nothing can diverge
		}
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = f.b.nodeID
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = ff.p.tp.Topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = ff.p.tp.Partition, ff.leaderEpoch, latest
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(f.b.ctx, f.b.cfg.ReplicaSocketTimeout)
		kresp, err := f.conn.request(ctx, req)
		cancel()
		if err != nil {
			f.conn.close()
			return err
		}
		resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return errors.New("OffsetForLeaderEpoch: malformed response")
		}
		out := resp.Topics[0].Partitions[0]
		if out.ErrorCode != 0 {
			return fmt.Errorf("OffsetForLeaderEpoch %s: %w", ff.p.tp, kerr.ErrorForCode(out.ErrorCode))
		}
		done := false
		ran, err := f.locked(ff, func() (err error) {
			done, err = f.b.truncateFollower(ff.p, out.LeaderEpoch, out.EndOffset)
			ff.truncated = done && err == nil
			return err
		})
		if !ran || err != nil || done {
			return err
		}
	}
	f.mu.Lock()
	ff.truncated = true
	f.mu.Unlock()
	return nil
}

// truncateFollower truncates p's log by the leader's answer for an epoch
// (OffsetForLeaderEpoch or a fetch's DivergingEpoch); done is false when
// another round is needed (KIP-279).
func (b *Broker) truncateFollower(p *partition, leaderEpoch int32, leaderEnd int64) (done bool, err error) {
	l := p.log
	leo := l.LogEndOffset()
	offset, done := followerTruncationOffset(func(e int32) (int32, int64) {
		return l.LeaderEpochCache().EndOffsetFor(e, leo)
	}, leo, l.HighWatermark(), leaderEpoch, leaderEnd)
	if offset < leo {
		b.log.Info("truncating divergent follower suffix", "partition", p.tp, "from", leo, "to", offset,
			"leader_epoch", leaderEpoch, "leader_end_offset", leaderEnd)
	}
	// At the log end too: no batch goes, but an epoch this replica
	// recorded there as a leader that appended nothing does (see
	// storage.Log.TruncateTo), as Kafka's truncation always does.
	latest, _ := l.LeaderEpochCache().LatestEpoch()
	p.hwMu.Lock()
	err = l.TruncateTo(offset)
	if err == nil && l.HighWatermark() > offset {
		l.SetHighWatermark(offset)
	}
	p.hwMu.Unlock()
	if err != nil {
		return false, fmt.Errorf("truncate %s to %d: %w", p.tp, offset, err)
	}
	if now, _ := l.LeaderEpochCache().LatestEpoch(); offset == leo && now != latest {
		b.log.Info("dropped a leader epoch with no records at the follower's log end", "partition", p.tp,
			"epoch", latest, "log_end_offset", leo, "leader_epoch", leaderEpoch, "leader_end_offset", leaderEnd)
	}
	return done, nil
}

// followerTruncationOffset is Kafka's
// AbstractFetcherThread.getOffsetTruncationState: where a follower at leo
// truncates given the leader's (epoch, end offset) for the follower's
// latest epoch. local is the follower's own EndOffsetFor.
//
//   - the leader knows no epoch up to ours (end offset undefined): truncate
//     to the high watermark, Kafka's only fallback to it;
//   - the follower has the leader's epoch: truncate to the smaller end
//     offset of that epoch (KIP-101);
//   - the follower lacks it: truncate to the end of its own largest epoch
//     below and ask again (KIP-279), done = false;
//   - the follower has no epoch at or below it: truncate to the leader's
//     end offset.
func followerTruncationOffset(local func(int32) (int32, int64), leo, hw int64, leaderEpoch int32, leaderEnd int64) (offset int64, done bool) {
	switch {
	case leaderEnd == storage.UndefinedEpochOffset:
		return min(hw, leo), true
	case leaderEpoch == storage.UndefinedEpoch:
		return min(leaderEnd, leo), true
	}
	epoch, end := local(leaderEpoch)
	switch {
	case epoch == leaderEpoch:
		return min(leaderEnd, end, leo), true
	case epoch == storage.UndefinedEpoch:
		return min(leaderEnd, leo), true
	default:
		return min(end, leo), false
	}
}

// fetch sends one Fetch for the partitions and applies the response.
func (f *replicaFetcher) fetch(parts []*followerFetch) error {
	b := f.b
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1 // v15+: in ReplicaState (KIP-903)
	req.ReplicaState.ID = b.nodeID
	req.ReplicaState.Epoch = -1
	if br, ok := b.currentImage().Broker(b.nodeID); ok {
		req.ReplicaState.Epoch = br.Epoch
	}
	cfg := b.cfg
	wait := cfg.ReplicaFetchWaitMax
	if !f.nextRetry.IsZero() {
		wait = max(min(wait, time.Until(f.nextRetry)), 0)
	}
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = int32(cfg.ReplicaFetchMinBytes)
	req.MaxBytes = int32(min(cfg.ReplicaFetchResponseMaxBytes, maxInternalResponse))
	sess := &f.session
	full := sess.epoch == initialSessionEpoch
	req.SessionID, req.SessionEpoch = sess.id, sess.epoch
	byKey := make(map[fetchKey]*followerFetch, len(parts))
	want := make(map[fetchKey]sessionState, len(parts))
	for _, ff := range parts {
		l := ff.p.log
		key := fetchKey{id: ff.p.topicID, partition: ff.p.tp.Partition}
		st := sessionState{fetchOffset: l.LogEndOffset(), logStartOffset: l.LogStartOffset(),
			leaderEpoch: ff.leaderEpoch, lastFetchedEpoch: -1, partitionMaxBytes: int32(cfg.ReplicaFetchMaxBytes)}
		if e, ok := l.LeaderEpochCache().LatestEpoch(); ok {
			st.lastFetchedEpoch = e
		}
		want[key] = st
		byKey[key] = ff
		if prev, ok := sess.sent[key]; !full && ok && prev == st {
			continue // the leader has it
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = ff.p.tp.Topic, ff.p.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = ff.p.tp.Partition
		rp.CurrentLeaderEpoch = st.leaderEpoch
		rp.FetchOffset = st.fetchOffset
		rp.LogStartOffset = st.logStartOffset
		rp.PartitionMaxBytes = st.partitionMaxBytes
		rp.LastFetchedEpoch = st.lastFetchedEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	if !full {
		// Partitions not fetched this time (removed, backing off,
		// truncating) leave the session; they come back with their state.
		for key := range sess.sent {
			if _, ok := want[key]; !ok {
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.TopicID, ft.Partitions = key.id, []int32{key.partition}
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
			}
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, cfg.ReplicaSocketTimeout)
	ctx, abort := context.WithCancelCause(ctx)
	f.mu.Lock()
	f.abort = abort
	f.mu.Unlock()
	kresp, err := f.conn.request(ctx, req)
	f.mu.Lock()
	f.abort = nil
	f.mu.Unlock()
	cause := context.Cause(ctx)
	abort(nil)
	cancel()
	if err != nil {
		// The leader may have taken the request (and moved the session
		// on) before the connection closed: a full fetch starts over.
		sess.reset(true)
		if errors.Is(cause, errNewPartition) || errors.Is(cause, errFetcherStopped) {
			return cause
		}
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	switch resp.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code:
		// The leader lost or moved on from the session (a restart, an
		// eviction): start a new one with a full fetch now.
		b.log.Debug("follower fetch session reset", "leader", f.leader, "session", sess.id, "error", kerr.ErrorForCode(resp.ErrorCode))
		sess.reset(resp.ErrorCode == kerr.InvalidFetchSessionEpoch.Code)
		return nil
	default:
		sess.reset(true)
		return fmt.Errorf("fetch from %d: %w", f.leader, kerr.ErrorForCode(resp.ErrorCode))
	}
	switch {
	case resp.SessionID == 0:
		sess.reset(false) // the leader keeps no session for us: fetch in full
	case full:
		sess.id, sess.epoch, sess.sent = resp.SessionID, nextSessionEpoch(initialSessionEpoch), want
	default:
		sess.epoch, sess.sent = nextSessionEpoch(sess.epoch), want
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			ff := byKey[fetchKey{id: rt.TopicID, partition: rp.Partition}]
			if ff == nil || !f.current(ff) || ff.p.removed.Load() {
				continue
			}
			if err := f.apply(ff, &rp); err != nil {
				f.partitionFailed(ff, err)
			}
		}
	}
	return nil
}

// syncDurable fsyncs, together, the durable-mode partitions (durable.go)
// whose logs hold records not yet on disk: appended from the last fetch
// response, or there since before a restart or a leadership change. A
// fetch reports a partition's log end offset, which the leader counts
// toward the high watermark, so in the durable mode it must be durable
// first. It returns the partitions that may be fetched: those whose fsync
// failed are backed off.
func (f *replicaFetcher) syncDurable(parts []*followerFetch) []*followerFetch {
	var unsynced []*followerFetch
	for _, ff := range parts {
		if ff.p.durable() && ff.p.log.SyncPending() {
			unsynced = append(unsynced, ff)
		}
	}
	if len(unsynced) == 0 {
		return parts
	}
	logs := make([]*partition, len(unsynced))
	for i, ff := range unsynced {
		logs[i] = ff.p
	}
	var failed []*followerFetch
	for i, err := range syncLogs(logs, &f.b.metrics.flushes) {
		if err != nil {
			f.partitionFailed(unsynced[i], fmt.Errorf("follower fsync: %w", err))
			failed = append(failed, unsynced[i])
		}
	}
	if len(failed) == 0 {
		return parts
	}
	return slices.DeleteFunc(parts, func(ff *followerFetch) bool { return slices.Contains(failed, ff) })
}

// partitionFailed logs a partition's failed fetch step and backs it off:
// it is left out of the fetches (and so reports no log end offset) until
// replica.fetch.backoff.ms has passed, or leaderCatchUpBackoff while the
// leader seems to be catching up with the metadata (leaderBehind).
func (f *replicaFetcher) partitionFailed(ff *followerFetch, err error) {
	if leaderBehind(err) && ff.quickRetries < maxQuickRetries {
		ff.quickRetries++
		f.b.log.Debug("follower fetch: the leader is not leader yet; retrying soon", "partition", ff.p.tp, "leader", f.leader, "error", err)
		f.backoffFor(ff, leaderCatchUpBackoff)
		return
	}
	if !ff.p.removed.Load() && !errors.Is(err, storage.ErrLogDirOffline) {
		f.b.log.Warn("follower fetch partition failed", "partition", ff.p.tp, "leader", f.leader, "error", err)
	}
	f.backoff(ff)
}

// apply applies one partition of a fetch response (Kafka's
// processPartitionData and its error handling).
func (f *replicaFetcher) apply(ff *followerFetch, rp *kmsg.FetchResponseTopicPartition) error {
	b, p := f.b, ff.p
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		return f.outOfRange(ff)
	default:
		// NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, ...: back
		// off; the metadata image brings the new leader or epoch.
		return fmt.Errorf("fetch %s: %w", p.tp, kerr.ErrorForCode(rp.ErrorCode))
	}
	moved := false // the high watermark: consumers read up to it here too (KIP-392)
	_, err := f.locked(ff, func() error {
		if d := rp.DivergingEpoch; d.Epoch >= 0 && d.EndOffset >= 0 {
			// KIP-595: the leader saw our last fetched epoch diverge.
			_, err := b.truncateFollower(p, d.Epoch, d.EndOffset)
			return err
		}
		l := p.log
		if len(rp.RecordBatches) > 0 {
			if err := f.appendFetched(p, rp.RecordBatches); err != nil {
				return err
			}
			if st := p.state.Load(); st != nil && st.followerThrottled {
				b.followerQuota.record(int64(len(rp.RecordBatches)), b.now())
			}
		}
		p.followerLag.Store(max(0, rp.HighWatermark-l.LogEndOffset()))
		// The follower's high watermark: the leader's, bounded by what
		// it has; then the leader's log start offset, so that
		// DeleteRecords reaches the followers (Kafka's
		// maybeIncrementLogStartOffset with LeaderOffsetIncremented).
		p.hwMu.Lock()
		defer p.hwMu.Unlock()
		if hw := min(rp.HighWatermark, l.LogEndOffset()); hw > l.HighWatermark() {
			l.SetHighWatermark(hw)
			moved = true
		}
		if start := min(rp.LogStartOffset, l.HighWatermark()); start > l.LogStartOffset() {
			if err := l.IncrementLogStartOffset(start); err != nil {
				return fmt.Errorf("follower log start offset: %w", err)
			}
		}
		return nil
	})
	if moved {
		// Consumers' fetches parked on this replica (a v11+ Fetch, KIP-392)
		// wait for it; wakeAll only signals, so no lock matters here.
		p.fetchWatch.wakeAll()
	}
	return err
}

// appendFetched appends a fetch response's batches to the follower's log.
// A log that was just restarted at the leader's log start (outOfRange) may
// receive a first batch that begins below it: DeleteRecords cut the
// leader's log in the middle of that batch. As Kafka's
// Partition.appendRecordsToFollowerOrFutureReplica does, the empty log is
// then restarted at the batch's base offset and the append retried; the
// leader's log start offset, applied next, moves the start up again.
// f.mu is held (locked).
func (f *replicaFetcher) appendFetched(p *partition, batches []byte) error {
	l := p.log
	deferFlush := p.durable() // synced before the next fetch (syncDurable)
	_, err := l.AppendAsFollower(batches, deferFlush)
	if errors.Is(err, storage.ErrUnexpectedAppendOffset) && l.LogEndOffset() == l.LogStartOffset() {
		if h, perr := record.ParseHeader(batches); perr == nil && h.BaseOffset < l.LogEndOffset() && h.LastOffset() >= l.LogEndOffset() {
			f.b.log.Info("first fetched batch starts below the restarted log: starting the log at the batch",
				"partition", p.tp, "log_start", l.LogStartOffset(), "batch_base", h.BaseOffset)
			p.hwMu.Lock()
			err = l.TruncateFullyAndStartAt(h.BaseOffset)
			p.hwMu.Unlock()
			if err == nil {
				_, err = l.AppendAsFollower(batches, deferFlush)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("follower append: %w", err)
	}
	f.b.metrics.all.replicationBytesIn.Add(int64(len(batches)))
	return nil
}

// outOfRange handles OFFSET_OUT_OF_RANGE as Kafka's
// handleOutOfRangeError: when our log end offset is above the leader's, the
// epoch truncation step runs again (it truncates to the leader's end);
// when it is below the leader's log start, the log restarts empty there.
func (f *replicaFetcher) outOfRange(ff *followerFetch) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.b.nodeID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = ff.p.tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = ff.p.tp.Partition, ff.leaderEpoch, storage.EarliestTimestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(f.b.ctx, f.b.cfg.ReplicaSocketTimeout)
	kresp, err := f.conn.request(ctx, pinnedVersion{req, 10})
	cancel()
	if err != nil {
		f.conn.close()
		return err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errors.New("ListOffsets: malformed response")
	}
	out := resp.Topics[0].Partitions[0]
	if out.ErrorCode != 0 {
		return fmt.Errorf("ListOffsets %s: %w", ff.p.tp, kerr.ErrorForCode(out.ErrorCode))
	}
	_, err = f.locked(ff, func() error {
		l := ff.p.log
		if leo := l.LogEndOffset(); leo < out.Offset {
			f.b.log.Info("follower below the leader's log start: restarting the log", "partition", ff.p.tp, "offset", out.Offset)
			ff.p.hwMu.Lock()
			defer ff.p.hwMu.Unlock()
			if err := l.TruncateFullyAndStartAt(out.Offset); err != nil {
				return fmt.Errorf("restart %s at %d: %w", ff.p.tp, out.Offset, err)
			}
			return nil
		}
		ff.truncated = false // above the leader's end: truncate by epoch again
		return nil
	})
	return err
}

// pinnedVersion sends a request at a version the peer serves when kmsg
// knows a newer one (kafkaConn uses MaxVersion).
type pinnedVersion struct {
	kmsg.Request
	v int16
}

func (r pinnedVersion) MaxVersion() int16 { return r.v }
