package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const coreutilsScript = `set -e
seq 1 60000 > src.txt
cat src.txt src.txt > cat.txt
sort -n src.txt -o sorted.txt
sort -rn cat.txt > rsorted.txt
cp src.txt cp.txt
dd if=src.txt of=dd.txt bs=4096 status=none
dd if=src.txt of=dd.txt bs=1000 seek=3 count=7 conv=notrunc status=none
mkdir -p x && tar cf t.tar src.txt sorted.txt && tar xf t.tar -C x
head -c 100000 cat.txt | tail -c 5000 > ht.txt
wc -l < cat.txt
sha256sum src.txt cat.txt sorted.txt rsorted.txt cp.txt dd.txt x/src.txt x/sorted.txt ht.txt
`

func TestCoreutils(t *testing.T) {
	r := compare(t, "bash", "-c", coreutilsScript)
	requireOurs(t, r)
	// Every file read was written just before through the mount, so it is
	// resident: reads are hits; new data goes to shared memory too (the
	// lease), appends (>>) take the kernel path. A new-page write that
	// meets the daemon's harvest holding the file's lock falls back to the
	// kernel and counts as a miss (seen: one 4 KiB write of dd in about one
	// run in five); the report does not tell read misses from those.
	if r.FastRead == 0 || r.FastWrite == 0 || r.Stdio == 0 || r.FastMisses > 2 {
		t.Fatalf("expected fast reads, fast writes and stdio streams on our fds: %+v", r)
	}
}

const bashScript = `set -e
echo one > f
(echo two >> f)
printf '%s\n' three >> f
{ echo four; echo five; } >> f
while read -r l; do echo "got $l"; done < f
exec 3< f; read -r first <&3; exec 3<&-; echo "first $first"
echo "$(< f)" | wc -c
`

func TestBash(t *testing.T) {
	r := compare(t, "bash", "-c", bashScript)
	requireOurs(t, r)
}

const pythonScript = `
import hashlib, numpy as np, h5py
a = np.arange(300000, dtype=np.float64).reshape(600, 500) * 0.5
np.save("a.npy", a)
b = np.load("a.npy")
assert (a == b).all()
with h5py.File("d.h5", "w") as f:
    f.create_dataset("x", data=a, chunks=(100, 100), compression="gzip")
    f["x"].attrs["units"] = "K"
    f.create_group("g").create_dataset("y", data=np.arange(1000, dtype=np.int32))
with h5py.File("d.h5", "r") as f:
    assert (f["x"][...] == a).all()
    print(f["x"].attrs["units"], int(f["g/y"][...].sum()))
with open("raw.bin", "wb") as f:
    f.write(a.tobytes())
with open("raw.bin", "rb") as f:
    print(hashlib.sha256(f.read()).hexdigest())
print(hashlib.sha256(open("a.npy", "rb").read()).hexdigest())
`

func TestPythonNumpyH5py(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy, h5py").Run(); err != nil {
		t.Skip("no python3 with numpy and h5py")
	}
	r := compare(t, py, "-c", pythonScript)
	requireOurs(t, r)
}

const cdl = `netcdf d {
dimensions:
	time = 4 ;
	lat = 3 ;
variables:
	double temperature(time, lat) ;
		temperature:units = "K" ;
	int time(time) ;
data:
	temperature = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 ;
	time = 0, 6, 12, 18 ;
}
`

func TestNcdumpH5dump(t *testing.T) {
	for _, p := range []string{"ncgen", "ncdump", "h5dump"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s", p)
		}
	}
	script := `set -e
cat > d.cdl <<'CDL'
` + cdl + `CDL
ncgen -k nc4 -o d4.nc d.cdl
ncgen -k classic -o d3.nc d.cdl
ncdump d4.nc
ncdump d3.nc
h5dump -A d4.nc | grep -v '^HDF5 '
`
	r := compare(t, "bash", "-c", script)
	requireOurs(t, r)
}

// TestFioVerify runs fio with --thread: fio's job processes end with
// _exit, which skips the exit-time report.
func TestFioVerify(t *testing.T) {
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("no fio")
	}
	onMount, _ := setup(t)
	for _, rw := range []string{"write", "randwrite", "randrw"} {
		_, r := run(t, onMount, true, nil, "fio", "--name=v-"+rw, "--filename=fio-"+rw, "--rw="+rw,
			"--bs=4k", "--size=8m", "--ioengine=psync", "--verify=crc32c", "--do_verify=1",
			"--verify_state_save=0", "--verify_fatal=1", "--thread", "--output-format=terse")
		requireOurs(t, r)
		if r.KernelWrite+r.FastWrite < 8<<20 {
			t.Fatalf("fio %s: %d bytes written through the shim's fds: %+v", rw, r.KernelWrite+r.FastWrite, r)
		}
		// fio lays the file out first (kernel writes: new pages), then
		// the job's writes hit resident pages in shared memory.
		if r.FastWrite < 4<<20 {
			t.Fatalf("fio %s: only %d bytes on the fast write path: %+v", rw, r.FastWrite, r)
		}
		t.Logf("fio %s: %+v", rw, r)
	}
}

func TestForkWithoutExec(t *testing.T) {
	bin := cc(t, "fork", "gcc")
	onMount, _ := setup(t)
	out, r := run(t, onMount, true, nil, bin, onMount)
	if out != "ok\n" {
		t.Fatalf("fork: %q", out)
	}
	requireOurs(t, r)
	if r.Children != 1 || r.Procs != 2 {
		t.Fatalf("want a report from the parent and one from the forked child: %+v", r)
	}
}

func TestThreads(t *testing.T) {
	bin := cc(t, "threads", "gcc")
	onMount, _ := setup(t)
	out, r := run(t, onMount, true, nil, bin, onMount)
	if out != "ok\n" {
		t.Fatalf("threads: %q", out)
	}
	requireOurs(t, r)
	if r.Opens != 9 {
		t.Fatalf("want 9 opens of ours: %+v", r)
	}
}

func TestMmap(t *testing.T) {
	bin := cc(t, "mmap", "gcc")
	onMount, _ := setup(t)
	out, r := run(t, onMount, true, nil, bin, filepath.Join(onMount, "m.bin"))
	if out != "ok\n" {
		t.Fatalf("mmap: %q", out)
	}
	requireOurs(t, r)
}

func TestFdTable(t *testing.T) {
	bin := cc(t, "fdtable", "gcc")
	onMount, onTmpfs := setup(t)
	out, r := run(t, onMount, true, nil, bin, onMount, onTmpfs)
	if out != "ok\n" {
		t.Fatalf("fdtable: %q", out)
	}
	// Bytes on our fds: "A" "B" "C\n" "Z" written, "ZBC\n" read by fgets.
	// "to-other\n" went through a number that was ours before dup2.
	if r.KernelWrite+r.FastWrite != 5 {
		t.Fatalf("bytes written on our fds: want 5 (the fd table followed dup2/F_DUPFD/close_range/dup3): %+v", r)
	}
}

func TestSecurity(t *testing.T) {
	bin := cc(t, "security", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "ro.txt")
	if err := os.WriteFile(p, []byte("read only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, onMount, true, nil, bin, p); out != "ok\n" {
		t.Fatalf("security: %q", out)
	}
	// Another uid cannot open the file for writing, so it never gets a
	// writable capability for it.
	if _, err := exec.LookPath("setpriv"); err == nil {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", "echo x >> "+p)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
		if err := cmd.Run(); err == nil {
			t.Fatal("uid 65534 wrote a 0644 file of root through the shim")
		}
	}
}

func TestMPIIO(t *testing.T) {
	bin := cc(t, "mpiio", "mpicc")
	onMount, onTmpfs := setup(t)
	mpirun := func(dir string, shim bool) (string, Report) {
		args := []string{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4"}
		if shim {
			args = append(args, "-x", "LD_PRELOAD", "-x", "IOWARP_REPORT")
		}
		return run(t, dir, shim, nil, append(args, bin, dir)...)
	}
	if out, _ := mpirun(onTmpfs, false); !strings.Contains(out, "ok") {
		t.Fatalf("mpiio on tmpfs: %q", out)
	}
	out, r := mpirun(onMount, true)
	if !strings.Contains(out, "ok") {
		t.Fatalf("mpiio on the mount: %q", out)
	}
	requireOurs(t, r)
	if r.MPI == 0 {
		t.Fatalf("the MPI_File wrappers saw no call: %+v", r)
	}
	for _, f := range []string{"shared.dat", "rank0.dat", "rank3.dat"} {
		a, _ := os.ReadFile(filepath.Join(onMount, f))
		b, _ := os.ReadFile(filepath.Join(onTmpfs, f))
		if len(a) == 0 || string(a) != string(b) {
			t.Fatalf("%s differs from the tmpfs run (%d vs %d bytes)", f, len(a), len(b))
		}
	}
}

// TestCoherence: bytes written under the shim read back identically
// without it, at once, and the other way round.
func TestCoherence(t *testing.T) {
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "c.txt")
	run(t, onMount, true, nil, "bash", "-c", "seq 1 5000 > "+p+"; dd if=/dev/zero of="+p+" bs=1 count=3 seek=10 conv=notrunc status=none")
	want, _ := exec.Command("bash", "-c", "seq 1 5000 | head -c 10; printf '\\0\\0\\0'; seq 1 5000 | tail -c +14").Output()
	got, _ := os.ReadFile(p)
	if string(got) != string(want) {
		t.Fatalf("plain read after shim write: %d bytes, want %d", len(got), len(want))
	}
	if err := os.WriteFile(p, []byte("plain write\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, r := run(t, onMount, true, nil, "cat", p)
	if out != "plain write\n" {
		t.Fatalf("shim read after plain write: %q", out)
	}
	requireOurs(t, r)
}

// TestPaths: IOWARP_PATHS sends a hard-coded path into the mount.
func TestPaths(t *testing.T) {
	onMount, _ := setup(t)
	fake := "/iowarp-shim-test-lustre"
	env := []string{"IOWARP_PATHS=" + fake + "=" + onMount}
	_, r := run(t, "/", true, env, "bash", "-c", "mkdir "+fake+"/d && echo hi > "+fake+"/d/f && cat "+fake+"/d/f && stat -c %s "+fake+"/d/f && ls "+fake+"/d")
	if b, err := os.ReadFile(filepath.Join(onMount, "d", "f")); err != nil || string(b) != "hi\n" {
		t.Fatalf("redirected file: %q %v", b, err)
	}
	requireOurs(t, r)
	if _, err := os.Stat(fake); err == nil {
		t.Fatalf("%s was created outside the mount", fake)
	}
}

// TestFastReadHits: a file written through the mount is resident in the
// RAM tier; reading it under the shim must be served from shared memory
// (every byte, no kernel read), and identical to the file.
func TestFastReadHits(t *testing.T) {
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "hot.bin")
	data := make([]byte, 8<<20+12345)
	for i := range data {
		data[i] = byte(i*131 + i>>12)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, r := run(t, onMount, true, nil, "cat", p)
	if out != string(data) {
		t.Fatalf("cat under the shim: %d bytes differ from the file", len(out))
	}
	if r.FastRead != int64(len(data)) || r.KernelRead != 0 || r.FastHits == 0 {
		t.Fatalf("want every byte read on the fast path: %+v", r)
	}
	// A write through the kernel (another process, no shim) is seen by
	// the next fast read at once.
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("CHANGED"), 4096)
	f.WriteAt([]byte("TAIL"), int64(len(data)))
	f.Close()
	copy(data[4096:], "CHANGED")
	data = append(data, "TAIL"...)
	out, r = run(t, onMount, true, nil, "cat", p)
	if out != string(data) || r.FastRead != int64(len(data)) {
		t.Fatalf("fast read after a plain write: equal=%v %+v", out == string(data), r)
	}
	// IOWARP_NOFAST=1 turns the fast path off: the kernel path carries it.
	_, r = run(t, onMount, true, []string{"IOWARP_NOFAST=1"}, "cat", p)
	if r.FastRead != 0 || r.KernelRead != int64(len(data)) {
		t.Fatalf("IOWARP_NOFAST: %+v", r)
	}
}
