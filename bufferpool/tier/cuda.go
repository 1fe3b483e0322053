//go:build cuda

package tier

import (
	"errors"
	"fmt"
)

// The cuda kind: GPU memory (device HBM or pinned host memory) exported
// through CUDA IPC handles so that several processes map it.
//
// PLACEHOLDER: it registers the kind so that a config can name it under
// -tags cuda, and fixes where the implementation goes (cuMemAlloc +
// cuIpcGetMemHandle / cuIpcOpenMemHandle, behind cgo in this file). Until
// then Open always fails with ErrNotSupported.

func init() { mustRegister(cudaKind{}) }

// KindCUDA is the cuda kind's name.
const KindCUDA = "cuda"

// ErrNotSupported reports a kind that is registered but not built yet.
var ErrNotSupported = errors.New("tier: not supported")

type cudaKind struct{}

func (cudaKind) Name() string   { return KindCUDA }
func (cudaKind) Traits() Traits { return Traits{Dir: DirNone, Memory: true} }

func (cudaKind) Open(name, _ string) (Backend, error) {
	return nil, fmt.Errorf("tier %s: cuda tier: %w", name, ErrNotSupported)
}
