package lock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestSkewWithinMargin: two holders whose clocks differ by less than the
// fence margin. Whenever the second can take the lock over (its clock says
// the first's lease expired), the first's fence already refuses on its own
// clock (ErrLeaseExpired), before the store-side token check is needed; and
// until margin before its expiry the holder's fence passes. Skew beyond the
// margin is caught by the token ("take-over after expiry" in suite_test.go).
func TestSkewWithinMargin(t *testing.T) {
	ctx := context.Background()
	const lease, margin = time.Minute, 15 * time.Second
	for _, skew := range []time.Duration{-14 * time.Second, -5 * time.Second, 0, 5 * time.Second, 14 * time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			truth := newFakeClock()
			b := NewInProcess(truth)                 // on the true clock
			aClock := offsetClock{truth, skew}       // the first holder's clock
			a := &InProcess{clock: aClock, st: b.st} // same store, skewed clock
			la := mustAcquire(t, a, "t", AcquireOptions{Owner: "a", Lease: lease})
			fa := NewFence(a, la, aClock, margin)
			// The expiry was computed on A's clock, so A's fence passes until
			// margin before it whatever the skew.
			truth.Advance(lease - margin - time.Second)
			if err := fa.CheckFence(ctx); err != nil {
				t.Fatalf("holder's fence 1s before its margin: %v", err)
			}
			// B's clock: not yet expired, so no take-over.
			if _, err := b.Acquire(ctx, "t", AcquireOptions{Owner: "b", Lease: lease, MaxWait: -1}); !errors.Is(err, ErrLockHeld) {
				t.Fatalf("take-over before expiry: %v", err)
			}
			// Advance until B can take over; at every step A's fence refuses
			// once B holds.
			for {
				truth.Advance(time.Second)
				lb, err := b.Acquire(ctx, "t", AcquireOptions{Owner: "b", Lease: lease, MaxWait: -1})
				if errors.Is(err, ErrLockHeld) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := fa.CheckFence(ctx); !errors.Is(err, ErrLeaseExpired) {
					t.Fatalf("skew %s: stale holder's fence after take-over: %v, want ErrLeaseExpired on its own clock", skew, err)
				}
				if lb.Token <= la.Token {
					t.Fatalf("token %d after %d", lb.Token, la.Token)
				}
				return
			}
		})
	}
}
