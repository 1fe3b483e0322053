//go:build !race

package fusefs

// raceEnabled: see race_on_test.go.
const raceEnabled = false
