package txn

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/broker/internal/scripttest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// TestTxnScripts runs the data-driven scripts in testdata: each block is a
// command, a line "----" and the expected output, ended by a blank line;
// '#' lines between blocks are comments. The harness keeps a fake clock
// (advanced by "tick"), the appends the Manager asked for until "written"
// reports them (committed ones go to a log that "reload" replays into a
// new Manager, as a new coordinator does), and the marker jobs until
// "markers-done". `go test ./broker/txn -run TestTxnScripts -rewrite`
// regenerates the expected output.
func TestTxnScripts(t *testing.T) {
	scripttest.Run(t, *rewrite, func(t *testing.T) func(string) string { return newHarness(t).run })
}

// pendingAppend is an append the harness has not reported yet.
type pendingAppend struct {
	token   WriteToken
	records []Record
}

type harness struct {
	t         *testing.T
	cfg       Config
	epoch     int32
	now       int64
	m         *Manager
	log       []Record
	appends   []pendingAppend
	jobs      []MarkerJob
	seenJobs  map[uint64]MarkerJob
	nextPID   int64
	allocFail bool
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, cfg: DefaultConfig(), now: 1000, nextPID: 1000, seenJobs: map[uint64]MarkerJob{}}
	h.m = NewManager(h.cfg, h.epoch)
	h.m.FinishLoad(h.now)
	return h
}

func (h *harness) alloc() (int64, error) {
	if h.allocFail {
		return 0, fmt.Errorf("no producer id block yet")
	}
	h.nextPID++
	return h.nextPID, nil
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

// codeByName is the Kafka error code of a name such as NOT_ENOUGH_REPLICAS.
func codeByName(name string) int16 {
	if name == "" || name == "OK" {
		return 0
	}
	for c := int16(1); c < 200; c++ {
		if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok && e.Message == name {
			return c
		}
	}
	panic("unknown error name " + name)
}

func parseTPs(s string) []TopicPartition {
	var out []TopicPartition
	for _, w := range strings.Split(s, ",") {
		if w == "" {
			continue
		}
		i := strings.LastIndex(w, "-")
		out = append(out, TopicPartition{Topic: w[:i], Partition: int32(num(w[i+1:], 0))})
	}
	return out
}

func fmtTPs(tps []TopicPartition) string {
	var parts []string
	for _, tp := range tps {
		parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (h *harness) run(cmd string) string {
	words := strings.Fields(cmd)
	a := scripttest.Args(words[1:])
	switch words[0] {
	case "config":
		h.cfg.MaxTimeoutMs = num(a["max-timeout"], h.cfg.MaxTimeoutMs)
		h.cfg.IDExpirationMs = num(a["expiration"], h.cfg.IDExpirationMs)
		h.cfg.AbortCheckIntervalMs = num(a["abort-check"], h.cfg.AbortCheckIntervalMs)
		h.cfg.ExpireCheckIntervalMs = num(a["expire-check"], h.cfg.ExpireCheckIntervalMs)
		h.m = NewManager(h.cfg, h.epoch)
		h.m.FinishLoad(h.now)
		h.log, h.appends, h.jobs = nil, nil, nil
		return "ok"
	case "alloc":
		h.allocFail = a["fail"] == "true"
		return "ok"
	case "init":
		req := InitProducerIDRequest{Waiter: a["waiter"], TransactionalID: a["id"], TimeoutMs: int32(num(a["timeout"], 60000)),
			ProducerID: num(a["pid"], -1), ProducerEpoch: int16(num(a["epoch"], -1))}
		return h.effects(h.m.InitProducerID(h.now, req, h.alloc))
	case "add":
		req := AddPartitionsRequest{Waiter: a["waiter"], TransactionalID: a["id"], ProducerID: num(a["pid"], -1),
			ProducerEpoch: int16(num(a["epoch"], -1)), Partitions: parseTPs(a["tps"]), TV2: a["tv2"] == "true"}
		return h.effects(h.m.AddPartitions(h.now, req))
	case "verify":
		tps := parseTPs(a["tps"])
		codes := h.m.VerifyPartitions(a["id"], num(a["pid"], -1), int16(num(a["epoch"], -1)), tps)
		var parts []string
		for i, tp := range tps {
			parts = append(parts, fmt.Sprintf("%s-%d: %s", tp.Topic, tp.Partition, code(codes[i])))
		}
		return strings.Join(parts, "\n")
	case "end":
		req := EndTxnRequest{Waiter: a["waiter"], TransactionalID: a["id"], ProducerID: num(a["pid"], -1),
			ProducerEpoch: int16(num(a["epoch"], -1)), Commit: a["commit"] == "true", TV2: a["tv2"] == "true", Alloc: h.alloc}
		return h.effects(h.m.EndTxn(h.now, req))
	case "written":
		if len(h.appends) == 0 {
			return "no append in flight"
		}
		i := 0
		if tok, ok := a["token"]; ok {
			i = slices.IndexFunc(h.appends, func(p pendingAppend) bool { return p.token == WriteToken(num(tok, 0)) })
			if i < 0 {
				return "no such append"
			}
		}
		p := h.appends[i]
		h.appends = slices.Delete(h.appends, i, i+1)
		c := codeByName(a["err"])
		if c == 0 {
			h.log = append(h.log, p.records...)
		}
		return h.effects(h.m.Written(h.now, p.token, c))
	case "markers-done":
		// By id: the oldest job of the id not reported yet; by job=N:
		// any job seen, even one already reported.
		if n, ok := a["job"]; ok {
			j, ok := h.seenJobs[uint64(num(n, 0))]
			if !ok {
				return "no such marker job"
			}
			return h.effects(h.m.MarkersWritten(h.now, j))
		}
		i := slices.IndexFunc(h.jobs, func(j MarkerJob) bool { return j.TransactionalID == a["id"] })
		if i < 0 {
			return "no marker job for " + a["id"]
		}
		j := h.jobs[i]
		h.jobs = slices.Delete(h.jobs, i, i+1)
		return h.effects(h.m.MarkersWritten(h.now, j))
	case "tick":
		h.now += num(a["ms"], 0)
		return h.effects(h.m.Tick(h.now))
	case "deadline":
		d := h.m.NextDeadline()
		if d < 0 {
			return "no deadline"
		}
		return fmt.Sprintf("next deadline: +%d", d-h.now)
	case "describe":
		var lines []string
		for _, d := range h.m.Describe(strings.Split(a["ids"], ",")) {
			if d.ErrorCode != 0 {
				lines = append(lines, fmt.Sprintf("%s: %s", d.TransactionalID, code(d.ErrorCode)))
				continue
			}
			lines = append(lines, fmt.Sprintf("%s: %s pid=%d epoch=%d timeout=%d start=%d tps=%s", d.TransactionalID,
				d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMs, d.StartTimestamp, fmtTPs(d.Partitions)))
		}
		return strings.Join(lines, "\n")
	case "list":
		f := ListFilter{DurationFilterMs: num(a["duration"], -1)}
		if s := a["states"]; s != "" {
			f.States = strings.Split(s, ",")
		}
		if s := a["pids"]; s != "" {
			for _, p := range strings.Split(s, ",") {
				f.ProducerIDs = append(f.ProducerIDs, num(p, 0))
			}
		}
		if s := a["pattern"]; s != "" {
			f.IDPattern = regexp.MustCompile(s)
		}
		txns, unknown := h.m.List(h.now, f)
		var parts []string
		for _, l := range txns {
			parts = append(parts, fmt.Sprintf("%s(%d,%s)", l.TransactionalID, l.ProducerID, l.State))
		}
		s := "txns: " + strings.Join(parts, " ")
		if len(unknown) > 0 {
			s += "\nunknown states: " + strings.Join(unknown, " ")
		}
		return s
	case "show":
		return h.show()
	case "reload":
		eff := h.m.Unload()
		h.epoch = int32(num(a["epoch"], int64(h.epoch)+1))
		s := fmt.Sprintf("reloaded %d records at coordinator epoch %d", len(h.log), h.epoch) + h.suffix(eff)
		h.appends, h.jobs = nil, nil
		h.m = NewManager(h.cfg, h.epoch)
		for _, r := range h.log {
			if err := h.m.Replay(r.Key, r.Value); err != nil {
				return "replay error: " + err.Error()
			}
		}
		return s + h.suffix(h.m.FinishLoad(h.now))
	case "unload":
		return h.effects(h.m.Unload())
	}
	h.t.Fatalf("unknown command %q", cmd)
	return ""
}

// show renders every id with the in-memory state Describe does not show.
func (h *harness) show() string {
	var lines []string
	for _, id := range h.m.sortedIDs() {
		t := h.m.txns[id]
		s := fmt.Sprintf("%s: %s pid=%d epoch=%d last-pid=%d last-epoch=%d start=%d update=%d tps=%s", id, t.state,
			t.producerID, t.producerEpoch, t.lastProducerID, t.lastProducerEpoch, t.startTimestamp, t.lastUpdateTimestamp,
			fmtTPs(t.sortedPartitions()))
		if t.pending != nil {
			s += " pending"
		}
		if t.markerJob != 0 {
			s += fmt.Sprintf(" markers=%d", t.markerJob)
		}
		if t.retryCompleteAt != 0 {
			s += fmt.Sprintf(" retry-complete=+%d", t.retryCompleteAt-h.now)
		}
		if t.failedEpochFence {
			s += " failed-fence"
		}
		s += tv2Fields(t.metadata)
		lines = append(lines, s)
	}
	if len(lines) == 0 {
		return "no transactional ids"
	}
	return strings.Join(lines, "\n")
}

// tv2Fields renders what a transaction version 2 id adds (nothing for
// others, whose records are version 0).
func tv2Fields(md metadata) string {
	if !md.tv2 {
		return ""
	}
	s := fmt.Sprintf(" tv2 prev-pid=%d", md.lastProducerID)
	if md.nextProducerID != noProducerID {
		s += fmt.Sprintf(" next-pid=%d", md.nextProducerID)
	}
	return s
}

func (h *harness) suffix(eff Effects) string {
	s := h.effects(eff)
	if s == "no effects" {
		return ""
	}
	return "\n" + s
}

// effects renders what the Manager asked for and keeps its appends and
// marker jobs.
func (h *harness) effects(eff Effects) string {
	var lines []string
	if len(eff.Records) > 0 {
		lines = append(lines, fmt.Sprintf("append #%d:", eff.Token))
		h.appends = append(h.appends, pendingAppend{token: eff.Token, records: eff.Records})
	}
	for _, r := range eff.Records {
		id, err := DecodeKey(r.Key)
		if err != nil {
			lines = append(lines, "  bad key: "+err.Error())
			continue
		}
		if r.Value == nil {
			lines = append(lines, fmt.Sprintf("  %s tombstone", id))
			continue
		}
		md, err := decodeValue(r.Value)
		if err != nil {
			lines = append(lines, "  bad value: "+err.Error())
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s %s pid=%d epoch=%d timeout=%d start=%d update=%d tps=%s", id, md.state,
			md.producerID, md.producerEpoch, md.timeoutMs, md.startTimestamp, md.lastUpdateTimestamp, fmtTPs(md.sortedPartitions()))+
			tv2Fields(md))
	}
	for _, r := range eff.Replies {
		s := fmt.Sprintf("reply %v: %s", r.Waiter, code(r.ErrorCode))
		if r.ProducerID != -1 || r.ProducerEpoch != -1 {
			s += fmt.Sprintf(" pid=%d epoch=%d", r.ProducerID, r.ProducerEpoch)
		}
		lines = append(lines, s)
	}
	for _, j := range eff.Markers {
		kind := "ABORT"
		if j.Commit {
			kind = "COMMIT"
		}
		lines = append(lines, fmt.Sprintf("markers #%d: %s %s pid=%d epoch=%d coordinator-epoch=%d tps=%s", j.ID, j.TransactionalID,
			kind, j.ProducerID, j.ProducerEpoch, j.CoordinatorEpoch, fmtTPs(j.Partitions)))
		h.jobs = append(h.jobs, j)
		h.seenJobs[j.ID] = j
	}
	if len(lines) == 0 {
		return "no effects"
	}
	return strings.Join(lines, "\n")
}
