package cli

import (
	"context"
	"fmt"
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
	}
	return nil
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
