package statuspage

import (
	"strconv"
	"strings"
)

// A sparkline's box (SVG user units = CSS pixels).
const (
	chartW = 64
	chartH = 20
)

// chart is one inline SVG sparkline.
type chart struct {
	Label string // what it draws
	Last  string // the newest value
	Line  string // the polyline's points
	Dot   [2]string
	Title string // min .. max, for a tooltip and screen readers
	Empty bool   // fewer than two points
}

// charts draws the four series of h (oldest first).
func charts(h []Point) []chart {
	series := []struct {
		label string
		val   func(Point) float64
		show  func(float64) string
	}{
		{"versions", func(p Point) float64 { return float64(p.Versions) }, intText},
		{"fragments", func(p Point) float64 { return float64(p.Fragments) }, intText},
		{"manifests", func(p Point) float64 { return float64(p.ManifestBytes) }, func(v float64) string { return humanBytes(int64(v)) }},
		{"unreclaimed", func(p Point) float64 { return float64(p.Unreclaimed) }, intText},
	}
	out := make([]chart, len(series))
	for i, s := range series {
		vals := make([]float64, len(h))
		for j, p := range h {
			vals[j] = s.val(p)
		}
		out[i] = line(s.label, vals, s.show)
	}
	return out
}

func intText(v float64) string { return count(int(v)) }

func line(label string, vals []float64, show func(float64) string) chart {
	c := chart{Label: label}
	if len(vals) == 0 {
		c.Empty, c.Last = true, "-"
		return c
	}
	c.Last = show(vals[len(vals)-1])
	if len(vals) < 2 {
		c.Empty = true
		return c
	}
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	c.Title = label + ": " + show(lo) + " to " + show(hi) + " over " + strconv.Itoa(len(vals)) + " points"
	var b strings.Builder
	const pad = 2.0
	for i, v := range vals {
		x := pad + float64(i)*(chartW-2*pad)/float64(len(vals)-1)
		y := chartH / 2.0
		if hi > lo {
			y = chartH - pad - (v-lo)*(chartH-2*pad)/(hi-lo)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		xs, ys := num(x), num(y)
		b.WriteString(xs + "," + ys)
		if i == len(vals)-1 {
			c.Dot = [2]string{xs, ys}
		}
	}
	c.Line = b.String()
	return c
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
