package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/sasl"
)

// TestDelegationTokenRequestChecks: which connections may ask for
// delegation tokens (Kafka's allowTokenRequests: not PLAINTEXT, not SSL
// without a client certificate, not a connection itself authenticated by
// a token), what a broker answers without delegation.token.secret.key,
// and that a renewer must be a user and an owner other than the requester
// needs CREATE_TOKENS on it, before anything is forwarded.
func TestDelegationTokenRequestChecks(t *testing.T) {
	for _, tc := range []struct {
		conn *network.ConnInfo
		may  bool
	}{
		{&network.ConnInfo{SecurityProtocol: network.Plaintext, Principal: network.AnonymousPrincipal}, false},
		{&network.ConnInfo{SecurityProtocol: network.SSL, Principal: network.AnonymousPrincipal}, false},
		{&network.ConnInfo{SecurityProtocol: network.SSL, Principal: "User:CN=alice"}, true},
		{&network.ConnInfo{SecurityProtocol: network.SASLPlaintext, Principal: "User:alice"}, true},
		{&network.ConnInfo{SecurityProtocol: network.SASLSSL, Principal: "User:alice", TokenAuthenticated: true}, false},
	} {
		if got := mayRequestTokens(tc.conn); got != tc.may {
			t.Errorf("%s %s (token %v): may request tokens %v, want %v", tc.conn.SecurityProtocol, tc.conn.Principal, tc.conn.TokenAuthenticated, got, tc.may)
		}
	}

	c := newTestCluster(t)
	sasl := &network.Request{Conn: &network.ConnInfo{SecurityProtocol: network.SASLPlaintext, Principal: "User:alice"}}
	describe := c.broker.handleDescribeDelegationToken(sasl, kmsg.NewPtrDescribeDelegationTokenRequest()).(*kmsg.DescribeDelegationTokenResponse)
	if describe.ErrorCode != kerr.DelegationTokenAuthDisabled.Code {
		t.Fatalf("describe without a secret key: %v", kerr.ErrorForCode(describe.ErrorCode))
	}
	plain := &network.Request{Conn: &network.ConnInfo{SecurityProtocol: network.Plaintext, Principal: network.AnonymousPrincipal}}
	answer := func(r network.Result) kmsg.Response {
		t.Helper()
		resp, ok := r.(*network.Response)
		if !ok {
			t.Fatalf("forwarded (%T), want an answer from the broker", r)
		}
		return resp.Msg
	}
	create := kmsg.NewPtrCreateDelegationTokenRequest()
	if r := answer(c.broker.handleCreateDelegationToken(context.Background(), plain, create)).(*kmsg.CreateDelegationTokenResponse); r.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
		t.Fatalf("create over PLAINTEXT: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	rn := kmsg.NewCreateDelegationTokenRequestRenewer()
	rn.PrincipalType, rn.PrincipalName = "Group", "ops"
	create.Renewers = append(create.Renewers, rn)
	if r := answer(c.broker.handleCreateDelegationToken(context.Background(), sasl, create)).(*kmsg.CreateDelegationTokenResponse); r.ErrorCode != kerr.InvalidPrincipalType.Code ||
		r.PrincipalName != "alice" || r.TokenRequesterPrincipalName != "alice" {
		t.Fatalf("create with a Group renewer: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
	if r := answer(c.broker.handleRenewDelegationToken(context.Background(), plain, kmsg.NewPtrRenewDelegationTokenRequest())).(*kmsg.RenewDelegationTokenResponse); r.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
		t.Fatalf("renew over PLAINTEXT: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := answer(c.broker.handleExpireDelegationToken(context.Background(), plain, kmsg.NewPtrExpireDelegationTokenRequest())).(*kmsg.ExpireDelegationTokenResponse); r.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
		t.Fatalf("expire over PLAINTEXT: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// BenchmarkTokenCredentialLookup is the broker's part of authenticating
// with a delegation token: finding the token in the image and its SCRAM
// credential, cached after the first authentication ("cached") against
// deriving it (PBKDF2, 4096 iterations: "derived", what every
// authentication would cost without the cache).
func BenchmarkTokenCredentialLookup(b *testing.B) {
	const secret = "bench-secret"
	var recs []metadata.Record
	for i := range 100 {
		recs = append(recs, &metadata.DelegationTokenRecord{TokenID: fmt.Sprintf("token-%d", i), Owner: "User:alice",
			IssueTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().Add(time.Hour).UnixMilli(), ExpirationTimestamp: time.Now().Add(time.Hour).UnixMilli()})
	}
	img, _, err := metadata.EmptyImage().Apply(1, recs)
	if err != nil {
		b.Fatal(err)
	}
	lookup := newTokenSource(secret, func() *metadata.Image { return img })
	b.Run("cached", func(b *testing.B) {
		for i := range b.N {
			if _, ok := lookup(sasl.MechanismScramSHA512, fmt.Sprintf("token-%d", i%100)); !ok {
				b.Fatal("not found")
			}
		}
	})
	b.Run("derived", func(b *testing.B) {
		for range b.N {
			if _, err := sasl.NewScramCredential(sasl.MechanismScramSHA512, metadata.DelegationTokenPassword(secret, "token-1"), sasl.ScramMinIterations); err != nil {
				b.Fatal(err)
			}
		}
	})
}
