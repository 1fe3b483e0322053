package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/runtime"
)

func TestBucketOps(t *testing.T) {
	d := startDaemon(t)
	c := connect(t, d)
	b, err := c.Bucket("b1")
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: past the Get guess
	if err := b.Put("x", big); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get("x")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("get: %v, %d bytes", err, len(got))
	}
	if err := b.PartialPut("x", int64(len(big)), []byte("tail")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	n, err := b.PartialGet("x", int64(len(big))-6, buf)
	if err != nil || string(buf[:n]) != "abcdeftail" {
		t.Fatalf("partial get: %v %q", err, buf[:n])
	}
	if err := b.SetTag("x", "units", "kelvin"); err != nil {
		t.Fatal(err)
	}
	info, err := b.Stat("x")
	if err != nil || info.Size != int64(len(big)+4) || info.Tags["units"] != "kelvin" || !info.Dirty {
		t.Fatalf("stat: %v %+v", err, info)
	}
	if err := b.Put("y", nil); err != nil {
		t.Fatal(err)
	}
	list, err := b.List()
	if err != nil || len(list) != 2 || list[0].Name != "x" || list[1].Name != "y" {
		t.Fatalf("list: %v %+v", err, list)
	}
	if err := b.Delete("x"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get("x"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "x") {
		t.Fatalf("get deleted: %v", err)
	}
	if err := b.Delete("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete deleted: %v", err)
	}
	names, err := c.Buckets()
	if err != nil || len(names) != 1 || names[0] != "b1" {
		t.Fatalf("buckets: %v %v", err, names)
	}
	st, err := c.Status()
	if err != nil || st.Extra["ipc"] == nil {
		t.Fatalf("status: %v %+v", err, st)
	}
}

func TestAsyncAndBuffers(t *testing.T) {
	d := startDaemon(t)
	c := connect(t, d)
	b, _ := c.Bucket("async")
	var tasks []*Task
	for i := 0; i < 64; i++ {
		tk, err := b.PutAsync(fmt.Sprint(i), bytes.Repeat([]byte{byte(i)}, 1000+i))
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, tk)
	}
	for _, tk := range tasks {
		if err := tk.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	gets := make([]*Task, 64)
	for i := range gets {
		gets[i], _ = b.GetAsync(fmt.Sprint(i))
	}
	for i, tk := range gets {
		if err := tk.Wait(); err != nil || len(tk.Data()) != 1000+i || tk.Data()[0] != byte(i) {
			t.Fatalf("get %d: %v %d", i, err, len(tk.Data()))
		}
	}
	buf, err := c.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	copy(buf.Bytes(), "zero copy")
	if err := b.PutBuffer("z", buf, 9); err != nil {
		t.Fatal(err)
	}
	clear(buf.Bytes())
	n, err := b.GetBuffer("z", buf)
	if err != nil || string(buf.Bytes()[:n]) != "zero copy" {
		t.Fatalf("get buffer: %v %q", err, buf.Bytes()[:n])
	}
	small, _ := c.Alloc(4)
	defer small.Free()
	if _, err := b.GetBuffer("z", small); !errors.Is(err, ErrShortBuffer) || NeededSize(err) != 9 {
		t.Fatalf("short get: %v (%d)", err, NeededSize(err))
	}
}

// TestSixteenClientProcesses runs 16 client processes at once, each doing
// random Put/Get/PartialPut/PartialGet of 1 B to 8 MiB with checksums.
func TestSixteenClientProcesses(t *testing.T) {
	d := startDaemon(t)
	ops := 32
	if testing.Short() {
		ops = 8
	}
	var procs []*bytes.Buffer
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		cmd := child(t, "mixed", d.srv.Path(), fmt.Sprintf("IOWARP_SEED=%d", i+1), fmt.Sprintf("IOWARP_OPS=%d", ops))
		var out bytes.Buffer
		cmd.Stderr = &out
		procs = append(procs, &out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, out.String())
			}
			errs <- err
		}()
	}
	waitFor(t, 60*time.Second, func() bool { return d.srv.Stats().Accepted == 16 })
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	waitFor(t, 5*time.Second, func() bool { return d.srv.Stats().Clients == 0 })
	if st := d.srv.Stats(); st.SegmentBytes != 0 || st.Reclaimed != 16 || st.Killed != 0 {
		t.Fatalf("after the clients: %+v", st)
	}
}

// TestKillClientMidTransfer kills -9 a client while it puts 8 MiB blobs:
// the daemon reclaims its segment and another client carries on.
func TestKillClientMidTransfer(t *testing.T) {
	d := startDaemon(t)
	other := connect(t, d)
	ob, _ := other.Bucket("bystander")
	base := d.srv.Stats()
	cmd := child(t, "putloop", d.srv.Path())
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	if st := d.srv.Stats(); st.Clients != base.Clients+1 || st.SegmentBytes <= base.SegmentBytes {
		t.Fatalf("with the child: %+v", st)
	}
	time.Sleep(30 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitFor(t, 5*time.Second, func() bool { return d.srv.Stats().Reclaimed == base.Reclaimed+1 })
	st := d.srv.Stats()
	if st.Clients != base.Clients || st.SegmentBytes != base.SegmentBytes {
		t.Fatalf("after the kill: %+v, before %+v", st, base)
	}
	r := st.LastReclaim
	if int(r.PID) != cmd.Process.Pid || r.Handles != 1 || r.Allocations < 2 {
		t.Fatalf("reclaim %+v (child pid %d)", r, cmd.Process.Pid)
	}
	t.Logf("reclaimed: %+v", r)
	data := bytes.Repeat([]byte("ok"), 1<<20)
	for i := 0; i < 5; i++ {
		if err := ob.Put("still", data); err != nil {
			t.Fatal(err)
		}
		if got, err := ob.Get("still"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("bystander get: %v", err)
		}
	}
	v, err := d.pool.LookupBucket("victim")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := v.Stat("big"); err != nil || info.Size != 8<<20 {
		t.Fatalf("victim's blob: %v %+v", err, info)
	}
}

// TestDaemonDeathWakesClients kills -9 a daemon process while a client
// waits for a task: the wait returns ErrDaemonGone at once.
func TestDaemonDeathWakesClients(t *testing.T) {
	sock := t.TempDir() + "/d.ipc"
	cmd := child(t, "daemon", sock)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("daemon said %q", line)
	}
	var waits []*Client
	done := make(chan error, 3)
	for i := 0; i < 3; i++ {
		c, err := Connect(Options{Socket: sock})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		waits = append(waits, c)
		go func() {
			_, _, err := c.Call("testmod", "sleep", nil, nil, 256)
			done <- err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	for range waits {
		select {
		case err := <-done:
			if !errors.Is(err, ErrDaemonGone) {
				t.Fatalf("wait: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting client was not woken")
		}
	}
	t.Logf("clients woken %v after the kill", time.Since(start))
	if err := waits[0].Noop(); !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("call after death: %v", err)
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("condition not reached in %v", d)
}

// TestTaskState: a task says where it is without blocking: Pending or
// Running until the daemon completed it, then Completed or Failed;
// polling State alone (no Wait) takes the completion off the ring.
func TestTaskState(t *testing.T) {
	d := startDaemon(t)
	c := connect(t, d)
	b, _ := c.Bucket("state")
	tk, err := b.PutAsync("big", bytes.Repeat([]byte{7}, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	if s := tk.State(); s != runtime.Pending && s != runtime.Running && s != runtime.Completed {
		t.Fatalf("just submitted: %v", s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s := tk.State(); s == runtime.Pending || s == runtime.Running; s = tk.State() {
		if time.Now().After(deadline) {
			t.Fatal("put still Running after 30 s of polling State")
		}
		time.Sleep(time.Millisecond)
	}
	if s := tk.State(); s != runtime.Completed || tk.Wait() != nil {
		t.Fatalf("put: %v %v", s, tk.Wait())
	}
	miss, err := b.GetAsync("no such blob")
	if err != nil {
		t.Fatal(err)
	}
	for s := miss.State(); s == runtime.Pending || s == runtime.Running; s = miss.State() {
		if time.Now().After(deadline) {
			t.Fatal("get still Running after 30 s of polling State")
		}
		time.Sleep(time.Millisecond)
	}
	if s := miss.State(); s != runtime.Failed || miss.Wait() == nil {
		t.Fatalf("get of a missing blob: %v %v", s, miss.Wait())
	}
}

// TestPartialBuffers: PartialGetBuffer and PartialPutBuffer move bytes
// between a range of a segment buffer and a range of a blob; a range
// outside the buffer is ErrInvalid, with nothing sent.
func TestPartialBuffers(t *testing.T) {
	d := startDaemon(t)
	c := connect(t, d)
	b, _ := c.Bucket("partial-buffers")
	buf, err := c.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	copy(buf.Bytes(), "0123456789abcdef")
	if err := b.PartialPutBuffer("p", 4, buf, 10, 6); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get("p")
	if err != nil || string(got) != "\x00\x00\x00\x00abcdef" {
		t.Fatalf("get after partial put: %v %q", err, got)
	}
	clear(buf.Bytes())
	n, err := b.PartialGetBuffer("p", 6, buf, 32, 16)
	if err != nil || n != 4 || string(buf.Bytes()[32:36]) != "cdef" {
		t.Fatalf("partial get: %v %d %q", err, n, buf.Bytes()[32:36])
	}
	for _, r := range [][2]int{{60, 8}, {-1, 2}, {0, 65}, {0, -1}} {
		if _, err := b.PartialGetBuffer("p", 0, buf, r[0], r[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("partial get of %v of a 64-byte buffer: %v", r, err)
		}
		if err := b.PartialPutBuffer("p", 0, buf, r[0], r[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("partial put of %v of a 64-byte buffer: %v", r, err)
		}
	}
	if got, _ := b.Get("p"); len(got) != 10 {
		t.Fatalf("a refused put changed the blob: %q", got)
	}
}
