package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// Sentinel errors; implementations wrap them with the lock name.
var (
	// ErrLockHeld: somebody else held the lock for the whole of MaxWait.
	ErrLockHeld = errors.New("lock held by another owner")
	// ErrLeaseLost: the store no longer has this lease (it was taken over after
	// expiring, released, or the caller is not its owner).
	ErrLeaseLost = errors.New("lease lost")
	// ErrLeaseExpired: the lease has expired (or is about to, within the fence's
	// safety margin) by the local clock.
	ErrLeaseExpired = errors.New("lease expired")
)

// DefaultMaxWait is how long Acquire waits for a held lock when
// AcquireOptions.MaxWait is zero.
const DefaultMaxWait = 10 * time.Second

// Polling backoff while waiting for a held lock: it starts at minPoll, doubles
// up to maxPoll, is jittered by up to -25%, and never sleeps past the holder's
// expiry (when known) or past MaxWait.
const (
	minPoll = 50 * time.Millisecond
	maxPoll = time.Second
)

// Locker acquires, renews and releases named leases.
type Locker interface {
	// Acquire takes the lock called name for opts.Owner, waiting at most
	// opts.MaxWait for a current holder to release it or let it expire. It
	// returns an error wrapping ErrLockHeld if the lock stayed held.
	Acquire(ctx context.Context, name string, opts AcquireOptions) (*Lease, error)
	// Renew extends l by its Duration from now and returns the extended lease.
	// It fails with ErrLeaseLost unless l is still the store's current lease
	// for its name (same owner and token). A lease that expired but was not
	// taken over can still be renewed: nobody else has held it in between.
	Renew(ctx context.Context, l *Lease) (*Lease, error)
	// Release gives the lock up. It fails with ErrLeaseLost unless l is the
	// store's current lease; the token sequence of the name is kept.
	Release(ctx context.Context, l *Lease) error
	// Check is a cheap read confirming that l is still the store's current
	// lease: ErrLeaseLost if not, ErrLeaseExpired if it is but its expiry has
	// passed by the locker's clock.
	Check(ctx context.Context, l *Lease) error
}

// AcquireOptions configure one Acquire call.
type AcquireOptions struct {
	// Owner identifies the holder in the store and in errors (for example
	// host/pid or the Lambda request id). Required. Owners need not be unique:
	// the token tells leases apart, and an owner cannot re-acquire a lock it
	// still holds (it renews it instead).
	Owner string
	// Lease is how long the lease lasts from acquisition or renewal. Required.
	Lease time.Duration
	// MaxWait bounds how long Acquire waits for the lock: zero means
	// DefaultMaxWait, negative means a single attempt.
	MaxWait time.Duration
}

func (o AcquireOptions) validate(name string) error {
	if name == "" {
		return errors.New("lock: empty lock name")
	}
	if o.Owner == "" {
		return fmt.Errorf("lock %q: empty owner", name)
	}
	if o.Lease <= 0 {
		return fmt.Errorf("lock %q: lease duration %v must be positive", name, o.Lease)
	}
	return nil
}

// Lease is one holding of a lock.
type Lease struct {
	Name  string
	Owner string
	// Token is the fencing token: it strictly increases with every
	// acquisition of Name (a DynamoDB item removed by TTL restarts it, which
	// only happens long after any lease on it expired).
	Token uint64
	// Expires is when the lease ends unless renewed (millisecond precision,
	// as stored).
	Expires time.Time
	// Duration is the lease length Renew extends it by.
	Duration time.Duration
}

// Valid reports whether the lease has not expired at now.
func (l *Lease) Valid(now time.Time) bool {
	return l != nil && now.Before(l.Expires)
}

func (l *Lease) String() string {
	return fmt.Sprintf("lock %q owner %q token %d expires %s", l.Name, l.Owner, l.Token, l.Expires.UTC().Format(time.RFC3339Nano))
}

func (l *Lease) validate() error {
	if l == nil || l.Name == "" || l.Owner == "" || l.Token == 0 {
		return fmt.Errorf("%w: not a lease returned by Acquire: %v", ErrLeaseLost, l)
	}
	return nil
}

// heldError is what an attempt returns when somebody else holds the lock. It
// wraps ErrLockHeld; until (zero if unknown) lets the wait loop sleep no longer
// than the holder's lease.
type heldError struct {
	name, owner string
	token       uint64
	until       time.Time
}

func (e *heldError) Error() string {
	if e.owner == "" {
		return fmt.Sprintf("lock %q: %v", e.name, ErrLockHeld)
	}
	return fmt.Sprintf("lock %q: %v: owner %q token %d until %s", e.name, ErrLockHeld, e.owner, e.token, e.until.UTC().Format(time.RFC3339Nano))
}

func (e *heldError) Unwrap() error { return ErrLockHeld }

// acquireLoop calls try until it succeeds, fails with something other than
// ErrLockHeld, or MaxWait (measured on clock) runs out. try is called at least
// once; the last attempt happens at the deadline, never after it.
func acquireLoop(ctx context.Context, clock clock.Clock, name string, opts AcquireOptions, try func(now time.Time) (*Lease, error)) (*Lease, error) {
	if err := opts.validate(name); err != nil {
		return nil, err
	}
	wait := opts.MaxWait
	if wait == 0 {
		wait = DefaultMaxWait
	}
	start := clock.Now()
	deadline := start.Add(wait)
	backoff := minPoll
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lock %q: acquire: %w", name, err)
		}
		now := clock.Now()
		l, err := try(now)
		if err == nil {
			return l, nil
		}
		var held *heldError
		if !errors.As(err, &held) {
			return nil, err
		}
		remaining := deadline.Sub(now)
		if remaining <= 0 {
			return nil, fmt.Errorf("%w (waited %s)", err, now.Sub(start))
		}
		d := backoff - time.Duration(rand.Int64N(int64(backoff/4)+1))
		if !held.until.IsZero() {
			// Wake up right after the holder's lease ends rather than later.
			if untilFree := held.until.Sub(now) + time.Millisecond; untilFree > 0 && untilFree < d {
				d = untilFree
			}
		}
		d = min(d, remaining)
		if err := clock.Sleep(ctx, d); err != nil {
			return nil, fmt.Errorf("lock %q: acquire: %w", name, err)
		}
		backoff = min(2*backoff, maxPoll)
	}
}

// expiryFor is when a lease taken or renewed at now ends, at the millisecond
// precision the stores keep.
func expiryFor(now time.Time, d time.Duration) time.Time {
	return time.UnixMilli(now.Add(d).UnixMilli())
}

// AheadClock reads Clock shifted forward by Ahead. Demos and tests use it to
// act as if a grace window had passed; deployments never should.
type AheadClock struct {
	clock.Clock
	Ahead time.Duration
}

// Now is the underlying clock's time plus Ahead.
func (c AheadClock) Now() time.Time { return c.Clock.Now().Add(c.Ahead) }
