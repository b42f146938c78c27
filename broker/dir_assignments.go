package broker

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Directory assignment (KIP-858, Kafka's AssignmentsManager): the metadata
// records the log dir each replica is in, so that when a broker reports a
// dir offline the controller knows which replicas went with it. The
// controller places a new replica on a broker with several log dirs in no
// dir in particular (DirUnassigned); the broker creates its log in the dir
// of its choosing and tells the controller with AssignReplicasToDirs (API
// 73). It does the same when a replica moved to another dir
// (AlterReplicaLogDirs), and for replicas the metadata places in a dir it
// no longer has (a disk replaced after it failed, whose replicas are
// created afresh in the dirs left).

const (
	// dirAssignInterval is how often the loop looks for replicas whose
	// dir the metadata does not have (a move completing is noticed so).
	dirAssignInterval = time.Second
	// dirAssignResend is how long a sent assignment is not sent again
	// while the metadata does not show it yet.
	dirAssignResend = 5 * time.Second
	// dirAssignBatch is the most partitions one request carries.
	dirAssignBatch = 2000
)

// dirAssigner is the state of the broker's dirAssignmentLoop.
type dirAssigner struct {
	// ids are the directory ids of the log dirs, by cleaned path.
	ids  map[string]metadata.Uuid
	wake chan struct{}
	mu   sync.Mutex // guards sent
	// sent are the assignments sent and not yet in the metadata.
	sent map[storage.TopicPartition]sentAssignment
}

type sentAssignment struct {
	dir metadata.Uuid
	at  time.Time
}

func newDirAssigner(ids map[string]metadata.Uuid) *dirAssigner {
	a := &dirAssigner{ids: map[string]metadata.Uuid{}, wake: make(chan struct{}, 1), sent: map[storage.TopicPartition]sentAssignment{}}
	for dir, id := range ids {
		a.ids[filepath.Clean(dir)] = id
	}
	return a
}

// nudge asks the loop for a pass now; it never blocks.
func (a *dirAssigner) nudge() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// tracksLogDirs reports whether the controller knows this broker's log
// dirs: its registration in the image has them (a controller from before
// KIP-858 records none). False on a nil Broker.
func (b *Broker) tracksLogDirs() bool {
	if b == nil {
		return false
	}
	self, ok := b.currentImage().Broker(b.nodeID)
	return ok && len(self.LogDirs) > 0
}

// dirAssignmentLoop reports replicas' log dirs to the controller: after
// every image (nudge), and every dirAssignInterval.
func (b *Broker) dirAssignmentLoop() {
	if len(b.dirAssign.ids) == 0 {
		return
	}
	t := time.NewTicker(dirAssignInterval)
	defer t.Stop()
	for {
		select {
		case <-b.closing():
			return
		case <-t.C:
		case <-b.dirAssign.wake:
		}
		b.assignDirs()
	}
}

// assignDirs sends one AssignReplicasToDirs for the hosted replicas whose
// log dir the image does not show, if any.
func (b *Broker) assignDirs() {
	img := b.currentImage()
	if img == nil {
		return
	}
	self, ok := img.Broker(b.nodeID)
	if !ok || len(self.LogDirs) == 0 {
		return // not registered yet, or with a controller before KIP-858
	}
	a := b.dirAssign
	now := b.now()
	type assignment struct {
		tp      storage.TopicPartition
		topicID metadata.Uuid
		dir     metadata.Uuid
	}
	var todo []assignment
	a.mu.Lock()
	for tp, s := range a.sent {
		if now.Sub(s.at) >= dirAssignResend {
			delete(a.sent, tp) // due again, or its replica gone
		}
	}
	for tp, p := range b.partitions.Load().byTP {
		// A replica in a failed dir is reported too: the controller then
		// knows it is offline even if the dir failed before its
		// assignment went out (Kafka's AssignmentsManager does the same).
		if p.removed.Load() {
			continue
		}
		// The log's directory is filepath.Join(log dir, name): its
		// parent, cut without allocating, is the cleaned log dir.
		path := p.log.Dir()
		dir, ok := a.ids[path[:max(strings.LastIndexByte(path, filepath.Separator), 0)]]
		if !ok {
			continue
		}
		t, ok := img.TopicByID(p.topicID)
		if !ok || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		if t.Partitions[tp.Partition].Directory(b.nodeID) == dir {
			delete(a.sent, tp)
			continue
		}
		if s, ok := a.sent[tp]; ok && s.dir == dir {
			continue
		}
		if len(todo) < dirAssignBatch {
			todo = append(todo, assignment{tp, p.topicID, dir})
			a.sent[tp] = sentAssignment{dir, now}
		}
	}
	a.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID, req.BrokerEpoch = b.nodeID, self.Epoch
	dirIdx := map[metadata.Uuid]int{}
	topicIdx := map[[2]metadata.Uuid]int{}
	for _, as := range todo {
		di, ok := dirIdx[as.dir]
		if !ok {
			di = len(req.Directories)
			dirIdx[as.dir] = di
			d := kmsg.NewAssignReplicasToDirsRequestDirectory()
			d.ID = as.dir
			req.Directories = append(req.Directories, d)
		}
		d := &req.Directories[di]
		ti, ok := topicIdx[[2]metadata.Uuid{as.dir, as.topicID}]
		if !ok {
			ti = len(d.Topics)
			topicIdx[[2]metadata.Uuid{as.dir, as.topicID}] = ti
			t := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
			t.TopicID = as.topicID
			d.Topics = append(d.Topics, t)
		}
		p := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
		p.Partition = as.tp.Partition
		d.Topics[ti].Partitions = append(d.Topics[ti].Partitions, p)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	kresp, err := b.ctrl.Forward(ctx, req)
	var code int16
	if err == nil {
		code = kresp.(*kmsg.AssignReplicasToDirsResponse).ErrorCode
	}
	if err != nil || code != 0 {
		// Sent again at the next pass.
		a.mu.Lock()
		for _, as := range todo {
			delete(a.sent, as.tp)
		}
		a.mu.Unlock()
		if b.ctx.Err() == nil {
			if err == nil {
				err = kerr.ErrorForCode(code)
			}
			b.log.Warn("AssignReplicasToDirs failed; retrying", "partitions", len(todo), "error", err)
		}
		return
	}
	for _, d := range kresp.(*kmsg.AssignReplicasToDirsResponse).Directories {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					// The replica moved away or its topic went meanwhile:
					// the next image tells.
					b.log.Debug("AssignReplicasToDirs refused a partition", "topic_id", metadata.Uuid(t.TopicID),
						"partition", p.Partition, "dir", metadata.Uuid(d.ID), "error", kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}
	b.log.Debug("assigned replicas to log dirs", "partitions", len(todo))
}
