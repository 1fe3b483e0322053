package posixtest

import (
	"os"
	"sort"
	"strings"
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

// TestForeignAccessOnTmpfs validates ForeignAccess: two tmpfs runs agree,
// and the other user is refused the 0000 file and the file under the 0000
// directory.
func TestForeignAccessOnTmpfs(t *testing.T) {
	u := TestUser(t)
	a, b := RefDir(t), RefDir(t)
	for _, d := range []string{a, b} {
		os.Chmod(d, 0o755)
	}
	c := func(t *testing.T, dir string) Transcript { return ForeignAccess(t, dir, u, nil) }
	Compare(t, a, b, c)
	tr := Run(t, subdir(t, a), c)
	if testing.Verbose() {
		t.Logf("transcript:\n  %s", joinLines(tr))
	}
	for _, want := range []string{"cat f0000 -> rc=1 cat: f0000: Permission denied", "cat d0000/g -> rc=1 cat: d0000/g: Permission denied"} {
		if !strings.Contains(strings.Join(tr, "\n"), want) {
			t.Errorf("transcript lacks %q:\n%s", want, joinLines(tr))
		}
	}
}
