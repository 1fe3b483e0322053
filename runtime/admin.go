package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// The admin module is built in and is always module id 0: clients resolve
// every other module through its "modules" method.
//
//	noop     ()                      nothing; the empty task of benchmarks
//	echo     In                      copies In to Out, N = bytes copied
//	modules  ()                      Out: u32 count, then per module its name,
//	                                 u32 method count and the method names
//	status   ()                      Out: JSON object (pid, uptime, tasks and
//	                                 what status providers add)
//	stop     ()                      asks the daemon to drain and exit
//	config   ()                      Out: JSON of the configuration
const AdminModule = "admin"

// AdminID is the module id of admin.
const AdminID = 0

type admin struct {
	MethodTable
	rt      *Runtime
	started time.Time

	mu     sync.Mutex
	status map[string]func() any
	stop   func()
}

func newAdmin() *admin {
	a := &admin{started: time.Now(), status: map[string]func() any{}}
	a.MethodTable = MethodTable{
		{"noop", func(context.Context, *Task) (Result, error) { return Result{}, nil }},
		{"echo", func(_ context.Context, t *Task) (Result, error) { return t.Reply(t.In) }},
		{"modules", a.modules},
		{"status", a.statusMethod},
		{"stop", a.stopMethod},
		{"config", a.config},
	}
	return a
}

func (a *admin) Name() string              { return AdminModule }
func (a *admin) Methods() []string         { return a.Names() }
func (a *admin) Shutdown() error           { return nil }
func (a *admin) Initialize(env *Env) error { a.rt = env.Runtime; return nil }

// AddStatus adds a section to admin.status: f is called for each status
// request and its value marshalled as JSON under name. It may be called
// before Initialize.
func (r *Runtime) AddStatus(name string, f func() any) {
	a := r.adm
	a.mu.Lock()
	a.status[name] = f
	a.mu.Unlock()
}

// SetStopHook sets what admin.stop does (the daemon: begin its orderly
// shutdown). Without one, admin.stop fails with ErrInvalid.
func (r *Runtime) SetStopHook(f func()) {
	a := r.adm
	a.mu.Lock()
	a.stop = f
	a.mu.Unlock()
}

// EncodeModules is the reply of admin.modules.
func EncodeModules(mods []Module) []byte {
	w := NewArgWriter(nil)
	w.U32(uint32(len(mods)))
	for _, m := range mods {
		w.String(m.Name())
		w.U32(uint32(len(m.Methods())))
		for _, name := range m.Methods() {
			w.String(name)
		}
	}
	return w.Bytes()
}

// ModuleInfo is one entry of admin.modules.
type ModuleInfo struct {
	Name    string
	Methods []string
}

// DecodeModules parses the reply of admin.modules.
func DecodeModules(b []byte) ([]ModuleInfo, error) {
	r := NewArgReader(b)
	n := r.U32()
	if n > 1<<16 {
		return nil, fmt.Errorf("%d modules: %w", n, ErrBadArgs)
	}
	out := make([]ModuleInfo, 0, n)
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		mi := ModuleInfo{Name: r.String(256)}
		k := r.U32()
		if k > 1<<16 {
			return nil, fmt.Errorf("%d methods: %w", k, ErrBadArgs)
		}
		for j := uint32(0); j < k && r.Err() == nil; j++ {
			mi.Methods = append(mi.Methods, r.String(256))
		}
		out = append(out, mi)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return out, nil
}

func (a *admin) modules(_ context.Context, t *Task) (Result, error) {
	return t.Reply(EncodeModules(a.rt.Modules()))
}

// Status is the fixed part of admin.status.
type Status struct {
	Pid     int            `json:"pid"`
	Started time.Time      `json:"started"`
	Uptime  string         `json:"uptime"`
	Modules []string       `json:"modules"`
	Tasks   TaskStats      `json:"tasks"`
	Extra   map[string]any `json:"extra,omitempty"`
}

func (a *admin) statusMethod(_ context.Context, t *Task) (Result, error) {
	st := Status{Pid: os.Getpid(), Started: a.started, Uptime: time.Since(a.started).Round(time.Millisecond).String(),
		Tasks: a.rt.Stats(), Extra: map[string]any{}}
	for _, m := range a.rt.Modules() {
		st.Modules = append(st.Modules, m.Name())
	}
	a.mu.Lock()
	fs := make(map[string]func() any, len(a.status))
	for k, f := range a.status {
		fs[k] = f
	}
	a.mu.Unlock()
	for k, f := range fs {
		st.Extra[k] = f()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return Result{}, fmt.Errorf("status: %w: %w", ErrInternal, err)
	}
	return t.Reply(b)
}

func (a *admin) stopMethod(context.Context, *Task) (Result, error) {
	a.mu.Lock()
	stop := a.stop
	a.mu.Unlock()
	if stop == nil {
		return Result{}, fmt.Errorf("stop: this runtime has no stop hook: %w", ErrInvalid)
	}
	go stop()
	return Result{}, nil
}

func (a *admin) config(_ context.Context, t *Task) (Result, error) {
	b, err := json.Marshal(a.rt.Config())
	if err != nil {
		return Result{}, fmt.Errorf("config: %w: %w", ErrInternal, err)
	}
	return t.Reply(b)
}
