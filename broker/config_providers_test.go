package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Kafka's three config providers resolve ${provider:path:key} in a
// broker's properties: a properties file's key, a file in a directory (its
// bytes as they are), an environment variable; within a longer value too.
func TestConfigProvidersResolveSecrets(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.properties")
	if err := os.WriteFile(secrets, []byte("keystore.password=ks-secret\nadmin.password=admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mounted := filepath.Join(dir, "mounted")
	if err := os.Mkdir(mounted, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mounted, "key-password"), []byte("key-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KEEL_TEST_TRUSTSTORE_PASSWORD", "ts-secret")
	c, err := LoadConfig(map[string]string{
		"config.providers":                             "file,dir,env",
		"config.providers.file.class":                  "org.apache.kafka.common.config.provider.FileConfigProvider",
		"config.providers.file.param.allowed.paths":    dir,
		"config.providers.dir.class":                   "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
		"config.providers.env.class":                   "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
		"config.providers.env.param.allowlist.pattern": "KEEL_TEST_.*",
		"ssl.keystore.password":                        "${file:" + secrets + ":keystore.password}",
		"ssl.key.password":                             "${dir:" + mounted + ":key-password}",
		"ssl.truststore.password":                      "${env:KEEL_TEST_TRUSTSTORE_PASSWORD}",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`username="admin" password="${file:` + secrets + `:admin.password}" user_admin="${file:` + secrets + `:admin.password}";`,
		"delegation.token.secret.key": "${vault:/kv/kafka:token-key}", // a provider not configured: left as it is
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// (Keel trims every value of a server.properties, the file's newline
	// included.)
	for k, want := range map[string]string{
		"ssl.keystore.password": "ks-secret", "ssl.key.password": "key-secret", "ssl.truststore.password": "ts-secret",
	} {
		if got := c.SSL[k]; got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if jaas := c.SASL["listener.name.sasl_plaintext.plain.sasl.jaas.config"]; !strings.Contains(jaas, `password="admin-secret" user_admin="admin-secret";`) {
		t.Errorf("jaas config %q", jaas)
	}
	if len(c.Unknown) != 0 {
		t.Errorf("unknown keys %v: the config.providers keys are Kafka's", c.Unknown)
	}

	// What cannot be resolved stops the start, naming the key.
	base := map[string]string{
		"config.providers":            "file,env",
		"config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
		"config.providers.env.class":  "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
	}
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"ssl.key.password": "${file:" + secrets + ":no.such.key}"}, "no key no.such.key"},
		{map[string]string{"ssl.key.password": "${file:" + filepath.Join(dir, "missing") + ":k}"}, "missing"},
		{map[string]string{"ssl.key.password": "${env:KEEL_TEST_NOT_SET_ANYWHERE}"}, "is not set"},
		{map[string]string{"ssl.key.password": "${env:/x:KEEL_TEST_TRUSTSTORE_PASSWORD}"}, "takes no path"},
		{map[string]string{"config.providers.file.param.allowed.paths": filepath.Join(dir, "mounted"), "ssl.key.password": "${file:" + secrets + ":keystore.password}"}, "allowed.paths"},
		{map[string]string{"config.providers.env.param.allowlist.pattern": "OTHER_.*", "ssl.key.password": "${env:KEEL_TEST_TRUSTSTORE_PASSWORD}"}, "allowlist.pattern"},
		{map[string]string{"config.providers": "vault", "config.providers.vault.class": "com.example.VaultConfigProvider"}, "cannot load Java classes"},
		{map[string]string{"config.providers": "file,nameless"}, "config.providers.nameless.class is not set"},
	} {
		props := map[string]string{}
		for k, v := range base {
			props[k] = v
		}
		for k, v := range tc.props {
			props[k] = v
		}
		if _, err := LoadConfig(props, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.props, err, tc.want)
		}
	}
	// A directory provider reads a file name, not a path out of its dir.
	dp := map[string]string{"config.providers": "dir", "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
		"ssl.key.password": "${dir:" + mounted + ":../secrets.properties}"}
	if _, err := LoadConfig(dp, nil); err == nil || !strings.Contains(err.Error(), "not a file name") {
		t.Errorf("a directory reference out of its dir: %v", err)
	}
}
