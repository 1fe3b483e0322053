package client

import (
	"bufio"
	"os"
	"testing"
	"time"
)

// BenchmarkIPC runs Bench against a daemon in another process (the test
// binary re-executed): round trips steady (daemon spinning, and sleeping)
// and after idleness, tasks/s with 1 and 4 clients, and Put/Get of 4 KiB
// and 1 MiB (from Go slices and from shared buffers) against a memcpy
// that, like them, rotates over BenchSet of buffers, measured in the same
// run. One iteration is a whole measurement.
func BenchmarkIPC(b *testing.B) {
	sock := b.TempDir() + "/d.ipc"
	cmd := child(b, "daemon", sock)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		b.Fatalf("daemon said %q", line)
	}
	var r *BenchResult
	for b.Loop() {
		var err error
		if r, err = Bench(Options{Socket: sock}, 500*time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.SteadyP50.Nanoseconds()), "steady-p50-ns")
	b.ReportMetric(float64(r.SteadyP99.Nanoseconds()), "steady-p99-ns")
	b.ReportMetric(float64(r.SleepP50.Nanoseconds()), "sleeping-p50-ns")
	b.ReportMetric(float64(r.SleepP99.Nanoseconds()), "sleeping-p99-ns")
	b.ReportMetric(float64(r.IdleP50.Nanoseconds()), "idle-p50-ns")
	b.ReportMetric(float64(r.IdleP99.Nanoseconds()), "idle-p99-ns")
	b.ReportMetric(r.Tasks1, "tasks/s-1client")
	b.ReportMetric(r.Tasks4, "tasks/s-4clients")
	b.ReportMetric(r.Pipelined1, "tasks/s-pipelined")
	for _, x := range r.Xfer {
		sz := map[int]string{4 << 10: "4KiB", 1 << 20: "1MiB"}[x.Size]
		b.ReportMetric(x.PutRatio, "put-"+sz+"/memcpy")
		b.ReportMetric(x.GetRatio, "get-"+sz+"/memcpy")
		b.ReportMetric(x.PutBufRatio, "putbuf-"+sz+"/memcpy")
		b.ReportMetric(x.GetBufRatio, "getbuf-"+sz+"/memcpy")
	}
	r.Print(os.Stderr)
}
