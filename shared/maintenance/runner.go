package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TableStats is one table's row in _stats.
type TableStats struct {
	Name           string
	Rows           uint64
	Fragments      int
	SmallFrags     int // fragments under the target rows
	Versions       int
	Unreclaimed    int // stored versions below the floor
	DataBytes      uint64
	ManifestBytes  int64
	LastCompaction time.Time
	LastCleanup    time.Time
}

// Catalog is the registry of managed tables and their stats.
type Catalog interface {
	Resolver
	Tables(ctx context.Context) ([]TableRef, error)
	Stats(ctx context.Context) (map[string]TableStats, error)
	PutStats(ctx context.Context, s TableStats) error
}

// QueueEnqueuer adapts a queue.Queue to Enqueuer.
type QueueEnqueuer struct{ Q queue.Queue }

// Send sends each body as one message.
func (e QueueEnqueuer) Send(ctx context.Context, bodies [][]byte) error {
	msgs := make([]queue.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = queue.Message{Body: b}
	}
	return e.Q.Send(ctx, msgs)
}

// Runner runs scheduled maintenance over the tables of a catalog.
type Runner struct {
	Store     objstore.Store
	Catalog   Catalog
	Locker    lock.Locker
	Queue     Enqueuer
	Compactor *Compactor
	Clock     lock.Clock
	Logger    *slog.Logger
	Owner     string
	Lease     time.Duration // table lock lease (default 5 min)
	LockWait  time.Duration // wait for a table lock (default 10 s)
	StatsWait time.Duration // wait for the stats-writer lock (default 10 s)
	// Margin is kept in reserve before the context deadline.
	Margin time.Duration
	DryRun bool
}

func (r *Runner) defaults() {
	if r.Lease <= 0 {
		r.Lease = 5 * time.Minute
	}
	if r.LockWait == 0 {
		r.LockWait = 10 * time.Second
	}
	if r.StatsWait == 0 {
		r.StatsWait = 10 * time.Second
	}
	if r.Margin <= 0 {
		r.Margin = 10 * time.Second
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Clock == nil {
		r.Clock = lock.SystemClock()
	}
	if r.Compactor == nil {
		r.Compactor = NewCompactor(r.Logger, r.Clock.Now)
	}
}

// TableReport is what maintenance did (or, dry, would do) to one table.
type TableReport struct {
	Table      string         `json:"table"`
	Skipped    string         `json:"skipped,omitempty"` // why nothing was done
	Token      uint64         `json:"fencing_token,omitempty"`
	Compaction CompactionPlan `json:"-"`
	Compacted  CompactionResult
	Prune      PrunePlan
	Stats      TableStats
	StatsNote  string `json:"stats_note,omitempty"`
	Duration   time.Duration
}

// RunReport covers one scheduled run.
type RunReport struct {
	Tables  []TableReport
	Stopped string // why the run ended before every table ("" if it did not)
}

// Run maintains every registered table, most in need first, until the
// context's deadline minus the margin.
func (r *Runner) Run(ctx context.Context) (RunReport, error) {
	r.defaults()
	var rep RunReport
	refs, err := r.Catalog.Tables(ctx)
	if err != nil {
		return rep, fmt.Errorf("list tables: %w", err)
	}
	stats, err := r.Catalog.Stats(ctx)
	if err != nil {
		r.Logger.WarnContext(ctx, "stats unreadable; maintaining in registry order", "err", err)
		stats = nil
	}
	need := func(ref TableRef) int {
		s := stats[ref.Name]
		return s.Unreclaimed + s.SmallFrags
	}
	sort.SliceStable(refs, func(i, j int) bool { return need(refs[i]) > need(refs[j]) })
	for i, ref := range refs {
		if err := ctx.Err(); err != nil {
			rep.Stopped = err.Error()
			break
		}
		if dl, ok := ctx.Deadline(); ok && dl.Sub(r.Clock.Now()) < r.Margin {
			rep.Stopped = fmt.Sprintf("deadline: %d of %d tables done", i, len(refs))
			break
		}
		tr, err := r.MaintainTable(ctx, ref)
		rep.Tables = append(rep.Tables, tr)
		if err != nil {
			// One table's failure does not stop the others.
			r.Logger.ErrorContext(ctx, "maintenance failed", "table", ref.Name, "err", err)
			rep.Tables[len(rep.Tables)-1].Skipped = "error: " + err.Error()
		}
	}
	return rep, nil
}

// lockName is the lock of one table's maintenance.
func lockName(table string) string { return "table/" + table }

// MaintainTable compacts one table and plans its pruning under its lock,
// then refreshes its stats.
func (r *Runner) MaintainTable(ctx context.Context, ref TableRef) (TableReport, error) {
	r.defaults()
	start := r.Clock.Now()
	rep := TableReport{Table: ref.Name}
	p := ref.Policy.WithDefaults()
	opts := table.Options{Grace: p.Grace, Clock: r.Clock.Now, Logger: r.Logger}
	if r.DryRun {
		t, err := table.Open(ctx, r.Store, ref.Root, opts)
		if err != nil {
			return rep, err
		}
		if rep.Compaction, err = r.Compactor.Plan(ctx, t, p); err != nil {
			return rep, err
		}
		rep.Prune, err = PlanPrune(ctx, t, ref.Name, p, r.Clock.Now())
		return rep, err
	}
	lease, err := r.Locker.Acquire(ctx, lockName(ref.Name), lock.AcquireOptions{Owner: r.Owner, Lease: r.Lease, MaxWait: r.LockWait})
	if errors.Is(err, lock.ErrLockHeld) {
		rep.Skipped = "locked by another compactor"
		r.Logger.InfoContext(ctx, "table busy", "table", ref.Name)
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	rep.Token = lease.Token
	fence := lock.NewFence(r.Locker, lease, r.Clock, 0)
	defer func() {
		if err := r.Locker.Release(context.WithoutCancel(ctx), fence.Lease()); err != nil {
			r.Logger.WarnContext(ctx, "release lock", "table", ref.Name, "err", err)
		}
	}()
	opts.Fence = fence.CheckFence
	t, err := table.Open(ctx, r.Store, ref.Root, opts)
	if err != nil {
		return rep, err
	}
	if rep.Compacted, err = r.Compactor.Run(ctx, t, p); err != nil {
		return rep, fmt.Errorf("compact %s: %w", ref.Name, err)
	}
	if rep.Prune, err = PlanPrune(ctx, t, ref.Name, p, r.Clock.Now()); err != nil {
		return rep, fmt.Errorf("plan prune %s: %w", ref.Name, err)
	}
	// The floor and prune state are written under the lock: check it first.
	if err := fence.CheckFence(ctx); err != nil {
		return rep, fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	if err := ApplyPrune(ctx, t, &rep.Prune, r.Queue); err != nil {
		return rep, fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	r.Logger.InfoContext(ctx, "prune planned", "table", ref.Name, "fencing_token", lease.Token,
		"latest", rep.Prune.Latest, "floor", rep.Prune.Floor, "ranges", len(rep.Prune.Ranges),
		"prunable", rep.Prune.Prunable, "repaired_change_records", rep.Prune.Repaired)
	rep.Stats, rep.StatsNote = r.refreshStats(ctx, ref, t, rep)
	rep.Duration = r.Clock.Now().Sub(start)
	return rep, nil
}

// refreshStats writes the table's _stats row, waiting at most StatsWait for
// the stats-writer lock; otherwise it leaves the row to the next run (the
// maintenance it reports on is already committed).
func (r *Runner) refreshStats(ctx context.Context, ref TableRef, t *table.Table, rep TableReport) (TableStats, string) {
	s, err := ComputeStats(ctx, t, ref, rep.Prune.Floor)
	if err != nil {
		return s, "stats not computed: " + err.Error()
	}
	now := r.Clock.Now()
	if rep.Compacted.Committed > 0 {
		s.LastCompaction = now
	}
	lease, err := r.Locker.Acquire(ctx, "stats-writer", lock.AcquireOptions{Owner: r.Owner, Lease: time.Minute, MaxWait: r.StatsWait})
	if err != nil {
		return s, "stats left to the next run: " + err.Error()
	}
	defer r.Locker.Release(context.WithoutCancel(ctx), lease)
	if old, err := r.Catalog.Stats(ctx); err == nil {
		if s.LastCompaction.IsZero() {
			s.LastCompaction = old[ref.Name].LastCompaction
		}
		s.LastCleanup = old[ref.Name].LastCleanup
	}
	if err := r.Catalog.PutStats(ctx, s); err != nil {
		return s, "stats not written: " + err.Error()
	}
	return s, ""
}

// ComputeStats summarises a table for _stats.
func ComputeStats(ctx context.Context, t *table.Table, ref TableRef, floor uint64) (TableStats, error) {
	st, err := t.Stats(ctx)
	if err != nil {
		return TableStats{Name: ref.Name}, err
	}
	if floor == 0 {
		if floor, err = t.Floor(ctx); err != nil {
			return TableStats{Name: ref.Name}, err
		}
	}
	vs, err := t.Versions(ctx)
	if err != nil {
		return TableStats{Name: ref.Name}, err
	}
	s := TableStats{Name: ref.Name, Rows: st.Rows, Fragments: st.Fragments, Versions: st.Versions,
		DataBytes: st.DataBytes, ManifestBytes: st.ManifestBytes}
	for _, v := range vs {
		if v.Version < floor {
			s.Unreclaimed++
		}
	}
	target := ref.Policy.WithDefaults().TargetRows
	for _, f := range t.Cached().Fragments {
		if f.LiveRows() < target {
			s.SmallFrags++
		}
	}
	return s, nil
}

// DrainLocal runs the cleaner over an in-process queue until it is empty.
func DrainLocal(ctx context.Context, q queue.Queue, c *Cleaner, logger *slog.Logger) (queue.DrainStats, error) {
	var total queue.DrainStats
	for {
		st, err := queue.Drain(ctx, q, c.Handle, queue.DrainOptions{Logger: logger, MaxReceives: 5})
		total.Received += st.Received
		total.Succeeded += st.Succeeded
		total.Failed += st.Failed
		total.DeadLettered += st.DeadLettered
		if err != nil || st.Received == 0 {
			return total, err
		}
	}
}
