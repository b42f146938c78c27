package client

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SCRAM credentials (KIP-554), as kafka-configs --entity-type users
// --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'
// and --describe manage them through the Admin API.

// ScramCredentialInfo is one of a user's SCRAM credentials as a broker
// describes it: the mechanism and the iteration count, never the keys.
type ScramCredentialInfo struct {
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	Iterations int32
}

// UserScramCredentials is what DescribeUserScramCredentials reports for one
// user: its credentials, or Err (RESOURCE_NOT_FOUND for a user without
// any).
type UserScramCredentials struct {
	User        string
	Credentials []ScramCredentialInfo
	Err         error
}

// ScramUpsertion sets one user's credential for one mechanism. The
// password is salted here (PBKDF2 with the mechanism's hash, as Kafka's
// ScramFormatter) and never sent: the request carries the salt, the
// iteration count and the salted password.
type ScramUpsertion struct {
	User      string
	Mechanism string // SCRAM-SHA-256 or SCRAM-SHA-512
	Password  string
	// Iterations default to 4096, the least brokers accept; at most 16384.
	Iterations int32
	// Salt defaults to 32 random bytes.
	Salt []byte
}

// String does not show the password.
func (u ScramUpsertion) String() string {
	return fmt.Sprintf("ScramUpsertion{User: %q, Mechanism: %s, Iterations: %d, Password: [redacted]}", u.User, u.Mechanism, u.Iterations)
}

// GoString is String, for %#v.
func (u ScramUpsertion) GoString() string { return u.String() }

// ScramDeletion deletes one user's credential for one mechanism.
type ScramDeletion struct {
	User      string
	Mechanism string
}

// scramMechanisms are the SCRAM mechanisms by the protocol's number
// (Kafka's ScramMechanism.type(); 0 is unknown).
var scramMechanisms = map[int8]string{1: scramSHA256, 2: scramSHA512}

// scramMechanismType is the protocol's number for a SCRAM mechanism, 0
// (unknown) for another name.
func scramMechanismType(name string) int8 {
	for t, n := range scramMechanisms {
		if n == name {
			return t
		}
	}
	return 0
}

func scramMechanismName(t int8) string {
	if n, ok := scramMechanisms[t]; ok {
		return n
	}
	return fmt.Sprintf("UNKNOWN(%d)", t)
}

// DescribeUserScramCredentials describes the SCRAM credentials of users,
// or of every user that has one when none are named.
func (a *Admin) DescribeUserScramCredentials(ctx context.Context, users ...string) ([]UserScramCredentials, error) {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		req.Users = append(req.Users, kmsg.DescribeUserSCRAMCredentialsRequestUser{Name: u})
	}
	var out []UserScramCredentials
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		if err := errorWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return err
		}
		out = out[:0]
		for _, r := range resp.Results {
			u := UserScramCredentials{User: r.User, Err: errorWithMessage(r.ErrorCode, r.ErrorMessage)}
			for _, c := range r.CredentialInfos {
				u.Credentials = append(u.Credentials, ScramCredentialInfo{Mechanism: scramMechanismName(c.Mechanism), Iterations: c.Iterations})
			}
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("describe user SCRAM credentials: %w", err)
	}
	return out, nil
}

// AlterUserScramCredentials deletes and sets SCRAM credentials, and returns
// each user's outcome (nil for success). A user may appear once per
// request; the broker refuses every change of a user named twice.
func (a *Admin) AlterUserScramCredentials(ctx context.Context, deletions []ScramDeletion, upsertions []ScramUpsertion) (map[string]error, error) {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, d := range deletions {
		req.Deletions = append(req.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: d.User, Mechanism: scramMechanismType(d.Mechanism)})
	}
	for _, u := range upsertions {
		up, err := u.request()
		if err != nil {
			return nil, fmt.Errorf("alter user SCRAM credentials: user %q: %w", u.User, err)
		}
		req.Upsertions = append(req.Upsertions, up)
	}
	out := map[string]error{}
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range kresp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
			out[r.User] = errorWithMessage(r.ErrorCode, r.ErrorMessage)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alter user SCRAM credentials: %w", err)
	}
	return out, nil
}

// request salts the password: the upsertion as the request carries it.
func (u ScramUpsertion) request() (kmsg.AlterUserSCRAMCredentialsRequestUpsertion, error) {
	up := kmsg.AlterUserSCRAMCredentialsRequestUpsertion{Name: u.User, Mechanism: scramMechanismType(u.Mechanism), Iterations: u.Iterations, Salt: u.Salt}
	if up.Iterations == 0 {
		up.Iterations = 4096
	}
	h := scramHash(u.Mechanism)
	if h == nil {
		return up, fmt.Errorf("unknown SCRAM mechanism %q (%s or %s)", u.Mechanism, scramSHA256, scramSHA512)
	}
	if up.Salt == nil {
		up.Salt = make([]byte, 32)
		rand.Read(up.Salt)
	}
	// The broker refuses counts out of 4096..16384 with its own message;
	// salting with a huge one first would only burn CPU.
	if up.Iterations < 1 || up.Iterations > scramMaxIterations {
		return up, fmt.Errorf("%d iterations", up.Iterations)
	}
	salted, err := pbkdf2.Key(h, u.Password, up.Salt, int(up.Iterations), h().Size())
	if err != nil {
		return up, fmt.Errorf("salt the password: %w", err)
	}
	up.SaltedPassword = salted
	return up, nil
}
