package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/integration"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/raftlog"
	"github.com/keelstream/keel/storage"
)

// run executes the CLI in-process, as the binary would, and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	app.ErrWriter = &out
	err := app.Run(append([]string{"keel"}, args...))
	return out.String(), err
}

func writeLog(t *testing.T, dir string) {
	t.Helper()
	l, err := storage.OpenLog(filepath.Join(dir, "orders-0"), storage.OpenOptions{
		Config: storage.LogConfig{IndexIntervalBytes: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		opts := record.DefaultBatchOptions()
		opts.Compression = record.CompressionSnappy
		b := record.NewBatchBuilder(opts)
		b.Append(int64(1000+i), []byte("key"), []byte("hello"), []record.RecordHeader{{Key: "h", Value: []byte("v")}})
		b.Append(int64(1001+i), nil, []byte("world"), nil)
		batch, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(batch, storage.AppendOptions{LeaderEpoch: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDumpLogPrintsBatchesRecordsAndIndexes(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir)
	seg := filepath.Join(dir, "orders-0", "00000000000000000000")
	out, err := run(t, "dump-log", "--files", seg+".log", "--print-data-log", "--files", seg+".index", "--files", seg+".timeindex")
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "dump-log output", out,
		"baseOffset: 0 lastOffset: 1 count: 2",
		"baseOffset: 4 lastOffset: 5 count: 2",
		"partitionLeaderEpoch: 4",
		"compresscodec: snappy",
		"isvalid: true",
		"| offset: 5 CreateTime: 1003 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: world",
		"| offset: 0 CreateTime: 1000 keySize: 3 valueSize: 5 sequence: -1 headerKeys: [h] key: key payload: hello",
		"offset: 2 position:",
		"timestamp: 1003 offset: 4")
}

// An aborted transaction: its marker, and its entry in the segment's
// .txnindex, as kafka-dump-log.sh prints them.
func TestDumpLogPrintsMarkersAndAbortedTransactions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-0")
	l, err := storage.OpenLog(dir, storage.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 7, 0, 0, true
	b := record.NewBatchBuilder(opts)
	b.Append(1000, nil, []byte("aborted"), nil)
	batch, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(batch, storage.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	marker, err := record.BuildControlBatch(nil, record.ControlAbort, 3, 7, 0, 1001)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(marker, storage.AppendOptions{FromCoordinator: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "00000000000000000000")
	out, err := run(t, "dump-log", "--files", seg+".log", "--deep-iteration", "--files", seg+".txnindex")
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "dump-log output", out,
		"isTransactional: true isControl: true",
		"| offset: 1 CreateTime: 1001 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT",
		"version: 0 producerId: 7 firstOffset: 0 lastOffset: 1 lastStableOffset: 2")
}

func TestDumpLogReportsATornTail(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir)
	path := filepath.Join(dir, "orders-0", "00000000000000000000.log")
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-5); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "dump-log", "--files", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "invalid bytes at the end") || strings.Count(out, "baseOffset:") != 2 {
		t.Fatalf("output:\n%s", out)
	}
}

// kafka-metadata-quorum.sh's view, through a broker and straight from a
// controller, before and after the Raft leader dies.
func TestMetadataQuorumDescribeFollowsTheLeader(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	leaderOf := func(args ...string) (int, string) {
		t.Helper()
		out, err := run(t, append([]string{"metadata-quorum"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		m := regexp.MustCompile(`LeaderId:\s+(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no LeaderId in:\n%s", out)
		}
		id, _ := strconv.Atoi(m[1])
		return id, out
	}
	leader, out := leaderOf("--bootstrap-server", c.BootstrapServers()[0], "describe", "--status")
	for _, want := range []string{"ClusterId:", c.ClusterID, "CurrentVoters:", "[1,2,3]", "HighWatermark:", "MaxFollowerLag:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("--status lacks %q:\n%s", want, out)
		}
	}
	if again, _ := leaderOf("--bootstrap-controller", c.ControllerAddr(int32(leader%3+1)), "describe", "--status"); again != leader {
		t.Fatalf("a follower controller reports leader %d, the broker %d", again, leader)
	}
	rep, err := run(t, "metadata-quorum", "--bootstrap-server", c.BootstrapServers()[0], "describe", "--replication")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(rep, "Follower") != 2 || strings.Count(rep, "Leader") != 1 || !strings.Contains(rep, "LogEndOffset") {
		t.Fatalf("--replication:\n%s", rep)
	}

	c.Kill(int32(leader))
	survivor := c.BootstrapServers()[leader%3] // a broker of another node
	// An election takes a few seconds; a loaded 2-core machine, more.
	deadline := time.Now().Add(45 * time.Second)
	for {
		out, err := run(t, "metadata-quorum", "--bootstrap-server", survivor, "describe", "--status")
		if err == nil {
			if m := regexp.MustCompile(`LeaderId:\s+(\d+)`).FindStringSubmatch(out); m != nil && m[1] != strconv.Itoa(leader) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CLI never showed a new leader after %d died:\n%s %v", leader, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMetadataQuorumDumpLogDecodesRecords(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	dir := c.Dir(1)
	c.Stop(1)
	out, err := run(t, "metadata-quorum", "dump-log", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type":"REGISTER_BROKER_RECORD"`, `"type":"UNFENCE_BROKER_RECORD"`, `"offset":`} {
		if !strings.Contains(out, want) {
			t.Fatalf("dump-log lacks %s:\n%s", want, out)
		}
	}
}

// The Kafka scripts' action flags select the subcommand.
func TestKafkaStyleArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"keel topics --bootstrap-server b:9092 --list", "keel topics list --bootstrap-server b:9092"},
		{"keel topics --create --topic t --partitions 3", "keel topics create --topic t --partitions 3"},
		{"keel groups --bootstrap-server b --describe --group g --members", "keel groups describe --bootstrap-server b --group g --members"},
		{"keel groups --reset-offsets --group g --to-earliest --execute", "keel groups reset-offsets --group g --to-earliest --execute"},
		{"keel topics list --bootstrap-server b", "keel topics list --bootstrap-server b"}, // a subcommand given
		{"keel topics --list --delete --topic t", "keel topics --list --delete --topic t"}, // two actions: untouched
		{"keel topics --help", "keel topics --help"},
		{"keel produce --topic t --list", "keel produce --topic t --list"}, // not a Kafka-script command
		{"keel topics --bootstrap-server b:9092 create --topic t", "keel topics create --bootstrap-server b:9092 --topic t"},
		{"keel groups -b b describe --group g", "keel groups describe -b b --group g"},
		{"keel topics --bootstrap-server=b list", "keel topics list --bootstrap-server=b"},
		{"keel topics --topic list describe", "keel topics --topic list describe"}, // "list" is --topic's value
		{"keel", "keel"},
		// kafka-server-start.sh's form: the properties file first.
		{"keel server s.properties --override a=b", "keel server --config s.properties --override a=b"},
		{"keel server --config s.properties", "keel server --config s.properties"},
		// kafka-producer-perf-test.sh's --producer-props takes several values.
		{"keel perf produce --topic t --producer-props acks=1 linger.ms=0 --throughput 5",
			"keel perf produce --topic t --producer-props acks=1 --producer-props linger.ms=0 --throughput 5"},
		{"keel perf produce --command-property=acks=1 batch.size=9 x=y",
			"keel perf produce --command-property=acks=1 --command-property batch.size=9 --command-property x=y"},
		{"keel perf produce --topic t --producer-props acks=1", "keel perf produce --topic t --producer-props acks=1"},
		{"keel perf e2e --consumer-props a=1 b=2 --producer-props c=3",
			"keel perf e2e --consumer-props a=1 --consumer-props b=2 --producer-props c=3"},
		{"keel produce --producer-property a=1 b=2", "keel produce --producer-property a=1 b=2"}, // one value each: the parser refuses b=2
		// kafka-consumer-groups.sh --list's --state and --type, with or without a list.
		{"keel groups --list --state Stable,Empty --type -b b", "keel groups list --state --state-in=Stable,Empty --type -b b"},
		{"keel groups list --type=consumer --state", "keel groups list --type --type-in=consumer --state"},
		{"keel groups describe --group g --state", "keel groups describe --group g --state"},
	} {
		if got := strings.Join(kafkaStyleArgs(strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// keel format takes kafka-storage.sh format's --ignore-formatted, which
// container entrypoints pass on every start, and its --release-version
// (the metadata.version to start at; one Keel does not support fails).
func TestFormatIgnoreFormattedAndReleaseVersion(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "server.properties")
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(conf, []byte("log.dirs="+data+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, second := raftlog.NewClusterID(), raftlog.NewClusterID()
	for _, v := range []string{"3.2", "4.2", "5.0", "x"} {
		if out, err := run(t, "format", "-t", first, "-c", conf, "--release-version", v); err == nil {
			t.Fatalf("format --release-version %s succeeded:\n%s", v, out)
		}
	}
	if out, err := run(t, "format", "-t", first, "-c", conf, "--release-version", "4.1"); err != nil ||
		!strings.Contains(out, "to bootstrap the cluster at metadata.version 4.1-IV1") || !strings.Contains(out, "Formatted "+data) {
		t.Fatalf("format: %v\n%s", err, out)
	}
	if out, err := run(t, "format", "-t", second, "-c", conf); err == nil {
		t.Fatalf("formatting for another cluster succeeded:\n%s", out)
	}

	// kafka-storage.sh format's --feature: metadata.version as
	// --release-version (not both), kraft.version only as the quorum is
	// (static voters here: 0), group.version 0 or 1 (1 from 4.0-IV0),
	// features Keel lacks only at 0.
	for _, tc := range []struct {
		args []string
		want string // "" for a refusal
	}{
		{[]string{"--feature", "metadata.version=3.7-IV2"}, "metadata.version 3.7-IV2"},
		{[]string{"--feature", "kraft.version=0", "--feature", "group.version=0", "--feature", "metadata.version=18"}, "metadata.version 3.7-IV3"},
		{[]string{"--feature", "group.version=1", "--release-version", "4.0"}, "metadata.version 4.0-IV3"},
		{[]string{"--feature", "transaction.version=0", "--release-version", "4.0"}, "metadata.version 4.0-IV3"},
		{[]string{"--feature", "kraft.version=1"}, ""},
		{[]string{"--feature", "group.version=2"}, ""},
		{[]string{"--feature", "group.version=1", "--release-version", "3.9"}, ""},
		{[]string{"--feature", "transaction.version=3"}, ""},
		{[]string{"--feature", "share.version=1"}, ""},
		{[]string{"--feature", "metadata.version"}, ""},
		{[]string{"--feature", "metadata.version=3.7", "--release-version", "3.7"}, ""},
	} {
		fresh := filepath.Join(t.TempDir(), "data")
		args := append([]string{"format", "-t", first, "--override", "log.dirs=" + fresh}, tc.args...)
		out, err := run(t, args...)
		if tc.want == "" && err == nil {
			t.Errorf("format %v succeeded:\n%s", tc.args, out)
		}
		if tc.want != "" && (err != nil || !strings.Contains(out, "to bootstrap the cluster at "+tc.want)) {
			t.Errorf("format %v: %v\n%s", tc.args, err, out)
		}
	}
	out, err := run(t, "format", "-t", second, "-c", conf, "-g")
	if err != nil || !strings.Contains(out, data+" is already formatted; skipping it") {
		t.Fatalf("format -g: %v\n%s", err, out)
	}
	if mp, err := raftlog.ReadMetaProperties(data); err != nil || mp.ClusterID != first {
		t.Fatalf("after format -g: %+v %v", mp, err)
	}
}

// format's feature records: a release from 4.0 brings group.version 1, as
// kafka-storage.sh's release defaults do; an earlier one none; --feature
// overrides the default.
func TestFormatFeatureRecords(t *testing.T) {
	cfg, err := broker.LoadConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	levels := func(release string, features ...string) map[string]int16 {
		t.Helper()
		recs, err := formatFeatures(release, features, cfg)
		if err != nil {
			t.Fatalf("%s %v: %v", release, features, err)
		}
		out := map[string]int16{}
		for _, r := range recs {
			f := r.(*metadata.FeatureLevelRecord)
			out[f.Name] = f.FeatureLevel
		}
		return out
	}
	if got := levels("4.1"); len(got) != 4 || got[metadata.GroupVersionFeature] != 1 || got[metadata.MetadataVersionFeature] != 27 ||
		got[metadata.EligibleLeaderReplicasFeature] != 1 || got[metadata.TransactionVersionFeature] != 2 {
		t.Errorf("4.1: %v", got)
	}
	// Eligible leader replicas from 4.1 (4.1-IV0), as in Kafka; 4.0 can
	// have them, when asked.
	if got := levels("4.0"); len(got) != 3 || got[metadata.GroupVersionFeature] != 1 || got[metadata.TransactionVersionFeature] != 2 {
		t.Errorf("4.0: %v", got)
	}
	if got := levels("4.0", "eligible.leader.replicas.version=1"); len(got) != 4 || got[metadata.EligibleLeaderReplicasFeature] != 1 {
		t.Errorf("4.0 with eligible.leader.replicas.version=1: %v", got)
	}
	if got := levels("", "eligible.leader.replicas.version=0"); len(got) != 1 || got[metadata.EligibleLeaderReplicasFeature] != 0 {
		t.Errorf("eligible.leader.replicas.version=0 alone: %v", got)
	}
	if _, err := formatFeatures("3.9", []string{"eligible.leader.replicas.version=1"}, cfg); err == nil ||
		!strings.Contains(err.Error(), "needs metadata.version 4.0-IV1 or later, not 3.9-IV0") {
		t.Errorf("eligible.leader.replicas.version=1 at 3.9: %v", err)
	}
	if got := levels("3.9"); len(got) != 1 || got[metadata.MetadataVersionFeature] != 21 {
		t.Errorf("3.9: %v", got)
	}
	if got := levels("4.0", "group.version=0"); len(got) != 3 || got[metadata.GroupVersionFeature] != 0 {
		t.Errorf("4.0 with group.version=0: %v", got)
	}
	if got := levels("", "group.version=0"); len(got) != 1 || got[metadata.GroupVersionFeature] != 0 {
		t.Errorf("group.version=0 alone: %v", got)
	}
	if got := levels(""); len(got) != 0 {
		t.Errorf("nothing: %v", got)
	}
	// transaction.version 2 from 4.0-IV2, and at any release when asked.
	if got := levels("4.0-IV1"); got[metadata.TransactionVersionFeature] != 0 {
		t.Errorf("4.0-IV1: %v", got)
	}
	if got := levels("3.9", "transaction.version=2"); len(got) != 2 || got[metadata.TransactionVersionFeature] != 2 {
		t.Errorf("3.9 with transaction.version=2: %v", got)
	}
	if _, err := formatFeatures("", []string{"transaction.version=3"}, cfg); err == nil ||
		!strings.Contains(err.Error(), "Keel supports transaction.version 0 to 2") {
		t.Errorf("transaction.version=3: %v", err)
	}
}

func TestParseJavaDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"P1DT2H": 26 * time.Hour, "PT30M": 30 * time.Minute, "PT0.5S": 500 * time.Millisecond, "PT1,5S": 1500 * time.Millisecond, "-PT1H": -time.Hour,
		"P2D": 48 * time.Hour, "pt1h2m3s": time.Hour + 2*time.Minute + 3*time.Second, "PT-5M": -5 * time.Minute,
	} {
		if got, err := parseJavaDuration(in); err != nil || got != want {
			t.Errorf("parseJavaDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "PT", "1h", "PT1.5H", "P1H", "P1DT"} {
		if d, err := parseJavaDuration(bad); err == nil {
			t.Errorf("parseJavaDuration(%q) = %v, want an error", bad, d)
		}
	}
}

// A command refuses an argument it does not take, rather than running
// without it and every option after it (the flag parser stops there).
func TestStrayArgumentsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		stray string
	}{
		{[]string{"perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "stray", "--throughput", "5"}, "stray"},
		{[]string{"topics", "list", "extra"}, "extra"},
		{[]string{"groups", "describe", "--group", "g", "x", "--members"}, "x"},
	} {
		out, err := run(t, tc.args...)
		if want := "unexpected argument \"" + tc.stray + "\""; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("keel %v: %v (output %q); want %s", tc.args, err, out, want)
		}
	}
}

// keel server reads a properties file given first, as
// kafka-server-start.sh does, instead of starting the development default.
func TestServerTakesThePropertiesFileFirst(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(conf, []byte("node.id=seven\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := kafkaStyleArgs([]string{"keel", "server", conf, "--override", "process.roles=broker,controller"})
	if !slices.Contains(args, "--config") {
		t.Fatalf("args %q: the file is not --config's (the server would start without it)", args)
	}
	out, err := run(t, args[1:]...)
	if err == nil || !strings.Contains(err.Error(), "node.id") {
		t.Fatalf("keel server %s: %v (output %q); want its node.id refused", conf, err, out)
	}
}
