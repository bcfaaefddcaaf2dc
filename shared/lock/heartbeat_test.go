package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
)

// TestFenceRenewDue: the fence renews its lease once a third of it has
// passed, keeps a holder that checks at every step valid for as long as it
// works, never renews a lease within its margin of the end, and reports a
// lease taken over as lost.
func TestFenceRenewDue(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	l := lock.NewInProcess(clk)
	lease, err := l.Acquire(ctx, "t", lock.AcquireOptions{Owner: "a", Lease: 3 * time.Minute, MaxWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	f := lock.NewFence(l, lease, clk, 0)
	clk.Advance(59 * time.Second)
	if err := f.Heartbeat(ctx); err != nil || !f.Lease().Expires.Equal(lease.Expires) {
		t.Fatalf("renewed early: %v %v", err, f.Lease())
	}
	// An hour of steps a minute apart: the lease never runs out.
	for range 60 {
		clk.Advance(time.Minute)
		if err := f.Heartbeat(ctx); err != nil {
			t.Fatalf("at %s: %v", clk.Now(), err)
		}
	}
	if f.Lease().Token != lease.Token || !f.Lease().Expires.After(clk.Now().Add(time.Minute)) {
		t.Fatalf("lease %v at %s", f.Lease(), clk.Now())
	}
	// A holder paused past its margin is not renewed: it stops.
	clk.Advance(2*time.Minute + 30*time.Second)
	if err := f.Heartbeat(ctx); !errors.Is(err, lock.ErrLeaseExpired) {
		t.Fatalf("paused holder: %v", err)
	}
	// Taken over while the holder still thinks it holds it: lost.
	clk.Advance(time.Minute)
	g, err := l.Acquire(ctx, "t", lock.AcquireOptions{Owner: "c", Lease: 3 * time.Minute, MaxWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	fg := lock.NewFence(l, g, clk, 0)
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "t", lock.AcquireOptions{Owner: "b", Lease: 3 * time.Minute, MaxWait: -1}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute + time.Second)
	if err := fg.Heartbeat(ctx); !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("taken over: %v", err)
	}
}
