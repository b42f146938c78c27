package client

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// LogDirReplica is one replica in a broker's log dir.
type LogDirReplica struct {
	Topic     string
	Partition int32
	// Size is its bytes on disk.
	Size int64
	// OffsetLag is how far it is behind: the high watermark less its log
	// end offset for a follower (0 on a leader), and for a future replica
	// the current replica's log end offset less its own.
	OffsetLag int64
	// IsFuture marks a replica being moved into this dir
	// (AlterReplicaLogDirs), which replaces the current one when it has
	// caught up.
	IsFuture bool
}

// LogDir is one of a broker's log.dirs, with the replicas it holds.
type LogDir struct {
	Broker int32
	Dir    string
	// Err is the dir's error: KAFKA_STORAGE_ERROR for a dir an I/O error
	// took offline.
	Err error
	// TotalBytes and UsableBytes are its file system's size and free space
	// (-1 from brokers before Kafka 3.3, KIP-827).
	TotalBytes, UsableBytes int64
	Replicas                []LogDirReplica
}

// DescribeLogDirs describes a broker's log dirs and every replica in them
// (DescribeLogDirs, KIP-113; kafka-log-dirs.sh --describe), dirs and
// replicas sorted.
func (a *Admin) DescribeLogDirs(ctx context.Context, broker int32) ([]LogDir, error) {
	var out []LogDir
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.BrokerRequest(ctx, broker, kmsg.NewPtrDescribeLogDirsRequest())
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.DescribeLogDirsResponse)
		if err := errorWithMessage(resp.ErrorCode, nil); err != nil {
			return err
		}
		out = out[:0]
		for _, d := range resp.Dirs {
			ld := LogDir{Broker: broker, Dir: d.Dir, Err: errorWithMessage(d.ErrorCode, nil), TotalBytes: d.TotalBytes, UsableBytes: d.UsableBytes}
			for _, t := range d.Topics {
				for _, p := range t.Partitions {
					ld.Replicas = append(ld.Replicas, LogDirReplica{Topic: t.Topic, Partition: p.Partition, Size: p.Size,
						OffsetLag: p.OffsetLag, IsFuture: p.IsFuture})
				}
			}
			sort.Slice(ld.Replicas, func(i, j int) bool {
				a, b := ld.Replicas[i], ld.Replicas[j]
				return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
			})
			out = append(out, ld)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("describe log dirs of broker %d: %w", broker, err)
	}
	return out, nil
}

// AlterReplicaLogDirs moves the broker's replicas of partitions to dir, one
// of its log.dirs (AlterReplicaLogDirs, KIP-113; what
// kafka-reassign-partitions.sh sends for a reassignment's "log_dirs"). The
// broker copies each in the background; DescribeLogDirs shows it as a
// future replica until the move completes. It returns each partition's
// error: LOG_DIR_NOT_FOUND for a dir that is not a log dir,
// REPLICA_NOT_AVAILABLE for a replica the broker does not host (it is
// created in dir if it comes), KAFKA_STORAGE_ERROR for an offline dir.
func (a *Admin) AlterReplicaLogDirs(ctx context.Context, broker int32, dir string, partitions ...TopicPartition) (map[TopicPartition]error, error) {
	out := map[TopicPartition]error{}
	if len(partitions) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	rd := kmsg.NewAlterReplicaLogDirsRequestDir()
	rd.Dir = dir
	byTopic := map[string]int{}
	for _, tp := range partitions {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(rd.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
			rt.Topic = tp.Topic
			rd.Topics = append(rd.Topics, rt)
		}
		rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, tp.Partition)
	}
	req.Dirs = append(req.Dirs, rd)
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.BrokerRequest(ctx, broker, req)
		if err != nil {
			return err
		}
		for _, t := range kresp.(*kmsg.AlterReplicaLogDirsResponse).Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{Topic: t.Topic, Partition: p.Partition}] = errorWithMessage(p.ErrorCode, nil)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alter replica log dirs on broker %d: %w", broker, err)
	}
	return out, nil
}
