package metadata

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/controller scripts")

// TestControllerScripts runs the data-driven controller scripts in
// testdata/controller. Each block is a command, a line "----" and the
// expected output, ended by a blank line; lines starting with '#' between
// blocks are comments. The harness commits every record batch a command
// produces (encoded and decoded, as the metadata log would carry it) and
// gives the new image to the controller, so a script shows the cluster's
// real evolution. `go test ./metadata -run TestControllerScripts -rewrite`
// regenerates the expected output.
func TestControllerScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/controller/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptBlock struct {
	comments []string
	cmd      string
	want     string
}

func parseScript(t *testing.T, path string) []scriptBlock {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []scriptBlock
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
		b := scriptBlock{comments: comments, cmd: l}
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
		blocks = append(blocks, scriptBlock{comments: comments})
	}
	return blocks
}

func runScript(t *testing.T, path string) {
	blocks := parseScript(t, path)
	h := newHarness(t)
	var rewritten strings.Builder
	for i, b := range blocks {
		for _, c := range b.comments {
			rewritten.WriteString(c + "\n")
		}
		if b.cmd == "" {
			continue
		}
		got := h.run(b.cmd)
		if got == "" {
			got = "ok"
		}
		rewritten.WriteString(b.cmd + "\n----\n" + got + "\n")
		if i < len(blocks)-1 {
			rewritten.WriteString("\n")
		}
		if !*rewrite && got != b.want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, b.cmd, got, b.want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness drives a ClusterControl the way the controller's event loop
// does, with a clock of its own and a seeded rng.
type harness struct {
	t            *testing.T
	cfg          ControllerConfig
	seed         uint64
	cc           *ClusterControl
	img          *Image
	start, now   time.Time
	topicNames   map[Uuid]string
	incarnations map[string]Uuid
}

func newHarness(t *testing.T) *harness {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	return &harness{
		t: t, cfg: DefaultControllerConfig(), seed: 1, img: EmptyImage(),
		start: start, now: start,
		topicNames: map[Uuid]string{}, incarnations: map[string]Uuid{},
	}
}

func (h *harness) controller() *ClusterControl {
	if h.cc == nil {
		h.cc = NewClusterControl(h.cfg, h.img, h.now, rand.New(rand.NewPCG(h.seed, 7)))
	}
	return h.cc
}

// args are a command's key=value (or bare flag) arguments, in order.
type args []struct{ k, v string }

func parseArgs(fields []string) args {
	var a args
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a = append(a, struct{ k, v string }{k, v})
	}
	return a
}

func (a args) get(k string) (string, bool) {
	for _, kv := range a {
		if kv.k == k {
			return kv.v, true
		}
	}
	return "", false
}

func (a args) all(k string) []string {
	var out []string
	for _, kv := range a {
		if kv.k == k {
			out = append(out, kv.v)
		}
	}
	return out
}

func (a args) has(k string) bool { _, ok := a.get(k); return ok }

func (h *harness) int(a args, k string, def int64) int64 {
	v, ok := a.get(k)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		h.t.Fatalf("%s=%s: %v", k, v, err)
	}
	return n
}

func (h *harness) ints(v string) []int32 {
	if v == "" {
		return []int32{}
	}
	var out []int32
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			h.t.Fatalf("list %q: %v", v, err)
		}
		out = append(out, int32(n))
	}
	return out
}

func (h *harness) duration(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		h.t.Fatalf("duration %q: %v", v, err)
	}
	return d
}

func (h *harness) incarnation(name string) Uuid {
	if u, ok := h.incarnations[name]; ok {
		return u
	}
	var u Uuid
	copy(u[:], fmt.Sprintf("%-16s", name))
	h.incarnations[name] = u
	return u
}

func (h *harness) incarnationName(u Uuid) string {
	for n, v := range h.incarnations {
		if v == u {
			return n
		}
	}
	return u.String()
}

func (h *harness) topicID(name string) Uuid {
	if t, ok := h.img.Topic(name); ok {
		return t.ID
	}
	for id, n := range h.topicNames {
		if n == name {
			return id
		}
	}
	var u Uuid
	copy(u[:], "unknown-topic-id")
	return u
}

// run executes one command and returns its output.
func (h *harness) run(line string) string {
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	if d, ok := a.get("advance"); ok && cmd != "tick" {
		h.now = h.now.Add(h.duration(d))
	}
	switch cmd {
	case "config":
		return h.config(a)
	case "register":
		return h.register(a)
	case "heartbeat":
		return h.heartbeat(a)
	case "contact":
		return h.contact(a)
	case "tick":
		if d, ok := a.get("advance"); ok {
			h.now = h.now.Add(h.duration(d))
		}
		return h.commit(h.controller().Tick(h.now)) + fmt.Sprintf("\nnow=%s", h.now.Sub(h.start))
	case "create-topic":
		return h.createTopic(a)
	case "delete-topic":
		return h.deleteTopic(a)
	case "create-partitions":
		return h.createPartitions(a)
	case "alter-partition":
		return h.alterPartition(a)
	case "elect":
		return h.elect(a)
	case "unregister":
		return h.unregister(a)
	case "alter-quotas":
		return h.alterQuotas(a)
	case "describe-quotas":
		return h.describeQuotas(a)
	case "alter-scram":
		return h.alterScram(a)
	case "describe-scram":
		return h.describeScram(a)
	case "create-acls":
		return h.createACLs(a)
	case "delete-acls":
		return h.deleteACLs(a)
	case "describe-acls":
		return h.describeACLs(a)
	case "authorize":
		return h.authorize(a)
	case "authorize-any":
		return h.authorizeAny(a)
	case "reassign":
		return h.reassign(a)
	case "list-reassignments":
		return h.listReassignments(a)
	case "alloc-pids":
		return h.allocPIDs(a)
	case "incr-alter-configs":
		return h.incrAlterConfigs(a)
	case "alter-configs":
		return h.alterConfigs(a)
	case "image":
		return h.describeImage()
	case "update-features":
		return h.updateFeatures(a)
	}
	h.t.Fatalf("unknown command %q", cmd)
	return ""
}

func (h *harness) config(a args) string {
	if h.cc != nil {
		h.t.Fatal("config must come before the first command that uses the controller")
	}
	for _, kv := range a {
		switch kv.k {
		case "seed":
			h.seed = uint64(h.int(a, kv.k, 1))
		case "cluster-id":
			h.cfg.ClusterID = kv.v
		case "partitions":
			h.cfg.NumPartitions = int32(h.int(a, kv.k, 1))
		case "rf":
			h.cfg.DefaultReplicationFactor = int16(h.int(a, kv.k, 1))
		case "unclean":
			h.cfg.UncleanLeaderElectionEnable = kv.v == "true"
		case "session-timeout":
			h.cfg.BrokerSessionTimeout = h.duration(kv.v)
		case "rebalance":
			h.cfg.AutoLeaderRebalanceEnable = kv.v == "true"
		case "imbalance-interval":
			h.cfg.LeaderImbalanceCheckInterval = h.duration(kv.v)
		case "max-elections":
			h.cfg.MaxElectionsPerImbalance = int(h.int(a, kv.k, 1))
		case "delete-enable":
			h.cfg.DeleteTopicEnable = kv.v == "true"
		case "max-records":
			h.cfg.MaxRecordsPerRequest = int(h.int(a, kv.k, 1))
		case "pid-block":
			h.cfg.ProducerIDBlockSize = h.int(a, kv.k, 1)
		default:
			h.t.Fatalf("unknown config %s", kv.k)
		}
	}
	return "ok"
}

// commit applies a batch as the metadata log would: encoded, decoded,
// applied at the next offset, and handed to the controller.
func (h *harness) commit(recs []Record) string {
	if len(recs) == 0 {
		return "no records"
	}
	var b strings.Builder
	b.WriteString("records:")
	for _, r := range recs {
		b.WriteString("\n  " + h.describeRecord(r))
	}
	data, err := EncodeBatch(recs)
	if err != nil {
		h.t.Fatalf("encode: %v", err)
	}
	decoded, err := DecodeBatch(data)
	if err != nil {
		h.t.Fatalf("decode: %v", err)
	}
	// Raft log indexes, hence metadata offsets, start at 1.
	next, _, err := h.img.Apply(max(h.img.Offset()+1, 1), decoded)
	if err != nil {
		h.t.Errorf("apply: %v", err)
		return b.String() + "\napply error: " + err.Error()
	}
	h.img = next
	h.controller().SetImage(next)
	return b.String()
}

func (h *harness) describeRecord(r Record) string {
	name := func(id Uuid) string {
		if n, ok := h.topicNames[id]; ok {
			return n
		}
		return id.String()
	}
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		s := fmt.Sprintf("register broker=%d epoch=%d incarnation=%s", r.BrokerID, r.BrokerEpoch, h.incarnationName(r.IncarnationID))
		if r.Rack != "" {
			s += " rack=" + r.Rack
		}
		if r.Fenced {
			s += " fenced"
		}
		return s
	case *FenceBrokerRecord:
		return fmt.Sprintf("fence broker=%d epoch=%d", r.ID, r.Epoch)
	case *ClientQuotaRecord:
		e, _ := QuotaEntityFromParts(r.Entity)
		if r.Remove {
			return fmt.Sprintf("client-quota %s remove %s", e, r.Key)
		}
		return fmt.Sprintf("client-quota %s %s=%s", e, r.Key, quotaValue(r.Value))
	case *UserScramCredentialRecord:
		return fmt.Sprintf("scram %s %s iterations=%d salt=%x", r.Name, ScramMechanismName(r.Mechanism), r.Iterations, r.Salt)
	case *RemoveUserScramCredentialRecord:
		return fmt.Sprintf("remove-scram %s %s", r.Name, ScramMechanismName(r.Mechanism))
	case *AccessControlEntryRecord:
		return "acl " + aclLine(aclFromRecord(r))
	case *RemoveAccessControlEntryRecord:
		if acl, ok := h.img.ACL(r.ID); ok {
			return "remove-acl " + aclLine(acl)
		}
		return "remove-acl " + r.ID.String()
	case *UnregisterBrokerRecord:
		return fmt.Sprintf("unregister broker=%d epoch=%d", r.BrokerID, r.BrokerEpoch)
	case *UnfenceBrokerRecord:
		return fmt.Sprintf("unfence broker=%d epoch=%d", r.ID, r.Epoch)
	case *BrokerRegistrationChangeRecord:
		return fmt.Sprintf("broker-change broker=%d epoch=%d fenced=%d controlled-shutdown=%d", r.BrokerID, r.BrokerEpoch, r.Fenced, r.InControlledShutdown)
	case *TopicRecord:
		h.topicNames[r.TopicID] = r.Name
		return "topic " + r.Name
	case *PartitionRecord:
		return fmt.Sprintf("partition %s-%d replicas=%v isr=%v leader=%d", name(r.TopicID), r.PartitionID, ids(r.Replicas), ids(r.ISR), r.Leader)
	case *PartitionChangeRecord:
		s := fmt.Sprintf("partition-change %s-%d", name(r.TopicID), r.PartitionID)
		if r.Leader != NoLeaderChange {
			s += fmt.Sprintf(" leader=%d", r.Leader)
		}
		if r.ISR != nil {
			s += " isr=" + ids(r.ISR)
		}
		if r.Replicas != nil {
			s += " replicas=" + ids(r.Replicas)
			if len(r.AddingReplicas) > 0 {
				s += " adding=" + ids(r.AddingReplicas)
			}
			if len(r.RemovingReplicas) > 0 {
				s += " removing=" + ids(r.RemovingReplicas)
			}
		}
		if r.ELR != nil {
			s += " elr=" + ids(r.ELR)
		}
		if r.LastKnownELR != nil {
			s += " last-known-elr=" + ids(r.LastKnownELR)
		}
		if _, p, ok := partitionOf(h.img, PartitionKey{r.TopicID, r.PartitionID}); ok && p.LeaderRecoveryState != r.LeaderRecoveryState {
			s += fmt.Sprintf(" leader-recovery-state=%s", lrsName(r.LeaderRecoveryState))
		}
		return s
	case *RemoveTopicRecord:
		return "remove-topic " + name(r.TopicID)
	case *ConfigRecord:
		res := fmt.Sprintf("topic:%s", r.ResourceName)
		if r.ResourceType == ConfigResourceGroup {
			res = "group:" + r.ResourceName
		}
		if r.ResourceType == ConfigResourceBroker {
			res = "broker:" + r.ResourceName
			if r.ResourceName == "" {
				res = "cluster"
			}
		}
		if r.Value == nil {
			return fmt.Sprintf("config %s %s deleted", res, r.Name)
		}
		return fmt.Sprintf("config %s %s=%s", res, r.Name, *r.Value)
	case *FeatureLevelRecord:
		return fmt.Sprintf("feature %s=%d", r.Name, r.FeatureLevel)
	case *ProducerIdsRecord:
		return fmt.Sprintf("producer-ids broker=%d epoch=%d next=%d", r.BrokerID, r.BrokerEpoch, r.NextProducerID)
	}
	return fmt.Sprintf("%T", r)
}

func lrsName(s int8) string {
	if s == LeaderRecovering {
		return "recovering"
	}
	return "recovered"
}

func ids(v []int32) string {
	parts := make([]string, len(v))
	for i, id := range v {
		parts[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func errName(code int16) string {
	if code == 0 {
		return "OK"
	}
	if e := kerr.TypedErrorForCode(code); e != nil {
		return e.Message
	}
	return fmt.Sprintf("ERROR_%d", code)
}

func errWithMessage(code int16, msg *string) string {
	s := errName(code)
	if msg != nil && code != 0 {
		s += fmt.Sprintf(" %q", *msg)
	}
	return s
}

// describeImage prints the image compactly: brokers, partitions, configs
// and how many partitions each broker leads.
func quotaValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (h *harness) describeImage() string {
	img := h.img
	lines := []string{fmt.Sprintf("offset=%d next-producer-id=%d", img.Offset(), img.NextProducerID())}
	for _, b := range img.Brokers() {
		s := fmt.Sprintf("broker %d epoch=%d", b.ID, b.Epoch)
		if b.Rack != "" {
			s += " rack=" + b.Rack
		}
		if b.Fenced {
			s += " fenced"
		} else {
			s += " unfenced"
		}
		if b.InControlledShutdown {
			s += " controlled-shutdown"
		}
		lines = append(lines, s)
	}
	leaders := map[int32]int{}
	for _, t := range img.Topics() {
		for i, p := range t.Partitions {
			s := fmt.Sprintf("%s-%d replicas=%s isr=%s leader=%d leader-epoch=%d partition-epoch=%d",
				t.Name, i, ids(p.Replicas), ids(p.ISR), p.Leader, p.LeaderEpoch, p.PartitionEpoch)
			if p.LeaderRecoveryState == LeaderRecovering {
				s += " recovering"
			}
			if len(p.ELR) > 0 || len(p.LastKnownELR) > 0 {
				s += " elr=" + ids(p.ELR) + " last-known-elr=" + ids(p.LastKnownELR)
			}
			lines = append(lines, s)
			leaders[p.Leader]++
		}
		for k, v := range sortedMap(img.Configs(ConfigResource{Type: ConfigResourceTopic, Name: t.Name})) {
			lines = append(lines, fmt.Sprintf("  %s=%s", k, v))
		}
	}
	for _, b := range img.Brokers() {
		for k, v := range sortedMap(img.Configs(ConfigResource{Type: ConfigResourceBroker, Name: strconv.Itoa(int(b.ID))})) {
			lines = append(lines, fmt.Sprintf("broker:%d %s=%s", b.ID, k, v))
		}
	}
	for k, v := range sortedMap(img.Configs(ConfigResource{Type: ConfigResourceBroker})) {
		lines = append(lines, fmt.Sprintf("cluster %s=%s", k, v))
	}
	var groups []string
	for res := range img.configs {
		if res.Type == ConfigResourceGroup {
			groups = append(groups, res.Name)
		}
	}
	slices.Sort(groups)
	for _, g := range groups {
		for k, v := range sortedMap(img.Configs(ConfigResource{Type: ConfigResourceGroup, Name: g})) {
			lines = append(lines, fmt.Sprintf("group:%s %s=%s", g, k, v))
		}
	}
	for _, e := range img.ClientQuotaEntities() {
		for _, key := range []string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaConnectionCreationRate} {
			if v, ok := img.ClientQuota(e, key); ok {
				lines = append(lines, fmt.Sprintf("quota %s %s=%s", e, key, quotaValue(v)))
			}
		}
	}
	for _, acl := range img.ACLs() {
		lines = append(lines, "acl "+aclLine(acl))
	}
	if len(leaders) > 0 {
		keys := make([]int32, 0, len(leaders))
		for k := range leaders {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%d:%d", k, leaders[k]))
		}
		lines = append(lines, "leaders "+strings.Join(parts, " "))
	}
	return strings.Join(lines, "\n")
}

// sortedMap iterates a map in key order.
func sortedMap(m map[string]string) func(func(string, string) bool) {
	return func(yield func(string, string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
