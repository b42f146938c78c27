package broker

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Config providers (KIP-297, and KIP-421 for a broker's own properties): a
// value may name a secret kept elsewhere as ${provider:path:key}, and
// config.providers lists the providers with their classes:
//
//	config.providers=file,dir,env
//	config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
//	config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
//	config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
//	ssl.keystore.password=${file:/etc/kafka/secrets.properties:keystore.password}
//	ssl.key.password=${dir:/var/run/secrets/kafka:key-password}
//	sasl.jaas.config=... password="${env:KAFKA_ADMIN_PASSWORD}";
//
// Kafka's three providers are built in: a properties file's key, the
// content of the file named key in directory path, an environment variable
// (no path); as every value, what they read is trimmed (Kafka's ConfigDef
// trims too). Their allowed.paths and allowlist.pattern parameters
// (config.providers.NAME.param.*) bound what they read. Where Kafka leaves a
// reference it cannot resolve as it is, Keel refuses the configuration,
// naming it: a literal "${file:...}" would otherwise become a password.

const configProvidersKey = "config.providers"

// configProviderClasses are Kafka's provider classes by kind.
var configProviderClasses = map[string]string{
	"org.apache.kafka.common.config.provider.FileConfigProvider":      "file",
	"org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
	"org.apache.kafka.common.config.provider.EnvVarConfigProvider":    "env",
}

// configReference is ${provider:key} or ${provider:path:key}, as Kafka's
// ConfigTransformer reads it.
var configReference = regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`)

// configProvider is one configured provider.
type configProvider struct {
	name, kind   string
	allowedPaths []string       // file, directory: nil allows every path
	allowlist    *regexp.Regexp // env: nil allows every variable
	files        map[string]map[string]string
}

// ResolveConfigProviders replaces, in every value of props, each reference
// to a provider that config.providers names with what it reads, and removes
// the config.providers keys. References to other providers are left as
// they are, as in Kafka.
func ResolveConfigProviders(props map[string]string) error {
	names := splitList(props[configProvidersKey])
	providers := map[string]*configProvider{}
	for _, name := range names {
		p, err := newConfigProvider(name, props)
		if err != nil {
			return err
		}
		providers[name] = p
	}
	for k := range props {
		if k == configProvidersKey || strings.HasPrefix(k, configProvidersKey+".") {
			delete(props, k)
		}
	}
	if len(providers) == 0 {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		v := props[k]
		if !strings.Contains(v, "${") {
			continue
		}
		var failed error
		props[k] = configReference.ReplaceAllStringFunc(v, func(ref string) string {
			m := configReference.FindStringSubmatch(ref)
			p := providers[m[1]]
			if p == nil || failed != nil {
				return ref
			}
			got, err := p.get(m[3], m[4])
			if err != nil {
				failed = fmt.Errorf("%s: %s: %w", k, ref, err)
				return ref
			}
			return got
		})
		if failed != nil {
			return failed
		}
	}
	return nil
}

func newConfigProvider(name string, props map[string]string) (*configProvider, error) {
	prefix := configProvidersKey + "." + name + "."
	class := strings.TrimSpace(props[prefix+"class"])
	kind, ok := configProviderClasses[class]
	if !ok {
		if class == "" {
			return nil, fmt.Errorf("%s names %q, but %sclass is not set", configProvidersKey, name, prefix)
		}
		return nil, fmt.Errorf("%sclass=%s: Keel cannot load Java classes; it has Kafka's FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider", prefix, class)
	}
	p := &configProvider{name: name, kind: kind, files: map[string]map[string]string{}}
	if v, ok := props[prefix+"param.allowed.paths"]; ok && kind != "env" {
		for _, a := range splitList(v) {
			if !filepath.IsAbs(a) {
				return nil, fmt.Errorf("%sparam.allowed.paths: %q is not an absolute path", prefix, a)
			}
			p.allowedPaths = append(p.allowedPaths, filepath.Clean(a))
		}
	}
	if v, ok := props[prefix+"param.allowlist.pattern"]; ok && kind == "env" {
		re, err := regexp.Compile("^(?:" + v + ")$")
		if err != nil {
			return nil, fmt.Errorf("%sparam.allowlist.pattern: %w", prefix, err)
		}
		p.allowlist = re
	}
	return p, nil
}

// get reads key at path.
func (p *configProvider) get(path, key string) (string, error) {
	switch p.kind {
	case "env":
		if path != "" {
			return "", fmt.Errorf("provider %s (EnvVarConfigProvider) takes no path", p.name)
		}
		if p.allowlist != nil && !p.allowlist.MatchString(key) {
			return "", fmt.Errorf("environment variable %s is not allowed by %s's allowlist.pattern", key, p.name)
		}
		v, ok := os.LookupEnv(key)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", key)
		}
		return v, nil
	}
	if path == "" {
		return "", fmt.Errorf("provider %s needs a path", p.name)
	}
	if err := p.allowed(path); err != nil {
		return "", err
	}
	if p.kind == "directory" {
		f := filepath.Join(path, key)
		if filepath.Base(f) != key || key == "." || key == ".." {
			return "", fmt.Errorf("%q is not a file name", key)
		}
		st, err := os.Stat(f)
		if err == nil && !st.Mode().IsRegular() {
			err = fmt.Errorf("not a regular file")
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", f, err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", f, err)
		}
		return string(b), nil
	}
	props, ok := p.files[path]
	if !ok {
		var err error
		if props, err = ReadPropertiesFile(path); err != nil {
			return "", err
		}
		p.files[path] = props
	}
	v, ok := props[key]
	if !ok {
		return "", fmt.Errorf("%s has no key %s", path, key)
	}
	return v, nil
}

// allowed checks path against allowed.paths (Kafka's AllowedPaths: the
// path, made absolute and normalised, must lie under one of them).
func (p *configProvider) allowed(path string) error {
	if p.allowedPaths == nil {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for _, a := range p.allowedPaths {
		if rel, err := filepath.Rel(a, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return nil
		}
	}
	return fmt.Errorf("%s is not under %s's allowed.paths %v: %w", path, p.name, p.allowedPaths, fs.ErrPermission)
}
