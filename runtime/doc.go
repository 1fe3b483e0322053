// Package runtime is the daemon's task runtime: the module registry
// (built-in modules and Go plugins), tasks and the worker pool that runs
// them. It knows nothing of files, formats or the buffer pool; the daemon
// (cmd/iowarp) registers the modules that serve them (runtime/modules/cte,
// runtime/modules/fs) and hands it the configuration as Settings.
//
// A Task names a module and a method by id and carries its arguments
// (ArgWriter/ArgReader encode them); Exec runs one on the caller's
// goroutine, SubmitTask/Go queue it for a worker. Errors cross the ipc
// wire as codes (Code, CodeError).
//
// Bounds: Options.Workers workers (default 2×GOMAXPROCS, at least 4);
// Options.Queue queued tasks (default 1024), past which SubmitTask blocks;
// a task from SubmitTask stays in the task table until WaitForTask
// returns it (Go leaves nothing behind). A module's Run must honour its
// context: Shutdown cancels it and waits for the workers.
//
// Locks, in the order they may be taken: Runtime.regMu (Register only;
// readers load the copy-on-write registry without a lock), then
// Runtime.mu (the task table; held for map operations only, never across
// a module call). No lock is held while a module runs, so a module may
// submit tasks to others. Counters are atomics.
package runtime
