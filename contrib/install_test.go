package contrib

import (
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstall: `make install DESTDIR=... PREFIX=/usr` puts every piece
// where the docs say, with the install paths substituted, a stripped
// binary that reports the git version and commit, and an `iowarp run`
// that finds the installed libiowarp.so with no flag or variable; `make
// uninstall` removes it all again.
func TestInstall(t *testing.T) {
	root := install(t)
	for _, f := range []struct {
		path string
		mode fs.FileMode // permission bits, 0 = not checked
	}{
		{"/usr/bin/iowarp", 0o755},
		{"/usr/lib/iowarp/libiowarp.so", 0o755},
		{"/usr/lib/iowarp/libiowarp_py.so", 0o755},
		{"/usr/lib/python3/dist-packages/iowarp/__init__.py", 0},
		{"/usr/lib/python3/dist-packages/iowarp/xarray_backend.py", 0},
		{"/usr/lib/systemd/system/iowarp.service", 0o644},
		{"/usr/lib/systemd/system/iowarp@.service", 0o644},
		{"/usr/libexec/iowarp/iowarp-slurm-prolog", 0o755},
		{"/usr/libexec/iowarp/iowarp-slurm-epilog", 0o755},
		{"/usr/libexec/iowarp/iowarp-slurm-cluster", 0o755},
		{"/usr/share/bash-completion/completions/iowarp", 0},
		{"/usr/share/zsh/site-functions/_iowarp", 0},
		{"/usr/share/fish/vendor_completions.d/iowarp.fish", 0},
		{"/usr/share/man/man1/iowarp.1", 0o644},
		{"/usr/share/man/man1/iowarp-mount.1", 0o644},
		{"/usr/share/man/man1/iowarp-runtime-start.1", 0o644},
		{"/etc/iowarp/iowarp.yaml", 0o644},
	} {
		st, err := os.Stat(filepath.Join(root, f.path))
		if err != nil {
			t.Errorf("not installed: %v", err)
			continue
		}
		if st.Size() == 0 {
			t.Errorf("%s is empty", f.path)
		}
		if f.mode != 0 && st.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, st.Mode().Perm(), f.mode)
		}
	}
	for _, p := range []string{"/usr/lib/systemd/system/iowarp.service", "/usr/libexec/iowarp/iowarp-slurm-prolog"} {
		b, _ := os.ReadFile(filepath.Join(root, p))
		if strings.Contains(string(b), "DIR@") {
			t.Errorf("%s: placeholders left:\n%s", p, b)
		}
		if !strings.Contains(string(b), "/usr/bin/iowarp") {
			t.Errorf("%s does not name /usr/bin/iowarp", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "/usr/libexec/iowarp/iowarp-slurm-prolog")); !strings.Contains(string(b), "/usr/libexec/iowarp/iowarp-slurm-cluster") {
		t.Errorf("the prolog does not name the installed iowarp-slurm-cluster")
	}
	bin := filepath.Join(root, "/usr/bin/iowarp")
	checkVersion(t, bin)
	checkStripped(t, bin)
	if out, err := exec.Command(bin, "config", "check", filepath.Join(root, "/etc/iowarp/iowarp.yaml")).CombinedOutput(); err != nil {
		t.Errorf("the example config does not check: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "/usr/share/bash-completion/completions/iowarp")); !strings.Contains(string(b), "__start_iowarp") {
		t.Errorf("bash completion lacks __start_iowarp")
	}
	checkRunFindsShim(t, bin, filepath.Join(root, "/usr/lib/iowarp/libiowarp.so"))
	checkUninstall(t, root)
}

// checkVersion: --version prints `git describe --always --dirty` and the
// commit, as the Makefile stamps them.
func checkVersion(t *testing.T, bin string) {
	t.Helper()
	describe, err1 := exec.Command("git", "describe", "--always", "--dirty").Output()
	head, err2 := exec.Command("git", "rev-parse", "HEAD").Output()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("iowarp --version: %v: %s", err, out)
	}
	if err1 != nil || err2 != nil {
		t.Logf("not a git checkout: version %s", out)
		return
	}
	want := "iowarp version " + strings.TrimSpace(string(describe)) + " (commit " + strings.TrimSpace(string(head)) + ","
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("iowarp --version printed %q, want the prefix %q", out, want)
	}
}

// checkStripped: -s -w leave neither a symbol table nor DWARF.
func checkStripped(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{".symtab", ".debug_info"} {
		if f.Section(name) != nil {
			t.Errorf("%s has a %s section: not built with -s -w", bin, name)
		}
	}
}

// checkRunFindsShim: the installed `iowarp run` preloads the installed
// library (found relative to the binary: ../lib/iowarp).
func checkRunFindsShim(t *testing.T, bin, lib string) {
	t.Helper()
	cmd := exec.Command(bin, "run", "--", "/bin/sh", "-c", `printf %s "$LD_PRELOAD"`)
	cmd.Env = append(withoutEnv("IOWARP_LIB", "LD_PRELOAD", "IOWARP_STRICT"), "IOWARP_STRICT=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("iowarp run: %v", err)
	}
	if string(out) != lib {
		t.Errorf("iowarp run set LD_PRELOAD=%q, want %q", out, lib)
	}
}

// checkUninstall runs make uninstall on a copy of the tree (the other
// tests use the original) and expects nothing left but directories.
func checkUninstall(t *testing.T, root string) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "tree")
	if out, err := exec.Command("cp", "-a", root, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	out, err := exec.Command("make", "-C", "..", "uninstall", "DESTDIR="+cp, "PREFIX="+prefix,
		"SYSCONFDIR="+sysconfdir).CombinedOutput()
	if err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	filepath.WalkDir(cp, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left after make uninstall: %s", strings.TrimPrefix(p, cp))
		}
		return nil
	})
}

// withoutEnv is the environment less the named variables.
func withoutEnv(names ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		keep := true
		for _, n := range names {
			keep = keep && k != n
		}
		if keep {
			env = append(env, e)
		}
	}
	return env
}
