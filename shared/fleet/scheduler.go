package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Scheduler runs a warehouse's fleet passes over a maintenance runner: the
// scan (one LIST per table, the safety-net windows), the order (most
// urgent first, failed tables last), the deadline, the _stats batch and
// the marks. The runner maintains one table at a time
// (maintenance.Runner.MaintainTableWith) and writes neither stats nor
// marks; its TableTimeout, FailureBackoff, FailureBackoffMax, Margin,
// Progress and DryRun apply to the passes, Options configure the scan.
type Scheduler struct {
	r *maintenance.Runner
	o Options
	// bases are the marks MaintainTable read before each table's
	// maintenance, by table, for RecordTables.
	mu    sync.Mutex
	bases map[string]*Index
}

// DefaultScanConcurrency is how many tables a scan lists at once.
const DefaultScanConcurrency = 64

// DefaultScanTimeout bounds one table's LIST in a scan.
const DefaultScanTimeout = 10 * time.Second

// Options configure a scheduler's scan.
type Options struct {
	// IndexRoot is the warehouse root holding the fleet index (its marks
	// let a pass skip idle tables). "": the catalog's Root(), if it has
	// one; "-": no index, Run maintains every table.
	IndexRoot string
	// Everything makes Run maintain every registered table, in need or
	// not (marks are still recorded).
	Everything bool
	// ScanConcurrency is how many tables a scan lists at once (default
	// DefaultScanConcurrency).
	ScanConcurrency int
	// ScanTimeout bounds one table's LIST in a scan (default
	// DefaultScanTimeout): a table whose listing hangs is in need, fails,
	// and backs off.
	ScanTimeout time.Duration
	// SafetyScanEvery, with S3 notifications on (a notified write is
	// maintained by the compaction queue), is the safety-net cadence: a
	// scan lists an unchanged table once per SafetyScanEvery, not at every
	// pass (docs/reliability.md "Safety-net scan"). 0 (the embedded default
	// and the CLI: no notifications): every pass lists every table.
	SafetyScanEvery time.Duration
	// Unnotified, with SafetyScanEvery, names the tables whose writes are
	// not notified (awsfn: the _stats table, which the notification path
	// ignores): they are listed at every pass.
	Unnotified func(maintenance.TableRef) bool
}

// New is the fleet scheduler of r, with o.
func New(r *maintenance.Runner, o Options) *Scheduler {
	r.SetDefaults()
	if o.ScanConcurrency <= 0 {
		o.ScanConcurrency = DefaultScanConcurrency
	}
	if o.ScanTimeout <= 0 {
		o.ScanTimeout = DefaultScanTimeout
	}
	return &Scheduler{r: r, o: o}
}

// rooted is a Catalog that knows its warehouse root (catalog.Catalog).
type rooted interface{ Root() string }

// thresholds is what of ref's policy the fleet's decision reads.
func thresholds(ref maintenance.TableRef) Thresholds {
	p := ref.Policy.WithDefaults()
	return Thresholds{CompactMinFragments: p.CompactMinFragments, CompactMaxWait: p.CompactMaxWait}
}

// backoff is the scheduler's failure backoff (ModePass's unless the
// runner sets another).
func (s *Scheduler) backoff() Backoff {
	return Backoff{Base: s.r.FailureBackoff, Max: s.r.FailureBackoffMax}
}

// TableNeed is one table a scan found in need, and why.
type TableNeed struct {
	Ref     maintenance.TableRef `json:"-"`
	Table   string               `json:"table"`
	Reasons []string             `json:"reasons"`
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
// and a time taken before that LIST was sent (maintenance.Listed), and
// the root listed.
type listedLatest struct {
	maintenance.Listed
	root string
}

// Scan is the result of Scheduler.Scan: which registered tables need
// maintenance. It costs one LIST per table, plus the registry and the
// fleet index read once.
type Scan struct {
	At         time.Time
	Tables     int         // registered tables scanned
	Need       []TableNeed // in the order to maintain them
	Idle       int         // unchanged, nothing due: skipped
	BackingOff int         // failed recently, waiting for their retry time
	// IndexError is set when the fleet index could not be read: every
	// table is then in need.
	IndexError string

	refs    []maintenance.TableRef
	index   *Index
	updates map[string]Mark // marks a scan changed (a change first seen)
	idle    *idleScan       // safety-net mode (maintenance.Runnes.o.SafetyScanEvery)
}

// Listed is how many tables the scan listed (one LIST each).
func (sc *Scan) Listed() int {
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
func (sc *Scan) Refs() []maintenance.TableRef { return sc.refs }

// indexRoot is the warehouse root the fleet index lives under.
func (s *Scheduler) indexRoot() (string, bool) {
	r := s.r
	switch {
	case s.o.IndexRoot == "-":
		return "", false
	case s.o.IndexRoot != "":
		return table.NormalizeRoot(s.o.IndexRoot), true
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
// Without a fleet index (maintenance.Runnes.o.IndexRoot "-", or a catalog
// with no root) every table is in need.
func (s *Scheduler) Scan(ctx context.Context) (*Scan, error) {
	r := s.r
	refs, err := r.Catalog.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	sc := &Scan{At: r.Clock.Now(), Tables: len(refs), refs: refs, updates: map[string]Mark{}}
	root, ok := s.indexRoot()
	if !ok {
		for _, ref := range refs {
			sc.Need = append(sc.Need, TableNeed{Ref: ref, Table: ref.Name, Reasons: []string{"no fleet index"}})
		}
		return sc, nil
	}
	if s.o.SafetyScanEvery > 0 {
		var sel func(Layout, int, uint64) bool
		sc.idle, sel = s.startIdleScan(ctx, root, refs, sc.At)
		sc.index, sc.idle.newest, err = ReadSel(ctx, r.Store, root, sel)
		if err == nil {
			sc.idle.init(sc.index.Layout)
		}
	} else {
		sc.index, err = Read(ctx, r.Store, root)
	}
	if err != nil {
		r.Logger.WarnContext(ctx, "fleet index unreadable: every table is in need", "err", err)
		sc.IndexError = err.Error()
		sc.index = NewIndex()
	} else if len(sc.index.Damaged) > 0 {
		// Their tables have no mark (in need); the pass's index write
		// replaces each damaged object with the next one.
		r.Logger.WarnContext(ctx, "fleet index shards unreadable: their tables are in need", "shards", sc.index.Damaged)
		sc.IndexError = fmt.Sprintf("%d fleet index shards unreadable: %v", len(sc.index.Damaged), sc.index.Damaged)
	}
	latest := make([]uint64, len(refs))
	errs := make([]error, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.o.ScanConcurrency)
	skipped := make([]bool, len(refs)) // safety-net mode: its shard unread, nothing due
	listed := make([]bool, len(refs))  // latest[i] is a LIST's answer sent after sc.At
	for i, ref := range refs {
		m, known := sc.index.Tables[ref.Name]
		if is := sc.idle; is != nil && sc.IndexError == "" {
			sh := sc.index.ShardOf(ref.Name)
			if _, read := sc.index.ReadShard(sh); !read && is.newest[sh] != 0 {
				skipped[i] = true
				continue
			}
			if known && !is.list[ShardOf(ref.Name, Shards)] && !s.unnotified(ref) {
				latest[i] = LatestOf(m) // not its window: no LIST
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
			lctx, cancel := context.WithTimeout(gctx, s.o.ScanTimeout)
			defer cancel()
			// The newest version known: a change already seen is not
			// listed in full again at every scan (a LatestProber's).
			latest[i], errs[i] = r.SourceLatest(lctx, ref, max(m.Latest, m.Seen))
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
		reasons, upd, changed := Decide(ref.Root, m, known, latest[i], errs[i], now, thresholds(ref))
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
				need.listed = listedLatest{Listed: maintenance.Listed{Version: latest[i], At: sc.At}} // sc.At: before every LIST of the scan
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
func (s *Scheduler) RecordScan(ctx context.Context, sc *Scan) error {
	r := s.r
	if sc == nil || r.DryRun {
		return nil
	}
	var rep RunReport
	s.recordMarks(ctx, &rep, sc)
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
func (s *Scheduler) MaintainTables(ctx context.Context, refs []maintenance.TableRef) (RunReport, error) {
	return s.maintainBatch(ctx, refs, nil)
}

// MaintainNamed resolves table names through the catalog and maintains
// them as MaintainTables does. An unknown name is an error for that table
// only (reported, nothing done to it).
func (s *Scheduler) MaintainNamed(ctx context.Context, names ...string) (RunReport, error) {
	r := s.r
	var refs []maintenance.TableRef
	var rep RunReport
	for _, n := range names {
		ref, err := r.Catalog.Resolve(ctx, n)
		if err != nil {
			tr := maintenance.TableReport{Table: n}
			tr.Fail(err)
			rep.Tables = append(rep.Tables, tr)
			continue
		}
		refs = append(refs, ref)
	}
	got, err := s.maintainBatch(ctx, refs, nil)
	got.Tables = append(rep.Tables, got.Tables...)
	return got, err
}

// maintainBatch is the body of Run and MaintainTables. sc, if not nil, is
// the scan the refs came from (its index and updates are reused).
func (s *Scheduler) maintainBatch(ctx context.Context, refs []maintenance.TableRef, sc *Scan) (RunReport, error) {
	return s.maintainBatchOpt(ctx, refs, sc, true, true)
}

// maintainBatchOpt is maintainBatch; without runDeadline a table is started
// whatever time is left (MaintainTable alone: the compactor keeps its own
// margin, as it always did).
func (s *Scheduler) maintainBatchOpt(ctx context.Context, refs []maintenance.TableRef, sc *Scan, runDeadline, record bool) (RunReport, error) {
	r := s.r
	var rep RunReport
	// The tables' marks before this batch: a table whose compaction is
	// backing off is pruned without compaction. A scan has them; a batch
	// without one reads their shards (the base of its index write).
	var base *Index
	if sc != nil {
		base = sc.index
	} else if root, ok := s.indexRoot(); ok && !r.DryRun {
		var err error
		if base, err = ReadFor(ctx, r.Store, root, namesOf(refs)); err != nil {
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
			if n.listed.Version > 0 {
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
		tr := r.MaintainTableWith(ctx, ref, maintenance.TableOptions{Prior: prev, Listed: hint.Listed, RetryAfter: s.backoff().Delay})
		rep.Tables = append(rep.Tables, tr)
		if r.Progress != nil {
			r.Progress(i+1, len(refs))
		}
	}
	if r.DryRun {
		return rep, nil
	}
	if !record {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.bases == nil {
			s.bases = map[string]*Index{}
		}
		for _, tr := range rep.Tables {
			s.bases[tr.Table] = base
		}
		return rep, nil
	}
	s.recordBatch(ctx, &rep, sc, base)
	return rep, nil
}

// MaintainTable maintains one table as a fan-out consumer does, on its
// mark before (its shard read; a compaction backing off is not tried),
// whatever time is left (the compactor keeps its own margin): it writes
// neither its stats row nor its mark (RecordTables, on this scheduler,
// does).
func (s *Scheduler) MaintainTable(ctx context.Context, ref maintenance.TableRef) (maintenance.TableReport, error) {
	if s.r.DryRun {
		return s.r.MaintainTable(ctx, ref)
	}
	br, _ := s.maintainBatchOpt(ctx, []maintenance.TableRef{ref}, nil, false, false)
	if len(br.Tables) == 0 {
		return maintenance.TableReport{Table: ref.Name}, fmt.Errorf("maintain %s: %s", ref.Name, br.Stopped)
	}
	tr := br.Tables[0]
	return tr, errors.Join(tr.Err(), tr.CompactErr())
}

// RecordTables writes what MaintainTable computed for the given reports:
// their _stats rows that changed (one commit) and their marks in the
// fleet index (one write per shard), on the marks MaintainTable read
// before (none read: their shards are read now). It returns the batch's
// report (StatsWritten, MarksWritten, IndexNote, and the tables with their
// failures and retry times).
func (s *Scheduler) RecordTables(ctx context.Context, reps ...maintenance.TableReport) RunReport {
	r := s.r
	rep := RunReport{Tables: append([]maintenance.TableReport(nil), reps...)}
	if r.DryRun || len(reps) == 0 {
		return rep
	}
	s.mu.Lock()
	base := s.bases[reps[0].Table]
	for _, tr := range reps {
		delete(s.bases, tr.Table)
	}
	s.mu.Unlock()
	s.recordBatch(ctx, &rep, nil, base)
	return rep
}

// recordBatch writes a batch's stats rows and marks (after its context
// ended: within the margin).
func (s *Scheduler) recordBatch(ctx context.Context, rep *RunReport, sc *Scan, base *Index) {
	r := s.r
	wctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.Margin)
		defer cancel()
	}
	s.writeStatsBatch(wctx, rep)
	s.recordMarksOn(wctx, rep, sc, base)
}

// namesOf is the names of refs.
func namesOf(refs []maintenance.TableRef) []string {
	out := make([]string, len(refs))
	for i, ref := range refs {
		out[i] = ref.Name
	}
	return out
}

// writeStatsBatch writes the _stats rows of the maintained tables that
// changed, in one commit under the stats-writer lock (waiting at most
// StatsWait); unchanged rows are not written. A row not written is left to
// the table's next maintenance (its note says why).
func (s *Scheduler) writeStatsBatch(ctx context.Context, rep *RunReport) {
	r := s.r
	var idx []int
	for i, tr := range rep.Tables {
		if tr.StatsReady() {
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
	var rows []maintenance.TableStats
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
	if b, ok := r.Catalog.(maintenance.StatsBatchPutter); ok {
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
func normStats(s maintenance.TableStats) maintenance.TableStats {
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
func (s *Scheduler) recordMarks(ctx context.Context, rep *RunReport, sc *Scan) {
	var base *Index
	if sc != nil {
		base = sc.index
	}
	s.recordMarksOn(ctx, rep, sc, base)
}

// recordMarksOn is recordMarks on base (the marks read before the batch;
// nil: read the shards of the batch's tables now).
func (s *Scheduler) recordMarksOn(ctx context.Context, rep *RunReport, sc *Scan, base *Index) {
	r := s.r
	root, ok := s.indexRoot()
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
			if sh := base.ShardOf(n); !registered[n] && !dropped[sh] {
				dropped[sh] = true
				also = append(also, sh)
			}
		}
	}
	if base == nil {
		var refs []maintenance.TableRef
		for _, tr := range rep.Tables {
			if tr.Ref().Root != "" {
				refs = append(refs, tr.Ref())
			}
		}
		var err error
		if base, err = ReadFor(ctx, r.Store, root, namesOf(refs)); err != nil {
			rep.IndexNote = "fleet index not written: " + err.Error()
			r.Logger.WarnContext(ctx, "fleet index unreadable; marks not recorded", "err", err)
			return
		}
	}
	now := r.Clock.Now()
	for i, tr := range rep.Tables {
		prev, known := base.Tables[tr.Table]
		m, marked := tr.NewMark()
		switch {
		case tr.Err() != nil:
			if tr.Ref().Root == "" {
				continue // unknown table: nothing to mark
			}
			m := Failed(tr.Ref().Root, prev, known, tr.Err(), s.backoff(), now)
			updates[tr.Table] = m
			rep.Tables[i].Failures, rep.Tables[i].RetryAt = m.Failures, m.RetryAt
		case marked:
			if known && prev.Root == m.Root {
				m = CarryCompactSince(m, prev, thresholds(tr.Ref()))
			}
			if sc == nil && !s.registeredPolicy(ctx, tr.Ref()) {
				// Maintained under another policy than the registry's (the
				// CLI's compaction-only pass keeps every version): what the
				// mark says is pending is not what a pass would do.
				m.Due, m.DueReason = now, "maintained with another policy"
			}
			updates[tr.Table] = m
		}
	}
	// A scheduled pass reshards when the fleet's size calls for another
	// number of shards (TargetShards, with hysteresis), or when the index
	// is still the single object of an earlier release (its marks move
	// into the new layout); the reshard writes every mark with the
	// updates. A new index's first layout is made by Write.
	target := 0
	if sc != nil {
		target = TargetShards(len(sc.refs), base.Layout.N)
		if base.Layout.N == 0 && len(base.Tables) == 0 && len(base.Legacy()) == 0 {
			target = 0 // a new index: Write makes its first layout (seal first)
		}
	}
	if target != 0 && target != base.Layout.N {
		n, err := Reshard(ctx, r.Store, root, base, updates, keep, target, now)
		if errors.Is(err, ErrReshardLost) {
			// Another pass resharded at once: write into its layout (the
			// next pass reshards again if the count is not the target).
			n, err = Write(ctx, r.Store, root, nil, updates, nil, keep, now)
		}
		rep.MarksWritten = n
		if err != nil {
			rep.IndexNote = "fleet index not written: " + err.Error()
			r.Logger.WarnContext(ctx, "fleet index not resharded; those tables will be maintained again", "err", err)
			return
		}
		r.Logger.InfoContext(ctx, "fleet index resharded", "from_shards", base.Layout.N, "from_gen", base.Layout.Gen,
			"shards", target, "tables", len(sc.refs), "legacy_objects_deleted", len(base.Legacy()))
		s.saveScanState(ctx, root, sc) // of the old layout: the next pass lists every table once
		return
	}
	if sc != nil && len(base.Stale()) > 0 {
		// Keys of an earlier layout a crash or a failed delete left.
		if err := DeleteStale(ctx, r.Store, base); err != nil {
			r.Logger.WarnContext(ctx, "earlier fleet index layout not deleted", "err", err)
		}
	}
	if len(updates) == 0 && len(also) == 0 {
		if sc != nil {
			s.saveScanState(ctx, root, sc)
		}
		return
	}
	n, err := Write(ctx, r.Store, root, base, updates, also, keep, now)
	rep.MarksWritten = n
	if err != nil {
		rep.IndexNote = "fleet index not written: " + err.Error()
		r.Logger.WarnContext(ctx, "fleet index not (all) written; those tables will be maintained again", "err", err)
		return
	}
	if sc != nil {
		s.saveScanState(ctx, root, sc)
	}
}

// registeredPolicy reports whether ref is the catalog's registration of
// its table (same root and policy); false if it cannot tell.
func (s *Scheduler) registeredPolicy(ctx context.Context, ref maintenance.TableRef) bool {
	r := s.r
	reg, err := r.Catalog.Resolve(ctx, ref.Name)
	if err != nil {
		return false
	}
	return reg.Root == ref.Root && reg.Policy.WithDefaults() == ref.Policy.WithDefaults()
}

// RunReport covers one scheduled run.
type RunReport struct {
	Tables  []maintenance.TableReport
	Stopped string // why the run ended before every table ("" if it did not)
	// Scan is the run's scan (nil when every table was maintained:
	// Everything, DryRun, or no fleet index).
	Scan *Scan `json:"-"`
	// Registered tables, and those skipped as idle or backing off.
	Registered, Idle, BackingOff int
	// StatsWritten is the _stats rows written (in one commit); MarksWritten
	// the marks recorded in the fleet index (in one write).
	StatsWritten, MarksWritten int
	IndexNote                  string // why the fleet index was not written
}

// Run maintains the registered tables in need (Scan), most urgent first and
// failed tables last, until the context's deadline minus the margin; then
// writes the changed _stats rows in one commit and the marks in the fleet
// index. With Everything or DryRun, or without a fleet index, every table
// is maintained, most in need by _stats first.
func (s *Scheduler) Run(ctx context.Context) (RunReport, error) {
	r := s.r
	_, indexed := s.indexRoot()
	if s.o.Everything || r.DryRun || !indexed {
		refs, err := r.Catalog.Tables(ctx)
		if err != nil {
			return RunReport{}, fmt.Errorf("list tables: %w", err)
		}
		stats, err := r.Catalog.Stats(ctx)
		if err != nil {
			r.Logger.WarnContext(ctx, "stats unreadable; maintaining in registry order", "err", err)
			stats = nil
		}
		need := func(ref maintenance.TableRef) int {
			s := stats[ref.Name]
			return s.Unreclaimed + s.SmallFrags
		}
		sort.SliceStable(refs, func(i, j int) bool { return need(refs[i]) > need(refs[j]) })
		rep, err := s.maintainBatch(ctx, refs, nil)
		rep.Registered = len(refs)
		return rep, err
	}
	sc, err := s.Scan(ctx)
	if err != nil {
		return RunReport{}, err
	}
	refs := make([]maintenance.TableRef, len(sc.Need))
	for i, n := range sc.Need {
		refs[i] = n.Ref
	}
	rep, err := s.maintainBatch(ctx, refs, sc)
	rep.Scan, rep.Registered, rep.Idle, rep.BackingOff = sc, sc.Tables, sc.Idle, sc.BackingOff
	r.Logger.InfoContext(ctx, "fleet pass", "registered", sc.Tables, "in_need", len(sc.Need), "idle", sc.Idle,
		"backing_off", sc.BackingOff, "maintained", len(rep.Tables), "stats_written", rep.StatsWritten,
		"marks_written", rep.MarksWritten, "stopped", rep.Stopped)
	return rep, err
}

// Idle tables with S3 notifications on (issue 23 point 4; docs/format.md
// "Scan state", docs/reliability.md "Safety-net scan").
//
// With maintenance.Runnes.o.SafetyScanEvery = S > 0 a notified write
// maintains its table (the compaction queue), so the scheduled scan need not
// list an unchanged table at every pass. Instead each table has a slot,
// ShardOf(name, 256) whatever the index's layout, and each slot a phase,
// slot*S/256; a pass lists the tables of the slots whose phase point (phase + k*S)
// falls in the window (last, now], last being the end of the previous
// pass's window (the scan state, one small object). Windows chain, so every
// table is listed once per S, about 1/N of the fleet a pass (N = S / the
// pass interval), never all at once. The scan state also summarises each
// shard as last read (its newest seq, the earliest time one of its marks
// is due without a change, a digest of its tables), so a pass GETs only
// the shards that changed, whose tables changed in the registry, that are
// due, or that hold a slot of the window (a shard of n holds the slots
// congruent to it modulo n).

// idleScan is a scan's safety-net bookkeeping.
type idleScan struct {
	every time.Duration
	last  time.Time // zero: no usable state (every shard is listed)
	prev  *ScanState
	// newest is each shard's newest seq as listed.
	newest map[int]uint64
	list   map[int]bool // slots (ShardOf(name, Shards)) whose tables this pass lists
	// Listed is how many tables the pass listed.
	listed int

	// Set by init, once the layout is known: the shards holding a slot of
	// the window, those holding an unnotified table, the registry's digest
	// of each, and the state's summaries if of the layout.
	ready      bool
	refs       []maintenance.TableRef
	unnotified func(maintenance.TableRef) bool
	listShard  map[int]bool
	always     map[int]bool
	reg        map[int]string
	sums       map[string]ShardSummary
}

// digestItem is one table's contribution to a shard digest.
func digestItem(name, root string, p *maintenance.Policy) uint64 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(root))
	h.Write([]byte{0})
	if p == nil {
		h.Write([]byte("unregistered"))
	} else {
		b, _ := json.Marshal(p.WithDefaults())
		h.Write(b)
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func digestString(sum uint64, n int) string { return fmt.Sprintf("%d:%016x", n, sum) }

// registryDigests is each shard's digest of its registered tables.
func registryDigests(refs []maintenance.TableRef, n int) map[int]string {
	sums, counts := map[int]uint64{}, map[int]int{}
	for _, ref := range refs {
		sh := ShardOf(ref.Name, n)
		p := ref.Policy
		sums[sh] += digestItem(ref.Name, ref.Root, &p)
		counts[sh]++
	}
	out := make(map[int]string, len(sums))
	for sh, s := range sums {
		out[sh] = digestString(s, counts[sh])
	}
	return out
}

// summarise is the summary of shard s as read, against the registry.
func summarise(s *Shard, byName map[string]maintenance.TableRef) ShardSummary {
	var sum uint64
	var wake time.Time
	first := true
	for n, m := range s.Tables {
		ref, ok := byName[n]
		if !ok {
			sum += digestItem(n, m.Root, nil)
			continue
		}
		p := ref.Policy
		sum += digestItem(n, m.Root, &p)
		if w := Wake(m, thresholds(ref)); first || w.Before(wake) {
			wake, first = w, false
		}
	}
	if first {
		wake = time.Unix(1<<62, 0) // no mark: never due
	}
	return ShardSummary{Seq: s.Seq, Wake: wake, Digest: digestString(sum, len(s.Tables))}
}

// unnotified reports whether ref's writes are not notified (listed at
// every pass).
func (s *Scheduler) unnotified(ref maintenance.TableRef) bool {
	return s.o.Unnotified != nil && s.o.Unnotified(ref)
}

// startIdleScan reads the scan state and returns the selector that, once
// the index's layout is listed, decides which shards the pass lists
// (their phase point in the window) and which it reads.
func (s *Scheduler) startIdleScan(ctx context.Context, root string, refs []maintenance.TableRef, now time.Time) (*idleScan, func(Layout, int, uint64) bool) {
	r := s.r
	is := &idleScan{every: s.o.SafetyScanEvery, list: map[int]bool{}, refs: refs, unnotified: s.unnotified}
	st, err := ReadScanState(ctx, r.Store, root, is.every)
	if err != nil {
		r.Logger.WarnContext(ctx, "scan state unreadable: every table is listed", "err", err)
	}
	if st != nil && st.At.After(now.Add(MaxScanStateSkew)) {
		r.Logger.WarnContext(ctx, "scan state ahead of this clock: every table is listed", "at", st.At, "now", now)
		st = nil
	}
	sel := func(l Layout, sh int, newest uint64) bool {
		is.init(l)
		if is.sums == nil || is.listShard[sh] || is.always[sh] {
			return true
		}
		sum, ok := is.sums[fmt.Sprintf("%02x", sh)]
		return !ok || sum.Seq != newest || sum.Digest != is.reg[sh] || !now.Before(sum.Wake)
	}
	if st != nil {
		is.prev, is.last = st, st.At
	}
	for slot := range Shards {
		is.list[slot] = InSafetyWindow(slot, is.last, now, is.every)
	}
	return is, sel
}

// init decides, once per scan, which shards of layout l hold a slot of
// the window (a shard of n holds the slots congruent to it modulo n), and
// whether the state's summaries are of l (not after a reshard: every
// shard is read once).
func (is *idleScan) init(l Layout) {
	if is.ready {
		return
	}
	is.ready = true
	if is.prev != nil && is.prev.Of(l) {
		is.sums = is.prev.Shards
	}
	n := max(l.N, 1)
	is.listShard = map[int]bool{}
	for slot, in := range is.list {
		if in {
			is.listShard[slot%n] = true
		}
	}
	is.always = map[int]bool{}
	for _, ref := range is.refs {
		if is.unnotified(ref) {
			is.always[ShardOf(ref.Name, n)] = true
		}
	}
	is.reg = registryDigests(is.refs, n)
}

// saveScanState writes the scan state after a scan whose marks were
// recorded: its window's end (never before the previous one) and the
// summaries of the shards it read (the others' carried over). A write that
// fails leaves the previous state: the next pass's window then starts
// earlier, which lists more, never less.
func (s *Scheduler) saveScanState(ctx context.Context, root string, sc *Scan) {
	r := s.r
	is := sc.idle
	if is == nil || sc.IndexError != "" {
		return
	}
	l := sc.index.Layout
	st := &ScanState{At: sc.At, Every: int64(is.every), Shards: map[string]ShardSummary{}, Gen: l.Gen}
	if l != Legacy256 {
		st.N = l.N
	}
	if is.last.After(st.At) {
		st.At = is.last
	}
	byName := make(map[string]maintenance.TableRef, len(sc.refs))
	for _, ref := range sc.refs {
		byName[ref.Name] = ref
	}
	damaged := map[int]bool{}
	for _, sh := range sc.index.Damaged {
		damaged[sh] = true
	}
	shards := make([]int, 0, len(is.newest))
	for sh := range is.newest {
		shards = append(shards, sh)
	}
	sort.Ints(shards)
	for _, sh := range shards {
		key := fmt.Sprintf("%02x", sh)
		if s, ok := sc.index.ReadShard(sh); ok {
			if !damaged[sh] {
				st.Shards[key] = summarise(s, byName)
			}
		} else if is.sums != nil {
			if old, ok := is.sums[key]; ok {
				st.Shards[key] = old
			}
		}
	}
	if err := WriteScanState(ctx, r.Store, root, st); err != nil {
		r.Logger.WarnContext(ctx, "scan state not written; the next pass lists from the previous window", "err", err)
	}
}
