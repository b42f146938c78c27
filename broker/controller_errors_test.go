package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every API the controller listener serves can be answered NOT_CONTROLLER
// in a shape the requester recognises (so it tries the next voter), and
// an answer with another error is not mistaken for it.
func TestNotControllerAnswersAreRecognised(t *testing.T) {
	for _, k := range controllerAPIs {
		req := kmsg.RequestForKey(k.Int16())
		switch r := req.(type) {
		case *kmsg.CreateTopicsRequest:
			r.Topics = append(r.Topics, kmsg.NewCreateTopicsRequestTopic())
		case *kmsg.DeleteTopicsRequest:
			r.TopicNames = append(r.TopicNames, "t")
		case *kmsg.CreatePartitionsRequest:
			r.Topics = append(r.Topics, kmsg.NewCreatePartitionsRequestTopic())
		case *kmsg.IncrementalAlterConfigsRequest:
			r.Resources = append(r.Resources, kmsg.NewIncrementalAlterConfigsRequestResource())
		case *kmsg.AlterConfigsRequest:
			r.Resources = append(r.Resources, kmsg.NewAlterConfigsRequestResource())
		case *kmsg.DescribeConfigsRequest:
			r.Resources = append(r.Resources, kmsg.NewDescribeConfigsRequestResource())
		case *kmsg.AlterClientQuotasRequest:
			r.Entries = append(r.Entries, kmsg.NewAlterClientQuotasRequestEntry())
		case *kmsg.AlterUserSCRAMCredentialsRequest:
			r.Deletions = append(r.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: "alice"})
			r.Upsertions = append(r.Upsertions, kmsg.AlterUserSCRAMCredentialsRequestUpsertion{Name: "alice"})
		case *kmsg.CreateACLsRequest:
			r.Creations = append(r.Creations, kmsg.NewCreateACLsRequestCreation())
		case *kmsg.DeleteACLsRequest:
			r.Filters = append(r.Filters, kmsg.NewDeleteACLsRequestFilter())
		case *kmsg.ApiVersionsRequest:
			continue // answered locally, never forwarded
		}
		name := kmsg.NameForKey(k.Int16())
		if !isNotController(notControllerResponse(req)) {
			t.Errorf("%s: NOT_CONTROLLER answer not recognised", name)
		}
		if isNotController(errorResponse(req, kerr.RequestTimedOut.Code)) {
			t.Errorf("%s: REQUEST_TIMED_OUT taken for NOT_CONTROLLER", name)
		}
		if len(errorFields(errorResponse(req, kerr.RequestTimedOut.Code))) == 0 {
			t.Errorf("%s: no error field to answer with", name)
		}
	}
}
