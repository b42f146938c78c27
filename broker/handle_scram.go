package broker

// AlterUserScramCredentials (key 51), v0: forwarded to the active
// controller (metadata.ClusterControl.AlterUserScramCredentials), as
// kafka-configs --alter --entity-type users --add-config
// 'SCRAM-SHA-256=[password=...]' expects of a KRaft broker. Transport
// errors: the code for every user.
//
// DescribeUserScramCredentials (key 50), v0: answered from this broker's
// image (metadata.DescribeUserScramCredentials): mechanisms and
// iterations, never salts or keys.
//
// SCRAM authentication itself: listener_sasl.go.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/raftlog"
)

func (b *Broker) handleAlterUserScramCredentials(ctx context.Context, m *kmsg.AlterUserSCRAMCredentialsRequest) network.Result {
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, msg string) kmsg.Response {
		resp := errorResponse(m, code).(*kmsg.AlterUserSCRAMCredentialsResponse)
		for i := range resp.Results {
			resp.Results[i].ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	})
}

func (b *Broker) handleDescribeUserScramCredentials(m *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	return metadata.DescribeUserScramCredentials(b.currentImage(), m)
}

// bootstrapRecords reads the records a controller was formatted with (keel
// format --add-scram) and checks that they apply to an empty image, so that
// a bad file stops the controller at startup rather than failing the
// cluster's first batch.
func bootstrapRecords(metadataDir string) ([]metadata.Record, error) {
	recs, err := raftlog.ReadBootstrapRecords(metadataDir)
	if err != nil {
		return nil, err
	}
	if _, _, err := metadata.EmptyImage().Apply(1, recs); err != nil {
		return nil, fmt.Errorf("bootstrap records in %s: %w", metadataDir, err)
	}
	return recs, nil
}
