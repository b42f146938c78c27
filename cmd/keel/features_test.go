package main

import (
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/integration"
	"github.com/keelstream/keel/metadata"
)

// keel features against a cluster formatted at metadata.version 3.7
// (--release-version 3.7): describe prints kafka-features.sh's lines, an
// upgrade moves the finalized level through the broker (forwarded) and
// through the controller, survives a restart, and every refusal Kafka's
// controller makes fails the command with its message and nothing changed.
func TestCLIFeatures(t *testing.T) {
	boot := []metadata.Record{&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: 19}}
	c := integration.StartClusterWith(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}}, boot)
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ctl := c.ControllerAddr(1)
	finalized := func(level string) string {
		return "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.1-IV1\tFinalizedVersionLevel: " + level + "\tEpoch: "
	}
	wantLines(t, "describe", ok(t, bs, "", "features", "describe"),
		"Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: ",
		"Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: ",
		"Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: ",
		finalized("3.7-IV4"))
	// group.version 1 needs metadata.version 4.0-IV0.
	if res := keel(t, bs, "", "features", "upgrade", "--feature", "group.version=1"); res.exit != 1 ||
		!strings.Contains(res.stdout, "Feature group.version level 1 requires metadata.version 4.0-IV0 (22) or higher; it is 19.") {
		t.Errorf("group.version 1 at 3.7: exit %d\n%s%s", res.exit, res.stdout, res.stderr)
	}

	wantLines(t, "dry run", ok(t, bs, "", "features", "upgrade", "--metadata", "4.0", "--dry-run"),
		"metadata.version can be upgraded to 4.0-IV3.")
	wantLines(t, "describe after the dry run", ok(t, bs, "", "features", "describe"), finalized("3.7-IV4"))
	// --release-version takes the release's feature defaults along:
	// group.version 1 from 4.0, as kafka-features.sh does.
	wantLines(t, "upgrade", ok(t, bs, "", "features", "upgrade", "--release-version", "4.0"),
		"metadata.version was upgraded to 4.0-IV3.", "group.version was upgraded to 1.", "transaction.version was upgraded to 2.")
	wantLines(t, "describe after the upgrade", ok(t, bs, "", "features", "describe"), finalized("4.0-IV3"),
		"Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: ",
		"Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\tEpoch: ")
	// Eligible leader replicas are 4.1's default, and 4.0-IV1's to turn on.
	wantLines(t, "eligible leader replicas on", ok(t, bs, "", "features", "upgrade", "--feature", "eligible.leader.replicas.version=1"),
		"eligible.leader.replicas.version was upgraded to 1.")
	wantLines(t, "describe with eligible leader replicas", ok(t, bs, "", "features", "describe"),
		"Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: ")
	wantLines(t, "eligible leader replicas off", ok(t, bs, "", "features", "downgrade", "--feature", "eligible.leader.replicas.version=0"),
		"eligible.leader.replicas.version was downgraded to 0.")

	refused := []struct {
		args []string
		want string
	}{
		{[]string{"downgrade", "--metadata", "3.7"},
			"Could not downgrade metadata.version to 3.7-IV4. The update failed for all features since the following feature had an error: " +
				"Invalid metadata.version 19. Refusing to perform the requested downgrade because it might delete metadata information."},
		{[]string{"downgrade", "--unsafe", "--metadata", "3.7"},
			"Invalid metadata.version 19. Unsafe metadata downgrade is not supported in this version."},
		{[]string{"upgrade", "--metadata", "3.9"},
			"Invalid update version 21 for feature metadata.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."},
		{[]string{"downgrade", "--metadata", "4.1"},
			"Invalid update version 27 for feature metadata.version. Can't downgrade to a newer version."},
		{[]string{"upgrade", "--metadata", "4.2"},
			"Could not upgrade metadata.version to 4.2-IV1. The update failed for all features since the following feature had an error: " +
				"Invalid update version 29 for feature metadata.version. Local controller 1 only supports versions 7-27"},
		{[]string{"disable", "--feature", "metadata.version"},
			"Could not disable metadata.version. The update failed for all features since the following feature had an error: " +
				"Invalid update version 0 for feature metadata.version. Local controller 1 only supports versions 7-27"},
		{[]string{"upgrade", "--feature", "share.version=1"},
			"Invalid update version 1 for feature share.version. Local controller 1 does not support this feature."},
		{[]string{"upgrade", "--feature", "transaction.version=3"},
			"Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2"},
		{[]string{"upgrade", "--feature", "group.version=2"},
			"Invalid update version 2 for feature group.version. Local controller 1 only supports versions 0-1"},
		{[]string{"upgrade", "--feature", "kraft.version=1"},
			"Invalid update version 1 for feature kraft.version. Keel sets kraft.version when the quorum is formatted"},
		// All or nothing: the valid half of the request is not applied.
		{[]string{"upgrade", "--metadata", "4.1", "--feature", "share.version=1"},
			"Could not upgrade metadata.version to 4.1-IV1. The update failed for all features since the following feature had an error: " +
				"Invalid update version 1 for feature share.version."},
	}
	for _, r := range refused {
		res := keel(t, bs, "", append([]string{"features"}, r.args...)...)
		if res.exit != 1 || !strings.Contains(res.stdout, r.want) {
			t.Errorf("features %s: exit %d, want 1 and %q\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), res.exit, r.want, res.stdout, res.stderr)
		}
	}
	wantLines(t, "describe after the refusals", ok(t, bs, "", "features", "describe"), finalized("4.0-IV3"))

	// Through the controller listener (kafka-features.sh
	// --bootstrap-controller), then across a restart.
	wantLines(t, "upgrade at the controller", ok(t, "", "", "features", "--bootstrap-controller", ctl, "upgrade", "--metadata", "4.1"),
		"metadata.version was upgraded to 4.1-IV1.")
	wantLines(t, "describe at the controller", ok(t, "", "", "features", "--bootstrap-controller", ctl, "describe"), finalized("4.1-IV1"))
	c.Stop(1)
	c.Start(1)
	c.WaitReady(30 * time.Second)
	wantLines(t, "describe after a restart", ok(t, bs, "", "features", "describe"), finalized("4.1-IV1"))

	for _, args := range [][]string{
		{"upgrade"},
		{"upgrade", "--metadata", "3.x"},
		{"upgrade", "--feature", "group.version"},
		{"upgrade", "--metadata", "4.0", "--release-version", "4.0"},
		{"disable", "--feature", "group.version=0"},
	} {
		if res := keel(t, bs, "", append([]string{"features"}, args...)...); res.exit == 0 {
			t.Errorf("features %s succeeded:\n%s", strings.Join(args, " "), res.stdout)
		}
	}
}
