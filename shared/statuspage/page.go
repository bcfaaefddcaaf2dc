package statuspage

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Health is a table's state on the page.
type Health string

// The three states, in the order the page lists them.
const (
	Failing Health = "failing" // unreadable, or its last maintenance failed
	Behind  Health = "behind"  // a backlog waiting longer than it should
	Healthy Health = "healthy"
)

func (h Health) rank() int {
	switch h {
	case Failing:
		return 0
	case Behind:
		return 1
	}
	return 2
}

// Point is one table's _stats row at one time.
type Point struct {
	At            time.Time
	Versions      int
	Fragments     int
	ManifestBytes int64
	// Unreclaimed: stored versions below the floor, waiting for their
	// cleanup (the garbage _stats records).
	Unreclaimed int
}

// Table is one table's row.
type Table struct {
	Name   string
	Format string // "tablekeep" or "lance"
	Health Health
	Reason string // why it is not healthy
	// LastMaintained is the table's last compaction or cleanup (zero:
	// never).
	LastMaintained time.Time
	Versions       int
	// Prunable: versions the next pass deletes, PrunableLater more once
	// their grace window ends; PrunableKnown says whether they were
	// planned (else Unreclaimed, versions below the floor waiting for
	// their cleanup, is shown).
	Prunable      int
	PrunableLater int
	PrunableKnown bool
	Unreclaimed   int
	Fragments     int
	Compactable   int // fragments the compaction planner would fold
	Rows          uint64
	// DeletedRows are rows masked by deletions in the latest version;
	// DeletedKnown says whether it was read.
	DeletedRows  uint64
	DeletedKnown bool
	// GarbageFiles and GarbageBytes: unreferenced files a sweep deletes;
	// GarbageKnown says whether they were read.
	GarbageFiles  int
	GarbageBytes  int64
	GarbageKnown  bool
	ManifestBytes int64
	Leases        int
	LeaseHold     string // what the lowest lease pins
	// LastOutcome is the last run's outcome ("" unknown), at LastRun,
	// with LastError when it failed.
	LastOutcome string
	LastRun     time.Time
	LastError   string
	// Unknown: the table could not be read, its counts are not known.
	Unknown bool
	// History is the table's _stats rows, oldest first (at most
	// MaxPoints are drawn: the newest).
	History []Point
}

// Page is the whole page.
type Page struct {
	Warehouse string
	Generated time.Time
	// Source says who wrote it ("tablekeep status", "the compactor's pass").
	Source string
	// Notes are warehouse-wide problems (the bucket's), shown first.
	Notes  []string
	Tables []Table
	// MaxDetail bounds the tables shown in detail (0: DefaultMaxDetail).
	MaxDetail int
}

// Bounds of the page: at most DefaultMaxDetail tables in detail (every
// unhealthy one first, then the most recently maintained), the rest
// counted; texts cut at MaxText bytes and histories at MaxPoints, so the
// page stays under MaxBytes whatever the fleet (TestPageBoundAt10000Tables).
const (
	DefaultMaxDetail = 200
	MaxText          = 240
	MaxPoints        = 32
	MaxBytes         = 1 << 20
)

//go:embed page.html.tmpl
var pageTemplate string

var tmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"when":    when,
	"bytes":   humanBytes,
	"count":   count,
	"count64": func(n uint64) string { return count(int(min(n, 1<<62))) },
	"percent": percent,
	"lower":   strings.ToLower,
	"plural":  plural,
}).Parse(pageTemplate))

// view is what the template renders.
type view struct {
	Page
	Counts            [3]int // failing, behind, healthy
	Total             int
	Detail            []row
	Hidden            [3]int // tables not in detail, by health
	HiddenAny         bool
	MaxShown          int
	GeneratedRFC3339  string
	GeneratedReadable string
}

type row struct {
	Table
	Deleted string
	Charts  []chart
	Since   string // LastMaintained, relative to the page's time
	Run     string // LastRun, relative
}

// Write renders p to w. Tables are listed failing, then behind, then
// healthy; within each, the most recently maintained first (never
// maintained last), then by name.
func Write(w io.Writer, p Page) error {
	v := view{Page: p, Total: len(p.Tables), MaxShown: p.MaxDetail}
	v.GeneratedRFC3339 = p.Generated.UTC().Format(time.RFC3339)
	v.GeneratedReadable = p.Generated.UTC().Format("2006-01-02 15:04 UTC")
	limit := p.MaxDetail
	if limit <= 0 {
		limit = DefaultMaxDetail
		v.MaxShown = limit
	}
	ts := slices.Clone(p.Tables)
	slices.SortStableFunc(ts, func(a, b Table) int {
		if d := a.Health.rank() - b.Health.rank(); d != 0 {
			return d
		}
		if d := b.LastMaintained.Compare(a.LastMaintained); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i, t := range ts {
		v.Counts[t.Health.rank()]++
		if i >= limit {
			v.Hidden[t.Health.rank()]++
			v.HiddenAny = true
			continue
		}
		v.Detail = append(v.Detail, rowOf(t, p.Generated))
	}
	v.Notes = slices.Clone(p.Notes)
	for i := range v.Notes {
		v.Notes[i] = cut(v.Notes[i])
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, v); err != nil {
		return fmt.Errorf("status page: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func rowOf(t Table, now time.Time) row {
	t.Name, t.Reason, t.LastError, t.LeaseHold, t.Format = cut(t.Name), cut(t.Reason), cut(t.LastError), cut(t.LeaseHold), cut(t.Format)
	if t.Health != Failing && t.Health != Behind {
		t.Health = Healthy
	}
	r := row{Table: t, Since: ago(t.LastMaintained, now), Run: ago(t.LastRun, now)}
	if t.DeletedKnown {
		r.Deleted = percent(t.DeletedRows, t.Rows+t.DeletedRows)
	}
	h := t.History
	if len(h) > MaxPoints {
		h = h[len(h)-MaxPoints:]
	}
	r.Charts = charts(h)
	return r
}

// cut shortens s to at most MaxText bytes (on a rune boundary).
func cut(s string) string {
	if len(s) <= MaxText {
		return s
	}
	s = s[:MaxText]
	for len(s) > 0 && !isRuneStart(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	if len(s) > 0 {
		s = s[:len(s)-1] // drop a rune that may be cut
	}
	return s + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("Jan 2 15:04 UTC")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return count(n) + " " + what + "s"
}

// ago is how long before now t was ("" for never).
func ago(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + " days ago"
}

func percent(n, of uint64) string {
	if of == 0 {
		return "0%"
	}
	p := float64(n) * 100 / float64(of)
	if p > 0 && p < 0.1 {
		return "<0.1%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// count writes n with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + count(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}
