package metadata

// Delegation tokens (KIP-48; KRaft's, KIP-900): a user authenticated some
// other way (SCRAM, OAUTHBEARER, a client certificate) gets a token, and
// hands it to workers that authenticate with it over SCRAM
// (tokenauth=true) as the token's owner, without the user's own
// credential. The metadata log holds each token's owner, requester,
// renewers and times (DelegationTokenRecord), never its secret: the HMAC
// is HMAC-SHA512 of the token id under delegation.token.secret.key, which
// every node has and recomputes. The controller creates, renews and
// expires tokens (forwarded by brokers, which check the requester first)
// and removes the expired ones; brokers answer DescribeDelegationToken
// and authenticate with tokens from their image.

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The record types of delegation tokens (KRaft's numbers).
const (
	DelegationTokenType       RecordType = 10
	RemoveDelegationTokenType RecordType = 26
)

// DelegationTokenRecord creates a delegation token or changes its
// expiration (a renewal, an expiry in the future).
type DelegationTokenRecord struct {
	// Owner, Requester and Renewers are principals, "User:alice".
	Owner               string   `json:"owner"`
	Requester           string   `json:"requester"`
	Renewers            []string `json:"renewers"`
	IssueTimestamp      int64    `json:"issueTimestamp"`
	MaxTimestamp        int64    `json:"maxTimestamp"`
	ExpirationTimestamp int64    `json:"expirationTimestamp"`
	TokenID             string   `json:"tokenId"`
}

// RemoveDelegationTokenRecord deletes a delegation token (expired, or
// expired at once by ExpireDelegationToken).
type RemoveDelegationTokenRecord struct {
	TokenID string `json:"tokenId"`
}

func (*DelegationTokenRecord) Type() RecordType       { return DelegationTokenType }
func (*RemoveDelegationTokenRecord) Type() RecordType { return RemoveDelegationTokenType }
func (*DelegationTokenRecord) Version() int16         { return 0 }
func (*RemoveDelegationTokenRecord) Version() int16   { return 0 }

// DelegationToken is one token in the image. Times are Unix milliseconds.
type DelegationToken struct {
	TokenID   string
	Owner     string
	Requester string
	Renewers  []string
	// IssueTimestamp is when it was created, MaxTimestamp the latest its
	// expiration may be renewed to, ExpirationTimestamp when it expires
	// unless renewed.
	IssueTimestamp, MaxTimestamp, ExpirationTimestamp int64
}

// Expired reports whether the token can no longer be used at now.
func (t *DelegationToken) Expired(now time.Time) bool {
	ms := now.UnixMilli()
	return t.ExpirationTimestamp < ms || t.MaxTimestamp < ms
}

// OwnerOrRenewer reports whether principal owns the token or may renew it
// (Kafka's TokenInformation.ownerOrRenewer).
func (t *DelegationToken) OwnerOrRenewer(principal string) bool {
	return t.Owner == principal || slices.Contains(t.Renewers, principal)
}

func (t *DelegationToken) record() *DelegationTokenRecord {
	return &DelegationTokenRecord{
		Owner: t.Owner, Requester: t.Requester, Renewers: slices.Clone(t.Renewers),
		IssueTimestamp: t.IssueTimestamp, MaxTimestamp: t.MaxTimestamp, ExpirationTimestamp: t.ExpirationTimestamp,
		TokenID: t.TokenID,
	}
}

// DelegationToken returns a token by id.
func (img *Image) DelegationToken(id string) (*DelegationToken, bool) {
	t, ok := img.tokens[id]
	return t, ok
}

// DelegationTokens returns every token, by id.
func (img *Image) DelegationTokens() []*DelegationToken {
	out := make([]*DelegationToken, 0, len(img.tokens))
	for _, t := range img.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TokenID < out[j].TokenID })
	return out
}

// applyDelegationToken replays a DelegationTokenRecord or a
// RemoveDelegationTokenRecord.
func (b *builder) applyDelegationToken(set *DelegationTokenRecord, remove *RemoveDelegationTokenRecord) error {
	if b.img.tokens = cloneMap(b.img.tokens); b.img.tokens == nil {
		b.img.tokens = map[string]*DelegationToken{}
	}
	if remove != nil {
		if _, ok := b.img.tokens[remove.TokenID]; !ok {
			return fmt.Errorf("no delegation token %q to remove", remove.TokenID)
		}
		delete(b.img.tokens, remove.TokenID)
		return nil
	}
	if set.TokenID == "" || set.Owner == "" {
		return fmt.Errorf("delegation token %q without an id or an owner", set.TokenID)
	}
	b.img.tokens[set.TokenID] = &DelegationToken{
		TokenID: set.TokenID, Owner: set.Owner, Requester: set.Requester, Renewers: slices.Clone(set.Renewers),
		IssueTimestamp: set.IssueTimestamp, MaxTimestamp: set.MaxTimestamp, ExpirationTimestamp: set.ExpirationTimestamp,
	}
	return nil
}

// DelegationTokenHMAC is a token's HMAC, its password: HMAC-SHA512 of the
// token id under delegation.token.secret.key, as Kafka computes it. A
// client authenticates with the token id as user name and the base64 of
// the HMAC as password.
func DelegationTokenHMAC(secretKey, tokenID string) []byte {
	m := hmac.New(sha512.New, []byte(secretKey))
	m.Write([]byte(tokenID))
	return m.Sum(nil)
}

// DelegationTokenPassword is the password a client authenticates with:
// the base64 of the token's HMAC.
func DelegationTokenPassword(secretKey, tokenID string) string {
	return base64.StdEncoding.EncodeToString(DelegationTokenHMAC(secretKey, tokenID))
}

// tokenForHMAC finds the token whose HMAC is mac.
func (img *Image) tokenForHMAC(secretKey string, mac []byte) (*DelegationToken, bool) {
	for _, t := range img.tokens {
		if hmac.Equal(DelegationTokenHMAC(secretKey, t.TokenID), mac) {
			return t, true
		}
	}
	return nil, false
}

// DelegationTokenConfig is the controller's delegation.token.* settings.
type DelegationTokenConfig struct {
	// SecretKey is delegation.token.secret.key: tokens are disabled
	// without one (DELEGATION_TOKEN_AUTH_DISABLED).
	SecretKey string
	// MaxLifetime is delegation.token.max.lifetime.ms (7 days): no token
	// outlives it, renewed or not.
	MaxLifetime time.Duration
	// ExpiryTime is delegation.token.expiry.time.ms (1 day): how long a
	// token lives, and a renewal extends it, by default.
	ExpiryTime time.Duration
	// ExpiryCheckInterval is delegation.token.expiry.check.interval.ms (1
	// hour): how often Tick removes expired tokens.
	ExpiryCheckInterval time.Duration
}

// DefaultDelegationTokenConfig is Kafka's defaults, tokens disabled.
func DefaultDelegationTokenConfig() DelegationTokenConfig {
	return DelegationTokenConfig{MaxLifetime: 7 * 24 * time.Hour, ExpiryTime: 24 * time.Hour, ExpiryCheckInterval: time.Hour}
}

// CreateDelegationToken handles CreateDelegationToken (API 38) as the
// broker forwarded it: requester is the principal that asked, and the
// broker has checked that it may (not over PLAINTEXT, not itself
// authenticated by a token, allowed to create tokens for another owner).
// The token is owned by OwnerPrincipalName (v3+) or else the requester;
// it lives ExpiryTime (renewable up to MaxLifetime, or the request's
// MaxLifetimeMillis if shorter). Renewers must be User principals:
// INVALID_PRINCIPAL_TYPE otherwise. Kafka's
// DelegationTokenControlManager.createDelegationToken.
func (c *ClusterControl) CreateDelegationToken(now time.Time, req *kmsg.CreateDelegationTokenRequest, requester string) ([]Record, *kmsg.CreateDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	owner := requester
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		owner = principalString(derefOr(req.OwnerPrincipalType, "User"), *req.OwnerPrincipalName)
	}
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = splitPrincipal(requester)
	cfg := c.cfg.DelegationTokens
	if cfg.SecretKey == "" {
		resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
		return nil, resp
	}
	var renewers []string
	for _, r := range req.Renewers {
		if r.PrincipalType != "User" {
			resp.ErrorCode = kerr.InvalidPrincipalType.Code
			return nil, resp
		}
		renewers = append(renewers, principalString(r.PrincipalType, r.PrincipalName))
	}
	life := cfg.MaxLifetime
	if req.MaxLifetimeMillis > 0 {
		life = min(life, time.Duration(req.MaxLifetimeMillis)*time.Millisecond)
	}
	ms := now.UnixMilli()
	maxTS := ms + life.Milliseconds()
	t := &DelegationToken{
		TokenID: NewUuid().String(), Owner: owner, Requester: requester, Renewers: renewers,
		IssueTimestamp: ms, MaxTimestamp: maxTS, ExpirationTimestamp: min(maxTS, ms+cfg.ExpiryTime.Milliseconds()),
	}
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = t.IssueTimestamp, t.ExpirationTimestamp, t.MaxTimestamp
	resp.TokenID = t.TokenID
	resp.HMAC = DelegationTokenHMAC(cfg.SecretKey, t.TokenID)
	return []Record{t.record()}, resp
}

// tokenToChange is the checks renewal and expiry share: tokens enabled,
// the token found by its HMAC (DELEGATION_TOKEN_NOT_FOUND), not expired
// (DELEGATION_TOKEN_EXPIRED), the requester its owner or a renewer
// (DELEGATION_TOKEN_OWNER_MISMATCH).
func (c *ClusterControl) tokenToChange(now time.Time, mac []byte, requester string) (*DelegationToken, int16) {
	secret := c.cfg.DelegationTokens.SecretKey
	if secret == "" {
		return nil, kerr.DelegationTokenAuthDisabled.Code
	}
	t, ok := c.img.tokenForHMAC(secret, mac)
	switch {
	case !ok:
		return nil, kerr.DelegationTokenNotFound.Code
	case t.Expired(now):
		return nil, kerr.DelegationTokenExpired.Code
	case !t.OwnerOrRenewer(requester):
		return nil, kerr.DelegationTokenOwnerMismatch.Code
	}
	return t, 0
}

// RenewDelegationToken handles RenewDelegationToken (API 39), forwarded
// with the requester: the token expires RenewPeriodMillis from now (the
// default, ExpiryTime, if not positive, and never later than that or its
// MaxTimestamp).
func (c *ClusterControl) RenewDelegationToken(now time.Time, req *kmsg.RenewDelegationTokenRequest, requester string) ([]Record, *kmsg.RenewDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	t, code := c.tokenToChange(now, req.HMAC, requester)
	if code != 0 {
		resp.ErrorCode = code
		return nil, resp
	}
	period := c.cfg.DelegationTokens.ExpiryTime
	if req.RenewTimeMillis > 0 {
		period = min(period, time.Duration(req.RenewTimeMillis)*time.Millisecond)
	}
	rec := t.record()
	rec.ExpirationTimestamp = min(t.MaxTimestamp, now.UnixMilli()+period.Milliseconds())
	resp.ExpiryTimestamp = rec.ExpirationTimestamp
	return []Record{rec}, resp
}

// ExpireDelegationToken handles ExpireDelegationToken (API 40), forwarded
// with the requester: a negative ExpiryPeriodMillis removes the token at
// once; otherwise it expires that long from now (never after its
// MaxTimestamp).
func (c *ClusterControl) ExpireDelegationToken(now time.Time, req *kmsg.ExpireDelegationTokenRequest, requester string) ([]Record, *kmsg.ExpireDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	t, code := c.tokenToChange(now, req.HMAC, requester)
	if code != 0 {
		resp.ErrorCode = code
		return nil, resp
	}
	if req.ExpiryPeriodMillis < 0 {
		resp.ExpiryTimestamp = now.UnixMilli()
		return []Record{&RemoveDelegationTokenRecord{TokenID: t.TokenID}}, resp
	}
	rec := t.record()
	rec.ExpirationTimestamp = min(t.MaxTimestamp, now.UnixMilli()+req.ExpiryPeriodMillis)
	resp.ExpiryTimestamp = rec.ExpirationTimestamp
	return []Record{rec}, resp
}

// expiredTokens removes the tokens expired at now (Kafka's
// sweepExpiredDelegationTokens), every ExpiryCheckInterval.
func (c *ClusterControl) expiredTokens(now time.Time) []Record {
	if len(c.img.tokens) == 0 || now.Before(c.lastTokenSweep.Add(c.cfg.DelegationTokens.ExpiryCheckInterval)) {
		return nil
	}
	c.lastTokenSweep = now
	var out []Record
	for _, t := range c.img.DelegationTokens() {
		if t.Expired(now) {
			out = append(out, &RemoveDelegationTokenRecord{TokenID: t.TokenID})
		}
	}
	return out
}

// DescribeDelegationTokens is DescribeDelegationToken's (API 41) answer
// from an image for requester: the tokens owned by (or renewable by) one
// of owners (every token for nil owners, none for an empty list) that the
// requester owns or renews, or that may describe says it may describe
// (Kafka's DelegationTokenManager.filterToken: DESCRIBE on the token, or
// DESCRIBE_TOKENS on its owner), each with its HMAC under secretKey.
func DescribeDelegationTokens(img *Image, secretKey string, owners []string, requester string, mayDescribe func(*DelegationToken) bool) []kmsg.DescribeDelegationTokenResponseTokenDetail {
	var out []kmsg.DescribeDelegationTokenResponseTokenDetail
	if owners != nil && len(owners) == 0 {
		return out
	}
	for _, t := range img.DelegationTokens() {
		if owners != nil && !slices.ContainsFunc(owners, t.OwnerOrRenewer) {
			continue
		}
		if !t.OwnerOrRenewer(requester) && !mayDescribe(t) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = splitPrincipal(t.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = splitPrincipal(t.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = t.IssueTimestamp, t.ExpirationTimestamp, t.MaxTimestamp
		d.TokenID = t.TokenID
		d.HMAC = DelegationTokenHMAC(secretKey, t.TokenID)
		for _, r := range t.Renewers {
			rn := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			rn.PrincipalType, rn.PrincipalName = splitPrincipal(r)
			d.Renewers = append(d.Renewers, rn)
		}
		out = append(out, d)
	}
	return out
}

// principalString is a principal as Kafka prints it, "User:alice".
func principalString(typ, name string) string { return typ + ":" + name }

// splitPrincipal splits "User:alice" into its type and name.
func splitPrincipal(p string) (typ, name string) {
	typ, name, ok := strings.Cut(p, ":")
	if !ok {
		return "User", p
	}
	return typ, name
}

func derefOr(s *string, def string) string {
	if s == nil || *s == "" {
		return def
	}
	return *s
}
