package zarr

import "testing"

// Fixtures is fixtures for the external tests (package zarr_test).
func Fixtures(t *testing.T) string { return fixtures(t) }
