package fusefs

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// bdiValue reads a sysfs setting of the mount's backing device.
func bdiValue(t *testing.T, dir, name string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/%s", unix.Major(st.Dev), unix.Minor(st.Dev), name))
	if err != nil {
		t.Skipf("no sysfs: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// TestBDI: the mount's readahead is MaxReadAhead (1 MiB by default), not
// the 128 KiB the kernel caps FUSE_INIT's max_readahead at; with the
// writeback cache its share of the dirty limit is wbMaxRatio, not 1%.
func TestBDI(t *testing.T) {
	for _, c := range []struct {
		opts         Options
		ra, maxRatio string
	}{
		{Options{MaxReadAhead: 512 << 10}, "512", "1"},
		{Options{}, "1024", "1"},
		{Options{WritebackCache: true}, "1024", fmt.Sprint(wbMaxRatio)},
	} {
		tm := newTestMountOpts(t, files.Scratch, c.opts)
		if got := bdiValue(t, tm.dir, "read_ahead_kb"); got != c.ra {
			t.Errorf("%+v: read_ahead_kb %s, want %s", c.opts, got, c.ra)
		}
		if got := bdiValue(t, tm.dir, "max_ratio"); got != c.maxRatio {
			t.Errorf("%+v: max_ratio %s, want %s", c.opts, got, c.maxRatio)
		}
	}
}
