package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// Fencer is what a commit path needs from a lock: CheckFence right before
// each commit returns nil only if the lock is still held.
type Fencer interface {
	CheckFence(ctx context.Context) error
}

// Fence is a held lease as seen by the code doing work under it. It is safe
// for concurrent use (a renewer and a committer may share it).
type Fence struct {
	locker Locker
	clock  clock.Clock
	margin time.Duration

	mu    sync.Mutex
	lease *Lease
}

var _ Fencer = (*Fence)(nil)

// NewFence wraps a lease just acquired from locker. margin is how long before
// the lease's expiry CheckFence already refuses: it must cover the time from
// the check to the end of the commit plus the clock skew between machines.
// Zero means a quarter of the lease duration.
func NewFence(locker Locker, lease *Lease, clock clock.Clock, margin time.Duration) *Fence {
	if margin <= 0 {
		margin = lease.Duration / 4
	}
	return &Fence{locker: locker, clock: clock, margin: margin, lease: lease}
}

// Lease returns the current lease (it changes on Renew).
func (f *Fence) Lease() *Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lease
}

// CheckFence returns an error wrapping ErrLeaseExpired if the lease ends
// within the margin by the local clock, or the error of the locker's Check
// (ErrLeaseLost once somebody else has acquired the lock).
func (f *Fence) CheckFence(ctx context.Context) error {
	l := f.Lease()
	if now := f.clock.Now(); !l.Valid(now.Add(f.margin)) {
		return fmt.Errorf("%v: %w (%s left, margin %s)", l, ErrLeaseExpired, l.Expires.Sub(now), f.margin)
	}
	if err := f.locker.Check(ctx, l); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	return nil
}

// Renew extends the lease through the locker and keeps the extended one.
func (f *Fence) Renew(ctx context.Context) error {
	l, err := f.locker.Renew(ctx, f.Lease())
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.lease = l
	f.mu.Unlock()
	return nil
}
