package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/units"
)

// needTrace skips unless `iowarp trace` can run here (root, FUSE for the
// mount, a kernel with BTF).
func needTrace(t *testing.T) {
	t.Helper()
	requireMount(t)
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("no BPF-capable kernel here")
	}
}

// trace runs `iowarp trace` of argv with m's daemon for the pool side and
// returns its output (the command's and the summary), failing the test
// if either fails.
func (m *mount) trace(extra []string, argv ...string) string {
	m.t.Helper()
	args := append([]string{"trace", "--top", "0", "--control-dir", m.ctl}, extra...)
	out, err := exec.Command(m.bin, append(append(args, "--"), argv...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("trace %v: %v\n%s", argv, err, out)
	}
	return string(out)
}

// poolRow is the pool-side row of path in a trace's summary: hits, RAM,
// file tier, misses, read via daemon, written via daemon, staged in,
// (stage reads), written back, file.
func poolRow(t *testing.T, out, path string) []string {
	t.Helper()
	i := strings.Index(out, "pool side")
	if i < 0 {
		t.Fatalf("no pool side in\n%s", out)
	}
	for _, l := range strings.Split(out[i:], "\n") {
		if strings.HasSuffix(l, "  "+path) {
			return strings.Fields(l)
		}
	}
	t.Fatalf("no pool-side row of %s in\n%s", path, out)
	return nil
}

// TestTraceJoinsPool: iowarp trace of dd writing into the mount and of dd
// reading it back shows, next to the calls the program made, what the
// pool did for that file in the same interval: the bytes written through
// the daemon and written back (conv=fsync), then the page reads served
// from the pool, by tier, and the tiers' use on the --html timeline.
func TestTraceJoinsPool(t *testing.T) {
	needTrace(t)
	m := startMount(t, config{})
	f := m.path("traced")
	page := filepath.Join(t.TempDir(), "trace.html")
	html := []string{"--html", page}
	out := m.trace(html, "dd", "if=/dev/zero", "of="+f, "bs=1M", "count=8", "conv=fsync")
	// hits RAM file-tier misses read written staged (reads) written-back file
	if r := poolRow(t, out, f); r[5] != "8MiB" || r[8] != "8MiB" {
		t.Fatalf("writer's pool side %v, want 8MiB written through the daemon and written back\n%s", r, out)
	}
	out = m.trace(html, "dd", "if="+f, "of=/dev/null", "bs=1M", "iflag=direct")
	r := poolRow(t, out, f)
	ram, _ := strconv.Atoi(r[1])
	file, _ := strconv.Atoi(r[2])
	if r[0] != "8" || ram+file != 8 || r[3] != "0" || r[4] != "8MiB" {
		t.Fatalf("reader's pool side %v, want 8 hits, each from a tier, and no miss\n%s", r, out)
	}
	// The timeline has the mount's tiers' use, sampled during the trace.
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `<g class="tier" data-mount="`+m.dir+`" data-tier="`) {
		t.Fatalf("the timeline has no tier of %s:\n%.3000s", m.dir, b)
	}
}

// rwCounts are read and write calls on one file and the bytes they moved.
type rwCounts struct{ Writes, Written, Reads, Read int64 }

// darshanCounts is what a trace's Darshan output counted on path.
func darshanCounts(t *testing.T, darshan, path string) rwCounts {
	t.Helper()
	b, err := os.ReadFile(darshan)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// POSIX rank id counter value file mount fstype
		f := strings.Split(sc.Text(), "\t")
		if len(f) == 8 && f[5] == path {
			v[f[3]], _ = strconv.ParseInt(f[4], 10, 64)
		}
	}
	if len(v) == 0 {
		t.Fatalf("no Darshan record of %s:\n%s", path, b)
	}
	return rwCounts{v["POSIX_WRITES"], v["POSIX_BYTES_WRITTEN"], v["POSIX_READS"], v["POSIX_BYTES_READ"]}
}

// rwPrinted is the line adapters/ebpf/testdata/rw.c and rwgo print of
// their own calls.
func rwPrinted(t *testing.T, out string) rwCounts {
	t.Helper()
	var c rwCounts
	for _, l := range strings.Split(out, "\n") {
		if n, _ := fmt.Sscanf(l, "writes %d bytes %d reads %d bytes %d", &c.Writes, &c.Written, &c.Reads, &c.Read); n == 4 {
			return c
		}
	}
	t.Fatalf("the program printed no counts:\n%s", out)
	return c
}

// ddPrinted is what dd says it did: records in (reads), records out
// (writes) and bytes copied (each way).
func ddPrinted(t *testing.T, out string) (in, outs, bytes int64) {
	t.Helper()
	var partial int64
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasSuffix(l, " records in"):
			fmt.Sscanf(l, "%d+%d records in", &in, &partial)
		case strings.HasSuffix(l, " records out"):
			fmt.Sscanf(l, "%d+%d records out", &outs, &partial)
		case strings.Contains(l, " bytes ") && strings.Contains(l, " copied"):
			fmt.Sscanf(l, "%d bytes", &bytes)
		}
	}
	if bytes == 0 {
		t.Fatalf("dd printed no counts:\n%s", out)
	}
	return in, outs, bytes
}

// tracePrograms are the test programs of TestTracePrograms, built once:
// the static C and the Go program of adapters/ebpf/testdata.
func tracePrograms(t *testing.T) (static, goProg string) {
	t.Helper()
	dir := t.TempDir()
	static = filepath.Join(dir, "rw")
	if out, err := exec.Command("cc", "-static", "-O1", "-o", static, "../adapters/ebpf/testdata/rw.c").CombinedOutput(); err != nil {
		t.Skipf("cc -static: %v\n%s", err, out)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH")
	}
	goProg = filepath.Join(dir, "rwgo")
	build := exec.Command(gobin, "build", "-o", goProg, "main.go")
	build.Dir = "../adapters/ebpf/testdata/rwgo"
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return static, goProg
}

// TestTracePrograms: a static C binary, a Go program and dd, each writing
// a file and reading it back in an iowarp mount and in tmpfs, traced by
// `iowarp trace`: the calls and bytes the trace counted on the file (its
// Darshan counters) equal those the program says it made. On the mount
// the pool side of the same interval shows the bytes written through the
// daemon and written back to the backing directory (the programs fsync),
// which then holds what the program wrote.
func TestTracePrograms(t *testing.T) {
	needTrace(t)
	static, goProg := tracePrograms(t)
	m := startMount(t, config{})
	shm, err := os.MkdirTemp("/dev/shm", "iowarp-trace-")
	if err != nil {
		t.Skip("no /dev/shm")
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	var fs unix.Statfs_t
	if err := unix.Statfs(shm, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skipf("/dev/shm is not tmpfs (%v)", err)
	}
	darshan := filepath.Join(t.TempDir(), "d.txt")
	for _, where := range []struct {
		name, dir string
		mount     bool
	}{{"mount", m.dir, true}, {"tmpfs", shm, false}} {
		for _, prog := range []struct {
			name string
			bin  string
		}{{"static", static}, {"go", goProg}} {
			t.Run(where.name+"/"+prog.name, func(t *testing.T) {
				f := filepath.Join(where.dir, prog.name)
				out := m.trace([]string{"--darshan", darshan}, prog.bin, f)
				did := rwPrinted(t, out)
				if got := darshanCounts(t, darshan, f); got != did {
					t.Fatalf("traced %+v, the program did %+v\n%s", got, did, out)
				}
				if where.mount {
					checkWrittenBack(t, m, out, f, did.Written)
				}
			})
		}
		t.Run(where.name+"/dd", func(t *testing.T) {
			f := filepath.Join(where.dir, "dd")
			out := m.trace([]string{"--darshan", darshan}, "dd", "if=/dev/zero", "of="+f, "bs=64k", "count=40", "conv=fsync")
			_, writes, n := ddPrinted(t, out)
			if got := darshanCounts(t, darshan, f); got.Writes != writes || got.Written != n {
				t.Fatalf("traced %+v, dd wrote %d records, %d bytes\n%s", got, writes, n, out)
			}
			if where.mount {
				checkWrittenBack(t, m, out, f, n)
			}
			out = m.trace([]string{"--darshan", darshan}, "dd", "if="+f, "of=/dev/null", "bs=32k", "count=80")
			reads, _, n := ddPrinted(t, out)
			if got := darshanCounts(t, darshan, f); got.Reads != reads || got.Read != n {
				t.Fatalf("traced %+v, dd read %d records, %d bytes\n%s", got, reads, n, out)
			}
		})
	}
}

// checkWrittenBack: the pool side of the trace in out shows the bytes the
// program wrote to f, all of them, through the daemon and written back,
// and no more than the file holds (the write-back writes the dirty ranges
// of a page, not the holes between them); the backing directory's copy
// of f is then the mount's. The pool side prints rounded sizes: they are
// compared as printed.
func checkWrittenBack(t *testing.T, m *mount, out, f string, written int64) {
	t.Helper()
	st, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	r := poolRow(t, out, f)
	printed := func(n int64) int64 { v, _ := units.ParseSize(units.FormatSize(n)); return v }
	back, err := units.ParseSize(r[8])
	if err != nil {
		t.Fatal(err)
	}
	if r[5] != units.FormatSize(written) || back < printed(written) || back > printed(st.Size()) {
		t.Fatalf("pool side %v, want %s written through the daemon and %s to %s written back\n%s",
			r, units.FormatSize(written), units.FormatSize(written), units.FormatSize(st.Size()), out)
	}
	rel, _ := filepath.Rel(m.dir, f)
	if a, b := sha256File(t, f), sha256File(t, filepath.Join(m.backing, rel)); a != b {
		t.Fatalf("the backing copy of %s differs from the mount's after the write-back", f)
	}
}

// TestTraceColdRead: a file in the backing directory that the pool does
// not hold, read through the mount by dd under `iowarp trace`: the pool
// side shows the pages dd read staged in from the backing directory, the
// bytes staged in equal to those dd read, and each page read once by the
// daemon (a miss, or a hit on a page the read-ahead after the first miss
// staged in); dd reading it again is served from the pool (hits, nothing
// staged).
func TestTraceColdRead(t *testing.T) {
	needTrace(t)
	m := startMount(t, config{})
	const pages = 6 // of 1 MiB (files.DefaultPageSize)
	writeRandomFile(t, filepath.Join(m.backing, "cold"), pages<<20, 11)
	f := m.path("cold")
	out := m.trace(nil, "dd", "if="+f, "of=/dev/null", "bs=1M", "iflag=direct")
	reads, _, n := ddPrinted(t, out)
	// hits RAM file-tier misses read written staged (reads) written-back file
	r := poolRow(t, out, f)
	hits, _ := strconv.Atoi(r[0])
	misses, _ := strconv.Atoi(r[3])
	if reads != pages || n != pages<<20 || hits+misses != pages || misses < 1 || r[6] != units.FormatSize(n) || r[7] == "(0)" {
		t.Fatalf("dd read %d records, %d bytes; pool side %v, want %d page reads, a miss among them, and %s staged in\n%s",
			reads, n, r, pages, units.FormatSize(n), out)
	}
	out = m.trace(nil, "dd", "if="+f, "of=/dev/null", "bs=1M", "iflag=direct")
	if r := poolRow(t, out, f); r[0] != strconv.Itoa(pages) || r[3] != "0" || r[6] != "0B" {
		t.Fatalf("the second read's pool side %v, want %d hits, nothing staged\n%s", r, pages, out)
	}
}
