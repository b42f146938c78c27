package raftlog

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const storeFailureChild = "RAFTLOG_STORE_FAILURE_CHILD"

// TestMetadataLogWriteFailureIsReported: once the disk under the metadata
// log fails, the first failed write reaches Config.OnStorageError, once,
// and the proposal that needed it fails. The failure is real: the test runs
// again in a child process whose file size limit is then set to one byte,
// so that every write to a file past its first byte fails with EFBIG from
// the kernel (the limit holds for a whole process, hence the child).
func TestMetadataLogWriteFailureIsReported(t *testing.T) {
	if os.Getenv(storeFailureChild) != "" {
		storeFailureInChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMetadataLogWriteFailureIsReported$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), storeFailureChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestMetadataLogWriteFailureIsReported") {
		t.Fatalf("child test did not pass:\n%s", out)
	}
	t.Logf("child: %s", strings.TrimSpace(string(out)))
}

func storeFailureInChild(t *testing.T) {
	reported := make(chan error, 2)
	c := newCluster(t, 1, func(_ int32, cfg *Config) {
		cfg.OnStorageError = func(err error) { reported <- err }
	})
	c.waitAgree(c.propose(createTopic("before", 1)...))
	// The leader steps down when its append fails; at its next election
	// hashicorp/raft panics, unable to save the new term. Slow timers keep
	// that after the test (a keel node is stopping by then, or crashes:
	// either way it leaves the quorum).
	r := c.waitLeader().node.raft
	rc := r.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = time.Minute, time.Minute
	if err := r.ReloadConfig(rc); err != nil {
		t.Fatal(err)
	}

	lim := unix.Rlimit{Cur: 1, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leader := c.waitLeader().node
	if _, err := leader.Propose(ctx, createTopic("after", 1)); err == nil {
		t.Fatal("a proposal succeeded with every write failing")
	}
	select {
	case err := <-reported:
		if !errors.Is(err, syscall.EFBIG) {
			t.Fatalf("reported %v, want EFBIG", err)
		}
		t.Logf("reported: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no storage error reported")
	}
	if n := len(reported); n != 0 {
		t.Fatalf("%d more reports, want the first only", n)
	}
	// Undo the limit for the cleanup (the nodes close their files).
	lim.Cur = unix.RLIM_INFINITY
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
}
