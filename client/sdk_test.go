package client_test

import (
	"testing"

	"github.com/keelstream/keel/client/clienttest"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestSDKSuiteAgainstKfake runs the SDK suite against franz-go's kfake, a
// third-party broker. integration/sdk_test.go runs the same suite against
// Keel.
func TestSDKSuiteAgainstKfake(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	clienttest.Run(t, clienttest.Target{Bootstrap: fake.ListenAddrs()})
}

// BenchmarkProduceVsKgo compares the SDK's producer with kgo's against the
// same kfake cluster (kfake's own speed caps both).
func BenchmarkProduceVsKgo(b *testing.B) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	clienttest.BenchmarkProduce(b, clienttest.Target{Bootstrap: fake.ListenAddrs()}, clienttest.DefaultBenchSettings())
}
