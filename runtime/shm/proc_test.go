package shm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Tests that need a second process re-execute the test binary with
// childRole set; TestShmChild then plays that role and exits.
const (
	childRole = "IOWARP_SHM_CHILD"
	childSeg  = "IOWARP_SHM_SEG"  // posix name, or "fd3" for an inherited memfd
	childArgs = "IOWARP_SHM_ARGS" // role arguments, comma-separated integers
	childFd   = "fd3"
)

// child is a running helper process.
type child struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func startChild(t testing.TB, role, seg string, args []uint64, files ...*os.File) *child {
	t.Helper()
	strs := make([]string, len(args))
	for i, a := range args {
		strs[i] = strconv.FormatUint(a, 10)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestShmChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childRole+"="+role, childSeg+"="+seg, childArgs+"="+strings.Join(strs, ","))
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return c
}

// waitLine reads the child's stdout until a line equal to want.
func (c *child) waitLine(want string) error {
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			return fmt.Errorf("child stdout before %q: %w", want, err)
		}
		if strings.TrimSpace(line) == want {
			return nil
		}
	}
}

// wait drains stdout and waits for a clean exit.
func (c *child) wait() error {
	var sb strings.Builder
	c.out.WriteTo(&sb)
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("child %v: %w\n%s", c.cmd.Env[len(c.cmd.Env)-3:], err, sb.String())
	}
	return nil
}

// TestShmChild is not a test: it is the body of helper processes.
func TestShmChild(t *testing.T) {
	role := os.Getenv(childRole)
	if role == "" {
		t.Skip("helper process body; runs only when re-executed by another test")
	}
	var args []uint64
	if a := os.Getenv(childArgs); a != "" {
		for _, f := range strings.Split(a, ",") {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, v)
		}
	}
	s, err := attachChildSegment(os.Getenv(childSeg))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := runRole(s, role, args); err != nil {
		t.Fatalf("role %s: %v", role, err)
	}
}

func attachChildSegment(seg string) (*Segment, error) {
	var b Backend
	var err error
	if seg == childFd {
		b, err = OpenMemfd(os.NewFile(3, "inherited-memfd"))
	} else {
		b, err = OpenPosix(seg)
	}
	if err != nil {
		return nil, err
	}
	return Attach(b, nil)
}

func runRole(s *Segment, role string, args []uint64) error {
	ptr := func(i int) Pointer { return Pointer{Segment: s.ID(), Offset: args[i]} }
	switch role {
	case "workers": // w, n, then vec, list, map, str, popped[w]
		r := sharedRoots{vec: ptr(2), list: ptr(3), m: ptr(4), str: ptr(5)}
		r.popped = make([]Pointer, args[0]+1)
		r.popped[args[0]] = ptr(6)
		return workerOps(s, r, uint32(args[0]), int(args[1]))
	case "churn": // seed, ops
		return allocChurn(s, args[0], int(args[1]))
	case "producer": // ring, id, n
		return produce(s, ptr(0), uint32(args[1]), int(args[2]))
	case "echo": // request ring, response ring, spin ns
		fmt.Println("ready")
		return echo(s, ptr(0), ptr(1), time.Duration(args[2]))
	case "hold-alloc-lock": // hold ms
		if err := s.lockAlloc(); err != nil {
			return err
		}
		return dieHolding(time.Duration(args[0]) * time.Millisecond)
	case "hold-object-lock": // object, hold ms
		o := object{s: s, off: args[0]}
		if _, err := s.lockAt(o.off + oLock); err != nil {
			return err
		}
		return dieHolding(time.Duration(args[1]) * time.Millisecond)
	}
	return fmt.Errorf("unknown role %q", role)
}

// dieHolding announces that it holds a lock, waits, and dies by SIGKILL:
// no deferred code, no unlock.
func dieHolding(d time.Duration) error {
	fmt.Println("locked")
	time.Sleep(d)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestContainersConcurrentProcesses mutates the same containers from two
// goroutines here and three child processes, and checks the model.
func TestContainersConcurrentProcesses(t *testing.T) {
	const procs, goroutines, n = 3, 2, 1500
	workers := procs + goroutines
	s, name := newPosixSegment(t, 16<<20)
	r := makeShared(t, s, workers)
	var children []*child
	for w := goroutines; w < workers; w++ {
		children = append(children, startChild(t, "workers", name, []uint64{uint64(w), n,
			r.vec.Offset, r.list.Offset, r.m.Offset, r.str.Offset, r.popped[w].Offset}))
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < goroutines; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = workerOps(s, r, uint32(w), n)
		}()
	}
	wg.Wait()
	for i, c := range children {
		errs[goroutines+i] = c.wait()
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	verifyShared(t, s, r, workers, n)
}

// TestMemfdInheritedByChild hands the segment to a child as fd 3 only.
func TestMemfdInheritedByChild(t *testing.T) {
	const n = 500
	b, err := CreateMemfd("inherit", 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	s, err := Format(b, 11, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := makeShared(t, s, 2)
	c := startChild(t, "workers", childFd, []uint64{1, n,
		r.vec.Offset, r.list.Offset, r.m.Offset, r.str.Offset, r.popped[1].Offset}, b.File())
	if err := workerOps(s, r, 0, n); err != nil {
		t.Fatal(err)
	}
	if err := c.wait(); err != nil {
		t.Fatal(err)
	}
	verifyShared(t, s, r, 2, n)
}

// TestAllocConcurrentProcesses runs the allocator churn in three processes
// and two goroutines at once on one segment.
func TestAllocConcurrentProcesses(t *testing.T) {
	s, name := newPosixSegment(t, 8<<20)
	var cs []*child
	for i := 0; i < 3; i++ {
		cs = append(cs, startChild(t, "churn", name, []uint64{uint64(100 + i), 4000}))
	}
	var wg sync.WaitGroup
	errs := make([]error, 2+len(cs))
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[g] = allocChurn(s, uint64(g), 4000) }()
	}
	wg.Wait()
	for i, c := range cs {
		errs[2+i] = c.wait()
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Stats()
	if st.Allocations != 0 || st.Free != st.Capacity || st.TotalAllocs == 0 {
		t.Errorf("stats after churn: %+v", st)
	}
	mustCheck(t, s)
}

// TestLockOwnerDies: a process dies (SIGKILL) holding the allocator lock,
// and then one holding a vector's lock, while this process waits on them.
func TestLockOwnerDies(t *testing.T) {
	s, name := newPosixSegment(t, 1<<20)
	c := startChild(t, "hold-alloc-lock", name, []uint64{100})
	if err := c.waitLine("locked"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := s.Alloc(64) // blocks until the child is dead
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("allocator lock recovered after %v", time.Since(start))
	if err := c.cmd.Wait(); err == nil {
		t.Fatal("child exited cleanly; it should have been killed")
	}
	st, err := s.Stats()
	if err != nil || st.LockRecoveries != 1 || st.Allocations != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	s.Free(p)

	v, _ := NewVector[uint64](s, 0)
	c = startChild(t, "hold-object-lock", name, []uint64{v.Pointer().Offset, 50})
	if err := c.waitLine("locked"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Push(7); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
	if got, err := v.Values(); err != nil || len(got) != 1 || got[0] != 7 {
		t.Fatalf("vector after recovery: %v %v", got, err)
	}
	mustCheck(t, s)
}

func TestLockDeadPidInWord(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	store32(s.mem, hLock, uint32(cmd.Process.Pid)|lockWaiters)
	if _, err := s.Alloc(1); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(); st.LockRecoveries != 1 {
		t.Errorf("recoveries %d", st.LockRecoveries)
	}
}

func TestLockTimeoutLiveOwner(t *testing.T) {
	b, err := CreateMemfd("timeout", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := Format(b, 1, &Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	store32(s.mem, hLock, 1) // init: alive, and never going to unlock
	start := time.Now()
	if _, err := s.Alloc(1); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("Alloc = %v, want ErrLockTimeout", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("gave up after %v", d)
	}
}
