package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// dayDuration is a duration flag that also takes days: "7d", "1d12h",
// "1.5d", as well as Go's units ("90m", "36h"). Go's time.ParseDuration
// stops at hours; leases and grace windows are counted in days.
type dayDuration time.Duration

func (d *dayDuration) Set(s string) error {
	v, err := parseDays(s)
	if err != nil {
		return err
	}
	*d = dayDuration(v)
	return nil
}

func (d *dayDuration) Type() string { return "duration" }

func (d *dayDuration) String() string {
	if *d == 0 {
		return "0" // pflag: no "(default ...)" for a zero default
	}
	return daysText(time.Duration(*d))
}

// parseDays parses a duration with an optional leading day count.
func parseDays(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || n < 0 || n > 365*100 {
		return 0, fmt.Errorf("%q: want a duration such as 90m, 12h, 7d or 1d12h", s)
	}
	d := time.Duration(n * float64(24*time.Hour))
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return 0, fmt.Errorf("%q: want a duration such as 90m, 12h, 7d or 1d12h", s)
		}
		d += r
	}
	return d, nil
}

// daysText is d in whole days when it is some ("7d"), else as shortDuration.
func daysText(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return shortDuration(d)
}
