package formats

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Lance is the format of a Lance dataset (what LanceDB writes).
const Lance = "lance"

// Known reports whether format is one Open opens ("" is tablekeep's own).
func Known(format string) bool { return format == "" || format == Lance }

// Open is a maintenance.SourceOpener for every registered dataset: a
// tablekeep table's maintenance.TableSource (ref.Format "": no request
// made), a Lance dataset's lance.Source at the ref's root; any other format
// is maintenance.ErrUnknownFormat (nothing is read or deleted).
func Open(ctx context.Context, store objstore.Store, ref maintenance.TableRef) (maintenance.Source, error) {
	switch ref.Format {
	case "":
		return maintenance.OpenTableSource(ctx, store, ref)
	case Lance:
		return lanceSource{lance.NewSource(store, ref.Root)}, nil
	}
	return nil, fmt.Errorf("%w: %q (known: %q)", maintenance.ErrUnknownFormat, ref.Format, Lance)
}

// NewRunner returns r with Sources set to Open unless r sets its own: the
// runner of every registered dataset.
func NewRunner(r *maintenance.Runner) *maintenance.Runner {
	if r.Sources == nil {
		r.Sources = Open
	}
	return r
}

// NewCleaner returns c with Sources set to Open unless c sets its own.
func NewCleaner(c *maintenance.Cleaner) *maintenance.Cleaner {
	if c.Sources == nil {
		c.Sources = Open
	}
	return c
}

// SweepOptions returns o with Sources set to Open unless o sets its own.
func SweepOptions(o maintenance.SweepOptions) maintenance.SweepOptions {
	if o.Sources == nil {
		o.Sources = Open
	}
	return o
}

// Status is maintenance.Status of the dataset at ref, whatever its format
// (opened by Open): its health, stats and Source, read only.
func Status(ctx context.Context, store objstore.Store, ref maintenance.TableRef, now time.Time) (maintenance.Health, maintenance.TableStats, maintenance.Source, error) {
	return maintenance.Status(ctx, store, ref, Open, now)
}

// lanceSource is a lance.Source that also compacts (maintenance.SourceCompacter).
type lanceSource struct{ *lance.Source }

// CompactSource runs the Lance compaction with the policy's bounds, by
// Lance's own candidate rule: a fragment with fewer physical rows than
// TargetRows, or whose deleted share is more than DeletedThreshold (then
// even alone), is rewritten; at most MaxGroups groups and MaxInputBytes of
// input a run; every group is written without its deleted rows.
func (s lanceSource) CompactSource(ctx context.Context, p maintenance.Policy, fence func(context.Context) error, dryRun bool) (maintenance.SourceCompaction, error) {
	rep, err := s.Compact(ctx, lance.CompactOptions{TargetRows: p.TargetRows, DropDeletedAt: p.DeletedThreshold, MaxGroups: p.MaxGroups, MaxInputBytes: p.MaxInputBytes, Fence: fence, DryRun: dryRun})
	res := maintenance.CompactionResult{Planned: len(rep.Groups), Committed: rep.Committed, Dropped: rep.Conflicts + rep.Refused, BytesRead: rep.BytesRead, BytesWritten: rep.BytesWritten, Stopped: rep.Stopped}
	var lines []string
	left := rep.LeftFragments
	for _, g := range rep.Groups {
		lines = append(lines, g.String())
		if !dryRun && (g.Outcome == "" || strings.HasPrefix(g.Outcome, "conflict")) {
			left += len(g.Fragments) // not reached, or retried next pass
		}
		if g.DropRefused != "" && (g.Outcome == "committed" || g.Outcome == lance.OutcomeUnchanged) {
			res.DeletedKept += g.Deleted
			if res.DeletedKeptReason == "" {
				res.DeletedKeptReason = g.DropRefused
			}
		}
		if g.Outcome == "committed" {
			res.InputFrags += len(g.Fragments)
			if g.NewID != 0 {
				res.OutputFrags++
			}
			res.RowsWritten += g.Rows - g.DroppedRows
		}
	}
	if rep.Version != 0 {
		res.Versions = []uint64{rep.Version}
	}
	return maintenance.SourceCompaction{Result: res, Groups: lines, LeftFragments: left}, err
}

// CompactBacklog is the Lance compaction planner's own plan of the latest
// version (Compact with DryRun: the branch listing, the latest version
// and its manifest read, nothing written) with the policy's TargetRows and
// DeletedThreshold and no per-run limit (MaxGroups, MaxInputBytes), so it
// counts every fragment a run, or the runs after it, would fold.
func (s lanceSource) CompactBacklog(ctx context.Context, p maintenance.Policy) (maintenance.Backlog, error) {
	rep, err := s.Compact(ctx, lance.CompactOptions{TargetRows: p.TargetRows, DropDeletedAt: p.DeletedThreshold,
		MaxGroups: math.MaxInt, MaxInputBytes: math.MaxUint64, DryRun: true})
	if errors.Is(err, lance.ErrUnsupported) {
		return maintenance.Backlog{Refused: err.Error()}, nil // status shows why, as compact refuses it
	}
	if err != nil {
		return maintenance.Backlog{}, err
	}
	b := maintenance.Backlog{Groups: len(rep.Groups), Kept: rep.Skipped}
	for _, g := range rep.Groups {
		b.Compactable += len(g.Fragments)
	}
	return b, nil
}

var (
	_ maintenance.BacklogPlanner  = lanceSource{}
	_ maintenance.SourceCompacter = lanceSource{}
	_ maintenance.SourceOpener    = Open
	_ maintenance.Source          = (*lance.Source)(nil)
	_ maintenance.LatestProber    = (*lance.Source)(nil)
	_ maintenance.LatestStatser   = (*lance.Source)(nil)
)

var _ maintenance.SweepSource = (*lance.Source)(nil)
