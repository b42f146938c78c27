package tlsconf

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Keystores written by Java's keytool, the files real Kafka users have.
// keytool is slow to start (a JVM each time), so they are written once per
// test binary, all commands at once.

// ktKeystore is a keystore keytool wrote.
type ktKeystore struct {
	name, typ, path, storePassword, keyPassword string
	// imported is set for a keystore of the test CA's server key and
	// chain; otherwise the key has a self-signed certificate.
	imported bool
}

type keytoolFiles struct {
	dir                string
	keystores          []ktKeystore
	trustJKS, trustP12 string // the test CA, password trustpass
}

var (
	keytoolOnce sync.Once
	keytoolOut  *keytoolFiles
	keytoolErr  error
	keytoolSkip string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if keytoolOut != nil {
		os.RemoveAll(keytoolOut.dir)
	}
	os.Exit(code)
}

// keytools finds keytool: the one on PATH first, then those of the other
// JDKs installed, each once.
func keytools() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if r, err := filepath.EvalSymlinks(p); err == nil && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	if p, err := exec.LookPath("keytool"); err == nil {
		add(p)
	}
	jdks, _ := filepath.Glob("/usr/lib/jvm/*/bin/keytool")
	for _, p := range jdks {
		add(p)
	}
	return out
}

// getKeytoolFiles writes the keytool stores once, or skips the test when
// there is no keytool.
func getKeytoolFiles(t *testing.T) *keytoolFiles {
	t.Helper()
	p := getPKI(t)
	keytoolOnce.Do(func() {
		tools := keytools()
		if len(tools) == 0 {
			keytoolSkip = "no keytool on PATH nor in /usr/lib/jvm"
			return
		}
		keytoolOut, keytoolErr = writeKeytoolFiles(t, tools, p)
	})
	if keytoolSkip != "" {
		t.Skip(keytoolSkip)
	}
	if keytoolErr != nil {
		t.Fatal(keytoolErr)
	}
	return keytoolOut
}

func writeKeytoolFiles(t *testing.T, tools []string, p *testPKI) (*keytoolFiles, error) {
	dir, err := os.MkdirTemp("", "tlsconf-keytool-")
	if err != nil {
		return nil, err
	}
	f := &keytoolFiles{dir: dir, trustJKS: filepath.Join(dir, "trust.jks"), trustP12: filepath.Join(dir, "trust.p12")}
	caPEM := writeFile(t, dir, "ca.pem", pemCertsBytes(p.ca))
	goP12 := writePKCS12Keystore(t, dir, "go-server.p12", "go-p12-pass", p.serverKey, p.server, p.ca)

	var cmds [][]string
	genkey := func(tool string, ks ktKeystore, keyalg ...string) {
		args := []string{tool, "-genkeypair", "-alias", "broker", "-dname", "CN=localhost,OU=keytool,O=Keel",
			"-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "2",
			"-storetype", ks.typ, "-keystore", ks.path, "-storepass", ks.storePassword}
		if ks.keyPassword != "" {
			args = append(args, "-keypass", ks.keyPassword)
		}
		cmds = append(cmds, append(args, keyalg...))
		f.keystores = append(f.keystores, ks)
	}
	kt := tools[0]
	path := func(name string) string { return filepath.Join(dir, name) }
	genkey(kt, ktKeystore{name: "JKS RSA, key password differs", typ: "JKS", path: path("rsa.jks"), storePassword: "storepass1", keyPassword: "keypass22"},
		"-keyalg", "RSA", "-keysize", "2048")
	genkey(kt, ktKeystore{name: "JKS EC", typ: "JKS", path: path("ec.jks"), storePassword: "storepass1"},
		"-keyalg", "EC", "-groupname", "secp256r1")
	genkey(kt, ktKeystore{name: "PKCS12 RSA", typ: "PKCS12", path: path("rsa.p12"), storePassword: "storepass1"},
		"-keyalg", "RSA", "-keysize", "2048")
	genkey(kt, ktKeystore{name: "PKCS12 EC", typ: "PKCS12", path: path("ec.p12"), storePassword: "storepass1"},
		"-keyalg", "EC", "-groupname", "secp256r1")
	for i, other := range tools[1:] {
		jdk := filepath.Base(filepath.Dir(filepath.Dir(other)))
		genkey(other, ktKeystore{name: "PKCS12 EC by " + jdk, typ: "PKCS12", path: path(fmt.Sprintf("jdk%d.p12", i)), storePassword: "storepass1"},
			"-keyalg", "EC", "-groupname", "secp256r1")
	}
	for _, typ := range []string{"JKS", "PKCS12"} {
		ks := ktKeystore{name: "imported into " + typ, typ: typ, path: path("imported." + typ), storePassword: "storepass1", imported: true}
		cmds = append(cmds, []string{kt, "-importkeystore", "-noprompt", "-srckeystore", goP12, "-srcstoretype", "PKCS12",
			"-srcstorepass", "go-p12-pass", "-destkeystore", ks.path, "-deststoretype", typ,
			"-deststorepass", ks.storePassword, "-destkeypass", ks.storePassword})
		f.keystores = append(f.keystores, ks)
	}
	for typ, ts := range map[string]string{"JKS": f.trustJKS, "PKCS12": f.trustP12} {
		cmds = append(cmds, []string{kt, "-importcert", "-noprompt", "-alias", "keel-ca", "-file", caPEM,
			"-storetype", typ, "-keystore", ts, "-storepass", "trustpass"})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, len(cmds))
	for _, c := range cmds {
		go func() {
			// A JVM that starts fast: keytool's work is small.
			args := append([]string{"-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-XX:-UsePerfData"}, c[1:]...)
			out, err := exec.CommandContext(ctx, c[0], args...).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%v: %w\n%s", c, err, out)
			}
			errs <- err
		}()
	}
	for range cmds {
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	return f, nil
}

func TestKeytoolKeystores(t *testing.T) {
	f := getKeytoolFiles(t)
	p := getPKI(t)
	for _, ks := range f.keystores {
		t.Run(ks.name, func(t *testing.T) {
			server := Defaults()
			server.KeystoreType, server.KeystoreLocation, server.KeystorePassword, server.KeyPassword =
				ks.typ, ks.path, ks.storePassword, ks.keyPassword
			cert, err := server.LoadKeystore()
			if err != nil {
				t.Fatal(err)
			}
			client := Defaults()
			client.TruststoreType = TypePEM
			if ks.imported {
				if !cert.Leaf.Equal(p.server) || len(cert.Certificate) != 2 {
					t.Fatalf("leaf %s with %d certificates, want the server's with its CA", cert.Leaf.Subject, len(cert.Certificate))
				}
				client.TruststoreCertificates = string(pemCertsBytes(p.ca))
			} else {
				// A self-signed certificate, trusted as itself.
				client.TruststoreCertificates = string(pemCertsBytes(cert.Leaf))
			}
			switch cert.PrivateKey.(type) {
			case *rsa.PrivateKey, *ecdsa.PrivateKey:
			default:
				t.Errorf("key type %T", cert.PrivateKey)
			}
			if _, err := handshake(t, mustServer(t, server), mustClient(t, client, "localhost")); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A wrong ssl.key.password is refused, naming the setting.
	ks := f.keystores[0]
	s := Defaults()
	s.KeystoreType, s.KeystoreLocation, s.KeystorePassword = ks.typ, ks.path, ks.storePassword
	if _, err := s.LoadKeystore(); err == nil {
		t.Error("a JKS key entry with its own password loaded without ssl.key.password")
	}
}

func TestKeytoolTruststores(t *testing.T) {
	f := getKeytoolFiles(t)
	p := getPKI(t)
	server := Defaults()
	server.KeystoreType, server.KeystoreLocation = TypePEM, writePEMKeystore(t, t.TempDir(), "server.pem", p.serverKey, p.server, p.ca)
	serverCfg := mustServer(t, server)
	for _, tc := range []struct{ name, typ, path, password string }{
		{"JKS", "JKS", f.trustJKS, "trustpass"},
		{"JKS without password", "JKS", f.trustJKS, ""},
		{"PKCS12", "PKCS12", f.trustP12, "trustpass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := Defaults()
			client.TruststoreType, client.TruststoreLocation, client.TruststorePassword = tc.typ, tc.path, tc.password
			if _, err := handshake(t, serverCfg, mustClient(t, client, "127.0.0.1")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
