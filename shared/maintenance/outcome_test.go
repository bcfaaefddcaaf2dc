package maintenance_test

import (
	"context"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// TestTableOutcomeTyped: a table's report says maintained, busy or failed
// in Outcome (and why in Error), so no caller parses Skipped; Skipped keeps
// its printed text ("locked by another compactor", "error: <why>").
func TestTableOutcomeTyped(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	tb := e.create(t)
	upsert(t, tb, "k", "v")
	e.clock.Advance(2 * time.Hour)

	rep, err := e.runner.MaintainTable(ctx, e.ref)
	if err != nil || rep.Outcome != maintenance.Maintained || rep.Error != "" || rep.Skipped != "" {
		t.Fatalf("maintained: %v %q %q %v", rep.Outcome, rep.Error, rep.Skipped, err)
	}

	held, err := e.locker.Acquire(ctx, e.runner.TableLockName(e.ref), lock.AcquireOptions{Owner: "other", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	busy := *e.runner
	busy.LockWait = time.Millisecond
	rep, err = busy.MaintainTable(ctx, e.ref)
	if err != nil || rep.Outcome != maintenance.Busy || rep.Error != "" || rep.Skipped != "locked by another compactor" {
		t.Fatalf("busy: %v %q %q %v", rep.Outcome, rep.Error, rep.Skipped, err)
	}
	_ = e.locker.Release(ctx, held)

	run, err := fleetidx.New(e.runner, fleetidx.Options{}).MaintainNamed(ctx, "no-such-table")
	if err != nil || len(run.Tables) != 1 {
		t.Fatalf("named: %+v %v", run, err)
	}
	tr := run.Tables[0]
	if tr.Outcome != maintenance.Failed || tr.Error == "" || tr.Skipped != "error: "+tr.Error {
		t.Fatalf("failed: %v %q %q", tr.Outcome, tr.Error, tr.Skipped)
	}
	for o, want := range map[maintenance.Outcome]string{maintenance.Maintained: "maintained", maintenance.Busy: "busy", maintenance.Failed: "failed", 9: "outcome(9)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", o, o.String(), want)
		}
	}
}
