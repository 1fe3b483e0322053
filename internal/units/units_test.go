package units

import "testing"

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{"4096", 4096, ""},
		{"1MiB", 1 << 20, ""},
		{"1M", 1 << 20, ""},
		{"1mb", 1e6, ""},
		{"64 MiB", 64 << 20, ""},
		{"1.5GiB", 1536 << 20, ""},
		{"8GiB", 8 << 30, ""},
		{"2T", 2 << 40, ""},
		{"10B", 10, ""},
		{"0", 0, ""},
		{"12XB", 0, `"12XB" is not a size`},
		{"", 0, `"" is not a size`},
		{"MiB", 0, `"MiB" is not a size`},
		{"1..2M", 0, `"1..2M" is not a size`},
		{"-1M", 0, `"-1M" is not a size`},
		{"99999999PiB", 0, `"99999999PiB" is too large`},
	}
	for _, tc := range cases {
		got, err := ParseSize(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseSize(%q) = %d, %v; want error %s", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 512: "512B", 1024: "1KiB", 1536 << 20: "1.5GiB", 8 << 30: "8GiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %s, want %s", n, got, want)
		}
	}
}
