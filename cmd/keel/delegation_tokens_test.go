package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/integration"
	"github.com/keelstream/keel/raftlog"
)

// tokenTableHeader is kafka-delegation-tokens.sh's header line:
// "%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s".
const tokenTableHeader = "TOKENID         HMAC                           OWNER           REQUESTER       RENEWERS                  ISSUEDATE       EXPIRYDATE      MAXDATE        "

// keelRun runs the CLI in-process as main does: the Kafka scripts'
// argument forms, and for an error "keel: ..." on stderr and exit status 1.
func keelRun(t *testing.T, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	if err := app.Run(kafkaStyleArgs(append([]string{"keel"}, args...))); err != nil {
		fmt.Fprintln(&errOut, "keel:", err)
		return out.String(), errOut.String(), 1
	}
	return out.String(), errOut.String(), 0
}

// keelOK is keelRun that fails the test unless the command succeeds.
func keelOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, exit := keelRun(t, args...)
	if exit != 0 {
		t.Fatalf("keel %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), exit, out, errOut)
	}
	return out
}

// startTokenNode starts one in-process node (broker and controller) with
// delegation tokens enabled: a PLAINTEXT listener and a SASL_PLAINTEXT one
// with SCRAM-SHA-256 and SCRAM-SHA-512, formatted by keel format with
// alice's SCRAM-SHA-256 and bob's SCRAM-SHA-512 credentials. It returns
// the two listeners' addresses.
func startTokenNode(t *testing.T) (plaintext, saslPlaintext string) {
	t.Helper()
	dir := t.TempDir()
	p, s, c := integration.FreePort(t), integration.FreePort(t), integration.FreePort(t)
	props := filepath.Join(dir, "server.properties")
	server := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[3]d
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:%[1]d,SASLP://127.0.0.1:%[2]d,CONTROLLER://127.0.0.1:%[3]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASLP:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=%[4]s
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
delegation.token.secret.key=the-cluster-token-secret
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
`, p, s, c, filepath.Join(dir, "data"))
	if err := os.WriteFile(props, []byte(server), 0o644); err != nil {
		t.Fatal(err)
	}
	keelOK(t, "format", "--config", props, "--cluster-id", raftlog.NewClusterID(),
		"--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
		"--add-scram", "SCRAM-SHA-512=[name=bob,password=bob-secret]")
	cfg, err := broker.LoadConfigFile(props, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := broker.StartNode(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("127.0.0.1:%d", s)
}

// scramConfig writes a --command-config file for SASL_PLAINTEXT with a
// ScramLoginModule of options.
func scramConfig(t *testing.T, name, mechanism, options string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".properties")
	text := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=" + mechanism + "\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required " + options + ";\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenRows checks the script's table in out (its header, a blank line
// before each token) and returns each token's columns.
func tokenRows(t *testing.T, out string) [][]string {
	t.Helper()
	_, table, ok := strings.Cut(out, tokenTableHeader+"\n")
	if !ok {
		t.Fatalf("no header line %q in:\n%s", tokenTableHeader, out)
	}
	var rows [][]string
	for table != "" {
		row, rest, ok := strings.Cut(strings.TrimPrefix(table, "\n"), "\n")
		if !ok || !strings.HasPrefix(table, "\n") {
			t.Fatalf("the token table does not put a blank line before each token:\n%s", out)
		}
		rows = append(rows, strings.Fields(row))
		table = rest
	}
	return rows
}

// describeJSON is describe -o json as alice (or with config).
func describeJSON(t *testing.T, bootstrap, config string) []delegationToken {
	t.Helper()
	var tokens []delegationToken
	out := keelOK(t, "delegation-tokens", "describe", "--bootstrap-server", bootstrap, "--command-config", config, "-o", "json")
	if err := json.Unmarshal([]byte(out), &tokens); err != nil {
		t.Fatalf("describe -o json: %v\n%s", err, out)
	}
	return tokens
}

// keel delegation-tokens against a node with tokens enabled, as an
// operator uses kafka-delegation-tokens.sh: alice creates a token bob may
// renew; describe lists it, to alice, to bob and by owner; bob renews it;
// a keel command authenticates with it (tokenauth="true") and may not ask
// for tokens with it; alice expires it and it is gone. Over PLAINTEXT, no
// token requests at all.
func TestCLIDelegationTokens(t *testing.T) {
	plain, saslp := startTokenNode(t)
	alice := scramConfig(t, "alice", "SCRAM-SHA-256", `username="alice" password="alice-secret"`)
	bob := scramConfig(t, "bob", "SCRAM-SHA-512", `username="bob" password="bob-secret"`)
	// The first controller commits the formatted credentials as it starts.
	eventually(t, "alice's SCRAM credential", func() bool {
		_, _, exit := keelRun(t, "topics", "create", "--topic", "jobs", "--partitions", "1", "--bootstrap-server", saslp, "--command-config", alice)
		return exit == 0
	})

	// Create: the script's lines, then its table.
	out := keelOK(t, "delegation-tokens", "create", "--bootstrap-server", saslp, "--command-config", alice, "--renewer-principal", "User:bob")
	t.Logf("create:\n%s", out)
	lines := strings.Split(out, "\n")
	if lines[0] != "Calling create token operation with renewers :[User:bob] , max-life-time-period :-1" ||
		!strings.HasPrefix(lines[1], "Created delegation token with tokenId : ") || lines[2] != "" || lines[3] != tokenTableHeader {
		t.Fatalf("create printed:\n%s", out)
	}
	rows := tokenRows(t, out)
	if len(rows) != 1 || len(rows[0]) != 8 {
		t.Fatalf("create's table rows %q", rows)
	}
	id, hmac := rows[0][0], rows[0][1]
	if lines[1] != "Created delegation token with tokenId : "+id || len(hmac) != 88 ||
		rows[0][2] != "User:alice" || rows[0][3] != "User:alice" || rows[0][4] != "[User:bob]" {
		t.Fatalf("create's token row %q", rows[0])
	}

	// Describe, in the script's flag form: the same token, the count on
	// the line before the header.
	var described string
	eventually(t, "the token in describe", func() bool {
		described = keelOK(t, "delegation-tokens", "--describe", "--bootstrap-server", saslp, "--command-config", alice)
		return strings.Contains(described, "Total number of tokens : 1\n")
	})
	t.Logf("describe:\n%s", described)
	if !strings.HasPrefix(described, "Calling describe token operation for current user.\nTotal number of tokens : 1\n"+tokenTableHeader+"\n\n") {
		t.Fatalf("describe printed:\n%s", described)
	}
	if got := tokenRows(t, described); len(got) != 1 || strings.Join(got[0], " ") != strings.Join(rows[0], " ") {
		t.Fatalf("describe's rows %q, create's %q", got, rows)
	}
	tok := describeJSON(t, saslp, alice)
	if len(tok) != 1 || tok[0].TokenID != id || tok[0].HMAC != hmac || tok[0].Owner != "User:alice" ||
		tok[0].ExpiryTimestamp-tok[0].IssueTimestamp != 24*time.Hour.Milliseconds() || tok[0].MaxTimestamp-tok[0].IssueTimestamp != 7*24*time.Hour.Milliseconds() ||
		rows[0][5] != tokenDate(tok[0].IssueTimestamp) || rows[0][6] != tokenDate(tok[0].ExpiryTimestamp) || rows[0][7] != tokenDate(tok[0].MaxTimestamp) {
		t.Fatalf("describe -o json %+v, table row %q", tok, rows[0])
	}
	// By owner: bob renews alice's token, so it is his to see and it
	// matches him as a filter; carol has none.
	out = keelOK(t, "delegation-tokens", "describe", "--bootstrap-server", saslp, "--command-config", bob, "--owner-principal", "User:alice")
	if !strings.HasPrefix(out, "Calling describe token operation for owners: [User:alice]\nTotal number of tokens : 1\n") || len(tokenRows(t, out)) != 1 {
		t.Fatalf("bob describes alice's tokens:\n%s", out)
	}
	out = keelOK(t, "delegation-tokens", "--describe", "--owner-principal", "User:carol", "--bootstrap-server", saslp, "--command-config", alice)
	if out != "Calling describe token operation for owners: [User:carol]\nTotal number of tokens : 0\n"+tokenTableHeader+"\n" {
		t.Fatalf("describe carol's tokens:\n%s", out)
	}

	// bob renews it for an hour: the expiry date moves from a day after
	// the issue to an hour from now.
	before := time.Now()
	out = keelOK(t, "delegation-tokens", "renew", "--bootstrap-server", saslp, "--command-config", bob, "--hmac", hmac, "--renew-time-period", "3600000")
	after := time.Now()
	renewed, _, _ := strings.Cut(strings.TrimPrefix(out, "Calling renew token operation with hmac :"+hmac+" , renew-time-period :3600000\nCompleted renew operation. New expiry date : "), "\n")
	if renewed != tokenDate(before.Add(time.Hour).UnixMilli()) && renewed != tokenDate(after.Add(time.Hour).UnixMilli()) {
		t.Fatalf("renew printed:\n%s", out)
	}
	eventually(t, "the renewed expiry in describe", func() bool {
		tok = describeJSON(t, saslp, bob)
		return len(tok) == 1 && tok[0].ExpiryTimestamp-tok[0].IssueTimestamp < 2*time.Hour.Milliseconds()
	})
	if tokenDate(tok[0].ExpiryTimestamp) != renewed {
		t.Fatalf("describe shows expiry %s, renew printed %s", tokenDate(tok[0].ExpiryTimestamp), renewed)
	}

	// A keel command authenticates with the token, as alice; that
	// connection may not ask for tokens.
	withToken := scramConfig(t, "token", "SCRAM-SHA-512", fmt.Sprintf(`username="%s" password="%s" tokenauth="true"`, id, hmac))
	eventually(t, "keel topics list with the token", func() bool {
		out, _, exit := keelRun(t, "topics", "list", "--bootstrap-server", saslp, "--command-config", withToken)
		return exit == 0 && strings.Contains(out, "jobs\n")
	})
	const notAllowed = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64): Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."
	if _, errOut, exit := keelRun(t, "delegation-tokens", "create", "--bootstrap-server", saslp, "--command-config", withToken); exit != 1 || !strings.Contains(errOut, notAllowed) {
		t.Fatalf("create with a token-authenticated connection: exit %d, stderr %q", exit, errOut)
	}
	// Nor may a PLAINTEXT one.
	if _, errOut, exit := keelRun(t, "delegation-tokens", "--create", "--bootstrap-server", plain); exit != 1 || !strings.Contains(errOut, notAllowed) {
		t.Fatalf("create over PLAINTEXT: exit %d, stderr %q", exit, errOut)
	}

	// alice expires it at once (the default period): describe shows none,
	// and the token no longer authenticates.
	out = keelOK(t, "delegation-tokens", "--expire", "--hmac", hmac, "--bootstrap-server", saslp, "--command-config", alice)
	if !strings.HasPrefix(out, "Calling expire token operation with hmac :"+hmac+" , expire-time-period :-1\nCompleted expire operation. New expiry date : ") {
		t.Fatalf("expire printed:\n%s", out)
	}
	eventually(t, "no token in describe", func() bool {
		out = keelOK(t, "delegation-tokens", "describe", "--bootstrap-server", saslp, "--command-config", alice)
		return out == "Calling describe token operation for current user.\nTotal number of tokens : 0\n"+tokenTableHeader+"\n"
	})
	eventually(t, "the expired token refused", func() bool {
		_, errOut, exit := keelRun(t, "topics", "list", "--bootstrap-server", saslp, "--command-config", withToken)
		return exit == 1 && strings.Contains(errOut, "SASL_AUTHENTICATION_FAILED")
	})
	if _, errOut, exit := keelRun(t, "delegation-tokens", "renew", "--hmac", hmac, "--bootstrap-server", saslp, "--command-config", alice); exit != 1 ||
		!strings.Contains(errOut, "DELEGATION_TOKEN_NOT_FOUND (62): Delegation Token is not found on server.") {
		t.Fatalf("renew an expired token: exit %d, stderr %q", exit, errOut)
	}

	// A token for another owner (KIP-373; no authorizer here to ask for
	// CreateTokens on carol), as one line of JSON.
	out = keelOK(t, "delegation-tokens", "create", "--owner-principal", "User:carol", "--max-life-time-period", "3600000", "-o", "json",
		"--bootstrap-server", saslp, "--command-config", alice)
	var carols delegationToken
	if err := json.Unmarshal([]byte(out), &carols); err != nil || strings.Count(out, "\n") != 1 ||
		carols.Owner != "User:carol" || carols.Requester != "User:alice" || len(carols.Renewers) != 0 ||
		carols.MaxTimestamp-carols.IssueTimestamp != time.Hour.Milliseconds() || carols.ExpiryTimestamp != carols.MaxTimestamp {
		t.Fatalf("create -o json for carol: %v\n%s", err, out)
	}
}

// What kafka-delegation-tokens.sh refuses before connecting, keel refuses
// with its words and exit status 1: not exactly one action, renew or
// expire without --hmac, a principal without its type, a flag another
// action takes.
func TestCLIDelegationTokensUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--create", "--renew"}, "Command must include exactly one action: --create, --renew, --expire or --describe"},
		{[]string{"--bootstrap-server", "127.0.0.1:1"}, "Command must include exactly one action"},
		{[]string{"renew"}, `Missing required argument "[hmac]"`},
		{[]string{"--expire", "--expiry-time-period", "0"}, `Missing required argument "[hmac]"`},
		{[]string{"renew", "--hmac", "not base64!"}, "--hmac not base64!: not base64"},
		{[]string{"create", "--renewer-principal", "bob"}, "--renewer-principal: expected a string in format principalType:principalName but got bob"},
		{[]string{"--describe", "--owner-principal", "alice"}, "--owner-principal: expected a string in format principalType:principalName but got alice"},
		{[]string{"create", "--owner-principal", "User:a", "--owner-principal", "User:b"}, "a token has one owner"},
		{[]string{"--create", "--hmac", "aG1hYw=="}, `Option "[create]" can't be used with option "[hmac]"`},
		{[]string{"--describe", "--max-life-time-period", "1000"}, `Option "[describe]" can't be used with option "[max-life-time-period]"`},
		{[]string{"expire", "--renew-time-period", "1000", "--hmac", "aG1hYw=="}, "flag provided but not defined: -renew-time-period"},
		{[]string{"describe", "-o", "yaml"}, "text or json"},
		{[]string{"list"}, `"list" is not an action`},
	} {
		_, errOut, exit := keelRun(t, append([]string{"delegation-tokens"}, tc.args...)...)
		if exit != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("keel delegation-tokens %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), exit, errOut, tc.want)
		}
	}
}

// tokenauth="true" in the ScramLoginModule sends SCRAM's tokenauth=true
// extension in the client-first message, with the token id as the user;
// without it, none.
func TestCommandConfigTokenAuth(t *testing.T) {
	for _, tc := range []struct {
		option, mechanism string
		token             bool
	}{
		{` tokenauth="true"`, "SCRAM-SHA-512", true},
		{` tokenauth=TRUE`, "SCRAM-SHA-256", true},
		{` tokenauth="false"`, "SCRAM-SHA-256", false},
		{``, "SCRAM-SHA-512", false},
	} {
		m, err := saslMechanism(map[string]string{
			"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": tc.mechanism,
			"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="tokenid" password="aG1hYw=="` + tc.option + ";",
		}, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.option, err)
		}
		_, first, err := m.Authenticate(context.Background(), "127.0.0.1")
		if err != nil || m.Name() != tc.mechanism {
			t.Fatalf("%q: %s %v", tc.option, m.Name(), err)
		}
		msg := string(first)
		if !strings.HasPrefix(msg, "n,,n=tokenid,r=") || strings.HasSuffix(msg, ",tokenauth=true") != tc.token {
			t.Errorf("%q: client-first message %q, want tokenauth=true %v", tc.option, msg, tc.token)
		}
	}
}
