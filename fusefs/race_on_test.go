//go:build race

package fusefs

// raceEnabled: the race detector slows the test process, which serves the
// mount, five to ten times; the largest tests shrink under it.
const raceEnabled = true
