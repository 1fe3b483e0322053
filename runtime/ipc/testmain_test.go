package ipc

import (
	"os"
	"testing"

	"github.com/iowarp/iowarp/internal/leakcheck"
)

// TestMain fails the package if its tests leak an fd or a FUSE mount;
// the server shared by fuzz inputs is closed first.
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(func() int {
		code := m.Run()
		if fuzzSrv != nil {
			fuzzSrv.Close()
		}
		return code
	}))
}
