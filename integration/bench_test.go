package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The MPI programs of make bench (bench/ior.c, bench/mdtest.c), built with
// mpicc and run under mpirun -np 2 on a temporary directory with tiny
// sizes: they exit 0, print one parsable line per phase, and their checks
// catch corrupted, swapped and missing data.

// benchProg compiles bench/NAME.c with mpicc into a temporary directory.
func benchProg(t *testing.T, name string) string {
	t.Helper()
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skip("mpicc is missing (make deps installs libopenmpi-dev)")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is missing (make deps installs openmpi-bin)")
	}
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command(mpicc, "-O2", "-Wall", "-o", bin, filepath.Join("..", "bench", name+".c")).CombinedOutput()
	if err != nil {
		t.Fatalf("mpicc %s.c: %v\n%s", name, err, out)
	}
	return bin
}

// mpirun2 runs bin with args on two ranks; it returns stdout, stderr and
// the error of the run.
func mpirun2(t *testing.T, bin string, args ...string) (string, string, error) {
	t.Helper()
	argv := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", "2", bin}, args...)
	cmd := exec.Command("mpirun", argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustMPI is mpirun2 that fails the test unless the run exits 0.
func mustMPI(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, errOut, err := mpirun2(t, bin, args...)
	if err != nil {
		t.Fatalf("mpirun %s %v: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, out, errOut)
	}
	return out
}

// benchLines parses the "PROG k=v k=v ..." lines of out, keyed by the
// value of key (op for ior, phase for mdtest).
func benchLines(t *testing.T, out, prog, key string) map[string]map[string]string {
	t.Helper()
	lines := map[string]map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != prog {
			continue
		}
		kv := map[string]string{}
		for _, p := range f[1:] {
			k, v, ok := strings.Cut(p, "=")
			if !ok {
				t.Fatalf("%s: field %q is not k=v in %q", prog, p, l)
			}
			kv[k] = v
		}
		lines[kv[key]] = kv
	}
	return lines
}

func num(t *testing.T, kv map[string]string, k string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(kv[k], 64)
	if err != nil {
		t.Fatalf("%s=%q in %v: %v", k, kv[k], kv, err)
	}
	return v
}

func TestBenchIOR(t *testing.T) {
	ior := benchProg(t, "ior")
	const block = 4 << 20
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"posix-fpp", []string{"-a", "POSIX", "-F"}},
		{"posix-shared-fsync", []string{"-a", "POSIX", "-e"}},
		{"mpiio-fpp-fsync", []string{"-a", "MPIIO", "-F", "-e"}},
		{"mpiio-shared", []string{"-a", "MPIIO"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append(tc.args, "-t", "1m", "-b", "4m", "-C", "-W", "-w", "-r", "-o", filepath.Join(dir, "f"))
			lines := benchLines(t, mustMPI(t, ior, args...), "ior", "op")
			for _, op := range []string{"write", "read"} {
				kv, ok := lines[op]
				if !ok {
					t.Fatalf("no %s line: %v", op, lines)
				}
				if num(t, kv, "bytes") != 2*block || num(t, kv, "ranks") != 2 || num(t, kv, "bw_mib") <= 0 || num(t, kv, "time_s") <= 0 {
					t.Fatalf("%s: %v", op, kv)
				}
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("without -k the files stay: %v", left)
			}
		})
	}
}

// TestBenchIORVerify: a read phase (-r -W) over data that is not what the
// writer of each byte wrote fails.
func TestBenchIORVerify(t *testing.T) {
	ior := benchProg(t, "ior")
	t.Run("corrupt-shared", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "f")
		common := []string{"-a", "POSIX", "-t", "1m", "-b", "2m", "-C", "-W", "-k", "-o", f}
		mustMPI(t, ior, append(common, "-w")...)
		mustMPI(t, ior, append(common, "-r")...) // intact: reads back clean
		// Rank 0 reads rank 1's block (-C): one word of it changed.
		fd, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fd.WriteAt([]byte("CORRUPT!"), 3<<20+4096); err != nil {
			t.Fatal(err)
		}
		fd.Close()
		_, errOut, err := mpirun2(t, ior, append(common, "-r")...)
		if err == nil || !strings.Contains(errOut, "verify") {
			t.Fatalf("a corrupted word was not caught: err %v\n%s", err, errOut)
		}
	})
	t.Run("swapped-mpiio-fpp", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "f")
		common := []string{"-a", "MPIIO", "-F", "-t", "1m", "-b", "2m", "-C", "-W", "-k", "-o", f}
		mustMPI(t, ior, append(common, "-w")...)
		// Each file now holds the other rank's data.
		a, b := f+".00000000", f+".00000001"
		for _, mv := range [][2]string{{a, f + ".tmp"}, {b, a}, {f + ".tmp", b}} {
			if err := os.Rename(mv[0], mv[1]); err != nil {
				t.Fatal(err)
			}
		}
		_, errOut, err := mpirun2(t, ior, append(common, "-r")...)
		if err == nil || !strings.Contains(errOut, "verify") {
			t.Fatalf("another rank's data was not caught: err %v\n%s", err, errOut)
		}
	})
}

func TestBenchMdtest(t *testing.T) {
	md := benchProg(t, "mdtest")
	for _, tc := range []struct {
		name  string
		args  []string
		dirs  float64
		depth string
	}{
		{"flat", nil, 1, "0"},
		{"tree", []string{"-z", "2", "-b", "3"}, 13, "2"},
		{"tree-unique", []string{"-z", "1", "-b", "4", "-u"}, 10, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lines := benchLines(t, mustMPI(t, md, append(tc.args, "-n", "50", "-w", "3", "-d", dir)...), "mdtest", "phase")
			for _, p := range []string{"tree_create", "create", "stat", "remove", "tree_remove"} {
				kv, ok := lines[p]
				if !ok {
					t.Fatalf("no %s line: %v", p, lines)
				}
				want := 100.0
				if strings.HasPrefix(p, "tree_") {
					want = tc.dirs
				}
				if num(t, kv, "items") != want || kv["depth"] != tc.depth || num(t, kv, "ops_s") <= 0 {
					t.Fatalf("%s: want %v items at depth %s: %v", p, want, tc.depth, kv)
				}
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("the tree stays after the remove phase: %v", left)
			}
		})
	}
}

// TestBenchMdtestVerify: the stat phase (-T) fails on a missing file and
// on a file of the wrong size.
func TestBenchMdtestVerify(t *testing.T) {
	md := benchProg(t, "mdtest")
	dir := t.TempDir()
	common := []string{"-n", "20", "-z", "1", "-b", "2", "-w", "5", "-d", dir}
	mustMPI(t, md, append(common, "-C")...)
	mustMPI(t, md, append(common, "-T")...)
	if err := os.Remove(filepath.Join(dir, "mdtest_tree.0", "d1", "file.mdtest.1.7")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "mdtest_tree.0", "d0", "file.mdtest.0.4"), 2); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := mpirun2(t, md, append(common, "-T")...)
	if err == nil || !strings.Contains(errOut, "file.mdtest.1.7") || !strings.Contains(errOut, "file.mdtest.0.4") {
		t.Fatalf("stat did not catch the missing and the short file: err %v\n%s", err, errOut)
	}
}
