package broker

// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
// v0–v3.
//
// Without an authorizer (authorizer.class.name unset) they are answered
// as a Kafka broker without one answers them: SECURITY_DISABLED, "No
// Authorizer is configured on the broker", for the request (DescribeAcls)
// or for each creation and each filter.
//
// With Kafka's StandardAuthorizer, the ACLs live in the metadata log:
// CreateAcls and DeleteAcls are forwarded to the active controller
// (metadata.ClusterControl.CreateAcls, DeleteAcls), which validates them
// as Kafka's AclControlManager does; DescribeAcls is answered from this
// broker's image (metadata.DescribeAcls). Each needs ALTER (create,
// delete) or DESCRIBE on the cluster (authz_apis.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// noAuthorizer is Kafka's message for an ACL request without an authorizer.
const noAuthorizer = "No Authorizer is configured on the broker"

func (b *Broker) handleDescribeAcls(m *kmsg.DescribeACLsRequest) kmsg.Response {
	return describeAcls(b.authorizer, b.currentImage(), m)
}

// describeAcls answers DescribeAcls from img, a broker's or a controller's
// (KIP-919): SECURITY_DISABLED without an authorizer.
func describeAcls(authorizer *metadata.Authorizer, img *metadata.Image, m *kmsg.DescribeACLsRequest) kmsg.Response {
	if authorizer == nil {
		resp := m.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		return resp
	}
	return metadata.DescribeAcls(img, m)
}

func (b *Broker) handleCreateAcls(ctx context.Context, m *kmsg.CreateACLsRequest) network.Result {
	if b.authorizer == nil {
		return respond(errorResponseWithMessage(m, kerr.SecurityDisabled.Code, noAuthorizer))
	}
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, msg string) kmsg.Response {
		return errorResponseWithMessage(m, code, msg)
	})
}

func (b *Broker) handleDeleteAcls(ctx context.Context, m *kmsg.DeleteACLsRequest) network.Result {
	if b.authorizer == nil {
		return respond(errorResponseWithMessage(m, kerr.SecurityDisabled.Code, noAuthorizer))
	}
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, msg string) kmsg.Response {
		return errorResponseWithMessage(m, code, msg)
	})
}

// errorResponseWithMessage answers every creation or filter of an ACL
// request with code and msg.
func errorResponseWithMessage(req kmsg.Request, code int16, msg string) kmsg.Response {
	resp := deniedResponse(req, code)
	switch r := resp.(type) {
	case *kmsg.CreateACLsResponse:
		for i := range r.Results {
			r.Results[i].ErrorMessage = kmsg.StringPtr(msg)
		}
	case *kmsg.DeleteACLsResponse:
		for i := range r.Results {
			r.Results[i].ErrorMessage = kmsg.StringPtr(msg)
		}
	}
	return resp
}
