package omni

import (
	"testing"
	"unicode/utf8"
)

// TestEscapeName: every name becomes a path component that is neither a
// view-syntax character nor a synthetic entry, and comes back.
func TestEscapeName(t *testing.T) {
	cases := map[string]string{
		"temperature": "temperature", "": "%", ".": "%2E", "..": "%2E%2E", "/": "%2F", "a/b": "a%2Fb",
		"a[b]": "a%5Bb%5D", "x@y=z": "x%40y%3Dz", "a,b": "a%2Cb", "50%": "50%25", "\xff\xfe": "%FF%FE",
		"attrs": "%61ttrs", "schema.json": "%73chema.json", "attrs2": "attrs2", "ĺat": "ĺat", "nul\x00": "nul%00",
		"...": "...",
	}
	for in, want := range cases {
		got := EscapeName(in)
		if got != want {
			t.Errorf("EscapeName(%q) = %q, want %q", in, got, want)
		}
		if back, err := UnescapeName(got); err != nil || back != in {
			t.Errorf("UnescapeName(%q) = %q, %v, want %q", got, back, err, in)
		}
		if !utf8.ValidString(got) || !validName(got) {
			t.Errorf("%q is no valid path component", got)
		}
		if _, err := ParseView(got); err != nil {
			t.Errorf("ParseView(%q): %v", got, err)
		}
	}
	for _, bad := range []string{"%", "%4", "%41", "%zz", "a%2fb", "attrs%"} {
		if bad == "%" {
			continue
		}
		if got, err := UnescapeName(bad); err == nil {
			t.Errorf("UnescapeName(%q) = %q, want an error", bad, got)
		}
	}
}

// FuzzEscapeName: EscapeName is injective and UnescapeName inverts it.
func FuzzEscapeName(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", "\xff", "attrs", "%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := EscapeName(s)
		back, err := UnescapeName(e)
		if err != nil || back != s {
			t.Fatalf("%q → %q → %q, %v", s, e, back, err)
		}
		if !utf8.ValidString(e) || len(e) <= maxNameBytes && !validName(e) || reservedNames[e] {
			t.Fatalf("%q → %q: not a safe component", s, e)
		}
		if u, err := UnescapeName(s); err == nil && EscapeName(u) != s {
			t.Fatalf("UnescapeName(%q) = %q, which escapes to %q", s, u, EscapeName(u))
		}
	})
}
