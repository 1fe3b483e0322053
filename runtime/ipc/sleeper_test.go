package ipc

import (
	"context"
	"time"

	"github.com/iowarp/iowarp/runtime"
)

// sleeper is a test module whose one method sleeps for a second (or until
// the runtime shuts down).
type sleeper struct{}

func (sleeper) Name() string                  { return "sleeper" }
func (sleeper) Methods() []string             { return []string{"sleep"} }
func (sleeper) Initialize(*runtime.Env) error { return nil }
func (sleeper) Shutdown() error               { return nil }
func (sleeper) Run(ctx context.Context, _ *runtime.Task) (runtime.Result, error) {
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	return runtime.Result{}, nil
}
