// Command example is an example runtime module shipped as a Go plugin:
//
//	go build -buildmode=plugin -o example.so ./runtime/modules/example
//
// and listed in the daemon's config:
//
//	modules:
//	  - /path/to/example.so
//
// The daemon opens it at start (plugin.Open), calls NewModule and registers
// the module as "example". A plugin must be built by the same Go toolchain,
// with the same flags (-race, -trimpath) and the same iowarp source as the
// daemon, or plugin.Open refuses it.
//
// Methods:
//
//	greet    (name string)   Out: "hello, NAME from pid P"
//	sum      (n u32, n × u64) Value: the sum
//	reverse  In              Out: In reversed
package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/iowarp/iowarp/runtime"
)

type module struct {
	runtime.MethodTable
	calls atomic.Uint64
}

// NewModule is the symbol the runtime looks up (runtime.PluginSymbol).
func NewModule() runtime.Module {
	m := &module{}
	m.MethodTable = runtime.MethodTable{{"greet", m.greet}, {"sum", m.sum}, {"reverse", m.reverse}}
	return m
}

func (m *module) Name() string                  { return "example" }
func (m *module) Methods() []string             { return m.Names() }
func (m *module) Initialize(*runtime.Env) error { return nil }
func (m *module) Shutdown() error               { return nil }

func (m *module) greet(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	name := r.String(256)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	res, err := t.Reply([]byte(fmt.Sprintf("hello, %s from pid %d", name, os.Getpid())))
	res.Value = m.calls.Add(1)
	return res, err
}

func (m *module) sum(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	n := r.U32()
	if n > 1<<12 {
		return runtime.Result{}, fmt.Errorf("%d numbers: %w", n, runtime.ErrInvalid)
	}
	var s uint64
	for i := uint32(0); i < n; i++ {
		s += r.U64()
	}
	return runtime.Result{Value: s}, r.Done()
}

func (m *module) reverse(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	if len(t.Out) < len(t.In) {
		return runtime.Result{Value: uint64(len(t.In))}, runtime.ErrShortBuffer
	}
	for i, b := range t.In {
		t.Out[len(t.In)-1-i] = b
	}
	return runtime.Result{N: len(t.In)}, nil
}

func main() {}
