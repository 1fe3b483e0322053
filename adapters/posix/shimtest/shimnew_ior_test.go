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
// byte written, and the reads of the freshly written data too.
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
			// In one shared file a rank's first transfer may race the
			// other rank's page past it (the page table's new_from has
			// not moved yet) and take the kernel path: at most one per
			// rank, nothing lost (-W checked every word). Measured: 1 of
			// 16 MiB, once, at load 8; known, in the closing note.
			slack := int64(0)
			if !strings.Contains(c.name, "fpp") {
				slack = 2 << 20
			}
			if r.FastWrite+r.KernelWrite != 2*block || r.KernelWrite > slack {
				t.Fatalf("want the 2 ranks' %d bytes written on the fast path (at most %d through the kernel): %+v", 2*block, slack, r)
			}
			if r.KernelWrite > 0 {
				t.Logf("%s: %d bytes of a first transfer took the kernel path", c.name, r.KernelWrite)
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
