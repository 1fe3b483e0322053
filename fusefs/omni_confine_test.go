package fusefs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/testenv"
)

// asUser runs a command as uid:gid and returns its stdout and error.
func asUser(uid, gid uint32, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: stderr.Bytes()}
	}
	return out, nil
}

const foreignScript = `
import sys, os, h5py, numpy as np
out, secret_bin, secret_h5 = sys.argv[1:4]
def ext(name, path):
    with h5py.File(os.path.join(out, name), "w") as f:
        f.create_dataset("x", shape=(1000,), dtype="<i4", external=[(path, 0, 4000)])
ext("ext_abs.h5", secret_bin)
ext("ext_rel.h5", "../secret.bin")
ext("ext_own.h5", "own.bin")
np.arange(1000, dtype="<i4").tofile(os.path.join(out, "own.bin"))
with h5py.File(os.path.join(out, "vds.h5"), "w") as f:
    lay = h5py.VirtualLayout(shape=(1000,), dtype="<i4")
    lay[:] = h5py.VirtualSource(secret_h5, "x", shape=(1000,))
    f.create_virtual_dataset("x", lay, fillvalue=0)
with h5py.File(os.path.join(out, "ok.h5"), "w") as f:
    f["x"] = np.arange(1000, dtype="<i4")
with h5py.File(secret_h5, "w") as f:
    f["x"] = np.full(1000, 0x5a5a5a5a, dtype="<i4")
`

// TestOMNIForeignSources: HDF5 files with external storage or a virtual
// dataset naming root-only files, dropped into a 1777 directory of an
// allow_other mount by a second user, give that user EACCES or EIO
// through .omni, never the bytes; that user's plain file reads.
func TestOMNIForeignSources(t *testing.T) {
	py := omniPython(t)
	uid, gid := testenv.User(t)
	om := newOMNIMountWith(t, omniConfig{mode: files.Writeback, allowOther: true})
	base := filepath.Dir(om.dir)
	for _, d := range []string{base, filepath.Dir(base)} {
		os.Chmod(d, 0o755) // t.TempDir is 0700: the helper of uid must reach the backing store
	}
	secret := bytes.Repeat([]byte{0x5a}, 4000)
	secretBin, secretH5, craft := filepath.Join(base, "secret.bin"), filepath.Join(base, "secret.h5"), t.TempDir()
	os.Chmod(craft, 0o755)
	if err := os.WriteFile(secretBin, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(om.dir, "secret.bin"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, "-c", foreignScript, craft, secretBin, secretH5).CombinedOutput(); err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	os.Chmod(secretH5, 0o600)
	drop := filepath.Join(om.dir, "drop")
	if err := os.Mkdir(drop, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(drop, 0o1777)
	for _, f := range []string{"ext_abs.h5", "ext_rel.h5", "vds.h5", "ok.h5", "ext_own.h5", "own.bin"} {
		os.Chmod(filepath.Join(craft, f), 0o644)
		if out, err := asUser(uid, gid, "cp", filepath.Join(craft, f), drop); err != nil {
			t.Fatalf("cp %s as uid %d: %v\n%s", f, uid, err, out)
		}
	}
	data := func(f string) string { return filepath.Join(om.dir, ".omni", "drop", f, "x", "data") }
	// Its own files read, external storage next to the file too (named
	// relative to the file, not to the helper's cwd).
	for _, f := range []string{"ok.h5", "ext_own.h5"} {
		got, err := asUser(uid, gid, "cat", data(f))
		if err != nil || len(got) != 4000 || binary.LittleEndian.Uint32(got[4*999:]) != 999 {
			t.Fatalf("uid %d reading its own %s: %v, %d bytes", uid, f, err, len(got))
		}
	}
	for _, f := range []string{"ext_abs.h5", "ext_rel.h5", "vds.h5"} {
		got, err := asUser(uid, gid, "cat", data(f))
		if bytes.Contains(got, []byte{0x5a, 0x5a, 0x5a, 0x5a}) {
			t.Errorf("%s: uid %d read the root-only bytes", f, uid)
		}
		var exit *exec.ExitError
		if err == nil {
			t.Errorf("%s: uid %d read %d bytes, want EACCES or EIO", f, uid, len(got))
		} else if ee, ok := err.(*exec.ExitError); ok {
			exit = ee
			if !bytes.Contains(exit.Stderr, []byte("Permission denied")) && !bytes.Contains(exit.Stderr, []byte("Input/output error")) {
				t.Errorf("%s: cat: %s", f, exit.Stderr)
			}
		}
	}
	// Root's own reads stay inside the mount too: a source outside it is
	// refused whoever asks.
	if b, err := os.ReadFile(data("ext_abs.h5")); err == nil || bytes.Contains(b, secret[:4]) {
		t.Errorf("root reading ext_abs.h5: %v, %d bytes", err, len(b))
	}
}

// flakyFormats fails the first open it is asked for, as a helper that
// missed its deadline on a loaded node does.
type flakyFormats struct {
	Formats
	opens atomic.Int32
}

func (f *flakyFormats) Open(ctx context.Context, path string) (*omni.Dataset, error) {
	if f.opens.Add(1) == 1 {
		return nil, fmt.Errorf("open %s: %w", path, helper.ErrTimeout)
	}
	return f.Formats.Open(ctx, path)
}

// TestOMNIRetryFailedOpen: a failed open is answered from memory for
// RetryAfter, then tried again although the file did not change.
func TestOMNIRetryFailedOpen(t *testing.T) {
	py := omniPython(t)
	const retry = 300 * time.Millisecond
	ff := &flakyFormats{}
	om := newOMNIMountWith(t, omniConfig{mode: files.Writeback, retryAfter: retry,
		wrap: func(f Formats) Formats { ff.Formats = f; return ff }})
	write := `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = np.arange(10, dtype="i4")
`
	if out, err := exec.Command(py, "-c", write, filepath.Join(om.dir, "r.h5")).CombinedOutput(); err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	data := filepath.Join(om.dir, ".omni", "r.h5", "x", "data")
	if _, err := os.ReadFile(data); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first read: %v, want EIO", err)
	}
	time.Sleep(retry + 100*time.Millisecond)
	b, err := os.ReadFile(data)
	if err != nil || len(b) != 40 {
		t.Fatalf("read after RetryAfter: %v, %d bytes", err, len(b))
	}
}

// TestOMNIPrecisionAfterOtherFile: an int32 dataset of 8 significant
// bits reads through .omni equal to h5py right after another file's
// block went through the same staging memory (which kept that file's
// bytes where the helper wrote a 1-byte type).
func TestOMNIPrecisionAfterOtherFile(t *testing.T) {
	py := omniPython(t)
	om := newOMNIMount(t)
	script := `import sys, h5py, numpy as np
t = h5py.h5t.STD_I32LE.copy()
t.set_precision(8)
v = (np.arange(1000) % 200 - 100).astype("i4")
with h5py.File(sys.argv[1], "w") as f:
    d = h5py.h5d.create(f.id, b"x", t, h5py.h5s.create_simple((1000,)))
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, v)
with h5py.File(sys.argv[2], "w") as f:
    f["x"] = np.full(1000, 0x7b7b7b7b, dtype="i4")
with h5py.File(sys.argv[1]) as f:
    sys.stdout.buffer.write(f["x"][()].astype("<i4").tobytes())
`
	want, err := exec.Command(py, "-c", script, filepath.Join(om.dir, "p8.h5"), filepath.Join(om.dir, "other.h5")).Output()
	if err != nil || len(want) != 4000 {
		t.Fatalf("h5py: %v (%d bytes)", err, len(want))
	}
	view := func(f string) string { return filepath.Join(om.dir, ".omni", f, "x", "data") }
	if b, err := os.ReadFile(view("other.h5")); err != nil || len(b) != 4000 {
		t.Fatalf("other.h5: %v", err)
	}
	got, err := os.ReadFile(view("p8.h5"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("p8.h5: %v; % x…, h5py % x…", err, got[:min(len(got), 16)], want[:16])
	}
}

// vmHWM is this process's peak resident memory in bytes.
func vmHWM(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestOMNIAllocationBomb: a 9 MB file whose one chunk inflates to 2 GiB
// (libhdf5 allocates the whole chunk for any element of it) costs one
// EIO and a helper; the daemon's peak memory does not move, and the
// file's other variable reads.
func TestOMNIAllocationBomb(t *testing.T) {
	py := omniPython(t)
	om := newOMNIMountWith(t, omniConfig{mode: files.Writeback, helperMem: 2 << 30})
	if out, err := exec.Command(py, filepath.Join("..", "formats", "testdata", "bomb.py"), filepath.Join(om.dir, "bomb.h5")).CombinedOutput(); err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	ov := filepath.Join(om.dir, ".omni", "bomb.h5")
	before := vmHWM(t)
	if _, err := os.ReadFile(filepath.Join(ov, "bomb[0:10]", "data")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("bomb: %v, want EIO", err)
	}
	if grew := vmHWM(t) - before; grew > 256<<20 {
		t.Errorf("the daemon's peak memory grew by %d MiB", grew>>20)
	}
	if b, err := os.ReadFile(filepath.Join(ov, "fine", "data")); err != nil || len(b) != 40 {
		t.Fatalf("fine after the bomb: %v", err)
	}
}
