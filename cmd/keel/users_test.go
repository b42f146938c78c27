package main

import (
	"strings"
	"testing"

	"github.com/keelstream/keel/metadata"
)

// kafka-configs' --add-config and kafka-storage's --add-scram forms:
// mechanisms separated by commas, options in brackets, values bare or in
// double quotes; anything else is a clear error.
func TestParseScramSpecs(t *testing.T) {
	specs, err := parseScramSpecs(`SCRAM-SHA-256=[iterations=8192,password=alice-secret], SCRAM-SHA-512=[name="al,ice",password="a]b,c"]`)
	if err != nil || len(specs) != 2 {
		t.Fatalf("%v %+v", err, specs)
	}
	if s := specs[0]; s.mechanism != "SCRAM-SHA-256" || s.options["iterations"] != "8192" || s.options["password"] != "alice-secret" {
		t.Errorf("first: %+v", s)
	}
	if s := specs[1]; s.mechanism != "SCRAM-SHA-512" || s.options["name"] != "al,ice" || s.options["password"] != "a]b,c" {
		t.Errorf("second: %+v", s)
	}
	for in, want := range map[string]string{
		"SCRAM-SHA-1=[password=x]":                              "not SCRAM-SHA-256 or SCRAM-SHA-512",
		"SCRAM-SHA-256":                                         "want MECHANISM=[key=value,...]",
		"SCRAM-SHA-256=[password=x":                             "missing ]",
		`SCRAM-SHA-256=[password="x]`:                           "unterminated quote",
		"SCRAM-SHA-256=[password=x,password=y]":                 "password given twice",
		"SCRAM-SHA-256=[password]":                              "want key=value",
		"SCRAM-SHA-256=[password=x] SCRAM-SHA-512=[password=y]": "want , between mechanisms",
		`SCRAM-SHA-256=[password="x"y]`:                         "missing ] after password",
	} {
		if _, err := parseScramSpecs(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
	u, err := specs[0].upsertion("alice")
	if err != nil || u.User != "alice" || u.Iterations != 8192 || u.Password != "alice-secret" {
		t.Errorf("upsertion: %v %v", u, err)
	}
	if _, err := specs[1].upsertion("alice"); err == nil || !strings.Contains(err.Error(), `unknown key "name"`) {
		t.Errorf("name= in --add-config: %v", err)
	}
}

// --add-scram makes the stored credential: the same flags give the same
// record (keel format is safe to repeat), another cluster another salt;
// a salted password is taken as given; bad specs are refused.
func TestScramBootstrapRecords(t *testing.T) {
	spec := "SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]"
	recs, err := scramBootstrapRecords([]string{spec}, "cluster-a")
	if err != nil || len(recs) != 1 {
		t.Fatalf("%v %v", recs, err)
	}
	r := recs[0].(*metadata.UserScramCredentialRecord)
	if r.Name != "admin" || r.Mechanism != metadata.ScramSHA512 || r.Iterations != 8192 || len(r.StoredKey) != 64 || len(r.ServerKey) != 64 {
		t.Fatalf("record %+v", r)
	}
	again, _ := scramBootstrapRecords([]string{spec}, "cluster-a")
	other, _ := scramBootstrapRecords([]string{spec}, "cluster-b")
	if string(again[0].(*metadata.UserScramCredentialRecord).ServerKey) != string(r.ServerKey) {
		t.Error("the same flags gave another credential")
	}
	if string(other[0].(*metadata.UserScramCredentialRecord).Salt) == string(r.Salt) {
		t.Error("two clusters got the same salt")
	}
	salted, err := scramBootstrapRecords([]string{"SCRAM-SHA-256=[name=bob,salt=c2FsdA==,saltedpassword=eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHg=,iterations=4096]"}, "c")
	if err != nil || string(salted[0].(*metadata.UserScramCredentialRecord).Salt) != "salt" {
		t.Fatalf("salted: %v %v", salted, err)
	}
	for in, want := range map[string]string{
		"SCRAM-SHA-256=[password=x]":                                          "name=... is missing",
		"SCRAM-SHA-256=[name=a]":                                              "password=... is missing",
		"SCRAM-SHA-256=[name=a,password=x,iterations=100]":                    "between 4096 and 16384",
		"SCRAM-SHA-256=[name=a,saltedpassword=eHh4]":                          "needs the salt=",
		"SCRAM-SHA-256=[name=a,password=x,saltedpassword=eHh4]":               "not both",
		"SCRAM-SHA-256=[name=a,password=x,salt=!!]":                           "salt=: not base64",
		"SCRAM-SHA-256=[name=a,password=x,user=b]":                            `unknown key "user"`,
		"SCRAM-SHA-256=[name=a,password=x],SCRAM-SHA-256=[name=a,password=y]": "given twice",
	} {
		if _, err := scramBootstrapRecords([]string{in}, "c"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}
