package maintenance

import (
	"context"
	"errors"

	"github.com/tablekeep/tablekeep/shared/lock"
)

// PruneSource is one prune pass over a dataset, under the table's lease
// lock like MaintainTable's prune step: the source prepares its change
// records and the plan is computed, the lease renewed, then the floor, the
// ranges and the prune state are written under the lease's fencing token.
// There is no compaction step. A held lock skips the pass (ErrLockHeld is
// not an error: the plan is empty). A dry run plans and changes nothing
// but the source's derived change records.
func (r *Runner) PruneSource(ctx context.Context, ref TableRef, src Source) (PrunePlan, error) {
	r.defaults()
	p := ref.Policy.WithDefaults()
	if r.DryRun {
		return PlanSourcePrune(ctx, src, ref.Name, p, r.Clock.Now())
	}
	fence, release, err := r.holdTable(ctx, ref)
	if errors.Is(err, lock.ErrLockHeld) {
		return PrunePlan{}, nil
	}
	if err != nil {
		return PrunePlan{}, err
	}
	defer release()
	var rep TableReport
	err = r.prune(ctx, src, ref, p, fence, &rep)
	if err != nil {
		return rep.Prune, err
	}
	plan := rep.Prune
	r.Logger.InfoContext(ctx, "maintenance step", "step", "prune", "table", ref.Name, "format", formatName(ref),
		"floor", plan.Floor, "latest", plan.Latest, "ranges", len(plan.Ranges), "token", plan.Token)
	return plan, nil
}
