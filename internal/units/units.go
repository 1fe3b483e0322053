// Package units parses and prints human sizes: K, M, G, T, P with or
// without "iB" are powers of 1024; KB, MB, GB, TB, PB are powers of 1000.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps a size suffix (lower case) to its multiplier. Binary
// suffixes (K, KiB, M, MiB ...) are powers of 1024, as fio, dd and the
// kernel use them; KB, MB, GB ... are powers of 1000, as disks are sold.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pi": 1 << 50, "pib": 1 << 50, "pb": 1e15,
}

// ParseSize parses a human size: "4096", "64MiB", "1.5G", "8 GiB", "10GB".
// The result is rounded down to a whole byte and must fit in an int64.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	b := math.Floor(v * mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}

// FormatSize renders n bytes with a binary suffix, e.g. "1.5GiB", "512B".
func FormatSize(n int64) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%dB", n)
	}
	v, i := float64(n), -1
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + string(units[i]) + "iB"
}
