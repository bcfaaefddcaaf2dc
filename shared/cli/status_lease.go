package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// leaseDirOf is the lease directory of a registered table (a full key
// prefix): _leases/ under a tablekeep table, the sidecar's leases/ under a
// Lance dataset (formats.LeaseDir).
func leaseDirOf(ref maintenance.TableRef) string { return formats.LeaseDir(ref) }

// setLeases fills the status row's leases (one LIST) and what the one on
// the lowest version pins: the floor it holds, with the floor the planner
// would set without it.
func (r *tableStatus) setLeases(ctx context.Context, store objstore.Store, ref maintenance.TableRef, plan maintenance.PrunePlan, now time.Time) error {
	set, err := table.ReadLeases(ctx, store, leaseDirOf(ref), nil)
	if err != nil {
		return err
	}
	r.Leases = leaseRows(ref.Name, set, now, plan.OldFloor)
	if by := plan.Leased.By; by != nil {
		n, _ := plan.LeaseHeld()
		r.LeaseHold = fmt.Sprintf("lease %s pins the floor at %d (would be %d): %d versions kept", by.ID, plan.Floor, plan.Leased.Wanted, n)
		// PRUNABLE: the versions the lease holds are prunable once it
		// ends, not when their grace window does.
		r.PrunableLeasedBy, r.PrunableLeasedTill = by.ID, rfc3339(by.EffectiveExpiry())
		r.holdLater(n)
		return nil
	}
	// Nothing prunable yet, so the planner read no lease: the lowest live
	// lease will hold the later versions from its own up to the newest
	// KeepLast, once their grace ends.
	var low *leaseJSON
	for i, l := range r.Leases {
		if l.Live != nil && *l.Live && (low == nil || l.Version < low.Version) {
			low = &r.Leases[i]
		}
	}
	keep := uint64(max(ref.Policy.WithDefaults().KeepLast, 1))
	if low == nil || r.PrunableLater == 0 || r.Latest < keep || low.Version < r.Floor {
		return nil
	}
	if keepFrom := r.Latest - keep + 1; low.Version < keepFrom {
		r.PrunableLeasedBy, r.PrunableLeasedTill = low.ID, rfc3339(low.Expires)
		r.holdLater(int(min(keepFrom-low.Version, uint64(r.PrunableLater))))
	}
	return nil
}

// holdLater moves n of the versions prunable later to those a lease holds.
func (r *tableStatus) holdLater(n int) {
	r.PrunableLeased = n
	if r.PrunableLater = max(r.PrunableLater-n, 0); r.PrunableLater == 0 {
		r.PrunableAt = ""
	}
}

// prunableText is the PRUNABLE cell: versions the next pass deletes, then
// "+N held by lease ID until T" and "+N at T" (once their grace ends).
func prunableText(r tableStatus) string {
	s := strconv.Itoa(r.PrunableNow)
	if r.PrunableLeased > 0 {
		s += fmt.Sprintf(" (+%d held by lease %s until %s)", r.PrunableLeased, r.PrunableLeasedBy, r.PrunableLeasedTill)
	}
	if r.PrunableLater > 0 {
		s += fmt.Sprintf(" (+%d at %s)", r.PrunableLater, r.PrunableAt)
	}
	return s
}

// printLeaseLines prints, after the status table, each table's leases
// and what they pin.
func printLeaseLines(app *App, rows []tableStatus) {
	for _, r := range rows {
		if len(r.Leases) == 0 {
			continue
		}
		live := 0
		for _, l := range r.Leases {
			if l.Live != nil && *l.Live {
				live++
			}
		}
		fmt.Fprintf(app.Stdout, "%s: %d leases (%d live)", r.Table, len(r.Leases), live)
		if r.LeaseHold != "" {
			fmt.Fprintf(app.Stdout, "; %s", r.LeaseHold)
		}
		fmt.Fprintln(app.Stdout)
	}
}
