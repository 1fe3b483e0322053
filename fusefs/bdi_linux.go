package fusefs

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// setReadAhead sets the kernel readahead of the mount on dir to ra bytes.
// The kernel caps FUSE_INIT's max_readahead at its backing device's
// default (128 KiB), whatever the daemon asks for; only the device's
// read_ahead_kb in sysfs raises it. With it at the pool's page size a
// sequential reader's READ requests are up to 1 MiB (max_pages) instead of
// 128 KiB: measured on fio 1 MiB psync reads, 1.2x the throughput.
func setReadAhead(dir string, ra int) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("readahead: stat %s: %w", dir, err)
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	if err := os.WriteFile(p, []byte(strconv.Itoa(ra>>10)), 0); err != nil {
		return fmt.Errorf("readahead: %w", err)
	}
	return nil
}
