package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RenewDue renews the lease if at least a third of its duration has passed
// since it was acquired or last renewed (by the fence's clock), so a holder
// calling it at every step of its work keeps two thirds of a lease ahead of
// it. It never renews a lease already within the fence's margin of its end
// (a holder paused that long stops; CheckFence refuses its next write). It
// returns the locker's error; one wrapping ErrLeaseLost means somebody
// else holds the lock now.
func (f *Fence) RenewDue(ctx context.Context) error {
	l := f.Lease()
	now := f.clock.Now()
	if !l.Valid(now.Add(f.margin)) {
		return nil
	}
	if l.Expires.Sub(now) > l.Duration-l.Duration/3 {
		return nil
	}
	if err := f.Renew(ctx); err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	return nil
}

// Heartbeat renews the lease when due (RenewDue) and then checks the fence
// (CheckFence): the check to make before every step and every write done
// under the lock. A failed renewal that did not lose the lease (a timeout,
// say) is not an error by itself: the check decides.
func (f *Fence) Heartbeat(ctx context.Context) error {
	if err := f.RenewDue(ctx); errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("fence: %w", err)
	}
	return f.CheckFence(ctx)
}

// KeepAlive calls RenewDue every interval of real time until ctx is done
// or the lease is lost, so a single long step (one compaction group) does
// not outlive the lease. Run it in its own goroutine; it returns the error
// that ended it (ctx.Err() when stopped).
func (f *Fence) KeepAlive(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = f.Lease().Duration / 6
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := f.RenewDue(ctx); errors.Is(err, ErrLeaseLost) {
				return err
			}
		}
	}
}
