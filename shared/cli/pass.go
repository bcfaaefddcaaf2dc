package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// steps are the maintenance steps a pass runs.
type steps struct {
	Compact bool // compaction (under the table's lock)
	Prune   bool // retention floor, cleanup ranges (under the lock) and their cleanup
	Sweep   bool // unreferenced files older than the grace window
}

var allSteps = steps{Compact: true, Prune: true, Sweep: true}

// passOptions configure one maintenance pass.
type passOptions struct {
	DryRun   bool
	Tables   []string // registered names; empty: every registered table
	Steps    steps
	Progress func(desc string, total int) progress.Bar
}

func (o passOptions) progress(desc string, total int) progress.Bar {
	if o.Progress == nil {
		return progress.New(io.Discard, desc, total)
	}
	return o.Progress(desc, total)
}

// cleaned is what the in-process cleanup deleted for one table.
type cleaned struct {
	Versions int
	Keys     int
	Bytes    int64
}

// passReport is one pass: what was (or, dry, would be) done per table.
type passReport struct {
	Run maintenance.RunReport
	// Dry run: what the cleaner would delete per range, the kept versions
	// and what compaction leaves for the next pass, by table.
	Cleanup  map[string][]maintenance.RangePlan
	Kept     map[string][]maintenance.Kept
	Leftover map[string][2]int // compaction groups, fragments
	// Real run: what the in-process cleanup deleted, by table; or the
	// ranges sent to the deployment's queue.
	Cleaned  map[string]*cleaned
	Enqueued int
	Drain    queue.DrainStats
	Sweeps   map[string]maintenance.SweepResult
	Errors   map[string]string
	Elapsed  time.Duration
	// Formats: the registered format of each table of the pass ("" is
	// tablekeep's).
	Formats map[string]string
	// Steps are the steps the pass ran.
	Steps steps
}

func (r *passReport) fail(table string, err error) {
	if r.Errors == nil {
		r.Errors = map[string]string{}
	}
	if prev, ok := r.Errors[table]; ok {
		r.Errors[table] = prev + "; " + err.Error()
		return
	}
	r.Errors[table] = err.Error()
}

// errTablesFailed is returned, after every table was attempted, when some
// failed (passReport.Errors says which and why).
var errTablesFailed = errors.New("maintenance failed for some tables")

// noGroups plans no compaction (the prune step alone).
type noGroups struct{}

func (noGroups) Plan(m *table.Manifest, _ maintenance.Policy) maintenance.CompactionPlan {
	return maintenance.CompactionPlan{Version: m.Version}
}

// pass runs maintenance over the warehouse with the library the Lambda
// functions run: the compactor's Runner (lock, compact, plan and apply
// pruning, stats) per table, the cleaner over the ranges (in-process, or
// the deployment's cleaner through its queue) and the sweeper's sweep.
func (w *whouse) pass(ctx context.Context, o passOptions) (passReport, error) {
	start := w.Clock.Now()
	rep := passReport{Sweeps: map[string]maintenance.SweepResult{}, Steps: o.Steps}
	refs, err := w.refs(ctx, o.Tables)
	if err != nil {
		return rep, err
	}
	rep.Formats = map[string]string{}
	for _, ref := range refs {
		rep.Formats[ref.Name] = ref.Format
	}
	// _stats first: every table maintained writes its _stats row, so
	// maintained later, _stats would have versions its dry run did not see.
	// First, its dry run plans exactly what the real run does.
	slices.SortStableFunc(refs, func(a, b maintenance.TableRef) int {
		return cmpBool(b.Name == catalog.StatsName, a.Name == catalog.StatsName)
	})
	var enq maintenance.Enqueuer = maintenance.QueueEnqueuer{Q: w.Local}
	if w.Remote != nil {
		enq = maintenance.QueueEnqueuer{Q: w.Remote}
	}
	host, _ := os.Hostname()
	comp := maintenance.NewCompactor(w.Logger, w.Clock.Now)
	if !o.Steps.Compact {
		comp.Planner = noGroups{}
	}
	r := &maintenance.Runner{
		Store: w.Store, Catalog: w.Catalog, Locker: w.Locker, Queue: enq, Compactor: comp,
		Clock: w.Clock, Logger: w.Logger, Owner: fmt.Sprintf("cli/%s/%d", host, os.Getpid()), DryRun: o.DryRun,
		Lease: w.Lease, LockWait: w.LockWait, LockNamespace: w.LockNamespace,
		Sources: formats.Open, // registered Lance datasets: compacted (page splicing) and pruned
		// A prune-only pass leaves Lance datasets uncompacted too.
		NoSourceCompaction: !o.Steps.Compact,
	}
	if o.Steps.Compact || o.Steps.Prune {
		// One batch, as the fleet pass runs it: every table under its lock,
		// then the changed _stats rows in one commit (one _stats version
		// per pass, not one per table).
		bar := o.progress("maintain", len(refs))
		var run []maintenance.TableRef
		for _, ref := range refs {
			if !o.Steps.Prune {
				// Compaction alone: a policy keeping every version plans
				// no pruning (the floor never falls).
				ref.Policy = ref.Policy.WithDefaults()
				ref.Policy.KeepLast = math.MaxInt32
			}
			run = append(run, ref)
		}
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
		br, err := r.MaintainTables(ctx, run)
		for _, tr := range br.Tables {
			if msg, failed := strings.CutPrefix(tr.Skipped, "error: "); failed {
				w.Logger.ErrorContext(ctx, "maintenance failed", "table", tr.Table, "err", msg)
				ref := refByName(run, tr.Table)
				if why := restoreBlocked(ctx, w.Store, ref.Root, errors.New(msg)); why != "" {
					msg = why
				} else {
					msg = sdkOneLine(errors.New(msg))
				}
				tr.Skipped = "error: " + msg
				rep.fail(tr.Table, errors.New(msg))
			}
			rep.Run.Tables = append(rep.Run.Tables, tr)
		}
		if err != nil {
			return rep, err
		}
		if br.Stopped != "" {
			return rep, fmt.Errorf("maintenance stopped: %s", br.Stopped)
		}
		_ = bar.Finish()
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
			w.Logger.ErrorContext(ctx, "cleanup drain failed", "err", drainErr)
			drainErr = fmt.Errorf("drain cleanup queue: %w", drainErr)
		}
	}
	if o.Steps.Sweep {
		bar := o.progress("sweep", len(refs))
		for _, ref := range refs {
			if err := ctx.Err(); err != nil {
				return rep, errors.Join(drainErr, err)
			}
			describe(bar, "sweep "+ref.Name)
			sr, err := maintenance.SweepTable(ctx, w.Store, ref, maintenance.SweepOptions{
				Now: w.Clock.Now(), DryRun: o.DryRun, Logger: w.Logger, Clock: w.Clock.Now, Table: w.tableOptions(),
				Sources: formats.Open, // Lance datasets: SweepSourceFiles
			})
			rep.Sweeps[ref.Name] = sr
			if err != nil {
				rep.fail(ref.Name, fmt.Errorf("sweep: %s", sdkOneLine(err)))
			}
			_ = bar.Add(1)
		}
		_ = bar.Finish()
	}
	rep.Elapsed = w.Clock.Now().Sub(start)
	if len(rep.Errors) > 0 {
		var msgs []string
		for _, name := range slices.Sorted(maps.Keys(rep.Errors)) {
			msgs = append(msgs, name+": "+rep.Errors[name])
		}
		return rep, errors.Join(drainErr, fmt.Errorf("%w: %s", errTablesFailed, strings.Join(msgs, "; ")))
	}
	return rep, drainErr
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

// refByName is the ref called name in refs (zero if none).
func refByName(refs []maintenance.TableRef, name string) maintenance.TableRef {
	for _, ref := range refs {
		if ref.Name == name {
			return ref
		}
	}
	return maintenance.TableRef{}
}

// refs returns the registered tables named (all, in registry order, if none).
func (w *whouse) refs(ctx context.Context, names []string) ([]maintenance.TableRef, error) {
	if len(names) == 0 {
		return w.Catalog.Tables(ctx)
	}
	var out []maintenance.TableRef
	for _, n := range names {
		ref, err := w.resolve(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, ref)
	}
	return out, nil
}

// drain runs the cleaner over the in-process queue until it is empty,
// counting what it deleted per table.
func (w *whouse) drain(ctx context.Context, rep *passReport, o passOptions) error {
	ranges := 0
	for _, tr := range rep.Run.Tables {
		ranges += len(tr.Prune.Ranges)
	}
	rep.Cleaned = map[string]*cleaned{}
	if ranges == 0 {
		return nil
	}
	cl := &maintenance.Cleaner{
		Store: w.Store, Tables: w.Catalog, Requeue: maintenance.QueueEnqueuer{Q: w.Local}, Logger: w.Logger,
		OpenOpts: w.tableOptions(), Sources: formats.Open,
	}
	bar := o.progress("cleanup", ranges)
	defer func() { _ = bar.Finish() }()
	var mu sync.Mutex
	h := func(ctx context.Context, body []byte) error {
		res, err := cl.Clean(ctx, body)
		mu.Lock()
		c := rep.Cleaned[res.Table]
		if c == nil {
			c = &cleaned{}
			rep.Cleaned[res.Table] = c
		}
		c.Versions += res.VersionsDeleted
		c.Keys += res.DataKeys + res.ManifestKeys
		c.Bytes += res.Bytes
		mu.Unlock()
		_ = bar.Add(1)
		return err
	}
	for {
		st, err := queue.Drain(ctx, w.Local, h, queue.DrainOptions{Logger: w.Logger, MaxReceives: 5})
		rep.Drain.Received += st.Received
		rep.Drain.Succeeded += st.Succeeded
		rep.Drain.Failed += st.Failed
		rep.Drain.DeadLettered += st.DeadLettered
		if err != nil || st.Received == 0 {
			return err
		}
	}
}

// planCleanup fills the dry run's cleanup plans (what the cleaner would
// delete for each range, read from the change records, sizes from
// listings), the kept versions and the compaction leftover.
//
// Reading the change records of a long backlog takes a while (20,000
// versions: seconds on disk, longer at S3 latency): a bar counts the
// versions whose records are read, naming the table and range.
func (w *whouse) planCleanup(ctx context.Context, rep *passReport, refs []maintenance.TableRef, o passOptions) {
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
	rep.Kept = map[string][]maintenance.Kept{}
	rep.Leftover = map[string][2]int{}
	byName := map[string]maintenance.TableRef{}
	for _, ref := range refs {
		byName[ref.Name] = ref
	}
	for _, tr := range rep.Run.Tables {
		if tr.Skipped != "" {
			continue
		}
		if o.Steps.Prune { // compaction alone plans no pruning: no kept versions to explain
			rep.Kept[tr.Table] = tr.Prune.Kept()
		}
		// Itemised from the change records the dry run read (or derived,
		// in memory) on the table's Source.
		ref := byName[tr.Table]
		if tr.Source == nil {
			continue
		}
		if tb, ok := tr.Source.(maintenance.TableBacked); ok && tb.Table().Cached() != nil {
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
