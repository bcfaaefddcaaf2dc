package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/semaphore"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/table"
)

// CompactionGroup is a run of adjacent fragments to fold into one.
type CompactionGroup struct {
	Fragments  []table.Fragment
	LiveRows   uint64
	InputBytes uint64
	// Fold (format 3) are the inline rows a flush would have put in a
	// data file that this group would then take in: the output holds them
	// after the fragments' rows, and one commit flushes and compacts
	// (Compactor.Run; table.RewriteGroup.Fold).
	Fold []table.InlineRow
}

// CompactionPlan is what a compaction run will do.
type CompactionPlan struct {
	Version uint64 // the version planned on
	Groups  []CompactionGroup
}

// Planner chooses compaction groups from a manifest.
type Planner interface {
	Plan(m *table.Manifest, p Policy) CompactionPlan
}

// DefaultMaxGroupBytes (32 MiB) bounds the stored bytes of a compaction group's
// inputs when SizePlanner.MaxGroupBytes is 0. A group is written as one
// Parquet row group, so the compactor holds a whole group decoded (and the
// next one being read ahead): this bound, not the row target alone, is what
// keeps its heap bounded when fragments are large.
const DefaultMaxGroupBytes uint64 = 32 << 20

// SizePlanner is the default planner. Candidates are fragments under the
// target rows or with more than the deleted-rows threshold; adjacent
// candidates form groups up to the target rows and MaxGroupBytes; a lone
// candidate is left alone unless it carries deletions worth dropping.
// Limits per run bound the work.
type SizePlanner struct {
	// MaxGroupBytes bounds a group's input bytes (0: DefaultMaxGroupBytes).
	MaxGroupBytes uint64
}

func (sp SizePlanner) Plan(m *table.Manifest, p Policy) CompactionPlan {
	p = p.WithDefaults()
	maxBytes := sp.MaxGroupBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxGroupBytes
	}
	plan := CompactionPlan{Version: m.Version}
	var cur CompactionGroup
	var totalBytes uint64
	flush := func() {
		worth := len(cur.Fragments) > 1 || (len(cur.Fragments) == 1 && (cur.Fragments[0].Deletion != nil || len(cur.Fragments[0].Inline) > 0))
		if worth && len(plan.Groups) < p.MaxGroups && totalBytes+cur.InputBytes <= p.MaxInputBytes {
			plan.Groups = append(plan.Groups, cur)
			totalBytes += cur.InputBytes
		}
		cur = CompactionGroup{}
	}
	for _, f := range m.Fragments {
		candidate := f.LiveRows() < p.TargetRows ||
			float64(f.Rows-f.LiveRows()) > p.DeletedThreshold*float64(f.Rows) // vector and inline deletions
		if !candidate {
			flush()
			continue
		}
		if len(cur.Fragments) > 0 && (cur.LiveRows+f.LiveRows() > p.TargetRows || cur.InputBytes+f.Bytes > maxBytes) {
			flush()
		}
		cur.Fragments = append(cur.Fragments, f)
		cur.LiveRows += f.LiveRows()
		cur.InputBytes += f.Bytes
	}
	flush()
	return plan
}

// CompactionResult reports one compaction run.
type CompactionResult struct {
	Planned      int    // groups planned
	Committed    int    // groups committed
	Dropped      int    // groups dropped because an input changed beyond repair
	Remapped     uint64 // concurrently deleted rows re-applied to outputs
	InputFrags   int
	OutputFrags  int
	RowsWritten  uint64
	BytesRead    uint64
	BytesWritten uint64
	Versions     []uint64 // versions committed
	Stopped      string   // why the run stopped early ("" if it finished)
	FlushedRows  uint64   // inline rows (format 3) flushed to a data file first
	// DeletedKept counts the deleted rows a Lance compaction kept although
	// the group passed its DeletedThreshold (carried with their deletion
	// vector in a group committed, or left where they are in a group not
	// committed because its output would equal its input); DeletedKeptReason
	// says why (the first such group's reason: a column whose pages cannot
	// be filtered).
	DeletedKept       uint64
	DeletedKeptReason string
	// Discarded counts the files of groups that committed nothing which
	// their commit deleted at once (table.CommitRewrite: the output and the
	// deletion vectors its re-applies wrote; kept after an unknown outcome).
	Discarded int
}

// Compactor executes compaction plans group by group, committing each group
// on its own (partial progress) and stopping cleanly near the deadline.
type Compactor struct {
	Planner Planner
	Logger  *slog.Logger
	Clock   clock.Clock
	// Margin is the time kept in reserve before the context deadline: a
	// group is not started unless this much time remains.
	Margin time.Duration
	// ReadConcurrency is how many fragments of a group are read at once
	// (0: table.DefaultReadConcurrency).
	ReadConcurrency int
	// ReadBudget bounds the stored bytes of input held at once: the
	// fragments being fetched and decoded, and the groups read but not yet
	// written (the one being written and the one read ahead); a group
	// larger than the budget is read alone (0: table.DefaultReadBudget,
	// 48 MiB).
	ReadBudget int64
}

// NewCompactor returns a compactor with the default planner.
func NewCompactor(logger *slog.Logger, clk clock.Clock) *Compactor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Compactor{Planner: SizePlanner{}, Logger: logger, Clock: clock.Or(clk), Margin: 5 * time.Second}
}

// planFreshFor is how recently a handle's cached manifest must have been
// loaded for Run to plan on it without a Refresh.
const planFreshFor = 30 * time.Second

// Plan plans compaction of the table's latest version without writing, as
// Run would (a format-3 table's inline rows folded into a group: foldPlan).
func (c *Compactor) Plan(ctx context.Context, t *table.Table, p Policy) (CompactionPlan, error) {
	m, err := t.Refresh(ctx)
	if err != nil {
		return CompactionPlan{}, err
	}
	if m.Format >= 3 && len(m.Inline) > 0 && 2*m.InlineBytes() >= m.InlineMaxBytes {
		if plan, folded := foldPlan(c.Planner, m, p); folded {
			return plan, nil // Run folds the inline rows into its first group
		}
	}
	return c.Planner.Plan(m, p), nil
}

// Run compacts t. The table handle's Fence (if any) is checked before every
// group and every commit, so a holder whose lease expired commits nothing,
// and the run stops (Stopped) at the lease as it does near the deadline.
//
// Groups go through a two-stage pipeline: while group i is written and
// committed, group i+1 is read (its fragments and deletion vectors in
// parallel, bounded by ReadConcurrency and ReadBudget). At most one group
// is read ahead, and only once its checks (context, deadline margin,
// fence) passed, so a run sends the same requests as a serial one.
func (c *Compactor) Run(ctx context.Context, t *table.Table, p Policy) (CompactionResult, error) {
	var res CompactionResult
	// A handle opened moments ago (MaintainTable opens it just before) is
	// planned on as is; its load time is the read time the commit's grace
	// check uses.
	now := c.Clock.Now()
	m, readAt := t.CachedAt()
	if m == nil || now.Sub(readAt) > planFreshFor || readAt.After(now) {
		readAt = now
		var err error
		if m, err = t.Refresh(ctx); err != nil {
			return res, err
		}
	}
	// A format-3 table's inline rows at half their bound or more are
	// flushed to a data file (the writers flush at the bound itself). If
	// the plan would then fold that file into a group with other
	// fragments, the group's output takes the inline rows directly: one
	// data file, one manifest and one change record instead of two of
	// each, and no read of the flushed file (foldPlan). Otherwise the
	// rows are flushed first, in a commit of their own.
	var plan CompactionPlan
	if m.Format >= 3 && len(m.Inline) > 0 && 2*m.InlineBytes() >= m.InlineMaxBytes {
		var folded bool
		if plan, folded = foldPlan(c.Planner, m, p); !folded {
			fr, err := t.FlushInline(ctx)
			if err != nil {
				return res, fmt.Errorf("flush inline rows: %w", err)
			}
			if fr.Committed {
				res.FlushedRows = uint64(len(m.Inline))
				m, readAt = t.Cached(), c.Clock.Now()
			}
			plan = c.Planner.Plan(m, p)
		}
	} else {
		plan = c.Planner.Plan(m, p)
	}
	res.Planned = len(plan.Groups)
	n := len(plan.Groups)
	budget := c.ReadBudget
	if budget <= 0 {
		budget = table.DefaultReadBudget
	}
	ropts := table.GroupReadOptions{Concurrency: c.ReadConcurrency, Budget: semaphore.NewWeighted(budget), BudgetBytes: budget}
	// A group holds its share of the budget (its input bytes, at most the
	// whole budget) from the start of its read until its output is
	// written: a group is read ahead only while the one being written
	// leaves room, so at most budget bytes of input are held at once
	// (beyond one group larger than the budget on its own).
	held := semaphore.NewWeighted(budget)
	weight := func(g CompactionGroup) int64 { return min(max(int64(g.InputBytes), 1), budget) }
	readCtx, cancelReads := context.WithCancel(ctx)
	var pending chan groupRead
	defer func() {
		// A run that returns early (error, lease) abandons the read ahead.
		cancelReads()
		if pending != nil {
			if r := <-pending; r.rec != nil {
				r.rec.Release()
				held.Release(r.weight)
			}
		}
	}()
	start := func(i int) {
		ch := make(chan groupRead, 1)
		g := plan.Groups[i]
		go func() {
			w := weight(g)
			if err := held.Acquire(readCtx, w); err != nil {
				ch <- groupRead{err: err}
				return
			}
			rec, inputs, err := t.ReadFoldGroup(readCtx, m, g.Fragments, g.Fold, ropts)
			if err != nil {
				held.Release(w)
				w = 0
			}
			ch <- groupRead{rec: rec, inputs: inputs, err: err, weight: w}
		}()
		pending = ch
	}
	if n > 0 {
		if res.Stopped = c.checkGroup(ctx, t, 0, n); res.Stopped != "" {
			return res, nil
		}
		start(0)
	}
	for i, g := range plan.Groups {
		r := <-pending
		pending = nil
		if r.err != nil {
			return res, fmt.Errorf("compact group %d: %w", i, r.err)
		}
		// Read the next group while this one is written and committed.
		stopNext := ""
		if i+1 < n {
			if stopNext = c.checkGroup(ctx, t, i+1, n); stopNext == "" {
				start(i + 1)
			}
		}
		out, err := t.WriteRewriteOutput(ctx, m, r.rec)
		r.rec.Release()
		held.Release(r.weight)
		if err != nil {
			return res, fmt.Errorf("compact group %d: %w", i, err)
		}
		rw := &table.Rewrite{Groups: []table.RewriteGroup{{Inputs: r.inputs, Output: out, Fold: g.Fold}}, ReadVersion: m.Version}
		cr, err := t.CommitRewrite(ctx, rw, readAt)
		res.Discarded += rw.Discarded
		switch {
		case errors.Is(err, table.ErrRewriteInvalidated):
			// A concurrent writer removed an input: skip (the output was
			// deleted); the next run replans.
			res.Dropped++
		case errors.Is(err, lock.ErrLeaseExpired) || errors.Is(err, lock.ErrLeaseLost):
			// The fence refused the commit: stop at the lease (the output
			// was deleted); the caller's next fenced step reports the
			// lease.
			res.Stopped = fmt.Sprintf("lease: %d of %d groups done: %v", i, n, err)
			return res, nil
		case err != nil:
			return res, fmt.Errorf("compact group %d: %w", i, err)
		default:
			res.Committed++
			if rw.Dropped == 0 && len(g.Fold) > 0 {
				res.FlushedRows = uint64(len(g.Fold))
			}
			res.Dropped += rw.Dropped
			res.Remapped += rw.Remapped
			res.InputFrags += len(g.Fragments)
			res.OutputFrags++
			res.RowsWritten += out.Rows
			res.BytesRead += g.InputBytes
			res.BytesWritten += out.Bytes
			res.Versions = append(res.Versions, cr.Version)
		}
		if stopNext != "" {
			res.Stopped = stopNext
			return res, nil
		}
		// Later groups were planned on m; their inputs are checked at commit.
	}
	c.Logger.DebugContext(ctx, "compaction run", "table", t.Root(), "planned", res.Planned, "committed", res.Committed,
		"dropped", res.Dropped, "remapped_rows", res.Remapped, "input_fragments", res.InputFrags,
		"rows_written", res.RowsWritten, "bytes_read", res.BytesRead, "bytes_written", res.BytesWritten)
	return res, nil
}

// foldPlan plans m as if its inline rows were flushed first: a fragment
// for them is appended where a flush puts its file, after every fragment.
// If the plan takes that fragment into a group with other fragments, the
// group is returned first in the plan with the inline rows as its Fold
// (the flush is then the group's commit) and folded is true; otherwise
// folded is false and the rows are to be flushed on their own.
func foldPlan(pl Planner, m *table.Manifest, p Policy) (plan CompactionPlan, folded bool) {
	var bytes uint64
	for _, r := range m.Inline {
		bytes += uint64(len(r.Data))
	}
	vm := *m
	flushed := table.Fragment{ID: m.NextFragmentID, Rows: uint64(len(m.Inline)), Bytes: bytes}
	vm.Fragments = append(slices.Clone(m.Fragments), flushed)
	vm.Inline = nil
	plan = pl.Plan(&vm, p)
	for i, g := range plan.Groups {
		last := len(g.Fragments) - 1
		if last < 0 || g.Fragments[last].ID != flushed.ID || g.Fragments[last].File != flushed.File {
			continue
		}
		if last == 0 {
			return plan, false // the flushed file alone: a plain flush
		}
		g.Fragments = g.Fragments[:last]
		g.Fold = m.Inline
		plan.Groups = append([]CompactionGroup{g}, slices.Delete(plan.Groups, i, i+1)...)
		return plan, true
	}
	return plan, false
}

// groupRead is a group read by the pipeline's read stage.
type groupRead struct {
	rec    arrow.RecordBatch
	inputs []table.RewriteInput
	err    error
	weight int64 // held from the budget until the output is written
}

// checkGroup returns why group i of n must not start ("" if it may): the
// context ended, less than Margin is left before the deadline, or the fence
// (which renews the lease when due) refused.
func (c *Compactor) checkGroup(ctx context.Context, t *table.Table, i, n int) string {
	if err := ctx.Err(); err != nil {
		return "context: " + err.Error()
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(c.Clock.Now()) < c.Margin {
		return fmt.Sprintf("deadline: %d of %d groups done", i, n)
	}
	// The lease bounds the run as well as the deadline: the fence must pass
	// before a group starts.
	if fence := t.Options().Fence; fence != nil {
		if err := fence(ctx); err != nil {
			return fmt.Sprintf("lease: %d of %d groups done: %v", i, n, err)
		}
	}
	return ""
}
