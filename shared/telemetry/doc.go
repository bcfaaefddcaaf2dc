// Package telemetry records maintenance metrics and writes them in
// CloudWatch Embedded Metric Format (EMF): one JSON line per invocation or
// run, which CloudWatch Logs turns into metrics with no API call. It also
// renders request counts as slog attributes for the per-step log lines.
//
// A Metrics is created per invocation and injected through constructors; a
// nil *Metrics records nothing, so components work without one.
//
// Floor 2 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the recorder,
// the EMF encoding and every metric name (names.go;
// TestMetricNamesDefinedOnce). It must not import: shared/table,
// shared/maintenance, shared/lock.
package telemetry
