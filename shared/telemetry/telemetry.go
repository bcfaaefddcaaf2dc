package telemetry

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Namespace is the CloudWatch namespace of tablekeep's metrics (the SAM
// template's alarms use it).
const Namespace = "tablekeep"

// Units (CloudWatch StandardUnit names).
const (
	Count        = "Count"
	Bytes        = "Bytes"
	Milliseconds = "Milliseconds"
)

type value struct {
	unit string
	v    float64
}

// Metrics accumulates metric values until Flush. Safe for concurrent use.
type Metrics struct {
	w     io.Writer
	clock clock.Clock
	ns    string
	dims  [][2]string
	mu    sync.Mutex
	vals  map[string]value
	order []string
}

// New returns a recorder writing EMF lines to w, with dimensions given as
// name/value pairs (e.g. "Function", "compactor") and timestamps from clk
// (nil: the real clock).
func New(w io.Writer, clk clock.Clock, dims ...string) *Metrics {
	m := &Metrics{w: w, clock: clock.Or(clk), ns: Namespace, vals: map[string]value{}}
	for i := 0; i+1 < len(dims); i += 2 {
		m.dims = append(m.dims, [2]string{dims[i], dims[i+1]})
	}
	return m
}

// Declare makes name appear in the next flush (as 0 unless added to), so a
// dashboard or alarm sees an explicit zero rather than missing data.
func (m *Metrics) Declare(unit string, names ...string) {
	for _, n := range names {
		m.Add(n, unit, 0)
	}
}

// Add adds v to the metric name.
func (m *Metrics) Add(name, unit string, v float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.vals[name]
	if !ok {
		m.order = append(m.order, name)
	}
	m.vals[name] = value{unit: unit, v: cur.v + v}
}

// Set sets the metric name to v.
func (m *Metrics) Set(name, unit string, v float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.vals[name]; !ok {
		m.order = append(m.order, name)
	}
	m.vals[name] = value{unit: unit, v: v}
}

// Count adds n to a Count metric.
func (m *Metrics) Count(name string, n int) { m.Add(name, Count, float64(n)) }

// Duration adds d to a Milliseconds metric.
func (m *Metrics) Duration(name string, d time.Duration) {
	m.Add(name, Milliseconds, float64(d)/float64(time.Millisecond))
}

// Values is a snapshot of the recorded values by name.
func (m *Metrics) Values() map[string]float64 {
	out := map[string]float64{}
	if m == nil {
		return out
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.vals {
		out[k] = v.v
	}
	return out
}

// Flush writes one EMF line with every recorded metric and resets them.
// Nothing is written if nothing was recorded.
func (m *Metrics) Flush() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	vals, names := m.vals, append([]string(nil), m.order...)
	m.vals, m.order = map[string]value{}, nil
	m.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	b, err := encode(m.ns, m.dims, m.clock.Now(), names, vals)
	if err != nil {
		return err
	}
	_, err = m.w.Write(append(b, '\n'))
	return err
}

func encode(ns string, dims [][2]string, now time.Time, names []string, vals map[string]value) ([]byte, error) {
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	ms := make([]metric, len(names))
	for i, n := range names {
		ms[i] = metric{n, vals[n].unit}
	}
	dimNames := make([]string, len(dims))
	doc := map[string]any{}
	for i, d := range dims {
		dimNames[i] = d[0]
		doc[d[0]] = d[1]
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": ns, "Dimensions": [][]string{dimNames}, "Metrics": ms,
		}},
	}
	for _, n := range names {
		if _, clash := doc[n]; clash {
			return nil, fmt.Errorf("telemetry: metric %q clashes with a dimension", n)
		}
		doc[n] = vals[n].v
	}
	return json.Marshal(doc)
}

// Requests renders request counts as a "requests" group for slog lines.
func Requests(c objstore.Counts) slog.Attr {
	return slog.Group("requests",
		slog.Int64("get", c.Get), slog.Int64("head", c.Head), slog.Int64("put", c.Put),
		slog.Int64("list", c.List), slog.Int64("delete", c.DeleteRequests), slog.Int64("delete_keys", c.DeleteKeys))
}
