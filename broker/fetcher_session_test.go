package broker

import (
	"encoding/binary"
	"errors"
	"maps"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// scriptedLeader is a leader broker reduced to its Fetch API: each fetch
// it reads goes to the test on fetches, and the test's answer on answers
// goes back. It lets a test see exactly what the follower sends. A fetch
// whose connection the follower closed while it waited (a fetcher cutting
// its fetch short for a new partition) is not given to the test.
type scriptedLeader struct {
	ln      net.Listener
	fetches chan *scriptedFetch
	answers chan *kmsg.FetchResponse
	done    chan struct{} // closed when the test ends
}

// scriptedFetch is a fetch waiting for the test, on its connection.
type scriptedFetch struct {
	req  *kmsg.FetchRequest
	conn net.Conn
	skip chan struct{} // closed when the test passes it over: its connection is gone
}

// gone reports whether the follower closed the fetch's connection. The
// follower sends nothing more on a connection while a fetch is
// unanswered, so a short read sees only the close.
func (f *scriptedFetch) gone() bool {
	_ = f.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer f.conn.SetReadDeadline(time.Time{})
	var b [1]byte
	_, err := f.conn.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func newScriptedLeader(t *testing.T) *scriptedLeader {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &scriptedLeader{ln: ln, fetches: make(chan *scriptedFetch), answers: make(chan *kmsg.FetchResponse), done: make(chan struct{})}
	t.Cleanup(func() {
		close(l.done)
		ln.Close()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go l.serve(c)
		}
	}()
	return l
}

func (l *scriptedLeader) port() int { return l.ln.Addr().(*net.TCPAddr).Port }

func (l *scriptedLeader) serve(c net.Conn) {
	defer c.Close()
	for {
		frame, err := readTestFrame(c)
		if err != nil {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
		corr := frame[4:8]
		body := frame[10+int(binary.BigEndian.Uint16(frame[8:])):]
		if key != kmsg.Fetch.Int16() {
			return // only fetches are scripted
		}
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		if req.IsFlexible() {
			body = body[1:] // no header tags
		}
		if err := req.ReadFrom(body); err != nil {
			return
		}
		var resp *kmsg.FetchResponse
		f := &scriptedFetch{req: req, conn: c, skip: make(chan struct{})}
		select {
		case l.fetches <- f:
		case <-l.done:
			return
		}
		select {
		case resp = <-l.answers:
		case <-f.skip:
			return
		case <-l.done:
			return
		}
		resp.SetVersion(version)
		out := append([]byte{0, 0, 0, 0}, corr...)
		if resp.IsFlexible() {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// next returns the follower's next fetch, passing over those whose
// connection is gone.
func (l *scriptedLeader) next(t *testing.T) *kmsg.FetchRequest {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f := <-l.fetches:
			if f.gone() {
				close(f.skip)
				continue
			}
			return f.req
		case <-deadline:
			t.Fatal("no fetch from the follower")
			return nil
		}
	}
}

// fetchedPartitions lists a fetch's partitions as "index@offset".
func fetchedPartitions(req *kmsg.FetchRequest) []string {
	var out []string
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			out = append(out, strconv.Itoa(int(rp.Partition))+"@"+strconv.FormatInt(rp.FetchOffset, 10))
		}
	}
	return out
}

// answer builds a response to req for every partition it names, records
// holding batches for partition 0 if given.
func answer(req *kmsg.FetchRequest, sessionID int32, code int16, records []byte, hw int64) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID, resp.ErrorCode = sessionID, code
	if code != 0 {
		return resp
	}
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rp.Partition, hw, hw, 0
			if rp.Partition == 0 {
				p.RecordBatches = records
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// A follower fetches in a KIP-227 session: a full fetch first, then only
// the partitions whose fetch state changed; it starts over with a full
// fetch when the leader lost the session (FETCH_SESSION_ID_NOT_FOUND) or
// saw another epoch (INVALID_FETCH_SESSION_EPOCH, closing the old session).
func TestFollowerFetchesInASession(t *testing.T) {
	c := newTestCluster(t)
	leader := newScriptedLeader(t)
	c.meta.registerBroker(2, "127.0.0.1", leader.port())
	c.createAssigned("s", []int32{2, testNodeID}, []int32{2, testNodeID})

	full := leader.next(t)
	// Both partitions followed before the first answer, so that the next
	// fetch names the one the first may have missed.
	waitFor(t, "both partitions followed", 5*time.Second, func() bool {
		fs := c.broker.fetchers
		fs.mu.Lock()
		defer fs.mu.Unlock()
		n := 0
		for _, f := range fs.byKey {
			f.mu.Lock()
			n += len(f.parts)
			f.mu.Unlock()
		}
		return n == 2
	})
	if full.SessionID != 0 || full.SessionEpoch != 0 || len(fetchedPartitions(full)) == 0 {
		t.Fatalf("first fetch: session %d epoch %d partitions %v, want a full fetch (0, 0)",
			full.SessionID, full.SessionEpoch, fetchedPartitions(full))
	}
	if full.ReplicaState.ID != testNodeID {
		t.Fatalf("replica id %d, want %d", full.ReplicaState.ID, testNodeID)
	}
	leader.answers <- answer(full, 42, 0, nil, 0)
	epoch := int32(1)
	if first := fetchedPartitions(full); len(first) == 1 {
		// The other partition was followed after the first fetch left.
		other := map[string]string{"0@0": "1@0", "1@0": "0@0"}[first[0]]
		add := leader.next(t)
		switch got := fetchedPartitions(add); {
		case add.SessionID == 42 && add.SessionEpoch == 1 && len(got) == 1 && got[0] == other:
			// After the first fetch was answered: it joins the session
			// in an incremental fetch.
			leader.answers <- answer(add, 42, 0, nil, 0)
			epoch++
		case add.SessionID == 0 && add.SessionEpoch == 0 && len(got) == 2:
			// While the first fetch was in flight: the fetcher cut it
			// short for the new partition (errNewPartition) and started
			// over in full, naming both; the answer to the first went to
			// a closed connection.
			leader.answers <- answer(add, 42, 0, nil, 0)
		default:
			t.Fatalf("fetch adding the other partition: session %d epoch %d partitions %v, want (42, 1) [%s], or a new full fetch of both",
				add.SessionID, add.SessionEpoch, got, other)
		}
	}
	inc := leader.next(t)
	if inc.SessionID != 42 || inc.SessionEpoch != epoch || len(inc.Topics) != 0 || len(inc.ForgottenTopics) != 0 {
		t.Fatalf("next fetch: session %d epoch %d partitions %v forgotten %v, want an empty incremental fetch (42, %d)",
			inc.SessionID, inc.SessionEpoch, fetchedPartitions(inc), inc.ForgottenTopics, epoch)
	}
	leader.answers <- answer(inc, 0, kerr.FetchSessionIDNotFound.Code, nil, 0)

	full = leader.next(t)
	if full.SessionID != 0 || full.SessionEpoch != 0 || len(fetchedPartitions(full)) != 2 {
		t.Fatalf("after FETCH_SESSION_ID_NOT_FOUND: session %d epoch %d partitions %v, want a new full fetch",
			full.SessionID, full.SessionEpoch, fetchedPartitions(full))
	}
	leader.answers <- answer(full, 43, 0, withEpoch(buildBatch(t, 3, 10), 0), 3)
	inc = leader.next(t)
	if got := fetchedPartitions(inc); inc.SessionID != 43 || inc.SessionEpoch != 1 || len(got) != 1 || got[0] != "0@3" {
		t.Fatalf("after records for partition 0: session %d epoch %d partitions %v, want (43, 1) [0@3]", inc.SessionID, inc.SessionEpoch, got)
	}
	if p := c.broker.lookup(tp("s", 0)); p.log.LogEndOffset() != 3 || p.log.HighWatermark() != 3 {
		t.Fatalf("follower log end %d high watermark %d, want 3 and 3", p.log.LogEndOffset(), p.log.HighWatermark())
	}
	leader.answers <- answer(inc, 43, kerr.InvalidFetchSessionEpoch.Code, nil, 0)
	full = leader.next(t)
	if full.SessionID != 43 || full.SessionEpoch != 0 || len(fetchedPartitions(full)) != 2 {
		t.Fatalf("after INVALID_FETCH_SESSION_EPOCH: session %d epoch %d partitions %v, want a full fetch closing 43",
			full.SessionID, full.SessionEpoch, fetchedPartitions(full))
	}
	// A leader that keeps no session (its cache is full) gets full fetches.
	leader.answers <- answer(full, 0, 0, nil, 3)
	full = leader.next(t)
	if full.SessionID != 0 || full.SessionEpoch != 0 || len(fetchedPartitions(full)) != 2 {
		t.Fatalf("without a session: session %d epoch %d partitions %v, want a full fetch", full.SessionID, full.SessionEpoch, fetchedPartitions(full))
	}
}

// withEpoch stamps a leader epoch into a batch, as the leader's append does.
func withEpoch(batch []byte, epoch int32) []byte {
	binary.BigEndian.PutUint32(batch[12:], uint32(epoch))
	return batch
}

// A partition that joined a fetch session while its topic id was unknown
// here (a fetch that arrived before the metadata did) is answered once the
// topic is known, without being named again: the session looks the id up
// on every fetch, as Kafka's does.
func TestFetchSessionResolvesATopicIDLearnedLater(t *testing.T) {
	c := newTestCluster(t)
	id := metadata.NewUuid()
	rc := c.dialRaw(t)
	req := c.fetchRequest(15, 0, 0, 1<<20, fetchPartitionReq{"late", 0, 0, 1 << 20, -1})
	req.Topics[0].TopicID = id
	req.SessionID, req.SessionEpoch = 0, 0
	resp := roundTrip[*kmsg.FetchResponse](rc, req)
	if resp.SessionID == 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("full fetch of an unknown topic id: session %d, %+v", resp.SessionID, resp.Topics)
	}
	c.meta.commit(&metadata.TopicRecord{Name: "late", TopicID: id},
		&metadata.PartitionRecord{TopicID: id, PartitionID: 0, Replicas: []int32{testNodeID}, ISR: []int32{testNodeID}, Leader: testNodeID})
	waitFor(t, "the broker to lead late-0", 5*time.Second, func() bool { return c.broker.lookup(tp("late", 0)) != nil })
	inc := c.fetchRequest(15, 0, 0, 1<<20)
	inc.SessionID, inc.SessionEpoch = resp.SessionID, 1
	resp = roundTrip[*kmsg.FetchResponse](rc, inc)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("incremental fetch once the topic is known: %v %+v", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
}

// A fetcher left with no partitions (this node took over the leadership)
// stops at once, dropping the fetch it has in flight: a leader that
// stopped answering does not hold its goroutine and connection for
// replica.socket.timeout.ms.
func TestStoppedFetcherDropsItsFetch(t *testing.T) {
	c := newTestCluster(t)
	leader := newScriptedLeader(t)
	c.meta.registerBroker(2, "127.0.0.1", leader.port())
	c.createAssigned("s", []int32{2, testNodeID})

	var inFlight *scriptedFetch
	select {
	case inFlight = <-leader.fetches: // never answered
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch from the follower")
	}
	defer close(inFlight.skip)
	p := c.broker.lookup(tp("s", 0))
	c.meta.commit(&metadata.PartitionChangeRecord{TopicID: p.topicID, PartitionID: 0, ISR: []int32{testNodeID}, Leader: testNodeID})
	waitFor(t, "the unanswered fetch's connection closed", 5*time.Second, inFlight.gone)
	fs := c.broker.fetchers
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.byKey) != 0 {
		t.Fatalf("%d fetchers left, want none", len(fs.byKey))
	}
}

// num.replica.fetchers is a dynamic broker config, as in Kafka: raising it
// spreads the followed partitions over that many fetchers of their leader
// by Kafka's fetcher id, with their fetch state; lowering it gathers them
// back and stops the fetchers left empty.
func TestNumReplicaFetchersDynamic(t *testing.T) {
	c := newTestCluster(t)
	leader := newScriptedLeader(t)
	go func() { // never answered; the fetchers only have to exist
		for {
			select {
			case <-leader.fetches:
			case <-leader.done:
				return
			}
		}
	}()
	c.meta.registerBroker(2, "127.0.0.1", leader.port())
	var replicas [][]int32
	for range 8 {
		replicas = append(replicas, []int32{2, testNodeID})
	}
	c.createAssigned("spread", replicas...)
	fetchers := func() map[int32]int {
		fs := c.broker.fetchers
		fs.mu.Lock()
		defer fs.mu.Unlock()
		out := map[int32]int{}
		for key, f := range fs.byKey {
			f.mu.Lock()
			out[key.id] += len(f.parts)
			f.mu.Unlock()
		}
		return out
	}
	want := func(n int) map[int32]int {
		out := map[int32]int{}
		for p := range int32(8) {
			out[fetcherID(tp("spread", p), n)]++
		}
		return out
	}
	waitFor(t, "one fetcher for the 8 partitions", 5*time.Second, func() bool { return maps.Equal(fetchers(), want(1)) })
	alter := func(value *string) {
		t.Helper()
		if err := alterBrokerConfig(testCtx(t), t, c.admin(), "num.replica.fetchers", value); err != nil {
			t.Fatalf("alter: %v", err)
		}
	}
	alter(kmsg.StringPtr("3"))
	if len(want(3)) < 2 {
		t.Fatalf("the test wants the partitions spread: %v", want(3))
	}
	waitFor(t, "the partitions spread over 3 fetchers", 5*time.Second, func() bool { return maps.Equal(fetchers(), want(3)) })
	alter(nil)
	waitFor(t, "one fetcher again", 5*time.Second, func() bool { return maps.Equal(fetchers(), want(1)) })
}
