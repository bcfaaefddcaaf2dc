// Package fakeclock is the settable clock tests inject wherever code takes
// a clock (lock.Clock, table.Options.Clock, queue.EmbeddedOptions.Now): time
// moves only when a test advances it, or when code under test sleeps on it.
package fakeclock

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Clock is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Sleep advances the clock by d at once instead of waiting, and yields so
// that other goroutines (a lock holder, say) make progress meanwhile.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	runtime.Gosched()
	return nil
}
