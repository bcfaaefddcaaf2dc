package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
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

// StatsBatchPutter is a Catalog that writes many _stats rows in one commit.
// shared/fleet's pass uses it (one commit per pass for every table whose
// stats changed); a catalog without it gets one PutStats per changed row.
type StatsBatchPutter interface {
	PutStatsBatch(ctx context.Context, rows []TableStats) error
}

// QueueEnqueuer adapts a queue.Queue to Enqueuer.
type QueueEnqueuer struct{ Q queue.Queue }

// Send sends each body as one message, its message group the range's
// table (SQS fair queues, docs/aws.md "Fair queues": one table's backlog
// does not delay the others' ranges); a body that is not a range message
// has no group.
func (e QueueEnqueuer) Send(ctx context.Context, bodies [][]byte) error {
	msgs := make([]queue.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = queue.Message{Body: b, GroupKey: RangeGroup(b)}
	}
	return e.Q.Send(ctx, msgs)
}

// RangeGroup is the message group of a cleanup message: its table's
// registered name ("" if the body is not a range message).
func RangeGroup(body []byte) string {
	var m struct {
		Table string `json:"table"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	return m.Table
}

// DefaultFailureBackoff is the first retry delay of a failed table; it
// doubles with each consecutive failure, up to DefaultFailureBackoffMax
// (the scheduled passes' mode of shared/fleet's one backoff,
// fleet.BackoffOf(fleet.ModePass)).
const DefaultFailureBackoff = 15 * time.Minute

// DefaultFailureBackoffMax caps the failure backoff.
const DefaultFailureBackoffMax = 6 * time.Hour

// Runner runs scheduled maintenance over the tables of a catalog.
type Runner struct {
	Store     objstore.Store
	Catalog   Catalog
	Locker    lock.Locker
	Queue     Enqueuer
	Compactor *Compactor
	Clock     clock.Clock
	Logger    *slog.Logger
	Owner     string
	Lease     time.Duration // table lock lease (default 5 min)
	LockWait  time.Duration // wait for a table lock (default 10 s)
	StatsWait time.Duration // wait for the stats-writer lock (default 10 s)
	// Margin is kept in reserve before the context deadline.
	Margin time.Duration
	DryRun bool
	// NoSourceCompaction: datasets of another format are pruned only (a
	// prune-only pass); otherwise a SourceCompacter compacts first.
	NoSourceCompaction bool
	// Metrics, if set, records compaction rows/bytes/groups, lock wait and
	// lock lost, and the backlog (unreclaimed versions, small fragments).
	Metrics *telemetry.Metrics
	// Progress, if set, is called after each table.
	Progress func(done, total int)
	// LockNamespace prefixes every lock name (e.g. the warehouse URI), so
	// warehouses sharing a lock table never share a lock.
	LockNamespace string
	// KeepAlive is the real-time interval at which a table's lease is
	// renewed in the background while it is maintained (0: a sixth of the
	// lease; negative: only at each step, as with fake clocks).
	KeepAlive time.Duration

	// A fleet batch's fields (shared/fleet's Scheduler maintains its
	// tables through MaintainTableWith; docs/reliability.md "Fleet
	// passes"). The scan's own are fleet.Options.

	// TableTimeout bounds one table's maintenance within a run (0: only the
	// run's deadline). A table that times out is recorded as failed.
	TableTimeout time.Duration
	// FailureBackoff is the first retry delay of a failed table (default
	// 15 min), doubling with each consecutive failure up to
	// FailureBackoffMax (default 6 h): shared/fleet's Backoff. The same policy
	// backs off a table's compaction alone when only compaction fails, and
	// the fan-out's retry jobs (awsfn) are scheduled by it.
	FailureBackoff    time.Duration
	FailureBackoffMax time.Duration
	// Sources opens every registered dataset as a Source (formats.Open:
	// tablekeep tables and Lance datasets), as Cleaner.Sources: each is
	// compacted (a TableBacked source by Compactor, a SourceCompacter by
	// itself) and pruned through it. nil: OpenTableSource, tablekeep's own
	// format only; an opener that does not know the format: the table fails
	// with ErrUnknownFormat, nothing is deleted. formats.NewRunner wires
	// formats.Open.
	Sources SourceOpener
}

// SetDefaults fills the zero fields with their defaults (every method
// does; shared/fleet's scheduler calls it once).
func (r *Runner) SetDefaults() { r.defaults() }

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
		r.Clock = clock.System()
	}
	if r.Compactor == nil {
		r.Compactor = NewCompactor(r.Logger, r.Clock)
	}
	if r.FailureBackoff <= 0 {
		r.FailureBackoff = DefaultFailureBackoff
	}
	if r.FailureBackoffMax <= 0 {
		r.FailureBackoffMax = DefaultFailureBackoffMax
	}
}

// TableReport is what maintenance did (or, dry, would do) to one table.
type TableReport struct {
	Table      string         `json:"table"`
	Skipped    string         `json:"skipped,omitempty"` // why nothing was done
	Token      uint64         `json:"fencing_token,omitempty"`
	Compaction CompactionPlan `json:"-"`
	Compacted  CompactionResult
	// CompactionError is set when compaction failed; pruning still ran.
	// CompactionHeld: compaction was not tried, its backoff after earlier
	// failures had not passed (the table was pruned).
	CompactionError string `json:"compaction_error,omitempty"`
	CompactionHeld  bool   `json:"compaction_held,omitempty"`
	// Failures and RetryAt, when the maintenance failed, are the table's
	// consecutive failures and its earliest next attempt as recorded in the
	// fleet index (zero if not recorded): the one backoff policy.
	Failures int       `json:"failures,omitempty"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	// CompactFailures and CompactRetryAt, when compaction alone failed (or
	// was held), are its consecutive failures and when it is tried again.
	CompactFailures int       `json:"compact_failures,omitempty"`
	CompactRetryAt  time.Time `json:"compact_retry_at,omitzero"`
	// CompactionGroups describe a SourceCompacter's groups (a Lance
	// dataset's), one line each.
	CompactionGroups []string `json:"compaction_groups,omitempty"`
	Prune            PrunePlan
	Stats            TableStats
	StatsNote        string `json:"stats_note,omitempty"`
	Duration         time.Duration
	// Source, in a dry run, is the Source the plan was made on (on a view
	// of the store that keeps writes in memory): its change records (a
	// Lance dataset's derived there, not written) are what PlanRange
	// itemises the ranges from.
	Source Source `json:"-"`

	// Outcome is maintained, busy or failed; Error, when failed, says why
	// (Skipped then reads "error: " and Error).
	Outcome Outcome `json:"-"`
	Error   string  `json:"-"`

	ref        TableRef
	err        error // the failure of the maintenance (not of compaction alone)
	compactErr error // compaction failed, pruning did not
	mark       Mark  // the table's mark after this maintenance
	marked     bool
	statsReady bool // Stats computed, left to the batch to write
}

// Ref is the table maintained (zero if it was not resolved).
func (tr TableReport) Ref() TableRef { return tr.ref }

// Err is the failure of the maintenance (nil if it did not fail; a
// failure of compaction alone is CompactErr).
func (tr TableReport) Err() error { return tr.err }

// CompactErr is compaction's failure when pruning succeeded.
func (tr TableReport) CompactErr() error { return tr.compactErr }

// NewMark is the table's mark after this maintenance (false: none
// computed, the maintenance failed or was not done).
func (tr TableReport) NewMark() (Mark, bool) { return tr.mark, tr.marked }

// StatsReady reports whether Stats was computed and is left to the batch
// to write (shared/fleet's _stats batch).
func (tr TableReport) StatsReady() bool { return tr.statsReady }

// TableOptions is what a fleet scheduler knows of a table before its
// maintenance (MaintainTableWith).
type TableOptions struct {
	// Prior is the table's mark before (zero: none): a compaction backing
	// off after failures is not tried.
	Prior Mark
	// Listed is the scan's LIST of the table's manifests (zero: none): the
	// table is opened on it with one GET while it is fresh.
	Listed Listed
	// RetryAfter is the failure backoff of compaction after k consecutive
	// failures (shared/fleet's Backoff). nil: FailureBackoff, the first
	// delay (a table without a prior mark fails for the first time).
	RetryAfter func(k int) time.Duration
}

// Listed is a version a LIST of a table's manifests named newest and a
// time taken before that LIST was sent: the maintenance that follows the
// scan opens the table on it with one GET and no LIST
// (table.RefreshListed) while it is fresh (planFreshFor).
type Listed struct {
	Version uint64
	At      time.Time
}

// TableLockName is the lock of one table's maintenance: by its root, which
// is unique in the store (names are only unique in a catalog).
func (r *Runner) TableLockName(ref TableRef) string { return r.LockNamespace + "table/" + ref.Root }

// StatsLockName is the lock of the warehouse's stats writer.
func (r *Runner) StatsLockName() string { return r.LockNamespace + "stats-writer" }

// MaintainTable compacts one table and plans its pruning under its lock,
// then computes its stats and mark, and returns them in its report: it
// writes neither (shared/fleet records them). It is MaintainTableWith
// without a prior mark, its errors joined. Each step (compaction, prune
// plan, stats refresh) is one log line "maintenance step" with the table,
// versions, fencing token, requests by kind (of this step; a store that is
// already an *objstore.Counting shared with the catalog also counts
// catalog requests), bytes and duration.
func (r *Runner) MaintainTable(ctx context.Context, ref TableRef) (TableReport, error) {
	r.defaults()
	if r.DryRun {
		return r.maintainOne(ctx, ref, TableOptions{})
	}
	if err := ctx.Err(); err != nil {
		return TableReport{Table: ref.Name}, fmt.Errorf("maintain %s: %s", ref.Name, err.Error())
	}
	tr := r.MaintainTableWith(ctx, ref, TableOptions{})
	if r.Progress != nil {
		r.Progress(1, 1)
	}
	return tr, errors.Join(tr.err, tr.compactErr)
}

// MaintainTableWith maintains one table of a fleet batch within
// TableTimeout (a table that times out failed): its report holds its
// failure (Err; Outcome failed), compaction's (CompactErr), its mark
// (NewMark) and stats (StatsReady); it writes neither. One table's
// failure is logged and reported, never returned.
func (r *Runner) MaintainTableWith(ctx context.Context, ref TableRef, o TableOptions) TableReport {
	r.defaults()
	tctx, cancel := ctx, context.CancelFunc(func() {})
	if r.TableTimeout > 0 {
		tctx, cancel = context.WithTimeout(ctx, r.TableTimeout)
	}
	tr, err := r.maintainOne(tctx, ref, o)
	timedOut := tctx.Err() != nil && ctx.Err() == nil
	cancel()
	if err == nil && timedOut {
		err = fmt.Errorf("maintain %s: %w (table timeout %s)", ref.Name, context.DeadlineExceeded, r.TableTimeout)
	}
	tr.err = err
	if err != nil {
		// One table's failure does not stop the others.
		r.Logger.ErrorContext(ctx, "maintenance failed", "table", ref.Name, "err", err)
		tr.Fail(err)
	} else if tr.compactErr != nil {
		r.Logger.ErrorContext(ctx, "compaction failed; the table was pruned, compaction backs off", "table", ref.Name,
			"err", tr.compactErr, "compaction_failures", tr.mark.CompactFailures, "compaction_retry_at", tr.mark.CompactRetryAt)
	}
	return tr
}

// ErrCompaction marks a maintenance error of compaction alone: pruning
// ran, and the table's compaction backs off (Mark.CompactRetryAt).
var ErrCompaction = errors.New("compaction failed")

// PruneDone reports whether the maintenance pruned the table (planned and
// applied its prune, and computed its mark), whatever compaction did.
func (tr TableReport) PruneDone() bool { return tr.marked }

// maintainOne maintains one table of a batch (the batch writes its stats
// row and its mark), whatever its format: the table's Source is opened
// (openSource), its lease taken; a TableBacked source is opened under the
// lease and compacted by the Compactor, a SourceCompacter compacts itself;
// then the prune plan is computed and applied, the mark and the stats
// computed from what the pass saw. prev is the table's mark before (zero
// if none): a compaction backing off after failures is not tried. The
// error is the maintenance's; a failure of compaction alone is
// rep.compactErr.
func (r *Runner) maintainOne(ctx context.Context, ref TableRef, o TableOptions) (TableReport, error) {
	ctx = progress.Named(ctx, ref.Name) // its long phases' bars name it
	r.defaults()
	prev, hint := o.Prior, o.Listed
	start := r.Clock.Now()
	rep := TableReport{Table: ref.Name}
	p := ref.Policy.WithDefaults()
	cnt, ok := r.Store.(*objstore.Counting)
	if !ok {
		cnt = objstore.NewCounting(r.Store)
	}
	// A dry run plans, whichever path asked (MaintainTable, a fleet
	// batch): nothing is locked or written.
	if r.DryRun {
		return r.dryRunOne(ctx, cnt, ref)
	}
	src, err := r.openSource(ctx, cnt, ref)
	if err != nil {
		return rep, err
	}
	opts := table.Options{Grace: p.Grace, Clock: r.Clock, Logger: r.Logger}
	rep.ref = ref
	acquireStart := r.Clock.Now()
	fence, release, err := r.holdTable(ctx, ref)
	lockWait := r.Clock.Now().Sub(acquireStart)
	r.Metrics.Duration(telemetry.LockWait, lockWait)
	if errors.Is(err, lock.ErrLockHeld) {
		rep.busy()
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	defer release()
	lease := fence.Lease()
	rep.Token = lease.Token
	lostCounted := false // one lost lease per table pass, however many steps saw it
	lost := func(err error) error {
		if !lostCounted && (errors.Is(err, lock.ErrLeaseLost) || errors.Is(err, lock.ErrLeaseExpired)) {
			lostCounted = true
			r.Metrics.Count(telemetry.LockLost, 1)
		}
		return err
	}
	opts.Fence = fence.Heartbeat
	st := r.beginStep(cnt)
	// A tablekeep table is opened under the lease (its commits fenced by
	// it). The floor is read by the prune plan (and logged with it):
	// reading it here for the compaction's log line cost a LIST per
	// maintained table.
	var t *table.Table
	tb, isTable := src.(TableBacked)
	if isTable {
		// The scan's LIST named the latest version moments ago: the open
		// reads that manifest (one GET) instead of listing again. Its
		// read time is the time before the scan's LIST (RefreshListed), so
		// a commit on it keeps the writer bound; a version committed since
		// makes it stale, which the compaction's commit finds (its PUT
		// conflicts) as after any open; the prune plan lists every version
		// itself and the cleaner's guard re-reads the latest.
		if ts, ok := src.(*TableSource); ok && hint.Version > 0 && !r.Clock.Now().Before(hint.At) && r.Clock.Now().Sub(hint.At) <= planFreshFor {
			t, err = ts.OpenTableListed(ctx, opts, hint.Version, hint.At)
		} else {
			t, err = tb.OpenTable(ctx, opts)
		}
		if err != nil {
			return rep, err
		}
	}
	sc, isCompacter := src.(SourceCompacter)
	isCompacter = isCompacter && !r.NoSourceCompaction
	before := uint64(0)
	if t != nil {
		before = t.Cached().Version
	}
	held := prev.CompactHeld(r.Clock.Now())
	left := 0 // fragments a SourceCompacter left
	switch {
	case held:
		rep.CompactionHeld = true
		r.Logger.InfoContext(ctx, "compaction backing off after failures; pruning only", "table", ref.Name,
			"compaction_failures", prev.CompactFailures, "compaction_retry_at", prev.CompactRetryAt, "compaction_error", prev.CompactError)
	case t != nil:
		rep.Compacted, err = r.Compactor.Run(ctx, t, p)
	case isCompacter:
		var out SourceCompaction
		out, err = sc.CompactSource(ctx, p, fence.Heartbeat, false)
		rep.Compacted, rep.CompactionGroups, left = out.Result, out.Groups, out.LeftFragments
	}
	c := rep.Compacted
	if t != nil || isCompacter || held {
		stepErr := err
		if stepErr == nil && strings.HasPrefix(c.Stopped, "lease") {
			stepErr = errors.New(c.Stopped) // logged as the error it is
		}
		after := before
		if t != nil {
			after = t.Cached().Version
		} else if len(c.Versions) > 0 {
			after = c.Versions[len(c.Versions)-1]
		}
		r.endStep(ctx, st, stepErr, "compaction", ref.Name, lease.Token, formatAttr(ref),
			slog.Group("versions", slog.Uint64("latest", after),
				slog.Uint64("from", before), slog.Uint64("to", after)),
			slog.Int64("lock_wait_ms", lockWait.Milliseconds()),
			slog.Int("groups_planned", c.Planned), slog.Int("groups_committed", c.Committed), slog.Int("groups_dropped", c.Dropped),
			slog.Int("fragments_in", c.InputFrags), slog.Int("fragments_out", c.OutputFrags),
			slog.Uint64("rows", c.RowsWritten), slog.Uint64("bytes_read", c.BytesRead), slog.Uint64("bytes", c.BytesWritten),
			slog.String("stopped", c.Stopped),
			slog.Uint64("deleted_kept", c.DeletedKept), slog.String("deleted_kept_reason", c.DeletedKeptReason))
	}
	// A compaction error does not skip pruning: a table with a standing
	// compaction problem must still be pruned. Both are reported.
	var compactErr error
	if err != nil {
		compactErr = lost(fmt.Errorf("%w: compact %s: %w", ErrCompaction, ref.Name, err))
		rep.CompactionError = compactErr.Error()
	}
	r.Metrics.Count(telemetry.CompactionGroups, c.Committed)
	r.Metrics.Add(telemetry.CompactionRows, telemetry.Count, float64(c.RowsWritten))
	r.Metrics.Add(telemetry.CompactionBytes, telemetry.Bytes, float64(c.BytesWritten))
	if c.DeletedKept > 0 { // recorded only when some were kept (no pinned metric set changes)
		r.Metrics.Add(telemetry.CompactionDeletedKept, telemetry.Count, float64(c.DeletedKept))
	}

	st = r.beginStep(cnt)
	err = r.prune(ctx, src, ref, p, fence, &rep)
	pl := rep.Prune
	from, to := uint64(0), uint64(0)
	if len(pl.Ranges) > 0 {
		from, to = pl.Ranges[0].From, pl.Ranges[len(pl.Ranges)-1].To
	}
	r.endStep(ctx, st, err, "prune plan", ref.Name, lease.Token, formatAttr(ref),
		slog.Group("versions", slog.Uint64("latest", pl.Latest), slog.Uint64("floor", pl.Floor),
			slog.Uint64("old_floor", pl.OldFloor), slog.Uint64("from", from), slog.Uint64("to", to)),
		slog.Int("stored", pl.Versions), slog.Int("ranges", len(pl.Ranges)), slog.Int("prunable", pl.Prunable),
		slog.Int("unreclaimed", pl.Unreclaim), slog.Int("tagged", len(pl.Tagged)),
		slog.Int("repaired_change_records", pl.Repaired), slog.Int("replanned", pl.Replanned), slog.Int("resumed", pl.Resumed),
		slog.Int64("bytes", pl.PrunableBytes))
	if err != nil {
		return rep, errors.Join(compactErr, lost(err))
	}

	now := r.Clock.Now()
	cs := compactState{}
	switch {
	case compactErr != nil:
		cs.Failures = prev.CompactFailures + 1
		retryAfter := o.RetryAfter
		if retryAfter == nil {
			retryAfter = func(int) time.Duration { return r.FailureBackoff }
		}
		cs.RetryAt = table.SatAddTime(now, retryAfter(cs.Failures))
		cs.Error = ClipError(compactErr.Error())
	case held:
		cs = compactState{Failures: prev.CompactFailures, RetryAt: prev.CompactRetryAt, Error: prev.CompactError}
	}
	seen := uint64(0) // the latest version the pass compacted from
	if t != nil {
		left, seen = compactFragsOf(r.Compactor, t, p), t.Cached().Version
	}
	rep.mark, rep.marked = markAfter(ref, src.Grace(p.Grace), seen, rep.Prune, left, cs, now), true
	rep.compactErr = compactErr
	rep.CompactFailures, rep.CompactRetryAt = cs.Failures, cs.RetryAt
	st = r.beginStep(cnt)
	rep.Stats, rep.StatsNote = r.computeStats(ctx, ref, src, rep)
	rep.statsReady = rep.StatsNote == ""
	s := rep.Stats
	r.endStep(ctx, st, nil, "stats refresh", ref.Name, lease.Token, formatAttr(ref),
		slog.Group("versions", slog.Uint64("latest", pl.Latest), slog.Uint64("floor", pl.Floor)),
		slog.Int("stored", s.Versions), slog.Int("unreclaimed", s.Unreclaimed), slog.Uint64("rows", s.Rows),
		slog.Int("fragments", s.Fragments), slog.Int("small_fragments", s.SmallFrags),
		slog.Uint64("data_bytes", s.DataBytes), slog.Int64("bytes", s.ManifestBytes), slog.String("note", rep.StatsNote))
	if s.Versions == 0 {
		// Stats not computed: report the backlog the plan saw.
		r.Metrics.Count(telemetry.UnreclaimedVersions, pl.Unreclaim)
	} else {
		r.Metrics.Count(telemetry.UnreclaimedVersions, s.Unreclaimed)
		r.Metrics.Count(telemetry.SmallFragments, s.SmallFrags)
	}
	rep.Duration = r.Clock.Now().Sub(start)
	return rep, nil
}

// formatAttr is the format of a dataset of another format, for its log
// lines (empty for tablekeep's own, which log none).
func formatAttr(ref TableRef) slog.Attr {
	if ref.Format == "" {
		return slog.Attr{}
	}
	return slog.String("format", ref.Format)
}

// dryRunOne plans one table's maintenance and changes nothing: its Source
// is opened on a view of the store that keeps writes in memory (a format
// that derives its change records derives them there, and
// TableReport.Source reads them back for PlanRange). A TableBacked
// source's compaction is planned (and the prune planned after the commits
// it would make, so that its plan is the real run's on an unchanged
// table); a SourceCompacter plans its own.
func (r *Runner) dryRunOne(ctx context.Context, cnt *objstore.Counting, ref TableRef) (TableReport, error) {
	rep := TableReport{Table: ref.Name}
	p := ref.Policy.WithDefaults()
	src, err := r.openSource(ctx, objstore.NewOverlay(cnt), ref)
	if err != nil {
		return rep, err
	}
	commits := 0
	if tb, ok := src.(TableBacked); ok {
		t, err := tb.OpenTable(ctx, table.Options{Grace: p.Grace, Clock: r.Clock, Logger: r.Logger})
		if err != nil {
			return rep, err
		}
		if rep.Compaction, err = r.Compactor.Plan(ctx, t, p); err != nil {
			return rep, err
		}
		// The real run plans pruning after the compaction committed one
		// version per group: the dry run models those commits.
		commits = len(rep.Compaction.Groups)
	} else if c, ok := src.(SourceCompacter); ok && !r.NoSourceCompaction {
		sc, err := c.CompactSource(ctx, p, nil, true)
		if err != nil {
			rep.CompactionError = err.Error()
		}
		rep.Compacted, rep.CompactionGroups = sc.Result, sc.Groups
	}
	rep.Source = src
	rep.Prune, err = planPrune(ctx, src, ref.Name, p, r.Clock.Now(), commits, false)
	if err != nil {
		return rep, fmt.Errorf("plan prune %s: %w", ref.Name, err)
	}
	return rep, nil
}

// holdTable takes the table's lease lock (lock.ErrLockHeld: another
// maintainer has it; logged) and keeps it: the lease is renewed at every
// step (Heartbeat, before each group and each write) and, in real time,
// by KeepAlive during long steps. release stops the keep-alive and
// releases the lock.
func (r *Runner) holdTable(ctx context.Context, ref TableRef) (fence *lock.Fence, release func(), err error) {
	lease, err := r.Locker.Acquire(ctx, r.TableLockName(ref), lock.AcquireOptions{Owner: r.Owner, Lease: r.Lease, MaxWait: r.LockWait})
	if errors.Is(err, lock.ErrLockHeld) {
		r.Logger.InfoContext(ctx, "table busy", "table", ref.Name)
	}
	if err != nil {
		return nil, nil, err
	}
	fence = lock.NewFence(r.Locker, lease, r.Clock, 0)
	hbCtx, stopHB := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	if r.KeepAlive >= 0 {
		go func() {
			defer close(hbDone)
			_ = fence.KeepAlive(hbCtx, r.KeepAlive)
		}()
	} else {
		close(hbDone)
	}
	return fence, func() {
		stopHB()
		<-hbDone
		if err := r.Locker.Release(context.WithoutCancel(ctx), fence.Lease()); err != nil {
			r.Logger.WarnContext(ctx, "release lock", "table", ref.Name, "err", err)
		}
	}, nil
}

// prune plans and applies pruning (the floor and prune state are written
// under the lock: the fence is checked first).
func (r *Runner) prune(ctx context.Context, src Source, ref TableRef, p Policy, fence *lock.Fence, rep *TableReport) error {
	var err error
	if rep.Prune, err = planPrune(ctx, src, ref.Name, p, r.Clock.Now(), 0, true); err != nil {
		return fmt.Errorf("plan prune %s: %w", ref.Name, err)
	}
	if err := fence.Heartbeat(ctx); err != nil {
		return fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	rep.Prune.Token = fence.Lease().Token
	rep.Prune.Fence = fence.CheckFence
	if err := ApplySourcePrune(ctx, src, &rep.Prune, r.Queue); err != nil {
		return fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	return nil
}

// step is one maintenance step being measured.
type step struct {
	cnt   *objstore.Counting
	base  objstore.Counts
	start time.Time
}

func (r *Runner) beginStep(cnt *objstore.Counting) step {
	return step{cnt: cnt, base: cnt.Counts(), start: r.Clock.Now()}
}

// endStep logs one step: step, table, fencing_token, the step's own
// attributes (versions, bytes, ...), requests by kind and duration.
func (r *Runner) endStep(ctx context.Context, s step, err error, name, tableName string, token uint64, attrs ...slog.Attr) {
	all := append([]slog.Attr{slog.String("step", name), slog.String("table", tableName), slog.Uint64("fencing_token", token)}, attrs...)
	all = append(all, telemetry.Requests(s.cnt.Counts().Sub(s.base)), slog.Int64("duration_ms", r.Clock.Now().Sub(s.start).Milliseconds()))
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
		all = append(all, slog.String("err", err.Error()))
	}
	r.Logger.LogAttrs(ctx, level, "maintenance step", all...)
}

// computeStats computes the table's _stats row from what this maintenance
// already read (the prune plan's version listing and floor; a
// TableBacked source's latest manifest, with its data bytes and small
// fragments; a LatestStatser's rows and fragments, in a few requests):
// only the cleanup state is read (one GET). The batch writes the row (with
// the rows of the other tables maintained, in one commit, if it changed).
func (r *Runner) computeStats(ctx context.Context, ref TableRef, src Source, rep TableReport) (TableStats, string) {
	pl := rep.Prune
	var m *table.Manifest
	if tb, ok := src.(TableBacked); ok {
		if m = tb.Table().Cached(); m == nil || len(pl.vs) == 0 {
			s, err := ComputeStats(ctx, tb.Table(), ref, pl.Floor)
			if err != nil {
				return s, "stats not computed: " + err.Error()
			}
			return r.stampCompaction(s, rep), ""
		}
	}
	s := TableStats{Name: ref.Name, Versions: len(pl.vs)}
	for _, v := range pl.vs {
		s.ManifestBytes += v.ManifestBytes
		if v.Version < pl.Floor {
			s.Unreclaimed++
		}
	}
	if m != nil {
		st := table.StatsOf(m)
		s.Rows, s.Fragments, s.DataBytes = st.Rows, st.Fragments, st.DataBytes
		target := ref.Policy.WithDefaults().TargetRows
		for _, f := range m.Fragments {
			if f.LiveRows() < target {
				s.SmallFrags++
			}
		}
	} else if ls, ok := src.(LatestStatser); ok {
		// DataBytes stays 0 (it would take a HEAD per data file), and
		// so does SmallFrags.
		st, err := ls.LatestStats(ctx)
		if err != nil {
			return s, "stats not computed: " + err.Error()
		}
		s.Rows, s.Fragments = st.Rows, st.Fragments
	}
	last, err := lastCleanup(ctx, src)
	if err != nil {
		return s, "stats not computed: " + err.Error()
	}
	s.LastCleanup = last
	return r.stampCompaction(s, rep), ""
}

func (r *Runner) stampCompaction(s TableStats, rep TableReport) TableStats {
	if rep.Compacted.Committed > 0 {
		s.LastCompaction = r.Clock.Now()
	}
	return s
}

// ComputeStats summarises a table for _stats. Its reads (the table's
// stats, the floor unless given, the version listing, the cleanup state)
// are independent and sent at once.
func ComputeStats(ctx context.Context, t *table.Table, ref TableRef, floor uint64) (TableStats, error) {
	var st dataset.Stats
	var vs []dataset.VersionInfo
	var last time.Time
	var errs [4]error
	_ = inParallel(ctx,
		func(ctx context.Context) error { st, errs[0] = t.Stats(ctx); return nil },
		func(ctx context.Context) error {
			if floor == 0 {
				floor, errs[1] = t.Floor(ctx)
			}
			return nil
		},
		func(ctx context.Context) error { vs, errs[2] = t.Versions(ctx); return nil },
		func(ctx context.Context) error { last, errs[3] = LastCleanup(ctx, t); return nil },
	)
	if err := ctx.Err(); err != nil {
		return TableStats{Name: ref.Name}, err
	}
	for _, err := range errs[:3] {
		if err != nil {
			return TableStats{Name: ref.Name}, err
		}
	}
	s := TableStats{Name: ref.Name, Rows: st.Rows, Fragments: st.Fragments, Versions: st.Versions,
		DataBytes: st.DataBytes, ManifestBytes: st.ManifestBytes, LastCleanup: last}
	if errs[3] != nil {
		return s, errs[3]
	}
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
