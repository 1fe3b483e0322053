package shm

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestPosixCreateOpenDestroy(t *testing.T) {
	name := uniqueName(t)
	b, err := CreatePosix(name, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	st, err := os.Stat(filepath.Join(shmDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := CreatePosix(name, 1<<16); !errors.Is(err, os.ErrExist) {
		t.Errorf("second create: %v, want ErrExist", err)
	}
	b2, err := OpenPosix(name)
	if err != nil {
		t.Fatal(err)
	}
	b.Bytes()[100] = 42
	if b2.Bytes()[100] != 42 || len(b2.Bytes()) != 1<<16 {
		t.Errorf("second mapping does not share the bytes")
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b2.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := b.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPosix(name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("open after destroy: %v", err)
	}
}

func TestPosixBadNames(t *testing.T) {
	for _, name := range []string{"", "a/b", "..", "/", string(make([]byte, 300))} {
		if _, err := CreatePosix(name, 4096); err == nil {
			t.Errorf("CreatePosix(%q) succeeded", name)
		}
	}
	if _, err := CreatePosix(uniqueName(t), 0); err == nil {
		t.Error("size 0 accepted")
	}
}

func TestMemfdShare(t *testing.T) {
	m, err := CreateMemfd("share", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	// Reopen read-write through /proc, as a process receiving the fd would.
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(m.File().Fd())), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := OpenMemfd(f)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	m.Bytes()[5] = 9
	if m2.Bytes()[5] != 9 {
		t.Error("memfd mappings do not share")
	}
}

func TestMmapFileSurvives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	b, err := CreateMmapFile(path, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Format(b, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	str, err := NewString(s, "still here")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRoot("greeting", str.Pointer()); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := OpenMmapFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Destroy()
	s2, err := Attach(b2, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s2.Root("greeting")
	if err != nil {
		t.Fatal(err)
	}
	str2, err := OpenString(s2, p)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := str2.Load(); err != nil || got != "still here" {
		t.Fatalf("Load = %q, %v", got, err)
	}
	mustCheck(t, s2)
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestBackendsNoLeak: Close and Destroy release every fd and mapping, and
// Destroy removes the names.
func TestBackendsNoLeak(t *testing.T) {
	before := openFDs(t)
	dir := t.TempDir()
	for i := range 10 {
		p, err := CreatePosix(uniqueName(t), 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		m, err := CreateMemfd("leak", 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		f, err := CreateMmapFile(filepath.Join(dir, strconv.Itoa(i)), 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []Backend{p, m, f} {
			if err := b.Destroy(); err != nil {
				t.Fatal(err)
			}
			if b.Bytes() != nil {
				t.Errorf("%s: mapping still set after Destroy", b.Kind())
			}
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("fds: %d before, %d after", before, after)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d files left after Destroy", len(ents))
	}
	left, _ := filepath.Glob(filepath.Join(shmDir, "iowarp-shm-test-"+strconv.Itoa(os.Getpid())+"-*"))
	if len(left) != 0 {
		t.Errorf("shm names left: %v", left)
	}
}
