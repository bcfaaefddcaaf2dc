package maintenance

import (
	"context"
	"errors"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/lock"
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
	lease, err := r.Locker.Acquire(ctx, r.TableLockName(ref), lock.AcquireOptions{Owner: r.Owner, Lease: r.Lease, MaxWait: r.LockWait})
	if errors.Is(err, lock.ErrLockHeld) {
		r.Logger.InfoContext(ctx, "table busy", "table", ref.Name)
		return PrunePlan{}, nil
	}
	if err != nil {
		return PrunePlan{}, err
	}
	fence := lock.NewFence(r.Locker, lease, r.Clock, 0)
	defer func() {
		if err := r.Locker.Release(context.WithoutCancel(ctx), fence.Lease()); err != nil {
			r.Logger.WarnContext(ctx, "release lock", "table", ref.Name, "err", err)
		}
	}()
	plan, err := PlanSourcePrune(ctx, src, ref.Name, p, r.Clock.Now())
	if err != nil {
		return plan, fmt.Errorf("plan prune %s: %w", ref.Name, err)
	}
	if err := fence.Heartbeat(ctx); err != nil {
		return plan, fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	plan.Token = fence.Lease().Token
	plan.Fence = fence.CheckFence
	if err := ApplySourcePrune(ctx, src, &plan, r.Queue); err != nil {
		return plan, fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	r.Logger.InfoContext(ctx, "maintenance step", "step", "prune", "table", ref.Name, "format", ref.Format,
		"floor", plan.Floor, "latest", plan.Latest, "ranges", len(plan.Ranges), "token", plan.Token)
	return plan, nil
}
