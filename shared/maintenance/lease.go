package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// LeaseLister is implemented by a Source whose readers may hold leases
// (TableSource, lance.Source): the prune planner keeps the floor at or
// below the lowest version a live lease holds.
type LeaseLister interface {
	LeaseDir() *table.LeaseDir
}

// LeaseDir is the table's lease directory.
func (s *TableSource) LeaseDir() *table.LeaseDir { return s.T.LeaseDir() }

var _ LeaseLister = (*TableSource)(nil)

// maxLeaseDeletes bounds the stale lease names one pass deletes (one
// DeleteObjects request).
const maxLeaseDeletes = 1000

// LeaseHold is what the leases did to a prune plan.
type LeaseHold struct {
	// Live are the live leases the planner saw (read only when it was
	// about to raise the floor).
	Live []table.LeaseInfo `json:",omitempty"`
	// By is the lease that kept the floor down (nil: none did); Wanted is
	// the floor the plan would have set without it.
	By     *table.LeaseInfo `json:",omitempty"`
	Wanted uint64           `json:",omitempty"`
	// Stale names seen (expired, or malformed and old): deleted when the
	// plan is applied.
	Stale int `json:",omitempty"`
}

// holdForLeases caps a floor the plan is about to raise at the lowest
// version a live lease holds (one LIST per 1,000 lease names; none when
// the floor stays, so an idle table costs no request). The lease rule:
// the floor stays at or below v while now <= expiry + MaxClockSkew
// (table.LeaseInfo.Live).
//
// forApply (the plan is applied next, under the lock): when the listing
// fails for too many objects, the stale names it saw are deleted at once
// (the plan fails, so apply would not delete them), so a flood of expired
// or old malformed names drains over the passes.
func (plan *PrunePlan) holdForLeases(ctx context.Context, d *table.LeaseDir, now time.Time, forApply bool) error {
	if d == nil || plan.Floor <= plan.OldFloor {
		return nil
	}
	set, err := d.Read(ctx)
	stale := set.Stale(now, plan.OldFloor)
	if len(stale) > maxLeaseDeletes {
		stale = stale[:maxLeaseDeletes]
	}
	plan.staleLeases, plan.leaseDir = stale, d
	plan.Leased.Stale = len(stale)
	if err != nil {
		// Unknown leases: the floor stays (nothing is enqueued beyond it).
		plan.Floor = plan.OldFloor
		if forApply {
			plan.deleteStaleLeases(ctx)
		}
		return fmt.Errorf("read leases: %w", err)
	}
	// A lease below the stored floor pins nothing (its acquire was
	// refused, or its name was never a lease's): it would freeze the floor.
	plan.Leased.Live = set.Pinning(now, plan.OldFloor)
	if pin, ok := set.Pin(now, plan.OldFloor); ok && pin.Version < plan.Floor {
		plan.Leased.By, plan.Leased.Wanted = &pin, plan.Floor
		plan.Floor = max(pin.Version, plan.OldFloor)
	}
	return nil
}

// deleteStaleLeases deletes the stale lease names the plan saw (best
// effort: the next raising pass sees them again).
func (plan *PrunePlan) deleteStaleLeases(ctx context.Context) {
	if len(plan.staleLeases) == 0 || plan.leaseDir == nil {
		return
	}
	_ = plan.leaseDir.Store.Delete(ctx, plan.staleLeases)
	plan.staleLeases = nil
}

// heldByLease reports whether version v is kept only by the plan's lease
// hold (at or above the floor, below the floor wanted without it).
func (plan *PrunePlan) heldByLease(v uint64) bool {
	return plan.Leased.By != nil && v >= plan.Floor && v < plan.Leased.Wanted
}

// LeaseHeld is what the plan's lease hold keeps: the stored versions the
// floor would have passed without it, and since when the oldest of them
// would have been prunable (its grace window over and out of the newest
// KeepLast). Zero without a hold.
func (plan *PrunePlan) LeaseHeld() (versions int, since time.Time) {
	if plan.Leased.By == nil {
		return 0, time.Time{}
	}
	times := make(map[uint64]time.Time, len(plan.vs))
	for _, v := range plan.vs {
		times[v.Version] = v.Time
	}
	for i, v := range plan.vs {
		if !plan.heldByLease(v.Version) || i >= plan.Versions {
			continue
		}
		versions++
		var from time.Time
		if !v.GraceFrom.IsZero() {
			from = v.GraceFrom.Add(plan.grace)
		}
		if t, ok := times[v.Version+uint64(plan.policy.KeepLast)]; ok && t.After(from) {
			from = t
		}
		if since.IsZero() || from.Before(since) {
			since = from
		}
	}
	return versions, since
}

// LeaseBehind is the reason a lease hold makes a table "behind" at now
// (empty if it does not): it has kept prunable versions for longer than
// lag.
func (plan *PrunePlan) LeaseBehind(now time.Time, lag time.Duration) string {
	n, since := plan.LeaseHeld()
	if n == 0 || now.Sub(since) <= lag {
		return ""
	}
	by := plan.Leased.By
	return fmt.Sprintf("lease %s on version %d holds back pruning of %d versions since %s (expires %s)",
		by.ID, by.Version, n, since.UTC().Format(time.RFC3339), by.EffectiveExpiry().UTC().Format(time.RFC3339))
}

// leaseDelay is when stored version v, prunable at `at` by the retention
// rule, can be pruned given the plan's lease hold: no earlier than the
// holding lease's effective expiry + LeaseEndStep (saturated), so a fleet pass
// does not maintain a table again and again while a lease keeps its
// versions (markAfter).
func (plan *PrunePlan) leaseDelay(v uint64, at time.Time) time.Time {
	if !plan.heldByLease(v) {
		return at
	}
	if end := table.SatAddTime(plan.Leased.By.EffectiveExpiry(), LeaseEndStep); end.After(at) {
		return end
	}
	return at
}
