package tier

// The ram kind: one memfd per segment, mapped by this process (and by
// shims through the pool's page tables).

func init() { mustRegister(ramKind{}) }

type ramKind struct{}

func (ramKind) Name() string   { return KindRAM }
func (ramKind) Traits() Traits { return Traits{Dir: DirNone, Memory: true} }

func (ramKind) Open(name, _ string) (Backend, error) { return ramBackend{name: name}, nil }

type ramBackend struct{ name string }

func (r ramBackend) NewSegment(label string) (*Segment, error) {
	return newMemfdSegment(r.name + ":" + label)
}

func (ramBackend) Close() error { return nil }
