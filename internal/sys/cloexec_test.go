package sys

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCloexecDevFuse(t *testing.T) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR, 0) // as go-fuse's direct mount does
	if err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	defer unix.Close(fd)
	other, err := unix.Open(os.DevNull, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(other)
	if err := CloexecDevFuse(); err != nil {
		t.Fatal(err)
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
		t.Fatal("/dev/fuse fd still inherited by children")
	}
	if fl, _ := unix.FcntlInt(uintptr(other), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC != 0 {
		t.Fatal("an fd that is not /dev/fuse was changed")
	}
}
