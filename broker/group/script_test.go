package group

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/broker/internal/scripttest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// TestGroupScripts runs the data-driven scripts in testdata: each block is
// a command, a line "----" and the expected output, ended by a blank line;
// '#' lines between blocks are comments. The harness keeps a fake clock
// (advanced by "tick"), a log of every record the Manager asked to write,
// transactional batches and markers included (so "reload" can rebuild a
// Manager from it, as a new coordinator does, and "replay-check" can
// compare one with the live Manager), and applies pending commits at once,
// as if every append committed, unless a commit says hold=NAME: then
// "apply w=NAME" or "fail w=NAME" ends that write later.
// `go test ./broker/group -run TestGroupScripts -rewrite` regenerates the
// expected output.
func TestGroupScripts(t *testing.T) {
	scripttest.Run(t, *rewrite, func(t *testing.T) func(string) string {
		h := &harness{t: t, cfg: DefaultConfig(), now: 1000, held: map[string]heldWrite{}}
		h.cfg.MinSessionTimeoutMs = 100
		h.m = h.newManager()
		return h.run
	})
}

type harness struct {
	t    *testing.T
	cfg  Config
	now  int64
	uuid int
	m    *Manager
	// log is the __consumer_offsets partition: an entry's index is its
	// offset.
	log []logEntry
	// hold names the next Effects' write to keep in flight.
	hold string
	held map[string]heldWrite
}

// logEntry is one record of the partition, or a transaction marker.
type logEntry struct {
	rec Record
	// txn is the producer of a transactional batch's record.
	txn *TxnProducer
	// marker is "commit" or "abort" for a control record of producer.
	marker   string
	producer int64
	// dropped is a failed write's record: truncated, never replayed.
	dropped bool
}

// heldWrite is a write appended to the log and not yet committed.
type heldWrite struct {
	commits []PendingCommit
	offset  int64 // the batch's last offset, as the runtime's append reports it
	first   int   // its first log entry
}

func (h *harness) newManager() *Manager {
	return NewManager(h.cfg, h.now, func() string { h.uuid++; return strconv.Itoa(h.uuid) })
}

func num(s string, def int64) int64 {
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("bad number %q", s))
	}
	return n
}

func code(c int16) string {
	if c == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(c).(*kerr.Error).Message
}

func (h *harness) run(cmd string) string {
	words := strings.Fields(cmd)
	a := scripttest.Args(words[1:])
	switch words[0] {
	case "config":
		h.cfg.InitialRebalanceDelay = num(a["initial-delay"], h.cfg.InitialRebalanceDelay)
		h.cfg.MaxSize = int(num(a["max-size"], int64(h.cfg.MaxSize)))
		h.cfg.OffsetsRetentionMs = num(a["retention"], h.cfg.OffsetsRetentionMs)
		h.cfg.OffsetsRetentionCheckMs = num(a["retention-check"], h.cfg.OffsetsRetentionCheckMs)
		h.cfg.MaxMetadataSize = int(num(a["max-metadata"], int64(h.cfg.MaxMetadataSize)))
		h.m = h.newManager()
		return "ok"
	case "tick":
		h.now += num(a["ms"], 0)
		return h.effects(h.m.Tick(h.now))
	case "join":
		req := JoinRequest{Waiter: a["waiter"], Version: int16(num(a["v"], 9)), Group: a["g"], MemberID: a["member"],
			InstanceID: a["instance"], ClientID: a["client"], ClientHost: "/127.0.0.1",
			SessionTimeoutMs: num(a["session"], 10000), RebalanceTimeoutMs: num(a["rebalance"], 20000),
			ProtocolType: "consumer"}
		if v, ok := a["type"]; ok {
			req.ProtocolType = v
		}
		for _, p := range strings.Split(a["protocols"], ",") {
			name, meta, _ := strings.Cut(p, ":")
			if name != "" {
				req.Protocols = append(req.Protocols, Protocol{Name: name, Metadata: []byte(meta)})
			}
		}
		return h.effects(h.m.Join(h.now, req))
	case "sync":
		req := SyncRequest{Waiter: a["waiter"], Group: a["g"], MemberID: a["member"], InstanceID: a["instance"],
			Generation: int32(num(a["gen"], -1)), Protocol: a["protocol"], Assignments: map[string][]byte{}}
		for _, as := range strings.Split(a["assign"], ",") {
			if id, v, ok := strings.Cut(as, ":"); ok {
				req.Assignments[id] = []byte(v)
			}
		}
		return h.effects(h.m.Sync(h.now, req))
	case "heartbeat":
		return code(h.m.Heartbeat(h.now, a["g"], a["member"], a["instance"], int32(num(a["gen"], -1))))
	case "leave":
		var ms []LeaveMember
		for _, w := range strings.Split(a["members"], ",") {
			if inst, ok := strings.CutPrefix(w, "instance:"); ok {
				ms = append(ms, LeaveMember{InstanceID: inst})
			} else {
				ms = append(ms, LeaveMember{MemberID: w})
			}
		}
		top, codes, eff := h.m.Leave(h.now, a["g"], ms)
		var parts []string
		for _, c := range codes {
			parts = append(parts, code(c))
		}
		return fmt.Sprintf("leave: %s [%s]", code(top), strings.Join(parts, " ")) + h.suffix(eff)
	case "commit":
		req := CommitRequest{Group: a["g"], MemberID: a["member"], InstanceID: a["instance"],
			Generation: int32(num(a["gen"], -1)), RetentionMs: num(a["retention"], -1),
			Partitions: commitPartitions(a)}
		codes, eff := h.m.CommitOffsets(h.now, req)
		var parts []string
		for _, c := range codes {
			parts = append(parts, code(c))
		}
		h.hold = a["hold"]
		return fmt.Sprintf("commit: [%s]", strings.Join(parts, " ")) + h.suffix(eff)
	case "txn-commit":
		req := TxnCommitRequest{Group: a["g"], ProducerID: num(a["pid"], 0), ProducerEpoch: int16(num(a["epoch"], 0)),
			MemberID: a["member"], InstanceID: a["instance"], Generation: int32(num(a["gen"], -1)),
			Partitions: commitPartitions(a)}
		codes, eff := h.m.CommitTxnOffsets(h.now, req)
		var parts []string
		for _, c := range codes {
			parts = append(parts, code(c))
		}
		h.hold = a["hold"]
		return fmt.Sprintf("txn-commit: [%s]", strings.Join(parts, " ")) + h.suffix(eff)
	case "apply":
		w, ok := h.held[a["w"]]
		if !ok {
			h.t.Fatalf("no held write %q", a["w"])
		}
		delete(h.held, a["w"])
		h.m.ApplyCommitsAt(w.commits, w.offset)
		return "applied at " + strconv.FormatInt(w.offset, 10)
	case "fail":
		w, ok := h.held[a["w"]]
		if !ok {
			h.t.Fatalf("no held write %q", a["w"])
		}
		delete(h.held, a["w"])
		for i := w.first; i <= int(w.offset); i++ {
			h.log[i].dropped = true
		}
		h.m.FailCommits(w.commits)
		return "failed"
	case "marker":
		if r := a["result"]; r != "commit" && r != "abort" {
			h.t.Fatalf("marker result %q", r)
		}
		pid := num(a["pid"], 0)
		h.log = append(h.log, logEntry{marker: a["result"], producer: pid})
		h.m.CompleteTxn(pid, a["result"] == "commit")
		return fmt.Sprintf("marker %s at %d", a["result"], len(h.log)-1)
	case "fetch":
		var tps []TopicPartition
		if v := a["tps"]; v != "" {
			for _, tp := range strings.Split(v, ",") {
				topic, p, _ := strings.Cut(tp, "-")
				tps = append(tps, TopicPartition{Topic: topic, Partition: int32(num(p, 0))})
			}
		}
		fetched := h.m.FetchOffsets(a["g"], tps)
		if _, stable := a["stable"]; stable {
			fetched = h.m.FetchStableOffsets(a["g"], tps)
		}
		var parts []string
		for _, f := range fetched {
			if f.ErrorCode != 0 {
				parts = append(parts, fmt.Sprintf("%s-%d=%s", f.TP.Topic, f.TP.Partition, code(f.ErrorCode)))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s-%d=%d", f.TP.Topic, f.TP.Partition, f.Offset))
		}
		return "offsets: " + strings.Join(parts, " ")
	case "offset-delete":
		var tps []TopicPartition
		for _, tp := range strings.Split(a["tps"], ",") {
			topic, p, _ := strings.Cut(tp, "-")
			tps = append(tps, TopicPartition{Topic: topic, Partition: int32(num(p, 0))})
		}
		top, codes, eff := h.m.DeleteOffsets(h.now, a["g"], tps)
		var parts []string
		for _, c := range codes {
			parts = append(parts, code(c))
		}
		return fmt.Sprintf("offset-delete: %s [%s]", code(top), strings.Join(parts, " ")) + h.suffix(eff)
	case "delete":
		c, eff := h.m.Delete(h.now, a["g"])
		return "delete: " + code(c) + h.suffix(eff)
	case "describe":
		d := h.m.Describe(a["g"])
		s := fmt.Sprintf("describe: state=%s type=%s protocol=%s", d.State, d.ProtocolType, d.Protocol)
		for _, dm := range d.Members {
			s += fmt.Sprintf("\n  %s instance=%s client=%s metadata=%q assignment=%q", dm.ID, dm.InstanceID, dm.ClientID, dm.Metadata, dm.Assignment)
		}
		return s
	case "list":
		var parts []string
		for _, l := range h.m.List() {
			parts = append(parts, fmt.Sprintf("%s(%s,%s)", l.Group, l.ProtocolType, l.State))
		}
		return "groups: " + strings.Join(parts, " ")
	case "show":
		g := h.m.Group(a["g"])
		if g == nil {
			return "no group"
		}
		return g.String()
	case "unload":
		eff := h.m.Unload()
		return "unloaded" + h.suffix(eff)
	case "deadline":
		return fmt.Sprintf("next deadline: +%d", h.m.NextDeadline()-h.now)
	case "reload":
		eff := h.m.Unload()
		m, n, err := h.replay()
		if err != nil {
			return "replay error: " + err.Error()
		}
		h.m = m
		s := fmt.Sprintf("reloaded %d records", n)
		return s + h.suffix(eff)
	case "replay-check":
		// A new coordinator must see what the live one sees: the same
		// committed offsets and the same pending transactional ones.
		m, _, err := h.replay()
		if err != nil {
			return "replay error: " + err.Error()
		}
		var diffs []string
		ids := map[string]bool{}
		for _, id := range append(h.m.GroupIDs(), m.GroupIDs()...) {
			ids[id] = true
		}
		for _, id := range sortedKeys(ids) {
			live, replayed := offsetState(h.m.Group(id)), offsetState(m.Group(id))
			if live != replayed {
				diffs = append(diffs, fmt.Sprintf("%s live:%s\n%s replayed:%s", id, live, id, replayed))
			}
		}
		if len(diffs) > 0 {
			return "replay differs:\n" + strings.Join(diffs, "\n")
		}
		return "replay matches"
	}
	h.t.Fatalf("unknown command %q", cmd)
	return ""
}

// commitPartitions parses offsets=t-0=5,t-1=7 (and metadata=).
func commitPartitions(a map[string]string) []CommitPartition {
	var out []CommitPartition
	for _, tp := range strings.Split(a["offsets"], ",") {
		k, v, _ := strings.Cut(tp, "=")
		topic, p, _ := strings.Cut(k, "-")
		out = append(out, CommitPartition{Topic: topic, Partition: int32(num(p, 0)),
			Offset: num(v, 0), LeaderEpoch: -1, Metadata: a["metadata"]})
	}
	return out
}

// replay builds a Manager from the log as a new coordinator's load loop
// does: records of transactional batches through ReplayTxn, markers
// through ReplayMarker, the others through ReplayAt.
func (h *harness) replay() (*Manager, int, error) {
	m := h.newManager()
	n := 0
	for i, e := range h.log {
		var err error
		switch {
		case e.dropped:
			continue
		case e.marker != "":
			m.ReplayMarker(e.producer, e.marker == "commit")
		case e.txn != nil:
			err = m.ReplayTxn(e.txn.ProducerID, int64(i), e.rec.Key, e.rec.Value)
		default:
			err = m.ReplayAt(int64(i), e.rec.Key, e.rec.Value)
		}
		if err != nil {
			return nil, 0, err
		}
		n++
	}
	m.FinishLoad(h.now)
	return m, n, nil
}

// offsetState renders a group's committed and transactional offsets.
func offsetState(g *Group) string {
	if g == nil {
		return ""
	}
	var s string
	for _, tp := range sortedOffsets(g) {
		o := g.Offsets[tp]
		s += fmt.Sprintf(" %s-%d=%d/%d/%q", tp.Topic, tp.Partition, o.Offset, o.LeaderEpoch, o.Metadata)
	}
	return s + strings.ReplaceAll(g.pendingTxnString(), "\n ", "")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (h *harness) suffix(eff Effects) string {
	s := h.effects(eff)
	if s == "no effects" {
		return ""
	}
	return "\n" + s
}

// effects renders what the Manager asked for, appends its records to the
// log and commits them (or holds them, see hold).
func (h *harness) effects(eff Effects) string {
	var lines []string
	if eff.Txn != nil {
		lines = append(lines, fmt.Sprintf("transactional batch: producer=%d epoch=%d", eff.Txn.ProducerID, eff.Txn.ProducerEpoch))
	}
	for _, r := range eff.Records {
		k, err := DecodeKey(r.Key)
		if err != nil {
			lines = append(lines, "record: bad key: "+err.Error())
			continue
		}
		switch {
		case k.IsOffset && r.Value == nil:
			lines = append(lines, fmt.Sprintf("record: offset %s %s-%d tombstone", k.Group, k.Topic, k.Partition))
		case k.IsOffset:
			o, err := DecodeOffsetValue(r.Value)
			if err != nil {
				lines = append(lines, "record: bad offset value: "+err.Error())
				continue
			}
			s := fmt.Sprintf("record: offset %s %s-%d=%d", k.Group, k.Topic, k.Partition, o.Offset)
			if o.ExpireTimestamp >= 0 {
				s += fmt.Sprintf(" expire=+%d", o.ExpireTimestamp-h.now)
			}
			lines = append(lines, s)
		case r.Value == nil:
			lines = append(lines, fmt.Sprintf("record: group %s tombstone", k.Group))
		default:
			v, err := decodeGroupValue(r.Value)
			if err != nil {
				lines = append(lines, "record: bad group value: "+err.Error())
				continue
			}
			s := fmt.Sprintf("record: group %s gen=%d type=%s", k.Group, v.Generation, v.ProtocolType)
			if v.Protocol != nil {
				s += " protocol=" + *v.Protocol
			}
			if v.Leader != nil {
				s += " leader=" + *v.Leader
			}
			for _, mv := range v.Members {
				s += fmt.Sprintf(" [%s %q]", mv.MemberID, mv.Assignment)
			}
			lines = append(lines, s)
		}
	}
	first := len(h.log)
	for _, r := range eff.Records {
		h.log = append(h.log, logEntry{rec: r, txn: eff.Txn})
	}
	offset := int64(len(h.log) - 1)
	if h.hold != "" && len(eff.Records) > 0 {
		h.held[h.hold] = heldWrite{commits: eff.Commits, offset: offset, first: first}
		lines = append(lines, fmt.Sprintf("held %s at %d", h.hold, offset))
	} else {
		h.m.ApplyCommitsAt(eff.Commits, offset)
	}
	h.hold = ""
	joins := eff.Joins
	sort.SliceStable(joins, func(i, j int) bool { return fmt.Sprint(joins[i].Waiter) < fmt.Sprint(joins[j].Waiter) })
	for _, j := range joins {
		s := fmt.Sprintf("join %v: %s member=%s", j.Waiter, code(j.ErrorCode), j.MemberID)
		if j.ErrorCode == 0 {
			s += fmt.Sprintf(" gen=%d protocol=%s leader=%s", j.Generation, j.Protocol, j.Leader)
			if j.SkipAssignment {
				s += " skip-assignment"
			}
			for _, mm := range j.Members {
				s += fmt.Sprintf(" [%s %q]", mm.ID, mm.Metadata)
			}
		}
		lines = append(lines, s)
	}
	syncs := eff.Syncs
	sort.SliceStable(syncs, func(i, j int) bool { return fmt.Sprint(syncs[i].Waiter) < fmt.Sprint(syncs[j].Waiter) })
	for _, sr := range syncs {
		s := fmt.Sprintf("sync %v: %s", sr.Waiter, code(sr.ErrorCode))
		if sr.ErrorCode == 0 {
			s += fmt.Sprintf(" assignment=%q", sr.Assignment)
		}
		lines = append(lines, s)
	}
	if len(lines) == 0 {
		return "no effects"
	}
	return strings.Join(lines, "\n")
}
