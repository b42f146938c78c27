//go:build !race

package integration

// raceEnabled: the test binary runs under the race detector, and so does
// the keel binary that Binary builds.
const raceEnabled = false
