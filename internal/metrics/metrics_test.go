package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/internal/hist"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// TestEndpoint serves fixed Sources on a port and checks the text of a
// scrape: values, labels, histogram buckets, and the kinds of errors.
func TestEndpoint(t *testing.T) {
	var wb, fuseWrite hist.Histogram
	wb.Observe(3 * time.Millisecond)
	fuseWrite.Observe(20 * time.Microsecond)
	fuseWrite.Observe(time.Minute)
	src := Sources{
		Files: func() files.Stats {
			return files.Stats{FlushedBytes: 4096, FlushErrors: 2, Pool: bufferpool.Stats{DirtyBytes: 512,
				Tiers: []bufferpool.TierStats{{Name: "ram", Kind: "ram", Capacity: 1 << 30, Used: 1 << 20, Dirty: 512}}}}
		},
		Latencies: func() (hist.Snapshot, hist.Snapshot) { return wb.Snapshot(), hist.Snapshot{} },
		FUSE: func(f func(string, hist.Snapshot, uint64)) {
			f("WRITE", fuseWrite.Snapshot(), 1)
		},
		IPC:     func() ipc.Stats { return ipc.Stats{Requests: 7, BadRequests: 1} },
		Helpers: func() helper.Stats { return helper.Stats{Started: 3, Retired: 1, Failed: 1} },
	}
	s, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Serve(src)
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := string(b)
	for _, want := range []string{
		`iowarp_tier_capacity_bytes{kind="ram",tier="ram"} 1.073741824e+09`,
		`iowarp_tier_dirty_bytes{kind="ram",tier="ram"} 512`,
		`iowarp_dirty_bytes 512`,
		`iowarp_flush_bytes_total 4096`,
		`iowarp_flush_write_seconds_bucket{le="0.002048"} 0`,
		`iowarp_flush_write_seconds_bucket{le="0.004096"} 1`,
		`iowarp_flush_write_seconds_count 1`,
		`iowarp_stage_in_read_seconds_count 0`,
		`iowarp_fuse_request_seconds_bucket{op="WRITE",le="3.2e-05"} 1`,
		`iowarp_fuse_request_seconds_bucket{op="WRITE",le="+Inf"} 2`,
		`iowarp_ipc_requests_total 7`,
		`iowarp_helper_starts_total 3`,
		`iowarp_helper_restarts_total 2`,
		`iowarp_errors_total{kind="flush"} 2`,
		`iowarp_errors_total{kind="fuse_eio"} 1`,
		`iowarp_errors_total{kind="ipc_bad_request"} 1`,
		`iowarp_errors_total{kind="helper_failed"} 1`,
		`# TYPE iowarp_fuse_request_seconds histogram`,
		`process_open_fds`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", out)
	}
}
