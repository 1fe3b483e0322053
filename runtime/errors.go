package runtime

import (
	"errors"
	"fmt"
)

// Sentinel errors of tasks, matched with errors.Is. Each has a stable wire
// code (Code, CodeError) so that a client process gets the same sentinel
// back; modules wrap their own errors in the nearest one
// (fmt.Errorf("%w: %w", runtime.ErrNoEntry, err)).
var (
	// ErrNoModule: no module with this name or id.
	ErrNoModule = errors.New("runtime: no such module")
	// ErrNoMethod: the module has no method with this name or id.
	ErrNoMethod = errors.New("runtime: no such method")
	// ErrBadArgs: the task's arguments do not decode.
	ErrBadArgs = errors.New("runtime: bad task arguments")
	// ErrShortBuffer: the output buffer is too small; the result's Value
	// is the size needed.
	ErrShortBuffer = errors.New("runtime: output buffer too small")
	// ErrShutdown: the runtime is shutting down or stopped.
	ErrShutdown = errors.New("runtime: shut down")
	// ErrNoEntry: the object a task names does not exist.
	ErrNoEntry = errors.New("runtime: not found")
	// ErrExist: the object a task creates exists already.
	ErrExist = errors.New("runtime: already exists")
	// ErrInvalid: an argument is out of range or inconsistent.
	ErrInvalid = errors.New("runtime: invalid argument")
	// ErrNoSpace: no room (buffer pool full, too many handles).
	ErrNoSpace = errors.New("runtime: no space")
	// ErrTooBusy: too many tasks in flight.
	ErrTooBusy = errors.New("runtime: busy")
	// ErrInternal: a method panicked or failed in an unclassified way.
	ErrInternal = errors.New("runtime: internal error")
	// ErrUnknownTask: WaitForTask of an id that is not (or no longer) known.
	ErrUnknownTask = errors.New("runtime: unknown task id")
	// ErrPermission: the caller's credentials (the ipc connection's
	// SO_PEERCRED) do not allow the task on the object it names.
	ErrPermission = errors.New("runtime: permission denied")
	// ErrCorrupt: the data failed its checksum (EIO); nothing of it was
	// returned.
	ErrCorrupt = errors.New("runtime: data failed its checksum")
)

// codes is the wire table: index = code. Code 0 is success.
var codes = []error{nil, ErrNoModule, ErrNoMethod, ErrBadArgs, ErrShortBuffer, ErrShutdown,
	ErrNoEntry, ErrExist, ErrInvalid, ErrNoSpace, ErrTooBusy, ErrInternal, ErrUnknownTask, ErrPermission,
	ErrCorrupt}

// Code returns the wire code of err: 0 for nil, the code of the first
// sentinel err wraps, or the code of ErrInternal.
func Code(err error) uint32 {
	if err == nil {
		return 0
	}
	for i, s := range codes[1:] {
		if errors.Is(err, s) {
			return uint32(i + 1)
		}
	}
	return Code(ErrInternal)
}

// CodeError returns the sentinel of a wire code (nil for 0); an unknown
// code is ErrInternal.
func CodeError(code uint32) error {
	if int(code) < len(codes) {
		return codes[code]
	}
	return fmt.Errorf("error code %d: %w", code, ErrInternal)
}
