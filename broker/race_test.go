//go:build race

package broker

// raceEnabled scales tests down under the race detector.
const raceEnabled = true
