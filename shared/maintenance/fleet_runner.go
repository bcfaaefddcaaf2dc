package maintenance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/table"
)

// StatsBatchPutter is a Catalog that writes many _stats rows in one commit.
// Runner.Run uses it (one commit per pass for every table whose stats
// changed); a catalog without it gets one PutStats per changed row.
type StatsBatchPutter interface {
	PutStatsBatch(ctx context.Context, rows []TableStats) error
}

// rooted is a Catalog that knows its warehouse root (catalog.Catalog).
type rooted interface{ Root() string }

// DefaultScanConcurrency is how many tables a scan lists at once.
const DefaultScanConcurrency = 64

// DefaultScanTimeout bounds one table's LIST in a scan.
const DefaultScanTimeout = 10 * time.Second

// DefaultFailureBackoff is the first retry delay of a failed table; it
// doubles with each consecutive failure, up to DefaultFailureBackoffMax
// (fleet.BackoffOf(fleet.ModePass)).
const DefaultFailureBackoff = 15 * time.Minute

// DefaultFailureBackoffMax caps the failure backoff.
const DefaultFailureBackoffMax = 6 * time.Hour

// FailureBackoffFor is the one backoff policy of a failing table
// (fleet.Backoff{base, most}.Delay(k)).
func FailureBackoffFor(k int, base, most time.Duration) time.Duration {
	return fleet.Backoff{Base: base, Max: most}.Delay(k)
}

// RetryBackoff is the runner's failure backoff after k consecutive
// failures (FailureBackoffFor with its FailureBackoff and
// FailureBackoffMax).
func (r *Runner) RetryBackoff(k int) time.Duration {
	return FailureBackoffFor(k, r.FailureBackoff, r.FailureBackoffMax)
}

// TableNeed is one table a scan found in need, and why.
type TableNeed struct {
	Ref     TableRef `json:"-"`
	Table   string   `json:"table"`
	Reasons []string `json:"reasons"`
	// Latest is the version the scan listed (0 if the listing failed).
	Latest uint64 `json:"latest"`
	// Failures is the table's consecutive failures: tables that failed
	// are ordered after every table that did not.
	Failures int `json:"failures,omitempty"`
	since    time.Time
	// listed is Latest as the scan's LIST of the table's manifests named
	// it, and a time before that LIST (zero: not listed by this scan).
	listed listedLatest
}

// listedLatest is a version a LIST of a table's manifests named newest
// and a time taken before that LIST was sent: the maintenance that
// follows the scan opens the table on it with one GET and no LIST
// (table.RefreshListed) while it is fresh (planFreshFor).
type listedLatest struct {
	v    uint64
	at   time.Time
	root string
}

// FleetScan is the result of Runner.Scan: which registered tables need
// maintenance. It costs one LIST per table, plus the registry and the
// fleet index read once.
type FleetScan struct {
	At         time.Time
	Tables     int         // registered tables scanned
	Need       []TableNeed // in the order to maintain them
	Idle       int         // unchanged, nothing due: skipped
	BackingOff int         // failed recently, waiting for their retry time
	// IndexError is set when the fleet index could not be read: every
	// table is then in need.
	IndexError string

	refs    []TableRef
	index   *FleetIndex
	updates map[string]Mark // marks a scan changed (a change first seen)
	idle    *idleScan       // safety-net mode (Runner.SafetyScanEvery)
}

// Listed is how many tables the scan listed (one LIST each).
func (sc *FleetScan) Listed() int {
	if sc.idle == nil {
		n := 0
		for _, ref := range sc.refs {
			if m, ok := sc.index.Tables[ref.Name]; ok && !(m.Failures > 0 && sc.At.Before(m.RetryAt)) {
				n++
			}
		}
		return n
	}
	return sc.idle.listed
}

// Refs is every registered table the scan saw, in registry order.
func (sc *FleetScan) Refs() []TableRef { return sc.refs }

// indexRoot is the warehouse root the fleet index lives under.
func (r *Runner) indexRoot() (string, bool) {
	switch {
	case r.IndexRoot == "-":
		return "", false
	case r.IndexRoot != "":
		return table.NormalizeRoot(r.IndexRoot), true
	}
	if c, ok := r.Catalog.(rooted); ok {
		return c.Root(), true
	}
	return "", false
}

// Scan lists every registered table's latest version (one LIST each, at
// most ScanConcurrency at once) and compares it with the table's mark in
// the fleet index (read once): a table whose latest version is its mark's,
// with nothing due, is idle. Reasons a table is in need: no mark; changed
// with enough new fragments to compact, or changed CompactMaxWait ago;
// its mark due (re-plan of tracked ranges, versions prunable, compaction
// left, full check); a retry after failures, once its backoff has passed.
// Without a fleet index (Runner.IndexRoot "-", or a catalog with no
// root) every table is in need.
func (r *Runner) Scan(ctx context.Context) (*FleetScan, error) {
	r.defaults()
	refs, err := r.Catalog.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	sc := &FleetScan{At: r.Clock.Now(), Tables: len(refs), refs: refs, updates: map[string]Mark{}}
	root, ok := r.indexRoot()
	if !ok {
		for _, ref := range refs {
			sc.Need = append(sc.Need, TableNeed{Ref: ref, Table: ref.Name, Reasons: []string{"no fleet index"}})
		}
		return sc, nil
	}
	if r.SafetyScanEvery > 0 {
		var sel func(int, uint64) bool
		sc.idle, sel = r.startIdleScan(ctx, root, refs, sc.At)
		sc.index, sc.idle.newest, err = fleet.ReadSel(ctx, r.Store, root, sel)
	} else {
		sc.index, err = ReadFleetIndex(ctx, r.Store, root)
	}
	if err != nil {
		r.Logger.WarnContext(ctx, "fleet index unreadable: every table is in need", "err", err)
		sc.IndexError = err.Error()
		sc.index = fleet.NewIndex()
	} else if len(sc.index.Damaged) > 0 {
		// Their tables have no mark (in need); the pass's index write
		// replaces each damaged object with the next one.
		r.Logger.WarnContext(ctx, "fleet index shards unreadable: their tables are in need", "shards", sc.index.Damaged)
		sc.IndexError = fmt.Sprintf("%d fleet index shards unreadable: %v", len(sc.index.Damaged), sc.index.Damaged)
	}
	latest := make([]uint64, len(refs))
	errs := make([]error, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.ScanConcurrency)
	skipped := make([]bool, len(refs)) // safety-net mode: its shard unread, nothing due
	listed := make([]bool, len(refs))  // latest[i] is a LIST's answer sent after sc.At
	for i, ref := range refs {
		m, known := sc.index.Tables[ref.Name]
		if is := sc.idle; is != nil && sc.IndexError == "" {
			sh := FleetShardOf(ref.Name)
			if _, read := sc.index.ReadShard(sh); !read && is.newest[sh] != 0 {
				skipped[i] = true
				continue
			}
			if known && !is.list[sh] && !r.unnotified(ref) {
				latest[i] = fleet.LatestOf(m) // not its window: no LIST
				continue
			}
		}
		if !known || (m.Failures > 0 && sc.At.Before(m.RetryAt)) {
			continue // in need whatever its version, or backing off: not listed
		}
		if sc.idle != nil {
			sc.idle.listed++
		}
		listed[i] = true
		g.Go(func() error {
			lctx, cancel := context.WithTimeout(gctx, r.ScanTimeout)
			defer cancel()
			// The newest version known: a change already seen is not
			// listed in full again at every scan (a LatestProber's).
			latest[i], errs[i] = r.sourceLatest(lctx, ref, max(m.Latest, m.Seen))
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := sc.At
	for i, ref := range refs {
		if skipped[i] {
			sc.Idle++
			continue
		}
		m, known := sc.index.Tables[ref.Name]
		reasons, upd, changed := fleet.Decide(ref.Root, m, known, latest[i], errs[i], now, thresholds(ref))
		if changed {
			sc.updates[ref.Name] = upd
		}
		switch {
		case len(reasons) > 0:
			since := upd.ChangedAt
			if since.IsZero() || (!upd.Due.IsZero() && upd.Due.Before(since)) {
				since = upd.Due
			}
			if !known {
				since = time.Time{}
			}
			need := TableNeed{Ref: ref, Table: ref.Name, Reasons: reasons, Latest: latest[i], Failures: m.Failures, since: since}
			if listed[i] && errs[i] == nil && latest[i] > 0 {
				need.listed = listedLatest{v: latest[i], at: sc.At} // sc.At: before every LIST of the scan
			}
			sc.Need = append(sc.Need, need)
		case known && m.Failures > 0:
			sc.BackingOff++
		default:
			sc.Idle++
		}
	}
	// Tables that did not fail first, longest waiting first; then the
	// failed ones, fewest failures first: a table that keeps failing or
	// timing out is never picked before the others.
	sort.SliceStable(sc.Need, func(i, j int) bool {
		a, b := sc.Need[i], sc.Need[j]
		if a.Failures != b.Failures {
			return a.Failures < b.Failures
		}
		return a.since.Before(b.since)
	})
	return sc, nil
}

// RecordScan writes a scan's mark updates (tables first seen changed,
// pending work found due) into the fleet index, for a caller that scans
// with Scan and maintains the tables in need itself, one MaintainTable at
// a time (the fan-out compactor). Without it a table changed below its
// thresholds would look newly changed at every scan, and its wait bound
// (CompactMaxWait, PruneMaxWait) would never run out. Marks that tables'
// maintenance recorded since the scan are newer and kept (writeFleetIndex
// merges).
func (r *Runner) RecordScan(ctx context.Context, sc *FleetScan) error {
	r.defaults()
	if sc == nil || r.DryRun {
		return nil
	}
	var rep RunReport
	r.recordMarks(ctx, &rep, sc)
	if rep.IndexNote != "" {
		return errors.New(rep.IndexNote)
	}
	return nil
}

// MaintainTables maintains the given tables in order (whether or not they
// are in need) until the context's deadline minus the margin, each within
// TableTimeout, then writes the _stats rows that changed in one commit and
// records the tables' marks in the fleet index. A fan-out consumer calls it
// with the tables of its job.
func (r *Runner) MaintainTables(ctx context.Context, refs []TableRef) (RunReport, error) {
	r.defaults()
	return r.maintainBatch(ctx, refs, nil)
}

// MaintainNamed resolves table names through the catalog and maintains
// them as MaintainTables does. An unknown name is an error for that table
// only (reported, nothing done to it).
func (r *Runner) MaintainNamed(ctx context.Context, names ...string) (RunReport, error) {
	r.defaults()
	var refs []TableRef
	var rep RunReport
	for _, n := range names {
		ref, err := r.Catalog.Resolve(ctx, n)
		if err != nil {
			tr := TableReport{Table: n}
			tr.Fail(err)
			rep.Tables = append(rep.Tables, tr)
			continue
		}
		refs = append(refs, ref)
	}
	got, err := r.maintainBatch(ctx, refs, nil)
	got.Tables = append(rep.Tables, got.Tables...)
	return got, err
}

// maintainBatch is the body of Run and MaintainTables. sc, if not nil, is
// the scan the refs came from (its index and updates are reused).
func (r *Runner) maintainBatch(ctx context.Context, refs []TableRef, sc *FleetScan) (RunReport, error) {
	return r.maintainBatchOpt(ctx, refs, sc, true, true)
}

// maintainBatchOpt is maintainBatch; without runDeadline a table is started
// whatever time is left (MaintainTable alone: the compactor keeps its own
// margin, as it always did).
func (r *Runner) maintainBatchOpt(ctx context.Context, refs []TableRef, sc *FleetScan, runDeadline, record bool) (RunReport, error) {
	var rep RunReport
	// The tables' marks before this batch: a table whose compaction is
	// backing off is pruned without compaction. A scan has them; a batch
	// without one reads their shards (the base of its index write).
	var base *FleetIndex
	if sc != nil {
		base = sc.index
	} else if root, ok := r.indexRoot(); ok && !r.DryRun {
		var err error
		if base, err = fleet.ReadShards(ctx, r.Store, root, shardsOf(refs)); err != nil {
			r.Logger.WarnContext(ctx, "fleet index unreadable before maintenance", "err", err)
			base = nil
		}
	}
	// The scan's listed latest versions, by table (one map: a table's
	// look-up does not grow with the number of others).
	var listed map[string]listedLatest
	if sc != nil {
		listed = make(map[string]listedLatest, len(sc.Need))
		for _, n := range sc.Need {
			if n.listed.v > 0 {
				l := n.listed
				l.root = n.Ref.Root
				listed[n.Table] = l
			}
		}
	}
	for i, ref := range refs {
		if err := ctx.Err(); err != nil {
			rep.Stopped = err.Error()
			break
		}
		if dl, ok := ctx.Deadline(); ok && runDeadline && dl.Sub(r.Clock.Now()) < r.Margin {
			rep.Stopped = fmt.Sprintf("deadline: %d of %d tables done", i, len(refs))
			break
		}
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if r.TableTimeout > 0 {
			tctx, cancel = context.WithTimeout(ctx, r.TableTimeout)
		}
		var prev Mark
		if base != nil {
			if m, ok := base.Tables[ref.Name]; ok && m.Root == ref.Root {
				prev = m
			}
		}
		hint := listed[ref.Name]
		if hint.root != ref.Root {
			hint = listedLatest{}
		}
		tr, err := r.maintainOne(tctx, ref, prev, hint)
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
		rep.Tables = append(rep.Tables, tr)
		if r.Progress != nil {
			r.Progress(i+1, len(refs))
		}
	}
	if r.DryRun {
		return rep, nil
	}
	if !record {
		for i := range rep.Tables {
			rep.Tables[i].base = base
		}
		return rep, nil
	}
	r.recordBatch(ctx, &rep, sc, base)
	return rep, nil
}

// RecordTables writes what MaintainTable computed for the given reports:
// their _stats rows that changed (one commit) and their marks in the
// fleet index (one write per shard), on the marks MaintainTable read
// before (none read: their shards are read now). It returns the batch's
// report (StatsWritten, MarksWritten, IndexNote, and the tables with their
// failures and retry times).
func (r *Runner) RecordTables(ctx context.Context, reps ...TableReport) RunReport {
	r.defaults()
	rep := RunReport{Tables: append([]TableReport(nil), reps...)}
	if r.DryRun || len(reps) == 0 {
		return rep
	}
	r.recordBatch(ctx, &rep, nil, reps[0].base)
	return rep
}

// recordBatch writes a batch's stats rows and marks (after its context
// ended: within the margin).
func (r *Runner) recordBatch(ctx context.Context, rep *RunReport, sc *FleetScan, base *FleetIndex) {
	wctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.Margin)
		defer cancel()
	}
	r.writeStatsBatch(wctx, rep)
	r.recordMarksOn(wctx, rep, sc, base)
}

// shardsOf is the index shards of refs' marks, in order.
func shardsOf(refs []TableRef) []int {
	seen := map[int]bool{}
	var out []int
	for _, ref := range refs {
		if sh := FleetShardOf(ref.Name); !seen[sh] {
			seen[sh] = true
			out = append(out, sh)
		}
	}
	sort.Ints(out)
	return out
}

// writeStatsBatch writes the _stats rows of the maintained tables that
// changed, in one commit under the stats-writer lock (waiting at most
// StatsWait); unchanged rows are not written. A row not written is left to
// the table's next maintenance (its note says why).
func (r *Runner) writeStatsBatch(ctx context.Context, rep *RunReport) {
	var idx []int
	for i, tr := range rep.Tables {
		if tr.statsReady {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	note := func(s string) {
		for _, i := range idx {
			rep.Tables[i].StatsNote = s
		}
	}
	old, err := r.Catalog.Stats(ctx)
	if err != nil {
		old = nil // write every row
	}
	var rows []TableStats
	var rowIdx []int
	for _, i := range idx {
		s := rep.Tables[i].Stats
		o, had := old[s.Name]
		if s.LastCompaction.IsZero() {
			s.LastCompaction = o.LastCompaction
		}
		if s.LastCleanup.IsZero() {
			s.LastCleanup = o.LastCleanup
		}
		rep.Tables[i].Stats = s
		if had && reflect.DeepEqual(normStats(s), normStats(o)) {
			rep.Tables[i].StatsNote = "stats unchanged"
			continue
		}
		rows = append(rows, s)
		rowIdx = append(rowIdx, i)
	}
	idx = rowIdx
	if len(rows) == 0 {
		return
	}
	lease, err := r.Locker.Acquire(ctx, r.StatsLockName(), lock.AcquireOptions{Owner: r.Owner, Lease: time.Minute, MaxWait: r.StatsWait})
	if err != nil {
		note("stats left to the next run: " + err.Error())
		return
	}
	defer r.Locker.Release(context.WithoutCancel(ctx), lease)
	if b, ok := r.Catalog.(StatsBatchPutter); ok {
		err = b.PutStatsBatch(ctx, rows)
	} else {
		for _, s := range rows {
			if err = r.Catalog.PutStats(ctx, s); err != nil {
				break
			}
		}
	}
	if err != nil {
		note("stats not written: " + err.Error())
		return
	}
	rep.StatsWritten = len(rows)
}

// normStats is s with times in UTC at microsecond precision (as _stats
// stores them), for comparison.
func normStats(s TableStats) TableStats {
	n := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC().Truncate(time.Microsecond)
	}
	s.LastCompaction, s.LastCleanup = n(s.LastCompaction), n(s.LastCleanup)
	return s
}

// recordMarks writes the marks of a batch into the fleet index, with the
// scan's updates: one write per index shard touched. Failures are logged:
// without the marks the tables are simply maintained again at the next
// pass.
func (r *Runner) recordMarks(ctx context.Context, rep *RunReport, sc *FleetScan) {
	var base *FleetIndex
	if sc != nil {
		base = sc.index
	}
	r.recordMarksOn(ctx, rep, sc, base)
}

// recordMarksOn is recordMarks on base (the marks read before the batch;
// nil: read the shards of the batch's tables now).
func (r *Runner) recordMarksOn(ctx context.Context, rep *RunReport, sc *FleetScan, base *FleetIndex) {
	root, ok := r.indexRoot()
	if !ok {
		return
	}
	var keep func(string) bool
	var also []int
	updates := map[string]Mark{}
	if sc != nil {
		for n, m := range sc.updates {
			updates[n] = m
		}
		registered := make(map[string]bool, len(sc.refs))
		for _, ref := range sc.refs {
			registered[ref.Name] = true
		}
		keep = func(n string) bool { return registered[n] }
		// A damaged shard's next object replaces it; a shard holding marks
		// of tables no longer registered is rewritten without them.
		also = append(also, base.Damaged...)
		dropped := map[int]bool{}
		for n := range base.Tables {
			if !registered[n] && !dropped[FleetShardOf(n)] {
				dropped[FleetShardOf(n)] = true
				also = append(also, FleetShardOf(n))
			}
		}
	}
	if base == nil {
		var refs []TableRef
		for _, tr := range rep.Tables {
			if tr.ref.Root != "" {
				refs = append(refs, tr.ref)
			}
		}
		var err error
		if base, err = fleet.ReadShards(ctx, r.Store, root, shardsOf(refs)); err != nil {
			rep.IndexNote = "fleet index not written: " + err.Error()
			r.Logger.WarnContext(ctx, "fleet index unreadable; marks not recorded", "err", err)
			return
		}
	}
	now := r.Clock.Now()
	for i, tr := range rep.Tables {
		prev, known := base.Tables[tr.Table]
		switch {
		case tr.err != nil:
			if tr.ref.Root == "" {
				continue // unknown table: nothing to mark
			}
			m := fleet.Failed(tr.ref.Root, prev, known, tr.err, fleet.Backoff{Base: r.FailureBackoff, Max: r.FailureBackoffMax}, now)
			updates[tr.Table] = m
			rep.Tables[i].Failures, rep.Tables[i].RetryAt = m.Failures, m.RetryAt
		case tr.marked:
			m := tr.mark
			if known && prev.Root == m.Root {
				m = fleet.CarryCompactSince(m, prev, thresholds(tr.ref))
			}
			if sc == nil && !r.registeredPolicy(ctx, tr.ref) {
				// Maintained under another policy than the registry's (the
				// CLI's compaction-only pass keeps every version): what the
				// mark says is pending is not what a pass would do.
				m.Due, m.DueReason = now, "maintained with another policy"
			}
			updates[tr.Table] = m
		}
	}
	migrated := 0
	if sc != nil && len(base.Legacy()) > 0 {
		// The single index object of an earlier release: its marks move
		// into the shards, then it is deleted.
		for n, m := range base.Tables {
			if _, ok := updates[n]; !ok && keep(n) {
				updates[n] = m
				migrated++
			}
		}
	}
	if len(updates) == 0 && len(also) == 0 && (sc == nil || len(base.Legacy()) == 0) {
		if sc != nil {
			r.saveScanState(ctx, root, sc)
		}
		return
	}
	n, err := fleet.Write(ctx, r.Store, root, base, updates, also, keep, now)
	rep.MarksWritten = n - migrated
	if err != nil {
		rep.IndexNote = "fleet index not written: " + err.Error()
		r.Logger.WarnContext(ctx, "fleet index not (all) written; those tables will be maintained again", "err", err)
		return
	}
	if sc != nil {
		r.saveScanState(ctx, root, sc)
	}
	if sc != nil && len(base.Legacy()) > 0 {
		if err := fleet.DeleteLegacy(ctx, r.Store, base); err != nil {
			r.Logger.WarnContext(ctx, "single-object fleet index of an earlier release not deleted", "err", err)
		} else {
			r.Logger.InfoContext(ctx, "fleet index moved into shards", "marks", migrated, "old_objects_deleted", len(base.Legacy()))
		}
	}
}

// registeredPolicy reports whether ref is the catalog's registration of
// its table (same root and policy); false if it cannot tell.
func (r *Runner) registeredPolicy(ctx context.Context, ref TableRef) bool {
	reg, err := r.Catalog.Resolve(ctx, ref.Name)
	if err != nil {
		return false
	}
	return reg.Root == ref.Root && reg.Policy.WithDefaults() == ref.Policy.WithDefaults()
}
