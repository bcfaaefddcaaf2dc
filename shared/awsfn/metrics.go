package awsfn

import (
	"encoding/json"
	"io"
	"sort"
	"time"
)

// MetricNamespace is the CloudWatch namespace of the functions' metrics
// (the template's alarms use it).
const MetricNamespace = "tablekeep"

// emitMetrics writes one CloudWatch Embedded Metric Format line: CloudWatch
// Logs turns it into metrics in MetricNamespace with dimension Function.
func emitMetrics(w io.Writer, fn Role, now time.Time, values map[string]float64) error {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	ms := make([]metric, len(names))
	for i, n := range names {
		ms[i] = metric{n, "Count"}
	}
	doc := map[string]any{
		"_aws": map[string]any{
			"Timestamp": now.UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace": MetricNamespace, "Dimensions": [][]string{{"Function"}}, "Metrics": ms,
			}},
		},
		"Function": string(fn),
	}
	for k, v := range values {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
