package fusefs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// cveFile is a file of formats/testdata/hdf5-cve (see its README).
func cveFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "formats", "testdata", "hdf5-cve", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the CVE corpus: %v", err)
	}
	return p
}

// h5pyInt32 returns what h5py reads of every int32 dataset of src, as
// little-endian bytes by dataset name; datasets h5py cannot read are
// absent.
func h5pyInt32(t *testing.T, py, src string) map[string][]byte {
	t.Helper()
	script := `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    for n, o in f.items():
        if isinstance(o, h5py.Dataset) and o.dtype == np.int32:
            try:
                b = o[()].astype("<i4").tobytes()
            except Exception:
                continue
            sys.stdout.write(n + " " + b.hex() + "\n")
`
	out, err := exec.Command(py, "-c", script, src).Output()
	if err != nil {
		t.Fatalf("h5py on %s: %v", src, err)
	}
	got := map[string][]byte{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, hexb, _ := strings.Cut(l, " ")
		b := make([]byte, len(hexb)/2)
		for i := range b {
			b[i] = unhex(hexb[2*i])<<4 | unhex(hexb[2*i+1])
		}
		got[name] = b
	}
	return got
}

func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// TestOMNICVECorpus runs the HDF5 CVE files that need a defence beyond a
// helper that may crash (formats/testdata/hdf5-cve) through .omni, each
// followed by a valid file on the same helpers:
//   - cve-2018-11202.h5 makes libhdf5 allocate without bound: an error
//     within the helper deadline, the daemon's memory unmoved;
//   - cve-2024-29162.h5 holds n-bit, scale-offset, shuffle, szip and
//     fletcher32 datasets: each reads equal to h5py or fails, never other
//     values (its n-bit dataset read as packed int8 plus stale bytes);
//   - cve-2024-32608.h5 left state that failed the next valid file;
//   - cve-2024-32618.h5 made cve-2024-32619.h5 crash in the same helper:
//     32619 must read the same after 32618 as in a fresh mount.
func TestOMNICVECorpus(t *testing.T) {
	py := omniPython(t)
	fx := omniFixtures(t, py)
	om := newOMNIMountWith(t, omniConfig{mode: files.Writeback, helperMem: 2 << 30})
	copyIn(t, filepath.Join(fx, "grid.h5"), filepath.Join(om.dir, "good.h5"))
	good := func(after string) {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(om.dir, ".omni", "good.h5", "temperature", "data")); err != nil || len(b) != 6*20*30*4 {
			t.Errorf("after %s: good dataset: %v (%d bytes)", after, err, len(b))
		}
	}
	in := func(name, as string) string {
		copyIn(t, cveFile(t, name), filepath.Join(om.dir, as))
		return filepath.Join(om.dir, ".omni", as)
	}

	// 32619 in fresh helpers first: the reference for after 32618.
	fresh := walkView(in("cve-2024-32619.h5", "fresh-32619.h5"))
	good("cve-2024-32619.h5")

	before := vmHWM(t)
	if err := walkView(in("cve-2018-11202.h5", "11202.h5")); err == nil {
		t.Errorf("cve-2018-11202.h5: the view read without an error (h5py: memory allocation failed)")
	}
	if grew := vmHWM(t) - before; grew > 256<<20 {
		t.Errorf("cve-2018-11202.h5: the daemon's peak memory grew by %d MiB", grew>>20)
	}
	good("cve-2018-11202.h5")

	ov := in("cve-2024-29162.h5", "29162.h5")
	want := h5pyInt32(t, py, cveFile(t, "cve-2024-29162.h5"))
	if len(want) == 0 {
		t.Fatal("h5py read no int32 dataset of cve-2024-29162.h5")
	}
	for _, name := range []string{"nbit", "scaleoffset", "shuffle", "szip", "fletcher32", "myfilter"} {
		got, err := os.ReadFile(filepath.Join(ov, name, "data"))
		w, ok := want[name]
		switch {
		case err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.EACCES):
			t.Errorf("29162 /%s: %v, want the data or EIO", name, err)
		case err == nil && !ok:
			t.Errorf("29162 /%s: read %d bytes where h5py fails", name, len(got))
		case err == nil && !bytes.Equal(got, w):
			t.Errorf("29162 /%s: % x…, h5py % x…", name, got[:min(16, len(got))], w[:min(16, len(w))])
		case err != nil && ok:
			t.Logf("29162 /%s: %v (h5py reads it)", name, err)
		case err != nil:
			t.Logf("29162 /%s: %v, as h5py fails", name, err)
		default:
			t.Logf("29162 /%s: %d bytes equal to h5py's", name, len(got))
		}
	}
	good("cve-2024-29162.h5")

	walkView(in("cve-2024-32608.h5", "32608.h5"))
	good("cve-2024-32608.h5")

	walkView(in("cve-2024-32618.h5", "32618.h5"))
	after := walkView(in("cve-2024-32619.h5", "after-32619.h5"))
	if (after == nil) != (fresh == nil) {
		t.Errorf("cve-2024-32619.h5 after cve-2024-32618.h5: %v; in fresh helpers: %v", after, fresh)
	}
	good("cve-2024-32618.h5 and cve-2024-32619.h5")
}
