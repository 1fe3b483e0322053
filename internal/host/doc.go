// Package host reads what the daemon needs to know about the machine it
// runs on: the memory it may use (MemTotal, or its cgroup's memory.max if
// lower; HostMemory), its OOM score (SetOOMScoreAdj), and memory pressure
// (PressureWatcher: PSI and the cgroup's memory.events). It knows nothing
// of the buffer pool; the daemon wires the watcher to bufferpool.Pool.Shed.
package host
