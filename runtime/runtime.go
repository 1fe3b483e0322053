package runtime

import (
	"context"
	"fmt"
	"os"
	"plugin"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
)

// Runtime is the task runtime (Chimaera): a registry of modules and a
// bounded pool of workers that runs their methods. The lifecycle is the
// seed's: Initialize(config), SubmitTask(task) → TaskID, WaitForTask(id)
// → TaskResult, Shutdown(). Exec runs a task in the caller's goroutine
// instead (the ipc pollers use it for the request they are holding, which
// saves a goroutine hand-off per request).
//
// Module ids are assigned in registration order and never change while
// the Runtime lives. Register modules before serving clients; the registry
// is read without locks afterwards (it is copy-on-write).
//
// Safe for concurrent use.
type Runtime struct {
	cfg Settings
	log logrus.FieldLogger
	adm *admin // registered by Initialize as module AdminID

	regMu sync.Mutex               // serialises Register
	reg   atomic.Pointer[registry] // copy-on-write

	queue   chan *entry
	wg      sync.WaitGroup // workers
	ctx     context.Context
	cancel  context.CancelFunc
	stopped atomic.Bool

	nextID atomic.Uint64
	// mu guards tasks.
	mu    sync.Mutex
	tasks map[TaskID]*entry

	inflight atomic.Int64
	done     atomic.Uint64
	failed   atomic.Uint64
}

// registry is the module table; index = module id. methods caches each
// module's method count so that checking a request's ids (per ipc request)
// does not call Methods, which may build its list on every call.
type registry struct {
	mods    []Module
	methods []int
}

type entry struct {
	id    TaskID
	task  *Task
	mod   Module
	state atomic.Uint32
	res   TaskResult
	cb    func(TaskResult)
	fin   chan struct{}
}

// Options size a Runtime. Zero values pick defaults.
type Options struct {
	Workers int // default 2×GOMAXPROCS, at least 4
	Queue   int // queued tasks before SubmitTask blocks; default 1024
	Log     logrus.FieldLogger
}

// New makes a Runtime with no modules; Initialize starts it.
func New(opts Options) *Runtime {
	if opts.Workers <= 0 {
		opts.Workers = max(4, 2*gomaxprocs())
	}
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	r := &Runtime{log: opts.Log, adm: newAdmin(), queue: make(chan *entry, opts.Queue), tasks: map[TaskID]*entry{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.reg.Store(&registry{})
	for range opts.Workers {
		r.wg.Add(1)
		go r.worker()
	}
	return r
}

// Settings is what the runtime needs of the daemon's configuration (a
// *config.Config): the plugins to load. The runtime keeps it opaque
// otherwise, hands it to modules (Env.Config) and reports it as JSON
// (the admin module's config method).
type Settings interface {
	Plugins() []string
}

// Initialize registers the built-in admin module and loads the plugins the
// configuration lists (cfg may be nil: no plugins). Other built-in modules
// (cte, fs) are registered by the daemon, which owns what they serve.
func (r *Runtime) Initialize(cfg Settings) error {
	r.cfg = cfg
	if err := r.Register(r.adm); err != nil {
		return err
	}
	if cfg == nil {
		return nil
	}
	for _, p := range cfg.Plugins() {
		if _, err := r.LoadPlugin(p); err != nil {
			return err
		}
	}
	return nil
}

// Config is the configuration given to Initialize (nil if none).
func (r *Runtime) Config() Settings { return r.cfg }

// Register initializes m and adds it to the registry; its id is the number
// of modules registered before it.
func (r *Runtime) Register(m Module) error {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	old := r.reg.Load()
	for _, o := range old.mods {
		if o.Name() == m.Name() {
			return fmt.Errorf("register module %s: %w", m.Name(), ErrExist)
		}
	}
	if m.Name() == "" || len(m.Methods()) == 0 {
		return fmt.Errorf("register module %q: needs a name and at least one method: %w", m.Name(), ErrInvalid)
	}
	env := &Env{Config: r.cfg, Runtime: r, Log: r.log.WithField("module", m.Name())}
	if err := m.Initialize(env); err != nil {
		return fmt.Errorf("initialize module %s: %w", m.Name(), err)
	}
	n := len(m.Methods())
	r.reg.Store(&registry{mods: append(old.mods[:len(old.mods):len(old.mods)], m),
		methods: append(old.methods[:len(old.methods):len(old.methods)], n)})
	r.log.Debugf("module %s registered as id %d (%d methods)", m.Name(), len(old.mods), n)
	return nil
}

// PluginSymbol is the symbol a module plugin exports: a function
// `func NewModule() runtime.Module`.
const PluginSymbol = "NewModule"

// LoadPlugin opens a Go plugin (built with -buildmode=plugin against this
// very module version), calls its NewModule and registers the module.
func (r *Runtime) LoadPlugin(path string) (Module, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("module plugin: %w", err)
	}
	p, err := plugin.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module plugin %s: %w", path, err)
	}
	sym, err := p.Lookup(PluginSymbol)
	if err != nil {
		return nil, fmt.Errorf("module plugin %s: %w", path, err)
	}
	newModule, ok := sym.(func() Module)
	if !ok {
		return nil, fmt.Errorf("module plugin %s: %s is %T, want func() runtime.Module", path, PluginSymbol, sym)
	}
	m := newModule()
	if m == nil {
		return nil, fmt.Errorf("module plugin %s: %s returned nil", path, PluginSymbol)
	}
	if err := r.Register(m); err != nil {
		return nil, fmt.Errorf("module plugin %s: %w", path, err)
	}
	r.log.Infof("loaded module %s from %s", m.Name(), path)
	return m, nil
}

// Modules returns the registered modules; index = module id.
func (r *Runtime) Modules() []Module { return r.reg.Load().mods }

// Module returns the module called name and its id.
func (r *Runtime) Module(name string) (Module, uint32, error) {
	for i, m := range r.Modules() {
		if m.Name() == name {
			return m, uint32(i), nil
		}
	}
	return nil, 0, fmt.Errorf("module %q: %w", name, ErrNoModule)
}

// resolve fills in the ids (or checks them) and returns the module.
func (r *Runtime) resolve(t *Task) (Module, error) {
	if !t.ByID {
		m, id, err := r.Module(t.Module)
		if err != nil {
			return nil, err
		}
		t.ModuleID = id
		for i, name := range m.Methods() {
			if name == t.Method {
				t.MethodID, t.ByID = uint32(i), true
				return m, nil
			}
		}
		return nil, fmt.Errorf("method %s.%s: %w", t.Module, t.Method, ErrNoMethod)
	}
	return r.Lookup(t.ModuleID, t.MethodID)
}

// Lookup returns the module of module id, checking that it has method id
// method; it fails with ErrNoModule or ErrNoMethod.
func (r *Runtime) Lookup(module, method uint32) (Module, error) {
	reg := r.reg.Load()
	if uint64(module) >= uint64(len(reg.mods)) {
		return nil, fmt.Errorf("module id %d: %w", module, ErrNoModule)
	}
	m := reg.mods[module]
	if uint64(method) >= uint64(reg.methods[module]) {
		return nil, fmt.Errorf("method id %d of %s: %w", method, m.Name(), ErrNoMethod)
	}
	return m, nil
}

// Exec runs t in the calling goroutine and returns its result (ID 0).
func (r *Runtime) Exec(ctx context.Context, t *Task) TaskResult {
	if r.stopped.Load() {
		r.failed.Add(1)
		return TaskResult{State: Failed, Err: ErrShutdown}
	}
	m, err := r.resolve(t)
	if err != nil {
		r.failed.Add(1)
		return TaskResult{State: Failed, Err: err}
	}
	return r.run(ctx, m, t)
}

// run executes one method, recovering a panic into ErrInternal.
func (r *Runtime) run(ctx context.Context, m Module, t *Task) (res TaskResult) {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	defer func() {
		if p := recover(); p != nil {
			r.log.Errorf("module %s method %d panicked: %v\n%s", m.Name(), t.MethodID, p, debug.Stack())
			res = TaskResult{State: Failed, Err: fmt.Errorf("%s: panic: %v: %w", m.Name(), p, ErrInternal)}
			r.failed.Add(1)
		}
	}()
	out, err := m.Run(ctx, t)
	if err != nil {
		r.failed.Add(1)
		return TaskResult{State: Failed, Err: err, Result: out}
	}
	r.done.Add(1)
	return TaskResult{State: Completed, Result: out}
}

// SubmitTask queues t for the worker pool and returns its id. It blocks
// while the queue is full. A task that cannot be dispatched (unknown
// module or method, runtime shut down) is recorded as Failed at once.
// Every submitted id must be waited for with WaitForTask, which forgets it.
func (r *Runtime) SubmitTask(t *Task) TaskID {
	e := r.newEntry(t, nil)
	r.mu.Lock()
	r.tasks[e.id] = e
	r.mu.Unlock()
	r.dispatch(e)
	return e.id
}

// Go runs t on the worker pool and calls done with its result (from the
// worker's goroutine). Unlike SubmitTask, nothing is left to wait for.
func (r *Runtime) Go(t *Task, done func(TaskResult)) {
	r.dispatch(r.newEntry(t, done))
}

func (r *Runtime) newEntry(t *Task, cb func(TaskResult)) *entry {
	return &entry{id: TaskID(r.nextID.Add(1)), task: t, cb: cb, fin: make(chan struct{})}
}

func (r *Runtime) dispatch(e *entry) {
	m, err := r.resolve(e.task)
	if err == nil && r.stopped.Load() {
		err = ErrShutdown
	}
	if err != nil {
		r.failed.Add(1)
		r.finish(e, TaskResult{State: Failed, Err: err})
		return
	}
	e.mod = m
	select {
	case r.queue <- e:
	case <-r.ctx.Done():
		r.failed.Add(1)
		r.finish(e, TaskResult{State: Failed, Err: ErrShutdown})
	}
}

func (r *Runtime) finish(e *entry, res TaskResult) {
	res.ID = e.id
	e.res = res
	e.state.Store(uint32(res.State))
	close(e.fin)
	if e.cb != nil {
		e.cb(res)
	}
}

func (r *Runtime) worker() {
	defer r.wg.Done()
	for {
		select {
		case e := <-r.queue:
			e.state.Store(uint32(Running))
			r.finish(e, r.run(r.ctx, e.mod, e.task))
		case <-r.ctx.Done():
			r.drainQueue()
			return
		}
	}
}

// drainQueue fails whatever is still queued at shutdown.
func (r *Runtime) drainQueue() {
	for {
		select {
		case e := <-r.queue:
			r.failed.Add(1)
			r.finish(e, TaskResult{State: Failed, Err: ErrShutdown})
		default:
			return
		}
	}
}

// State returns the state of a submitted task that was not yet waited for.
func (r *Runtime) State(id TaskID) (TaskState, error) {
	r.mu.Lock()
	e := r.tasks[id]
	r.mu.Unlock()
	if e == nil {
		return Failed, fmt.Errorf("task %d: %w", id, ErrUnknownTask)
	}
	return TaskState(e.state.Load()), nil
}

// WaitForTask blocks until task id finished and returns its result; the
// id is forgotten. An unknown id fails with ErrUnknownTask.
func (r *Runtime) WaitForTask(id TaskID) TaskResult {
	r.mu.Lock()
	e := r.tasks[id]
	r.mu.Unlock()
	if e == nil {
		return TaskResult{ID: id, State: Failed, Err: fmt.Errorf("task %d: %w", id, ErrUnknownTask)}
	}
	<-e.fin
	r.mu.Lock()
	delete(r.tasks, id)
	r.mu.Unlock()
	return e.res
}

// Stats counts tasks.
type TaskStats struct {
	Modules   int    `json:"modules"`
	InFlight  int64  `json:"in_flight"`
	Completed uint64 `json:"completed"`
	Failed    uint64 `json:"failed"`
}

// Stats returns task counters.
func (r *Runtime) Stats() TaskStats {
	return TaskStats{Modules: len(r.Modules()), InFlight: r.inflight.Load(),
		Completed: r.done.Load(), Failed: r.failed.Load()}
}

// Shutdown stops the workers (queued tasks fail with ErrShutdown, running
// ones finish) and shuts the modules down in reverse order.
func (r *Runtime) Shutdown() error {
	if r.stopped.Swap(true) {
		return nil
	}
	r.cancel()
	r.wg.Wait()
	r.drainQueue()
	mods := r.Modules()
	var first error
	for i := len(mods) - 1; i >= 0; i-- {
		if err := mods[i].Shutdown(); err != nil && first == nil {
			first = fmt.Errorf("shutdown module %s: %w", mods[i].Name(), err)
		}
	}
	return first
}
