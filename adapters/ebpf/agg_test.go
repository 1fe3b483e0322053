package ebpf

import (
	"os"
	"testing"
)

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

// TestCountedRecords: the kernel's counts records land on the file their
// fd names, with Darshan's sequential and consecutive verdicts per file:
// a record's first access, which the kernel judged against an fd with
// no previous access, is judged again against the file's last one; a
// record on an fd not seen opened names the parent's fd of that number
// once the process is gone.
func TestCountedRecords(t *testing.T) {
	a := NewAggregator()
	const pid, child = 1 << 22, 1<<22 + 1 // no such processes in /proc
	open := Event{Pid: pid, Tid: pid, Ret: 3, Call: SyscallOf(257), Path: "/f", Off: -1}
	cwd := int32(atFDCWD)
	open.Args[0] = uint64(uint32(cwd))
	a.Add(open)
	a.Add(Event{Pid: pid, Tid: pid, Ret: 4, Call: SyscallOf(32), Args: [5]uint64{3}, Off: -1}) // dup(3) = 4
	// fd 3: 4 writes of 100 at 0, 100, 200, 300 (the kernel: 3 sequential, 3 consecutive).
	w := func(fd int, calls, seq, consec, first, last, maxEnd int64) Event {
		c := &Counts{Seq: [2]int64{0, seq}, Consec: [2]int64{0, consec}, MaxEnd: [2]int64{0, maxEnd},
			FirstOff: [2]int64{0, first + 1}, LastOff: [2]int64{0, last}}
		c.Calls[5] = calls
		c.Bytes[1] = 100 * calls
		c.Sizes[1][bucketOf(100)] = calls
		return Event{Pid: pid, Args: [5]uint64{uint64(fd)}, Counts: c, Off: -1}
	}
	a.Add(w(3, 4, 3, 3, 0, 399, 400))
	// fd 4 (the same file): 2 writes at 400, 500; the kernel judged the
	// first against nothing (sequential, not consecutive).
	a.Add(w(4, 2, 2, 1, 400, 599, 600))
	f := a.files["/f"]
	if f == nil || f.Writes != 6 || f.BytesWritten != 600 || f.MaxWriteEnd != 600 {
		t.Fatalf("/f: %+v", f)
	}
	if f.SeqWrites != 5 || f.ConsecWrite != 5 {
		t.Fatalf("sequential %d consecutive %d, want 5 and 5 (per file)", f.SeqWrites, f.ConsecWrite)
	}
	if a.Calls["write"] != 6 || a.Procs[pid].BytesWritten != 600 {
		t.Fatalf("calls %v, process %+v", a.Calls, a.Procs[pid])
	}
	// A child, gone, wrote on fd 3, which it inherited.
	a.Add(Event{Fork: true, Pid: pid, Ret: child})
	c := w(3, 1, 1, 1, 600, 699, 700)
	c.Pid = child
	a.Add(c)
	if f.Writes != 7 || !f.Pids[child] {
		t.Fatalf("the child's write: %+v", f)
	}
	// A command this process started, gone, wrote on its stdout, which
	// it inherited from this process (as `trace -- CMD` tells the
	// aggregator).
	const cmd = 1<<22 + 2
	a.Add(Event{Fork: true, Pid: os.Getpid(), Ret: cmd})
	out, err := os.Readlink("/proc/self/fd/1")
	if err != nil {
		t.Skip(err)
	}
	o := w(1, 2, 1, 1, 0, 199, 200)
	o.Pid = cmd
	a.Add(o)
	if g := a.files[out]; g == nil || g.Writes != 2 || !g.Pids[cmd] {
		t.Fatalf("the command's stdout %s: %+v; files %v", out, g, a.Files())
	}
}
