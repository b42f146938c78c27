package group

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The records are written exactly as Kafka writes them: offset keys
// version 1, group keys version 2, offset values version 3 (1 with an
// explicit expiry), group values version 3.
func TestRecordsUseKafkasVersions(t *testing.T) {
	var ok kmsg.OffsetCommitKey
	if err := ok.ReadFrom(OffsetKey("g", "t", 3)); err != nil || ok.Version != 1 || ok.Group != "g" || ok.Topic != "t" || ok.Partition != 3 {
		t.Fatalf("offset key: %+v %v", ok, err)
	}
	var gk kmsg.GroupMetadataKey
	if err := gk.ReadFrom(GroupKey("g")); err != nil || gk.Version != 2 || gk.Group != "g" {
		t.Fatalf("group key: %+v %v", gk, err)
	}
	for _, tc := range []struct {
		o       Offset
		version int16
	}{
		{Offset{Offset: 5, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 10, ExpireTimestamp: -1}, 3},
		{Offset{Offset: 5, LeaderEpoch: -1, Metadata: "", CommitTimestamp: 10, ExpireTimestamp: 99}, 1},
	} {
		raw := OffsetValue(tc.o)
		if v := int16(raw[0])<<8 | int16(raw[1]); v != tc.version {
			t.Errorf("offset value version %d, want %d", v, tc.version)
		}
		got, err := DecodeOffsetValue(raw)
		if err != nil || got != tc.o {
			t.Errorf("round trip %+v: %+v %v", tc.o, got, err)
		}
	}
	g := newGroup("g", 0)
	g.ProtocolType, g.Protocol, g.Generation, g.Leader = "consumer", "range", 4, "m1"
	g.Members["m1"] = &Member{ID: "m1", InstanceID: "i1", ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 10000,
		RebalanceTimeoutMs: 20000, Protocols: []Protocol{{Name: "range", Metadata: []byte("sub")}}, Assignment: []byte("asg")}
	v, err := decodeGroupValue(groupValue(g, 77))
	if err != nil || v.Version != 3 || v.Generation != 4 || *v.Protocol != "range" || *v.Leader != "m1" || v.CurrentStateTimestamp != 77 ||
		len(v.Members) != 1 || *v.Members[0].InstanceID != "i1" || !bytes.Equal(v.Members[0].Subscription, []byte("sub")) ||
		!bytes.Equal(v.Members[0].Assignment, []byte("asg")) || v.Members[0].RebalanceTimeoutMillis != 20000 {
		t.Fatalf("group value: %+v %v", v, err)
	}
}

// FuzzReplay: whatever the bytes of a __consumer_offsets record (clients
// can produce to it), loading never panics.
func FuzzReplay(f *testing.F) {
	f.Add(OffsetKey("g", "t", 0), OffsetValue(Offset{Offset: 1, ExpireTimestamp: -1}))
	f.Add(GroupKey("g"), []byte(nil))
	g := newGroup("g", 0)
	g.ProtocolType = "consumer"
	f.Add(GroupKey("g"), groupValue(g, 0))
	f.Add([]byte{0, 2, 0}, []byte{0, 3, 0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		m := NewManager(DefaultConfig(), 0, func() string { return "x" })
		_ = m.Replay(key, value)
		_ = m.ReplayTxn(7, 1, key, value)
		m.FinishLoad(0)
		m.Tick(1 << 40)
		m.List()
		m.ReplayMarker(7, true)
		m.FetchStableOffsets("g", nil)
	})
}
