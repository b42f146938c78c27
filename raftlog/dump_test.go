package raftlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/keelstream/keel/metadata"
)

func TestDumpLogDecodesSnapshotAndLogOffline(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 1, nil) // the single-node dev quorum
	c.waitLeader()
	reg := c.propose(&metadata.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 7, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}})
	c.propose(createTopic("snapped", 2)...)
	tn := c.nodes[1]
	if err := tn.node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	last := c.propose(createTopic("logged", 1)...)

	if err := DumpLog(tn.dir, &bytes.Buffer{}); err == nil {
		t.Fatal("dumped a log a running node holds")
	}
	c.stop(1)

	var out bytes.Buffer
	if err := DumpLog(filepath.Join(tn.dir, MetadataDirName), &out); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Snapshot *struct{ Index, Term int64 } `json:"snapshot"`
		Log      *struct{ FirstOffset, LastOffset int64 }
		Offset   *int64          `json:"offset"`
		Type     string          `json:"type"`
		Version  *int16          `json:"version"`
		Data     json.RawMessage `json:"data"`
		Error    string          `json:"error"`
	}
	var lines []line
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if l.Error != "" {
			t.Fatalf("dump error line %q", sc.Text())
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 || lines[0].Snapshot == nil || lines[0].Snapshot.Index < reg {
		t.Fatalf("first line is not the snapshot: %+v", lines)
	}
	inSnapshot, inLog := map[string]int{}, map[string]int{}
	sawLog, sawConfig := false, false
	for _, l := range lines[1:] {
		switch {
		case l.Log != nil:
			sawLog = true
		case l.Type == "RAFT_CONFIGURATION":
			sawConfig = true
		case l.Type == "RAFT_NOOP":
		case !sawLog:
			inSnapshot[l.Type]++
		default:
			inLog[l.Type]++
			if *l.Offset > last || l.Version == nil {
				t.Fatalf("record %+v", l)
			}
		}
	}
	if inSnapshot["REGISTER_BROKER_RECORD"] != 1 || inSnapshot["TOPIC_RECORD"] != 1 || inSnapshot["PARTITION_RECORD"] != 2 {
		t.Fatalf("snapshot records %v", inSnapshot)
	}
	if inLog["TOPIC_RECORD"] != 2 || inLog["PARTITION_RECORD"] != 3 || inLog["REGISTER_BROKER_RECORD"] != 1 || !sawConfig {
		t.Fatalf("log records %v (config %v)", inLog, sawConfig)
	}

	// The data decodes back into the record.
	for _, l := range lines {
		if l.Type == "TOPIC_RECORD" {
			var tr metadata.TopicRecord
			if err := json.Unmarshal(l.Data, &tr); err != nil || (tr.Name != "snapped" && tr.Name != "logged") {
				t.Fatalf("topic record data %s: %v", l.Data, err)
			}
		}
	}

	// Restart: the single node elects itself again and has everything.
	c.restart(1)
	c.waitLeader()
	img := c.waitAgree(last)
	if img.NumTopics() != 2 {
		t.Fatalf("after restart: %q", topicNames(img))
	}
}

// dump-log prints a SCRAM credential's user, mechanism and iterations,
// never its salt or keys.
func TestDumpRedactsScramCredentials(t *testing.T) {
	var out bytes.Buffer
	rec := &metadata.UserScramCredentialRecord{Name: "alice", Mechanism: metadata.ScramSHA512, Salt: []byte("SALTSALT"), StoredKey: []byte("STOREDKEY"), ServerKey: []byte("SERVERKEY"), Iterations: 8192}
	if err := dumpRecords(json.NewEncoder(&out), 5, []metadata.Record{rec}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, secret := range [][]byte{rec.Salt, rec.StoredKey, rec.ServerKey} {
		enc, _ := json.Marshal(secret) // base64, as JSON writes []byte
		if bytes.Contains(out.Bytes(), secret) || bytes.Contains(out.Bytes(), bytes.Trim(enc, `"`)) {
			t.Fatalf("dump shows a secret: %s", s)
		}
	}
	if !bytes.Contains(out.Bytes(), []byte(`"name":"alice"`)) || !bytes.Contains(out.Bytes(), []byte(`"iterations":8192`)) || !bytes.Contains(out.Bytes(), []byte("USER_SCRAM_CREDENTIAL_RECORD")) {
		t.Fatalf("dump: %s", s)
	}
}
