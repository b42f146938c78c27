package group

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// TestGroupScripts runs the data-driven scripts in testdata: each block is
// a command, a line "----" and the expected output, ended by a blank line;
// '#' lines between blocks are comments. The harness keeps a fake clock
// (advanced by "tick"), a log of every record the Manager asked to write
// (so "reload" can rebuild a Manager from it, as a new coordinator does),
// and applies pending commits at once, as if every append committed.
// `go test ./broker/group -run TestGroupScripts -rewrite` regenerates the
// expected output.
func TestGroupScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type block struct {
	comments []string
	cmd      string
	want     string
}

func parse(t *testing.T, path string) []block {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []block
	var comments []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case strings.HasPrefix(l, "#"):
			comments = append(comments, l)
			continue
		}
		b := block{comments: comments, cmd: l}
		comments = nil
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", path, i+1, l)
		}
		i += 2
		var out []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		b.want = strings.Join(out, "\n")
		blocks = append(blocks, b)
	}
	if len(comments) > 0 {
		blocks = append(blocks, block{comments: comments})
	}
	return blocks
}

type harness struct {
	t    *testing.T
	cfg  Config
	now  int64
	uuid int
	m    *Manager
	log  []Record
}

func (h *harness) newManager() *Manager {
	return NewManager(h.cfg, h.now, func() string { h.uuid++; return strconv.Itoa(h.uuid) })
}

func runScript(t *testing.T, path string) {
	blocks := parse(t, path)
	h := &harness{t: t, cfg: DefaultConfig(), now: 1000}
	h.cfg.MinSessionTimeoutMs = 100
	h.m = h.newManager()
	var out strings.Builder
	for _, b := range blocks {
		for _, c := range b.comments {
			out.WriteString(c + "\n")
		}
		if b.cmd == "" {
			continue
		}
		got := h.run(b.cmd)
		if !*rewrite && got != b.want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, b.cmd, got, b.want)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", b.cmd, got)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// args parses "k=v" words.
func args(words []string) map[string]string {
	out := map[string]string{}
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		out[k] = v
	}
	return out
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
	a := args(words[1:])
	switch words[0] {
	case "config":
		h.cfg.InitialRebalanceDelay = num(a["initial-delay"], h.cfg.InitialRebalanceDelay)
		h.cfg.MaxSize = int(num(a["max-size"], int64(h.cfg.MaxSize)))
		h.cfg.OffsetsRetentionMs = num(a["retention"], h.cfg.OffsetsRetentionMs)
		h.cfg.OffsetsRetentionCheckMs = num(a["retention-check"], h.cfg.OffsetsRetentionCheckMs)
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
			Generation: int32(num(a["gen"], -1)), RetentionMs: num(a["retention"], -1)}
		for _, tp := range strings.Split(a["offsets"], ",") {
			k, v, _ := strings.Cut(tp, "=")
			topic, p, _ := strings.Cut(k, "-")
			req.Partitions = append(req.Partitions, CommitPartition{Topic: topic, Partition: int32(num(p, 0)),
				Offset: num(v, 0), LeaderEpoch: -1, Metadata: a["metadata"]})
		}
		codes, eff := h.m.CommitOffsets(h.now, req)
		var parts []string
		for _, c := range codes {
			parts = append(parts, code(c))
		}
		return fmt.Sprintf("commit: [%s]", strings.Join(parts, " ")) + h.suffix(eff)
	case "fetch":
		var tps []TopicPartition
		if v := a["tps"]; v != "" {
			for _, tp := range strings.Split(v, ",") {
				topic, p, _ := strings.Cut(tp, "-")
				tps = append(tps, TopicPartition{Topic: topic, Partition: int32(num(p, 0))})
			}
		}
		var parts []string
		for _, f := range h.m.FetchOffsets(a["g"], tps) {
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
	case "deadline":
		return fmt.Sprintf("next deadline: +%d", h.m.NextDeadline()-h.now)
	case "reload":
		eff := h.m.Unload()
		m := h.newManager()
		for _, r := range h.log {
			if err := m.Replay(r.Key, r.Value); err != nil {
				return "replay error: " + err.Error()
			}
		}
		m.FinishLoad(h.now)
		h.m = m
		s := fmt.Sprintf("reloaded %d records", len(h.log))
		return s + h.suffix(eff)
	}
	h.t.Fatalf("unknown command %q", cmd)
	return ""
}

func (h *harness) suffix(eff Effects) string {
	s := h.effects(eff)
	if s == "no effects" {
		return ""
	}
	return "\n" + s
}

// effects renders (and "commits") what the Manager asked for.
func (h *harness) effects(eff Effects) string {
	var lines []string
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
	h.log = append(h.log, eff.Records...)
	h.m.ApplyCommits(eff.Commits)
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
