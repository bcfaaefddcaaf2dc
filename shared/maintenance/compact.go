package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/table"
)

// CompactionGroup is a run of adjacent fragments to fold into one.
type CompactionGroup struct {
	Fragments  []table.Fragment
	LiveRows   uint64
	InputBytes uint64
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

// SizePlanner is the default planner. Candidates are fragments under the
// target rows or with more than the deleted-rows threshold; adjacent
// candidates form groups up to the target; a lone candidate is left alone
// unless it carries deletions worth dropping. Limits per run bound the work.
type SizePlanner struct{}

func (SizePlanner) Plan(m *table.Manifest, p Policy) CompactionPlan {
	p = p.WithDefaults()
	plan := CompactionPlan{Version: m.Version}
	var cur CompactionGroup
	var totalBytes uint64
	flush := func() {
		worth := len(cur.Fragments) > 1 || (len(cur.Fragments) == 1 && cur.Fragments[0].Deletion != nil)
		if worth && len(plan.Groups) < p.MaxGroups && totalBytes+cur.InputBytes <= p.MaxInputBytes {
			plan.Groups = append(plan.Groups, cur)
			totalBytes += cur.InputBytes
		}
		cur = CompactionGroup{}
	}
	for _, f := range m.Fragments {
		candidate := f.LiveRows() < p.TargetRows ||
			(f.Deletion != nil && float64(f.Deletion.Rows) > p.DeletedThreshold*float64(f.Rows))
		if !candidate {
			flush()
			continue
		}
		if len(cur.Fragments) > 0 && cur.LiveRows+f.LiveRows() > p.TargetRows {
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
}

// Compactor executes compaction plans group by group, committing each group
// on its own (partial progress) and stopping cleanly near the deadline.
type Compactor struct {
	Planner Planner
	Logger  *slog.Logger
	Clock   func() time.Time
	// Margin is the time kept in reserve before the context deadline: a
	// group is not started unless this much time remains.
	Margin time.Duration
}

// NewCompactor returns a compactor with the default planner.
func NewCompactor(logger *slog.Logger, clock func() time.Time) *Compactor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if clock == nil {
		clock = time.Now
	}
	return &Compactor{Planner: SizePlanner{}, Logger: logger, Clock: clock, Margin: 5 * time.Second}
}

// Plan plans compaction of the table's latest version without writing.
func (c *Compactor) Plan(ctx context.Context, t *table.Table, p Policy) (CompactionPlan, error) {
	m, err := t.Refresh(ctx)
	if err != nil {
		return CompactionPlan{}, err
	}
	return c.Planner.Plan(m, p), nil
}

// Run compacts t. The table handle's Fence (if any) is checked before every
// group and every commit, so a holder whose lease expired commits nothing,
// and the run stops (Stopped) at the lease as it does near the deadline.
func (c *Compactor) Run(ctx context.Context, t *table.Table, p Policy) (CompactionResult, error) {
	var res CompactionResult
	readAt := c.Clock()
	m, err := t.Refresh(ctx)
	if err != nil {
		return res, err
	}
	plan := c.Planner.Plan(m, p)
	res.Planned = len(plan.Groups)
	for i, g := range plan.Groups {
		if err := ctx.Err(); err != nil {
			res.Stopped = "context: " + err.Error()
			return res, nil
		}
		if dl, ok := ctx.Deadline(); ok && dl.Sub(c.Clock()) < c.Margin {
			res.Stopped = fmt.Sprintf("deadline: %d of %d groups done", i, len(plan.Groups))
			return res, nil
		}
		// The lease bounds the run as well as the deadline: the fence
		// (which renews the lease when due) must pass before a group starts.
		if fence := t.Options().Fence; fence != nil {
			if err := fence(ctx); err != nil {
				res.Stopped = fmt.Sprintf("lease: %d of %d groups done: %v", i, len(plan.Groups), err)
				return res, nil
			}
		}
		rec, inputs, err := t.ReadGroup(ctx, m, g.Fragments)
		if err != nil {
			return res, fmt.Errorf("compact group %d: %w", i, err)
		}
		out, err := t.WriteRewriteOutput(ctx, m, rec)
		rec.Release()
		if err != nil {
			return res, fmt.Errorf("compact group %d: %w", i, err)
		}
		rw := &table.Rewrite{Groups: []table.RewriteGroup{{Inputs: inputs, Output: out}}, ReadVersion: m.Version}
		cr, err := t.CommitRewrite(ctx, rw, readAt)
		if errors.Is(err, table.ErrRewriteInvalidated) {
			// A concurrent writer removed an input: skip; the next run replans.
			res.Dropped++
			continue
		}
		if errors.Is(err, lock.ErrLeaseExpired) || errors.Is(err, lock.ErrLeaseLost) {
			// The fence refused the commit: stop at the lease (the output
			// is left to the orphan sweep); the caller's next fenced step
			// reports the lease.
			res.Stopped = fmt.Sprintf("lease: %d of %d groups done: %v", i, len(plan.Groups), err)
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("compact group %d: %w", i, err)
		}
		res.Committed++
		res.Dropped += rw.Dropped
		res.Remapped += rw.Remapped
		res.InputFrags += len(g.Fragments)
		res.OutputFrags++
		res.RowsWritten += out.Rows
		res.BytesRead += g.InputBytes
		res.BytesWritten += out.Bytes
		res.Versions = append(res.Versions, cr.Version)
		// Later groups were planned on m; their inputs are checked at commit.
	}
	c.Logger.DebugContext(ctx, "compaction run", "table", t.Root(), "planned", res.Planned, "committed", res.Committed,
		"dropped", res.Dropped, "remapped_rows", res.Remapped, "input_fragments", res.InputFrags,
		"rows_written", res.RowsWritten, "bytes_read", res.BytesRead, "bytes_written", res.BytesWritten)
	return res, nil
}
