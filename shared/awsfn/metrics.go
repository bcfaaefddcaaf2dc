package awsfn

import (
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// MetricNamespace is the CloudWatch namespace of the functions' metrics
// (the template's alarms use it).
const MetricNamespace = telemetry.Namespace

// metrics returns the recorder of one invocation: it writes one EMF line
// (namespace tablekeep, dimensions Stack and Function; Function alone
// without TABLEKEEP_STACK) to d.Metrics when flushed.
// The metrics every run reports are declared, so they read 0 rather than
// missing (the alarms treat missing data as not breaching anyway).
func (d *Deps) metrics(role Role) *telemetry.Metrics {
	dims := []string{"Function", string(role)}
	if d.Config.Stack != "" {
		dims = append([]string{"Stack", d.Config.Stack}, dims...)
	}
	m := telemetry.New(d.Metrics, d.Clock, dims...)
	switch role {
	case RoleCompactor:
		m.Declare(telemetry.Count, telemetry.CompactionGroups, telemetry.CompactionRows, telemetry.LockLost,
			telemetry.UnreclaimedVersions, telemetry.SmallFragments)
		m.Declare(telemetry.Bytes, telemetry.CompactionBytes)
		m.Declare(telemetry.Milliseconds, telemetry.LockWait)
	case RoleCleaner:
		// No BytesDeleted: the Lambda cleaner does not measure bytes
		// (Cleaner.SkipSizes).
		m.Declare(telemetry.Count, telemetry.VersionsPruned, telemetry.ObjectsDeleted, telemetry.MessagesFailed)
	case RoleSweeper:
		m.Declare(telemetry.Count, telemetry.ObjectsDeleted)
		m.Declare(telemetry.Bytes, telemetry.BytesDeleted)
	}
	return m
}
