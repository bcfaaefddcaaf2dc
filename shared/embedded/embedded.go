// Package embedded wires tablekeep's maintenance for a laptop: a local
// directory as the store, a lock file per table, and an in-process queue,
// so the whole job (compact, plan, drain, sweep) runs with no services.
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
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
	Run     maintenance.RunReport
	Drain   queue.DrainStats
	Sweeps  map[string]maintenance.SweepResult
	Elapsed time.Duration
}

// Options for Maintain.
type Options struct {
	DryRun bool
	// SweepMax bounds deletes per table per sweep (0: no bound).
	SweepMax int
}

// Maintain runs compaction and prune planning on every registered table,
// drains the queue with the cleaner, and sweeps orphans.
func (w *Warehouse) Maintain(ctx context.Context, o Options) (Report, error) {
	start := time.Now()
	var rep Report
	host, _ := os.Hostname()
	r := &maintenance.Runner{
		Store: w.Store, Catalog: w.Catalog, Locker: w.Locker, Queue: maintenance.QueueEnqueuer{Q: w.Queue},
		Clock: w.Clock, Logger: w.Logger, Owner: fmt.Sprintf("%s/%d", host, os.Getpid()), DryRun: o.DryRun,
	}
	var err error
	if rep.Run, err = r.Run(ctx); err != nil {
		return rep, err
	}
	if o.DryRun {
		return rep, nil
	}
	cl := w.Cleaner()
	if rep.Drain, err = maintenance.DrainLocal(ctx, w.Queue, cl, w.Logger); err != nil {
		return rep, err
	}
	rep.Sweeps = map[string]maintenance.SweepResult{}
	refs, err := w.Catalog.Tables(ctx)
	if err != nil {
		return rep, err
	}
	for _, ref := range refs {
		t, err := table.Open(ctx, w.Store, ref.Root, table.Options{Clock: w.Clock.Now, Grace: ref.Policy.Grace})
		if err != nil {
			return rep, err
		}
		sr, err := maintenance.Sweep(ctx, t, ref.Policy, w.Clock.Now(), o.SweepMax, false)
		if err != nil {
			return rep, fmt.Errorf("sweep %s: %w", ref.Name, err)
		}
		rep.Sweeps[ref.Name] = sr
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// Cleaner returns a cleaner over this warehouse.
func (w *Warehouse) Cleaner() *maintenance.Cleaner {
	return &maintenance.Cleaner{
		Store: w.Store, Tables: w.Catalog, Requeue: maintenance.QueueEnqueuer{Q: w.Queue}, Logger: w.Logger,
		OpenOpts: table.Options{Clock: w.Clock.Now},
	}
}
