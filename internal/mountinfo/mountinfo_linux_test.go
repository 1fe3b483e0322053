package mountinfo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	const info = `22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
35 22 0:31 / /mnt/with\040space rw,nosuid shared:12 - tmpfs none rw,size=1024k
40 22 0:45 / /iowarp rw,nosuid,nodev,relatime shared:20 - fuse.iowarp iowarp rw,user_id=0,group_id=0
garbage line
`
	ms, err := parseMountinfo(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	want := []MountInfo{
		{"/", "ext4", "/dev/vda"},
		{"/mnt/with space", "tmpfs", "none"},
		{"/iowarp", "fuse.iowarp", "iowarp"},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %d mounts %+v, want %d", len(ms), ms, len(want))
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mount %d = %+v, want %+v", i, ms[i], want[i])
		}
	}
}

func TestCheckMountPoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if got, err := CheckMountPoint(dir); err != nil || got != dir {
		t.Errorf("CheckMountPoint(%s) = %q, %v", dir, got, err)
	}
	if _, err := CheckMountPoint(file); !errors.Is(err, ErrNotDir) {
		t.Errorf("file: %v", err)
	}
	if _, err := CheckMountPoint(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing: %v", err)
	}
	if _, err := CheckMountPoint("/proc"); !errors.Is(err, ErrMountBusy) {
		t.Errorf("/proc: %v", err)
	}
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if got, err := CheckWritable("backing directory", dir); err != nil || got != dir {
		t.Errorf("CheckWritable(%s) = %q, %v", dir, got, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probe left %v behind", ents)
	}
	_, err := CheckWritable("backing directory", filepath.Join(dir, "missing"))
	if err == nil || err.Error() != "backing directory "+filepath.Join(dir, "missing")+" does not exist" {
		t.Errorf("missing: %v", err)
	}
	if _, err := CheckWritable("backing directory", "/proc/1"); !errors.Is(err, ErrNotWritable) {
		t.Errorf("/proc/1: %v", err)
	}
}
