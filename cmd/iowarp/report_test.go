package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/adapters/posix/report"
)

const jobReport = `iowarp-report-file pid=10 opens=1 calls=51 fast_read=0 fast_write=3276800 kernel_read=0 kernel_write=0 ipc_read=0 ipc_write=0 fast_hits=50 fast_misses=0 read_ns=0 write_ns=22339771 meta_ns=0 max_read=0 max_write=65536 read_sizes=0,0,0,0,0,0,0,0,0,0 write_sizes=0,0,0,50,0,0,0,0,0,0 path=/iowarp/ckpt
iowarp-report pid=10 exe=dd child=0 opens=1 calls=52 fast_read=0 fast_write=3276800 kernel_read=0 kernel_write=0 ipc_read=0 ipc_write=0 fast_hits=50 fast_misses=0 stdio=0 mpi=0 handshake_fail=0
iowarp-report-file pid=11 opens=1 calls=101 fast_read=409600 fast_write=0 kernel_read=1048576 kernel_write=0 ipc_read=0 ipc_write=0 fast_hits=100 fast_misses=1 read_ns=900000000 write_ns=0 meta_ns=1000 max_read=1048576 max_write=0 read_sizes=0,0,100,0,0,1,0,0,0,0 write_sizes=0,0,0,0,0,0,0,0,0,0 path=/iowarp/in/mesh
iowarp-report pid=11 exe=python3 child=0 opens=1 calls=101
`

// TestPrintReport: the tables rank by bytes and by time, and the paths
// table and the size bins add up.
func TestPrintReport(t *testing.T) {
	var s report.Summary
	if err := s.Parse(strings.NewReader(jobReport)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := printReport(&b, &s, 10); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var lines []string // each with its blanks collapsed
	for _, l := range strings.Split(out, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{
		"2 processes (2 with files on the mount), 2 files, 1.4MiB read, 3.1MiB written, 152 calls, 922.34ms in calls",
		"read 400KiB 0B 1MiB 28.1",
		"write 3.1MiB 0B 0B 100.0",
		"fast-path hits 150, misses 1",
		"1K-10K 100 0",
		"10K-100K 0 50",
		"1M-4M 1 0",
		"largest 1MiB 64KiB",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	byBytes := out[strings.Index(out, "top files by bytes:"):strings.Index(out, "top files by time")]
	byTime := out[strings.Index(out, "top files by time"):strings.Index(out, "access sizes:")]
	if strings.Index(byBytes, "/iowarp/ckpt") > strings.Index(byBytes, "/iowarp/in/mesh") {
		t.Errorf("by bytes, ckpt (3.1MiB) is not first:\n%s", byBytes)
	}
	if strings.Index(byTime, "/iowarp/in/mesh") > strings.Index(byTime, "/iowarp/ckpt") {
		t.Errorf("by time, in/mesh (900ms) is not first:\n%s", byTime)
	}
}
