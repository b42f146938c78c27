package raftlog

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestParseInitialControllers(t *testing.T) {
	dirID := NewClusterID()
	got, err := ParseInitialControllers("1@ctl1:9093:" + dirID + ", 2@[::1]:9094,3@ctl3:9095:" + NewClusterID())
	if err != nil {
		t.Fatal(err)
	}
	if FormatVoters(got) != "1@ctl1:9093,2@[::1]:9094,3@ctl3:9095" {
		t.Fatalf("parsed %s", FormatVoters(got))
	}
	for _, bad := range []string{"", "1@ctl1", "1@ctl1:9093:notauuid", "x@ctl1:9093", "1@ctl1:9093,1@ctl2:9093"} {
		if _, err := ParseInitialControllers(bad); err == nil || !strings.Contains(err.Error(), "--initial-controllers") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestInitialVotersFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadInitialVoters(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unformatted dir: %v", err)
	}
	voters := map[int32]string{1: "ctl1:9093", 2: "ctl2:9093", 3: "ctl3:9093"}
	if err := WriteInitialVoters(dir, voters); err != nil {
		t.Fatal(err)
	}
	got, err := ReadInitialVoters(dir)
	if err != nil || FormatVoters(got) != FormatVoters(voters) {
		t.Fatalf("read %v: %v", got, err)
	}
	// Formatting again with the same voters is a no-op; with others, an
	// error: the quorum a dir was formatted for does not change.
	if err := WriteInitialVoters(dir, voters); err != nil {
		t.Fatal(err)
	}
	if err := WriteInitialVoters(dir, map[int32]string{1: "ctl1:9093"}); err == nil || !strings.Contains(err.Error(), `formatted with initial controllers "1@ctl1:9093,2@ctl2:9093,3@ctl3:9093"`) {
		t.Fatalf("reformat with other voters: %v", err)
	}
	if err := WriteInitialVoters(dir, nil); err == nil {
		t.Fatal("a dir formatted with voters reformatted to join")
	}
	// --no-initial-controllers: an empty list, read back as nil voters; the
	// dir cannot then be formatted with voters.
	join := t.TempDir()
	if err := WriteInitialVoters(join, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadInitialVoters(join); err != nil || got != nil {
		t.Fatalf("joining dir: %v %v", got, err)
	}
	if err := WriteInitialVoters(join, voters); err == nil {
		t.Fatal("a joining dir reformatted with voters")
	}
}
