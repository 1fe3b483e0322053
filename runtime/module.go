package runtime

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
)

// Module is a unit of functionality the runtime hosts (Chimaera's
// "ChiMod"): the buffer pool (cte), the file layer (fs), administration
// (admin), or a Go plugin. A module declares its methods once; a method's
// id is its index in Methods, and a module's id is its index in the
// Registry. Both are what clients put in their requests.
//
// Run is called from many goroutines at once (the worker pool and the ipc
// pollers): a module must be safe for concurrent use. A panic in Run is
// recovered by the runtime and fails the task with ErrInternal.
type Module interface {
	// Name is the module's unique name ("cte", "fs", "admin", ...).
	Name() string
	// Methods names the methods; method id i is Methods()[i]. The list
	// must not change after Initialize.
	Methods() []string
	// Initialize prepares the module; it is called once, before any Run.
	Initialize(env *Env) error
	// Run executes t.MethodID (already checked to be in range).
	Run(ctx context.Context, t *Task) (Result, error)
	// Shutdown releases what Initialize took; no Run follows.
	Shutdown() error
}

// Env is what a module receives at Initialize.
type Env struct {
	// Config is the daemon's configuration, a *config.Config (nil in
	// tests that run a bare Runtime). Modules must not modify it.
	Config Settings
	// Runtime hosts the module; a module may submit tasks to others.
	Runtime *Runtime
	// Log is a logger tagged with the module's name.
	Log logrus.FieldLogger
}

// MethodTable is a helper for modules: a list of named handlers whose
// indices are the method ids.
type MethodTable []struct {
	Name    string
	Handler Handler
}

// Names returns the method names in id order.
func (m MethodTable) Names() []string {
	out := make([]string, len(m))
	for i, e := range m {
		out[i] = e.Name
	}
	return out
}

// Run dispatches t to the handler of t.MethodID.
func (m MethodTable) Run(ctx context.Context, t *Task) (Result, error) {
	if int(t.MethodID) >= len(m) {
		return Result{}, fmt.Errorf("method %d: %w", t.MethodID, ErrNoMethod)
	}
	return m[t.MethodID].Handler(ctx, t)
}
