package clock

import (
	"context"
	"time"
)

// Clock reads and waits on one timeline.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, returning ctx.Err() in that
	// case (d <= 0 returns at once, ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// System is the real clock: time.Now and a timer.
func System() Clock { return system{} }

// Or is c, or the real clock if c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return System()
	}
	return c
}

// Fixed reads t always and sleeps for real: a view of one instant (a
// status report "at now").
func Fixed(t time.Time) Clock { return fixed(t) }

type fixed time.Time

func (f fixed) Now() time.Time { return time.Time(f) }

func (fixed) Sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, d) }

type system struct{}

func (system) Now() time.Time { return time.Now() }

func (system) Sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, d) }

// Sleep is the real wait: a timer, cut short by ctx.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
