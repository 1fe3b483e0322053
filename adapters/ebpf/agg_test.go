package ebpf

import "testing"

// TestForkedFds: a child's I/O on an fd its parent opened (sh: open,
// dup2 to 1, vfork, exec cat) counts to the parent's file, even when the
// child's events come before the parent's vfork returns.
func TestForkedFds(t *testing.T) {
	a := NewAggregator()
	ev := func(pid int, name string, ret int64, args ...uint64) Event {
		e := Event{Pid: pid, Tid: pid, Ret: ret}
		for _, s := range syscalls {
			if s.Name == name {
				e.Call = s
			}
		}
		copy(e.Args[:], args)
		return e
	}
	const parent, child, gone = 1 << 22, 1<<22 + 1, 1<<22 + 2 // no such processes in /proc
	cwd := int32(atFDCWD)
	open := ev(parent, "openat", 3, uint64(uint32(cwd)), 0, 0o1101)
	open.Path = "/out"
	a.Add(open)
	a.Add(ev(parent, "dup2", 1, 3, 1))
	// The child writes 4096 bytes on fd 1 before the vfork event.
	a.Add(ev(child, "write", 4096, 1, 0, 4096))
	a.Add(ev(parent, "vfork", child))
	// A later child of the same parent starts with the table at once.
	a.Add(ev(parent, "clone", gone))
	a.Add(ev(gone, "write", 100, 1, 0, 100))
	f := a.files["/out"]
	if f == nil || f.Writes != 2 || f.BytesWritten != 4196 || f.Opens != 1 {
		t.Fatalf("/out: %+v", f)
	}
	for _, g := range a.Files() {
		if g.Path != "/out" {
			t.Errorf("left over: %s %+v", g.Path, g)
		}
	}
}
