package metadata

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SCRAM credentials (KIP-554): the users SASL/SCRAM authenticates, stored
// in the metadata log as UserScramCredentialRecords, as KRaft stores them,
// and set and read with AlterUserScramCredentials and
// DescribeUserScramCredentials (kafka-configs --entity-type users
// --alter --add-config 'SCRAM-SHA-256=[password=...]', keel users). A
// record holds what the server side of SCRAM needs and nothing a client
// could log in with: the salt, the iteration count, StoredKey =
// H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key") (RFC 5802). The client sends the salted
// password; the controller derives the keys and forgets it, as Kafka's
// ScramControlManager does.

// SCRAM mechanisms as the protocol and the records number them (Kafka's
// org.apache.kafka.clients.admin.ScramMechanism).
const (
	ScramUnknown int8 = 0
	ScramSHA256  int8 = 1
	ScramSHA512  int8 = 2
)

// Iteration bounds of a SCRAM credential (Kafka's ScramMechanism minimum,
// ScramControlManager.MAX_ITERATIONS).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ScramMechanismName is a mechanism's SASL name ("SCRAM-SHA-256"), "" if
// unknown.
func ScramMechanismName(m int8) string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

// ScramMechanismFromName is ScramMechanismName's inverse: ScramUnknown for a
// name that is not SCRAM-SHA-256 or SCRAM-SHA-512.
func ScramMechanismFromName(name string) int8 {
	for _, m := range []int8{ScramSHA256, ScramSHA512} {
		if ScramMechanismName(m) == name {
			return m
		}
	}
	return ScramUnknown
}

func scramHash(m int8) func() hash.Hash {
	switch m {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// UserScramCredentialRecord sets one user's credential for one mechanism.
type UserScramCredentialRecord struct {
	Name       string `json:"name"`
	Mechanism  int8   `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
	Iterations int32  `json:"iterations"`
}

// RemoveUserScramCredentialRecord deletes one user's credential for one
// mechanism.
type RemoveUserScramCredentialRecord struct {
	Name      string `json:"name"`
	Mechanism int8   `json:"mechanism"`
}

// Redact is the record as dump-log prints it: no salt or keys (Kafka's
// RecordRedactor).
func (r *UserScramCredentialRecord) Redact() any {
	return struct {
		Name       string `json:"name"`
		Mechanism  int8   `json:"mechanism"`
		Salt       string `json:"salt"`
		StoredKey  string `json:"storedKey"`
		ServerKey  string `json:"serverKey"`
		Iterations int32  `json:"iterations"`
	}{r.Name, r.Mechanism, "(redacted)", "(redacted)", "(redacted)", r.Iterations}
}

// Redactor is a record with secrets in it: tools that print records print
// Redact() instead.
type Redactor interface{ Redact() any }

// ScramKey names one credential: a user and a mechanism.
type ScramKey struct {
	User      string
	Mechanism int8
}

// ScramCredential is one stored SCRAM credential.
type ScramCredential struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// String hides the salt and keys, so that logging a credential leaks
// nothing.
func (c ScramCredential) String() string {
	return fmt.Sprintf("ScramCredential{iterations: %d, salt, keys: [redacted]}", c.Iterations)
}

// ScramCredentialFromSalted derives the stored credential from a salted
// password, as the controller does for AlterUserScramCredentials.
func ScramCredentialFromSalted(m int8, salt, salted []byte, iterations int32) (ScramCredential, error) {
	h := scramHash(m)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %d", m)
	}
	if len(salt) == 0 || len(salted) == 0 {
		return ScramCredential{}, fmt.Errorf("%s: empty salt or salted password", ScramMechanismName(m))
	}
	mac := func(key []byte, msg string) []byte {
		w := hmac.New(h, key)
		w.Write([]byte(msg))
		return w.Sum(nil)
	}
	d := h()
	d.Write(mac(salted, "Client Key"))
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  d.Sum(nil),
		ServerKey:  mac(salted, "Server Key"),
		Iterations: iterations,
	}, nil
}

// ScramCredential returns a user's credential for a mechanism.
func (img *Image) ScramCredential(user string, m int8) (ScramCredential, bool) {
	c, ok := img.scram[ScramKey{user, m}]
	return c, ok
}

// ScramKeys returns every stored credential's key, by user then mechanism.
func (img *Image) ScramKeys() []ScramKey {
	out := make([]ScramKey, 0, len(img.scram))
	for k := range img.scram {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.User < b.User || (a.User == b.User && a.Mechanism < b.Mechanism)
	})
	return out
}

// applyScram replays a UserScramCredentialRecord or a
// RemoveUserScramCredentialRecord. Removing a credential that does not
// exist is an error, as in Kafka's ScramControlManager.
func (b *builder) applyScram(set *UserScramCredentialRecord, remove *RemoveUserScramCredentialRecord) error {
	if b.img.scram = cloneMap(b.img.scram); b.img.scram == nil {
		b.img.scram = map[ScramKey]ScramCredential{}
	}
	if remove != nil {
		k := ScramKey{remove.Name, remove.Mechanism}
		if _, ok := b.img.scram[k]; !ok {
			return fmt.Errorf("no %s credential of user %q to remove", ScramMechanismName(remove.Mechanism), remove.Name)
		}
		delete(b.img.scram, k)
		return nil
	}
	if scramHash(set.Mechanism) == nil {
		return fmt.Errorf("credential of user %q: unknown SCRAM mechanism %d", set.Name, set.Mechanism)
	}
	b.img.scram[ScramKey{set.Name, set.Mechanism}] = ScramCredential{
		Salt: set.Salt, StoredKey: set.StoredKey, ServerKey: set.ServerKey, Iterations: set.Iterations,
	}
	return nil
}

// scramError is a per-user answer of AlterUserScramCredentials.
type scramError struct {
	code int16
	msg  string
}

// AlterUserScramCredentials handles AlterUserScramCredentials (API 51,
// v0), as Kafka's ScramControlManager:
//
//   - a user named twice in one request, in deletions or upsertions, is
//     DUPLICATE_RESOURCE "A user credential cannot be altered twice in the
//     same request", and none of its changes are made;
//   - an empty user name is UNACCEPTABLE_CREDENTIAL, a mechanism other than
//     SCRAM-SHA-256 and SCRAM-SHA-512 UNSUPPORTED_SASL_MECHANISM;
//   - deleting a credential that does not exist is RESOURCE_NOT_FOUND;
//   - fewer than 4096 or more than 16384 iterations is
//     UNACCEPTABLE_CREDENTIAL; so is an empty salt or salted password
//     (where Kafka's formatter fails with UNKNOWN_SERVER_ERROR).
//
// Every change that passes is recorded in one batch. Results come in the
// order users first appear in the request.
func (c *ClusterControl) AlterUserScramCredentials(req *kmsg.AlterUserSCRAMCredentialsRequest) ([]Record, *kmsg.AlterUserSCRAMCredentialsResponse) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	changes := map[string]Record{}
	errs := map[string]scramError{}
	add := func(user string, rec func() (Record, *scramError)) {
		_, seen := changes[user]
		_, failed := errs[user]
		if !seen && !failed {
			order = append(order, user)
		}
		switch {
		case failed:
		case seen:
			delete(changes, user)
			errs[user] = scramError{kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request"}
		default:
			r, err := rec()
			if err != nil {
				errs[user] = *err
			} else {
				changes[user] = r
			}
		}
	}
	for _, d := range req.Deletions {
		add(d.Name, func() (Record, *scramError) {
			if err := validateScramUser(d.Name, d.Mechanism); err != nil {
				return nil, err
			}
			if _, ok := c.img.ScramCredential(d.Name, d.Mechanism); !ok {
				return nil, &scramError{kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist"}
			}
			return &RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism}, nil
		})
	}
	for _, u := range req.Upsertions {
		add(u.Name, func() (Record, *scramError) {
			if err := validateScramUser(u.Name, u.Mechanism); err != nil {
				return nil, err
			}
			switch {
			case u.Iterations < ScramMinIterations:
				return nil, &scramError{kerr.UnacceptableCredential.Code, "Too few iterations"}
			case u.Iterations > ScramMaxIterations:
				return nil, &scramError{kerr.UnacceptableCredential.Code, "Too many iterations"}
			}
			cred, err := ScramCredentialFromSalted(u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations)
			if err != nil {
				return nil, &scramError{kerr.UnacceptableCredential.Code, err.Error()}
			}
			return &UserScramCredentialRecord{
				Name: u.Name, Mechanism: u.Mechanism, Salt: cred.Salt,
				StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations,
			}, nil
		})
	}
	var out []Record
	for _, user := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		if e, ok := errs[user]; ok {
			r.ErrorCode, r.ErrorMessage = e.code, kmsg.StringPtr(e.msg)
		} else {
			out = append(out, changes[user])
		}
		resp.Results = append(resp.Results, r)
	}
	return out, resp
}

func validateScramUser(name string, m int8) *scramError {
	switch {
	case name == "":
		return &scramError{kerr.UnacceptableCredential.Code, "Username must not be empty"}
	case scramHash(m) == nil:
		return &scramError{kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"}
	}
	return nil
}

// DescribeUserScramCredentials answers DescribeUserScramCredentials (API
// 50, v0) from an image, as Kafka's ScramImage: no users (null or empty)
// describes every user with a credential; a user named twice is
// DUPLICATE_RESOURCE, one without any credential RESOURCE_NOT_FOUND, each
// with the user in the message. The iteration count is the only thing
// described per mechanism.
func DescribeUserScramCredentials(img *Image, req *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	creds := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	var all []string
	for _, k := range img.ScramKeys() {
		if _, ok := creds[k.User]; !ok {
			all = append(all, k.User)
		}
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism, ci.Iterations = k.Mechanism, img.scram[k].Iterations
		creds[k.User] = append(creds[k.User], ci)
	}
	users := all
	dup := map[string]bool{}
	if len(req.Users) > 0 {
		users = nil
		seen := map[string]bool{}
		for _, u := range req.Users {
			if seen[u.Name] {
				dup[u.Name] = true
				continue
			}
			seen[u.Name] = true
			users = append(users, u.Name)
		}
	}
	for _, u := range users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		switch {
		case dup[u]:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		case len(creds[u]) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
		default:
			r.CredentialInfos = creds[u]
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}
