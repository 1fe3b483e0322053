package fusefs

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The kernel tunes a FUSE mount's backing device (bdi) for untrusted
// daemons; two of its settings cost this one throughput, and only sysfs
// raises them (root, which a mount(2) of ours is anyway):
//
//   - read_ahead_kb: FUSE_INIT's max_readahead is capped at the device's
//     default, 128 KiB, whatever the daemon asks for. At the pool's page
//     size a sequential reader's READ requests are up to 1 MiB (max_pages)
//     instead: measured on fio 1 MiB psync reads, 1.2x the throughput.
//   - max_ratio: a FUSE bdi may hold 1% of the dirty page limit (strict),
//     so with the writeback cache a writer is throttled as soon as 1% of
//     it is dirty. At wbMaxRatio, fio's 4 KiB random writes into a 256 MiB
//     file ran 3-4x faster. The limit exists against a daemon that writes
//     into its own mount (it would wait on its own dirty pages); ours
//     writes to the backing store and the pool only.

// wbMaxRatio is the mount's share of the dirty page limit (percent) with
// the writeback cache.
const wbMaxRatio = 50

// tuneBDI sets the bdi of the mount on dir: readahead to ra bytes, and
// with the writeback cache its dirty share to wbMaxRatio.
func tuneBDI(dir string, ra int, writeback bool) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("bdi: stat %s: %w", dir, err)
	}
	bdi := fmt.Sprintf("/sys/class/bdi/%d:%d/", unix.Major(st.Dev), unix.Minor(st.Dev))
	if err := os.WriteFile(bdi+"read_ahead_kb", []byte(strconv.Itoa(ra>>10)), 0); err != nil {
		return fmt.Errorf("bdi readahead (sequential reads stay at 128 KiB requests): %w", err)
	}
	if !writeback {
		return nil
	}
	if err := os.WriteFile(bdi+"max_ratio", []byte(strconv.Itoa(wbMaxRatio)), 0); err != nil {
		return fmt.Errorf("bdi max_ratio (writers throttled at 1%% of the dirty limit): %w", err)
	}
	return nil
}
