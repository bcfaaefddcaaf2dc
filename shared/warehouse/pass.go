package warehouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// Steps are the maintenance steps a pass runs.
type Steps struct {
	Compact bool // compaction (under the table's lock)
	Prune   bool // retention floor, cleanup ranges (under the lock) and their cleanup
	Sweep   bool // unreferenced files older than the grace window
}

// AllSteps is a whole pass (what a zero PassOptions.Steps means).
var AllSteps = Steps{Compact: true, Prune: true, Sweep: true}

// PassOptions configure one maintenance pass.
type PassOptions struct {
	// DryRun changes nothing and reports the plans.
	DryRun bool
	// Exactly maintains Tables, in that order (_stats first), whether in
	// need or not (fleet.Scheduler.MaintainTables), and sweeps them all: the CLI's
	// pass over the tables it names. Otherwise the pass is the fleet scheduler's Run
	// (the tables in need, most urgent first; every table with Everything
	// or DryRun) and sweeps the tables it maintained.
	Exactly bool
	Tables  []maintenance.TableRef
	// Everything: Run maintains and sweeps every registered table, in need
	// or not (fleet.Options.Everything).
	Everything bool
	// Steps are the steps the pass runs (zero: AllSteps). A pass without
	// Prune plans no pruning (with Exactly: a policy keeping every version).
	Steps Steps
	// SweepMax bounds deletes per table per sweep (0: no bound).
	SweepMax int
	// SweepTables is how many tables are swept at once (0: 1).
	SweepTables int
	// Metrics, if set, receives the pass's metrics, flushed (one EMF line)
	// at its end.
	Metrics *telemetry.Metrics
	// Progress, if set, shows progress over tables and cleanup messages
	// (see shared/progress: a terminal's stderr, or nothing).
	Progress func(desc string, total int) progress.Bar
	// Owner overrides the warehouse's lock owner.
	Owner string
	// Detail: the dry run also reports each table's kept versions and what
	// compaction leaves for the next pass (one table open each).
	Detail bool
	// ErrorText, if set, rewrites a table's error of a step ("maintain" or
	// "sweep") for the report (e.g. one line, or the reason and the fix).
	ErrorText func(ctx context.Context, step string, ref maintenance.TableRef, err error) string
}

func (o PassOptions) progress(desc string, total int) progress.Bar {
	if o.Progress == nil {
		return progress.New(io.Discard, desc, total)
	}
	return o.Progress(desc, total)
}

func (o PassOptions) errorText(ctx context.Context, step string, ref maintenance.TableRef, err error) string {
	if o.ErrorText == nil {
		return err.Error()
	}
	return o.ErrorText(ctx, step, ref, err)
}

// Cleaned is what the in-process cleanup deleted for one table.
type Cleaned struct {
	Versions int
	Keys     int
	Bytes    int64
}

// Report is one pass: what was (or, dry, would be) done per table.
type Report struct {
	Run fleet.RunReport
	// Dry run: what the cleaner would delete per range (read from the
	// change records), and with Detail the kept versions and what
	// compaction leaves for the next pass (groups, fragments), by table.
	Cleanup  map[string][]maintenance.RangePlan
	Kept     map[string][]maintenance.Kept
	Leftover map[string][2]int
	// Real run: what the in-process cleanup deleted, by table; or the
	// ranges left on the deployment's queue.
	Cleaned  map[string]*Cleaned
	Enqueued int
	Drain    queue.DrainStats
	Sweeps   map[string]maintenance.SweepResult
	// Errors is each failed table's error (compaction, prune plan, cleanup
	// plan or sweep): one table's failure does not stop the others'.
	Errors  map[string]string
	Elapsed time.Duration
	// Formats: the registered format of each table of the pass ("" is
	// tablekeep's).
	Formats map[string]string
	// Steps are the steps the pass ran.
	Steps Steps
}

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

// ErrTablesFailed is what Pass returns, after every table was attempted,
// when some failed (Report.Errors says which and why).
var ErrTablesFailed = errors.New("maintenance failed for some tables")

// noGroups plans no compaction (the prune step alone).
type noGroups struct{}

func (noGroups) Plan(m *table.Manifest, _ maintenance.Policy) maintenance.CompactionPlan {
	return maintenance.CompactionPlan{Version: m.Version}
}

// Pass runs one maintenance pass with the library the Lambda functions
// run: the runner (lock, compact, plan and apply pruning, stats) per
// table, then the cleaner over the ranges (in-process; or, with a Remote
// queue, the deployment's cleaner), then the orphan sweep. With DryRun it
// changes nothing and reports the plan: compaction groups, prune ranges,
// what the cleaner would delete for each range, and what the sweep would.
func (w *Warehouse) Pass(ctx context.Context, o PassOptions) (Report, error) {
	start := w.Clock.Now()
	if o.Steps == (Steps{}) {
		o.Steps = AllSteps
	}
	rep := Report{Sweeps: map[string]maintenance.SweepResult{}, Steps: o.Steps}
	refs := o.Tables
	if !o.Exactly {
		var err error
		if refs, err = w.Catalog.Tables(ctx); err != nil {
			return rep, err
		}
	}
	rep.Formats = map[string]string{}
	for _, ref := range refs {
		rep.Formats[ref.Name] = ref.Format
	}
	if o.Exactly {
		// _stats first: every table maintained writes its _stats row, so
		// maintained later, _stats would have versions its dry run did not
		// see. First, its dry run plans exactly what the real run does.
		refs = slices.Clone(refs)
		slices.SortStableFunc(refs, func(a, b maintenance.TableRef) int {
			return cmpBool(b.Name == catalog.StatsName, a.Name == catalog.StatsName)
		})
	}
	if o.Steps.Compact || o.Steps.Prune {
		if err := w.maintain(ctx, &rep, refs, o); err != nil {
			return rep, err
		}
	}
	var drainErr error
	switch {
	case o.DryRun:
		w.planCleanup(ctx, &rep, refs, o)
	case w.Remote != nil:
		for _, tr := range rep.Run.Tables {
			rep.Enqueued += len(tr.Prune.Ranges)
		}
	default:
		if drainErr = w.drain(ctx, &rep, o); drainErr != nil {
			// The queue, not a table, failed: the sweeps still run.
			w.Logger.ErrorContext(ctx, "cleanup drain failed", "err", drainErr)
			drainErr = fmt.Errorf("drain cleanup queue: %w", drainErr)
		}
	}
	if o.Steps.Sweep {
		sweep := refs
		if !o.Exactly {
			sweep = sweepRefs(refs, rep.Run)
		}
		w.sweep(ctx, &rep, sweep, o)
		if err := ctx.Err(); err != nil {
			return rep, errors.Join(drainErr, err)
		}
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

// maintain runs the runner over refs (Exactly) or its scan, in one batch
// as the fleet pass runs it: every table under its lock, then the changed
// _stats rows in one commit (one _stats version per pass, not one per
// table).
func (w *Warehouse) maintain(ctx context.Context, rep *Report, refs []maintenance.TableRef, o PassOptions) error {
	r := w.NewRunner(Options{Owner: o.Owner, DryRun: o.DryRun, Metrics: o.Metrics})
	if !o.Steps.Compact {
		r.Compactor.Planner = noGroups{}
	}
	// A prune-only pass leaves datasets of other formats uncompacted too.
	r.NoSourceCompaction = !o.Steps.Compact
	var run []maintenance.TableRef
	if o.Exactly {
		for _, ref := range refs {
			if !o.Steps.Prune {
				// Compaction alone: a policy keeping every version plans
				// no pruning (the floor never falls).
				ref.Policy = ref.Policy.WithDefaults()
				ref.Policy.KeepLast = math.MaxInt32
			}
			run = append(run, ref)
		}
	}
	bar := o.progress("maintain", len(refs))
	if len(run) > 0 {
		describe(bar, "maintain "+run[0].Name)
	}
	done := 0
	r.Progress = func(n, _ int) {
		_ = bar.Add(n - done)
		done = n
		if n < len(run) {
			describe(bar, "maintain "+run[n].Name)
		}
	}
	var br fleet.RunReport
	var err error
	if o.Exactly {
		br, err = fleet.New(r, fleet.Options{}).MaintainTables(ctx, run)
	} else {
		br, err = fleet.New(r, fleet.Options{Everything: o.Everything}).Run(ctx)
	}
	_ = bar.Finish()
	byName := map[string]maintenance.TableRef{}
	for _, ref := range refs {
		byName[ref.Name] = ref
	}
	rep.Run = br
	rep.Run.Tables = nil
	for _, tr := range br.Tables {
		if tr.Outcome == maintenance.Failed {
			msg := tr.Error
			if o.ErrorText != nil {
				msg = o.ErrorText(ctx, "maintain", byName[tr.Table], errors.New(msg))
				tr.Fail(errors.New(msg))
			}
			rep.fail(tr.Table, errors.New(msg))
		}
		rep.Run.Tables = append(rep.Run.Tables, tr)
	}
	if err != nil {
		return err
	}
	if br.Stopped != "" {
		return fmt.Errorf("maintenance stopped: %s", br.Stopped)
	}
	return nil
}

// sweepRefs are the tables a Run pass sweeps: every table when the run
// maintained every table (Everything, DryRun, no fleet index), else those
// it maintained (in need: changed, due, or at their periodic full check).
// An idle table is swept when the scan next finds it in need: at its next
// write, or its full check, at most Policy.FullCheckEvery away.
func sweepRefs(refs []maintenance.TableRef, run fleet.RunReport) []maintenance.TableRef {
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

// sweep sweeps refs, o.SweepTables at a time (each a chain of listings and
// reads, independent of the others').
func (w *Warehouse) sweep(ctx context.Context, rep *Report, refs []maintenance.TableRef, o PassOptions) {
	s := w.NewSweeper(Options{DryRun: o.DryRun, Metrics: o.Metrics, MaxDeletes: o.SweepMax})
	bar := o.progress("sweep", len(refs))
	defer func() { _ = bar.Finish() }()
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(max(1, o.SweepTables))
	for _, ref := range refs {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			mu.Lock()
			describe(bar, "sweep "+ref.Name)
			mu.Unlock()
			sr, err := s.Sweep(ctx, ref)
			mu.Lock()
			defer mu.Unlock()
			rep.Sweeps[ref.Name] = sr
			if err != nil {
				rep.fail(ref.Name, fmt.Errorf("sweep: %s", o.errorText(ctx, "sweep", ref, err)))
			}
			_ = bar.Add(1)
			return nil
		})
	}
	_ = g.Wait()
}

// drain runs the cleaner over the in-process queue until it is empty, as
// one Lambda cleaner invocation does (maintenance.LocalMessagesInFlight
// messages at a time, sharing the cleaner's limiters), counting what it
// deleted per table. Continuations a message sends back are drained too.
func (w *Warehouse) drain(ctx context.Context, rep *Report, o PassOptions) error {
	ranges := 0
	for _, tr := range rep.Run.Tables {
		ranges += len(tr.Prune.Ranges)
	}
	rep.Cleaned = map[string]*Cleaned{}
	if ranges == 0 {
		return nil
	}
	cl := w.NewCleaner(Options{Metrics: o.Metrics})
	bar := o.progress("cleanup", ranges)
	defer func() { _ = bar.Finish() }()
	var mu sync.Mutex
	h := func(ctx context.Context, body []byte) error {
		res, err := cl.Clean(ctx, body)
		mu.Lock()
		defer mu.Unlock()
		c := rep.Cleaned[res.Table]
		if c == nil {
			c = &Cleaned{}
			rep.Cleaned[res.Table] = c
		}
		c.Versions += res.VersionsDeleted
		c.Keys += res.DataKeys + res.ManifestKeys
		c.Bytes += res.Bytes
		_ = bar.Add(1)
		return err
	}
	for {
		// Each receiver takes one message at a time and stops when it finds
		// the queue empty; a continuation sent after a receiver stopped is
		// found by the next round, which runs until a round receives nothing.
		var g errgroup.Group
		received := 0
		for range maintenance.LocalMessagesInFlight {
			g.Go(func() error {
				st, err := queue.Drain(ctx, w.Queue, h, queue.DrainOptions{Logger: w.Logger, MaxReceives: 5, BatchSize: 1})
				mu.Lock()
				defer mu.Unlock()
				received += st.Received
				rep.Drain.Received += st.Received
				rep.Drain.Succeeded += st.Succeeded
				rep.Drain.Failed += st.Failed
				rep.Drain.DeadLettered += st.DeadLettered
				return err
			})
		}
		if err := g.Wait(); err != nil || received == 0 {
			return err
		}
	}
}

// planCleanup fills the dry run's cleanup plans (what the cleaner would
// delete for each range, read from the change records, sizes from
// listings) and, with Detail, the kept versions and the compaction
// leftover. A table that fails is reported in rep.Errors; the others are
// still planned.
//
// Reading the change records of a long backlog takes a while (20,000
// versions: seconds on disk, longer at S3 latency): a bar counts the
// versions whose records are read, naming the table and range.
func (w *Warehouse) planCleanup(ctx context.Context, rep *Report, refs []maintenance.TableRef, o PassOptions) {
	total := 0
	for _, tr := range rep.Run.Tables {
		if tr.Skipped != "" {
			continue
		}
		for _, rg := range tr.Prune.Ranges {
			total += int(rg.To - rg.From + 1)
		}
	}
	bar := o.progress("plan cleanup", total)
	defer func() { _ = bar.Finish() }()
	progressed := func(rg maintenance.RangeMessage) { _ = bar.Add(int(rg.To - rg.From + 1)) }
	rep.Cleanup = map[string][]maintenance.RangePlan{}
	if o.Detail {
		rep.Kept = map[string][]maintenance.Kept{}
		rep.Leftover = map[string][2]int{}
	}
	byName := map[string]maintenance.TableRef{}
	for _, ref := range refs {
		byName[ref.Name] = ref
	}
	for _, tr := range rep.Run.Tables {
		if tr.Skipped != "" {
			continue
		}
		if o.Detail && o.Steps.Prune { // compaction alone plans no pruning: no kept versions to explain
			rep.Kept[tr.Table] = tr.Prune.Kept()
		}
		if !o.Detail && len(tr.Prune.Ranges) == 0 {
			continue
		}
		// Itemised from the change records the dry run read (or derived,
		// in memory) on the table's Source.
		ref := byName[tr.Table]
		if tr.Source == nil {
			continue
		}
		if tb, ok := tr.Source.(maintenance.TableBacked); ok && o.Detail && tb.Table().Cached() != nil {
			g, f := maintenance.CompactionLeftover(tb.Table().Cached(), ref.Policy, tr.Compaction)
			rep.Leftover[tr.Table] = [2]int{g, f}
		}
		for _, rg := range tr.Prune.Ranges {
			describe(bar, fmt.Sprintf("plan cleanup %s %d-%d", tr.Table, rg.From, rg.To))
			rp, err := maintenance.PlanRange(ctx, tr.Source, rg, 0)
			progressed(rg)
			if err != nil {
				rep.fail(tr.Table, fmt.Errorf("plan cleanup [%d, %d]: %w", rg.From, rg.To, err))
				break
			}
			rp.Sizes(ctx, w.Store, ref.Root, 0)
			rep.Cleanup[tr.Table] = append(rep.Cleanup[tr.Table], rp)
		}
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// describe names what a terminal's progress bar is working on (the table
// of a long step), where the bar can say it.
func describe(bar progress.Bar, what string) {
	if d, ok := bar.(interface{ Describe(string) }); ok {
		d.Describe(what)
	}
}
