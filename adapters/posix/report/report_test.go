package report

import (
	"strings"
	"testing"
)

const sample = `iowarp-report-file pid=10 opens=1 calls=51 fast_read=0 fast_write=3276800 kernel_read=0 kernel_write=0 ipc_read=0 ipc_write=0 fast_hits=50 fast_misses=0 read_ns=0 write_ns=22339771 meta_ns=0 max_read=0 max_write=65536 read_sizes=0,0,0,0,0,0,0,0,0,0 write_sizes=0,0,0,50,0,0,0,0,0,0 path=/iowarp/out/f 1
iowarp-report pid=10 exe=dd child=0 opens=1 calls=52 fast_read=0 fast_write=3276800 kernel_read=0 kernel_write=0 ipc_read=0 ipc_write=0 fast_hits=50 fast_misses=0 stdio=0 mpi=0 handshake_fail=0
iowarp-report-file pid=11 opens=2 calls=3 fast_read=1000 fast_write=0 kernel_read=3276800 kernel_write=0 ipc_read=0 ipc_write=0 fast_hits=1 fast_misses=0 read_ns=5 write_ns=0 meta_ns=91036 max_read=3276800 max_write=0 read_sizes=0,0,1,0,0,1,0,0,0,0 write_sizes=0,0,0,0,0,0,0,0,0,0 path=/iowarp/out/f 1
iowarp-report-file pid=11 opens=1 calls=1 fast_read=10 read_sizes=1,0,0,0,0,0,0,0,0,0 path=/iowarp/in
iowarp-report pid=11 exe=cat child=0 opens=3 calls=4
iowarp-report-file pid=12 opens=1 calls=x path=/bad
iowarp-report-file pid=12 opens=1 read_sizes=1,2 path=/bad
iowarp-report pid=12 exe=cat opens=
garbage
iowarp-report-file pid=13 opens=1 calls=1 future_counter=7 path=/iowarp/in
`

func TestParse(t *testing.T) {
	var s Summary
	if err := s.Parse(strings.NewReader(sample)); err != nil {
		t.Fatal(err)
	}
	if len(s.Processes) != 2 || s.Processes[0].Exe != "dd" || s.Processes[1].Calls != 4 {
		t.Errorf("processes %+v", s.Processes)
	}
	if s.Skipped != 4 {
		t.Errorf("skipped %d lines, want 4", s.Skipped)
	}
	files := s.FileList(ByBytes)
	if len(files) != 2 || files[0].Path != "/iowarp/out/f 1" || files[1].Path != "/iowarp/in" {
		t.Fatalf("files %+v", files)
	}
	f := files[0]
	if f.Procs != 2 || f.Opens != 3 || f.Calls != 54 || f.Written() != 3276800 || f.Read() != 3277800 ||
		f.Ns() != 22339771+5+91036 || f.MaxRead != 3276800 || f.WriteSizes[3] != 50 || f.ReadSizes[5] != 1 {
		t.Errorf("file %+v", f)
	}
	if files[1].Procs != 2 || files[1].Opens != 2 || files[1].ReadSizes[0] != 1 {
		t.Errorf("file %+v", files[1])
	}
	if s.Files.Bytes() != 3276800+3277800+10 || s.Files.FastWrite != 3276800 {
		t.Errorf("file totals %+v", s.Files)
	}
	if byTime := s.FileList(ByTime); byTime[0].Path != "/iowarp/out/f 1" {
		t.Errorf("by time: %s first", byTime[0].Path)
	}
}

// FuzzParse: no input makes the parser panic, and a line it skips adds
// nothing.
func FuzzParse(f *testing.F) {
	for _, l := range strings.Split(sample, "\n") {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, l string) {
		var s Summary
		s.Parse(strings.NewReader(l))
		if s.Skipped > 0 && (len(s.Processes) > 0 || s.Files.Bytes() > 0 || s.Files.Calls > 0) && !strings.Contains(l, "\n") {
			t.Errorf("a skipped line added something: %q", l)
		}
	})
}
