package cluster

import (
	"os"
	"testing"

	"github.com/iowarp/iowarp/internal/leakcheck"
)

// TestMain fails the package if its tests leak an fd or a FUSE mount.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run)) }
