package client

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ListConfigResources against franz-go's reference broker: every type, one
// type, and brokers of Kafka 4.0 (the API's v0, client metrics only) and
// 3.6 (no such API), where asking for more than client metrics fails with
// ErrUnsupportedRequest instead of silently listing less.
func TestAdminListConfigResources(t *testing.T) {
	ctx := testCtx(t)
	open := func(opts ...kfake.Opt) *Admin {
		t.Helper()
		fake := newFake(t, append([]kfake.Opt{kfake.NumBrokers(2), kfake.SeedTopics(1, "a", "b")}, opts...)...)
		adm, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { adm.Close() })
		return adm
	}
	sorted := func(rs []ConfigResource) []ConfigResource {
		slices.SortFunc(rs, func(x, y ConfigResource) int {
			return cmp.Or(cmp.Compare(x.Type, y.Type), strings.Compare(x.Name, y.Name))
		})
		return rs
	}

	adm := open()
	all, err := adm.ListConfigResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []ConfigResource{{TopicConfig, "a"}, {TopicConfig, "b"}, {BrokerConfig, "0"}, {BrokerConfig, "1"},
		{BrokerLoggerConfig, "0"}, {BrokerLoggerConfig, "1"}}
	if got := sorted(all); !slices.Equal(got, want) {
		t.Fatalf("every type: %v, want %v", got, want)
	}
	topics, err := adm.ListConfigResources(ctx, TopicConfig)
	if err != nil {
		t.Fatal(err)
	}
	if got := sorted(topics); !slices.Equal(got, want[:2]) {
		t.Fatalf("topics: %v", got)
	}

	old := open(kfake.MaxVersions(kversion.V4_0_0()))
	if _, err := old.ListConfigResources(ctx, GroupConfig); !errors.Is(err, ErrUnsupportedRequest) {
		t.Fatalf("groups from Kafka 4.0: %v, want ErrUnsupportedRequest", err)
	}
	if _, err := old.ListConfigResources(ctx); !errors.Is(err, ErrUnsupportedRequest) {
		t.Fatalf("every type from Kafka 4.0: %v, want ErrUnsupportedRequest", err)
	}
	if cm, err := old.ListConfigResources(ctx, ClientMetricsConfig); err != nil || len(cm) != 0 {
		t.Fatalf("client metrics from Kafka 4.0: %v %v", cm, err)
	}
	older := open(kfake.MaxVersions(kversion.V3_6_0()))
	if _, err := older.ListConfigResources(ctx, TopicConfig); !errors.Is(err, ErrUnsupportedRequest) {
		t.Fatalf("from Kafka 3.6: %v, want ErrUnsupportedRequest", err)
	}
}
