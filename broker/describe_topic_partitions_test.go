package broker

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

var cursorForm = regexp.MustCompile(`^(.*?)-(-?[0-9]+)$`)

// dtpPage is one DescribeTopicPartitions answer, flattened: its topics'
// errors, the partitions described as "topic-partition", the cursor.
type dtpPage struct {
	errs   map[string]int16
	parts  []string
	cursor string // "" for none, else "topic-partition"
	resp   *kmsg.DescribeTopicPartitionsResponse
}

func describeTopicPartitions(t *testing.T, rc *rawClient, limit int32, cursor string, topics ...string) dtpPage {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = limit
	for _, n := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = n
		req.Topics = append(req.Topics, rt)
	}
	if cursor != "" {
		// "topic-partition", the partition possibly negative ("b--1").
		m := cursorForm.FindStringSubmatch(cursor)
		if m == nil {
			t.Fatalf("cursor %q is not topic-partition", cursor)
		}
		c := kmsg.NewDescribeTopicPartitionsRequestCursor()
		p, _ := strconv.Atoi(m[2])
		c.Topic, c.Partition = m[1], int32(p)
		req.Cursor = &c
	}
	resp := roundTrip[*kmsg.DescribeTopicPartitionsResponse](rc, req)
	page := dtpPage{errs: map[string]int16{}, resp: resp}
	for _, rt := range resp.Topics {
		page.errs[*rt.Topic] = rt.ErrorCode
		for _, p := range rt.Partitions {
			page.parts = append(page.parts, fmt.Sprintf("%s-%d", *rt.Topic, p.Partition))
		}
	}
	if nc := resp.NextCursor; nc != nil {
		page.cursor = fmt.Sprintf("%s-%d", nc.Topic, nc.Partition)
	}
	return page
}

// DescribeTopicPartitions pages through topics as Kafka's handler does: in
// name order, at most the limit's partitions an answer, the cursor naming
// the first partition left out (partition 0 of the next topic when a page
// ends with a topic); named topics deduplicated, unknown and illegal ones
// answered with their error; a cursor outside the named list, or negative,
// INVALID_REQUEST. Every partition reads as Metadata v13 describes it.
func TestDescribeTopicPartitionsPages(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("a", 3, nil)
	c.createTopic("b", 2, nil)
	c.createTopic("c", 1, nil)
	rc := c.dialRaw(t)

	pages := []struct {
		limit  int32
		cursor string
		want   []string
		next   string
	}{
		{2, "", []string{"a-0", "a-1"}, "a-2"},
		{2, "a-2", []string{"a-2", "b-0"}, "b-1"},
		{2, "b-1", []string{"b-1", "c-0"}, ""},
		{3, "", []string{"a-0", "a-1", "a-2"}, "b-0"}, // a page that ends with a topic
		{100, "b-0", []string{"b-0", "b-1", "c-0"}, ""},
		{0, "", []string{"a-0"}, "a-1"},           // at least one partition
		{2, "a-7", []string{"b-0", "b-1"}, "c-0"}, // past the cursor topic's end: none of it
	}
	for _, p := range pages {
		got := describeTopicPartitions(t, rc, p.limit, p.cursor, "c", "b", "a", "b")
		if !slices.Equal(got.parts, p.want) || got.cursor != p.next {
			t.Errorf("limit %d from %q: %v next %q, want %v next %q", p.limit, p.cursor, got.parts, got.cursor, p.want, p.next)
		}
		for name, code := range got.errs {
			if code != 0 {
				t.Errorf("limit %d from %q: %s %v", p.limit, p.cursor, name, kerr.ErrorForCode(code))
			}
		}
	}

	// Every topic, two partitions a page: the walk sees each partition
	// of each topic once, in order, as Metadata lists them.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 13
	mresp := roundTrip[*kmsg.MetadataResponse](rc, md)
	slices.SortFunc(mresp.Topics, func(x, y kmsg.MetadataResponseTopic) int { return strings.Compare(*x.Topic, *y.Topic) })
	var want []string
	wantParts := map[string]kmsg.MetadataResponseTopicPartition{}
	wantIDs := map[string][16]byte{}
	for _, mt := range mresp.Topics {
		wantIDs[*mt.Topic] = mt.TopicID
		for _, p := range mt.Partitions {
			key := fmt.Sprintf("%s-%d", *mt.Topic, p.Partition)
			want = append(want, key)
			wantParts[key] = p
		}
	}
	var walked []string
	cursor := ""
	for range 100 {
		page := describeTopicPartitions(t, rc, 2, cursor)
		walked = append(walked, page.parts...)
		for _, rt := range page.resp.Topics {
			if rt.TopicID != wantIDs[*rt.Topic] || rt.IsInternal != isInternalTopic(*rt.Topic) || rt.AuthorizedOperations != topicAuthorizedOperations {
				t.Errorf("topic %s: id %x internal %v operations %d", *rt.Topic, rt.TopicID, rt.IsInternal, rt.AuthorizedOperations)
			}
			for _, p := range rt.Partitions {
				mp := wantParts[fmt.Sprintf("%s-%d", *rt.Topic, p.Partition)]
				if p.ErrorCode != 0 || p.LeaderID != mp.Leader || p.LeaderEpoch != mp.LeaderEpoch || !slices.Equal(p.Replicas, mp.Replicas) ||
					!slices.Equal(p.ISR, mp.ISR) || !slices.Equal(p.OfflineReplicas, mp.OfflineReplicas) ||
					p.EligibleLeaderReplicas == nil || len(p.EligibleLeaderReplicas) != 0 || p.LastKnownELR == nil || len(p.LastKnownELR) != 0 {
					t.Errorf("%s-%d: %+v, metadata %+v", *rt.Topic, p.Partition, p, mp)
				}
			}
		}
		if cursor = page.cursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(walked, want) {
		t.Errorf("walked %v, want %v", walked, want)
	}

	// Unknown and illegal names cost no partitions and are never created.
	got := describeTopicPartitions(t, rc, 2, "", "nope", "bad name!", "c")
	if got.errs["nope"] != kerr.UnknownTopicOrPartition.Code || got.errs["bad name!"] != kerr.InvalidTopicException.Code ||
		got.errs["c"] != 0 || !slices.Equal(got.parts, []string{"c-0"}) || got.cursor != "" {
		t.Errorf("unknown topics: %v %v %q", got.errs, got.parts, got.cursor)
	}
	if _, ok := c.meta.Image().Topic("nope"); ok {
		t.Error("DescribeTopicPartitions created a topic")
	}

	// A cursor the named list does not hold, or a negative partition.
	for _, cur := range []string{"x-0", "b--1"} {
		got := describeTopicPartitions(t, rc, 10, cur, "a", "b")
		if got.errs["a"] != kerr.InvalidRequest.Code || got.errs["b"] != kerr.InvalidRequest.Code || len(got.parts) != 0 {
			t.Errorf("cursor %s: %v %v", cur, got.errs, got.parts)
		}
	}
	// For every topic, the cursor's topic need not exist.
	if got := describeTopicPartitions(t, rc, 10, "bb-3"); got.parts[0] != "c-0" {
		t.Errorf("from bb-3: %v", got.parts)
	}

	// A partition whose leader is fenced: offline replica, as Metadata.
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("on2", []int32{2, testNodeID})
	b2, _ := c.meta.Image().Broker(2)
	c.meta.commit(&metadata.FenceBrokerRecord{ID: 2, Epoch: b2.Epoch})
	got = describeTopicPartitions(t, rc, 10, "", "on2")
	if p := got.resp.Topics[0].Partitions[0]; !slices.Equal(p.OfflineReplicas, []int32{2}) || p.ErrorCode != 0 {
		t.Errorf("fenced replica: %+v", p)
	}
}

// max.request.partition.size.limit caps what a request may ask for.
func TestDescribeTopicPartitionsBrokerLimit(t *testing.T) {
	c := newTestCluster(t, withConfig("max.request.partition.size.limit=2"))
	c.createTopic("a", 5, nil)
	rc := c.dialRaw(t)
	got := describeTopicPartitions(t, rc, 1000, "", "a")
	if !slices.Equal(got.parts, []string{"a-0", "a-1"}) || got.cursor != "a-2" {
		t.Errorf("%v next %q", got.parts, got.cursor)
	}
	if _, err := LoadConfig(nil, []string{"max.request.partition.size.limit=0"}); err == nil {
		t.Error("max.request.partition.size.limit=0 accepted")
	}
}

// With an authorizer, a named topic the principal may not describe is
// TOPIC_AUTHORIZATION_FAILED (without its id), and a request for every
// topic pages through only those it may: paging does not count the others.
func TestDescribeTopicPartitionsAuthorization(t *testing.T) {
	c := newTestCluster(t, withConfig("authorizer.class.name="+StandardAuthorizerClass))
	allow := func(typ kmsg.ACLResourceType, name string, op kmsg.ACLOperation) *metadata.AccessControlEntryRecord {
		return &metadata.AccessControlEntryRecord{ID: metadata.NewUuid(), ResourceType: int8(typ), ResourceName: name,
			PatternType: int8(kmsg.ACLResourcePatternTypeLiteral), Principal: "User:ANONYMOUS", Host: "*",
			Operation: int8(op), PermissionType: int8(kmsg.ACLPermissionTypeAllow)}
	}
	setup := allow(kmsg.ACLResourceTypeCluster, clusterName, kmsg.ACLOperationAll)
	c.meta.commit(setup)
	c.createTopic("a", 2, nil)
	c.createTopic("closed", 3, nil)
	c.createTopic("z", 2, nil)
	c.meta.commit(&metadata.RemoveAccessControlEntryRecord{ID: setup.ID},
		allow(kmsg.ACLResourceTypeTopic, "a", kmsg.ACLOperationAll), allow(kmsg.ACLResourceTypeTopic, "z", kmsg.ACLOperationDescribe))
	rc := c.dialRaw(t)

	got := describeTopicPartitions(t, rc, 3, "")
	if !slices.Equal(got.parts, []string{"a-0", "a-1", "z-0"}) || got.cursor != "z-1" || len(got.errs) != 2 {
		t.Errorf("every topic: %v next %q, topics %v", got.parts, got.cursor, got.errs)
	}
	ops := map[string]int32{}
	for _, rt := range got.resp.Topics {
		ops[*rt.Topic] = rt.AuthorizedOperations
	}
	if ops["a"] != topicAuthorizedOperations || ops["z"] != 1<<aclDescribe {
		t.Errorf("authorized operations: %v", ops)
	}

	got = describeTopicPartitions(t, rc, 10, "", "z", "closed", "a")
	if got.errs["closed"] != kerr.TopicAuthorizationFailed.Code || !slices.Equal(got.parts, []string{"a-0", "a-1", "z-0", "z-1"}) {
		t.Errorf("named: %v %v", got.errs, got.parts)
	}
	last := got.resp.Topics[len(got.resp.Topics)-1]
	if *last.Topic != "closed" || last.TopicID != ([16]byte{}) || len(last.Partitions) != 0 {
		t.Errorf("refused topic: %+v", last)
	}
}
