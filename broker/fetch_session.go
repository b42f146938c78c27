package broker

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// Fetch sessions (KIP-227): a client that fetches the same partitions over
// and over opens a session with a full fetch (epoch 0); the broker answers
// with a session id and remembers the partitions and their fetch offsets.
// Later fetches (epoch 1, 2, ...) send only what changed (new offsets,
// added partitions, ForgottenTopics) and the response lists only partitions
// with something new: records, a moved high watermark or log start offset,
// an error. Epoch -1 (FINAL) closes a session; a full fetch with a session
// id replaces it. The rules follow Kafka's FetchManager and FetchSession.

// defaultFetchSessionEviction is how long an unused session keeps its slot
// against a new one (Kafka's FetchSessionCache eviction age); the slots are
// max.incremental.fetch.session.cache.slots.
const defaultFetchSessionEviction = 120 * time.Second

// Session epochs with a meaning of their own (Kafka's FetchMetadata).
const (
	initialSessionEpoch int32 = 0
	finalSessionEpoch   int32 = -1
)

// nextSessionEpoch is Kafka's FetchMetadata.nextEpoch.
func nextSessionEpoch(e int32) int32 {
	switch {
	case e < 0:
		return finalSessionEpoch
	case e == math.MaxInt32:
		return 1
	}
	return e + 1
}

// fetchKey names a partition of a fetch: by topic id from v13, by name
// before (the other field is zero).
type fetchKey struct {
	id        [16]byte
	topic     string
	partition int32
}

// fetchPartition is one partition a fetch reads, with what the client asked
// and, in a session, what the last response told it.
//
// Ownership: belongs to one fetchContext (sessionless and new sessions) or
// to a fetchSession, whose mu guards it.
type fetchPartition struct {
	key fetchKey
	// topic is the topic's name; "" for a topic id this broker does not know.
	topic string

	fetchOffset        int64
	partitionMaxBytes  int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32
	// replicaLogStart is a follower's log start offset (-1 from consumers).
	replicaLogStart int64

	// highWatermark, lastStable and logStartOffset are what the last
	// response sent (-1 after an error), so an incremental response can
	// leave the partition out when nothing moved.
	highWatermark  int64
	lastStable     int64
	logStartOffset int64
}

// updateFrom takes the client's new fetch position from a request.
func (fp *fetchPartition) updateFrom(rp *kmsg.FetchRequestTopicPartition) {
	fp.fetchOffset = rp.FetchOffset
	fp.partitionMaxBytes = rp.PartitionMaxBytes
	fp.currentLeaderEpoch = rp.CurrentLeaderEpoch
	fp.lastFetchedEpoch = rp.LastFetchedEpoch
	fp.replicaLogStart = rp.LogStartOffset
}

// fetchSession is one cached session.
//
// Concurrency: mu guards every field but id, privileged and usesTopicIDs
// (immutable), and the fetchPartitions in parts. Never held together with
// the cache's mu... except that the cache reads lastUsed and size under
// both, taking cache.mu first.
type fetchSession struct {
	id           int32
	privileged   bool // a follower's session (replica id >= 0)
	usesTopicIDs bool // created by a v13+ fetch

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental fetch must carry
	// parts is the session's partition order: partitions that returned
	// records move to the end, so that those starved by max bytes come
	// first next time (Kafka's PartitionIterator).
	parts    []*fetchPartition
	index    map[fetchKey]*fetchPartition
	lastUsed time.Time
}

// moveToEnd moves the partitions in moved (a subset of parts, in order) to
// the end of parts. s.mu is held.
func (s *fetchSession) moveToEnd(moved map[*fetchPartition]bool) {
	if len(moved) == 0 {
		return
	}
	kept := make([]*fetchPartition, 0, len(s.parts))
	var tail []*fetchPartition
	for _, fp := range s.parts {
		if moved[fp] {
			tail = append(tail, fp)
		} else {
			kept = append(kept, fp)
		}
	}
	s.parts = append(kept, tail...)
}

// fetchSessionCache holds the sessions, at most maxSlots of them.
//
// Concurrency: mu guards sessions; safe from any goroutine.
type fetchSessionCache struct {
	maxSlots int
	eviction time.Duration
	now      func() time.Time

	mu       sync.Mutex
	sessions map[int32]*fetchSession
}

func newFetchSessionCache(maxSlots int, eviction time.Duration, now func() time.Time) *fetchSessionCache {
	return &fetchSessionCache{maxSlots: maxSlots, eviction: eviction, now: now, sessions: map[int32]*fetchSession{}}
}

// Len is the number of cached sessions.
func (c *fetchSessionCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// create caches a new session over parts (the response's partitions) if
// there is a free slot or one can be evicted, and returns it; nil when the
// cache is full of sessions worth more (the client then fetches
// sessionless, with session id 0). Kafka's FetchSessionCache.maybeCreateSession
// and tryEvict: a session unused for the eviction age goes first; else the
// least valuable session (a consumer's before a follower's, then the one
// with fewer partitions) goes if it is worth less than the new one.
func (c *fetchSessionCache) create(parts []*fetchPartition, privileged, usesTopicIDs bool) *fetchSession {
	if c.maxSlots <= 0 {
		return nil
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.maxSlots && !c.evictLocked(privileged, len(parts), now) {
		return nil
	}
	var id int32
	for id == 0 || c.sessions[id] != nil {
		id = rand.Int32N(math.MaxInt32) + 1
	}
	s := &fetchSession{
		id: id, privileged: privileged, usesTopicIDs: usesTopicIDs,
		epoch: nextSessionEpoch(initialSessionEpoch), parts: parts,
		index: make(map[fetchKey]*fetchPartition, len(parts)), lastUsed: now,
	}
	for _, fp := range parts {
		s.index[fp.key] = fp
	}
	c.sessions[id] = s
	return s
}

// evictLocked frees one slot for a new session, if the rules allow. c.mu
// is held.
func (c *fetchSessionCache) evictLocked(privileged bool, size int, now time.Time) bool {
	var oldest, cheapest *fetchSession
	var oldestUsed time.Time
	var cheapestSize int
	for _, s := range c.sessions {
		s.mu.Lock()
		used, n := s.lastUsed, len(s.parts)
		s.mu.Unlock()
		if oldest == nil || used.Before(oldestUsed) {
			oldest, oldestUsed = s, used
		}
		if cheapest == nil || lessValuable(s.privileged, n, cheapest.privileged, cheapestSize) {
			cheapest, cheapestSize = s, n
		}
	}
	if oldest == nil {
		return false
	}
	if now.Sub(oldestUsed) > c.eviction {
		delete(c.sessions, oldest.id)
		return true
	}
	if lessValuable(cheapest.privileged, cheapestSize, privileged, size) {
		delete(c.sessions, cheapest.id)
		return true
	}
	return false
}

// lessValuable orders sessions as Kafka's EvictableKey: consumers before
// followers, then by partition count.
func lessValuable(privA bool, sizeA int, privB bool, sizeB int) bool {
	if privA != privB {
		return !privA
	}
	return sizeA < sizeB
}

// fetchContextKind is how a fetch relates to sessions.
type fetchContextKind int

const (
	// sessionless: epoch -1, no session (and before v7).
	sessionless fetchContextKind = iota
	// fullFetch: epoch 0: a session is created when the response is.
	fullFetch
	// incrementalFetch: an existing session's next epoch.
	incrementalFetch
	// sessionError: the fetch failed at the session level.
	sessionError
)

// fetchContext is a fetch's partitions and session, Kafka's FetchContext.
type fetchContext struct {
	kind      fetchContextKind
	errorCode int16
	// parts are the partitions of a sessionless or full fetch, in request
	// order.
	parts []*fetchPartition
	// session is the incremental fetch's session.
	session *fetchSession
	// privileged and usesTopicIDs describe a full fetch's future session.
	privileged, usesTopicIDs bool
}

// newFetchContext is Kafka's FetchManager.newContext: it resolves the
// request against the session cache. An incremental fetch updates its
// session here (positions, added and forgotten partitions, epoch), before
// any read, as Kafka does.
func (b *Broker) newFetchContext(m *kmsg.FetchRequest, img *metadata.Image, follower bool) *fetchContext {
	sessionID, epoch := m.SessionID, m.SessionEpoch
	if m.Version < 7 {
		sessionID, epoch = 0, finalSessionEpoch
	}
	usesIDs := m.Version >= 13
	if epoch == initialSessionEpoch || epoch == finalSessionEpoch {
		if sessionID != 0 {
			b.sessions.remove(sessionID) // a full fetch closes the session it names
		}
		fc := &fetchContext{kind: sessionless, privileged: follower, usesTopicIDs: usesIDs}
		if epoch == initialSessionEpoch {
			fc.kind = fullFetch
		}
		seen := map[fetchKey]bool{}
		for i := range m.Topics {
			t := &m.Topics[i]
			key, name := b.resolveFetchTopic(img, m.Version, t.Topic, t.TopicID)
			for j := range t.Partitions {
				rp := &t.Partitions[j]
				key.partition = rp.Partition
				if seen[key] {
					continue // Kafka keeps the last; duplicates are a client bug
				}
				seen[key] = true
				fp := &fetchPartition{key: key, topic: name, highWatermark: -1, lastStable: -1, logStartOffset: -1}
				fp.updateFrom(rp)
				fc.parts = append(fc.parts, fp)
			}
		}
		return fc
	}
	s := b.sessions.get(sessionID)
	if s == nil {
		return &fetchContext{kind: sessionError, errorCode: kerr.FetchSessionIDNotFound.Code}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.epoch != epoch:
		return &fetchContext{kind: sessionError, errorCode: kerr.InvalidFetchSessionEpoch.Code}
	case s.usesTopicIDs != usesIDs:
		return &fetchContext{kind: sessionError, errorCode: kerr.FetchSessionTopicIDError.Code}
	}
	for i := range m.Topics {
		t := &m.Topics[i]
		key, name := b.resolveFetchTopic(img, m.Version, t.Topic, t.TopicID)
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			key.partition = rp.Partition
			fp := s.index[key]
			if fp == nil {
				fp = &fetchPartition{key: key, topic: name, highWatermark: -1, lastStable: -1, logStartOffset: -1}
				s.index[key] = fp
				s.parts = append(s.parts, fp)
			}
			fp.updateFrom(rp)
		}
	}
	for i := range m.ForgottenTopics {
		ft := &m.ForgottenTopics[i]
		key := fetchKey{id: ft.TopicID, topic: ft.Topic}
		if usesIDs {
			key.topic = ""
		} else {
			key.id = [16]byte{}
		}
		for _, part := range ft.Partitions {
			key.partition = part
			if fp := s.index[key]; fp != nil {
				delete(s.index, key)
				s.parts = removePart(s.parts, fp)
			}
		}
	}
	// A partition whose topic id was unknown when it joined the session
	// (metadata not here yet) is looked up again on every fetch, as Kafka's
	// CachedPartition.maybeResolveUnknownName does; otherwise an
	// incremental fetch that does not name it again would be answered
	// UNKNOWN_TOPIC_ID for as long as the session lives.
	if usesIDs {
		for _, fp := range s.parts {
			if fp.topic == "" {
				if t, ok := img.TopicByID(metadata.Uuid(fp.key.id)); ok {
					fp.topic = t.Name
				}
			}
		}
	}
	s.epoch = nextSessionEpoch(s.epoch)
	s.lastUsed = b.now()
	return &fetchContext{kind: incrementalFetch, session: s}
}

// resolveFetchTopic keys a request topic and finds its name: by id from
// v13 (the name is "" when the id is unknown), by name before.
func (b *Broker) resolveFetchTopic(img *metadata.Image, version int16, topic string, id [16]byte) (fetchKey, string) {
	if version >= 13 {
		if t, ok := img.TopicByID(metadata.Uuid(id)); ok {
			return fetchKey{id: id}, t.Name
		}
		return fetchKey{id: id}, ""
	}
	// Request strings alias the request's frame; a session outlives it.
	topic = strings.Clone(topic)
	return fetchKey{topic: topic}, topic
}

func removePart(parts []*fetchPartition, fp *fetchPartition) []*fetchPartition {
	for i, p := range parts {
		if p == fp {
			return append(parts[:i], parts[i+1:]...)
		}
	}
	return parts
}
