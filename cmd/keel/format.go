package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network/sasl"
	"github.com/keelstream/keel/raftlog"
	"github.com/urfave/cli/v2"
)

func formatCommand() *cli.Command {
	return &cli.Command{
		Name:  "format",
		Usage: "write meta.properties into every log dir (like kafka-storage.sh format)",
		Description: "Every node of a multi-node cluster must be formatted with the same cluster id\n" +
			"before its first start. `keel format --random-uuid` prints a new id to use.\n" +
			"Formatting a dir that already names another cluster or node id fails.\n\n" +
			"With controller.quorum.bootstrap.servers instead of controller.quorum.voters\n" +
			"(a KIP-853 dynamic quorum, as in Kafka 4's server.properties), each controller\n" +
			"is formatted with the quorum's voters, as with kafka-storage.sh format:\n" +
			"--initial-controllers 1@host1:9093,2@host2:9093,3@host3:9093 on every controller\n" +
			"(a :directoryId after each port is accepted and not kept), or --standalone on\n" +
			"the one controller of a single-controller cluster. Brokers need neither: they\n" +
			"learn the voters from the bootstrap servers. A controller added to a running\n" +
			"quorum later is formatted with --no-initial-controllers, started, and then made\n" +
			"a voter with keel metadata-quorum add-controller.\n\n" +
			"--add-scram gives the cluster its first SCRAM credentials, as kafka-storage.sh\n" +
			"format does: the first controller to lead an empty metadata log commits them. Give\n" +
			"the same ones to every controller. Each is MECHANISM=[name=USER,password=PASSWORD]\n" +
			"with optional iterations=N (4096 to 16384, default 4096), or salt=BASE64 and\n" +
			"saltedpassword=BASE64 instead of the password. Later changes go through the\n" +
			"running cluster: keel users alter, or kafka-configs.sh --entity-type users.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "server.properties file"},
			&cli.StringSliceFlag{Name: "override", Usage: "key=value, applied over the file"},
			&cli.StringFlag{Name: "cluster-id", Aliases: []string{"t"}, Usage: "the cluster id"},
			&cli.BoolFlag{Name: "random-uuid", Usage: "print a new random cluster id and exit"},
			&cli.BoolFlag{Name: "standalone", Aliases: []string{"s"}, Usage: "this controller is the quorum's only initial voter (dynamic quorum)"},
			&cli.StringFlag{Name: "initial-controllers", Aliases: []string{"I"}, Usage: "the quorum's initial voters, id@host:port[:directoryId],... (dynamic quorum)"},
			&cli.BoolFlag{Name: "no-initial-controllers", Aliases: []string{"N"}, Usage: "this controller joins a running quorum (keel metadata-quorum add-controller) (dynamic quorum)"},
			&cli.BoolFlag{Name: "ignore-formatted", Aliases: []string{"g"}, Usage: "skip dirs that are already formatted instead of failing on them"},
			&cli.StringFlag{Name: "release-version", Aliases: []string{"r"}, Usage: "the metadata.version the cluster starts at, as a release (3.7) or a level name (3.7-IV2); default the latest (controllers)"},
			&cli.StringSliceFlag{Name: "feature", Aliases: []string{"f"}, Usage: "NAME=LEVEL: metadata.version (as --release-version); kraft.version, which must be what the quorum is (1 for --standalone/--initial-controllers/bootstrap servers, 0 for controller.quorum.voters); group.version and eligible.leader.replicas.version at 0 or 1 (default: the release's, 1 from 4.0 and from 4.1); transaction.version 0 to 2 (default: 2 from 4.0-IV2); other features only at 0 (repeatable)"},
			&cli.StringSliceFlag{Name: "add-scram", Aliases: []string{"S"}, Usage: "a SCRAM credential the cluster starts with, 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable; controllers)"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("random-uuid") {
				fmt.Fprintln(c.App.Writer, raftlog.NewClusterID())
				return nil
			}
			if c.String("cluster-id") == "" {
				return fmt.Errorf("--cluster-id is required (get one with keel format --random-uuid)")
			}
			cfg, err := broker.LoadConfigFile(c.String("config"), c.StringSlice("override"))
			if err != nil {
				return err
			}
			initial, join, err := initialVoters(c, cfg)
			if err != nil {
				return err
			}
			scram, err := scramBootstrapRecords(c.StringSlice("add-scram"), c.String("cluster-id"))
			if err != nil {
				return err
			}
			boot, err := formatFeatures(c.String("release-version"), c.StringSlice("feature"), cfg)
			if err != nil {
				return err
			}
			boot = append(boot, scram...)
			dirs := cfg.MetaPropertiesDirs()
			if c.Bool("ignore-formatted") {
				// As kafka-storage.sh format -g: a formatted dir is left
				// as it is, whatever it names (keel server checks that).
				dirs = slices.DeleteFunc(dirs, func(d string) bool {
					_, err := raftlog.ReadMetaProperties(d)
					if err == nil {
						fmt.Fprintf(c.App.Writer, "%s is already formatted; skipping it\n", d)
					}
					return err == nil
				})
				if !slices.Contains(dirs, cfg.MetadataLogDir) {
					initial, join = nil, false // its voters were written with it
				}
				if len(dirs) == 0 {
					return nil
				}
			}
			id, err := raftlog.EnsureMetaProperties(dirs, c.String("cluster-id"), cfg.NodeID, true)
			if err != nil {
				return err
			}
			if initial != nil || join {
				if err := raftlog.WriteInitialVoters(cfg.MetadataLogDir, initial); err != nil {
					return err
				}
			}
			for _, d := range dirs {
				fmt.Fprintf(c.App.Writer, "Formatted %s with cluster.id %s and node.id %d\n", d, id, cfg.NodeID)
			}
			flags := "--add-scram"
			if len(scram) == 0 {
				flags = "--release-version"
			} else if bootMetadataVersion(boot) {
				flags = "--release-version and --add-scram"
			}
			switch {
			case len(boot) == 0:
			case !cfg.HasRole("controller"):
				fmt.Fprintf(c.App.Writer, "Ignoring %s: process.roles=%s has no controller, and only controllers bootstrap the metadata log\n", flags, strings.Join(cfg.ProcessRoles, ","))
			case !slices.Contains(dirs, cfg.MetadataLogDir):
				fmt.Fprintf(c.App.Writer, "Ignoring %s: %s was formatted already\n", flags, cfg.MetadataLogDir)
			default:
				if err := raftlog.WriteBootstrapRecords(cfg.MetadataLogDir, boot); err != nil {
					return err
				}
				if bootMetadataVersion(boot) {
					fmt.Fprintf(c.App.Writer, "Formatted %s to bootstrap the cluster at metadata.version %s\n", cfg.MetadataLogDir,
						metadata.MetadataVersionName(boot[0].(*metadata.FeatureLevelRecord).FeatureLevel))
				}
				if len(scram) > 0 {
					fmt.Fprintf(c.App.Writer, "Formatted %s with %d SCRAM credential(s) to bootstrap the cluster with\n", cfg.MetadataLogDir, len(scram))
				}
			}
			switch {
			case initial != nil:
				fmt.Fprintf(c.App.Writer, "Formatted %s with the quorum's initial voters %s\n", cfg.MetadataLogDir, raftlog.FormatVoters(initial))
			case join:
				fmt.Fprintf(c.App.Writer, "Formatted %s to join a running quorum: start it, then run keel metadata-quorum add-controller\n", cfg.MetadataLogDir)
			}
			return nil
		},
	}
}

// formatFeatures are the feature records a controller is formatted with:
// metadata.version from --release-version or --feature
// metadata.version=V (as kafka-storage.sh format takes them, one or the
// other), first; a --feature kraft.version must match the quorum's, which
// Keel takes from the configuration; group.version,
// eligible.leader.replicas.version and transaction.version take a level
// of their supported range, else their release's
// default (metadata.ReleaseFeatures); another feature can only be 0 (not
// finalized), as Keel implements none.
func formatFeatures(release string, features []string, cfg *broker.Config) ([]metadata.Record, error) {
	var out []metadata.Record
	chosen := map[string]int16{} // --feature of an optional feature (metadata.OptionalFeatures)
	for _, f := range features {
		name, value, ok := strings.Cut(f, "=")
		if !ok || name == "" || value == "" {
			return nil, fmt.Errorf("--feature %s: want NAME=LEVEL", f)
		}
		switch name {
		case metadata.MetadataVersionFeature:
			if release != "" {
				return nil, fmt.Errorf("give --release-version or --feature metadata.version, not both")
			}
			release = value
			continue
		case metadata.KRaftVersionFeature:
			if want := strconv.Itoa(int(cfg.KRaftVersion())); value != want {
				return nil, fmt.Errorf("--feature %s: this quorum is kraft.version %s (1 with controller.quorum.bootstrap.servers, 0 with controller.quorum.voters)", f, want)
			}
			continue
		case metadata.GroupVersionFeature, metadata.EligibleLeaderReplicasFeature, metadata.TransactionVersionFeature:
			r := metadata.SupportedFeatures()[name]
			l, err := strconv.ParseInt(value, 10, 16)
			if err != nil || int16(l) < r.Min || int16(l) > r.Max {
				return nil, fmt.Errorf("--feature %s: Keel supports %s %d to %d", f, name, r.Min, r.Max)
			}
			chosen[name] = int16(l)
			continue
		}
		if value != "0" {
			return nil, fmt.Errorf("--feature %s: Keel does not implement %s, so it can only be 0", f, name)
		}
	}
	level := metadata.LatestMetadataVersion // the cluster starts at the latest
	if release != "" {
		var err error
		if level, err = metadata.ParseMetadataVersion(release); err != nil {
			return nil, err
		}
		if level < metadata.MinimumMetadataVersion || level > metadata.LatestMetadataVersion {
			return nil, fmt.Errorf("metadata.version %s: Keel supports %s to %s", release,
				metadata.MetadataVersionName(metadata.MinimumMetadataVersion), metadata.MetadataVersionName(metadata.LatestMetadataVersion))
		}
		out = append(out, &metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: level})
	}
	defaults := metadata.ReleaseFeatures(level)
	for _, name := range metadata.OptionalFeatures {
		l, given := chosen[name]
		if need, ok := metadata.FeatureMinMetadataVersion[name]; ok && l >= 1 && level < need {
			return nil, fmt.Errorf("--feature %s=%d needs metadata.version %s or later, not %s", name, l,
				metadata.MetadataVersionName(need), metadata.MetadataVersionName(level))
		}
		if !given && release == "" {
			continue // the first active controller gives the latest release's defaults
		}
		if !given {
			l = defaults[name] // as kafka-storage.sh: a release's default feature levels
		}
		if l > 0 || given {
			out = append(out, &metadata.FeatureLevelRecord{Name: name, FeatureLevel: l})
		}
	}
	return out, nil
}

// bootMetadataVersion reports whether boot's first record is the
// metadata.version formatFeatures put there.
func bootMetadataVersion(boot []metadata.Record) bool {
	if len(boot) == 0 {
		return false
	}
	f, ok := boot[0].(*metadata.FeatureLevelRecord)
	return ok && f.Name == metadata.MetadataVersionFeature
}

// initialVoters checks format's quorum flags against the configuration, as
// kafka-storage.sh format does, and returns the voters to record: nil for
// a static quorum (controller.quorum.voters), a broker-only node, and a
// controller whose bootstrap servers name only itself (Keel takes that as
// --standalone when it starts); join for --no-initial-controllers, a
// controller that joins a running quorum.
func initialVoters(c *cli.Context, cfg *broker.Config) (voters map[int32]string, join bool, err error) {
	standalone, list, none := c.Bool("standalone"), c.String("initial-controllers"), c.Bool("no-initial-controllers")
	given := 0
	for _, set := range []bool{standalone, list != "", none} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, false, fmt.Errorf("only one of --standalone, --initial-controllers and --no-initial-controllers may be given")
	case given == 1 && !cfg.DynamicQuorum():
		return nil, false, fmt.Errorf("--standalone, --initial-controllers and --no-initial-controllers are for a dynamic quorum: remove controller.quorum.voters and set controller.quorum.bootstrap.servers, or format without them")
	case given == 1 && !cfg.HasRole("controller"):
		return nil, false, fmt.Errorf("--standalone, --initial-controllers and --no-initial-controllers are for controllers: process.roles=%s has none; a broker learns the voters from controller.quorum.bootstrap.servers", strings.Join(cfg.ProcessRoles, ","))
	case none:
		if _, ok := cfg.OwnControllerAddr(); !ok {
			return nil, false, fmt.Errorf("--no-initial-controllers: no controller listener with a fixed port in listeners=%s", cfg.Listeners)
		}
		return nil, true, nil
	case standalone:
		addr, ok := cfg.OwnControllerAddr()
		if !ok {
			return nil, false, fmt.Errorf("--standalone: no controller listener with a fixed port in listeners=%s", cfg.Listeners)
		}
		return map[int32]string{cfg.NodeID: addr}, false, nil
	case list != "":
		voters, err := raftlog.ParseInitialControllers(list)
		if err != nil {
			return nil, false, err
		}
		if _, ok := voters[cfg.NodeID]; !ok {
			return nil, false, fmt.Errorf("--initial-controllers %s does not name this controller, node.id %d", list, cfg.NodeID)
		}
		return voters, false, nil
	case cfg.DynamicQuorum() && cfg.HasRole("controller") && !cfg.StandaloneBootstrap():
		return nil, false, fmt.Errorf("controller.quorum.voters is not set on this controller and controller.quorum.bootstrap.servers=%s names other controllers: give --initial-controllers (or --standalone for a single controller)",
			strings.Join(cfg.ControllerQuorumBootstrapServers, ","))
	}
	return nil, false, nil
}

// scramBootstrapRecords turns --add-scram specs into the credential
// records the cluster starts with. Without salt=, the salt is derived from
// the cluster id, the user and the mechanism (HMAC-SHA-256), not drawn at
// random: formatting again with the same flags writes the same file, as
// keel format must be safe to repeat; it is still unique to the cluster and
// the user, which is what a salt is for.
func scramBootstrapRecords(specs []string, clusterID string) ([]metadata.Record, error) {
	var out []metadata.Record
	seen := map[metadata.ScramKey]bool{}
	for _, s := range specs {
		parsed, err := parseScramSpecs(s)
		if err != nil {
			return nil, fmt.Errorf("--add-scram: %w", err)
		}
		for _, sp := range parsed {
			rec, err := sp.bootstrapRecord(clusterID)
			if err != nil {
				return nil, fmt.Errorf("--add-scram %s: %w", sp.mechanism, err)
			}
			k := metadata.ScramKey{User: rec.Name, Mechanism: rec.Mechanism}
			if seen[k] {
				return nil, fmt.Errorf("--add-scram: %s for %s given twice", sp.mechanism, rec.Name)
			}
			seen[k] = true
			out = append(out, rec)
		}
	}
	return out, nil
}

// bootstrapRecord is the credential of one --add-scram spec:
// name=, then password= or salt= and saltedpassword= (base64), and
// iterations=, as kafka-storage.sh format takes them.
func (sp scramSpec) bootstrapRecord(clusterID string) (*metadata.UserScramCredentialRecord, error) {
	if err := sp.check("name", "password", "iterations", "salt", "saltedpassword"); err != nil {
		return nil, err
	}
	name := sp.options["name"]
	if name == "" {
		return nil, errors.New("name=... is missing")
	}
	it, err := sp.iterations()
	if err != nil {
		return nil, err
	}
	if it == 0 {
		it = metadata.ScramMinIterations
	}
	if it < metadata.ScramMinIterations || it > metadata.ScramMaxIterations {
		return nil, fmt.Errorf("iterations=%d: between %d and %d", it, metadata.ScramMinIterations, metadata.ScramMaxIterations)
	}
	decode := func(key string) ([]byte, error) {
		v, ok := sp.options[key]
		if !ok {
			return nil, nil
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s=: not base64", key)
		}
		return b, nil
	}
	salt, err := decode("salt")
	if err != nil {
		return nil, err
	}
	salted, err := decode("saltedpassword")
	if err != nil {
		return nil, err
	}
	password, hasPassword := sp.options["password"]
	switch {
	case hasPassword && salted != nil:
		return nil, errors.New("give password= or saltedpassword=, not both")
	case salted != nil && salt == nil:
		return nil, errors.New("saltedpassword= needs the salt= it was salted with")
	case !hasPassword && salted == nil:
		return nil, errors.New("password=... is missing")
	}
	if salt == nil {
		mac := hmac.New(sha256.New, []byte(clusterID))
		fmt.Fprintf(mac, "keel format --add-scram\x00%s\x00%s", sp.mechanism, name)
		salt = mac.Sum(nil)
	}
	if salted == nil {
		if salted, err = sasl.SaltedPassword(sp.mechanism, password, salt, int(it)); err != nil {
			return nil, err
		}
	}
	m := metadata.ScramMechanismFromName(sp.mechanism)
	if size := map[int8]int{metadata.ScramSHA256: 32, metadata.ScramSHA512: 64}[m]; len(salted) != size {
		// Kafka would store it; no client could ever log in with it.
		return nil, fmt.Errorf("saltedpassword=: %d bytes, but %s's are %d", len(salted), sp.mechanism, size)
	}
	cred, err := metadata.ScramCredentialFromSalted(m, salt, salted, it)
	if err != nil {
		return nil, err
	}
	return &metadata.UserScramCredentialRecord{
		Name: name, Mechanism: m, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: it,
	}, nil
}
