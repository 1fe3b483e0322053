package tier

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A tier kind is registered once, by the file that implements it
// (ram_linux.go, file_linux.go, cuda.go behind -tags cuda): adding a kind
// is one file and one Register call in its init. Everything that used to
// switch on the kind's name (the pool, config validation, the CLI's memory
// pressure and user mounts) asks the registry for the kind's Traits.

// Kind is one kind of tier device.
type Kind interface {
	// Name is the kind as the config writes it ("ram", "file").
	Name() string
	// Traits says what a tier of this kind needs and is.
	Traits() Traits
	// Open opens a device of this kind called name, on dir where
	// Traits.Dir is DirRequired ("" otherwise).
	Open(name, dir string) (Backend, error)
}

// DirRule says whether a tier of a kind is given a directory.
type DirRule int

const (
	DirNone     DirRule = iota // a directory is an error
	DirRequired                // it must have one (absolute)
)

// Traits are the facts about a kind the rest of the daemon acts on.
type Traits struct {
	// Dir: whether a tier of this kind lives in a directory.
	Dir DirRule
	// Memory: its bytes are memory the kernel cannot page out. Memory
	// tiers count against the host's RAM share in config validation, may
	// be sized as a percentage of memory, are shed under memory pressure,
	// and their segments can be mapped by clients (shims).
	Memory bool
	// Persistent: its bytes outlive the daemon (until the next one
	// removes them), so dirty pages on it are journaled for replay.
	Persistent bool
}

// Backend is an open device of one kind: it makes segments. A Backend
// whose bytes outlive the daemon also implements Journaled.
type Backend interface {
	NewSegment(label string) (*Segment, error)
	Close() error
}

// Journaled is the capability of a persistent backend: a journal of this
// daemon's instance, and the instances of dead daemons it found.
type Journaled interface {
	OpenJournal() (*Journal, error)
	Stale() []*Stale
}

// ErrUnknownKind reports a kind nobody registered.
var ErrUnknownKind = errors.New("tier: unknown kind")

var (
	kindsMu sync.RWMutex
	kinds   = map[string]Kind{}
)

// Register makes k available to Open and to config validation. It is
// meant for init functions; registering a name twice is an error.
func Register(k Kind) error {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if k.Name() == "" {
		return fmt.Errorf("register tier kind: empty name: %w", ErrInvalid)
	}
	if _, dup := kinds[k.Name()]; dup {
		return fmt.Errorf("register tier kind %q: already registered: %w", k.Name(), ErrInvalid)
	}
	kinds[k.Name()] = k
	return nil
}

// mustRegister registers a built-in kind.
func mustRegister(k Kind) {
	if err := Register(k); err != nil {
		panic(err)
	}
}

// Lookup returns the registered kind called name.
func Lookup(name string) (Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Unregister removes the kind called name (tests that register one).
func Unregister(name string) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	delete(kinds, name)
}

// Kinds returns the registered kind names: memory kinds first (the
// fastest, as tiers are listed), then by name.
func Kinds() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if ma, mb := kinds[a].Traits().Memory, kinds[b].Traits().Memory; ma != mb {
			if ma {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

// TraitsOf returns the traits of the kind called name (false: unknown).
func TraitsOf(name string) (Traits, bool) {
	k, ok := Lookup(name)
	if !ok {
		return Traits{}, false
	}
	return k.Traits(), true
}
