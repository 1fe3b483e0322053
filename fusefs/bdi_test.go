package fusefs

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestReadAhead: the mount's readahead is the pool's page size, not the
// 128 KiB the kernel caps FUSE_INIT's max_readahead at.
func TestReadAhead(t *testing.T) {
	for _, c := range []struct {
		ra   int
		want string
	}{{512 << 10, "512"}, {0, "1024"}} {
		tm := newTestMountOpts(t, files.Scratch, Options{MaxReadAhead: c.ra})
		var st unix.Stat_t
		if err := unix.Stat(tm.dir, &st); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev)))
		if err != nil {
			t.Skipf("no sysfs: %v", err)
		}
		if got := strings.TrimSpace(string(b)); got != c.want {
			t.Errorf("MaxReadAhead %d: read_ahead_kb %s, want %s", c.ra, got, c.want)
		}
	}
}
