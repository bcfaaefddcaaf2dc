package lock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
)

// fakeClock is a clock.Clock whose Sleep advances it at once.
type fakeClock = fakeclock.Clock

func newFakeClock() *fakeClock { return fakeclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) }

// offsetClock reads base shifted by off: a machine with a skewed clock.
type offsetClock struct {
	base *fakeClock
	off  time.Duration
}

func (c offsetClock) Now() time.Time { return c.base.Now().Add(c.off) }

func (c offsetClock) Sleep(ctx context.Context, d time.Duration) error { return c.base.Sleep(ctx, d) }

// store returns lockers sharing one backing store, each on its own clock.
type store func(clock clock.Clock) Locker

// testLocker is the behavioural suite every Locker must pass. newStore is
// called once per subtest.
func testLocker(t *testing.T, newStore func(t *testing.T) store) {
	ctx := context.Background()

	t.Run("exclusive", func(t *testing.T) {
		st, clock := newStore(t), newFakeClock()
		const contenders, rounds = 5, 3
		// The lease is far longer than the fake time waiters can burn polling,
		// so nothing expires: any overlap would be a mutual-exclusion bug.
		opts := AcquireOptions{Lease: 24 * time.Hour, MaxWait: 1000 * time.Hour}
		var holders, maxHolders atomic.Int32
		tokens := make(chan uint64, contenders*rounds)
		var wg sync.WaitGroup
		for i := range contenders {
			lk := st(clock)
			o := opts
			o.Owner = fmt.Sprintf("contender-%d", i)
			wg.Go(func() {
				for range rounds {
					l, err := lk.Acquire(ctx, "exclusive", o)
					if err != nil {
						t.Errorf("%s: acquire: %v", o.Owner, err)
						return
					}
					n := holders.Add(1)
					for {
						m := maxHolders.Load()
						if n <= m || maxHolders.CompareAndSwap(m, n) {
							break
						}
					}
					tokens <- l.Token
					if err := NewFence(lk, l, clock, 0).CheckFence(ctx); err != nil {
						t.Errorf("%s: fence while holding: %v", o.Owner, err)
					}
					runtime.Gosched()
					holders.Add(-1)
					if err := lk.Release(ctx, l); err != nil {
						t.Errorf("%s: release: %v", o.Owner, err)
					}
				}
			})
		}
		wg.Wait()
		close(tokens)
		if m := maxHolders.Load(); m != 1 {
			t.Errorf("max concurrent holders = %d, want 1", m)
		}
		seen := map[uint64]bool{}
		for tok := range tokens {
			if seen[tok] || tok < 1 || tok > contenders*rounds {
				t.Errorf("token %d duplicated or out of 1..%d", tok, contenders*rounds)
			}
			seen[tok] = true
		}
		if len(seen) != contenders*rounds {
			t.Errorf("%d acquisitions, want %d", len(seen), contenders*rounds)
		}
	})

	t.Run("take-over after expiry", func(t *testing.T) {
		st, clock := newStore(t), newFakeClock()
		lk := st(clock)
		a := mustAcquire(t, lk, "t", AcquireOptions{Owner: "a", Lease: 10 * time.Second})
		if _, err := lk.Acquire(ctx, "t", AcquireOptions{Owner: "b", Lease: 10 * time.Second, MaxWait: -1}); !errors.Is(err, ErrLockHeld) {
			t.Fatalf("acquire while held: %v, want ErrLockHeld", err)
		}
		clock.Advance(10 * time.Second) // expiry itself is still held
		if _, err := lk.Acquire(ctx, "t", AcquireOptions{Owner: "b", Lease: 10 * time.Second, MaxWait: -1}); !errors.Is(err, ErrLockHeld) {
			t.Fatalf("acquire at expiry: %v, want ErrLockHeld", err)
		}
		clock.Advance(time.Millisecond)
		b := mustAcquire(t, lk, "t", AcquireOptions{Owner: "b", Lease: 10 * time.Second, MaxWait: -1})
		if b.Token <= a.Token {
			t.Errorf("take-over token %d, want > %d", b.Token, a.Token)
		}
		if _, err := lk.Renew(ctx, a); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale renew: %v, want ErrLeaseLost", err)
		}
		if err := lk.Release(ctx, a); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale release: %v, want ErrLeaseLost", err)
		}
		if err := NewFence(lk, a, clock, 0).CheckFence(ctx); !errors.Is(err, ErrLeaseExpired) {
			t.Errorf("stale fence: %v, want ErrLeaseExpired", err)
		}
		// A stale holder whose clock runs 15 s slow still thinks its lease has
		// 4 s left; the store-side token check catches it.
		slow := offsetClock{clock, -15 * time.Second}
		if err := NewFence(st(slow), a, slow, time.Second).CheckFence(ctx); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale fence on a slow clock: %v, want ErrLeaseLost", err)
		}
		if err := NewFence(lk, b, clock, 0).CheckFence(ctx); err != nil {
			t.Errorf("new holder's fence: %v", err)
		}
		if err := lk.Release(ctx, b); err != nil {
			t.Errorf("release: %v", err)
		}
	})

	t.Run("renew", func(t *testing.T) {
		st, clock := newStore(t), newFakeClock()
		lk := st(clock)
		a := mustAcquire(t, lk, "r", AcquireOptions{Owner: "a", Lease: 10 * time.Second})
		f := NewFence(lk, a, clock, 0)
		clock.Advance(6 * time.Second)
		if err := f.Renew(ctx); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if got, want := f.Lease().Expires, clock.Now().Add(10*time.Second); !got.Equal(want) || f.Lease().Token != a.Token {
			t.Errorf("renewed lease %v, want expiry %v and token %d", f.Lease(), want, a.Token)
		}
		clock.Advance(6 * time.Second) // past the original expiry
		if _, err := lk.Acquire(ctx, "r", AcquireOptions{Owner: "b", Lease: time.Second, MaxWait: -1}); !errors.Is(err, ErrLockHeld) {
			t.Errorf("acquire of a renewed lease: %v, want ErrLockHeld", err)
		}
		if err := f.CheckFence(ctx); err != nil {
			t.Errorf("fence after renew: %v", err)
		}
		clock.Advance(2 * time.Second) // 2 s left, inside the 2.5 s margin
		if err := f.CheckFence(ctx); !errors.Is(err, ErrLeaseExpired) {
			t.Errorf("fence inside the margin: %v, want ErrLeaseExpired", err)
		}
		// Expired but not taken over: renewing is still safe and allowed.
		clock.Advance(5 * time.Second)
		if err := f.Renew(ctx); err != nil {
			t.Errorf("renew after expiry without take-over: %v", err)
		}
		if err := f.CheckFence(ctx); err != nil {
			t.Errorf("fence after late renew: %v", err)
		}
	})

	t.Run("release", func(t *testing.T) {
		st, clock := newStore(t), newFakeClock()
		lk := st(clock)
		a := mustAcquire(t, lk, "rel", AcquireOptions{Owner: "a", Lease: time.Minute})
		forged := *a
		forged.Owner = "mallory"
		if err := lk.Release(ctx, &forged); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("release by non-owner: %v, want ErrLeaseLost", err)
		}
		forged = *a
		forged.Token++
		if err := lk.Release(ctx, &forged); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("release with wrong token: %v, want ErrLeaseLost", err)
		}
		if _, err := lk.Renew(ctx, &forged); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("renew with wrong token: %v, want ErrLeaseLost", err)
		}
		if err := lk.Check(ctx, a); err != nil {
			t.Errorf("owner's check after refused releases: %v", err)
		}
		if err := lk.Release(ctx, a); err != nil {
			t.Fatalf("release: %v", err)
		}
		for name, err := range map[string]error{
			"second release":    lk.Release(ctx, a),
			"check of released": lk.Check(ctx, a),
			"fence of released": NewFence(lk, a, clock, 0).CheckFence(ctx),
		} {
			if !errors.Is(err, ErrLeaseLost) {
				t.Errorf("%s: %v, want ErrLeaseLost", name, err)
			}
		}
		if _, err := lk.Renew(ctx, a); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("renew of released: %v, want ErrLeaseLost", err)
		}
		b := mustAcquire(t, lk, "rel", AcquireOptions{Owner: "b", Lease: time.Minute, MaxWait: -1})
		if b.Token != a.Token+1 {
			t.Errorf("token after release %d, want %d", b.Token, a.Token+1)
		}
		if _, err := lk.Acquire(ctx, "rel", AcquireOptions{Owner: "b", Lease: time.Minute, MaxWait: -1}); !errors.Is(err, ErrLockHeld) {
			t.Errorf("re-acquire by the holder's owner: %v, want ErrLockHeld", err)
		}
		other := mustAcquire(t, lk, "other", AcquireOptions{Owner: "a", Lease: time.Minute, MaxWait: -1})
		if other.Token != 1 {
			t.Errorf("first token of another name = %d, want 1", other.Token)
		}
	})

	t.Run("max wait", func(t *testing.T) {
		st, clock := newStore(t), newFakeClock()
		lk := st(clock)
		mustAcquire(t, lk, "w", AcquireOptions{Owner: "a", Lease: time.Hour})
		for _, tc := range []struct {
			maxWait, want time.Duration
		}{{10 * time.Second, 10 * time.Second}, {0, DefaultMaxWait}, {-1, 0}, {time.Millisecond, time.Millisecond}} {
			start, wall := clock.Now(), time.Now()
			_, err := lk.Acquire(ctx, "w", AcquireOptions{Owner: "b", Lease: time.Minute, MaxWait: tc.maxWait})
			if !errors.Is(err, ErrLockHeld) {
				t.Errorf("MaxWait %v: %v, want ErrLockHeld", tc.maxWait, err)
			}
			if got := clock.Now().Sub(start); got != tc.want {
				t.Errorf("MaxWait %v: gave up after %v of clock time, want %v", tc.maxWait, got, tc.want)
			}
			if d := time.Since(wall); d > 5*time.Second {
				t.Errorf("MaxWait %v: took %v of wall time", tc.maxWait, d)
			}
		}
		// A waiter wakes up right after the holder's lease ends.
		mustAcquire(t, lk, "short", AcquireOptions{Owner: "a", Lease: 3 * time.Second})
		start := clock.Now()
		mustAcquire(t, lk, "short", AcquireOptions{Owner: "b", Lease: time.Minute})
		if got := clock.Now().Sub(start); got <= 3*time.Second || got > 3*time.Second+10*time.Millisecond {
			t.Errorf("acquired an expiring lock after %v, want just over 3s", got)
		}
	})

	t.Run("context and arguments", func(t *testing.T) {
		st, clock := newStore(t), newFakeClock()
		lk := st(clock)
		mustAcquire(t, lk, "c", AcquireOptions{Owner: "a", Lease: time.Hour})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := lk.Acquire(cctx, "c", AcquireOptions{Owner: "b", Lease: time.Minute}); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled acquire: %v, want context.Canceled", err)
		}
		for _, o := range []AcquireOptions{{Lease: time.Minute}, {Owner: "b"}} {
			if _, err := lk.Acquire(ctx, "c", o); err == nil || errors.Is(err, ErrLockHeld) {
				t.Errorf("acquire with %+v: %v, want an argument error", o, err)
			}
		}
		if _, err := lk.Renew(ctx, &Lease{Name: "c"}); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("renew of a zero lease: %v, want ErrLeaseLost", err)
		}
	})
}

func mustAcquire(t *testing.T, lk Locker, name string, opts AcquireOptions) *Lease {
	t.Helper()
	l, err := lk.Acquire(context.Background(), name, opts)
	if err != nil {
		t.Fatalf("acquire %q as %q: %v", name, opts.Owner, err)
	}
	if l.Name != name || l.Owner != opts.Owner || l.Token == 0 || l.Duration != opts.Lease {
		t.Fatalf("acquire %q as %q: odd lease %+v", name, opts.Owner, l)
	}
	return l
}

func TestInProcess(t *testing.T) {
	testLocker(t, func(t *testing.T) store {
		var mu sync.Mutex
		var shared *InProcess
		return func(clock clock.Clock) Locker {
			mu.Lock()
			defer mu.Unlock()
			if shared == nil {
				shared = NewInProcess(clock)
				return shared
			}
			// Same map, another clock.
			return &InProcess{clock: clock, st: shared.st}
		}
	})
}
