package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/keelstream/keel/metadata"
)

// InitialVotersFile records, in metadata.log.dir, the voters a dynamic
// quorum (KIP-853: controller.quorum.bootstrap.servers, no
// controller.quorum.voters) was formatted with: keel format --standalone or
// --initial-controllers writes it, as kafka-storage.sh format writes its
// bootstrap checkpoint. They bootstrap the quorum on its first start; from
// then on the Raft log holds the voters, which AddVoter and RemoveVoter
// change. A controller formatted with --no-initial-controllers, to join a
// running quorum, has the file with an empty list (ReadInitialVoters: nil
// voters).
const InitialVotersFile = "initial-controllers.properties"

const initialVotersKey = "initial.controllers"

// WriteInitialVoters writes dir's InitialVotersFile atomically, creating dir
// if needed. An existing file naming other voters is an error: the quorum
// a dir was formatted for does not change.
func WriteInitialVoters(dir string, voters map[int32]string) error {
	want := FormatVoters(voters) // "" for a controller that joins later
	switch have, err := ReadInitialVoters(dir); {
	case err == nil && FormatVoters(have) == want:
		return nil
	case err == nil:
		return fmt.Errorf("format %s: it was formatted with initial controllers %q, not %q",
			dir, FormatVoters(have), want)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	var b bytes.Buffer
	b.WriteString("# The metadata quorum's voters, as formatted (keel format --standalone or --initial-controllers;\n")
	b.WriteString("# empty: --no-initial-controllers, a controller that joins with add-controller).\n")
	fmt.Fprintf(&b, "%s=%s\n", initialVotersKey, want)
	if err := writeFileAtomic(filepath.Join(dir, InitialVotersFile), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	return nil
}

// ReadInitialVoters reads dir's InitialVotersFile. A dir not formatted with
// initial controllers returns an error matching fs.ErrNotExist.
func ReadInitialVoters(dir string) (map[int32]string, error) {
	path := filepath.Join(dir, InitialVotersFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	props, err := parseProperties(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if v, ok := props[initialVotersKey]; ok && strings.TrimSpace(v) == "" {
		return nil, nil // formatted to join a running quorum
	}
	voters, err := ParseVoters(props[initialVotersKey])
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return voters, nil
}

// FormatVoters writes voters in controller.quorum.voters' syntax, by id.
func FormatVoters(voters map[int32]string) string {
	var parts []string
	for _, id := range sortedVoterIDs(voters) {
		parts = append(parts, fmt.Sprintf("%d@%s", id, voters[id]))
	}
	return strings.Join(parts, ",")
}

// ParseInitialControllers parses kafka-storage.sh format's
// --initial-controllers, "id@host:port:directoryId,...". Each directory id
// (a Kafka Uuid, KIP-853's voter identity) is optional here and not kept:
// Keel identifies a voter by its node id alone. Without them the value is
// controller.quorum.voters' syntax.
func ParseInitialControllers(s string) (map[int32]string, error) {
	entries := strings.Split(s, ",")
	for i, e := range entries {
		e = strings.TrimSpace(e)
		at := strings.LastIndexByte(e, ':')
		// host:port:uuid: the part after the last colon is a Uuid, not a
		// port, and what precedes it still ends with a port.
		if at > 0 && strings.Contains(e[:at], ":") {
			if _, err := metadata.ParseUuid(e[at+1:]); err == nil {
				e = e[:at]
			}
		}
		entries[i] = e
	}
	voters, err := ParseVoters(strings.Join(entries, ","))
	if err != nil {
		return nil, fmt.Errorf("--initial-controllers: %w", err)
	}
	return voters, nil
}
