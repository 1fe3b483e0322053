package tier

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

func devices(t *testing.T) map[string]*Device {
	t.Helper()
	ram, err := Open(KindRAM, "ram", "")
	if err != nil {
		t.Fatal(err)
	}
	file, err := Open(KindFile, "nvme", t.TempDir()+"/sub")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*Device{"ram": ram, "file": file}
}

func TestSegment(t *testing.T) {
	for name, d := range devices(t) {
		t.Run(name, func(t *testing.T) {
			s, err := d.NewSegment("b/1")
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte{7}, 8192)
			if err := s.WriteAt(data, 4096); err != nil {
				t.Fatal(err)
			}
			if s.Size() != 12288 {
				t.Fatalf("size %d", s.Size())
			}
			buf := make([]byte, 16384)
			for i := range buf {
				buf[i] = 1
			}
			if err := s.ReadAt(buf, 0); err != nil { // hole, data, past EOF
				t.Fatal(err)
			}
			want := make([]byte, 16384)
			copy(want[4096:], data)
			if !bytes.Equal(buf, want) {
				t.Fatal("read mismatch")
			}
			if err := s.Punch(4096+100, 4096); err != nil {
				t.Fatal(err)
			}
			s.ReadAt(buf, 0)
			clear(want[4196 : 4196+4096])
			if !bytes.Equal(buf, want) {
				t.Fatal("punch did not zero exactly its range")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if d.Dir() != "" {
				if ents, _ := os.ReadDir(d.inst.dir); len(ents) != 1 {
					t.Fatalf("segment file left: %v", ents)
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				if ents, _ := os.ReadDir(d.Dir()); len(ents) != 0 {
					t.Fatalf("instance directory left: %v", ents)
				}
			}
		})
	}
}

func fsize(t *testing.T, s *Segment) int64 {
	var st os.FileInfo
	st, err := s.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("tape", "x", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad kind: %v", err)
	}
	if _, err := Open(KindFile, "x", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("no dir: %v", err)
	}
	if s := sanitize("a/b c.."); s != "a_b_c__" {
		t.Errorf("sanitize %q", s)
	}
}
