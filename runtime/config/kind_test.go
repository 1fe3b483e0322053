package config

import (
	"strings"
	"testing"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// pmemKind is a tier kind registered by the test: a directory kind that
// is memory (a DAX mount, say), opened like nothing the config knows.
type pmemKind struct{}

func (pmemKind) Name() string { return "pmem-test" }
func (pmemKind) Traits() tier.Traits {
	return tier.Traits{Dir: tier.DirRequired, Memory: true}
}
func (pmemKind) Open(string, string) (tier.Backend, error) { return nil, tier.ErrInvalid }

// TestRegisteredKindAccepted: the config knows the kinds the registry
// knows: refused before the kind is registered, accepted after with the
// rules its traits give (a directory required; memory: a percentage is
// allowed), refused again once it is gone.
func TestRegisteredKindAccepted(t *testing.T) {
	const doc = "tiers:\n  - {name: p, kind: pmem-test, dir: /pmem, capacity: 10%}\n"
	if _, err := Parse("c.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), `"pmem-test" is not one of ram, file`) {
		t.Fatalf("unregistered kind: %v", err)
	}
	if err := tier.Register(pmemKind{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Unregister("pmem-test") })
	if err := tier.Register(pmemKind{}); err == nil {
		t.Fatal("registered twice")
	}
	c, err := Parse("c.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("registered kind refused: %v", err)
	}
	if c.Tiers[0].Kind != "pmem-test" || c.Tiers[0].Capacity <= 0 {
		t.Fatalf("tier %+v", c.Tiers[0])
	}
	if got := c.PoolConfig().Tiers[0].Kind; got != "pmem-test" {
		t.Fatalf("pool config kind %q", got)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"no dir", "tiers:\n  - {name: p, kind: pmem-test, capacity: 1G}\n", "tiers[0].dir: a pmem-test tier needs a directory"},
		{"no kind", "tiers:\n  - {name: p, capacity: 1G}\n", "every tier needs a kind (pmem-test or ram or file)"},
	} {
		if _, err := Parse("c.yaml", []byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	tier.Unregister("pmem-test")
	if _, err := Parse("c.yaml", []byte(doc)); err == nil {
		t.Fatal("accepted after Unregister")
	}
}
