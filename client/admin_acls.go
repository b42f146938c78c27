package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLs, as kafka-acls.sh manages them through the Admin API
// (CreateAcls, DescribeAcls, DeleteAcls). A broker without an authorizer
// answers SECURITY_DISABLED.

// ACLBinding is one ACL: who (Principal, e.g. "User:alice", and Host, "*"
// for any) may or may not (Permission) do what (Operation) to which
// resources (ResourceType, ResourceName and PatternType: LITERAL for that
// name, "*" meaning every resource of the type; PREFIXED for the names
// that start with it).
//
// As a filter (DescribeACLs, DeleteACLs), empty strings match anything, as
// do the types' ANY values, and PatternType MATCH matches the ACLs that
// apply to the named resource (literal, wildcard and prefixed ones).
type ACLBinding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType
	Principal    string
	Host         string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// String is the binding as kafka-acls.sh prints one.
func (b ACLBinding) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s) on ResourcePattern(resourceType=%s, name=%s, patternType=%s)",
		b.Principal, b.Host, b.Operation, b.Permission, b.ResourceType, b.ResourceName, b.PatternType)
}

// CreateACLs creates ACLs and returns each one's outcome, in order (nil
// for success; an ACL that exists already succeeds).
func (a *Admin) CreateACLs(ctx context.Context, acls ...ACLBinding) ([]error, error) {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	var out []error
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, r := range kresp.(*kmsg.CreateACLsResponse).Results {
			out = append(out, errorWithMessage(r.ErrorCode, r.ErrorMessage))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create ACLs: %w", err)
	}
	return out, nil
}

// DescribeACLs returns the ACLs that match filter.
func (a *Admin) DescribeACLs(ctx context.Context, filter ACLBinding) ([]ACLBinding, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = orAny(filter.ResourceType, kmsg.ACLResourceTypeAny), optional(filter.ResourceName), orAny(filter.PatternType, kmsg.ACLResourcePatternTypeAny)
	req.Principal, req.Host, req.Operation, req.PermissionType = optional(filter.Principal), optional(filter.Host), orAny(filter.Operation, kmsg.ACLOperationAny), orAny(filter.Permission, kmsg.ACLPermissionTypeAny)
	var out []ACLBinding
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.DescribeACLsResponse)
		if err := errorWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return err
		}
		out = out[:0]
		for _, r := range resp.Resources {
			for _, acl := range r.ACLs {
				out = append(out, ACLBinding{r.ResourceType, r.ResourceName, r.ResourcePatternType, acl.Principal, acl.Host, acl.Operation, acl.PermissionType})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("describe ACLs: %w", err)
	}
	return out, nil
}

// DeleteACLs deletes the ACLs that match each filter and returns, per
// filter, the ACLs it deleted.
func (a *Admin) DeleteACLs(ctx context.Context, filters ...ACLBinding) ([][]ACLBinding, error) {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range filters {
		kf := kmsg.NewDeleteACLsRequestFilter()
		kf.ResourceType, kf.ResourceName, kf.ResourcePatternType = orAny(f.ResourceType, kmsg.ACLResourceTypeAny), optional(f.ResourceName), orAny(f.PatternType, kmsg.ACLResourcePatternTypeAny)
		kf.Principal, kf.Host, kf.Operation, kf.PermissionType = optional(f.Principal), optional(f.Host), orAny(f.Operation, kmsg.ACLOperationAny), orAny(f.Permission, kmsg.ACLPermissionTypeAny)
		req.Filters = append(req.Filters, kf)
	}
	var out [][]ACLBinding
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, r := range kresp.(*kmsg.DeleteACLsResponse).Results {
			if err := errorWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
				return err
			}
			var deleted []ACLBinding
			for _, m := range r.MatchingACLs {
				if err := errorWithMessage(m.ErrorCode, m.ErrorMessage); err != nil {
					return err
				}
				deleted = append(deleted, ACLBinding{m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType})
			}
			out = append(out, deleted)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete ACLs: %w", err)
	}
	return out, nil
}

// optional is nil (any) for "".
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// orAny is v, or anyValue where v is its type's zero value, UNKNOWN:
// the types' zero values mean ANY in a filter.
func orAny[T comparable](v, anyValue T) T {
	var unknown T
	if v == unknown {
		return anyValue
	}
	return v
}
