package zarr

import (
	"os"
	"testing"

	"github.com/iowarp/iowarp/internal/leakcheck"
)

// TestMain fails the package if its tests leak an fd or a FUSE mount, and
// removes the zarr-python fixtures.
func TestMain(m *testing.M) {
	code := leakcheck.Run(m.Run)
	removeFixtures()
	os.Exit(code)
}
