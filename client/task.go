package client

import (
	"errors"
	"fmt"
	"sync"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/ipc"
	"github.com/iowarp/iowarp/runtime/modules/cte"
)

// Task is an asynchronous call in flight (PutAsync, GetAsync, ...). Wait
// for it exactly once; Data and N are valid after Wait. The data passed
// to the async call was copied into the shared segment before it returned,
// so the caller may reuse its slice at once.
type Task struct {
	k    *call
	ic   *ipc.Call
	once sync.Once
	err  error
	res  runtime.Result

	// finish looks at the output (copies it out) before the buffer is
	// freed; retry re-issues the call with an output of the size the
	// daemon asked for (Get of a blob larger than the first guess).
	finish func(t *Task, out []byte) error
	retry  func(need int) (*Task, error)
	data   []byte
	n      int
}

func (k *call) start(finish func(*Task, []byte) error) (*Task, error) {
	ic, err := k.c.c.Start(k.m, k.args, k.in, k.out)
	if err != nil {
		k.buf.Free()
		return nil, err
	}
	return &Task{k: k, ic: ic, finish: finish}, nil
}

// State is where the task is: Pending while it waits in the request ring
// for the daemon to take it (behind calls the daemon is busy with),
// Running from then until the daemon completed it, then Completed or
// Failed (a lost connection too). A task the daemon took but queued for
// its worker pool (calls were waiting behind it) is Running while it
// waits for a worker: the ring shows what the daemon took, not what a
// worker started (ipc.Call.Taken). State does not block, except that it
// finishes a completed task as Wait does: a Get whose blob outgrew its
// first buffer is re-issued and waited for.
func (t *Task) State() runtime.TaskState {
	if !t.ic.Poll() {
		if !t.ic.Taken() {
			return runtime.Pending
		}
		return runtime.Running
	}
	if t.Wait() != nil {
		return runtime.Failed
	}
	return runtime.Completed
}

// Wait blocks until the task finished and returns its error.
func (t *Task) Wait() error {
	t.once.Do(t.wait)
	return t.err
}

func (t *Task) wait() {
	t.res, t.err = t.ic.Wait()
	if t.err == nil && t.finish != nil {
		t.err = t.finish(t, t.k.out.Bytes()[:t.res.N])
	}
	t.k.buf.Free()
	if !errors.Is(t.err, runtime.ErrShortBuffer) {
		return
	}
	need := t.res.Value
	if t.retry != nil && need > 0 && need < 1<<40 {
		t2, err := t.retry(int(need))
		if err == nil {
			err = t2.Wait()
		}
		t.err, t.data, t.n = err, t2Data(t2), t2N(t2)
		return
	}
	t.err = &shortError{need: need, err: t.err}
}

func t2Data(t *Task) []byte {
	if t == nil {
		return nil
	}
	return t.data
}

func t2N(t *Task) int {
	if t == nil {
		return 0
	}
	return t.n
}

// Done is closed when the task finished (Wait then returns at once).
func (t *Task) Done() <-chan struct{} { return t.ic.Done() }

// Data is the blob a GetAsync read.
func (t *Task) Data() []byte { return t.data }

// N is the number of bytes a PartialGetAsync read.
func (t *Task) N() int { return t.n }

// PutAsync starts a Put.
func (b *Bucket) PutAsync(blob string, data []byte) (*Task, error) {
	k, err := b.c.newCall(cte.Name, cte.MPut, b.args(blob).Bytes(), data, errRoom)
	if err != nil {
		return nil, err
	}
	return k.start(nil)
}

// PartialPutAsync starts a PartialPut.
func (b *Bucket) PartialPutAsync(blob string, off int64, data []byte) (*Task, error) {
	k, err := b.c.newCall(cte.Name, cte.MPartialPut, b.args(blob).I64(off).Bytes(), data, errRoom)
	if err != nil {
		return nil, err
	}
	return k.start(nil)
}

// PartialGetAsync starts a PartialGet into buf; buf must not be touched
// until Wait returns.
func (b *Bucket) PartialGetAsync(blob string, off int64, buf []byte) (*Task, error) {
	k, err := b.c.newCall(cte.Name, cte.MPartialGet, b.args(blob).I64(off).Bytes(), nil, len(buf))
	if err != nil {
		return nil, err
	}
	return k.start(func(t *Task, out []byte) error {
		if len(out) > len(buf) {
			return fmt.Errorf("partial get: daemon returned %d bytes for %d: %w", len(out), len(buf), runtime.ErrInternal)
		}
		t.n = copyCached(buf, out)
		return nil
	})
}

// GetAsync starts a Get. A blob larger than the first guess (256 KiB) is
// fetched again, with its exact size, inside Wait.
func (b *Bucket) GetAsync(blob string) (*Task, error) {
	t, err := b.getAsync(blob, getGuess)
	if err != nil {
		return nil, err
	}
	t.retry = func(need int) (*Task, error) { return b.getAsync(blob, need) }
	return t, nil
}

func (b *Bucket) getAsync(blob string, size int) (*Task, error) {
	k, err := b.c.newCall(cte.Name, cte.MGet, b.args(blob).Bytes(), nil, size)
	if err != nil {
		return nil, err
	}
	return k.start(func(t *Task, out []byte) error {
		t.data = make([]byte, len(out))
		copyCached(t.data, out)
		return nil
	})
}
