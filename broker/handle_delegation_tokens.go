package broker

// Delegation tokens (KIP-48; metadata/delegation_tokens.go):
//
// CreateDelegationToken (key 38) v0–v3, RenewDelegationToken (39) v0–v2
// and ExpireDelegationToken (40) v0–v2 are checked here, then forwarded to
// the active controller with the requester's principal (requesterTag), as
// a KRaft broker forwards them. DescribeDelegationToken (41) v0–v3 is
// answered from this broker's image.
//
// As Kafka's KafkaApis: a connection that may not ask for tokens gets
// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (allowTokenRequests: PLAINTEXT, SSL
// without a client certificate, or one itself authenticated by a token);
// without delegation.token.secret.key the answer is
// DELEGATION_TOKEN_AUTH_DISABLED. A token for another owner (v3's
// OwnerPrincipalName) needs CREATE_TOKENS on that user
// (DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be users
// (INVALID_PRINCIPAL_TYPE). Describe lists the tokens the requester owns
// or renews, and those it has DESCRIBE on (the token) or DESCRIBE_TOKENS
// on (the owner).
//
// SCRAM authentication with a token: listener_sasl.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// mayRequestTokens is Kafka's allowTokenRequests.
func mayRequestTokens(c *network.ConnInfo) bool {
	switch {
	case c.TokenAuthenticated, c.SecurityProtocol == network.Plaintext:
		return false
	case c.SecurityProtocol == network.SSL && c.Principal == network.AnonymousPrincipal:
		return false // one-way TLS: nobody in particular
	}
	return true
}

func (b *Broker) handleCreateDelegationToken(ctx context.Context, req *network.Request, m *kmsg.CreateDelegationTokenRequest) network.Result {
	requester := req.Conn.Principal
	owner := requester
	if m.OwnerPrincipalName != nil && *m.OwnerPrincipalName != "" {
		typ := "User"
		if m.OwnerPrincipalType != nil && *m.OwnerPrincipalType != "" {
			typ = *m.OwnerPrincipalType
		}
		owner = typ + ":" + *m.OwnerPrincipalName
	}
	refuse := func(code int16) network.Result {
		resp := m.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
		resp.ErrorCode = code
		resp.PrincipalType, resp.PrincipalName = splitPrincipal(owner)
		resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = splitPrincipal(requester)
		return &network.Response{Msg: resp}
	}
	switch {
	case !mayRequestTokens(req.Conn):
		return refuse(kerr.DelegationTokenRequestNotAllowed.Code)
	case owner != requester && !b.authzFor(req).allowed(kmsg.ACLOperationCreateTokens, kmsg.ACLResourceTypeUser, owner):
		return refuse(kerr.DelegationTokenAuthorizationFailed.Code)
	}
	for _, r := range m.Renewers {
		if r.PrincipalType != "User" {
			return refuse(kerr.InvalidPrincipalType.Code)
		}
	}
	setRequesterTag(m, requester)
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, _ string) kmsg.Response {
		return refuse(code).(*network.Response).Msg
	})
}

func (b *Broker) handleRenewDelegationToken(ctx context.Context, req *network.Request, m *kmsg.RenewDelegationTokenRequest) network.Result {
	return b.forwardTokenChange(ctx, req, m, func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
		resp.ErrorCode = code
		return resp
	})
}

func (b *Broker) handleExpireDelegationToken(ctx context.Context, req *network.Request, m *kmsg.ExpireDelegationTokenRequest) network.Result {
	return b.forwardTokenChange(ctx, req, m, func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
		resp.ErrorCode = code
		return resp
	})
}

// forwardTokenChange is renewal's and expiry's: refused where tokens may
// not be asked for, forwarded with the requester otherwise (the controller
// checks that it owns or may renew the token). answer is the response
// with an error code.
func (b *Broker) forwardTokenChange(ctx context.Context, req *network.Request, m kmsg.Request, answer func(code int16) kmsg.Response) network.Result {
	if !mayRequestTokens(req.Conn) {
		return &network.Response{Msg: answer(kerr.DelegationTokenRequestNotAllowed.Code)}
	}
	setRequesterTag(m, req.Conn.Principal)
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, _ string) kmsg.Response { return answer(code) })
}

func (b *Broker) handleDescribeDelegationToken(req *network.Request, m *kmsg.DescribeDelegationTokenRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	switch {
	case !mayRequestTokens(req.Conn):
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return resp
	case b.cfg.DelegationTokenSecretKey == "":
		resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
		return resp
	}
	var owners []string
	if m.Owners != nil {
		owners = []string{}
		for _, o := range m.Owners {
			owners = append(owners, o.PrincipalType+":"+o.PrincipalName)
		}
	}
	z := b.authzFor(req)
	resp.TokenDetails = metadata.DescribeDelegationTokens(b.currentImage(), b.cfg.DelegationTokenSecretKey, owners, req.Conn.Principal,
		func(t *metadata.DelegationToken) bool {
			return z.quiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeDelegationToken, t.TokenID) ||
				z.quiet(kmsg.ACLOperationDescribeTokens, kmsg.ACLResourceTypeUser, t.Owner)
		})
	return resp
}

// splitPrincipal splits "User:alice" into its type and name.
func splitPrincipal(p string) (typ, name string) {
	for i := range len(p) {
		if p[i] == ':' {
			return p[:i], p[i+1:]
		}
	}
	return "User", p
}
