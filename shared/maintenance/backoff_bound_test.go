package maintenance_test

import (
	"context"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestFailureBackoffSaturates (issue 19 item 3: every time sum saturates):
// a failing table's retry delay FailureBackoff x 2^min(k-1, 16) is capped
// at 6 h whatever FailureBackoff is; the shift once wrapped to a few
// microseconds at the 15th failure of a base of 2^50 + 1 ns, and the table
// was retried at once.
func TestFailureBackoffSaturates(t *testing.T) {
	ctx := context.Background()
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour}.WithDefaults()
	f := newFleet(t, 1, p, func(s objstore.Store) objstore.Store { return &failStore{Store: s, root: "wh/t000/"} })
	f.runner.FailureBackoff = 1<<50 + 1
	for k := 1; k <= 18; k++ {
		f.clock.Advance(7 * time.Hour)
		f.pass(t)
		idx, err := fleetidx.Read(ctx, f.store, "wh/")
		if err != nil {
			t.Fatal(err)
		}
		m := idx.Tables["t000"]
		if m.Failures != k {
			t.Fatalf("pass %d: %d failures", k, m.Failures)
		}
		if got := m.RetryAt.Sub(f.clock.Now()); got != 6*time.Hour {
			t.Fatalf("failure %d: retried after %s, want the 6 h cap", k, got)
		}
	}
}
