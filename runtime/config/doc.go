// Package config is the per-node daemon's configuration.
//
// A Config is read from YAML on top of an embedded default (default.yaml,
// which documents every key): keys a file leaves out keep their default; a
// list (tiers) is replaced as a whole. Reading is strict: an unknown key, a
// repeated key, a value of the wrong shape or out of range is refused with
// an *Error that names the file, the line, the key path and the reason,
// e.g.
//
//	config.yaml:12: tiers[1].capacity: "12XB" is not a size
//
// Sizes are human sizes (units.ParseSize): K, M, G, T with or without "iB"
// are powers of 1024; KB, MB, GB, TB are powers of 1000.
//
// Config converts to the buffer pool's Config (PoolConfig) and to the file
// layer's Options (FilesOptions); this package may import them, the task
// runtime (package runtime) may not, and sees a Config only as
// runtime.Settings. A Config is a plain value, not safe for concurrent
// mutation.
package config
