package runtime

import (
	"context"
	"fmt"
)

// TaskID names a task submitted to a Runtime; it is unique for the life of
// the Runtime.
type TaskID uint64

// TaskState is where a task is in its life.
type TaskState uint32

const (
	// Pending: queued, no worker has taken it yet.
	Pending TaskState = iota
	// Running: a worker is executing the method.
	Running
	// Completed: the method returned without error.
	Completed
	// Failed: the method (or the dispatch: unknown module or method,
	// shutdown) returned an error; TaskResult.Err says which.
	Failed
)

func (s TaskState) String() string {
	switch s {
	case Pending:
		return "pending"
	case Running:
		return "running"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("TaskState(%d)", uint32(s))
}

// Task is one call of a module method. A task names its module and method
// either by name (Module, Method) or by the ids the Registry assigned
// (ModuleID, MethodID, with ByID set); the runtime resolves names once.
//
// Args are the method's encoded arguments (see ArgReader). In is an input
// payload and Out an output buffer; for tasks that come from a client
// process both may alias that client's shared memory, which the client can
// change at any moment: a method must decode Args before acting (the ipc
// server hands it a private copy of Args) and treat In as data only.
type Task struct {
	Module   string
	Method   string
	ModuleID uint32
	MethodID uint32
	ByID     bool

	Args []byte
	In   []byte
	Out  []byte

	// Session is the client that submitted the task (nil in-process).
	Session *Session
}

// Result is what a method returns besides its error: N bytes written at
// the start of Task.Out, and one scalar Value whose meaning the method
// defines (a size, a version, a count).
type Result struct {
	N     int
	Value uint64
}

// TaskResult is the outcome of a finished task.
type TaskResult struct {
	ID    TaskID
	State TaskState
	Err   error
	Result
}

// Handler runs one method.
type Handler func(ctx context.Context, t *Task) (Result, error)

// Reply copies b to the start of t.Out, or fails with ErrShortBuffer (the
// Result's Value then says how many bytes are needed), for methods that
// answer with a small encoded message.
func (t *Task) Reply(b []byte) (Result, error) {
	if len(b) > len(t.Out) {
		return Result{Value: uint64(len(b))}, fmt.Errorf("reply of %d bytes into %d: %w", len(b), len(t.Out), ErrShortBuffer)
	}
	return Result{N: copy(t.Out, b)}, nil
}
