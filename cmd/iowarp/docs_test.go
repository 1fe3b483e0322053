package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestManPages: `iowarp docs man DIR` writes a page per command, with
// its flags escaped for roff, and groff (when installed) reads every
// page without a warning.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	n, err := writeManPages(newRootCmd(), dir)
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if n != len(pages) || n < 10 {
		t.Fatalf("wrote %d pages, %d on disk", n, len(pages))
	}
	mount, err := os.ReadFile(filepath.Join(dir, "iowarp-mount.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH "IOWARP-MOUNT" 1`, ".SH SYNOPSIS", `\-b, \-\-backing string`,
		".SH EXAMPLE", `.BR iowarp (1)`, ".SH OPTIONS INHERITED FROM PARENT COMMANDS"} {
		if !strings.Contains(string(mount), want) {
			t.Errorf("iowarp-mount.1 lacks %q:\n%s", want, mount)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "iowarp-help.1")); err == nil {
		t.Error("a page for the help command")
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("no groff: pages not rendered")
		return
	}
	for _, p := range pages {
		out, err := exec.Command(groff, "-man", "-ww", "-z", p).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff %s: %v: %s", filepath.Base(p), err, out)
		}
	}
}

func TestRoffText(t *testing.T) {
	for in, want := range map[string]string{
		`--flag a\b`:        `\-\-flag a\eb`,
		".start\n'quote\nx": "\\&.start\n\\&'quote\nx",
	} {
		if got := roffText(in); got != want {
			t.Errorf("roffText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVersionFlag: --version and `iowarp version` print the version and
// the commit (set at link time by make build).
func TestVersionFlag(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v9.9-test", "abc123"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		root := newRootCmd()
		var out strings.Builder
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "iowarp version v9.9-test (commit abc123, go") {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
}
