package main

import (
	"os"
	"path/filepath"
	"strings"
)

// sysVirtioDevices is where Linux lists a guest's virtio devices.
const sysVirtioDevices = "/sys/bus/virtio/devices"

// Virtio's balloon device and its free page reporting feature bit
// (VIRTIO_BALLOON_F_REPORTING, virtio 1.2 §5.5.3).
const (
	virtioBalloonDevice    = "0x0005"
	virtioBalloonReporting = 5
)

// freePageReporting reports whether dir (sysVirtioDevices) lists a balloon
// device that negotiated free page reporting: the hypervisor then takes
// back the memory this guest leaves free, and the page cache of a growing
// log pays a host fault for each page it takes from there (README, Storage
// on disk, Page cache). Each device's features file holds one '0' or '1'
// per feature bit, bit 0 first.
func freePageReporting(dir string) bool {
	devices, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, d := range devices {
		id, err := os.ReadFile(filepath.Join(dir, d.Name(), "device"))
		if err != nil || strings.TrimSpace(string(id)) != virtioBalloonDevice {
			continue
		}
		features, err := os.ReadFile(filepath.Join(dir, d.Name(), "features"))
		if err == nil && len(features) > virtioBalloonReporting && features[virtioBalloonReporting] == '1' {
			return true
		}
	}
	return false
}
