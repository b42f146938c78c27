package broker

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestAlterReplicaLogDirsAnswers covers AlterReplicaLogDirs' answers on a
// broker with one log dir (moves themselves: storage/logdir_move_test.go
// and integration/logdirs_test.go): the dir a replica is in (nothing to
// do), a dir not in log.dirs, a partition not hosted, and a topic whose
// future directory's name would be too long for the file system.
func TestAlterReplicaLogDirsAnswers(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("here", 1, nil)
	long := strings.Repeat("x", 240)
	alter := kadm.AlterReplicaLogDirsReq{}
	alter.Add(c.dir+"/", kadm.TopicsSet{"here": {0: {}}, "absent": {0: {}}, long: {0: {}}})
	alter.Add(filepath.Join(t.TempDir(), "elsewhere"), kadm.TopicsSet{"here": {1: {}}})
	resp, err := c.admin().AlterBrokerReplicaLogDirs(testCtx(t), testNodeID, alter)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]error{"here-0": nil, "absent-0": kerr.ReplicaNotAvailable, long + "-0": kerr.InvalidTopicException,
		"here-1": kerr.LogDirNotFound}
	n := 0
	resp.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		n++
		key := r.Topic + "-" + map[int32]string{0: "0", 1: "1"}[r.Partition]
		if w, ok := want[key]; !ok || r.Err != w {
			t.Errorf("%s: %v, want %v", key, r.Err, w)
		}
	})
	if n != len(want) {
		t.Errorf("%d answers, want %d", n, len(want))
	}
	if _, _, moving := c.logs.FutureLog(tp("here", 0)); moving {
		t.Error("a move to the dir the replica is in started")
	}
}
