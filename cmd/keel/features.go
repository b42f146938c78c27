package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
)

func featuresCommand() *cli.Command {
	// The connection flags go before the subcommand, as kafka-features.sh
	// takes them, or after it.
	connFlags := func() []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "bootstrap-server", Usage: "a broker's HOST:PORT"},
			&cli.StringFlag{Name: "bootstrap-controller", Usage: "a controller's HOST:PORT"},
			&cli.StringFlag{Name: "command-config", Usage: "client properties (security.protocol=SSL and ssl.*: TLS to an SSL listener)"},
		}
	}
	changeFlags := func(extra ...cli.Flag) []cli.Flag {
		return append(append(connFlags(), []cli.Flag{
			&cli.StringFlag{Name: "metadata", Usage: "the metadata.version, as a release (4.0) or a level name (3.7-IV2)"},
			&cli.StringFlag{Name: "release-version", Usage: "the same as --metadata"},
			&cli.StringSliceFlag{Name: "feature", Usage: "NAME=LEVEL (repeatable)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "validate without changing anything"},
		}...), extra...)
	}
	return &cli.Command{
		Name:  "features",
		Usage: "describe and change the cluster's finalized feature levels, metadata.version among them (like kafka-features.sh)",
		Description: "Keel finalizes metadata.version (Kafka's MetadataVersion levels, " +
			metadata.MetadataVersionName(metadata.MinimumMetadataVersion) + " to " +
			metadata.MetadataVersionName(metadata.LatestMetadataVersion) + ") when a new\n" +
			"cluster's first controller becomes active: the level keel format --release-version\n" +
			"chose, else the latest. kraft.version is 1 on a quorum formatted with --standalone or\n" +
			"--initial-controllers, 0 on controller.quorum.voters, and cannot be changed here.\n" +
			"metadata.version only goes up: Kafka refuses downgrades that might lose metadata,\n" +
			"and so does Keel, for every downgrade. Kafka's own kafka-features.sh works against\n" +
			"Keel too.",
		Flags: connFlags(),
		Subcommands: []*cli.Command{
			{
				Name:   "describe",
				Usage:  "print each supported feature's range and finalized level",
				Flags:  connFlags(),
				Action: describeFeatures,
			},
			{
				Name:  "upgrade",
				Usage: "raise finalized levels",
				Flags: changeFlags(),
				Action: func(c *cli.Context) error {
					return updateFeatures(c, "upgrade", 1)
				},
			},
			{
				Name:  "downgrade",
				Usage: "lower finalized levels",
				Flags: changeFlags(&cli.BoolFlag{Name: "unsafe", Usage: "an unsafe (lossy) downgrade"}),
				Action: func(c *cli.Context) error {
					if c.Bool("unsafe") {
						return updateFeatures(c, "downgrade", 3)
					}
					return updateFeatures(c, "downgrade", 2)
				},
			},
			{
				Name:  "disable",
				Usage: "set features to level 0",
				Flags: append(connFlags(),
					&cli.StringSliceFlag{Name: "feature", Required: true, Usage: "NAME (repeatable)"},
					&cli.BoolFlag{Name: "unsafe", Usage: "an unsafe (lossy) downgrade"},
					&cli.BoolFlag{Name: "dry-run", Usage: "validate without changing anything"},
				),
				Action: func(c *cli.Context) error {
					if c.Bool("unsafe") {
						return updateFeatures(c, "disable", 3)
					}
					return updateFeatures(c, "disable", 2)
				},
			},
		},
	}
}

// describeFeatures prints what kafka-features.sh describe prints: each
// supported feature, sorted, with its range and finalized level (0 when
// not finalized); metadata.version levels by name.
func describeFeatures(c *cli.Context) error {
	addr, dial, err := featuresAddr(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, 15*time.Second)
	defer cancel()
	resp, err := broker.RequestVia(ctx, dial, addr, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		return err
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(av.ErrorCode); err != nil {
		return fmt.Errorf("describe features: %w", err)
	}
	finalized := map[string]int16{}
	for _, f := range av.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	epoch := "-"
	if av.FinalizedFeaturesEpoch >= 0 {
		epoch = strconv.FormatInt(av.FinalizedFeaturesEpoch, 10)
	}
	supported := slices.Clone(av.SupportedFeatures)
	slices.SortFunc(supported, func(a, b kmsg.ApiVersionsResponseSupportedFeature) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range supported {
		fmt.Fprintf(c.App.Writer, "Feature: %s\tSupportedMinVersion: %s\tSupportedMaxVersion: %s\tFinalizedVersionLevel: %s\tEpoch: %s\n",
			f.Name, featureLevelString(f.Name, f.MinVersion), featureLevelString(f.Name, f.MaxVersion),
			featureLevelString(f.Name, finalized[f.Name]), epoch)
	}
	return nil
}

// featuresAddr is quorumAddr for a subcommand whose connection flags may
// have been given to the features command before it.
func featuresAddr(c *cli.Context) (string, broker.DialFunc, error) {
	for _, name := range []string{"bootstrap-server", "bootstrap-controller", "command-config"} {
		if c.IsSet(name) {
			continue
		}
		for _, p := range c.Lineage()[1:] {
			if p.IsSet(name) {
				if err := c.Set(name, p.String(name)); err != nil {
					return "", nil, err
				}
				break
			}
		}
	}
	return quorumAddr(c)
}

func featureLevelString(name string, level int16) string {
	if name == metadata.MetadataVersionFeature && level > 0 {
		return metadata.MetadataVersionName(level)
	}
	return strconv.Itoa(int(level))
}

// updateFeatures sends one UpdateFeatures with every feature the flags
// name, at upgradeType (1 upgrade, 2 safe downgrade, 3 unsafe), and prints
// each feature's outcome as kafka-features.sh does. Any refusal fails the
// command; the controller applies all of the request or none of it.
func updateFeatures(c *cli.Context, verb string, upgradeType int8) error {
	addr, dial, err := featuresAddr(c)
	if err != nil {
		return err
	}
	levels, err := featureUpdates(c, verb)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis = 30000
	req.ValidateOnly = c.Bool("dry-run")
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = name, levels[name], upgradeType
		u.AllowDowngrade = upgradeType != 1 // v0
		req.FeatureUpdates = append(req.FeatureUpdates, u)
	}
	ctx, cancel := context.WithTimeout(c.Context, 35*time.Second)
	defer cancel()
	resp, err := broker.RequestVia(ctx, dial, addr, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.UpdateFeaturesResponse)
	failed := r.ErrorCode != 0
	for _, u := range req.FeatureUpdates {
		code, msg := r.ErrorCode, r.ErrorMessage
		for _, res := range r.Results {
			if res.Feature == u.Feature && res.ErrorCode != 0 {
				code, msg, failed = res.ErrorCode, res.ErrorMessage, true
			}
		}
		level := featureLevelString(u.Feature, u.MaxVersionLevel)
		what := verb + "d"
		if verb == "disable" {
			what = "disabled"
		}
		switch {
		case code != 0:
			text := kerr.ErrorForCode(code).Error()
			if msg != nil && *msg != "" {
				text = *msg
			}
			if verb == "disable" {
				fmt.Fprintf(c.App.Writer, "Could not disable %s. %s\n", u.Feature, text)
			} else {
				fmt.Fprintf(c.App.Writer, "Could not %s %s to %s. %s\n", verb, u.Feature, level, text)
			}
		case req.ValidateOnly && verb == "disable":
			fmt.Fprintf(c.App.Writer, "%s can be disabled.\n", u.Feature)
		case req.ValidateOnly:
			fmt.Fprintf(c.App.Writer, "%s can be %s to %s.\n", u.Feature, what, level)
		case verb == "disable":
			fmt.Fprintf(c.App.Writer, "%s was disabled.\n", u.Feature)
		default:
			fmt.Fprintf(c.App.Writer, "%s was %s to %s.\n", u.Feature, what, level)
		}
	}
	if failed {
		return cli.Exit("", 1)
	}
	return nil
}

// featureUpdates reads the levels the flags ask for: --metadata or
// --release-version for metadata.version, --feature NAME=LEVEL (or NAME
// alone to disable).
func featureUpdates(c *cli.Context, verb string) (map[string]int16, error) {
	levels := map[string]int16{}
	mv := c.String("metadata")
	if rv := c.String("release-version"); rv != "" {
		if mv != "" {
			return nil, fmt.Errorf("give --metadata or --release-version, not both")
		}
		mv = rv
	}
	if mv != "" {
		l, err := metadata.ParseMetadataVersion(mv)
		if err != nil {
			return nil, err
		}
		levels[metadata.MetadataVersionFeature] = l
	}
	// --release-version moves the release's other features too, to their
	// defaults for it (kafka-features.sh: group.version 1 from 4.0,
	// eligible.leader.replicas.version 1 from 4.1).
	var releaseDefaults map[string]int16
	if c.String("release-version") != "" {
		releaseDefaults = metadata.ReleaseFeatures(levels[metadata.MetadataVersionFeature])
	}
	for _, f := range c.StringSlice("feature") {
		name, value, ok := strings.Cut(f, "=")
		switch {
		case verb == "disable" && ok:
			return nil, fmt.Errorf("--feature %s: disable takes feature names only", f)
		case verb == "disable":
			levels[name] = 0
			continue
		case !ok || name == "":
			return nil, fmt.Errorf("--feature %s: want NAME=LEVEL", f)
		}
		var l int16
		if name == metadata.MetadataVersionFeature {
			var err error
			if l, err = metadata.ParseMetadataVersion(value); err != nil {
				return nil, err
			}
		} else {
			n, err := strconv.ParseInt(value, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("--feature %s: level %q is not a number", f, value)
			}
			l = int16(n)
		}
		if _, dup := levels[name]; dup {
			return nil, fmt.Errorf("--feature %s: %s is given twice", f, name)
		}
		levels[name] = l
	}
	for name, l := range releaseDefaults {
		if _, given := levels[name]; !given {
			levels[name] = l
		}
	}
	if len(levels) == 0 {
		return nil, fmt.Errorf("name a feature to %s: --metadata, --release-version or --feature", verb)
	}
	return levels, nil
}
