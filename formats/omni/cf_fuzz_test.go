package omni

import (
	"math"
	"testing"
)

var calendars = []string{"standard", "noleap", "all_leap", "360_day"}

func validDate(d Date) bool {
	return d.Month >= 1 && d.Month <= 12 && d.Day >= 1 && d.Day <= 31 && d.Sec >= 0 && d.Sec < 86400
}

// FuzzParseTimeUnits: CF time units come from the attributes of any file
// under the mount. No panic; an error returns the zero TimeUnits; parsed
// units have a positive unit, a known calendar and a valid epoch, at
// which their value is 0.
func FuzzParseTimeUnits(f *testing.F) {
	for _, s := range [][2]string{
		{"days since 1970-01-01", ""}, {"hours since 1900-01-01 00:00:00", "gregorian"},
		{"seconds since 2000-01-01T12:00:00Z", "noleap"}, {"minutes since 2024-02-29 06:30 UTC", "360_day"},
		{"ms since 1-01-01", "all_leap"}, {"months since 2000-01-01", ""}, {"days since", ""},
		{"days since 2000-13-01", ""}, {"d since 2000", "julian"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, units, cal string) {
		u, err := ParseTimeUnits(units, cal)
		if err != nil {
			if u != (TimeUnits{}) {
				t.Fatalf("error %v with partial units %+v", err, u)
			}
			return
		}
		if !(u.Unit > 0) || !validDate(u.Epoch) {
			t.Fatalf("%q: units %+v", units, u)
		}
		known := false
		for _, c := range calendars {
			known = known || c == u.Calendar
		}
		if !known {
			t.Fatalf("%q: calendar %q", cal, u.Calendar)
		}
		if v := u.Value(u.Epoch); v != 0 {
			t.Fatalf("%q: the epoch is at %v", units, v)
		}
	})
}

// FuzzParseDate: dates come from OMNI paths (coordinate filters). No
// panic; an error returns the zero Date and no resolution; a parsed date
// is valid, and the end of its period follows it in every calendar.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"2024-01-01", "2024-01-01T12:00:00", "2024-06", "2024", "2024-02-29 23:59:59.5",
		"0000-12-31T23", "9999-12-31 23:59", "2024-1-2", "2024-13", "-1", " 2024 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, res, err := ParseDate(s)
		if err != nil {
			if d != (Date{}) || res != "" {
				t.Fatalf("error %v with a partial date %+v %q", err, d, res)
			}
			return
		}
		if !validDate(d) {
			t.Fatalf("%q: date %+v", s, d)
		}
		for _, cal := range calendars {
			if cal != "standard" && d.Day > monthLen(cal, d.Year, d.Month) {
				continue // a day this calendar has not (Feb 30 in noleap)
			}
			u := TimeUnits{Unit: 1, Epoch: d, Calendar: cal}
			end := endOf(cal, d, res)
			if !validDate(end) {
				t.Fatalf("%q in %s: end of period %+v", s, cal, end)
			}
			if v := u.Value(end); !(v > 0) || math.IsInf(v, 0) {
				t.Fatalf("%q in %s: period %s ends %v s after it starts", s, cal, res, v)
			}
		}
	})
}
