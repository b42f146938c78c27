package metadata

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDelegationTokens: the controller creates, renews and expires
// delegation tokens as Kafka's DelegationTokenControlManager does, with its
// error codes; the image and its snapshot carry them; Tick removes the
// expired ones; DescribeDelegationTokens filters them as Kafka's
// filterToken does.
func TestDelegationTokens(t *testing.T) {
	cfg := DefaultControllerConfig()
	c := newCluster(t, cfg, 1)

	// Disabled without a secret key.
	if _, resp := c.cc.CreateDelegationToken(c.now, kmsg.NewPtrCreateDelegationTokenRequest(), "User:alice"); resp.ErrorCode != kerr.DelegationTokenAuthDisabled.Code {
		t.Fatalf("create without a secret key: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	renew := kmsg.NewPtrRenewDelegationTokenRequest()
	if _, resp := c.cc.RenewDelegationToken(c.now, renew, "User:alice"); resp.ErrorCode != kerr.DelegationTokenAuthDisabled.Code {
		t.Fatalf("renew without a secret key: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	const secret = "s3cret"
	cfg.DelegationTokens = DelegationTokenConfig{SecretKey: secret, MaxLifetime: 10 * time.Hour, ExpiryTime: time.Hour, ExpiryCheckInterval: time.Minute}
	c.cc = NewClusterControl(cfg, c.img, c.now, nil)

	// Created for the requester, renewable by bob.
	req := kmsg.NewPtrCreateDelegationTokenRequest()
	rn := kmsg.NewCreateDelegationTokenRequestRenewer()
	rn.PrincipalType, rn.PrincipalName = "User", "bob"
	req.Renewers = append(req.Renewers, rn)
	recs, resp := c.cc.CreateDelegationToken(c.now, req, "User:alice")
	ms := c.now.UnixMilli()
	if resp.ErrorCode != 0 || resp.PrincipalName != "alice" || resp.PrincipalType != "User" || resp.TokenRequesterPrincipalName != "alice" ||
		resp.IssueTimestamp != ms || resp.ExpiryTimestamp != ms+time.Hour.Milliseconds() || resp.MaxTimestamp != ms+10*time.Hour.Milliseconds() ||
		!bytes.Equal(resp.HMAC, DelegationTokenHMAC(secret, resp.TokenID)) || len(resp.TokenID) != 22 {
		t.Fatalf("create: %+v", resp)
	}
	c.commit(recs)
	tok, ok := c.img.DelegationToken(resp.TokenID)
	if !ok || tok.Owner != "User:alice" || tok.Requester != "User:alice" || len(tok.Renewers) != 1 || tok.Renewers[0] != "User:bob" {
		t.Fatalf("token in the image: %+v", tok)
	}
	mac := resp.HMAC

	// Owned by another, with a shorter life than the default; a renewer
	// that is not a user is refused.
	req = kmsg.NewPtrCreateDelegationTokenRequest()
	req.OwnerPrincipalType, req.OwnerPrincipalName = kmsg.StringPtr("User"), kmsg.StringPtr("carol")
	req.MaxLifetimeMillis = 30 * time.Minute.Milliseconds()
	recs, resp = c.cc.CreateDelegationToken(c.now, req, "User:admin")
	if resp.ErrorCode != 0 || resp.PrincipalName != "carol" || resp.TokenRequesterPrincipalName != "admin" ||
		resp.MaxTimestamp != ms+30*time.Minute.Milliseconds() || resp.ExpiryTimestamp != resp.MaxTimestamp {
		t.Fatalf("create for another owner: %+v", resp)
	}
	c.commit(recs)
	carolMAC := resp.HMAC
	rn.PrincipalType = "Group"
	req.Renewers = []kmsg.CreateDelegationTokenRequestRenewer{rn}
	if recs, resp := c.cc.CreateDelegationToken(c.now, req, "User:admin"); resp.ErrorCode != kerr.InvalidPrincipalType.Code || recs != nil {
		t.Fatalf("a Group renewer: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Renewal: by the owner or a renewer only, up to the default period
	// and the max timestamp.
	later := c.now.Add(20 * time.Minute)
	renew.HMAC, renew.RenewTimeMillis = mac, -1
	if _, resp := c.cc.RenewDelegationToken(later, renew, "User:mallory"); resp.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Fatalf("renew by a stranger: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	recs, rresp := c.cc.RenewDelegationToken(later, renew, "User:bob")
	if rresp.ErrorCode != 0 || rresp.ExpiryTimestamp != later.UnixMilli()+time.Hour.Milliseconds() {
		t.Fatalf("renew by the renewer: %+v", rresp)
	}
	c.commit(recs)
	if tok, _ := c.img.DelegationToken(tok.TokenID); tok.ExpirationTimestamp != rresp.ExpiryTimestamp {
		t.Fatalf("renewal not applied: %+v", tok)
	}
	renew.HMAC = []byte("no such token")
	if _, resp := c.cc.RenewDelegationToken(later, renew, "User:alice"); resp.ErrorCode != kerr.DelegationTokenNotFound.Code {
		t.Fatalf("renew an unknown token: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Expiry in the future, then at once.
	expire := kmsg.NewPtrExpireDelegationTokenRequest()
	expire.HMAC, expire.ExpiryPeriodMillis = mac, 1000
	recs, eresp := c.cc.ExpireDelegationToken(later, expire, "User:alice")
	if eresp.ErrorCode != 0 || eresp.ExpiryTimestamp != later.UnixMilli()+1000 {
		t.Fatalf("expire in a second: %+v", eresp)
	}
	c.commit(recs)
	if _, resp := c.cc.RenewDelegationToken(later.Add(2*time.Second), kmsg.NewPtrRenewDelegationTokenRequest(), "User:alice"); resp.ErrorCode != kerr.DelegationTokenNotFound.Code {
		t.Fatalf("renew without an HMAC: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	renew.HMAC = mac
	if _, resp := c.cc.RenewDelegationToken(later.Add(2*time.Second), renew, "User:alice"); resp.ErrorCode != kerr.DelegationTokenExpired.Code {
		t.Fatalf("renew an expired token: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// The image and its snapshot carry the tokens.
	back, _, err := EmptyImage().Apply(1, c.img.SnapshotRecords())
	if err != nil || len(back.DelegationTokens()) != 2 {
		t.Fatalf("snapshot: %v, %d tokens", err, len(back.DelegationTokens()))
	}
	for _, want := range c.img.DelegationTokens() {
		got, ok := back.DelegationToken(want.TokenID)
		if !ok || got.Owner != want.Owner || got.ExpirationTimestamp != want.ExpirationTimestamp || len(got.Renewers) != len(want.Renewers) {
			t.Fatalf("token %s after a snapshot: %+v, want %+v", want.TokenID, got, want)
		}
	}
	enc, err := EncodeBatch(c.img.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeBatch(enc); err != nil {
		t.Fatalf("decode: %v", err)
	}

	// Describe: every token for nil owners, none for no owners; a
	// requester sees its own and those it renews, others only if allowed.
	never := func(*DelegationToken) bool { return false }
	if got := DescribeDelegationTokens(c.img, secret, nil, "User:alice", never); len(got) != 1 || got[0].PrincipalName != "alice" ||
		!bytes.Equal(got[0].HMAC, mac) || len(got[0].Renewers) != 1 || got[0].Renewers[0].PrincipalName != "bob" {
		t.Fatalf("alice describes: %+v", got)
	}
	if got := DescribeDelegationTokens(c.img, secret, nil, "User:bob", never); len(got) != 1 {
		t.Fatalf("the renewer describes: %+v", got)
	}
	if got := DescribeDelegationTokens(c.img, secret, []string{}, "User:alice", never); len(got) != 0 {
		t.Fatalf("an empty owner list: %+v", got)
	}
	always := func(*DelegationToken) bool { return true }
	if got := DescribeDelegationTokens(c.img, secret, []string{"User:carol"}, "User:admin", always); len(got) != 1 || !bytes.Equal(got[0].HMAC, carolMAC) {
		t.Fatalf("carol's tokens, for an allowed describer: %+v", got)
	}
	if got := DescribeDelegationTokens(c.img, secret, nil, "User:admin", never); len(got) != 0 {
		t.Fatalf("a stranger describes: %+v", got)
	}

	// Expire at once; Tick removes the other once expired (after its check
	// interval).
	expire.HMAC, expire.ExpiryPeriodMillis = carolMAC, -1
	recs, eresp = c.cc.ExpireDelegationToken(later, expire, "User:carol")
	if eresp.ErrorCode != 0 || len(recs) != 1 || recs[0].Type() != RemoveDelegationTokenType {
		t.Fatalf("expire at once: %+v %v", eresp, recs)
	}
	c.commit(recs)
	if n := len(c.img.DelegationTokens()); n != 1 {
		t.Fatalf("%d tokens after expiring one at once, want 1", n)
	}
	c.commit(c.cc.Tick(later.Add(2 * time.Second)))
	if n := len(c.img.DelegationTokens()); n != 0 {
		t.Fatalf("%d tokens after the sweep, want 0", n)
	}
}
