package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) {
	if os.Getenv(kfakeServeEnv) != "" {
		serveKfake() // the bench's kfake in its own process (bench_test.go)
		return
	}
	if spec := os.Getenv(e2eClientEnv); spec != "" {
		runE2EClient(spec) // the bench's latency client in its own process
		return
	}
	flag.Parse()
	ownPortHalf = true
	stopWatchdog := startHangWatchdog()
	code := m.Run()
	stopWatchdog()
	RemoveBinaryDir()
	os.Exit(code)
}

// startHangWatchdog ends a hung run shortly before go test's -timeout would,
// printing every goroutine and then, last, those running tests: the panic
// of -timeout names the running tests first, and CI keeps only an output's
// tail. The returned func disarms it.
func startHangWatchdog() (stop func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	timeout, _ := f.Value.(flag.Getter).Get().(time.Duration)
	if timeout <= 0 {
		return func() {}
	}
	margin := min(timeout/10, 90*time.Second)
	timer := time.AfterFunc(timeout-margin, func() {
		fmt.Fprintf(os.Stderr, "hang watchdog: tests still running after %v; every goroutine:\n\n%s\n\n",
			timeout-margin, GoroutineStacks(""))
		fmt.Fprintf(os.Stderr, "hang watchdog: the goroutines running tests (the hung step is in them):\n\n%s\n",
			GoroutineStacks("testing.tRunner"))
		os.Exit(2)
	})
	return func() { timer.Stop() }
}

// procClient is a kgo client of a process cluster, closed with the test.
func procClient(t testing.TB, c *ProcessCluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapServers()...), kgo.RetryTimeout(60 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestPausedNodeAnswersAfterSIGCONT(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, ProcessOptions{})
	cl := procClient(t, c, kgo.DefaultProduceTopic("paused"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// SIGSTOP: the process keeps its sockets but answers nothing.
	c.Pause(1)
	acked := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Value: []byte("while paused")}, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err := <-acked:
		t.Fatalf("a paused broker answered a produce: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if !c.Alive(1) {
		t.Fatal("a paused process counts as running")
	}

	// SIGCONT: the request waiting in the socket is served.
	c.Resume(1)
	if err := <-acked; err != nil {
		t.Fatalf("produce after SIGCONT: %v", err)
	}

	// SIGTERM ends the process with status 0 (Stop fails the test otherwise).
	c.Stop(1)
	if c.Alive(1) || c.Pid(1) != 0 {
		t.Fatal("stopped process still running")
	}
}
