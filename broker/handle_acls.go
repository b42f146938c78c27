package broker

// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
// v0–v3, answered as a Kafka broker without an authorizer answers them
// (its AclApis when authorizer.class.name is empty): SECURITY_DISABLED,
// "No Authorizer is configured on the broker", for the request
// (DescribeAcls) or for each creation and each filter. Keel has no
// authorizer, and refuses to start with authorizer.class.name set (see
// LoadConfig); kafka-acls.sh and the Java Admin's describeAcls,
// createAcls and deleteAcls then report what a Kafka operator knows,
// where an unadvertised API gave UNSUPPORTED_VERSION.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// noAuthorizer is Kafka's message for an ACL request without an authorizer.
const noAuthorizer = "No Authorizer is configured on the broker"

func handleDescribeAcls(m *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = kerr.SecurityDisabled.Code
	resp.ErrorMessage = kmsg.StringPtr(noAuthorizer)
	return resp
}

func handleCreateAcls(m *kmsg.CreateACLsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.CreateACLsResponse)
	for range m.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func handleDeleteAcls(m *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range m.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	return resp
}
