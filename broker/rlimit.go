package broker

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RaiseOpenFileLimit lifts RLIMIT_NOFILE as far as this process may: the
// soft limit to the hard one (Go already does that much at start), and,
// when privileged, the hard limit to fs.nr_open (at most 1 Mi). Every
// partition holds its active segment's .log open, and every connection a
// socket, so Kafka's own guidance is a limit of 100,000 or more. It returns
// the soft limit in force afterwards.
func RaiseOpenFileLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	want := uint64(1 << 20)
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			want = min(want, n)
		}
	}
	if want > lim.Max {
		raised := unix.Rlimit{Cur: want, Max: want}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err == nil {
			return want, nil
		}
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}
