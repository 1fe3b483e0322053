package ebpf

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestGeneratedUpToDate: the committed object was built from the
// committed source (go generate ./adapters/ebpf rewrites both).
func TestGeneratedUpToDate(t *testing.T) {
	src, err := os.ReadFile("bpf/trace.c")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile("trace_bpfel.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if got := strings.Fields(string(rec)); len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
		t.Fatal("bpf/trace.c changed since trace_bpfel.o was generated: run go generate ./adapters/ebpf")
	}
	if _, err := os.Stat("trace_bpfel.o"); err != nil {
		t.Fatal(err)
	}
}

// needBPF skips where the tracer cannot load, saying why; a kernel that
// has BPF but refuses the programs is a failure.
func needBPF(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("tracing needs root")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("no BPF-capable kernel here (no /sys/kernel/btf/vmlinux)")
	}
	if _, err := CgroupRoot(); err != nil {
		t.Skip(err)
	}
}

// traceRun runs argv traced and returns the aggregate.
func traceRun(t *testing.T, argv ...string) *Aggregator {
	t.Helper()
	return traceRunWith(t, Options{}, argv...)
}

func traceRunWith(t *testing.T, opt Options, argv ...string) *Aggregator {
	t.Helper()
	a, _ := traceRunOut(t, opt, argv...)
	return a
}

// traceRunOut runs argv traced and returns the aggregate and what argv
// printed.
func traceRunOut(t *testing.T, opt Options, argv ...string) (*Aggregator, string) {
	t.Helper()
	a := NewAggregator()
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := Run(cmd, opt, a.Add); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out.String())
	}
	return a, out.String()
}

func fileOf(t *testing.T, a *Aggregator, path string) *FileStats {
	t.Helper()
	f := a.files[path]
	if f == nil {
		var names []string
		for _, f := range a.Files() {
			names = append(names, f.Path)
		}
		t.Fatalf("%s not traced; files: %v", path, names)
	}
	return f
}

// TestTraceDD: dd into tmpfs: the reads of /dev/zero and the writes of the
// output, each counted exactly, with their sizes and sequentiality.
func TestTraceDD(t *testing.T) {
	needBPF(t)
	dir, err := os.MkdirTemp("/dev/shm", "iowarp-trace-")
	if err != nil {
		t.Skip("no /dev/shm")
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "o")
	a := traceRun(t, "dd", "if=/dev/zero", "of="+out, "bs=4k", "count=256")
	f := fileOf(t, a, out)
	if f.Writes != 256 || f.BytesWritten != 1<<20 || f.Opens != 1 || f.WriteSizes[bucketOf(4096)] != 256 {
		t.Fatalf("%s: %+v", out, f)
	}
	if f.SeqWrites != 255 || f.ConsecWrite != 255 || f.MaxWriteEnd != 1<<20 {
		t.Fatalf("sequential %d consecutive %d max %d", f.SeqWrites, f.ConsecWrite, f.MaxWriteEnd)
	}
	// /dev/zero's file position does not move: its reads are sequential
	// by the position the tracer follows, as Darshan counts them.
	if z := fileOf(t, a, "/dev/zero"); z.Reads != 256 || z.BytesRead != 1<<20 || z.SeqReads != 255 || z.ConsecReads != 255 {
		t.Fatalf("/dev/zero: %+v", z)
	}
}

// TestTraceBlock: the requests issued to the disk during a trace are
// counted per device: dd writing 4 MiB with O_DIRECT to a file on a
// block device's file system (the counts are every process's: at least
// those).
func TestTraceBlock(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil || unix.Major(st.Dev) == 0 {
		t.Skipf("%s is not on a block device", dir)
	}
	out := filepath.Join(dir, "o")
	a := traceRun(t, "dd", "if=/dev/zero", "of="+out, "bs=1M", "count=4", "oflag=direct")
	dev := blockName(uint32(unix.Major(st.Dev))<<20 | uint32(unix.Minor(st.Dev)))
	for _, b := range a.Block {
		if b.Dev == dev {
			if b.Bytes[1] < 4<<20 || b.Requests[1] < 1 {
				t.Fatalf("%s: %+v, want at least 4 MiB written", dev, b)
			}
			return
		}
	}
	t.Fatalf("no requests to %s counted: %+v", dev, a.Block)
}

// buildC compiles the C program src into dir/name (static: linked with
// -static, so no libc call reaches the kernel other than as a syscall
// the tracer sees) and returns its path.
func buildC(t *testing.T, dir, name, src string, static bool) string {
	t.Helper()
	c, bin := filepath.Join(dir, name+".c"), filepath.Join(dir, name)
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-O1", "-o", bin, c}
	if static {
		args = append([]string{"-static"}, args...)
	}
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", args, err, out)
	}
	return bin
}

// rwCounts is what testdata/rw.c and testdata/rwgo print: the read and
// write calls they made on their file and the bytes those moved.
type rwCounts struct{ Writes, Written, Reads, Read int64 }

// printedCounts finds the line of rwCounts in a program's output.
func printedCounts(t *testing.T, out string) rwCounts {
	t.Helper()
	var c rwCounts
	for _, l := range strings.Split(out, "\n") {
		if n, _ := fmt.Sscanf(l, "writes %d bytes %d reads %d bytes %d", &c.Writes, &c.Written, &c.Reads, &c.Read); n == 4 {
			return c
		}
	}
	t.Fatalf("no counts printed in %q", out)
	return c
}

// traced is what the trace counted on f, as rwCounts.
func traced(f *FileStats) rwCounts {
	return rwCounts{f.Writes, f.BytesWritten, f.Reads, f.BytesRead}
}

// TestTraceStatic: a static binary's calls are all seen: the counts it
// prints of its own calls equal the trace's, and the sizes and offsets
// are those it used.
func TestTraceStatic(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/rw.c")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildC(t, dir, "rw", string(src), true)
	data := filepath.Join(dir, "data")
	a, out := traceRunOut(t, Options{}, bin, data)
	f := fileOf(t, a, data)
	// 1000 writes of 123, 7 pwrites of 4096, a pread of 5000, then the
	// file (1 MiB + 6 x 8 KiB + 4 KiB) read in 64 KiB reads and one at
	// its end.
	size := int64(1<<20 + 6*8192 + 4096)
	want := rwCounts{1007, 1000*123 + 7*4096, 1 + (size+65535)/65536 + 1, 5000 + size}
	if got := printedCounts(t, out); got != want {
		t.Fatalf("the program says %+v, want %+v", got, want)
	}
	if got := traced(f); got != want || f.Syncs != 3 || f.Opens != 2 {
		t.Fatalf("traced %+v (%d syncs, %d opens), the program did %+v, 3 fsyncs, 2 opens", got, f.Syncs, f.Opens, want)
	}
	if f.MaxWriteEnd != size || f.WriteSizes[bucketOf(123)] != 1000 || f.WriteSizes[bucketOf(4096)] != 7 {
		t.Fatalf("max %d sizes %v", f.MaxWriteEnd, f.WriteSizes)
	}
}

// fdReuseProg gives fd numbers to other files: it writes 10 × 100 bytes
// to a on fd 3, closes it, writes 20 × 200 to b, which gets fd 3 again,
// 5 × 50 to c on fd 4, then dup2s 3 onto 4 and writes 3 × 300 through
// 4 (to b), and reads b back with read and pread.
const fdReuseProg = `#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char buf[512];
	memset(buf, 'y', sizeof buf);
	int a = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0644);
	for (int i = 0; i < 10; i++) write(a, buf, 100);
	close(a);
	int b = open(argv[2], O_CREAT | O_TRUNC | O_RDWR, 0644);
	int c = open(argv[3], O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (a != 3 || b != 3 || c != 4) return 1;
	for (int i = 0; i < 20; i++) write(b, buf, 200);
	for (int i = 0; i < 5; i++) write(c, buf, 50);
	dup2(b, c);
	for (int i = 0; i < 3; i++) write(c, buf, 300);
	lseek(b, 0, SEEK_SET);
	for (int i = 0; i < 8; i++) read(b, buf, 500);
	for (int i = 0; i < 4; i++) pread(b, buf, 100, 1000 * i);
	return 0;
}
`

// TestTraceCountsInKernel: the reads and writes the kernel counts per
// process and fd land on the file the fd named when they were made, as
// the fd numbers pass from file to file (close and reopen, dup2 over an
// fd with counts), and the counts equal those of the same program traced
// with every call sent to user space (Options.Every).
func TestTraceCountsInKernel(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	bin := buildC(t, dir, "p", fdReuseProg, true)
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	type want struct {
		writes, written, reads, read int64
	}
	wants := map[string]want{a: {10, 1000, 0, 0}, b: {23, 4900, 12, 4400}, c: {5, 250, 0, 0}}
	var stats [2]map[string]FileStats
	for i, opt := range []Options{{}, {Every: true}} {
		agg := traceRunWith(t, opt, bin, a, b, c)
		stats[i] = map[string]FileStats{}
		for p, w := range wants {
			f := fileOf(t, agg, p)
			if f.Writes != w.writes || f.BytesWritten != w.written || f.Reads != w.reads || f.BytesRead != w.read {
				t.Fatalf("every=%v %s: %+v, want %+v", opt.Every, p, f, w)
			}
			g := *f
			g.ReadTime, g.WriteTime, g.MetaTime, g.First, g.Last, g.Pids = 0, 0, 0, 0, 0, nil
			stats[i][p] = g
		}
		if n := agg.Calls["write"]; n != 38 {
			t.Errorf("every=%v: %d writes counted, want 38", opt.Every, n)
		}
	}
	for p := range wants {
		if !reflect.DeepEqual(stats[0][p], stats[1][p]) {
			t.Errorf("%s counted in the kernel:\n%+v\nevery call in user space:\n%+v", p, stats[0][p], stats[1][p])
		}
	}
}

// buildGo builds the Go program in testdata/NAME into dir (static, no
// cgo) and returns its path.
func buildGo(t *testing.T, dir, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH")
	}
	bin, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goBin, "build", "-o", bin, "main.go")
	build.Dir = filepath.Join("testdata", name)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestTraceGo: a Go program (raw syscalls, no libc) is seen: the counts
// it prints of its own calls equal the trace's.
func TestTraceGo(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	bin := buildGo(t, dir, "rwgo")
	data := filepath.Join(dir, "data")
	a, out := traceRunOut(t, Options{}, bin, data)
	f := fileOf(t, a, data)
	// 40 writes of 64 KiB, a ReadAt of 1000, the file read back in 32
	// KiB reads and one at its end.
	want := rwCounts{40, 40 * 65536, 1 + 80 + 1, 1000 + 40*65536}
	if got := printedCounts(t, out); got != want {
		t.Fatalf("the program says %+v, want %+v", got, want)
	}
	if got := traced(f); got != want || f.Syncs != 1 {
		t.Fatalf("traced %+v (%d syncs), the program did %+v and 1 fsync", got, f.Syncs, want)
	}
}

// TestTracePids: tracing a process sees its I/O (here dd, exec'd in the
// traced process) and no other process's, even at the same time.
func TestTracePids(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	mine, other := filepath.Join(dir, "mine"), filepath.Join(dir, "other")
	sh := exec.Command("sh", "-c", `read go; exec dd if=/dev/zero of="$1" bs=4k count=10 2>/dev/null`, "sh", mine)
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Options{Pids: []int{sh.Process.Pid}})
	if err != nil {
		sh.Process.Kill()
		sh.Wait()
		t.Fatal(err)
	}
	defer tr.Close()
	noise := exec.Command("dd", "if=/dev/zero", "of="+other, "bs=4k", "count=50")
	if err := noise.Start(); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	in.Close()
	if err := sh.Wait(); err != nil {
		t.Fatal(err)
	}
	noise.Wait()
	a := NewAggregator()
	for {
		tr.SetDeadline(time.Now().Add(200 * time.Millisecond))
		e, err := tr.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(e)
	}
	if err := tr.Flush(a.Add); err != nil {
		t.Fatal(err)
	}
	if f := fileOf(t, a, mine); f.Writes != 10 || f.BytesWritten != 40960 {
		t.Fatalf("the traced process: %+v", f)
	}
	if f := a.files[other]; f != nil {
		t.Fatalf("an untraced process's file traced: %+v", f)
	}
	if ev, _ := tr.Dropped(); ev != 0 {
		t.Errorf("%d events dropped", ev)
	}
}

// spawnProg waits for a line on stdin, then posix_spawns dd with its
// stdout opened on argv[1] by the spawn's file actions: glibc runs them
// in a vfork child (CLONE_VM|CLONE_VFORK), before exec and while the
// parent waits in clone, so the open is the child's first traced call.
const spawnProg = `#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv) {
	char line[16];
	if (!fgets(line, sizeof line, stdin)) return 1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *dd[] = {"dd", "if=/dev/zero", "bs=4k", "count=64", "status=none", 0};
	pid_t pid;
	if (posix_spawnp(&pid, "dd", &fa, 0, dd, environ)) return 2;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 3;
}
`

// TestTracePidsVforkChild: with --pid, a vfork child is traced from its
// first call: the open its spawn made before exec (while the parent
// waited in clone, whose return the tracer would otherwise follow it
// from) and all the writes dd then made on it.
func TestTracePidsVforkChild(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	bin := buildC(t, dir, "spawn", spawnProg, false)
	out := filepath.Join(dir, "out")
	p := exec.Command(bin, out)
	in, err := p.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Options{Pids: []int{p.Process.Pid}})
	if err != nil {
		p.Process.Kill()
		p.Wait()
		t.Fatal(err)
	}
	defer tr.Close()
	in.Write([]byte("go\n"))
	in.Close()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	a := NewAggregator()
	for {
		tr.SetDeadline(time.Now().Add(200 * time.Millisecond))
		e, err := tr.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(e)
	}
	if err := tr.Flush(a.Add); err != nil {
		t.Fatal(err)
	}
	f := fileOf(t, a, out)
	if f.Opens != 1 || f.Writes != 64 || f.BytesWritten != 64*4096 || f.SeqWrites != 63 {
		t.Fatalf("the spawned child's file: %+v", f)
	}
	if len(f.Pids) != 1 || f.Pids[p.Process.Pid] {
		t.Fatalf("written by %v, want the child alone (parent %d)", f.Pids, p.Process.Pid)
	}
}

// TestTraceHTML: the timeline page of a trace renders in headless
// Chromium (no network, nothing fetched) with a row for the written file
// holding write marks, the tiers' use over the trace, and the per-file
// table.
func TestTraceHTML(t *testing.T) {
	needBPF(t)
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium missing (make deps)")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "o")
	a := NewAggregator()
	a.Timeline = NewTimeline()
	cmd := exec.Command("dd", "if=/dev/zero", "of="+out, "bs=64k", "count=64")
	if err := Run(cmd, Options{}, a.Add); err != nil {
		t.Fatal(err)
	}
	// Tier use as `iowarp trace --html` samples it from the daemons.
	t0 := Now()
	for i, used := range []int64{1 << 20, 3 << 20, 2 << 20} {
		a.Timeline.AddTiers(TierSample{Time: t0 + time.Duration(i)*time.Millisecond, Mount: "/mnt/<w>",
			Tiers: []TierUse{{Name: "ram", Kind: "ram", Used: used, Capacity: 4 << 20}, {Name: "nvme", Kind: "file", Capacity: 1 << 30}}})
	}
	page := filepath.Join(dir, "t.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Timeline.WriteHTML(f, a, "dd <test> & co"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dom, err := exec.Command(chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+page).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	d := string(dom)
	row := `data-file="` + out + `"`
	i := strings.Index(d, row)
	if i < 0 || !strings.Contains(d, `<svg id="timeline"`) || !strings.Contains(d, `<table id="files"`) {
		t.Fatalf("rendered page lacks the timeline, the row of %s or the table:\n%.2000s", out, d)
	}
	g := d[i:]
	g = g[:strings.Index(g, "</g>")]
	if strings.Count(g, `class="write"`) == 0 {
		t.Fatalf("the row of %s has no write marks: %.500s", out, g)
	}
	for _, tier := range []string{`data-tier="ram" data-kind="ram" data-samples="3"`, `data-tier="nvme" data-kind="file" data-samples="3"`} {
		j := strings.Index(d, `<g class="tier" data-mount="/mnt/&lt;w&gt;" `+tier)
		if j < 0 {
			t.Fatalf("no tier row %s in the page:\n%.3000s", tier, d[strings.Index(d, "<svg"):])
		}
		g := d[j:]
		g = g[:strings.Index(g, "</g>")]
		if !strings.Contains(g, "<polyline") || strings.Count(g, ",") < 3 {
			t.Fatalf("tier row without its line: %s", g)
		}
	}
	if !strings.Contains(d, "ram: 2MiB of 4MiB") {
		t.Error("the ram tier's label does not say its last use")
	}
	if !strings.Contains(d, "<title>dd &lt;test&gt; &amp; co</title>") {
		t.Error("title not escaped")
	}
	if !strings.Contains(d, ">"+out+"</td>") {
		t.Error("the table has no row for the written file")
	}
}
