package helper

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iowarp/iowarp/formats/internal/fixture"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/sys"
	"github.com/iowarp/iowarp/internal/testenv"
)

// helperPids returns the process ids of the pool's live helpers.
func helperPids(p *Pool) map[int]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int]bool{}
	for pr := range p.live {
		if !pr.dead {
			out[pr.cmd.Process.Pid] = true
		}
	}
	return out
}

const precisionScript = `
import sys, h5py, numpy as np
t = h5py.h5t.STD_I32LE.copy()
t.set_precision(8)
v = (np.arange(1000) % 200 - 100).astype("i4")
with h5py.File(sys.argv[1], "w") as f:
    s = h5py.h5s.create_simple((1000,))
    d = h5py.h5d.create(f.id, b"p8", t, s)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, v)
with h5py.File(sys.argv[2], "w") as f:
    f["other"] = np.full(1000, 0x7b7b7b7b, dtype="i4")
with h5py.File(sys.argv[1]) as f:
    assert f["p8"].dtype == np.dtype("i4"), f["p8"].dtype
    sys.stdout.buffer.write(f["p8"][()].astype("<i4").tobytes())
`

// TestPrecisionInt: an int32 dataset of 8 significant bits reads as
// int32 (H5Tget_native_type would give a 1-byte type and leave ¾ of the
// destination unwritten), equal to h5py, right after another file's read.
func TestPrecisionInt(t *testing.T) {
	tmp := t.TempDir()
	p8, other := filepath.Join(tmp, "p8.h5"), filepath.Join(tmp, "other.h5")
	want := []byte(fixture.Run(t, precisionScript, p8, other))
	p := newPool(t, 10*time.Second)
	ctx := context.Background()
	for _, f := range []string{other, p8} {
		ds, err := p.Open(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		v := ds.Variables()[0]
		if v.DType != omni.Int32 {
			t.Fatalf("%s: dtype %s, want int32", v.Path, v.DType)
		}
		got, err := p.ReadAll(ctx, f, v)
		if err != nil {
			t.Fatal(err)
		}
		if f == p8 && !bytes.Equal(got, want) {
			t.Fatalf("p8 reads %v…, h5py %v…", ints(got[:32]), ints(want[:32]))
		}
	}
}

func ints(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestRetireAfterError: a helper that failed on one file (a library
// error, not a crash) never serves the next request.
func TestRetireAfterError(t *testing.T) {
	dir := fixture.Dir(t)
	p := newPool(t, 10*time.Second)
	ctx := context.Background()
	if _, err := p.Open(ctx, filepath.Join(dir, "grid.h5")); err != nil {
		t.Fatal(err)
	}
	before := helperPids(p)
	if _, err := p.Open(ctx, filepath.Join(dir, "truncated.h5")); err == nil {
		t.Fatal("truncated.h5 opened")
	}
	after := helperPids(p)
	for pid := range before {
		if after[pid] {
			t.Fatalf("helper %d failed on truncated.h5 and is still live", pid)
		}
	}
	if _, err := p.Open(ctx, filepath.Join(dir, "grid.h5")); err != nil {
		t.Fatalf("after the failure: %v", err)
	}
}

// TestConfinedHelper: a helper runs as the user it is asked to (a root
// 0600 file is EACCES to it, a public one reads) and, with Landlock,
// reads nothing outside its root even as root.
func TestConfinedHelper(t *testing.T) {
	dir := fixture.Dir(t)
	uid, gid := testenv.User(t)
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755) // t.TempDir's parent is 0700
	inside, outside := filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{inside, outside} {
		os.Mkdir(d, 0o755)
	}
	grid, _ := os.ReadFile(filepath.Join(dir, "grid.h5"))
	public, private, away := filepath.Join(inside, "public.h5"), filepath.Join(inside, "private.h5"), filepath.Join(outside, "away.h5")
	os.WriteFile(public, grid, 0o644)
	os.WriteFile(private, grid, 0o600)
	os.WriteFile(away, grid, 0o644)
	p := newPool(t, 10*time.Second)
	as := WithAs(context.Background(), As{Set: true, Uid: uid, Gid: gid, Root: inside})
	if _, err := p.Open(as, public); err != nil {
		t.Fatalf("public file as uid %d: %v", uid, err)
	}
	if _, err := p.Open(as, private); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("root's 0600 file as uid %d: %v, want EACCES", uid, err)
	}
	if _, err := sys.LandlockABI(); err != nil {
		t.Logf("no Landlock (%v): the root confinement is not tested", err)
		return
	}
	root := WithAs(context.Background(), As{Root: inside})
	if _, err := p.Open(root, private); err != nil {
		t.Fatalf("as root inside the root: %v", err)
	}
	if _, err := p.Open(root, away); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("as root outside the root: %v, want EACCES (Landlock)", err)
	}
}

// TestMemoryBound: a file that makes libhdf5 allocate gigabytes costs
// one failed request and that helper (its address space is bounded by
// MemoryLimit); the next request of the same file reads.
func TestMemoryBound(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bomb.h5")
	fixture.Run(t, fixture.Script(t, "bomb.py"), f)
	p := New(Options{Size: 1, Deadline: 20 * time.Second, MemoryLimit: 2 << 30, Logf: t.Logf})
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()
	ds, err := p.Open(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	bomb, _ := ds.Var("/bomb")
	fine, _ := ds.Var("/fine")
	before := helperPids(p)
	if _, err := p.Read(ctx, f, bomb, omni.Hyperslab{Start: []int64{0}, Count: []int64{10}}); err == nil {
		t.Fatal("a 2 GiB chunk read within a 2 GiB address space")
	} else {
		t.Logf("bomb: %v", err)
	}
	for pid := range before {
		if helperPids(p)[pid] {
			t.Fatalf("helper %d still serves after failing", pid)
		}
	}
	b, err := p.ReadAll(ctx, f, fine)
	if err != nil || len(b) != 40 || b[36] != 9 {
		t.Fatalf("next read: %v % x", err, b)
	}
}

// TestBigAttribute: a 10 MB attribute does not reach the caller: its
// value is left out (Omitted says its size), the small ones stay, and
// the schema the daemon holds is small.
func TestBigAttribute(t *testing.T) {
	f := filepath.Join(t.TempDir(), "attr.h5")
	fixture.Run(t, `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    f.attrs["big"] = "x" * 10_000_000
    f.attrs["wide"] = np.zeros(500_000)
    f.attrs["title"] = "small"
    f["v"] = np.arange(3)
`, f)
	p := newPool(t, 20*time.Second)
	ds, err := p.Open(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]omni.Attribute{}
	for _, a := range ds.Root.Attrs {
		got[a.Name] = a
	}
	if a := got["big"]; a.Omitted < 10_000_000 || a.Len() != 0 {
		t.Errorf("big: omitted %d, %d values", a.Omitted, a.Len())
	}
	if a := got["wide"]; a.Omitted != 4_000_000 || a.Len() != 0 {
		t.Errorf("wide: omitted %d, %d values", a.Omitted, a.Len())
	}
	if a := got["title"]; a.String() != "small" {
		t.Errorf("title: %q", a.String())
	}
	if b, _ := ds.Schema(); len(b) > 64<<10 {
		t.Errorf("schema of %d bytes", len(b))
	}
}
