package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/formats/omni/search"
)

// searchFixture writes a NetCDF-4 file with python3-netCDF4 (or skips).
func searchFixture(t *testing.T, path, script string) {
	t.Helper()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import netCDF4").CombinedOutput(); err != nil {
		if strings.Contains(string(out), "ModuleNotFoundError") {
			t.Skip("python3-netCDF4 missing (make deps)")
		}
		t.Fatalf("import netCDF4: %v\n%s", err, out)
	}
	prog := "import sys, numpy as np, netCDF4\nd = netCDF4.Dataset(sys.argv[1], 'w')\n" + script + "\nd.close()\n"
	if out, err := exec.Command(py, "-c", prog, path).CombinedOutput(); err != nil {
		t.Fatalf("fixture %s: %v\n%s", path, err, out)
	}
}

const oceanNC = `
d.createDimension('time', 3); d.createDimension('lat', 4); d.createDimension('lon', 6)
t = d.createVariable('time', 'f8', ('time',)); t.units = 'days since 2024-01-01'; t[:] = [0, 31, 60]
la = d.createVariable('lat', 'f4', ('lat',)); la.units = 'degrees_north'; la[:] = [-75, -65, -55, -45]
lo = d.createVariable('lon', 'f4', ('lon',)); lo.units = 'degrees_east'; lo[:] = np.arange(6) * 60.0
s = d.createVariable('so', 'f4', ('time', 'lat', 'lon')); s.standard_name = 'sea_water_salinity'
s.long_name = 'Salinity'; s.units = '1e-3'; s[:] = 35
d.title = 'Southern ocean model run'
`

const era5NC = `
d.createDimension('time', 2); d.createDimension('lat', 3); d.createDimension('lon', 4)
t = d.createVariable('time', 'f8', ('time',)); t.units = 'hours since 2024-06-01'; t[:] = [0, 24]
la = d.createVariable('lat', 'f4', ('lat',)); la.units = 'degrees_north'; la[:] = [-10, 0, 10]
lo = d.createVariable('lon', 'f4', ('lon',)); lo.units = 'degrees_east'; lo[:] = [-180, -90, 0, 90]
v = d.createVariable('sst', 'f4', ('time', 'lat', 'lon')); v.standard_name = 'sea_surface_temperature'
v.long_name = 'Sea surface temperature'; v.units = 'K'; v[:] = np.arange(24).reshape(2, 3, 4)
w = d.createVariable('t2m', 'f4', ('time', 'lat', 'lon')); w.standard_name = 'air_temperature'; w.units = 'K'; w[:] = 0
d.title = 'ERA5 reanalysis subset'
`

// searchCLI runs `iowarp search ARGS --json` and decodes its answer.
func searchCLI(t *testing.T, ctl string, args ...string) (search.Result, int) {
	t.Helper()
	out, errs, code := cliResult(t, append([]string{"search", "--json", "--control-dir", ctl}, args...)...)
	var res search.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("search %v: exit %d, not JSON: %v\n%s\n%s", args, code, err, out, errs)
	}
	return res, code
}

func hitNames(res search.Result) []string {
	var out []string
	for _, h := range res.Hits {
		out = append(out, h.Dataset+":"+h.Variable)
	}
	return out
}

// TestSearch: a dataset opened under .omni and one assimilated from
// outside the mount are found by their metadata, ranked, filtered by
// coordinate ranges, with ready .omni paths whose data reads; the index
// follows a changed dataset and outlives the daemon.
func TestSearch(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	t.Setenv("IOWARP_STATE_DIR", state)
	ctl := filepath.Join(base, "ctl")
	os.Mkdir(ctl, 0o700)
	outside := filepath.Join(base, "era5.nc")
	searchFixture(t, outside, era5NC)
	ocean := filepath.Join(base, "ocean.nc")
	searchFixture(t, ocean, oceanNC)

	var mnt string
	t.Run("first daemon", func(t *testing.T) {
		mnt = mountDaemon(t, base, "mnt", ctl)
		if out, err := exec.Command("cp", ocean, filepath.Join(mnt, "ocean.nc")).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		if _, err := os.ReadFile(filepath.Join(mnt, ".omni", "ocean.nc", "schema.json")); err != nil {
			t.Fatal(err)
		}
		if _, errs, code := cliResult(t, "assimilate", outside, "--name", "era5"); code != 0 {
			t.Fatalf("assimilate: %d %s", code, errs)
		}

		// A job whose dataset_filter keeps /sst: the t2m it leaves
		// out of its view is left out of the hits.
		job := filepath.Join(base, "job.yaml")
		os.WriteFile(job, []byte("name: era5sst\ntransfers:\n  - src: file::"+outside+"\n    dst: era5sst\n    dataset_filter: /sst\n"), 0o644)
		if _, errs, code := cliResult(t, "assimilate", job); code != 0 {
			t.Fatalf("assimilate job: %d %s", code, errs)
		}
		res, _ := searchCLI(t, ctl, "air_temperature t2m sst")
		var sst []string
		for _, h := range res.Hits {
			if h.Dataset == "era5sst" {
				sst = append(sst, h.Variable)
			}
		}
		if len(sst) != 1 || sst[0] != "/sst" {
			t.Errorf("hits of the job's dataset %v, want [/sst] (its filter keeps only that)", sst)
		}
		// A dataset no longer in the registry leaves the index.
		for _, f := range []string{"era5sst.json", "era5sst.schema.json"} {
			if err := os.Remove(filepath.Join(state, "omni", f)); err != nil {
				t.Fatal(err)
			}
		}

		res, code := searchCLI(t, ctl, "sea surface temperature")
		got := hitNames(res)
		if code != 0 || len(got) < 2 || got[0] != "era5:/sst" || got[1] != "era5:/t2m" {
			t.Fatalf("sea surface temperature: exit %d, %v", code, got)
		}
		h := res.Hits[0]
		if h.Path != filepath.Join(mnt, ".omni", "era5", "sst") || h.Source != outside || h.Units != "K" ||
			h.LongName != "Sea surface temperature" {
			t.Fatalf("hit %+v", h)
		}
		if res.Datasets != 2 {
			t.Fatalf("%d datasets indexed, want 2", res.Datasets)
		}
		res, _ = searchCLI(t, ctl, "salinity")
		if got := hitNames(res); len(got) != 1 || got[0] != "ocean.nc:/so" {
			t.Fatalf("salinity: %v", got)
		}
		// Coordinate filters: the southern ocean has no lat in 0:30;
		// era5's lon -180 is 180 modulo 360; dates through CF units.
		res, _ = searchCLI(t, ctl, "temperature salinity", "--within", "lat=0:30,lon=170:190,time=2024-06-02:2024-06-02")
		if got := hitNames(res); len(got) != 2 || !strings.HasPrefix(got[0], "era5:") || !strings.HasPrefix(got[1], "era5:") {
			t.Fatalf("within: %v", got)
		}
		sel := res.Hits[0].Path
		// lon=170:190 meets -180 modulo 360: the view gets the grid's own range.
		if !strings.HasSuffix(sel, "@lat=0:30,lon=-190:-170,time=2024-06-02:2024-06-02") {
			t.Fatalf("view path %s", sel)
		}
		if b, err := os.ReadFile(filepath.Join(sel, "shape")); err != nil || strings.TrimSpace(string(b)) != "[1,2,1]" {
			t.Fatalf("shape of %s: %q %v", sel, b, err)
		}
		if _, code := searchCLI(t, ctl, "salinity", "--within", "lat=0:30"); code != 1 {
			t.Fatalf("an empty search exits %d, want 1", code)
		}
		_, errs, code := cliResult(t, "search", "--control-dir", ctl)
		if code == 0 || !strings.Contains(errs, "give a QUERY") {
			t.Fatalf("search without a query: %d %s", code, errs)
		}
		_, errs, code = cliResult(t, "search", "x", "--within", "lat=[", "--control-dir", ctl)
		if code == 0 || !strings.Contains(errs, "--within") {
			t.Fatalf("bad --within: %d %s", code, errs)
		}

		// A changed dataset is reindexed at the next search.
		changed := filepath.Join(base, "ocean2.nc")
		searchFixture(t, changed, oceanNC+"\nc = d.createVariable('chl', 'f4', ('time', 'lat', 'lon')); c.long_name = 'Chlorophyll concentration'\n")
		if out, err := exec.Command("cp", changed, filepath.Join(mnt, "ocean.nc")).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		res, code = searchCLI(t, ctl, "chlorophyll")
		if got := hitNames(res); code != 0 || len(got) != 1 || got[0] != "ocean.nc:/chl" {
			t.Fatalf("chlorophyll after the change: exit %d, %v", code, got)
		}
	})
	if t.Failed() {
		return
	}
	files, _ := filepath.Glob(filepath.Join(state, "search", "*.json"))
	if len(files) != 1 {
		t.Fatalf("index files %v, want one", files)
	}
	st, err := os.Stat(files[0])
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("index file: %v %v", st, err)
	}
	t.Run("second daemon", func(t *testing.T) {
		mountDaemon(t, base, "mnt", ctl)
		// Nothing opened yet: the index came from the file.
		res, code := searchCLI(t, ctl, "chlorophyll")
		if got := hitNames(res); code != 0 || len(got) != 1 || got[0] != "ocean.nc:/chl" {
			t.Fatalf("after a restart: exit %d, %v", code, got)
		}
		// A dataset whose source is gone leaves the index.
		os.Remove(filepath.Join(mnt, "ocean.nc"))
		if res, code := searchCLI(t, ctl, "chlorophyll"); code != 1 || res.Datasets != 1 {
			t.Fatalf("after removing the file: exit %d, %v, %d datasets", code, hitNames(res), res.Datasets)
		}
	})
}
