package fusefs

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// omniZarrMake writes a Zarr v2 store of two arrays, zlib and blosc.
const omniZarrMake = `import sys, numpy as np, zarr, numcodecs
g = zarr.open_group(sys.argv[1], mode="w")
g.attrs["title"] = "mutant base"
g.create_dataset("a", data=np.arange(60, dtype="<f8").reshape(6, 10), chunks=(3, 5), compressor=numcodecs.Zlib(level=1))
g.create_dataset("b", data=np.arange(40, dtype="<i4") * 3, chunks=(10,), compressor=numcodecs.Blosc(cname="lz4", shuffle=1))
s = g.create_group("sub")
s.create_dataset("c", data=np.arange(12, dtype="<u2").reshape(3, 4), chunks=(2, 2), compressor=None)
`

// mutantBase is a valid file (or Zarr store) and its reference reader.
type mutantBase struct {
	path, ext, format string
}

// mutate changes b as one of: a few bytes flipped, a truncation, a run
// overwritten with random bytes, an aligned word set to all ones (a
// length or offset past everything).
func mutate(r *rand.Rand, b []byte) ([]byte, string) {
	b = slices.Clone(b)
	if len(b) == 0 {
		return b, "empty"
	}
	switch r.IntN(4) {
	case 0:
		k := 1 + r.IntN(8)
		for range k {
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		}
		return b, fmt.Sprintf("flip %d", k)
	case 1:
		n := r.IntN(len(b))
		return b[:n], fmt.Sprintf("truncate %d", n)
	case 2:
		off, n := r.IntN(len(b)), 4+r.IntN(61)
		for i := off; i < min(len(b), off+n); i++ {
			b[i] = byte(r.UintN(256))
		}
		return b, fmt.Sprintf("random %d+%d", off, n)
	default:
		w := 4 << r.IntN(2)
		off := r.IntN(max(1, len(b)/w)) * w
		for i := off; i < min(len(b), off+w); i++ {
			b[i] = 0xff
		}
		return b, fmt.Sprintf("ones %d+%d", off, w)
	}
}

var errPastLimit = errors.New("more bytes than the limit")

// readAtMost reads the first limit bytes of p, and fails with
// errPastLimit (with those bytes) when it holds more: a mutant's view
// file may claim terabytes.
func readAtMost(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		return b[:limit], errPastLimit
	}
	return b, err
}

// plainName: a name the views show as it is (no escaping).
var plainName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// TestOMNIMutants: seeded mutants of valid HDF5, NetCDF-4, NetCDF classic
// and Zarr files, plus the vendored malformed corpus, through one mount.
// For each, every numeric variable the reference reader (h5py, netCDF4,
// zarr; in a forked child that may crash) reads must read the same
// through the views or fail with EIO, and every file of its view tree
// must read or fail with EIO (ENOENT for an entry gone), within the
// helper deadline's bound. The daemon is a real `iowarp mount` child
// process: after every tenth mutant it is still the process started
// (same pid, not exited) and a fresh copy of a good file reads through
// it; at the end its peak RSS (VmHWM) has grown by less than 256 MiB
// and its RSS by less than 128 MiB. IOWARP_MUTANTS sets the count per
// valid file (default 15: 60 mutants; the full run is 300 of each),
// IOWARP_MUTANT_SEED the seed, IOWARP_MUTANT_BASES (valid file names,
// comma-separated, e.g. classic.nc) the valid files whose mutants are
// checked: the others are drawn all the same, so a mutant is the same
// with or without it.
func TestOMNIMutants(t *testing.T) {
	py := omniPython(t)
	if out, err := exec.Command(py, "-c", "import zarr, numcodecs").CombinedOutput(); err != nil {
		if strings.Contains(string(out), "ModuleNotFoundError") {
			t.Skip("python3-zarr missing (make deps)")
		}
		t.Fatalf("import zarr: %v\n%s", err, out)
	}
	n, seed := 15, uint64(13)
	if s := os.Getenv("IOWARP_MUTANTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("IOWARP_MUTANTS=%q", s)
		}
		n = v
	}
	if s := os.Getenv("IOWARP_MUTANT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("IOWARP_MUTANT_SEED=%q", s)
		}
		seed = v
	}
	fx := omniFixtures(t, py)
	zs := filepath.Join(fx, "base.zarr")
	if out, err := exec.Command(py, "-c", omniZarrMake, zs).CombinedOutput(); err != nil {
		t.Fatalf("zarr: %v\n%s", err, out)
	}
	bases := []mutantBase{
		{filepath.Join(fx, "grid.h5"), ".h5", "hdf5"},
		{filepath.Join(fx, "climate.nc"), ".nc", "netcdf"},
		{filepath.Join(fx, "classic.nc"), ".nc", "netcdf"},
		{zs, ".zarr", "zarr"},
	}
	om := startDaemon(t, omniHelperDeadline, 2<<30)
	pid := om.pid()
	ref := t.TempDir() // the same bytes, outside the mount, for the reference
	r := rand.New(rand.NewPCG(seed, 0x6f6d6e69))

	type mutant struct{ name, how, format string }
	var ms []mutant
	put := func(rel string, b []byte) {
		for _, root := range []string{ref, filepath.Join(om.dir, "mut")} {
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	only := strings.Split(os.Getenv("IOWARP_MUTANT_BASES"), ",")
	for i := range n * len(bases) {
		b := bases[i%len(bases)]
		name := fmt.Sprintf("m%03d%s", i, b.ext)
		keep := only[0] == "" || slices.Contains(only, filepath.Base(b.path))
		if b.format != "zarr" {
			data, err := os.ReadFile(b.path)
			if err != nil {
				t.Fatal(err)
			}
			m, how := mutate(r, data)
			if !keep {
				continue
			}
			put(name, m)
			ms = append(ms, mutant{name, filepath.Base(b.path) + ": " + how, b.format})
			continue
		}
		// A store: one of its files mutated, the others copied.
		var rels []string
		filepath.WalkDir(b.path, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(b.path, p)
				rels = append(rels, rel)
			}
			return err
		})
		slices.Sort(rels)
		pick := rels[r.IntN(len(rels))]
		how := ""
		for _, rel := range rels {
			data, err := os.ReadFile(filepath.Join(b.path, rel))
			if err != nil {
				t.Fatal(err)
			}
			if rel == pick {
				data, how = mutate(r, data)
			}
			if keep {
				put(filepath.Join(name, rel), data)
			}
		}
		if keep {
			ms = append(ms, mutant{name, "base.zarr/" + pick + ": " + how, b.format})
		}
	}
	// The vendored malformed corpora (HDF5 files that crash, hang or
	// mislead libhdf5; NetCDF headers that lie; damaged Zarr stores)
	// join the mutants.
	for _, c := range []struct{ dir, ext, format string }{
		{"hdf5-malformed", ".h5", "hdf5"}, {"hdf5-cve", ".h5", "hdf5"},
		{"netcdf-malformed", ".nc", "netcdf"}, {"zarr-malformed", ".zarr", "zarr"},
	} {
		dir := filepath.Join("..", "formats", "testdata", c.dir)
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("the vendored corpus: %v", err)
		}
		k := 0
		for _, e := range es {
			if !strings.HasSuffix(e.Name(), c.ext) {
				continue
			}
			err := filepath.WalkDir(filepath.Join(dir, e.Name()), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				data, err := os.ReadFile(p)
				if err == nil {
					rel, _ := filepath.Rel(dir, p)
					put(filepath.Join(c.dir, rel), data)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, mutant{filepath.Join(c.dir, e.Name()), c.dir, c.format})
			k++
		}
		if k == 0 {
			t.Fatalf("no %s in %s", c.ext, dir)
		}
	}

	// The reference readers, in forked children.
	var jobs [][3]string
	for _, m := range ms {
		jobs = append(jobs, [3]string{m.format, filepath.Join(ref, m.name), filepath.Join(ref, m.name+".ref.json")})
	}
	tref := time.Now()
	jb, _ := json.Marshal(jobs)
	jf := filepath.Join(t.TempDir(), "jobs.json")
	os.WriteFile(jf, jb, 0o644)
	if out, err := exec.Command(py, filepath.Join("..", "formats", "testdata", "reference.py"), jf).CombinedOutput(); err != nil {
		t.Fatalf("reference.py: %v\n%s", err, out)
	}

	t.Logf("reference readers: %v", time.Since(tref).Round(time.Millisecond))
	good := func(i int) {
		t.Helper()
		if !om.alive() || om.pid() != pid {
			t.Fatalf("after %d mutants: the daemon (pid %d) exited: %v", i, pid, om.waitErr)
		}
		// A second fresh copy when the first fails: on loaded CPUs the
		// first read of a file can pass the 4 s helper deadline (a
		// failure the views remember for that file).
		var err error
		for try := range 2 {
			name := fmt.Sprintf("good%03d-%d.h5", i, try)
			copyIn(t, filepath.Join(fx, "grid.h5"), filepath.Join(om.dir, name))
			var b []byte
			b, err = os.ReadFile(filepath.Join(om.dir, ".omni", name, "temperature", "data.raw"))
			if err == nil && len(b) != 6*20*30*4 {
				err = fmt.Errorf("%d bytes", len(b))
			}
			if err == nil {
				return
			}
			t.Logf("after %d mutants: a good file, try %d: %v", i, try, err)
		}
		t.Fatalf("after %d mutants: a good file: %v", i, err)
	}
	tviews := time.Now()
	good(0)
	hwm, rss := om.status(t, "VmHWM"), om.status(t, "VmRSS")
	bound := 4*omniHelperDeadline + 10*time.Second
	var equal, eio, missing, extra, different int
	var slowest time.Duration
	for i, m := range ms {
		var want map[string]struct {
			Shape []int64 `json:"shape"`
			Hex   string  `json:"hex"`
		}
		b, err := os.ReadFile(filepath.Join(ref, m.name+".ref.json"))
		if err == nil {
			err = json.Unmarshal(b, &want)
		}
		if err != nil {
			t.Fatalf("%s: reference output: %v", m.name, err)
		}
		root := filepath.Join(om.dir, ".omni", "mut", m.name)
		t0 := time.Now()
		for p, w := range want {
			comps := strings.Split(strings.TrimPrefix(p, "/"), "/")
			if !slices.ContainsFunc(comps, func(c string) bool { return !plainName.MatchString(c) || c == "attrs" || c == "schema.json" }) {
				dir := filepath.Join(append([]string{root}, comps...)...)
				wb, _ := hex.DecodeString(w.Hex)
				got, err := readAtMost(filepath.Join(dir, "data.raw"), int64(len(wb)))
				if errors.Is(err, os.ErrNotExist) {
					got, err = readAtMost(filepath.Join(dir, "data"), int64(len(wb)))
				}
				switch {
				case errors.Is(err, errPastLimit):
					t.Errorf("%s (%s) %s: more than the %d bytes the reference reads (shape %v)", m.name, m.how, p, len(wb), w.Shape)
				case err == nil && !slices.Equal(got, wb):
					different++
					t.Errorf("%s (%s) %s: %d bytes read, the reference reads %d other ones (shape %v)", m.name, m.how, p, len(got), len(wb), w.Shape)
				case err == nil:
					equal++
				case errors.Is(err, syscall.EIO):
					eio++ // the dataset, or this variable, fails as a whole
				case errors.Is(err, syscall.ENOENT):
					t.Errorf("%s (%s) %s: not in the views; the reference reads it (shape %v)", m.name, m.how, p, w.Shape)
					missing++
				default:
					t.Errorf("%s (%s) %s: %v, want the reference's data or EIO", m.name, m.how, p, err)
				}
			}
		}
		// Every file of its tree reads or fails with EIO.
		var files int
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
				_, err = readAtMost(p, 16<<20)
				if errors.Is(err, errPastLimit) {
					err = nil // a crafted shape: its first 16 MiB read
				}
			}
			if err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOENT) {
				t.Errorf("%s (%s): %v, want data or EIO", m.name, m.how, err)
			}
			if err != nil && d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		})
		if len(want) == 0 && files > 0 {
			extra++ // the reference reads nothing; the views open it
			t.Logf("%s (%s): the reference reads no variable; the views list %d files", m.name, m.how, files)
		}
		el := time.Since(t0)
		slowest = max(slowest, el)
		if el > bound {
			t.Errorf("%s (%s): %v, past the bound %v of the helper deadline", m.name, m.how, el, bound)
		}
		if (i+1)%10 == 0 {
			good(i + 1)
		}
		if (i+1)%100 == 0 {
			t.Logf("%d of %d: %d equal, %d EIO, %d not listed, %d different; daemon RSS %d MiB, peak %d MiB",
				i+1, len(ms), equal, eio, missing, different, om.status(t, "VmRSS")>>20, om.status(t, "VmHWM")>>20)
		}
	}
	good(len(ms))
	t.Logf("views: %v", time.Since(tviews).Round(time.Millisecond))
	grew, rssGrew := om.status(t, "VmHWM")-hwm, om.status(t, "VmRSS")-rss
	if grew > 256<<20 || rssGrew > 128<<20 {
		t.Errorf("over %d mutants the daemon's peak RSS grew by %d MiB, its RSS by %d MiB", len(ms), grew>>20, rssGrew>>20)
	}
	helperLines := strings.Count(om.logText(), "format helper")
	t.Logf("%d mutants (seed %d): %d variables equal to the reference, %d EIO, %d not listed, %d different; %d files the reference reads nothing of that the views open; slowest %v; daemon pid %d alive, peak RSS +%d MiB, RSS %+d MiB; %d log lines on helpers killed or crashed",
		len(ms), seed, equal, eio, missing, different, extra, slowest.Round(time.Millisecond), pid, grew>>20, rssGrew>>20, helperLines)
	if equal == 0 {
		t.Error("no variable of any mutant read equal to the reference: the check compares nothing")
	}
}
