package shimtest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestIORVerify: bench/ior.c (IOR's -a POSIX|MPIIO -t 1m -b BLOCK [-F] -C
// -e -W patterns) under the shim with 2 ranks (mpirun --oversubscribe):
// each rank writes its block of new data, fsyncs, and reads back the
// other rank's, checking every word against the writer's pattern (-W:
// rank, offset and run are in each word). The fast path carries every
// byte written, file per process and in one shared file, and the reads of
// the freshly written data too.
func TestIORVerify(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("no mpirun")
	}
	bin := ccFile(t, filepath.Join(repoRoot(), "bench", "ior.c"), "mpicc")
	onMount, _ := setup(t)
	const block = 8 << 20
	for _, c := range []struct {
		name string
		args []string
	}{
		{"posix-fpp", []string{"-a", "POSIX", "-F"}},
		{"posix-shared", []string{"-a", "POSIX"}},
		{"mpiio-fpp", []string{"-a", "MPIIO", "-F"}},
		{"mpiio-shared", []string{"-a", "MPIIO"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
				"-x", "LD_PRELOAD", "-x", "IOWARP_REPORT", bin}
			args = append(args, c.args...)
			args = append(args, "-t", "1m", "-b", "8m", "-C", "-e", "-W", "-o", filepath.Join(onMount, c.name))
			out, r := run(t, onMount, true, nil, args...)
			if strings.Count(out, "ior op=") != 2 {
				t.Fatalf("ior output: %q", out)
			}
			requireOurs(t, r)
			// Every byte written goes fast, in one shared file too: a
			// rank's block lies below the size the other rank raised
			// (holes: the page table's new_from stays at the size the
			// file had when the first grant published it). A rank that
			// opened after the other had written its block took the
			// kernel path for all of its own (TestHolesBelowAnotherWriter).
			if r.FastWrite != 2*block || r.KernelWrite != 0 {
				t.Fatalf("want the 2 ranks' %d bytes written on the fast path: %+v", 2*block, r)
			}
			if r.FastRead != 2*block || r.KernelRead != 0 {
				t.Fatalf("want the 2 ranks' %d bytes read back on the fast path: %+v", 2*block, r)
			}
			t.Logf("%s: %s", c.name, strings.TrimSpace(out))
		})
	}
}

// ccFile compiles the C program at src (with mpicc for MPI programs).
func ccFile(t *testing.T, src, compiler string) string {
	t.Helper()
	if _, err := exec.LookPath(compiler); err != nil {
		t.Skipf("no %s", compiler)
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	if out, err := exec.Command(compiler, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", compiler, src, err, out)
	}
	return bin
}
