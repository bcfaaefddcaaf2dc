package maintenance

import (
	"context"
)

// PruneSource is one prune pass over a dataset of another format (ref.Format
// set), under the table's lease lock like MaintainTable's prune step: the
// source prepares its change records and the plan is computed, the lease
// renewed, then the floor, the ranges and the prune state are written
// under the lease's fencing token. There is no compaction step: the
// format's own tools compact. A held lock skips the pass (ErrLockHeld is
// not an error: the plan is empty). A dry run plans and changes nothing
// but the source's derived change records.
func (r *Runner) PruneSource(ctx context.Context, ref TableRef, src Source) (PrunePlan, error) {
	r.defaults()
	p := ref.Policy.WithDefaults()
	if r.DryRun {
		return PlanSourcePrune(ctx, src, ref.Name, p, r.Clock.Now())
	}
	plan, _, _, err := r.pruneSource(ctx, ref, src, nil)
	if err != nil {
		return plan, err
	}
	r.Logger.InfoContext(ctx, "maintenance step", "step", "prune", "table", ref.Name, "format", ref.Format,
		"floor", plan.Floor, "latest", plan.Latest, "ranges", len(plan.Ranges), "token", plan.Token)
	return plan, nil
}
