package omni

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// CF conventions (https://cfconventions.org): the attributes iowarp reads.
const (
	AttrUnits        = "units"
	AttrStandardName = "standard_name"
	AttrCalendar     = "calendar"
	AttrAxis         = "axis"
	AttrLongName     = "long_name"
	AttrNXClass      = "NX_class" // NeXus group class
)

// Units, StandardName, Calendar and Axis read the CF attributes of v.
func (v *Variable) Units() string        { return AttrString(v.Attrs, AttrUnits) }
func (v *Variable) StandardName() string { return AttrString(v.Attrs, AttrStandardName) }
func (v *Variable) Calendar() string     { return AttrString(v.Attrs, AttrCalendar) }
func (v *Variable) Axis() string         { return AttrString(v.Attrs, AttrAxis) }

// IsTime reports a CF time coordinate ("<unit> since <date>" units).
func (v *Variable) IsTime() bool {
	_, err := ParseTimeUnits(v.Units(), v.Calendar())
	return err == nil
}

// TimeUnits is a parsed CF time unit: values are multiples of Unit seconds
// since Epoch, counted in Calendar.
type TimeUnits struct {
	Unit     float64 // seconds per unit
	Epoch    Date
	Calendar string // standard, noleap, all_leap or 360_day
}

// Date is a calendar-free date and time of day.
type Date struct {
	Year, Month, Day int
	Sec              float64 // seconds into the day
}

var unitSeconds = map[string]float64{
	"microseconds": 1e-6, "microsecond": 1e-6, "us": 1e-6,
	"milliseconds": 1e-3, "millisecond": 1e-3, "ms": 1e-3,
	"seconds": 1, "second": 1, "secs": 1, "sec": 1, "s": 1,
	"minutes": 60, "minute": 60, "mins": 60, "min": 60,
	"hours": 3600, "hour": 3600, "hrs": 3600, "hr": 3600, "h": 3600,
	"days": 86400, "day": 86400, "d": 86400,
}

// ParseTimeUnits parses CF units such as "days since 1970-01-01" or
// "hours since 1900-01-01 00:00:00" for calendar (""= standard).
// Months and years are not supported (their length varies). The standard
// calendar is treated as proleptic Gregorian: dates before 1582-10-15
// differ from CF's mixed Julian/Gregorian calendar.
func ParseTimeUnits(units, calendar string) (TimeUnits, error) {
	unit, since, ok := strings.Cut(strings.TrimSpace(units), " since ")
	if !ok {
		return TimeUnits{}, fmt.Errorf("units %q are not '<unit> since <date>': %w", units, ErrInvalid)
	}
	secs, ok := unitSeconds[strings.ToLower(strings.TrimSpace(unit))]
	if !ok {
		return TimeUnits{}, fmt.Errorf("time unit %q: %w", unit, ErrNotSupported)
	}
	cal, err := normCalendar(calendar)
	if err != nil {
		return TimeUnits{}, err
	}
	since = strings.TrimSpace(since)
	since = strings.TrimSuffix(strings.TrimSuffix(since, " UTC"), "Z")
	epoch, _, err := ParseDate(since)
	if err != nil {
		return TimeUnits{}, fmt.Errorf("time units %q: %w", units, err)
	}
	return TimeUnits{Unit: secs, Epoch: epoch, Calendar: cal}, nil
}

func normCalendar(c string) (string, error) {
	switch strings.ToLower(c) {
	case "", "standard", "gregorian", "proleptic_gregorian":
		return "standard", nil
	case "noleap", "365_day":
		return "noleap", nil
	case "all_leap", "366_day":
		return "all_leap", nil
	case "360_day":
		return "360_day", nil
	}
	return "", fmt.Errorf("calendar %q: %w", c, ErrNotSupported)
}

var dateLayouts = []struct {
	layout string
	res    string // resolution: the period a bare date stands for
}{
	{"2006-01-02T15:04:05.999999999", "s"}, {"2006-01-02 15:04:05.999999999", "s"},
	{"2006-01-02T15:04:05", "s"}, {"2006-01-02 15:04:05", "s"},
	{"2006-01-02T15:04", "m"}, {"2006-01-02 15:04", "m"}, {"2006-01-02 15", "h"}, {"2006-01-02T15", "h"},
	{"2006-01-02", "D"}, {"2006-1-2", "D"}, {"2006-01", "M"}, {"2006", "Y"},
}

// ParseDate parses an ISO-like date ("2024-01-01", "2024-01-01T12:00:00",
// "2024-06", "2024") and returns its resolution (Y, M, D, h, m, s).
func ParseDate(s string) (Date, string, error) {
	s = strings.TrimSpace(s)
	if len(s) < 4 || len(s) > 40 || s[0] < '0' || s[0] > '9' {
		return Date{}, "", fmt.Errorf("date %q: %w", s, ErrInvalid)
	}
	for _, l := range dateLayouts {
		t, err := time.Parse(l.layout, s)
		if err != nil {
			continue
		}
		sec := float64(t.Hour()*3600+t.Minute()*60+t.Second()) + float64(t.Nanosecond())/1e9
		return Date{Year: t.Year(), Month: int(t.Month()), Day: t.Day(), Sec: sec}, l.res, nil
	}
	return Date{}, "", fmt.Errorf("date %q: %w", s, ErrInvalid)
}

var cumDays = [2][13]int{
	{0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365},
	{0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366},
}

// days counts the days from a fixed origin to d's day in calendar cal.
func days(cal string, d Date) float64 {
	y, m := int64(d.Year), d.Month-1
	switch cal {
	case "noleap":
		return float64(y*365 + int64(cumDays[0][m]) + int64(d.Day-1))
	case "all_leap":
		return float64(y*366 + int64(cumDays[1][m]) + int64(d.Day-1))
	case "360_day":
		return float64(y*360 + int64(m*30) + int64(d.Day-1))
	}
	return float64(time.Date(d.Year, time.Month(d.Month), d.Day, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// Value converts a date to a coordinate value in these units.
func (u TimeUnits) Value(d Date) float64 {
	secs := (days(u.Calendar, d)-days(u.Calendar, u.Epoch))*86400 + d.Sec - u.Epoch.Sec
	return secs / u.Unit
}

// endOf returns the first instant after the period of resolution res that
// starts at d ("2024-06-30" at D → 2024-07-01 00:00).
func endOf(cal string, d Date, res string) Date {
	switch res {
	case "Y":
		return Date{Year: d.Year + 1, Month: 1, Day: 1}
	case "M":
		if d.Month == 12 {
			return Date{Year: d.Year + 1, Month: 1, Day: 1}
		}
		return Date{Year: d.Year, Month: d.Month + 1, Day: 1}
	}
	step := map[string]float64{"D": 86400, "h": 3600, "m": 60, "s": 1}[res]
	end := d
	end.Sec += step
	if end.Sec >= 86400 { // roll the day over in the calendar
		end.Sec -= 86400
		end = addDay(cal, end)
	}
	return end
}

func addDay(cal string, d Date) Date {
	n := monthLen(cal, d.Year, d.Month)
	d.Day++
	if d.Day > n {
		d.Day, d.Month = 1, d.Month+1
		if d.Month > 12 {
			d.Month, d.Year = 1, d.Year+1
		}
	}
	return d
}

func monthLen(cal string, y, m int) int {
	switch cal {
	case "360_day":
		return 30
	case "noleap":
		return cumDays[0][m] - cumDays[0][m-1]
	case "all_leap":
		return cumDays[1][m] - cumDays[1][m-1]
	}
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Bounds turns the filter values into coordinate bounds for coordinate c:
// numbers as they are, dates through c's CF time units. A date upper bound
// covers its whole period, as xarray's partial date strings do
// ("2024-06-30" includes all of that day): hiOpen then reports hi exclusive.
func (f Filter) Bounds(c *Variable) (lo, hi float64, hiOpen bool, err error) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if f.Lo != "" {
		if lo, _, err = coordValue(c, f.Lo, false); err != nil {
			return 0, 0, false, err
		}
	}
	if f.Hi != "" {
		if hi, hiOpen, err = coordValue(c, f.Hi, true); err != nil {
			return 0, 0, false, err
		}
	}
	return lo, hi, hiOpen, nil
}

func coordValue(c *Variable, s string, upper bool) (float64, bool, error) {
	if x, err := parseFloat(s); err == nil {
		return x, false, nil
	}
	d, res, err := ParseDate(s)
	if err != nil {
		return 0, false, fmt.Errorf("%q is neither a number nor a date: %w", s, ErrInvalid)
	}
	u, err := ParseTimeUnits(c.Units(), c.Calendar())
	if err != nil {
		return 0, false, fmt.Errorf("date %q on %s, which has no CF time units: %w", s, c.Path, err)
	}
	if upper {
		return u.Value(endOf(u.Calendar, d, res)), true, nil
	}
	return u.Value(d), false, nil
}

// SelectRange returns the index range [start, start+count) of the values of
// a monotonic (increasing or decreasing) coordinate that lie in lo..hi
// (hi exclusive when hiOpen). NaN or non-monotonic values are an error.
func SelectRange(values []float64, lo, hi float64, hiOpen bool) (start, count int64, err error) {
	inc, err := monotonic(values)
	if err != nil {
		return 0, 0, err
	}
	in := func(x float64) bool { return x >= lo && (x < hi || (!hiOpen && x == hi)) }
	first, last := -1, -1
	for i, x := range values {
		if in(x) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	_ = inc // monotonic values make the selected set contiguous
	if first < 0 {
		return 0, 0, nil
	}
	return int64(first), int64(last - first + 1), nil
}

func monotonic(values []float64) (bool, error) {
	inc, dec := true, true
	for i, x := range values {
		if math.IsNaN(x) {
			return false, fmt.Errorf("coordinate value %d is NaN: %w", i, ErrInvalid)
		}
		if i > 0 {
			inc = inc && x >= values[i-1]
			dec = dec && x <= values[i-1]
		}
	}
	if !inc && !dec {
		return false, fmt.Errorf("coordinate is not monotonic: %w", ErrInvalid)
	}
	return inc, nil
}

// AxisMatches reports whether axis i of v answers to name: the dimension's
// own name, or the CF role of its coordinate c ("time", "lat"/"latitude",
// "lon"/"longitude", "level"/"z") through standard_name, axis or units.
func AxisMatches(v *Variable, i int, c *Variable, name string) bool {
	if v.Dims[i] == name {
		return true
	}
	if c == nil {
		return false
	}
	role := cfRole(c)
	return role != "" && role == aliasRole(name)
}

func aliasRole(name string) string {
	switch strings.ToLower(name) {
	case "time", "t":
		return "time"
	case "lat", "latitude", "y":
		return "lat"
	case "lon", "longitude", "x":
		return "lon"
	case "level", "lev", "z", "depth", "height", "plev":
		return "level"
	}
	return ""
}

func cfRole(c *Variable) string {
	sn, axis, units := strings.ToLower(c.StandardName()), strings.ToUpper(c.Axis()), strings.ToLower(c.Units())
	switch {
	case sn == "time" || axis == "T" || c.IsTime():
		return "time"
	case sn == "latitude" || axis == "Y" || strings.HasPrefix(units, "degrees_n") || units == "degree_north":
		return "lat"
	case sn == "longitude" || axis == "X" || strings.HasPrefix(units, "degrees_e") || units == "degree_east":
		return "lon"
	case axis == "Z" || sn == "air_pressure" || sn == "depth" || sn == "height":
		return "level"
	}
	return aliasRole(c.Name)
}

// Format renders the coordinate value x in these units as an ISO 8601
// date in their calendar ("2001-02-28T00:00:00" in noleap), the fallback
// for calendars that datetime64 cannot hold; "" when x is not finite or
// far out of range.
func (u TimeUnits) Format(x float64) string {
	secs := days(u.Calendar, u.Epoch)*86400 + u.Epoch.Sec + x*u.Unit
	if math.IsNaN(secs) || math.Abs(secs) > 1e15 {
		return ""
	}
	day := math.Floor(secs / 86400)
	sec := int64(math.Round(secs - day*86400))
	if sec >= 86400 {
		day, sec = day+1, sec-86400
	}
	y, m, dd := civil(u.Calendar, int64(day))
	return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", y, m, dd, sec/3600, sec/60%60, sec%60)
}

// civil is the inverse of days: the date of day number n in cal.
func civil(cal string, n int64) (y, m, d int) {
	var ylen int64
	var cum *[13]int
	switch cal {
	case "noleap":
		ylen, cum = 365, &cumDays[0]
	case "all_leap":
		ylen, cum = 366, &cumDays[1]
	case "360_day":
		yy, r := floorDiv(n, 360)
		return int(yy), int(r/30) + 1, int(r%30) + 1
	default:
		t := time.Unix(n*86400, 0).UTC()
		return t.Year(), int(t.Month()), t.Day()
	}
	yy, r := floorDiv(n, ylen)
	for m = 1; m < 12 && int64(cum[m]) <= r; m++ {
	}
	return int(yy), m, int(r) - cum[m-1] + 1
}

func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q, r = q-1, r+b
	}
	return q, r
}
