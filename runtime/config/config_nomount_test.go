package config

import "testing"

// mount: "" (or an empty value) is a daemon without a mount: valid, and
// the backing directory is not needed.
func TestParseNoMount(t *testing.T) {
	for _, doc := range []string{"mount: \"\"\n", "mount:\n", "mount: \"\"\nbacking: \"\"\nmode: writeback\n"} {
		c, err := Parse("c.yaml", []byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if !c.NoMount() {
			t.Fatalf("%q: NoMount false (mount %q)", doc, c.Mount)
		}
	}
	if c := Default(); c.NoMount() {
		t.Fatal("default config has no mount")
	}
	if _, err := Parse("c.yaml", []byte("mount: rel\n")); err == nil {
		t.Fatal("relative mount accepted")
	}
}
