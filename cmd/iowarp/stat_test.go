package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestPrintStatsFailingWriteBack: files whose write-back fails are listed
// with cause, dirty bytes and last error; a healthy mount shows no list.
func TestPrintStatsFailingWriteBack(t *testing.T) {
	info := Info{Mount: "/iowarp", Backing: "/pfs", Pid: 7, Started: time.Now()}
	var buf bytes.Buffer
	healthy := files.Stats{Mode: files.Writeback,
		LongestWriteBack: &files.WriteBackInFlight{Path: "quick", Since: time.Now()}}
	if err := printStats(&buf, info, healthy); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "FAILING") || strings.Contains(buf.String(), "running for") {
		t.Fatalf("healthy mount shows failures:\n%s", buf.String())
	}
	st := files.Stats{Mode: files.Writeback, FailingCount: 3, StuckDirtyBytes: 5 << 20,
		LongestWriteBack: &files.WriteBackInFlight{Path: "run/ckpt.h5", Since: time.Now().Add(-time.Minute)},
		FailingFiles: []files.FailingFile{
			{Path: "run/ckpt.h5", Errno: "ENOSPC", Error: "write back page 3: write backing: no space left on device",
				Since: time.Now().Add(-time.Minute), Attempts: 17, DirtyBytes: 4 << 20},
			{Path: "run/log", Errno: "EIO", Error: "fsync backing file: input/output error",
				Since: time.Now(), Attempts: 1, DirtyBytes: 1 << 20},
		}}
	buf.Reset()
	if err := printStats(&buf, info, st); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"write-back FAILING for 3 files, 5MiB stuck dirty", "run/ckpt.h5  ENOSPC  4MiB", "1m0s",
		"no space left on device", "run/log", "write-back of run/ckpt.h5 running for 1m0s", "EIO", "input/output error", "... 1 more"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestPrintStatsIntegrity: checksum errors and per-tier compression show
// in `iowarp stat`; a mount with neither shows no such line.
func TestPrintStatsIntegrity(t *testing.T) {
	info := Info{Mount: "/iowarp", Backing: "/pfs", Pid: 7, Started: time.Now()}
	var buf bytes.Buffer
	if err := printStats(&buf, info, files.Stats{Mode: files.Writeback}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.Contains(out, "CHECKSUM") || strings.Contains(out, "compression:") {
		t.Fatalf("clean mount shows integrity lines:\n%s", out)
	}
	st := files.Stats{Mode: files.Writeback, BackingChecksumErrors: 2, TierChecksumErrors: 3, Repaired: 1}
	st.Pool.Tiers = []bufferpool.TierStats{{Name: "ram", Kind: "ram"},
		{Name: "nvme", Kind: "file", Compressed: 10, Checksummed: 12, CompressedBytes: 40 << 20, SavedBytes: 30 << 20}}
	buf.Reset()
	if err := printStats(&buf, info, st); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"CHECKSUM ERRORS: 2 pages staged in", "3 reads of slower tiers", "1 of them repaired",
		"compression: tier nvme holds 10 blobs (40MiB) compressed in 10MiB: ratio 4.00, 30MiB saved; 12 blobs checksummed"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tier ram holds") {
		t.Errorf("uncompressed tier listed:\n%s", out)
	}
}
