package objstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// AIMDLimiter is a token-bucket rate limit (golang.org/x/time/rate) whose
// rate is lowered multiplicatively when the store answers SlowDown and
// raised additively on each success, never above Cap nor below Floor:
// S3's throttling is per partition and changes as S3 repartitions, so the
// rate the store takes is found, not configured. Safe for concurrent use.
type AIMDLimiter struct {
	mu       sync.Mutex
	lim      *rate.Limiter
	cap      float64
	floor    float64
	step     float64
	cooldown time.Duration
	lastCut  time.Time
	clock    clock.Clock
}

// AIMDOptions configure NewAIMDLimiter. Zero values take the defaults.
type AIMDOptions struct {
	Cap   float64 // the most events per second (and the starting rate)
	Floor float64 // the least (default Cap/64)
	Step  float64 // added per success (default Cap/100)
	Burst int     // bucket size; the largest single WaitN (default max(1, Cap/10))
	// Cooldown is the least time between two decreases (default 1s): a
	// burst of SlowDown answers to requests sent together is one signal,
	// not one halving each.
	Cooldown time.Duration
	// Clock defaults to real time; tests pass a fake clock.
	Clock clock.Clock
}

// NewAIMDLimiter returns a limiter starting at o.Cap.
func NewAIMDLimiter(o AIMDOptions) *AIMDLimiter {
	if o.Cap <= 0 {
		o.Cap = 1
	}
	if o.Floor <= 0 || o.Floor > o.Cap {
		o.Floor = o.Cap / 64
	}
	if o.Step <= 0 {
		o.Step = o.Cap / 100
	}
	if o.Burst <= 0 {
		o.Burst = max(1, int(o.Cap/10))
	}
	if o.Cooldown <= 0 {
		o.Cooldown = time.Second
	}
	return &AIMDLimiter{
		lim: rate.NewLimiter(rate.Limit(o.Cap), o.Burst), cap: o.Cap, floor: o.Floor, step: o.Step,
		cooldown: o.Cooldown, clock: clock.Or(o.Clock),
	}
}

// Wait blocks until n events may happen (n above the burst is clamped to it:
// one request is never refused, only paced).
func (l *AIMDLimiter) Wait(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n = min(n, l.lim.Burst())
	now := l.clock.Now()
	r := l.lim.ReserveN(now, n)
	if !r.OK() {
		return fmt.Errorf("rate limiter: cannot reserve %d", n)
	}
	if d := r.DelayFrom(now); d > 0 {
		if err := l.clock.Sleep(ctx, d); err != nil {
			r.CancelAt(l.clock.Now())
			return err
		}
	}
	return nil
}

// SlowDown halves the rate (not below Floor), at most once per Cooldown.
func (l *AIMDLimiter) SlowDown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if !l.lastCut.IsZero() && now.Sub(l.lastCut) < l.cooldown {
		return
	}
	l.lastCut = now
	l.lim.SetLimitAt(now, rate.Limit(max(l.floor, float64(l.lim.Limit())/2)))
}

// Success raises the rate by Step (not above Cap).
func (l *AIMDLimiter) Success() {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := float64(l.lim.Limit())
	if cur >= l.cap {
		return
	}
	l.lim.SetLimitAt(l.clock.Now(), rate.Limit(min(l.cap, cur+l.step)))
}

// Rate is the current rate, events per second.
func (l *AIMDLimiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.lim.Limit())
}
