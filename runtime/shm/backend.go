package shm

// Backend is one shared-memory region mapped MAP_SHARED into this process.
// Other processes that map the same object see the same bytes at (usually)
// a different address, which is why nothing in a segment is a Go pointer.
//
// A Backend is safe for concurrent use; Close and Destroy must not race with
// users of Bytes.
type Backend interface {
	// Kind names the implementation: "posix", "memfd", "file".
	Kind() string
	// Name is the object's name (shm name, memfd name or file path).
	Name() string
	// Bytes is the whole mapping. It becomes invalid after Close.
	Bytes() []byte
	// Close unmaps the region and closes the descriptor; the object itself
	// (shm name, file) stays for other processes.
	Close() error
	// Destroy closes and removes the object (unlink of the shm name or the
	// file). Processes that still map it keep their mapping.
	Destroy() error
}
