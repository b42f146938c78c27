package metadata

import (
	"hash/maphash"
	"iter"
)

// topicShards is how many pieces an image's topic maps are cut into. A
// batch that changes a topic copies the piece holding it, not the whole
// map: at 10,000 topics an ISR change copies some 40 entries instead of
// 20,000, which every controller and broker pays for each such batch (and
// a restart for each it replays).
const topicShards = 256

// topicSeed hashes keys to shards; shards are never persisted, so a seed
// per process will do.
var topicSeed = maphash.MakeSeed()

// topicMap is an immutable map of topics, sharded for copy-on-write: an
// image shares every shard its batch did not change with the image before.
type topicMap[K comparable] struct {
	shards [topicShards]map[K]*Topic
	n      int
}

func shardOf[K comparable](k K) int { return int(maphash.Comparable(topicSeed, k) % topicShards) }

func (m *topicMap[K]) get(k K) (*Topic, bool) {
	t, ok := m.shards[shardOf(k)][k]
	return t, ok
}

func (m *topicMap[K]) len() int { return m.n }

// all iterates the topics in no particular order.
func (m *topicMap[K]) all() iter.Seq[*Topic] {
	return func(yield func(*Topic) bool) {
		for _, s := range m.shards {
			for _, t := range s {
				if !yield(t) {
					return
				}
			}
		}
	}
}

// topicMapWriter changes a private copy of a topicMap for one batch,
// copying each shard the first time it writes to it.
type topicMapWriter[K comparable] struct {
	m      *topicMap[K]
	copied [topicShards]bool
}

// writer returns m's writer for a batch; m must be the batch's own copy.
func (m *topicMap[K]) writer() *topicMapWriter[K] { return &topicMapWriter[K]{m: m} }

func (w *topicMapWriter[K]) shard(k K) map[K]*Topic {
	i := shardOf(k)
	if !w.copied[i] {
		old := w.m.shards[i]
		s := make(map[K]*Topic, len(old)+1)
		for k, v := range old {
			s[k] = v
		}
		w.m.shards[i] = s
		w.copied[i] = true
	}
	return w.m.shards[i]
}

func (w *topicMapWriter[K]) set(k K, t *Topic) {
	s := w.shard(k)
	if _, ok := s[k]; !ok {
		w.m.n++
	}
	s[k] = t
}

func (w *topicMapWriter[K]) delete(k K) {
	s := w.shard(k)
	if _, ok := s[k]; ok {
		delete(s, k)
		w.m.n--
	}
}
