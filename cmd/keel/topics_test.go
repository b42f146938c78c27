package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/keelstream/keel/client"
)

// --topic is a regular expression the whole name must match, its commas
// alternatives, as kafka-topics.sh's IncludeList reads it.
func TestMatchTopics(t *testing.T) {
	names := []string{"__consumer_offsets", "orders", "orders.v1", "ordersXv1", "payments"}
	for _, tc := range []struct {
		patterns []string
		want     []string
	}{
		{[]string{"orders"}, []string{"orders"}},
		{[]string{"orders.v1"}, []string{"orders.v1", "ordersXv1"}},
		{[]string{`orders\.v1`}, []string{"orders.v1"}},
		{[]string{"orders.*"}, []string{"orders", "orders.v1", "ordersXv1"}},
		{[]string{"payments,orders"}, []string{"orders", "payments"}},
		{[]string{"pay.*", "__.*"}, []string{"__consumer_offsets", "payments"}},
	} {
		if got, err := matchTopics(names, tc.patterns, false); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.patterns, got, err, tc.want)
		}
	}
	if _, err := matchTopics(names, []string{"orders", "nope.*"}, false); !errors.Is(err, client.ErrUnknownTopicOrPartition) || !strings.Contains(err.Error(), "topic 'nope.*' does not exist as expected") {
		t.Errorf("a pattern matching nothing: %v", err)
	}
	if got, err := matchTopics(names, []string{"nope.*"}, true); err != nil || len(got) != 0 {
		t.Errorf("quiet: %q, %v", got, err)
	}
	if _, err := matchTopics(names, []string{"(open"}, false); err == nil {
		t.Error("a bad expression accepted")
	}
}

// --replica-assignment: partitions by ',', brokers by ':', with Kafka's
// checks.
func TestParseReplicaAssignment(t *testing.T) {
	got, err := parseReplicaAssignment("1:2:3, 2:3:1,3:1:2")
	if err != nil || len(got) != 3 || !slices.Equal(got[1], []int32{2, 3, 1}) {
		t.Fatalf("%v, %v", got, err)
	}
	for v, want := range map[string]string{
		"1:2,3":         "different replication factor",
		"1:1":           "duplicate entries: 1",
		"1:x":           "is not a number",
		"1,,2":          "is not a number",
		"1:99999999999": "is not a number",
	} {
		if _, err := parseReplicaAssignment(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", v, err, want)
		}
	}
}
