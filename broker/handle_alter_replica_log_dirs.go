package broker

// AlterReplicaLogDirs (key 34), v0–v2 (KIP-113): moves replicas this broker
// hosts to another of its log.dirs, as Kafka's
// ReplicaManager.alterReplicaLogDirs (storage.Manager.AlterLogDir; the copy
// runs in the background, and DescribeLogDirs shows it as a future replica
// until it completes). kafka-reassign-partitions.sh sends it for the
// "log_dirs" of a reassignment, and kafka-log-dirs.sh reads the result.
//
//   - A dir that is not one of log.dirs: LOG_DIR_NOT_FOUND; an offline one
//     (or any offline log dir: no future replica is created then, as in
//     Kafka): KAFKA_STORAGE_ERROR.
//   - A replica this broker does not host yet: REPLICA_NOT_AVAILABLE, and
//     the dir is remembered for when it is created (Kafka's preferred log
//     dir).
//   - A topic name too long for the future directory's name (over 255
//     bytes): INVALID_TOPIC_EXCEPTION.
//   - The dir the replica is in cancels a move under way; a new dir
//     replaces it.
//   - ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
//     partition (authz_apis.go).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/storage"
)

// maxFutureDirNameLen is the longest directory name a file system takes:
// "<topic>-<partition>.<32 hex digits>-future" must fit (Kafka's
// KAFKA-4893 check).
const maxFutureDirNameLen = 255

func (b *Broker) handleAlterReplicaLogDirs(m *kmsg.AlterReplicaLogDirsRequest) kmsg.Response {
	return alterReplicaLogDirsAnswer(m, func(dir string, tp storage.TopicPartition) int16 {
		if len(tp.DirName())+len(".")+32+len("-future") > maxFutureDirNameLen {
			return kerr.InvalidTopicException.Code
		}
		err := b.logs.AlterLogDir(tp, dir)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, storage.ErrLogDirNotFound):
			b.log.Warn("cannot move a replica: not a log dir of this broker", "partition", tp, "dir", dir)
			return kerr.LogDirNotFound.Code
		case errors.Is(err, storage.ErrReplicaNotAvailable):
			b.log.Info("a replica not hosted yet will be created in the log dir asked for", "partition", tp, "dir", dir)
			return kerr.ReplicaNotAvailable.Code
		case errors.Is(err, storage.ErrStorage):
			b.log.Warn("cannot move a replica", "partition", tp, "dir", dir, "error", err)
			return kerr.KafkaStorageError.Code
		}
		b.log.Error("moving a replica to another log dir failed", "partition", tp, "dir", dir, "error", err)
		return kerr.UnknownServerError.Code
	})
}

// alterReplicaLogDirsAnswer answers every partition of the request with
// code(dir, partition); a partition named twice gets the last answer, as
// in Kafka's map of them.
func alterReplicaLogDirsAnswer(m *kmsg.AlterReplicaLogDirsRequest, code func(string, storage.TopicPartition) int16) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	byTopic := map[string]int{}
	for _, d := range m.Dirs {
		for _, t := range d.Topics {
			i, ok := byTopic[t.Topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[t.Topic] = i
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = code(d.Dir, storage.TopicPartition{Topic: t.Topic, Partition: p})
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
			}
		}
	}
	return resp
}
