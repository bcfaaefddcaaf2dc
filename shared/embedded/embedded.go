// Package embedded wires tablekeep's maintenance for a laptop: a local
// directory as the store, a lock file per table, and an in-process queue,
// so the whole job (compact, plan, drain, sweep) runs with no services.
package embedded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// Warehouse is a local warehouse directory with its catalog.
type Warehouse struct {
	Dir     string
	Store   objstore.Store
	Catalog *catalog.Catalog
	Locker  lock.Locker
	Queue   *queue.Embedded
	Clock   lock.Clock
	Logger  *slog.Logger
}

// Open opens (creating if needed) the warehouse in dir. store, if non-nil,
// wraps the directory store (e.g. a request counter).
func Open(ctx context.Context, dir string, clock lock.Clock, logger *slog.Logger, wrap func(objstore.Store) objstore.Store) (*Warehouse, error) {
	if clock == nil {
		clock = lock.SystemClock()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return nil, err
	}
	var st objstore.Store = disk
	if wrap != nil {
		st = wrap(st)
	}
	// One counter for the catalog and the tables: the runner diffs it per
	// maintenance step (sequential), so step logs include catalog requests.
	counting, ok := st.(*objstore.Counting)
	if !ok {
		counting = objstore.NewCounting(st)
	}
	st = counting
	cat, err := catalog.Open(ctx, st, "", table.Options{Clock: clock.Now, Logger: logger})
	if err != nil {
		return nil, err
	}
	locks := filepath.Join(dir, "_locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		return nil, err
	}
	locker, err := lock.NewFileLocker(locks, clock)
	if err != nil {
		return nil, err
	}
	q := queue.NewEmbedded(queue.EmbeddedOptions{Now: clock.Now, MaxReceives: 5})
	return &Warehouse{Dir: dir, Store: st, Catalog: cat, Locker: locker, Queue: q, Clock: clock, Logger: logger}, nil
}

// Report is one local maintenance pass.
type Report struct {
	Run    maintenance.RunReport
	Drain  queue.DrainStats
	Sweeps map[string]maintenance.SweepResult
	// Cleanup is, with DryRun, what the cleaner would delete for each
	// planned range, by table (read from the change records).
	Cleanup map[string][]maintenance.RangePlan
	Elapsed time.Duration
}

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
}

func (o Options) progress(desc string, total int) progress.Bar {
	if o.Progress == nil {
		return progress.New(io.Discard, desc, total)
	}
	return o.Progress(desc, total)
}

// Maintain runs compaction and prune planning on every registered table,
// drains the queue with the cleaner, and sweeps orphans. With DryRun it
// changes nothing and reports the plan: compaction groups, prune ranges,
// what the cleaner would delete for each range, and what the sweep would.
func (w *Warehouse) Maintain(ctx context.Context, o Options) (Report, error) {
	start := w.Clock.Now()
	var rep Report
	host, _ := os.Hostname()
	refs, err := w.Catalog.Tables(ctx)
	if err != nil {
		return rep, err
	}
	bar := o.progress("maintain", len(refs))
	r := &maintenance.Runner{
		Store: w.Store, Catalog: w.Catalog, Locker: w.Locker, Queue: maintenance.QueueEnqueuer{Q: w.Queue},
		Clock: w.Clock, Logger: w.Logger, Owner: fmt.Sprintf("%s/%d", host, os.Getpid()), DryRun: o.DryRun,
		Metrics:  o.Metrics,
		Progress: func(int, int) { _ = bar.Add(1) },
	}
	rep.Run, err = r.Run(ctx)
	_ = bar.Finish()
	if err != nil {
		return rep, err
	}
	if o.DryRun {
		if err := w.planCleanup(ctx, &rep); err != nil {
			return rep, err
		}
	} else {
		ranges := 0
		for _, tr := range rep.Run.Tables {
			ranges += len(tr.Prune.Ranges)
		}
		cl := w.Cleaner()
		cl.Metrics = o.Metrics
		bar = o.progress("cleanup", ranges)
		rep.Drain, err = maintenance.DrainLocal(ctx, w.Queue, cl, w.Logger, func() { _ = bar.Add(1) })
		_ = bar.Finish()
		if err != nil {
			return rep, err
		}
	}
	rep.Sweeps = map[string]maintenance.SweepResult{}
	for _, ref := range refs {
		sr, err := maintenance.SweepTable(ctx, w.Store, ref, maintenance.SweepOptions{
			Now: w.Clock.Now(), MaxDeletes: o.SweepMax, DryRun: o.DryRun, Logger: w.Logger, Clock: w.Clock.Now,
			Metrics: o.Metrics, Table: table.Options{Clock: w.Clock.Now},
		})
		if err != nil {
			return rep, fmt.Errorf("sweep %s: %w", ref.Name, err)
		}
		rep.Sweeps[ref.Name] = sr
	}
	rep.Elapsed = w.Clock.Now().Sub(start)
	if err := o.Metrics.Flush(); err != nil {
		w.Logger.WarnContext(ctx, "metrics not written", "err", err)
	}
	return rep, nil
}

// planCleanup fills rep.Cleanup: for each planned range, what the cleaner
// would delete, read from the change records, with sizes from listings.
func (w *Warehouse) planCleanup(ctx context.Context, rep *Report) error {
	rep.Cleanup = map[string][]maintenance.RangePlan{}
	for _, tr := range rep.Run.Tables {
		if len(tr.Prune.Ranges) == 0 {
			continue
		}
		ref, err := w.Catalog.Resolve(ctx, tr.Table)
		if err != nil {
			return err
		}
		t, err := table.Open(ctx, w.Store, ref.Root, table.Options{Clock: w.Clock.Now, Grace: ref.Policy.Grace})
		if err != nil {
			return err
		}
		for _, rg := range tr.Prune.Ranges {
			rp, err := maintenance.PlanRange(ctx, t, ref, rg, 0)
			if err != nil {
				return fmt.Errorf("plan cleanup %s [%d, %d]: %w", tr.Table, rg.From, rg.To, err)
			}
			rp.Sizes(ctx, w.Store, ref.Root, 0)
			rep.Cleanup[tr.Table] = append(rep.Cleanup[tr.Table], rp)
		}
	}
	return nil
}

// Cleaner returns a cleaner over this warehouse.
func (w *Warehouse) Cleaner() *maintenance.Cleaner {
	return &maintenance.Cleaner{
		Store: w.Store, Tables: w.Catalog, Requeue: maintenance.QueueEnqueuer{Q: w.Queue}, Logger: w.Logger,
		OpenOpts: table.Options{Clock: w.Clock.Now},
	}
}
