package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// batchAt is a one-record batch with the given timestamp.
func batchAt(t testing.TB, ts int64) []byte {
	t.Helper()
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	bb.Append(ts, []byte("k"), []byte("v"), nil)
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listOffsets asks one partition at one timestamp with a raw v11 request.
func listOffsets(t testing.TB, rc *rawClient, topic string, partition int32, ts int64, isolation int8, replicaID int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	return listOffsetsAt(t, rc, 11, topic, partition, ts, isolation, replicaID)
}

func listOffsetsAt(t testing.TB, rc *rawClient, version int16, topic string, partition int32, ts int64, isolation int8, replicaID int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.IsolationLevel, req.ReplicaID = version, isolation, replicaID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return roundTrip[*kmsg.ListOffsetsResponse](rc, req).Topics[0].Partitions[0]
}

func TestListOffsets(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("lo", 1, nil)
	for _, ts := range []int64{1000, 2000, 9000, 3000} {
		if r := c.produceRaw(t, "lo", 0, 1, time.Second, batchAt(t, ts)); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	epoch := c.broker.lookup(tp("lo", 0)).state.Load().leaderEpoch
	rc := c.dialRaw(t)
	for _, tc := range []struct {
		name       string
		ts         int64
		wantOffset int64
		wantTS     int64
	}{
		{"earliest", -2, 0, -1},
		{"latest", -1, 4, -1},
		{"max timestamp", -3, 2, 9000},
		{"earliest local", -4, 0, -1},
		{"latest tiered: none without tiered storage", -5, -1, -1},
		{"earliest pending upload: none without tiered storage", -6, -1, -1},
		{"by timestamp, exact", 2000, 1, 2000},
		{"by timestamp, between", 2500, 2, 9000},
		{"by timestamp, before all", 10, 0, 1000},
		{"by timestamp, after all", 10_000, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The special timestamps mean the same at every version, as in
			// Kafka's log (only clients gate them by version).
			for _, v := range []int16{11, 1} {
				r := listOffsetsAt(t, rc, v, "lo", 0, tc.ts, 0, -1)
				if r.ErrorCode != 0 || r.Offset != tc.wantOffset || r.Timestamp != tc.wantTS {
					t.Fatalf("v%d: got %v offset %d ts %d, want offset %d ts %d", v, kerr.ErrorForCode(r.ErrorCode), r.Offset, r.Timestamp, tc.wantOffset, tc.wantTS)
				}
				if v >= 4 && r.Offset >= 0 && r.LeaderEpoch != epoch {
					t.Fatalf("v%d: leader epoch %d, want %d", v, r.LeaderEpoch, epoch)
				}
			}
		})
	}
	if r := listOffsets(t, rc, "nope", 0, -1, 0, -1); r.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// A partition asked twice is INVALID_REQUEST.
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 10
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo"
	for i := 0; i < 2; i++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for _, p := range roundTrip[*kmsg.ListOffsetsResponse](rc, req).Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate partition: %v", kerr.ErrorForCode(p.ErrorCode))
		}
	}

	// The same through kadm.
	adm := c.admin()
	ctx := testCtx(t)
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, 1500, "lo")
	if err != nil {
		t.Fatal(err)
	}
	maxTS, err := adm.ListMaxTimestampOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	get := func(l kadm.ListedOffsets) kadm.ListedOffset { o, _ := l.Lookup("lo", 0); return o }
	if get(start).Offset != 0 || get(end).Offset != 4 || get(after).Offset != 1 || get(maxTS).Offset != 2 || get(maxTS).Timestamp != 9000 {
		t.Fatalf("kadm: start %+v end %+v after %+v max %+v", get(start), get(end), get(after), get(maxTS))
	}
}

// TestListOffsetsLatestIsTheHighWatermarkForConsumers: with a silent
// follower in the ISR, latest is the high watermark for consumers and the
// log end offset for replicas; timestamps at or past the high watermark are
// hidden from consumers.
func TestListOffsetsLatestIsTheHighWatermarkForConsumers(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("r", []int32{testNodeID, 2})
	c.produceRaw(t, "r", 0, 1, time.Second, batchAt(t, 5000))
	rc := c.dialRaw(t)
	for _, tc := range []struct {
		name      string
		ts        int64
		isolation int8
		replica   int32
		want      int64
	}{
		{"consumer latest", -1, 0, -1, 0},
		{"read_committed latest", -1, 1, -1, 0},
		{"follower latest", -1, 0, 2, 1},
		{"debug latest", -1, 0, -2, 1},
		{"consumer by timestamp", 100, 0, -1, -1},
		{"follower by timestamp", 100, 0, 2, 0},
	} {
		if r := listOffsets(t, rc, "r", 0, tc.ts, tc.isolation, tc.replica); r.ErrorCode != 0 || r.Offset != tc.want {
			t.Fatalf("%s: %v offset %d, want %d", tc.name, kerr.ErrorForCode(r.ErrorCode), r.Offset, tc.want)
		}
	}
}

func TestDeleteRecords(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("dr", 1, nil)
	c.createTopic("compacted", 1, map[string]*string{"cleanup.policy": kmsgStr("compact")})
	c.produceN(t, "dr", 0, 10, 10)
	adm := c.admin()
	ctx := testCtx(t)

	del := func(topic string, offset int64) kadm.DeleteRecordsResponse {
		t.Helper()
		var os kadm.Offsets
		os.AddOffset(topic, 0, offset, -1)
		resp, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resp.Lookup(topic, 0)
		return r
	}
	if r := del("dr", 4); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete before 4: %v low %d", r.Err, r.LowWatermark)
	}
	if r := del("dr", 11); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete above the high watermark: %v", r.Err)
	}
	if r := del("dr", 2); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete below the start: %v low %d", r.Err, r.LowWatermark)
	}
	if r := del("compacted", 0); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("delete on a compacted topic: %v", r.Err)
	}
	start, err := c.admin().ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("dr", 0); o.Offset != 4 {
		t.Fatalf("start offset %d after delete", o.Offset)
	}
	rc := c.dialRaw(t)
	resp := roundTrip[*kmsg.FetchResponse](rc, c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"dr", 0, 2, 1 << 20, -1}))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the start: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// -1 deletes everything below the high watermark.
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version, req.TimeoutMillis = 2, 1000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "dr"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if p := roundTrip[*kmsg.DeleteRecordsResponse](rc, req).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 10 {
		t.Fatalf("delete to the high watermark: %v low %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("e", 1, nil)
	c.produceN(t, "e", 0, 3, 10)
	epoch := c.broker.lookup(tp("e", 0)).state.Load().leaderEpoch
	adm := c.admin()
	var req kadm.OffsetForLeaderEpochRequest
	req.Add("e", 0, epoch)
	resp, err := adm.OffsetForLeaderEpoch(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp["e"][0]; r.Err != nil || r.LeaderEpoch != epoch || r.EndOffset != 3 {
		t.Fatalf("current epoch: %+v", r)
	}
	rc := c.dialRaw(t)
	ask := func(version int16, requested, current int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version, r.ReplicaID = version, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "e"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = requested, current
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return roundTrip[*kmsg.OffsetForLeaderEpochResponse](rc, r).Topics[0].Partitions[0]
	}
	if r := ask(4, epoch+1, -1); r.ErrorCode != 0 || r.LeaderEpoch != -1 || r.EndOffset != -1 {
		t.Fatalf("future epoch: %+v", r)
	}
	if r := ask(4, epoch, epoch+1); r.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer current epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := ask(2, epoch, -1); r.ErrorCode != 0 || r.EndOffset != 3 {
		t.Fatalf("v2: %+v", r)
	}
}

func TestDescribeLogDirs(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("ld", 2, nil)
	c.produceN(t, "ld", 1, 5, 100)
	dirs, err := c.admin().DescribeBrokerLogDirs(testCtx(t), testNodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := dirs[absDir(c.dir)]
	if !ok || d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 {
		t.Fatalf("dirs %+v", dirs)
	}
	p0, p1 := d.Topics["ld"][0], d.Topics["ld"][1]
	if p0.Size != 0 || p1.Size <= 500 || p1.OffsetLag != 0 {
		t.Fatalf("sizes %d %d lag %d", p0.Size, p1.Size, p1.OffsetLag)
	}
}
