package main

import (
	"os"
	"path/filepath"
	"testing"
)

// freePageReporting finds a balloon device whose features include free
// page reporting (bit 5), and nothing else: another device with bit 5, a
// balloon without it, no virtio at all.
func TestFreePageReporting(t *testing.T) {
	device := func(dir, name, id, features string) {
		t.Helper()
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, v := range map[string]string{"device": id + "\n", "features": features + "\n"} {
			if err := os.WriteFile(filepath.Join(d, file), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// This VM's devices: a balloon (stats, deflate-on-OOM, reporting) and a
	// network card with bit 5 set too.
	reporting := t.TempDir()
	device(reporting, "virtio0", "0x0005", "0110010100000000000000000000000010")
	device(reporting, "virtio1", "0x0001", "1100010110111011000000000000010010")
	if !freePageReporting(reporting) {
		t.Error("a balloon with free page reporting was not found")
	}
	noReporting := t.TempDir()
	device(noReporting, "virtio0", "0x0005", "0110000100000000000000000000000010")
	device(noReporting, "virtio1", "0x0001", "1100010110111011000000000000010010")
	if freePageReporting(noReporting) {
		t.Error("a balloon without free page reporting (and a network card with bit 5) was taken for one with it")
	}
	if freePageReporting(filepath.Join(t.TempDir(), "absent")) {
		t.Error("no virtio devices at all was taken for free page reporting")
	}
}
