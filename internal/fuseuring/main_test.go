package fuseuring

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/internal/leakcheck"
)

// TestMain fails the package if its tests leak an fd or a mount, and
// puts enable_uring back as it was.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(func() int { return Preserve(m.Run) })) }

// ringFds counts the process's io_uring instances; leakcheck ignores
// anonymous inodes, so the tests count these themselves.
func ringFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, "[io_uring]") {
			n++
		}
	}
	return n
}

func TestPossibleCPUs(t *testing.T) {
	n, err := possibleCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatalf("possible CPUs = %d", n)
	}
}
