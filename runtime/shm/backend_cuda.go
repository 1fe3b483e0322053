//go:build cuda

package shm

import "fmt"

// CUDA is the GPU-memory backend: a region of device (HBM) or pinned host
// memory exported through CUDA IPC handles so that several processes map it.
//
// PLACEHOLDER: this type only fixes the API shape so that code can be written
// against it under -tags cuda. The real implementation (cuMemAlloc +
// cuIpcGetMemHandle / cuIpcOpenMemHandle, behind cgo in bufferpool/tier) is
// the job of a later issue. Until then NewCUDA always fails with
// ErrNotSupported.
type CUDA struct {
	name string
}

var _ Backend = (*CUDA)(nil)

// NewCUDA would allocate size bytes on GPU device. Not implemented yet.
func NewCUDA(name string, device int, size int64) (*CUDA, error) {
	return nil, fmt.Errorf("cuda backend %s (device %d, %d bytes): %w", name, device, size, ErrNotSupported)
}

func (c *CUDA) Kind() string   { return "cuda" }
func (c *CUDA) Name() string   { return c.name }
func (c *CUDA) Bytes() []byte  { return nil }
func (c *CUDA) Close() error   { return nil }
func (c *CUDA) Destroy() error { return nil }
