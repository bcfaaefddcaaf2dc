// Package embedded wires tablekeep's maintenance for a laptop: a local
// directory as the store, a lock file per table, and an in-process queue,
// so the whole job (compact, plan, drain, sweep) runs with no services.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/formats"
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
	// Errors is each failed table's error (compaction, prune plan, cleanup
	// plan or sweep): one table's failure does not stop the others'.
	Errors  map[string]string
	Elapsed time.Duration
}

// ErrTablesFailed is what Maintain returns, after maintaining every table
// it could, when some failed (Report.Errors says which and why).
var ErrTablesFailed = errors.New("maintenance failed for some tables")

func (r *Report) fail(table string, err error) {
	if r.Errors == nil {
		r.Errors = map[string]string{}
	}
	if prev, ok := r.Errors[table]; ok {
		r.Errors[table] = prev + "; " + err.Error()
		return
	}
	r.Errors[table] = err.Error()
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
	// Everything maintains and sweeps every registered table, in need or
	// not (maintenance.Runner.Everything).
	Everything bool
}

func (o Options) progress(desc string, total int) progress.Bar {
	if o.Progress == nil {
		return progress.New(io.Discard, desc, total)
	}
	return o.Progress(desc, total)
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
// what the sweep would.

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
		Clock: w.Clock, Logger: w.Logger, Owner: fmt.Sprintf("%s/%d", host, os.Getpid()), DryRun: o.DryRun, Everything: o.Everything,
		Metrics:  o.Metrics,
		Progress: func(int, int) { _ = bar.Add(1) },
		Sources:  formats.Open, // registered Lance datasets: compacted (page splicing) and pruned
	}
	rep.Run, err = r.Run(ctx)
	_ = bar.Finish()
	if err != nil {
		return rep, err
	}
	for _, tr := range rep.Run.Tables {
		if msg, ok := strings.CutPrefix(tr.Skipped, "error: "); ok {
			rep.fail(tr.Table, errors.New(msg))
		}
	}
	var drainErr error
	if o.DryRun {
		w.planCleanup(ctx, &rep)
	} else {
		ranges := 0
		for _, tr := range rep.Run.Tables {
			ranges += len(tr.Prune.Ranges)
		}
		cl := w.Cleaner()
		cl.Metrics = o.Metrics
		bar = o.progress("cleanup", ranges)
		rep.Drain, drainErr = maintenance.DrainLocal(ctx, w.Queue, cl, w.Logger, func() { _ = bar.Add(1) })
		_ = bar.Finish()
		if drainErr != nil {
			// The queue, not a table, failed: the sweeps still run.
			w.Logger.ErrorContext(ctx, "cleanup drain failed", "err", drainErr)
			drainErr = fmt.Errorf("drain cleanup queue: %w", drainErr)
		}
	}
	// The sweeps are independent per table: SweepTables at a time, each
	// a chain of listings and reads.
	rep.Sweeps = map[string]maintenance.SweepResult{}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(SweepTables)
	for _, ref := range sweepRefs(refs, rep.Run) {
		if err := ctx.Err(); err != nil {
			break
		}
		g.Go(func() error {
			sr, err := maintenance.SweepTable(ctx, w.Store, ref, maintenance.SweepOptions{
				Now: w.Clock.Now(), MaxDeletes: o.SweepMax, DryRun: o.DryRun, Logger: w.Logger, Clock: w.Clock.Now,
				Metrics: o.Metrics, Table: table.Options{Clock: w.Clock.Now}, Sources: formats.Open,
			})
			mu.Lock()
			defer mu.Unlock()
			rep.Sweeps[ref.Name] = sr
			if err != nil {
				rep.fail(ref.Name, fmt.Errorf("sweep: %w", err))
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return rep, errors.Join(drainErr, err)
	}
	rep.Elapsed = w.Clock.Now().Sub(start)
	if err := o.Metrics.Flush(); err != nil {
		w.Logger.WarnContext(ctx, "metrics not written", "err", err)
	}
	if len(rep.Errors) > 0 {
		var msgs []string
		for _, name := range slices.Sorted(maps.Keys(rep.Errors)) {
			msgs = append(msgs, name+": "+rep.Errors[name])
		}
		return rep, errors.Join(drainErr, fmt.Errorf("%w: %s", ErrTablesFailed, strings.Join(msgs, "; ")))
	}
	return rep, drainErr
}

// sweepRefs are the tables a pass sweeps: every table when the run
// maintained every table (Everything, DryRun, no fleet index), else those
// it maintained (in need: changed, due, or at their periodic full check).
func sweepRefs(refs []maintenance.TableRef, run maintenance.RunReport) []maintenance.TableRef {
	if run.Scan == nil {
		return refs
	}
	done := map[string]bool{}
	for _, tr := range run.Tables {
		done[tr.Table] = true
	}
	var out []maintenance.TableRef
	for _, ref := range refs {
		if done[ref.Name] {
			out = append(out, ref)
		}
	}
	return out
}

// planCleanup fills rep.Cleanup: for each planned range, what the cleaner
// would delete, read from the change records, with sizes from listings. A
// table that fails is reported in rep.Errors; the others are still planned.
func (w *Warehouse) planCleanup(ctx context.Context, rep *Report) {
	rep.Cleanup = map[string][]maintenance.RangePlan{}
	for _, tr := range rep.Run.Tables {
		if len(tr.Prune.Ranges) == 0 {
			continue
		}
		if err := w.planTableCleanup(ctx, rep, tr); err != nil {
			rep.fail(tr.Table, fmt.Errorf("plan cleanup: %w", err))
		}
	}
}

func (w *Warehouse) planTableCleanup(ctx context.Context, rep *Report, tr maintenance.TableReport) error {
	// From the change records the dry run read (or derived, in memory) on
	// the table's Source.
	if tr.Source == nil {
		return nil
	}
	for _, rg := range tr.Prune.Ranges {
		rp, err := maintenance.PlanRange(ctx, tr.Source, rg, 0)
		if err != nil {
			return fmt.Errorf("[%d, %d]: %w", rg.From, rg.To, err)
		}
		rp.Sizes(ctx, w.Store, tr.Source.Root(), 0)
		rep.Cleanup[tr.Table] = append(rep.Cleanup[tr.Table], rp)
	}
	return nil
}

// Cleaner returns a cleaner over this warehouse.
func (w *Warehouse) Cleaner() *maintenance.Cleaner {
	return &maintenance.Cleaner{
		Store: w.Store, Tables: w.Catalog, Requeue: maintenance.QueueEnqueuer{Q: w.Queue}, Logger: w.Logger,
		OpenOpts: table.Options{Clock: w.Clock.Now}, Sources: formats.Open,
	}
}
