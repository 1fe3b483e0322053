package fusefs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// omniWideCheck lists a group of N datasets with h5py (names and shapes)
// and through the mount's view (readdir, a stat of every entry as ls -l
// does, each one's shape file), checks that both see the same names and
// shapes, and prints the seconds each took.
const omniWideCheck = `
import os, sys, time, json, h5py
src, view = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
with h5py.File(src, "r") as f:
    want = {k: list(f[k].shape) for k in f}
t1 = time.perf_counter()
names = os.listdir(view)
t2 = time.perf_counter()
for n in names:
    os.stat(os.path.join(view, n))
t3 = time.perf_counter()
got = {n: json.load(open(os.path.join(view, n, "shape"))) for n in names if n != "schema.json"}
t4 = time.perf_counter()
assert got == want, (len(got), len(want))
print("h5py %.3f readdir %.3f stat %.3f shapes %.3f" % (t1 - t0, t2 - t1, t3 - t2, t4 - t3))
`

// TestOMNIWideGroup: an HDF5 group of 20,000 datasets is listed through
// the views, each entry stat'ed and its shape read, with every name and
// shape equal to h5py's. It logs the time against h5py's listing of the
// same file in the same run (a ratio, not asserted: the CPUs are shared);
// the walk and readdir were N² (5,000 entries took 22 s). 5,000 with
// -short or -race; IOWARP_WIDE_DATASETS sets it.
func TestOMNIWideGroup(t *testing.T) {
	py := omniPython(t)
	n := 20000
	if testing.Short() || raceEnabled {
		n = 5000
	}
	if s := os.Getenv("IOWARP_WIDE_DATASETS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("IOWARP_WIDE_DATASETS=%q", s)
		}
		n = v
	}
	// The schema of a wide group is read by one helper request: past
	// 20,000 datasets on shared CPUs it may take longer than the 4 s the
	// other tests allow.
	om := newOMNIMountWith(t, omniConfig{mode: files.Writeback, deadline: time.Duration(max(4, n/2000)) * time.Second})
	src := filepath.Join(t.TempDir(), "wide.h5")
	mk := `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    for i in range(int(sys.argv[2])):
        f.create_dataset("d%06d" % i, data=np.arange(i % 5 + 1, dtype="i4"))
`
	if out, err := exec.Command(py, "-c", mk, src, strconv.Itoa(n)).CombinedOutput(); err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	copyIn(t, src, filepath.Join(om.dir, "wide.h5"))
	out, err := exec.Command(py, "-c", omniWideCheck, src, filepath.Join(om.dir, ".omni", "wide.h5")).CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 8 {
		t.Fatalf("check printed %q", out)
	}
	secs := map[string]float64{}
	for i := 0; i < 8; i += 2 {
		secs[f[i]], _ = strconv.ParseFloat(f[i+1], 64)
	}
	t.Logf("%d datasets: h5py %.2fs; view readdir %.2fs (%.1f× h5py), stat of each %.2fs, shape of each %.2fs (shared CPUs: indicative)",
		n, secs["h5py"], secs["readdir"], secs["readdir"]/max(secs["h5py"], 1e-3), secs["stat"], secs["shapes"])
	if _, err := os.Stat(filepath.Join(om.dir, ".omni", "wide.h5", fmt.Sprintf("d%06d", n-1), "data.npy")); err != nil {
		t.Errorf("stat of the last dataset: %v", err)
	}
}
