package posixtest

import (
	"sort"
	"testing"
)

// TestCasesOnTmpfs validates the suite itself: every case run on two
// reference directories must pass its invariants and agree with itself.
func TestCasesOnTmpfs(t *testing.T) {
	var keys []string
	for k := range Cases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	a, b := RefDir(t), RefDir(t)
	for _, k := range keys {
		t.Run(k, func(t *testing.T) {
			Compare(t, a, b, Cases[k])
		})
	}
}

// TestTranscriptsStable runs each case twice on one directory and prints
// the transcript with -v, for reviewing what a case records.
func TestTranscriptsStable(t *testing.T) {
	dir := RefDir(t)
	for k, c := range Cases {
		tr := Run(t, subdir(t, dir), c)
		if testing.Verbose() {
			t.Logf("%s:\n  %s", k, joinLines(tr))
		}
		if len(tr) == 0 {
			t.Errorf("%s: empty transcript", k)
		}
	}
}

func joinLines(tr Transcript) string {
	s := ""
	for i, l := range tr {
		if i > 0 {
			s += "\n  "
		}
		s += l
	}
	return s
}
