package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/iowarp/iowarp/runtime/control"
)

// scrape GETs the endpoint and parses the text format into name{labels}
// → value (a histogram's count as name_count{labels}).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := name + labelsOf(m)
			switch {
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[name+"_count"+labelsOf(m)] = float64(m.Histogram.GetSampleCount())
				out[name+"_sum"+labelsOf(m)] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

func labelsOf(m *dto.Metric) string {
	if len(m.Label) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.Label {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestMetricsEndpoint: a daemon with metrics_listen serves /metrics; a
// scrape (a real HTTP GET, parsed as the text format) shows the tiers,
// and the counters and histograms of writes, write-back, stage-in, FUSE
// requests and ipc requests move after I/O of each kind.
func TestMetricsEndpoint(t *testing.T) {
	base := t.TempDir()
	ctl := filepath.Join(base, "ctl")
	cfg := filepath.Join(base, "metrics.yaml")
	if err := os.WriteFile(cfg, []byte("metrics_listen: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := mountDaemon(t, base, "m", ctl, "--config", cfg)
	var info Info
	if err := control.Call(control.SocketPath(ctl, mnt), "info", &info); err != nil || info.Metrics == "" {
		t.Fatalf("info: %+v, %v", info, err)
	}
	before := scrape(t, info.Metrics)
	if got := before[`iowarp_tier_capacity_bytes{kind="ram",tier="ram"}`]; got != 32<<20 {
		t.Errorf("ram capacity %v, want 32MiB; scrape:\n%v", got, before)
	}
	for _, k := range []string{`iowarp_errors_total{kind="flush"}`, `iowarp_helper_restarts_total`, `iowarp_ipc_requests_total`,
		`iowarp_dirty_bytes`, "go_goroutines"} {
		if _, ok := before[k]; !ok {
			t.Errorf("no %s", k)
		}
	}

	// Write and fsync 2 MiB through the mount; read a file that is only on
	// the backing store; put a blob over ipc.
	f, err := os.Create(filepath.Join(mnt, "out.dat"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(base, "m-backing", "cold.dat"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "cold.dat")); err != nil || len(b) != 1<<20 {
		t.Fatalf("read cold.dat: %d bytes, %v", len(b), err)
	}
	if _, errs, code := cliResult(t, "put", "--control-dir", ctl, "bkt", "blob", cfg); code != 0 {
		t.Fatalf("put: exit %d\n%s", code, errs)
	}

	after := scrape(t, info.Metrics)
	grew := func(key string, by float64) {
		t.Helper()
		if d := after[key] - before[key]; d < by {
			t.Errorf("%s went from %v to %v, want +%v at least", key, before[key], after[key], by)
		}
	}
	grew("iowarp_written_bytes_total", 2<<20)
	grew("iowarp_flush_bytes_total", 2<<20)
	grew("iowarp_flush_write_seconds_count", 1)
	grew("iowarp_stage_in_bytes_total", 1<<20)
	grew("iowarp_stage_in_read_seconds_count", 1)
	grew(`iowarp_fuse_request_seconds_count{op="WRITE"}`, 2)
	grew(`iowarp_fuse_request_seconds_count{op="FSYNC"}`, 1)
	grew(`iowarp_fuse_request_seconds_count{op="CREATE"}`, 1)
	grew(`iowarp_fuse_request_seconds_sum{op="WRITE"}`, 1e-9)
	grew("iowarp_ipc_requests_total", 1)
	grew(`iowarp_tier_used_bytes{kind="ram",tier="ram"}`, 1<<20)
}

// TestMetricsWithoutMount: the runtime without a mount serves the pool's
// and ipc's metrics (no file layer, no FUSE).
func TestMetricsWithoutMount(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "ctl")
	cfg := filepath.Join(dir, "cte.yaml")
	yaml := "mount: \"\"\ncontrol_dir: " + ctl + "\nmetrics_listen: 127.0.0.1:0\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 16MiB\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := iowarp("runtime", "start", "--config", cfg)
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { d.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.Process.Signal(os.Interrupt)
		<-exited
	})
	var info Info
	for deadline := time.Now().Add(20 * time.Second); control.Call(control.SocketPath(ctl, ""), "info", &info) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no runtime after 20s")
		}
	}
	before := scrape(t, info.Metrics)
	if _, errs, code := cliResult(t, "put", "--control-dir", ctl, "b", "x", cfg); code != 0 {
		t.Fatalf("put: exit %d\n%s", code, errs)
	}
	after := scrape(t, info.Metrics)
	if after["iowarp_ipc_requests_total"] <= before["iowarp_ipc_requests_total"] ||
		after[`iowarp_tier_used_bytes{kind="ram",tier="ram"}`] <= 0 || after[`iowarp_tier_capacity_bytes{kind="ram",tier="ram"}`] != 16<<20 {
		t.Errorf("before %v\nafter %v", before, after)
	}
	if _, ok := after[`iowarp_fuse_request_seconds_count{op="WRITE"}`]; ok {
		t.Errorf("FUSE metrics without a mount")
	}
}
