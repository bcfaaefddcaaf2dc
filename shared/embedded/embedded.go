package embedded

import (
	"context"
	"log/slog"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/telemetry"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// Warehouse is a local warehouse directory with its catalog
// (warehouse.OpenLocal).
type Warehouse struct {
	*warehouse.Warehouse
}

// Open opens (creating if needed) the warehouse in dir. wrap, if non-nil,
// wraps the directory store (e.g. a request counter).
func Open(ctx context.Context, dir string, clock clock.Clock, logger *slog.Logger, wrap func(objstore.Store) objstore.Store) (*Warehouse, error) {
	w, err := warehouse.OpenLocal(ctx, dir, warehouse.LocalOptions{Clock: clock, Logger: logger, Wrap: wrap})
	if err != nil {
		return nil, err
	}
	return &Warehouse{w}, nil
}

// Report is one local maintenance pass (warehouse.Report).
type Report = warehouse.Report

// ErrTablesFailed is what Maintain returns, after maintaining every table
// it could, when some failed (Report.Errors says which and why).
var ErrTablesFailed = warehouse.ErrTablesFailed

// Options for Maintain.
type Options struct {
	DryRun bool
	// SweepMax bounds deletes per table per sweep (0: no bound).
	SweepMax int
	// Metrics, if set, receives the run's metrics; Maintain flushes one EMF
	// line at the end of the run.
	Metrics *telemetry.Metrics
	// Progress, if set, shows progress over tables and cleanup messages
	// (see shared/progress: a terminal's stderr, or nothing).
	Progress func(desc string, total int) progress.Bar
	// Everything maintains and sweeps every registered table, in need or
	// not (fleet.Options.Everything).
	Everything bool
}

// SweepTables is how many tables Maintain sweeps at once.
const SweepTables = 4

// Maintain runs compaction and prune planning on the registered tables in
// need (every table with DryRun or Options.Everything; maintenance.Runner),
// drains the queue with the cleaner, and sweeps orphans from the tables it
// maintained (an idle table is swept when the scan next finds it in need:
// at its next write, or its full check, at most Policy.FullCheckEvery
// away). With DryRun it changes nothing and reports the plan: compaction
// groups, prune ranges, what the cleaner would delete for each range, and
// what the sweep would. It is warehouse.Pass with the embedded defaults.
func (w *Warehouse) Maintain(ctx context.Context, o Options) (Report, error) {
	return w.Pass(ctx, warehouse.PassOptions{DryRun: o.DryRun, Everything: o.Everything, SweepMax: o.SweepMax,
		SweepTables: SweepTables, Metrics: o.Metrics, Progress: o.Progress})
}

// Cleaner returns a cleaner over this warehouse.
func (w *Warehouse) Cleaner() *maintenance.Cleaner {
	return w.NewCleaner(warehouse.Options{})
}
