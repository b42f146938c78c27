package broker

// DescribeLogDirs (key 35), v0–v5 (KIP-113): every log.dirs directory with
// the partitions it holds (all, or the requested ones), each with its size
// on disk and offset lag: max(high watermark − log end offset, 0), always 0
// on the leader; for a future replica (IsFuture: a replica being moved into
// the dir, AlterReplicaLogDirs) the current replica's log end offset less
// its own, as in Kafka. v4+: TotalBytes and UsableBytes of the directory's filesystem.
// v5: IsCordoned is false (no cordoning yet). A directory that cannot be
// stat'ed, or that an I/O error took offline, reports KAFKA_STORAGE_ERROR
// (an offline one without its partitions). ErrorCode (v3+) is 0.

import (
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/keelstream/keel/storage"
)

func (b *Broker) handleDescribeLogDirs(m *kmsg.DescribeLogDirsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var want map[storage.TopicPartition]bool
	if m.Topics != nil {
		want = map[storage.TopicPartition]bool{}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				want[storage.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	byDir := map[string]map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition{}
	add := func(l *storage.Log, lag int64, future bool) {
		tp := l.TopicPartition()
		if want != nil && !want[tp] {
			return
		}
		dir := absDir(filepath.Dir(l.Dir()))
		if byDir[dir] == nil {
			byDir[dir] = map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition{}
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition = tp.Partition
		dp.Size = l.Size()
		dp.OffsetLag = lag
		dp.IsFuture = future
		byDir[dir][tp.Topic] = append(byDir[dir][tp.Topic], dp)
	}
	for _, l := range b.logs.Logs() {
		add(l, max(l.HighWatermark()-l.LogEndOffset(), 0), false)
	}
	for _, f := range b.logs.FutureLogs() {
		if cur, ok := b.logs.Log(f.TopicPartition()); ok {
			add(f, max(cur.LogEndOffset()-f.LogEndOffset(), 0), true)
		}
	}
	offline := b.logs.OfflineDirs()
	for _, d := range b.cfg.LogDirs {
		dir := absDir(d)
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = dir
		if slices.Contains(offline, d) {
			// As Kafka: an offline dir is listed with its error only.
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			rd.ErrorCode = kerr.KafkaStorageError.Code
		} else {
			rd.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
			rd.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
		}
		topics := byDir[dir]
		names := make([]string, 0, len(topics))
		for n := range topics {
			names = append(names, n)
		}
		for _, n := range sortedStrings(names) {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic, rt.Partitions = n, topics[n]
			rd.Topics = append(rd.Topics, rt)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp
}

// absDir cleans a directory path to the absolute form Kafka reports.
func absDir(d string) string {
	if a, err := filepath.Abs(d); err == nil {
		return a
	}
	return filepath.Clean(d)
}
