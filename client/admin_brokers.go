package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// UnregisterBroker removes a decommissioned broker's registration from the
// cluster's metadata (UnregisterBroker, KIP-631; kafka-cluster.sh
// unregister). A broker still running registers again.
func (a *Admin) UnregisterBroker(ctx context.Context, id int32) error {
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.UnregisterBrokerResponse)
		return errorWithMessage(resp.ErrorCode, resp.ErrorMessage)
	})
	if err != nil {
		return fmt.Errorf("unregister broker %d: %w", id, err)
	}
	return nil
}
