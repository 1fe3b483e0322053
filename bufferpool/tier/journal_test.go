package tier

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func sampleRecords() []Record {
	return []Record{
		{Kind: RecBucket, Bucket: 7, Tag: []byte("dev=1 ino=2 path=/a b"), PageSize: 1 << 20},
		{Kind: RecPage, Bucket: 7, Page: 3, Version: 9, Segment: "seg-7-123", Off: 3 << 20, Len: 1 << 20, CRC: 0xdeadbeef, Size: 5<<20 + 1},
		{Kind: RecGone, Bucket: 7, Page: 3},
		{Kind: RecSize, Bucket: 7, Size: 100},
		{Kind: RecDrop, Bucket: 7},
	}
}

func TestJournalRoundTrip(t *testing.T) {
	var b []byte
	want := sampleRecords()
	for i := range want {
		b = AppendFrame(b, &want[i])
	}
	got, rest := ParseJournal(b)
	if rest != 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %+v (rest %d), want %+v", got, rest, want)
	}
	for name, mangle := range map[string]func([]byte) []byte{
		"torn tail":    func(b []byte) []byte { return b[:len(b)-3] },
		"flipped byte": func(b []byte) []byte { b[len(b)-5] ^= 1; return b },
		"huge length":  func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			got, rest := ParseJournal(mangle(append([]byte(nil), b...)))
			if rest == 0 || len(got) < len(want)-1 || !reflect.DeepEqual(got[:len(want)-1], want[:len(want)-1]) {
				t.Fatalf("parsed %d records, rest %d", len(got), rest)
			}
		})
	}
}

// TestStaleInstances: a directory whose lock is free is stale (and is
// locked by the Open that found it); a live one is not; legacy segment
// files go at once.
func TestStaleInstances(t *testing.T) {
	dir := t.TempDir()
	live, err := Open(KindFile, "a", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead := filepath.Join(dir, "iowarp-1-2")
	os.Mkdir(dead, 0o700)
	os.WriteFile(filepath.Join(dead, "seg-1-x"), []byte("data"), 0o600)
	os.WriteFile(filepath.Join(dir, "iowarp-seg-old"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(dir, "iowarp-not-a-daemon"), 0o700)
	open := filepath.Join(dir, "iowarp-3-4") // writable by others: never trusted
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	d, err := Open(KindFile, "b", dir)
	if err != nil {
		t.Fatal(err)
	}
	st := d.Stale()
	if len(st) != 1 || st[0].Dir() != dead || st[0].Bytes <= 0 || st[0].Started() != 2 {
		t.Fatalf("stale %v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "iowarp-seg-old")); err == nil {
		t.Fatal("legacy segment file left")
	}
	if err := st[0].ReadSegment("../lock", 0, make([]byte, 1)); err == nil {
		t.Fatal("ReadSegment outside the directory")
	}
	if err := st[0].Remove(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 { // the live instance, iowarp-not-a-daemon, the open one
		t.Fatalf("left: %v", ents)
	}
}

func FuzzParseJournal(f *testing.F) {
	var b []byte
	recs := sampleRecords()
	for i := range recs {
		b = AppendFrame(b, &recs[i])
	}
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, rest := ParseJournal(b)
		if rest < 0 || rest > len(b) {
			t.Fatalf("rest %d of %d", rest, len(b))
		}
		// What parsed survives a round trip unchanged.
		var again []byte
		for i := range recs {
			again = AppendFrame(again, &recs[i])
		}
		if back, r := ParseJournal(again); r != 0 || !reflect.DeepEqual(back, recs) {
			t.Fatal("parsed records do not round-trip")
		}
	})
}
